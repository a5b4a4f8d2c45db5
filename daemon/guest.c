/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/guest.h"
#include "daemon/host.h"
#include "daemon/log.h"
#include "common/size.h"
#include "common/time-util.h"
#include "daemon/state-file.h"
#include "policies/actuation.h"
#include "qmp/json-util.h"
#include "qmp/qga-commands.h"
#include "qmp/qmp-commands.h"
#include "qmp/qmp-events.h"

#define RECONNECT_MIN_USEC (1 * USEC_PER_SEC)
#define RECONNECT_MAX_USEC (30 * USEC_PER_SEC)
#define AGENT_RECONNECT_USEC (10 * USEC_PER_SEC)
/* Connected this long and never synced: the agent hangs (or none runs behind the socket). */
#define AGENT_SILENT_USEC (2 * QGA_DEFAULT_SYNC_TIMEOUT_USEC)
#define HANDSHAKE_TIMEOUT_USEC (5 * USEC_PER_SEC)
/* A balloon that moved less than this over STALL_CYCLES cycles while away from its target has
 * stopped: the guest cannot give more (or take back) right now. */
#define STALL_MOVE_BYTES (2 * MIB)
#define STALL_CYCLES 4
/* A guest still booting has no balloon driver yet: QEMU reports no stats (last-update 0) and
 * the balloon cannot move, which is not the guest refusing to give memory. Until the driver
 * shows (stats, or the balloon moving), for at most this long, a balloon short of its target
 * counts neither as pushback nor as a stall. */
#define BALLOON_DRIVER_GRACE_USEC (60 * USEC_PER_SEC)
/* The state file is rewritten when something changed, and at least this often. */
#define STATE_SAVE_USEC (60 * USEC_PER_SEC)
/* Untrusted input: stats whose last-update stays put this many cycles are stale; dated further
 * ahead than this, they lie; more events than this in one interval are a flood; a data fault
 * clears after this many clean cycles. */
#define STATS_STALE_CYCLES 5
#define STATS_FUTURE_SLACK_SEC 300
#define EVENT_FLOOD_PER_CYCLE 1000
#define DATA_CLEAN_CYCLES 3

static char *fmt_size(char *buf, size_t len, uint64_t bytes) {
        if (bytes == RS_UNKNOWN)
                return strncpy(buf, "?", len);
        return format_size(buf, len, bytes);
}

/* Each QMP call gets the poll interval as its timeout, within limits: a guest slower than
 * that would miss the next tick anyway. */
static uint64_t command_timeout(const Guest *g) {
        return CLAMP(g->policy.poll_interval_usec, 1 * USEC_PER_SEC, 10 * USEC_PER_SEC);
}

static void guest_schedule_reconnect(Guest *g);
static int guest_setup_finish(Guest *g);
static void guest_tick_arm(Guest *g, uint64_t usec);
static void agent_schedule_reconnect(Guest *g);

static void guest_notify(Guest *g, bool estimate_changed) {
        if (g->hooks && g->hooks->updated)
                g->hooks->updated(g, estimate_changed, g->userdata);
}

static void guest_set_fault(Guest *g, const char *fmt, ...) _printf_(2, 3);
static void guest_set_fault(Guest *g, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->fault, sizeof(g->fault), fmt, ap);
        va_end(ap);
}

/* ---- state file ---- */

static int64_t u64_to_field(uint64_t v) {
        return v == RS_UNKNOWN ? -1 : (int64_t) MIN(v, (uint64_t) INT64_MAX);
}

static uint64_t field_to_u64(int64_t v) {
        return v < 0 ? RS_UNKNOWN : (uint64_t) v;
}

int guest_save_state(Guest *g) {
        GuestStateRecord rec;
        RsGuestSnapshot s;
        int r;

        if (!g->state_dir || !g->core)
                return 0;
        rs_guest_snapshot(g->core, &s);
        r = guest_state_init(&rec, g->name, NULL);
        if (r < 0)
                return r;
        snprintf(rec.state, sizeof(rec.state), "%s", rs_state_to_string(rs_guest_state(g->core)));
        rec.saved_at_usec = now_usec(CLOCK_REALTIME);
        rec.target_bytes = g->target;
        (void) guest_state_set_int(&rec, "magic", s.magic);
        (void) guest_state_set_int(&rec, "version", s.version);
        (void) guest_state_set_int(&rec, "guest_max", u64_to_field(s.guest_max));
        (void) guest_state_set_int(&rec, "estimate", u64_to_field(s.estimate));
        (void) guest_state_set_int(&rec, "lower", u64_to_field(s.lower));
        (void) guest_state_set_int(&rec, "upper", u64_to_field(s.upper));
        (void) guest_state_set_int(&rec, "scan_onset", u64_to_field(s.scan_onset));
        (void) guest_state_set_int(&rec, "target", u64_to_field(s.target));
        (void) guest_state_set_double(&rec, "baseline_useful", isfinite(s.baseline_useful) ? s.baseline_useful : 0);
        (void) guest_state_set_double(&rec, "baseline_scan", isfinite(s.baseline_scan) ? s.baseline_scan : 0);
        (void) guest_state_set_double(&rec, "baseline_psi", isfinite(s.baseline_psi) ? s.baseline_psi : 0);
        (void) guest_state_set_int(&rec, "baseline_known", s.baseline_known);
        (void) guest_state_set_int(&rec, "tier", s.tier);
        (void) guest_state_set_int(&rec, "streaming", s.streaming);
        (void) guest_state_set_int(&rec, "hold_doublings", s.hold_doublings);

        r = state_file_save(g->state_dir, &rec);
        if (r < 0)
                return log_named_guest_warning_errno(g->name, NULL, r, "Failed to save the state file in %s: %m",
                                               g->state_dir);
        g->saved_usec = now_usec(CLOCK_MONOTONIC);
        g->saved_state = rs_guest_state(g->core);
        g->saved_estimate = rs_guest_estimate(g->core)->estimate;
        return 0;
}

static int get_u64_field(const GuestStateRecord *rec, const char *key, uint64_t *ret) {
        int64_t v;
        int r = guest_state_get_int(rec, key, &v);
        if (r < 0)
                return r;
        *ret = field_to_u64(v);
        return 0;
}

static int guest_restore_state(Guest *g) {
        GuestStateRecord rec;
        RsGuestSnapshot s = {};
        int64_t v;
        int r;

        if (!g->state_dir)
                return 0;
        r = state_file_load(g->state_dir, g->name, &rec);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return log_named_guest_warning_errno(g->name, NULL, r, "Ignoring the state file: %m");

        if (guest_state_get_int(&rec, "magic", &v) < 0 || (uint64_t) v != RS_SNAPSHOT_MAGIC ||
            guest_state_get_int(&rec, "version", &v) < 0 || v != RS_SNAPSHOT_VERSION)
                return log_named_guest_warning_errno(g->name, NULL, EPROTONOSUPPORT,
                                               "Ignoring the state file: not a snapshot this daemon can read");
        s.magic = RS_SNAPSHOT_MAGIC;
        s.version = RS_SNAPSHOT_VERSION;
        if (get_u64_field(&rec, "guest_max", &s.guest_max) < 0 || get_u64_field(&rec, "estimate", &s.estimate) < 0 ||
            get_u64_field(&rec, "lower", &s.lower) < 0 || get_u64_field(&rec, "upper", &s.upper) < 0 ||
            get_u64_field(&rec, "scan_onset", &s.scan_onset) < 0 || get_u64_field(&rec, "target", &s.target) < 0 ||
            guest_state_get_double(&rec, "baseline_useful", &s.baseline_useful) < 0 ||
            guest_state_get_double(&rec, "baseline_scan", &s.baseline_scan) < 0 ||
            guest_state_get_double(&rec, "baseline_psi", &s.baseline_psi) < 0)
                return log_named_guest_warning_errno(g->name, NULL, EBADMSG, "Ignoring the state file: fields missing");
        if (guest_state_get_int(&rec, "baseline_known", &v) >= 0)
                s.baseline_known = (uint32_t) v;
        if (guest_state_get_int(&rec, "tier", &v) >= 0 && v >= 0 && v < _RS_TIER_MAX)
                s.tier = (uint32_t) v;
        if (guest_state_get_int(&rec, "streaming", &v) >= 0)
                s.streaming = v != 0;
        if (guest_state_get_int(&rec, "hold_doublings", &v) >= 0 && v >= 0 && v <= 64)
                s.hold_doublings = (uint32_t) v; /* absent in older files: 0, the policy's hold */

        r = rs_guest_restore(g->core, &s, now_usec(CLOCK_MONOTONIC));
        if (r < 0)
                return log_named_guest_warning_errno(g->name, NULL, r,
                                               "Ignoring the state file: it was saved for another guest size");
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];
        log_named_guest_info(g->name, rs_state_to_string(rs_guest_state(g->core)),
                       "Resumed from the state file: estimate %s, target %s",
                       fmt_size(b1, sizeof(b1), s.estimate), fmt_size(b2, sizeof(b2), s.target));
        return 1;
}

/* ---- history ---- */

