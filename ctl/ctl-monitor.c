/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl monitor: a line (or a JSON object) per EstimateChanged signal as it arrives. */
#include "ctl/ctl-monitor.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "common/size.h"
#include "common/time-util.h"
#include "ctl/ctl-bus.h"

typedef struct Monitor {
        sd_bus *bus;
        sd_event *event;   /* its own pointer: a closed bus forgets its event loop */
        const char *guest; /* only this one's signals, or every guest's */
        size_t name_width; /* the name column: the widest name of the guests followed */
        CtlJsonMode json;  /* one JSON object a line rather than text */
} Monitor;

/* EstimateChanged(s name, t estimate, t lower, t upper), 0 for unknown (the estimate: only before
 * the guest's first; daemon/dbus-api.md). It carries no target or state: those are what GetGuest
 * says right after it. */
static int monitor_estimate_changed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error _unused_) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(ctl_guest_done) CtlGuest g;
        Monitor *mon = userdata;
        const char *name;
        uint64_t estimate, lower, upper;
        int r;

        ctl_guest_init(&g);
        r = sd_bus_message_read(m, "sttt", &name, &estimate, &lower, &upper);
        if (r < 0) {
                fprintf(stderr, "rightsizectl: monitor: an EstimateChanged signal that cannot be read: %s\n",
                        strerror(-r));
                return 0;
        }
        if (mon->guest && strcmp(mon->guest, name) != 0)
                return 0;

        CtlEstimateEvent e = {
                .usec = now_usec(CLOCK_REALTIME),
                .name = name,
                .estimate = estimate > 0 ? estimate : CTL_UNKNOWN,
                .lower = lower > 0 ? lower : CTL_UNKNOWN,
                .upper = upper > 0 ? upper : CTL_UNKNOWN,
                .target = CTL_UNKNOWN,
        };
        /* Quietly: a guest gone since, or a daemon that does not answer, leaves them unknown. */
        if (sd_bus_call_method(mon->bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "GetGuest", NULL, &reply, "s",
                               name) >= 0 &&
            ctl_bus_read_guest(reply, &g) >= 0) {
                e.target = g.target;
                e.state = g.state;
                e.fault = g.fault && !ctl_guest_skipped(&g);
                e.paused = g.paused > 0;
        }
        if (mon->json) {
                json_object *o = ctl_estimate_event_to_json(&e);
                r = o ? ctl_print_json_mode(stdout, o, CTL_JSON_SHORT) : -ENOMEM; /* one object a line */
                json_object_put(o);
        } else
                r = ctl_print_estimate_event(stdout, &e, &mon->name_width);
        /* Each line as it happens, also into a pipe or a file. */
        if (r < 0 || fflush(stdout) != 0 || ferror(stdout)) {
                fprintf(stderr, "rightsizectl: monitor: cannot write: %s\n", strerror(r < 0 ? -r : errno));
                return sd_event_exit(mon->event, EXIT_FAIL);
        }
        return 0;
}

/* Said on stderr, so that stdout stays one line per change: the daemon stopped or came back. The
 * match stays, so a restarted daemon's signals are followed too. */
static int monitor_owner_changed(sd_bus_message *m, void *userdata _unused_, sd_bus_error *ret_error _unused_) {
        const char *name, *old_owner, *new_owner;

        if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0 || strcmp(name, RS_BUS_NAME) != 0)
                return 0;
        if (new_owner[0] == '\0')
                fprintf(stderr, "rightsizectl: monitor: rightsized left the bus; waiting for it to come back\n");
        else if (old_owner[0] == '\0')
                fprintf(stderr, "rightsizectl: monitor: rightsized is back\n");
        return 0;
}

static int monitor_disconnected(sd_bus_message *m _unused_, void *userdata, sd_bus_error *ret_error _unused_) {
        Monitor *mon = userdata;
        fprintf(stderr, "rightsizectl: monitor: the connection to the bus was lost\n");
        return sd_event_exit(mon->event, EXIT_NO_DAEMON);
}

static int monitor_signal(sd_event_source *s, const struct signalfd_siginfo *si _unused_, void *userdata _unused_) {
        return sd_event_exit(sd_event_source_get_event(s), EXIT_OK);
}

int ctl_monitor(sd_bus *bus, const char *guest, CtlJsonMode json) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_free_ char *version = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        Monitor mon = { .bus = bus, .guest = guest, .json = json };
        sigset_t mask;
        int r, code;

        /* SIGINT and SIGTERM end it with exit status 0: through the event loop, so that a line is
         * never cut off. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        r = sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ? -errno : sd_event_new(&event);
        mon.event = event;
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGINT, monitor_signal, NULL);
        if (r >= 0)
                r = sd_event_add_signal(event, NULL, SIGTERM, monitor_signal, NULL);
        if (r >= 0)
                r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL);
        /* The matches first, then the check that the daemon is there: no change falls in between. */
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "EstimateChanged",
                                        monitor_estimate_changed, &mon);
        if (r >= 0)
                r = sd_bus_add_match(bus, NULL,
                                     "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
                                     "interface='org.freedesktop.DBus',member='NameOwnerChanged',"
                                     "arg0='" RS_BUS_NAME "'",
                                     monitor_owner_changed, &mon);
        if (r >= 0)
                r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus.Local", "/org/freedesktop/DBus/Local",
                                        "org.freedesktop.DBus.Local", "Disconnected", monitor_disconnected, &mon);
        if (r < 0) {
                sd_bus_detach_event(bus);
                return ctl_bus_report_error("monitor", &error, r);
        }

        /* Whether rightsized runs and lets us read (the bus policy sends its signals only to those
         * who may): the same exit statuses as every other command. */
        r = sd_bus_get_property_string(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "Version", &error, &version);
        if (r < 0) {
                code = ctl_bus_report_error("monitor", &error, r);
                sd_bus_error_free(&error);
                sd_bus_detach_event(bus);
                return code;
        }
        /* The guests followed now: their widest name sizes the name column, as list's table does,
         * so that the lines line up from the first one on. */
        if (guest) {
                CtlGuest g;
                ctl_guest_init(&g);
                code = ctl_fetch_guest(bus, guest, &g);
                mon.name_width = ctl_guest_name_width(&g, 1);
                ctl_guest_done(&g);
        } else {
                _cleanup_(ctl_guest_list_done) CtlGuestList l = {};
                code = ctl_fetch_guests(bus, &l);
                mon.name_width = ctl_guest_name_width(l.guests, l.n);
        }
        if (code != EXIT_OK) {
                sd_bus_detach_event(bus);
                return code;
        }

        /* On stderr, as busctl monitor says it: stdout has only the changes. Also the sign that no
         * change from now on is missed. */
        _cleanup_free_ char *clean_version = ctl_sanitize(version), *clean_guest = ctl_sanitize(guest);
        fprintf(stderr, "Monitoring the estimates of %s (rightsized %s); Ctrl-C to stop.\n",
                guest ? clean_guest ?: "?" : "every guest", clean_version ?: "?");

        r = sd_event_loop(event);
        sd_bus_detach_event(bus);
        if (r < 0) {
                fprintf(stderr, "rightsizectl: monitor: %s\n", strerror(-r));
                return EXIT_FAIL;
        }
        return r;
}

