/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.rightsize.Manager1 as the real rightsized serves it (daemon/dbus-api.md), with simulated
 * guests behind it: every method, each checked by its effect on the guests (a paused guest's size
 * stops moving, a new floor is kept, a forced probe probes, Reload picks up a changed policy file
 * and keeps the old one when the new one is bad), the EstimateChanged signal, access control
 * (callers that drop to other users; the daemon's own checks on an open bus, then the shipped bus
 * policy on top; no polkit runs here: tests/integration/test-daemon-polkit.c has one), and hostile strings: guest and policy names with "../", quotes, JSON, control
 * characters and great length are refused with a clear error, touch no file, and leave the daemon
 * running. */

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "tests/lib/bus-call.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define FLOOR (768 * MIB)
#define GUEST_MAX (2048 * MIB)
#define WAIT_SEC 30
#define N_GUESTS 5

enum { G_READ, G_SET, G_PAUSE, G_INJECT, G_RELOAD, G_SIGNAL = 9 };

static const char fast_policy[] = "[policy]\n"
                                  "match = *\n"
                                  "poll-interval = 1s\n"
                                  "floor = 768M\n"
                                  "floor-percent = 0\n"
                                  "hold-time = 4s\n";
static const char *const sim_args[] = { "--scenario", "steady", "--time-scale", "20", NULL };

static BusFixture bus;
static DaemonFixture d;

/* ---- calls, as any user (tests/lib/bus-call.c) ---- */

#define call_as(uid, gid, method, n, a1, a2, a3) bus_call_as(&bus, (uid), (gid), (method), (n), (a1), (a2), (a3))
#define call(method, n, a1, a2, a3) call_as(0, 0, (method), (n), (a1), (a2), (a3))
#define assert_ok bus_call_assert_ok
#define assert_error bus_call_assert_error

static GuestView view(unsigned index) {
        char name[32];
        GuestView v;
        sim_name(index, name, sizeof(name));
        ck_assert_int_eq(guest_view_get(&d, name, &v), 0);
        return v;
}

/* Waits for the guest's next sample (its `updated` time moves). */
static GuestView next_sample(unsigned index) {
        char name[32];
        GuestView first = view(index), v;
        sim_name(index, name, sizeof(name));
        ck_assert_msg(guest_view_wait(&d, name, guest_view_updated_after, &first.updated, WAIT_SEC, &v),
                      "%s: no new sample", name);
        return v;
}

/* ---- the fixture: one daemon, N_GUESTS guests ---- */

static void start_fleet(BusPolicy policy) {
        daemon_fixture_setup(&d, &bus, policy);
        daemon_fixture_write_config(&d, BUS_FIXTURE_READ_GROUP, NULL);
        daemon_fixture_write_policy(&d, "fast", fast_policy);
        daemon_fixture_start_sims(&d, N_GUESTS, sim_args, WAIT_SEC);
}

static void setup_open(void) {
        start_fleet(BUS_POLICY_OPEN);
}

static void setup_system_bus(void) {
        start_fleet(BUS_POLICY_SYSTEM);
}

static void teardown_fleet(void) {
        daemon_fixture_teardown(&d, &bus);
}

/* ---- reads ---- */

START_TEST(test_list_guests) {
        GuestView views[16];
        int n = guest_view_list(&d, views, ARRAY_SIZE(views));

        ck_assert_int_eq(n, N_GUESTS);
        for (unsigned i = 0; i < N_GUESTS; i++) {
                char name[32];
                bool found = false;
                sim_name(i, name, sizeof(name));
                for (int k = 0; k < n; k++) {
                        if (strcmp(views[k].name, name) != 0)
                                continue;
                        found = true;
                        ck_assert_str_eq(views[k].policy, "fast");
                        ck_assert_str_eq(views[k].mode, "rightsize");
                        ck_assert_uint_eq(views[k].max, GUEST_MAX);
                        ck_assert_uint_eq(views[k].floor, FLOOR);
                        ck_assert_uint_gt(views[k].actual, 0);
                }
                ck_assert_msg(found, "%s not listed", name);
        }

        /* rightsizectl says the same. */
        _cleanup_(ctl_run_done) CtlRun list = ctl_run(&d, "--json", "list");
        ck_assert_int_eq(list.code, 0);
        json_object *doc = json_tokener_parse(list.out), *guests;
        ck_assert_ptr_nonnull(doc);
        ck_assert(json_object_object_get_ex(doc, "guests", &guests));
        ck_assert_int_eq((int) json_object_array_length(guests), N_GUESTS);
        json_object_put(doc);
}
END_TEST