static void history_push(Guest *g, uint64_t realtime) {
        const RsEstimate *e = rs_guest_estimate(g->core);
        GuestHistoryPoint *p = &g->history[(g->history_head + g->history_n) % GUEST_HISTORY_MAX];

        *p = (GuestHistoryPoint) {
                .realtime_usec = realtime,
                .target = g->target ?: g->actual,
                .actual = g->actual,
                .estimate = e->estimate == RS_UNKNOWN ? 0 : e->estimate,
        };
        if (g->history_n < GUEST_HISTORY_MAX)
                g->history_n++;
        else
                g->history_head = (g->history_head + 1) % GUEST_HISTORY_MAX;
}

size_t guest_history(const Guest *g, GuestHistoryPoint *out, size_t n) {
        size_t k = MIN(n, g->history_n);
        size_t skip = g->history_n - k; /* the newest k */
        for (size_t i = 0; i < k; i++)
                out[i] = g->history[(g->history_head + skip + i) % GUEST_HISTORY_MAX];
        return k;
}

/* ---- actuation ---- */

static void on_balloon_set(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        Guest *g = userdata;
        if (reply->error < 0)
                log_guest_warning_errno(g, reply->error, "balloon failed: %s",
                                        reply->error_desc ?: "unknown error");
}

static void on_vmem_set(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        Guest *g = userdata;
        if (reply->error < 0)
                log_guest_warning_errno(g, reply->error,
                                        "virtio-mem resize failed: %s", reply->error_desc ?: "unknown error");
}

/* QEMU's balloon covers the boot memory only: a QMP guest's size is what the balloon leaves of
 * it plus what virtio-mem has plugged (measured with QEMU 7.2: plugging 256 MiB leaves
 * query-balloon's actual where it was). */
static void guest_update_size(Guest *g) {
        if (g->balloon_actual > 0)
                g->actual = g->balloon_actual + (g->vmem_id ? g->vmem_size : 0);
}

static int guest_send_balloon(Guest *g, uint64_t bytes) {
        int r;

        /* Never below the floor, whatever asked for it. */
        bytes = MAX(bytes, guest_floor(g));
        /* The balloon's target is the boot memory's share of the size (QMP and libvirt alike:
         * the plan sets virtio-mem before the balloon). */
        uint64_t plugged = g->vmem_id ? g->vmem_requested : 0;
        if (bytes <= plugged) {
                log_guest_debug(g, "virtio-mem alone exceeds the target: balloon left alone");
                return 0;
        }
        r = g->driver ? g->driver->set_balloon(g, bytes - plugged, g->driver_data)
                      : qmp_balloon_set_target(g->qmp, bytes - plugged, command_timeout(g), on_balloon_set, g);
        if (r < 0)
                return r;
        g->balloon_target = bytes;
        return 0;
}

/* Whether the guest's balloon driver has not shown yet (see BALLOON_DRIVER_GRACE_USEC). */
static bool guest_balloon_driver_pending(Guest *g, uint64_t now) {
        if (!g->balloon_driver_seen &&
            (g->stats_last_update != 0 || (g->actual > 0 && g->first_actual > 0 &&
                                           (g->actual + STALL_MOVE_BYTES <= g->first_actual ||
                                            g->actual >= g->first_actual + STALL_MOVE_BYTES))))
                g->balloon_driver_seen = true;
        return !g->balloon_driver_seen && now < g->running_since + BALLOON_DRIVER_GRACE_USEC;
}

/* A balloon away from its target that no longer moves: the guest cannot give (or take) more.
 * Returns true when the guest is (still) stalled. */
static bool guest_check_stall(Guest *g, uint64_t now) {
        uint64_t tolerance = MAX(4 * MIB, g->balloon_target / 200);
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];

        if (g->stalled) {
                /* Pushing resumes when the core asks for no less than where it stuck, or when
                 * the hold time has passed (the guest may have freed memory since). */
                if (g->want >= g->stall_size || now >= g->stall_until) {
                        /* The fault stays on show until the balloon moves away from where it stuck:
                         * a balloon that never moves stays reported. */
                        g->stalled = false;
                        g->stall_count = 0;
                        log_guest_info(g, "Balloon no longer held back");
                        return false;
                }
                return true;
        }
        if (g->stall_size > 0 && g->actual > 0 &&
            (g->actual + 2 * STALL_MOVE_BYTES <= g->stall_size || g->actual >= g->stall_size + 2 * STALL_MOVE_BYTES)) {
                if (strncmp(g->fault, "balloon stopped", strlen("balloon stopped")) == 0)
                        g->fault[0] = '\0';
                g->stall_size = 0;
        }

        if (g->balloon_target == 0 || g->actual == 0 ||
            (g->actual <= g->balloon_target + tolerance && g->actual + tolerance >= g->balloon_target)) {
                g->stall_count = 0;
                g->stall_prev_actual = g->actual;
                return false;
        }
        bool toward = g->actual > g->balloon_target ? g->stall_prev_actual >= g->actual + STALL_MOVE_BYTES
                                                     : g->actual >= g->stall_prev_actual + STALL_MOVE_BYTES;
        if (toward || g->stall_prev_actual == 0) {
                g->stall_count = 0;
                g->stall_prev_actual = g->actual;
                return false;
        }
        if (++g->stall_count < STALL_CYCLES)
                return false;

        g->stalled = true;
        g->stall_size = g->actual;
        g->stall_until = now + g->policy.hold_usec;
        snprintf(g->reason, sizeof(g->reason),
                 "balloon stopped at %s short of its target %s: the guest cannot give more; stopped pushing",
                 fmt_size(b1, sizeof(b1), g->actual), fmt_size(b2, sizeof(b2), g->balloon_target));
        guest_set_fault(g, "%s", g->reason);
        g->data_fault = false;
        log_guest_warning(g, "%s", g->reason);
        /* Stop pushing: ask for what the guest has. */
        if (g->actual > g->balloon_target)
                (void) guest_send_balloon(g, g->actual);
        return true;
}

/* Counted when sent; a refused DIMM is not retried (slot size or maxmem do not fit). */
static void guest_dimm_refused(Guest *g, int error, const char *why) {
        log_guest_warning_errno(g, error, "DIMM hotplug failed: %s; no more DIMMs",
                                why ?: strerror(-error));
        g->dimm_count = g->dimm_count > 0 ? g->dimm_count - 1 : 0;
        g->dimm_bytes = g->dimm_bytes >= g->dimm_slot_bytes ? g->dimm_bytes - g->dimm_slot_bytes : 0;
        g->dimm_slot_bytes = 0;
}

static void on_dimm_added(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        if (reply->error < 0)
                guest_dimm_refused(userdata, reply->error, reply->error_desc);
}

/* DIMMs are only ever added: unplugging needs the guest's cooperation and often fails (the
 * memory holds unmovable pages); the balloon gives back what is not needed. */
static void guest_add_dimm(Guest *g) {
        char dev[32], mem[32], b[FORMAT_SIZE_MAX];
        int r;

        if (g->dimm_slot_bytes == 0 || g->dimm_count >= g->mem_slots)
                return;
        snprintf(dev, sizeof(dev), "rs-dimm%u", g->dimm_next_id);
        snprintf(mem, sizeof(mem), "rs-mem%u", g->dimm_next_id);
        log_guest_info(g, "Hot-plugging DIMM %s%sof %s", g->driver ? "" : dev,
                       g->driver ? "" : " ", fmt_size(b, sizeof(b), g->dimm_slot_bytes));
        if (g->driver) {
                /* The driver (libvirt) names the device itself. */
                g->dimm_count++;
                g->dimm_bytes += g->dimm_slot_bytes;
                r = g->driver->add_dimm(g, g->dimm_slot_bytes, g->driver_data);
                if (r < 0)
                        guest_dimm_refused(g, r, NULL);
                return;
        }
        r = qmp_dimm_add(g->qmp, dev, mem, g->dimm_slot_bytes, command_timeout(g), on_dimm_added, g);
        if (r < 0) {
                log_guest_warning_errno(g, r, "DIMM hotplug: %m");
                return;
        }
        g->dimm_next_id++;
        g->dimm_count++;
        g->dimm_bytes += g->dimm_slot_bytes;
}

/* Whether this guest can have DIMMs at all: QMP guests through device_add, driven guests when
 * their driver can. */
static bool guest_dimm_capable(const Guest *g) {
        return (!g->driver || g->driver->add_dimm) && g->base_memory > 0;
}

