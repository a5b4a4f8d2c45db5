/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/log.h"
#include "daemon/log-ratelimit.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

static void setup(void) {
        log_ratelimit_configure(LOG_RATELIMIT_INTERVAL_USEC, LOG_RATELIMIT_BURST, LOG_RATELIMIT_GUEST_BURST);
        log_ratelimit_set_clock(NULL);
        log_ratelimit_reset();
        unsetenv("JOURNAL_STREAM");
        log_set_target(LOG_TARGET_STDERR);
        log_set_max_level(LOG_INFO);
}

START_TEST(test_stderr_format) {
        _cleanup_(freep) char *out = NULL;

        test_stderr_begin();
        log_info("hello %d", 5);
        log_named_guest_warning("web1", "probing", "balloon stalled at %s", "700M");
        log_named_guest_full(LOG_NOTICE, "db", NULL, "no state");
        log_error("plain error");
        out = test_stderr_end();

        ck_assert_str_eq(out, "info: hello 5\n"
                              "warning: web1 [probing]: balloon stalled at 700M\n"
                              "notice: db: no state\n"
                              "err: plain error\n");
}
END_TEST

START_TEST(test_level_filter) {
        _cleanup_(freep) char *out = NULL;

        log_set_max_level(LOG_WARNING);
        ck_assert_int_eq(log_get_max_level(), LOG_WARNING);
        test_stderr_begin();
        log_debug("debug");
        log_info("info");
        log_notice("notice");
        log_warning("warning");
        log_error("error");
        out = test_stderr_end();
        ck_assert_str_eq(out, "warning: warning\nerr: error\n");

        log_set_max_level(LOG_DEBUG);
        test_stderr_begin();
        log_debug("now %s", "visible");
        free(out);
        out = test_stderr_end();
        ck_assert_str_eq(out, "debug: now visible\n");

        /* Out-of-range levels are clamped rather than disabling everything. */
        log_set_max_level(42);
        ck_assert_int_eq(log_get_max_level(), LOG_DEBUG);
        log_set_max_level(-3);
        ck_assert_int_eq(log_get_max_level(), LOG_EMERG);
}
END_TEST

START_TEST(test_errno_return) {
        _cleanup_(freep) char *out = NULL;
        int r;

        test_stderr_begin();
        errno = EAGAIN;
        r = log_error_errno(EIO, "reading stats: %m");
        ck_assert_int_eq(r, -EIO);
        ck_assert_int_eq(errno, EAGAIN); /* logging leaves errno alone */
        r = log_warning_errno(-ENOENT, "socket gone: %m");
        ck_assert_int_eq(r, -ENOENT);
        r = log_named_guest_error_errno("web1", "holding", ECONNRESET, "QMP: %m");
        ck_assert_int_eq(r, -ECONNRESET);
        /* Filtered out, still the error. */
        r = log_debug_errno(EPERM, "hidden");
        ck_assert_int_eq(r, -EPERM);
        r = log_info_errno(0, "no error");
        ck_assert_int_eq(r, 0);
        ck_assert_int_eq(log_oom(), -ENOMEM);
        out = test_stderr_end();

        ck_assert_str_eq(out, "err: reading stats: Input/output error\n"
                              "warning: socket gone: No such file or directory\n"
                              "err: web1 [holding]: QMP: Connection reset by peer\n"
                              "info: no error\n"
                              "err: Out of memory.\n");
}
END_TEST

START_TEST(test_untrusted_names_escaped) {
        _cleanup_(freep) char *out = NULL;

        test_stderr_begin();
        log_named_guest_warning("evil\nerr: forged", "st\033[31m", "msg\rx");
        out = test_stderr_end();
        ck_assert_str_eq(out, "warning: evil\\x0aerr: forged [st\\x1b[31m]: msg\\x0dx\n");
}
END_TEST

