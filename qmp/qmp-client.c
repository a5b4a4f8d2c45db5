/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "qmp/json-stream.h"
#include "qmp/json-util.h"
#include "qmp/qmp-client.h"
#include "qmp/qmp-events.h"

typedef enum ClientState {
        CLIENT_NEW,
        CLIENT_CONNECTING,
        CLIENT_GREETING,    /* connected, waiting for {"QMP": ...} */
        CLIENT_NEGOTIATING, /* qmp_capabilities sent */
        CLIENT_READY,
        CLIENT_CLOSED,
} ClientState;

typedef struct Command Command;
struct Command {
        QmpClient *client;
        Command *prev, *next;
        char id[32];
        char *name;
        char *request; /* serialised request, until written */
        size_t request_len;
        bool sent;
        bool internal; /* part of the handshake: written before queued user commands */
        sd_event_source *timer;
        qmp_reply_fn callback;
        void *userdata;
        qmp_destroy_fn destroy;
};

struct QmpClient {
        unsigned n_ref;
        sd_event *event;
        JsonStream *stream;
        ClientState state;
        /* Set by qmp_client_close()/free(): the user is gone, so no more callbacks. */
        bool silenced;

        QmpClientCallbacks callbacks;
        void *userdata;

        uint64_t default_timeout;
        uint64_t handshake_timeout;
        sd_event_source *handshake_timer;

        Command *commands, *commands_tail; /* in submission order */
        size_t n_pending;
        uint64_t next_id;
        uint64_t n_dropped;

        char *last_error;
        int last_errno;
        bool have_version;
        unsigned version[3];
};

static void on_stream_connected(JsonStream *s, void *userdata);
static void on_stream_message(JsonStream *s, json_object *message, void *userdata);
static void on_stream_failed(JsonStream *s, int error, const char *reason, void *userdata);

