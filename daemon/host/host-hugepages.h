/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Puts back the host's transparent huge pages under a QEMU guest's RAM: a pass reads which 4 KiB
 * pages of each 2 MiB range are resident (/proc/PID/pagemap) and collapses the ranges that
 * policies/hugepage-repair.h says are worth it, with process_madvise(MADV_COLLAPSE). Why: there.
 *
 * A pass works in bounded steps, so that a guest of hundreds of GiB does not hold the event loop:
 * each step reads at most max_ranges ranges' page map entries (8 bytes a page) and collapses at
 * most max_collapses of them (each one a 2 MiB allocation and copy in the host kernel).
 *
 * It needs ptrace read access to QEMU (the same user, or CAP_SYS_PTRACE) and CAP_SYS_NICE
 * (process_madvise on another process); without them a pass stops at its first step with
 * -EPERM or -EACCES. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

/* Anonymous private mappings smaller than this are not guest RAM (QEMU's heap, its stacks). */
#define HOST_HUGEPAGE_MIN_MAPPING (128 * 1024 * 1024ULL)

typedef struct HostHugepageStats {
        unsigned ranges;      /* 2 MiB ranges of guest RAM in the pass */
        unsigned scanned;     /* ranges whose residency was read */
        unsigned collapsed;   /* ranges put back on a huge page */
        unsigned failed;      /* ranges the kernel would not collapse (busy, pinned, no memory) */
        uint64_t filled;      /* holes filled by the collapses, bytes: what the host gave back */
} HostHugepageStats;

typedef struct HostHugepagePass HostHugepagePass;

/* A pass over QEMU process pid's guest RAM (its anonymous private read-write mappings of at least
 * HOST_HUGEPAGE_MIN_MAPPING) at the policy's percent. procfs: "/proc", or a test directory.
 * -ENOENT when it has no such mapping, -ESRCH when it is gone, -errno otherwise. */
int host_hugepage_pass_new(const char *procfs, pid_t pid, double percent, HostHugepagePass **ret);

/* One step: 1 when there is more to do, 0 when the pass is over, -errno when it stopped (the
 * stats say how far it got). */
int host_hugepage_pass_step(HostHugepagePass *p, unsigned max_ranges, unsigned max_collapses);

const HostHugepageStats *host_hugepage_pass_stats(const HostHugepagePass *p);

HostHugepagePass *host_hugepage_pass_free(HostHugepagePass *p);
