/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/event-util.h"
#include "common/macro.h"
#include "daemon/libvirt/libvirt-agent.h"
#include "daemon/guest-driver.h"
#include "daemon/libvirt/guest-libvirt.h"
#include "daemon/log.h"
#include "qmp/qmp-sample.h"

#define TICK_USEC (1 * USEC_PER_SEC)
/* A stats call still running after this many ticks: libvirtd does not answer, and the guests
 * say so (the stall watchdog cuts the call later, at the call timeout). */
#define NOT_ANSWERING_TICKS 3

typedef struct Domain {
        LibvirtGuests *owner;
        Guest *guest;
        char uuid[VIR_UUID_STRING_BUFLEN];
        char *policy_name;            /* from the metadata, NULL when none */
        bool skipped;
        bool agent_channel;
        bool monitor_logged;          /* the first qemu-monitor read was logged */
        uint64_t next_due;            /* CLOCK_MONOTONIC µs */
        bool in_cycle;                /* in the stats call in flight */
        uint64_t cycle_started;       /* the guest's cycle that call is for */
        LibvirtAgentJob *job;         /* the agent read in flight */
        bool os_asked;                /* a read after guest-get-osinfo succeeded: not asked again until one fails */
        bool agent_waiting;           /* the current cycle waits for it */
        sd_event_source *agent_deadline;
        /* /proc/zoneinfo's watermarks, carried into every sample (GUEST_ZONEINFO_REFRESH_USEC);
         * zones 0: none since the agent last answered */
        GuestZoneinfo zoneinfo;
        uint64_t zoneinfo_at;         /* CLOCK_MONOTONIC of the last read asked for, 0: none */
} Domain;

struct LibvirtGuests {
        sd_event *event;
        const Config *config;
        const GuestSourceOwner *owner_ops; /* what it may ask of the manager */
        void *userdata;
        char *uri;
        bool manage_all;
        bool agent;
        uint64_t call_timeout_usec;
        LibvirtBackend *backend;
        LibvirtAgentWorker *worker;
        sd_event_source *timer;
        unsigned busy_ticks;          /* ticks skipped with the stats call still running */
        bool not_answering;           /* the guests show it */
        Domain **domains;
        size_t n_domains;
};

static Domain *domain_find(LibvirtGuests *lg, const char *uuid) {
        for (size_t i = 0; i < lg->n_domains; i++)
                if (strcmp(lg->domains[i]->uuid, uuid) == 0)
                        return lg->domains[i];
        return NULL;
}

static bool owner_stopping(const LibvirtGuests *lg) {
        return lg->owner_ops->stopping && lg->owner_ops->stopping(lg->userdata);
}

static uint64_t now_monotonic(LibvirtGuests *lg) {
        uint64_t now = 0;
        (void) sd_event_now(lg->event, CLOCK_MONOTONIC, &now);
        return now;
}

/* ---- the guests' actuators ----
 *
 * Sizes: the guest's total, as the decision core and the actuation plan count it, is what the
 * balloon leaves of the boot memory plus the plugged virtio-mem memory; that is libvirt's
 * current memory (balloon.current, `virsh dominfo`). QEMU's balloon, and so
 * virDomainSetMemoryFlags, only covers the boot memory (measured with QEMU 7.2 and libvirt 9.0:
 * with 256 MiB plugged, `setmem 700M` leaves 956 MiB), as for plain QEMU guests:
 * guest-actuate.c takes what virtio-mem was asked for away from a total before it reaches
 * set_balloon. */

/* Actuation runs on the backend's worker: a queued call is outstanding (1), and the guest
 * records the new target at once, as for a QMP command in flight; its outcome comes back later
 * (guest_actuator_done(), which puts back what the guest had before a refused call). A call
 * still queued takes a newer target instead, and its one outcome covers both (0). While the
 * daemon stops, the calls are synchronous: nothing would run them afterwards. libvirt refuses a
 * call it did not make: its job-wait timeout is a refusal too. */

static int queued(int r) {
        return r < 0 ? r : r == 0 ? 1 : 0;
}

static void call_done(const char *uuid, GuestActuator which, int error, void *userdata) {
        Domain *d = domain_find(userdata, uuid);
        if (d)
                guest_actuator_done(d->guest, which, error < 0 ? GUEST_CALL_REFUSED : GUEST_CALL_DONE, error, NULL);
}

