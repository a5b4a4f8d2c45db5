/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* EstimateChanged (daemon/dbus-api.md): when it is due, and that its estimate is never 0 once the
 * guest has had one, also while a probe, a growth or an emergency re-measures a working set that
 * grew past it (the core's estimate is unknown then). */

#include <check.h>

#include "common/macro.h"
#include "daemon/estimate-signal.h"
#include "policies/rs-value.h"
#include "tests/lib/check-run.h"

static RsEstimate est(uint64_t estimate, uint64_t lower, uint64_t upper) {
        return (RsEstimate) { .estimate = estimate, .lower = lower, .upper = upper, .scan_onset = RS_UNKNOWN };
}

static void assert_carries(const EstimateSignal *s, uint64_t estimate, uint64_t lower, uint64_t upper) {
        ck_assert_uint_eq(s->estimate, estimate);
        ck_assert_uint_eq(s->lower, lower);
        ck_assert_uint_eq(s->upper, upper);
}

START_TEST(test_first_estimate) {
        EstimateSignal s;
        RsEstimate e = est(RS_UNKNOWN, RS_UNKNOWN, RS_UNKNOWN);

        estimate_signal_init(&s);
        ck_assert(!estimate_signal_update(&s, &e));
        /* The first probe: bounds before any estimate, which is unknown (sent as 0) only now. */
        e = est(RS_UNKNOWN, RS_UNKNOWN, 1536 * MIB);
        ck_assert(estimate_signal_update(&s, &e));
        assert_carries(&s, RS_UNKNOWN, RS_UNKNOWN, 1536 * MIB);
        e = est(RS_UNKNOWN, 900 * MIB, 1200 * MIB);
        ck_assert(estimate_signal_update(&s, &e));
        assert_carries(&s, RS_UNKNOWN, 900 * MIB, 1200 * MIB);
        /* It ends: the estimate. */
        e = est(1000 * MIB, 900 * MIB, 1000 * MIB);
        ck_assert(estimate_signal_update(&s, &e));
        assert_carries(&s, 1000 * MIB, 900 * MIB, 1000 * MIB);
        ck_assert(!estimate_signal_update(&s, &e));
}
END_TEST

START_TEST(test_one_percent) {
        EstimateSignal s;
        RsEstimate e = est(1000 * MIB, RS_UNKNOWN, RS_UNKNOWN);

        estimate_signal_init(&s);
        ck_assert(estimate_signal_update(&s, &e));
        e.estimate = 1010 * MIB; /* 1 %: not more than 1 % */
        ck_assert(!estimate_signal_update(&s, &e));
        ck_assert_uint_eq(s.estimate, 1000 * MIB);
        e.estimate = 1011 * MIB;
        ck_assert(estimate_signal_update(&s, &e));
        ck_assert_uint_eq(s.estimate, 1011 * MIB);
        e.estimate = 1000 * MIB; /* down by more than 1 % */
        ck_assert(estimate_signal_update(&s, &e));
        ck_assert_uint_eq(s.estimate, 1000 * MIB);
}
END_TEST

START_TEST(test_estimate_lost_while_measuring) {
        EstimateSignal s;
        RsEstimate e = est(1000 * MIB, 900 * MIB, 1000 * MIB);

        estimate_signal_init(&s);
        ck_assert(estimate_signal_update(&s, &e));
        /* A probe starts again: new bounds, the estimate kept by the core. */
        e = est(1000 * MIB, RS_UNKNOWN, 1200 * MIB);
        ck_assert(estimate_signal_update(&s, &e));
        assert_carries(&s, 1000 * MIB, RS_UNKNOWN, 1200 * MIB);
        /* The guest refaults at 1100 MiB: the working set grew, the core's estimate is proven too
         * small and forgotten. The bounds changed, so the signal is due: with the last known
         * estimate, not 0. */
        e = est(RS_UNKNOWN, 1100 * MIB, RS_UNKNOWN);
        ck_assert(estimate_signal_update(&s, &e));
        assert_carries(&s, 1000 * MIB, 1100 * MIB, RS_UNKNOWN);
        /* Nothing else changed: no signal, and still the last known estimate. */
        ck_assert(!estimate_signal_update(&s, &e));
        assert_carries(&s, 1000 * MIB, 1100 * MIB, RS_UNKNOWN);
        /* Growing: a larger refaulting size. */
        e = est(RS_UNKNOWN, 1300 * MIB, RS_UNKNOWN);
        ck_assert(estimate_signal_update(&s, &e));
        assert_carries(&s, 1000 * MIB, 1300 * MIB, RS_UNKNOWN);
        /* Clean at 1400 MiB: the new estimate. */
        e = est(1400 * MIB, 1300 * MIB, 1400 * MIB);
        ck_assert(estimate_signal_update(&s, &e));
        assert_carries(&s, 1400 * MIB, 1300 * MIB, 1400 * MIB);
}
END_TEST

START_TEST(test_estimate_lost_alone) {
        EstimateSignal s;
        RsEstimate e = est(1000 * MIB, 900 * MIB, 1000 * MIB);

        estimate_signal_init(&s);
        ck_assert(estimate_signal_update(&s, &e));
        /* Only the estimate goes (the bounds as they were): nothing to tell. */
        e.estimate = RS_UNKNOWN;
        ck_assert(!estimate_signal_update(&s, &e));
        assert_carries(&s, 1000 * MIB, 900 * MIB, 1000 * MIB);
        /* The same estimate measured again: still nothing. */
        e.estimate = 1000 * MIB;
        ck_assert(!estimate_signal_update(&s, &e));
}
END_TEST

START_TEST(test_last_known_not_last_signalled) {
        EstimateSignal s;
        RsEstimate e = est(1000 * MIB, RS_UNKNOWN, RS_UNKNOWN);

        estimate_signal_init(&s);
        ck_assert(estimate_signal_update(&s, &e));
        /* It moves by less than 1 %: not signalled, but known. */
        e.estimate = 1008 * MIB;
        ck_assert(!estimate_signal_update(&s, &e));
        ck_assert_uint_eq(s.estimate, 1000 * MIB);
        /* Lost, with new bounds: the signal carries the core's last estimate, 1008 MiB. */
        e = est(RS_UNKNOWN, 1050 * MIB, RS_UNKNOWN);
        ck_assert(estimate_signal_update(&s, &e));
        assert_carries(&s, 1008 * MIB, 1050 * MIB, RS_UNKNOWN);
}
END_TEST

int main(void) {
        return check_run_case("daemon-estimate-signal", "estimate-signal", NULL, NULL, 0,
                              CHECK_TESTS(test_first_estimate, test_one_percent, test_estimate_lost_while_measuring,
                                          test_estimate_lost_alone, test_last_known_not_last_signalled));
}
