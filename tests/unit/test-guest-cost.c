/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The cost controller behind the rs_guest_* API (policies/guest-cost.c): a guest whose policy says
 * controller = cost is sized by the controller, converges on the guest model within the bounds
 * of issue 35, shows its actions in the daemon's states, keeps floor and max against a guest
 * that lies, and resumes from its own snapshot while refusing the probe's (and the probe its). */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "policies/estimator.h"
#include "tests/lib/check-run.h"
#include "tests/model/scenario.h"

#define TICKS 300

static void cost_policy(RsPolicy *p) {
        rs_policy_init(p);
        p->core = RS_CORE_COST;
        p->floor_bytes = 256 * MIB;
        p->floor_percent = 0;
}

typedef struct Seen {
        bool state_seen[_RS_STATE_MAX];
        bool above_max, below_floor;
        uint64_t last_target;
        RsState last_state;
} Seen;

static bool seen_tick(const GuestModel *m _unused_, const RsGuest *g, const RsDecision *d, void *userdata) {
        Seen *s = userdata;
        s->state_seen[d->state] = true;
        s->above_max = s->above_max || d->target > d->max;
        s->below_floor = s->below_floor || d->target < d->floor;
        s->last_target = d->target;
        s->last_state = d->state;
        ck_assert_int_eq(d->state, rs_guest_state(g));
        return true;
}

/* The end state: held >= the working set and <= set x (1 + margin) + one step (the
 * daemon's dead-band, the smallest move it makes). */
START_TEST(test_converges_on_steady_anon) {
        GuestModelConfig cfg;
        ScenarioSpec spec;
        ScenarioResult r;
        RsPolicy p;
        Seen seen = {};
        ScenarioOptions opts = { .actuate = true };

        scenario_config(SCENARIO_STEADY_ANON, 1, false, &cfg, &spec);
        cost_policy(&p);
        ck_assert_int_eq(scenario_run_opts(&cfg, &p, TICKS, 0.10, &opts, seen_tick, &seen, &r), 0);
        double ws = (double) r.final_ws, held = (double) seen.last_target;
        ck_assert_msg(held >= ws, "held %.0f MiB under the working set %.0f MiB", held / MIB, ws / MIB);
        ck_assert_msg(held <= ws * (1 + p.margin_percent / 100) + (double) p.dead_band_bytes,
                      "held %.0f MiB, more than the working set %.0f MiB plus the margin and a step", held / MIB,
                      ws / MIB);
        ck_assert_int_eq(r.oom_kills, 0);
        ck_assert(!seen.above_max && !seen.below_floor);
        /* the descent shows as probing, the end as holding; no knee, so no backoff */
        ck_assert(seen.state_seen[RS_STATE_LEARN]);
        ck_assert(seen.state_seen[RS_STATE_PROBE]);
        ck_assert_int_eq(seen.last_state, RS_STATE_HOLD);
        ck_assert(!seen.state_seen[RS_STATE_BACKOFF]);
        ck_assert(rs_known(r.final_estimate));
}
END_TEST

/* A guest with stats near 2^64 and a size past its max: nothing it says takes the target past
 * the policy's max or under its floor. */
START_TEST(test_lying_guest_keeps_bounds) {
        RsGuest *g;
        RsPolicy p;
        RsDecision d;

        cost_policy(&p);
        p.max_bytes = 1 * GIB;
        ck_assert_int_eq(rs_guest_new(&g, &p, 2 * GIB), 0);
        for (unsigned i = 0; i < 50; i++) {
                RsSample s;
                rs_sample_init(&s);
                s.level[RS_LEVEL_BALLOON_ACTUAL] = i % 2 ? UINT64_MAX - 1 : 4 * GIB;
                s.level[RS_LEVEL_TOTAL] = UINT64_MAX / 2;
                s.level[RS_LEVEL_FREE] = i % 3 ? UINT64_MAX - 7 : 0;
                s.level[RS_LEVEL_AVAILABLE] = 0;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = i % 2 ? UINT64_MAX - i : i * UINT64_C(1000000000);
                s.counter[RS_COUNTER_SWAP_IN] = (uint64_t) i << 40;
                s.counter[RS_COUNTER_OOM_KILLS] = i > 20 ? i : 0;
                rs_guest_feed(g, &s, (uint64_t) (i + 1) * 10 * USEC_PER_SEC);
                rs_guest_decide(g, (uint64_t) (i + 1) * 10 * USEC_PER_SEC, &d);
                ck_assert_uint_le(d.target, 1 * GIB);
                ck_assert_uint_ge(d.target, 256 * MIB);
                ck_assert_uint_eq(d.max, 1 * GIB);
                ck_assert(!rs_known(d.estimate) || d.estimate <= 1 * GIB);
                ck_assert(!rs_known(rs_guest_hold_size(g)) || rs_guest_hold_size(g) <= 1 * GIB);
        }
        rs_guest_free(g);
}
END_TEST

