/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/macro.h"
#include "common/memory-ledger.h"
#include "daemon/metrics.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

static char *format(const MetricsGuest *g, size_t n, const MetricsHost *h) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(metrics_format(f, g, n, h), 0);
        fclose(f);
        return buf;
}

static char *label(const char *s) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ck_assert_ptr_nonnull(f);
        metrics_write_label_value(f, s);
        fclose(f);
        return buf;
}

static const MetricsGuest two_guests[] = {
        {
                /* A libvirt domain in hold, with the agent's refaults. */
                .name = "web1",
                .domain = "web1",
                .state = "hold",
                .uuid = "6f1c2a3e-0b7d-4c55-9d4e-2f0a1b2c3d4e",
                .source = "libvirt",
                .policy = "balanced",
                .mode = "rightsize",
                .estimate_bytes = 734003200,
                .estimate_lower_bytes = 681574400,
                .estimate_upper_bytes = 786432000,
                .target_bytes = 805306368,
                .actual_bytes = 805306368,
                .host_rss_bytes = 850000000,
                .max_bytes = 1073741824,
                .floor_bytes = 268435456,
                .reclaimable_bytes = 268435456,
                /* 14 days of history: boot it at 800 MiB. */
                .boot_bytes = 1073741824,
                .recommended_boot_bytes = 838860800,
                .recommended_floor_bytes = 786432000,
                .recommended_max_bytes = 943718400,
                .recommendation_points = 2016,
                .refault_rate = 0.25,
                .major_fault_rate = 0,
                .refaults_total = 1200,
                .major_faults_total = 40,
                .oom_kills_total = 0,
                .probe_cycles_total = 2,
                .reprobes_skipped_total = 3,
                .probe_refaults_total = 900,
                .faults_total = 1,
                .hugepages_collapsed_total = 12,
                .hugepage_holes_filled_bytes_total = 3145728,
                .resizes_total = { 17, 0, 0 },
                .resize_failures_total = { 1, 0, 0 },
                /* Its memory ledger: no free page reporting, 200 MB of free memory still held. */
                .ledger_known = true,
                .host_swap_bytes = 0,
                .host_ksm_bytes = METRICS_UNKNOWN,
                .reported_used_bytes = 450000000,
                .reported_cache_bytes = 100000000,
                .reported_free_bytes = 250000000,
                .balloon_bytes = 268435456,
                .free_returned_bytes = 50000000,
                .unreturned_bytes = 200000000,
                .refilled_bytes = 44693632,
                .unreturned_why = MEM_LEDGER_NO_FPR,
        },
        {
                /* Just discovered, plain QEMU, observed: little is known yet. */
                .name = "db",
                .state = NULL,
                .source = "qemu",
                .policy = "observe-only",
                .mode = "observe",
                .estimate_bytes = METRICS_UNKNOWN,
                .estimate_lower_bytes = METRICS_UNKNOWN,
                .estimate_upper_bytes = METRICS_UNKNOWN,
                .target_bytes = METRICS_UNKNOWN,
                .actual_bytes = 1073741824,
                .host_rss_bytes = METRICS_UNKNOWN,
                .max_bytes = 1073741824,
                .floor_bytes = 134217728,
                .reclaimable_bytes = METRICS_UNKNOWN,
                /* No history yet: no recommendation, 0 points. */
                .boot_bytes = 1073741824,
                .recommended_boot_bytes = METRICS_UNKNOWN,
                .recommended_floor_bytes = METRICS_UNKNOWN,
                .recommended_max_bytes = METRICS_UNKNOWN,
                .recommendation_points = 0,
                .refault_rate = NAN,
                .major_fault_rate = 12.5,
                .refaults_total = METRICS_UNKNOWN,
                .major_faults_total = 3,
                .oom_kills_total = METRICS_UNKNOWN,
                .probe_refaults_total = METRICS_UNKNOWN,
        },
};
static const char two_guests_text[] =
        "# TYPE rightsize_guest_estimate_bytes gauge\n"
        "# UNIT rightsize_guest_estimate_bytes bytes\n"
        "# HELP rightsize_guest_estimate_bytes Estimated working set of the guest.\n"
        "rightsize_guest_estimate_bytes{guest=\"web1\",domain=\"web1\"} 734003200\n"
        "# TYPE rightsize_guest_estimate_lower_bytes gauge\n"
        "# UNIT rightsize_guest_estimate_lower_bytes bytes\n"
        "# HELP rightsize_guest_estimate_lower_bytes Lower bound of the working-set estimate.\n"
        "rightsize_guest_estimate_lower_bytes{guest=\"web1\",domain=\"web1\"} 681574400\n"
        "# TYPE rightsize_guest_estimate_upper_bytes gauge\n"
        "# UNIT rightsize_guest_estimate_upper_bytes bytes\n"
        "# HELP rightsize_guest_estimate_upper_bytes Upper bound of the working-set estimate.\n"
        "rightsize_guest_estimate_upper_bytes{guest=\"web1\",domain=\"web1\"} 786432000\n"
        "# TYPE rightsize_guest_target_bytes gauge\n"
        "# UNIT rightsize_guest_target_bytes bytes\n"
        "# HELP rightsize_guest_target_bytes Memory size rightsize is steering the guest to.\n"
        "rightsize_guest_target_bytes{guest=\"web1\",domain=\"web1\"} 805306368\n"
        "# TYPE rightsize_guest_actual_bytes gauge\n"
        "# UNIT rightsize_guest_actual_bytes bytes\n"
        "# HELP rightsize_guest_actual_bytes Memory size the guest has now, as the balloon or virtio-mem reports it.\n"
        "rightsize_guest_actual_bytes{guest=\"web1\",domain=\"web1\"} 805306368\n"
        "rightsize_guest_actual_bytes{guest=\"db\"} 1073741824\n"
        "# TYPE rightsize_guest_host_rss_bytes gauge\n"
        "# UNIT rightsize_guest_host_rss_bytes bytes\n"
        "# HELP rightsize_guest_host_rss_bytes Resident memory of the guest's QEMU process on the host.\n"
        "rightsize_guest_host_rss_bytes{guest=\"web1\",domain=\"web1\"} 850000000\n"
        "# TYPE rightsize_guest_max_bytes gauge\n"
        "# UNIT rightsize_guest_max_bytes bytes\n"
        "# HELP rightsize_guest_max_bytes Largest size the guest's policy lets it have.\n"
        "rightsize_guest_max_bytes{guest=\"web1\",domain=\"web1\"} 1073741824\n"
        "rightsize_guest_max_bytes{guest=\"db\"} 1073741824\n"
        "# TYPE rightsize_guest_floor_bytes gauge\n"
        "# UNIT rightsize_guest_floor_bytes bytes\n"
        "# HELP rightsize_guest_floor_bytes Smallest size the guest's policy lets it have.\n"
        "rightsize_guest_floor_bytes{guest=\"web1\",domain=\"web1\"} 268435456\n"
        "rightsize_guest_floor_bytes{guest=\"db\"} 134217728\n"
        "# TYPE rightsize_guest_reclaimable_bytes gauge\n"
        "# UNIT rightsize_guest_reclaimable_bytes bytes\n"
        "# HELP rightsize_guest_reclaimable_bytes Memory the guest would give back held at its estimate plus margin: max minus that size.\n"
        "rightsize_guest_reclaimable_bytes{guest=\"web1\",domain=\"web1\"} 268435456\n"
        "# TYPE rightsize_guest_boot_bytes gauge\n"
        "# UNIT rightsize_guest_boot_bytes bytes\n"
        "# HELP rightsize_guest_boot_bytes Memory the guest booted with (its boot memory, else its whole size).\n"
        "rightsize_guest_boot_bytes{guest=\"web1\",domain=\"web1\"} 1073741824\n"
        "rightsize_guest_boot_bytes{guest=\"db\"} 1073741824\n"
        "# TYPE rightsize_guest_recommended_boot_bytes gauge\n"
        "# UNIT rightsize_guest_recommended_boot_bytes bytes\n"
        "# HELP rightsize_guest_recommended_boot_bytes Next boot's recommended size (libvirt currentMemory): p95 of the estimate over the last 14 days plus 10 %.\n"
        "rightsize_guest_recommended_boot_bytes{guest=\"web1\",domain=\"web1\"} 838860800\n"
        "# TYPE rightsize_guest_recommended_floor_bytes gauge\n"
        "# UNIT rightsize_guest_recommended_floor_bytes bytes\n"
        "# HELP rightsize_guest_recommended_floor_bytes Next boot's recommended floor: p50 of the estimate over the last 14 days plus 10 %.\n"
        "rightsize_guest_recommended_floor_bytes{guest=\"web1\",domain=\"web1\"} 786432000\n"
        "# TYPE rightsize_guest_recommended_max_bytes gauge\n"
        "# UNIT rightsize_guest_recommended_max_bytes bytes\n"
        "# HELP rightsize_guest_recommended_max_bytes Next boot's recommended maximum: the peak estimate over the last 14 days plus 10 %.\n"
        "rightsize_guest_recommended_max_bytes{guest=\"web1\",domain=\"web1\"} 943718400\n"
        "# TYPE rightsize_guest_recommendation_points gauge\n"
        "# HELP rightsize_guest_recommendation_points Points (one per 10 minutes with an estimate) the recommendation is made of; under 144 (a day) it is provisional.\n"
        "rightsize_guest_recommendation_points{guest=\"web1\",domain=\"web1\"} 2016\n"
        "rightsize_guest_recommendation_points{guest=\"db\"} 0\n"
        "# TYPE rightsize_guest_host_swap_bytes gauge\n"
        "# UNIT rightsize_guest_host_swap_bytes bytes\n"
        "# HELP rightsize_guest_host_swap_bytes Memory of the guest's QEMU process in the host's swap (VmSwap): guest memory the host pushed out rather than got back.\n"
        "rightsize_guest_host_swap_bytes{guest=\"web1\",domain=\"web1\"} 0\n"
        "# TYPE rightsize_guest_host_ksm_bytes gauge\n"
        "# UNIT rightsize_guest_host_ksm_bytes bytes\n"
        "# HELP rightsize_guest_host_ksm_bytes Pages of the guest's QEMU process that KSM merged with others.\n"
        "# TYPE rightsize_guest_reported_used_bytes gauge\n"
        "# UNIT rightsize_guest_reported_used_bytes bytes\n"
        "# HELP rightsize_guest_reported_used_bytes Memory the guest says it uses: its total minus free and page cache (balloon stats, clamped to its size).\n"
        "rightsize_guest_reported_used_bytes{guest=\"web1\",domain=\"web1\"} 450000000\n"
        "# TYPE rightsize_guest_reported_cache_bytes gauge\n"
        "# UNIT rightsize_guest_reported_cache_bytes bytes\n"
        "# HELP rightsize_guest_reported_cache_bytes Page cache the guest says it has: reclaimable (balloon stats).\n"
        "rightsize_guest_reported_cache_bytes{guest=\"web1\",domain=\"web1\"} 100000000\n"
        "# TYPE rightsize_guest_reported_free_bytes gauge\n"
        "# UNIT rightsize_guest_reported_free_bytes bytes\n"
        "# HELP rightsize_guest_reported_free_bytes Memory the guest says is free (balloon stats).\n"
        "rightsize_guest_reported_free_bytes{guest=\"web1\",domain=\"web1\"} 250000000\n"
        "# TYPE rightsize_guest_balloon_bytes gauge\n"
        "# UNIT rightsize_guest_balloon_bytes bytes\n"
        "# HELP rightsize_guest_balloon_bytes Memory the balloon (and unplugged virtio-mem) holds back: the guest's configured size minus its size now.\n"
        "rightsize_guest_balloon_bytes{guest=\"web1\",domain=\"web1\"} 268435456\n"
        "# TYPE rightsize_guest_free_returned_bytes gauge\n"
        "# UNIT rightsize_guest_free_returned_bytes bytes\n"
        "# HELP rightsize_guest_free_returned_bytes The guest's free memory the host does not hold: reported by free page reporting, or never touched.\n"
        "rightsize_guest_free_returned_bytes{guest=\"web1\",domain=\"web1\"} 50000000\n"
        "# TYPE rightsize_guest_unreturned_bytes gauge\n"
        "# UNIT rightsize_guest_unreturned_bytes bytes\n"
        "# HELP rightsize_guest_unreturned_bytes The guest's free memory the host still holds in QEMU's RSS or swap (rightsize_guest_unreturned_reason says why).\n"
        "rightsize_guest_unreturned_bytes{guest=\"web1\",domain=\"web1\"} 200000000\n"
        "# TYPE rightsize_guest_refilled_bytes gauge\n"
        "# UNIT rightsize_guest_refilled_bytes bytes\n"
        "# HELP rightsize_guest_refilled_bytes Memory the host holds for the guest beyond its size: ballooned ranges filled back in (khugepaged) and QEMU's own.\n"
        "rightsize_guest_refilled_bytes{guest=\"web1\",domain=\"web1\"} 44693632\n"
        "# TYPE rightsize_guest_refault_rate gauge\n"
        "# HELP rightsize_guest_refault_rate Page refaults per second in the guest.\n"
        "rightsize_guest_refault_rate{guest=\"web1\",domain=\"web1\"} 0.25\n"
        "# TYPE rightsize_guest_major_fault_rate gauge\n"
        "# HELP rightsize_guest_major_fault_rate Major page faults per second in the guest.\n"
        "rightsize_guest_major_fault_rate{guest=\"web1\",domain=\"web1\"} 0\n"
        "rightsize_guest_major_fault_rate{guest=\"db\"} 12.5\n"
        "# TYPE rightsize_guest_refaults_total counter\n"
        "# HELP rightsize_guest_refaults_total Workingset refaults in the guest (its vmstat through the guest agent) since rightsized started.\n"
        "rightsize_guest_refaults_total{guest=\"web1\",domain=\"web1\"} 1200\n"
        "# TYPE rightsize_guest_major_faults_total counter\n"
        "# HELP rightsize_guest_major_faults_total Major page faults in the guest since rightsized started.\n"
        "rightsize_guest_major_faults_total{guest=\"web1\",domain=\"web1\"} 40\n"
        "rightsize_guest_major_faults_total{guest=\"db\"} 3\n"
        "# TYPE rightsize_guest_oom_kills_total counter\n"
        "# HELP rightsize_guest_oom_kills_total OOM kills in the guest since rightsized started.\n"
        "rightsize_guest_oom_kills_total{guest=\"web1\",domain=\"web1\"} 0\n"
        "# TYPE rightsize_guest_probe_cycles_total counter\n"
        "# HELP rightsize_guest_probe_cycles_total Probe cycles started (from learn or hold) since rightsized started.\n"
        "rightsize_guest_probe_cycles_total{guest=\"web1\",domain=\"web1\"} 2\n"
        "rightsize_guest_probe_cycles_total{guest=\"db\"} 0\n"
        "# TYPE rightsize_guest_reprobes_skipped_total counter\n"
        "# HELP rightsize_guest_reprobes_skipped_total Re-probes not run because the guest had nothing to give (held at its floor, or a confirmed estimate of a set outside the page cache with no sign it shrank) since rightsized started.\n"
        "rightsize_guest_reprobes_skipped_total{guest=\"web1\",domain=\"web1\"} 3\n"
        "rightsize_guest_reprobes_skipped_total{guest=\"db\"} 0\n"
        "# TYPE rightsize_guest_probe_refaults_total counter\n"
        "# HELP rightsize_guest_probe_refaults_total Workingset refaults in intervals the guest spent in probe or backoff since rightsized started.\n"
        "rightsize_guest_probe_refaults_total{guest=\"web1\",domain=\"web1\"} 900\n"
        "# TYPE rightsize_guest_faults_total counter\n"
        "# HELP rightsize_guest_faults_total Times the guest went from no fault to a fault (faulty, or a balloon that stopped, stats that lie) since rightsized started.\n"
        "rightsize_guest_faults_total{guest=\"web1\",domain=\"web1\"} 1\n"
        "rightsize_guest_faults_total{guest=\"db\"} 0\n"
        "# TYPE rightsize_guest_hugepages_collapsed_total counter\n"
        "# HELP rightsize_guest_hugepages_collapsed_total 2 MiB ranges of the guest's RAM put back on a host huge page (hugepage-repair=) since rightsized started.\n"
        "rightsize_guest_hugepages_collapsed_total{guest=\"web1\",domain=\"web1\"} 12\n"
        "rightsize_guest_hugepages_collapsed_total{guest=\"db\"} 0\n"
        "# TYPE rightsize_guest_hugepage_holes_filled_bytes_total counter\n"
        "# HELP rightsize_guest_hugepage_holes_filled_bytes_total Holes those collapses filled: memory the host spent again under the guest, since rightsized started.\n"
        "rightsize_guest_hugepage_holes_filled_bytes_total{guest=\"web1\",domain=\"web1\"} 3145728\n"
        "rightsize_guest_hugepage_holes_filled_bytes_total{guest=\"db\"} 0\n"
        "# TYPE rightsize_guest_resizes_total counter\n"
        "# HELP rightsize_guest_resizes_total Resizes rightsized sent to the guest (or queued, for libvirt) since it started, by device.\n"
        "rightsize_guest_resizes_total{guest=\"web1\",domain=\"web1\",actuator=\"balloon\"} 17\n"
        "rightsize_guest_resizes_total{guest=\"web1\",domain=\"web1\",actuator=\"virtio-mem\"} 0\n"
        "rightsize_guest_resizes_total{guest=\"web1\",domain=\"web1\",actuator=\"dimm\"} 0\n"
        "rightsize_guest_resizes_total{guest=\"db\",actuator=\"balloon\"} 0\n"
        "rightsize_guest_resizes_total{guest=\"db\",actuator=\"virtio-mem\"} 0\n"
        "rightsize_guest_resizes_total{guest=\"db\",actuator=\"dimm\"} 0\n"
        "# TYPE rightsize_guest_resize_failures_total counter\n"
        "# HELP rightsize_guest_resize_failures_total Resizes of the guest that failed (at once or later) since rightsized started, by device.\n"
        "rightsize_guest_resize_failures_total{guest=\"web1\",domain=\"web1\",actuator=\"balloon\"} 1\n"
        "rightsize_guest_resize_failures_total{guest=\"web1\",domain=\"web1\",actuator=\"virtio-mem\"} 0\n"
        "rightsize_guest_resize_failures_total{guest=\"web1\",domain=\"web1\",actuator=\"dimm\"} 0\n"
        "rightsize_guest_resize_failures_total{guest=\"db\",actuator=\"balloon\"} 0\n"
        "rightsize_guest_resize_failures_total{guest=\"db\",actuator=\"virtio-mem\"} 0\n"
        "rightsize_guest_resize_failures_total{guest=\"db\",actuator=\"dimm\"} 0\n"
        "# TYPE rightsize_guest_state gauge\n"
        "# HELP rightsize_guest_state The guest's state: 1 for the state it is in, 0 for each of the others.\n"
        "rightsize_guest_state{guest=\"web1\",domain=\"web1\",state=\"probe\"} 0\n"
        "rightsize_guest_state{guest=\"web1\",domain=\"web1\",state=\"hold\"} 1\n"
        "rightsize_guest_state{guest=\"web1\",domain=\"web1\",state=\"faulty\"} 0\n"
        "# TYPE rightsize_guest_unreturned_reason gauge\n"
        "# HELP rightsize_guest_unreturned_reason Why the host did not get the guest's free memory back: 1 for each reason that holds, 0 for the others (clamped: the guest's own figures were beyond its size, and were clamped to it).\n"
        "rightsize_guest_unreturned_reason{guest=\"web1\",domain=\"web1\",reason=\"no-free-page-reporting\"} 1\n"
        "rightsize_guest_unreturned_reason{guest=\"web1\",domain=\"web1\",reason=\"fragmented\"} 0\n"
        "rightsize_guest_unreturned_reason{guest=\"web1\",domain=\"web1\",reason=\"khugepaged\"} 0\n"
        "rightsize_guest_unreturned_reason{guest=\"web1\",domain=\"web1\",reason=\"host-swap\"} 0\n"
        "rightsize_guest_unreturned_reason{guest=\"web1\",domain=\"web1\",reason=\"clamped\"} 0\n"
        "# TYPE rightsize_guest_info gauge\n"
        "# HELP rightsize_guest_info Where the guest comes from and how it is managed (always 1).\n"
        "rightsize_guest_info{guest=\"web1\",domain=\"web1\",uuid=\"6f1c2a3e-0b7d-4c55-9d4e-2f0a1b2c3d4e\",source=\"libvirt\",policy=\"balanced\",mode=\"rightsize\"} 1\n"
        "rightsize_guest_info{guest=\"db\",uuid=\"\",source=\"qemu\",policy=\"observe-only\",mode=\"observe\"} 1\n"
        "# TYPE rightsize_host_reclaimed_bytes gauge\n"
        "# UNIT rightsize_host_reclaimed_bytes bytes\n"
        "# HELP rightsize_host_reclaimed_bytes Memory rightsizing holds back from the guests: the sum of the size each had when rightsized took it over minus its actual size.\n"
        "rightsize_host_reclaimed_bytes 223741824\n"
        "# TYPE rightsize_host_ksm_sharing_bytes gauge\n"
        "# UNIT rightsize_host_ksm_sharing_bytes bytes\n"
        "# HELP rightsize_host_ksm_sharing_bytes Memory KSM saves on the host: the sites sharing its merged pages (pages_sharing).\n"
        "rightsize_host_ksm_sharing_bytes 4096000\n"
        "# TYPE rightsize_host_ksm_shared_bytes gauge\n"
        "# UNIT rightsize_host_ksm_shared_bytes bytes\n"
        "# HELP rightsize_host_ksm_shared_bytes KSM's merged pages in use on the host (pages_shared).\n"
        "rightsize_host_ksm_shared_bytes 409600\n"
        "# TYPE rightsize_host_thp_refills gauge\n"
        "# HELP rightsize_host_thp_refills Whether the host's khugepaged fills ballooned ranges back in (huge pages on, max_ptes_none above 0).\n"
        "rightsize_host_thp_refills 1\n"
        "# TYPE rightsize_guests_managed gauge\n"
        "# HELP rightsize_guests_managed Guests rightsize is managing.\n"
        "rightsize_guests_managed 2\n"
        "# TYPE rightsize_build_info gauge\n"
        "# HELP rightsize_build_info The rightsized that wrote this file (always 1).\n"
        "rightsize_build_info{version=\"1.2.3\"} 1\n"
        "# EOF\n";

