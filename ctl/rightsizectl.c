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
#include "ctl/ctl-bus.h"
#include "ctl/ctl-format.h"
#include "ctl/ctl-memory.h"
#include "ctl/ctl-monitor.h"
#include "ctl/ctl-pager.h"
#include "ctl/ctl-polkit-agent.h"
#include "ctl/ctl-recommend.h"

#define DEFAULT_ENABLE_POLICY "balanced"

/* (the exit statuses, EXIT_OK ... EXIT_FAULTY, are in ctl/ctl-format.h) */

static CtlJsonMode arg_json = CTL_JSON_OFF;
static bool arg_names;
static bool arg_all;
static bool arg_no_pager;
static const char *arg_policy;
static bool arg_apply;
static bool arg_yes;

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
               "  recommend [GUEST]     The next boot's size (libvirt currentMemory), floor and max\n"
               "                        from 14 days of history, each with its rule, and what the\n"
               "                        host would gain; --apply writes a domain's persistent\n"
               "                        currentMemory (a dry run unless --yes or confirmed)\n"
               "\n"
               "Options:\n"
               "  -j --json[=pretty|short]\n"
               "                        Machine-readable output (shapes in rightsizectl(1)):\n"
               "                        indented (pretty, the default) or on one line (short)\n"
               "     --name             With list: guest names only, one a line\n"
               "     --no-pager         Do not pipe long output into a pager\n"
               "     --all              With pause and resume: every guest\n"
               "     --apply            With recommend GUEST: write the next boot's size\n"
               "     --yes              With --apply: write without asking\n"
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

static int print_json(json_object *o) {
        int r = o ? ctl_print_json_mode(stdout, o, arg_json) : -ENOMEM;
        json_object_put(o);
        return r < 0 ? EXIT_FAIL : EXIT_OK;
}

static int cmd_list(sd_bus *bus) {
        _cleanup_(ctl_guest_list_done) CtlGuestList l = {};
        int code = ctl_fetch_guests(bus, &l);

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
                code = ctl_fetch_guest(bus, name, &g);
                if (code != EXIT_OK)
                        return code;
        }
        code = ctl_fetch_history(bus, name, &h, &n);
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
        return ctl_bus_call(bus, "set", "SetGuest", NULL, "sss", name, key, eq + 1);
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

static int cmd_report(sd_bus *bus) {
        _cleanup_(ctl_guest_list_done) CtlGuestList l = {};
        _cleanup_(ctl_memory_report_done) CtlMemoryReport mr = {};
        bool have_memory;
        int code = ctl_fetch_guests(bus, &l);

        if (code == EXIT_OK)
                code = ctl_fetch_memory(bus, &mr, &have_memory);
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
        _cleanup_(ctl_guest_list_done) CtlGuestList l = {};
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
                code = ctl_bus_report_error("status", &error, r);
                sd_bus_error_free(&error);
                return code;
        }
        code = ctl_fetch_guests(bus, &l);
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

/* ---- recommend ---- */

/* A yes typed at the terminal; anything else, or no terminal, is no. */
static bool confirm(const char *question) {
        char line[16];
        if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
                return false;
        printf("%s [y/N] ", question);
        fflush(stdout);
        return fgets(line, sizeof(line), stdin) && (line[0] == 'y' || line[0] == 'Y');
}

/* --apply: the figure shown is the one confirmed and written (the daemon refuses it when a new
 * point moved the recommendation meanwhile). A dry run unless --yes or a yes at the terminal. */
static int apply_recommendation(sd_bus *bus, const CtlRecommendation *rec) {
        _cleanup_free_ char *name = ctl_sanitize(rec->name), *why = ctl_sanitize(rec->apply_refused);
        char boot[FORMAT_SIZE_MAX], now[FORMAT_SIZE_MAX], question[512];
        int64_t gain = 0;

        if (rec->can_apply == 0) {
                fprintf(stderr, "rightsizectl: recommend --apply: %s: %s\n", name ?: "?", why ?: "cannot be applied");
                return EXIT_FAIL;
        }
        if (rec->boot == CTL_UNKNOWN) {
                fprintf(stderr, "rightsizectl: recommend --apply: %s: no history yet, nothing to apply\n", name ?: "?");
                return EXIT_FAIL;
        }
        (void) ctl_recommendation_gain(rec, &gain);
        snprintf(question, sizeof(question), "Set the next boot's memory (libvirt currentMemory) of %s to %s (now %s)?",
                 name ?: "?", ctl_format_size(boot, sizeof(boot), rec->boot),
                 ctl_format_size(now, sizeof(now), rec->boot_now));
        if (!arg_yes && !confirm(question)) {
                printf("Dry run: would set the next boot's memory of %s to %s (now %s); nothing written. "
                       "Add --yes to write it.\n", name ?: "?", boot, now);
                return EXIT_OK;
        }
        return ctl_bus_call(bus, "recommend --apply", "ApplyRecommendation", NULL, "st", rec->name, rec->boot);
}

