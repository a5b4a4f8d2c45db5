/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fake-qemu's QMP: the commands rightsized uses (query-balloon, balloon, qom-get/-set of the
 * balloon's guest-stats and of a virtio-mem device, the memory queries), answered from the guest
 * model; the handshake; BALLOON_CHANGE and the event flood; and each QMP fault's way of
 * breaking a reply (garbage, huge, deeply nested, mistyped, hung, cut, lying statistics). The
 * sockets and connections are fake-qemu.c's, the agent is fake-agent.c. */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "common/macro.h"
#include "policies/rs-value.h"
#include "tests/model/guest-model.h"
#include "tests/sim/fake-qemu.h"

#define BALLOON_PATH "/machine/peripheral/balloon0"
#define VIRTIO_MEM_ID "vm0"
#define DEEP_NESTING 100000
#define CONTAINER_FLOOD_BYTES (1024 * 1024 - 256)
#define FLOOD_EVENTS_PER_REPLY 200
#define FLOOD_QUEUE_MAX (1 * MIB) /* a reader that does not keep up does not grow us */

static int conn_queue_json(Conn *c, json_object *o) {
        if (c->pad_left > 0 || c->pad_suffix)
                return 0; /* nothing may cut into a huge reply on its way out */
        const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        int r = conn_queue(c, s, strlen(s));
        if (r >= 0)
                r = conn_queue(c, "\r\n", 2);
        return r;
}

static json_object *timestamp_now(void) {
        struct timespec ts;
        json_object *o = json_object_new_object();
        clock_gettime(CLOCK_REALTIME, &ts);
        json_object_object_add(o, "seconds", json_object_new_int64(ts.tv_sec));
        json_object_object_add(o, "microseconds", json_object_new_int64(ts.tv_nsec / 1000));
        return o;
}

static void conn_send_balloon_change(Conn *c) {
        json_object *ev = json_object_new_object(), *data = json_object_new_object();
        json_object_object_add(ev, "event", json_object_new_string("BALLOON_CHANGE"));
        json_object_object_add(data, "actual", json_object_new_uint64(c->guest->model.actual));
        json_object_object_add(ev, "data", data);
        json_object_object_add(ev, "timestamp", timestamp_now());
        (void) conn_queue_json(c, ev);
        json_object_put(ev);
}

void broadcast_balloon_change(Guest *g) {
        for (Conn *c = g->conns; c; c = c->next)
                if (c->negotiated)
                        conn_send_balloon_change(c);
}

/* Events a client must read and can only ignore: true balloon sizes and unrelated ones. */
void conn_flood(Conn *c, unsigned n) {
        static const char rtc[] = "{\"event\": \"RTC_CHANGE\", \"data\": {\"offset\": 0, \"qom-path\": "
                                  "\"/machine/unattached/device[0]\"}, \"timestamp\": {\"seconds\": 1700000000, "
                                  "\"microseconds\": 0}}\r\n";
        for (unsigned i = 0; i < n && c->out_len < FLOOD_QUEUE_MAX && !c->pad_left && !c->pad_suffix; i++) {
                if (i % 2 == 0)
                        conn_send_balloon_change(c);
                else
                        (void) conn_queue(c, rtc, sizeof(rtc) - 1);
        }
}

/* Every value of the wrong JSON type: numbers become strings, strings numbers, objects keep
 * their keys with mistyped values, arrays become objects. */
static json_object *mistype(json_object *v) {
        switch (json_object_get_type(v)) {
        case json_type_int:
        case json_type_double:
                return json_object_new_string(json_object_get_string(v));
        case json_type_boolean:
                return json_object_new_int(json_object_get_boolean(v) ? 1 : 0);
        case json_type_string:
                return json_object_new_int(42);
        case json_type_array:
                return json_object_new_object();
        case json_type_object: {
                json_object *o = json_object_new_object();
                json_object_object_foreach(v, key, member)
                        json_object_object_add(o, key, mistype(member));
                return o;
        }
        default:
                return json_object_new_boolean(true);
        }
}

