/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* common/duration.c: the one duration parser (config, policy files). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "common/duration.h"
#include "common/macro.h"
#include "tests/lib/check-run.h"

static uint64_t duration_ok(const char *s) {
        uint64_t v = 0;
        int r = parse_duration(s, &v);
        ck_assert_msg(r == 0, "parse_duration(\"%s\") = %d", s, r);
        return v;
}

START_TEST(test_units) {
        ck_assert_uint_eq(duration_ok("10"), 10 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok("10s"), 10 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok("10 sec"), 10 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok("500ms"), 500 * USEC_PER_MSEC);
        ck_assert_uint_eq(duration_ok("1500MS"), 1500 * USEC_PER_MSEC);
        ck_assert_uint_eq(duration_ok("250us"), 250);
        ck_assert_uint_eq(duration_ok("5min"), 300 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok("2m"), 120 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok("1h"), 3600 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok("1.5 hour "), 5400 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok(" 0.5s"), USEC_PER_SEC / 2);
        ck_assert_uint_eq(duration_ok("7d"), 7 * 86400 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok("90 days"), 90 * 86400 * USEC_PER_SEC);
        ck_assert_uint_eq(duration_ok("1 day"), 86400 * USEC_PER_SEC);
}
END_TEST

START_TEST(test_rejects) {
        uint64_t v = 42;
        ck_assert_int_eq(parse_duration("soon", &v), -EINVAL);
        ck_assert_int_eq(parse_duration("", &v), -EINVAL);
        ck_assert_int_eq(parse_duration("-1s", &v), -EINVAL);
        ck_assert_int_eq(parse_duration("10 s s", &v), -EINVAL);
        ck_assert_int_eq(parse_duration("10fortnights", &v), -EINVAL);
        ck_assert_int_eq(parse_duration("inf", &v), -EINVAL);
        ck_assert_int_eq(parse_duration("1e20h", &v), -ERANGE);
        ck_assert_int_eq(parse_duration(NULL, &v), -EINVAL);
        ck_assert_uint_eq(v, 42); /* untouched on failure */
}
END_TEST

int main(void) {
        return check_run_case("duration", "parse", NULL, NULL, 0, CHECK_TESTS(test_units, test_rejects));
}
