/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A stream of JSON values over a non-blocking stream socket, driven by sd-event.
 * It connects (or adopts a connected fd), frames incoming bytes into JSON values with
 * json-c's incremental tokener under a size, a nesting and a container cap, and buffers outgoing bytes
 * until the socket takes them. Shared by the QMP and guest agent clients; it knows
 * nothing about either protocol except the agent's 0xFF resynchronisation byte. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "common/macro.h"

#define JSON_STREAM_MAX_MESSAGE_DEFAULT ((size_t) (1 * MIB))
#define JSON_STREAM_MAX_DEPTH_DEFAULT 32
/* Objects and arrays in one message. json-c spends 600-800 bytes on an empty object, so
 * this bounds a message's parse to a few MiB whatever its shape; QEMU's largest replies that
 * rightsize asks for (query-memory-devices with 256 DIMMs, query-blockstats of a hundred
 * disks) have a few hundred, the recorded sessions of the test guest six at most. */
#define JSON_STREAM_MAX_CONTAINERS_DEFAULT ((size_t) 4096)
/* Unsent output beyond this means the peer stopped reading. */
#define JSON_STREAM_MAX_OUTPUT ((size_t) (16 * MIB))

typedef struct JsonStream JsonStream;

typedef struct JsonStreamCallbacks {
        /* The non-blocking connect started by json_stream_connect_path() finished. */
        void (*connected)(JsonStream *s, void *userdata);
        /* One complete JSON value, borrowed for the duration of the call. */
        void (*message)(JsonStream *s, json_object *message, void *userdata);
        /* The stream failed and has closed its fd: peer hang-up, I/O error, malformed or
         * oversized input. Called at most once, never after json_stream_close(). */
        void (*failed)(JsonStream *s, int error, const char *reason, void *userdata);
} JsonStreamCallbacks;

int json_stream_new(JsonStream **ret, sd_event *event, const JsonStreamCallbacks *callbacks, void *userdata);
JsonStream *json_stream_ref(JsonStream *s);
JsonStream *json_stream_unref(JsonStream *s);

/* Limits; set them before connecting. 0 (depth <= 0) restores a default. A message past a
 * limit fails the stream with -EMSGSIZE (bytes, containers) or -EBADMSG (nesting). */
int json_stream_set_max_message_size(JsonStream *s, size_t bytes);
int json_stream_set_max_depth(JsonStream *s, int depth);
int json_stream_set_max_containers(JsonStream *s, size_t containers);

/* Starts a non-blocking connect to a unix socket; completion is reported through
 * callbacks->connected or ->failed. A full listen backlog is retried until closed. */
int json_stream_connect_path(JsonStream *s, const char *path);
/* Adopts an already connected socket (made non-blocking here). On success the stream owns
 * fd; on failure the caller still does. No connected callback follows. */
int json_stream_attach_fd(JsonStream *s, int fd);

/* Queues bytes; nothing is written synchronously, so no callback runs from inside this
 * call. -ENOTCONN once closed, -ENOBUFS when the peer stalls. */
int json_stream_write(JsonStream *s, const void *data, size_t size);

/* Drops all buffered input, resets the parser and discards everything up to and
 * including the next 0xFF byte (guest-sync-delimited). */
void json_stream_discard_until_sync_byte(JsonStream *s);

bool json_stream_is_open(const JsonStream *s);      /* connecting or connected */

/* Closes the fd without any callback. Safe from inside a callback. */
void json_stream_close(JsonStream *s);
