/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "policies/controller.h"
#include "policies/policy-file.h"
#include "tests/lib/check-run.h"

START_TEST(test_parse_full) {
        RsPolicy p;
        RsPolicyError e;
        const char *text = "# a comment\n"
                           "[policy]\n"
                           "match = web-* db-?\n"
                           "mode = on-host-pressure\n"
                           "poll-interval = 5s\n"
                           "floor = 512M\n"
                           "floor-percent = 20%\n"
                           "max = 8G\n"
                           "margin = 15 ; inline comment\n"
                           "probe-step-min = 2%\n"
                           "probe-step-max = 8%\n"
                           "hold-time = 15min\n"
                           "refault-sensitivity = high\n"
                           "actuator = both\n"
                           "shares = 2048\n"
                           "change-cap-percent = 20\n"
                           "change-cap = 256M\n"
                           "dead-band = 16M\n"
                           "allow-dimm = yes\n"
                           "guest-agent = no\n"
                           "qemu-monitor = yes\n";
        ck_assert_int_eq(rs_policy_parse_string(text, "/etc/rightsize/policies/web.conf", &p, &e), 0);
        ck_assert_str_eq(p.name, "web");
        ck_assert_str_eq(p.match, "web-* db-?");
        ck_assert_int_eq(p.mode, RS_MODE_ON_HOST_PRESSURE);
        ck_assert_uint_eq(p.poll_interval_usec, 5 * USEC_PER_SEC);
        ck_assert_uint_eq(p.floor_bytes, 512 * MIB);
        ck_assert_double_eq(p.floor_percent, 20);
        ck_assert_uint_eq(p.max_bytes, 8 * GIB);
        ck_assert_double_eq(p.margin_percent, 15);
        ck_assert_double_eq(p.probe_step_min_percent, 2);
        ck_assert_double_eq(p.probe_step_max_percent, 8);
        ck_assert_uint_eq(p.hold_usec, 900 * USEC_PER_SEC);
        ck_assert_int_eq(p.refault_sensitivity, RS_SENSITIVITY_HIGH);
        ck_assert_int_eq(p.actuator, RS_ACTUATOR_BOTH);
        ck_assert_uint_eq(p.shares, 2048);
        ck_assert_double_eq(p.change_cap_percent, 20);
        ck_assert_uint_eq(p.change_cap_bytes, 256 * MIB);
        ck_assert_uint_eq(p.dead_band_bytes, 16 * MIB);
        ck_assert(p.allow_dimm);
        ck_assert(!p.guest_agent);
        ck_assert(p.qemu_monitor);
}
END_TEST

START_TEST(test_hugepage_repair_key) {
        RsPolicy p, o;
        RsPolicyError e;
        ck_assert_int_eq(rs_policy_parse_string("[policy]\nmode = rightsize\n", "x.conf", &p, &e), 0);
        ck_assert_double_eq(p.hugepage_repair_percent, 0); /* opt-in (policy.h) */
        ck_assert_int_eq(rs_policy_parse_string("[policy]\nhugepage-repair = 90%\n", "x.conf", &p, &e), 0);
        ck_assert_double_eq(p.hugepage_repair_percent, 90);
        ck_assert_int_eq(rs_policy_parse_string("[policy]\nhugepage-repair = no\n", "x.conf", &p, &e), 0);
        ck_assert_double_eq(p.hugepage_repair_percent, 0);
        ck_assert_int_eq(rs_policy_parse_string("[policy]\nhugepage-repair = yes\n", "x.conf", &p, &e), 0);
        ck_assert_double_eq(p.hugepage_repair_percent, RS_HUGEPAGE_REPAIR_DEFAULT);
        ck_assert_int_eq(rs_policy_preset("balanced", &o), 0);
        ck_assert_double_eq(o.hugepage_repair_percent, 0);
}
END_TEST

