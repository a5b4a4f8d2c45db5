/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A guest whatever drives it (daemon/qemu/guest-qmp.c, daemon/libvirt/guest-libvirt.c): the
 * cycle (sample → decide → apply → persist), the state file, the history, and the views guest.h
 * hands out; the actuators are guest-actuate.c's. */
#include "daemon/guest-internal.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/size.h"
#include "common/time-util.h"
#include "common/utf8.h"
#include "daemon/host/host.h"
#include "daemon/log.h"
#include "daemon/state-file.h"

/* The state file is rewritten when something changed, and at least this often. */
#define STATE_SAVE_USEC (60 * USEC_PER_SEC)
/* Untrusted input: stats whose last-update stays put this many cycles are stale; dated further
 * ahead than this, they lie; a data fault clears after this many clean cycles. */
#define STATS_STALE_CYCLES 5
#define STATS_FUTURE_SLACK_SEC 300
#define DATA_CLEAN_CYCLES 3

static int guest_setup_finish(Guest *g, const char *agent);
static int guest_apply_policy(Guest *g);

void guest_notify(Guest *g, bool estimate_changed) {
        if (g->hooks && g->hooks->updated)
                g->hooks->updated(g, estimate_changed, g->userdata);
}

/* A fault where there was none (or only a connecting guest's note) starts an episode, which the
 * faults counter counts; a fault that changes into another, or is set again, is the same one. A
 * skipped guest has no fault of its own: no episode, said once at info level. */
void guest_set_fault(Guest *g, GuestFault kind, const char *fmt, ...) {
        bool had = g->fault[0] != '\0' && g->fault_counted;
        char detail[sizeof(g->fault)];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof(detail), fmt, ap);
        va_end(ap);
        (void) guest_fault_format(kind, detail, g->fault, sizeof(g->fault));
        g->fault_kind = g->fault[0] ? kind : GUEST_FAULT_NONE;
        if (!guest_fault_is_episode(kind)) {
                g->fault_counted = false;
                if (kind == GUEST_FAULT_SKIPPED)
                        log_guest_info(g, "Not managed: %s", g->fault);
                return;
        }
        if (!had && g->fault[0] != '\0') {
                g->counters.faults++;
                g->fault_counted = true;
                /* The episode's start, found by its MESSAGE_ID (the callers log their own detail). */
                LogEvent event = {
                        .message_id = LOG_MESSAGE_FAULT,
                        .guest_uuid = g->uuid,
                        .target_bytes = g->target ?: UINT64_MAX,
                        .actual_bytes = g->actual ?: UINT64_MAX,
                        .estimate_bytes = UINT64_MAX,
                        .fault_kind = guest_fault_to_string(kind),
                };
                log_named_guest_event(LOG_WARNING, g->name, guest_state_string(g), &event, "fault: %s", g->fault);
        }
}

void guest_clear_fault(Guest *g) {
        g->fault[0] = '\0';
        g->fault_kind = GUEST_FAULT_NONE;
}

/* ---- state file ---- */

static uint64_t field_to_u64(int64_t v) {
        return v < 0 ? RS_UNKNOWN : (uint64_t) v;
}

static int get_u64_field(const GuestStateRecord *rec, const char *key, uint64_t *ret) {
        int64_t v;
        int r = guest_state_get_int(rec, key, &v);
        if (r < 0)
                return r;
        *ret = field_to_u64(v);
        return 0;
}

/* The core's snapshot, from a state file that loaded: 1 when the core resumed from it, -errno
 * (logged) when it cannot be used. */
static int guest_restore_snapshot(Guest *g, const GuestStateRecord *rec) {
        RsGuestSnapshot s = {};
        int64_t v;
        int r;

        /* The magic names the core that saved it (estimator.h): either is read, and the core
         * refuses the other's (-EXDEV, guest_restore_state() says so). */
        if (guest_state_get_int(rec, "magic", &v) < 0 ||
            ((uint64_t) v != RS_SNAPSHOT_MAGIC && (uint64_t) v != RS_SNAPSHOT_COST_MAGIC) ||
            guest_state_get_int(rec, "version", &v) < 0 || v != RS_SNAPSHOT_VERSION)
                return log_named_guest_warning_errno(g->name, NULL, EPROTONOSUPPORT,
                                               "Ignoring the state file: not a snapshot this daemon can read");
        (void) guest_state_get_int(rec, "magic", &v);
        s.magic = (uint32_t) v;
        s.version = RS_SNAPSHOT_VERSION;
        if (get_u64_field(rec, "guest_max", &s.guest_max) < 0 || get_u64_field(rec, "estimate", &s.estimate) < 0 ||
            get_u64_field(rec, "lower", &s.lower) < 0 || get_u64_field(rec, "upper", &s.upper) < 0 ||
            get_u64_field(rec, "scan_onset", &s.scan_onset) < 0 || get_u64_field(rec, "target", &s.target) < 0 ||
            guest_state_get_double(rec, "baseline_useful", &s.baseline_useful) < 0 ||
            guest_state_get_double(rec, "baseline_scan", &s.baseline_scan) < 0 ||
            guest_state_get_double(rec, "baseline_psi", &s.baseline_psi) < 0)
                return log_named_guest_warning_errno(g->name, NULL, EBADMSG, "Ignoring the state file: fields missing");
        if (guest_state_get_int(rec, "baseline_known", &v) >= 0)
                s.baseline_known = (uint32_t) v;
        if (guest_state_get_int(rec, "tier", &v) >= 0 && v >= 0 && v < _RS_TIER_MAX)
                s.tier = (uint32_t) v;
        if (guest_state_get_int(rec, "streaming", &v) >= 0)
                s.streaming = v != 0;
        if (guest_state_get_int(rec, "hold_doublings", &v) >= 0 && v >= 0 && v <= 64)
                s.hold_doublings = (uint32_t) v; /* absent in older files: 0, the policy's hold */
        if (get_u64_field(rec, "last_within", &s.last_within) < 0 || !rs_known(s.last_within))
                s.last_within = 0; /* the probe's files have none */

        r = rs_guest_restore(g->core, &s, now_usec(CLOCK_MONOTONIC));
        if (r == -EXDEV)
                return r; /* the other core's: guest_restore_state() says so, in one line */
        if (r < 0)
                return log_named_guest_warning_errno(g->name, NULL, r,
                                               "Ignoring the state file: it was saved for another guest size");
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];
        log_named_guest_info(g->name, rs_state_to_string(rs_guest_state(g->core)),
                       "Resumed from the state file: estimate %s, target %s",
                       fmt_size(b1, sizeof(b1), s.estimate), fmt_size(b2, sizeof(b2), s.target));
        return 1;
}

