/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The decision core driven by the guest model through every scenario of issue 4, with
 * the fixed sizes of each scenario (test-estimator-property.c repeats them over seeds).
 *
 * Stated convergence (intervals of 10 s, from the start or from the change): 40 for a
 * first estimate from a 2 GiB start; 35 after a doubling; 100 after a shrink (found by the
 * next probe, one 10 min hold later); 40 after a stream starts. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/macro.h"
#include "policies/actuation.h"
#include "policies/arbiter.h"
#include "tests/model/scenario.h"
#include "tests/lib/check-run.h"

#define TOLERANCE 0.10
#define SEEDS 5                       /* every fixed scenario runs these seeds (noise 2-15 % from the seed) */
#define BELOW_SLACK (3 * MIB)         /* a re-probe's worst by construction: a 2 MiB fine step + 1 MiB of balloon rounding */

typedef struct Watch {
        unsigned settle;          /* from this tick on, targets are checked against the set */
        double max_target_ratio;  /* largest target / working set after settle */
        double min_target_ratio;  /* smallest target / working set after settle */
        unsigned below_ticks;     /* decisions after settle with target < working set - BELOW_SLACK */
        unsigned below_not_probing; /* ... of which not in PROBE */
        unsigned cycles_after_settle; /* probe cycles (from LEARN or HOLD) started after settle */
        RsState prev;
        uint64_t min_gap_to_floor;
        bool below_floor;
        bool above_max;
        bool negative_or_nan;
} Watch;

static bool watch(const GuestModel *m, const RsGuest *g, const RsDecision *d, void *userdata) {
        Watch *w = userdata;
        const RsObservation *o = rs_guest_observation(g);
        if (d->target < d->floor)
                w->below_floor = true;
        if (d->target > d->max)
                w->above_max = true;
        if (!(o->useful >= 0) || !isfinite(o->useful))
                w->negative_or_nan = true;
        if (m->tick >= w->settle) {
                uint64_t ws = guest_model_working_set(m);
                double r = (double) d->target / (double) ws;
                w->max_target_ratio = MAX(w->max_target_ratio, r);
                w->min_target_ratio = MIN(w->min_target_ratio, r);
                if (d->target + BELOW_SLACK < ws) {
                        w->below_ticks++;
                        w->below_not_probing += d->state != RS_STATE_PROBE;
                }
                if (d->state == RS_STATE_PROBE && (w->prev == RS_STATE_HOLD || w->prev == RS_STATE_LEARN))
                        w->cycles_after_settle++;
        }
        w->prev = d->state;
        return true;
}

static unsigned convergence_bound(ScenarioKind k) {
        switch (k) {
        case SCENARIO_DOUBLING:
        case SCENARIO_GROWTH_NO_SWAP:
                return 35;
        case SCENARIO_SHRINKING:
                return 100;
        case SCENARIO_STREAMING_LATE:
                return 40;
        default:
                return 40;
        }
}

/* Emergencies each fixed scenario must show, no more, no fewer: none where nothing
 * happens that a probe did not cause; one where the set doubles at once (375 MiB more than
 * the guest holds: a storm at the held size, deflating to max is the answer). */
static unsigned expected_emergencies(ScenarioKind k) {
        return k == SCENARIO_DOUBLING ? 1 : 0;
}

static void run_kind(ScenarioKind k, uint64_t seed, ScenarioResult *r, Watch *w, ScenarioSpec *spec) {
        GuestModelConfig cfg;
        RsPolicy p;

        rs_policy_init(&p);
        scenario_config(k, seed, false, &cfg, spec);
        *w = (Watch) { .settle = spec->change_tick + 60, .min_target_ratio = 1e9, .prev = _RS_STATE_MAX };
        ck_assert_int_eq(scenario_run(&cfg, &p, spec->ticks, TOLERANCE, watch, w, r), 0);

        unsigned conv = r->converged_at > spec->change_tick ? r->converged_at - spec->change_tick : r->converged_at;
        printf("%-16s seed %llu noise %.3f: ws=%4.0f MiB estimate=%4.0f MiB error=%5.2f%% converged after %3u intervals, "
               "emergencies=%u, min target=%4.0f MiB (floor %4.0f), after settle target/ws %.3f-%.3f, "
               "%u below ws-3MiB (%u not probing) in %u cycles\n",
               spec->name, (unsigned long long) seed, cfg.noise, (double) r->final_ws / MIB,
               rs_known(r->final_estimate) ? (double) r->final_estimate / MIB : -1.0, 100 * r->final_error, conv,
               r->emergencies, (double) r->min_target / MIB, (double) r->floor / MIB, w->min_target_ratio,
               w->max_target_ratio, w->below_ticks, w->below_not_probing, w->cycles_after_settle);

        /* Every scenario: never below floor, above max, out of memory, or a bad rate. */
        ck_assert_msg(!w->below_floor, "%s: target below floor", spec->name);
        ck_assert_msg(!w->above_max, "%s: target above max", spec->name);
        ck_assert_msg(!w->negative_or_nan, "%s: negative or NaN rate", spec->name);
        ck_assert_uint_eq(r->oom_kills, 0);
        ck_assert_uint_ge(r->min_target, r->floor);
        ck_assert_msg(r->emergencies == expected_emergencies(k), "%s seed %llu: %u emergencies, expected %u", spec->name,
                      (unsigned long long) seed, r->emergencies, expected_emergencies(k));

        if (spec->has_working_set) {
                ck_assert_msg(r->final_error <= TOLERANCE, "%s: estimate %.1f%% off", spec->name, 100 * r->final_error);
                ck_assert_msg(r->converged_at > 0, "%s: never converged", spec->name);
                ck_assert_msg(conv <= convergence_bound(k), "%s: converged after %u > %u intervals", spec->name, conv,
                              convergence_bound(k));
        }
}

