/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* QMP client protocol tests against the scripted fake peer on a socketpair. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/macro.h"
#include "qmp/json-stream.h"
#include "qmp/qmp-client.h"
#include "qmp/qmp-sync.h"
#include "tests/lib/fake-qmp-peer.h"
#include "tests/lib/check-run.h"
#include "tests/lib/test-util.h"

#define SHORT_TIMEOUT (50 * USEC_PER_MSEC)

typedef struct ReplyRecord {
        int n_calls;
        bool done;
        int error;
        char *error_class;
        char *error_desc;
        char *result;
} ReplyRecord;

static sd_event *e;
static QmpClient *c;
static FakePeer *p;

static int n_ready;
static int n_disconnect;
static int disconnect_error;
static char disconnect_reason[512];
static char events[16][256]; /* "NAME data-json seconds.micro" */
static int n_events;
static int n_destroy;

/* Inside-callback actions */
static bool free_in_reply, close_in_reply, free_in_event, free_in_ready, free_in_disconnect;

static bool flag_is_null(void *userdata) {
        return *(void **) userdata == NULL;
}

static bool client_closed(void *userdata) {
        return qmp_client_is_closed(userdata);
}

static bool client_ready(void *userdata) {
        return qmp_client_is_ready(userdata);
}

static bool peer_saw_close(void *userdata) {
        return fake_peer_client_closed(userdata);
}

static void reply_record_clear(ReplyRecord *r) {
        free(r->error_class);
        free(r->error_desc);
        free(r->result);
        *r = (ReplyRecord) {};
}

static void on_ready(QmpClient *client, void *userdata) {
        n_ready++;
        if (free_in_ready)
                c = qmp_client_free(c);
}

static void on_event(QmpClient *client, const QmpEvent *event, void *userdata) {
        if (n_events < (int) ARRAY_SIZE(events))
                snprintf(events[n_events], sizeof(events[0]), "%s %s %lld.%lld", event->name,
                         event->data ? json_object_to_json_string_ext(event->data, JSON_C_TO_STRING_PLAIN) : "-",
                         (long long) event->seconds, (long long) event->microseconds);
        n_events++;
        if (free_in_event)
                c = qmp_client_free(c);
}

static void on_disconnect(QmpClient *client, int error, const char *reason, void *userdata) {
        n_disconnect++;
        disconnect_error = error;
        snprintf(disconnect_reason, sizeof(disconnect_reason), "%s", reason);
        if (free_in_disconnect)
                c = qmp_client_free(c);
}

static void on_reply(QmpClient *client, const QmpReply *reply, void *userdata) {
        ReplyRecord *r = userdata;

        ck_assert_ptr_eq(client, c);
        r->n_calls++;
        r->done = true;
        r->error = reply->error;
        r->error_class = reply->error_class ? strdup(reply->error_class) : NULL;
        r->error_desc = reply->error_desc ? strdup(reply->error_desc) : NULL;
        r->result = reply->result ? strdup(json_object_to_json_string_ext(reply->result, JSON_C_TO_STRING_PLAIN)) : NULL;
        if (free_in_reply)
                c = qmp_client_free(c);
        else if (close_in_reply)
                qmp_client_close(c);
}

static void count_destroy(void *userdata) {
        n_destroy++;
}

