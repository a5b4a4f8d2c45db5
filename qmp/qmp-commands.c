/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "qmp/json-util.h"
#include "qmp/qmp-commands.h"

/* ---- pure parsers ---- */

static int required(int r) {
        return r == -ENOENT ? -EBADMSG : r;
}

int qmp_parse_balloon_info(json_object *result, QmpBalloonInfo *ret) {
        QmpBalloonInfo info = {};
        int r;

        r = required(json_member_get_u64(result, "actual", &info.actual));
        if (r < 0)
                return r;
        *ret = info;
        return 0;
}

/* Saturates below UINT64_MAX, which callers read as "not reported". */
static uint64_t add_saturating(uint64_t sum, uint64_t v) {
        return v >= UINT64_MAX - 1 - sum ? UINT64_MAX - 1 : sum + v;
}

int qmp_parse_blockstats_reads(json_object *result, QmpBlockReads *ret) {
        QmpBlockReads sum = {};
        bool timed = true;

        if (!json_object_is_type(result, json_type_array))
                return -EBADMSG;
        for (size_t i = 0, n = json_object_array_length(result); i < n; i++) {
                json_object *entry = json_object_array_get_idx(result, i), *stats;
                uint64_t rd, ops = QMP_VALUE_UNKNOWN, ns = QMP_VALUE_UNKNOWN;
                int r;

                if (!json_object_is_type(entry, json_type_object))
                        return -EBADMSG;
                r = required(json_member_get_object(entry, "stats", &stats));
                if (r < 0)
                        return r;
                r = required(json_member_get_u64(stats, "rd_bytes", &rd));
                if (r < 0)
                        return r;
                /* absent in a QEMU too old to count them: not reported */
                r = json_member_get_u64_optional(stats, "rd_operations", &ops);
                if (r < 0)
                        return r;
                r = json_member_get_u64_optional(stats, "rd_total_time_ns", &ns);
                if (r < 0)
                        return r;
                sum.bytes = add_saturating(sum.bytes, rd);
                /* A device without either leaves the pair unknown: a mean over some devices'
                 * time and others' count would be neither's. */
                timed = timed && qmp_value_is_known(ops) && qmp_value_is_known(ns);
                if (timed) {
                        sum.operations = add_saturating(sum.operations, ops);
                        sum.time_ns = add_saturating(sum.time_ns, ns);
                }
        }
        if (!timed)
                sum.operations = sum.time_ns = QMP_VALUE_UNKNOWN;
        *ret = sum;
        return 0;
}

static const char *const stat_names[_QMP_STAT_MAX] = {
        [QMP_STAT_SWAP_IN] = "stat-swap-in",
        [QMP_STAT_SWAP_OUT] = "stat-swap-out",
        [QMP_STAT_MAJOR_FAULTS] = "stat-major-faults",
        [QMP_STAT_MINOR_FAULTS] = "stat-minor-faults",
        [QMP_STAT_FREE_MEMORY] = "stat-free-memory",
        [QMP_STAT_TOTAL_MEMORY] = "stat-total-memory",
        [QMP_STAT_AVAILABLE_MEMORY] = "stat-available-memory",
        [QMP_STAT_DISK_CACHES] = "stat-disk-caches",
        [QMP_STAT_HTLB_PGALLOC] = "stat-htlb-pgalloc",
        [QMP_STAT_HTLB_PGFAIL] = "stat-htlb-pgfail",
        [QMP_STAT_OOM_KILLS] = "stat-oom-kills",
        [QMP_STAT_ALLOC_STALLS] = "stat-alloc-stalls",
        [QMP_STAT_ASYNC_SCANS] = "stat-async-scans",
        [QMP_STAT_DIRECT_SCANS] = "stat-direct-scans",
        [QMP_STAT_ASYNC_RECLAIMS] = "stat-async-reclaims",
        [QMP_STAT_DIRECT_RECLAIMS] = "stat-direct-reclaims",
};

const char *qmp_stat_to_name(QmpStat stat) {
        if ((unsigned) stat >= _QMP_STAT_MAX)
                return NULL;
        return stat_names[stat];
}

