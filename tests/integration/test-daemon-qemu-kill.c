/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A real QEMU killed with -9 under rightsized, then started again on the same socket path
 * (issue 8; test-daemon-faults.c does the same with simulated guests). One real 1 GiB test guest
 * (idle, no agent) and one simulated guest (tests/sim/fake-qemu) share the daemon's discovery
 * directory, under a 1 s policy whose 768 MiB floor the real guest gets squeezed towards.
 *   - Once the daemon manages the real guest and has moved its balloon, QEMU gets SIGKILL. The
 *     daemon keeps running (same pid) and answering D-Bus promptly; the dead guest is listed as
 *     faulty with a fault that says the QMP connection went (the socket file stays, so the guest
 *     stays listed and the daemon keeps trying to reconnect); the simulated guest keeps being
 *     sampled and decided on; no size is below its floor; the daemon's RSS stays bounded.
 *   - A new QEMU on the same socket path (boot-guest removes the stale socket first): the daemon
 *     takes it as a new guest, reads its size afresh (full size: a new QEMU has no balloon) rather
 *     than keeping the dead one's, and drives its balloon again.
 * The daemon's log must hold no sanitizer report, and the daemon must exit cleanly on SIGTERM.
 * Printed: kill -9 to faulty, and restart to managed again. Missing QEMU or image is a failure,
 * never a skip, as in the other real-guest tests. */
#include <check.h>
#include <errno.h>
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
#include "tests/lib/e2e-common.h"
#include "tests/lib/guest-fixture.h"

#define REAL "vm-real"
#define SIM "sim-0"
#define GUEST_MEM (1024 * MIB)
#define FLOOR DAEMON_FIXTURE_FLOOR
#define WAIT_SEC 30
/* The smallest guest with a balloon and stats: no virtio-mem device, no agent, no workload. */
#define BOOT_OPTIONS "--mem 1G --vmem-size 0 --no-agent"
/* What the daemon logs when it reads a QEMU that nobody resized: a new one. */
#define MANAGING_WHOLE REAL " [connecting]: Managing: 1 GiB (balloon at 1 GiB)"
/* A GetGuest that takes longer than this means the loop is blocked on something. */
#define BUS_CALL_BOUND_SEC 2.0
/* Waiting for the balloon to be driven: the guest's kernel must have booted to its balloon driver
 * under TCG, on a machine that may be busy (a deadline, not a bound). */
#define BALLOON_WAIT_SEC 180

static GuestFixture guest;
static BusFixture bus;
static DaemonFixture daemon_fx;

static void teardown_all(void) {
        /* The guest runs in the daemon's directory: stop it before that goes. */
        guest_fixture_stop(&guest);
        e2e_daemon_teardown(&daemon_fx);
        bus_fixture_stop(&bus);
}

static void setup_all(void) {
        static const char *const steady[] = { "--scenario", "steady", "--time-scale", "20", NULL };

        e2e_setup(&daemon_fx, &bus, teardown_all);
        daemon_fixture_write_config(&daemon_fx, "", NULL);
        daemon_fixture_write_policy(&daemon_fx, "fast", daemon_fixture_fast_policy);
        daemon_fixture_start_sim(&daemon_fx, 0, 0, 1, steady);
        guest_fixture_boot_in(&guest, daemon_fx.qmp_dir, REAL, BOOT_OPTIONS, NULL);
        guest_fixture_boot_wait(&guest);
        daemon_fixture_start(&daemon_fx);
}

/* What a crash, an assertion or a sanitizer leaves in the daemon's stderr. */
static void assert_log_clean(void) {
        static const char *const signs[] = { "AddressSanitizer", "LeakSanitizer", "runtime error:", "Assertion",
                                             "assertion", "Aborted", "Segmentation fault" };
        _cleanup_free_ char *log = daemon_fixture_log(&daemon_fx);

        ck_assert_ptr_nonnull(log);
        for (size_t i = 0; i < ARRAY_SIZE(signs); i++)
                ck_assert_msg(!strstr(log, signs[i]), "rightsized's log has \"%s\":\n%s", signs[i], log);
}

