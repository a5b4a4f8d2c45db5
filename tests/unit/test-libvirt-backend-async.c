/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The backend's calls on its worker thread (libvirt-backend.h, _async), against libvirt's
 * in-process test driver (test:///default: a real libvirt driver, no daemon, one running
 * domain "test" with a virtio balloon): the stats call reports the domain and runs one at a
 * time, a balloon target set asynchronously reaches the domain and its done runs on the loop,
 * calls the domain cannot take fail before they are queued, and a domain that leaves takes its
 * calls' callbacks with it. The agent's worker (libvirt-agent.h) on the test driver's domains,
 * with a stand-in for the agent's command (the test driver has no agent): a domain whose agent
 * answers just before each timeout holds one thread until its read's deadline, while another
 * domain's reads go on; a read that asks guest-get-osinfo first reads no /proc of a Windows
 * guest. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <systemd/sd-event.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-agent.h"
#include "daemon/libvirt/libvirt-backend.h"
#include "tests/lib/check-run.h"

#define URI "test:///default"

typedef struct Seen {
        char uuid[VIR_UUID_STRING_BUFLEN];
        unsigned added, removed, connected;
        unsigned collected;
        int collect_error;
        bool found;
        uint64_t maximum;
        unsigned calls_done;
        unsigned calls_done_at_removal;
        int call_error;
} Seen;

static Seen seen;

static void on_added(LibvirtBackend *b _unused_, const LibvirtDomainInfo *info, bool changed _unused_,
                     void *userdata _unused_) {
        if (strcmp(info->name, "test") != 0)
                return;
        snprintf(seen.uuid, sizeof(seen.uuid), "%s", info->uuid);
        seen.maximum = info->maximum;
        seen.added++;
}

static void on_removed(LibvirtBackend *b _unused_, const char *uuid _unused_, const char *name, const char *why _unused_,
                       void *userdata _unused_) {
        if (strcmp(name, "test") != 0)
                return;
        seen.removed++;
        seen.calls_done_at_removal = seen.calls_done;
}

static void on_connection(LibvirtBackend *b _unused_, bool connected, void *userdata _unused_) {
        seen.connected += connected;
}

static const LibvirtBackendCallbacks callbacks = {
        .domain_added = on_added,
        .domain_removed = on_removed,
        .connection_changed = on_connection,
};

static void on_collected(LibvirtBackend *b _unused_, int error, LibvirtDomainStats *stats, size_t n, void *userdata) {
        ck_assert_ptr_eq(userdata, &seen);
        ck_assert_uint_eq(n, 1);
        seen.collected++;
        seen.collect_error = error;
        seen.found = stats[0].found;
        if (stats[0].found)
                ck_assert_str_eq(stats[0].name, "test");
}

static void on_call_done(LibvirtBackend *b _unused_, const char *uuid, int error, void *userdata) {
        ck_assert_ptr_eq(userdata, &seen);
        ck_assert_str_eq(uuid, seen.uuid);
        seen.calls_done++;
        seen.call_error = error;
}

static uint64_t monotonic_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

/* Runs the loop until cond() holds; gives up at a deadline far beyond what a loaded machine
 * needs (a hang, not a timing bound). */
#define RUN_DEADLINE_USEC (30 * USEC_PER_SEC)
static void run_until(sd_event *e, bool (*cond)(void)) {
        for (uint64_t end = monotonic_usec() + RUN_DEADLINE_USEC; !cond() && monotonic_usec() < end;)
                ck_assert_int_ge(sd_event_run(e, 50 * USEC_PER_MSEC), 0);
        ck_assert(cond());
}

static bool is_up(void) {
        return seen.connected > 0 && seen.added > 0;
}

static bool collected(void) {
        return seen.collected > 0;
}

static bool removed(void) {
        return seen.removed > 0;
}

static bool call_done(void) {
        return seen.calls_done > 0;
}