static RsGuest *converged_guest(const RsPolicy *p, GuestModel *m) {
        GuestModelConfig cfg;
        ScenarioSpec spec;
        RsGuest *g;
        RsDecision d;

        scenario_config(SCENARIO_STEADY_ANON, 1, false, &cfg, &spec);
        guest_model_init(m, &cfg);
        ck_assert_int_eq(rs_guest_new(&g, p, cfg.boot_bytes), 0);
        for (unsigned i = 0; i < 150; i++) {
                RsSample s;
                guest_model_sample(m, &s);
                rs_guest_feed(g, &s, m->now_usec);
                rs_guest_decide(g, m->now_usec, &d);
                guest_model_set_target(m, d.target);
                guest_model_step(m);
        }
        return g;
}

/* Its snapshot resumes it: the same target and estimate, holding. */
START_TEST(test_snapshot_round_trip) {
        RsPolicy p;
        GuestModel m;
        RsGuestSnapshot snap;
        RsDecision before, after;
        RsGuest *g2;

        cost_policy(&p);
        RsGuest *g = converged_guest(&p, &m);
        rs_guest_decide(g, m.now_usec, &before);
        rs_guest_snapshot(g, &snap);
        ck_assert_uint_eq(snap.magic, RS_SNAPSHOT_COST_MAGIC);
        ck_assert(rs_known(snap.estimate) && rs_known(snap.target));
        ck_assert_uint_gt(snap.last_within, 0);

        ck_assert_int_eq(rs_guest_new(&g2, &p, m.cfg.boot_bytes), 0);
        ck_assert_int_eq(rs_guest_restore(g2, &snap, 1), 0);
        rs_guest_decide(g2, 1, &after);
        ck_assert_uint_eq(after.target, before.target);
        ck_assert_uint_eq(rs_guest_estimate(g2)->estimate, MIN(snap.estimate, after.max));
        ck_assert_int_eq(after.state, RS_STATE_HOLD);
        /* the cliff it found is kept, shown as the estimate's bounds */
        ck_assert(rs_known(snap.lower) && rs_known(snap.upper) && snap.lower < snap.upper);
        ck_assert_uint_eq(rs_guest_estimate(g2)->lower, snap.lower);
        ck_assert_uint_eq(rs_guest_estimate(g2)->upper, snap.upper);
        ck_assert_uint_eq(rs_guest_estimate(g)->lower, snap.lower);
        /* and the resumed controller judges from there: the next samples keep it within its bounds */
        for (unsigned i = 0; i < 30; i++) {
                RsSample s;
                guest_model_sample(&m, &s);
                rs_guest_feed(g2, &s, m.now_usec);
                rs_guest_decide(g2, m.now_usec, &after);
                ck_assert_uint_ge(after.target, guest_model_working_set(&m));
                guest_model_set_target(&m, after.target);
                guest_model_step(&m);
        }

        /* another guest size: refused, the guest as it was */
        RsGuest *g3;
        ck_assert_int_eq(rs_guest_new(&g3, &p, 2 * m.cfg.boot_bytes), 0);
        ck_assert_int_eq(rs_guest_restore(g3, &snap, 1), -EINVAL);
        ck_assert_int_eq(rs_guest_state(g3), RS_STATE_LEARN);
        rs_guest_free(g3);
        rs_guest_free(g2);
        rs_guest_free(g);
}
END_TEST

/* Neither core reads the other's snapshot: -EXDEV (the daemon discards the file with one line),
 * and the guest is left as it was. */
START_TEST(test_other_core_snapshot_refused) {
        RsPolicy cost, probe;
        GuestModel m1, m2;
        RsGuestSnapshot cs, ps;
        RsDecision d;

        cost_policy(&cost);
        probe = cost;
        probe.core = RS_CORE_PROBE;
        RsGuest *gc = converged_guest(&cost, &m1), *gp = converged_guest(&probe, &m2);
        rs_guest_snapshot(gc, &cs);
        rs_guest_snapshot(gp, &ps);
        ck_assert_uint_eq(ps.magic, RS_SNAPSHOT_MAGIC);

        RsGuest *fresh_cost, *fresh_probe;
        ck_assert_int_eq(rs_guest_new(&fresh_cost, &cost, m1.cfg.boot_bytes), 0);
        ck_assert_int_eq(rs_guest_new(&fresh_probe, &probe, m1.cfg.boot_bytes), 0);
        ck_assert_int_eq(rs_guest_restore(fresh_cost, &ps, 1), -EXDEV);
        ck_assert_int_eq(rs_guest_restore(fresh_probe, &cs, 1), -EXDEV);
        ck_assert_int_eq(rs_guest_state(fresh_cost), RS_STATE_LEARN);
        ck_assert_int_eq(rs_guest_state(fresh_probe), RS_STATE_LEARN);
        ck_assert(!rs_known(rs_guest_estimate(fresh_cost)->estimate));
        ck_assert(!rs_known(rs_guest_estimate(fresh_probe)->estimate));
        rs_guest_decide(fresh_cost, 1, &d);
        ck_assert_uint_eq(d.target, d.max);
        rs_guest_free(fresh_cost);
        rs_guest_free(fresh_probe);
        rs_guest_free(gc);
        rs_guest_free(gp);
}
END_TEST

