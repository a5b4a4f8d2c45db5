/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The cost controller's pieces, by hand-made samples: the cost from PSI and from faults, the
 * window's rest, what a size costs (a step's passing stall by the level it decays to), the
 * start size, the kernel's watermarks, and the law's directions (a guest within target gives,
 * one over it gets, an OOM kill sends it to max), a cliff remembered, a growing set loosened
 * every interval, and a stream's host reads told from the floor by their own spread.
 * Its figures on guest model v2 are test-controller-property's. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#include "common/macro.h"
#include "policies/controller.h"
#include "tests/lib/check-run.h"

#define SEC USEC_PER_SEC

START_TEST(test_cost_from_psi_and_faults) {
        RsRates r = { .interval_sec = 10 };
        RsCostInterval ci;

        r.known[RS_COUNTER_PSI_SOME_TOTAL] = true;
        r.per_sec[RS_COUNTER_PSI_SOME_TOTAL] = 2000; /* 2 ms a second */
        r.known[RS_COUNTER_MAJOR_FAULTS] = true;
        r.per_sec[RS_COUNTER_MAJOR_FAULTS] = 1e6;    /* PSI wins wherever it is */
        rs_cost_interval(&r, 250e-6, 250e-6, 0, &ci);
        ck_assert_int_eq(ci.source, RS_COST_PSI);
        ck_assert(fabs(ci.stall - 0.002) < 1e-12);

        r.known[RS_COUNTER_PSI_SOME_TOTAL] = false;
        r.per_sec[RS_COUNTER_MAJOR_FAULTS] = 10;
        r.known[RS_COUNTER_SWAP_IN] = true;
        r.per_sec[RS_COUNTER_SWAP_IN] = 8 * 4096; /* a swap-in is a major fault: the larger, not the sum */
        rs_cost_interval(&r, 100e-6, 100e-6, 0, &ci);
        ck_assert_int_eq(ci.source, RS_COST_ESTIMATED);
        ck_assert(fabs(ci.stall - 10 * 100e-6) < 1e-12);

        /* host reads above the floor count; the guest's own faults always do */
        r.known[RS_COUNTER_HOST_DISK_READ] = true;
        r.per_sec[RS_COUNTER_HOST_DISK_READ] = 1000 * 4096.0;
        rs_cost_interval(&r, 100e-6, 100e-6, 900, &ci);
        ck_assert(fabs(ci.stall - 100 * 100e-6) < 1e-12);
        rs_cost_interval(&r, 100e-6, 100e-6, 2000, &ci);
        ck_assert(fabs(ci.stall - 10 * 100e-6) < 1e-12);

        /* host reads cost a request's latency per request: 100 pages/s above the floor in
         * 32 KiB requests are 12.5 requests a second, a fault's worth each */
        rs_cost_interval(&r, 100e-6, 100e-6 / 8, 900, &ci);
        ck_assert(fabs(ci.stall - 12.5 * 100e-6) < 1e-12);
        r.per_sec[RS_COUNTER_MAJOR_FAULTS] = 20; /* the faults say more */
        rs_cost_interval(&r, 100e-6, 100e-6 / 8, 900, &ci);
        ck_assert(fabs(ci.stall - 20 * 100e-6) < 1e-12);

        r.interval_sec = 0;
        rs_cost_interval(&r, 100e-6, 100e-6, 0, &ci);
        ck_assert_int_eq(ci.source, RS_COST_NONE);
}
END_TEST

START_TEST(test_window_rest_is_lowest_within_window) {
        RsCostWindow w;
        rs_cost_window_init(&w, 30);
        ck_assert(rs_cost_window_rest(&w, 0) < 0);
        rs_cost_window_add(&w, 0.0001, 10, 10 * SEC);
        rs_cost_window_add(&w, 0.02, 10, 20 * SEC);   /* a step's passing refaults */
        rs_cost_window_add(&w, 0.0002, 10, 30 * SEC);
        ck_assert(rs_cost_window_rest(&w, 30 * SEC) == 0.0001);
        ck_assert(w.mean > 0.0001);
        rs_cost_window_add(&w, 0.01, 10, 40 * SEC);
        rs_cost_window_add(&w, 0.01, 10, 50 * SEC);
        rs_cost_window_add(&w, 0.01, 10, 60 * SEC);
        rs_cost_window_add(&w, 0.01, 10, 70 * SEC);
        /* every interval of the window over: the size itself stalls */
        ck_assert(rs_cost_window_rest(&w, 70 * SEC) == 0.01);
}
END_TEST

/* What a size costs, from its own intervals: a steady cost at once, a geometric decay (a
 * step's collateral coming back) by the level it tends to, and nothing from two falling. */
