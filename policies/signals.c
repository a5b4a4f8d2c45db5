/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/signals.h"

#include "common/macro.h"

static const char *const level_names[_RS_LEVEL_MAX] = {
        [RS_LEVEL_TOTAL] = "total",
        [RS_LEVEL_FREE] = "free",
        [RS_LEVEL_AVAILABLE] = "available",
        [RS_LEVEL_DISK_CACHES] = "disk-caches",
        [RS_LEVEL_BALLOON_ACTUAL] = "balloon-actual",
        [RS_LEVEL_VIRTIO_MEM_SIZE] = "virtio-mem-size",
        [RS_LEVEL_BALLOON_TARGET] = "balloon-target",
        [RS_LEVEL_PSI_SOME_AVG10] = "psi-some-avg10",
        [RS_LEVEL_PSI_FULL_AVG10] = "psi-full-avg10",
        [RS_LEVEL_SWAP_TOTAL] = "swap-total",
        [RS_LEVEL_SWAP_FREE] = "swap-free",
        [RS_LEVEL_ANON_OLD] = "anon-old",
        [RS_LEVEL_FILE_OLD] = "file-old",
        [RS_LEVEL_HOST_MEM_AVAILABLE] = "host-mem-available",
        [RS_LEVEL_HOST_PSI_SOME_AVG10] = "host-psi-some-avg10",
        [RS_LEVEL_HOST_PSI_FULL_AVG10] = "host-psi-full-avg10",
        [RS_LEVEL_WMARK_MIN] = "wmark-min",
        [RS_LEVEL_WMARK_LOW] = "wmark-low",
        [RS_LEVEL_WMARK_HIGH] = "wmark-high",
        [RS_LEVEL_PCP_FREE] = "pcp-free",
};

static const char *const counter_names[_RS_COUNTER_MAX] = {
        [RS_COUNTER_MAJOR_FAULTS] = "major-faults",
        [RS_COUNTER_MINOR_FAULTS] = "minor-faults",
        [RS_COUNTER_SWAP_IN] = "swap-in",
        [RS_COUNTER_SWAP_OUT] = "swap-out",
        [RS_COUNTER_OOM_KILLS] = "oom-kills",
        [RS_COUNTER_ALLOC_STALLS] = "alloc-stalls",
        [RS_COUNTER_ASYNC_SCANS] = "async-scans",
        [RS_COUNTER_DIRECT_SCANS] = "direct-scans",
        [RS_COUNTER_ASYNC_RECLAIMS] = "async-reclaims",
        [RS_COUNTER_DIRECT_RECLAIMS] = "direct-reclaims",
        [RS_COUNTER_REFAULT_ANON] = "workingset_refault_anon",
        [RS_COUNTER_REFAULT_FILE] = "workingset_refault_file",
        [RS_COUNTER_ACTIVATE_ANON] = "workingset_activate_anon",
        [RS_COUNTER_ACTIVATE_FILE] = "workingset_activate_file",
        [RS_COUNTER_PGSCAN_KSWAPD] = "pgscan_kswapd",
        [RS_COUNTER_PGSCAN_DIRECT] = "pgscan_direct",
        [RS_COUNTER_PGSTEAL_KSWAPD] = "pgsteal_kswapd",
        [RS_COUNTER_PGSTEAL_DIRECT] = "pgsteal_direct",
        [RS_COUNTER_PSWPIN] = "pswpin",
        [RS_COUNTER_PSWPOUT] = "pswpout",
        [RS_COUNTER_PGMAJFAULT] = "pgmajfault",
        [RS_COUNTER_ALLOCSTALL] = "allocstall",
        [RS_COUNTER_OOM_KILL] = "oom_kill",
        [RS_COUNTER_PSI_SOME_TOTAL] = "psi-some-total",
        [RS_COUNTER_PSI_FULL_TOTAL] = "psi-full-total",
        [RS_COUNTER_HOST_DISK_READ] = "host-disk-read",
        [RS_COUNTER_HOST_DISK_READ_OPS] = "host-disk-read-ops",
        [RS_COUNTER_HOST_DISK_READ_TIME] = "host-disk-read-time",
};