int qmp_client_new(QmpClient **ret, sd_event *event) {
        static const JsonStreamCallbacks stream_callbacks = {
                .connected = on_stream_connected,
                .message = on_stream_message,
                .failed = on_stream_failed,
        };
        QmpClient *c;
        int r;

        if (!ret)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->default_timeout = QMP_DEFAULT_COMMAND_TIMEOUT_USEC;
        c->handshake_timeout = QMP_DEFAULT_HANDSHAKE_TIMEOUT_USEC;
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

static void command_free(Command *cmd) {
        if (!cmd)
                return;
        cmd->timer = sd_event_source_disable_unref(cmd->timer);
        if (cmd->destroy)
                cmd->destroy(cmd->userdata);
        free(cmd->name);
        free(cmd->request);
        free(cmd);
}

static void command_unlink(QmpClient *c, Command *cmd) {
        if (cmd->prev)
                cmd->prev->next = cmd->next;
        else
                c->commands = cmd->next;
        if (cmd->next)
                cmd->next->prev = cmd->prev;
        else
                c->commands_tail = cmd->prev;
        cmd->prev = cmd->next = NULL;
        c->n_pending--;
}

static void command_link(QmpClient *c, Command *cmd) {
        cmd->prev = c->commands_tail;
        if (c->commands_tail)
                c->commands_tail->next = cmd;
        else
                c->commands = cmd;
        c->commands_tail = cmd;
        c->n_pending++;
}

/* Unlinks, runs the callback (unless the user is gone) and frees. */
static void command_complete(QmpClient *c, Command *cmd, const QmpReply *reply) {
        command_unlink(c, cmd);
        cmd->timer = sd_event_source_disable_unref(cmd->timer);
        if (!c->silenced && cmd->callback)
                cmd->callback(c, reply, cmd->userdata);
        command_free(cmd);
}

static void set_last_error(QmpClient *c, const char *reason) {
        (void) strdup_replace(&c->last_error, reason);
}

static void client_shutdown_silently(QmpClient *c) {
        c->silenced = true;
        if (c->last_errno == 0)
                c->last_errno = -ECANCELED;
        if (c->state != CLIENT_CLOSED && !c->last_error)
                set_last_error(c, "closed by the client");
        c->state = CLIENT_CLOSED;
        json_stream_close(c->stream);
        c->handshake_timer = sd_event_source_disable_unref(c->handshake_timer);
        while (c->commands)
                command_complete(c, c->commands, NULL);
}

static void client_release(QmpClient *c) {
        client_shutdown_silently(c);
        json_stream_unref(c->stream);
        sd_event_unref(c->event);
        free(c->last_error);
        free(c);
}

QmpClient *qmp_client_ref(QmpClient *c) {
        if (c)
                c->n_ref++;
        return c;
}

QmpClient *qmp_client_unref(QmpClient *c) {
        if (c && --c->n_ref == 0)
                client_release(c);
        return NULL;
}

void qmp_client_close(QmpClient *c) {
        if (c)
                client_shutdown_silently(c);
}

QmpClient *qmp_client_free(QmpClient *c) {
        if (!c)
                return NULL;
        client_shutdown_silently(c);
        return qmp_client_unref(c);
}

/* Ends the connection for a reason the user did not ask for: every pending command fails
 * with -ECONNRESET, then the disconnect callback runs once. */
_printf_(3, 4) static void client_disconnect(QmpClient *c, int error, const char *format, ...) {
        char reason[512];
        va_list ap;

        if (c->state == CLIENT_CLOSED)
                return;
        va_start(ap, format);
        vsnprintf(reason, sizeof(reason), format, ap);
        va_end(ap);

        qmp_client_ref(c);
        c->state = CLIENT_CLOSED;
        c->last_errno = error < 0 ? error : -EIO;
        set_last_error(c, reason);
        json_stream_close(c->stream);
        c->handshake_timer = sd_event_source_disable_unref(c->handshake_timer);

        while (c->commands) {
                QmpReply reply = {
                        .error = -ECONNRESET,
                        .error_desc = reason,
                };
                command_complete(c, c->commands, &reply);
        }
        if (!c->silenced && c->callbacks.disconnect)
                c->callbacks.disconnect(c, error, reason, c->userdata);
        qmp_client_unref(c);
}

void qmp_client_set_callbacks(QmpClient *c, const QmpClientCallbacks *callbacks, void *userdata) {
        c->callbacks = callbacks ? *callbacks : (QmpClientCallbacks) {};
        c->userdata = userdata;
}

void qmp_client_get_callbacks(QmpClient *c, QmpClientCallbacks *ret_callbacks, void **ret_userdata) {
        if (ret_callbacks)
                *ret_callbacks = c->callbacks;
        if (ret_userdata)
                *ret_userdata = c->userdata;
}

int qmp_client_set_max_message_size(QmpClient *c, size_t bytes) {
        return json_stream_set_max_message_size(c->stream, bytes);
}

int qmp_client_set_max_depth(QmpClient *c, int depth) {
        return json_stream_set_max_depth(c->stream, depth);
}

void qmp_client_set_default_timeout(QmpClient *c, uint64_t usec) {
        c->default_timeout = usec > 0 ? usec : QMP_DEFAULT_COMMAND_TIMEOUT_USEC;
}

void qmp_client_set_handshake_timeout(QmpClient *c, uint64_t usec) {
        c->handshake_timeout = usec > 0 ? usec : QMP_DEFAULT_HANDSHAKE_TIMEOUT_USEC;
}

static int on_handshake_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        QmpClient *c = userdata;

        client_disconnect(c,
                          -ETIMEDOUT,
                          "no QMP greeting and capabilities reply within %" PRIu64 " ms",
                          c->handshake_timeout / USEC_PER_MSEC);
        return 0;
}

static int start_handshake_timer(QmpClient *c) {
        if (c->handshake_timeout == QMP_TIMEOUT_INFINITY)
                return 0;
        return sd_event_add_time_relative(c->event,
                                          &c->handshake_timer,
                                          CLOCK_MONOTONIC,
                                          c->handshake_timeout,
                                          USEC_PER_MSEC,
                                          on_handshake_timeout,
                                          c);
}

int qmp_client_connect_path(QmpClient *c, const char *path) {
        int r;

        if (!c || !path)
                return -EINVAL;
        if (c->state != CLIENT_NEW)
                return -EBUSY;

        r = json_stream_connect_path(c->stream, path);
        if (r < 0) {
                char reason[512];

                snprintf(reason, sizeof(reason), "connect to %s failed: %s", path, strerror(-r));
                set_last_error(c, reason);
                c->last_errno = r;
                /* The stream is spent; so is the client. The caller learns why from r. */
                client_shutdown_silently(c);
                return r;
        }
        c->state = CLIENT_CONNECTING;
        r = start_handshake_timer(c);
        if (r < 0) {
                json_stream_close(c->stream);
                c->state = CLIENT_CLOSED;
                return r;
        }
        return 0;
}

