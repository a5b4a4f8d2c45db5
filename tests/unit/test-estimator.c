/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Each state transition of the estimator, driven by hand-made samples. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "policies/estimator.h"
#include "tests/unit/check-run.h"

#define MAXMEM (2 * GIB)
#define STEP (10 * USEC_PER_SEC)

typedef struct Fake {
        uint64_t now;
        uint64_t majflt;
        uint64_t oom;
        uint64_t actual;
        uint64_t target;
        uint64_t settle_above; /* the balloon stops this far above the target (page rounding) */
        bool stats;
} Fake;

/* One interval: the guest got the target, faults grew by rate/s. */
static void step(RsGuest *g, Fake *f, double majflt_rate, uint64_t available) {
        RsSample s;
        rs_sample_init(&s);
        f->now += STEP;
        f->majflt += (uint64_t) (majflt_rate * 10);
        s.level[RS_LEVEL_BALLOON_ACTUAL] = f->actual;
        s.level[RS_LEVEL_BALLOON_TARGET] = f->target;
        if (f->stats) {
                s.level[RS_LEVEL_TOTAL] = MAXMEM;
                s.level[RS_LEVEL_AVAILABLE] = available;
                s.level[RS_LEVEL_FREE] = available / 2;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = f->majflt;
                s.counter[RS_COUNTER_SWAP_IN] = f->majflt * 4096;
                s.counter[RS_COUNTER_OOM_KILLS] = f->oom;
        }
        rs_guest_feed(g, &s, f->now);
        RsDecision d;
        rs_guest_decide(g, f->now, &d);
        f->target = d.target;
        f->actual = MIN(d.target + f->settle_above, MAXMEM); /* the balloon reaches it */
}

static RsGuest *new_guest(const RsPolicy *p, Fake *f) {
        RsGuest *g = NULL;
        ck_assert_int_eq(rs_guest_new(&g, p, MAXMEM), 0);
        *f = (Fake) { .actual = MAXMEM, .target = MAXMEM, .stats = true };
        return g;
}

static RsGuest *learned_guest(Fake *f) {
        RsPolicy p;
        rs_policy_init(&p);
        RsGuest *g = new_guest(&p, f);
        for (int i = 0; i < 3; i++) {
                step(g, f, 1, GIB);
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_LEARN);
                ck_assert_uint_eq(f->target, MAXMEM); /* learning does not move */
        }
        step(g, f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        return g;
}

START_TEST(test_learn_then_probe_shrinks) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        ck_assert_uint_lt(f.target, MAXMEM);
        /* far from pressure (1 GiB available of 2): the large step, 10 % */
        ck_assert_uint_ge(f.target, MAXMEM - MAXMEM / 10 - MIB);
        uint64_t prev = f.target;
        step(g, &f, 1, 40 * MIB); /* close to pressure: a smaller step */
        ck_assert_uint_lt(f.target, prev);
        ck_assert_uint_gt(f.target, prev - prev / 20);
        ck_assert_uint_eq(rs_guest_estimate(g)->upper, prev);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_refault_onset_needs_confirmation_then_backoff) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        step(g, &f, 1, GIB);
        uint64_t clean = f.actual; /* the size now being probed ran clean last interval */
        uint64_t refaulting = f.target;
        step(g, &f, 500, GIB); /* refaults at `refaulting`: hold, confirm */
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        ck_assert_uint_eq(f.target, refaulting);
        RsDecision d;
        rs_guest_decide(g, f.now, &d);
        ck_assert_ptr_nonnull(strstr(d.reason, "1/2"));
        step(g, &f, 500, GIB); /* second sample: onset */
        rs_guest_decide(g, f.now, &d);
        ck_assert_uint_eq(rs_guest_estimate(g)->lower, refaulting);
        ck_assert_int_eq(d.state, RS_STATE_BACKOFF);
        ck_assert_uint_gt(d.target, refaulting);
        ck_assert(d.urgent);
        (void) clean;
        rs_guest_free(g);
}
END_TEST

