/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "qmp/json-util.h"
#include "qmp/qmp-reply.h"

/* Maps QMP error classes to errno values; unknown classes and NULL give -EIO. */
static int qmp_error_class_to_errno(const char *error_class) {
        static const struct {
                const char *name;
                int error;
        } table[] = {
                { "CommandNotFound", -EOPNOTSUPP },
                { "DeviceNotFound", -ENODEV },
                /* e.g. "No balloon device has been activated" */
                { "DeviceNotActive", -ENXIO },
                { "KVMMissingCap", -EOPNOTSUPP },
        };

        if (error_class)
                for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
                        if (strcmp(table[i].name, error_class) == 0)
                                return table[i].error;
        return -EIO;
}

int qmp_reply_from_message(json_object *msg, QmpReply *ret) {
        json_object *result, *error;

        *ret = (QmpReply) {};

        if (json_object_is_type(msg, json_type_object) && json_object_object_get_ex(msg, "return", &result)) {
                ret->result = result;
                return 0;
        }

        if (!json_object_is_type(msg, json_type_object) || !json_object_object_get_ex(msg, "error", &error)) {
                ret->error = -EBADMSG;
                ret->error_desc = "message is neither a reply nor an error";
                return -EBADMSG;
        }

        /* Only a string class and desc are used; anything else stays NULL. */
        if (json_member_get_string(error, "class", &ret->error_class) < 0)
                ret->error_class = NULL;
        if (json_member_get_string(error, "desc", &ret->error_desc) < 0)
                ret->error_desc = "malformed error reply";
        ret->error = qmp_error_class_to_errno(ret->error_class);
        return 0;
}

const char *qmp_reply_error_text(const QmpReply *reply) {
        if (!reply || reply->error == 0)
                return "success";
        if (reply->error_desc)
                return reply->error_desc;
        return strerror(-reply->error);
}
