/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>

#include "tests/lib/estimator-fake.h"

void step(RsGuest *g, Fake *f, double majflt_rate, uint64_t available) {
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

RsGuest *new_guest(const RsPolicy *p, Fake *f) {
        RsGuest *g = NULL;
        ck_assert_int_eq(rs_guest_new(&g, p, MAXMEM), 0);
        *f = (Fake) { .actual = MAXMEM, .target = MAXMEM, .stats = true };
        return g;
}

RsGuest *learned_guest(Fake *f) {
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

RsGuest *held_guest_with_hold(Fake *f, uint64_t hold_usec) {
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

RsGuest *held_guest(Fake *f) {
        return held_guest_with_hold(f, 0);
}

RsGuest *held_at_floor(RsPolicy *p, Fake *f, uint64_t floor) {
        rs_policy_init(p);
        p->floor_bytes = floor;
        RsGuest *g = new_guest(p, f);
        for (int i = 0; i < 100 && rs_guest_state(g) != RS_STATE_HOLD; i++)
                step(g, f, 1, GIB);
        ck_assert_int_eq(rs_guest_state(g), RS_STATE_HOLD);
        return g;
}
