/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/estimator.h"
#include "policies/estimator-internal.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/macro.h"

/* Samples of baseline before the first probe: three 10 s intervals see a few passes of a
 * typical working set without delaying the first step much. */
#define LEARN_SAMPLES 3
/* After refaults, go back and probe the gap again with small steps at most this often. */
#define REFINE_MAX 3
/* A working set that grew is chased with steps of at least this (% of size). */
#define GROW_MIN_PERCENT 10.0
/* More memory must cut the guest's refault rate in proportion to what it added (10 % more
 * memory, 10 % fewer refaults), and by no more than this share, to count as helping;
 * otherwise the refaults are a stream (Piggin's case) and become the new baseline. Random
 * reads over a set S cached in C miss in proportion to S - C, which memory added cuts by
 * dC / (S - C): at least dC / C for a set up to twice the memory. A flat 30 % of the
 * activations judged the phase bench's database (774 MiB, held at 532) a stream. */
#define GROW_MUST_IMPROVE 0.3
/* Growth this small is no test of whether memory helps. */
#define GROW_TRIAL_MIN_PERCENT 3.0
/* After a deflation (emergency, backoff, grow) the guest pages back in what it swapped
 * out while it was short, for as long as its workload takes to touch those pages again:
 * swap-ins without swap-outs in this window are that recovery, not a working set that
 * grew. At least this long, and at least SETTLE_INTERVALS polling intervals. */
#define SETTLE_MIN_USEC (120 * USEC_PER_SEC)
#define SETTLE_INTERVALS 12
/* QEMU balloons whole pages and a guest may settle a few KiB above its target. */
#define REACH_MIN (64 * KIB)
/* Each re-probe that lands within this share of the estimate it re-checks (and at least
 * two fine steps) confirms it, and the next hold is twice as long, up to HOLD_MAX_USEC: a
 * steady guest is almost never probed. The guest's signals moving resets it. */
#define CONFIRM_SHARE 0.02
#define HOLD_MAX_USEC (4 * 3600 * USEC_PER_SEC)
#define HOLD_DOUBLINGS_MAX 16
/* A refault rate alone is a storm (deflate to max) only above this share of the working
 * set's pages per second as well: a guest 8 MiB short of a 300 MiB set it sweeps twice a
 * second refaults about 6000 pages/s, which backing off a step cures (issue 13). */
#define STORM_SET_SHARE 0.05
/* Refaults up to this many times the threshold, in the interval the balloon stepped down in
 * or the one after it, may be the step's own burst: judged again at rest (probe()). A guest a
 * fine step short of a set it sweeps refaults far faster (a 300 MiB set swept twice a second,
 * 2 MiB short: about 1,000 pages/s); three times let the model's streaming guest run a third
 * interval short in its first descent (test-estimator-scenarios, probe cost). */
#define BURST_REFAULT_FACTOR 2.0
/* Held, available memory risen this far above its lowest point (share of the size, at
 * least SHRINK_SIGN_MIN) for `confirm` samples: the working set may have shrunk, so the
 * hold goes back to the policy's. */
#define SHRINK_SIGN_SHARE 0.05
#define SHRINK_SIGN_MIN (32 * MIB)


static const char *const state_names[_RS_STATE_MAX] = {
        [RS_STATE_LEARN] = "learn",     [RS_STATE_PROBE] = "probe", [RS_STATE_BACKOFF] = "backoff",
        [RS_STATE_HOLD] = "hold",       [RS_STATE_GROW] = "grow",   [RS_STATE_EMERGENCY] = "emergency",
        [RS_STATE_OBSERVE] = "observe",
};

const char *rs_state_to_string(RsState s) {
        return s >= 0 && s < _RS_STATE_MAX ? state_names[s] : NULL;
}

_printf_(2, 3) static void set_reason(RsGuest *g, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->reason, sizeof(g->reason), fmt, ap);
        va_end(ap);
}

static void set_state(RsGuest *g, RsState s, uint64_t now) {
        if (g->state != s) {
                g->state_since = now;
                g->last_step = RS_UNKNOWN; /* a new descent may start with large steps */
                g->have_probe_top = false; /* and takes its first clean sample as its top */
        }
        g->state = s;
        g->confirm = 0;
        g->clean_confirm = 0;
        g->short_steps = 0;
        g->burst_wait = false;
        g->tight_waits = 0;
}

static void recompute_limits(RsGuest *g) {
        g->max = rs_policy_max(&g->policy, g->guest_max);
        g->floor = MIN(rs_policy_floor(&g->policy, g->guest_max), g->max);
}

/* An estimate above max (max lowered by an operator, or a state file saved under a larger one)
 * is a size the guest may not have: what is sized from it (the hold, virtio-mem's lower limit,
 * the arbiter's share) would be above max too. A bound at or above max says nothing about the
 * sizes the guest may still have. */
static void clamp_estimate_to_max(RsGuest *g) {
        RsEstimate *e = &g->est;
        if (rs_known(e->estimate))
                e->estimate = MIN(e->estimate, g->max);
        if (rs_known(e->upper))
                e->upper = MIN(e->upper, g->max);
        if (rs_known(e->lower) && e->lower >= g->max)
                e->lower = RS_UNKNOWN;
        if (rs_known(e->scan_onset) && e->scan_onset >= g->max)
                e->scan_onset = RS_UNKNOWN;
}

/* How close to a target the guest counts as there. QEMU balloons whole pages and the guest
 * may settle a few KiB off; the balloon is not pushed back until it is off by the pushback
 * threshold (pressure.c); and the plan never makes a non-urgent change inside the
 * dead-band, so a guest that close will not get any closer. */
static uint64_t reach_tolerance(const RsGuest *g) {
        uint64_t t = MAX(REACH_MIN, MAX(4 * MIB, g->size / 200));
        return MAX(t, g->policy.dead_band_bytes);
}

static bool reached_or_below(const RsGuest *g, uint64_t target) {
        return g->size <= target + reach_tolerance(g);
}

static bool reached_or_above(const RsGuest *g, uint64_t target) {
        return g->size + reach_tolerance(g) >= target;
}

/* What the guest can reach of a target it asked for: the host may grant less. */
static uint64_t granted(const RsGuest *g, uint64_t target) {
        return rs_known(g->grant) ? MIN(target, g->grant) : target;
}

/* Growing towards `target`, the guest got all the host grants. Waiting for the rest would
 * be waiting for memory the host does not have. */
static bool reached_granted(const RsGuest *g, uint64_t target) {
        return reached_or_above(g, granted(g, target));
}

/* There, but only because the host gives no more: short of the target itself. */
static bool held_short_by_host(const RsGuest *g, uint64_t target) {
        return reached_granted(g, target) && !reached_or_above(g, target);
}

/* The guest refaults at its size: the working set is larger. */
static void refaults_at_size(RsGuest *g) {
        g->est.lower = rs_known(g->est.lower) ? MAX(g->est.lower, g->size) : g->size;
        if (rs_known(g->est.upper) && g->est.upper <= g->est.lower)
                g->est.upper = RS_UNKNOWN; /* clean there once, not any more: it grew */
        if (rs_known(g->est.estimate) && g->est.estimate <= g->size)
                g->est.estimate = RS_UNKNOWN; /* proven too small */
}

static uint64_t settle_usec(const RsGuest *g) {
        return MAX(SETTLE_MIN_USEC, SETTLE_INTERVALS * g->policy.poll_interval_usec);
}

static void start_settling(RsGuest *g, uint64_t now) {
        g->settle_until = now + settle_usec(g);
}

/* The margin grows as the signals get fewer: with balloon stats alone file thrashing is
 * seen late, and with no guest stats only pushback is seen at all. */
static double margin_fraction(const RsGuest *g) {
        static const double tier_factor[_RS_TIER_MAX] = {
                [RS_TIER_HOST] = 2.0,
                [RS_TIER_BALLOON] = 1.5,
                [RS_TIER_AGENT] = 1.0,
        };
        return g->policy.margin_percent / 100.0 * tier_factor[g->est.tier];
}

