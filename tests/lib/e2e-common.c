/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/lib/e2e-common.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/check-run.h"

static uint64_t min_actual_seen = UINT64_MAX;

int e2e_run_suite(Suite *s, const char *name, const TTest *test, void (*setup)(void), void (*teardown)(void),
                  unsigned timeout_sec) {
        TCase *tc = tcase_create(name);

        tcase_add_unchecked_fixture(tc, setup, teardown);
        check_set_deadline(tc, timeout_sec);
        tcase_add_test(tc, test);
        suite_add_tcase(s, tc);
        int r = check_run_suite_nofork(s);
        teardown();
        return r;
}

static void (*signal_teardown)(void);

static void on_teardown_signal(int sig) {
        if (signal_teardown)
                signal_teardown();
        signal(sig, SIG_DFL);
        raise(sig);
}

void e2e_teardown_on_signals(void (*teardown)(void)) {
        signal_teardown = teardown;
        check_set_deadline_cleanup(teardown);
        signal(SIGINT, on_teardown_signal);
        signal(SIGTERM, on_teardown_signal);
}

void e2e_setup(DaemonFixture *d, BusFixture *bus, void (*teardown)(void)) {
        e2e_teardown_on_signals(teardown);
        atexit(teardown);
        ck_assert_int_eq(bus_fixture_start(bus, BUS_POLICY_OPEN), 0);
        daemon_fixture_init(d, bus);
}

void e2e_daemon_teardown(DaemonFixture *d) {
        if (d->pid > 0 && d->dir) {
                fprintf(stderr, "rightsized still running at teardown: its log stays in %s\n", d->log_path);
                (void) setenv("TEST_KEEP", "1", 1);
        }
        if (d->pid > 0) {
                (void) kill(d->pid, SIGKILL);
                (void) waitpid(d->pid, NULL, 0);
                d->pid = -1;
        }
        (void) daemon_fixture_release(d);
}

double e2e_now_sec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

double mib(uint64_t bytes) {
        return (double) bytes / (double) MIB;
}

bool within(uint64_t value, uint64_t truth, double fraction) {
        double d = (double) value - (double) truth;
        return (d < 0 ? -d : d) <= fraction * (double) truth;
}

bool file_contains(const char *path, const char *needle) {
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

int e2e_run(const char *command) {
        int r = system(command);
        return r == -1 ? -errno : WIFEXITED(r) ? WEXITSTATUS(r) : 128;
}

char *e2e_capture(const char *command, int *ret_status) {
        char *out = NULL, buf[4096];
        size_t size = 0, n;
        FILE *p = popen(command, "r"), *m;
        int status;

        if (!p)
                return NULL;
        m = open_memstream(&out, &size);
        if (!m) {
                pclose(p);
                return NULL;
        }
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                fwrite(buf, 1, n, m);
        status = pclose(p);
        fclose(m);
        if (ret_status)
                *ret_status = status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return out;
}

int e2e_get_guest(const DaemonFixture *d, const char *name, GuestView *v) {
        int r = guest_view_get(d, name, v);
        ck_assert_msg(r != -EBADMSG, "GetGuest %s: a reply that does not parse", name);
        if (r == 0 && v->actual > 0)
                min_actual_seen = MIN(min_actual_seen, v->actual);
        return r;
}

uint64_t e2e_min_actual_seen(void) {
        return min_actual_seen;
}

void e2e_print_view(const char *what, double t0, const GuestView *v, uint64_t truth) {
        fprintf(stderr, "[%5.1fs] %s: state=%s target=%.0f actual=%.0f estimate=%.0f vmem=%.0f (truth %.0f MiB)%s%s\n",
                e2e_now_sec() - t0, what, v->state, mib(v->target), mib(v->actual),
                v->has_estimate ? mib(v->estimate) : -1.0, mib(v->vmem), mib(truth), v->fault[0] ? " fault: " : "",
                v->fault);
}

bool e2e_wait_converged(const DaemonFixture *d, const char *name, uint64_t truth, unsigned timeout_sec, double t0,
                        GuestView *v, const char *what) {
        double start = e2e_now_sec();

        while (e2e_now_sec() < start + timeout_sec) {
                if (e2e_get_guest(d, name, v) == 0) {
                        e2e_print_view(what, t0, v, truth);
                        if (v->has_estimate && within(v->estimate, truth, 0.15) && strcmp(v->state, "hold") == 0 &&
                            within(v->actual, v->target, 0.03))
                                return true;
                }
                sleep(2);
        }
        return false;
}

int ctl_code_argv(const DaemonFixture *d, const char *const *args) {
        CtlRun run = ctl_run_argv(d, 0, 0, args);
        int code = run.code;

        ctl_run_done(&run);
        return code;
}

static uint64_t kib_value(const char *text, const char *key) {
        const char *p = strstr(text, key);
        ck_assert_msg(p, "%s missing", key);
        return strtoull(p + strlen(key), NULL, 10) * KIB;
}

static char *agent_read(E2eAgentReadFile read_file, void *userdata, const char *path) {
        char *text = NULL;
        int r = read_file(userdata, path, &text);
        ck_assert_msg(r == 0 && text, "agent: reading %s: %s", path, strerror(r < 0 ? -r : EIO));
        return text;
}

uint64_t e2e_ground_truth_base(const char *console_path, uint64_t guest_mem, unsigned anon_mib,
                               E2eAgentReadFile read_file, void *userdata) {
        _cleanup_free_ char *meminfo = NULL, *pid = NULL, *status = NULL;
        char path[64];
        uint64_t total, avail, rss_anon, base;

        /* The workload must have touched its whole set once (a pass takes seconds under TCG;
         * the deadline is for a workload that never runs, generous for a busy machine). */
        for (double start = e2e_now_sec();
             !file_contains(console_path, "rs-workload: pass=2 ") && e2e_now_sec() < start + 300;)
                sleep(1);
        ck_assert_msg(file_contains(console_path, "rs-workload: pass=2 "), "the workload did not run");
        meminfo = agent_read(read_file, userdata, "/proc/meminfo");
        /* /proc/self would be qemu-ga: find the workload through its pid file. */
        pid = agent_read(read_file, userdata, "/run/rs-workload.pid");
        pid[strcspn(pid, "\r\n")] = '\0';
        snprintf(path, sizeof(path), "/proc/%s/status", pid);
        status = agent_read(read_file, userdata, path);

        total = kib_value(meminfo, "MemTotal:");
        avail = kib_value(meminfo, "MemAvailable:");
        rss_anon = kib_value(status, "RssAnon:");
        ck_assert_uint_gt(total, 0);
        ck_assert_uint_le(total, guest_mem);
        ck_assert_uint_le(avail, total);
        ck_assert_uint_ge(rss_anon, (anon_mib - 10) * MIB);
        ck_assert_uint_le(rss_anon, total - avail);
        base = (guest_mem - total) + (total - avail - rss_anon);
        fprintf(stderr, "ground truth: reserved %.0f + used without the workload %.0f = %.0f MiB, plus %u MiB anon\n",
                mib(guest_mem - total), mib(total - avail - rss_anon), mib(base), anon_mib);
        return base;
}
