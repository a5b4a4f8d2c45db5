/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/lib/daemon-fixture.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "tests/lib/test-util.h"


uint64_t monotonic_sec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec;
}

static char *path_in(const char *dir, const char *name) {
        char *p;
        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
        return p;
}

static const char *builddir(void) {
        return getenv("top_builddir") ?: ".";
}

void daemon_fixture_init(DaemonFixture *d, const BusFixture *bus) {
        *d = (DaemonFixture) { .bus = bus, .pid = -1 };
        for (size_t i = 0; i < ARRAY_SIZE(d->sims); i++)
                d->sims[i] = -1;
        d->dir = test_mkdtemp();
        ck_assert_int_eq(chmod(d->dir, 0755), 0);
        d->config_path = path_in(d->dir, "rightsized.conf");
        d->policy_dir = path_in(d->dir, "policies");
        d->state_dir = path_in(d->dir, "state");
        d->qmp_dir = path_in(d->dir, "qmp");
        d->log_path = path_in(d->dir, "rightsized.log");
        ck_assert_int_eq(mkdir(d->policy_dir, 0755), 0);
        ck_assert_int_eq(mkdir(d->state_dir, 0700), 0);
        ck_assert_int_eq(mkdir(d->qmp_dir, 0755), 0);
}

void daemon_fixture_setup(DaemonFixture *d, BusFixture *bus, BusPolicy policy) {
        ck_assert_int_eq(bus_fixture_start(bus, policy), 0);
        daemon_fixture_init(d, bus);
        daemon_fixture_write_config(d, "", NULL);
}

void daemon_fixture_teardown(DaemonFixture *d, BusFixture *bus) {
        daemon_fixture_done(d);
        bus_fixture_stop(bus);
}

static void kill_wait(pid_t *pid, int sig) {
        if (*pid > 0) {
                (void) kill(*pid, sig);
                (void) waitpid(*pid, NULL, 0);
        }
        *pid = -1;
}

/* SIGTERM, and the daemon must exit cleanly (under ASan: without leaks) within its shutdown time. */
static bool stop_cleanly(DaemonFixture *d) {
        int status;

        if (d->pid <= 0)
                return true;
        if (kill(d->pid, SIGTERM) < 0)
                return false;
        for (uint64_t start = monotonic_sec(); monotonic_sec() < start + 20; usleep(50 * 1000)) {
                pid_t r = waitpid(d->pid, &status, WNOHANG);
                if (r == 0)
                        continue;
                d->pid = -1;
                return r > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
        }
        kill_wait(&d->pid, SIGKILL);
        return false;
}

void daemon_fixture_done(DaemonFixture *d) {
        ck_assert_msg(daemon_fixture_release(d), "rightsized did not exit cleanly on SIGTERM (its log is above)");
}

bool daemon_fixture_release(DaemonFixture *d) {
        bool clean = stop_cleanly(d);
        for (size_t i = 0; i < ARRAY_SIZE(d->sims); i++)
                kill_wait(&d->sims[i], SIGTERM);
        if (d->dir && (!clean || getenv("TEST_DEBUG"))) {
                _cleanup_free_ char *log = daemon_fixture_log(d);
                fprintf(stderr, "---- rightsized log ----\n%s---- end of log ----\n", log ?: "");
        }
        if (d->dir && !getenv("TEST_KEEP"))
                test_rm_rf(d->dir);
        free(d->dir);
        free(d->config_path);
        free(d->policy_dir);
        free(d->state_dir);
        free(d->qmp_dir);
        free(d->log_path);
        *d = (DaemonFixture) { .pid = -1 };
        return clean;
}

void daemon_fixture_write_config(DaemonFixture *d, const char *read_group, const char *extra_daemon) {
        _cleanup_free_ char *text = NULL;
        ck_assert_int_ge(asprintf(&text,
                                  "[daemon]\n"
                                  "policy-dir = %s\n"
                                  "state-dir = %s\n"
                                  "log-level = info\n"
                                  "host-reserve = 0\n"
                                  "metrics-path = %s/rightsize.prom\n"
                                  "shutdown-action = keep\n"
                                  "read-group = %s\n"
                                  "%s"
                                  /* The tests' guests are resized whether a policy matches or not. */
                                  "[guests]\n"
                                  "unmatched-policy = balanced\n"
                                  "[qemu]\n"
                                  "qmp-sockets = %s/*.qmp\n"
                                  "agent-socket-pattern =\n"
                                  "[libvirt]\n"
                                  "enabled = no\n",
                                  d->policy_dir, d->state_dir, d->dir, read_group ?: "", extra_daemon ?: "",
                                  d->qmp_dir),
                         0);
        test_write_file(d->config_path, text);
}

