/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized's polkit path against a real polkitd: the private bus of bus-fixture.c with the
 * system bus's defaults, the shipped rightsized policy and polkitd's own; polkitd on it in a mount
 * namespace of its own, where only our action file (etc/org.rightsize.policy) and a test rules file
 * are visible (bind mounts over /usr/share/polkit-1/actions, /etc/polkit-1/rules.d and
 * /usr/share/polkit-1/rules.d, gone with the namespace); the real rightsized with simulated guests.
 * The rules grant org.rightsize.manage to the user `daemon`, refuse it to `nobody`, and grant
 * org.rightsize.reload to `nobody` after authentication (which `nobody` cannot give); the rest
 * falls to the shipped defaults (an administrator's password). Asserted:
 *  - `daemon` pauses, resumes and sets a floor (the calls succeed and the guests show it), also
 *    through rightsizectl, but may not Reload without a password (naming org.rightsize.reload);
 *  - `nobody` is refused with AccessDenied naming org.rightsize.manage, nothing changes; its Reload
 *    gets InteractiveAuthorizationRequired, also with an authentication agent registered for it
 *    (polkit is not told it may ask); when the call allows interactive authorization, polkit asks
 *    that agent, which authenticates an administrator, and the Reload is done;
 *  - `rightsizectl reload` as nobody at a terminal with no agent around (SSH) brings pkttyagent,
 *    which polkit asks: its request reaches the terminal; hung up, nothing is done or left running;
 *  - root needs no polkit: its calls work while polkitd is frozen (SIGSTOP);
 *  - rightsized never waits for polkit: with polkitd frozen and a query pending, root's reads and
 *    changes are answered at once, and the pending call completes once polkitd thaws; a caller
 *    that vanishes while its query is pending changes nothing and harms nothing;
 *  - rightsized stopped with a query in flight exits cleanly (under ASan: no leak);
 *  - polkitd gone: `daemon` is refused again ("polkit is not running"), root still works.
 * Skips (77; under CI it fails) when polkitd cannot run here: not root, no mount namespace, no
 * polkitd. polkitd drops to its own user, which clears PR_SET_PDEATHSIG; it exits when its bus
 * (killed with the test) goes. */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pty.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "tests/lib/bus-call.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/test-util.h"

#ifndef TEST_TOP_SRCDIR
#define TEST_TOP_SRCDIR "."
#endif

#define POLKITD "/usr/lib/polkit-1/polkitd"
#define N_GUESTS 4
#define WAIT_SEC 30

static const char rules[] =
        "// test-daemon-polkit: who may do what\n"
        "polkit.addRule(function(action, subject) {\n"
        "        if (action.id == \"" RS_POLKIT_ACTION_MANAGE "\" && subject.user == \"daemon\")\n"
        "                return polkit.Result.YES;\n"
        "        if (action.id == \"" RS_POLKIT_ACTION_RELOAD "\" && subject.user == \"nobody\")\n"
        "                return polkit.Result.AUTH_ADMIN;\n"
        "        if (action.id == \"" RS_POLKIT_ACTION_MANAGE "\" && subject.user == \"nobody\")\n"
        "                return polkit.Result.NO;\n"
        "});\n";

static const char *const sim_args[] = { "--scenario", "steady", "--time-scale", "20", NULL };

static BusFixture bus;
static DaemonFixture d;
static char *pk_dir;          /* actions/, rules.d/, empty/, polkitd.log */
static pid_t polkitd = -1;
static uid_t daemon_uid, nobody_uid;
static gid_t daemon_gid, nobody_gid;

/* ---- polkitd ---- */

static char *pk_path(const char *name) {
        char *p;
        ck_assert_int_ge(asprintf(&p, "%s/%s", pk_dir, name), 0);
        return p;
}

static void make_pk_dir(void) {
        _cleanup_free_ char *actions = NULL, *rules_d = NULL, *empty = NULL, *src = NULL, *policy = NULL,
                            *text = NULL, *rules_file = NULL;

        pk_dir = test_mkdtemp();
        actions = pk_path("actions");
        rules_d = pk_path("rules.d");
        empty = pk_path("empty");
        /* polkitd reads them as the polkitd user. */
        ck_assert_int_eq(chmod(pk_dir, 0755), 0);
        ck_assert_int_eq(mkdir(actions, 0755), 0);
        ck_assert_int_eq(mkdir(rules_d, 0755), 0);
        ck_assert_int_eq(mkdir(empty, 0755), 0);

        ck_assert_int_ge(asprintf(&src, "%s/etc/org.rightsize.policy", getenv("top_srcdir") ?: TEST_TOP_SRCDIR), 0);
        text = test_read_file(src);
        ck_assert_msg(text, "cannot read %s", src);
        ck_assert_int_ge(asprintf(&policy, "%s/org.rightsize.policy", actions), 0);
        test_write_file(policy, text);
        ck_assert_int_ge(asprintf(&rules_file, "%s/50-test-rightsize.rules", rules_d), 0);
        test_write_file(rules_file, rules);
        ck_assert_int_eq(chmod(policy, 0644), 0);
        ck_assert_int_eq(chmod(rules_file, 0644), 0);
}

static bool name_has_owner(const char *name) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *b = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int has = 0;

        ck_assert_int_eq(bus_fixture_connect(&bus, &b), 0);
        ck_assert_int_ge(sd_bus_call_method(b, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                            "NameHasOwner", NULL, &reply, "s", name),
                         0);
        ck_assert_int_ge(sd_bus_message_read(reply, "b", &has), 0);
        return has;
}

