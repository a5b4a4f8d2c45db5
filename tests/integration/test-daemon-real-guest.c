/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized end to end on the real test guest: a private dbus-daemon, the daemon managing a
 * guest whose working set is known, the estimate converging, the balloon following, the
 * workload never stalling or being OOM-killed, a confirmed estimate's next re-probe skipped
 * and the set shrinking bringing it back, the set growing mid-run and the target following,
 * a kill -9 and restart resuming from the state file, and a reload with a bad config keeping
 * the old one. Missing QEMU or image is a failure, never a skip.
 *
 * Ground truth as in e2e-common.h, measured through the agent right after boot, before the
 * daemon takes the agent's socket. */
#include <check.h>
#include <errno.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "qmp/qmp-sync.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/e2e-common.h"
#include "tests/lib/guest-fixture.h"
#include "tests/lib/test-util.h"

#define GUEST_MEM (1024 * MIB)
#define ANON1_MIB 300
#define ANON_SHRUNK_MIB 100 /* the set shrinks by 200 MiB once a re-probe was skipped */
#define ANON2_MIB 500
/* The workload's next set comes on SIGUSR1, typed on the console once the daemon holds; its
 * own --phase times are only a fallback and lie beyond the test's deadline, so that a slow
 * convergence on a busy machine never meets a set that changed by itself. */
#define WORKLOAD_PHASE_SECS 3600
/* Deadlines for states waited for (never bounds on how fast they come): convergence under TCG
 * takes a minute or two unloaded. */
#define CONVERGE_SECS 300
#define STATE_WAIT_SECS 180
#define GUEST_NAME "qmp.sock"
#define FLOOR (256 * MIB)
/* A stall, not a slow pass: an unsqueezed pass takes 0.5-2 s under TCG, and up to ~5.6 s was
 * seen with the host's two cores shared by other guests and a sanitizer build. The bound is this,
 * or PASS_MS_FACTOR times the slowest unsqueezed pass measured before the daemon starts,
 * whichever is larger: a machine that makes every pass slow raises it, a squeeze does not. */
#define PASS_MS_BOUND 8000
#define PASS_MS_FACTOR 4
/* Unsqueezed passes measured for that reference (after the first, which allocates). */
#define REFERENCE_PASSES 3
/* Pages swapped in from a re-probe's start until 10 s after it, recovery included. One fine
 * step below a 300 MiB set swept twice a second, for one interval, costs a few thousand under
 * LRU; under CI's CPU hog a re-probe that never went below 558 MiB (the set 530) counted
 * 6,485, the first descent's pages still coming back in with it. A descent that forgot the
 * knee and walked tens of MiB into the set costs tens of thousands.
 *
 * How low a re-probe goes is printed, not asserted: the set here is MemTotal - MemAvailable
 * (less the workload) plus its 300 MiB, and MemAvailable leaves out reserves the kernel does
 * give up. A CI run's guest ran clean down to 511 MiB against that "set" of 530, in the first
 * descent and the re-probe alike. What the workload felt (these swap-ins, its passes' times
 * against the unsqueezed reference) is the outcome. */
#define RE_PROBE_SWAPIN_BOUND 8192

static GuestFixture guest;
static BusFixture bus;
static DaemonFixture daemon_fx;
static uint64_t ground_truth_base; /* bytes in balloon terms besides the workload */
static unsigned reference_pass_ms;  /* the slowest unsqueezed pass, before the daemon ran */

/* A second QMP monitor, as an operator or another controller would use (boot-guest --extra-qmp). */
static char operator_qmp[108];

static void teardown_all(void) {
        e2e_daemon_teardown(&daemon_fx);
        bus_fixture_stop(&bus);
        guest_fixture_stop(&guest);
        if (operator_qmp[0])
                (void) unlink(operator_qmp);
}

static void write_config(const char *extra_daemon_line) {
        char text[4096];
        snprintf(text, sizeof(text),
                 "[daemon]\n"
                 "policy-dir = %s\n"
                 "state-dir = %s\n"
                 "log-level = info\n"
                 "host-reserve = 256M\n"
                 "metrics-path = %s/rightsize.prom\n"
                 "shutdown-action = estimate\n"
                 "read-group =\n"
                 "%s"
                 "[guests]\n"
                 "unmatched-policy = balanced\n"
                 "[qemu]\n"
                 "qmp-sockets = %s/qmp.sock\n"
                 "agent-socket-pattern = %%d/qga.sock\n"
                 "[libvirt]\n"
                 "enabled = no\n",
                 daemon_fx.policy_dir, daemon_fx.state_dir, daemon_fx.dir, extra_daemon_line ? extra_daemon_line : "",
                 guest.run_dir);
        test_write_file(daemon_fx.config_path, text);
}