static void on_balloon_done(LibvirtBackend *b _unused_, const char *uuid, int error, void *userdata) {
        call_done(uuid, GUEST_ACTUATOR_BALLOON, error, userdata);
}

static int driver_set_balloon(Guest *g _unused_, uint64_t balloon_bytes, void *userdata) {
        Domain *d = userdata;

        if (owner_stopping(d->owner))
                return libvirt_backend_set_balloon(d->owner->backend, d->uuid, balloon_bytes);
        return queued(libvirt_backend_set_balloon_async(d->owner->backend, d->uuid, balloon_bytes, on_balloon_done,
                                                        d->owner));
}

static void on_vmem_done(LibvirtBackend *b _unused_, const char *uuid, int error, void *userdata) {
        call_done(uuid, GUEST_ACTUATOR_VIRTIO_MEM, error, userdata);
}

static int driver_set_virtio_mem(Guest *g, uint64_t requested, uint64_t *ret_requested, void *userdata) {
        Domain *d = userdata;
        uint64_t aligned;
        int r;

        const char *vmem_id = guest_vmem_id(g);
        if (owner_stopping(d->owner))
                r = libvirt_backend_set_virtio_mem(d->owner->backend, d->uuid, vmem_id, requested, &aligned);
        else
                r = queued(libvirt_backend_set_virtio_mem_async(d->owner->backend, d->uuid, vmem_id, requested,
                                                                &aligned, on_vmem_done, d->owner));
        if (r < 0)
                return r;
        *ret_requested = aligned;
        log_guest_debug(g, "virtio-mem %s requested %" PRIu64 " MiB", vmem_id,
                        aligned / MIB);
        return r;
}

static void on_dimm_done(LibvirtBackend *b _unused_, const char *uuid, int error, void *userdata) {
        call_done(uuid, GUEST_ACTUATOR_DIMM, error, userdata);
}

static int driver_add_dimm(Guest *g, uint64_t bytes, void *userdata) {
        Domain *d = userdata;
        const LibvirtDomainInfo *info = libvirt_backend_get_domain(d->owner->backend, d->uuid);

        char b[FORMAT_SIZE_MAX];
        log_guest_info(g, "Hot-plugging DIMM of %s", format_size(b, sizeof(b), bytes));
        /* libvirt puts memory devices in a NUMA cell, and wants one for hotplug at all. */
        return queued(libvirt_backend_attach_dimm_async(d->owner->backend, d->uuid, bytes, info && info->numa ? 0 : -1,
                                                        guest_policy(g)->allow_dimm, on_dimm_done, d->owner));
}

static const GuestDriver libvirt_driver = {
        .calls = "libvirt calls",
        .set_balloon = driver_set_balloon,
        .set_virtio_mem = driver_set_virtio_mem,
        .add_dimm = driver_add_dimm,
};

/* ---- guests from domains ---- */

static void domain_cancel_agent(Domain *d) {
        libvirt_agent_job_cancel(d->job);
        d->job = NULL;
        d->agent_waiting = false;
        (void) sd_event_source_set_enabled(d->agent_deadline, SD_EVENT_OFF);
}

static void domain_free(Domain *d) {
        if (!d)
                return;
        domain_cancel_agent(d);
        sd_event_source_disable_unref(d->agent_deadline);
        free(d->policy_name);
        free(d);
}

static void domain_select_policy(LibvirtGuests *lg, Domain *d, const char *name, RsPolicy *ret) {
        if (lg->owner_ops->resolve_policy(lg->userdata, d->policy_name, name, d->uuid, ret) == -ENOENT)
                log_named_guest_warning(name, NULL, "The metadata names policy '%s', which does not exist: using %s",
                                  d->policy_name, ret->name);
}