/* The polkitd child: a private mount namespace where the host's actions and rules are replaced by
 * ours, then polkitd itself (it switches to the polkitd user). */
static void exec_polkitd(void) {
        _cleanup_free_ char *actions = pk_path("actions"), *rules_d = pk_path("rules.d"), *empty = pk_path("empty"),
                            *log = pk_path("polkitd.log");
        int fd;

        test_child_init();
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount(actions, "/usr/share/polkit-1/actions", NULL, MS_BIND, NULL) < 0 ||
            mount(rules_d, "/etc/polkit-1/rules.d", NULL, MS_BIND, NULL) < 0 ||
            mount(empty, "/usr/share/polkit-1/rules.d", NULL, MS_BIND, NULL) < 0) {
                fprintf(stderr, "polkitd's namespace: %m\n");
                _exit(126);
        }
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
                _exit(126);
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.address, 1);
        execl(POLKITD, "polkitd", (char *) NULL);
        _exit(127);
}

static void polkitd_start(void) {
        ck_assert_int_lt(polkitd, 0);
        polkitd = fork();
        ck_assert_int_ge(polkitd, 0);
        if (polkitd == 0)
                exec_polkitd();
        for (uint64_t start = monotonic_sec(); !name_has_owner(POLKIT_BUS_NAME); usleep(50 * 1000)) {
                int status;
                ck_assert_msg(waitpid(polkitd, &status, WNOHANG) == 0, "polkitd exited at start, see %s/polkitd.log",
                              pk_dir);
                ck_assert_msg(monotonic_sec() < start + 20, "polkitd did not take its name within 20 s");
        }
}

static void polkitd_stop(void) {
        if (polkitd <= 0)
                return;
        (void) kill(polkitd, SIGCONT);
        (void) kill(polkitd, SIGTERM);
        (void) waitpid(polkitd, NULL, 0);
        polkitd = -1;
}

/* ---- calls ---- */

#define call_as(uid, gid, method, n, a1, a2, a3) bus_call_as(&bus, (uid), (gid), (method), (n), (a1), (a2), (a3))
#define as_root(method, n, a1, a2, a3) call_as(0, 0, (method), (n), (a1), (a2), (a3))
#define as_daemon(method, n, a1, a2, a3) call_as(daemon_uid, daemon_gid, (method), (n), (a1), (a2), (a3))
#define as_nobody(method, n, a1, a2, a3) call_as(nobody_uid, nobody_gid, (method), (n), (a1), (a2), (a3))

static void assert_refused(const CallResult *r, const char *name, const char *needle, const char *what) {
        bus_call_assert_error(r, name, what);
        ck_assert_msg(strstr(r->message, needle), "%s: \"%s\" does not say \"%s\"", what, r->message, needle);
}

static GuestView view(const char *name) {
        GuestView v;
        ck_assert_int_eq(guest_view_get(&d, name, &v), 0);
        return v;
}

