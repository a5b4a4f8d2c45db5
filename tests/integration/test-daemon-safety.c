/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an operator action or a fault leaves a guest with, on simulated guests (tests/sim/fake-qemu):
 *  - another controller raising a guest's balloon (virsh setmem up, MoM) pauses it, as a shrink
 *    does, instead of being taken for the guest's own need and probed back down; the pause
 *    outlives a restart;
 *  - a pause or observe mode in the middle of a probe gives the guest back the size it was held
 *    at; an operator's pause and overrides outlive a restart;
 *  - a stop before anything was learned leaves the guest at the size it had before rightsize
 *    (shutdown-action=estimate), not at max;
 *  - a restart whose state file cannot be used brings a guest a probe squeezed back to its
 *    take-over size (max when the file is unreadable) before learning it, and a probe of a guest
 *    without deflate-on-oom is warned about.
 * Waits are on state with generous deadlines. */

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"

#define WAIT_SEC 120
#define GUEST "sim-0"
#define BOOT (2048 * MIB)          /* the model's guest */
#define TAKEOVER (1536 * MIB)      /* --start-balloon: where another controller left it */
#define NEAR (16 * MIB)

static BusFixture bus;
static DaemonFixture d;

/* Probes soon and often: the floor is above the model's working set, so a probe goes down to it
 * and holds there. */
static const char probing_policy[] = "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 768M\nfloor-percent = 0\n"
                                     "hold-time = 1h\n";

static void setup(void) {
        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

static GuestView wait_view(GuestViewPredicate ok, const void *data, const char *what) {
        GuestView v;
        ck_assert_msg(guest_view_wait(&d, GUEST, ok, data, WAIT_SEC, &v),
                      "%s: not within %d s (state %s, paused %d, target %" PRIu64 ", actual %" PRIu64 ", reason '%s')",
                      what, WAIT_SEC, v.state, v.paused, v.target, v.actual, v.reason);
        return v;
}

static bool holding_at_target(const GuestView *v, const void *data _unused_) {
        return strcmp(v->state, "hold") == 0 && v->target > 0 && v->actual + 8 * MIB >= v->target &&
               v->actual <= v->target + 8 * MIB;
}

static bool paused_raised_from_outside(const GuestView *v, const void *data _unused_) {
        return v->paused && strstr(v->reason, "set from outside") && strstr(v->reason, "above");
}

/* A probe took the guest at least 128 MiB below *data. */
static bool probed_below(const GuestView *v, const void *data) {
        uint64_t from = *(const uint64_t *) data;
        return strcmp(v->state, "probe") == 0 && v->actual > 0 && v->actual + 128 * MIB <= from;
}

static bool at_least(const GuestView *v, const void *data) {
        uint64_t size = *(const uint64_t *) data;
        return guest_view_is_managed(v) && v->actual + NEAR >= size;
}

static void restart_daemon(int sig) {
        (void) daemon_fixture_stop(&d, sig);
        daemon_fixture_start(&d);
        ck_assert_msg(guest_view_wait_running(&d, GUEST, WAIT_SEC), "not managed again after the restart");
}

START_TEST(test_outside_raise_pauses_and_the_pause_survives_a_restart) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", "--fault",
                                           "0:outside-raise@usr2", NULL };
        daemon_fixture_write_policy(&d, "hold", probing_policy);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);

        GuestView held = wait_view(holding_at_target, NULL, "holding at its target");
        ck_assert_uint_lt(held.actual + 256 * MIB, BOOT);
        unsigned grew_before = daemon_fixture_log_count(&d, "working set grew");

        /* Another controller gives the guest all its memory. */
        ck_assert_int_eq(kill(d.sims[0], SIGUSR2), 0);
        GuestView v = wait_view(paused_raised_from_outside, NULL, "paused, naming the raise from outside");
        ck_assert_msg(v.actual >= BOOT - NEAR, "paused, yet the balloon is not where the other controller put it: %" PRIu64,
                      v.actual);

        /* Paused: the daemon neither takes the raise for a grown working set nor probes it back down. */
        guest_history_wait(&d, GUEST, 5, WAIT_SEC);
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        ck_assert_msg(v.paused, "resumed by itself");
        ck_assert_msg(v.actual >= BOOT - NEAR, "the daemon fought the other controller: %" PRIu64, v.actual);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "working set grew"), grew_before);

        /* The pause is the other controller's until the operator resumes, restart or not. */
        restart_daemon(SIGTERM);
        v = wait_view(paused_raised_from_outside, NULL, "still paused for the outside raise after a restart");
        guest_history_wait(&d, GUEST, 3, WAIT_SEC);
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        ck_assert_msg(v.paused && v.actual >= BOOT - NEAR, "not left alone after the restart: paused %d, actual %" PRIu64,
                      v.paused, v.actual);
}
END_TEST

