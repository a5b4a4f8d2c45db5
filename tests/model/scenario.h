/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs the decision core against the guest model for a number of intervals, the way the
 * daemon will: sample, feed, decide, apply the target; and records what the tests assert. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/estimator.h"
#include "tests/model/guest-model.h"

/* What estimating costs the guest, from the model's ground truth, per probe cycle.
 *
 * A probe cycle starts where the core starts one (start_cycle()): on an entry into PROBE
 * from LEARN (the first descent) or from HOLD (a re-probe after the hold time, or an
 * operator's request). Entries into PROBE from BACKOFF, GROW or EMERGENCY continue the
 * cycle they are part of (refining, or probing again after a storm the cycle caused). A
 * cycle runs until the next one starts, so the swap-ins that come back after a squeeze
 * are charged to the cycle whose squeeze evicted them. Each model interval is charged to
 * the cycle of the decision that set its target. */
#define SCENARIO_CYCLES_MAX 256
#define SCENARIO_DEFICIT_TICK (64.0 * 1024) /* an interval "with a deficit": more than this evicted */

typedef struct ScenarioCycle {
        unsigned start_tick;       /* model tick of the decision that entered PROBE */
        RsState from;              /* RS_STATE_LEARN: the first descent; RS_STATE_HOLD: a re-probe */
        unsigned ticks;            /* intervals until the next cycle (or the end of the run) */
        unsigned probe_ticks;      /* of which decided in PROBE */
        unsigned deficit_ticks;    /* intervals run with more than SCENARIO_DEFICIT_TICK of the hot sets evicted */
        unsigned emergencies;      /* entries into EMERGENCY */
        double max_deficit;        /* bytes: the most of the hot sets evicted in one interval */
        double evicted_byte_sec;   /* the deficit integrated over the cycle */
        double refaults;           /* hot pages refaulted, thrashing plus recovery (swap-ins, reads back) */
        double swapins;            /* pages */
        double extra_sec;          /* extra workload seconds */
        uint64_t ws;               /* the working set at the start */
        bool ws_changed;           /* the working set moved during the cycle: not all of it is the probe's doing */
} ScenarioCycle;

typedef struct ScenarioMeter {
        RsState state;             /* the last decision's (_RS_STATE_MAX before the first) */
        unsigned ticks;            /* intervals metered */
        double sim_sec;
        double extra_sec, refaults, swapins, evicted_byte_sec;
        unsigned emergencies;      /* entries into EMERGENCY */
        unsigned probe_entries;    /* every entry into PROBE (refinements too) */
        unsigned n_cycles;         /* probe cycles started (cycles[] keeps the first SCENARIO_CYCLES_MAX) */
        /* The first descent: from the start until the first decision in HOLD. */
        unsigned first_hold_tick;  /* model tick of that decision; 0 = never held */
        double first_max_deficit;  /* bytes */
        unsigned first_deficit_ticks;
        double first_extra_sec;
        /* From the first hold on (the steady state's cost). */
        double sim_sec_after_first_hold, extra_sec_after_first_hold;
        ScenarioCycle cycles[SCENARIO_CYCLES_MAX];
} ScenarioMeter;

void scenario_meter_init(ScenarioMeter *mt);
/* After each decision, before the model runs the interval at its target. */
void scenario_meter_decision(ScenarioMeter *mt, const GuestModel *m, const RsDecision *d);
/* After the model ran the interval: charges its cost to the current cycle. */
void scenario_meter_step(ScenarioMeter *mt, const GuestModel *m);
/* The current (last started) cycle, or NULL before the first. */
const ScenarioCycle *scenario_meter_cycle(const ScenarioMeter *mt);
/* Cycles started at model ticks in [from, to). */
unsigned scenario_meter_cycles_between(const ScenarioMeter *mt, unsigned from, unsigned to);
/* Prints one line per cycle (for a failing test's log). */
void scenario_meter_print(const ScenarioMeter *mt, const char *prefix);

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

        /* The cost of estimating (model ground truth; details per cycle in meter). */
        double sim_sec;               /* simulated seconds */
        double extra_sec;             /* extra workload seconds (hot refaults x service time) */
        double refaults;              /* hot pages refaulted (thrashing plus recovery) */
        double swapins;               /* pages swapped in */
        double evicted_byte_sec;      /* hot bytes evicted, integrated over time */
        double slowdown;              /* amortized: extra_sec / sim_sec */
        double slowdown_after_first_hold; /* the same from the end of the first descent (0 if never held) */
        unsigned probe_cycles;        /* probe cycles (entries into PROBE from LEARN or HOLD) */
        unsigned probe_cycles_after_convergence; /* started at or after converged_at */
        double worst_cycle_refaults;  /* hot pages refaulted in the worst cycle (start to next start) */
        /* Re-probes of an unchanged working set (cycles from HOLD, ws_changed false). */
        unsigned reprobes;
        double worst_reprobe_deficit; /* bytes evicted in one interval, worst re-probe */
        unsigned worst_reprobe_deficit_ticks;
        double worst_reprobe_refaults;
        ScenarioMeter meter;
} ScenarioResult;

typedef struct ScenarioOptions {
        /* Through the daemon's actuation plan (per-interval cap, dead-band) before the
         * balloon, as the daemon does; otherwise the decision's target goes to the balloon. */
        bool actuate;
} ScenarioOptions;

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
/* The same with options (NULL: the defaults). */
int scenario_run_opts(const GuestModelConfig *cfg,
                      const RsPolicy *policy,
                      unsigned ticks,
                      double tolerance,
                      const ScenarioOptions *opts,
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
 * tests); otherwise the fixed sizes of the scenario tests. Either way the model's noise
 * (2-15 %) comes from the seed, and the pass time is the default 10 s: set cfg->pass_sec
 * (e.g. 0.5, a real workload's sweep) after. */
void scenario_config(ScenarioKind kind, uint64_t seed, bool randomize, GuestModelConfig *cfg, ScenarioSpec *spec);
