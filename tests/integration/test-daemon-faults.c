/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized against hostile and broken simulated guests (tests/sim/fake-qemu): one daemon manages
 * a fleet in which every guest but two healthy ones has its own fault, switched on (SIGUSR2 to
 * fake-qemu) once the daemon manages every one of them; two more are broken from the start. Each
 * fault has its own test, and each test asserts:
 *   - the daemon still runs;
 *   - the healthy guests are still managed: their samples keep coming and they have no fault;
 *   - the faulty guest is marked in `rightsizectl list` and `rightsizectl --json list`, with a
 *     reason that names the fault;
 *   - no guest's target or balloon is below its floor;
 *   - the daemon's RSS stayed within a bound of what it was once the fleet was managed.
 * Further test cases: a QEMU killed with -9 and restarted under the same socket path, state files
 * that are corrupted, truncated or from another version, and a full disk under the state
 * directory. Waits are generous and assertions are on outcomes, never on timing. */

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/e2e-common.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define FLOOR DAEMON_FIXTURE_FLOOR
/* The fault begins on SIGUSR2, sent once the daemon manages the guest: a fixed delay ("@3", once)
 * raced the daemon's takeover of 17 guests on a loaded machine. */
#define FAULT_AFTER "@usr2"
/* A deadline, not a bound: a stuck balloon takes a learned baseline, a probe and the stall's cycles
 * to show, and once missed 30 s with a benchmark's two TCG guests on the same two cores, then 60 s
 * with two TCG guests and a build beside it. Generous: only a failure waits it out. */
#define WAIT_SEC 180

/* The fleet: sim-N in one fake-qemu, plus sim-RESTART in a second one that gets killed. */
enum {
        G_OK0,
        G_OK1,
        G_CLOSE,
        G_GARBAGE,
        G_HUGE,
        G_DEEP,
        G_TYPES,
        G_HANG,
        G_FLOOD,
        G_LIE_FREE,
        G_LIE_BACKWARDS,
        G_LIE_HUGE,
        G_LIE_FUTURE,
        G_STALE,
        G_STUCK,
        G_LYING,
        G_HANG_FROM_START,
        G_CONTAINERS,
        G_NO_BALLOON,
        N_FLEET,
        G_RESTART = 20,
};


static BusFixture bus;
static DaemonFixture d;
static uint64_t rss_managed_kib;

static void start_daemon_with_policy(void) {
        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
}

static void wait_running(unsigned index) {
        guest_view_assert_sims_running(&d, index, 1, WAIT_SEC);
}

static void setup_fleet(void) {
        static const char *const faults[] = {
                "--scenario", "steady", "--time-scale", "20", "--huge-reply-size", "100",
                "--fault", "2:close-mid-reply" FAULT_AFTER,
                "--fault", "3:garbage" FAULT_AFTER,
                "--fault", "4:huge-reply" FAULT_AFTER,
                "--fault", "5:deep-nesting" FAULT_AFTER,
                "--fault", "6:wrong-types" FAULT_AFTER,
                "--fault", "7:hang" FAULT_AFTER,
                "--fault", "8:event-flood" FAULT_AFTER,
                "--fault", "9:lie-free" FAULT_AFTER,
                "--fault", "10:lie-backwards" FAULT_AFTER,
                "--fault", "11:lie-huge" FAULT_AFTER,
                "--fault", "12:lie-future" FAULT_AFTER,
                "--fault", "13:stale-stats" FAULT_AFTER,
                "--fault", "14:stuck-balloon",
                "--fault", "15:lying-stats" FAULT_AFTER,
                "--fault", "16:hang",
                "--fault", "17:container-flood" FAULT_AFTER,
                "--fault", "18:no-balloon",
                NULL,
        };
        static const char *const healthy[] = { "--scenario", "steady", "--time-scale", "20", NULL };

        start_daemon_with_policy();
        daemon_fixture_start_sim(&d, 0, 0, N_FLEET, faults);
        daemon_fixture_start_sim(&d, 1, G_RESTART, 1, healthy);
        daemon_fixture_start(&d);
        /* Every guest whose fault comes later is managed first; then the faults begin. */
        for (unsigned i = G_OK0; i < N_FLEET; i++)
                if (i != G_STUCK && i != G_HANG_FROM_START && i != G_NO_BALLOON)
                        wait_running(i);
        wait_running(G_RESTART);
        rss_managed_kib = daemon_fixture_rss_kib(&d);
        ck_assert_int_eq(kill(d.sims[0], SIGUSR2), 0);
}