START_TEST(test_pause_mid_probe_gives_back_and_outlives_a_restart) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        daemon_fixture_write_policy(&d, "probe", probing_policy);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);

        uint64_t held = BOOT;
        wait_view(probed_below, &held, "a probe under way");
        _cleanup_(ctl_run_done) CtlRun pause = ctl_run(&d, "pause", GUEST);
        ck_assert_msg(pause.code == 0, "pause: %d %s", pause.code, pause.err);
        wait_view(at_least, &held, "the size it was held at, given back when paused");

        /* The operator's choices outlive a restart: the pause and a max. */
        _cleanup_(ctl_run_done) CtlRun set = ctl_run(&d, "set", GUEST, "max=1900M");
        ck_assert_msg(set.code == 0, "set max: %d %s", set.code, set.err);
        restart_daemon(SIGTERM);
        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        ck_assert_msg(v.paused, "the pause was lost in the restart (state %s)", v.state);
        ck_assert_msg(v.max == 1900 * MIB, "the max set was lost in the restart: %" PRIu64, v.max);
}
END_TEST

START_TEST(test_observe_mid_probe_gives_back) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        daemon_fixture_write_policy(&d, "probe", probing_policy);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);

        uint64_t held = BOOT;
        wait_view(probed_below, &held, "a probe under way");
        char observe[256];
        snprintf(observe, sizeof(observe), "%smode = observe\n", probing_policy);
        daemon_fixture_write_policy(&d, "probe", observe);
        _cleanup_(ctl_run_done) CtlRun reload = ctl_run(&d, "reload");
        ck_assert_msg(reload.code == 0, "reload: %d %s", reload.code, reload.err);
        wait_view(at_least, &held, "the size it was held at, given back when observe mode began");
}
END_TEST

/* Where fake-qemu's balloon was last sent, from its counters file (written on SIGUSR1): a
 * stopped daemon's last command is in, where the balloon itself moves only at the model's next step. */
static uint64_t sim_balloon_target(const char *counters) {
        char line[256];
        uint64_t actual = 0;

        (void) unlink(counters);
        ck_assert_int_eq(kill(d.sims[0], SIGUSR1), 0);
        for (uint64_t start = monotonic_sec(); access(counters, R_OK) < 0; usleep(100 * 1000))
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "fake-qemu wrote no counters");
        FILE *f = fopen(counters, "re");
        ck_assert_ptr_nonnull(f);
        ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
        fclose(f);
        ck_assert_int_eq(sscanf(line, "sim-0 %*u %*u %*u %*u %" SCNu64, &actual), 1);
        return actual;
}

START_TEST(test_stop_before_an_estimate_leaves_the_takeover_size) {
        _cleanup_free_ char *counters = NULL;
        ck_assert_int_ge(asprintf(&counters, "%s/counters", d.dir), 0);
        const char *const sim[] = { "--scenario", "steady", "--time-scale", "1", "--start-balloon", "1536",
                                    "--counters", counters, NULL };
        /* The fixture's config keeps guests as they are at a stop. */
        daemon_fixture_set_config(&d, "shutdown-action", "estimate");
        /* Slow: nothing is learned before the stop. */
        daemon_fixture_write_policy(&d, "slow", "[policy]\nmatch = *\npoll-interval = 5s\n");
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);

        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, GUEST, &v), 0);
        ck_assert_msg(!v.has_estimate, "an estimate already (state %s): the stop would not test the fallback", v.state);
        /* Taken over 512 MiB below its max: that was given up before rightsize came, so what
         * rightsize has reclaimed is nothing yet, in the guest's record and in the host's sum. */
        _cleanup_(ctl_run_done) CtlRun show = ctl_run(&d, "--json=short", "show", GUEST);
        ck_assert_msg(show.code == 0, "show: %s", show.err);
        const char *rec = strstr(show.out, "\"reclaimed\":");
        ck_assert_msg(rec && strtoull(rec + strlen("\"reclaimed\":"), NULL, 10) <= NEAR, "show: %s", show.out);
        _cleanup_(ctl_run_done) CtlRun st = ctl_run(&d, "--json=short", "status");
        const char *sum = strstr(st.out, "\"reclaimed-bytes\":");
        ck_assert_msg(sum && strtoull(sum + strlen("\"reclaimed-bytes\":"), NULL, 10) <= NEAR, "status: %s", st.out);
        int status = daemon_fixture_stop(&d, SIGTERM);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the daemon did not stop cleanly: %d", status);

        uint64_t actual = sim_balloon_target(counters);
        ck_assert_msg(actual + NEAR >= TAKEOVER && actual <= TAKEOVER + NEAR,
                      "the stop left the guest at %" PRIu64 " MiB, not where it was taken over (%" PRIu64 " MiB)",
                      actual / MIB, TAKEOVER / MIB);
        daemon_fixture_start(&d); /* the teardown stops it */
}
END_TEST

