/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where guests come from: each transport's room (daemon/qemu/: QMP sockets that appear on disk;
 * daemon/libvirt/: libvirt's domains) implements one GuestSourceOps, and the manager drives every
 * source alike through it: started, reloaded, asked again for a guest it refused, freed. A source
 * creates its guests (guest.h) and hands them to its owner through GuestSourceOwner, so that it
 * edits none of the owner's data and includes none of its headers.
 *
 * The sources are listed in one place, guest-sources.c: the one file of the core that names the
 * rooms, so that no other core file includes a room's header. */
#pragma once

#include <stdbool.h>
#include <systemd/sd-event.h>

#include "daemon/conf.h"
#include "daemon/guest.h"

/* What a source needs of its owner (the manager); userdata is the owner's, given to new(). */
typedef struct GuestSourceOwner {
        /* The hooks and userdata every Guest the source creates gets (guest_new()). */
        const GuestHooks *guest_hooks;
        /* The policy for a guest: the one policy_name names (NULL: none does), else the one
         * whose globs match its name or UUID. -ENOENT when policy_name names no policy (*ret is
         * then the fallback). */
        int (*resolve_policy)(void *userdata, const char *policy_name, const char *name, const char *uuid,
                              RsPolicy *ret);
        /* A guest to manage (-EEXIST: refused, its name is another guest's; the owner keeps it
         * by its origin and may ask the source for it again with retry()). The owner takes the
         * guest on success only. */
        int (*add_guest)(void *userdata, Guest *g);
        /* One of the source's guests goes: saved and freed by the owner. */
        void (*remove_guest)(void *userdata, Guest *g);
        /* A guest add_guest() refused went away (origin: as guest_origin() says it). */
        void (*refused_gone)(void *userdata, const char *origin);
        /* The daemon is shutting down: no new guests, no new work. */
        bool (*stopping)(void *userdata);
} GuestSourceOwner;

/* What a source does for its owner. An instance is the source's own (void *). */
typedef struct GuestSourceOps {
        GuestSource source;
        /* Starts finding guests as config says (which lives until the next reload()). *ret is
         * NULL when config turns the source off, or when it is unavailable and the daemon can
         * do without it (said in the log). -errno, logged: the daemon cannot start. */
        int (*new)(sd_event *event, const Config *config, const GuestSourceOwner *owner, void *userdata,
                   void **ret);
        /* Stops finding guests. A guest it takes away goes through remove_guest(); the ones it
         * leaves with the owner (a QMP guest's socket is still there) are the owner's to free. */
        void (*free)(void *source);
        /* After the owner took a new configuration: the source's guests get their policies
         * selected again, and the source follows the new settings, starting over when it must
         * (so *source may change, and be NULL when it is now off). Failures are logged. */
        void (*reload)(void **source, sd_event *event, const Config *config, const GuestSourceOwner *owner,
                       void *userdata);
        /* A guest refused for its name may be taken on now: the source offers it again when
         * it still has it (origin as guest_origin() said it; name the name it was refused for). */
        void (*retry)(void *source, const char *origin, const char *name);
        /* rightsizectl enable|disable: writes (policy != NULL) or removes the policy a guest
         * keeps with its definition. NULL: the source keeps none. -ENOENT no such guest,
         * -EINVAL a bad policy name, -ENOTCONN not reachable now. */
        int (*set_kept_policy)(void *source, const char *guest, const char *policy);
        /* rightsizectl recommend: the guest's persistent definition's next-boot size and its
         * most (bytes), and writing the next-boot size there (not the live one). NULL: the
         * source keeps no definition (a QMP guest's is its command line). -ENOENT no such guest,
         * -EOPNOTSUPP no persistent definition, -ENOTCONN not reachable now. */
        int (*get_boot_size)(void *source, const char *guest, uint64_t *ret_current, uint64_t *ret_memory);
        int (*set_boot_size)(void *source, const char *guest, uint64_t bytes);
} GuestSourceOps;

/* guest-sources.c: every source, indexed by GuestSource. */
extern const GuestSourceOps *const guest_sources[_GUEST_SOURCE_MAX];
