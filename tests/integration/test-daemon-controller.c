/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized with each decision core (the policy's controller = probe | cost) managing one
 * simulated guest (tests/sim/fake-qemu, scenario steady: a 500 MiB anonymous hot set with swap,
 * balloon stats only), to its end state as issue 35 states it: held at or above the model's
 * working set, and at most the set times one plus the margin the core holds with, plus one step
 * (the policy's dead-band, the smallest move the daemon makes). The probe holds balloon-only
 * guests at 1.5 times the margin (rightsize.policy(5)); the controller at the margin.
 *
 * The controller's test goes on: once it holds, it does not go under the set again (it never
 * crosses below it deliberately); restarted, the daemon resumes it from the state file at the
 * same size; restarted with controller = probe, the controller's state file is discarded with
 * one line and the probe takes the guest.
 *
 * The two cores run side by side, each on its own guest of one fake-qemu under one daemon (a
 * policy each, matched by name): the probe's convergence is watched while the controller's
 * descent goes on, so the test takes the controller's time, not the sum of both (CI runs it
 * under ASan).
 *
 * Every wait is on state, with a generous deadline (only a failure waits it out): a busy
 * machine slows the daemon's samples, not what they decide. */

#include <check.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/model/guest-model.h"
#include "tests/model/scenario.h"

#define WAIT_SEC 300
#define PROBE_GUEST "sim-0"
#define COST_GUEST "sim-1"
#define MARGIN 0.10
#define STEP (8 * MIB) /* the policy's dead-band */

static BusFixture bus;
static DaemonFixture d;

/* The tighten rate at its most (50 % a minute), so the descent takes a minute, not half an hour.
 * fake-qemu runs 20 model seconds per real second (--time-scale 20), and the daemon measures
 * rates on its own clock: every fault it sees happened in a twentieth of the wall time, so one
 * fault costs a twentieth of the default 250 us (without that, the cost the controller sees is
 * twenty times the model's, and it holds where the model's noise alone is over the target). The
 * rest at the defaults. */
#define POLICY_COMMON "poll-interval = 1s\nfloor = 256M\nfloor-percent = 0\nmargin = 10%\n" \
                      "dead-band = 8M\n"
static const char cost_policy[] = "[policy]\nmatch = " COST_GUEST "\n" POLICY_COMMON "controller = cost\ntighten-rate = 50%\nfault-latency = 12us\n";
/* A long hold: once the probe holds, it stays, and its end state can be watched as the
 * controller's is. */
#define PROBE_POLICY POLICY_COMMON "controller = probe\nhold-time = 1h\n"
static const char probe_policy[] = "[policy]\nmatch = " PROBE_GUEST "\n" PROBE_POLICY;
/* The controller's guest, handed to the probe for the last phase. */
static const char cost_to_probe_policy[] = "[policy]\nmatch = " COST_GUEST "\n" PROBE_POLICY;

/* What both guests run (seed 1, see start()): the model's working set, from its own
 * configuration, not from anything the daemon says. */
static uint64_t model_working_set(void) {
        GuestModelConfig cfg;
        ScenarioSpec spec;
        GuestModel m;

        scenario_config(SCENARIO_STEADY_ANON, 1, false, &cfg, &spec);
        guest_model_init(&m, &cfg);
        return guest_model_working_set(&m);
}

typedef struct Bounds {
        uint64_t low, high;
} Bounds;

static Bounds bounds_for(double margin) {
        uint64_t ws = model_working_set();
        return (Bounds) { .low = ws, .high = (uint64_t) ((double) ws * (1 + margin)) + STEP };
}

static bool holds_within(const GuestView *v, const void *data) {
        const Bounds *b = data;
        return strcmp(v->state, "hold") == 0 && v->target >= b->low && v->target <= b->high && v->actual >= b->low &&
               v->actual <= b->high + 4 * MIB; /* the balloon's own rounding about its target */
}

/* Both guests run the same model, seed 1 (fake-qemu seeds guest N with S+N: sim-1's process
 * starts from 0), so that each core meets the guest it met when they ran one after the other. */
static void start(void) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        static const char *const sim_1[] = { "--scenario", "steady", "--time-scale", "20", "--seed", "0", NULL };

        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        daemon_fixture_write_policy(&d, "probe", probe_policy);
        daemon_fixture_write_policy(&d, "cost", cost_policy);
        daemon_fixture_start_sim(&d, 1, 1, 1, sim_1);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
        guest_view_assert_sims_running(&d, 1, 1, WAIT_SEC);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

/* The end state: held within the bounds, and every one of the next SETTLED decisions' targets
 * within them too (a hold on the way down, a size not judged yet, is not the end). */
