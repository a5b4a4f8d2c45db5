/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized end to end on the real test guest: a private dbus-daemon, the daemon managing a
 * guest whose working set is known, the estimate converging, the balloon following, the
 * workload never stalling or being OOM-killed, the set growing mid-run and the target
 * following, a kill -9 and restart resuming from the state file, and a reload with a bad
 * config keeping the old one. Missing QEMU or image is a failure, never a skip.
 *
 * Ground truth. The workload's set is its anonymous MiB, but the balloon sizes the whole guest,
 * so the working set in balloon terms is
 *     (RAM − MemTotal)                what the guest kernel reserved at boot (memmap, code)
 *   + (MemTotal − MemAvailable − RssAnon of rs-workload)   the rest of the guest in use
 *   + anon MiB                        the workload
 * measured through the agent right after boot, before the daemon takes the agent's socket. */
#include <check.h>
#include <errno.h>
#include <json-c/json.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "qmp/qmp-sync.h"
#include "tests/integration/guest-fixture.h"

#define GUEST_MEM (1024 * MIB)
#define ANON1_MIB 300
#define ANON2_MIB 500
#define PHASE_SECS 170
#define GUEST_NAME "qmp.sock"
#define FLOOR (256 * MIB)
#define PASS_MS_BOUND 5000

static GuestFixture guest;
static char tmpdir[64];
static char config_path[PATH_MAX], bus_address[512], daemon_log[PATH_MAX];
static pid_t bus_pid = -1, daemon_pid = -1;
static uint64_t ground_truth_base; /* bytes in balloon terms besides the workload */
static uint64_t min_actual_seen = UINT64_MAX;

static void kill_wait(pid_t *pid, int sig) {
        if (*pid > 0) {
                (void) kill(*pid, sig);
                (void) waitpid(*pid, NULL, 0);
                *pid = -1;
        }
}

static void teardown_all(void) {
        kill_wait(&daemon_pid, SIGKILL);
        kill_wait(&bus_pid, SIGTERM);
        guest_fixture_stop(&guest);
}