START_TEST(test_single_refault_blip_is_ignored) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        uint64_t t = f.target;
        step(g, &f, 500, GIB);
        ck_assert_uint_eq(f.target, t);
        step(g, &f, 1, GIB); /* clean again: keep probing */
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        ck_assert_uint_lt(f.target, t);
        ck_assert(!rs_known(rs_guest_estimate(g)->lower));
        rs_guest_free(g);
}
END_TEST

START_TEST(test_oom_kill_is_emergency) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        f.oom++;
        step(g, &f, 1, GIB);
        RsDecision d;
        rs_guest_decide(g, f.now, &d);
        ck_assert_int_eq(d.state, RS_STATE_EMERGENCY);
        ck_assert_uint_eq(d.target, MAXMEM);
        ck_assert_ptr_nonnull(strstr(d.reason, "OOM"));
        rs_guest_free(g);
}
END_TEST

START_TEST(test_storm_is_emergency) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        /* Probing, one step below a clean size: a storm sends it back to that size at once. */
        step(g, &f, 1, GIB);
        uint64_t clean = f.actual;
        step(g, &f, 1, GIB);
        uint64_t stormy = f.actual;
        ck_assert_uint_lt(stormy, clean);
        step(g, &f, 50000, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
        ck_assert_uint_ge(f.target, clean);
        ck_assert_uint_lt(f.target, MAXMEM);
        ck_assert_uint_eq(rs_guest_estimate(g)->lower, stormy);
        /* Still storming there: now it is an emergency, all the way to max. */
        step(g, &f, 50000, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
        ck_assert_uint_eq(f.target, MAXMEM);
        /* calm at max: probing resumes, not stuck at max, and never at the stormy size */
        step(g, &f, 1, GIB);
        step(g, &f, 1, GIB);
        ck_assert_uint_lt(f.target, MAXMEM);
        ck_assert_uint_gt(f.target, stormy);
        rs_guest_free(g);
}
END_TEST

/* A storm outside a probe (holding at the estimate) is an emergency at once. */
START_TEST(test_storm_without_clean_size_is_emergency) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        for (int i = 0; i < 100 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        uint64_t stormy = f.actual;
        step(g, &f, 50000, GIB);
        ck_assert_uint_lt(stormy, MAXMEM);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
        ck_assert_uint_eq(f.target, MAXMEM);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_pushback_is_refault) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        RsSample s;
        for (int i = 0; i < 2; i++) {
                rs_sample_init(&s);
                f.now += STEP;
                f.majflt += 10;
                s.level[RS_LEVEL_BALLOON_TARGET] = f.target;
                s.level[RS_LEVEL_BALLOON_ACTUAL] = f.target + 100 * MIB; /* stops short */
                s.level[RS_LEVEL_AVAILABLE] = 500 * MIB;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = f.majflt;
                rs_guest_feed(g, &s, f.now);
                ck_assert(rs_guest_observation(g)->pushback);
                ck_assert_int_eq(rs_guest_observation(g)->verdict, RS_VERDICT_REFAULT);
        }
        ck_assert_int_ne(rs_guest_state(g), RS_STATE_PROBE);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_reboot_relearns_without_emergency) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        f.majflt = 0; /* counters restart */
        RsSample s;
        rs_sample_init(&s);
        f.now += STEP;
        s.level[RS_LEVEL_BALLOON_ACTUAL] = f.actual;
        s.level[RS_LEVEL_AVAILABLE] = GIB;
        s.counter[RS_COUNTER_MAJOR_FAULTS] = 3;
        s.counter[RS_COUNTER_SWAP_IN] = 0;
        s.counter[RS_COUNTER_OOM_KILLS] = 0;
        rs_guest_feed(g, &s, f.now);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_LEARN);
        RsDecision d;
        rs_guest_decide(g, f.now, &d);
        ck_assert_ptr_nonnull(strstr(d.reason, "reboot"));
        rs_guest_free(g);
}
END_TEST

