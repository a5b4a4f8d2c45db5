/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized with Windows guests (tests/sim/fake-qemu --windows, fake-windows.c): the balloon
 * answers as virtio-win's driver does (tags 0-9, the others and its first report 2^64-1 on the
 * wire), and the agent as qemu-ga for Windows does (guest-get-osinfo "mswindows", no /proc to
 * open). Beside them, a Linux guest with an agent, judged by the same daemon. Asserts:
 *   - a Windows guest is managed: samples keep coming, a decision and an estimate, no fault;
 *   - it is on the balloon tier, and the margin it would hold at is the balloon tier's, 1.5
 *     times the policy's, where the Linux guest with its agent has the policy's own;
 *   - no stat of 2^64-1 is taken as a value (an estimate, a size, no "guest stats lie");
 *   - its agent is asked what it runs on and then never for /proc: no warning about it, ever,
 *     and the reason and `rightsizectl show` say what is not seen, and that it is Windows;
 *   - a Windows guest without an agent is managed the same, with nothing about an agent said.
 * Waits are generous and assertions are on outcomes. */

#include <check.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "qmp/json-util.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/ctl-json.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"

#define WAIT_SEC 120
#define MARGIN_PERCENT 10
#define WINDOWS_NOTE "Windows guest: no /proc, so no vmstat or PSI; balloon stats only"

enum {
        G_WINDOWS_AGENT,    /* --windows --agent */
        G_WINDOWS_NO_AGENT, /* --windows */
        G_LINUX_AGENT,      /* --agent */
};

static BusFixture bus;
static DaemonFixture d;

/* The guest's warnings in the log ("warning: sim-N: ..." and "warning: sim-N [state]: ..."), but
 * for the one every simulated guest gets once, Linux or not: its balloon has no deflate-on-oom. */
#define DEFLATE_WARNING "Probing a guest whose balloon has no deflate-on-oom"
static unsigned guest_warnings(unsigned index, char *first, size_t first_size) {
        char name[32], prefix[64];
        unsigned n = 0;
        sim_name(index, name, sizeof(name));
        snprintf(prefix, sizeof(prefix), "warning: %s", name);
        _cleanup_free_ char *log = daemon_fixture_log(&d);
        ck_assert_ptr_nonnull(log);
        if (first_size > 0)
                first[0] = '\0';
        for (const char *line = log; line && *line;) {
                const char *eol = strchr(line, '\n');
                size_t len = eol ? (size_t) (eol - line) : strlen(line);
                _cleanup_free_ char *l = strndup(line, len);
                ck_assert_ptr_nonnull(l);
                if (strncmp(l, prefix, strlen(prefix)) == 0 && len > strlen(prefix) &&
                    (l[strlen(prefix)] == ':' || l[strlen(prefix)] == ' ') && !strstr(l, DEFLATE_WARNING)) {
                        if (n++ == 0 && first_size > 0)
                                snprintf(first, first_size, "%.*s", (int) len, line);
                }
                line = eol ? eol + 1 : NULL;
        }
        return n;
}

/* An estimate and the size it would hold at: the view has both once the guest was judged. */
static bool has_estimate(const GuestView *v, const void *data _unused_) {
        return v->has_estimate && v->estimate > 0 && v->target > 0 && v->fault[0] == '\0';
}

/* The guest's margin, as rightsizectl shows it: what it would hold at (max − what it would give
 * back) over its estimate. NAN while the hold size is at the floor or max (clamped: no margin to
 * read) or not known. */
static double shown_margin(json_object *doc) {
        uint64_t max = ctl_json_u64(doc, "max"), floor = ctl_json_u64(doc, "floor"), est = ctl_json_u64(doc, "estimate"),
                 give = ctl_json_u64(doc, "reclaimable");
        if (max == UINT64_MAX || est == UINT64_MAX || give == UINT64_MAX || est == 0 || give > max)
                return NAN;
        uint64_t hold = max - give;
        if (hold <= floor || give == 0)
                return NAN;
        return (double) hold / (double) est - 1.0;
}

static bool margin_readable(const GuestView *v _unused_, const void *data) {
        unsigned index = *(const unsigned *) data;
        _cleanup_(json_object_putp) json_object *doc = ctl_show_sim(&d, index);
        return !isnan(shown_margin(doc));
}

