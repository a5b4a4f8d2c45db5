/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized end to end on a libvirt domain: a real libvirtd (started through
 * contrib/libvirt-setup, CI has no systemd as PID 1), a private dbus-daemon, the daemon with
 * [libvirt] enabled, and the test guest defined as a TCG domain with a balloon (stats every
 * second), virtio-mem in its NUMA cell, the guest-agent channel and the rightsize metadata.
 *
 * It checks that the domain is picked up from its lifecycle event, that the estimate converges
 * within 15 % of the working set, that `virsh dommemstat` and `virsh dominfo` show the size
 * the daemon set, that a raise by another controller through libvirt (setmem up) pauses the
 * guest and is left alone until `rightsizectl resume`, that `rightsizectl disable`/`enable --policy` round-trips the metadata (live
 * and persistent), that a virtio-mem move made by the daemon shows in the live XML, that a
 * destroyed domain leaves `rightsizectl list`, that a domain with <memballoon
 * model='none'> is listed as skipped, that DIMMs are hot-plugged through libvirt for a floor
 * above the boot memory (with qemu-monitor = yes read through libvirt on the same domain), and
 * that the daemon logged no libvirt error on the normal path.
 *
 * Ground truth as in e2e-common.h, measured through the agent (here via libvirt). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-agent.h"
#include "daemon/libvirt/libvirt-backend.h"
#include "daemon/libvirt/libvirt-parse.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/e2e-common.h"
#include "tests/lib/libvirt-test-host.h"
#include "tests/lib/test-util.h"

#define URI LIBVIRT_TEST_URI
#define GUEST_MEM (1024 * MIB)
#define ANON_MIB 300
#define FLOOR (256 * MIB)
/* Above the boot memory: only virtio-mem can give it. */
#define VMEM_FLOOR (1200 * MIB)
/* Deadlines for states waited for, never bounds on how fast they come: a busy machine runs the
 * TCG guests and libvirtd slowly. */
#define WAIT_SEC 120
/* The DIMM domain boots while the daemon plugs: two DIMMs online and the floor met. */
#define DIMM_WAIT_SEC 240

static const char *top_srcdir;
static char domain_name[64], skipped_name[80], dimm_name[80], uuid[VIR_UUID_STRING_BUFLEN], console_log[PATH_MAX];
static BusFixture bus;
static DaemonFixture daemon_fx;
static virConnectPtr conn;

static void teardown_all(void) {
        e2e_daemon_teardown(&daemon_fx);
        bus_fixture_stop(&bus);
        /* Leave nothing behind: the domains, libvirtd (the disk went with the daemon's directory). */
        libvirt_test_host_leave(&conn, (char *const[]) { domain_name, skipped_name, dimm_name, NULL });
}

static off_t file_size(const char *path) {
        struct stat st;
        return stat(path, &st) < 0 ? 0 : st.st_size;
}

/* Warnings and errors about libvirt in the daemon's log from `offset` on, except those that
 * contain one of `allowed` (NULL-terminated, or NULL). */
static unsigned libvirt_problems(off_t offset, const char *const *allowed) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        unsigned n = 0;
        FILE *f = fopen(daemon_fx.log_path, "re");

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fseeko(f, offset, SEEK_SET), 0);
        while (getline(&line, &size, f) > 0) {
                bool bad = (strncmp(line, "warning:", 8) == 0 || strncmp(line, "error:", 6) == 0 ||
                            strncmp(line, "crit", 4) == 0) &&
                           (strstr(line, "libvirt") || strstr(line, "Skipping this interval"));
                for (size_t i = 0; bad && allowed && allowed[i]; i++)
                        if (strstr(line, allowed[i]))
                                bad = false;
                if (bad) {
                        fprintf(stderr, "daemon log: %s", line);
                        n++;
                }
        }
        fclose(f);
        return n;
}

/* The warning every probe of a domain without <memballoon autodeflate='on'> gets once (this
 * test's domain has none: its guest must not push back): expected, not a problem. */
static const char *const expected_warnings[] = { "has no deflate-on-oom", NULL };

