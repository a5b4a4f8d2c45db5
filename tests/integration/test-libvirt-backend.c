/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt backend against a real libvirtd and the real test guest (TCG). The test starts
 * libvirtd itself through contrib/libvirt-setup (CI has no systemd as PID 1) and stops it at
 * the end, whatever happened. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-agent.h"
#include "daemon/libvirt/libvirt-backend.h"
#include "daemon/log.h"
#include "tests/lib/check-run.h"
#include "tests/lib/e2e-common.h"
#include "tests/lib/libvirt-test-host.h"

#define MEM_MIB 1024
#define DOMAIN_NAME_MAX 64

static char domain_name[DOMAIN_NAME_MAX];
static char run_dir[] = "/tmp/rs-libvirt-XXXXXX";
static const char *top_srcdir;

/* What the callbacks saw. */
typedef struct Seen {
        char uuid[VIR_UUID_STRING_BUFLEN];
        unsigned added, changed, removed;
        char policy[64];
        char removed_why[64];
        bool skipped;
        unsigned balloon_events;
        uint64_t balloon_actual;
        unsigned memdev_events;
        uint64_t memdev_size;
        unsigned connected, disconnected;
} Seen;

static Seen seen;

static void on_added(LibvirtBackend *b _unused_, const LibvirtDomainInfo *info, bool changed, void *userdata _unused_) {
        if (strcmp(info->name, domain_name) != 0)
                return;
        snprintf(seen.uuid, sizeof(seen.uuid), "%s", info->uuid);
        snprintf(seen.policy, sizeof(seen.policy), "%s", info->policy ? info->policy : "");
        seen.skipped = info->skip_reason != NULL;
        if (changed)
                seen.changed++;
        else
                seen.added++;
}

static void on_removed(LibvirtBackend *b _unused_, const char *uuid _unused_, const char *name, const char *why,
                       void *userdata _unused_) {
        if (strcmp(name, domain_name) != 0)
                return;
        seen.removed++;
        snprintf(seen.removed_why, sizeof(seen.removed_why), "%s", why);
}

static void on_balloon(LibvirtBackend *b _unused_, const char *uuid, uint64_t actual, void *userdata _unused_) {
        if (strcmp(uuid, seen.uuid) != 0)
                return;
        seen.balloon_events++;
        seen.balloon_actual = actual;
}

static void on_memdev(LibvirtBackend *b _unused_, const char *uuid, const char *alias _unused_, uint64_t size,
                      void *userdata _unused_) {
        if (strcmp(uuid, seen.uuid) != 0)
                return;
        seen.memdev_events++;
        seen.memdev_size = size;
}

static void on_connection(LibvirtBackend *b _unused_, bool connected, void *userdata _unused_) {
        if (connected)
                seen.connected++;
        else
                seen.disconnected++;
}

static double now_sec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* The deadlines below are what an unloaded machine needs with room to spare; a busy one (other
 * TCG guests, a CPU hog) gets this many times as long. They end a hang: nothing here is timed. */
#define WAIT_FACTOR 4

/* Runs the loop until cond holds or WAIT_FACTOR times `seconds` pass. */
#define RUN_UNTIL(event, cond, seconds)                                                \
        ({                                                                             \
                double _deadline_ = now_sec() + WAIT_FACTOR * (seconds);               \
                while (!(cond) && now_sec() < _deadline_)                              \
                        ck_assert_int_ge(sd_event_run((event), 100 * USEC_PER_MSEC), 0); \
                (cond);                                                                \
        })

static int run(const char *cmd) {
        int r = system(cmd);
        return r == -1 ? -errno : WIFEXITED(r) ? WEXITSTATUS(r) : 128;
}

static char *capture(const char *cmd) {
        FILE *f = popen(cmd, "r");
        char *buf = NULL;
        size_t size = 0;
        FILE *m;

        if (!f)
                return NULL;
        m = open_memstream(&buf, &size);
        if (!m) {
                pclose(f);
                return NULL;
        }
        for (int c; (c = fgetc(f)) != EOF;)
                fputc(c, m);
        fclose(m);
        if (pclose(f) != 0) {
                free(buf);
                return NULL;
        }
        return buf;
}