static void domain_attach(LibvirtGuests *lg, Domain *d, const LibvirtDomainInfo *info) {
        Guest *g = d->guest;

        d->skipped = info->skip_reason != NULL;
        d->agent_channel = info->agent_channel;
        if (info->skip_reason) {
                domain_cancel_agent(d);
                guest_set_faulty(g, GUEST_FAULT_SKIPPED, info->skip_reason);
                return;
        }
        GuestResources res = {
                /* The balloon's ceiling counts the DIMMs; the boot memory does not. */
                .base_memory = info->maximum > info->dimm_bytes ? info->maximum - info->dimm_bytes : info->maximum,
                /* The total: the balloon's part plus what virtio-mem has plugged. */
                .actual = guest_actual(g) ?: info->actual + (qmp_value_is_known(info->virtio_mem_current) ?
                                                               info->virtio_mem_current : 0),
                .vmem_id = info->virtio_mem_alias,
                .vmem_size = qmp_value_is_known(info->virtio_mem_current) ? info->virtio_mem_current : 0,
                .vmem_max = qmp_value_is_known(info->virtio_mem_size) ? info->virtio_mem_size : 0,
                .vmem_block = qmp_value_is_known(info->virtio_mem_block) ? info->virtio_mem_block : 0,
                .vmem_requested = qmp_value_is_known(info->virtio_mem_requested) ? info->virtio_mem_requested : 0,
                .fpr_known = true,
                .free_page_reporting = info->free_page_reporting,
                .deflate_on_oom_known = true,
                .deflate_on_oom = info->autodeflate,
                .agent = lg->agent && info->agent_channel ? "through libvirt" : NULL,
                .mem_max_size = info->max_memory,
                .mem_slots = info->memory_slots,
                .devices_bytes = info->devices_bytes,
                .dimm_bytes = info->dimm_bytes,
                .dimm_count = info->dimm_count,
        };
        if (res.vmem_block == 0 || res.vmem_max == 0)
                res.vmem_id = NULL;
        int r = guest_attach(g, &res);
        if (r < 0)
                log_guest_warning_errno(g, r, "Cannot manage the domain: %m");
}

static void on_domain_added(LibvirtBackend *b _unused_, const LibvirtDomainInfo *info, bool changed _unused_,
                            void *userdata) {
        LibvirtGuests *lg = userdata;
        Domain *d = domain_find(lg, info->uuid);
        RsPolicy policy;
        int r;

        if (owner_stopping(lg))
                return;
        if (!config_guest_is_managed(lg->config, info->name, info->uuid)) {
                log_debug("Not managing libvirt domain %s: excluded by [guests]", info->name);
                return;
        }
        if (!d) {
                Domain **array = realloc(lg->domains, (lg->n_domains + 1) * sizeof(Domain *));
                if (!array) {
                        log_oom();
                        return;
                }
                lg->domains = array;
                d = calloc(1, sizeof(*d));
                if (!d) {
                        log_oom();
                        return;
                }
                d->owner = lg;
                snprintf(d->uuid, sizeof(d->uuid), "%s", info->uuid);
                d->policy_name = info->policy ? strdup(info->policy) : NULL;
                domain_select_policy(lg, d, info->name, &policy);
                r = guest_new(lg->event, GUEST_SOURCE_LIBVIRT, info->name, info->uuid, info->uuid,
                              lg->config->state_dir, &policy, lg->owner_ops->guest_hooks, lg->userdata, &libvirt_driver, d,
                              &d->guest);
                if (r >= 0) {
                        r = lg->owner_ops->add_guest(lg->userdata, d->guest);
                        if (r < 0)
                                guest_free(d->guest);
                }
                if (r < 0) {
                        if (r != -EEXIST) /* refused by the manager, which said why */
                                log_error_errno(r, "%s: cannot set up the libvirt guest: %m", info->name);
                        domain_free(d);
                        return;
                }
                lg->domains[lg->n_domains++] = d;
                log_named_guest_info(info->name, "connecting", "libvirt domain %s (policy %s)", info->uuid, policy.name);
        } else if (!!d->policy_name != !!info->policy || (info->policy && strcmp(d->policy_name, info->policy) != 0)) {
                free(d->policy_name);
                d->policy_name = info->policy ? strdup(info->policy) : NULL;
                domain_select_policy(lg, d, info->name, &policy);
                if (guest_set_policy(d->guest, &policy) < 0)
                        log_named_guest_warning(info->name, guest_state_string(d->guest),
                                          "Policy %s not applicable, keeping %s", policy.name,
                                          guest_policy(d->guest)->name);
                else
                        log_named_guest_info(info->name, guest_state_string(d->guest), "Policy now %s", policy.name);
        }
        domain_attach(lg, d, info);
}

