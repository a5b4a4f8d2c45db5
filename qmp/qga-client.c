/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/event-util.h"
#include "common/macro.h"
#include "qmp/json-peer.h"
#include "qmp/json-util.h"
#include "qmp/qga-client.h"

struct QgaClient {
        JsonPeer peer; /* first: the client is the peer's allocation */

        QgaClientCallbacks callbacks;
        void *userdata;

        uint64_t sync_timeout;
        bool syncing;
        bool synced_once;
        uint64_t sync_id;
        uint64_t sync_seed;
        uint64_t n_sync_attempts;
        uint64_t n_syncs;
        sd_event_source *sync_timer;

        uint64_t unsolicited_since; /* CLOCK_MONOTONIC start of the current allowance */
        unsigned n_unsolicited;     /* messages nobody asked for since then */
};

static QgaClient *client_of(JsonPeer *p) {
        return (QgaClient *) p;
}

/* The agent answers in order, so at most one command is out: always the oldest one. */
static JsonPeerCommand *in_flight(const QgaClient *c) {
        JsonPeerCommand *head = c->peer.commands;

        return head && head->sent ? head : NULL;
}

static uint64_t random_seed(void) {
        uint32_t seed;

        if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed))
                seed = (uint32_t) time(NULL) ^ (uint32_t) getpid();
        /* Positive and far from overflowing the agent's int. */
        return (seed & 0x3FFFFFFF) + 1;
}

static void client_connected(JsonPeer *p);
static void client_message(JsonPeer *p, json_object *message);
static void client_command_timed_out(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply);

static void client_deliver(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply) {
        ((qga_reply_fn) cmd->callback)(client_of(p), reply, cmd->userdata);
}

static void client_closed(JsonPeer *p) {
        QgaClient *c = client_of(p);

        c->sync_timer = sd_event_source_disable_unref(c->sync_timer);
}

static void client_disconnected(JsonPeer *p, int error, const char *reason) {
        QgaClient *c = client_of(p);

        if (c->callbacks.disconnect)
                c->callbacks.disconnect(c, error, reason, c->userdata);
}

static const JsonPeerOps client_ops = {
        .protocol = "guest agent",
        .connected = client_connected,
        .message = client_message,
        .deliver = client_deliver,
        .closed = client_closed,
        .disconnected = client_disconnected,
        .timed_out = client_command_timed_out,
};

int qga_client_new(QgaClient **ret, sd_event *event) {
        JsonPeer *p;
        int r;

        if (!ret)
                return -EINVAL;
        r = json_peer_new(&p, sizeof(QgaClient), event, &client_ops, QGA_DEFAULT_COMMAND_TIMEOUT_USEC);
        if (r < 0)
                return r;
        /* Set on a fresh stream, so they cannot fail. */
        (void) json_stream_set_max_message_size(p->stream, QGA_MAX_MESSAGE);
        (void) json_stream_set_max_containers(p->stream, QGA_MAX_CONTAINERS);
        *ret = client_of(p);
        (*ret)->sync_timeout = QGA_DEFAULT_SYNC_TIMEOUT_USEC;
        (*ret)->sync_seed = random_seed();
        return 0;
}

JSON_PEER_DEFINE_CLIENT_FUNCTIONS(qga_client, QgaClient)

void qga_client_set_callbacks(QgaClient *c, const QgaClientCallbacks *callbacks, void *userdata) {
        c->callbacks = callbacks ? *callbacks : (QgaClientCallbacks) {};
        c->userdata = userdata;
}

void qga_client_set_sync_timeout(QgaClient *c, uint64_t usec) {
        c->sync_timeout = usec > 0 ? usec : QGA_DEFAULT_SYNC_TIMEOUT_USEC;
}

static int start_sync(QgaClient *c);

static void start_sync_or_disconnect(QgaClient *c) {
        int r = start_sync(c);

        if (r < 0)
                json_peer_disconnect(&c->peer, r, "cannot send guest-sync-delimited: %s", strerror(-r));
}

static int on_sync_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        QgaClient *c = userdata;

        /* The agent may not be running yet (the chardev accepts connections regardless):
         * keep asking. Queued commands still time out on their own. */
        c->sync_timer = sd_event_source_disable_unref(c->sync_timer);
        start_sync_or_disconnect(c);
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
        r = json_stream_write(c->peer.stream, "\xff", 1);
        if (r >= 0)
                r = json_stream_write(c->peer.stream, request, (size_t) n);
        if (r < 0)
                return r;
        json_stream_discard_until_sync_byte(c->peer.stream);

        return event_reset_time_relative(c->peer.event, &c->sync_timer, CLOCK_MONOTONIC, c->sync_timeout, USEC_PER_MSEC,
                                         on_sync_timeout, c, "qga-sync");
}

/* Sends the next queued command if the line is free. Never runs callbacks. */
static int dispatch_next(QgaClient *c) {
        JsonPeerCommand *cmd = c->peer.commands;

        if (c->peer.state != JSON_PEER_CONNECTED || c->syncing || !cmd || cmd->sent)
                return 0;
        return json_peer_command_write(&c->peer, cmd);
}

