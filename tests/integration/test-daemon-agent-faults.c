/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized against broken guest agents (tests/sim/fake-qemu --agent): one daemon manages
 * simulated guests with a healthy agent, one whose agent hangs (accepts, never answers), one
 * whose /proc/vmstat is a million lines, one whose agent answers garbage, and one with no agent
 * at all. The agent is an extra: a broken one must cost the guest its agent tier and nothing
 * else. Each test asserts:
 *   - the daemon still runs and answers D-Bus;
 *   - the other guests are still managed (samples keep coming, no fault), the healthy agents
 *     still on the agent tier;
 *   - the broken agent's guest is managed on balloon stats, is not marked faulty, and its
 *     reason (and the log) says what is wrong with the agent;
 *   - no guest's target or balloon is below its floor;
 *   - the daemon's RSS stayed within a bound of what it was once the guests were managed.
 * A second daemon checks what a guest's text cannot break and what is not read at all: an agent
 * error cut in the middle of a character and a socket name that is not UTF-8 leave every guest
 * listed; a guest whose policy says guest-agent = no gets no agent connection.
 * Waits are generous and assertions are on outcomes. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/utf8.h"
#include "qmp/json-util.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/ctl-json.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define FLOOR DAEMON_FIXTURE_FLOOR
#define WAIT_SEC 30

enum {
        G_OK0,
        G_OK1,
        G_HANG,
        G_HUGE,
        G_GARBAGE,
        N_AGENT_GUESTS,
        G_NO_AGENT = 10, /* a second fake-qemu, without agents */
};

static const unsigned healthy_guests[] = { G_OK0, G_OK1, G_NO_AGENT };


static BusFixture bus;
static DaemonFixture d;
static uint64_t rss_managed_kib;

/* The fixture's config turns the agent off; these tests want it beside every QMP socket. */
static void enable_agent_sockets(void) {
        daemon_fixture_replace_config_line(&d, "agent-socket-pattern =\n", "agent-socket-pattern = %d/%n.qga\n");
}

/* Waits until the guest's tier (rightsizectl --json show) is the given one. */
static void wait_tier(unsigned index, const char *tier) {
        for (uint64_t start = monotonic_sec();; usleep(250 * 1000)) {
                json_object *doc = ctl_show_sim(&d, index);
                bool ok = strcmp(ctl_json_str(doc, "tier"), tier) == 0;
                _cleanup_free_ char *text = strdup(json_object_to_json_string(doc));
                json_object_put(doc);
                if (ok)
                        return;
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "sim-%u never reached tier %s: %s", index, tier,
                              text);
        }
}

static void setup_agents(void) {
        static const char *const agents[] = {
                "--agent", "--scenario", "steady", "--time-scale", "20",
                "--fault", "2:agent-hang",
                "--fault", "3:agent-huge-vmstat",
                "--fault", "4:agent-garbage",
                NULL,
        };
        static const char *const plain[] = { "--scenario", "steady", "--time-scale", "20", NULL };

        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        enable_agent_sockets();
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
        daemon_fixture_start_sim(&d, 1, G_NO_AGENT, 1, plain);
        daemon_fixture_start_sims(&d, N_AGENT_GUESTS, agents, WAIT_SEC);
        guest_view_assert_sims_running(&d, G_NO_AGENT, 1, WAIT_SEC);
        wait_tier(G_OK0, "agent");
        wait_tier(G_OK1, "agent");
        rss_managed_kib = daemon_fixture_rss_kib(&d);
}

static void teardown_agents(void) {
        daemon_fixture_teardown(&d, &bus);
}

/* ---- what every test checks ---- */

static void assert_others_fine(void) {
        for (size_t i = 0; i < ARRAY_SIZE(healthy_guests); i++)
                guest_assert_sim_managed(&d, healthy_guests[i], WAIT_SEC);
        /* The healthy agents still give their guests the agent tier; the guest without one is
         * on balloon stats and has nothing to complain about. */
        for (unsigned i = G_OK0; i <= G_OK1; i++) {
                json_object *doc = ctl_show_sim(&d, i);
                ck_assert_str_eq(ctl_json_str(doc, "tier"), "agent");
                ck_assert(ctl_json_true(doc, "agent"));
                ck_assert_ptr_null(strstr(ctl_json_str(doc, "reason"), "guest agent"));
                json_object_put(doc);
        }
        json_object *doc = ctl_show_sim(&d, G_NO_AGENT);
        ck_assert_str_eq(ctl_json_str(doc, "tier"), "balloon");
        ck_assert(!ctl_json_true(doc, "agent"));
        ck_assert_ptr_null(strstr(ctl_json_str(doc, "reason"), "guest agent"));
        json_object_put(doc);
}