QmpStat qmp_stat_from_name(const char *name) {
        if (name)
                for (size_t i = 0; i < _QMP_STAT_MAX; i++)
                        if (strcmp(stat_names[i], name) == 0)
                                return (QmpStat) i;
        return _QMP_STAT_MAX;
}

int qmp_parse_guest_stats(json_object *result, QmpGuestStats *ret) {
        QmpGuestStats stats;
        json_object *values;
        int r;

        r = required(json_member_get_object(result, "stats", &values));
        if (r < 0)
                return r;
        r = required(json_member_get_u64(result, "last-update", &stats.last_update));
        if (r < 0)
                return r;

        for (size_t i = 0; i < _QMP_STAT_MAX; i++) {
                json_object *v;

                stats.value[i] = QMP_VALUE_UNKNOWN;
                /* Absent: this QEMU or guest does not know the stat; unknown, not zero. */
                if (!json_object_object_get_ex(values, stat_names[i], &v))
                        continue;
                r = json_value_get_u64_or_unset(v, &stats.value[i]);
                if (r < 0)
                        return r;
        }
        /* Stats this code does not know yet are ignored on purpose. */
        *ret = stats;
        return 0;
}

void qmp_memory_device_list_clear(QmpMemoryDeviceList *list) {
        if (!list)
                return;
        for (size_t i = 0; i < list->n_devices; i++) {
                free(list->devices[i].type_name);
                free(list->devices[i].id);
                free(list->devices[i].memdev);
        }
        free(list->devices);
        *list = (QmpMemoryDeviceList) {};
}

const QmpMemoryDevice *qmp_memory_device_list_find(const QmpMemoryDeviceList *list, const char *id) {
        if (!list || !id)
                return NULL;
        for (size_t i = 0; i < list->n_devices; i++)
                if (list->devices[i].id && strcmp(list->devices[i].id, id) == 0)
                        return &list->devices[i];
        return NULL;
}

static QmpMemoryDeviceType memory_device_type_from_name(const char *name) {
        static const struct {
                const char *name;
                QmpMemoryDeviceType type;
        } table[] = {
                { "dimm", QMP_MEMORY_DEVICE_DIMM },
                { "nvdimm", QMP_MEMORY_DEVICE_NVDIMM },
                { "virtio-mem", QMP_MEMORY_DEVICE_VIRTIO_MEM },
                { "virtio-pmem", QMP_MEMORY_DEVICE_VIRTIO_PMEM },
        };

        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                if (strcmp(table[i].name, name) == 0)
                        return table[i].type;
        return QMP_MEMORY_DEVICE_OTHER;
}