static void domain_drop(LibvirtGuests *lg, Domain *d) {
        for (size_t i = 0; i < lg->n_domains; i++)
                if (lg->domains[i] == d) {
                        memmove(lg->domains + i, lg->domains + i + 1, (lg->n_domains - i - 1) * sizeof(Domain *));
                        lg->n_domains--;
                        break;
                }
        domain_cancel_agent(d);
        lg->owner_ops->remove_guest(lg->userdata, d->guest);
        domain_free(d);
}

static void on_domain_removed(LibvirtBackend *b _unused_, const char *uuid, const char *name, const char *why,
                              void *userdata) {
        LibvirtGuests *lg = userdata;
        Domain *d = domain_find(lg, uuid);

        if (!d) {
                if (lg->owner_ops->refused_gone)
                        lg->owner_ops->refused_gone(lg->userdata, uuid);
                return;
        }
        log_named_guest_info(name, guest_state_string(d->guest), "libvirt domain %s: %s, no longer managed", uuid, why);
        domain_drop(lg, d);
}

void libvirt_guests_retry_domain(LibvirtGuests *lg, const char *uuid) {
        const LibvirtDomainInfo *info = lg->backend ? libvirt_backend_get_domain(lg->backend, uuid) : NULL;

        if (info && !domain_find(lg, uuid))
                on_domain_added(lg->backend, info, false, lg);
}

static void on_memory_device_changed(LibvirtBackend *b _unused_, const char *uuid, const char *alias, uint64_t size,
                                     void *userdata) {
        Domain *d = domain_find(userdata, uuid);
        const char *vmem_id = d ? guest_vmem_id(d->guest) : NULL;

        if (vmem_id && strcmp(vmem_id, alias) == 0)
                guest_set_vmem_size(d->guest, size);
}

static void on_connection_changed(LibvirtBackend *b, bool connected, void *userdata) {
        LibvirtGuests *lg = userdata;

        lg->not_answering = false;
        lg->busy_ticks = 0;
        for (size_t i = 0; i < lg->n_domains; i++) {
                Domain *d = lg->domains[i];
                if (!connected) {
                        /* The guest keeps the size it was given; nothing moves it meanwhile. */
                        domain_cancel_agent(d);
                        d->in_cycle = false;
                        guest_set_faulty(d->guest, GUEST_FAULT_CONNECTION, "libvirt connection lost: reconnecting");
                        continue;
                }
                const LibvirtDomainInfo *info = libvirt_backend_get_domain(b, d->uuid);
                if (info)
                        domain_attach(lg, d, info);
        }
}

/* ---- the tick ---- */

static void domain_agent_finish(Domain *d) {
        if (!d->agent_waiting)
                return;
        d->agent_waiting = false;
        (void) sd_event_source_set_enabled(d->agent_deadline, SD_EVENT_OFF);
        guest_cycle_step_done(d->guest);
}

static void on_agent_done(int error, const GuestVmstat *vmstat, const GuestPsi *psi, const char *message,
                          void *userdata) {
        Domain *d = userdata;
        Guest *g = d->guest;

        /* Asked again once a read fails: the agent may have restarted, or the guest another system. */
        d->os_asked = error >= 0;
        guest_set_agent_os(g, libvirt_agent_job_os(d->job));
        int zerror;
        const GuestZoneinfo *z = libvirt_agent_job_zoneinfo(d->job, &zerror);
        GuestZoneinfo fresh = { .zones = 0 };
        if (z)
                d->zoneinfo = fresh = *z;
        else if (zerror != -ENODATA) {
                /* optional: logged, tried again at the next refresh; a file not a kernel's drops the last */
                if (zerror == -EBADMSG)
                        d->zoneinfo = (GuestZoneinfo) {};
                log_guest_debug_errno(g, zerror, "Guest agent: /proc/zoneinfo: %m");
        }
        d->job = NULL;
        if (error < 0) {
                if (guest_agent_answers(g))
                        log_guest_info(g, "Guest agent not answering: %s", message ?: strerror(-error));
                guest_set_agent_answers(g, false);
                /* an agent back after a silence may be a new kernel's (a reboot): its own is read */
                d->zoneinfo = (GuestZoneinfo) {};
                d->zoneinfo_at = 0;
        } else {
                if (!guest_agent_answers(g))
                        log_guest_info(g, "Guest agent answers");
                guest_set_agent_answers(g, true);
                if (d->agent_waiting) {
                        RsSample part;
                        rs_sample_init(&part);
                        if (vmstat)
                                qmp_sample_from_vmstat(&part, vmstat);
                        if (psi)
                                qmp_sample_from_psi(&part, psi);
                        if (d->zoneinfo.zones > 0)
                                qmp_sample_from_zoneinfo(&part, &d->zoneinfo);
                        if (fresh.zones > 0)
                                qmp_sample_from_zoneinfo_lists(&part, &fresh);
                        guest_sample_add(g, &part);
                }
        }
        domain_agent_finish(d);
}