/* What the daemon keeps beside the core's snapshot, used even when the snapshot cannot be: the
 * size the guest had when rightsize first took it over, the operator's overrides and pause, and
 * a pause for a balloon set from outside. Returns whether the take-over size was there. */
static bool guest_restore_daemon_fields(Guest *g, const GuestStateRecord *rec) {
        uint64_t takeover = 0, floor = 0, max = 0;
        int64_t v;
        bool have_takeover = false;

        if (get_u64_field(rec, "takeover_bytes", &takeover) >= 0 && rs_known(takeover) && takeover > 0) {
                g->takeover_size = takeover;
                have_takeover = true;
        }
        if (get_u64_field(rec, "override_floor", &floor) < 0 || !rs_known(floor))
                floor = 0;
        if (get_u64_field(rec, "override_max", &max) < 0 || !rs_known(max))
                max = 0;
        if (floor > 0 || max > 0) {
                g->override_floor = floor;
                g->override_max = max;
                if (guest_apply_policy(g) < 0) {
                        g->override_floor = g->override_max = 0;
                        log_guest_warning(g, "Dropping the floor and max set before the restart: they no longer "
                                             "make a valid policy with %s", g->policy.name);
                } else
                        log_guest_info(g, "The floor and max set before the restart are kept");
        }
        if (guest_state_get_int(rec, "paused_outside", &v) >= 0 && (v == 1 || v == 2)) {
                guest_pause_outside(g, v == 2, true);
                log_guest_notice(g, "Still paused: its balloon was set from outside before the restart; "
                                    "rightsizectl resume takes the guest back");
        } else if (guest_state_get_int(rec, "paused", &v) >= 0 && v != 0) {
                g->paused = true;
                log_guest_notice(g, "Still paused by the operator, as before the restart");
        }
        return have_takeover;
}

/* The state file: the core resumes from it, or, when there is one the core cannot use (a crash
 * left it damaged, the guest's size or actuator changed), the guest may have been left squeezed
 * by a probe: it goes back to the size it had when rightsize took it over (max when even that is
 * lost) before the core learns it, instead of being learned at the squeezed size. */
static int guest_restore_state(Guest *g) {
        char b[FORMAT_SIZE_MAX];
        GuestStateRecord rec;
        int r;

        if (!g->state_dir)
                return 0;
        r = state_file_load_guest(g->state_dir, g->name, g->uuid, &rec);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                g->adopt_size = guest_max(g);
                log_guest_warning(g, "The state file cannot be read: the guest goes back to max (%s) before "
                                     "learning, as a probe may have left it squeezed",
                                  fmt_size(b, sizeof(b), g->adopt_size));
                return r;
        }
        bool have_takeover = guest_restore_daemon_fields(g, &rec);
        uint64_t now = now_usec(CLOCK_REALTIME);
        /* Sizes learned of a workload nobody watched since (the daemon stopped, the guest off) are
         * a guess: the operator's choices above stand, the sizes are learned again. A file dated
         * ahead of the clock cannot be judged: not trusted either. */
        bool stale = g->state_stale_usec > 0 &&
                     (rec.saved_at_usec > now + STATS_FUTURE_SLACK_SEC * USEC_PER_SEC ||
                      rec.saved_at_usec + g->state_stale_usec < now);
        if (stale) {
                g->adopt_size = have_takeover ? MIN(MAX(g->takeover_size, guest_floor(g)), guest_max(g)) : guest_max(g);
                if (rec.saved_at_usec > now)
                        log_guest_notice(g, "The state file is dated ahead of the clock: its sizes are not trusted, "
                                            "the guest goes back to %s (%s) and is learned anew",
                                         fmt_size(b, sizeof(b), g->adopt_size),
                                         have_takeover ? "its size when rightsize took it over" : "max");
                else
                        log_guest_notice(g, "The state file was saved %.1f days ago, more than state-stale-after: its "
                                            "sizes are not trusted, the guest goes back to %s (%s) and is learned anew",
                                         (double) (now - rec.saved_at_usec) / (86400.0 * USEC_PER_SEC),
                                         fmt_size(b, sizeof(b), g->adopt_size),
                                         have_takeover ? "its size when rightsize took it over" : "max");
                return -ESTALE;
        }
        r = guest_restore_snapshot(g, &rec);
        if (r >= 0)
                return r;
        g->adopt_size = have_takeover ? MIN(MAX(g->takeover_size, guest_floor(g)), guest_max(g)) : guest_max(g);
        if (r == -EXDEV) {
                /* The policy's controller changed since the save: what the other core learned is
                 * not this one's to read, and it may have left the guest squeezed. */
                log_guest_notice(g, "Discarding the state file: saved by controller = %s, the policy now says "
                                    "controller = %s; the guest goes back to %s (%s) and is learned anew",
                                 rs_core_to_string(g->policy.core == RS_CORE_COST ? RS_CORE_PROBE : RS_CORE_COST),
                                 rs_core_to_string(g->policy.core), fmt_size(b, sizeof(b), g->adopt_size),
                                 have_takeover ? "its size when rightsize took it over" : "max");
                return r;
        }
        uint64_t sent = 0;
        char b2[FORMAT_SIZE_MAX];
        (void) get_u64_field(&rec, "balloon_sent_bytes", &sent);
        log_guest_warning(g, "The guest goes back to %s (%s) before learning: its balloon was last set to %s by "
                             "rightsize, maybe in a probe",
                          fmt_size(b, sizeof(b), g->adopt_size),
                          have_takeover ? "its size when rightsize took it over" : "max",
                          rs_known(sent) && sent > 0 ? fmt_size(b2, sizeof(b2), sent) : "an unknown size");
        return r;
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

