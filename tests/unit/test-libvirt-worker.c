/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt job worker (daemon/libvirt/libvirt-worker.h) without libvirt: jobs are plain functions
 * that block on a pipe when told to, so the queue can be filled behind a running job. It runs
 * jobs in order and hands results back on the loop; coalesces queued jobs of one key (the
 * latest data wins, the older is freed and never reported); cancels by job and by key; frees
 * everything on free; with a stall watchdog, a job stuck on a socket gets it shut down and
 * returns; and a pool runs one job of a key at a time, so a key whose job hangs holds one
 * thread while the other keys' jobs run. Real threads, a real sd-event loop. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-watchdog.h"
#include "daemon/libvirt/libvirt-worker.h"
#include "tests/lib/check-run.h"

typedef struct Data {
        int value;
        int block_fd;              /* >= 0: the job waits until this fd is readable (or hung up) */
        int result;
} Data;

static atomic_int runs, frees;
static int done_values[32];
static unsigned n_done;

static void data_run(void *p) {
        Data *d = p;

        atomic_fetch_add(&runs, 1);
        if (d->block_fd >= 0) {
                struct pollfd pfd = { .fd = d->block_fd, .events = POLLIN };
                char c;
                (void) poll(&pfd, 1, -1);
                d->result = (int) recv(d->block_fd, &c, 1, 0); /* 0: the peer (or a shutdown) ended it */
                return;
        }
        d->result = d->value * 10;
}

static void data_done(void *p, void *userdata) {
        Data *d = p;

        ck_assert_ptr_eq(userdata, &n_done);
        ck_assert_uint_lt(n_done, ARRAY_SIZE(done_values));
        done_values[n_done++] = d->block_fd >= 0 ? d->value : d->result;
}

static void data_free(void *p) {
        atomic_fetch_add(&frees, 1);
        free(p);
}

static const LibvirtJobType plain_type = { .name = "plain", .run = data_run, .done = data_done, .free = data_free };
static const LibvirtJobType coalescing_type = {
        .name = "coalescing", .coalesce = true, .run = data_run, .done = data_done, .free = data_free,
};

static Data *data_new(int value, int block_fd) {
        Data *d = calloc(1, sizeof(*d));
        ck_assert_ptr_nonnull(d);
        d->value = value;
        d->block_fd = block_fd;
        return d;
}

static void reset(void) {
        atomic_store(&runs, 0);
        atomic_store(&frees, 0);
        n_done = 0;
        memset(done_values, 0, sizeof(done_values));
}

/* The watchdog's stall limit: a worker's call held this long is cut, and so is a loop silent this
 * long. The loop beats every second (up to 250 ms late), so a running loop is silent for at most
 * 1.25 s plus whatever the machine takes from this process: 3 s leaves a loaded machine 1.75 s
 * before the cut could come from the loop instead of from the call. */
#define STALL_USEC (3 * USEC_PER_SEC)

/* Runs the loop until nothing is pending (the test's timeout ends a hang). */
static void drain(sd_event *e, LibvirtWorker *w) {
        while (libvirt_worker_pending(w) > 0)
                ck_assert_int_ge(sd_event_run(e, 100 * USEC_PER_MSEC), 0);
}

/* Submits a job that blocks until *ret_release is written to, and waits until it runs. */
static void block_worker(sd_event *e, LibvirtWorker *w, int value, int *ret_release) {
        int pair[2];

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, NULL, data_new(value, pair[0]), &n_done, NULL), 0);
        while (!libvirt_worker_busy(w, NULL))
                ck_assert_int_ge(sd_event_run(e, 10 * USEC_PER_MSEC), 0);
        *ret_release = pair[1];
        /* pair[0] is the job's: closed with the test (a few fds). */
}

START_TEST(test_fifo_and_results) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtWorker *w = NULL;

        reset();
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_worker_new(e, NULL, NULL, &w), 0);
        for (int i = 1; i <= 5; i++)
                ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "k", data_new(i, -1), &n_done, NULL), 0);
        drain(e, w);
        ck_assert_uint_eq(n_done, 5);
        for (int i = 0; i < 5; i++)
                ck_assert_int_eq(done_values[i], (i + 1) * 10);
        ck_assert_int_eq(atomic_load(&runs), 5);
        ck_assert_int_eq(atomic_load(&frees), 5);
        ck_assert(!libvirt_worker_busy(w, NULL));
        w = libvirt_worker_free(w);
}
END_TEST

