/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rs_observe's verdicts on hand-built intervals, and the baseline it judges them against:
 * in particular the host's disk reads catching pressure the guest's own stats do not show. */
#include <check.h>

#include "common/macro.h"
#include "policies/pressure.h"
#include "tests/lib/check-run.h"

#define SIZE (1 * GIB)

/* A 1 GiB guest, held where it was asked to be, with room to spare. */
static void guest_levels(RsSample *s) {
        rs_sample_init(s);
        s->level[RS_LEVEL_BALLOON_ACTUAL] = s->level[RS_LEVEL_BALLOON_TARGET] = SIZE;
        s->level[RS_LEVEL_TOTAL] = SIZE - 64 * MIB;
        s->level[RS_LEVEL_AVAILABLE] = 300 * MIB;
        s->level[RS_LEVEL_FREE] = 200 * MIB;
}

/* One interval: the given guest fault rate and host read rate (pages/s, <0: not reported). */
static void observe(const RsBaseline *b, double majflt, double host_reads, RsObservation *ret) {
        RsSample s;
        RsRates r = { .event = RS_RATE_NONE, .interval_sec = 10 };
        RsPolicy p;

        rs_policy_init(&p);
        guest_levels(&s);
        r.known[RS_COUNTER_MAJOR_FAULTS] = true;
        r.per_sec[RS_COUNTER_MAJOR_FAULTS] = majflt;
        if (host_reads >= 0) {
                r.known[RS_COUNTER_HOST_DISK_READ] = true;
                r.per_sec[RS_COUNTER_HOST_DISK_READ] = host_reads * RS_PAGE_SIZE;
        }
        rs_observe(&s, &r, NULL, b, &p, ret);
}

/* A baseline learned from a few quiet intervals: 2 faults/s, 10 pages/s read by the host. */
static void quiet_baseline(RsBaseline *b) {
        RsObservation o;
        rs_baseline_reset(b);
        for (int i = 0; i < 3; i++) {
                observe(b, 2, 10, &o);
                rs_baseline_learn(b, &o);
        }
        ck_assert(b->known && b->host_known);
        ck_assert_double_eq_tol(b->host_reads, 10, 1e-9);
}

/* An agent-tier interval's rates: file refaults and activations, pages/s. */
static void agent_rates(RsRates *r, double interval_sec, double refaults, double activations) {
        *r = (RsRates) { .event = RS_RATE_NONE, .interval_sec = interval_sec };
        r->known[RS_COUNTER_REFAULT_FILE] = r->known[RS_COUNTER_ACTIVATE_FILE] = true;
        r->per_sec[RS_COUNTER_REFAULT_FILE] = refaults;
        r->per_sec[RS_COUNTER_ACTIVATE_FILE] = activations;
}

/* Judges the rates of the 1 GiB guest of guest_levels() against baseline b. */
static void observe_rates(const RsRates *r, const RsBaseline *b, const RsObservation *prev, RsObservation *ret) {
        RsSample s;
        RsPolicy p;

        rs_policy_init(&p);
        guest_levels(&s);
        rs_observe(&s, r, prev, b, &p, ret);
}

/* One agent-tier interval: activations and PSI some (percent), against a baseline of
 * 5 activations/s at 1 % PSI. */
static void observe_agent_after(double activations, double psi, const RsObservation *prev, RsObservation *ret) {
        RsRates r;
        RsBaseline b = { .known = true, .useful = 5, .psi_some = 1, .n = 3 };

        agent_rates(&r, 10, 20000, activations); /* a stream: refaults galore */
        r.known[RS_COUNTER_PSI_SOME_TOTAL] = true;
        r.per_sec[RS_COUNTER_PSI_SOME_TOTAL] = psi * 1e4; /* us stalled per s */
        observe_rates(&r, &b, prev, ret);
}

static void observe_agent(double activations, double psi, RsObservation *ret) {
        observe_agent_after(activations, psi, NULL, ret);
}

/* PSI up while useful refaults stay at their usual level is a stream (or I/O), not the hot
 * set being reclaimed: no leading sign, or a streaming guest's probe crawls for good. */
START_TEST(test_psi_is_a_leading_sign_only_with_refaults) {
        RsObservation o;
        observe_agent(5, 12, &o);
        ck_assert(!o.leading);
        ck_assert_int_eq(o.verdict, RS_VERDICT_CLEAN);
        observe_agent(15, 12, &o);
        ck_assert(o.leading && o.rising);
        ck_assert_str_eq(o.leading_why, "memory PSI rising");
}
END_TEST

/* The balloon's inflation stalls in reclaim and PSI counts it: with the balloon moving down
 * this interval, PSI up beside a trickle of refaults (6/s against a threshold of 60) is not
 * the guest short; the same PSI with the balloon standing still is. */