static void setup(void) {
        static const QmpClientCallbacks callbacks = {
                .ready = on_ready,
                .event = on_event,
                .disconnect = on_disconnect,
        };
        int fds[2];

        n_ready = n_disconnect = disconnect_error = n_events = n_destroy = 0;
        disconnect_reason[0] = '\0';
        free_in_reply = close_in_reply = free_in_event = free_in_ready = free_in_disconnect = false;

        ck_assert_int_ge(sd_event_new(&e), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        ck_assert_int_ge(qmp_client_new(&c, e), 0);
        qmp_client_set_callbacks(c, &callbacks, NULL);
        ck_assert_int_ge(fake_peer_new(&p, e, fds[1]), 0);
        ck_assert_int_ge(qmp_client_connect_fd(c, fds[0]), 0);
}

static void teardown(void) {
        c = qmp_client_free(c);
        p = fake_peer_free(p);
        e = sd_event_unref(e);
}

static void assert_peer_ok(void) {
        ck_assert_msg(fake_peer_failure(p) == NULL, "peer: %s", fake_peer_failure(p));
}

static void run_script(void) {
        ck_assert_msg(test_run_until_done(e, p), "script did not finish: %s", fake_peer_failure(p) ?: "hang");
}

static void execute(const char *command, const char *args, uint64_t timeout, ReplyRecord *r) {
        ck_assert_int_ge(qmp_client_execute(c, command, args ? json_tokener_parse(args) : NULL, timeout, on_reply, r), 0);
}

/* ---- handshake ---- */

START_TEST(test_greeting_and_capabilities) {
        unsigned major, minor, micro;

        ck_assert_int_eq(qmp_client_get_qemu_version(c, &major, &minor, &micro), -ENODATA);
        fake_peer_greet(p);
        run_script();
        /* ready comes once the capabilities reply has been processed */
        ck_assert(test_run_until(e, client_ready, c));
        ck_assert_int_eq(n_ready, 1);
        ck_assert(qmp_client_is_ready(c));
        ck_assert_int_eq(qmp_client_get_qemu_version(c, &major, &minor, &micro), 0);
        ck_assert_uint_eq(major, 7);
        ck_assert_uint_eq(minor, 2);
        ck_assert_uint_eq(micro, 0);
        /* the capabilities command carried an id like every command */
        ck_assert_str_eq(fake_peer_last_id(p), "\"rs-0\"");
        ck_assert_int_eq(n_disconnect, 0);
        assert_peer_ok();
}
END_TEST

START_TEST(test_commands_queue_until_ready) {
        ReplyRecord r = {};

        /* Submitted before the greeting: must not reach the peer before qmp_capabilities. */
        execute("query-status", NULL, QMP_TIMEOUT_DEFAULT, &r);
        ck_assert_uint_eq(qmp_client_get_n_pending(c), 1);
        fake_peer_delay(p, 20 * USEC_PER_MSEC);
        fake_peer_greet(p);
        fake_peer_expect(p, "query-status", NULL);
        fake_peer_reply(p, "{\"running\": true, \"status\": \"running\"}");
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, 0);
        ck_assert_str_eq(r.result, "{\"running\":true,\"status\":\"running\"}");
        ck_assert_int_eq(n_ready, 1);
        ck_assert_uint_eq(qmp_client_get_n_pending(c), 0);
        ck_assert_uint_eq(fake_peer_n_unexpected(p), 0);
        assert_peer_ok();
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_arguments_are_sent) {
        ReplyRecord r = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "balloon", "{\"value\": 536870912}");
        fake_peer_reply(p, "{}");
        execute("balloon", "{\"value\": 536870912}", QMP_TIMEOUT_DEFAULT, &r);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, 0);
        assert_peer_ok();
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_large_command_waits_for_epollout) {
        const size_t size = 2 * 1024 * 1024;
        char *blob = malloc(size + 1), *want;
        json_object *args = json_object_new_object();
        ReplyRecord r = {};

        /* Far more than a socket buffer holds: the client must stop at EAGAIN and resume on
         * EPOLLOUT while the peer reads, without blocking the loop. */
        memset(blob, 'z', size);
        blob[size] = '\0';
        json_object_object_add(args, "blob", json_object_new_string(blob));
        if (asprintf(&want, "{\"blob\": \"%s\"}", blob) < 0)
                ck_abort();
        fake_peer_greet(p);
        fake_peer_expect(p, "big", want);
        fake_peer_reply(p, "\"got it\"");
        ck_assert_int_ge(qmp_client_execute(c, "big", args, QMP_TIMEOUT_DEFAULT, on_reply, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_str_eq(r.result, "\"got it\"");
        assert_peer_ok();
        free(want);
        free(blob);
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_not_a_qmp_greeting) {
        ReplyRecord r = {};

        execute("query-status", NULL, QMP_TIMEOUT_DEFAULT, &r);
        fake_peer_send(p, "{\"hello\": \"world\"}\n");
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, -ECONNRESET);
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, -EPROTO);
        ck_assert_ptr_nonnull(strstr(qmp_client_get_last_error(c), "greeting"));
        ck_assert_int_eq(n_ready, 0);
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_capabilities_refused) {
        fake_peer_send(p, "{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n");
        fake_peer_expect(p, "qmp_capabilities", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"nope\"}, \"id\": %ID%}\n");
        run_script();
        ck_assert(test_run_until(e, client_closed, c));
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, -EPROTO);
        ck_assert_ptr_nonnull(strstr(disconnect_reason, "nope"));
        ck_assert_int_eq(n_ready, 0);
        /* odd version shapes are tolerated, just not reported */
        ck_assert_int_eq(qmp_client_get_qemu_version(c, NULL, NULL, NULL), -ENODATA);
}
END_TEST

START_TEST(test_handshake_timeout) {
        QmpClient *slow;
        int fds[2];

        /* A client whose peer never greets (QEMU's monitor busy with another client). */
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        ck_assert_int_ge(qmp_client_new(&slow, e), 0);
        qmp_client_set_handshake_timeout(slow, SHORT_TIMEOUT);
        ck_assert_int_ge(qmp_client_connect_fd(slow, fds[0]), 0);
        ck_assert_int_ge(qmp_client_execute(slow, "query-status", NULL, QMP_TIMEOUT_INFINITY, NULL, NULL), 0);
        ck_assert(test_run_until(e, client_closed, slow));
        ck_assert_int_eq(qmp_client_get_last_errno(slow), -ETIMEDOUT);
        ck_assert_ptr_nonnull(strstr(qmp_client_get_last_error(slow), "greeting"));
        ck_assert_uint_eq(qmp_client_get_n_pending(slow), 0);
        qmp_client_free(slow);
        close(fds[1]);
}
END_TEST

/* ---- replies and events ---- */

START_TEST(test_replies_matched_by_id) {
        ReplyRecord a = {}, b = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "cmd-a", NULL);
        fake_peer_expect(p, "cmd-b", NULL);
        /* answered in the opposite order */
        fake_peer_send(p, "{\"return\": \"for-b\", \"id\": %ID:2%}\n");
        fake_peer_send(p, "{\"return\": \"for-a\", \"id\": %ID:1%}\n");
        execute("cmd-a", NULL, QMP_TIMEOUT_DEFAULT, &a);
        execute("cmd-b", NULL, QMP_TIMEOUT_DEFAULT, &b);
        run_script();
        ck_assert(test_run_until_flag(e, &a.done));
        ck_assert_str_eq(a.result, "\"for-a\"");
        ck_assert_str_eq(b.result, "\"for-b\"");
        ck_assert_int_eq(a.n_calls, 1);
        ck_assert_int_eq(b.n_calls, 1);
        assert_peer_ok();
        reply_record_clear(&a);
        reply_record_clear(&b);
}
END_TEST