static int on_agent_deadline(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Domain *d = userdata;

        log_guest_debug(d->guest, "Guest agent slow: interval without it");
        domain_agent_finish(d);
        return 0;
}

static void domain_start_agent(LibvirtGuests *lg, Domain *d, uint64_t now) {
        Guest *g = d->guest;
        const RsPolicy *p = guest_policy(g);
        virDomainPtr dom;
        uint64_t timeout = CLAMP(p->poll_interval_usec * 3 / 4, 500 * USEC_PER_MSEC, 10 * USEC_PER_SEC);

        /* A Windows guest's agent has no /proc (guest-agent-os.c): nothing to read through it. */
        if (!lg->agent || !p->guest_agent || !d->agent_channel || d->job || !lg->worker ||
            !guest_agent_reads_procfs(g))
                return;
        dom = libvirt_backend_get_domain_ptr(lg->backend, d->uuid);
        bool zoneinfo = d->zoneinfo_at == 0 || now >= d->zoneinfo_at + GUEST_ZONEINFO_REFRESH_USEC;
        if (!dom || libvirt_agent_submit_full(lg->worker, dom, !d->os_asked, zoneinfo, on_agent_done, d, &d->job) < 0)
                return;
        if (zoneinfo)
                d->zoneinfo_at = now;
        if (event_reset_time(lg->event, &d->agent_deadline, CLOCK_MONOTONIC, now + timeout, 0, on_agent_deadline, d,
                             "libvirt-agent-deadline") < 0) {
                domain_cancel_agent(d);
                return;
        }
        d->agent_waiting = true;
        guest_cycle_hold(g);
}

/* With qemu-monitor = yes: the stats libvirt left unknown (OOM kills, stalls, scans, reclaims),
 * from QEMU itself. What libvirt reported stays as it was. */
static void add_monitor_stats(Domain *d, const LibvirtDomainStats *s, QmpGuestStats *stats) {
        unsigned known = 0, added = 0;

        if (s->monitor_error < 0) {
                log_guest_debug_errno(d->guest, s->monitor_error,
                                      "QEMU monitor: no balloon guest-stats: %m");
                return;
        }
        for (size_t i = 0; i < _QMP_STAT_MAX; i++) {
                known += qmp_value_is_known(s->monitor.value[i]);
                if (!qmp_value_is_known(stats->value[i]) && qmp_value_is_known(s->monitor.value[i])) {
                        stats->value[i] = s->monitor.value[i];
                        added++;
                }
        }
        /* Once, when the guest reports: which stats this QEMU has beyond libvirt's (none
         * before QEMU 9.2). */
        if (!d->monitor_logged && known > 0) {
                log_guest_info(d->guest, "QEMU monitor: balloon guest-stats read, %u known, %u that libvirt does not map", known,
                               added);
                d->monitor_logged = true;
        }
}

/* The domain's guest is still in the cycle the stats call was made for. */
static bool domain_cycle_current(Domain *d) {
        Guest *g = d->guest;
        /* d->cycle_started is never 0 while in_cycle: a guest without a cycle under way (0) fails. */
        return d->in_cycle && guest_phase(g) == GUEST_PHASE_RUNNING && guest_cycle_started(g) == d->cycle_started;
}

static void domain_apply_stats(Domain *d, const LibvirtDomainStats *s) {
        Guest *g = d->guest;
        const LibvirtStats *stats = &s->stats;

        /* balloon.current: what the balloon leaves of the boot memory plus plugged virtio-mem. */
        if (qmp_value_is_known(stats->actual))
                guest_set_actual(g, stats->actual);
        guest_set_host_rss(g, qmp_value_is_known(stats->rss) ? stats->rss : UINT64_MAX);
        QmpGuestStats guest_stats = stats->guest;
        if (guest_policy(g)->qemu_monitor && s->want_monitor)
                add_monitor_stats(d, s, &guest_stats);
        RsSample part;
        rs_sample_init(&part);
        if (qmp_sample_from_balloon_stats(&part, &guest_stats))
                guest_sample_add_balloon_stats(g, &part, guest_stats.last_update);
        /* A balloon in motion, read directly (balloon.current lags it by up to an interval, and
         * the guest would look as if it pushed back). */
        if (s->balloon_error == 0)
                guest_set_balloon_actual(g, s->balloon);
}