static void on_signal(int sig) {
        teardown_all();
        signal(sig, SIG_DFL);
        raise(sig);
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

static void write_config(const char *path, const char *extra_daemon_line) {
        char text[4096];
        snprintf(text, sizeof(text),
                 "[daemon]\n"
                 "policy-dir = %s/policies\n"
                 "state-dir = %s/state\n"
                 "log-level = info\n"
                 "host-reserve = 256M\n"
                 "metrics-path = %s/rightsize.prom\n"
                 "shutdown-action = estimate\n"
                 "read-group =\n"
                 "%s"
                 "[qemu]\n"
                 "qmp-sockets = %s/qmp.sock\n"
                 "agent-socket-pattern = %%d/qga.sock\n"
                 "[libvirt]\n"
                 "enabled = no\n",
                 tmpdir, tmpdir, tmpdir, extra_daemon_line ? extra_daemon_line : "", guest.run_dir);
        write_file(path, text);
}

static void start_bus(void) {
        char conf[PATH_MAX], text[1024];
        int pipefd[2];
        ssize_t n;

        snprintf(conf, sizeof(conf), "%s/bus.conf", tmpdir);
        snprintf(text, sizeof(text),
                 "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
                 " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                 "<busconfig><listen>unix:path=%s/bus</listen><auth>EXTERNAL</auth>\n"
                 "<policy context=\"default\"><allow user=\"root\"/><allow own=\"*\"/>"
                 "<allow send_destination=\"*\" eavesdrop=\"true\"/><allow receive_sender=\"*\"/></policy>"
                 "</busconfig>\n",
                 tmpdir);
        write_file(conf, text);

        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        bus_pid = fork();
        ck_assert_int_ge(bus_pid, 0);
        if (bus_pid == 0) {
                char arg[PATH_MAX + 32];
                signal(SIGTERM, SIG_DFL);
                if (dup2(pipefd[1], 3) < 0)
                        _exit(127);
                snprintf(arg, sizeof(arg), "--config-file=%s", conf);
                execlp("dbus-daemon", "dbus-daemon", arg, "--print-address=3", "--nofork", "--nopidfile", (char *) NULL);
                _exit(127);
        }
        close(pipefd[1]);
        n = read(pipefd[0], bus_address, sizeof(bus_address) - 1);
        close(pipefd[0]);
        ck_assert_msg(n > 0, "dbus-daemon did not start");
        bus_address[n] = '\0';
        bus_address[strcspn(bus_address, "\n")] = '\0';
}

static void start_daemon(void) {
        const char *builddir = getenv("top_builddir") ?: ".";
        char exe[PATH_MAX];

        snprintf(exe, sizeof(exe), "%s/rightsized", builddir);
        daemon_pid = fork();
        ck_assert_int_ge(daemon_pid, 0);
        if (daemon_pid == 0) {
                int fd = open(daemon_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                signal(SIGTERM, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
                        _exit(127);
                setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
                unsetenv("NOTIFY_SOCKET");
                execl(exe, "rightsized", "--config", config_path, "--foreground", (char *) NULL);
                _exit(127);
        }
}

static uint64_t now_sec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec;
}

/* ---- GetGuest ---- */

typedef struct GuestView {
        bool found;
        char state[32];
        uint64_t estimate, target, actual, floor;
        bool has_estimate;
} GuestView;

static int get_guest(GuestView *v) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        *v = (GuestView) {};
        if ((r = sd_bus_new(&bus)) < 0 || (r = sd_bus_set_address(bus, bus_address)) < 0 ||
            (r = sd_bus_set_bus_client(bus, true)) < 0 || (r = sd_bus_start(bus)) < 0)
                return r;
        r = sd_bus_call_method(bus, "org.rightsize.Manager1", "/org/rightsize/Manager1", "org.rightsize.Manager1",
                               "GetGuest", &error, &reply, "s", GUEST_NAME);
        if (r < 0)
                return r;
        ck_assert_int_ge(sd_bus_message_enter_container(reply, 'a', "{sv}"), 0);
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key, *contents;
                ck_assert_int_ge(sd_bus_message_read(reply, "s", &key), 0);
                ck_assert_int_ge(sd_bus_message_peek_type(reply, NULL, &contents), 0);
                uint64_t *u = strcmp(key, "estimate") == 0 ? &v->estimate
                            : strcmp(key, "target") == 0   ? &v->target
                            : strcmp(key, "actual") == 0   ? &v->actual
                            : strcmp(key, "floor") == 0    ? &v->floor
                                                           : NULL;
                if (u && strcmp(contents, "t") == 0) {
                        ck_assert_int_ge(sd_bus_message_read(reply, "v", "t", u), 0);
                        if (u == &v->estimate)
                                v->has_estimate = true;
                } else if (strcmp(key, "state") == 0) {
                        const char *s;
                        ck_assert_int_ge(sd_bus_message_read(reply, "v", "s", &s), 0);
                        snprintf(v->state, sizeof(v->state), "%s", s);
                } else
                        ck_assert_int_ge(sd_bus_message_skip(reply, "v"), 0);
                ck_assert_int_ge(sd_bus_message_exit_container(reply), 0);
        }
        v->found = true;
        if (v->actual > 0 && v->actual < min_actual_seen)
                min_actual_seen = v->actual;
        return 0;
}

static int call_simple(const char *method, const char *arg) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        if ((r = sd_bus_new(&bus)) < 0 || (r = sd_bus_set_address(bus, bus_address)) < 0 ||
            (r = sd_bus_set_bus_client(bus, true)) < 0 || (r = sd_bus_start(bus)) < 0)
                return r;
        return sd_bus_call_method(bus, "org.rightsize.Manager1", "/org/rightsize/Manager1", "org.rightsize.Manager1",
                                  method, &error, NULL, "s", arg);
}

static double mib(uint64_t b) {
        return (double) b / (double) MIB;
}

static bool within(uint64_t value, uint64_t truth, double fraction) {
        double d = (double) value - (double) truth;
        return (d < 0 ? -d : d) <= fraction * (double) truth;
}

