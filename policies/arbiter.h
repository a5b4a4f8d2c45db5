/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Host arbitration: every guest's wish against the memory the host can give.
 *
 * Budget = host.guest_memory - host.reserve: the memory all managed guests may hold
 * together (rs_arbiter_guest_memory(): host MemAvailable plus what the managed guests hold
 * now).
 *
 * Not short (the wishes fit):
 *   - rightsize and observe guests get their wish (the estimator's target: the estimate
 *     plus margin, or a probe step);
 *   - on-host-pressure guests get memory back: up to their max, shared by shares out of
 *     what is left (they are only squeezed when the host needs it).
 * Short:
 *   1. guests above their estimate (margin, probe headroom, on-host-pressure surplus)
 *      give up what lies above max(estimate, floor), in proportion to that excess;
 *   2. if that is not enough, the budget is divided by shares, each guest clamped to
 *      [floor, max(estimate, floor)];
 *   a guest never gets more than its wish when the host is short (one probing below its
 *   estimate gets its probe step, or the probe would never move);
 *   never below a floor: if the floors alone exceed the budget, every guest gets its floor
 *   and the result says so (-ENOSPC).
 * A guest with an unknown estimate counts its wish as its estimate (nothing to squeeze
 * above it in step 1). All arithmetic is in bytes; results are deterministic. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "policies/policy.h"

typedef struct RsArbiterHost {
        uint64_t guest_memory; /* bytes the managed guests may hold together, before the reserve */
        uint64_t reserve;      /* bytes kept free for the host */
} RsArbiterHost;

typedef struct RsArbiterGuest {
        uint64_t want;     /* the estimator's target (RsDecision.target) */
        uint64_t estimate; /* RS_UNKNOWN allowed */
        uint64_t floor;
        uint64_t max;
        uint64_t shares;   /* 0 counts as 1 */
        RsMode mode;
} RsArbiterGuest;

typedef enum RsArbiterResult {
        RS_ARBITER_FITS = 0,      /* not short */
        RS_ARBITER_SQUEEZED = 1,  /* short: covered by squeezing guests above their estimates */
        RS_ARBITER_SHARED = 2,    /* short: estimates did not fit, divided by shares */
} RsArbiterResult;

/* Fills out_targets[n], for any n. Returns an RsArbiterResult, -ENOSPC when even the floors
 * do not fit (every guest then gets its floor), -EINVAL, or -ENOMEM (out_targets untouched). */
int rs_arbitrate(const RsArbiterHost *host, const RsArbiterGuest *guests, size_t n, uint64_t *out_targets);

/* What a guest holds on the host: the larger of the size it reports (its balloon's actual,
 * which the guest's driver reports and QEMU passes on unchecked) and its QEMU process's
 * resident set (RS_UNKNOWN when not read). A guest that reports less than it holds must not
 * shrink the others' budget by the difference. */
uint64_t rs_arbiter_held(uint64_t reported, uint64_t host_rss);

/* RsArbiterHost.guest_memory: the host's MemAvailable plus what each of the n guests holds
 * (rs_arbiter_held() of reported[i] and host_rss[i]), saturating. */
uint64_t rs_arbiter_guest_memory(uint64_t mem_available, const uint64_t *reported, const uint64_t *host_rss, size_t n);