static int call_probe(void) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *client = NULL;
        int r = bus_fixture_connect(&bus, &client);
        if (r < 0)
                return r;
        return sd_bus_call_method(client, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE,
                                  "Probe", NULL, NULL, "s", GUEST_NAME);
}

/* The estimate the killed daemon left in its state file, or -1 when it had none. */
static int64_t saved_estimate(void) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/" GUEST_NAME ".json", daemon_fx.state_dir);
        json_object *doc = json_object_from_file(path), *snapshot, *estimate;
        ck_assert_msg(doc, "state file %s unreadable", path);
        ck_assert(json_object_object_get_ex(doc, "snapshot", &snapshot));
        ck_assert(json_object_object_get_ex(snapshot, "estimate", &estimate));
        int64_t v = json_object_get_int64(estimate);
        json_object_put(doc);
        return v;
}

static uint64_t json_u64(json_object *obj, const char *key) {
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(obj, key, &v) && json_object_is_type(v, json_type_int),
                      "key %s missing or not a number", key);
        return (uint64_t) json_object_get_int64(v);
}

/* rightsizectl show, text and JSON, agrees with what the daemon says over D-Bus. */
static void check_ctl_show(const GuestView *v) {
        CtlRun text = ctl_run(&daemon_fx, "show", GUEST_NAME);
        ck_assert_int_eq(text.code, 0);
        fprintf(stderr, "rightsizectl show " GUEST_NAME ":\n%s", text.out);
        ck_assert_ptr_nonnull(strstr(text.out, GUEST_NAME));
        ck_assert_ptr_nonnull(strstr(text.out, v->state));
        ck_assert_msg(strstr(text.out, "estimate") || strstr(text.out, "Estimate"), "no estimate line");
        ctl_run_done(&text);

        CtlRun json = ctl_run(&daemon_fx, "--json", "show", GUEST_NAME);
        ck_assert_int_eq(json.code, 0);
        json_object *doc = json_tokener_parse(json.out), *name, *history, *state;
        ck_assert_msg(doc, "rightsizectl --json show printed no JSON");
        ctl_run_done(&json);
        ck_assert(json_object_object_get_ex(doc, "name", &name));
        ck_assert_str_eq(json_object_get_string(name), GUEST_NAME);
        ck_assert(json_object_object_get_ex(doc, "state", &state));
        ck_assert_str_eq(json_object_get_string(state), v->state);
        /* Held: the estimate is stable between the two reads. */
        ck_assert_uint_eq(json_u64(doc, "estimate"), v->estimate);
        ck_assert_uint_ge(json_u64(doc, "floor"), FLOOR);
        ck_assert_uint_eq(json_u64(doc, "max"), GUEST_MEM);
        ck_assert_uint_eq(json_u64(doc, "reclaimed"), GUEST_MEM - json_u64(doc, "actual"));
        /* The host's side: QEMU's RSS is read through SO_PEERCRED, and what it got back is
         * max less that RSS (free page reporting returns more than the balloon alone). */
        uint64_t rss = json_u64(doc, "host-rss");
        ck_assert_uint_gt(rss, 0);
        ck_assert_uint_eq(json_u64(doc, "host-returned"), rss < GUEST_MEM ? GUEST_MEM - rss : 0);
        ck_assert(within(json_u64(doc, "target"), v->target, 0.03));
        ck_assert(json_object_object_get_ex(doc, "history", &history));
        ck_assert(json_object_is_type(history, json_type_array));
        ck_assert_uint_gt(json_object_array_length(history), 10);
        json_object_put(doc);
}

/* The guest's swap-ins so far (pages), from the last vmstat line the workload printed. */
static uint64_t console_pswpin(void) {
        char *line = NULL;
        size_t size = 0;
        uint64_t v = 0;
        FILE *f = fopen(guest.console_path, "re");

        ck_assert_ptr_nonnull(f);
        while (getline(&line, &size, f) > 0) {
                const char *p = strstr(line, "rs-workload: vmstat ");
                if (p && (p = strstr(p, " pswpin=")))
                        v = strtoull(p + 8, NULL, 10);
        }
        free(line);
        fclose(f);
        return v;
}

