/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* common/procfs.c: the /proc parsers (a guest's through its agent, the host's own) on
 * real-looking text and on hostile input. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/procfs.h"
#include "tests/lib/check-run.h"

/* Excerpt of a 6.1 guest's /proc/vmstat, including keys that look like ours but are not. */
static const char vmstat_61[] =
        "nr_free_pages 187340\n"
        "nr_zone_inactive_anon 2381\n"
        "workingset_nodes 0\n"
        "workingset_refault_anon 17\n"
        "workingset_refault_file 681234\n"
        "workingset_activate_anon 5\n"
        "workingset_activate_file 30211\n"
        "workingset_restore_anon 2\n"
        "workingset_restore_file 811\n"
        "workingset_nodereclaim 0\n"
        "pgpgin 123456\n"
        "pswpin 25088\n"
        "pswpout 51200\n"
        "pgfault 9876543\n"
        "pgmajfault 2741\n"
        "pgsteal_kswapd 310000\n"
        "pgsteal_direct 1200\n"
        "pgsteal_khugepaged 0\n"
        "pgscan_kswapd 420000\n"
        "pgscan_direct 1500\n"
        "pgscan_direct_throttle 0\n"
        "pgscan_anon 100\n"
        "pgscan_file 200\n"
        "allocstall_dma 0\n"
        "allocstall_dma32 3\n"
        "allocstall_normal 9\n"
        "allocstall_movable 4\n"
        "allocstall_device 0\n"
        "oom_kill 1\n"
        "balloon_inflate 65536\n"
        "balloon_deflate 1024\n"
        "balloon_migrate 0\n";

START_TEST(test_vmstat_real) {
        GuestVmstat vm;

        ck_assert_int_eq(guest_vmstat_parse(vmstat_61, strlen(vmstat_61), &vm), _GUEST_VMSTAT_MAX);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_REFAULT_ANON], 17);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_REFAULT_FILE], 681234);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_ACTIVATE_ANON], 5);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_ACTIVATE_FILE], 30211);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_RESTORE_ANON], 2);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_RESTORE_FILE], 811);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGSCAN_KSWAPD], 420000);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGSCAN_DIRECT], 1500);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGSTEAL_KSWAPD], 310000);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGSTEAL_DIRECT], 1200);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PSWPIN], 25088);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PSWPOUT], 51200);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGMAJFAULT], 2741);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGFAULT], 9876543);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_ALLOCSTALL], 16);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_OOM_KILL], 1);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_BALLOON_INFLATE], 65536);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_BALLOON_DEFLATE], 1024);
}
END_TEST

START_TEST(test_vmstat_absent_is_unknown) {
        static const char text[] = "pgmajfault 0\nnr_free_pages 5\n";
        GuestVmstat vm;

        ck_assert_int_eq(guest_vmstat_parse(text, strlen(text), &vm), 1);
        /* a real zero */
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGMAJFAULT], 0);
        ck_assert(guest_value_is_known(vm.value[GUEST_VMSTAT_PGMAJFAULT]));
        /* absent: unknown, not zero; no allocstall_* at all: the sum is unknown too */
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_OOM_KILL]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_ALLOCSTALL]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_WORKINGSET_REFAULT_ANON]));
}
END_TEST

START_TEST(test_vmstat_legacy_names) {
        /* before 5.9: one workingset_* set, file pages only; before 4.8: one allocstall */
        static const char old[] = "workingset_refault 500\nworkingset_activate 40\nworkingset_restore 3\nallocstall 7\n";
        static const char both[] = "workingset_refault 500\nworkingset_refault_file 9\n";
        GuestVmstat vm;

        ck_assert_int_eq(guest_vmstat_parse(old, strlen(old), &vm), 4);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_REFAULT_FILE], 500);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_ACTIVATE_FILE], 40);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_RESTORE_FILE], 3);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_ALLOCSTALL], 7);
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_WORKINGSET_REFAULT_ANON]));

        ck_assert_int_eq(guest_vmstat_parse(both, strlen(both), &vm), 1);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_REFAULT_FILE], 9);
}
END_TEST

