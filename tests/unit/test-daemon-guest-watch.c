/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The balloon watch and the shutdown actions, through a fake driver (tests/lib/fake-guest-driver.c)
 * and whole cycles: no guest, no socket. The watch judges the balloon's reading of each cycle
 * against the target last sent: a balloon that stops short of it has stalled (pushing stops, the
 * fault says so, and goes once it moves); one that reached its target and then moves away was set
 * from outside (paused, two readings in a row, the first already holding the actuators back); a
 * guest whose balloon driver has not shown is judged on neither. At shutdown the guest is left at
 * the size its action names, only ever grown. */

#include <check.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "common/macro.h"
#include "common/size.h"
#include "daemon/guest.h"
#include "tests/lib/check-run.h"
#include "tests/lib/fake-guest-driver.h"

static sd_event *event;
static FakeGuestDriver fake;
static Guest *guest;
static uint64_t stats_clock;
static uint64_t arbitrated; /* what the host's arbitration gives (0: the guest's wish) */
static unsigned done_calls;
static const HostMemory host = { .mem_total = 64 * GIB, .mem_available = 32 * GIB };

static const HostMemory *hook_host_memory(Guest *g _unused_, void *userdata _unused_) {
        return &host;
}

static uint64_t hook_arbitrate(Guest *g, void *userdata _unused_) {
        return arbitrated ?: guest_want(g);
}

static const GuestHooks hooks = { .host_memory = hook_host_memory, .arbitrate = hook_arbitrate };

static void start(const GuestDriver *driver, uint64_t balloon_actual) {
        RsPolicy policy;

        ck_assert_int_eq(rs_policy_preset("balanced", &policy), 0);
        ck_assert_int_eq(guest_new(event, GUEST_SOURCE_QEMU, "w", NULL, "/run/w.qmp", NULL, &policy, &hooks, NULL,
                                   driver, &fake, &guest),
                         0);
        GuestResources res = { .base_memory = 4 * GIB, .balloon_actual = balloon_actual };
        ck_assert_int_eq(guest_attach(guest, &res), 0);
}

static void setup(void) {
        ck_assert_int_eq(sd_event_new(&event), 0);
        fake = (FakeGuestDriver) {};
        arbitrated = 0;
        done_calls = 0;
        stats_clock = (uint64_t) time(NULL) - 3600;
        start(&fake_guest_driver, 4 * GIB);
}

static void teardown(void) {
        guest = guest_free(guest);
        event = sd_event_unref(event);
}

static void cycle(uint64_t balloon_actual) {
        ck_assert_int_eq(fake_guest_cycle(guest, balloon_actual, ++stats_clock), 0);
}

/* The balloon sent toward 3.5 GiB, step by step, each read where it was sent: the watch has
 * seen it reach its target, and the calls are reset to count what comes next. */
static uint64_t reach(void) {
        arbitrated = 3 * GIB + GIB / 2;
        cycle(4 * GIB);
        ck_assert_uint_ge(fake.balloon_calls, 1);
        for (unsigned i = 0; i < 10 && guest_balloon_target(guest) != 3 * GIB + GIB / 2; i++)
                cycle(fake.last_balloon);
        ck_assert_uint_eq(fake.last_balloon, 3 * GIB + GIB / 2);
        cycle(fake.last_balloon);
        fake.balloon_calls = 0;
        return fake.last_balloon;
}

/* A balloon that does not move toward its target: after four cycles the guest is held where it
 * stopped, with the fault, and not pushed further; the core asking for that size again lets go,
 * and the fault goes once the balloon moves. */
START_TEST(test_stall) {
        ck_assert_int_eq(guest_set_overrides(guest, 0, 2 * GIB), 0);
        cycle(4 * GIB);
        ck_assert_uint_eq(fake.balloon_calls, 1);
        uint64_t sent = fake.last_balloon;
        for (unsigned i = 0; i < 3; i++) {
                cycle(4 * GIB);
                ck_assert_int_ne(guest_fault_kind(guest), GUEST_FAULT_BALLOON_STALLED);
        }
        cycle(4 * GIB);
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_BALLOON_STALLED);
        ck_assert_ptr_nonnull(strstr(guest_reason(guest), "balloon stopped at"));
        ck_assert_uint_eq(guest_counters(guest)->faults, 1);
        ck_assert_uint_eq(fake.balloon_calls, 1); /* the stall's own target is the one it has */
        ck_assert_uint_eq(guest_balloon_target(guest), sent);
        for (unsigned i = 0; i < 3; i++)
                cycle(4 * GIB);
        ck_assert_uint_eq(fake.balloon_calls, 1); /* held back */
        ck_assert_uint_eq(guest_counters(guest)->faults, 1);

        /* The operator lifts the max: the core wants the guest's size again, pushing resumes; the
         * fault stays on show until the balloon moves away from where it stuck. */
        ck_assert_int_eq(guest_set_overrides(guest, 0, 0), 0);
        cycle(4 * GIB);
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_BALLOON_STALLED);
        cycle(4 * GIB - GIB / 4);
        ck_assert_ptr_null(guest_fault(guest));
}
END_TEST