static int parse_memory_device(json_object *entry, QmpMemoryDevice *d) {
        const char *type_name, *id = NULL, *memdev = NULL;
        json_object *data;
        int r;

        *d = (QmpMemoryDevice) {
                .size = QMP_VALUE_UNKNOWN,
                .address = QMP_VALUE_UNKNOWN,
                .node = -1,
                .slot = -1,
                .requested_size = QMP_VALUE_UNKNOWN,
                .max_size = QMP_VALUE_UNKNOWN,
                .block_size = QMP_VALUE_UNKNOWN,
        };

        if (!json_object_is_type(entry, json_type_object))
                return -EBADMSG;
        r = required(json_member_get_string(entry, "type", &type_name));
        if (r < 0)
                return r;
        r = required(json_member_get_object(entry, "data", &data));
        if (r < 0)
                return r;
        d->type = memory_device_type_from_name(type_name);

        if ((r = json_member_get_string_optional(data, "id", &id)) < 0 ||
            (r = json_member_get_string_optional(data, "memdev", &memdev)) < 0 ||
            (r = json_member_get_i64_optional(data, "node", &d->node)) < 0)
                return r;

        switch (d->type) {
        case QMP_MEMORY_DEVICE_DIMM:
        case QMP_MEMORY_DEVICE_NVDIMM:
                if ((r = required(json_member_get_u64(data, "size", &d->size))) < 0 ||
                    (r = required(json_member_get_i64(data, "slot", &d->slot))) < 0 ||
                    (r = json_member_get_u64_optional(data, "addr", &d->address)) < 0)
                        return r;
                break;
        case QMP_MEMORY_DEVICE_VIRTIO_MEM:
                if ((r = required(json_member_get_u64(data, "size", &d->size))) < 0 ||
                    (r = required(json_member_get_u64(data, "requested-size", &d->requested_size))) < 0 ||
                    (r = required(json_member_get_u64(data, "max-size", &d->max_size))) < 0 ||
                    (r = required(json_member_get_u64(data, "block-size", &d->block_size))) < 0 ||
                    (r = json_member_get_u64_optional(data, "memaddr", &d->address)) < 0)
                        return r;
                break;
        case QMP_MEMORY_DEVICE_VIRTIO_PMEM:
                if ((r = required(json_member_get_u64(data, "size", &d->size))) < 0 ||
                    (r = json_member_get_u64_optional(data, "memaddr", &d->address)) < 0)
                        return r;
                break;
        default:
                /* A device type we do not model: keep what is generic, if well-formed. */
                r = json_member_get_u64_optional(data, "size", &d->size);
                if (r < 0)
                        return r;
                break;
        }

        d->type_name = strdup(type_name);
        d->id = id ? strdup(id) : NULL;
        d->memdev = memdev ? strdup(memdev) : NULL;
        if (!d->type_name || (id && !d->id) || (memdev && !d->memdev)) {
                free(d->type_name);
                free(d->id);
                free(d->memdev);
                return -ENOMEM;
        }
        return 0;
}

int qmp_parse_memory_devices(json_object *result, QmpMemoryDeviceList *ret) {
        QmpMemoryDeviceList list = {};
        size_t n;
        int r;

        if (!result || !json_object_is_type(result, json_type_array))
                return -EBADMSG;
        n = json_object_array_length(result);
        if (n > 0) {
                list.devices = calloc(n, sizeof(QmpMemoryDevice));
                if (!list.devices)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                r = parse_memory_device(json_object_array_get_idx(result, i), &list.devices[i]);
                if (r < 0) {
                        qmp_memory_device_list_clear(&list);
                        return r;
                }
                list.n_devices++;
        }
        *ret = list;
        return 0;
}

/* ---- asynchronous helpers ---- */

typedef struct HelperCall HelperCall;
struct HelperCall {
        /* Turns the raw reply into the typed callback. */
        void (*handle)(HelperCall *call, QmpClient *c, const QmpReply *reply);
        union {
                qmp_reply_fn plain;
                qmp_u64_fn u64;
                qmp_bool_fn boolean;
                qmp_balloon_info_fn balloon_info;
                qmp_guest_stats_fn guest_stats;
                qmp_memory_devices_fn memory_devices;
                qmp_block_reads_fn block_reads;
        } callback;
        void *userdata;
        qmp_destroy_fn destroy; /* of userdata, once, after the callback or instead of it */
};

static void helper_call_free(void *p) {
        HelperCall *call = p;

        if (call->destroy)
                call->destroy(call->userdata);
        free(call);
}

static void on_helper_reply(QmpClient *c, const QmpReply *reply, void *userdata) {
        HelperCall *call = userdata;

        call->handle(call, c, reply);
}

static int helper_execute(QmpClient *c,
                          const char *command,
                          json_object *arguments,
                          uint64_t timeout_usec,
                          HelperCall *template) {
        HelperCall *call = malloc(sizeof(*call));
        int r;

        if (!call) {
                json_object_put(arguments);
                return -ENOMEM;
        }
        *call = *template;
        r = qmp_client_execute_full(c, command, arguments, timeout_usec, on_helper_reply, call, helper_call_free);
        if (r < 0)
                free(call);
        return r;
}

/* A malformed successful reply becomes -EBADMSG with a description naming the command. */
static QmpReply bad_reply(const QmpReply *reply, int error, const char *desc) {
        QmpReply r = *reply;

        r.error = error;
        r.error_class = NULL;
        r.error_desc = desc;
        r.result = NULL;
        return r;
}

