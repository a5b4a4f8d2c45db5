/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <math.h>
#include <stdlib.h>

#include "common/macro.h"
#include "policies/signals.h"
#include "tests/lib/check-run.h"

#define SEC USEC_PER_SEC

static void feed(RsRateTracker *t, uint64_t majflt, uint64_t swapin, uint64_t refault, uint64_t now, RsRates *r) {
        RsSample s;
        rs_sample_init(&s);
        s.counter[RS_COUNTER_MAJOR_FAULTS] = majflt;
        s.counter[RS_COUNTER_SWAP_IN] = swapin;
        s.counter[RS_COUNTER_REFAULT_FILE] = refault;
        rs_rate_tracker_feed(t, &s, now, r);
}

START_TEST(test_first_sample_has_no_rates) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, 100, 4096, 7, 10 * SEC, &r);
        ck_assert_int_eq(r.event, RS_RATE_FIRST);
        for (int i = 0; i < _RS_COUNTER_MAX; i++)
                ck_assert(!r.known[i]);
}
END_TEST

START_TEST(test_rates_per_second) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, 100, 0, 1000, 10 * SEC, &r);
        feed(&t, 600, 40960, 1500, 20 * SEC, &r);
        ck_assert_int_eq(r.event, RS_RATE_NONE);
        ck_assert(r.known[RS_COUNTER_MAJOR_FAULTS]);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_MAJOR_FAULTS], 50.0, 1e-9);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_SWAP_IN], 4096.0, 1e-9);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_REFAULT_FILE], 50.0, 1e-9);
        ck_assert(!r.known[RS_COUNTER_PSWPIN]); /* never reported */
        ck_assert_double_eq_tol(r.interval_sec, 10.0, 1e-9);
}
END_TEST

START_TEST(test_unknown_counter_is_not_zero) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, 100, RS_UNKNOWN, 5, 10 * SEC, &r);
        feed(&t, 200, 8192, 10, 20 * SEC, &r);
        ck_assert(!r.known[RS_COUNTER_SWAP_IN]); /* unknown before: no rate yet */
        feed(&t, 300, 16384, 15, 30 * SEC, &r);
        ck_assert(r.known[RS_COUNTER_SWAP_IN]);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_SWAP_IN], 819.2, 1e-9);
}
END_TEST

START_TEST(test_reboot_detected) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, 100000, 1 << 30, 500000, 10 * SEC, &r);
        feed(&t, 100100, (1 << 30) + 4096, 500100, 20 * SEC, &r);
        feed(&t, 3, 0, 12, 30 * SEC, &r);
        ck_assert_int_eq(r.event, RS_RATE_REBOOT);
        for (int i = 0; i < _RS_COUNTER_MAX; i++)
                ck_assert(!r.known[i]);
        ck_assert_uint_eq(t.n_reboots, 1);
        /* the next interval measures from the new, small values */
        feed(&t, 103, 4096, 22, 40 * SEC, &r);
        ck_assert_int_eq(r.event, RS_RATE_NONE);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_MAJOR_FAULTS], 10.0, 1e-9);
}
END_TEST

/* QEMU's disk counters go on through a guest reboot: they do not outvote the guest's own
 * counters going back to 0 together, and their rates go on. */
START_TEST(test_reboot_detected_beside_host_counters) {
        RsRateTracker t;
        RsRates r;
        RsSample s;
        rs_rate_tracker_init(&t);
        for (int i = 0; i < 3; i++) {
                rs_sample_init(&s);
                bool rebooted = i == 2;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = rebooted ? 3 : 100000 + 100 * (uint64_t) i;
                s.counter[RS_COUNTER_SWAP_IN] = rebooted ? 0 : (1 << 30) + 4096 * (uint64_t) i;
                s.counter[RS_COUNTER_HOST_DISK_READ] = (1ull << 32) + (uint64_t) i * (1 << 20);
                s.counter[RS_COUNTER_HOST_DISK_READ_OPS] = 50000 + (uint64_t) i * 1000;
                s.counter[RS_COUNTER_HOST_DISK_READ_TIME] = 5000000000ull + (uint64_t) i * 100000000;
                rs_rate_tracker_feed(&t, &s, (uint64_t) (i + 1) * 10 * SEC, &r);
        }
        ck_assert_int_eq(r.event, RS_RATE_REBOOT);
        ck_assert_uint_eq(t.n_reboots, 1);
        ck_assert(rs_counter_is_host(RS_COUNTER_HOST_DISK_READ_TIME));
        ck_assert(!rs_counter_is_host(RS_COUNTER_PSI_FULL_TOTAL));
}
END_TEST