START_TEST(test_events_between_replies) {
        ReplyRecord a = {}, b = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "cmd-a", NULL);
        fake_peer_send(p,
                       "{\"timestamp\": {\"seconds\": 1700000000, \"microseconds\": 123456}, \"event\": "
                       "\"BALLOON_CHANGE\", \"data\": {\"actual\": 1073741824}}\r\n");
        fake_peer_reply(p, "{}");
        fake_peer_send(p, "{\"event\": \"STOP\"}\r\n");
        fake_peer_expect(p, "cmd-b", NULL);
        fake_peer_reply(p, "{}");
        execute("cmd-a", NULL, QMP_TIMEOUT_DEFAULT, &a);
        execute("cmd-b", NULL, QMP_TIMEOUT_DEFAULT, &b);
        run_script();
        ck_assert(test_run_until_flag(e, &b.done));
        ck_assert_int_eq(n_events, 2);
        ck_assert_str_eq(events[0], "BALLOON_CHANGE {\"actual\":1073741824} 1700000000.123456");
        /* no data, no timestamp */
        ck_assert_str_eq(events[1], "STOP - -1.-1");
        ck_assert_int_eq(a.error, 0);
        ck_assert_int_eq(b.error, 0);
        assert_peer_ok();
        reply_record_clear(&a);
        reply_record_clear(&b);
}
END_TEST

START_TEST(test_split_reads_byte_by_byte) {
        ReplyRecord r = {};
        size_t chunks_before;

        fake_peer_set_chunk_size(p, 1);
        fake_peer_greet(p);
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_send(p, "{\"event\": \"SHUTDOWN\", \"data\": {\"guest\": true, \"reason\": \"guest-shutdown\"}}");
        fake_peer_send(p, "{\"return\": {\"actual\": 1073741824}, \"id\": %ID%}\r\n");
        execute("query-balloon", NULL, QMP_TIMEOUT_DEFAULT, &r);
        chunks_before = fake_peer_n_chunks_written(p);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, 0);
        ck_assert_str_eq(r.result, "{\"actual\":1073741824}");
        ck_assert_int_eq(n_events, 1);
        ck_assert_str_eq(events[0], "SHUTDOWN {\"guest\":true,\"reason\":\"guest-shutdown\"} -1.-1");
        ck_assert_int_eq(n_ready, 1);
        /* every byte went out in its own write */
        ck_assert_uint_gt(fake_peer_n_chunks_written(p) - chunks_before, 150);
        assert_peer_ok();
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_merged_reads) {
        ReplyRecord a = {}, b = {};

        /* greeting, capabilities reply is separate (needs the id); then everything at once */
        fake_peer_greet(p);
        fake_peer_expect(p, "cmd-a", NULL);
        fake_peer_expect(p, "cmd-b", NULL);
        fake_peer_send(p,
                       "{\"return\": 1, \"id\": %ID:1%}{\"event\": \"RESUME\"}\n"
                       "{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": 5}}{\"return\": 2, \"id\": %ID:2%}");
        execute("cmd-a", NULL, QMP_TIMEOUT_DEFAULT, &a);
        execute("cmd-b", NULL, QMP_TIMEOUT_DEFAULT, &b);
        run_script();
        ck_assert(test_run_until_flag(e, &b.done));
        ck_assert_str_eq(a.result, "1");
        ck_assert_str_eq(b.result, "2");
        ck_assert_int_eq(n_events, 2);
        ck_assert_str_eq(events[0], "RESUME - -1.-1");
        ck_assert_str_eq(events[1], "BALLOON_CHANGE {\"actual\":5} -1.-1");
        assert_peer_ok();
        reply_record_clear(&a);
        reply_record_clear(&b);
}
END_TEST

START_TEST(test_error_replies) {
        ReplyRecord generic = {}, notfound = {}, inactive = {}, nocmd = {}, malformed = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "a", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"it broke\"}, \"id\": %ID%}\n");
        fake_peer_expect(p, "b", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"DeviceNotFound\", \"desc\": \"Device 'x' not found\"}, \"id\": %ID%}\n");
        fake_peer_expect(p, "c", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"DeviceNotActive\", \"desc\": \"No balloon device has been activated\"}, \"id\": %ID%}\n");
        fake_peer_expect(p, "d", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command d has not been found\"}, \"id\": %ID%}\n");
        fake_peer_expect(p, "e", NULL);
        fake_peer_send(p, "{\"error\": 42, \"id\": %ID%}\n");
        execute("a", NULL, QMP_TIMEOUT_DEFAULT, &generic);
        execute("b", NULL, QMP_TIMEOUT_DEFAULT, &notfound);
        execute("c", NULL, QMP_TIMEOUT_DEFAULT, &inactive);
        execute("d", NULL, QMP_TIMEOUT_DEFAULT, &nocmd);
        execute("e", NULL, QMP_TIMEOUT_DEFAULT, &malformed);
        run_script();
        ck_assert(test_run_until_flag(e, &malformed.done));

        ck_assert_int_eq(generic.error, -EIO);
        ck_assert_str_eq(generic.error_class, "GenericError");
        ck_assert_str_eq(generic.error_desc, "it broke");
        ck_assert_ptr_null(generic.result);
        ck_assert_int_eq(notfound.error, -ENODEV);
        ck_assert_str_eq(notfound.error_class, "DeviceNotFound");
        ck_assert_int_eq(inactive.error, -ENXIO);
        ck_assert_int_eq(nocmd.error, -EOPNOTSUPP);
        ck_assert_int_eq(malformed.error, -EIO);
        ck_assert_ptr_null(malformed.error_class);
        ck_assert_str_eq(malformed.error_desc, "malformed error reply");
        /* error replies do not hurt the connection */
        ck_assert(qmp_client_is_ready(c));
        ck_assert_int_eq(n_disconnect, 0);
        assert_peer_ok();
        reply_record_clear(&generic);
        reply_record_clear(&notfound);
        reply_record_clear(&inactive);
        reply_record_clear(&nocmd);
        reply_record_clear(&malformed);
}
END_TEST

