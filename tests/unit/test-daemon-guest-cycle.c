/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The guest core's middle, driven through its driver's face (guest-driver.h) by a fake driver
 * (tests/lib/fake-guest-driver.c): no guest, no socket. A cycle's readings go in, the core
 * decides, the host's arbitration (the test's hook) caps it, and the balloon call comes out to
 * the driver; around that, what an operator and the connection change: pause and resume,
 * overrides, fault episodes, the skipped state, and the state file that keeps them across a
 * restart. The balloon watch and the shutdown actions are test-daemon-guest-watch's. */

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/macro.h"
#include "common/size.h"
#include "daemon/guest.h"
#include "daemon/state-file.h"
#include "tests/lib/check-run.h"
#include "tests/lib/fake-guest-driver.h"
#include "tests/lib/test-util.h"

static sd_event *event;
static FakeGuestDriver fake;
static Guest *guest;
static uint64_t stats_clock;     /* the balloon stats' last-update: one second on per cycle */
static uint64_t arbitrated;      /* what the host's arbitration gives (0: the guest's wish) */
static unsigned updates, estimate_changes;
static const HostMemory host = { .mem_total = 64 * GIB, .mem_available = 32 * GIB };

static const HostMemory *hook_host_memory(Guest *g _unused_, void *userdata _unused_) {
        return &host;
}

static uint64_t hook_arbitrate(Guest *g, void *userdata _unused_) {
        return arbitrated ?: guest_want(g);
}

static void hook_updated(Guest *g _unused_, bool estimate_changed, void *userdata _unused_) {
        updates++;
        estimate_changes += estimate_changed;
}

static const GuestHooks hooks = {
        .host_memory = hook_host_memory,
        .arbitrate = hook_arbitrate,
        .updated = hook_updated,
};

static Guest *new_guest(const char *name, const char *state_dir, FakeGuestDriver *f) {
        RsPolicy policy;
        Guest *g = NULL;

        ck_assert_int_eq(rs_policy_preset("balanced", &policy), 0);
        ck_assert_int_eq(guest_new(event, GUEST_SOURCE_QEMU, name, NULL, "/run/t.qmp", state_dir, &policy, &hooks,
                                   NULL, &fake_guest_driver, f, &g),
                         0);
        return g;
}

static void attach(Guest *g, uint64_t size) {
        GuestResources res = { .base_memory = 4 * GIB, .balloon_actual = size };
        ck_assert_int_eq(guest_attach(g, &res), 0);
}

static void setup(void) {
        ck_assert_int_eq(sd_event_new(&event), 0);
        fake = (FakeGuestDriver) {};
        arbitrated = 0;
        updates = estimate_changes = 0;
        stats_clock = (uint64_t) time(NULL) - 3600;
        guest = new_guest("t", NULL, &fake);
}

static void teardown(void) {
        guest = guest_free(guest);
        event = sd_event_unref(event);
}

static int cycle(uint64_t balloon_actual) {
        return fake_guest_cycle(guest, balloon_actual, ++stats_clock);
}

START_TEST(test_not_running_before_attach) {
        ck_assert_str_eq(guest_state_string(guest), "connecting");
        ck_assert_int_eq(guest_cycle_begin(guest), -EAGAIN);
        ck_assert_int_eq(guest_request_probe(guest), -EBUSY);
        ck_assert_ptr_null(guest_estimate(guest));
        ck_assert_uint_eq(guest_reclaimable(guest), UINT64_MAX);
        /* What QEMU not listening yet shows: a note, not a fault episode. */
        guest_set_connecting(guest, "waiting for QEMU to listen");
        ck_assert_str_eq(guest_fault(guest), "waiting for QEMU to listen");
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_CONNECTING);
        ck_assert_uint_eq(guest_counters(guest)->faults, 0);
        attach(guest, 4 * GIB);
        ck_assert_str_eq(guest_state_string(guest), "learn");
        ck_assert_ptr_null(guest_fault(guest));
        ck_assert_uint_eq(guest_max(guest), 4 * GIB);
        ck_assert_uint_gt(guest_floor(guest), 0);
        ck_assert_uint_lt(guest_floor(guest), GIB);
        ck_assert_uint_eq(updates, 1); /* attaching says so */
}
END_TEST

