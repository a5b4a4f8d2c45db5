/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bad rightsized.conf and policy files through the real binary: `rightsized --check-config`
 * refuses each with a message that names the file, the line and the key, and prints nothing on
 * stdout; a good configuration's printout reads back to itself. Then SIGHUP on a running daemon
 * with simulated guests: a good change is taken, a bad policy file or config file is refused with
 * the same kind of message in the log, and the guests keep the policies they had. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define WAIT_SEC 30

static BusFixture bus;
static DaemonFixture d;

static void setup_dirs(void) {
        daemon_fixture_init(&d, &bus); /* --check-config needs no bus */
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
}

static void setup_bus_and_dirs(void) {
        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

static CtlRun check_config(const char *config_path) {
        char exe[PATH_MAX], out_path[PATH_MAX], err_path[PATH_MAX];
        CtlRun run = {};
        int status;

        snprintf(exe, sizeof(exe), "%s/rightsized", getenv("top_builddir") ?: ".");
        snprintf(out_path, sizeof(out_path), "%s/check.out", d.dir);
        snprintf(err_path, sizeof(err_path), "%s/check.err", d.dir);
        pid_t pid = test_fork_with_output(out_path, err_path);
        if (pid == 0) {
                unsetenv("JOURNAL_STREAM");
                execl(exe, "rightsized", "--check-config", "--config", config_path, (char *) NULL);
                _exit(121);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status), "rightsized --check-config crashed");
        run.code = WEXITSTATUS(status);
        ck_assert_int_lt(run.code, 120);
        run.out = test_read_file(out_path);
        run.err = test_read_file(err_path);
        ck_assert(run.out && run.err);
        return run;
}

static void write_bytes(const char *path, const char *data, size_t size) {
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(data, 1, size, f), size);
        ck_assert_int_eq(fclose(f), 0);
}

/* The config: [daemon] with our directories first (lines 1-3), then the case's text. */
static void write_config_with(const char *text, size_t size) {
        _cleanup_free_ char *head = NULL, *all = NULL;
        int n = asprintf(&head, "[daemon]\npolicy-dir = %s\nstate-dir = %s\n", d.policy_dir, d.state_dir);
        ck_assert_int_ge(n, 0);
        all = malloc((size_t) n + size);
        ck_assert_ptr_nonnull(all);
        memcpy(all, head, (size_t) n);
        memcpy(all + n, text, size);
        write_bytes(d.config_path, all, (size_t) n + size);
}

/* Refused: exit 1, nothing on stdout, "FILE:LINE: what" on stderr. */
static void assert_refused(const char *file, unsigned line, const char *what) {
        _cleanup_(ctl_run_done) CtlRun r = check_config(d.config_path);
        _cleanup_free_ char *expected = NULL;

        if (line > 0)
                ck_assert_int_ge(asprintf(&expected, "%s:%u: %s", file, line, what), 0);
        else
                ck_assert_int_ge(asprintf(&expected, "%s: %s", file, what), 0);
        ck_assert_msg(r.code == 1, "accepted (%d), expected '%s'", r.code, expected);
        ck_assert_msg(strstr(r.err, expected), "expected '%s' in:\n%s", expected, r.err);
        ck_assert_str_eq(r.out, "");
}

/* ---- rightsized.conf ---- */

typedef struct ConfigCase {
        const char *text;   /* after the three head lines */
        unsigned line;
        const char *what;
} ConfigCase;

static const ConfigCase config_cases[] = {
        { "colour = red\n", 4, "unknown key 'colour' in section [daemon]" },
        { "host-reserve = lots\n", 4, "key 'host-reserve': invalid size 'lots'" },
        { "host-reserve = 99999999999T\n", 4, "key 'host-reserve'" },
        { "metrics-path = relative/rightsize.prom\n", 4, "key 'metrics-path': 'relative/rightsize.prom' is not an absolute" },
        { "log-level = chatty\n", 4, "key 'log-level'" },
        { "shutdown-action = explode\n", 4, "key 'shutdown-action': invalid value 'explode' (expected keep, estimate or max)" },
        { "read-group = wheel;rm\n", 4, "key 'read-group': invalid group name 'wheel;rm'" },
        { "log-level = info\nlog-level = debug\n", 5, "key 'log-level' is set twice (first on line 4)" },
        { "state-dir = /var/lib/other\n", 4, "key 'state-dir' is set twice (first on line 3)" },
        { "log-level = info\x01\n", 4, "key 'log-level': value contains control characters" },
        { "this is not ini\n", 4, "syntax error, expected '[section]' or 'key = value'" },
        { "[daemons]\nlog-level = info\n", 5, "key 'log-level' is in an unknown section [daemons]" },
        { "[libvirt]\nenabled = maybe\n", 5, "key 'enabled': invalid boolean 'maybe'" },
        { "[qemu]\nqmp-sockets = run/*.qmp\n", 5, "key 'qmp-sockets': 'run/*.qmp'" },
        { "[qemu]\nqmp-sockets = /run/*/guest.qmp\n", 5, "key 'qmp-sockets': '/run/*/guest.qmp'" },
        { "[qemu]\nagent-socket-pattern = %n.qga\n", 5, "key 'agent-socket-pattern'" },
        { "[guests]\nmanage = *\n[libvirt]\nuri = \n", 7, "key 'uri'" },
};