/* ---- fixture ---- */

static void start_daemon(void) {
        daemon_fixture_start(&d);
        guest_view_assert_sims_running(&d, 0, N_GUESTS, WAIT_SEC);
}

static void setup(void) {
        make_pk_dir();
        ck_assert_int_eq(bus_fixture_start(&bus, BUS_POLICY_SYSTEM_POLKIT), 0);
        polkitd_start();
        daemon_fixture_init(&d, &bus);
        daemon_fixture_write_config(&d, BUS_FIXTURE_READ_GROUP, NULL);
        if (getenv("TEST_DEBUG")) /* the daemon's polkit queries in its log */
                daemon_fixture_replace_config_line(&d, "log-level = info\n", "log-level = debug\n");
        daemon_fixture_write_policy(&d, "fast", daemon_fixture_fast_policy);
        daemon_fixture_start_sims(&d, N_GUESTS, sim_args, WAIT_SEC);
}

static void teardown(void) {
        polkitd_stop();
        if (d.dir)
                daemon_fixture_done(&d);
        bus_fixture_stop(&bus);
        if (pk_dir) {
                if (getenv("TEST_DEBUG")) {
                        _cleanup_free_ char *log = pk_path("polkitd.log"), *text = test_read_file(log);
                        fprintf(stderr, "---- polkitd log ----\n%s---- end ----\n", text ?: "");
                }
                test_rm_rf(pk_dir);
                free(pk_dir);
                pk_dir = NULL;
        }
}

/* ---- an authentication agent ---- */

#define AGENT_PATH "/org/rightsize/test/agent"

typedef struct Agent {
        int asked_fd; /* a byte per BeginAuthentication */
        bool done;
} Agent;

/* What a real agent does once the password was right (polkit-agent-helper-1, which is root,
 * answers for the user who typed it): root vouches for root, the identity auth_admin wants. */
static int agent_begin(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        Agent *a = userdata;
        const char *action, *message, *icon, *cookie;
        int r;

        if ((r = sd_bus_message_read(m, "sss", &action, &message, &icon)) < 0 ||
            (r = sd_bus_message_skip(m, "a{ss}")) < 0 || (r = sd_bus_message_read(m, "s", &cookie)) < 0)
                return r;
        if (write(a->asked_fd, "A", 1) != 1)
                return -EIO;
        r = sd_bus_call_method(sd_bus_message_get_bus(m), POLKIT_BUS_NAME, POLKIT_BUS_PATH,
                               POLKIT_BUS_INTERFACE, "AuthenticationAgentResponse2", error, NULL,
                               "us(sa{sv})", 0U, cookie, "unix-user", 1, "uid", "u", 0U);
        if (r < 0)
                return r;
        a->done = true;
        return sd_bus_reply_method_return(m, NULL);
}

static int agent_cancel(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        return sd_bus_reply_method_return(m, NULL);
}