static const char *const test_states[] = { "probe", "hold", "faulty" };

START_TEST(test_exact_output) {
        _cleanup_(freep) char *text = NULL;
        MetricsHost host = { .reclaimed_bytes = 223741824, .guests_managed = 2, .version = "1.2.3",
                             .states = test_states, .n_states = ARRAY_SIZE(test_states),
                             .ksm_known = true, .ksm_sharing_bytes = 4096000, .ksm_shared_bytes = 409600,
                             .thp_known = true, .thp_refills = true };

        text = format(two_guests, ARRAY_SIZE(two_guests), &host);
        ck_assert_str_eq(text, two_guests_text);
}
END_TEST

START_TEST(test_no_guests) {
        _cleanup_(freep) char *text = NULL;
        MetricsHost host = { 0 };

        text = format(NULL, 0, &host);
        ck_assert_ptr_nonnull(strstr(text, "\nrightsize_guests_managed 0\n# EOF\n"));
        ck_assert_ptr_null(strstr(text, "{guest="));
        /* Every family is still declared, so dashboards see the metric names. */
        ck_assert_ptr_nonnull(strstr(text, "# TYPE rightsize_guest_estimate_bytes gauge\n"));
        ck_assert_int_eq(metrics_format(NULL, NULL, 0, &host), -EINVAL);
}
END_TEST

