/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/model/model-v2-run.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "policies/controller.h"
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

/* The 99 %-throughput truth of the part of the set the workload has touched so far. A set
 * that grows is read in at the workload's pace: a page never read yet costs a first read at
 * any size (I/O no memory saves, which the model does not count as stall, as PSI does not),
 * so memory for it saves nothing until it has been read. What a guest whose set grows
 * needs, at a time, is the truth of its shape with the pages not read yet left out; once
 * the set is read in, that is the shape's own truth. */
static double seen_truth_throughput(const GuestModelV2 *m, const TruthCache *tc) {
        ShapePhase seen = m->phase;
        bool any = false;
        for (unsigned i = 0; i < seen.n_tiers; i++)
                if (m->unseen[i] > 0) {
                        seen.tier[i].bytes = MAX(0.0, seen.tier[i].bytes - m->unseen[i]);
                        any = true;
                }
        return any ? shape_truth_throughput(&m->w, &seen, SHAPE_THROUGHPUT_TARGET) : tc->throughput;
}

/* The two cores behind one face: what the loop needs from either. */
typedef struct Core {
        ModelV2Core kind;
        RsGuest *guest;
        RsController *ctl;
} Core;

typedef struct CoreStep {
        uint64_t target, estimate;
        bool emergency;
        const char *state;
        char reason[RS_REASON_MAX];
} CoreStep;

static int core_new(Core *c, const RsPolicy *policy, const ModelV2Options *o, uint64_t guest_max) {
        *c = (Core) { .kind = o ? o->core : MODEL_V2_ESTIMATOR };
        if (c->kind == MODEL_V2_ESTIMATOR)
                return rs_guest_new(&c->guest, policy, guest_max);
        RsControllerParams params;
        if (o->params)
                params = *o->params;
        else
                rs_controller_params_init(&params, policy);
        return rs_controller_new(&c->ctl, policy, &params, guest_max);
}

static void core_free(Core *c) {
        c->guest = rs_guest_free(c->guest);
        c->ctl = rs_controller_free(c->ctl);
}

static void core_step(Core *c, const RsSample *s, uint64_t now_usec, CoreStep *ret) {
        if (c->kind == MODEL_V2_ESTIMATOR) {
                RsDecision dec;
                if (s)
                        rs_guest_feed(c->guest, s, now_usec);
                rs_guest_decide(c->guest, now_usec, &dec);
                *ret = (CoreStep) { .target = dec.target, .estimate = dec.estimate, .state = rs_state_to_string(dec.state),
                                    .emergency = dec.state == RS_STATE_EMERGENCY };
                snprintf(ret->reason, sizeof(ret->reason), "%s", dec.reason);
                return;
        }
        RsControllerDecision dec;
        /* as policies/guest-cost.c gives them: the watermarks the agent read */
        if (s && rs_known(s->level[RS_LEVEL_WMARK_HIGH]))
                rs_controller_set_watermarks(c->ctl, s->level[RS_LEVEL_WMARK_MIN], s->level[RS_LEVEL_WMARK_LOW],
                                             s->level[RS_LEVEL_WMARK_HIGH]);
        if (s)
                rs_controller_feed(c->ctl, s, now_usec);
        rs_controller_decide(c->ctl, &dec);
        *ret = (CoreStep) { .target = dec.target, .estimate = dec.estimate, .state = rs_control_action_to_string(dec.action),
                            .emergency = dec.action == RS_CONTROL_EMERGENCY };
        snprintf(ret->reason, sizeof(ret->reason), "%s", dec.reason);
}

static bool core_streaming(const Core *c) {
        if (c->kind == MODEL_V2_ESTIMATOR)
                return rs_guest_estimate(c->guest)->streaming;
        RsControllerDecision dec;
        rs_controller_decide(c->ctl, &dec);
        return dec.streaming;
}

int model_v2_run(const WorkloadDraw *d, const RsPolicy *policy, double sim_sec, bool verbose, ModelV2Score *ret) {
        return model_v2_run_with(d, policy, NULL, sim_sec, verbose, ret);
}

int model_v2_run_with(const WorkloadDraw *d, const RsPolicy *policy, const ModelV2Options *o, double sim_sec, bool verbose,
                      ModelV2Score *ret) {
        GuestModelV2 m;
        Core core;
        TruthCache tc = { .known = false };
        double interval = (double) policy->poll_interval_usec / USEC_PER_SEC;
        double below_since = -1, short_since = -1;
        bool prev_emergency = false;
        int r;

        WorkloadDraw dd = *d;
        if (o && o->deflate_on_oom != MODEL_V2_DEFLATE_ON_OOM_DRAWN)
                dd.deflate_on_oom = o->deflate_on_oom == MODEL_V2_DEFLATE_ON_OOM_ON;
        if (o && o->per_cpu_lists)
                dd.per_cpu_lists = true;
        d = &dd;
        *ret = (ModelV2Score) { .draw = *d };
        guest_model_v2_init(&m, d, interval);
        r = core_new(&core, policy, o, (uint64_t) d->boot_bytes);
        if (r < 0)
                return r;

        unsigned ticks = (unsigned) ceil(sim_sec / interval);
        for (unsigned t = 0; t < ticks; t++) {
                RsSample s;
                CoreStep dec;
                uint64_t now_usec = (uint64_t) (m.now_sec * USEC_PER_SEC) + USEC_PER_SEC; /* any monotonic clock */

                guest_model_v2_sample(&m, &s);
                core_step(&core, &s, now_usec, &dec);
                if (dec.emergency && !prev_emergency)
                        ret->emergencies++;
                prev_emergency = dec.emergency;
                guest_model_v2_set_target(&m, (double) dec.target);
                guest_model_v2_step(&m);
                ret->pushback_sec += m.step_pushback ? interval : 0;

                truth_now(&m, &tc);
                bool grown = d->family == FAMILY_PHASE_UP && m.now_sec >= d->change_sec;
                double seen = grown ? seen_truth_throughput(&m, &tc) : tc.throughput;
                if (grown && m.size < seen) {
                        if (below_since < 0)
                                below_since = m.now_sec - interval;
                        ret->longest_below_sec = MAX(ret->longest_below_sec, m.now_sec - below_since);
                } else
                        below_since = -1;
                if (below_since >= 0 && guest_model_v2_throughput(&m) < SHAPE_THROUGHPUT_TARGET) {
                        if (short_since < 0)
                                short_since = m.now_sec - interval;
                        ret->longest_short_sec = MAX(ret->longest_short_sec, m.now_sec - short_since);
                } else
                        short_since = -1;

                if (verbose)
                        printf("t=%5.0fs %-9s size %6.1f MiB target %6.1f estimate %6.1f truth %6.1f/%6.1f (read %6.1f) stall %.4f "
                               "collateral %5.1f MiB refaults %8.0f | %s\n",
                               m.now_sec, dec.state, m.size / MIB, (double) dec.target / MIB,
                               rs_known(dec.estimate) ? (double) dec.estimate / MIB : -1.0, tc.stall / MIB,
                               tc.throughput / MIB, seen / MIB, m.step_stall_sec / interval, m.step_collateral / MIB,
                               m.step_refaults, dec.reason);
        }

        CoreStep dec;
        core_step(&core, NULL, (uint64_t) (m.now_sec * USEC_PER_SEC) + USEC_PER_SEC, &dec);
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
        ret->starved = ret->longest_short_sec > MODEL_V2_STARVED_SEC;
        ret->oom_kills = m.oom_kills;
        ret->oom_deflated = m.oom_deflated;
        ret->streaming = core_streaming(&core);
        core_free(&core);
        return 0;
}