static uint64_t with_margin(const RsGuest *g, uint64_t size) {
        return clamp_target(g, size + (uint64_t) ((double) size * margin_fraction(g)));
}

static void update_confidence(RsGuest *g) {
        static const double tier_confidence[_RS_TIER_MAX] = {
                [RS_TIER_HOST] = 0.2,
                [RS_TIER_BALLOON] = 0.6,
                [RS_TIER_AGENT] = 0.8,
        };
        double c = tier_confidence[g->est.tier];
        if (g->est.tier == RS_TIER_AGENT && g->have_obs && g->obs.has_activate)
                c = 0.9;
        if (!rs_known(g->est.estimate))
                c *= 0.3;
        else if (rs_known(g->est.lower) && rs_known(g->est.upper) && g->est.upper > g->est.lower) {
                double gap = (double) (g->est.upper - g->est.lower) / (double) g->est.upper;
                c *= 1.0 - MIN(0.5, gap * 5.0);
        }
        g->est.confidence = c;
}

static void start_cycle(RsGuest *g) {
        g->last_step = RS_UNKNOWN;
        g->est.lower = RS_UNKNOWN;
        g->est.upper = RS_UNKNOWN;
        g->est.scan_onset = RS_UNKNOWN;
        g->refines = 0;
        g->refine = false;
        g->reprobe = false;
        g->lower_old = false;
        g->lower_doubted = false;
        g->reprobe_from = RS_UNKNOWN;
}

/* A timed (or requested) probe of a known estimate: it starts from the estimate, not from
 * the held size, and keeps the knee it found (lower), which it tests with fine steps
 * before believing it again. The held size is clean now: that is the upper bound. */
static void start_reprobe(RsGuest *g) {
        if (!rs_known(g->est.estimate)) {
                start_cycle(g);
                return;
        }
        g->last_step = RS_UNKNOWN;
        g->refines = 0;
        g->refine = false;
        g->reprobe = true;
        g->reprobe_from = g->est.estimate;
        g->est.upper = g->size;
        if (rs_known(g->est.lower) && g->est.lower >= g->est.estimate)
                g->est.lower = RS_UNKNOWN;
        g->lower_old = rs_known(g->est.lower);
        g->lower_doubted = false;
}

static uint64_t hold_time(const RsGuest *g) {
        uint64_t t = g->policy.hold_usec;
        for (unsigned i = 0; i < g->hold_doublings && t < HOLD_MAX_USEC; i++)
                t *= 2;
        return MAX(MIN(t, HOLD_MAX_USEC), g->policy.hold_usec);
}

/* The guest's signals moved (it grew, an emergency, a new estimate): probe at the
 * policy's pace again. */
static void reset_hold_time(RsGuest *g) {
        g->hold_doublings = 0;
}

static void enter_learn(RsGuest *g, uint64_t now) {
        set_state(g, RS_STATE_LEARN, now);
        g->learned = 0;
        rs_baseline_reset(&g->baseline);
        g->target = clamp_target(g, g->size);
        g->urgent = false;
        g->settle_until = 0;
        g->probe_requested = false;
}

static void enter_hold(RsGuest *g, uint64_t now) {
        set_state(g, RS_STATE_HOLD, now);
        g->hold_until = now + hold_time(g);
        g->hold_avail_min = RS_UNKNOWN;
        g->hold_avail_max = RS_UNKNOWN;
        g->hold_samples = 0;
        g->shrink_signs = 0;
        g->eaten_signs = 0;
        g->urgent = false;
}

static uint64_t hold_target(const RsGuest *g) {
        if (!rs_known(g->est.estimate))
                return clamp_target(g, g->size);
        /* Clean at the floor and never seen to refault: the working set fits under the
         * floor, and the floor is all it gets. */
        if (!rs_known(g->est.lower) && g->est.estimate <= g->floor + g->policy.dead_band_bytes)
                return g->floor; /* (the probe stops a dead-band short of the floor) */
        return with_margin(g, g->est.estimate);
}

static void enter_emergency(RsGuest *g, const RsObservation *o, uint64_t now) {
        if (g->size < g->max)
                refaults_at_size(g);
        set_state(g, RS_STATE_EMERGENCY, now);
        g->target = g->max;
        g->urgent = true;
        g->reprobe = false;
        g->lower_old = false;
        g->lower_doubted = false;
        reset_hold_time(g);
        start_settling(g, now);
        set_reason(g, "emergency: %s at %.0f MiB; deflating to max %.0f MiB", o->why, mib(g->size), mib(g->max));
}

/* Probing found where refaults start: the working set is the smallest clean size. */
static void finish_cycle(RsGuest *g, uint64_t now) {
        uint64_t checked = g->reprobe ? g->reprobe_from : RS_UNKNOWN;
        g->est.estimate = g->est.upper;
        if (rs_known(checked) && rs_known(g->est.estimate)) {
                uint64_t d = g->est.estimate > checked ? g->est.estimate - checked : checked - g->est.estimate;
                if (d <= MAX(2 * FINE_STEP, (uint64_t) ((double) checked * CONFIRM_SHARE)))
                        g->hold_doublings = MIN(g->hold_doublings + 1, HOLD_DOUBLINGS_MAX);
                else
                        reset_hold_time(g);
        } else
                reset_hold_time(g);
        g->reprobe = false;
        g->lower_old = rs_known(g->est.lower);
        g->lower_doubted = false;
        g->target = hold_target(g);
        g->refine = false;
        set_state(g, RS_STATE_BACKOFF, now);
        g->urgent = g->target > g->size;
        if (g->urgent)
                start_settling(g, now);
        if (rs_known(g->est.lower))
                set_reason(g, "working set %.0f MiB (refaults at %.0f, clean at %.0f): holding at %.0f MiB",
                           mib(g->est.estimate), mib(g->est.lower), mib(g->est.upper), mib(g->target));
        else
                set_reason(g, "runs clean at the floor (%.0f MiB): holding there", mib(g->est.upper));
}

static void enter_grow(RsGuest *g, const RsObservation *o, uint64_t now) {
        double pct = MAX(GROW_MIN_PERCENT, g->policy.probe_step_max_percent);
        g->grow_from_size = g->size;
        g->grow_from_refaults = o->raw_refault;
        g->est.lower = rs_known(g->est.lower) ? MAX(g->est.lower, g->size) : g->size;
        g->est.upper = RS_UNKNOWN;
        g->reprobe = false;
        g->lower_old = false;
        g->lower_doubted = false;
        reset_hold_time(g);
        set_state(g, RS_STATE_GROW, now);
        g->target = clamp_target(g, g->size + (uint64_t) ((double) g->size * pct / 100.0));
        g->urgent = true;
        start_settling(g, now);
        set_reason(g, "working set grew (%s at %.0f MiB): growing to %.0f MiB", o->why, mib(g->size), mib(g->target));
}

/* `size` refaulted in this cycle: the lower bound is the largest such size, and one kept
 * from an earlier cycle (lower_old) gives way to it. */
static void raise_lower(RsGuest *g, uint64_t size) {
        g->est.lower = rs_known(g->est.lower) && !g->lower_old ? MAX(g->est.lower, size) : size;
        g->lower_old = false;
        g->lower_doubted = false;
}