#define SETTLED 20
static GuestView wait_held(const char *guest, const Bounds *b, const char *core) {
        uint64_t deadline = monotonic_sec() + WAIT_SEC;
        GuestView v = {};
        bool held = false;

        while (!held && monotonic_sec() < deadline) {
                if (!guest_view_wait(&d, guest, holds_within, b, (unsigned) (deadline - monotonic_sec()) + 1, &v))
                        break;
                held = true;
                for (unsigned i = 0; held && i < SETTLED; i++) {
                        GuestView next;
                        guest_history_wait(&d, guest, 1, WAIT_SEC);
                        ck_assert_int_eq(guest_view_get(&d, guest, &next), 0);
                        held = next.target >= b->low && next.target <= b->high;
                        if (!held)
                                v = next;
                }
        }
        ck_assert_msg(held,
                      "controller = %s: %s never held within %" PRIu64 "-%" PRIu64 " MiB for %d decisions in %d s: state "
                      "%s, target %" PRIu64 " MiB, actual %" PRIu64 " MiB, estimate %" PRIu64 " MiB (%s)",
                      core, guest, b->low / MIB, b->high / MIB, SETTLED, WAIT_SEC, v.state, v.target / MIB,
                      v.actual / MIB, v.estimate / MIB, v.reason);
        ck_assert_int_eq(guest_view_get(&d, guest, &v), 0);
        fprintf(stderr, "controller = %s: held at %" PRIu64 " MiB (set %" PRIu64 ", bound %" PRIu64 "), estimate %" PRIu64
                " MiB: %s\n", core, v.target / MIB, b->low / MIB, b->high / MIB, v.estimate / MIB, v.reason);
        return v;
}

/* Waits for a line of the guest's ("LEVEL: NAME [STATE]: ...") that says needle: both guests
 * log the same messages. */
static bool wait_guest_logged(const char *guest, const char *needle) {
        char prefix[64];
        snprintf(prefix, sizeof(prefix), ": %s [", guest);
        for (uint64_t deadline = monotonic_sec() + WAIT_SEC; monotonic_sec() < deadline; usleep(200 * 1000)) {
                _cleanup_free_ char *log = daemon_fixture_log(&d);
                for (const char *line = log; line && *line;) {
                        const char *eol = strchrnul(line, '\n');
                        _cleanup_free_ char *l = strndup(line, (size_t) (eol - line));
                        ck_assert_ptr_nonnull(l);
                        if (strstr(l, prefix) && strstr(l, needle))
                                return true;
                        line = *eol ? eol + 1 : eol;
                }
        }
        return false;
}

/* The probe's end state first: it gets there before the controller, whose descent goes on
 * meanwhile on its own guest. */
static void probe_converges(void) {
        Bounds b = bounds_for(1.5 * MARGIN);
        GuestView v = wait_held(PROBE_GUEST, &b, "probe");
        ck_assert_str_eq(v.fault, "");
}

static void cost_converges_and_resumes(void) {
        GuestView v;

        Bounds b = bounds_for(MARGIN);
        GuestView held = wait_held(COST_GUEST, &b, "cost");
        ck_assert_str_eq(held.fault, "");
        ck_assert(held.has_estimate);
        /* the controller decided it, by its cost (its reasons name the stall), not the probe */
        ck_assert_msg(strstr(held.reason, "stall"), "not the controller's reason: %s", held.reason);

        /* Held, it stays at or above the set: 30 decisions more. */
        for (unsigned i = 0; i < 30; i++) {
                guest_history_wait(&d, COST_GUEST, 1, WAIT_SEC);
                ck_assert_int_eq(guest_view_get(&d, COST_GUEST, &v), 0);
                ck_assert_msg(v.target >= b.low, "went under the set after holding: target %" PRIu64 " MiB, set %" PRIu64
                              " MiB (%s, %s)", v.target / MIB, b.low / MIB, v.state, v.reason);
        }

        /* Restarted, it resumes from its state file where it was. */
        ck_assert_int_eq(daemon_fixture_stop(&d, SIGTERM), 0);
        daemon_fixture_start(&d);
        ck_assert_msg(wait_guest_logged(COST_GUEST, "Resumed from the state file"), "%s did not resume from its state file",
                      COST_GUEST);
        ck_assert_int_eq(guest_view_get(&d, COST_GUEST, &v), 0);
        ck_assert_msg(v.target >= b.low && v.target <= b.high, "resumed at %" PRIu64 " MiB, outside %" PRIu64 "-%" PRIu64,
                      v.target / MIB, b.low / MIB, b.high / MIB);
        wait_held(COST_GUEST, &b, "cost");

        /* With controller = probe, the controller's file is not misread: one line, and the probe
         * manages the guest. */
        ck_assert_int_eq(daemon_fixture_stop(&d, SIGTERM), 0);
        daemon_fixture_write_policy(&d, "cost", cost_to_probe_policy);
        daemon_fixture_start(&d);
        ck_assert(guest_view_wait_running(&d, COST_GUEST, WAIT_SEC));
        guest_history_wait(&d, COST_GUEST, 3, WAIT_SEC);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "Discarding the state file: saved by controller = cost, the "
                                                       "policy now says controller = probe"), 1);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "Ignoring the state file"), 0);
        guest_assert_managed(&d, COST_GUEST, WAIT_SEC);
}

START_TEST(test_probe_and_cost_converge) {
        start();
        probe_converges();
        cost_converges_and_resumes();
}
END_TEST

int main(void) {
        return check_run_case("daemon-controller", "controller", NULL, teardown, 4 * WAIT_SEC + 120,
                              CHECK_TESTS(test_probe_and_cost_converge));
}