int qmp_client_connect_fd(QmpClient *c, int fd) {
        int r;

        if (!c || fd < 0)
                return -EINVAL;
        if (c->state != CLIENT_NEW)
                return -EBUSY;

        r = start_handshake_timer(c);
        if (r < 0)
                return r;
        r = json_stream_attach_fd(c->stream, fd);
        if (r < 0) {
                c->handshake_timer = sd_event_source_disable_unref(c->handshake_timer);
                return r;
        }
        c->state = CLIENT_GREETING;
        return 0;
}

static int on_command_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        Command *cmd = userdata;
        QmpClient *c = qmp_client_ref(cmd->client);
        char desc[256];
        QmpReply reply = {
                .error = -ETIMEDOUT,
                .error_desc = desc,
        };

        snprintf(desc, sizeof(desc), "QMP command '%s' timed out", cmd->name);
        /* A reply arriving later finds no command with this id and is dropped. */
        command_complete(c, cmd, &reply);
        qmp_client_unref(c);
        return 0;
}

static int command_write(QmpClient *c, Command *cmd) {
        int r = json_stream_write(c->stream, cmd->request, cmd->request_len);

        if (r < 0)
                return r;
        cmd->sent = true;
        free(cmd->request);
        cmd->request = NULL;
        return 0;
}

static int command_submit(QmpClient *c,
                          const char *name,
                          json_object *arguments,
                          uint64_t timeout_usec,
                          bool internal,
                          qmp_reply_fn callback,
                          void *userdata,
                          qmp_destroy_fn destroy) {
        _cleanup_(json_object_putp) json_object *request = NULL;
        Command *cmd;
        const char *text;
        size_t len;
        int r;

        request = json_object_new_object();
        if (!request) {
                json_object_put(arguments);
                return -ENOMEM;
        }
        cmd = calloc(1, sizeof(*cmd));
        if (!cmd) {
                json_object_put(arguments);
                return -ENOMEM;
        }
        cmd->client = c;
        cmd->internal = internal;
        snprintf(cmd->id, sizeof(cmd->id), "rs-%" PRIu64, c->next_id++);

        if (json_object_object_add(request, "execute", json_object_new_string(name)) < 0 ||
            (arguments && json_object_object_add(request, "arguments", TAKE_PTR(arguments)) < 0) ||
            json_object_object_add(request, "id", json_object_new_string(cmd->id)) < 0) {
                json_object_put(arguments);
                command_free(cmd);
                return -ENOMEM;
        }
        text = json_object_to_json_string_length(request, JSON_C_TO_STRING_PLAIN, &len);
        cmd->name = strdup(name);
        cmd->request = text ? malloc(len + 1) : NULL;
        if (!cmd->name || !cmd->request) {
                command_free(cmd);
                return -ENOMEM;
        }
        memcpy(cmd->request, text, len);
        cmd->request[len] = '\n'; /* not required by QMP, but keeps traces readable */
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

        if (internal || c->state == CLIENT_READY) {
                r = command_write(c, cmd);
                if (r < 0) {
                        command_free(cmd);
                        return r;
                }
        }

        /* Only now does the command own userdata: failures above must not destroy it. */
        cmd->callback = callback;
        cmd->userdata = userdata;
        cmd->destroy = destroy;
        command_link(c, cmd);
        return 0;
}

int qmp_client_execute_full(QmpClient *c,
                            const char *command,
                            json_object *arguments,
                            uint64_t timeout_usec,
                            qmp_reply_fn callback,
                            void *userdata,
                            qmp_destroy_fn destroy) {
        if (!c || !command) {
                json_object_put(arguments);
                return -EINVAL;
        }
        if (c->state == CLIENT_CLOSED) {
                json_object_put(arguments);
                return -ENOTCONN;
        }
        return command_submit(c, command, arguments, timeout_usec, false, callback, userdata, destroy);
}

static void on_capabilities_reply(QmpClient *c, const QmpReply *reply, void *userdata) {
        int r;

        if (reply->error == -ECONNRESET)
                return; /* client_disconnect() is already reporting why */
        if (reply->error != 0) {
                client_disconnect(c, -EPROTO, "qmp_capabilities failed: %s", qmp_reply_error_text(reply));
                return;
        }

        c->state = CLIENT_READY;
        c->handshake_timer = sd_event_source_disable_unref(c->handshake_timer);
        for (Command *cmd = c->commands; cmd; cmd = cmd->next) {
                if (cmd->sent)
                        continue;
                r = command_write(c, cmd);
                if (r < 0) {
                        client_disconnect(c, r, "cannot queue commands: %s", strerror(-r));
                        return;
                }
        }
        if (c->callbacks.ready)
                c->callbacks.ready(c, c->userdata);
}