static void refault_onset(RsGuest *g, const RsObservation *o, uint64_t now) {
        raise_lower(g, g->size);

        if (!rs_known(g->est.upper) || g->est.upper <= g->est.lower) {
                /* Nothing smaller ran clean this cycle: more is needed, not less. */
                enter_grow(g, o, now);
                return;
        }
        /* A re-probe refaulting on its way down, above the estimate it re-checks, is not yet
         * a new estimate: the set grew, or a stream began, or the guest was unlucky. Back at
         * the clean size it shows which (a stream refaults there too, and the growth trial
         * keeps the old estimate: grow()). */
        bool above_checked = g->reprobe && rs_known(g->reprobe_from) && g->size > rs_probe_check_point(g);
        if ((above_checked || g->est.upper - g->est.lower > 2 * resolution(g, g->est.upper)) && g->refines < REFINE_MAX) {
                /* Too coarse: go back to the last clean size and close in with small steps
                 * (the next re-probe narrows what is left to a fine step). One refault above
                 * the estimate is not a bound yet: the fine steps test it as an earlier
                 * cycle's (lower_old), and a re-probe clean there goes on re-checking the
                 * estimate (a real guest under a CPU hog showed "activations above baseline"
                 * once at 556 MiB, 9 % above its estimate, and the refine closed on it: the
                 * estimate rose to 558 MiB, and the next re-probe found 507 again). A second
                 * refault there believes it. */
                if (above_checked && g->refines == 0)
                        g->lower_old = g->lower_doubted = true;
                g->refines++;
                g->refine = true;
                set_state(g, RS_STATE_BACKOFF, now);
                g->target = clamp_target(g, g->est.upper);
                g->urgent = true;
                start_settling(g, now);
                set_reason(g, "refaults at %.0f MiB (%s): back to clean %.0f MiB to refine", mib(g->size), o->why,
                           mib(g->target));
                return;
        }
        finish_cycle(g, now);
}

static void probe(RsGuest *g, const RsObservation *o, uint64_t now) {
        const RsSensitivityParams *sp = rs_sensitivity_params(g->policy.refault_sensitivity);

        /* A fine step is smaller than the pushback threshold (pressure.c): a balloon that
         * stays short of one, `confirm` samples in a row, is pushback all the same (the
         * guest fights for those pages: file thrashing through read() shows nothing else).
         * The size it cannot reach refaults; where it stopped is clean: the bracket closed. */
        if ((o->verdict == RS_VERDICT_CLEAN || o->verdict == RS_VERDICT_SCAN) && rs_known(g->last_step) &&
            !o->inflating && g->target < g->size && g->size - g->target > g->last_step / 2) {
                if (++g->short_steps < sp->confirm) {
                        set_reason(g, "the balloon stops short of the probe's step at %.0f MiB (%u/%u)", mib(g->size),
                                   g->short_steps, sp->confirm);
                        return; /* the target stays: the next sample tells */
                }
                uint64_t unreachable = g->target;
                raise_lower(g, unreachable);
                g->est.upper = rs_known(g->est.upper) ? MIN(g->est.upper, g->size) : g->size;
                finish_cycle(g, now);
                set_reason(g, "the balloon stops short of %.1f MiB at %.0f MiB: working set %.0f MiB, holding at %.0f MiB",
                           mib(unreachable), mib(g->size), mib(g->est.estimate), mib(g->target));
                return;
        }
        g->short_steps = 0;

        /* Judged at rest after refaults in a step's burst: clean means back near the
         * baseline, not merely under the threshold (refaults still rising there are the
         * guest short by a little, which the threshold lets pass). */
        if (g->burst_wait && (o->verdict == RS_VERDICT_CLEAN || o->verdict == RS_VERDICT_SCAN) && o->rising &&
            rs_known(g->est.upper) && g->est.upper > g->size) {
                uint64_t bad = g->size;
                g->burst_wait = false;
                refault_onset(g, o, now);
                g->urgent = true;
                start_settling(g, now);
                set_reason(g, "%s at %.0f MiB at rest after a step's burst, clean at %.0f MiB: back to %.0f MiB at once",
                           o->leading_why, mib(bad), mib(g->est.upper), mib(g->target));
                return;
        }
        if (o->verdict != RS_VERDICT_REFAULT)
                g->burst_wait = false;
        if (o->verdict == RS_VERDICT_STORM || o->verdict == RS_VERDICT_REFAULT)
                g->clean_confirm = 0;
        switch (o->verdict) {
        case RS_VERDICT_STORM:
        case RS_VERDICT_REFAULT:
                /* Refaults a little over the threshold in the interval the balloon stepped
                 * down in, or the one after (the swap-ins of what it pushed out): its burst of
                 * reclaim takes hot pages with cold, and they come back at once (Redis, whose
                 * cold keys the kernel swaps out under the balloon, "refaulted" 64-128/s right
                 * after each step and 0-6/s at rest, from 732 MiB down to its set at 368:
                 * tests/bench/bench-redis). The size is judged at rest, once;
                 * refaults that go on there are the guest short of memory, and anything
                 * more is met at once (a guest swept short of its set refaults thousands of
                 * pages a second). */
                if (o->verdict == RS_VERDICT_REFAULT && o->after_step && !g->burst_wait &&
                    !o->hidden && !o->pushback && o->useful <= BURST_REFAULT_FACTOR * o->threshold) {
                        g->burst_wait = true;
                        g->target = clamp_target(g, g->size);
                        g->urgent = false;
                        set_reason(g, "%s at %.0f MiB in the balloon step's burst of reclaim: judging it at rest",
                                   o->why, mib(g->size));
                        return;
                }
                g->burst_wait = false;
                if ((o->verdict == RS_VERDICT_REFAULT || !o->oom) && rs_known(g->est.upper) && g->est.upper > g->size) {
                        /* Below a size that ran clean this cycle: back there on the first bad
                         * sample, not after confirming it here. Every interval spent below the
                         * working set is paid for by the workload twice (its pages go out, then
                         * come back), and the clean size is known to be safe. The size becomes
                         * the lower bound of this cycle only; a later re-probe tests it again
                         * before believing it (lower_old). A storm that persists at the clean
                         * size is an emergency (backoff()). */
                        uint64_t bad = g->size;
                        refault_onset(g, o, now); /* refines from the clean size, or finishes */
                        g->urgent = true;
                        start_settling(g, now);
                        set_reason(g, "%s at %.0f MiB, clean at %.0f MiB: back to %.0f MiB at once", o->why, mib(bad),
                                   mib(g->est.upper), mib(g->target));
                        return;
                }
                if (o->verdict == RS_VERDICT_STORM) {
                        enter_emergency(g, o, now);
                        return;
                }
                /* Nothing clean known below where the probe started: confirm, then grow. */
                if (++g->confirm >= sp->confirm) {
                        refault_onset(g, o, now);
                        return;
                }
                g->target = clamp_target(g, g->size);
                set_reason(g, "%s at %.0f MiB (%u/%u): holding to confirm", o->why, mib(g->size), g->confirm, sp->confirm);
                return;
        case RS_VERDICT_UNKNOWN:
                g->target = clamp_target(g, g->size);
                set_reason(g, "probing: waiting at %.0f MiB (%s)", mib(g->size), o->why);
                return;
        case RS_VERDICT_SCAN:
                if (!rs_known(g->est.scan_onset) || g->size > g->est.scan_onset)
                        if (!rs_known(g->est.upper) || g->size >= g->est.upper)
                                g->est.scan_onset = g->size;
                __attribute__((fallthrough));
        default:
                break;
        }

        g->confirm = 0;
        /* The probe takes memory away: refaults that rise as it goes down are its doing,
         * however slowly they rise. A database revisiting its pages every few minutes
         * refaults at a rate that grows by a few pages/s per MiB of deficit; a baseline
         * followed upward took each rise in as the guest's normal (2 × baseline + 50/s
         * always stays above a rate it follows), and re-probes walked 60 % below the set
         * (tests/bench/bench-pgbench, full mode). So the baseline rises no higher than what
         * the guest showed where the descent began (a stream's refaults are there at the
         * top as at the bottom: Piggin's case keeps its baseline). */
        if (!g->have_probe_top) {
                g->probe_top = *o;
                g->have_probe_top = true;
        }
        rs_baseline_track(&g->baseline, o, &g->probe_top);

        /* A re-probe just above the estimate it re-checks (rs_probe_check_point()), and the guest tight
         * there (available memory nearly gone, refaults or PSI rising under the threshold, or
         * pages pushed to swap: reclaim has reached anonymous memory; not reclaim alone, which a
         * guest whose slack is page cache shows at every step): the knee is still right below, as it was. The estimate is confirmed
         * without going near it: a step below a working set the workload sweeps costs it every
         * page of the sweep, not just the step (LRU misses all of a loop larger than memory): a
         * real guest re-probed onto its knee paid 1-2 s of workload time for a 2 MiB crossing,
         * and one that only sat at its estimate for an interval swapped in 5,000 pages (its
         * knee's edge is noisy). Only a guest with slack there (the set may have shrunk), or
         * whose knee is known less closely than a fine step (after the first cycle), is probed
         * further, with fine steps. */
        bool tight = o->available_low || o->rising || o->swapping_out;
        if (g->reprobe && rs_known(g->reprobe_from) && g->size <= rs_probe_check_point(g) + FINE_MIN && tight &&
            rs_probe_bracket_closed(g, g->reprobe_from)) {
                uint64_t at = g->size;
                /* Refaults rising into free memory with nothing reclaimed for them, and nothing
                 * else short: the step's own burst of reclaim coming back, or a page cache whose
                 * stale pages still sit on the active list ahead of the set's (a database that
                 * moved to a smaller table re-probed 4 times "tight" at its old knee, 150 % above
                 * its new set: tests/bench/bench-phase). The size is held while they decay; a
                 * guest short here keeps refaulting, and is confirmed after `confirm` more
                 * samples, still above its estimate. */
                bool may_pass = o->rising && o->refilling_proven && !o->available_low && !o->swapping_out;
                if (may_pass && ++g->tight_waits <= sp->confirm) {
                        g->target = clamp_target(g, g->size);
                        g->urgent = false;
                        set_reason(g, "re-probe: %s at %.0f MiB into free memory, nothing reclaimed: waiting (%u/%u)",
                                   o->leading_why, mib(at), g->tight_waits, sp->confirm);
                        return;
                }
                g->est.upper = g->reprobe_from;
                /* Available memory nearly gone here: what the guest has at its estimate is
                 * that, less the step above it, and it is the evidence a hold's end weighs
                 * (reprobe_gives_nothing()); the clean step before may have shown more (page
                 * cache since evicted, or levels read mid-squeeze). Tight by refaults alone
                 * says nothing of it (a page cache re-read while plenty is available). */
                if (o->available_low && rs_known(o->available)) {
                        uint64_t above = at > g->reprobe_from ? at - g->reprobe_from : 0;
                        g->upper_avail = o->available > above ? o->available - above : 0;
                }
                finish_cycle(g, now);
                set_reason(g, "re-probe: tight at %.0f MiB (%s), just above the estimate %.0f MiB: confirmed, holding at %.0f MiB",
                           mib(at), o->available_low ? "available memory nearly gone" : o->leading_why,
                           mib(g->est.estimate), mib(g->target));
                return;
        }

        g->tight_waits = 0;

        uint64_t step;
        const char *fine;
        uint64_t next = rs_probe_next_size(g, o, &step, &fine);

        /* At the knee an earlier cycle found, and clean there: the set shrank since. Believed
         * after `confirm` clean samples (the first may come before the workload touched what
         * the step took); then the old bound goes and the descent carries on. */
        if (g->lower_old && rs_known(g->est.lower) && g->size < g->est.lower + FINE_MIN) {
                if (++g->clean_confirm < sp->confirm) {
                        g->target = clamp_target(g, g->size);
                        g->urgent = false;
                        set_reason(g, "clean at %.0f MiB, where it refaulted before (%u/%u): confirming", mib(g->size),
                                   g->clean_confirm, sp->confirm);
                        return;
                }
                g->clean_confirm = 0;
                bool doubted = g->lower_doubted;
                g->est.lower = RS_UNKNOWN;
                g->lower_old = false;
                g->lower_doubted = false;
                if (!doubted) {
                        g->reprobe = false; /* a new descent from here: the estimate moves */
                        /* Below a knee that was: a fine step first, then steps that may
                         * double (the set may have shrunk a little or a lot). */
                        g->last_step = FINE_STEP / 2;
                } /* else a refault that was noise: the re-probe goes on to its estimate */
                next = rs_probe_next_size(g, o, &step, &fine);
        }

        /* The cycle ends here when no move of at least FINE_MIN is left: the bracket around
         * the knee closed, or the floor. */
        uint64_t upper = rs_known(g->est.upper) ? MIN(g->est.upper, g->size) : g->size;
        bool at_floor = reached_or_below(g, g->floor);
        bool last = next + FINE_MIN > g->size;

        /* A size that ends the cycle next to a refaulting one is believed clean only after
         * `confirm` clean samples, as refaults are: the first sample after a step down may
         * come before the guest touched what the step took (a workload pass, or a lower
         * bound from an earlier cycle when the set has grown since). Until then est.upper
         * keeps the last confirmed clean size, so a refault here still brackets the set. */
        if (last && !at_floor && rs_known(g->est.lower) && ++g->clean_confirm < sp->confirm) {
                g->target = clamp_target(g, g->size);
                g->urgent = false;
                set_reason(g, "clean at %.0f MiB, just above refaults at %.0f MiB (%u/%u): confirming", mib(g->size),
                           mib(g->est.lower), g->clean_confirm, sp->confirm);
                return;
        }
        g->clean_confirm = 0;
        if (upper == g->size || !rs_known(g->est.upper) || upper < g->est.upper)
                g->upper_avail = o->available;
        g->est.upper = upper;
        if (at_floor || last) {
                finish_cycle(g, now);
                return;
        }
        g->target = next;
        g->last_step = step;
        g->urgent = false;
        if (fine && o->leading && o->leading_why != fine)
                set_reason(g, "probing: clean at %.0f MiB, next %.1f MiB (small step: %s; also %s)", mib(g->size),
                           mib(g->target), fine, o->leading_why);
        else if (fine)
                set_reason(g, "probing: clean at %.0f MiB, next %.1f MiB (small step: %s)", mib(g->size),
                           mib(g->target), fine);
        else
                set_reason(g, "probing: clean at %.0f MiB, next %.0f MiB", mib(g->size), mib(g->target));
}

