/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "daemon/libvirt/libvirt-agent.h"
#include "daemon/libvirt/libvirt-parse.h"
#include "daemon/libvirt/libvirt-worker.h"

#define AGENT_READ_CHUNK 65536

/* ---- synchronous reads (any thread) ---- */

/* -errno for the calling thread's last libvirt error (virGetLastError is per thread). */
static int agent_error(char *message, size_t message_size) {
        virErrorPtr e = virGetLastError();
        int code = e ? e->code : VIR_ERR_INTERNAL_ERROR;

        if (message && message_size > 0)
                snprintf(message, message_size, "%s", e && e->message ? e->message : "unknown libvirt error");
        switch (code) {
        case VIR_ERR_AGENT_UNRESPONSIVE:
        case VIR_ERR_OPERATION_TIMEOUT:
                return -ETIMEDOUT;
        case VIR_ERR_NO_DOMAIN:
        case VIR_ERR_OPERATION_INVALID: /* not running */
                return -ENOENT;
        case VIR_ERR_ARGUMENT_UNSUPPORTED:
        case VIR_ERR_NO_SUPPORT:
        case VIR_ERR_OPERATION_UNSUPPORTED:
                return -EOPNOTSUPP;
        default:
                return -EIO;
        }
}

static void json_putp(json_object **j) {
        json_object_put(*j);
}

/* How the calls of one read are sent, and until when. */
typedef struct AgentCalls {
        libvirt_agent_command_fn command;
        uint64_t deadline;         /* CLOCK_MONOTONIC µs; UINT64_MAX: each call its own timeout only */
} AgentCalls;

int libvirt_agent_call_timeout(uint64_t deadline, uint64_t now) {
        uint64_t left;

        if (deadline == UINT64_MAX)
                return LIBVIRT_AGENT_TIMEOUT_SEC;
        if (now >= deadline)
                return -ETIMEDOUT;
        /* libvirt counts in whole seconds: the last call may end up to a second past the deadline. */
        left = (deadline - now + USEC_PER_SEC - 1) / USEC_PER_SEC;
        return (int) MIN(left, (uint64_t) LIBVIRT_AGENT_TIMEOUT_SEC);
}

/* Runs {"execute": EXECUTE, "arguments": {KEY: handle-or-path, ...}}. */
static int agent_run(const AgentCalls *calls, virDomainPtr dom, const char *execute, json_object *arguments,
                     char **ret, char *message, size_t message_size) {
        _cleanup_(json_putp) json_object *cmd = json_object_new_object();
        const char *text;
        char *reply;
        int timeout;

        if (!cmd) {
                json_object_put(arguments);
                return -ENOMEM;
        }
        json_object_object_add(cmd, "execute", json_object_new_string(execute));
        if (arguments)
                json_object_object_add(cmd, "arguments", arguments);
        text = json_object_to_json_string_ext(cmd, JSON_C_TO_STRING_PLAIN);
        if (!text)
                return -ENOMEM;
        timeout = libvirt_agent_call_timeout(calls->deadline, now_usec(CLOCK_MONOTONIC));
        if (timeout < 0) {
                if (message && message_size > 0)
                        snprintf(message, message_size, "the agent's read took longer than its deadline");
                return timeout;
        }
        reply = calls->command(dom, text, timeout, 0);
        if (!reply)
                return agent_error(message, message_size);
        *ret = reply;
        return 0;
}

static json_object *handle_args(int64_t handle, int count) {
        json_object *args = json_object_new_object();

        if (!args)
                return NULL;
        json_object_object_add(args, "handle", json_object_new_int64(handle));
        if (count > 0)
                json_object_object_add(args, "count", json_object_new_int(count));
        return args;
}