START_TEST(test_unknown_ids_dropped) {
        ReplyRecord r = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "query-status", NULL);
        fake_peer_send(p, "{\"return\": \"bogus\", \"id\": \"rs-999\"}\n");
        fake_peer_send(p, "{\"return\": \"no id\"}\n");
        fake_peer_send(p, "{\"return\": \"numeric id\", \"id\": 1}\n");
        fake_peer_send(p, "{\"something\": \"else\"}\n");
        fake_peer_reply(p, "\"real\"");
        execute("query-status", NULL, QMP_TIMEOUT_DEFAULT, &r);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_str_eq(r.result, "\"real\"");
        ck_assert_int_eq(r.n_calls, 1);
        ck_assert_uint_eq(qmp_client_get_n_dropped(c), 4);
        ck_assert(qmp_client_is_ready(c));
        reply_record_clear(&r);
}
END_TEST

/* ---- timeouts ---- */

START_TEST(test_command_timeout_and_late_reply) {
        ReplyRecord slow = {}, next = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "slow", NULL);
        /* answer only long after the 50 ms timeout */
        fake_peer_delay(p, 300 * USEC_PER_MSEC);
        fake_peer_reply(p, "\"too late\"");
        fake_peer_expect(p, "next", NULL);
        fake_peer_reply(p, "\"in time\"");
        ck_assert_int_ge(qmp_client_execute_full(c, "slow", NULL, SHORT_TIMEOUT, on_reply, &slow, count_destroy), 0);
        ck_assert(test_run_until_flag(e, &slow.done));
        ck_assert_int_eq(slow.error, -ETIMEDOUT);
        ck_assert_ptr_nonnull(strstr(slow.error_desc, "timed out"));
        ck_assert_int_eq(n_destroy, 1);
        ck_assert_uint_eq(qmp_client_get_n_pending(c), 0);

        execute("next", NULL, QMP_TIMEOUT_DEFAULT, &next);
        run_script();
        ck_assert(test_run_until_flag(e, &next.done));
        ck_assert_str_eq(next.result, "\"in time\"");
        /* the late reply went nowhere: not to "slow" a second time, not to "next" */
        ck_assert_int_eq(slow.n_calls, 1);
        ck_assert_uint_eq(qmp_client_get_n_dropped(c), 1);
        ck_assert(qmp_client_is_ready(c));
        assert_peer_ok();
        reply_record_clear(&slow);
        reply_record_clear(&next);
}
END_TEST

START_TEST(test_timeout_while_queued) {
        ReplyRecord r = {};

        /* Never greeted: the command times out while still queued and is never sent. */
        ck_assert_int_ge(qmp_client_execute(c, "queued", NULL, SHORT_TIMEOUT, on_reply, &r), 0);
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, -ETIMEDOUT);
        fake_peer_greet(p);
        run_script();
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_uint_eq(fake_peer_n_unexpected(p), 0);
        ck_assert_int_eq(r.n_calls, 1);
        reply_record_clear(&r);
}
END_TEST

/* ---- disconnects and garbage ---- */

START_TEST(test_disconnect_mid_reply) {
        ReplyRecord a = {}, b = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "a", NULL);
        fake_peer_expect(p, "b", NULL);
        fake_peer_send(p, "{\"return\": {\"actual\": 10");
        fake_peer_close(p);
        ck_assert_int_ge(qmp_client_execute_full(c, "a", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &a, count_destroy), 0);
        ck_assert_int_ge(qmp_client_execute_full(c, "b", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &b, count_destroy), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &b.done));
        ck_assert_int_eq(a.error, -ECONNRESET);
        ck_assert_int_eq(b.error, -ECONNRESET);
        ck_assert_ptr_nonnull(strstr(a.error_desc, "middle of a message"));
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, -ECONNRESET);
        ck_assert_ptr_nonnull(strstr(qmp_client_get_last_error(c), "middle of a message"));
        ck_assert_int_eq(n_destroy, 2);
        ck_assert(qmp_client_is_closed(c));
        ck_assert_int_eq(qmp_client_execute(c, "c", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &a), -ENOTCONN);
        /* disconnect is reported once, no matter how long the loop keeps running */
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_int_eq(n_disconnect, 1);
        reply_record_clear(&a);
        reply_record_clear(&b);
}
END_TEST

START_TEST(test_disconnect_between_messages) {
        fake_peer_greet(p);
        fake_peer_close(p);
        run_script();
        ck_assert(test_run_until(e, client_closed, c));
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, -ECONNRESET);
        ck_assert_str_eq(qmp_client_get_last_error(c), "connection closed by peer");
        ck_assert_int_eq(qmp_client_get_last_errno(c), -ECONNRESET);
}
END_TEST

static void assert_garbage_closes(const char *garbage, size_t size, int want_error, const char *want_reason) {
        ReplyRecord r = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "victim", NULL);
        fake_peer_send_bytes(p, garbage, size);
        execute("victim", NULL, QMP_TIMEOUT_DEFAULT, &r);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, -ECONNRESET);
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, want_error);
        ck_assert_msg(strstr(qmp_client_get_last_error(c), want_reason), "last error: %s", qmp_client_get_last_error(c));
        ck_assert(qmp_client_is_closed(c));
        /* the client hung up on the peer */
        ck_assert(test_run_until(e, peer_saw_close, p));
        reply_record_clear(&r);
}

