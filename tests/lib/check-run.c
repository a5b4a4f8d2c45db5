/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/lib/check-run.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- cases ---- */

static TCase *add_case(Suite *s, const char *name, bool once, SFun setup, SFun teardown, double timeout_sec,
                       const TTest *const *tests) {
        TCase *tc = tcase_create(name);

        if (timeout_sec > 0)
                tcase_set_timeout(tc, timeout_sec);
        if (once && (setup || teardown))
                tcase_add_unchecked_fixture(tc, setup, teardown);
        else if (setup || teardown)
                tcase_add_checked_fixture(tc, setup, teardown);
        for (size_t i = 0; tests && tests[i]; i++)
                tcase_add_test(tc, tests[i]);
        suite_add_tcase(s, tc);
        return tc;
}

TCase *check_add_case(Suite *s, const char *name, SFun setup, SFun teardown, double timeout_sec,
                      const TTest *const *tests) {
        return add_case(s, name, false, setup, teardown, timeout_sec, tests);
}

TCase *check_add_case_once(Suite *s, const char *name, SFun setup, SFun teardown, double timeout_sec,
                           const TTest *const *tests) {
        return add_case(s, name, true, setup, teardown, timeout_sec, tests);
}

/* ---- tests that could not set up ---- */

/* In memory the forked tests share with this process, so a child's count reaches the exit
 * status; a process-local count when the mapping could not be made. */
static unsigned *not_set_up;
static unsigned not_set_up_local;

static void count_not_set_up_shared(void) {
        if (not_set_up)
                return;
        void *p = mmap(NULL, sizeof(*not_set_up), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
                not_set_up = &not_set_up_local;
                return;
        }
        not_set_up = p;
        *not_set_up = not_set_up_local; /* any counted before the suite ran */
}

void check_count_not_set_up(void) {
        __atomic_add_fetch(not_set_up ? not_set_up : &not_set_up_local, 1, __ATOMIC_SEQ_CST);
}

bool check_strict(void) {
        const char *ci = getenv("CI"), *strict = getenv("RIGHTSIZE_TEST_STRICT");
        return (ci && strcmp(ci, "true") == 0) || (strict && strcmp(strict, "1") == 0);
}

int check_program_cannot_set_up(const char *program, const char *fmt, ...) {
        va_list ap;
        bool strict = check_strict();

        fprintf(stderr, "%s: %s, cannot set up: ", program, strict ? "FAIL (required under CI)" : "SKIP");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        return strict ? EXIT_FAILURE : CHECK_EXIT_SKIP;
}

/* ---- running ---- */

static int run_suite(Suite *s, enum fork_status fork_status) {
        SRunner *sr = srunner_create(s);

        srunner_set_fork_status(sr, fork_status); /* CK_FORK_GETENV: Check's default */
        count_not_set_up_shared();
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        if (failed > 0)
                return EXIT_FAILURE;
        unsigned skipped = __atomic_load_n(not_set_up, __ATOMIC_SEQ_CST);
        if (skipped > 0) {
                fprintf(stderr, "%s: SKIP: %u test(s) could not set up here (the SKIP lines above say why); "
                        "under CI (RIGHTSIZE_TEST_STRICT=1) they fail instead\n", program_invocation_short_name, skipped);
                return CHECK_EXIT_SKIP;
        }
        return EXIT_SUCCESS;
}

int check_run_suite(Suite *s) {
        return run_suite(s, CK_FORK_GETENV);
}

int check_run_suite_nofork(Suite *s) {
        return run_suite(s, CK_NOFORK);
}

int check_run_case(const char *suite, const char *name, SFun setup, SFun teardown, double timeout_sec,
                   const TTest *const *tests) {
        Suite *s = suite_create(suite);

        check_add_case(s, name, setup, teardown, timeout_sec, tests);
        return check_run_suite(s);
}
