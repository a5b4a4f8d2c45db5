/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/model/model-v2-run.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "policies/estimator.h"

typedef struct TruthCache {
        ShapePhase phase;
        bool known;
        double stall, throughput;
} TruthCache;

/* The truth moves only while the shape does (a phase ramp): computed again only then. */
static void truth_now(const GuestModelV2 *m, TruthCache *tc) {
        if (tc->known && memcmp(&tc->phase, &m->phase, sizeof(m->phase)) == 0)
                return;
        tc->phase = m->phase;
        tc->known = true;
        tc->stall = guest_model_v2_truth_stall(m, SHAPE_STALL_TARGET);
        tc->throughput = guest_model_v2_truth_throughput(m, SHAPE_THROUGHPUT_TARGET);
}

int model_v2_run(const WorkloadDraw *d, const RsPolicy *policy, double sim_sec, bool verbose, ModelV2Score *ret) {
        GuestModelV2 m;
        RsGuest *g;
        TruthCache tc = { .known = false };
        double interval = (double) policy->poll_interval_usec / USEC_PER_SEC;
        double below_since = -1;
        RsState prev = _RS_STATE_MAX;
        int r;

        *ret = (ModelV2Score) { .draw = *d };
        guest_model_v2_init(&m, d, interval);
        r = rs_guest_new(&g, policy, (uint64_t) d->boot_bytes);
        if (r < 0)
                return r;

        unsigned ticks = (unsigned) ceil(sim_sec / interval);
        for (unsigned t = 0; t < ticks; t++) {
                RsSample s;
                RsDecision dec;
                uint64_t now_usec = (uint64_t) (m.now_sec * USEC_PER_SEC) + USEC_PER_SEC; /* any monotonic clock */

                guest_model_v2_sample(&m, &s);
                rs_guest_feed(g, &s, now_usec);
                rs_guest_decide(g, now_usec, &dec);
                if (dec.state == RS_STATE_EMERGENCY && prev != RS_STATE_EMERGENCY)
                        ret->emergencies++;
                prev = dec.state;
                guest_model_v2_set_target(&m, (double) dec.target);
                guest_model_v2_step(&m);
                ret->pushback_sec += m.step_pushback ? interval : 0;

                truth_now(&m, &tc);
                bool grown = d->family == FAMILY_PHASE_UP && m.now_sec >= d->change_sec;
                if (grown && m.size < tc.throughput) {
                        if (below_since < 0)
                                below_since = m.now_sec - interval;
                        ret->longest_below_sec = MAX(ret->longest_below_sec, m.now_sec - below_since);
                } else
                        below_since = -1;

                if (verbose)
                        printf("t=%5.0fs %-9s size %6.1f MiB target %6.1f estimate %6.1f truth %6.1f/%6.1f stall %.4f "
                               "collateral %5.1f MiB refaults %8.0f | %s\n",
                               m.now_sec, rs_state_to_string(dec.state), m.size / MIB, (double) dec.target / MIB,
                               rs_known(dec.estimate) ? (double) dec.estimate / MIB : -1.0, tc.stall / MIB,
                               tc.throughput / MIB, m.step_stall_sec / interval, m.step_collateral / MIB,
                               m.step_refaults, dec.reason);
        }

        RsDecision dec;
        rs_guest_decide(g, (uint64_t) (m.now_sec * USEC_PER_SEC) + USEC_PER_SEC, &dec);
        truth_now(&m, &tc);
        ret->sim_sec = m.total_sec;
        ret->truth_stall = tc.stall;
        ret->truth_throughput = tc.throughput;
        ret->has_estimate = rs_known(dec.estimate);
        ret->estimate = ret->has_estimate ? (double) dec.estimate : NAN;
        ret->held = m.size;
        /* Without an estimate yet (a first descent still under way), the size the core keeps
         * the guest at is its answer. */
        double answer = ret->has_estimate ? ret->estimate : ret->held;
        ret->error_stall = (answer - tc.stall) / tc.stall;
        ret->error_throughput = (answer - tc.throughput) / tc.throughput;
        ret->cost = m.total_sec > 0 ? m.total_stall_sec / m.total_sec : 0;
        ret->steady_stall_held = shape_steady_stall(d, &m.phase, m.size);
        ret->held_in_band = m.size >= tc.stall &&
                            m.size <= tc.stall * (1 + policy->margin_percent / 100) + (double) policy->dead_band_bytes;
        ret->starved = ret->longest_below_sec > MODEL_V2_STARVED_SEC;
        ret->oom_kills = m.oom_kills;
        ret->streaming = rs_guest_estimate(g)->streaming;
        rs_guest_free(g);
        return 0;
}
