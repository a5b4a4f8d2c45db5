/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs the decision core against one draw of guest model v2, the way the daemon drives it
 * (sample, feed, decide, the decision's target to the balloon), and scores the run against
 * the draw's ground truth, which the shape alone gives (workload-shape.h):
 *   - the error of the final estimate against the stall-target truth and against the
 *     99 %-throughput truth, and whether the size held is in the band the shipped margin
 *     gives above the stall-target truth;
 *   - the cost: memory stall over the whole run, the first descent included, as a fraction
 *     of wall time;
 *   - starvation: after a growth, the guest held below the 99 %-throughput truth for more
 *     than 60 s at a stretch;
 *   - OOM kills, and the time spent at the edge of one (the balloon pushed back: the guest
 *     had nothing left to free). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/controller.h"
#include "policies/policy.h"
#include "tests/model/guest-model-v2.h"

#define MODEL_V2_STARVED_SEC 60.0

typedef struct ModelV2Score {
        WorkloadDraw draw;
        double sim_sec;
        double truth_stall;          /* bytes, at the end (SHAPE_STALL_TARGET) */
        double truth_throughput;     /* bytes, at the end (SHAPE_THROUGHPUT_TARGET) */
        bool has_estimate;
        double estimate;             /* bytes, the final estimate */
        double held;                 /* bytes, the guest's size at the end */
        double error_stall;          /* (estimate - truth_stall) / truth_stall; without an estimate, of the held size */
        double error_throughput;     /* the same against truth_throughput */
        double cost;                 /* stall seconds / wall seconds, the whole run */
        double steady_stall_held;    /* the curve's stall at the final size */
        bool held_in_band;           /* the final size is in [truth_stall, truth_stall x (1 + margin) + dead-band]:
                                      * at least the truth, at most what the margin adds plus the smallest move */
        double longest_below_sec;    /* after a growth: longest stretch held below truth_throughput */
        double longest_short_sec;    /* ... of those, the longest whose intervals all lost more than 1 % of
                                      * throughput (the truth's own 99 %): short of memory by the guest's stall too */
        bool starved;                /* longest_short_sec over MODEL_V2_STARVED_SEC */
        unsigned oom_kills;          /* the workload's process killed (it restarts) */
        double oom_deflated;         /* bytes the balloon gave back on the guest's OOM path (deflate-on-oom) */
        double pushback_sec;         /* seconds of intervals with the balloon pushed back */
        unsigned emergencies;
        bool streaming;              /* the core's stream verdict at the end */
} ModelV2Score;

typedef enum ModelV2Core {
        MODEL_V2_ESTIMATOR,  /* today's estimator (estimator.h) */
        MODEL_V2_CONTROLLER, /* the cost controller (controller.h), not yet wired into the daemon */
        _MODEL_V2_CORE_MAX,
} ModelV2Core;

/* The balloon's deflate-on-oom: as drawn (WorkloadDraw.deflate_on_oom), or forced. */
typedef enum ModelV2DeflateOnOom {
        MODEL_V2_DEFLATE_ON_OOM_DRAWN = 0,
        MODEL_V2_DEFLATE_ON_OOM_ON,
        MODEL_V2_DEFLATE_ON_OOM_OFF,
} ModelV2DeflateOnOom;

typedef struct ModelV2Options {
        ModelV2Core core;
        const RsControllerParams *params; /* the controller's; NULL: rs_controller_params_init() */
        ModelV2DeflateOnOom deflate_on_oom;
        bool per_cpu_lists;               /* the guest's per-CPU free lists modelled (WorkloadDraw.per_cpu_lists) */
} ModelV2Options;

/* Runs `sim_sec` simulated seconds at the policy's polling interval. verbose: one line per
 * interval (replaying a draw). Returns 0 or a negative errno from the core. */
int model_v2_run(const WorkloadDraw *d, const RsPolicy *policy, double sim_sec, bool verbose, ModelV2Score *ret);
/* The same with a choice of core (NULL: today's estimator). */
int model_v2_run_with(const WorkloadDraw *d, const RsPolicy *policy, const ModelV2Options *o, double sim_sec, bool verbose,
                      ModelV2Score *ret);