void rs_sample_init(RsSample *s) {
        for (size_t i = 0; i < _RS_LEVEL_MAX; i++)
                s->level[i] = RS_UNKNOWN;
        for (size_t i = 0; i < _RS_COUNTER_MAX; i++)
                s->counter[i] = RS_UNKNOWN;
}

const char *rs_level_name(RsLevel l) {
        return l >= 0 && l < _RS_LEVEL_MAX ? level_names[l] : NULL;
}

const char *rs_counter_name(RsCounter c) {
        return c >= 0 && c < _RS_COUNTER_MAX ? counter_names[c] : NULL;
}

bool rs_counter_is_balloon(RsCounter c) {
        return c >= RS_COUNTER_MAJOR_FAULTS && c <= RS_COUNTER_DIRECT_RECLAIMS;
}

bool rs_counter_is_agent(RsCounter c) {
        return c >= RS_COUNTER_REFAULT_ANON && c <= RS_COUNTER_PSI_FULL_TOTAL;
}

bool rs_counter_is_host(RsCounter c) {
        return c >= RS_COUNTER_HOST_DISK_READ && c <= RS_COUNTER_HOST_DISK_READ_TIME;
}

void rs_sample_sanitize(RsSample *s, uint64_t mem_max) {
        /* Guest-reported sizes above twice the largest possible guest are lies. The balloon
         * actual and virtio-mem size come from QEMU, not the guest, but get the same check. */
        if (mem_max > 0) {
                uint64_t limit = mem_max > UINT64_MAX / 2 ? UINT64_MAX - 1 : mem_max * 2;
                static const RsLevel sized[] = {
                        RS_LEVEL_TOTAL,          RS_LEVEL_FREE,           RS_LEVEL_AVAILABLE,
                        RS_LEVEL_DISK_CACHES,    RS_LEVEL_BALLOON_ACTUAL, RS_LEVEL_VIRTIO_MEM_SIZE, RS_LEVEL_BALLOON_TARGET,
                        RS_LEVEL_ANON_OLD,       RS_LEVEL_FILE_OLD,       RS_LEVEL_WMARK_MIN,
                        RS_LEVEL_WMARK_LOW,      RS_LEVEL_WMARK_HIGH,     RS_LEVEL_PCP_FREE,
                };
                for (size_t i = 0; i < ARRAY_SIZE(sized); i++)
                        if (rs_known(s->level[sized[i]]) && s->level[sized[i]] > limit)
                                s->level[sized[i]] = RS_UNKNOWN;
        }

        /* Parts cannot exceed the whole. When they do, we cannot tell which one lies:
         * drop the parts, keep total (it is cross-checked against the balloon later). */
        uint64_t total = s->level[RS_LEVEL_TOTAL];
        if (rs_known(total)) {
                if (total == 0)
                        s->level[RS_LEVEL_TOTAL] = RS_UNKNOWN;
                static const RsLevel parts[] = { RS_LEVEL_FREE,      RS_LEVEL_AVAILABLE, RS_LEVEL_DISK_CACHES,
                                                 RS_LEVEL_ANON_OLD,  RS_LEVEL_FILE_OLD,  RS_LEVEL_WMARK_MIN,
                                                 RS_LEVEL_WMARK_LOW, RS_LEVEL_WMARK_HIGH, RS_LEVEL_PCP_FREE };
                for (size_t i = 0; i < ARRAY_SIZE(parts); i++)
                        if (rs_known(s->level[parts[i]]) && s->level[parts[i]] > total)
                                s->level[parts[i]] = RS_UNKNOWN;
        }
        /* Free pages on the per-CPU lists are free pages MemFree leaves out: the two together
         * above the whole, the lists (the later reading, from another file) are the lie. */
        if (rs_known(total) && rs_known(s->level[RS_LEVEL_PCP_FREE]) && rs_known(s->level[RS_LEVEL_FREE]) &&
            s->level[RS_LEVEL_PCP_FREE] > total - MIN(total, s->level[RS_LEVEL_FREE]))
                s->level[RS_LEVEL_PCP_FREE] = RS_UNKNOWN;
        /* MemAvailable is free plus reclaimable, minus the kernel's reserves (watermarks and
         * lowmem reserves, sized for all the guest's memory, ballooned or not): it sits below
         * free by up to those reserves, never far below. A squeezed 1 GiB guest reports
         * 65 MiB free and 0 available (measured), so the slack grows with the guest. */
        uint64_t whole = rs_known(s->level[RS_LEVEL_TOTAL]) ? s->level[RS_LEVEL_TOTAL] : mem_max;
        uint64_t reserve_slack = 64 * MIB + MIN(whole, UINT64_MAX / 2) / 8;
        if (rs_known(s->level[RS_LEVEL_FREE]) && rs_known(s->level[RS_LEVEL_AVAILABLE]) &&
            s->level[RS_LEVEL_FREE] - MIN(s->level[RS_LEVEL_FREE], reserve_slack) >
                    s->level[RS_LEVEL_AVAILABLE] + s->level[RS_LEVEL_AVAILABLE] / 2) {
                s->level[RS_LEVEL_FREE] = RS_UNKNOWN;
                s->level[RS_LEVEL_AVAILABLE] = RS_UNKNOWN;
        }

        /* The watermarks come as a set, min <= low <= high, high not 0: any other is a lie, all dropped. */
        uint64_t wmin = s->level[RS_LEVEL_WMARK_MIN], wlow = s->level[RS_LEVEL_WMARK_LOW], whigh = s->level[RS_LEVEL_WMARK_HIGH];
        if (!(rs_known(wmin) && rs_known(wlow) && rs_known(whigh) && wmin <= wlow && wlow <= whigh && whigh > 0))
                s->level[RS_LEVEL_WMARK_MIN] = s->level[RS_LEVEL_WMARK_LOW] = s->level[RS_LEVEL_WMARK_HIGH] = RS_UNKNOWN;

        if (rs_known(s->level[RS_LEVEL_SWAP_FREE]) && rs_known(s->level[RS_LEVEL_SWAP_TOTAL]) &&
            s->level[RS_LEVEL_SWAP_FREE] > s->level[RS_LEVEL_SWAP_TOTAL])
                s->level[RS_LEVEL_SWAP_FREE] = s->level[RS_LEVEL_SWAP_TOTAL] = RS_UNKNOWN;

        static const RsLevel psi[] = {
                RS_LEVEL_PSI_SOME_AVG10,
                RS_LEVEL_PSI_FULL_AVG10,
                RS_LEVEL_HOST_PSI_SOME_AVG10,
                RS_LEVEL_HOST_PSI_FULL_AVG10,
        };
        for (size_t i = 0; i < ARRAY_SIZE(psi); i++)
                if (rs_known(s->level[psi[i]]) && s->level[psi[i]] > 10000)
                        s->level[psi[i]] = RS_UNKNOWN;
}

