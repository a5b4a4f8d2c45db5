/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The outcome of one QMP or guest agent command, shared by both clients. */
#pragma once

#include <json-c/json.h>

/* Everything in a QmpReply is borrowed and valid only during the callback that
 * receives it: take a json_object_get() reference or copy strings to keep them. */
typedef struct QmpReply {
        /* 0 on success; else a negative errno:
         *   -EIO (or a code mapped from its class: qmp-reply.c) for a QMP error reply,
         *   -ETIMEDOUT when the command's own timeout expired,
         *   -ECONNRESET when the connection went away before the reply,
         *   -EBADMSG when a typed helper found a malformed reply. */
        int error;
        json_object *result;     /* the "return" member on success, else NULL */
        const char *error_class; /* QMP error class ("GenericError", ...) for error replies, else NULL */
        const char *error_desc;  /* human-readable reason for any error, else NULL */
} QmpReply;

/* Fills *ret from a message holding "return" or "error". Returns -EBADMSG when the
 * message is neither (ret->error then says why too). A malformed "error" member is still
 * an error reply (-EIO, class NULL). */
int qmp_reply_from_message(json_object *msg, QmpReply *ret);


/* The error text to show a human: the description, or strerror of the code. */
const char *qmp_reply_error_text(const QmpReply *reply);
