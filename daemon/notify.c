/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "daemon/notify.h"

#include <errno.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "daemon/log.h"

/* Room for the D-Bus API's reason (Manager.bus_error) besides the counts. */
#define STATUS_MAX 512

int notify_format_status(char *buf, size_t len, unsigned n_guests, uint64_t reclaimed_bytes, const char *api_error) {
        unsigned long long mib = reclaimed_bytes / MIB;
        const char *plural = n_guests == 1 ? "" : "s";
        int n;

        if (!api_error)
                return snprintf(buf, len, "Managing %u guest%s, %llu MiB reclaimed", n_guests, plural, mib);

        n = snprintf(buf, len, "D-Bus API unavailable: %s; managing %u guest%s, %llu MiB reclaimed", api_error,
                     n_guests, plural, mib);
        for (char *p = buf; len > 0 && *p; p++)
                if ((unsigned char) *p < ' ' || *p == 0x7f)
                        *p = ' ';
        return n;
}

int notify_status(unsigned n_guests, uint64_t reclaimed_bytes, const char *api_error) {
        char status[STATUS_MAX];

        notify_format_status(status, sizeof(status), n_guests, reclaimed_bytes, api_error);
        return sd_notifyf(0, "STATUS=%s", status);
}

int notify_ready(unsigned n_guests, uint64_t reclaimed_bytes, const char *api_error) {
        char status[STATUS_MAX];

        notify_format_status(status, sizeof(status), n_guests, reclaimed_bytes, api_error);
        return sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

int notify_reloading(void) {
        /* MONOTONIC_USEC lets systemd match this to the reload it asked for. */
        return sd_notifyf(0, "RELOADING=1\nSTATUS=Reloading configuration\nMONOTONIC_USEC=%llu",
                          (unsigned long long) now_usec(CLOCK_MONOTONIC));
}

int notify_stopping(void) {
        return sd_notify(0, "STOPPING=1\nSTATUS=Restoring guests to a safe size and stopping");
}

int notify_watchdog_setup(sd_event *event) {
        int r;

        if (!event)
                return -EINVAL;

        /* sd-event pings from inside the loop itself, so a loop that hangs stops the pings. */
        r = sd_event_set_watchdog(event, true);
        if (r < 0)
                return log_warning_errno(r, "Ignoring a malformed watchdog request from the service manager: %m");
        return r;
}