/* How many lines of the daemon's log hold `needle`. */
static unsigned log_lines_with(const char *needle) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        unsigned n = 0;
        FILE *f = fopen(daemon_fx.log_path, "re");

        ck_assert_ptr_nonnull(f);
        while (getline(&line, &size, f) > 0)
                n += strstr(line, needle) != NULL;
        fclose(f);
        return n;
}

/* Whether `rightsizectl --json list` lists the domain `name`; its state and fault in the buffers. */
static bool ctl_lists(const char *name, char *state, size_t state_size, char *fault, size_t fault_size) {
        CtlRun run = ctl_run(&daemon_fx, "--json", "list");
        json_object *doc, *guests;
        bool found = false;

        ck_assert_int_eq(run.code, 0);
        doc = json_tokener_parse(run.out);
        ck_assert_msg(doc, "rightsizectl --json list printed no JSON: %s", run.out);
        ctl_run_done(&run);
        ck_assert(json_object_object_get_ex(doc, "guests", &guests));
        for (size_t i = 0; i < json_object_array_length(guests); i++) {
                json_object *g = json_object_array_get_idx(guests, i), *n, *source, *value;
                if (json_object_object_get_ex(g, "name", &n) && strcmp(json_object_get_string(n), name) == 0) {
                        ck_assert(json_object_object_get_ex(g, "source", &source));
                        ck_assert_str_eq(json_object_get_string(source), "libvirt");
                        if (state && json_object_object_get_ex(g, "state", &value))
                                snprintf(state, state_size, "%s", json_object_get_string(value) ?: "");
                        if (fault && json_object_object_get_ex(g, "fault", &value))
                                snprintf(fault, fault_size, "%s", json_object_get_string(value) ?: "");
                        found = true;
                }
        }
        json_object_put(doc);
        return found;
}

/* Whether the domain is not managed yet: not listed, or still connecting (GetGuest's result in
 * *r, the view in *v). */
static bool not_picked_up(int *r, GuestView *v) {
        *r = e2e_get_guest(&daemon_fx, domain_name, v);
        return *r < 0 || strcmp(v->state, "connecting") == 0;
}

static bool ctl_lists_domain(void) {
        return ctl_lists(domain_name, NULL, 0, NULL, 0);
}

/* ---- libvirt ---- */

/* A "Key: 123 KiB" or "key 123" value of a virsh command's output, in KiB. */
static uint64_t virsh_value_of(const char *name, const char *subcommand, const char *key) {
        char cmd[256];
        _cleanup_free_ char *out = NULL;
        const char *p;

        snprintf(cmd, sizeof(cmd), "virsh -c " URI " %s %s", subcommand, name);
        out = e2e_capture(cmd, NULL);
        if (!out)
                return UINT64_MAX;
        for (p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, key, strlen(key)) == 0)
                        return strtoull(p + strlen(key), NULL, 10);
        return UINT64_MAX;
}

static uint64_t virsh_value(const char *subcommand, const char *key) {
        return virsh_value_of(domain_name, subcommand, key);
}

static uint64_t live_vmem_requested(void) {
        virDomainPtr dom = virDomainLookupByName(conn, domain_name);
        _cleanup_free_ char *xml = NULL;
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};
        const LibvirtVirtioMem *vm;

        ck_assert_ptr_nonnull(dom);
        xml = virDomainGetXMLDesc(dom, 0);
        virDomainFree(dom);
        ck_assert_ptr_nonnull(xml);
        ck_assert_int_eq(libvirt_domain_xml_parse(xml, &x), 0);
        vm = libvirt_domain_xml_find_virtio_mem(&x, "virtiomem0");
        ck_assert_ptr_nonnull(vm);
        return vm->requested;
}

static char *metadata_policy(unsigned flags) {
        char *p = NULL;
        ck_assert_int_eq(libvirt_domain_get_policy(conn, domain_name, flags, &p), 0);
        return p;
}

static int read_file_by_agent(void *userdata, const char *path, char **ret) {
        char message[256] = "";
        size_t size;
        int r = libvirt_agent_read_file(userdata, path, ret, &size, message, sizeof(message));
        if (r < 0)
                fprintf(stderr, "agent: %s: %s\n", path, message);
        return r;
}

