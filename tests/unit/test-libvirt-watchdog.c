/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt stall watchdog (daemon/libvirt/libvirt-watchdog.h): it shuts a watched socket down when
 * the loop stops beating, leaves it alone while the loop runs, and finds a connection's
 * socket among the process's fds by its peer's name. Real sockets, a real sd-event loop. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-watchdog.h"
#include "tests/lib/check-run.h"

/* A listening unix socket at DIR/name and a client connected to it; returns the client fd. */
static int connect_to(const char *dir, const char *name, int *ret_listener) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        ck_assert_int_ge(l, 0);
        ck_assert_int_ge(c, 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name);
        ck_assert_int_eq(bind(l, (struct sockaddr *) &sa, sizeof(sa)), 0);
        ck_assert_int_eq(listen(l, 4), 0);
        ck_assert_int_eq(connect(c, (struct sockaddr *) &sa, sizeof(sa)), 0);
        *ret_listener = l;
        return c;
}

START_TEST(test_connection_socket) {
        char dir[] = "/tmp/rs-watchdog-XXXXXX";
        _cleanup_free_ int *before = NULL, *after = NULL, *after2 = NULL;
        size_t n_before, n_after, n_after2;
        int l1, l2, l3, fd = -1;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(libvirt_socket_fds(&before, &n_before), 0);
        int other = connect_to(dir, "guest.qmp", &l1);
        int mine = connect_to(dir, "libvirt-sock", &l2);
        ck_assert_int_eq(libvirt_socket_fds(&after, &n_after), 0);
        ck_assert_uint_eq(n_after, n_before + 4);
        /* The one new socket whose peer is a libvirt daemon socket. */
        ck_assert_int_eq(libvirt_connection_socket(before, n_before, after, n_after, &fd), 0);
        ck_assert_int_eq(fd, mine);
        /* Known before: not the connection's. */
        ck_assert_int_eq(libvirt_connection_socket(after, n_after, after, n_after, &fd), -ENOENT);
        /* Two candidates: which one is ours is not known. */
        int second = connect_to(dir, "virtqemud-sock", &l3);
        ck_assert_int_eq(libvirt_socket_fds(&after2, &n_after2), 0);
        ck_assert_int_eq(libvirt_connection_socket(before, n_before, after2, n_after2, &fd), -ENOENT);

        close(other);
        close(mine);
        close(second);
        close(l1);
        close(l2);
        close(l3);
        char cmd[64];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static bool peer_closed(int fd) {
        char c;
        return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

static uint64_t monotonic_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

/* The stall limit. The loop beats every second (up to 250 ms late, sd-event's default accuracy),
 * so a running loop is silent for at most 1.25 s plus however long the machine keeps this
 * process from running: 3 s leaves a loaded machine 1.75 s of that, where 1.5 s left 0.25 s. */
#define STALL_USEC (3 * USEC_PER_SEC)
/* Giving up on a cut that should come (the watchdog checks once a second): a hang, not a bound. */
#define CUT_DEADLINE_USEC (10 * STALL_USEC)

/* A process kept off the CPU this long may rightly be cut: its loop was silent for that, plus
 * up to the 1.25 s between two beats. */
#define STARVED_USEC (STALL_USEC - 1250 * USEC_PER_MSEC)

/* Runs the loop for twice the stall limit of wall time (so that a watchdog that cut a running
 * loop would have), each iteration inside a short worker call when `in_calls`. Returns the
 * longest this thread went between two iterations. */
static uint64_t run_loop(sd_event *e, LibvirtWatchdog *w, bool in_calls) {
        uint64_t longest = 0, last = monotonic_usec();
        for (uint64_t end = last + 2 * STALL_USEC + USEC_PER_SEC; monotonic_usec() < end;) {
                int slot = in_calls ? libvirt_watchdog_call_begin(w) : -1;
                if (in_calls)
                        ck_assert_int_ge(slot, 0);
                ck_assert_int_ge(sd_event_run(e, 100 * USEC_PER_MSEC), 0);
                if (in_calls)
                        libvirt_watchdog_call_end(w, slot);
                uint64_t now = monotonic_usec();
                longest = MAX(longest, now - last);
                last = now;
        }
        return longest;
}

/* A running loop (and short calls, with `in_calls`) is never cut: run on a fresh connection,
 * no cut. A cut while the machine kept this process off the CPU for most of the limit is the
 * watchdog doing its job (the loop did stall), not a failure: that run is repeated, up to five
 * times, so that a busy machine cannot fail the test and a watchdog that cuts running loops
 * still does. The connection left watched is returned in pair. */
static void assert_running_loop_not_cut(sd_event *e, LibvirtWatchdog *w, bool in_calls, int pair[2]) {
        for (int attempt = 1;; attempt++) {
                ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
                libvirt_watchdog_watch(w, pair[0]);
                uint64_t longest = run_loop(e, w, in_calls);
                bool cut = libvirt_watchdog_take_cut(w, NULL, NULL);
                if (!cut) {
                        ck_assert(!peer_closed(pair[1]));
                        return;
                }
                ck_assert_msg(longest >= STARVED_USEC && attempt < 5,
                              "a running loop was cut (the longest gap between its iterations: %" PRIu64 " ms; attempt %d)",
                              longest / USEC_PER_MSEC, attempt);
                fprintf(stderr, "cut while this process was kept off the CPU for %" PRIu64 " ms: again\n",
                        longest / USEC_PER_MSEC);
                libvirt_watchdog_watch(w, -1);
                close(pair[0]);
                close(pair[1]);
        }
}

START_TEST(test_cuts_when_the_loop_stalls) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtWatchdog *w = NULL;
        int pair[2];
        uint64_t stalled = 0, start, took;
        bool by_call = true, cut = false;

        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_watchdog_new(e, STALL_USEC, &w), 0);

        /* The loop runs for twice the limit: no cut. */
        assert_running_loop_not_cut(e, w, false, pair);

        /* The loop stalls (as in a libvirt call to a hung libvirtd): the cut comes, the loop never
         * running meanwhile; waited for, not timed. */
        start = monotonic_usec();
        while (!(cut = libvirt_watchdog_take_cut(w, &stalled, &by_call)) &&
               monotonic_usec() < start + CUT_DEADLINE_USEC)
                usleep(50 * 1000);
        took = monotonic_usec() - start;
        ck_assert_msg(cut, "no cut after %" PRIu64 " ms of a stalled loop", took / USEC_PER_MSEC);
        ck_assert_uint_gt(stalled, STALL_USEC);
        ck_assert(!by_call);
        ck_assert(peer_closed(pair[1]));
        ck_assert(!libvirt_watchdog_take_cut(w, NULL, NULL)); /* reported once */

        /* Nothing watched: a stall touches nothing, for as long as the cut above took and one
         * more check. */
        int pair2[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair2), 0);
        libvirt_watchdog_watch(w, pair2[0]);
        libvirt_watchdog_watch(w, -1);
        usleep((useconds_t) (took + USEC_PER_SEC));
        ck_assert(!libvirt_watchdog_take_cut(w, NULL, NULL));
        ck_assert(!peer_closed(pair2[1]));

        w = libvirt_watchdog_free(w);
        close(pair[0]);
        close(pair[1]);
        close(pair2[0]);
        close(pair2[1]);
}
END_TEST

