/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Guest agent client: guest-sync-delimited resynchronisation, one command in flight,
 * timeouts, the guest-file read loop, the procfs readers, and base64. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/macro.h"
#include "qmp/base64.h"
#include "qmp/qga-commands.h"
#include "qmp/qmp-sync.h"
#include "tests/lib/fake-qmp-peer.h"
#include "tests/lib/check-run.h"

#define SHORT_TIMEOUT (50 * USEC_PER_MSEC)

static sd_event *e;
static QgaClient *c;
static FakePeer *p;

static int n_ready, n_disconnect, disconnect_error;
static bool free_in_callback;

typedef struct Result {
        bool done;
        int n_calls;
        int error;
        char desc[256];
        char *data;
        size_t size;
} Result;

static void result_clear(Result *r) {
        free(r->data);
        *r = (Result) {};
}

static void on_ready(QgaClient *client, void *userdata) {
        n_ready++;
}

static void on_disconnect(QgaClient *client, int error, const char *reason, void *userdata) {
        n_disconnect++;
        disconnect_error = error;
}

static void on_reply(QgaClient *client, const QmpReply *reply, void *userdata) {
        Result *r = userdata;

        r->done = true;
        r->n_calls++;
        r->error = reply->error;
        snprintf(r->desc, sizeof(r->desc), "%s", reply->error_desc ? reply->error_desc : "");
        if (reply->result) {
                free(r->data);
                r->data = strdup(json_object_to_json_string_ext(reply->result, JSON_C_TO_STRING_PLAIN));
        }
        if (free_in_callback)
                c = qga_client_free(c);
}

static void on_file(QgaClient *client, const QmpReply *reply, const char *data, size_t size, void *userdata) {
        Result *r = userdata;

        r->done = true;
        r->n_calls++;
        r->error = reply->error;
        snprintf(r->desc, sizeof(r->desc), "%s", reply->error_desc ? reply->error_desc : "");
        if (data) {
                ck_assert_int_eq(data[size], '\0');
                r->data = malloc(size + 1);
                memcpy(r->data, data, size + 1);
                r->size = size;
        }
}