static bool reason_says(const GuestView *v, const void *what) {
        return strstr(v->reason, what);
}

/* The broken agent's guest: its reason names the problem (D-Bus and rightsizectl), the log says
 * it too, it has no fault, it goes on being managed on balloon stats. */
static void assert_agent_problem(unsigned index, const char *what) {
        char name[32];
        GuestView v;

        sim_name(index, name, sizeof(name));
        ck_assert_msg(guest_view_wait(&d, name, reason_says, what, WAIT_SEC, &v),
                      "%s: reason '%s' (state %s, fault '%s'), expected '%s'", name, v.reason, v.state, v.fault, what);
        ck_assert_msg(v.fault[0] == '\0', "%s: the agent made the guest faulty: %s", name, v.fault);

        _cleanup_free_ char *log = daemon_fixture_log(&d);
        ck_assert_ptr_nonnull(log);
        bool logged = false;
        for (const char *line = log; line && *line && !logged;) {
                const char *eol = strchr(line, '\n');
                size_t len = eol ? (size_t) (eol - line) : strlen(line);
                _cleanup_free_ char *l = strndup(line, len);
                logged = strstr(l, name) && strstr(l, "going on with balloon stats only") && strstr(l, what);
                line = eol ? eol + 1 : NULL;
        }
        ck_assert_msg(logged, "no log line for %s says '%s'", name, what);

        guest_assert_sim_managed(&d, index, WAIT_SEC);
        /* rightsizectl says it too. The reason is rewritten every sample, and on a loaded machine
         * a sample may carry another agent problem (a capped read that ran past the agent's
         * timeout, 3/4 of the interval, says "timed out"): waited for, as over D-Bus above. */
        for (uint64_t start = monotonic_sec();; usleep(250 * 1000)) {
                json_object *doc = ctl_show_sim(&d, index);
                _cleanup_free_ char *tier = strdup(ctl_json_str(doc, "tier")), *reason = strdup(ctl_json_str(doc, "reason")),
                                    *fault = strdup(ctl_json_str(doc, "fault"));
                json_object_put(doc);
                ck_assert(tier && reason && fault);
                ck_assert_str_eq(tier, "balloon");
                ck_assert_str_eq(fault, "");
                if (strstr(reason, what))
                        break;
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "rightsizectl show %s: reason '%s', expected '%s'",
                              name, reason, what);
        }
}

static void check_all(void) {
        ck_assert_msg(daemon_fixture_alive(&d), "rightsized died");
        assert_others_fine();
        ck_assert_int_eq(guests_assert_floors_kept(&d, FLOOR), N_AGENT_GUESTS + 1);
        daemon_fixture_assert_rss_bounded(&d, rss_managed_kib);
        ck_assert_msg(daemon_fixture_alive(&d), "rightsized died");
}

static double elapsed_sec(const struct timespec *a, const struct timespec *b) {
        return (double) (b->tv_sec - a->tv_sec) + (double) (b->tv_nsec - a->tv_nsec) / 1e9;
}

/* ---- the tests ---- */

START_TEST(test_healthy_agent) {
        /* setup waited for the agent tier; the agent answers and nothing is wrong with it */
        for (unsigned i = G_OK0; i <= G_OK1; i++) {
                char name[32];
                GuestView v;
                sim_name(i, name, sizeof(name));
                ck_assert_int_eq(guest_view_get(&d, name, &v), 0);
                ck_assert_str_eq(v.fault, "");
                ck_assert_ptr_null(strstr(v.reason, "guest agent"));
        }
        ck_assert(daemon_fixture_wait_log(&d, "Guest agent answers on", WAIT_SEC));
        check_all();
}
END_TEST

START_TEST(test_agent_hang) {
        assert_agent_problem(G_HANG, "guest agent: no answer to guest-sync-delimited");
        json_object *doc = ctl_show_sim(&d, G_HANG);
        ck_assert(!ctl_json_true(doc, "agent"));
        json_object_put(doc);

        /* The event loop never waits on the agent: D-Bus calls keep answering at once while the
         * agent's syncs time out (3 s each), here over more than two of them. A loop that waited
         * would hold a call up to 3 s beyond its normal time; the normal time is measured beside
         * each call (a fresh connection and a call to the bus itself), so that a machine slow for
         * everyone is not taken for a daemon that waits. */
        double worst = 0, worst_ref = 0;
        for (unsigned i = 0; i < 30; i++) {
                struct timespec a, b;
                GuestView v;
                double ref = bus_fixture_reference_call_sec(&bus);
                clock_gettime(CLOCK_MONOTONIC, &a);
                ck_assert_int_eq(guest_view_get(&d, "sim-2", &v), 0);
                clock_gettime(CLOCK_MONOTONIC, &b);
                worst = MAX(worst, elapsed_sec(&a, &b) - ref);
                worst_ref = MAX(worst_ref, ref);
                usleep(250 * 1000);
        }
        ck_assert_msg(worst < 2.0, "GetGuest took %.2f s longer than a call to the bus while an agent hung", worst);
        fprintf(stderr, "GetGuest while an agent hung: at most %.3f s over the bus's own round trip (up to %.3f s)\n",
                worst, worst_ref);
        check_all();
}
END_TEST

