/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Real unix sockets in a temporary directory, a real sd-event loop. The loop runs until the
 * expected callbacks arrived or an iteration bound is hit; nothing here depends on timing. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/discovery.h"
#include "daemon/log.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define MAX_EVENTS 64
#define LOOP_ITERATIONS_MAX 200
#define LOOP_WAIT_USEC (100 * USEC_PER_MSEC)

typedef struct Recorded {
        bool added;
        char path[256];
        char name[128];
} Recorded;

static Recorded events[MAX_EVENTS];
static size_t n_events;
static char *dir;
static sd_event *event;

static void record(bool added, const char *path, const char *name) {
        ck_assert_uint_lt(n_events, MAX_EVENTS);
        events[n_events].added = added;
        snprintf(events[n_events].path, sizeof(events[n_events].path), "%s", path);
        snprintf(events[n_events].name, sizeof(events[n_events].name), "%s", name);
        n_events++;
}

static void on_added(Discovery *d, const char *path, const char *name, void *userdata) {
        ck_assert_ptr_eq(userdata, &events);
        record(true, path, name);
}

static void on_removed(Discovery *d, const char *path, const char *name, void *userdata) {
        ck_assert_ptr_eq(userdata, &events);
        record(false, path, name);
}

/* Runs the loop until n_events reaches `want`, then a few more quiet iterations so that a
 * spurious extra callback would be caught too. */
static void run_until(size_t want) {
        for (unsigned i = 0; i < LOOP_ITERATIONS_MAX && n_events < want; i++)
                ck_assert_int_ge(sd_event_run(event, LOOP_WAIT_USEC), 0);
        ck_assert_msg(n_events >= want, "only %zu of %zu callbacks arrived", n_events, want);
        for (unsigned i = 0; i < 3; i++)
                ck_assert_int_ge(sd_event_run(event, 0), 0);
}

static bool has_event(bool added, const char *name, const char *path_suffix) {
        for (size_t i = 0; i < n_events; i++) {
                size_t pl = strlen(events[i].path), sl = strlen(path_suffix);
                if (events[i].added == added && strcmp(events[i].name, name) == 0 && pl >= sl &&
                    strcmp(events[i].path + pl - sl, path_suffix) == 0)
                        return true;
        }
        return false;
}

static char *at(const char *rel) {
        char *p;
        ck_assert_int_ge(asprintf(&p, "%s/%s", dir, rel), 0);
        return p;
}

static void make_socket(const char *rel) {
        _cleanup_(freep) char *p = at(rel);
        close(test_make_unix_socket(p)); /* the socket file outlives the fd */
}

static void remove_file(const char *rel) {
        _cleanup_(freep) char *p = at(rel);
        ck_assert_int_eq(unlink(p), 0);
}

static void make_dir(const char *rel) {
        _cleanup_(freep) char *p = at(rel);
        ck_assert_int_eq(mkdir(p, 0755), 0);
}

static char **globs_of(const char *a, const char *b) {
        static char *l[3];
        static char *owned[2];

        free(owned[0]);
        free(owned[1]);
        owned[0] = a ? at(a) : NULL;
        owned[1] = b ? at(b) : NULL;
        l[0] = owned[0];
        l[1] = owned[0] ? owned[1] : NULL;
        l[2] = NULL;
        return l;
}

static void setup(void) {
        dir = test_mkdtemp();
        n_events = 0;
        ck_assert_int_ge(sd_event_new(&event), 0);
        log_set_max_level(LOG_WARNING);
}

static void teardown(void) {
        globs_of(NULL, NULL);
        event = sd_event_unref(event);
        test_rm_rf(dir);
        free(dir);
}

START_TEST(test_initial_scan) {
        _cleanup_(discovery_freep) Discovery *d = NULL;
        _cleanup_(freep) char *regular = at("notasocket.qmp");

        make_socket("web1.qmp");
        make_socket("db.qmp");
        make_socket("other.sock");          /* socket, but does not match */
        make_socket(".hidden.qmp");         /* '*' does not match a leading dot */
        test_write_file(regular, "x");      /* matches, but is no socket */
        make_dir("adir.qmp");               /* matches, but is a directory */

        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        ck_assert_int_eq(discovery_set_globs(d, globs_of("*.qmp", NULL)), 0);

        /* The first scan reports synchronously. */
        ck_assert_uint_eq(n_events, 2);
        ck_assert(has_event(true, "web1", "/web1.qmp"));
        ck_assert(has_event(true, "db", "/db.qmp"));
        ck_assert_uint_eq(discovery_count(d), 2);
        ck_assert_ptr_nonnull(strstr(events[0].path, dir));
}
END_TEST

