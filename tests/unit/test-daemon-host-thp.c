/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* daemon/host/host-thp.c against a sysfs of the test's own: the modes and values a host writes, and
 * the ones it does not. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon/host/host-thp.h"
#include "tests/lib/check-run.h"
#include "tests/lib/test-util.h"

static char *sysfs;

static void setup(void) {
        char cmd[512];
        sysfs = test_mkdtemp();
        snprintf(cmd, sizeof(cmd), "mkdir -p %s/kernel/mm/transparent_hugepage/khugepaged", sysfs);
        ck_assert_int_eq(system(cmd), 0);
}

static void teardown(void) {
        test_rm_rf(sysfs);
        free(sysfs);
}

/* Writes both files (NULL: leaves that one out) and reads them back. */
static int read_with(const char *enabled, const char *max_ptes_none, HostThp *ret) {
        char path[512];
        if (enabled) {
                snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage/enabled", sysfs);
                test_write_file(path, enabled);
        }
        if (max_ptes_none) {
                snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none", sysfs);
                test_write_file(path, max_ptes_none);
        }
        return host_thp_read(sysfs, ret);
}

START_TEST(test_settings_that_refill_or_keep) {
        static const struct {
                const char *enabled, *max_ptes_none;
                HostThpMode mode;
                int value;
                bool refills;
        } cases[] = {
                { "always [madvise] never\n", "511\n", HOST_THP_MADVISE, 511, true }, /* Debian's default */
                { "[always] madvise never\n", "15\n", HOST_THP_ALWAYS, 15, true },
                { "always madvise [never]\n", "511\n", HOST_THP_NEVER, 511, false },
                { "always [madvise] never\n", "0\n", HOST_THP_MADVISE, 0, false },
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                HostThp t;
                ck_assert_int_eq(read_with(cases[i].enabled, cases[i].max_ptes_none, &t), 0);
                ck_assert_int_eq(t.mode, cases[i].mode);
                ck_assert_int_eq(t.max_ptes_none, cases[i].value);
                ck_assert_int_eq(host_thp_refills_balloon(&t), cases[i].refills);
        }
        HostThp t;
        ck_assert_int_eq(read_with("[always] madvise never\n", "1\n", &t), 0);
        ck_assert_str_eq(host_thp_mode_to_string(t.mode), "always");
}
END_TEST

START_TEST(test_unreadable_or_strange_is_unknown) {
        HostThp t;
        /* no files at all (THP not built in): unknown, no claim */
        ck_assert_int_eq(read_with(NULL, NULL, &t), -ENOENT);
        ck_assert_int_eq(t.mode, HOST_THP_UNKNOWN);
        ck_assert_int_eq(t.max_ptes_none, -1);
        ck_assert(!host_thp_refills_balloon(&t));

        static const char *const bad[] = { "-1\n", "512\n", "12abc\n", "\n", "99999999999999999999\n" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                ck_assert_int_eq(read_with("always [madvise] never\n", bad[i], &t), -EBADMSG);
                ck_assert_int_eq(t.mode, HOST_THP_MADVISE);
                ck_assert_int_eq(t.max_ptes_none, -1);
                ck_assert(!host_thp_refills_balloon(&t));
        }

        /* nothing selected */
        ck_assert_int_eq(read_with("always madvise never\n", "511\n", &t), -EBADMSG);
        ck_assert_int_eq(t.mode, HOST_THP_UNKNOWN);
        ck_assert(!host_thp_refills_balloon(&t));
}
END_TEST

int main(void) {
        Suite *s = suite_create("host-thp");
        check_add_case(s, "read", setup, teardown, 0,
                       CHECK_TESTS(test_settings_that_refill_or_keep, test_unreadable_or_strange_is_unknown));
        return check_run_suite(s);
}