/* A reload that switches the core: to cost, the controller decides from the next sample; back to
 * probe, the probe learns afresh; new tunables keep the controller where it was. The controller
 * never probes on request. */
START_TEST(test_policy_switch) {
        RsPolicy cost, probe;
        GuestModel m;
        RsDecision d;

        cost_policy(&cost);
        probe = cost;
        probe.core = RS_CORE_PROBE;
        RsGuest *g = converged_guest(&cost, &m);
        rs_guest_decide(g, m.now_usec, &d);
        uint64_t held = d.target;
        ck_assert_int_eq(rs_guest_probe_now(g, m.now_usec), -EOPNOTSUPP);

        RsPolicy tuned = cost;
        tuned.cost_window_usec = 60 * USEC_PER_SEC;
        ck_assert_int_eq(rs_guest_set_policy(g, &tuned), 0);
        rs_guest_decide(g, m.now_usec, &d);
        ck_assert_uint_eq(d.target, held);
        ck_assert_int_eq(rs_guest_policy(g)->cost_window_usec, 60 * USEC_PER_SEC);

        ck_assert_int_eq(rs_guest_set_policy(g, &probe), 0);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_LEARN);
        ck_assert_int_eq(rs_guest_policy(g)->core, RS_CORE_PROBE);
        RsGuestSnapshot s;
        rs_guest_snapshot(g, &s);
        ck_assert_uint_eq(s.magic, RS_SNAPSHOT_MAGIC);

        ck_assert_int_eq(rs_guest_set_policy(g, &cost), 0);
        rs_guest_snapshot(g, &s);
        ck_assert_uint_eq(s.magic, RS_SNAPSHOT_COST_MAGIC);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_LEARN);

        RsPolicy bad = cost;
        bad.cost_target_percent = 0;
        ck_assert_int_eq(rs_guest_set_policy(g, &bad), -EINVAL);
        ck_assert_double_eq(rs_guest_policy(g)->cost_target_percent, cost.cost_target_percent);
        rs_guest_free(g);
}
END_TEST

/* The zones' watermarks the agent read (/proc/zoneinfo) reach the controller: a cache-full
 * 1 GiB guest with THP, whose MemAvailable counts its cache and so shows none of its 69 MiB
 * reserve, starts at what it uses plus that reserve, not plus the boot default's 6 MiB. */
static uint64_t start_target(bool zoneinfo) {
        RsPolicy p;
        RsGuest *g;
        RsDecision d;
        cost_policy(&p);
        ck_assert_int_eq(rs_guest_new(&g, &p, 1 * GIB), 0);
        for (int i = 0; i < 2; i++) {
                RsSample s;
                rs_sample_init(&s);
                s.level[RS_LEVEL_TOTAL] = 1 * GIB - 75 * MIB;
                s.level[RS_LEVEL_FREE] = 120 * MIB;
                s.level[RS_LEVEL_AVAILABLE] = 600 * MIB;
                s.level[RS_LEVEL_BALLOON_ACTUAL] = 1 * GIB;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = 0;
                if (zoneinfo) {
                        s.level[RS_LEVEL_WMARK_MIN] = 47 * MIB;
                        s.level[RS_LEVEL_WMARK_LOW] = 58 * MIB;
                        s.level[RS_LEVEL_WMARK_HIGH] = 69 * MIB;
                }
                rs_guest_feed(g, &s, (uint64_t) (i + 1) * 10 * USEC_PER_SEC);
        }
        rs_guest_decide(g, 20 * USEC_PER_SEC, &d);
        rs_guest_free(g);
        return d.target;
}

START_TEST(test_zoneinfo_watermarks) {
        ck_assert_uint_eq(start_target(true), 1 * GIB - 120 * MIB + 69 * MIB);
        ck_assert(start_target(false) < 1 * GIB - 120 * MIB + 10 * MIB);
}
END_TEST

int main(void) {
        return check_run_case("guest-cost", "guest-cost", NULL, NULL, 0,
                              CHECK_TESTS(test_converges_on_steady_anon, test_lying_guest_keeps_bounds,
                                          test_snapshot_round_trip, test_other_core_snapshot_refused,
                                          test_policy_switch, test_zoneinfo_watermarks));
}