/* The lower bound on targets once settled (60 intervals after the start or the change):
 * below the working set by more than BELOW_SLACK only while probing, at most one interval
 * per probe cycle (a re-probe backs off on its first refaulting sample, and its step there
 * is fine), and never by more than one probe-step-max (10 %) of the set. */
static void assert_lower_bound(const ScenarioSpec *spec, uint64_t seed, const Watch *w) {
        ck_assert_msg(w->below_not_probing == 0, "%s seed %llu: %u decisions below ws - 3 MiB outside PROBE", spec->name,
                      (unsigned long long) seed, w->below_not_probing);
        ck_assert_msg(w->below_ticks <= w->cycles_after_settle,
                      "%s seed %llu: %u decisions below ws - 3 MiB in %u probe cycles (at most one each)", spec->name,
                      (unsigned long long) seed, w->below_ticks, w->cycles_after_settle);
        ck_assert_msg(w->min_target_ratio >= 0.90, "%s seed %llu: target %.3f x working set", spec->name,
                      (unsigned long long) seed, w->min_target_ratio);
}

#define SCENARIO_TEST(fn, kind)                                            \
        START_TEST(fn) {                                                   \
                for (uint64_t seed = 1; seed <= SEEDS; seed++) {           \
                        ScenarioResult r;                                  \
                        ScenarioSpec spec;                                 \
                        Watch w;                                           \
                        run_kind(kind, seed, &r, &w, &spec);               \
                        /* held at estimate + margin (balloon tier: 15 %) */ \
                        ck_assert_double_le(w.max_target_ratio, 1.20);     \
                        if (kind == SCENARIO_DOUBLING)                     \
                                assert_lower_bound(&spec, seed, &w);       \
                }                                                          \
        }                                                                  \
        END_TEST

SCENARIO_TEST(test_steady_anon, SCENARIO_STEADY_ANON)
SCENARIO_TEST(test_file_balloon_only, SCENARIO_FILE_BALLOON)
SCENARIO_TEST(test_mixed, SCENARIO_MIXED)
SCENARIO_TEST(test_growth_no_swap, SCENARIO_GROWTH_NO_SWAP)
SCENARIO_TEST(test_hiding_guest, SCENARIO_HIDING)

/* The set doubles at tick 100 (375 -> 750 MiB anonymous) while the guest is held: one
 * emergency (run_kind), then from 60 intervals after the change held at estimate + margin
 * and within the lower bound like any other scenario. */
SCENARIO_TEST(test_doubling, SCENARIO_DOUBLING)

/* The same hiding guest without the host's disk reads: nothing stops the squeeze, which
 * is what makes the host signal worth having (and the floor the last line). */
START_TEST(test_hiding_guest_needs_host_reads) {
        GuestModelConfig cfg;
        ScenarioSpec spec;
        ScenarioResult r;
        RsPolicy p;

        rs_policy_init(&p);
        scenario_config(SCENARIO_HIDING, 1, false, &cfg, &spec);
        cfg.host_disk_stats = false;
        ck_assert_int_eq(scenario_run(&cfg, &p, spec.ticks, TOLERANCE, NULL, NULL, &r), 0);
        printf("hiding-guest without host disk reads: min target %.0f MiB for a %.0f MiB set (floor %.0f)\n",
               (double) r.min_target / MIB, (double) r.final_ws / MIB, (double) r.floor / MIB);
        ck_assert_uint_lt(r.min_target, r.final_ws * 8 / 10);
        ck_assert_uint_ge(r.min_target, r.floor);
}
END_TEST

START_TEST(test_file_agent_more_precise) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                ScenarioResult rb, ra;
                ScenarioSpec spec;
                Watch w;
                run_kind(SCENARIO_FILE_BALLOON, seed, &rb, &w, &spec);
                double balloon_ratio = w.max_target_ratio;
                run_kind(SCENARIO_FILE_AGENT, seed, &ra, &w, &spec);
                /* The agent tier holds with the smaller margin and its estimate is at least
                 * as close as the balloon tier's (within the noise: 0.5 %). */
                ck_assert_double_lt(w.max_target_ratio, balloon_ratio);
                ck_assert_double_le(ra.final_error, rb.final_error + 0.005);
                ck_assert_double_le(w.max_target_ratio, 1.12);
        }
}
END_TEST

START_TEST(test_shrinking) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                ScenarioResult r;
                ScenarioSpec spec;
                Watch w;
                run_kind(SCENARIO_SHRINKING, seed, &r, &w, &spec);
                /* the memory given back: the final target is near the new, smaller set */
                ck_assert_double_le((double) r.final_target, 1.12 * (double) r.final_ws);
        }
}
END_TEST

START_TEST(test_streaming_piggin) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                ScenarioResult r;
                ScenarioSpec spec;
                Watch w;
                run_kind(SCENARIO_STREAMING, seed, &r, &w, &spec);
                /* estimate is the hot set, and it is never granted more than hot set + margin */
                ck_assert_double_le(w.max_target_ratio, 1.12);
                ck_assert(r.streaming);
        }
}
END_TEST

START_TEST(test_streaming_late_marginal_effect) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                ScenarioResult r;
                ScenarioSpec spec;
                Watch w;
                run_kind(SCENARIO_STREAMING_LATE, seed, &r, &w, &spec);
                /* without activate counters, growing once showed refaults did not fall: the
                 * stream became the baseline and the memory was taken back */
                ck_assert(r.streaming);
                ck_assert_double_le(w.max_target_ratio, 1.12);
        }
}
END_TEST

START_TEST(test_idle_ends_at_floor) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                ScenarioResult r;
                ScenarioSpec spec;
                Watch w;
                run_kind(SCENARIO_IDLE, seed, &r, &w, &spec);
                ck_assert_uint_eq(r.final_target, r.floor);
                ck_assert_int_eq(r.final_state, RS_STATE_HOLD);
                ck_assert_uint_le(r.final_estimate, r.floor);
        }
}
END_TEST

