/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Non-blocking qemu-guest-agent client on the same sd-event loop and JSON framing as the
 * QMP client. The agent has no greeting and no reply ids: it answers in order, so exactly
 * one command is in flight and the rest queue. After connecting, and after any command
 * times out, the client resynchronises: it sends a 0xFF byte (flushes the agent's parser)
 * and guest-sync-delimited with a fresh id, discards input up to the 0xFF the agent puts
 * before that reply, and ignores stale sync replies with other ids.
 *
 * Ownership and re-entrancy rules are those of the QMP client (see qmp-client.h). */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "qmp/qmp-client.h"
#include "qmp/qmp-reply.h"

typedef struct QgaClient QgaClient;

typedef void (*qga_ready_fn)(QgaClient *c, void *userdata);
typedef void (*qga_disconnect_fn)(QgaClient *c, int error, const char *reason, void *userdata);
typedef void (*qga_reply_fn)(QgaClient *c, const QmpReply *reply, void *userdata);

typedef struct QgaClientCallbacks {
        qga_ready_fn ready;           /* first guest-sync-delimited answered */
        qga_disconnect_fn disconnect; /* same error codes as the QMP client */
} QgaClientCallbacks;

/* The agent's limits, set by qga_client_new() (the JSON stream's defaults are QMP's). The
 * largest reply rightsize asks for is a guest-file-read of QGA_FILE_READ_CHUNK (64 KiB): 87,384
 * bytes of base64 and 60 of envelope. The replies recorded from the test guest
 * (tests/fuzz/corpus) are at most 4.6 KiB (/proc/vmstat) with two objects; a guest-exec of
 * /proc/vmstat would be the same text. */
#define QGA_MAX_MESSAGE ((size_t) (128 * 1024))
#define QGA_MAX_CONTAINERS ((size_t) 16)
/* An honest agent sends a message nobody is waiting for only around a resync: the late reply
 * of a command that timed out, a stale guest-sync-delimited reply. More than this many in one
 * interval is a guest spending the daemon's time: the connection is closed with -EPROTO. */
#define QGA_UNSOLICITED_MAX 16
#define QGA_UNSOLICITED_INTERVAL_USEC (10 * UINT64_C(1000000))

#define QGA_DEFAULT_COMMAND_TIMEOUT_USEC (10 * UINT64_C(1000000))
/* Per guest-sync-delimited attempt; a silent agent (not started yet) is retried forever. */
#define QGA_DEFAULT_SYNC_TIMEOUT_USEC (3 * UINT64_C(1000000))

int qga_client_new(QgaClient **ret, sd_event *event);
QgaClient *qga_client_free(QgaClient *c);
static inline void qga_client_freep(QgaClient **c) {
        if (*c)
                *c = qga_client_free(*c);
}
QgaClient *qga_client_ref(QgaClient *c);
QgaClient *qga_client_unref(QgaClient *c);

void qga_client_set_callbacks(QgaClient *c, const QgaClientCallbacks *callbacks, void *userdata);
/* Before connecting; 0 restores the JSON stream's default, not the agent's. */
int qga_client_set_max_message_size(QgaClient *c, size_t bytes);
int qga_client_set_max_depth(QgaClient *c, int depth);
int qga_client_set_max_containers(QgaClient *c, size_t containers);
void qga_client_set_sync_timeout(QgaClient *c, uint64_t usec);

int qga_client_connect_path(QgaClient *c, const char *path);
int qga_client_connect_fd(QgaClient *c, int fd);

/* Same contract as qmp_client_execute_full(); the timeout counts from submission, so
 * time spent queued behind other commands or a resync is included. Commands that the
 * agent never answers (guest-shutdown, guest-suspend-*) must not be sent this way. */
int qga_client_execute_full(QgaClient *c,
                            const char *command,
                            json_object *arguments,
                            uint64_t timeout_usec,
                            qga_reply_fn callback,
                            void *userdata,
                            qmp_destroy_fn destroy);
static inline int qga_client_execute(QgaClient *c,
                                     const char *command,
                                     json_object *arguments,
                                     uint64_t timeout_usec,
                                     qga_reply_fn callback,
                                     void *userdata) {
        return qga_client_execute_full(c, command, arguments, timeout_usec, callback, userdata, NULL);
}

void qga_client_close(QgaClient *c);
bool qga_client_is_ready(const QgaClient *c); /* synced and not closed */
bool qga_client_is_closed(const QgaClient *c);
const char *qga_client_get_last_error(const QgaClient *c);
/* The negative errno that ended the connection (as given to the disconnect callback),
 * -ECANCELED after qga_client_close(), 0 while open. */
int qga_client_get_last_errno(const QgaClient *c);
sd_event *qga_client_get_event(const QgaClient *c);
size_t qga_client_get_n_pending(const QgaClient *c);
/* Messages dropped: stale sync replies, replies with nothing in flight (past
 * QGA_UNSOLICITED_MAX an interval, the last one closes the connection). */
uint64_t qga_client_get_n_dropped(const QgaClient *c);
/* guest-sync-delimited exchanges completed (1 after connecting, +1 per resync). */
uint64_t qga_client_get_n_syncs(const QgaClient *c);
