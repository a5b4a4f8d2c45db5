/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/macro.h"
#include "qmp/json-stream.h"
#include "qmp/json-util.h"
#include "qmp/qga-client.h"

typedef enum QgaState {
        QGA_NEW,
        QGA_CONNECTING,
        QGA_CONNECTED,
        QGA_CLOSED,
} QgaState;

typedef struct QgaCommand QgaCommand;
struct QgaCommand {
        QgaClient *client;
        QgaCommand *prev, *next;
        char *name;
        char *request;
        size_t request_len;
        sd_event_source *timer;
        qga_reply_fn callback;
        void *userdata;
        qmp_destroy_fn destroy;
};

struct QgaClient {
        unsigned n_ref;
        sd_event *event;
        JsonStream *stream;
        QgaState state;
        bool silenced;

        QgaClientCallbacks callbacks;
        void *userdata;

        uint64_t default_timeout;
        uint64_t sync_timeout;

        bool syncing;
        bool synced_once;
        uint64_t sync_id;
        uint64_t sync_seed;
        uint64_t n_sync_attempts;
        uint64_t n_syncs;
        sd_event_source *sync_timer;

        QgaCommand *queue, *queue_tail; /* FIFO; in_flight, if any, is the head */
        QgaCommand *in_flight;
        size_t n_pending;
        uint64_t n_dropped;

        char *last_error;
        int last_errno;
};

static void on_stream_connected(JsonStream *s, void *userdata);
static void on_stream_message(JsonStream *s, json_object *message, void *userdata);
static void on_stream_failed(JsonStream *s, int error, const char *reason, void *userdata);

static uint64_t random_seed(void) {
        uint32_t seed;

        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
                seed = (uint32_t) time(NULL) ^ (uint32_t) getpid();
        /* Positive and far from overflowing the agent's int. */
        return (seed & 0x3FFFFFFF) + 1;
}

int qga_client_new(QgaClient **ret, sd_event *event) {
        static const JsonStreamCallbacks stream_callbacks = {
                .connected = on_stream_connected,
                .message = on_stream_message,
                .failed = on_stream_failed,
        };
        QgaClient *c;
        int r;

        if (!ret)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->default_timeout = QGA_DEFAULT_COMMAND_TIMEOUT_USEC;
        c->sync_timeout = QGA_DEFAULT_SYNC_TIMEOUT_USEC;
        c->sync_seed = random_seed();
        if (event)
                c->event = sd_event_ref(event);
        else {
                r = sd_event_default(&c->event);
                if (r < 0) {
                        free(c);
                        return r;
                }
        }
        r = json_stream_new(&c->stream, c->event, &stream_callbacks, c);
        if (r < 0) {
                sd_event_unref(c->event);
                free(c);
                return r;
        }
        *ret = c;
        return 0;
}

static void command_free(QgaCommand *cmd) {
        if (!cmd)
                return;
        cmd->timer = sd_event_source_disable_unref(cmd->timer);
        if (cmd->destroy)
                cmd->destroy(cmd->userdata);
        free(cmd->name);
        free(cmd->request);
        free(cmd);
}

static void command_unlink(QgaClient *c, QgaCommand *cmd) {
        if (cmd->prev)
                cmd->prev->next = cmd->next;
        else
                c->queue = cmd->next;
        if (cmd->next)
                cmd->next->prev = cmd->prev;
        else
                c->queue_tail = cmd->prev;
        cmd->prev = cmd->next = NULL;
        if (c->in_flight == cmd)
                c->in_flight = NULL;
        c->n_pending--;
}

static void command_complete(QgaClient *c, QgaCommand *cmd, const QmpReply *reply) {
        command_unlink(c, cmd);
        cmd->timer = sd_event_source_disable_unref(cmd->timer);
        if (!c->silenced && cmd->callback)
                cmd->callback(c, reply, cmd->userdata);
        command_free(cmd);
}

static void client_shutdown_silently(QgaClient *c) {
        c->silenced = true;
        if (c->last_errno == 0)
                c->last_errno = -ECANCELED;
        if (c->state != QGA_CLOSED && !c->last_error)
                (void) strdup_replace(&c->last_error, "closed by the client");
        c->state = QGA_CLOSED;
        json_stream_close(c->stream);
        c->sync_timer = sd_event_source_disable_unref(c->sync_timer);
        while (c->queue)
                command_complete(c, c->queue, NULL);
}

