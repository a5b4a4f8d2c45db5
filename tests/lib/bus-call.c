/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/lib/bus-call.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"


typedef struct CallState {
        CallResult result;
        bool done;
} CallState;

static int on_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error _unused_) {
        CallState *state = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        state->done = true;
        if (!e) {
                state->result.r = 1;
                return 0;
        }
        state->result.r = -(sd_bus_error_get_errno(e) ?: EIO);
        snprintf(state->result.error, sizeof(state->result.error), "%s", e->name ?: "?");
        snprintf(state->result.message, sizeof(state->result.message), "%s", e->message ?: "");
        return 0;
}

/* Without a gate: sends first, then tells the parent its name, so that once bus_call_start()
 * returns the call is on the bus, ahead of anything the parent sends after. With a gate: tells its
 * name, then waits for a byte on the gate before it sends. */
static void run_call(const BusFixture *bus, int fd, int gate, uid_t uid, gid_t gid, bool interactive,
                     const char *method, unsigned n, const char *const args[3]) {
        sd_bus_message *m = NULL;
        char sender[64] = {};
        CallState state = {};
        const char *unique;
        sd_bus *b = NULL;
        int r;

        if (uid != 0 && (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0))
                _exit(2);
        if (bus_fixture_connect(bus, &b) < 0 || sd_bus_get_unique_name(b, &unique) < 0 ||
            sd_bus_message_new_method_call(b, &m, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, method) < 0)
                _exit(3);
        for (unsigned i = 0; i < n; i++)
                if (sd_bus_message_append(m, "s", args[i]) < 0)
                        _exit(4);
        if (interactive && sd_bus_message_set_allow_interactive_authorization(m, true) < 0)
                _exit(4);
        snprintf(sender, sizeof(sender), "%s", unique);
        if (gate >= 0) {
                char c;
                if (write(fd, sender, sizeof(sender)) != (ssize_t) sizeof(sender) || read(gate, &c, 1) != 1)
                        _exit(5);
        }
        if (sd_bus_call_async(b, NULL, m, on_reply, &state, 120 * 1000000ULL) < 0 || sd_bus_flush(b) < 0)
                _exit(4);
        if (gate < 0 && write(fd, sender, sizeof(sender)) != (ssize_t) sizeof(sender))
                _exit(5);
        while (!state.done) {
                r = sd_bus_process(b, NULL);
                if (r < 0) { /* the bus went away */
                        state.result.r = r;
                        snprintf(state.result.error, sizeof(state.result.error), "?");
                        snprintf(state.result.message, sizeof(state.result.message), "connection lost: %s",
                                 strerror(-r));
                        break;
                }
                if (r == 0 && sd_bus_wait(b, UINT64_MAX) < 0)
                        _exit(6);
        }
        if (write(fd, &state.result, sizeof(state.result)) != (ssize_t) sizeof(state.result))
                _exit(5);
        _exit(0);
}

static PendingCall call_start(const BusFixture *bus, uid_t uid, gid_t gid, bool held, bool interactive,
                              const char *method, unsigned n, const char *a1, const char *a2, const char *a3) {
        const char *const args[3] = { a1, a2, a3 };
        PendingCall c = { .pid = -1, .fd = -1, .gate = -1 };
        int pipefd[2], gatefd[2] = { -1, -1 };

        ck_assert_uint_le(n, 3);
        snprintf(c.method, sizeof(c.method), "%s", method);
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        if (held)
                ck_assert_int_eq(pipe2(gatefd, O_CLOEXEC), 0);
        c.pid = fork();
        ck_assert_int_ge(c.pid, 0);
        if (c.pid == 0) {
                test_child_init();
                close(pipefd[0]);
                if (held)
                        close(gatefd[1]);
                run_call(bus, pipefd[1], gatefd[0], uid, gid, interactive, method, n, args);
        }
        close(pipefd[1]);
        c.fd = pipefd[0];
        if (held) {
                close(gatefd[0]);
                c.gate = gatefd[1];
        }
        ck_assert_msg(read(c.fd, c.sender, sizeof(c.sender)) == (ssize_t) sizeof(c.sender),
                      "%s: the calling child could not connect", method);
        c.sender[sizeof(c.sender) - 1] = '\0';
        if (getenv("TEST_DEBUG"))
                fprintf(stderr, "%s(%s) as %u from %s\n", method, n ? a1 : "", (unsigned) uid, c.sender);
        return c;
}

PendingCall bus_call_start(const BusFixture *bus, uid_t uid, gid_t gid, const char *method, unsigned n,
                           const char *a1, const char *a2, const char *a3) {
        return call_start(bus, uid, gid, false, false, method, n, a1, a2, a3);
}

PendingCall bus_call_start_held(const BusFixture *bus, uid_t uid, gid_t gid, bool interactive, const char *method,
                                unsigned n, const char *a1, const char *a2, const char *a3) {
        return call_start(bus, uid, gid, true, interactive, method, n, a1, a2, a3);
}

void bus_call_release(PendingCall *c) {
        ck_assert_int_ge(c->gate, 0);
        ck_assert_int_eq(write(c->gate, "G", 1), 1);
        close(c->gate);
        c->gate = -1;
}

bool bus_call_answered(const PendingCall *c) {
        struct pollfd p = { .fd = c->fd, .events = POLLIN };
        return poll(&p, 1, 0) > 0;
}

CallResult bus_call_finish(PendingCall *c) {
        CallResult res = {};
        int status;

        ck_assert_int_gt(c->pid, 0);
        if (c->gate >= 0)
                bus_call_release(c);
        ssize_t k = read(c->fd, &res, sizeof(res));
        close(c->fd);
        ck_assert_int_eq(waitpid(c->pid, &status, 0), c->pid);
        c->pid = c->fd = -1;
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0 && k == (ssize_t) sizeof(res),
                      "%s: the calling child failed (%d)", c->method, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        if (getenv("TEST_DEBUG"))
                fprintf(stderr, "%s from %s: %d %s %s\n", c->method, c->sender, res.r, res.error, res.message);
        return res;
}

void bus_call_kill(PendingCall *c) {
        if (c->pid <= 0)
                return;
        (void) kill(c->pid, SIGKILL);
        (void) waitpid(c->pid, NULL, 0);
        close(c->fd);
        if (c->gate >= 0)
                close(c->gate);
        c->gate = -1;
        c->pid = c->fd = -1;
}

CallResult bus_call_as(const BusFixture *bus, uid_t uid, gid_t gid, const char *method, unsigned n, const char *a1,
                       const char *a2, const char *a3) {
        PendingCall c = bus_call_start(bus, uid, gid, method, n, a1, a2, a3);
        return bus_call_finish(&c);
}

void bus_call_assert_ok(const CallResult *r, const char *what) {
        ck_assert_msg(r->r >= 0, "%s failed: %s: %s", what, r->error, r->message);
}

void bus_call_assert_error(const CallResult *r, const char *name, const char *what) {
        ck_assert_msg(r->r < 0, "%s succeeded, expected %s", what, name);
        ck_assert_msg(strcmp(r->error, name) == 0, "%s: got %s (%s), expected %s", what, r->error, r->message, name);
        ck_assert_msg(r->message[0], "%s: the error has no message", what);
}
