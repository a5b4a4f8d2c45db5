/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The end of every Check test program: its test cases added to the suite, the suite run, Check's
 * summary printed, the result turned into the exit status automake's harness reads. */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The tests of a case, for check_add_case(): CHECK_TESTS(test_a, test_b). */
#define CHECK_TESTS(...) ((const TTest *const[]) { __VA_ARGS__, NULL })

static inline TCase *check_add_case_with(Suite *s, const char *name, bool once, SFun setup, SFun teardown,
                                         double timeout_sec, const TTest *const *tests) {
        TCase *tc = tcase_create(name);

        if (once && (setup || teardown))
                tcase_add_unchecked_fixture(tc, setup, teardown);
        else if (setup || teardown)
                tcase_add_checked_fixture(tc, setup, teardown);
        if (timeout_sec > 0)
                tcase_set_timeout(tc, timeout_sec);
        for (size_t i = 0; tests && tests[i]; i++)
                tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
        return tc;
}

/* Adds the test case `name` to s with its tests (CHECK_TESTS(...), or NULL), setup and teardown
 * around each test in the test's own process (Check's checked fixture; either may be NULL), and
 * its timeout (0: Check's default). Returns the case, for tcase_add_loop_test() and the like. */
static inline TCase *check_add_case(Suite *s, const char *name, SFun setup, SFun teardown, double timeout_sec,
                                    const TTest *const *tests) {
        return check_add_case_with(s, name, false, setup, teardown, timeout_sec, tests);
}

/* The same with setup and teardown run once around the whole case, in this process (Check's
 * unchecked fixture): for what every test of the case shares, a daemon with its guests, say. */
static inline TCase *check_add_case_once(Suite *s, const char *name, SFun setup, SFun teardown, double timeout_sec,
                                         const TTest *const *tests) {
        return check_add_case_with(s, name, true, setup, teardown, timeout_sec, tests);
}

static inline int check_run_suite_with(Suite *s, enum fork_status fork_status) {
        SRunner *sr = srunner_create(s);
        srunner_set_fork_status(sr, fork_status); /* CK_FORK_GETENV: Check's default */
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* Each test in a child of its own (unless CK_FORK says otherwise). */
static inline int check_run_suite(Suite *s) {
        return check_run_suite_with(s, CK_FORK_GETENV);
}

/* The tests in this process: for suites whose fixtures own child processes or keep state
 * across tests that a fork would hide. */
static inline int check_run_suite_nofork(Suite *s) {
        return check_run_suite_with(s, CK_NOFORK);
}

/* A test program of one test case: the suite `suite` with the case `name`, its fixture, timeout and
 * tests as check_add_case() has them, run by check_run_suite(). The exit status. */
static inline int check_run_case(const char *suite, const char *name, SFun setup, SFun teardown, double timeout_sec,
                                 const TTest *const *tests) {
        Suite *s = suite_create(suite);

        check_add_case(s, name, setup, teardown, timeout_sec, tests);
        return check_run_suite(s);
}

/* Whether every test must run in full: under CI (CI=true) or RIGHTSIZE_TEST_STRICT=1, as
 * contrib/run-tests sets it. There nothing passes without testing. */
static inline bool check_strict(void) {
        const char *ci = getenv("CI"), *strict = getenv("RIGHTSIZE_TEST_STRICT");
        return (ci && strcmp(ci, "true") == 0) || (strict && strcmp(strict, "1") == 0);
}

/* A test that cannot set up what it tests (no root, no private mount, a missing user): on a
 * developer's machine it says so on stderr and the caller returns (the test did not run); in
 * strict mode the test fails, naming what is missing. */
#define check_cannot_set_up(test, fmt, ...)                                                        \
        do {                                                                                        \
                if (check_strict())                                                                 \
                        ck_abort_msg("%s cannot set up (required under CI): " fmt, test, ##__VA_ARGS__); \
                fprintf(stderr, "%s: NOT RUN, cannot set up: " fmt "\n", test, ##__VA_ARGS__);      \
        } while (0)
