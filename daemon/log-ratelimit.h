/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How many lines a guest may put in the log, in the manner of systemd's ratelimit: per guest and
 * call site, at most `burst` lines an interval, and per guest, at most `guest_burst` over all
 * its sites (events, the lines with a MESSAGE_ID, excepted: a FAULT or an EMERGENCY is never
 * crowded out by the guest's own chatter). A guest decides what it sends, and so what the
 * daemon says about it: without a limit, a guest that changes its text every tick could trip
 * journald's per-unit limit, and every guest's events would be dropped with its lines. The
 * first line let through after lines were dropped says how many. Thread-safe. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/macro.h"

#define LOG_RATELIMIT_INTERVAL_USEC (30 * USEC_PER_SEC)
#define LOG_RATELIMIT_BURST 10        /* per guest and call site */
#define LOG_RATELIMIT_GUEST_BURST 100 /* per guest, events aside */

typedef struct LogRatelimitVerdict {
        bool write;
        unsigned suppressed_here;  /* dropped at this guest and site since its last line written */
        unsigned suppressed_guest; /* dropped over the guest's budget since its last window */
} LogRatelimitVerdict;

/* Whether a line of `guest` from file:line goes out now. */
LogRatelimitVerdict log_ratelimit_check(const char *guest, const char *file, int line, bool event);

/* For tests: the limits (0 burst: none), the clock (NULL: CLOCK_MONOTONIC), and forgetting
 * every count. */
void log_ratelimit_configure(uint64_t interval_usec, unsigned burst, unsigned guest_burst);
void log_ratelimit_set_clock(uint64_t (*now)(void));
void log_ratelimit_reset(void);
