/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "qmp/json-util.h"
#include "qmp/qmp-sync.h"

/* Runs the loop until finished(userdata) or the timeout. */
static int run_loop(sd_event *e, uint64_t timeout_usec, bool (*finished)(void *), void *userdata) {
        uint64_t deadline = timeout_usec == QMP_TIMEOUT_INFINITY ? UINT64_MAX : now_usec(CLOCK_MONOTONIC) + timeout_usec;
        int r;

        while (!finished(userdata)) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);

                if (now >= deadline)
                        return -ETIMEDOUT;
                r = sd_event_run(e, deadline == UINT64_MAX ? UINT64_MAX : deadline - now);
                if (r < 0)
                        return r;
                if (sd_event_get_state(e) == SD_EVENT_FINISHED)
                        return -ECANCELED;
        }
        return 0;
}

static bool never(void *userdata) {
        return false;
}

int qmp_sync_sleep(sd_event *event, uint64_t usec) {
        int r = run_loop(event, usec, never, NULL);

        return r == -ETIMEDOUT ? 0 : r;
}

/* One blocking call. Heap-allocated with two references (caller, command) so an early
 * return (loop error) never leaves the command pointing at a dead stack frame. */
typedef struct SyncCall {
        unsigned n_ref;
        QmpClient *qmp;
        QgaClient *qga;
        bool done;
        int error;
        char *error_text;
        union {
                json_object *result;
                QmpBalloonInfo balloon;
                QmpGuestStats stats;
                QmpMemoryDeviceList devices;
                uint64_t u64;
                bool boolean;
                GuestVmstat vmstat;
                GuestMeminfo meminfo;
                GuestPsi psi;
                GuestZoneinfo zoneinfo;
                struct {
                        char *data;
                        size_t size;
                } file;
        } out;
        /* What in out must be released if the caller does not take it. */
        enum { OUT_NONE, OUT_RESULT, OUT_DEVICES, OUT_FILE } owns;
} SyncCall;

static SyncCall *sync_call_new(QmpClient *qmp, QgaClient *qga) {
        SyncCall *s = calloc(1, sizeof(*s));

        if (!s)
                return NULL;
        s->n_ref = 2;
        s->qmp = qmp;
        s->qga = qga;
        return s;
}

static void sync_call_unref(void *userdata) {
        SyncCall *s = userdata;

        if (!s || --s->n_ref > 0)
                return;
        free(s->error_text);
        if (s->owns == OUT_RESULT)
                json_object_put(s->out.result);
        else if (s->owns == OUT_DEVICES)
                qmp_memory_device_list_clear(&s->out.devices);
        else if (s->owns == OUT_FILE)
                free(s->out.file.data);
        free(s);
}

static void sync_record(SyncCall *s, const QmpReply *reply) {
        s->done = true;
        s->error = reply->error;
        if (reply->error != 0)
                s->error_text = strdup(qmp_reply_error_text(reply));
}

/* The body of every typed callback: record the outcome, keep a copy of the value (if the
 * helper produced one) and drop the command's reference. Typed helpers take no destroy
 * function, so this is where that reference goes. If the client is closed or freed
 * silently while such a call waits, it leaks one small SyncCall: acceptable for a
 * tool/test API. */
static void sync_complete(SyncCall *s, const QmpReply *reply, const void *value, size_t size) {
        sync_record(s, reply);
        if (value)
                memcpy(&s->out, value, size);
        sync_call_unref(s);
}

static bool sync_call_finished(void *userdata) {
        SyncCall *s = userdata;

        /* A client closed without telling us (qmp_client_close()) will never call back. */
        return s->done || (s->qmp && qmp_client_is_closed(s->qmp)) || (s->qga && qga_client_is_closed(s->qga));
}

/* Drives the loop after a successful submission (r >= 0), then reports the outcome.
 * Consumes the caller's reference on failure paths; on success the caller reads s->out
 * and then drops its reference. */
static int sync_call_wait(SyncCall *s, int r, char **ret_error) {
        sd_event *e = s->qmp ? qmp_client_get_event(s->qmp) : qga_client_get_event(s->qga);

        if (ret_error)
                *ret_error = NULL;
        if (r < 0) {
                s->n_ref--; /* the command never took its reference */
                if (ret_error)
                        *ret_error = strdup(strerror(-r));
                return r;
        }
        r = run_loop(e, QMP_TIMEOUT_INFINITY, sync_call_finished, s);
        if (r >= 0 && !s->done) {
                r = -ECANCELED;
                if (ret_error)
                        *ret_error = strdup("client closed");
        } else if (r >= 0) {
                r = s->error;
                if (ret_error && s->error_text)
                        *ret_error = TAKE_PTR(s->error_text);
        } else if (ret_error)
                *ret_error = strdup(strerror(-r));
        return r;
}