START_TEST(test_vmstat_hostile_lines) {
        static const char text[] =
                "pgmajfault\n"                              /* missing value */
                "pswpin 12 34\n"                            /* extra token */
                "pswpout -5\n"                              /* negative */
                "oom_kill 99999999999999999999999\n"        /* > 2^64 */
                "pgfault 18446744073709551615\n"            /* exactly the sentinel */
                "pgscan_kswapd 0x10\n"                      /* not decimal */
                "pgscan_direct 12abc\n"
                "pgsteal_kswapd  \t 77 \r\n"                /* odd blanks and CRLF: fine */
                " pgsteal_direct 5\n"                       /* leading blank: fine */
                "balloon_inflate 1\0 garbage\n"             /* embedded NUL */
                "allocstall_normal 18446744073709551614\n"  /* sum saturates below the sentinel */
                "allocstall_movable 10\n"
                "\n\n\n"
                "workingset_refault_file 42";               /* no trailing newline */
        GuestVmstat vm;

        ck_assert_int_eq(guest_vmstat_parse(text, sizeof(text) - 1, &vm), 4);
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_PGMAJFAULT]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_PSWPIN]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_PSWPOUT]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_OOM_KILL]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_PGFAULT]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_PGSCAN_KSWAPD]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_PGSCAN_DIRECT]));
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_BALLOON_INFLATE]));
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGSTEAL_KSWAPD], 77);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGSTEAL_DIRECT], 5);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_ALLOCSTALL], UINT64_MAX - 1);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_REFAULT_FILE], 42);
}
END_TEST

START_TEST(test_vmstat_garbage) {
        const size_t big = 256 * 1024;
        char *long_line = malloc(big + 64);
        unsigned seed = 12345;
        GuestVmstat vm;
        char noise[4096];

        /* nothing at all */
        ck_assert_int_eq(guest_vmstat_parse(NULL, 0, &vm), 0);
        ck_assert_int_eq(guest_vmstat_parse("", 0, &vm), 0);
        for (size_t i = 0; i < _GUEST_VMSTAT_MAX; i++)
                ck_assert(!guest_value_is_known(vm.value[i]));

        /* a 256 KiB line of digits after a valid key, then a valid line */
        memcpy(long_line, "pgmajfault ", 11);
        memset(long_line + 11, '9', big);
        strcpy(long_line + 11 + big, "\noom_kill 3");
        ck_assert_int_eq(guest_vmstat_parse(long_line, strlen(long_line), &vm), 1);
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_PGMAJFAULT]));
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_OOM_KILL], 3);

        /* a 256 KiB key */
        memset(long_line, 'k', big);
        strcpy(long_line + big, " 5\n");
        ck_assert_int_eq(guest_vmstat_parse(long_line, strlen(long_line), &vm), 0);
        free(long_line);

        /* random bytes: must not crash, and recognise nothing */
        for (int round = 0; round < 200; round++) {
                for (size_t i = 0; i < sizeof(noise); i++) {
                        seed = seed * 1103515245 + 12345;
                        noise[i] = (char) (seed >> 16);
                }
                ck_assert_int_ge(guest_vmstat_parse(noise, sizeof(noise), &vm), 0);
        }
}
END_TEST

START_TEST(test_vmstat_counter_names) {
        ck_assert_str_eq(guest_vmstat_counter_name(GUEST_VMSTAT_WORKINGSET_REFAULT_ANON), "workingset_refault_anon");
        ck_assert_str_eq(guest_vmstat_counter_name(GUEST_VMSTAT_ALLOCSTALL), "allocstall");
        ck_assert_ptr_null(guest_vmstat_counter_name(_GUEST_VMSTAT_MAX));
        for (size_t i = 0; i < _GUEST_VMSTAT_MAX; i++)
                ck_assert_ptr_nonnull(guest_vmstat_counter_name(i));
}
END_TEST

/* ---- meminfo ---- */

static const char meminfo_61[] =
        "MemTotal:        1012936 kB\n"
        "MemFree:          794300 kB\n"
        "MemAvailable:     829332 kB\n"
        "Buffers:             896 kB\n"
        "Cached:           157748 kB\n"
        "SwapCached:            0 kB\n"
        "Active:            10480 kB\n"
        "Inactive:         150712 kB\n"
        "Active(anon):        924 kB\n"
        "Inactive(anon):     2424 kB\n"
        "Active(file):       9556 kB\n"
        "Inactive(file):   148288 kB\n"
        "Unevictable:           0 kB\n"
        "Mlocked:               0 kB\n"
        "SwapTotal:        524284 kB\n"
        "SwapFree:         524284 kB\n"
        "Dirty:                 4 kB\n"
        "Writeback:             0 kB\n"
        "AnonPages:          2552 kB\n"
        "Mapped:             3492 kB\n"
        "Shmem:               796 kB\n"
        "KReclaimable:       5024 kB\n"
        "Slab:              14660 kB\n"
        "SReclaimable:       5024 kB\n"
        "SUnreclaim:         9636 kB\n"
        "Committed_AS:      11868 kB\n"
        "HugePages_Total:       0\n"
        "Hugepagesize:       2048 kB\n";

