/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "daemon/libvirt/libvirt-worker.h"

#define KEY_MAX 64
#define THREADS_MAX 16

struct LibvirtJob {
        LibvirtJob *next;
        const LibvirtJobType *type;
        char key[KEY_MAX];         /* "" when none */
        void *data;
        void *userdata;
        bool cancelled;            /* loop thread only (the worker never reads it) */
        uint64_t started;          /* under lock: CLOCK_MONOTONIC µs when a thread took it */
};

struct LibvirtWorker {
        sd_event_source *completion;
        int efd;
        pthread_t threads[THREADS_MAX];
        unsigned n_threads;        /* started */
        LibvirtWatchdog *watchdog;

        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool quit;                 /* under lock */
        LibvirtJob *queue;         /* under lock, oldest first */
        LibvirtJob *running[THREADS_MAX]; /* under lock: each thread's job, or NULL */
        LibvirtJob *finished;      /* under lock, newest first */
        LibvirtJob *dispatching;   /* loop only: handed back, done not yet run, oldest first */
        unsigned pending;          /* under lock: queued + running + finished + dispatching */
};

static void job_free(LibvirtJob *job) {
        if (!job)
                return;
        if (job->type->free)
                job->type->free(job->data);
        free(job);
}

static void job_list_free(LibvirtJob *j) {
        while (j) {
                LibvirtJob *next = j->next;
                job_free(j);
                j = next;
        }
}

static bool key_running(LibvirtWorker *w, const char *key) {
        for (unsigned i = 0; i < w->n_threads; i++)
                if (w->running[i] && strcmp(w->running[i]->key, key) == 0)
                        return true;
        return false;
}

/* Under lock: takes the oldest queued job whose key no other thread is running. One key (one
 * domain) therefore holds at most one thread, however slow its calls: the other threads serve
 * the other keys in the order they asked. Jobs without a key are never held back. */
static LibvirtJob *queue_take(LibvirtWorker *w) {
        for (LibvirtJob **p = &w->queue; *p; p = &(*p)->next) {
                LibvirtJob *job = *p;
                if (job->key[0] && key_running(w, job->key))
                        continue;
                *p = job->next;
                job->next = NULL;
                return job;
        }
        return NULL;
}

typedef struct WorkerThread {
        LibvirtWorker *worker;
        unsigned index;
} WorkerThread;

static void *worker_main(void *arg) {
        WorkerThread *t = arg;
        LibvirtWorker *w = t->worker;
        unsigned index = t->index;
        uint64_t one = 1;

        free(t);
        pthread_mutex_lock(&w->lock);
        for (;;) {
                LibvirtJob *job = NULL;
                int slot;

                while (!w->quit && !(job = queue_take(w)))
                        pthread_cond_wait(&w->wake, &w->lock);
                if (w->quit)
                        break;
                w->running[index] = job;
                job->started = now_usec(CLOCK_MONOTONIC);
                pthread_mutex_unlock(&w->lock);

                slot = libvirt_watchdog_call_begin(w->watchdog);
                job->type->run(job->data);
                libvirt_watchdog_call_end(w->watchdog, slot);

                pthread_mutex_lock(&w->lock);
                w->running[index] = NULL;
                job->next = w->finished;
                w->finished = job;
                /* A job of this key may wait for this thread to be done with it. */
                if (job->key[0])
                        pthread_cond_broadcast(&w->wake);
                /* The loop reads the eventfd; a full counter cannot happen at one write per job. */
                (void) !write(w->efd, &one, sizeof(one));
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

static int on_completion(sd_event_source *s _unused_, int fd, uint32_t revents _unused_, void *userdata) {
        LibvirtWorker *w = userdata;
        LibvirtJob *done, **tail;
        uint64_t n;

        (void) !read(fd, &n, sizeof(n));
        pthread_mutex_lock(&w->lock);
        done = w->finished;
        w->finished = NULL;
        /* Oldest first, behind what may still be dispatching (a done that ran the loop). */
        for (tail = &w->dispatching; *tail; tail = &(*tail)->next)
                ;
        while (done) {
                LibvirtJob *next = done->next;
                done->next = *tail;
                *tail = done;
                done = next;
        }
        pthread_mutex_unlock(&w->lock);

        for (;;) {
                LibvirtJob *job;
                bool cancelled;

                pthread_mutex_lock(&w->lock);
                job = w->dispatching;
                if (job) {
                        w->dispatching = job->next;
                        w->pending--;
                        cancelled = job->cancelled;
                }
                pthread_mutex_unlock(&w->lock);
                if (!job)
                        break;
                /* done may submit and cancel: the job is off every list by now. */
                if (!cancelled && job->type->done)
                        job->type->done(job->data, job->userdata);
                job_free(job);
        }
        return 0;
}

int libvirt_worker_new_pool(sd_event *event, const char *description, LibvirtWatchdog *watchdog, unsigned threads,
                            LibvirtWorker **ret) {
        LibvirtWorker *w;
        int r;

        if (!event || !ret || threads == 0 || threads > THREADS_MAX)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->watchdog = watchdog;
        w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->efd < 0) {
                free(w);
                return -errno;
        }
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);
        r = sd_event_add_io(event, &w->completion, w->efd, EPOLLIN, on_completion, w);
        if (r < 0) {
                libvirt_worker_free(w);
                return r;
        }
        (void) sd_event_source_set_description(w->completion, description ?: "libvirt-worker-done");
        for (unsigned i = 0; i < threads; i++) {
                WorkerThread *t = malloc(sizeof(*t));
                if (!t) {
                        libvirt_worker_free(w);
                        return -ENOMEM;
                }
                *t = (WorkerThread){ .worker = w, .index = i };
                /* n_threads only grows under lock: a started thread reads it in key_running(). */
                pthread_mutex_lock(&w->lock);
                r = -pthread_create(&w->threads[i], NULL, worker_main, t);
                if (r == 0)
                        w->n_threads++;
                pthread_mutex_unlock(&w->lock);
                if (r < 0) {
                        free(t);
                        libvirt_worker_free(w);
                        return r;
                }
        }
        *ret = w;
        return 0;
}