START_TEST(test_agent_huge_vmstat) {
        /* ~30 MB offered; the reader stops at its 1 MiB cap, every interval. */
        assert_agent_problem(G_HUGE, "guest agent: /proc/vmstat exceeds 1048576 bytes");
        json_object *doc = ctl_show_sim(&d, G_HUGE);
        ck_assert(ctl_json_true(doc, "agent")); /* it syncs fine: only its file is too long */
        json_object_put(doc);
        /* Many capped reads later (one per sample, counted, not timed), memory is still where it was. */
        uint64_t newest = 0;
        ck_assert_int_ge(guest_history_since(&d, "sim-3", 0, &newest), 0);
        for (uint64_t start = monotonic_sec(); guest_history_since(&d, "sim-3", newest, NULL) < 5; usleep(250 * 1000))
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "sim-3: fewer than 5 samples in %d s", WAIT_SEC);
        guest_assert_sim_managed(&d, G_HUGE, WAIT_SEC);
        check_all();
}
END_TEST

START_TEST(test_agent_garbage) {
        /* The first command after the sync is guest-get-osinfo (is there a /proc to read?): the
         * garbage answers that one. */
        assert_agent_problem(G_GARBAGE, "guest agent: guest-get-osinfo: malformed JSON");
        check_all();
}
END_TEST

/* ---- what the guest writes, and what the daemon does not read ---- */

enum {
        G_UTF8_ERROR,   /* its agent's error text is cut in the middle of a character */
        G_AGENT_NOT_WANTED, /* policy guest-agent = no, an agent socket that accepts */
};
/* A socket file name that is not UTF-8: a guest whose name sd-bus would refuse. */
#define LATIN1_NAME "caf\xe9"
#define LATIN1_NAME_LISTED "caf\xef\xbf\xbd"

static int unwanted_agent_fd = -1, latin1_qmp_fd = -1;

