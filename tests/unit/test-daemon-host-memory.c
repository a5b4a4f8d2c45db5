/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* daemon/host/host.c's reads of a QEMU process (VmRSS, VmSwap, KSM) and of the host's KSM,
 * against a procfs and a sysfs of the test's own: the layouts of kernel 6.1 (Debian 12:
 * ksm_merging_pages a file of its own) and of newer kernels (a line of ksm_stat), and hostile ones. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/host/host.h"
#include "tests/lib/check-run.h"
#include "tests/lib/test-util.h"

static char *root;

static void setup(void) {
        char path[512];
        root = test_mkdtemp();
        snprintf(path, sizeof(path), "%s/42", root);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/kernel", root);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/kernel/mm", root);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/kernel/mm/ksm", root);
        ck_assert_int_eq(mkdir(path, 0755), 0);
}

static void teardown(void) {
        test_rm_rf(root);
        free(root);
}

static void write_at(const char *rel, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", root, rel);
        test_write_file(path, text);
}

static uint64_t page(void) {
        return (uint64_t) sysconf(_SC_PAGESIZE);
}

START_TEST(test_status_6_1) {
        HostProcessMemory m;

        write_at("42/status", "Name:\tqemu-system-x86\nVmRSS:\t  2097152 kB\nRssAnon:\t 1 kB\nVmSwap:\t   524288 kB\n");
        write_at("42/ksm_stat", "ksm_rmap_items 12\n"); /* 6.1: no merging count in it */
        write_at("42/ksm_merging_pages", "1000\n");
        ck_assert_int_eq(host_process_memory(root, 42, &m), 0);
        ck_assert_uint_eq(m.rss, 2 * GIB);
        ck_assert_uint_eq(m.swap, 512 * MIB);
        ck_assert_uint_eq(m.ksm, 1000 * page());
        /* The per-tick RSS reads statm (the same counter, in pages), not status. */
        char statm[64];
        snprintf(statm, sizeof(statm), "%llu %llu 10 1 0 20 0\n", (unsigned long long) (4 * GIB / page()),
                 (unsigned long long) (2 * GIB / page()));
        write_at("42/statm", statm);
        uint64_t rss;
        ck_assert_int_eq(host_process_rss(root, 42, &rss), 0);
        ck_assert_uint_eq(rss, 2 * GIB);
}
END_TEST

START_TEST(test_status_6_6) {
        HostProcessMemory m;

        write_at("42/status", "VmRSS:\t1024 kB\nVmSwap:\t0 kB\n");
        write_at("42/ksm_stat", "ksm_rmap_items 12\nksm_zero_pages 0\nksm_merging_pages 7\nksm_process_profit 1\n");
        ck_assert_int_eq(host_process_memory(root, 42, &m), 0);
        ck_assert_uint_eq(m.rss, 1 * MIB);
        ck_assert_uint_eq(m.swap, 0);
        ck_assert_uint_eq(m.ksm, 7 * page());
}
END_TEST

START_TEST(test_status_missing_and_hostile) {
        HostProcessMemory m;

        /* No VmSwap, no KSM (CONFIG_KSM off): unknown, not 0. */
        write_at("42/status", "VmRSS:\t1024 kB\n");
        ck_assert_int_eq(host_process_memory(root, 42, &m), 0);
        ck_assert_uint_eq(m.swap, UINT64_MAX);
        ck_assert_uint_eq(m.ksm, UINT64_MAX);

        /* Figures that would overflow in bytes: unknown. */
        write_at("42/status", "VmRSS:\t1024 kB\nVmSwap:\t18446744073709551615 kB\n");
        write_at("42/ksm_merging_pages", "18446744073709551615\n");
        ck_assert_int_eq(host_process_memory(root, 42, &m), 0);
        ck_assert_uint_eq(m.swap, UINT64_MAX);
        ck_assert_uint_eq(m.ksm, UINT64_MAX);

        /* No RSS: the read fails; a process that is gone is -ESRCH. */
        write_at("42/status", "VmSwap:\t0 kB\n");
        ck_assert_int_eq(host_process_memory(root, 42, &m), -ENODATA);
        ck_assert_int_eq(host_process_memory(root, 43, &m), -ESRCH);
}
END_TEST

START_TEST(test_ksm) {
        HostKsm k;

        ck_assert_int_eq(host_ksm_read(root, &k), -ENODATA); /* no KSM in this kernel */
        ck_assert_int_eq(k.run, -1);
        write_at("kernel/mm/ksm/run", "1\n");
        write_at("kernel/mm/ksm/pages_shared", "10\n");
        write_at("kernel/mm/ksm/pages_sharing", "250\n");
        ck_assert_int_eq(host_ksm_read(root, &k), 0);
        ck_assert_int_eq(k.run, 1);
        ck_assert_uint_eq(k.pages_shared, 10 * page());
        ck_assert_uint_eq(k.pages_sharing, 250 * page());
        write_at("kernel/mm/ksm/run", "7\n");
        write_at("kernel/mm/ksm/pages_sharing", "junk\n");
        ck_assert_int_eq(host_ksm_read(root, &k), 0);
        ck_assert_int_eq(k.run, -1);
        ck_assert_uint_eq(k.pages_sharing, UINT64_MAX);
}
END_TEST

int main(void) {
        return check_run_case("host-memory", "read", setup, teardown, 0,
                              CHECK_TESTS(test_status_6_1, test_status_6_6, test_status_missing_and_hostile, test_ksm));
}