static bool console_ready(void) {
        char path[128], line[512];
        bool ready = false;
        FILE *f;

        snprintf(path, sizeof(path), "%s/console.log", run_dir);
        f = fopen(path, "r");
        if (!f)
                return false;
        while (fgets(line, sizeof(line), f))
                if (strncmp(line, "RIGHTSIZE-GUEST-READY", 21) == 0)
                        ready = true;
        fclose(f);
        return ready;
}

/* "Used memory:    785408 KiB" from virsh dominfo, in KiB. */
static uint64_t virsh_value(const char *subcommand, const char *key) {
        char cmd[256];
        _cleanup_free_ char *out = NULL;
        const char *p;

        snprintf(cmd, sizeof(cmd), "virsh -c qemu:///system %s %s", subcommand, domain_name);
        out = capture(cmd);
        if (!out)
                return UINT64_MAX;
        for (p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, key, strlen(key)) == 0)
                        return strtoull(p + strlen(key), NULL, 10);
        return UINT64_MAX;
}

typedef struct StatsSeen {
        bool found;
        LibvirtStats stats;
} StatsSeen;

static void on_stats(LibvirtBackend *b _unused_, const char *uuid, const char *name _unused_, const LibvirtStats *stats,
                     void *userdata) {
        StatsSeen *s = userdata;
        if (strcmp(uuid, seen.uuid) == 0) {
                s->found = true;
                s->stats = *stats;
        }
}

typedef struct AgentSeen {
        unsigned done;
        int error;
        GuestVmstat vmstat;
        bool psi_known;
        unsigned ticks_before_done;
} AgentSeen;

static unsigned loop_ticks;

static int on_loop_tick(sd_event_source *s, uint64_t usec, void *userdata _unused_) {
        loop_ticks++;
        (void) sd_event_source_set_time(s, usec + 2 * USEC_PER_MSEC);
        return 0;
}

static void on_agent_job(int error, const GuestVmstat *vmstat, const GuestPsi *psi, const char *message,
                         void *userdata) {
        AgentSeen *a = userdata;
        a->done++;
        a->error = error;
        a->ticks_before_done = loop_ticks;
        if (error >= 0) {
                a->vmstat = *vmstat;
                a->psi_known = psi->some.known;
        } else
                fprintf(stderr, "agent job: %s\n", message ?: "?");
}

static void stamp(const char *what, double since) {
        fprintf(stderr, "test-libvirt-backend: %s: %.2f s\n", what, now_sec() - since);
}

