/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl recommend --apply end to end on a real libvirtd (contrib/libvirt-setup) with a
 * persistent TCG domain the daemon manages under an observe-only policy (so nothing but the
 * apply could move a size). Its 14-day history is the test's: written in the daemon's format
 * (daemon/boot-history.h) into the state directory before the daemon starts, two days of
 * points, 95 % of them at 400 MiB and 5 % at 600 MiB.
 *
 * It checks the figures GetRecommendation gives (p95 + 10 % = 440 MiB, peak + 10 % = 660 MiB,
 * the boot size now read from the persistent definition), that `--apply` without --yes and
 * without a terminal is a dry run that changes nothing, that `--apply --yes` writes the
 * persistent definition's currentMemory (virsh dumpxml --inactive) and leaves the live size
 * alone (virsh dumpxml, the running domain's currentMemory), and that the daemon logged who
 * asked. */
#include <check.h>
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "daemon/boot-history.h"
#include "daemon/libvirt/libvirt-parse.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/e2e-common.h"
#include "tests/lib/libvirt-test-host.h"
#include "tests/lib/test-util.h"

#define URI LIBVIRT_TEST_URI
/* A deadline for states waited for, never a bound on how fast they come. */
#define WAIT_SEC 180
#define DAY_USEC (24ULL * 3600 * 1000000)

static const char *top_srcdir;
static char domain_name[64];
static BusFixture bus;
static DaemonFixture daemon_fx;
static virConnectPtr conn;

static void teardown_all(void) {
        e2e_daemon_teardown(&daemon_fx);
        bus_fixture_stop(&bus);
        libvirt_test_host_leave(&conn, (char *const[]) { domain_name, NULL });
}

static void setup_all(void) {
        char text[2048];

        top_srcdir = getenv("top_srcdir") ?: ".";
        e2e_setup(&daemon_fx, &bus, teardown_all);
        snprintf(domain_name, sizeof(domain_name), "rightsize-rec-%d", (int) getpid());
        daemon_fixture_write_policy(&daemon_fx, "test-observe", "[policy]\nmode = observe\npoll-interval = 2s\n");
        snprintf(text, sizeof(text),
                 "[daemon]\npolicy-dir = %s\nstate-dir = %s\nlog-level = debug\nread-group =\n"
                 "[guests]\nmanage = %s*\nunmatched-policy = test-observe\n"
                 "[qemu]\nqmp-sockets = %s/no-qmp/*.qmp\n"
                 "[libvirt]\nenabled = yes\nuri = " URI "\nmanage-all = no\nagent = no\n",
                 daemon_fx.policy_dir, daemon_fx.state_dir, domain_name, daemon_fx.dir);
        test_write_file(daemon_fx.config_path, text);
}

/* The domain's currentMemory, bytes: of its persistent definition (inactive) or of the running one. */
static uint64_t current_memory(bool inactive) {
        virDomainPtr dom = virDomainLookupByName(conn, domain_name);
        _cleanup_free_ char *xml = NULL;
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};

        ck_assert_ptr_nonnull(dom);
        xml = virDomainGetXMLDesc(dom, inactive ? VIR_DOMAIN_XML_INACTIVE : 0);
        virDomainFree(dom);
        ck_assert_ptr_nonnull(xml);
        ck_assert_int_eq(libvirt_domain_xml_parse(xml, &x), 0);
        return x.current_memory ?: x.memory;
}

/* Two days of points ending now: every 20th at 600 MiB, the others at 400 MiB. */
static void seed_history(void) {
        _cleanup_free_ BootHistory *h = malloc(sizeof(*h));
        struct timespec ts;

        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &ts), 0);
        uint64_t now = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
        boot_history_init(h);
        for (uint64_t i = 0; i < 288; i++) {
                uint64_t est = i % 20 == 19 ? 600 * MIB : 400 * MIB;
                boot_history_push(h, &(BootHistoryPoint) { now - 2 * DAY_USEC + i * BOOT_HISTORY_INTERVAL_USEC, est,
                                                           GIB, GIB, 0.002 });
        }
        ck_assert_int_eq(boot_history_save(daemon_fx.state_dir, domain_name, h), 0);
}

static json_object *recommendation(json_object *doc) {
        json_object *recs, *r, *name;
        ck_assert(json_object_object_get_ex(doc, "recommendations", &recs));
        ck_assert_int_eq(json_object_array_length(recs), 1);
        r = json_object_array_get_idx(recs, 0);
        ck_assert(json_object_object_get_ex(r, "name", &name));
        ck_assert_str_eq(json_object_get_string(name), domain_name);
        return r;
}

static uint64_t u64_of(json_object *o, const char *key) {
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(o, key, &v) && v, "no %s", key);
        return json_object_get_uint64(v);
}

static bool managed(void) {
        GuestView v;
        return e2e_get_guest(&daemon_fx, domain_name, &v) == 0 && strcmp(v.state, "connecting") != 0;
}