static LibvirtBackend *backend_up(sd_event **ret_event) {
        LibvirtBackend *b = NULL;
        const LibvirtBackendConfig config = { .uri = URI, .manage_all = true, .call_timeout_usec = 5 * USEC_PER_SEC };

        memset(&seen, 0, sizeof(seen));
        ck_assert_int_eq(sd_event_new(ret_event), 0);
        ck_assert_int_eq(libvirt_backend_new(*ret_event, &config, &callbacks, NULL, &b), 0);
        run_until(*ret_event, is_up);
        ck_assert_ptr_null(libvirt_backend_get_domain(b, seen.uuid)->skip_reason);
        return b;
}

START_TEST(test_stats_async) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtBackend *b = backend_up(&e);
        LibvirtDomainStats request = {};

        memcpy(request.uuid, seen.uuid, sizeof(request.uuid));
        ck_assert_int_eq(libvirt_backend_collect_async(b, &request, 1, on_collected, &seen), 0);
        /* One in flight at a time. */
        ck_assert(libvirt_backend_collect_busy(b));
        ck_assert_int_eq(libvirt_backend_collect_async(b, &request, 1, on_collected, &seen), -EBUSY);
        run_until(e, collected);
        ck_assert_uint_eq(seen.collected, 1);
        ck_assert_int_ge(seen.collect_error, 0);
        ck_assert(seen.found);
        ck_assert(!libvirt_backend_collect_busy(b));
        /* And the next one may go. */
        ck_assert_int_eq(libvirt_backend_collect_async(b, &request, 1, on_collected, &seen), 0);
        seen.collected = 0;
        run_until(e, collected);
        libvirt_backend_free(b);
}
END_TEST

START_TEST(test_balloon_async) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtBackend *b = backend_up(&e);
        virDomainPtr dom;
        virDomainInfo info;

        ck_assert_uint_gt(seen.maximum, 1024 * MIB);
        ck_assert_int_eq(libvirt_backend_set_balloon_async(b, seen.uuid, 1024 * MIB, on_call_done, &seen), 0);
        /* Queued, not done: the done runs on the loop. */
        ck_assert_uint_eq(seen.calls_done, 0);
        run_until(e, call_done);
        ck_assert_uint_eq(seen.calls_done, 1);
        ck_assert_int_eq(seen.call_error, 0);
        dom = virDomainLookupByUUIDString(libvirt_backend_get_connection(b), seen.uuid);
        ck_assert_ptr_nonnull(dom);
        ck_assert_int_eq(virDomainGetInfo(dom, &info), 0);
        ck_assert_uint_eq(info.memory, 1024 * 1024);
        virDomainFree(dom);

        /* Refused before queueing: no virtio-mem, DIMMs not allowed, unknown domain. */
        uint64_t requested = 0;
        ck_assert_int_eq(libvirt_backend_set_virtio_mem_async(b, seen.uuid, NULL, 256 * MIB, &requested, on_call_done,
                                                              &seen),
                         -ENODEV);
        ck_assert_int_eq(libvirt_backend_attach_dimm_async(b, seen.uuid, 256 * MIB, 0, false, on_call_done, &seen),
                         -EPERM);
        ck_assert_int_eq(libvirt_backend_set_balloon_async(b, "00000000-0000-0000-0000-000000000000", 1024 * MIB,
                                                           on_call_done, &seen),
                         -ENOENT);
        libvirt_backend_free(b);
        ck_assert_uint_eq(seen.calls_done, 1);
}
END_TEST

/* A domain that leaves with a call in flight: its done may have run before (the call was quick),
 * never after. */
