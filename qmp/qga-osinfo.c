/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "qmp/qga-osinfo.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/utf8.h"
#include "qmp/json-util.h"

/* What qemu-ga for Windows always sends as id (qga/commands-win32.c, qmp_guest_get_osinfo()). */
#define QGA_WINDOWS_ID "mswindows"

const char *qga_os_family_to_string(QgaOsFamily f) {
        static const char *const names[_QGA_OS_MAX] = {
                [QGA_OS_UNKNOWN] = "unknown",
                [QGA_OS_WINDOWS] = "windows",
                [QGA_OS_OTHER] = "other",
        };
        return f >= 0 && f < _QGA_OS_MAX ? names[f] : NULL;
}

int qga_parse_osinfo(json_object *result, QgaOsInfo *ret) {
        static const struct {
                const char *key;
                size_t offset;
        } fields[] = {
                { "id", offsetof(QgaOsInfo, id) },
                { "pretty-name", offsetof(QgaOsInfo, pretty_name) },
                { "kernel-release", offsetof(QgaOsInfo, kernel_release) },
        };
        QgaOsInfo info = {};

        if (!result || !json_object_is_type(result, json_type_object))
                return -EBADMSG;
        for (size_t i = 0; i < ARRAY_SIZE(fields); i++) {
                const char *s = NULL;
                int r = json_member_get_string_optional(result, fields[i].key, &s);
                if (r < 0)
                        return r;
                /* The guest's text: cut after a whole character, never in one. */
                if (s)
                        (void) utf8_snprintf((char *) &info + fields[i].offset, QGA_OS_TEXT_MAX, "%s", s);
        }
        /* The other members (name, version, variant, machine...) are optional in the schema and
         * say nothing the daemon acts on. */
        info.family = strcmp(info.id, QGA_WINDOWS_ID) == 0 ? QGA_OS_WINDOWS : QGA_OS_OTHER;
        *ret = info;
        return 0;
}

typedef struct OsinfoCall {
        qga_osinfo_fn callback;
        void *userdata;
} OsinfoCall;

static void on_osinfo(QgaClient *c, const QmpReply *reply, void *userdata) {
        OsinfoCall *call = userdata;
        QmpReply r = *reply;
        QgaOsInfo info;

        if (r.error == 0 && qga_parse_osinfo(reply->result, &info) < 0)
                r = (QmpReply) { .error = -EBADMSG, .error_desc = "malformed guest-get-osinfo reply" };
        if (call->callback)
                call->callback(c, &r, r.error == 0 ? &info : NULL, call->userdata);
}

int qga_get_osinfo(QgaClient *c, uint64_t timeout_usec, qga_osinfo_fn callback, void *userdata) {
        OsinfoCall *call;
        int r;

        if (!c)
                return -EINVAL;
        call = malloc(sizeof(*call));
        if (!call)
                return -ENOMEM;
        *call = (OsinfoCall) { callback, userdata };
        r = qga_client_execute_full(c, "guest-get-osinfo", NULL, timeout_usec, on_osinfo, call, free);
        if (r < 0)
                free(call);
        return r;
}