/* Waits until the estimate is within 15 % of truth and the guest holds near its target. */
static bool wait_converged(uint64_t truth, unsigned timeout_sec, GuestView *v, const char *what) {
        uint64_t start = now_sec();
        while (now_sec() < start + timeout_sec) {
                if (get_guest(v) == 0) {
                        fprintf(stderr, "[%3us] %s: state=%s target=%.0f actual=%.0f estimate=%.0f (truth %.0f MiB)\n",
                                (unsigned) (now_sec() - start), what, v->state, mib(v->target), mib(v->actual),
                                v->has_estimate ? mib(v->estimate) : -1.0, mib(truth));
                        if (v->has_estimate && within(v->estimate, truth, 0.15) && strcmp(v->state, "hold") == 0 &&
                            within(v->actual, v->target, 0.03))
                                return true;
                }
                sleep(2);
        }
        return false;
}

/* The estimate the killed daemon left in its state file, or -1 when it had none. */
static int64_t saved_estimate(void) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/state/" GUEST_NAME ".json", tmpdir);
        json_object *doc = json_object_from_file(path), *snapshot, *estimate;
        ck_assert_msg(doc, "state file %s unreadable", path);
        ck_assert(json_object_object_get_ex(doc, "snapshot", &snapshot));
        ck_assert(json_object_object_get_ex(snapshot, "estimate", &estimate));
        int64_t v = json_object_get_int64(estimate);
        json_object_put(doc);
        return v;
}

/* Runs rightsizectl with ARGS on the private bus; returns its exit status, output in buf. */
static int run_ctl(char *buf, size_t size, const char *const *args) {
        const char *builddir = getenv("top_builddir") ?: ".";
        char exe[PATH_MAX];
        int pipefd[2], status;
        size_t n = 0;
        ssize_t k;

        snprintf(exe, sizeof(exe), "%s/rightsizectl", builddir);
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                const char *argv[8] = { "rightsizectl" };
                for (size_t i = 0; args[i] && i + 2 < ARRAY_SIZE(argv); i++)
                        argv[i + 1] = args[i];
                if (dup2(pipefd[1], STDOUT_FILENO) < 0)
                        _exit(127);
                setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
                execv(exe, (char *const *) argv);
                _exit(127);
        }
        close(pipefd[1]);
        while (n + 1 < size && (k = read(pipefd[0], buf + n, size - 1 - n)) > 0)
                n += (size_t) k;
        buf[n] = '\0';
        close(pipefd[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static uint64_t json_u64(json_object *obj, const char *key) {
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(obj, key, &v) && json_object_is_type(v, json_type_int),
                      "key %s missing or not a number", key);
        return (uint64_t) json_object_get_int64(v);
}

/* rightsizectl show, text and JSON, agrees with what the daemon says over D-Bus. */
static void check_ctl_show(const GuestView *v) {
        static char out[256 * 1024];

        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "show", GUEST_NAME, NULL }), 0);
        fprintf(stderr, "rightsizectl show " GUEST_NAME ":\n%s", out);
        ck_assert_ptr_nonnull(strstr(out, GUEST_NAME));
        ck_assert_ptr_nonnull(strstr(out, v->state));
        ck_assert_msg(strstr(out, "estimate") || strstr(out, "Estimate"), "no estimate line");

        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "--json", "show", GUEST_NAME, NULL }), 0);
        json_object *doc = json_tokener_parse(out), *name, *history, *state;
        ck_assert_msg(doc, "rightsizectl --json show printed no JSON");
        ck_assert(json_object_object_get_ex(doc, "name", &name));
        ck_assert_str_eq(json_object_get_string(name), GUEST_NAME);
        ck_assert(json_object_object_get_ex(doc, "state", &state));
        ck_assert_str_eq(json_object_get_string(state), v->state);
        /* Held: the estimate is stable between the two reads. */
        ck_assert_uint_eq(json_u64(doc, "estimate"), v->estimate);
        ck_assert_uint_ge(json_u64(doc, "floor"), FLOOR);
        ck_assert_uint_eq(json_u64(doc, "max"), GUEST_MEM);
        ck_assert_uint_eq(json_u64(doc, "reclaimed"), GUEST_MEM - json_u64(doc, "actual"));
        ck_assert(within(json_u64(doc, "target"), v->target, 0.03));
        ck_assert(json_object_object_get_ex(doc, "history", &history));
        ck_assert(json_object_is_type(history, json_type_array));
        ck_assert_uint_gt(json_object_array_length(history), 10);
        json_object_put(doc);
}

