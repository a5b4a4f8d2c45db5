/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The controller's one cost: the share of wall time the guest's tasks stalled on memory.
 *
 * Where the guest agent reports /proc/pressure/memory, the cost is PSI memory "some": the
 * microseconds its total= counter advanced over the interval, per second. PSI counts only
 * time a task waited for memory (refaults, direct reclaim, thrashing), so a stream's reads,
 * which no memory would save, do not count in it.
 *
 * Without the agent, the cost is an estimate: the pages the guest had to bring back (major
 * faults and swap-ins from its balloon stats, or the host's own count of what QEMU read from
 * its disks, whichever says more) times a per-fault latency. The latency is measured on the
 * host where QEMU reports it (the mean time of the guest's disk reads), else a default. A
 * fault costs one read request: the task waits for the request that carries its page, and
 * the readahead pages the same request brings cost no wait of their own (touched later, they
 * are minor faults). So host reads, counted in bytes, cost a request's latency per request,
 * not per page.
 * Since a read counts whether or not memory would have saved it, host reads the guest also
 * made with all the memory it can have (at its max: a stream, or reads of data that is
 * never reused) are its floor, and only reads above that floor count. That floor is the
 * stream verdict of a guest without the agent: it is learned only at max (where no memory
 * can save a read), never subtracts the guest's own faults (a stalling guest always gets
 * memory), and expires.
 *
 * The cost is judged over windows in seconds, not samples: the interval's cost, its average
 * over the window (what the workload paid), the window's lowest interval, and what the size
 * costs at rest, from its own intervals, a step's passing stall judged by the level its decay
 * tends to (rs_cost_window_settled()). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/signals.h"

typedef enum RsCostSource {
        RS_COST_NONE,      /* no rates this interval (first sample, reboot, a counter reset) */
        RS_COST_ESTIMATED, /* faults and host reads times the per-fault latency */
        RS_COST_PSI,       /* the guest's PSI memory "some" */
        _RS_COST_SOURCE_MAX,
} RsCostSource;

/* One interval. */
typedef struct RsCostInterval {
        RsCostSource source;
        double stall;           /* fraction of wall time, 0..1 (0 when source is NONE) */
        double fault_pages;     /* pages/s the guest faulted back (major faults, swap-ins), -1 unknown */
        double host_read_pages; /* pages/s QEMU read from the guest's disks, -1 unknown */
        double refaults;        /* agent: workingset refaults, pages/s, -1 unknown */
        double activations;     /* agent: workingset activations, pages/s, -1 unknown */
} RsCostInterval;

/* The interval's cost from its rates. host_read_floor: pages/s of host reads that do not
 * count (the stream floor, 0 for none); fault_latency_sec: seconds one fault costs;
 * host_read_page_sec: seconds one page of host reads costs (a read request's latency shared
 * by the pages it carries). */
void rs_cost_interval(const RsRates *rates,
                      double fault_latency_sec,
                      double host_read_page_sec,
                      double host_read_floor,
                      RsCostInterval *ret);

/* The window: the cost's average and its lowest interval, over window_sec. */
#define RS_COST_RING 64
typedef struct RsCostWindow {
        double window_sec;
        double mean;               /* exponentially weighted, time constant window_sec */
        bool known;
        double ring_stall[RS_COST_RING];
        uint64_t ring_at[RS_COST_RING];
        unsigned ring_next, ring_len;
} RsCostWindow;

void rs_cost_window_init(RsCostWindow *w, double window_sec);
/* Forgets what was measured (a reboot, a restart): the next interval starts it again. */
void rs_cost_window_reset(RsCostWindow *w);
void rs_cost_window_add(RsCostWindow *w, double stall, double interval_sec, uint64_t now_usec);
/* The lowest interval cost within the window ending at now_usec; -1 when none. */
double rs_cost_window_rest(const RsCostWindow *w, uint64_t now_usec);
/* What the size costs, from the intervals at it: those ending at or after since_usec (the
 * interval the size's move ended in, then the ones at it), at most the newest three.
 *   - Two or more, the newest not lower than the one before: the cost is not passing; the
 *     lower of the two is what the size costs (at once: a size that stalls is not kept for
 *     a whole window).
 *   - Three falling geometrically (each fall a constant share of the one before, as hot pages
 *     a step's reclaim took come back at the rate they are touched): passing (*passing set);
 *     their limit (Aitken's extrapolation), at least 0 and at most the newest, is what the
 *     size costs, however long the decay takes (no further below the newest than the three
 *     fell: noise on a steady cost can look like a slow decay).
 *   - Three falling otherwise: the newest.
 *   - Otherwise (the move's own interval alone, or two falling) -1: the size is not judged
 *     yet. */
double rs_cost_window_settled(const RsCostWindow *w, uint64_t since_usec, bool *passing);
/* Whether the cost at the size is still falling: of the intervals ending at or after
 * since_usec, the newest lower than the one before (false with fewer than two). */
bool rs_cost_window_falling(const RsCostWindow *w, uint64_t since_usec);
