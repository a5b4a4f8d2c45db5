/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fake-qemu through the real qmp/ client: a healthy simulated guest's stats evolve and its
 * balloon follows the model (with pushback), and each injected fault shows the way the
 * daemon will meet it, while the healthy guests carry on. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "qmp/qmp-sync.h"
#include "tests/lib/check-run.h"

#define SEC USEC_PER_SEC
enum { G_HEALTHY, G_GARBAGE, G_HUGE, G_HANG, G_CLOSE, G_LYING, G_STUCK, G_HEALTHY2, N_GUESTS };

static char dir[] = "/tmp/fake-qemu-test.XXXXXX";
static pid_t sim_pid = -1;
static sd_event *event;

static void start_sim(void) {
        const char *builddir = getenv("top_builddir") ?: ".";
        char binary[512], guests[16];
        int out[2];
        char buf[16];

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(binary, sizeof(binary), "%s/tests/sim/fake-qemu", builddir);
        snprintf(guests, sizeof(guests), "%d", N_GUESTS);
        ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
        sim_pid = fork();
        ck_assert_int_ge(sim_pid, 0);
        if (sim_pid == 0) {
                (void) signal(SIGTERM, SIG_DFL);
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (dup2(out[1], STDOUT_FILENO) < 0)
                        _exit(127);
                /* 10 s model intervals every 50 ms */
                execl(binary, "fake-qemu", "--dir", dir, "--guests", guests, "--seed", "7", "--scenario", "steady",
                      "--time-scale", "200", "--fault", "1:garbage", "--fault", "2:huge-reply", "--fault", "3:hang",
                      "--fault", "4:close-mid-reply", "--fault", "5:lying-stats", "--fault", "6:stuck-balloon",
                      (char *) NULL);
                _exit(127);
        }
        close(out[1]);
        ssize_t n = read(out[0], buf, sizeof(buf) - 1);
        close(out[0]);
        ck_assert_msg(n >= 5 && strncmp(buf, "READY", 5) == 0, "fake-qemu did not start");
        ck_assert_int_ge(sd_event_new(&event), 0);
}

static void stop_sim(void) {
        char path[300];
        int status;

        if (sim_pid > 0) {
                ck_assert_int_eq(kill(sim_pid, SIGTERM), 0);
                ck_assert_int_eq(waitpid(sim_pid, &status, 0), sim_pid);
                ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* no crash, clean exit */
                sim_pid = -1;
                /* it removed its sockets */
                snprintf(path, sizeof(path), "%s/sim-0.qmp", dir);
                ck_assert_int_ne(access(path, F_OK), 0);
        }
        (void) rmdir(dir);
        event = sd_event_unref(event);
}

static QmpClient *connect_guest(unsigned i) {
        char path[300];
        QmpClient *c;

        snprintf(path, sizeof(path), "%s/sim-%u.qmp", dir, i);
        ck_assert_int_eq(qmp_client_new(&c, event), 0);
        ck_assert_int_eq(qmp_client_connect_path(c, path), 0);
        ck_assert_int_eq(qmp_sync_wait_ready(c, 5 * SEC), 0);
        return c;
}

/* The healthy guests still answer. */
static void assert_healthy_guest_answers(void) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_HEALTHY2);
        QmpBalloonInfo info;
        ck_assert_int_eq(qmp_sync_query_balloon(c, 5 * SEC, &info, NULL), 0);
        ck_assert_uint_gt(info.actual, 0);
}

START_TEST(test_stats_evolve) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_HEALTHY);
        QmpGuestStats first, s;
        uint64_t interval = 0;
        bool changed = false;

        /* Before polling is on, nothing is reported. */
        ck_assert_int_eq(qmp_sync_get_guest_stats(c, NULL, 5 * SEC, &first, NULL), 0);
        ck_assert_uint_eq(first.last_update, 0);
        ck_assert(!qmp_value_is_known(first.value[QMP_STAT_TOTAL_MEMORY]));

        ck_assert_int_eq(qmp_sync_set_stats_polling_interval(c, NULL, 10, 5 * SEC, NULL), 0);
        ck_assert_int_eq(qmp_sync_qom_get_u64(c, NULL, QMP_BALLOON_STATS_POLLING_INTERVAL, 5 * SEC, &interval, NULL), 0);
        ck_assert_uint_eq(interval, 10);

        ck_assert_int_eq(qmp_sync_wait_guest_stats_update(c, NULL, 0, 20 * 1000, 30 * SEC, &first), 0);
        ck_assert(qmp_value_is_known(first.value[QMP_STAT_TOTAL_MEMORY]));
        ck_assert(qmp_value_is_known(first.value[QMP_STAT_FREE_MEMORY]));
        ck_assert_uint_le(first.value[QMP_STAT_FREE_MEMORY], first.value[QMP_STAT_TOTAL_MEMORY]);
        ck_assert_uint_le(first.value[QMP_STAT_AVAILABLE_MEMORY], first.value[QMP_STAT_TOTAL_MEMORY]);

        uint64_t last = first.last_update;
        for (int i = 0; i < 5; i++) {
                ck_assert_int_eq(qmp_sync_wait_guest_stats_update(c, NULL, last, 20 * 1000, 30 * SEC, &s), 0);
                ck_assert_uint_gt(s.last_update, last);
                ck_assert_uint_ge(s.value[QMP_STAT_MINOR_FAULTS], first.value[QMP_STAT_MINOR_FAULTS]);
                last = s.last_update;
                for (QmpStat k = 0; k < _QMP_STAT_MAX; k++)
                        changed |= s.value[k] != first.value[k];
        }
        ck_assert_msg(changed, "the stats never changed");

        bool fpr0 = false;
        ck_assert_int_eq(qmp_sync_qom_get_bool(c, NULL, QMP_BALLOON_FREE_PAGE_REPORTING, 5 * SEC, &fpr0, NULL), 0);
        ck_assert(fpr0); /* even guests report free pages */
        QmpMemoryDeviceList list = {};
        ck_assert_int_eq(qmp_sync_query_memory_devices(c, 5 * SEC, &list, NULL), 0);
        ck_assert_uint_eq(list.n_devices, 0);
        qmp_memory_device_list_clear(&list);
}
END_TEST

