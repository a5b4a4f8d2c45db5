/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/qemu/guest-qmp.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/event-util.h"
#include "common/macro.h"
#include "common/size.h"
#include "common/time-util.h"
#include "common/utf8.h"
#include "daemon/host/host-hugepages.h"
#include "daemon/host/host.h"
#include "daemon/qemu/socket-trust.h"
#include "policies/hugepage-repair.h"
#include "qmp/json-util.h"
#include "qmp/qga-commands.h"
#include "qmp/qga-osinfo.h"
#include "qmp/qmp-commands.h"
#include "qmp/qmp-events.h"
#include "qmp/qmp-sample.h"

#define RECONNECT_MIN_USEC (1 * USEC_PER_SEC)
#define RECONNECT_MAX_USEC (30 * USEC_PER_SEC)
#define AGENT_RECONNECT_USEC (10 * USEC_PER_SEC)
/* Connected this long and never synced: the agent hangs (or none runs behind the socket). */
#define AGENT_SILENT_USEC (2 * QGA_DEFAULT_SYNC_TIMEOUT_USEC)
#define HANDSHAKE_TIMEOUT_USEC (5 * USEC_PER_SEC)
/* More QMP events than this in one interval are a flood (untrusted input). */
#define EVENT_FLOOD_PER_CYCLE 1000
/* A huge-page repair step per tick: at most this many 2 MiB ranges read (8 bytes a page of page
 * map) and collapsed (a 2 MiB allocation and copy each), so that a large guest's pass spreads
 * over ticks instead of holding the event loop (host-hugepages.h). */
#define HUGEPAGE_STEP_RANGES 1024
#define HUGEPAGE_STEP_COLLAPSES 64

typedef struct TickWheel TickWheel;

/* What only a QMP guest has: its connections, its timer, its setup. */
/* How often QEMU's swap and KSM pages are read: they move slowly, they are shown to an operator
 * (rightsizectl report, a metrics scrape) rather than decided on, and reading them costs the
 * kernel a whole /proc/PID/status. */
#define HOST_SWAP_KSM_REFRESH_USEC (30 * UINT64_C(1000000))

typedef struct GuestQmp {
        Guest *guest;
        char *qmp_path;
        char *agent_path;      /* NULL: no agent */
        const SocketTrust *trust; /* whose QEMU may listen on qmp_path (NULL: root's only) */

        QmpClient *qmp;
        pid_t qemu_pid;        /* 0 when unknown */
        TickWheel *wheel; /* whose timer ticks this guest, NULL until the first tick is armed */
        size_t tick_index;     /* in wheel->heap, SIZE_MAX: no tick armed */
        uint64_t tick_due;     /* CLOCK_MONOTONIC */
        sd_event_source *reconnect;
        uint64_t backoff_usec;
        unsigned setup_pending;
        char setup_error[160]; /* why a setup command failed, "" if none */
        GuestResources res;    /* what setup found */
        char *vmem_id;         /* res.vmem_id's storage */
        bool no_blockstats;    /* QEMU refused query-blockstats: not asked again */
        bool no_balloon;       /* QEMU has no balloon device (DeviceNotActive): the guest is skipped */
        unsigned dimm_next_id; /* rs-dimmN / rs-memN */
        unsigned events_in_cycle;
        bool stopped;          /* the daemon stops: no more ticks */

        QgaClient *qga;
        sd_event_source *agent_reconnect;
        bool agent_busy;
        uint64_t agent_connected; /* CLOCK_MONOTONIC of the last connect, 0: not connected */
        enum { AGENT_OS_ASK, AGENT_OS_PENDING, AGENT_OS_DONE } agent_os; /* guest-get-osinfo on this connection */
        /* /proc/zoneinfo's watermarks, carried into every sample from the agent's reads
         * (GUEST_ZONEINFO_REFRESH_USEC); zones 0: none on this connection */
        GuestZoneinfo zoneinfo;
        uint64_t zoneinfo_at;  /* CLOCK_MONOTONIC of the last read tried, 0: none on this connection */
        /* QEMU's swap and KSM pages (host_process_memory(): /proc/PID/status, ksm files), read
         * once in HOST_SWAP_KSM_REFRESH_USEC; its RSS (statm, far cheaper) every tick */
        HostProcessMemory host_memory;
        uint64_t host_memory_at; /* CLOCK_MONOTONIC of the last status read, 0: none */

        RsHugepageRepair hugepages;     /* when the host's huge pages under it are put back */
        HostHugepagePass *hugepage_pass; /* the pass under way, NULL: none */
        bool hugepage_refused;          /* no rights to: not tried again for this QEMU */
} GuestQmp;

static void schedule_reconnect(GuestQmp *q);
static void tick_arm(GuestQmp *q, uint64_t usec);
static void tick_disarm(GuestQmp *q);
static void tick_wheel_unref(TickWheel *w);
static void agent_schedule_reconnect(GuestQmp *q);
static void agent_follow_policy(GuestQmp *q);

/* Each QMP call gets the poll interval as its timeout, within limits: a guest slower than
 * that would miss the next tick anyway. */
static uint64_t command_timeout(const Guest *g) {
        return CLAMP(guest_policy(g)->poll_interval_usec, 1 * USEC_PER_SEC, 10 * USEC_PER_SEC);
}

static uint64_t agent_timeout(const Guest *g) {
        return CLAMP(guest_policy(g)->poll_interval_usec * 3 / 4, 500 * USEC_PER_MSEC, 10 * USEC_PER_SEC);
}

static bool qmp_ready(const GuestQmp *q) {
        return q->qmp && qmp_client_is_ready(q->qmp);
}

/* ---- the actuators (GuestDriver) ---- */

/* A command that timed out may still be run (QEMU's monitor was only slow to answer); one the
 * connection lost may have been run before it went. Their outcome is not known. */
static GuestCallOutcome call_outcome(const QmpReply *reply) {
        if (reply->error >= 0)
                return GUEST_CALL_DONE;
        return reply->error == -ETIMEDOUT || reply->error == -ECONNRESET ? GUEST_CALL_UNKNOWN : GUEST_CALL_REFUSED;
}