START_TEST(test_level_names) {
        ck_assert_int_eq(log_level_from_string("debug"), LOG_DEBUG);
        ck_assert_int_eq(log_level_from_string("INFO"), LOG_INFO);
        ck_assert_int_eq(log_level_from_string("warn"), LOG_WARNING);
        ck_assert_int_eq(log_level_from_string("warning"), LOG_WARNING);
        ck_assert_int_eq(log_level_from_string("error"), LOG_ERR);
        ck_assert_int_eq(log_level_from_string("err"), LOG_ERR);
        ck_assert_int_eq(log_level_from_string("7"), LOG_DEBUG);
        ck_assert_int_eq(log_level_from_string("8"), -EINVAL);
        ck_assert_int_eq(log_level_from_string("loud"), -EINVAL);
        ck_assert_int_eq(log_level_from_string(""), -EINVAL);
        ck_assert_int_eq(log_level_from_string(NULL), -EINVAL);
        for (int l = LOG_EMERG; l <= LOG_DEBUG; l++)
                ck_assert_int_eq(log_level_from_string(log_level_to_string(l)), l);
        ck_assert_ptr_null(log_level_to_string(8));
        ck_assert_ptr_null(log_level_to_string(-1));
}
END_TEST

START_TEST(test_journal_stream_detection) {
        _cleanup_(freep) char *out = NULL;
        struct stat st;
        char value[64];

        test_stderr_begin();
        ck_assert_int_eq(fstat(STDERR_FILENO, &st), 0);

        ck_assert(!log_stderr_is_journal());
        snprintf(value, sizeof(value), "%llu:%llu", (unsigned long long) st.st_dev,
                 (unsigned long long) st.st_ino);
        setenv("JOURNAL_STREAM", value, 1);
        ck_assert(log_stderr_is_journal());
        log_open();
        ck_assert_int_eq(log_get_target(), LOG_TARGET_JOURNAL);

        snprintf(value, sizeof(value), "%llu:%llu", (unsigned long long) st.st_dev,
                 (unsigned long long) st.st_ino + 1);
        setenv("JOURNAL_STREAM", value, 1);
        ck_assert(!log_stderr_is_journal());
        log_open();
        ck_assert_int_eq(log_get_target(), LOG_TARGET_STDERR);

        snprintf(value, sizeof(value), "%llu:%llux", (unsigned long long) st.st_dev,
                 (unsigned long long) st.st_ino);
        setenv("JOURNAL_STREAM", value, 1);
        ck_assert(!log_stderr_is_journal());
        setenv("JOURNAL_STREAM", "garbage", 1);
        ck_assert(!log_stderr_is_journal());
        unsetenv("JOURNAL_STREAM");
        out = test_stderr_end();
}
END_TEST

/* One field of a native journal protocol datagram. */
typedef struct Field {
        char key[64];
        char value[512];
} Field;

/* Decodes "KEY=value\n" and the binary-safe "KEY\n<le64 length><data>\n" forms. */
static size_t parse_datagram(const char *buf, size_t len, Field *fields, size_t max) {
        size_t n = 0, i = 0;

        while (i < len && n < max) {
                const char *nl = memchr(buf + i, '\n', len - i), *eq;
                ck_assert_ptr_nonnull(nl);
                eq = memchr(buf + i, '=', (size_t) (nl - (buf + i)));
                if (eq) {
                        ck_assert_int_lt(eq - (buf + i), sizeof(fields[n].key));
                        ck_assert_int_lt(nl - eq - 1, sizeof(fields[n].value));
                        memcpy(fields[n].key, buf + i, (size_t) (eq - (buf + i)));
                        fields[n].key[eq - (buf + i)] = '\0';
                        memcpy(fields[n].value, eq + 1, (size_t) (nl - eq - 1));
                        fields[n].value[nl - eq - 1] = '\0';
                        i = (size_t) (nl - buf) + 1;
                } else {
                        uint64_t size = 0;
                        size_t klen = (size_t) (nl - (buf + i));
                        ck_assert_int_lt(klen, sizeof(fields[n].key));
                        memcpy(fields[n].key, buf + i, klen);
                        fields[n].key[klen] = '\0';
                        i += klen + 1;
                        ck_assert_uint_le(i + 8, len);
                        for (int b = 7; b >= 0; b--)
                                size = (size << 8) | (unsigned char) buf[i + (size_t) b];
                        i += 8;
                        ck_assert_uint_lt(size, sizeof(fields[n].value));
                        ck_assert_uint_le(i + size + 1, len);
                        memcpy(fields[n].value, buf + i, size);
                        fields[n].value[size] = '\0';
                        i += size;
                        ck_assert_int_eq(buf[i], '\n');
                        i++;
                }
                n++;
        }
        return n;
}

