/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/model/guest-model-v2.h"

#include <math.h>
#include <string.h>

#include "common/macro.h"

#define PAGE SHAPE_PAGE
#define DEFLATE_BYTES_PER_SEC (1024.0 * MIB)  /* giving memory back is as fast as the host maps it */
#define PUSHBACK_SLACK (4.0 * MIB)             /* the balloon stops this far above what cannot be freed */
#define DIRECT_STALL_SHARE 0.5                 /* of the time a direct reclaim takes, the share the workload's tasks wait */
#define SWAP_CLUSTER_PAGES 32.0                /* pages per direct reclaim pass (SWAP_CLUSTER_MAX): one allocstall each */
#define SCAN_PER_STEAL_FILE 1.2                /* pages scanned per page reclaimed: cold page cache goes easily */
#define SCAN_PER_STEAL_ANON 2.5                /* ... anonymous pages are rotated more before they go */
#define PSI_FULL_SHARE 0.5                     /* of the time some task stalls, the share all do */
#define STREAM_REFAULT_SHARE 0.9               /* of a cyclic stream's reads, the pages read before (the rest is new) */
#define MINOR_FAULTS_PER_SEC 800.0
#define EVICTION_AVERAGE_SEC 10.0              /* the eviction rate refault distances are judged by */
#define SLAB_RECLAIMABLE_SHARE 0.2             /* of the kernel's memory, reclaimable slab (MemAvailable counts half) */
/* The daemon's MGLRU aging period: older generations are "old". Half an hour: a page idle that
 * long and needed after all faults once per half hour, which a start that leaves it out can afford
 * to find out (the cost shows it); at five minutes a slow loop's pages counted as idle. */
#define LRU_GEN_AGE_SEC 1800.0

/* xorshift64*: the counters' jitter, reproducible from the draw's seed. */
static double rng_unit(GuestModelV2 *m) {
        uint64_t x = m->rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        m->rng = x;
        return (double) ((x * UINT64_C(2685821657736338717)) >> 11) / 9007199254740992.0;
}

/* Adds to a counter with the draw's relative jitter (the truth stays exact). */
static void count(GuestModelV2 *m, RsCounter c, double v) {
        if (v > 0)
                m->c[c] += v * (1.0 + m->w.noise * (2.0 * rng_unit(m) - 1.0));
}

/* What a tier has in memory: its resident range less the holes collateral made in it. */
static double tier_in_memory(const GuestModelV2 *m, unsigned i) {
        return m->resident[i] - m->holes[i];
}

static double lru_bytes(const GuestModelV2 *m) {
        double b = m->idle_anon + m->idle_file + m->stream_cache;
        for (unsigned i = 0; i < m->phase.n_tiers; i++)
                b += tier_in_memory(m, i);
        return b;
}

static double page_cache_bytes(const GuestModelV2 *m) {
        double b = m->idle_file + m->stream_cache;
        for (unsigned i = 0; i < m->phase.n_tiers; i++)
                if (m->phase.tier[i].backing == SHAPE_FILE)
                        b += tier_in_memory(m, i);
        return b;
}

/* Per-CPU free lists (mm/page_alloc.c, kernel 5.14 and later): an order-0 page freed parks on
 * its CPU's list, up to the list's high mark (zone_highsize(): the zone's low watermark, split
 * among the zone's CPUs, so the lists together hold up to the low watermark), and an
 * allocation takes from the list first. Those pages are not in NR_FREE_PAGES: MemFree,
 * MemAvailable and the watermark checks do not see them. While kswapd reclaims the zone
 * (ZONE_RECLAIM_ACTIVE, nr_pcp_high()) a list keeps four batches at most, and what it frees
 * goes to the buddy lists. A 1 GiB Debian 12 guest (kernel 6.1) showed it: a 70 MiB deflation
 * raised MemFree by 32 MiB, with 49 MiB on its list against a high mark of 54 MiB. */
#define PCP_RECLAIM_BYTES (4.0 * 63 * PAGE) /* four batches of 63 pages */