START_TEST(test_domain_leaves) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtBackend *b = backend_up(&e);
        virDomainPtr dom;

        ck_assert_int_eq(libvirt_backend_set_balloon_async(b, seen.uuid, 1536 * MIB, on_call_done, &seen), 0);
        dom = virDomainLookupByUUIDString(libvirt_backend_get_connection(b), seen.uuid);
        ck_assert_ptr_nonnull(dom);
        /* On the loop's thread, before the loop runs: the balloon call is still queued or
         * running, and its result not handed back. */
        ck_assert_int_eq(virDomainDestroy(dom), 0);
        virDomainFree(dom);
        run_until(e, removed);
        ck_assert_uint_eq(seen.removed, 1);
        /* A barrier instead of a quiet spell: the worker runs its jobs in order and hands their
         * results back in order, so once a stats call queued now is done, the balloon call has
         * run and its done either ran already or was dropped. */
        LibvirtDomainStats request = {};
        memcpy(request.uuid, seen.uuid, sizeof(request.uuid));
        ck_assert_int_eq(libvirt_backend_collect_async(b, &request, 1, on_collected, &seen), 0);
        run_until(e, collected);
        ck_assert(!seen.found); /* the domain is gone */
        fprintf(stderr, "balloon call done %s the domain left\n", seen.calls_done > 0 ? "before" : "never: dropped when");
        ck_assert_uint_eq(seen.calls_done, seen.calls_done_at_removal);
        libvirt_backend_free(b);
}
END_TEST

/* ---- the agent's worker ---- */

#define SLOW_NAME "slow-agent"

static atomic_int slow_calls, honest_calls;
static atomic_bool slow_hold;              /* the slow agent waits (as one that never answers) */

typedef struct AgentSeen {
        unsigned done;
        int error;
} AgentSeen;

static AgentSeen slow_seen, honest_seen;

/* guest-file-open (handle 1 for /proc/vmstat, 3 for /proc/zoneinfo, 2 for PSI), -read (one
 * chunk: "pgmajfault 7", one zone's watermarks 100/125/150, or a quiet PSI), -close, as
 * qemu-ga answers them. */
static char *fake_reply(const char *command) {
        if (strstr(command, "guest-file-open"))
                return strdup(strstr(command, "vmstat")     ? "{\"return\": 1}"
                              : strstr(command, "zoneinfo") ? "{\"return\": 3}"
                                                            : "{\"return\": 2}");
        if (strstr(command, "guest-file-read") && strstr(command, "\"handle\":3"))
                return strdup("{\"return\": {\"count\": 107, \"buf-b64\": \"Tm9kZSAwLCB6b25lICAgIERNQTMyCiAgICAgICAgbWluICAgICAgMTAwCiAgICAgICAgbG93ICAgICAgMTI1CiAgICAgICAgaGlnaCAgICAgMTUwCiAgICAgICAgbWFuYWdlZCAgMTAwMAo=\", \"eof\": true}}");
        if (strstr(command, "guest-file-read") && strstr(command, "\"handle\":1"))
                /* base64 of "pgmajfault 7\n" */
                return strdup("{\"return\": {\"count\": 13, \"buf-b64\": \"cGdtYWpmYXVsdCA3Cg==\", \"eof\": true}}");
        if (strstr(command, "guest-file-read"))
                return strdup("{\"return\": {\"count\": 96, \"buf-b64\": \"c29tZSBhdmcxMD0wLjAwIGF2ZzYwPTAuMDAgYXZnMzAwPTAuMDAgdG90YWw9MApmdWxsIGF2ZzEwPTAuMDAgYXZnNjA9MC4wMCBhdmczMDA9MC4wMCB0b3RhbD0wCg==\", \"eof\": true}}");
        return strdup("{\"return\": {}}");
}

/* The slow domain's agent answers 100 ms before each call's timeout, or, while slow_hold is
 * set, only then: a read takes all its calls' timeouts. */
static char *fake_agent_command(virDomainPtr dom, const char *command, int timeout, unsigned flags _unused_) {
        if (strcmp(virDomainGetName(dom), SLOW_NAME) == 0) {
                atomic_fetch_add(&slow_calls, 1);
                do
                        (void) usleep((useconds_t) (timeout * 1000000 - 100000));
                while (atomic_load(&slow_hold));
        } else
                atomic_fetch_add(&honest_calls, 1);
        return fake_reply(command);
}

