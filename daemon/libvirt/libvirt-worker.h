/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Worker threads for libvirt calls, so that the daemon's loop never waits on libvirtd.
 *
 * libvirt's calls are synchronous RPCs. A libvirtd that hangs never answers them (libvirt
 * 9.0's client does not end a call by keepalive), and a domain busy with a job holds a call
 * up to libvirt's 30 s job wait. The daemon is one sd-event loop: such calls run here instead.
 * Jobs go in a queue; a thread runs them one after the other (on a connection shared with the
 * loop: libvirt's API is thread-safe), and each result comes back on the loop through an
 * eventfd, where the job's `done` runs.
 *
 * - Threads: one (libvirt_worker_new) runs the jobs in the order they came. A pool
 *   (libvirt_worker_new_pool) takes the oldest job whose key no other thread is running: the
 *   jobs of one key (one domain) run one at a time, so a domain whose calls are slow holds one
 *   thread at most, and the other domains' jobs go on on the others.
 *
 * - Coalescing: a job submitted with a key replaces a job of the same coalescing type and key that is
 *   still queued (not yet running): the latest data wins, the older data is freed and its
 *   `done` never runs. A hung libvirtd therefore leaves at most one queued job per type and
 *   key, whatever the loop asks meanwhile.
 * - Cancelling: a cancelled job's `done` does not run (its call may still be under way; its
 *   data is freed when it returns).
 * - Stall watchdog (libvirt-watchdog.h): each job runs between libvirt_watchdog_call_begin()
 *   and _end(), so a call that does not return in time gets the connection cut; the call then
 *   fails and the thread goes on with the next job. */
#pragma once

#include <stdbool.h>

#include <systemd/sd-event.h>

#include "daemon/libvirt/libvirt-watchdog.h"

typedef struct LibvirtWorker LibvirtWorker;
typedef struct LibvirtJob LibvirtJob;

typedef struct LibvirtJobType {
        const char *name;
        bool coalesce;             /* a queued job of this type and key takes the new data */
        /* On the worker thread: the libvirt calls. Must not touch what the loop owns. */
        void (*run)(void *data);
        /* On the loop, after run, unless the job was cancelled or replaced. May submit and
         * cancel jobs. */
        void (*done)(void *data, void *userdata);
        /* Frees data (NULL: nothing to free); on the loop, or in libvirt_worker_free(). */
        void (*free)(void *data);
} LibvirtJobType;

/* One thread. watchdog may be NULL (no stall watchdog for these calls); it must outlive the
 * worker. */
int libvirt_worker_new(sd_event *event, const char *description, LibvirtWatchdog *watchdog, LibvirtWorker **ret);
/* `threads` threads (1..16), one key at a time each. */
int libvirt_worker_new_pool(sd_event *event, const char *description, LibvirtWatchdog *watchdog, unsigned threads,
                            LibvirtWorker **ret);
/* Cancels every job and waits for the ones running (if one hangs: until the watchdog cuts it). */
LibvirtWorker *libvirt_worker_free(LibvirtWorker *w);

/* Queues a job; takes data (freed with type->free, also on failure). key may be NULL (never
 * coalesced). Returns 0 when queued, 1 when it replaced a queued job's data (then *ret_job is
 * that job), -errno on failure. *ret_job (may be NULL) is valid until its done runs or it is
 * cancelled. */
int libvirt_worker_submit(LibvirtWorker *w, const LibvirtJobType *type, const char *key, void *data, void *userdata,
                          LibvirtJob **ret_job);
/* On the loop: the job's done will not run. NULL is fine. */
void libvirt_job_cancel(LibvirtJob *job);
/* On the loop: cancels every job with this key, of any type, queued, running or done. */
void libvirt_worker_cancel_key(LibvirtWorker *w, const char *key);

/* Jobs not yet handed back: queued, running or waiting for the loop. */
unsigned libvirt_worker_pending(LibvirtWorker *w);
/* Whether a job runs right now, and since when the oldest running one (CLOCK_MONOTONIC µs, may
 * be NULL). */
bool libvirt_worker_busy(LibvirtWorker *w, uint64_t *ret_since);
