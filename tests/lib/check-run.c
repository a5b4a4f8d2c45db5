/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/lib/check-run.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- deadlines in one process ---- */

/* A checked setup takes no argument, so each distinct deadline gets a setup function of its own
 * (a slot) that arms the watchdog with it: more slots than any program has deadlines. */
#define DEADLINE_SLOTS 8

static double slot_sec[DEADLINE_SLOTS];
static unsigned n_slots;
/* Set while a suite runs its tests in this process: forked, Check keeps the deadline itself. */
static bool watchdog_active;
/* What the signal handler writes, made ready when the watchdog is armed: the handler may only
 * call async-signal-safe functions, which snprintf() is not. */
static char armed_deadline[32];

static void write_str(const char *s) {
        size_t left = strlen(s);
        while (left > 0) {
                ssize_t n = write(STDERR_FILENO, s, left);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return;
                s += n;
                left -= (size_t) n;
        }
}

/* How long the cleanup may take once a deadline passed, before the program ends without it. */
#define CLEANUP_GRACE_SEC 60

static void (*deadline_cleanup)(void);
static volatile sig_atomic_t deadline_passed;

static void on_deadline(int sig _unused_) {
        if (deadline_passed) {
                write_str(program_invocation_short_name);
                write_str(": the cleanup after the deadline did not finish either: exiting without it\n");
                _exit(EXIT_FAILURE);
        }
        deadline_passed = 1;
        /* The name START_TEST gave the test that started last: the one that did not finish, or
         * the one before it if a checked setup hung. */
        const char *test = tcase_name();
        write_str("\n");
        write_str(program_invocation_short_name);
        write_str(": FAIL: ");
        write_str(test ? test : "(a checked setup before the case's first test)");
        write_str(" did not finish within its deadline of ");
        write_str(armed_deadline);
        write_str(" s (check_set_deadline()): ending the program\n");
        /* Not SIGTERM: Check's handler for it, in place while a suite runs, signals the whole
         * process group, which from a script is the script too. The cleanup is not
         * async-signal-safe, no more than at SIGTERM; if it hangs, the signal comes once more
         * (SA_NODEFER) and ends the program without it. */
        if (deadline_cleanup) {
                (void) alarm(CLEANUP_GRACE_SEC);
                deadline_cleanup();
        }
        _exit(EXIT_FAILURE);
}

void check_set_deadline_cleanup(void (*cleanup)(void)) {
        deadline_cleanup = cleanup;
}

static double timeout_multiplier(void) {
        const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
        char *end;
        double v;

        if (!m || !*m)
                return 1;
        v = strtod(m, &end);
        return *end == '\0' && v > 0 ? v : 1;
}

static void watchdog_set(double sec) {
        struct itimerval it = {};

        it.it_value.tv_sec = (time_t) sec;
        it.it_value.tv_usec = (suseconds_t) ((sec - (double) (time_t) sec) * 1e6);
        if (setitimer(ITIMER_REAL, &it, NULL) < 0)
                ck_abort_msg("setitimer: %s", strerror(errno));
}

static void watchdog_arm(double sec) {
        if (!watchdog_active)
                return;
        sec *= timeout_multiplier();
        snprintf(armed_deadline, sizeof(armed_deadline), "%g", sec);
        struct sigaction sa = { .sa_handler = on_deadline, .sa_flags = SA_NODEFER };
        (void) sigemptyset(&sa.sa_mask);
        if (sigaction(SIGALRM, &sa, NULL) < 0)
                ck_abort_msg("sigaction(SIGALRM): %s", strerror(errno));
        watchdog_set(sec);
}

static void watchdog_disarm(void) {
        if (watchdog_active)
                watchdog_set(0);
}

#define DEADLINE_SLOT(i) \
        static void arm_slot_##i(void) { watchdog_arm(slot_sec[i]); }
DEADLINE_SLOT(0)
DEADLINE_SLOT(1)
DEADLINE_SLOT(2)
DEADLINE_SLOT(3)
DEADLINE_SLOT(4)
DEADLINE_SLOT(5)
DEADLINE_SLOT(6)
DEADLINE_SLOT(7)
static const SFun arm_slot[DEADLINE_SLOTS] = { arm_slot_0, arm_slot_1, arm_slot_2, arm_slot_3,
                                               arm_slot_4, arm_slot_5, arm_slot_6, arm_slot_7 };

void check_set_deadline(TCase *tc, double sec) {
        unsigned i;

        if (sec <= 0)
                return;
        tcase_set_timeout(tc, sec);
        for (i = 0; i < n_slots && slot_sec[i] != sec; i++)
                ;
        if (i == n_slots) {
                if (n_slots == DEADLINE_SLOTS) {
                        fprintf(stderr, "check_set_deadline: more than %d distinct deadlines in one program\n",
                                DEADLINE_SLOTS);
                        abort();
                }
                slot_sec[n_slots++] = sec;
        }
        /* Check runs checked setups in the order they were added and teardowns in reverse: added
         * first, the watchdog is armed before the case's own setup and disarmed after its teardown. */
        tcase_add_checked_fixture(tc, arm_slot[i], watchdog_disarm);
}

/* ---- cases ---- */

static TCase *add_case(Suite *s, const char *name, bool once, SFun setup, SFun teardown, double timeout_sec,
                       const TTest *const *tests) {
        TCase *tc = tcase_create(name);

        check_set_deadline(tc, timeout_sec);
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

/* Check drops a failure message longer than its 4 KiB default whole, printing only "Message
 * string too long" and an early exit: a test that puts a log or a metrics file in its message
 * failed in CI with no reason given (CK_MAX_MSG_SIZE in the environment still wins). */
#define MAX_FAILURE_MESSAGE (256 * 1024)

static int run_suite(Suite *s, enum fork_status fork_status) {
        check_set_max_msg_size(MAX_FAILURE_MESSAGE);
        SRunner *sr = srunner_create(s);

        srunner_set_fork_status(sr, fork_status); /* CK_FORK_GETENV: Check's default */
        count_not_set_up_shared();
        watchdog_active = srunner_fork_status(sr) == CK_NOFORK;
        srunner_run_all(sr, CK_NORMAL);
        /* A checked setup that failed leaves its test's watchdog armed (no teardown runs). */
        watchdog_disarm();
        watchdog_active = false;
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