static void on_agent_read(int error, const GuestVmstat *vmstat, const GuestPsi *psi _unused_,
                          const char *message _unused_, void *userdata) {
        AgentSeen *a = userdata;

        a->done++;
        a->error = error;
        if (error >= 0)
                ck_assert_uint_eq(vmstat->value[GUEST_VMSTAT_PGMAJFAULT], 7);
}

static bool honest_read_twice(void) {
        return honest_seen.done >= 2;
}

/* The honest domain's two reads done, and the slow domain's first call begun: on a busy machine
 * the slow domain's thread may not have reached its call when the other thread is done. */
static bool honest_read_twice_slow_begun(void) {
        return honest_read_twice() && atomic_load(&slow_calls) >= 1;
}

static bool slow_read_done(void) {
        return slow_seen.done > 0;
}

static virDomainPtr slow_domain_new(virConnectPtr conn) {
        virDomainPtr dom = virDomainCreateXML(conn,
                                              "<domain type='test'><name>" SLOW_NAME "</name>"
                                              "<memory unit='MiB'>512</memory><os><type>hvm</type></os></domain>",
                                              0);
        ck_assert_ptr_nonnull(dom);
        return dom;
}

/* Two threads: while the slow domain's read hangs, the honest domain's reads are done, one after
 * the other; the slow domain's second read waits for its first, not on the other thread. */
START_TEST(test_agent_slow_domain_does_not_delay_others) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        const LibvirtAgentWorkerConfig config = {
                /* A short deadline only so that the slow reads end soon once let go. */
                .threads = 2, .job_deadline_usec = 1 * USEC_PER_SEC, .command = fake_agent_command,
        };
        LibvirtAgentWorker *w = NULL;
        virConnectPtr conn = virConnectOpen(URI);
        virDomainPtr honest, slow;

        ck_assert_ptr_nonnull(conn);
        honest = virDomainLookupByName(conn, "test");
        ck_assert_ptr_nonnull(honest);
        slow = slow_domain_new(conn);
        atomic_store(&slow_hold, true);
        atomic_store(&slow_calls, 0);
        slow_seen = (AgentSeen){};
        honest_seen = (AgentSeen){};
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_agent_worker_new_full(e, &config, &w), 0);

        ck_assert_int_eq(libvirt_agent_submit(w, slow, on_agent_read, &slow_seen, NULL), 0);
        ck_assert_int_eq(libvirt_agent_submit(w, slow, on_agent_read, &slow_seen, NULL), 0);
        ck_assert_int_eq(libvirt_agent_submit(w, honest, on_agent_read, &honest_seen, NULL), 0);
        ck_assert_int_eq(libvirt_agent_submit(w, honest, on_agent_read, &honest_seen, NULL), 0);
        run_until(e, honest_read_twice_slow_begun);
        ck_assert_int_eq(honest_seen.error, 0);
        ck_assert_uint_eq(slow_seen.done, 0);
        /* One read of the slow domain at a time: its first call, and no other. */
        ck_assert_int_eq(atomic_load(&slow_calls), 1);

        atomic_store(&slow_hold, false);
        libvirt_agent_worker_free(w);
        virDomainDestroy(slow);
        virDomainFree(slow);
        virDomainFree(honest);
        virConnectClose(conn);
}
END_TEST

/* A read's calls share one deadline: the agent that answers just before each 5 s timeout ends
 * its read after two calls (2 s, then the second left), not after six (30 s). */
