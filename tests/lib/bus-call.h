/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Calls to org.rightsize.Manager1 as any user, for the integration tests: each call runs in a
 * forked child that drops to the given uid/gid before it connects to the fixture's bus, so the
 * daemon, the bus and polkit see a real unprivileged peer. A call may also be started and
 * finished (or abandoned) later, to check that a slow or vanished caller blocks nobody. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "tests/lib/bus-fixture.h"

typedef struct CallResult {
        int r;              /* sd_bus_call's */
        char error[128];    /* D-Bus error name, "" on success */
        char message[1024];
} CallResult;

typedef struct PendingCall {
        pid_t pid;          /* the calling child, -1 once finished */
        int fd;             /* its result arrives here */
        int gate;           /* a held call waits for a byte here, -1 otherwise */
        char sender[64];    /* its unique name on the bus */
        char method[64];
} PendingCall;

/* Starts a call of method with up to three string arguments ("" signature when n == 0) as uid/gid
 * (uid 0: as the test is); returns once the child has sent it (the bus has it, ahead of anything
 * sent after). */
PendingCall bus_call_start(const BusFixture *bus, uid_t uid, gid_t gid, const char *method, unsigned n,
                           const char *a1, const char *a2, const char *a3);
/* A call that waits, connected (its pid and sender known), until bus_call_release(); interactive
 * sets the message's ALLOW_INTERACTIVE_AUTHORIZATION flag (as rightsizectl does on a terminal):
 * polkit may then ask an authentication agent. */
PendingCall bus_call_start_held(const BusFixture *bus, uid_t uid, gid_t gid, bool interactive, const char *method,
                                unsigned n, const char *a1, const char *a2, const char *a3);
void bus_call_release(PendingCall *c);
/* Waits for the call's answer (the child waits up to 120 s for it: a deadline for a hang, generous
 * for a busy machine and for polkit, which a test may hold stopped for a while). */
CallResult bus_call_finish(PendingCall *c);
/* The caller vanishes: SIGKILL, reaped. */
void bus_call_kill(PendingCall *c);
/* Whether the child has its answer already (without waiting). */
bool bus_call_answered(const PendingCall *c);

/* Start and finish in one. */
CallResult bus_call_as(const BusFixture *bus, uid_t uid, gid_t gid, const char *method, unsigned n, const char *a1,
                       const char *a2, const char *a3);


/* Assertions on a result, naming `what` in the failure. assert_error also wants a message. */
void bus_call_assert_ok(const CallResult *r, const char *what);
void bus_call_assert_error(const CallResult *r, const char *name, const char *what);
