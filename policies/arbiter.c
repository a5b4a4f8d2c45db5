/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/arbiter.h"

#include <errno.h>

#include "common/macro.h"
#include "policies/rs-value.h"

static uint64_t floor_of(const RsArbiterGuest *g) {
        return MIN(g->floor, g->max);
}

static uint64_t want_of(const RsArbiterGuest *g) {
        return CLAMP(g->want, floor_of(g), g->max);
}

/* What the guest keeps when squeezed as far as step 1 goes: its estimate, but never more
 * than it asks for. A probing guest asks for less than its estimate; given the estimate
 * instead, its probe would never get a step further. */
static uint64_t base_of(const RsArbiterGuest *g) {
        uint64_t est = rs_known(g->estimate) ? g->estimate : g->want;
        return MIN(CLAMP(MAX(est, floor_of(g)), floor_of(g), g->max), want_of(g));
}

static uint64_t shares_of(const RsArbiterGuest *g) {
        return g->shares > 0 ? g->shares : 1;
}

/* Sum of clamp(level * shares_i, lo_i, hi_i) in bytes, level in bytes per share. */
static unsigned __int128 filled(const RsArbiterGuest *guests, size_t n, const uint64_t *lo, const uint64_t *hi, double level) {
        unsigned __int128 sum = 0;
        for (size_t i = 0; i < n; i++) {
                double v = level * (double) shares_of(&guests[i]);
                uint64_t x = v >= (double) hi[i] ? hi[i] : v <= (double) lo[i] ? lo[i] : (uint64_t) v;
                sum += x;
        }
        return sum;
}

/* Water-filling: each guest gets level*shares clamped to [lo, hi], with the level chosen so
 * the total meets budget. Bisection on the level: 200 rounds pin it far below a byte. */
static void water_fill(const RsArbiterGuest *guests, size_t n, const uint64_t *lo, const uint64_t *hi, uint64_t budget, uint64_t *out) {
        double a = 0, b = 1;
        while (filled(guests, n, lo, hi, b) < budget && b < 1e30)
                b *= 2;
        for (int k = 0; k < 200; k++) {
                double mid = (a + b) / 2;
                if (filled(guests, n, lo, hi, mid) <= budget)
                        a = mid;
                else
                        b = mid;
        }
        for (size_t i = 0; i < n; i++) {
                double v = a * (double) shares_of(&guests[i]);
                out[i] = v >= (double) hi[i] ? hi[i] : v <= (double) lo[i] ? lo[i] : (uint64_t) v;
        }
}

#define ARBITER_MAX_GUESTS 4096

int rs_arbitrate(const RsArbiterHost *host, const RsArbiterGuest *guests, size_t n, uint64_t *out_targets) {
        uint64_t lo[ARBITER_MAX_GUESTS], hi[ARBITER_MAX_GUESTS];
        unsigned __int128 sum_want = 0, sum_base = 0, sum_floor = 0;

        if (!host || (n > 0 && (!guests || !out_targets)) || n > ARBITER_MAX_GUESTS)
                return -EINVAL;
        if (n == 0)
                return RS_ARBITER_FITS;

        uint64_t budget = host->guest_memory > host->reserve ? host->guest_memory - host->reserve : 0;

        for (size_t i = 0; i < n; i++) {
                sum_want += want_of(&guests[i]);
                sum_base += base_of(&guests[i]);
                sum_floor += floor_of(&guests[i]);
        }

        if (sum_floor > budget) {
                for (size_t i = 0; i < n; i++)
                        out_targets[i] = floor_of(&guests[i]);
                return -ENOSPC;
        }

        if (sum_want <= budget) {
                /* Not short: wishes granted; on-host-pressure guests share the rest up
                 * to their max. */
                uint64_t left = budget - (uint64_t) sum_want;
                for (size_t i = 0; i < n; i++) {
                        lo[i] = hi[i] = want_of(&guests[i]);
                        if (guests[i].mode == RS_MODE_ON_HOST_PRESSURE)
                                hi[i] = guests[i].max;
                }
                unsigned __int128 extra = 0;
                for (size_t i = 0; i < n; i++)
                        extra += hi[i] - lo[i];
                if (extra <= left) {
                        for (size_t i = 0; i < n; i++)
                                out_targets[i] = hi[i];
                } else
                        water_fill(guests, n, lo, hi, (uint64_t) sum_want + left, out_targets);
                return RS_ARBITER_FITS;
        }

        if (sum_base <= budget) {
                /* Step 1: take the excess above the estimates, in proportion to it. */
                unsigned __int128 excess = sum_want - sum_base;
                unsigned __int128 need = sum_want - budget;
                for (size_t i = 0; i < n; i++) {
                        uint64_t want = want_of(&guests[i]), base = base_of(&guests[i]);
                        uint64_t mine = want > base ? want - base : 0;
                        /* round up so the total never exceeds the budget */
                        unsigned __int128 take = excess > 0 ? ((unsigned __int128) mine * need + excess - 1) / excess : 0;
                        if (take > mine)
                                take = mine;
                        out_targets[i] = want - (uint64_t) take;
                }
                return RS_ARBITER_SQUEEZED;
        }

        /* Step 2: estimates do not fit: divide by shares between floor and estimate. */
        for (size_t i = 0; i < n; i++) {
                lo[i] = floor_of(&guests[i]);
                hi[i] = base_of(&guests[i]);
        }
        water_fill(guests, n, lo, hi, budget, out_targets);
        return RS_ARBITER_SHARED;
}

uint64_t rs_arbiter_held(uint64_t reported, uint64_t host_rss) {
        return rs_known(host_rss) ? MAX(reported, host_rss) : reported;
}

uint64_t rs_arbiter_guest_memory(uint64_t mem_available, const uint64_t *reported, const uint64_t *host_rss, size_t n) {
        uint64_t sum = mem_available;
        for (size_t i = 0; i < n; i++) {
                uint64_t held = rs_arbiter_held(reported[i], host_rss[i]);
                sum = held > UINT64_MAX - sum ? UINT64_MAX : sum + held;
        }
        return sum;
}