/* Working set in balloon terms, less the workload's anonymous set. */
static uint64_t measure_ground_truth_base(void) {
        virDomainPtr dom = virDomainLookupByName(conn, domain_name);
        uint64_t base;

        ck_assert_ptr_nonnull(dom);
        base = e2e_ground_truth_base(console_log, GUEST_MEM, ANON_MIB, read_file_by_agent, dom);
        virDomainFree(dom);
        return base;
}

static void write_config(void) {
        char text[4096];
        snprintf(text, sizeof(text),
                 "[daemon]\n"
                 "policy-dir = %s\n"
                 "state-dir = %s\n"
                 "log-level = debug\n"
                 "host-reserve = 256M\n"
                 "read-group =\n"
                 /* Only this test's domain, whatever else runs on this libvirtd. */
                 "[guests]\n"
                 "manage = %s*\n"
                 "unmatched-policy = balanced\n"
                 "[qemu]\n"
                 "qmp-sockets = %s/no-qmp/*.qmp\n"
                 "[libvirt]\n"
                 "enabled = yes\n"
                 "uri = " URI "\n"
                 "manage-all = no\n"
                 "agent = yes\n",
                 daemon_fx.policy_dir, daemon_fx.state_dir, domain_name, daemon_fx.dir);
        test_write_file(daemon_fx.config_path, text);
}

static void setup_all(void) {
        top_srcdir = getenv("top_srcdir") ?: ".";
        e2e_setup(&daemon_fx, &bus, teardown_all);
        snprintf(domain_name, sizeof(domain_name), "rightsize-e2e-%d", (int) getpid());
        snprintf(skipped_name, sizeof(skipped_name), "rightsize-e2e-%d-noballoon", (int) getpid());
        snprintf(dimm_name, sizeof(dimm_name), "rightsize-e2e-%d-dimm", (int) getpid());
        /* As test-daemon-real-guest.c, a short hold to converge in minutes, but a 2 s interval:
         * through libvirt the agent read takes several round trips, and a busy host slows the
         * balloon of a TCG guest. */
        daemon_fixture_write_policy(&daemon_fx, "test",
                                    "[policy]\nmatch = rightsize-e2e-*\npoll-interval = 2s\nfloor = 256M\n"
                                    "hold-time = 15s\nprobe-step-max = 10%\nrefault-sensitivity = medium\n"
                                    "change-cap-percent = 50%\n");
        /* The same, moving virtio-mem for coarse changes. */
        daemon_fixture_write_policy(&daemon_fx, "test-vmem",
                                    "[policy]\npoll-interval = 2s\nfloor = 256M\nhold-time = 15s\n"
                                    "probe-step-max = 10%\nrefault-sensitivity = medium\nchange-cap-percent = 50%\n"
                                    "actuator = both\n");
        /* DIMMs: a floor above the boot memory and no virtio-mem, so only DIMMs can give it;
         * and the QEMU monitor for the stats libvirt does not map (this domain may be tainted). */
        daemon_fixture_write_policy(&daemon_fx, "test-dimm",
                                    "[policy]\npoll-interval = 2s\nfloor = 1400M\nhold-time = 15s\n"
                                    "allow-dimm = yes\nqemu-monitor = yes\n");
        snprintf(console_log, sizeof(console_log), "%s/console.log", daemon_fx.dir);
        write_config();
}

/* MemTotal of the domain `name` as its kernel sees it (through the agent), in bytes; 0 while
 * the agent is not up. */
static uint64_t guest_mem_total(const char *name) {
        virDomainPtr dom = virDomainLookupByName(conn, name);
        _cleanup_free_ char *meminfo = NULL;
        const char *p;

        ck_assert_ptr_nonnull(dom);
        if (read_file_by_agent(dom, "/proc/meminfo", &meminfo) < 0)
                meminfo = NULL;
        virDomainFree(dom);
        p = meminfo ? strstr(meminfo, "MemTotal:") : NULL;
        return p ? strtoull(p + strlen("MemTotal:"), NULL, 10) * KIB : 0;
}

static unsigned live_dimm_count(const char *name) {
        virDomainPtr dom = virDomainLookupByName(conn, name);
        _cleanup_free_ char *xml = NULL;
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};

        ck_assert_ptr_nonnull(dom);
        xml = virDomainGetXMLDesc(dom, 0);
        virDomainFree(dom);
        ck_assert_ptr_nonnull(xml);
        ck_assert_int_eq(libvirt_domain_xml_parse(xml, &x), 0);
        return x.dimm_count;
}