START_TEST(test_sockets_come_and_go) {
        _cleanup_(discovery_freep) Discovery *d = NULL;
        _cleanup_(freep) char *regular = at("late-file.qmp");

        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        ck_assert_int_eq(discovery_set_globs(d, globs_of("*.qmp", NULL)), 0);
        ck_assert_uint_eq(n_events, 0);

        make_socket("vm-a.qmp");
        make_socket("vm-b.qmp");
        make_socket("ignored.txt");
        test_write_file(regular, "not a socket");
        run_until(2);
        ck_assert_uint_eq(n_events, 2);
        ck_assert(has_event(true, "vm-a", "/vm-a.qmp"));
        ck_assert(has_event(true, "vm-b", "/vm-b.qmp"));

        remove_file("vm-a.qmp");
        remove_file("late-file.qmp"); /* never known: no callback */
        run_until(3);
        ck_assert_uint_eq(n_events, 3);
        ck_assert(has_event(false, "vm-a", "/vm-a.qmp"));
        ck_assert_uint_eq(discovery_count(d), 1);

        /* A QEMU restarting under the same path is a new guest: removed, then added. */
        remove_file("vm-b.qmp");
        make_socket("vm-b.qmp");
        run_until(5);
        ck_assert_uint_eq(n_events, 5);
        ck_assert(!events[3].added);
        ck_assert_str_eq(events[3].name, "vm-b");
        ck_assert(events[4].added);
        ck_assert_str_eq(events[4].name, "vm-b");
}
END_TEST

START_TEST(test_rename_in_and_out) {
        _cleanup_(discovery_freep) Discovery *d = NULL;
        _cleanup_(freep) char *from = NULL, *to = NULL, *away = NULL;

        make_dir("run");
        make_dir("elsewhere");
        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        ck_assert_int_eq(discovery_set_globs(d, globs_of("run/*.qmp", NULL)), 0);

        /* Created under a name that does not match, then renamed into place. */
        make_socket("run/tmp-socket");
        from = at("run/tmp-socket");
        to = at("run/moved.qmp");
        ck_assert_int_eq(rename(from, to), 0);
        run_until(1);
        ck_assert_uint_eq(n_events, 1);
        ck_assert(has_event(true, "moved", "/run/moved.qmp"));

        away = at("elsewhere/moved.qmp");
        ck_assert_int_eq(rename(to, away), 0);
        run_until(2);
        ck_assert_uint_eq(n_events, 2);
        ck_assert(has_event(false, "moved", "/run/moved.qmp"));
}
END_TEST

START_TEST(test_directory_created_later) {
        _cleanup_(discovery_freep) Discovery *d = NULL;

        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        /* Two levels do not exist yet. */
        ck_assert_int_eq(discovery_set_globs(d, globs_of("a/b/*.qmp", NULL)), 0);
        ck_assert_uint_eq(n_events, 0);

        make_dir("a");
        for (unsigned i = 0; i < 5; i++)
                ck_assert_int_ge(sd_event_run(event, 0), 0);
        make_dir("a/b");
        for (unsigned i = 0; i < 5; i++)
                ck_assert_int_ge(sd_event_run(event, 0), 0);
        make_socket("a/b/late.qmp");
        run_until(1);
        ck_assert_uint_eq(n_events, 1);
        ck_assert(has_event(true, "late", "/a/b/late.qmp"));
}
END_TEST

START_TEST(test_directory_created_with_socket_inside) {
        _cleanup_(discovery_freep) Discovery *d = NULL;
        _cleanup_(freep) char *staging = NULL, *final = NULL;

        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        ck_assert_int_eq(discovery_set_globs(d, globs_of("vms/*.qmp", NULL)), 0);

        /* The directory appears already holding a socket (renamed into place): the scan after
         * the watch is set up must find it, since no create event will come for it. */
        make_dir("staging");
        make_socket("staging/early.qmp");
        staging = at("staging");
        final = at("vms");
        ck_assert_int_eq(rename(staging, final), 0);
        run_until(1);
        ck_assert(has_event(true, "early", "/vms/early.qmp"));
}
END_TEST

