/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A deterministic, seeded simulation of a Linux guest's memory, for driving the decision
 * core without QEMU. One call to guest_model_step() is one polling interval.
 *
 * The guest has a kernel part that is never reclaimed, a hot anonymous set, cold anonymous
 * pages (swapped out first when there is swap), a hot file set re-read through read(),
 * cold page cache, and optionally a file streamed at a fixed rate that is never re-used
 * within memory (Nick Piggin's case). Memory pressure evicts cold pages first, then the hot
 * sets in proportion to their sizes; evicted hot pages come back as refaults at a rate that
 * grows with the deficit (LRU-like: every pass over the hot set misses what did not fit).
 * The rate scales with the pass time (cfg.pass_sec): a real workload sweeping a 300 MiB set
 * twice a second, 8 MiB below its knee, refaults about 6000 pages/s (issue 13), a storm by
 * the core's measure; the same set swept every 10 s refaults 300 pages/s. The rates are open
 * loop (the workload does not sweep more slowly because it waits on its refaults) up to one
 * refault per refault service time (one reader waiting on the disk: 10000 pages/s at the
 * default 100 us), where a deep squeeze saturates, as a real guest's does.
 *
 * After the guest grows again, what was evicted comes back when the workload next touches
 * it: anonymous pages as swap-ins with no swap-out, hot file pages as read() refaults, at
 * the rate the workload touches them (a whole pass's worth per pass_sec), in what the reader
 * has left after thrashing. With fast sweeps that is a burst at the device's pace right after
 * backing off, as fast as the saturated squeeze was and, with short intervals, spanning more
 * than one: the burst a core once took for growth (+11.5 % on a real guest's doubling
 * workload with 1 s intervals, while every model run passed: the model then brought those
 * pages back unseen, and let a squeeze refault faster than any disk).
 *
 * Ground truth for cost (what the tests assert about the price of estimating): per step,
 * the hot bytes that did not fit (the deficit), the hot pages refaulted (thrashing plus
 * recovery), the swap-ins, and the extra workload seconds those refaults cost (each one
 * cfg.refault_service_sec: a swap-in or a file read the workload waits for); and their
 * totals since init. At full size all of them are zero.
 *
 * What it emits mirrors guest-lab.md: read() thrashing shows no major faults and only moves
 * the levels (available, disk caches) and makes the balloon stop short of its target;
 * anonymous thrashing with swap shows at once in major faults and swap-in; the guest agent
 * (if enabled) sees workingset_refault/activate, pgscan/pgsteal and PSI. Streaming refaults
 * are counted as refaults but not activations (their refault distance exceeds memory).
 *
 * The balloon pushes back: it cannot take pages the guest cannot free, and it fights
 * refaulting reads for the last ones. With deflate-on-oom the guest takes pages back
 * instead of OOM-killing; without it, anonymous memory that does not fit is an OOM kill,
 * which the tests must never see. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/signals.h"

#define GUEST_MODEL_PHASES_MAX 8

typedef struct GuestModelPhase {
        unsigned start_tick;
        uint64_t anon_hot;          /* bytes touched every pass */
        uint64_t anon_cold;         /* allocated, never touched again */
        uint64_t file_hot;          /* file bytes re-read every pass */
        uint64_t file_cold;         /* page cache read once (e.g. at boot) */
        double stream_bytes_per_sec;/* a file much larger than memory, read cyclically */
        unsigned ramp_ticks;        /* move from the previous phase's sizes over this many ticks */
} GuestModelPhase;

typedef struct GuestModelConfig {
        uint64_t seed;
        uint64_t boot_bytes;         /* the guest's memory without the balloon */
        uint64_t kernel_bytes;       /* kernel, slab, page tables: never reclaimed */
        uint64_t min_free_bytes;     /* the watermark reclaim keeps free */
        uint64_t swap_bytes;         /* 0: no swap */
        bool deflate_on_oom;
        bool agent;                  /* guest agent: vmstat and PSI */
        bool new_balloon_stats;      /* QEMU 9.2+ scan/reclaim/stall/oom stats */
        uint64_t interval_usec;
        double pass_sec;             /* seconds per pass over the hot sets (0.5: a real-like sweep) */
        double noise;                /* relative jitter of the rates, e.g. 0.1 */
        double refault_service_sec;  /* workload time one hot refault costs (swap-in or file read); 0: 100 us */
        unsigned reboot_tick;        /* 0: never; else counters restart at this tick */
        double lie_probability;      /* chance per sample of a corrupted report */
        bool host_disk_stats;        /* QEMU's blockstats: bytes read from the guest's disks */
        bool hides_pressure;         /* reports no faults, no swap and plenty available, always */
        /* Hot anonymous pages on swap that fit again (after the guest grew) come back when
         * the workload touches them, as swap-ins with no swap-out: 0 at the rate the workload
         * touches them (anon_hot / pass_sec), at most a page per refault_service_sec, every
         * interval; otherwise at most this fast, and only every swap_recovery_every intervals
         * (a pass reaching the swapped region), so quiet intervals come between. Hot file
         * pages dropped come back the same way (the default rate) as file refaults. */
        double swap_recovery_bytes_per_sec;
        unsigned swap_recovery_every;
        /* How fast the balloon inflates, bytes per second; 0: it reaches its target within the
         * interval. A guest whose vCPUs are busy (a database under load, under TCG) inflates
         * 40-60 MiB a second: a step bigger than that is still under way a sample later. */
        double inflate_bytes_per_sec;
        /* How fast cold page cache fills memory a deflation freed, bytes per second (the guest
         * reading files it has not read lately); 0: at once. A real guest leaves most of it
         * free for a while, and pages it reads back after a squeeze go there, with nothing
         * reclaimed for them. */
        double cold_refill_bytes_per_sec;
        /* The balloon takes hot page cache as readily as cold (no pushback): the distro guest
         * under pgbench gave its database's cache to the balloon down to 591 MiB of a 2 GiB
         * guest. Otherwise it cannot take half of a hot-file deficit (the busybox guest's
         * read() set, guest-lab.md). */
        bool file_no_pushback;
        GuestModelPhase phases[GUEST_MODEL_PHASES_MAX];
        unsigned n_phases;
} GuestModelConfig;

typedef struct GuestModel {
        GuestModelConfig cfg;
        uint64_t rng;
        unsigned tick;
        uint64_t now_usec;
        uint64_t target;
        uint64_t actual;

        /* current sizes (after ramps) */
        double anon_hot, anon_cold, file_hot, file_cold, stream_rate;

        /* resident state after the last step */
        double free_b, cache_b, available_b, swapped_b;
        double hot_deficit_file, hot_deficit_anon;
        double prev_cold_resident;
        double cold_cache_b;         /* cold page cache resident, < 0 before the first step */
        double anon_on_swap;         /* hot anonymous bytes on swap (deficit plus not yet recovered) */
        double file_dropped;         /* hot file bytes dropped (deficit plus not yet read back) */

        /* Ground-truth cost of the last step (the interval just run) ... */
        double hot_evicted;          /* bytes of the hot sets that did not fit (the deficit) */
        double step_refaults;        /* hot pages refaulted: thrashing plus recovery (no stream, no noise floor) */
        double step_swapins;         /* pages swapped in (anonymous thrashing plus recovery) */
        double step_extra_sec;       /* extra workload seconds: step_refaults x refault service time */
        /* ... and since init. */
        double total_refaults, total_swapins, total_extra_sec;
        double total_evicted_byte_sec; /* deficit integrated over time (bytes x seconds) */

        /* cumulative counters as the guest kernel keeps them */
        double c[_RS_COUNTER_MAX];
        double psi_some_avg10, psi_full_avg10;

        /* ground truth */
        unsigned oom_kills;
        unsigned deflate_on_oom_events;
        bool lied;                   /* the last sample was corrupted */
} GuestModel;

/* Starts at full size (balloon target = boot size). */
void guest_model_init(GuestModel *m, const GuestModelConfig *cfg);
/* The balloon target the decision core asked for (bytes of guest memory). */
void guest_model_set_target(GuestModel *m, uint64_t target);
/* Advances one interval. */
void guest_model_step(GuestModel *m);
/* The signals a real guest would report now (possibly corrupted for a lying guest). */
void guest_model_sample(GuestModel *m, RsSample *ret);

/* The smallest guest size at which the current phase runs without refaults: kernel,
 * watermark and both hot sets. Cold pages and the stream are not part of it. */
uint64_t guest_model_working_set(const GuestModel *m);
uint64_t guest_model_actual(const GuestModel *m);
/* Refaults per second of the hot sets last interval (what more memory would save), without
 * noise and without recovery. */
double guest_model_hot_refault_rate(const GuestModel *m);
/* The refault service time in effect (cfg.refault_service_sec, or its default). */
double guest_model_refault_service_sec(const GuestModelConfig *cfg);

/* A basic config: 2 GiB guest, 100 MiB kernel, 16 MiB watermark, 10 s interval, a 10 s
 * pass, 5 % noise, 100 us per refault, one phase with nothing in it. (The scenarios draw
 * the noise from their seed: scenario_config().) */
void guest_model_config_default(GuestModelConfig *cfg, uint64_t seed);
