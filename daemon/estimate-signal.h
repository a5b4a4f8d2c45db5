/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the EstimateChanged signal (daemon/dbus-api.md) says of a guest, and when it says it: the
 * rule lives apart from guest.c so that it can be tested without a guest behind it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/estimator.h"

typedef struct EstimateSignal {
        /* What the signal carries (RS_UNKNOWN: unknown, sent as 0): updated each time it is due. */
        uint64_t estimate, lower, upper;
        /* The last estimate the core knew. */
        uint64_t last_known;
} EstimateSignal;

void estimate_signal_init(EstimateSignal *s);

/* Feeds the core's estimate after a cycle. Returns true when EstimateChanged is due (the
 * estimate moved by more than 1 %, or a bound changed); s->estimate, ->lower and ->upper are then
 * what it carries. The core forgets its estimate while a probe, a growth or an emergency
 * re-measures a working set that grew past it; the signal keeps the last known one meanwhile
 * (the bounds say it is being measured again), so its estimate is unknown only before the
 * guest's first. */
bool estimate_signal_update(EstimateSignal *s, const RsEstimate *e);