static void on_balloon_set(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error < 0)
                log_guest_warning_errno(q->guest, reply->error, "balloon failed: %s",
                                        reply->error_desc ?: "unknown error");
        guest_actuator_done(q->guest, GUEST_ACTUATOR_BALLOON, call_outcome(reply), reply->error, reply->error_desc);
}

static void on_vmem_set(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error < 0)
                log_guest_warning_errno(q->guest, reply->error, "virtio-mem resize failed: %s",
                                        reply->error_desc ?: "unknown error");
        guest_actuator_done(q->guest, GUEST_ACTUATOR_VIRTIO_MEM, call_outcome(reply), reply->error,
                            reply->error_desc);
}

static void on_dimm_added(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        GuestQmp *q = userdata;
        guest_actuator_done(q->guest, GUEST_ACTUATOR_DIMM, call_outcome(reply), reply->error, reply->error_desc);
}

/* Each actuator's command is answered once (the reply, a timeout or the connection's loss), and
 * the answer is the guest's (guest_actuator_done()): 1. */
static int qmp_set_balloon(Guest *g, uint64_t balloon_bytes, void *userdata) {
        GuestQmp *q = userdata;
        int r = qmp_balloon_set_target(q->qmp, balloon_bytes, command_timeout(g), on_balloon_set, q);
        return r < 0 ? r : 1;
}

static int qmp_set_virtio_mem(Guest *g, uint64_t requested, uint64_t *ret_requested, void *userdata) {
        GuestQmp *q = userdata;
        int r = qmp_virtio_mem_set_requested_size(q->qmp, guest_vmem_id(g), requested, command_timeout(g), on_vmem_set,
                                                  q);
        if (r < 0)
                return r;
        *ret_requested = requested;
        return 1;
}

static int qmp_add_dimm(Guest *g, uint64_t bytes, void *userdata) {
        GuestQmp *q = userdata;
        char dev[32], mem[32], b[FORMAT_SIZE_MAX];

        snprintf(dev, sizeof(dev), "rs-dimm%u", q->dimm_next_id);
        snprintf(mem, sizeof(mem), "rs-mem%u", q->dimm_next_id);
        log_guest_info(g, "Hot-plugging DIMM %s of %s", dev, format_size(b, sizeof(b), bytes));
        int r = qmp_dimm_add(q->qmp, dev, mem, bytes, command_timeout(g), on_dimm_added, q);
        if (r < 0)
                return r;
        q->dimm_next_id++;
        return 1;
}

typedef struct ShutdownCall {
        Guest *guest;
        void (*done)(Guest *g, void *userdata);
        void *userdata;
} ShutdownCall;

static void on_shutdown_balloon(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        ShutdownCall *call = userdata;
        if (reply->error < 0)
                log_named_guest_warning(guest_name(call->guest), NULL, "Leaving the guest at its size failed: %s",
                                        reply->error_desc ?: strerror(-reply->error));
        call->done(call->guest, call->userdata);
}

/* At shutdown: asynchronous, with a short timeout of its own (the daemon waits for it). */
static int qmp_shutdown_balloon(Guest *g, uint64_t balloon_bytes, void (*done)(Guest *g, void *userdata),
                                void *done_userdata, void *userdata) {
        GuestQmp *q = userdata;
        ShutdownCall *call = malloc(sizeof(*call));
        if (!call)
                return -ENOMEM;
        *call = (ShutdownCall) { g, done, done_userdata };
        int r = qmp_balloon_set_target_full(q->qmp, balloon_bytes, 2 * USEC_PER_SEC, on_shutdown_balloon, call, free);
        if (r < 0) {
                free(call);
                return r;
        }
        return 1;
}

static void on_stats_polling_set(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error < 0)
                log_guest_warning_errno(q->guest, reply->error, "Setting the balloon's stats polling interval failed: %s",
                                        reply->error_desc ?: strerror(-reply->error));
}

static bool qmp_connected(const Guest *g _unused_, void *userdata) {
        return qmp_ready(userdata);
}

static void qmp_policy_changed(Guest *g, uint64_t old_interval_usec, void *userdata) {
        GuestQmp *q = userdata;
        uint64_t interval = guest_policy(g)->poll_interval_usec;
        if (interval == old_interval_usec)
                return;
        if (qmp_ready(q))
                (void) qmp_set_stats_polling_interval(q->qmp, NULL, (unsigned) MAX(interval / USEC_PER_SEC, 1),
                                                      command_timeout(g), on_stats_polling_set, q);
        if (q->wheel && guest_phase(g) == GUEST_PHASE_RUNNING)
                tick_arm(q, interval);
}

static void qmp_stop(Guest *g _unused_, void *userdata) {
        GuestQmp *q = userdata;
        q->stopped = true;
        tick_disarm(q);
}

static void guest_qmp_free(void *userdata) {
        GuestQmp *q = userdata;
        if (!q)
                return;
        q->qmp = qmp_client_free(q->qmp);
        q->qga = qga_client_free(q->qga);
        q->hugepage_pass = host_hugepage_pass_free(q->hugepage_pass);
        tick_disarm(q);
        tick_wheel_unref(q->wheel);
        sd_event_source_disable_unref(q->reconnect);
        sd_event_source_disable_unref(q->agent_reconnect);
        free(q->vmem_id);
        free(q->qmp_path);
        free(q->agent_path);
        free(q);
}

static const GuestDriver qmp_driver = {
        .calls = "QMP commands",
        .set_balloon = qmp_set_balloon,
        .set_virtio_mem = qmp_set_virtio_mem,
        .add_dimm = qmp_add_dimm,
        .shutdown_balloon = qmp_shutdown_balloon,
        .connected = qmp_connected,
        .policy_changed = qmp_policy_changed,
        .stop = qmp_stop,
        .free = guest_qmp_free,
};

/* ---- the cycle: every tick, through the guest's cycle API ---- */

static void cycle_fail(Guest *g, const char *what, const QmpReply *reply) {
        char error[160];
        snprintf(error, sizeof(error), "%s: %s", what, reply->error_desc ?: strerror(-reply->error));
        guest_cycle_fail(g, error);
}

static void on_stats(QmpClient *c _unused_, const QmpReply *reply, const QmpGuestStats *stats, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error < 0)
                cycle_fail(q->guest, "guest-stats", reply);
        else {
                RsSample part;
                rs_sample_init(&part);
                if (qmp_sample_from_balloon_stats(&part, stats))
                        guest_sample_add_balloon_stats(q->guest, &part, stats->last_update);
        }
        guest_cycle_step_done(q->guest);
}