/* polkitd calls as its own user (the bus policy lets only it call agents). */
static const sd_bus_vtable agent_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("BeginAuthentication", "sssa{ss}sa(sa{sv})", "", agent_begin, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("CancelAuthentication", "s", "", agent_cancel, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

typedef struct AgentArgs {
        pid_t subject;
        int asked[2];
} AgentArgs;

static void run_agent(int ready_fd, void *userdata) {
        const AgentArgs *args = userdata;
        Agent a = { .asked_fd = args->asked[1] };
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus *b = NULL;

        close(args->asked[0]);
        if (bus_fixture_connect(&bus, &b) < 0 ||
            sd_bus_add_object_vtable(b, NULL, AGENT_PATH, "org.freedesktop.PolicyKit1.AuthenticationAgent",
                                     agent_vtable, &a) < 0)
                _exit(2);
        if (sd_bus_call_method(b, POLKIT_BUS_NAME, POLKIT_BUS_PATH, POLKIT_BUS_INTERFACE,
                               "RegisterAuthenticationAgent", &error, NULL, "(sa{sv})ss", "unix-process", 2, "pid",
                               "u", (uint32_t) args->subject, "start-time", "t", (uint64_t) 0, "C", AGENT_PATH) < 0) {
                fprintf(stderr, "RegisterAuthenticationAgent: %s\n", error.message);
                _exit(3);
        }
        test_service_ready(ready_fd);
        test_service_serve(b, &a.done);
        sd_bus_flush(b);
        _exit(0);
}

/* An agent (run by root, like pkttyagent --process would be) for the process `subject`: polkit
 * asks it when that process's call allowed interaction. Returns its pid; *ret_asked_fd gets a byte
 * each time polkit asked it. */
static pid_t start_agent(pid_t subject, int *ret_asked_fd) {
        AgentArgs args = { .subject = subject };

        ck_assert_int_eq(pipe2(args.asked, O_CLOEXEC | O_NONBLOCK), 0);
        pid_t pid = test_service_start(run_agent, &args, "the authentication agent could not register");
        close(args.asked[1]);
        *ret_asked_fd = args.asked[0];
        return pid;
}

static void stop_agent(pid_t pid, int asked_fd) {
        (void) kill(pid, SIGTERM);
        (void) waitpid(pid, NULL, 0);
        close(asked_fd);
}

/* ---- tests, in this order, on one fleet ---- */

START_TEST(test_authorized_user) {
        CallResult r;

        r = as_daemon("Pause", 1, "sim-0", NULL, NULL);
        bus_call_assert_ok(&r, "Pause as daemon");
        ck_assert(view("sim-0").paused);
        r = as_daemon("SetGuest", 3, "sim-0", "floor", "1G");
        bus_call_assert_ok(&r, "SetGuest floor=1G as daemon");
        ck_assert_uint_eq(view("sim-0").floor, 1 * GIB);
        r = as_daemon("Resume", 1, "sim-0", NULL, NULL);
        bus_call_assert_ok(&r, "Resume as daemon");
        ck_assert(!view("sim-0").paused);
        /* Authorized, then the method's own checks. */
        r = as_daemon("Pause", 1, "nosuch", NULL, NULL);
        bus_call_assert_error(&r, RS_BUS_ERROR_NO_SUCH_GUEST, "Pause(nosuch) as daemon");

        /* The rules grant manage, not reload: reload falls to the shipped defaults, an
         * administrator's password (auth_admin_keep, over SSH too), which this call did not allow
         * polkit to ask for. */
        r = as_daemon("Reload", 0, NULL, NULL, NULL);
        assert_refused(&r, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, RS_POLKIT_ACTION_RELOAD,
                       "Reload as daemon");

        /* Through the CLI, as daemon. */
        _cleanup_(ctl_run_done) CtlRun p = ctl_run_as(&d, daemon_uid, daemon_gid, "pause", "sim-1", (const char *) NULL);
        ck_assert_msg(p.code == 0, "rightsizectl pause as daemon: %d: %s", p.code, p.err);
        ck_assert(view("sim-1").paused);
        _cleanup_(ctl_run_done) CtlRun q = ctl_run_as(&d, daemon_uid, daemon_gid, "resume", "sim-1", (const char *) NULL);
        ck_assert_msg(q.code == 0, "rightsizectl resume as daemon: %d: %s", q.code, q.err);
        ck_assert(!view("sim-1").paused);
}
END_TEST

START_TEST(test_unauthorized_user) {
        CallResult r;

        r = as_nobody("Pause", 1, "sim-0", NULL, NULL);
        assert_refused(&r, SD_BUS_ERROR_ACCESS_DENIED, RS_POLKIT_ACTION_MANAGE, "Pause as nobody");
        r = as_nobody("SetGuest", 3, "sim-0", "floor", "1500M");
        assert_refused(&r, SD_BUS_ERROR_ACCESS_DENIED, RS_POLKIT_ACTION_MANAGE, "SetGuest as nobody");
        r = as_nobody("Probe", 1, "sim-0", NULL, NULL);
        assert_refused(&r, SD_BUS_ERROR_ACCESS_DENIED, RS_POLKIT_ACTION_MANAGE, "Probe as nobody");
        /* Refused before the guest is looked up: an unknown name tells nobody anything. */
        r = as_nobody("Pause", 1, "nosuch", NULL, NULL);
        assert_refused(&r, SD_BUS_ERROR_ACCESS_DENIED, RS_POLKIT_ACTION_MANAGE, "Pause(nosuch) as nobody");
        GuestView v = view("sim-0");
        ck_assert(!v.paused);
        ck_assert_uint_eq(v.floor, 1 * GIB);

        /* polkit would ask for an administrator's password, and the call did not allow that. */
        r = as_nobody("Reload", 0, NULL, NULL, NULL);
        assert_refused(&r, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, RS_POLKIT_ACTION_RELOAD, "Reload as nobody");

        _cleanup_(ctl_run_done) CtlRun p = ctl_run_as(&d, nobody_uid, nobody_gid, "pause", "sim-0", (const char *) NULL);
        ck_assert_int_eq(p.code, 5);
        ck_assert_msg(strstr(p.err, "permission denied") && strstr(p.err, RS_POLKIT_ACTION_MANAGE), "stderr: %s", p.err);
        ck_assert(!view("sim-0").paused);
}
END_TEST

START_TEST(test_interactive_authorization) {
        CallResult r;
        int asked;
        char c;

        /* An agent waits for nobody's process, but the call does not allow interaction: polkit
         * must not be told it may ask, so it does not, and the caller hears why. */
        PendingCall plain = bus_call_start_held(&bus, nobody_uid, nobody_gid, false, "Reload", 0, NULL, NULL, NULL);
        pid_t agent = start_agent(plain.pid, &asked);
        bus_call_release(&plain);
        r = bus_call_finish(&plain);
        assert_refused(&r, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED, RS_POLKIT_ACTION_RELOAD,
                       "Reload as nobody, not interactive, agent present");
        ck_assert_msg(read(asked, &c, 1) < 0, "polkit asked the agent for a call that did not allow it");
        stop_agent(agent, asked);

        /* The call allows interaction: polkit asks the agent, the agent authenticates an
         * administrator, and the reload is done for nobody. */
        PendingCall inter = bus_call_start_held(&bus, nobody_uid, nobody_gid, true, "Reload", 0, NULL, NULL, NULL);
        agent = start_agent(inter.pid, &asked);
        bus_call_release(&inter);
        r = bus_call_finish(&inter);
        bus_call_assert_ok(&r, "Reload as nobody, authenticated through the agent");
        ck_assert_msg(read(asked, &c, 1) == 1, "the agent was never asked");
        stop_agent(agent, asked);
        ck_assert(daemon_fixture_wait_log(&d, "Reloaded", WAIT_SEC));
}
END_TEST

/* rightsizectl at a terminal, as nobody, asks for a change polkit wants an administrator for, with
 * no agent in sight (an SSH login): it brings its own text agent (pkttyagent, for its own bus
 * connection), and polkit asks that agent: the request reaches the terminal. Then the terminal
 * goes away (the administrator gives up): nothing was changed, and nothing is left running. */
START_TEST(test_ctl_brings_an_agent) {
        char binary[PATH_MAX], buf[8192];
        size_t len = 0;
        int master, status;

        if (access("/usr/bin/pkttyagent", X_OK) < 0) {
                check_cannot_set_up("test_ctl_brings_an_agent", "pkttyagent is not installed (Debian package polkitd)");
                return;
        }
        snprintf(binary, sizeof(binary), "%s/rightsizectl", getenv("top_builddir") ?: ".");
        pid_t pid = forkpty(&master, NULL, NULL, NULL);
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                if (setgroups(1, &nobody_gid) < 0 || setresgid(nobody_gid, nobody_gid, nobody_gid) < 0 ||
                    setresuid(nobody_uid, nobody_uid, nobody_uid) < 0)
                        _exit(121);
                setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.address, 1);
                unsetenv("RIGHTSIZECTL_NO_POLKIT_AGENT");
                execl(binary, "rightsizectl", "reload", (char *) NULL);
                _exit(122);
        }
        uint64_t deadline = monotonic_sec() + WAIT_SEC;
        while (!strstr(buf, RS_POLKIT_ACTION_RELOAD)) {
                ck_assert_msg(monotonic_sec() < deadline, "no authentication request on the terminal after %d s: %s",
                              WAIT_SEC, buf);
                struct pollfd p = { .fd = master, .events = POLLIN };
                if (poll(&p, 1, 500) <= 0)
                        continue;
                ssize_t n = read(master, buf + len, sizeof(buf) - 1 - len);
                ck_assert_msg(n > 0, "the terminal closed before polkit asked: %s", buf);
                len += (size_t) n;
                buf[len] = '\0';
                ck_assert_msg(len < sizeof(buf) - 1, "too much on the terminal: %s", buf);
        }
        /* pkttyagent's own words, so it was that agent polkit asked. */
        ck_assert_msg(strstr(buf, "AUTHENTICATING FOR"), "terminal: %s", buf);
        /* The terminal hangs up: the session's processes get SIGHUP. */
        close(master);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(!WIFEXITED(status) || WEXITSTATUS(status) != 0, "the reload went through without a password");
        /* No agent left behind for nobody. */
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "pgrep -u %u -x pkttyagent >/dev/null", (unsigned) nobody_uid);
        for (uint64_t until = monotonic_sec() + WAIT_SEC; system(cmd) == 0;) {
                ck_assert_msg(monotonic_sec() < until, "a pkttyagent of nobody's still runs");
                usleep(200 * 1000);
        }
}
END_TEST

