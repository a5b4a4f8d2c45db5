/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internal: the connection lifecycle that the QMP and guest agent clients share.
 *
 * A JsonPeer sits at the start of each client struct (so the client is the peer's
 * allocation) and owns what is protocol-neutral: the JsonStream, the reference count, the
 * connect / close / free / disconnect semantics of qmp-client.h (the "silenced" guard that
 * stops callbacks once the user closed or freed the client), the last error, and the list
 * of pending commands, each with its own timeout. The client plugs in its protocol through
 * JsonPeerOps and decides when a command's request is written. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "common/macro.h"
#include "qmp/json-stream.h"
#include "qmp/qmp-reply.h"

typedef enum JsonPeerState {
        JSON_PEER_NEW,
        JSON_PEER_CONNECTING,
        JSON_PEER_CONNECTED, /* the protocol's own phases (greeting, sync) happen here */
        JSON_PEER_CLOSED,
} JsonPeerState;

typedef struct JsonPeer JsonPeer;
typedef struct JsonPeerCommand JsonPeerCommand;

struct JsonPeerCommand {
        JsonPeer *peer;
        JsonPeerCommand *prev, *next;
        char *name;
        char id[32]; /* the request's "id" member, "" when the protocol has none */
        char *request; /* serialised request, until written */
        size_t request_len;
        bool sent;
        uint64_t deadline; /* CLOCK_MONOTONIC when it times out, UINT64_MAX: never */
        /* The client's typed reply callback; only JsonPeerOps.deliver calls it. */
        void (*callback)(void);
        void *userdata;
        void (*destroy)(void *userdata);
};

typedef struct JsonPeerOps {
        const char *protocol; /* "QMP", "guest agent": names the peer in error texts */
        /* The non-blocking connect finished. */
        void (*connected)(JsonPeer *p);
        /* A message arrived while connected. */
        void (*message)(JsonPeer *p, json_object *message);
        /* Runs cmd's typed callback with the reply. */
        void (*deliver)(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply);
        /* The connection ended, either way: stop protocol timers. Optional. */
        void (*closed)(JsonPeer *p);
        /* Tell the user the connection was lost (not called when silenced). Optional. */
        void (*disconnected)(JsonPeer *p, int error, const char *reason);
        /* cmd's timeout expired; reply says so. NULL: json_peer_command_complete(). */
        void (*timed_out)(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply);
} JsonPeerOps;

struct JsonPeer {
        unsigned n_ref;
        sd_event *event;
        JsonStream *stream;
        const JsonPeerOps *ops;
        JsonPeerState state;
        /* Set by close()/free(): the user is gone, so no more callbacks. */
        bool silenced;

        uint64_t default_timeout;
        JsonPeerCommand *commands, *commands_tail; /* in submission order */
        /* One timer for the commands' timeouts, at the earliest deadline among them (timeout_at),
         * off while none has one: not a timer of its own per command. */
        sd_event_source *timeout_timer;
        uint64_t timeout_at;
        size_t n_pending;
        uint64_t n_dropped;

        char *last_error;
        int last_errno;
};

/* Allocates size bytes (a client struct whose first member is its JsonPeer), zeroed. */
int json_peer_new(JsonPeer **ret, size_t size, sd_event *event, const JsonPeerOps *ops, uint64_t default_timeout);
void json_peer_ref(JsonPeer *p);
/* The last reference closes silently and frees the whole client allocation. */
void json_peer_unref(JsonPeer *p);

/* Closes without any callback: pending commands only get their destroy. */
void json_peer_shutdown_silently(JsonPeer *p);
/* Ends the connection for a reason the user did not ask for: every pending command fails
 * with -ECONNRESET, then ops->disconnected runs, at most once. */
_printf_(3, 4) void json_peer_disconnect(JsonPeer *p, int error, const char *format, ...);