START_TEST(test_libvirt_backend) {
        _cleanup_free_ char *xml = NULL;
        char cmd[1024];
        sd_event *event = NULL;
        LibvirtBackend *b = NULL;
        virConnectPtr conn;
        virDomainPtr dom;
        const LibvirtDomainInfo *info;
        StatsSeen st = {};
        double t0, t;
        uint64_t target, requested = 0;
        int r;

        t0 = now_sec();
        snprintf(cmd, sizeof(cmd), "%s/contrib/libvirt-setup", top_srcdir);
        ck_assert_msg(run(cmd) == 0, "contrib/libvirt-setup failed");
        stamp("libvirtd up", t0);

        snprintf(cmd, sizeof(cmd),
                 "truncate -s 256M %s/swap.img && %s/contrib/guest-domain-xml --name %s --policy balanced "
                 "--swap-image %s/swap.img --console-log %s/console.log --mem %dM "
                 "--workload '--anon-mib 100 --sleep-ms 500'",
                 run_dir, top_srcdir, domain_name, run_dir, run_dir, MEM_MIB);
        xml = capture(cmd);
        ck_assert_msg(xml, "guest-domain-xml failed");

        ck_assert_int_eq(sd_event_new(&event), 0);
        const LibvirtBackendCallbacks callbacks = {
                .domain_added = on_added,
                .domain_removed = on_removed,
                .balloon_changed = on_balloon,
                .memory_device_changed = on_memdev,
                .connection_changed = on_connection,
        };
        ck_assert_int_eq(libvirt_backend_new(event, NULL, &callbacks, NULL, &b), 0);
        /* The open runs on a thread: connected once the loop has run. */
        ck_assert_msg(RUN_UNTIL(event, libvirt_backend_is_connected(b), 10), "no connection");
        ck_assert_uint_eq(seen.connected, 1);

        /* The test's own connection, for what an operator would do. */
        conn = virConnectOpen("qemu:///system");
        ck_assert_ptr_nonnull(conn);
        dom = virDomainDefineXML(conn, xml);
        ck_assert_msg(dom, "define: %s", virGetLastErrorMessage());

        /* Started -> picked up from the lifecycle event, with the policy from the metadata. */
        t = now_sec();
        ck_assert_msg(virDomainCreate(dom) == 0, "start: %s", virGetLastErrorMessage());
        ck_assert_msg(RUN_UNTIL(event, seen.added == 1, 20), "no domain_added after start");
        stamp("start to domain_added", t);
        ck_assert_str_eq(seen.policy, "balanced");
        ck_assert(!seen.skipped);
        info = libvirt_backend_get_domain(b, seen.uuid);
        ck_assert_ptr_nonnull(info);
        ck_assert(info->agent_channel);
        ck_assert(info->free_page_reporting);
        ck_assert_str_eq(info->virtio_mem_alias, "virtiomem0");
        ck_assert_uint_eq(info->virtio_mem_block, 2 * MIB);
        ck_assert_uint_eq(info->maximum, (uint64_t) MEM_MIB * MIB);
        ck_assert_msg(RUN_UNTIL(event, console_ready(), 60), "guest not ready");
        stamp("start to guest ready", t);

        /* One bulk stats call; the balloon reports every second once the driver is up. */
        t = now_sec();
        ck_assert_msg(RUN_UNTIL(event,
                                (st = (StatsSeen) {}, libvirt_backend_collect_all(b, on_stats, &st) >= 1 && st.found &&
                                                              st.stats.guest.last_update > 0 &&
                                                              qmp_value_is_known(st.stats.guest.value[QMP_STAT_TOTAL_MEMORY])),
                                15),
                      "no balloon stats");
        stamp("guest ready to first stats", t);
        {
                uint64_t total = st.stats.guest.value[QMP_STAT_TOTAL_MEMORY];
                uint64_t free_mem = st.stats.guest.value[QMP_STAT_FREE_MEMORY];
                uint64_t avail = st.stats.guest.value[QMP_STAT_AVAILABLE_MEMORY];
                fprintf(stderr, "stats: actual %" PRIu64 " total %" PRIu64 " free %" PRIu64 " avail %" PRIu64
                                " rss %" PRIu64 " MiB\n",
                        st.stats.actual / MIB, total / MIB, free_mem / MIB, avail / MIB, st.stats.rss / MIB);
                ck_assert_uint_eq(st.stats.actual, (uint64_t) MEM_MIB * MIB);
                /* MemTotal: the domain's memory less what the kernel reserves. */
                ck_assert_uint_le(total, (uint64_t) MEM_MIB * MIB);
                ck_assert_uint_ge(total, (uint64_t) (MEM_MIB - 128) * MIB);
                ck_assert_uint_le(free_mem, total);
                ck_assert_uint_le(avail, total);
                ck_assert_uint_ge(avail, free_mem / 2);
                ck_assert(qmp_value_is_known(st.stats.rss) && st.stats.rss > 0);
                ck_assert(qmp_value_is_known(st.stats.guest.value[QMP_STAT_MINOR_FAULTS]));
        }

        /* Balloon down 256 MiB: BALLOON_CHANGE arrives, virsh agrees. */
        target = (uint64_t) (MEM_MIB - 256) * MIB;
        t = now_sec();
        ck_assert_int_eq(libvirt_backend_set_balloon(b, seen.uuid, target), 0);
        ck_assert_msg(RUN_UNTIL(event, seen.balloon_actual == target, 20), "no BALLOON_CHANGE to target (last %" PRIu64 ")",
                      seen.balloon_actual);
        stamp("balloon -256 MiB to BALLOON_CHANGE", t);
        ck_assert_uint_eq(virsh_value("dominfo", "Used memory:"), target / KIB);
        ck_assert_uint_eq(virsh_value("dommemstat", "actual "), target / KIB);

        /* virtio-mem: an unaligned wish is rounded up to the 2 MiB block. */
        t = now_sec();
        ck_assert_int_eq(libvirt_backend_set_virtio_mem(b, seen.uuid, NULL, 300 * MIB + 1, &requested), 0);
        ck_assert_uint_eq(requested, 302 * MIB);
        ck_assert_msg(RUN_UNTIL(event, seen.memdev_size == requested, 30), "virtio-mem did not reach %" PRIu64,
                      requested);
        stamp("virtio-mem 302 MiB to MEMORY_DEVICE_SIZE_CHANGE", t);
        {
                _cleanup_free_ char *live = virDomainGetXMLDesc(dom, 0);
                _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};
                const LibvirtVirtioMem *vm;
                ck_assert_ptr_nonnull(live);
                ck_assert_int_eq(libvirt_domain_xml_parse(live, &x), 0);
                vm = libvirt_domain_xml_find_virtio_mem(&x, "virtiomem0");
                ck_assert_ptr_nonnull(vm);
                ck_assert_uint_eq(vm->requested, requested);
                ck_assert_uint_eq(vm->current, requested);
        }

        /* The agent, only when allowed. */
        {
                GuestVmstat vmstat;
                GuestPsi psi;
                ck_assert_int_eq(libvirt_backend_read_agent(b, seen.uuid, false, &vmstat, &psi), -EPERM);
                t = now_sec();
                ck_assert_msg(RUN_UNTIL(event, libvirt_backend_read_agent(b, seen.uuid, true, &vmstat, &psi) == 0, 20),
                              "agent read failed");
                stamp("agent /proc/vmstat + PSI", t);
                ck_assert(guest_value_is_known(vmstat.value[GUEST_VMSTAT_PGFAULT]));
                ck_assert_uint_gt(vmstat.value[GUEST_VMSTAT_PGFAULT], 0);
                /* The balloon took 256 MiB: the guest counted the inflation. */
                ck_assert(guest_value_is_known(vmstat.value[GUEST_VMSTAT_BALLOON_INFLATE]));
                ck_assert_uint_ge(vmstat.value[GUEST_VMSTAT_BALLOON_INFLATE], 256 * MIB / 4096);
                ck_assert(psi.some.known);
        }

        /* The same on the worker thread: the loop keeps running meanwhile, and a cancelled job
         * never calls back. */
        {
                LibvirtAgentWorker *w = NULL;
                AgentSeen a = {}, cancelled = {};
                LibvirtAgentJob *job = NULL;
                sd_event_source *ticker = NULL;
                uint64_t now;

                ck_assert_int_eq(libvirt_agent_worker_new(event, &w), 0);
                ck_assert_int_eq(sd_event_now(event, CLOCK_MONOTONIC, &now), 0);
                ck_assert_int_eq(sd_event_add_time(event, &ticker, CLOCK_MONOTONIC, now, 0, on_loop_tick, NULL), 0);
                ck_assert_int_eq(sd_event_source_set_enabled(ticker, SD_EVENT_ON), 0);
                loop_ticks = 0;
                t = now_sec();
                ck_assert_int_eq(libvirt_agent_submit(w, dom, on_agent_job, &cancelled, &job), 0);
                libvirt_agent_job_cancel(job);
                ck_assert_int_eq(libvirt_agent_submit(w, dom, on_agent_job, &a, NULL), 0);
                ck_assert_msg(RUN_UNTIL(event, a.done == 1 && libvirt_agent_worker_pending(w) == 0, 30),
                              "the worker did not finish");
                stamp("agent read on the worker (two jobs, one cancelled)", t);
                fprintf(stderr, "loop ticks while the agent was read: %u\n", a.ticks_before_done);
                ck_assert_int_eq(a.error, 0);
                ck_assert_uint_eq(cancelled.done, 0);
                ck_assert(guest_value_is_known(a.vmstat.value[GUEST_VMSTAT_PGFAULT]));
                ck_assert(a.psi_known);
                /* Two agent reads of six commands each under TCG: tens of milliseconds at least,
                 * during which a 2 ms timer on the loop kept firing. */
                ck_assert_uint_ge(a.ticks_before_done, 5);
                sd_event_source_disable_unref(ticker);
                libvirt_agent_worker_free(w);
        }

        /* enable/disable through the metadata, live and persistent. */
        {
                char *p = NULL;
                unsigned changed = seen.changed, removed = seen.removed, added = seen.added;

                ck_assert_int_eq(libvirt_domain_set_policy(conn, domain_name, "frugal"), 0);
                ck_assert_int_eq(libvirt_domain_get_policy(conn, domain_name, VIR_DOMAIN_AFFECT_LIVE, &p), 0);
                ck_assert_str_eq(p, "frugal");
                free(p);
                ck_assert_int_eq(libvirt_domain_get_policy(conn, domain_name, VIR_DOMAIN_AFFECT_CONFIG, &p), 0);
                ck_assert_str_eq(p, "frugal");
                free(p);
                ck_assert_msg(RUN_UNTIL(event, seen.changed > changed, 10), "no change after enable --policy frugal");
                ck_assert_str_eq(seen.policy, "frugal");

                ck_assert_int_eq(libvirt_domain_set_policy(conn, seen.uuid, NULL), 0);
                ck_assert_int_eq(libvirt_domain_get_policy(conn, domain_name, VIR_DOMAIN_AFFECT_LIVE, &p), 0);
                ck_assert_ptr_null(p);
                ck_assert_int_eq(libvirt_domain_get_policy(conn, domain_name, VIR_DOMAIN_AFFECT_CONFIG, &p), 0);
                ck_assert_ptr_null(p);
                ck_assert_msg(RUN_UNTIL(event, seen.removed > removed, 10), "no removal after disable");
                ck_assert_str_eq(seen.removed_why, "opted out");
                ck_assert_ptr_null(libvirt_backend_get_domain(b, seen.uuid));

                ck_assert_int_eq(libvirt_domain_set_policy(conn, domain_name, "balanced"), 0);
                ck_assert_msg(RUN_UNTIL(event, seen.added > added, 10), "not added again after enable");
                ck_assert_str_eq(seen.policy, "balanced");
                ck_assert_int_eq(libvirt_domain_set_policy(conn, domain_name, "../etc/passwd"), -EINVAL);
        }

        /* libvirtd restarts: the backend notices, reconnects, finds the domain again. */
        virDomainFree(dom);
        dom = NULL;
        virConnectClose(conn);
        conn = NULL;
        t = now_sec();
        snprintf(cmd, sizeof(cmd), "%s/contrib/libvirt-setup --restart --no-install", top_srcdir);
        ck_assert_msg(run(cmd) == 0, "libvirt-setup --restart failed");
        ck_assert_msg(RUN_UNTIL(event, seen.disconnected >= 1 && libvirt_backend_connect_count(b) >= 2 &&
                                               libvirt_backend_is_connected(b),
                                60),
                      "no reconnect (disconnected %u, connects %u)", seen.disconnected, libvirt_backend_connect_count(b));
        stamp("libvirtd restart to reconnect", t);
        info = libvirt_backend_get_domain(b, seen.uuid);
        ck_assert_ptr_nonnull(info);
        ck_assert_str_eq(info->policy, "balanced");
        /* The balloon's part only, though libvirt's current memory counts virtio-mem too. */
        ck_assert_uint_eq(info->actual, target);
        st = (StatsSeen) {};
        ck_assert_int_ge(libvirt_backend_collect_all(b, on_stats, &st), 1);
        ck_assert(st.found);
        ck_assert_int_eq(libvirt_backend_set_balloon(b, seen.uuid, (uint64_t) MEM_MIB * MIB), 0);
        ck_assert_msg(RUN_UNTIL(event, seen.balloon_actual == (uint64_t) MEM_MIB * MIB, 20),
                      "balloon did not deflate after the reconnect (last %" PRIu64 ")", seen.balloon_actual);
        fprintf(stderr, "after deflate: event %" PRIu64 " MiB, dominfo %" PRIu64 " MiB\n", seen.balloon_actual / MIB,
                virsh_value("dominfo", "Used memory:") / 1024);

        /* Destroyed: it leaves. */
        conn = virConnectOpen("qemu:///system");
        ck_assert_ptr_nonnull(conn);
        dom = virDomainLookupByName(conn, domain_name);
        ck_assert_ptr_nonnull(dom);
        {
                unsigned removed = seen.removed;
                ck_assert_int_eq(virDomainDestroy(dom), 0);
                ck_assert_msg(RUN_UNTIL(event, seen.removed > removed, 10), "no removal after destroy");
                ck_assert_str_eq(seen.removed_why, "stopped");
                /* Only ours: other tests' domains may run on this libvirtd too. */
                ck_assert_ptr_null(libvirt_backend_get_domain(b, seen.uuid));
        }
        r = virDomainUndefine(dom);
        ck_assert_int_eq(r, 0);
        virDomainFree(dom);
        virConnectClose(conn);
        libvirt_backend_free(b);
        /* Let deferred frees run. */
        for (int i = 0; i < 5; i++)
                (void) sd_event_run(event, 10 * USEC_PER_MSEC);
        sd_event_unref(event);
        stamp("total", t0);
}
END_TEST