/* ---- the host's huge pages under the guest's RAM (policies/hugepage-repair.h) ---- */

static bool hugepage_refused(GuestQmp *q, int r) {
        if (r != -EPERM && r != -EACCES && r != -ENOSYS)
                return false;
        q->hugepage_refused = true;
        log_guest_warning_errno(q->guest, r, "Cannot put back the host's huge pages under the guest's RAM "
                                "(needs CAP_SYS_NICE and ptrace access to QEMU), not trying again: %m");
        return true;
}

static void hugepage_pass_end(GuestQmp *q, int r) {
        Guest *g = q->guest;
        const HostHugepageStats *st = host_hugepage_pass_stats(q->hugepage_pass);

        if (r < 0 && !hugepage_refused(q, r))
                log_guest_info_errno(g, r, "Putting back the host's huge pages under the guest's RAM stopped "
                                     "after %u of %u ranges: %m", st->scanned, st->ranges);
        else if (r >= 0)
                log_guest_info(g, "Host huge pages under the guest's RAM: %u of %u 2 MiB ranges on a huge page "
                               "after a collapse, %u not collapsible now, %.1f MiB of holes filled",
                               st->collapsed, st->ranges, st->failed, (double) st->filled / MIB);
        /* What a stopped pass did counts too: those ranges are on huge pages now. */
        guest_count_hugepage_repair(g, st->collapsed, st->filled);
        q->hugepage_pass = host_hugepage_pass_free(q->hugepage_pass);
}

static void hugepage_step(GuestQmp *q) {
        if (!q->hugepage_pass)
                return;
        int r = host_hugepage_pass_step(q->hugepage_pass, HUGEPAGE_STEP_RANGES, HUGEPAGE_STEP_COLLAPSES);
        if (r <= 0)
                hugepage_pass_end(q, r);
}

/* Fed every balloon size read: starts a pass when one is due. */
static void hugepage_sample(GuestQmp *q, uint64_t actual) {
        Guest *g = q->guest;
        double percent = guest_policy(g)->hugepage_repair_percent;
        uint64_t now;

        if (percent <= 0 || q->qemu_pid <= 0 || q->hugepage_refused || q->hugepage_pass)
                return;
        (void) sd_event_now(guest_event(g), CLOCK_MONOTONIC, &now);
        if (!rs_hugepage_repair_sample(&q->hugepages, actual, now))
                return;
        int r = host_hugepage_pass_new("/proc", q->qemu_pid, percent, &q->hugepage_pass);
        if (r < 0) {
                if (!hugepage_refused(q, r))
                        log_guest_debug_errno(g, r, "No huge-page repair of the guest's RAM: %m");
                return;
        }
        hugepage_step(q);
}

static void on_balloon_info(QmpClient *c _unused_, const QmpReply *reply, const QmpBalloonInfo *info, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error < 0)
                cycle_fail(q->guest, "query-balloon", reply);
        else {
                guest_set_balloon_actual(q->guest, info->actual);
                hugepage_sample(q, info->actual);
        }
        guest_cycle_step_done(q->guest);
}

static void on_memory_devices(QmpClient *c _unused_, const QmpReply *reply, const QmpMemoryDeviceList *list,
                              void *userdata) {
        GuestQmp *q = userdata;
        Guest *g = q->guest;
        const char *vmem_id = guest_vmem_id(g);
        if (reply->error >= 0 && vmem_id) {
                const QmpMemoryDevice *d = qmp_memory_device_list_find(list, vmem_id);
                if (d && d->type == QMP_MEMORY_DEVICE_VIRTIO_MEM)
                        guest_set_vmem_size(g, d->size);
        }
        /* virtio-mem's size is informative here; its failure does not cost the interval. */
        guest_cycle_step_done(g);
}

/* The host's own count of what the guest read from its disks: refaults it does not report
 * still show here, and the time the reads took is what a fault waits for. Optional: a
 * failure costs neither the interval nor the guest. */
static void on_blockstats(QmpClient *c _unused_, const QmpReply *reply, const QmpBlockReads *reads, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error >= 0 && reads)
                guest_sample_add_host_disk_read(q->guest, reads->bytes, reads->operations, reads->time_ns);
        else if (reply->error == -EOPNOTSUPP)
                q->no_blockstats = true;
        else
                log_guest_debug(q->guest, "query-blockstats: %s", reply->error_desc ?: strerror(-reply->error));
        guest_cycle_step_done(q->guest);
}

/* Optional: a failure is logged, not the agent's problem (an agent that refuses one path may
 * serve the others), and tried again at the next refresh. A file that is not a kernel's drops
 * what an earlier one said. */
static void on_agent_zoneinfo(QgaClient *c _unused_, const QmpReply *reply, const GuestZoneinfo *z, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error >= 0 && z) {
                q->zoneinfo = *z;
                RsSample part;
                rs_sample_init(&part);
                qmp_sample_from_zoneinfo(&part, z);
                qmp_sample_from_zoneinfo_lists(&part, z);
                guest_sample_add(q->guest, &part);
        } else {
                if (reply->error == -EBADMSG)
                        q->zoneinfo = (GuestZoneinfo) {};
                log_guest_debug(q->guest, "guest agent: /proc/zoneinfo: %s", reply->error_desc ?: strerror(-reply->error));
        }
        q->agent_busy = false;
        guest_cycle_step_done(q->guest);
}

static bool zoneinfo_due(const GuestQmp *q) {
        return q->zoneinfo_at == 0 || now_usec(CLOCK_MONOTONIC) >= q->zoneinfo_at + GUEST_ZONEINFO_REFRESH_USEC;
}

static void on_agent_psi(QgaClient *c, const QmpReply *reply, const GuestPsi *psi, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error >= 0 && psi) {
                RsSample part;
                rs_sample_init(&part);
                qmp_sample_from_psi(&part, psi);
                guest_sample_add(q->guest, &part);
        }
        /* zoneinfo after PSI, when due: still one read at a time on the agent */
        if (zoneinfo_due(q)) {
                q->zoneinfo_at = now_usec(CLOCK_MONOTONIC);
                if (qga_read_zoneinfo(c, agent_timeout(q->guest), on_agent_zoneinfo, q) >= 0)
                        return;
        }
        q->agent_busy = false;
        guest_cycle_step_done(q->guest);
}