/* Sends a reply as the guest's fault dictates. Returns <0 to drop the connection now. */
static int conn_reply(Conn *c, json_object *reply) {
        json_object *v;

        if (c->pad_left > 0 || c->pad_suffix)
                return 0; /* still sending a huge reply: later ones are lost in it */
        switch (guest_fault(c->guest)) {
        case FAULT_GARBAGE: {
                static const char garbage[] = "}{\"return\": [1, 2,, \x01\xff\xfe nonsense ]]]\r\n";
                return conn_queue(c, garbage, sizeof(garbage) - 1);
        }
        case FAULT_HUGE_REPLY: {
                /* {...reply..., "padding": "xxxx...x"}: the x's are generated as the socket drains. */
                const char *s = json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN);
                size_t len = strlen(s);
                int r = conn_queue(c, s, len - 1); /* without the closing brace */
                if (r >= 0)
                        r = conn_queue(c, ", \"padding\": \"", strlen(", \"padding\": \""));
                if (r < 0)
                        return r;
                c->pad_suffix = strdup("\"}\r\n");
                if (!c->pad_suffix)
                        return -ENOMEM;
                c->pad_left = huge_reply_size;
                return conn_update_events(c);
        }
        case FAULT_DEEP_NESTING: {
                _cleanup_free_ char *deep = malloc(2 * DEEP_NESTING + 64);
                if (!deep)
                        return -ENOMEM;
                size_t n = (size_t) sprintf(deep, "{\"return\": ");
                memset(deep + n, '[', DEEP_NESTING);
                n += DEEP_NESTING;
                memset(deep + n, ']', DEEP_NESTING);
                n += DEEP_NESTING;
                if (json_object_object_get_ex(reply, "id", &v))
                        n += (size_t) sprintf(deep + n, ", \"id\": %s", json_object_to_json_string(v));
                n += (size_t) sprintf(deep + n, "}\r\n");
                return conn_queue(c, deep, n);
        }
        case FAULT_CONTAINER_FLOOD: {
                /* Within the 1 MiB byte cap: what json-c makes of it is what a cap must bound. */
                size_t count = (CONTAINER_FLOOD_BYTES - 128) / 3, n;
                _cleanup_free_ char *flood = malloc(CONTAINER_FLOOD_BYTES);
                if (!flood)
                        return -ENOMEM;
                n = (size_t) sprintf(flood, "{\"return\": [{}");
                for (size_t i = 1; i < count; i++, n += 3)
                        memcpy(flood + n, ",{}", 3);
                n += (size_t) sprintf(flood + n, "]");
                if (json_object_object_get_ex(reply, "id", &v))
                        n += (size_t) snprintf(flood + n, 64, ", \"id\": %s", json_object_to_json_string(v));
                n += (size_t) sprintf(flood + n, "}\r\n");
                return conn_queue(c, flood, n);
        }
        case FAULT_WRONG_TYPES:
                if (json_object_object_get_ex(reply, "return", &v))
                        json_object_object_add(reply, "return", mistype(v));
                return conn_queue_json(c, reply);
        case FAULT_EVENT_FLOOD:
                conn_flood(c, FLOOD_EVENTS_PER_REPLY);
                return conn_queue_json(c, reply);
        case FAULT_HANG:
                return 0;
        case FAULT_CLOSE_MID_REPLY: {
                const char *s = json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN);
                int r = conn_queue(c, s, MAX(strlen(s) / 2, (size_t) 1));
                c->close_after_flush = true;
                return r;
        }
        default:
                return conn_queue_json(c, reply);
        }
}

json_object *error_reply(const char *class, const char *desc) {
        json_object *o = json_object_new_object(), *e = json_object_new_object();
        json_object_object_add(e, "class", json_object_new_string(class));
        json_object_object_add(e, "desc", json_object_new_string(desc));
        json_object_object_add(o, "error", e);
        return o;
}

json_object *return_reply(json_object *value) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "return", value ?: json_object_new_object());
        return o;
}

