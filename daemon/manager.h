/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The daemon's logic: configuration and policies, the guests every guest source (guest-source.h) finds,
 * host arbitration over every guest's latest wish, state files, the metrics file, and the
 * service manager's STATUS/READY/WATCHDOG. The D-Bus layer (manager-bus.c) is a thin shell
 * over the functions declared here. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "daemon/conf.h"
#include "daemon/group-cache.h"
#include "daemon/guest.h"
#include "daemon/host/host.h"
#include "policies/policy-file.h"

/* A guest's share of the host as the last arbitration computed it (manager.c). */
typedef struct ManagerShare {
        RsArbiterGuest in;      /* the inputs it was computed from */
        uint64_t arbitrated;
        uint64_t stamp;         /* the host reading it belongs to, 0: none */
        bool short_of_memory;   /* the host was short at that computation */
} ManagerShare;

/* A guest turned away because another one already has its name (manager.c): both would have
 * shared a state file, a metrics series and a D-Bus record. Kept so that the operator sees it
 * (RefusedGuests) and so that it is taken on once the name is free. */
typedef struct RefusedGuest {
        char *name;
        GuestSource source;    /* which source to ask for it again */
        char *origin;          /* where that source finds it (guest_origin()) */
        char *where;           /* the refused guest, in words: "QMP socket PATH", "libvirt domain UUID" */
        char *owner_where;     /* the guest that has the name, in the same words */
} RefusedGuest;

/* A time the D-Bus API was unavailable (manager-bus.c): realtime µs, and why. */
typedef struct ApiOutage {
        uint64_t start;       /* 0: none */
        uint64_t end;
        char reason[256];     /* the failure that began it */
} ApiOutage;

typedef struct Manager {
        sd_event *event;
        char *config_path;
        bool config_optional;  /* the default path: a missing main file means the defaults */
        Config *config;
        RsPolicySet policies;
        /* Each guest source's instance (guest-source.h), by GuestSource: NULL when off
         * ([libvirt] enabled=no) or unavailable. */
        void *sources[_GUEST_SOURCE_MAX];

        Guest **guests;
        struct ManagerShare *shares; /* the arbitration's cached shares, parallel to guests */
        bool arbitration_failed;     /* said once: the guests get their wishes until it works */
        size_t n_guests;
        RefusedGuest *refused;       /* guests turned away for a name in use */
        size_t n_refused;
        sd_event_source *take_on_refused; /* deferred: a name was freed */

        HostMemory host;
        uint64_t host_read_usec;

        uint64_t metrics_written_usec;
        unsigned status_guests;
        uint64_t status_reclaimed;

        sd_bus *bus;
        sd_bus_slot *bus_slot;
        struct BusPolkitRegistry *polkit_registry; /* changes by non-root callers (bus-polkit.h) */
        GroupCache read_group_cache;  /* read-group's gid: no NSS lookup per D-Bus read */
        /* The API is up once the name is ours; until then, and after a disconnection, the bus is
         * retried on a timer while the guests are managed as ever (manager-bus.c). */
        bool bus_owned;
        char bus_error[256];          /* why the API is down now, "" while up (or at the first try) */
        sd_event_source *bus_retry;
        uint64_t bus_retry_usec;      /* the delay before the next retry */
        ApiOutage api_outage;         /* the one going on, start 0 when none */
        ApiOutage last_api_outage;    /* the last one that ended, start 0 when none */
        unsigned n_api_outages;       /* ended since the daemon started */

        int state_lock_fd;            /* holds the state directory's lock (state-lock.h), or -1 */
        sd_event_source *state_age_timer; /* removes the state files of guests long gone */
        bool bus_name_taken;          /* another process owns the bus name: this daemon must go */
        bool started;                 /* manager_start() is done: guests may be managed */
        int exit_error;               /* -errno the daemon exits with once stopped, or 0 */

        bool stopping;
        unsigned shutdown_pending;
        sd_event_source *shutdown_timer;
} Manager;

/* Takes ownership of config. */
int manager_new(sd_event *event, const char *config_path, Config *config, Manager **ret);
Manager *manager_free(Manager *m);
static inline void manager_freep(Manager **m) {
        if (*m)
                manager_free(*m);
}

/* Loads the policies (an invalid one is an error), starts the guest sources and the bus. */
int manager_start(Manager *m);

/* Re-reads the config file and the policy directory. On failure (-EINVAL, -errno) everything
 * stays as it was and *ret_error (if given) names the file, line and key. */
int manager_reload(Manager *m, char **ret_error);

/* Leaves every guest at the shutdown action's size, saves state, and exits the loop when
 * the commands completed (or after a short timeout). */
void manager_shutdown(Manager *m);

/* The D-Bus API went down or came back (manager-bus.c): STATUS= says so at once. */
void manager_api_changed(Manager *m);
/* Why the D-Bus API is down, for STATUS=; NULL while it is up. */
const char *manager_api_error(const Manager *m);

Guest *manager_find_guest(Manager *m, const char *name);
/* A guest to manage (a QMP socket's or a libvirt domain's): -EEXIST, logged and kept in
 * m->refused, when another guest has its name. */
int manager_add_guest(Manager *m, Guest *g);
/* Sum over guests of (max − actual). */
uint64_t manager_reclaimed(const Manager *m);
unsigned manager_guests_managed(const Manager *m);

/* The policy for a guest: the one named `policy_name` when given (a policy file, else a
 * preset), otherwise the first whose globs match guest_name or uuid, else balanced. -ENOENT
 * when policy_name names no policy (*ret is then the fallback), else 0. */
int manager_resolve_policy(Manager *m, const char *policy_name, const char *guest_name, const char *uuid,
                           RsPolicy *ret);

/* Operator changes (root-only through the bus). -ENOENT for an unknown policy name. */
int manager_set_guest_policy(Manager *m, Guest *g, const char *policy_name);

/* Whether libvirt guests are enabled ([libvirt] enabled=yes). */
bool manager_has_libvirt(const Manager *m);
/* Writes (or with NULL removes) a domain's opt-in metadata: -ENOENT no such domain, -EINVAL a
 * bad policy name, -ENOTCONN not connected to libvirt (or libvirt guests disabled). */
int manager_set_domain_policy(Manager *m, const char *domain, const char *policy_name);
/* A guest's next-boot size in its persistent definition (libvirt's <currentMemory>) and its
 * most (<memory>), bytes; and writing the next-boot size (the live size is not touched).
 * -EOPNOTSUPP for a guest without one (QMP guests, transient domains), -ENOENT, -ENOTCONN. */
int manager_get_boot_size(Manager *m, Guest *g, uint64_t *ret_current, uint64_t *ret_memory);
int manager_set_boot_size(Manager *m, Guest *g, uint64_t bytes);

/* Loads a policy directory into a fresh set. The number of bad files, each logged (and the
 * first one's message in *ret_error), or -errno. */
int manager_load_policies(const char *dir, RsPolicySet *ret, char **ret_error);
/* -ENOENT, with the message, when the config's unmatched-policy is neither in the set nor a preset. */
int manager_check_unmatched_policy(const RsPolicySet *set, const Config *config, char **ret_error);