START_TEST(test_label_escaping) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "plain", "plain" },
                { "a\\b", "a\\\\b" },
                { "say \"hi\"", "say \\\"hi\\\"" },
                { "two\nlines", "two\\nlines" },
                { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xb3", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\xb3" },
                { "bad\xff", "bad\xef\xbf\xbd" },
                { "overlong\xc0\xaf", "overlong\xef\xbf\xbd\xef\xbf\xbd" },
                { "surrogate\xed\xa0\x80", "surrogate\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
                { "cut\xe2\x82", "cut\xef\xbf\xbd\xef\xbf\xbd" },
                { "too-big\xf4\x90\x80\x80", "too-big\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
                { "", "" },
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_(freep) char *got = label(cases[i].in);
                ck_assert_msg(strcmp(got, cases[i].out) == 0, "case %zu: '%s' -> '%s'", i, cases[i].in, got);
        }

        /* In context: a hostile guest name cannot add a sample or a label of its own. */
        MetricsGuest g = {
                .name = "x\"} 1\nrightsize_guests_managed{guest=\"y",
                .state = "a\\\"",
                .estimate_bytes = 1, .estimate_lower_bytes = METRICS_UNKNOWN, .estimate_upper_bytes = METRICS_UNKNOWN,
                .target_bytes = METRICS_UNKNOWN, .actual_bytes = METRICS_UNKNOWN, .host_rss_bytes = METRICS_UNKNOWN,
                .refault_rate = NAN, .major_fault_rate = NAN,
        };
        MetricsHost host = { .guests_managed = 1 };
        _cleanup_(freep) char *text = format(&g, 1, &host);
        ck_assert_ptr_nonnull(strstr(text,
                "rightsize_guest_estimate_bytes{guest=\"x\\\"} 1\\nrightsize_guests_managed{guest=\\\"y\"} 1\n"));
        ck_assert_ptr_nonnull(strstr(text, ",state=\"a\\\\\\\"\"} 1\n"));
        /* Exactly one line starts with rightsize_guests_managed. */
        unsigned n = 0;
        for (const char *p = text; (p = strstr(p, "\nrightsize_guests_managed")); p++)
                n++;
        ck_assert_uint_eq(n, 1);
}
END_TEST