static void teardown_all(void) {
        daemon_fixture_teardown(&d, &bus);
}

/* ---- what every test checks ---- */

static void assert_floors_kept(void) {
        ck_assert_int_ge(guests_assert_floors_kept(&d, FLOOR), N_FLEET);
}

static json_object *json_guest(json_object *list, const char *name) {
        json_object *guests, *v;
        ck_assert(json_object_object_get_ex(list, "guests", &guests));
        for (size_t i = 0; i < json_object_array_length(guests); i++) {
                json_object *g = json_object_array_get_idx(guests, i);
                if (json_object_object_get_ex(g, "name", &v) && strcmp(json_object_get_string(v), name) == 0)
                        return g;
        }
        return NULL;
}

static bool fault_says(const GuestView *v, const void *what) {
        return strstr(v->fault, what);
}

/* The faulty guest's fault names what happened, over D-Bus, in `list` and in `--json list`. */
static void assert_fault_reported(unsigned index, const char *what) {
        char name[32], line_start[64];
        GuestView v;

        sim_name(index, name, sizeof(name));
        ck_assert_msg(guest_view_wait(&d, name, fault_says, what, WAIT_SEC, &v),
                      "%s: fault '%s' (state %s, reason '%s'), expected '%s'", name, v.fault, v.state, v.reason, what);

        /* Faults stay while the cause lasts, so the CLI sees what D-Bus said. */
        _cleanup_(ctl_run_done) CtlRun list = ctl_run(&d, "list");
        ck_assert_int_eq(list.code, 0);
        snprintf(line_start, sizeof(line_start), "\n%s ", name);
        const char *line = strstr(list.out, line_start);
        ck_assert_msg(line, "%s missing from rightsizectl list:\n%s", name, list.out);
        const char *eol = strchr(line + 1, '\n');
        const char *fault = strstr(line, "fault: ");
        ck_assert_msg(fault && (!eol || fault < eol), "no fault on %s's line:\n%s", name, list.out);
        ck_assert_msg(strstr(fault, what) && (!eol || strstr(fault, what) < eol), "fault of %s lacks '%s':\n%s", name,
                      what, list.out);
        ck_assert_ptr_nonnull(strstr(list.out, "with a fault"));

        _cleanup_(ctl_run_done) CtlRun json = ctl_run(&d, "--json", "list");
        ck_assert_int_eq(json.code, 0);
        json_object *doc = json_tokener_parse(json.out), *g, *f;
        ck_assert_msg(doc, "rightsizectl --json list is not JSON: %s", json.out);
        g = json_guest(doc, name);
        ck_assert_msg(g, "%s missing from rightsizectl --json list", name);
        ck_assert(json_object_object_get_ex(g, "fault", &f));
        ck_assert_msg(f && strstr(json_object_get_string(f), what), "JSON fault of %s: %s", name,
                      f ? json_object_get_string(f) : "null");
        json_object_put(doc);
}

static void check_fault(unsigned index, const char *what) {
        ck_assert_msg(daemon_fixture_alive(&d), "rightsized died");
        assert_fault_reported(index, what);
        guest_assert_sim_managed(&d, G_OK0, WAIT_SEC);
        guest_assert_sim_managed(&d, G_OK1, WAIT_SEC);
        assert_floors_kept();
        daemon_fixture_assert_rss_bounded(&d, rss_managed_kib);
        ck_assert_msg(daemon_fixture_alive(&d), "rightsized died");
}