START_TEST(test_get_guest) {
        GuestView v = next_sample(G_READ);
        for (uint64_t start = monotonic_sec(); v.fault[0] && monotonic_sec() < start + WAIT_SEC;)
                v = next_sample(G_READ); /* a transient fault under load passes */
        uint64_t now_usec = (uint64_t) time(NULL) * USEC_PER_SEC;

        ck_assert_str_eq(v.name, "sim-0");
        ck_assert_uint_ge(v.target, v.floor);
        ck_assert_uint_le(v.target, v.max);
        ck_assert_uint_ge(v.actual, v.floor);
        /* `updated` is the realtime of the last sample: a moment ago. */
        ck_assert_uint_le(v.updated, now_usec + 5 * USEC_PER_SEC);
        ck_assert_uint_ge(v.updated + 60 * USEC_PER_SEC, now_usec);
        ck_assert(!v.paused);
        ck_assert_str_eq(v.fault, "");

        CallResult r = call("GetGuest", 1, "nosuch", NULL, NULL);
        assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "GetGuest(nosuch)");
        ck_assert_ptr_nonnull(strstr(r.message, "nosuch"));
}
END_TEST

START_TEST(test_get_history) {
        char name[32];
        sim_name(G_READ, name, sizeof(name));
        uint64_t newest = 0;
        ck_assert_int_gt(guest_history_since(&d, name, 0, &newest), 0);
        (void) next_sample(G_READ);
        (void) next_sample(G_READ);
        /* New points, counted by their time (the list's length stops at its maximum). */
        ck_assert_int_gt(guest_history_since(&d, name, newest, NULL), 0);
        int after = guest_history_count(&d, name);
        ck_assert_int_gt(after, 0);

        /* Oldest first, and the last point is the guest's last sample. */
        _cleanup_(ctl_run_done) CtlRun h = ctl_run(&d, "--json", "history", name);
        ck_assert_int_eq(h.code, 0);
        json_object *doc = json_tokener_parse(h.out), *points, *t;
        ck_assert_ptr_nonnull(doc);
        ck_assert(json_object_object_get_ex(doc, "history", &points));
        size_t n = json_object_array_length(points);
        ck_assert_uint_ge(n, (size_t) after);
        uint64_t prev = 0;
        for (size_t i = 0; i < n; i++) {
                json_object *p = json_object_array_get_idx(points, i), *target;
                ck_assert(json_object_object_get_ex(p, "time", &t));
                ck_assert_uint_ge((uint64_t) json_object_get_int64(t), prev);
                prev = (uint64_t) json_object_get_int64(t);
                ck_assert(json_object_object_get_ex(p, "target", &target));
                ck_assert_uint_ge((uint64_t) json_object_get_int64(target), FLOOR);
        }
        json_object_put(doc);

        CallResult r = call("GetHistory", 1, "nosuch", NULL, NULL);
        assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "GetHistory(nosuch)");
}
END_TEST

/* ---- changes ---- */