static void guest_actuate(Guest *g, uint64_t target, bool urgent, bool fine, uint64_t now) {
        RsActuationPlan plan;
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];
        const RsEstimate *e = rs_guest_estimate(g->core);
        int r;

        if (g->paused || g->policy.mode == RS_MODE_OBSERVE || g->actual == 0)
                return;
        if (!guest_balloon_driver_pending(g, now) && guest_check_stall(g, now) && target < g->stall_size)
                target = g->stall_size;

        RsActuationInput in = {
                .current = g->actual,
                .target = target,
                .urgent = urgent,
                .fine = fine,
                .estimate = e->estimate,
                .margin_percent = g->policy.margin_percent,
                .boot_bytes = g->base_memory ?: g->actual,
                .vmem_plugged = g->vmem_id ? g->vmem_size : 0,
                .vmem_max = g->vmem_id && g->policy.actuator != RS_ACTUATOR_BALLOON ? g->vmem_max : 0,
                .vmem_block = g->vmem_id && g->policy.actuator != RS_ACTUATOR_BALLOON ? g->vmem_block : 0,
        };
        if (guest_dimm_capable(g)) {
                in.dimm_bytes = g->dimm_bytes;
                if (g->policy.allow_dimm && g->dimm_slot_bytes > 0 && g->mem_slots > g->dimm_count) {
                        in.dimm_slot_bytes = g->dimm_slot_bytes;
                        in.dimm_slots_free = g->mem_slots - g->dimm_count;
                }
        }
        r = rs_actuation_plan(&g->policy, &in, &plan);
        if (r < 0) {
                log_guest_warning_errno(g, r, "No actuation plan: %m");
                return;
        }
        if (plan.skip)
                return;

        if (plan.dimms_to_add > 0 && guest_dimm_capable(g)) {
                for (unsigned i = 0; i < plan.dimms_to_add; i++)
                        guest_add_dimm(g);
                /* The balloon trims next interval, once the DIMMs are in query-balloon's actual:
                 * a target past the current size would only be clamped by QEMU. */
                plan.set_balloon = false;
        }
        if (plan.set_vmem && g->vmem_id) {
                uint64_t requested = plan.vmem_requested;
                r = g->driver ? g->driver->set_virtio_mem(g, plan.vmem_requested, &requested, g->driver_data)
                              : qmp_virtio_mem_set_requested_size(g->qmp, g->vmem_id, plan.vmem_requested,
                                                                  command_timeout(g), on_vmem_set, g);
                if (r < 0)
                        log_guest_warning_errno(g, r, "virtio-mem resize: %m");
                else
                        g->vmem_requested = requested;
        }
        if (plan.set_balloon && plan.balloon_target != g->balloon_target) {
                r = guest_send_balloon(g, plan.balloon_target);
                if (r < 0)
                        log_guest_warning_errno(g, r, "balloon: %m");
                else
                        log_guest_debug(g, "balloon %s → %s%s",
                                        fmt_size(b1, sizeof(b1), g->actual),
                                        fmt_size(b2, sizeof(b2), plan.balloon_target), plan.capped ? " (capped)" : "");
        }
}

/* ---- the cycle ---- */

static void sample_from_stats(RsSample *s, const QmpGuestStats *st) {
        static const struct {
                QmpStat stat;
                RsCounter counter;
        } counters[] = {
                { QMP_STAT_MAJOR_FAULTS, RS_COUNTER_MAJOR_FAULTS },
                { QMP_STAT_MINOR_FAULTS, RS_COUNTER_MINOR_FAULTS },
                { QMP_STAT_SWAP_IN, RS_COUNTER_SWAP_IN },
                { QMP_STAT_SWAP_OUT, RS_COUNTER_SWAP_OUT },
                { QMP_STAT_OOM_KILLS, RS_COUNTER_OOM_KILLS },
                { QMP_STAT_ALLOC_STALLS, RS_COUNTER_ALLOC_STALLS },
                { QMP_STAT_ASYNC_SCANS, RS_COUNTER_ASYNC_SCANS },
                { QMP_STAT_DIRECT_SCANS, RS_COUNTER_DIRECT_SCANS },
                { QMP_STAT_ASYNC_RECLAIMS, RS_COUNTER_ASYNC_RECLAIMS },
                { QMP_STAT_DIRECT_RECLAIMS, RS_COUNTER_DIRECT_RECLAIMS },
        };
        /* The driver has not reported yet: its zeros would read as a guest without memory. */
        if (st->last_update == 0)
                return;
        s->level[RS_LEVEL_TOTAL] = st->value[QMP_STAT_TOTAL_MEMORY];
        s->level[RS_LEVEL_FREE] = st->value[QMP_STAT_FREE_MEMORY];
        s->level[RS_LEVEL_AVAILABLE] = st->value[QMP_STAT_AVAILABLE_MEMORY];
        s->level[RS_LEVEL_DISK_CACHES] = st->value[QMP_STAT_DISK_CACHES];
        for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
                s->counter[counters[i].counter] = st->value[counters[i].stat];
}

static void sample_from_vmstat(RsSample *s, const GuestVmstat *v) {
        static const struct {
                GuestVmstatCounter from;
                RsCounter to;
        } map[] = {
                { GUEST_VMSTAT_WORKINGSET_REFAULT_ANON, RS_COUNTER_REFAULT_ANON },
                { GUEST_VMSTAT_WORKINGSET_REFAULT_FILE, RS_COUNTER_REFAULT_FILE },
                { GUEST_VMSTAT_WORKINGSET_ACTIVATE_ANON, RS_COUNTER_ACTIVATE_ANON },
                { GUEST_VMSTAT_WORKINGSET_ACTIVATE_FILE, RS_COUNTER_ACTIVATE_FILE },
                { GUEST_VMSTAT_PGSCAN_KSWAPD, RS_COUNTER_PGSCAN_KSWAPD },
                { GUEST_VMSTAT_PGSCAN_DIRECT, RS_COUNTER_PGSCAN_DIRECT },
                { GUEST_VMSTAT_PGSTEAL_KSWAPD, RS_COUNTER_PGSTEAL_KSWAPD },
                { GUEST_VMSTAT_PGSTEAL_DIRECT, RS_COUNTER_PGSTEAL_DIRECT },
                { GUEST_VMSTAT_PSWPIN, RS_COUNTER_PSWPIN },
                { GUEST_VMSTAT_PSWPOUT, RS_COUNTER_PSWPOUT },
                { GUEST_VMSTAT_PGMAJFAULT, RS_COUNTER_PGMAJFAULT },
                { GUEST_VMSTAT_ALLOCSTALL, RS_COUNTER_ALLOCSTALL },
                { GUEST_VMSTAT_OOM_KILL, RS_COUNTER_OOM_KILL },
        };
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                s->counter[map[i].to] = v->value[map[i].from];
}

static uint64_t psi_hundredths(const GuestPsiLine *l) {
        if (!l->known || !(l->avg10 >= 0.0) || l->avg10 > 100.0)
                return RS_UNKNOWN;
        return (uint64_t) (l->avg10 * 100.0 + 0.5);
}

static void guest_update_rates(Guest *g, uint64_t now) {
        uint64_t major = g->sample.counter[RS_COUNTER_PGMAJFAULT];
        if (major == RS_UNKNOWN)
                major = g->sample.counter[RS_COUNTER_MAJOR_FAULTS];
        if (major != RS_UNKNOWN && g->prev_major != RS_UNKNOWN && major >= g->prev_major && now > g->prev_major_usec)
                g->major_fault_rate = (double) (major - g->prev_major) * USEC_PER_SEC / (double) (now - g->prev_major_usec);
        else
                g->major_fault_rate = NAN;
        /* Once is a guest reboot; again and again is a guest that lies. */
        g->major_backwards_cycles = major != RS_UNKNOWN && g->prev_major != RS_UNKNOWN && major < g->prev_major
                                            ? g->major_backwards_cycles + 1
                                            : 0;
        if (g->major_backwards_cycles >= 2)
                snprintf(g->data_problem, sizeof(g->data_problem),
                         "guest stats lie: the fault counter went backwards %u times in a row", g->major_backwards_cycles);
        g->prev_major = major;
        g->prev_major_usec = now;

        const RsObservation *o = rs_guest_observation(g->core);
        g->refault_rate = o && o->verdict != RS_VERDICT_UNKNOWN ? o->raw_refault : NAN;
}

static bool estimate_changed(Guest *g) {
        const RsEstimate *e = rs_guest_estimate(g->core);
        uint64_t old = g->signalled_estimate;
        bool changed;

        if (e->estimate == RS_UNKNOWN && old == RS_UNKNOWN)
                changed = false;
        else if (e->estimate == RS_UNKNOWN || old == RS_UNKNOWN)
                changed = true;
        else
                changed = (e->estimate > old ? e->estimate - old : old - e->estimate) * 100 > old;
        changed = changed || e->lower != g->signalled_lower || e->upper != g->signalled_upper;
        if (changed) {
                g->signalled_estimate = e->estimate;
                g->signalled_lower = e->lower;
                g->signalled_upper = e->upper;
        }
        return changed;
}

/* The cycle's sign of untrusted input becomes the fault (a stalled balloon's reason goes first),
 * and goes once DATA_CLEAN_CYCLES cycles came without one. */
static void guest_report_data_problem(Guest *g) {
        if (g->data_problem[0]) {
                if (!g->data_fault || strcmp(g->fault, g->data_problem) != 0)
                        log_guest_warning(g, "%s", g->data_problem);
                if (!g->stalled) {
                        guest_set_fault(g, "%s", g->data_problem);
                        g->data_fault = true;
                }
                g->data_clean_cycles = 0;
        } else if (g->data_fault && ++g->data_clean_cycles >= DATA_CLEAN_CYCLES) {
                if (!g->stalled)
                        g->fault[0] = '\0';
                g->data_fault = false;
        }
        g->data_problem[0] = '\0';
}