START_TEST(test_window_settled) {
        RsCostWindow w;
        bool passing;
        rs_cost_window_init(&w, 30);
        rs_cost_window_add(&w, 0.0001, 10, 10 * SEC); /* before the move */
        rs_cost_window_add(&w, 0.02, 10, 20 * SEC);   /* the move's interval */
        ck_assert(rs_cost_window_settled(&w, 20 * SEC, &passing) < 0);
        rs_cost_window_add(&w, 0.021, 10, 30 * SEC);
        /* not falling: the size's own cost, judged after two intervals, not a window */
        ck_assert(rs_cost_window_settled(&w, 20 * SEC, &passing) == 0.02);
        ck_assert(!passing);

        /* a decay toward 0.0002 by half each interval: the limit, not the newest */
        rs_cost_window_init(&w, 30);
        rs_cost_window_add(&w, 0.0002 + 0.008, 10, 10 * SEC);
        rs_cost_window_add(&w, 0.0002 + 0.004, 10, 20 * SEC);
        ck_assert(rs_cost_window_settled(&w, 10 * SEC, &passing) < 0);
        rs_cost_window_add(&w, 0.0002 + 0.002, 10, 30 * SEC);
        double settled = rs_cost_window_settled(&w, 10 * SEC, &passing);
        ck_assert(passing);
        ck_assert(fabs(settled - 0.0002) < 1e-9);
        /* an interval before the move does not count */
        ck_assert(rs_cost_window_settled(&w, 20 * SEC, &passing) < 0);

        /* a straight fall is no decay toward a level: the newest */
        rs_cost_window_init(&w, 30);
        rs_cost_window_add(&w, 0.006, 10, 10 * SEC);
        rs_cost_window_add(&w, 0.004, 10, 20 * SEC);
        rs_cost_window_add(&w, 0.002, 10, 30 * SEC);
        ck_assert(rs_cost_window_settled(&w, 0, &passing) == 0.002);
        ck_assert(!passing);
        /* noise on a steady cost that looks like a slow decay: no further down than it fell */
        rs_cost_window_init(&w, 30);
        rs_cost_window_add(&w, 0.0100, 10, 10 * SEC);
        rs_cost_window_add(&w, 0.0095, 10, 20 * SEC);
        rs_cost_window_add(&w, 0.0091, 10, 30 * SEC);
        settled = rs_cost_window_settled(&w, 0, &passing);
        ck_assert(settled >= 0.0091 - 0.0009 - 1e-12);
        /* falling: the newest interval at the size lower than the one before */
        ck_assert(rs_cost_window_falling(&w, 0));
        ck_assert(!rs_cost_window_falling(&w, 30 * SEC)); /* one interval at the size */
        rs_cost_window_add(&w, 0.0091, 10, 40 * SEC);
        ck_assert(!rs_cost_window_falling(&w, 0));
}
END_TEST

START_TEST(test_watermarks_and_start) {
        uint64_t min, low, high;
        rs_watermarks_default(1 * GIB, &min, &low, &high);
        /* sqrt(16 x 1 GiB in KiB) = 4096 KiB; the step max(1024 KiB, 1048.576 KiB) */
        ck_assert_uint_eq(min, 4096 * KIB);
        ck_assert(low > min && high > low);
        ck_assert_uint_eq(rs_controller_start_size(1 * GIB, 300 * MIB, 10 * MIB), 1 * GIB - 290 * MIB);
        ck_assert_uint_eq(rs_controller_start_size(1 * GIB, 5 * MIB, 10 * MIB), 1 * GIB);
        ck_assert_uint_eq(rs_controller_start_size(1 * GIB, RS_UNKNOWN, 10 * MIB), RS_UNKNOWN);
}
END_TEST

/* The reserves a guest's MemAvailable shows: the 1 GiB test guest with transparent huge pages
 * (min_free_kbytes raised for them), 300 MiB of anonymous memory, as /proc/meminfo and
 * /proc/zoneinfo read there: MemFree 574,280 kB, MemAvailable 507,780 kB, the zones' high
 * watermarks 16,893 pages (66 MiB; the boot default would be 6 MiB). The start counts that
 * free memory as the kernel's, not as room: 1 GiB - 561 MiB + 65 MiB, not + 6 MiB. And held at
 * a size where that reserve is all the free it keeps, a stalling guest is loosened from its
 * whole size. */