START_TEST(test_set_guest) {
        CallResult r;
        GuestView v;

        /* A new floor holds from the next interval on. */
        PendingCall set = bus_call_start(&bus, 0, 0, "SetGuest", 3, "sim-1", "floor", "1G");
        char who[128];
        snprintf(who, sizeof(who), "Operator set floor=1G (uid 0, pid %u)", (unsigned) set.pid);
        r = bus_call_finish(&set);
        assert_ok(&r, "SetGuest floor=1G");
        /* The change names who made it. */
        ck_assert_msg(daemon_fixture_wait_log(&d, who, WAIT_SEC), "no '%s' in %s", who, d.log_path);
        v = view(G_SET);
        ck_assert_uint_eq(v.floor, 1 * GIB);
        for (int i = 0; i < 3; i++) {
                v = next_sample(G_SET);
                ck_assert_uint_ge(v.target, 1 * GIB);
        }

        /* Another policy, by name: a preset. */
        r = call("SetGuest", 3, "sim-1", "policy", "observe-only");
        assert_ok(&r, "SetGuest policy=observe-only");
        v = view(G_SET);
        ck_assert_str_eq(v.policy, "observe-only");
        ck_assert_str_eq(v.mode, "observe");
        /* Observing: the target is what the guest has, and stays so. */
        v = next_sample(G_SET);
        v = next_sample(G_SET);
        ck_assert_uint_eq(v.target, v.actual);

        /* Refused, and nothing changed. */
        r = call("SetGuest", 3, "sim-1", "floor", "banana");
        assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest floor=banana");
        ck_assert_ptr_nonnull(strstr(r.message, "banana"));
        /* Out of range: the refusal gives the range. */
        r = call("SetGuest", 3, "sim-1", "floor", "10M");
        assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest floor=10M");
        ck_assert_msg(strstr(r.message, "64 MiB"), "%s", r.message);
        r = call("SetGuest", 3, "sim-1", "max", "512M");
        assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest max=512M, below the floor");
        ck_assert_msg(strstr(r.message, "below its floor, 1 GiB"), "%s", r.message);
        r = call("SetGuest", 3, "sim-1", "max", "1536M");
        assert_ok(&r, "SetGuest max=1536M");
        r = call("SetGuest", 3, "sim-1", "floor", "1600M");
        assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest floor=1600M, above the max");
        ck_assert_msg(strstr(r.message, "above its max, 1.5 GiB") && strstr(r.message, "64 MiB to 1.5 GiB"), "%s",
                      r.message);
        r = call("SetGuest", 3, "sim-1", "max", "2G");
        assert_ok(&r, "SetGuest max=2G");
        r = call("SetGuest", 3, "sim-1", "colour", "red");
        assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest colour=red");
        r = call("SetGuest", 3, "sim-1", "policy", "no-such-policy");
        assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest policy=no-such-policy");
        ck_assert_ptr_nonnull(strstr(r.message, "no-such-policy"));
        r = call("SetGuest", 3, "nosuch", "floor", "1G");
        assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "SetGuest on nosuch");
        v = view(G_SET);
        ck_assert_str_eq(v.policy, "observe-only");
        ck_assert_uint_eq(v.floor, 1 * GIB);

        /* Back to the policy from the directory. */
        r = call("SetGuest", 3, "sim-1", "policy", "fast");
        assert_ok(&r, "SetGuest policy=fast");
        ck_assert_str_eq(view(G_SET).policy, "fast");
}
END_TEST

START_TEST(test_pause_resume) {
        CallResult r;
        GuestView v, first;

        PendingCall pause = bus_call_start(&bus, 0, 0, "Pause", 1, "sim-2", NULL, NULL);
        char who[128];
        snprintf(who, sizeof(who), "Operator paused the guest (uid 0, pid %u)", (unsigned) pause.pid);
        r = bus_call_finish(&pause);
        assert_ok(&r, "Pause(sim-2)");
        ck_assert_msg(daemon_fixture_wait_log(&d, who, WAIT_SEC), "no '%s' in %s", who, d.log_path);
        v = view(G_PAUSE);
        ck_assert(v.paused);
        ck_assert_str_eq(v.state, "paused");
        /* A balloon command sent just before may still be on its way: let it land. */
        (void) next_sample(G_PAUSE);
        (void) next_sample(G_PAUSE);
        first = next_sample(G_PAUSE);
        /* Still observed (samples come), never moved. */
        for (int i = 0; i < 4; i++) {
                v = next_sample(G_PAUSE);
                ck_assert_uint_eq(v.actual, first.actual);
                ck_assert_uint_eq(v.target, first.target);
                ck_assert(v.paused);
        }
        /* Others carry on. */
        (void) next_sample(G_READ);
        ck_assert(!view(G_READ).paused);

        r = call("Resume", 1, "sim-2", NULL, NULL);
        assert_ok(&r, "Resume(sim-2)");
        v = next_sample(G_PAUSE);
        ck_assert(!v.paused);
        ck_assert_str_ne(v.state, "paused");

        /* "" is every guest. */
        r = call("Pause", 1, "", NULL, NULL);
        assert_ok(&r, "Pause(\"\")");
        for (unsigned i = 0; i < N_GUESTS; i++)
                ck_assert(view(i).paused);
        r = call("Resume", 1, "", NULL, NULL);
        assert_ok(&r, "Resume(\"\")");
        for (unsigned i = 0; i < N_GUESTS; i++)
                ck_assert(!view(i).paused);

        r = call("Pause", 1, "nosuch", NULL, NULL);
        assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "Pause(nosuch)");
}
END_TEST

static bool holds_above_256m(const GuestView *v, const void *data _unused_) {
        return strcmp(v->state, "hold") == 0 && v->has_estimate && v->estimate > 256 * MIB;
}

/* Probing, below the target it held at (*(const uint64_t *) data). */
static bool probing_below(const GuestView *v, const void *data) {
        return strcmp(v->state, "probe") == 0 && v->target < *(const uint64_t *) data;
}

