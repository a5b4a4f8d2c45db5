/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "common/macro.h"
#include "qmp/json-util.h"
#include "qmp/qmp-events.h"

static const char *const event_names[_QMP_EVENT_TYPE_MAX] = {
        [QMP_EVENT_BALLOON_CHANGE] = "BALLOON_CHANGE",
        [QMP_EVENT_MEMORY_DEVICE_SIZE_CHANGE] = "MEMORY_DEVICE_SIZE_CHANGE",
        [QMP_EVENT_SHUTDOWN] = "SHUTDOWN",
        [QMP_EVENT_DEVICE_DELETED] = "DEVICE_DELETED",
};

QmpEventType qmp_event_type_from_name(const char *name) {
        if (name)
                for (size_t i = 0; i < ARRAY_SIZE(event_names); i++)
                        if (event_names[i] && strcmp(event_names[i], name) == 0)
                                return (QmpEventType) i;
        return QMP_EVENT_OTHER;
}

const char *qmp_event_type_to_name(QmpEventType type) {
        if ((unsigned) type >= ARRAY_SIZE(event_names))
                return NULL;
        return event_names[type];
}

int qmp_event_from_message(json_object *message, QmpEvent *ret) {
        json_object *timestamp;
        QmpEvent event = {
                .seconds = -1,
                .microseconds = -1,
                .message = message,
        };

        if (!ret)
                return -EINVAL;
        if (json_member_get_string(message, "event", &event.name) < 0)
                return -EBADMSG;
        if (!json_object_object_get_ex(message, "data", &event.data))
                event.data = NULL;
        if (json_member_get_object(message, "timestamp", &timestamp) >= 0 &&
            (json_member_get_i64(timestamp, "seconds", &event.seconds) < 0 ||
             json_member_get_i64(timestamp, "microseconds", &event.microseconds) < 0))
                event.seconds = event.microseconds = -1;
        *ret = event;
        return 0;
}

static int required(int r) {
        /* A missing required member is as malformed as a wrong-typed one. */
        return r == -ENOENT ? -EBADMSG : r;
}

int qmp_event_parse(const QmpEvent *event, QmpTypedEvent *ret) {
        QmpTypedEvent t = {};
        json_object *data;
        int r = 0;

        if (!event || !ret)
                return -EINVAL;
        t.type = qmp_event_type_from_name(event->name);
        data = event->data;

        switch (t.type) {
        case QMP_EVENT_BALLOON_CHANGE:
                r = required(json_member_get_u64(data, "actual", &t.balloon_change.actual));
                break;

        case QMP_EVENT_MEMORY_DEVICE_SIZE_CHANGE:
                r = required(json_member_get_u64(data, "size", &t.memory_device_size_change.size));
                if (r >= 0)
                        r = json_member_get_string_optional(data, "id", &t.memory_device_size_change.id);
                if (r >= 0)
                        r = json_member_get_string_optional(data, "qom-path", &t.memory_device_size_change.qom_path);
                break;

        case QMP_EVENT_SHUTDOWN:
                /* Old QEMUs send SHUTDOWN without data; that is still a shutdown. */
                if (data && !json_object_is_type(data, json_type_object)) {
                        r = -EBADMSG;
                        break;
                }
                r = json_member_get_bool(data, "guest", &t.shutdown.guest);
                if (r == -ENOENT)
                        r = 0;
                if (r >= 0)
                        r = json_member_get_string_optional(data, "reason", &t.shutdown.reason);
                break;

        case QMP_EVENT_DEVICE_DELETED:
                r = required(json_member_get_string(data, "path", &t.device_deleted.path));
                if (r >= 0)
                        r = json_member_get_string_optional(data, "device", &t.device_deleted.device);
                break;

        default:
                break;
        }
        if (r < 0)
                return r;
        *ret = t;
        return 0;
}
