/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What one guest's identity and its state file are to the daemon, on simulated guests
 * (tests/sim/fake-qemu):
 *  - two guests of one name (two QMP socket directories) do not share a state file, metrics and a
 *    D-Bus record: the second is refused, said in the log and by rightsizectl status (exit 6), and
 *    taken on once the first is gone;
 *  - the temporary files of a save a crash interrupted are removed at start; the state files of
 *    guests gone longer than state-remove-after are removed (at a reload here), a present
 *    guest's never;
 *  - a state file older than state-stale-after is not trusted for sizes: the guest goes back to
 *    its take-over size and is learned anew, where a recent one resumes its hold;
 *  - a libvirt domain (libvirt's test driver, in the daemon's process: no QEMU) has its UUID in
 *    its state file, and renamed, it takes its file with it (moved to the new name, one line);
 *  - saves are coalesced: a burst of SetGuest calls is a write or two (counted by inotify as
 *    renames onto the file), not one each, and the last change is in the file; a change still
 *    waiting for its save when the daemon stops is written at the stop.
 * Waits are on state with generous deadlines. */

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-call.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"

#define WAIT_SEC 120
#define GUEST "sim-0"
#define BOOT (2048 * MIB) /* the model's guest */
#define NEAR (16 * MIB)
#define DAY_SEC (24 * 3600)

static BusFixture bus;
static DaemonFixture d;

static void setup(void) {
        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

static unsigned listed_named(const char *name) {
        GuestView v[16];
        int n = guest_view_list(&d, v, ARRAY_SIZE(v));
        unsigned count = 0;

        ck_assert_int_ge(n, 0);
        for (int i = 0; i < n && i < (int) ARRAY_SIZE(v); i++)
                count += strcmp(v[i].name, name) == 0;
        return count;
}

START_TEST(test_second_guest_of_a_name_is_refused_until_the_name_is_free) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        _cleanup_free_ char *other_dir = NULL, *globs = NULL, *refusal = NULL, *taken_on = NULL;

        ck_assert_int_ge(asprintf(&other_dir, "%s/qmp-other", d.dir), 0);
        ck_assert_int_eq(mkdir(other_dir, 0755), 0);
        ck_assert_int_ge(asprintf(&globs, "%s/*.qmp %s/*.qmp", d.qmp_dir, other_dir), 0);
        daemon_fixture_set_config(&d, "qmp-sockets", globs);
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);

        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
        daemon_fixture_start_sim_in(&d, 1, other_dir, 0, 1, sim);
        ck_assert_int_ge(asprintf(&refusal, "Refusing QMP socket %s/" GUEST ".qmp", other_dir), 0);
        ck_assert_msg(daemon_fixture_wait_log(&d, refusal, WAIT_SEC), "no line refusing the second %s", GUEST);

        /* One record, one state file, and the operator is told. */
        guest_assert_managed(&d, GUEST, WAIT_SEC);
        ck_assert_uint_eq(listed_named(GUEST), 1);
        _cleanup_(ctl_run_done) CtlRun status = ctl_run(&d, "status");
        ck_assert_msg(status.code == 6, "status: exit %d with a refused guest\n%s", status.code, status.out);
        ck_assert_msg(strstr(status.out, "Refused") && strstr(status.out, other_dir),
                      "status does not name the refused guest:\n%s", status.out);
        _cleanup_(ctl_run_done) CtlRun json = ctl_run(&d, "status", "--json");
        ck_assert_msg(strstr(json.out, "\"guests-refused\"") && strstr(json.out, other_dir),
                      "status --json does not name the refused guest:\n%s", json.out);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, refusal), 1);

        /* The first goes: the second gets the name and is managed; nothing is refused any more. */
        daemon_fixture_kill_sim(&d, 0, SIGTERM);
        ck_assert_int_ge(asprintf(&taken_on, "taking on QMP socket %s/" GUEST ".qmp", other_dir), 0);
        ck_assert_msg(daemon_fixture_wait_log(&d, taken_on, WAIT_SEC), "the refused guest was not taken on");
        ck_assert_msg(guest_view_wait_running(&d, GUEST, WAIT_SEC), "the second guest is not managed");
        guest_assert_managed(&d, GUEST, WAIT_SEC);
        ck_assert_uint_eq(listed_named(GUEST), 1);
        _cleanup_(ctl_run_done) CtlRun after = ctl_run(&d, "status");
        ck_assert_msg(after.code == 0 && !strstr(after.out, "Refused"), "status: exit %d\n%s", after.code, after.out);
}
END_TEST