/* Input that must end the connection: each row is one loop-test iteration. */
#define GARBAGE(text) .bytes = (text), .size = sizeof(text) - 1
static const struct {
        const char *bytes;
        size_t size;
        int error;
        const char *reason;
} garbage_cases[] = {
        { GARBAGE("{\"return\": ]}"), -EBADMSG, "malformed JSON" },
        /* truncated, then a new message */
        { GARBAGE("{\"return\": {\"actual\": 1\n{\"event\": \"STOP\"}"), -EBADMSG, "malformed JSON" },
        { GARBAGE("\x01\x02\0\xff\xfe garbage"), -EBADMSG, "malformed JSON" },
        /* invalid UTF-8 */
        { GARBAGE("{\"event\": \"X\", \"data\": \"\xc3\x28\"}"), -EBADMSG, "malformed JSON" },
        { GARBAGE("[1, 2, 3]"), -EBADMSG, "not an object" },
};

START_TEST(test_garbage) {
        assert_garbage_closes(garbage_cases[_i].bytes, garbage_cases[_i].size, garbage_cases[_i].error, garbage_cases[_i].reason);
}
END_TEST

START_TEST(test_deep_nesting) {
        char deep[256];
        size_t n = 0;

        /* depth 40 > the default cap of 32 */
        n += (size_t) snprintf(deep, sizeof(deep), "{\"return\": ");
        for (int i = 0; i < 40; i++)
                deep[n++] = '[';
        for (int i = 0; i < 40; i++)
                deep[n++] = ']';
        deep[n++] = '}';
        assert_garbage_closes(deep, n, -EBADMSG, "nesting too deep");
}
END_TEST

START_TEST(test_nesting_within_limit) {
        ReplyRecord r = {};
        char ok[256];
        size_t n = 0;

        n += (size_t) snprintf(ok, sizeof(ok), "{\"id\": %%ID%%, \"return\": ");
        for (int i = 0; i < 20; i++)
                ok[n++] = '[';
        for (int i = 0; i < 20; i++)
                ok[n++] = ']';
        ok[n++] = '}';
        ok[n] = '\0';
        fake_peer_greet(p);
        fake_peer_expect(p, "deep", NULL);
        fake_peer_send(p, ok);
        execute("deep", NULL, QMP_TIMEOUT_DEFAULT, &r);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, 0);
        ck_assert(qmp_client_is_ready(c));
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_configured_depth_cap) {
        QmpClient *shallow;
        FakePeer *peer;
        int fds[2];

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        ck_assert_int_ge(qmp_client_new(&shallow, e), 0);
        ck_assert_int_eq(qmp_client_set_max_depth(shallow, 3), 0);
        ck_assert_int_ge(qmp_client_connect_fd(shallow, fds[0]), 0);
        ck_assert_int_eq(qmp_client_set_max_depth(shallow, 5), -EBUSY);
        ck_assert_int_ge(fake_peer_new(&peer, e, fds[1]), 0);
        /* the greeting itself has depth 4 */
        fake_peer_send(peer, "{\"QMP\": {\"version\": {\"qemu\": {\"major\": 7}}}}");
        ck_assert(test_run_until(e, client_closed, shallow));
        ck_assert_ptr_nonnull(strstr(qmp_client_get_last_error(shallow), "nesting too deep"));
        qmp_client_free(shallow);
        fake_peer_free(peer);
}
END_TEST

START_TEST(test_oversized_message_default_cap) {
        const size_t size = 1024 * 1024 + 4096;
        char *big = malloc(size + 64);
        size_t n;

        /* a well-formed reply, just too big: a string of 1 MiB + 4 KiB */
        n = (size_t) sprintf(big, "{\"return\": \"");
        memset(big + n, 'x', size);
        n += size;
        n += (size_t) sprintf(big + n, "\"}");
        assert_garbage_closes(big, n, -EMSGSIZE, "exceeds the limit of 1048576 bytes");
        free(big);
}
END_TEST

START_TEST(test_oversized_message_never_ends) {
        const size_t size = 3 * 1024 * 1024;
        char *big = malloc(size);

        /* An endless string: the client must give up at the cap, not wait for the end. */
        memcpy(big, "{\"return\": \"", 12);
        memset(big + 12, 'y', size - 12);
        assert_garbage_closes(big, size, -EMSGSIZE, "exceeds the limit");
        free(big);
}
END_TEST

START_TEST(test_oversized_message_configured_cap) {
        QmpClient *small;
        FakePeer *peer;
        int fds[2];
        char msg[2048];

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        ck_assert_int_ge(qmp_client_new(&small, e), 0);
        ck_assert_int_eq(qmp_client_set_max_message_size(small, 1000), 0);
        ck_assert_int_ge(qmp_client_connect_fd(small, fds[0]), 0);
        ck_assert_int_ge(fake_peer_new(&peer, e, fds[1]), 0);
        /* complete in one read, and still refused */
        snprintf(msg, sizeof(msg), "{\"QMP\": {\"capabilities\": [], \"pad\": \"%01200d\"}}", 0);
        fake_peer_send(peer, msg);
        ck_assert(test_run_until(e, client_closed, small));
        ck_assert_int_eq(qmp_client_get_last_errno(small), -EMSGSIZE);
        ck_assert_ptr_nonnull(strstr(qmp_client_get_last_error(small), "1000 bytes"));
        qmp_client_free(small);
        fake_peer_free(peer);
}
END_TEST