/* Levels the sanity check had to drop: the guest contradicts itself or QEMU. */
static void guest_check_sanitized(Guest *g, const RsSample *before) {
        char dropped[140] = "";
        size_t n = 0;

        /* With the values: an operator can tell a lying guest from a check that is too strict. */
        for (RsLevel l = RS_LEVEL_TOTAL; l <= RS_LEVEL_DISK_CACHES; l++)
                if (before->level[l] != g->sample.level[l] && n + 40 < sizeof(dropped))
                        n += (size_t) snprintf(dropped + n, sizeof(dropped) - n, "%s%s %.0f MiB", n ? ", " : "",
                                               rs_level_name(l), (double) before->level[l] / MIB);
        if (n > 0)
                snprintf(g->data_problem, sizeof(g->data_problem), "guest stats lie: impossible values dropped (%s)",
                         dropped);
}

/* last-update is QEMU's clock when the guest last reported: far ahead of ours, it lies; still
 * where it was after several intervals, the guest stopped reporting. Returns whether the stats
 * may be fed to the core: stale ones would read as a quiet guest (rates of 0) and invite
 * probing, so without them the guest is judged on what is left (agent, host) and held. */
static bool guest_check_stats_time(Guest *g, const QmpGuestStats *st) {
        uint64_t now_sec = now_usec(CLOCK_REALTIME) / USEC_PER_SEC;

        if (st->last_update == 0)
                return true;
        g->stats_stale_cycles = st->last_update == g->stats_last_update ? g->stats_stale_cycles + 1 : 0;
        g->stats_last_update = st->last_update;
        if (st->last_update > now_sec + STATS_FUTURE_SLACK_SEC) {
                snprintf(g->data_problem, sizeof(g->data_problem),
                         "guest stats lie: last update %" PRIu64 " s in the future", st->last_update - now_sec);
                return false;
        }
        if (g->stats_stale_cycles >= STATS_STALE_CYCLES) {
                snprintf(g->data_problem, sizeof(g->data_problem),
                         "guest stats stale: not updated for %u intervals", g->stats_stale_cycles);
                return false;
        }
        return true;
}

static void guest_finish_cycle(Guest *g) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        HostMemory host;
        RsDecision d;
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX], b3[FORMAT_SIZE_MAX];

        if (g->phase != GUEST_PHASE_RUNNING ||
            (g->source == GUEST_SOURCE_QEMU && (!g->qmp || !qmp_client_is_ready(g->qmp))))
                return;
        if (g->events_in_cycle > EVENT_FLOOD_PER_CYCLE)
                snprintf(g->data_problem, sizeof(g->data_problem), "QMP event flood: %u events in one interval",
                         g->events_in_cycle);
        g->events_in_cycle = 0;
        if (g->cycle_qmp_failed) {
                /* A timeout on one guest only costs that guest its tick. */
                log_guest_debug(g, "Skipping this interval: %s", g->cycle_error);
                snprintf(g->data_problem, sizeof(g->data_problem), "%s failing: %s",
                         g->source == GUEST_SOURCE_LIBVIRT ? "libvirt calls" : "QMP commands", g->cycle_error);
                guest_report_data_problem(g);
                guest_notify(g, false);
                return;
        }

        const HostMemory *h = g->hooks && g->hooks->host_memory ? g->hooks->host_memory(g, g->userdata) : NULL;
        if (!h) {
                (void) host_memory_read("/proc", &host);
                h = &host;
        }
        g->sample.level[RS_LEVEL_HOST_MEM_AVAILABLE] = h->mem_available;
        g->sample.level[RS_LEVEL_HOST_PSI_SOME_AVG10] = h->psi_some_avg10;
        g->sample.level[RS_LEVEL_HOST_PSI_FULL_AVG10] = h->psi_full_avg10;
        if (g->qemu_pid > 0) {
                uint64_t rss;
                g->host_rss = host_process_rss("/proc", g->qemu_pid, &rss) >= 0 ? rss : UINT64_MAX;
        }

        g->sample.level[RS_LEVEL_BALLOON_ACTUAL] = g->actual ?: RS_UNKNOWN;
        if (g->vmem_id)
                g->sample.level[RS_LEVEL_VIRTIO_MEM_SIZE] = g->vmem_size;
        /* The pushback signal: the target we asked for (the guest's own size before that). */
        g->sample.level[RS_LEVEL_BALLOON_TARGET] = guest_balloon_driver_pending(g, now) ? RS_UNKNOWN
                                                   : g->balloon_target ?: g->actual ?: RS_UNKNOWN;

        /* Everything the guest told us is untrusted. */
        RsSample reported = g->sample;
        rs_sample_sanitize(&g->sample, g->guest_max);
        guest_check_sanitized(g, &reported);

        if (g->probe_requested) {
                /* A forced probe starts with this feed; the core refuses while it is giving
                 * memory back (or in observe mode). */
                int r = rs_guest_probe_now(g->core, now);
                if (r < 0)
                        log_guest_debug_errno(g, r, "Probe request not taken: %m");
                g->probe_requested = false;
        }
        RsState before = rs_guest_state(g->core);
        rs_guest_feed(g->core, &g->sample, now);
        rs_guest_decide(g->core, now, &d);
        g->decision = d;
        g->have_decision = true;
        g->want = d.target;
        g->updated_realtime = now_usec(CLOCK_REALTIME);
        guest_update_rates(g, now);

        uint64_t target = g->hooks && g->hooks->arbitrate ? g->hooks->arbitrate(g, g->userdata) : d.target;
        if (g->policy.mode == RS_MODE_OBSERVE)
                target = g->actual;
        target = CLAMP(target, d.floor, d.max);
        /* The next feed judges the size this target produces. A state that grows the guest
         * (emergency, backoff, grow) must know the host gave less than it asked for, or it
         * waits for memory the host does not have; given all it asked for, the cap is lifted.
         * A paused guest is held by the operator, not capped by the host: it waits as before. */
        bool host_capped = !g->paused && g->policy.mode != RS_MODE_OBSERVE && target < d.target;
        rs_guest_set_grant(g->core, host_capped ? target : RS_UNKNOWN);

        if (!g->stalled) {
                size_t n = (size_t) snprintf(g->reason, sizeof(g->reason), "%s", d.reason);
                if (g->agent_problem[0] && n < sizeof(g->reason))
                        (void) snprintf(g->reason + n, sizeof(g->reason) - n, "; %s", g->agent_problem);
        }
        if (target != g->target || d.state != before) {
                const RsEstimate *e = rs_guest_estimate(g->core);
                log_named_guest_info(g->name, rs_state_to_string(d.state), "target %s (actual %s, estimate %s): %s%s",
                               fmt_size(b1, sizeof(b1), target), fmt_size(b2, sizeof(b2), g->actual),
                               fmt_size(b3, sizeof(b3), e->estimate), d.reason,
                               target != d.target ? " [arbitrated]" : "");
        }
        g->target = target;
        guest_actuate(g, target, d.urgent, d.fine, now);
        history_push(g, g->updated_realtime);

        /* Not on every target change: probing moves it each interval, and each save is two
         * fsyncs that block the loop. A restore holds or backs off from the estimate anyway. */
        if (rs_guest_state(g->core) != g->saved_state || rs_guest_estimate(g->core)->estimate != g->saved_estimate ||
            now >= g->saved_usec + STATE_SAVE_USEC)
                (void) guest_save_state(g);

        guest_report_data_problem(g);
        guest_notify(g, estimate_changed(g));
}

static void cycle_step_done(Guest *g) {
        if (g->cycle_pending == 0)
                return;
        if (--g->cycle_pending == 0)
                guest_finish_cycle(g);
}

static void cycle_fail(Guest *g, const char *what, const QmpReply *reply) {
        g->cycle_qmp_failed = true;
        snprintf(g->cycle_error, sizeof(g->cycle_error), "%s: %s", what,
                 reply->error_desc ?: strerror(-reply->error));
}

static void on_stats(QmpClient *c _unused_, const QmpReply *reply, const QmpGuestStats *stats, void *userdata) {
        Guest *g = userdata;
        if (reply->error < 0)
                cycle_fail(g, "guest-stats", reply);
        else {
                if (guest_check_stats_time(g, stats))
                        sample_from_stats(&g->sample, stats);
        }
        cycle_step_done(g);
}

static void on_balloon_info(QmpClient *c _unused_, const QmpReply *reply, const QmpBalloonInfo *info, void *userdata) {
        Guest *g = userdata;
        if (reply->error < 0)
                cycle_fail(g, "query-balloon", reply);
        else if (info->actual > 0 && (g->guest_max == 0 || info->actual <= 2 * g->guest_max)) {
                g->balloon_actual = info->actual;
                guest_update_size(g);
        }
        cycle_step_done(g);
}

static void on_memory_devices(QmpClient *c _unused_, const QmpReply *reply, const QmpMemoryDeviceList *list, void *userdata) {
        Guest *g = userdata;
        if (reply->error >= 0 && g->vmem_id) {
                const QmpMemoryDevice *d = qmp_memory_device_list_find(list, g->vmem_id);
                if (d && d->type == QMP_MEMORY_DEVICE_VIRTIO_MEM) {
                        g->vmem_size = d->size;
                        guest_update_size(g);
                }
        }
        /* virtio-mem's size is informative here; its failure does not cost the interval. */
        cycle_step_done(g);
}

