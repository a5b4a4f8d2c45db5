/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* guest-get-osinfo (qmp/qga-osinfo.[ch]): the replies of qemu-ga for Windows and for Linux, as
 * their sources build them, parsed into what the daemon acts on; an agent without the command;
 * and what qemu-ga for Windows answers the /proc reads the daemon would otherwise send. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/macro.h"
#include "common/utf8.h"
#include "qmp/json-util.h"
#include "qmp/qga-commands.h"
#include "qmp/qga-osinfo.h"
#include "qmp/qmp-sync.h"
#include "tests/lib/check-run.h"
#include "tests/lib/fake-qmp-peer.h"
#include "tests/lib/test-util.h"

/* qemu-ga for Windows on Windows Server 2022: every member qga/commands-win32.c
 * qmp_guest_get_osinfo() fills (pretty-name is the registry's ProductName, version "N/A" past
 * the versions its table knows). */
static const char windows_osinfo[] =
        "{\"kernel-version\": \"10.0\", \"kernel-release\": \"20348\", \"machine\": \"x86_64\", "
        "\"id\": \"mswindows\", \"name\": \"Microsoft Windows\", \"pretty-name\": \"Windows Server 2022 Datacenter\", "
        "\"version\": \"N/A\", \"version-id\": \"N/A\", \"variant\": \"server\", \"variant-id\": \"server\"}";

/* qemu-ga on Debian 12: uname() and /etc/os-release (qga/commands-posix.c). */
static const char linux_osinfo[] =
        "{\"kernel-version\": \"#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)\", "
        "\"kernel-release\": \"6.1.0-18-amd64\", \"machine\": \"x86_64\", \"id\": \"debian\", "
        "\"name\": \"Debian GNU/Linux\", \"pretty-name\": \"Debian GNU/Linux 12 (bookworm)\", "
        "\"version\": \"12 (bookworm)\", \"version-id\": \"12\"}";

static json_object *parse(const char *text) {
        json_object *o = json_tokener_parse(text);
        ck_assert_ptr_nonnull(o);
        return o;
}

START_TEST(test_parse_windows) {
        _cleanup_(json_object_putp) json_object *o = parse(windows_osinfo);
        QgaOsInfo info;

        ck_assert_int_eq(qga_parse_osinfo(o, &info), 0);
        ck_assert_int_eq(info.family, QGA_OS_WINDOWS);
        ck_assert(!qga_os_has_procfs(info.family));
        ck_assert_str_eq(info.id, "mswindows");
        ck_assert_str_eq(info.pretty_name, "Windows Server 2022 Datacenter");
        ck_assert_str_eq(info.kernel_release, "20348");
        ck_assert_str_eq(qga_os_family_to_string(info.family), "windows");
}
END_TEST

START_TEST(test_parse_linux_and_others) {
        _cleanup_(json_object_putp) json_object *o = parse(linux_osinfo);
        QgaOsInfo info;

        ck_assert_int_eq(qga_parse_osinfo(o, &info), 0);
        ck_assert_int_eq(info.family, QGA_OS_OTHER);
        ck_assert(qga_os_has_procfs(info.family));
        ck_assert_str_eq(info.id, "debian");
        ck_assert_str_eq(info.kernel_release, "6.1.0-18-amd64");

        /* A guest without os-release: qga sends only uname()'s members. Not Windows: its /proc is
         * tried. */
        _cleanup_(json_object_putp) json_object *bare =
                parse("{\"kernel-release\": \"5.10.0\", \"kernel-version\": \"#1\", \"machine\": \"aarch64\"}");
        ck_assert_int_eq(qga_parse_osinfo(bare, &info), 0);
        ck_assert_int_eq(info.family, QGA_OS_OTHER);
        ck_assert_str_eq(info.id, "");
        ck_assert(qga_os_has_procfs(info.family));

        /* Only the exact id is Windows. */
        _cleanup_(json_object_putp) json_object *near = parse("{\"id\": \"MSWindows\"}");
        ck_assert_int_eq(qga_parse_osinfo(near, &info), 0);
        ck_assert_int_eq(info.family, QGA_OS_OTHER);

        /* Nothing was asked yet: the reads are tried, as before. */
        ck_assert(qga_os_has_procfs(QGA_OS_UNKNOWN));
}
END_TEST

START_TEST(test_parse_guest_text) {
        /* A pretty-name longer than the field, in two-byte characters: cut after a whole one. */
        char text[512];
        size_t n = (size_t) snprintf(text, sizeof(text), "{\"id\": \"mswindows\", \"pretty-name\": \"W");
        for (int i = 0; i < 100; i++)
                n += (size_t) snprintf(text + n, sizeof(text) - n, "\xc3\xa9");
        snprintf(text + n, sizeof(text) - n, "\"}");
        _cleanup_(json_object_putp) json_object *o = parse(text);
        QgaOsInfo info;

        ck_assert_int_eq(qga_parse_osinfo(o, &info), 0);
        ck_assert_int_eq(info.family, QGA_OS_WINDOWS);
        ck_assert(utf8_is_valid(info.pretty_name));
        ck_assert_uint_lt(strlen(info.pretty_name), QGA_OS_TEXT_MAX);
        ck_assert_uint_ge(strlen(info.pretty_name), QGA_OS_TEXT_MAX - 2);
}
END_TEST