START_TEST(test_meminfo_real) {
        GuestMeminfo mi;

        ck_assert_int_eq(guest_meminfo_parse(meminfo_61, strlen(meminfo_61), &mi), _GUEST_MEMINFO_MAX);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_MEM_TOTAL], 1012936 * KIB);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_MEM_FREE], 794300 * KIB);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_MEM_AVAILABLE], 829332 * KIB);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_ACTIVE_FILE], 9556 * KIB);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_INACTIVE_ANON], 2424 * KIB);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_SWAP_CACHED], 0);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_COMMITTED_AS], 11868 * KIB);
        ck_assert_str_eq(guest_meminfo_field_name(GUEST_MEMINFO_ACTIVE_ANON), "Active(anon)");
        ck_assert_ptr_null(guest_meminfo_field_name(_GUEST_MEMINFO_MAX));
}
END_TEST

START_TEST(test_meminfo_hostile) {
        static const char text[] =
                "MemTotal:        1012936\n"                 /* no unit */
                "MemFree:          794300 MB\n"              /* wrong unit */
                "MemAvailable      829332 kB\n"              /* no colon */
                "Buffers: 18014398509481984 kB\n"            /* * 1024 overflows */
                "Cached: -5 kB\n"
                "SwapTotal: 1 kB extra\n"
                "SwapFree:\n"
                ":\n"
                "Shmem:               796 kB";               /* no newline: fine */
        GuestMeminfo mi;

        ck_assert_int_eq(guest_meminfo_parse(text, strlen(text), &mi), 1);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_SHMEM], 796 * KIB);
        for (size_t i = 0; i < _GUEST_MEMINFO_MAX; i++)
                if (i != GUEST_MEMINFO_SHMEM)
                        ck_assert_msg(!guest_value_is_known(mi.value[i]), "%s known", guest_meminfo_field_name(i));
        ck_assert_int_eq(guest_meminfo_parse(NULL, 0, &mi), 0);
}
END_TEST

/* ---- PSI ---- */

START_TEST(test_psi_real) {
        static const char text[] = "some avg10=12.34 avg60=5.67 avg300=1.00 total=123456789\n"
                                   "full avg10=0.50 avg60=0.25 avg300=0.05 total=4567\n";
        GuestPsi psi;

        ck_assert_int_eq(guest_psi_parse(text, strlen(text), &psi), 0);
        ck_assert(psi.some.known);
        ck_assert_double_eq_tol(psi.some.avg10, 12.34, 1e-9);
        ck_assert_double_eq_tol(psi.some.avg60, 5.67, 1e-9);
        ck_assert_double_eq_tol(psi.some.avg300, 1.0, 1e-9);
        ck_assert_uint_eq(psi.some.total_usec, 123456789);
        ck_assert(psi.full.known);
        ck_assert_double_eq_tol(psi.full.avg10, 0.5, 1e-9);
        ck_assert_uint_eq(psi.full.total_usec, 4567);
}
END_TEST

START_TEST(test_psi_variants) {
        GuestPsi psi;

        /* only "some" (e.g. /proc/pressure/cpu on older kernels), no newline */
        static const char only_some[] = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0";
        ck_assert_int_eq(guest_psi_parse(only_some, strlen(only_some), &psi), 0);
        ck_assert(psi.some.known);
        ck_assert(!psi.full.known);
        ck_assert_double_eq(psi.some.avg10, 0.0);

        /* fields in another order, an unknown extra field, integer averages */
        static const char odd[] = "full total=9 avg300=3 avg60=2 avg10=1 future=7\nsome avg60=0.1 avg10=100.00 total=18446744073709551615 avg300=0.123456\n";
        ck_assert_int_eq(guest_psi_parse(odd, strlen(odd), &psi), 0);
        ck_assert(psi.full.known);
        ck_assert_double_eq_tol(psi.full.avg10, 1.0, 1e-9);
        ck_assert_uint_eq(psi.full.total_usec, 9);
        ck_assert_double_eq_tol(psi.some.avg10, 100.0, 1e-9);
        ck_assert_double_eq_tol(psi.some.avg300, 0.123456, 1e-9);
        ck_assert_uint_eq(psi.some.total_usec, UINT64_MAX);
}
END_TEST