static char *state_path(const char *file) {
        char *path = NULL;
        ck_assert_int_ge(asprintf(&path, "%s/%s", d.state_dir, file), 0);
        return path;
}

static void write_aged(const char *file, unsigned age_days) {
        _cleanup_free_ char *path = state_path(file);
        test_write_file(path, "{}\n");
        time_t then = time(NULL) - (time_t) age_days * DAY_SEC;
        struct timespec ts[2] = { { .tv_sec = then }, { .tv_sec = then } };
        ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static bool state_exists(const char *file) {
        _cleanup_free_ char *path = state_path(file);
        return access(path, F_OK) == 0;
}

START_TEST(test_leftovers_removed_at_start_and_files_of_guests_long_gone_aged_out) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);

        /* A crash in the middle of saves, and guests that went long ago. */
        write_aged("." GUEST ".json.a1B2c3", 0);
        write_aged(".gone.json.XyZ123", 5);
        write_aged("gone.json", 100);
        write_aged("recent.json", 10);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
        ck_assert_msg(!state_exists("." GUEST ".json.a1B2c3") && !state_exists(".gone.json.XyZ123"),
                      "the leftovers of interrupted saves are still there after the start");
        ck_assert_msg(daemon_fixture_wait_log(&d, "left by saves a crash interrupted", WAIT_SEC),
                      "the removal of leftovers is not logged");

        /* The present guest's file, however old, stays; the reload looks at once. */
        guest_assert_managed(&d, GUEST, WAIT_SEC);
        write_aged(GUEST ".json", 100);
        _cleanup_(ctl_run_done) CtlRun reload = ctl_run(&d, "reload");
        ck_assert_msg(reload.code == 0, "reload: %d %s", reload.code, reload.err);
        ck_assert_msg(daemon_fixture_wait_log(&d, "gone.json: last written 100 days ago", WAIT_SEC),
                      "the state file of a guest gone 100 days was not removed");
        ck_assert(!state_exists("gone.json"));
        ck_assert_msg(state_exists(GUEST ".json"), "the state file of a guest present was removed");
        ck_assert(state_exists("recent.json"));

        /* A shorter limit, set by the operator, reaches the recent one; 0 removes nothing. */
        daemon_fixture_replace_config_line(&d, "shutdown-action = keep\n",
                                           "shutdown-action = keep\nstate-remove-after = 7d\n");
        _cleanup_(ctl_run_done) CtlRun reload7 = ctl_run(&d, "reload");
        ck_assert_msg(reload7.code == 0, "reload: %d %s", reload7.code, reload7.err);
        ck_assert_msg(daemon_fixture_wait_log(&d, "recent.json: last written 10 days ago", WAIT_SEC),
                      "state-remove-after = 7d did not remove a file 10 days old");
        ck_assert(state_exists(GUEST ".json"));
}
END_TEST

/* Sets the state file's saved_at_usec to `age_days` ago. */
static void age_state_file(unsigned age_days) {
        _cleanup_free_ char *path = state_path(GUEST ".json"), *text = test_read_file(path), *out = NULL;
        ck_assert_ptr_nonnull(text);
        char *at = strstr(text, "\"saved_at_usec\"");
        ck_assert_msg(at, "no saved_at_usec in %s", text);
        at = strchr(at, ':') + 1;
        char *end = at;
        while (*end == ' ' || (*end >= '0' && *end <= '9'))
                end++;
        uint64_t then = ((uint64_t) time(NULL) - (uint64_t) age_days * DAY_SEC) * 1000000;
        ck_assert_int_ge(asprintf(&out, "%.*s %" PRIu64 "%s", (int) (at - text), text, then, end), 0);
        test_write_file(path, out);
}

