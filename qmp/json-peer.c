/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qmp/json-peer.h"
#include "qmp/json-util.h"
#include "qmp/qmp-client.h"

static void on_stream_connected(JsonStream *s, void *userdata) {
        JsonPeer *p = userdata;

        if (p->state != JSON_PEER_CONNECTING)
                return;
        p->state = JSON_PEER_CONNECTED;
        p->ops->connected(p);
}

static void on_stream_message(JsonStream *s, json_object *message, void *userdata) {
        JsonPeer *p = userdata;

        if (p->state != JSON_PEER_CONNECTED)
                return;
        /* The handler may free the client; keep the memory until it returns. */
        json_peer_ref(p);
        p->ops->message(p, message);
        json_peer_unref(p);
}

static void on_stream_failed(JsonStream *s, int error, const char *reason, void *userdata) {
        json_peer_disconnect(userdata, error, "%s", reason);
}

int json_peer_new(JsonPeer **ret, size_t size, sd_event *event, const JsonPeerOps *ops, uint64_t default_timeout) {
        static const JsonStreamCallbacks stream_callbacks = {
                .connected = on_stream_connected,
                .message = on_stream_message,
                .failed = on_stream_failed,
        };
        JsonPeer *p;
        int r;

        if (!ret)
                return -EINVAL;
        p = calloc(1, MAX(size, sizeof(*p)));
        if (!p)
                return -ENOMEM;
        p->n_ref = 1;
        p->timeout_at = UINT64_MAX;
        p->ops = ops;
        p->default_timeout = default_timeout;
        if (event)
                p->event = sd_event_ref(event);
        else {
                r = sd_event_default(&p->event);
                if (r < 0) {
                        free(p);
                        return r;
                }
        }
        r = json_stream_new(&p->stream, p->event, &stream_callbacks, p);
        if (r < 0) {
                sd_event_unref(p->event);
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

void json_peer_ref(JsonPeer *p) {
        p->n_ref++;
}

void json_peer_unref(JsonPeer *p) {
        if (--p->n_ref > 0)
                return;
        json_peer_shutdown_silently(p);
        p->timeout_timer = sd_event_source_disable_unref(p->timeout_timer);
        json_stream_unref(p->stream);
        sd_event_unref(p->event);
        free(p->last_error);
        free(p); /* the client struct that embeds p */
}

void json_peer_command_free(JsonPeerCommand *cmd) {
        if (!cmd)
                return;
        if (cmd->destroy)
                cmd->destroy(cmd->userdata);
        free(cmd->name);
        free(cmd->request);
        free(cmd);
}

static int on_command_timeout(sd_event_source *s, uint64_t usec, void *userdata);

/* Points the peer's timer at the earliest deadline of its commands, or turns it off. Runs at
 * every link and unlink; the commands of one tick share their deadline (sd_event_now() is the
 * iteration's), so most calls find the timer right already and touch nothing. */
static void peer_arm_timeout(JsonPeer *p) {
        uint64_t at = UINT64_MAX;
        int r;

        for (JsonPeerCommand *cmd = p->commands; cmd; cmd = cmd->next)
                at = MIN(at, cmd->deadline);
        if (at == p->timeout_at)
                return;
        p->timeout_at = at;
        if (at == UINT64_MAX) {
                if (p->timeout_timer)
                        (void) sd_event_source_set_enabled(p->timeout_timer, SD_EVENT_OFF);
                return;
        }
        if (!p->timeout_timer) {
                r = sd_event_add_time(p->event, &p->timeout_timer, CLOCK_MONOTONIC, at, USEC_PER_MSEC,
                                      on_command_timeout, p);
                if (r >= 0) {
                        (void) sd_event_source_set_description(p->timeout_timer, "json-peer-timeout");
                        /* After the sources pending with it: a reply already read in does not
                         * time out because the daemon came late to look at it. */
                        (void) sd_event_source_set_priority(p->timeout_timer, SD_EVENT_PRIORITY_NORMAL + 1);
                }
        } else {
                r = sd_event_source_set_time(p->timeout_timer, at);
                if (r >= 0)
                        r = sd_event_source_set_enabled(p->timeout_timer, SD_EVENT_ONESHOT);
        }
        if (r < 0) {
                /* Tried again at the next link or unlink. */
                p->timeout_at = 0;
                if (p->timeout_timer)
                        (void) sd_event_source_set_enabled(p->timeout_timer, SD_EVENT_OFF);
        }
}

void json_peer_command_link(JsonPeer *p,
                            JsonPeerCommand *cmd,
                            void (*callback)(void),
                            void *userdata,
                            void (*destroy)(void *userdata)) {
        cmd->callback = callback;
        cmd->userdata = userdata;
        cmd->destroy = destroy;
        cmd->prev = p->commands_tail;
        if (p->commands_tail)
                p->commands_tail->next = cmd;
        else
                p->commands = cmd;
        p->commands_tail = cmd;
        p->n_pending++;
        peer_arm_timeout(p);
}

void json_peer_command_unlink(JsonPeer *p, JsonPeerCommand *cmd) {
        if (cmd->prev)
                cmd->prev->next = cmd->next;
        else
                p->commands = cmd->next;
        if (cmd->next)
                cmd->next->prev = cmd->prev;
        else
                p->commands_tail = cmd->prev;
        cmd->prev = cmd->next = NULL;
        p->n_pending--;
        peer_arm_timeout(p);
}

void json_peer_command_finish(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply) {
        /* No timeout may fire for a command whose callback is running: unlinked, it has none. */
        if (!p->silenced && cmd->callback)
                p->ops->deliver(p, cmd, reply);
        json_peer_command_free(cmd);
}

void json_peer_command_complete(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply) {
        json_peer_command_unlink(p, cmd);
        json_peer_command_finish(p, cmd, reply);
}

/* Shared by both ways of closing: the connection and every timer go first, so nothing a
 * callback below does can revive them. */
static void peer_close_connection(JsonPeer *p) {
        p->state = JSON_PEER_CLOSED;
        json_stream_close(p->stream);
        if (p->ops->closed)
                p->ops->closed(p);
}

void json_peer_shutdown_silently(JsonPeer *p) {
        p->silenced = true;
        if (p->last_errno == 0)
                p->last_errno = -ECANCELED;
        if (p->state != JSON_PEER_CLOSED && !p->last_error)
                (void) strdup_replace(&p->last_error, "closed by the client");
        peer_close_connection(p);
        while (p->commands)
                json_peer_command_complete(p, p->commands, NULL);
}

void json_peer_disconnect(JsonPeer *p, int error, const char *format, ...) {
        char reason[512];
        va_list ap;

        if (p->state == JSON_PEER_CLOSED)
                return;
        va_start(ap, format);
        vsnprintf(reason, sizeof(reason), format, ap);
        va_end(ap);

        json_peer_ref(p);
        p->last_errno = error < 0 ? error : -EIO;
        (void) strdup_replace(&p->last_error, reason);
        peer_close_connection(p);
        while (p->commands) {
                QmpReply reply = {
                        .error = -ECONNRESET,
                        .error_desc = reason,
                };
                json_peer_command_complete(p, p->commands, &reply);
        }
        if (!p->silenced && p->ops->disconnected)
                p->ops->disconnected(p, error, reason);
        json_peer_unref(p);
}

int json_peer_connect_path(JsonPeer *p, const char *path) {
        int r;

        if (!path)
                return -EINVAL;
        if (p->state != JSON_PEER_NEW)
                return -EBUSY;
        r = json_stream_connect_path(p->stream, path);
        if (r < 0) {
                char reason[512];

                snprintf(reason, sizeof(reason), "connect to %s failed: %s", path, strerror(-r));
                (void) strdup_replace(&p->last_error, reason);
                p->last_errno = r;
                /* The stream is spent; so is the client. The caller learns why from r. */
                json_peer_shutdown_silently(p);
                return r;
        }
        p->state = JSON_PEER_CONNECTING;
        return 0;
}

int json_peer_connect_fd(JsonPeer *p, int fd) {
        int r;

        if (fd < 0)
                return -EINVAL;
        if (p->state != JSON_PEER_NEW)
                return -EBUSY;
        r = json_stream_attach_fd(p->stream, fd);
        if (r < 0)
                return r;
        p->state = JSON_PEER_CONNECTED;
        return 0;
}

/* Every command whose deadline passed times out, in the order they were sent; a callback may
 * complete or add others, or end the connection, so the list is looked at afresh each time. */
static int on_command_timeout(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        JsonPeer *p = userdata;
        uint64_t now;

        if (sd_event_now(p->event, CLOCK_MONOTONIC, &now) < 0)
                return 0;
        json_peer_ref(p);
        p->timeout_at = UINT64_MAX; /* the timer is off now (oneshot) */
        for (;;) {
                JsonPeerCommand *cmd = p->commands;
                char desc[256];
                QmpReply reply = {
                        .error = -ETIMEDOUT,
                        .error_desc = desc,
                };

                while (cmd && cmd->deadline > now)
                        cmd = cmd->next;
                if (!cmd)
                        break;
                snprintf(desc, sizeof(desc), "%s command '%s' timed out", p->ops->protocol, cmd->name);
                if (p->ops->timed_out)
                        p->ops->timed_out(p, cmd, &reply);
                else
                        json_peer_command_complete(p, cmd, &reply);
        }
        peer_arm_timeout(p);
        json_peer_unref(p);
        return 0;
}

int json_peer_command_new(JsonPeer *p,
                          const char *name,
                          json_object *arguments,
                          const char *id,
                          uint64_t timeout_usec,
                          JsonPeerCommand **ret) {
        _cleanup_(json_object_putp) json_object *request = NULL;
        JsonPeerCommand *cmd;
        const char *text;
        size_t len;
        int r;

        request = json_object_new_object();
        if (!request || json_object_object_add(request, "execute", json_object_new_string(name)) < 0) {
                json_object_put(arguments);
                return -ENOMEM;
        }
        if (arguments && json_object_object_add(request, "arguments", arguments) < 0) {
                json_object_put(arguments);
                return -ENOMEM;
        }
        if (id && json_object_object_add(request, "id", json_object_new_string(id)) < 0)
                return -ENOMEM;

        cmd = calloc(1, sizeof(*cmd));
        if (!cmd)
                return -ENOMEM;
        cmd->peer = p;
        if (id)
                snprintf(cmd->id, sizeof(cmd->id), "%s", id);
        text = json_object_to_json_string_length(request, JSON_C_TO_STRING_PLAIN, &len);
        cmd->name = strdup(name);
        cmd->request = text ? malloc(len + 1) : NULL;
        if (!cmd->name || !cmd->request) {
                json_peer_command_free(cmd);
                return -ENOMEM;
        }
        memcpy(cmd->request, text, len);
        cmd->request[len] = '\n'; /* not required by either protocol, but keeps traces readable */
        cmd->request_len = len + 1;

        if (timeout_usec == QMP_TIMEOUT_DEFAULT)
                timeout_usec = p->default_timeout;
        cmd->deadline = UINT64_MAX;
        if (timeout_usec != QMP_TIMEOUT_INFINITY) {
                uint64_t now;

                r = sd_event_now(p->event, CLOCK_MONOTONIC, &now);
                if (r < 0) {
                        json_peer_command_free(cmd);
                        return r;
                }
                cmd->deadline = timeout_usec > UINT64_MAX - 1 - now ? UINT64_MAX - 1 : now + timeout_usec;
        }
        *ret = cmd;
        return 0;
}

int json_peer_command_write(JsonPeer *p, JsonPeerCommand *cmd) {
        int r = json_stream_write(p->stream, cmd->request, cmd->request_len);

        if (r < 0)
                return r;
        cmd->sent = true;
        free(cmd->request);
        cmd->request = NULL;
        return 0;
}