void daemon_fixture_replace_config_line(DaemonFixture *d, const char *line, const char *with) {
        _cleanup_free_ char *text = test_read_file(d->config_path), *patched = NULL;
        char *at = text ? strstr(text, line) : NULL;

        ck_assert_msg(at, "the config has no line '%s':\n%s", line, text ?: "(unreadable)");
        *at = '\0';
        ck_assert_int_ge(asprintf(&patched, "%s%s%s", text, with, at + strlen(line)), 0);
        test_write_file(d->config_path, patched);
}

void daemon_fixture_set_config(DaemonFixture *d, const char *key, const char *value) {
        _cleanup_free_ char *text = test_read_file(d->config_path), *patched = NULL;

        patched = text ? test_config_with(text, key, value) : NULL;
        ck_assert_msg(patched, "the config does not set %s:\n%s", key, text ?: "(unreadable)");
        test_write_file(d->config_path, patched);
}

void daemon_fixture_write_policy(DaemonFixture *d, const char *name, const char *text) {
        _cleanup_free_ char *path = NULL;
        ck_assert_int_ge(asprintf(&path, "%s/%s.conf", d->policy_dir, name), 0);
        test_write_file(path, text);
}

void sim_name(unsigned index, char *buf, size_t size) {
        snprintf(buf, size, "sim-%u", index);
}

void daemon_fixture_start_sim(DaemonFixture *d, unsigned slot, unsigned first, unsigned n, const char *const *extra) {
        daemon_fixture_start_sim_in(d, slot, d->qmp_dir, first, n, extra);
}

void daemon_fixture_start_sim_in(DaemonFixture *d, unsigned slot, const char *dir, unsigned first, unsigned n,
                                 const char *const *extra) {
        char binary[PATH_MAX], n_arg[16], first_arg[16], buf[16];
        const char *argv[64] = { "fake-qemu", "--dir", dir, "--guests", n_arg, "--first-index", first_arg };
        size_t argc = 7;
        int out[2];

        ck_assert_uint_lt(slot, ARRAY_SIZE(d->sims));
        ck_assert_int_lt(d->sims[slot], 0);
        snprintf(binary, sizeof(binary), "%s/tests/sim/fake-qemu", builddir());
        snprintf(n_arg, sizeof(n_arg), "%u", n);
        snprintf(first_arg, sizeof(first_arg), "%u", first);
        for (size_t i = 0; extra && extra[i]; i++) {
                ck_assert_uint_lt(argc, ARRAY_SIZE(argv) - 1);
                argv[argc++] = extra[i];
        }
        argv[argc] = NULL;

        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                test_child_init();
                if (dup2(out[1], STDOUT_FILENO) < 0)
                        _exit(127);
                execv(binary, (char *const *) argv);
                _exit(127);
        }
        close(out[1]);
        ssize_t k = read(out[0], buf, sizeof(buf) - 1);
        close(out[0]);
        ck_assert_msg(k >= 5 && strncmp(buf, "READY", 5) == 0, "fake-qemu did not start");
        d->sims[slot] = pid;
}

void daemon_fixture_kill_sim(DaemonFixture *d, unsigned slot, int sig) {
        ck_assert_uint_lt(slot, ARRAY_SIZE(d->sims));
        kill_wait(&d->sims[slot], sig);
}

void daemon_fixture_start_sims(DaemonFixture *d, unsigned n, const char *const *extra, unsigned timeout_sec) {
        daemon_fixture_start_sim(d, 0, 0, n, extra);
        daemon_fixture_start(d);
        guest_view_assert_sims_running(d, 0, n, timeout_sec);
}

bool daemon_fixture_owns_name(const DaemonFixture *d) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        if (bus_fixture_connect(d->bus, &bus) < 0)
                return false;
        return sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                  "GetNameOwner", NULL, NULL, "s", RS_BUS_NAME) >= 0;
}