START_TEST(test_reserves_from_available) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        RsSample s;
        const uint64_t total = 1024 * MIB - 75 * MIB, free = 574280 * KIB, avail = 507780 * KIB;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 1 * GIB), 0);
        for (int i = 0; i < 2; i++) {
                rs_sample_init(&s);
                s.level[RS_LEVEL_TOTAL] = total;
                s.level[RS_LEVEL_FREE] = free;
                s.level[RS_LEVEL_AVAILABLE] = avail;
                s.level[RS_LEVEL_BALLOON_ACTUAL] = 1 * GIB;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = 0;
                rs_controller_feed(c, &s, (uint64_t) (i + 1) * 10 * SEC);
        }
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_START);
        ck_assert_uint_eq(d.target, 1 * GIB - free + (free - avail));
        ck_assert_uint_eq(d.target, 1 * GIB - avail);

        /* Without MemAvailable, the boot default: the same free memory is room. */
        rs_controller_free(c);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 1 * GIB), 0);
        for (int i = 0; i < 2; i++) {
                rs_sample_init(&s);
                s.level[RS_LEVEL_TOTAL] = total;
                s.level[RS_LEVEL_FREE] = free;
                s.level[RS_LEVEL_BALLOON_ACTUAL] = 1 * GIB;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = 0;
                rs_controller_feed(c, &s, (uint64_t) (i + 1) * 10 * SEC);
        }
        rs_controller_decide(c, &d);
        ck_assert(d.target < 1 * GIB - avail - 50 * MIB);

        /* A guest that claims a reserve past a quarter of itself (within what the sample's
         * sanitizing lets through) moves its start no further. */
        rs_controller_free(c);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 1 * GIB), 0);
        for (int i = 0; i < 2; i++) {
                rs_sample_init(&s);
                s.level[RS_LEVEL_TOTAL] = total;
                s.level[RS_LEVEL_FREE] = 360 * MIB;
                s.level[RS_LEVEL_AVAILABLE] = 120 * MIB;
                s.level[RS_LEVEL_BALLOON_ACTUAL] = 1 * GIB;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = 0;
                rs_controller_feed(c, &s, (uint64_t) (i + 1) * 10 * SEC);
        }
        rs_controller_decide(c, &d);
        ck_assert_uint_eq(d.target, 1 * GIB - 360 * MIB + total / 4);
        rs_controller_free(c);
}
END_TEST

typedef struct Fake {
        RsSample s;
        double psi_usec, majflt, ooms;
        uint64_t now;
} Fake;

static void fake_sample(Fake *f, uint64_t size, uint64_t free, double stall, bool agent) {
        rs_sample_init(&f->s);
        f->now += 10 * SEC;
        f->psi_usec += stall * 10 * 1e6;
        f->majflt += stall * 10 / 250e-6;
        f->s.level[RS_LEVEL_TOTAL] = size;
        f->s.level[RS_LEVEL_FREE] = free;
        f->s.level[RS_LEVEL_BALLOON_ACTUAL] = size;
        f->s.counter[RS_COUNTER_MAJOR_FAULTS] = (uint64_t) f->majflt;
        f->s.counter[RS_COUNTER_OOM_KILLS] = (uint64_t) f->ooms;
        if (agent)
                f->s.counter[RS_COUNTER_PSI_SOME_TOTAL] = (uint64_t) f->psi_usec;
}

START_TEST(test_law_directions) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        Fake f = { .now = 0 };
        bool agent = _i;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);

        /* one interval at max first (the reads made there are the stream floor) */
        fake_sample(&f, 4 * GIB, 2 * GIB, 0, agent);
        rs_controller_feed(c, &f.s, f.now);
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_WAIT);
        ck_assert_uint_eq(d.target, d.max);
        /* start: what is used plus the watermarks */
        fake_sample(&f, 4 * GIB, 2 * GIB, 0, agent);
        rs_controller_feed(c, &f.s, f.now);
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_START);
        ck_assert(d.target < 2300 * MIB && d.target > 2 * GIB);

        /* within target: it tightens, slowly */
        uint64_t size = d.target;
        for (int i = 0; i < 6; i++) {
                fake_sample(&f, size, 16 * MIB, 0, agent);
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                ck_assert_int_eq(d.action, RS_CONTROL_TIGHTEN);
                ck_assert(d.target < size && d.target > size * 0.98);
                size = d.target;
        }
        uint64_t within = size;

        /* a stall at every interval of the window: it loosens, urgently, in proportion */
        for (int i = 0; i < 4; i++) {
                fake_sample(&f, size, 16 * MIB, 0.01, agent);
                rs_controller_feed(c, &f.s, f.now);
        }
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_LOOSEN);
        ck_assert(d.urgent);
        ck_assert(d.target > size);
        ck_assert_int_eq(d.source, agent ? RS_COST_PSI : RS_COST_ESTIMATED);

        /* an OOM kill: max (what the killed set needs is not known, and a second kill is worse
         * than any size) */
        f.ooms++;
        fake_sample(&f, size, 16 * MIB, 0.01, agent);
        rs_controller_feed(c, &f.s, f.now);
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_EMERGENCY);
        ck_assert(d.target > within);
        ck_assert_uint_eq(d.target, d.max);
        rs_controller_free(c);
}
END_TEST

/* Starts a controller and tightens it a few intervals at zero cost; returns the size. */
static uint64_t started(RsController *c, Fake *f, bool agent) {
        RsControllerDecision d;
        fake_sample(f, 4 * GIB, 2 * GIB, 0, agent);
        rs_controller_feed(c, &f->s, f->now);
        fake_sample(f, 4 * GIB, 2 * GIB, 0, agent);
        rs_controller_feed(c, &f->s, f->now);
        rs_controller_decide(c, &d);
        uint64_t size = d.target;
        for (int i = 0; i < 4; i++) {
                fake_sample(f, size, 16 * MIB, 0, agent);
                rs_controller_feed(c, &f->s, f->now);
                rs_controller_decide(c, &d);
                size = d.target;
        }
        return size;
}