static void on_agent_vmstat(QgaClient *c, const QmpReply *reply, const GuestVmstat *vmstat, void *userdata) {
        GuestQmp *q = userdata;
        Guest *g = q->guest;
        if (reply->error < 0 || !vmstat) {
                char problem[GUEST_AGENT_PROBLEM_MAX];
                utf8_snprintf(problem, sizeof(problem), "guest agent: %s", reply->error_desc ?: strerror(-reply->error));
                guest_set_agent_problem(g, problem);
                q->agent_busy = false;
                guest_cycle_step_done(g);
                return;
        }
        RsSample part;
        rs_sample_init(&part);
        qmp_sample_from_vmstat(&part, vmstat);
        if (q->zoneinfo.zones > 0)
                qmp_sample_from_zoneinfo(&part, &q->zoneinfo); /* the last read's, until the next */
        guest_sample_add(g, &part);
        guest_set_agent_problem(g, "");
        /* PSI only after vmstat finished: never more than one read queued on the agent. */
        if (qga_read_psi_memory(c, agent_timeout(g), on_agent_psi, q) < 0) {
                q->agent_busy = false;
                guest_cycle_step_done(g);
        }
}

/* A Windows guest's agent fails every /proc read: asked once per connection what it runs on
 * before the first (qmp/qga-osinfo.h). Asked again after a timeout; an agent without the command
 * leaves the reads to tell, as before. A failure is the agent's problem, as a failed read is. */
static void on_agent_osinfo(QgaClient *c _unused_, const QmpReply *reply, const QgaOsInfo *info, void *userdata) {
        GuestQmp *q = userdata;
        q->agent_os = reply->error == -ETIMEDOUT ? AGENT_OS_ASK : AGENT_OS_DONE;
        if (reply->error < 0 && reply->error != -EOPNOTSUPP) {
                char problem[GUEST_AGENT_PROBLEM_MAX];
                utf8_snprintf(problem, sizeof(problem), "guest agent: guest-get-osinfo: %s",
                              reply->error_desc ?: strerror(-reply->error));
                guest_set_agent_problem(q->guest, problem);
        }
        guest_set_agent_os(q->guest, info);
}

static void agent_ask_os(GuestQmp *q) {
        if (q->agent_os == AGENT_OS_ASK && guest_policy(q->guest)->guest_agent && q->qga &&
            qga_client_is_ready(q->qga) && qga_get_osinfo(q->qga, agent_timeout(q->guest), on_agent_osinfo, q) >= 0)
                q->agent_os = AGENT_OS_PENDING;
}

static void on_guest_tick(GuestQmp *q, uint64_t usec) {
        Guest *g = q->guest;
        uint64_t now;
        int r;

        /* The next tick one interval after this one was due, not after it ran: otherwise
         * every late wake-up stretches the interval. Fallen behind: one interval from now. */
        (void) sd_event_now(guest_event(g), CLOCK_MONOTONIC, &now);
        uint64_t interval = guest_policy(g)->poll_interval_usec;
        tick_arm(q, usec + interval > now ? usec + interval - now : interval);
        if (!qmp_ready(q))
                return;
        r = guest_cycle_begin(g);
        if (r == -EBUSY)
                log_guest_debug(g, "Previous interval still running, skipping a tick");
        if (r < 0)
                return;
        q->events_in_cycle = 0;
        if (q->qemu_pid > 0) {
                uint64_t rss;
                if (q->host_memory_at == 0 || now >= q->host_memory_at + HOST_SWAP_KSM_REFRESH_USEC) {
                        q->host_memory_at = now;
                        if (host_process_memory("/proc", q->qemu_pid, &q->host_memory) < 0)
                                q->host_memory = (HostProcessMemory) { UINT64_MAX, UINT64_MAX, UINT64_MAX };
                }
                if (host_process_rss("/proc", q->qemu_pid, &rss) >= 0)
                        guest_set_host_memory(g, rss, q->host_memory.swap, q->host_memory.ksm);
                else
                        guest_set_host_memory(g, UINT64_MAX, UINT64_MAX, UINT64_MAX);
        }
        hugepage_step(q);
        agent_follow_policy(q);

        /* The cycle holds one step until every call was sent, so a call failing at once cannot
         * finish it early. */
        uint64_t t = command_timeout(g);
        if (qmp_get_guest_stats(q->qmp, NULL, t, on_stats, q) >= 0)
                guest_cycle_hold(g);
        if (qmp_query_balloon(q->qmp, t, on_balloon_info, q) >= 0)
                guest_cycle_hold(g);
        if (guest_vmem_id(g) && qmp_query_memory_devices(q->qmp, t, on_memory_devices, q) >= 0)
                guest_cycle_hold(g);
        if (!q->no_blockstats && qmp_query_blockstats_reads(q->qmp, t, on_blockstats, q) >= 0)
                guest_cycle_hold(g);
        if (!guest_policy(g)->guest_agent)
                guest_set_agent_problem(g, ""); /* not asked, so nothing to complain about */
        else if (q->qga && !qga_client_is_ready(q->qga) && !qga_client_is_closed(q->qga) && q->agent_connected > 0 &&
                 now > q->agent_connected + AGENT_SILENT_USEC)
                guest_set_agent_problem(g, "guest agent: no answer to guest-sync-delimited");
        agent_ask_os(q);
        if (guest_policy(g)->guest_agent && q->qga && qga_client_is_ready(q->qga) && !q->agent_busy &&
            q->agent_os == AGENT_OS_DONE && guest_agent_reads_procfs(g) &&
            qga_read_vmstat(q->qga, agent_timeout(g), on_agent_vmstat, q) >= 0) {
                q->agent_busy = true;
                guest_cycle_hold(g);
        }
        guest_cycle_step_done(g);
}