START_TEST(test_rates) {
        MetricsGuest g = {
                .name = "g", .estimate_bytes = METRICS_UNKNOWN, .estimate_lower_bytes = METRICS_UNKNOWN,
                .estimate_upper_bytes = METRICS_UNKNOWN, .target_bytes = METRICS_UNKNOWN,
                .actual_bytes = METRICS_UNKNOWN, .host_rss_bytes = METRICS_UNKNOWN,
                .refault_rate = 0.1, .major_fault_rate = 1e-7,
        };
        MetricsHost host = { 0 };
        _cleanup_(freep) char *a = format(&g, 1, &host), *b = NULL, *c = NULL;

        /* Shortest form that reads back exactly. */
        ck_assert_ptr_nonnull(strstr(a, "rightsize_guest_refault_rate{guest=\"g\"} 0.1\n"));
        ck_assert_ptr_nonnull(strstr(a, "rightsize_guest_major_fault_rate{guest=\"g\"} 1e-07\n"));

        g.refault_rate = 1.0 / 3.0;
        g.major_fault_rate = INFINITY;
        b = format(&g, 1, &host);
        const char *v = strstr(b, "rightsize_guest_refault_rate{guest=\"g\"} ");
        ck_assert_ptr_nonnull(v);
        ck_assert(strtod(v + strlen("rightsize_guest_refault_rate{guest=\"g\"} "), NULL) == 1.0 / 3.0);
        ck_assert_ptr_nonnull(strstr(b, "rightsize_guest_major_fault_rate{guest=\"g\"} +Inf\n"));

        g.refault_rate = 123456789.0;
        c = format(&g, 1, &host);
        ck_assert_ptr_nonnull(strstr(c, "rightsize_guest_refault_rate{guest=\"g\"} 123456789\n"));
}
END_TEST