START_TEST(test_coalescing) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtWorker *w = NULL;
        LibvirtJob *first = NULL, *again = NULL;
        int release;

        reset();
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_worker_new(e, NULL, NULL, &w), 0);
        block_worker(e, w, 100, &release);

        /* Behind the running job: three targets for one key, two for another, one of a type
         * that does not coalesce under the same key. */
        ck_assert_int_eq(libvirt_worker_submit(w, &coalescing_type, "dom-a", data_new(1, -1), &n_done, &first), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &coalescing_type, "dom-b", data_new(7, -1), &n_done, NULL), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &coalescing_type, "dom-a", data_new(2, -1), &n_done, &again), 1);
        ck_assert_ptr_eq(again, first);
        ck_assert_int_eq(libvirt_worker_submit(w, &coalescing_type, "dom-a", data_new(3, -1), &n_done, NULL), 1);
        ck_assert_int_eq(libvirt_worker_submit(w, &coalescing_type, "dom-b", data_new(8, -1), &n_done, NULL), 1);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "dom-a", data_new(4, -1), &n_done, NULL), 0);
        /* The replaced data is freed at once; nothing else ran. */
        ck_assert_int_eq(atomic_load(&frees), 3);
        ck_assert_uint_eq(libvirt_worker_pending(w), 4);

        ck_assert_int_eq(write(release, "x", 1), 1);
        drain(e, w);
        /* The blocking job, then dom-a with its latest target, dom-b with its latest, the plain job. */
        ck_assert_uint_eq(n_done, 4);
        ck_assert_int_eq(done_values[0], 100);
        ck_assert_int_eq(done_values[1], 30);
        ck_assert_int_eq(done_values[2], 80);
        ck_assert_int_eq(done_values[3], 40);
        ck_assert_int_eq(atomic_load(&runs), 4);
        ck_assert_int_eq(atomic_load(&frees), 7);

        /* A job that runs is not coalesced into: the next one queues. */
        block_worker(e, w, 200, &release);
        ck_assert_int_eq(libvirt_worker_submit(w, &coalescing_type, "dom-a", data_new(5, -1), &n_done, NULL), 0);
        ck_assert_int_eq(write(release, "x", 1), 1);
        drain(e, w);
        ck_assert_uint_eq(n_done, 6);
        ck_assert_int_eq(done_values[5], 50);
        w = libvirt_worker_free(w);
        close(release);
}
END_TEST

START_TEST(test_cancel) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtWorker *w = NULL;
        LibvirtJob *job = NULL;
        int release;

        reset();
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_worker_new(e, NULL, NULL, &w), 0);
        block_worker(e, w, 100, &release);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "gone", data_new(1, -1), &n_done, NULL), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &coalescing_type, "gone", data_new(2, -1), &n_done, NULL), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "stays", data_new(3, -1), &n_done, &job), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "stays", data_new(4, -1), &n_done, NULL), 0);
        /* By key: the queued jobs go at once, unrun. */
        libvirt_worker_cancel_key(w, "gone");
        ck_assert_int_eq(atomic_load(&frees), 2);
        ck_assert_uint_eq(libvirt_worker_pending(w), 3);
        /* By job: it still runs, but its done does not. */
        libvirt_job_cancel(job);
        ck_assert_int_eq(write(release, "x", 1), 1);
        drain(e, w);
        ck_assert_uint_eq(n_done, 2);
        ck_assert_int_eq(done_values[0], 100);
        ck_assert_int_eq(done_values[1], 40);
        ck_assert_int_eq(atomic_load(&runs), 3);
        ck_assert_int_eq(atomic_load(&frees), 5);

        /* The running job's key cancelled: its done does not run either. */
        int pair[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "running", data_new(9, pair[0]), &n_done, NULL), 0);
        while (!libvirt_worker_busy(w, NULL))
                ck_assert_int_ge(sd_event_run(e, 10 * USEC_PER_MSEC), 0);
        libvirt_worker_cancel_key(w, "running");
        ck_assert_int_eq(write(pair[1], "x", 1), 1);
        drain(e, w);
        ck_assert_uint_eq(n_done, 2);
        ck_assert_int_eq(atomic_load(&frees), 6);

        w = libvirt_worker_free(w);
        close(release);
        close(pair[0]);
        close(pair[1]);
}
END_TEST

/* Freeing with jobs queued: the running one finishes, nothing else runs, all data is freed,
 * no done runs. */
