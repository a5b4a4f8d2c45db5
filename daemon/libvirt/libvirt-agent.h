/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The guest agent through libvirt (virDomainQemuAgentCommand), off the event loop.
 *
 * libvirt's agent calls are synchronous and may take their whole timeout (5 s each, and a
 * file read is three or more of them) when a guest's agent is slow or gone. The daemon is one
 * sd-event loop, so they run on worker threads of their own instead (libvirt-worker.h): jobs
 * go in a queue, a pool of threads runs them on the shared libvirt connection (libvirt's API
 * is thread-safe), and each result comes back on the loop through an eventfd, where the job's
 * callback runs. A domain's reads run one at a time, on one thread at most, and a read (all
 * its calls) ends at a deadline: a guest whose agent answers just before every timeout holds
 * one thread for that long, while the other threads serve the other domains. Never the loop,
 * nor the backend's stats and actuation calls (another worker).
 *
 * Reading guest files through the agent makes libvirt mark the domain tainted
 * (custom-ga-command): callers do it only when configured to. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libvirt/libvirt.h>
#include <systemd/sd-event.h>

#include "common/macro.h"
#include "common/procfs.h"
#include "qmp/qga-osinfo.h"

#define LIBVIRT_AGENT_TIMEOUT_SEC 5
#define LIBVIRT_AGENT_FILE_MAX (256 * 1024)
/* A worker's read of /proc/vmstat and PSI, all its calls: longer than the loop waits for it
 * (10 s at most, guest-libvirt.c), shorter than the six or more calls at 5 s it could take. */
#define LIBVIRT_AGENT_JOB_DEADLINE_USEC (10 * USEC_PER_SEC)
/* Threads for the agent reads: as many domains with a slow agent before the others wait. */
#define LIBVIRT_AGENT_THREADS 4

/* A call's timeout in seconds for a read that must end by `deadline` (CLOCK_MONOTONIC µs,
 * UINT64_MAX: none): at most LIBVIRT_AGENT_TIMEOUT_SEC, -ETIMEDOUT once it is past. */
int libvirt_agent_call_timeout(uint64_t deadline, uint64_t now);

/* Reads a guest file (guest-file-open/read/close) into a NUL-terminated buffer of at most
 * LIBVIRT_AGENT_FILE_MAX bytes. Thread-safe, does not log: -errno (-ETIMEDOUT when the agent
 * does not answer, -EBADMSG for a malformed reply, -EFBIG for a file too large), with
 * libvirt's message in `message` (may be NULL) on libvirt errors. */
int libvirt_agent_read_file(virDomainPtr dom, const char *path, char **ret, size_t *ret_size, char *message,
                            size_t message_size);
/* /proc/vmstat and /proc/pressure/memory, parsed. ret_psi may be NULL. Thread-safe. */
int libvirt_agent_read_procfs(virDomainPtr dom, GuestVmstat *ret_vmstat, GuestPsi *ret_psi, char *message,
                              size_t message_size);

typedef struct LibvirtAgentWorker LibvirtAgentWorker;
typedef struct LibvirtAgentJob LibvirtAgentJob;

/* On the event loop. error 0: vmstat and psi are valid (psi->some.known false when the guest
 * has no PSI), or both NULL when the guest has no /proc to read (a Windows guest: see
 * libvirt_agent_submit_full()); else -errno and message says why. */
typedef void (*libvirt_agent_done_fn)(int error, const GuestVmstat *vmstat, const GuestPsi *psi,
                                      const char *message, void *userdata);

/* virDomainQemuAgentCommand's signature: how a worker sends each call (a stand-in in tests). */
typedef char *(*libvirt_agent_command_fn)(virDomainPtr dom, const char *command, int timeout, unsigned flags);

typedef struct LibvirtAgentWorkerConfig {
        unsigned threads;
        uint64_t job_deadline_usec;
        libvirt_agent_command_fn command; /* NULL: virDomainQemuAgentCommand */
} LibvirtAgentWorkerConfig;

/* LIBVIRT_AGENT_THREADS threads, LIBVIRT_AGENT_JOB_DEADLINE_USEC per read. */
int libvirt_agent_worker_new(sd_event *event, LibvirtAgentWorker **ret);
int libvirt_agent_worker_new_full(sd_event *event, const LibvirtAgentWorkerConfig *config, LibvirtAgentWorker **ret);
/* Cancels every job and waits for the ones running (at most the agent's timeout per call). */
LibvirtAgentWorker *libvirt_agent_worker_free(LibvirtAgentWorker *w);

/* Queues a /proc/vmstat + PSI read of `dom` (referenced until the job is done). *ret_job
 * (may be NULL) is valid until `done` runs or the job is cancelled. */
int libvirt_agent_submit(LibvirtAgentWorker *w, virDomainPtr dom, libvirt_agent_done_fn done, void *userdata,
                         LibvirtAgentJob **ret_job);
/* The same; with ask_os the read first asks guest-get-osinfo (qmp/qga-osinfo.h), and on a
 * Windows guest, whose agent has no /proc (qemu-ga for Windows, QEMU qga/commands-win32.c),
 * reads nothing more: one call instead of a guest-file-open that fails every interval. An
 * answer that is no osinfo (an agent without the command) leaves the read to go on as without. */
/* With zoneinfo, /proc/zoneinfo after them (not every interval: guest-libvirt.c says when). */
int libvirt_agent_submit_full(LibvirtAgentWorker *w, virDomainPtr dom, bool ask_os, bool zoneinfo,
                              libvirt_agent_done_fn done, void *userdata, LibvirtAgentJob **ret_job);
/* During its `done`: what the agent said it runs on; NULL when it was not asked or did not say. */
const QgaOsInfo *libvirt_agent_job_os(const LibvirtAgentJob *job);
/* During its `done`: /proc/zoneinfo's watermarks summed (guest_zoneinfo_parse() for 4 KiB pages);
 * NULL when not asked for, or the read failed (optional: it fails no job), error in *ret_error
 * (-EBADMSG: not a kernel's; may be NULL). */
const GuestZoneinfo *libvirt_agent_job_zoneinfo(const LibvirtAgentJob *job, int *ret_error);
/* `done` will not run for this job (its read may still be under way; its result is dropped). */
void libvirt_agent_job_cancel(LibvirtAgentJob *job);
/* Jobs queued or running (for tests). */
unsigned libvirt_agent_worker_pending(LibvirtAgentWorker *w);
