/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "common/macro.h"
#include "policies/arbiter.h"
#include "policies/rs-value.h"
#include "tests/lib/check-run.h"

static RsArbiterGuest guest(uint64_t want, uint64_t est, uint64_t floor, uint64_t max, uint64_t shares, RsMode mode) {
        return (RsArbiterGuest) { .want = want, .estimate = est, .floor = floor, .max = max, .shares = shares, .mode = mode };
}

static uint64_t sum(const uint64_t *v, size_t n) {
        uint64_t s = 0;
        for (size_t i = 0; i < n; i++)
                s += v[i];
        return s;
}

START_TEST(test_not_short_rightsize_keeps_wish) {
        RsArbiterHost h = { .guest_memory = 16 * GIB, .reserve = 1 * GIB };
        RsArbiterGuest g[] = {
                guest(1100 * MIB, 1000 * MIB, 256 * MIB, 4 * GIB, 1024, RS_MODE_RIGHTSIZE),
                guest(2200 * MIB, 2000 * MIB, 256 * MIB, 4 * GIB, 1024, RS_MODE_RIGHTSIZE),
        };
        uint64_t out[2];
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), RS_ARBITER_FITS);
        ck_assert_uint_eq(out[0], 1100 * MIB);
        ck_assert_uint_eq(out[1], 2200 * MIB);
}
END_TEST

START_TEST(test_not_short_on_host_pressure_gives_back) {
        RsArbiterHost h = { .guest_memory = 16 * GIB, .reserve = 1 * GIB };
        RsArbiterGuest g[] = {
                guest(1100 * MIB, 1000 * MIB, 256 * MIB, 4 * GIB, 1024, RS_MODE_ON_HOST_PRESSURE),
                guest(2200 * MIB, 2000 * MIB, 256 * MIB, 4 * GIB, 1024, RS_MODE_RIGHTSIZE),
        };
        uint64_t out[2];
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), RS_ARBITER_FITS);
        ck_assert_uint_eq(out[0], 4 * GIB);
        ck_assert_uint_eq(out[1], 2200 * MIB);

        /* only part fits: the surplus is shared, within the budget */
        h.guest_memory = 5 * GIB;
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), RS_ARBITER_FITS);
        ck_assert_uint_eq(out[1], 2200 * MIB);
        ck_assert_uint_ge(out[0], 1100 * MIB);
        ck_assert_uint_le(sum(out, 2), 4 * GIB);
        ck_assert_uint_ge(sum(out, 2), 4 * GIB - 2);
}
END_TEST

START_TEST(test_short_squeezes_above_estimate_first) {
        /* wishes 1300 + 2200 = 3500 MiB; estimates 1000 + 2000; budget 3200 */
        RsArbiterHost h = { .guest_memory = 3200 * MIB + 512 * MIB, .reserve = 512 * MIB };
        RsArbiterGuest g[] = {
                guest(1300 * MIB, 1000 * MIB, 256 * MIB, 4 * GIB, 1024, RS_MODE_RIGHTSIZE),
                guest(2200 * MIB, 2000 * MIB, 256 * MIB, 4 * GIB, 8192, RS_MODE_RIGHTSIZE),
        };
        uint64_t out[2];
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), RS_ARBITER_SQUEEZED);
        ck_assert_uint_le(sum(out, 2), 3200 * MIB);
        /* excess 300 and 200 MiB, 300 MiB to take: 180 and 120 */
        ck_assert_uint_eq(out[0], 1120 * MIB);
        ck_assert_uint_eq(out[1], 2080 * MIB);
        ck_assert_uint_ge(out[0], 1000 * MIB);
        ck_assert_uint_ge(out[1], 2000 * MIB);
}
END_TEST

START_TEST(test_short_divides_by_shares_never_below_floor) {
        /* estimates 1000 + 3000 do not fit 2000 */
        RsArbiterHost h = { .guest_memory = 2000 * MIB, .reserve = 0 };
        RsArbiterGuest g[] = {
                guest(1100 * MIB, 1000 * MIB, 400 * MIB, 4 * GIB, 1000, RS_MODE_RIGHTSIZE),
                guest(3300 * MIB, 3000 * MIB, 256 * MIB, 4 * GIB, 3000, RS_MODE_RIGHTSIZE),
        };
        uint64_t out[2];
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), RS_ARBITER_SHARED);
        ck_assert_uint_le(sum(out, 2), 2000 * MIB);
        ck_assert_uint_ge(sum(out, 2), 2000 * MIB - 2);
        /* 1:3 shares of 2000: 500 and 1500 */
        ck_assert_uint_le(out[0] > 500 * MIB ? out[0] - 500 * MIB : 500 * MIB - out[0], 1);
        ck_assert_uint_ge(out[0], 400 * MIB);

        /* a floor that the share would break is kept */
        g[0].floor = 800 * MIB;
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), RS_ARBITER_SHARED);
        ck_assert_uint_ge(out[0], 800 * MIB);
        ck_assert_uint_le(sum(out, 2), 2000 * MIB);
}
END_TEST