/* A guest whose size is not known cannot be managed: faulty, for that reason. */
START_TEST(test_no_size_is_a_fault) {
        GuestResources res = {};
        ck_assert_int_eq(guest_attach(guest, &res), -EINVAL);
        ck_assert_int_eq(guest_phase(guest), GUEST_PHASE_FAULTY);
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_NO_SIZE);
        ck_assert_str_eq(guest_state_string(guest), "faulty");
        ck_assert_int_eq(guest_attach(guest, NULL), -EINVAL);
}
END_TEST

/* Readings in, a decision, the history: the core holds a guest it is learning where it is. */
START_TEST(test_cycle_decides) {
        attach(guest, 4 * GIB);
        ck_assert(!guest_has_decision(guest));
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert(guest_has_decision(guest));
        ck_assert_uint_gt(guest_updated_realtime(guest), 0);
        ck_assert_uint_eq(guest_actual(guest), 4 * GIB);
        ck_assert_uint_eq(guest_target(guest), 4 * GIB);
        ck_assert_uint_eq(fake.balloon_calls, 0); /* nothing to move */
        ck_assert_ptr_nonnull(guest_reason(guest));
        ck_assert_ptr_nonnull(guest_tier_string(guest));
        ck_assert_uint_eq(guest_reclaimed(guest), 0);
        GuestHistoryPoint h[4];
        ck_assert_uint_eq(guest_history(guest, h, ARRAY_SIZE(h)), 1);
        ck_assert_uint_eq(h[0].actual, 4 * GIB);
        ck_assert_uint_eq(h[0].target, 4 * GIB);
        ck_assert_uint_eq(updates, 2); /* attach, cycle */
        /* The fault counter had no rate before; a second cycle has one. */
        ck_assert(isnan(guest_major_fault_rate(guest)));
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert(!isnan(guest_major_fault_rate(guest)));
        ck_assert_double_eq(guest_major_fault_rate(guest), 0.0);
        ck_assert_uint_eq(guest_history(guest, h, ARRAY_SIZE(h)), 2);
}
END_TEST

/* The host gives less than the guest wishes: the cycle sends the balloon toward it (one capped
 * step at a time), and the next cycle's reading of the balloon where it went takes the next. */
START_TEST(test_cycle_actuates_the_arbitrated_target) {
        attach(guest, 4 * GIB);
        arbitrated = 3 * GIB;
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_uint_eq(guest_target(guest), 3 * GIB);
        ck_assert_uint_eq(fake.balloon_calls, 1);
        ck_assert_uint_lt(fake.last_balloon, 4 * GIB);
        ck_assert_uint_ge(fake.last_balloon, 3 * GIB);
        ck_assert_uint_eq(guest_balloon_target(guest), fake.last_balloon);
        ck_assert_uint_eq(guest_counters(guest)->resizes[GUEST_ACTUATOR_BALLOON], 1);
        uint64_t first = fake.last_balloon;
        for (unsigned i = 0; i < 20 && guest_actual(guest) > 3 * GIB; i++)
                ck_assert_int_eq(cycle(fake.last_balloon), 0);
        ck_assert_uint_eq(guest_actual(guest), 3 * GIB);
        ck_assert_uint_le(fake.last_balloon, first);
        ck_assert_uint_eq(guest_reclaimed(guest), GIB);
        /* In observe mode nothing is moved, whatever the host wants. */
        RsPolicy observe;
        ck_assert_int_eq(rs_policy_preset("observe-only", &observe), 0);
        ck_assert_int_eq(guest_set_policy(guest, &observe), 0);
        ck_assert_uint_eq(fake.policy_changes, 1);
        unsigned calls = fake.balloon_calls;
        arbitrated = 2 * GIB;
        ck_assert_int_eq(cycle(3 * GIB), 0);
        ck_assert_uint_eq(fake.balloon_calls, calls);
        ck_assert_uint_eq(guest_target(guest), 3 * GIB);
        ck_assert_str_eq(guest_state_string(guest), "observe");
}
END_TEST

