/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the two end-to-end tests (test-daemon-real-guest.c on QEMU directly, test-daemon-libvirt.c
 * through libvirtd) share on top of DaemonFixture: sizes in MiB and tolerances, waiting for the
 * estimate to converge, running rightsizectl for its exit status, files and commands, and the
 * ground truth of the test guest's working set.
 *
 * Ground truth. The workload's set is its anonymous MiB, but the balloon sizes the whole guest,
 * so the working set in balloon terms is
 *     (RAM − MemTotal)                what the guest kernel reserved at boot (memmap, code)
 *   + (MemTotal − MemAvailable − RssAnon of rs-workload)   the rest of the guest in use
 *   + anon MiB                        the workload
 * measured through the guest agent once the workload has touched its whole set. */
#pragma once

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/lib/daemon-fixture.h"

/* Adds the end-to-end test case (one test, its setup and teardown) to s and runs the suite without
 * forking: the daemon, the bus and the guest are children of this process, so teardown() can always
 * find and kill them, whatever failed; it runs once more at the end for a setup that failed. The
 * test has timeout_sec from its start (check_set_deadline(): past it, the program ends, after the
 * teardown e2e_teardown_on_signals() named). The exit status (check_run_suite()). */
int e2e_run_suite(Suite *s, const char *name, const TTest *test, void (*setup)(void), void (*teardown)(void),
                  unsigned timeout_sec);

/* Runs teardown on SIGINT and SIGTERM, then dies of the signal as it would have, and when a test
 * misses its deadline (check_set_deadline_cleanup()): QEMU (started in the background by
 * boot-guest), the daemon and the bus would outlive the test otherwise. */
void e2e_teardown_on_signals(void (*teardown)(void));

/* The start of an end-to-end test's setup: teardown runs on SIGINT and SIGTERM (as above) and at
 * exit, the bus runs (open policy) and d has its directories, on that bus. */
void e2e_setup(DaemonFixture *d, BusFixture *bus, void (*teardown)(void));

/* Kills the daemon if it still runs and removes its directory; a daemon still running means the
 * test failed before its clean stop, and then the directory (with the daemon's log) is kept. */
void e2e_daemon_teardown(DaemonFixture *d);

double e2e_now_sec(void);
double mib(uint64_t bytes);
/* |value − truth| ≤ fraction × truth */
bool within(uint64_t value, uint64_t truth, double fraction);

/* Whether a line of the file contains needle (false when the file cannot be read). */
bool file_contains(const char *path, const char *needle);
/* Runs a shell command: its exit status (128 when it did not exit, -errno when it could not run). */
int e2e_run(const char *command);
/* Runs a shell command; its stdout (free it, NULL if it could not run) and exit status (-1 when
 * it did not exit). */
char *e2e_capture(const char *command, int *ret_status);

/* GetGuest through guest_view_get(); a reply the fixture cannot read fails the test. Also keeps
 * the lowest "actual" seen over all calls, for e2e_min_actual_seen(). */
int e2e_get_guest(const DaemonFixture *d, const char *name, GuestView *v);
uint64_t e2e_min_actual_seen(void);
/* One progress line: seconds since t0, state, sizes in MiB, the fault if any. */
void e2e_print_view(const char *what, double t0, const GuestView *v, uint64_t truth);
/* Waits until the estimate is within 15 % of truth, the guest holds, and its actual size is within
 * 3 % of the target; v holds the last view. */
bool e2e_wait_converged(const DaemonFixture *d, const char *name, uint64_t truth, unsigned timeout_sec, double t0,
                        GuestView *v, const char *what);

/* rightsizectl's exit status for the NULL-terminated arguments; its output is dropped. */
int ctl_code_argv(const DaemonFixture *d, const char *const *args);
#define ctl_code(d, ...) ctl_code_argv((d), (const char *const[]) { __VA_ARGS__, NULL })

/* Reads a guest file through the agent into *ret (NUL-terminated, free it); 0 or -errno. */
typedef int (*E2eAgentReadFile)(void *userdata, const char *path, char **ret);
/* The ground truth above less the workload's anonymous set, for a guest of guest_mem bytes whose
 * workload has anon_mib MiB: waits for the workload's second pass on the console first. */
uint64_t e2e_ground_truth_base(const char *console_path, uint64_t guest_mem, unsigned anon_mib,
                               E2eAgentReadFile read_file, void *userdata);
