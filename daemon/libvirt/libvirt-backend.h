/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt backend: rightsize's view of libvirt-managed guests, through libvirt's C API only
 * (never the QMP socket libvirt owns, so `virsh dominfo` stays true).
 *
 * - One connection (default qemu:///system), opened on a thread (libvirt-connect.h): a hung
 *   libvirtd never answers an open, and the loop must not wait with it. Once open, a call that
 *   holds the loop or the worker for the call timeout (call_timeout_usec, 15 s by default) is
 *   cut by the stall watchdog (libvirt-watchdog.h): libvirt's keepalive does not end it. When
 *   libvirtd goes away (or the connection is cut) the close callback fires, and the backend
 *   reconnects with backoff (0.25 s doubling to 30 s). Domain records survive a
 *   reconnect; after it, active domains are matched by UUID, domains gone meanwhile are
 *   reported removed, new ones added. The manager keeps its last targets meanwhile: actuators
 *   return -ENOTCONN.
 * - Domains: every active domain that opts in through the metadata element (libvirt-parse.h),
 *   or every active domain with manage_all. Followed through lifecycle events (started,
 *   stopped, crashed, migrated), METADATA_CHANGE (rightsizectl enable/disable), BALLOON_CHANGE
 *   and MEMORY_DEVICE_SIZE_CHANGE.
 * - A domain rightsize cannot manage is still reported, with a skip reason: no balloon,
 *   <memballoon model='none'>, VFIO passthrough, or a migration in progress.
 * - Stats: virDomainSetMemoryStatsPeriod once per domain, then one
 *   virConnectGetAllDomainStats(VIR_DOMAIN_STATS_BALLOON) per tick for all domains.
 *
 * Domains are named by their UUID string. Threads: libvirt's calls are synchronous RPCs, and a
 * hung libvirtd never answers them. So the periodic ones, the stats (with the QEMU-monitor and
 * balloon-size reads that go with them) and the actuators, have _async variants that run on the
 * backend's worker thread (libvirt-worker.h) and report on the loop: one stats call in flight
 * at a time, and per domain at most one queued balloon and one queued virtio-mem call (the
 * latest target wins). Their synchronous variants run on the caller's thread (the daemon uses
 * them only when stopping). What stays on the loop: the domain refresh on events (XML,
 * metadata, info; guarded by the watchdog's loop heartbeat), connection setup after the open,
 * and rightsizectl enable/disable. Events arrive from the sd-event loop given to
 * libvirt_backend_new(). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "daemon/libvirt/libvirt-parse.h"
#include "common/procfs.h"

typedef struct LibvirtBackend LibvirtBackend;

typedef struct LibvirtDomainInfo {
        const char *uuid;
        const char *name;
        const char *policy;        /* from the metadata; NULL: none (manage_all: the default policy) */
        const char *skip_reason;   /* NULL when rightsize may act on it */
        bool agent_channel;        /* has org.qemu.guest_agent.0 (the agent may still be down) */
        bool free_page_reporting;
        bool autodeflate;           /* <memballoon autodeflate='on'>: QEMU's deflate-on-oom */
        uint64_t maximum;          /* bytes: the balloon's ceiling (<memory> minus virtio-mem) */
        uint64_t actual;           /* bytes the balloon leaves the guest (without virtio-mem, as
                                    * BALLOON_CHANGE reports it; virsh dominfo adds virtio-mem) */
        /* DIMM hotplug room: <maxMemory> and its slots (0: none), what memory devices take
         * of them; maximum counts the DIMMs (the balloon covers them). */
        uint64_t max_memory;
        unsigned memory_slots;
        uint64_t devices_bytes, dimm_bytes;
        unsigned dimm_count;
        bool numa;                 /* a NUMA cell for a DIMM to go to (libvirt requires one) */
        const char *virtio_mem_alias; /* NULL when there is no virtio-mem device */
        uint64_t virtio_mem_size, virtio_mem_block, virtio_mem_requested, virtio_mem_current;
} LibvirtDomainInfo;

typedef struct LibvirtBackendCallbacks {
        /* A domain appeared (started, discovered, opted in), or, with `changed`, its policy or
         * skip reason changed. */
        void (*domain_added)(LibvirtBackend *b, const LibvirtDomainInfo *info, bool changed, void *userdata);
        /* why: "stopped", "crashed", "migrated away", "opted out", "gone while disconnected". */
        void (*domain_removed)(LibvirtBackend *b, const char *uuid, const char *name, const char *why, void *userdata);
        /* BALLOON_CHANGE: the balloon reached a new size. */
        void (*balloon_changed)(LibvirtBackend *b, const char *uuid, uint64_t actual, void *userdata);
        /* MEMORY_DEVICE_SIZE_CHANGE: a virtio-mem device's plugged size. */
        void (*memory_device_changed)(LibvirtBackend *b, const char *uuid, const char *alias, uint64_t size, void *userdata);
        /* The connection came up (again) or went down. */
        void (*connection_changed)(LibvirtBackend *b, bool connected, void *userdata);
} LibvirtBackendCallbacks;

typedef struct LibvirtBackendConfig {
        const char *uri;           /* NULL: qemu:///system */
        bool manage_all;           /* manage domains without the metadata element too */
        unsigned stats_period;     /* seconds, for virDomainSetMemoryStatsPeriod; 0: 1 */
        uint64_t call_timeout_usec; /* the stall watchdog's limit for one call; 0: 15 s */
} LibvirtBackendConfig;

/* Registers the sd-event implementation with libvirt (libvirt-event.h) and starts connecting:
 * connection_changed tells when it is up. A failed connection is not an error: the backend
 * keeps retrying. */
int libvirt_backend_new(sd_event *event, const LibvirtBackendConfig *config, const LibvirtBackendCallbacks *callbacks,
                        void *userdata, LibvirtBackend **ret);
LibvirtBackend *libvirt_backend_free(LibvirtBackend *b);
static inline void libvirt_backend_freep(LibvirtBackend **b) {
        libvirt_backend_free(*b);
}

bool libvirt_backend_is_connected(const LibvirtBackend *b);
/* Connected, and the connection not seen closed (a local check, no call to libvirtd). */
bool libvirt_backend_is_alive(const LibvirtBackend *b);
unsigned libvirt_backend_connect_count(const LibvirtBackend *b);
/* The domain's record (NULL if not known). Valid until the next call into the backend. */
const LibvirtDomainInfo *libvirt_backend_get_domain(LibvirtBackend *b, const char *uuid);

typedef void (*libvirt_stats_fn)(LibvirtBackend *b, const char *uuid, const char *name, const LibvirtStats *stats,
                                 void *userdata);
/* One bulk stats call for every active domain, on the caller's thread; `callback` runs for each
 * known domain without a skip reason. Returns the number of domains reported, or -errno
 * (-ENOTCONN). */
int libvirt_backend_collect_all(LibvirtBackend *b, libvirt_stats_fn callback, void *userdata);

/* A domain's part of an asynchronous stats call: what is asked (uuid, want_monitor,
 * balloon_target) and what came back. */
typedef struct LibvirtDomainStats {
        char uuid[VIR_UUID_STRING_BUFLEN];
        /* Also the balloon's guest-stats through the QEMU monitor (virDomainQemuMonitorCommand,
         * a qom-get of QMP_BALLOON_QOM_PATH): the stats libvirt does not map. libvirt marks the
         * domain tainted (custom-monitor): only when the policy allows it. */
        bool want_monitor;
        /* > 0: the balloon's target (the guest's total, virtio-mem included). When balloon.current
         * is away from it, QEMU's balloon size is read directly (virDomainMemoryStats' actual):
         * balloon.current follows BALLOON_CHANGE, which QEMU sends at most once a second. */
        uint64_t balloon_target;

        const char *name;          /* on return: the domain's name */
        bool found;                /* reported, and a domain rightsize may act on */
        LibvirtStats stats;
        int monitor_error;         /* 0: monitor is valid */
        QmpGuestStats monitor;
        int balloon_error;         /* 0: balloon is valid (bytes of the boot memory, no virtio-mem) */
        uint64_t balloon;
} LibvirtDomainStats;

/* On the loop. error < 0: the bulk call failed (logged), nothing is found. */
typedef void (*libvirt_collect_done_fn)(LibvirtBackend *b, int error, LibvirtDomainStats *stats, size_t n,
                                        void *userdata);
/* Queues one bulk stats call (virConnectGetAllDomainStats, NOWAIT) for the n domains asked
 * about, on the worker; `done` gets them back in the same order. -EBUSY while the previous one
 * has not returned: one in flight at a time. */
int libvirt_backend_collect_async(LibvirtBackend *b, const LibvirtDomainStats *requests, size_t n,
                                  libvirt_collect_done_fn done, void *userdata);
/* Whether a stats call is in flight. */
bool libvirt_backend_collect_busy(LibvirtBackend *b);

/* An asynchronous call on a domain ended, on the loop: 0, or -errno (a libvirt failure is
 * logged already; -ENOENT: the domain stopped meanwhile; -EBUSY: a migration runs, nothing was
 * done). Never runs for a domain that left meanwhile. */
typedef void (*libvirt_call_done_fn)(LibvirtBackend *b, const char *uuid, int error, void *userdata);

/* Balloon target (virDomainSetMemoryFlags, live), capped at the domain's maximum. */
int libvirt_backend_set_balloon(LibvirtBackend *b, const char *uuid, uint64_t bytes);
/* The same on the worker: 0 when queued, 1 when a balloon call of the domain still queued took
 * the new target instead (its one done() then stands for both). */
int libvirt_backend_set_balloon_async(LibvirtBackend *b, const char *uuid, uint64_t bytes, libvirt_call_done_fn done,
                                      void *userdata);
/* virtio-mem requested size (virDomainUpdateDeviceFlags, live) of the device `alias` (NULL:
 * the first), rounded up to its block and capped at its size; *ret_requested gets that. */
int libvirt_backend_set_virtio_mem(LibvirtBackend *b, const char *uuid, const char *alias, uint64_t bytes,
                                   uint64_t *ret_requested);
/* The same on the worker (coalesced as the balloon); *ret_requested from the device's record. */
int libvirt_backend_set_virtio_mem_async(LibvirtBackend *b, const char *uuid, const char *alias, uint64_t bytes,
                                         uint64_t *ret_requested, libvirt_call_done_fn done, void *userdata);
/* Hot-plugs a DIMM (virDomainAttachDeviceFlags, live): only if the policy allows growth past
 * the boot size (`allowed`), else -EPERM. node < 0: no <node>. The domain's record is read
 * again after it (maximum and the DIMM counts grow). On the worker, like the balloon. */
int libvirt_backend_attach_dimm_async(LibvirtBackend *b, const char *uuid, uint64_t bytes, int node, bool allowed,
                                      libvirt_call_done_fn done, void *userdata);

/* /proc/vmstat and /proc/pressure/memory, parsed (qmp/guest-procfs.h). ret_psi may be NULL. */
int libvirt_backend_read_agent(LibvirtBackend *b, const char *uuid, bool allowed, GuestVmstat *ret_vmstat,
                               GuestPsi *ret_psi);

/* The domain's handle (borrowed: valid until the domain leaves or the connection drops), for
 * calls made elsewhere (the agent worker, libvirt-agent.h). NULL when unknown or disconnected. */
virDomainPtr libvirt_backend_get_domain_ptr(LibvirtBackend *b, const char *uuid);

/* The backend's connection (borrowed), NULL while disconnected. */
virConnectPtr libvirt_backend_get_connection(LibvirtBackend *b);

/* rightsizectl enable|disable: writes (policy != NULL) or removes (NULL) the opt-in element of
 * the domain named `domain` (name or UUID), live and in the persistent config (whichever the
 * domain has). Usable without a backend, on any connection. */
int libvirt_domain_set_policy(virConnectPtr conn, const char *domain, const char *policy);
/* The domain's policy name (*ret NULL when it has none). flags: VIR_DOMAIN_AFFECT_*. */
int libvirt_domain_get_policy(virConnectPtr conn, const char *domain, unsigned flags, char **ret);
/* The persistent definition's <currentMemory> (its next boot's size; <memory> when absent) and
 * <memory>, bytes. -EOPNOTSUPP for a transient domain (no next boot), -ENOENT and libvirt's
 * errors as above. */
int libvirt_domain_get_boot_size(virConnectPtr conn, const char *domain, uint64_t *ret_current, uint64_t *ret_memory);
/* Writes the persistent definition's <currentMemory> (virDomainSetMemoryFlags, CONFIG only: the
 * live size is not touched). -EOPNOTSUPP for a transient domain. */
int libvirt_domain_set_boot_size(virConnectPtr conn, const char *domain, uint64_t bytes);