/* Sets the balloon through the operator's monitor: 0 or the command's exit status. */
static int operator_balloon(uint64_t bytes) {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "%s/contrib/guest-ctl qmp %s balloon '{\"value\": %llu}' >/dev/null",
                 getenv("top_srcdir") ?: "..", operator_qmp, (unsigned long long) bytes);
        return system(cmd);
}

/* The value of a counter of this guest in the metrics file, or -1 when it has none yet. */
/* The end of the daemon's log, for a failure's message: the decisions that led there (its
 * directory may not outlive a CI run's machine). */
#define LOG_TAIL_BYTES (24 * 1024)
static const char *daemon_log_tail(char *buf, size_t size) {
        _cleanup_free_ char *log = daemon_fixture_log(&daemon_fx);
        size_t n = log ? strlen(log) : 0;
        snprintf(buf, size, "%s", log ? log + (n >= size ? n - (size - 1) : 0) : "(no log)");
        return buf;
}

static int64_t metrics_counter(const char *metric) {
        char path[PATH_MAX], prefix[256], *line = NULL;
        size_t size = 0;
        int64_t v = -1;

        snprintf(path, sizeof(path), "%s/rightsize.prom", daemon_fx.dir);
        snprintf(prefix, sizeof(prefix), "%s{guest=\"" GUEST_NAME "\"", metric);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        while (getline(&line, &size, f) > 0)
                if (strncmp(line, prefix, strlen(prefix)) == 0) {
                        const char *value = strrchr(line, ' ');
                        v = value ? strtoll(value + 1, NULL, 10) : -1;
                }
        free(line);
        fclose(f);
        return v;
}

/* Types SIGUSR1 to the workload on the serial console until it prints `phase_line` (its next
 * set), for up to STATE_WAIT_SECS: whether it did. A line typed on the console was once lost
 * (no phase line within 180 s, at rest in hold): it is typed again every 30 s until the
 * workload answers (a pass takes seconds, so a signal seen is answered long before). The
 * acknowledgement is split in the typed text so that the console's echo of the command cannot
 * be mistaken for it. */
static bool next_workload_phase(const char *phase_line) {
        bool moved = false;

        for (double start = e2e_now_sec(), typed = 0; !moved && e2e_now_sec() < start + STATE_WAIT_SECS;) {
                if (e2e_now_sec() >= typed + 30) {
                        if (typed > 0)
                                fprintf(stderr, "no phase line %.0f s after typing the signal (acknowledged: %s): again\n",
                                        e2e_now_sec() - typed,
                                        file_contains(guest.console_path, "RS-USR1-SENT") ? "yes" : "no");
                        ck_assert_int_eq(guest_fixture_console(&guest, "killall -USR1 rs-workload && echo RS-USR1-''SENT"), 0);
                        typed = e2e_now_sec();
                }
                usleep(250 * 1000);
                moved = file_contains(guest.console_path, phase_line);
        }
        return moved;
}

/* Waits up to timeout_sec for the guest's state to be `state`. */
static bool wait_state(const char *state, unsigned timeout_sec, GuestView *v) {
        for (unsigned i = 0; i < timeout_sec * 2; i++) {
                if (e2e_get_guest(&daemon_fx, GUEST_NAME, v) == 0 && strcmp(v->state, state) == 0)
                        return true;
                usleep(500 * 1000);
        }
        return false;
}

/* The workload's passes on the console so far: how many, and the slowest of those numbered
 * from_pass on. */
static unsigned console_passes(unsigned from_pass, unsigned *ret_max_ms) {
        char *line = NULL;
        size_t size = 0;
        unsigned max_ms = 0, passes = 0;
        FILE *f = fopen(guest.console_path, "re");

        ck_assert_ptr_nonnull(f);
        while (getline(&line, &size, f) > 0) {
                const char *p = strstr(line, "rs-workload: pass="), *ms;
                if (!p || !(ms = strstr(p, " ms=")))
                        continue;
                passes++;
                if (strtoul(p + strlen("rs-workload: pass="), NULL, 10) >= from_pass)
                        max_ms = MAX(max_ms, (unsigned) strtoul(ms + 4, NULL, 10));
        }
        free(line);
        fclose(f);
        *ret_max_ms = max_ms;
        return passes;
}