/* The host's own count of what the guest read from its disks: refaults it does not report
 * still show here. Optional: a failure costs neither the interval nor the guest. */
static void on_blockstats(QmpClient *c _unused_, const QmpReply *reply, uint64_t read_bytes, void *userdata) {
        Guest *g = userdata;
        if (reply->error >= 0)
                g->sample.counter[RS_COUNTER_HOST_DISK_READ] = read_bytes;
        else if (reply->error == -EOPNOTSUPP)
                g->no_blockstats = true;
        else
                log_guest_debug(g, "query-blockstats: %s",
                                reply->error_desc ?: strerror(-reply->error));
        cycle_step_done(g);
}

static void on_agent_psi(QgaClient *c _unused_, const QmpReply *reply, const GuestPsi *psi, void *userdata) {
        Guest *g = userdata;
        if (reply->error >= 0 && psi) {
                g->sample.level[RS_LEVEL_PSI_SOME_AVG10] = psi_hundredths(&psi->some);
                g->sample.level[RS_LEVEL_PSI_FULL_AVG10] = psi_hundredths(&psi->full);
                if (psi->some.known)
                        g->sample.counter[RS_COUNTER_PSI_SOME_TOTAL] = psi->some.total_usec;
                if (psi->full.known)
                        g->sample.counter[RS_COUNTER_PSI_FULL_TOTAL] = psi->full.total_usec;
        }
        g->agent_busy = false;
        cycle_step_done(g);
}

/* An agent that fails is no fault of the guest (the balloon stats go on), but it costs the
 * agent tier: say why in the reason, and in the log when it changes. "" when reads work. */
static void agent_report(Guest *g, const char *problem) {
        char text[sizeof(g->agent_problem)];

        snprintf(text, sizeof(text), "%s", problem);
        if (strcmp(text, g->agent_problem) == 0)
                return;
        if (text[0])
                log_guest_warning(g, "%s; going on with balloon stats only", text);
        else
                log_guest_info(g, "Guest agent reads work again");
        memcpy(g->agent_problem, text, sizeof(text));
}

static uint64_t agent_timeout(const Guest *g) {
        return CLAMP(g->policy.poll_interval_usec * 3 / 4, 500 * USEC_PER_MSEC, 10 * USEC_PER_SEC);
}

static void on_agent_vmstat(QgaClient *c, const QmpReply *reply, const GuestVmstat *vmstat, void *userdata) {
        Guest *g = userdata;
        if (reply->error < 0 || !vmstat) {
                char problem[sizeof(g->agent_problem)];
                snprintf(problem, sizeof(problem), "guest agent: %s", reply->error_desc ?: strerror(-reply->error));
                agent_report(g, problem);
                g->agent_busy = false;
                cycle_step_done(g);
                return;
        }
        sample_from_vmstat(&g->sample, vmstat);
        agent_report(g, "");
        /* PSI only after vmstat finished: never more than one read queued on the agent. */
        if (qga_read_psi_memory(c, agent_timeout(g), on_agent_psi, g) < 0) {
                g->agent_busy = false;
                cycle_step_done(g);
        }
}

static int on_tick(sd_event_source *s _unused_, uint64_t usec, void *userdata) {
        Guest *g = userdata;
        uint64_t now;

        /* The next tick one interval after this one was due, not after it ran: otherwise
         * every late wake-up stretches the interval. Fallen behind: one interval from now. */
        (void) sd_event_now(g->event, CLOCK_MONOTONIC, &now);
        uint64_t interval = g->policy.poll_interval_usec;
        guest_tick_arm(g, usec + interval > now ? usec + interval - now : interval);
        if (g->phase != GUEST_PHASE_RUNNING || !g->core)
                return 0;
        if (g->cycle_pending > 0) {
                log_guest_debug(g, "Previous interval still running, skipping a tick");
                return 0;
        }

        rs_sample_init(&g->sample);
        g->cycle_qmp_failed = false;
        g->cycle_error[0] = '\0';
        g->cycle_started = now_usec(CLOCK_MONOTONIC);
        /* Held until every call was sent, so a call failing at once cannot finish the cycle early. */
        g->cycle_pending = 1;

        uint64_t t = command_timeout(g);
        if (qmp_get_guest_stats(g->qmp, NULL, t, on_stats, g) >= 0)
                g->cycle_pending++;
        if (qmp_query_balloon(g->qmp, t, on_balloon_info, g) >= 0)
                g->cycle_pending++;
        if (g->vmem_id && qmp_query_memory_devices(g->qmp, t, on_memory_devices, g) >= 0)
                g->cycle_pending++;
        if (!g->no_blockstats && qmp_query_blockstats_read_bytes(g->qmp, t, on_blockstats, g) >= 0)
                g->cycle_pending++;
        if (!g->policy.guest_agent)
                g->agent_problem[0] = '\0'; /* not asked, so nothing to complain about */
        else if (g->qga && !qga_client_is_ready(g->qga) && !qga_client_is_closed(g->qga) && g->agent_connected > 0 &&
                 now > g->agent_connected + AGENT_SILENT_USEC)
                agent_report(g, "guest agent: no answer to guest-sync-delimited");
        if (g->policy.guest_agent && g->qga && qga_client_is_ready(g->qga) && !g->agent_busy &&
            qga_read_vmstat(g->qga, agent_timeout(g), on_agent_vmstat, g) >= 0) {
                g->agent_busy = true;
                g->cycle_pending++;
        }
        cycle_step_done(g);
        return 0;
}

static void guest_tick_arm(Guest *g, uint64_t usec) {
        uint64_t now;
        /* sd-event's default accuracy (250 ms) would stretch short intervals and line every
         * guest's tick up with the others: 1 % of the interval, within 1-50 ms. */
        uint64_t accuracy = CLAMP(g->policy.poll_interval_usec / 100, USEC_PER_MSEC, 50 * USEC_PER_MSEC);
        (void) sd_event_now(g->event, CLOCK_MONOTONIC, &now);
        if (!g->timer) {
                if (sd_event_add_time(g->event, &g->timer, CLOCK_MONOTONIC, now + usec, accuracy, on_tick, g) < 0)
                        return;
                (void) sd_event_source_set_description(g->timer, "guest-tick");
                return;
        }
        (void) sd_event_source_set_time_accuracy(g->timer, accuracy);
        (void) sd_event_source_set_time(g->timer, now + usec);
        (void) sd_event_source_set_enabled(g->timer, SD_EVENT_ONESHOT);
}

/* ---- connection ---- */

static void guest_setup_done(Guest *g) {
        if (g->setup_pending == 0 || --g->setup_pending > 0)
                return;
        /* The connection is going away: the disconnect callback takes it from here. */
        if (!g->qmp || !qmp_client_is_ready(g->qmp))
                return;
        (void) guest_setup_finish(g);
}

/* Room for DIMMs still to add, when the policy allows them: what maxmem leaves past boot
 * memory and the memory devices, split over the free slots in whole 128 MiB memory blocks
 * (the guest onlines memory a block at a time). Sets dimm_slot_bytes (0: none). */
static uint64_t guest_dimm_room(Guest *g) {
        g->dimm_slot_bytes = 0;
        if (!g->policy.allow_dimm || g->mem_max_size == 0 || g->mem_slots <= g->dimm_count ||
            g->mem_max_size <= g->base_memory + g->devices_bytes)
                return 0;
        unsigned free_slots = g->mem_slots - g->dimm_count;
        uint64_t room = g->mem_max_size - g->base_memory - g->devices_bytes;
        g->dimm_slot_bytes = room / free_slots / (128 * MIB) * (128 * MIB);
        return g->dimm_slot_bytes * free_slots;
}