/* Counters reset at tick 90: no spike believed, no emergency (run_kind), and from 60
 * intervals after the reboot the targets keep both bounds. */
START_TEST(test_reboot_no_spike) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                ScenarioResult r;
                ScenarioSpec spec;
                Watch w;
                run_kind(SCENARIO_REBOOT, seed, &r, &w, &spec);
                /* the largest refault rate believed stays a real one: the model's worst is
                 * one full pass over the hot set per 10 s, about 20k pages/s at these sizes */
                ck_assert_double_lt(r.max_rate_seen, 30000);
                ck_assert_double_le(w.max_target_ratio, 1.12);
                assert_lower_bound(&spec, seed, &w);
        }
}
END_TEST

/* 15 % of the samples corrupted: still no emergency (run_kind), both bounds from tick 60. */
START_TEST(test_lying_guest) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                ScenarioResult r;
                ScenarioSpec spec;
                Watch w;
                run_kind(SCENARIO_LIAR, seed, &r, &w, &spec);
                ck_assert_uint_gt(r.lies, 20); /* the guest did lie */
                ck_assert_double_lt(r.max_rate_seen, 30000);
                ck_assert_double_le(w.max_target_ratio, 1.12);
                assert_lower_bound(&spec, seed, &w);
        }
}
END_TEST

/* The daemon's whole loop against the model: the decision goes through the actuation
 * plan (per-interval cap, dead-band) before the balloon gets it. */
typedef struct Actuated {
        GuestModel m;
        RsGuest *g;
        RsPolicy policy;
        RsDecision d;
        uint64_t oom_kills;        /* injected OOM kills, reported as the balloon counter */
        unsigned emergencies, grows;
        unsigned first_hold;       /* first tick in HOLD with a known estimate (0: never) */
        double worst_error_after;  /* largest |estimate - ws| / ws from `judge_from` on */
        unsigned judge_from;
} Actuated;

static void actuated_init(Actuated *a, const GuestModelConfig *cfg, const RsPolicy *policy) {
        *a = (Actuated) { .policy = *policy, .judge_from = UINT_MAX };
        guest_model_init(&a->m, cfg);
        ck_assert_int_eq(rs_guest_new(&a->g, policy, cfg->boot_bytes), 0);
}

/* The first half of an interval: the guest's sample fed, the core's decision taken. */
static void actuated_decide(Actuated *a) {
        RsSample s;
        RsState before = rs_guest_state(a->g);

        guest_model_sample(&a->m, &s);
        s.counter[RS_COUNTER_OOM_KILLS] = a->oom_kills;
        rs_guest_feed(a->g, &s, a->m.now_usec + USEC_PER_SEC);
        rs_guest_decide(a->g, a->m.now_usec + USEC_PER_SEC, &a->d);
        if (a->d.state != before && a->d.state == RS_STATE_EMERGENCY)
                a->emergencies++;
        if (a->d.state != before && a->d.state == RS_STATE_GROW)
                a->grows++;
        if (a->d.state == RS_STATE_HOLD && rs_known(a->d.estimate) && a->first_hold == 0)
                a->first_hold = a->m.tick + 1;
        if (a->m.tick >= a->judge_from && rs_known(a->d.estimate)) {
                double ws = (double) guest_model_working_set(&a->m);
                a->worst_error_after = MAX(a->worst_error_after, fabs((double) a->d.estimate - ws) / ws);
        }
}

/* The second half: `target` (the decision's, or what the host granted) through the plan to
 * the balloon, and the guest runs an interval at what it got. */
static void actuated_apply(Actuated *a, uint64_t target) {
        RsActuationInput in = {
                .current = guest_model_actual(&a->m),
                .target = target,
                .urgent = a->d.urgent,
                .fine = a->d.fine,
                .estimate = a->d.estimate,
                .floor = a->d.floor,
                .max = a->d.max,
                .host_limit = target < a->d.target ? target : RS_UNKNOWN,
                .margin_percent = a->policy.margin_percent,
                .boot_bytes = a->m.cfg.boot_bytes,
        };
        RsActuationPlan plan;
        ck_assert_int_eq(rs_actuation_plan(&a->policy, &in, &plan), 0);
        if (!plan.skip && plan.set_balloon)
                guest_model_set_target(&a->m, plan.balloon_target);
        guest_model_step(&a->m);
}

static void actuated_tick(Actuated *a) {
        actuated_decide(a);
        actuated_apply(a, a->d.target);
}

static double actuated_error(const Actuated *a) {
        if (!rs_known(a->d.estimate))
                return 1e9;
        double ws = (double) guest_model_working_set(&a->m);
        return fabs((double) a->d.estimate - ws) / ws;
}

/* Near the knee a probe step (1 %) is smaller than the 8 MiB dead-band: the probe must
 * still get there, not repeat a step the plan skips forever. */
START_TEST(test_probe_through_dead_band) {
        GuestModelConfig cfg;
        RsPolicy p;
        Actuated a;

        guest_model_config_default(&cfg, 3);
        cfg.boot_bytes = 1 * GIB;
        cfg.swap_bytes = 1 * GIB;
        cfg.phases[0].anon_hot = 300 * MIB;
        rs_policy_init(&p);
        ck_assert_uint_eq(p.dead_band_bytes, 8 * MIB);
        actuated_init(&a, &cfg, &p);
        while (a.m.tick < 120 && a.first_hold == 0)
                actuated_tick(&a);
        printf("dead-band: ws=%.0f MiB estimate=%.0f MiB, held after %u intervals\n",
               (double) guest_model_working_set(&a.m) / MIB, (double) a.d.estimate / MIB, a.first_hold);
        ck_assert_msg(a.first_hold > 0, "the probe never finished (stuck at %.0f MiB)",
                      (double) guest_model_actual(&a.m) / MIB);
        ck_assert_uint_le(a.first_hold, 40);
        ck_assert_double_le(actuated_error(&a), TOLERANCE);
        ck_assert_uint_eq(a.m.oom_kills, 0);
        rs_guest_free(a.g);
}
END_TEST

