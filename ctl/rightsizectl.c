/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl: asks rightsized (org.rightsize.Manager1, daemon/dbus-api.md) what it knows and
 * passes operators' changes on. A thin client: every decision stays in the daemon. */

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "common/size.h"
#include "common/time-util.h"
#include "ctl/ctl-format.h"
#include "ctl/ctl-memory.h"
#include "ctl/ctl-pager.h"
#include "ctl/ctl-polkit-agent.h"

#define DEFAULT_ENABLE_POLICY "balanced"

/* (the exit statuses, EXIT_OK ... EXIT_FAULTY, are in ctl/ctl-format.h) */

static CtlJsonMode arg_json = CTL_JSON_OFF;
static bool arg_names;
static bool arg_all;
static bool arg_no_pager;
static const char *arg_policy;

/* Long text output goes through a pager on a terminal; never JSON. */
static void pager_open(void) {
        if (!arg_json)
                ctl_pager_open(arg_no_pager);
}

static void help(void) {
        pager_open();
        printf("Usage: rightsizectl [OPTIONS] COMMAND [ARGS]\n"
               "\n"
               "Ask rightsized what it knows about its guests, and steer it.\n"
               "\n"
               "Commands:\n"
               "  list                  One line per guest: state, policy, sizes, reason or fault\n"
               "                        (--name: only the names, one a line)\n"
               "  show GUEST            Everything about one guest, with a chart of its history\n"
               "  history GUEST         Target, actual and estimate over time\n"
               "  set GUEST KEY=VALUE   Override for one guest: policy=NAME, floor=SIZE, max=SIZE\n"
               "  pause GUEST|--all     Stop resizing a guest (or every guest)\n"
               "  resume GUEST|--all    Resize it again\n"
               "  probe GUEST           Start a probe now\n"
               "  reload                Re-read rightsized.conf and the policies\n"
               "  status                The daemon: version, guests managed, memory reclaimed\n"
               "                        (exit status 6 when a guest is faulty or refused)\n"
               "  report                What rightsizing gives this host: configured memory against\n"
               "                        what the guests need, what they would give back, what is\n"
               "                        returned, the cost paid, and the guests with most to give;\n"
               "                        then where the host's memory is (guest used, cache, free;\n"
               "                        balloon; QEMU's RSS, swap, KSM) and what it never got back\n"
               "  enable DOMAIN [--policy P]\n"
               "                        Opt a libvirt domain in (metadata, live and persistent;\n"
               "                        policy " DEFAULT_ENABLE_POLICY " unless given)\n"
               "  disable DOMAIN        Opt a libvirt domain out\n"
               "  monitor [GUEST]       Follow estimate changes as they happen, one line each (with\n"
               "                        --json: one JSON object a line), until interrupted\n"
               "\n"
               "Options:\n"
               "  -j --json[=pretty|short]\n"
               "                        Machine-readable output (shapes in rightsizectl(1)):\n"
               "                        indented (pretty, the default) or on one line (short)\n"
               "     --name             With list: guest names only, one a line\n"
               "     --no-pager         Do not pipe long output into a pager\n"
               "     --all              With pause and resume: every guest\n"
               "  -p --policy NAME      The policy `enable` writes\n"
               "  -h --help             Show this help\n"
               "     --version          Show the version\n"
               "\n"
               "Exit status:\n"
               "  0  success\n"
               "  1  other failure (e.g. reload rejected, unexpected reply)\n"
               "  2  invalid usage or invalid argument (also when the daemon rejects a value)\n"
               "  3  no such guest\n"
               "  4  rightsized is not running, or the bus cannot be reached\n"
               "  5  permission denied (changes need root or polkit's yes; reads need the read group)\n"
               "  6  status: a guest is faulty (a skipped libvirt domain does not count) or refused\n"
               "\n"
               "The bus is the system bus, or $DBUS_SYSTEM_BUS_ADDRESS when set. Unicode glyphs\n"
               "need a UTF-8 locale, colours a terminal (NO_COLOR=1 or SYSTEMD_COLORS=0: none).\n");
}

static size_t terminal_width(void) {
        struct winsize ws;
        const char *env = getenv("COLUMNS");

        if (env && atoi(env) > 20)
                return (size_t) atoi(env);
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20)
                return ws.ws_col;
        return 80;
}