/* A step's passing stall (hot pages its reclaim took, coming back at a decaying rate, here
 * for longer than the window) is not the size's cost: no loosening, and the tightening goes
 * on once the decay says where it settles. The same stall held steady is the size's: it is
 * loosened after two intervals at it. */
START_TEST(test_passing_stall) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        Fake f = { .now = 0 };
        bool agent = _i;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
        uint64_t size = started(c, &f, agent) - 64 * MIB; /* a step the balloon takes */
        double stall = 0.008;
        bool tightened = false;
        for (int i = 0; i < 8; i++, stall *= 0.7) {
                fake_sample(&f, size, 16 * MIB, stall, agent);
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                ck_assert_int_ne(d.action, RS_CONTROL_LOOSEN);
                /* judged passing by the fourth interval; by the sixth the brake it put on the
                 * tightening is gone, though the stall is still over target */
                if (i >= 5 && d.action == RS_CONTROL_TIGHTEN && d.target < size * 0.995)
                        tightened = true;
        }
        ck_assert(tightened);
        rs_controller_free(c);

        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
        f = (Fake) { .now = 0 };
        size = started(c, &f, agent) - 64 * MIB;
        fake_sample(&f, size, 16 * MIB, 0.008, agent);
        rs_controller_feed(c, &f.s, f.now);
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_WAIT); /* the move's own interval: not judged */
        fake_sample(&f, size, 16 * MIB, 0.008, agent);
        rs_controller_feed(c, &f.s, f.now);
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_LOOSEN);
        ck_assert(d.target > size);
        rs_controller_free(c);
}
END_TEST

/* MGLRU's old generations are not where the guest starts: old file pages never, old
 * anonymous ones only where swap lets them leave. */
START_TEST(test_start_less_old_generations) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        bool swap = _i;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
        uint64_t started[2];
        for (int with_gens = 0; with_gens < 2; with_gens++) {
                Fake f = { .now = with_gens * 1000 * SEC };
                rs_controller_free(c);
                ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
                for (int i = 0; i < 2; i++) {
                        fake_sample(&f, 4 * GIB, 1 * GIB, 0, true);
                        f.s.level[RS_LEVEL_AVAILABLE] = 2 * GIB;
                        f.s.level[RS_LEVEL_SWAP_TOTAL] = f.s.level[RS_LEVEL_SWAP_FREE] = swap ? 4 * GIB : 0;
                        if (with_gens) {
                                f.s.level[RS_LEVEL_FILE_OLD] = 500 * MIB;
                                f.s.level[RS_LEVEL_ANON_OLD] = 700 * MIB;
                        }
                        rs_controller_feed(c, &f.s, f.now);
                }
                rs_controller_decide(c, &d);
                ck_assert_int_eq(d.action, RS_CONTROL_START);
                started[with_gens] = d.target;
        }
        /* less the old pages, with the margin on what is left (the bet may be wrong) */
        double expect = ((double) started[0] - (swap ? 1200 : 500) * (double) MIB) * (1 + cp.margin);
        ck_assert_msg(fabs((double) started[1] - expect) < 2 * MIB, "started at %.0f MiB, not %.0f",
                      (double) started[1] / MIB, expect / MIB);
        rs_controller_free(c);
}
END_TEST

/* A guest that cannot swap shows no cost for the anonymous memory it cannot give: it is held
 * above it by the margin and what it grows by, and a growth that eats half the headroom is an
 * emergency before the OOM killer's. Without its swap levels it learns it at the edge. */
START_TEST(test_no_swap_headroom) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        Fake f = { .now = 0 };
        bool levels = _i;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
        uint64_t size = 4 * GIB, need = 1 * GIB;
        for (int i = 0; i < 200; i++) {
                uint64_t avail = size > need ? size - need : 0;
                fake_sample(&f, size, MIN(avail, 64 * MIB), 0, true);
                f.s.level[RS_LEVEL_AVAILABLE] = avail;
                if (levels)
                        f.s.level[RS_LEVEL_SWAP_TOTAL] = f.s.level[RS_LEVEL_SWAP_FREE] = 0;
                /* the balloon stops short of what the guest cannot give */
                f.s.level[RS_LEVEL_BALLOON_TARGET] = size;
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                if (d.target < need + 4 * MIB) {
                        f.s.level[RS_LEVEL_BALLOON_TARGET] = d.target;
                        size = need + 4 * MIB;
                } else
                        size = d.target;
        }
        /* held at what it cannot give plus the margin, its estimate that */
        ck_assert(size >= need * 1.09 && size <= need * 1.12);
        ck_assert(d.estimate > need * 0.97 && d.estimate < need * 1.03);

        /* it grows 5 MiB a second (half its margin an interval): met at once, with two intervals of
         * growth added to the headroom */
        bool emergency = false;
        for (int i = 0; i < 6; i++) {
                need += 50 * MIB;
                uint64_t avail = size > need ? size - need : 0;
                ck_assert_msg(avail > 0, "grew past its size at step %d", i);
                fake_sample(&f, size, MIN(avail, 64 * MIB), 0, true);
                f.s.level[RS_LEVEL_AVAILABLE] = avail;
                if (levels)
                        f.s.level[RS_LEVEL_SWAP_TOTAL] = f.s.level[RS_LEVEL_SWAP_FREE] = 0;
                f.s.level[RS_LEVEL_BALLOON_TARGET] = size;
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                emergency |= d.action == RS_CONTROL_EMERGENCY;
                ck_assert(d.urgent);
                size = d.target;
        }
        ck_assert(emergency);
        ck_assert(size > need * 1.1 + 50 * MIB);
        rs_controller_free(c);
}
END_TEST