/* The workload's own view: no pass slower than the bound, no OOM kill. */
static void check_console(unsigned *ret_max_ms) {
        char *line = NULL, bad[256] = "", slowest[256] = "";
        size_t size = 0;
        unsigned max_ms = 0, passes = 0;
        FILE *f = fopen(guest.console_path, "re");

        ck_assert_ptr_nonnull(f);
        while (getline(&line, &size, f) > 0) {
                const char *p = strstr(line, "rs-workload: pass=");
                if (!bad[0] && (strstr(line, "Out of memory") || strstr(line, "RIGHTSIZE-WORKLOAD-EXIT")))
                        snprintf(bad, sizeof(bad), "%s", line);
                if (p && (p = strstr(p, " ms="))) {
                        unsigned ms = (unsigned) strtoul(p + 4, NULL, 10);
                        /* Its line (pass number, time since the workload began, phase sizes,
                         * faults): a failure says when in the run the slow pass came. */
                        if (ms > max_ms)
                                snprintf(slowest, sizeof(slowest), "%s", strstr(line, "rs-workload: pass="));
                        max_ms = MAX(max_ms, ms);
                        passes++;
                }
        }
        /* Freed before any assertion: a failed one leaves the function by longjmp, and the
         * sanitizer build would report the line buffer as a leak on top of the failure. */
        free(line);
        fclose(f);
        ck_assert_msg(!bad[0], "guest OOM or workload ended: %s", bad);
        ck_assert_uint_gt(passes, 10);
        unsigned bound = MAX((unsigned) PASS_MS_BOUND, PASS_MS_FACTOR * reference_pass_ms);
        slowest[strcspn(slowest, "\r\n")] = '\0';
        ck_assert_msg(max_ms <= bound, "a workload pass took %u ms (bound %u ms; unsqueezed, the slowest took %u ms): %s",
                      max_ms, bound, reference_pass_ms, slowest);
        *ret_max_ms = max_ms;
}

static int read_file_by_agent(void *userdata, const char *path, char **ret) {
        size_t size;
        return qga_sync_read_file(userdata, path, 65536, 10 * USEC_PER_SEC, ret, &size, NULL);
}

static void measure_ground_truth(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qga_client_freep) QgaClient *g = NULL;

        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(qga_client_new(&g, e), 0);
        ck_assert_int_eq(qga_client_connect_path(g, guest.qga_path), 0);
        ck_assert_int_eq(qga_sync_wait_ready(g, 20 * USEC_PER_SEC), 0);
        ground_truth_base = e2e_ground_truth_base(guest.console_path, GUEST_MEM, ANON1_MIB, read_file_by_agent, g);
}

/* The reference for PASS_MS_BOUND: REFERENCE_PASSES passes after the first, before the daemon
 * squeezes anything. Waited for by count (a pass every 0.5 s plus its own time). */
static void measure_reference_passes(void) {
        unsigned max_ms = 0;
        double start = e2e_now_sec();

        while (console_passes(2, &max_ms) < 1 + REFERENCE_PASSES) {
                ck_assert_msg(e2e_now_sec() < start + 300, "the workload made fewer than %d passes in 300 s",
                              1 + REFERENCE_PASSES);
                sleep(1);
        }
        reference_pass_ms = max_ms;
        fprintf(stderr, "reference: the slowest unsqueezed pass took %u ms\n", reference_pass_ms);
}

static void setup_all(void) {
        char workload[128];

        e2e_teardown_on_signals(teardown_all);
        snprintf(workload, sizeof(workload), "--anon-mib %d --sleep-ms 500 --vmstat --phase %d:%d --phase %d:%d",
                 ANON1_MIB, WORKLOAD_PHASE_SECS, ANON_SHRUNK_MIB, WORKLOAD_PHASE_SECS + 1, ANON2_MIB);
        snprintf(operator_qmp, sizeof(operator_qmp), "/tmp/rs-it-operator-%d.qmp", (int) getpid());
        char options[256];
        snprintf(options, sizeof(options), "--mem 1G --swap 384M --extra-qmp %s", operator_qmp);
        guest_fixture_boot(&guest, options, workload);
        atexit(teardown_all);
        measure_ground_truth();
        measure_reference_passes();
        ck_assert_int_eq(bus_fixture_start(&bus, BUS_POLICY_OPEN), 0);
        daemon_fixture_init(&daemon_fx, &bus);
        /* Short interval and hold so that the test converges in minutes under TCG. */
        daemon_fixture_write_policy(&daemon_fx, "test",
                                    "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 256M\nhold-time = 15s\n"
                                    "probe-step-max = 10%\nrefault-sensitivity = medium\n"
                                    /* Back-off after an emergency lands on the clean size at once
                                     * instead of stepping down from max through sizes where late
                                     * swap-ins look like growth. */
                                    "change-cap-percent = 50%\n");
        write_config(NULL);
}

