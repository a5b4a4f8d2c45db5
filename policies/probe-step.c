/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How far a probe's next step goes: large far from pressure, smaller as the guest nears it
 * (senpai's curve), fine (2 MiB) where the working set's edge may be a step away, and never
 * onto a size known to refault this cycle. A re-probe heads for its check point just above
 * the estimate it re-checks. estimator.c decides whether to step at all. */
#include "policies/estimator-internal.h"

#include <math.h>

/* Where a re-probe judges the guest before going nearer its estimate: two resolutions (and
 * at least two fine steps) above it. A real guest's knee moves by about a resolution from one
 * cycle to the next (510 then 517 MiB on the 300 MiB e2e guest): a check point one resolution
 * above it swapped in 10,000 pages there. */
uint64_t rs_probe_check_point(const RsGuest *g) {
        return g->reprobe_from + MAX(2 * FINE_STEP, 2 * resolution(g, g->reprobe_from));
}

static uint64_t probe_step(const RsGuest *g, const RsObservation *o) {
        double smin = g->policy.probe_step_min_percent / 100.0;
        double smax = g->policy.probe_step_max_percent / 100.0;
        double size = (double) g->size;
        double p = 0; /* 0: far from pressure, 1: right at it */

        if (rs_known(o->available))
                p = MAX(p, 1.0 - CLAMP((double) o->available / (HEADROOM_SPAN * size), 0.0, 1.0));
        if (rs_known(g->est.lower) && g->size > g->est.lower)
                p = MAX(p, 1.0 - CLAMP((size - (double) g->est.lower) / (NEAR_SPAN * size), 0.0, 1.0));
        if (rs_known(g->est.estimate)) {
                /* Close to the last estimate on either side: that is where refaults were. */
                double d = fabs(size - (double) g->est.estimate);
                p = MAX(p, 1.0 - CLAMP(d / (NEAR_SPAN * size), 0.0, 1.0));
        }
        if (o->scanning)
                p = MAX(p, 0.5);
        if (o->threshold > 0)
                p = MAX(p, CLAMP(o->useful / o->threshold, 0.0, 1.0));

        /* senpai's curve: the step falls with the square of the closeness. */
        double frac = smin + (smax - smin) * (1.0 - p) * (1.0 - p);
        double step = size * frac;
        if (rs_known(o->available))
                step = MIN(step, MAX(size * smin, (double) o->available / 2));
        return MAX((uint64_t) step, MIB);
}

/* Why the next step must be small, or NULL; *ret_cap is then the largest step allowed. Each
 * is a place where the working set's edge may be a step away: a knee known to refault and
 * the estimate a re-probe re-checks (fine steps), a sign the guest shows before it refaults
 * (pressure.c: rising refaults or PSI mean the hot set is being reclaimed, fine steps;
 * reclaim or swap-out alone may still be taking cold pages, steps of the resolution), or
 * available memory nearly gone (fine steps). */
static const char *small_step_reason(const RsGuest *g, const RsObservation *o, uint64_t *ret_cap) {
        *ret_cap = FINE_STEP;
        if (rs_known(g->est.lower) && g->size <= g->est.lower + 2 * resolution(g, g->size))
                return "near the knee";
        if (g->reprobe && rs_known(g->reprobe_from) && g->size <= rs_probe_check_point(g) + FINE_MIN &&
            g->size + 2 * resolution(g, g->size) > g->reprobe_from)
                return "near the estimate it re-checks";
        if (o->leading && o->rising)
                return o->leading_why;
        if (g->reprobe && rs_known(g->reprobe_from) && g->size > rs_probe_check_point(g)) {
                /* The sizes above the check point ran clean last cycle, but a balloon that
                 * takes tens of MiB in one interval makes the guest reclaim in a hurry, hot
                 * pages with cold (the e2e guest, re-probed 46 MiB in one step from its held
                 * size, stormed 5 MiB above its knee; 44 MiB the next time ran clean): the
                 * gentle pace of a first descent near its end, or a quarter of what the guest
                 * has available if more (its set shrank: little to reclaim in a hurry). */
                *ret_cap = MAX(FINE_STEP, 2 * resolution(g, g->size));
                if (rs_known(o->available))
                        *ret_cap = MAX(*ret_cap, o->available / 4);
                return "re-probe approaching the estimate";
        }
        if (o->available_low && rs_known(o->available)) {
                /* What is left to reclaim before the hot set, roughly: a quarter of it a step. */
                *ret_cap = MAX(FINE_STEP, o->available / 4);
                return "available memory nearly gone";
        }
        if (o->leading) {
                /* Reclaim or swap-out without rising refaults may still be taking cold pages:
                 * slow down, not to a crawl. */
                *ret_cap = MAX(FINE_STEP, 2 * resolution(g, g->size));
                return o->leading_why;
        }
        return NULL;
}

/* One step down from the current size, never onto a size known to refault this cycle. */
uint64_t rs_probe_next_size(RsGuest *g, const RsObservation *o, uint64_t *ret_step, const char **ret_fine) {
        uint64_t cap;
        const char *fine = small_step_reason(g, o, &cap);
        uint64_t step = probe_step(g, o);
        if (fine)
                step = MIN(step, cap);
        /* Nor larger than the last step of this descent doubled: going down, the guest only
         * gets closer to pressure, and a sample that looks far from it (available memory
         * dropped as a lie, or read in the middle of a balloon move) must not make the probe
         * lunge. */
        if (rs_known(g->last_step))
                step = MIN(step, 2 * g->last_step);
        step = MAX(step, FINE_MIN);
        uint64_t next = g->size > step ? g->size - step : 0;
        /* A re-probe goes to just above the estimate it re-checks, and not past that before it
         * has judged the guest there (probe()). */
        if (g->reprobe && rs_known(g->reprobe_from) && rs_probe_check_point(g) + FINE_MIN < g->size)
                next = MAX(next, rs_probe_check_point(g));
        /* A knee found this cycle is not stepped on again; one from an earlier cycle is
         * tested (the set may have shrunk since), a fine step at a time. */
        if (rs_known(g->est.lower))
                next = MAX(next, g->lower_old ? g->est.lower : g->est.lower + FINE_STEP);
        next = clamp_target(g, next);
        *ret_step = g->size > next ? g->size - next : 0;
        *ret_fine = fine;
        return next;
}

/* The knee is known to a fine step below `size`: nothing left to narrow. */
bool rs_probe_bracket_closed(const RsGuest *g, uint64_t size) {
        return rs_known(g->est.lower) && size <= g->est.lower + FINE_STEP + FINE_MIN;
}