START_TEST(test_directory_removed_and_recreated) {
        _cleanup_(discovery_freep) Discovery *d = NULL;
        _cleanup_(freep) char *sub = NULL;

        make_dir("q");
        make_socket("q/one.qmp");
        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        ck_assert_int_eq(discovery_set_globs(d, globs_of("q/*.qmp", NULL)), 0);
        ck_assert_uint_eq(n_events, 1);

        remove_file("q/one.qmp");
        sub = at("q");
        ck_assert_int_eq(rmdir(sub), 0);
        run_until(2);
        ck_assert(has_event(false, "one", "/q/one.qmp"));

        /* Watching falls back to the parent, and picks the directory up again. */
        make_dir("q");
        for (unsigned i = 0; i < 5; i++)
                ck_assert_int_ge(sd_event_run(event, 0), 0);
        make_socket("q/two.qmp");
        run_until(3);
        ck_assert(has_event(true, "two", "/q/two.qmp"));
        ck_assert_uint_eq(discovery_count(d), 1);
}
END_TEST

START_TEST(test_reload_changes_globs) {
        _cleanup_(discovery_freep) Discovery *d = NULL;

        make_dir("x");
        make_dir("y");
        make_socket("x/keep.qmp");
        make_socket("x/drop.sock");
        make_socket("y/new.qmp");

        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        ck_assert_int_eq(discovery_set_globs(d, globs_of("x/*.qmp", "x/*.sock")), 0);
        ck_assert_uint_eq(n_events, 2);
        ck_assert(has_event(true, "keep", "/x/keep.qmp"));
        ck_assert(has_event(true, "drop.sock", "/x/drop.sock")); /* only ".qmp" is stripped */

        /* New globs: the .sock glob is gone, y/ is new; keep.qmp must not be re-reported. */
        ck_assert_int_eq(discovery_set_globs(d, globs_of("x/*.qmp", "y/*.qmp")), 0);
        ck_assert_uint_eq(n_events, 4);
        ck_assert(has_event(false, "drop.sock", "/x/drop.sock"));
        ck_assert(has_event(true, "new", "/y/new.qmp"));
        ck_assert_uint_eq(discovery_count(d), 2);

        /* The dropped directory is no longer watched for new sockets ... */
        make_socket("x/another.sock");
        /* ... while the kept one is. */
        make_socket("x/fresh.qmp");
        run_until(5);
        ck_assert_uint_eq(n_events, 5);
        ck_assert(has_event(true, "fresh", "/x/fresh.qmp"));

        ck_assert_int_eq(discovery_set_globs(d, NULL), 0);
        ck_assert_uint_eq(discovery_count(d), 0);
        ck_assert_uint_eq(n_events, 8);
}
END_TEST

START_TEST(test_hostile_names) {
        _cleanup_(discovery_freep) Discovery *d = NULL;

        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        ck_assert_int_eq(discovery_set_globs(d, globs_of("*", NULL)), 0);

        make_socket("line\nbreak.qmp");
        make_socket("x.qmp.qmp");
        make_socket("q.qmp"); /* shortest name with the suffix */
        run_until(3);
        ck_assert(has_event(true, "line\nbreak", "/line\nbreak.qmp"));
        ck_assert(has_event(true, "x.qmp", "/x.qmp.qmp"));
        ck_assert(has_event(true, "q", "/q.qmp"));

        ck_assert_int_eq(discovery_set_globs(d, (char *[]){ (char *) "relative/*.qmp", NULL }), -EINVAL);
}
END_TEST

START_TEST(test_many_sockets) {
        _cleanup_(discovery_freep) Discovery *d = NULL;
        char name[32];

        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        ck_assert_int_eq(discovery_set_globs(d, globs_of("*.qmp", NULL)), 0);
        for (unsigned i = 0; i < 40; i++) {
                snprintf(name, sizeof(name), "g%02u.qmp", i);
                make_socket(name);
        }
        run_until(40);
        ck_assert_uint_eq(n_events, 40);
        ck_assert_uint_eq(discovery_count(d), 40);
        for (unsigned i = 0; i < 40; i++) {
                snprintf(name, sizeof(name), "g%02u", i);
                ck_assert_msg(has_event(true, name, ".qmp"), "%s missing", name);
        }
}
END_TEST

int main(void) {
        return check_run_case("daemon-discovery", "discovery", setup, teardown, 60,
                              CHECK_TESTS(test_initial_scan, test_sockets_come_and_go, test_rename_in_and_out,
                                          test_directory_created_later, test_directory_created_with_socket_inside,
                                          test_directory_removed_and_recreated, test_reload_changes_globs,
                                          test_hostile_names, test_many_sockets));
}
