/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The real rightsized, its CLI and simulated guests (tests/sim/fake-qemu) for the daemon's
 * integration tests: a directory with a config, a policy directory, a state directory and the
 * QMP sockets; the daemon started on a BusFixture's bus with its log in a file; rightsizectl runs
 * with captured output; and the guests read back over D-Bus. Everything the helpers start is
 * killed with the test (PR_SET_PDEATHSIG) if the test dies first. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tests/lib/bus-fixture.h"

typedef struct DaemonFixture {
        char *dir;            /* everything below lives here */
        char *config_path;    /* dir/rightsized.conf */
        char *policy_dir;     /* dir/policies */
        char *state_dir;      /* dir/state */
        char *qmp_dir;        /* dir/qmp: the sockets fake-qemu serves, watched by the daemon */
        char *log_path;       /* dir/rightsized.log: the daemon's stderr, appended across restarts */
        const BusFixture *bus;
        pid_t pid;            /* the daemon, -1 when not running */
        pid_t sims[4];        /* fake-qemu processes, -1 when free */
} DaemonFixture;

/* Creates the directories (mode 0755, so unprivileged callers reach the bus and files). */
void daemon_fixture_init(DaemonFixture *d, const BusFixture *bus);
/* Where most daemon tests start: the bus started with `policy`, daemon_fixture_init() on it and
 * the fixture's config (read group root only); the policies are the caller's to write. */
void daemon_fixture_setup(DaemonFixture *d, BusFixture *bus, BusPolicy policy);
/* Its teardown: daemon_fixture_done(), then the bus stopped. */
void daemon_fixture_teardown(DaemonFixture *d, BusFixture *bus);
/* Stops the daemon with SIGTERM, kills everything else that still runs and removes the directory
 * (unless TEST_KEEP is set); fails the test if the daemon did not exit with status 0 (under ASan,
 * a leak makes it exit non-zero), after printing its log. */
void daemon_fixture_done(DaemonFixture *d);
/* The same without failing the test, for a teardown that may run outside one (atexit, a signal):
 * whether the daemon exited cleanly. */
bool daemon_fixture_release(DaemonFixture *d);

/* Writes rightsized.conf: the directories above, log level info, no host reserve, no libvirt,
 * read-group as given ("" for root only), plus extra lines appended to [daemon] (may be NULL). */
void daemon_fixture_write_config(DaemonFixture *d, const char *read_group, const char *extra_daemon);
/* Replaces the config's first `line` (a whole line, its newline included) with `with` (lines,
 * or "" for none); fails the test when the config has no such line. */
void daemon_fixture_replace_config_line(DaemonFixture *d, const char *line, const char *with);
/* Sets the config's key to value (NULL: removes the key's line), through test_config_with();
 * fails the test when the config does not set key. */
void daemon_fixture_set_config(DaemonFixture *d, const char *key, const char *value);
/* Writes policies/NAME.conf with the given text. */
void daemon_fixture_write_policy(DaemonFixture *d, const char *name, const char *text);

/* The name fake-qemu gives its guest `index`: "sim-INDEX". */
void sim_name(unsigned index, char *buf, size_t size);
/* Starts fake-qemu serving n guests sim-FIRST .. sim-(FIRST+n-1) in qmp_dir, with extra
 * arguments (NULL-terminated list, may be NULL); returns once it printed READY. The slot
 * (0..3) names the process for daemon_fixture_kill_sim(). */
void daemon_fixture_start_sim(DaemonFixture *d, unsigned slot, unsigned first, unsigned n, const char *const *extra);
/* The same with the sockets in another directory (which the config's qmp-sockets must name). */
void daemon_fixture_start_sim_in(DaemonFixture *d, unsigned slot, const char *dir, unsigned first, unsigned n,
                                 const char *const *extra);
void daemon_fixture_kill_sim(DaemonFixture *d, unsigned slot, int sig);
/* Simulated guests running: fake-qemu in slot 0 serving sim-0 .. sim-(n-1) with the extra
 * arguments, then rightsized; returns once every one of them is managed, failing the test if one
 * is not within timeout_sec. */
void daemon_fixture_start_sims(DaemonFixture *d, unsigned n, const char *const *extra, unsigned timeout_sec);

/* Starts rightsized and waits until it owns its bus name. */
void daemon_fixture_start(DaemonFixture *d);
/* Starts rightsized without waiting for anything, with $NOTIFY_SOCKET set to notify_socket (NULL:
 * unset, as daemon_fixture_start() does). */
void daemon_fixture_spawn(DaemonFixture *d, const char *notify_socket);
/* Whether the daemon owns its bus name now. */
bool daemon_fixture_owns_name(const DaemonFixture *d);
/* Sends sig and waits for the exit; returns the wait status. */
int daemon_fixture_stop(DaemonFixture *d, int sig);
/* The daemon still runs (it did not exit or crash). */
bool daemon_fixture_alive(DaemonFixture *d);
/* VmRSS of the daemon in KiB. */
uint64_t daemon_fixture_rss_kib(const DaemonFixture *d);
/* The daemon's log so far (free it). */
char *daemon_fixture_log(const DaemonFixture *d);
/* How many times needle occurs in the log. */
unsigned daemon_fixture_log_count(const DaemonFixture *d, const char *needle);
/* Waits up to timeout_sec for needle to appear in the log. */
bool daemon_fixture_wait_log(const DaemonFixture *d, const char *needle, unsigned timeout_sec);