void daemon_fixture_spawn(DaemonFixture *d, const char *notify_socket) {
        char exe[PATH_MAX];

        ck_assert_int_lt(d->pid, 0);
        snprintf(exe, sizeof(exe), "%s/rightsized", builddir());
        d->pid = fork();
        ck_assert_int_ge(d->pid, 0);
        if (d->pid == 0) {
                _cleanup_free_ char *asan = NULL;
                int fd = open(d->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

                test_child_init();
                if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
                        _exit(127);
                setenv("DBUS_SYSTEM_BUS_ADDRESS", d->bus->address, 1);
                if (notify_socket)
                        setenv("NOTIFY_SOCKET", notify_socket, 1);
                else
                        unsetenv("NOTIFY_SOCKET");
                unsetenv("WATCHDOG_USEC");
                unsetenv("JOURNAL_STREAM");
                /* Under ASan, freed memory sits in a quarantine of up to 256 MiB: cap it, or the
                 * RSS checks would measure the sanitizer. Ignored by a normal build. */
                if (asprintf(&asan, "%s%squarantine_size_mb=8", getenv("ASAN_OPTIONS") ?: "",
                             getenv("ASAN_OPTIONS") ? ":" : "") >= 0)
                        setenv("ASAN_OPTIONS", asan, 1);
                execl(exe, "rightsized", "--config", d->config_path, (char *) NULL);
                _exit(127);
        }
}

void daemon_fixture_start(DaemonFixture *d) {
        daemon_fixture_spawn(d, NULL);
        for (uint64_t start = monotonic_sec(); monotonic_sec() < start + 20;) {
                if (daemon_fixture_owns_name(d))
                        return;
                ck_assert_msg(daemon_fixture_alive(d), "rightsized exited at start; see %s", d->log_path);
                usleep(50 * 1000);
        }
        ck_abort_msg("rightsized did not take its bus name within 20 s");
}

int daemon_fixture_stop(DaemonFixture *d, int sig) {
        int status = -1;
        if (d->pid > 0) {
                (void) kill(d->pid, sig);
                ck_assert_int_eq(waitpid(d->pid, &status, 0), d->pid);
        }
        d->pid = -1;
        return status;
}

bool daemon_fixture_alive(DaemonFixture *d) {
        int status;
        if (d->pid <= 0)
                return false;
        pid_t r = waitpid(d->pid, &status, WNOHANG);
        if (r == 0)
                return true;
        if (r == d->pid) {
                fprintf(stderr, "rightsized exited: %s %d\n", WIFSIGNALED(status) ? "signal" : "status",
                        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                d->pid = -1;
                return false;
        }
        /* A test in a forked child: the daemon is its parent's child. Alive unless a zombie. */
        char path[64], stat[512];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int) d->pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        bool alive = fgets(stat, sizeof(stat), f) && strrchr(stat, ')') && strrchr(stat, ')')[1] == ' ' &&
                     strrchr(stat, ')')[2] != 'Z' && strrchr(stat, ')')[2] != 'X';
        fclose(f);
        return alive;
}

uint64_t daemon_fixture_rss_kib(const DaemonFixture *d) {
        char path[64], line[256];
        uint64_t kib = 0;

        snprintf(path, sizeof(path), "/proc/%d/status", (int) d->pid);
        FILE *f = fopen(path, "re");
        ck_assert_ptr_nonnull(f);
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %" SCNu64 " kB", &kib) == 1)
                        break;
        fclose(f);
        ck_assert_uint_gt(kib, 0);
        return kib;
}

char *daemon_fixture_log(const DaemonFixture *d) {
        return test_read_file(d->log_path);
}

unsigned daemon_fixture_log_count(const DaemonFixture *d, const char *needle) {
        _cleanup_free_ char *log = daemon_fixture_log(d);
        unsigned n = 0;
        for (const char *p = log; p && (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

bool daemon_fixture_wait_log(const DaemonFixture *d, const char *needle, unsigned timeout_sec) {
        for (uint64_t start = monotonic_sec();;) {
                _cleanup_free_ char *log = daemon_fixture_log(d);
                if (log && strstr(log, needle))
                        return true;
                if (monotonic_sec() >= start + timeout_sec)
                        return false;
                usleep(200 * 1000);
        }
}

/* ---- rightsizectl ---- */

void ctl_run_done(CtlRun *r) {
        free(r->out);
        free(r->err);
}

CtlRun ctl_run_as(const DaemonFixture *d, uid_t uid, gid_t gid, ...) {
        const char *args[16];
        size_t n = 0;
        va_list ap;

        va_start(ap, gid);
        for (const char *a; (a = va_arg(ap, const char *)) && n < ARRAY_SIZE(args) - 1;)
                args[n++] = a;
        va_end(ap);
        args[n] = NULL;
        return ctl_run_argv(d, uid, gid, args);
}

CtlRun ctl_run_argv(const DaemonFixture *d, uid_t uid, gid_t gid, const char *const *args) {
        char binary[PATH_MAX], out_path[PATH_MAX], err_path[PATH_MAX];
        const char *argv[16] = { "rightsizectl" };
        size_t argc = 1;
        CtlRun run = {};
        int status;

        for (size_t i = 0; args[i] && argc < ARRAY_SIZE(argv) - 1; i++)
                argv[argc++] = args[i];
        argv[argc] = NULL;
        snprintf(binary, sizeof(binary), "%s/rightsizectl", builddir());
        snprintf(out_path, sizeof(out_path), "%s/ctl.out", d->dir);
        snprintf(err_path, sizeof(err_path), "%s/ctl.err", d->dir);

        pid_t pid = test_fork_with_output(out_path, err_path);
        if (pid == 0) {
                if (uid != 0 && (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0))
                        _exit(121);
                setenv("DBUS_SYSTEM_BUS_ADDRESS", d->bus->address, 1);
                setenv("COLUMNS", "200", 1);
                execv(binary, (char *const *) argv);
                _exit(122);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "rightsizectl %s crashed", argv[1] ?: "");
        run.code = WEXITSTATUS(status);
        ck_assert_msg(run.code < 120, "could not run %s (%d)", binary, run.code);
        run.out = test_read_file(out_path);
        run.err = test_read_file(err_path);
        ck_assert(run.out && run.err);
        if (getenv("TEST_DEBUG"))
                fprintf(stderr, "== rightsizectl %s %s → %d\n%s%s", argv[1] ?: "", argc > 2 ? argv[2] : "", run.code,
                        run.out, run.err);
        return run;
}

char *ctl_list_row(const DaemonFixture *d, const char *name) {
        _cleanup_(ctl_run_done) CtlRun run = ctl_run(d, "list");
        size_t n = strlen(name);

        ck_assert_msg(run.code == 0, "rightsizectl list: exit %d: %s", run.code, run.err);
        /* The name is the first column, padded with spaces. */
        for (const char *line = run.out; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
                if (strncmp(line, name, n) == 0 && line[n] == ' ') {
                        char *row = strndup(line, strcspn(line, "\n"));
                        ck_assert_ptr_nonnull(row);
                        return row;
                }
        return NULL;
}

/* ---- the guests over D-Bus ---- */

static int read_guest(sd_bus_message *m, GuestView *v) {
        int r;

        *v = (GuestView) {};
        r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r <= 0)
                return r < 0 ? r : -ENODATA;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key, *contents, *s;
                if ((r = sd_bus_message_read(m, "s", &key)) < 0 || (r = sd_bus_message_peek_type(m, NULL, &contents)) < 0)
                        return r;
                uint64_t *u = strcmp(key, "target") == 0   ? &v->target
                            : strcmp(key, "actual") == 0   ? &v->actual
                            : strcmp(key, "floor") == 0    ? &v->floor
                            : strcmp(key, "max") == 0      ? &v->max
                            : strcmp(key, "estimate") == 0 ? &v->estimate
                            : strcmp(key, "updated") == 0  ? &v->updated
                            : strcmp(key, "virtio-mem-size") == 0 ? &v->vmem
                            : strcmp(key, "probe-cycles") == 0 ? &v->probe_cycles
                            : strcmp(key, "reprobes-skipped") == 0 ? &v->reprobes_skipped
                                                           : NULL;
                char *str = strcmp(key, "name") == 0     ? v->name
                          : strcmp(key, "state") == 0    ? v->state
                          : strcmp(key, "policy") == 0   ? v->policy
                          : strcmp(key, "mode") == 0     ? v->mode
                          : strcmp(key, "fault") == 0    ? v->fault
                          : strcmp(key, "reason") == 0   ? v->reason
                          : strcmp(key, "source") == 0   ? v->source
                          : strcmp(key, "uuid") == 0     ? v->uuid
                                                         : NULL;
                size_t str_size = str == v->name ? sizeof(v->name)
                                : str == v->state ? sizeof(v->state)
                                : str == v->policy ? sizeof(v->policy)
                                : str == v->mode ? sizeof(v->mode)
                                : str == v->fault ? sizeof(v->fault)
                                : str == v->reason ? sizeof(v->reason)
                                : str == v->source ? sizeof(v->source)
                                                   : sizeof(v->uuid);
                if (u && strcmp(contents, "t") == 0) {
                        r = sd_bus_message_read(m, "v", "t", u);
                        if (r < 0)
                                return r;
                        if (u == &v->estimate)
                                v->has_estimate = true;
                } else if (str && strcmp(contents, "s") == 0) {
                        r = sd_bus_message_read(m, "v", "s", &s);
                        if (r < 0)
                                return r;
                        snprintf(str, str_size, "%s", s);
                } else if (strcmp(key, "paused") == 0 && strcmp(contents, "b") == 0) {
                        int b;
                        r = sd_bus_message_read(m, "v", "b", &b);
                        if (r < 0)
                                return r;
                        v->paused = b;
                } else if ((r = sd_bus_message_skip(m, "v")) < 0)
                        return r;
                r = sd_bus_message_exit_container(m);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(m);
        return r < 0 ? r : 0;
}

int guest_view_get(const DaemonFixture *d, const char *name, GuestView *ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        *ret = (GuestView) {};
        r = bus_fixture_connect(d->bus, &bus);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "GetGuest", &error, &reply, "s", name);
        if (r < 0)
                return sd_bus_error_has_name(&error, RS_BUS_ERROR_NO_SUCH_GUEST) ? -ENOENT : r;
        return read_guest(reply, ret) < 0 ? -EBADMSG : 0;
}

int guest_view_list(const DaemonFixture *d, GuestView *ret, size_t max) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        size_t n = 0;
        int r;

        r = bus_fixture_connect(d->bus, &bus);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "ListGuests", NULL, &reply, "");
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "a{sv}");
        if (r < 0)
                return r;
        for (;;) {
                GuestView v;
                r = read_guest(reply, &v);
                if (r == -ENODATA)
                        break;
                if (r < 0)
                        return r;
                if (n < max)
                        ret[n] = v;
                n++;
        }
        return (int) n;
}

