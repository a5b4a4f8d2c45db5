/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A daemon that cannot own its bus name says so and keeps working: the private bus first refuses
 * org.rightsize.Manager1 (the policy file is not where dbus-daemon reads it), and rightsized
 * starts anyway, tells the service manager (a notify socket this test binds) that its D-Bus API
 * is unavailable, logs the fix, and manages a simulated guest. Then the policy is installed and
 * dbus-daemon reloaded (SIGHUP): the daemon's retry takes the name, STATUS= is back to normal,
 * and `rightsizectl status` tells the past outage. The same when dbus-daemon is restarted under
 * a running daemon. Waits are on state with generous deadlines. */

#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define WAIT_SEC 60
/* The daemon retries 10, 30 and 70 s after its start, then every minute. */
#define RETRY_WAIT_SEC 150
#define GUEST "sim-0"
#define REFUSED "D-Bus API unavailable: the bus policy does not let rightsized own " RS_BUS_NAME

static BusFixture bus;
static DaemonFixture d;
static int notify_fd = -1;
static char *notify_path;
static bool ready_seen;

/* Waits for a STATUS= that contains `needle` (with `want` true) or lacks it (false), and returns
 * that status (free it). Every message in between is read; READY=1 is remembered. */
static char *wait_status(const char *needle, bool want, unsigned timeout_sec) {
        for (uint64_t start = monotonic_sec(); monotonic_sec() < start + timeout_sec;) {
                struct pollfd p = { .fd = notify_fd, .events = POLLIN };
                char buf[4096];

                ck_assert_msg(daemon_fixture_alive(&d), "rightsized exited; see %s", d.log_path);
                if (poll(&p, 1, 500) <= 0)
                        continue;
                ssize_t n = recv(notify_fd, buf, sizeof(buf) - 1, 0);
                if (n < 0) {
                        ck_assert_int_eq(errno, EAGAIN);
                        continue;
                }
                buf[n] = '\0';
                if (strstr(buf, "READY=1"))
                        ready_seen = true;
                char *status = strstr(buf, "STATUS=");
                if (!status)
                        continue;
                status += strlen("STATUS=");
                status[strcspn(status, "\n")] = '\0';
                if ((strstr(status, needle) != NULL) == want)
                        return strdup(status);
        }
        ck_abort_msg("no STATUS= %s '%s' within %u s", want ? "with" : "without", needle, timeout_sec);
        return NULL;
}

/* The metrics file shows the guest's size: the daemon samples and publishes it. */
static bool metrics_show_guest(void) {
        _cleanup_free_ char *path = NULL, *text = NULL;

        ck_assert_int_ge(asprintf(&path, "%s/rightsize.prom", d.dir), 0);
        text = test_read_file(path);
        return text && strstr(text, "rightsize_guest_actual_bytes{guest=\"" GUEST "\"");
}

