/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What every test against the real libvirtd does first. */
#pragma once

/* One libvirtd per host, which each libvirt test starts, restarts and stops: tests run from
 * several build trees at once take turns on this lock (held until the process exits). */
#define LIBVIRT_TEST_LOCK "/run/rightsize-libvirt-test.lock"

/* Checks that the test runs as root (libvirtd, qemu.conf and the libvirt-qemu user need it; CI
 * runs as root), silences libvirt's own error printing (errors are checked through return values),
 * ignores SIGPIPE (a connection to a libvirtd that went away writes into a closed socket), and
 * takes LIBVIRT_TEST_LOCK. 0, or -1 after saying why on stderr: the test fails. */
int libvirt_test_host_enter(const char *test_name);