/* A guest whose cost jumps below a size (a loop larger than what is left: a cliff), the
 * balloon reaching every target at once. The controller crosses the cliff once, goes back to
 * the size within target above it plus the margin and stays there for the verdict's life:
 * finding the cliff again every window is what a uniform loop's cost was. */
START_TEST(test_cliff_remembered) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        Fake f = { .now = 0 };
        bool agent = _i;
        const uint64_t cliff = 1500 * MIB;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
        uint64_t size = started(c, &f, agent);
        rs_controller_decide(c, &d);
        unsigned crossings = 0, below = 0;
        uint64_t first_crossing = 0;
        for (unsigned i = 0; f.now < cp.verdict_expiry_sec * SEC; i++) {
                bool under = size < cliff;
                if (under && below == 0) {
                        crossings++;
                        if (!first_crossing)
                                first_crossing = f.now;
                }
                below = under ? below + 1 : 0;
                fake_sample(&f, size, 16 * MIB, under ? 0.3 : 0, agent);
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                size = d.target;
        }
        ck_assert_msg(first_crossing > 0, "never reached the cliff");
        ck_assert_msg(crossings == 1, "crossed the cliff %u times", crossings);
        /* held above it by the margin, its estimate the size within target */
        ck_assert_msg(size >= cliff * (1 + cp.margin) && size <= cliff * (1 + cp.margin) * 1.02, "held at %.0f MiB",
                      (double) size / MIB);
        ck_assert(d.estimate >= cliff && d.estimate <= cliff * 1.02);
        rs_controller_free(c);
}
END_TEST

/* A small tighten step: its reclaim stalls the move's own interval (the burst), then the hot
 * pages it took come back, a little over target for an interval or two and falling. That is
 * the step's passing stall, not a cliff: a cliff is confirmed by a cost that stays over target
 * for a window at its size (a loop larger than what is left thrashes as long as it is there).
 * Judged from the first three intervals (the burst's included) it looked like a level 1.5
 * times the target, a cliff, and held the guest a margin above the last size within target
 * for verdict_expiry_sec. No such hold, and the tightening goes on. */
START_TEST(test_no_cliff_from_a_passing_stall) {
        static const double stall[] = { 0.006, 0.0018, 0.0015, 0.0009, 0.0005, 0.0003, 0.0002, 0.0001, 0, 0, 0, 0 };
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        Fake f = { .now = 0 };
        bool agent = _i;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
        uint64_t within = started(c, &f, agent);
        fake_sample(&f, within, 16 * MIB, 0, agent);
        rs_controller_feed(c, &f.s, f.now);
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_TIGHTEN);
        uint64_t size = d.target, highest = 0;
        for (size_t i = 0; i < ARRAY_SIZE(stall); i++) {
                fake_sample(&f, size, 16 * MIB, stall[i], agent);
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                highest = MAX(highest, d.target);
                size = d.target;
        }
        ck_assert_msg(highest < within * (1 + cp.margin / 2), "held at %.0f MiB after a step from %.0f MiB",
                      (double) highest / MIB, (double) within / MIB);
        ck_assert_msg(size < within, "not tightening again: %.0f MiB", (double) size / MIB);
        rs_controller_free(c);
}
END_TEST

/* A set that grows past the guest's size while it is loosened: a deflation forces no
 * reclaim, so a stall that did not fall after one is the size's, and the guest is loosened
 * at every interval, not every other one. */
START_TEST(test_growth_loosened_every_interval) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        Fake f = { .now = 0 };
        bool agent = _i;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
        uint64_t size = started(c, &f, agent);
        double need = (double) size;
        unsigned loosened = 0, judged = 0;
        bool grown = false;
        for (int i = 0; i < 16; i++) {
                if (i < 6)
                        need += 300 * MIB; /* 30 MiB a second, for a minute */
                fake_sample(&f, size, 16 * MIB, (double) size < need ? 0.3 : 0, agent);
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                /* The first stall after a tighten step may be the step's, and one found right
                 * after a step is a cliff, judged back above it as a step's passing stall. Once
                 * the law loosens for a growth, every interval short of the set is loosened. */
                if (grown && (double) size < need) {
                        judged++;
                        loosened += d.action == RS_CONTROL_LOOSEN;
                }
                grown |= d.action == RS_CONTROL_LOOSEN && !strstr(d.reason, "cliff");
                size = d.target;
        }
        ck_assert(judged >= 1);
        ck_assert_msg(loosened == judged, "loosened %u of %u intervals short of the set", loosened, judged);
        ck_assert_msg((double) size >= need, "%.0f MiB against a set of %.0f", (double) size / MIB, need / MIB);
        rs_controller_free(c);
}
END_TEST