START_TEST(test_floor_never_crossed) {
        RsPolicy p;
        Fake f;
        rs_policy_init(&p);
        p.floor_bytes = 700 * MIB;
        RsGuest *g = new_guest(&p, &f);
        for (int i = 0; i < 200; i++) {
                step(g, &f, 1, GIB);
                ck_assert_uint_ge(f.target, 700 * MIB);
        }
        ck_assert_uint_eq(f.target, 700 * MIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_hold_then_probe_again) {
        RsPolicy p;
        Fake f;
        rs_policy_init(&p);
        p.hold_usec = 100 * USEC_PER_SEC; /* 10 intervals */
        p.floor_bytes = 1 * GIB;
        RsGuest *g = new_guest(&p, &f);
        int i;
        for (i = 0; i < 100 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        int held = 0;
        while (rs_guest_state(g) == RS_STATE_HOLD && held < 50) {
                step(g, &f, 1, GIB);
                held++;
        }
        ck_assert_int_ge(held, 9);
        ck_assert_int_le(held, 12);
        rs_guest_free(g);
}
END_TEST

/* QEMU balloons whole pages and the guest may stop a few KiB above an unaligned target:
 * the hold must still end in a probe. */
START_TEST(test_hold_ends_when_settled_just_above_target) {
        RsPolicy p;
        Fake f;
        rs_policy_init(&p);
        p.hold_usec = 100 * USEC_PER_SEC; /* 10 intervals */
        p.floor_bytes = 1 * GIB + 4097;   /* an unaligned hold target */
        RsGuest *g = new_guest(&p, &f);
        int i;
        for (i = 0; i < 100 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        f.settle_above = 12 * KIB;
        f.actual += f.settle_above;
        int held = 0;
        while (rs_guest_state(g) == RS_STATE_HOLD && held < 50) {
                step(g, &f, 1, GIB);
                held++;
        }
        ck_assert_int_ge(held, 9);
        ck_assert_int_le(held, 12);
        rs_guest_free(g);
}
END_TEST

static RsGuest *held_guest(Fake *f) {
        RsPolicy p;
        rs_policy_init(&p);
        p.floor_bytes = 512 * MIB;
        RsGuest *g = new_guest(&p, f);
        /* clean down to 1 GiB, refaulting below: a working set of about 1 GiB */
        for (int i = 0; i < 200 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, f, f->actual < GIB ? 400 : 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        return g;
}

START_TEST(test_probe_now) {
        Fake f;
        RsGuest *g = held_guest(&f);
        uint64_t held = f.target;

        /* not asked: it holds */
        step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        ck_assert_uint_eq(f.target, held);

        ck_assert_int_eq(rs_guest_probe_now(g, f.now), 0);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD); /* at the next decision, not before */
        step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        ck_assert_uint_lt(f.target, held);
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), 0); /* already probing */

        /* a probe that finds refaults backs off: no forced probe while memory is given back */
        for (int i = 0; i < 50 && rs_guest_state(g) == RS_STATE_PROBE; i++)
                step(g, &f, f.actual < GIB ? 400 : 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), -EBUSY);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_probe_now_refused) {
        RsPolicy p;
        Fake f;
        RsGuest *g;

        /* emergency */
        g = held_guest(&f);
        f.oom++;
        step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), -EBUSY);
        rs_guest_free(g);

        /* grow */
        g = held_guest(&f);
        step(g, &f, 400, GIB);
        step(g, &f, 400, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_GROW);
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), -EBUSY);
        rs_guest_free(g);

        /* observe mode */
        rs_policy_preset("observe-only", &p);
        g = new_guest(&p, &f);
        step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), -EOPNOTSUPP);
        rs_guest_free(g);

        /* learning, nothing learned yet */
        rs_policy_init(&p);
        g = new_guest(&p, &f);
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), -EBUSY);
        step(g, &f, 1, GIB); /* first sample: no rates yet */
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), -EBUSY);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_probe_now_from_learn) {
        RsPolicy p;
        Fake f;
        rs_policy_init(&p);
        RsGuest *g = new_guest(&p, &f);
        step(g, &f, 1, GIB);
        step(g, &f, 1, GIB); /* one baseline sample in */
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_LEARN);
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), 0);
        step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        ck_assert_uint_lt(f.target, MAXMEM);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_growth_in_hold) {
        RsPolicy p;
        Fake f;
        rs_policy_init(&p);
        p.floor_bytes = 1 * GIB;
        RsGuest *g = new_guest(&p, &f);
        for (int i = 0; i < 100 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, &f, 1, GIB);
        uint64_t held = f.target;
        step(g, &f, 400, GIB);
        step(g, &f, 400, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_GROW);
        ck_assert_uint_ge(f.target, held + held / 10);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_observe_mode_never_moves) {
        RsPolicy p;
        Fake f;
        rs_policy_preset("observe-only", &p);
        RsGuest *g = new_guest(&p, &f);
        for (int i = 0; i < 50; i++) {
                step(g, &f, i % 7 == 0 ? 5000 : 1, 600 * MIB);
                ck_assert_uint_eq(f.target, MAXMEM);
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_OBSERVE);
        }
        ck_assert_uint_eq(rs_guest_estimate(g)->estimate, MAXMEM - 600 * MIB);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_no_stats_holds) {
        RsPolicy p;
        Fake f;
        rs_policy_init(&p);
        RsGuest *g = new_guest(&p, &f);
        f.stats = false;
        for (int i = 0; i < 30; i++)
                step(g, &f, 0, 0);
        ck_assert_uint_eq(f.target, MAXMEM);
        ck_assert_int_eq(rs_guest_estimate(g)->tier, RS_TIER_HOST);
        ck_assert_double_lt(rs_guest_estimate(g)->confidence, 0.3);
        rs_guest_free(g);
}
END_TEST

