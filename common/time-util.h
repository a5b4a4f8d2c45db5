/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one clock reader outside sd-event's: every other file reads the time through now_usec()
 * (policies/ reads none: `now` is passed in). */
#pragma once

#include <stdint.h>
#include <time.h>

#include "common/macro.h"

/* Microseconds on `clock` (CLOCK_MONOTONIC for timeouts and intervals, CLOCK_REALTIME for
 * what is shown or saved). */
static inline uint64_t now_usec(clockid_t clock) {
        struct timespec ts;
        (void) clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}
