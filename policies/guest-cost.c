/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/guest-cost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/macro.h"
#include "policies/controller.h"
#include "policies/estimator-internal.h"
#include "policies/pressure.h"

struct RsGuestCost {
        RsPolicy policy;
        uint64_t guest_max, floor, max;
        RsController *c;
        RsControllerDecision d;
        /* The observation the daemon logs and counts refaults from: the same judgement of the
         * sample the probe core makes, against no baseline, its verdict the controller's. */
        RsRateTracker tracker;
        RsBaseline no_baseline;
        RsObservation obs;
        bool have_obs;
        RsEstimate est;
        RsState state;
        uint64_t size;           /* the guest's size in the last sample, or the last target */
        uint64_t last_target;    /* the controller's target before the last feed */
        bool judged;             /* an interval had a cost since the start or the restore */
        uint64_t grant;
};

static int controller_new(RsController **ret, const RsPolicy *policy, uint64_t guest_max) {
        RsControllerParams params;
        rs_controller_params_from_policy(&params, policy);
        return rs_controller_new(ret, policy, &params, guest_max);
}

int rs_guest_cost_new(RsGuestCost **ret, const RsPolicy *policy, uint64_t guest_max) {
        RsGuestCost *k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        int r = controller_new(&k->c, policy, guest_max);
        if (r < 0) {
                free(k);
                return r;
        }
        k->policy = *policy;
        k->guest_max = guest_max;
        k->max = rs_policy_max(policy, guest_max);
        k->floor = MIN(rs_policy_floor(policy, guest_max), k->max);
        rs_rate_tracker_init(&k->tracker);
        rs_baseline_reset(&k->no_baseline);
        k->est = (RsEstimate) {
                .estimate = RS_UNKNOWN,
                .lower = RS_UNKNOWN,
                .upper = RS_UNKNOWN,
                .scan_onset = RS_UNKNOWN,
                .tier = RS_TIER_HOST,
        };
        k->state = policy->mode == RS_MODE_OBSERVE ? RS_STATE_OBSERVE : RS_STATE_LEARN;
        k->size = k->last_target = k->max;
        k->grant = RS_UNKNOWN;
        rs_controller_decide(k->c, &k->d);
        *ret = k;
        return 0;
}

RsGuestCost *rs_guest_cost_free(RsGuestCost *k) {
        if (k)
                rs_controller_free(k->c);
        free(k);
        return NULL;
}

int rs_guest_cost_set_policy(RsGuestCost *k, const RsPolicy *policy) {
        RsControllerSnapshot snap;
        RsController *c;

        /* The controller keeps its tunables from birth: a new one, resumed at the old one's
         * size and estimate. What its windows measured is learned again within one window. */
        int r = controller_new(&c, policy, k->guest_max);
        if (r < 0)
                return r;
        rs_controller_snapshot(k->c, &snap);
        if (snap.size > 0)
                (void) rs_controller_restore(c, &snap);
        if (rs_known(k->grant))
                rs_controller_set_grant(c, k->grant);
        rs_controller_free(k->c);
        k->c = c;
        k->policy = *policy;
        k->max = rs_policy_max(policy, k->guest_max);
        k->floor = MIN(rs_policy_floor(policy, k->guest_max), k->max);
        if (policy->mode == RS_MODE_OBSERVE)
                k->state = RS_STATE_OBSERVE;
        else if (k->state == RS_STATE_OBSERVE)
                k->state = k->judged ? RS_STATE_HOLD : RS_STATE_LEARN;
        return 0;
}

int rs_guest_cost_follow_policy(RsGuest *g, const RsPolicy *policy) {
        int r;

        if (policy->core == RS_CORE_COST) {
                r = g->cost ? rs_guest_cost_set_policy(g->cost, policy) : rs_guest_cost_new(&g->cost, policy, g->guest_max);
                if (r < 0)
                        return r;
                g->policy = *policy; /* rs_guest_policy() reads it */
                return 1;
        }
        if (!g->cost)
                return 0;
        /* Back to the probe: nothing it learned before the switch is current. */
        RsGuest *fresh;
        r = rs_guest_new(&fresh, policy, g->guest_max);
        if (r < 0)
                return r;
        rs_guest_cost_free(g->cost);
        *g = *fresh;
        free(fresh);
        return 1;
}