static void client_release(QgaClient *c) {
        client_shutdown_silently(c);
        json_stream_unref(c->stream);
        sd_event_unref(c->event);
        free(c->last_error);
        free(c);
}

QgaClient *qga_client_ref(QgaClient *c) {
        if (c)
                c->n_ref++;
        return c;
}

QgaClient *qga_client_unref(QgaClient *c) {
        if (c && --c->n_ref == 0)
                client_release(c);
        return NULL;
}

void qga_client_close(QgaClient *c) {
        if (c)
                client_shutdown_silently(c);
}

QgaClient *qga_client_free(QgaClient *c) {
        if (!c)
                return NULL;
        client_shutdown_silently(c);
        return qga_client_unref(c);
}

_printf_(3, 4) static void client_disconnect(QgaClient *c, int error, const char *format, ...) {
        char reason[512];
        va_list ap;

        if (c->state == QGA_CLOSED)
                return;
        va_start(ap, format);
        vsnprintf(reason, sizeof(reason), format, ap);
        va_end(ap);

        qga_client_ref(c);
        c->state = QGA_CLOSED;
        c->last_errno = error < 0 ? error : -EIO;
        (void) strdup_replace(&c->last_error, reason);
        json_stream_close(c->stream);
        c->sync_timer = sd_event_source_disable_unref(c->sync_timer);
        while (c->queue) {
                QmpReply reply = {
                        .error = -ECONNRESET,
                        .error_desc = reason,
                };
                command_complete(c, c->queue, &reply);
        }
        if (!c->silenced && c->callbacks.disconnect)
                c->callbacks.disconnect(c, error, reason, c->userdata);
        qga_client_unref(c);
}

void qga_client_set_callbacks(QgaClient *c, const QgaClientCallbacks *callbacks, void *userdata) {
        c->callbacks = callbacks ? *callbacks : (QgaClientCallbacks) {};
        c->userdata = userdata;
}

int qga_client_set_max_message_size(QgaClient *c, size_t bytes) {
        return json_stream_set_max_message_size(c->stream, bytes);
}

int qga_client_set_max_depth(QgaClient *c, int depth) {
        return json_stream_set_max_depth(c->stream, depth);
}

void qga_client_set_default_timeout(QgaClient *c, uint64_t usec) {
        c->default_timeout = usec > 0 ? usec : QGA_DEFAULT_COMMAND_TIMEOUT_USEC;
}

void qga_client_set_sync_timeout(QgaClient *c, uint64_t usec) {
        c->sync_timeout = usec > 0 ? usec : QGA_DEFAULT_SYNC_TIMEOUT_USEC;
}

static int start_sync(QgaClient *c);

static int on_sync_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        QgaClient *c = userdata;
        int r;

        /* The agent may not be running yet (the chardev accepts connections regardless):
         * keep asking. Queued commands still time out on their own. */
        c->sync_timer = sd_event_source_disable_unref(c->sync_timer);
        r = start_sync(c);
        if (r < 0)
                client_disconnect(c, r, "cannot send guest-sync-delimited: %s", strerror(-r));
        return 0;
}

static int start_sync(QgaClient *c) {
        char request[128];
        int n, r;

        c->syncing = true;
        c->sync_id = c->sync_seed + c->n_sync_attempts++;
        n = snprintf(request,
                     sizeof(request),
                     "{\"execute\":\"guest-sync-delimited\",\"arguments\":{\"id\":%" PRIu64 "}}\n",
                     c->sync_id);

        /* The leading 0xFF makes the agent drop any half-parsed input of ours. */
        r = json_stream_write(c->stream, "\xff", 1);
        if (r >= 0)
                r = json_stream_write(c->stream, request, (size_t) n);
        if (r < 0)
                return r;
        json_stream_discard_until_sync_byte(c->stream);

        c->sync_timer = sd_event_source_disable_unref(c->sync_timer);
        return sd_event_add_time_relative(c->event,
                                          &c->sync_timer,
                                          CLOCK_MONOTONIC,
                                          c->sync_timeout,
                                          USEC_PER_MSEC,
                                          on_sync_timeout,
                                          c);
}