START_TEST(test_single_counter_backwards_no_negative_no_spike) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, 1000000, 4096, 100, 10 * SEC, &r);
        feed(&t, 1000100, 4096, 200, 20 * SEC, &r);
        /* a lie: majflt halves once, then comes back */
        feed(&t, 500000, 4096, 300, 30 * SEC, &r);
        ck_assert_int_eq(r.event, RS_RATE_NONE);
        ck_assert(!r.known[RS_COUNTER_MAJOR_FAULTS]);
        ck_assert_uint_eq(r.n_resets, 1);
        ck_assert(r.known[RS_COUNTER_REFAULT_FILE]);
        feed(&t, 1000300, 4096, 400, 40 * SEC, &r);
        ck_assert(r.known[RS_COUNTER_MAJOR_FAULTS]);
        /* measured from the last believable value over two intervals: 200/20 s */
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_MAJOR_FAULTS], 10.0, 1e-9);
}
END_TEST

START_TEST(test_single_counter_real_reset_accepted) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, 1000000, 4096, 100, 10 * SEC, &r);
        feed(&t, 10, 4096, 200, 20 * SEC, &r);
        ck_assert(!r.known[RS_COUNTER_MAJOR_FAULTS]);
        feed(&t, 20, 4096, 300, 30 * SEC, &r);
        ck_assert(!r.known[RS_COUNTER_MAJOR_FAULTS]); /* second sample below: now believed */
        feed(&t, 120, 4096, 400, 40 * SEC, &r);
        ck_assert(r.known[RS_COUNTER_MAJOR_FAULTS]);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_MAJOR_FAULTS], 10.0, 1e-9);
}
END_TEST

START_TEST(test_wrap32) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, UINT32_MAX - 99, 0, 0, 10 * SEC, &r);
        feed(&t, 100, 0, 0, 20 * SEC, &r);
        ck_assert(r.known[RS_COUNTER_MAJOR_FAULTS]);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_MAJOR_FAULTS], 20.0, 1e-9);
}
END_TEST

START_TEST(test_absurd_jump_dropped) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, 1000, 0, 0, 10 * SEC, &r);
        feed(&t, 1000 + (UINT64_C(1) << 50), 0, 0, 20 * SEC, &r);
        ck_assert(!r.known[RS_COUNTER_MAJOR_FAULTS]);
        ck_assert_uint_eq(r.n_dropped, 1);
        feed(&t, 1300, 0, 0, 30 * SEC, &r);
        ck_assert(r.known[RS_COUNTER_MAJOR_FAULTS]);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_MAJOR_FAULTS], 15.0, 1e-9);
}
END_TEST

START_TEST(test_time_not_advancing) {
        RsRateTracker t;
        RsRates r;
        rs_rate_tracker_init(&t);
        feed(&t, 1000, 0, 0, 10 * SEC, &r);
        feed(&t, 2000, 0, 0, 10 * SEC, &r);
        ck_assert_int_eq(r.event, RS_RATE_TIME_SKEW);
        feed(&t, 2000, 0, 0, 5 * SEC, &r);
        ck_assert_int_eq(r.event, RS_RATE_TIME_SKEW);
        feed(&t, 3000, 0, 0, 20 * SEC, &r);
        ck_assert_int_eq(r.event, RS_RATE_NONE);
        ck_assert_double_eq_tol(r.per_sec[RS_COUNTER_MAJOR_FAULTS], 200.0, 1e-9);
}
END_TEST

