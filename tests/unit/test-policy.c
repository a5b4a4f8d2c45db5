/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "policies/policy.h"
#include "tests/lib/check-run.h"

START_TEST(test_presets_valid_and_distinct) {
        RsPolicy c, b, a, o;
        ck_assert_int_eq(rs_policy_preset("conservative", &c), 0);
        ck_assert_int_eq(rs_policy_preset("balanced", &b), 0);
        ck_assert_int_eq(rs_policy_preset("aggressive", &a), 0);
        ck_assert_int_eq(rs_policy_preset("observe-only", &o), 0);
        ck_assert_int_eq(rs_policy_preset("reckless", &o), -ENOENT);
        ck_assert_int_eq(rs_policy_preset(NULL, &o), -ENOENT);
        const RsPolicy *all[] = { &c, &b, &a, &o };
        for (size_t i = 0; i < ARRAY_SIZE(all); i++)
                ck_assert_int_eq(rs_policy_validate(all[i], NULL), 0);
        ck_assert_str_eq(a.name, "aggressive");
        ck_assert_double_gt(c.margin_percent, b.margin_percent);
        ck_assert_double_gt(b.margin_percent, a.margin_percent);
        ck_assert_double_lt(c.probe_step_max_percent, a.probe_step_max_percent);
        ck_assert_int_eq(o.mode, RS_MODE_OBSERVE);
        ck_assert_int_eq(c.mode, RS_MODE_ON_HOST_PRESSURE);
}
END_TEST

START_TEST(test_validate_names_bad_key) {
        RsPolicy p;
        const char *key = NULL;
        rs_policy_init(&p);
        p.probe_step_min_percent = 20;
        p.probe_step_max_percent = 5;
        ck_assert_int_eq(rs_policy_validate(&p, &key), -EINVAL);
        ck_assert_str_eq(key, "probe-step-max");
        rs_policy_init(&p);
        p.shares = 0;
        ck_assert_int_eq(rs_policy_validate(&p, &key), -EINVAL);
        ck_assert_str_eq(key, "shares");
        rs_policy_init(&p);
        p.hold_usec = 1;
        ck_assert_int_eq(rs_policy_validate(&p, &key), -EINVAL);
        ck_assert_str_eq(key, "hold-time");
        rs_policy_init(&p);
        p.floor_bytes = MIB;
        ck_assert_int_eq(rs_policy_validate(&p, &key), -EINVAL);
        ck_assert_str_eq(key, "floor");
}
END_TEST

START_TEST(test_floor_and_max) {
        RsPolicy p;
        rs_policy_init(&p); /* floor 256M or 10 % */
        ck_assert_uint_eq(rs_policy_max(&p, 4 * GIB), 4 * GIB);
        ck_assert_uint_eq(rs_policy_floor(&p, 4 * GIB), (uint64_t) (0.1 * 4 * GIB));
        ck_assert_uint_eq(rs_policy_floor(&p, 1 * GIB), 256 * MIB);
        p.max_bytes = 2 * GIB;
        ck_assert_uint_eq(rs_policy_max(&p, 4 * GIB), 2 * GIB);
        ck_assert_uint_eq(rs_policy_max(&p, 1 * GIB), 1 * GIB);
        p.max_bytes = 0;
        p.floor_bytes = 8 * GIB; /* floor above max: max wins */
        ck_assert_uint_eq(rs_policy_floor(&p, 1 * GIB), 1 * GIB);
}
END_TEST

START_TEST(test_glob_match) {
        RsPolicy ps[2];
        rs_policy_init(&ps[0]);
        rs_policy_init(&ps[1]);
        snprintf(ps[0].match, sizeof(ps[0].match), "web-* db-[0-9]");
        snprintf(ps[1].match, sizeof(ps[1].match), "*");
        ck_assert(rs_policy_matches(&ps[0], "web-1", NULL));
        ck_assert(rs_policy_matches(&ps[0], "db-7", NULL));
        ck_assert(!rs_policy_matches(&ps[0], "db-77", NULL));
        ck_assert(!rs_policy_matches(&ps[0], NULL, NULL));
        snprintf(ps[0].match, sizeof(ps[0].match), "6F1C*");
        ck_assert(rs_policy_matches(&ps[0], "other", "6f1c2a00-0000-4000-8000-000000000000"));
        ck_assert_ptr_eq(rs_policy_select(ps, 2, "zzz", NULL), &ps[1]);
        ck_assert_ptr_eq(rs_policy_select(ps, 2, "x", "6f1cdead"), &ps[0]);
        ck_assert_ptr_null(rs_policy_select(ps, 1, "x", NULL));
        RsPolicy none;
        rs_policy_init(&none);
        ck_assert(!rs_policy_matches(&none, "anything", "anything"));
}
END_TEST

START_TEST(test_value_parsers) {
        double d;
        ck_assert_int_eq(rs_parse_percent("12.5%", &d), 0);
        ck_assert_double_eq(d, 12.5);
        ck_assert_int_eq(rs_parse_percent("nan", &d), -EINVAL);
        ck_assert_int_eq(rs_parse_percent("5 percent", &d), -EINVAL);
}
END_TEST

START_TEST(test_enum_strings) {
        for (int i = 0; i < _RS_MODE_MAX; i++)
                ck_assert_int_eq(rs_mode_from_string(rs_mode_to_string(i)), i);
        for (int i = 0; i < _RS_ACTUATOR_MAX; i++)
                ck_assert_int_eq(rs_actuator_from_string(rs_actuator_to_string(i)), i);
        for (int i = 0; i < _RS_SENSITIVITY_MAX; i++)
                ck_assert_int_eq(rs_sensitivity_from_string(rs_sensitivity_to_string(i)), i);
        ck_assert_int_eq(rs_mode_from_string("turbo"), -EINVAL);
        ck_assert_int_eq(rs_mode_from_string(NULL), -EINVAL);
}
END_TEST

int main(void) {
        return check_run_case("policy", "policy", NULL, NULL, 0,
                              CHECK_TESTS(test_presets_valid_and_distinct, test_validate_names_bad_key,
                                          test_floor_and_max, test_glob_match, test_value_parsers, test_enum_strings));
}
