/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The end of every Check test program: its test cases added to the suite, the suite run, Check's
 * summary printed, the result turned into the exit status automake's harness reads (0 passed,
 * 1 failed, 77 skipped: a test could not set up here). */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"

/* automake's exit status for a test that did not run. */
#define CHECK_EXIT_SKIP 77

/* The tests of a case, for check_add_case(): CHECK_TESTS(test_a, test_b). */
#define CHECK_TESTS(...) ((const TTest *const[]) { __VA_ARGS__, NULL })

/* Gives each test of tc a deadline of `sec` seconds (times CK_TIMEOUT_MULTIPLIER, as Check has it),
 * its checked setup and teardown included, that holds however the suite runs. Forked, Check keeps
 * it (tcase_set_timeout()). In one process (no fork) Check keeps no time at all, so a watchdog
 * does: past the deadline it prints which test did not finish, runs the cleanup
 * check_set_deadline_cleanup() named, and ends the program with a failure, where
 * contrib/timed-test's deadline for the whole program would only say which program. Call it
 * before adding checked fixtures of the case's own, so that the deadline covers them. */
void check_set_deadline(TCase *tc, double sec);

/* What the watchdog runs before it ends a program whose test missed its deadline (NULL: nothing):
 * the teardown that kills the test's children, guests included (e2e_teardown_on_signals() names
 * it). It runs in a signal handler, as a teardown on SIGTERM does, and gets 60 s. */
void check_set_deadline_cleanup(void (*cleanup)(void));

/* Adds the test case `name` to s with its tests (CHECK_TESTS(...), or NULL), setup and teardown
 * around each test in the test's own process (Check's checked fixture; either may be NULL), and
 * its deadline in seconds (check_set_deadline(); 0: none of its own, which forked is Check's
 * default, CK_DEFAULT_TIMEOUT or 4 s, and in one process none: the program's deadline in
 * contrib/timed-test). Returns the case, for tcase_add_loop_test() and the like. */
TCase *check_add_case(Suite *s, const char *name, SFun setup, SFun teardown, double timeout_sec,
                      const TTest *const *tests);

/* The same with setup and teardown run once around the whole case, in this process (Check's
 * unchecked fixture): for what every test of the case shares, a daemon with its guests, say. */
TCase *check_add_case_once(Suite *s, const char *name, SFun setup, SFun teardown, double timeout_sec,
                           const TTest *const *tests);

/* Runs s with each test in a child of its own (unless CK_FORK says otherwise). The exit status:
 * EXIT_FAILURE if a test failed, else CHECK_EXIT_SKIP if a test could not set up
 * (check_cannot_set_up()), else EXIT_SUCCESS. */
int check_run_suite(Suite *s);

/* The same with the tests in this process: for suites whose fixtures own child processes or keep
 * state across tests that a fork would hide. */
int check_run_suite_nofork(Suite *s);

/* A test program of one test case: the suite `suite` with the case `name`, its fixture, deadline
 * and tests as check_add_case() has them, run by check_run_suite(). The exit status. */
int check_run_case(const char *suite, const char *name, SFun setup, SFun teardown, double timeout_sec,
                   const TTest *const *tests);

/* Whether every test must run in full: under CI (CI=true) or RIGHTSIZE_TEST_STRICT=1, as
 * contrib/run-tests sets it. There nothing passes without testing. */
bool check_strict(void);

/* Counts a test that could not set up, for check_run_suite()'s exit status (counted across the
 * forks the tests run in). check_cannot_set_up() calls it. */
void check_count_not_set_up(void);

/* A test that cannot set up what it tests (no root, no private mount, a missing user or
 * package): in strict mode the test fails, naming what is missing; elsewhere it says so on stderr,
 * the program will end in a skip (77, unless another test failed) and the caller returns. */
#define check_cannot_set_up(test, fmt, ...)                                                          \
        do {                                                                                          \
                if (check_strict())                                                                   \
                        ck_abort_msg("%s cannot set up (required under CI): " fmt, test, ##__VA_ARGS__); \
                fprintf(stderr, "%s: SKIP, cannot set up: " fmt "\n", test, ##__VA_ARGS__);            \
                check_count_not_set_up();                                                             \
        } while (0)

/* The same for a whole program that cannot set up, before it runs a suite: says so on stderr
 * (FAIL in strict mode, SKIP elsewhere, naming what is missing) and returns the exit status to
 * end with: EXIT_FAILURE in strict mode, CHECK_EXIT_SKIP elsewhere. */
int check_program_cannot_set_up(const char *program, const char *fmt, ...) _printf_(2, 3);