/* Pages a deflation frees park on the guest's per-CPU free lists first, outside its free
 * memory count (up to the low watermarks): read from /proc/zoneinfo (RS_LEVEL_PCP_FREE) they
 * are free memory, and what the guest uses does not jump by them after the deflation. Read
 * as use, the jump is growth the next loosening gives twice its size for, and the next
 * deflation parks more (the distro guest's loosening ran 699 -> 842 MiB in 10 s that way). */
START_TEST(test_per_cpu_lists_not_growth) {
        uint64_t target[2];
        const uint64_t lists = 40 * MIB;
        for (int known = 0; known < 2; known++) {
                RsPolicy p;
                RsControllerParams cp;
                RsController *c;
                RsControllerDecision d;
                Fake f = { .now = 0 };
                rs_policy_init(&p);
                rs_controller_params_init(&cp, &p);
                ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), 0);
                uint64_t size = started(c, &f, true);
                for (int i = 0; i < 4; i++) {
                        fake_sample(&f, size, 16 * MIB, 0.01, true);
                        rs_controller_feed(c, &f.s, f.now);
                }
                rs_controller_decide(c, &d);
                ck_assert_int_eq(d.action, RS_CONTROL_LOOSEN);
                uint64_t gave = d.target - size;
                ck_assert_uint_gt(gave, lists);
                /* deflated: the lists took 40 MiB of it, free memory shows the rest */
                fake_sample(&f, d.target, 16 * MIB + gave - lists, 0.01, true);
                if (known)
                        f.s.level[RS_LEVEL_PCP_FREE] = lists;
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                ck_assert_int_eq(d.action, RS_CONTROL_LOOSEN);
                target[known] = d.target;
                if (known) /* nothing grew: from what it used before, not beyond */
                        ck_assert_uint_le(d.target, (uint64_t) ((double) (size + gave) * 1.001));
                rs_controller_free(c);
        }
        /* unknown, the 40 MiB read as use that grew in one interval: given about three times over */
        ck_assert_uint_ge(target[0], target[1] + 2 * lists);
}
END_TEST

/* Without the agent: a guest beside a stream of 12,800 pages/s whose host reads jitter by
 * a few percent (a few hundred pages a second: thirty times the cost target at a fault's
 * latency), and a hot set of file pages read() back above a size, which only the host reads
 * show (read() refaults are not major faults). The jitter is not cost: the guest is brought
 * down to its set, not loosened back to max at every interval; the hot set's refaults, far
 * above the jitter, are; and the floor, a verdict, is learned again at max when it expires,
 * the guest going back to its size after. */
START_TEST(test_stream_host_reads) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        Fake f = { .now = 0 };
        const uint64_t set = 1200 * MIB, guest = 4 * GIB;
        double reads = 0;
        uint64_t x = 1;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, guest), 0);
        uint64_t size = guest;
        unsigned at_max = 0, relearned = 0;
        bool was_at_max = true;
        for (unsigned i = 0; i < 720; i++) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                double jitter = ((double) (x >> 11) / 9007199254740992.0 * 2 - 1) * 0.05;
                double pages = 12800 * (1 + jitter) + (size < set ? 5000 : 0);
                reads += pages * 10 * 4096;
                fake_sample(&f, size, 16 * MIB, 0, false);
                f.s.counter[RS_COUNTER_HOST_DISK_READ] = (uint64_t) reads;
                rs_controller_feed(c, &f.s, f.now);
                rs_controller_decide(c, &d);
                bool now_at_max = d.target >= guest;
                if (i > 10 && now_at_max && !was_at_max)
                        relearned++;
                was_at_max = now_at_max;
                at_max += i > 10 && now_at_max;
                size = d.target;
                if (i == 359) {
                        /* an hour in: down to its set, never back up for the jitter */
                        ck_assert_msg(size < set * 1.25, "held at %.0f MiB after an hour", (double) size / MIB);
                        ck_assert_uint_eq(at_max, 0);
                }
        }
        ck_assert(d.source == RS_COST_ESTIMATED);
        ck_assert(d.streaming);
        /* the hot set's refaults are cost: never held under it for long */
        ck_assert_msg(size >= set, "held at %.0f MiB, under the %.0f MiB set", (double) size / MIB, (double) set / MIB);
        /* the floor learned again once in the second hour, for two intervals */
        ck_assert_uint_eq(relearned, 1);
        ck_assert_uint_le(at_max, 3);
        rs_controller_free(c);
}
END_TEST

/* A guest without the agent, at 2 GiB of 4, whose every interval adds faults and host reads:
 * read requests of read_bytes each that took latency seconds apiece (-1: QEMU does not report
 * their count and time). Returns the decision. */
typedef struct Disk {
        RsController *c;
        uint64_t now;
        double faults, ops, time_ns, bytes;
} Disk;