/* Leaves nothing behind: the domain, its disk, libvirtd. Also on SIGINT and SIGTERM, and when
 * the test misses its deadline (e2e_teardown_on_signals()); once. 0, or -1 if the cleanup failed. */
static int leave_nothing_behind(void) {
        static bool done;
        char cmd[1024];

        if (done)
                return 0;
        done = true;
        snprintf(cmd, sizeof(cmd),
                 "virsh -q -c qemu:///system destroy %s >/dev/null 2>&1; "
                 "virsh -q -c qemu:///system undefine %s >/dev/null 2>&1; "
                 "rm -f %s/swap.img; %s/contrib/libvirt-setup --stop",
                 domain_name, domain_name, run_dir, top_srcdir);
        int r = run(cmd) == 0 ? 0 : -1;
        snprintf(cmd, sizeof(cmd), "rm -rf %s", run_dir);
        (void) run(cmd);
        return r;
}

static void teardown_on_signal(void) {
        (void) leave_nothing_behind();
}

int main(void) {
        Suite *s;
        TCase *tc;
        int r;

        top_srcdir = getenv("top_srcdir");
        if (!top_srcdir)
                top_srcdir = ".";
        if ((r = libvirt_test_host_enter("test-libvirt-backend")) != 0)
                return r;
        snprintf(domain_name, sizeof(domain_name), "rightsize-test-%d", (int) getpid());
        if (!mkdtemp(run_dir))
                return 1;
        e2e_teardown_on_signals(teardown_on_signal);
        log_set_target(LOG_TARGET_STDERR);

        s = suite_create("libvirt-backend");
        tc = tcase_create("real-libvirtd");
        check_set_deadline(tc, 400);
        tcase_add_test(tc, test_libvirt_backend);
        suite_add_tcase(s, tc);
        /* No fork: the cleanup below must run whatever the test did. */
        r = check_run_suite_nofork(s);
        if (leave_nothing_behind() < 0 && r != EXIT_FAILURE)
                r = EXIT_FAILURE;
        return r;
}