/* The guest's memory is known: the decision core takes over. */
static int guest_setup_finish(Guest *g) {
        int r;

        g->guest_max = (g->base_memory ?: g->actual) +
                       (g->vmem_id && g->policy.actuator != RS_ACTUATOR_BALLOON ? g->vmem_max : 0);
        if (g->guest_max > 0 && guest_dimm_capable(g))
                g->guest_max += g->dimm_bytes + guest_dimm_room(g);
        if (g->guest_max == 0) {
                /* With why, when a setup command failed (e.g. timed out: a QEMU that never answers). */
                guest_set_fault(g, "QEMU reported no memory size%s%s", g->cycle_error[0] ? ": " : "", g->cycle_error);
                g->phase = GUEST_PHASE_FAULTY;
                if (g->qmp) {
                        qmp_client_close(g->qmp);
                        guest_schedule_reconnect(g);
                }
                return -EINVAL;
        }
        if (!g->core) {
                r = rs_guest_new(&g->core, &g->policy, g->guest_max);
                if (r < 0) {
                        guest_set_fault(g, "the decision core refused the guest: %s", strerror(-r));
                        g->phase = GUEST_PHASE_FAULTY;
                        return r;
                }
                (void) guest_restore_state(g);
        }

        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];
        log_guest_info(g, "Managing: %s (balloon at %s), policy %s, agent %s, free page reporting %s%s%s",
                       fmt_size(b1, sizeof(b1), g->guest_max), fmt_size(b2, sizeof(b2), g->actual), g->policy.name,
                       g->agent_path ? g->agent_path : g->driven_agent ? "through libvirt" : "none",
                       g->fpr_known ? (g->free_page_reporting ? "on" : "off") : "unknown",
                       g->vmem_id ? ", virtio-mem " : "", g->vmem_id ?: "");
        log_named_guest_debug(g->name, NULL, "maxmem %" PRIu64 ", %u slots, memory devices %" PRIu64 " (%u DIMMs)",
                        g->mem_max_size, g->mem_slots, g->devices_bytes, g->dimm_count);
        if (g->dimm_slot_bytes > 0)
                log_guest_info(g, "DIMM hotplug: %u slot(s) of %s free",
                               g->mem_slots - g->dimm_count, fmt_size(b1, sizeof(b1), g->dimm_slot_bytes));
        g->phase = GUEST_PHASE_RUNNING;
        g->running_since = now_usec(CLOCK_MONOTONIC);
        g->first_actual = g->actual;
        g->balloon_driver_seen = false;
        g->fault[0] = '\0';
        g->data_fault = false;
        g->backoff_usec = 0;
        /* A driven guest's cycles come from its driver. */
        if (!g->driver)
                guest_tick_arm(g, 0);
        guest_notify(g, false);
        return 0;
}

static void on_polling_set(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        Guest *g = userdata;
        if (reply->error < 0)
                log_named_guest_warning(g->name, NULL, "Could not enable balloon stats polling: %s",
                                  reply->error_desc ?: strerror(-reply->error));
        guest_setup_done(g);
}

static void on_fpr(QmpClient *c _unused_, const QmpReply *reply, bool value, void *userdata) {
        Guest *g = userdata;
        g->fpr_known = reply->error >= 0;
        g->free_page_reporting = reply->error >= 0 && value;
        guest_setup_done(g);
}

static void on_size_summary(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        Guest *g = userdata;
        uint64_t base;
        if (reply->error >= 0 && json_member_get_u64(reply->result, "base-memory", &base) >= 0 && base > 0 &&
            base < UINT64_MAX / 4)
                g->base_memory = base;
        guest_setup_done(g);
}

static void on_setup_balloon(QmpClient *c _unused_, const QmpReply *reply, const QmpBalloonInfo *info, void *userdata) {
        Guest *g = userdata;
        if (reply->error >= 0) {
                g->balloon_actual = info->actual;
                guest_update_size(g);
        } else
                snprintf(g->cycle_error, sizeof(g->cycle_error), "query-balloon: %s",
                         reply->error_desc ?: strerror(-reply->error));
        guest_setup_done(g);
}

/* What the memory devices take of maxmem and of the slots, and the first free rs-dimmN. */
static void guest_count_memory_devices(Guest *g, const QmpMemoryDeviceList *list) {
        g->devices_bytes = g->dimm_bytes = 0;
        g->dimm_count = g->dimm_next_id = 0;
        for (size_t i = 0; i < list->n_devices; i++) {
                const QmpMemoryDevice *d = &list->devices[i];
                /* virtio-mem reserves its whole region up front. */
                uint64_t size = d->type == QMP_MEMORY_DEVICE_VIRTIO_MEM ? MAX(d->max_size, d->size) : d->size;
                g->devices_bytes = size > UINT64_MAX / 4 - g->devices_bytes ? UINT64_MAX / 4 : g->devices_bytes + size;
                if (d->type != QMP_MEMORY_DEVICE_DIMM && d->type != QMP_MEMORY_DEVICE_NVDIMM)
                        continue;
                g->dimm_count++;
                if (d->type == QMP_MEMORY_DEVICE_DIMM)
                        g->dimm_bytes = MIN(g->dimm_bytes + d->size, UINT64_MAX / 4);
                unsigned n;
                char tail;
                if (d->id && sscanf(d->id, "rs-dimm%u%c", &n, &tail) == 1 && n < UINT_MAX - 1)
                        g->dimm_next_id = MAX(g->dimm_next_id, n + 1);
        }
}

static void on_setup_machine_memory(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        Guest *g = userdata;
        uint64_t max_size, slots;
        g->mem_max_size = 0;
        g->mem_slots = 0;
        if (reply->error >= 0 && json_member_get_u64(reply->result, "max-size", &max_size) >= 0 &&
            json_member_get_u64(reply->result, "slots", &slots) >= 0 && max_size < UINT64_MAX / 4 && slots <= 256) {
                g->mem_max_size = max_size;
                g->mem_slots = (unsigned) slots;
        } else
                log_named_guest_info(g->name, NULL, "allow-dimm: QEMU does not tell maxmem and slots (%s): no DIMM hotplug",
                               reply->error < 0 ? reply->error_desc ?: strerror(-reply->error)
                                                  : "no max-size and slots: -m without maxmem");
        guest_setup_done(g);
}

static void on_setup_devices(QmpClient *c _unused_, const QmpReply *reply, const QmpMemoryDeviceList *list, void *userdata) {
        Guest *g = userdata;
        if (reply->error >= 0) {
                guest_count_memory_devices(g, list);
                for (size_t i = 0; i < list->n_devices; i++) {
                        const QmpMemoryDevice *d = &list->devices[i];
                        if (d->type != QMP_MEMORY_DEVICE_VIRTIO_MEM || !d->id || d->block_size == 0)
                                continue;
                        free(g->vmem_id);
                        g->vmem_id = strdup(d->id);
                        g->vmem_size = d->size;
                        g->vmem_requested = qmp_value_is_known(d->requested_size) ? d->requested_size : d->size;
                        g->vmem_max = d->max_size;
                        g->vmem_block = d->block_size;
                        guest_update_size(g);
                        break;
                }
        }
        guest_setup_done(g);
}

static void on_qmp_ready(QmpClient *c, void *userdata) {
        Guest *g = userdata;
        uint64_t t = command_timeout(g);
        unsigned interval = (unsigned) MAX(g->policy.poll_interval_usec / USEC_PER_SEC, 1);

        g->cycle_error[0] = '\0';
        g->setup_pending = 1;
        if (qmp_set_stats_polling_interval(c, NULL, interval, t, on_polling_set, g) >= 0)
                g->setup_pending++;
        if (qmp_get_free_page_reporting(c, NULL, t, on_fpr, g) >= 0)
                g->setup_pending++;
        if (qmp_client_execute(c, "query-memory-size-summary", NULL, t, on_size_summary, g) >= 0)
                g->setup_pending++;
        if (qmp_query_balloon(c, t, on_setup_balloon, g) >= 0)
                g->setup_pending++;
        if (qmp_query_memory_devices(c, t, on_setup_devices, g) >= 0)
                g->setup_pending++;
        /* Only asked when DIMMs may be added: -m's maxmem and slots (QEMU 7.1+). */
        g->mem_max_size = 0;
        if (g->policy.allow_dimm && qmp_qom_get(c, "/machine", "memory", t, on_setup_machine_memory, g) >= 0)
                g->setup_pending++;
        guest_setup_done(g);
}

static void on_qmp_event(QmpClient *c _unused_, const QmpEvent *event, void *userdata) {
        Guest *g = userdata;
        QmpTypedEvent t;
        g->events_in_cycle++;
        if (qmp_event_parse(event, &t) < 0)
                return;
        if (t.type == QMP_EVENT_BALLOON_CHANGE && t.balloon_change.actual > 0 &&
            (g->guest_max == 0 || t.balloon_change.actual <= 2 * g->guest_max)) {
                g->balloon_actual = t.balloon_change.actual;
                guest_update_size(g);
        } else if (t.type == QMP_EVENT_SHUTDOWN)
                log_guest_info(g, "QEMU is shutting down (%s)",
                               t.shutdown.reason ?: "no reason given");
}

static void on_qmp_disconnect(QmpClient *c _unused_, int error, const char *reason, void *userdata) {
        Guest *g = userdata;
        guest_set_fault(g, "QMP connection lost: %s", reason ?: strerror(-error));
        g->data_fault = false;
        log_guest_warning(g, "%s", g->fault);
        g->phase = GUEST_PHASE_FAULTY;
        /* cycle_pending is left alone: an agent read may still complete the cycle, which
         * then does nothing because the guest is not running. */
        g->setup_pending = 0;
        guest_schedule_reconnect(g);
        guest_notify(g, false);
}