/* Maps a failed call to a message and an exit code. */
static int report_bus_error(const char *what, const sd_bus_error *error, int r) {
        if (sd_bus_error_has_names(error, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER) ||
            (!sd_bus_error_is_set(error) && (r == -ENOENT || r == -ECONNREFUSED || r == -ENOTCONN ||
                                            r == -ECONNRESET || r == -EHOSTDOWN))) {
                fprintf(stderr, "rightsizectl: rightsized is not running (no owner of %s on the bus)\n", RS_BUS_NAME);
                return EXIT_NO_DAEMON;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED)) {
                fprintf(stderr, "rightsizectl: %s: permission denied: polkit wants to authenticate you, and there is no "
                        "terminal to ask on (run it from one, with a polkit agent)%s%s\n", what,
                        error->message ? ": " : "", error->message ?: "");
                return EXIT_DENIED;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_ACCESS_DENIED) || r == -EACCES || r == -EPERM) {
                /* dbus-daemon's own refusal ("Rejected send message, 2 matched rules; ...") says
                 * nothing to whoever typed the command: it is the bus policy's read group they lack.
                 * rightsized's refusals (polkit) come with a message of their own. */
                if (error->message && strncmp(error->message, "Rejected send message", strlen("Rejected send message")) == 0) {
                        fprintf(stderr, "rightsizectl: %s: permission denied: reading rightsized takes root or membership of "
                                "the group \"%s\" (its D-Bus policy, %s.conf; read-group= in rightsized.conf)\n",
                                what, RS_READ_GROUP, RS_BUS_NAME);
                        return EXIT_DENIED;
                }
                fprintf(stderr, "rightsizectl: %s: permission denied%s%s\n", what,
                        error->message ? ": " : "", error->message ?: "");
                return EXIT_DENIED;
        }
        if (sd_bus_error_has_names(error, RS_BUS_ERROR_NO_SUCH_GUEST, RS_BUS_ERROR_NO_SUCH_DOMAIN)) {
                fprintf(stderr, "rightsizectl: %s\n", error->message ?: "no such guest");
                return EXIT_NO_GUEST;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_INVALID_ARGS)) {
                fprintf(stderr, "rightsizectl: %s: invalid argument: %s\n", what, error->message ?: "");
                return EXIT_USAGE;
        }
        if (sd_bus_error_has_name(error, RS_BUS_ERROR_RELOAD_FAILED)) {
                fprintf(stderr, "rightsizectl: reload failed, the old configuration stays: %s\n",
                        error->message ?: "");
                return EXIT_FAIL;
        }
        if (sd_bus_error_is_set(error))
                fprintf(stderr, "rightsizectl: %s: %s\n", what, error->message ?: error->name);
        else
                fprintf(stderr, "rightsizectl: %s: %s\n", what, strerror(-r));
        return EXIT_FAIL;
}

/* As long as rightsized lets polkit wait for an agent's answer (daemon/bus-polkit.c). */
#define INTERACTIVE_CALL_TIMEOUT_USEC (120ULL * 1000000ULL)

static int connect_bus(sd_bus **ret) {
        int r = sd_bus_open_system(ret);
        if (r < 0) {
                if (r == -EACCES || r == -EPERM) {
                        fprintf(stderr, "rightsizectl: cannot connect to the system bus: permission denied\n");
                        return EXIT_DENIED;
                }
                fprintf(stderr, "rightsizectl: cannot connect to the system bus (%s): rightsized is not running\n",
                        strerror(-r));
                return EXIT_NO_DAEMON;
        }
        /* A human at a terminal may be asked for a password by a polkit agent when rightsized checks
         * a change (not root): allow that, and give them time to type it. Scripts (no terminal) get
         * a plain yes or no at once. */
        if (isatty(STDIN_FILENO)) {
                (void) sd_bus_set_allow_interactive_authorization(*ret, true);
                (void) sd_bus_set_method_call_timeout(*ret, INTERACTIVE_CALL_TIMEOUT_USEC);
        }
        return EXIT_OK;
}

static int call(sd_bus *bus, const char *what, const char *method, sd_bus_message **reply, const char *types, ...) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, method);
        if (r >= 0 && types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
        }
        if (r < 0) {
                fprintf(stderr, "rightsizectl: %s: %s\n", what, strerror(-r));
                return EXIT_FAIL;
        }
        r = sd_bus_call(bus, m, 0, &error, reply);
        if (r < 0) {
                int code = report_bus_error(what, &error, r);
                sd_bus_error_free(&error);
                return code;
        }
        return EXIT_OK;
}

/* Reads one a{sv} into g; unknown keys and wrong-typed values are skipped (newer daemons). */
static int read_guest(sd_bus_message *m, CtlGuest *g) {
        int r;

        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r <= 0)
                return r < 0 ? r : -EBADMSG;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key, *contents;
                char type;

                r = sd_bus_message_read(m, "s", &key);
                if (r < 0)
                        return r;
                r = sd_bus_message_peek_type(m, &type, &contents);
                if (r < 0)
                        return r;
                const CtlField *f = ctl_guest_field_find(key);
                char want[2] = { f ? ctl_field_dbus_type(f) : 0, 0 };
                if (!f || !contents || strcmp(contents, want) != 0) {
                        r = sd_bus_message_skip(m, "v");
                        if (r < 0)
                                return r;
                } else {
                        r = sd_bus_message_enter_container(m, 'v', contents);
                        if (r < 0)
                                return r;
                        switch (want[0]) {
                        case 's': {
                                const char *s;
                                r = sd_bus_message_read(m, "s", &s);
                                if (r >= 0)
                                        r = ctl_guest_set_string(g, f, s);
                                break;
                        }
                        case 't': {
                                uint64_t t;
                                r = sd_bus_message_read(m, "t", &t);
                                if (r >= 0)
                                        ctl_guest_set_u64(g, f, t);
                                break;
                        }
                        case 'd': {
                                double d;
                                r = sd_bus_message_read(m, "d", &d);
                                if (r >= 0)
                                        ctl_guest_set_double(g, f, d);
                                break;
                        }
                        case 'b': {
                                int b;
                                r = sd_bus_message_read(m, "b", &b);
                                if (r >= 0)
                                        ctl_guest_set_bool(g, f, b);
                                break;
                        }
                        }
                        if (r < 0)
                                return r;
                        r = sd_bus_message_exit_container(m);
                        if (r < 0)
                                return r;
                }
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