START_TEST(test_root_needs_no_polkit) {
        CallResult r;

        /* polkitd frozen: root's changes do not wait for it. */
        ck_assert_int_eq(kill(polkitd, SIGSTOP), 0);
        r = as_root("Pause", 1, "sim-2", NULL, NULL);
        bus_call_assert_ok(&r, "Pause as root, polkitd frozen");
        ck_assert(view("sim-2").paused);
        r = as_root("Resume", 1, "sim-2", NULL, NULL);
        bus_call_assert_ok(&r, "Resume as root, polkitd frozen");
        r = as_root("Reload", 0, NULL, NULL, NULL);
        bus_call_assert_ok(&r, "Reload as root, polkitd frozen");
        ck_assert_int_eq(kill(polkitd, SIGCONT), 0);
        ck_assert(!view("sim-2").paused);
}
END_TEST

START_TEST(test_never_blocks) {
        CallResult r;

        ck_assert_int_eq(kill(polkitd, SIGSTOP), 0);
        PendingCall pending = bus_call_start(&bus, daemon_uid, daemon_gid, "Pause", 1, "sim-2", NULL, NULL);
        /* Sent after the pending call, so answered after rightsized asked polkit about it. */
        r = as_root("ListGuests", 0, NULL, NULL, NULL);
        bus_call_assert_ok(&r, "ListGuests while a polkit query is pending");
        r = call_as(nobody_uid, nobody_gid, "GetGuest", 1, "sim-2", NULL, NULL);
        bus_call_assert_ok(&r, "GetGuest as the read group while a polkit query is pending");
        r = as_root("SetGuest", 3, "sim-3", "floor", "900M");
        bus_call_assert_ok(&r, "SetGuest as root while a polkit query is pending");
        ck_assert_uint_eq(view("sim-3").floor, 900 * MIB);
        /* Still waiting for polkit, and nothing was done for it yet. */
        ck_assert(!bus_call_answered(&pending));
        ck_assert(!view("sim-2").paused);

        /* A second caller vanishes while its query waits: when polkit answers, the name is gone. */
        PendingCall gone = bus_call_start(&bus, daemon_uid, daemon_gid, "Pause", 1, "sim-3", NULL, NULL);
        r = as_root("ListGuests", 0, NULL, NULL, NULL);
        bus_call_assert_ok(&r, "ListGuests with two polkit queries pending");
        char sender[sizeof(gone.sender)];
        memcpy(sender, gone.sender, sizeof(sender));
        bus_call_kill(&gone);
        for (uint64_t start = monotonic_sec(); name_has_owner(sender); usleep(20 * 1000))
                ck_assert_msg(monotonic_sec() < start + WAIT_SEC, "%s stayed on the bus", sender);

        ck_assert_int_eq(kill(polkitd, SIGCONT), 0);
        r = bus_call_finish(&pending);
        bus_call_assert_ok(&r, "Pause as daemon after polkitd thawed");
        ck_assert(view("sim-2").paused);
        /* polkit answers in order of asking, and another query after it proves it did. */
        r = as_daemon("Resume", 1, "sim-2", NULL, NULL);
        bus_call_assert_ok(&r, "Resume as daemon");
        ck_assert(!view("sim-2").paused);
        ck_assert_msg(!view("sim-3").paused, "the vanished caller's Pause was carried out");
        ck_assert(daemon_fixture_alive(&d));
        r = as_root("SetGuest", 3, "sim-3", "floor", "768M");
        bus_call_assert_ok(&r, "SetGuest as root");
}
END_TEST

