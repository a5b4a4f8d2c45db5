/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An actuator call that fails is rolled back the same way whatever the transport
 * (guest_actuator_done(), daemon/guest-actuate.c): a guest driven by a fake driver, whose calls
 * are answered by the test. A refused balloon call puts back the target the balloon had before;
 * a call whose fate is unknown (a timeout) leaves the target to the balloon watch; a later call's
 * target replaces an earlier one's; a call merged into one still queued adds no outcome to wait
 * for; a reconnection forgets the calls of the old connection.
 *
 * White-box: it drives guest_actuate() through guest-internal.h, as the cycle would once the
 * core decided, so that no estimator has to be walked to a resize first. */

#include <check.h>
#include <errno.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "daemon/guest-internal.h"
#include "tests/lib/check-run.h"

typedef struct FakeDriver {
        int reply;                /* what set_balloon returns: 1 sent, 0 merged or done, -errno */
        unsigned balloon_calls;
        uint64_t last_balloon;
} FakeDriver;

static int fake_set_balloon(Guest *g _unused_, uint64_t bytes, void *userdata) {
        FakeDriver *f = userdata;
        f->balloon_calls++;
        f->last_balloon = bytes;
        return f->reply;
}

static int fake_set_virtio_mem(Guest *g _unused_, uint64_t requested, uint64_t *ret_requested, void *userdata _unused_) {
        *ret_requested = requested;
        return 1;
}

static const GuestDriver fake_driver = {
        .set_balloon = fake_set_balloon,
        .set_virtio_mem = fake_set_virtio_mem,
};

static sd_event *event;
static FakeDriver fake;
static Guest *guest;

static void setup(void) {
        RsPolicy policy;

        ck_assert_int_eq(sd_event_new(&event), 0);
        ck_assert_int_eq(rs_policy_preset("balanced", &policy), 0);
        fake = (FakeDriver) { .reply = 1 };
        ck_assert_int_eq(guest_new(event, GUEST_SOURCE_QEMU, "t", NULL, "/run/t.qmp", NULL, &policy, NULL, NULL,
                                   &fake_driver, &fake, &guest),
                         0);
        GuestResources res = { .base_memory = 4 * GIB, .actual = 4 * GIB };
        ck_assert_int_eq(guest_attach(guest, &res), 0);
        ck_assert_int_eq(guest_phase(guest), GUEST_PHASE_RUNNING);
}

static void teardown(void) {
        guest = guest_free(guest);
        event = sd_event_unref(event);
}

/* The cycle's actuation toward target; returns the balloon size sent (0: none). The balloon is
 * then read where it was sent, as the next cycle would (a step is capped from where it is). */
static uint64_t actuate(uint64_t target) {
        unsigned before = fake.balloon_calls;
        guest_actuate(guest, target, true, true, now_usec(CLOCK_MONOTONIC));
        if (fake.balloon_calls == before)
                return 0;
        guest_set_actual(guest, fake.last_balloon);
        return fake.last_balloon;
}

START_TEST(test_refused_call_puts_the_target_back) {
        uint64_t sent = actuate(3 * GIB);
        ck_assert_uint_gt(sent, 0);
        ck_assert_uint_eq(guest_balloon_target(guest), sent);
        ck_assert_uint_eq(guest_counters(guest)->resizes[GUEST_ACTUATOR_BALLOON], 1);

        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_REFUSED, -EINVAL, "no balloon device");
        ck_assert_uint_eq(guest_balloon_target(guest), 0); /* never set before */
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_BALLOON], 1);

        /* An outcome nobody waits for any more (reported twice) changes nothing. */
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_REFUSED, -EINVAL, NULL);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_BALLOON], 1);
}
END_TEST

START_TEST(test_done_call_keeps_its_target) {
        uint64_t sent = actuate(3 * GIB);
        ck_assert_uint_gt(sent, 0);
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_DONE, 0, NULL);
        ck_assert_uint_eq(guest_balloon_target(guest), sent);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_BALLOON], 0);
}
END_TEST