/* 0 with state CONNECTING; on an immediate error the peer is closed silently with the
 * reason recorded, and the error is returned. */
int json_peer_connect_path(JsonPeer *p, const char *path);
/* 0 with state CONNECTED (ops->connected is not called); the stream owns fd on success. */
int json_peer_connect_fd(JsonPeer *p, int fd);

/* Builds {"execute": name, "arguments": arguments, "id": id} (id may be NULL), serialises
 * it and arms the timeout. arguments is always consumed. The command is not linked and
 * owns no callback yet, so on a later failure json_peer_command_free() drops it quietly. */
int json_peer_command_new(JsonPeer *p,
                          const char *name,
                          json_object *arguments,
                          const char *id,
                          uint64_t timeout_usec,
                          JsonPeerCommand **ret);
/* Appends cmd to the pending list; from now on it owns userdata (destroy). */
void json_peer_command_link(JsonPeer *p,
                            JsonPeerCommand *cmd,
                            void (*callback)(void),
                            void *userdata,
                            void (*destroy)(void *userdata));
void json_peer_command_unlink(JsonPeer *p, JsonPeerCommand *cmd);
/* Queues the request bytes on the stream. Never runs callbacks. */
int json_peer_command_write(JsonPeer *p, JsonPeerCommand *cmd);
/* Runs the callback (unless silenced) on an unlinked command, then frees it. */
void json_peer_command_finish(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply);
/* Unlinks, then finishes. */
void json_peer_command_complete(JsonPeer *p, JsonPeerCommand *cmd, const QmpReply *reply);
void json_peer_command_free(JsonPeerCommand *cmd);

/* The public functions that are the same for both clients, defined once: `name` is the
 * prefix (qmp_client), `Type` the client struct, whose member `peer` is its JsonPeer. */
#define JSON_PEER_DEFINE_CLIENT_FUNCTIONS(name, Type)                                    \
        Type *name##_ref(Type *c) {                                                    \
                if (c)                                                                 \
                        json_peer_ref(&c->peer);                                       \
                return c;                                                              \
        }                                                                              \
        Type *name##_unref(Type *c) {                                                  \
                if (c)                                                                 \
                        json_peer_unref(&c->peer);                                     \
                return NULL;                                                           \
        }                                                                              \
        void name##_close(Type *c) {                                                   \
                if (c)                                                                 \
                        json_peer_shutdown_silently(&c->peer);                         \
        }                                                                              \
        Type *name##_free(Type *c) {                                                   \
                name##_close(c);                                                       \
                return name##_unref(c);                                                \
        }                                                                              \
        int name##_set_max_message_size(Type *c, size_t bytes) {                       \
                return json_stream_set_max_message_size(c->peer.stream, bytes);       \
        }                                                                              \
        int name##_set_max_depth(Type *c, int depth) {                                 \
                return json_stream_set_max_depth(c->peer.stream, depth);              \
        }                                                                              \
        int name##_set_max_containers(Type *c, size_t containers) {                    \
                return json_stream_set_max_containers(c->peer.stream, containers);    \
        }                                                                              \
        bool name##_is_closed(const Type *c) {                                         \
                return !c || c->peer.state == JSON_PEER_CLOSED;                        \
        }                                                                              \
        int name##_get_last_errno(const Type *c) {                                     \
                return c ? c->peer.last_errno : 0;                                     \
        }                                                                              \
        const char *name##_get_last_error(const Type *c) {                             \
                return c ? c->peer.last_error : NULL;                                  \
        }                                                                              \
        sd_event *name##_get_event(const Type *c) {                                    \
                return c ? c->peer.event : NULL;                                       \
        }                                                                              \
        size_t name##_get_n_pending(const Type *c) {                                   \
                return c ? c->peer.n_pending : 0;                                      \
        }                                                                              \
        uint64_t name##_get_n_dropped(const Type *c) {                                 \
                return c ? c->peer.n_dropped : 0;                                      \
        }