/* From loop context, where callbacks are allowed: a failed send ends the connection. */
static void dispatch_next_or_disconnect(QgaClient *c) {
        int r = dispatch_next(c);

        if (r < 0)
                json_peer_disconnect(&c->peer, r, "cannot send to the guest agent: %s", strerror(-r));
}

static void client_connected(JsonPeer *p) {
        start_sync_or_disconnect(client_of(p));
}

int qga_client_connect_path(QgaClient *c, const char *path) {
        return c ? json_peer_connect_path(&c->peer, path) : -EINVAL;
}

int qga_client_connect_fd(QgaClient *c, int fd) {
        int r;

        if (!c)
                return -EINVAL;
        r = json_peer_connect_fd(&c->peer, fd);
        if (r < 0)
                return r;
        r = start_sync(c);
        if (r < 0) {
                /* The stream owns fd now; leave a clean closed client behind. */
                json_peer_shutdown_silently(&c->peer);
                return r;
        }
        return 0;
}

static void client_command_timed_out(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply) {
        QgaClient *c = client_of(p);
        bool was_in_flight = in_flight(c) == cmd;
        int r = 0;

        json_peer_command_unlink(p, cmd);
        /* Its reply may still come: resync before anything else can be sent, so the late
         * reply is never taken for the answer to the next command, not even one queued
         * from the callback below. */
        if (was_in_flight)
                r = start_sync(c);
        json_peer_command_finish(p, cmd, reply);
        if (r < 0)
                json_peer_disconnect(p, r, "cannot send guest-sync-delimited: %s", strerror(-r));
        else
                dispatch_next_or_disconnect(c);
}

int qga_client_execute_full(QgaClient *c,
                            const char *command,
                            json_object *arguments,
                            uint64_t timeout_usec,
                            qga_reply_fn callback,
                            void *userdata,
                            qmp_destroy_fn destroy) {
        JsonPeerCommand *cmd;
        int r;

        if (!c || !command) {
                json_object_put(arguments);
                return -EINVAL;
        }
        if (c->peer.state == JSON_PEER_CLOSED) {
                json_object_put(arguments);
                return -ENOTCONN;
        }
        r = json_peer_command_new(&c->peer, command, arguments, NULL, timeout_usec, &cmd);
        if (r < 0)
                return r;
        json_peer_command_link(&c->peer, cmd, (void (*)(void)) callback, userdata, destroy);

        r = dispatch_next(c);
        if (r < 0) {
                /* Not accepted: the caller gets r and neither callback nor destroy. */
                cmd->destroy = NULL;
                json_peer_command_unlink(&c->peer, cmd);
                json_peer_command_free(cmd);
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

/* Counts a message nobody asked for. false: past the allowance, the connection is closed. */
static bool note_unsolicited(QgaClient *c) {
        uint64_t now;

        c->peer.n_dropped++;
        (void) sd_event_now(c->peer.event, CLOCK_MONOTONIC, &now);
        if (c->n_unsolicited == 0 || now - c->unsolicited_since >= QGA_UNSOLICITED_INTERVAL_USEC) {
                c->unsolicited_since = now;
                c->n_unsolicited = 0;
        }
        if (++c->n_unsolicited <= QGA_UNSOLICITED_MAX)
                return true;
        json_peer_disconnect(&c->peer, -EPROTO, "more than %u messages nobody asked for in %" PRIu64 " s",
                             QGA_UNSOLICITED_MAX, QGA_UNSOLICITED_INTERVAL_USEC / UINT64_C(1000000));
        return false;
}

static void handle_sync_message(QgaClient *c, json_object *message) {
        if (!is_our_sync_reply(c, message)) {
                /* A stale sync reply (from an attempt that timed out) or leftovers: our
                 * reply comes after its own 0xFF. */
                if (note_unsolicited(c))
                        json_stream_discard_until_sync_byte(c->peer.stream);
                return;
        }
        c->syncing = false;
        c->n_syncs++;
        c->sync_timer = sd_event_source_disable_unref(c->sync_timer);

        if (!c->synced_once) {
                c->synced_once = true;
                if (!c->peer.silenced && c->callbacks.ready)
                        c->callbacks.ready(c, c->userdata);
        }
        dispatch_next_or_disconnect(c);
}

static void client_message(JsonPeer *p, json_object *message) {
        QgaClient *c = client_of(p);
        JsonPeerCommand *cmd = in_flight(c);
        QmpReply reply;

        if (c->syncing)
                handle_sync_message(c, message);
        else if (!cmd || qmp_reply_from_message(message, &reply) < 0)
                (void) note_unsolicited(c);
        else {
                json_peer_command_complete(p, cmd, &reply);
                dispatch_next_or_disconnect(c);
        }
}

bool qga_client_is_ready(const QgaClient *c) {
        return c && c->peer.state == JSON_PEER_CONNECTED && c->synced_once;
}

uint64_t qga_client_get_n_syncs(const QgaClient *c) {
        return c ? c->n_syncs : 0;
}