START_TEST(test_psi_garbage) {
        static const char *const bad[] = {
                "",
                "some\n",
                "some avg10=1.00 avg60=1.00 avg300=1.00\n",                       /* no total */
                "some avg10=1.00 avg60=1.00 avg300=1.00 total=\n",
                "some avg10= avg60=1.00 avg300=1.00 total=5\n",
                "some avg10=1. avg60=1.00 avg300=1.00 total=5\n",
                "some avg10=.5 avg60=1.00 avg300=1.00 total=5\n",
                "some avg10=-1.00 avg60=1.00 avg300=1.00 total=5\n",
                "some avg10=1e5 avg60=1.00 avg300=1.00 total=5\n",
                "some avg10=nan avg60=1.00 avg300=1.00 total=5\n",
                "some avg10=1,5 avg60=1.00 avg300=1.00 total=5\n",
                "some avg10=1.00 avg60=1.00 avg300=1.00 total=99999999999999999999999\n",
                "some avg10 1.00 avg60=1.00 avg300=1.00 total=5\n",
                "some avg10=1.0000000000000000000001 avg60=1 avg300=1 total=5\n", /* absurd precision */
                "full avg10=1.00 avg60=1.00 avg300=1.00 total=5\n",              /* full alone is not enough */
                "SOME avg10=1.00 avg60=1.00 avg300=1.00 total=5\n",
                "\xff\xfe\x00\x01",
        };
        GuestPsi psi;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                size_t len = i == ARRAY_SIZE(bad) - 1 ? 4 : strlen(bad[i]);

                ck_assert_msg(guest_psi_parse(bad[i], len, &psi) == -EBADMSG, "accepted: %s", bad[i]);
                ck_assert(!psi.some.known);
        }
        ck_assert_int_eq(guest_psi_parse(NULL, 0, &psi), -EBADMSG);
}
END_TEST

START_TEST(test_psi_long_line) {
        const size_t big = 512 * 1024;
        char *text = malloc(big + 128);
        GuestPsi psi;

        strcpy(text, "some avg10=1.00 avg60=1.00 avg300=1.00 total=5 ");
        memset(text + strlen(text), 'x', big);
        text[48 + big] = '\0';
        /* the trailing word has no '=': the whole line is rejected */
        ck_assert_int_eq(guest_psi_parse(text, strlen(text), &psi), -EBADMSG);
        free(text);
}
END_TEST

/* The host's own files are real text in the same format (skipped where absent). */
static char *slurp(const char *path, size_t *ret_size) {
        FILE *f = fopen(path, "re");
        char *buf;
        size_t n;

        if (!f)
                return NULL;
        buf = malloc(1024 * 1024);
        n = fread(buf, 1, 1024 * 1024 - 1, f);
        fclose(f);
        buf[n] = '\0';
        *ret_size = n;
        return buf;
}

START_TEST(test_host_proc_files) {
        GuestVmstat vm;
        GuestMeminfo mi;
        GuestPsi psi;
        size_t n;
        char *text;

        if ((text = slurp("/proc/vmstat", &n))) {
                ck_assert_int_gt(guest_vmstat_parse(text, n, &vm), 8);
                ck_assert(guest_value_is_known(vm.value[GUEST_VMSTAT_PGMAJFAULT]));
                ck_assert(guest_value_is_known(vm.value[GUEST_VMSTAT_PSWPIN]));
                free(text);
        }
        if ((text = slurp("/proc/meminfo", &n))) {
                ck_assert_int_gt(guest_meminfo_parse(text, n, &mi), 10);
                ck_assert_uint_gt(mi.value[GUEST_MEMINFO_MEM_TOTAL], 0);
                ck_assert(guest_value_is_known(mi.value[GUEST_MEMINFO_MEM_AVAILABLE]));
                free(text);
        }
        if ((text = slurp("/proc/pressure/memory", &n))) {
                if (n > 0) /* PSI may be compiled in but disabled */
                        ck_assert_int_eq(guest_psi_parse(text, n, &psi), 0);
                free(text);
        }
}
END_TEST