START_TEST(test_balloon_follows_model) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_HEALTHY);
        QmpEventWatch *w = NULL;
        QmpBalloonInfo info;
        json_object *ev = NULL, *data, *v;
        uint64_t boot, actual = 0;

        ck_assert_int_eq(qmp_sync_query_balloon(c, 5 * SEC, &info, NULL), 0);
        boot = info.actual;
        ck_assert_uint_ge(boot, GIB);

        ck_assert_int_eq(qmp_event_watch_new(c, "BALLOON_CHANGE", &w), 0);
        /* A modest target: the guest gets there. */
        uint64_t target = boot - boot / 8;
        ck_assert_int_eq(qmp_sync_balloon_set_target(c, target, 5 * SEC, NULL), 0);
        ck_assert_int_eq(qmp_event_watch_next(w, 5 * SEC, &ev), 0);
        ck_assert(json_object_object_get_ex(ev, "data", &data));
        ck_assert(json_object_object_get_ex(data, "actual", &v));
        ck_assert_uint_lt(json_object_get_uint64(v), boot);
        json_object_put(ev);
        ck_assert_int_eq(qmp_sync_wait_balloon(c, target, 4 * MIB, 20 * 1000, 10 * SEC, &actual), 0);

        /* An impossible one: the guest pushes back above it (its kernel alone is ~100 MiB). */
        ck_assert_int_eq(qmp_sync_balloon_set_target(c, 32 * MIB, 5 * SEC, NULL), 0);
        ck_assert_int_eq(qmp_sync_wait_balloon(c, 32 * MIB, MIB, 20 * 1000, 8 * SEC, &actual), -ETIMEDOUT);
        ck_assert_uint_lt(actual, target);
        ck_assert_uint_gt(actual, 100 * MIB);
        /* and it settles: the last events report what query-balloon says */
        ck_assert_int_eq(qmp_sync_sleep(event, SEC / 2), 0);
        ck_assert_int_eq(qmp_sync_query_balloon(c, 5 * SEC, &info, NULL), 0);
        uint64_t settled = info.actual;
        ck_assert_int_eq(qmp_sync_sleep(event, SEC / 2), 0);
        ck_assert_int_eq(qmp_sync_query_balloon(c, 5 * SEC, &info, NULL), 0);
        ck_assert_uint_le(settled > info.actual ? settled - info.actual : info.actual - settled, 16 * MIB);
        ck_assert_uint_gt(qmp_event_watch_count(w), 0);
        w = qmp_event_watch_free(w);

        /* A target beyond the guest's memory is refused, as QEMU does. */
        ck_assert_int_lt(qmp_sync_balloon_set_target(c, boot * 4, 5 * SEC, NULL), 0);
        _cleanup_free_ char *err = NULL;
        json_object *result = NULL;
        ck_assert_int_lt(qmp_sync_execute(c, "no-such-command", NULL, 5 * SEC, &result, &err), 0);
        ck_assert_ptr_nonnull(err);
}
END_TEST

START_TEST(test_fault_garbage) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_GARBAGE);
        QmpBalloonInfo info;
        ck_assert_int_lt(qmp_sync_query_balloon(c, 5 * SEC, &info, NULL), 0);
        ck_assert(qmp_client_is_closed(c));
        ck_assert_int_eq(qmp_client_get_last_errno(c), -EBADMSG);
        assert_healthy_guest_answers();
}
END_TEST

START_TEST(test_fault_huge_reply) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_HUGE);
        QmpBalloonInfo info;
        ck_assert_int_lt(qmp_sync_query_balloon(c, 5 * SEC, &info, NULL), 0);
        ck_assert(qmp_client_is_closed(c));
        ck_assert_int_eq(qmp_client_get_last_errno(c), -EMSGSIZE);
        assert_healthy_guest_answers();
}
END_TEST

