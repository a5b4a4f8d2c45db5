/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/size.h"
#include "tests/lib/check-run.h"

static uint64_t size_ok(const char *s) {
        uint64_t v = 0;
        int r = parse_size(s, &v);
        ck_assert_msg(r == 0, "parse_size(\"%s\") = %d", s, r);
        return v;
}

START_TEST(test_parse_size_units) {
        ck_assert_uint_eq(size_ok("0"), 0);
        ck_assert_uint_eq(size_ok("1073741824"), 1073741824u);
        ck_assert_uint_eq(size_ok("512M"), 512 * MIB);
        ck_assert_uint_eq(size_ok("2G"), 2 * GIB);
        ck_assert_uint_eq(size_ok("2g"), 2 * GIB);
        ck_assert_uint_eq(size_ok("4KiB"), 4 * KIB);
        ck_assert_uint_eq(size_ok("1.5 GiB"), 3 * GIB / 2);
        ck_assert_uint_eq(size_ok("  1.5G  "), 3 * GIB / 2);
        ck_assert_uint_eq(size_ok("100B"), 100);
        ck_assert_uint_eq(size_ok("1T"), 1024 * GIB);
        ck_assert_uint_eq(size_ok("0.5K"), 512);
        /* "MB" is binary like "M" and "MiB": the CLI refused "2MB" that the policy files
         * accepted, with two parsers */
        ck_assert_uint_eq(size_ok("2MB"), 2 * MIB);
        ck_assert_uint_eq(size_ok("2mb"), 2 * MIB);
        ck_assert_uint_eq(size_ok("2 mib"), 2 * MIB);
        ck_assert_uint_eq(size_ok("1.5GB"), 3 * GIB / 2);
        ck_assert_uint_eq(size_ok("64b"), 64);
        /* Fractions round down to whole bytes. */
        ck_assert_uint_eq(size_ok("0.001K"), 1);
        ck_assert_uint_eq(size_ok("15E"), UINT64_C(15) << 60);
        ck_assert_uint_eq(size_ok("18446744073709551615"), UINT64_MAX);
}
END_TEST

START_TEST(test_parse_size_rejects) {
        static const char *const invalid[] = {
                "", " ", "lots", "-1", "1.5", "1.5B", "1GiBB", "1 G B", "1GBi", "1Gi", "1X", "G", ".5G", "1.G",
                "1..5G", "1,5G", "0x10", "1e3", "12M extra", "+1G",
        };
        uint64_t v = 42;

        for (size_t i = 0; i < ARRAY_SIZE(invalid); i++)
                ck_assert_msg(parse_size(invalid[i], &v) == -EINVAL, "'%s' accepted", invalid[i]);
        ck_assert_uint_eq(v, 42); /* untouched on error */

        ck_assert_int_eq(parse_size("18446744073709551616", &v), -ERANGE);
        ck_assert_int_eq(parse_size("16E", &v), -ERANGE);
        ck_assert_int_eq(parse_size("17179869184G", &v), -ERANGE);
        ck_assert_int_eq(parse_size(NULL, &v), -EINVAL);
}
END_TEST

START_TEST(test_parse_size_spec) {
        SizeSpec s;

        ck_assert_int_eq(parse_size_spec("5%", &s), 0);
        ck_assert(s.relative);
        ck_assert_uint_eq(s.basis_points, 500);
        ck_assert_int_eq(parse_size_spec("2.5 %", &s), 0);
        ck_assert_uint_eq(s.basis_points, 250);
        ck_assert_int_eq(parse_size_spec("0.01%", &s), 0);
        ck_assert_uint_eq(s.basis_points, 1);
        ck_assert_int_eq(parse_size_spec("100%", &s), 0);
        ck_assert_uint_eq(s.basis_points, 10000);
        ck_assert_int_eq(parse_size_spec("512M", &s), 0);
        ck_assert(!s.relative);
        ck_assert_uint_eq(s.bytes, 512 * MIB);

        ck_assert_int_eq(parse_size_spec("101%", &s), -ERANGE);
        ck_assert_int_eq(parse_size_spec("100.01%", &s), -ERANGE);
        ck_assert_int_eq(parse_size_spec("0.001%", &s), -EINVAL);
        ck_assert_int_eq(parse_size_spec("%", &s), -EINVAL);
        ck_assert_int_eq(parse_size_spec("5%%", &s), -EINVAL);
        ck_assert_int_eq(parse_size_spec("5% x", &s), -EINVAL);
        ck_assert_int_eq(parse_size_spec("5G%", &s), -EINVAL);

        SizeSpec ten = { .relative = true, .basis_points = 1000 };
        ck_assert_uint_eq(size_spec_resolve(&ten, 64 * GIB), 64 * GIB / 10);
        SizeSpec fixed = { .bytes = 3 };
        ck_assert_uint_eq(size_spec_resolve(&fixed, 64 * GIB), 3);
        SizeSpec all = { .relative = true, .basis_points = 10000 };
        ck_assert_uint_eq(size_spec_resolve(&all, UINT64_MAX), UINT64_MAX);
}
END_TEST

