/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What one guest's identity and its state file are to the daemon, on simulated guests
 * (tests/sim/fake-qemu):
 *  - two guests of one name (two QMP socket directories) do not share a state file, metrics and a
 *    D-Bus record: the second is refused, said in the log and by rightsizectl status (exit 6), and
 *    taken on once the first is gone.
 * Waits are on state with generous deadlines. */

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"

#define WAIT_SEC 120
#define GUEST "sim-0"

static BusFixture bus;
static DaemonFixture d;

static void setup(void) {
        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

static unsigned listed_named(const char *name) {
        GuestView v[16];
        int n = guest_view_list(&d, v, ARRAY_SIZE(v));
        unsigned count = 0;

        ck_assert_int_ge(n, 0);
        for (int i = 0; i < n && i < (int) ARRAY_SIZE(v); i++)
                count += strcmp(v[i].name, name) == 0;
        return count;
}

START_TEST(test_second_guest_of_a_name_is_refused_until_the_name_is_free) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        _cleanup_free_ char *other_dir = NULL, *globs = NULL, *refusal = NULL, *taken_on = NULL;

        ck_assert_int_ge(asprintf(&other_dir, "%s/qmp-other", d.dir), 0);
        ck_assert_int_eq(mkdir(other_dir, 0755), 0);
        ck_assert_int_ge(asprintf(&globs, "%s/*.qmp %s/*.qmp", d.qmp_dir, other_dir), 0);
        daemon_fixture_set_config(&d, "qmp-sockets", globs);
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);

        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
        daemon_fixture_start_sim_in(&d, 1, other_dir, 0, 1, sim);
        ck_assert_int_ge(asprintf(&refusal, "Refusing QMP socket %s/" GUEST ".qmp", other_dir), 0);
        ck_assert_msg(daemon_fixture_wait_log(&d, refusal, WAIT_SEC), "no line refusing the second %s", GUEST);

        /* One record, one state file, and the operator is told. */
        guest_assert_managed(&d, GUEST, WAIT_SEC);
        ck_assert_uint_eq(listed_named(GUEST), 1);
        _cleanup_(ctl_run_done) CtlRun status = ctl_run(&d, "status");
        ck_assert_msg(status.code == 6, "status: exit %d with a refused guest\n%s", status.code, status.out);
        ck_assert_msg(strstr(status.out, "Refused") && strstr(status.out, other_dir),
                      "status does not name the refused guest:\n%s", status.out);
        _cleanup_(ctl_run_done) CtlRun json = ctl_run(&d, "status", "--json");
        ck_assert_msg(strstr(json.out, "\"guests-refused\"") && strstr(json.out, other_dir),
                      "status --json does not name the refused guest:\n%s", json.out);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, refusal), 1);

        /* The first goes: the second gets the name and is managed; nothing is refused any more. */
        daemon_fixture_kill_sim(&d, 0, SIGTERM);
        ck_assert_int_ge(asprintf(&taken_on, "taking on QMP socket %s/" GUEST ".qmp", other_dir), 0);
        ck_assert_msg(daemon_fixture_wait_log(&d, taken_on, WAIT_SEC), "the refused guest was not taken on");
        ck_assert_msg(guest_view_wait_running(&d, GUEST, WAIT_SEC), "the second guest is not managed");
        guest_assert_managed(&d, GUEST, WAIT_SEC);
        ck_assert_uint_eq(listed_named(GUEST), 1);
        _cleanup_(ctl_run_done) CtlRun after = ctl_run(&d, "status");
        ck_assert_msg(after.code == 0 && !strstr(after.out, "Refused"), "status: exit %d\n%s", after.code, after.out);
}
END_TEST

int main(void) {
        return check_run_case("daemon-state-dir", "state-dir", setup, teardown, 600,
                              CHECK_TESTS(test_second_guest_of_a_name_is_refused_until_the_name_is_free));
}
