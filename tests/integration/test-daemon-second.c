/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A second rightsized beside a running one must not manage the same guests: two daemons fight
 * over every balloon and overwrite each other's state files. One on the same state directory
 * exits at start, whatever bus it is on (the state directory's lock, daemon/state-lock.h); one
 * on another state directory but the same bus exits at start too (another process owns the bus
 * name). Each exits non-zero with a line that says why, and the first daemon goes on managing
 * its guest. A simulated guest (tests/sim/fake-qemu). Waits are deadlines, not bounds. */

#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define WAIT_SEC 120
#define GUEST "sim-0"

static BusFixture bus, other_bus;
static DaemonFixture d, second;

static void setup(void) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };

        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
}

static void teardown(void) {
        (void) daemon_fixture_release(&second); /* still running only when the test failed */
        if (other_bus.pid > 0)
                bus_fixture_stop(&other_bus);
        daemon_fixture_teardown(&d, &bus);
}

/* Starts the second daemon and waits for it to exit: its exit status, or -1 when it still runs
 * at the deadline. */
static int second_daemon_exit_status(void) {
        int status;

        daemon_fixture_spawn(&second, NULL);
        for (uint64_t start = monotonic_sec(); monotonic_sec() < start + WAIT_SEC; usleep(100 * 1000)) {
                pid_t r = waitpid(second.pid, &status, WNOHANG);
                ck_assert_int_ge(r, 0);
                if (r == second.pid) {
                        second.pid = -1;
                        return status;
                }
        }
        return -1;
}

/* The first daemon still owns its name and still samples its guest. */
static void first_still_manages(void) {
        GuestView v;
        ck_assert(daemon_fixture_alive(&d));
        ck_assert(daemon_fixture_owns_name(&d));
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        uint64_t seen = v.updated;
        ck_assert_msg(guest_view_wait(&d, GUEST, guest_view_updated_after, &seen, WAIT_SEC, &v),
                      "no new sample of %s within %d s", GUEST, WAIT_SEC);
        ck_assert_str_eq(v.fault, "");
}

/* Same configuration, so the same state directory and guests, on a bus of its own: the state
 * directory's lock keeps it out. */
START_TEST(test_same_state_dir_other_bus_exits) {
        _cleanup_free_ char *config = test_read_file(d.config_path), *log = NULL, *expected = NULL;

        ck_assert_int_eq(bus_fixture_start(&other_bus, BUS_POLICY_OPEN), 0);
        daemon_fixture_init(&second, &other_bus);
        test_write_file(second.config_path, config);

        int status = second_daemon_exit_status();
        log = daemon_fixture_log(&second);
        ck_assert_msg(status >= 0, "the second rightsized still runs after %d s; its log:\n%s", WAIT_SEC, log);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0, "exit status %d; its log:\n%s", status, log);
        ck_assert_int_ge(asprintf(&expected, "Another rightsized (pid %d) manages the guests of %s", (int) d.pid,
                                  d.state_dir), 0);
        ck_assert_msg(strstr(log, expected), "no '%s' in its log:\n%s", expected, log);
        ck_assert_msg(!strstr(log, "Managing"), "it managed a guest:\n%s", log);
        first_still_manages();
}
END_TEST

/* Its own state directory, the same bus and the same sockets: the bus name keeps it out. */
START_TEST(test_same_bus_other_state_dir_exits) {
        _cleanup_free_ char *log = NULL, *glob = NULL;

        daemon_fixture_init(&second, &bus);
        daemon_fixture_write_config(&second, "", NULL);
        ck_assert_int_ge(asprintf(&glob, "%s/*.qmp", d.qmp_dir), 0);
        daemon_fixture_set_config(&second, "qmp-sockets", glob);

        int status = second_daemon_exit_status();
        log = daemon_fixture_log(&second);
        ck_assert_msg(status >= 0, "the second rightsized still runs after %d s; its log:\n%s", WAIT_SEC, log);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0, "exit status %d; its log:\n%s", status, log);
        ck_assert_msg(strstr(log, "Another process owns org.rightsize.Manager1") &&
                              strstr(log, "another rightsized is running"),
                      "its log does not say why:\n%s", log);
        ck_assert_msg(!strstr(log, "Managing"), "it managed a guest:\n%s", log);
        first_still_manages();
}
END_TEST

int main(void) {
        return check_run_case("daemon-second", "second", setup, teardown, 2 * WAIT_SEC + 60,
                              CHECK_TESTS(test_same_state_dir_other_bus_exits, test_same_bus_other_state_dir_exits));
}
