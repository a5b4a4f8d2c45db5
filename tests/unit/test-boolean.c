/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* common/boolean.c: the one boolean parser (config, policy files). */
#include <check.h>
#include <errno.h>
#include <stdbool.h>

#include "common/boolean.h"
#include "tests/lib/check-run.h"

START_TEST(test_words) {
        static const char *const yes[] = { "yes", "true", "on", "1", "YES", "True", "oN" };
        static const char *const no[] = { "no", "false", "off", "0", "NO", "False", "Off" };
        bool b;

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                b = false;
                ck_assert_int_eq(parse_boolean(yes[i], &b), 0);
                ck_assert_msg(b, "%s", yes[i]);
        }
        for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
                b = true;
                ck_assert_int_eq(parse_boolean(no[i], &b), 0);
                ck_assert_msg(!b, "%s", no[i]);
        }
}
END_TEST

START_TEST(test_rejects) {
        bool b = true;

        ck_assert_int_eq(parse_boolean("maybe", &b), -EINVAL);
        ck_assert_int_eq(parse_boolean("", &b), -EINVAL);
        ck_assert_int_eq(parse_boolean(" yes", &b), -EINVAL);
        ck_assert_int_eq(parse_boolean("2", &b), -EINVAL);
        ck_assert_int_eq(parse_boolean(NULL, &b), -EINVAL);
        ck_assert(b); /* untouched on failure */
}
END_TEST

int main(void) {
        return check_run_case("boolean", "parse", NULL, NULL, 0, CHECK_TESTS(test_words, test_rejects));
}