static void setup(void) {
        static const QgaClientCallbacks callbacks = {
                .ready = on_ready,
                .disconnect = on_disconnect,
        };
        int fds[2];

        n_ready = n_disconnect = disconnect_error = 0;
        free_in_callback = false;
        ck_assert_int_ge(sd_event_new(&e), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        ck_assert_int_ge(qga_client_new(&c, e), 0);
        qga_client_set_callbacks(c, &callbacks, NULL);
        ck_assert_int_ge(fake_peer_new(&p, e, fds[1]), 0);
        fake_peer_set_qga(p, true);
        ck_assert_int_ge(qga_client_connect_fd(c, fds[0]), 0);
}

static void teardown(void) {
        c = qga_client_free(c);
        p = fake_peer_free(p);
        e = sd_event_unref(e);
}

static void sync_ok(void) {
        fake_peer_expect(p, "guest-sync-delimited", NULL);
        fake_peer_send(p, "\xff{\"return\": %SYNC%}\n");
}

static void run_script(void) {
        ck_assert_msg(test_run_until_done(e, p), "script: %s", fake_peer_failure(p) ?: "hang");
}

static bool client_ready(void *userdata) {
        return qga_client_is_ready(userdata);
}

static bool client_closed(void *userdata) {
        return qga_client_is_closed(userdata);
}

static bool dropped_one(void *userdata) {
        return qga_client_get_n_dropped(userdata) >= 1;
}

static char *b64(const char *text) {
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        size_t n = strlen(text), k = 0;
        char *out = malloc(n / 3 * 4 + 8);

        for (size_t i = 0; i < n; i += 3) {
                unsigned v = (unsigned char) text[i] << 16;
                if (i + 1 < n)
                        v |= (unsigned char) text[i + 1] << 8;
                if (i + 2 < n)
                        v |= (unsigned char) text[i + 2];
                out[k++] = alphabet[v >> 18 & 63];
                out[k++] = alphabet[v >> 12 & 63];
                out[k++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
                out[k++] = i + 2 < n ? alphabet[v & 63] : '=';
        }
        out[k] = '\0';
        return out;
}

/* Scripts the agent side of one guest-file-open/read.../close for content split in pieces. */
static void script_file(const char *path, const char *const pieces[], size_t n_pieces) {
        char args[256];

        snprintf(args, sizeof(args), "{\"path\": \"%s\", \"mode\": \"r\"}", path);
        fake_peer_expect(p, "guest-file-open", args);
        fake_peer_reply(p, "1000");
        for (size_t i = 0; i <= n_pieces; i++) {
                const char *piece = i < n_pieces ? pieces[i] : "";
                char *enc = b64(piece);

                fake_peer_expect(p, "guest-file-read", "{\"handle\": 1000, \"count\": 65536}");
                _cleanup_free_ char *reply = NULL;

                ck_assert_int_ge(asprintf(&reply, "{\"return\": {\"count\": %zu, \"buf-b64\": \"%s\", \"eof\": %s}}\n",
                                          strlen(piece), enc, i == n_pieces ? "true" : "false"),
                                 0);
                fake_peer_send(p, reply);
                free(enc);
        }
        fake_peer_expect(p, "guest-file-close", "{\"handle\": 1000}");
        fake_peer_send(p, "{\"return\": {}}\n");
}

/* ---- synchronisation ---- */

START_TEST(test_sync_on_connect_with_garbage) {
        fake_peer_expect(p, "guest-sync-delimited", NULL);
        /* leftovers of an earlier session, then the delimiter and the real reply */
        fake_peer_send(p, "{\"return\": 1}\n}}]] garbage \x01\x02{\"ret");
        fake_peer_send(p, "\xff{\"return\": %SYNC%}\n");
        run_script();
        ck_assert(test_run_until(e, client_ready, c));
        ck_assert_int_eq(n_ready, 1);
        ck_assert_uint_eq(qga_client_get_n_syncs(c), 1);
        /* the 0xFF flush byte went out before the sync command */
        ck_assert_uint_eq(fake_peer_n_sync_bytes(p), 1);
        ck_assert_int_eq(n_disconnect, 0);
}
END_TEST

START_TEST(test_sync_ignores_stale_sync_reply) {
        Result r = {};

        fake_peer_expect(p, "guest-sync-delimited", NULL);
        /* a delimited reply to some older sync, split byte by byte, then ours */
        fake_peer_set_chunk_size(p, 1);
        fake_peer_send(p, "\xff{\"return\": 4242}\n");
        fake_peer_send(p, "\xff{\"return\": %SYNC%}\n");
        fake_peer_set_chunk_size(p, 0);
        fake_peer_expect(p, "guest-ping", NULL);
        fake_peer_send(p, "{\"return\": {}}\n");
        ck_assert_int_ge(qga_client_execute(c, "guest-ping", NULL, 0, on_reply, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, 0);
        ck_assert_uint_eq(qga_client_get_n_dropped(c), 1);
        ck_assert_int_eq(n_ready, 1);
        result_clear(&r);
}
END_TEST

START_TEST(test_sync_retried_when_agent_silent) {
        qga_client_set_sync_timeout(c, SHORT_TIMEOUT);
        /* The agent is not up yet: the first sync gets no answer. */
        fake_peer_expect(p, "guest-sync-delimited", NULL);
        fake_peer_expect(p, "guest-sync-delimited", NULL);
        fake_peer_send(p, "\xff{\"return\": %SYNC%}\n");
        run_script();
        ck_assert(test_run_until(e, client_ready, c));
        ck_assert_uint_eq(fake_peer_n_sync_bytes(p), 2);
        ck_assert_int_eq(n_ready, 1);
}
END_TEST

START_TEST(test_one_command_in_flight) {
        Result a = {}, b = {}, x = {};

        sync_ok();
        fake_peer_expect(p, "cmd-a", "{\"n\": 1}");
        /* while "a" is unanswered, nothing else may arrive */
        fake_peer_delay(p, 30 * USEC_PER_MSEC);
        fake_peer_send(p, "{\"return\": \"a\"}\n");
        fake_peer_expect(p, "cmd-b", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"b failed\"}}\n");
        fake_peer_expect(p, "cmd-x", NULL);
        fake_peer_send(p, "{\"return\": \"x\"}\n");
        ck_assert_int_ge(qga_client_execute(c, "cmd-a", json_tokener_parse("{\"n\": 1}"), 0, on_reply, &a), 0);
        ck_assert_int_ge(qga_client_execute(c, "cmd-b", NULL, 0, on_reply, &b), 0);
        ck_assert_int_ge(qga_client_execute(c, "cmd-x", NULL, 0, on_reply, &x), 0);
        ck_assert_uint_eq(qga_client_get_n_pending(c), 3);
        ck_assert(test_run_until_flag(e, &a.done));
        ck_assert_uint_eq(fake_peer_n_unexpected(p), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &x.done));
        ck_assert_str_eq(a.data, "\"a\"");
        ck_assert_int_eq(b.error, -EIO);
        ck_assert_str_eq(b.desc, "b failed");
        ck_assert_str_eq(x.data, "\"x\"");
        ck_assert_msg(fake_peer_failure(p) == NULL, "%s", fake_peer_failure(p));
        result_clear(&a);
        result_clear(&b);
        result_clear(&x);
}
END_TEST

START_TEST(test_timeout_resyncs_and_drops_late_reply) {
        Result slow = {}, next = {};

        sync_ok();
        fake_peer_expect(p, "slow", NULL);
        /* the client times out and resynchronises before sending "next" */
        fake_peer_expect(p, "guest-sync-delimited", NULL);
        fake_peer_send(p, "{\"return\": \"late answer to slow\"}\n\xff{\"return\": %SYNC%}\n");
        fake_peer_expect(p, "next", NULL);
        fake_peer_send(p, "{\"return\": \"answer to next\"}\n");
        ck_assert_int_ge(qga_client_execute(c, "slow", NULL, SHORT_TIMEOUT, on_reply, &slow), 0);
        ck_assert_int_ge(qga_client_execute(c, "next", NULL, 0, on_reply, &next), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &next.done));
        ck_assert_int_eq(slow.error, -ETIMEDOUT);
        ck_assert_int_eq(slow.n_calls, 1);
        ck_assert_int_eq(next.error, 0);
        ck_assert_str_eq(next.data, "\"answer to next\"");
        ck_assert_uint_eq(qga_client_get_n_syncs(c), 2);
        ck_assert_uint_eq(fake_peer_n_sync_bytes(p), 2);
        ck_assert_int_eq(n_ready, 1);
        result_clear(&slow);
        result_clear(&next);
}
END_TEST

START_TEST(test_reply_with_nothing_in_flight_dropped) {
        sync_ok();
        fake_peer_send(p, "{\"return\": \"unsolicited\"}\n");
        run_script();
        ck_assert(test_run_until(e, client_ready, c));
        /* The unsolicited reply may come in a read after the sync's: waited for, then a short
         * spell for a second drop that must not come. */
        ck_assert(test_run_until(e, dropped_one, c));
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_uint_eq(qga_client_get_n_dropped(c), 1);
        ck_assert(qga_client_is_ready(c));
}
END_TEST

static bool dropped_many(void *userdata) {
        return qga_client_get_n_dropped(userdata) >= QGA_UNSOLICITED_MAX;
}

/* `n` replies nobody asked for, in one write: one read, one moment for the allowance. */
static void send_unsolicited(unsigned n) {
        _cleanup_free_ char *text = malloc(n * 32 + 1);
        size_t len = 0;

        for (unsigned i = 0; i < n; i++)
                len += (size_t) sprintf(text + len, "{\"return\": \"unsolicited\"}\n");
        fake_peer_send(p, text);
}

START_TEST(test_unsolicited_within_allowance) {
        sync_ok();
        send_unsolicited(QGA_UNSOLICITED_MAX);
        run_script();
        ck_assert(test_run_until(e, dropped_many, c));
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_uint_eq(qga_client_get_n_dropped(c), QGA_UNSOLICITED_MAX);
        ck_assert(qga_client_is_ready(c));
        ck_assert_int_eq(n_disconnect, 0);
}
END_TEST

START_TEST(test_unsolicited_flood_closes) {
        sync_ok();
        send_unsolicited(QGA_UNSOLICITED_MAX + 1);
        ck_assert(test_run_until(e, client_closed, c));
        ck_assert_uint_eq(qga_client_get_n_dropped(c), QGA_UNSOLICITED_MAX + 1);
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, -EPROTO);
        ck_assert_msg(strstr(qga_client_get_last_error(c), "messages nobody asked for"), "last error: %s",
                      qga_client_get_last_error(c));
}
END_TEST