START_TEST(test_random_counters_never_negative_or_huge) {
        RsRateTracker t;
        RsRates r;
        uint64_t x = 88172645463325252ULL;
        rs_rate_tracker_init(&t);
        for (int i = 1; i < 5000; i++) {
                RsSample s;
                rs_sample_init(&s);
                for (int c = 0; c < _RS_COUNTER_MAX; c++) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        s.counter[c] = (x % 5 == 0) ? RS_UNKNOWN : x >> (x % 64);
                }
                rs_rate_tracker_feed(&t, &s, (uint64_t) i * SEC, &r);
                for (int c = 0; c < _RS_COUNTER_MAX; c++)
                        if (r.known[c]) {
                                ck_assert(r.per_sec[c] >= 0);
                                ck_assert(r.per_sec[c] <= rs_counter_max_rate(c));
                                ck_assert(isfinite(r.per_sec[c]));
                        }
        }
}
END_TEST

START_TEST(test_sanitize) {
        RsSample s;
        rs_sample_init(&s);
        s.level[RS_LEVEL_TOTAL] = 1 * GIB;
        s.level[RS_LEVEL_FREE] = 2 * GIB;          /* free above total */
        s.level[RS_LEVEL_AVAILABLE] = 500 * MIB;
        s.level[RS_LEVEL_DISK_CACHES] = UINT64_MAX - 1; /* absurd */
        s.level[RS_LEVEL_PSI_SOME_AVG10] = 20000;  /* 200 % */
        s.level[RS_LEVEL_BALLOON_ACTUAL] = 900 * MIB;
        rs_sample_sanitize(&s, 2 * GIB);
        ck_assert(!rs_known(s.level[RS_LEVEL_FREE]));
        ck_assert(!rs_known(s.level[RS_LEVEL_DISK_CACHES]));
        ck_assert(!rs_known(s.level[RS_LEVEL_PSI_SOME_AVG10]));
        ck_assert_uint_eq(s.level[RS_LEVEL_AVAILABLE], 500 * MIB);
        ck_assert_uint_eq(s.level[RS_LEVEL_BALLOON_ACTUAL], 900 * MIB);

        /* A squeezed 1 GiB guest (measured): free above available by the kernel's reserves */
        rs_sample_init(&s);
        s.level[RS_LEVEL_TOTAL] = 1 * GIB;
        s.level[RS_LEVEL_FREE] = 65 * MIB;
        s.level[RS_LEVEL_AVAILABLE] = 0;
        rs_sample_sanitize(&s, 1 * GIB);
        ck_assert_uint_eq(s.level[RS_LEVEL_FREE], 65 * MIB);
        ck_assert_uint_eq(s.level[RS_LEVEL_AVAILABLE], 0);
        /* ...but not by half the guest: one of the two lies */
        s.level[RS_LEVEL_FREE] = 600 * MIB;
        s.level[RS_LEVEL_AVAILABLE] = 10 * MIB;
        rs_sample_sanitize(&s, 1 * GIB);
        ck_assert(!rs_known(s.level[RS_LEVEL_FREE]));
        ck_assert(!rs_known(s.level[RS_LEVEL_AVAILABLE]));

        /* the per-CPU free lists: free memory MemFree leaves out, so the two fit in the whole */
        rs_sample_init(&s);
        s.level[RS_LEVEL_TOTAL] = 1 * GIB;
        s.level[RS_LEVEL_FREE] = 600 * MIB;
        s.level[RS_LEVEL_AVAILABLE] = 500 * MIB;
        s.level[RS_LEVEL_PCP_FREE] = 50 * MIB;
        rs_sample_sanitize(&s, 1 * GIB);
        ck_assert_uint_eq(s.level[RS_LEVEL_PCP_FREE], 50 * MIB);
        s.level[RS_LEVEL_PCP_FREE] = 500 * MIB;
        rs_sample_sanitize(&s, 1 * GIB);
        ck_assert(!rs_known(s.level[RS_LEVEL_PCP_FREE]));
        ck_assert_uint_eq(s.level[RS_LEVEL_FREE], 600 * MIB);
        s.level[RS_LEVEL_PCP_FREE] = 3 * GIB;
        rs_sample_sanitize(&s, 1 * GIB);
        ck_assert(!rs_known(s.level[RS_LEVEL_PCP_FREE]));

        rs_sample_init(&s);
        s.level[RS_LEVEL_TOTAL] = 0;
        s.level[RS_LEVEL_AVAILABLE] = UINT64_C(1) << 62;
        rs_sample_sanitize(&s, 2 * GIB);
        ck_assert(!rs_known(s.level[RS_LEVEL_TOTAL]));
        ck_assert(!rs_known(s.level[RS_LEVEL_AVAILABLE]));
}
END_TEST

