/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs the decision core against the guest model for a number of intervals, the way the
 * daemon will: sample, feed, decide, apply the target; and records what the tests assert. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/estimator.h"
#include "tests/model/guest-model.h"

typedef struct ScenarioResult {
        unsigned ticks;
        unsigned oom_kills;
        uint64_t min_target;          /* lowest target ever recommended */
        uint64_t max_target;
        uint64_t floor;
        uint64_t final_estimate;
        uint64_t final_target;
        uint64_t final_ws;            /* the model's working set at the end */
        double final_error;           /* |estimate - ws| / ws at the end (1e9 if unknown) */
        unsigned converged_at;        /* first tick from which the estimate stayed within tolerance; 0 = never */
        unsigned emergencies;         /* entries into EMERGENCY */
        unsigned lies;                /* corrupted samples */
        RsState final_state;
        bool streaming;
        double max_rate_seen;         /* largest useful-refault rate the core believed */
} ScenarioResult;

/* Runs until `ticks`. `tolerance` (e.g. 0.10) decides convergence. on_tick, if set, is
 * called after each decision (for extra per-tick assertions); it returns false to fail. */
typedef bool (*scenario_tick_fn)(const GuestModel *m, const RsGuest *g, const RsDecision *d, void *userdata);

int scenario_run(const GuestModelConfig *cfg,
                 const RsPolicy *policy,
                 unsigned ticks,
                 double tolerance,
                 scenario_tick_fn on_tick,
                 void *userdata,
                 ScenarioResult *ret);

typedef enum ScenarioKind {
        SCENARIO_STEADY_ANON,      /* anonymous working set, swap, balloon stats only */
        SCENARIO_FILE_BALLOON,     /* page-cache working set through read(), balloon stats only */
        SCENARIO_FILE_AGENT,       /* the same with the guest agent */
        SCENARIO_MIXED,            /* anon + file + cold cache, agent */
        SCENARIO_DOUBLING,         /* the anonymous set doubles mid-run */
        SCENARIO_SHRINKING,        /* the set halves mid-run */
        SCENARIO_STREAMING,        /* Piggin: a stream much larger than memory plus a hot set, agent */
        SCENARIO_STREAMING_LATE,   /* the stream starts mid-run; agent without activate counters */
        SCENARIO_IDLE,             /* almost nothing: ends at the floor */
        SCENARIO_REBOOT,           /* counters reset mid-run */
        SCENARIO_LIAR,             /* corrupted reports: free > total, counters backwards, absurd values */
        SCENARIO_GROWTH_NO_SWAP,   /* anon grows in a ramp, no swap, no deflate-on-oom */
        SCENARIO_HIDING,           /* balloon stats that never show pressure: only host disk reads do */
        _SCENARIO_MAX,
} ScenarioKind;

typedef struct ScenarioSpec {
        const char *name;
        unsigned ticks;
        unsigned change_tick;      /* when the working set changes (0: never) */
        bool has_working_set;      /* false: idle (the floor is the answer) */
} ScenarioSpec;

/* Fills a model config for a scenario. randomize: sizes drawn from the seed (property
 * tests); otherwise the fixed sizes of the scenario tests. */
void scenario_config(ScenarioKind kind, uint64_t seed, bool randomize, GuestModelConfig *cfg, ScenarioSpec *spec);