/* ---- broken QMP ---- */

START_TEST(test_close_mid_reply) {
        check_fault(G_CLOSE, "QMP connection lost: connection closed by peer in the middle of a message");
        /* Reconnected again and again, never managed: the state says so. */
        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, "sim-2", &v), 0);
        ck_assert_str_eq(v.state, "faulty");
}
END_TEST

START_TEST(test_garbage) {
        check_fault(G_GARBAGE, "QMP connection lost: malformed JSON");
}
END_TEST

START_TEST(test_huge_reply) {
        /* 100 MiB offered; the client stops at its 1 MiB limit. */
        check_fault(G_HUGE, "message exceeds the limit");
}
END_TEST

START_TEST(test_deep_nesting) {
        check_fault(G_DEEP, "nesting too deep");
}
END_TEST

/* Each reply is just under 1 MiB of empty objects: within the byte cap, and 270 MiB once json-c has
 * built them. The connection ends at 4096 of them, the daemon stays small (check_fault's RSS
 * bound), and the guest is reconnected to, and fails the same way again. */
START_TEST(test_container_flood) {
        check_fault(G_CONTAINERS, "more than 4096 objects and arrays");
        for (uint64_t start = monotonic_sec();
             daemon_fixture_log_count(&d, "]: QMP connection lost: message has more than 4096") < 2;
             usleep(250 * 1000))
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "sim-17 was not reconnected to");
        daemon_fixture_assert_rss_bounded(&d, rss_managed_kib);
}
END_TEST

START_TEST(test_wrong_types) {
        check_fault(G_TYPES, "QMP commands failing");
        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, "sim-6", &v), 0);
        ck_assert_ptr_nonnull(strstr(v.fault, "malformed reply"));
}
END_TEST

START_TEST(test_hang) {
        check_fault(G_HANG, "timed out");
}
END_TEST

START_TEST(test_hang_from_start) {
        /* Never managed: the setup commands time out, and the fault says so. */
        check_fault(G_HANG_FROM_START, "QEMU reported no memory size: query-balloon: QMP command 'query-balloon' timed out");
        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, "sim-16", &v), 0);
        ck_assert_str_eq(v.state, "faulty");
        ck_assert_uint_eq(v.target, 0); /* nothing was ever set */
}
END_TEST

/* QEMU without a balloon device: nothing to resize with, so the guest is left alone by design,
 * listed as skipped with why, not as faulty; it begins no fault episode (the faulty alert and the
 * dashboard count the state "faulty", the faults counter episodes), and nothing is ever sent. */
START_TEST(test_no_balloon_skipped) {
        check_fault(G_NO_BALLOON, "skipped: no balloon device");
        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, "sim-18", &v), 0);
        ck_assert_str_eq(v.state, "skipped");
        ck_assert_uint_eq(v.target, 0);

        _cleanup_free_ char *metrics = NULL;
        ck_assert_int_ge(asprintf(&metrics, "%s/rightsize.prom", d.dir), 0);
        uint64_t start = monotonic_sec();
        while (!file_contains(metrics, "rightsize_guest_state{guest=\"sim-18\",state=\"skipped\"} 1\n")) {
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "sim-18 is not skipped in %s", metrics);
                usleep(250 * 1000);
        }
        ck_assert(file_contains(metrics, "rightsize_guest_state{guest=\"sim-18\",state=\"faulty\"} 0\n"));
        ck_assert(file_contains(metrics, "rightsize_guest_faults_total{guest=\"sim-18\"} 0\n"));
        /* `rightsizectl status` fails for the faulty guests of this fleet, not for this one: it is
         * counted among the skipped. */
        _cleanup_(ctl_run_done) CtlRun json = ctl_run(&d, "--json", "status");
        json_object *doc = json_tokener_parse(json.out), *skipped;
        ck_assert_msg(doc, "rightsizectl --json status is not JSON: %s", json.out);
        ck_assert(json_object_object_get_ex(doc, "guests-skipped", &skipped));
        ck_assert_int_eq(json_object_get_int(skipped), 1);
        json_object_put(doc);
}
END_TEST

