/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Typed views of the QMP events the daemon reacts to. Any event also stays available
 * raw (QmpEvent: name, data, timestamp, whole message). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "qmp/qmp-client.h"

typedef enum QmpEventType {
        QMP_EVENT_OTHER, /* not one of ours: use the raw QmpEvent */
        QMP_EVENT_BALLOON_CHANGE,
        QMP_EVENT_MEMORY_DEVICE_SIZE_CHANGE,
        QMP_EVENT_SHUTDOWN,
        QMP_EVENT_DEVICE_DELETED,
        _QMP_EVENT_TYPE_MAX,
} QmpEventType;

/* Strings are borrowed from the event's JSON: valid during the event callback only. */
typedef struct QmpBalloonChange {
        uint64_t actual; /* bytes the guest now has */
} QmpBalloonChange;

typedef struct QmpMemoryDeviceSizeChange {
        const char *id;       /* NULL when the device has no id */
        uint64_t size;        /* plugged bytes */
        const char *qom_path; /* NULL on QEMU versions that do not send it */
} QmpMemoryDeviceSizeChange;

typedef struct QmpShutdown {
        bool guest;         /* initiated by the guest; false when unknown */
        const char *reason; /* "guest-shutdown", "host-qmp-quit", ...; NULL when absent */
} QmpShutdown;

typedef struct QmpDeviceDeleted {
        const char *device; /* id; NULL for devices without one */
        const char *path;   /* QOM path */
} QmpDeviceDeleted;

typedef struct QmpTypedEvent {
        QmpEventType type;
        union {
                QmpBalloonChange balloon_change;
                QmpMemoryDeviceSizeChange memory_device_size_change;
                QmpShutdown shutdown;
                QmpDeviceDeleted device_deleted;
        };
} QmpTypedEvent;

/* Fills *ret (borrowing from message) from a raw {"event": ..., "data": ..., "timestamp": ...}
 * message, e.g. one returned by qmp_event_watch_next(). -EBADMSG when "event" is not a
 * string; a malformed timestamp only reads as -1. */
int qmp_event_from_message(json_object *message, QmpEvent *ret);

QmpEventType qmp_event_type_from_name(const char *name);
const char *qmp_event_type_to_name(QmpEventType type);

/* Returns 0 with ret->type set (QMP_EVENT_OTHER for events we do not model), or
 * -EBADMSG when a known event's data is missing or wrong-typed. */
int qmp_event_parse(const QmpEvent *event, QmpTypedEvent *ret);