START_TEST(test_agent_read_deadline) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        const LibvirtAgentWorkerConfig config = {
                .threads = 1, .job_deadline_usec = 2 * USEC_PER_SEC, .command = fake_agent_command,
        };
        LibvirtAgentWorker *w = NULL;
        virConnectPtr conn = virConnectOpen(URI);
        virDomainPtr slow;

        ck_assert_ptr_nonnull(conn);
        slow = slow_domain_new(conn);
        atomic_store(&slow_hold, false);
        atomic_store(&slow_calls, 0);
        slow_seen = (AgentSeen){};
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(libvirt_agent_worker_new_full(e, &config, &w), 0);
        ck_assert_int_eq(libvirt_agent_submit(w, slow, on_agent_read, &slow_seen, NULL), 0);
        run_until(e, slow_read_done);
        ck_assert_int_eq(slow_seen.error, -ETIMEDOUT);
        /* A whole read is six calls (open, read, close for vmstat and for PSI). */
        ck_assert_int_lt(atomic_load(&slow_calls), 6);

        libvirt_agent_worker_free(w);
        virDomainDestroy(slow);
        virDomainFree(slow);
        virConnectClose(conn);
}
END_TEST

/* guest-get-osinfo first (libvirt_agent_submit_full()): qemu-ga for Windows' answer
 * (qga/commands-win32.c) ends the read there; a Linux agent's, or none (an agent without the
 * command), lets it go on to /proc. */
typedef enum OsAgent { OS_WINDOWS, OS_LINUX, OS_NO_COMMAND } OsAgent;
static OsAgent os_agent;
static atomic_int os_calls, os_file_opens;

static char *os_agent_command(virDomainPtr dom _unused_, const char *command, int timeout _unused_,
                              unsigned flags _unused_) {
        atomic_fetch_add(&os_calls, 1);
        if (strstr(command, "guest-get-osinfo")) {
                if (os_agent == OS_NO_COMMAND)
                        return NULL; /* libvirt's error for the agent's CommandNotFound */
                return strdup(os_agent == OS_WINDOWS
                                      ? "{\"return\": {\"kernel-version\": \"10.0\", \"kernel-release\": \"20348\", "
                                        "\"machine\": \"x86_64\", \"id\": \"mswindows\", \"name\": \"Microsoft Windows\", "
                                        "\"pretty-name\": \"Windows Server 2022 Datacenter\", \"variant\": \"server\"}}"
                                      : "{\"return\": {\"kernel-release\": \"6.1.0-18-amd64\", \"id\": \"debian\", "
                                        "\"pretty-name\": \"Debian GNU/Linux 12 (bookworm)\"}}");
        }
        if (strstr(command, "guest-file-open"))
                atomic_fetch_add(&os_file_opens, 1);
        return fake_reply(command);
}

typedef struct OsSeen {
        unsigned done;
        int error;
        bool read;                /* vmstat was handed over */
        bool os_known;
        QgaOsFamily family;
        int zoneinfo_error;
        uint64_t wmark_high;
        LibvirtAgentJob *job;
} OsSeen;

static OsSeen os_seen;

static void on_os_read(int error, const GuestVmstat *vmstat, const GuestPsi *psi _unused_, const char *message _unused_,
                       void *userdata) {
        OsSeen *s = userdata;
        const QgaOsInfo *os = libvirt_agent_job_os(s->job);
        s->done++;
        s->error = error;
        s->read = vmstat != NULL;
        s->os_known = os != NULL;
        s->family = os ? os->family : QGA_OS_UNKNOWN;
        const GuestZoneinfo *z = libvirt_agent_job_zoneinfo(s->job, &s->zoneinfo_error);
        s->wmark_high = z ? z->high : 0;
        if (vmstat)
                ck_assert_uint_eq(vmstat->value[GUEST_VMSTAT_PGMAJFAULT], 7);
}

static bool os_read_done(void) {
        return os_seen.done > 0;
}