double rs_counter_max_rate(RsCounter c) {
        switch (c) {
        case RS_COUNTER_SWAP_IN:
        case RS_COUNTER_SWAP_OUT:
        case RS_COUNTER_HOST_DISK_READ:
                return 64.0 * GIB; /* bytes/s: beyond any swap device */
        case RS_COUNTER_OOM_KILLS:
        case RS_COUNTER_OOM_KILL:
                return 1000.0;
        case RS_COUNTER_HOST_DISK_READ_TIME:
                /* ns/s: reads in flight together each add their own time, so this is wall
                 * time times the reads in flight: at most 64 queues of 1024 (virtio-blk's
                 * largest) on each of 16 disks */
                return 1e9 * 64 * 1024 * 16;
        case RS_COUNTER_PSI_SOME_TOTAL:
        case RS_COUNTER_PSI_FULL_TOTAL:
                /* Stall time is wall time: at most one second per second, plus slack for
                 * the guest and host clocks sampling at slightly different moments. */
                return 2.0 * USEC_PER_SEC;
        default:
                return 16.0 * 1024 * 1024; /* pages or events/s: 64 GiB/s of 4 KiB pages */
        }
}

void rs_rate_tracker_init(RsRateTracker *t) {
        *t = (RsRateTracker) {};
        for (size_t i = 0; i < _RS_COUNTER_MAX; i++)
                t->prev[i] = RS_UNKNOWN;
}