START_TEST(test_unknown_outcome_keeps_the_target) {
        uint64_t sent = actuate(3 * GIB);
        ck_assert_uint_gt(sent, 0);
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_UNKNOWN, -ETIMEDOUT, NULL);
        ck_assert_uint_eq(guest_balloon_target(guest), sent);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_BALLOON], 1);
}
END_TEST

/* Two calls out: the first refused while the second is still out changes nothing yet; the second
 * decides. */
START_TEST(test_last_call_of_a_run_decides) {
        uint64_t first = actuate(3 * GIB);
        ck_assert_uint_gt(first, 0);
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_DONE, 0, NULL);
        uint64_t second = actuate(2 * GIB);
        uint64_t third = actuate(GIB + GIB / 2);
        ck_assert_uint_gt(second, 0);
        ck_assert_uint_gt(third, 0);
        ck_assert_uint_ne(second, third);

        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_REFUSED, -EIO, NULL);
        ck_assert_uint_eq(guest_balloon_target(guest), third);
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_DONE, 0, NULL);
        ck_assert_uint_eq(guest_balloon_target(guest), third);

        /* Both refused: back to where the run began, the first call's target. */
        uint64_t fourth = actuate(GIB);
        uint64_t fifth = actuate(GIB / 2 + GIB / 4);
        ck_assert_uint_gt(fourth, 0);
        ck_assert_uint_gt(fifth, 0);
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_REFUSED, -EIO, NULL);
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_REFUSED, -EIO, NULL);
        ck_assert_uint_eq(guest_balloon_target(guest), third);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_BALLOON], 3);
}
END_TEST

/* A call merged into one still queued (0) is covered by that one's outcome. */
START_TEST(test_merged_call_adds_no_outcome) {
        uint64_t first = actuate(3 * GIB);
        fake.reply = 0;
        uint64_t merged = actuate(2 * GIB);
        ck_assert_uint_gt(first, 0);
        ck_assert_uint_gt(merged, 0);
        ck_assert_uint_eq(guest_balloon_target(guest), merged);
        /* The queued call's one outcome: refused, so neither target was set. */
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_REFUSED, -EIO, NULL);
        ck_assert_uint_eq(guest_balloon_target(guest), 0);
}
END_TEST

/* A refusal at once is counted, and the target stays what it was. */
START_TEST(test_refused_at_once) {
        fake.reply = -EIO;
        actuate(3 * GIB);
        ck_assert_uint_eq(guest_balloon_target(guest), 0);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_BALLOON], 1);
        ck_assert_uint_eq(guest_counters(guest)->resizes[GUEST_ACTUATOR_BALLOON], 0);
}
END_TEST

/* Calls sent on a connection that went away never report: the guest attached anew forgets them. */
START_TEST(test_reconnection_forgets_calls) {
        uint64_t sent = actuate(3 * GIB);
        ck_assert_uint_gt(sent, 0);
        guest_set_disconnected(guest, "QMP connection lost");
        GuestResources res = { .base_memory = 4 * GIB, .actual = 4 * GIB };
        ck_assert_int_eq(guest_attach(guest, &res), 0);
        guest_actuator_done(guest, GUEST_ACTUATOR_BALLOON, GUEST_CALL_REFUSED, -ECONNRESET, NULL);
        ck_assert_uint_eq(guest_balloon_target(guest), sent);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_BALLOON], 0);
}
END_TEST

int main(void) {
        return check_run_case("daemon-guest-actuate", "rollback", setup, teardown, 0,
                              CHECK_TESTS(test_refused_call_puts_the_target_back, test_done_call_keeps_its_target,
                                          test_unknown_outcome_keeps_the_target, test_last_call_of_a_run_decides,
                                          test_merged_call_adds_no_outcome, test_refused_at_once,
                                          test_reconnection_forgets_calls));
}