static void handle_greeting(QmpClient *c, json_object *message) {
        json_object *qmp, *version;
        uint64_t v[3];
        int r;

        if (json_member_get_object(message, "QMP", &qmp) < 0) {
                client_disconnect(c, -EPROTO, "peer did not send a QMP greeting (is this a QMP socket?)");
                return;
        }
        /* The version is informational: tolerate its absence or odd shapes. */
        if (json_member_get_object(qmp, "version", &version) >= 0 &&
            json_member_get_object(version, "qemu", &version) >= 0 &&
            json_member_get_u64(version, "major", &v[0]) >= 0 && json_member_get_u64(version, "minor", &v[1]) >= 0 &&
            json_member_get_u64(version, "micro", &v[2]) >= 0 && v[0] <= UINT32_MAX && v[1] <= UINT32_MAX &&
            v[2] <= UINT32_MAX) {
                c->have_version = true;
                for (size_t i = 0; i < 3; i++)
                        c->version[i] = (unsigned) v[i];
        }

        c->state = CLIENT_NEGOTIATING;
        r = command_submit(c, "qmp_capabilities", NULL, QMP_TIMEOUT_INFINITY, true, on_capabilities_reply, NULL, NULL);
        if (r < 0)
                client_disconnect(c, r, "cannot send qmp_capabilities: %s", strerror(-r));
}

static void handle_event(QmpClient *c, json_object *message) {
        QmpEvent event;

        if (qmp_event_from_message(message, &event) < 0) {
                c->n_dropped++;
                return;
        }
        if (c->callbacks.event)
                c->callbacks.event(c, &event, c->userdata);
}

static void handle_reply(QmpClient *c, json_object *message) {
        const char *id;
        QmpReply reply;

        if (json_member_get_string(message, "id", &id) < 0) {
                c->n_dropped++;
                return;
        }
        for (Command *cmd = c->commands; cmd; cmd = cmd->next)
                if (cmd->sent && strcmp(cmd->id, id) == 0) {
                        (void) qmp_reply_from_message(message, &reply);
                        command_complete(c, cmd, &reply);
                        return;
                }
        c->n_dropped++;
}

static void on_stream_connected(JsonStream *s, void *userdata) {
        QmpClient *c = userdata;

        if (c->state == CLIENT_CONNECTING)
                c->state = CLIENT_GREETING;
}

static void on_stream_message(JsonStream *s, json_object *message, void *userdata) {
        QmpClient *c = qmp_client_ref(userdata);

        if (!json_object_is_type(message, json_type_object))
                client_disconnect(c, -EBADMSG, "peer sent a JSON value that is not an object");
        else if (c->state == CLIENT_GREETING)
                handle_greeting(c, message);
        else if (json_object_object_get_ex(message, "event", NULL))
                handle_event(c, message);
        else if (json_object_object_get_ex(message, "return", NULL) || json_object_object_get_ex(message, "error", NULL))
                handle_reply(c, message);
        else
                c->n_dropped++;
        qmp_client_unref(c);
}

static void on_stream_failed(JsonStream *s, int error, const char *reason, void *userdata) {
        client_disconnect(userdata, error, "%s", reason);
}

bool qmp_client_is_ready(const QmpClient *c) {
        return c && c->state == CLIENT_READY;
}

bool qmp_client_is_closed(const QmpClient *c) {
        return !c || c->state == CLIENT_CLOSED;
}

int qmp_client_get_last_errno(const QmpClient *c) {
        return c ? c->last_errno : 0;
}

const char *qmp_client_get_last_error(const QmpClient *c) {
        return c ? c->last_error : NULL;
}

int qmp_client_get_qemu_version(const QmpClient *c, unsigned *major, unsigned *minor, unsigned *micro) {
        if (!c || !c->have_version)
                return -ENODATA;
        if (major)
                *major = c->version[0];
        if (minor)
                *minor = c->version[1];
        if (micro)
                *micro = c->version[2];
        return 0;
}

sd_event *qmp_client_get_event(const QmpClient *c) {
        return c ? c->event : NULL;
}

size_t qmp_client_get_n_pending(const QmpClient *c) {
        return c ? c->n_pending : 0;
}

uint64_t qmp_client_get_n_dropped(const QmpClient *c) {
        return c ? c->n_dropped : 0;
}