/* libvirtd answered again after the guests were marked: they are attached again. */
static void guests_answering_again(LibvirtGuests *lg) {
        if (!lg->not_answering)
                return;
        lg->not_answering = false;
        log_info("libvirt: answering again");
        for (size_t i = 0; i < lg->n_domains; i++) {
                Domain *d = lg->domains[i];
                const LibvirtDomainInfo *info = libvirt_backend_get_domain(lg->backend, d->uuid);
                if (info && guest_phase(d->guest) == GUEST_PHASE_FAULTY &&
                    guest_fault_kind(d->guest) == GUEST_FAULT_NOT_ANSWERING)
                        domain_attach(lg, d, info);
        }
}

static void on_collected(LibvirtBackend *b _unused_, int error, LibvirtDomainStats *stats, size_t n, void *userdata) {
        LibvirtGuests *lg = userdata;

        lg->busy_ticks = 0;
        /* A call cut by the watchdog fails with the connection: the reconnect attaches the
         * guests again. Any other answer means libvirtd answers. */
        if (error >= 0 || libvirt_backend_is_alive(lg->backend))
                guests_answering_again(lg);
        for (size_t i = 0; i < n; i++) {
                Domain *d = domain_find(lg, stats[i].uuid);
                if (!d || !d->in_cycle)
                        continue;
                if (!domain_cycle_current(d)) {
                        /* Marked faulty, reconnected or re-attached meanwhile: not this cycle's. */
                        d->in_cycle = false;
                        continue;
                }
                d->in_cycle = false;
                if (error < 0)
                        guest_cycle_fail(d->guest, "libvirt could not read the domain stats");
                else if (!stats[i].found) {
                        /* Not among the active domains: it is stopping, and its lifecycle event
                         * follows. No decision, and nothing to report. */
                        log_guest_debug(d->guest, "No stats from libvirt: the domain is going away");
                        domain_cancel_agent(d);
                        guest_cycle_cancel(d->guest);
                        continue;
                } else
                        domain_apply_stats(d, &stats[i]);
                guest_cycle_step_done(d->guest);
        }
}

/* The stats call of an earlier tick has not returned. */
static void stats_call_late(LibvirtGuests *lg) {
        char fault[160];

        lg->busy_ticks++;
        log_debug("libvirt: the stats call is still running (%u s): skipping this tick", lg->busy_ticks);
        if (lg->busy_ticks < NOT_ANSWERING_TICKS)
                return;
        if (!lg->not_answering)
                log_warning("libvirt: %s does not answer: a stats call has been running for %u s",
                            lg->uri ?: "libvirtd", lg->busy_ticks);
        lg->not_answering = true;
        snprintf(fault, sizeof(fault), "libvirt not answering: a stats call has been running for %u s",
                 lg->busy_ticks);
        for (size_t i = 0; i < lg->n_domains; i++) {
                Domain *d = lg->domains[i];
                if (d->skipped || guest_phase(d->guest) == GUEST_PHASE_CONNECTING)
                        continue;
                /* Keeps the guest at the size it was given: a faulty guest is not actuated. */
                domain_cancel_agent(d);
                d->in_cycle = false;
                guest_set_faulty(d->guest, GUEST_FAULT_NOT_ANSWERING, fault);
        }
}