/* ---- the guest's size ---- */

/* QEMU's balloon covers the boot memory only: a QMP guest's size is what the balloon leaves of
 * it plus what virtio-mem has plugged (measured with QEMU 7.2: plugging 256 MiB leaves
 * query-balloon's actual where it was). */
static void guest_update_size(Guest *g) {
        if (g->balloon_actual > 0)
                g->actual = g->balloon_actual + (g->vmem_id ? g->vmem_size : 0);
}

/* ---- the cycle ---- */

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

/* The counters of the metrics, from this cycle's (sanitized) sample; `before` is the state the
 * guest spent the interval in. */
static void guest_update_counts(Guest *g, RsState before, RsState after) {
        const uint64_t *c = g->sample.counter;
        uint64_t refaults = metrics_counter_add(
                metrics_counter_update(&g->counters.refaults_anon, c[RS_COUNTER_REFAULT_ANON], RS_UNKNOWN),
                metrics_counter_update(&g->counters.refaults_file, c[RS_COUNTER_REFAULT_FILE], RS_UNKNOWN));

        /* The same preference as the major fault rate: the agent's vmstat, then the balloon's. */
        (void) metrics_counter_update(&g->counters.major_faults, c[RS_COUNTER_PGMAJFAULT], c[RS_COUNTER_MAJOR_FAULTS]);
        /* The balloon's oom-kills needs QEMU 9.2 (and qemu-monitor for libvirt guests). */
        (void) metrics_counter_update(&g->counters.oom_kills, c[RS_COUNTER_OOM_KILLS], c[RS_COUNTER_OOM_KILL]);

        /* The cost of probing: what the squeeze and the way back from it made the guest
         * refault; a cycle starts where the core leaves LEARN or HOLD for PROBE, so that one
         * descent counts once however many steps and backoffs it takes. */
        if (before == RS_STATE_PROBE || before == RS_STATE_BACKOFF)
                g->counters.probe_refaults = metrics_counter_add(g->counters.probe_refaults, refaults);
        if (after == RS_STATE_PROBE && (before == RS_STATE_LEARN || before == RS_STATE_HOLD))
                g->counters.probe_cycles++;
}

/* A probe squeezes until the guest refaults; without deflate-on-oom, a step too far meets the
 * guest's OOM killer instead of a balloon that gives way. Said once, at the first probe. */
static void guest_warn_probe_without_deflate(Guest *g, RsState before, RsState after) {
        if (g->deflate_warned || !g->deflate_on_oom_known || g->deflate_on_oom || after != RS_STATE_PROBE ||
            before == RS_STATE_PROBE)
                return;
        g->deflate_warned = true;
        log_guest_warning(g, "Probing a guest whose balloon has no deflate-on-oom (libvirt: <memballoon "
                             "autodeflate='on'>): a squeeze too far meets its OOM killer before it can take "
                             "memory back");
}

static bool estimate_changed(Guest *g) {
        return estimate_signal_update(&g->signalled, rs_guest_estimate(g->core));
}

/* The cycle's sign of untrusted input becomes the fault (a stalled balloon's reason goes first),
 * and goes once DATA_CLEAN_CYCLES cycles came without one. */
