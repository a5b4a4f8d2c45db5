/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Typed helpers for the QMP commands rightsize needs. Each helper sends one command (the
 * DIMM hotplug two) through qmp_client_execute() and parses the reply defensively: a
 * missing or wrong-typed field completes the call with reply->error == -EBADMSG instead
 * of a result. The pure parsers are public so they can be tested and fuzzed alone.
 *
 * Callbacks receive the QmpReply (error code, class, description) and, only when
 * reply->error == 0, a pointer to the parsed result; both are valid during the call. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "qmp/qmp-client.h"

/* The QOM path of the balloon when QEMU was started with -device virtio-balloon-pci,id=balloon0. */
#define QMP_BALLOON_QOM_PATH "/machine/peripheral/balloon0"

/* "Not reported": a stat QEMU did not send, one it sent as -1, or a field that does not
 * apply to a device type. Never read it as zero. */
#define QMP_VALUE_UNKNOWN UINT64_MAX
static inline bool qmp_value_is_known(uint64_t v) {
        return v != QMP_VALUE_UNKNOWN;
}

typedef void (*qmp_u64_fn)(QmpClient *c, const QmpReply *reply, uint64_t value, void *userdata);
typedef void (*qmp_bool_fn)(QmpClient *c, const QmpReply *reply, bool value, void *userdata);

/* Generic QOM access; value is consumed. The reply's result is the raw property value. */
int qmp_qom_get(QmpClient *c, const char *path, const char *property, uint64_t timeout_usec, qmp_reply_fn callback, void *userdata);
int qmp_qom_set(QmpClient *c,
                const char *path,
                const char *property,
                json_object *value,
                uint64_t timeout_usec,
                qmp_reply_fn callback,
                void *userdata);

/* ---- balloon ---- */

typedef struct QmpBalloonInfo {
        uint64_t actual; /* bytes the guest currently has */
} QmpBalloonInfo;
typedef void (*qmp_balloon_info_fn)(QmpClient *c, const QmpReply *reply, const QmpBalloonInfo *info, void *userdata);

int qmp_parse_balloon_info(json_object *result, QmpBalloonInfo *ret);
int qmp_query_balloon(QmpClient *c, uint64_t timeout_usec, qmp_balloon_info_fn callback, void *userdata);
/* "balloon": asks the guest to shrink or grow to target_bytes. destroy, if set, is called with
 * userdata once the command is done or dropped (qmp_client_execute_full()'s contract). */
int qmp_balloon_set_target_full(QmpClient *c, uint64_t target_bytes, uint64_t timeout_usec, qmp_reply_fn callback,
                                void *userdata, qmp_destroy_fn destroy);
static inline int qmp_balloon_set_target(QmpClient *c, uint64_t target_bytes, uint64_t timeout_usec,
                                         qmp_reply_fn callback, void *userdata) {
        return qmp_balloon_set_target_full(c, target_bytes, timeout_usec, callback, userdata, NULL);
}

/* qom_path NULL means QMP_BALLOON_QOM_PATH. seconds == 0 disables polling. */
int qmp_set_stats_polling_interval(QmpClient *c,
                                   const char *qom_path,
                                   unsigned seconds,
                                   uint64_t timeout_usec,
                                   qmp_reply_fn callback,
                                   void *userdata);

/* The balloon's properties read with qmp_qom_get_u64() and qmp_qom_get_bool(). */
#define QMP_BALLOON_STATS_POLLING_INTERVAL "guest-stats-polling-interval" /* seconds, 0: off */
#define QMP_BALLOON_FREE_PAGE_REPORTING "free-page-reporting"
/* Whether the guest takes memory back from its balloon before its OOM killer runs. */
#define QMP_BALLOON_DEFLATE_ON_OOM "deflate-on-oom"

/* qom-get of a non-negative integer or a boolean property; qom_path NULL means
 * QMP_BALLOON_QOM_PATH. A value of another type is -EBADMSG. */
int qmp_qom_get_u64(QmpClient *c, const char *qom_path, const char *property, uint64_t timeout_usec,
                    qmp_u64_fn callback, void *userdata);
int qmp_qom_get_bool(QmpClient *c, const char *qom_path, const char *property, uint64_t timeout_usec,
                     qmp_bool_fn callback, void *userdata);

/* ---- balloon guest stats (qom-get guest-stats) ---- */

typedef enum QmpStat {
        QMP_STAT_SWAP_IN,
        QMP_STAT_SWAP_OUT,
        QMP_STAT_MAJOR_FAULTS,
        QMP_STAT_MINOR_FAULTS,
        QMP_STAT_FREE_MEMORY,
        QMP_STAT_TOTAL_MEMORY,
        QMP_STAT_AVAILABLE_MEMORY,
        QMP_STAT_DISK_CACHES,
        QMP_STAT_HTLB_PGALLOC,
        QMP_STAT_HTLB_PGFAIL,
        /* QEMU 9.2+ with a recent guest kernel */
        QMP_STAT_OOM_KILLS,
        QMP_STAT_ALLOC_STALLS,
        QMP_STAT_ASYNC_SCANS,
        QMP_STAT_DIRECT_SCANS,
        QMP_STAT_ASYNC_RECLAIMS,
        QMP_STAT_DIRECT_RECLAIMS,
        _QMP_STAT_MAX,
} QmpStat;