/* The one "run the loop until this call completes" step of every wrapper: submitted is
 * what the asynchronous call returned; on success the value (size bytes, ret may be NULL)
 * moves to the caller, who then owns whatever it points to. */
static int sync_call_finish(SyncCall *s, int submitted, char **ret_error, void *ret, size_t size) {
        int r = sync_call_wait(s, submitted, ret_error);

        if (r >= 0 && ret) {
                memcpy(ret, &s->out, size);
                s->owns = OUT_NONE;
        }
        sync_call_unref(s);
        return r;
}

/* ---- readiness ---- */

static int ready_result(int r, bool closed, int last_errno) {
        if (r < 0)
                return r;
        if (closed)
                return last_errno < 0 ? last_errno : -ECONNRESET;
        return 0;
}

static bool qmp_ready_or_closed(void *userdata) {
        return qmp_client_is_ready(userdata) || qmp_client_is_closed(userdata);
}

int qmp_sync_wait_ready(QmpClient *c, uint64_t timeout_usec) {
        int r;

        if (!c)
                return -EINVAL;
        r = run_loop(qmp_client_get_event(c), timeout_usec, qmp_ready_or_closed, c);
        return ready_result(r, qmp_client_is_closed(c), qmp_client_get_last_errno(c));
}

static bool qga_ready_or_closed(void *userdata) {
        return qga_client_is_ready(userdata) || qga_client_is_closed(userdata);
}

int qga_sync_wait_ready(QgaClient *c, uint64_t timeout_usec) {
        int r;

        if (!c)
                return -EINVAL;
        r = run_loop(qga_client_get_event(c), timeout_usec, qga_ready_or_closed, c);
        return ready_result(r, qga_client_is_closed(c), qga_client_get_last_errno(c));
}

/* ---- QMP commands ---- */

static void on_plain(QmpClient *c, const QmpReply *reply, void *userdata) {
        SyncCall *s = userdata;

        sync_record(s, reply);
        if (reply->error == 0 && reply->result) {
                s->out.result = json_object_get(reply->result);
                s->owns = OUT_RESULT;
        }
}

int qmp_sync_execute(QmpClient *c,
                     const char *command,
                     json_object *arguments,
                     uint64_t timeout_usec,
                     json_object **ret_result,
                     char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s) {
                json_object_put(arguments);
                return -ENOMEM;
        }
        return sync_call_finish(s,
                                qmp_client_execute_full(c, command, arguments, timeout_usec, on_plain, s, sync_call_unref),
                                ret_error,
                                ret_result,
                                sizeof(*ret_result));
}

static void on_plain_owned(QmpClient *c, const QmpReply *reply, void *userdata) {
        on_plain(c, reply, userdata);
        sync_call_unref(userdata);
}

static void on_balloon_owned(QmpClient *c, const QmpReply *reply, const QmpBalloonInfo *info, void *userdata) {
        sync_complete(userdata, reply, info, sizeof(*info));
}

static void on_u64_owned(QmpClient *c, const QmpReply *reply, uint64_t value, void *userdata) {
        sync_complete(userdata, reply, &value, sizeof(value));
}

static void on_bool_owned(QmpClient *c, const QmpReply *reply, bool value, void *userdata) {
        sync_complete(userdata, reply, &value, sizeof(value));
}

static void on_stats_owned(QmpClient *c, const QmpReply *reply, const QmpGuestStats *stats, void *userdata) {
        sync_complete(userdata, reply, stats, sizeof(*stats));
}

static void on_devices_owned(QmpClient *c, const QmpReply *reply, const QmpMemoryDeviceList *list, void *userdata) {
        SyncCall *s = userdata;
        QmpMemoryDeviceList stolen = {};

        if (list) {
                /* Steal the helper's list (it clears what we leave behind) before the
                 * reference goes: the SyncCall may release it right away. */
                stolen = *list;
                *(QmpMemoryDeviceList *) list = (QmpMemoryDeviceList) {};
                s->owns = OUT_DEVICES;
        }
        sync_complete(s, reply, list ? &stolen : NULL, sizeof(stolen));
}