START_TEST(test_event_flood) {
        check_fault(G_FLOOD, "QMP event flood");
        /* The flooded guest itself is still managed: its samples keep coming. */
        GuestView a, b;
        ck_assert_int_eq(guest_view_get(&d, "sim-8", &a), 0);
        guest_view_wait(&d, "sim-8", guest_view_updated_after, &a.updated, WAIT_SEC, &b);
        ck_assert_uint_gt(b.updated, a.updated);
}
END_TEST

/* ---- lying stats ---- */

START_TEST(test_lie_free_above_total) {
        check_fault(G_LIE_FREE, "guest stats lie: impossible values dropped (free ");
}
END_TEST

START_TEST(test_lie_counters_backwards) {
        check_fault(G_LIE_BACKWARDS, "guest stats lie: the fault counter went backwards");
}
END_TEST

START_TEST(test_lie_near_2_64) {
        check_fault(G_LIE_HUGE, "guest stats lie: impossible values dropped");
}
END_TEST

START_TEST(test_lie_future_update) {
        check_fault(G_LIE_FUTURE, "s in the future");
}
END_TEST

START_TEST(test_stale_stats) {
        check_fault(G_STALE, "guest stats stale");
}
END_TEST

START_TEST(test_random_lies) {
        /* The model's own lies, a different one each sample. */
        check_fault(G_LYING, "guest stats lie");
}
END_TEST

static bool target_is_actual(const GuestView *v, const void *data _unused_) {
        return v->target == v->actual;
}

START_TEST(test_stuck_balloon) {
        check_fault(G_STUCK, "balloon stopped");
        /* It stopped pushing: the target went back to where the balloon is. */
        GuestView v;
        guest_view_wait(&d, "sim-14", target_is_actual, NULL, WAIT_SEC, &v);
        ck_assert_uint_eq(v.target, v.actual);
}
END_TEST

/* ---- QEMU killed with -9, restarted under the same socket path ---- */

static bool connection_lost(const GuestView *v, const void *data _unused_) {
        return strstr(v->fault, "QMP connection lost") || strstr(v->fault, "cannot connect");
}

