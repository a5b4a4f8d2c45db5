/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Workload shapes for guest model v2, drawn from families by seed, and what follows from a
 * shape alone, without any guest dynamics or controller: its miss (refault) rate as a
 * function of the memory it has, the memory stall that rate costs, and the ground truth.
 *
 * A shape is a few tiers of pages plus pages that are never touched again (idle anonymous
 * memory, page cache read once) and, optionally, a stream read once per pass through a
 * file larger than memory. Each tier is anonymous or file-backed and has a reuse time: the
 * mean seconds between two touches of one of its pages. Its pages are touched
 *   in a cyclic loop  (a pass that does not fit misses more than the deficit, as LRU does),
 *   at random         (independent references: misses in proportion to the deficit), or
 *   by Zipf rank      (page i in proportion to 1/i^theta: no knee, a smooth curve).
 *
 * The kernel keeps the pages touched most often (reclaim takes the coldest first), so at a
 * budget of B bytes for the LRU lists the resident pages are the hottest B (water-filling
 * by per-page access rate). Anonymous memory without swap, or beyond it, cannot leave.
 *
 * Memory stall, PSI "some" as a fraction of wall time: a miss costs the workload its
 * latency (a swap-in or a file read). The workload is closed-loop (it waits for its misses,
 * so it misses less often while it waits): with x = nominal misses per second x latency,
 * stall = x / (1 + x), and throughput = 1 - stall = 1 / (1 + x). At full size every shape
 * fits, so throughput there is 1. The stream's reads are the workload's own I/O at every
 * size, not memory stall.
 *
 * Ground truth: for a stall target T, the smallest guest size (1 MiB grid) whose steady
 * stall is <= T; and the smallest whose throughput is >= 99 % of full size's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHAPE_TIERS_MAX 3
#define SHAPE_PAGE 4096.0

/* The stall target the ground truth is scored at: 0.1 % of wall time stalled on memory,
 * senpai's pressure target, a level no workload feels. */
#define SHAPE_STALL_TARGET 0.001
/* The throughput truth: the smallest size that keeps 99 % of full size's throughput. */
#define SHAPE_THROUGHPUT_TARGET 0.99
/* The share of draws whose balloon deflates on the guest's OOM (WorkloadDraw.deflate_on_oom). */
#define DEFLATE_ON_OOM_SHARE 0.75
/* The share of draws whose kernel runs khugepaged (WorkloadDraw.thp). Distribution kernels
 * build THP "always" or "madvise", and either starts khugepaged, which raises the watermarks;
 * guests booted with it "never", or small kernels built without it, keep the boot default.
 * Half: both kinds are scored by as many draws. */
#define THP_SHARE 0.5

typedef enum ShapeBacking {
        SHAPE_ANON,
        SHAPE_FILE,
} ShapeBacking;

typedef enum ShapeAccess {
        SHAPE_LOOP,
        SHAPE_RANDOM,
        SHAPE_ZIPF,
} ShapeAccess;

typedef struct ShapeTier {
        ShapeBacking backing;
        ShapeAccess access;
        bool mapped;            /* file pages mapped into the workload: a miss is a major fault */
        double bytes;
        double reuse_sec;       /* mean seconds between two touches of one page (a loop's pass time) */
        double theta;           /* Zipf exponent */
} ShapeTier;

typedef struct ShapePhase {
        ShapeTier tier[SHAPE_TIERS_MAX];
        unsigned n_tiers;
        double stream_bytes_per_sec; /* read once per pass through a file larger than memory */
        double idle_anon_bytes;      /* allocated, never touched again (cold keys, leaked heap) */
        double idle_file_bytes;      /* page cache read once */
} ShapePhase;

typedef enum ShapeFamily {
        FAMILY_UNIFORM_LOOP,
        FAMILY_ZIPF,
        FAMILY_TIERED,          /* held out of tuning */
        FAMILY_STREAM_HOT,      /* held out of tuning */
        FAMILY_PHASE_UP,
        FAMILY_PHASE_DOWN,
        FAMILY_COLD_KEYS,
        _FAMILY_MAX,
} ShapeFamily;

/* The families no controller may be tuned on: their figures are frozen at their first run
 * (tests/model/holdout-baseline.txt) and every later run is scored against them. */
bool shape_family_held_out(ShapeFamily f);
const char *shape_family_name(ShapeFamily f);
/* -1 when unknown. */
int shape_family_from_name(const char *name);