START_TEST(test_preset_key) {
        RsPolicy p, a;
        RsPolicyError e;
        ck_assert_int_eq(rs_policy_parse_string("[policy]\npreset = aggressive\nmargin = 7\n", "x.conf", &p, &e), 0);
        ck_assert_int_eq(rs_policy_preset("aggressive", &a), 0);
        ck_assert_str_eq(p.name, "x");
        ck_assert_double_eq(p.margin_percent, 7);
        ck_assert_double_eq(p.probe_step_max_percent, a.probe_step_max_percent);
        /* Off unless asked for: it makes libvirt mark the domain tainted. */
        ck_assert(!p.qemu_monitor);
        ck_assert_int_eq(rs_policy_parse_string("[policy]\nmargin = 7\npreset = aggressive\n", "x.conf", &p, &e), -EINVAL);
        ck_assert_uint_eq(e.line, 3);
        ck_assert_str_eq(e.key, "preset");
}
END_TEST

/* controller = probe | cost and the controller's tunables: parsed in the policy's units, the
 * defaults the controller's own (rs_controller_params_init()), handed over in its units. */
START_TEST(test_controller_keys) {
        RsPolicy p;
        RsPolicyError e;
        RsControllerParams got, want;

        ck_assert_int_eq(rs_policy_parse_string("[policy]\nmode = rightsize\n", "x.conf", &p, &e), 0);
        ck_assert_int_eq(p.core, RS_CORE_PROBE); /* the default until stage 2 of issue 35 */
        rs_controller_params_from_policy(&got, &p);
        rs_controller_params_init(&want, &p);
        ck_assert_double_eq_tol(got.cost_target, want.cost_target, 1e-12);
        ck_assert_double_eq_tol(got.cost_window_sec, want.cost_window_sec, 1e-12);
        ck_assert_double_eq_tol(got.tighten_per_min, want.tighten_per_min, 1e-12);
        ck_assert_double_eq_tol(got.loosen_per_sec, want.loosen_per_sec, 1e-12);
        ck_assert_double_eq_tol(got.loosen_max_per_sec, want.loosen_max_per_sec, 1e-12);
        ck_assert_double_eq_tol(got.margin, want.margin, 1e-12);
        ck_assert_double_eq_tol(got.blind_margin, want.blind_margin, 1e-12);
        ck_assert_double_eq_tol(got.fault_latency_sec, want.fault_latency_sec, 1e-12);
        ck_assert_double_eq_tol(got.verdict_expiry_sec, want.verdict_expiry_sec, 1e-12);

        const char *text = "[policy]\n"
                           "controller = cost\n"
                           "cost-target = 0.5%\n"
                           "cost-window = 1min\n"
                           "tighten-rate = 2%\n"
                           "loosen-rate = 0.5%\n"
                           "loosen-rate-max = 3%\n"
                           "fault-latency = 1ms\n"
                           "verdict-expiry = 2h\n"
                           "margin = 20%\n";
        ck_assert_int_eq(rs_policy_parse_string(text, "x.conf", &p, &e), 0);
        ck_assert_int_eq(p.core, RS_CORE_COST);
        ck_assert_str_eq(rs_core_to_string(p.core), "cost");
        rs_controller_params_from_policy(&got, &p);
        ck_assert_double_eq_tol(got.cost_target, 0.005, 1e-12);
        ck_assert_double_eq_tol(got.cost_window_sec, 60, 1e-9);
        ck_assert_double_eq_tol(got.tighten_per_min, 0.02, 1e-12);
        ck_assert_double_eq_tol(got.loosen_per_sec, 0.005, 1e-12);
        ck_assert_double_eq_tol(got.loosen_max_per_sec, 0.03, 1e-12);
        ck_assert_double_eq_tol(got.fault_latency_sec, 0.001, 1e-12);
        ck_assert_double_eq_tol(got.verdict_expiry_sec, 7200, 1e-9);
        ck_assert_double_eq_tol(got.margin, 0.20, 1e-12);
        ck_assert_int_eq(rs_controller_params_validate(&got, NULL), 0);
        /* a policy that differs only in a controller key is another policy (a reload applies it) */
        RsPolicy q = p;
        q.cost_window_usec++;
        ck_assert(!rs_policy_equal(&p, &q));

        /* Every value the policy accepts, the controller accepts: its bounds, both sides. */
        const char *edges[] = {
                "cost-target = 49.9%", "cost-target = 0.0001%", "cost-window = 1s", "cost-window = 1h",
                "tighten-rate = 50%", "loosen-rate = 100%\nloosen-rate-max = 100%", "fault-latency = 999999us",
                "fault-latency = 1us", "verdict-expiry = 0", "verdict-expiry = 7d",
        };
        for (size_t i = 0; i < ARRAY_SIZE(edges); i++) {
                char buf[256];
                const char *bad = NULL;
                snprintf(buf, sizeof(buf), "[policy]\ncontroller = cost\n%s\n", edges[i]);
                ck_assert_msg(rs_policy_parse_string(buf, "x.conf", &p, &e) == 0, "%s refused", edges[i]);
                rs_controller_params_from_policy(&got, &p);
                ck_assert_msg(rs_controller_params_validate(&got, &bad) == 0, "%s: controller refuses %s", edges[i], bad);
        }
}
END_TEST