/* An OOM kill while probing (a hog that pushed 40 MiB of the working set to swap dies):
 * emergency, deflate to max, then the capped way back down while the guest pages its
 * working set back in, in bursts. Those swap-ins are recovery, not growth: the estimate
 * stays within 10 % of the (unchanged) working set and GROW never runs. */
START_TEST(test_swapin_after_emergency_is_not_growth) {
        GuestModelConfig cfg;
        RsPolicy p;
        Actuated a;

        guest_model_config_default(&cfg, 5);
        cfg.boot_bytes = 1 * GIB;
        cfg.swap_bytes = 1 * GIB;
        cfg.phases[0].anon_hot = 400 * MIB;
        cfg.swap_recovery_bytes_per_sec = 400.0 * KIB;
        cfg.swap_recovery_every = 2;
        rs_policy_init(&p);
        p.dead_band_bytes = 1 * MIB; /* this is about the swap-ins, not the dead-band */
        actuated_init(&a, &cfg, &p);

        /* into the first probe until it nears the working set (refaults back off at once,
         * so the probe no longer waits at a refaulting size for the kill to land there) */
        while (a.m.tick < 100 && !(rs_guest_state(a.g) == RS_STATE_PROBE &&
                                   guest_model_actual(&a.m) < guest_model_working_set(&a.m) * 21 / 20))
                actuated_tick(&a);
        ck_assert_int_eq(rs_guest_state(a.g), RS_STATE_PROBE);
        ck_assert_uint_eq(a.emergencies, 0);

        a.oom_kills++;
        a.m.anon_on_swap += 40 * MIB;
        a.judge_from = a.m.tick;
        unsigned end = a.m.tick + 150;
        unsigned hold_ticks = 0;
        double swap_least = a.m.anon_on_swap;
        while (a.m.tick < end) {
                actuated_tick(&a);
                hold_ticks += a.d.state == RS_STATE_HOLD;
                swap_least = MIN(swap_least, a.m.anon_on_swap);
        }
        double ws = (double) guest_model_working_set(&a.m);
        printf("emergency recovery: ws=%.0f MiB estimate=%.0f MiB, worst error after %.1f%%, grows=%u, swap left %.0f MiB\n",
               ws / MIB, (double) a.d.estimate / MIB, 100 * a.worst_error_after, a.grows, a.m.anon_on_swap / MIB);
        ck_assert_uint_eq(a.emergencies, 1);
        /* The recovery did happen (at the end a new probe cycle may be a step below the set). */
        ck_assert_double_eq_tol(swap_least, 0, 1.0);
        ck_assert_uint_eq(a.grows, 0);
        ck_assert_double_le(a.worst_error_after, TOLERANCE);
        ck_assert_double_le(actuated_error(&a), TOLERANCE);
        ck_assert_uint_gt(hold_ticks, 0);
        ck_assert_uint_eq(a.m.oom_kills, 0);
        rs_guest_free(a.g);
}
END_TEST

/* Two guests on a host too small for both at max (BENCHMARKS.md section 8): 1 GiB guests with
 * 512 MiB of swap, working sets of 520 MiB (anonymous) and 616 MiB (half anonymous, half
 * file), and 1152 MiB for both: the sets fit, the sets plus margins do not. Every interval
 * runs the daemon's loop for both (feed, decide), then the host arbitration over both
 * decisions, then each plan with what the host granted; the grant goes back to the core
 * (rs_guest_set_grant()) the way guest_finish_cycle() does it, so the next feed judges the
 * size that grant produced.
 *
 * The arbiter splits the host evenly (576 MiB each) while the estimates are unknown: guest b
 * storms below its set and asks for its max, which the host never grants; guest a finds its
 * set and backs off to it plus a margin the host does not grant either. Neither may wait
 * for what it asked for: b goes on from the share it got (clean there once a has probed
 * down and left it room), a holds at its share, and both end up holding with an estimate.
 * Without the grant, b stays in EMERGENCY and a in BACKOFF for good. */
#define PAIR_BUDGET (1152 * MIB)
#define PAIR_RESERVE (256 * MIB)
#define PAIR_TICKS 360

typedef struct Pair {
        Actuated a[2];
        unsigned max_waiting_run[2];   /* longest stretch of intervals in EMERGENCY, BACKOFF or GROW */
        unsigned waiting_run[2];
        bool over_budget;              /* the granted targets ever summed above the budget */
        uint64_t granted[2];
} Pair;

static void pair_config(GuestModelConfig *cfg, uint64_t seed, bool mixed) {
        guest_model_config_default(cfg, seed);
        cfg->boot_bytes = 1 * GIB;
        cfg->swap_bytes = 512 * MIB;
        cfg->pass_sec = 2; /* the bench's workloads pass over their sets every second or two */
        if (mixed) {
                cfg->agent = true;
                cfg->phases[0].anon_hot = 248 * MIB;
                cfg->phases[0].file_hot = 248 * MIB;
                cfg->phases[0].anon_cold = 50 * MIB;
                cfg->phases[0].file_cold = 100 * MIB;
        } else {
                cfg->phases[0].anon_hot = 400 * MIB;
                cfg->phases[0].file_cold = 100 * MIB;
        }
}