/* The number of lines that start with `prefix`. */
static unsigned count_lines(const char *text, const char *prefix) {
        unsigned n = 0;
        for (const char *p = text; p; p = strchr(p, '\n')) {
                if (*p == '\n')
                        p++;
                n += strncmp(p, prefix, strlen(prefix)) == 0;
        }
        return n;
}

START_TEST(test_info_and_domain_escaping) {
        /* Every label of a libvirt guest comes from its XML or its name: none is trusted. */
        MetricsGuest g = {
                .name = "vm\"1",
                .domain = "dom\"} 1\nrightsize_guests_managed{x=\"\xff",
                .state = "hold",
                .uuid = "u\\u",
                .source = "libvirt",
                .policy = "p\nq",
                .mode = NULL,
                .estimate_bytes = METRICS_UNKNOWN, .estimate_lower_bytes = METRICS_UNKNOWN,
                .estimate_upper_bytes = METRICS_UNKNOWN, .target_bytes = METRICS_UNKNOWN,
                .actual_bytes = METRICS_UNKNOWN, .host_rss_bytes = METRICS_UNKNOWN, .max_bytes = 2048,
                .floor_bytes = METRICS_UNKNOWN, .reclaimable_bytes = METRICS_UNKNOWN,
                .boot_bytes = METRICS_UNKNOWN, .recommended_boot_bytes = METRICS_UNKNOWN,
                .recommended_floor_bytes = METRICS_UNKNOWN, .recommended_max_bytes = METRICS_UNKNOWN,
                .recommendation_points = METRICS_UNKNOWN,
                .refault_rate = NAN, .major_fault_rate = NAN,
                .refaults_total = METRICS_UNKNOWN, .major_faults_total = METRICS_UNKNOWN,
                .oom_kills_total = METRICS_UNKNOWN, .probe_refaults_total = METRICS_UNKNOWN,
                .resizes_total = { 3, METRICS_UNKNOWN, METRICS_UNKNOWN },
                .resize_failures_total = { METRICS_UNKNOWN, METRICS_UNKNOWN, METRICS_UNKNOWN },
        };
        MetricsHost host = { .guests_managed = 1 };
        _cleanup_(freep) char *text = format(&g, 1, &host);
        const char *labels = "{guest=\"vm\\\"1\",domain=\"dom\\\"} 1\\nrightsize_guests_managed{x=\\\"\xef\xbf\xbd\"";

        ck_assert_ptr_nonnull(strstr(text, "rightsize_guest_info"));
        _cleanup_(freep) char *info = NULL, *max = NULL, *resize = NULL;
        ck_assert_int_ge(asprintf(&info, "\nrightsize_guest_info%s,uuid=\"u\\\\u\",source=\"libvirt\",policy=\"p\\nq\",mode=\"\"} 1\n",
                                  labels), 0);
        ck_assert_int_ge(asprintf(&max, "\nrightsize_guest_max_bytes%s} 2048\n", labels), 0);
        ck_assert_int_ge(asprintf(&resize, "\nrightsize_guest_resizes_total%s,actuator=\"balloon\"} 3\n", labels), 0);
        ck_assert_msg(strstr(text, info), "no info line %s in:\n%s", info, text);
        ck_assert_msg(strstr(text, max), "no max line %s in:\n%s", max, text);
        ck_assert_msg(strstr(text, resize), "no resize line %s in:\n%s", resize, text);
        /* The hostile domain added no sample of its own, and unknown figures are left out. */
        ck_assert_uint_eq(count_lines(text, "rightsize_guests_managed"), 1);
        ck_assert_uint_eq(count_lines(text, "rightsize_guest_resizes_total{"), 1);
        ck_assert_uint_eq(count_lines(text, "rightsize_guest_resize_failures_total{"), 0);
        ck_assert_uint_eq(count_lines(text, "rightsize_guest_refaults_total{"), 0);
        ck_assert_uint_eq(count_lines(text, "rightsize_guest_floor_bytes{"), 0);
        /* Known counters are there, at 0. */
        ck_assert_uint_eq(count_lines(text, "rightsize_guest_probe_cycles_total{"), 1);
        ck_assert_uint_eq(count_lines(text, "rightsize_guest_faults_total{"), 1);

        /* Without a source, no info line; a guest without a domain has no domain label. */
        g.source = NULL;
        g.domain = NULL;
        _cleanup_(freep) char *bare = format(&g, 1, &host);
        ck_assert_uint_eq(count_lines(bare, "rightsize_guest_info{"), 0);
        ck_assert_ptr_nonnull(strstr(bare, "# TYPE rightsize_guest_info gauge\n"));
        ck_assert_ptr_nonnull(strstr(bare, "\nrightsize_guest_max_bytes{guest=\"vm\\\"1\"} 2048\n"));
        ck_assert_ptr_null(strstr(bare, "domain="));
}
END_TEST