static double pcp_high(const GuestModelV2 *m) {
        if (!m->w.per_cpu_lists)
                return 0;
        return m->reclaim_active ? MIN(m->wm.low, PCP_RECLAIM_BYTES) : m->wm.low;
}

/* Free memory as the kernel counts it (NR_FREE_PAGES): the buddy lists'. */
static double buddy_free(const GuestModelV2 *m) {
        return m->free - m->pcp;
}

static void take_free(GuestModelV2 *m, double bytes) {
        m->free -= bytes;
        m->pcp = MAX(0.0, m->pcp - MAX(0.0, bytes));
}

static void give_free(GuestModelV2 *m, double bytes) {
        m->free += bytes;
        m->pcp = MIN(m->pcp + MAX(0.0, bytes), pcp_high(m));
}

/* Anonymous memory that cannot leave: all of it without swap. */
static double pinned_bytes(const GuestModelV2 *m) {
        if (m->w.swap_bytes > 0)
                return 0;
        double b = m->idle_anon;
        for (unsigned i = 0; i < m->phase.n_tiers; i++)
                if (m->phase.tier[i].backing == SHAPE_ANON)
                        b += tier_in_memory(m, i);
        return b;
}

static bool can_evict(const GuestModelV2 *m, ShapeBacking b) {
        return b == SHAPE_FILE || m->swapped < m->w.swap_bytes;
}

/* Pages evicted: the counters reclaim moves. */
static void count_eviction(GuestModelV2 *m, double bytes, ShapeBacking b, double direct_share, double *evicted) {
        double pages = bytes / PAGE;
        double scan = pages * (b == SHAPE_ANON ? SCAN_PER_STEAL_ANON : SCAN_PER_STEAL_FILE);
        count(m, RS_COUNTER_PGSTEAL_KSWAPD, pages * (1 - direct_share));
        count(m, RS_COUNTER_PGSTEAL_DIRECT, pages * direct_share);
        count(m, RS_COUNTER_PGSCAN_KSWAPD, scan * (1 - direct_share));
        count(m, RS_COUNTER_PGSCAN_DIRECT, scan * direct_share);
        if (b == SHAPE_ANON) {
                m->swapped += bytes;
                count(m, RS_COUNTER_PSWPOUT, pages);
        }
        *evicted += bytes;
}

/* The touch rate of a tier's coldest resident page. */
static double coldest_rate(const GuestModelV2 *m, unsigned i) {
        const ShapeTier *t = &m->phase.tier[i];
        if (t->access != SHAPE_ZIPF)
                return shape_tier_rate_max(t);
        return shape_tier_rate_max(t) * pow(MAX(m->resident[i] / PAGE, 1.0), -t->theta);
}

/* Evicts up to `need` bytes, the coldest pages first. Returns the bytes evicted. */
static double reclaim_coldest(GuestModelV2 *m, double need, double direct_share) {
        double got = 0, take;

        take = MIN(need - got, m->stream_cache);
        m->stream_cache -= take;
        count_eviction(m, take, SHAPE_FILE, direct_share, &got);
        take = MIN(need - got, m->idle_file);
        m->idle_file -= take;
        count_eviction(m, take, SHAPE_FILE, direct_share, &got);
        if (can_evict(m, SHAPE_ANON)) {
                take = MIN(MIN(need - got, m->idle_anon), m->w.swap_bytes - m->swapped);
                m->idle_anon -= take;
                count_eviction(m, take, SHAPE_ANON, direct_share, &got);
        }

        /* Then the tiers, the one whose coldest resident page is touched least often first, down
         * to the next tier's rate (a Zipf tier gives its tail a rank at a time). */
        for (int round = 0; round < 64 && got < need; round++) {
                int pick = -1;
                double pick_rate = INFINITY, next_rate = INFINITY;
                for (unsigned i = 0; i < m->phase.n_tiers; i++) {
                        if (tier_in_memory(m, i) <= 0 || !can_evict(m, m->phase.tier[i].backing))
                                continue;
                        double r = coldest_rate(m, i);
                        if (r < pick_rate) {
                                next_rate = pick_rate;
                                pick_rate = r;
                                pick = (int) i;
                        } else
                                next_rate = MIN(next_rate, r);
                }
                if (pick < 0)
                        break;
                const ShapeTier *t = &m->phase.tier[pick];
                double avail = m->resident[pick];
                if (t->access == SHAPE_ZIPF && next_rate < INFINITY) {
                        double keep = pow(shape_tier_rate_max(t) / next_rate, 1.0 / t->theta) * PAGE;
                        avail = MAX(MIN(avail, 1.0 * MIB), m->resident[pick] - keep);
                }
                /* the coldest end of the range goes, with the holes that were in it */
                double hole_share = m->holes[pick] / m->resident[pick];
                take = MIN((need - got) / MAX(1e-9, 1 - hole_share), avail);
                if (t->backing == SHAPE_ANON)
                        take = MIN(take, (m->w.swap_bytes - m->swapped) / MAX(1e-9, 1 - hole_share));
                m->resident[pick] -= take;
                m->holes[pick] -= take * hole_share;
                count_eviction(m, take * (1 - hole_share), t->backing, direct_share, &got);
        }
        return got;
}

