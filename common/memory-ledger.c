/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "common/memory-ledger.h"

#include <stdio.h>
#include <string.h>

#define U MEM_LEDGER_UNKNOWN

static bool known(uint64_t v) {
        return v != U;
}

static uint64_t sub0(uint64_t a, uint64_t b) {
        return a > b ? a - b : 0;
}

static uint64_t min_u64(uint64_t a, uint64_t b) {
        return a < b ? a : b;
}

uint64_t mem_ledger_add(uint64_t a, uint64_t b) {
        if (!known(a))
                return b;
        if (!known(b))
                return a;
        /* One short of unknown: a sum of lies must not read as "not known". */
        return a > U - 1 - b ? U - 1 : a + b;
}

/* A guest's figure no bigger than `limit` (unknown: no limit), flagging the clamp. */
static uint64_t clamp_guest(uint64_t v, uint64_t limit, unsigned *flags) {
        if (known(v) && known(limit) && v > limit) {
                *flags |= MEM_LEDGER_CLAMPED;
                return limit;
        }
        return v;
}

void mem_ledger_compute(const MemLedgerInput *in, MemLedger *ret) {
        MemLedger l = { U, U, U, U, U, U, U, U, U, U, U, U, U, 0 };

        /* What the guest can have at most now: its size, or its configured size before that is
         * known. QEMU says these, not the guest; the guest's own figures are held to them. */
        uint64_t limit = known(in->actual) && in->actual > 0 ? in->actual : in->max;
        if (known(in->max) && known(limit) && limit > in->max)
                limit = in->max; /* a size above the configured one is not believed either */

        l.total = clamp_guest(in->guest_total, limit, &l.flags);
        uint64_t whole = known(l.total) ? l.total : limit;
        l.free = clamp_guest(in->guest_free, whole, &l.flags);
        /* The parts cannot exceed the whole: the cache gets what free leaves. */
        l.cache = clamp_guest(in->guest_cache, known(l.free) && known(whole) ? whole - l.free : whole, &l.flags);
        /* A guest that reports no cache (Windows) has it in "used". */
        if (known(l.total) && known(l.free))
                l.used = l.total - l.free - (known(l.cache) ? l.cache : 0);

        if (known(in->max) && known(in->actual))
                l.balloon = sub0(in->max, in->actual);

        l.rss = in->rss;
        l.swap = in->swap;
        l.ksm = in->ksm;
        if (known(in->rss)) {
                /* Swap unknown (a libvirt domain, an old kernel): counted as none. */
                l.held = mem_ledger_add(in->rss, known(in->swap) ? in->swap : 0);
                if (known(in->max))
                        l.host_returned = sub0(in->max, l.held);
                if (known(in->actual))
                        l.refilled = sub0(l.held, in->actual);
        }

        /* Of the host memory behind the guest's size, what the guest uses and caches is needed;
         * the rest can only be the guest's free pages, still held. Bounded by what the guest says
         * is free: more than that is QEMU's own, not the guest's. */
        if (known(l.held) && known(in->actual) && known(l.used) && known(l.free)) {
                uint64_t behind = min_u64(l.held, in->actual);
                uint64_t need = mem_ledger_add(l.used, known(l.cache) ? l.cache : 0);
                l.unreturned = min_u64(l.free, sub0(behind, need));
                l.reported = l.free - l.unreturned;
        }

        if (known(l.unreturned) && l.unreturned >= MEM_LEDGER_NOISE_BYTES) {
                if (in->free_page_reporting == 0)
                        l.flags |= MEM_LEDGER_NO_FPR;
                else if (in->free_page_reporting > 0)
                        l.flags |= in->thp_refills ? MEM_LEDGER_KHUGEPAGED : MEM_LEDGER_FRAGMENTED;
                if (known(in->swap) && in->swap >= MEM_LEDGER_NOISE_BYTES)
                        l.flags |= MEM_LEDGER_HOST_SWAP;
        }
        /* The host holding more than the guest has, with ballooned ranges khugepaged fills. */
        if (known(l.refilled) && l.refilled >= MEM_LEDGER_NOISE_BYTES && in->thp_refills && known(l.balloon) &&
            l.balloon > 0)
                l.flags |= MEM_LEDGER_KHUGEPAGED;
        *ret = l;
}

void mem_ledger_sum_init(MemLedgerSum *s) {
        *s = (MemLedgerSum) {};
        s->sum = (MemLedger) { U, U, U, U, U, U, U, U, U, U, U, U, U, 0 };
}

void mem_ledger_sum_add(MemLedgerSum *s, const MemLedger *l) {
        MemLedger *t = &s->sum;
        s->guests++;
        if (!known(l->held))
                s->unknown_held++;
        t->total = mem_ledger_add(t->total, l->total);
        t->used = mem_ledger_add(t->used, l->used);
        t->cache = mem_ledger_add(t->cache, l->cache);
        t->free = mem_ledger_add(t->free, l->free);
        t->balloon = mem_ledger_add(t->balloon, l->balloon);
        t->rss = mem_ledger_add(t->rss, l->rss);
        t->swap = mem_ledger_add(t->swap, l->swap);
        t->ksm = mem_ledger_add(t->ksm, l->ksm);
        t->held = mem_ledger_add(t->held, l->held);
        t->host_returned = mem_ledger_add(t->host_returned, l->host_returned);
        t->reported = mem_ledger_add(t->reported, l->reported);
        t->unreturned = mem_ledger_add(t->unreturned, l->unreturned);
        t->refilled = mem_ledger_add(t->refilled, l->refilled);
        t->flags |= l->flags;
}

static const struct {
        MemLedgerFlag flag;
        const char *key, *words;
} reasons[] = {
        { MEM_LEDGER_NO_FPR, "no-free-page-reporting", "no free page reporting" },
        { MEM_LEDGER_FRAGMENTED, "fragmented", "free memory not in whole 2 MiB blocks" },
        { MEM_LEDGER_KHUGEPAGED, "khugepaged", "khugepaged refill" },
        { MEM_LEDGER_HOST_SWAP, "host-swap", "host swap" },
        { MEM_LEDGER_CLAMPED, "clamped", "guest figures clamped" },
};

const char *mem_ledger_why(unsigned flags, char *buf, size_t len) {
        size_t at = 0;
        if (len == 0)
                return buf;
        buf[0] = '\0';
        for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
                if (!(flags & reasons[i].flag))
                        continue;
                int n = snprintf(buf + at, len - at, "%s%s", at ? ", " : "", reasons[i].words);
                if (n < 0 || (size_t) n >= len - at)
                        break; /* cut at the last whole reason that fits */
                at += (size_t) n;
        }
        buf[at] = '\0';
        return buf;
}

size_t mem_ledger_why_keys(unsigned flags, const char **ret, size_t n) {
        size_t k = 0;
        for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]) && k < n; i++)
                if (flags & reasons[i].flag)
                        ret[k++] = reasons[i].key;
        return k;
}