static void pair_tick(Pair *p) {
        RsArbiterGuest in[2];
        uint64_t out[2];

        for (size_t i = 0; i < 2; i++) {
                Actuated *a = &p->a[i];
                actuated_decide(a);
                /* as manager_arbitrate() describes a guest */
                in[i] = (RsArbiterGuest) {
                        .want = a->d.target,
                        .estimate = a->d.estimate,
                        .floor = a->d.floor,
                        .max = a->d.max,
                        .shares = a->policy.shares,
                        .mode = a->policy.mode,
                };
        }
        /* The host's memory as the daemon sees it: available plus what the guests hold. */
        RsArbiterHost host = { .guest_memory = PAIR_BUDGET + PAIR_RESERVE, .reserve = PAIR_RESERVE };
        ck_assert_int_ge(rs_arbitrate(&host, in, 2, out), 0);
        if (out[0] + out[1] > PAIR_BUDGET)
                p->over_budget = true;

        for (size_t i = 0; i < 2; i++) {
                Actuated *a = &p->a[i];
                p->granted[i] = out[i];
                rs_guest_set_grant(a->g, out[i] < a->d.target ? out[i] : RS_UNKNOWN);
                actuated_apply(a, out[i]);
                bool waiting = a->d.state == RS_STATE_EMERGENCY || a->d.state == RS_STATE_BACKOFF ||
                               a->d.state == RS_STATE_GROW;
                p->waiting_run[i] = waiting ? p->waiting_run[i] + 1 : 0;
                p->max_waiting_run[i] = MAX(p->max_waiting_run[i], p->waiting_run[i]);
        }
}

START_TEST(test_two_guests_on_a_small_host) {
        GuestModelConfig cfg[2];
        RsPolicy policy;
        Pair p = {};

        rs_policy_init(&policy);
        pair_config(&cfg[0], 11, false);
        pair_config(&cfg[1], 12, true);
        for (size_t i = 0; i < 2; i++)
                actuated_init(&p.a[i], &cfg[i], &policy);
        /* the premise: the sets fit the budget, the sets with margins do not */
        uint64_t ws0 = guest_model_working_set(&p.a[0].m), ws1 = guest_model_working_set(&p.a[1].m);
        ck_assert_uint_le(ws0 + ws1, PAIR_BUDGET);
        ck_assert_uint_gt((ws0 + ws1) * (100 + (uint64_t) policy.margin_percent) / 100, PAIR_BUDGET);

        while (p.a[0].m.tick < PAIR_TICKS)
                pair_tick(&p);

        for (size_t i = 0; i < 2; i++) {
                const Actuated *a = &p.a[i];
                printf("small host, guest %zu: ws=%.0f MiB estimate=%.0f MiB, %s, granted %.0f MiB (wants %.0f), "
                       "actual %.0f MiB, emergencies=%u, longest wait %u intervals, hot refaults %.0f/s: %s\n",
                       i, (double) guest_model_working_set(&a->m) / MIB,
                       rs_known(a->d.estimate) ? (double) a->d.estimate / MIB : -1.0, rs_state_to_string(a->d.state),
                       (double) p.granted[i] / MIB, (double) a->d.target / MIB, (double) guest_model_actual(&a->m) / MIB,
                       a->emergencies, p.max_waiting_run[i], guest_model_hot_refault_rate(&a->m), a->d.reason);
        }
        ck_assert_msg(!p.over_budget, "the arbiter granted more than the budget");
        /* This pair once went through an emergency on the short host; since storms scale with
         * the set and re-probes back off on the first bad sample (issue 13) it need not. An
         * emergency held short by the host is covered in test-estimator.c
         * (test_emergency_capped_*); here at most one, and none left at the end. */
        ck_assert_uint_le(p.a[1].emergencies, 1);
        for (size_t i = 0; i < 2; i++) {
                const Actuated *a = &p.a[i];
                /* growing states end within minutes, at what the host gives */
                ck_assert_msg(p.max_waiting_run[i] <= 30, "guest %zu waited %u intervals", i, p.max_waiting_run[i]);
                ck_assert_msg(a->d.state != RS_STATE_EMERGENCY, "guest %zu still in emergency: %s", i, a->d.reason);
                ck_assert_msg(rs_known(a->d.estimate), "guest %zu has no estimate: %s", i, a->d.reason);
                ck_assert_msg(actuated_error(a) <= TOLERANCE, "guest %zu: estimate %.1f%% off", i, 100 * actuated_error(a));
                ck_assert_uint_eq(a->m.oom_kills, 0);
        }
        /* Both run at what they were granted: the balloons reached their targets, so the host
         * really holds no more than the budget. */
        ck_assert_uint_le(guest_model_actual(&p.a[0].m) + guest_model_actual(&p.a[1].m),
                          PAIR_BUDGET + 2 * policy.dead_band_bytes);
        for (size_t i = 0; i < 2; i++)
                rs_guest_free(p.a[i].g);
}
END_TEST

/* ---- The cost of estimating (issue 13), with real-like sweeps: every hot page touched
 * twice a second, so 8 MiB below the knee is a storm (~6000 pages/s). Through the daemon's
 * actuation plan (cap, dead-band; a probe's fine step is exempt from it). The contract:
 *   - a re-probe starts from the estimate with the old bounds, takes fine steps (<= 2 MiB)
 *     near them, backs off on its first refaulting sample, and spends at most one interval
 *     below the last clean size: at most 3 MiB of the hot sets evicted (2 MiB step + 1 MiB
 *     of balloon rounding; the model does not round), in at most one interval per cycle
 *     (the model's balloon deflates within the interval it is asked to);
 *   - the first descent does not know the knee: at most one probe-step-max (10 % of the
 *     set) evicted, in at most 2 intervals;
 *   - no emergency where the set does not change. */
#define FAST_PASS_SEC 0.5
#define REPROBE_DEFICIT_MAX (3 * MIB)
/* By construction a re-probe spends one interval a fine step below its last clean size; that
 * size may itself sit inside the band the refault threshold cannot see (a fraction of a MiB
 * below the set), which is a second interval with a (small) deficit. */
#define REPROBE_DEFICIT_TICKS_MAX 2
#define FIRST_DEFICIT_TICKS_MAX 2

