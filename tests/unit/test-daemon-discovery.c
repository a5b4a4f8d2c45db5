/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Real unix sockets in a temporary directory, a real sd-event loop. The loop runs until the
 * expected callbacks arrived or an iteration bound is hit; nothing here depends on timing. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/qemu/discovery.h"
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

/* A uid nobody on a test machine runs as. */
#define STRANGER_UID 4242

static void make_dir_mode(const char *rel, mode_t mode) {
        _cleanup_(freep) char *p = at(rel);
        ck_assert_int_eq(mkdir(p, 0700), 0);
        ck_assert_int_eq(chmod(p, mode), 0); /* past the umask */
}

static void chown_path(const char *rel, uid_t uid) {
        _cleanup_(freep) char *p = at(rel);
        ck_assert_int_eq(lchown(p, uid, (gid_t) -1), 0);
}

/* A socket in a directory others (or the group) may write to, sticky or not, is anybody's: never a
 * guest, with a line that says why. */
START_TEST(test_socket_in_writable_directory_refused) {
        _cleanup_(discovery_freep) Discovery *d = NULL;
        _cleanup_(freep) char *log = NULL;

        make_dir_mode("open", 0777);
        make_dir_mode("sticky", 01777);
        make_dir_mode("group", 0775);
        make_dir_mode("safe", 0755);
        make_socket("open/a.qmp");
        make_socket("sticky/b.qmp");
        make_socket("group/c.qmp");
        make_socket("safe/d.qmp");

        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        static char *globs[5];
        _cleanup_(freep) char *g0 = at("open/*.qmp"), *g1 = at("sticky/*.qmp"), *g2 = at("group/*.qmp"),
                              *g3 = at("safe/*.qmp");
        globs[0] = g0, globs[1] = g1, globs[2] = g2, globs[3] = g3, globs[4] = NULL;
        test_stderr_begin();
        ck_assert_int_eq(discovery_set_globs(d, globs), 0);
        /* one that appears later is refused the same way, and logged once */
        make_socket("open/e.qmp");
        for (unsigned i = 0; i < 10; i++)
                ck_assert_int_ge(sd_event_run(event, LOOP_WAIT_USEC), 0);
        log = test_stderr_end();

        ck_assert_uint_eq(n_events, 1);
        ck_assert(has_event(true, "d", "/safe/d.qmp"));
        ck_assert_uint_eq(discovery_count(d), 1);
        ck_assert_msg(strstr(log, "Refusing QMP socket") && strstr(log, "/open/a.qmp") && strstr(log, "/open/e.qmp") &&
                              strstr(log, "/sticky/b.qmp") && strstr(log, "/group/c.qmp") &&
                              strstr(log, "writable by others") && strstr(log, "writable by its group"),
                      "log: %s", log);
        ck_assert_ptr_null(strstr(strstr(log, "/open/e.qmp") + 1, "/open/e.qmp"));

        /* gone: nothing to report, since nothing was */
        remove_file("open/a.qmp");
        for (unsigned i = 0; i < 3; i++)
                ck_assert_int_ge(sd_event_run(event, LOOP_WAIT_USEC), 0);
        ck_assert_uint_eq(n_events, 1);
}
END_TEST

/* A socket or a directory of a user who is neither root nor in qemu-users is refused, and taken
 * once qemu-users names that user. */
START_TEST(test_socket_of_a_stranger_refused) {
        _cleanup_(discovery_freep) Discovery *d = NULL;
        _cleanup_(freep) char *log = NULL;
        SocketTrust trust = {};

        if (geteuid() != 0)
                return; /* chown needs root */
        make_dir_mode("run", 0755);
        make_dir_mode("theirs", 0755);
        make_socket("run/root.qmp");
        make_socket("run/stranger.qmp");
        chown_path("run/stranger.qmp", STRANGER_UID);
        make_socket("theirs/in-their-dir.qmp");
        chown_path("theirs", STRANGER_UID);

        static char *globs[3];
        _cleanup_(freep) char *g0 = at("run/*.qmp"), *g1 = at("theirs/*.qmp");
        globs[0] = g0, globs[1] = g1, globs[2] = NULL;
        ck_assert_int_eq(discovery_new(event, on_added, on_removed, &events, &d), 0);
        test_stderr_begin();
        ck_assert_int_eq(discovery_set_globs(d, globs), 0);
        log = test_stderr_end();
        ck_assert_uint_eq(n_events, 1);
        ck_assert(has_event(true, "root", "/run/root.qmp"));
        ck_assert_msg(strstr(log, "/run/stranger.qmp: it belongs to uid 4242") &&
                              strstr(log, "/theirs/in-their-dir.qmp: its directory belongs to uid 4242"),
                      "log: %s", log);

        /* qemu-users = 4242 */
        char *users[] = { (char *) "4242", NULL };
        ck_assert_int_eq(socket_trust_set_users(&trust, users), 0);
        discovery_set_trust(d, &trust);
        ck_assert_int_eq(discovery_set_globs(d, globs), 0);
        ck_assert_uint_eq(n_events, 3);
        ck_assert(has_event(true, "stranger", "/run/stranger.qmp"));
        ck_assert(has_event(true, "in-their-dir", "/theirs/in-their-dir.qmp"));
        discovery_free(TAKE_PTR(d));
        socket_trust_clear(&trust);
}
END_TEST

/* The process listening on a socket root created and named (bind) but that runs as a stranger
 * (it called listen() after dropping to that uid): SO_PEERCRED names it, and it is refused. */
START_TEST(test_peer_of_a_stranger_refused) {
        _cleanup_(freep) char *path = at("peer.qmp");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int ready[2];
        char c, why[160];
        pid_t pid;

        if (geteuid() != 0)
                return; /* setuid needs root */
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        ck_assert_int_eq(pipe(ready), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (setresuid(STRANGER_UID, STRANGER_UID, STRANGER_UID) < 0 || listen(fd, 4) < 0)
                        _exit(1);
                (void) write(ready[1], "x", 1);
                pause();
                _exit(0);
        }
        close(fd);
        close(ready[1]);
        ck_assert_int_eq(read(ready[0], &c, 1), 1);
        close(ready[0]);

        for (int trusted = 0; trusted < 2; trusted++) {
                SocketTrust trust = {};
                char *users[] = { (char *) "4242", NULL };
                if (trusted)
                        ck_assert_int_eq(socket_trust_set_users(&trust, users), 0);
                int c_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                ck_assert_int_ge(c_fd, 0);
                ck_assert_int_eq(connect(c_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
                pid_t peer = -1;
                bool ok = socket_trust_peer(&trust, c_fd, &peer, why, sizeof(why));
                close(c_fd);
                socket_trust_clear(&trust);
                if (trusted) {
                        ck_assert(ok);
                        ck_assert_int_eq(peer, pid);
                } else {
                        ck_assert(!ok);
                        ck_assert_int_eq(peer, 0);
                        ck_assert_msg(strstr(why, "runs as uid 4242"), "why: %s", why);
                }
        }
        kill(pid, SIGKILL);
        ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}
END_TEST

int main(void) {
        return check_run_case("daemon-discovery", "discovery", setup, teardown, 60,
                              CHECK_TESTS(test_initial_scan, test_sockets_come_and_go, test_rename_in_and_out,
                                          test_directory_created_later, test_directory_created_with_socket_inside,
                                          test_directory_removed_and_recreated, test_reload_changes_globs,
                                          test_hostile_names, test_many_sockets,
                                          test_socket_in_writable_directory_refused,
                                          test_socket_of_a_stranger_refused, test_peer_of_a_stranger_refused));
}