START_TEST(test_free_with_jobs) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtWorker *w = NULL;
        int release;

        reset();
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_worker_new(e, NULL, NULL, &w), 0);
        block_worker(e, w, 100, &release);
        for (int i = 0; i < 3; i++)
                ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, NULL, data_new(i, -1), &n_done, NULL), 0);
        close(release); /* the blocking job ends with the hang-up */
        w = libvirt_worker_free(w);
        ck_assert_uint_eq(n_done, 0);
        ck_assert_int_le(atomic_load(&runs), 4);
        ck_assert_int_eq(atomic_load(&frees), 4);
}
END_TEST

/* A job stuck on the watched socket (as a libvirt call on a hung libvirtd), the loop running:
 * the watchdog shuts the socket down, the job returns and the next one runs. */
START_TEST(test_watchdog_cuts_a_stuck_job) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtWatchdog *wd = NULL;
        LibvirtWorker *w = NULL;
        int pair[2];
        uint64_t stalled = 0;
        bool by_call = false;

        reset();
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_watchdog_new(e, STALL_USEC, &wd), 0);
        libvirt_watchdog_watch(wd, pair[0]);
        ck_assert_int_eq(libvirt_worker_new(e, NULL, wd, &w), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, NULL, data_new(1, pair[0]), &n_done, NULL), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, NULL, data_new(2, -1), &n_done, NULL), 0);
        drain(e, w);
        ck_assert_uint_eq(n_done, 2);
        ck_assert_int_eq(done_values[0], 1);
        ck_assert_int_eq(done_values[1], 20);
        ck_assert(libvirt_watchdog_take_cut(wd, &stalled, &by_call));
        ck_assert(by_call);
        ck_assert_uint_gt(stalled, STALL_USEC);

        w = libvirt_worker_free(w);
        wd = libvirt_watchdog_free(wd);
        close(pair[0]);
        close(pair[1]);
}
END_TEST

/* The job of the honest key is done. */
static bool done_value_seen(int value) {
        for (unsigned i = 0; i < n_done; i++)
                if (done_values[i] == value)
                        return true;
        return false;
}

/* A pool of two threads: one key's job hangs (a domain whose agent never answers in time) with
 * more of its jobs queued behind it; another key's jobs, queued after all of them, still run,
 * each in turn, while the hung job runs on. The hung key's queued jobs wait for it, not on the
 * second thread. */
START_TEST(test_pool_slow_key_holds_one_thread) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtWorker *w = NULL;
        int pair[2];

        reset();
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_worker_new_pool(e, NULL, NULL, 2, &w), 0);
        ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "slow", data_new(100, pair[0]), &n_done, NULL), 0);
        while (!libvirt_worker_busy(w, NULL))
                ck_assert_int_ge(sd_event_run(e, 10 * USEC_PER_MSEC), 0);
        for (int i = 1; i <= 3; i++)
                ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "slow", data_new(100 + i, -1), &n_done, NULL), 0);
        for (int i = 1; i <= 4; i++)
                ck_assert_int_eq(libvirt_worker_submit(w, &plain_type, "honest", data_new(i, -1), &n_done, NULL), 0);

        /* No clock: the honest jobs are done while the slow one still hangs, or the test's
         * timeout ends it. */
        while (!done_value_seen(40))
                ck_assert_int_ge(sd_event_run(e, 100 * USEC_PER_MSEC), 0);
        ck_assert_uint_eq(n_done, 4);
        for (int i = 0; i < 4; i++)
                ck_assert_int_eq(done_values[i], (i + 1) * 10);
        ck_assert(libvirt_worker_busy(w, NULL));
        /* The hung job and nothing else of its key ran. */
        ck_assert_int_eq(atomic_load(&runs), 5);
        ck_assert_uint_eq(libvirt_worker_pending(w), 4);

        ck_assert_int_eq(write(pair[1], "x", 1), 1);
        drain(e, w);
        ck_assert_uint_eq(n_done, 8);
        ck_assert_int_eq(done_values[4], 100);
        for (int i = 5; i < 8; i++)
                ck_assert_int_eq(done_values[i], (100 + i - 4) * 10);
        w = libvirt_worker_free(w);
        close(pair[0]);
        close(pair[1]);
}
END_TEST

int main(void) {
        return check_run_case("libvirt-worker", "core", NULL, NULL, 60,
                              CHECK_TESTS(test_fifo_and_results, test_coalescing, test_cancel, test_free_with_jobs,
                                          test_watchdog_cuts_a_stuck_job, test_pool_slow_key_holds_one_thread));
}