/* A cycle that is still running makes the next one a no-op; a held step finishes it only with
 * the last release. */
START_TEST(test_cycle_steps) {
        attach(guest, 4 * GIB);
        ck_assert_int_eq(guest_cycle_begin(guest), 0);
        ck_assert_uint_gt(guest_cycle_started(guest), 0);
        ck_assert_int_eq(guest_cycle_begin(guest), -EBUSY);
        guest_cycle_hold(guest);
        fake_guest_readings(guest, 4 * GIB, ++stats_clock);
        guest_cycle_step_done(guest);
        ck_assert(!guest_has_decision(guest));
        guest_cycle_step_done(guest);
        ck_assert(guest_has_decision(guest));
        ck_assert_uint_eq(guest_cycle_started(guest), 0);
        guest_cycle_step_done(guest); /* one too many: nothing */
        /* A cancelled cycle decides nothing, and the next one may begin. */
        ck_assert_int_eq(guest_cycle_begin(guest), 0);
        guest_cycle_cancel(guest);
        ck_assert_int_eq(guest_cycle_begin(guest), 0);
        guest_cycle_cancel(guest);
        GuestHistoryPoint h[4];
        ck_assert_uint_eq(guest_history(guest, h, ARRAY_SIZE(h)), 1);
        /* A driver whose connection cannot carry the results: the cycle ends without effect. */
        fake.disconnected = true;
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_uint_eq(guest_history(guest, h, ARRAY_SIZE(h)), 1);
}
END_TEST

/* Readings that fail cost the guest its tick, and show as untrusted data: one episode, however
 * many cycles fail, that ends after three clean cycles. */
START_TEST(test_failing_readings_are_one_episode) {
        attach(guest, 4 * GIB);
        for (unsigned i = 0; i < 3; i++) {
                ck_assert_int_eq(guest_cycle_begin(guest), 0);
                guest_cycle_fail(guest, "timed out");
                guest_cycle_step_done(guest);
        }
        ck_assert(!guest_has_decision(guest));
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_UNTRUSTED_DATA);
        ck_assert_ptr_nonnull(strstr(guest_fault(guest), "fake calls failing: timed out"));
        ck_assert_uint_eq(guest_counters(guest)->faults, 1);
        ck_assert_int_eq(guest_phase(guest), GUEST_PHASE_RUNNING); /* still managed */
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_UNTRUSTED_DATA);
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_ptr_null(guest_fault(guest));
        ck_assert_uint_eq(guest_counters(guest)->faults, 1);
}
END_TEST

/* Balloon stats dated in the future lie; stats that never update are stale: either is not fed,
 * and is the fault. */
START_TEST(test_stats_that_lie_or_stall) {
        attach(guest, 4 * GIB);
        ck_assert_int_eq(fake_guest_cycle(guest, 4 * GIB, (uint64_t) time(NULL) + 86400), 0);
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_UNTRUSTED_DATA);
        ck_assert_ptr_nonnull(strstr(guest_fault(guest), "in the future"));
        ck_assert_uint_eq(guest_counters(guest)->faults, 1);
        /* The same last-update again and again: clean for the first cycles (which end the lie's
         * episode after three), stale from the fifth on, a new episode. */
        for (unsigned i = 0; i < 4; i++)
                ck_assert_int_eq(fake_guest_cycle(guest, 4 * GIB, stats_clock), 0);
        ck_assert_ptr_null(guest_fault(guest));
        for (unsigned i = 0; i < 2; i++)
                ck_assert_int_eq(fake_guest_cycle(guest, 4 * GIB, stats_clock), 0);
        ck_assert_ptr_nonnull(strstr(guest_fault(guest), "stale"));
        ck_assert_uint_eq(guest_counters(guest)->faults, 2);
}
END_TEST