START_TEST(test_agent_asks_os_first) {
        static const struct {
                OsAgent agent;
                bool read, os_known;
                QgaOsFamily family;
                int opens;
        } cases[] = {
                { OS_WINDOWS, false, true, QGA_OS_WINDOWS, 0 },
                { OS_LINUX, true, true, QGA_OS_OTHER, 3 }, /* and /proc/zoneinfo, asked for */
                { OS_NO_COMMAND, true, false, QGA_OS_UNKNOWN, 2 },
        };
        const LibvirtAgentWorkerConfig config = {
                .threads = 1, .job_deadline_usec = 5 * USEC_PER_SEC, .command = os_agent_command,
        };
        virConnectPtr conn = virConnectOpen(URI);
        ck_assert_ptr_nonnull(conn);
        virDomainPtr dom = virDomainLookupByName(conn, "test");
        ck_assert_ptr_nonnull(dom);

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_(sd_event_unrefp) sd_event *e = NULL;
                LibvirtAgentWorker *w = NULL;

                os_agent = cases[i].agent;
                atomic_store(&os_calls, 0);
                atomic_store(&os_file_opens, 0);
                os_seen = (OsSeen) {};
                ck_assert_int_eq(sd_event_new(&e), 0);
                ck_assert_int_eq(libvirt_agent_worker_new_full(e, &config, &w), 0);
                bool zoneinfo = cases[i].agent == OS_LINUX;
                ck_assert_int_eq(libvirt_agent_submit_full(w, dom, true, zoneinfo, on_os_read, &os_seen, &os_seen.job), 0);
                run_until(e, os_read_done);
                ck_assert_int_eq(os_seen.error, 0);
                ck_assert_msg(os_seen.read == cases[i].read, "case %zu: read %d", i, os_seen.read);
                ck_assert_msg(os_seen.os_known == cases[i].os_known, "case %zu: os known %d", i, os_seen.os_known);
                ck_assert_int_eq(os_seen.family, cases[i].family);
                ck_assert_int_eq(atomic_load(&os_file_opens), cases[i].opens);
                /* zoneinfo when asked for and read, its one zone's high watermark in bytes */
                ck_assert_int_eq(os_seen.zoneinfo_error, zoneinfo ? 0 : -ENODATA);
                ck_assert_uint_eq(os_seen.wmark_high, zoneinfo ? 150 * 4096 : 0);
                if (cases[i].agent == OS_WINDOWS)
                        ck_assert_int_eq(atomic_load(&os_calls), 1); /* the one question, nothing more */
                libvirt_agent_worker_free(w);
        }
        virDomainFree(dom);
        virConnectClose(conn);
}
END_TEST

START_TEST(test_agent_call_timeout) {
        ck_assert_int_eq(libvirt_agent_call_timeout(UINT64_MAX, 123), LIBVIRT_AGENT_TIMEOUT_SEC);
        ck_assert_int_eq(libvirt_agent_call_timeout(100 * USEC_PER_SEC, 0), LIBVIRT_AGENT_TIMEOUT_SEC);
        ck_assert_int_eq(libvirt_agent_call_timeout(100 * USEC_PER_SEC, 98 * USEC_PER_SEC), 2);
        ck_assert_int_eq(libvirt_agent_call_timeout(100 * USEC_PER_SEC, 100 * USEC_PER_SEC - 1), 1);
        ck_assert_int_eq(libvirt_agent_call_timeout(100 * USEC_PER_SEC, 100 * USEC_PER_SEC), -ETIMEDOUT);
}
END_TEST

static void quiet_error(void *userdata _unused_, virErrorPtr error _unused_) {
}

int main(void) {
        virSetErrorFunc(NULL, quiet_error);
        return check_run_case("libvirt-backend-async", "test-driver", NULL, NULL, 60,
                              CHECK_TESTS(test_stats_async, test_balloon_async, test_domain_leaves,
                                          test_agent_slow_domain_does_not_delay_others, test_agent_read_deadline,
                                          test_agent_asks_os_first, test_agent_call_timeout));
}
