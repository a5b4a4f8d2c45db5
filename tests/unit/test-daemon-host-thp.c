/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* daemon/host-thp.c against a sysfs of the test's own: the modes and values a host writes, and
 * the ones it does not. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "daemon/host-thp.h"
#include "tests/lib/check-run.h"

static char dir[] = "/tmp/rs-host-thp.XXXXXX";

static void put(const char *name, const char *text) {
        char path[256];
        snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage/%s", dir, name);
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

static void setup(void) {
        char path[256];
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "mkdir -p %s/kernel/mm/transparent_hugepage/khugepaged", dir);
        ck_assert_int_eq(system(path), 0);
}

static void teardown(void) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
        snprintf(dir, sizeof(dir), "/tmp/rs-host-thp.XXXXXX");
}

START_TEST(test_default_host_refills) {
        HostThp t;
        put("enabled", "always [madvise] never\n");
        put("khugepaged/max_ptes_none", "511\n");
        ck_assert_int_eq(host_thp_read(dir, &t), 0);
        ck_assert_int_eq(t.mode, HOST_THP_MADVISE);
        ck_assert_int_eq(t.max_ptes_none, 511);
        ck_assert(host_thp_refills_balloon(&t));

        put("enabled", "[always] madvise never\n");
        put("khugepaged/max_ptes_none", "15\n");
        ck_assert_int_eq(host_thp_read(dir, &t), 0);
        ck_assert_int_eq(t.mode, HOST_THP_ALWAYS);
        ck_assert(host_thp_refills_balloon(&t));
        ck_assert_str_eq(host_thp_mode_to_string(t.mode), "always");
}
END_TEST

START_TEST(test_settings_that_keep_the_balloons_pages) {
        HostThp t;
        put("enabled", "always madvise [never]\n");
        put("khugepaged/max_ptes_none", "511\n");
        ck_assert_int_eq(host_thp_read(dir, &t), 0);
        ck_assert_int_eq(t.mode, HOST_THP_NEVER);
        ck_assert(!host_thp_refills_balloon(&t));

        put("enabled", "always [madvise] never\n");
        put("khugepaged/max_ptes_none", "0\n");
        ck_assert_int_eq(host_thp_read(dir, &t), 0);
        ck_assert(!host_thp_refills_balloon(&t));
}
END_TEST

START_TEST(test_unreadable_or_strange_is_unknown) {
        HostThp t;
        /* no files at all (THP not built in): unknown, no claim */
        ck_assert_int_eq(host_thp_read(dir, &t), -ENOENT);
        ck_assert_int_eq(t.mode, HOST_THP_UNKNOWN);
        ck_assert_int_eq(t.max_ptes_none, -1);
        ck_assert(!host_thp_refills_balloon(&t));

        static const char *const bad[] = { "-1\n", "512\n", "12abc\n", "\n", "99999999999999999999\n" };
        put("enabled", "always [madvise] never\n");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                put("khugepaged/max_ptes_none", bad[i]);
                ck_assert_int_eq(host_thp_read(dir, &t), -EBADMSG);
                ck_assert_int_eq(t.mode, HOST_THP_MADVISE);
                ck_assert_int_eq(t.max_ptes_none, -1);
                ck_assert(!host_thp_refills_balloon(&t));
        }

        put("enabled", "always madvise never\n"); /* nothing selected */
        put("khugepaged/max_ptes_none", "511\n");
        ck_assert_int_eq(host_thp_read(dir, &t), -EBADMSG);
        ck_assert_int_eq(t.mode, HOST_THP_UNKNOWN);
        ck_assert(!host_thp_refills_balloon(&t));
}
END_TEST

int main(void) {
        Suite *s = suite_create("host-thp");
        check_add_case(s, "read", setup, teardown, 0,
                       CHECK_TESTS(test_default_host_refills, test_settings_that_keep_the_balloons_pages,
                                   test_unreadable_or_strange_is_unknown));
        return check_run_suite(s);
}