/* DIMM hotplug through libvirt, on its own domain: 1 GiB of boot memory, room for 1 GiB more
 * in 4 slots (256 MiB each), no virtio-mem, and a floor of 1400 MiB: exactly two DIMMs, the
 * balloon trimming the rest, the guest onlining them. The same policy reads the balloon's stats
 * through the QEMU monitor, which libvirt records as a taint in the domain's log. */
static void check_dimm_domain(double t0) {
        _cleanup_free_ char *xml = NULL, *domain_log = NULL;
        char cmd[4096];
        virDomainPtr dom;
        GuestView v;
        uint64_t mem_total = 0, kib;
        unsigned plugged;
        double t;
        int status, r = -ENOENT;
        bool ok = false;

        snprintf(cmd, sizeof(cmd),
                 "%s/contrib/guest-domain-xml --name %s --policy test-dimm --vmem-size 0 --slots 4 --mem 1024M "
                 "--maxmem 2048M --workload '--anon-mib 100 --sleep-ms 500'",
                 top_srcdir, dimm_name);
        xml = e2e_capture(cmd, &status);
        ck_assert_msg(xml && status == 0, "guest-domain-xml --slots failed");
        dom = virDomainDefineXML(conn, xml);
        ck_assert_msg(dom, "define: %s", virGetLastErrorMessage());
        t = e2e_now_sec();
        ck_assert_msg(virDomainCreate(dom) == 0, "start: %s", virGetLastErrorMessage());
        virDomainFree(dom);

        /* The guest boots while the daemon plugs: its MemTotal before any DIMM is not seen
         * here, so the check below is against what 1 GiB of boot memory can give. */
        while (e2e_now_sec() < t + DIMM_WAIT_SEC && !ok) {
                sleep(1);
                ok = live_dimm_count(dimm_name) >= 2 && (r = e2e_get_guest(&daemon_fx, dimm_name, &v)) == 0 &&
                     within(v.actual, 1400 * MIB, 0.02);
        }
        if (r == 0)
                e2e_print_view("dimm", t0, &v, 0);
        ck_assert_msg(ok, "no two DIMMs and 1400 MiB within %d s (%u DIMMs in the live XML)", DIMM_WAIT_SEC,
                      live_dimm_count(dimm_name));
        fprintf(stderr, "[%5.1fs] %s: %u DIMMs in the live XML, actual %.0f MiB, %.1f s after the start\n",
                e2e_now_sec() - t0, dimm_name, live_dimm_count(dimm_name), mib(v.actual), e2e_now_sec() - t);
        ck_assert_uint_eq(live_dimm_count(dimm_name), 2);
        kib = virsh_value_of(dimm_name, "dominfo", "Used memory:");
        ck_assert_msg(within(kib * KIB, 1400 * MIB, 0.02), "dominfo used: %" PRIu64 " KiB", kib);
        kib = virsh_value_of(dimm_name, "dominfo", "Max memory:");
        ck_assert_msg(kib * KIB == 1536 * MIB, "dominfo max: %" PRIu64 " KiB", kib);

        /* The guest onlined them: MemTotal beyond anything 1 GiB of boot memory gives (the
         * kernel keeps ~100 MiB of it; the balloon takes the rest of 1536 down to 1400). */
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && ((mem_total = guest_mem_total(dimm_name)) <= 1152 * MIB);)
                sleep(1);
        fprintf(stderr, "%s: MemTotal %.0f MiB in the guest\n", dimm_name, mib(mem_total));
        ck_assert_msg(mem_total > 1152 * MIB, "MemTotal %.0f MiB", mib(mem_total));

        /* No more DIMMs: the floor is met. */
        plugged = daemon_fixture_log_count(&daemon_fx, "Hot-plugging DIMM");
        ck_assert_uint_eq(plugged, 2);
        sleep(5);
        ck_assert_uint_eq(daemon_fixture_log_count(&daemon_fx, "Hot-plugging DIMM"), plugged);
        ck_assert_uint_eq(live_dimm_count(dimm_name), 2);

        /* qemu-monitor = yes ran through libvirt: the daemon read the stats, libvirt noted the taint. */
        ck_assert_msg(file_contains(daemon_fx.log_path, "QEMU monitor: balloon guest-stats read"),
                      "no QEMU monitor read in the daemon's log");
        snprintf(cmd, sizeof(cmd), "/var/log/libvirt/qemu/%s.log", dimm_name);
        domain_log = test_read_file(cmd);
        ck_assert_msg(domain_log && strstr(domain_log, "custom-monitor"), "no custom-monitor taint in %s", cmd);

        dom = virDomainLookupByName(conn, dimm_name);
        ck_assert_ptr_nonnull(dom);
        ck_assert_int_eq(virDomainDestroy(dom), 0);
        ck_assert_int_eq(virDomainUndefine(dom), 0);
        virDomainFree(dom);
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && (ctl_lists(dimm_name, NULL, 0, NULL, 0));)
                usleep(100 * 1000);
        ck_assert(!ctl_lists(dimm_name, NULL, 0, NULL, 0));
}