/* A reply of the agent that breaks one of its limits ends the connection, the command with it. */
static void assert_reply_closes(const char *reply, int want_error, const char *want_reason) {
        Result r = {};

        sync_ok();
        fake_peer_expect(p, "guest-info", NULL);
        fake_peer_send(p, reply);
        ck_assert_int_ge(qga_client_execute(c, "guest-info", NULL, 0, on_reply, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, -ECONNRESET);
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, want_error);
        ck_assert_msg(strstr(qga_client_get_last_error(c), want_reason), "last error: %s", qga_client_get_last_error(c));
        result_clear(&r);
}

START_TEST(test_reply_past_agent_byte_cap) {
        /* well-formed, within QMP's 1 MiB, past the agent's 128 KiB */
        size_t size = QGA_MAX_MESSAGE + 1024;
        _cleanup_free_ char *reply = malloc(size + 64);
        size_t n = (size_t) sprintf(reply, "{\"return\": \"");

        memset(reply + n, 'x', size);
        n += size;
        strcpy(reply + n, "\"}\n");
        assert_reply_closes(reply, -EMSGSIZE, "exceeds the limit of 131072 bytes");
}
END_TEST

START_TEST(test_reply_past_agent_container_cap) {
        char reply[256];
        size_t n = (size_t) sprintf(reply, "{\"return\": [");

        /* the reply object, its array and 15 more: 17 */
        for (unsigned i = 0; i < QGA_MAX_CONTAINERS - 1; i++)
                n += (size_t) sprintf(reply + n, i > 0 ? ",{}" : "{}");
        strcpy(reply + n, "]}\n");
        assert_reply_closes(reply, -EMSGSIZE, "more than 16 objects and arrays");
}
END_TEST