static int guest_connect(Guest *g) {
        static const QmpClientCallbacks callbacks = {
                .ready = on_qmp_ready,
                .event = on_qmp_event,
                .disconnect = on_qmp_disconnect,
        };
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd, r;

        g->qmp = qmp_client_free(g->qmp);
        g->phase = g->phase == GUEST_PHASE_FAULTY ? GUEST_PHASE_FAULTY : GUEST_PHASE_CONNECTING;

        if (strlen(g->qmp_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        memcpy(sa.sun_path, g->qmp_path, strlen(g->qmp_path));

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
        g->qemu_pid = host_peer_pid(fd, &pid) >= 0 ? pid : 0;

        r = qmp_client_new(&g->qmp, g->event);
        if (r < 0) {
                close(fd);
                return r;
        }
        qmp_client_set_callbacks(g->qmp, &callbacks, g);
        qmp_client_set_handshake_timeout(g->qmp, HANDSHAKE_TIMEOUT_USEC);
        qmp_client_set_default_timeout(g->qmp, command_timeout(g));
        r = qmp_client_connect_fd(g->qmp, fd);
        if (r < 0) {
                close(fd);
                g->qmp = qmp_client_free(g->qmp);
                return r;
        }
        return 0;
}

static int on_reconnect(sd_event_source *s, uint64_t usec _unused_, void *userdata) {
        Guest *g = userdata;
        (void) s;
        int r = guest_connect(g);
        if (r < 0) {
                guest_set_fault(g, "cannot connect to %s: %s", g->qmp_path, strerror(-r));
                if (g->backoff_usec >= 4 * RECONNECT_MIN_USEC)
                        log_guest_warning(g, "%s", g->fault);
                g->phase = g->backoff_usec > 0 ? GUEST_PHASE_FAULTY : GUEST_PHASE_CONNECTING;
                guest_schedule_reconnect(g);
        }
        return 0;
}

static void guest_schedule_reconnect(Guest *g) {
        uint64_t now;
        g->backoff_usec = g->backoff_usec ? MIN(g->backoff_usec * 2, RECONNECT_MAX_USEC) : RECONNECT_MIN_USEC;
        (void) sd_event_now(g->event, CLOCK_MONOTONIC, &now);
        if (!g->reconnect) {
                if (sd_event_add_time(g->event, &g->reconnect, CLOCK_MONOTONIC, now + g->backoff_usec, 0, on_reconnect,
                                      g) >= 0)
                        (void) sd_event_source_set_description(g->reconnect, "guest-reconnect");
                return;
        }
        (void) sd_event_source_set_time(g->reconnect, now + g->backoff_usec);
        (void) sd_event_source_set_enabled(g->reconnect, SD_EVENT_ONESHOT);
}

/* ---- the agent ---- */

static void on_agent_ready(QgaClient *c _unused_, void *userdata) {
        Guest *g = userdata;
        log_guest_info(g, "Guest agent answers on %s", g->agent_path);
}

static void on_agent_disconnect(QgaClient *c _unused_, int error, const char *reason, void *userdata) {
        Guest *g = userdata;
        log_guest_debug(g, "Guest agent connection lost: %s",
                        reason ?: strerror(-error));
        if (g->agent_busy) {
                g->agent_busy = false;
        }
        if (g->policy.guest_agent && !g->agent_problem[0]) { /* a failed read that broke it said more */
                char problem[sizeof(g->agent_problem)];
                snprintf(problem, sizeof(problem), "guest agent: connection lost: %s", reason ?: strerror(-error));
                agent_report(g, problem);
        }
        g->agent_connected = 0;
        agent_schedule_reconnect(g);
}

static int agent_connect(Guest *g) {
        static const QgaClientCallbacks callbacks = {
                .ready = on_agent_ready,
                .disconnect = on_agent_disconnect,
        };
        int r;

        g->qga = qga_client_free(g->qga);
        g->agent_busy = false;
        r = qga_client_new(&g->qga, g->event);
        if (r < 0)
                return r;
        qga_client_set_callbacks(g->qga, &callbacks, g);
        r = qga_client_connect_path(g->qga, g->agent_path);
        if (r < 0) {
                g->qga = qga_client_free(g->qga);
                return r;
        }
        g->agent_connected = now_usec(CLOCK_MONOTONIC);
        return 0;
}

static int on_agent_reconnect(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Guest *g = userdata;
        if (agent_connect(g) < 0)
                agent_schedule_reconnect(g);
        return 0;
}

static void agent_schedule_reconnect(Guest *g) {
        uint64_t now;
        (void) sd_event_now(g->event, CLOCK_MONOTONIC, &now);
        if (!g->agent_reconnect) {
                (void) sd_event_add_time(g->event, &g->agent_reconnect, CLOCK_MONOTONIC, now + AGENT_RECONNECT_USEC, 0,
                                         on_agent_reconnect, g);
                return;
        }
        (void) sd_event_source_set_time(g->agent_reconnect, now + AGENT_RECONNECT_USEC);
        (void) sd_event_source_set_enabled(g->agent_reconnect, SD_EVENT_ONESHOT);
}

/* ---- public ---- */

int guest_new(sd_event *event, const char *name, const char *qmp_path, const char *agent_path,
              const char *state_dir, const RsPolicy *policy, const GuestHooks *hooks, void *userdata,
              Guest **ret) {
        _cleanup_free_ Guest *g = calloc(1, sizeof(Guest));
        if (!g)
                return -ENOMEM;
        g->name = strdup(name);
        g->qmp_path = qmp_path ? strdup(qmp_path) : NULL;
        g->agent_path = agent_path ? strdup(agent_path) : NULL;
        g->state_dir = state_dir ? strdup(state_dir) : NULL;
        if (!g->name || (qmp_path && !g->qmp_path) || (agent_path && !g->agent_path) || (state_dir && !g->state_dir)) {
                free(g->name);
                free(g->qmp_path);
                free(g->agent_path);
                free(g->state_dir);
                return -ENOMEM;
        }
        g->event = sd_event_ref(event);
        g->hooks = hooks;
        g->userdata = userdata;
        g->base_policy = *policy;
        g->policy = *policy;
        g->phase = GUEST_PHASE_CONNECTING;
        g->host_rss = UINT64_MAX;
        g->prev_major = RS_UNKNOWN;
        g->major_fault_rate = g->refault_rate = NAN;
        g->signalled_estimate = g->signalled_lower = g->signalled_upper = RS_UNKNOWN;
        g->saved_estimate = RS_UNKNOWN;
        g->saved_state = _RS_STATE_MAX;
        *ret = TAKE_PTR(g);
        return 0;
}

Guest *guest_free(Guest *g) {
        if (!g)
                return NULL;
        g->qmp = qmp_client_free(g->qmp);
        g->qga = qga_client_free(g->qga);
        sd_event_source_disable_unref(g->timer);
        sd_event_source_disable_unref(g->reconnect);
        sd_event_source_disable_unref(g->agent_reconnect);
        rs_guest_free(g->core);
        sd_event_unref(g->event);
        free(g->vmem_id);
        free(g->name);
        free(g->uuid);
        free(g->qmp_path);
        free(g->agent_path);
        free(g->state_dir);
        free(g);
        return NULL;
}

int guest_start(Guest *g) {
        if (!g->qmp_path)
                return -EINVAL; /* driven guests have no QMP to connect to */
        int r = guest_connect(g);
        if (r < 0) {
                /* Typically ECONNREFUSED: QEMU bound the socket but does not listen yet. */
                guest_set_fault(g, "cannot connect to %s: %s", g->qmp_path, strerror(-r));
                guest_schedule_reconnect(g);
        }
        if (g->agent_path && agent_connect(g) < 0)
                agent_schedule_reconnect(g);
        return 0;
}

static int guest_apply_policy(Guest *g) {
        RsPolicy p = g->base_policy;
        const char *bad;

        if (g->override_floor) {
                p.floor_bytes = g->override_floor;
                p.floor_percent = 0;
        }
        if (g->override_max)
                p.max_bytes = g->override_max;
        if (rs_policy_validate(&p, &bad) < 0)
                return -EINVAL;
        if (g->core && rs_guest_set_policy(g->core, &p) < 0)
                return -EINVAL;
        bool interval_changed = p.poll_interval_usec != g->policy.poll_interval_usec;
        g->policy = p;
        if (interval_changed && g->qmp && qmp_client_is_ready(g->qmp))
                (void) qmp_set_stats_polling_interval(g->qmp, NULL,
                                                      (unsigned) MAX(p.poll_interval_usec / USEC_PER_SEC, 1),
                                                      command_timeout(g), on_balloon_set, g);
        if (interval_changed && g->timer && g->phase == GUEST_PHASE_RUNNING)
                guest_tick_arm(g, p.poll_interval_usec);
        return 0;
}

int guest_set_policy(Guest *g, const RsPolicy *policy) {
        RsPolicy old = g->base_policy;
        g->base_policy = *policy;
        int r = guest_apply_policy(g);
        if (r < 0)
                g->base_policy = old;
        return r;
}

int guest_set_overrides(Guest *g, uint64_t floor, uint64_t max) {
        uint64_t of = g->override_floor, om = g->override_max;
        g->override_floor = floor;
        g->override_max = max;
        int r = guest_apply_policy(g);
        if (r < 0) {
                g->override_floor = of;
                g->override_max = om;
        }
        return r;
}

void guest_set_paused(Guest *g, bool paused) {
        if (g->paused == paused)
                return;
        g->paused = paused;
        log_guest_info(g, paused ? "Paused by the operator" : "Resumed by the operator");
}

int guest_request_probe(Guest *g) {
        if (!g->core || g->phase != GUEST_PHASE_RUNNING)
                return -EBUSY;
        g->probe_requested = true;
        return 0;
}

int guest_set_state_dir(Guest *g, const char *dir) {
        char *copy = dir ? strdup(dir) : NULL;
        if (dir && !copy)
                return -ENOMEM;
        free(g->state_dir);
        g->state_dir = copy;
        return 0;
}

const char *guest_state_string(const Guest *g) {
        static const char *const names[_RS_STATE_MAX] = {
                [RS_STATE_LEARN] = "learn",         [RS_STATE_PROBE] = "probe", [RS_STATE_BACKOFF] = "backoff",
                [RS_STATE_HOLD] = "hold",           [RS_STATE_GROW] = "grow",   [RS_STATE_EMERGENCY] = "emergency",
                [RS_STATE_OBSERVE] = "observe",
        };
        if (g->phase == GUEST_PHASE_FAULTY)
                return "faulty";
        if (g->phase == GUEST_PHASE_CONNECTING || !g->core)
                return "connecting";
        if (g->paused)
                return "paused";
        RsState s = rs_guest_state(g->core);
        return s < _RS_STATE_MAX ? names[s] : "unknown";
}

const char *guest_tier_string(const Guest *g) {
        if (!g->core)
                return NULL;
        switch (rs_guest_estimate(g->core)->tier) {
        case RS_TIER_HOST:
                return "host";
        case RS_TIER_BALLOON:
                return "balloon";
        case RS_TIER_AGENT:
                return "agent";
        default:
                return NULL;
        }
}

const RsEstimate *guest_estimate(const Guest *g) {
        return g->core ? rs_guest_estimate(g->core) : NULL;
}

uint64_t guest_floor(const Guest *g) {
        return g->guest_max ? rs_policy_floor(&g->policy, g->guest_max) : 0;
}

uint64_t guest_max(const Guest *g) {
        return g->guest_max ? rs_policy_max(&g->policy, g->guest_max) : 0;
}

typedef struct ShutdownCall {
        Guest *guest;
        void (*done)(Guest *g, void *userdata);
        void *userdata;
} ShutdownCall;

static void on_shutdown_balloon(QmpClient *c _unused_, const QmpReply *reply, void *userdata) {
        ShutdownCall *call = userdata;
        if (reply->error < 0)
                log_named_guest_warning(call->guest->name, NULL, "Leaving the guest at its size failed: %s",
                                  reply->error_desc ?: strerror(-reply->error));
        call->done(call->guest, call->userdata);
}

int guest_shutdown(Guest *g, ShutdownAction action, void (*done)(Guest *g, void *userdata), void *userdata) {
        const RsEstimate *e = guest_estimate(g);
        char b[FORMAT_SIZE_MAX];
        uint64_t size;
        int r;

        if (action == SHUTDOWN_ACTION_KEEP || !g->core || g->policy.mode == RS_MODE_OBSERVE ||
            g->phase != GUEST_PHASE_RUNNING || (!g->driver && (!g->qmp || !qmp_client_is_ready(g->qmp))))
                return 0;
        if (action == SHUTDOWN_ACTION_ESTIMATE && e->estimate != RS_UNKNOWN)
                size = e->estimate + (uint64_t) ((double) e->estimate * g->policy.margin_percent / 100.0);
        else
                size = guest_max(g);
        size = CLAMP(size, guest_floor(g), guest_max(g));
        /* Only ever grow at shutdown: nobody is left to watch a guest being squeezed. */
        if (g->actual >= size && g->balloon_target >= size)
                return 0;
        size = MAX(size, MIN(g->actual, guest_max(g)));
        /* As in guest_send_balloon(): the balloon covers the boot memory only. */
        uint64_t plugged = g->vmem_id ? g->vmem_requested : 0;
        if (size <= plugged)
                return 0;

        if (g->driver) {
                /* Synchronous: done when it returns. */
                r = g->driver->set_balloon(g, size - plugged, g->driver_data);
                if (r < 0)
                        return log_named_guest_warning_errno(g->name, NULL, r, "Leaving the guest at its size failed: %m");
                log_guest_info(g, "Left the guest at %s (shutdown-action=%s)",
                               format_size(b, sizeof(b), size), shutdown_action_to_string(action));
                return 0;
        }

        ShutdownCall *call = malloc(sizeof(*call));
        if (!call)
                return -ENOMEM;
        *call = (ShutdownCall) { g, done, userdata };
        json_object *args = json_object_new_object();
        json_object_object_add(args, "value", json_object_new_int64((int64_t) (size - plugged)));
        r = qmp_client_execute_full(g->qmp, "balloon", args, 2 * USEC_PER_SEC, on_shutdown_balloon, call, free);
        if (r < 0) {
                free(call);
                return r;
        }
        log_guest_info(g, "Leaving the guest at %s (shutdown-action=%s)",
                       format_size(b, sizeof(b), size), shutdown_action_to_string(action));
        return 1;
}

/* ---- driven guests ---- */

int guest_new_driven(sd_event *event, GuestSource source, const char *name, const char *uuid, const char *state_dir,
                     const RsPolicy *policy, const GuestHooks *hooks, void *userdata, const GuestDriver *driver,
                     void *driver_data, Guest **ret) {
        Guest *g;
        int r;

        if (!driver || !driver->set_balloon || !driver->set_virtio_mem)
                return -EINVAL;
        r = guest_new(event, name, NULL, NULL, state_dir, policy, hooks, userdata, &g);
        if (r < 0)
                return r;
        if (uuid && !(g->uuid = strdup(uuid))) {
                guest_free(g);
                return -ENOMEM;
        }
        g->source = source;
        g->driver = driver;
        g->driver_data = driver_data;
        *ret = g;
        return 0;
}

int guest_driven_attach(Guest *g, const GuestResources *res) {
        if (!g->driver || !res)
                return -EINVAL;
        if (res->vmem_id) {
                char *id = strdup(res->vmem_id);
                if (!id)
                        return -ENOMEM;
                free(g->vmem_id);
                g->vmem_id = id;
                g->vmem_size = res->vmem_size;
                g->vmem_max = res->vmem_max;
                g->vmem_block = res->vmem_block;
                g->vmem_requested = res->vmem_requested;
        } else {
                free(g->vmem_id);
                g->vmem_id = NULL;
        }
        g->base_memory = res->base_memory;
        g->mem_max_size = res->mem_max_size;
        g->mem_slots = res->mem_slots;
        g->devices_bytes = res->devices_bytes;
        g->dimm_bytes = res->dimm_bytes;
        g->dimm_count = res->dimm_count;
        if (res->actual > 0)
                g->actual = res->actual;
        g->fpr_known = res->fpr_known;
        g->free_page_reporting = res->free_page_reporting;
        g->driven_agent = res->agent;
        /* A core exists already (re-attach): its size stays what it was created with. */
        if (g->core && g->phase == GUEST_PHASE_RUNNING)
                return 0;
        return guest_setup_finish(g);
}

void guest_set_faulty(Guest *g, const char *fault) {
        if (g->phase == GUEST_PHASE_FAULTY && strcmp(g->fault, fault ?: "") == 0)
                return;
        guest_set_fault(g, "%s", fault ?: "");
        g->phase = GUEST_PHASE_FAULTY;
        g->cycle_pending = 0;
        guest_notify(g, false);
}

int guest_cycle_begin(Guest *g) {
        if (g->phase != GUEST_PHASE_RUNNING || !g->core)
                return -EAGAIN;
        if (g->cycle_pending > 0)
                return -EBUSY;
        rs_sample_init(&g->sample);
        g->cycle_qmp_failed = false;
        g->cycle_error[0] = '\0';
        g->cycle_started = now_usec(CLOCK_MONOTONIC);
        g->cycle_pending = 1;
        return 0;
}

void guest_cycle_hold(Guest *g) {
        g->cycle_pending++;
}

void guest_cycle_step_done(Guest *g) {
        cycle_step_done(g);
}

void guest_cycle_cancel(Guest *g) {
        g->cycle_pending = 0;
}

void guest_cycle_fail(Guest *g, const char *error) {
        g->cycle_qmp_failed = true;
        snprintf(g->cycle_error, sizeof(g->cycle_error), "%s", error ?: "unknown error");
}

void guest_sample_add_stats(Guest *g, const QmpGuestStats *stats) {
        if (guest_check_stats_time(g, stats))
                sample_from_stats(&g->sample, stats);
}

void guest_sample_add_agent(Guest *g, const GuestVmstat *vmstat, const GuestPsi *psi) {
        if (vmstat)
                sample_from_vmstat(&g->sample, vmstat);
        if (psi) {
                g->sample.level[RS_LEVEL_PSI_SOME_AVG10] = psi_hundredths(&psi->some);
                g->sample.level[RS_LEVEL_PSI_FULL_AVG10] = psi_hundredths(&psi->full);
                if (psi->some.known)
                        g->sample.counter[RS_COUNTER_PSI_SOME_TOTAL] = psi->some.total_usec;
                if (psi->full.known)
                        g->sample.counter[RS_COUNTER_PSI_FULL_TOTAL] = psi->full.total_usec;
        }
}
