/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Each state transition of the estimator, driven by hand-made samples (estimator-fake.h): learn,
 * probe, backoff, emergency, an operator's Probe, observe mode, restore from a snapshot. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/check-run.h"
#include "tests/lib/estimator-fake.h"

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

/* Below a size that ran clean, the first refaulting sample backs off at once: every interval
 * spent below the working set is paid twice by the workload (issue 13). */
START_TEST(test_first_refault_below_clean_backs_off_at_once) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        uint64_t clean = f.target; /* runs clean there at the next step */
        step(g, &f, 1, GIB);
        uint64_t refaulting = f.target;
        step(g, &f, 500, GIB); /* refaults at `refaulting`: no second sample there */
        RsDecision d;
        rs_guest_decide(g, f.now, &d);
        ck_assert_int_eq(d.state, RS_STATE_BACKOFF);
        ck_assert_uint_lt(refaulting, clean);
        ck_assert_uint_eq(rs_guest_estimate(g)->lower, refaulting);
        ck_assert_uint_eq(rs_guest_estimate(g)->upper, clean);
        ck_assert_uint_ge(d.target, clean);
        ck_assert(d.urgent);
        ck_assert_ptr_nonnull(strstr(d.reason, "at once"));
        rs_guest_free(g);
}
END_TEST

/* A size that would end the cycle is believed clean only after `confirm` clean samples: the
 * first sample after a step may come before the guest touches what the step took (a CI run
 * finished 14 % low that way). A refault on the second sample there brackets the set above it. */
START_TEST(test_closing_size_is_confirmed_clean) {
        for (int refault_second = 0; refault_second <= 1; refault_second++) {
                Fake f;
                RsGuest *g = learned_guest(&f);
                RsDecision d;
                uint64_t refaulting = 0;
                /* probe down clean to 1200 MiB, then refault (confirmed): onset, refine from the last clean size */
                for (int i = 0; i < 100 && f.actual > 1200 * MIB; i++)
                        step(g, &f, 1, GIB);
                refaulting = f.target;
                step(g, &f, 500, GIB);
                step(g, &f, 500, GIB);
                ck_assert_uint_eq(rs_guest_estimate(g)->lower, refaulting);
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
                /* the refine: small clean steps down towards the refaulting size */
                bool confirming = false;
                for (int i = 0; i < 100 && !confirming; i++) {
                        step(g, &f, 1, GIB);
                        rs_guest_decide(g, f.now, &d);
                        ck_assert_msg(d.state == RS_STATE_PROBE || d.state == RS_STATE_BACKOFF, "state %s: %s",
                                      rs_state_to_string(d.state), d.reason);
                        confirming = strstr(d.reason, "confirming") != NULL;
                }
                ck_assert_msg(confirming, "never held to confirm a closing size: %s", d.reason);
                uint64_t closing = f.actual;
                uint64_t upper_before = rs_guest_estimate(g)->upper;
                ck_assert_int_eq(d.state, RS_STATE_PROBE);
                ck_assert_uint_eq(d.target, closing);          /* held there, not finished */
                ck_assert_uint_gt(upper_before, closing);      /* not yet counted clean */
                ck_assert_ptr_nonnull(strstr(d.reason, "(1/2)"));
                if (!refault_second) {
                        step(g, &f, 1, GIB);                   /* clean again: the cycle ends here */
                        rs_guest_decide(g, f.now, &d);
                        ck_assert_int_eq(d.state, RS_STATE_BACKOFF);
                        ck_assert_uint_eq(rs_guest_estimate(g)->estimate, closing);
                } else {
                        step(g, &f, 500, GIB);                 /* the refaults show on the second sample */
                        step(g, &f, 500, GIB);
                        rs_guest_decide(g, f.now, &d);
                        ck_assert_uint_eq(rs_guest_estimate(g)->lower, closing);
                        ck_assert_uint_gt(rs_guest_estimate(g)->upper, closing);
                        ck_assert_uint_ne(rs_guest_estimate(g)->estimate, closing);
                }
                rs_guest_free(g);
        }
}
END_TEST

