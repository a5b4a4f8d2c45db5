/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized beside another controller: when a guest's balloon is set from outside (virsh
 * setmem, MoM, Proxmox, an operator on a second QMP socket), the daemon pauses that guest, says
 * why, and does not fight: the balloon stays where the other controller put it. `rightsizectl
 * resume` takes the guest back, and the daemon's own size returns. A simulated guest
 * (tests/sim/fake-qemu, fault outside-balloon, released with SIGUSR2 once the guest holds).
 * Waits are on state with generous deadlines. */

#include <check.h>
#include <inttypes.h>
#include <json-c/json.h>
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

#define WAIT_SEC 90
#define GUEST "sim-0"

static BusFixture bus;
static DaemonFixture d;

static void setup(void) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", "--fault",
                                           "0:outside-balloon@usr2", NULL };

        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        /* A floor above the simulated working set, so that it holds soon, and a long hold: once
         * it holds, nothing of the daemon's moves the balloon. */
        daemon_fixture_write_policy(&d, "hold", "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 768M\n"
                                                "floor-percent = 0\nhold-time = 1h\n");
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

static GuestView wait_view(GuestViewPredicate ok, const void *data, const char *what) {
        GuestView v;
        ck_assert_msg(guest_view_wait(&d, GUEST, ok, data, WAIT_SEC, &v),
                      "%s: not within %d s (state %s, target %" PRIu64 ", actual %" PRIu64 ", reason '%s')", what,
                      WAIT_SEC, v.state, v.target, v.actual, v.reason);
        return v;
}

static bool holding_at_target(const GuestView *v, const void *data _unused_) {
        return strcmp(v->state, "hold") == 0 && v->target > 0 && v->actual + 8 * MIB >= v->target &&
               v->actual <= v->target + 8 * MIB;
}

static bool paused_from_outside(const GuestView *v, const void *data _unused_) {
        return v->paused && strstr(v->reason, "set from outside");
}

static bool back_at(const GuestView *v, const void *data) {
        uint64_t size = *(const uint64_t *) data;
        return !v->paused && v->actual + 8 * MIB >= size && v->actual <= size + 8 * MIB;
}

START_TEST(test_outside_change_pauses_then_resume_takes_back) {
        GuestView held = wait_view(holding_at_target, NULL, "holding at its target");
        uint64_t ours = held.actual;

        /* What rightsizing gives this host, from the real daemon: the guest would give back its
         * max less what it holds at, and found that with at least one probe cycle. */
        _cleanup_(ctl_run_done) CtlRun report = ctl_run(&d, "--json", "report");
        ck_assert_msg(report.code == 0, "report: %d %s", report.code, report.err);
        json_object *o = json_tokener_parse(report.out), *field = NULL;
        ck_assert_msg(o, "report --json is not JSON: %s", report.out);
        ck_assert(json_object_object_get_ex(o, "reclaimable-bytes", &field));
        uint64_t reclaimable = (uint64_t) json_object_get_uint64(field);
        ck_assert_msg(reclaimable + 8 * MIB >= held.max - ours && reclaimable <= held.max - ours + 8 * MIB,
                      "would give back %" PRIu64 ", max %" PRIu64 " held at %" PRIu64, reclaimable, held.max, ours);
        ck_assert(json_object_object_get_ex(o, "probe-cycles", &field));
        ck_assert_uint_ge(json_object_get_uint64(field), 1);
        json_object_put(o);

        /* The other controller sets the balloon to 85 % of where it is. */
        ck_assert_int_eq(kill(d.sims[0], SIGUSR2), 0);
        GuestView v = wait_view(paused_from_outside, NULL, "paused, naming the outside change");
        ck_assert_msg(v.actual + 16 * MIB < ours, "paused, yet the balloon was not moved: %" PRIu64 " vs %" PRIu64,
                      v.actual, ours);

        /* Paused: the daemon leaves the balloon where the other controller put it. */
        uint64_t theirs = v.actual;
        guest_history_wait(&d, GUEST, 5, WAIT_SEC);
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        ck_assert_msg(v.paused, "resumed by itself");
        ck_assert_msg(v.actual + 8 * MIB >= theirs && v.actual <= theirs + 8 * MIB,
                      "the daemon fought the other controller: %" PRIu64 " -> %" PRIu64, theirs, v.actual);

        /* The operator gives the guest back: the daemon's size returns. */
        _cleanup_(ctl_run_done) CtlRun resume = ctl_run(&d, "resume", GUEST);
        ck_assert_msg(resume.code == 0, "resume: %d %s", resume.code, resume.err);
        wait_view(back_at, &ours, "back at the daemon's size after resume");
}
END_TEST

int main(void) {
        return check_run_case("daemon-coexist", "coexist", setup, teardown, 400,
                              CHECK_TESTS(test_outside_change_pauses_then_resume_takes_back));
}