/* The 1 GiB test guest's /proc/zoneinfo with THP on (6.1, one CPU; per-node stats and most
 * vm stats cut): DMA and DMA32 populated, Normal and Movable empty. */
static const char zoneinfo_thp[] =
        "Node 0, zone      DMA\n"
        "  per-node stats\n"
        "      nr_inactive_anon 12\n"
        "      nr_active_anon 74612\n"
        "  pages free     3811\n"
        "        boost    0\n"
        "        min      188\n"
        "        low      235\n"
        "        high     282\n"
        "        spanned  4095\n"
        "        present  3998\n"
        "        managed  3976\n"
        "        cma      0\n"
        "        protection: (0, 881, 881, 881, 881)\n"
        "      nr_free_pages 3811\n"
        "  pagesets\n"
        "    cpu: 0\n"
        "              count: 0\n"
        "              high:  0\n"
        "              batch: 1\n"
        "  vm stats threshold: 2\n"
        "  node_unreclaimable:  0\n"
        "  start_pfn:           1\n"
        "Node 0, zone    DMA32\n"
        "  pages free     13569\n"
        "        boost    0\n"
        "        min      11075\n"
        "        low      13843\n"
        "        high     16611\n"
        "        spanned  1044480\n"
        "        present  258048\n"
        "        managed  225536\n"
        "        cma      0\n"
        "        protection: (0, 0, 0, 0, 0)\n"
        "      nr_free_pages 13569\n"
        "  pagesets\n"
        "    cpu: 0\n"
        "              count: 310\n"
        "              high:  1462\n"
        "              batch: 63\n"
        "  vm stats threshold: 6\n"
        "  node_unreclaimable:  0\n"
        "  start_pfn:           4096\n"
        "Node 0, zone   Normal\n"
        "  pages free     0\n"
        "        boost    0\n"
        "        min      0\n"
        "        low      0\n"
        "        high     0\n"
        "        spanned  0\n"
        "        present  0\n"
        "        managed  0\n"
        "        cma      0\n"
        "        protection: (0, 0, 0, 0, 0)\n"
        "Node 0, zone  Movable\n"
        "  pages free     0\n"
        "        boost    0\n"
        "        min      0\n"
        "        low      0\n"
        "        high     0\n"
        "        spanned  0\n"
        "        present  0\n"
        "        managed  0\n"
        "        cma      0\n"
        "        protection: (0, 0, 0, 0, 0)\n";

/* The sums the controller gets: each zone's watermarks with its largest protection, the
 * pagesets' "high:" not among them. High is totalreserve_pages: 17,774 pages, the 69 MiB the
 * guest kept free at every size. */
START_TEST(test_zoneinfo_real) {
        GuestZoneinfo z;
        ck_assert_int_eq(guest_zoneinfo_parse(zoneinfo_thp, strlen(zoneinfo_thp), 4096, &z), 4);
        ck_assert_uint_eq(z.min, (188 + 881 + 11075) * UINT64_C(4096));
        ck_assert_uint_eq(z.low, (235 + 881 + 13843) * UINT64_C(4096));
        ck_assert_uint_eq(z.high, (282 + 881 + 16611) * UINT64_C(4096));
        /* the per-CPU lists' pages, every zone's CPUs summed: free memory MemFree leaves out */
        ck_assert_uint_eq(z.pcp, (0 + 310) * UINT64_C(4096));
        /* no trailing newline, CRLF: the same */
        char *crlf = NULL;
        size_t n = 0;
        FILE *f = open_memstream(&crlf, &n);
        ck_assert_ptr_nonnull(f);
        for (const char *p = zoneinfo_thp; *p; p++)
                fputs(*p == '\n' ? "\r\n" : (char[]) { *p, 0 }, f);
        fclose(f);
        ck_assert_int_eq(guest_zoneinfo_parse(crlf, n - 2, 4096, &z), 4);
        ck_assert_uint_eq(z.high, (282 + 881 + 16611) * UINT64_C(4096));
        free(crlf);
}
END_TEST

/* Anything a kernel does not write fails the whole file: a sum with a lying zone left out
 * would be a wrong sum, not a smaller one. */