typedef struct GuestList {
        CtlGuest *guests;
        size_t n;
} GuestList;

static void guest_list_done(GuestList *l) {
        for (size_t i = 0; i < l->n; i++)
                ctl_guest_done(&l->guests[i]);
        free(l->guests);
        l->guests = NULL;
        l->n = 0;
}

static int bad_reply(const char *what, int r) {
        fprintf(stderr, "rightsizectl: %s: unexpected reply from rightsized: %s\n", what, strerror(-r));
        return EXIT_FAIL;
}

static int compare_guests_by_name(const void *a, const void *b) {
        const CtlGuest *x = a, *y = b;
        return strcmp(x->name ?: "", y->name ?: "");
}

static int fetch_guests(sd_bus *bus, GuestList *ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int code, r;

        code = call(bus, "list guests", "ListGuests", &reply, NULL);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        if (r < 0)
                return bad_reply("list guests", r);
        for (;;) {
                r = sd_bus_message_at_end(reply, false);
                if (r < 0)
                        return bad_reply("list guests", r);
                if (r > 0)
                        break;
                CtlGuest *n = realloc(ret->guests, (ret->n + 1) * sizeof(CtlGuest));
                if (!n)
                        return bad_reply("list guests", -ENOMEM);
                ret->guests = n;
                ctl_guest_init(&ret->guests[ret->n]);
                ret->n++;
                r = read_guest(reply, &ret->guests[ret->n - 1]);
                if (r < 0)
                        return bad_reply("list guests", r);
        }
        /* The daemon answers in its own order (discovery's); a person scans a list by name. */
        if (ret->n > 1)
                qsort(ret->guests, ret->n, sizeof(CtlGuest), compare_guests_by_name);
        return EXIT_OK;
}

static int fetch_guest(sd_bus *bus, const char *name, CtlGuest *g) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int code, r;

        code = call(bus, "get guest", "GetGuest", &reply, "s", name);
        if (code != EXIT_OK)
                return code;
        r = read_guest(reply, g);
        if (r < 0)
                return bad_reply("get guest", r);
        return EXIT_OK;
}

static int fetch_history(sd_bus *bus, const char *name, CtlHistoryPoint **ret, size_t *ret_n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ CtlHistoryPoint *h = NULL;
        size_t n = 0;
        int code, r;

        code = call(bus, "get history", "GetHistory", &reply, "s", name);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_enter_container(reply, 'a', "(tttt)");
        if (r < 0)
                return bad_reply("get history", r);
        for (;;) {
                CtlHistoryPoint p;
                r = sd_bus_message_read(reply, "(tttt)", &p.usec, &p.target, &p.actual, &p.estimate);
                if (r < 0)
                        return bad_reply("get history", r);
                if (r == 0)
                        break;
                CtlHistoryPoint *nh = realloc(h, (n + 1) * sizeof(*h));
                if (!nh)
                        return bad_reply("get history", -ENOMEM);
                h = nh;
                h[n++] = p;
        }
        *ret = TAKE_PTR(h);
        *ret_n = n;
        return EXIT_OK;
}

static int print_json(json_object *o) {
        int r = o ? ctl_print_json_mode(stdout, o, arg_json) : -ENOMEM;
        json_object_put(o);
        return r < 0 ? EXIT_FAIL : EXIT_OK;
}

static int cmd_list(sd_bus *bus) {
        _cleanup_(guest_list_done) GuestList l = {};
        int code = fetch_guests(bus, &l);

        if (code != EXIT_OK)
                return code;
        if (arg_names)
                return ctl_print_guest_names(stdout, l.guests, l.n) < 0 ? EXIT_FAIL : EXIT_OK;
        if (arg_json) {
                json_object *o = json_object_new_object(), *a = json_object_new_array();
                for (size_t i = 0; i < l.n; i++)
                        json_object_array_add(a, ctl_guest_to_json(&l.guests[i]));
                json_object_object_add(o, "guests", a);
                return print_json(o);
        }
        if (l.n == 0) {
                printf("No guests.\n");
                return EXIT_OK;
        }
        pager_open();
        if (ctl_print_guest_table(stdout, l.guests, l.n) < 0)
                return EXIT_FAIL;
        size_t faulty = 0;
        for (size_t i = 0; i < l.n; i++)
                faulty += l.guests[i].fault != NULL;
        printf("\n%zu guests listed", l.n);
        if (faulty > 0)
                printf(", %zu with a fault", faulty);
        printf(".\n");
        return EXIT_OK;
}