START_TEST(test_probe) {
        GuestView v, held;
        CallResult r;

        /* Room below the estimate (at the floor a probe has nowhere to go). */
        r = call("SetGuest", 3, "sim-0", "floor", "256M");
        assert_ok(&r, "SetGuest floor=256M");
        /* Wait until it holds (4 s hold time), then force a probe before the hold ends. */
        ck_assert_msg(guest_view_wait(&d, "sim-0", holds_above_256m, NULL, 90, &held), "sim-0 never held (state %s)",
                      held.state);
        r = call("Probe", 1, "sim-0", NULL, NULL);
        assert_ok(&r, "Probe(sim-0)");
        v = next_sample(G_READ);
        ck_assert_msg(strcmp(v.state, "probe") == 0, "after Probe: state %s (%s)", v.state, v.reason);
        /* Its first decision may wait at the size the balloon settled at (a sample it cannot
         * judge yet, a size to confirm): the step down comes within a few samples. */
        ck_assert_msg(guest_view_wait(&d, "sim-0", probing_below, &held.target, WAIT_SEC, &v),
                      "the probe did not lower the target (%" PRIu64 " → %" PRIu64 ", state %s: %s)", held.target,
                      v.target, v.state, v.reason);
        ck_assert_uint_ge(v.target, v.floor);
        r = call("SetGuest", 3, "sim-0", "floor", "768M");
        assert_ok(&r, "SetGuest floor=768M");

        r = call("Probe", 1, "nosuch", NULL, NULL);
        assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "Probe(nosuch)");

        /* Refused by the core, and the caller hears it (not an OK that did nothing): an
         * observe-only policy never probes; a paused guest is asked to be resumed first. */
        r = call("SetGuest", 3, "sim-0", "policy", "observe-only");
        assert_ok(&r, "SetGuest policy=observe-only");
        r = call("Probe", 1, "sim-0", NULL, NULL);
        assert_error(&r, SD_BUS_ERROR_NOT_SUPPORTED, "Probe of an observed guest");
        ck_assert_msg(strstr(r.message, "only observes"), "%s", r.message);
        r = call("SetGuest", 3, "sim-0", "policy", "fast");
        assert_ok(&r, "SetGuest policy=fast");
        r = call("Pause", 1, "sim-0", NULL, NULL);
        assert_ok(&r, "Pause(sim-0)");
        r = call("Probe", 1, "sim-0", NULL, NULL);
        assert_error(&r, SD_BUS_ERROR_FAILED, "Probe of a paused guest");
        ck_assert_msg(strstr(r.message, "paused"), "%s", r.message);
        r = call("Resume", 1, "sim-0", NULL, NULL);
        assert_ok(&r, "Resume(sim-0)");
}
END_TEST

START_TEST(test_reload) {
        CallResult r;
        GuestView v;

        /* Files are tried in name order: this one now claims sim-4, with a higher floor. */
        daemon_fixture_write_policy(&d, "a-reload", "[policy]\nmatch = sim-4\npoll-interval = 1s\nfloor = 896M\n"
                                                    "floor-percent = 0\nhold-time = 4s\n");
        r = call("Reload", 0, NULL, NULL, NULL);
        assert_ok(&r, "Reload");
        v = view(G_RELOAD);
        ck_assert_str_eq(v.policy, "a-reload");
        ck_assert_uint_eq(v.floor, 896 * MIB);
        ck_assert_str_eq(view(G_READ).policy, "fast");
        v = next_sample(G_RELOAD);
        ck_assert_uint_ge(v.target, 896 * MIB);

        /* A bad file: refused with file, line and key; the old policies stay. */
        daemon_fixture_write_policy(&d, "a-reload", "[policy]\nmatch = sim-4\nfloor = lots\n");
        r = call("Reload", 0, NULL, NULL, NULL);
        assert_error(&r, RS_BUS_ERROR_RELOAD_FAILED, "Reload with a bad policy");
        ck_assert_msg(strstr(r.message, "a-reload.conf:3") && strstr(r.message, "floor"), "message: %s", r.message);
        v = next_sample(G_RELOAD);
        ck_assert_str_eq(v.policy, "a-reload");
        ck_assert_uint_eq(v.floor, 896 * MIB);

        /* rightsizectl reload shows the same message and exits 1. */
        _cleanup_(ctl_run_done) CtlRun c = ctl_run(&d, "reload");
        ck_assert_int_eq(c.code, 1);
        ck_assert_ptr_nonnull(strstr(c.err, "a-reload.conf:3"));
        ck_assert(daemon_fixture_alive(&d));
}
END_TEST

/* ---- EstimateChanged ---- */

typedef struct Signals {
        unsigned n;
        uint64_t estimate, lower, upper;
        unsigned zero_after_known; /* signals with estimate 0 after one with an estimate */
} Signals;