/* GetGuest, failing the test when the daemon takes longer than the bound to answer beyond the
 * bus's own round trip, measured just before (a machine slow for everyone is not the daemon
 * waiting on a dead QEMU). */
static int get_guest_promptly(const char *name, GuestView *v) {
        double ref = bus_fixture_reference_call_sec(&bus);
        double start = e2e_now_sec();
        int r = e2e_get_guest(&daemon_fx, name, v);
        double took = e2e_now_sec() - start;

        ck_assert_msg(took - ref < BUS_CALL_BOUND_SEC, "GetGuest %s took %.2f s (the bus's own round trip %.2f s)",
                      name, took, ref);
        return r;
}

/* Waits until the daemon manages the real guest and has pulled its balloon below the boot size
 * by at least `below` (a new QEMU shrinks for no one else), and the balloon got where it was
 * asked to; v holds the last view. */
static bool wait_balloon_driven(double t0, const char *what, uint64_t below, GuestView *v) {
        for (double start = e2e_now_sec(); e2e_now_sec() < start + BALLOON_WAIT_SEC; usleep(250 * 1000))
                if (get_guest_promptly(REAL, v) == 0 && guest_view_is_managed(v) && v->target < GUEST_MEM &&
                    v->actual + below <= GUEST_MEM && within(v->actual, v->target, 0.03)) {
                        e2e_print_view(what, t0, v, FLOOR);
                        return true;
                }
        e2e_print_view(what, t0, v, FLOOR);
        return false;
}

static void assert_sizes_sane(void) {
        ck_assert_int_eq(guests_assert_floors_kept(&daemon_fx, FLOOR), 2);
}

