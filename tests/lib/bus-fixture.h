/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A private dbus-daemon for the tests that talk to org.rightsize.Manager1: started in a directory
 * of its own, reachable by any user (callers drop privileges), and killed at the end. Either every
 * call is allowed (the tests then see what rightsized checks by itself), or the system bus's default
 * policy applies plus the shipped etc/org.rightsize.Manager1.conf, with its group renamed to one
 * that exists on the test machine (and, for the polkit tests, polkitd's bus policy). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>
#include <systemd/sd-bus.h>

typedef enum BusPolicy {
        BUS_POLICY_OPEN,   /* anyone may own any name, call anything, receive everything */
        BUS_POLICY_SYSTEM, /* system.conf's defaults plus the shipped policy of rightsized */
        BUS_POLICY_SYSTEM_POLKIT, /* the same plus polkitd's own bus policy (BUS_FIXTURE_POLKIT_POLICY) */
        BUS_POLICY_SYSTEM_UNINSTALLED, /* system.conf's defaults alone: rightsized may not own its name
                                        * until bus_fixture_install_policy() */
} BusPolicy;

/* What the polkitd package installs: its user may own org.freedesktop.PolicyKit1, anyone may call it. */
#define BUS_FIXTURE_POLKIT_POLICY "/usr/share/dbus-1/system.d/org.freedesktop.PolicyKit1.conf"

typedef struct BusFixture {
        char *dir;       /* the bus's directory (mode 0755, removed by bus_fixture_stop()) */
        char *address;   /* for DBUS_SYSTEM_BUS_ADDRESS */
        pid_t pid;
} BusFixture;

/* The group the shipped policy names ("rightsize") is swapped for this one in BUS_POLICY_SYSTEM:
 * it exists on Debian, and `nobody` can be given it. */
#define BUS_FIXTURE_READ_GROUP "nogroup"

/* Starts the bus in a fresh directory under $TMPDIR. The shipped policy is read from
 * $top_srcdir/etc (or TEST_TOP_SRCDIR when the harness did not export top_srcdir).
 * 0 or -errno. Its stderr goes to /dev/null unless TEST_DEBUG is set. */
int bus_fixture_start(BusFixture *b, BusPolicy policy);
/* Puts the shipped policy in place (as BUS_POLICY_SYSTEM has it) and sends dbus-daemon SIGHUP, as
 * `systemctl reload dbus` does; the reload happens soon after, not before this returns. 0 or -errno. */
int bus_fixture_install_policy(BusFixture *b);
/* Stops dbus-daemon (every connection to it ends) and starts another on the same config and socket
 * path, as `systemctl restart dbus` does; b->address is the new one (its guid differs: a client
 * that is to reconnect must be given the address without it). 0 or -errno. */
int bus_fixture_restart(BusFixture *b);
/* Kills the bus, removes its directory; harmless on a fixture that never started. */
void bus_fixture_stop(BusFixture *b);

/* A client connection to the fixture's bus (as whoever the caller is now). */
int bus_fixture_connect(const BusFixture *b, sd_bus **ret);

/* Seconds one bus round trip takes that does not involve rightsized: a fresh connection and a
 * call of the bus driver's GetId, as guest_view_get() connects and calls. The reference for a
 * test whose point is that a call to rightsized answers promptly: measured beside each timed
 * call, it tells the daemon's own delay from a machine that is slow for everyone. Aborts the
 * test when the bus does not answer. */
double bus_fixture_reference_call_sec(const BusFixture *b);

/* For forked children of the tests: Check's SIGTERM/SIGINT handlers, inherited through fork(),
 * would take the test's process group down; and nothing must outlive the test. */
void test_child_init(void);
/* Forks a child for a program whose output the test reads: test_child_init() done, stdout and
 * stderr into the files out_path and err_path (created or truncated); the child exits 120 when it
 * cannot. The child's pid, 0 in the child. */
pid_t test_fork_with_output(const char *out_path, const char *err_path);

/* A stand-in service in a child of its own (test_child_init() done): serve(ready_fd, userdata)
 * calls test_service_ready() once it can be reached (its name taken on the bus) and never returns.
 * Returns the child's pid once it is ready; fails the test with `failure` if it never was. */
pid_t test_service_start(void (*serve)(int ready_fd, void *userdata), void *userdata, const char *failure);
/* In the service: tells test_service_start() it is ready (exits 1 when it cannot). */
void test_service_ready(int ready_fd);
/* In the service: dispatches what comes on the bus until *done (done NULL: for ever); exits 2 when
 * the bus fails, 3 when it cannot be waited on. */
void test_service_serve(sd_bus *bus, const bool *done);
