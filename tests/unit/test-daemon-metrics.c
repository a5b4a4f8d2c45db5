/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/macro.h"
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
                .name = "web1",
                .state = "holding",
                .estimate_bytes = 734003200,
                .estimate_lower_bytes = 681574400,
                .estimate_upper_bytes = 786432000,
                .target_bytes = 805306368,
                .actual_bytes = 805306368,
                .host_rss_bytes = 850000000,
                .refault_rate = 0.25,
                .major_fault_rate = 0,
        },
        {
                /* Just discovered: little is known yet. */
                .name = "db",
                .state = NULL,
                .estimate_bytes = METRICS_UNKNOWN,
                .estimate_lower_bytes = METRICS_UNKNOWN,
                .estimate_upper_bytes = METRICS_UNKNOWN,
                .target_bytes = METRICS_UNKNOWN,
                .actual_bytes = 1073741824,
                .host_rss_bytes = METRICS_UNKNOWN,
                .refault_rate = NAN,
                .major_fault_rate = 12.5,
        },
};

static const char two_guests_text[] =
        "# TYPE rightsize_guest_estimate_bytes gauge\n"
        "# UNIT rightsize_guest_estimate_bytes bytes\n"
        "# HELP rightsize_guest_estimate_bytes Estimated working set of the guest.\n"
        "rightsize_guest_estimate_bytes{guest=\"web1\"} 734003200\n"
        "# TYPE rightsize_guest_estimate_lower_bytes gauge\n"
        "# UNIT rightsize_guest_estimate_lower_bytes bytes\n"
        "# HELP rightsize_guest_estimate_lower_bytes Lower bound of the working-set estimate.\n"
        "rightsize_guest_estimate_lower_bytes{guest=\"web1\"} 681574400\n"
        "# TYPE rightsize_guest_estimate_upper_bytes gauge\n"
        "# UNIT rightsize_guest_estimate_upper_bytes bytes\n"
        "# HELP rightsize_guest_estimate_upper_bytes Upper bound of the working-set estimate.\n"
        "rightsize_guest_estimate_upper_bytes{guest=\"web1\"} 786432000\n"
        "# TYPE rightsize_guest_target_bytes gauge\n"
        "# UNIT rightsize_guest_target_bytes bytes\n"
        "# HELP rightsize_guest_target_bytes Memory size rightsize is steering the guest to.\n"
        "rightsize_guest_target_bytes{guest=\"web1\"} 805306368\n"
        "# TYPE rightsize_guest_actual_bytes gauge\n"
        "# UNIT rightsize_guest_actual_bytes bytes\n"
        "# HELP rightsize_guest_actual_bytes Memory size the guest has now, as the balloon or virtio-mem reports it.\n"
        "rightsize_guest_actual_bytes{guest=\"web1\"} 805306368\n"
        "rightsize_guest_actual_bytes{guest=\"db\"} 1073741824\n"
        "# TYPE rightsize_guest_host_rss_bytes gauge\n"
        "# UNIT rightsize_guest_host_rss_bytes bytes\n"
        "# HELP rightsize_guest_host_rss_bytes Resident memory of the guest's QEMU process on the host.\n"
        "rightsize_guest_host_rss_bytes{guest=\"web1\"} 850000000\n"
        "# TYPE rightsize_guest_refault_rate gauge\n"
        "# HELP rightsize_guest_refault_rate Page refaults per second in the guest.\n"
        "rightsize_guest_refault_rate{guest=\"web1\"} 0.25\n"
        "# TYPE rightsize_guest_major_fault_rate gauge\n"
        "# HELP rightsize_guest_major_fault_rate Major page faults per second in the guest.\n"
        "rightsize_guest_major_fault_rate{guest=\"web1\"} 0\n"
        "rightsize_guest_major_fault_rate{guest=\"db\"} 12.5\n"
        "# TYPE rightsize_guest_state gauge\n"
        "# HELP rightsize_guest_state Current state of the guest's estimator (1 for the state it is in).\n"
        "rightsize_guest_state{guest=\"web1\",state=\"holding\"} 1\n"
        "# TYPE rightsize_host_reclaimed_bytes gauge\n"
        "# UNIT rightsize_host_reclaimed_bytes bytes\n"
        "# HELP rightsize_host_reclaimed_bytes Memory the balloons hold back from the guests: the sum of max minus actual size.\n"
        "rightsize_host_reclaimed_bytes 223741824\n"
        "# TYPE rightsize_guests_managed gauge\n"
        "# HELP rightsize_guests_managed Guests rightsize is managing.\n"
        "rightsize_guests_managed 2\n"
        "# EOF\n";

START_TEST(test_exact_output) {
        _cleanup_(freep) char *text = NULL;
        MetricsHost host = { .reclaimed_bytes = 223741824, .guests_managed = 2 };

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

START_TEST(test_write_metrics_file) {
        _cleanup_(freep) char *dir = test_mkdtemp(), *path = NULL, *bad = NULL, *got = NULL;
        MetricsHost host = { .reclaimed_bytes = 223741824, .guests_managed = 2 };
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
        Suite *s = suite_create("daemon-metrics");
        TCase *tc = tcase_create("metrics");
        tcase_add_test(tc, test_exact_output);
        tcase_add_test(tc, test_no_guests);
        tcase_add_test(tc, test_label_escaping);
        tcase_add_test(tc, test_rates);
        tcase_add_test(tc, test_write_metrics_file);
        suite_add_tcase(s, tc);

        return check_run_suite(s);
}