START_TEST(test_disconnect_mid_command) {
        Result a = {}, b = {};

        sync_ok();
        fake_peer_expect(p, "a", NULL);
        fake_peer_send(p, "{\"return\": {\"half");
        fake_peer_close(p);
        ck_assert_int_ge(qga_client_execute(c, "a", NULL, 0, on_reply, &a), 0);
        ck_assert_int_ge(qga_client_execute(c, "b", NULL, 0, on_reply, &b), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &b.done));
        ck_assert_int_eq(a.error, -ECONNRESET);
        ck_assert_int_eq(b.error, -ECONNRESET);
        ck_assert_int_eq(n_disconnect, 1);
        ck_assert_int_eq(disconnect_error, -ECONNRESET);
        ck_assert_ptr_nonnull(strstr(qga_client_get_last_error(c), "middle of a message"));
        ck_assert_int_eq(qga_client_execute(c, "c", NULL, 0, on_reply, &a), -ENOTCONN);
        result_clear(&a);
        result_clear(&b);
}
END_TEST

START_TEST(test_garbage_after_sync_closes) {
        Result a = {};

        sync_ok();
        fake_peer_expect(p, "a", NULL);
        fake_peer_send(p, "not json at all\n");
        ck_assert_int_ge(qga_client_execute(c, "a", NULL, 0, on_reply, &a), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &a.done));
        ck_assert_int_eq(a.error, -ECONNRESET);
        ck_assert_int_eq(disconnect_error, -EBADMSG);
        result_clear(&a);
}
END_TEST