/* The workload's own view: no pass slower than the bound, no OOM kill. */
static void check_console(unsigned *ret_max_ms) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        unsigned max_ms = 0, passes = 0;
        FILE *f = fopen(guest.console_path, "re");

        ck_assert_ptr_nonnull(f);
        while (getline(&line, &size, f) > 0) {
                const char *p = strstr(line, "rs-workload: pass=");
                ck_assert_msg(!strstr(line, "Out of memory"), "guest OOM: %s", line);
                ck_assert_msg(!strstr(line, "RIGHTSIZE-WORKLOAD-EXIT"), "workload ended: %s", line);
                if (p && (p = strstr(p, " ms="))) {
                        max_ms = MAX(max_ms, (unsigned) strtoul(p + 4, NULL, 10));
                        passes++;
                }
        }
        fclose(f);
        ck_assert_uint_gt(passes, 10);
        ck_assert_msg(max_ms <= PASS_MS_BOUND, "a workload pass took %u ms", max_ms);
        *ret_max_ms = max_ms;
}

static bool file_contains(const char *path, const char *needle) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        bool found = false;
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        while (!found && getline(&line, &size, f) > 0)
                found = strstr(line, needle) != NULL;
        fclose(f);
        return found;
}

static void measure_ground_truth(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qga_client_freep) QgaClient *g = NULL;
        _cleanup_free_ char *error = NULL, *status = NULL;
        GuestMeminfo mi;
        size_t size;
        uint64_t rss_anon = 0;

        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(qga_client_new(&g, e), 0);
        ck_assert_int_eq(qga_client_connect_path(g, guest.qga_path), 0);
        ck_assert_int_eq(qga_sync_wait_ready(g, 20 * USEC_PER_SEC), 0);

        /* The workload must have touched its whole set once. */
        for (int i = 0; i < 60 && !file_contains(guest.console_path, "rs-workload: pass=2 "); i++)
                sleep(1);
        ck_assert_int_eq(qga_sync_read_meminfo(g, 10 * USEC_PER_SEC, &mi, &error), 0);
        /* /proc/self would be qemu-ga: find the workload through its pid file. */
        char pidtext[32] = "";
        {
                _cleanup_free_ char *data = NULL;
                ck_assert_int_eq(qga_sync_read_file(g, "/run/rs-workload.pid", 4096, 10 * USEC_PER_SEC, &data, &size,
                                                    NULL),
                                 0);
                snprintf(pidtext, sizeof(pidtext), "%s", data);
                pidtext[strcspn(pidtext, "\r\n")] = '\0';
        }
        char path[64];
        snprintf(path, sizeof(path), "/proc/%s/status", pidtext);
        ck_assert_int_eq(qga_sync_read_file(g, path, 65536, 10 * USEC_PER_SEC, &status, &size, NULL), 0);
        const char *p = strstr(status, "RssAnon:");
        ck_assert_ptr_nonnull(p);
        rss_anon = strtoull(p + 8, NULL, 10) * KIB;

        uint64_t total = mi.value[GUEST_MEMINFO_MEM_TOTAL], avail = mi.value[GUEST_MEMINFO_MEM_AVAILABLE];
        ck_assert(guest_value_is_known(total) && guest_value_is_known(avail));
        ck_assert_uint_ge(rss_anon, (ANON1_MIB - 10) * MIB);
        ground_truth_base = (GUEST_MEM - total) + (total - avail - rss_anon);
        fprintf(stderr, "ground truth: reserved %.0f + used without the workload %.0f = %.0f MiB, plus the anon set\n",
                mib(GUEST_MEM - total), mib(total - avail - rss_anon), mib(ground_truth_base));
}

static void setup_all(void) {
        char dir[PATH_MAX];

        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/rs-dt-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
        snprintf(dir, sizeof(dir), "%s/policies", tmpdir);
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        snprintf(dir, sizeof(dir), "%s/policies/test.conf", tmpdir);
        /* Short interval and hold so that the test converges in minutes under TCG. */
        write_file(dir, "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 256M\nhold-time = 15s\n"
                        "probe-step-max = 10%\nrefault-sensitivity = medium\n"
                        /* Back-off after an emergency lands on the clean size at once instead of
                         * stepping down from max through sizes where late swap-ins look like growth. */
                        "change-cap-percent = 50%\n");
        snprintf(config_path, sizeof(config_path), "%s/rightsized.conf", tmpdir);
        snprintf(daemon_log, sizeof(daemon_log), "%s/rightsized.log", tmpdir);

        char workload[128];
        snprintf(workload, sizeof(workload), "--anon-mib %d --sleep-ms 500 --phase %d:%d", ANON1_MIB, PHASE_SECS,
                 ANON2_MIB);
        guest_fixture_boot(&guest, "--mem 1G --swap 384M", workload);
        atexit(teardown_all);
        measure_ground_truth();
        write_config(config_path, NULL);
        start_bus();
}