bool guest_view_wait(const DaemonFixture *d, const char *name, GuestViewPredicate pred, const void *data,
                     unsigned timeout_sec, GuestView *ret) {
        GuestView v, last = {};
        bool held = false;

        for (uint64_t start = monotonic_sec();; usleep(200 * 1000)) {
                if (guest_view_get(d, name, &v) == 0) {
                        last = v;
                        held = pred(&v, data);
                }
                if (held || monotonic_sec() >= start + timeout_sec)
                        break;
        }
        if (ret)
                *ret = last;
        return held;
}

bool guest_view_updated_after(const GuestView *v, const void *data) {
        return v->updated > *(const uint64_t *) data;
}

bool guest_view_is_managed(const GuestView *v) {
        return v->updated > 0 && strcmp(v->state, "connecting") != 0 && strcmp(v->state, "faulty") != 0 &&
               strcmp(v->state, "skipped") != 0;
}

static bool guest_view_managed(const GuestView *v, const void *data _unused_) {
        return guest_view_is_managed(v);
}

bool guest_view_wait_running(const DaemonFixture *d, const char *name, unsigned timeout_sec) {
        return guest_view_wait(d, name, guest_view_managed, NULL, timeout_sec, NULL);
}

void guest_view_assert_sims_running(const DaemonFixture *d, unsigned first, unsigned n, unsigned timeout_sec) {
        for (unsigned i = first; i < first + n; i++) {
                char name[32];
                sim_name(i, name, sizeof(name));
                ck_assert_msg(guest_view_wait_running(d, name, timeout_sec), "%s never became managed", name);
        }
}