/* Hot pages a balloon step's reclaim takes along with the cold ones, from every tier it
 * scans in proportion to what the tier has in memory, at random within it: holes among its
 * hottest pages, which come back at the rate those pages are touched (not at its coldest
 * pages' rate). While cold page cache lasts the kernel scans the file LRU only (6.1's
 * cache_trim_mode), so only file tiers lose pages; past it, anonymous ones too. */
static bool collateral_may_take(const GuestModelV2 *m, ShapeBacking b, bool file_only) {
        return can_evict(m, b) && (b == SHAPE_FILE || !file_only);
}

static double evict_collateral(GuestModelV2 *m, double bytes, bool file_only, double direct_share) {
        double evictable = 0, got = 0;
        for (unsigned i = 0; i < m->phase.n_tiers; i++)
                if (collateral_may_take(m, m->phase.tier[i].backing, file_only))
                        evictable += tier_in_memory(m, i);
        if (evictable <= 0 || bytes <= 0)
                return 0;
        double f = MIN(1.0, bytes / evictable);
        for (unsigned i = 0; i < m->phase.n_tiers; i++) {
                ShapeBacking b = m->phase.tier[i].backing;
                if (!collateral_may_take(m, b, file_only))
                        continue;
                double take = tier_in_memory(m, i) * f;
                if (b == SHAPE_ANON)
                        take = MIN(take, m->w.swap_bytes - m->swapped);
                m->holes[i] += take;
                count_eviction(m, take, b, direct_share, &got);
        }
        return got;
}

/* Reclaim from under the low watermark up to the high one. from_balloon: the bytes of it the
 * balloon's inflation caused (they take collateral); direct: bytes below the min watermark,
 * reclaimed by tasks that stall for it. Returns the bytes evicted. */
static double reclaim(GuestModelV2 *m, double from_balloon, double direct) {
        double need = m->wm.high - buddy_free(m);
        if (need <= 0)
                return 0;
        m->reclaim_active = true;
        m->pcp = MIN(m->pcp, pcp_high(m)); /* the lists' excess goes to the buddy lists */
        need = m->wm.high - buddy_free(m);
        if (need <= 0)
                return 0;
        double direct_share = MIN(1.0, MAX(0.0, direct / need));
        double collateral = 0;
        if (from_balloon > 0) {
                double cold = m->stream_cache + m->idle_file;
                double beyond = MAX(0.0, from_balloon - cold);
                double swaps = m->w.swap_bytes > 0 ? m->w.collateral_anon : m->w.collateral_cold;
                collateral = evict_collateral(m, m->w.collateral_cold * MIN(from_balloon, cold), true, direct_share);
                collateral += evict_collateral(m, swaps * beyond, m->w.swap_bytes <= 0, direct_share);
                m->step_collateral += collateral;
                m->total_collateral += collateral;
        }
        double got = collateral + reclaim_coldest(m, need - collateral, direct_share);
        give_free(m, got);
        count(m, RS_COUNTER_ALLOCSTALL, direct / PAGE / SWAP_CLUSTER_PAGES);
        return got;
}