START_TEST(test_daemon_stops_with_query_in_flight) {
        ck_assert_int_eq(kill(polkitd, SIGSTOP), 0);
        PendingCall pending = bus_call_start(&bus, daemon_uid, daemon_gid, "Pause", 1, "sim-1", NULL, NULL);
        CallResult r = as_root("ListGuests", 0, NULL, NULL, NULL);
        bus_call_assert_ok(&r, "ListGuests while a polkit query is pending");

        /* Exit status 0 (under ASan: no leak of the query or the message it holds). */
        int status = daemon_fixture_stop(&d, SIGTERM);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "rightsized stopped with a polkit query in flight: status %d, log %s", status, d.log_path);
        r = bus_call_finish(&pending);
        ck_assert_msg(r.r < 0, "the pending call succeeded without a daemon");
        ck_assert_int_eq(kill(polkitd, SIGCONT), 0);

        start_daemon();
        ck_assert(!view("sim-1").paused);
}
END_TEST

START_TEST(test_polkit_absent) {
        CallResult r;

        polkitd_stop();
        ck_assert(!name_has_owner(POLKIT_BUS_NAME));
        r = as_daemon("Pause", 1, "sim-0", NULL, NULL);
        assert_refused(&r, SD_BUS_ERROR_ACCESS_DENIED, "polkit is not running", "Pause as daemon without polkit");
        ck_assert_ptr_nonnull(strstr(r.message, RS_POLKIT_ACTION_MANAGE));
        ck_assert(!view("sim-0").paused);
        r = as_root("Pause", 1, "sim-0", NULL, NULL);
        bus_call_assert_ok(&r, "Pause as root without polkit");
        ck_assert(view("sim-0").paused);
        r = as_root("Resume", 1, "sim-0", NULL, NULL);
        bus_call_assert_ok(&r, "Resume as root without polkit");
}
END_TEST

