/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Typed QMP helpers and event parsing: pure parsers on good and hostile input, and the
 * helpers end to end against the fake peer (arguments sent, results delivered). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/macro.h"
#include "qmp/json-util.h"
#include "qmp/qmp-commands.h"
#include "qmp/qmp-events.h"
#include "qmp/qmp-sync.h"
#include "tests/lib/fake-qmp-peer.h"
#include "tests/lib/check-run.h"

static sd_event *e;
static QmpClient *c;
static FakePeer *p;

/* What the last typed callback delivered. */
static bool done;
static int got_error;
static char got_desc[256];
static bool got_result;
static QmpBalloonInfo got_balloon;
static QmpGuestStats got_stats;
static uint64_t got_u64;
static bool got_bool;
static size_t got_n_devices;
static char got_devices[512];

static void record(const QmpReply *reply, bool has_result) {
        done = true;
        got_error = reply->error;
        snprintf(got_desc, sizeof(got_desc), "%s", reply->error_desc ? reply->error_desc : "");
        got_result = has_result;
}

static void on_plain(QmpClient *client, const QmpReply *reply, void *userdata) {
        record(reply, reply->error == 0);
}

static void on_balloon(QmpClient *client, const QmpReply *reply, const QmpBalloonInfo *info, void *userdata) {
        record(reply, info != NULL);
        if (info)
                got_balloon = *info;
}

static void on_stats(QmpClient *client, const QmpReply *reply, const QmpGuestStats *stats, void *userdata) {
        record(reply, stats != NULL);
        if (stats)
                got_stats = *stats;
}

static void on_u64(QmpClient *client, const QmpReply *reply, uint64_t value, void *userdata) {
        record(reply, reply->error == 0);
        got_u64 = value;
}

static void on_bool(QmpClient *client, const QmpReply *reply, bool value, void *userdata) {
        record(reply, reply->error == 0);
        got_bool = value;
}

static void on_devices(QmpClient *client, const QmpReply *reply, const QmpMemoryDeviceList *list, void *userdata) {
        record(reply, list != NULL);
        got_devices[0] = '\0';
        got_n_devices = list ? list->n_devices : 0;
        for (size_t i = 0; list && i < list->n_devices; i++) {
                const QmpMemoryDevice *d = &list->devices[i];
                size_t n = strlen(got_devices);

                snprintf(got_devices + n, sizeof(got_devices) - n, "%s:%s:%llu;", d->type_name, d->id ? d->id : "-",
                         (unsigned long long) d->size);
        }
}