static RsControllerDecision disk_interval(Disk *k, double faults, double reads, double read_bytes, double latency) {
        RsSample s;
        RsControllerDecision d;
        rs_sample_init(&s);
        k->now += 10 * SEC;
        k->faults += faults;
        s.level[RS_LEVEL_TOTAL] = 4 * GIB;
        s.level[RS_LEVEL_FREE] = 512 * MIB;
        s.level[RS_LEVEL_BALLOON_ACTUAL] = 2 * GIB;
        s.counter[RS_COUNTER_MAJOR_FAULTS] = (uint64_t) k->faults;
        if (latency >= 0) {
                k->ops += reads;
                k->time_ns += reads * latency * 1e9;
                k->bytes += reads * read_bytes;
                s.counter[RS_COUNTER_HOST_DISK_READ] = (uint64_t) k->bytes;
                s.counter[RS_COUNTER_HOST_DISK_READ_OPS] = (uint64_t) k->ops;
                s.counter[RS_COUNTER_HOST_DISK_READ_TIME] = (uint64_t) k->time_ns;
        }
        rs_controller_feed(k->c, &s, k->now);
        rs_controller_decide(k->c, &d);
        return d;
}

/* The cost without the agent is faults times the latency QEMU measured for the guest's reads,
 * averaged over the cost window; the tunable until then; a mean from too few reads, or out of
 * any disk's range, changes nothing. */
START_TEST(test_measured_latency) {
        RsPolicy p;
        RsControllerParams cp;
        RsControllerDecision d;
        Disk k = {};

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&k.c, &p, &cp, 4 * GIB), 0);
        d = disk_interval(&k, 0, 0, 0, -1);
        ck_assert_int_eq(d.action, RS_CONTROL_START);

        /* QEMU reports no read times: 100 faults a second at the tunable's 250 µs */
        d = disk_interval(&k, 1000, 0, 0, -1);
        ck_assert_int_eq(d.source, RS_COST_ESTIMATED);
        ck_assert(!d.latency_measured);
        ck_assert(fabs(d.fault_latency - 250e-6) < 1e-12);
        ck_assert(fabs(d.cost - 100 * 250e-6) < 1e-9);

        /* reads of 1 ms each: the first interval that has their rate sets the latency, and the
         * same faults cost four times as much (the counters' first report has no rate yet) */
        d = disk_interval(&k, 1000, 1000, 4096, 1e-3);
        ck_assert(!d.latency_measured);
        d = disk_interval(&k, 1000, 1000, 4096, 1e-3);
        ck_assert(d.latency_measured);
        ck_assert(fabs(d.fault_latency - 1e-3) < 1e-9);
        ck_assert(fabs(d.cost - 100 * 1e-3) < 1e-6);

        /* absurd means are ignored, each for what it would do: reads that took no time (every
         * fault free), a second each (every fault a stall), and 50 reads at 50 ms (a mean of
         * too few: an idle disk's metadata reads behind a flush) */
        static const struct {
                double reads, latency;
        } absurd[] = { { 1000, 0 }, { 1000, 1e-6 }, { 1000, 1.0 }, { 1000, 0.5 }, { 50, 50e-3 } };
        for (size_t i = 0; i < ARRAY_SIZE(absurd); i++) {
                d = disk_interval(&k, 1000, absurd[i].reads, 4096, absurd[i].latency);
                ck_assert_msg(fabs(d.fault_latency - 1e-3) < 1e-9, "%zu: %g s", i, d.fault_latency);
                ck_assert_msg(fabs(d.cost - 100 * 1e-3) < 1e-6, "%zu: cost %g", i, d.cost);
        }

        /* a slower disk moves it over the window (30 s): one 10 s interval a share 1 - e^(-1/3) */
        d = disk_interval(&k, 1000, 1000, 4096, 2e-3);
        double expect = 1e-3 + (1 - exp(-10.0 / 30.0)) * 1e-3;
        ck_assert(fabs(d.fault_latency - expect) < 1e-9);
        ck_assert(fabs(d.cost - 100 * expect) < 1e-6);
        /* ... and to it, held */
        for (int i = 0; i < 30; i++)
                d = disk_interval(&k, 1000, 1000, 4096, 2e-3);
        ck_assert(fabs(d.fault_latency - 2e-3) < 1e-6);
        ck_assert(fabs(d.cost - 100 * 2e-3) < 1e-4);

        /* the tunable is the fallback only: a QEMU that stops reporting keeps what it measured */
        d = disk_interval(&k, 1000, 0, 0, -1);
        ck_assert(d.latency_measured);
        rs_controller_free(k.c);
}
END_TEST

/* A read request carries readahead: the guest waits once for it, not once per page. Host reads
 * of 1,000 requests of 32 KiB an interval at 1 ms each cost 100 requests a second times 1 ms,
 * not their 800 pages a second. */