START_TEST(test_kill_9_and_restart) {
        static const char *const healthy[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        char path[PATH_MAX];
        GuestView v;

        guest_assert_sim_managed(&d, G_RESTART, WAIT_SEC);
        /* The fixture's fake-qemu is not our child here: kill it, then start our own. */
        ck_assert_int_eq(kill(d.sims[1], SIGKILL), 0);
        d.sims[1] = -1;
        snprintf(path, sizeof(path), "%s/sim-%d.qmp", d.qmp_dir, G_RESTART);
        ck_assert_int_eq(access(path, F_OK), 0); /* a dead QEMU leaves its socket behind */

        ck_assert_msg(guest_view_wait(&d, "sim-20", connection_lost, NULL, WAIT_SEC, &v), "no fault after kill -9: '%s'",
                      v.fault);
        ck_assert_str_eq(v.state, "faulty");
        guest_assert_sim_managed(&d, G_OK0, WAIT_SEC);

        daemon_fixture_start_sim(&d, 2, G_RESTART, 1, healthy);
        wait_running(G_RESTART);
        guest_assert_sim_managed(&d, G_RESTART, WAIT_SEC);
        assert_floors_kept();
        ck_assert(daemon_fixture_alive(&d));
}
END_TEST

/* ---- state files ---- */

enum { S_CORRUPT, S_TRUNCATED, S_OLDER, S_NEWER, S_FOREIGN, N_STATE_GUESTS };

static char *state_path(unsigned index) {
        char *p;
        ck_assert_int_ge(asprintf(&p, "%s/sim-%u.json", d.state_dir, index), 0);
        return p;
}

static char *state_document(const char *name, int version) {
        char *doc;
        ck_assert_int_ge(asprintf(&doc,
                                  "{\n  \"format\": \"rightsize-guest-state\",\n  \"version\": %d,\n  \"name\": \"%s\",\n"
                                  "  \"uuid\": \"\",\n  \"state\": \"hold\",\n  \"saved_at_usec\": 1700000000000000,\n"
                                  "  \"target_bytes\": 805306368,\n  \"snapshot\": { \"magic\": 1381194289, "
                                  "\"version\": 1, \"guest_max\": 2147483648, \"estimate\": 700000000 }\n}\n",
                                  version, name),
                         0);
        return doc;
}

static void setup_state_files(void) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        _cleanup_free_ char *truncated = state_document("sim-1", 1), *older = state_document("sim-2", 0),
                            *newer = state_document("sim-3", 99), *foreign = state_document("another-guest", 1);
        static const char corrupt[] = "\x7f" "ELF\x01\x02 not a state file {{{\"format\": ]";

        start_daemon_with_policy();
        _cleanup_free_ char *p0 = state_path(S_CORRUPT), *p1 = state_path(S_TRUNCATED), *p2 = state_path(S_OLDER),
                            *p3 = state_path(S_NEWER), *p4 = state_path(S_FOREIGN);
        test_write_file(p0, corrupt);
        truncated[strlen(truncated) / 2] = '\0';
        test_write_file(p1, truncated);
        test_write_file(p2, older);
        test_write_file(p3, newer);
        test_write_file(p4, foreign);

        daemon_fixture_start_sim(&d, 0, 0, N_STATE_GUESTS, sim);
        daemon_fixture_start(&d);
}

/* Discarded with a log line naming the file and why; the guest is then managed from scratch and
 * its file rewritten in the current format. */
static void check_state_discarded(unsigned index, const char *why) {
        _cleanup_free_ char *path = state_path(index), *line = NULL;

        ck_assert_int_ge(asprintf(&line, "Discarding state file %s: %s", path, why), 0);
        ck_assert_msg(daemon_fixture_wait_log(&d, line, WAIT_SEC), "no log line '%s'", line);
        wait_running(index);
        guest_assert_sim_managed(&d, index, WAIT_SEC);
        ck_assert(daemon_fixture_alive(&d));
        _cleanup_free_ char *log = daemon_fixture_log(&d);
        char name[32], prefix[64];
        sim_name(index, name, sizeof(name));
        snprintf(prefix, sizeof(prefix), "%s [", name);
        for (const char *p = log; (p = strstr(p, prefix)); p++) {
                const char *eol = strchrnul(p, '\n');
                ck_assert_msg(!memmem(p, (size_t) (eol - p), "Resumed from the state file", 27),
                              "%s resumed from a discarded file", name);
        }

        /* Rewritten: a document of this version, for this guest. */
        for (uint64_t start = monotonic_sec();; usleep(250 * 1000)) {
                json_object *doc = json_object_from_file(path), *v;
                int version = doc && json_object_object_get_ex(doc, "version", &v) ? json_object_get_int(v) : -1;
                bool ours = doc && json_object_object_get_ex(doc, "name", &v) &&
                            strcmp(json_object_get_string(v), name) == 0;
                if (doc)
                        json_object_put(doc);
                if (version == 1 && ours)
                        break;
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "%s was never rewritten", path);
        }
}

START_TEST(test_state_corrupt) {
        check_state_discarded(S_CORRUPT, "file is not valid JSON");
}
END_TEST

START_TEST(test_state_truncated) {
        check_state_discarded(S_TRUNCATED, "file is truncated");
}
END_TEST