/* Each bad file: the error names the file, the line and the key, and *ret stays as it was. */
static void expect_error(const char *text, unsigned line, const char *key) {
        RsPolicy p, before;
        RsPolicyError e;
        char buf[512];

        rs_policy_init(&p);
        snprintf(p.name, sizeof(p.name), "previous");
        before = p;
        ck_assert_int_eq(rs_policy_parse_string(text, "bad.conf", &p, &e), -EINVAL);
        ck_assert_str_eq(e.file, "bad.conf");
        ck_assert_msg(e.line == line, "line %u, wanted %u for %s", e.line, line, key);
        ck_assert_str_eq(e.key, key);
        ck_assert(rs_policy_equal(&p, &before));
        rs_policy_error_format(&e, buf, sizeof(buf));
        ck_assert_ptr_nonnull(strstr(buf, "bad.conf:"));
        ck_assert_ptr_nonnull(strstr(buf, key));
}

START_TEST(test_errors_name_file_line_key) {
        expect_error("[policy]\nmode = turbo\n", 2, "mode");
        expect_error("[policy]\n\n# c\nfloor = lots\n", 4, "floor");
        expect_error("[policy]\nmargin = -5\n", 2, "margin");
        expect_error("[policy]\nshares = 12abc\n", 2, "shares");
        expect_error("[policy]\npoll-interval = 10 fortnights\n", 2, "poll-interval");
        expect_error("[policy]\nallow-dimm = perhaps\n", 2, "allow-dimm");
        expect_error("[policy]\nguest-agent = sometimes\n", 2, "guest-agent");
        expect_error("[policy]\nqemu-monitor = maybe\n", 2, "qemu-monitor");
        expect_error("[policy]\nhugepage-repair = 120%\n", 2, "hugepage-repair");
        expect_error("[policy]\nhugepage-repair = 10\n", 2, "hugepage-repair");
        expect_error("[policy]\nhugepage-repair = sometimes\n", 2, "hugepage-repair");
        expect_error("[policy]\nactuator = dimm\n", 2, "actuator");
        expect_error("[policy]\nrefault-sensitivity = 11\n", 2, "refault-sensitivity");
        expect_error("[policy]\ncolour = blue\n", 2, "colour");
        expect_error("[other]\nmode = observe\n", 2, "mode");
        /* range checks that need the whole policy still name the key's line */
        expect_error("[policy]\nprobe-step-min = 5\nprobe-step-max = 2\n", 3, "probe-step-max");
        expect_error("[policy]\nshares = 0\n", 2, "shares");
        expect_error("[policy]\nmargin = 500\n", 2, "margin");
        /* the controller's keys, out of range on either side or not a value at all */
        expect_error("[policy]\ncontroller = senpai\n", 2, "controller");
        expect_error("[policy]\ncost-target = 0\n", 2, "cost-target");
        expect_error("[policy]\ncost-target = 50%\n", 2, "cost-target");
        expect_error("[policy]\ncost-target = lots\n", 2, "cost-target");
        expect_error("[policy]\ncost-window = 500ms\n", 2, "cost-window");
        expect_error("[policy]\ncost-window = 2h\n", 2, "cost-window");
        expect_error("[policy]\ntighten-rate = 0\n", 2, "tighten-rate");
        expect_error("[policy]\ntighten-rate = 60%\n", 2, "tighten-rate");
        expect_error("[policy]\nloosen-rate = 0\n", 2, "loosen-rate");
        expect_error("[policy]\nloosen-rate = 2%\nloosen-rate-max = 1%\n", 3, "loosen-rate-max");
        expect_error("[policy]\nloosen-rate-max = 101%\n", 2, "loosen-rate-max");
        expect_error("[policy]\nfault-latency = 0\n", 2, "fault-latency");
        expect_error("[policy]\nfault-latency = 1s\n", 2, "fault-latency");
        expect_error("[policy]\nverdict-expiry = 8d\n", 2, "verdict-expiry");
        expect_error("[policy]\nverdict-expiry = soon\n", 2, "verdict-expiry");
}
END_TEST