START_TEST(test_measured_latency_per_request) {
        RsPolicy p;
        RsControllerParams cp;
        RsControllerDecision d;
        Disk k = {};

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&k.c, &p, &cp, 4 * GIB), 0);
        d = disk_interval(&k, 0, 0, 0, 1e-3);
        ck_assert_int_eq(d.action, RS_CONTROL_START);
        d = disk_interval(&k, 0, 1000, 32768, 1e-3);
        ck_assert(d.latency_measured);
        ck_assert(fabs(d.cost - 100 * 1e-3) < 1e-6);
        /* the guest's own faults count a request each */
        d = disk_interval(&k, 2000, 1000, 32768, 1e-3);
        ck_assert(fabs(d.cost - 200 * 1e-3) < 1e-6);
        rs_controller_free(k.c);

        /* a QEMU claiming 64 MiB a request is held to 4 MiB: 100 of them an interval are
         * 163,840 pages a second at a 1,024th of a request each, not a 16,384th */
        k = (Disk) {};
        ck_assert_int_eq(rs_controller_new(&k.c, &p, &cp, 4 * GIB), 0);
        d = disk_interval(&k, 0, 0, 0, 1e-3);
        d = disk_interval(&k, 0, 100, 64.0 * MIB, 1e-3);
        ck_assert(d.latency_measured);
        ck_assert(fabs(d.cost - 163840 * 1e-3 / 1024) < 1e-6);
        rs_controller_free(k.c);
}
END_TEST

START_TEST(test_params_validated) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        const char *bad;
        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_params_validate(&cp, &bad), 0);
        cp.cost_target = 0;
        ck_assert_int_eq(rs_controller_params_validate(&cp, &bad), -EINVAL);
        ck_assert_str_eq(bad, "cost_target");
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 4 * GIB), -EINVAL);
}
END_TEST

/* The reserve a cache-full guest keeps, learned from its reclaim: its MemAvailable counts
 * 600 MiB of cache and shows no reserve, but free memory rose from 58 to 69 MiB in an interval
 * kswapd reclaimed 12 MiB in (3,000 pages, the balloon's counter): that free memory is the
 * kernel's reserve, and the start counts none of it as room. Free memory that rose by more than
 * the kernel reclaimed (a process exited) is not taken for it, nor any without a reclaim. */
static uint64_t start_after(uint64_t free_before, uint64_t free_after, uint64_t reclaimed_pages) {
        RsPolicy p;
        RsControllerParams cp;
        RsController *c;
        RsControllerDecision d;
        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        ck_assert_int_eq(rs_controller_new(&c, &p, &cp, 1 * GIB), 0);
        for (int i = 0; i < 2; i++) {
                RsSample s;
                rs_sample_init(&s);
                s.level[RS_LEVEL_TOTAL] = 1 * GIB - 75 * MIB;
                s.level[RS_LEVEL_FREE] = i == 0 ? free_before : free_after;
                s.level[RS_LEVEL_AVAILABLE] = 600 * MIB;
                s.level[RS_LEVEL_BALLOON_ACTUAL] = 1 * GIB;
                s.counter[RS_COUNTER_MAJOR_FAULTS] = 0;
                s.counter[RS_COUNTER_ASYNC_RECLAIMS] = 1000 + (i == 0 ? 0 : reclaimed_pages);
                rs_controller_feed(c, &s, (uint64_t) (i + 1) * 10 * SEC);
        }
        rs_controller_decide(c, &d);
        ck_assert_int_eq(d.action, RS_CONTROL_START);
        rs_controller_free(c);
        return d.target;
}

START_TEST(test_reserve_under_reclaim) {
        uint64_t min, low, high;
        rs_watermarks_default(1 * GIB - 75 * MIB, &min, &low, &high);
        ck_assert_uint_eq(start_after(58 * MIB, 69 * MIB, 3000), 1 * GIB);
        ck_assert_uint_eq(start_after(58 * MIB, 69 * MIB, 0), 1 * GIB - 69 * MIB + high);
        ck_assert_uint_eq(start_after(58 * MIB, 200 * MIB, 3000), 1 * GIB - 200 * MIB + high);
}
END_TEST

int main(void) {
        Suite *s = suite_create("controller");
        TCase *tc = check_add_case(s, "pieces", NULL, NULL, 0,
                                   CHECK_TESTS(test_cost_from_psi_and_faults, test_window_rest_is_lowest_within_window, test_window_settled,
                                               test_watermarks_and_start, test_reserves_from_available, test_reserve_under_reclaim,
                                               test_params_validated));
        tcase_add_loop_test(tc, test_law_directions, 0, 2);
        tcase_add_loop_test(tc, test_passing_stall, 0, 2);
        tcase_add_loop_test(tc, test_start_less_old_generations, 0, 2);
        tcase_add_loop_test(tc, test_no_swap_headroom, 0, 2);
        tcase_add_loop_test(tc, test_cliff_remembered, 0, 2);
        tcase_add_loop_test(tc, test_no_cliff_from_a_passing_stall, 0, 2);
        tcase_add_loop_test(tc, test_growth_loosened_every_interval, 0, 2);
        tcase_add_test(tc, test_per_cpu_lists_not_growth);
        tcase_add_test(tc, test_stream_host_reads);
        tcase_add_test(tc, test_measured_latency);
        tcase_add_test(tc, test_measured_latency_per_request);
        return check_run_suite(s);
}
