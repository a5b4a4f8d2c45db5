/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* common/event-util.c: the one create-or-re-arm of a one-shot timer. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <systemd/sd-event.h>

#include "common/event-util.h"
#include "common/macro.h"
#include "common/time-util.h"
#include "tests/lib/check-run.h"

static int on_fire(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

/* Runs the loop for about `usec`. */
static void run_for(sd_event *e, uint64_t usec) {
        uint64_t until = now_usec(CLOCK_MONOTONIC) + usec;

        while (now_usec(CLOCK_MONOTONIC) < until)
                ck_assert_int_ge(sd_event_run(e, until - now_usec(CLOCK_MONOTONIC)), 0);
}

START_TEST(test_create_fire_rearm) {
        sd_event *e = NULL;
        sd_event_source *s = NULL;
        unsigned fired = 0;
        const char *description = NULL;

        ck_assert_int_ge(sd_event_new(&e), 0);
        ck_assert_int_eq(event_source_is_armed(s), 0);

        /* The first call creates it, named. */
        ck_assert_int_eq(event_reset_time_relative(e, &s, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 1, on_fire, &fired,
                                                   "test-timer"), 0);
        ck_assert_ptr_nonnull(s);
        ck_assert_int_eq(sd_event_source_get_description(s, &description), 0);
        ck_assert_str_eq(description, "test-timer");
        ck_assert_int_eq(event_source_is_armed(s), 1);
        run_for(e, 100 * USEC_PER_MSEC);
        ck_assert_uint_eq(fired, 1); /* once */
        ck_assert_int_eq(event_source_is_armed(s), 0);

        /* Later calls re-arm the same source, which fires once more. */
        sd_event_source *first = s;
        ck_assert_int_eq(event_reset_time_relative(e, &s, CLOCK_MONOTONIC, 10 * USEC_PER_MSEC, 1, on_fire, &fired,
                                                   "test-timer"), 0);
        ck_assert_ptr_eq(s, first);
        ck_assert_int_eq(event_source_is_armed(s), 1);
        run_for(e, 100 * USEC_PER_MSEC);
        ck_assert_uint_eq(fired, 2);

        sd_event_source_disable_unref(s);
        sd_event_unref(e);
}
END_TEST

START_TEST(test_move_armed) {
        sd_event *e = NULL;
        sd_event_source *s = NULL;
        unsigned fired = 0;
        uint64_t now, when = 0;

        ck_assert_int_ge(sd_event_new(&e), 0);
        ck_assert_int_eq(event_reset_time_relative(e, &s, CLOCK_MONOTONIC, 20 * USEC_PER_MSEC, 1, on_fire, &fired,
                                                   NULL), 0);
        /* Moved before it fired: it fires at the new time only, once. */
        ck_assert_int_ge(sd_event_now(e, CLOCK_MONOTONIC, &now), 0);
        ck_assert_int_eq(event_reset_time(e, &s, CLOCK_MONOTONIC, now + 200 * USEC_PER_MSEC, 1, on_fire, &fired, NULL),
                         0);
        ck_assert_int_eq(sd_event_source_get_time(s, &when), 0);
        ck_assert_uint_eq(when, now + 200 * USEC_PER_MSEC);
        run_for(e, 100 * USEC_PER_MSEC);
        ck_assert_uint_eq(fired, 0);
        run_for(e, 200 * USEC_PER_MSEC);
        ck_assert_uint_eq(fired, 1);

        ck_assert_int_eq(event_reset_time(NULL, &s, CLOCK_MONOTONIC, 0, 0, on_fire, &fired, NULL), -EINVAL);
        sd_event_source_disable_unref(s);
        sd_event_unref(e);
}
END_TEST

int main(void) {
        return check_run_case("event-util", "timer", NULL, NULL, 10, CHECK_TESTS(test_create_fire_rearm, test_move_armed));
}