/* ---- the ticks: one timer for every QMP guest of a loop ----
 *
 * Each guest keeps its own due time, one interval after the last was due, and its tick may be
 * late by its accuracy: 1 % of the interval, within 1-50 ms, as sd-event would have fired a
 * timer of its own (its default 250 ms would stretch short intervals). What is shared is the
 * wake-up: one time source, at the earliest due time with the smallest accuracy of the guests
 * waiting, and every guest due by then ticks in that one dispatch. sd-event already woke once
 * for every timer due within an accuracy window, but then dispatched each in an iteration of
 * its own, with an epoll_wait() each; and each re-armed timer re-sorted its time queues.
 * Nothing is aligned: guests keep the phases they started with, spread by when each was
 * found and set up, so a wake-up takes the few whose due times fall in one window and the
 * host's QEMUs are not all asked at once. */
struct TickWheel {
        sd_event *event; /* not referenced: the guests are */
        sd_event_source *timer;
        GuestQmp **heap; /* by tick_due, earliest first */
        size_t n, alloc;
        uint64_t min_accuracy; /* of the guests in heap, UINT64_MAX when none */
        uint64_t armed_at, armed_accuracy; /* what timer is set to, armed_at UINT64_MAX: off */
        unsigned n_ref;
        bool dispatching; /* on_ticks() arms the timer once, when its guests have ticked */
        TickWheel *next;
};

static TickWheel *tick_wheels;

static TickWheel *tick_wheel_get(sd_event *event) {
        for (TickWheel *w = tick_wheels; w; w = w->next)
                if (w->event == event) {
                        w->n_ref++;
                        return w;
                }
        TickWheel *w = calloc(1, sizeof(*w));
        if (!w)
                return NULL;
        *w = (TickWheel) { .event = event, .min_accuracy = UINT64_MAX, .armed_at = UINT64_MAX, .n_ref = 1,
                           .next = tick_wheels };
        tick_wheels = w;
        return w;
}

static void tick_wheel_unref(TickWheel *w) {
        if (!w || --w->n_ref > 0)
                return;
        for (TickWheel **p = &tick_wheels; *p; p = &(*p)->next)
                if (*p == w) {
                        *p = w->next;
                        break;
                }
        sd_event_source_disable_unref(w->timer);
        free(w->heap);
        free(w);
}

static void heap_set(TickWheel *w, size_t i, GuestQmp *q) {
        w->heap[i] = q;
        q->tick_index = i;
}

static void heap_sift_up(TickWheel *w, size_t i) {
        GuestQmp *q = w->heap[i];
        while (i > 0 && w->heap[(i - 1) / 2]->tick_due > q->tick_due) {
                heap_set(w, i, w->heap[(i - 1) / 2]);
                i = (i - 1) / 2;
        }
        heap_set(w, i, q);
}

static void heap_sift_down(TickWheel *w, size_t i) {
        GuestQmp *q = w->heap[i];
        for (;;) {
                size_t c = 2 * i + 1;
                if (c >= w->n)
                        break;
                if (c + 1 < w->n && w->heap[c + 1]->tick_due < w->heap[c]->tick_due)
                        c++;
                if (w->heap[c]->tick_due >= q->tick_due)
                        break;
                heap_set(w, i, w->heap[c]);
                i = c;
        }
        heap_set(w, i, q);
}

static void heap_remove(TickWheel *w, GuestQmp *q) {
        size_t i = q->tick_index;
        GuestQmp *last = w->heap[--w->n];

        q->tick_index = SIZE_MAX;
        if (i == w->n)
                return;
        heap_set(w, i, last);
        heap_sift_up(w, i);
        heap_sift_down(w, last->tick_index);
}

static int on_ticks(sd_event_source *s, uint64_t usec, void *userdata);

static void tick_wheel_arm(TickWheel *w) {
        if (w->dispatching)
                return;
        if (w->n == 0) {
                w->min_accuracy = UINT64_MAX;
                if (w->armed_at != UINT64_MAX)
                        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_OFF);
                w->armed_at = UINT64_MAX;
                return;
        }
        uint64_t at = w->heap[0]->tick_due;
        if (at == w->armed_at && w->min_accuracy == w->armed_accuracy)
                return;
        /* Woken by due + the smallest accuracy, no guest is later than its own accuracy allows. */
        if (event_reset_time(w->event, &w->timer, CLOCK_MONOTONIC, at, w->min_accuracy, on_ticks, w, "guest-ticks") < 0) {
                w->armed_at = UINT64_MAX; /* tried again at the next arm */
                return;
        }
        w->armed_at = at;
        w->armed_accuracy = w->min_accuracy;
}

static int on_ticks(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        TickWheel *w = userdata;
        uint64_t now;

        if (sd_event_now(w->event, CLOCK_MONOTONIC, &now) < 0)
                return 0;
        w->n_ref++; /* a tick may free its guest, the last of them the wheel */
        w->armed_at = UINT64_MAX; /* a oneshot that fired */
        w->dispatching = true;
        /* A tick re-arms its guest at least an interval ahead: each guest ticks once here. */
        while (w->n > 0 && w->heap[0]->tick_due <= now) {
                GuestQmp *q = w->heap[0];
                uint64_t due = q->tick_due;

                heap_remove(w, q);
                on_guest_tick(q, due);
        }
        w->dispatching = false;
        tick_wheel_arm(w);
        tick_wheel_unref(w);
        return 0;
}

static void tick_arm(GuestQmp *q, uint64_t usec) {
        Guest *g = q->guest;
        uint64_t now;

        if (q->stopped)
                return;
        if (!q->wheel && !(q->wheel = tick_wheel_get(guest_event(g)))) {
                log_oom();
                return;
        }
        TickWheel *w = q->wheel;
        if (q->tick_index == SIZE_MAX && w->n == w->alloc) {
                size_t alloc = MAX(w->alloc * 2, (size_t) 16);
                GuestQmp **heap = reallocarray(w->heap, alloc, sizeof(*heap));
                if (!heap) {
                        log_oom();
                        return;
                }
                w->heap = heap;
                w->alloc = alloc;
        }
        if (sd_event_now(guest_event(g), CLOCK_MONOTONIC, &now) < 0)
                return;
        /* sd-event's default accuracy (250 ms) would stretch short intervals and line every
         * guest's tick up with the others: 1 % of the interval, within 1-50 ms. */
        uint64_t accuracy = CLAMP(guest_policy(g)->poll_interval_usec / 100, USEC_PER_MSEC, 50 * USEC_PER_MSEC);
        q->tick_due = usec > UINT64_MAX - now ? UINT64_MAX : now + usec;
        w->min_accuracy = MIN(w->min_accuracy, accuracy);
        if (q->tick_index == SIZE_MAX) {
                w->n++;
                heap_set(w, w->n - 1, q);
                heap_sift_up(w, w->n - 1);
        } else {
                heap_sift_up(w, q->tick_index);
                heap_sift_down(w, q->tick_index);
        }
        tick_wheel_arm(w);
}