static int on_estimate_changed(sd_bus_message *m, void *userdata, sd_bus_error *error _unused_) {
        Signals *s = userdata;
        const char *name;
        uint64_t e, lo, hi;
        if (sd_bus_message_read(m, "sttt", &name, &e, &lo, &hi) < 0 || strcmp(name, "sim-9") != 0)
                return 0;
        /* 0 says "no estimate yet": once there was one, the signal keeps the last known. */
        if (e == 0 && s->estimate > 0)
                s->zero_after_known++;
        s->n++;
        s->estimate = e;
        s->lower = lo;
        s->upper = hi;
        return 0;
}

START_TEST(test_estimate_changed) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *b = NULL;
        Signals s = {};

        ck_assert_int_eq(bus_fixture_connect(&bus, &b), 0);
        ck_assert_int_ge(sd_bus_match_signal(b, NULL, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "EstimateChanged",
                                             on_estimate_changed, &s),
                         0);
        /* A new guest: its estimate is learned from nothing. */
        daemon_fixture_start_sim(&d, 1, G_SIGNAL, 1, sim_args);
        for (uint64_t start = monotonic_sec(); !(s.n > 0 && s.estimate > 0);) {
                ck_assert_msg(monotonic_sec() < start + 60, "no EstimateChanged with an estimate for sim-9");
                ck_assert_int_ge(sd_bus_process(b, NULL), 0);
                ck_assert_int_ge(sd_bus_wait(b, 500 * USEC_PER_MSEC), 0);
        }
        /* What the signal said is what GetGuest says (the estimate moved less than 1 % since). */
        for (int i = 0; i < 20 && sd_bus_process(b, NULL) > 0; i++)
                ;
        GuestView v = view(G_SIGNAL);
        ck_assert(v.has_estimate);
        ck_assert_msg((double) v.estimate <= (double) s.estimate * 1.011 && (double) v.estimate >= (double) s.estimate * 0.989,
                      "signalled %" PRIu64 ", GetGuest %" PRIu64, s.estimate, v.estimate);
        ck_assert_uint_le(s.estimate, GUEST_MAX);
        if (s.lower && s.upper)
                ck_assert_uint_le(s.lower, s.upper);
        ck_assert_uint_eq(s.zero_after_known, 0);
}
END_TEST

/* ---- access control ---- */

typedef struct Users {
        uid_t member_uid, outsider_uid;
        gid_t member_gid, outsider_gid;
} Users;

static bool get_users(Users *u) {
        struct passwd *pw = getpwnam("nobody"), *daemon_pw = getpwnam("daemon");
        struct group *gr = getgrnam(BUS_FIXTURE_READ_GROUP);

        if (geteuid() != 0 || !pw || !daemon_pw || !gr) {
                check_cannot_set_up("access tests", "they need root, the users nobody and daemon and the group %s",
                                    BUS_FIXTURE_READ_GROUP);
                return false;
        }
        /* getpwnam() returns the same static buffer each time: the second call overwrote the
         * first's, and both users were `daemon`. */
        *u = (Users) { .outsider_uid = daemon_pw->pw_uid, .member_gid = gr->gr_gid, .outsider_gid = daemon_pw->pw_gid };
        pw = getpwnam("nobody");
        ck_assert_ptr_nonnull(pw);
        u->member_uid = pw->pw_uid;
        ck_assert_uint_ne(u->member_uid, u->outsider_uid);
        ck_assert_uint_ne(u->member_gid, u->outsider_gid);
        return true;
}

/* Refused by rightsized itself (no polkit runs on these buses), naming the polkit action: not by
 * the bus or by sd-bus before the daemon's check. */
static void assert_change_refused(const CallResult *r, const char *action, const char *what) {
        assert_error(r, SD_BUS_ERROR_ACCESS_DENIED, what);
        ck_assert_msg(strstr(r->message, action) && strstr(r->message, "polkit is not running"), "%s: %s", what,
                      r->message);
}

static void assert_changes_refused(uid_t uid, gid_t gid) {
        CallResult r;

        r = call_as(uid, gid, "SetGuest", 3, "sim-1", "floor", "1500M");
        assert_change_refused(&r, RS_POLKIT_ACTION_MANAGE, "SetGuest as non-root");
        r = call_as(uid, gid, "Pause", 1, "sim-1", NULL, NULL);
        assert_change_refused(&r, RS_POLKIT_ACTION_MANAGE, "Pause as non-root");
        r = call_as(uid, gid, "Pause", 1, "", NULL, NULL);
        assert_change_refused(&r, RS_POLKIT_ACTION_MANAGE, "Pause(all) as non-root");
        r = call_as(uid, gid, "Resume", 1, "sim-1", NULL, NULL);
        assert_change_refused(&r, RS_POLKIT_ACTION_MANAGE, "Resume as non-root");
        r = call_as(uid, gid, "Probe", 1, "sim-1", NULL, NULL);
        assert_change_refused(&r, RS_POLKIT_ACTION_MANAGE, "Probe as non-root");
        r = call_as(uid, gid, "Reload", 0, NULL, NULL, NULL);
        assert_change_refused(&r, RS_POLKIT_ACTION_RELOAD, "Reload as non-root");
        /* Nothing happened. */
        GuestView v = view(G_SET);
        ck_assert(!v.paused);
        ck_assert_uint_eq(v.floor, FLOOR);
}

