/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The real rightsizectl binary against a stand-in org.rightsize.Manager1 on a private
 * dbus-daemon. The stand-in (below, test code only) serves three canned guests; it checks
 * callers the way daemon/dbus-api.md says the daemon does (changes need root), so the CLI's
 * parsing, printing and every documented exit code are exercised, and it sends EstimateChanged for
 * three of its guests ten times a second, for `rightsizectl monitor`. Output is checked on files
 * and, for colours and the pager, on a pseudo-terminal. One test runs `monitor` against the real
 * rightsized with a simulated guest (tests/sim/fake-qemu): the signal as the daemon sends it. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <json-c/json.h>
#include <locale.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"

#define HOSTILE "evil\x1b]0;owned\x07\x1b[2J"
#define WIDE "gäst-東京" /* 2-byte and 3-byte UTF-8; the CJK characters two columns wide */
#define WIDE_C "g?st-??"  /* what a C locale shows of it */
#define DEADLINE_SEC 60
#define N_HISTORY 30

static BusFixture private_bus;
static const char *dir, *address; /* the bus's: the stand-in's call log and the CLI's output go there too */
static pid_t server_pid = -1;

/* ---- the stand-in service ---- */

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

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

static const char *const guest_names[] = { "web1", HOSTILE, "broken", WIDE };

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

/* Replies to m with what append(reply, name) puts in the reply. */
static int reply_with(sd_bus_message *m, int (*append)(sd_bus_message *reply, const char *name), const char *name) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r = sd_bus_message_new_method_return(m, &reply);
        if (r >= 0)
                r = append(reply, name);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

/* Replies to a method on the guest m names, or with NoSuchGuest. */
static int reply_on_guest(sd_bus_message *m, sd_bus_error *error,
                          int (*append)(sd_bus_message *reply, const char *name)) {
        const char *name;
        int r = sd_bus_message_read(m, "s", &name);
        if (r < 0)
                return r;
        if (!known_guest(name))
                return reply_no_such_guest(error, name);
        return reply_with(m, append, name);
}