START_TEST(test_zoneinfo_hostile) {
        static const char *const bad[] = {
                "",
                "min 1\nlow 2\nhigh 3\n",                                       /* no zone line */
                "Node 0, zone DMA\n min 5\n low 2\n high 3\n",                   /* out of order */
                "Node 0, zone DMA\n min 1\n low 2\n",                            /* no high */
                "Node 0, zone DMA\n min 1\n low 2\n high 3\n high 4\n",          /* repeated */
                "Node 0, zone DMA\n min 1\n low 2\n high 99999999999999\n",     /* past 4 PiB */
                "Node 0, zone DMA\n min 1\n low 2\n high 3 4\n",                 /* two counts */
                "Node 0, zone DMA\n min 1\n low 2\n high -3\n",
                "Node 0, zone DMA\n min 1\n low 2\n high 18446744073709551616\n", /* 2^64 */
                "Node 0, zone DMA\n min 1\n low 2\n high 3\n protection: (0, x)\n",
                "Node 0, zone DMA\n min 1\n low 2\n high 3\n protection: (0, 99999999999999)\n",
                "Node 0, zone DMA\n min 0\n low 0\n high 0\n",                   /* all empty: no reserve */
                "Node 0, zone DMA\n min 1\n low 2\n high 3\n count: x\n",
                "Node 0, zone DMA\n min 1\n low 2\n high 3\n count: 1 2\n",
                "Node 0, zone DMA\n min 1\n low 2\n high 3\n managed 10\n count: 6\n count: 5\n", /* lists > zone */
                "Node 0, zone DMA\n min 1\n low 2\n high 3\n count: 1099511627776\n count: 1\n", /* past 4 PiB */
                "\0\0\0Node 0, zone DMA\n min 1\n low 2\n high 3\n",
        };
        GuestZoneinfo z;
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                size_t n = i == ARRAY_SIZE(bad) - 1 ? 40 : strlen(bad[i]);
                ck_assert_int_eq(guest_zoneinfo_parse(bad[i], n, 4096, &z), -EBADMSG);
                ck_assert(!guest_value_is_known(z.high));
        }
        ck_assert_int_eq(guest_zoneinfo_parse(NULL, 100, 4096, &z), -EBADMSG);
        ck_assert_int_eq(guest_zoneinfo_parse(zoneinfo_thp, strlen(zoneinfo_thp), 0, &z), -EINVAL);
        /* cut anywhere (a number cut short is still a number: the sums' bounds are the
         * sample's, against MemTotal): refused, or sums in order, never a crash */
        for (size_t cut = 0; cut < strlen(zoneinfo_thp); cut++) {
                int r = guest_zoneinfo_parse(zoneinfo_thp, cut, 4096, &z);
                ck_assert(r == -EBADMSG || (r > 0 && z.min <= z.low && z.low <= z.high && z.high > 0));
        }
        /* more zones than a kernel has */
        size_t n = 6000 * 40;
        char *many = malloc(n + 1), *p = many;
        ck_assert_ptr_nonnull(many);
        for (int i = 0; i < 6000; i++)
                p += sprintf(p, "Node 0, zone x\n min 1\n low 2\n high 3\n");
        ck_assert_int_eq(guest_zoneinfo_parse(many, (size_t) (p - many), 4096, &z), -EBADMSG);
        free(many);
        /* as many zones as a kernel may have, each at the bound: sums that would wrap */
        n = 5000 * 80;
        many = malloc(n + 1), p = many;
        ck_assert_ptr_nonnull(many);
        for (int i = 0; i < 5000; i++)
                p += sprintf(p, "Node 0, zone x\n min 1\n low 2\n high 1099511627776\n");
        ck_assert_int_eq(guest_zoneinfo_parse(many, (size_t) (p - many), 4096, &z), -EBADMSG);
        ck_assert(!guest_value_is_known(z.high));
        free(many);
        /* no pagesets (an old kernel, or cut before them): the lists are not known */
        ck_assert_int_eq(guest_zoneinfo_parse("Node 0, zone DMA\n min 1\n low 2\n high 3\n", 38, 4096, &z), 1);
        ck_assert(!guest_value_is_known(z.pcp));
}
END_TEST

int main(void) {
        return check_run_case("procfs", "parsers", NULL, NULL, 0,
                              CHECK_TESTS(test_vmstat_real, test_vmstat_absent_is_unknown, test_vmstat_legacy_names,
                                          test_vmstat_hostile_lines, test_vmstat_garbage, test_vmstat_counter_names,
                                          test_meminfo_real, test_meminfo_hostile, test_psi_real, test_psi_variants,
                                          test_psi_garbage, test_psi_long_line, test_host_proc_files, test_zoneinfo_real,
                                          test_zoneinfo_hostile));
}