/* Until the balloon driver shows (stats, or the balloon moving), a balloon short of its target is
 * a guest still booting: no stall. */
START_TEST(test_no_stall_before_the_balloon_driver) {
        ck_assert_int_eq(guest_set_overrides(guest, 0, 2 * GIB), 0);
        for (unsigned i = 0; i < 8; i++)
                ck_assert_int_eq(fake_guest_cycle(guest, 4 * GIB, 0), 0);
        ck_assert_uint_ge(fake.balloon_calls, 1);
        ck_assert_ptr_null(guest_fault(guest));
        /* The stats come: the driver is there, and a stuck balloon is judged. */
        for (unsigned i = 0; i < 5; i++)
                cycle(4 * GIB);
        ck_assert_int_eq(guest_fault_kind(guest), GUEST_FAULT_BALLOON_STALLED);
}
END_TEST

/* Reached, then 1 GiB below with no new target from us: someone else set it. The first reading
 * holds the actuators back, the second pauses the guest; resumed, ours is sent again. */
START_TEST(test_set_below_from_outside) {
        uint64_t sent = reach();
        arbitrated = 3 * GIB;
        cycle(sent - GIB);
        ck_assert(!guest_is_paused(guest));
        ck_assert_uint_eq(fake.balloon_calls, 0); /* held back while being confirmed */
        cycle(sent - GIB);
        ck_assert(guest_is_paused(guest));
        ck_assert_str_eq(guest_state_string(guest), "paused");
        ck_assert_ptr_nonnull(strstr(guest_reason(guest), "balloon set from outside"));
        ck_assert_ptr_nonnull(strstr(guest_reason(guest), "below"));
        ck_assert_uint_eq(fake.balloon_calls, 0);
        cycle(sent - GIB);
        ck_assert_uint_eq(fake.balloon_calls, 0); /* paused: theirs stays */

        guest_set_paused(guest, false);
        ck_assert(!guest_is_paused(guest));
        cycle(sent - GIB);
        ck_assert_uint_eq(fake.balloon_calls, 1);
        ck_assert_uint_gt(fake.last_balloon, sent - GIB);
}
END_TEST

/* Raised above the target it had reached: the raise is confirmed by the guest's balloon driver
 * reporting again (a rebooting guest's has not), then the guest is paused. */
START_TEST(test_raised_from_outside) {
        uint64_t sent = reach();
        cycle(sent + GIB / 2);
        ck_assert(!guest_is_paused(guest));
        /* The stats did not move on: the driver may be gone (a reboot), so the raise waits. */
        ck_assert_int_eq(fake_guest_cycle(guest, sent + GIB / 2, stats_clock), 0);
        ck_assert(!guest_is_paused(guest));
        cycle(sent + GIB / 2);
        ck_assert(guest_is_paused(guest));
        ck_assert_ptr_nonnull(strstr(guest_reason(guest), "above"));
        ck_assert_uint_eq(fake.balloon_calls, 0);
}
END_TEST

/* A paused guest is not moved at shutdown: one another controller raised (paused by the
 * watch), and one its operator paused, with every action that would grow it. */
START_TEST(test_shutdown_leaves_a_paused_guest) {
        uint64_t sent = reach();
        cycle(sent + GIB / 2);
        cycle(sent + GIB / 2);
        ck_assert(guest_is_paused(guest));
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_MAX, NULL, NULL), 0);
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_ESTIMATE, NULL, NULL), 0);
        ck_assert_uint_eq(fake.balloon_calls, 0);

        guest = guest_free(guest);
        start(&fake_guest_driver, 4 * GIB);
        sent = reach();
        ck_assert_uint_lt(sent, 4 * GIB);
        guest_set_paused(guest, true);
        unsigned calls = fake.balloon_calls;
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_MAX, NULL, NULL), 0);
        ck_assert_uint_eq(fake.balloon_calls, calls);
}
END_TEST