static int cmd_show(sd_bus *bus, const char *name, bool history_only) {
        _cleanup_(ctl_guest_done) CtlGuest g;
        _cleanup_free_ CtlHistoryPoint *h = NULL;
        size_t n = 0;
        int code;

        ctl_guest_init(&g);
        if (!history_only) {
                code = fetch_guest(bus, name, &g);
                if (code != EXIT_OK)
                        return code;
        }
        code = fetch_history(bus, name, &h, &n);
        if (code != EXIT_OK)
                return code;

        if (arg_json) {
                json_object *o;
                if (history_only) {
                        o = json_object_new_object();
                        json_object_object_add(o, "name", json_object_new_string(name));
                } else
                        o = ctl_guest_to_json(&g);
                if (o)
                        json_object_object_add(o, "history", ctl_history_to_json(h, n));
                return print_json(o);
        }
        size_t width = terminal_width(); /* the terminal's, before the pager has stdout */
        pager_open();
        int r = history_only ? ctl_print_history(stdout, name, h, n, width)
                             : ctl_print_guest_details(stdout, &g, h, n, width);
        return r < 0 ? EXIT_FAIL : EXIT_OK;
}

static int cmd_set(sd_bus *bus, const char *name, const char *assignment) {
        _cleanup_free_ char *key = NULL;
        const char *eq = strchr(assignment, '=');
        uint64_t bytes;

        if (!eq || eq == assignment) {
                fprintf(stderr, "rightsizectl: set: expected KEY=VALUE, got \"%s\"\n", assignment);
                return EXIT_USAGE;
        }
        key = strndup(assignment, (size_t) (eq - assignment));
        if (!key)
                return EXIT_FAIL;
        /* Sizes are checked here too, so a typo gets its message without a round trip. */
        if ((strcmp(key, "floor") == 0 || strcmp(key, "max") == 0) && parse_size(eq + 1, &bytes) < 0) {
                fprintf(stderr, "rightsizectl: set: %s: \"%s\" is not a size (e.g. 512M, 2G, 1073741824)\n", key,
                        eq + 1);
                return EXIT_USAGE;
        }
        return call(bus, "set", "SetGuest", NULL, "sss", name, key, eq + 1);
}

/* The last time the daemon ran without its D-Bus API (its bus policy not installed, dbus-daemon
 * restarted), told once it is back so that an outage nobody watched is not lost. A daemon without
 * the property (older) prints nothing. */
static void print_api_outage(sd_bus *bus) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *clean = NULL;
        char from[32] = "?", to[32] = "?";
        uint64_t start, end;
        const char *reason;
        uint32_t n = 0;
        struct tm tm;

        if (sd_bus_get_property(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "LastApiOutage", NULL, &reply,
                                "(tts)") < 0 ||
            sd_bus_message_read(reply, "(tts)", &start, &end, &reason) < 0 || start == 0)
                return;
        (void) sd_bus_get_property_trivial(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "ApiOutages", NULL, 'u',
                                           &n);
        time_t t = (time_t) (start / USEC_PER_SEC);
        if (localtime_r(&t, &tm))
                strftime(from, sizeof(from), "%Y-%m-%d %H:%M:%S", &tm);
        t = (time_t) (end / USEC_PER_SEC);
        if (localtime_r(&t, &tm))
                strftime(to, sizeof(to), "%Y-%m-%d %H:%M:%S", &tm);
        clean = ctl_sanitize(reason);
        printf("%14s: D-Bus API was unavailable from %s to %s: %s", "Last outage", from, to, clean ?: "?");
        if (n > 1)
                printf(" (%u outages since the daemon started)", n);
        printf("\n");
}

/* Guests the daemon turned away because another guest has their name: not managed at all, so
 * they count like a fault. Printed when `print`; returns how many (0 from an older daemon). */
static size_t refused_guests(sd_bus *bus, bool print, json_object *json_array) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *name, *where, *owner;
        size_t n = 0;

        if (sd_bus_get_property(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "RefusedGuests", NULL, &reply,
                                "a(sss)") < 0 ||
            sd_bus_message_enter_container(reply, 'a', "(sss)") < 0)
                return 0;
        while (sd_bus_message_read(reply, "(sss)", &name, &where, &owner) > 0) {
                n++;
                if (json_array) {
                        json_object *o = json_object_new_object();
                        json_object_object_add(o, "name", json_object_new_string(name));
                        json_object_object_add(o, "where", json_object_new_string(where));
                        json_object_object_add(o, "name-taken-by", json_object_new_string(owner));
                        json_object_array_add(json_array, o);
                }
                if (print) {
                        _cleanup_free_ char *n1 = ctl_sanitize(name), *w = ctl_sanitize(where), *o = ctl_sanitize(owner);
                        printf("%14s: %s (%s): the name is taken by %s\n", "Refused", n1 ?: "?", w ?: "?", o ?: "?");
                }
        }
        return n;
}

#define REPORT_TOP 5

/* Reads one GetMemoryReport record; unknown keys and wrong-typed values are skipped (newer
 * daemons), as read_guest() does. */