static void assert_reads(uid_t uid, gid_t gid, bool allowed) {
        CallResult list = call_as(uid, gid, "ListGuests", 0, NULL, NULL, NULL),
                   get = call_as(uid, gid, "GetGuest", 1, "sim-0", NULL, NULL),
                   history = call_as(uid, gid, "GetHistory", 1, "sim-0", NULL, NULL);
        if (allowed) {
                assert_ok(&list, "ListGuests");
                assert_ok(&get, "GetGuest");
                assert_ok(&history, "GetHistory");
        } else {
                assert_error(&list, SD_BUS_ERROR_ACCESS_DENIED, "ListGuests");
                assert_error(&get, SD_BUS_ERROR_ACCESS_DENIED, "GetGuest");
                assert_error(&history, SD_BUS_ERROR_ACCESS_DENIED, "GetHistory");
        }
}

START_TEST(test_access_daemon_checks) {
        Users u;
        if (!get_users(&u))
                return;

        /* The bus lets everything through here: these answers are rightsized's own. */
        assert_reads(u.member_uid, u.member_gid, true);
        assert_reads(u.outsider_uid, u.outsider_gid, false);
        assert_changes_refused(u.member_uid, u.member_gid);
        assert_changes_refused(u.outsider_uid, u.outsider_gid);

        /* Through the CLI: exit 5 and its message. */
        _cleanup_(ctl_run_done) CtlRun l = ctl_run_as(&d, u.member_uid, u.member_gid, "list", (const char *) NULL);
        ck_assert_int_eq(l.code, 0);
        ck_assert_ptr_nonnull(strstr(l.out, "sim-0"));
        _cleanup_(ctl_run_done) CtlRun o = ctl_run_as(&d, u.outsider_uid, u.outsider_gid, "list", (const char *) NULL);
        ck_assert_int_eq(o.code, 5);
        /* The refusal names the group to join. */
        ck_assert_msg(strstr(o.err, "permission denied") && strstr(o.err, "\"" BUS_FIXTURE_READ_GROUP "\""), "stderr: %s",
                      o.err);
        _cleanup_(ctl_run_done) CtlRun p = ctl_run_as(&d, u.member_uid, u.member_gid, "pause", "sim-1",
                                                      (const char *) NULL);
        ck_assert_int_eq(p.code, 5);
        ck_assert_ptr_nonnull(strstr(p.err, "permission denied"));
        /* rightsized's own reason (sd-bus no longer refuses first): the polkit action, and that polkit
         * is not running on this bus. */
        ck_assert_msg(strstr(p.err, RS_POLKIT_ACTION_MANAGE) && strstr(p.err, "polkit is not running"), "stderr: %s",
                      p.err);

        /* No read group (reloaded): reads are root's alone. */
        daemon_fixture_write_config(&d, "", NULL);
        CallResult r = call("Reload", 0, NULL, NULL, NULL);
        assert_ok(&r, "Reload");
        assert_reads(u.member_uid, u.member_gid, false);
        assert_reads(0, 0, true);
        ck_assert(daemon_fixture_alive(&d));
}
END_TEST

/* A user's polkit checks are limited however many connections it opens: a flood of changes from
 * one user gets LimitsExceeded past its share, and another user's check still goes to polkit. */