/* A raise with the fault counter gone backwards is the guest rebooting: not someone else's. */
START_TEST(test_raise_after_a_reboot) {
        uint64_t sent = reach();
        cycle(sent + GIB / 2);
        ck_assert_int_eq(guest_cycle_begin(guest), 0);
        fake_guest_readings(guest, sent + GIB / 2, ++stats_clock);
        RsSample s;
        rs_sample_init(&s);
        s.counter[RS_COUNTER_MAJOR_FAULTS] = 10; /* counted from boot again */
        guest_sample_add(guest, &s);
        guest_cycle_step_done(guest);
        ck_assert(!guest_is_paused(guest));
        for (unsigned i = 0; i < 3; i++)
                cycle(sent + GIB / 2);
        ck_assert(!guest_is_paused(guest));
}
END_TEST

/* keep: nothing is sent. */
START_TEST(test_shutdown_keep) {
        cycle(4 * GIB);
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_KEEP, NULL, NULL), 0);
        ck_assert_uint_eq(fake.balloon_calls, 0);
}
END_TEST

/* max: a squeezed guest gets all of it back, through set_balloon (synchronous). */
START_TEST(test_shutdown_max) {
        uint64_t sent = reach();
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_MAX, NULL, NULL), 0);
        ck_assert_uint_eq(fake.balloon_calls, 1);
        ck_assert_uint_eq(fake.last_balloon, 4 * GIB);
        ck_assert_uint_lt(sent, 4 * GIB);
}
END_TEST

/* estimate with nothing learned yet: the size the guest had when taken over, not max (a stop
 * comes with every package upgrade, and must not grow guests). */
START_TEST(test_shutdown_estimate_before_learning) {
        guest = guest_free(guest);
        start(&fake_guest_driver, 3 * GIB);
        arbitrated = 2 * GIB + GIB / 2;
        cycle(3 * GIB);
        ck_assert_uint_eq(fake.balloon_calls, 1);
        guest_set_balloon_actual(guest, fake.last_balloon);
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_ESTIMATE, NULL, NULL), 0);
        ck_assert_uint_eq(fake.balloon_calls, 2);
        ck_assert_uint_eq(fake.last_balloon, 3 * GIB);
}
END_TEST

static void on_done(Guest *g _unused_, void *userdata _unused_) {
        done_calls++;
}

/* A driver with its own shutdown call: it goes out (1) and reports through done(). */
START_TEST(test_shutdown_async) {
        guest = guest_free(guest);
        start(&fake_guest_driver_async, 4 * GIB);
        reach();
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_MAX, on_done, NULL), 1);
        ck_assert_uint_eq(fake.shutdown_calls, 1);
        ck_assert_uint_eq(fake.shutdown_balloon, 4 * GIB);
        ck_assert_uint_eq(done_calls, 0);
        fake_guest_driver_finish_shutdown(&fake);
        ck_assert_uint_eq(done_calls, 1);
}
END_TEST

/* Nothing to do at shutdown: observe mode, a lost connection, a guest never attached; and a
 * refusal is reported. */
START_TEST(test_shutdown_nothing_or_refused) {
        reach();
        fake.disconnected = true;
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_MAX, NULL, NULL), 0);
        fake.disconnected = false;
        ck_assert_uint_eq(fake.balloon_calls, 0);
        fake.balloon_reply = -EIO;
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_MAX, NULL, NULL), -EIO);
        fake.balloon_reply = 0;

        RsPolicy observe;
        ck_assert_int_eq(rs_policy_preset("observe-only", &observe), 0);
        ck_assert_int_eq(guest_set_policy(guest, &observe), 0);
        unsigned calls = fake.balloon_calls;
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_MAX, NULL, NULL), 0);
        ck_assert_uint_eq(fake.balloon_calls, calls);

        guest_stop(guest);
        ck_assert_uint_eq(fake.stops, 1);
}
END_TEST

int main(void) {
        return check_run_case("daemon-guest-watch", "watch", setup, teardown, 0,
                              CHECK_TESTS(test_stall, test_no_stall_before_the_balloon_driver,
                                          test_set_below_from_outside, test_raised_from_outside,
                                          test_shutdown_leaves_a_paused_guest,
                                          test_raise_after_a_reboot, test_shutdown_keep, test_shutdown_max,
                                          test_shutdown_estimate_before_learning, test_shutdown_async,
                                          test_shutdown_nothing_or_refused));
}