/* An out-of-range controller key says what the range is. */
START_TEST(test_controller_key_range_message) {
        RsPolicy p;
        RsPolicyError e;
        char buf[512];
        ck_assert_int_eq(rs_policy_parse_string("[policy]\ncontroller = cost\ncost-window = 2h\n", "c.conf", &p, &e),
                         -EINVAL);
        rs_policy_error_format(&e, buf, sizeof(buf));
        ck_assert_str_eq(buf, "c.conf:3: cost-window: value out of range (1s to 1h)");
}
END_TEST

START_TEST(test_syntax_error_line) {
        RsPolicy p;
        RsPolicyError e;
        ck_assert_int_eq(rs_policy_parse_string("[policy]\nmode = observe\nthis line is nonsense\n", "s.conf", &p, &e), -EINVAL);
        ck_assert_uint_eq(e.line, 3);
}
END_TEST

START_TEST(test_missing_file) {
        RsPolicy p;
        RsPolicyError e;
        ck_assert_int_eq(rs_policy_file_load("/nonexistent/x.conf", &p, &e), -ENOENT);
        ck_assert_str_eq(e.file, "/nonexistent/x.conf");
}
END_TEST

static void write_file(const char *dir, const char *name, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
}

static unsigned n_errors;
static RsPolicyError last_error;
static void on_error(const RsPolicyError *e, void *userdata) {
        n_errors++;
        last_error = *e;
}

START_TEST(test_dir_reload_keeps_previous_policy) {
        char dir[] = "/tmp/rs-policy-XXXXXX";
        RsPolicySet set = {};
        ck_assert_ptr_nonnull(mkdtemp(dir));

        write_file(dir, "10-web.conf", "[policy]\nmatch = web-*\nmargin = 12\n");
        write_file(dir, "99-default.conf", "[policy]\nmatch = *\nmode = observe\n");
        write_file(dir, "README", "not a policy");
        n_errors = 0;
        ck_assert_int_eq(rs_policy_set_load_dir(&set, dir, on_error, NULL), 0);
        ck_assert_uint_eq(set.n, 2);
        const RsPolicy *p = rs_policy_set_select(&set, "web-3", NULL);
        ck_assert_ptr_nonnull(p);
        ck_assert_str_eq(p->name, "10-web");
        ck_assert_double_eq(p->margin_percent, 12);
        ck_assert_str_eq(rs_policy_set_select(&set, "db", NULL)->name, "99-default");

        /* the web policy becomes invalid: reported, and the old one stays in force */
        write_file(dir, "10-web.conf", "[policy]\nmatch = web-*\nmargin = twelve\n");
        ck_assert_int_eq(rs_policy_set_load_dir(&set, dir, on_error, NULL), 1);
        ck_assert_uint_eq(n_errors, 1);
        ck_assert_uint_eq(last_error.line, 3);
        ck_assert_str_eq(last_error.key, "margin");
        ck_assert_ptr_nonnull(strstr(last_error.file, "10-web.conf"));
        p = rs_policy_set_select(&set, "web-3", NULL);
        ck_assert_str_eq(p->name, "10-web");
        ck_assert_double_eq(p->margin_percent, 12);

        rs_policy_set_clear(&set);
        ck_assert_int_lt(rs_policy_set_load_dir(&set, "/nonexistent-dir", on_error, NULL), 0);

        char path[512];
        const char *names[] = { "10-web.conf", "99-default.conf", "README" };
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                unlink(path);
        }
        rmdir(dir);
}
END_TEST