/* The shape moved (a phase change): a set that grows has pages never read; one that
 * shrinks leaves its file pages behind as page cache nobody reads, and frees its anonymous
 * ones. */
static void apply_phase(GuestModelV2 *m, const ShapePhase *np) {
        for (unsigned i = 0; i < np->n_tiers; i++) {
                double was = m->phase.tier[i].bytes, now = np->tier[i].bytes;
                if (now > was)
                        m->unseen[i] += now - was;
                else if (now < was) {
                        double f = was > 0 ? now / was : 0;
                        double dropped = tier_in_memory(m, i) * (1 - f);
                        double kept = m->resident[i] * f;
                        m->resident[i] = kept;
                        m->holes[i] *= f;
                        if (np->tier[i].backing == SHAPE_FILE)
                                m->idle_file += dropped;
                        else
                                give_free(m, dropped);
                        m->unseen[i] = MIN(m->unseen[i], now - kept);
                }
        }
        if (np->idle_anon_bytes < m->idle_anon) {
                give_free(m, m->idle_anon - np->idle_anon_bytes);
                m->idle_anon = np->idle_anon_bytes;
        }
        m->phase = *np;
}

/* Nothing left to reclaim: anonymous memory that fits nowhere. The OOM killer kills the
 * workload's process with the most anonymous memory resident; it restarts at once and
 * allocates its set again (new pages, not refaults), and is killed again if it still does
 * not fit, as a service restarted by its supervisor is. */
static void oom_kill(GuestModelV2 *m) {
        int victim = -1;
        double most = 0;
        for (unsigned i = 0; i < m->phase.n_tiers; i++)
                if (m->phase.tier[i].backing == SHAPE_ANON && (victim < 0 || tier_in_memory(m, i) > most)) {
                        victim = (int) i;
                        most = tier_in_memory(m, i);
                }
        m->oom_kills++;
        m->c[RS_COUNTER_OOM_KILL] += 1;
        if (victim >= 0 && m->resident[victim] > 0) {
                give_free(m, tier_in_memory(m, victim));
                m->resident[victim] = m->holes[victim] = 0;
                m->unseen[victim] = m->phase.tier[victim].bytes;
        }
        m->free = MAX(m->free, m->wm.min + m->pcp);
}

/* The guest's OOM path (mm/oom_kill.c, out_of_memory()) calls the OOM notifiers before it
 * picks a victim. virtio-balloon registers one when the device offers
 * VIRTIO_BALLOON_F_DEFLATE_ON_OOM (drivers/virtio/virtio_balloon.c, virtballoon_probe()):
 * virtio_balloon_oom_notify() leaks up to VIRTIO_BALLOON_OOM_NR_PAGES (256) 4 KiB pages of
 * the balloon back to the guest and writes the balloon's new actual size for QEMU (its target
 * stays: the host sees the balloon above it), and out_of_memory() returns "got some memory
 * back" without killing; the page allocator retries, and comes back here while allocations
 * still fail, 1 MiB at a time, until the balloon is empty. Only then does the killer run.
 * What a call costs the workload: the allocation reached the OOM path after one direct
 * reclaim pass that freed nothing (mm/page_alloc.c, should_reclaim_retry() gives up at once
 * when free and reclaimable memory together cannot meet the min watermark): one allocstall
 * and SWAP_CLUSTER_PAGES pages' worth of direct reclaim time, waited for as direct reclaim is. */
#define OOM_NOTIFY_BYTES (256 * 4096.0) /* VIRTIO_BALLOON_OOM_NR_PAGES 4 KiB pages */
static void out_of_memory(GuestModelV2 *m) {
        while (m->w.deflate_on_oom && buddy_free(m) < m->wm.min && m->size < m->w.boot_bytes) {
                double give = MIN(OOM_NOTIFY_BYTES, m->w.boot_bytes - m->size);
                m->size += give;
                give_free(m, give);
                m->oom_deflated += give;
                m->oom_notify_stall_bytes += SWAP_CLUSTER_PAGES * PAGE;
                m->c[RS_COUNTER_ALLOCSTALL] += 1;
        }
        if (buddy_free(m) < m->wm.min)
                oom_kill(m);
}