static void guest_report_data_problem(Guest *g) {
        if (g->data_problem[0]) {
                bool news = g->fault_kind != GUEST_FAULT_UNTRUSTED_DATA || strcmp(g->fault, g->data_problem) != 0;
                uint64_t episodes = g->counters.faults;
                if (!g->balloon_watch.stalled)
                        guest_set_fault(g, GUEST_FAULT_UNTRUSTED_DATA, "%s", g->data_problem);
                /* A new fault episode was logged as one; a changed problem inside one is logged here. */
                if (news && g->counters.faults == episodes)
                        log_guest_warning(g, "%s", g->data_problem);
                g->data_clean_cycles = 0;
        } else if (g->fault_kind == GUEST_FAULT_UNTRUSTED_DATA && ++g->data_clean_cycles >= DATA_CLEAN_CYCLES)
                guest_clear_fault(g);
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

/* last_update is QEMU's clock when the guest last reported: far ahead of ours, it lies; still
 * where it was after several intervals, the guest stopped reporting. Returns whether the stats
 * may be fed to the core: stale ones would read as a quiet guest (rates of 0) and invite
 * probing, so without them the guest is judged on what is left (agent, host) and held. */
static bool guest_check_stats_time(Guest *g, uint64_t last_update) {
        uint64_t now_sec = now_usec(CLOCK_REALTIME) / USEC_PER_SEC;

        g->stats_stale_cycles = last_update == g->stats_last_update ? g->stats_stale_cycles + 1 : 0;
        g->stats_last_update = last_update;
        if (last_update > now_sec + STATS_FUTURE_SLACK_SEC) {
                snprintf(g->data_problem, sizeof(g->data_problem),
                         "guest stats lie: last update %" PRIu64 " s in the future", last_update - now_sec);
                return false;
        }
        if (g->stats_stale_cycles >= STATS_STALE_CYCLES) {
                snprintf(g->data_problem, sizeof(g->data_problem),
                         "guest stats stale: not updated for %u intervals", g->stats_stale_cycles);
                return false;
        }
        return true;
}

/* The cycle's readings, with what the host and the guest's size add, made one trusted sample.
 * Returns false when the cycle ends here (its readings failed). */
static bool cycle_sample(Guest *g, uint64_t now) {
        HostMemory host;

        if (g->cycle_failed) {
                /* A timeout on one guest only costs that guest its tick. */
                log_guest_debug(g, "Skipping this interval: %s", g->cycle_error);
                snprintf(g->data_problem, sizeof(g->data_problem), "%s failing: %s",
                         g->driver->calls ?: "its calls", g->cycle_error);
                return false;
        }

        const HostMemory *h = g->hooks && g->hooks->host_memory ? g->hooks->host_memory(g, g->userdata) : NULL;
        if (!h) {
                (void) host_memory_read("/proc", &host);
                h = &host;
        }
        g->sample.level[RS_LEVEL_HOST_MEM_AVAILABLE] = h->mem_available;
        g->sample.level[RS_LEVEL_HOST_PSI_SOME_AVG10] = h->psi_some_avg10;
        g->sample.level[RS_LEVEL_HOST_PSI_FULL_AVG10] = h->psi_full_avg10;

        g->sample.level[RS_LEVEL_BALLOON_ACTUAL] = g->actual ?: RS_UNKNOWN;
        if (g->vmem_id)
                g->sample.level[RS_LEVEL_VIRTIO_MEM_SIZE] = g->vmem_size;
        /* The pushback signal: the target we asked for (the guest's own size before that). A
         * balloon raised above a target it had reached is someone else's size (or a reboot), not
         * the guest refusing to give memory: read as pushback, it would grow the estimate. */
        g->sample.level[RS_LEVEL_BALLOON_TARGET] = guest_balloon_driver_pending(g, now) || guest_balloon_raised(g)
                                                           ? RS_UNKNOWN
                                                           : g->balloon_target ?: g->actual ?: RS_UNKNOWN;

        /* Everything the guest told us is untrusted. */
        RsSample reported = g->sample;
        rs_sample_sanitize(&g->sample, g->guest_max);
        guest_check_sanitized(g, &reported);
        return true;
}

/* The decision core's target for the sample, after host arbitration. */
static uint64_t cycle_decide(Guest *g, uint64_t now) {
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX], b3[FORMAT_SIZE_MAX];
        RsDecision d;

        RsState before = rs_guest_state(g->core);
        rs_guest_feed(g->core, &g->sample, now);
        rs_guest_decide(g->core, now, &d);
        /* What the decision was made on, for whoever asks why (log-level = debug; formatted
         * only then: this runs for every guest every interval). */
        const RsObservation *o = rs_guest_observation(g->core);
        if (log_get_max_level() >= LOG_DEBUG)
                log_guest_debug(g, "sample at %s: %s (%s); refaults %.0f/s useful %.0f/s (threshold %.0f), scan %.0f/s, "
                                "PSI %.1f %%, free %s%s%s",
                                fmt_size(b1, sizeof(b1), o->size), rs_verdict_to_string(o->verdict), o->why,
                                o->raw_refault, o->useful, o->threshold, o->scan, o->psi_some,
                                fmt_size(b2, sizeof(b2), g->sample.level[RS_LEVEL_FREE]),
                                o->refilling ? ", refilling" : "", o->inflating ? ", balloon inflating" : "");
        g->decision = d;
        g->have_decision = true;
        g->want = d.target;
        g->updated_realtime = now_usec(CLOCK_REALTIME);
        guest_update_rates(g, now);
        guest_update_counts(g, before, d.state);
        guest_warn_probe_without_deflate(g, before, d.state);

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

        if (!g->balloon_watch.stalled && !g->balloon_watch.paused_outside) {
                size_t n = (size_t) utf8_snprintf(g->reason, sizeof(g->reason), "%s", d.reason);
                if (g->agent_problem[0] && n < sizeof(g->reason))
                        (void) utf8_snprintf(g->reason + n, sizeof(g->reason) - n, "; %s", g->agent_problem);
        }
        if (target != g->target || d.state != before) {
                const RsEstimate *e = rs_guest_estimate(g->core);
                bool emergency = d.state == RS_STATE_EMERGENCY && before != RS_STATE_EMERGENCY;
                LogEvent event = {
                        .message_id = emergency ? LOG_MESSAGE_EMERGENCY
                                      : target != g->target ? LOG_MESSAGE_RESIZE : NULL,
                        .guest_uuid = g->uuid,
                        .target_bytes = target,
                        .actual_bytes = g->actual ?: UINT64_MAX,
                        .estimate_bytes = rs_known(e->estimate) ? e->estimate : UINT64_MAX,
                };
                log_named_guest_event(emergency ? LOG_WARNING : LOG_INFO, g->name, rs_state_to_string(d.state), &event,
                                      "target %s (actual %s, estimate %s): %s%s",
                                      fmt_size(b1, sizeof(b1), target), fmt_size(b2, sizeof(b2), g->actual),
                                      fmt_size(b3, sizeof(b3), e->estimate), d.reason,
                                      target != d.target ? " [arbitrated]" : "");
        }
        return target;
}

