/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* QMP reply and event decoding (qmp/qmp-client.c, qmp-reply.c, qmp-events.c) and the typed
 * parsers of qmp/qmp-commands.c, fed what a hostile QEMU could send.
 *
 * Input: the bytes QEMU sends on the QMP socket, e.g. a greeting, {"return": {}, "id": "rs-0"}
 * for qmp_capabilities, then replies and events. Once the handshake succeeds, the client sends
 * the commands the daemon uses, with the ids the client assigns in this order:
 *   rs-1 query-balloon             rs-2 qom-get guest-stats         rs-3 query-memory-devices
 *   rs-4 qom-get polling interval  rs-5 qom-get free-page-reporting rs-6 balloon
 *   rs-7 qom-set requested-size    rs-8 object-add (the DIMM hotplug chain: device_add and
 *   object-del follow with the next free ids), rs-9 device_del, rs-10 object-del.
 * The peer then closes, so every command completes exactly once (with its reply or with
 * -ECONNRESET), and the disconnect callback runs once. Separately, every JSON value in the input
 * goes through the pure parsers (reply, event, balloon info, guest stats, memory devices). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macro.h"
#include "qmp/json-containers.h"
#include "qmp/json-stream.h"
#include "qmp/json-util.h"
#include "qmp/qmp-client.h"
#include "qmp/qmp-commands.h"
#include "qmp/qmp-events.h"
#include "tests/fuzz/fuzz.h"

enum {
        CMD_QUERY_BALLOON,
        CMD_GUEST_STATS,
        CMD_MEMORY_DEVICES,
        CMD_POLLING_INTERVAL,
        CMD_FREE_PAGE_REPORTING,
        CMD_BALLOON,
        CMD_REQUESTED_SIZE,
        CMD_DIMM_ADD,
        CMD_DEVICE_DEL,
        CMD_OBJECT_DEL,
        _CMD_MAX,
};

/* The target is single-threaded: one session at a time. */
static struct {
        unsigned completed[_CMD_MAX];
        unsigned n_disconnects;
        unsigned n_ready;
} session;

static unsigned slot_of(void *userdata) {
        unsigned slot = (unsigned) (uintptr_t) userdata;

        fuzz_assert(slot < _CMD_MAX);
        return slot;
}

/* The contract of qmp-commands.h: a typed result exactly on success, errors negative. */
static void completed(void *userdata, const QmpReply *reply, bool have_result) {
        fuzz_assert(reply);
        fuzz_assert(reply->error <= 0);
        fuzz_assert((reply->error == 0) == have_result);
        fuzz_assert(qmp_reply_error_text(reply) != NULL);
        session.completed[slot_of(userdata)]++;
}

static void on_plain(QmpClient *c, const QmpReply *reply, void *userdata) {
        completed(userdata, reply, reply->error == 0);
}

static void on_balloon_info(QmpClient *c, const QmpReply *reply, const QmpBalloonInfo *info, void *userdata) {
        completed(userdata, reply, info != NULL);
}

static void on_guest_stats(QmpClient *c, const QmpReply *reply, const QmpGuestStats *stats, void *userdata) {
        completed(userdata, reply, stats != NULL);
}

static void on_memory_devices(QmpClient *c, const QmpReply *reply, const QmpMemoryDeviceList *list, void *userdata) {
        completed(userdata, reply, list != NULL);
        for (size_t i = 0; list && i < list->n_devices; i++) {
                const QmpMemoryDevice *d = &list->devices[i];

                fuzz_assert(d->type_name);
                if (d->id)
                        fuzz_assert(qmp_memory_device_list_find(list, d->id) != NULL);
        }
}

static void on_u64(QmpClient *c, const QmpReply *reply, uint64_t value, void *userdata) {
        completed(userdata, reply, reply->error == 0);
}

static void on_bool(QmpClient *c, const QmpReply *reply, bool value, void *userdata) {
        completed(userdata, reply, reply->error == 0);
}

#define SLOT(n) ((void *) (uintptr_t) (n))

static void on_ready(QmpClient *c, void *userdata) {
        session.n_ready++;
        fuzz_assert(qmp_client_is_ready(c));
        fuzz_assert(qmp_query_balloon(c, 0, on_balloon_info, SLOT(CMD_QUERY_BALLOON)) >= 0);
        fuzz_assert(qmp_get_guest_stats(c, NULL, 0, on_guest_stats, SLOT(CMD_GUEST_STATS)) >= 0);
        fuzz_assert(qmp_query_memory_devices(c, 0, on_memory_devices, SLOT(CMD_MEMORY_DEVICES)) >= 0);
        fuzz_assert(qmp_qom_get_u64(c, NULL, QMP_BALLOON_STATS_POLLING_INTERVAL, 0, on_u64, SLOT(CMD_POLLING_INTERVAL)) >= 0);
        fuzz_assert(qmp_qom_get_bool(c, NULL, QMP_BALLOON_FREE_PAGE_REPORTING, 0, on_bool, SLOT(CMD_FREE_PAGE_REPORTING)) >= 0);
        fuzz_assert(qmp_balloon_set_target(c, 600 * MIB, 0, on_plain, SLOT(CMD_BALLOON)) >= 0);
        fuzz_assert(qmp_virtio_mem_set_requested_size(c, "vm0", 512 * MIB, 0, on_plain, SLOT(CMD_REQUESTED_SIZE)) >= 0);
        fuzz_assert(qmp_dimm_add(c, "dimm0", "mem-dimm0", 256 * MIB, 0, on_plain, SLOT(CMD_DIMM_ADD)) >= 0);
        fuzz_assert(qmp_device_del(c, "dimm1", 0, on_plain, SLOT(CMD_DEVICE_DEL)) >= 0);
        fuzz_assert(qmp_object_del(c, "mem-dimm1", 0, on_plain, SLOT(CMD_OBJECT_DEL)) >= 0);
}