int qmp_sync_query_balloon(QmpClient *c, uint64_t timeout_usec, QmpBalloonInfo *ret, char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s, qmp_query_balloon(c, timeout_usec, on_balloon_owned, s), ret_error, ret, sizeof(*ret));
}

int qmp_sync_balloon_set_target(QmpClient *c, uint64_t target_bytes, uint64_t timeout_usec, char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s, qmp_balloon_set_target(c, target_bytes, timeout_usec, on_plain_owned, s), ret_error, NULL, 0);
}

int qmp_sync_set_stats_polling_interval(QmpClient *c, const char *qom_path, unsigned seconds, uint64_t timeout_usec, char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s,
                                qmp_set_stats_polling_interval(c, qom_path, seconds, timeout_usec, on_plain_owned, s),
                                ret_error,
                                NULL,
                                0);
}

int qmp_sync_qom_get_u64(QmpClient *c, const char *qom_path, const char *property, uint64_t timeout_usec, uint64_t *ret,
                         char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s,
                                qmp_qom_get_u64(c, qom_path, property, timeout_usec, on_u64_owned, s),
                                ret_error,
                                ret,
                                sizeof(*ret));
}

int qmp_sync_qom_get_bool(QmpClient *c, const char *qom_path, const char *property, uint64_t timeout_usec, bool *ret,
                          char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s,
                                qmp_qom_get_bool(c, qom_path, property, timeout_usec, on_bool_owned, s),
                                ret_error,
                                ret,
                                sizeof(*ret));
}

int qmp_sync_get_guest_stats(QmpClient *c, const char *qom_path, uint64_t timeout_usec, QmpGuestStats *ret, char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s, qmp_get_guest_stats(c, qom_path, timeout_usec, on_stats_owned, s), ret_error, ret, sizeof(*ret));
}

int qmp_sync_query_memory_devices(QmpClient *c, uint64_t timeout_usec, QmpMemoryDeviceList *ret, char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s, qmp_query_memory_devices(c, timeout_usec, on_devices_owned, s), ret_error, ret, sizeof(*ret));
}

int qmp_sync_virtio_mem_set_requested_size(QmpClient *c, const char *id_or_path, uint64_t bytes, uint64_t timeout_usec, char **ret_error) {
        SyncCall *s = sync_call_new(c, NULL);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s,
                                qmp_virtio_mem_set_requested_size(c, id_or_path, bytes, timeout_usec, on_plain_owned, s),
                                ret_error,
                                NULL,
                                0);
}

/* The polling loop of the qmp_sync_wait_*() helpers: check() reads the current state and
 * returns > 0 when the wait is over, 0 to poll again after poll_usec, or an error. */
static int poll_until(QmpClient *c,
                      uint64_t poll_usec,
                      uint64_t timeout_usec,
                      int (*check)(QmpClient *c, void *userdata),
                      void *userdata) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + timeout_usec;
        int r;

        for (;;) {
                r = check(c, userdata);
                if (r != 0)
                        return MIN(r, 0);
                if (now_usec(CLOCK_MONOTONIC) + poll_usec > deadline)
                        return -ETIMEDOUT;
                r = qmp_sync_sleep(qmp_client_get_event(c), poll_usec);
                if (r < 0)
                        return r;
        }
}

typedef struct StatsWait {
        const char *qom_path;
        uint64_t after_last_update;
        QmpGuestStats *ret;
} StatsWait;

static int stats_updated(QmpClient *c, void *userdata) {
        StatsWait *w = userdata;
        int r = qmp_sync_get_guest_stats(c, w->qom_path, QMP_TIMEOUT_DEFAULT, w->ret, NULL);

        if (r < 0)
                return r;
        return w->ret->last_update > w->after_last_update;
}

int qmp_sync_wait_guest_stats_update(QmpClient *c,
                                     const char *qom_path,
                                     uint64_t after_last_update,
                                     uint64_t poll_usec,
                                     uint64_t timeout_usec,
                                     QmpGuestStats *ret) {
        StatsWait w = {
                .qom_path = qom_path,
                .after_last_update = after_last_update,
                .ret = ret,
        };

        return poll_until(c, poll_usec, timeout_usec, stats_updated, &w);
}

typedef struct SizeWait {
        const char *id;
        uint64_t target;
        uint64_t tolerance;
        uint64_t *ret;
} SizeWait;