static bool holding_below_boot(const GuestView *v, const void *data _unused_) {
        return strcmp(v->state, "hold") == 0 && v->actual > 0 && v->actual + 256 * MIB <= BOOT;
}

static bool learning_at_boot(const GuestView *v, const void *data _unused_) {
        return strcmp(v->state, "learn") == 0 && v->actual + NEAR >= BOOT;
}

static GuestView wait_view(GuestViewPredicate ok, const char *what) {
        GuestView v;
        ck_assert_msg(guest_view_wait(&d, GUEST, ok, NULL, WAIT_SEC, &v),
                      "%s: not within %d s (state %s, target %" PRIu64 ", actual %" PRIu64 ", reason '%s')", what,
                      WAIT_SEC, v.state, v.target, v.actual, v.reason);
        return v;
}

START_TEST(test_stale_state_file_not_trusted_for_sizes) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        /* Probes at once and holds for an hour at the floor, above the model's working set. */
        daemon_fixture_write_policy(&d, "hold", "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 768M\n"
                                                "floor-percent = 0\nhold-time = 1h\n");
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
        wait_view(holding_below_boot, "holding below its boot size");

        /* A recent file resumes the hold. */
        (void) daemon_fixture_stop(&d, SIGTERM);
        age_state_file(6);
        daemon_fixture_start(&d);
        wait_view(holding_below_boot, "holding again after a restart with a 6-day-old file");
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "more than state-stale-after"), 0);

        /* An older one: its sizes are not trusted, the guest goes back to where it was taken over. */
        (void) daemon_fixture_stop(&d, SIGTERM);
        age_state_file(30);
        daemon_fixture_start(&d);
        wait_view(learning_at_boot, "back at its take-over size, learning");
        ck_assert_msg(daemon_fixture_wait_log(&d, "more than state-stale-after", WAIT_SEC),
                      "no line says why the state file was not trusted");
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "more than state-stale-after"), 1);
}
END_TEST

/* ---- coalesced saves ---- */

static bool floor_is(const GuestView *v, const void *data) {
        return v->floor == *(const uint64_t *) data;
}

/* An inotify watch on the state directory: each save of a guest creates a temporary file
 * (.NAME.json.XXXXXX) and renames it onto NAME.json. The renames alone would not do: the kernel
 * merges an event into the unread one before it when both are the same (mask and name). */
static int watch_saves(void) {
        int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_ge(inotify_add_watch(fd, d.state_dir, IN_CREATE | IN_MOVED_TO), 0);
        return fd;
}

/* Saves of `file` seen on the watch so far, as temporary files created for it (the events read
 * are consumed). */
static unsigned count_saves(int fd, const char *file) {
        _Alignas(struct inotify_event) char buf[4096];
        _cleanup_free_ char *prefix = NULL;
        unsigned n = 0;
        ssize_t len;

        ck_assert_int_ge(asprintf(&prefix, ".%s.", file), 0);
        while ((len = read(fd, buf, sizeof(buf))) > 0)
                for (char *p = buf; p < buf + len;) {
                        const struct inotify_event *e = (const struct inotify_event *) p;
                        ck_assert_msg(!(e->mask & IN_Q_OVERFLOW), "the inotify queue overflowed");
                        if ((e->mask & IN_CREATE) && e->len > 0 && strncmp(e->name, prefix, strlen(prefix)) == 0)
                                n++;
                        p += sizeof(*e) + e->len;
                }
        ck_assert_msg(len < 0 && errno == EAGAIN, "inotify read: %zd %m", len);
        return n;
}

/* Whether the guest's state file says override_floor is `bytes` (json-c's spacing aside). */
static bool state_has_override_floor(uint64_t bytes) {
        _cleanup_free_ char *path = state_path(GUEST ".json"), *text = test_read_file(path), *want = NULL;
        if (!text)
                return false;
        char *w = text;
        for (char *r = text; *r; r++)
                if (*r != ' ' && *r != '\n' && *r != '\t')
                        *w++ = *r;
        *w = '\0';
        ck_assert_int_ge(asprintf(&want, "\"override_floor\":%" PRIu64 ",", bytes), 0);
        return strstr(text, want) != NULL;
}