/* A fault counter that keeps going backwards is a guest that lies (once is a reboot). */
START_TEST(test_counter_backwards) {
        attach(guest, 4 * GIB);
        RsSample s;
        for (uint64_t major = 5000; major > 2000; major -= 1000) {
                ck_assert_int_eq(guest_cycle_begin(guest), 0);
                fake_guest_readings(guest, 4 * GIB, ++stats_clock);
                rs_sample_init(&s);
                s.counter[RS_COUNTER_MAJOR_FAULTS] = major;
                guest_sample_add(guest, &s);
                guest_cycle_step_done(guest);
        }
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_UNTRUSTED_DATA);
        ck_assert_ptr_nonnull(strstr(guest_fault(guest), "went backwards"));
}
END_TEST

/* A lost connection is an episode; said again it is the same one; attached anew it ends, and the
 * next loss is a second. */
START_TEST(test_connection_episodes) {
        attach(guest, 4 * GIB);
        guest_set_disconnected(guest, "QMP connection lost");
        ck_assert_int_eq(guest_phase(guest), GUEST_PHASE_FAULTY);
        ck_assert_str_eq(guest_state_string(guest), "faulty");
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_CONNECTION);
        ck_assert_uint_eq(guest_counters(guest)->faults, 1);
        unsigned seen = updates;
        guest_set_disconnected(guest, "QMP connection lost");
        ck_assert_uint_eq(updates, seen); /* nothing new to say */
        guest_set_faulty(guest, GUEST_FAULT_NOT_ANSWERING, "no reply in 5 s");
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_NOT_ANSWERING);
        ck_assert_uint_eq(guest_counters(guest)->faults, 1);
        ck_assert_int_eq(guest_cycle_begin(guest), -EAGAIN);
        /* Reconnecting keeps the episode on show, under the note. */
        guest_set_connecting(guest, "reconnecting");
        ck_assert_int_eq(guest_phase(guest), GUEST_PHASE_FAULTY);
        attach(guest, 4 * GIB);
        ck_assert_int_eq(guest_phase(guest), GUEST_PHASE_RUNNING);
        ck_assert_ptr_null(guest_fault(guest));
        guest_set_disconnected(guest, "QMP connection lost again");
        ck_assert_uint_eq(guest_counters(guest)->faults, 2);
}
END_TEST

/* Skipped by design: its own state, no fault episode. */
START_TEST(test_skipped) {
        guest_set_faulty(guest, GUEST_FAULT_SKIPPED, "no balloon device");
        ck_assert_str_eq(guest_state_string(guest), "skipped");
        ck_assert_ptr_nonnull(strstr(guest_fault(guest), "no balloon device"));
        ck_assert_uint_eq(guest_counters(guest)->faults, 0);
        const char *names[32];
        size_t n = guest_all_state_names(names, ARRAY_SIZE(names));
        bool listed = false;
        for (size_t i = 0; i < n; i++)
                listed |= strcmp(names[i], "skipped") == 0;
        ck_assert(listed);
}
END_TEST

/* Paused, the guest is held where it is and cannot be asked to probe; resumed, the next cycle
 * moves it again. */