START_TEST(test_free_in_callback) {
        Result a = {}, b = {};

        sync_ok();
        fake_peer_expect(p, "a", NULL);
        fake_peer_send(p, "{\"return\": 1}\n");
        ck_assert_int_ge(qga_client_execute(c, "a", NULL, 0, on_reply, &a), 0);
        ck_assert_int_ge(qga_client_execute(c, "b", NULL, 0, on_reply, &b), 0);
        free_in_callback = true;
        run_script();
        ck_assert(test_run_until_flag(e, &a.done));
        ck_assert_ptr_null(c);
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_int_eq(b.n_calls, 0);
        ck_assert_int_eq(n_disconnect, 0);
        result_clear(&a);
        result_clear(&b);
}
END_TEST

START_TEST(test_free_in_timeout_callback) {
        Result a = {}, b = {};

        sync_ok();
        run_script();
        ck_assert_int_ge(qga_client_execute(c, "a", NULL, SHORT_TIMEOUT, on_reply, &a), 0);
        ck_assert_int_ge(qga_client_execute(c, "b", NULL, 0, on_reply, &b), 0);
        free_in_callback = true;
        ck_assert(test_run_until_flag(e, &a.done));
        ck_assert_int_eq(a.error, -ETIMEDOUT);
        ck_assert_ptr_null(c);
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_int_eq(b.n_calls, 0);
        result_clear(&a);
        result_clear(&b);
}
END_TEST

/* ---- file reads ---- */