START_TEST(test_recommend_apply) {
        _cleanup_free_ char *xml = NULL;
        char cmd[4096];
        double t0 = e2e_now_sec();
        int status;

        snprintf(cmd, sizeof(cmd), "%s/contrib/libvirt-setup", top_srcdir);
        ck_assert_msg(e2e_run(cmd) == 0, "contrib/libvirt-setup failed");
        conn = virConnectOpen(URI);
        ck_assert_ptr_nonnull(conn);

        snprintf(cmd, sizeof(cmd),
                 "%s/contrib/guest-domain-xml --name %s --policy test-observe --vmem-size 0 --no-agent --mem 1024M "
                 "--workload '--anon-mib 100 --sleep-ms 500'",
                 top_srcdir, domain_name);
        xml = e2e_capture(cmd, &status);
        ck_assert_msg(xml && status == 0, "guest-domain-xml failed");
        virDomainPtr dom = virDomainDefineXML(conn, xml);
        ck_assert_msg(dom, "define: %s", virGetLastErrorMessage());
        ck_assert_msg(virDomainCreate(dom) == 0, "start: %s", virGetLastErrorMessage());
        virDomainFree(dom);

        seed_history();
        daemon_fixture_start(&daemon_fx);
        for (double start = e2e_now_sec(); e2e_now_sec() < start + WAIT_SEC && !managed();)
                usleep(200 * 1000);
        ck_assert_msg(managed(), "the domain was not picked up");
        fprintf(stderr, "[%5.1fs] managed\n", e2e_now_sec() - t0);
        uint64_t live_before = current_memory(false), config_before = current_memory(true);
        ck_assert_uint_eq(config_before, 1024 * MIB);

        /* The figures, from the seeded history and the persistent definition. */
        CtlRun run = ctl_run(&daemon_fx, "--json", "recommend", domain_name);
        ck_assert_msg(run.code == 0, "recommend: %d %s", run.code, run.err);
        json_object *doc = json_tokener_parse(run.out), *r = doc ? recommendation(doc) : NULL, *v;
        ck_assert_msg(r, "no JSON: %s", run.out);
        ck_assert_uint_eq(u64_of(r, "points"), 288);
        ck_assert_uint_eq(u64_of(r, "estimate-p95"), 400 * MIB);
        ck_assert_uint_eq(u64_of(r, "estimate-peak"), 600 * MIB);
        ck_assert_uint_eq(u64_of(r, "boot"), 440 * MIB);
        ck_assert_uint_eq(u64_of(r, "floor"), 440 * MIB);
        ck_assert_uint_eq(u64_of(r, "max"), 660 * MIB);
        ck_assert_uint_eq(u64_of(r, "boot-now"), 1024 * MIB);
        ck_assert(json_object_object_get_ex(r, "gain", &v) && json_object_get_int64(v) == (int64_t) (584 * MIB));
        ck_assert(json_object_object_get_ex(r, "enough-history", &v) && json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(r, "can-apply", &v) && json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(r, "boot-rule", &v) &&
                  strstr(json_object_get_string(v), "p95 of the estimate over") &&
                  strstr(json_object_get_string(v), "(288 points, since"));
        json_object_put(doc);
        ctl_run_done(&run);

        /* The table says the same, in words. */
        run = ctl_run(&daemon_fx, "--no-pager", "recommend");
        ck_assert_msg(run.code == 0 && strstr(run.out, "440 MiB") && strstr(run.out, "recommended: p95"), "%s",
                      run.out);
        ctl_run_done(&run);

        /* --apply without --yes and without a terminal: a dry run, nothing written. */
        run = ctl_run(&daemon_fx, "recommend", "--apply", domain_name);
        ck_assert_msg(run.code == 0 && strstr(run.out, "Dry run"), "dry run: %d %s %s", run.code, run.out, run.err);
        ctl_run_done(&run);
        ck_assert_uint_eq(current_memory(true), config_before);
        ck_assert_uint_eq(daemon_fixture_log_count(&daemon_fx, "Next boot's size set"), 0);

        /* --yes: the persistent definition changes, the running domain does not. */
        run = ctl_run(&daemon_fx, "recommend", "--apply", "--yes", domain_name);
        ck_assert_msg(run.code == 0, "apply: %d %s %s", run.code, run.out, run.err);
        ctl_run_done(&run);
        ck_assert_uint_eq(current_memory(true), 440 * MIB);
        ck_assert_uint_eq(current_memory(false), live_before);
        ck_assert_msg(daemon_fixture_wait_log(&daemon_fx, "Next boot's size set to 440 MiB (was 1 GiB)", 30),
                      "the apply was not logged");
        ck_assert_uint_eq(daemon_fixture_log_count(&daemon_fx, "as recommended (uid 0, pid "), 1);

        /* Now it boots with that: the next recommendation has nothing more to give. */
        run = ctl_run(&daemon_fx, "--json", "recommend", domain_name);
        doc = json_tokener_parse(run.out);
        ck_assert_ptr_nonnull(doc);
        r = recommendation(doc);
        ck_assert_uint_eq(u64_of(r, "boot-now"), 440 * MIB);
        ck_assert(json_object_object_get_ex(r, "gain", &v) && json_object_get_int64(v) == 0);
        json_object_put(doc);
        ctl_run_done(&run);

        status = daemon_fixture_stop(&daemon_fx, SIGTERM);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        fprintf(stderr, "[%5.1fs] total\n", e2e_now_sec() - t0);
}
END_TEST

int main(void) {
        return libvirt_test_host_run("daemon-recommend-libvirt", "real-libvirtd", test_recommend_apply, setup_all,
                                     teardown_all, 600);
}
