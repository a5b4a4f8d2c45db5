/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `rightsizectl report`'s "where the host's memory is" (GetMemoryReport, daemon/dbus-api.md)
 * against the real rightsized and simulated guests: for each guest the figures add up to what
 * the guest reported (used + cache + free = its total, free = what came back + what is still
 * held) and to what QEMU and the host say (the balloon = its size less its actual size, held =
 * QEMU's RSS + swap, as GetGuest has them at the same sample); the host's line is the guests'
 * sum. A guest whose statistics are near 2^64 moves no figure past its size, and the daemon goes
 * on. The metrics file carries the same figures. */

#include <check.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/check-run.h"
#include "tests/lib/ctl-json.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/test-util.h"

#define WAIT_SEC 60
#define U UINT64_MAX

static const char fast_policy[] = "[policy]\n"
                                  "match = *\n"
                                  "poll-interval = 1s\n"
                                  "floor = 768M\n"
                                  "floor-percent = 0\n"
                                  "hold-time = 4s\n";

static BusFixture bus;
static DaemonFixture d;

static void start(const char *const *sim_args, unsigned n) {
        daemon_fixture_setup(&d, &bus, BUS_POLICY_OPEN);
        daemon_fixture_write_config(&d, "", NULL); /* its metrics-path is DIR/rightsize.prom */
        daemon_fixture_write_policy(&d, "fast", fast_policy);
        daemon_fixture_start_sims(&d, n, sim_args, WAIT_SEC);
}

static void setup_honest(void) {
        /* Ballooned to 1.5 GiB of 2 GiB before rightsized came: the balloon holds something. */
        static const char *const args[] = { "--scenario", "steady", "--time-scale", "20", "--start-balloon", "1536",
                                            NULL };
        start(args, 2);
}

static void setup_hostile(void) {
        static const char *const args[] = { "--scenario", "steady", "--time-scale", "20", "--fault", "1:lie-huge@3",
                                            NULL };
        start(args, 2);
}

static void teardown(void) {
        daemon_fixture_teardown(&d, &bus);
}

/* `rightsizectl --json report`, parsed (put it). */
static json_object *report(void) {
        CtlRun run = ctl_run(&d, "--json", "report");
        json_object *doc = run.code == 0 ? json_tokener_parse(run.out) : NULL;
        char out[512];
        snprintf(out, sizeof(out), "%s%s", run.out ?: "", run.err ?: "");
        int code = run.code;
        ctl_run_done(&run);
        ck_assert_msg(code == 0 && doc, "rightsizectl --json report: %d %s", code, out);
        return doc;
}

static json_object *get(json_object *o, const char *key) {
        json_object *v = NULL;
        ck_assert_msg(json_object_object_get_ex(o, key, &v), "no \"%s\" in %s", key, json_object_to_json_string(o));
        return v;
}

/* The memory record of the guest named `name` in a report. */
static json_object *guest_memory(json_object *rep, const char *name) {
        json_object *guests = get(get(rep, "memory"), "guests");
        for (size_t i = 0; i < json_object_array_length(guests); i++) {
                json_object *g = json_object_array_get_idx(guests, i);
                if (strcmp(ctl_json_str(g, "name"), name) == 0)
                        return g;
        }
        ck_abort_msg("%s is not in the memory report", name);
        return NULL;
}

/* A report taken between two `show`s of the guest at the same sample (its `updated` did not
 * move): then the report and the shows describe the same readings. Waits for one whose figures
 * are all known; NULL when none came within WAIT_SEC. *ret_show gets the show. */
static json_object *report_at_one_sample(unsigned index, json_object **ret_show) {
        char name[32];
        sim_name(index, name, sizeof(name));
        for (uint64_t deadline = monotonic_sec() + WAIT_SEC; monotonic_sec() < deadline; usleep(200 * 1000)) {
                json_object *before = ctl_show_sim(&d, index), *rep = report(), *after = ctl_show_sim(&d, index);
                json_object *m = guest_memory(rep, name);
                bool same = ctl_json_u64(before, "updated") == ctl_json_u64(after, "updated") &&
                            ctl_json_u64(before, "host-rss") == ctl_json_u64(after, "host-rss");
                bool known = ctl_json_u64(m, "used") != U && ctl_json_u64(m, "rss") != U &&
                             ctl_json_u64(before, "guest-total") != U;
                json_object_put(after);
                if (same && known) {
                        *ret_show = before;
                        return rep;
                }
                json_object_put(before);
                json_object_put(rep);
        }
        return NULL;
}

START_TEST(test_figures_add_up) {
        /* Held where they are (below max), so that the balloon holds something all along. */
        CtlRun paused = ctl_run(&d, "pause", "--all");
        ck_assert_int_eq(paused.code, 0);
        ctl_run_done(&paused);
        for (unsigned index = 0; index < 2; index++) {
                char name[32];
                json_object *show = NULL, *rep = report_at_one_sample(index, &show);
                sim_name(index, name, sizeof(name));
                ck_assert_msg(rep, "%s: no report with every figure known at one sample within %u s", name, WAIT_SEC);
                json_object *m = guest_memory(rep, name);

                /* The guest's view: the parts are its total, as it reported them. */
                uint64_t total = ctl_json_u64(m, "total"), used = ctl_json_u64(m, "used"),
                         cache = ctl_json_u64(m, "cache"), free_ = ctl_json_u64(m, "free");
                ck_assert_uint_eq(total, ctl_json_u64(show, "guest-total"));
                ck_assert_uint_eq(free_, ctl_json_u64(show, "guest-free"));
                ck_assert_uint_eq(cache, ctl_json_u64(show, "guest-cache"));
                ck_assert_uint_eq(used + cache + free_, total);
                ck_assert_uint_gt(used, 0);

                /* The balloon: what it holds is the guest's configured size less its size now. */
                uint64_t max = ctl_json_u64(m, "max"), actual = ctl_json_u64(m, "actual");
                ck_assert_uint_eq(actual, ctl_json_u64(show, "actual"));
                ck_assert_uint_ge(max, actual);
                ck_assert_uint_eq(ctl_json_u64(m, "balloon"), max - actual);
                ck_assert_uint_gt(max - actual, 0);
                ck_assert_uint_le(total, actual);

                /* The host's view: QEMU's (here fake-qemu's) RSS and swap, as GetGuest has them. */
                uint64_t rss = ctl_json_u64(m, "rss"), swap = ctl_json_u64(m, "swap");
                ck_assert_uint_eq(rss, ctl_json_u64(show, "host-rss"));
                ck_assert_uint_eq(swap, ctl_json_u64(show, "host-swap"));
                uint64_t held = ctl_json_u64(m, "held");
                ck_assert_uint_eq(held, rss + (swap == U ? 0 : swap));
                ck_assert_uint_eq(ctl_json_u64(m, "host-returned"), max - held);
                /* The guest's free memory: what came back and what is still held. fake-qemu holds
                 * far less than the guest uses, so all of it came back and no reason is named. */
                ck_assert_uint_eq(ctl_json_u64(m, "reported") + ctl_json_u64(m, "unreturned"), free_);
                ck_assert_uint_eq(ctl_json_u64(m, "unreturned"), 0);
                ck_assert_uint_eq(json_object_array_length(get(m, "why")), 0);
                /* No hugepage-repair= in the policy: nothing put back, and said so (0, not absent). */
                ck_assert_uint_eq(ctl_json_u64(m, "thp-collapsed"), 0);
                json_object_put(show);
                json_object_put(rep);
        }

        /* The host's record is the guests' sum, within one reply. */
        json_object *rep = report(), *memory = get(rep, "memory"), *host = get(memory, "host"),
                    *guests = get(memory, "guests");
        static const char *const keys[] = { "total", "used", "cache", "free", "balloon", "rss", "held" };
        ck_assert_uint_eq(ctl_json_u64(host, "guests"), 2);
        ck_assert_uint_eq(json_object_array_length(guests), 2);
        for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
                uint64_t sum = 0;
                for (size_t i = 0; i < json_object_array_length(guests); i++)
                        sum += ctl_json_u64(json_object_array_get_idx(guests, i), keys[k]);
                ck_assert_msg(sum == ctl_json_u64(host, keys[k]), "%s: host %" PRIu64 ", guests' sum %" PRIu64, keys[k],
                              ctl_json_u64(host, keys[k]), sum);
        }
        ck_assert_uint_ne(ctl_json_u64(host, "mem-total"), U); /* the host's own /proc/meminfo */
        json_object_put(rep);

        /* The table: a row a guest, the sum, the host's lines. */
        CtlRun run = ctl_run(&d, "--no-pager", "report");
        ck_assert_int_eq(run.code, 0);
        ck_assert_ptr_nonnull(strstr(run.out, "Where the host's memory is"));
        ck_assert_ptr_nonnull(strstr(run.out, "FREE HELD"));
        ck_assert_ptr_nonnull(strstr(run.out, "\nsim-0 "));
        ck_assert_ptr_nonnull(strstr(run.out, "\n(all) "));
        ck_assert_ptr_nonnull(strstr(run.out, "Never got back"));
        ctl_run_done(&run);

        /* The metrics file: the same ledger. */
        char path[512];
        snprintf(path, sizeof(path), "%s/rightsize.prom", d.dir);
        bool seen = false;
        for (uint64_t deadline = monotonic_sec() + WAIT_SEC; !seen && monotonic_sec() < deadline; usleep(200 * 1000)) {
                if (access(path, R_OK) != 0)
                        continue;
                _cleanup_free_ char *text = test_read_file(path);
                seen = strstr(text, "rightsize_guest_reported_used_bytes{guest=\"sim-0\"}") &&
                       strstr(text, "rightsize_guest_balloon_bytes{guest=\"sim-1\"}") &&
                       strstr(text, "rightsize_guest_unreturned_reason{guest=\"sim-0\",reason=\"host-swap\"} 0");
        }
        ck_assert_msg(seen, "the metrics file has no memory ledger of the guests");
}
END_TEST