START_TEST(test_psi_of_the_balloons_own_inflation) {
        RsObservation before, o;
        observe_agent(5, 1, &before);
        before.size += 64 * MIB; /* the last sample saw the balloon 64 MiB bigger */
        observe_agent_after(6, 12, &before, &o);
        ck_assert_int_ne(o.verdict, RS_VERDICT_REFAULT);
        observe_agent_after(6, 12, NULL, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        ck_assert_str_eq(o.why, "memory PSI above baseline");
        before.size = o.size;
        observe_agent_after(6, 12, &before, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        /* the sample after a step, the balloon at rest: kswapd and PSI's average still
         * carry the step's own reclaim */
        before.balloon_moved = true;
        observe_agent_after(6, 12, &before, &o);
        ck_assert_int_ne(o.verdict, RS_VERDICT_REFAULT);
        ck_assert(!o.balloon_moved);
}
END_TEST

/* One agent-tier interval of a guest reading back 600 pages/s (500 of them activated), with
 * `scan` pages/s scanned, `swapout` pushed to swap and `swapin` swapped in. */
static void observe_reading_back_after(double scan, double swapout, double swapin, const RsObservation *prev,
                                       RsObservation *ret) {
        RsRates r;
        RsBaseline b = { .known = true, .useful = 5, .scan = 20, .psi_some = 1, .n = 3 };

        agent_rates(&r, 1, 600, 500);
        r.known[RS_COUNTER_PGSCAN_KSWAPD] = r.known[RS_COUNTER_PGSCAN_DIRECT] = true;
        r.per_sec[RS_COUNTER_PGSCAN_KSWAPD] = scan;
        r.known[RS_COUNTER_PSWPIN] = r.known[RS_COUNTER_PSWPOUT] = true;
        r.per_sec[RS_COUNTER_PSWPOUT] = swapout;
        r.per_sec[RS_COUNTER_PSWPIN] = swapin;
        observe_rates(&r, &b, prev, ret);
}

static void observe_reading_back(double scan, double swapout, RsObservation *ret) {
        observe_reading_back_after(scan, swapout, 0, NULL, ret);
}

/* Refaults with next to nothing reclaimed for them come back into free memory: the guest is
 * reading back what a squeeze took (the estimator's settle window then waits), not short at
 * its size; a guest short of memory evicts about a page for each one it reads back. */
START_TEST(test_refaults_into_free_memory_are_refilling) {
        RsObservation o;
        observe_reading_back(40, 0, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        ck_assert(o.refilling);
        observe_reading_back(700, 0, &o); /* evicting as much as it reads */
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        ck_assert(!o.refilling);
        observe_reading_back(40, 400, &o); /* pushing anonymous pages out for them */
        ck_assert(!o.refilling);

        /* A balloon step's own burst of reclaim scans, and what it took early comes back in
         * the same interval: with free memory well above the watermarks after it (200 MiB of
         * 1 GiB), that is refilling; the same scanning with the balloon still is not. */
        RsObservation before;
        observe_reading_back(0, 0, &before);
        before.size += 2 * MIB;
        observe_reading_back_after(3500, 0, 0, &before, &o);
        ck_assert(o.refilling && o.refilling_proven);
        observe_reading_back_after(3500, 250, 0, &before, &o); /* the burst swapped some out */
        ck_assert(o.refilling && o.refilling_proven);
        observe_reading_back_after(3500, 250, 200, &before, &o); /* ... but some come back: short */
        ck_assert(!o.refilling);
        observe_reading_back(3500, 0, &o);
        ck_assert(!o.refilling);

        /* Balloon stats without scan counters: free memory tells. */
        RsBaseline b;
        quiet_baseline(&b);
        observe(&b, 500, -1, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        ck_assert(o.refilling); /* 200 MiB free of 1 GiB */
        RsSample s;
        RsRates r = { .event = RS_RATE_NONE, .interval_sec = 10 };
        RsPolicy p;
        rs_policy_init(&p);
        guest_levels(&s);
        s.level[RS_LEVEL_FREE] = 20 * MIB; /* at the watermarks */
        r.known[RS_COUNTER_MAJOR_FAULTS] = true;
        r.per_sec[RS_COUNTER_MAJOR_FAULTS] = 500;
        rs_observe(&s, &r, NULL, &b, &p, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        ck_assert(!o.refilling);
}
END_TEST

START_TEST(test_quiet_is_clean) {
        RsBaseline b;
        RsObservation o;
        quiet_baseline(&b);
        observe(&b, 2, 12, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_CLEAN);
        ck_assert(!o.hidden);
}
END_TEST

START_TEST(test_hidden_reads_are_refaults) {
        RsBaseline b;
        RsObservation o;
        quiet_baseline(&b);
        /* The guest reports nothing new; the host reads 4 MiB/s from its disks. */
        observe(&b, 2, 1024, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        ck_assert(o.hidden);
        ck_assert_double_eq_tol(o.useful, 1024, 1e-9);
        ck_assert_double_lt(o.threshold, 1024);
        /* Such an interval teaches the guest's own baseline nothing. */
        double before = b.useful;
        rs_baseline_track(&b, &o, NULL);
        ck_assert_double_eq_tol(b.useful, before, 1e-9);
        ck_assert_double_eq_tol(b.host_reads, 10, 1e-9);
}
END_TEST

START_TEST(test_reported_refaults_are_not_hidden) {
        RsBaseline b;
        RsObservation o;
        quiet_baseline(&b);
        /* The guest owns up to its faults: the ordinary verdict, from its own counters. */
        observe(&b, 400, 3200, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        ck_assert(!o.hidden);
        ck_assert_double_eq_tol(o.useful, 400, 1e-9);
}
END_TEST

START_TEST(test_readahead_noise_is_not_hidden) {
        RsBaseline b;
        RsObservation o;
        quiet_baseline(&b);
        /* A few faults below the refault threshold, each read with readahead: still clean. */
        observe(&b, 30, 30 * 8, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_CLEAN);
}
END_TEST

START_TEST(test_no_host_baseline_no_hidden_verdict) {
        RsBaseline b;
        RsObservation o;
        quiet_baseline(&b);
        b.host_known = false; /* as after a restore from a state file */
        observe(&b, 2, 5000, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_CLEAN);
        /* The first clean interval sets it again. */
        rs_baseline_track(&b, &o, NULL);
        ck_assert(b.host_known);
        observe(&b, 2, -1, &o);
        ck_assert_double_lt(o.host_reads, 0);
        ck_assert_int_eq(o.verdict, RS_VERDICT_CLEAN);
}
END_TEST

START_TEST(test_rebase_on_hidden_moves_host_baseline) {
        RsBaseline b;
        RsObservation o;
        quiet_baseline(&b);
        observe(&b, 2, 2048, &o);
        ck_assert(o.hidden);
        double useful = b.useful;
        rs_baseline_rebase(&b, &o);
        ck_assert_double_eq_tol(b.host_reads, 2048, 1e-9);
        ck_assert_double_eq_tol(b.useful, useful, 1e-9);
        observe(&b, 2, 2100, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_CLEAN);
}
END_TEST

/* Refaults that rise slowly, each sample under the threshold, are the squeeze's doing while
 * a probe takes memory away: followed upward, 2 x baseline + 50/s stays above any rate it
 * follows, and the probe never sees a knee (a database's set, revisited every few minutes).
 * Held, the guest's normal is followed both ways; probing, up to what the guest showed
 * where the descent began. */
START_TEST(test_baseline_rises_only_when_allowed) {
        RsBaseline probing, held;
        RsObservation o, top;
        quiet_baseline(&probing);
        held = probing;
        observe(&probing, 2, -1, &top); /* where the descent began */
        double start = probing.useful;
        for (int i = 0; i < 100; i++) {
                observe(&probing, 2 + i * 0.5, -1, &o);
                ck_assert_int_eq(o.verdict, RS_VERDICT_CLEAN);
                rs_baseline_track(&probing, &o, &top);
                observe(&held, 2 + i * 0.5, -1, &o);
                rs_baseline_track(&held, &o, NULL);
        }
        ck_assert_double_eq_tol(probing.useful, start, 1e-9);
        /* 102 refaults/s: over the threshold of the baseline it kept, under that of one that rose. */
        observe(&probing, 102, -1, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_REFAULT);
        ck_assert_double_gt(held.useful, start + 10);
        observe(&held, 102, -1, &o);
        ck_assert_int_eq(o.verdict, RS_VERDICT_CLEAN);
        /* Falling is followed either way. */
        observe(&probing, 0, -1, &o);
        rs_baseline_track(&probing, &o, &top);
        ck_assert_double_lt(probing.useful, start);
}
END_TEST

int main(void) {
        return check_run_case("pressure", "host-reads", NULL, NULL, 0,
                              CHECK_TESTS(test_quiet_is_clean, test_psi_is_a_leading_sign_only_with_refaults,
                                          test_psi_of_the_balloons_own_inflation,
                                          test_refaults_into_free_memory_are_refilling, test_hidden_reads_are_refaults,
                                          test_reported_refaults_are_not_hidden, test_readahead_noise_is_not_hidden,
                                          test_no_host_baseline_no_hidden_verdict,
                                          test_rebase_on_hidden_moves_host_baseline, test_baseline_rises_only_when_allowed));
}
