/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-event.h"

/* libvirt calls this implementation from any thread that makes an API call (its RPC client
 * updates its socket watch and keepalive timer from the calling thread), while sd-event is not
 * thread-safe. So every operation only records what libvirt wants, under `lock`; the sd-event
 * sources are created, changed and dropped on the loop's thread: at once when the call comes
 * from it, otherwise after a wake-up through an eventfd. */

/* One registered handle or timeout. libvirt names them by an int id. */
typedef struct EventRecord {
        struct EventRecord *next;
        int id;
        bool is_timeout;
        int fd;
        int events;      /* handles: what libvirt wants watched (VIR_EVENT_HANDLE_*) */
        int interval_ms; /* timeouts: -1 disabled, 0 every iteration, else the period */
        bool removed;    /* libvirt removed it: no more dispatch, freed on the loop */
        bool dirty;      /* wanted state not applied to the source yet */
        sd_event_source *source; /* loop thread only */
        virEventHandleCallback handle_cb;
        virEventTimeoutCallback timeout_cb;
        void *opaque;
        virFreeCallback ff;
} EventRecord;

/* Frees a removed record's opaque later: libvirt deadlocks if ff runs inside remove. */
typedef struct DeferredFree {
        sd_event_source *source;
        virFreeCallback ff;
        void *opaque;
} DeferredFree;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t loop_thread;
static sd_event *loop;
static int wake_fd = -1;
static sd_event_source *wake_source;
static EventRecord *records;
static int next_id = 1;

static bool on_loop_thread(void) {
        return pthread_equal(pthread_self(), loop_thread);
}

static EventRecord *record_find(int id, bool is_timeout) {
        for (EventRecord *r = records; r; r = r->next)
                if (r->id == id && r->is_timeout == is_timeout && !r->removed)
                        return r;
        return NULL;
}

static void record_unlink(EventRecord *rec) {
        for (EventRecord **p = &records; *p; p = &(*p)->next)
                if (*p == rec) {
                        *p = rec->next;
                        return;
                }
}

static uint32_t to_epoll(int events) {
        uint32_t e = 0;

        if (events & VIR_EVENT_HANDLE_READABLE)
                e |= EPOLLIN;
        if (events & VIR_EVENT_HANDLE_WRITABLE)
                e |= EPOLLOUT;
        /* EPOLLERR and EPOLLHUP are always reported. */
        return e;
}

static int from_epoll(uint32_t revents) {
        int e = 0;

        if (revents & EPOLLIN)
                e |= VIR_EVENT_HANDLE_READABLE;
        if (revents & EPOLLOUT)
                e |= VIR_EVENT_HANDLE_WRITABLE;
        if (revents & EPOLLERR)
                e |= VIR_EVENT_HANDLE_ERROR;
        if (revents & EPOLLHUP)
                e |= VIR_EVENT_HANDLE_HANGUP;
        return e;
}

static int deferred_free_dispatch(sd_event_source *s, void *userdata) {
        DeferredFree *d = userdata;

        d->ff(d->opaque);
        sd_event_source_disable_unref(s);
        free(d);
        return 0;
}

/* ---- dispatch (loop thread) ---- */

static int handle_dispatch(sd_event_source *s _unused_, int fd, uint32_t revents, void *userdata) {
        EventRecord *rec = userdata;
        virEventHandleCallback cb;
        void *opaque;
        int id;

        pthread_mutex_lock(&lock);
        if (rec->removed || rec->events == 0) {
                pthread_mutex_unlock(&lock);
                return 0;
        }
        /* The callback may remove this very handle: copy what it needs first. */
        cb = rec->handle_cb;
        id = rec->id;
        opaque = rec->opaque;
        pthread_mutex_unlock(&lock);
        cb(id, fd, from_epoll(revents), opaque);
        return 0;
}

static void timeout_arm(EventRecord *rec) {
        uint64_t now;

        if (rec->interval_ms < 0) {
                (void) sd_event_source_set_enabled(rec->source, SD_EVENT_OFF);
                return;
        }
        if (sd_event_now(loop, CLOCK_MONOTONIC, &now) < 0)
                now = 0;
        (void) sd_event_source_set_time(rec->source, now + (uint64_t) rec->interval_ms * USEC_PER_MSEC);
        (void) sd_event_source_set_enabled(rec->source, SD_EVENT_ON);
}

static int timeout_dispatch(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        EventRecord *rec = userdata;
        virEventTimeoutCallback cb;
        void *opaque;
        int id;

        pthread_mutex_lock(&lock);
        if (rec->removed || rec->interval_ms < 0) {
                pthread_mutex_unlock(&lock);
                return 0;
        }
        /* libvirt's timeouts repeat until updated or removed; re-arm before the callback,
         * which may do either. */
        timeout_arm(rec);
        cb = rec->timeout_cb;
        id = rec->id;
        opaque = rec->opaque;
        pthread_mutex_unlock(&lock);
        cb(id, opaque);
        return 0;
}

/* ---- applying what libvirt asked for (loop thread, lock held) ---- */

/* Drops a removed record: its source now, its opaque from a clean stack. */
static void record_release(EventRecord *rec) {
        record_unlink(rec);
        sd_event_source_disable_unref(rec->source);
        if (rec->ff) {
                DeferredFree *d = malloc(sizeof(*d));
                if (d) {
                        *d = (DeferredFree) { .ff = rec->ff, .opaque = rec->opaque };
                        if (sd_event_add_defer(loop, &d->source, deferred_free_dispatch, d) >= 0) {
                                (void) sd_event_source_set_description(d->source, "libvirt-free");
                                (void) sd_event_source_set_priority(d->source, SD_EVENT_PRIORITY_IDLE);
                        } else {
                                /* Better a leak than a deadlock. */
                                free(d);
                        }
                }
        }
        free(rec);
}