static void handle_plain(HelperCall *call, QmpClient *c, const QmpReply *reply) {
        if (call->callback.plain)
                call->callback.plain(c, reply, call->userdata);
}

static int execute_plain(QmpClient *c,
                         const char *command,
                         json_object *arguments,
                         uint64_t timeout_usec,
                         qmp_reply_fn callback,
                         void *userdata) {
        return helper_execute(c,
                              command,
                              arguments,
                              timeout_usec,
                              &(HelperCall) {
                                      .handle = handle_plain,
                                      .callback.plain = callback,
                                      .userdata = userdata,
                              });
}

static json_object *qom_arguments(const char *path, const char *property, json_object *value) {
        json_object *args = json_object_new_object();

        if (!args) {
                json_object_put(value);
                return NULL;
        }
        if (json_object_object_add(args, "path", json_object_new_string(path)) < 0 ||
            json_object_object_add(args, "property", json_object_new_string(property)) < 0 ||
            (value && json_object_object_add(args, "value", value) < 0)) {
                json_object_put(args);
                return NULL;
        }
        return args;
}

int qmp_qom_get(QmpClient *c, const char *path, const char *property, uint64_t timeout_usec, qmp_reply_fn callback, void *userdata) {
        json_object *args;

        if (!c || !path || !property)
                return -EINVAL;
        args = qom_arguments(path, property, NULL);
        if (!args)
                return -ENOMEM;
        return execute_plain(c, "qom-get", args, timeout_usec, callback, userdata);
}

int qmp_qom_set(QmpClient *c,
                const char *path,
                const char *property,
                json_object *value,
                uint64_t timeout_usec,
                qmp_reply_fn callback,
                void *userdata) {
        json_object *args;

        if (!c || !path || !property || !value) {
                json_object_put(value);
                return -EINVAL;
        }
        args = qom_arguments(path, property, value);
        if (!args)
                return -ENOMEM;
        return execute_plain(c, "qom-set", args, timeout_usec, callback, userdata);
}

static void handle_balloon_info(HelperCall *call, QmpClient *c, const QmpReply *reply) {
        QmpBalloonInfo info;
        QmpReply r = *reply;
        int k;

        if (r.error == 0 && (k = qmp_parse_balloon_info(reply->result, &info)) < 0)
                r = bad_reply(reply, k, "malformed reply to query-balloon");
        if (call->callback.balloon_info)
                call->callback.balloon_info(c, &r, r.error == 0 ? &info : NULL, call->userdata);
}

int qmp_query_balloon(QmpClient *c, uint64_t timeout_usec, qmp_balloon_info_fn callback, void *userdata) {
        if (!c)
                return -EINVAL;
        return helper_execute(c,
                              "query-balloon",
                              NULL,
                              timeout_usec,
                              &(HelperCall) {
                                      .handle = handle_balloon_info,
                                      .callback.balloon_info = callback,
                                      .userdata = userdata,
                              });
}

int qmp_balloon_set_target_full(QmpClient *c, uint64_t target_bytes, uint64_t timeout_usec, qmp_reply_fn callback,
                                void *userdata, qmp_destroy_fn destroy) {
        json_object *args;

        /* QAPI declares the value as int (int64). */
        if (!c || target_bytes == 0 || target_bytes > INT64_MAX)
                return -EINVAL;
        args = json_object_new_object();
        if (!args || json_object_object_add(args, "value", json_object_new_int64((int64_t) target_bytes)) < 0) {
                json_object_put(args);
                return -ENOMEM;
        }
        return helper_execute(c, "balloon", args, timeout_usec,
                              &(HelperCall) {
                                      .handle = handle_plain,
                                      .callback.plain = callback,
                                      .userdata = userdata,
                                      .destroy = destroy,
                              });
}

