/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The shipped D-Bus policy, enforced by a real dbus-daemon: a private bus with the system bus's
 * default policy plus etc/org.rightsize.Manager1.conf (tests/lib/bus-fixture.c), a stand-in
 * rightsized owning the name, and callers that drop to other users. The group in the policy
 * ("rightsize") does not exist on a test machine, so the copy under test names "nogroup" instead;
 * nothing else is changed. Reads are for root and the group; the methods that change something
 * pass for anyone (rightsized asks polkit); rightsized's own calls reach polkitd. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

#define TEST_GROUP BUS_FIXTURE_READ_GROUP

enum { CALL_OK = 0, CALL_DENIED = 10, CALL_OTHER_ERROR = 20, CALL_SETUP_FAILED = 30 };

static BusFixture private_bus;
static pid_t server_pid = -1;

static int connect_bus(sd_bus **ret) {
        return bus_fixture_connect(&private_bus, ret);
}

static int method_reply(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sd_bus_reply_method_return(m, "s", "ok");
}

static int get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                       sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", "0.1");
}

/* rightsized calling polkitd (CheckAuthorization), which runs as its own user: the bus must let
 * polkitd receive that. Calls the stand-in polkitd's Ping and says whether it got through. */
static int method_call_peer(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        int r;

        r = sd_bus_call_method(sd_bus_message_get_bus(m), POLKIT_BUS_NAME, "/peer", "org.example.Peer", "Ping", error,
                               NULL, "");
        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, "s", "ok");
}

/* UNPRIVILEGED everywhere, as in the real daemon (which checks every caller itself: reads the read
 * group, changes root or polkit): sd-bus would otherwise refuse non-root callers itself, and this
 * test is about what the bus policy lets through. "Shutdown" stands for any method the policy
 * does not name. */