/* A reload with a controller key out of range keeps the policy as it was: the guest stays on the
 * controller and its tunables it had. */
START_TEST(test_dir_reload_keeps_controller_policy) {
        char dir[] = "/tmp/rs-policy-XXXXXX";
        char path[512];
        RsPolicySet set = {};
        ck_assert_ptr_nonnull(mkdtemp(dir));

        write_file(dir, "10-db.conf", "[policy]\nmatch = db-*\ncontroller = cost\ncost-target = 0.5%\n");
        n_errors = 0;
        ck_assert_int_eq(rs_policy_set_load_dir(&set, dir, on_error, NULL), 0);
        const RsPolicy *p = rs_policy_set_select(&set, "db-1", NULL);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(p->core, RS_CORE_COST);
        ck_assert_double_eq(p->cost_target_percent, 0.5);

        write_file(dir, "10-db.conf", "[policy]\nmatch = db-*\ncontroller = cost\ncost-target = 80%\n");
        ck_assert_int_eq(rs_policy_set_load_dir(&set, dir, on_error, NULL), 1);
        ck_assert_uint_eq(n_errors, 1);
        ck_assert_str_eq(last_error.key, "cost-target");
        ck_assert_uint_eq(last_error.line, 4);
        ck_assert_ptr_nonnull(strstr(last_error.message, "more than 0 and less than 50 %"));
        p = rs_policy_set_select(&set, "db-1", NULL);
        ck_assert_ptr_nonnull(p);
        ck_assert_int_eq(p->core, RS_CORE_COST);
        ck_assert_double_eq(p->cost_target_percent, 0.5);

        rs_policy_set_clear(&set);
        snprintf(path, sizeof(path), "%s/10-db.conf", dir);
        unlink(path);
        rmdir(dir);
}
END_TEST

/* The shipped preset files parse and say the same as the built-in presets. */
START_TEST(test_shipped_presets_match_builtin) {
        for (size_t i = 0; i < ARRAY_SIZE(rs_policy_preset_names); i++) {
                char path[1024];
                RsPolicy file, builtin;
                RsPolicyError e;
                char buf[512];
                snprintf(path, sizeof(path), "%s/etc/policies/%s.conf", RS_TOP_SRCDIR, rs_policy_preset_names[i]);
                int r = rs_policy_file_load(path, &file, &e);
                ck_assert_msg(r == 0, "%s", rs_policy_error_format(&e, buf, sizeof(buf)));
                ck_assert_int_eq(rs_policy_preset(rs_policy_preset_names[i], &builtin), 0);
                ck_assert_str_eq(file.match, "");
                snprintf(file.match, sizeof(file.match), "%s", builtin.match);
                ck_assert_msg(rs_policy_equal(&file, &builtin), "%s differs from the built-in preset", path);
        }
}
END_TEST

START_TEST(test_garbage_never_crashes) {
        uint64_t x = 0x1234567;
        char text[300];
        for (int round = 0; round < 2000; round++) {
                for (size_t i = 0; i < sizeof(text) - 1; i++) {
                        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                        static const char alphabet[] = "[]=;#\n abcdefgmnoprstuvwxyz-0123456789%.MGK";
                        text[i] = alphabet[x % (sizeof(alphabet) - 1)];
                }
                text[sizeof(text) - 1] = '\0';
                RsPolicy p;
                RsPolicyError e;
                int r = rs_policy_parse_string(text, "fuzz.conf", &p, &e);
                ck_assert(r == 0 || r == -EINVAL);
                if (r == 0)
                        ck_assert_int_eq(rs_policy_validate(&p, NULL), 0);
        }
}
END_TEST

int main(void) {
        return check_run_case("policy-file", "policy-file", NULL, NULL, 0,
                              CHECK_TESTS(test_parse_full, test_hugepage_repair_key, test_preset_key, test_controller_keys,
                                          test_errors_name_file_line_key, test_controller_key_range_message,
                                          test_syntax_error_line, test_missing_file,
                                          test_dir_reload_keeps_previous_policy, test_dir_reload_keeps_controller_policy,
                                          test_shipped_presets_match_builtin,
                                          test_garbage_never_crashes));
}