static int read_memory(sd_bus_message *m, CtlMemory *mem) {
        int r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r <= 0)
                return r < 0 ? r : -EBADMSG;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key, *contents;
                char type;

                if ((r = sd_bus_message_read(m, "s", &key)) < 0 || (r = sd_bus_message_peek_type(m, &type, &contents)) < 0)
                        return r;
                const CtlField *f = ctl_memory_field_find(key);
                char want[2] = { f ? ctl_field_dbus_type(f) : 0, 0 };
                bool why = strcmp(key, "why") == 0 && contents && strcmp(contents, "as") == 0;
                if (!why && (!f || !contents || strcmp(contents, want) != 0)) {
                        r = sd_bus_message_skip(m, "v");
                } else if (why) {
                        const char *s;
                        r = sd_bus_message_enter_container(m, 'v', "as");
                        if (r >= 0)
                                r = sd_bus_message_enter_container(m, 'a', "s");
                        while (r >= 0 && (r = sd_bus_message_read(m, "s", &s)) > 0)
                                r = ctl_memory_add_why(mem, s);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(m);
                        if (r >= 0)
                                r = sd_bus_message_exit_container(m);
                } else {
                        r = sd_bus_message_enter_container(m, 'v', contents);
                        if (r >= 0 && want[0] == 's') {
                                const char *s;
                                if ((r = sd_bus_message_read(m, "s", &s)) >= 0)
                                        r = ctl_memory_set_string(mem, f, s);
                        } else if (r >= 0 && want[0] == 't') {
                                uint64_t t;
                                if ((r = sd_bus_message_read(m, "t", &t)) >= 0)
                                        ctl_memory_set_u64(mem, f, t);
                        } else if (r >= 0 && want[0] == 'b') {
                                int b;
                                if ((r = sd_bus_message_read(m, "b", &b)) >= 0)
                                        ctl_memory_set_bool(mem, f, b);
                        }
                        if (r >= 0)
                                r = sd_bus_message_exit_container(m);
                }
                if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

typedef struct MemoryReport {
        CtlMemory host;
        CtlMemory *guests;
        size_t n;
} MemoryReport;

static void memory_report_done(MemoryReport *mr) {
        ctl_memory_done(&mr->host);
        for (size_t i = 0; i < mr->n; i++)
                ctl_memory_done(&mr->guests[i]);
        free(mr->guests);
}

/* GetMemoryReport. EXIT_OK with *have false from a daemon older than the method: the rest of
 * the report stands without it. */
static int fetch_memory(sd_bus *bus, MemoryReport *mr, bool *have) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        *have = false;
        ctl_memory_init(&mr->host);
        r = sd_bus_call_method(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "GetMemoryReport", &error, &reply, "");
        if (r < 0) {
                bool old = sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD);
                int code = old ? EXIT_OK : report_bus_error("memory report", &error, r);
                sd_bus_error_free(&error);
                return code;
        }
        r = read_memory(reply, &mr->host);
        if (r >= 0)
                r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        while (r >= 0 && (r = sd_bus_message_at_end(reply, false)) == 0) {
                CtlMemory *n = realloc(mr->guests, (mr->n + 1) * sizeof(*n));
                if (!n)
                        return bad_reply("memory report", -ENOMEM);
                mr->guests = n;
                ctl_memory_init(&mr->guests[mr->n++]);
                r = read_memory(reply, &mr->guests[mr->n - 1]);
        }
        if (r < 0)
                return bad_reply("memory report", r);
        *have = true;
        return EXIT_OK;
}

static int cmd_report(sd_bus *bus) {
        _cleanup_(guest_list_done) GuestList l = {};
        _cleanup_(memory_report_done) MemoryReport mr = {};
        bool have_memory;
        int code = fetch_guests(bus, &l);

        if (code == EXIT_OK)
                code = fetch_memory(bus, &mr, &have_memory);
        if (code != EXIT_OK)
                return code;
        CtlReport r = ctl_report(l.guests, l.n);
        if (arg_json) {
                json_object *o = json_object_new_object(), *top = json_object_new_array();
                json_object_object_add(o, "guests", json_object_new_uint64(r.guests));
                json_object_object_add(o, "guests-with-estimate", json_object_new_uint64(r.with_estimate));
                json_object_object_add(o, "configured-bytes", json_object_new_uint64(r.configured));
                json_object_object_add(o, "needed-bytes", json_object_new_uint64(r.needed));
                json_object_object_add(o, "reclaimable-bytes", json_object_new_uint64(r.reclaimable));
                json_object_object_add(o, "returned-bytes", json_object_new_uint64(r.returned));
                json_object_object_add(o, "host-returned-bytes", json_object_new_uint64(r.host_returned));
                json_object_object_add(o, "guests-with-rss", json_object_new_uint64(r.with_rss));
                json_object_object_add(o, "probe-cycles", json_object_new_uint64(r.probe_cycles));
                json_object_object_add(o, "probe-refaults", json_object_new_uint64(r.probe_refaults));
                for (size_t i = 0; i < l.n; i++)
                        json_object_array_add(top, ctl_guest_to_json(&l.guests[i]));
                json_object_object_add(o, "guest-list", top);
                json_object *memory = NULL;
                if (have_memory) {
                        json_object *guests = json_object_new_array();
                        memory = json_object_new_object();
                        json_object_object_add(memory, "host", ctl_memory_to_json(&mr.host, true));
                        for (size_t i = 0; i < mr.n; i++)
                                json_object_array_add(guests, ctl_memory_to_json(&mr.guests[i], false));
                        json_object_object_add(memory, "guests", guests);
                }
                json_object_object_add(o, "memory", memory);
                return print_json(o);
        }
        pager_open();
        if (ctl_print_report(stdout, &r, l.guests, l.n, REPORT_TOP) < 0)
                return EXIT_FAIL;
        if (have_memory && (putchar('\n') == EOF || ctl_print_memory_report(stdout, &mr.host, mr.guests, mr.n) < 0))
                return EXIT_FAIL;
        return EXIT_OK;
}