/* What the controller's action looks like in the states the daemon, its bus and its metrics
 * show (guest-cost.h). */
static RsState shown_state(const RsGuestCost *k) {
        if (k->policy.mode == RS_MODE_OBSERVE)
                return RS_STATE_OBSERVE;
        switch (k->d.action) {
        case RS_CONTROL_TIGHTEN:
                return k->d.target < MIN(k->size, k->last_target) ? RS_STATE_PROBE : RS_STATE_HOLD;
        case RS_CONTROL_LOOSEN:
                return RS_STATE_GROW;
        case RS_CONTROL_EMERGENCY:
                return RS_STATE_EMERGENCY;
        case RS_CONTROL_OBSERVE:
                return RS_STATE_OBSERVE;
        case RS_CONTROL_START:
                return RS_STATE_LEARN;
        default:
                return k->judged ? RS_STATE_HOLD : RS_STATE_LEARN;
        }
}

static RsVerdict shown_verdict(const RsControllerDecision *d) {
        if (d->source == RS_COST_NONE)
                return RS_VERDICT_UNKNOWN;
        if (d->action == RS_CONTROL_EMERGENCY)
                return RS_VERDICT_STORM;
        return d->cost_rest > d->cost_target ? RS_VERDICT_REFAULT : RS_VERDICT_CLEAN;
}

/* A cliff in force is the controller's bounds: the size found over target, the size within
 * target above it (estimator.h's lower and upper mean the same for the probe). */
static void show_cliff(RsGuestCost *k) {
        RsControllerSnapshot snap;
        rs_controller_snapshot(k->c, &snap);
        k->est.lower = snap.cliff > 0 ? MIN(snap.cliff, k->max) : RS_UNKNOWN;
        k->est.upper = snap.cliff_floor > 0 ? MIN(snap.cliff_floor, k->max) : RS_UNKNOWN;
}

void rs_guest_cost_feed(RsGuestCost *k, const RsSample *sample, uint64_t now_usec) {
        RsSample s = *sample;
        RsRates rates;
        RsObservation o;

        k->last_target = k->d.target;
        rs_sample_sanitize(&s, k->guest_max);
        /* The zones' watermarks where the agent read /proc/zoneinfo: the reserve the kernel
         * keeps free, which the controller otherwise only bounds from below. */
        if (rs_known(s.level[RS_LEVEL_WMARK_HIGH]))
                rs_controller_set_watermarks(k->c, s.level[RS_LEVEL_WMARK_MIN], s.level[RS_LEVEL_WMARK_LOW],
                                             s.level[RS_LEVEL_WMARK_HIGH]);
        rs_controller_feed(k->c, sample, now_usec);
        rs_controller_decide(k->c, &k->d);

        (void) rs_rate_tracker_feed(&k->tracker, &s, now_usec, &rates);
        rs_observe(&s, &rates, k->have_obs ? &k->obs : NULL, &k->no_baseline, &k->policy, &o);
        k->size = rs_known(o.size) ? MIN(o.size, k->guest_max) : k->last_target;
        o.verdict = shown_verdict(&k->d);
        o.why = rs_control_action_to_string(k->d.action);
        k->obs = o;
        k->have_obs = true;

        if (k->d.source != RS_COST_NONE)
                k->judged = true;
        k->state = shown_state(k);
        k->est.estimate = rs_known(k->d.estimate) ? MIN(k->d.estimate, k->max) : RS_UNKNOWN;
        k->est.tier = o.tier;
        k->est.streaming = k->d.streaming;
        show_cliff(k);
        /* PSI is the cost itself; without it the cost is an estimate from faults and reads. */
        k->est.confidence = !k->judged ? 0 : k->d.source == RS_COST_PSI ? 0.9 : 0.6;
}