static int record_apply(EventRecord *rec) {
        int r;

        rec->dirty = false;
        if (rec->removed) {
                record_release(rec);
                return 0;
        }
        if (!rec->source) {
                if (rec->is_timeout) {
                        r = sd_event_add_time(loop, &rec->source, CLOCK_MONOTONIC, 0, 0, timeout_dispatch, rec);
                        if (r < 0)
                                return r;
                        (void) sd_event_source_set_description(rec->source, "libvirt-timeout");
                        /* sd-event's default accuracy (250 ms) would delay libvirt's event dispatch. */
                        (void) sd_event_source_set_time_accuracy(rec->source, USEC_PER_MSEC);
                } else {
                        r = sd_event_add_io(loop, &rec->source, rec->fd, to_epoll(rec->events), handle_dispatch, rec);
                        if (r < 0)
                                return r;
                        (void) sd_event_source_set_description(rec->source, "libvirt-handle");
                }
        }
        if (rec->is_timeout) {
                timeout_arm(rec);
                return 0;
        }
        if (rec->events == 0)
                return sd_event_source_set_enabled(rec->source, SD_EVENT_OFF);
        (void) sd_event_source_set_io_events(rec->source, to_epoll(rec->events));
        return sd_event_source_set_enabled(rec->source, SD_EVENT_ON);
}

static void wake_loop(void) {
        uint64_t one = 1;
        (void) !write(wake_fd, &one, sizeof(one));
}

/* Now on the loop's thread, or soon through the eventfd. */
static int record_changed(EventRecord *rec) {
        rec->dirty = true;
        if (on_loop_thread())
                return record_apply(rec);
        wake_loop();
        return 0;
}

static int on_wake(sd_event_source *s _unused_, int fd, uint32_t revents _unused_, void *userdata _unused_) {
        uint64_t n;

        (void) !read(fd, &n, sizeof(n));
        pthread_mutex_lock(&lock);
        for (EventRecord *rec = records, *next; rec; rec = next) {
                next = rec->next;
                if (rec->dirty)
                        (void) record_apply(rec);
        }
        pthread_mutex_unlock(&lock);
        return 0;
}

/* ---- libvirt's interface (any thread) ---- */

static int add_record(EventRecord *template) {
        EventRecord *rec;
        int id;

        if (!loop)
                return -1;
        rec = malloc(sizeof(*rec));
        if (!rec)
                return -1;
        *rec = *template;
        pthread_mutex_lock(&lock);
        rec->id = id = next_id++;
        rec->next = records;
        records = rec;
        if (record_changed(rec) < 0) {
                record_unlink(rec);
                sd_event_source_disable_unref(rec->source);
                free(rec);
                pthread_mutex_unlock(&lock);
                return -1;
        }
        pthread_mutex_unlock(&lock);
        return id;
}

static int add_handle(int fd, int events, virEventHandleCallback cb, void *opaque, virFreeCallback ff) {
        if (fd < 0 || !cb)
                return -1;
        return add_record(&(EventRecord) {
                .fd = fd,
                .events = events,
                .handle_cb = cb,
                .opaque = opaque,
                .ff = ff,
        });
}

static void update_handle(int watch, int events) {
        EventRecord *rec;

        pthread_mutex_lock(&lock);
        rec = record_find(watch, false);
        if (rec && rec->events != events) {
                rec->events = events;
                (void) record_changed(rec);
        }
        pthread_mutex_unlock(&lock);
}

static int remove_record(int id, bool is_timeout) {
        EventRecord *rec;

        pthread_mutex_lock(&lock);
        rec = record_find(id, is_timeout);
        if (!rec) {
                pthread_mutex_unlock(&lock);
                return -1;
        }
        rec->removed = true;
        (void) record_changed(rec);
        pthread_mutex_unlock(&lock);
        return 0;
}

static int remove_handle(int watch) {
        return remove_record(watch, false);
}

static int add_timeout(int interval_ms, virEventTimeoutCallback cb, void *opaque, virFreeCallback ff) {
        if (!cb)
                return -1;
        return add_record(&(EventRecord) {
                .is_timeout = true,
                .fd = -1,
                .interval_ms = interval_ms < 0 ? -1 : interval_ms,
                .timeout_cb = cb,
                .opaque = opaque,
                .ff = ff,
        });
}

static void update_timeout(int timer, int interval_ms) {
        EventRecord *rec;

        pthread_mutex_lock(&lock);
        rec = record_find(timer, true);
        if (rec) {
                /* Like libvirt's own loop: an update restarts the interval. */
                rec->interval_ms = interval_ms < 0 ? -1 : interval_ms;
                (void) record_changed(rec);
        }
        pthread_mutex_unlock(&lock);
}

static int remove_timeout(int timer) {
        return remove_record(timer, true);
}

int rs_libvirt_event_register(sd_event *event) {
        int r;

        if (!event)
                return -EINVAL;
        if (loop)
                return loop == event ? 0 : -EBUSY;
        wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (wake_fd < 0)
                return -errno;
        r = sd_event_add_io(event, &wake_source, wake_fd, EPOLLIN, on_wake, NULL);
        if (r < 0) {
                close(wake_fd);
                wake_fd = -1;
                return r;
        }
        (void) sd_event_source_set_description(wake_source, "libvirt-wake");
        loop = sd_event_ref(event);
        loop_thread = pthread_self();
        virEventRegisterImpl(add_handle, update_handle, remove_handle, add_timeout, update_timeout, remove_timeout);
        return 0;
}