static void set_floor_mib(unsigned mib) {
        char value[32];
        snprintf(value, sizeof(value), "%uM", mib);
        CallResult r = bus_call_as(&bus, 0, 0, "SetGuest", 3, GUEST, "floor", value);
        bus_call_assert_ok(&r, "SetGuest floor");
}

/* Before, each SetGuest wrote the file (two fsyncs on the event loop), as often as a caller
 * liked: now the saves of one guest are at least 5 s apart. */
START_TEST(test_burst_of_changes_saved_coalesced) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        enum { CALLS = 40, FIRST_MIB = 700, COALESCE_SEC = 5 };
        PendingCall calls[CALLS];

        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
        guest_assert_managed(&d, GUEST, WAIT_SEC);
        ck_assert_msg(state_exists(GUEST ".json"), "no state file for a managed guest");

        int fd = watch_saves();
        uint64_t start = monotonic_sec();
        for (unsigned i = 0; i < CALLS; i++) {
                char value[32];
                snprintf(value, sizeof(value), "%uM", FIRST_MIB + i);
                calls[i] = bus_call_start(&bus, 0, 0, "SetGuest", 3, GUEST, "floor", value);
        }
        for (unsigned i = 0; i < CALLS; i++) {
                CallResult r = bus_call_finish(&calls[i]);
                bus_call_assert_ok(&r, "SetGuest floor in the burst");
        }
        /* The burst's calls may be served in any order: a last one says which change is last. */
        set_floor_mib(FIRST_MIB + CALLS);
        uint64_t deadline = monotonic_sec() + WAIT_SEC;
        while (!state_has_override_floor((uint64_t) (FIRST_MIB + CALLS) * MIB)) {
                ck_assert_msg(monotonic_sec() < deadline, "the last change is not in the state file after %d s",
                              WAIT_SEC);
                usleep(100 * 1000);
        }
        unsigned saves = count_saves(fd, GUEST ".json");
        uint64_t elapsed = monotonic_sec() - start;
        /* One at once, then one a window at most (the guest's own changes share them). */
        ck_assert_msg(saves >= 1 && saves <= 2 + elapsed / COALESCE_SEC,
                      "%u saves for %d changes in %" PRIu64 " s", saves, CALLS + 1, elapsed);
        ck_assert_msg(saves < CALLS / 2, "%u saves for %d changes in %" PRIu64 " s", saves, CALLS + 1, elapsed);
        (void) close(fd);
}
END_TEST

