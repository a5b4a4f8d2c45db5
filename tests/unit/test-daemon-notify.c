/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "daemon/log.h"
#include "daemon/notify.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

static char *dir;
static int notify_fd = -1;

/* A stand-in service manager: a datagram socket named in $NOTIFY_SOCKET. */
static void setup(void) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        dir = test_mkdtemp();
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", dir);
        notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(notify_fd, 0);
        ck_assert_int_eq(bind(notify_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        ck_assert_int_eq(setenv("NOTIFY_SOCKET", sa.sun_path, 1), 0);
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
        log_set_target(LOG_TARGET_STDERR);
}

static void teardown(void) {
        close(notify_fd);
        unsetenv("NOTIFY_SOCKET");
        test_rm_rf(dir);
        free(dir);
}

/* The next message, or NULL when none is waiting. */
static char *receive(void) {
        char buf[4096];
        ssize_t n = recv(notify_fd, buf, sizeof(buf) - 1, 0);

        if (n < 0) {
                ck_assert_int_eq(errno, EAGAIN);
                return NULL;
        }
        buf[n] = '\0';
        return strdup(buf);
}

START_TEST(test_status_text) {
        char buf[128];

        notify_format_status(buf, sizeof(buf), 0, 0, NULL);
        ck_assert_str_eq(buf, "Managing 0 guests, 0 MiB reclaimed");
        notify_format_status(buf, sizeof(buf), 1, 300 * MIB, NULL);
        ck_assert_str_eq(buf, "Managing 1 guest, 300 MiB reclaimed");
        notify_format_status(buf, sizeof(buf), 500, 1536 * MIB + 1023, NULL);
        ck_assert_str_eq(buf, "Managing 500 guests, 1536 MiB reclaimed");
        ck_assert_int_eq(notify_format_status(buf, 8, 2, 0, NULL), (int) strlen("Managing 2 guests, 0 MiB reclaimed"));
        ck_assert_str_eq(buf, "Managin"); /* truncated, terminated */
}
END_TEST

START_TEST(test_status_text_api_down) {
        char buf[512];

        /* The outage comes first: `systemctl status` cuts the line at the terminal's width. */
        notify_format_status(buf, sizeof(buf), 2, 512 * MIB, "the bus policy does not let rightsized own it");
        ck_assert_str_eq(buf, "D-Bus API unavailable: the bus policy does not let rightsized own it; "
                              "managing 2 guests, 512 MiB reclaimed");
        notify_format_status(buf, sizeof(buf), 1, 0, "disconnected from the system bus");
        ck_assert_str_eq(buf, "D-Bus API unavailable: disconnected from the system bus; managing 1 guest, 0 MiB reclaimed");

        /* A newline in the reason (a bus's error message) must not start another assignment. */
        notify_format_status(buf, sizeof(buf), 0, 0, "refused\nREADY=1\tnow\x7f");
        ck_assert_str_eq(buf, "D-Bus API unavailable: refused READY=1 now ; managing 0 guests, 0 MiB reclaimed");

        const char *expected = "D-Bus API unavailable: x; managing 3 guests, 1 MiB reclaimed";
        ck_assert_int_eq(notify_format_status(buf, 12, 3, MIB, "x"), (int) strlen(expected));
        ck_assert_str_eq(buf, "D-Bus API u"); /* truncated, terminated */
        ck_assert_int_eq(notify_format_status(NULL, 0, 3, MIB, "x"), (int) strlen(expected));
}
END_TEST

START_TEST(test_messages_reach_manager) {
        _cleanup_(freep) char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL, *f = NULL, *none = NULL;

        ck_assert_int_gt(notify_ready(2, 512 * MIB, NULL), 0);
        a = receive();
        ck_assert_ptr_nonnull(a);
        ck_assert_str_eq(a, "READY=1\nSTATUS=Managing 2 guests, 512 MiB reclaimed");

        ck_assert_int_gt(notify_status(3, GIB, NULL), 0);
        b = receive();
        ck_assert_str_eq(b, "STATUS=Managing 3 guests, 1024 MiB reclaimed");

        ck_assert_int_gt(notify_status(3, GIB, "disconnected from the system bus"), 0);
        e = receive();
        ck_assert_str_eq(e, "STATUS=D-Bus API unavailable: disconnected from the system bus; "
                            "managing 3 guests, 1024 MiB reclaimed");

        ck_assert_int_gt(notify_ready(1, 0, "cannot connect\nMAINPID=1"), 0);
        f = receive();
        ck_assert_str_eq(f, "READY=1\nSTATUS=D-Bus API unavailable: cannot connect MAINPID=1; "
                            "managing 1 guest, 0 MiB reclaimed");

        ck_assert_int_gt(notify_reloading(), 0);
        c = receive();
        ck_assert_ptr_nonnull(c);
        ck_assert_ptr_nonnull(strstr(c, "RELOADING=1\n"));
        const char *mono = strstr(c, "MONOTONIC_USEC=");
        ck_assert_ptr_nonnull(mono);
        ck_assert_uint_gt(strtoull(mono + strlen("MONOTONIC_USEC="), NULL, 10), 0);

        ck_assert_int_gt(notify_stopping(), 0);
        d = receive();
        ck_assert_ptr_nonnull(strstr(d, "STOPPING=1"));

        none = receive();
        ck_assert_ptr_null(none);
}
END_TEST

START_TEST(test_outside_systemd) {
        sd_event *e = NULL;

        unsetenv("NOTIFY_SOCKET");
        ck_assert_int_eq(notify_status(1, 0, NULL), 0);
        ck_assert_int_eq(notify_ready(1, 0, "down"), 0);

        ck_assert_int_ge(sd_event_new(&e), 0);
        ck_assert_int_eq(notify_watchdog_setup(e), 0);

        /* A watchdog meant for another process is not ours. */
        setenv("WATCHDOG_USEC", "200000", 1);
        setenv("WATCHDOG_PID", "1", 1);
        ck_assert_int_eq(notify_watchdog_setup(e), 0);

        char pid[16];
        snprintf(pid, sizeof(pid), "%d", (int) getpid());
        setenv("WATCHDOG_PID", pid, 1);
        setenv("WATCHDOG_USEC", "soon", 1);
        test_stderr_begin();
        ck_assert_int_lt(notify_watchdog_setup(e), 0);
        free(test_stderr_end());
        ck_assert_int_eq(sd_event_get_watchdog(e), 0);
        sd_event_unref(e);
}
END_TEST

/* Runs the loop until `want` WATCHDOG=1 pings arrived; any other message fails the test. Returns
 * the longest time between two pings (from the setup call for the first). */
static uint64_t expect_pings(sd_event *e, unsigned want, uint64_t since) {
        uint64_t longest = 0, last = since;
        unsigned pings = 0;

        for (unsigned i = 0; i < 100 && pings < want; i++) {
                char *m;

                ck_assert_int_ge(sd_event_run(e, USEC_PER_SEC), 0);
                while ((m = receive())) {
                        uint64_t now = now_usec(CLOCK_MONOTONIC);

                        ck_assert_str_eq(m, "WATCHDOG=1");
                        pings++;
                        longest = MAX(longest, now - last);
                        last = now;
                        free(m);
                }
        }
        ck_assert_uint_ge(pings, want);
        return longest;
}

START_TEST(test_watchdog_pings) {
        sd_event *e = NULL;
        char pid[16];
        uint64_t start;

        snprintf(pid, sizeof(pid), "%d", (int) getpid());
        setenv("WATCHDOG_PID", pid, 1);
        setenv("WATCHDOG_USEC", "1000000", 1);

        ck_assert_int_ge(sd_event_new(&e), 0);
        start = now_usec(CLOCK_MONOTONIC);
        ck_assert_int_eq(notify_watchdog_setup(e), 1);
        ck_assert_int_eq(sd_event_get_watchdog(e), 1);

        /* It keeps pinging, well within WatchdogSec each time: the service manager would kill a
         * daemon that missed one interval. sd-event pings at three quarters of it at the latest,
         * which leaves a loaded test machine a quarter of a second to receive them. */
        ck_assert_uint_lt(expect_pings(e, 4, start), 1000000);
        sd_event_unref(e); /* takes the watchdog with it (checked by ASan) */
}
END_TEST

int main(void) {
        return check_run_case("daemon-notify", "notify", setup, teardown, 60,
                              CHECK_TESTS(test_status_text, test_status_text_api_down, test_messages_reach_manager,
                                          test_outside_systemd, test_watchdog_pings));
}