static int on_libvirt_tick(sd_event_source *s, uint64_t usec _unused_, void *userdata) {
        LibvirtGuests *lg = userdata;
        uint64_t now = now_monotonic(lg);
        _cleanup_free_ LibvirtDomainStats *requests = NULL;
        size_t n_due = 0;
        int r;

        (void) event_reset_time(lg->event, &lg->timer, CLOCK_MONOTONIC, now + TICK_USEC, 0, on_libvirt_tick, lg, NULL);
        if (owner_stopping(lg) || lg->n_domains == 0 || !libvirt_backend_is_connected(lg->backend))
                return 0;
        /* One stats call in flight at a time: a hung libvirtd does not pile them up. */
        if (libvirt_backend_collect_busy(lg->backend)) {
                stats_call_late(lg);
                return 0;
        }

        requests = calloc(lg->n_domains, sizeof(*requests));
        if (!requests)
                return log_oom(), 0;
        for (size_t i = 0; i < lg->n_domains; i++) {
                Domain *d = lg->domains[i];
                Guest *g = d->guest;
                if (d->skipped || now < d->next_due)
                        continue;
                r = guest_cycle_begin(g);
                if (r == -EBUSY)
                        log_guest_debug(g, "Previous interval still running, skipping a tick");
                if (r < 0)
                        continue;
                /* Ticks are 1 s apart: stay on the guest's interval within that. */
                d->next_due = now + guest_policy(g)->poll_interval_usec - TICK_USEC / 2;
                d->in_cycle = true;
                d->cycle_started = guest_cycle_started(g);
                memcpy(requests[n_due].uuid, d->uuid, sizeof(d->uuid));
                requests[n_due].want_monitor = guest_policy(g)->qemu_monitor;
                requests[n_due].balloon_target = guest_balloon_target(g);
                n_due++;
                domain_start_agent(lg, d, now);
        }
        if (n_due == 0)
                return 0;

        /* One call for every domain, on the backend's worker: on_collected() goes on. */
        r = libvirt_backend_collect_async(lg->backend, requests, n_due, on_collected, lg);
        if (r < 0) {
                log_debug_errno(r, "libvirt: cannot queue the stats call: %m");
                for (size_t i = 0; i < n_due; i++) {
                        Domain *d = domain_find(lg, requests[i].uuid);
                        if (!d || !domain_cycle_current(d))
                                continue;
                        d->in_cycle = false;
                        guest_cycle_fail(d->guest, "libvirt could not read the domain stats");
                        guest_cycle_step_done(d->guest);
                }
        }
        return 0;
}

/* ---- public ---- */

int libvirt_guests_new(sd_event *event, const Config *config, const GuestSourceOwner *owner, void *userdata,
                       LibvirtGuests **ret) {
        static const LibvirtBackendCallbacks callbacks = {
                .domain_added = on_domain_added,
                .domain_removed = on_domain_removed,
                .memory_device_changed = on_memory_device_changed,
                .connection_changed = on_connection_changed,
        };
        LibvirtGuests *lg;
        int r;

        lg = calloc(1, sizeof(*lg));
        if (!lg)
                return -ENOMEM;
        lg->event = event;
        lg->config = config;
        lg->owner_ops = owner;
        lg->userdata = userdata;
        lg->uri = config->libvirt_uri ? strdup(config->libvirt_uri) : NULL;
        lg->manage_all = config->libvirt_manage_all;
        lg->agent = config->libvirt_agent;
        lg->call_timeout_usec = config->libvirt_call_timeout_usec;
        if (config->libvirt_uri && !lg->uri) {
                free(lg);
                return -ENOMEM;
        }
        if (lg->agent) {
                r = libvirt_agent_worker_new(event, &lg->worker);
                if (r < 0) {
                        log_warning_errno(r, "libvirt: no agent worker, going without the guest agent: %m");
                        lg->agent = false;
                }
        }
        r = event_reset_time_relative(event, &lg->timer, CLOCK_MONOTONIC, TICK_USEC, 0, on_libvirt_tick, lg, "libvirt-tick");
        if (r < 0) {
                libvirt_guests_free(lg);
                return r;
        }

        const LibvirtBackendConfig backend_config = {
                .uri = lg->uri,
                .manage_all = lg->manage_all,
                .stats_period = 1,
                .call_timeout_usec = lg->call_timeout_usec,
        };
        /* Domains already running are reported from inside: lg must be complete by now. */
        r = libvirt_backend_new(event, &backend_config, &callbacks, lg, &lg->backend);
        if (r < 0) {
                libvirt_guests_free(lg);
                return r;
        }
        *ret = lg;
        return 0;
}

LibvirtGuests *libvirt_guests_free(LibvirtGuests *lg) {
        if (!lg)
                return NULL;
        /* The worker first: no completion may arrive for a domain freed below. */
        lg->worker = libvirt_agent_worker_free(lg->worker);
        while (lg->n_domains > 0)
                domain_drop(lg, lg->domains[lg->n_domains - 1]);
        free(lg->domains);
        lg->backend = libvirt_backend_free(lg->backend);
        sd_event_source_disable_unref(lg->timer);
        free(lg->uri);
        free(lg);
        return NULL;
}