static json_object *guest_stats_json(Guest *g) {
        static const struct {
                const char *name;
                bool level;
                unsigned index;
        } map[] = {
                { "stat-swap-in", false, RS_COUNTER_SWAP_IN },
                { "stat-swap-out", false, RS_COUNTER_SWAP_OUT },
                { "stat-major-faults", false, RS_COUNTER_MAJOR_FAULTS },
                { "stat-minor-faults", false, RS_COUNTER_MINOR_FAULTS },
                { "stat-free-memory", true, RS_LEVEL_FREE },
                { "stat-total-memory", true, RS_LEVEL_TOTAL },
                { "stat-available-memory", true, RS_LEVEL_AVAILABLE },
                { "stat-disk-caches", true, RS_LEVEL_DISK_CACHES },
                { "stat-oom-kills", false, RS_COUNTER_OOM_KILLS },
                { "stat-alloc-stalls", false, RS_COUNTER_ALLOC_STALLS },
                { "stat-async-scans", false, RS_COUNTER_ASYNC_SCANS },
                { "stat-direct-scans", false, RS_COUNTER_DIRECT_SCANS },
                { "stat-async-reclaims", false, RS_COUNTER_ASYNC_RECLAIMS },
                { "stat-direct-reclaims", false, RS_COUNTER_DIRECT_RECLAIMS },
        };
        json_object *o = json_object_new_object(), *stats = json_object_new_object();
        FaultKind fault = guest_fault(g);
        uint64_t refreshes = g->stats_updated_usec / MAX(g->model.cfg.interval_usec, (uint64_t) 1);
        uint64_t last_update = g->have_stats ? STATS_EPOCH + guest_stats_reported_usec(g) / USEC_PER_SEC : 0;

        for (size_t i = 0; i < ARRAY_SIZE(map); i++) {
                uint64_t v = !g->have_stats ? RS_UNKNOWN
                             : map[i].level ? g->stats.level[map[i].index]
                                            : g->stats.counter[map[i].index];
                if (g->have_stats && fault == FAULT_LIE_FREE && map[i].level && map[i].index == RS_LEVEL_FREE)
                        v = g->stats.level[RS_LEVEL_TOTAL] + GIB;
                else if (g->have_stats && fault == FAULT_LIE_BACKWARDS && !map[i].level && v != RS_UNKNOWN)
                        v = UINT64_C(1000000000) - MIN(refreshes * 100000, UINT64_C(999999999)); /* ever smaller */
                else if (g->have_stats && fault == FAULT_LIE_HUGE)
                        v = UINT64_MAX - 2 - i;
                /* QEMU sends -1 for what the guest did not report */
                json_object_object_add(stats, map[i].name,
                                       v == RS_UNKNOWN ? json_object_new_int64(-1) : json_object_new_uint64(v));
        }
        if (g->have_stats && fault == FAULT_LIE_FUTURE) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                last_update = (uint64_t) ts.tv_sec + 10 * 365 * 24 * 3600ULL + refreshes;
        }
        json_object_object_add(o, "stats", stats);
        json_object_object_add(o, "last-update", json_object_new_uint64(last_update));
        return o;
}

static json_object *memory_devices_json(Guest *g) {
        json_object *a = json_object_new_array();
        if (g->vm_max == 0)
                return a;
        json_object *dev = json_object_new_object(), *data = json_object_new_object();
        json_object_object_add(data, "id", json_object_new_string(VIRTIO_MEM_ID));
        json_object_object_add(data, "memaddr", json_object_new_uint64(UINT64_C(0x140000000)));
        json_object_object_add(data, "node", json_object_new_int(0));
        json_object_object_add(data, "requested-size", json_object_new_uint64(g->vm_requested));
        json_object_object_add(data, "size", json_object_new_uint64(g->vm_size));
        json_object_object_add(data, "max-size", json_object_new_uint64(g->vm_max));
        json_object_object_add(data, "block-size", json_object_new_uint64(VIRTIO_MEM_BLOCK));
        json_object_object_add(data, "memdev", json_object_new_string("/objects/mem-vm0"));
        json_object_object_add(dev, "type", json_object_new_string("virtio-mem"));
        json_object_object_add(dev, "data", data);
        json_object_array_add(a, dev);
        return a;
}

static bool is_balloon_path(const char *p) {
        return p && strcmp(p, BALLOON_PATH) == 0;
}

static bool is_virtio_mem_path(Guest *g, const char *p) {
        return g->vm_max > 0 && p &&
               (strcmp(p, VIRTIO_MEM_ID) == 0 || strcmp(p, "/machine/peripheral/" VIRTIO_MEM_ID) == 0);
}

