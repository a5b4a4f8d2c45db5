/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The per-guest decision core: feed it one sample per polling interval, ask it for a
 * decision. It finds the guest's working set by gentle pressure (Mel Gorman's gradual
 * balloon squeeze) and keeps the guest there plus a margin.
 *
 *   RsGuest *g;
 *   rs_guest_new(&g, &policy, guest_max_bytes);   // once; the only allocation
 *   every interval:
 *           rs_guest_feed(g, &sample, now_usec);
 *           rs_guest_decide(g, now_usec, &decision);
 *           // hand decision.target to rs_arbitrate(), then rs_actuation_plan()
 *           rs_guest_set_grant(g, granted < decision.target ? granted : RS_UNKNOWN);
 *   rs_guest_snapshot(g, &snap);                  // save in the state file
 *   rs_guest_restore(g, &snap, now_usec);         // after a daemon restart
 *   rs_guest_free(g);
 *
 * No I/O, no clock reads, no allocation after rs_guest_new() (or rs_guest_set_policy() when it
 * switches core).
 *
 * Two cores stand behind this API, chosen by the policy's `controller`: `probe`, today's
 * knee-crossing estimator (this file's states, below), and `cost`, the continuous controller
 * (controller.h, through guest-cost.c, which says what each state below means under it).
 *
 * States:
 *   LEARN      measure the baseline fault/refault rates at the current size
 *   PROBE      shrink a step per interval; the step shrinks as pressure nears
 *   BACKOFF    refaults confirmed: back to the smallest clean size plus margin at once
 *   HOLD       stay and watch; probe again after the hold time
 *   GROW       the working set grew (refaults or shrinking headroom at the held size):
 *              grow now, without waiting for a probe cycle
 *   EMERGENCY  a storm, OOM kill, alloc stalls or no available memory: deflate to max
 *   OBSERVE    mode=observe: never change the guest, only estimate
 *
 * BACKOFF, GROW and EMERGENCY wait for the guest to reach a larger size. When the host
 * grants less (rs_guest_set_grant()), reaching the grant counts: the state goes on from
 * there instead of waiting for memory the host does not have.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/policy.h"
#include "policies/pressure.h"
#include "policies/rs-value.h"
#include "policies/signals.h"

typedef enum RsState {
        RS_STATE_LEARN,
        RS_STATE_PROBE,
        RS_STATE_BACKOFF,
        RS_STATE_HOLD,
        RS_STATE_GROW,
        RS_STATE_EMERGENCY,
        RS_STATE_OBSERVE,
        _RS_STATE_MAX,
} RsState;

typedef struct RsGuest RsGuest;

typedef struct RsEstimate {
        uint64_t estimate;    /* working set, bytes; RS_UNKNOWN until the first probe ends */
        uint64_t lower;       /* largest size seen to refault (this cycle), or RS_UNKNOWN */
        uint64_t upper;       /* smallest size seen to run clean (this cycle), or RS_UNKNOWN */
        uint64_t scan_onset;  /* largest size at which reclaim was seen to start, or RS_UNKNOWN */
        RsTier tier;          /* the signals the last judgement used */
        double confidence;    /* 0..1: higher with more tiers and tighter bounds */
        bool streaming;       /* refaults that more memory does not reduce were seen */
} RsEstimate;

typedef struct RsDecision {
        uint64_t target;      /* recommended guest size, bytes; never below floor or above max */
        bool urgent;          /* skip the per-interval cap and dead-band (backoff, grow, emergency) */
        bool fine;            /* a probe's step: made however small (exempt from the dead-band) */
        bool changed;         /* target differs from the guest's current size */
        RsState state;
        RsTier tier;
        double confidence;
        uint64_t estimate;    /* as in RsEstimate */
        uint64_t floor;
        uint64_t max;
        char reason[RS_REASON_MAX];
} RsDecision;

/* guest_max: the most memory the guest can have (boot size plus hotpluggable), bytes. The
 * policy is copied. Returns 0, -EINVAL (bad policy or guest_max 0) or -ENOMEM. */
int rs_guest_new(RsGuest **ret, const RsPolicy *policy, uint64_t guest_max);
RsGuest *rs_guest_free(RsGuest *g);

/* A new policy (e.g. after a reload). Keeps what was learned. -EINVAL leaves the old one. */
int rs_guest_set_policy(RsGuest *g, const RsPolicy *policy);
const RsPolicy *rs_guest_policy(const RsGuest *g);

/* Probe at the next feed instead of waiting for the hold time to end (an operator's
 * request). From HOLD, or from LEARN once a baseline sample is in (the rest of learning is
 * skipped); a request the next sample cannot act on (refaults, no rates yet) waits in that
 * state. Returns 0 (also when already probing), -EBUSY in EMERGENCY, BACKOFF, GROW or LEARN
 * before any baseline, -EOPNOTSUPP in observe mode or without guest memory stats. */
int rs_guest_probe_now(RsGuest *g, uint64_t now_usec);

/* What the host granted at the last decision, after arbitration (rs_arbitrate()) gave
 * this guest less than the decision's target; RS_UNKNOWN when it got all it asked for (the
 * default). Set it after each decision, before the next feed: that feed judges the size the
 * grant produced. The arbiter gives less than the core asked for when the host is short, and
 * a state that grows the guest (BACKOFF, GROW, EMERGENCY) would otherwise wait forever for a
 * size it is never given. At the grant it goes on as if it had arrived: clean there, it
 * leaves the state the normal way; still refaulting there, it stays (its reason says the
 * host grants no more), keeps that size as a lower bound and asks for the full target again,
 * which it gets once the grant is lifted. Not kept in snapshots: the daemon sets it again
 * after its first arbitration. A grant below the floor counts as the floor. */
void rs_guest_set_grant(RsGuest *g, uint64_t granted);
uint64_t rs_guest_grant(const RsGuest *g);

/* One sample. The sample is copied and sanitized; now_usec is any monotonic clock. */
void rs_guest_feed(RsGuest *g, const RsSample *sample, uint64_t now_usec);
/* The current recommendation (a pure read of what the last feed decided). */
void rs_guest_decide(const RsGuest *g, uint64_t now_usec, RsDecision *ret);
const RsEstimate *rs_guest_estimate(const RsGuest *g);
/* The size HOLD keeps the guest at: the estimate plus the margin for the tier of signals the
 * guest has, within floor and max (the floor when the working set fits under it). RS_UNKNOWN
 * before the first estimate. In every mode: an observed guest says what it would give back. */
uint64_t rs_guest_hold_size(const RsGuest *g);
RsState rs_guest_state(const RsGuest *g);
/* Re-probes not run since rs_guest_new(): the hold ended, but the guest had nothing to give
 * (held at its floor, or a confirmed estimate of a set outside the page cache with no sign
 * it shrank). */
unsigned rs_guest_reprobes_skipped(const RsGuest *g);
/* The last interval's judgement (for logs, the CLI and tests). */
const RsObservation *rs_guest_observation(const RsGuest *g);

/* What a state file keeps so a restarted daemon resumes instead of probing from scratch.
 * Plain data: write it as a struct or field by field; check magic and version on load. The
 * magic names the core that saved it: RS_SNAPSHOT_MAGIC the probe, RS_SNAPSHOT_COST_MAGIC
 * the controller (guest-cost.c), whose snapshot keeps guest_max, estimate, target (the size
 * it asked for), last_within and a cliff in lower (the size over target) and upper (the size
 * within target above it), the other fields unknown or 0. */
#define RS_SNAPSHOT_MAGIC UINT32_C(0x52535a31) /* "RSZ1" */
/* The cost core's: another magic, so that neither core misreads the other's snapshot. */
#define RS_SNAPSHOT_COST_MAGIC UINT32_C(0x52534331) /* "RSC1" */
#define RS_SNAPSHOT_VERSION 1
typedef struct RsGuestSnapshot {
        uint32_t magic;
        uint32_t version;
        uint64_t guest_max;
        uint64_t estimate, lower, upper, scan_onset;
        uint64_t target;
        double baseline_useful, baseline_scan, baseline_psi;
        uint32_t baseline_known;
        uint32_t tier;
        uint32_t streaming;
        uint32_t hold_doublings; /* holds in a row that confirmed the estimate or had nothing to give (was reserved: 0) */
        uint64_t last_within;    /* controller = cost: the last size within its cost target (0: none) */
} RsGuestSnapshot;

void rs_guest_snapshot(const RsGuest *g, RsGuestSnapshot *ret);
/* Resumes in HOLD at the saved target (or LEARN when nothing was learned). -EXDEV for a
 * snapshot the other core saved (policy controller = probe or cost changed), -EINVAL for one
 * of another format or guest size; the guest is left as it was. */
int rs_guest_restore(RsGuest *g, const RsGuestSnapshot *snap, uint64_t now_usec);

const char *rs_state_to_string(RsState s);