static void on_event(QmpClient *c, const QmpEvent *event, void *userdata) {
        QmpTypedEvent t;

        fuzz_assert(event->name);
        fuzz_assert(event->message);
        if (qmp_event_parse(event, &t) < 0)
                return;
        fuzz_assert(t.type == qmp_event_type_from_name(event->name));
        if (t.type == QMP_EVENT_DEVICE_DELETED)
                fuzz_assert(t.device_deleted.path);
}

static void on_disconnect(QmpClient *c, int error, const char *reason, void *userdata) {
        fuzz_assert(error < 0);
        fuzz_assert(reason);
        fuzz_assert(qmp_client_get_n_pending(c) == 0);
        session.n_disconnects++;
}

static void run_client(const uint8_t *data, size_t size) {
        static const QmpClientCallbacks callbacks = {
                .ready = on_ready,
                .event = on_event,
                .disconnect = on_disconnect,
        };
        sd_event *e = NULL;
        QmpClient *c = NULL;
        int fds[2];

        memset(&session, 0, sizeof(session));
        fuzz_assert(sd_event_new(&e) >= 0);
        fuzz_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        fuzz_assert(qmp_client_new(&c, e) >= 0);
        qmp_client_set_callbacks(c, &callbacks, NULL);
        fuzz_assert(qmp_client_connect_fd(c, fds[0]) >= 0);

        fuzz_write_chunks(e, fds[1], data, size, 0);
        close(fds[1]);
        fuzz_event_drain(e);

        fuzz_assert(qmp_client_is_closed(c));
        fuzz_assert(session.n_disconnects == 1);
        fuzz_assert(qmp_client_get_n_pending(c) == 0);
        for (size_t i = 0; i < _CMD_MAX; i++)
                fuzz_assert(session.completed[i] == session.n_ready);
        qmp_client_free(c);
        sd_event_unref(e);
}

static void parse_result(json_object *r) {
        QmpBalloonInfo balloon;
        QmpGuestStats stats;
        QmpMemoryDeviceList list = {};
        uint64_t u;
        int64_t i;

        (void) qmp_parse_balloon_info(r, &balloon);
        if (qmp_parse_guest_stats(r, &stats) >= 0)
                for (size_t k = 0; k < _QMP_STAT_MAX; k++)
                        fuzz_assert(qmp_stat_from_name(qmp_stat_to_name((QmpStat) k)) == (QmpStat) k);
        if (qmp_parse_memory_devices(r, &list) >= 0)
                qmp_memory_device_list_clear(&list);
        (void) json_value_get_u64(r, &u);
        (void) json_value_get_u64_or_unset(r, &u);
        (void) json_value_get_i64(r, &i);
}

static void parse_value(json_object *v) {
        json_object *result;
        QmpReply reply;
        QmpEvent event;
        QmpTypedEvent typed;

        if (qmp_reply_from_message(v, &reply) >= 0) {
                fuzz_assert(reply.error <= 0);
                fuzz_assert(qmp_reply_error_text(&reply));
        }
        if (qmp_event_from_message(v, &event) >= 0)
                (void) qmp_event_parse(&event, &typed);

        /* The typed parsers on the value itself and on its "return" member. */
        parse_result(v);
        if (json_object_object_get_ex(v, "return", &result))
                parse_result(result);
}

static void parse_values(const uint8_t *data, size_t size) {
        json_tokener *tok = json_tokener_new_ex(JSON_STREAM_MAX_DEPTH_DEFAULT);
        size_t pos = 0;

        fuzz_assert(tok);
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS | JSON_TOKENER_VALIDATE_UTF8);
        while (pos < size) {
                json_object *v;

                /* The client's cap on objects and arrays, so that a flood the client refuses does
                 * not cost this harness what the cap saves the daemon. */
                if (!json_containers_within((const char *) data + pos, size - pos, JSON_STREAM_MAX_CONTAINERS_DEFAULT))
                        break;
                v = json_tokener_parse_ex(tok, (const char *) data + pos, (int) MIN(size - pos, (size_t) INT32_MAX));

                if (!v || json_tokener_get_error(tok) != json_tokener_success) {
                        json_object_put(v);
                        break;
                }
                pos += json_tokener_get_parse_end(tok);
                json_tokener_reset(tok);
                parse_value(v);
                json_object_put(v);
        }
        json_tokener_free(tok);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        run_client(data, size);
        parse_values(data, size);
        return 0;
}