START_TEST(test_pause_and_resume) {
        attach(guest, 4 * GIB);
        guest_set_paused(guest, true);
        ck_assert(guest_is_paused(guest));
        ck_assert_str_eq(guest_state_string(guest), "paused");
        ck_assert_int_eq(guest_request_probe(guest), -EPERM);
        arbitrated = 3 * GIB;
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_uint_eq(fake.balloon_calls, 0);
        guest_set_paused(guest, false);
        ck_assert_str_eq(guest_state_string(guest), "learn");
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_uint_eq(fake.balloon_calls, 1);
        for (unsigned i = 0; i < 10 && guest_actual(guest) > 3 * GIB; i++)
                ck_assert_int_eq(cycle(fake.last_balloon), 0);
        ck_assert_uint_eq(guest_actual(guest), 3 * GIB);

        /* Asked to probe, the guest is squeezed below where it was held; paused in the middle of
         * it, it gets that size back, since nothing will move it while paused. */
        arbitrated = 0;
        ck_assert_int_eq(guest_request_probe(guest), 0);
        ck_assert_int_eq(cycle(3 * GIB), 0);
        ck_assert_str_eq(guest_state_string(guest), "probe");
        ck_assert_uint_lt(guest_target(guest), 3 * GIB);
        ck_assert_uint_lt(fake.last_balloon, 3 * GIB);
        ck_assert_int_eq(cycle(fake.last_balloon), 0);
        ck_assert_uint_lt(guest_actual(guest), 3 * GIB);
        unsigned calls = fake.balloon_calls;
        guest_set_paused(guest, true);
        ck_assert_uint_eq(fake.balloon_calls, calls + 1);
        ck_assert_uint_eq(fake.last_balloon, 3 * GIB);
        ck_assert_uint_eq(guest_target(guest), 3 * GIB);
}
END_TEST

/* The operator's max caps the policy's; a floor above it makes no valid policy and changes
 * nothing; cleared, the guest may have it all again. */
START_TEST(test_overrides) {
        attach(guest, 4 * GIB);
        ck_assert_int_eq(guest_set_overrides(guest, 0, 2 * GIB), 0);
        uint64_t floor, max;
        guest_overrides(guest, &floor, &max);
        ck_assert_uint_eq(floor, 0);
        ck_assert_uint_eq(max, 2 * GIB);
        ck_assert_uint_eq(guest_max(guest), 2 * GIB);
        ck_assert_uint_eq(guest_policy(guest)->max_bytes, 2 * GIB);
        ck_assert_uint_eq(fake.policy_changes, 1);
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_uint_eq(guest_target(guest), 2 * GIB);
        ck_assert_uint_eq(fake.balloon_calls, 1);
        ck_assert_uint_lt(fake.last_balloon, 4 * GIB);

        ck_assert_int_eq(guest_set_overrides(guest, 3 * GIB, 2 * GIB), -EINVAL);
        guest_overrides(guest, &floor, &max);
        ck_assert_uint_eq(floor, 0);
        ck_assert_uint_eq(max, 2 * GIB);

        ck_assert_int_eq(guest_set_overrides(guest, GIB, 0), 0);
        ck_assert_uint_eq(guest_max(guest), 4 * GIB);
        ck_assert_uint_eq(guest_floor(guest), GIB);
}
END_TEST

/* The agent's problem goes into the reason beside the core's, and its OS decides whether /proc
 * can be read through it. */
START_TEST(test_agent_problem_and_os) {
        attach(guest, 4 * GIB);
        guest_set_agent_answers(guest, false);
        ck_assert(!guest_agent_answers(guest));
        guest_set_agent_problem(guest, "guest agent not answering");
        ck_assert_str_eq(guest_agent_problem(guest), "guest agent not answering");
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_ptr_nonnull(strstr(guest_reason(guest), "; guest agent not answering"));
        guest_set_agent_problem(guest, NULL);
        ck_assert_ptr_null(guest_agent_problem(guest));
        ck_assert_int_eq(cycle(4 * GIB), 0);
        ck_assert_ptr_null(strstr(guest_reason(guest), "agent"));

        ck_assert(guest_agent_reads_procfs(guest)); /* until it says otherwise */
        QgaOsInfo os = {};
        snprintf(os.id, sizeof(os.id), "mswindows");
        os.family = QGA_OS_WINDOWS;
        guest_set_agent_os(guest, &os);
        ck_assert(!guest_agent_reads_procfs(guest));
        ck_assert_str_eq(guest_os_id(guest), "mswindows");
}
END_TEST