/* The zones' watermarks are a set: out of order, zero, or more than the guest, all three go. */
START_TEST(test_sanitize_watermarks) {
        RsSample s;
        rs_sample_init(&s);
        s.level[RS_LEVEL_TOTAL] = GIB;
        s.level[RS_LEVEL_WMARK_MIN] = 44 * MIB;
        s.level[RS_LEVEL_WMARK_LOW] = 58 * MIB;
        s.level[RS_LEVEL_WMARK_HIGH] = 69 * MIB;
        rs_sample_sanitize(&s, 2 * GIB);
        ck_assert_uint_eq(s.level[RS_LEVEL_WMARK_HIGH], 69 * MIB);

        s.level[RS_LEVEL_WMARK_LOW] = 70 * MIB;
        rs_sample_sanitize(&s, 2 * GIB);
        ck_assert(!rs_known(s.level[RS_LEVEL_WMARK_MIN]) && !rs_known(s.level[RS_LEVEL_WMARK_LOW]) &&
                  !rs_known(s.level[RS_LEVEL_WMARK_HIGH]));

        s.level[RS_LEVEL_WMARK_MIN] = s.level[RS_LEVEL_WMARK_LOW] = 0;
        s.level[RS_LEVEL_WMARK_HIGH] = 2 * GIB;
        rs_sample_sanitize(&s, 2 * GIB);
        ck_assert(!rs_known(s.level[RS_LEVEL_WMARK_HIGH]));

        s.level[RS_LEVEL_WMARK_MIN] = s.level[RS_LEVEL_WMARK_LOW] = s.level[RS_LEVEL_WMARK_HIGH] = 0;
        rs_sample_sanitize(&s, 2 * GIB);
        ck_assert(!rs_known(s.level[RS_LEVEL_WMARK_MIN]));
}
END_TEST

START_TEST(test_names) {
        for (int i = 0; i < _RS_COUNTER_MAX; i++)
                ck_assert_ptr_nonnull(rs_counter_name(i));
        for (int i = 0; i < _RS_LEVEL_MAX; i++)
                ck_assert_ptr_nonnull(rs_level_name(i));
        ck_assert_ptr_null(rs_counter_name(_RS_COUNTER_MAX));
        ck_assert(rs_counter_is_agent(RS_COUNTER_REFAULT_FILE));
        ck_assert(!rs_counter_is_agent(RS_COUNTER_MAJOR_FAULTS));
        ck_assert(rs_counter_is_balloon(RS_COUNTER_SWAP_IN));
}
END_TEST

int main(void) {
        return check_run_case("signals", "rates", NULL, NULL, 0,
                              CHECK_TESTS(test_first_sample_has_no_rates, test_rates_per_second,
                                          test_unknown_counter_is_not_zero, test_reboot_detected,
                                          test_reboot_detected_beside_host_counters,
                                          test_single_counter_backwards_no_negative_no_spike,
                                          test_single_counter_real_reset_accepted, test_wrap32,
                                          test_absurd_jump_dropped, test_time_not_advancing,
                                          test_random_counters_never_negative_or_huge, test_sanitize, test_sanitize_watermarks,
                                          test_names));
}
