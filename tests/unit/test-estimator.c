/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Each state transition of the estimator, driven by hand-made samples. */
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "policies/estimator.h"
#include "tests/lib/check-run.h"

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
        uint64_t grant;        /* the host's cap on the target, 0: none */
        bool hide_grant;       /* cap the guest without telling the core (the old daemon) */
        uint64_t want;         /* the core's last target (target is what the balloon was given) */
        bool swap_out_known;   /* report swap-outs (swapout), not only swap-ins */
        uint64_t swapout;      /* bytes */
        bool free_plenty;      /* report half the available memory free even while refaulting */
        bool scans_known;      /* report the balloon's scan counter (QEMU 9.2+) */
        double scan_rate;      /* pages/s it grows by */
        uint64_t scans;
        uint64_t cache;        /* step_knee(): page cache available at every size (a set in the page cache) */
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
                /* A guest refaulting for want of memory has its free memory down at the
                 * watermarks: with plenty free, refaults after a deflation are pages coming
                 * back into it (pressure.c: refilling), not a guest short of memory. */
                s.level[RS_LEVEL_FREE] = majflt_rate > 20 && !f->free_plenty ? MIN(available / 2, 16 * MIB) : available / 2;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = f->majflt;
                s.counter[RS_COUNTER_SWAP_IN] = f->majflt * 4096;
                if (f->swap_out_known)
                        s.counter[RS_COUNTER_SWAP_OUT] = f->swapout;
                s.counter[RS_COUNTER_OOM_KILLS] = f->oom;
                f->scans += (uint64_t) (f->scan_rate * 10);
                if (f->scans_known)
                        s.counter[RS_COUNTER_ASYNC_SCANS] = f->scans;
        }
        rs_guest_feed(g, &s, f->now);
        RsDecision d;
        rs_guest_decide(g, f->now, &d);
        f->want = d.target;
        /* the host arbitrates, as the daemon does between decision and actuation */
        bool capped = f->grant > 0 && f->grant < d.target;
        if (!f->hide_grant)
                rs_guest_set_grant(g, capped ? f->grant : RS_UNKNOWN);
        f->target = capped ? f->grant : d.target;
        f->actual = MIN(f->target + f->settle_above, MAXMEM); /* the balloon reaches it */
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

/* A guest with a working set of about 1 GiB (clean down to it, refaulting below), held
 * with its margin; hold_usec: the policy's hold time, 0 for its default. */