static json_object *execute(Guest *g, const char *cmd, json_object *args) {
        json_object *v;
        const char *path = NULL, *prop = NULL;

        if (args && json_object_object_get_ex(args, "path", &v))
                path = json_object_get_string(v);
        if (args && json_object_object_get_ex(args, "property", &v))
                prop = json_object_get_string(v);
        g->n_commands++;

        if (strcmp(cmd, "qmp_capabilities") == 0)
                return error_reply("CommandNotFound", "Capabilities negotiation is already complete, command ignored");
        /* QEMU's words when no balloon device exists (have_balloon() in system/balloon.c, and
         * qom-get of a path that resolves to nothing). */
        if (guest_fault(g) == FAULT_NO_BALLOON) {
                if (strcmp(cmd, "query-balloon") == 0 || strcmp(cmd, "balloon") == 0)
                        return error_reply("DeviceNotActive", "No balloon device has been activated");
                if (is_balloon_path(path))
                        return error_reply("DeviceNotFound", "Device '" BALLOON_PATH "' not found");
        }
        if (strcmp(cmd, "query-balloon") == 0) {
                json_object *o = json_object_new_object();
                json_object_object_add(o, "actual", json_object_new_uint64(g->model.actual));
                return return_reply(o);
        }
        if (strcmp(cmd, "balloon") == 0) {
                if (!args || !json_object_object_get_ex(args, "value", &v) || !json_object_is_type(v, json_type_int))
                        return error_reply("GenericError", "Parameter 'value' is missing");
                int64_t target = json_object_get_int64(v);
                if (target <= 0 || (uint64_t) target > g->model.cfg.boot_bytes)
                        return error_reply("GenericError", "Parameter 'value' expects a size within the guest's memory");
                if (guest_fault(g) != FAULT_STUCK_BALLOON)
                        guest_model_set_target(&g->model, (uint64_t) target);
                g->n_balloon_sets++;
                return return_reply(NULL);
        }
        if (strcmp(cmd, "query-memory-size-summary") == 0) {
                /* Boot memory, as QEMU reports it: the balloon's ceiling. */
                json_object *o = json_object_new_object();
                json_object_object_add(o, "base-memory", json_object_new_uint64(g->model.cfg.boot_bytes));
                json_object_object_add(o, "plugged-memory", json_object_new_uint64(g->vm_size));
                return return_reply(o);
        }
        if (strcmp(cmd, "query-memory-devices") == 0)
                return return_reply(memory_devices_json(g));
        if (strcmp(cmd, "qom-get") == 0) {
                if (!path || !prop)
                        return error_reply("GenericError", "Parameters 'path' and 'property' are required");
                if (is_balloon_path(path) && strcmp(prop, "guest-stats") == 0) {
                        g->n_stats_reads++;
                        return return_reply(g->windows ? windows_guest_stats_json(g) : guest_stats_json(g));
                }
                if (is_balloon_path(path) && strcmp(prop, "guest-stats-polling-interval") == 0)
                        return return_reply(json_object_new_uint64(g->polling_interval));
                if (is_balloon_path(path) && strcmp(prop, "free-page-reporting") == 0)
                        return return_reply(json_object_new_boolean(g->index % 2 == 0));
                if (is_balloon_path(path) && strcmp(prop, "deflate-on-oom") == 0)
                        return return_reply(json_object_new_boolean(g->model.cfg.deflate_on_oom));
                if (is_virtio_mem_path(g, path) && strcmp(prop, "requested-size") == 0)
                        return return_reply(json_object_new_uint64(g->vm_requested));
                if (is_virtio_mem_path(g, path) && strcmp(prop, "size") == 0)
                        return return_reply(json_object_new_uint64(g->vm_size));
                return error_reply("GenericError", "Property not found");
        }
        if (strcmp(cmd, "qom-set") == 0) {
                if (!path || !prop || !json_object_object_get_ex(args, "value", &v))
                        return error_reply("GenericError", "Parameters 'path', 'property' and 'value' are required");
                if (is_balloon_path(path) && strcmp(prop, "guest-stats-polling-interval") == 0) {
                        if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
                            json_object_get_int64(v) > UINT32_MAX)
                                return error_reply("GenericError", "timer value is invalid");
                        g->polling_interval = (uint64_t) json_object_get_int64(v);
                        return return_reply(NULL);
                }
                if (is_virtio_mem_path(g, path) && strcmp(prop, "requested-size") == 0) {
                        int64_t size = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
                        if (size < 0 || (uint64_t) size > g->vm_max || (uint64_t) size % VIRTIO_MEM_BLOCK != 0)
                                return error_reply("GenericError",
                                                   "'requested-size' must be a multiple of 'block-size' and at most 'max-size'");
                        g->vm_requested = (uint64_t) size;
                        return return_reply(NULL);
                }
                return error_reply("GenericError", "Property not found or not writable");
        }
        return error_reply("CommandNotFound", "The command is not found");
}

int conn_handle(Conn *c, json_object *msg) {
        json_object *v, *id = NULL, *args = NULL, *reply;
        const char *cmd = NULL;

        if (!json_object_is_type(msg, json_type_object))
                reply = error_reply("GenericError", "QMP input must be a JSON object");
        else {
                if (json_object_object_get_ex(msg, "execute", &v) && json_object_is_type(v, json_type_string))
                        cmd = json_object_get_string(v);
                (void) json_object_object_get_ex(msg, "id", &id);
                (void) json_object_object_get_ex(msg, "arguments", &args);
                if (!cmd)
                        reply = error_reply("GenericError", "QMP input lacks member 'execute'");
                else if (!c->negotiated) {
                        if (strcmp(cmd, "qmp_capabilities") == 0) {
                                c->negotiated = true;
                                reply = return_reply(NULL);
                                if (id)
                                        json_object_object_add(reply, "id", json_object_get(id));
                                int r = conn_queue_json(c, reply); /* the handshake is never faulty */
                                json_object_put(reply);
                                return r;
                        }
                        reply = error_reply("CommandNotFound",
                                            "Expecting capabilities negotiation with 'qmp_capabilities'");
                } else
                        reply = execute(c->guest, cmd, args);
        }
        if (id)
                json_object_object_add(reply, "id", json_object_get(id));
        int r = conn_reply(c, reply);
        json_object_put(reply);
        return r;
}