static double tier_latency(const GuestModelV2 *m, const ShapeTier *t) {
        return t->backing == SHAPE_ANON ? m->w.anon_miss_sec : m->w.file_miss_sec;
}

static void one_second(GuestModelV2 *m) {
        const double dt = 1.0;
        m->now_sec += dt;
        m->reclaim_active = false; /* until kswapd runs again this second */
        ShapePhase np;
        workload_phase_at(&m->w, m->now_sec, &np);
        apply_phase(m, &np);

        /* The balloon: it takes free memory, and stops short of what the guest cannot free. */
        double taken = 0;
        if (m->target < m->size) {
                double floor = m->w.reserved_bytes + m->w.kernel_bytes + m->wm.min + pinned_bytes(m) + PUSHBACK_SLACK;
                double want = MIN(m->size - m->target, m->w.inflate_bytes_per_sec * dt);
                taken = MIN(want, MAX(0.0, m->size - floor));
                if (m->size - taken > m->target + PUSHBACK_SLACK && taken < want)
                        m->step_pushback = true;
                m->size -= taken;
                take_free(m, taken);
        } else if (m->target > m->size) {
                double give = MIN(m->target - m->size, DEFLATE_BYTES_PER_SEC * dt);
                m->size += give;
                give_free(m, give);
        }
        double evicted = 0, direct = 0;
        if (buddy_free(m) < m->wm.low) {
                /* What falls under the min watermark beyond what kswapd frees in the second,
                 * allocating tasks reclaim themselves: kswapd drops clean page cache fast, but
                 * pushes anonymous pages out only as fast as swap writes them. */
                double cold = m->stream_cache + m->idle_file;
                double kswapd = MIN(cold, m->w.kswapd_file_bytes_per_sec * dt) +
                                (m->w.swap_bytes > 0 ? PAGE / m->w.anon_miss_sec * dt : 0);
                direct = MAX(0.0, m->wm.min - buddy_free(m) - kswapd);
                evicted += reclaim(m, MIN(taken, m->wm.high - buddy_free(m)), direct);
        }

        /* The workload: its misses at what it has in memory, closed loop. */
        unsigned n = m->phase.n_tiers;
        double misses[SHAPE_TIERS_MAX], unseen_share[SHAPE_TIERS_MAX], within[SHAPE_TIERS_MAX];
        double hole_rate[SHAPE_TIERS_MAX];
        /* the OOM path's reclaim passes of the last second (out_of_memory()) are waited for too */
        double x = (direct + m->oom_notify_stall_bytes) / m->w.direct_reclaim_bytes_per_sec * DIRECT_STALL_SHARE;
        m->oom_notify_stall_bytes = 0;
        double lru_pages = lru_bytes(m) / PAGE;
        double reuse_limit = m->eviction_rate > 0 ? lru_pages / m->eviction_rate : INFINITY;
        for (unsigned i = 0; i < n; i++) {
                const ShapeTier *t = &m->phase.tier[i];
                misses[i] = shape_tier_misses(&m->w, t, m->resident[i]);
                double missing = t->bytes - m->resident[i];
                unseen_share[i] = missing > 0 ? MIN(1.0, m->unseen[i] / missing) : 0;
                x += misses[i] * (1 - unseen_share[i]) * tier_latency(m, t);
                hole_rate[i] = m->holes[i] > 0 ? shape_tier_resident_mean_rate(t, m->resident[i]) : 0;
                x += m->holes[i] / PAGE * MIN(hole_rate[i], 1.0 / dt) * tier_latency(m, t);
        }
        double stall = shape_stall_from_load(x);
        double progress = 1.0 - stall;
        /* A stalled workload takes longer between two touches of a page (its reuse time in
         * workload time over progress), and the distance counts evictions in wall time. */
        for (unsigned i = 0; i < n; i++)
                within[i] = shape_tier_miss_share_within(&m->w, &m->phase.tier[i], m->resident[i], reuse_limit * progress);
        for (unsigned i = 0; i < n; i++) {
                const ShapeTier *t = &m->phase.tier[i];
                /* A page may miss more than once a second (a loop far from fitting): the counters
                 * count every miss, memory gains at most the pages missing. */
                double touched = misses[i] * progress * PAGE * dt;
                double first = MIN(touched * unseen_share[i], m->unseen[i]), again = touched - first;
                double in = MIN(touched, MAX(0.0, t->bytes - m->resident[i]));
                m->unseen[i] -= first;
                m->resident[i] += in;
                take_free(m, in);
                /* hot pages the collateral took, touched again: refaults of recently evicted
                 * pages (a short refault distance: activated) */
                double back = m->holes[i] * (1 - exp(-hole_rate[i] * progress * dt));
                m->holes[i] -= back;
                take_free(m, back);
                double activated = (again * within[i] + back) / PAGE;
                again += back;
                double pages = again / PAGE;
                m->step_refaults += pages;
                if (t->backing == SHAPE_ANON) {
                        m->swapped = MAX(0.0, m->swapped - again);
                        count(m, RS_COUNTER_REFAULT_ANON, pages);
                        count(m, RS_COUNTER_ACTIVATE_ANON, activated);
                        count(m, RS_COUNTER_PSWPIN, pages);
                        count(m, RS_COUNTER_PGMAJFAULT, pages);
                        count(m, RS_COUNTER_MINOR_FAULTS, first / PAGE); /* new anonymous pages: zero-filled */
                        count(m, RS_COUNTER_HOST_DISK_READ, again);
                } else {
                        double in_pages = (first + again) / PAGE;
                        count(m, RS_COUNTER_REFAULT_FILE, pages);
                        count(m, RS_COUNTER_ACTIVATE_FILE, activated);
                        if (t->mapped)
                                count(m, RS_COUNTER_PGMAJFAULT, in_pages);
                        count(m, RS_COUNTER_HOST_DISK_READ, first + again);
                }
        }
        double stream = m->phase.stream_bytes_per_sec * dt;
        if (stream > 0) {
                m->stream_cache += stream;
                take_free(m, stream);
                count(m, RS_COUNTER_REFAULT_FILE, STREAM_REFAULT_SHARE * stream / PAGE);
                count(m, RS_COUNTER_HOST_DISK_READ, stream);
        }
        count(m, RS_COUNTER_MINOR_FAULTS, MINOR_FAULTS_PER_SEC * dt);

        /* What the workload brought in, kswapd makes room for, coldest first. */
        if (buddy_free(m) < m->wm.low)
                evicted += reclaim(m, 0, 0);
        if (buddy_free(m) < m->wm.min)
                out_of_memory(m);
        double a = exp(-dt / EVICTION_AVERAGE_SEC);
        m->eviction_rate = m->eviction_rate * a + evicted / PAGE / dt * (1 - a);

        /* PSI: avg10 is an exponential average over 10 s; total counts microseconds. */
        double d10 = exp(-dt / 10.0);
        m->psi_some_avg10 = m->psi_some_avg10 * d10 + 100.0 * stall * (1 - d10);
        m->psi_full_avg10 = m->psi_full_avg10 * d10 + 100.0 * PSI_FULL_SHARE * stall * (1 - d10);
        m->c[RS_COUNTER_PSI_SOME_TOTAL] += stall * dt * USEC_PER_SEC;
        m->c[RS_COUNTER_PSI_FULL_TOTAL] += PSI_FULL_SHARE * stall * dt * USEC_PER_SEC;
        m->step_stall_sec += stall * dt;
        m->step_direct_reclaim += direct;
}

