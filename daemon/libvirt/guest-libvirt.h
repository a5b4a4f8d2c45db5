/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libvirt domains as the manager's guests: the join between the libvirt backend
 * (libvirt-backend.h) and the guests the manager arbitrates (guest.h).
 *
 * - Every domain the backend reports becomes a Guest with source "libvirt", named after the
 *   domain and carrying its UUID; it is driven from here, never through the QMP socket that
 *   libvirt owns. A domain the backend skips (no balloon, <memballoon model='none'>, VFIO,
 *   migration) is listed as faulty with "skipped: REASON" and never touched.
 * - Its policy is the one its metadata names (<rightsize:policy>), else the policy whose globs
 *   match its name or UUID, as for QMP guests.
 * - One timer drives every libvirt guest: each tick queues one bulk stats call
 *   (virConnectGetAllDomainStats) for all the guests whose poll interval is due, on the
 *   backend's worker thread, and feeds each guest's sample when it returns. While it has not
 *   returned, ticks are skipped; after 3 of them the guests are faulty ("libvirt not
 *   answering") until it does, or until the stall watchdog cuts it and the reconnect attaches
 *   them again. Actuation goes through the backend's worker too (balloon, virtio-mem for
 *   policies that use it, DIMMs): a driver call returns once queued, and a failure puts the
 *   guest's previous target back.
 * - With [libvirt] agent=yes, a domain with the guest-agent channel also gets /proc/vmstat and
 *   PSI, read on the agent worker thread (libvirt-agent.h); the cycle waits for it at most
 *   3/4 of the poll interval, then goes on without it.
 * - When libvirtd goes away, the guests show the fault and keep the size they were last
 *   given; the backend reconnects with backoff and they carry on. */
#pragma once

#include "daemon/conf.h"
#include "daemon/guest-source.h"
#include "daemon/libvirt/libvirt-backend.h"

typedef struct LibvirtGuests LibvirtGuests;

/* The manager drives it as a guest source (guest-source.h, registered in guest-sources.c): */
extern const GuestSourceOps libvirt_guest_source;

/* Connects (or keeps trying to, with backoff) to config's URI. `config` must live until the
 * next libvirt_guests_reload() or libvirt_guests_free(). */
int libvirt_guests_new(sd_event *event, const Config *config, const GuestSourceOwner *owner, void *userdata,
                       LibvirtGuests **ret);
/* Removes every libvirt guest from its owner (which saves its state). */
LibvirtGuests *libvirt_guests_free(LibvirtGuests *lg);

/* Whether the running instance was made for these settings (a reload otherwise restarts it). */
bool libvirt_guests_config_matches(const LibvirtGuests *lg, const Config *c);
/* After a reload, with the new configuration: the policies are selected again. */
void libvirt_guests_reload(LibvirtGuests *lg, const Config *config);

/* Offers the domain to the manager again (add_guest() refused it while its name was taken):
 * nothing when libvirt no longer has it, or it is managed already. */
void libvirt_guests_retry_domain(LibvirtGuests *lg, const char *uuid);

/* rightsizectl enable|disable: writes (policy != NULL) or removes the domain's metadata,
 * live and persistently, on the daemon's connection. -ENOTCONN while libvirtd is away,
 * -ENOENT for no such domain, -EINVAL for an invalid policy name. */
int libvirt_guests_set_domain_policy(LibvirtGuests *lg, const char *domain, const char *policy);