/* A change whose save waits for the window is written when the daemon stops. */
START_TEST(test_pending_save_written_at_stop) {
        static const char *const sim[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
        daemon_fixture_start_sims(&d, 1, sim, WAIT_SEC);
        guest_assert_managed(&d, GUEST, WAIT_SEC);

        set_floor_mib(800); /* written at once, or nearly: it opens a window */
        set_floor_mib(900); /* waits for the window's end */
        ck_assert_int_eq(daemon_fixture_stop(&d, SIGTERM), 0);
        ck_assert_msg(state_has_override_floor(900 * MIB), "the change made just before the stop is not in the file");

        /* And it is what a restart resumes. */
        daemon_fixture_start(&d);
        GuestView v = { 0 };
        ck_assert_msg(guest_view_wait(&d, GUEST, floor_is, &(uint64_t) { 900 * MIB }, WAIT_SEC, &v),
                      "after a restart the floor is %" PRIu64 ", not 900 MiB", v.floor);
}
END_TEST

/* ---- a renamed libvirt domain ---- */

#define DOMAIN_UUID "6695eb01-f6a4-8304-79aa-97f2502e193f"

/* libvirt's test driver, from a file: its domains run in the daemon's own process. */
static char *write_test_driver(const char *domain_name) {
        _cleanup_free_ char *xml = NULL;
        char *path = NULL;
        ck_assert_int_ge(asprintf(&path, "%s/libvirt-test.xml", d.dir), 0);
        ck_assert_int_ge(asprintf(&xml,
                                  "<node>\n"
                                  "  <domain type='test'>\n"
                                  "    <name>%s</name>\n"
                                  "    <uuid>" DOMAIN_UUID "</uuid>\n"
                                  "    <memory unit='MiB'>2048</memory>\n"
                                  "    <currentMemory unit='MiB'>2048</currentMemory>\n"
                                  "    <vcpu>1</vcpu>\n"
                                  "    <os><type>hvm</type></os>\n"
                                  "    <devices><memballoon model='virtio'/></devices>\n"
                                  "  </domain>\n"
                                  "</node>\n",
                                  domain_name),
                         0);
        test_write_file(path, xml);
        return path;
}

static void use_test_driver(const char *domain_name) {
        _cleanup_free_ char *path = write_test_driver(domain_name), *libvirt = NULL;
        ck_assert_int_ge(asprintf(&libvirt, "[libvirt]\nenabled = yes\nuri = test://%s\nmanage-all = yes\n", path), 0);
        _cleanup_free_ char *text = test_read_file(d.config_path);
        ck_assert_ptr_nonnull(text);
        if (strstr(text, "enabled = no\n"))
                daemon_fixture_replace_config_line(&d, "[libvirt]\nenabled = no\n", libvirt);
}

static bool state_has_uuid(const char *file) {
        _cleanup_free_ char *path = state_path(file), *text = test_read_file(path);
        return text && strstr(text, "\"" DOMAIN_UUID "\"");
}

static void wait_state_file(const char *file) {
        uint64_t deadline = monotonic_sec() + WAIT_SEC;
        while (!state_has_uuid(file)) {
                ck_assert_msg(monotonic_sec() < deadline, "no state file %s with the domain's UUID within %d s", file,
                              WAIT_SEC);
                usleep(200 * 1000);
        }
}

START_TEST(test_renamed_domain_takes_its_state_file) {
        daemon_fixture_write_policy(&d, "pinned", "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 1536M\n"
                                                  "floor-percent = 0\n");
        use_test_driver("web-old");
        daemon_fixture_start(&d);
        ck_assert_msg(guest_view_wait_running(&d, "web-old", WAIT_SEC), "the test driver's domain is not managed");
        /* The operator's floor, to find again under the new name. */
        CallResult set = bus_call_as(&bus, 0, 0, "SetGuest", 3, "web-old", "floor", "1600M");
        bus_call_assert_ok(&set, "SetGuest floor on web-old");
        ck_assert_int_eq(daemon_fixture_stop(&d, SIGTERM), 0);
        ck_assert_msg(state_has_uuid("web-old.json"), "the state file does not record the domain's UUID");

        /* Renamed while stopped (virsh domrename): same UUID, new name. */
        _cleanup_free_ char *unused = write_test_driver("web-new");
        daemon_fixture_start(&d);
        ck_assert_msg(guest_view_wait_running(&d, "web-new", WAIT_SEC), "the renamed domain is not managed");
        GuestView v = { 0 };
        ck_assert_msg(guest_view_wait(&d, "web-new", floor_is, &(uint64_t) { 1600 * MIB }, WAIT_SEC, &v),
                      "the renamed domain's floor is %" PRIu64 ", not the 1600 MiB set under its old name", v.floor);
        wait_state_file("web-new.json");
        ck_assert_msg(!state_exists("web-old.json"), "the old name's state file is still there");
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "Renamed from 'web-old'"), 1);

        /* Once moved, the file is found by its name: no second move, no second line. */
        ck_assert_int_eq(daemon_fixture_stop(&d, SIGTERM), 0);
        daemon_fixture_start(&d);
        ck_assert_msg(guest_view_wait_running(&d, "web-new", WAIT_SEC), "web-new is not managed after a restart");
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "Renamed from 'web-old'"), 1);
}
END_TEST

int main(void) {
        return check_run_case("daemon-state-dir", "state-dir", setup, teardown, 600,
                              CHECK_TESTS(test_second_guest_of_a_name_is_refused_until_the_name_is_free,
                                          test_leftovers_removed_at_start_and_files_of_guests_long_gone_aged_out,
                                          test_stale_state_file_not_trusted_for_sizes,
                                          test_burst_of_changes_saved_coalesced, test_pending_save_written_at_stop,
                                          test_renamed_domain_takes_its_state_file));
}