void guest_model_v2_init(GuestModelV2 *m, const WorkloadDraw *w, double interval_sec) {
        *m = (GuestModelV2) { .w = *w, .interval_sec = interval_sec, .size = w->boot_bytes, .target = w->boot_bytes };
        m->rng = w->seed * UINT64_C(0x9E3779B97F4A7C15) + (uint64_t) w->family + 1;
        workload_watermarks(w, &m->wm);
        workload_phase_at(w, 0, &m->phase);

        ShapeResidency r;
        double room = w->boot_bytes - w->reserved_bytes - w->kernel_bytes;
        shape_residency(w, &m->phase, room - m->wm.high, &r);
        for (unsigned i = 0; i < m->phase.n_tiers; i++)
                m->resident[i] = r.tier[i];
        m->idle_anon = r.idle_anon;
        m->idle_file = r.idle_file;
        m->swapped = m->phase.idle_anon_bytes - r.idle_anon;
        m->free = room - lru_bytes(m);
}

void guest_model_v2_set_target(GuestModelV2 *m, double target) {
        m->target = MIN(target, m->w.boot_bytes);
}

void guest_model_v2_step(GuestModelV2 *m) {
        m->step_stall_sec = m->step_collateral = m->step_refaults = m->step_direct_reclaim = 0;
        m->step_pushback = false;
        unsigned seconds = (unsigned) MAX(1.0, round(m->interval_sec));
        for (unsigned s = 0; s < seconds; s++)
                one_second(m);
        m->total_stall_sec += m->step_stall_sec;
        m->total_sec += seconds;
}

