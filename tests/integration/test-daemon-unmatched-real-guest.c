/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* unmatched-policy on a real QEMU guest (issue 16; test-daemon-unmatched.c does the same with
 * simulated guests). rightsized runs as installed, with the compiled-in unmatched-policy
 * (observe-only), and one real 1 GiB test guest (idle, no agent) boots in its discovery directory;
 * its policy directory holds a policy that matches other guests only and one that matches none.
 *   - The guest is observed, never resized: listed over D-Bus in state observe under the
 *     unmatched policy, with an estimate (its size less what the guest calls available, checked
 *     against QEMU's own guest stats) between 0 and 1 GiB and something it would give back; over
 *     5 of the daemon's samples QEMU's query-balloon, asked through a second QMP monitor, stays
 *     at 1 GiB, and the daemon's log has no balloon command.
 *   - A reload naming the policy that matches none as unmatched-policy (1 s interval, 768 MiB
 *     floor): the guest leaves observe, and QEMU's balloon moves below 1 GiB, never below the
 *     floor, until the daemon holds it.
 * Waits are on state (samples counted in the history, the balloon as QEMU reports it) with
 * generous deadlines. The daemon must exit cleanly on SIGTERM. Printed: boot to listed in
 * observe, boot to an estimate, reload to the first balloon move and to holding, and the balloon
 * commands the daemon logged. Missing QEMU or image is a failure, never a skip, as in the other
 * real-guest tests. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
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

#define GUEST "vm-real"
#define GUEST_MEM (1024 * MIB)
#define FLOOR DAEMON_FIXTURE_FLOOR
/* The smallest guest with a balloon and stats: no virtio-mem device, no agent, no workload. */
#define BOOT_OPTIONS "--mem 1G --vmem-size 0 --no-agent"
/* Samples over which an observed guest must keep its balloon (observe-only: every 10 s): a
 * rightsizing policy would have learned its baseline in 3 and moved it at the 4th. */
#define OBSERVED_SAMPLES 5
/* The policy the operator names for unmatched guests: no match line, so it matches none itself. */
#define RESIZE_POLICY "resize"
/* Deadlines, not bounds: a TCG boot takes 20-60 s, and the machine may be busy. */
#define OBSERVE_WAIT_SEC 240
#define SAMPLES_WAIT_SEC (OBSERVED_SAMPLES * 10 * 3)
#define BALLOON_WAIT_SEC 240
#define WAIT_SEC 60
/* The estimate is the guest's size less its available memory, as of the daemon's own sample:
 * an idle guest's available memory moves by less than this between that and the test's. */
#define AVAILABLE_SLACK (32 * MIB)
/* The start of every balloon command the daemon logs (at debug level): a new target, or why
 * setting one failed. */
#define BALLOON_COMMAND "]: balloon "

static GuestFixture guest;
static BusFixture bus;
static DaemonFixture daemon_fx;
/* A second QMP monitor of the guest for the test (boot-guest --extra-qmp): the daemon holds the
 * first, and QEMU serves one client per monitor. Outside the discovery directory. */
static char monitor_path[PATH_MAX];
static sd_event *monitor_event;
static QmpClient *monitor;

static void teardown_all(void) {
        qmp_client_freep(&monitor);
        monitor_event = sd_event_unref(monitor_event);
        /* The guest runs in the daemon's directory: stop it before that goes. */
        guest_fixture_stop(&guest);
        e2e_daemon_teardown(&daemon_fx);
        bus_fixture_stop(&bus);
}

/* The fixture's config at debug level (balloon commands are logged there), without its
 * "unmatched-policy = balanced" line, with `unmatched` in [guests] instead ("" for none: the
 * compiled-in default). */
static void write_config(const char *unmatched) {
        daemon_fixture_write_config(&daemon_fx, "", NULL);
        daemon_fixture_replace_config_line(&daemon_fx, "log-level = info\n", "log-level = debug\n");
        daemon_fixture_replace_config_line(&daemon_fx, "unmatched-policy = balanced\n", unmatched);
}

static void setup_all(void) {
        e2e_teardown_on_signals(teardown_all);
        atexit(teardown_all);
        ck_assert_int_eq(bus_fixture_start(&bus, BUS_POLICY_OPEN), 0);
        daemon_fixture_init(&daemon_fx, &bus);
        write_config("");
        /* Policies exist, but none for this guest: one matches other names, one matches none. */
        daemon_fixture_write_policy(&daemon_fx, "web", "[policy]\nmatch = web-*\npoll-interval = 1s\n");
        daemon_fixture_write_policy(&daemon_fx, RESIZE_POLICY,
                                    "[policy]\nmode = rightsize\npoll-interval = 1s\nfloor = 768M\n"
                                    "floor-percent = 0\nhold-time = 5s\n");
        snprintf(monitor_path, sizeof(monitor_path), "%s/monitor.sock", daemon_fx.dir);
        daemon_fixture_start(&daemon_fx);
}

/* boot-guest has ended, booted or not: seen without reaping it (guest_fixture_boot_wait() does). */
static bool boot_ended(void) {
        siginfo_t si = {};

        return guest.boot_pid > 0 && waitid(P_PID, guest.boot_pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
               si.si_pid == guest.boot_pid;
}

static void monitor_connect(void) {
        ck_assert_int_eq(sd_event_new(&monitor_event), 0);
        ck_assert_int_eq(qmp_client_new(&monitor, monitor_event), 0);
        ck_assert_int_eq(qmp_client_connect_path(monitor, monitor_path), 0);
        ck_assert_int_eq(qmp_sync_wait_ready(monitor, 30 * USEC_PER_SEC), 0);
}

/* QEMU's own balloon size (query-balloon), never the daemon's word for it. */
static uint64_t qemu_actual(void) {
        _cleanup_free_ char *error = NULL;
        QmpBalloonInfo info;
        int r = qmp_sync_query_balloon(monitor, 30 * USEC_PER_SEC, &info, &error);

        ck_assert_msg(r >= 0, "query-balloon: %s", error ?: strerror(-r));
        return info.actual;
}

/* What the guest calls available, as QEMU last had it from the balloon driver. */
static uint64_t qemu_available(void) {
        _cleanup_free_ char *error = NULL;
        QmpGuestStats stats;
        int r = qmp_sync_get_guest_stats(monitor, NULL, 30 * USEC_PER_SEC, &stats, &error);

        ck_assert_msg(r >= 0, "guest-stats: %s", error ?: strerror(-r));
        ck_assert(qmp_value_is_known(stats.value[QMP_STAT_AVAILABLE_MEMORY]));
        return stats.value[QMP_STAT_AVAILABLE_MEMORY];
}

/* GetGuest's "reclaimable" (what the guest would give back), which GuestView does not carry:
 * 0, -ENODATA when the record has none (no estimate yet), or -errno. */
static int get_reclaimable(const char *name, uint64_t *ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *b = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *key;
        int r;

        if ((r = bus_fixture_connect(&bus, &b)) < 0 ||
            (r = sd_bus_call_method(b, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "GetGuest", NULL, &reply, "s",
                                    name)) < 0 ||
            (r = sd_bus_message_enter_container(reply, 'a', "{sv}")) < 0)
                return r;
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                if ((r = sd_bus_message_read(reply, "s", &key)) < 0)
                        return r;
                if (strcmp(key, "reclaimable") == 0)
                        return sd_bus_message_read(reply, "v", "t", ret) < 0 ? -EBADMSG : 0;
                if ((r = sd_bus_message_skip(reply, "v")) < 0 || (r = sd_bus_message_exit_container(reply)) < 0)
                        return r;
        }
        return r < 0 ? r : -ENODATA;
}

/* The balloon commands in the daemon's log, into the test's. */
static void print_balloon_commands(void) {
        _cleanup_free_ char *log = daemon_fixture_log(&daemon_fx);
        char *save = NULL;

        for (char *line = log ? strtok_r(log, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save))
                if (strstr(line, BALLOON_COMMAND))
                        fprintf(stderr, "rightsized: %s\n", line);
}

static bool observed_with_estimate(const GuestView *v) {
        return strcmp(v->state, "observe") == 0 && v->has_estimate;
}

/* Observed as an unmatched guest, untouched, with an estimate and something to give back. */
static void assert_observed(const GuestView *v) {
        uint64_t reclaimable = 0;

        ck_assert_str_eq(v->state, "observe");
        ck_assert_str_eq(v->policy, "observe-only");
        ck_assert_str_eq(v->mode, "observe");
        ck_assert_str_eq(v->fault, "");
        ck_assert_uint_eq(v->max, GUEST_MEM);
        ck_assert_uint_eq(v->target, GUEST_MEM);
        ck_assert_uint_eq(v->actual, GUEST_MEM);
        ck_assert_msg(v->has_estimate && v->estimate > 0 && v->estimate < GUEST_MEM, "estimate %.0f MiB",
                      v->has_estimate ? mib(v->estimate) : -1.0);
        /* Held at its estimate plus margin, never below the floor: at most max − floor. */
        ck_assert_int_eq(get_reclaimable(GUEST, &reclaimable), 0);
        ck_assert_msg(reclaimable > 0 && reclaimable <= v->max - v->floor,
                      "would give back %.0f MiB (max %.0f, floor %.0f MiB)", mib(reclaimable), mib(v->max),
                      mib(v->floor));
}

static bool estimate_is_size_less_available(GuestView *v) {
        uint64_t available = qemu_available(), actual = qemu_actual();

        ck_assert_int_eq(e2e_get_guest(&daemon_fx, GUEST, v), 0);
        if (available > actual)
                return false;
        uint64_t used = actual - available;
        return v->estimate + AVAILABLE_SLACK >= used && v->estimate <= used + AVAILABLE_SLACK;
}

START_TEST(test_unmatched_real_guest_observed_then_resized) {
        double t0 = e2e_now_sec();
        GuestView v = {};
        char options[PATH_MAX + 64];

        /* 1. A guest appears: observed, under the compiled-in unmatched-policy. */
        snprintf(options, sizeof(options), "%s --extra-qmp %s", BOOT_OPTIONS, monitor_path);
        guest_fixture_boot_in(&guest, daemon_fx.qmp_dir, GUEST, options, NULL);
        double observed_after = -1;
        while (!(e2e_get_guest(&daemon_fx, GUEST, &v) == 0 && observed_with_estimate(&v))) {
                /* A boot that failed fails here, with the console's tail, not at the deadline. */
                if (boot_ended())
                        guest_fixture_boot_wait(&guest);
                if (observed_after < 0 && strcmp(v.state, "observe") == 0)
                        observed_after = e2e_now_sec() - t0;
                ck_assert_msg(e2e_now_sec() < t0 + OBSERVE_WAIT_SEC, GUEST " not observed with an estimate: state '%s'",
                              v.state);
                usleep(200 * 1000);
        }
        double estimate_after = e2e_now_sec() - t0;
        if (observed_after < 0)
                observed_after = estimate_after;
        if (guest.boot_pid > 0)
                guest_fixture_boot_wait(&guest);
        e2e_print_view("observed", t0, &v, FLOOR);
        fprintf(stderr, "boot to listed in observe: %.1f s, to an estimate: %.1f s (guest booted after %.1f s)\n",
                observed_after, estimate_after, e2e_now_sec() - t0);
        assert_observed(&v);
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, "Managing: 1 GiB (balloon at 1 GiB), policy observe-only"),
                         1);
        _cleanup_free_ char *row = ctl_list_row(&daemon_fx, GUEST);
        ck_assert_msg(row, GUEST " missing from rightsizectl list");
        fprintf(stderr, "list: %s\n", row);
        ck_assert_msg(strstr(row, " observe ") && strstr(row, " observe-only "), "row: %s", row);

        /* The estimate is the size less what the guest calls available, by QEMU's own figures. */
        monitor_connect();
        bool matches = false;
        for (double start = e2e_now_sec(); !matches && e2e_now_sec() < start + WAIT_SEC; usleep(500 * 1000))
                matches = estimate_is_size_less_available(&v);
        fprintf(stderr, "estimate %.0f MiB, QEMU: actual %.0f MiB, available %.0f MiB\n", mib(v.estimate),
                mib(qemu_actual()), mib(qemu_available()));
        ck_assert_msg(matches, "the estimate is not the size less the available memory");

        /* 2. Over OBSERVED_SAMPLES samples, QEMU's balloon stays whole and the daemon sends nothing. */
        uint64_t newest = 0;
        int samples = 0;
        unsigned readings = 0;
        ck_assert_int_ge(guest_history_since(&daemon_fx, GUEST, 0, &newest), 0);
        double t_samples = e2e_now_sec();
        while (samples < OBSERVED_SAMPLES) {
                ck_assert_msg(e2e_now_sec() < t_samples + SAMPLES_WAIT_SEC, "only %d of %d samples in %d s", samples,
                              OBSERVED_SAMPLES, SAMPLES_WAIT_SEC);
                uint64_t actual = qemu_actual();
                ck_assert_msg(actual == GUEST_MEM, "an observed guest's balloon moved to %.0f MiB", mib(actual));
                readings++;
                ck_assert_int_eq(e2e_get_guest(&daemon_fx, GUEST, &v), 0);
                assert_observed(&v);
                samples = guest_history_since(&daemon_fx, GUEST, newest, NULL);
                ck_assert_int_ge(samples, 0);
                usleep(500 * 1000);
        }
        ck_assert_uint_eq(qemu_actual(), GUEST_MEM);
        e2e_print_view("still observed", t0, &v, FLOOR);
        fprintf(stderr, "%d samples in %.1f s: query-balloon at 1024 MiB all %u times\n", samples,
                e2e_now_sec() - t_samples, readings);
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, BALLOON_COMMAND), 0);

        /* 3. The operator names a policy for unmatched guests: resized, from the reload on. */
        write_config("unmatched-policy = " RESIZE_POLICY "\n");
        double t_reload = e2e_now_sec();
        _cleanup_(ctl_run_done) CtlRun reload = ctl_run(&daemon_fx, "reload");
        ck_assert_msg(reload.code == 0, "reload: %d %s", reload.code, reload.err);
        double moved_after = -1, left_after = -1;
        uint64_t lowest = GUEST_MEM;
        for (bool held = false; !held;) {
                ck_assert_msg(e2e_now_sec() < t_reload + BALLOON_WAIT_SEC,
                              "not held below 1 GiB: state %s, policy %s, QEMU's balloon at %.0f MiB", v.state,
                              v.policy, mib(lowest));
                uint64_t actual = qemu_actual();
                ck_assert_msg(actual >= FLOOR, "QEMU's balloon at %.0f MiB, below the floor", mib(actual));
                lowest = MIN(lowest, actual);
                if (moved_after < 0 && actual < GUEST_MEM) {
                        moved_after = e2e_now_sec() - t_reload;
                        fprintf(stderr, "reload to the first balloon move: %.1f s (QEMU's balloon at %.0f MiB)\n",
                                moved_after, mib(actual));
                }
                ck_assert_int_eq(e2e_get_guest(&daemon_fx, GUEST, &v), 0);
                if (left_after < 0 && strcmp(v.policy, RESIZE_POLICY) == 0 && strcmp(v.mode, "rightsize") == 0 &&
                    strcmp(v.state, "observe") != 0) {
                        left_after = e2e_now_sec() - t_reload;
                        fprintf(stderr, "reload to leaving observe: %.1f s (state %s)\n", left_after, v.state);
                }
                held = strcmp(v.state, "hold") == 0 && actual < GUEST_MEM && within(actual, v.target, 0.03);
                usleep(250 * 1000);
        }
        e2e_print_view("held", t0, &v, FLOOR);
        fprintf(stderr, "reload to held: %.1f s; QEMU's balloon went down to %.0f MiB (floor %.0f MiB)\n",
                e2e_now_sec() - t_reload, mib(lowest), mib(FLOOR));
        print_balloon_commands();
        ck_assert_str_eq(v.policy, RESIZE_POLICY);
        ck_assert_str_eq(v.mode, "rightsize");
        ck_assert_uint_eq(v.floor, FLOOR);
        ck_assert_int_eq(guests_assert_floors_kept(&daemon_fx, FLOOR), 1);
        ck_assert_uint_ge(e2e_min_actual_seen(), FLOOR);
        ck_assert_uint_gt(daemon_fixture_log_count(&daemon_fx, BALLOON_COMMAND), 0);

        /* 4. A clean exit (under ASan: no leak). */
        int status = daemon_fixture_stop(&daemon_fx, SIGTERM);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        fprintf(stderr, "total %.1f s\n", e2e_now_sec() - t0);
}
END_TEST

int main(void) {
        return e2e_run_suite(suite_create("daemon-unmatched-real-guest"), "unmatched-real-guest",
                             test_unmatched_real_guest_observed_then_resized, setup_all, teardown_all, 720);
}