static void set_hold_reason(RsGuest *g) {
        char host[64] = "";
        if (held_short_by_host(g, g->target))
                snprintf(host, sizeof(host), "; the host grants %.0f MiB", mib(granted(g, g->target)));
        set_reason(g, "holding at %.0f MiB (estimate %.0f MiB%s%s)", mib(g->target), mib(g->est.estimate),
                   g->est.streaming ? ", streaming refaults ignored" : "", host);
}

/* How far available memory must rise for a sign that the working set shrank. */
static uint64_t shrink_sign_rise(const RsGuest *g) {
        return MAX(SHRINK_SIGN_MIN, (uint64_t) ((double) g->size * SHRINK_SIGN_SHARE));
}

/* Held, available memory that rises well above its lowest point in this hold (and stays
 * up) means the working set may have shrunk: the hold goes back to the policy's length, so
 * a guest whose hold doubled is probed on that evidence instead of hours later. */
static void watch_for_shrinking(RsGuest *g, const RsObservation *o, uint64_t now) {
        const RsSensitivityParams *sp = rs_sensitivity_params(g->policy.refault_sensitivity);

        if (!rs_known(o->available))
                return;
        /* The hold's first samples may still carry the levels of the squeeze it came from (a
         * re-probe confirmed tight, available memory nearly gone, and the guest's statistics
         * a second or two behind the deflation): taken as the hold's lowest, the margin given
         * back read as a set that shrank, and the hold's end re-probed (a real guest under a
         * CPU hog, four re-probes where one skip was due: test-daemon-real-guest). The lowest
         * counts from the `confirm`-th sample on, as the eaten rule's signs do (hold()). */
        if (++g->hold_samples < sp->confirm)
                return;
        if (!rs_known(g->hold_avail_min) || o->available < g->hold_avail_min)
                g->hold_avail_min = o->available;
        /* What it had at its estimate, plus the margin it was given since: more than that
         * is slack the working set left (a set that shrank before this hold began too). */
        uint64_t base = g->hold_avail_min;
        if (rs_known(g->upper_avail) && rs_known(g->est.estimate) && g->size > g->est.estimate)
                base = MIN(base, g->upper_avail + (g->size - g->est.estimate));
        if (o->available <= base + shrink_sign_rise(g)) {
                g->shrink_signs = 0;
                return;
        }
        if (++g->shrink_signs < sp->confirm || g->hold_doublings == 0)
                return;
        reset_hold_time(g);
        g->hold_until = MIN(g->hold_until, MAX(now, g->state_since + g->policy.hold_usec));
        g->hold_avail_min = o->available;
        g->shrink_signs = 0;
}

