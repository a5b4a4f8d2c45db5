/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The real rightsizectl binary against a stand-in org.rightsize.Manager1 on a private
 * dbus-daemon. The stand-in (below, test code only) serves three canned guests; it checks
 * callers the way daemon/dbus-api.md says the daemon does (changes need root), so the CLI's
 * parsing, printing and every documented exit code are exercised. The end-to-end test against
 * rightsized itself lives elsewhere. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <json-c/json.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"

#define HOSTILE "evil\x1b]0;owned\x07\x1b[2J"
#define N_HISTORY 30

static BusFixture private_bus;
static const char *dir, *address; /* the bus's: the stand-in's call log and the CLI's output go there too */
static pid_t server_pid = -1;

/* ---- the stand-in service ---- */

static void log_call(const char *fmt, ...) {
        char path[256];
        va_list ap;
        snprintf(path, sizeof(path), "%s/calls", dir);
        FILE *f = fopen(path, "ae");
        if (!f)
                return;
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fputc('\n', f);
        fclose(f);
}

static const char *const guest_names[] = { "web1", HOSTILE, "broken" };

static bool known_guest(const char *name) {
        for (size_t i = 0; i < ARRAY_SIZE(guest_names); i++)
                if (strcmp(guest_names[i], name) == 0)
                        return true;
        return false;
}

static int append_guest(sd_bus_message *m, const char *name) {
        int r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r < 0)
                return r;
        r = sd_bus_message_append(m, "{sv}{sv}{sv}{sv}", "name", "s", name, "source", "s", "qemu", "policy", "s",
                                  "balanced", "max", "t", (uint64_t) 4 * GIB);
        if (r < 0)
                return r;
        if (strcmp(name, "broken") == 0)
                r = sd_bus_message_append(m, "{sv}{sv}{sv}", "state", "s", "faulty", "fault", "s",
                                          "QMP connection closed mid-reply", "actual", "t", (uint64_t) 4 * GIB);
        else
                r = sd_bus_message_append(m, "{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}{sv}", "state", "s", "hold",
                                          "tier", "s", "agent", "confidence", "d", 0.9, "estimate", "t",
                                          (uint64_t) 1200 * MIB, "estimate-lower", "t", (uint64_t) 1 * GIB,
                                          "estimate-upper", "t", (uint64_t) 1536 * MIB, "target", "t",
                                          (uint64_t) 1536 * MIB, "actual", "t", (uint64_t) 1600 * MIB, "reason", "s",
                                          "held: refaults low", "agent", "b", 1, "future-field", "u", 7);
        if (r < 0)
                return r;
        return sd_bus_message_close_container(m);
}

static int reply_no_such_guest(sd_bus_error *error, const char *name) {
        return sd_bus_error_setf(error, RS_BUS_ERROR_NO_SUCH_GUEST, "No guest named \"%s\"", name);
}