/* "[{},{},..." of `count` empty objects, in a reply; closed with "]}" if `closed`. */
static char *objects_reply(size_t count, bool closed, size_t *ret_len) {
        size_t n, size = 64 + count * 3;
        char *text = malloc(size);

        ck_assert_ptr_nonnull(text);
        n = (size_t) sprintf(text, "{\"id\": %%ID%%, \"return\": [");
        for (size_t i = 0; i < count; i++)
                n += (size_t) sprintf(text + n, i > 0 ? ",{}" : "{}");
        if (closed)
                n += (size_t) sprintf(text + n, "]}");
        *ret_len = n;
        return text;
}

START_TEST(test_container_flood_closes_early) {
        ReplyRecord first = {}, victim = {};
        uint64_t peak_before, peak_after;
        size_t len;
        /* A megabyte of empty objects, never closed, within the byte cap: json-c would build
         * them all (hundreds of MiB) and wait for the rest. */
        _cleanup_free_ char *flood = objects_reply((JSON_STREAM_MAX_MESSAGE_DEFAULT - 64) / 3, false, &len);

        fake_peer_greet(p);
        fake_peer_expect(p, "first", NULL);
        fake_peer_reply(p, "1");
        fake_peer_expect(p, "victim", NULL);
        fake_peer_send(p, flood);
        peak_before = test_peak_rss();
        execute("first", NULL, QMP_TIMEOUT_DEFAULT, &first);
        execute("victim", NULL, QMP_TIMEOUT_DEFAULT, &victim);
        run_script();
        ck_assert(test_run_until_flag(e, &victim.done));
        peak_after = test_peak_rss();
        /* the reply before the flood was delivered; the flood ended the connection at the cap */
        ck_assert_int_eq(first.error, 0);
        ck_assert_str_eq(first.result, "1");
        ck_assert_int_eq(victim.error, -ECONNRESET);
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, -EMSGSIZE);
        ck_assert_msg(strstr(disconnect_reason, "more than 4096 objects and arrays"), "reason: %s", disconnect_reason);
        /* 4096 objects cost a few MiB at most; the whole flood would cost about 270 MiB */
        ck_assert_msg(peak_after - peak_before < 32 * MIB, "peak RSS grew by %.1f MiB",
                      (double) (peak_after - peak_before) / MIB);
        ck_assert(test_run_until(e, peer_saw_close, p));
        reply_record_clear(&first);
        reply_record_clear(&victim);
}
END_TEST

START_TEST(test_containers_within_cap) {
        ReplyRecord r = {};
        size_t len;
        /* exactly the cap: the reply object, its array and the objects in it */
        _cleanup_free_ char *reply = objects_reply(JSON_STREAM_MAX_CONTAINERS_DEFAULT - 2, true, &len);

        fake_peer_greet(p);
        fake_peer_expect(p, "many", NULL);
        fake_peer_send(p, reply);
        execute("many", NULL, QMP_TIMEOUT_DEFAULT, &r);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, 0);
        ck_assert(qmp_client_is_ready(c));
        ck_assert_int_eq(n_disconnect, 0);
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_configured_container_cap) {
        QmpClient *small;
        FakePeer *peer;
        int fds[2];

        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        ck_assert_int_ge(qmp_client_new(&small, e), 0);
        ck_assert_int_eq(qmp_client_set_max_containers(small, 3), 0);
        ck_assert_int_ge(qmp_client_connect_fd(small, fds[0]), 0);
        ck_assert_int_eq(qmp_client_set_max_containers(small, 5), -EBUSY);
        ck_assert_int_ge(fake_peer_new(&peer, e, fds[1]), 0);
        /* four containers, brackets inside strings not counted: one past the cap of 3 */
        fake_peer_send(peer, "{\"QMP\": {\"version\": {\"x\": \"{[{[\\\"{\"}, \"capabilities\": []}}");
        ck_assert(test_run_until(e, client_closed, small));
        ck_assert_int_eq(qmp_client_get_last_errno(small), -EMSGSIZE);
        ck_assert_ptr_nonnull(strstr(qmp_client_get_last_error(small), "more than 3 objects and arrays"));
        qmp_client_free(small);
        fake_peer_free(peer);
}
END_TEST

/* ---- freeing or closing from callbacks ---- */

START_TEST(test_free_in_reply_callback) {
        ReplyRecord a = {}, b = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "a", NULL);
        fake_peer_expect(p, "b", NULL);
        /* both replies and an event in one read: after the free nothing may run */
        fake_peer_send(p, "{\"return\": 1, \"id\": %ID:1%}{\"event\": \"STOP\"}{\"return\": 2, \"id\": %ID:2%}");
        ck_assert_int_ge(qmp_client_execute_full(c, "a", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &a, count_destroy), 0);
        ck_assert_int_ge(qmp_client_execute_full(c, "b", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &b, count_destroy), 0);
        free_in_reply = true;
        run_script();
        ck_assert(test_run_until_flag(e, &a.done));
        ck_assert_ptr_null(c);
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_int_eq(a.n_calls, 1);
        ck_assert_int_eq(b.n_calls, 0);
        ck_assert_int_eq(n_events, 0);
        ck_assert_int_eq(n_disconnect, 0);
        ck_assert_int_eq(n_destroy, 2);
        ck_assert(test_run_until(e, peer_saw_close, p));
        reply_record_clear(&a);
        reply_record_clear(&b);
}
END_TEST