static RsGuest *held_guest_with_hold(Fake *f, uint64_t hold_usec) {
        RsPolicy p;
        rs_policy_init(&p);
        if (hold_usec)
                p.hold_usec = hold_usec;
        p.floor_bytes = 512 * MIB;
        RsGuest *g = new_guest(&p, f);
        for (int i = 0; i < 200 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, f, f->actual < GIB ? 400 : 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        return g;
}

START_TEST(test_hold_then_probe_again) {
        Fake f;
        RsGuest *g = held_guest_with_hold(&f, 100 * USEC_PER_SEC); /* 10 intervals */
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

/* A guest that runs clean at its floor is held there, and a re-probe from the floor can
 * give nothing: it does not run (issue 13); the reason says why. */
START_TEST(test_hold_at_floor_skips_reprobes) {
        RsPolicy p;
        Fake f;
        rs_policy_init(&p);
        p.hold_usec = 100 * USEC_PER_SEC; /* 10 intervals */
        p.floor_bytes = 1 * GIB;
        RsGuest *g = new_guest(&p, &f);
        for (int i = 0; i < 100 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        bool said = false;
        for (int i = 0; i < 500; i++) { /* 5,000 s: fifty of the policy's holds */
                step(g, &f, 1, GIB);
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
                RsDecision d;
                rs_guest_decide(g, f.now, &d);
                said = said || strstr(d.reason, "re-probe skipped, nothing to give (held at the floor)") != NULL;
        }
        ck_assert(said);
        ck_assert_uint_eq(f.target, 1 * GIB);
        /* An operator's request still probes. */
        ck_assert_int_eq(rs_guest_probe_now(g, f.now), 0);
        step(g, &f, 1, GIB);
        ck_assert_int_ne(rs_guest_state(g), RS_STATE_HOLD);
        rs_guest_free(g);
}
END_TEST

/* QEMU balloons whole pages and the guest may stop a few KiB above an unaligned target:
 * the hold must still end in a probe. */
START_TEST(test_hold_ends_when_settled_just_above_target) {
        Fake f;
        RsGuest *g = held_guest_with_hold(&f, 100 * USEC_PER_SEC); /* 10 intervals */
        /* held with its margin: an unaligned target */
        ck_assert_uint_ne(f.target % 4096, 0);
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
        return held_guest_with_hold(f, 0);
}

/* A guest with a floor of `floor` bytes, stepped clean until it holds (at its floor). */
static RsGuest *held_at_floor(RsPolicy *p, Fake *f, uint64_t floor) {
        rs_policy_init(p);
        p->floor_bytes = floor;
        RsGuest *g = new_guest(p, f);
        for (int i = 0; i < 100 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        return g;
}

/* Held, the margin eaten while reclaim runs is growth without refaults yet, once it lasts
 * `confirm` samples: one sample of it (the levels of the squeeze just before, still in the
 * first held sample) is not. */
START_TEST(test_hold_margin_eaten_is_growth_once_confirmed) {
        Fake f;
        RsGuest *g = held_guest(&f);
        uint64_t held = f.target;
        const RsEstimate *e = rs_guest_estimate(g);
        ck_assert_uint_gt(held, e->estimate);
        uint64_t eaten = (held - e->estimate) / 4; /* available under a third of the margin */
        step(g, &f, 1, eaten);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        step(g, &f, 1, GIB / 4); /* it was the squeeze's levels: room again */
        step(g, &f, 1, eaten);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        step(g, &f, 1, eaten);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_GROW);
        ck_assert_uint_gt(f.target, held);
        rs_guest_free(g);
}
END_TEST

/* Held, a set a little larger than its estimate fills most of the margin from the first
 * held sample on and stays there: nothing is being eaten, and a hold is not a growth. */
START_TEST(test_hold_margin_low_but_steady_is_no_growth) {
        Fake f;
        RsGuest *g = held_guest(&f);
        uint64_t held = f.target;
        const RsEstimate *e = rs_guest_estimate(g);
        uint64_t low = (held - e->estimate) / 4; /* available under a third of the margin */
        for (int i = 0; i < 10; i++) {
                step(g, &f, 1, low + (i % 2) * MIB); /* steady, give or take a MiB */
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        }
        ck_assert_uint_eq(f.target, held);
        rs_guest_free(g);
}
END_TEST

/* A guest with a working set of about 1 GiB in an emergency (a storm at its held size): it
 * asks for max, the host grants `grant`. */
static RsGuest *emergency_guest(Fake *f, uint64_t grant, bool hide_grant) {
        RsGuest *g = held_guest(f);
        f->grant = grant;
        f->hide_grant = hide_grant;
        step(g, f, 50000, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
        ck_assert_uint_eq(f->want, MAXMEM);
        ck_assert_uint_eq(f->actual, grant); /* the host's cap, not max */
        ck_assert(!rs_known(rs_guest_estimate(g)->estimate)); /* the storm proved it too small */
        return g;
}

/* Calm at all the host grants: the emergency ends there, as it would at max. Told nothing
 * (the old daemon), the guest waits for max forever. */
START_TEST(test_emergency_capped_clean_leaves) {
        Fake f;
        RsGuest *g = emergency_guest(&f, 1536 * MIB, false);
        uint64_t lower = rs_guest_estimate(g)->lower;
        ck_assert_uint_lt(lower, 1536 * MIB);
        step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        ck_assert_uint_lt(f.want, 1536 * MIB); /* probing down from the grant */
        ck_assert_uint_gt(f.want, lower);      /* not back to the size that stormed */
        ck_assert_uint_eq(rs_guest_estimate(g)->upper, 1536 * MIB);
        rs_guest_free(g);

        g = emergency_guest(&f, 1536 * MIB, true);
        for (int i = 0; i < 20; i++)
                step(g, &f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
        ck_assert_uint_eq(f.want, MAXMEM);
        rs_guest_free(g);
}
END_TEST

/* Still refaulting at all the host grants: it stays in the emergency and asks for max, says
 * why, and keeps that size as refaulting without making up an estimate. Once the host has
 * room again it goes to max as before, and on from there. */
START_TEST(test_emergency_capped_refaulting_stays_until_grant_lifted) {
        Fake f;
        RsGuest *g = emergency_guest(&f, 1536 * MIB, false);
        RsDecision d;
        ck_assert_uint_lt(rs_guest_estimate(g)->lower, 1536 * MIB); /* where it stormed */

        for (int i = 0; i < 3; i++)
                step(g, &f, 400, GIB);
        rs_guest_decide(g, f.now, &d);
        ck_assert_int_eq(d.state, RS_STATE_EMERGENCY);
        ck_assert_uint_eq(d.target, MAXMEM);
        ck_assert(d.urgent);
        ck_assert_msg(strstr(d.reason, "at 1536 MiB, the host grants no more than 1536 MiB"), "reason: %s", d.reason);
        ck_assert_uint_eq(rs_guest_estimate(g)->lower, 1536 * MIB);
        ck_assert(!rs_known(rs_guest_estimate(g)->estimate));
        ck_assert_uint_eq(f.actual, 1536 * MIB);

        /* the host has room again: max, then calm there, probing down but not below what refaulted */
        f.grant = 0;
        step(g, &f, 400, GIB);
        ck_assert_uint_eq(f.actual, MAXMEM);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
        step(g, &f, 1, GIB);
        rs_guest_decide(g, f.now, &d);
        ck_assert_int_eq(d.state, RS_STATE_PROBE);
        ck_assert_uint_lt(d.target, MAXMEM);
        ck_assert_uint_gt(d.target, 1536 * MIB);
        ck_assert_uint_eq(rs_guest_estimate(g)->lower, 1536 * MIB);
        rs_guest_free(g);
}
END_TEST

/* The probe finds the working set (about 1 GiB) and backs off to it plus margin, but the host
 * grants only a little above the set: the backoff ends at the grant and the guest holds,
 * with its estimate. Told nothing, it would wait in BACKOFF for the margin forever. */
START_TEST(test_backoff_capped_completes) {
        for (int hide = 0; hide < 2; hide++) {
                RsPolicy p;
                Fake f;
                rs_policy_init(&p);
                p.floor_bytes = 512 * MIB;
                RsGuest *g = new_guest(&p, &f);
                f.grant = GIB + 32 * MIB;
                f.hide_grant = hide;
                bool backed_off = false;
                for (int i = 0; i < 200 && rs_guest_state(g) != RS_STATE_HOLD; i++) {
                        step(g, &f, f.actual < GIB ? 400 : 1, GIB);
                        backed_off = backed_off || (rs_guest_state(g) == RS_STATE_BACKOFF && f.want > f.grant);
                }
                ck_assert(backed_off); /* the case in point: a backoff target above the grant */
                if (hide) {
                        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
                        rs_guest_free(g);
                        continue;
                }
                RsDecision d;
                rs_guest_decide(g, f.now, &d);
                ck_assert_int_eq(d.state, RS_STATE_HOLD);
                ck_assert(rs_known(d.estimate));
                ck_assert_uint_ge(d.estimate, GIB);
                ck_assert_uint_le(d.estimate, GIB + GIB / 20);
                ck_assert_uint_gt(d.target, f.grant); /* it still wishes for its margin */
                ck_assert_uint_eq(f.actual, f.grant);
                ck_assert_msg(strstr(d.reason, "the host grants"), "reason: %s", d.reason);
                rs_guest_free(g);
        }
}
END_TEST

/* Held at its size by the host while its working set grows: GROW stays (it cannot learn more
 * there, and it is no stream), and grows on once the host has room. */
START_TEST(test_grow_capped_waits_for_room) {
        Fake f;
        RsGuest *g = held_guest(&f);
        uint64_t held = f.actual;
        RsDecision d;

        f.grant = held;
        for (int i = 0; i < 6; i++)
                step(g, &f, 400, GIB);
        rs_guest_decide(g, f.now, &d);
        ck_assert_int_eq(d.state, RS_STATE_GROW);
        ck_assert_uint_gt(d.target, held);
        ck_assert_uint_eq(f.actual, held);
        ck_assert(!rs_guest_estimate(g)->streaming);
        ck_assert_uint_eq(rs_guest_estimate(g)->lower, held);
        ck_assert_msg(strstr(d.reason, "the host grants no more than"), "reason: %s", d.reason);

        f.grant = 0;
        step(g, &f, 400, GIB);
        ck_assert_uint_ge(f.actual, held + held / 10);
        step(g, &f, 1, GIB); /* clean after growing: probing again from there */
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_PROBE);
        ck_assert_uint_eq(rs_guest_estimate(g)->estimate, held + held / 10);
        rs_guest_free(g);
}
END_TEST

/* Granted less than its working set, a holding guest refaults: that is the host's doing, not
 * growth. It keeps holding (and its estimate), and says why. */
START_TEST(test_hold_below_working_set_by_host_is_not_growth) {
        Fake f;
        RsGuest *g = held_guest(&f);
        uint64_t estimate = rs_guest_estimate(g)->estimate;
        RsDecision d;

        f.grant = estimate - 64 * MIB;
        step(g, &f, 1, GIB); /* shrunk to the grant */
        for (int i = 0; i < 5; i++)
                step(g, &f, 400, GIB);
        rs_guest_decide(g, f.now, &d);
        ck_assert_int_eq(d.state, RS_STATE_HOLD);
        ck_assert_uint_eq(d.estimate, estimate);
        ck_assert_msg(strstr(d.reason, "below the working set"), "reason: %s", d.reason);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_grant_below_floor_counts_as_floor) {
        Fake f;
        RsGuest *g = held_guest(&f);
        rs_guest_set_grant(g, MIB);
        ck_assert_uint_eq(rs_guest_grant(g), 512 * MIB);
        rs_guest_set_grant(g, RS_UNKNOWN);
        ck_assert(!rs_known(rs_guest_grant(g)));
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

START_TEST(test_growth_in_hold) {
        RsPolicy p;
        Fake f;
        RsGuest *g = held_at_floor(&p, &f, 1 * GIB);
        uint64_t held = f.target;
        step(g, &f, 400, GIB);
        step(g, &f, 400, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_GROW);
        ck_assert_uint_ge(f.target, held + held / 10);
        rs_guest_free(g);
}
END_TEST

/* A set that grew far past one growth step keeps refaulting after that step: with the guest
 * still pushing pages to swap as it reads others back, that is a guest short of memory, not a
 * stream, and GROW goes on (test-daemon-real-guest's phase 2 once took its memory back as a
 * "stream", then stormed into an emergency). */
START_TEST(test_growth_still_swapping_out_is_no_stream) {
        RsPolicy p;
        Fake f;
        RsGuest *g = held_at_floor(&p, &f, 1 * GIB);
        f.swap_out_known = true;
        step(g, &f, 1, GIB); /* the swap-out counter's first rate */
        uint64_t held = f.target;
        for (int i = 0; i < 6; i++) {
                f.swapout += 10 * 400 * 4096; /* 400 pages/s out, as many as come back */
                step(g, &f, 400, GIB);
                ck_assert_msg(!rs_guest_estimate(g)->streaming, "step %d: taken for a stream", i);
        }
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_GROW);
        ck_assert_uint_gt(f.target, held + held / 5);
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

/* ---- re-probes: cheap, and rarer the steadier the guest (issue 13) ---- */

#define KNEE (1 * GIB)

/* One interval of a guest whose working set is `knee`: below it, it refaults in proportion
 * to the deficit; available memory is what lies above it. */
static void step_knee(RsGuest *g, Fake *f, uint64_t knee) {
        double rate = f->actual < knee ? 1.0 + (double) (knee - f->actual) / 4096.0 : 1.0;
        uint64_t avail = (f->actual > knee ? f->actual - knee : 0) + 8 * MIB + f->cache;
        step(g, f, rate, avail);
}

typedef struct ReprobeLog {
        unsigned probes;           /* entries into PROBE from HOLD */
        uint64_t probe_at[16];
        uint64_t first_target[16]; /* each re-probe's first target */
        uint64_t first_from[16];   /* and the held size it left */
        uint64_t check_target;     /* the re-probe's first target at or below the check point */
        unsigned below;            /* intervals run below the knee (by more than the refault
                                    * threshold lets pass unseen), after the first hold */
        uint64_t max_deficit;      /* bytes, after the first hold */
        bool small_steps;          /* every re-probe step below the estimate was <= 2 MiB and fine */
} ReprobeLog;

static void run_knee(RsGuest *g, Fake *f, uint64_t knee, unsigned steps, ReprobeLog *log) {
        RsState prev = rs_guest_state(g);
        bool held = prev == RS_STATE_HOLD;
        for (unsigned i = 0; i < steps; i++) {
                uint64_t before = f->actual;
                step_knee(g, f, knee);
                RsDecision d;
                rs_guest_decide(g, f->now, &d);
                if (d.state == RS_STATE_HOLD)
                        held = true;
                if (held && before + MIB / 4 < knee) { /* more than the threshold lets pass unseen */
                        log->below++;
                        log->max_deficit = MAX(log->max_deficit, knee - before);
                }
                if (prev == RS_STATE_HOLD && d.state == RS_STATE_PROBE) {
                        if (log->probes < ARRAY_SIZE(log->probe_at)) {
                                log->probe_at[log->probes] = f->now;
                                log->first_target[log->probes] = d.target;
                                log->first_from[log->probes] = before;
                        }
                        log->probes++;
                } else if (held && d.state == RS_STATE_PROBE && d.target < before && rs_known(d.estimate) &&
                           before <= d.estimate && (before - d.target > 2 * MIB || !d.fine))
                        log->small_steps = false;
                prev = d.state;
        }
}

START_TEST(test_reprobe_starts_at_estimate_with_fine_steps) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        ReprobeLog log = { .small_steps = true };
        run_knee(g, &f, KNEE, 60, &log); /* the first descent */
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        uint64_t est = rs_guest_estimate(g)->estimate;
        ck_assert_uint_ge(est, KNEE);
        ck_assert_uint_le(est, KNEE + KNEE / 50);
        ck_assert(rs_known(rs_guest_estimate(g)->lower));

        log = (ReprobeLog) { .small_steps = true };
        run_knee(g, &f, KNEE, 200, &log);
        ck_assert_uint_ge(log.probes, 1);
        /* towards just above the estimate (two resolutions, 2 %, at least two fine steps), at
         * the pace of a first descent's end: 2 % of the size a step, or a quarter of what is
         * available (step_knee(): 8 MiB above the knee), never past it */
        uint64_t check = est + MAX(4 * MIB, 2 * (est / 100));
        uint64_t avail = log.first_from[0] - KNEE + 8 * MIB;
        ck_assert_uint_ge(log.first_target[0], check);
        ck_assert_uint_lt(log.first_target[0], log.first_from[0]);
        ck_assert_uint_le(log.first_from[0] - log.first_target[0], MAX(2 * (log.first_from[0] / 100), avail / 4) + MIB);
        ck_assert_uint_gt(avail / 4, check - KNEE); /* so the check point is a step away */
        ck_assert(log.small_steps);
        /* by construction: one fine step below the last clean size, for one interval, per
         * re-probe; that clean size may itself lie a little below the knee, as far as the
         * refault threshold lets refaults pass unseen (50 pages/s here: 0.2 MiB) */
        ck_assert_uint_le(log.max_deficit, 2 * MIB + MIB / 4);
        ck_assert_uint_le(log.below, log.probes);
        ck_assert_uint_le(rs_guest_estimate(g)->estimate, KNEE + 3 * MIB);
        ck_assert_uint_ge(rs_guest_estimate(g)->estimate, KNEE - MIB / 4);
        rs_guest_free(g);
}
END_TEST

/* A re-probe of a guest whose slack is page cache (plenty available at its check point): pages
 * pushed to swap there say reclaim has reached its anonymous set, and confirm the estimate
 * without going nearer (CI's anonymous guest under a CPU hog went on past that and swapped
 * 6,854 pages back in); reclaim running alone, which such a guest shows at every step, does not. */
START_TEST(test_reprobe_check_point_tight_on_swap_out_not_on_reclaim) {
        for (int swap = 0; swap <= 1; swap++) {
                Fake f;
                RsGuest *g = learned_guest(&f);
                f.swap_out_known = true;
                f.scans_known = true;
                ReprobeLog log = { .small_steps = true };
                run_knee(g, &f, KNEE, 60, &log);
                ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
                uint64_t est = rs_guest_estimate(g)->estimate;
                uint64_t check = est + MAX(4 * MIB, 2 * (est / 100));

                /* held with 200 MiB of page cache above the set, until the re-probe's target
                 * reaches the check point */
                bool at_check = false;
                for (int i = 0; i < 400 && !at_check; i++) {
                        step(g, &f, 1, f.actual - KNEE + 200 * MIB);
                        at_check = rs_guest_state(g) == RS_STATE_PROBE && f.target <= check;
                }
                ck_assert(at_check);
                ck_assert_uint_gt(f.target, est);

                if (swap)
                        f.swapout += 10 * 1000 * 4096; /* 1,000 pages/s out */
                else
                        f.scan_rate = 5000;
                uint64_t at = f.actual;
                step(g, &f, 1, f.actual - KNEE + 200 * MIB);
                RsDecision d;
                rs_guest_decide(g, f.now, &d);
                if (swap) {
                        ck_assert_msg(d.state == RS_STATE_BACKOFF, "%s", d.reason); /* back to its hold size */
                        ck_assert_ptr_nonnull(strstr(d.reason, "pages pushed to swap"));
                        ck_assert_uint_eq(rs_guest_estimate(g)->estimate, est);
                        ck_assert_uint_gt(d.target, check);
                } else {
                        ck_assert_int_eq(d.state, RS_STATE_PROBE);
                        ck_assert_ptr_null(strstr(d.reason, "tight"));
                        ck_assert_msg(d.target < at, "%s", d.reason);
                }
                rs_guest_free(g);
        }
}
END_TEST

/* A steady guest: the fresh estimate is re-probed once, after the policy's hold, and the
 * re-probe confirms it; after that the guest has nothing to give (issue 13: a probe whose
 * expected gain is nil does not run) and the holds double without a probe (1200, 2400,
 * 4800, 9600 s, then 4 h), until the longest hold, where a re-probe runs whatever the signs
 * (pages that went cold in the page cache show in no level). Over 12 hours at 10 s: a
 * re-probe at about 600 s and one at about 33,000 s, none between (probes per hour of a
 * guest with nothing to give: 0 for the eight hours after the first). */
START_TEST(test_hold_doubles_while_estimate_confirmed) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        ReprobeLog log = { .small_steps = true };
        run_knee(g, &f, KNEE, 60, &log);
        uint64_t t0 = f.now;
        log = (ReprobeLog) { .small_steps = true };
        run_knee(g, &f, KNEE, 12 * 360, &log); /* 12 hours at 10 s */
        ck_assert_uint_eq(log.probes, 2);
        ck_assert_uint_le(log.probe_at[0] - t0, 600 * USEC_PER_SEC + 10 * STEP);
        uint64_t gap = log.probe_at[1] - log.probe_at[0];
        ck_assert_msg(gap >= 8 * 3600 * USEC_PER_SEC, "the second re-probe came %" PRIu64 " s after the first",
                      gap / USEC_PER_SEC);
        ck_assert_uint_le(gap, (1200 + 2400 + 4800 + 9600 + 14400) * USEC_PER_SEC + 60 * STEP);
        ck_assert_uint_le(log.max_deficit, 2 * MIB + MIB / 4);
        ck_assert_uint_le(log.below, log.probes);
        ck_assert_uint_eq(rs_guest_reprobes_skipped(g), 4);

        /* The snapshot keeps the longer hold across a restart. */
        RsGuestSnapshot snap;
        rs_guest_snapshot(g, &snap);
        ck_assert_uint_ge(snap.hold_doublings, 4);
        rs_guest_free(g);
}
END_TEST

/* A set in the page cache (plenty available at its estimate): a set that stops reading some
 * of its pages leaves them cached, and no level shows it (a database that moved from a large
 * table to a small one), so its confirmed estimate is re-probed on the doubling schedule:
 * re-probes at about 600, 1800, 4200, 9000, 18600 and 33000 s in 12 h, none skipped. */
START_TEST(test_cache_set_reprobed_on_schedule) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        f.cache = 200 * MIB;
        ReprobeLog log = { .small_steps = true };
        run_knee(g, &f, KNEE, 60, &log);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        log = (ReprobeLog) { .small_steps = true };
        run_knee(g, &f, KNEE, 12 * 360, &log); /* 12 hours at 10 s */
        ck_assert_uint_ge(log.probes, 5);
        ck_assert_uint_le(log.probes, 7);
        for (unsigned i = 2; i < MIN(log.probes, 5u); i++) {
                uint64_t gap = log.probe_at[i] - log.probe_at[i - 1];
                uint64_t prev_gap = log.probe_at[i - 1] - log.probe_at[i - 2];
                ck_assert_msg(gap > prev_gap + prev_gap / 2, "re-probe %u came %" PRIu64 " s after the last (before: %" PRIu64 " s)",
                              i, gap / USEC_PER_SEC, prev_gap / USEC_PER_SEC);
        }
        ck_assert_uint_eq(rs_guest_reprobes_skipped(g), 0);
        rs_guest_free(g);
}
END_TEST

START_TEST(test_hold_resets_when_available_rises) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        ReprobeLog log = { .small_steps = true };
        run_knee(g, &f, KNEE, 60, &log);
        log = (ReprobeLog) { .small_steps = true };
        run_knee(g, &f, KNEE, 3 * 360, &log); /* 3 h: the hold has doubled a few times */
        ck_assert_uint_ge(log.probes, 1);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        /* The set shrinks by 200 MiB: available memory rises, the hold goes back to 600 s
         * and the next probe finds the smaller set. */
        uint64_t t0 = f.now;
        log = (ReprobeLog) { .small_steps = true };
        run_knee(g, &f, KNEE - 200 * MIB, 200, &log);
        ck_assert_uint_ge(log.probes, 1);
        ck_assert_uint_le(log.probe_at[0] - t0, 600 * USEC_PER_SEC + 5 * STEP);
        uint64_t est = rs_guest_estimate(g)->estimate;
        ck_assert_uint_le(est, KNEE - 200 * MIB + (KNEE - 200 * MIB) / 50);
        rs_guest_free(g);
}
END_TEST

/* Probing, a rate that is a storm for a small set is a refault for a big one a step short:
 * it backs off a step, not all the way to max. Held, a storm is still an emergency (the set
 * jumped). */
START_TEST(test_storm_rate_scales_with_the_set) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        uint64_t clean = f.target; /* runs clean there at the next step */
        step(g, &f, 1, GIB);
        step(g, &f, 5000, GIB); /* 2.5x the fixed storm level; 1.1 % of the set's pages a second */
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_BACKOFF);
        ck_assert_uint_eq(f.target, clean);
        rs_guest_free(g);

        g = learned_guest(&f);
        ReprobeLog log = { .small_steps = true };
        run_knee(g, &f, KNEE, 60, &log);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        step(g, &f, 5000, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_EMERGENCY);
        ck_assert_uint_eq(f.target, MAXMEM);
        rs_guest_free(g);
}
END_TEST