START_TEST(test_polkit_checks_limited_per_user) {
        enum { CALLS = 40 };
        PendingCall calls[CALLS];
        unsigned denied = 0, limited = 0;
        Users u;
        if (!get_users(&u))
                return;

        for (unsigned i = 0; i < CALLS; i++) /* each its own connection */
                calls[i] = bus_call_start(&bus, u.member_uid, u.member_gid, "Probe", 1, "sim-1", NULL, NULL);
        for (unsigned i = 0; i < CALLS; i++) {
                CallResult r = bus_call_finish(&calls[i]);
                if (strcmp(r.error, SD_BUS_ERROR_LIMITS_EXCEEDED) == 0)
                        limited++;
                else {
                        assert_change_refused(&r, RS_POLKIT_ACTION_MANAGE, "Probe as non-root");
                        denied++;
                }
        }
        /* At most two windows' worth went to polkit (the calls may straddle a window's end). */
        ck_assert_msg(denied >= 1 && denied <= 2 * 16 && limited >= CALLS - 2 * 16,
                      "%u of %d checks went to polkit, %u were limited", denied, CALLS, limited);
        CallResult other = call_as(u.outsider_uid, u.outsider_gid, "Probe", 1, "sim-1", NULL, NULL);
        assert_change_refused(&other, RS_POLKIT_ACTION_MANAGE, "another user's Probe");
        /* Root is not limited: its call reaches the method (which may refuse to probe an
         * observed guest, with its own reason, but not for access). */
        CallResult root = call("Probe", 1, "sim-1", NULL, NULL);
        ck_assert_msg(root.r >= 0 || strcmp(root.error, SD_BUS_ERROR_NOT_SUPPORTED) == 0, "root's Probe: %s: %s",
                      root.error, root.message);
        ck_assert(daemon_fixture_alive(&d));
}
END_TEST

START_TEST(test_access_system_bus_policy) {
        Users u;
        if (!get_users(&u))
                return;

        /* The shipped bus policy in front of the daemon: the read group reads, nobody else gets
         * through. Changes pass the bus for anyone (rightsized decides: root or polkit), and with
         * no polkit on this bus they stay root's. */
        assert_reads(0, 0, true);
        assert_reads(u.member_uid, u.member_gid, true);
        assert_reads(u.outsider_uid, u.outsider_gid, false);
        assert_changes_refused(u.member_uid, u.member_gid);
        assert_changes_refused(u.outsider_uid, u.outsider_gid);
        /* dbus-daemon refuses before rightsized hears of it: the CLI turns its "Rejected send
         * message, N matched rules" into the group to join (the shipped name: the fixture renamed
         * it in its copy of the policy only). */
        _cleanup_(ctl_run_done) CtlRun o = ctl_run_as(&d, u.outsider_uid, u.outsider_gid, "list", (const char *) NULL);
        ck_assert_int_eq(o.code, 5);
        ck_assert_msg(strstr(o.err, "permission denied") && strstr(o.err, "\"" RS_READ_GROUP "\"") &&
                              !strstr(o.err, "matched rules"),
                      "stderr: %s", o.err);
        CallResult r = call("Pause", 1, "sim-1", NULL, NULL);
        assert_ok(&r, "Pause as root");
        ck_assert(view(G_SET).paused);
        r = call("Resume", 1, "sim-1", NULL, NULL);
        assert_ok(&r, "Resume as root");
}
END_TEST

/* ---- hostile strings ---- */

static char *long_name(void) {
        char *s = malloc(20001);
        ck_assert_ptr_nonnull(s);
        for (size_t i = 0; i < 20000; i++)
                s[i] = "../"[i % 3];
        s[20000] = '\0';
        return s;
}

/* The files under the fixture's directory, as "relative/path" lines. */
static void list_tree(const char *dir, const char *rel, FILE *out) {
        _cleanup_free_ char *path = NULL;
        ck_assert_int_ge(asprintf(&path, "%s%s%s", dir, rel[0] ? "/" : "", rel), 0);
        DIR *dd = opendir(path);
        if (!dd)
                return;
        for (struct dirent *de; (de = readdir(dd));) {
                _cleanup_free_ char *sub = NULL;
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 || strcmp(de->d_name, "ctl.out") == 0 ||
                    strcmp(de->d_name, "ctl.err") == 0 || strstr(de->d_name, ".tmp"))
                        continue;
                ck_assert_int_ge(asprintf(&sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name), 0);
                fprintf(out, "%s\n", sub);
                if (de->d_type == DT_DIR)
                        list_tree(dir, sub, out);
        }
        closedir(dd);
}

static char *tree(const char *dir) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        ck_assert_ptr_nonnull(f);
        fputc('\n', f);
        list_tree(dir, "", f);
        fclose(f);
        return buf;
}

/* Every line of a is a line of b (the order of directory entries may change). */
static void assert_lines_in(const char *a, const char *b) {
        for (const char *p = a + 1; *p;) {
                const char *eol = strchr(p, '\n');
                _cleanup_free_ char *line = strndup(p - 1, (size_t) (eol - p) + 2);
                ck_assert_msg(strstr(b, line), "file %.*s appeared or vanished", (int) (eol - p), p);
                p = eol + 1;
        }
}

