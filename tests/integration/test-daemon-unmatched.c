/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an installed daemon does to guests nobody chose a policy for (unmatched-policy): by
 * default it estimates them and resizes nothing; a reload naming a policy resizes them; a reload
 * naming a policy that does not exist is refused and changes nothing. Simulated guests
 * (tests/sim/fake-qemu), the real rightsized and rightsizectl. Waits are on state (decisions
 * counted in the history, the policy over D-Bus) with generous deadlines. */

#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define WAIT_SEC 60
#define GUEST "sim-0"

static BusFixture bus;
static DaemonFixture d;

/* The fixture's config with its "unmatched-policy = balanced" line replaced by `line` ("" for
 * none: the compiled-in default). */
static void write_config_unmatched(const char *line) {
        static const char fixture_line[] = "unmatched-policy = balanced\n";
        daemon_fixture_write_config(&d, "", NULL);
        _cleanup_free_ char *text = test_read_file(d.config_path), *patched = NULL;
        ck_assert_ptr_nonnull(text);
        char *at = strstr(text, fixture_line);
        ck_assert_msg(at, "the fixture's config has no '%s':\n%s", fixture_line, text);
        *at = '\0';
        ck_assert_int_ge(asprintf(&patched, "%s%s%s", text, line, at + strlen(fixture_line)), 0);
        test_write_file(d.config_path, patched);
}

/* Waits until GetGuest shows the policy; returns the view. */
static GuestView wait_policy(const char *policy) {
        GuestView v = {};
        for (uint64_t start = monotonic_sec(); monotonic_sec() < start + WAIT_SEC; usleep(100 * 1000))
                if (guest_view_get(&d, GUEST, &v) == 0 && strcmp(v.policy, policy) == 0)
                        return v;
        ck_abort_msg("%s never got policy %s (has '%s')", GUEST, policy, v.policy);
        return v;
}

/* Waits for n more decisions (history points) of the guest. */
static void wait_decisions(int n) {
        uint64_t newest = 0, start = monotonic_sec();
        ck_assert_int_ge(guest_history_since(&d, GUEST, 0, &newest), 0);
        int seen = 0;
        while (seen < n) {
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "only %d of %d decisions in %d s", seen, n, WAIT_SEC);
                usleep(200 * 1000);
                uint64_t t = 0;
                int k = guest_history_since(&d, GUEST, newest, &t);
                if (k > 0) {
                        seen += k;
                        newest = t;
                }
        }
}

static void setup(void) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };

        ck_assert_int_eq(bus_fixture_start(&bus, BUS_POLICY_OPEN), 0);
        daemon_fixture_init(&d, &bus);
        write_config_unmatched("");
        /* A policy that matches other guests only, and one that matches none (chosen by name
         * below): sim-0 is unmatched. */
        daemon_fixture_write_policy(&d, "web", "[policy]\nmatch = web-*\npoll-interval = 1s\n");
        daemon_fixture_write_policy(&d, "resize", "[policy]\npoll-interval = 1s\nhold-time = 5s\n");
        daemon_fixture_start_sim(&d, 0, 0, 1, sim);
        daemon_fixture_start(&d);
        ck_assert_msg(guest_view_wait_running(&d, GUEST, WAIT_SEC), GUEST " never became managed");
}

static void teardown(void) {
        daemon_fixture_done(&d);
        bus_fixture_stop(&bus);
}

START_TEST(test_unmatched_guest_is_observed_then_resized) {
        /* Installed as shipped: observed (the preset's 10 s interval: a few decisions). */
        GuestView v = wait_policy("observe-only");
        ck_assert_str_eq(v.mode, "observe");
        uint64_t max = v.max;
        ck_assert_uint_gt(max, 0);
        wait_decisions(3);
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        ck_assert_msg(v.target == max && v.actual == max, "observed guest resized: target %" PRIu64 " actual %" PRIu64
                      " max %" PRIu64, v.target, v.actual, max);

        /* A reload naming a policy that does not exist is refused: nothing changes. */
        write_config_unmatched("unmatched-policy = no-such-policy\n");
        _cleanup_(ctl_run_done) CtlRun bad = ctl_run(&d, "reload");
        ck_assert_msg(bad.code != 0, "reload with a missing unmatched-policy succeeded");
        ck_assert_msg(strstr(bad.err, "no-such-policy"), "the refusal does not name the policy: %s", bad.err);
        wait_decisions(1);
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        ck_assert_str_eq(v.policy, "observe-only");
        ck_assert_uint_eq(v.target, max);

        /* The operator chooses a policy by its file's name: every unmatched guest is resized
         * (the simulated working set is far below the guest's size). */
        write_config_unmatched("unmatched-policy = resize\n");
        _cleanup_(ctl_run_done) CtlRun good = ctl_run(&d, "reload");
        ck_assert_msg(good.code == 0, "reload: %d %s", good.code, good.err);
        v = wait_policy("resize");
        ck_assert_str_eq(v.mode, "rightsize");
        uint64_t start = monotonic_sec();
        while (v.target >= max) {
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "the policy never moved the target below %" PRIu64, max);
                usleep(200 * 1000);
                ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        }
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-unmatched");
        TCase *tc = tcase_create("unmatched");

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 300);
        tcase_add_test(tc, test_unmatched_guest_is_observed_then_resized);
        suite_add_tcase(s, tc);

        return check_run_suite(s);
}