START_TEST(test_bad_config) {
        const ConfigCase *c = &config_cases[_i];
        write_config_with(c->text, strlen(c->text));
        assert_refused(d.config_path, c->line, c->what);
}
END_TEST

START_TEST(test_bad_config_bytes) {
        /* A NUL byte inside a line, and a line longer than the parser takes. */
        static const char nul[] = "log-level = info\0debug\n";
        write_config_with(nul, sizeof(nul) - 1);
        assert_refused(d.config_path, 4, "line contains a NUL byte");

        char long_line[8192];
        memset(long_line, 'x', sizeof(long_line));
        memcpy(long_line, "# ", 2);
        long_line[sizeof(long_line) - 2] = '\n';
        long_line[sizeof(long_line) - 1] = '\0';
        write_config_with(long_line, strlen(long_line));
        assert_refused(d.config_path, 4, "line is longer than");

        /* Missing: names the file. */
        _cleanup_free_ char *missing = NULL;
        ck_assert_int_ge(asprintf(&missing, "%s/nonexistent.conf", d.dir), 0);
        _cleanup_(ctl_run_done) CtlRun r = check_config(missing);
        ck_assert_int_eq(r.code, 1);
        ck_assert_ptr_nonnull(strstr(r.err, missing));
        ck_assert_ptr_nonnull(strstr(r.err, "cannot open"));
}
END_TEST

START_TEST(test_good_config_round_trip) {
        _cleanup_free_ char *printed = NULL, *path2 = NULL;
        static const char text[] = "log-level = debug\nhost-reserve = 1.5G\nread-group = nogroup\n"
                                   "[guests]\nmanage = web-* db-*\n  batch-*\nexclude = web-test\n"
                                   "[qemu]\nqmp-sockets = /run/qemu/*.qmp /srv/vm/*.sock\n";

        write_config_with(text, strlen(text));
        _cleanup_(ctl_run_done) CtlRun a = check_config(d.config_path);
        ck_assert_msg(a.code == 0, "refused: %s", a.err);
        ck_assert_ptr_nonnull(strstr(a.out, "log-level = debug"));
        ck_assert_ptr_nonnull(strstr(a.out, "web-* db-* batch-*"));
        ck_assert_ptr_nonnull(strstr(a.out, "/srv/vm/*.sock"));

        /* It names the file that set each key (as "# FILE:LINE" above it)... */
        _cleanup_free_ char *origin = NULL;
        ck_assert_int_ge(asprintf(&origin, "# %s:", d.config_path), 0);
        ck_assert_msg(strstr(a.out, origin), "no '%s' in:\n%s", origin, a.out);

        /* ...and what it prints reads back to the same configuration (set in another file). */
        ck_assert_int_ge(asprintf(&path2, "%s/printed.conf", d.dir), 0);
        test_write_file(path2, a.out);
        _cleanup_(ctl_run_done) CtlRun b = check_config(path2);
        ck_assert_msg(b.code == 0, "its own output refused: %s", b.err);
        _cleanup_free_ char *a_keys = test_without_comment_lines(a.out), *b_keys = test_without_comment_lines(b.out);
        ck_assert_str_eq(b_keys, a_keys);
        /* An existing group: no warning. */
        ck_assert_msg(!strstr(a.err, "warning"), "stderr: %s", a.err);
}
END_TEST

START_TEST(test_missing_read_group_warned) {
        static const char text[] = "read-group = rs-no-such-group\n";

        write_config_with(text, strlen(text));
        _cleanup_(ctl_run_done) CtlRun a = check_config(d.config_path);
        /* Valid (the group may come later), but said. */
        ck_assert_msg(a.code == 0, "refused: %s", a.err);
        ck_assert_msg(strstr(a.err, "warning: read-group = rs-no-such-group: no such group"), "stderr: %s", a.err);
}
END_TEST

/* ---- policy files ---- */

typedef struct PolicyCase {
        const char *text;
        unsigned line;
        const char *what;
} PolicyCase;

static const PolicyCase policy_cases[] = {
        { "[policy]\nfloor = lots\n", 2, "floor: invalid size \"lots\"" },
        { "[policy]\ncolour = red\n", 2, "colour: unknown key" },
        { "[policy]\nmatch = *\nmode = sideways\n", 3, "mode: invalid mode \"sideways\"" },
        { "[policy]\npoll-interval = 0\n", 2, "poll-interval: value out of range" },
        { "[policy]\nfloor = 4G\nmax = 1G\n", 3, "max: value out of range" },
        { "[polizy]\nfloor = 1G\n", 2, "floor: unknown section [polizy]" },
        { "[policy]\nfloor\n", 2, "syntax error" },
        { "[policy]\npoll-interval = 10s\nhold-time = 1s\n", 3, "hold-time: value out of range" },
        { "[policy]\nmargin = -5%\n", 2, "margin: invalid percentage \"-5%\"" },
        { "[policy]\nprobe-step-min = 50%\nprobe-step-max = 10%\n", 3, "probe-step-max: value out of range" },
};

