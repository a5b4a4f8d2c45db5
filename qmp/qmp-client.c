/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "qmp/json-peer.h"
#include "qmp/json-util.h"
#include "qmp/qmp-client.h"
#include "qmp/qmp-events.h"

/* Where the handshake is, once the peer is connected. */
typedef enum QmpPhase {
        QMP_PHASE_GREETING,    /* waiting for {"QMP": ...} */
        QMP_PHASE_NEGOTIATING, /* qmp_capabilities sent */
        QMP_PHASE_READY,
} QmpPhase;

struct QmpClient {
        JsonPeer peer; /* first: the client is the peer's allocation */
        QmpPhase phase;

        QmpClientCallbacks callbacks;
        void *userdata;

        uint64_t handshake_timeout;
        sd_event_source *handshake_timer;
        uint64_t next_id;

        bool have_version;
        unsigned version[3];
};

static QmpClient *client_of(JsonPeer *p) {
        return (QmpClient *) p;
}

static void client_connected(JsonPeer *p);
static void client_message(JsonPeer *p, json_object *message);

static void client_deliver(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply) {
        ((qmp_reply_fn) cmd->callback)(client_of(p), reply, cmd->userdata);
}

static void client_closed(JsonPeer *p) {
        QmpClient *c = client_of(p);

        c->handshake_timer = sd_event_source_disable_unref(c->handshake_timer);
}

static void client_disconnected(JsonPeer *p, int error, const char *reason) {
        QmpClient *c = client_of(p);

        if (c->callbacks.disconnect)
                c->callbacks.disconnect(c, error, reason, c->userdata);
}

static const JsonPeerOps client_ops = {
        .protocol = "QMP",
        .connected = client_connected,
        .message = client_message,
        .deliver = client_deliver,
        .closed = client_closed,
        .disconnected = client_disconnected,
};

int qmp_client_new(QmpClient **ret, sd_event *event) {
        JsonPeer *p;
        int r;

        if (!ret)
                return -EINVAL;
        r = json_peer_new(&p, sizeof(QmpClient), event, &client_ops, QMP_DEFAULT_COMMAND_TIMEOUT_USEC);
        if (r < 0)
                return r;
        *ret = client_of(p);
        (*ret)->handshake_timeout = QMP_DEFAULT_HANDSHAKE_TIMEOUT_USEC;
        return 0;
}

JSON_PEER_DEFINE_CLIENT_FUNCTIONS(qmp_client, QmpClient)

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

void qmp_client_set_default_timeout(QmpClient *c, uint64_t usec) {
        c->peer.default_timeout = usec > 0 ? usec : QMP_DEFAULT_COMMAND_TIMEOUT_USEC;
}

void qmp_client_set_handshake_timeout(QmpClient *c, uint64_t usec) {
        c->handshake_timeout = usec > 0 ? usec : QMP_DEFAULT_HANDSHAKE_TIMEOUT_USEC;
}

static int on_handshake_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        QmpClient *c = userdata;

        json_peer_disconnect(&c->peer,
                             -ETIMEDOUT,
                             "no QMP greeting and capabilities reply within %" PRIu64 " ms",
                             c->handshake_timeout / USEC_PER_MSEC);
        return 0;
}

/* Bounds connect + greeting + capabilities: a socket that accepts but never speaks QMP
 * must not hold the queued commands forever. */
static int start_handshake_timer(QmpClient *c) {
        if (c->handshake_timeout == QMP_TIMEOUT_INFINITY)
                return 0;
        return sd_event_add_time_relative(c->peer.event,
                                          &c->handshake_timer,
                                          CLOCK_MONOTONIC,
                                          c->handshake_timeout,
                                          USEC_PER_MSEC,
                                          on_handshake_timeout,
                                          c);
}

int qmp_client_connect_path(QmpClient *c, const char *path) {
        int r;

        if (!c)
                return -EINVAL;
        r = json_peer_connect_path(&c->peer, path);
        if (r < 0)
                return r;
        r = start_handshake_timer(c);
        if (r < 0) {
                json_peer_shutdown_silently(&c->peer);
                return r;
        }
        return 0;
}

