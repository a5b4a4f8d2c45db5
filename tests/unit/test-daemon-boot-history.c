/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The next-boot history (daemon/boot-history.c): its ring's bounds, its file's round trip, a
 * corrupt, truncated, foreign or hostile file discarded with one clear line, and the
 * recommendation's rules (percentiles, margin, the cap, too little history). */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/boot-history.h"
#include "daemon/log.h"
#include "daemon/log-ratelimit.h"
#include "daemon/state-file.h"
#include "tests/lib/check-run.h"
#include "tests/lib/test-util.h"

#define STEP BOOT_HISTORY_INTERVAL_USEC
#define DAY (24ULL * 3600 * 1000000)
/* 2026-11-20 00:00 UTC */
#define T0 (UINT64_C(1795132800) * 1000000)

static char *dir;
static BootHistory *h, *back;

static void setup(void) {
        dir = test_mkdtemp();
        log_set_target(LOG_TARGET_STDERR);
        log_set_max_level(LOG_INFO);
        h = malloc(sizeof(*h));
        back = malloc(sizeof(*back));
        ck_assert(h && back);
        boot_history_init(h);
        boot_history_init(back);
}

static void teardown(void) {
        test_rm_rf(dir);
        free(dir);
        free(h);
        free(back);
}

static void push(BootHistory *r, uint64_t t, uint64_t estimate) {
        boot_history_push(r, &(BootHistoryPoint) { t, estimate, estimate + 100 * MIB, estimate + 200 * MIB, 0.01 });
}

START_TEST(test_ring_bounded_oldest_dropped) {
        /* 15 days of points: only the last 14 days' worth stay, oldest first. */
        size_t total = BOOT_HISTORY_MAX + 6 * 24;
        for (size_t i = 0; i < total; i++)
                push(h, T0 + i * STEP, i * MIB);
        ck_assert_uint_eq(h->n, BOOT_HISTORY_MAX);
        ck_assert_uint_eq(boot_history_at(h, 0)->realtime_usec, T0 + (total - BOOT_HISTORY_MAX) * STEP);
        ck_assert_uint_eq(boot_history_at(h, h->n - 1)->estimate, (total - 1) * MIB);
        for (size_t i = 1; i < h->n; i++)
                ck_assert_uint_gt(boot_history_at(h, i)->realtime_usec, boot_history_at(h, i - 1)->realtime_usec);

        /* And by age: a day later with no points, the points older than 14 days go. */
        uint64_t last = T0 + (total - 1) * STEP;
        boot_history_expire(h, last + DAY);
        ck_assert_uint_eq(h->n, BOOT_HISTORY_MAX - 6 * 24 + 1);
        ck_assert_uint_ge(boot_history_at(h, 0)->realtime_usec + BOOT_HISTORY_SPAN_USEC, last + DAY);

        /* The clock set back: the points after the new one are dropped, the ring stays ordered. */
        push(h, last - 10 * STEP, 1);
        ck_assert_uint_eq(boot_history_at(h, h->n - 1)->estimate, 1);
        ck_assert_uint_eq(boot_history_at(h, h->n - 2)->realtime_usec, last - 11 * STEP);
}
END_TEST

START_TEST(test_file_round_trip) {
        for (size_t i = 0; i < 300; i++)
                push(h, T0 + i * STEP, (i % 7 == 0) ? BOOT_HISTORY_UNKNOWN : 500 * MIB + i * MIB);
        boot_history_push(h, &(BootHistoryPoint) { T0 + 300 * STEP, GIB, GIB, GIB, NAN });
        ck_assert_int_eq(boot_history_save(dir, "web/1", h), 0);
        _cleanup_(freep) char *path = NULL;
        ck_assert_int_eq(boot_history_path(dir, "web/1", &path), 0);
        ck_assert_ptr_nonnull(strstr(path, "/web%2F1.history"));
        ck_assert_int_eq(access(path, R_OK), 0);

        ck_assert_int_eq(boot_history_load(dir, "web/1", T0 + 301 * STEP, back), 0);
        ck_assert_uint_eq(back->n, h->n);
        for (size_t i = 0; i < h->n; i++) {
                const BootHistoryPoint *a = boot_history_at(h, i), *b = boot_history_at(back, i);
                ck_assert_uint_eq(a->realtime_usec, b->realtime_usec);
                ck_assert_uint_eq(a->estimate, b->estimate);
                ck_assert_uint_eq(a->target, b->target);
                ck_assert_uint_eq(a->actual, b->actual);
                ck_assert(isnan(a->stall) ? isnan(b->stall) : a->stall == b->stall);
        }
        /* Loaded 20 days later: every point older than 14 days is gone. */
        ck_assert_int_eq(boot_history_load(dir, "web/1", T0 + 300 * STEP + 20 * DAY, back), 0);
        ck_assert_uint_eq(back->n, 0);
        /* No file: -ENOENT, quietly. */
        ck_assert_int_eq(boot_history_load(dir, "nobody", T0, back), -ENOENT);
}
END_TEST