/* A one-sample blip still backs off (cheap: to a size that ran clean), and its size bounds
 * this cycle only: the probe does not step on it again, and finishes above it. */
START_TEST(test_single_refault_blip_bounds_this_cycle_only) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        uint64_t t = f.target;
        step(g, &f, 500, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
        ck_assert_uint_eq(rs_guest_estimate(g)->lower, t);
        for (int i = 0; i < 40 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        ck_assert_uint_gt(rs_guest_estimate(g)->estimate, t);
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
        /* Still storming there: first taken for the guest paging back in (held, not moved),
         * then, confirmed, an emergency, all the way to max. */
        uint64_t backed_off = f.target;
        step(g, &f, 50000, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
        ck_assert_uint_eq(f.target, backed_off);
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

/* Backed off above a size that ran clean, refaults with plenty of memory free are pages coming
 * back into the room the deflation gave, not a set that grew: however long they last (a
 * database revisits its pages about once a minute, tests/bench/bench-pgbench), the estimate
 * stays and the cycle goes on once they stop. The same refaults with free memory at the
 * watermarks are growth (test_backoff_refaults_confirmed_before_growth). */
START_TEST(test_backoff_recovery_into_free_memory_is_not_growth) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        step(g, &f, 1, GIB);
        uint64_t clean = f.target;
        step(g, &f, 1, GIB);
        step(g, &f, 800, GIB); /* refaults one step below a clean size: back off at once */
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
        uint64_t backed_off = f.target;
        f.free_plenty = true;
        for (int i = 0; i < 6; i++) {
                step(g, &f, 800 - 100 * i, GIB);
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
                ck_assert_uint_eq(f.target, backed_off);
        }
        step(g, &f, 1, GIB); /* read back: clean, and the descent goes on (it was a refine) */
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        ck_assert_uint_le(f.target, backed_off);
        ck_assert_uint_eq(rs_guest_estimate(g)->upper, clean);
        rs_guest_free(g);
}
END_TEST

/* Probing, refaults that come back into free memory with nothing reclaimed for them are what
 * the last step's burst of reclaim took early (a database's pages, revisited once a minute,
 * go with the cold ones: tests/bench/bench-pgbench refaulted 225 MiB above its set): the
 * probe waits at its size for them (two minutes at most) and steps on once they are in. In
 * the interval of a step, the scanning is the balloon's own. The same refaults with reclaim
 * running while the balloon stands still, or with free memory down at the watermarks, or
 * with no scan counters to say nothing was reclaimed, stop the descent. */
START_TEST(test_probe_waits_for_refaults_into_free_memory) {
        for (int variant = 0; variant < 5; variant++) {
                Fake f;
                RsGuest *g = learned_guest(&f);
                f.scans_known = variant != 3;
                step(g, &f, 1, GIB);
                step(g, &f, 1, GIB);
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
                uint64_t at = f.target;
                f.free_plenty = variant != 2;
                f.scan_rate = variant == 0 ? 700 : 0; /* the step's own burst */
                step(g, &f, 500, GIB);
                uint64_t waited_from = f.now;
                f.scan_rate = 0;
                if (variant == 1) {
                        /* waiting, the balloon still for a sample (the one after a step still
                         * carries the step's own reclaim): reclaiming as much as comes back */
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
                        step(g, &f, 500, GIB);
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
                        f.scan_rate = 700;
                        step(g, &f, 500, GIB);
                }
                RsDecision d;
                rs_guest_decide(g, f.now, &d);
                if (variant == 4)
                        ck_assert_int_eq(d.state, RS_STATE_PROBE);
                if (variant == 0) {
                        ck_assert_int_eq(d.state, RS_STATE_PROBE);
                        ck_assert_uint_eq(d.target, at); /* waits where it is */
                        ck_assert_ptr_nonnull(strstr(d.reason, "reading back"));
                        step(g, &f, 300, GIB);
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
                        ck_assert_uint_eq(f.target, at);
                        step(g, &f, 1, GIB); /* all back: on down */
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
                        ck_assert_uint_lt(f.target, at);
                        ck_assert(!rs_known(rs_guest_estimate(g)->lower));
                } else if (variant == 4) {
                        /* refaults that never stop are not a step's pages coming back: after
                         * two minutes of waiting they are a verdict */
                        for (int i = 0; i < 30 && rs_guest_state(g) == RS_STATE_PROBE; i++)
                                step(g, &f, 500, GIB);
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
                        ck_assert_uint_eq(rs_guest_estimate(g)->lower, at);
                        ck_assert_uint_ge(f.now - waited_from, 120 * USEC_PER_SEC);
                } else {
                        ck_assert_int_eq(d.state, RS_STATE_BACKOFF);
                        ck_assert_uint_eq(rs_guest_estimate(g)->lower, at);
                }
                rs_guest_free(g);
        }
}
END_TEST

/* Refaults a little over the threshold in the interval the balloon stepped down in are its
 * burst of reclaim taking hot pages with cold, which come back at once (Redis under the
 * balloon "refaulted" 64-128/s right after each step and 0-6/s at rest: tests/bench/bench-redis):
 * the size is judged again at rest, once. Back near the baseline there, the probe steps on;
 * refaults over the threshold there, or still rising under it, back off as before; and many
 * times the threshold in the step's interval backs off at once. */
START_TEST(test_probe_judges_a_steps_burst_at_rest) {
        for (int variant = 0; variant < 5; variant++) {
                Fake f;
                RsGuest *g = learned_guest(&f);
                f.scans_known = variant == 4;
                step(g, &f, 1, GIB);
                uint64_t clean = f.actual; /* the balloon is there for the next sample */
                step(g, &f, 1, GIB);
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
                uint64_t at = f.actual;
                ck_assert_uint_lt(at, clean);
                RsDecision d;
                if (variant == 4) {
                        /* the step's interval: refaults into free memory, nothing reclaimed
                         * (the probe waits there); the swap-ins of what it pushed out come in
                         * the next, with free memory at the watermarks */
                        f.free_plenty = true;
                        step(g, &f, 90, GIB);
                        rs_guest_decide(g, f.now, &d);
                        ck_assert_msg(d.state == RS_STATE_PROBE && d.target == at, "%s", d.reason);
                        ck_assert_ptr_nonnull(strstr(d.reason, "reading back"));
                        f.free_plenty = false;
                }
                step(g, &f, variant == 3 ? 500 : 90, GIB); /* threshold 2 x 1 + 50 */
                rs_guest_decide(g, f.now, &d);
                if (variant == 3) {
                        ck_assert_msg(d.state == RS_STATE_BACKOFF, "%s", d.reason);
                        ck_assert_uint_eq(rs_guest_estimate(g)->lower, at);
                        rs_guest_free(g);
                        continue;
                }
                ck_assert_msg(d.state == RS_STATE_PROBE && d.target == at, "%s", d.reason);
                ck_assert_ptr_nonnull(strstr(d.reason, "at rest"));

                double at_rest = variant == 0 || variant == 4 ? 1 : variant == 1 ? 25 : 90;
                step(g, &f, at_rest, GIB);
                rs_guest_decide(g, f.now, &d);
                if (variant == 0 || variant == 4) {
                        ck_assert_msg(d.state == RS_STATE_PROBE && d.target < at, "%s", d.reason);
                        ck_assert(!rs_known(rs_guest_estimate(g)->lower));
                } else {
                        ck_assert_msg(d.state == RS_STATE_BACKOFF, "%s", d.reason);
                        ck_assert_uint_eq(rs_guest_estimate(g)->lower, at);
                        ck_assert_uint_ge(d.target, clean);
                }
                rs_guest_free(g);
        }
}
END_TEST

/* Backed off above a size that ran clean, the guest's first refaults may be pages coming back,
 * as fast as below: growth only once confirmed. An OOM kill there is an emergency at once. */
START_TEST(test_backoff_refaults_confirmed_before_growth) {
        for (int oom = 0; oom <= 1; oom++) {
                Fake f;
                RsGuest *g = learned_guest(&f);
                step(g, &f, 1, GIB);
                step(g, &f, 800, GIB); /* refaults one step below a clean size: back off at once */
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
                uint64_t backed_off = f.target;
                if (oom) {
                        f.oom++;
                        step(g, &f, 1, GIB);
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
                        ck_assert_uint_eq(f.target, MAXMEM);
                } else {
                        step(g, &f, 800, GIB); /* as fast as below: not growth yet */
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
                        ck_assert_uint_eq(f.target, backed_off);
                        step(g, &f, 800, GIB); /* still there: it grew */
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_GROW);
                        ck_assert_uint_gt(f.target, backed_off);
                }
                rs_guest_free(g);
        }
}
END_TEST

/* Backed off from a storm, a guest paging back in with nothing going out is recovering,
 * however fast the pages come: no emergency. Swap-outs with them mean it is short. */
START_TEST(test_swapin_storm_after_backoff_is_recovery) {
        for (int short_of_memory = 0; short_of_memory <= 1; short_of_memory++) {
                Fake f;
                RsGuest *g = learned_guest(&f);
                f.swap_out_known = true;
                step(g, &f, 1, GIB);
                step(g, &f, 50000, GIB); /* storm one step below a clean size: back to it */
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
                uint64_t backed_off = f.target;
                for (int i = 0; i < 3; i++) {
                        if (short_of_memory)
                                f.swapout += 50000 * 10 * 4096; /* as much going out as coming in */
                        step(g, &f, 50000, GIB);
                }
                if (short_of_memory)
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
                else {
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
                        ck_assert_uint_eq(f.target, backed_off);
                        RsDecision d;
                        rs_guest_decide(g, f.now, &d);
                        ck_assert_ptr_nonnull(strstr(rs_guest_observation(g)->why, "paging back in"));
                }
                rs_guest_free(g);
        }
}
END_TEST

/* Going down, a probe step at most doubles the one before: a sample that looks far from
 * pressure (here available memory unknown after small steps close to it) must not make the
 * probe lunge (a real demo guest stepped 8 MiB, then 53 MiB into a storm). */
START_TEST(test_probe_step_never_lunges) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        for (int i = 0; i < 3; i++)
                step(g, &f, 1, 20 * MIB); /* close to pressure: small steps */
        uint64_t prev = f.target;
        step(g, &f, 1, 20 * MIB);
        uint64_t small = prev - f.target;
        ck_assert_uint_gt(small, 0);
        ck_assert_uint_lt(small, 20 * MIB);
        uint64_t before = f.target;
        f.stats = false; /* no levels: nothing says pressure is near */
        step(g, &f, 1, GIB);
        f.stats = true;
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        ck_assert_uint_lt(f.target, before);
        ck_assert_uint_le(before - f.target, 2 * small);
        rs_guest_free(g);
}
END_TEST