START_TEST(test_format_exact_round_trip) {
        static const uint64_t values[] = {
                0, 1, 1023, 1024, 1536, 512 * MIB, 1536 * MIB, 2 * GIB, 1073741825, UINT64_MAX,
                UINT64_C(1) << 60, 3 * (UINT64_C(1) << 40),
        };
        char buf[FORMAT_SIZE_MAX];

        ck_assert_str_eq(format_size_exact(buf, sizeof(buf), 2 * GIB), "2G");
        ck_assert_str_eq(format_size_exact(buf, sizeof(buf), 1536 * MIB), "1536M");
        ck_assert_str_eq(format_size_exact(buf, sizeof(buf), 1073741825), "1073741825");
        ck_assert_str_eq(format_size_exact(buf, sizeof(buf), 0), "0");

        for (size_t i = 0; i < ARRAY_SIZE(values); i++) {
                uint64_t back = 0;
                format_size_exact(buf, sizeof(buf), values[i]);
                ck_assert_int_eq(parse_size(buf, &back), 0);
                ck_assert_uint_eq(back, values[i]);
        }

        for (uint32_t bp = 0; bp <= 10000; bp += 7) {
                SizeSpec s = { .relative = true, .basis_points = bp }, back;
                format_size_spec(buf, sizeof(buf), &s);
                ck_assert_int_eq(parse_size_spec(buf, &back), 0);
                ck_assert_msg(size_spec_equal(&s, &back), "%u -> '%s'", bp, buf);
        }
        SizeSpec s = { .relative = true, .basis_points = 250 };
        ck_assert_str_eq(format_size_spec(buf, sizeof(buf), &s), "2.5%");
        s.basis_points = 5;
        ck_assert_str_eq(format_size_spec(buf, sizeof(buf), &s), "0.05%");
}
END_TEST

START_TEST(test_format_human) {
        char buf[FORMAT_SIZE_MAX];

        ck_assert_str_eq(format_size(buf, sizeof(buf), 0), "0 B");
        ck_assert_str_eq(format_size(buf, sizeof(buf), 1023), "1023 B");
        ck_assert_str_eq(format_size(buf, sizeof(buf), 1024), "1 KiB");
        ck_assert_str_eq(format_size(buf, sizeof(buf), 3 * GIB / 2), "1.5 GiB");
        ck_assert_str_eq(format_size(buf, sizeof(buf), 300 * MIB), "300 MiB");
        /* 1023.97 MiB would print as "1024 MiB": it must climb to the next unit. */
        ck_assert_str_eq(format_size(buf, sizeof(buf), GIB - 30 * KIB), "1 GiB");
        ck_assert_str_eq(format_size(buf, sizeof(buf), UINT64_MAX), "16 EiB");
        /* What people read, parse_size() accepts. */
        uint64_t v;
        ck_assert_int_eq(parse_size(format_size(buf, sizeof(buf), 3 * GIB / 2), &v), 0);
        ck_assert_uint_eq(v, 3 * GIB / 2);
}
END_TEST

int main(void) {
        return check_run_case("daemon-size", "size", NULL, NULL, 0,
                              CHECK_TESTS(test_parse_size_units, test_parse_size_rejects, test_parse_size_spec,
                                          test_format_exact_round_trip, test_format_human));
}