START_TEST(test_read_file_in_chunks) {
        static const char *const pieces[] = { "hello", " wor", "ld\n" };
        Result r = {};

        sync_ok();
        script_file("/proc/version", pieces, ARRAY_SIZE(pieces));
        ck_assert_int_ge(qga_read_file(c, "/proc/version", 0, 0, on_file, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, 0);
        ck_assert_uint_eq(r.size, 12);
        ck_assert_str_eq(r.data, "hello world\n");
        ck_assert_int_eq(r.n_calls, 1);
        result_clear(&r);
}
END_TEST

START_TEST(test_read_file_full_chunk_fits_agent_cap) {
        /* The largest reply rightsize asks the agent for: a whole QGA_FILE_READ_CHUNK. */
        _cleanup_free_ char *piece = malloc(QGA_FILE_READ_CHUNK + 1);
        const char *pieces[1] = { piece };
        Result r = {};

        memset(piece, 'v', QGA_FILE_READ_CHUNK);
        piece[QGA_FILE_READ_CHUNK] = '\0';
        sync_ok();
        script_file("/proc/vmstat", pieces, 1);
        ck_assert_int_ge(qga_read_file(c, "/proc/vmstat", 0, 0, on_file, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, 0);
        ck_assert_uint_eq(r.size, QGA_FILE_READ_CHUNK);
        ck_assert_int_eq(n_disconnect, 0);
        result_clear(&r);
}
END_TEST

START_TEST(test_read_file_open_fails) {
        Result r = {};

        sync_ok();
        fake_peer_expect(p, "guest-file-open", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"failed to open file '/nope' (mode: 'r'): No such file or directory\"}}\n");
        ck_assert_int_ge(qga_read_file(c, "/nope", 0, 0, on_file, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, -EIO);
        ck_assert_ptr_nonnull(strstr(r.desc, "No such file"));
        ck_assert_ptr_null(r.data);
        /* nothing to close */
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_uint_eq(fake_peer_n_unexpected(p), 0);
        result_clear(&r);
}
END_TEST

static void assert_read_fails_then_closes(const char *bad_read_reply, int want_error, size_t max_size) {
        Result r = {};

        sync_ok();
        fake_peer_expect(p, "guest-file-open", NULL);
        fake_peer_send(p, "{\"return\": 7}\n");
        fake_peer_expect(p, "guest-file-read", NULL);
        fake_peer_send(p, bad_read_reply);
        /* closed even though the read failed */
        fake_peer_expect(p, "guest-file-close", "{\"handle\": 7}");
        fake_peer_send(p, "{\"return\": {}}\n");
        ck_assert_int_ge(qga_read_file(c, "/proc/vmstat", max_size, 0, on_file, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, want_error);
        ck_assert_ptr_null(r.data);
        ck_assert_int_eq(r.n_calls, 1);
        ck_assert(qga_client_is_ready(c));
        result_clear(&r);
}

/* Bad guest-file-read answers: each row is one loop-test iteration. */
static const struct {
        const char *read_reply;
        int error;
        size_t max_size;
} bad_read_cases[] = {
        /* bad base64 */
        { "{\"return\": {\"count\": 3, \"buf-b64\": \"!!!!\", \"eof\": true}}\n", -EBADMSG, 0 },
        /* count mismatch */
        { "{\"return\": {\"count\": 4, \"buf-b64\": \"aGk=\", \"eof\": true}}\n", -EBADMSG, 0 },
        /* wrong types */
        { "{\"return\": {\"count\": \"2\", \"buf-b64\": \"aGk=\", \"eof\": true}}\n", -EBADMSG, 0 },
        /* missing eof */
        { "{\"return\": {\"count\": 2, \"buf-b64\": \"aGk=\"}}\n", -EBADMSG, 0 },
        /* too big: 11 bytes against a cap of 8 */
        { "{\"return\": {\"count\": 11, \"buf-b64\": \"aGVsbG8gd29ybGQ=\", \"eof\": false}}\n", -EFBIG, 8 },
        /* the read itself fails */
        { "{\"error\": {\"class\": \"GenericError\", \"desc\": \"read failed\"}}\n", -EIO, 0 },
};

START_TEST(test_read_file_bad_reply) {
        assert_read_fails_then_closes(bad_read_cases[_i].read_reply, bad_read_cases[_i].error, bad_read_cases[_i].max_size);
}
END_TEST

START_TEST(test_read_file_read_timeout) {
        Result r = {};

        sync_ok();
        fake_peer_expect(p, "guest-file-open", NULL);
        fake_peer_send(p, "{\"return\": 7}\n");
        fake_peer_expect(p, "guest-file-read", NULL);
        /* no answer: the client times out, resyncs, and still closes the handle */
        fake_peer_expect(p, "guest-sync-delimited", NULL);
        fake_peer_send(p, "\xff{\"return\": %SYNC%}\n");
        fake_peer_expect(p, "guest-file-close", "{\"handle\": 7}");
        fake_peer_send(p, "{\"return\": {}}\n");
        ck_assert_int_ge(qga_read_file(c, "/proc/vmstat", 0, SHORT_TIMEOUT, on_file, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, -ETIMEDOUT);
        result_clear(&r);
}
END_TEST

START_TEST(test_read_file_disconnect) {
        Result r = {};

        sync_ok();
        fake_peer_expect(p, "guest-file-open", NULL);
        fake_peer_send(p, "{\"return\": 7}\n");
        fake_peer_expect(p, "guest-file-read", NULL);
        fake_peer_close(p);
        ck_assert_int_ge(qga_read_file(c, "/proc/vmstat", 0, 0, on_file, &r), 0);
        run_script();
        ck_assert(test_run_until_flag(e, &r.done));
        ck_assert_int_eq(r.error, -ECONNRESET);
        ck_assert_int_eq(r.n_calls, 1);
        result_clear(&r);
}
END_TEST

START_TEST(test_free_during_file_read) {
        Result r = {};

        sync_ok();
        fake_peer_expect(p, "guest-file-open", NULL);
        ck_assert_int_ge(qga_read_file(c, "/proc/vmstat", 0, 0, on_file, &r), 0);
        /* the open is in flight and unanswered when the client goes away */
        run_script();
        c = qga_client_free(c);
        test_run_for(e, 10 * USEC_PER_MSEC);
        ck_assert(!r.done);
}
END_TEST

/* ---- procfs through the agent ---- */

static const char vmstat_text[] =
        "nr_free_pages 198765\n"
        "workingset_refault_anon 11\n"
        "workingset_refault_file 75000\n"
        "workingset_activate_anon 3\n"
        "workingset_activate_file 2000\n"
        "workingset_restore_anon 1\n"
        "workingset_restore_file 900\n"
        "pswpin 40\n"
        "pswpout 80\n"
        "pgmajfault 1234\n"
        "pgsteal_kswapd 5000\n"
        "pgsteal_direct 100\n"
        "pgscan_kswapd 6000\n"
        "pgscan_direct 150\n"
        "allocstall_dma 0\n"
        "allocstall_dma32 2\n"
        "allocstall_normal 5\n"
        "allocstall_movable 1\n"
        "oom_kill 0\n";

START_TEST(test_read_vmstat_via_agent) {
        const char *pieces[] = { vmstat_text };
        GuestVmstat vm;
        char *error = NULL;

        sync_ok();
        script_file("/proc/vmstat", pieces, 1);
        ck_assert_int_eq(qga_sync_read_vmstat(c, 0, &vm, &error), 0);
        ck_assert_ptr_null(error);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_WORKINGSET_REFAULT_FILE], 75000);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_PGMAJFAULT], 1234);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_ALLOCSTALL], 8);
        ck_assert_uint_eq(vm.value[GUEST_VMSTAT_OOM_KILL], 0);
        ck_assert(!guest_value_is_known(vm.value[GUEST_VMSTAT_BALLOON_INFLATE]));
}
END_TEST