static int cmd_status(sd_bus *bus) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *version = NULL;
        _cleanup_(guest_list_done) GuestList l = {};
        uint32_t managed = 0;
        uint64_t reclaimed = 0;
        int r, code;

        r = sd_bus_get_property_string(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "Version", &error, &version);
        if (r >= 0)
                r = sd_bus_get_property_trivial(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "GuestsManaged", &error,
                                                'u', &managed);
        if (r >= 0)
                r = sd_bus_get_property_trivial(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "ReclaimedBytes", &error,
                                                't', &reclaimed);
        if (r < 0) {
                code = report_bus_error("status", &error, r);
                sd_bus_error_free(&error);
                return code;
        }
        code = fetch_guests(bus, &l);
        if (code != EXIT_OK)
                return code;

        /* Printed in full either way; the exit status then says whether a guest is faulty. */
        CtlGuestCounts c = ctl_guest_counts(l.guests, l.n);
        if (arg_json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "version", json_object_new_string(version));
                json_object_object_add(o, "guests-managed", json_object_new_uint64(managed));
                json_object_object_add(o, "guests", json_object_new_uint64(c.guests));
                json_object_object_add(o, "guests-faulty", json_object_new_uint64(c.faulty));
                json_object_object_add(o, "guests-skipped", json_object_new_uint64(c.skipped));
                json_object_object_add(o, "guests-paused", json_object_new_uint64(c.paused));
                json_object_object_add(o, "reclaimed-bytes", json_object_new_uint64(reclaimed));
                json_object_object_add(o, "reclaimable-bytes",
                                       json_object_new_uint64(ctl_report(l.guests, l.n).reclaimable));
                json_object *refused = json_object_new_array();
                c.refused = refused_guests(bus, false, refused);
                json_object_object_add(o, "guests-refused", refused);
                code = print_json(o);
                return code != EXIT_OK ? code : ctl_status_exit_code(&c);
        }
        char buf[FORMAT_SIZE_MAX];
        _cleanup_free_ char *clean = ctl_sanitize(version);
        c.refused = refused_guests(bus, false, NULL);
        bool faulty = ctl_status_exit_code(&c) != EXIT_OK;
        printf("%s%s%s rightsized %s\n", ctl_color(faulty ? CTL_COLOR_RED : CTL_COLOR_GREEN),
               ctl_glyph(CTL_GLYPH_BULLET), ctl_color(CTL_COLOR_NORMAL), clean ?: "?");
        printf("%14s: %zu (%u managed, %zu faulty", "Guests", c.guests, managed, c.faulty);
        if (c.skipped > 0)
                printf(" of which %zu skipped", c.skipped);
        printf(", %zu paused)\n", c.paused);
        printf("%14s: %s\n", "Reclaimed", format_size(buf, sizeof(buf), reclaimed));
        CtlReport rep = ctl_report(l.guests, l.n);
        printf("%14s: %s (%zu guest%s with an estimate; rightsizectl report)\n", "Would give",
               format_size(buf, sizeof(buf), rep.reclaimable), rep.with_estimate, rep.with_estimate == 1 ? "" : "s");
        (void) refused_guests(bus, true, NULL);
        print_api_outage(bus);
        return ctl_status_exit_code(&c);
}

/* ---- monitor ---- */

