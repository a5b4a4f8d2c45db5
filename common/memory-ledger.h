/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where a guest's memory is, as the guest and the host each see it, reconciled: what the guest
 * uses, caches and has free (its balloon stats), what its balloon holds, and what the host holds
 * for it (QEMU's RSS, its pages in host swap, KSM). The one thing an operator wants from it: the
 * memory the host never got back, and why (issue 38: no free page reporting, khugepaged filling
 * the holes back in, host swap).
 *
 * Pure arithmetic, shared by the daemon (its metrics) and rightsizectl (`report`), so the two
 * can never disagree. Every figure may be unknown (MEM_LEDGER_UNKNOWN); the guest's figures are
 * untrusted: a guest may claim 2^64 - 2 bytes free. They are clamped to the guest's size (and the
 * parts to the whole) and the ledger says it clamped, so no sum overflows and no lie moves a
 * figure past what the guest can have. Host figures come from the host's own /proc and are
 * summed saturating all the same. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEM_LEDGER_UNKNOWN UINT64_MAX

/* Below this, memory the host holds beyond what it needs is QEMU's own overhead and noise: no
 * reason is named for it. */
#define MEM_LEDGER_NOISE_BYTES (UINT64_C(64) * 1024 * 1024)

typedef struct MemLedgerInput {
        uint64_t max;          /* the most the guest can have (its configured size) */
        uint64_t actual;       /* its size now: max less the balloon (and virtio-mem unplugged) */
        /* the guest's own balloon stats (stat-total-memory, stat-free-memory, stat-disk-caches):
         * untrusted */
        uint64_t guest_total, guest_free, guest_cache;
        int free_page_reporting; /* 1 on, 0 off, -1 unknown */
        /* the host's: QEMU's VmRSS and VmSwap, its KSM-merged pages in bytes */
        uint64_t rss, swap, ksm;
        bool thp_refills;      /* the host's khugepaged fills ballooned ranges back in (host-thp.h) */
} MemLedgerInput;

typedef enum MemLedgerFlag {
        MEM_LEDGER_CLAMPED = 1 << 0,     /* a guest figure was absurd and was clamped */
        MEM_LEDGER_NO_FPR = 1 << 1,      /* free pages stay resident: no free page reporting */
        MEM_LEDGER_FRAGMENTED = 1 << 2,  /* free page reporting on, yet free memory held: it
                                          * reports only whole 2 MiB blocks, and lags */
        MEM_LEDGER_KHUGEPAGED = 1 << 3,  /* khugepaged refilled what the balloon or reporting returned */
        MEM_LEDGER_HOST_SWAP = 1 << 4,   /* the host swapped guest memory out instead of getting it back */
} MemLedgerFlag;

typedef struct MemLedger {
        /* The guest's view, clamped: used + cache + free = total <= actual. */
        uint64_t total, used, cache, free;
        uint64_t balloon;      /* max - actual: what the balloon (and virtio-mem) holds back */
        /* The host's view. */
        uint64_t rss, swap, ksm;
        uint64_t held;         /* rss + swap: what the host spends on the guest */
        uint64_t host_returned; /* max - held: what the host got back, by any means */
        uint64_t reported;     /* the guest's free memory the host does not hold: reported free
                                * (free page reporting) or never touched */
        uint64_t unreturned;   /* the guest's free memory the host still holds (RSS or swap) */
        uint64_t refilled;     /* held beyond the guest's size: the balloon's holes filled back
                                * in (khugepaged), and QEMU's own memory */
        unsigned flags;        /* MemLedgerFlag */
} MemLedger;

/* Every output figure is MEM_LEDGER_UNKNOWN when an input it needs is. */
void mem_ledger_compute(const MemLedgerInput *in, MemLedger *ret);

/* A host's: the guests' figures summed (saturating; an unknown figure is left out and counted
 * in `unknown`), their flags or'ed. */
typedef struct MemLedgerSum {
        size_t guests;
        MemLedger sum;         /* unknown only where no guest knew it */
        size_t unknown_held;   /* guests whose RSS is not known */
} MemLedgerSum;
void mem_ledger_sum_init(MemLedgerSum *s);
void mem_ledger_sum_add(MemLedgerSum *s, const MemLedger *l);

/* a + b, saturating at MEM_LEDGER_UNKNOWN - 1; unknown plus known is the known one. */
uint64_t mem_ledger_add(uint64_t a, uint64_t b);

/* The reasons the memory was not returned, in words, comma-separated ("no free page reporting,
 * host swap"); "" when there is none. buf at least MEM_LEDGER_WHY_MAX. */
#define MEM_LEDGER_WHY_MAX 128
const char *mem_ledger_why(unsigned flags, char *buf, size_t len);
/* The same as an array of short keys ("no-free-page-reporting", "fragmented", "khugepaged",
 * "host-swap"; "clamped" too), for JSON and metric labels: the count written, at most n. */
size_t mem_ledger_why_keys(unsigned flags, const char **ret, size_t n);
