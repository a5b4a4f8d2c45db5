/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The cost controller (controller.h) behind the rs_guest_* API (estimator.h), for a guest whose
 * policy says controller = cost: estimator.c hands every call to these when RsGuest.cost is
 * set, so the daemon drives either core the same way. Shared by estimator.c and guest-cost.c
 * only; it goes once the controller is the only core (issue 35, stage 3).
 *
 * What the rs_guest_* faces show under the controller (estimator.h's states):
 *   LEARN      no cost judged yet (the first sample, the start size on its way)
 *   PROBE      tightening: the target fell this interval (the cost at rest under target)
 *   HOLD       the target stayed: a cliff's verdict, the floor, the headroom, or a size not
 *              judged yet after a cost was
 *   GROW       loosening: the cost at rest over target, memory given in proportion
 *   EMERGENCY  an OOM kill (to max) or the risk of one (the last size within target plus margin)
 *   OBSERVE    mode = observe
 * BACKOFF is never shown: the controller has no knee to back off from. */
#pragma once

#include <stdint.h>

#include "policies/estimator.h"

typedef struct RsGuestCost RsGuestCost;

/* rs_guest_set_policy()'s switch of core: to cost, the controller starts (or takes the new
 * tunables, resumed where it was); back to probe, the probe starts afresh, as at
 * rs_guest_new(). 1 when g is done with (a fresh probe), 0 when the probe core's own update
 * is to follow, -errno with g unchanged. */
int rs_guest_cost_follow_policy(RsGuest *g, const RsPolicy *policy);

int rs_guest_cost_new(RsGuestCost **ret, const RsPolicy *policy, uint64_t guest_max);
RsGuestCost *rs_guest_cost_free(RsGuestCost *k);
/* Rebuilds the controller with the new tunables, resuming it where the old one was. */
int rs_guest_cost_set_policy(RsGuestCost *k, const RsPolicy *policy);

void rs_guest_cost_feed(RsGuestCost *k, const RsSample *sample, uint64_t now_usec);
void rs_guest_cost_decide(const RsGuestCost *k, RsDecision *ret);
void rs_guest_cost_set_grant(RsGuestCost *k, uint64_t granted);
uint64_t rs_guest_cost_grant(const RsGuestCost *k);
const RsEstimate *rs_guest_cost_estimate(const RsGuestCost *k);
uint64_t rs_guest_cost_hold_size(const RsGuestCost *k);
RsState rs_guest_cost_state(const RsGuestCost *k);
const RsObservation *rs_guest_cost_observation(const RsGuestCost *k);
void rs_guest_cost_snapshot(const RsGuestCost *k, RsGuestSnapshot *ret);
/* -EXDEV for the probe core's snapshot, -EINVAL for one of another guest size or a bad one. */
int rs_guest_cost_restore(RsGuestCost *k, const RsGuestSnapshot *snap);