/* A guest probing below its estimate while the host is short: it gets its probe step, not
 * its estimate (it would never move), and the memory it gives up goes to the guest that
 * needs it. */
START_TEST(test_short_probing_guest_gets_its_step) {
        RsArbiterHost h = { .guest_memory = 1152 * MIB, .reserve = 0 };
        RsArbiterGuest g[] = {
                guest(544 * MIB, 552 * MIB, 256 * MIB, 1 * GIB, 1024, RS_MODE_RIGHTSIZE),
                guest(1 * GIB, RS_UNKNOWN, 256 * MIB, 1 * GIB, 1024, RS_MODE_RIGHTSIZE),
        };
        uint64_t out[2];
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), RS_ARBITER_SHARED);
        ck_assert_uint_eq(out[0], 544 * MIB);
        ck_assert_uint_le(sum(out, 2), 1152 * MIB);
        ck_assert_uint_ge(out[1], 1152 * MIB - 544 * MIB - 1);

        /* the same in step 1: the estimates fit, the wishes do not */
        g[1] = guest(700 * MIB, 600 * MIB, 256 * MIB, 1 * GIB, 1024, RS_MODE_RIGHTSIZE);
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), RS_ARBITER_SQUEEZED);
        ck_assert_uint_eq(out[0], 544 * MIB);
        ck_assert_uint_le(sum(out, 2), 1152 * MIB);
        ck_assert_uint_ge(out[1], 600 * MIB);
}
END_TEST

START_TEST(test_floors_do_not_fit) {
        RsArbiterHost h = { .guest_memory = 500 * MIB, .reserve = 0 };
        RsArbiterGuest g[] = {
                guest(1100 * MIB, 1000 * MIB, 400 * MIB, 4 * GIB, 1, RS_MODE_RIGHTSIZE),
                guest(1100 * MIB, 1000 * MIB, 400 * MIB, 4 * GIB, 1, RS_MODE_RIGHTSIZE),
        };
        uint64_t out[2];
        ck_assert_int_eq(rs_arbitrate(&h, g, 2, out), -ENOSPC);
        ck_assert_uint_eq(out[0], 400 * MIB);
        ck_assert_uint_eq(out[1], 400 * MIB);
}
END_TEST

START_TEST(test_random_invariants) {
        uint64_t x = 42;
        for (int round = 0; round < 3000; round++) {
                RsArbiterGuest g[8];
                uint64_t out[8];
                size_t n = 1 + round % 8;
                for (size_t i = 0; i < n; i++) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        uint64_t max = (512 + x % 8192) * MIB;
                        uint64_t floor = (64 + (x >> 16) % 512) * MIB;
                        uint64_t est = (x >> 8) % 4 == 0 ? RS_UNKNOWN : (128 + (x >> 24) % 8192) * MIB;
                        uint64_t want = (128 + (x >> 32) % 8192) * MIB;
                        g[i] = guest(want, est, floor, max, 1 + (x >> 40) % 5000, (RsMode) ((x >> 50) % 3));
                }
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                RsArbiterHost h = { .guest_memory = (x % 40000) * MIB, .reserve = (x >> 20) % 2048 * MIB };
                int r = rs_arbitrate(&h, g, n, out);
                uint64_t budget = h.guest_memory > h.reserve ? h.guest_memory - h.reserve : 0;
                for (size_t i = 0; i < n; i++) {
                        ck_assert_uint_ge(out[i], MIN(g[i].floor, g[i].max));
                        ck_assert_uint_le(out[i], g[i].max);
                }
                if (r == RS_ARBITER_SQUEEZED || r == RS_ARBITER_SHARED)
                        for (size_t i = 0; i < n; i++) /* short: nobody gets more than it asks */
                                ck_assert_uint_le(out[i], CLAMP(g[i].want, MIN(g[i].floor, g[i].max), g[i].max));
                if (r >= 0)
                        ck_assert_uint_le(sum(out, n), budget);
                else
                        ck_assert_int_eq(r, -ENOSPC);
        }
}
END_TEST

/* A 48 GiB host: one 16 GiB guest whose balloon driver reports 64 MiB (QEMU passes that on) and
 * two honest guests of 11 GiB with estimates of 10 GiB. 8 GiB available, 3 GiB kept for the host.
 * Budgeted with the size the liar reports, the host looked 16 GiB short and the honest guests
 * were cut to 9.02 GiB, below their estimates. What QEMU's resident set says the liar holds
 * counts instead: everything fits. */