static void setup(void) {
        int fds[2];

        done = false;
        got_error = 0;
        got_result = false;
        ck_assert_int_ge(sd_event_new(&e), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        ck_assert_int_ge(qmp_client_new(&c, e), 0);
        ck_assert_int_ge(fake_peer_new(&p, e, fds[1]), 0);
        ck_assert_int_ge(qmp_client_connect_fd(c, fds[0]), 0);
        fake_peer_greet(p);
}

static void teardown(void) {
        c = qmp_client_free(c);
        p = fake_peer_free(p);
        e = sd_event_unref(e);
}

static void wait_done(void) {
        ck_assert_msg(test_run_until_done(e, p), "script: %s", fake_peer_failure(p) ?: "hang");
        ck_assert(test_run_until_flag(e, &done));
        ck_assert_msg(fake_peer_failure(p) == NULL, "peer: %s", fake_peer_failure(p));
}

static json_object *parse(const char *text) {
        json_object *o = json_tokener_parse(text);

        /* JSON null is a NULL json_object */
        ck_assert_msg(o || strcmp(text, "null") == 0, "test JSON does not parse: %s", text);
        return o;
}

/* ---- balloon ---- */

START_TEST(test_parse_balloon_info) {
        static const struct {
                const char *json;
                int error;
                uint64_t actual;
        } cases[] = {
                { "{\"actual\": 1073741824}", 0, 1073741824 },
                { "{\"actual\": 18446744073709551614}", 0, UINT64_MAX - 1 },
                { "{\"actual\": 0}", 0, 0 },
                { "{}", -EBADMSG, 0 },
                { "{\"actual\": \"1073741824\"}", -EBADMSG, 0 },
                { "{\"actual\": -5}", -EBADMSG, 0 },
                { "{\"actual\": 1.5}", -EBADMSG, 0 },
                { "{\"actual\": null}", -EBADMSG, 0 },
                { "{\"actual\": true}", -EBADMSG, 0 },
                { "[1]", -EBADMSG, 0 },
                { "null", -EBADMSG, 0 },
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                json_object *o = json_tokener_parse(cases[i].json);
                QmpBalloonInfo info = { .actual = 42 };

                ck_assert_msg(qmp_parse_balloon_info(o, &info) == cases[i].error, "case %s", cases[i].json);
                if (cases[i].error == 0)
                        ck_assert_uint_eq(info.actual, cases[i].actual);
                else
                        ck_assert_uint_eq(info.actual, 42); /* untouched on failure */
                json_object_put(o);
        }
}
END_TEST

START_TEST(test_query_balloon) {
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_reply(p, "{\"actual\": 671088640}");
        ck_assert_int_ge(qmp_query_balloon(c, 0, on_balloon, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert(got_result);
        ck_assert_uint_eq(got_balloon.actual, 671088640);
}
END_TEST

START_TEST(test_query_balloon_wrong_type) {
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_reply(p, "{\"actual\": \"lots\"}");
        ck_assert_int_ge(qmp_query_balloon(c, 0, on_balloon, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EBADMSG);
        ck_assert(!got_result);
        ck_assert_ptr_nonnull(strstr(got_desc, "query-balloon"));
        /* a malformed reply is the reply's problem, not the connection's */
        ck_assert(qmp_client_is_ready(c));
}
END_TEST

START_TEST(test_query_balloon_no_device) {
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"DeviceNotActive\", \"desc\": \"No balloon device has been activated\"}, \"id\": %ID%}");
        ck_assert_int_ge(qmp_query_balloon(c, 0, on_balloon, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -ENXIO);
        ck_assert(!got_result);
        ck_assert_str_eq(got_desc, "No balloon device has been activated");
}
END_TEST

/* ---- block devices ---- */

/* The shape QEMU 7.2 sends: device-level stats, with the protocol layer under "parent". */
#define BLOCKSTATS_TIMED(rd, ops, ns) \
        "{\"device\": \"\", \"node-name\": \"n1\", \"qdev\": \"/machine/peripheral-anon/device[2]/virtio-backend\", " \
        "\"stats\": {\"rd_bytes\": " rd ", \"wr_bytes\": 4096, \"rd_operations\": " ops ", \"flush_operations\": 0, " \
        "\"rd_total_time_ns\": " ns ", \"wr_total_time_ns\": 70000, \"timed_stats\": [], \"account_invalid\": true}, " \
        "\"parent\": {\"node-name\": \"p1\", \"stats\": {\"rd_bytes\": 999999, \"rd_operations\": 999, " \
        "\"rd_total_time_ns\": 999999999, \"wr_bytes\": 0}}}"
#define BLOCKSTATS_ENTRY(rd) BLOCKSTATS_TIMED(rd, "3", "250000")
/* An older QEMU's entry: no request count or time */
#define BLOCKSTATS_UNTIMED(rd) "{\"device\": \"d\", \"stats\": {\"rd_bytes\": " rd ", \"wr_bytes\": 0}}"

#define U UINT64_MAX

START_TEST(test_parse_blockstats) {
        static const struct {
                const char *json;
                int error;
                uint64_t bytes, ops, ns;
        } cases[] = {
                { "[" BLOCKSTATS_ENTRY("1000") "," BLOCKSTATS_ENTRY("24") "]", 0, 1024, 6, 500000 },
                { "[" BLOCKSTATS_TIMED("4096", "1", "80000") "," BLOCKSTATS_TIMED("0", "0", "0") "]", 0, 4096, 1, 80000 },
                { "[]", 0, 0, 0, 0 },
                { "[" BLOCKSTATS_ENTRY("18446744073709551000") "," BLOCKSTATS_ENTRY("18446744073709551000") "]", 0,
                  UINT64_MAX - 1, 6, 500000 },
                /* each sum saturates below "not reported" */
                { "[" BLOCKSTATS_TIMED("1", "18446744073709551000", "18446744073709551000") ","
                  BLOCKSTATS_TIMED("1", "18446744073709551000", "18446744073709551000") "]",
                  0, 2, UINT64_MAX - 1, UINT64_MAX - 1 },
                /* absent is not reported, not an error: the bytes stay */
                { "[" BLOCKSTATS_UNTIMED("512") "]", 0, 512, U, U },
                /* one device without them: the pair is unknown, not the others' alone */
                { "[" BLOCKSTATS_ENTRY("1000") "," BLOCKSTATS_UNTIMED("24") "]", 0, 1024, U, U },
                { "[" BLOCKSTATS_UNTIMED("24") "," BLOCKSTATS_ENTRY("1000") "]", 0, 1024, U, U },
                { "[{\"stats\": {\"rd_bytes\": 8, \"rd_operations\": 2}}]", 0, 8, U, U },
                { "[{\"stats\": {\"rd_bytes\": 8, \"rd_total_time_ns\": 2}}]", 0, 8, U, U },
                /* present, they must be counts */
                { "[{\"stats\": {\"rd_bytes\": 8, \"rd_operations\": -1, \"rd_total_time_ns\": 2}}]", -EBADMSG },
                { "[{\"stats\": {\"rd_bytes\": 8, \"rd_operations\": 1, \"rd_total_time_ns\": \"slow\"}}]", -EBADMSG },
                { "[{\"stats\": {\"rd_bytes\": 8, \"rd_operations\": 1.5, \"rd_total_time_ns\": 2}}]", -EBADMSG },
                { "[{\"stats\": {\"rd_bytes\": 8, \"rd_operations\": null, \"rd_total_time_ns\": 2}}]", -EBADMSG },
                { "[{\"device\": \"d\"}]", -EBADMSG },
                { "[{\"stats\": {\"rd_bytes\": -1}}]", -EBADMSG },
                { "[{\"stats\": {\"rd_bytes\": \"many\"}}]", -EBADMSG },
                { "[{\"stats\": {\"rd_operations\": 3, \"rd_total_time_ns\": 9}}]", -EBADMSG },
                { "[{\"stats\": []}]", -EBADMSG },
                { "[7]", -EBADMSG },
                { "{\"stats\": {\"rd_bytes\": 5}}", -EBADMSG },
                { "null", -EBADMSG },
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                json_object *o = json_tokener_parse(cases[i].json);
                QmpBlockReads reads = { 42, 42, 42 };

                ck_assert_msg(qmp_parse_blockstats_reads(o, &reads) == cases[i].error, "case %s", cases[i].json);
                if (cases[i].error == 0) {
                        ck_assert_uint_eq(reads.bytes, cases[i].bytes);
                        ck_assert_uint_eq(reads.operations, cases[i].ops);
                        ck_assert_uint_eq(reads.time_ns, cases[i].ns);
                } else {
                        ck_assert_uint_eq(reads.bytes, 42); /* untouched */
                        ck_assert_uint_eq(reads.operations, 42);
                        ck_assert_uint_eq(reads.time_ns, 42);
                }
                json_object_put(o);
        }
}
END_TEST

#undef U

static QmpBlockReads got_reads;

static void on_block_reads(QmpClient *client, const QmpReply *reply, const QmpBlockReads *reads, void *userdata) {
        record(reply, reads != NULL);
        got_reads = reads ? *reads : (QmpBlockReads) {};
}

START_TEST(test_query_blockstats) {
        fake_peer_expect(p, "query-blockstats", NULL);
        fake_peer_reply(p, "[" BLOCKSTATS_TIMED("65536", "16", "1600000") "]");
        ck_assert_int_ge(qmp_query_blockstats_reads(c, 0, on_block_reads, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert_uint_eq(got_reads.bytes, 65536);
        ck_assert_uint_eq(got_reads.operations, 16);
        ck_assert_uint_eq(got_reads.time_ns, 1600000);

        done = false;
        fake_peer_expect(p, "query-blockstats", NULL);
        fake_peer_reply(p, "[{\"stats\": {}}]");
        ck_assert_int_ge(qmp_query_blockstats_reads(c, 0, on_block_reads, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EBADMSG);
        ck_assert_ptr_nonnull(strstr(got_desc, "query-blockstats"));
        ck_assert(qmp_client_is_ready(c));
}
END_TEST

START_TEST(test_balloon_set_target) {
        fake_peer_expect(p, "balloon", "{\"value\": 805306368}");
        fake_peer_reply(p, "{}");
        ck_assert_int_ge(qmp_balloon_set_target(c, 768 * MIB, 0, on_plain, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert_int_eq(qmp_balloon_set_target(c, 0, 0, on_plain, NULL), -EINVAL);
        ck_assert_int_eq(qmp_balloon_set_target(c, UINT64_MAX, 0, on_plain, NULL), -EINVAL);
}
END_TEST

static unsigned destroyed;
static void count_destroy(void *userdata) {
        ck_assert_ptr_eq(userdata, &destroyed);
        destroyed++;
}

START_TEST(test_balloon_set_target_destroy) {
        /* Answered: the callback, then destroy once. */
        fake_peer_expect(p, "balloon", "{\"value\": 536870912}");
        fake_peer_reply(p, "{}");
        ck_assert_int_ge(qmp_balloon_set_target_full(c, 512 * MIB, 0, on_plain, &destroyed, count_destroy), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert_uint_eq(destroyed, 1);

        /* Refused before sending: neither. */
        done = false;
        ck_assert_int_eq(qmp_balloon_set_target_full(c, 0, 0, on_plain, &destroyed, count_destroy), -EINVAL);
        ck_assert(!done);
        ck_assert_uint_eq(destroyed, 1);

        /* Dropped unanswered by closing the client: destroy only. */
        ck_assert_int_ge(qmp_balloon_set_target_full(c, 256 * MIB, 0, on_plain, &destroyed, count_destroy), 0);
        qmp_client_close(c);
        ck_assert(!done);
        ck_assert_uint_eq(destroyed, 2);
}
END_TEST

START_TEST(test_stats_polling_interval) {
        fake_peer_expect(p, "qom-set",
                         "{\"path\": \"/machine/peripheral/balloon0\", \"property\": \"guest-stats-polling-interval\", \"value\": 2}");
        fake_peer_reply(p, "{}");
        ck_assert_int_ge(qmp_set_stats_polling_interval(c, NULL, 2, 0, on_plain, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);

        done = false;
        fake_peer_expect(p, "qom-get", "{\"path\": \"/machine/peripheral/b1\", \"property\": \"guest-stats-polling-interval\"}");
        fake_peer_reply(p, "5");
        ck_assert_int_ge(qmp_qom_get_u64(c, "/machine/peripheral/b1", QMP_BALLOON_STATS_POLLING_INTERVAL, 0, on_u64, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert_uint_eq(got_u64, 5);

        done = false;
        fake_peer_expect(p, "qom-get", NULL);
        fake_peer_reply(p, "\"5\"");
        ck_assert_int_ge(qmp_qom_get_u64(c, NULL, QMP_BALLOON_STATS_POLLING_INTERVAL, 0, on_u64, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EBADMSG);
        ck_assert_uint_eq(got_u64, 0);

        done = false;
        fake_peer_expect(p, "qom-get", NULL);
        fake_peer_reply(p, "-3");
        ck_assert_int_ge(qmp_qom_get_u64(c, NULL, QMP_BALLOON_STATS_POLLING_INTERVAL, 0, on_u64, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EBADMSG);
}
END_TEST

START_TEST(test_free_page_reporting) {
        fake_peer_expect(p, "qom-get", "{\"path\": \"/machine/peripheral/balloon0\", \"property\": \"free-page-reporting\"}");
        fake_peer_reply(p, "true");
        ck_assert_int_ge(qmp_qom_get_bool(c, NULL, QMP_BALLOON_FREE_PAGE_REPORTING, 0, on_bool, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert(got_bool);

        done = false;
        fake_peer_expect(p, "qom-get", NULL);
        fake_peer_reply(p, "1");
        ck_assert_int_ge(qmp_qom_get_bool(c, NULL, QMP_BALLOON_FREE_PAGE_REPORTING, 0, on_bool, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EBADMSG);
        ck_assert(!got_bool);

        done = false;
        fake_peer_expect(p, "qom-get", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"Property 'free-page-reporting' not found\"}, \"id\": %ID%}");
        ck_assert_int_ge(qmp_qom_get_bool(c, NULL, QMP_BALLOON_FREE_PAGE_REPORTING, 0, on_bool, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EIO);
}
END_TEST

/* ---- guest stats ---- */

/* What QEMU 7.2 with a 6.1 guest returns (captured shape), some stats unset. */
static const char qemu72_guest_stats[] =
        "{\"stats\": {\"stat-htlb-pgfail\": 0, \"stat-available-memory\": 849235968, \"stat-free-memory\": 813363200, "
        "\"stat-minor-faults\": 123456, \"stat-major-faults\": 12, \"stat-total-memory\": 1012936704, "
        "\"stat-swap-in\": 0, \"stat-swap-out\": 0, \"stat-disk-caches\": 161468416, \"stat-htlb-pgalloc\": -1}, "
        "\"last-update\": 1700000123}";

START_TEST(test_parse_guest_stats_real_shape) {
        json_object *o = parse(qemu72_guest_stats);
        QmpGuestStats stats;

        ck_assert_int_eq(qmp_parse_guest_stats(o, &stats), 0);
        ck_assert_uint_eq(stats.last_update, 1700000123);
        ck_assert_uint_eq(stats.value[QMP_STAT_FREE_MEMORY], 813363200);
        ck_assert_uint_eq(stats.value[QMP_STAT_AVAILABLE_MEMORY], 849235968);
        ck_assert_uint_eq(stats.value[QMP_STAT_TOTAL_MEMORY], 1012936704);
        ck_assert_uint_eq(stats.value[QMP_STAT_DISK_CACHES], 161468416);
        ck_assert_uint_eq(stats.value[QMP_STAT_MAJOR_FAULTS], 12);
        ck_assert_uint_eq(stats.value[QMP_STAT_MINOR_FAULTS], 123456);
        /* a reported zero is a real zero */
        ck_assert_uint_eq(stats.value[QMP_STAT_SWAP_IN], 0);
        ck_assert(qmp_value_is_known(stats.value[QMP_STAT_SWAP_IN]));
        ck_assert_uint_eq(stats.value[QMP_STAT_HTLB_PGFAIL], 0);
        /* -1: unknown */
        ck_assert(!qmp_value_is_known(stats.value[QMP_STAT_HTLB_PGALLOC]));
        /* absent (QEMU < 9.2): unknown, never zero */
        ck_assert(!qmp_value_is_known(stats.value[QMP_STAT_OOM_KILLS]));
        ck_assert(!qmp_value_is_known(stats.value[QMP_STAT_ALLOC_STALLS]));
        ck_assert(!qmp_value_is_known(stats.value[QMP_STAT_ASYNC_SCANS]));
        ck_assert(!qmp_value_is_known(stats.value[QMP_STAT_DIRECT_SCANS]));
        ck_assert(!qmp_value_is_known(stats.value[QMP_STAT_ASYNC_RECLAIMS]));
        ck_assert(!qmp_value_is_known(stats.value[QMP_STAT_DIRECT_RECLAIMS]));
        json_object_put(o);
}
END_TEST

START_TEST(test_parse_guest_stats_unknown_spellings) {
        json_object *o = parse("{\"stats\": {\"stat-swap-in\": 18446744073709551615, \"stat-swap-out\": -1, "
                               "\"stat-oom-kills\": 3, \"stat-direct-reclaims\": 18446744073709551614, "
                               "\"stat-from-the-future\": \"whatever\"}, \"last-update\": 0}");
        QmpGuestStats stats;

        ck_assert_int_eq(qmp_parse_guest_stats(o, &stats), 0);
        ck_assert_uint_eq(stats.value[QMP_STAT_SWAP_IN], QMP_VALUE_UNKNOWN);
        ck_assert_uint_eq(stats.value[QMP_STAT_SWAP_OUT], QMP_VALUE_UNKNOWN);
        ck_assert_uint_eq(stats.value[QMP_STAT_OOM_KILLS], 3);
        ck_assert_uint_eq(stats.value[QMP_STAT_DIRECT_RECLAIMS], UINT64_MAX - 1);
        ck_assert_uint_eq(stats.value[QMP_STAT_FREE_MEMORY], QMP_VALUE_UNKNOWN);
        ck_assert_uint_eq(stats.last_update, 0);
        json_object_put(o);

        /* no stats at all (polling never ran): everything unknown */
        o = parse("{\"stats\": {}, \"last-update\": 0}");
        ck_assert_int_eq(qmp_parse_guest_stats(o, &stats), 0);
        for (size_t i = 0; i < _QMP_STAT_MAX; i++)
                ck_assert(!qmp_value_is_known(stats.value[i]));
        json_object_put(o);
}
END_TEST

/* A Windows guest through QEMU 9.2: virtio-win's balloon driver fills tags 0-9 only
 * (kvm-guest-drivers-windows Balloon/sys/public.h, VIRTIO_BALLOON_S_NR 10; Balloon/sys/memstat.c,
 * GatherKernelStats(): hugetlb ones as 0), so QEMU keeps the others at its reset value, -1, and
 * visits every stat as uint64 (hw/virtio/virtio-balloon.c, reset_stats() and
 * balloon_stats_get_all()): 2^64-1 on the wire, never -1. */
static const char virtio_win_guest_stats[] =
        "{\"stats\": {\"stat-swap-in\": 1090519040, \"stat-swap-out\": 52428800, \"stat-major-faults\": 266240, "
        "\"stat-minor-faults\": 98765432, \"stat-free-memory\": 2147483648, \"stat-total-memory\": 4294428672, "
        "\"stat-available-memory\": 2684354560, \"stat-disk-caches\": 1073741824, \"stat-htlb-pgalloc\": 0, "
        "\"stat-htlb-pgfail\": 0, \"stat-oom-kills\": 18446744073709551615, "
        "\"stat-alloc-stalls\": 18446744073709551615, \"stat-async-scans\": 18446744073709551615, "
        "\"stat-direct-scans\": 18446744073709551615, \"stat-async-reclaims\": 18446744073709551615, "
        "\"stat-direct-reclaims\": 18446744073709551615}, \"last-update\": 1700000123}";

START_TEST(test_parse_guest_stats_virtio_win) {
        _cleanup_(json_object_putp) json_object *o = parse(virtio_win_guest_stats);
        QmpGuestStats stats;

        ck_assert_int_eq(qmp_parse_guest_stats(o, &stats), 0);
        ck_assert_uint_eq(stats.value[QMP_STAT_TOTAL_MEMORY], 4294428672);
        ck_assert_uint_eq(stats.value[QMP_STAT_AVAILABLE_MEMORY], 2684354560);
        ck_assert_uint_eq(stats.value[QMP_STAT_DISK_CACHES], 1073741824);
        /* swap-in is the same page count as major-faults, in bytes (PageReadCount << PAGE_SHIFT) */
        ck_assert_uint_eq(stats.value[QMP_STAT_SWAP_IN], stats.value[QMP_STAT_MAJOR_FAULTS] * 4096);
        ck_assert_uint_eq(stats.value[QMP_STAT_HTLB_PGALLOC], 0);
        /* what Windows does not send is unknown, never 2^64-1 taken as a count */
        for (QmpStat s = QMP_STAT_OOM_KILLS; s <= QMP_STAT_DIRECT_RECLAIMS; s++)
                ck_assert_msg(!qmp_value_is_known(stats.value[s]), "%s known", qmp_stat_to_name(s));

        /* The driver's first report, at load: its buffer is all 0xFF (Balloon/sys/Device.c,
         * RtlFillMemory(MemStats, ..., -1)), so every tag is 0xFFFF, past what QEMU keeps, and
         * last-update moves while every stat stays 2^64-1. The same when gathering fails
         * (memstat.c, StatWorkItemWorker()). */
        _cleanup_(json_object_putp) json_object *first = parse(
                "{\"stats\": {\"stat-swap-in\": 18446744073709551615, \"stat-swap-out\": 18446744073709551615, "
                "\"stat-major-faults\": 18446744073709551615, \"stat-minor-faults\": 18446744073709551615, "
                "\"stat-free-memory\": 18446744073709551615, \"stat-total-memory\": 18446744073709551615, "
                "\"stat-available-memory\": 18446744073709551615, \"stat-disk-caches\": 18446744073709551615, "
                "\"stat-htlb-pgalloc\": 18446744073709551615, \"stat-htlb-pgfail\": 18446744073709551615}, "
                "\"last-update\": 1700000100}");
        ck_assert_int_eq(qmp_parse_guest_stats(first, &stats), 0);
        ck_assert_uint_eq(stats.last_update, 1700000100);
        for (size_t i = 0; i < _QMP_STAT_MAX; i++)
                ck_assert(!qmp_value_is_known(stats.value[i]));
}
END_TEST

START_TEST(test_parse_guest_stats_wrong_types) {
        static const char *const bad[] = {
                "{\"stats\": {\"stat-free-memory\": \"1\"}, \"last-update\": 1}",
                "{\"stats\": {\"stat-free-memory\": 1.5}, \"last-update\": 1}",
                "{\"stats\": {\"stat-free-memory\": -2}, \"last-update\": 1}",
                "{\"stats\": {\"stat-free-memory\": null}, \"last-update\": 1}",
                "{\"stats\": {\"stat-free-memory\": {}}, \"last-update\": 1}",
                "{\"stats\": {\"stat-oom-kills\": [1]}, \"last-update\": 1}",
                "{\"stats\": [], \"last-update\": 1}",
                "{\"stats\": null, \"last-update\": 1}",
                "{\"last-update\": 1}",
                "{\"stats\": {}}",
                "{\"stats\": {}, \"last-update\": \"1\"}",
                "{\"stats\": {}, \"last-update\": -1}",
                "\"guest-stats\"",
                "[]",
        };
        QmpGuestStats stats;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                json_object *o = parse(bad[i]);

                ck_assert_msg(qmp_parse_guest_stats(o, &stats) == -EBADMSG, "accepted %s", bad[i]);
                json_object_put(o);
        }
        ck_assert_int_eq(qmp_parse_guest_stats(NULL, &stats), -EBADMSG);
}
END_TEST

START_TEST(test_stat_names) {
        ck_assert_str_eq(qmp_stat_to_name(QMP_STAT_SWAP_IN), "stat-swap-in");
        ck_assert_str_eq(qmp_stat_to_name(QMP_STAT_DIRECT_RECLAIMS), "stat-direct-reclaims");
        ck_assert_ptr_null(qmp_stat_to_name(_QMP_STAT_MAX));
        for (size_t i = 0; i < _QMP_STAT_MAX; i++)
                ck_assert_int_eq(qmp_stat_from_name(qmp_stat_to_name(i)), (int) i);
        ck_assert_int_eq(qmp_stat_from_name("stat-nonsense"), _QMP_STAT_MAX);
        ck_assert_int_eq(qmp_stat_from_name(NULL), _QMP_STAT_MAX);
}
END_TEST

START_TEST(test_get_guest_stats) {
        fake_peer_expect(p, "qom-get", "{\"path\": \"/machine/peripheral/balloon0\", \"property\": \"guest-stats\"}");
        fake_peer_reply(p, qemu72_guest_stats);
        ck_assert_int_ge(qmp_get_guest_stats(c, NULL, 0, on_stats, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert(got_result);
        ck_assert_uint_eq(got_stats.value[QMP_STAT_FREE_MEMORY], 813363200);
        ck_assert(!qmp_value_is_known(got_stats.value[QMP_STAT_OOM_KILLS]));

        done = false;
        fake_peer_expect(p, "qom-get", NULL);
        fake_peer_reply(p, "{\"stats\": {\"stat-free-memory\": \"a lot\"}, \"last-update\": 1}");
        ck_assert_int_ge(qmp_get_guest_stats(c, NULL, 0, on_stats, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EBADMSG);
        ck_assert(!got_result);
        ck_assert_ptr_nonnull(strstr(got_desc, "guest-stats"));
}
END_TEST

/* ---- memory devices ---- */

/* As QEMU 7.2 answers for a virtio-mem and a pc-dimm (captured). */
static const char qemu72_memory_devices[] =
        "[{\"type\": \"virtio-mem\", \"data\": {\"memaddr\": 4294967296, \"node\": 0, \"requested-size\": 67108864, "
        "\"size\": 0, \"max-size\": 536870912, \"block-size\": 2097152, \"memdev\": \"/objects/vmem0\", \"id\": \"vm0\"}}, "
        "{\"type\": \"dimm\", \"data\": {\"slot\": 0, \"node\": 0, \"addr\": 4831838208, \"memdev\": \"/objects/dm0\", "
        "\"id\": \"dimm0\", \"hotpluggable\": true, \"hotplugged\": false, \"size\": 134217728}}]";

START_TEST(test_parse_memory_devices_real_shape) {
        json_object *o = parse(qemu72_memory_devices);
        QmpMemoryDeviceList list;
        const QmpMemoryDevice *vm, *dimm;

        ck_assert_int_eq(qmp_parse_memory_devices(o, &list), 0);
        ck_assert_uint_eq(list.n_devices, 2);
        vm = qmp_memory_device_list_find(&list, "vm0");
        ck_assert_ptr_nonnull(vm);
        ck_assert_int_eq(vm->type, QMP_MEMORY_DEVICE_VIRTIO_MEM);
        ck_assert_str_eq(vm->type_name, "virtio-mem");
        ck_assert_str_eq(vm->memdev, "/objects/vmem0");
        ck_assert_uint_eq(vm->size, 0);
        ck_assert_uint_eq(vm->requested_size, 64 * MIB);
        ck_assert_uint_eq(vm->max_size, 512 * MIB);
        ck_assert_uint_eq(vm->block_size, 2 * MIB);
        ck_assert_uint_eq(vm->address, 4294967296);
        ck_assert_int_eq(vm->node, 0);
        ck_assert_int_eq(vm->slot, -1);

        dimm = qmp_memory_device_list_find(&list, "dimm0");
        ck_assert_ptr_nonnull(dimm);
        ck_assert_int_eq(dimm->type, QMP_MEMORY_DEVICE_DIMM);
        ck_assert_uint_eq(dimm->size, 128 * MIB);
        ck_assert_int_eq(dimm->slot, 0);
        ck_assert_str_eq(dimm->memdev, "/objects/dm0");
        /* virtio-mem-only fields do not apply */
        ck_assert(!qmp_value_is_known(dimm->requested_size));
        ck_assert(!qmp_value_is_known(dimm->block_size));

        ck_assert_ptr_null(qmp_memory_device_list_find(&list, "nope"));
        qmp_memory_device_list_clear(&list);
        ck_assert_uint_eq(list.n_devices, 0);
        json_object_put(o);
}
END_TEST

START_TEST(test_parse_memory_devices_edge_cases) {
        QmpMemoryDeviceList list;
        json_object *o;

        o = parse("[]");
        ck_assert_int_eq(qmp_parse_memory_devices(o, &list), 0);
        ck_assert_uint_eq(list.n_devices, 0);
        qmp_memory_device_list_clear(&list);
        json_object_put(o);

        /* no id; a type we do not model */
        o = parse("[{\"type\": \"dimm\", \"data\": {\"slot\": 1, \"size\": 1073741824}},"
                  " {\"type\": \"sgx-epc\", \"data\": {\"size\": 4096, \"memaddr\": 1}}]");
        ck_assert_int_eq(qmp_parse_memory_devices(o, &list), 0);
        ck_assert_uint_eq(list.n_devices, 2);
        ck_assert_ptr_null(list.devices[0].id);
        ck_assert_ptr_null(list.devices[0].memdev);
        ck_assert_int_eq(list.devices[0].slot, 1);
        ck_assert_int_eq(list.devices[1].type, QMP_MEMORY_DEVICE_OTHER);
        ck_assert_str_eq(list.devices[1].type_name, "sgx-epc");
        ck_assert_uint_eq(list.devices[1].size, 4096);
        qmp_memory_device_list_clear(&list);
        json_object_put(o);
}
END_TEST

START_TEST(test_parse_memory_devices_wrong_types) {
        static const char *const bad[] = {
                "{}",
                "null",
                "[1]",
                "[{\"data\": {}}]",
                "[{\"type\": 5, \"data\": {}}]",
                "[{\"type\": \"dimm\"}]",
                "[{\"type\": \"dimm\", \"data\": []}]",
                "[{\"type\": \"dimm\", \"data\": {\"slot\": 0}}]",
                "[{\"type\": \"dimm\", \"data\": {\"size\": 1}}]",
                "[{\"type\": \"dimm\", \"data\": {\"size\": \"1\", \"slot\": 0}}]",
                "[{\"type\": \"dimm\", \"data\": {\"size\": 1, \"slot\": \"0\"}}]",
                "[{\"type\": \"dimm\", \"data\": {\"size\": 1, \"slot\": 0, \"id\": 7}}]",
                "[{\"type\": \"dimm\", \"data\": {\"size\": 1, \"slot\": 0, \"memdev\": {}}}]",
                "[{\"type\": \"dimm\", \"data\": {\"size\": 1, \"slot\": 0, \"node\": \"0\"}}]",
                "[{\"type\": \"virtio-mem\", \"data\": {\"size\": 0, \"requested-size\": 0, \"max-size\": 1}}]",
                "[{\"type\": \"virtio-mem\", \"data\": {\"size\": 0, \"requested-size\": -1, \"max-size\": 1, \"block-size\": 2}}]",
                "[{\"type\": \"virtio-mem\", \"data\": {\"size\": 0.5, \"requested-size\": 0, \"max-size\": 1, \"block-size\": 2}}]",
                "[{\"type\": \"virtio-pmem\", \"data\": {}}]",
                "[{\"type\": \"sgx-epc\", \"data\": {\"size\": \"big\"}}]",
                /* one bad entry spoils the list */
                "[{\"type\": \"dimm\", \"data\": {\"size\": 1, \"slot\": 0, \"id\": \"ok\"}}, {\"type\": \"dimm\", \"data\": 3}]",
        };
        QmpMemoryDeviceList list = { .n_devices = 99 };

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                json_object *o = parse(bad[i]);

                ck_assert_msg(qmp_parse_memory_devices(o, &list) == -EBADMSG, "accepted %s", bad[i]);
                ck_assert_uint_eq(list.n_devices, 99);
                json_object_put(o);
        }
}
END_TEST

START_TEST(test_query_memory_devices) {
        fake_peer_expect(p, "query-memory-devices", NULL);
        fake_peer_reply(p, qemu72_memory_devices);
        ck_assert_int_ge(qmp_query_memory_devices(c, 0, on_devices, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert_uint_eq(got_n_devices, 2);
        ck_assert_str_eq(got_devices, "virtio-mem:vm0:0;dimm:dimm0:134217728;");

        done = false;
        fake_peer_expect(p, "query-memory-devices", NULL);
        fake_peer_reply(p, "[{\"type\": \"virtio-mem\", \"data\": {\"id\": \"vm0\", \"size\": \"0\"}}]");
        ck_assert_int_ge(qmp_query_memory_devices(c, 0, on_devices, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EBADMSG);
        ck_assert(!got_result);
}
END_TEST

START_TEST(test_virtio_mem_resize) {
        fake_peer_expect(p, "qom-set", "{\"path\": \"/machine/peripheral/vm0\", \"property\": \"requested-size\", \"value\": 536870912}");
        fake_peer_reply(p, "{}");
        ck_assert_int_ge(qmp_virtio_mem_set_requested_size(c, "vm0", 512 * MIB, 0, on_plain, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);

        done = false;
        fake_peer_expect(p, "qom-set", "{\"path\": \"/machine/unattached/device[5]\", \"property\": \"requested-size\", \"value\": 0}");
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"'requested-size' has to be multiples of 'block-size' (0x200000)\"}, \"id\": %ID%}");
        ck_assert_int_ge(qmp_virtio_mem_set_requested_size(c, "/machine/unattached/device[5]", 0, 0, on_plain, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EIO);
        ck_assert_ptr_nonnull(strstr(got_desc, "block-size"));

        ck_assert_int_eq(qmp_virtio_mem_set_requested_size(c, "", 0, 0, on_plain, NULL), -EINVAL);
        ck_assert_int_eq(qmp_virtio_mem_set_requested_size(c, NULL, 0, 0, on_plain, NULL), -EINVAL);
}
END_TEST

START_TEST(test_dimm_add) {
        fake_peer_expect(p, "object-add", "{\"qom-type\": \"memory-backend-ram\", \"id\": \"mem-d1\", \"size\": 268435456}");
        fake_peer_reply(p, "{}");
        fake_peer_expect(p, "device_add", "{\"driver\": \"pc-dimm\", \"id\": \"d1\", \"memdev\": \"mem-d1\"}");
        fake_peer_reply(p, "{}");
        ck_assert_int_ge(qmp_dimm_add(c, "d1", "mem-d1", 256 * MIB, 0, on_plain, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
}
END_TEST

START_TEST(test_dimm_add_backend_fails) {
        fake_peer_expect(p, "object-add", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"attempt to add duplicate property\"}, \"id\": %ID%}");
        ck_assert_int_ge(qmp_dimm_add(c, "d1", "mem-d1", 256 * MIB, 0, on_plain, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, -EIO);
        ck_assert_str_eq(got_desc, "attempt to add duplicate property");
        /* no device_add after a failed object-add */
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_uint_eq(fake_peer_n_unexpected(p), 0);
}
END_TEST

START_TEST(test_dimm_add_device_fails_and_rolls_back) {
        fake_peer_expect(p, "object-add", NULL);
        fake_peer_reply(p, "{}");
        fake_peer_expect(p, "device_add", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"Duplicate device ID 'd1'\"}, \"id\": %ID%}");
        fake_peer_expect(p, "object-del", "{\"id\": \"mem-d1\"}");
        fake_peer_reply(p, "{}");
        ck_assert_int_ge(qmp_dimm_add(c, "d1", "mem-d1", 256 * MIB, 0, on_plain, NULL), 0);
        wait_done();
        /* the device_add error, not the rollback's success */
        ck_assert_int_eq(got_error, -EIO);
        ck_assert_str_eq(got_desc, "Duplicate device ID 'd1'");
}
END_TEST

START_TEST(test_device_and_object_del) {
        fake_peer_expect(p, "device_del", "{\"id\": \"d1\"}");
        fake_peer_reply(p, "{}");
        fake_peer_expect(p, "object-del", "{\"id\": \"mem-d1\"}");
        fake_peer_reply(p, "{}");
        ck_assert_int_ge(qmp_device_del(c, "d1", 0, NULL, NULL), 0);
        ck_assert_int_ge(qmp_object_del(c, "mem-d1", 0, on_plain, NULL), 0);
        wait_done();
        ck_assert_int_eq(got_error, 0);
        ck_assert_int_eq(qmp_device_del(c, NULL, 0, NULL, NULL), -EINVAL);
}
END_TEST

START_TEST(test_free_client_with_pending_typed_helpers) {
        /* Helper contexts (including the DIMM chain) must be released without callbacks. */
        ck_assert_int_ge(qmp_query_balloon(c, 0, on_balloon, NULL), 0);
        ck_assert_int_ge(qmp_dimm_add(c, "d1", "mem-d1", MIB, 0, on_plain, NULL), 0);
        ck_assert_int_ge(qmp_query_memory_devices(c, 0, on_devices, NULL), 0);
        c = qmp_client_free(c);
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert(!done);
}
END_TEST

/* ---- events ---- */

static QmpEvent event_from(const char *name, const char *data_json, json_object **holder) {
        *holder = data_json ? parse(data_json) : NULL;
        return (QmpEvent) { .name = name, .data = *holder, .seconds = -1, .microseconds = -1 };
}

START_TEST(test_event_parsing) {
        QmpTypedEvent t;
        json_object *d;
        QmpEvent ev;

        ev = event_from("BALLOON_CHANGE", "{\"actual\": 805306368}", &d);
        ck_assert_int_eq(qmp_event_parse(&ev, &t), 0);
        ck_assert_int_eq(t.type, QMP_EVENT_BALLOON_CHANGE);
        ck_assert_uint_eq(t.balloon_change.actual, 768 * MIB);
        json_object_put(d);

        ev = event_from("MEMORY_DEVICE_SIZE_CHANGE", "{\"id\": \"vm0\", \"size\": 536870912, \"qom-path\": \"/machine/peripheral/vm0\"}", &d);
        ck_assert_int_eq(qmp_event_parse(&ev, &t), 0);
        ck_assert_int_eq(t.type, QMP_EVENT_MEMORY_DEVICE_SIZE_CHANGE);
        ck_assert_str_eq(t.memory_device_size_change.id, "vm0");
        ck_assert_uint_eq(t.memory_device_size_change.size, 512 * MIB);
        ck_assert_str_eq(t.memory_device_size_change.qom_path, "/machine/peripheral/vm0");
        json_object_put(d);

        /* QEMU 7.2 has no qom-path; devices may have no id */
        ev = event_from("MEMORY_DEVICE_SIZE_CHANGE", "{\"size\": 0}", &d);
        ck_assert_int_eq(qmp_event_parse(&ev, &t), 0);
        ck_assert_ptr_null(t.memory_device_size_change.id);
        ck_assert_ptr_null(t.memory_device_size_change.qom_path);
        json_object_put(d);

        ev = event_from("SHUTDOWN", "{\"guest\": true, \"reason\": \"guest-shutdown\"}", &d);
        ck_assert_int_eq(qmp_event_parse(&ev, &t), 0);
        ck_assert_int_eq(t.type, QMP_EVENT_SHUTDOWN);
        ck_assert(t.shutdown.guest);
        ck_assert_str_eq(t.shutdown.reason, "guest-shutdown");
        json_object_put(d);

        ev = event_from("SHUTDOWN", NULL, &d);
        ck_assert_int_eq(qmp_event_parse(&ev, &t), 0);
        ck_assert_int_eq(t.type, QMP_EVENT_SHUTDOWN);
        ck_assert(!t.shutdown.guest);
        ck_assert_ptr_null(t.shutdown.reason);

        ev = event_from("DEVICE_DELETED", "{\"device\": \"d1\", \"path\": \"/machine/peripheral/d1\"}", &d);
        ck_assert_int_eq(qmp_event_parse(&ev, &t), 0);
        ck_assert_int_eq(t.type, QMP_EVENT_DEVICE_DELETED);
        ck_assert_str_eq(t.device_deleted.device, "d1");
        ck_assert_str_eq(t.device_deleted.path, "/machine/peripheral/d1");
        json_object_put(d);

        ev = event_from("RTC_CHANGE", "{\"offset\": 1}", &d);
        ck_assert_int_eq(qmp_event_parse(&ev, &t), 0);
        ck_assert_int_eq(t.type, QMP_EVENT_OTHER);
        json_object_put(d);

        ck_assert_int_eq(qmp_event_type_from_name("BALLOON_CHANGE"), QMP_EVENT_BALLOON_CHANGE);
        ck_assert_str_eq(qmp_event_type_to_name(QMP_EVENT_DEVICE_DELETED), "DEVICE_DELETED");
        ck_assert_ptr_null(qmp_event_type_to_name(_QMP_EVENT_TYPE_MAX));
}
END_TEST

START_TEST(test_event_parsing_wrong_types) {
        static const struct {
                const char *name, *data;
        } bad[] = {
                { "BALLOON_CHANGE", NULL },
                { "BALLOON_CHANGE", "{}" },
                { "BALLOON_CHANGE", "{\"actual\": \"1\"}" },
                { "BALLOON_CHANGE", "{\"actual\": -1}" },
                { "BALLOON_CHANGE", "[1]" },
                { "MEMORY_DEVICE_SIZE_CHANGE", "{\"id\": \"vm0\"}" },
                { "MEMORY_DEVICE_SIZE_CHANGE", "{\"size\": 1, \"id\": 5}" },
                { "MEMORY_DEVICE_SIZE_CHANGE", "{\"size\": 1, \"qom-path\": false}" },
                { "SHUTDOWN", "{\"guest\": \"yes\"}" },
                { "SHUTDOWN", "{\"reason\": 3}" },
                { "SHUTDOWN", "\"data\"" },
                { "DEVICE_DELETED", "{\"device\": \"d1\"}" },
                { "DEVICE_DELETED", "{\"path\": 1}" },
                { "DEVICE_DELETED", "{\"path\": \"/p\", \"device\": []}" },
        };

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                QmpTypedEvent t = { .type = _QMP_EVENT_TYPE_MAX };
                json_object *d;
                QmpEvent ev = event_from(bad[i].name, bad[i].data, &d);

                ck_assert_msg(qmp_event_parse(&ev, &t) == -EBADMSG, "accepted %s %s", bad[i].name, bad[i].data);
                ck_assert_int_eq(t.type, _QMP_EVENT_TYPE_MAX); /* untouched */
                json_object_put(d);
        }
}
END_TEST

static QmpTypedEvent seen_event;
static int n_seen_events;

static void on_typed_event(QmpClient *client, const QmpEvent *event, void *userdata) {
        if (qmp_event_parse(event, &seen_event) == 0 && seen_event.type == QMP_EVENT_MEMORY_DEVICE_SIZE_CHANGE) {
                n_seen_events++;
                /* strings are valid here, inside the callback */
                ck_assert_str_eq(seen_event.memory_device_size_change.id, "vm0");
                done = true;
        }
}

START_TEST(test_typed_event_through_client) {
        static const QmpClientCallbacks callbacks = { .event = on_typed_event };

        qmp_client_set_callbacks(c, &callbacks, NULL);
        n_seen_events = 0;
        fake_peer_send(p, "{\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}, \"event\": \"MEMORY_DEVICE_SIZE_CHANGE\", "
                          "\"data\": {\"id\": \"vm0\", \"size\": 1073741824}}");
        wait_done();
        ck_assert_int_eq(n_seen_events, 1);
        ck_assert_uint_eq(seen_event.memory_device_size_change.size, GIB);
}
END_TEST

START_TEST(test_event_from_raw_message) {
        json_object *m = parse("{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": 5}, "
                               "\"timestamp\": {\"seconds\": 10, \"microseconds\": 20}}");
        QmpTypedEvent t;
        QmpEvent ev;

        ck_assert_int_eq(qmp_event_from_message(m, &ev), 0);
        ck_assert_str_eq(ev.name, "BALLOON_CHANGE");
        ck_assert_int_eq(ev.seconds, 10);
        ck_assert_int_eq(ev.microseconds, 20);
        ck_assert_int_eq(qmp_event_parse(&ev, &t), 0);
        ck_assert_uint_eq(t.balloon_change.actual, 5);
        json_object_put(m);

        m = parse("{\"event\": \"STOP\", \"timestamp\": {\"seconds\": \"10\", \"microseconds\": 20}}");
        ck_assert_int_eq(qmp_event_from_message(m, &ev), 0);
        ck_assert_int_eq(ev.seconds, -1);
        ck_assert_ptr_null(ev.data);
        json_object_put(m);

        m = parse("{\"event\": 1}");
        ck_assert_int_eq(qmp_event_from_message(m, &ev), -EBADMSG);
        json_object_put(m);
        ck_assert_int_eq(qmp_event_from_message(NULL, &ev), -EBADMSG);
}
END_TEST

START_TEST(test_sync_wait_balloon) {
        uint64_t actual = 0;

        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_reply(p, "{\"actual\": 1073741824}");
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_reply(p, "{\"actual\": 900000000}");
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_reply(p, "{\"actual\": 805310000}");
        ck_assert_int_eq(qmp_sync_wait_balloon(c, 768 * MIB, MIB, 5 * USEC_PER_MSEC, 10 * USEC_PER_SEC, &actual), 0);
        ck_assert_uint_eq(actual, 805310000);
        ck_assert(fake_peer_done(p));

        /* a guest that settles short: the last value is reported with -ETIMEDOUT */
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_reply(p, "{\"actual\": 900000000}");
        ck_assert_int_eq(qmp_sync_wait_balloon(c, 768 * MIB, MIB, 5 * USEC_PER_MSEC, 0, &actual), -ETIMEDOUT);
        ck_assert_uint_eq(actual, 900000000);
}
END_TEST

START_TEST(test_sync_wait_memory_device_size) {
        uint64_t size = 1;

        fake_peer_expect(p, "query-memory-devices", NULL);
        fake_peer_reply(p, qemu72_memory_devices); /* vm0 at 0 */
        fake_peer_expect(p, "query-memory-devices", NULL);
        fake_peer_reply(p, "[{\"type\": \"virtio-mem\", \"data\": {\"id\": \"vm0\", \"size\": 67108864, "
                           "\"requested-size\": 67108864, \"max-size\": 536870912, \"block-size\": 2097152}}]");
        ck_assert_int_eq(qmp_sync_wait_memory_device_size(c, "vm0", 64 * MIB, 5 * USEC_PER_MSEC, 10 * USEC_PER_SEC, &size), 0);
        ck_assert_uint_eq(size, 64 * MIB);

        fake_peer_expect(p, "query-memory-devices", NULL);
        fake_peer_reply(p, "[]");
        ck_assert_int_eq(qmp_sync_wait_memory_device_size(c, "vm0", 0, 5 * USEC_PER_MSEC, USEC_PER_SEC, &size), -ENODEV);
}
END_TEST

int main(void) {
        return check_run_case("qmp-commands", "commands", setup, teardown, 30,
                              CHECK_TESTS(test_parse_balloon_info, test_query_balloon, test_query_balloon_wrong_type,
                                          test_query_balloon_no_device, test_parse_blockstats, test_query_blockstats,
                                          test_balloon_set_target, test_balloon_set_target_destroy, test_stats_polling_interval,
                                          test_free_page_reporting, test_parse_guest_stats_real_shape,
                                          test_parse_guest_stats_unknown_spellings, test_parse_guest_stats_virtio_win,
                                          test_parse_guest_stats_wrong_types,
                                          test_stat_names, test_get_guest_stats, test_parse_memory_devices_real_shape,
                                          test_parse_memory_devices_edge_cases, test_parse_memory_devices_wrong_types,
                                          test_query_memory_devices, test_virtio_mem_resize, test_dimm_add,
                                          test_dimm_add_backend_fails, test_dimm_add_device_fails_and_rolls_back,
                                          test_device_and_object_del, test_free_client_with_pending_typed_helpers,
                                          test_event_parsing, test_event_parsing_wrong_types,
                                          test_typed_event_through_client, test_event_from_raw_message,
                                          test_sync_wait_balloon, test_sync_wait_memory_device_size));
}
