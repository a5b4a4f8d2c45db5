/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One sample of a guest's memory signals, and the conversion of its cumulative counters
 * into per-second rates.
 *
 * A sample holds levels (instantaneous values: bytes, or PSI in hundredths of a percent)
 * and counters (monotonic totals). Every field may be RS_UNKNOWN. The daemon fills what
 * it has: balloon stats (qom-get guest-stats), query-balloon, the virtio-mem size, the
 * guest agent's /proc/vmstat and /proc/pressure/memory, and the host's /proc/meminfo and
 * /proc/pressure/memory.
 *
 * RsRateTracker turns successive samples into rates. Counters that go backwards are a
 * reset, not a negative rate; when most known guest counters go backwards together the guest
 * rebooted. 32-bit wraps are unwrapped. A rate no guest can physically produce is dropped
 * (unknown), so a lying guest never makes a spike. Nothing here allocates. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policies/rs-value.h"

typedef enum RsLevel {
        /* balloon stats, bytes */
        RS_LEVEL_TOTAL,
        RS_LEVEL_FREE,
        RS_LEVEL_AVAILABLE,
        RS_LEVEL_DISK_CACHES,
        /* query-balloon "actual" and the plugged virtio-mem size, bytes */
        RS_LEVEL_BALLOON_ACTUAL,
        RS_LEVEL_VIRTIO_MEM_SIZE,
        /* the balloon target the daemon last asked for: actual staying above it is pushback */
        RS_LEVEL_BALLOON_TARGET,
        /* guest /proc/pressure/memory avg10, hundredths of a percent (0..10000) */
        RS_LEVEL_PSI_SOME_AVG10,
        RS_LEVEL_PSI_FULL_AVG10,
        /* guest /proc/meminfo SwapTotal and SwapFree, bytes: whether anonymous memory can leave */
        RS_LEVEL_SWAP_TOTAL,
        RS_LEVEL_SWAP_FREE,
        /* guest MGLRU (lru_gen): anonymous and file pages in the generations older than the
         * daemon's aging period, bytes: pages nothing touched for that long, which reclaim
         * takes first. Unknown without the agent or without MGLRU. */
        RS_LEVEL_ANON_OLD,
        RS_LEVEL_FILE_OLD,
        /* host */
        RS_LEVEL_HOST_MEM_AVAILABLE,
        RS_LEVEL_HOST_PSI_SOME_AVG10,
        RS_LEVEL_HOST_PSI_FULL_AVG10,
        /* guest /proc/zoneinfo: the zones' min, low and high watermarks summed, each zone's
         * with its largest lowmem protection (what the kernel keeps free of a user allocation;
         * high is totalreserve_pages), bytes. Unknown without the agent; not read every interval */
        RS_LEVEL_WMARK_MIN,
        RS_LEVEL_WMARK_LOW,
        RS_LEVEL_WMARK_HIGH,
        /* guest /proc/zoneinfo: bytes on the per-CPU free lists (the pagesets' counts summed),
         * free pages that FREE and AVAILABLE leave out (kernel 5.14 and later let the lists
         * hold up to the low watermarks: 5 % of a 1 GiB guest with THP). Unknown without the
         * agent, and only from a read of this interval (they change with every free). */
        RS_LEVEL_PCP_FREE,
        _RS_LEVEL_MAX,
} RsLevel;

