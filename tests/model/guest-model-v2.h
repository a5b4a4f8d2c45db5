/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Guest model v2: a guest running a drawn workload shape (workload-shape.h), simulated one
 * second at a time, sampled once per polling interval as the daemon samples a real guest.
 *
 * Each second: the balloon moves toward its target (inflating at the draw's pace, and
 * never past what the guest can free: pushback); the workload touches its tiers and every
 * page not in memory is a miss, brought in at the cost of free memory; when free memory
 * falls under the low watermark the kernel reclaims up to the high one, coldest pages first
 * (the stream's and page cache read once, then idle anonymous memory to swap, then the
 * tiers by how rarely their pages are touched). Left alone at a size, the guest settles at
 * the drawn curve's steady state: the hottest pages resident, the rest thrashing.
 *
 * What a step costs beyond that steady state (what a controller reading one sample after a
 * step sees, and must not take for the size's cost):
 *   - collateral: reclaim the balloon forces takes part of its pages from hot ones (the LRU
 *     only approximates recency): a small share of hot page cache while cold page cache
 *     lasts (the kernel then scans the file LRU only), a larger one of every hot set once it
 *     has to swap (anonymous pages are aged coarsely); they come back as refaults at the
 *     rate the workload touches them, seconds for a hot set, minutes for one touched every
 *     few minutes;
 *   - the burst: the balloon takes memory faster than kswapd frees it, so tasks that
 *     allocate meanwhile reclaim directly and stall (allocstall, direct scans, PSI).
 *
 * Signals, as a 6.1 kernel reports them: workingset_refault_anon/file for every miss of a
 * page evicted before (first reads of a growing set are not refaults), activations for the
 * refaults whose refault distance fits the LRU (reuse time x eviction rate <= LRU pages: a
 * set much larger than memory refaults without activating, like a stream), swap-ins and
 * major faults for anonymous misses (and mapped file ones), pgscan/pgsteal split between
 * kswapd and direct reclaim, PSI memory some/full from the stall, MemFree, MemAvailable
 * (si_mem_available()), Cached, the zones' watermarks summed (/proc/zoneinfo, through the
 * agent), and the host's count of bytes read from the guest's disks. A guest with THP
 * (WorkloadDraw.thp) keeps khugepaged's raised reserve free, between the low and the high
 * watermark as kswapd keeps it, whatever its size: free memory that is no room.
 *
 * Out of memory (nothing left to reclaim under the min watermark): a balloon with
 * deflate-on-oom gives pages back to the guest 1 MiB per OOM notifier call until the
 * allocation fits or the balloon is empty; then, or without it, the OOM killer kills the
 * workload's largest anonymous set (guest-model-v2.c, out_of_memory()). With deflate-on-oom
 * MemTotal keeps the balloon's pages (they count as used).
 *
 * Ground truth per interval: the memory stall seconds (workload throughput is 1 - stall),
 * the hot bytes the balloon's reclaim took as collateral, OOM kills, and bytes deflated on OOM. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/signals.h"
#include "tests/model/workload-shape.h"

typedef struct GuestModelV2 {
        WorkloadDraw w;
        Watermarks wm;
        uint64_t rng;
        double interval_sec;
        double now_sec;
        double size;                 /* guest memory (balloon actual), bytes */
        double target;
        ShapePhase phase;            /* the shape in effect */

        double resident[SHAPE_TIERS_MAX]; /* the hottest bytes of each tier the LRU holds ... */
        double holes[SHAPE_TIERS_MAX];    /* ... less hot pages among them a step's collateral took */
        double unseen[SHAPE_TIERS_MAX]; /* bytes of a tier never read yet (a growing set's new pages) */
        double idle_anon, idle_file, stream_cache; /* resident bytes */
        double swapped;              /* bytes on swap */
        double free;                 /* free pages, those on the per-CPU lists included */
        double pcp;                  /* ... of which on the per-CPU lists: not in MemFree (per_cpu_lists) */
        bool reclaim_active;         /* kswapd reclaimed this second: the lists keep little */
        double eviction_rate;        /* pages per second evicted, a 10 s average (refault distances) */

        double c[_RS_COUNTER_MAX];   /* cumulative, as the guest kernel counts */
        double psi_some_avg10, psi_full_avg10; /* percent */

        /* the last interval */
        double step_stall_sec;       /* seconds the workload stalled on memory */
        double step_collateral;      /* hot bytes the balloon's reclaim took */
        double step_refaults;        /* pages refaulted (tiers only) */
        double step_direct_reclaim;  /* bytes reclaimed by stalled tasks */
        bool step_pushback;          /* the balloon could not reach its target */
        /* since init */
        double total_stall_sec, total_sec, total_collateral;
        unsigned oom_kills;
        double oom_deflated;         /* bytes the balloon gave back on the guest's OOM path (deflate-on-oom) */
        double oom_notify_stall_bytes; /* the OOM path's reclaim passes, waited for in the next second */
} GuestModelV2;

/* Starts at full size, warm: the workload's pages resident, the page cache read once in
 * what is left. interval_sec: seconds per guest_model_v2_step(). */
void guest_model_v2_init(GuestModelV2 *m, const WorkloadDraw *w, double interval_sec);
/* The balloon target (bytes of guest memory), at most the boot size. */
void guest_model_v2_set_target(GuestModelV2 *m, double target);
/* One polling interval. */
void guest_model_v2_step(GuestModelV2 *m);
/* What the guest reports now: balloon stats, and vmstat and PSI if it has an agent. */
void guest_model_v2_sample(const GuestModelV2 *m, RsSample *ret);

/* The last interval's throughput: 1 - its stall fraction. */
double guest_model_v2_throughput(const GuestModelV2 *m);
/* Ground truth for the shape in effect now (from the shape alone, workload-shape.h). */
double guest_model_v2_truth_stall(const GuestModelV2 *m, double target);
double guest_model_v2_truth_throughput(const GuestModelV2 *m, double fraction_of_full);