static int cmd_recommend(sd_bus *bus, const char *guest) {
        _cleanup_(ctl_recommendation_list_done) CtlRecommendationList l = {};
        int code = ctl_fetch_recommendations(bus, guest, &l);

        if (code != EXIT_OK)
                return code;
        if (arg_apply)
                return l.n == 1 ? apply_recommendation(bus, &l.recs[0]) : ctl_bus_bad_reply("recommend", -EBADMSG);
        if (arg_json) {
                json_object *o = json_object_new_object(), *a = json_object_new_array();
                for (size_t i = 0; i < l.n; i++)
                        json_object_array_add(a, ctl_recommendation_to_json(&l.recs[i]));
                json_object_object_add(o, "recommendations", a);
                return print_json(o);
        }
        if (l.n == 0) {
                printf("No guests.\n");
                return EXIT_OK;
        }
        pager_open();
        return ctl_print_recommendations(stdout, l.recs, l.n) < 0 ? EXIT_FAIL : EXIT_OK;
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
        return ctl_bus_call(bus, "pause", "Pause", NULL, "s", n_args > 0 ? args[0] : "");
}

static int verb_resume(sd_bus *bus, int n_args, char **args) {
        return ctl_bus_call(bus, "resume", "Resume", NULL, "s", n_args > 0 ? args[0] : "");
}

static int verb_probe(sd_bus *bus, int n_args _unused_, char **args) {
        return ctl_bus_call(bus, "probe", "Probe", NULL, "s", args[0]);
}

static int verb_reload(sd_bus *bus, int n_args _unused_, char **args _unused_) {
        return ctl_bus_call(bus, "reload", "Reload", NULL, NULL);
}

static int verb_status(sd_bus *bus, int n_args _unused_, char **args _unused_) {
        return cmd_status(bus);
}

/* enable and disable go through the daemon: it holds the libvirt connection of its configured
 * URI, checks the policy exists, and is root-only like every change. */
static int verb_enable(sd_bus *bus, int n_args _unused_, char **args) {
        return ctl_bus_call(bus, "enable", "SetDomainPolicy", NULL, "ss", args[0], arg_policy ?: DEFAULT_ENABLE_POLICY);
}

static int verb_disable(sd_bus *bus, int n_args _unused_, char **args) {
        return ctl_bus_call(bus, "disable", "SetDomainPolicy", NULL, "ss", args[0], "");
}

static int verb_monitor(sd_bus *bus, int n_args, char **args) {
        return ctl_monitor(bus, n_args > 0 ? args[0] : NULL, arg_json);
}

static int verb_recommend(sd_bus *bus, int n_args, char **args) {
        return cmd_recommend(bus, n_args > 0 ? args[0] : NULL);
}

static const Verb verbs[] = {
        { "list", 0, 0, verb_list, false },         { "show", 1, 1, verb_show, false },
        { "history", 1, 1, verb_history, false },   { "set", 2, 2, verb_set, true },
        { "pause", 0, 1, verb_pause, true },        { "resume", 0, 1, verb_resume, true },
        { "probe", 1, 1, verb_probe, true },        { "reload", 0, 0, verb_reload, true },
        { "status", 0, 0, verb_status, false },     { "enable", 1, 1, verb_enable, true },
        { "disable", 1, 1, verb_disable, true },    { "report", 0, 0, verb_report, false },
        { "monitor", 0, 1, verb_monitor, false },   { "recommend", 0, 1, verb_recommend, false },
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
                ARG_APPLY,
                ARG_YES,
        };
        static const struct option options[] = {
                { "json", optional_argument, NULL, ARG_JSON },
                { "name", no_argument, NULL, ARG_NAME },
                { "all", no_argument, NULL, ARG_ALL },
                { "apply", no_argument, NULL, ARG_APPLY },
                { "yes", no_argument, NULL, ARG_YES },
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
                case ARG_APPLY:
                        arg_apply = true;
                        break;
                case ARG_YES:
                        arg_yes = true;
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
        if ((arg_apply || arg_yes) && strcmp(verb, "recommend") != 0) {
                fprintf(stderr, "rightsizectl: --apply and --yes only go with recommend\n");
                return EXIT_USAGE;
        }
        if (arg_yes && !arg_apply) {
                fprintf(stderr, "rightsizectl: recommend: --yes confirms --apply\n");
                return EXIT_USAGE;
        }
        /* Writing a domain's definition is done one domain at a time, named. */
        if (arg_apply && n_args == 0) {
                fprintf(stderr, "rightsizectl: recommend --apply: name the guest\n");
                return EXIT_USAGE;
        }
        if (arg_apply && arg_json) {
                fprintf(stderr, "rightsizectl: recommend: --apply and --json do not go together\n");
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

        code = ctl_bus_connect(&bus);
        if (code != EXIT_OK)
                return code;
        /* A change may need polkit's yes, and polkit an administrator's password: over SSH there is
         * no agent to ask for it unless we bring one. */
        if (verbs[v].changes || arg_apply)
                ctl_polkit_agent_open();

        return verbs[v].run(bus, n_args, args);
}
