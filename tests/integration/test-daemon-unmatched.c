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
        daemon_fixture_write_config(&d, "", NULL);
        daemon_fixture_replace_config_line(&d, "unmatched-policy = balanced\n", line);
}

static bool has_policy(const GuestView *v, const void *policy) {
        return strcmp(v->policy, policy) == 0;
}

/* Waits until GetGuest shows the policy; returns the view. */
static GuestView wait_policy(const char *policy) {
        GuestView v;
        ck_assert_msg(guest_view_wait(&d, GUEST, has_policy, policy, WAIT_SEC, &v), "%s never got policy %s (has '%s')",
                      GUEST, policy, v.policy);
        return v;
}

static bool target_below(const GuestView *v, const void *size) {
        return v->target < *(const uint64_t *) size;
}

static void setup(void) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };

        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        write_config_unmatched("");
        /* A policy that matches other guests only, and one that matches none (chosen by name
         * below): sim-0 is unmatched. */
        daemon_fixture_write_policy(&d, "web", "[policy]\nmatch = web-*\npoll-interval = 1s\n");
        daemon_fixture_write_policy(&d, "resize", "[policy]\npoll-interval = 1s\nhold-time = 5s\n");
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

START_TEST(test_unmatched_guest_is_observed_then_resized) {
        /* Installed as shipped: observed (the preset's 10 s interval: a few decisions). */
        GuestView v = wait_policy("observe-only");
        ck_assert_str_eq(v.mode, "observe");
        uint64_t max = v.max;
        ck_assert_uint_gt(max, 0);
        guest_history_wait(&d, GUEST, 3, WAIT_SEC);
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        ck_assert_msg(v.target == max && v.actual == max, "observed guest resized: target %" PRIu64 " actual %" PRIu64
                      " max %" PRIu64, v.target, v.actual, max);

        /* A reload naming a policy that does not exist is refused: nothing changes. */
        write_config_unmatched("unmatched-policy = no-such-policy\n");
        _cleanup_(ctl_run_done) CtlRun bad = ctl_run(&d, "reload");
        ck_assert_msg(bad.code != 0, "reload with a missing unmatched-policy succeeded");
        ck_assert_msg(strstr(bad.err, "no-such-policy"), "the refusal does not name the policy: %s", bad.err);
        guest_history_wait(&d, GUEST, 1, WAIT_SEC);
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
        ck_assert_msg(guest_view_wait(&d, GUEST, target_below, &max, WAIT_SEC, NULL),
                      "the policy never moved the target below %" PRIu64, max);
}
END_TEST

int main(void) {
        return check_run_case("daemon-unmatched", "unmatched", setup, teardown, 300,
                              CHECK_TESTS(test_unmatched_guest_is_observed_then_resized));
}