double guest_model_v2_throughput(const GuestModelV2 *m) {
        return 1.0 - m->step_stall_sec / MAX(1.0, round(m->interval_sec));
}

double guest_model_v2_truth_stall(const GuestModelV2 *m, double target) {
        return shape_truth_stall(&m->w, &m->phase, target);
}

double guest_model_v2_truth_throughput(const GuestModelV2 *m, double fraction_of_full) {
        return shape_truth_throughput(&m->w, &m->phase, fraction_of_full);
}

/* Bytes of a tier's resident pages nothing touched for LRU_GEN_AGE_SEC: what MGLRU's old
 * generations hold of it. A loop touches a page once a pass; random and Zipf pages are
 * touched as a Poisson process at their rate. */
static double tier_old_bytes(const GuestModelV2 *m, unsigned i) {
        const ShapeTier *t = &m->phase.tier[i];
        double in = tier_in_memory(m, i);
        if (in <= 0 || t->reuse_sec <= 0)
                return 0;
        switch (t->access) {
        case SHAPE_LOOP:
                return in * MAX(0.0, 1.0 - LRU_GEN_AGE_SEC / t->reuse_sec);
        case SHAPE_RANDOM:
                return in * exp(-LRU_GEN_AGE_SEC / t->reuse_sec);
        default:
                /* the resident pages' mean rate stands in for each one's */
                return in * exp(-LRU_GEN_AGE_SEC * shape_tier_resident_mean_rate(t, m->resident[i]));
        }
}

static void sample_lru_gen(const GuestModelV2 *m, RsSample *s) {
        double anon = m->idle_anon, file = m->idle_file;
        /* the stream's pages were read once, in order: those read more than the age ago */
        file += MAX(0.0, m->stream_cache - m->phase.stream_bytes_per_sec * LRU_GEN_AGE_SEC);
        for (unsigned i = 0; i < m->phase.n_tiers; i++) {
                if (m->phase.tier[i].backing == SHAPE_ANON)
                        anon += tier_old_bytes(m, i);
                else
                        file += tier_old_bytes(m, i);
        }
        s->level[RS_LEVEL_ANON_OLD] = (uint64_t) MAX(0.0, anon);
        s->level[RS_LEVEL_FILE_OLD] = (uint64_t) MAX(0.0, file);
}