int qmp_set_stats_polling_interval(QmpClient *c,
                                   const char *qom_path,
                                   unsigned seconds,
                                   uint64_t timeout_usec,
                                   qmp_reply_fn callback,
                                   void *userdata) {
        json_object *value;

        if (!c || seconds > INT32_MAX)
                return -EINVAL;
        value = json_object_new_int64(seconds);
        if (!value)
                return -ENOMEM;
        return qmp_qom_set(c,
                           qom_path ? qom_path : QMP_BALLOON_QOM_PATH,
                           QMP_BALLOON_STATS_POLLING_INTERVAL,
                           value,
                           timeout_usec,
                           callback,
                           userdata);
}

static void handle_u64(HelperCall *call, QmpClient *c, const QmpReply *reply) {
        uint64_t value = 0;
        QmpReply r = *reply;
        int k;

        if (r.error == 0 && (k = json_value_get_u64(reply->result, &value)) < 0)
                r = bad_reply(reply, k, "qom-get returned a value that is not a non-negative integer");
        if (call->callback.u64)
                call->callback.u64(c, &r, r.error == 0 ? value : 0, call->userdata);
}

static void handle_blockstats(HelperCall *call, QmpClient *c, const QmpReply *reply) {
        QmpBlockReads reads = { .operations = QMP_VALUE_UNKNOWN, .time_ns = QMP_VALUE_UNKNOWN };
        QmpReply r = *reply;
        int k;

        if (r.error == 0 && (k = qmp_parse_blockstats_reads(reply->result, &reads)) < 0)
                r = bad_reply(reply, k, "malformed reply to query-blockstats");
        if (call->callback.block_reads)
                call->callback.block_reads(c, &r, r.error == 0 ? &reads : NULL, call->userdata);
}

int qmp_query_blockstats_reads(QmpClient *c, uint64_t timeout_usec, qmp_block_reads_fn callback, void *userdata) {
        if (!c)
                return -EINVAL;
        return helper_execute(c,
                              "query-blockstats",
                              NULL,
                              timeout_usec,
                              &(HelperCall) {
                                      .handle = handle_blockstats,
                                      .callback.block_reads = callback,
                                      .userdata = userdata,
                              });
}

static void handle_bool(HelperCall *call, QmpClient *c, const QmpReply *reply) {
        QmpReply r = *reply;
        bool value = false;

        if (r.error == 0) {
                if (reply->result && json_object_is_type(reply->result, json_type_boolean))
                        value = json_object_get_boolean(reply->result);
                else
                        r = bad_reply(reply, -EBADMSG, "qom-get returned a value that is not a boolean");
        }
        if (call->callback.boolean)
                call->callback.boolean(c, &r, value, call->userdata);
}

static int qom_get_typed(QmpClient *c, const char *path, const char *property, uint64_t timeout_usec, HelperCall *template) {
        json_object *args;

        if (!c || !property)
                return -EINVAL;
        args = qom_arguments(path ? path : QMP_BALLOON_QOM_PATH, property, NULL);
        if (!args)
                return -ENOMEM;
        return helper_execute(c, "qom-get", args, timeout_usec, template);
}

int qmp_qom_get_u64(QmpClient *c, const char *qom_path, const char *property, uint64_t timeout_usec,
                    qmp_u64_fn callback, void *userdata) {
        return qom_get_typed(c,
                             qom_path,
                             property,
                             timeout_usec,
                             &(HelperCall) {
                                     .handle = handle_u64,
                                     .callback.u64 = callback,
                                     .userdata = userdata,
                             });
}

int qmp_qom_get_bool(QmpClient *c, const char *qom_path, const char *property, uint64_t timeout_usec,
                     qmp_bool_fn callback, void *userdata) {
        return qom_get_typed(c,
                             qom_path,
                             property,
                             timeout_usec,
                             &(HelperCall) {
                                     .handle = handle_bool,
                                     .callback.boolean = callback,
                                     .userdata = userdata,
                             });
}

