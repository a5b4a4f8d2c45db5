/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One continuous controller of a guest's size, by one cost in time (stall.h).
 *
 * The working set is defined by its cost: the smallest size whose steady memory stall stays
 * at or below the cost target, a share of wall time. The controller holds the guest there:
 *
 *   - it starts where the guest's own levels say its memory is used, without crossing into
 *     it: size - MemFree + the zones' high watermarks (rs_controller_start_size());
 *   - under target, it tightens slowly, by a step scaled by how far under target the cost at
 *     rest is (senpai's law): a guest that pays nothing gives fastest, one near its target
 *     hardly at all;
 *   - over target, it loosens in proportion to how far over, plus what the guest's use grew
 *     by lately in the same proportion: a guest that stalls always gets memory, a guest that
 *     stalls hard gets it at once, and a growing set is followed, not trailed;
 *   - over target right after a step of its own from a size within target, by more than the
 *     law would loosen for that step, it has found a cliff: back above it by the margin, and
 *     no tightening into it again while that verdict lasts;
 *   - on an OOM kill it goes to max (what the killed set needs is unknown, and a second kill
 *     is worse than any size); on the risk of one (free memory near the min watermark, or the
 *     balloon pushed back: the guest has nothing left to give), back to the last size that ran
 *     within target plus the margin, not to the maximum.
 * Nothing else: no knee is bracketed, no size is held and probed again, no transient is
 * waited out by a rule. A size is judged by its own intervals (rs_cost_window_settled()): a
 * stall that does not fall is the size's, and one that decays geometrically (the hot pages a
 * step's reclaim took, coming back) is judged by the level it tends to, so a step's passing
 * stall does not loosen the guest, however long the workload's reuse time.
 *
 * Without the agent the cost is faults times a per-fault latency: the mean time of the
 * guest's disk reads as QEMU measured them (rd_total_time_ns over rd_operations), averaged
 * over the cost window from intervals with enough reads to be a mean, within a sane range;
 * fault_latency_sec until then, or where QEMU does not report it.
 *
 * The estimate is the size the controller settled at: where the cost at rest stayed within
 * target. A stream (reads no memory saves) shows in neither signal of the cost: PSI does
 * not count it, and without the agent the host reads it makes at max, and their own jitter,
 * are a floor the cost does not count (the guest's own faults always count). The floor is a
 * verdict that expires: it is learned again at max, and the guest goes back to its size.
 *
 * Pure: no I/O, no clock reads, no allocation after rs_controller_new().
 *
 *   RsController *c;
 *   rs_controller_new(&c, &policy, &params, guest_max);
 *   every interval:
 *           rs_controller_feed(c, &sample, now_usec);
 *           rs_controller_decide(c, &decision);   // decision.target to the arbiter, then actuation
 *           rs_controller_set_grant(c, granted < decision.target ? granted : RS_UNKNOWN);
 *   rs_controller_free(c);
 *
 * The daemon runs it for a guest whose policy says controller = cost, behind the rs_guest_*
 * API (guest-cost.c); today's estimator (estimator.h) is still the default. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/policy.h"
#include "policies/rs-value.h"
#include "policies/signals.h"
#include "policies/stall.h"

/* The tunables: each a time or a share, each documented in policies/README.md. */
typedef struct RsControllerParams {
        double cost_target;        /* share of wall time the working set may stall on memory at rest */
        double cost_window_sec;    /* the time constant of what the sizes held cost (the tightening's
                                    * brake) and, times four, of the estimate's average */
        double tighten_per_min;    /* share of the size given up per minute at zero cost */
        double loosen_per_sec;     /* share of the size added per second for each target's worth of excess */
        double loosen_max_per_sec; /* ... at most, per second */
        double margin;             /* share above the last size within target an emergency returns to */
        double blind_margin;       /* share added to the size held when the cost is only estimated (no PSI) */
        double fault_latency_sec;  /* seconds one fault costs when the daemon measured none */
        double verdict_expiry_sec; /* how long a verdict the controller cannot check again without a
                                    * cost lasts: a stream's host-read floor, a cliff */
} RsControllerParams;

/* The defaults, with margin taken from the policy (margin_percent). */
void rs_controller_params_init(RsControllerParams *p, const RsPolicy *policy);
/* The policy's own (its controller keys, rightsize.policy(5)), in the controller's units. */
void rs_controller_params_from_policy(RsControllerParams *p, const RsPolicy *policy);
/* 0, or -EINVAL with *bad_name naming the first bad field. */
int rs_controller_params_validate(const RsControllerParams *p, const char **bad_name);

typedef enum RsControlAction {
        RS_CONTROL_START,     /* first sample: the start size, nothing judged yet */
        RS_CONTROL_WAIT,      /* no cost this interval (no rates), or the balloon not there yet */
        RS_CONTROL_TIGHTEN,   /* under target at rest */
        RS_CONTROL_LOOSEN,    /* over target at rest */
        RS_CONTROL_EMERGENCY, /* OOM risk */
        RS_CONTROL_OBSERVE,   /* mode=observe: the size is never changed */
        _RS_CONTROL_ACTION_MAX,
} RsControlAction;

typedef struct RsControllerDecision {
        uint64_t target;      /* bytes: the size to give the guest, within floor and max */
        bool urgent;          /* loosening or an emergency: not to be capped or dead-banded */
        RsControlAction action;
        uint64_t estimate;    /* bytes: the working set, RS_UNKNOWN before the first sample */
        uint64_t floor, max;
        RsCostSource source;  /* where the cost came from */
        double cost;          /* the interval's cost, share of wall time */
        double cost_mean;     /* its average over the window */
        double cost_rest;     /* what the size costs at rest (rs_cost_window_settled()), or the last
                               * size judged's while this one is not */
        double cost_target;
        double fault_latency; /* seconds one fault costs: measured on the host, else the tunable */
        bool latency_measured;
        bool streaming;       /* a stream verdict in force */
        char reason[RS_REASON_MAX];
} RsControllerDecision;

typedef struct RsController RsController;

/* guest_max: the most memory the guest can have, bytes. Returns 0, -EINVAL or -ENOMEM. */
int rs_controller_new(RsController **ret, const RsPolicy *policy, const RsControllerParams *params, uint64_t guest_max);
RsController *rs_controller_free(RsController *c);

/* The guest's zones' watermarks summed, bytes, as /proc/zoneinfo reports them, each zone's
 * with its largest lowmem protection (RS_LEVEL_WMARK_*; policies/guest-cost.c gives them from
 * the sample). Until set (or with 0s, or after the guest rebooted) they are computed as the
 * kernel computes them at boot from the guest's memory, raised to what the guest shows its
 * reserve to be at least. */
void rs_controller_set_watermarks(RsController *c, uint64_t min, uint64_t low, uint64_t high);
/* What the host granted after arbitration when less than the decision's target, else
 * RS_UNKNOWN: the controller then judges the granted size, and does not loosen past what
 * the host can give while it is short. */
void rs_controller_set_grant(RsController *c, uint64_t granted);

void rs_controller_feed(RsController *c, const RsSample *sample, uint64_t now_usec);
void rs_controller_decide(const RsController *c, RsControllerDecision *ret);

/* The kernel's default zone watermarks (mm/page_alloc.c, watermark_scale_factor 10) for a
 * guest whose managed memory is managed_bytes: min_free_kbytes = sqrt(16 x managed KiB),
 * low and high a step of max(min / 4, 0.1 % of managed) above each other. */
void rs_watermarks_default(uint64_t managed_bytes, uint64_t *min, uint64_t *low, uint64_t *high);
/* Where the controller starts: size - free + the high watermarks (free that is not the
 * kernel's own reserve is the only memory surely unused). RS_UNKNOWN when a level is. */
uint64_t rs_controller_start_size(uint64_t size, uint64_t free, uint64_t high_watermarks);

/* What a restarted daemon resumes from (the state file): the size asked for, the estimate, the
 * last size that ran within target and a cliff in force (the size found over target and the
 * size within target above it), bytes (0: none). A restored cliff's verdict runs from the first
 * sample after the restore (its age is on a clock that does not survive a reboot): without it,
 * a resumed guest would cross its cliff again at once. What the cost windows measured and the
 * stream floor are learned again: the window would be stale. */
typedef struct RsControllerSnapshot {
        uint64_t size, estimate, last_within;
        uint64_t cliff, cliff_floor;
} RsControllerSnapshot;

/* Zeros before the first sample (nothing to resume from). */
void rs_controller_snapshot(const RsController *c, RsControllerSnapshot *ret);
/* Resumes at the saved size, within floor and max, as if started there: the next interval
 * with a cost judges it. -EINVAL for a size of 0 or past the guest's max; c unchanged. */
int rs_controller_restore(RsController *c, const RsControllerSnapshot *snap);

const char *rs_control_action_to_string(RsControlAction a);