/* A storm outside a probe (holding at the estimate) is an emergency at once. */
/* The daemon's reclaimable metric is max minus this size: the one HOLD keeps the guest at, and
 * unknown before the first estimate. */
START_TEST(test_hold_size_is_the_hold_target) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        ck_assert_uint_eq(rs_guest_hold_size(g), RS_UNKNOWN);
        step(g, &f, 500, GIB);
        for (int i = 0; i < 40 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        ck_assert_uint_eq(rs_guest_hold_size(g), f.want);
        ck_assert_uint_gt(rs_guest_hold_size(g), rs_guest_estimate(g)->estimate);
        ck_assert_uint_le(rs_guest_hold_size(g), MAXMEM);
        rs_guest_free(g);
}
END_TEST

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
        /* The first sample sees the balloon on its way down (from the learned size), the
         * next two see it where it stopped: 100 MiB short of the target. */
        uint64_t stuck = f.target + 100 * MIB;
        for (int i = 0; i < 3; i++) {
                rs_sample_init(&s);
                f.now += STEP;
                f.majflt += 10;
                s.level[RS_LEVEL_BALLOON_TARGET] = f.target;
                s.level[RS_LEVEL_BALLOON_ACTUAL] = stuck;
                s.level[RS_LEVEL_AVAILABLE] = 500 * MIB;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = f.majflt;
                rs_guest_feed(g, &s, f.now);
                ck_assert(rs_guest_observation(g)->pushback == (i > 0));
                ck_assert(rs_guest_observation(g)->inflating == (i == 0));
        }
        ck_assert_int_eq(rs_guest_observation(g)->verdict, RS_VERDICT_REFAULT);
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
        RsGuest *g = held_at_floor(p, f, 900 * MIB);
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