void guest_assert_managed(const DaemonFixture *d, const char *name, unsigned timeout_sec) {
        GuestView before, now;
        uint64_t newest = 0;

        ck_assert_int_eq(guest_view_get(d, name, &before), 0);
        /* New points counted by time, not by the list's length, which stops at its maximum. */
        ck_assert_int_ge(guest_history_since(d, name, 0, &newest), 0);
        for (uint64_t start = monotonic_sec();; usleep(250 * 1000)) {
                ck_assert_int_eq(guest_view_get(d, name, &now), 0);
                if (now.updated > before.updated && guest_history_since(d, name, newest, NULL) > 0 &&
                    now.fault[0] == '\0')
                        break;
                ck_assert_msg(monotonic_sec() < start + timeout_sec, "%s is no longer managed (state %s, fault '%s')",
                              name, now.state, now.fault);
        }
        ck_assert_str_ne(now.state, "faulty");
        ck_assert_str_ne(now.state, "connecting");
}

void guest_assert_sim_managed(const DaemonFixture *d, unsigned index, unsigned timeout_sec) {
        char name[32];

        sim_name(index, name, sizeof(name));
        guest_assert_managed(d, name, timeout_sec);
}

int guests_assert_floors_kept(const DaemonFixture *d, uint64_t floor) {
        GuestView views[64];
        int n = guest_view_list(d, views, ARRAY_SIZE(views));

        ck_assert_int_ge(n, 0);
        for (int i = 0; i < MIN(n, (int) ARRAY_SIZE(views)); i++) {
                const GuestView *v = &views[i];
                if (v->floor == 0)
                        continue; /* not known yet: no size was ever set */
                ck_assert_uint_eq(v->floor, floor);
                ck_assert_msg(v->target == 0 || v->target >= v->floor, "%s: target %" PRIu64 " below its floor",
                              v->name, v->target);
                ck_assert_msg(v->actual == 0 || v->actual >= v->floor, "%s: actual %" PRIu64 " below its floor",
                              v->name, v->actual);
        }
        return n;
}

