/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include <libvirt/libvirt.h>

#include "common/macro.h"
#include "daemon/libvirt-event.h"

/* One registered handle or timeout. libvirt names them by an int id. */
typedef struct EventRecord {
        struct EventRecord *next;
        int id;
        bool is_timeout;
        int fd;
        int interval_ms; /* timeouts: -1 disabled, 0 every iteration, else the period */
        sd_event_source *source;
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

static sd_event *loop;
static EventRecord *records;
static int next_id = 1;
static unsigned n_handles, n_timeouts;

static EventRecord *record_find(int id, bool is_timeout) {
        for (EventRecord *r = records; r; r = r->next)
                if (r->id == id && r->is_timeout == is_timeout)
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

/* Drops a record: its source now, its opaque from a clean stack. */
static void record_release(EventRecord *rec) {
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

/* ---- handles ---- */

static int handle_dispatch(sd_event_source *s _unused_, int fd, uint32_t revents, void *userdata) {
        EventRecord *rec = userdata;
        /* The callback may remove this very handle: copy what it needs first. */
        virEventHandleCallback cb = rec->handle_cb;
        int id = rec->id;
        void *opaque = rec->opaque;

        cb(id, fd, from_epoll(revents), opaque);
        return 0;
}

static int add_handle(int fd, int events, virEventHandleCallback cb, void *opaque, virFreeCallback ff) {
        EventRecord *rec;
        int r;

        if (!loop || fd < 0 || !cb)
                return -1;
        rec = calloc(1, sizeof(*rec));
        if (!rec)
                return -1;
        *rec = (EventRecord) {
                .id = next_id++,
                .fd = fd,
                .handle_cb = cb,
                .opaque = opaque,
                .ff = ff,
        };
        r = sd_event_add_io(loop, &rec->source, fd, to_epoll(events), handle_dispatch, rec);
        if (r < 0) {
                free(rec);
                return -1;
        }
        (void) sd_event_source_set_description(rec->source, "libvirt-handle");
        if (events == 0)
                (void) sd_event_source_set_enabled(rec->source, SD_EVENT_OFF);
        rec->next = records;
        records = rec;
        n_handles++;
        return rec->id;
}

static void update_handle(int watch, int events) {
        EventRecord *rec = record_find(watch, false);

        if (!rec)
                return;
        if (events == 0) {
                (void) sd_event_source_set_enabled(rec->source, SD_EVENT_OFF);
                return;
        }
        (void) sd_event_source_set_io_events(rec->source, to_epoll(events));
        (void) sd_event_source_set_enabled(rec->source, SD_EVENT_ON);
}

static int remove_handle(int watch) {
        EventRecord *rec = record_find(watch, false);

        if (!rec)
                return -1;
        record_unlink(rec);
        n_handles--;
        record_release(rec);
        return 0;
}

/* ---- timeouts ---- */

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
        virEventTimeoutCallback cb = rec->timeout_cb;
        int id = rec->id;
        void *opaque = rec->opaque;

        /* libvirt's timeouts repeat until updated or removed; re-arm before the callback,
         * which may do either. */
        timeout_arm(rec);
        cb(id, opaque);
        return 0;
}

static int add_timeout(int interval_ms, virEventTimeoutCallback cb, void *opaque, virFreeCallback ff) {
        EventRecord *rec;
        int r;

        if (!loop || !cb)
                return -1;
        rec = calloc(1, sizeof(*rec));
        if (!rec)
                return -1;
        *rec = (EventRecord) {
                .id = next_id++,
                .is_timeout = true,
                .fd = -1,
                .interval_ms = interval_ms < 0 ? -1 : interval_ms,
                .timeout_cb = cb,
                .opaque = opaque,
                .ff = ff,
        };
        r = sd_event_add_time(loop, &rec->source, CLOCK_MONOTONIC, 0, 0, timeout_dispatch, rec);
        if (r < 0) {
                free(rec);
                return -1;
        }
        (void) sd_event_source_set_description(rec->source, "libvirt-timeout");
        /* sd-event's default accuracy (250 ms) would delay libvirt's event dispatch. */
        (void) sd_event_source_set_time_accuracy(rec->source, USEC_PER_MSEC);
        timeout_arm(rec);
        rec->next = records;
        records = rec;
        n_timeouts++;
        return rec->id;
}

static void update_timeout(int timer, int interval_ms) {
        EventRecord *rec = record_find(timer, true);

        if (!rec)
                return;
        rec->interval_ms = interval_ms < 0 ? -1 : interval_ms;
        timeout_arm(rec);
}

static int remove_timeout(int timer) {
        EventRecord *rec = record_find(timer, true);

        if (!rec)
                return -1;
        record_unlink(rec);
        n_timeouts--;
        record_release(rec);
        return 0;
}

int rs_libvirt_event_register(sd_event *event) {
        if (!event)
                return -EINVAL;
        if (loop)
                return loop == event ? 0 : -EBUSY;
        loop = sd_event_ref(event);
        virEventRegisterImpl(add_handle, update_handle, remove_handle, add_timeout, update_timeout, remove_timeout);
        return 0;
}

unsigned rs_libvirt_event_handles(void) {
        return n_handles;
}

unsigned rs_libvirt_event_timeouts(void) {
        return n_timeouts;
}