static int balloon_reached(QmpClient *c, void *userdata) {
        SizeWait *w = userdata;
        QmpBalloonInfo info;
        int r = qmp_sync_query_balloon(c, QMP_TIMEOUT_DEFAULT, &info, NULL);

        if (r < 0)
                return r;
        if (w->ret)
                *w->ret = info.actual;
        return (info.actual > w->target ? info.actual - w->target : w->target - info.actual) <= w->tolerance;
}

int qmp_sync_wait_balloon(QmpClient *c,
                          uint64_t target_bytes,
                          uint64_t tolerance,
                          uint64_t poll_usec,
                          uint64_t timeout_usec,
                          uint64_t *ret_actual) {
        SizeWait w = {
                .target = target_bytes,
                .tolerance = tolerance,
                .ret = ret_actual,
        };

        return poll_until(c, poll_usec, timeout_usec, balloon_reached, &w);
}

static int memory_device_reached(QmpClient *c, void *userdata) {
        SizeWait *w = userdata;
        QmpMemoryDeviceList list;
        const QmpMemoryDevice *d;
        uint64_t size;
        int r = qmp_sync_query_memory_devices(c, QMP_TIMEOUT_DEFAULT, &list, NULL);

        if (r < 0)
                return r;
        d = qmp_memory_device_list_find(&list, w->id);
        size = d ? d->size : 0;
        qmp_memory_device_list_clear(&list);
        if (!d)
                return -ENODEV;
        if (w->ret)
                *w->ret = size;
        return size == w->target;
}

int qmp_sync_wait_memory_device_size(QmpClient *c,
                                     const char *id,
                                     uint64_t bytes,
                                     uint64_t poll_usec,
                                     uint64_t timeout_usec,
                                     uint64_t *ret_size) {
        SizeWait w = {
                .id = id,
                .target = bytes,
                .ret = ret_size,
        };

        if (!id)
                return -EINVAL;
        return poll_until(c, poll_usec, timeout_usec, memory_device_reached, &w);
}

/* ---- event watch ---- */

struct QmpEventWatch {
        QmpClient *client;
        char *name;
        QmpClientCallbacks saved;
        void *saved_userdata;
        json_object **events;
        size_t n_events, n_alloc;
};

static void watch_on_ready(QmpClient *c, void *userdata) {
        QmpEventWatch *w = userdata;

        if (w->saved.ready)
                w->saved.ready(c, w->saved_userdata);
}

static void watch_on_disconnect(QmpClient *c, int error, const char *reason, void *userdata) {
        QmpEventWatch *w = userdata;

        if (w->saved.disconnect)
                w->saved.disconnect(c, error, reason, w->saved_userdata);
}

static void watch_on_event(QmpClient *c, const QmpEvent *event, void *userdata) {
        QmpEventWatch *w = userdata;

        if (!w->name || strcmp(w->name, event->name) == 0) {
                if (w->n_events == w->n_alloc) {
                        size_t n = MAX(w->n_alloc * 2, (size_t) 8);
                        json_object **p = realloc(w->events, n * sizeof(*p));

                        if (p) {
                                w->events = p;
                                w->n_alloc = n;
                        }
                }
                if (w->n_events < w->n_alloc)
                        w->events[w->n_events++] = json_object_get(event->message);
        }
        /* Forward last: the previous callback may free the client. */
        if (w->saved.event)
                w->saved.event(c, event, w->saved_userdata);
}

int qmp_event_watch_new(QmpClient *c, const char *name, QmpEventWatch **ret) {
        static const QmpClientCallbacks watch_callbacks = {
                .ready = watch_on_ready,
                .event = watch_on_event,
                .disconnect = watch_on_disconnect,
        };
        QmpEventWatch *w;

        if (!c || !ret)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->client = qmp_client_ref(c);
        if (name && !(w->name = strdup(name))) {
                qmp_client_unref(c);
                free(w);
                return -ENOMEM;
        }
        qmp_client_get_callbacks(c, &w->saved, &w->saved_userdata);
        qmp_client_set_callbacks(c, &watch_callbacks, w);
        *ret = w;
        return 0;
}

QmpEventWatch *qmp_event_watch_free(QmpEventWatch *w) {
        QmpClientCallbacks current;
        void *current_userdata;

        if (!w)
                return NULL;
        qmp_client_get_callbacks(w->client, &current, &current_userdata);
        if (current_userdata == w)
                qmp_client_set_callbacks(w->client, &w->saved, w->saved_userdata);
        for (size_t i = 0; i < w->n_events; i++)
                json_object_put(w->events[i]);
        free(w->events);
        free(w->name);
        qmp_client_unref(w->client);
        free(w);
        return NULL;
}