static const char *field_get(const Field *fields, size_t n, const char *key) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(fields[i].key, key) == 0)
                        return fields[i].value;
        return NULL;
}

START_TEST(test_journal_fields) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "/run/systemd/journal/socket" };
        _cleanup_(freep) char *fallback = NULL, *none = NULL;
        _cleanup_(closep) int fd = -1;
        char buf[8192];
        Field fields[32];
        ssize_t len;
        size_t n;
        int r;

        /* A stand-in journald: our own datagram socket where libsystemd looks for the real one,
         * in a private mount namespace so the host's /run is untouched. */
        r = test_mount_private_tmpfs("/run", 1024 * 1024);
        if (r < 0) {
                check_cannot_set_up("test_journal_fields", "no private tmpfs on /run to fake journald in: %s", strerror(-r));
                return;
        }
        ck_assert_int_eq(mkdir("/run/systemd", 0755), 0);
        ck_assert_int_eq(mkdir("/run/systemd/journal", 0755), 0);

        log_set_target(LOG_TARGET_JOURNAL);

        /* No journal listening yet: the line must still reach stderr. */
        test_stderr_begin();
        log_named_guest_warning("web1", "probing", "journal is down");
        fallback = test_stderr_end();
        ck_assert_str_eq(fallback, "warning: web1 [probing]: journal is down\n");

        fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);

        test_stderr_begin();
        r = log_named_guest_error_errno("web1", "probing", EIO, "balloon stuck: %m");
        ck_assert_int_eq(r, -EIO);
        len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        ck_assert_int_gt(len, 0);
        n = parse_datagram(buf, (size_t) len, fields, ARRAY_SIZE(fields));

        ck_assert_str_eq(field_get(fields, n, "MESSAGE"), "balloon stuck: Input/output error");
        ck_assert_str_eq(field_get(fields, n, "PRIORITY"), "3");
        ck_assert_str_eq(field_get(fields, n, "GUEST"), "web1");
        ck_assert_str_eq(field_get(fields, n, "STATE"), "probing");
        ck_assert_str_eq(field_get(fields, n, "ERRNO"), "5");
        ck_assert_ptr_nonnull(strstr(field_get(fields, n, "CODE_FILE"), "test-daemon-log.c"));
        ck_assert_str_eq(field_get(fields, n, "CODE_FUNC"), __func__);
        ck_assert_int_gt(atoi(field_get(fields, n, "CODE_LINE")), 0);
        ck_assert_str_eq(field_get(fields, n, "SYSLOG_IDENTIFIER"), program_invocation_short_name);

        /* A plain message has no guest fields; a hostile guest name travels binary-safe. */
        log_info("started");
        len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        ck_assert_int_gt(len, 0);
        n = parse_datagram(buf, (size_t) len, fields, ARRAY_SIZE(fields));
        ck_assert_str_eq(field_get(fields, n, "MESSAGE"), "started");
        ck_assert_str_eq(field_get(fields, n, "PRIORITY"), "6");
        ck_assert_ptr_null(field_get(fields, n, "GUEST"));
        ck_assert_ptr_null(field_get(fields, n, "ERRNO"));

        log_named_guest_info("a\nMESSAGE=forged", "holding", "hello");
        len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        ck_assert_int_gt(len, 0);
        n = parse_datagram(buf, (size_t) len, fields, ARRAY_SIZE(fields));
        ck_assert_str_eq(field_get(fields, n, "GUEST"), "a\nMESSAGE=forged");
        ck_assert_str_eq(field_get(fields, n, "MESSAGE"), "hello");

        /* An event carries its kind and numeric fields; the UUID travels binary-safe. */
        LogEvent event = {
                .message_id = LOG_MESSAGE_RESIZE,
                .guest_uuid = "0f1e2d3c-0000-4000-8000-000000000001",
                .target_bytes = 536870912,
                .actual_bytes = 1073741824,
                .estimate_bytes = UINT64_MAX, /* unknown: not sent */
        };
        log_named_guest_event(LOG_INFO, "web1", "hold", &event, "target %s", "512 MiB");
        len = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        ck_assert_int_gt(len, 0);
        n = parse_datagram(buf, (size_t) len, fields, ARRAY_SIZE(fields));
        ck_assert_str_eq(field_get(fields, n, "MESSAGE"), "target 512 MiB");
        ck_assert_str_eq(field_get(fields, n, "MESSAGE_ID"), "d19a2540928d43e68da5bc3389b278c8");
        ck_assert_str_eq(field_get(fields, n, "GUEST_UUID"), "0f1e2d3c-0000-4000-8000-000000000001");
        ck_assert_str_eq(field_get(fields, n, "TARGET_BYTES"), "536870912");
        ck_assert_str_eq(field_get(fields, n, "ACTUAL_BYTES"), "1073741824");
        ck_assert_ptr_null(field_get(fields, n, "ESTIMATE_BYTES"));
        ck_assert_str_eq(field_get(fields, n, "GUEST"), "web1");

        /* The kinds have distinct IDs of 32 hex digits. */
        static const char *const ids[] = { LOG_MESSAGE_RESIZE, LOG_MESSAGE_EMERGENCY, LOG_MESSAGE_FAULT,
                                           LOG_MESSAGE_OUTSIDE };
        for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
                ck_assert_uint_eq(strspn(ids[i], "0123456789abcdef"), 32);
                ck_assert_uint_eq(strlen(ids[i]), 32);
                for (size_t j = 0; j < i; j++)
                        ck_assert_str_ne(ids[i], ids[j]);
        }

        /* Filtered messages send nothing. */
        log_debug("quiet");
        ck_assert_int_lt(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), 0);

        none = test_stderr_end();
        ck_assert_str_eq(none, ""); /* nothing fell back to stderr */
}
END_TEST

