/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>

#include "common/macro.h"
#include "policies/hugepage-repair.h"
#include "policies/rs-value.h"
#include "tests/lib/check-run.h"

#define S(x) ((uint64_t) (x) * USEC_PER_SEC)

/* Feeds `size` every second from `from` to `to` seconds; the second a pass was due, or -1. */
static int feed(RsHugepageRepair *r, uint64_t size, int from, int to) {
        int due = -1;
        for (int t = from; t <= to; t++)
                if (rs_hugepage_repair_sample(r, size, S(t)) && due < 0)
                        due = t;
        return due;
}

START_TEST(test_due_after_the_balloon_went_down_and_settled) {
        RsHugepageRepair r;
        rs_hugepage_repair_init(&r);
        ck_assert_int_eq(feed(&r, GIB, 0, 100), -1); /* never moved: nothing split */
        /* a descent, a step a second, then held */
        for (int t = 101; t <= 110; t++)
                ck_assert(!rs_hugepage_repair_sample(&r, GIB - (uint64_t) (t - 100) * 16 * MIB, S(t)));
        ck_assert_int_eq(feed(&r, GIB - 160 * MIB, 111, 200), 110 + 30);
        ck_assert_int_eq(feed(&r, GIB - 160 * MIB, 201, 400), -1); /* once */
}
END_TEST

START_TEST(test_growth_alone_is_no_reason) {
        RsHugepageRepair r;
        rs_hugepage_repair_init(&r);
        ck_assert_int_eq(feed(&r, GIB / 2, 0, 10), -1);
        ck_assert_int_eq(feed(&r, GIB, 11, 200), -1); /* deflating splits nothing */
}
END_TEST

START_TEST(test_wobble_within_tolerance_settles) {
        RsHugepageRepair r;
        rs_hugepage_repair_init(&r);
        ck_assert_int_eq(feed(&r, GIB, 0, 5), -1);
        ck_assert(!rs_hugepage_repair_sample(&r, GIB - 64 * MIB, S(6)));
        int due = -1;
        for (int t = 7; t <= 100 && due < 0; t++)
                if (rs_hugepage_repair_sample(&r, GIB - 64 * MIB + (t % 2 ? 512 * KIB : 0), S(t)))
                        due = t;
        ck_assert_int_eq(due, 6 + 30);
}
END_TEST

START_TEST(test_a_moving_balloon_waits_and_passes_keep_their_gap) {
        RsHugepageRepair r;
        rs_hugepage_repair_init(&r);
        ck_assert_int_eq(feed(&r, GIB, 0, 5), -1);
        /* re-probes every 20 s: the size never stays put for 30 s, so no pass */
        for (int t = 6; t < 200; t++)
                ck_assert(!rs_hugepage_repair_sample(&r, GIB - ((t / 20) % 2 ? 32 : 16) * MIB, S(t)));
        /* held: due 30 s after the last move */
        int due = feed(&r, GIB - 16 * MIB, 200, 300);
        ck_assert_int_ge(due, 200);
        ck_assert_int_le(due, 230);
        /* down again right after: settled 30 s later, but the gap from the last pass is 60 s */
        ck_assert(!rs_hugepage_repair_sample(&r, GIB - 48 * MIB, S(due + 1)));
        ck_assert_int_eq(feed(&r, GIB - 48 * MIB, due + 2, due + 200), due + 60);
}
END_TEST

START_TEST(test_unknown_sizes_are_ignored) {
        RsHugepageRepair r;
        rs_hugepage_repair_init(&r);
        ck_assert_int_eq(feed(&r, GIB, 0, 5), -1);
        ck_assert(!rs_hugepage_repair_sample(&r, RS_UNKNOWN, S(6)));
        ck_assert(!rs_hugepage_repair_sample(&r, GIB / 2, S(7)));
        ck_assert(!rs_hugepage_repair_sample(&r, RS_UNKNOWN, S(20)));
        ck_assert_int_eq(feed(&r, GIB / 2, 21, 100), 37);
}
END_TEST

START_TEST(test_range_worth) {
        ck_assert(rs_hugepage_range_worth(512, 97));
        ck_assert(rs_hugepage_range_worth(497, 97)); /* 97.07 % */
        ck_assert(!rs_hugepage_range_worth(496, 97));
        ck_assert(!rs_hugepage_range_worth(512, 0)); /* off */
        ck_assert(!rs_hugepage_range_worth(0, 50));  /* nothing there to give a huge page */
        ck_assert(rs_hugepage_range_worth(256, 50));
        ck_assert(!rs_hugepage_range_worth(255, 50));
}
END_TEST

int main(void) {
        return check_run_case("hugepage-repair", "hugepage-repair", NULL, NULL, 0,
                              CHECK_TESTS(test_due_after_the_balloon_went_down_and_settled, test_growth_alone_is_no_reason,
                                          test_wobble_within_tolerance_settles,
                                          test_a_moving_balloon_waits_and_passes_keep_their_gap,
                                          test_unknown_sizes_are_ignored, test_range_worth));
}