START_TEST(test_state_older_version) {
        check_state_discarded(S_OLDER, "version is older than any this rightsized can read");
}
END_TEST

START_TEST(test_state_newer_version) {
        check_state_discarded(S_NEWER, "written by a newer rightsized");
}
END_TEST

START_TEST(test_state_other_guest) {
        check_state_discarded(S_FOREIGN, "it belongs to another guest");
}
END_TEST

/* ---- a full disk under the state directory ---- */

START_TEST(test_disk_full) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        _cleanup_free_ char *filler = NULL, *path = NULL;
        char block[4096] = {};
        int r, fd;

        start_daemon_with_policy();
        /* A private mount namespace (this test runs in its own process): the daemon we start
         * inherits it, the host never sees the mount. */
        r = test_mount_private_tmpfs(d.state_dir, 64 * 1024);
        if (r < 0) {
                check_cannot_set_up("test_disk_full", "no private tmpfs on %s: %s", d.state_dir, strerror(-r));
                teardown_all();
                return;
        }
        ck_assert_int_ge(asprintf(&filler, "%s/filler", d.state_dir), 0);
        fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        while (write(fd, block, sizeof(block)) == (ssize_t) sizeof(block))
                ;
        ck_assert_int_eq(errno, ENOSPC);
        ck_assert_int_eq(close(fd), 0);

        daemon_fixture_start_sim(&d, 0, 0, 2, sim);
        daemon_fixture_start(&d);
        ck_assert_msg(daemon_fixture_wait_log(&d, "Failed to save the state file", WAIT_SEC),
                      "the daemon never reported the full disk");
        guest_assert_sim_managed(&d, 0, WAIT_SEC);
        guest_assert_sim_managed(&d, 1, WAIT_SEC);
        ck_assert(daemon_fixture_alive(&d));

        /* Nothing half-written is left behind: only the filler. */
        DIR *dir = opendir(d.state_dir);
        ck_assert_ptr_nonnull(dir);
        for (struct dirent *de; (de = readdir(dir));)
                ck_assert_msg(de->d_name[0] == '.' || strcmp(de->d_name, "filler") == 0, "left behind: %s", de->d_name);
        closedir(dir);

        /* Space again: the state is saved. */
        ck_assert_int_eq(unlink(filler), 0);
        path = state_path(0);
        for (uint64_t start = monotonic_sec();; usleep(250 * 1000)) {
                json_object *doc = json_object_from_file(path);
                if (doc) {
                        json_object_put(doc);
                        break;
                }
                ck_assert_msg(monotonic_sec() < start + 90, "state never saved after the disk had room again");
        }
        ck_assert(daemon_fixture_alive(&d));
        /* It saves its state as it stops (the disk has room now) and exits cleanly. */
        ck_assert_int_eq(daemon_fixture_stop(&d, SIGTERM), 0);
        (void) umount2(d.state_dir, MNT_DETACH);
        teardown_all();
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-faults");

        check_add_case_once(s, "fleet", setup_fleet, teardown_all, 600,
                            CHECK_TESTS(test_close_mid_reply, test_garbage, test_huge_reply, test_deep_nesting,
                                        test_container_flood, test_wrong_types, test_hang, test_hang_from_start, test_no_balloon_skipped,
                                        test_event_flood,
                                        test_lie_free_above_total, test_lie_counters_backwards, test_lie_near_2_64,
                                        test_lie_future_update, test_stale_stats, test_random_lies, test_stuck_balloon,
                                        test_kill_9_and_restart));
        check_add_case_once(s, "state-file", setup_state_files, teardown_all, 400,
                            CHECK_TESTS(test_state_corrupt, test_state_truncated, test_state_older_version,
                                        test_state_newer_version, test_state_other_guest));
        check_add_case(s, "disk-full", NULL, NULL, 400, CHECK_TESTS(test_disk_full));
        return check_run_suite(s);
}