/* The target to the devices (guest_actuate()), and into the history. */
static void cycle_apply(Guest *g, uint64_t target, uint64_t now) {
        RsState state = rs_guest_state(g->core);

        g->target = target;
        guest_actuate(g, target, g->decision.urgent, g->decision.fine, now);
        /* Where the guest is held, for a pause or observe mode that comes in the middle of the
         * probe that follows (guest_give_back()). */
        if (state == RS_STATE_LEARN || state == RS_STATE_HOLD)
                g->held_size = g->target ?: g->actual;
        history_push(g, g->updated_realtime);
}

/* The state file: not on every target change (probing moves it each interval, and each save
 * is two fsyncs that block the loop; a restore holds or backs off from the estimate anyway). */
static void cycle_persist(Guest *g, uint64_t now) {
        if (rs_guest_state(g->core) != g->saved_state || rs_guest_estimate(g->core)->estimate != g->saved_estimate ||
            now >= g->saved_usec + STATE_SAVE_USEC)
                guest_save_later(g);
}

/* Every reading of the cycle is in: sample → decide → apply → persist. */
static void guest_finish_cycle(Guest *g) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (g->phase != GUEST_PHASE_RUNNING || (g->driver->connected && !g->driver->connected(g, g->driver_data)))
                return;
        assert(g->core); /* RUNNING means attached: guest_setup_finish() made the core */
        if (!cycle_sample(g, now)) {
                guest_report_data_problem(g);
                guest_notify(g, false);
                return;
        }
        g->reported = g->sample;
        uint64_t target = cycle_decide(g, now);
        cycle_apply(g, target, now);
        cycle_persist(g, now);
        guest_boot_history_sample(g);
        guest_report_data_problem(g);
        guest_notify(g, estimate_changed(g));
}

static void cycle_step_done(Guest *g) {
        if (g->cycle_pending == 0)
                return;
        if (--g->cycle_pending == 0)
                guest_finish_cycle(g);
}

/* An agent that fails is no fault of the guest (the balloon stats go on), but it costs the
 * agent tier: say why in the reason, and in the log when it changes. "" when reads work. */
void guest_set_agent_problem(Guest *g, const char *problem) {
        char text[sizeof(g->agent_problem)];

        utf8_snprintf(text, sizeof(text), "%s", problem ?: "");
        if (strcmp(text, g->agent_problem) == 0)
                return;
        if (text[0])
                log_guest_warning(g, "%s; going on with balloon stats only", text);
        else
                log_guest_info(g, "Guest agent reads work again");
        memcpy(g->agent_problem, text, sizeof(text));
}

/* ---- attaching: the guest's memory is known ---- */

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
static int guest_setup_finish(Guest *g, const char *agent) {
        int r;

        g->guest_max = (g->base_memory ?: g->actual) +
                       (g->vmem_id && g->policy.actuator != RS_ACTUATOR_BALLOON ? g->vmem_max : 0);
        if (g->guest_max > 0 && guest_dimm_capable(g))
                g->guest_max += g->dimm_bytes + guest_dimm_room(g);
        if (g->guest_max == 0) {
                guest_set_fault(g, GUEST_FAULT_NO_SIZE, "no memory size known");
                g->phase = GUEST_PHASE_FAULTY;
                return -EINVAL;
        }
        if (!g->core) {
                r = rs_guest_new(&g->core, &g->policy, g->guest_max);
                if (r < 0) {
                        guest_set_fault(g, GUEST_FAULT_CORE_REFUSED, "%s", strerror(-r));
                        g->phase = GUEST_PHASE_FAULTY;
                        return r;
                }
                /* Before the state file, which keeps the first take-over's size across restarts. */
                g->takeover_size = g->actual;
                (void) guest_restore_state(g);
                guest_boot_history_load(g);
        }

        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];
        log_guest_info(g, "Managing: %s (balloon at %s), policy %s, agent %s, free page reporting %s%s%s",
                       fmt_size(b1, sizeof(b1), g->guest_max), fmt_size(b2, sizeof(b2), g->actual), g->policy.name,
                       agent ?: "none",
                       g->fpr_known ? (g->free_page_reporting ? "on" : "off") : "unknown",
                       g->vmem_id ? ", virtio-mem " : "", g->vmem_id ?: "");
        log_named_guest_debug(g->name, NULL, "maxmem %" PRIu64 ", %u slots, memory devices %" PRIu64 " (%u DIMMs)",
                        g->mem_max_size, g->mem_slots, g->devices_bytes, g->dimm_count);
        if (g->dimm_slot_bytes > 0)
                log_guest_info(g, "DIMM hotplug: %u slot(s) free, of up to %s each (within the policy's max)",
                               g->mem_slots - g->dimm_count, fmt_size(b1, sizeof(b1), g->dimm_slot_bytes));
        g->phase = GUEST_PHASE_RUNNING;
        g->running_since = now_usec(CLOCK_MONOTONIC);
        g->first_actual = g->actual;
        g->balloon_driver_seen = false;
        guest_clear_fault(g);
        guest_adopt(g);
        /* The cycles come from the driver. */
        guest_notify(g, false);
        return 0;
}

/* ---- public ---- */