/* A call on a worker thread that does not return while the loop keeps beating: cut all the same;
 * calls that end in time are not. */
START_TEST(test_cuts_a_worker_call) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtWatchdog *w = NULL;
        int pair[2], slot;
        uint64_t stalled = 0, start;
        bool by_call = false;

        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_watchdog_new(e, STALL_USEC, &w), 0);

        /* Short calls (one loop iteration each) for twice the limit, the loop running: no cut. */
        assert_running_loop_not_cut(e, w, true, pair);

        /* One call stays: the loop beats on, the call gets the connection cut. */
        slot = libvirt_watchdog_call_begin(w);
        ck_assert_int_ge(slot, 0);
        start = monotonic_usec();
        while (!peer_closed(pair[1]) && monotonic_usec() < start + CUT_DEADLINE_USEC)
                ck_assert_int_ge(sd_event_run(e, 100 * USEC_PER_MSEC), 0);
        libvirt_watchdog_call_end(w, slot);
        ck_assert_msg(peer_closed(pair[1]), "no cut after %" PRIu64 " ms of a stuck call",
                      (monotonic_usec() - start) / USEC_PER_MSEC);
        ck_assert(libvirt_watchdog_take_cut(w, &stalled, &by_call));
        ck_assert(by_call);
        ck_assert_uint_gt(stalled, STALL_USEC);

        w = libvirt_watchdog_free(w);
        close(pair[0]);
        close(pair[1]);
}
END_TEST

int main(void) {
        return check_run_case("libvirt-watchdog", "core", NULL, NULL, 120,
                              CHECK_TESTS(test_connection_socket, test_cuts_when_the_loop_stalls,
                                          test_cuts_a_worker_call));
}