/* An operator lowers max under an estimate above it, or restarts with a state file saved under
 * the larger max: the estimate comes down to max (what the actuators size virtio-mem and the
 * arbiter's share from), and so does every target. */
START_TEST(test_lowered_max_clamps_the_estimate) {
        RsPolicy p;
        Fake f;
        RsGuestSnapshot snap;
        RsGuest *g = held_guest_snapshot(&p, &f, &snap);
        snap.estimate = 1800 * MIB;
        snap.upper = 1850 * MIB;
        snap.lower = 1790 * MIB;
        ck_assert_int_eq(rs_guest_restore(g, &snap, f.now), 0);
        ck_assert_uint_eq(rs_guest_estimate(g)->estimate, 1800 * MIB);

        RsPolicy lowered = p;
        lowered.max_bytes = 1 * GIB;
        ck_assert_int_eq(rs_guest_set_policy(g, &lowered), 0);
        const RsEstimate *e = rs_guest_estimate(g);
        ck_assert_uint_le(e->estimate, 1 * GIB);
        ck_assert(!rs_known(e->upper) || e->upper <= 1 * GIB);
        ck_assert(!rs_known(e->lower) || e->lower < 1 * GIB);
        RsDecision d;
        rs_guest_decide(g, f.now, &d);
        ck_assert_uint_le(d.target, 1 * GIB);

        /* restarted under the lowered max with the old state file */
        RsGuest *h = NULL;
        ck_assert_int_eq(rs_guest_new(&h, &lowered, MAXMEM), 0);
        ck_assert_int_eq(rs_guest_restore(h, &snap, 5), 0);
        ck_assert_uint_le(rs_guest_estimate(h)->estimate, 1 * GIB);
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
        tcase_add_test(tc, test_first_refault_below_clean_backs_off_at_once);
        tcase_add_test(tc, test_single_refault_blip_bounds_this_cycle_only);
        tcase_add_test(tc, test_hold_size_is_the_hold_target);
        tcase_add_test(tc, test_closing_size_is_confirmed_clean);
        tcase_add_test(tc, test_probe_step_never_lunges);
        tcase_add_test(tc, test_backoff_refaults_confirmed_before_growth);
        tcase_add_test(tc, test_backoff_recovery_into_free_memory_is_not_growth);
        tcase_add_test(tc, test_probe_waits_for_refaults_into_free_memory);
        tcase_add_test(tc, test_probe_judges_a_steps_burst_at_rest);
        tcase_add_test(tc, test_swapin_storm_after_backoff_is_recovery);
        tcase_add_test(tc, test_oom_kill_is_emergency);
        tcase_add_test(tc, test_storm_is_emergency);
        tcase_add_test(tc, test_storm_without_clean_size_is_emergency);
        tcase_add_test(tc, test_pushback_is_refault);
        tcase_add_test(tc, test_reboot_relearns_without_emergency);
        tcase_add_test(tc, test_floor_never_crossed);
        tcase_add_test(tc, test_probe_now);
        tcase_add_test(tc, test_probe_now_refused);
        tcase_add_test(tc, test_probe_now_from_learn);
        tcase_add_test(tc, test_observe_mode_never_moves);
        tcase_add_test(tc, test_no_stats_holds);
        tcase_add_test(tc, test_snapshot_restore);
        tcase_add_test(tc, test_restore_mid_cycle_backs_off);
        tcase_add_test(tc, test_lowered_max_clamps_the_estimate);
        tcase_add_test(tc, test_bad_policy_rejected);
        tcase_add_test(tc, test_state_names);
        suite_add_tcase(s, tc);
        return check_run_suite(s);
}
