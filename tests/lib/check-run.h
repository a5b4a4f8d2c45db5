/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The end of every Check test program: run the suite, print Check's summary, turn the
 * result into the exit status automake's harness reads. */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