static unsigned count_lines(const char *out, const char *needle) {
        unsigned n = 0;

        for (const char *p = out; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

/* A guest that makes the daemon warn every time, with text of its choosing each time: at most
 * the burst of lines from that place, while another guest's line from the same place and an
 * event of the first guest still go out. */
START_TEST(test_guest_flood_limited) {
        _cleanup_(freep) char *out = NULL;

        test_stderr_begin();
        for (int i = 0; i < 1000; i++)
                log_named_guest_warning("noisy", NULL, "agent says: junk %d", i);
        log_named_guest_warning("quiet", NULL, "agent says: %s", "one line");
        log_named_guest_event(LOG_ERR, "noisy", "fault", &((LogEvent){ .message_id = LOG_MESSAGE_FAULT,
                                                                      .target_bytes = UINT64_MAX,
                                                                      .actual_bytes = UINT64_MAX,
                                                                      .estimate_bytes = UINT64_MAX }),
                              "Fault: %s", "stats lie");
        out = test_stderr_end();
        ck_assert_uint_eq(count_lines(out, "warning: noisy: agent says: junk"), 10);
        ck_assert_uint_eq(count_lines(out, "warning: quiet: agent says: one line\n"), 1);
        ck_assert_uint_eq(count_lines(out, "err: noisy [fault]: Fault: stats lie\n"), 1);
}
END_TEST

/* A guest's decision lines (info: one a poll interval, at the operator's pace) are its audit
 * trail: none is thinned, however many in a row. */
START_TEST(test_decisions_not_limited) {
        _cleanup_(freep) char *out = NULL;

        log_set_max_level(LOG_INFO);
        test_stderr_begin();
        for (int i = 0; i < 100; i++)
                log_named_guest_info("busy", "probe", "probing: clean at %d MiB", 600 - i);
        out = test_stderr_end();
        ck_assert_uint_eq(count_lines(out, "busy [probe]: probing: clean at"), 100);
        ck_assert_ptr_null(strstr(out, "Suppressed"));
}
END_TEST

static uint64_t fake_now;

static uint64_t fake_clock(void) {
        return fake_now;
}

static void log_from_site(const char *guest, int site) {
        switch (site) {
        case 0: log_named_guest_notice(guest, NULL, "site zero"); break;
        case 1: log_named_guest_notice(guest, NULL, "site one"); break;
        case 2: log_named_guest_notice(guest, NULL, "site two"); break;
        default: log_named_guest_notice(guest, NULL, "site other"); break;
        }
}

/* After the interval, the next line says how many were dropped before it, once. */
START_TEST(test_suppressed_count_said) {
        _cleanup_(freep) char *out = NULL;

        log_ratelimit_set_clock(fake_clock);
        log_ratelimit_configure(30 * USEC_PER_SEC, 3, 1000);
        fake_now = 1000 * USEC_PER_SEC;
        test_stderr_begin();
        for (int i = 0; i < 10; i++)
                log_from_site("web1", 0);
        fake_now += 29 * USEC_PER_SEC;
        log_from_site("web1", 0); /* still the same window: dropped */
        fake_now += 1 * USEC_PER_SEC;
        log_from_site("web1", 0);
        log_from_site("web1", 0);
        out = test_stderr_end();
        ck_assert_str_eq(out, "notice: web1: site zero\n"
                              "notice: web1: site zero\n"
                              "notice: web1: site zero\n"
                              "notice: web1: Suppressed 8 messages like the next one about this guest\n"
                              "notice: web1: site zero\n"
                              "notice: web1: site zero\n");
        /* Lines without a guest are the daemon's own: never limited. */
        test_stderr_begin();
        for (int i = 0; i < 20; i++)
                log_notice("daemon line");
        free(out);
        out = test_stderr_end();
        ck_assert_uint_eq(count_lines(out, "notice: daemon line\n"), 20);
}
END_TEST

/* Over all its call sites, a guest gets its own budget; the dropped ones are counted where they
 * came from and in the guest's count. */
START_TEST(test_guest_budget_over_sites) {
        _cleanup_(freep) char *out = NULL;

        log_ratelimit_set_clock(fake_clock);
        log_ratelimit_configure(30 * USEC_PER_SEC, 100, 4);
        fake_now = 5000 * USEC_PER_SEC;
        test_stderr_begin();
        for (int i = 0; i < 3; i++)
                for (int site = 0; site < 3; site++)
                        log_from_site("db", site);
        log_from_site("other", 2);
        fake_now += 30 * USEC_PER_SEC;
        log_from_site("db", 2);
        out = test_stderr_end();
        ck_assert_str_eq(out, "notice: db: site zero\n"
                              "notice: db: site one\n"
                              "notice: db: site two\n"
                              "notice: db: site zero\n"
                              "notice: other: site two\n"
                              "notice: db: Suppressed 5 messages about this guest: over its share of the log\n"
                              "notice: db: Suppressed 2 messages like the next one about this guest\n"
                              "notice: db: site two\n");
}
END_TEST

int main(void) {
        return check_run_case("daemon-log", "log", setup, NULL, 0,
                              CHECK_TESTS(test_stderr_format, test_level_filter, test_errno_return,
                                          test_untrusted_names_escaped, test_level_names, test_journal_stream_detection,
                                          test_journal_fields, test_guest_flood_limited, test_decisions_not_limited, test_suppressed_count_said,
                                          test_guest_budget_over_sites));
}
