/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A guest for the estimator's unit tests: samples made by hand, one interval at a time, and
 * the decision fed back as the balloon would follow it (the host's grant applied in between,
 * as the daemon's arbitration does). Shared by tests/unit/test-estimator*.c. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/macro.h"
#include "policies/estimator.h"

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
void step(RsGuest *g, Fake *f, double majflt_rate, uint64_t available);
/* A guest of MAXMEM under policy p, at full size, with balloon stats. */
RsGuest *new_guest(const RsPolicy *p, Fake *f);
/* A guest under the default policy that learned its baseline and entered its first probe. */
RsGuest *learned_guest(Fake *f);
/* A guest with a working set of about 1 GiB (clean down to it, refaulting below), held
 * with its margin; hold_usec: the policy's hold time, 0 for its default. */
RsGuest *held_guest_with_hold(Fake *f, uint64_t hold_usec);
/* The same under the policy's default hold time. */
RsGuest *held_guest(Fake *f);
/* A guest with a floor of `floor` bytes, stepped clean until it holds (at its floor). */
RsGuest *held_at_floor(RsPolicy *p, Fake *f, uint64_t floor);
