/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The end of every Check test program: run the suite, print Check's summary, turn the
 * result into the exit status automake's harness reads. */
#pragma once

#include <check.h>
#include <stdlib.h>

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
