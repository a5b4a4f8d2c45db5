/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <json-c/json.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "common/worker-thread.h"
#include "daemon/libvirt-agent.h"
#include "daemon/libvirt-parse.h"

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

/* Runs {"execute": EXECUTE, "arguments": {KEY: handle-or-path, ...}}. */
static int agent_run(virDomainPtr dom, const char *execute, json_object *arguments, char **ret, char *message,
                     size_t message_size) {
        _cleanup_(json_putp) json_object *cmd = json_object_new_object();
        const char *text;
        char *reply;

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
        reply = virDomainQemuAgentCommand(dom, text, LIBVIRT_AGENT_TIMEOUT_SEC, 0);
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

int libvirt_agent_read_file(virDomainPtr dom, const char *path, char **ret, size_t *ret_size, char *message,
                            size_t message_size) {
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
        r = agent_run(dom, "guest-file-open", args, &reply, message, message_size);
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
                r = agent_run(dom, "guest-file-read", args, &read_reply, message, message_size);
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
                        (void) agent_run(dom, "guest-file-close", args, &close_reply, NULL, 0);
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

int libvirt_agent_read_procfs(virDomainPtr dom, GuestVmstat *ret_vmstat, GuestPsi *ret_psi, char *message,
                              size_t message_size) {
        _cleanup_free_ char *vmstat = NULL, *psi = NULL;
        size_t size;
        int r;

        if (!ret_vmstat)
                return -EINVAL;
        r = libvirt_agent_read_file(dom, "/proc/vmstat", &vmstat, &size, message, message_size);
        if (r < 0)
                return r;
        if (guest_vmstat_parse(vmstat, size, ret_vmstat) <= 0) {
                if (message && message_size > 0)
                        snprintf(message, message_size, "/proc/vmstat from the agent is not vmstat");
                return -EBADMSG;
        }
        if (ret_psi) {
                r = libvirt_agent_read_file(dom, "/proc/pressure/memory", &psi, &size, message, message_size);
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

/* ---- the worker ---- */

struct LibvirtAgentJob {
        LibvirtAgentJob *next;
        virDomainPtr dom;
        libvirt_agent_done_fn done;
        void *userdata;
        bool cancelled; /* loop thread only */
        /* Written by the worker, read on the loop after the hand-over. */
        int error;
        GuestVmstat vmstat;
        GuestPsi psi;
        char message[256];
};

struct LibvirtAgentWorker {
        sd_event_source *completion;
        int efd;
        pthread_t thread;
        bool thread_started;

        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool quit;                 /* under lock */
        LibvirtAgentJob *queue;    /* under lock, FIFO */
        LibvirtAgentJob *running;  /* under lock */
        LibvirtAgentJob *finished; /* under lock, any order */
        unsigned pending;          /* under lock: queued + running + finished */
};

static void job_free(LibvirtAgentJob *job) {
        if (!job)
                return;
        if (job->dom)
                virDomainFree(job->dom);
        free(job);
}

static void *worker_main(void *arg) {
        LibvirtAgentWorker *w = arg;
        uint64_t one = 1;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                LibvirtAgentJob *job;

                while (!w->quit && !w->queue)
                        pthread_cond_wait(&w->wake, &w->lock);
                if (w->quit)
                        break;
                job = w->queue;
                w->queue = job->next;
                job->next = NULL;
                w->running = job;
                pthread_mutex_unlock(&w->lock);

                job->error = libvirt_agent_read_procfs(job->dom, &job->vmstat, &job->psi, job->message,
                                                       sizeof(job->message));

                pthread_mutex_lock(&w->lock);
                w->running = NULL;
                job->next = w->finished;
                w->finished = job;
                /* The loop reads the eventfd; a full counter cannot happen at one write per job. */
                (void) !write(w->efd, &one, sizeof(one));
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

static int on_completion(sd_event_source *s _unused_, int fd, uint32_t revents _unused_, void *userdata) {
        LibvirtAgentWorker *w = userdata;
        LibvirtAgentJob *done, *reversed = NULL;
        uint64_t n;

        (void) !read(fd, &n, sizeof(n));
        pthread_mutex_lock(&w->lock);
        done = w->finished;
        w->finished = NULL;
        pthread_mutex_unlock(&w->lock);

        /* Oldest first. */
        while (done) {
                LibvirtAgentJob *next = done->next;
                done->next = reversed;
                reversed = done;
                done = next;
        }
        while (reversed) {
                LibvirtAgentJob *job = reversed;
                reversed = job->next;
                pthread_mutex_lock(&w->lock);
                w->pending--;
                pthread_mutex_unlock(&w->lock);
                if (!job->cancelled)
                        job->done(job->error, job->error >= 0 ? &job->vmstat : NULL,
                                  job->error >= 0 ? &job->psi : NULL, job->error < 0 ? job->message : NULL,
                                  job->userdata);
                job_free(job);
        }
        return 0;
}

int libvirt_agent_worker_new(sd_event *event, LibvirtAgentWorker **ret) {
        LibvirtAgentWorker *w;
        int r;

        if (!event || !ret)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0) {
                free(w);
                return -errno;
        }
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);
        r = sd_event_add_io(event, &w->completion, w->efd, EPOLLIN, on_completion, w);
        if (r < 0) {
                libvirt_agent_worker_free(w);
                return r;
        }
        (void) sd_event_source_set_description(w->completion, "libvirt-agent-done");
        r = -pthread_create(&w->thread, NULL, worker_main, w);
        if (r < 0) {
                libvirt_agent_worker_free(w);
                return r;
        }
        w->thread_started = true;
        *ret = w;
        return 0;
}

static void job_list_free(LibvirtAgentJob *j) {
        while (j) {
                LibvirtAgentJob *next = j->next;
                job_free(j);
                j = next;
        }
}

LibvirtAgentWorker *libvirt_agent_worker_free(LibvirtAgentWorker *w) {
        if (!w)
                return NULL;
        if (w->thread_started)
                worker_thread_stop(w->thread, &w->lock, &w->wake, &w->quit);
        job_list_free(w->queue);
        job_list_free(w->finished);
        sd_event_source_disable_unref(w->completion);
        if (w->efd >= 0)
                close(w->efd);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

int libvirt_agent_submit(LibvirtAgentWorker *w, virDomainPtr dom, libvirt_agent_done_fn done, void *userdata,
                         LibvirtAgentJob **ret_job) {
        LibvirtAgentJob *job, **tail;

        if (!w || !dom || !done)
                return -EINVAL;
        job = calloc(1, sizeof(*job));
        if (!job)
                return -ENOMEM;
        if (virDomainRef(dom) < 0) {
                free(job);
                return -EIO;
        }
        job->dom = dom;
        job->done = done;
        job->userdata = userdata;

        pthread_mutex_lock(&w->lock);
        for (tail = &w->queue; *tail; tail = &(*tail)->next)
                ;
        *tail = job;
        w->pending++;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        if (ret_job)
                *ret_job = job;
        return 0;
}

void libvirt_agent_job_cancel(LibvirtAgentJob *job) {
        if (job)
                job->cancelled = true;
}

unsigned libvirt_agent_worker_pending(LibvirtAgentWorker *w) {
        unsigned n;

        pthread_mutex_lock(&w->lock);
        n = w->pending;
        pthread_mutex_unlock(&w->lock);
        return n;
}