int guest_new(sd_event *event, GuestSource source, const char *name, const char *uuid, const char *origin,
              const char *state_dir, const RsPolicy *policy, const GuestHooks *hooks, void *userdata,
              const GuestDriver *driver, void *driver_data, Guest **ret) {
        assert(event && name && origin && policy && ret);
        if (!driver || !driver->set_balloon || !driver->set_virtio_mem)
                return -EINVAL;
        _cleanup_free_ Guest *g = calloc(1, sizeof(Guest));
        if (!g)
                return -ENOMEM;
        g->name = strdup(name);
        g->uuid = uuid ? strdup(uuid) : NULL;
        g->origin = strdup(origin);
        g->state_dir = state_dir ? strdup(state_dir) : NULL;
        if (!g->name || (uuid && !g->uuid) || !g->origin || (state_dir && !g->state_dir)) {
                free(g->name);
                free(g->uuid);
                free(g->origin);
                free(g->state_dir);
                return -ENOMEM;
        }
        g->event = sd_event_ref(event);
        g->source = source;
        g->hooks = hooks;
        g->userdata = userdata;
        g->driver = driver;
        g->driver_data = driver_data;
        g->base_policy = *policy;
        g->policy = *policy;
        g->phase = GUEST_PHASE_CONNECTING;
        g->host_rss = g->host_swap = g->host_ksm = UINT64_MAX;
        rs_sample_init(&g->reported);
        g->prev_major = RS_UNKNOWN;
        g->major_fault_rate = g->refault_rate = NAN;
        estimate_signal_init(&g->signalled);
        metrics_counter_init(&g->counters.refaults_anon);
        metrics_counter_init(&g->counters.refaults_file);
        metrics_counter_init(&g->counters.major_faults);
        metrics_counter_init(&g->counters.oom_kills);
        g->saved_estimate = RS_UNKNOWN;
        g->saved_state = _RS_STATE_MAX;
        *ret = TAKE_PTR(g);
        return 0;
}

Guest *guest_free(Guest *g) {
        if (!g)
                return NULL;
        guest_save_release(g);
        guest_boot_history_release(g);
        if (g->driver->free)
                g->driver->free(g->driver_data);
        rs_guest_free(g->core);
        sd_event_unref(g->event);
        free(g->vmem_id);
        free(g->name);
        free(g->uuid);
        free(g->origin);
        free(g->state_dir);
        free(g);
        return NULL;
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
        /* Read before the core takes the policy: in observe mode it leaves the probe at once. */
        bool give_back = g->policy.mode != RS_MODE_OBSERVE && p.mode == RS_MODE_OBSERVE && guest_probe_under_way(g);
        if (g->core && rs_guest_set_policy(g->core, &p) < 0)
                return -EINVAL;
        uint64_t old_interval = g->policy.poll_interval_usec;
        g->policy = p;
        if (g->driver->policy_changed)
                g->driver->policy_changed(g, old_interval, g->driver_data);
        if (give_back)
                guest_give_back(g, "Observe mode begins");
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
                return r;
        }
        /* An operator's choice outlives a restart. */
        guest_save_later(g);
        return 0;
}

void guest_set_paused(Guest *g, bool paused) {
        if (g->paused == paused)
                return;
        if (paused && guest_probe_under_way(g))
                guest_give_back(g, "Paused");
        g->paused = paused;
        g->balloon_watch.paused_outside = false;
        log_guest_info(g, paused ? "Paused by the operator" : "Resumed by the operator");
        /* An operator's choice outlives a restart. */
        guest_save_later(g);
}

int guest_request_probe(Guest *g) {
        if (!g->core || g->phase != GUEST_PHASE_RUNNING)
                return -EBUSY;
        if (g->paused)
                return -EPERM;
        /* Asked of the core now, so that a refusal reaches whoever asked; the probe starts with
         * the next sample it is fed. */
        return rs_guest_probe_now(g->core, now_usec(CLOCK_MONOTONIC));
}

void guest_set_state_stale_usec(Guest *g, uint64_t usec) {
        g->state_stale_usec = usec;
}

int guest_set_state_dir(Guest *g, const char *dir) {
        char *copy = dir ? strdup(dir) : NULL;
        if (dir && !copy)
                return -ENOMEM;
        free(g->state_dir);
        g->state_dir = copy;
        return 0;
}

/* The daemon's own states around the estimator's (guest_state_string()); a guest out of
 * management is in the state its fault's kind says (guest_fault_state()). */
static const char *const daemon_state_names[] = { "connecting", "paused" };

const char *guest_state_string(const Guest *g) {
        if (g->phase == GUEST_PHASE_FAULTY)
                return guest_fault_state(g->fault_kind);
        if (g->phase == GUEST_PHASE_CONNECTING || !g->core)
                return daemon_state_names[0];
        if (g->paused)
                return daemon_state_names[1];
        return rs_state_to_string(rs_guest_state(g->core)) ?: "unknown";
}

size_t guest_all_state_names(const char **names, size_t max) {
        size_t n = 0;
        for (RsState s = 0; s < _RS_STATE_MAX && n < max; s++)
                names[n++] = rs_state_to_string(s);
        n += guest_fault_all_states(names + n, max - n);
        for (size_t i = 0; i < ARRAY_SIZE(daemon_state_names) && n < max; i++)
                names[n++] = daemon_state_names[i];
        return n;
}

const char *guest_tier_string(const Guest *g) {
        return g->core ? rs_tier_to_string(rs_guest_estimate(g->core)->tier) : NULL;
}

const RsEstimate *guest_estimate(const Guest *g) {
        return g->core ? rs_guest_estimate(g->core) : NULL;
}