START_TEST(test_hostile_guest) {
        char name[32];
        sim_name(1, name, sizeof(name));
        /* Once the lies have come (after 3 s) and been sampled a few times over. */
        uint64_t deadline = monotonic_sec() + WAIT_SEC;
        bool clean = false;
        while (!clean && monotonic_sec() < deadline) {
                usleep(500 * 1000);
                json_object *rep = report(), *m = guest_memory(rep, name), *show = ctl_show_sim(&d, 1);
                /* Nothing near 2^64: the sanitiser makes such sizes unknown, the ledger clamps. */
                uint64_t max = ctl_json_u64(m, "max");
                static const char *const sizes[] = { "total", "used", "cache", "free", "balloon", "reported",
                                                     "unreturned" };
                for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
                        uint64_t v = ctl_json_u64(m, sizes[k]);
                        ck_assert_msg(v == U || (max != U && v <= max), "%s: %s = %" PRIu64 " past max %" PRIu64,
                                      name, sizes[k], v, max);
                }
                ck_assert_msg(ctl_json_u64(show, "guest-free") == U || ctl_json_u64(show, "guest-free") <= 2 * max,
                              "GetGuest passes on a free size of %" PRIu64, ctl_json_u64(show, "guest-free"));
                /* The lies are in: the guest's figures are unknown, not 2^64. */
                clean = ctl_json_u64(show, "guest-free") == U && ctl_json_u64(m, "free") == U;
                json_object_put(show);
                json_object_put(rep);
        }
        ck_assert_msg(clean, "%s's lies were not seen within %u s", name, WAIT_SEC);
        /* The honest guest beside it is reckoned as ever, and the daemon runs. */
        json_object *show = NULL, *rep = report_at_one_sample(0, &show);
        ck_assert_msg(rep, "sim-0: no report with every figure known");
        json_object *m = guest_memory(rep, "sim-0");
        ck_assert_uint_eq(ctl_json_u64(m, "used") + ctl_json_u64(m, "cache") + ctl_json_u64(m, "free"),
                          ctl_json_u64(m, "total"));
        json_object_put(show);
        json_object_put(rep);
        ck_assert(daemon_fixture_alive(&d));
}
END_TEST

int main(void) {
        Suite *s = suite_create("daemon-memory-report");
        check_add_case(s, "honest", setup_honest, teardown, 180, CHECK_TESTS(test_figures_add_up));
        check_add_case(s, "hostile", setup_hostile, teardown, 180, CHECK_TESTS(test_hostile_guest));
        return check_run_suite(s);
}