static bool streq_null(const char *a, const char *b) {
        return a == b || (a && b && strcmp(a, b) == 0);
}

bool libvirt_guests_config_matches(const LibvirtGuests *lg, const Config *c) {
        return c->libvirt_enabled && streq_null(lg->uri, c->libvirt_uri) && lg->manage_all == c->libvirt_manage_all &&
               lg->agent == c->libvirt_agent && lg->call_timeout_usec == c->libvirt_call_timeout_usec;
}

void libvirt_guests_reload(LibvirtGuests *lg, const Config *config) {
        lg->config = config;
        for (size_t i = 0; i < lg->n_domains; i++) {
                Domain *d = lg->domains[i];
                RsPolicy p;
                domain_select_policy(lg, d, guest_name(d->guest), &p);
                if (guest_set_policy(d->guest, &p) < 0)
                        log_guest_warning(d->guest, "Policy %s not applicable, keeping %s", p.name,
                                          guest_policy(d->guest)->name);
                (void) guest_set_state_dir(d->guest, lg->config->state_dir);
        }
}

int libvirt_guests_set_domain_policy(LibvirtGuests *lg, const char *domain, const char *policy) {
        virConnectPtr conn = libvirt_backend_get_connection(lg->backend);

        if (!conn)
                return -ENOTCONN;
        return libvirt_domain_set_policy(conn, domain, policy);
}

/* ---- as the manager's guest source (guest-source.h) ---- */

/* libvirt is optional: a daemon that cannot reach it still manages its QMP guests. */
static int source_new(sd_event *event, const Config *config, const GuestSourceOwner *owner, void *userdata,
                      void **ret) {
        LibvirtGuests *lg = NULL;

        *ret = NULL;
        if (!config->libvirt_enabled)
                return 0;
        int r = libvirt_guests_new(event, config, owner, userdata, &lg);
        if (r < 0)
                log_warning_errno(r, "libvirt guests unavailable, continuing without them: %m");
        *ret = lg;
        return 0;
}

static void source_free(void *source) {
        libvirt_guests_free(source);
}

static void source_reload(void **source, sd_event *event, const Config *config, const GuestSourceOwner *owner,
                          void *userdata) {
        LibvirtGuests *lg = *source;

        if (lg && libvirt_guests_config_matches(lg, config)) {
                libvirt_guests_reload(lg, config);
                return;
        }
        if (!lg && !config->libvirt_enabled)
                return;
        /* Another URI, scope or agent setting: start over (the guests' state files keep what was
         * learnt). */
        *source = libvirt_guests_free(lg);
        if (config->libvirt_enabled && libvirt_guests_new(event, config, owner, userdata, &lg) >= 0)
                *source = lg;
        else if (config->libvirt_enabled)
                log_warning("libvirt guests unavailable after the reload");
}

static void source_retry(void *source, const char *origin, const char *name _unused_) {
        libvirt_guests_retry_domain(source, origin);
}

static int source_set_kept_policy(void *source, const char *guest, const char *policy) {
        return libvirt_guests_set_domain_policy(source, guest, policy);
}

static int source_get_boot_size(void *source, const char *guest, uint64_t *ret_current, uint64_t *ret_memory) {
        virConnectPtr conn = libvirt_backend_get_connection(((LibvirtGuests *) source)->backend);
        return conn ? libvirt_domain_get_boot_size(conn, guest, ret_current, ret_memory) : -ENOTCONN;
}

static int source_set_boot_size(void *source, const char *guest, uint64_t bytes) {
        virConnectPtr conn = libvirt_backend_get_connection(((LibvirtGuests *) source)->backend);
        return conn ? libvirt_domain_set_boot_size(conn, guest, bytes) : -ENOTCONN;
}

const GuestSourceOps libvirt_guest_source = {
        .source = GUEST_SOURCE_LIBVIRT,
        .new = source_new,
        .free = source_free,
        .reload = source_reload,
        .retry = source_retry,
        .set_kept_policy = source_set_kept_policy,
        .get_boot_size = source_get_boot_size,
        .set_boot_size = source_set_boot_size,
};
