/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl: asks rightsized (org.rightsize.Manager1, daemon/dbus-api.md) what it knows and
 * passes operators' changes on. A thin client: every decision stays in the daemon. */

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "common/size.h"
#include "ctl/ctl-format.h"

#define DEFAULT_ENABLE_POLICY "balanced"

enum {
        EXIT_OK = 0,
        EXIT_FAIL = 1,
        EXIT_USAGE = 2,
        EXIT_NO_GUEST = 3,
        EXIT_NO_DAEMON = 4,
        EXIT_DENIED = 5,
};

static bool arg_json;
static const char *arg_policy;

static void help(void) {
        printf("Usage: rightsizectl [OPTIONS] COMMAND [ARGS]\n"
               "\n"
               "Ask rightsized what it knows about its guests, and steer it.\n"
               "\n"
               "Commands:\n"
               "  list                  One line per guest: state, policy, sizes, reason or fault\n"
               "  show GUEST            Everything about one guest, with a chart of its history\n"
               "  history GUEST         Target, actual and estimate over time\n"
               "  set GUEST KEY=VALUE   Override for one guest: policy=NAME, floor=SIZE, max=SIZE\n"
               "  pause [GUEST]         Stop resizing a guest (every guest without GUEST)\n"
               "  resume [GUEST]        Resize it again\n"
               "  probe GUEST           Start a probe now\n"
               "  reload                Re-read rightsized.conf and the policies\n"
               "  status                The daemon: version, guests managed, memory reclaimed\n"
               "  enable DOMAIN [--policy P]\n"
               "                        Opt a libvirt domain in (metadata, live and persistent;\n"
               "                        policy " DEFAULT_ENABLE_POLICY " unless given)\n"
               "  disable DOMAIN        Opt a libvirt domain out\n"
               "\n"
               "Options:\n"
               "  -j --json             Machine-readable output (shapes in rightsizectl(1))\n"
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
               "\n"
               "The bus is the system bus, or $DBUS_SYSTEM_BUS_ADDRESS when set.\n");
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
        int r = o ? ctl_print_json(stdout, o) : -ENOMEM;
        json_object_put(o);
        return r < 0 ? EXIT_FAIL : EXIT_OK;
}

static int cmd_list(sd_bus *bus) {
        _cleanup_(guest_list_done) GuestList l = {};
        int code = fetch_guests(bus, &l);

        if (code != EXIT_OK)
                return code;
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
        int r = history_only ? ctl_print_history(stdout, name, h, n, terminal_width())
                             : ctl_print_guest_details(stdout, &g, h, n, terminal_width());
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

        size_t faulty = 0, paused = 0;
        for (size_t i = 0; i < l.n; i++) {
                faulty += l.guests[i].fault != NULL;
                paused += l.guests[i].paused > 0;
        }
        if (arg_json) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "version", json_object_new_string(version));
                json_object_object_add(o, "guests-managed", json_object_new_uint64(managed));
                json_object_object_add(o, "guests", json_object_new_uint64(l.n));
                json_object_object_add(o, "guests-faulty", json_object_new_uint64(faulty));
                json_object_object_add(o, "guests-paused", json_object_new_uint64(paused));
                json_object_object_add(o, "reclaimed-bytes", json_object_new_uint64(reclaimed));
                return print_json(o);
        }
        char buf[FORMAT_SIZE_MAX];
        _cleanup_free_ char *clean = ctl_sanitize(version);
        printf("● rightsized %s\n", clean ?: "?");
        printf("%14s: %zu (%u managed, %zu faulty, %zu paused)\n", "Guests", l.n, managed, faulty, paused);
        printf("%14s: %s\n", "Reclaimed", format_size(buf, sizeof(buf), reclaimed));
        return EXIT_OK;
}

/* The commands (systemd's Verb pattern): name, arguments allowed, what runs it. */
typedef struct Verb {
        const char *name;
        int min_args, max_args;
        int (*run)(sd_bus *bus, int n_args, char **args);
} Verb;

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

static const Verb verbs[] = {
        { "list", 0, 0, verb_list },       { "show", 1, 1, verb_show },     { "history", 1, 1, verb_history },
        { "set", 2, 2, verb_set },         { "pause", 0, 1, verb_pause },   { "resume", 0, 1, verb_resume },
        { "probe", 1, 1, verb_probe },     { "reload", 0, 0, verb_reload }, { "status", 0, 0, verb_status },
        { "enable", 1, 1, verb_enable },   { "disable", 1, 1, verb_disable },
};

int main(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100 };
        static const struct option options[] = {
                { "json", no_argument, NULL, 'j' },
                { "policy", required_argument, NULL, 'p' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {},
        };
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int c, code;

        while ((c = getopt_long(argc, argv, "jhp:", options, NULL)) >= 0)
                switch (c) {
                case 'j':
                        arg_json = true;
                        break;
                case 'p':
                        arg_policy = optarg;
                        break;
                case 'h':
                        help();
                        return EXIT_OK;
                case ARG_VERSION:
                        printf("rightsizectl %s\n", RIGHTSIZECTL_VERSION);
                        return EXIT_OK;
                default:
                        fprintf(stderr, "Try 'rightsizectl --help'.\n");
                        return EXIT_USAGE;
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
        if (arg_policy && arg_policy[0] == '\0') {
                fprintf(stderr, "rightsizectl: enable: empty policy name\n");
                return EXIT_USAGE;
        }

        code = connect_bus(&bus);
        if (code != EXIT_OK)
                return code;

        return verbs[v].run(bus, n_args, args);
}