/* Sends the next queued command if the line is free. Never runs callbacks. */
static int dispatch_next(QgaClient *c) {
        QgaCommand *cmd = c->queue;
        int r;

        if (c->state != QGA_CONNECTED || c->syncing || c->in_flight || !cmd)
                return 0;
        r = json_stream_write(c->stream, cmd->request, cmd->request_len);
        if (r < 0)
                return r;
        free(cmd->request);
        cmd->request = NULL;
        c->in_flight = cmd;
        return 0;
}

/* From loop context, where callbacks are allowed: a failed send ends the connection. */
static void dispatch_next_or_disconnect(QgaClient *c) {
        int r = dispatch_next(c);

        if (r < 0)
                client_disconnect(c, r, "cannot send to the guest agent: %s", strerror(-r));
}

static void begin_session(QgaClient *c) {
        int r;

        c->state = QGA_CONNECTED;
        r = start_sync(c);
        if (r < 0)
                client_disconnect(c, r, "cannot send guest-sync-delimited: %s", strerror(-r));
}

int qga_client_connect_path(QgaClient *c, const char *path) {
        int r;

        if (!c || !path)
                return -EINVAL;
        if (c->state != QGA_NEW)
                return -EBUSY;
        r = json_stream_connect_path(c->stream, path);
        if (r < 0) {
                char reason[512];

                snprintf(reason, sizeof(reason), "connect to %s failed: %s", path, strerror(-r));
                (void) strdup_replace(&c->last_error, reason);
                c->last_errno = r;
                client_shutdown_silently(c);
                return r;
        }
        c->state = QGA_CONNECTING;
        return 0;
}

int qga_client_connect_fd(QgaClient *c, int fd) {
        int r;

        if (!c || fd < 0)
                return -EINVAL;
        if (c->state != QGA_NEW)
                return -EBUSY;
        r = json_stream_attach_fd(c->stream, fd);
        if (r < 0)
                return r;
        c->state = QGA_CONNECTED;
        r = start_sync(c);
        if (r < 0) {
                /* The stream owns fd now; leave a clean closed client behind. */
                client_shutdown_silently(c);
                return r;
        }
        return 0;
}

static int on_command_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        QgaCommand *cmd = userdata;
        QgaClient *c = qga_client_ref(cmd->client);
        bool was_in_flight = c->in_flight == cmd;
        char desc[256];
        QmpReply reply = {
                .error = -ETIMEDOUT,
                .error_desc = desc,
        };
        int r = 0;

        snprintf(desc, sizeof(desc), "guest agent command '%s' timed out", cmd->name);
        command_unlink(c, cmd);
        cmd->timer = sd_event_source_disable_unref(cmd->timer);
        /* Its reply may still come: resync before anything else can be sent, so the late
         * reply is never taken for the answer to the next command, not even one queued
         * from the callback below. */
        if (was_in_flight)
                r = start_sync(c);
        if (!c->silenced && cmd->callback)
                cmd->callback(c, &reply, cmd->userdata);
        command_free(cmd);
        if (r < 0)
                client_disconnect(c, r, "cannot send guest-sync-delimited: %s", strerror(-r));
        else
                dispatch_next_or_disconnect(c);
        qga_client_unref(c);
        return 0;
}