/* Writes the bytes as g's history file and loads it: discarded with code, one line with reason. */
static void expect_discarded(const void *data, size_t size, int code, const char *reason) {
        _cleanup_(freep) char *path = NULL, *log = NULL;
        ck_assert_int_eq(boot_history_path(dir, "g", &path), 0);
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        ck_assert_uint_eq(fwrite(data, 1, size, f), size);
        ck_assert_int_eq(fclose(f), 0);

        push(back, T0, GIB); /* must be emptied */
        log_ratelimit_reset();
        test_stderr_begin();
        int k = boot_history_load(dir, "g", T0 + DAY, back);
        log = test_stderr_end();
        ck_assert_msg(k == code, "got %d, want %d (%s)", k, code, reason);
        ck_assert_uint_eq(back->n, 0);
        ck_assert_msg(strstr(log, "Discarding history file") && strstr(log, reason), "log: %s (want '%s')", log, reason);
        ck_assert_msg(strchr(log, '\n') == log + strlen(log) - 1, "one line: %s", log);
}

START_TEST(test_corrupt_files_discarded) {
        _cleanup_(freep) void *good = NULL;
        size_t size;
        for (size_t i = 0; i < 10; i++)
                push(h, T0 + i * STEP, GIB);
        ck_assert_int_eq(boot_history_serialize(h, "g", &good, &size), 0);
        char *bytes = good;

        /* Every truncation: never a crash, always discarded. */
        for (size_t cut = 0; cut < size; cut += (cut < 300 ? 1 : 7))
                expect_discarded(bytes, cut, -EBADMSG, cut < 288 ? "shorter than its header" : "does not match its count");
        expect_discarded("hello, world\n", 13, -EBADMSG, "shorter than its header");

        _cleanup_(freep) char *copy = malloc(size + 64);
        ck_assert_ptr_nonnull(copy);
        /* Foreign: another magic. */
        memcpy(copy, bytes, size);
        copy[0] ^= 0x55;
        expect_discarded(copy, size, -EBADMSG, "wrong magic");
        /* Another version. */
        memcpy(copy, bytes, size);
        copy[8] = 9;
        expect_discarded(copy, size, -EPROTONOSUPPORT, "this daemon does not write");
        /* Padded. */
        memcpy(copy, bytes, size);
        memset(copy + size, 0, 40);
        expect_discarded(copy, size + 40, -EBADMSG, "does not match its count");
        /* Hostile count: 4 billion points promised. */
        memcpy(copy, bytes, size);
        memset(copy + 24, 0xff, 4); /* the header: magic 8, version 4, record size 4, interval 8, count 4 */
        expect_discarded(copy, size, -EBADMSG, "does not match its count");
        /* Another guest's file under g's name. */
        _cleanup_(freep) void *other = NULL;
        size_t other_size;
        ck_assert_int_eq(boot_history_serialize(h, "h", &other, &other_size), 0);
        expect_discarded(other, other_size, -EBADMSG, "another guest");
        /* A size past any guest's, a stall of 300 %, time going backwards. */
        size_t first = size - 10 * 40;
        memcpy(copy, bytes, size);
        memset(copy + first + 8, 0x7f, 8);
        expect_discarded(copy, size, -EBADMSG, "out of range");
        memcpy(copy, bytes, size);
        double bad = 3.0;
        memcpy(copy + first + 32, &bad, sizeof(bad));
        expect_discarded(copy, size, -EBADMSG, "out of range");
        memcpy(copy, bytes, size);
        memcpy(copy + first + 40, copy + first, 8); /* the second point at the first's time */
        expect_discarded(copy, size, -EBADMSG, "time order");
        /* Larger than any history can be. */
        size_t huge_size = 288 + (BOOT_HISTORY_MAX + 1) * 40;
        _cleanup_(freep) char *huge = calloc(1, huge_size);
        ck_assert_ptr_nonnull(huge);
        expect_discarded(huge, huge_size, -EFBIG, "larger than");
}
END_TEST

START_TEST(test_percentiles_and_margin) {
        uint64_t v[20];
        for (size_t i = 0; i < 20; i++)
                v[i] = (i + 1) * 100;
        ck_assert_uint_eq(boot_percentile(v, 20, 50), 1000); /* the 10th of 20 */
        ck_assert_uint_eq(boot_percentile(v, 20, 95), 1900); /* the 19th */
        ck_assert_uint_eq(boot_percentile(v, 20, 100), 2000);
        ck_assert_uint_eq(boot_percentile(v, 1, 95), 100);
        ck_assert_uint_eq(boot_percentile(v, 0, 95), BOOT_HISTORY_UNKNOWN);
        /* + 10 %, up to a whole MiB. */
        ck_assert_uint_eq(boot_with_margin(1000 * MIB), 1100 * MIB);
        ck_assert_uint_eq(boot_with_margin(1000 * MIB + 1), 1101 * MIB);
        ck_assert_uint_eq(boot_with_margin(BOOT_HISTORY_UNKNOWN), BOOT_HISTORY_UNKNOWN);
}
END_TEST