START_TEST(test_counter_types) {
        MetricsGuest g = {
                .name = "g", .estimate_bytes = METRICS_UNKNOWN, .estimate_lower_bytes = METRICS_UNKNOWN,
                .estimate_upper_bytes = METRICS_UNKNOWN, .target_bytes = METRICS_UNKNOWN,
                .actual_bytes = METRICS_UNKNOWN, .host_rss_bytes = METRICS_UNKNOWN,
                .refault_rate = NAN, .major_fault_rate = NAN,
                .refaults_total = UINT64_MAX - 1, .oom_kills_total = 7,
        };
        MetricsHost host = { 0 };
        _cleanup_(freep) char *text = format(&g, 1, &host);
        static const char *const counters[] = {
                "rightsize_guest_refaults_total", "rightsize_guest_major_faults_total",
                "rightsize_guest_oom_kills_total", "rightsize_guest_probe_cycles_total",
                "rightsize_guest_reprobes_skipped_total",
                "rightsize_guest_probe_refaults_total", "rightsize_guest_faults_total",
                "rightsize_guest_resizes_total", "rightsize_guest_resize_failures_total",
        };

        /* Prometheus text format: the TYPE line names the counter with its _total. */
        for (size_t i = 0; i < ARRAY_SIZE(counters); i++) {
                _cleanup_(freep) char *type = NULL;
                ck_assert_int_ge(asprintf(&type, "# TYPE %s counter\n", counters[i]), 0);
                ck_assert_msg(strstr(text, type), "missing: %s", type);
        }
        ck_assert_ptr_nonnull(strstr(text, "# TYPE rightsize_guest_max_bytes gauge\n# UNIT rightsize_guest_max_bytes bytes\n"));
        ck_assert_ptr_nonnull(strstr(text, "\nrightsize_guest_refaults_total{guest=\"g\"} 18446744073709551614\n"));
        ck_assert_ptr_nonnull(strstr(text, "\nrightsize_guest_oom_kills_total{guest=\"g\"} 7\n"));
        ck_assert_ptr_nonnull(strstr(text, "\nrightsize_guest_resizes_total{guest=\"g\",actuator=\"virtio-mem\"} 0\n"));
        ck_assert_ptr_nonnull(strstr(text, "\nrightsize_guest_resize_failures_total{guest=\"g\",actuator=\"dimm\"} 0\n"));
        ck_assert_uint_eq(count_lines(text, "# UNIT rightsize_guest_refaults_total"), 0);
}
END_TEST

