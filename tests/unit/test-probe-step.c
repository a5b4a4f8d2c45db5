/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* probe-step.c on its own: the size of one probe step, from a guest's bounds and one
 * observation, with no state machine around it. */
#include <check.h>
#include <stdlib.h>

#include "common/macro.h"
#include "policies/estimator-internal.h"
#include "tests/lib/check-run.h"

#define GUEST_MAX (2 * GIB)

static RsGuest *new_guest(uint64_t size) {
        RsPolicy p;
        RsGuest *g = NULL;
        rs_policy_init(&p);
        ck_assert_int_eq(rs_guest_new(&g, &p, GUEST_MAX), 0);
        g->size = size;
        g->last_step = RS_UNKNOWN;
        return g;
}

/* A guest far from pressure: plenty available, no signs. */
static RsObservation calm(uint64_t available) {
        RsObservation o = { 0 };
        o.available = available;
        o.leading_why = "";
        return o;
}

static uint64_t next(RsGuest *g, const RsObservation *o, const char **ret_why) {
        uint64_t step;
        const char *why = NULL;
        uint64_t n = rs_probe_next_size(g, o, &step, &why);
        ck_assert_uint_eq(step, g->size - n);
        if (ret_why)
                *ret_why = why;
        return n;
}

START_TEST(test_far_from_pressure_steps_are_large) {
        RsGuest *g = new_guest(GUEST_MAX);
        RsObservation o = calm(GUEST_MAX);
        const char *why;
        uint64_t n = next(g, &o, &why);
        ck_assert_ptr_null(why);
        /* the policy's largest step (10 %), a quarter of nothing else */
        ck_assert_uint_ge(GUEST_MAX - n, GUEST_MAX / 20);
        ck_assert_uint_le(GUEST_MAX - n, GUEST_MAX / 10 + MIB);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_never_more_than_twice_the_last_step) {
        RsGuest *g = new_guest(GUEST_MAX);
        RsObservation o = calm(GUEST_MAX);
        g->last_step = 4 * MIB; /* a sample that looks far from pressure does not make it lunge */
        ck_assert_uint_eq(next(g, &o, NULL), GUEST_MAX - 8 * MIB);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_available_nearly_gone_takes_a_quarter_of_it) {
        RsGuest *g = new_guest(GIB);
        RsObservation o = calm(24 * MIB);
        o.available_low = true;
        const char *why;
        uint64_t n = next(g, &o, &why);
        ck_assert_str_eq(why, "available memory nearly gone");
        ck_assert_uint_eq(GIB - n, 6 * MIB);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_rising_refaults_mean_fine_steps) {
        RsGuest *g = new_guest(GIB);
        RsObservation o = calm(200 * MIB);
        o.leading = o.rising = true;
        o.leading_why = "refaults rising";
        const char *why;
        uint64_t n = next(g, &o, &why);
        ck_assert_str_eq(why, "refaults rising");
        ck_assert_uint_eq(GIB - n, FINE_STEP);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_knee_of_this_cycle_is_not_stepped_on) {
        RsGuest *g = new_guest(GIB);
        RsObservation o = calm(200 * MIB);
        g->est.lower = GIB - 3 * MIB; /* refaulted there this cycle */
        g->lower_old = false;
        const char *why;
        uint64_t n = next(g, &o, &why);
        ck_assert_str_eq(why, "near the knee");
        ck_assert_uint_eq(n, g->est.lower + FINE_STEP);
        /* one from an earlier cycle is tested: the step may land on it */
        g->lower_old = true;
        ck_assert_uint_eq(next(g, &o, NULL), g->est.lower + MIB);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_reprobe_heads_for_its_check_point_gently) {
        uint64_t est = 500 * MIB;
        RsGuest *g = new_guest(550 * MIB); /* held at the estimate + 10 % */
        g->reprobe = true;
        g->reprobe_from = est;
        g->est.estimate = est;
        g->est.upper = g->size;
        uint64_t check = rs_probe_check_point(g);
        ck_assert_uint_eq(check, est + 2 * resolution(g, est)); /* 2 % above: 510 MiB */

        /* little available (the set is near): at most 2 % of the size a step (senpai's curve
         * may make it smaller), not a jump of 40 MiB */
        RsObservation o = calm(40 * MIB);
        const char *why;
        uint64_t n = next(g, &o, &why);
        ck_assert_str_eq(why, "re-probe approaching the estimate");
        ck_assert_uint_le(g->size - n, 2 * resolution(g, g->size));
        ck_assert_uint_gt(g->size - n, FINE_STEP);
        ck_assert_uint_gt(n, check);

        /* much available (the set shrank): up to a quarter of it, never past the check point */
        o = calm(400 * MIB);
        n = next(g, &o, NULL);
        ck_assert_uint_ge(n, check);
        ck_assert_uint_lt(n, g->size - 2 * resolution(g, g->size));
        g->size = check + 3 * MIB;
        ck_assert_uint_eq(next(g, &o, NULL), check);

        /* at the check point, fine steps towards the estimate */
        g->size = check;
        ck_assert_uint_eq(next(g, &o, &why), check - FINE_STEP);
        ck_assert_str_eq(why, "near the estimate it re-checks");
        rs_guest_free(g);
}
END_TEST

START_TEST(test_bracket_closes_a_fine_step_above_the_knee) {
        RsGuest *g = new_guest(GIB);
        ck_assert(!rs_probe_bracket_closed(g, GIB));
        g->est.lower = GIB - 4 * MIB;
        ck_assert(!rs_probe_bracket_closed(g, GIB));
        ck_assert(rs_probe_bracket_closed(g, GIB - MIB));
        ck_assert(rs_probe_bracket_closed(g, g->est.lower + FINE_STEP + FINE_MIN));
        rs_guest_free(g);
}
END_TEST

int main(void) {
        Suite *s = suite_create("probe-step");
        check_add_case(s, "steps", NULL, NULL, 0,
                       CHECK_TESTS(test_far_from_pressure_steps_are_large, test_never_more_than_twice_the_last_step,
                                   test_available_nearly_gone_takes_a_quarter_of_it,
                                   test_rising_refaults_mean_fine_steps, test_knee_of_this_cycle_is_not_stepped_on,
                                   test_reprobe_heads_for_its_check_point_gently,
                                   test_bracket_closes_a_fine_step_above_the_knee));
        return check_run_suite_nofork(s);
}
