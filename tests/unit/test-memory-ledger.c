/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* common/memory-ledger.c: where a guest's memory is, reconciled; lies from the guest clamped. */
#include <check.h>
#include <string.h>

#include "common/macro.h"
#include "common/memory-ledger.h"
#include "tests/lib/check-run.h"

#define U MEM_LEDGER_UNKNOWN

/* A 4 GiB guest ballooned to 3 GiB: 1 GiB used, 512 MiB cache, 1.5 GiB free (MemTotal 3 GiB). */
static MemLedgerInput base(void) {
        return (MemLedgerInput) {
                .max = 4 * GIB, .actual = 3 * GIB,
                .guest_total = 3 * GIB, .guest_free = 1536 * MIB, .guest_cache = 512 * MIB,
                .free_page_reporting = 1, .rss = 1536 * MIB, .swap = 0, .ksm = 0,
        };
}

START_TEST(test_adds_up) {
        MemLedgerInput in = base();
        MemLedger l;

        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.used, 1 * GIB);
        ck_assert_uint_eq(l.cache, 512 * MIB);
        ck_assert_uint_eq(l.free, 1536 * MIB);
        ck_assert_uint_eq(l.used + l.cache + l.free, l.total);
        ck_assert_uint_eq(l.balloon, 1 * GIB);
        ck_assert_uint_eq(l.held, 1536 * MIB);
        ck_assert_uint_eq(l.host_returned, 4 * GIB - 1536 * MIB);
        /* The host holds exactly what the guest uses and caches: all its free memory came back. */
        ck_assert_uint_eq(l.unreturned, 0);
        ck_assert_uint_eq(l.reported, 1536 * MIB);
        ck_assert_uint_eq(l.refilled, 0);
        ck_assert_uint_eq(l.flags, 0);
        /* balloon + what the host holds + the guest's free memory it got back = configured */
        ck_assert_uint_eq(l.balloon + l.held + l.reported, in.max);
}
END_TEST

START_TEST(test_no_fpr) {
        MemLedgerInput in = base();
        MemLedger l;
        char why[MEM_LEDGER_WHY_MAX];

        in.free_page_reporting = 0;
        in.rss = 3 * GIB; /* every page the guest has is resident */
        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.unreturned, 1536 * MIB);
        ck_assert_uint_eq(l.reported, 0);
        ck_assert_uint_eq(l.flags, MEM_LEDGER_NO_FPR);
        ck_assert_str_eq(mem_ledger_why(l.flags, why, sizeof(why)), "no free page reporting");
}
END_TEST

START_TEST(test_swap) {
        MemLedgerInput in = base();
        MemLedger l;
        char why[MEM_LEDGER_WHY_MAX];

        in.free_page_reporting = 0;
        in.rss = 2 * GIB;
        in.swap = 1 * GIB; /* the host pushed the rest out rather than getting it back */
        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.held, 3 * GIB);
        ck_assert_uint_eq(l.unreturned, 1536 * MIB);
        ck_assert_uint_eq(l.flags, MEM_LEDGER_NO_FPR | MEM_LEDGER_HOST_SWAP);
        ck_assert_str_eq(mem_ledger_why(l.flags, why, sizeof(why)), "no free page reporting, host swap");
        const char *keys[8];
        ck_assert_uint_eq(mem_ledger_why_keys(l.flags, keys, ARRAY_SIZE(keys)), 2);
        ck_assert_str_eq(keys[0], "no-free-page-reporting");
        ck_assert_str_eq(keys[1], "host-swap");
}
END_TEST

START_TEST(test_khugepaged) {
        MemLedgerInput in = base();
        MemLedger l;

        /* Reporting on, huge pages refilling: the host holds 256 MiB beyond the guest's size. */
        in.thp_refills = true;
        in.rss = 3 * GIB + 256 * MIB;
        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.refilled, 256 * MIB);
        ck_assert_uint_eq(l.unreturned, 1536 * MIB);
        ck_assert(l.flags & MEM_LEDGER_KHUGEPAGED);
        ck_assert(!(l.flags & MEM_LEDGER_NO_FPR));

        /* Without khugepaged refilling, free memory held under reporting is fragmentation. */
        in.thp_refills = false;
        in.rss = 3 * GIB;
        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.flags, MEM_LEDGER_FRAGMENTED);
}
END_TEST

START_TEST(test_noise) {
        MemLedgerInput in = base();
        MemLedger l;

        in.free_page_reporting = 0;
        in.rss += MEM_LEDGER_NOISE_BYTES - 1; /* QEMU's own memory: no reason named */
        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.unreturned, MEM_LEDGER_NOISE_BYTES - 1);
        ck_assert_uint_eq(l.flags, 0);
}
END_TEST