/* What an operator chose outlives a restart: the floor and max, and the pause, from the state
 * file, with what the core had learned. */
START_TEST(test_state_file_keeps_the_operator_choices) {
        char *dir = test_mkdtemp();
        FakeGuestDriver fake2 = {};
        Guest *g = new_guest("kept", dir, &fake2);
        attach(g, 4 * GIB);
        ck_assert_int_eq(guest_set_overrides(g, 0, 3 * GIB), 0);
        guest_set_paused(g, true);
        ck_assert_int_eq(fake_guest_cycle(g, 4 * GIB, ++stats_clock), 0);
        ck_assert_int_eq(guest_save_state(g), 0);
        g = guest_free(g);
        ck_assert_uint_eq(fake2.freed, 1);

        FakeGuestDriver fake3 = {};
        g = new_guest("kept", dir, &fake3);
        attach(g, 4 * GIB);
        uint64_t floor, max;
        guest_overrides(g, &floor, &max);
        ck_assert_uint_eq(max, 3 * GIB);
        ck_assert(guest_is_paused(g));
        ck_assert_ptr_nonnull(guest_estimate(g));
        g = guest_free(g);

        /* A state file older than state-stale-after is not trusted for sizes: the guest goes back
         * to the size it was taken over at (here smaller than it is now: nothing to send). */
        FakeGuestDriver fake4 = {};
        g = new_guest("kept", dir, &fake4);
        guest_set_state_stale_usec(g, 1);
        attach(g, 4 * GIB);
        ck_assert(guest_is_paused(g)); /* the operator's choices stand */
        ck_assert_uint_eq(fake4.balloon_calls, 0);
        g = guest_free(g);
        test_rm_rf(dir);
        free(dir);
}
END_TEST

/* A state file that cannot be read: the guest may have been left squeezed by a probe, and goes
 * back to max before it is learned. */
START_TEST(test_unreadable_state_file_gives_max_back) {
        char *dir = test_mkdtemp();
        _cleanup_free_ char *path = NULL;
        ck_assert_int_eq(state_file_path(dir, "squeezed", &path), 0);
        test_write_file(path, "not json");
        FakeGuestDriver f = {};
        Guest *g = new_guest("squeezed", dir, &f);
        attach(g, 2 * GIB);
        ck_assert_uint_eq(f.balloon_calls, 1);
        ck_assert_uint_eq(f.last_balloon, 4 * GIB);
        ck_assert_uint_eq(guest_target(g), 4 * GIB);
        g = guest_free(g);
        test_rm_rf(dir);
        free(dir);
}
END_TEST

/* The override the state file holds, -1 when there is no file (or no such field). */
static int64_t saved_override_max(const char *dir, const char *name) {
        GuestStateRecord rec;
        int64_t v;
        if (state_file_load_guest(dir, name, NULL, &rec) < 0 || guest_state_get_int(&rec, "override_max", &v) < 0)
                return -1;
        return v;
}

/* A change asks for a save: the first after a quiet spell is written at the loop's next turn, the
 * ones that follow within the window wait for it (one write, not one per change), and one still
 * waiting is written as the guest goes. */
START_TEST(test_saves_are_coalesced) {
        char *dir = test_mkdtemp();
        FakeGuestDriver f = {};
        Guest *g = new_guest("saved", dir, &f);
        attach(g, 4 * GIB);
        ck_assert_int_eq(saved_override_max(dir, "saved"), -1);

        ck_assert_int_eq(guest_set_overrides(g, 0, 3 * GIB), 0);
        ck_assert_int_eq(saved_override_max(dir, "saved"), -1); /* not yet: at the loop's turn */
        ck_assert_int_ge(sd_event_run(event, 0), 0);
        ck_assert_int_eq(saved_override_max(dir, "saved"), (int64_t) (3 * GIB));

        ck_assert_int_eq(guest_set_overrides(g, 0, 2 * GIB), 0);
        ck_assert_int_ge(sd_event_run(event, 0), 0);
        ck_assert_int_eq(saved_override_max(dir, "saved"), (int64_t) (3 * GIB)); /* within the window */
        g = guest_free(g);
        ck_assert_int_eq(saved_override_max(dir, "saved"), (int64_t) (2 * GIB));
        test_rm_rf(dir);
        free(dir);
}
END_TEST

