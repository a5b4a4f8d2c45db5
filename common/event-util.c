/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "common/event-util.h"

#include <errno.h>

int event_reset_time(sd_event *e, sd_event_source **s, clockid_t clock, uint64_t usec, uint64_t accuracy,
                     sd_event_time_handler_t callback, void *userdata, const char *description) {
        int r;

        if (!e || !s)
                return -EINVAL;

        if (!*s) {
                r = sd_event_add_time(e, s, clock, usec, accuracy, callback, userdata);
                if (r < 0)
                        return r;
                if (description)
                        (void) sd_event_source_set_description(*s, description);
                return 0;
        }

        /* Each setter re-sorts sd-event's time queues: a periodic timer keeps its accuracy. */
        uint64_t current;
        if (sd_event_source_get_time_accuracy(*s, &current) < 0 || current != accuracy) {
                r = sd_event_source_set_time_accuracy(*s, accuracy);
                if (r < 0)
                        return r;
        }
        r = sd_event_source_set_time(*s, usec);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(*s, SD_EVENT_ONESHOT);
}

int event_reset_time_relative(sd_event *e, sd_event_source **s, clockid_t clock, uint64_t usec, uint64_t accuracy,
                              sd_event_time_handler_t callback, void *userdata, const char *description) {
        uint64_t now;
        int r;

        if (!e)
                return -EINVAL;
        r = sd_event_now(e, clock, &now);
        if (r < 0)
                return r;
        return event_reset_time(e, s, clock, usec > UINT64_MAX - now ? UINT64_MAX : now + usec, accuracy, callback,
                                userdata, description);
}

int event_source_is_armed(sd_event_source *s) {
        int enabled = SD_EVENT_OFF;

        return s && sd_event_source_get_enabled(s, &enabled) >= 0 && enabled != SD_EVENT_OFF;
}