/* Issue 13: a probe whose expected gain is nil does not run. What a re-probe can give the
 * host is memory the working set stopped using. A set outside the page cache (anonymous
 * memory: the guest had next to nothing available at its estimate) frees what it stops
 * using, and available memory shows it: the sign is available memory risen well above what
 * the guest had at its estimate plus the margin (watch_for_shrinking(): it resets the count
 * of confirmations, and the next re-probe runs). So a confirmed estimate (a re-probe landed
 * on it) of such a guest with no sign has nothing to give. A set in the page cache is
 * re-probed on schedule: pages it stopped reading stay cached, and no level shows them (a
 * database that moved from a large table to a small one). A guest held at its floor can
 * give nothing at all. A fresh estimate is checked once (its own error is the gain), and
 * at the longest hold the re-probe runs whatever the signs. Returns why the re-probe would
 * give nothing, or NULL when it runs. */
static const char *reprobe_gives_nothing(const RsGuest *g, const RsObservation *o) {
        if (g->target <= g->floor)
                return "held at the floor";
        if (g->hold_doublings == 0 || hold_time(g) >= HOLD_MAX_USEC || !rs_known(o->available))
                return NULL;
        if (!rs_known(g->upper_avail) || g->upper_avail > shrink_sign_rise(g))
                return NULL; /* page cache at its estimate: a shrink there shows in no level */
        return "estimate confirmed, and no sign the working set shrank";
}

static void hold(RsGuest *g, const RsObservation *o, uint64_t now) {
        const RsSensitivityParams *sp = rs_sensitivity_params(g->policy.refault_sensitivity);

        switch (o->verdict) {
        case RS_VERDICT_STORM:
                enter_emergency(g, o, now);
                return;
        case RS_VERDICT_REFAULT:
                if (rs_known(g->est.estimate) && g->size < g->est.estimate && held_short_by_host(g, g->target)) {
                        /* Below the working set because the host gives no more: refaults are
                         * expected there and say nothing about growth. */
                        g->confirm = 0;
                        set_reason(g, "%s at %.0f MiB, below the working set (%.0f MiB): the host grants no more than %.0f MiB",
                                   o->why, mib(g->size), mib(g->est.estimate), mib(granted(g, g->target)));
                        return;
                }
                if (++g->confirm >= sp->confirm) {
                        enter_grow(g, o, now);
                        return;
                }
                set_reason(g, "%s at held %.0f MiB (%u/%u)", o->why, mib(g->size), g->confirm, sp->confirm);
                return;
        case RS_VERDICT_UNKNOWN:
                return;
        default:
                break;
        }
        g->confirm = 0;
        rs_baseline_track(&g->baseline, o, NULL);

        /* Growth without refaults yet (anonymous memory filling the margin, no swap):
         * the headroom granted (by us, or less by the host) is being eaten while reclaim
         * runs, for `confirm` samples in a row: the first sample after a backoff may still
         * carry the levels of the squeeze (a real guest under a CPU hog, re-probed to where
         * available memory was nearly gone, "grew" to +16 % on its first held sample).
         * Eaten means it fell in this hold, not merely that it is low: a set a few percent
         * above its estimate fills most of the margin from the first held sample and stays
         * there (a real guest 4 % over its estimate "grew" by 10 % on a steady 15-20 MiB
         * available, test-daemon-real-guest). */
        uint64_t held = granted(g, g->target);
        bool eaten = false;
        if (rs_known(o->available) && reached_or_above(g, held) &&
            (!rs_known(g->hold_avail_max) || o->available > g->hold_avail_max))
                g->hold_avail_max = o->available;
        if (rs_known(o->available) && rs_known(g->est.estimate) && held > g->est.estimate && o->scanning &&
            reached_or_above(g, held)) {
                uint64_t third = (held - g->est.estimate) / 3;
                eaten = o->available < third && g->hold_avail_max - o->available >= third;
        }
        g->eaten_signs = eaten ? g->eaten_signs + 1 : 0;
        if (g->eaten_signs >= sp->confirm) {
                RsObservation grow = *o;
                grow.why = "available memory eaten while reclaiming";
                enter_grow(g, &grow, now);
                return;
        }

        g->target = hold_target(g);
        if (o->tier == RS_TIER_HOST) {
                set_reason(g, "no guest memory stats: holding at %.0f MiB", mib(g->target));
                return;
        }
        watch_for_shrinking(g, o, now);
        if (!g->probe_requested && now >= g->hold_until && reached_or_below(g, g->target)) {
                const char *nothing = reprobe_gives_nothing(g, o);
                if (nothing) {
                        /* Held on as if the re-probe had confirmed the estimate again. */
                        g->hold_doublings = MIN(g->hold_doublings + 1, HOLD_DOUBLINGS_MAX);
                        g->hold_until = now + hold_time(g);
                        g->reprobes_skipped++;
                        set_reason(g, "re-probe skipped, nothing to give (%s): holding at %.0f MiB for %.0f min more",
                                   nothing, mib(g->target), (double) hold_time(g) / (60.0 * USEC_PER_SEC));
                        return;
                }
        }
        if (g->probe_requested || (now >= g->hold_until && reached_or_below(g, g->target))) {
                set_state(g, RS_STATE_PROBE, now);
                start_reprobe(g);
                probe(g, o, now);
                return;
        }
        if (o->raw_refault > o->threshold && o->useful <= o->threshold && o->has_activate)
                g->est.streaming = true;
        set_hold_reason(g);
}