/* ---- rightsizectl ---- */

typedef struct CtlRun {
        int code;
        char *out, *err;
} CtlRun;
void ctl_run_done(CtlRun *r);

/* Runs rightsizectl on the fixture's bus as uid/gid (uid 0: as the test is) with the
 * NULL-terminated arguments. */
CtlRun ctl_run_as(const DaemonFixture *d, uid_t uid, gid_t gid, ...);
/* The same with the arguments in a NULL-terminated array. */
CtlRun ctl_run_argv(const DaemonFixture *d, uid_t uid, gid_t gid, const char *const *args);
#define ctl_run(d, ...) ctl_run_as((d), 0, 0, __VA_ARGS__, (const char *) NULL)
/* The guest's row of `rightsizectl list` (which must succeed), without its newline (free it);
 * NULL when the guest is not listed. */
char *ctl_list_row(const DaemonFixture *d, const char *name);

/* ---- the guests over D-Bus ---- */

typedef struct GuestView {
        char name[256];
        char state[32];
        char policy[64];
        char mode[32];
        char fault[256];   /* "" when absent */
        char reason[256];
        char source[16];   /* "qemu" or "libvirt" */
        char uuid[40];     /* libvirt domains only */
        uint64_t target, actual, floor, max, estimate, updated; /* 0 when absent */
        uint64_t vmem;     /* virtio-mem-size */
        uint64_t probe_cycles, reprobes_skipped;
        bool has_estimate;
        bool paused;
} GuestView;

/* GetGuest; 0, or -errno (-ENOENT for NoSuchGuest, -EBADMSG for a reply it cannot read). */
int guest_view_get(const DaemonFixture *d, const char *name, GuestView *ret);
/* ListGuests into ret (up to max); the number of guests, or -errno. */
int guest_view_list(const DaemonFixture *d, GuestView *ret, size_t max);
/* A condition on a guest's view, with the caller's data, for guest_view_wait(). */
typedef bool (*GuestViewPredicate)(const GuestView *v, const void *data);
/* Reads the guest's view (GetGuest) every 200 ms until pred(view, data) holds, for up to
 * timeout_sec: whether it held. The last view read goes to *ret (may be NULL; zeroed when none
 * could be read), for the caller's verdict or its message. */
bool guest_view_wait(const DaemonFixture *d, const char *name, GuestViewPredicate pred, const void *data,
                     unsigned timeout_sec, GuestView *ret);
/* A predicate: a sample newer than *(const uint64_t *) data, a view's `updated`. */
bool guest_view_updated_after(const GuestView *v, const void *data);
/* Whether the view is of a managed guest: state neither connecting, faulty nor skipped, and updated known. */
bool guest_view_is_managed(const GuestView *v);
/* Waits until the guest is managed (guest_view_is_managed()). */
bool guest_view_wait_running(const DaemonFixture *d, const char *name, unsigned timeout_sec);
/* The same for sim-first .. sim-(first+n-1), failing the test for the first that is not. */
void guest_view_assert_sims_running(const DaemonFixture *d, unsigned first, unsigned n, unsigned timeout_sec);
/* Asserts the guest is still managed: a new sample (its `updated` time and history advance) with
 * no fault within timeout_sec (a command timing out on a busy machine is a fault for a few
 * intervals: it is waited out), and it is neither faulty nor connecting. */
void guest_assert_managed(const DaemonFixture *d, const char *name, unsigned timeout_sec);
/* The same for sim-INDEX. */
void guest_assert_sim_managed(const DaemonFixture *d, unsigned index, unsigned timeout_sec);
/* Asserts every guest with a known floor has it equal to `floor` and its target and actual at or
 * above it; returns how many guests there were. */
int guests_assert_floors_kept(const DaemonFixture *d, uint64_t floor);
/* Asserts the daemon's RSS is at most twice base_kib plus 16 MiB: a reply or a flood that was
 * buffered whole would show. */
void daemon_fixture_assert_rss_bounded(DaemonFixture *d, uint64_t base_kib);

/* A policy for simulated guests: a 1 s interval, a short hold, and a floor of
 * DAEMON_FIXTURE_FLOOR, above the model's working set (~620 MiB) so that the floor binds. */
#define DAEMON_FIXTURE_FLOOR (768 * MIB)
extern const char daemon_fixture_fast_policy[];
/* Number of GetHistory points, or -errno. The list stops growing at its maximum (360 points, six
 * minutes at 1 s): to see decisions being made, count them with guest_history_since(). */
int guest_history_count(const DaemonFixture *d, const char *name);
/* Number of GetHistory points newer than after_usec (their realtime µs; 0 counts all), or -errno;
 * the newest point's time goes to *ret_newest (0 when there is none; may be NULL). */
int guest_history_since(const DaemonFixture *d, const char *name, uint64_t after_usec, uint64_t *ret_newest);
/* Waits for n more decisions of the guest (GetHistory points newer than its newest now), failing
 * the test if they do not come within timeout_sec. */
void guest_history_wait(const DaemonFixture *d, const char *name, int n, unsigned timeout_sec);

uint64_t monotonic_sec(void);