START_TEST(test_recommendation) {
        BootRecommendation r;
        char rule[256];

        /* No history: every figure unknown, said plainly. */
        ck_assert_int_eq(boot_recommend(h, 4 * GIB, &r), 0);
        ck_assert_uint_eq(r.points, 0);
        ck_assert(!r.enough);
        ck_assert_uint_eq(r.boot, BOOT_HISTORY_UNKNOWN);
        boot_rule_text(&r, "boot", rule, sizeof(rule));
        ck_assert_str_eq(rule, "no history yet");

        /* Two days: 95 % of the points at 1000 MiB, 5 % at 2000 MiB, unknown ones not counted. */
        for (size_t i = 0; i < 2 * 144; i++)
                push(h, T0 + i * STEP, i % 20 == 19 ? 2000 * MIB : 1000 * MIB);
        push(h, T0 + 288 * STEP, BOOT_HISTORY_UNKNOWN);
        ck_assert_int_eq(boot_recommend(h, 4 * GIB, &r), 0);
        ck_assert_uint_eq(r.points, 288);
        ck_assert(r.enough);
        ck_assert_uint_eq(r.since_usec, T0);
        ck_assert_uint_eq(r.p50, 1000 * MIB);
        ck_assert_uint_eq(r.p95, 1000 * MIB);
        ck_assert_uint_eq(r.peak, 2000 * MIB);
        ck_assert_uint_eq(r.boot, 1100 * MIB);
        ck_assert_uint_eq(r.floor, 1100 * MIB);
        ck_assert_uint_eq(r.max, 2200 * MIB);
        ck_assert_double_eq_tol(r.stall_mean, 0.01, 1e-9);
        boot_rule_text(&r, "boot", rule, sizeof(rule));
        ck_assert_msg(strstr(rule, "p95 of the estimate over 2.0 days (288 points, since 2026-11-20 00:00 UTC) + margin 10 %"),
                      "%s", rule);
        ck_assert_ptr_null(strstr(rule, "provisional"));

        /* Capped at the guest's memory: it cannot boot above it. */
        ck_assert_int_eq(boot_recommend(h, 1024 * MIB, &r), 0);
        ck_assert_uint_eq(r.boot, 1024 * MIB);
        ck_assert_uint_le(r.floor, r.boot);
        boot_rule_text(&r, "boot", rule, sizeof(rule));
        ck_assert_ptr_nonnull(strstr(rule, "capped at the guest's memory"));

        /* Three hours: figures all the same, labelled provisional. */
        boot_history_init(h);
        for (size_t i = 0; i < 18; i++)
                push(h, T0 + i * STEP, 700 * MIB);
        ck_assert_int_eq(boot_recommend(h, 4 * GIB, &r), 0);
        ck_assert(!r.enough);
        ck_assert_uint_eq(r.boot, 770 * MIB);
        boot_rule_text(&r, "floor", rule, sizeof(rule));
        ck_assert_msg(strstr(rule, "p50 of the estimate over 2.8 hours (18 points") && strstr(rule, "provisional"), "%s",
                      rule);
}
END_TEST

/* A guest long gone: its history goes with its state file (state-remove-after), and a save's
 * temporary file a crash left is removed at start like a state file's. */
START_TEST(test_aged_out_with_state_file) {
        GuestStateRecord rec;
        _cleanup_(freep) char *state = NULL, *history = NULL, *leftover = NULL;
        push(h, T0, GIB);
        ck_assert_int_eq(guest_state_init(&rec, "gone", NULL), 0);
        ck_assert_int_eq(state_file_save(dir, &rec), 0);
        ck_assert_int_eq(boot_history_save(dir, "gone", h), 0);
        ck_assert_int_eq(state_file_path(dir, "gone", &state), 0);
        ck_assert_int_eq(boot_history_path(dir, "gone", &history), 0);
        ck_assert_int_ge(asprintf(&leftover, "%s/.gone.history.AbC123", dir), 0);
        test_write_file(leftover, "half");
        ck_assert_int_eq(state_dir_remove_leftovers(dir), 1);
        ck_assert_int_ne(access(leftover, F_OK), 0);

        struct timespec old[2] = { { .tv_sec = 1000 }, { .tv_sec = 1000 } };
        ck_assert_int_eq(utimensat(AT_FDCWD, state, old, 0), 0);
        ck_assert_int_eq(state_dir_age_out(dir, T0, DAY, NULL, NULL), 1);
        ck_assert_int_ne(access(state, F_OK), 0);
        ck_assert_int_ne(access(history, F_OK), 0);
}
END_TEST

int main(void) {
        return check_run_case("daemon-boot-history", "boot-history", setup, teardown, 120,
                              CHECK_TESTS(test_ring_bounded_oldest_dropped, test_file_round_trip,
                                          test_corrupt_files_discarded, test_percentiles_and_margin,
                                          test_recommendation, test_aged_out_with_state_file));
}
