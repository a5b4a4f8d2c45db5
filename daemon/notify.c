/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "daemon/notify.h"

#include <errno.h>
#include <stdio.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "common/macro.h"
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
        struct timespec ts;

        /* MONOTONIC_USEC lets systemd match this to the reload it asked for. */
        if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
                return -errno;
        return sd_notifyf(0, "RELOADING=1\nSTATUS=Reloading configuration\nMONOTONIC_USEC=%llu",
                          (unsigned long long) ts.tv_sec * USEC_PER_SEC +
                                  (unsigned long long) ts.tv_nsec / 1000);
}

int notify_stopping(void) {
        return sd_notify(0, "STOPPING=1\nSTATUS=Restoring guests to a safe size and stopping");
}

static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata) {
        uint64_t interval = *(uint64_t *) userdata;
        int r;

        r = sd_notify(0, "WATCHDOG=1");
        if (r < 0)
                log_warning_errno(r, "Cannot ping the service manager's watchdog: %m");

        /* Next deadline from the planned one, not from now, so the pings do not drift late. */
        r = sd_event_source_set_time(s, usec + interval);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        if (r < 0)
                return log_error_errno(r, "Cannot re-arm the watchdog timer: %m");
        return 0;
}

static void free_interval(void *p) {
        free(p);
}

int notify_watchdog_setup(sd_event *event, sd_event_source **ret_source, uint64_t *ret_interval_usec) {
        _cleanup_(freep) uint64_t *interval = NULL;
        sd_event_source *source = NULL;
        uint64_t watchdog_usec = 0;
        int r;

        if (!event)
                return -EINVAL;

        r = sd_watchdog_enabled(0, &watchdog_usec);
        if (r < 0)
                return log_warning_errno(r, "Ignoring a malformed watchdog request from the service manager: %m");
        if (r == 0 || watchdog_usec == 0)
                return 0;

        interval = malloc(sizeof(*interval));
        if (!interval)
                return -ENOMEM;
        *interval = MAX(watchdog_usec / 2, (uint64_t) 1);

        /* Accuracy 0: the default 250 ms slack could eat a short WatchdogSec=. */
        r = sd_event_add_time_relative(event, &source, CLOCK_MONOTONIC, *interval, 0, on_watchdog, interval);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(source, "watchdog");
        /* The source owns the interval from here on. */
        r = sd_event_source_set_destroy_callback(source, free_interval);
        if (r < 0) {
                sd_event_source_unref(source);
                return r;
        }
        uint64_t used = *interval;
        interval = NULL;

        if (ret_interval_usec)
                *ret_interval_usec = used;
        if (ret_source)
                *ret_source = source;
        else {
                /* Floating: the loop keeps it alive. */
                r = sd_event_source_set_floating(source, 1);
                sd_event_source_unref(source);
                if (r < 0)
                        return r;
        }
        return 1;
}