static void run_fast(ScenarioKind k, uint64_t seed, bool randomize, unsigned ticks, GuestModelConfig *cfg,
                     ScenarioSpec *spec, ScenarioResult *r) {
        RsPolicy p;
        ScenarioOptions o = { .actuate = true };
        rs_policy_init(&p);
        scenario_config(k, seed, randomize, cfg, spec);
        cfg->pass_sec = FAST_PASS_SEC;
        ck_assert_int_eq(scenario_run_opts(cfg, &p, ticks ? ticks : spec->ticks, TOLERANCE, &o, NULL, NULL, r), 0);
}

static const ScenarioKind steady_kinds[] = {
        SCENARIO_STEADY_ANON, SCENARIO_FILE_BALLOON, SCENARIO_FILE_AGENT, SCENARIO_MIXED,
        SCENARIO_STREAMING, SCENARIO_LIAR, SCENARIO_HIDING,
};

START_TEST(test_probe_cost_per_cycle) {
        ScenarioKind k = steady_kinds[_i];
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                GuestModelConfig cfg;
                ScenarioSpec spec;
                ScenarioResult r;
                /* 300 intervals: the first descent and at least one re-probe */
                run_fast(k, seed, false, 300, &cfg, &spec, &r);
                const ScenarioMeter *mt = &r.meter;
                printf("cost %-14s seed %llu: first descent %.1f MiB evicted (%.1f%% of the set) in %u intervals, "
                       "%.2f s extra; %u re-probes: worst %.2f MiB evicted, %u intervals, %.0f pages refaulted; "
                       "%u emergencies; amortized slowdown %.3f%%\n",
                       spec.name, (unsigned long long) seed, mt->first_max_deficit / MIB,
                       100 * mt->first_max_deficit / (double) r.final_ws, mt->first_deficit_ticks, mt->first_extra_sec,
                       r.reprobes, r.worst_reprobe_deficit / MIB, r.worst_reprobe_deficit_ticks, r.worst_reprobe_refaults,
                       r.emergencies, 100 * r.slowdown);
                if (r.emergencies > 0 || r.worst_reprobe_deficit > REPROBE_DEFICIT_MAX)
                        scenario_meter_print(mt, "   ");
                ck_assert_msg(r.emergencies == 0, "%s seed %llu: %u emergencies with a steady set", spec.name,
                              (unsigned long long) seed, r.emergencies);
                ck_assert_msg(mt->first_hold_tick > 0, "%s seed %llu: the first descent never ended", spec.name,
                              (unsigned long long) seed);
                ck_assert_msg(mt->first_max_deficit <= 0.10 * (double) r.final_ws,
                              "%s seed %llu: first descent evicted %.1f MiB > 10 %% of the %.0f MiB set", spec.name,
                              (unsigned long long) seed, mt->first_max_deficit / MIB, (double) r.final_ws / MIB);
                ck_assert_msg(mt->first_deficit_ticks <= FIRST_DEFICIT_TICKS_MAX,
                              "%s seed %llu: first descent ran %u intervals with a deficit", spec.name,
                              (unsigned long long) seed, mt->first_deficit_ticks);
                ck_assert_msg(r.reprobes >= 1, "%s seed %llu: no re-probe in 300 intervals", spec.name,
                              (unsigned long long) seed);
                ck_assert_msg(r.worst_reprobe_deficit <= REPROBE_DEFICIT_MAX,
                              "%s seed %llu: a re-probe evicted %.2f MiB > 3 MiB", spec.name, (unsigned long long) seed,
                              r.worst_reprobe_deficit / MIB);
                /* The hiding guest's only signal is the host's disk reads, whose threshold is
                 * 8x the refault noise floor: it may sit a fraction of a MiB below its set for a
                 * few intervals unseen (its evictions stay within the 3 MiB bound above). */
                ck_assert_msg(r.worst_reprobe_deficit_ticks <= REPROBE_DEFICIT_TICKS_MAX + (k == SCENARIO_HIDING ? 2 : 0),
                              "%s seed %llu: a re-probe ran %u intervals with a deficit", spec.name,
                              (unsigned long long) seed, r.worst_reprobe_deficit_ticks);
        }
}
END_TEST

/* hold-time doubles each time a re-probe confirms the estimate (600 -> 1200 -> 2400 s ...,
 * up to 4 h): a steady guest at the balanced preset is probed at most twice in its second
 * hour, and at most 6 times (the first descent included) in 6 hours. */
START_TEST(test_probes_per_hour_steady) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                GuestModelConfig cfg;
                ScenarioSpec spec;
                ScenarioResult r;
                run_fast(SCENARIO_STEADY_ANON, seed, false, 6 * 360, &cfg, &spec, &r);
                unsigned h2 = scenario_meter_cycles_between(&r.meter, 360, 720);
                printf("steady-anon seed %llu, 6 h: %u probe cycles (%u in the second hour, %u after convergence), "
                       "%u emergencies, slowdown %.3f%%\n",
                       (unsigned long long) seed, r.probe_cycles, h2, r.probe_cycles_after_convergence, r.emergencies,
                       100 * r.slowdown);
                ck_assert_msg(h2 <= 2, "seed %llu: %u probes in the second hour", (unsigned long long) seed, h2);
                ck_assert_msg(r.probe_cycles <= 6, "seed %llu: %u probes in 6 hours", (unsigned long long) seed,
                              r.probe_cycles);
                ck_assert_uint_eq(r.emergencies, 0);
        }
}
END_TEST

/* Issue 13's bar: the amortized slowdown (extra workload seconds / run seconds) of the
 * steady anonymous guest with a real-like sweep, from the end of the first descent over
 * 2 h at the balanced defaults, is at most 1 %. */