static void tick_disarm(GuestQmp *q) {
        if (!q->wheel || q->tick_index == SIZE_MAX)
                return;
        heap_remove(q->wheel, q);
        tick_wheel_arm(q->wheel);
}

/* ---- connection and setup ---- */

/* Everything setup asked has answered: the guest's memory is known, the decision core takes
 * over (guest_attach()) and the ticks begin. */
static void setup_done(GuestQmp *q) {
        Guest *g = q->guest;

        if (q->setup_pending == 0 || --q->setup_pending > 0)
                return;
        /* The connection is going away: the disconnect callback takes it from here. */
        if (!qmp_ready(q))
                return;
        q->res.vmem_id = q->vmem_id;
        q->res.agent = q->agent_path;
        if (q->no_balloon) {
                /* Nothing to resize with: left alone until QEMU comes back with a balloon (a new
                 * connection asks again). No ticks, so nothing is sent to it. */
                guest_set_faulty(g, GUEST_FAULT_SKIPPED, "no balloon device");
                return;
        }
        if (q->res.base_memory == 0 && q->res.balloon_actual == 0) {
                /* With why, when a setup command failed (e.g. timed out: a QEMU that never answers). */
                char fault[256];
                snprintf(fault, sizeof(fault), "QEMU reported no memory size%s%s", q->setup_error[0] ? ": " : "",
                         q->setup_error);
                guest_set_disconnected(g, fault);
                qmp_client_close(q->qmp);
                schedule_reconnect(q);
                return;
        }
        if (guest_attach(g, &q->res) < 0)
                return;
        q->backoff_usec = 0;
        tick_arm(q, 0);
}

static void on_polling_set(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error < 0)
                log_named_guest_warning(guest_name(q->guest), NULL, "Could not enable balloon stats polling: %s",
                                        reply->error_desc ?: strerror(-reply->error));
        setup_done(q);
}

static void on_fpr(QmpClient *c _unused_, const QmpReply *reply, bool value, void *userdata) {
        GuestQmp *q = userdata;
        q->res.fpr_known = reply->error >= 0;
        q->res.free_page_reporting = reply->error >= 0 && value;
        setup_done(q);
}

static void on_deflate_on_oom(QmpClient *c _unused_, const QmpReply *reply, bool value, void *userdata) {
        GuestQmp *q = userdata;
        q->res.deflate_on_oom_known = reply->error >= 0;
        q->res.deflate_on_oom = reply->error >= 0 && value;
        setup_done(q);
}

static void on_size_summary(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        GuestQmp *q = userdata;
        uint64_t base;
        if (reply->error >= 0 && json_member_get_u64(reply->result, "base-memory", &base) >= 0 && base > 0 &&
            base < UINT64_MAX / 4)
                q->res.base_memory = base;
        setup_done(q);
}

static void on_setup_balloon(QmpClient *c _unused_, const QmpReply *reply, const QmpBalloonInfo *info,
                             void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error >= 0)
                q->res.balloon_actual = info->actual;
        else
                snprintf(q->setup_error, sizeof(q->setup_error), "query-balloon: %s",
                         reply->error_desc ?: strerror(-reply->error));
        /* DeviceNotActive: QEMU runs without a balloon device, not a balloon that failed. */
        q->no_balloon = reply->error == -ENXIO;
        setup_done(q);
}

/* What the memory devices take of maxmem and of the slots, and the first free rs-dimmN. */
static void count_memory_devices(GuestQmp *q, const QmpMemoryDeviceList *list) {
        GuestResources *res = &q->res;
        res->devices_bytes = res->dimm_bytes = 0;
        res->dimm_count = 0;
        q->dimm_next_id = 0;
        for (size_t i = 0; i < list->n_devices; i++) {
                const QmpMemoryDevice *d = &list->devices[i];
                /* virtio-mem reserves its whole region up front. */
                uint64_t size = d->type == QMP_MEMORY_DEVICE_VIRTIO_MEM ? MAX(d->max_size, d->size) : d->size;
                res->devices_bytes = size > UINT64_MAX / 4 - res->devices_bytes ? UINT64_MAX / 4
                                                                               : res->devices_bytes + size;
                if (d->type != QMP_MEMORY_DEVICE_DIMM && d->type != QMP_MEMORY_DEVICE_NVDIMM)
                        continue;
                res->dimm_count++;
                if (d->type == QMP_MEMORY_DEVICE_DIMM)
                        res->dimm_bytes = MIN(res->dimm_bytes + d->size, UINT64_MAX / 4);
                unsigned n;
                char tail;
                if (d->id && sscanf(d->id, "rs-dimm%u%c", &n, &tail) == 1 && n < UINT_MAX - 1)
                        q->dimm_next_id = MAX(q->dimm_next_id, n + 1);
        }
}

static void on_setup_machine_memory(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        GuestQmp *q = userdata;
        uint64_t max_size, slots;
        q->res.mem_max_size = 0;
        q->res.mem_slots = 0;
        if (reply->error >= 0 && json_member_get_u64(reply->result, "max-size", &max_size) >= 0 &&
            json_member_get_u64(reply->result, "slots", &slots) >= 0 && max_size < UINT64_MAX / 4 && slots <= 256) {
                q->res.mem_max_size = max_size;
                q->res.mem_slots = (unsigned) slots;
        } else
                log_named_guest_info(guest_name(q->guest), NULL,
                                     "allow-dimm: QEMU does not tell maxmem and slots (%s): no DIMM hotplug",
                                     reply->error < 0 ? reply->error_desc ?: strerror(-reply->error)
                                                      : "no max-size and slots: -m without maxmem");
        setup_done(q);
}

