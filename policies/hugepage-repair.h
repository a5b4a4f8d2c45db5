/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* When to put back the host's transparent huge pages under a guest's RAM, and which ones.
 *
 * The balloon takes guest pages 4 KiB at a time and QEMU discards each one, which splits the
 * host huge page under it: the guest pages that stay, its working set among them, are then
 * mapped 4 KiB at a time on the host, and every TLB miss on them walks the host's page tables
 * to the last level. A descent that pushed the set to swap makes it worse: the pages freed by
 * the swap-out lie among the set's, the balloon takes them, and the set comes back scattered
 * over split ranges. The host's khugepaged puts huge pages back on its own, but slowly (16 MiB
 * every 10 s by default), and it fills up to 511 holes per range, handing the balloon's memory
 * back to the guest.
 *
 * So after the balloon went down and then stayed put (the descent or re-probe is over, what it
 * pushed out is back), rightsized collapses the 2 MiB ranges of guest RAM that are at least
 * hugepage-repair % resident (MADV_COLLAPSE through process_madvise): each one costs the host
 * at most (100 - hugepage-repair) % of 2 MiB of holes filled, and gives the pages in it their
 * huge page back: a set the balloon broke into 4 KiB pages runs its passes several times slower
 * (a TLB miss a page), and most of that comes back once collapsed (BENCHMARKS.md, Placement). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define RS_HUGEPAGE_PAGES 512u /* 4 KiB pages in a 2 MiB range */

typedef struct RsHugepageRepair {
        uint64_t size;         /* the balloon's actual size last seen, or RS_UNKNOWN */
        uint64_t steady_since; /* when it last moved by more than the tolerance */
        uint64_t last_pass;    /* when the last pass was started, or RS_UNKNOWN */
        bool went_down;        /* the size went down since the last pass: huge pages were split */
} RsHugepageRepair;

/* A size within this of the last one is the same (the balloon's actual size wobbles). */
#define RS_HUGEPAGE_REPAIR_TOLERANCE (1024 * 1024)
/* How long the size stays put before a pass: what the descent pushed out comes back first. */
#define RS_HUGEPAGE_REPAIR_SETTLE_USEC (30 * 1000000ULL)
/* Passes are at least this far apart, however often the balloon moves. */
#define RS_HUGEPAGE_REPAIR_MIN_GAP_USEC (60 * 1000000ULL)

void rs_hugepage_repair_init(RsHugepageRepair *r);

/* One sample of the guest's actual size at now (monotonic µs). True when a repair pass is due
 * now: the size went down since the last pass, has stayed within the tolerance for the settle
 * time, and the last pass began at least the minimum gap ago. The caller starts the pass. */
bool rs_hugepage_repair_sample(RsHugepageRepair *r, uint64_t actual, uint64_t now);

/* Whether a 2 MiB range with `resident` of its RS_HUGEPAGE_PAGES pages resident is collapsed at
 * a policy of `percent` (0: never; a range with none resident never: nothing to give back). */
bool rs_hugepage_range_worth(unsigned resident, double percent);