START_TEST(test_probe_without_deflate_on_oom_is_warned) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        daemon_fixture_write_policy(&d, "probe", probing_policy);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);

        uint64_t boot = BOOT;
        wait_view(probed_below, &boot, "a probe under way");
        /* The model's balloon has no deflate-on-oom. */
        ck_assert_msg(daemon_fixture_wait_log(&d, "no deflate-on-oom", WAIT_SEC), "no warning about deflate-on-oom");
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "no deflate-on-oom"), 1);
}
END_TEST

/* Replaces the first `what` in the guest's state file with `with`, or the whole file when what is NULL. */
static void damage_state_file(const char *what, const char *with) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        ck_assert_int_ge(asprintf(&path, "%s/%s.json", d.state_dir, GUEST), 0);
        if (what) {
                text = test_read_file(path);
                ck_assert_ptr_nonnull(text);
                char *at = strstr(text, what);
                ck_assert_msg(at, "no '%s' in the state file: %s", what, text);
                _cleanup_free_ char *out = NULL;
                ck_assert_int_ge(asprintf(&out, "%.*s%s%s", (int) (at - text), text, with, at + strlen(what)), 0);
                test_write_file(path, out);
        } else
                test_write_file(path, with);
}

static bool learning_at_least(const GuestView *v, const void *data) {
        return strcmp(v->state, "learn") == 0 && at_least(v, data);
}

START_TEST(test_unusable_state_file_adopts_the_takeover_size_before_learning) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", "--start-balloon", "1536", NULL };
        daemon_fixture_write_policy(&d, "probe", probing_policy);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);

        uint64_t takeover = TAKEOVER;
        wait_view(probed_below, &takeover, "a probe under way");

        /* A crash mid-probe, and a snapshot the next daemon cannot use (as after a changed actuator=). */
        (void) daemon_fixture_stop(&d, SIGKILL);
        damage_state_file("\"magic\"", "\"magic_of_another_format\"");
        daemon_fixture_start(&d);
        GuestView v = wait_view(learning_at_least, &takeover, "back at its take-over size, learning");
        ck_assert_msg(v.actual <= BOOT - 128 * MIB, "grown past its take-over size: %" PRIu64, v.actual);

        /* A file that cannot be read at all: the take-over size is lost with it, and max is the size
         * that cannot leave the guest squeezed. */
        wait_view(probed_below, &takeover, "a probe under way again");
        (void) daemon_fixture_stop(&d, SIGKILL);
        damage_state_file(NULL, "{\"format\": \"rightsize-guest-state\", \"vers");
        daemon_fixture_start(&d);
        uint64_t boot = BOOT;
        wait_view(learning_at_least, &boot, "back at max, learning");
}
END_TEST

int main(void) {
        return check_run_case("daemon-safety", "safety", setup, teardown, 600,
                              CHECK_TESTS(test_outside_raise_pauses_and_the_pause_survives_a_restart,
                                          test_pause_mid_probe_gives_back_and_outlives_a_restart,
                                          test_observe_mid_probe_gives_back,
                                          test_stop_before_an_estimate_leaves_the_takeover_size,
                                          test_probe_without_deflate_on_oom_is_warned,
                                          test_unusable_state_file_adopts_the_takeover_size_before_learning));
}