static void setup_guest_text(void) {
        static const char *const utf8_agent[] = {
                "--scenario", "steady", "--time-scale", "20", "--fault", "0:agent-utf8-error", NULL,
        };
        static const char *const plain[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        _cleanup_free_ char *agent_path = NULL, *qmp_path = NULL;

        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        enable_agent_sockets();
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
        /* tried before "fast" (policy files go in name order) */
        daemon_fixture_write_policy(&d, "a-no-agent",
                                    "[policy]\nmatch = sim-1\npoll-interval = 1s\nfloor = 768M\n"
                                    "floor-percent = 0\nguest-agent = no\n");
        /* Listening before the guest appears: a daemon that connects at all has a connection
         * waiting in its backlog. */
        ck_assert_int_ge(asprintf(&agent_path, "%s/sim-1.qga", d.qmp_dir), 0);
        unwanted_agent_fd = test_make_unix_socket(agent_path);
        ck_assert_int_ge(asprintf(&qmp_path, "%s/" LATIN1_NAME ".qmp", d.qmp_dir), 0);
        latin1_qmp_fd = test_make_unix_socket(qmp_path);
        daemon_fixture_start_sim(&d, 1, G_AGENT_NOT_WANTED, 1, plain);
        daemon_fixture_start_sim(&d, 0, G_UTF8_ERROR, 1, utf8_agent);
        daemon_fixture_start(&d);
        /* (sim-0 is the tests' to wait for: its text is what they check) */
        guest_view_assert_sims_running(&d, G_AGENT_NOT_WANTED, 1, WAIT_SEC);
}

static void teardown_guest_text(void) {
        daemon_fixture_teardown(&d, &bus);
        if (unwanted_agent_fd >= 0)
                close(unwanted_agent_fd);
        if (latin1_qmp_fd >= 0)
                close(latin1_qmp_fd);
        unwanted_agent_fd = latin1_qmp_fd = -1;
}

static bool reason_has_agent_error(const GuestView *v, const void *data _unused_) {
        return strstr(v->reason, "guest agent: opening /proc/vmstat: caf") != NULL;
}

START_TEST(test_listing_survives_guest_text) {
        GuestView views[8], v;
        int n;

        /* The agent's error, cut at the daemon's 96 bytes, is in sim-0's reason: whole characters
         * only (half a character would fail GetGuest, and ListGuests for every guest). */
        ck_assert_msg(guest_view_wait(&d, "sim-0", reason_has_agent_error, NULL, WAIT_SEC, &v),
                      "sim-0's reason never named its agent's error: '%s'", v.reason);
        ck_assert_msg(utf8_is_valid(v.reason), "sim-0's reason is not UTF-8: '%s'", v.reason);
        ck_assert_ptr_nonnull(strstr(v.reason, "caf\xc3\xa9\xc3\xa9"));

        /* ListGuests has all three, the one named in Latin-1 with U+FFFD for its byte */
        n = guest_view_list(&d, views, ARRAY_SIZE(views));
        ck_assert_int_eq(n, 3);
        bool latin1_listed = false;
        for (int i = 0; i < n; i++) {
                ck_assert_msg(utf8_is_valid(views[i].name) && utf8_is_valid(views[i].reason), "guest %d", i);
                latin1_listed |= strcmp(views[i].name, LATIN1_NAME_LISTED) == 0;
        }
        ck_assert(latin1_listed);
        /* and it is found by the name it is listed under */
        ck_assert_int_eq(guest_view_get(&d, LATIN1_NAME_LISTED, &v), 0);
        ck_assert_str_eq(v.name, LATIN1_NAME_LISTED);

        _cleanup_(ctl_run_done) CtlRun list = ctl_run(&d, "list");
        ck_assert_msg(list.code == 0, "rightsizectl list: %d %s", list.code, list.err);
        ck_assert_ptr_nonnull(strstr(list.out, "sim-0"));
        ck_assert_ptr_nonnull(strstr(list.out, LATIN1_NAME_LISTED));
        /* every other listing of every guest too: the next-boot recommendations */
        _cleanup_(ctl_run_done) CtlRun rec = ctl_run(&d, "--json", "recommend");
        ck_assert_msg(rec.code == 0, "rightsizectl recommend: %d %s", rec.code, rec.err);
        ck_assert_ptr_nonnull(strstr(rec.out, LATIN1_NAME_LISTED));
        /* and one guest's, by the name it is listed under, as every other method finds it */
        _cleanup_(ctl_run_done) CtlRun one = ctl_run(&d, "--json", "recommend", LATIN1_NAME_LISTED);
        ck_assert_msg(one.code == 0, "rightsizectl recommend %s: %d %s", LATIN1_NAME_LISTED, one.code, one.err);
        ck_assert_ptr_nonnull(strstr(one.out, LATIN1_NAME_LISTED));
}
END_TEST

START_TEST(test_no_agent_connection_when_not_wanted) {
        /* A sample after the guest was managed: a connection would have been made when it was
         * taken over. */
        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, "sim-1", &v), 0);
        uint64_t managed = v.updated;
        ck_assert_msg(guest_view_wait(&d, "sim-1", guest_view_updated_after, &managed, WAIT_SEC, &v),
                      "sim-1: no sample in %d s", WAIT_SEC);
        /* the listening socket does not block: EAGAIN when nobody connected */
        ck_assert_int_eq(fcntl(unwanted_agent_fd, F_SETFL, O_NONBLOCK), 0);
        int fd = accept4(unwanted_agent_fd, NULL, NULL, SOCK_CLOEXEC);
        int error = errno;
        if (fd >= 0)
                close(fd);
        ck_assert_msg(fd < 0 && error == EAGAIN, "rightsized connected to the agent of a guest-agent = no guest");
        _cleanup_(json_object_putp) json_object *doc = ctl_show_sim(&d, G_AGENT_NOT_WANTED);
        ck_assert(!ctl_json_true(doc, "agent"));
        ck_assert_ptr_null(strstr(ctl_json_str(doc, "reason"), "guest agent"));
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-agent-faults");
        check_add_case_once(s, "agents", setup_agents, teardown_agents, 120,
                            CHECK_TESTS(test_healthy_agent, test_agent_hang, test_agent_huge_vmstat,
                                        test_agent_garbage));
        check_add_case_once(s, "guest-text", setup_guest_text, teardown_guest_text, 120,
                            CHECK_TESTS(test_listing_survives_guest_text, test_no_agent_connection_when_not_wanted));
        return check_run_suite(s);
}
