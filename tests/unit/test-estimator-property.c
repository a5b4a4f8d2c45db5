/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Every scenario over 200 seeds: random guest sizes (1.5-4 GiB), kernel sizes, hot sets
 * (15-45 % of the guest), cold caches, stream rates and model noise (2-15 %, drawn from the
 * seed by scenario_config()). Every scenario, the doubling, reboot and lying guest too, is
 * held at most at estimate + margin (+ error) once settled: the doubling from 60 intervals
 * after the change, the reboot and the lying guest from 60 intervals on. A streaming guest is
 * known for one and held within the agent's margin: the stream is given nothing. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/macro.h"
#include "tests/model/scenario.h"
#include "tests/lib/check-run.h"

#define SEEDS 200
#define TOLERANCE 0.10

typedef struct Watch {
        unsigned settle;
        double max_target_ratio;
        bool below_floor;
} Watch;

static bool watch(const GuestModel *m, const RsGuest *g, const RsDecision *d, void *userdata) {
        Watch *w = userdata;
        if (d->target < d->floor || d->target > d->max)
                w->below_floor = true;
        if (m->tick >= w->settle)
                w->max_target_ratio = MAX(w->max_target_ratio, (double) d->target / (double) guest_model_working_set(m));
        return true;
}

static unsigned convergence_bound(ScenarioKind k) {
        switch (k) {
        case SCENARIO_SHRINKING:
                /* a hold, then a re-probe that approaches the old estimate in steps of 2 % (a
                 * straight jump there stormed a real guest) before the descent to the new set */
                return 120;
        case SCENARIO_STREAMING_LATE:
                /* 200 seeds: all but one within 50, the worst 59. There the stream's
                 * onset showed first as host reads and closed the bracket of the probe under
                 * way; the growth trial then found the stream, and the re-probe that
                 * corrects the estimate waits for the guest to settle (12 intervals) at the
                 * new baseline: probing again at once, on a real guest paging back in after
                 * it grew (a trial that looks like a stream), walked the estimate 45 % below
                 * the grown set (test-daemon-real-guest, phase 2). */
                return 60;
        default:
                return 50;
        }
}

START_TEST(test_property) {
        ScenarioKind k = (ScenarioKind) _i;
        RsPolicy p;
        double worst_error = 0;
        unsigned worst_conv = 0, emergencies = 0;
        const char *name = NULL;

        rs_policy_init(&p);
        for (uint64_t seed = 1; seed <= SEEDS; seed++) {
                GuestModelConfig cfg;
                ScenarioSpec spec;
                ScenarioResult r;
                scenario_config(k, seed, true, &cfg, &spec);
                name = spec.name;
                Watch w = { .settle = spec.change_tick + (k == SCENARIO_SHRINKING ? 110 : 60) };
                ck_assert_int_eq(scenario_run(&cfg, &p, spec.ticks, TOLERANCE, watch, &w, &r), 0);

                ck_assert_msg(!w.below_floor, "%s seed %llu: target outside [floor, max]", name, (unsigned long long) seed);
                ck_assert_msg(r.oom_kills == 0, "%s seed %llu: OOM", name, (unsigned long long) seed);
                /* emergencies: at most one where the set doubles at once (a storm at the held
                 * size when the growth is large for the guest), none anywhere else */
                ck_assert_msg(r.emergencies <= (k == SCENARIO_DOUBLING ? 1u : 0u), "%s seed %llu: %u emergencies", name,
                              (unsigned long long) seed, r.emergencies);
                emergencies += r.emergencies;
                if (!spec.has_working_set) {
                        ck_assert_msg(r.final_target == r.floor, "%s seed %llu: idle guest not at floor", name,
                                      (unsigned long long) seed);
                        continue;
                }
                unsigned conv = r.converged_at > spec.change_tick ? r.converged_at - spec.change_tick : r.converged_at;
                ck_assert_msg(r.final_error <= TOLERANCE, "%s seed %llu: error %.1f%%", name, (unsigned long long) seed,
                              100 * r.final_error);
                ck_assert_msg(r.converged_at > 0 && conv <= convergence_bound(k), "%s seed %llu: converged after %u", name,
                              (unsigned long long) seed, conv);
                /* settled: at most estimate + margin (15 % on the balloon tier) + error */
                ck_assert_msg(w.max_target_ratio <= 1.25, "%s seed %llu: target %.2f x working set", name,
                              (unsigned long long) seed, w.max_target_ratio);
                if (k == SCENARIO_STREAMING || k == SCENARIO_STREAMING_LATE) {
                        /* The stream is known for one, and it is given nothing: these guests have the
                         * agent, whose margin is 10 %, so the hot set + margin + 2 % of error bounds them
                         * where 1.25 above leaves room for the balloon tier's 15 %. */
                        ck_assert_msg(r.streaming, "%s seed %llu: the stream was not recognized", name,
                                      (unsigned long long) seed);
                        ck_assert_msg(w.max_target_ratio <= 1.12, "%s seed %llu: streaming guest granted %.2f x its hot set",
                                      name, (unsigned long long) seed, w.max_target_ratio);
                }
                worst_error = MAX(worst_error, r.final_error);
                worst_conv = MAX(worst_conv, conv);
        }
        printf("%-16s %d seeds: worst error %.2f%%, worst convergence %u intervals, %u emergencies\n", name, SEEDS,
               100 * worst_error, worst_conv, emergencies);
}
END_TEST

int main(void) {
        Suite *s = suite_create("estimator-property");
        TCase *tc = tcase_create("seeds");
        check_set_deadline(tc, 600);
        tcase_add_loop_test(tc, test_property, 0, _SCENARIO_MAX);
        suite_add_tcase(s, tc);
        return check_run_suite_nofork(s);
}