int libvirt_worker_new(sd_event *event, const char *description, LibvirtWatchdog *watchdog, LibvirtWorker **ret) {
        return libvirt_worker_new_pool(event, description, watchdog, 1, ret);
}

static void worker_threads_stop(LibvirtWorker *w) {
        pthread_mutex_lock(&w->lock);
        w->quit = true;
        pthread_cond_broadcast(&w->wake);
        pthread_mutex_unlock(&w->lock);
        for (unsigned i = 0; i < w->n_threads; i++)
                (void) pthread_join(w->threads[i], NULL);
}

LibvirtWorker *libvirt_worker_free(LibvirtWorker *w) {
        if (!w)
                return NULL;
        worker_threads_stop(w);
        job_list_free(w->queue);
        job_list_free(w->finished);
        job_list_free(w->dispatching);
        sd_event_source_disable_unref(w->completion);
        if (w->efd >= 0)
                close(w->efd);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

int libvirt_worker_submit(LibvirtWorker *w, const LibvirtJobType *type, const char *key, void *data, void *userdata,
                          LibvirtJob **ret_job) {
        LibvirtJob *job, **tail;

        if (!w || !type || !type->run || (key && strlen(key) >= KEY_MAX)) {
                if (type && type->free)
                        type->free(data);
                return -EINVAL;
        }

        pthread_mutex_lock(&w->lock);
        if (key && type->coalesce)
                for (job = w->queue; job; job = job->next)
                        if (job->type == type && !job->cancelled && strcmp(job->key, key) == 0) {
                                /* Still queued: the latest data wins. */
                                void *old = job->data;
                                job->data = data;
                                job->userdata = userdata;
                                pthread_mutex_unlock(&w->lock);
                                if (type->free)
                                        type->free(old);
                                if (ret_job)
                                        *ret_job = job;
                                return 1;
                        }
        pthread_mutex_unlock(&w->lock);

        job = calloc(1, sizeof(*job));
        if (!job) {
                if (type->free)
                        type->free(data);
                return -ENOMEM;
        }
        job->type = type;
        if (key)
                strcpy(job->key, key);
        job->data = data;
        job->userdata = userdata;

        pthread_mutex_lock(&w->lock);
        for (tail = &w->queue; *tail; tail = &(*tail)->next)
                ;
        *tail = job;
        w->pending++;
        /* Every thread: the one that wakes first may find this job's key running elsewhere. */
        pthread_cond_broadcast(&w->wake);
        pthread_mutex_unlock(&w->lock);
        if (ret_job)
                *ret_job = job;
        return 0;
}

void libvirt_job_cancel(LibvirtJob *job) {
        if (job)
                job->cancelled = true;
}

static void cancel_in(LibvirtJob *j, const char *key) {
        for (; j; j = j->next)
                if (strcmp(j->key, key) == 0)
                        j->cancelled = true;
}

void libvirt_worker_cancel_key(LibvirtWorker *w, const char *key) {
        LibvirtJob **p;

        if (!w || !key || !key[0])
                return;
        pthread_mutex_lock(&w->lock);
        /* Queued ones go at once: nothing of them runs. */
        for (p = &w->queue; *p;) {
                LibvirtJob *j = *p;
                if (strcmp(j->key, key) == 0) {
                        *p = j->next;
                        w->pending--;
                        j->next = NULL;
                        pthread_mutex_unlock(&w->lock);
                        job_free(j);
                        pthread_mutex_lock(&w->lock);
                        p = &w->queue; /* the lock was dropped: start over */
                } else
                        p = &j->next;
        }
        for (unsigned i = 0; i < w->n_threads; i++)
                if (w->running[i] && strcmp(w->running[i]->key, key) == 0)
                        w->running[i]->cancelled = true;
        cancel_in(w->finished, key);
        cancel_in(w->dispatching, key);
        pthread_mutex_unlock(&w->lock);
}

unsigned libvirt_worker_pending(LibvirtWorker *w) {
        unsigned n;

        if (!w)
                return 0;
        pthread_mutex_lock(&w->lock);
        n = w->pending;
        pthread_mutex_unlock(&w->lock);
        return n;
}

bool libvirt_worker_busy(LibvirtWorker *w, uint64_t *ret_since) {
        uint64_t since = 0;
        bool busy = false;

        if (!w)
                return false;
        pthread_mutex_lock(&w->lock);
        for (unsigned i = 0; i < w->n_threads; i++)
                if (w->running[i] && (!busy || w->running[i]->started < since)) {
                        busy = true;
                        since = w->running[i]->started;
                }
        pthread_mutex_unlock(&w->lock);
        if (ret_since)
                *ret_since = since;
        return busy;
}
