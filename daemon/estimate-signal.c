/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "daemon/estimate-signal.h"

#include "policies/rs-value.h"

void estimate_signal_init(EstimateSignal *s) {
        *s = (EstimateSignal) {
                .estimate = RS_UNKNOWN,
                .lower = RS_UNKNOWN,
                .upper = RS_UNKNOWN,
                .last_known = RS_UNKNOWN,
        };
}

bool estimate_signal_update(EstimateSignal *s, const RsEstimate *e) {
        uint64_t old = s->estimate, estimate;
        bool changed;

        /* An estimate the core lost is no change to tell: it was proven too small and the next one
         * is not measured yet. Sent as 0 it read as "no estimate", as for a guest never measured
         * (rightsizectl monitor printed "-"); the last known one, with the bounds of the
         * measuring, is what a client can go on with until the next. */
        if (rs_known(e->estimate))
                s->last_known = e->estimate;
        estimate = s->last_known;

        if (estimate == RS_UNKNOWN && old == RS_UNKNOWN)
                changed = false;
        else if (estimate == RS_UNKNOWN || old == RS_UNKNOWN)
                changed = true;
        else
                changed = (estimate > old ? estimate - old : old - estimate) * 100 > old;
        changed = changed || e->lower != s->lower || e->upper != s->upper;
        if (changed) {
                s->estimate = estimate;
                s->lower = e->lower;
                s->upper = e->upper;
        }
        return changed;
}