/* A guest with a 900 MiB floor, stepped clean until it holds, and its snapshot. */
static RsGuest *held_guest_snapshot(RsPolicy *p, Fake *f, RsGuestSnapshot *snap) {
        rs_policy_init(p);
        p->floor_bytes = 900 * MIB;
        RsGuest *g = new_guest(p, f);
        for (int i = 0; i < 100 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        rs_guest_snapshot(g, snap);
        return g;
}

START_TEST(test_snapshot_restore) {
        RsPolicy p;
        Fake f;
        RsGuestSnapshot snap;
        RsGuest *g = held_guest_snapshot(&p, &f, &snap);
        ck_assert_uint_eq(snap.magic, RS_SNAPSHOT_MAGIC);

        RsGuest *h = NULL;
        ck_assert_int_eq(rs_guest_new(&h, &p, MAXMEM), 0);
        ck_assert_int_eq(rs_guest_restore(h, &snap, 5), 0);
        ck_assert_int_eq(rs_guest_state(h), RS_STATE_HOLD);
        ck_assert_uint_eq(rs_guest_estimate(h)->estimate, rs_guest_estimate(g)->estimate);
        RsDecision a, b;
        rs_guest_decide(g, f.now, &a);
        rs_guest_decide(h, 5, &b);
        ck_assert_uint_eq(a.target, b.target);

        RsGuestSnapshot bad = snap;
        bad.magic = 0;
        ck_assert_int_eq(rs_guest_restore(h, &bad, 5), -EINVAL);
        bad = snap;
        bad.guest_max = 3 * GIB;
        ck_assert_int_eq(rs_guest_restore(h, &bad, 5), -EINVAL);
        bad = snap;
        bad.baseline_useful = -1;
        ck_assert_int_eq(rs_guest_restore(h, &bad, 5), -EINVAL);
        ck_assert_int_eq(rs_guest_state(h), RS_STATE_HOLD);
        rs_guest_free(g);
        rs_guest_free(h);
}
END_TEST

/* Killed mid-cycle after an emergency proved the estimate too small: the baseline is
 * still good, so the resumed guest backs off to its last clean size and probes again
 * instead of learning from scratch. */
START_TEST(test_restore_mid_cycle_backs_off) {
        RsPolicy p;
        Fake f;
        RsGuestSnapshot snap;
        RsGuest *g = held_guest_snapshot(&p, &f, &snap);
        ck_assert(snap.baseline_known);
        snap.estimate = RS_UNKNOWN;

        for (int with_upper = 0; with_upper < 2; with_upper++) {
                uint64_t clean = 1536 * MIB;
                snap.upper = with_upper ? clean : RS_UNKNOWN;
                snap.lower = with_upper ? 1400 * MIB : RS_UNKNOWN;
                RsGuest *h = NULL;
                Fake fh = { .actual = 1200 * MIB, .target = 1200 * MIB, .stats = true };
                ck_assert_int_eq(rs_guest_new(&h, &p, MAXMEM), 0);
                ck_assert_int_eq(rs_guest_restore(h, &snap, 5), 0);
                ck_assert_int_eq(rs_guest_state(h), RS_STATE_BACKOFF);
                RsDecision d;
                rs_guest_decide(h, 5, &d);
                ck_assert_uint_eq(d.target, with_upper ? clean : MAXMEM);

                /* Clean once there: it probes below the size it backed off to. */
                fh.now = 5;
                fh.target = fh.actual = d.target;
                bool probed = false;
                for (int i = 0; i < 10 && !probed; i++) {
                        step(h, &fh, 1, GIB);
                        probed = rs_guest_state(h) == RS_STATE_PROBE;
                }
                ck_assert(probed);
                ck_assert_uint_lt(fh.target, d.target);
                ck_assert_uint_ge(fh.target, p.floor_bytes);
                rs_guest_free(h);
        }
        rs_guest_free(g);
}
END_TEST

START_TEST(test_bad_policy_rejected) {
        RsPolicy p;
        RsGuest *g = NULL;
        rs_policy_init(&p);
        p.shares = 0;
        ck_assert_int_eq(rs_guest_new(&g, &p, MAXMEM), -EINVAL);
        rs_policy_init(&p);
        ck_assert_int_eq(rs_guest_new(&g, &p, 0), -EINVAL);
        ck_assert_int_eq(rs_guest_new(&g, &p, MAXMEM), 0);
        RsPolicy bad = p;
        bad.probe_step_min_percent = 90;
        ck_assert_int_eq(rs_guest_set_policy(g, &bad), -EINVAL);
        ck_assert_double_eq(rs_guest_policy(g)->probe_step_min_percent, p.probe_step_min_percent);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_state_names) {
        for (int i = 0; i < _RS_STATE_MAX; i++)
                ck_assert_ptr_nonnull(rs_state_to_string(i));
        ck_assert_ptr_null(rs_state_to_string(_RS_STATE_MAX));
}
END_TEST

int main(void) {
        Suite *s = suite_create("estimator");
        TCase *tc = tcase_create("states");
        tcase_add_test(tc, test_learn_then_probe_shrinks);
        tcase_add_test(tc, test_refault_onset_needs_confirmation_then_backoff);
        tcase_add_test(tc, test_single_refault_blip_is_ignored);
        tcase_add_test(tc, test_oom_kill_is_emergency);
        tcase_add_test(tc, test_storm_is_emergency);
        tcase_add_test(tc, test_storm_without_clean_size_is_emergency);
        tcase_add_test(tc, test_pushback_is_refault);
        tcase_add_test(tc, test_reboot_relearns_without_emergency);
        tcase_add_test(tc, test_floor_never_crossed);
        tcase_add_test(tc, test_hold_then_probe_again);
        tcase_add_test(tc, test_growth_in_hold);
        tcase_add_test(tc, test_hold_ends_when_settled_just_above_target);
        tcase_add_test(tc, test_probe_now);
        tcase_add_test(tc, test_probe_now_refused);
        tcase_add_test(tc, test_probe_now_from_learn);
        tcase_add_test(tc, test_observe_mode_never_moves);
        tcase_add_test(tc, test_no_stats_holds);
        tcase_add_test(tc, test_snapshot_restore);
        tcase_add_test(tc, test_restore_mid_cycle_backs_off);
        tcase_add_test(tc, test_bad_policy_rejected);
        tcase_add_test(tc, test_state_names);
        suite_add_tcase(s, tc);
        return check_run_suite(s);
}