START_TEST(test_counter_accumulates) {
        MetricsCounter c;
        const uint64_t U = METRICS_UNKNOWN;

        metrics_counter_init(&c);
        ck_assert(!c.known);
        ck_assert_uint_eq(metrics_counter_update(&c, U, U), 0);
        ck_assert(!c.known);
        /* The first reading only sets the base: what came before the daemon is not its count. */
        ck_assert_uint_eq(metrics_counter_update(&c, 1000, U), 0);
        ck_assert(c.known);
        ck_assert_uint_eq(c.total, 0);
        ck_assert_uint_eq(metrics_counter_update(&c, 1010, U), 10);
        ck_assert_uint_eq(c.total, 10);
        /* The guest rebooted: rebase, count nothing for that interval, never go down. */
        ck_assert_uint_eq(metrics_counter_update(&c, 4, U), 0);
        ck_assert_uint_eq(c.total, 10);
        ck_assert_uint_eq(metrics_counter_update(&c, 9, U), 5);
        ck_assert_uint_eq(c.total, 15);
        /* A missing reading loses that interval and the next (no base), nothing more. */
        ck_assert_uint_eq(metrics_counter_update(&c, U, U), 0);
        ck_assert_uint_eq(metrics_counter_update(&c, 20, U), 0);
        ck_assert_uint_eq(metrics_counter_update(&c, 21, U), 1);
        ck_assert_uint_eq(c.total, 16);

        /* Two sources of one kernel counter (the agent's vmstat, the balloon stats): the first
         * when it has an increase, else the second, never both. */
        metrics_counter_init(&c);
        (void) metrics_counter_update(&c, 100, 100);
        ck_assert_uint_eq(metrics_counter_update(&c, 103, 103), 3);
        ck_assert_uint_eq(metrics_counter_update(&c, U, 105), 2);   /* the agent did not answer */
        ck_assert_uint_eq(metrics_counter_update(&c, 108, 108), 3); /* the agent's base was lost */
        ck_assert_uint_eq(metrics_counter_update(&c, 110, U), 2);
        ck_assert_uint_eq(c.total, 10);

        /* A lying guest cannot wrap the total (or make it read as unknown). */
        metrics_counter_init(&c);
        (void) metrics_counter_update(&c, 0, U);
        (void) metrics_counter_update(&c, UINT64_MAX - 1, U);
        (void) metrics_counter_update(&c, 0, U);
        (void) metrics_counter_update(&c, UINT64_MAX - 1, U);
        ck_assert_uint_eq(c.total, UINT64_MAX - 1);
        ck_assert_uint_eq(metrics_counter_add(UINT64_MAX, 5), UINT64_MAX - 1);
        ck_assert_uint_eq(metrics_counter_add(2, 3), 5);
}
END_TEST