static void remember(RsRateTracker *t, const RsSample *s, uint64_t now_usec) {
        for (size_t i = 0; i < _RS_COUNTER_MAX; i++) {
                t->prev[i] = s->counter[i];
                t->prev_at[i] = now_usec;
                t->backwards[i] = 0;
        }
        t->prev_usec = now_usec;
        t->have_prev = true;
}

/* A 32-bit counter (a 32-bit guest kernel's unsigned long) that passed 2^32: the previous
 * value was in the top quarter of the 32-bit range and the new one is in the bottom one. */
static bool wrapped32(uint64_t prev, uint64_t cur, uint64_t *delta) {
        if (prev > UINT32_MAX || cur >= prev)
                return false;
        if (prev < UINT32_MAX - UINT32_MAX / 4 || cur > UINT32_MAX / 4)
                return false;
        *delta = (UINT32_MAX - prev) + cur + 1;
        return true;
}

RsRateEvent rs_rate_tracker_feed(RsRateTracker *t, const RsSample *s, uint64_t now_usec, RsRates *ret) {
        *ret = (RsRates) {};

        if (!t->have_prev) {
                remember(t, s, now_usec);
                return (ret->event = RS_RATE_FIRST);
        }
        if (now_usec <= t->prev_usec) {
                /* Keep the older reference point: the next sample with a later time
                 * measures from it. */
                return (ret->event = RS_RATE_TIME_SKEW);
        }

        unsigned compared = 0, backwards = 0;
        for (size_t i = 0; i < _RS_COUNTER_MAX; i++) {
                uint64_t d;
                /* QEMU's counters go on through a guest reboot: they would only outvote it */
                if (!rs_known(s->counter[i]) || !rs_known(t->prev[i]) || rs_counter_is_host(i))
                        continue;
                compared++;
                if (s->counter[i] < t->prev[i] && !wrapped32(t->prev[i], s->counter[i], &d))
                        backwards++;
        }

        /* A reboot zeroes every counter at once; a single one going backwards is a driver
         * or agent glitch (or a lie) and only that counter restarts. */
        if (backwards >= 2 && backwards * 2 >= compared) {
                t->n_reboots++;
                remember(t, s, now_usec);
                return (ret->event = RS_RATE_REBOOT);
        }

        ret->interval_sec = (double) (now_usec - t->prev_usec) / USEC_PER_SEC;
        for (size_t i = 0; i < _RS_COUNTER_MAX; i++) {
                uint64_t cur = s->counter[i], prev = t->prev[i], delta;
                if (!rs_known(cur) || !rs_known(prev)) {
                        t->prev[i] = cur;
                        t->prev_at[i] = now_usec;
                        continue;
                }
                if (cur >= prev)
                        delta = cur - prev;
                else if (!wrapped32(prev, cur, &delta)) {
                        /* One counter below its last value: believe a reset only when it
                         * stays below for a second sample. A one-off lie would otherwise
                         * turn into a huge spike when the real value comes back. */
                        ret->n_resets++;
                        if (++t->backwards[i] >= 2) {
                                t->backwards[i] = 0;
                                t->prev[i] = cur;
                                t->prev_at[i] = now_usec;
                        }
                        continue;
                }
                t->backwards[i] = 0;
                double rate = (double) delta / ((double) (now_usec - t->prev_at[i]) / USEC_PER_SEC);
                if (rate > rs_counter_max_rate(i)) {
                        /* Impossible: keep measuring from the last believable value, so
                         * one absurd report costs one interval and no false reset. */
                        ret->n_dropped++;
                        continue;
                }
                ret->per_sec[i] = rate;
                ret->known[i] = true;
                t->prev[i] = cur;
                t->prev_at[i] = now_usec;
        }

        t->prev_usec = now_usec;
        return (ret->event = RS_RATE_NONE);
}