static int method_list(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(m, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(guest_names); i++)
                r = append_guest(reply, guest_names[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *name;
        int r = sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        if (!known_guest(name))
                return reply_no_such_guest(error, name);
        r = sd_bus_message_new_method_return(m, &reply);
        if (r >= 0)
                r = append_guest(reply, name);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_history(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *name;
        int r = sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        if (!known_guest(name))
                return reply_no_such_guest(error, name);
        r = sd_bus_message_new_method_return(m, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "(tttt)");
        /* The target steps down from 4 GiB to 1.5 GiB; the estimate appears after 5 samples. */
        for (unsigned i = 0; r >= 0 && i < N_HISTORY; i++) {
                uint64_t target = i < 10 ? 4 * GIB : i < 20 ? 2 * GIB : 1536 * MIB;
                r = sd_bus_message_append(reply, "(tttt)", UINT64_C(1700000000000000) + i * 10 * USEC_PER_SEC, target,
                                          target + 64 * MIB, i < 5 ? (uint64_t) 0 : (uint64_t) 1200 * MIB);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* As the daemon will: changes need root. */
static int require_root(sd_bus_message *m, sd_bus_error *error) {
        int r = sd_bus_query_sender_privilege(m, -1);
        if (r < 0)
                return r;
        if (r == 0)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "Changing rightsized needs root");
        return 1;
}

static int method_set(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *name, *key, *value;
        int r = require_root(m, error);
        if (r <= 0)
                return r;
        r = sd_bus_message_read(m, "sss", &name, &key, &value);
        if (r < 0)
                return r;
        if (!known_guest(name))
                return reply_no_such_guest(error, name);
        if (strcmp(key, "policy") != 0 && strcmp(key, "floor") != 0 && strcmp(key, "max") != 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown key \"%s\"", key);
        log_call("SetGuest %s %s %s", name, key, value);
        return sd_bus_reply_method_return(m, NULL);
}

static int method_guest_action(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *name;
        int r = require_root(m, error);
        if (r <= 0)
                return r;
        r = sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        if (!(strcmp(sd_bus_message_get_member(m), "Probe") != 0 && name[0] == '\0') && !known_guest(name))
                return reply_no_such_guest(error, name);
        log_call("%s '%s'", sd_bus_message_get_member(m), name);
        return sd_bus_reply_method_return(m, NULL);
}

static int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        int r = require_root(m, error);
        if (r <= 0)
                return r;
        return sd_bus_error_set(error, RS_BUS_ERROR_RELOAD_FAILED,
                                "/etc/rightsize/rightsized.conf:3: unknown key \"colour\"");
}

static int get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", "0.1-stub");
}
static int get_managed(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "u", (uint32_t) 2);
}
static int get_reclaimed(sd_bus *bus, const char *path, const char *interface, const char *property,
                         sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "t", (uint64_t) 5 * GIB);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("ListGuests", "", "aa{sv}", method_list, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetGuest", "s", "a{sv}", method_get, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetHistory", "s", "a(tttt)", method_history, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("SetGuest", "sss", "", method_set, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Pause", "s", "", method_guest_action, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Resume", "s", "", method_guest_action, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Probe", "s", "", method_guest_action, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Reload", "", "", method_reload, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("Version", "s", get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("GuestsManaged", "u", get_managed, 0, 0),
        SD_BUS_PROPERTY("ReclaimedBytes", "t", get_reclaimed, 0, 0),
        SD_BUS_VTABLE_END,
};

static void run_server(int ready_fd) {
        sd_bus *bus = NULL;

        if (sd_bus_new(&bus) < 0 || sd_bus_set_address(bus, address) < 0 || sd_bus_set_bus_client(bus, 1) < 0 ||
            sd_bus_start(bus) < 0 || sd_bus_request_name(bus, RS_BUS_NAME, 0) < 0 ||
            sd_bus_add_object_vtable(bus, NULL, RS_BUS_PATH, RS_BUS_NAME, manager_vtable, NULL) < 0)
                _exit(1);
        if (write(ready_fd, "R", 1) != 1)
                _exit(1);
        close(ready_fd);
        for (;;) {
                int r = sd_bus_process(bus, NULL);
                if (r < 0)
                        _exit(2);
                if (r == 0 && sd_bus_wait(bus, UINT64_MAX) < 0)
                        _exit(3);
        }
}

/* ---- fixture ---- */

static char *read_file(const char *name) {
        char path[256], *buf = NULL;
        size_t size = 0;
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *in = fopen(path, "re"), *out = open_memstream(&buf, &size);
        ck_assert_ptr_nonnull(out);
        if (in) {
                int c;
                while ((c = fgetc(in)) != EOF)
                        fputc(c, out);
                fclose(in);
        }
        fclose(out);
        return buf;
}

static void start_bus(void) {
        ck_assert_int_eq(bus_fixture_start(&private_bus, BUS_POLICY_OPEN), 0);
        dir = private_bus.dir;
        address = private_bus.address;
}

static void start_server(void) {
        int ready[2];
        char c;

        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        server_pid = fork();
        ck_assert_int_ge(server_pid, 0);
        if (server_pid == 0) {
                test_child_init();
                close(ready[0]);
                run_server(ready[1]);
        }
        close(ready[1]);
        ck_assert_msg(read(ready[0], &c, 1) == 1, "the stand-in service could not take the name");
        close(ready[0]);
}

static void stop(pid_t *pid) {
        if (*pid > 0) {
                (void) kill(*pid, SIGTERM);
                (void) waitpid(*pid, NULL, 0);
                *pid = -1;
        }
}

static void setup_with_service(void) {
        start_bus();
        start_server();
}

static void teardown(void) {
        stop(&server_pid);
        bus_fixture_stop(&private_bus);
        dir = address = NULL;
}

typedef struct Run {
        int code;
        char *out, *err;
} Run;

static void run_done(Run *r) {
        free(r->out);
        free(r->err);
}

/* Runs rightsizectl as uid (0: as we are) with the given arguments, NULL-terminated. */
static Run run_ctl_as(uid_t uid, const char *bus_address, ...) {
        const char *builddir = getenv("top_builddir") ?: ".";
        char binary[512], out_path[256], err_path[256];
        const char *argv[16] = { "rightsizectl" };
        size_t argc = 1;
        va_list ap;
        Run run = {};
        int status;

        va_start(ap, bus_address);
        for (const char *a; (a = va_arg(ap, const char *)) && argc < ARRAY_SIZE(argv) - 1;)
                argv[argc++] = a;
        va_end(ap);
        argv[argc] = NULL;
        snprintf(binary, sizeof(binary), "%s/rightsizectl", builddir);
        snprintf(out_path, sizeof(out_path), "%s/out", dir);
        snprintf(err_path, sizeof(err_path), "%s/err", dir);

        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                test_child_init();
                int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (out < 0 || err < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
                        _exit(120);
                if (uid != 0) {
                        struct passwd *pw = getpwuid(uid);
                        if (!pw || setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(uid) < 0)
                                _exit(121);
                }
                setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
                setenv("COLUMNS", "100", 1);
                execv(binary, (char *const *) argv);
                _exit(122);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        run.code = WEXITSTATUS(status);
        ck_assert_msg(run.code < 120, "could not run %s (%d)", binary, run.code);
        run.out = read_file("out");
        run.err = read_file("err");
        if (getenv("TEST_DEBUG"))
                fprintf(stderr, "== %s %s → %d\n%s%s", argv[1], argc > 2 ? argv[2] : "", run.code, run.out, run.err);
        return run;
}

#define run_ctl(...) run_ctl_as(0, address, __VA_ARGS__, (const char *) NULL)

static json_object *parse_json(const char *text) {
        json_object *o = json_tokener_parse(text);
        ck_assert_msg(o != NULL, "not JSON: %s", text);
        return o;
}

/* ---- tests ---- */

START_TEST(test_list) {
        _cleanup_(run_done) Run r = run_ctl("list");
        ck_assert_int_eq(r.code, 0);
        ck_assert_ptr_nonnull(strstr(r.out, "NAME"));
        ck_assert_ptr_nonnull(strstr(r.out, "REASON/FAULT"));
        ck_assert_ptr_nonnull(strstr(r.out, "web1"));
        ck_assert_ptr_nonnull(strstr(r.out, "1.2 GiB"));
        ck_assert_ptr_nonnull(strstr(r.out, "held: refaults low"));
        ck_assert_ptr_nonnull(strstr(r.out, "fault: QMP connection closed mid-reply"));
        ck_assert_ptr_nonnull(strstr(r.out, "1 with a fault"));
        /* The hostile name arrives, defanged. */
        ck_assert_ptr_nonnull(strstr(r.out, "evil?]0;owned??[2J"));
        ck_assert_ptr_null(strchr(r.out, '\x1b'));
        ck_assert_ptr_null(strchr(r.out, '\x07'));
        /* No argument means list, as with systemctl. */
        _cleanup_(run_done) Run d = run_ctl("--json");
        ck_assert_int_eq(d.code, 0);
        ck_assert_ptr_nonnull(strstr(d.out, "\"guests\""));
}
END_TEST

START_TEST(test_list_names) {
        /* One name a line, in the daemon's order, defanged, and nothing else. */
        _cleanup_(run_done) Run r = run_ctl("list", "--name");
        ck_assert_int_eq(r.code, 0);
        ck_assert_str_eq(r.out, "web1\nevil?]0;owned??[2J\nbroken\n");
        ck_assert_str_eq(r.err, "");
        _cleanup_(run_done) Run d = run_ctl("--name"); /* list is the default */
        ck_assert_int_eq(d.code, 0);
        ck_assert_str_eq(d.out, r.out);
        _cleanup_(run_done) Run j = run_ctl("--name", "--json", "list");
        ck_assert_int_eq(j.code, 2);
        _cleanup_(run_done) Run s = run_ctl("--name", "show", "web1");
        ck_assert_int_eq(s.code, 2);
}
END_TEST

START_TEST(test_json_short) {
        _cleanup_(run_done) Run r = run_ctl("--json=short", "list");
        ck_assert_int_eq(r.code, 0);
        /* one line, and the same document as --json=pretty and --json */
        ck_assert_ptr_nonnull(strchr(r.out, '\n'));
        ck_assert_str_eq(strchr(r.out, '\n'), "\n");
        _cleanup_(run_done) Run p = run_ctl("--json=pretty", "list");
        _cleanup_(run_done) Run d = run_ctl("--json", "list");
        ck_assert_int_eq(p.code, 0);
        ck_assert_str_eq(p.out, d.out);
        json_object *a = parse_json(r.out), *b = parse_json(p.out);
        ck_assert(json_object_equal(a, b));
        json_object_put(a);
        json_object_put(b);
        _cleanup_(run_done) Run bad = run_ctl("--json=yaml", "list");
        ck_assert_int_eq(bad.code, 2);
}
END_TEST

START_TEST(test_list_json) {
        _cleanup_(run_done) Run r = run_ctl("--json", "list");
        json_object *o = parse_json(r.out), *guests, *v;

        ck_assert_int_eq(r.code, 0);
        ck_assert(json_object_object_get_ex(o, "guests", &guests));
        ck_assert_uint_eq(json_object_array_length(guests), 3);
        json_object *web = json_object_array_get_idx(guests, 0), *hostile = json_object_array_get_idx(guests, 1),
                    *broken = json_object_array_get_idx(guests, 2);
        ck_assert(json_object_object_get_ex(web, "estimate", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 1200 * MIB);
        ck_assert(json_object_object_get_ex(web, "reclaimed", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 4 * GIB - 1600 * MIB);
        ck_assert(json_object_object_get_ex(web, "fault", &v));
        ck_assert_ptr_null(v);
        ck_assert(json_object_object_get_ex(hostile, "name", &v));
        ck_assert_str_eq(json_object_get_string(v), HOSTILE); /* JSON carries the name exactly */
        ck_assert(json_object_object_get_ex(broken, "fault", &v));
        ck_assert_str_eq(json_object_get_string(v), "QMP connection closed mid-reply");
        ck_assert(json_object_object_get_ex(broken, "estimate", &v));
        ck_assert_ptr_null(v);
        json_object_put(o);
}
END_TEST

START_TEST(test_show_and_history) {
        _cleanup_(run_done) Run s = run_ctl("show", "web1");
        ck_assert_int_eq(s.code, 0);
        ck_assert_ptr_nonnull(strstr(s.out, "Estimate: 1.2 GiB (1 GiB .. 1.5 GiB)"));
        ck_assert_ptr_nonnull(strstr(s.out, "State: hold (tier agent)"));
        ck_assert_ptr_nonnull(strstr(s.out, "Confidence: 90 %"));
        ck_assert_ptr_nonnull(strstr(s.out, "Reason: held: refaults low"));
        ck_assert_ptr_nonnull(strstr(s.out, "T target  A actual  E estimate"));
        ck_assert_ptr_nonnull(strstr(s.out, "4 GiB"));

        _cleanup_(run_done) Run j = run_ctl("--json", "show", "web1");
        json_object *o = parse_json(j.out), *h, *v;
        ck_assert(json_object_object_get_ex(o, "history", &h));
        ck_assert_uint_eq(json_object_array_length(h), N_HISTORY);
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(h, 0), "estimate", &v));
        ck_assert_ptr_null(v);
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(h, N_HISTORY - 1), "target", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 1536 * MIB);
        ck_assert(json_object_object_get_ex(o, "confidence", &v));
        ck_assert(json_object_get_double(v) > 0.89 && json_object_get_double(v) < 0.91);
        json_object_put(o);

        _cleanup_(run_done) Run t = run_ctl("history", "web1");
        ck_assert_int_eq(t.code, 0);
        ck_assert_ptr_nonnull(strstr(t.out, "30 samples"));
        ck_assert_ptr_nonnull(strstr(t.out, "target    █"));   /* starts at the top */
        ck_assert_ptr_nonnull(strstr(t.out, "estimate       ▁")); /* five unknown, then the bottom */
        ck_assert_ptr_nonnull(strstr(t.out, "1.5 GiB"));
        ck_assert_ptr_nonnull(strstr(t.out, "TIME"));

        _cleanup_(run_done) Run tj = run_ctl("--json", "history", "web1");
        o = parse_json(tj.out);
        ck_assert(json_object_object_get_ex(o, "name", &v));
        ck_assert_str_eq(json_object_get_string(v), "web1");
        ck_assert(json_object_object_get_ex(o, "history", &h));
        ck_assert_uint_eq(json_object_array_length(h), N_HISTORY);
        json_object_put(o);
}
END_TEST

START_TEST(test_no_such_guest) {
        _cleanup_(run_done) Run s = run_ctl("show", "nosuch");
        ck_assert_int_eq(s.code, 3);
        ck_assert_ptr_nonnull(strstr(s.err, "No guest named \"nosuch\""));
        ck_assert_str_eq(s.out, "");
        _cleanup_(run_done) Run h = run_ctl("history", "nosuch");
        ck_assert_int_eq(h.code, 3);
        _cleanup_(run_done) Run p = run_ctl("probe", "nosuch");
        ck_assert_int_eq(p.code, 3);
        _cleanup_(run_done) Run t = run_ctl("set", "nosuch", "floor=1G");
        ck_assert_int_eq(t.code, 3);
}
END_TEST

START_TEST(test_changes) {
        _cleanup_(run_done) Run a = run_ctl("set", "web1", "floor=1G");
        ck_assert_int_eq(a.code, 0);
        _cleanup_(run_done) Run b = run_ctl("set", "web1", "policy=aggressive");
        ck_assert_int_eq(b.code, 0);
        _cleanup_(run_done) Run c = run_ctl("pause");
        ck_assert_int_eq(c.code, 0);
        _cleanup_(run_done) Run d = run_ctl("resume", "web1");
        ck_assert_int_eq(d.code, 0);
        _cleanup_(run_done) Run e = run_ctl("probe", "web1");
        ck_assert_int_eq(e.code, 0);
        _cleanup_free_ char *calls = read_file("calls");
        ck_assert_str_eq(calls,
                         "SetGuest web1 floor 1G\n"
                         "SetGuest web1 policy aggressive\n"
                         "Pause ''\n"
                         "Resume 'web1'\n"
                         "Probe 'web1'\n");

        /* Reload refused by the daemon: its message and exit 1. */
        _cleanup_(run_done) Run f = run_ctl("reload");
        ck_assert_int_eq(f.code, 1);
        ck_assert_ptr_nonnull(strstr(f.err, "rightsized.conf:3: unknown key \"colour\""));
        ck_assert_ptr_nonnull(strstr(f.err, "old configuration stays"));
}
END_TEST

START_TEST(test_invalid_arguments) {
        /* Caught locally: not a size, no '='. */
        _cleanup_(run_done) Run a = run_ctl("set", "web1", "floor=banana");
        ck_assert_int_eq(a.code, 2);
        ck_assert_ptr_nonnull(strstr(a.err, "not a size"));
        _cleanup_(run_done) Run b = run_ctl("set", "web1", "floor");
        ck_assert_int_eq(b.code, 2);
        /* Refused by the daemon (InvalidArgs). */
        _cleanup_(run_done) Run c = run_ctl("set", "web1", "colour=red");
        ck_assert_int_eq(c.code, 2);
        ck_assert_ptr_nonnull(strstr(c.err, "Unknown key \"colour\""));
        /* Usage. */
        _cleanup_(run_done) Run d = run_ctl("frobnicate");
        ck_assert_int_eq(d.code, 2);
        _cleanup_(run_done) Run e = run_ctl("show");
        ck_assert_int_eq(e.code, 2);
        _cleanup_(run_done) Run f = run_ctl("--bogus-option", "list");
        ck_assert_int_eq(f.code, 2);
        _cleanup_free_ char *calls = read_file("calls");
        ck_assert_str_eq(calls, "");
        _cleanup_(run_done) Run h = run_ctl("--help");
        ck_assert_int_eq(h.code, 0);
        ck_assert_ptr_nonnull(strstr(h.out, "4  rightsized is not running"));
}
END_TEST

START_TEST(test_status) {
        /* "broken" has a fault: the status is printed in full, and the exit status says so. */
        _cleanup_(run_done) Run s = run_ctl("status");
        ck_assert_int_eq(s.code, 6);
        ck_assert_ptr_nonnull(strstr(s.out, "rightsized 0.1-stub"));
        ck_assert_ptr_nonnull(strstr(s.out, "3 (2 managed, 1 faulty, 0 paused)"));
        ck_assert_ptr_nonnull(strstr(s.out, "Reclaimed: 5 GiB"));
        _cleanup_(run_done) Run j = run_ctl("--json", "status");
        ck_assert_int_eq(j.code, 6);
        json_object *o = parse_json(j.out), *v;
        ck_assert(json_object_object_get_ex(o, "reclaimed-bytes", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 5 * GIB);
        ck_assert(json_object_object_get_ex(o, "guests-faulty", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 1);
        ck_assert(json_object_object_get_ex(o, "guests-skipped", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 0);
        json_object_put(o);
}
END_TEST

START_TEST(test_permission_denied) {
        struct passwd *pw = getpwnam("nobody");

        if (geteuid() != 0 || !pw) {
                check_cannot_set_up("test_permission_denied", "it needs root and the user nobody");
                return;
        }
        /* Reads are open here (the stand-in has no read group), changes are not. */
        _cleanup_(run_done) Run l = run_ctl_as(pw->pw_uid, address, "list", (const char *) NULL);
        ck_assert_int_eq(l.code, 0);
        _cleanup_(run_done) Run p = run_ctl_as(pw->pw_uid, address, "pause", "web1", (const char *) NULL);
        ck_assert_int_eq(p.code, 5);
        ck_assert_ptr_nonnull(strstr(p.err, "permission denied"));
        ck_assert_ptr_nonnull(strstr(p.err, "needs root"));
        _cleanup_(run_done) Run r = run_ctl_as(pw->pw_uid, address, "reload", (const char *) NULL);
        ck_assert_int_eq(r.code, 5);
        _cleanup_free_ char *calls = read_file("calls");
        ck_assert_str_eq(calls, "");
}
END_TEST

START_TEST(test_no_daemon) {
        /* A bus, but nobody owns the name. */
        _cleanup_(run_done) Run a = run_ctl("list");
        ck_assert_int_eq(a.code, 4);
        ck_assert_ptr_nonnull(strstr(a.err, "not running"));
        _cleanup_(run_done) Run b = run_ctl("status");
        ck_assert_int_eq(b.code, 4);
        /* What the completions call: nothing on stdout, the reason on stderr. */
        _cleanup_(run_done) Run n = run_ctl("list", "--name");
        ck_assert_int_eq(n.code, 4);
        ck_assert_str_eq(n.out, "");
        /* No bus at all. */
        char nowhere[300];
        snprintf(nowhere, sizeof(nowhere), "unix:path=%s/no-bus-here", dir);
        _cleanup_(run_done) Run c = run_ctl_as(0, nowhere, "show", "web1", (const char *) NULL);
        ck_assert_int_eq(c.code, 4);
        ck_assert_ptr_nonnull(strstr(c.err, "not running"));
}
END_TEST

int main(void) {
        Suite *s = suite_create("rightsizectl");
        TCase *tc = tcase_create("with-service"), *none = tcase_create("without-service");

        tcase_add_checked_fixture(tc, setup_with_service, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_list);
        tcase_add_test(tc, test_list_json);
        tcase_add_test(tc, test_list_names);
        tcase_add_test(tc, test_json_short);
        tcase_add_test(tc, test_show_and_history);
        tcase_add_test(tc, test_no_such_guest);
        tcase_add_test(tc, test_changes);
        tcase_add_test(tc, test_invalid_arguments);
        tcase_add_test(tc, test_status);
        tcase_add_test(tc, test_permission_denied);
        suite_add_tcase(s, tc);

        tcase_add_checked_fixture(none, start_bus, teardown);
        tcase_set_timeout(none, 60);
        tcase_add_test(none, test_no_daemon);
        suite_add_tcase(s, none);

        return check_run_suite(s);
}