unsigned guest_reprobes_skipped(const Guest *g) {
        return g->core ? rs_guest_reprobes_skipped(g->core) : 0;
}

const EstimateSignal *guest_estimate_signal(const Guest *g) {
        return &g->signalled;
}

/* What rightsizing's return is counted from: the size the guest had when rightsized took it over
 * (kept across restarts), not its max: a libvirt domain booted below its maximum gave that up to
 * its operator, not to rightsize. The max until the guest was taken over. */
static uint64_t reclaim_base(const Guest *g) {
        uint64_t max = guest_max(g);
        return g->takeover_size > 0 && g->takeover_size < max ? g->takeover_size : max;
}

uint64_t guest_reclaimable(const Guest *g) {
        if (!g->core)
                return UINT64_MAX;
        uint64_t hold = rs_guest_hold_size(g->core), max = guest_max(g);
        if (hold == RS_UNKNOWN)
                return UINT64_MAX;
        return max > hold ? max - hold : 0;
}

uint64_t guest_reclaimed(const Guest *g) {
        uint64_t base = reclaim_base(g), actual = guest_actual(g);
        if (actual == 0 || base == 0)
                return UINT64_MAX;
        return base > actual ? base - actual : 0;
}

const char *guest_source_string(GuestSource s) {
        return s == GUEST_SOURCE_LIBVIRT ? "libvirt" : "qemu";
}

const char *guest_source_origin_kind(GuestSource s) {
        return s == GUEST_SOURCE_LIBVIRT ? "libvirt domain" : "QMP socket";
}

uint64_t guest_floor(const Guest *g) {
        return g->guest_max ? rs_policy_floor(&g->policy, g->guest_max) : 0;
}

uint64_t guest_max(const Guest *g) {
        return g->guest_max ? rs_policy_max(&g->policy, g->guest_max) : 0;
}

/* ---- views ---- */

/* The views that hand out one field as it is, and the texts that are "" when there is nothing to
 * say (NULL then): a table, so that the views that do more stand out below it. */
#define DEFINE_GUEST_FIELD(type, view, field) \
        type guest_##view(const Guest *g) {   \
                return g->field;              \
        }
#define DEFINE_GUEST_TEXT(view, field)                    \
        const char *guest_##view(const Guest *g) {        \
                return g->field[0] ? g->field : NULL;     \
        }

DEFINE_GUEST_FIELD(const char *, name, name)
DEFINE_GUEST_FIELD(const char *, uuid, uuid)
DEFINE_GUEST_FIELD(GuestSource, source, source)
DEFINE_GUEST_FIELD(const char *, origin, origin)
DEFINE_GUEST_FIELD(sd_event *, event, event)
DEFINE_GUEST_FIELD(GuestPhase, phase, phase)
DEFINE_GUEST_FIELD(bool, is_paused, paused)
DEFINE_GUEST_FIELD(uint64_t, actual, actual)
DEFINE_GUEST_FIELD(uint64_t, want, want)
DEFINE_GUEST_FIELD(bool, has_decision, have_decision)
DEFINE_GUEST_FIELD(uint64_t, target, target)
DEFINE_GUEST_FIELD(uint64_t, balloon_target, balloon_target)
DEFINE_GUEST_FIELD(const char *, vmem_id, vmem_id)
DEFINE_GUEST_FIELD(uint64_t, vmem_size, vmem_size)
DEFINE_GUEST_FIELD(uint64_t, vmem_requested, vmem_requested)
DEFINE_GUEST_FIELD(uint64_t, host_rss, host_rss)
DEFINE_GUEST_FIELD(uint64_t, host_swap, host_swap)
DEFINE_GUEST_FIELD(uint64_t, size_max, guest_max)
DEFINE_GUEST_FIELD(uint64_t, host_ksm, host_ksm)
DEFINE_GUEST_FIELD(uint64_t, updated_realtime, updated_realtime)
DEFINE_GUEST_FIELD(double, refault_rate, refault_rate)
DEFINE_GUEST_FIELD(double, major_fault_rate, major_fault_rate)
DEFINE_GUEST_TEXT(fault, fault)
DEFINE_GUEST_FIELD(GuestFault, fault_kind, fault_kind)
DEFINE_GUEST_TEXT(reason, reason)
DEFINE_GUEST_TEXT(agent_problem, agent_problem)

const RsPolicy *guest_policy(const Guest *g) {
        return &g->policy;
}

const GuestCounters *guest_counters(const Guest *g) {
        return &g->counters;
}

void guest_overrides(const Guest *g, uint64_t *ret_floor, uint64_t *ret_max) {
        *ret_floor = g->override_floor;
        *ret_max = g->override_max;
}

void *guest_driver_data(const Guest *g, const GuestDriver *driver) {
        return g->driver == driver ? g->driver_data : NULL;
}

int guest_free_page_reporting(const Guest *g) {
        return g->fpr_known ? g->free_page_reporting : -ENODATA;
}

uint64_t guest_cycle_started(const Guest *g) {
        return g->cycle_pending > 0 ? g->cycle_started : 0;
}

void guest_stop(Guest *g) {
        if (g->driver->stop)
                g->driver->stop(g, g->driver_data);
}

/* ---- what a driver tells its guest ---- */