/* polkitd needs root, a mount namespace and the package; say which is missing. */
static const char *cannot_run(void) {
        struct passwd *pw;
        pid_t pid;
        int status;

        if (geteuid() != 0)
                return "not root";
        if (access(POLKITD, X_OK) < 0 || access(BUS_FIXTURE_POLKIT_POLICY, R_OK) < 0)
                return "polkitd is not installed (Debian package polkitd)";
        if (!getpwnam("polkitd"))
                return "no user polkitd";
        if (!(pw = getpwnam("daemon")))
                return "no user daemon";
        daemon_uid = pw->pw_uid;
        daemon_gid = pw->pw_gid;
        if (!(pw = getpwnam("nobody")) || !getgrnam(BUS_FIXTURE_READ_GROUP))
                return "no user nobody or group " BUS_FIXTURE_READ_GROUP;
        nobody_uid = pw->pw_uid;
        nobody_gid = getgrnam(BUS_FIXTURE_READ_GROUP)->gr_gid;
        pid = fork();
        if (pid < 0)
                return "fork failed";
        if (pid == 0)
                _exit(unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ? 1 : 0);
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return "no private mount namespace (unshare(CLONE_NEWNS) refused)";
        return NULL;
}

int main(void) {
        const char *why = cannot_run();
        if (why)
                return check_program_cannot_set_up("test-daemon-polkit", "%s", why);

        Suite *s = suite_create("daemon-polkit");
        check_add_case_once(s, "polkit", setup, teardown, 0,
                            CHECK_TESTS(test_authorized_user, test_unauthorized_user, test_interactive_authorization,
                                        test_ctl_brings_an_agent, test_root_needs_no_polkit, test_never_blocks,
                                        test_daemon_stops_with_query_in_flight, test_polkit_absent));
        /* One process: the tests share polkitd and the daemon, and some stop or freeze them. */
        return check_run_suite_nofork(s);
}