START_TEST(test_fault_hang) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_HANG);
        QmpBalloonInfo info;
        ck_assert_int_eq(qmp_sync_query_balloon(c, SEC / 4, &info, NULL), -ETIMEDOUT);
        ck_assert(!qmp_client_is_closed(c)); /* it never closes either */
        assert_healthy_guest_answers();
}
END_TEST

START_TEST(test_fault_close_mid_reply) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_CLOSE);
        QmpBalloonInfo info;
        ck_assert_int_eq(qmp_sync_query_balloon(c, 5 * SEC, &info, NULL), -ECONNRESET);
        ck_assert(qmp_client_is_closed(c));
        ck_assert_int_ne(qmp_client_get_last_errno(c), 0);
        /* Again on a new connection: the fault is the guest's, not the connection's. */
        _cleanup_(qmp_client_freep) QmpClient *d = connect_guest(G_CLOSE);
        ck_assert_int_eq(qmp_sync_query_balloon(d, 5 * SEC, &info, NULL), -ECONNRESET);
        assert_healthy_guest_answers();
}
END_TEST

START_TEST(test_fault_lying_stats) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_LYING);
        QmpGuestStats s, prev = {};
        unsigned lies = 0;

        ck_assert_int_eq(qmp_sync_set_stats_polling_interval(c, NULL, 10, 5 * SEC, NULL), 0);
        uint64_t last = 0;
        for (int i = 0; i < 8; i++) {
                ck_assert_int_eq(qmp_sync_wait_guest_stats_update(c, NULL, last, 20 * 1000, 30 * SEC, &s), 0);
                last = s.last_update;
                uint64_t total = s.value[QMP_STAT_TOTAL_MEMORY];
                bool lie = total == 0 || s.value[QMP_STAT_FREE_MEMORY] > total ||
                           s.value[QMP_STAT_AVAILABLE_MEMORY] > total ||
                           (qmp_value_is_known(s.value[QMP_STAT_DISK_CACHES]) && s.value[QMP_STAT_DISK_CACHES] > total) ||
                           (i > 0 && (s.value[QMP_STAT_MAJOR_FAULTS] < prev.value[QMP_STAT_MAJOR_FAULTS] ||
                                      s.value[QMP_STAT_SWAP_IN] < prev.value[QMP_STAT_SWAP_IN] ||
                                      s.value[QMP_STAT_MAJOR_FAULTS] > prev.value[QMP_STAT_MAJOR_FAULTS] + (UINT64_C(1) << 40)));
                lies += lie;
                prev = s;
        }
        /* Every sample is corrupted; a backwards counter may hide behind an unknown or zero one. */
        ck_assert_uint_ge(lies, 4);
        assert_healthy_guest_answers();
}
END_TEST

START_TEST(test_fault_stuck_balloon) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_STUCK);
        QmpBalloonInfo info;
        uint64_t actual = 0;

        ck_assert_int_eq(qmp_sync_query_balloon(c, 5 * SEC, &info, NULL), 0);
        ck_assert_int_eq(qmp_sync_balloon_set_target(c, info.actual / 2, 5 * SEC, NULL), 0); /* accepted */
        ck_assert_int_eq(qmp_sync_wait_balloon(c, info.actual / 2, MIB, 20 * 1000, SEC, &actual), -ETIMEDOUT);
        ck_assert_uint_eq(actual, info.actual); /* never moved */
        assert_healthy_guest_answers();
}
END_TEST

/* QEMU's last-update is when the guest last answered the stats timer, every polling interval
 * whatever the values: a guest polled every second reports between the model's 10 s steps too
 * (a daemon polling faster than the model stepped saw every guest "stale" before). The model
 * steps at multiples of 10 s of guest time; reads over a second of wall time (200 s of guest
 * time here) land between steps. */
START_TEST(test_stats_report_every_polling_interval) {
        _cleanup_(qmp_client_freep) QmpClient *c = connect_guest(G_HEALTHY2);
        QmpGuestStats s;
        bool between_steps = false;
        uint64_t last = 0;

        ck_assert_int_eq(qmp_sync_set_stats_polling_interval(c, NULL, 1, 5 * SEC, NULL), 0);
        ck_assert_int_eq(qmp_sync_wait_guest_stats_update(c, NULL, 0, 20 * 1000, 30 * SEC, &s), 0);
        for (int i = 0; i < 200 && !between_steps; i++) {
                usleep(7 * 1000);
                ck_assert_int_eq(qmp_sync_get_guest_stats(c, NULL, 5 * SEC, &s, NULL), 0);
                ck_assert_uint_ge(s.last_update, last); /* never back */
                last = s.last_update;
                between_steps = s.last_update % 10 != 0;
        }
        ck_assert_msg(between_steps, "last-update moved only with the model's steps (last %llu)",
                      (unsigned long long) last);
}
END_TEST

int main(void) {
        return check_run_case("fake-qemu", "sim", start_sim, stop_sim, 60,
                              CHECK_TESTS(test_stats_evolve, test_stats_report_every_polling_interval, test_balloon_follows_model, test_fault_garbage,
                                          test_fault_huge_reply, test_fault_hang, test_fault_close_mid_reply,
                                          test_fault_lying_stats, test_fault_stuck_balloon));
}