START_TEST(test_close_in_reply_callback) {
        ReplyRecord a = {}, b = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "a", NULL);
        fake_peer_expect(p, "b", NULL);
        fake_peer_send(p, "{\"return\": 1, \"id\": %ID:1%}{\"return\": 2, \"id\": %ID:2%}");
        execute("a", NULL, QMP_TIMEOUT_DEFAULT, &a);
        execute("b", NULL, QMP_TIMEOUT_DEFAULT, &b);
        close_in_reply = true;
        run_script();
        ck_assert(test_run_until_flag(e, &a.done));
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_int_eq(b.n_calls, 0);
        ck_assert(qmp_client_is_closed(c));
        ck_assert_str_eq(qmp_client_get_last_error(c), "closed by the client");
        ck_assert_int_eq(qmp_client_get_last_errno(c), -ECANCELED);
        ck_assert_int_eq(n_disconnect, 0);
        ck_assert_int_eq(qmp_client_execute(c, "c", NULL, QMP_TIMEOUT_DEFAULT, NULL, NULL), -ENOTCONN);
        reply_record_clear(&a);
        reply_record_clear(&b);
}
END_TEST

START_TEST(test_free_in_event_callback) {
        ReplyRecord r = {};

        fake_peer_greet(p);
        fake_peer_expect(p, "a", NULL);
        fake_peer_send(p, "{\"event\": \"STOP\"}{\"event\": \"RESUME\"}{\"return\": 1, \"id\": %ID%}");
        ck_assert_int_ge(qmp_client_execute_full(c, "a", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &r, count_destroy), 0);
        free_in_event = true;
        run_script();
        ck_assert(test_run_until(e, peer_saw_close, p));
        ck_assert_ptr_null(c);
        ck_assert_int_eq(n_events, 1);
        ck_assert_int_eq(r.n_calls, 0);
        ck_assert_int_eq(n_destroy, 1);
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_free_in_ready_callback) {
        ReplyRecord r = {};

        ck_assert_int_ge(qmp_client_execute_full(c, "queued", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &r, count_destroy), 0);
        free_in_ready = true;
        fake_peer_greet(p);
        run_script();
        ck_assert(test_run_until(e, peer_saw_close, p));
        ck_assert_ptr_null(c);
        ck_assert_int_eq(n_ready, 1);
        ck_assert_int_eq(r.n_calls, 0);
        ck_assert_int_eq(n_destroy, 1);
        reply_record_clear(&r);
}
END_TEST

START_TEST(test_free_in_disconnect_callback) {
        free_in_disconnect = true;
        fake_peer_greet(p);
        fake_peer_close(p);
        run_script();
        ck_assert(test_run_until(e, (bool (*)(void *)) flag_is_null, &c));
        ck_assert_int_eq(n_disconnect, 1);
}
END_TEST

START_TEST(test_free_while_failing_pending_commands) {
        ReplyRecord a = {}, b = {};

        /* The first -ECONNRESET callback frees the client: the second command gets only its
         * destroy, and the disconnect callback never runs. */
        fake_peer_greet(p);
        fake_peer_expect(p, "a", NULL);
        fake_peer_expect(p, "b", NULL);
        fake_peer_close(p);
        ck_assert_int_ge(qmp_client_execute_full(c, "a", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &a, count_destroy), 0);
        ck_assert_int_ge(qmp_client_execute_full(c, "b", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &b, count_destroy), 0);
        free_in_reply = true;
        run_script();
        ck_assert(test_run_until_flag(e, &a.done));
        ck_assert_ptr_null(c);
        ck_assert_int_eq(a.error, -ECONNRESET);
        ck_assert_int_eq(b.n_calls, 0);
        ck_assert_int_eq(n_destroy, 2);
        ck_assert_int_eq(n_disconnect, 0);
        reply_record_clear(&a);
        reply_record_clear(&b);
}
END_TEST

START_TEST(test_free_in_timeout_callback) {
        ReplyRecord a = {}, b = {};

        fake_peer_greet(p);
        run_script();
        ck_assert_int_ge(qmp_client_execute_full(c, "a", NULL, SHORT_TIMEOUT, on_reply, &a, count_destroy), 0);
        ck_assert_int_ge(qmp_client_execute_full(c, "b", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &b, count_destroy), 0);
        free_in_reply = true;
        ck_assert(test_run_until_flag(e, &a.done));
        ck_assert_int_eq(a.error, -ETIMEDOUT);
        ck_assert_ptr_null(c);
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_int_eq(b.n_calls, 0);
        ck_assert_int_eq(n_destroy, 2);
        reply_record_clear(&a);
        reply_record_clear(&b);
}
END_TEST

START_TEST(test_free_with_pending_commands) {
        ReplyRecord a = {};

        ck_assert_int_ge(qmp_client_execute_full(c, "a", NULL, QMP_TIMEOUT_DEFAULT, on_reply, &a, count_destroy), 0);
        c = qmp_client_free(c);
        ck_assert_int_eq(n_destroy, 1);
        ck_assert_int_eq(a.n_calls, 0);
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_int_eq(a.n_calls, 0);
        ck_assert_int_eq(n_destroy, 1);
}
END_TEST

START_TEST(test_extra_reference_outlives_free) {
        QmpClient *extra = qmp_client_ref(c);

        fake_peer_greet(p);
        run_script();
        ck_assert(test_run_until(e, client_ready, c));
        c = qmp_client_free(c);
        /* still valid memory, but closed for good */
        ck_assert(qmp_client_is_closed(extra));
        ck_assert_int_eq(qmp_client_execute(extra, "x", json_object_new_object(), 0, NULL, NULL), -ENOTCONN);
        qmp_client_unref(extra);
}
END_TEST

/* ---- connecting by path ---- */