static void grow(RsGuest *g, const RsObservation *o, uint64_t now) {
        if (o->verdict == RS_VERDICT_STORM) {
                enter_emergency(g, o, now);
                return;
        }
        if (o->verdict == RS_VERDICT_REFAULT) {
                bool measured = o->have_rates && o->useful > o->threshold;
                bool grew = (double) g->size >= (double) g->grow_from_size * (1.0 + GROW_TRIAL_MIN_PERCENT / 100.0);
                /* Activations are refaults whose distance fit in memory: a stream makes few
                 * beside its refaults, a hot set about as many. A set still growing while the
                 * trial runs (a ramp) keeps refaulting too, but it activates what it refaults. */
                bool stream_like = o->hidden || !o->has_activate || o->raw_refault > 2 * o->useful;
                /* A guest still pushing pages to swap while it reads back is short of memory,
                 * not streaming: a stream takes page cache, not anonymous memory. A set that
                 * grew by 200 MiB had not stopped refaulting after one 10 % step, and the
                 * trial took the memory back (test-daemon-real-guest, phase 2: an emergency,
                 * and a workload pass of 9 s). */
                if (o->swapping_out)
                        stream_like = false;
                /* Judged by all the guest's refaults, its own count at both ends: activations
                 * are only those whose distance fit in memory (a set larger than memory makes
                 * few until memory nears it), and a verdict from host reads has them on
                 * another scale (the phase bench's trial set 796 host reads/s against 75
                 * activations/s, while the guest's refaults fell from 1,332 to 798/s). */
                double added = (double) (g->size - g->grow_from_size) / (double) g->grow_from_size;
                bool helped = o->raw_refault <= (1.0 - CLAMP(added, 0.0, GROW_MUST_IMPROVE)) * g->grow_from_refaults;
                if (measured && grew && stream_like && !helped) {
                        /* More memory bought nothing: these refaults are the guest's normal
                         * (a stream). Make them the baseline and give the memory back. */
                        rs_baseline_rebase(&g->baseline, o);
                        g->est.streaming = true;
                        g->est.lower = RS_UNKNOWN;
                        g->target = clamp_target(g, g->grow_from_size);
                        set_reason(g, "refaults did not fall with %.0f MiB more: streaming; re-baselined, back to %.0f MiB",
                                   mib(g->size - g->grow_from_size), mib(g->target));
                        g->urgent = false;
                        enter_hold(g, now);
                        /* Its estimate was judged against the old baseline, perhaps while the
                         * stream began: probe again once the guest has settled at the new one
                         * (the settling window, if shorter than the hold), not at once: a guest
                         * paging back in after it grew can look like a stream to this trial,
                         * and a re-probe started straight from that baseline walked a real
                         * guest 45 % below its grown set (test-daemon-real-guest, phase 2). */
                        g->hold_until = MIN(g->hold_until, now + settle_usec(g));
                        return;
                }
                if (!grew && held_short_by_host(g, g->target)) {
                        /* Nothing to learn by asking again: the host gives no more. The trial
                         * stays anchored, and growth goes on once the host has room. */
                        g->est.lower = rs_known(g->est.lower) ? MAX(g->est.lower, g->size) : g->size;
                        g->urgent = true;
                        set_reason(g, "working set grew (%s at %.0f MiB): the host grants no more than %.0f MiB",
                                   o->why, mib(g->size), mib(granted(g, g->target)));
                        return;
                }
                RsObservation again = *o;
                enter_grow(g, &again, now);
                /* keep the trial anchored where growth began when this step helped */
                return;
        }
        if (o->verdict == RS_VERDICT_UNKNOWN)
                return;

        /* Clean again: the working set lies between where it refaulted and here. */
        g->est.upper = g->size;
        g->est.estimate = g->size;
        set_state(g, RS_STATE_PROBE, now);
        g->refines = 0;
        probe(g, o, now);
}

static void emergency(RsGuest *g, const RsObservation *o, uint64_t now) {
        const RsSensitivityParams *sp = rs_sensitivity_params(g->policy.refault_sensitivity);
        bool there = reached_granted(g, g->max);

        if (o->verdict == RS_VERDICT_STORM || o->verdict == RS_VERDICT_REFAULT || o->verdict == RS_VERDICT_UNKNOWN ||
            !there) {
                g->target = g->max;
                g->urgent = true;
                if (o->verdict == RS_VERDICT_UNKNOWN || !there)
                        return;
                if (held_short_by_host(g, g->max)) {
                        /* All the host gives, and still not enough: that size refaults (once
                         * confirmed); an estimate waits for a size that runs clean. Max stays
                         * the wish, so the guest gets there once the host has room. */
                        if (++g->confirm >= sp->confirm)
                                refaults_at_size(g);
                        set_reason(g, "emergency: still %s at %.0f MiB, the host grants no more than %.0f MiB", o->why,
                                   mib(g->size), mib(granted(g, g->max)));
                } else if (g->size >= g->target)
                        set_reason(g, "emergency: still %s at max %.0f MiB", o->why, mib(g->size));
                return;
        }

        /* Calm at max, or at all the host grants. A clean size below the one that refaulted
         * means that refault is stale (it was a spike, or the set shrank). */
        if (rs_known(g->est.lower) && g->size <= g->est.lower)
                g->est.lower = RS_UNKNOWN;
        bool bracketed = rs_known(g->est.upper) && rs_known(g->est.lower) && g->est.upper > g->est.lower;
        if (bracketed && g->size >= g->est.upper) {
                g->refine = true;
                set_state(g, RS_STATE_BACKOFF, now);
                g->target = clamp_target(g, g->est.upper);
                g->urgent = false;
                set_reason(g, "calm again: back to clean %.0f MiB", mib(g->target));
                return;
        }
        /* Probe from here: from max, or from the host's grant (clean there, and smaller
         * than any clean size known). */
        set_state(g, RS_STATE_PROBE, now);
        if (!bracketed)
                g->est.upper = RS_UNKNOWN;
        probe(g, o, now);
}

static void backoff(RsGuest *g, const RsObservation *o, uint64_t now) {
        const RsSensitivityParams *sp = rs_sensitivity_params(g->policy.refault_sensitivity);

        if (o->verdict == RS_VERDICT_STORM) {
                /* Just back above a size that ran clean this cycle, a storm is most likely the
                 * guest paging back in what it lost below (swap-ins with nothing going out are
                 * told apart in rs_guest_feed(); this is the rest, e.g. the PSI of it): one more
                 * sample before an emergency, which would deflate to max and take the size of
                 * the storm for a refaulting one. An OOM kill never waits. */
                if (!o->oom && now < g->settle_until && rs_known(g->est.upper) && g->size >= g->est.upper &&
                    ++g->confirm < sp->confirm) {
                        set_reason(g, "%s at %.0f MiB, clean at %.0f MiB just before (%u/%u): the guest recovering?",
                                   o->why, mib(g->size), mib(g->est.upper), g->confirm, sp->confirm);
                        return;
                }
                enter_emergency(g, o, now);
                return;
        }
        if (o->verdict == RS_VERDICT_UNKNOWN || !reached_granted(g, g->target))
                return; /* not there yet */
        if (o->verdict == RS_VERDICT_REFAULT) {
                if (held_short_by_host(g, g->target) && (!rs_known(g->est.upper) || g->size < g->est.upper)) {
                        /* Short of the clean size because the host gives no more: refaults
                         * there are no growth. Confirmed, they bound the working set. */
                        if (++g->confirm >= sp->confirm)
                                refaults_at_size(g);
                        set_reason(g, "%s at %.0f MiB, the host grants no more than %.0f MiB (backing off to %.0f MiB)",
                                   o->why, mib(g->size), mib(granted(g, g->target)), mib(g->target));
                        return;
                }
                /* It refaults where it ran clean before: it grew, once confirmed. Right after
                 * the squeeze, pages coming back do that too, and as fast as below (a rate test
                 * took them for growth: +11.5 % on the doubling benchmark); recovery is over by
                 * the next sample, growth is not. A set that grew while it was probed pays one
                 * interval more of thrashing for this. */
                if (++g->confirm < sp->confirm) {
                        set_reason(g, "%s at %.0f MiB, where it ran clean (%u/%u)", o->why, mib(g->size), g->confirm,
                                   sp->confirm);
                        return;
                }
                enter_grow(g, o, now);
                return;
        }
        if (g->refine) {
                g->refine = false;
                set_state(g, RS_STATE_PROBE, now);
                probe(g, o, now);
                return;
        }
        enter_hold(g, now);
        set_hold_reason(g);
}

static void learn(RsGuest *g, const RsObservation *o, uint64_t now) {
        if (o->verdict == RS_VERDICT_STORM && g->baseline.known) {
                enter_emergency(g, o, now);
                return;
        }
        g->target = clamp_target(g, g->size);
        if (o->have_rates) {
                rs_baseline_learn(&g->baseline, o);
                g->learned++;
        }
        set_reason(g, "learning the baseline at %.0f MiB (%u/%u)", mib(g->size), g->learned, LEARN_SAMPLES);
        if (g->learned < LEARN_SAMPLES && !(g->probe_requested && g->baseline.known))
                return;
        if (o->tier == RS_TIER_HOST) {
                enter_hold(g, now);
                set_reason(g, "no guest memory stats: holding at %.0f MiB", mib(g->target));
                return;
        }
        if (!g->probe_requested && rs_known(g->est.estimate) && !reached_or_below(g, hold_target(g))) {
                /* Learned before (a reboot): return to the known size, then probe later. */
                g->target = hold_target(g);
                g->urgent = false;
                enter_hold(g, now);
                return;
        }
        set_state(g, RS_STATE_PROBE, now);
        start_cycle(g);
        probe(g, o, now);
}