static void setup(void) {
        static const char *const windows_agent[] = { "--windows", "--agent", "--scenario", "steady", "--time-scale",
                                                     "20", NULL };
        static const char *const windows_bare[] = { "--windows", "--scenario", "steady", "--time-scale", "20", NULL };
        static const char *const linux_agent[] = { "--agent", "--scenario", "steady", "--time-scale", "20", NULL };
        char policy[256];

        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        daemon_fixture_replace_config_line(&d, "agent-socket-pattern =\n", "agent-socket-pattern = %d/%n.qga\n");
        /* A floor with room under the steady guest's set, so that the hold size is not clamped and
         * its margin can be read. */
        snprintf(policy, sizeof(policy),
                 "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 256M\nfloor-percent = 0\nhold-time = 5s\n"
                 "margin = %d%%\n",
                 MARGIN_PERCENT);
        daemon_fixture_write_policy(&d, "fast", policy);
        daemon_fixture_start_sim(&d, 1, G_WINDOWS_NO_AGENT, 1, windows_bare);
        daemon_fixture_start_sim(&d, 2, G_LINUX_AGENT, 1, linux_agent);
        daemon_fixture_start_sims(&d, 1, windows_agent, WAIT_SEC);
        guest_view_assert_sims_running(&d, G_WINDOWS_NO_AGENT, 2, WAIT_SEC);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

/* Managed, with a decision and an estimate, no fault, on the balloon tier at its margin. */
static void assert_windows_managed(unsigned index) {
        char name[32];
        GuestView v;

        sim_name(index, name, sizeof(name));
        guest_assert_sim_managed(&d, index, WAIT_SEC);
        ck_assert_msg(guest_view_wait(&d, name, has_estimate, NULL, WAIT_SEC, &v),
                      "%s: no estimate and target (state %s, fault '%s', reason '%s')", name, v.state, v.fault,
                      v.reason);
        /* 2^64-1 never became a size */
        ck_assert_uint_le(v.estimate, v.max);
        ck_assert_uint_le(v.target, v.max);
        ck_assert_uint_ge(v.target, v.floor);

        ck_assert_msg(guest_view_wait(&d, name, margin_readable, &index, WAIT_SEC, &v),
                      "%s: never held above its floor with an estimate (state %s: %s)", name, v.state, v.reason);
        _cleanup_(json_object_putp) json_object *doc = ctl_show_sim(&d, index);
        ck_assert_str_eq(ctl_json_str(doc, "tier"), "balloon");
        ck_assert_str_eq(ctl_json_str(doc, "fault"), "");
        double margin = shown_margin(doc);
        ck_assert_msg(fabs(margin - MARGIN_PERCENT / 100.0 * 1.5) < 0.005,
                      "%s: margin %.4f, expected the balloon tier's %.4f", name, margin, MARGIN_PERCENT / 100.0 * 1.5);
        ck_assert_ptr_null(strstr(ctl_json_str(doc, "reason"), "guest stats"));
}

static void assert_no_warnings(unsigned index) {
        char first[512];
        unsigned n = guest_warnings(index, first, sizeof(first));
        ck_assert_msg(n == 0, "sim-%u logged %u warning(s), the first: %s", index, n, first);
        /* and that one once: the same as the Linux guest's */
        ck_assert_uint_le(daemon_fixture_log_count(&d, DEFLATE_WARNING), 3);
}

START_TEST(test_windows_guest_with_agent) {
        assert_windows_managed(G_WINDOWS_AGENT);

        _cleanup_(json_object_putp) json_object *doc = ctl_show_sim(&d, G_WINDOWS_AGENT);
        ck_assert(ctl_json_true(doc, "agent"));
        ck_assert_str_eq(ctl_json_str(doc, "guest-os"), "mswindows");
        ck_assert_msg(strstr(ctl_json_str(doc, "reason"), WINDOWS_NOTE), "reason: %s", ctl_json_str(doc, "reason"));

        /* The plain `show` says it in words too. */
        _cleanup_(ctl_run_done) CtlRun show = ctl_run(&d, "show", "sim-0");
        ck_assert_int_eq(show.code, 0);
        ck_assert_msg(strstr(show.out, "Windows (no /proc: balloon stats only)"), "show: %s", show.out);

        /* Said once, at info, when the agent answered: never a warning, however many samples (ten
         * more: guest_history_wait() counts new decisions, not the history's length). */
        ck_assert(daemon_fixture_wait_log(&d, "Windows guest (Windows Server 2022 Datacenter, build 20348)", 5));
        guest_history_wait(&d, "sim-0", 10, WAIT_SEC);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "Windows guest (Windows Server"), 1);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "/proc/vmstat"), 0);
        assert_no_warnings(G_WINDOWS_AGENT);
        ck_assert_msg(daemon_fixture_alive(&d), "rightsized died");
}
END_TEST

START_TEST(test_windows_guest_without_agent) {
        assert_windows_managed(G_WINDOWS_NO_AGENT);

        _cleanup_(json_object_putp) json_object *doc = ctl_show_sim(&d, G_WINDOWS_NO_AGENT);
        ck_assert(!ctl_json_true(doc, "agent"));
        ck_assert_str_eq(ctl_json_str(doc, "guest-os"), "");
        ck_assert_ptr_null(strstr(ctl_json_str(doc, "reason"), "guest agent"));
        ck_assert_ptr_null(strstr(ctl_json_str(doc, "reason"), "Windows"));
        assert_no_warnings(G_WINDOWS_NO_AGENT);
}
END_TEST

START_TEST(test_linux_guest_beside_them) {
        /* The same daemon, a Linux guest with an agent: the agent tier and the policy's margin. */
        GuestView v;
        unsigned index = G_LINUX_AGENT;

        guest_assert_sim_managed(&d, index, WAIT_SEC);
        ck_assert_msg(guest_view_wait(&d, "sim-2", margin_readable, &index, WAIT_SEC, &v),
                      "sim-2: never held above its floor with an estimate (state %s: %s)", v.state, v.reason);
        _cleanup_(json_object_putp) json_object *doc = ctl_show_sim(&d, index);
        ck_assert_str_eq(ctl_json_str(doc, "tier"), "agent");
        ck_assert_str_eq(ctl_json_str(doc, "guest-os"), "debian");
        double margin = shown_margin(doc);
        ck_assert_msg(fabs(margin - MARGIN_PERCENT / 100.0) < 0.005, "sim-2: margin %.4f, expected the policy's %.4f",
                      margin, MARGIN_PERCENT / 100.0);
        ck_assert(daemon_fixture_wait_log(&d, "Guest agent runs on Debian GNU/Linux 12 (bookworm)", 5));
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-windows");
        check_add_case_once(s, "windows", setup, teardown, 300,
                            CHECK_TESTS(test_windows_guest_with_agent, test_windows_guest_without_agent,
                                        test_linux_guest_beside_them));
        return check_run_suite(s);
}
