/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The service manager's side channel: READY/RELOADING/STOPPING, the STATUS= line that
 * `systemctl status rightsized` shows, and the watchdog keep-alive. Outside systemd ($NOTIFY_SOCKET
 * unset) every call is a harmless no-op. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

/* "Managing 3 guests, 1536 MiB reclaimed". With api_error (the D-Bus API is down, NULL when it is
 * not), "D-Bus API unavailable: API_ERROR; managing 3 guests, 1536 MiB reclaimed": first, so that a
 * truncated `systemctl status` still shows it; control characters in it become spaces, since a
 * newline would start another assignment of the notify message. Returns the length snprintf()
 * would have written. */
int notify_format_status(char *buf, size_t len, unsigned n_guests, uint64_t reclaimed_bytes, const char *api_error);

/* Each returns what sd_notify() returns: > 0 sent, 0 not running under systemd, < 0 error. */
int notify_ready(unsigned n_guests, uint64_t reclaimed_bytes, const char *api_error);
int notify_status(unsigned n_guests, uint64_t reclaimed_bytes, const char *api_error);
int notify_reloading(void);  /* for Type=notify-reload semantics; end the reload with notify_ready() */
int notify_stopping(void);

/* If the service manager asked for a watchdog (WatchdogSec=, seen as $WATCHDOG_USEC for our pid),
 * has `event` send WATCHDOG=1 (sd_event_set_watchdog(): at once, then between a half and three
 * quarters of the interval) for as long as the loop lives. Returns 1 when on, 0 when no watchdog
 * is wanted, or -errno. Because the ping runs on the loop, a loop that hangs stops it, and systemd
 * restarts us. */
int notify_watchdog_setup(sd_event *event);