static void observe_only(RsGuest *g, const RsObservation *o) {
        g->target = clamp_target(g, g->size);
        g->urgent = false;
        if (o->have_rates) {
                if (!g->baseline.known)
                        rs_baseline_learn(&g->baseline, o);
                else
                        rs_baseline_track(&g->baseline, o, NULL);
        }
        /* Without probing, the best it can say is what the guest uses and cannot give
         * back easily: its size less what it calls available. */
        if (rs_known(o->available) && o->available <= g->size)
                g->est.estimate = g->size - o->available;
        set_reason(g, "observe mode: %s at %.0f MiB", o->why, mib(g->size));
}

int rs_guest_new(RsGuest **ret, const RsPolicy *policy, uint64_t guest_max) {
        RsGuest *g;

        if (!ret || !policy || guest_max == 0)
                return -EINVAL;
        if (rs_policy_validate(policy, NULL) < 0)
                return -EINVAL;
        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        g->policy = *policy;
        g->guest_max = guest_max;
        recompute_limits(g);
        rs_rate_tracker_init(&g->tracker);
        rs_baseline_reset(&g->baseline);
        g->est = (RsEstimate) {
                .estimate = RS_UNKNOWN,
                .lower = RS_UNKNOWN,
                .upper = RS_UNKNOWN,
                .scan_onset = RS_UNKNOWN,
                .tier = RS_TIER_HOST,
        };
        g->size = g->max;
        g->target = g->max;
        g->last_step = RS_UNKNOWN;
        g->upper_avail = RS_UNKNOWN;
        g->grant = RS_UNKNOWN;
        g->state = policy->mode == RS_MODE_OBSERVE ? RS_STATE_OBSERVE : RS_STATE_LEARN;
        set_reason(g, "starting");
        update_confidence(g);
        if (policy->core == RS_CORE_COST) {
                int r = rs_guest_cost_new(&g->cost, policy, guest_max);
                if (r < 0) {
                        free(g);
                        return r;
                }
        }
        *ret = g;
        return 0;
}

RsGuest *rs_guest_free(RsGuest *g) {
        if (g)
                rs_guest_cost_free(g->cost);
        free(g);
        return NULL;
}

int rs_guest_set_policy(RsGuest *g, const RsPolicy *policy) {
        if (rs_policy_validate(policy, NULL) < 0)
                return -EINVAL;
        int r = rs_guest_cost_follow_policy(g, policy);
        if (r != 0)
                return MIN(r, 0);
        RsMode old = g->policy.mode;
        g->policy = *policy;
        recompute_limits(g);
        clamp_estimate_to_max(g);
        g->target = clamp_target(g, g->target);
        if (policy->mode == RS_MODE_OBSERVE)
                g->state = RS_STATE_OBSERVE;
        else if (old == RS_MODE_OBSERVE)
                enter_learn(g, g->state_since);
        return 0;
}

const RsPolicy *rs_guest_policy(const RsGuest *g) {
        return &g->policy;
}

/* Refaults (or a storm of them) that are pages coming back, not a guest short at its size:
 * why, or NULL when they are a verdict.
 *
 * Right after a deflation, pages coming back from swap with none going out, or refaults with
 * next to nothing reclaimed to make room for them (refilling), are the guest recovering what
 * it lost while short, not a working set that grew: the size is judged again once that is
 * over. However fast they come (a storm of them, and the stall time they cost), a guest with
 * nothing to push out is not short at this size. A set revisited once a minute (a database)
 * takes that long to come back, at any size it is given.
 *
 * Probing, a balloon step's burst of reclaim takes pages the workload will want again,
 * whatever the size (a database's pages, revisited once a minute, are deactivated with the
 * cold ones: tests/bench/bench-pgbench refaulted 225 MiB above its set). They come back into
 * the room the burst left: the probe waits for them (SETTLE_MIN_USEC at most: refaults that
 * never stop are a verdict) and steps on once they are in. The guest's word alone (the free
 * memory it reports) is not believed over a refault there: the scan counters must agree, and
 * the refaults must be its own, not the host's reads (refilling_proven). */
static const char *reading_back(RsGuest *g, const RsObservation *o, uint64_t now) {
        bool refaulting = o->verdict == RS_VERDICT_REFAULT || (o->verdict == RS_VERDICT_STORM && !o->oom);
        bool probing = g->state == RS_STATE_PROBE;

        bool probe_refill = probing && o->verdict == RS_VERDICT_REFAULT && o->refilling_proven && !o->pushback;
        if (!probe_refill)
                g->refill_wait_since = 0;
        else if (g->refill_wait_since == 0)
                g->refill_wait_since = MAX(now, 1);
        else if (now - g->refill_wait_since >= SETTLE_MIN_USEC)
                probe_refill = false;
        if (probe_refill)
                return "refaults into free memory, nothing reclaimed for them: reading back";

        if (!refaulting || o->pushback || now >= g->settle_until)
                return NULL;
        if (o->swapin_only)
                return "swap-in after a deflation, the guest paging back in";
        if (o->refilling && !probing)
                return "refaults after a deflation with nothing reclaimed, the guest reading back in";
        return NULL;
}

void rs_guest_feed(RsGuest *g, const RsSample *sample, uint64_t now) {
        RsSample s = *sample;
        RsRates rates;
        RsObservation o;

        if (g->cost) {
                rs_guest_cost_feed(g->cost, sample, now);
                return;
        }

        rs_sample_sanitize(&s, g->guest_max);
        RsRateEvent ev = rs_rate_tracker_feed(&g->tracker, &s, now, &rates);
        rs_observe(&s, &rates, g->have_obs ? &g->obs : NULL, &g->baseline, &g->policy, &o);

        /* Without QEMU's word on the size, assume the last target was reached. */
        if (!rs_known(o.size))
                o.size = g->target;
        g->size = MIN(o.size, g->guest_max);
        const char *back = reading_back(g, &o, now);
        if (back) {
                o.verdict = RS_VERDICT_UNKNOWN;
                o.why = back;
        }
        if (o.verdict == RS_VERDICT_STORM && o.storm_by_rate &&
            (g->state == RS_STATE_PROBE || g->state == RS_STATE_BACKOFF)) {
                /* Probing, a rate is a storm only for the set it comes from: a big set a step
                 * short refaults faster than a small one a long way short, and a step back to
                 * the clean size cures it. Held, a storm means the set jumped: deflating to max
                 * at once is right (and a rate saturated at what the disk gives must not
                 * look like a stream to GROW's trial). */
                uint64_t set = rs_known(g->est.estimate) ? g->est.estimate : g->size;
                if (o.useful <= STORM_SET_SHARE * (double) (set / RS_PAGE_SIZE)) {
                        o.verdict = RS_VERDICT_REFAULT;
                        o.why = o.tier == RS_TIER_AGENT ? "refaults above baseline (fast for the set's size)"
                                                        : "major faults / swap-in above baseline (fast for the set's size)";
                }
        }
        g->obs = o;
        g->have_obs = true;
        g->est.tier = o.tier;

        if (g->state == RS_STATE_OBSERVE || g->policy.mode == RS_MODE_OBSERVE) {
                g->state = RS_STATE_OBSERVE;
                observe_only(g, &o);
        } else if (ev == RS_RATE_REBOOT) {
                enter_learn(g, now);
                set_reason(g, "guest rebooted (counters restarted): learning again at %.0f MiB", mib(g->size));
        } else
                switch (g->state) {
                case RS_STATE_LEARN:
                        learn(g, &o, now);
                        break;
                case RS_STATE_PROBE:
                        probe(g, &o, now);
                        break;
                case RS_STATE_BACKOFF:
                        backoff(g, &o, now);
                        break;
                case RS_STATE_HOLD:
                        hold(g, &o, now);
                        break;
                case RS_STATE_GROW:
                        grow(g, &o, now);
                        break;
                case RS_STATE_EMERGENCY:
                        emergency(g, &o, now);
                        break;
                default:
                        enter_learn(g, now);
                        break;
                }

        /* A requested probe waits in HOLD (or LEARN) until a sample lets it start; any
         * other state has moved on and the request lapses. */
        if (g->state != RS_STATE_HOLD && g->state != RS_STATE_LEARN)
                g->probe_requested = false;
        g->target = clamp_target(g, g->target);
        update_confidence(g);
}