START_TEST(test_qemu_kill_and_restart) {
        double t0 = e2e_now_sec();
        pid_t daemon_pid = daemon_fx.pid;
        GuestView v, sim_before, first;
        _cleanup_free_ char *row = NULL;

        /* 1. Managed, and acted on: the balloon was moved from 1 GiB towards the floor. */
        ck_assert_msg(guest_view_wait_running(&daemon_fx, SIM, WAIT_SEC), SIM " never became managed");
        ck_assert_msg(wait_balloon_driven(t0, "before kill", 64 * MIB, &v), REAL " was never squeezed");
        /* ...and holding at its estimate (the floor: the guest is idle), which the state file keeps. */
        for (double start = e2e_now_sec(); e2e_now_sec() < start + 60 && !(strcmp(v.state, "hold") == 0 && v.has_estimate);
             usleep(250 * 1000))
                ck_assert_int_eq(get_guest_promptly(REAL, &v), 0);
        e2e_print_view("held", t0, &v, FLOOR);
        ck_assert_msg(strcmp(v.state, "hold") == 0 && v.has_estimate, REAL " never held at an estimate");
        ck_assert_uint_eq(v.max, GUEST_MEM);
        ck_assert_uint_eq(v.floor, FLOOR);
        ck_assert_str_eq(v.source, "qemu");
        uint64_t actual_before_kill = v.actual, estimate_before_kill = v.estimate;
        uint64_t rss_before_kill = daemon_fixture_rss_kib(&daemon_fx);
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, MANAGING_WHOLE), 1);
        row = ctl_list_row(&daemon_fx, REAL);
        ck_assert_msg(row, REAL " missing from rightsizectl list");
        fprintf(stderr, "list: %s\n", row);
        ck_assert_msg(!strstr(row, "fault:"), "a fault before the kill: %s", row);
        free(TAKE_PTR(row));
        assert_sizes_sane();

        /* 2. kill -9: marked faulty at once; everything else goes on. */
        ck_assert_int_eq(get_guest_promptly(SIM, &sim_before), 0);
        uint64_t sim_newest = 0;
        ck_assert_int_gt(guest_history_since(&daemon_fx, SIM, 0, &sim_newest), 0);
        pid_t qemu = guest_fixture_qemu_pid(&guest);
        ck_assert_int_gt(qemu, 0);
        double t_kill = e2e_now_sec();
        ck_assert_int_eq(guest_fixture_kill(&guest, SIGKILL), 0);
        fprintf(stderr, "[%5.1fs] QEMU %d killed with SIGKILL\n", t_kill - t0, (int) qemu);
        ck_assert_int_eq(access(guest.qmp_path, F_OK), 0); /* a dead QEMU leaves its socket behind */

        bool marked = false;
        while (!marked && e2e_now_sec() < t_kill + WAIT_SEC) {
                ck_assert_int_eq(get_guest_promptly(REAL, &v), 0);
                marked = strcmp(v.state, "faulty") == 0 &&
                         (strstr(v.fault, "QMP connection lost") || strstr(v.fault, "cannot connect to"));
                if (!marked)
                        usleep(20 * 1000);
        }
        double marked_after = e2e_now_sec() - t_kill;
        e2e_print_view("killed", t0, &v, FLOOR);
        ck_assert_msg(marked, REAL " not marked after kill -9: state %s, fault '%s'", v.state, v.fault);
        fprintf(stderr, "kill -9 to faulty: %.3f s (fault: %s)\n", marked_after, v.fault);

        /* Still faulty, with a reason, past the first reconnect attempts (1 s, then 2 s) against
         * the stale socket; the simulated guest meanwhile keeps its samples and decisions. */
        guest_assert_managed(&daemon_fx, SIM, WAIT_SEC);
        sleep(3);
        ck_assert_int_eq(get_guest_promptly(REAL, &v), 0);
        e2e_print_view("dead", t0, &v, FLOOR);
        ck_assert_str_eq(v.state, "faulty");
        ck_assert_msg(strstr(v.fault, "QMP connection lost") || strstr(v.fault, "cannot connect to"), "fault: %s",
                      v.fault);
        /* Nothing moved on a guest it cannot talk to. */
        ck_assert_uint_eq(v.actual, actual_before_kill);
        row = ctl_list_row(&daemon_fx, REAL);
        ck_assert_msg(row, REAL " dropped from rightsizectl list while its socket is there");
        fprintf(stderr, "list: %s\n", row);
        ck_assert_msg(strstr(row, " faulty ") && strstr(row, "fault: ") &&
                              (strstr(row, "QMP connection lost") || strstr(row, "cannot connect to")),
                      "row: %s", row);
        free(TAKE_PTR(row));

        GuestView sim_after;
        ck_assert_int_eq(get_guest_promptly(SIM, &sim_after), 0);
        ck_assert_uint_gt(sim_after.updated, sim_before.updated);
        ck_assert_int_gt(guest_history_since(&daemon_fx, SIM, sim_newest, NULL), 0);
        ck_assert_str_eq(sim_after.fault, "");
        ck_assert_msg(daemon_fixture_alive(&daemon_fx) && daemon_fx.pid == daemon_pid, "rightsized died");
        assert_sizes_sane();
        assert_log_clean();
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, "Managing: "), 2);

        /* 3. A new QEMU on the same socket path. */
        double t_restart = e2e_now_sec();
        guest_fixture_boot_in(&guest, daemon_fx.qmp_dir, REAL, BOOT_OPTIONS, NULL);
        bool managed = false;
        while (!managed && e2e_now_sec() < t_restart + 60) {
                int r = get_guest_promptly(REAL, &first);
                ck_assert(r == 0 || r == -ENOENT);
                managed = r == 0 && guest_view_is_managed(&first);
                if (!managed)
                        usleep(20 * 1000);
        }
        double managed_after = e2e_now_sec() - t_restart;
        e2e_print_view("restarted", t0, &first, FLOOR);
        ck_assert_msg(managed, REAL " not managed again after the restart: state %s, fault '%s'", first.state,
                      first.fault);
        guest_fixture_boot_wait(&guest);
        double booted_after = e2e_now_sec() - t_restart;
        fprintf(stderr, "restart to managed: %.3f s (guest booted after %.1f s)\n", managed_after, booted_after);

        /* A new guest to the daemon: the old one was dropped with its socket, this one discovered. */
        char gone[PATH_MAX + 64];
        snprintf(gone, sizeof(gone), "QMP socket %s is gone", guest.qmp_path);
        ck_assert_msg(daemon_fixture_wait_log(&daemon_fx, gone, WAIT_SEC), "no log line '%s'", gone);
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, "Discovered "), 3);
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, "Managing: "), 3);
        /* Its size read from the new QEMU, which starts whole: not the dead one's balloon. The
         * log has the daemon's own reading; over D-Bus, the guest's kernel has not loaded its
         * balloon driver yet this early, so nothing can have shrunk it back to the old size. */
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, MANAGING_WHOLE), 2);
        ck_assert_msg(first.actual > actual_before_kill,
                      "the new QEMU shows actual %.0f MiB, the dead one's balloon was at %.0f MiB", mib(first.actual),
                      mib(actual_before_kill));
        ck_assert_uint_eq(first.max, GUEST_MEM);
        ck_assert_str_eq(first.fault, "");

        /* Stats flow and the balloon is driven again, from the new QEMU's full size, back to
         * what the state file saved. The resumed target reaches the balloon while the guest
         * still boots without its balloon driver: that standstill is neither pushback nor a
         * stall (it used to read as the working set growing to max, the estimate went to
         * 922-1024 MiB and the guest was probed down again from there). */
        guest_assert_managed(&daemon_fx, REAL, WAIT_SEC);
        ck_assert_msg(wait_balloon_driven(t0, "after restart", 8 * MIB, &v), REAL " was not squeezed again");
        fprintf(stderr, "restart to balloon driven again: %.1f s\n", e2e_now_sec() - t_restart);
        bool resumed = file_contains(daemon_fx.log_path, "]: Resumed from the state file");
        fprintf(stderr, "estimate before the kill %.0f MiB, after the restart %.0f MiB; resumed from the state file: %s\n",
                mib(estimate_before_kill), v.has_estimate ? mib(v.estimate) : -1.0, resumed ? "yes" : "no");
        ck_assert_msg(resumed, "the new QEMU did not resume from the state file");
        ck_assert_msg(v.has_estimate && within(v.estimate, estimate_before_kill, 0.05),
                      "estimate %.0f MiB after the restart, %.0f MiB before the kill", mib(v.estimate),
                      mib(estimate_before_kill));
        ck_assert_msg(within(v.target, actual_before_kill, 0.05), "target %.0f MiB after the restart, actual %.0f before",
                      mib(v.target), mib(actual_before_kill));
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, "working set grew"), 0);
        ck_assert_int_eq(daemon_fixture_log_count(&daemon_fx, "balloon stopped"), 0);
        guest_assert_managed(&daemon_fx, SIM, WAIT_SEC);
        assert_sizes_sane();
        ck_assert_uint_ge(e2e_min_actual_seen(), FLOOR);
        /* Memory stays bounded across the loss and the new guest. */
        daemon_fixture_assert_rss_bounded(&daemon_fx, rss_before_kill);
        ck_assert_msg(daemon_fixture_alive(&daemon_fx) && daemon_fx.pid == daemon_pid, "rightsized died");
        assert_log_clean();

        /* 4. A clean exit (under ASan: no leak). */
        int status = daemon_fixture_stop(&daemon_fx, SIGTERM);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_log_clean();
        fprintf(stderr, "total %.1f s\n", e2e_now_sec() - t0);
}
END_TEST

int main(void) {
        return e2e_run_suite(suite_create("daemon-qemu-kill"), "qemu-kill", test_qemu_kill_and_restart, setup_all,
                             teardown_all, 240);
}