START_TEST(test_amortized_slowdown_steady_anon) {
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                GuestModelConfig cfg;
                ScenarioSpec spec;
                ScenarioResult r;
                run_fast(SCENARIO_STEADY_ANON, seed, false, 80 + 720, &cfg, &spec, &r);
                double window = r.meter.sim_sec_after_first_hold;
                printf("steady-anon seed %llu: first descent ended at %u; over the %.0f s after it, %.1f s extra: "
                       "amortized slowdown %.3f%% (whole run %.3f%%, %.0f pages refaulted, %.0f swapped in)\n",
                       (unsigned long long) seed, r.meter.first_hold_tick, window, r.meter.extra_sec_after_first_hold,
                       100 * r.slowdown_after_first_hold, 100 * r.slowdown, r.refaults, r.swapins);
                ck_assert_msg(r.meter.first_hold_tick > 0 && window >= 7200.0, "seed %llu: first hold at %u",
                              (unsigned long long) seed, r.meter.first_hold_tick);
                ck_assert_msg(r.slowdown_after_first_hold <= 0.01, "seed %llu: amortized slowdown %.3f%% > 1%%",
                              (unsigned long long) seed, 100 * r.slowdown_after_first_hold);
        }
}
END_TEST

/* What the model once missed (issue 13): 38718a0 measured +11.5 % on a real guest's
 * doubling workload, with 1 s intervals and a 30 s hold, while every model run passed. The
 * pages evicted by a squeeze come back when the workload touches them, at the device's
 * pace, in the intervals right after backing off: that is recovery, not growth. With the
 * accelerated bench's settings, a guest whose set never changes is never grown from
 * BACKOFF, and its estimate never goes 5 % above the set once it first held. (38718a0's
 * core against this model: +22 % on mixed, +28 % on file-balloon, ~50 grows per 5 seeds.) */
typedef struct RecoveryWatch {
        RsState prev;
        unsigned backoff_to_grow;
        bool held;
        double worst_over;
} RecoveryWatch;

static bool recovery_watch(const GuestModel *m, const RsGuest *g _unused_, const RsDecision *d, void *userdata) {
        RecoveryWatch *w = userdata;
        if (w->prev == RS_STATE_BACKOFF && d->state == RS_STATE_GROW)
                w->backoff_to_grow++;
        w->prev = d->state;
        if (d->state == RS_STATE_HOLD)
                w->held = true;
        if (w->held && rs_known(d->estimate)) {
                double ws = (double) guest_model_working_set(m);
                w->worst_over = MAX(w->worst_over, ((double) d->estimate - ws) / ws);
        }
        return true;
}

START_TEST(test_recovery_is_not_growth) {
        /* Not the hiding guest: its stats show nothing, and the host's disk reads of a guest
         * reading back what it lost look like those of a set that grew. It goes to GROW once
         * in a while after a backoff (a known limit: issue 13's notes). A pass of 40 s is a
         * database's pace (tests/bench/bench-pgbench: each page about once a minute): what a
         * squeeze took comes back for that long, into the room the deflation freed (cold
         * cache fills it slowly: 1 MiB/s), at any size the guest is given. */
        static const ScenarioKind kinds[] = {
                SCENARIO_STEADY_ANON, SCENARIO_FILE_BALLOON, SCENARIO_FILE_AGENT, SCENARIO_MIXED,
        };
        static const double passes[] = { 10, 2, FAST_PASS_SEC, 40 };
        ScenarioKind k = kinds[_i];
        for (size_t pi = 0; pi < ARRAY_SIZE(passes); pi++)
                for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                        GuestModelConfig cfg;
                        ScenarioSpec spec;
                        ScenarioResult r;
                        RsPolicy p;
                        RecoveryWatch w = { .prev = _RS_STATE_MAX };
                        rs_policy_init(&p);
                        p.poll_interval_usec = 1 * USEC_PER_SEC;
                        p.hold_usec = 30 * USEC_PER_SEC;
                        scenario_config(k, seed, false, &cfg, &spec);
                        cfg.interval_usec = 1 * USEC_PER_SEC;
                        cfg.pass_sec = passes[pi];
                        cfg.cold_refill_bytes_per_sec = 1 * MIB;
                        ck_assert_int_eq(scenario_run(&cfg, &p, 600, TOLERANCE, recovery_watch, &w, &r), 0);
                        if (seed == 1 || w.backoff_to_grow > 0 || w.worst_over > 0.05)
                                printf("1 s / 30 s %-14s pass %4.1f s seed %llu: %u grows from BACKOFF, estimate at "
                                       "most %+.1f%% of the set, %u emergencies\n",
                                       spec.name, passes[pi], (unsigned long long) seed, w.backoff_to_grow,
                                       100 * w.worst_over, r.emergencies);
                        ck_assert_msg(w.backoff_to_grow == 0, "%s pass %.1f s seed %llu: recovery taken for growth %u times",
                                      spec.name, passes[pi], (unsigned long long) seed, w.backoff_to_grow);
                        ck_assert_msg(w.worst_over <= 0.05, "%s pass %.1f s seed %llu: estimate %+.1f%% of the set",
                                      spec.name, passes[pi], (unsigned long long) seed, 100 * w.worst_over);
                }
}
END_TEST

/* A balloon that inflates slower than the probe steps (a busy vCPU: 40 MiB/s measured on the
 * distro guest under pgbench, TCG) is a balloon still on its way, not one the guest pushes
 * back: the estimate must not stop at the first size it was seen at (it once stopped at 975
 * MiB of a 1 GiB guest whose set was 700 MiB, tests/bench/bench-pgbench). */