static void handle_guest_stats(HelperCall *call, QmpClient *c, const QmpReply *reply) {
        QmpGuestStats stats;
        QmpReply r = *reply;
        int k;

        if (r.error == 0 && (k = qmp_parse_guest_stats(reply->result, &stats)) < 0)
                r = bad_reply(reply, k, "malformed guest-stats");
        if (call->callback.guest_stats)
                call->callback.guest_stats(c, &r, r.error == 0 ? &stats : NULL, call->userdata);
}

int qmp_get_guest_stats(QmpClient *c, const char *qom_path, uint64_t timeout_usec, qmp_guest_stats_fn callback, void *userdata) {
        return qom_get_typed(c,
                             qom_path,
                             "guest-stats",
                             timeout_usec,
                             &(HelperCall) {
                                     .handle = handle_guest_stats,
                                     .callback.guest_stats = callback,
                                     .userdata = userdata,
                             });
}

static void handle_memory_devices(HelperCall *call, QmpClient *c, const QmpReply *reply) {
        QmpMemoryDeviceList list = {};
        QmpReply r = *reply;
        int k;

        if (r.error == 0 && (k = qmp_parse_memory_devices(reply->result, &list)) < 0)
                r = bad_reply(reply, k, "malformed reply to query-memory-devices");
        if (call->callback.memory_devices)
                call->callback.memory_devices(c, &r, r.error == 0 ? &list : NULL, call->userdata);
        qmp_memory_device_list_clear(&list);
}

int qmp_query_memory_devices(QmpClient *c, uint64_t timeout_usec, qmp_memory_devices_fn callback, void *userdata) {
        if (!c)
                return -EINVAL;
        return helper_execute(c,
                              "query-memory-devices",
                              NULL,
                              timeout_usec,
                              &(HelperCall) {
                                      .handle = handle_memory_devices,
                                      .callback.memory_devices = callback,
                                      .userdata = userdata,
                              });
}