/* The daemon, a guest and a notify socket on a bus started with `policy`. */
static void start_fixtures(BusPolicy policy) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        daemon_fixture_setup(&d, &bus, policy);
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
        daemon_fixture_start_sim(&d, 0, 0, 1, NULL);

        /* The service manager's end of sd_notify(). */
        ck_assert_int_ge(asprintf(&notify_path, "%s/notify", d.dir), 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", notify_path);
        notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(notify_fd, 0);
        ck_assert_int_eq(bind(notify_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        ready_seen = false;
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
        if (notify_fd >= 0)
                close(notify_fd);
        notify_fd = -1;
        free(notify_path);
        notify_path = NULL;
}

/* The outage the API reports now: ApiOutages must be 1, and its reason is returned (free it). */
static char *api_outage_reason(void) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *client = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        uint64_t start = 0, end = 0;
        uint32_t n = 0;
        const char *reason = NULL;

        ck_assert_int_ge(bus_fixture_connect(&bus, &client), 0);
        ck_assert_int_ge(sd_bus_get_property_trivial(client, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "ApiOutages",
                                                     NULL, 'u', &n),
                         0);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_ge(sd_bus_get_property(client, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "LastApiOutage",
                                             NULL, &reply, "(tts)"),
                         0);
        ck_assert_int_ge(sd_bus_message_read(reply, "(tts)", &start, &end, &reason), 0);
        ck_assert_uint_gt(start, 0);
        ck_assert_uint_ge(end, start);
        return strdup(reason);
}

static void wait_name(void) {
        for (uint64_t start = monotonic_sec(); !daemon_fixture_owns_name(&d); usleep(200 * 1000)) {
                ck_assert_msg(monotonic_sec() < start + RETRY_WAIT_SEC, "the name was not taken within %d s",
                              RETRY_WAIT_SEC);
                ck_assert_msg(daemon_fixture_alive(&d), "rightsized exited; see %s", d.log_path);
        }
}

START_TEST(test_refused_name_is_loud_then_recovered) {
        _cleanup_free_ char *down = NULL, *up = NULL, *reason = NULL;

        start_fixtures(BUS_POLICY_SYSTEM_UNINSTALLED);
        daemon_fixture_spawn(&d, notify_path);

        /* Said loudly: STATUS= and a log error that names the fix. The daemon still reports ready. */
        down = wait_status(REFUSED, true, WAIT_SEC);
        ck_assert_msg(strstr(down, "managing "), "STATUS= lost the guest counts: %s", down);
        for (uint64_t start = monotonic_sec(); !ready_seen; free(wait_status(REFUSED, true, WAIT_SEC)))
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "no READY=1 while the API was down");
        ck_assert_msg(daemon_fixture_wait_log(&d, "Install " RS_BUS_NAME ".conf where dbus-daemon reads it", 10),
                      "the log does not say how to fix it; see %s", d.log_path);
        ck_assert(!daemon_fixture_owns_name(&d));

        /* Not half-alive: the guest is managed meanwhile. */
        for (uint64_t start = monotonic_sec(); !metrics_show_guest(); usleep(200 * 1000))
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, GUEST " never showed in the metrics file");
        ck_assert(daemon_fixture_alive(&d));

        /* The operator installs the policy and reloads dbus: the next retry takes the name. */
        ck_assert_int_eq(bus_fixture_install_policy(&bus), 0);
        wait_name();
        up = wait_status("D-Bus", false, WAIT_SEC);
        ck_assert_msg(strncmp(up, "Managing ", strlen("Managing ")) == 0, "STATUS= not back to normal: %s", up);
        ck_assert(daemon_fixture_wait_log(&d, "D-Bus API available again", 10));
        ck_assert_msg(guest_view_wait_running(&d, GUEST, WAIT_SEC), GUEST " is not managed");

        /* The outage shows through the API, and in `rightsizectl status`. */
        reason = api_outage_reason();
        ck_assert_msg(strstr(reason, "bus policy"), "LastApiOutage's reason: %s", reason);

        _cleanup_(ctl_run_done) CtlRun status = ctl_run(&d, "status");
        ck_assert_msg(strstr(status.out, "D-Bus API was unavailable from "), "rightsizectl status:\n%s%s", status.out,
                      status.err);
        ck_assert_msg(strstr(status.out, "the bus policy does not let rightsized own"), "rightsizectl status:\n%s",
                      status.out);

        /* Stopped, it leaves no metrics file that would go on showing the guest as managed. */
        _cleanup_free_ char *metrics = NULL;
        ck_assert_int_ge(asprintf(&metrics, "%s/rightsize.prom", d.dir), 0);
        ck_assert(metrics_show_guest());
        int stopped = daemon_fixture_stop(&d, SIGTERM);
        ck_assert_msg(WIFEXITED(stopped) && WEXITSTATUS(stopped) == 0, "rightsized stopped with status %d", stopped);
        ck_assert_msg(access(metrics, F_OK) < 0 && errno == ENOENT, "%s is still there after the stop", metrics);
}
END_TEST

/* dbus-daemon restarted under a running daemon: the disconnection does not end it, it says so,
 * and it reconnects. */
START_TEST(test_bus_restart_reconnects) {
        _cleanup_free_ char *up = NULL, *down = NULL, *back = NULL, *reason = NULL;

        start_fixtures(BUS_POLICY_SYSTEM);
        /* The system bus's address names no guid; the fixture's does, and a restarted dbus-daemon
         * has another, which sd-bus would refuse. */
        char *guid = strstr(bus.address, ",guid=");
        if (guid)
                *guid = '\0';
        daemon_fixture_spawn(&d, notify_path);
        wait_name();
        up = wait_status("D-Bus", false, WAIT_SEC);
        ck_assert_msg(guest_view_wait_running(&d, GUEST, WAIT_SEC), GUEST " never became managed");

        ck_assert_int_eq(bus_fixture_restart(&bus), 0);
        down = wait_status("D-Bus API unavailable: disconnected from the system bus", true, WAIT_SEC);
        wait_name();
        back = wait_status("D-Bus", false, WAIT_SEC);
        ck_assert(daemon_fixture_wait_log(&d, "D-Bus API available again", 10));
        guest_assert_managed(&d, GUEST, WAIT_SEC);

        reason = api_outage_reason();
        ck_assert_str_eq(reason, "disconnected from the system bus");
        _cleanup_(ctl_run_done) CtlRun status = ctl_run(&d, "status");
        ck_assert_msg(strstr(status.out, "D-Bus API was unavailable from ") &&
                              strstr(status.out, "disconnected from the system bus"),
                      "rightsizectl status:\n%s%s", status.out, status.err);
}
END_TEST

int main(void) {
        return check_run_case("daemon-api-outage", "api-outage", NULL, teardown, 400,
                              CHECK_TESTS(test_refused_name_is_loud_then_recovered, test_bus_restart_reconnects));
}