typedef struct QmpGuestStats {
        uint64_t last_update;          /* guest time (s) of the last report; 0 = never */
        uint64_t value[_QMP_STAT_MAX]; /* QMP_VALUE_UNKNOWN when absent or -1 */
} QmpGuestStats;
typedef void (*qmp_guest_stats_fn)(QmpClient *c, const QmpReply *reply, const QmpGuestStats *stats, void *userdata);

const char *qmp_stat_to_name(QmpStat stat); /* "stat-swap-in", ... */
QmpStat qmp_stat_from_name(const char *name); /* _QMP_STAT_MAX when unknown */
int qmp_parse_guest_stats(json_object *result, QmpGuestStats *ret);
int qmp_get_guest_stats(QmpClient *c, const char *qom_path, uint64_t timeout_usec, qmp_guest_stats_fn callback, void *userdata);

/* ---- block devices (the host's view of the guest's disk reads) ---- */

/* The reads of every block device QEMU serves the guest, summed (query-blockstats, the
 * device-level "stats" of each entry; the protocol layers beneath are not added again). */
typedef struct QmpBlockReads {
        uint64_t bytes;      /* rd_bytes */
        /* rd_operations and rd_total_time_ns (the time the reads took from submission to
         * completion, summed over reads): QMP_VALUE_UNKNOWN, both, unless every device reports
         * both, so that their ratio is the mean time of the same reads */
        uint64_t operations;
        uint64_t time_ns;
} QmpBlockReads;
typedef void (*qmp_block_reads_fn)(QmpClient *c, const QmpReply *reply, const QmpBlockReads *reads, void *userdata);

/* An empty list is 0 of each. -EBADMSG for a malformed entry (rd_bytes missing, a field
 * present but not a non-negative integer); rd_operations or rd_total_time_ns missing is not
 * an error (not reported). Each sum saturates at UINT64_MAX - 1. */
int qmp_parse_blockstats_reads(json_object *result, QmpBlockReads *ret);
int qmp_query_blockstats_reads(QmpClient *c, uint64_t timeout_usec, qmp_block_reads_fn callback, void *userdata);

/* ---- memory devices ---- */

typedef enum QmpMemoryDeviceType {
        QMP_MEMORY_DEVICE_OTHER,
        QMP_MEMORY_DEVICE_DIMM,
        QMP_MEMORY_DEVICE_NVDIMM,
        QMP_MEMORY_DEVICE_VIRTIO_MEM,
        QMP_MEMORY_DEVICE_VIRTIO_PMEM,
} QmpMemoryDeviceType;

typedef struct QmpMemoryDevice {
        QmpMemoryDeviceType type;
        char *type_name;         /* as QEMU spelled it: "dimm", "virtio-mem", ... */
        char *id;                /* NULL when the device has no id */
        char *memdev;            /* backend QOM path; NULL when not reported */
        uint64_t size;           /* bytes currently provided */
        uint64_t address;        /* QMP_VALUE_UNKNOWN when not reported */
        int64_t node;            /* -1 when not reported */
        int64_t slot;            /* DIMMs only, else -1 */
        uint64_t requested_size; /* virtio-mem only, else QMP_VALUE_UNKNOWN */
        uint64_t max_size;       /* virtio-mem only */
        uint64_t block_size;     /* virtio-mem only */
} QmpMemoryDevice;

typedef struct QmpMemoryDeviceList {
        QmpMemoryDevice *devices;
        size_t n_devices;
} QmpMemoryDeviceList;
typedef void (*qmp_memory_devices_fn)(QmpClient *c,
                                      const QmpReply *reply,
                                      const QmpMemoryDeviceList *list,
                                      void *userdata);

/* On success *ret owns its strings: release with qmp_memory_device_list_clear(). */
int qmp_parse_memory_devices(json_object *result, QmpMemoryDeviceList *ret);
void qmp_memory_device_list_clear(QmpMemoryDeviceList *list);
const QmpMemoryDevice *qmp_memory_device_list_find(const QmpMemoryDeviceList *list, const char *id);
/* The list passed to the callback is freed after it returns. */
int qmp_query_memory_devices(QmpClient *c, uint64_t timeout_usec, qmp_memory_devices_fn callback, void *userdata);

/* qom-set requested-size on a virtio-mem device: id_or_path is a device id ("vm0") or a
 * QOM path starting with '/'. QEMU rejects sizes that are not block-size multiples. */
int qmp_virtio_mem_set_requested_size(QmpClient *c,
                                      const char *id_or_path,
                                      uint64_t bytes,
                                      uint64_t timeout_usec,
                                      qmp_reply_fn callback,
                                      void *userdata);

/* DIMM hotplug: object-add memory-backend-ram id=memdev_id size=bytes, then device_add
 * pc-dimm id=device_id memdev=memdev_id. If device_add fails, the backend is removed again
 * (best effort) and the device_add error is reported. timeout_usec applies per command. */
int qmp_dimm_add(QmpClient *c,
                 const char *device_id,
                 const char *memdev_id,
                 uint64_t bytes,
                 uint64_t timeout_usec,
                 qmp_reply_fn callback,
                 void *userdata);
/* device_del (completes when QEMU accepted the request; DEVICE_DELETED follows) and object-del. */
int qmp_device_del(QmpClient *c, const char *id, uint64_t timeout_usec, qmp_reply_fn callback, void *userdata);
int qmp_object_del(QmpClient *c, const char *id, uint64_t timeout_usec, qmp_reply_fn callback, void *userdata);