typedef struct Monitor {
        sd_bus *bus;
        sd_event *event;   /* its own pointer: a closed bus forgets its event loop */
        const char *guest; /* only this one's signals, or every guest's */
        size_t name_width; /* the name column: the widest name of the guests followed */
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
            read_guest(reply, &g) >= 0) {
                e.target = g.target;
                e.state = g.state;
                e.fault = g.fault && !ctl_guest_skipped(&g);
                e.paused = g.paused > 0;
        }
        if (arg_json) {
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

static int cmd_monitor(sd_bus *bus, const char *guest) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_free_ char *version = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        Monitor mon = { .bus = bus, .guest = guest };
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
                return report_bus_error("monitor", &error, r);
        }

        /* Whether rightsized runs and lets us read (the bus policy sends its signals only to those
         * who may): the same exit statuses as every other command. */
        r = sd_bus_get_property_string(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "Version", &error, &version);
        if (r < 0) {
                code = report_bus_error("monitor", &error, r);
                sd_bus_error_free(&error);
                sd_bus_detach_event(bus);
                return code;
        }
        /* The guests followed now: their widest name sizes the name column, as list's table does,
         * so that the lines line up from the first one on. */
        if (guest) {
                CtlGuest g;
                ctl_guest_init(&g);
                code = fetch_guest(bus, guest, &g);
                mon.name_width = ctl_guest_name_width(&g, 1);
                ctl_guest_done(&g);
        } else {
                _cleanup_(guest_list_done) GuestList l = {};
                code = fetch_guests(bus, &l);
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

/* The commands (systemd's Verb pattern): name, arguments allowed, what runs it. */
typedef struct Verb {
        const char *name;
        int min_args, max_args;
        int (*run)(sd_bus *bus, int n_args, char **args);
        bool changes; /* asks rightsized to change something: root, or polkit's yes */
} Verb;

static int verb_report(sd_bus *bus, int n_args _unused_, char **args _unused_) {
        return cmd_report(bus);
}

static int verb_list(sd_bus *bus, int n_args _unused_, char **args _unused_) {
        return cmd_list(bus);
}

static int verb_show(sd_bus *bus, int n_args _unused_, char **args) {
        return cmd_show(bus, args[0], false);
}

static int verb_history(sd_bus *bus, int n_args _unused_, char **args) {
        return cmd_show(bus, args[0], true);
}

static int verb_set(sd_bus *bus, int n_args _unused_, char **args) {
        return cmd_set(bus, args[0], args[1]);
}

/* "" asks the daemon for every guest (main() let it through only with --all). */
static int verb_pause(sd_bus *bus, int n_args, char **args) {
        return call(bus, "pause", "Pause", NULL, "s", n_args > 0 ? args[0] : "");
}

static int verb_resume(sd_bus *bus, int n_args, char **args) {
        return call(bus, "resume", "Resume", NULL, "s", n_args > 0 ? args[0] : "");
}

static int verb_probe(sd_bus *bus, int n_args _unused_, char **args) {
        return call(bus, "probe", "Probe", NULL, "s", args[0]);
}

static int verb_reload(sd_bus *bus, int n_args _unused_, char **args _unused_) {
        return call(bus, "reload", "Reload", NULL, NULL);
}

static int verb_status(sd_bus *bus, int n_args _unused_, char **args _unused_) {
        return cmd_status(bus);
}

/* enable and disable go through the daemon: it holds the libvirt connection of its configured
 * URI, checks the policy exists, and is root-only like every change. */
static int verb_enable(sd_bus *bus, int n_args _unused_, char **args) {
        return call(bus, "enable", "SetDomainPolicy", NULL, "ss", args[0], arg_policy ?: DEFAULT_ENABLE_POLICY);
}

static int verb_disable(sd_bus *bus, int n_args _unused_, char **args) {
        return call(bus, "disable", "SetDomainPolicy", NULL, "ss", args[0], "");
}

static int verb_monitor(sd_bus *bus, int n_args, char **args) {
        return cmd_monitor(bus, n_args > 0 ? args[0] : NULL);
}

static const Verb verbs[] = {
        { "list", 0, 0, verb_list, false },         { "show", 1, 1, verb_show, false },
        { "history", 1, 1, verb_history, false },   { "set", 2, 2, verb_set, true },
        { "pause", 0, 1, verb_pause, true },        { "resume", 0, 1, verb_resume, true },
        { "probe", 1, 1, verb_probe, true },        { "reload", 0, 0, verb_reload, true },
        { "status", 0, 0, verb_status, false },     { "enable", 1, 1, verb_enable, true },
        { "disable", 1, 1, verb_disable, true },    { "report", 0, 0, verb_report, false },
        { "monitor", 0, 1, verb_monitor, false },
};

/* For the shell completions (contrib/completion/), which take the commands and options from
 * here rather than keeping lists of their own: not in --help. */
static void list_verbs(void) {
        for (size_t v = 0; v < ARRAY_SIZE(verbs); v++)
                printf("%s\n", verbs[v].name);
}

static void list_options(const struct option *options) {
        for (const struct option *o = options; o->name; o++) {
                if (strncmp(o->name, "list-", strlen("list-")) == 0)
                        continue; /* the hidden ones */
                if (o->has_arg != required_argument)
                        printf("--%s\n", o->name);
                if (o->has_arg != no_argument)
                        printf("--%s=\n", o->name);
        }
}

/* The policies a name can be given of: the files of the daemon's default policy directory, without
 * ".conf" (the shipped presets are installed there too). A policy-dir= elsewhere is not seen. */
static int compare_strings(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static void list_policies(void) {
        DIR *d = opendir(RIGHTSIZECTL_POLICY_DIR);
        char **names = NULL;
        size_t n = 0;
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (de->d_name[0] == '.' || len <= strlen(".conf") ||
                    strcmp(de->d_name + len - strlen(".conf"), ".conf") != 0)
                        continue;
                char **nn = realloc(names, (n + 1) * sizeof(char *));
                if (!nn)
                        break;
                names = nn;
                names[n] = strndup(de->d_name, len - strlen(".conf"));
                if (names[n])
                        n++;
        }
        closedir(d);
        qsort(names, n, sizeof(char *), compare_strings);
        for (size_t i = 0; i < n; i++) {
                printf("%s\n", names[i]);
                free(names[i]);
        }
        free(names);
}

int main(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_JSON,
                ARG_NAME,
                ARG_NO_PAGER,
                ARG_LIST_VERBS,
                ARG_LIST_OPTIONS,
                ARG_LIST_POLICIES,
                ARG_ALL,
        };
        static const struct option options[] = {
                { "json", optional_argument, NULL, ARG_JSON },
                { "name", no_argument, NULL, ARG_NAME },
                { "all", no_argument, NULL, ARG_ALL },
                { "no-pager", no_argument, NULL, ARG_NO_PAGER },
                { "policy", required_argument, NULL, 'p' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "list-verbs", no_argument, NULL, ARG_LIST_VERBS },
                { "list-options", no_argument, NULL, ARG_LIST_OPTIONS },
                { "list-policies", no_argument, NULL, ARG_LIST_POLICIES },
                {},
        };
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        bool show_help = false;
        int c, code;

        /* The user's locale, for its character set: wcswidth() measures guest names in it, and
         * glyphs are UTF-8 only in a UTF-8 locale. Numbers stay C's: sizes typed to `set` and the
         * JSON's decimals always have a '.'. */
        (void) setlocale(LC_ALL, "");
        (void) setlocale(LC_NUMERIC, "C");
        /* Decided once, while stdout is still what the user gave us (a pager may take it later). */
        const char *term = getenv("TERM");
        ctl_set_terminal(ctl_utf8_wanted(nl_langinfo(CODESET), term),
                         ctl_colors_wanted(getenv("SYSTEMD_COLORS"), getenv("NO_COLOR"), term, isatty(STDOUT_FILENO)));

        while ((c = getopt_long(argc, argv, "jhp:", options, NULL)) >= 0)
                switch (c) {
                case 'j':
                        arg_json = CTL_JSON_PRETTY;
                        break;
                case ARG_JSON:
                        if (ctl_json_mode_from_string(optarg, &arg_json) < 0) {
                                fprintf(stderr, "rightsizectl: --json=%s: expected pretty or short\n", optarg);
                                return EXIT_USAGE;
                        }
                        break;
                case ARG_NAME:
                        arg_names = true;
                        break;
                case ARG_NO_PAGER:
                        arg_no_pager = true;
                        break;
                case ARG_ALL:
                        arg_all = true;
                        break;
                case ARG_LIST_VERBS:
                        list_verbs();
                        return EXIT_OK;
                case ARG_LIST_OPTIONS:
                        list_options(options);
                        return EXIT_OK;
                case ARG_LIST_POLICIES:
                        list_policies();
                        return EXIT_OK;
                case 'p':
                        arg_policy = optarg;
                        break;
                case 'h':
                        show_help = true; /* after the other options: --help --no-pager */
                        break;
                case ARG_VERSION:
                        printf("rightsizectl %s\n", RIGHTSIZECTL_VERSION);
                        return EXIT_OK;
                default:
                        fprintf(stderr, "Try 'rightsizectl --help'.\n");
                        return EXIT_USAGE;
                }

        if (show_help) {
                help();
                return EXIT_OK;
        }

        const char *verb = optind < argc ? argv[optind] : "list";
        int n_args = optind < argc ? argc - optind - 1 : 0;
        char **args = argv + optind + 1;
        size_t v;

        for (v = 0; v < ARRAY_SIZE(verbs); v++)
                if (strcmp(verbs[v].name, verb) == 0)
                        break;
        if (v == ARRAY_SIZE(verbs)) {
                fprintf(stderr, "rightsizectl: unknown command \"%s\". Try 'rightsizectl --help'.\n", verb);
                return EXIT_USAGE;
        }
        if (n_args < verbs[v].min_args || n_args > verbs[v].max_args) {
                fprintf(stderr, "rightsizectl: %s: wrong number of arguments. Try 'rightsizectl --help'.\n", verb);
                return EXIT_USAGE;
        }
        for (int i = 0; i < n_args; i++)
                if (args[i][0] == '\0' && strcmp(verb, "set") != 0) {
                        fprintf(stderr, "rightsizectl: %s: empty guest name\n", verb);
                        return EXIT_USAGE;
                }

        if (arg_policy && strcmp(verb, "enable") != 0) {
                fprintf(stderr, "rightsizectl: --policy only goes with enable\n");
                return EXIT_USAGE;
        }
        if (arg_names && strcmp(verb, "list") != 0) {
                fprintf(stderr, "rightsizectl: --name only goes with list\n");
                return EXIT_USAGE;
        }
        /* Pausing every guest is a different act from pausing one: a forgotten name must not do it. */
        bool every_guest_verb = strcmp(verb, "pause") == 0 || strcmp(verb, "resume") == 0;
        if (arg_all && !every_guest_verb) {
                fprintf(stderr, "rightsizectl: --all only goes with pause and resume\n");
                return EXIT_USAGE;
        }
        if (every_guest_verb && arg_all == (n_args > 0)) {
                fprintf(stderr, "rightsizectl: %s: name a guest, or --all for every guest\n", verb);
                return EXIT_USAGE;
        }
        if (arg_names && arg_json) {
                fprintf(stderr, "rightsizectl: list: --name and --json do not go together (the JSON has the names)\n");
                return EXIT_USAGE;
        }
        if (arg_policy && arg_policy[0] == '\0') {
                fprintf(stderr, "rightsizectl: enable: empty policy name\n");
                return EXIT_USAGE;
        }

        code = connect_bus(&bus);
        if (code != EXIT_OK)
                return code;
        /* A change may need polkit's yes, and polkit an administrator's password: over SSH there is
         * no agent to ask for it unless we bring one. */
        if (verbs[v].changes)
                ctl_polkit_agent_open();

        return verbs[v].run(bus, n_args, args);
}