static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("ListGuests", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetGuest", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetHistory", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetMemoryReport", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("SetGuest", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Pause", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Resume", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Probe", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Reload", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("SetDomainPolicy", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetRecommendation", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("ApplyRecommendation", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Shutdown", "", "s", method_reply, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("CallPeer", "", "s", method_call_peer, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_PROPERTY("Version", "s", get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_VTABLE_END,
};

/* The stand-in daemon: owns the name, answers everything; tells the parent once it is ready. */
static void run_server(int ready_fd, void *userdata _unused_) {
        sd_bus *bus = NULL;

        if (connect_bus(&bus) < 0 || sd_bus_request_name(bus, RS_BUS_NAME, 0) < 0 ||
            sd_bus_add_object_vtable(bus, NULL, RS_BUS_PATH, RS_BUS_NAME, manager_vtable, NULL) < 0)
                _exit(1);
        test_service_ready(ready_fd);
        test_service_serve(bus, NULL);
}

typedef struct Call {
        const char *interface;
        const char *member;
        bool property_get;  /* Properties.Get(RS_BUS_NAME, "Version") */
        bool own_name;      /* RequestName(RS_BUS_NAME) instead of a call */
} Call;

/* Runs one call as uid/gid in a child; returns CALL_*. */
static int call_as(uid_t uid, gid_t gid, const Call *call) {
        pid_t pid = fork();
        int status;

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sd_bus_error error = SD_BUS_ERROR_NULL;
                sd_bus_message *reply = NULL;
                sd_bus *bus = NULL;
                int r;

                test_child_init();
                if (setgroups(1, &gid) < 0 || setgid(gid) < 0 || setuid(uid) < 0)
                        _exit(CALL_SETUP_FAILED);
                if (connect_bus(&bus) < 0)
                        _exit(CALL_SETUP_FAILED);

                if (call->own_name) {
                        r = sd_bus_request_name(bus, RS_BUS_NAME, SD_BUS_NAME_QUEUE);
                        _exit(r >= 0 ? CALL_OK : (r == -EACCES || r == -EPERM) ? CALL_DENIED : CALL_OTHER_ERROR);
                }
                if (call->property_get)
                        r = sd_bus_call_method(bus, RS_BUS_NAME, RS_BUS_PATH, call->interface, call->member, &error, &reply, "ss",
                                               RS_BUS_NAME, "Version");
                else
                        r = sd_bus_call_method(bus, RS_BUS_NAME, RS_BUS_PATH, call->interface, call->member, &error, &reply, "");
                if (r >= 0)
                        _exit(CALL_OK);
                if (sd_bus_error_has_name(&error, SD_BUS_ERROR_ACCESS_DENIED)) {
                        if (getenv("TEST_DEBUG"))
                                fprintf(stderr, "%s.%s as %u: %s\n", call->interface, call->member, (unsigned) uid,
                                        error.message);
                        _exit(CALL_DENIED);
                }
                fprintf(stderr, "%s.%s as %u: %s\n", call->interface, call->member, (unsigned) uid, error.message);
                _exit(CALL_OTHER_ERROR);
        }

        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static int method_ping(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        bool *pinged = userdata;
        *pinged = true;
        return sd_bus_reply_method_return(m, "");
}

static const sd_bus_vtable peer_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Ping", "", "", method_ping, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

typedef struct PeerUser {
        uid_t uid;
        gid_t gid;
} PeerUser;

static void run_peer(int ready_fd, void *userdata) {
        const PeerUser *user = userdata;
        bool pinged = false;
        sd_bus *bus = NULL;

        if (setgroups(1, &user->gid) < 0 || setgid(user->gid) < 0 || setuid(user->uid) < 0 || connect_bus(&bus) < 0 ||
            sd_bus_add_object_vtable(bus, NULL, "/peer", "org.example.Peer", peer_vtable, &pinged) < 0 ||
            sd_bus_request_name(bus, POLKIT_BUS_NAME, 0) < 0)
                _exit(1);
        test_service_ready(ready_fd);
        test_service_serve(bus, &pinged);
        sd_bus_flush(bus);
        _exit(0);
}

/* A stand-in polkitd: runs as uid/gid (the polkitd user), owns polkit's name (polkitd's own bus
 * policy lets it), serves until it was pinged once and exits 0 then. */
static pid_t start_peer(uid_t uid, gid_t gid) {
        PeerUser user = { uid, gid };
        return test_service_start(run_peer, &user, "the stand-in polkitd could not take its name");
}

static void stop(pid_t *pid) {
        if (*pid > 0) {
                (void) kill(*pid, SIGTERM);
                (void) waitpid(*pid, NULL, 0);
                *pid = -1;
        }
}

static void teardown(void) {
        stop(&server_pid);
        bus_fixture_stop(&private_bus);
}

START_TEST(test_policy_enforced) {
        struct passwd *pw;
        struct group *gr;
        uid_t member_uid, outsider_uid;
        gid_t member_gid, outsider_gid;

        if (geteuid() != 0) {
                check_cannot_set_up("test_policy_enforced", "it needs root to switch users");
                return;
        }
        pw = getpwnam("nobody");
        gr = getgrnam(TEST_GROUP);
        ck_assert_msg(pw && gr, "needs the user nobody and the group " TEST_GROUP);
        member_uid = pw->pw_uid;
        member_gid = gr->gr_gid;
        pw = getpwnam("daemon");
        ck_assert_ptr_nonnull(pw);
        outsider_uid = pw->pw_uid;
        outsider_gid = pw->pw_gid;
        ck_assert_int_ne(outsider_gid, member_gid);

        /* System bus defaults plus the shipped policy, its group swapped for one that exists here;
         * and polkitd's bus policy when polkitd is installed. */
        bool polkit_bus = access(BUS_FIXTURE_POLKIT_POLICY, R_OK) == 0 && getpwnam("polkitd");
        ck_assert_int_eq(bus_fixture_start(&private_bus, polkit_bus ? BUS_POLICY_SYSTEM_POLKIT : BUS_POLICY_SYSTEM), 0);

        server_pid = test_service_start(run_server, NULL, "the stand-in daemon could not take the name");

        static const Call list = { RS_BUS_NAME, "ListGuests" }, get = { RS_BUS_NAME, "GetGuest" },
                          history = { RS_BUS_NAME, "GetHistory" },
                          memory = { RS_BUS_NAME, "GetMemoryReport" }, set = { RS_BUS_NAME, "SetGuest" }, pause = { RS_BUS_NAME, "Pause" },
                          resume = { RS_BUS_NAME, "Resume" }, probe = { RS_BUS_NAME, "Probe" }, reload = { RS_BUS_NAME, "Reload" },
                          domain = { RS_BUS_NAME, "SetDomainPolicy" },
                          recommend = { RS_BUS_NAME, "GetRecommendation" },
                          apply = { RS_BUS_NAME, "ApplyRecommendation" }, unlisted = { RS_BUS_NAME, "Shutdown" },
                          prop = { "org.freedesktop.DBus.Properties", "Get", .property_get = true },
                          introspect = { "org.freedesktop.DBus.Introspectable", "Introspect" },
                          own = { .own_name = true };
        static const Call *const changes[] = { &set, &pause, &resume, &probe, &reload, &domain, &apply };

        /* root: everything. */
        ck_assert_int_eq(call_as(0, 0, &list), CALL_OK);
        ck_assert_int_eq(call_as(0, 0, &set), CALL_OK);
        ck_assert_int_eq(call_as(0, 0, &reload), CALL_OK);
        ck_assert_int_eq(call_as(0, 0, &unlisted), CALL_OK);

        /* The read group: reads. */
        ck_assert_int_eq(call_as(member_uid, member_gid, &list), CALL_OK);
        ck_assert_int_eq(call_as(member_uid, member_gid, &get), CALL_OK);
        ck_assert_int_eq(call_as(member_uid, member_gid, &history), CALL_OK);
        ck_assert_int_eq(call_as(member_uid, member_gid, &memory), CALL_OK);
        ck_assert_int_eq(call_as(member_uid, member_gid, &recommend), CALL_OK);
        ck_assert_int_eq(call_as(member_uid, member_gid, &prop), CALL_OK);
        ck_assert_int_eq(call_as(member_uid, member_gid, &introspect), CALL_OK);
        ck_assert_int_eq(call_as(member_uid, member_gid, &unlisted), CALL_DENIED);
        ck_assert_int_eq(call_as(member_uid, member_gid, &own), CALL_DENIED);

        /* Anyone else: no reads. */
        ck_assert_int_eq(call_as(outsider_uid, outsider_gid, &list), CALL_DENIED);
        ck_assert_int_eq(call_as(outsider_uid, outsider_gid, &get), CALL_DENIED);
        ck_assert_int_eq(call_as(outsider_uid, outsider_gid, &memory), CALL_DENIED);
        ck_assert_int_eq(call_as(outsider_uid, outsider_gid, &recommend), CALL_DENIED);
        ck_assert_int_eq(call_as(outsider_uid, outsider_gid, &prop), CALL_DENIED);
        ck_assert_int_eq(call_as(outsider_uid, outsider_gid, &introspect), CALL_DENIED);
        ck_assert_int_eq(call_as(outsider_uid, outsider_gid, &unlisted), CALL_DENIED);
        ck_assert_int_eq(call_as(outsider_uid, outsider_gid, &own), CALL_DENIED);

        /* The changes reach the daemon from anyone: it decides (root, or polkit's answer). Until
         * polkit, this policy denied them to everyone but root, which left polkit nothing to
         * decide. */
        for (size_t i = 0; i < ARRAY_SIZE(changes); i++) {
                ck_assert_msg(call_as(member_uid, member_gid, changes[i]) == CALL_OK, "%s as the read group",
                              changes[i]->member);
                ck_assert_msg(call_as(outsider_uid, outsider_gid, changes[i]) == CALL_OK, "%s as an outsider",
                              changes[i]->member);
        }

        /* The daemon's calls to polkitd (its own user) get through: only its signals are private. */
        if (!polkit_bus) {
                check_cannot_set_up("test_policy_enforced (rightsized's calls to polkitd)",
                                    "no polkitd bus policy (%s) or no user polkitd: Debian package polkitd",
                                    BUS_FIXTURE_POLKIT_POLICY);
                return;
        }
        static const Call call_peer = { RS_BUS_NAME, "CallPeer" };
        int status;
        pid_t peer = start_peer(getpwnam("polkitd")->pw_uid, getpwnam("polkitd")->pw_gid);
        ck_assert_int_eq(call_as(0, 0, &call_peer), CALL_OK);
        ck_assert_int_eq(waitpid(peer, &status, 0), peer);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}
END_TEST

int main(void) {
        return check_run_case("daemon-dbus-policy", "dbus-policy", NULL, teardown, 60,
                              CHECK_TESTS(test_policy_enforced));
}
