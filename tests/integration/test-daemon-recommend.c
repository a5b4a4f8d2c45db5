/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `rightsizectl recommend` against the real rightsized and simulated QMP guests, whose histories
 * the test writes into the state directory before the daemon starts (daemon/boot-history.h's
 * format): sim-0 two days of points (the figures and their rules), sim-1 three hours (said to be
 * provisional, and still printed), sim-2 a corrupt file (discarded with one line, the daemon
 * runs, no figures). A QMP guest has no persistent definition: `--apply` refuses it with a clear
 * message and writes nothing. The metrics file carries the same figures. */

#include <check.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/boot-history.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/ctl-json.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"

#define WAIT_SEC 60
#define HOUR_USEC (3600ULL * 1000000)

static BusFixture bus;
static DaemonFixture d;

/* `hours` of points ending now: every 20th at 600 MiB, the others at 400 MiB. */
static void seed(const char *name, unsigned hours) {
        _cleanup_free_ BootHistory *h = malloc(sizeof(*h));
        struct timespec ts;

        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(clock_gettime(CLOCK_REALTIME, &ts), 0);
        uint64_t now = (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000, n = hours * 6ULL;
        boot_history_init(h);
        for (uint64_t i = 0; i < n; i++)
                boot_history_push(h, &(BootHistoryPoint) { now - n * BOOT_HISTORY_INTERVAL_USEC + i * BOOT_HISTORY_INTERVAL_USEC,
                                                           i % 20 == 19 ? 600 * MIB : 400 * MIB, GIB, GIB, NAN });
        ck_assert_int_eq(boot_history_save(d.state_dir, name, h), 0);
}

static void setup(void) {
        static const char *const args[] = { "--scenario", "steady", "--time-scale", "20", NULL };
        _cleanup_free_ char *corrupt = NULL;

        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        daemon_fixture_write_config(&d, "", NULL);
        daemon_fixture_write_policy(&d, "watch", "[policy]\nmatch = *\nmode = observe\npoll-interval = 1s\n");
        seed("sim-0", 48);
        seed("sim-1", 3);
        ck_assert_int_ge(asprintf(&corrupt, "%s/sim-2.history", d.state_dir), 0);
        test_write_file(corrupt, "\001RSHISH1 not really: 4 billion points follow\n");
        daemon_fixture_start_sims(&d, 3, args, WAIT_SEC);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

static json_object *by_name(json_object *doc, const char *name) {
        json_object *recs, *n;
        ck_assert(json_object_object_get_ex(doc, "recommendations", &recs));
        for (size_t i = 0; i < json_object_array_length(recs); i++) {
                json_object *r = json_object_array_get_idx(recs, i);
                if (json_object_object_get_ex(r, "name", &n) && strcmp(json_object_get_string(n), name) == 0)
                        return r;
        }
        ck_abort_msg("no recommendation for %s", name);
        return NULL;
}

static const char *str_of(json_object *o, const char *key) {
        json_object *v;
        return json_object_object_get_ex(o, key, &v) && v ? json_object_get_string(v) : "";
}

static bool bool_of(json_object *o, const char *key) {
        json_object *v;
        ck_assert_msg(json_object_object_get_ex(o, key, &v) && v, "no %s", key);
        return json_object_get_boolean(v);
}

START_TEST(test_recommend_qmp_guests) {
        CtlRun run = ctl_run(&d, "--json", "recommend");
        ck_assert_msg(run.code == 0, "recommend: %d %s", run.code, run.err);
        json_object *doc = json_tokener_parse(run.out);
        ck_assert_msg(doc, "no JSON: %s", run.out);
        ctl_run_done(&run);

        json_object *r0 = by_name(doc, "sim-0"), *r1 = by_name(doc, "sim-1"), *r2 = by_name(doc, "sim-2");
        ck_assert_uint_eq(ctl_json_u64(r0, "points"), 288);
        ck_assert_uint_eq(ctl_json_u64(r0, "boot"), 440 * MIB);
        ck_assert_uint_eq(ctl_json_u64(r0, "floor"), 440 * MIB);
        ck_assert_uint_eq(ctl_json_u64(r0, "max"), 660 * MIB);
        ck_assert(bool_of(r0, "enough-history"));
        ck_assert_str_eq(str_of(r0, "boot-now-from"), "boot memory");
        ck_assert(!bool_of(r0, "can-apply"));
        ck_assert_msg(strstr(str_of(r0, "apply-refused"), "QMP guest has no persistent definition"), "%s",
                      str_of(r0, "apply-refused"));
        /* Three hours: figures all the same, each rule saying it is provisional. */
        ck_assert_uint_eq(ctl_json_u64(r1, "points"), 18);
        ck_assert(!bool_of(r1, "enough-history"));
        ck_assert_uint_eq(ctl_json_u64(r1, "boot"), 440 * MIB);
        ck_assert_msg(strstr(str_of(r1, "boot-rule"), "provisional"), "%s", str_of(r1, "boot-rule"));
        /* The corrupt file: discarded, once, and the guest has no figures yet. */
        ck_assert_uint_eq(ctl_json_u64(r2, "points"), 0);
        ck_assert_str_eq(str_of(r2, "boot-rule"), "no history yet");
        json_object_put(doc);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "Discarding history file"), 1);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "sim-2.history: shorter than its header"), 1);

        /* In words: the table, the rules, and a plain line for too little history. */
        run = ctl_run(&d, "--no-pager", "recommend");
        ck_assert_msg(run.code == 0, "%s", run.err);
        ck_assert_msg(strstr(run.out, "recommended: p95 of the estimate over 2.0 days (288 points, since"), "%s", run.out);
        ck_assert_msg(strstr(run.out, "Only 2.8 h of history (less than 1 day): the figures are provisional."), "%s",
                      run.out);
        ck_assert_msg(strstr(run.out, "no recommendation: no history yet"), "%s", run.out);
        /* Rows by name, as list has them. */
        ck_assert_msg(strstr(run.out, "\nsim-0 ") < strstr(run.out, "\nsim-1 ") &&
                              strstr(run.out, "\nsim-1 ") < strstr(run.out, "\nsim-2 "), "%s", run.out);
        ctl_run_done(&run);

        /* --apply on a QMP guest: refused, clearly, and nothing asked of the daemon. */
        run = ctl_run(&d, "recommend", "--apply", "--yes", "sim-0");
        ck_assert_int_eq(run.code, 1);
        ck_assert_msg(strstr(run.err, "sim-0: a QMP guest has no persistent definition to write"), "%s", run.err);
        ctl_run_done(&run);
        ck_assert_uint_eq(daemon_fixture_log_count(&d, "Next boot's size set"), 0);
        /* Usage: --apply names one guest. */
        run = ctl_run(&d, "recommend", "--apply");
        ck_assert_int_eq(run.code, 2);
        ctl_run_done(&run);

        /* The metrics file has the same figures once it is written again: all three guests'
         * (a file written between two guests' first cycles has only some of them). */
        _cleanup_free_ char *prom = NULL, *text = NULL;
        ck_assert_int_ge(asprintf(&prom, "%s/rightsize.prom", d.dir), 0);
        bool all = false;
        for (unsigned i = 0; !all && i < WAIT_SEC * 10; i++) {
                free(text);
                text = test_read_file(prom);
                all = text && strstr(text, "rightsize_guest_recommended_boot_bytes{guest=\"sim-0\"} 461373440") &&
                      strstr(text, "rightsize_guest_recommendation_points{guest=\"sim-1\"} 18") &&
                      strstr(text, "rightsize_guest_recommendation_points{guest=\"sim-2\"} 0");
                if (!all)
                        usleep(100 * 1000);
        }
        ck_assert_msg(all, "a recommendation's figures missing from the metrics file: %s", text ?: "(none)");
        ck_assert(daemon_fixture_alive(&d));
}
END_TEST

int main(void) {
        return check_run_case("daemon-recommend", "qmp", setup, teardown, 180, CHECK_TESTS(test_recommend_qmp_guests));
}