START_TEST(test_read_psi_and_meminfo_via_agent) {
        const char *psi_pieces[] = { "some avg10=12.50 avg60=3.25 avg300=0.75 total=123456789\n",
                                     "full avg10=1.00 avg60=0.50 avg300=0.10 total=2345678\n" };
        const char *meminfo_pieces[] = { "MemTotal:        1012936 kB\nMemFree:          794300 kB\nMemAvailable:     829332 kB\n" };
        GuestPsi psi;
        GuestMeminfo mi;

        sync_ok();
        script_file("/proc/pressure/memory", psi_pieces, 2);
        script_file("/proc/meminfo", meminfo_pieces, 1);
        ck_assert_int_eq(qga_sync_wait_ready(c, 5 * USEC_PER_SEC), 0);
        ck_assert_int_eq(qga_sync_read_psi_memory(c, 0, &psi, NULL), 0);
        ck_assert(psi.some.known);
        ck_assert(psi.full.known);
        ck_assert_double_eq_tol(psi.some.avg10, 12.5, 1e-9);
        ck_assert_uint_eq(psi.full.total_usec, 2345678);
        ck_assert_int_eq(qga_sync_read_meminfo(c, 0, &mi, NULL), 0);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_MEM_TOTAL], 1012936 * KIB);
        ck_assert_uint_eq(mi.value[GUEST_MEMINFO_MEM_AVAILABLE], 829332 * KIB);
        ck_assert(!guest_value_is_known(mi.value[GUEST_MEMINFO_SWAP_TOTAL]));
}
END_TEST

START_TEST(test_read_vmstat_garbage_via_agent) {
        const char *pieces[] = { "this is not\na vmstat file\n" };
        GuestVmstat vm;
        char *error = NULL;

        sync_ok();
        script_file("/proc/vmstat", pieces, 1);
        ck_assert_int_eq(qga_sync_read_vmstat(c, 0, &vm, &error), -EBADMSG);
        ck_assert_str_eq(error, "no known counter in /proc/vmstat");
        free(error);
}
END_TEST