static void on_setup_devices(QmpClient *c _unused_, const QmpReply *reply, const QmpMemoryDeviceList *list,
                             void *userdata) {
        GuestQmp *q = userdata;
        if (reply->error >= 0) {
                count_memory_devices(q, list);
                for (size_t i = 0; i < list->n_devices; i++) {
                        const QmpMemoryDevice *d = &list->devices[i];
                        if (d->type != QMP_MEMORY_DEVICE_VIRTIO_MEM || !d->id || d->block_size == 0)
                                continue;
                        free(q->vmem_id);
                        q->vmem_id = strdup(d->id);
                        q->res.vmem_size = d->size;
                        q->res.vmem_requested = qmp_value_is_known(d->requested_size) ? d->requested_size : d->size;
                        q->res.vmem_max = d->max_size;
                        q->res.vmem_block = d->block_size;
                        break;
                }
        }
        setup_done(q);
}

static void on_qmp_ready(QmpClient *c, void *userdata) {
        GuestQmp *q = userdata;
        Guest *g = q->guest;
        uint64_t t = command_timeout(g);
        unsigned interval = (unsigned) MAX(guest_policy(g)->poll_interval_usec / USEC_PER_SEC, 1);

        free(q->vmem_id);
        q->vmem_id = NULL;
        q->res = (GuestResources) {};
        q->no_balloon = false;
        q->setup_error[0] = '\0';
        q->setup_pending = 1;
        if (qmp_set_stats_polling_interval(c, NULL, interval, t, on_polling_set, q) >= 0)
                q->setup_pending++;
        if (qmp_qom_get_bool(c, NULL, QMP_BALLOON_FREE_PAGE_REPORTING, t, on_fpr, q) >= 0)
                q->setup_pending++;
        if (qmp_qom_get_bool(c, NULL, QMP_BALLOON_DEFLATE_ON_OOM, t, on_deflate_on_oom, q) >= 0)
                q->setup_pending++;
        if (qmp_client_execute(c, "query-memory-size-summary", NULL, t, on_size_summary, q) >= 0)
                q->setup_pending++;
        if (qmp_query_balloon(c, t, on_setup_balloon, q) >= 0)
                q->setup_pending++;
        if (qmp_query_memory_devices(c, t, on_setup_devices, q) >= 0)
                q->setup_pending++;
        /* Only asked when DIMMs may be added: -m's maxmem and slots (QEMU 7.1+). */
        if (guest_policy(g)->allow_dimm && qmp_qom_get(c, "/machine", "memory", t, on_setup_machine_memory, q) >= 0)
                q->setup_pending++;
        setup_done(q);
}

static void on_qmp_event(QmpClient *c _unused_, const QmpEvent *event, void *userdata) {
        GuestQmp *q = userdata;
        Guest *g = q->guest;
        QmpTypedEvent t;
        if (++q->events_in_cycle == EVENT_FLOOD_PER_CYCLE + 1)
                guest_sample_report_problem(g, "QMP event flood: more than %u events in one interval",
                                            EVENT_FLOOD_PER_CYCLE);
        if (qmp_event_parse(event, &t) < 0)
                return;
        if (t.type == QMP_EVENT_BALLOON_CHANGE)
                guest_set_balloon_actual(g, t.balloon_change.actual);
        else if (t.type == QMP_EVENT_SHUTDOWN)
                log_guest_info(g, "QEMU is shutting down (%s)", t.shutdown.reason ?: "no reason given");
}

static void on_qmp_disconnect(QmpClient *c _unused_, int error, const char *reason, void *userdata) {
        GuestQmp *q = userdata;
        char fault[256];
        snprintf(fault, sizeof(fault), "QMP connection lost: %s", reason ?: strerror(-error));
        log_guest_warning(q->guest, "%s", fault);
        /* A cycle still running is left alone: an agent read may still complete it, which
         * then does nothing because the guest is not running. */
        guest_set_disconnected(q->guest, fault);
        q->setup_pending = 0;
        schedule_reconnect(q);
}

static int connect_qmp(GuestQmp *q) {
        static const QmpClientCallbacks callbacks = {
                .ready = on_qmp_ready,
                .event = on_qmp_event,
                .disconnect = on_qmp_disconnect,
        };
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        Guest *g = q->guest;
        int fd, r;

        q->qmp = qmp_client_free(q->qmp);
        guest_set_connecting(g, NULL);

        if (strlen(q->qmp_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, q->qmp_path, strlen(q->qmp_path));

        /* Connected here rather than by the client, to learn QEMU's pid (SO_PEERCRED). A unix
         * socket connect completes at once or fails (ECONNREFUSED right after discovery). */
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                r = errno == EINPROGRESS ? -EAGAIN : -errno;
                close(fd);
                return r;
        }
        pid_t pid;
        char why[160];
        if (!socket_trust_peer(q->trust, fd, &pid, why, sizeof(why))) {
                log_guest_warning(g, "Refusing QMP socket %s: %s", q->qmp_path, why);
                close(fd);
                return -EPERM;
        }
        q->qemu_pid = pid;
        q->host_memory_at = 0; /* another process: its swap and KSM read at the next tick */
        /* Perhaps another QEMU: its huge pages start from nothing known. */
        q->hugepage_pass = host_hugepage_pass_free(q->hugepage_pass);
        q->hugepage_refused = false;
        rs_hugepage_repair_init(&q->hugepages);

        r = qmp_client_new(&q->qmp, guest_event(g));
        if (r < 0) {
                close(fd);
                return r;
        }
        qmp_client_set_callbacks(q->qmp, &callbacks, q);
        qmp_client_set_handshake_timeout(q->qmp, HANDSHAKE_TIMEOUT_USEC);
        qmp_client_set_default_timeout(q->qmp, command_timeout(g));
        r = qmp_client_connect_fd(q->qmp, fd);
        if (r < 0) {
                close(fd);
                q->qmp = qmp_client_free(q->qmp);
                return r;
        }
        return 0;
}

static void connect_failed(GuestQmp *q, int error) {
        char fault[256];
        snprintf(fault, sizeof(fault), "cannot connect to %s: %s", q->qmp_path, strerror(-error));
        if (q->backoff_usec >= 4 * RECONNECT_MIN_USEC)
                log_guest_warning(q->guest, "%s", fault);
        /* The first failure is QEMU not listening yet: connecting, not faulty. */
        if (q->backoff_usec > 0)
                guest_set_disconnected(q->guest, fault);
        else
                guest_set_connecting(q->guest, fault);
        schedule_reconnect(q);
}