/* A fine step the balloon cannot take (smaller than the pushback threshold) is pushback
 * once confirmed: the probe ends instead of asking for it forever. */
START_TEST(test_balloon_short_of_fine_step_is_pushback) {
        Fake f;
        RsGuest *g = learned_guest(&f);
        ReprobeLog log = { .small_steps = true };
        run_knee(g, &f, KNEE, 60, &log);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        f.settle_above = 3 * MIB / 2; /* from now on the balloon stops 1.5 MiB short of every target */
        log = (ReprobeLog) { .small_steps = true };
        run_knee(g, &f, 0, 120, &log);
        ck_assert_uint_ge(log.probes, 1);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        rs_guest_free(g);
}
END_TEST

int main(void) {
        Suite *s = suite_create("estimator");
        TCase *tc = tcase_create("states");
        tcase_add_test(tc, test_learn_then_probe_shrinks);
        tcase_add_test(tc, test_first_refault_below_clean_backs_off_at_once);
        tcase_add_test(tc, test_reprobe_starts_at_estimate_with_fine_steps);
        tcase_add_test(tc, test_reprobe_check_point_tight_on_swap_out_not_on_reclaim);
        tcase_add_test(tc, test_hold_doubles_while_estimate_confirmed);
        tcase_add_test(tc, test_cache_set_reprobed_on_schedule);
        tcase_add_test(tc, test_hold_resets_when_available_rises);
        tcase_add_test(tc, test_storm_rate_scales_with_the_set);
        tcase_add_test(tc, test_balloon_short_of_fine_step_is_pushback);
        tcase_add_test(tc, test_single_refault_blip_bounds_this_cycle_only);
        tcase_add_test(tc, test_hold_size_is_the_hold_target);
        tcase_add_test(tc, test_closing_size_is_confirmed_clean);
        tcase_add_test(tc, test_probe_step_never_lunges);
        tcase_add_test(tc, test_backoff_refaults_confirmed_before_growth);
        tcase_add_test(tc, test_backoff_recovery_into_free_memory_is_not_growth);
        tcase_add_test(tc, test_probe_waits_for_refaults_into_free_memory);
        tcase_add_test(tc, test_hold_margin_eaten_is_growth_once_confirmed);
        tcase_add_test(tc, test_hold_margin_low_but_steady_is_no_growth);
        tcase_add_test(tc, test_swapin_storm_after_backoff_is_recovery);
        tcase_add_test(tc, test_oom_kill_is_emergency);
        tcase_add_test(tc, test_storm_is_emergency);
        tcase_add_test(tc, test_storm_without_clean_size_is_emergency);
        tcase_add_test(tc, test_pushback_is_refault);
        tcase_add_test(tc, test_reboot_relearns_without_emergency);
        tcase_add_test(tc, test_floor_never_crossed);
        tcase_add_test(tc, test_hold_then_probe_again);
        tcase_add_test(tc, test_hold_at_floor_skips_reprobes);
        tcase_add_test(tc, test_growth_in_hold);
        tcase_add_test(tc, test_growth_still_swapping_out_is_no_stream);
        tcase_add_test(tc, test_hold_ends_when_settled_just_above_target);
        tcase_add_test(tc, test_emergency_capped_clean_leaves);
        tcase_add_test(tc, test_emergency_capped_refaulting_stays_until_grant_lifted);
        tcase_add_test(tc, test_backoff_capped_completes);
        tcase_add_test(tc, test_grow_capped_waits_for_room);
        tcase_add_test(tc, test_hold_below_working_set_by_host_is_not_growth);
        tcase_add_test(tc, test_grant_below_floor_counts_as_floor);
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