START_TEST(test_connect_path) {
        char dir[] = "/tmp/test-qmp-XXXXXX", path[128];
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        QmpClient *pc;
        FakePeer *server;
        int listener, conn;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/qmp.sock", dir);
        memcpy(addr.sun_path, path, strlen(path));
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(listener, 0);
        ck_assert_int_eq(bind(listener, (struct sockaddr *) &addr, sizeof(addr)), 0);
        ck_assert_int_eq(listen(listener, 1), 0);

        ck_assert_int_ge(qmp_client_new(&pc, e), 0);
        ck_assert_int_ge(qmp_client_connect_path(pc, path), 0);
        ck_assert_int_eq(qmp_client_connect_path(pc, path), -EBUSY);
        conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
        ck_assert_int_ge(conn, 0);
        ck_assert_int_ge(fake_peer_new(&server, e, conn), 0);
        fake_peer_greet(server);
        ck_assert_int_eq(qmp_sync_wait_ready(pc, 5 * USEC_PER_SEC), 0);
        ck_assert(qmp_client_is_ready(pc));

        qmp_client_free(pc);
        fake_peer_free(server);
        close(listener);
        unlink(path);
        rmdir(dir);
}
END_TEST

START_TEST(test_connect_path_errors) {
        QmpClient *pc;
        char long_path[200];

        ck_assert_int_ge(qmp_client_new(&pc, e), 0);
        ck_assert_int_eq(qmp_client_connect_path(pc, "/nonexistent/qmp.sock"), -ENOENT);
        ck_assert(qmp_client_is_closed(pc));
        ck_assert_ptr_nonnull(strstr(qmp_client_get_last_error(pc), "/nonexistent/qmp.sock"));
        ck_assert_int_eq(qmp_client_get_last_errno(pc), -ENOENT);
        qmp_client_free(pc);

        memset(long_path, 'a', sizeof(long_path) - 1);
        long_path[0] = '/';
        long_path[sizeof(long_path) - 1] = '\0';
        ck_assert_int_ge(qmp_client_new(&pc, e), 0);
        ck_assert_int_eq(qmp_client_connect_path(pc, long_path), -ENAMETOOLONG);
        qmp_client_free(pc);
}
END_TEST

/* ---- blocking conveniences ---- */

START_TEST(test_sync_execute_and_event_watch) {
        QmpEventWatch *w;
        json_object *result = NULL, *event = NULL;
        char *error = NULL;

        fake_peer_greet(p);
        fake_peer_expect(p, "balloon", "{\"value\": 268435456}");
        /* the event arrives together with the reply: before anyone waits for it */
        fake_peer_send(p, "{\"return\": {}, \"id\": %ID%}{\"event\": \"BALLOON_CHANGE\", \"data\": {\"actual\": 268435456}}");
        fake_peer_expect(p, "bad", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"no\"}, \"id\": %ID%}");

        ck_assert_int_eq(qmp_sync_wait_ready(c, 5 * USEC_PER_SEC), 0);
        ck_assert_int_eq(qmp_event_watch_new(c, "BALLOON_CHANGE", &w), 0);
        ck_assert_int_eq(qmp_sync_execute(c, "balloon", json_tokener_parse("{\"value\": 268435456}"), 0, &result, &error), 0);
        ck_assert_ptr_null(error);
        ck_assert_str_eq(json_object_to_json_string_ext(result, JSON_C_TO_STRING_PLAIN), "{}");
        json_object_put(result);
        ck_assert_uint_eq(qmp_event_watch_count(w), 1);
        ck_assert_int_eq(qmp_event_watch_next(w, USEC_PER_SEC, &event), 0);
        ck_assert_str_eq(json_object_to_json_string_ext(event, JSON_C_TO_STRING_PLAIN),
                         "{\"event\":\"BALLOON_CHANGE\",\"data\":{\"actual\":268435456}}");
        json_object_put(event);
        /* the original event callback still saw it */
        ck_assert_int_eq(n_events, 1);
        /* nothing more: times out */
        ck_assert_int_eq(qmp_event_watch_next(w, SHORT_TIMEOUT, &event), -ETIMEDOUT);

        ck_assert_int_eq(qmp_sync_execute(c, "bad", NULL, 0, &result, &error), -EIO);
        ck_assert_str_eq(error, "no");
        free(error);
        w = qmp_event_watch_free(w);
        assert_peer_ok();
}
END_TEST

static Suite *qmp_client_suite(void) {
        Suite *s = suite_create("qmp-client");
        TCase *tc = check_add_case(s, "protocol", setup, teardown, 30,
                                   CHECK_TESTS(test_greeting_and_capabilities, test_commands_queue_until_ready,
                                               test_arguments_are_sent, test_large_command_waits_for_epollout,
                                               test_not_a_qmp_greeting, test_capabilities_refused,
                                               test_handshake_timeout, test_replies_matched_by_id,
                                               test_events_between_replies, test_split_reads_byte_by_byte,
                                               test_merged_reads, test_error_replies, test_unknown_ids_dropped,
                                               test_command_timeout_and_late_reply, test_timeout_while_queued,
                                               test_disconnect_mid_reply, test_disconnect_between_messages,
                                               test_deep_nesting, test_nesting_within_limit, test_configured_depth_cap,
                                               test_oversized_message_default_cap, test_oversized_message_never_ends,
                                               test_oversized_message_configured_cap, test_container_flood_closes_early,
                                               test_containers_within_cap, test_configured_container_cap,
                                               test_free_in_reply_callback,
                                               test_close_in_reply_callback, test_free_in_event_callback,
                                               test_free_in_ready_callback, test_free_in_disconnect_callback,
                                               test_free_while_failing_pending_commands, test_free_in_timeout_callback,
                                               test_free_with_pending_commands, test_extra_reference_outlives_free,
                                               test_connect_path, test_connect_path_errors,
                                               test_sync_execute_and_event_watch));
        tcase_add_loop_test(tc, test_garbage, 0, ARRAY_SIZE(garbage_cases));
        return s;
}

int main(void) {
        return check_run_suite(qmp_client_suite());
}