static int on_reconnect(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        GuestQmp *q = userdata;
        int r = connect_qmp(q);
        if (r < 0)
                connect_failed(q, r);
        return 0;
}

static void schedule_reconnect(GuestQmp *q) {
        q->backoff_usec = q->backoff_usec ? MIN(q->backoff_usec * 2, RECONNECT_MAX_USEC) : RECONNECT_MIN_USEC;
        (void) event_reset_time_relative(guest_event(q->guest), &q->reconnect, CLOCK_MONOTONIC, q->backoff_usec, 0,
                                         on_reconnect, q, "guest-reconnect");
}

/* ---- the agent ---- */

static void on_agent_ready(QgaClient *c _unused_, void *userdata) {
        GuestQmp *q = userdata;
        guest_set_agent_answers(q->guest, true);
        log_guest_info(q->guest, "Guest agent answers on %s", q->agent_path);
        q->agent_os = AGENT_OS_ASK;
        agent_ask_os(q);
}

static void on_agent_disconnect(QgaClient *c _unused_, int error, const char *reason, void *userdata) {
        GuestQmp *q = userdata;
        Guest *g = q->guest;
        log_guest_debug(g, "Guest agent connection lost: %s", reason ?: strerror(-error));
        guest_set_agent_answers(g, false);
        q->agent_busy = false;
        if (guest_policy(g)->guest_agent && !guest_agent_problem(g)) { /* a failed read that broke it said more */
                char problem[GUEST_AGENT_PROBLEM_MAX];
                utf8_snprintf(problem, sizeof(problem), "guest agent: connection lost: %s", reason ?: strerror(-error));
                guest_set_agent_problem(g, problem);
        }
        q->agent_connected = 0;
        agent_schedule_reconnect(q);
}

static int agent_connect(GuestQmp *q) {
        static const QgaClientCallbacks callbacks = {
                .ready = on_agent_ready,
                .disconnect = on_agent_disconnect,
        };
        int r;

        q->qga = qga_client_free(q->qga);
        q->agent_busy = false;
        q->agent_os = AGENT_OS_ASK;
        /* a new connection may be a new kernel's (a reboot): its own zoneinfo is read */
        q->zoneinfo = (GuestZoneinfo) {};
        q->zoneinfo_at = 0;
        r = qga_client_new(&q->qga, guest_event(q->guest));
        if (r < 0)
                return r;
        qga_client_set_callbacks(q->qga, &callbacks, q);
        r = qga_client_connect_path(q->qga, q->agent_path);
        if (r < 0) {
                q->qga = qga_client_free(q->qga);
                return r;
        }
        q->agent_connected = now_usec(CLOCK_MONOTONIC);
        return 0;
}

static bool agent_wanted(const GuestQmp *q) {
        return q->agent_path && guest_policy(q->guest)->guest_agent;
}

static int on_agent_reconnect(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        GuestQmp *q = userdata;
        if (!agent_wanted(q))
                return 0; /* the policy changed meanwhile: agent_follow_policy() connects if it changes back */
        if (agent_connect(q) < 0)
                agent_schedule_reconnect(q);
        return 0;
}

static void agent_schedule_reconnect(GuestQmp *q) {
        (void) event_reset_time_relative(guest_event(q->guest), &q->agent_reconnect, CLOCK_MONOTONIC,
                                         AGENT_RECONNECT_USEC, 0, on_agent_reconnect, q, "agent-reconnect");
}

/* With guest-agent = no the daemon keeps no connection to the agent at all: the channel is the
 * guest's to write, so a guest whose agent is not wanted gets nothing of the daemon's to spend.
 * Followed at each tick, and only while no read is under way (its callback ends the cycle's
 * step); turned on again, the agent is connected at once. */
static void agent_follow_policy(GuestQmp *q) {
        int reconnect = SD_EVENT_OFF;

        if (!agent_wanted(q)) {
                (void) sd_event_source_set_enabled(q->agent_reconnect, SD_EVENT_OFF);
                if (q->qga && !q->agent_busy) {
                        q->qga = qga_client_free(q->qga);
                        q->agent_connected = 0;
                        guest_set_agent_answers(q->guest, false);
                        log_guest_info(q->guest, "Guest agent disconnected: the policy says guest-agent = no");
                }
                return;
        }
        if (q->agent_reconnect)
                (void) sd_event_source_get_enabled(q->agent_reconnect, &reconnect);
        if (!q->qga && reconnect == SD_EVENT_OFF && agent_connect(q) < 0)
                agent_schedule_reconnect(q);
}

/* ---- public ---- */

int guest_qmp_new(sd_event *event, const char *name, const char *qmp_path, const char *agent_path,
                  const SocketTrust *trust, const char *state_dir, const RsPolicy *policy, const GuestHooks *hooks,
                  void *userdata, Guest **ret) {
        GuestQmp *q = calloc(1, sizeof(*q));
        int r;

        if (!q)
                return -ENOMEM;
        q->tick_index = SIZE_MAX;
        q->qmp_path = strdup(qmp_path);
        q->agent_path = agent_path ? strdup(agent_path) : NULL;
        q->trust = trust;
        if (!q->qmp_path || (agent_path && !q->agent_path)) {
                guest_qmp_free(q);
                return -ENOMEM;
        }
        r = guest_new(event, GUEST_SOURCE_QEMU, name, NULL, qmp_path, state_dir, policy, hooks, userdata, &qmp_driver,
                      q, &q->guest);
        if (r < 0) {
                guest_qmp_free(q);
                return r;
        }
        *ret = q->guest;
        return 0;
}

int guest_qmp_start(Guest *g) {
        GuestQmp *q = guest_driver_data(g, &qmp_driver);
        if (!q)
                return -EINVAL;
        int r = connect_qmp(q);
        if (r < 0)
                /* Typically ECONNREFUSED: QEMU bound the socket but does not listen yet. */
                connect_failed(q, r);
        if (agent_wanted(q) && agent_connect(q) < 0)
                agent_schedule_reconnect(q);
        return 0;
}