static int append_guest_list(sd_bus_message *reply, const char *name _unused_) {
        int r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(guest_names); i++)
                r = append_guest(reply, guest_names[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

/* The target steps down from 4 GiB to 1.5 GiB; the estimate appears after 5 samples. */
static int append_history(sd_bus_message *reply, const char *name _unused_) {
        int r = sd_bus_message_open_container(reply, 'a', "(tttt)");
        for (unsigned i = 0; r >= 0 && i < N_HISTORY; i++) {
                uint64_t target = i < 10 ? 4 * GIB : i < 20 ? 2 * GIB : 1536 * MIB;
                r = sd_bus_message_append(reply, "(tttt)", UINT64_C(1700000000000000) + i * 10 * USEC_PER_SEC, target,
                                          target + 64 * MIB, i < 5 ? (uint64_t) 0 : (uint64_t) 1200 * MIB);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r;
}

static int method_list(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return reply_with(m, append_guest_list, NULL);
}

static int method_get(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return reply_on_guest(m, error, append_guest);
}

static int method_history(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return reply_on_guest(m, error, append_history);
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
        return sd_bus_message_append(reply, "u", (uint32_t) 3);
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

static void run_server(int ready_fd, void *userdata _unused_) {
        sd_bus *bus = NULL;

        if (sd_bus_new(&bus) < 0 || sd_bus_set_address(bus, address) < 0 || sd_bus_set_bus_client(bus, 1) < 0 ||
            sd_bus_start(bus) < 0 || sd_bus_request_name(bus, RS_BUS_NAME, 0) < 0 ||
            sd_bus_add_object_vtable(bus, NULL, RS_BUS_PATH, RS_BUS_NAME, manager_vtable, NULL) < 0)
                _exit(1);
        test_service_ready(ready_fd);
        /* Every 100 ms an EstimateChanged, for web1, the hostile name and the wide one in turn; the
         * hostile one's bounds unknown (0). */
        static const char *const changing[] = { "web1", HOSTILE, WIDE };
        uint64_t next = 0, n = 0;
        for (;;) {
                int r = sd_bus_process(bus, NULL);
                if (r < 0)
                        _exit(2);
                if (r > 0)
                        continue;
                uint64_t now = now_usec();
                if (now >= next) {
                        const char *name = changing[n % ARRAY_SIZE(changing)];
                        bool bounds = strcmp(name, HOSTILE) != 0;
                        if (sd_bus_emit_signal(bus, RS_BUS_PATH, RS_BUS_INTERFACE, "EstimateChanged", "sttt", name,
                                               (uint64_t) 1200 * MIB + (n % 5) * 16 * MIB, bounds ? (uint64_t) GIB : 0,
                                               bounds ? (uint64_t) 1536 * MIB : 0) < 0)
                                _exit(4);
                        n++;
                        next = now + 100 * USEC_PER_MSEC;
                        continue;
                }
                if (sd_bus_wait(bus, next - now) < 0)
                        _exit(3);
        }
}

/* ---- fixture ---- */

/* dir/NAME, "" when there is none. */
static char *read_file(const char *name) {
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        char *text = test_read_file(path) ?: strdup("");
        ck_assert_ptr_nonnull(text);
        return text;
}

static void start_bus(void) {
        ck_assert_int_eq(bus_fixture_start(&private_bus, BUS_POLICY_OPEN), 0);
        dir = private_bus.dir;
        address = private_bus.address;
}

static void start_server(void) {
        server_pid = test_service_start(run_server, NULL, "the stand-in service could not take the name");
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

/* In a child: the environment rightsizectl runs in, then rightsizectl itself. By default a UTF-8
 * locale and an ordinary terminal type (what the output checks below assume, whatever the harness
 * has), no colour settings and no pager settings of the caller's; then `env`: "NAME=VALUE" sets,
 * "NAME" unsets. */
_Noreturn static void exec_ctl(uid_t uid, const char *bus_address, const char *const *env, const char *const *argv) {
        const char *builddir = getenv("top_builddir") ?: ".";
        char binary[512];

        if (uid != 0) {
                struct passwd *pw = getpwuid(uid);
                if (!pw || setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(uid) < 0)
                        _exit(121);
        }
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
        setenv("COLUMNS", "100", 1);
        setenv("LC_ALL", "C.UTF-8", 1);
        setenv("TERM", "xterm", 1);
        static const char *const cleared[] = { "NO_COLOR", "SYSTEMD_COLORS", "SYSTEMD_PAGER", "PAGER",
                                                "SYSTEMD_PAGERSECURE", "SYSTEMD_LESS", "LESS" };
        for (size_t i = 0; i < ARRAY_SIZE(cleared); i++)
                unsetenv(cleared[i]);
        for (size_t i = 0; env && env[i]; i++) {
                const char *eq = strchr(env[i], '=');
                if (!eq) {
                        unsetenv(env[i]);
                        continue;
                }
                _cleanup_free_ char *name = strndup(env[i], (size_t) (eq - env[i]));
                if (!name || setenv(name, eq + 1, 1) < 0)
                        _exit(123);
        }
        snprintf(binary, sizeof(binary), "%s/rightsizectl", builddir);
        execv(binary, (char *const *) argv);
        _exit(122);
}

static void build_argv(const char **argv, size_t max, const char *const *args) {
        size_t argc = 0;
        argv[argc++] = "rightsizectl";
        for (size_t i = 0; args[i] && argc < max - 1; i++)
                argv[argc++] = args[i];
        argv[argc] = NULL;
}

static void path_in_dir(char *buf, size_t size, const char *name) {
        snprintf(buf, size, "%s/%s", dir, name);
}

/* Starts rightsizectl with stdout and stderr into the files dir/OUT and dir/ERR. */
static pid_t spawn_ctl(uid_t uid, const char *bus_address, const char *const *env, const char *out_name,
                       const char *err_name, const char *const *args) {
        char out_path[256], err_path[256];
        const char *argv[16];

        build_argv(argv, ARRAY_SIZE(argv), args);
        path_in_dir(out_path, sizeof(out_path), out_name);
        path_in_dir(err_path, sizeof(err_path), err_name);
        pid_t pid = test_fork_with_output(out_path, err_path);
        if (pid == 0) {
                int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (in < 0 || dup2(in, STDIN_FILENO) < 0)
                        _exit(120);
                exec_ctl(uid, bus_address, env, argv);
        }
        return pid;
}

static CtlRun finish(pid_t pid, const char *what) {
        CtlRun run = {};
        int status;

        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "rightsizectl %s: killed by signal %d", what, WTERMSIG(status));
        run.code = WEXITSTATUS(status);
        ck_assert_msg(run.code < 120, "could not run rightsizectl (%d)", run.code);
        run.out = read_file("out");
        run.err = read_file("err");
        if (getenv("TEST_DEBUG"))
                fprintf(stderr, "== %s → %d\n%s%s", what, run.code, run.out, run.err);
        return run;
}

/* Runs rightsizectl with the environment changes `env` (may be NULL) and the arguments args. */
static CtlRun run_ctl_env_argv(uid_t uid, const char *bus_address, const char *const *env, const char *const *args) {
        return finish(spawn_ctl(uid, bus_address, env, "out", "err", args), args[0] ?: "");
}

/* Runs rightsizectl as uid (0: as we are) with the given arguments, NULL-terminated. */
static CtlRun run_ctl_as(uid_t uid, const char *bus_address, ...) {
        const char *args[16];
        size_t n = 0;
        va_list ap;

        va_start(ap, bus_address);
        for (const char *a; (a = va_arg(ap, const char *)) && n < ARRAY_SIZE(args) - 1;)
                args[n++] = a;
        va_end(ap);
        args[n] = NULL;
        return run_ctl_env_argv(uid, bus_address, NULL, args);
}

#define run_ctl(...) run_ctl_as(0, address, __VA_ARGS__, (const char *) NULL)
#define ARGS(...) ((const char *const[]) { __VA_ARGS__, NULL })
#define run_ctl_env(env, ...) run_ctl_env_argv(0, address, (env), ARGS(__VA_ARGS__))

/* Runs rightsizectl with stdout on a pseudo-terminal of 100x40 (stdin /dev/null, stderr into
 * dir/err); out is what came through the terminal, its "\r\n" turned back into "\n". */
static CtlRun run_ctl_pty(const char *const *env, const char *const *args) {
        const char *argv[16];
        char slave_name[128], err_path[256];
        struct winsize ws = { .ws_row = 40, .ws_col = 100 };
        char *buf = NULL;
        size_t size = 0;
        CtlRun run = {};
        int status;

        build_argv(argv, ARRAY_SIZE(argv), args);
        path_in_dir(err_path, sizeof(err_path), "err");
        int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        ck_assert_int_ge(master, 0);
        ck_assert_int_eq(grantpt(master), 0);
        ck_assert_int_eq(unlockpt(master), 0);
        ck_assert_int_eq(ptsname_r(master, slave_name, sizeof(slave_name)), 0);
        ck_assert_int_eq(ioctl(master, TIOCSWINSZ, &ws), 0);
        /* Opened here, so that a writer is there from the start (no early EIO on the master). */
        int tty = open(slave_name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        ck_assert_int_ge(tty, 0);

        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                test_child_init();
                /* A session of its own with the terminal as its controlling one, as a login has. */
                if (setsid() < 0 || ioctl(tty, TIOCSCTTY, 0) < 0)
                        _exit(120);
                int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (tty < 0 || err < 0 || in < 0 || dup2(tty, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0 ||
                    dup2(in, STDIN_FILENO) < 0)
                        _exit(120);
                exec_ctl(0, address, env, argv);
        }
        close(tty);

        /* Everything until the last writer (rightsizectl, and a pager it started) is gone. */
        FILE *out = open_memstream(&buf, &size);
        ck_assert_ptr_nonnull(out);
        uint64_t deadline = now_usec() + DEADLINE_SEC * USEC_PER_SEC;
        for (;;) {
                struct pollfd p = { .fd = master, .events = POLLIN };
                char chunk[4096];
                ck_assert_msg(now_usec() < deadline, "rightsizectl %s on a terminal: still writing after %d s",
                              args[0], DEADLINE_SEC);
                if (poll(&p, 1, 1000) <= 0)
                        continue;
                ssize_t n = read(master, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break; /* EIO: no writer left */
                for (ssize_t i = 0; i < n; i++)
                        if (chunk[i] != '\r')
                                fputc(chunk[i], out);
        }
        fclose(out);
        close(master);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "rightsizectl %s: killed by signal %d", args[0], WTERMSIG(status));
        run.code = WEXITSTATUS(status);
        ck_assert_msg(run.code < 120, "could not run rightsizectl (%d)", run.code);
        run.out = buf;
        run.err = read_file("err");
        if (getenv("TEST_DEBUG"))
                fprintf(stderr, "== %s (terminal) → %d\n%s%s", args[0], run.code, run.out, run.err);
        return run;
}

static json_object *parse_json(const char *text) {
        json_object *o = json_tokener_parse(text);
        ck_assert_msg(o != NULL, "not JSON: %s", text);
        return o;
}

/* ---- tests ---- */

START_TEST(test_list) {
        _cleanup_(ctl_run_done) CtlRun r = run_ctl("list");
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
        _cleanup_(ctl_run_done) CtlRun d = run_ctl("--json");
        ck_assert_int_eq(d.code, 0);
        ck_assert_ptr_nonnull(strstr(d.out, "\"guests\""));
}
END_TEST

START_TEST(test_list_names) {
        /* One name a line, sorted by name (the daemon answers in its own order), defanged, and nothing else. */
        _cleanup_(ctl_run_done) CtlRun r = run_ctl("list", "--name");
        ck_assert_int_eq(r.code, 0);
        ck_assert_str_eq(r.out, "broken\nevil?]0;owned??[2J\n" WIDE "\nweb1\n");
        ck_assert_str_eq(r.err, "");
        _cleanup_(ctl_run_done) CtlRun d = run_ctl("--name"); /* list is the default */
        ck_assert_int_eq(d.code, 0);
        ck_assert_str_eq(d.out, r.out);
        _cleanup_(ctl_run_done) CtlRun j = run_ctl("--name", "--json", "list");
        ck_assert_int_eq(j.code, 2);
        _cleanup_(ctl_run_done) CtlRun s = run_ctl("--name", "show", "web1");
        ck_assert_int_eq(s.code, 2);
}
END_TEST

START_TEST(test_json_short) {
        _cleanup_(ctl_run_done) CtlRun r = run_ctl("--json=short", "list");
        ck_assert_int_eq(r.code, 0);
        /* one line, and the same document as --json=pretty and --json */
        ck_assert_ptr_nonnull(strchr(r.out, '\n'));
        ck_assert_str_eq(strchr(r.out, '\n'), "\n");
        _cleanup_(ctl_run_done) CtlRun p = run_ctl("--json=pretty", "list");
        _cleanup_(ctl_run_done) CtlRun d = run_ctl("--json", "list");
        ck_assert_int_eq(p.code, 0);
        ck_assert_str_eq(p.out, d.out);
        json_object *a = parse_json(r.out), *b = parse_json(p.out);
        ck_assert(json_object_equal(a, b));
        json_object_put(a);
        json_object_put(b);
        _cleanup_(ctl_run_done) CtlRun bad = run_ctl("--json=yaml", "list");
        ck_assert_int_eq(bad.code, 2);
}
END_TEST

START_TEST(test_list_json) {
        _cleanup_(ctl_run_done) CtlRun r = run_ctl("--json", "list");
        json_object *o = parse_json(r.out), *guests, *v;

        ck_assert_int_eq(r.code, 0);
        ck_assert(json_object_object_get_ex(o, "guests", &guests));
        ck_assert_uint_eq(json_object_array_length(guests), 4);
        /* Sorted by name: broken, the hostile one ("evil..."), the wide one ("gäst-..."), web1. */
        json_object *web = json_object_array_get_idx(guests, 3), *hostile = json_object_array_get_idx(guests, 1),
                    *broken = json_object_array_get_idx(guests, 0);
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
        _cleanup_(ctl_run_done) CtlRun s = run_ctl("show", "web1");
        ck_assert_int_eq(s.code, 0);
        ck_assert_ptr_nonnull(strstr(s.out, "Estimate: 1.2 GiB (1 GiB .. 1.5 GiB)"));
        ck_assert_ptr_nonnull(strstr(s.out, "State: hold (tier agent)"));
        ck_assert_ptr_nonnull(strstr(s.out, "Confidence: 90 %"));
        ck_assert_ptr_nonnull(strstr(s.out, "Reason: held: refaults low"));
        ck_assert_ptr_nonnull(strstr(s.out, "T target  A actual  E estimate"));
        ck_assert_ptr_nonnull(strstr(s.out, "4 GiB"));

        _cleanup_(ctl_run_done) CtlRun j = run_ctl("--json", "show", "web1");
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

        _cleanup_(ctl_run_done) CtlRun t = run_ctl("history", "web1");
        ck_assert_int_eq(t.code, 0);
        ck_assert_ptr_nonnull(strstr(t.out, "30 samples"));
        ck_assert_ptr_nonnull(strstr(t.out, "target    █"));   /* starts at the top */
        ck_assert_ptr_nonnull(strstr(t.out, "estimate       ▁")); /* five unknown, then the bottom */
        ck_assert_ptr_nonnull(strstr(t.out, "1.5 GiB"));
        ck_assert_ptr_nonnull(strstr(t.out, "TIME"));

        _cleanup_(ctl_run_done) CtlRun tj = run_ctl("--json", "history", "web1");
        o = parse_json(tj.out);
        ck_assert(json_object_object_get_ex(o, "name", &v));
        ck_assert_str_eq(json_object_get_string(v), "web1");
        ck_assert(json_object_object_get_ex(o, "history", &h));
        ck_assert_uint_eq(json_object_array_length(h), N_HISTORY);
        json_object_put(o);
}
END_TEST

START_TEST(test_no_such_guest) {
        _cleanup_(ctl_run_done) CtlRun s = run_ctl("show", "nosuch");
        ck_assert_int_eq(s.code, 3);
        ck_assert_ptr_nonnull(strstr(s.err, "No guest named \"nosuch\""));
        ck_assert_str_eq(s.out, "");
        _cleanup_(ctl_run_done) CtlRun h = run_ctl("history", "nosuch");
        ck_assert_int_eq(h.code, 3);
        _cleanup_(ctl_run_done) CtlRun p = run_ctl("probe", "nosuch");
        ck_assert_int_eq(p.code, 3);
        _cleanup_(ctl_run_done) CtlRun t = run_ctl("set", "nosuch", "floor=1G");
        ck_assert_int_eq(t.code, 3);
}
END_TEST

START_TEST(test_changes) {
        _cleanup_(ctl_run_done) CtlRun a = run_ctl("set", "web1", "floor=1G");
        ck_assert_int_eq(a.code, 0);
        _cleanup_(ctl_run_done) CtlRun b = run_ctl("set", "web1", "policy=aggressive");
        ck_assert_int_eq(b.code, 0);
        /* A bare pause would stop every guest: it asks for --all, and sends nothing. */
        _cleanup_(ctl_run_done) CtlRun bare = run_ctl("pause");
        ck_assert_int_eq(bare.code, 2);
        ck_assert_msg(strstr(bare.err, "--all"), "stderr: %s", bare.err);
        _cleanup_(ctl_run_done) CtlRun both = run_ctl("resume", "web1", "--all");
        ck_assert_int_eq(both.code, 2);
        _cleanup_(ctl_run_done) CtlRun c = run_ctl("pause", "--all");
        ck_assert_int_eq(c.code, 0);
        _cleanup_(ctl_run_done) CtlRun d = run_ctl("resume", "web1");
        ck_assert_int_eq(d.code, 0);
        _cleanup_(ctl_run_done) CtlRun e = run_ctl("probe", "web1");
        ck_assert_int_eq(e.code, 0);
        _cleanup_free_ char *calls = read_file("calls");
        ck_assert_str_eq(calls,
                         "SetGuest web1 floor 1G\n"
                         "SetGuest web1 policy aggressive\n"
                         "Pause ''\n"
                         "Resume 'web1'\n"
                         "Probe 'web1'\n");

        /* Reload refused by the daemon: its message and exit 1. */
        _cleanup_(ctl_run_done) CtlRun f = run_ctl("reload");
        ck_assert_int_eq(f.code, 1);
        ck_assert_ptr_nonnull(strstr(f.err, "rightsized.conf:3: unknown key \"colour\""));
        ck_assert_ptr_nonnull(strstr(f.err, "old configuration stays"));
}
END_TEST

START_TEST(test_invalid_arguments) {
        /* Caught locally: not a size, no '='. */
        _cleanup_(ctl_run_done) CtlRun a = run_ctl("set", "web1", "floor=banana");
        ck_assert_int_eq(a.code, 2);
        ck_assert_ptr_nonnull(strstr(a.err, "not a size"));
        _cleanup_(ctl_run_done) CtlRun b = run_ctl("set", "web1", "floor");
        ck_assert_int_eq(b.code, 2);
        /* Refused by the daemon (InvalidArgs). */
        _cleanup_(ctl_run_done) CtlRun c = run_ctl("set", "web1", "colour=red");
        ck_assert_int_eq(c.code, 2);
        ck_assert_ptr_nonnull(strstr(c.err, "Unknown key \"colour\""));
        /* Usage. */
        _cleanup_(ctl_run_done) CtlRun d = run_ctl("frobnicate");
        ck_assert_int_eq(d.code, 2);
        _cleanup_(ctl_run_done) CtlRun e = run_ctl("show");
        ck_assert_int_eq(e.code, 2);
        _cleanup_(ctl_run_done) CtlRun f = run_ctl("--bogus-option", "list");
        ck_assert_int_eq(f.code, 2);
        _cleanup_free_ char *calls = read_file("calls");
        ck_assert_str_eq(calls, "");
        _cleanup_(ctl_run_done) CtlRun h = run_ctl("--help");
        ck_assert_int_eq(h.code, 0);
        ck_assert_ptr_nonnull(strstr(h.out, "4  rightsized is not running"));
}
END_TEST

START_TEST(test_status) {
        /* "broken" has a fault: the status is printed in full, and the exit status says so. */
        _cleanup_(ctl_run_done) CtlRun s = run_ctl("status");
        ck_assert_int_eq(s.code, 6);
        ck_assert_ptr_nonnull(strstr(s.out, "rightsized 0.1-stub"));
        ck_assert_ptr_nonnull(strstr(s.out, "4 (3 managed, 1 faulty, 0 paused)"));
        ck_assert_ptr_nonnull(strstr(s.out, "Reclaimed: 5 GiB"));
        _cleanup_(ctl_run_done) CtlRun j = run_ctl("--json", "status");
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
        _cleanup_(ctl_run_done) CtlRun l = run_ctl_as(pw->pw_uid, address, "list", (const char *) NULL);
        ck_assert_int_eq(l.code, 0);
        _cleanup_(ctl_run_done) CtlRun p = run_ctl_as(pw->pw_uid, address, "pause", "web1", (const char *) NULL);
        ck_assert_int_eq(p.code, 5);
        ck_assert_ptr_nonnull(strstr(p.err, "permission denied"));
        ck_assert_ptr_nonnull(strstr(p.err, "needs root"));
        _cleanup_(ctl_run_done) CtlRun r = run_ctl_as(pw->pw_uid, address, "reload", (const char *) NULL);
        ck_assert_int_eq(r.code, 5);
        _cleanup_free_ char *calls = read_file("calls");
        ck_assert_str_eq(calls, "");
}
END_TEST

START_TEST(test_no_daemon) {
        /* A bus, but nobody owns the name. */
        _cleanup_(ctl_run_done) CtlRun a = run_ctl("list");
        ck_assert_int_eq(a.code, 4);
        ck_assert_ptr_nonnull(strstr(a.err, "not running"));
        _cleanup_(ctl_run_done) CtlRun b = run_ctl("status");
        ck_assert_int_eq(b.code, 4);
        _cleanup_(ctl_run_done) CtlRun m = run_ctl("monitor");
        ck_assert_int_eq(m.code, 4);
        ck_assert_ptr_nonnull(strstr(m.err, "not running"));
        /* What the completions call: nothing on stdout, the reason on stderr. */
        _cleanup_(ctl_run_done) CtlRun n = run_ctl("list", "--name");
        ck_assert_int_eq(n.code, 4);
        ck_assert_str_eq(n.out, "");
        /* No bus at all. */
        char nowhere[300];
        snprintf(nowhere, sizeof(nowhere), "unix:path=%s/no-bus-here", dir);
        _cleanup_(ctl_run_done) CtlRun c = run_ctl_as(0, nowhere, "show", "web1", (const char *) NULL);
        ck_assert_int_eq(c.code, 4);
        ck_assert_ptr_nonnull(strstr(c.err, "not running"));
}
END_TEST

/* ---- the terminal: locale, display width, colours, pager ---- */

static bool has_high_byte(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (*p >= 0x80)
                        return true;
        return false;
}

/* The line of text that contains needle, malloc'd; NULL when none does. */
static char *line_with(const char *text, const char *needle) {
        const char *p = strstr(text, needle);
        if (!p)
                return NULL;
        while (p > text && p[-1] != '\n')
                p--;
        return strndup(p, strcspn(p, "\n"));
}

/* Terminal columns from the start of line to needle in it, by the C library's wcswidth() in a
 * UTF-8 locale (this process's: set by the caller). */
static size_t display_column(const char *line, const char *needle) {
        const char *p = strstr(line, needle);
        ck_assert_msg(p != NULL, "\"%s\" not in \"%s\"", needle, line);
        _cleanup_free_ char *prefix = strndup(line, (size_t) (p - line));
        wchar_t wide[512];
        size_t n = mbstowcs(wide, prefix, ARRAY_SIZE(wide));
        ck_assert_msg(n != (size_t) -1, "\"%s\" is not text of this locale", prefix);
        int w = wcswidth(wide, n);
        ck_assert_int_ge(w, 0);
        return (size_t) w;
}

START_TEST(test_wide_names_line_up) {
        if (!setlocale(LC_ALL, "C.UTF-8")) {
                check_cannot_set_up("test_wide_names_line_up", "no C.UTF-8 locale");
                return;
        }
        _cleanup_(ctl_run_done) CtlRun r = run_ctl("list");
        ck_assert_int_eq(r.code, 0);
        _cleanup_free_ char *h = line_with(r.out, "NAME"), *wide = line_with(r.out, WIDE),
                            *web = line_with(r.out, "web1"), *broken = line_with(r.out, "broken");
        ck_assert_ptr_nonnull(wide);
        /* gäst-東京 is 9 columns, 13 bytes, 7 code points: each column starts where its header does
         * (left) or ends where it ends (right), on the terminal. */
        ck_assert_uint_eq(display_column(wide, "hold"), display_column(h, "STATE"));
        ck_assert_uint_eq(display_column(web, "hold"), display_column(h, "STATE"));
        ck_assert_uint_eq(display_column(broken, "faulty"), display_column(h, "STATE"));
        ck_assert_uint_eq(display_column(wide, "balanced"), display_column(h, "POLICY"));
        ck_assert_uint_eq(display_column(wide, "1.2 GiB") + strlen("1.2 GiB"),
                          display_column(h, "ESTIMATE") + strlen("ESTIMATE"));
        ck_assert_uint_eq(display_column(wide, "held: refaults low"), display_column(h, "REASON/FAULT"));
        setlocale(LC_ALL, "C");
}
END_TEST

START_TEST(test_ascii_without_utf8_locale) {
        static const char *const commands[][3] = {
                { "list", NULL }, { "show", "web1", NULL }, { "show", WIDE, NULL }, { "history", "web1", NULL },
                { "history", WIDE, NULL }, { "status", NULL }, { "report", NULL }, { "--help", NULL },
        };
        static const char *const lang_c[] = { "LC_ALL", "LC_CTYPE", "LANG=C", NULL };
        static const char *const lc_all_c[] = { "LC_ALL=C", "LANG=C.UTF-8", NULL };
        static const char *const dumb[] = { "TERM=dumb", NULL };
        static const char *const *const ascii_envs[] = { lang_c, lc_all_c, dumb };
        bool utf8_seen = false;

        for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
                /* The control: in C.UTF-8 the glyphs and the name are there (so the check below can fail). */
                _cleanup_(ctl_run_done) CtlRun u = run_ctl_env_argv(0, address, NULL, commands[i]);
                ck_assert_msg(u.code == 0 || (u.code == 6 && strcmp(commands[i][0], "status") == 0), "%s: %d",
                              commands[i][0], u.code);
                utf8_seen = utf8_seen || has_high_byte(u.out);
                for (size_t e = 0; e < ARRAY_SIZE(ascii_envs); e++) {
                        _cleanup_(ctl_run_done) CtlRun a = run_ctl_env_argv(0, address, ascii_envs[e], commands[i]);
                        ck_assert_int_eq(a.code, u.code);
                        ck_assert_msg(!has_high_byte(a.out) && !has_high_byte(a.err), "%s %s with %s: not ASCII:\n%s%s",
                                      commands[i][0], commands[i][1] ?: "", ascii_envs[e][0], a.out, a.err);
                        ck_assert_msg(strlen(a.out) > 0, "%s printed nothing", commands[i][0]);
                }
        }
        ck_assert(utf8_seen);

        /* What stands in for them. */
        _cleanup_(ctl_run_done) CtlRun l = run_ctl_env(lang_c, "list");
        ck_assert_ptr_nonnull(strstr(l.out, WIDE_C "  "));
        _cleanup_(ctl_run_done) CtlRun h = run_ctl_env(lang_c, "history", "web1");
        ck_assert_ptr_nonnull(strstr(h.out, "target    #"));
        ck_assert_ptr_nonnull(strstr(h.out, " +---"));
        _cleanup_(ctl_run_done) CtlRun s = run_ctl_env(lang_c, "show", "broken");
        ck_assert_ptr_nonnull(strstr(s.out, "x broken\n"));
        _cleanup_(ctl_run_done) CtlRun w = run_ctl_env(lang_c, "--json", "list");
        /* JSON is not for a terminal: the name exactly, JSON-escaped or not, never replaced. */
        json_object *o = parse_json(w.out), *guests, *v;
        ck_assert(json_object_object_get_ex(o, "guests", &guests));
        ck_assert(json_object_object_get_ex(json_object_array_get_idx(guests, 2), "name", &v));
        ck_assert_str_eq(json_object_get_string(v), WIDE);
        json_object_put(o);
}
END_TEST

static bool has_escape(const char *s) {
        return strchr(s, '\x1b') != NULL;
}

START_TEST(test_colors) {
        static const char *const no_color[] = { "NO_COLOR=1", NULL };
        static const char *const no_color_empty[] = { "NO_COLOR=", NULL };
        static const char *const systemd_colors_off[] = { "SYSTEMD_COLORS=0", NULL };
        static const char *const systemd_colors_on[] = { "SYSTEMD_COLORS=1", NULL };
        static const char *const dumb[] = { "TERM=dumb", NULL };

        /* On a terminal: colours (the fault in red, the header underlined). */
        _cleanup_(ctl_run_done) CtlRun t = run_ctl_pty(NULL, ARGS("--no-pager", "list"));
        ck_assert_int_eq(t.code, 0);
        ck_assert_msg(strstr(t.out, "\x1b[0;1;31mfault: QMP connection closed mid-reply\x1b[0m"), "%s", t.out);
        ck_assert_ptr_nonnull(strstr(t.out, "\x1b[0;4mNAME\x1b[0m"));
        _cleanup_(ctl_run_done) CtlRun te = run_ctl_pty(no_color_empty, ARGS("--no-pager", "status"));
        ck_assert_int_eq(te.code, 6);
        ck_assert_msg(strstr(te.out, "\x1b[0;1;31m●\x1b[0m rightsized"), "%s", te.out); /* empty NO_COLOR: not set */

        /* NO_COLOR, SYSTEMD_COLORS=0, TERM=dumb: not one escape, whatever the command. */
        static const char *const *const off[] = { no_color, systemd_colors_off, dumb };
        static const char *const commands[][4] = {
                { "--no-pager", "list", NULL }, { "--no-pager", "show", "broken", NULL },
                { "--no-pager", "status", NULL }, { "--no-pager", "history", "web1", NULL },
        };
        for (size_t e = 0; e < ARRAY_SIZE(off); e++)
                for (size_t i = 0; i < ARRAY_SIZE(commands); i++) {
                        _cleanup_(ctl_run_done) CtlRun r = run_ctl_pty(off[e], commands[i]);
                        ck_assert_int_le(r.code, 6);
                        ck_assert_msg(strlen(r.out) > 0 && !has_escape(r.out), "%s with %s:\n%s", commands[i][1],
                                      off[e][0], r.out);
                }

        /* Not a terminal: none; unless SYSTEMD_COLORS=1 insists (as with systemctl), but NO_COLOR
         * does not then take it back. */
        _cleanup_(ctl_run_done) CtlRun f = run_ctl("list");
        ck_assert(!has_escape(f.out));
        _cleanup_(ctl_run_done) CtlRun fn = run_ctl_env(no_color, "list");
        ck_assert(!has_escape(fn.out));
        _cleanup_(ctl_run_done) CtlRun fc = run_ctl_env(systemd_colors_on, "list");
        ck_assert(has_escape(fc.out));
        /* The JSON never has colours. */
        _cleanup_(ctl_run_done) CtlRun j = run_ctl_pty(systemd_colors_on, ARGS("--json", "list"));
        ck_assert_int_eq(j.code, 0);
        ck_assert(!has_escape(j.out));
}
END_TEST

/* A pager that says it ran (and with what less would be told), keeps what it was given, and
 * says when it saw the end of it. */
static void write_pager(char *path, size_t size) {
        path_in_dir(path, size, "pager");
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "#!/bin/sh\n"
                "echo \"LESS=$LESS LESSCHARSET=$LESSCHARSET LESSSECURE=$LESSSECURE\" >'%s/pager-ran'\n"
                "cat >'%s/paged'\n"
                "touch '%s/pager-done'\n",
                dir, dir, dir);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_int_eq(chmod(path, 0755), 0);
}

static bool exists_in_dir(const char *name) {
        char path[256];
        path_in_dir(path, sizeof(path), name);
        return access(path, F_OK) == 0;
}

static void remove_pager_traces(void) {
        static const char *const names[] = { "pager-ran", "paged", "pager-done" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                char path[256];
                path_in_dir(path, sizeof(path), names[i]);
                (void) unlink(path);
        }
}

START_TEST(test_pager) {
        char pager[256], pager_env[300];

        write_pager(pager, sizeof(pager));
        snprintf(pager_env, sizeof(pager_env), "PAGER=%s", pager);
        /* SYSTEMD_PAGERSECURE set: $PAGER runs in either mode (without it, and with no login
         * session as here, only less would). */
        const char *const env[] = { pager_env, "SYSTEMD_PAGERSECURE=0", NULL };

        /* Not a terminal: never a pager. */
        remove_pager_traces();
        _cleanup_(ctl_run_done) CtlRun file = run_ctl_env(env, "history", "web1");
        ck_assert_int_eq(file.code, 0);
        ck_assert_ptr_nonnull(strstr(file.out, "30 samples"));
        ck_assert_msg(!exists_in_dir("pager-ran"), "a pager ran with stdout not a terminal");

        /* A terminal, but --no-pager, or JSON, or monitor's live lines: no pager either. */
        _cleanup_(ctl_run_done) CtlRun np = run_ctl_pty(env, ARGS("--no-pager", "history", "web1"));
        ck_assert_int_eq(np.code, 0);
        ck_assert_ptr_nonnull(strstr(np.out, "30 samples"));
        ck_assert_msg(!exists_in_dir("pager-ran"), "a pager ran despite --no-pager");
        _cleanup_(ctl_run_done) CtlRun js = run_ctl_pty(env, ARGS("--json", "history", "web1"));
        ck_assert_int_eq(js.code, 0);
        ck_assert_ptr_nonnull(strstr(js.out, "\"history\""));
        ck_assert_msg(!exists_in_dir("pager-ran"), "a pager ran for JSON");
        const char *const cat_env[] = { "PAGER=cat", "SYSTEMD_PAGERSECURE=0", NULL };
        _cleanup_(ctl_run_done) CtlRun cat = run_ctl_pty(cat_env, ARGS("history", "web1"));
        ck_assert_ptr_nonnull(strstr(cat.out, "30 samples"));

        /* The control: on a terminal the pager runs, gets the whole output (the terminal none of
         * it), less's options, and rightsizectl waits for it before it exits. */
        _cleanup_(ctl_run_done) CtlRun paged = run_ctl_pty(env, ARGS("history", "web1"));
        ck_assert_int_eq(paged.code, 0);
        ck_assert_msg(exists_in_dir("pager-ran"), "no pager on a terminal");
        ck_assert_msg(exists_in_dir("pager-done"), "rightsizectl exited before its pager");
        ck_assert_ptr_null(strstr(paged.out, "30 samples"));
        _cleanup_free_ char *ran = read_file("pager-ran"), *text = read_file("paged");
        ck_assert_msg(strstr(ran, "LESS=FRSXMK LESSCHARSET=utf-8 LESSSECURE=\n"), "%s", ran);
        ck_assert_ptr_nonnull(strstr(text, "30 samples"));
        ck_assert_ptr_nonnull(strstr(text, "TIME"));

        /* Secure mode (sudo): LESSSECURE=1 for less; a $PAGER the user vouched for still runs. */
        remove_pager_traces();
        const char *const secure_env[] = { pager_env, "SYSTEMD_PAGERSECURE=1", NULL };
        _cleanup_(ctl_run_done) CtlRun sec = run_ctl_pty(secure_env, ARGS("list"));
        ck_assert_int_eq(sec.code, 0);
        _cleanup_free_ char *sec_ran = read_file("pager-ran");
        ck_assert_msg(strstr(sec_ran, "LESSSECURE=1\n"), "%s", sec_ran);
}
END_TEST

/* ---- monitor ---- */

/* Waits until the file dir/NAME holds `n` lines that contain needle (and satisfy pred, unless
 * NULL), with a deadline of DEADLINE_SEC; returns the file. */
static char *wait_for_lines_if(const char *name, const char *needle, bool (*pred)(const char *line), unsigned n,
                               pid_t pid) {
        uint64_t deadline = now_usec() + DEADLINE_SEC * USEC_PER_SEC;
        for (;;) {
                char *text = read_file(name);
                unsigned found = 0;
                for (const char *l = text; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0')) {
                        _cleanup_free_ char *line = strndup(l, strcspn(l, "\n"));
                        found += strstr(line, needle) && (!pred || pred(line));
                }
                if (found >= n)
                        return text;
                ck_assert_msg(now_usec() < deadline, "no %u lines with \"%s\" in %s after %d s:\n%s", n, needle, name,
                              DEADLINE_SEC, text);
                free(text);
                int status;
                ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "rightsizectl monitor exited early");
                nanosleep(&(struct timespec) { .tv_nsec = 50 * 1000 * 1000 }, NULL);
        }
}

static char *wait_for_lines(const char *name, const char *needle, unsigned n, pid_t pid) {
        return wait_for_lines_if(name, needle, NULL, n, pid);
}

/* Sends sig, waits: exit status 0, and every line complete. */
static CtlRun stop_monitor(pid_t pid, int sig) {
        ck_assert_int_eq(kill(pid, sig), 0);
        CtlRun r = finish(pid, "monitor");
        ck_assert_msg(r.code == 0, "monitor exited with %d after signal %d: %s", r.code, sig, r.err);
        ck_assert(r.out[0] == '\0' || r.out[strlen(r.out) - 1] == '\n');
        return r;
}

START_TEST(test_monitor) {
        /* Every guest: web1's lines carry the estimate of the signal and the target and state of
         * GetGuest; the hostile name is defanged; the names are padded by their columns to the
         * widest. */
        pid_t pid = spawn_ctl(0, address, NULL, "out", "err", ARGS("monitor"));
        free(wait_for_lines("out", "web1", 2, pid));
        free(wait_for_lines("out", WIDE, 2, pid));
        free(wait_for_lines("out", "evil?]0;owned??[2J", 2, pid));
        _cleanup_(ctl_run_done) CtlRun r = stop_monitor(pid, SIGTERM);
        ck_assert(!has_escape(r.out));
        ck_assert_ptr_nonnull(strstr(r.err, "Monitoring the estimates of every guest (rightsized 0.1-stub)"));
        _cleanup_free_ char *web = line_with(r.out, "web1"), *wide = line_with(r.out, WIDE),
                            *hostile = line_with(r.out, "evil?");
        ck_assert_msg(strstr(web, " (1 GiB .. 1.5 GiB)  target 1.5 GiB  hold"), "%s", web);
        ck_assert_msg(strstr(web, "  estimate 1.") || strstr(web, "  estimate 1200 MiB"), "%s", web);
        ck_assert_ptr_null(strstr(hostile, "(")); /* bounds unknown: not printed */
        if (setlocale(LC_ALL, "C.UTF-8")) {
                /* The name column is as wide as the widest name ListGuests gave, the hostile one's
                 * (18 columns, sanitised): every line lines up. */
                ck_assert_uint_eq(display_column(web, "estimate"), display_column(wide, "estimate"));
                ck_assert_uint_eq(display_column(web, "estimate"), display_column(hostile, "estimate"));
                ck_assert_ptr_nonnull(strstr(hostile, "evil?]0;owned??[2J  estimate "));
                setlocale(LC_ALL, "C");
        }

        /* One guest; SIGINT (Ctrl-C) ends it as well. */
        pid = spawn_ctl(0, address, NULL, "out", "err", ARGS("monitor", WIDE));
        free(wait_for_lines("out", WIDE, 3, pid));
        _cleanup_(ctl_run_done) CtlRun one = stop_monitor(pid, SIGINT);
        for (const char *l = one.out; *l; l = strchr(l, '\n') + 1) {
                _cleanup_free_ char *line = strndup(l, strcspn(l, "\n"));
                ck_assert_msg(strstr(line, WIDE), "monitor " WIDE " printed: %s", line);
        }

        /* --json: one object a line, the name exact, null for what is not known. */
        pid = spawn_ctl(0, address, NULL, "out", "err", ARGS("--json", "monitor"));
        free(wait_for_lines("out", "\"web1\"", 1, pid));
        free(wait_for_lines("out", "\\u001b", 1, pid)); /* the hostile name, escaped */
        _cleanup_(ctl_run_done) CtlRun j = stop_monitor(pid, SIGTERM);
        unsigned n_web = 0, n_hostile = 0;
        for (const char *l = j.out; *l; l = strchr(l, '\n') + 1) {
                _cleanup_free_ char *line = strndup(l, strcspn(l, "\n"));
                json_object *o = parse_json(line), *v;
                ck_assert(json_object_is_type(o, json_type_object));
                ck_assert(json_object_object_get_ex(o, "time", &v));
                ck_assert_uint_gt(json_object_get_uint64(v), 1700000000ULL * USEC_PER_SEC);
                ck_assert(json_object_object_get_ex(o, "name", &v));
                const char *name = json_object_get_string(v);
                ck_assert(json_object_object_get_ex(o, "estimate", &v));
                ck_assert_uint_ge(json_object_get_uint64(v), 1200 * MIB);
                if (strcmp(name, "web1") == 0) {
                        n_web++;
                        ck_assert(json_object_object_get_ex(o, "estimate-lower", &v));
                        ck_assert_uint_eq(json_object_get_uint64(v), GIB);
                        ck_assert(json_object_object_get_ex(o, "target", &v));
                        ck_assert_uint_eq(json_object_get_uint64(v), 1536 * MIB);
                        ck_assert(json_object_object_get_ex(o, "state", &v));
                        ck_assert_str_eq(json_object_get_string(v), "hold");
                } else if (strcmp(name, HOSTILE) == 0) {
                        n_hostile++;
                        ck_assert(json_object_object_get_ex(o, "estimate-upper", &v));
                        ck_assert_ptr_null(v);
                }
                json_object_put(o);
        }
        ck_assert_uint_ge(n_web, 1);
        ck_assert_uint_ge(n_hostile, 1);

        /* A guest the daemon does not know: at once, as show says it. */
        _cleanup_(ctl_run_done) CtlRun nosuch = run_ctl("monitor", "nosuch");
        ck_assert_int_eq(nosuch.code, 3);
        _cleanup_(ctl_run_done) CtlRun two = run_ctl("monitor", "web1", "broken");
        ck_assert_int_eq(two.code, 2);
}
END_TEST

START_TEST(test_monitor_daemon_restart) {
        pid_t pid = spawn_ctl(0, address, NULL, "out", "err", ARGS("monitor", "web1"));
        free(wait_for_lines("out", "web1", 1, pid));

        /* The daemon stops: monitor says so and waits; it comes back: followed again. */
        stop(&server_pid);
        free(wait_for_lines("err", "rightsized left the bus; waiting for it to come back", 1, pid));
        _cleanup_free_ char *before = read_file("out");
        unsigned n = 0;
        for (const char *p = before; (p = strstr(p, "web1")); p++)
                n++;
        start_server();
        free(wait_for_lines("err", "rightsized is back", 1, pid));
        free(wait_for_lines("out", "web1", n + 2, pid));

        /* The bus goes away: exit status 4, as for a daemon that is not there. */
        ck_assert_int_eq(kill(private_bus.pid, SIGTERM), 0);
        ck_assert_int_eq(waitpid(private_bus.pid, NULL, 0), private_bus.pid);
        private_bus.pid = -1;
        _cleanup_(ctl_run_done) CtlRun r = finish(pid, "monitor");
        ck_assert_msg(r.code == 4, "monitor exited with %d: %s", r.code, r.err);
        ck_assert_ptr_nonnull(strstr(r.err, "connection to the bus was lost"));
}
END_TEST

/* monitor against rightsized itself: a simulated guest started after monitor is listening, whose
 * estimate is learned from nothing, is in monitor's output. */
static DaemonFixture daemon_fixture;
static const char *const sim_args[] = { "--scenario", "steady", "--time-scale", "20", NULL };

static void setup_with_daemon(void) {
        start_bus();
        daemon_fixture_init(&daemon_fixture, &private_bus);
        daemon_fixture_write_config(&daemon_fixture, BUS_FIXTURE_READ_GROUP, NULL);
        daemon_fixture_write_policy(&daemon_fixture, "fast", daemon_fixture_fast_policy);
        daemon_fixture_start(&daemon_fixture);
}

static void teardown_with_daemon(void) {
        daemon_fixture_done(&daemon_fixture);
        teardown();
}

/* "  estimate " followed by a size, not "-" (unknown); and a target. */
static bool estimate_known(const char *line) {
        const char *e = strstr(line, "  estimate ");
        return e && e[strlen("  estimate ")] >= '1' && e[strlen("  estimate ")] <= '9' && strstr(line, "  target ");
}

START_TEST(test_monitor_daemon) {
        pid_t pid = spawn_ctl(0, address, NULL, "out", "err", ARGS("monitor"));
        /* Listening (it says so once its matches are in place): only now the guest comes. */
        free(wait_for_lines("err", "Monitoring the estimates", 1, pid));
        daemon_fixture_start_sim(&daemon_fixture, 0, 0, 1, sim_args);
        /* Its estimate, learned from nothing: EstimateChanged says what it became. */
        free(wait_for_lines_if("out", "sim-0 ", estimate_known, 1, pid));
        _cleanup_(ctl_run_done) CtlRun r = stop_monitor(pid, SIGTERM);
        ck_assert(!has_escape(r.out));
        ck_assert(daemon_fixture_alive(&daemon_fixture));
}
END_TEST

int main(void) {
        Suite *s = suite_create("rightsizectl");

        /* with-service: 180 s, monitor waits up to DEADLINE_SEC three times */
        check_add_case(s, "with-service", setup_with_service, teardown, 180,
                       CHECK_TESTS(test_list, test_list_json, test_list_names, test_json_short, test_show_and_history,
                                   test_no_such_guest, test_changes, test_invalid_arguments, test_status,
                                   test_permission_denied, test_wide_names_line_up, test_ascii_without_utf8_locale,
                                   test_colors, test_pager, test_monitor, test_monitor_daemon_restart));
        check_add_case(s, "with-daemon", setup_with_daemon, teardown_with_daemon, 120,
                       CHECK_TESTS(test_monitor_daemon));
        check_add_case(s, "without-service", start_bus, teardown, 60, CHECK_TESTS(test_no_daemon));
        return check_run_suite(s);
}