START_TEST(test_hostile) {
        MemLedgerInput in = base();
        MemLedger l;

        /* 2^64 - 2 free, total and cache: every figure stays within the guest's size. */
        in.guest_total = U - 1;
        in.guest_free = U - 1;
        in.guest_cache = U - 1;
        mem_ledger_compute(&in, &l);
        ck_assert(l.flags & MEM_LEDGER_CLAMPED);
        ck_assert_uint_eq(l.total, 3 * GIB);
        ck_assert_uint_eq(l.free, 3 * GIB);
        ck_assert_uint_eq(l.cache, 0);
        ck_assert_uint_eq(l.used, 0);
        ck_assert_uint_le(l.unreturned, l.free);

        /* Parts above the whole: cache gets what free leaves. */
        in = base();
        in.guest_cache = 2 * GIB;
        mem_ledger_compute(&in, &l);
        ck_assert(l.flags & MEM_LEDGER_CLAMPED);
        ck_assert_uint_eq(l.cache, 1536 * MIB);
        ck_assert_uint_eq(l.used, 0);
        ck_assert_uint_eq(l.used + l.cache + l.free, l.total);

        /* A size above the configured one is held to it too. */
        in = base();
        in.actual = U - 1;
        in.guest_total = U - 1;
        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.total, 4 * GIB);
        ck_assert_uint_eq(l.balloon, 0);
}
END_TEST

START_TEST(test_unknown) {
        MemLedgerInput in = { U, U, U, U, U, -1, U, U, U, false };
        MemLedger l;

        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.used, U);
        ck_assert_uint_eq(l.free, U);
        ck_assert_uint_eq(l.balloon, U);
        ck_assert_uint_eq(l.held, U);
        ck_assert_uint_eq(l.unreturned, U);
        ck_assert_uint_eq(l.flags, 0);

        /* No cache figure (a Windows guest): it is in used. */
        in = base();
        in.guest_cache = U;
        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.cache, U);
        ck_assert_uint_eq(l.used, 1536 * MIB);
        /* No swap figure: counted as none. */
        in = base();
        in.swap = U;
        mem_ledger_compute(&in, &l);
        ck_assert_uint_eq(l.held, 1536 * MIB);
}
END_TEST

START_TEST(test_sum) {
        MemLedgerSum s;
        MemLedger a, b, c;
        MemLedgerInput in = base();

        mem_ledger_compute(&in, &a);
        in.free_page_reporting = 0;
        in.rss = 3 * GIB;
        mem_ledger_compute(&in, &b);
        in.rss = U;
        mem_ledger_compute(&in, &c);

        mem_ledger_sum_init(&s);
        mem_ledger_sum_add(&s, &a);
        mem_ledger_sum_add(&s, &b);
        mem_ledger_sum_add(&s, &c);
        ck_assert_uint_eq(s.guests, 3);
        ck_assert_uint_eq(s.unknown_held, 1);
        ck_assert_uint_eq(s.sum.held, 1536 * MIB + 3 * GIB);
        ck_assert_uint_eq(s.sum.used, 3 * GIB);
        ck_assert_uint_eq(s.sum.unreturned, 1536 * MIB);
        ck_assert_uint_eq(s.sum.flags, MEM_LEDGER_NO_FPR);
        ck_assert_uint_eq(s.sum.ksm, 0);

        /* Saturating: lies that got through somewhere cannot wrap a host's sum. */
        MemLedger huge = a;
        huge.rss = U - 1;
        mem_ledger_sum_add(&s, &huge);
        mem_ledger_sum_add(&s, &huge);
        ck_assert_uint_eq(s.sum.rss, U - 1);
        ck_assert_uint_eq(mem_ledger_add(U, 5), 5);
        ck_assert_uint_eq(mem_ledger_add(U - 2, U - 2), U - 1);
}
END_TEST

START_TEST(test_why_bounded) {
        char small[12];
        unsigned all = MEM_LEDGER_NO_FPR | MEM_LEDGER_KHUGEPAGED | MEM_LEDGER_HOST_SWAP | MEM_LEDGER_CLAMPED;
        char why[MEM_LEDGER_WHY_MAX];

        ck_assert_str_eq(mem_ledger_why(0, why, sizeof(why)), "");
        ck_assert_str_eq(mem_ledger_why(all, why, sizeof(why)),
                         "no free page reporting, khugepaged refill, host swap, guest figures clamped");
        /* Too small for the first reason: nothing cut in half. */
        ck_assert_str_eq(mem_ledger_why(all, small, sizeof(small)), "");
}
END_TEST

int main(void) {
        return check_run_case("memory-ledger", "ledger", NULL, NULL, 0,
                              CHECK_TESTS(test_adds_up, test_no_fpr, test_swap, test_khugepaged, test_noise,
                                          test_hostile, test_unknown, test_sum, test_why_bounded));
}