/* /proc/zoneinfo in two pieces, summed; one that is not a kernel's refused whole. */
START_TEST(test_read_zoneinfo_via_agent) {
        const char *pieces[] = { "Node 0, zone      DMA\n  pages free     3811\n        min      188\n        low      235\n",
                                 "        high     282\n        managed  3976\n        protection: (0, 881, 881)\n"
                                 "Node 0, zone    DMA32\n        min      11075\n        low      13843\n"
                                 "        high     16611\n        managed  225536\n        protection: (0, 0, 0)\n" };
        const char *bad[] = { "Node 0, zone DMA\n min 5\n low 2\n high 3\n" };
        GuestZoneinfo z;
        char *error = NULL;

        sync_ok();
        script_file("/proc/zoneinfo", pieces, 2);
        ck_assert_int_eq(qga_sync_wait_ready(c, 5 * USEC_PER_SEC), 0);
        ck_assert_int_eq(qga_sync_read_zoneinfo(c, 0, &z, &error), 0);
        ck_assert_ptr_null(error);
        ck_assert_uint_eq(z.zones, 2);
        ck_assert_uint_eq(z.high, (282 + 881 + 16611) * UINT64_C(4096));
        script_file("/proc/zoneinfo", bad, 1);
        ck_assert_int_eq(qga_sync_read_zoneinfo(c, 0, &z, &error), -EBADMSG);
        ck_assert_str_eq(error, "/proc/zoneinfo is not a kernel's");
        free(error);
}
END_TEST

/* ---- base64 ---- */

START_TEST(test_base64_vectors) {
        static const struct {
                const char *in, *out;
        } vectors[] = {
                { "", "" },
                { "Zg==", "f" },
                { "Zm8=", "fo" },
                { "Zm9v", "foo" },
                { "Zm9vYg==", "foob" },
                { "Zm9vYmE=", "fooba" },
                { "Zm9vYmFy", "foobar" },
                { "+/+/", "\xfb\xff\xbf" },
        };
        uint8_t buf[16];
        size_t n;

        for (size_t i = 0; i < ARRAY_SIZE(vectors); i++) {
                ck_assert_int_eq(base64_decode(vectors[i].in, strlen(vectors[i].in), buf, sizeof(buf), &n), 0);
                ck_assert_uint_eq(n, strlen(vectors[i].out));
                ck_assert_int_eq(memcmp(buf, vectors[i].out, n), 0);
        }
}
END_TEST

START_TEST(test_base64_rejects) {
        static const char *const bad[] = {
                "Zg=", "Zg", "Z", "Zm9vY", "Zg=a", "Z===", "====", "Zm9v=", "Zg==Zg==", "Zm9\n", "Zm 9", "Zm9-", "Zm9_",
        };
        uint8_t buf[16];
        size_t n;

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                ck_assert_msg(base64_decode(bad[i], strlen(bad[i]), buf, sizeof(buf), &n) == -EBADMSG, "accepted %s", bad[i]);
        ck_assert_int_eq(base64_decode("Zm9vYmFy", 8, buf, 5, &n), -ENOBUFS);
        ck_assert_int_eq(base64_decode("Zm9vYmFy", 8, buf, 6, &n), 0);
}
END_TEST

static Suite *qga_suite(void) {
        Suite *s = suite_create("qga");

        TCase *tc = check_add_case(s, "agent", setup, teardown, 30,
                                   CHECK_TESTS(test_sync_on_connect_with_garbage, test_sync_ignores_stale_sync_reply,
                                               test_sync_retried_when_agent_silent, test_one_command_in_flight,
                                               test_timeout_resyncs_and_drops_late_reply,
                                               test_reply_with_nothing_in_flight_dropped, test_disconnect_mid_command,
                                               test_garbage_after_sync_closes, test_free_in_callback,
                                               test_free_in_timeout_callback, test_read_file_in_chunks,
                                               test_read_file_open_fails, test_read_file_read_timeout,
                                               test_read_file_disconnect, test_free_during_file_read,
                                               test_read_vmstat_via_agent, test_read_psi_and_meminfo_via_agent,
                                               test_read_vmstat_garbage_via_agent, test_read_zoneinfo_via_agent, test_unsolicited_within_allowance,
                                               test_unsolicited_flood_closes, test_reply_past_agent_byte_cap,
                                               test_reply_past_agent_container_cap,
                                               test_read_file_full_chunk_fits_agent_cap));
        tcase_add_loop_test(tc, test_read_file_bad_reply, 0, ARRAY_SIZE(bad_read_cases));
        check_add_case(s, "base64", NULL, NULL, 0, CHECK_TESTS(test_base64_vectors, test_base64_rejects));
        return s;
}

int main(void) {
        return check_run_suite(qga_suite());
}