typedef enum RsCounter {
        /* balloon stats */
        RS_COUNTER_MAJOR_FAULTS,   /* events */
        RS_COUNTER_MINOR_FAULTS,   /* events */
        RS_COUNTER_SWAP_IN,        /* bytes */
        RS_COUNTER_SWAP_OUT,       /* bytes */
        RS_COUNTER_OOM_KILLS,      /* events (QEMU 9.2+) */
        RS_COUNTER_ALLOC_STALLS,   /* events */
        RS_COUNTER_ASYNC_SCANS,    /* pages */
        RS_COUNTER_DIRECT_SCANS,   /* pages */
        RS_COUNTER_ASYNC_RECLAIMS, /* pages */
        RS_COUNTER_DIRECT_RECLAIMS,/* pages */
        /* guest agent /proc/vmstat, pages or events */
        RS_COUNTER_REFAULT_ANON,
        RS_COUNTER_REFAULT_FILE,
        RS_COUNTER_ACTIVATE_ANON,
        RS_COUNTER_ACTIVATE_FILE,
        RS_COUNTER_PGSCAN_KSWAPD,
        RS_COUNTER_PGSCAN_DIRECT,
        RS_COUNTER_PGSTEAL_KSWAPD,
        RS_COUNTER_PGSTEAL_DIRECT,
        RS_COUNTER_PSWPIN,
        RS_COUNTER_PSWPOUT,
        RS_COUNTER_PGMAJFAULT,
        RS_COUNTER_ALLOCSTALL,
        RS_COUNTER_OOM_KILL,
        /* guest /proc/pressure/memory total=, microseconds stalled */
        RS_COUNTER_PSI_SOME_TOTAL,
        RS_COUNTER_PSI_FULL_TOTAL,
        /* the host's own view: bytes QEMU read from the guest's disks (query-blockstats).
         * Swap-ins and file refaults must come from disk, whatever the guest reports. */
        RS_COUNTER_HOST_DISK_READ,
        /* ... the read requests that carried them, and the nanoseconds those took from
         * submission to completion, summed (rd_operations, rd_total_time_ns): their ratio is
         * the mean time of one of the guest's reads, the latency a fault waits for */
        RS_COUNTER_HOST_DISK_READ_OPS,
        RS_COUNTER_HOST_DISK_READ_TIME,
        _RS_COUNTER_MAX,
} RsCounter;

typedef struct RsSample {
        uint64_t level[_RS_LEVEL_MAX];
        uint64_t counter[_RS_COUNTER_MAX];
} RsSample;

/* Every field RS_UNKNOWN. */
void rs_sample_init(RsSample *s);
const char *rs_level_name(RsLevel l);
const char *rs_counter_name(RsCounter c);

/* Which group a counter belongs to: the tiers are built from these. */
bool rs_counter_is_agent(RsCounter c);
bool rs_counter_is_balloon(RsCounter c);
/* QEMU's own counters: a guest reboot does not reset them. */
bool rs_counter_is_host(RsCounter c);

/* Levels checked for consistency. mem_max is the most memory the guest can have (bytes,
 * 0 when not known): levels above it (with slack) or contradicting each other (free or
 * available above total) become unknown. */
void rs_sample_sanitize(RsSample *s, uint64_t mem_max);

typedef enum RsRateEvent {
        RS_RATE_NONE = 0,
        RS_RATE_FIRST,      /* no previous sample: no rates yet */
        RS_RATE_REBOOT,     /* most counters went backwards: the guest restarted */
        RS_RATE_TIME_SKEW,  /* now did not advance: sample ignored for rates */
} RsRateEvent;

typedef struct RsRates {
        double per_sec[_RS_COUNTER_MAX]; /* valid only where known[] */
        bool known[_RS_COUNTER_MAX];
        double interval_sec;             /* 0 when no rates */
        RsRateEvent event;
        unsigned n_resets;               /* single counters that went backwards this sample */
        unsigned n_dropped;              /* rates dropped as physically impossible */
} RsRates;

typedef struct RsRateTracker {
        uint64_t prev[_RS_COUNTER_MAX];
        uint64_t prev_at[_RS_COUNTER_MAX]; /* when prev[] was taken: a dropped value keeps the older one */
        uint8_t backwards[_RS_COUNTER_MAX]; /* consecutive samples below prev[] */
        uint64_t prev_usec;
        bool have_prev;
        uint64_t n_reboots;
} RsRateTracker;

void rs_rate_tracker_init(RsRateTracker *t);
/* Consumes one sample taken at now_usec and fills *ret (never a negative or impossible
 * rate). Returns the event. */
RsRateEvent rs_rate_tracker_feed(RsRateTracker *t, const RsSample *s, uint64_t now_usec, RsRates *ret);

/* The highest believable rate of a counter, per second. */
double rs_counter_max_rate(RsCounter c);

/* Convenience: a rate or 0 when unknown, and the sum of known rates (known_any tells
 * whether any of them was known). */
static inline double rs_rate_or_zero(const RsRates *r, RsCounter c) {
        return r->known[c] ? r->per_sec[c] : 0.0;
}
