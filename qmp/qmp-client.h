/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Non-blocking QMP client attached to an sd-event loop.
 *
 * Lifecycle: qmp_client_new() → set callbacks/limits → qmp_client_connect_path() or
 * qmp_client_connect_fd() → the greeting is read and qmp_capabilities sent → ready
 * callback. Commands submitted before that are queued and sent once ready.
 *
 * Every command gets an id "rs-N"; replies are matched by id, and replies with unknown
 * ids (including late replies to timed-out commands) are dropped. Each command completes
 * exactly once: with the reply, -ETIMEDOUT, or -ECONNRESET when the connection goes away.
 *
 * Re-entrancy: any callback may call qmp_client_free() or qmp_client_close() on its
 * client; after that no further callback runs, and memory is released once the current
 * dispatch unwinds. The client is not thread-safe: use it from the loop's thread. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "qmp/qmp-reply.h"

typedef struct QmpClient QmpClient;

/* An asynchronous event as QEMU sent it. All members borrowed for the callback. */
typedef struct QmpEvent {
        const char *name;      /* "BALLOON_CHANGE", ... */
        json_object *data;     /* the "data" member, NULL when absent */
        int64_t seconds;       /* timestamp; -1 when absent or malformed */
        int64_t microseconds;
        json_object *message;  /* the whole message */
} QmpEvent;

typedef void (*qmp_ready_fn)(QmpClient *c, void *userdata);
typedef void (*qmp_event_fn)(QmpClient *c, const QmpEvent *event, void *userdata);
/* The connection failed or closed. error: -ECONNRESET (peer closed), -EBADMSG (garbage),
 * -EMSGSIZE (oversized message), -ETIMEDOUT (no handshake in time), -EPROTO (not QMP),
 * or an I/O errno. reason is the same text as qmp_client_get_last_error(). Called at
 * most once, after all pending commands were completed with -ECONNRESET. */
typedef void (*qmp_disconnect_fn)(QmpClient *c, int error, const char *reason, void *userdata);
typedef void (*qmp_reply_fn)(QmpClient *c, const QmpReply *reply, void *userdata);
typedef void (*qmp_destroy_fn)(void *userdata);

typedef struct QmpClientCallbacks {
        qmp_ready_fn ready;
        qmp_event_fn event;
        qmp_disconnect_fn disconnect;
} QmpClientCallbacks;

/* Timeout arguments: 0 selects the client's default, QMP_TIMEOUT_INFINITY disables it. */
#define QMP_TIMEOUT_DEFAULT UINT64_C(0)
#define QMP_TIMEOUT_INFINITY UINT64_MAX
#define QMP_DEFAULT_COMMAND_TIMEOUT_USEC (30 * UINT64_C(1000000))
#define QMP_DEFAULT_HANDSHAKE_TIMEOUT_USEC (10 * UINT64_C(1000000))

/* event NULL uses sd_event_default(). The client keeps a reference on the loop. */
int qmp_client_new(QmpClient **ret, sd_event *event);
/* Closes silently (no callbacks; pending commands only get their destroy functions) and
 * drops the caller's reference. Returns NULL for `c = qmp_client_free(c);`. */
QmpClient *qmp_client_free(QmpClient *c);
static inline void qmp_client_freep(QmpClient **c) {
        if (*c)
                *c = qmp_client_free(*c);
}
/* Extra references keep the memory alive (not the connection) across qmp_client_free(). */
QmpClient *qmp_client_ref(QmpClient *c);
QmpClient *qmp_client_unref(QmpClient *c);

void qmp_client_set_callbacks(QmpClient *c, const QmpClientCallbacks *callbacks, void *userdata);
void qmp_client_get_callbacks(QmpClient *c, QmpClientCallbacks *ret_callbacks, void **ret_userdata);
/* Limits, before connecting. 0 restores the default (1 MiB, depth 32, 4096 objects and arrays). */
int qmp_client_set_max_message_size(QmpClient *c, size_t bytes);
int qmp_client_set_max_depth(QmpClient *c, int depth);
int qmp_client_set_max_containers(QmpClient *c, size_t containers);
/* Default per-command timeout, and the limit for connect + greeting + capabilities. */
void qmp_client_set_default_timeout(QmpClient *c, uint64_t usec);
void qmp_client_set_handshake_timeout(QmpClient *c, uint64_t usec);

/* Starts connecting. Errors that show at once (no such file, path too long) are returned
 * here and leave the client closed (no callbacks; last error set); later ones go to the
 * disconnect callback. */
int qmp_client_connect_path(QmpClient *c, const char *path);
/* Uses an already connected stream socket. Takes ownership of fd on success only. */
int qmp_client_connect_fd(QmpClient *c, int fd);

/* Sends a command. arguments (may be NULL) is always consumed, even on failure. callback
 * may be NULL. destroy, if set, is called with userdata exactly once: after the callback,
 * or alone when the client is freed or closed first. Returns -ENOTCONN after a disconnect;
 * on any failure neither callback nor destroy will run. */
int qmp_client_execute_full(QmpClient *c,
                            const char *command,
                            json_object *arguments,
                            uint64_t timeout_usec,
                            qmp_reply_fn callback,
                            void *userdata,
                            qmp_destroy_fn destroy);
static inline int qmp_client_execute(QmpClient *c,
                                     const char *command,
                                     json_object *arguments,
                                     uint64_t timeout_usec,
                                     qmp_reply_fn callback,
                                     void *userdata) {
        return qmp_client_execute_full(c, command, arguments, timeout_usec, callback, userdata, NULL);
}

/* Disconnects without any callback; pending commands are dropped (destroy only).
 * The object stays usable for the getters below until freed. */
void qmp_client_close(QmpClient *c);

bool qmp_client_is_ready(const QmpClient *c);
bool qmp_client_is_closed(const QmpClient *c);
/* Why the connection ended (or NULL): kept for the daemon to report. */
const char *qmp_client_get_last_error(const QmpClient *c);
/* The negative errno that ended the connection (as given to the disconnect callback),
 * -ECANCELED after qmp_client_close(), 0 while open. */
int qmp_client_get_last_errno(const QmpClient *c);
/* QEMU's version from the greeting; -ENODATA before the greeting or if it had none. */
int qmp_client_get_qemu_version(const QmpClient *c, unsigned *major, unsigned *minor, unsigned *micro);
sd_event *qmp_client_get_event(const QmpClient *c);
/* Commands submitted but not yet completed. */
size_t qmp_client_get_n_pending(const QmpClient *c);
/* Messages dropped: replies with unknown ids (late ones included), malformed events. */
uint64_t qmp_client_get_n_dropped(const QmpClient *c);
