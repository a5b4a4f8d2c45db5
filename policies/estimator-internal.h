/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The estimator's insides, shared by its files and nothing else: estimator.c (the states
 * of a guest's cycle, the public API) and probe-step.c (how far the next probe step goes).
 * Pure like the rest of policies/: no I/O, no clock. */

#include <stdbool.h>
#include <stdint.h>

#include "common/macro.h"
#include "policies/estimator.h"
#include "policies/guest-cost.h"

/* The probe step shrinks from max to min as the headroom (available memory) falls below
 * this share of the guest, or as the size nears a size known to refault. */
#define HEADROOM_SPAN 0.30
#define NEAR_SPAN 0.25
/* The probe's step near a knee it knows, below the estimate it re-checks, and when the
 * guest shows a leading sign of pressure: the most of the working set one step can take
 * for one interval. Fine steps are exempt from the dead-band (RsDecision.fine). */
#define FINE_STEP (2 * MIB)
/* The smallest move a probe makes: with less than this left, the bracket is closed. */
#define FINE_MIN MIB

struct RsGuest {
        RsPolicy policy;
        RsGuestCost *cost;   /* controller = cost: every rs_guest_* call goes to it (guest-cost.h) */
        uint64_t guest_max, max, floor;

        RsRateTracker tracker;
        RsBaseline baseline;
        RsObservation obs;
        bool have_obs;

        RsEstimate est;
        RsState state;
        uint64_t state_since;
        uint64_t hold_until;
        uint64_t target;
        uint64_t grant;      /* what the host gave at the last decision, RS_UNKNOWN: no cap */
        uint64_t size;       /* guest size during the last interval */
        bool urgent;

        unsigned confirm;    /* consecutive refaulting samples */
        unsigned clean_confirm; /* consecutive clean samples at a size that closes the bracket */
        unsigned short_steps;   /* consecutive samples with the balloon short of a probe step */
        bool burst_wait;        /* probing: refaults in a step's burst, judged again at rest */
        uint64_t last_step;  /* the probe's last step down in this descent, RS_UNKNOWN: none yet */
        uint64_t settle_until; /* swap-in-only refaults before this are recovery (see SETTLE_MIN_USEC) */
        RsObservation probe_top; /* what the guest showed where this descent began (its baseline's ceiling) */
        bool have_probe_top;
        uint64_t refill_wait_since; /* probing: since when refaults came back into free memory (0: not) */
        bool probe_requested;  /* rs_guest_probe_now(): probe at the next feed */
        unsigned learned;
        unsigned refines;
        bool refine;         /* the running BACKOFF returns to probing, not to HOLD */

        uint64_t grow_from_size;
        double grow_from_refaults; /* all the guest's refaults, pages/s, where growth began */

        bool reprobe;          /* this descent re-checks an estimate and keeps the old bounds */
        bool lower_old;        /* est.lower is from an earlier cycle: tested before it is believed */
        bool lower_doubted;    /* ... or from one refault of this re-probe above the estimate (refault_onset()) */
        uint64_t reprobe_from; /* the estimate a re-probe re-checks */
        unsigned tight_waits;  /* re-probe samples held at the check point for refaults into free memory */
        unsigned hold_doublings; /* re-probes in a row that confirmed the estimate, or skipped */
        unsigned reprobes_skipped; /* re-probes not run: nothing to give (reprobe_gives_nothing()) */
        uint64_t hold_avail_min; /* lowest available memory seen in this hold (from its confirm-th sample) */
        unsigned hold_samples;   /* samples seen in this hold */
        uint64_t hold_avail_max; /* highest available memory seen at the held size in this hold */
        uint64_t upper_avail;    /* available memory at est.upper when it was judged clean */
        unsigned shrink_signs;   /* consecutive held samples with available well above it */
        unsigned eaten_signs;    /* consecutive held samples with the margin eaten while reclaiming */

        char reason[RS_REASON_MAX];
};

static inline double mib(uint64_t b) {
        return rs_known(b) ? (double) b / MIB : -1.0;
}

static inline uint64_t clamp_target(const RsGuest *g, uint64_t t) {
        return CLAMP(t, g->floor, g->max);
}

/* The smallest step that tells two sizes apart: the policy's minimum step (1 %), at least
 * 1 MiB. */
static inline uint64_t resolution(const RsGuest *g, uint64_t size) {
        return MAX(MIB, (uint64_t) ((double) size * g->policy.probe_step_min_percent / 100.0));
}

/* probe-step.c */
uint64_t rs_probe_check_point(const RsGuest *g);
uint64_t rs_probe_next_size(RsGuest *g, const RsObservation *o, uint64_t *ret_step, const char **ret_fine);
bool rs_probe_bracket_closed(const RsGuest *g, uint64_t size);