int qmp_virtio_mem_set_requested_size(QmpClient *c,
                                      const char *id_or_path,
                                      uint64_t bytes,
                                      uint64_t timeout_usec,
                                      qmp_reply_fn callback,
                                      void *userdata) {
        char path[512];
        json_object *value;

        if (!c || !id_or_path || !*id_or_path || bytes > INT64_MAX)
                return -EINVAL;
        if (id_or_path[0] == '/')
                snprintf(path, sizeof(path), "%s", id_or_path);
        else if (snprintf(path, sizeof(path), "/machine/peripheral/%s", id_or_path) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        value = json_object_new_int64((int64_t) bytes);
        if (!value)
                return -ENOMEM;
        return qmp_qom_set(c, path, "requested-size", value, timeout_usec, callback, userdata);
}

static int execute_with_id(
                QmpClient *c, const char *command, const char *id, uint64_t timeout_usec, qmp_reply_fn callback, void *userdata) {
        json_object *args;

        if (!c || !id)
                return -EINVAL;
        args = json_object_new_object();
        if (!args || json_object_object_add(args, "id", json_object_new_string(id)) < 0) {
                json_object_put(args);
                return -ENOMEM;
        }
        return execute_plain(c, command, args, timeout_usec, callback, userdata);
}

int qmp_device_del(QmpClient *c, const char *id, uint64_t timeout_usec, qmp_reply_fn callback, void *userdata) {
        return execute_with_id(c, "device_del", id, timeout_usec, callback, userdata);
}

int qmp_object_del(QmpClient *c, const char *id, uint64_t timeout_usec, qmp_reply_fn callback, void *userdata) {
        return execute_with_id(c, "object-del", id, timeout_usec, callback, userdata);
}

/* ---- DIMM hotplug: a chain of up to three commands sharing one context ---- */

typedef struct DimmAdd {
        unsigned n_ref; /* one per command in flight */
        char *device_id;
        char *memdev_id;
        uint64_t timeout_usec;
        qmp_reply_fn callback;
        void *userdata;
        /* The device_add failure, kept across the rollback. */
        int error;
        char *error_class;
        char *error_desc;
} DimmAdd;

static void dimm_add_unref(void *userdata) {
        DimmAdd *d = userdata;

        if (!d || --d->n_ref > 0)
                return;
        free(d->device_id);
        free(d->memdev_id);
        free(d->error_class);
        free(d->error_desc);
        free(d);
}

static void dimm_add_finish(DimmAdd *d, QmpClient *c, const QmpReply *reply) {
        if (d->callback)
                d->callback(c, reply, d->userdata);
        d->callback = NULL;
}

static void on_dimm_rollback(QmpClient *c, const QmpReply *reply, void *userdata) {
        DimmAdd *d = userdata;
        QmpReply r = {
                .error = d->error,
                .error_class = d->error_class,
                .error_desc = d->error_desc,
        };

        /* Whatever object-del said, the caller wants to know why device_add failed. */
        dimm_add_finish(d, c, &r);
}

static void on_dimm_device_add(QmpClient *c, const QmpReply *reply, void *userdata) {
        DimmAdd *d = userdata;
        json_object *args;
        int r;

        if (reply->error == 0 || reply->error == -ECONNRESET) {
                dimm_add_finish(d, c, reply);
                return;
        }

        d->error = reply->error;
        (void) strdup_replace(&d->error_class, reply->error_class);
        (void) strdup_replace(&d->error_desc, reply->error_desc);

        args = json_object_new_object();
        if (args && json_object_object_add(args, "id", json_object_new_string(d->memdev_id)) == 0) {
                d->n_ref++;
                r = qmp_client_execute_full(c, "object-del", args, d->timeout_usec, on_dimm_rollback, d, dimm_add_unref);
                if (r >= 0)
                        return;
                d->n_ref--;
        } else
                json_object_put(args);
        dimm_add_finish(d, c, reply);
}

static void on_dimm_object_add(QmpClient *c, const QmpReply *reply, void *userdata) {
        DimmAdd *d = userdata;
        json_object *args;
        int r;

        if (reply->error != 0) {
                dimm_add_finish(d, c, reply);
                return;
        }

        args = json_object_new_object();
        if (!args || json_object_object_add(args, "driver", json_object_new_string("pc-dimm")) < 0 ||
            json_object_object_add(args, "id", json_object_new_string(d->device_id)) < 0 ||
            json_object_object_add(args, "memdev", json_object_new_string(d->memdev_id)) < 0) {
                json_object_put(args);
                r = -ENOMEM;
        } else {
                d->n_ref++;
                r = qmp_client_execute_full(c, "device_add", args, d->timeout_usec, on_dimm_device_add, d, dimm_add_unref);
                if (r >= 0)
                        return;
                d->n_ref--;
        }
        QmpReply failure = { .error = r, .error_desc = "cannot send device_add" };
        dimm_add_finish(d, c, &failure);
}

int qmp_dimm_add(QmpClient *c,
                 const char *device_id,
                 const char *memdev_id,
                 uint64_t bytes,
                 uint64_t timeout_usec,
                 qmp_reply_fn callback,
                 void *userdata) {
        json_object *args;
        DimmAdd *d;
        int r;

        if (!c || !device_id || !memdev_id || bytes == 0 || bytes > INT64_MAX)
                return -EINVAL;
        d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        *d = (DimmAdd) {
                .n_ref = 1,
                .device_id = strdup(device_id),
                .memdev_id = strdup(memdev_id),
                .timeout_usec = timeout_usec,
                .callback = callback,
                .userdata = userdata,
        };
        args = json_object_new_object();
        if (!d->device_id || !d->memdev_id || !args ||
            json_object_object_add(args, "qom-type", json_object_new_string("memory-backend-ram")) < 0 ||
            json_object_object_add(args, "id", json_object_new_string(memdev_id)) < 0 ||
            json_object_object_add(args, "size", json_object_new_int64((int64_t) bytes)) < 0) {
                json_object_put(args);
                dimm_add_unref(d);
                return -ENOMEM;
        }
        r = qmp_client_execute_full(c, "object-add", args, timeout_usec, on_dimm_object_add, d, dimm_add_unref);
        if (r < 0)
                dimm_add_unref(d);
        return r;
}