START_TEST(test_parse_wrong_types) {
        static const char *const bad[] = {
                "{\"id\": 1}", "{\"id\": null}", "{\"pretty-name\": [\"x\"]}", "{\"kernel-release\": {}}",
                "[]", "\"mswindows\"", "42",
        };
        QgaOsInfo info = { .family = QGA_OS_WINDOWS };

        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                _cleanup_(json_object_putp) json_object *o = parse(bad[i]);
                ck_assert_msg(qga_parse_osinfo(o, &info) == -EBADMSG, "accepted %s", bad[i]);
        }
        ck_assert_int_eq(qga_parse_osinfo(NULL, &info), -EBADMSG);
        /* untouched on failure */
        ck_assert_int_eq(info.family, QGA_OS_WINDOWS);
}
END_TEST

/* ---- through the agent client ---- */

static sd_event *e;
static QgaClient *c;
static FakePeer *p;

typedef struct OsResult {
        bool done;
        int error;
        char desc[256];
        bool have_info;
        QgaOsInfo info;
} OsResult;

static void on_osinfo(QgaClient *client _unused_, const QmpReply *reply, const QgaOsInfo *info, void *userdata) {
        OsResult *r = userdata;
        r->done = true;
        r->error = reply->error;
        snprintf(r->desc, sizeof(r->desc), "%s", reply->error_desc ?: "");
        r->have_info = info != NULL;
        if (info)
                r->info = *info;
}

static void setup(void) {
        int fds[2];

        ck_assert_int_ge(sd_event_new(&e), 0);
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        ck_assert_int_ge(qga_client_new(&c, e), 0);
        ck_assert_int_ge(fake_peer_new(&p, e, fds[1]), 0);
        fake_peer_set_qga(p, true);
        ck_assert_int_ge(qga_client_connect_fd(c, fds[0]), 0);
        fake_peer_expect(p, "guest-sync-delimited", NULL);
        fake_peer_send(p, "\xff{\"return\": %SYNC%}\n");
}

static void teardown(void) {
        c = qga_client_free(c);
        p = fake_peer_free(p);
        e = sd_event_unref(e);
}

static void ask(OsResult *r) {
        *r = (OsResult) {};
        ck_assert_int_ge(qga_get_osinfo(c, 0, on_osinfo, r), 0);
        ck_assert_msg(test_run_until_done(e, p), "script: %s", fake_peer_failure(p) ?: "hang");
        ck_assert(test_run_until_flag(e, &r->done));
}

START_TEST(test_get_osinfo_windows) {
        OsResult r;
        _cleanup_free_ char *reply = NULL;

        ck_assert_int_ge(asprintf(&reply, "{\"return\": %s}\n", windows_osinfo), 0);
        fake_peer_expect(p, "guest-get-osinfo", NULL);
        fake_peer_send(p, reply);
        ask(&r);
        ck_assert_int_eq(r.error, 0);
        ck_assert(r.have_info);
        ck_assert_int_eq(r.info.family, QGA_OS_WINDOWS);
        ck_assert_str_eq(r.info.pretty_name, "Windows Server 2022 Datacenter");
}
END_TEST

START_TEST(test_get_osinfo_not_there) {
        /* qemu-ga older than 2.10, or one started with --block-rpcs=guest-get-osinfo (qapi's
         * dispatcher: "Command %s has been disabled"). */
        OsResult r;

        fake_peer_expect(p, "guest-get-osinfo", NULL);
        fake_peer_send(p, "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"Command guest-get-osinfo has been "
                          "disabled\"}}\n");
        ask(&r);
        ck_assert_int_eq(r.error, -EOPNOTSUPP);
        ck_assert(!r.have_info);
        ck_assert(qga_client_is_ready(c));
}
END_TEST

START_TEST(test_get_osinfo_malformed) {
        OsResult r;

        fake_peer_expect(p, "guest-get-osinfo", NULL);
        fake_peer_send(p, "{\"return\": {\"id\": 7}}\n");
        ask(&r);
        ck_assert_int_eq(r.error, -EBADMSG);
        ck_assert(!r.have_info);
}
END_TEST

START_TEST(test_windows_agent_has_no_proc) {
        /* What the daemon would get without asking first: qemu-ga for Windows opens the path with
         * CreateFileW() and answers the Win32 error (qga/commands-win32.c, qmp_guest_file_open()),
         * so there is no handle to read or close. */
        GuestVmstat vm;
        char *error = NULL;

        fake_peer_expect(p, "guest-file-open", "{\"path\": \"/proc/vmstat\", \"mode\": \"r\"}");
        fake_peer_send(p, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"failed to open file '/proc/vmstat': "
                          "The system cannot find the path specified.\"}}\n");
        ck_assert_int_eq(qga_sync_read_vmstat(c, 0, &vm, &error), -EIO);
        ck_assert_ptr_nonnull(error);
        ck_assert_ptr_nonnull(strstr(error, "The system cannot find the path specified"));
        free(error);
        test_run_for(e, 20 * USEC_PER_MSEC);
        ck_assert_uint_eq(fake_peer_n_unexpected(p), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("qga-osinfo");
        check_add_case(s, "parse", NULL, NULL, 0,
                       CHECK_TESTS(test_parse_windows, test_parse_linux_and_others, test_parse_guest_text,
                                   test_parse_wrong_types));
        check_add_case(s, "agent", setup, teardown, 30,
                       CHECK_TESTS(test_get_osinfo_windows, test_get_osinfo_not_there, test_get_osinfo_malformed,
                                   test_windows_agent_has_no_proc));
        return check_run_suite(s);
}