void daemon_fixture_assert_rss_bounded(DaemonFixture *d, uint64_t base_kib) {
        uint64_t now = daemon_fixture_rss_kib(d);
        ck_assert_msg(now <= 2 * base_kib + 16 * 1024, "rightsized grew from %" PRIu64 " to %" PRIu64 " KiB", base_kib,
                      now);
}

const char daemon_fixture_fast_policy[] = "[policy]\n"
                                          "match = *\n"
                                          "poll-interval = 1s\n"
                                          "floor = 768M\n"
                                          "floor-percent = 0\n"
                                          "hold-time = 5s\n";

int guest_history_since(const DaemonFixture *d, const char *name, uint64_t after_usec, uint64_t *ret_newest) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint64_t when, target, actual, estimate, newest = 0;
        int r, n = 0;

        r = bus_fixture_connect(d->bus, &bus);
        if (r < 0)
                return r;
        r = sd_bus_call_method(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "GetHistory", NULL, &reply, "s", name);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(reply, 'a', "(tttt)");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_read(reply, "(tttt)", &when, &target, &actual, &estimate)) > 0) {
                if (when > after_usec)
                        n++;
                newest = MAX(newest, when);
        }
        if (r < 0)
                return r;
        if (ret_newest)
                *ret_newest = newest;
        return n;
}

int guest_history_count(const DaemonFixture *d, const char *name) {
        return guest_history_since(d, name, 0, NULL);
}

void guest_history_wait(const DaemonFixture *d, const char *name, int n, unsigned timeout_sec) {
        uint64_t newest = 0, start = monotonic_sec();
        int seen = 0;

        ck_assert_int_ge(guest_history_since(d, name, 0, &newest), 0);
        while (seen < n) {
                ck_assert_msg(monotonic_sec() < start + timeout_sec, "%s: only %d of %d decisions in %u s", name, seen,
                              n, timeout_sec);
                usleep(200 * 1000);
                uint64_t t = 0;
                int k = guest_history_since(d, name, newest, &t);
                if (k > 0) {
                        seen += k;
                        newest = t;
                }
        }
}