static uint64_t mtime_of(const char *path) {
        struct stat st;
        ck_assert_int_eq(stat(path, &st), 0);
        return (uint64_t) st.st_mtim.tv_sec * 1000000000ULL + (uint64_t) st.st_mtim.tv_nsec;
}

START_TEST(test_injection) {
        _cleanup_free_ char *longest = long_name(), *before = NULL, *after = NULL;
        const char *const names[] = {
                "../../../../etc/passwd", "../sim-3", "sim-3/../sim-3", "/etc/shadow", "sim-3\"; rm -rf /; \"",
                "'sim-3'", "{\"execute\": \"quit\"}", "sim-3\", \"arguments\": {}}", "sim-\x01\x02\x1b[2J\x7f",
                "%2e%2e%2fsim-3", "sim-*", "*", longest,
        };
        const char *const policies[] = {
                "../../../../etc/passwd", "../policies/fast", "fast.conf", "/etc/rightsize/policies/balanced",
                "fast/../fast", "{\"mode\": \"observe\"}", "'; reboot", longest,
        };
        CallResult r;

        before = tree(d.dir);
        uint64_t passwd_mtime = mtime_of("/etc/passwd"), etc_mtime = mtime_of("/etc");

        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                r = call("GetGuest", 1, names[i], NULL, NULL);
                assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "GetGuest(hostile)");
                r = call("GetHistory", 1, names[i], NULL, NULL);
                assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "GetHistory(hostile)");
                r = call("SetGuest", 3, names[i], "policy", "fast");
                assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "SetGuest(hostile)");
                r = call("SetGuest", 3, names[i], "floor", "1G");
                assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "SetGuest(hostile)");
                r = call("Probe", 1, names[i], NULL, NULL);
                assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "Probe(hostile)");
                r = call("Pause", 1, names[i], NULL, NULL);
                assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "Pause(hostile)");
                r = call("Resume", 1, names[i], NULL, NULL);
                assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "Resume(hostile)");
        }
        for (size_t i = 0; i < ARRAY_SIZE(policies); i++) {
                r = call("SetGuest", 3, "sim-3", "policy", policies[i]);
                assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest policy=hostile");
                ck_assert_ptr_nonnull(strstr(r.message, "No policy named"));
        }
        const char *const keys[] = { "../floor", "floor\n", "policy\"", "max;", longest };
        for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
                r = call("SetGuest", 3, "sim-3", keys[i], "1G");
                assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest hostile key");
        }
        const char *const sizes[] = { "1G; rm -rf /", "../1G", "-1", "18446744073709551616", "1e999G", "0x1p64", longest };
        for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
                r = call("SetGuest", 3, "sim-3", "floor", sizes[i]);
                assert_error(&r, SD_BUS_ERROR_INVALID_ARGS, "SetGuest hostile size");
        }

        /* Nothing changed, no file appeared, the daemon serves on. */
        GuestView v = next_sample(G_INJECT);
        ck_assert_str_eq(v.policy, "fast");
        ck_assert_uint_eq(v.floor, FLOOR);
        ck_assert(!v.paused);
        after = tree(d.dir);
        assert_lines_in(before, after);
        assert_lines_in(after, before);
        ck_assert_uint_eq(mtime_of("/etc/passwd"), passwd_mtime);
        ck_assert_uint_eq(mtime_of("/etc"), etc_mtime); /* no /etc/passwd.json or the like */
        DIR *dd = opendir(d.state_dir);
        ck_assert_ptr_nonnull(dd);
        for (struct dirent *de; (de = readdir(dd));)
                ck_assert_msg(de->d_name[0] == '.' || fnmatch("sim-[0-9].json", de->d_name, 0) == 0,
                              "unexpected state file %s", de->d_name);
        closedir(dd);
        ck_assert(daemon_fixture_alive(&d));
        ck_assert_int_ge(guest_view_list(&d, (GuestView[N_GUESTS]) {}, N_GUESTS), N_GUESTS);
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-dbus");

        check_add_case_once(s, "api", setup_open, teardown_fleet, 120,
                            CHECK_TESTS(test_list_guests, test_get_guest, test_get_history, test_set_guest,
                                        test_pause_resume, test_probe, test_reload, test_estimate_changed,
                                        test_injection));
        check_add_case(s, "access", setup_open, teardown_fleet, 120, CHECK_TESTS(test_access_daemon_checks,
                                                                                    test_polkit_checks_limited_per_user));
        check_add_case(s, "system-bus", setup_system_bus, teardown_fleet, 120,
                       CHECK_TESTS(test_access_system_bus_policy));
        return check_run_suite(s);
}