START_TEST(test_daemon_real_guest) {
        GuestView v;
        unsigned max_ms;
        char path[PATH_MAX];
        double t0 = e2e_now_sec();

        daemon_fixture_start(&daemon_fx);

        /* 1. Convergence on the first set. */
        uint64_t truth1 = ground_truth_base + ANON1_MIB * MIB;
        ck_assert_msg(e2e_wait_converged(&daemon_fx, GUEST_NAME, truth1, CONVERGE_SECS, t0, &v, "phase 1"),
                      "no convergence within 15 %% of %.0f MiB", mib(truth1));
        fprintf(stderr, "converged after %.0fs: estimate %.0f MiB vs truth %.0f MiB (%+.1f %%), target %.0f, actual %.0f\n",
                e2e_now_sec() - t0, mib(v.estimate), mib(truth1),
                100.0 * ((double) v.estimate - (double) truth1) / (double) truth1, mib(v.target), mib(v.actual));
        ck_assert_uint_ge(v.floor, FLOOR);
        ck_assert(v.target < GUEST_MEM - 64 * MIB);

        /* 1b. A timed re-probe of the set it just found costs the workload little (issue 13):
         * it starts at the estimate and, the guest tight there, stops; or takes fine steps
         * below it and backs off on the first refaulting sample. Its swap-ins, counted from
         * entering the probe until 10 s after holding again (the pages coming back), stay
         * under RE_PROBE_SWAPIN_BOUND. Waited for by state, with generous deadlines. */
        uint64_t estimate_before = v.estimate;
        ck_assert_msg(wait_state("probe", STATE_WAIT_SECS, &v), "no re-probe after the hold time (state %s)", v.state);
        uint64_t swapin0 = console_pswpin(), lowest = v.actual;
        unsigned passes_before_reprobe = console_passes(UINT_MAX, &max_ms);
        bool held_again = false;
        for (double start = e2e_now_sec(); !held_again && e2e_now_sec() < start + STATE_WAIT_SECS;) {
                usleep(250 * 1000);
                if (e2e_get_guest(&daemon_fx, GUEST_NAME, &v) == 0) {
                        lowest = MIN(lowest, v.actual);
                        held_again = strcmp(v.state, "hold") == 0;
                }
        }
        ck_assert_msg(held_again, "the re-probe did not end (state %s)", v.state);
        sleep(10);
        uint64_t reprobe_swapins = console_pswpin() - swapin0;
        fprintf(stderr, "re-probe: %llu pages swapped in (bound %d), lowest %.1f MiB (estimate before %.1f, "
                "the set by MemAvailable %.1f), estimate %.0f MiB\n", (unsigned long long) reprobe_swapins,
                RE_PROBE_SWAPIN_BOUND, mib(lowest), mib(estimate_before), mib(truth1), mib(v.estimate));
        unsigned reprobe_max_ms;
        (void) console_passes(passes_before_reprobe, &reprobe_max_ms);
        unsigned pass_bound = MAX((unsigned) PASS_MS_BOUND, PASS_MS_FACTOR * reference_pass_ms);
        ck_assert_msg(reprobe_max_ms <= pass_bound,
                      "a workload pass took %u ms during the re-probe (bound %u ms; unsqueezed, the slowest took %u ms)",
                      reprobe_max_ms, pass_bound, reference_pass_ms);
        ck_assert_msg(reprobe_swapins <= RE_PROBE_SWAPIN_BOUND, "a re-probe swapped %llu pages in",
                      (unsigned long long) reprobe_swapins);
        ck_assert_msg(within(v.estimate, truth1, 0.15), "re-probed estimate %.0f MiB", mib(v.estimate));

        /* 1c. Issue 13: a probe whose expected gain is nil does not run. A re-probe landed on
         * the estimate; the set is anonymous (nothing in the page cache a re-probe could find)
         * and no sign says it shrank: the next hold ends with the re-probe skipped, counted,
         * and no probe cycle started. A re-probe that moved the estimate instead gets one more
         * re-probe first, so at most one more cycle. Waited for by the count. */
        uint64_t cycles_held = v.probe_cycles;
        bool skipped = false;
        for (double start = e2e_now_sec(); !skipped && e2e_now_sec() < start + 2 * STATE_WAIT_SECS;) {
                sleep(1);
                skipped = e2e_get_guest(&daemon_fx, GUEST_NAME, &v) == 0 && v.reprobes_skipped > 0;
        }
        static char tail[LOG_TAIL_BYTES];
        ck_assert_msg(skipped, "no re-probe skipped (state %s, %llu probe cycles, reason: %s); the daemon's log ends:\n%s",
                      v.state, (unsigned long long) v.probe_cycles, v.reason, daemon_log_tail(tail, sizeof(tail)));
        ck_assert_str_eq(v.state, "hold");
        ck_assert_msg(v.probe_cycles <= cycles_held + 1,
                      "%llu probe cycles before the first skip, %llu at the re-probe's end; the daemon's log ends:\n%s",
                      (unsigned long long) v.probe_cycles, (unsigned long long) cycles_held,
                      daemon_log_tail(tail, sizeof(tail)));
        uint64_t cycles_at_skip = v.probe_cycles, skipped_at_skip = v.reprobes_skipped, estimate_full = v.estimate;
        fprintf(stderr, "re-probe skipped: %llu skipped, %llu probe cycles (%llu at the re-probe's end), estimate %.0f MiB\n",
                (unsigned long long) v.reprobes_skipped, (unsigned long long) v.probe_cycles,
                (unsigned long long) cycles_held, mib(v.estimate));
        /* The operator's view of it: the metrics file, written every interval. */
        bool counted = false;
        for (double start = e2e_now_sec(); !counted && e2e_now_sec() < start + 30; usleep(500 * 1000))
                counted = metrics_counter("rightsize_guest_reprobes_skipped_total") >= 1;
        ck_assert_msg(counted, "rightsize_guest_reprobes_skipped_total not above 0 in rightsize.prom");

        /* 1d. The set shrinks by 200 MiB: available memory rises well above what the guest had
         * at its estimate, so the next re-probe runs at once (not at the doubled hold's end, nor
         * skipped), and it follows the set down. */
        uint64_t truth_shrunk = ground_truth_base + ANON_SHRUNK_MIB * MIB;
        ck_assert_msg(next_workload_phase("rs-workload: phase=1 "), "the workload did not shrink its set on SIGUSR1");
        bool probed = false;
        for (double start = e2e_now_sec(); !probed && e2e_now_sec() < start + STATE_WAIT_SECS;) {
                usleep(500 * 1000);
                probed = e2e_get_guest(&daemon_fx, GUEST_NAME, &v) == 0 &&
                         (v.probe_cycles > cycles_at_skip || v.reprobes_skipped > skipped_at_skip);
        }
        ck_assert_msg(probed, "no re-probe after the set shrank (state %s, reason: %s)", v.state, v.reason);
        ck_assert_msg(v.reprobes_skipped == skipped_at_skip,
                      "the re-probe after the set shrank was skipped (%llu skipped, reason: %s)",
                      (unsigned long long) v.reprobes_skipped, v.reason);
        ck_assert_msg(e2e_wait_converged(&daemon_fx, GUEST_NAME, truth_shrunk, CONVERGE_SECS, t0, &v, "shrunk"),
                      "the estimate did not follow the set down to within 15 %% of %.0f MiB", mib(truth_shrunk));
        ck_assert_uint_lt(v.estimate, estimate_full - 100 * MIB);
        fprintf(stderr, "followed the shrunk set: estimate %.0f MiB vs truth %.0f MiB (%+.1f %%)\n", mib(v.estimate),
                mib(truth_shrunk), 100.0 * ((double) v.estimate - (double) truth_shrunk) / (double) truth_shrunk);

        /* Metrics and state file. */
        snprintf(path, sizeof(path), "%s/rightsize.prom", daemon_fx.dir);
        ck_assert(file_contains(path, "rightsize_guest_estimate_bytes{guest=\"" GUEST_NAME "\"}"));
        ck_assert(file_contains(path, "rightsize_guests_managed 1"));
        snprintf(path, sizeof(path), "%s/" GUEST_NAME ".json", daemon_fx.state_dir);
        ck_assert_int_eq(access(path, R_OK), 0);

        /* 2. Restart: kill -9 mid-probe, start again, resume from the state file. */
        ck_assert_int_ge(call_probe(), 0);
        ck_assert_msg(wait_state("probe", STATE_WAIT_SECS, &v), "no probe after Probe (state %s)", v.state);
        usleep(1500 * 1000);
        (void) daemon_fixture_stop(&daemon_fx, SIGKILL);
        /* A probe that already hit refaults has proven the old estimate too small and saved
         * none: then the resumed daemon backs off and probes again, never learns anew. */
        int64_t saved = saved_estimate();
        daemon_fixture_start(&daemon_fx);
        bool resumed = false;
        for (double start = e2e_now_sec(); !resumed && e2e_now_sec() < start + STATE_WAIT_SECS;) {
                sleep(1);
                resumed = e2e_get_guest(&daemon_fx, GUEST_NAME, &v) == 0 && strcmp(v.state, "connecting") != 0;
        }
        ck_assert(resumed);
        fprintf(stderr, "resumed in state %s, saved estimate %.0f MiB\n", v.state,
                saved < 0 ? -1.0 : mib((uint64_t) saved));
        ck_assert_msg(strcmp(v.state, "learn") != 0, "restarted from scratch (state %s)", v.state);
        ck_assert(file_contains(daemon_fx.log_path, "Resumed from the state file"));
        if (saved >= 0) {
                ck_assert(v.has_estimate);
                ck_assert_uint_eq(v.estimate, (uint64_t) saved);
                ck_assert_msg(within(v.estimate, truth_shrunk, 0.15), "restored estimate %.0f MiB", mib(v.estimate));
        }
        ck_assert_uint_ge(v.target, FLOOR);

        /* 3. A reload with a bad config keeps the old one. */
        write_config("host-reserve = lots\n");
        ck_assert_int_eq(kill(daemon_fx.pid, SIGHUP), 0);
        ck_assert(daemon_fixture_wait_log(&daemon_fx, "keeping the running configuration", STATE_WAIT_SECS));
        ck_assert(file_contains(daemon_fx.log_path, "key 'host-reserve'"));
        ck_assert(file_contains(daemon_fx.log_path, "keeping the running configuration"));
        ck_assert(daemon_fixture_alive(&daemon_fx));
        ck_assert_int_eq(e2e_get_guest(&daemon_fx, GUEST_NAME, &v), 0);
        write_config(NULL);

        /* 4. The set grows to 500 MiB while the guest holds: the target follows. The workload
         * moves to its last phase on SIGUSR1, typed on the serial console once the daemon
         * holds (or, should it not within STATE_WAIT_SECS, whatever it does then). */
        uint64_t truth2 = ground_truth_base + ANON2_MIB * MIB;
        for (double start = e2e_now_sec();
             e2e_now_sec() < start + STATE_WAIT_SECS &&
             !(e2e_get_guest(&daemon_fx, GUEST_NAME, &v) == 0 && strcmp(v.state, "hold") == 0);)
                sleep(1);
        double t_grow = e2e_now_sec();
        ck_assert_msg(next_workload_phase("rs-workload: phase=2 "),
                      "the workload did not move to its last phase on SIGUSR1 (acknowledged: %s)",
                      file_contains(guest.console_path, "RS-USR1-SENT") ? "yes" : "no");
        fprintf(stderr, "[%5.1fs] the set grows to %d MiB (in state %s)\n", t_grow - t0, ANON2_MIB, v.state);
        ck_assert_msg(e2e_wait_converged(&daemon_fx, GUEST_NAME, truth2, CONVERGE_SECS, t0, &v, "phase 2"),
                      "the target did not follow the grown set");
        /* The target follows: above what the first set held (630 MiB or so, under 90 % of the
         * new truth). Not 95 %: an estimate 14 % low still converges, and under TCG one did (a probe
         * judged clean on its first sample at a size, closing the bracket on a refault seen
         * while the set grew). */
        ck_assert_uint_ge(v.target, truth2 * 90 / 100);
        fprintf(stderr, "phase 2 after %.0fs (%.0f s after the set grew): estimate %.0f MiB vs truth %.0f MiB (%+.1f %%), "
                "target %.0f, actual %.0f\n", e2e_now_sec() - t0, e2e_now_sec() - t_grow, mib(v.estimate), mib(truth2),
                100.0 * ((double) v.estimate - (double) truth2) / (double) truth2, mib(v.target), mib(v.actual));

        check_ctl_show(&v);

        /* Never below the floor, the workload never stalled, no OOM kill. */
        ck_assert_uint_ge(e2e_min_actual_seen(), FLOOR);
        check_console(&max_ms);
        fprintf(stderr, "lowest balloon seen %.0f MiB (floor %.0f); slowest workload pass %u ms\n",
                mib(e2e_min_actual_seen()), mib(FLOOR), max_ms);

        /* 5. Another controller sets the balloon (issue 16): the daemon pauses the guest with the
         * reason instead of fighting, and `rightsizectl resume` takes it back. 95 % of what it
         * holds, so the set still fits. */
        ck_assert_msg(wait_state("hold", STATE_WAIT_SECS, &v), "no hold before the outside change (state %s)", v.state);
        uint64_t ours = v.target, theirs = v.actual / 100 * 95;
        ck_assert_int_eq(operator_balloon(theirs), 0);
        bool paused = false;
        for (double start = e2e_now_sec(); !paused && e2e_now_sec() < start + STATE_WAIT_SECS;) {
                usleep(500 * 1000);
                paused = e2e_get_guest(&daemon_fx, GUEST_NAME, &v) == 0 && v.paused && strstr(v.reason, "set from outside");
        }
        ck_assert_msg(paused, "not paused after the balloon was set from outside (state %s, actual %.0f MiB, reason %s)",
                      v.state, mib(v.actual), v.reason);
        fprintf(stderr, "set from outside to %.0f MiB: paused (%s)\n", mib(theirs), v.reason);
        sleep(3); /* three intervals: the daemon leaves the balloon where the other controller put it */
        ck_assert_int_eq(e2e_get_guest(&daemon_fx, GUEST_NAME, &v), 0);
        ck_assert_msg(v.paused && v.actual < ours - 16 * MIB, "the daemon fought the outside change: actual %.0f MiB",
                      mib(v.actual));
        CtlRun resume = ctl_run(&daemon_fx, "resume", GUEST_NAME);
        ck_assert_msg(resume.code == 0, "resume: %d %s", resume.code, resume.err);
        ctl_run_done(&resume);
        bool back = false;
        for (double start = e2e_now_sec(); !back && e2e_now_sec() < start + STATE_WAIT_SECS;) {
                usleep(500 * 1000);
                back = e2e_get_guest(&daemon_fx, GUEST_NAME, &v) == 0 && !v.paused && v.actual + 16 * MIB >= v.target;
        }
        ck_assert_msg(back, "not back at the daemon's size after resume (actual %.0f MiB, target %.0f MiB)", mib(v.actual),
                      mib(v.target));

        /* SIGTERM: a clean exit. */
        int status = daemon_fixture_stop(&daemon_fx, SIGTERM);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

/* ---- --check-config, no guest needed ---- */

START_TEST(test_check_config) {
        const char *builddir = getenv("top_builddir") ?: ".";
        char dir[] = "/tmp/rs-cc-XXXXXX", cmd[PATH_MAX * 3], conf[PATH_MAX], conf2[PATH_MAX];
        _cleanup_free_ char *out1 = NULL, *out2 = NULL, *err = NULL;
        int status;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/a.conf", dir);
        snprintf(conf2, sizeof(conf2), "%s/b.conf", dir);
        test_write_file(conf, "[daemon]\npolicy-dir = /nonexistent/policies\nhost-reserve = 5%\nlog-level = debug\n"
                              "[qemu]\nqmp-sockets = /run/a/*.qmp /run/b/*.qmp\n[guests]\nexclude = test-*\n");

        snprintf(cmd, sizeof(cmd), "%s/rightsized --config %s --check-config", builddir, conf);
        out1 = e2e_capture(cmd, &status);
        ck_assert_ptr_nonnull(out1);
        ck_assert_int_eq(status, 0);
        ck_assert_ptr_nonnull(strstr(out1, "host-reserve = 5%"));
        test_write_file(conf2, out1);
        snprintf(cmd, sizeof(cmd), "%s/rightsized --config %s --check-config", builddir, conf2);
        out2 = e2e_capture(cmd, &status);
        ck_assert_ptr_nonnull(out2);
        ck_assert_int_eq(status, 0);
        _cleanup_free_ char *settings1 = test_without_comment_lines(out1), *settings2 = test_without_comment_lines(out2);
        ck_assert_str_eq(settings1, settings2); /* the same settings; the comments name their files */

        test_write_file(conf, "[daemon]\nstate-dir = /var/lib/x\n\nhost-reserve = lots\n");
        snprintf(cmd, sizeof(cmd), "%s/rightsized --config %s --check-config 2>&1", builddir, conf);
        err = e2e_capture(cmd, &status);
        ck_assert_ptr_nonnull(err);
        ck_assert_int_eq(status, 1);
        ck_assert_msg(strstr(err, conf) && strstr(err, ":4") && strstr(err, "host-reserve"), "message: %s", err);

        unlink(conf);
        unlink(conf2);
        rmdir(dir);
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-real-guest");
        TCase *tc_config = tcase_create("check-config");

        tcase_add_test(tc_config, test_check_config);
        suite_add_tcase(s, tc_config);
        return e2e_run_suite(s, "real-guest", test_daemon_real_guest, setup_all, teardown_all, 900);
}
