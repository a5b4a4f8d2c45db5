/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The create-or-re-arm of a one-shot timer, in the manner of systemd's event_reset_time(): the
 * first call adds the source, later ones move it and enable it again, so a caller keeps one
 * sd_event_source per timer and never repeats the add/set_time/set_enabled dance. */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

/* Fires *s once at `usec` on `clock` (absolute); `accuracy` as sd_event_add_time() takes it (0:
 * sd-event's default). `description` names the source when it is created (NULL: none). Returns 0
 * or -errno; on failure an existing *s is left as it was. */
int event_reset_time(sd_event *e, sd_event_source **s, clockid_t clock, uint64_t usec, uint64_t accuracy,
                     sd_event_time_handler_t callback, void *userdata, const char *description);

/* The same, `usec` from the loop's now (sd_event_now()). */
int event_reset_time_relative(sd_event *e, sd_event_source **s, clockid_t clock, uint64_t usec, uint64_t accuracy,
                              sd_event_time_handler_t callback, void *userdata, const char *description);

/* Whether *s is armed (created and not yet fired or disabled). */
int event_source_is_armed(sd_event_source *s);