START_TEST(test_slow_balloon_is_not_pushback) {
        static const ScenarioKind kinds[] = { SCENARIO_STEADY_ANON, SCENARIO_FILE_AGENT, SCENARIO_MIXED };
        ScenarioKind k = kinds[_i];
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                GuestModelConfig cfg;
                ScenarioSpec spec;
                ScenarioResult r;
                RsPolicy p;
                Watch w;
                rs_policy_init(&p);
                p.poll_interval_usec = 1 * USEC_PER_SEC;
                p.hold_usec = 30 * USEC_PER_SEC;
                scenario_config(k, seed, false, &cfg, &spec);
                cfg.interval_usec = 1 * USEC_PER_SEC;
                cfg.pass_sec = FAST_PASS_SEC;
                cfg.inflate_bytes_per_sec = 40.0 * MIB;
                w = (Watch) { .settle = 300, .min_target_ratio = 1e9, .prev = _RS_STATE_MAX };
                ck_assert_int_eq(scenario_run(&cfg, &p, 600, TOLERANCE, watch, &w, &r), 0);
                printf("slow balloon %-12s seed %llu: ws=%4.0f MiB estimate=%4.0f MiB error=%5.2f%%\n", spec.name,
                       (unsigned long long) seed, (double) r.final_ws / MIB,
                       rs_known(r.final_estimate) ? (double) r.final_estimate / MIB : -1.0, 100 * r.final_error);
                ck_assert_msg(r.final_error <= TOLERANCE, "%s seed %llu: estimate %.1f%% off with a slow balloon",
                              spec.name, (unsigned long long) seed, 100 * r.final_error);
                ck_assert_uint_eq(r.oom_kills, 0);
        }
}
END_TEST

/* A database's page cache (tests/bench/bench-pgbench, full mode): revisited every 80-400 s
 * and given up to the balloon without a fight, so a step below the set refaults only a few
 * pages/s per MiB of deficit, and the rate rises slowly as the probe goes down. A baseline
 * that followed each rise took it in as the guest's normal (2 × baseline + 50/s stays above a
 * rate it follows): re-probed every hold, the estimate walked 6.7 % below the set here and
 * 60 % on the real guest, at 2.2 % of the workload's time. The baseline rises no higher
 * than what the descent's top showed. */
START_TEST(test_database_pace) {
        static const double passes[] = { 80, 200, 400 };
        GuestModelConfig cfg;
        ScenarioSpec spec;
        ScenarioResult r;
        RsPolicy p;
        Watch w = { .settle = 200, .min_target_ratio = 1e9, .prev = _RS_STATE_MAX };
        rs_policy_init(&p);
        p.poll_interval_usec = 1 * USEC_PER_SEC;
        p.hold_usec = 30 * USEC_PER_SEC;
        scenario_config(SCENARIO_FILE_AGENT, _i + 1, false, &cfg, &spec);
        cfg.boot_bytes = 2048 * MIB;
        cfg.phases[0].anon_hot = 60 * MIB;
        cfg.phases[0].file_hot = 1000 * MIB;
        cfg.phases[0].file_cold = 300 * MIB;
        cfg.interval_usec = 1 * USEC_PER_SEC;
        cfg.pass_sec = passes[_i];
        cfg.cold_refill_bytes_per_sec = 1 * MIB;
        cfg.file_no_pushback = true;
        ck_assert_int_eq(scenario_run(&cfg, &p, 2400, TOLERANCE, watch, &w, &r), 0);
        printf("database pass %3.0f s: ws=%4.0f MiB estimate=%4.0f MiB error=%5.2f%%, %u decisions below the set "
               "(%u outside PROBE), %u probe cycles, slowdown %.2f%%\n", passes[_i], (double) r.final_ws / MIB,
               (double) r.final_estimate / MIB, 100 * r.final_error, w.below_ticks, w.below_not_probing, r.probe_cycles,
               100 * r.slowdown);
        ck_assert_msg(r.final_error <= 0.05, "pass %.0f s: estimate %.1f%% off", passes[_i], 100 * r.final_error);
        ck_assert_msg(w.below_not_probing == 0, "pass %.0f s: held below the set %u times", passes[_i], w.below_not_probing);
        ck_assert_msg(r.slowdown <= 0.01, "pass %.0f s: slowdown %.2f%%", passes[_i], 100 * r.slowdown);
        /* Re-probes that confirm the estimate double the hold: 30 s, 60 s, ... (the walk-down
         * re-probed every hold, 43 times). */
        ck_assert_msg(r.probe_cycles <= 10, "pass %.0f s: %u probe cycles", passes[_i], r.probe_cycles);
        ck_assert_uint_eq(r.oom_kills, 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("estimator-scenarios");
        TCase *tc = tcase_create("scenarios");
        check_set_deadline(tc, 60);
        tcase_add_test(tc, test_steady_anon);
        tcase_add_test(tc, test_file_balloon_only);
        tcase_add_test(tc, test_file_agent_more_precise);
        tcase_add_test(tc, test_mixed);
        tcase_add_test(tc, test_doubling);
        tcase_add_test(tc, test_growth_no_swap);
        tcase_add_test(tc, test_hiding_guest);
        tcase_add_test(tc, test_hiding_guest_needs_host_reads);
        tcase_add_test(tc, test_shrinking);
        tcase_add_test(tc, test_streaming_piggin);
        tcase_add_test(tc, test_streaming_late_marginal_effect);
        tcase_add_test(tc, test_idle_ends_at_floor);
        tcase_add_loop_test(tc, test_slow_balloon_is_not_pushback, 0, 3);
        tcase_add_test(tc, test_reboot_no_spike);
        tcase_add_test(tc, test_lying_guest);
        tcase_add_test(tc, test_probe_through_dead_band);
        tcase_add_test(tc, test_swapin_after_emergency_is_not_growth);
        tcase_add_test(tc, test_two_guests_on_a_small_host);
        tcase_add_loop_test(tc, test_probe_cost_per_cycle, 0, ARRAY_SIZE(steady_kinds));
        tcase_add_test(tc, test_probes_per_hour_steady);
        tcase_add_test(tc, test_amortized_slowdown_steady_anon);
        tcase_add_loop_test(tc, test_recovery_is_not_growth, 0, 4);
        tcase_add_loop_test(tc, test_database_pace, 0, 3);
        suite_add_tcase(s, tc);
        return check_run_suite_nofork(s);
}