START_TEST(test_daemon_libvirt) {
        _cleanup_free_ char *xml = NULL;
        char cmd[8192];
        virDomainPtr dom;
        GuestView v;
        double t0 = e2e_now_sec(), t;
        uint64_t truth, kib;
        bool ok;
        int status, r;

        snprintf(cmd, sizeof(cmd), "%s/contrib/libvirt-setup", top_srcdir);
        ck_assert_msg(e2e_run(cmd) == 0, "contrib/libvirt-setup failed");
        conn = virConnectOpen(URI);
        ck_assert_ptr_nonnull(conn);
        fprintf(stderr, "[%5.1fs] libvirtd up\n", e2e_now_sec() - t0);

        snprintf(cmd, sizeof(cmd),
                 /* deflate-on-oom off, as in test-daemon-real-guest.c: the guest does not push back. */
                 "truncate -s 384M %s/swap.img && %s/contrib/guest-domain-xml --name %s --policy test --no-autodeflate "
                 "--swap-image %s/swap.img --console-log %s --mem 1024M "
                 "--workload '--anon-mib %d --sleep-ms 500'",
                 daemon_fx.dir, top_srcdir, domain_name, daemon_fx.dir, console_log, ANON_MIB);
        xml = e2e_capture(cmd, &status);
        ck_assert_msg(xml && status == 0, "guest-domain-xml failed");
        dom = virDomainDefineXML(conn, xml);
        ck_assert_msg(dom, "define: %s", virGetLastErrorMessage());
        ck_assert_int_eq(virDomainGetUUIDString(dom, uuid), 0);

        /* The daemon first, the domain after: it must come from the lifecycle event. */
        daemon_fixture_start(&daemon_fx);
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && (!file_contains(daemon_fx.log_path, "libvirt: connected to"));)
                usleep(100 * 1000);
        ck_assert_msg(file_contains(daemon_fx.log_path, "libvirt: connected to"), "the daemon did not connect to libvirt");
        ck_assert_int_eq(e2e_get_guest(&daemon_fx, domain_name, &v), -ENOENT);
        t = e2e_now_sec();
        ck_assert_msg(virDomainCreate(dom) == 0, "start: %s", virGetLastErrorMessage());
        virDomainFree(dom);
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && not_picked_up(&r, &v);)
                usleep(100 * 1000);
        ck_assert_msg(r == 0, "the started domain did not show up");
        fprintf(stderr, "[%5.1fs] picked up %.2f s after the start: state %s, policy %s\n", e2e_now_sec() - t0,
                e2e_now_sec() - t, v.state, v.policy);
        ck_assert_str_eq(v.source, "libvirt");
        ck_assert_str_eq(v.uuid, uuid);
        ck_assert_str_eq(v.policy, "test");
        ck_assert(ctl_lists_domain());

        /* disable: the metadata goes (live and persistent), and so does the guest. The test
         * then lets the guest boot and its workload settle, as test-daemon-real-guest.c does
         * before it starts its daemon: the refaults of a booting guest are not its baseline. */
        ck_assert_int_eq(ctl_code(&daemon_fx, "disable", domain_name), 0);
        ck_assert_ptr_null(metadata_policy(VIR_DOMAIN_AFFECT_LIVE));
        ck_assert_ptr_null(metadata_policy(VIR_DOMAIN_AFFECT_CONFIG));
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && (ctl_lists_domain());)
                usleep(100 * 1000);
        ck_assert_msg(!ctl_lists_domain(), "still listed after disable");
        ck_assert_int_eq(ctl_code(&daemon_fx, "enable", domain_name, "--policy", "nosuch"),
                         2);
        ck_assert_int_eq(ctl_code(&daemon_fx, "enable", "no-such-domain"), 3);
        truth = measure_ground_truth_base() + ANON_MIB * MIB;
        /* What the daemon saved of those first seconds goes too: a fresh start. */
        snprintf(cmd, sizeof(cmd), "%s/%s.json", daemon_fx.state_dir, domain_name);
        (void) unlink(cmd);

        /* enable: back, live and persistent. */
        ck_assert_int_eq(ctl_code(&daemon_fx, "enable", domain_name, "--policy", "test"),
                         0);
        {
                _cleanup_free_ char *live = metadata_policy(VIR_DOMAIN_AFFECT_LIVE);
                _cleanup_free_ char *config = metadata_policy(VIR_DOMAIN_AFFECT_CONFIG);
                ck_assert_str_eq(live, "test");
                ck_assert_str_eq(config, "test");
        }
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && not_picked_up(&r, &v);)
                usleep(100 * 1000);
        ck_assert_int_eq(r, 0);
        ck_assert_str_eq(v.policy, "test");

        /* Convergence. */
        double t_conv = e2e_now_sec();
        ck_assert_msg(e2e_wait_converged(&daemon_fx, domain_name, truth, 240, t0, &v, "converging"),
                      "no convergence within 15 %% of %.0f MiB", mib(truth));
        fprintf(stderr, "converged %.0f s after the ground truth: estimate %.0f MiB vs truth %.0f MiB (%+.1f %%), "
                        "target %.0f, actual %.0f\n",
                e2e_now_sec() - t_conv, mib(v.estimate), mib(truth),
                100.0 * ((double) v.estimate - (double) truth) / (double) truth, mib(v.target), mib(v.actual));
        ck_assert(v.target < GUEST_MEM - 64 * MIB);

        /* libvirt agrees: dommemstat's actual and dominfo's used memory are the new size. */
        ok = false;
        for (double start_ = e2e_now_sec(); !ok && e2e_now_sec() < start_ + WAIT_SEC;) {
                uint64_t actual_kib = virsh_value("dommemstat", "actual ");
                uint64_t used_kib = virsh_value("dominfo", "Used memory:");
                ck_assert(e2e_get_guest(&daemon_fx, domain_name, &v) == 0);
                fprintf(stderr, "virsh: dommemstat actual %.0f MiB, dominfo used %.0f MiB; daemon actual %.0f MiB\n",
                        (double) actual_kib / 1024, (double) used_kib / 1024, mib(v.actual));
                ok = actual_kib != UINT64_MAX && used_kib != UINT64_MAX && within(actual_kib * KIB, v.actual, 0.02) &&
                     within(used_kib * KIB, v.actual, 0.02) && used_kib * KIB < GUEST_MEM - 64 * MIB;
                if (!ok)
                        sleep(1);
        }
        ck_assert_msg(ok, "virsh does not show the size the daemon set");
        ck_assert_uint_eq(libvirt_problems(0, expected_warnings), 0);

        /* Another controller raises the guest through libvirt (virsh setmem up, MoM): rightsized
         * pauses it rather than taking it for the guest's own need and probing it back down, and
         * leaves the raise alone; a resume takes it back. */
        {
                /* In a hold: the balloon has reached the size rightsized set (mid-probe it is
                 * moving, and a raise is told from rightsized's own steps only once it arrives). */
                ok = false;
                for (double start_ = e2e_now_sec(); !ok && e2e_now_sec() < start_ + WAIT_SEC;) {
                        ok = e2e_get_guest(&daemon_fx, domain_name, &v) == 0 && strcmp(v.state, "hold") == 0 &&
                             within(v.actual, v.target, 0.02);
                        if (!ok)
                                usleep(200 * 1000);
                }
                ck_assert_msg(ok, "no hold to raise the guest in (state %s)", v.state);
                uint64_t raised = v.actual + 192 * MIB;
                virDomainPtr raise_dom = virDomainLookupByName(conn, domain_name);
                ck_assert_ptr_nonnull(raise_dom);
                ck_assert_msg(virDomainSetMemoryFlags(raise_dom, raised / KIB, VIR_DOMAIN_AFFECT_LIVE) == 0,
                              "setmem: %s", virGetLastErrorMessage());
                virDomainFree(raise_dom);
                ok = false;
                for (double start_ = e2e_now_sec(); !ok && e2e_now_sec() < start_ + WAIT_SEC;) {
                        sleep(1);
                        ok = e2e_get_guest(&daemon_fx, domain_name, &v) == 0 && v.paused;
                }
                e2e_print_view("raised outside", t0, &v, truth);
                ck_assert_msg(ok, "not paused after a raise from outside (actual %.0f MiB)", mib(v.actual));
                ck_assert_msg(log_lines_with("balloon set from outside") >= 1, "no line about the raise");
                /* Left where the other controller put it. */
                sleep(5);
                ck_assert(e2e_get_guest(&daemon_fx, domain_name, &v) == 0);
                ck_assert_msg(v.paused && v.actual + 32 * MIB >= raised, "moved after the raise: actual %.0f MiB",
                              mib(v.actual));
                ck_assert_int_eq(ctl_code(&daemon_fx, "resume", domain_name), 0);
                ok = false;
                for (double start_ = e2e_now_sec(); !ok && e2e_now_sec() < start_ + WAIT_SEC;) {
                        sleep(1);
                        ok = e2e_get_guest(&daemon_fx, domain_name, &v) == 0 && !v.paused;
                }
                ck_assert_msg(ok, "still paused after resume");
        }
        /* libvirt's autodeflate is read: the domain without it was warned about, once. */
        ck_assert_uint_eq(log_lines_with("has no deflate-on-oom"), 1);

        /* Over to a policy that uses virtio-mem: a new guest size (boot memory plus the device),
         * so the domain is let go and taken on again. */
        ck_assert_int_eq(ctl_code(&daemon_fx, "disable", domain_name), 0);
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && (ctl_lists_domain());)
                usleep(100 * 1000);
        ck_assert_msg(!ctl_lists_domain(), "still listed after disable");
        ck_assert_int_eq(
                ctl_code(&daemon_fx, "enable", domain_name, "--policy", "test-vmem"), 0);
        {
                _cleanup_free_ char *live = metadata_policy(VIR_DOMAIN_AFFECT_LIVE);
                _cleanup_free_ char *config = metadata_policy(VIR_DOMAIN_AFFECT_CONFIG);
                ck_assert_str_eq(live, "test-vmem");
                ck_assert_str_eq(config, "test-vmem");
        }
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && not_picked_up(&r, &v);)
                usleep(100 * 1000);
        ck_assert_int_eq(r, 0);
        ck_assert_str_eq(v.policy, "test-vmem");

        /* A floor above the boot memory: only virtio-mem can meet it, the live XML shows it. */
        ck_assert_int_eq(ctl_code(&daemon_fx, "set", domain_name, "floor=1200M"), 0);
        t = e2e_now_sec();
        uint64_t requested = 0;
        while (e2e_now_sec() < t + WAIT_SEC && (requested = live_vmem_requested()) < VMEM_FLOOR - GUEST_MEM) {
                if (e2e_get_guest(&daemon_fx, domain_name, &v) == 0)
                        e2e_print_view("virtio-mem", t0, &v, truth);
                sleep(1);
        }
        ck_assert_msg(requested >= VMEM_FLOOR - GUEST_MEM, "virtio-mem requested %.0f MiB in the live XML",
                      mib(requested));
        ck_assert_uint_eq(requested % (2 * MIB), 0);
        fprintf(stderr, "[%5.1fs] virtio-mem requested %.0f MiB in the live XML after %.1f s\n", e2e_now_sec() - t0,
                mib(requested), e2e_now_sec() - t);
        /* The guest gets the floor, no more: boot memory (the balloon) plus the plugged part. */
        ok = false;
        for (double start_ = e2e_now_sec(); !ok && e2e_now_sec() < start_ + WAIT_SEC;) {
                sleep(1);
                ok = e2e_get_guest(&daemon_fx, domain_name, &v) == 0 && v.vmem >= VMEM_FLOOR - GUEST_MEM && within(v.actual, VMEM_FLOOR, 0.02);
        }
        e2e_print_view("virtio-mem", t0, &v, truth);
        ck_assert_msg(ok, "the guest did not settle at the floor (virtio-mem %.0f MiB, actual %.0f MiB)", mib(v.vmem),
                      mib(v.actual));
        ck_assert_uint_le(v.target, VMEM_FLOOR + 64 * MIB);
        kib = virsh_value("dominfo", "Used memory:");
        ck_assert_msg(within(kib * KIB, VMEM_FLOOR, 0.02), "dominfo: %" PRIu64 " KiB", kib);
        ck_assert_int_eq(ctl_code(&daemon_fx, "set", domain_name, "floor=0"), 0);
        ck_assert_uint_eq(libvirt_problems(0, expected_warnings), 0);

        /* The normal path from here on: no libvirt problem in the log. (libvirtd hanging, dying
         * and restarting under the daemon is test-daemon-libvirtd-hang.c.) */
        off_t normal_offset = file_size(daemon_fx.log_path);

        /* Destroyed: it leaves the list. */
        dom = virDomainLookupByName(conn, domain_name);
        ck_assert_ptr_nonnull(dom);
        ck_assert_int_eq(virDomainDestroy(dom), 0);
        virDomainFree(dom);
        for (double start_ = e2e_now_sec();
             e2e_now_sec() < start_ + WAIT_SEC && (ctl_lists_domain());)
                usleep(200 * 1000);
        ck_assert_msg(!ctl_lists_domain(), "still listed after destroy");

        /* A domain that opts in but has <memballoon model='none'>: listed as skipped (left alone by
         * design, not a fault: the faulty alert does not count it), with why, never
         * touched. (Started after the other is gone: one TCG guest at a time.) */
        {
                _cleanup_free_ char *skipped_xml = NULL;
                char state[32] = "", fault[256] = "";

                snprintf(cmd, sizeof(cmd), "%s/contrib/guest-domain-xml --name %s --policy test --no-balloon --vmem-size 0",
                         top_srcdir, skipped_name);
                skipped_xml = e2e_capture(cmd, &status);
                ck_assert_msg(skipped_xml && status == 0, "guest-domain-xml --no-balloon failed");
                dom = virDomainDefineXML(conn, skipped_xml);
                ck_assert_msg(dom, "define: %s", virGetLastErrorMessage());
                ck_assert_msg(virDomainCreate(dom) == 0, "start: %s", virGetLastErrorMessage());
                for (double start_ = e2e_now_sec();
                     e2e_now_sec() < start_ + WAIT_SEC &&
                     !ctl_lists(skipped_name, state, sizeof(state), fault, sizeof(fault));)
                        usleep(100 * 1000);
                fprintf(stderr, "[%5.1fs] %s: state %s, fault \"%s\"\n", e2e_now_sec() - t0, skipped_name, state, fault);
                ck_assert_str_eq(state, "skipped");
                ck_assert_msg(strstr(fault, "skipped") && strstr(fault, "balloon"), "fault: %s", fault);
                ck_assert_int_eq(virDomainDestroy(dom), 0);
                ck_assert_int_eq(virDomainUndefine(dom), 0);
                virDomainFree(dom);
                for (double start_ = e2e_now_sec();
                     e2e_now_sec() < start_ + WAIT_SEC && (ctl_lists(skipped_name, NULL, 0, NULL, 0));)
                        usleep(100 * 1000);
                ck_assert(!ctl_lists(skipped_name, NULL, 0, NULL, 0));
        }

        check_dimm_domain(t0);

        /* SIGTERM: a clean exit. */
        status = daemon_fixture_stop(&daemon_fx, SIGTERM);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_uint_eq(libvirt_problems(normal_offset, expected_warnings), 0);
        fprintf(stderr, "[%5.1fs] total\n", e2e_now_sec() - t0);
}
END_TEST

int main(void) {
        return libvirt_test_host_run("daemon-libvirt", "real-libvirtd", test_daemon_libvirt, setup_all, teardown_all,
                                     600);
}
