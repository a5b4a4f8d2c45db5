/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every test against the real libvirtd does first, and last. */
#pragma once

#include <check.h>
#include <libvirt/libvirt.h>

/* One libvirtd per host, which each libvirt test starts, restarts and stops: tests run from
 * several build trees at once take turns on this lock (held until the process exits). */
#define LIBVIRT_TEST_LOCK "/run/rightsize-libvirt-test.lock"
/* The libvirtd contrib/libvirt-setup starts. */
#define LIBVIRT_TEST_URI "qemu:///system"

/* Checks that the test runs as root (libvirtd, qemu.conf and the libvirt-qemu user need it; CI
 * runs as root), silences libvirt's own error printing (errors are checked through return values),
 * ignores SIGPIPE (a connection to a libvirtd that went away writes into a closed socket), and
 * takes LIBVIRT_TEST_LOCK. 0, or after saying why on stderr the exit status to end with: a skip
 * (77) when not root outside strict mode (check_program_cannot_set_up()), a failure otherwise. */
int libvirt_test_host_enter(const char *test_name);

/* The main of an end-to-end test against the real libvirtd, with its one test: the suite `suite`
 * run by e2e_run_suite() (no fork: the daemon, the bus and libvirtd must be cleaned up whatever
 * failed) once libvirt_test_host_enter() let it (as "test-SUITE"). The exit status. */
int libvirt_test_host_run(const char *suite, const char *name, const TTest *test, void (*setup)(void),
                          void (*teardown)(void), unsigned timeout_sec);

/* The libvirt end of a test's teardown, harmless when it runs again: closes *conn if open; then,
 * unless domains[0] is "" (none started, or this ran before), destroys and undefines each of the
 * domains (NULL-terminated; a transient one is gone once destroyed), stops libvirtd
 * (contrib/libvirt-setup --stop) and empties domains[0]. Nothing is checked: a teardown runs
 * whatever failed. */
void libvirt_test_host_leave(virConnectPtr *conn, char *const *domains);