size_t qmp_event_watch_count(const QmpEventWatch *w) {
        return w ? w->n_events : 0;
}

static bool watch_has_event(void *userdata) {
        QmpEventWatch *w = userdata;

        return w->n_events > 0 || qmp_client_is_closed(w->client);
}

int qmp_event_watch_next(QmpEventWatch *w, uint64_t timeout_usec, json_object **ret_message) {
        int r;

        if (!w || !ret_message)
                return -EINVAL;
        r = run_loop(qmp_client_get_event(w->client), timeout_usec, watch_has_event, w);
        if (r < 0)
                return r;
        if (w->n_events == 0)
                return -ECONNRESET;
        *ret_message = w->events[0];
        memmove(w->events, w->events + 1, (w->n_events - 1) * sizeof(*w->events));
        w->n_events--;
        return 0;
}

/* ---- guest agent ---- */

static void on_file(QgaClient *c, const QmpReply *reply, const char *data, size_t size, void *userdata) {
        SyncCall *s = userdata;

        sync_record(s, reply);
        if (reply->error == 0) {
                s->out.file.data = malloc(size + 1);
                if (!s->out.file.data) {
                        s->error = -ENOMEM;
                        return;
                }
                memcpy(s->out.file.data, data, size + 1);
                s->out.file.size = size;
                s->owns = OUT_FILE;
        }
}

int qga_sync_read_file(QgaClient *c,
                       const char *path,
                       size_t max_size,
                       uint64_t timeout_usec,
                       char **ret_data,
                       size_t *ret_size,
                       char **ret_error) {
        SyncCall *s = sync_call_new(NULL, c);
        int r;

        if (!s)
                return -ENOMEM;
        r = sync_call_wait(s, qga_read_file_full(c, path, max_size, timeout_usec, on_file, s, sync_call_unref), ret_error);
        if (r >= 0) {
                if (ret_size)
                        *ret_size = s->out.file.size;
                if (ret_data) {
                        *ret_data = TAKE_PTR(s->out.file.data);
                        s->owns = OUT_NONE;
                }
        }
        sync_call_unref(s);
        return r;
}

static void on_vmstat_owned(QgaClient *c, const QmpReply *reply, const GuestVmstat *vmstat, void *userdata) {
        sync_complete(userdata, reply, vmstat, sizeof(*vmstat));
}

static void on_meminfo_owned(QgaClient *c, const QmpReply *reply, const GuestMeminfo *meminfo, void *userdata) {
        sync_complete(userdata, reply, meminfo, sizeof(*meminfo));
}

static void on_psi_owned(QgaClient *c, const QmpReply *reply, const GuestPsi *psi, void *userdata) {
        sync_complete(userdata, reply, psi, sizeof(*psi));
}

int qga_sync_read_vmstat(QgaClient *c, uint64_t timeout_usec, GuestVmstat *ret, char **ret_error) {
        SyncCall *s = sync_call_new(NULL, c);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s, qga_read_vmstat(c, timeout_usec, on_vmstat_owned, s), ret_error, ret, sizeof(*ret));
}

int qga_sync_read_meminfo(QgaClient *c, uint64_t timeout_usec, GuestMeminfo *ret, char **ret_error) {
        SyncCall *s = sync_call_new(NULL, c);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s, qga_read_meminfo(c, timeout_usec, on_meminfo_owned, s), ret_error, ret, sizeof(*ret));
}

int qga_sync_read_psi_memory(QgaClient *c, uint64_t timeout_usec, GuestPsi *ret, char **ret_error) {
        SyncCall *s = sync_call_new(NULL, c);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s, qga_read_psi_memory(c, timeout_usec, on_psi_owned, s), ret_error, ret, sizeof(*ret));
}

static void on_zoneinfo_owned(QgaClient *c, const QmpReply *reply, const GuestZoneinfo *z, void *userdata) {
        sync_complete(userdata, reply, z, sizeof(*z));
}

int qga_sync_read_zoneinfo(QgaClient *c, uint64_t timeout_usec, GuestZoneinfo *ret, char **ret_error) {
        SyncCall *s = sync_call_new(NULL, c);

        if (!s)
                return -ENOMEM;
        return sync_call_finish(s, qga_read_zoneinfo(c, timeout_usec, on_zoneinfo_owned, s), ret_error, ret, sizeof(*ret));
}