/* A save that fails (the directory went) is reported, and kept to be tried again. */
START_TEST(test_failed_save) {
        char *dir = test_mkdtemp();
        _cleanup_free_ char *gone = NULL;
        ck_assert_int_ge(asprintf(&gone, "%s/gone", dir), 0);
        FakeGuestDriver f = {};
        Guest *g = new_guest("unsaved", gone, &f);
        attach(g, 4 * GIB);
        ck_assert_int_lt(guest_save_state(g), 0);
        /* Given a directory that exists, the pending save goes out as the guest goes. */
        ck_assert_int_eq(guest_set_state_dir(g, dir), 0);
        g = guest_free(g);
        ck_assert_int_eq(saved_override_max(dir, "unsaved"), 0);
        test_rm_rf(dir);
        free(dir);
}
END_TEST

/* A state file the core cannot resume from (the policy's controller changed since, or the guest's
 * size did) may have been left by a probe: the guest goes back to its take-over size before it is
 * learned anew. */
START_TEST(test_state_file_of_another_core_or_size) {
        char *dir = test_mkdtemp();
        FakeGuestDriver f1 = {};
        Guest *g = new_guest("moved", dir, &f1);
        attach(g, 4 * GIB);
        ck_assert_int_eq(fake_guest_cycle(g, 4 * GIB, ++stats_clock), 0);
        ck_assert_int_eq(guest_save_state(g), 0);
        g = guest_free(g);

        /* The cost controller now: the probe's snapshot is not its to read. */
        RsPolicy cost;
        const char *bad = NULL;
        ck_assert_int_eq(rs_policy_preset("balanced", &cost), 0);
        cost.core = RS_CORE_COST;
        ck_assert_int_eq(rs_policy_validate(&cost, &bad), 0);
        FakeGuestDriver f2 = {};
        ck_assert_int_eq(guest_new(event, GUEST_SOURCE_QEMU, "moved", NULL, "/run/t.qmp", dir, &cost, &hooks, NULL,
                                   &fake_guest_driver, &f2, &g),
                         0);
        attach(g, 3 * GIB);
        ck_assert_uint_eq(f2.balloon_calls, 1);
        ck_assert_uint_eq(f2.last_balloon, 4 * GIB); /* its take-over size, from the file */
        g = guest_free(g);

        /* The same controller, but the guest was given 8 GiB since. */
        FakeGuestDriver f3 = {};
        g = new_guest("moved", dir, &f3);
        GuestResources res = { .base_memory = 8 * GIB, .balloon_actual = 3 * GIB };
        ck_assert_int_eq(guest_attach(g, &res), 0);
        ck_assert_uint_eq(f3.balloon_calls, 1);
        ck_assert_uint_eq(f3.last_balloon, 4 * GIB);
        g = guest_free(g);
        test_rm_rf(dir);
        free(dir);
}
END_TEST

int main(void) {
        return check_run_case("daemon-guest-cycle", "cycle", setup, teardown, 0,
                              CHECK_TESTS(test_not_running_before_attach, test_no_size_is_a_fault, test_cycle_decides,
                                          test_cycle_actuates_the_arbitrated_target, test_cycle_steps,
                                          test_failing_readings_are_one_episode, test_stats_that_lie_or_stall,
                                          test_counter_backwards, test_connection_episodes, test_skipped,
                                          test_pause_and_resume, test_overrides, test_agent_problem_and_os,
                                          test_state_file_keeps_the_operator_choices,
                                          test_unreadable_state_file_gives_max_back, test_saves_are_coalesced,
                                          test_failed_save, test_state_file_of_another_core_or_size));
}