int guest_attach(Guest *g, const GuestResources *res) {
        if (!res)
                return -EINVAL;
        /* Attached anew (after a reconnection): the devices are read as they are now, and calls
         * sent before may never report (a closed connection drops them). */
        if (g->phase != GUEST_PHASE_RUNNING)
                memset(g->calls, 0, sizeof(g->calls));
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
        if (res->balloon_actual > 0) {
                g->balloon_actual = res->balloon_actual;
                guest_update_size(g);
        } else if (res->actual > 0)
                g->actual = res->actual;
        g->fpr_known = res->fpr_known;
        g->free_page_reporting = res->free_page_reporting;
        g->deflate_on_oom_known = res->deflate_on_oom_known;
        g->deflate_on_oom = res->deflate_on_oom;
        /* A core exists already (re-attach): its size stays what it was created with. */
        if (g->core && g->phase == GUEST_PHASE_RUNNING)
                return 0;
        return guest_setup_finish(g, res->agent);
}

void guest_set_faulty(Guest *g, GuestFault kind, const char *detail) {
        char text[sizeof(g->fault)];
        (void) guest_fault_format(kind, detail, text, sizeof(text));
        if (g->phase == GUEST_PHASE_FAULTY && g->fault_kind == kind && strcmp(g->fault, text) == 0)
                return;
        guest_set_fault(g, kind, "%s", detail ?: "");
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
        g->cycle_failed = false;
        g->cycle_error[0] = '\0';
        g->cycle_started = now_usec(CLOCK_MONOTONIC);
        g->cycle_pending = 1;
        return 0;
}

void guest_cycle_hold(Guest *g) {
        assert(g->cycle_pending > 0); /* only inside a cycle (guest_cycle_begin()) */
        g->cycle_pending++;
}

void guest_cycle_step_done(Guest *g) {
        cycle_step_done(g);
}

void guest_cycle_cancel(Guest *g) {
        g->cycle_pending = 0;
}

void guest_cycle_fail(Guest *g, const char *error) {
        g->cycle_failed = true;
        snprintf(g->cycle_error, sizeof(g->cycle_error), "%s", error ?: "unknown error");
}

void guest_sample_add(Guest *g, const RsSample *part) {
        for (size_t i = 0; i < ARRAY_SIZE(part->level); i++)
                if (part->level[i] != RS_UNKNOWN)
                        g->sample.level[i] = part->level[i];
        for (size_t i = 0; i < ARRAY_SIZE(part->counter); i++)
                if (part->counter[i] != RS_UNKNOWN)
                        g->sample.counter[i] = part->counter[i];
}

void guest_sample_add_balloon_stats(Guest *g, const RsSample *part, uint64_t last_update) {
        if (guest_check_stats_time(g, last_update))
                guest_sample_add(g, part);
}

void guest_set_disconnected(Guest *g, const char *fault) {
        bool same = g->phase == GUEST_PHASE_FAULTY && strcmp(g->fault, fault ?: "") == 0;
        guest_set_fault(g, GUEST_FAULT_CONNECTION, "%s", fault ?: "");
        g->phase = GUEST_PHASE_FAULTY;
        if (!same)
                guest_notify(g, false);
}

void guest_set_connecting(Guest *g, const char *note) {
        if (note) {
                /* QEMU not listening yet is shown, but is no fault (yet): a faulty guest's
                 * episode goes on under the note. */
                snprintf(g->fault, sizeof(g->fault), "%s", note);
                if (g->phase != GUEST_PHASE_FAULTY) {
                        g->fault_kind = GUEST_FAULT_CONNECTING;
                        g->fault_counted = false;
                }
        }
        if (g->phase != GUEST_PHASE_FAULTY)
                g->phase = GUEST_PHASE_CONNECTING;
}

void guest_set_balloon_actual(Guest *g, uint64_t balloon_actual) {
        if (balloon_actual == 0 || (g->guest_max > 0 && balloon_actual > 2 * g->guest_max))
                return; /* implausible: a guest cannot be larger than twice what it may have */
        g->balloon_actual = balloon_actual;
        guest_update_size(g);
}

void guest_set_actual(Guest *g, uint64_t actual) {
        if (actual == 0 || (g->guest_max > 0 && actual > 2 * g->guest_max))
                return;
        g->actual = actual;
}

void guest_set_vmem_size(Guest *g, uint64_t size) {
        if (!g->vmem_id)
                return;
        g->vmem_size = size;
        guest_update_size(g);
}

void guest_set_host_rss(Guest *g, uint64_t rss) {
        g->host_rss = rss;
}

void guest_count_hugepage_repair(Guest *g, uint64_t collapsed, uint64_t filled) {
        g->counters.hugepages_collapsed = metrics_counter_add(g->counters.hugepages_collapsed, collapsed);
        g->counters.hugepage_holes_filled = metrics_counter_add(g->counters.hugepage_holes_filled, filled);
}

void guest_set_host_memory(Guest *g, uint64_t rss, uint64_t swap, uint64_t ksm) {
        g->host_rss = rss;
        g->host_swap = swap;
        g->host_ksm = ksm;
}

uint64_t guest_reported_level(const Guest *g, RsLevel level) {
        return level < _RS_LEVEL_MAX ? g->reported.level[level] : RS_UNKNOWN;
}

void guest_set_agent_answers(Guest *g, bool answers) {
        g->agent_ok = answers;
}

bool guest_agent_answers(const Guest *g) {
        return g->agent_ok;
}

void guest_sample_add_host_disk_read(Guest *g, uint64_t bytes, uint64_t operations, uint64_t time_ns) {
        g->sample.counter[RS_COUNTER_HOST_DISK_READ] = bytes;
        g->sample.counter[RS_COUNTER_HOST_DISK_READ_OPS] = operations;
        g->sample.counter[RS_COUNTER_HOST_DISK_READ_TIME] = time_ns;
}

void guest_sample_report_problem(Guest *g, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->data_problem, sizeof(g->data_problem), fmt, ap);
        va_end(ap);
}