int rs_guest_probe_now(RsGuest *g, uint64_t now_usec _unused_) {
        if (g->cost)
                return -EOPNOTSUPP; /* the controller never probes: it tightens all the time */
        if (g->state == RS_STATE_OBSERVE || g->policy.mode == RS_MODE_OBSERVE)
                return -EOPNOTSUPP;
        if (g->have_obs && g->obs.tier == RS_TIER_HOST)
                return -EOPNOTSUPP; /* no guest stats: nothing to see pressure with */
        switch (g->state) {
        case RS_STATE_PROBE:
                return 0; /* already probing */
        case RS_STATE_HOLD:
                break;
        case RS_STATE_LEARN:
                if (!g->baseline.known)
                        return -EBUSY; /* nothing to judge a probe against yet */
                break;
        default:
                return -EBUSY; /* emergency, backoff, grow: the guest is being given memory */
        }
        g->probe_requested = true;
        return 0;
}

void rs_guest_decide(const RsGuest *g, uint64_t now_usec, RsDecision *ret) {
        if (g->cost) {
                rs_guest_cost_decide(g->cost, ret);
                return;
        }
        *ret = (RsDecision) {
                .target = clamp_target(g, g->target),
                .urgent = g->urgent && g->target > g->size,
                .fine = g->state == RS_STATE_PROBE && g->target < g->size,
                .changed = g->target != g->size,
                .state = g->state,
                .tier = g->est.tier,
                .confidence = g->est.confidence,
                .estimate = g->est.estimate,
                .floor = g->floor,
                .max = g->max,
        };
        snprintf(ret->reason, sizeof(ret->reason), "%s", g->reason);
}

void rs_guest_set_grant(RsGuest *g, uint64_t granted_bytes) {
        if (g->cost) {
                rs_guest_cost_set_grant(g->cost, granted_bytes);
                return;
        }
        /* The daemon never applies less than the floor. */
        g->grant = rs_known(granted_bytes) ? MAX(granted_bytes, g->floor) : RS_UNKNOWN;
}

uint64_t rs_guest_grant(const RsGuest *g) {
        if (g->cost)
                return rs_guest_cost_grant(g->cost);
        return g->grant;
}

const RsEstimate *rs_guest_estimate(const RsGuest *g) {
        if (g->cost)
                return rs_guest_cost_estimate(g->cost);
        return &g->est;
}

uint64_t rs_guest_hold_size(const RsGuest *g) {
        if (g->cost)
                return rs_guest_cost_hold_size(g->cost);
        return rs_known(g->est.estimate) ? hold_target(g) : RS_UNKNOWN;
}

RsState rs_guest_state(const RsGuest *g) {
        if (g->cost)
                return rs_guest_cost_state(g->cost);
        return g->state;
}

unsigned rs_guest_reprobes_skipped(const RsGuest *g) {
        return g->cost ? 0 : g->reprobes_skipped;
}

const RsObservation *rs_guest_observation(const RsGuest *g) {
        if (g->cost)
                return rs_guest_cost_observation(g->cost);
        return &g->obs;
}

void rs_guest_snapshot(const RsGuest *g, RsGuestSnapshot *ret) {
        if (g->cost) {
                rs_guest_cost_snapshot(g->cost, ret);
                return;
        }
        *ret = (RsGuestSnapshot) {
                .magic = RS_SNAPSHOT_MAGIC,
                .version = RS_SNAPSHOT_VERSION,
                .guest_max = g->guest_max,
                .estimate = g->est.estimate,
                .lower = g->est.lower,
                .upper = g->est.upper,
                .scan_onset = g->est.scan_onset,
                .target = g->target,
                .baseline_useful = g->baseline.useful,
                .baseline_scan = g->baseline.scan,
                .baseline_psi = g->baseline.psi_some,
                .baseline_known = g->baseline.known,
                .tier = g->est.tier,
                .streaming = g->est.streaming,
                .hold_doublings = g->hold_doublings,
        };
}

int rs_guest_restore(RsGuest *g, const RsGuestSnapshot *snap, uint64_t now_usec) {
        if (g->cost)
                return rs_guest_cost_restore(g->cost, snap);
        if (snap->magic == RS_SNAPSHOT_COST_MAGIC)
                return -EXDEV;
        if (snap->magic != RS_SNAPSHOT_MAGIC || snap->version != RS_SNAPSHOT_VERSION || snap->guest_max != g->guest_max ||
            snap->tier >= _RS_TIER_MAX)
                return -EINVAL;
        if (rs_known(snap->estimate) && (snap->estimate == 0 || snap->estimate > g->guest_max))
                return -EINVAL;
        if (!(snap->baseline_useful >= 0 && snap->baseline_useful < 1e9 && snap->baseline_scan >= 0 &&
              snap->baseline_scan < 1e9 && snap->baseline_psi >= 0 && snap->baseline_psi <= 100))
                return -EINVAL; /* also rejects NaN */

        g->est.estimate = snap->estimate;
        g->est.lower = snap->lower;
        g->est.upper = snap->upper;
        g->est.scan_onset = snap->scan_onset;
        g->est.tier = snap->tier;
        g->est.streaming = snap->streaming;
        clamp_estimate_to_max(g);
        g->hold_doublings = MIN(snap->hold_doublings, HOLD_DOUBLINGS_MAX);
        g->upper_avail = RS_UNKNOWN;
        g->reprobe = false;
        g->lower_old = rs_known(g->est.lower);
        g->lower_doubted = false;
        g->baseline = (RsBaseline) {
                .known = snap->baseline_known,
                .useful = snap->baseline_useful,
                .scan = snap->baseline_scan,
                .psi_some = snap->baseline_psi,
                .n = snap->baseline_known ? LEARN_SAMPLES : 0,
        };
        rs_rate_tracker_init(&g->tracker);
        g->have_obs = false;
        g->probe_requested = false;
        g->grant = RS_UNKNOWN; /* the daemon tells it again after its first arbitration */
        g->settle_until = 0;
        g->size = clamp_target(g, rs_known(snap->target) ? snap->target : g->max);
        if (g->policy.mode == RS_MODE_OBSERVE)
                g->state = RS_STATE_OBSERVE;
        else if (g->baseline.known && rs_known(g->est.estimate)) {
                g->target = hold_target(g);
                enter_hold(g, now_usec);
                set_reason(g, "resumed from the state file: holding at %.0f MiB", mib(g->target));
        } else if (g->baseline.known) {
                /* Saved mid-cycle, after a refault proved the old estimate too small: the
                 * baseline still holds, so back off to the last clean size (or max) and
                 * probe from there instead of learning from scratch. */
                set_state(g, RS_STATE_BACKOFF, now_usec);
                g->refine = true;
                g->urgent = false;
                g->target = clamp_target(g, rs_known(g->est.upper) ? g->est.upper : g->max);
                set_reason(g, "resumed mid-cycle: backing off to %.0f MiB, then probing", mib(g->target));
        } else {
                enter_learn(g, now_usec);
                set_reason(g, "resumed without a baseline: learning again");
        }
        update_confidence(g);
        return 0;
}