int qmp_client_connect_fd(QmpClient *c, int fd) {
        int r;

        if (!c || fd < 0)
                return -EINVAL;
        if (c->peer.state != JSON_PEER_NEW)
                return -EBUSY;
        /* Armed first: failing after the stream took fd would leave the caller's fd closed. */
        r = start_handshake_timer(c);
        if (r < 0)
                return r;
        r = json_peer_connect_fd(&c->peer, fd);
        if (r < 0) {
                c->handshake_timer = sd_event_source_disable_unref(c->handshake_timer);
                return r;
        }
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
        JsonPeerCommand *cmd;
        char id[32];
        int r;

        /* Replies are matched by id, so a late reply to a timed-out command finds nothing. */
        snprintf(id, sizeof(id), "rs-%" PRIu64, c->next_id++);
        r = json_peer_command_new(&c->peer, name, arguments, id, timeout_usec, &cmd);
        if (r < 0)
                return r;

        /* The handshake's own commands go out at once; user commands wait for ready. */
        if (internal || c->phase == QMP_PHASE_READY) {
                r = json_peer_command_write(&c->peer, cmd);
                if (r < 0) {
                        json_peer_command_free(cmd);
                        return r;
                }
        }
        json_peer_command_link(&c->peer, cmd, (void (*)(void)) callback, userdata, destroy);
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
        if (c->peer.state == JSON_PEER_CLOSED) {
                json_object_put(arguments);
                return -ENOTCONN;
        }
        return command_submit(c, command, arguments, timeout_usec, false, callback, userdata, destroy);
}

static void on_capabilities_reply(QmpClient *c, const QmpReply *reply, void *userdata) {
        int r;

        if (reply->error == -ECONNRESET)
                return; /* json_peer_disconnect() is already reporting why */
        if (reply->error != 0) {
                json_peer_disconnect(&c->peer, -EPROTO, "qmp_capabilities failed: %s", qmp_reply_error_text(reply));
                return;
        }

        c->phase = QMP_PHASE_READY;
        c->handshake_timer = sd_event_source_disable_unref(c->handshake_timer);
        for (JsonPeerCommand *cmd = c->peer.commands; cmd; cmd = cmd->next) {
                if (cmd->sent)
                        continue;
                r = json_peer_command_write(&c->peer, cmd);
                if (r < 0) {
                        json_peer_disconnect(&c->peer, r, "cannot queue commands: %s", strerror(-r));
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
                json_peer_disconnect(&c->peer, -EPROTO, "peer did not send a QMP greeting (is this a QMP socket?)");
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

        c->phase = QMP_PHASE_NEGOTIATING;
        r = command_submit(c, "qmp_capabilities", NULL, QMP_TIMEOUT_INFINITY, true, on_capabilities_reply, NULL, NULL);
        if (r < 0)
                json_peer_disconnect(&c->peer, r, "cannot send qmp_capabilities: %s", strerror(-r));
}

static void handle_event(QmpClient *c, json_object *message) {
        QmpEvent event;

        if (qmp_event_from_message(message, &event) < 0) {
                c->peer.n_dropped++;
                return;
        }
        if (c->callbacks.event)
                c->callbacks.event(c, &event, c->userdata);
}

static void handle_reply(QmpClient *c, json_object *message) {
        const char *id;
        QmpReply reply;

        if (json_member_get_string(message, "id", &id) < 0) {
                c->peer.n_dropped++;
                return;
        }
        for (JsonPeerCommand *cmd = c->peer.commands; cmd; cmd = cmd->next)
                if (cmd->sent && strcmp(cmd->id, id) == 0) {
                        (void) qmp_reply_from_message(message, &reply);
                        json_peer_command_complete(&c->peer, cmd, &reply);
                        return;
                }
        c->peer.n_dropped++;
}

static void client_connected(JsonPeer *p) {
        /* Nothing to send: QEMU speaks first, with the greeting. */
}

static void client_message(JsonPeer *p, json_object *message) {
        QmpClient *c = client_of(p);

        if (!json_object_is_type(message, json_type_object))
                json_peer_disconnect(p, -EBADMSG, "peer sent a JSON value that is not an object");
        else if (c->phase == QMP_PHASE_GREETING)
                handle_greeting(c, message);
        else if (json_object_object_get_ex(message, "event", NULL))
                handle_event(c, message);
        else if (json_object_object_get_ex(message, "return", NULL) || json_object_object_get_ex(message, "error", NULL))
                handle_reply(c, message);
        else
                p->n_dropped++;
}

bool qmp_client_is_ready(const QmpClient *c) {
        return c && c->peer.state == JSON_PEER_CONNECTED && c->phase == QMP_PHASE_READY;
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