/* One draw: the guest and its workload. Everything the model and the truth need. */
typedef struct WorkloadDraw {
        ShapeFamily family;
        uint64_t seed;

        /* the guest */
        double boot_bytes;           /* guest memory with the balloon empty */
        double reserved_bytes;       /* firmware and kernel image: not in MemTotal */
        double kernel_bytes;         /* slab, page tables, stacks: in MemTotal, never reclaimed */
        double swap_bytes;           /* 0: no swap */
        bool agent;                  /* guest agent: vmstat, PSI and /proc/meminfo's swap */
        bool lru_gen;                /* MGLRU on, read through the agent: the old generations' sizes */
        bool deflate_on_oom;         /* the balloon has VIRTIO_BALLOON_F_DEFLATE_ON_OOM (libvirt's autodeflate):
                                      * the guest's OOM path takes pages back from the balloon before it kills */
        bool thp;                    /* transparent huge pages on (always or madvise): khugepaged raised
                                      * min_free_kbytes for 2 MiB pageblocks (workload_watermarks()) */
        bool per_cpu_lists;          /* freed pages park on per-CPU lists, outside MemFree (guest-model-v2.c);
                                      * not drawn yet: forced by ModelV2Options.per_cpu_lists */
        double anon_miss_sec;        /* latency of one swap-in */
        double file_miss_sec;        /* latency of one file read */
        double loop_amplification;   /* a loop with a deficit d of its pages misses min(1, a x d) of its touches */
        double collateral_cold;      /* share of a balloon step's reclaim taken from hot pages while cold cache lasts */
        double collateral_anon;      /* ... once reclaim has to swap (the anonymous LRU ages coarsely) */
        double inflate_bytes_per_sec;/* how fast the balloon takes pages from the guest */
        double kswapd_file_bytes_per_sec;    /* how fast kswapd drops clean page cache */
        double direct_reclaim_bytes_per_sec; /* a task in direct reclaim stalls bytes / this */
        double noise;                /* relative jitter of the reported rates */

        /* the workload: one phase, or two with a change at change_sec over ramp_sec */
        ShapePhase phase[2];
        unsigned n_phases;
        double change_sec;
        double ramp_sec;
} WorkloadDraw;

/* A draw of a family from a seed: deterministic, the same on every machine. */
void workload_draw(ShapeFamily family, uint64_t seed, WorkloadDraw *ret);
/* One line a failing draw is replayed from: family, seed and the parameters drawn. */
void workload_describe(const WorkloadDraw *d, char *buf, size_t len);

/* The shape in effect at a time: the first phase, the second, or between them in a ramp
 * (every tier's size moves linearly; the tiers are the same in both phases). */
void workload_phase_at(const WorkloadDraw *d, double t_sec, ShapePhase *ret);

/* The zone watermarks a 6.1 kernel computes at boot from its managed memory (the balloon
 * does not change them), summed over the zones, bytes. With THP (WorkloadDraw.thp) each
 * zone's also carries its largest lowmem protection (lowmem_reserve): what a user allocation
 * must leave free in that zone on top of the watermark, so that free memory the kernel keeps
 * is as /proc/zoneinfo shows it, and high is the kernel's totalreserve_pages (what
 * si_mem_available() takes from MemFree). The boot-default draws keep the reckoning they
 * were tuned and frozen with, without protection (a few MiB). */
typedef struct Watermarks {
        double min, low, high;
} Watermarks;
void workload_watermarks(const WorkloadDraw *d, Watermarks *ret);

/* Nominal misses per second (as if the workload never waited) of one tier with `resident`
 * of its bytes in memory, the hottest of its pages first. Non-increasing in resident, 0 at
 * the tier's size. */
double shape_tier_misses(const WorkloadDraw *d, const ShapeTier *tier, double resident);
/* Of the misses of a tier with `resident` bytes in memory, the share whose page is touched
 * again within reuse_limit_sec: the kernel activates a refault whose refault distance (pages
 * evicted since) fits the LRU, i.e. reuse time x eviction rate <= LRU pages. */
double shape_tier_miss_share_within(const WorkloadDraw *d, const ShapeTier *tier, double resident, double reuse_limit_sec);
/* The mean touch rate of a tier's resident pages (the hottest `resident` bytes), per page
 * per second: how fast hot pages taken at random come back. */
double shape_tier_resident_mean_rate(const ShapeTier *tier, double resident);
/* A tier's page touched most and least often: touches per second. */
double shape_tier_rate_max(const ShapeTier *tier);
double shape_tier_rate_min(const ShapeTier *tier);

/* Where the pages are at steady state for a budget of LRU bytes: the hottest first. */
typedef struct ShapeResidency {
        double tier[SHAPE_TIERS_MAX];
        double idle_anon;            /* resident (the rest is on swap) */
        double idle_file;
        double pinned;               /* anonymous bytes that cannot leave (no swap, or swap full) */
        bool fits;                   /* pinned memory fits the budget (else: OOM) */
} ShapeResidency;
void shape_residency(const WorkloadDraw *d, const ShapePhase *p, double budget, ShapeResidency *ret);

/* Bytes the LRU lists get at a guest size at steady state: the size less what the kernel
 * keeps (reserved, kernel, free memory at the high watermark). */
double shape_budget(const WorkloadDraw *d, double size);

/* Steady state at a guest size: nominal misses per second of the tiers, and the stall
 * (fraction of wall time, 0..1; 1 where pinned memory does not fit: an OOM). */
double shape_steady_misses(const WorkloadDraw *d, const ShapePhase *p, double size);
double shape_steady_stall(const WorkloadDraw *d, const ShapePhase *p, double size);
/* The closed-loop law: stall from stall-seconds per second wanted. */
double shape_stall_from_load(double x);

/* Ground truth, bytes of guest size on a 1 MiB grid: the smallest size whose steady stall
 * is <= target (SHAPE_STALL_TARGET), and the smallest whose throughput is >= 99 % of full
 * size's. Depends on the shape alone. */
double shape_truth_stall(const WorkloadDraw *d, const ShapePhase *p, double target);
double shape_truth_throughput(const WorkloadDraw *d, const ShapePhase *p, double fraction_of_full);