START_TEST(test_bad_policy) {
        const PolicyCase *c = &policy_cases[_i];
        _cleanup_free_ char *path = NULL;

        daemon_fixture_write_config(&d, "", NULL);
        /* A good policy beside the bad one: the bad one is still named. */
        daemon_fixture_write_policy(&d, "zz-bad", c->text);
        ck_assert_int_ge(asprintf(&path, "%s/zz-bad.conf", d.policy_dir), 0);
        assert_refused(path, c->line, c->what);
}
END_TEST

/* ---- SIGHUP ---- */

static GuestView view(const char *name) {
        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, name, &v), 0);
        return v;
}

static unsigned count(const char *haystack, const char *needle) {
        unsigned n = 0;
        for (const char *p = haystack; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

/* Sends SIGHUP and waits for the n-th occurrence of needle in the log. */
static void hup_and_wait(const char *needle) {
        _cleanup_free_ char *log = daemon_fixture_log(&d);
        unsigned before = count(log, needle);

        ck_assert_int_eq(kill(d.pid, SIGHUP), 0);
        for (uint64_t start = monotonic_sec();; usleep(100 * 1000)) {
                _cleanup_free_ char *now = daemon_fixture_log(&d);
                if (count(now, needle) > before)
                        return;
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "no '%s' in the log after SIGHUP", needle);
        }
}

static bool new_sample_without_fault(const GuestView *v, const void *updated) {
        return guest_view_updated_after(v, updated) && v->fault[0] == '\0';
}

static void assert_still_managed(const char *name) {
        GuestView first = view(name), v;
        ck_assert_msg(guest_view_wait(&d, name, new_sample_without_fault, &first.updated, WAIT_SEC, &v),
                      "%s is no longer managed (fault '%s')", name, v.fault);
}

START_TEST(test_sighup) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        _cleanup_free_ char *policy_path = NULL, *expected = NULL;

        daemon_fixture_start_sims(&d, 2, sim, WAIT_SEC);
        ck_assert_uint_eq(view("sim-0").floor, 768 * MIB);

        /* A good change is taken. */
        daemon_fixture_write_policy(&d, "fast", "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 896M\n"
                                                "floor-percent = 0\nhold-time = 5s\n");
        hup_and_wait("Reloaded ");
        ck_assert_uint_eq(view("sim-0").floor, 896 * MIB);

        /* A bad policy file: the log names file, line and key; the guests keep what they had. */
        daemon_fixture_write_policy(&d, "fast", "[policy]\nmatch = *\nfloor = lots\n");
        ck_assert_int_ge(asprintf(&policy_path, "%s/fast.conf", d.policy_dir), 0);
        ck_assert_int_ge(asprintf(&expected,
                                  "Reload failed, keeping the running configuration and policies: %s:3: floor: invalid size",
                                  policy_path),
                         0);
        hup_and_wait(expected);
        for (int i = 0; i < 2; i++) {
                const char *name = i == 0 ? "sim-0" : "sim-1";
                assert_still_managed(name);
                GuestView v = view(name);
                ck_assert_str_eq(v.policy, "fast");
                ck_assert_uint_eq(v.floor, 896 * MIB);
                ck_assert_uint_ge(v.target, 896 * MIB);
        }

        /* A bad config file: the same, for the config. */
        free(expected);
        ck_assert_int_ge(asprintf(&expected, "Reload failed, keeping the running configuration: %s:4: unknown key 'colour'",
                                  d.config_path),
                         0);
        write_config_with("colour = red\n", strlen("colour = red\n"));
        hup_and_wait(expected);
        assert_still_managed("sim-0");
        ck_assert_uint_eq(view("sim-0").floor, 896 * MIB);

        /* Both repaired: taken again. */
        daemon_fixture_write_config(&d, "", NULL);
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
        hup_and_wait("Reloaded ");
        ck_assert_uint_eq(view("sim-1").floor, 768 * MIB);
        ck_assert(daemon_fixture_alive(&d));
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-config");

        TCase *files = check_add_case(s, "files", setup_dirs, teardown, 30,
                                      CHECK_TESTS(test_bad_config_bytes, test_good_config_round_trip,
                                                  test_missing_read_group_warned));
        tcase_add_loop_test(files, test_bad_config, 0, (int) ARRAY_SIZE(config_cases));
        tcase_add_loop_test(files, test_bad_policy, 0, (int) ARRAY_SIZE(policy_cases));
        check_add_case(s, "sighup", setup_bus_and_dirs, teardown, 120, CHECK_TESTS(test_sighup));
        return check_run_suite(s);
}