START_TEST(test_budget_counts_what_a_lying_guest_holds) {
        const uint64_t reported[] = { 64 * MIB, 11 * GIB, 11 * GIB };
        const uint64_t rss[] = { 16 * GIB + 200 * MIB, 10 * GIB + 512 * MIB, RS_UNKNOWN };
        RsArbiterGuest g[] = {
                guest(16 * GIB, 16 * GIB, 1 * GIB, 16 * GIB, 1024, RS_MODE_RIGHTSIZE),
                guest(11 * GIB, 10 * GIB, 1 * GIB, 16 * GIB, 1024, RS_MODE_RIGHTSIZE),
                guest(11 * GIB, 10 * GIB, 1 * GIB, 16 * GIB, 1024, RS_MODE_RIGHTSIZE),
        };
        RsArbiterHost h = {
                .guest_memory = rs_arbiter_guest_memory(8 * GIB, reported, rss, 3),
                .reserve = 3 * GIB,
        };
        uint64_t out[3];
        int r = rs_arbitrate(&h, g, 3, out);
        ck_assert_uint_eq(out[1], 11 * GIB);
        ck_assert_uint_eq(out[2], 11 * GIB);
        ck_assert_int_eq(r, RS_ARBITER_FITS);

        /* what each holds: the larger of the two, the report alone when the RSS is unknown */
        ck_assert_uint_eq(rs_arbiter_held(64 * MIB, 16 * GIB), 16 * GIB);
        ck_assert_uint_eq(rs_arbiter_held(11 * GIB, 10 * GIB), 11 * GIB);
        ck_assert_uint_eq(rs_arbiter_held(11 * GIB, RS_UNKNOWN), 11 * GIB);
        ck_assert_uint_eq(rs_arbiter_guest_memory(UINT64_MAX - 1, reported, rss, 3), UINT64_MAX);
}
END_TEST

/* Past 4096 guests the arbiter refused (-EINVAL) and the daemon gave every guest its wish:
 * arbitration turned off, silently, on the largest hosts. 5000 guests: short in both steps, the
 * budget and the floors hold for every one of them, and equal guests get equal shares. */
START_TEST(test_many_guests_arbitrated) {
        enum { N = 5000 };
        _cleanup_free_ RsArbiterGuest *g = calloc(N, sizeof(*g));
        _cleanup_free_ uint64_t *out = calloc(N, sizeof(*out));
        ck_assert(g && out);
        for (size_t i = 0; i < N; i++)
                g[i] = guest(1100 * MIB, 1000 * MIB, 256 * MIB, 4 * GIB, 1024, RS_MODE_RIGHTSIZE);

        /* Step 1: the margins go, the estimates fit. */
        RsArbiterHost h = { .guest_memory = (uint64_t) N * 1050 * MIB };
        ck_assert_int_eq(rs_arbitrate(&h, g, N, out), RS_ARBITER_SQUEEZED);
        ck_assert_uint_le(sum(out, N), h.guest_memory);
        for (size_t i = 0; i < N; i++) {
                ck_assert_uint_ge(out[i], 1000 * MIB);
                ck_assert_uint_le(out[i], 1100 * MIB);
        }
        /* Step 2: shares, never below a floor; the last guest is treated like the first. */
        h.guest_memory = (uint64_t) N * 512 * MIB;
        ck_assert_int_eq(rs_arbitrate(&h, g, N, out), RS_ARBITER_SHARED);
        ck_assert_uint_le(sum(out, N), h.guest_memory);
        ck_assert_uint_ge(out[0], 511 * MIB);
        for (size_t i = 0; i < N; i++)
                ck_assert_uint_eq(out[i], out[0]);
        /* The floors alone do not fit: every guest at its floor. */
        h.guest_memory = (uint64_t) N * 128 * MIB;
        ck_assert_int_eq(rs_arbitrate(&h, g, N, out), -ENOSPC);
        ck_assert_uint_eq(out[N - 1], 256 * MIB);
}
END_TEST

START_TEST(test_bad_input) {
        RsArbiterHost h = { .guest_memory = GIB };
        uint64_t out[1];
        ck_assert_int_eq(rs_arbitrate(NULL, NULL, 0, out), -EINVAL);
        ck_assert_int_eq(rs_arbitrate(&h, NULL, 1, out), -EINVAL);
        ck_assert_int_eq(rs_arbitrate(&h, NULL, 0, NULL), RS_ARBITER_FITS);
}
END_TEST

int main(void) {
        return check_run_case("arbiter", "arbiter", NULL, NULL, 0,
                              CHECK_TESTS(test_not_short_rightsize_keeps_wish,
                                          test_not_short_on_host_pressure_gives_back,
                                          test_short_squeezes_above_estimate_first,
                                          test_short_divides_by_shares_never_below_floor,
                                          test_short_probing_guest_gets_its_step, test_floors_do_not_fit,
                                          test_random_invariants, test_budget_counts_what_a_lying_guest_holds,
                                          test_many_guests_arbitrated, test_bad_input));
}