START_TEST(test_daemon_real_guest) {
        GuestView v;
        unsigned max_ms;
        char path[PATH_MAX];
        uint64_t t0 = now_sec();

        start_daemon();

        /* 1. Convergence on the first set. */
        uint64_t truth1 = ground_truth_base + ANON1_MIB * MIB;
        ck_assert_msg(wait_converged(truth1, PHASE_SECS - 20, &v, "phase 1"), "no convergence within 15 %% of %.0f MiB",
                      mib(truth1));
        fprintf(stderr, "converged after %us: estimate %.0f MiB vs truth %.0f MiB (%+.1f %%), target %.0f, actual %.0f\n",
                (unsigned) (now_sec() - t0), mib(v.estimate), mib(truth1),
                100.0 * ((double) v.estimate - (double) truth1) / (double) truth1, mib(v.target), mib(v.actual));
        ck_assert_uint_ge(v.floor, FLOOR);
        ck_assert(v.target < GUEST_MEM - 64 * MIB);

        /* Metrics and state file. */
        snprintf(path, sizeof(path), "%s/rightsize.prom", tmpdir);
        ck_assert(file_contains(path, "rightsize_guest_estimate_bytes{guest=\"" GUEST_NAME "\"}"));
        ck_assert(file_contains(path, "rightsize_guests_managed 1"));
        snprintf(path, sizeof(path), "%s/state/" GUEST_NAME ".json", tmpdir);
        ck_assert_int_eq(access(path, R_OK), 0);

        /* 2. Restart: kill -9 mid-probe, start again, resume from the state file. */
        ck_assert_int_ge(call_simple("Probe", GUEST_NAME), 0);
        for (int i = 0; i < 20 && get_guest(&v) == 0 && strcmp(v.state, "probe") != 0; i++)
                usleep(500 * 1000);
        ck_assert_str_eq(v.state, "probe");
        usleep(1500 * 1000);
        kill_wait(&daemon_pid, SIGKILL);
        /* A probe that already hit refaults has proven the old estimate too small and saved
         * none: then the resumed daemon backs off and probes again, never learns anew. */
        int64_t saved = saved_estimate();
        start_daemon();
        bool resumed = false;
        for (int i = 0; i < 30 && !resumed; i++) {
                sleep(1);
                resumed = get_guest(&v) == 0 && strcmp(v.state, "connecting") != 0;
        }
        ck_assert(resumed);
        fprintf(stderr, "resumed in state %s, saved estimate %.0f MiB\n", v.state,
                saved < 0 ? -1.0 : mib((uint64_t) saved));
        ck_assert_msg(strcmp(v.state, "learn") != 0, "restarted from scratch (state %s)", v.state);
        ck_assert(file_contains(daemon_log, "Resumed from the state file"));
        if (saved >= 0) {
                ck_assert(v.has_estimate);
                ck_assert_uint_eq(v.estimate, (uint64_t) saved);
                ck_assert_msg(within(v.estimate, truth1, 0.15), "restored estimate %.0f MiB", mib(v.estimate));
        }
        ck_assert_uint_ge(v.target, FLOOR);

        /* 3. A reload with a bad config keeps the old one. */
        write_config(config_path, "host-reserve = lots\n");
        ck_assert_int_eq(kill(daemon_pid, SIGHUP), 0);
        sleep(2);
        ck_assert(file_contains(daemon_log, "key 'host-reserve'"));
        ck_assert(file_contains(daemon_log, "keeping the running configuration"));
        ck_assert_int_eq(kill(daemon_pid, 0), 0);
        ck_assert_int_eq(get_guest(&v), 0);
        write_config(config_path, NULL);

        /* 4. The set grows to 500 MiB: the target follows. */
        uint64_t truth2 = ground_truth_base + ANON2_MIB * MIB;
        while (now_sec() < t0 + PHASE_SECS - 20)
                sleep(2);
        ck_assert_msg(wait_converged(truth2, 200, &v, "phase 2"), "the target did not follow the grown set");
        ck_assert_uint_ge(v.target, truth2 * 95 / 100);
        fprintf(stderr, "phase 2 after %us: estimate %.0f MiB vs truth %.0f MiB (%+.1f %%), target %.0f, actual %.0f\n",
                (unsigned) (now_sec() - t0), mib(v.estimate), mib(truth2),
                100.0 * ((double) v.estimate - (double) truth2) / (double) truth2, mib(v.target), mib(v.actual));

        check_ctl_show(&v);

        /* Never below the floor, the workload never stalled, no OOM kill. */
        ck_assert_uint_ge(min_actual_seen, FLOOR);
        check_console(&max_ms);
        fprintf(stderr, "lowest balloon seen %.0f MiB (floor %.0f); slowest workload pass %u ms\n", mib(min_actual_seen),
                mib(FLOOR), max_ms);

        /* SIGTERM: a clean exit. */
        ck_assert_int_eq(kill(daemon_pid, SIGTERM), 0);
        int status;
        ck_assert_int_eq(waitpid(daemon_pid, &status, 0), daemon_pid);
        daemon_pid = -1;
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* ---- --check-config, no guest needed ---- */

static char *run_capture(const char *command, int *ret_status) {
        char *out = NULL;
        size_t size = 0, n;
        char buf[4096];
        FILE *p = popen(command, "r");
        FILE *m = open_memstream(&out, &size);

        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_nonnull(m);
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                fwrite(buf, 1, n, m);
        *ret_status = pclose(p);
        fclose(m);
        return out;
}

START_TEST(test_check_config) {
        const char *builddir = getenv("top_builddir") ?: ".";
        char dir[] = "/tmp/rs-cc-XXXXXX", cmd[PATH_MAX * 3], conf[PATH_MAX], conf2[PATH_MAX];
        _cleanup_free_ char *out1 = NULL, *out2 = NULL, *err = NULL;
        int status;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/a.conf", dir);
        snprintf(conf2, sizeof(conf2), "%s/b.conf", dir);
        write_file(conf, "[daemon]\npolicy-dir = /nonexistent/policies\nhost-reserve = 5%\nlog-level = debug\n"
                         "[qemu]\nqmp-sockets = /run/a/*.qmp /run/b/*.qmp\n[guests]\nexclude = test-*\n");

        snprintf(cmd, sizeof(cmd), "%s/rightsized --config %s --check-config", builddir, conf);
        out1 = run_capture(cmd, &status);
        ck_assert_int_eq(status, 0);
        ck_assert_ptr_nonnull(strstr(out1, "host-reserve = 5%"));
        write_file(conf2, out1);
        snprintf(cmd, sizeof(cmd), "%s/rightsized --config %s --check-config", builddir, conf2);
        out2 = run_capture(cmd, &status);
        ck_assert_int_eq(status, 0);
        ck_assert_str_eq(out1, out2);

        write_file(conf, "[daemon]\nstate-dir = /var/lib/x\n\nhost-reserve = lots\n");
        snprintf(cmd, sizeof(cmd), "%s/rightsized --config %s --check-config 2>&1", builddir, conf);
        err = run_capture(cmd, &status);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
        ck_assert_msg(strstr(err, conf) && strstr(err, ":4") && strstr(err, "host-reserve"), "message: %s", err);

        unlink(conf);
        unlink(conf2);
        rmdir(dir);
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-real-guest");
        TCase *tc_config = tcase_create("check-config");
        TCase *tc = tcase_create("real-guest");
        int failed;

        tcase_add_test(tc_config, test_check_config);
        suite_add_tcase(s, tc_config);
        tcase_add_unchecked_fixture(tc, setup_all, teardown_all);
        tcase_set_timeout(tc, 900);
        tcase_add_test(tc, test_daemon_real_guest);
        suite_add_tcase(s, tc);

        SRunner *sr = srunner_create(s);
        /* No fork: the daemon and the bus are children of this process, so teardown_all() can
         * always find and kill them, whatever failed. */
        srunner_set_fork_status(sr, CK_NOFORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        teardown_all();
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