void guest_model_v2_sample(const GuestModelV2 *m, RsSample *s) {
        rs_sample_init(s);
        /* The balloon takes its pages out of MemTotal (adjust_managed_page_count() in
         * fill_balloon()), but not with deflate-on-oom: there they count as used memory the
         * guest may take back (drivers/virtio/virtio_balloon.c). */
        double total = (m->w.deflate_on_oom ? m->w.boot_bytes : m->size) - m->w.reserved_bytes;
        double cache = page_cache_bytes(m);
        double slab = SLAB_RECLAIMABLE_SHARE * m->w.kernel_bytes;
        /* si_mem_available(): free less the reserves (totalreserve_pages: the high watermarks
         * with lowmem protection, Watermarks), plus page cache and reclaimable slab less what
         * the kernel would keep of each (half, at most the low watermark). */
        double available = buddy_free(m) - m->wm.high + cache - MIN(cache / 2, m->wm.low) + slab - MIN(slab / 2, m->wm.low);
        s->level[RS_LEVEL_TOTAL] = (uint64_t) MAX(0.0, total);
        s->level[RS_LEVEL_FREE] = (uint64_t) MIN(MAX(0.0, buddy_free(m)), total);
        s->level[RS_LEVEL_AVAILABLE] = (uint64_t) MIN(MAX(0.0, available), total);
        s->level[RS_LEVEL_DISK_CACHES] = (uint64_t) MIN(cache, total);
        s->level[RS_LEVEL_BALLOON_ACTUAL] = (uint64_t) m->size;
        s->level[RS_LEVEL_BALLOON_TARGET] = (uint64_t) m->target;

        /* balloon stats (QEMU 9.2+ with the scan, reclaim, stall and OOM counters) */
        s->counter[RS_COUNTER_MAJOR_FAULTS] = (uint64_t) m->c[RS_COUNTER_PGMAJFAULT];
        s->counter[RS_COUNTER_MINOR_FAULTS] = (uint64_t) m->c[RS_COUNTER_MINOR_FAULTS];
        s->counter[RS_COUNTER_SWAP_IN] = (uint64_t) (m->c[RS_COUNTER_PSWPIN] * PAGE);
        s->counter[RS_COUNTER_SWAP_OUT] = (uint64_t) (m->c[RS_COUNTER_PSWPOUT] * PAGE);
        s->counter[RS_COUNTER_OOM_KILLS] = (uint64_t) m->c[RS_COUNTER_OOM_KILL];
        s->counter[RS_COUNTER_ALLOC_STALLS] = (uint64_t) m->c[RS_COUNTER_ALLOCSTALL];
        s->counter[RS_COUNTER_ASYNC_SCANS] = (uint64_t) m->c[RS_COUNTER_PGSCAN_KSWAPD];
        s->counter[RS_COUNTER_DIRECT_SCANS] = (uint64_t) m->c[RS_COUNTER_PGSCAN_DIRECT];
        s->counter[RS_COUNTER_ASYNC_RECLAIMS] = (uint64_t) m->c[RS_COUNTER_PGSTEAL_KSWAPD];
        s->counter[RS_COUNTER_DIRECT_RECLAIMS] = (uint64_t) m->c[RS_COUNTER_PGSTEAL_DIRECT];
        if (m->w.agent) {
                for (RsCounter i = RS_COUNTER_REFAULT_ANON; i <= RS_COUNTER_PSI_FULL_TOTAL; i++)
                        s->counter[i] = (uint64_t) m->c[i];
                s->level[RS_LEVEL_PSI_SOME_AVG10] = (uint64_t) (m->psi_some_avg10 * 100.0);
                s->level[RS_LEVEL_PSI_FULL_AVG10] = (uint64_t) (m->psi_full_avg10 * 100.0);
                s->level[RS_LEVEL_SWAP_TOTAL] = (uint64_t) m->w.swap_bytes;
                s->level[RS_LEVEL_SWAP_FREE] = (uint64_t) MAX(0.0, m->w.swap_bytes - m->swapped);
                if (m->w.lru_gen)
                        sample_lru_gen(m, s);
                /* /proc/zoneinfo, as the daemon reads it through the agent */
                s->level[RS_LEVEL_WMARK_MIN] = (uint64_t) m->wm.min;
                s->level[RS_LEVEL_WMARK_LOW] = (uint64_t) m->wm.low;
                s->level[RS_LEVEL_WMARK_HIGH] = (uint64_t) m->wm.high;
                /* ... and its pagesets' counts, read with every interval */
                s->level[RS_LEVEL_PCP_FREE] = (uint64_t) MAX(0.0, m->pcp);
        }
        s->counter[RS_COUNTER_HOST_DISK_READ] = (uint64_t) m->c[RS_COUNTER_HOST_DISK_READ];
}