static int agent_read_file(const AgentCalls *calls, virDomainPtr dom, const char *path, char **ret,
                           size_t *ret_size, char *message, size_t message_size) {
        _cleanup_free_ char *reply = NULL, *buf = NULL;
        json_object *args;
        size_t size = 0;
        int64_t handle;
        bool eof = false;
        int r;

        if (!dom || !path || !ret)
                return -EINVAL;
        args = json_object_new_object();
        if (!args)
                return -ENOMEM;
        json_object_object_add(args, "path", json_object_new_string(path));
        json_object_object_add(args, "mode", json_object_new_string("r"));
        r = agent_run(calls, dom, "guest-file-open", args, &reply, message, message_size);
        if (r < 0)
                return r;
        r = rs_agent_parse_file_open(reply, &handle);
        if (r < 0)
                return r;

        /* guest-file-read until eof, never more than LIBVIRT_AGENT_FILE_MAX. */
        for (unsigned i = 0; !eof && i < LIBVIRT_AGENT_FILE_MAX / AGENT_READ_CHUNK + 1; i++) {
                _cleanup_free_ char *read_reply = NULL;

                args = handle_args(handle, AGENT_READ_CHUNK);
                if (!args) {
                        r = -ENOMEM;
                        break;
                }
                r = agent_run(calls, dom, "guest-file-read", args, &read_reply, message, message_size);
                if (r < 0)
                        break;
                r = rs_agent_parse_file_read(read_reply, LIBVIRT_AGENT_FILE_MAX, &buf, &size, &eof);
                if (r < 0)
                        break;
        }
        if (r >= 0 && !eof)
                r = -EFBIG;

        /* Always close: the agent has a small handle table. A timeout is not retried. */
        if (r != -ETIMEDOUT) {
                _cleanup_free_ char *close_reply = NULL;
                args = handle_args(handle, 0);
                if (args)
                        (void) agent_run(calls, dom, "guest-file-close", args, &close_reply, NULL, 0);
        }
        if (r < 0)
                return r;
        if (!buf) {
                buf = strdup("");
                if (!buf)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = size;
        return 0;
}

int libvirt_agent_read_file(virDomainPtr dom, const char *path, char **ret, size_t *ret_size, char *message,
                            size_t message_size) {
        const AgentCalls calls = { .command = virDomainQemuAgentCommand, .deadline = UINT64_MAX };

        return agent_read_file(&calls, dom, path, ret, ret_size, message, message_size);
}

static int agent_read_procfs(const AgentCalls *calls, virDomainPtr dom, GuestVmstat *ret_vmstat, GuestPsi *ret_psi,
                             char *message, size_t message_size) {
        _cleanup_free_ char *vmstat = NULL, *psi = NULL;
        size_t size;
        int r;

        if (!ret_vmstat)
                return -EINVAL;
        r = agent_read_file(calls, dom, "/proc/vmstat", &vmstat, &size, message, message_size);
        if (r < 0)
                return r;
        if (guest_vmstat_parse(vmstat, size, ret_vmstat) <= 0) {
                if (message && message_size > 0)
                        snprintf(message, message_size, "/proc/vmstat from the agent is not vmstat");
                return -EBADMSG;
        }
        if (ret_psi) {
                r = agent_read_file(calls, dom, "/proc/pressure/memory", &psi, &size, message, message_size);
                if (r < 0)
                        return r;
                r = guest_psi_parse(psi, size, ret_psi);
                if (r < 0) {
                        if (message && message_size > 0)
                                snprintf(message, message_size, "/proc/pressure/memory from the agent is malformed");
                        return r;
                }
        }
        return 0;
}

int libvirt_agent_read_procfs(virDomainPtr dom, GuestVmstat *ret_vmstat, GuestPsi *ret_psi, char *message,
                              size_t message_size) {
        const AgentCalls calls = { .command = virDomainQemuAgentCommand, .deadline = UINT64_MAX };

        return agent_read_procfs(&calls, dom, ret_vmstat, ret_psi, message, message_size);
}

/* ---- the worker: a pool of LibvirtWorker threads (libvirt-worker.h) of its own, so that a
 * slow agent (5 s a call) never delays the stats and actuation calls, and, one domain at a
 * time per thread, never the other domains' agents either ---- */

struct LibvirtAgentJob {
        LibvirtJob *job;
        virDomainPtr dom;
        libvirt_agent_command_fn command;
        uint64_t deadline_usec;    /* the whole read's, from its start */
        libvirt_agent_done_fn done;
        bool ask_os;
        bool want_zoneinfo;
        /* Written by the worker, read on the loop after the hand-over. */
        bool os_known;             /* os is the agent's answer */
        QgaOsInfo os;
        int error;
        GuestVmstat vmstat;
        GuestPsi psi;
        GuestZoneinfo zoneinfo;
        int zoneinfo_error;        /* 0: zoneinfo read, else -errno (-ENODATA: not asked for) */
        char message[256];
};

struct LibvirtAgentWorker {
        LibvirtWorker *worker;
        libvirt_agent_command_fn command;
        uint64_t job_deadline_usec;
};

/* guest-get-osinfo: 0 and *ret, or -errno (the agent's timeout, or no such command). */
static int agent_ask_os(const AgentCalls *calls, virDomainPtr dom, QgaOsInfo *ret, char *message, size_t message_size) {
        _cleanup_free_ char *reply = NULL;
        int r = agent_run(calls, dom, "guest-get-osinfo", NULL, &reply, message, message_size);
        return r < 0 ? r : rs_agent_parse_osinfo(reply, ret);
}

static void agent_job_run(void *data) {
        LibvirtAgentJob *job = data;
        /* From when a thread takes the job: a wait in the queue is not the guest's doing. */
        const AgentCalls calls = { .command = job->command, .deadline = now_usec(CLOCK_MONOTONIC) + job->deadline_usec };

        if (job->ask_os) {
                int r = agent_ask_os(&calls, job->dom, &job->os, job->message, sizeof(job->message));
                job->os_known = r >= 0;
                if (r == -ETIMEDOUT) { /* its reads would only time out too */
                        job->error = r;
                        return;
                }
                if (job->os_known && !qga_os_has_procfs(job->os.family)) {
                        job->error = 0;
                        return;
                }
        }
        job->error = agent_read_procfs(&calls, job->dom, &job->vmstat, &job->psi, job->message, sizeof(job->message));
        job->zoneinfo_error = -ENODATA;
        if (job->error >= 0 && job->want_zoneinfo) {
                _cleanup_free_ char *text = NULL;
                size_t size;
                int r = agent_read_file(&calls, job->dom, "/proc/zoneinfo", &text, &size, NULL, 0);
                if (r >= 0 && guest_zoneinfo_parse(text, size, GUEST_ZONEINFO_PAGE_SIZE, &job->zoneinfo) <= 0)
                        r = -EBADMSG;
                job->zoneinfo_error = MIN(r, 0);
        }
}

static void agent_job_done(void *data, void *userdata) {
        LibvirtAgentJob *job = data;
        bool read = job->error >= 0 && !(job->os_known && !qga_os_has_procfs(job->os.family));

        job->done(job->error, read ? &job->vmstat : NULL, read ? &job->psi : NULL, job->error < 0 ? job->message : NULL,
                  userdata);
}

const QgaOsInfo *libvirt_agent_job_os(const LibvirtAgentJob *job) {
        return job && job->os_known ? &job->os : NULL;
}

const GuestZoneinfo *libvirt_agent_job_zoneinfo(const LibvirtAgentJob *job, int *ret_error) {
        if (ret_error)
                *ret_error = job ? job->zoneinfo_error : -EINVAL;
        return job && job->zoneinfo_error == 0 ? &job->zoneinfo : NULL;
}

static void agent_job_free(void *data) {
        LibvirtAgentJob *job = data;

        if (!job)
                return;
        if (job->dom)
                virDomainFree(job->dom);
        free(job);
}

static const LibvirtJobType agent_job_type = {
        .name = "agent",
        .run = agent_job_run,
        .done = agent_job_done,
        .free = agent_job_free,
};

int libvirt_agent_worker_new_full(sd_event *event, const LibvirtAgentWorkerConfig *config, LibvirtAgentWorker **ret) {
        LibvirtAgentWorker *w;
        int r;

        if (!event || !config || !ret || config->threads == 0 || config->job_deadline_usec == 0)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->command = config->command ?: virDomainQemuAgentCommand;
        w->job_deadline_usec = config->job_deadline_usec;
        /* No stall watchdog: the agent's calls have a timeout of their own, and a hung
         * libvirtd gets the connection cut by the backend's calls. */
        r = libvirt_worker_new_pool(event, "libvirt-agent-done", NULL, config->threads, &w->worker);
        if (r < 0) {
                free(w);
                return r;
        }
        *ret = w;
        return 0;
}

int libvirt_agent_worker_new(sd_event *event, LibvirtAgentWorker **ret) {
        const LibvirtAgentWorkerConfig config = {
                .threads = LIBVIRT_AGENT_THREADS,
                .job_deadline_usec = LIBVIRT_AGENT_JOB_DEADLINE_USEC,
        };

        return libvirt_agent_worker_new_full(event, &config, ret);
}

LibvirtAgentWorker *libvirt_agent_worker_free(LibvirtAgentWorker *w) {
        if (!w)
                return NULL;
        libvirt_worker_free(w->worker);
        free(w);
        return NULL;
}

int libvirt_agent_submit(LibvirtAgentWorker *w, virDomainPtr dom, libvirt_agent_done_fn done, void *userdata,
                         LibvirtAgentJob **ret_job) {
        return libvirt_agent_submit_full(w, dom, false, false, done, userdata, ret_job);
}

int libvirt_agent_submit_full(LibvirtAgentWorker *w, virDomainPtr dom, bool ask_os, bool zoneinfo,
                              libvirt_agent_done_fn done, void *userdata, LibvirtAgentJob **ret_job) {
        char uuid[VIR_UUID_STRING_BUFLEN];
        LibvirtAgentJob *job;
        LibvirtJob *handle;
        int r;

        if (!w || !dom || !done)
                return -EINVAL;
        /* The domain is the job's key: its reads run one at a time, on one thread at most. */
        if (virDomainGetUUIDString(dom, uuid) < 0)
                return -EIO;
        job = calloc(1, sizeof(*job));
        if (!job)
                return -ENOMEM;
        if (virDomainRef(dom) < 0) {
                free(job);
                return -EIO;
        }
        job->dom = dom;
        job->done = done;
        job->ask_os = ask_os;
        job->want_zoneinfo = zoneinfo;
        job->zoneinfo_error = -ENODATA;
        job->command = w->command;
        job->deadline_usec = w->job_deadline_usec;
        r = libvirt_worker_submit(w->worker, &agent_job_type, uuid, job, userdata, &handle);
        if (r < 0)
                return r;
        job->job = handle;
        if (ret_job)
                *ret_job = job;
        return 0;
}

void libvirt_agent_job_cancel(LibvirtAgentJob *job) {
        if (job)
                libvirt_job_cancel(job->job);
}

unsigned libvirt_agent_worker_pending(LibvirtAgentWorker *w) {
        return w ? libvirt_worker_pending(w->worker) : 0;
}