int qga_client_execute_full(QgaClient *c,
                            const char *command,
                            json_object *arguments,
                            uint64_t timeout_usec,
                            qga_reply_fn callback,
                            void *userdata,
                            qmp_destroy_fn destroy) {
        _cleanup_(json_object_putp) json_object *request = NULL;
        QgaCommand *cmd;
        const char *text;
        size_t len;
        int r;

        if (!c || !command) {
                json_object_put(arguments);
                return -EINVAL;
        }
        if (c->state == QGA_CLOSED) {
                json_object_put(arguments);
                return -ENOTCONN;
        }
        request = json_object_new_object();
        if (!request || json_object_object_add(request, "execute", json_object_new_string(command)) < 0) {
                json_object_put(arguments);
                return -ENOMEM;
        }
        if (arguments && json_object_object_add(request, "arguments", arguments) < 0)
                return -ENOMEM;

        cmd = calloc(1, sizeof(*cmd));
        if (!cmd)
                return -ENOMEM;
        cmd->client = c;
        text = json_object_to_json_string_length(request, JSON_C_TO_STRING_PLAIN, &len);
        cmd->name = strdup(command);
        cmd->request = text ? malloc(len + 1) : NULL;
        if (!cmd->name || !cmd->request) {
                command_free(cmd);
                return -ENOMEM;
        }
        memcpy(cmd->request, text, len);
        cmd->request[len] = '\n';
        cmd->request_len = len + 1;

        if (timeout_usec == QMP_TIMEOUT_DEFAULT)
                timeout_usec = c->default_timeout;
        if (timeout_usec != QMP_TIMEOUT_INFINITY) {
                r = sd_event_add_time_relative(c->event,
                                               &cmd->timer,
                                               CLOCK_MONOTONIC,
                                               timeout_usec,
                                               USEC_PER_MSEC,
                                               on_command_timeout,
                                               cmd);
                if (r < 0) {
                        command_free(cmd);
                        return r;
                }
        }

        cmd->callback = callback;
        cmd->userdata = userdata;
        cmd->destroy = destroy;
        cmd->prev = c->queue_tail;
        if (c->queue_tail)
                c->queue_tail->next = cmd;
        else
                c->queue = cmd;
        c->queue_tail = cmd;
        c->n_pending++;

        r = dispatch_next(c);
        if (r < 0) {
                /* Not accepted: the caller gets r and neither callback nor destroy. */
                cmd->destroy = NULL;
                command_unlink(c, cmd);
                command_free(cmd);
                return r;
        }
        return 0;
}

static bool is_our_sync_reply(QgaClient *c, json_object *message) {
        QmpReply reply;
        uint64_t id;

        if (qmp_reply_from_message(message, &reply) < 0 || reply.error != 0)
                return false;
        return json_value_get_u64(reply.result, &id) >= 0 && id == c->sync_id;
}

static void handle_sync_message(QgaClient *c, json_object *message) {
        if (!is_our_sync_reply(c, message)) {
                /* A stale sync reply (from an attempt that timed out) or leftovers: our
                 * reply comes after its own 0xFF. */
                c->n_dropped++;
                json_stream_discard_until_sync_byte(c->stream);
                return;
        }
        c->syncing = false;
        c->n_syncs++;
        c->sync_timer = sd_event_source_disable_unref(c->sync_timer);

        if (!c->synced_once) {
                c->synced_once = true;
                if (!c->silenced && c->callbacks.ready)
                        c->callbacks.ready(c, c->userdata);
        }
        dispatch_next_or_disconnect(c);
}

static void on_stream_message(JsonStream *s, json_object *message, void *userdata) {
        QgaClient *c = qga_client_ref(userdata);
        QmpReply reply;

        if (c->state != QGA_CONNECTED)
                goto out;
        if (c->syncing)
                handle_sync_message(c, message);
        else if (!c->in_flight || qmp_reply_from_message(message, &reply) < 0)
                c->n_dropped++;
        else {
                command_complete(c, c->in_flight, &reply);
                dispatch_next_or_disconnect(c);
        }
out:
        qga_client_unref(c);
}

static void on_stream_connected(JsonStream *s, void *userdata) {
        QgaClient *c = userdata;

        if (c->state == QGA_CONNECTING)
                begin_session(c);
}

static void on_stream_failed(JsonStream *s, int error, const char *reason, void *userdata) {
        client_disconnect(userdata, error, "%s", reason);
}

bool qga_client_is_ready(const QgaClient *c) {
        return c && c->state == QGA_CONNECTED && c->synced_once;
}

bool qga_client_is_closed(const QgaClient *c) {
        return !c || c->state == QGA_CLOSED;
}

int qga_client_get_last_errno(const QgaClient *c) {
        return c ? c->last_errno : 0;
}

const char *qga_client_get_last_error(const QgaClient *c) {
        return c ? c->last_error : NULL;
}

sd_event *qga_client_get_event(const QgaClient *c) {
        return c ? c->event : NULL;
}

size_t qga_client_get_n_pending(const QgaClient *c) {
        return c ? c->n_pending : 0;
}

uint64_t qga_client_get_n_dropped(const QgaClient *c) {
        return c ? c->n_dropped : 0;
}

uint64_t qga_client_get_n_syncs(const QgaClient *c) {
        return c ? c->n_syncs : 0;
}