START_TEST(test_write_metrics_file) {
        _cleanup_(freep) char *dir = test_mkdtemp(), *path = NULL, *bad = NULL, *got = NULL;
        MetricsHost host = { .reclaimed_bytes = 223741824, .guests_managed = 2, .version = "1.2.3",
                             .states = test_states, .n_states = ARRAY_SIZE(test_states),
                             .ksm_known = true, .ksm_sharing_bytes = 4096000, .ksm_shared_bytes = 409600,
                             .thp_known = true, .thp_refills = true };
        struct stat st;

        ck_assert_int_ge(asprintf(&path, "%s/rightsize.prom", dir), 0);
        ck_assert_int_eq(metrics_write_file(path, two_guests, ARRAY_SIZE(two_guests), &host), 0);
        got = test_read_file(path);
        ck_assert_str_eq(got, two_guests_text);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0644);

        ck_assert_int_ge(asprintf(&bad, "%s/missing/rightsize.prom", dir), 0);
        ck_assert_int_eq(metrics_write_file(bad, two_guests, ARRAY_SIZE(two_guests), &host), -ENOENT);
        test_rm_rf(dir);
}
END_TEST

int main(void) {
        return check_run_case("daemon-metrics", "metrics", NULL, NULL, 0,
                              CHECK_TESTS(test_exact_output, test_no_guests, test_label_escaping, test_rates,
                                          test_info_and_domain_escaping, test_counter_types, test_counter_accumulates,
                                          test_write_metrics_file));
}