void rs_guest_cost_decide(const RsGuestCost *k, RsDecision *ret) {
        uint64_t target = CLAMP(k->d.target, k->floor, k->max);
        *ret = (RsDecision) {
                .target = target,
                .urgent = k->d.urgent && target > k->size,
                /* The law's steps are small by design (a share of the size per minute): a
                 * dead-band would stop a small guest's descent altogether. */
                .fine = k->state == RS_STATE_PROBE,
                .changed = target != k->size,
                .state = k->state,
                .tier = k->est.tier,
                .confidence = k->est.confidence,
                .estimate = k->est.estimate,
                .floor = k->floor,
                .max = k->max,
        };
        snprintf(ret->reason, sizeof(ret->reason), "%s", k->d.reason);
}

void rs_guest_cost_set_grant(RsGuestCost *k, uint64_t granted) {
        /* The daemon never applies less than the floor (as the probe core). */
        k->grant = rs_known(granted) ? MAX(granted, k->floor) : RS_UNKNOWN;
        rs_controller_set_grant(k->c, k->grant);
}

uint64_t rs_guest_cost_grant(const RsGuestCost *k) {
        return k->grant;
}

const RsEstimate *rs_guest_cost_estimate(const RsGuestCost *k) {
        return &k->est;
}

uint64_t rs_guest_cost_hold_size(const RsGuestCost *k) {
        if (!rs_known(k->est.estimate))
                return RS_UNKNOWN;
        double held = (double) k->est.estimate * (1 + k->policy.margin_percent / 100.0);
        return CLAMP((uint64_t) held, k->floor, k->max);
}

RsState rs_guest_cost_state(const RsGuestCost *k) {
        return k->state;
}

const RsObservation *rs_guest_cost_observation(const RsGuestCost *k) {
        return &k->obs;
}

void rs_guest_cost_snapshot(const RsGuestCost *k, RsGuestSnapshot *ret) {
        RsControllerSnapshot snap;

        rs_controller_snapshot(k->c, &snap);
        *ret = (RsGuestSnapshot) {
                .magic = RS_SNAPSHOT_COST_MAGIC,
                .version = RS_SNAPSHOT_VERSION,
                .guest_max = k->guest_max,
                .estimate = snap.estimate > 0 ? snap.estimate : RS_UNKNOWN,
                /* a cliff in force: the size found over target, and the one within it above */
                .lower = snap.cliff > 0 ? snap.cliff : RS_UNKNOWN,
                .upper = snap.cliff_floor > 0 ? snap.cliff_floor : RS_UNKNOWN,
                .scan_onset = RS_UNKNOWN,
                .target = snap.size > 0 ? snap.size : RS_UNKNOWN,
                .tier = k->est.tier,
                .streaming = k->est.streaming,
                .last_within = snap.last_within,
        };
}

int rs_guest_cost_restore(RsGuestCost *k, const RsGuestSnapshot *snap) {
        if (snap->magic == RS_SNAPSHOT_MAGIC)
                return -EXDEV;
        if (snap->magic != RS_SNAPSHOT_COST_MAGIC || snap->version != RS_SNAPSHOT_VERSION ||
            snap->guest_max != k->guest_max || snap->tier >= _RS_TIER_MAX)
                return -EINVAL;
        if (!rs_known(snap->target) || !rs_known(snap->estimate))
                return -EINVAL; /* saved before the first sample: nothing to resume */
        RsControllerSnapshot cs = {
                .size = snap->target,
                .estimate = snap->estimate,
                .last_within = snap->last_within,
                .cliff = rs_known(snap->lower) ? snap->lower : 0,
                .cliff_floor = rs_known(snap->upper) ? snap->upper : 0,
        };
        int r = rs_controller_restore(k->c, &cs);
        if (r < 0)
                return r;
        rs_controller_decide(k->c, &k->d);
        rs_rate_tracker_init(&k->tracker);
        k->have_obs = false;
        k->grant = RS_UNKNOWN; /* the daemon tells it again after its first arbitration */
        k->size = k->last_target = k->d.target;
        k->judged = true;
        k->est.estimate = MIN(snap->estimate, k->max);
        k->est.tier = snap->tier;
        k->est.streaming = false; /* a verdict is learned again, not carried over (controller.h) */
        show_cliff(k);
        k->est.confidence = 0.6;
        k->state = k->policy.mode == RS_MODE_OBSERVE ? RS_STATE_OBSERVE : RS_STATE_HOLD;
        return 0;
}
