/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/model/workload-shape.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"

#define MIB_D (1024.0 * 1024.0)

static const char *const family_names[_FAMILY_MAX] = {
        [FAMILY_UNIFORM_LOOP] = "uniform-loop",
        [FAMILY_ZIPF] = "zipf",
        [FAMILY_TIERED] = "tiered",
        [FAMILY_STREAM_HOT] = "stream-hot",
        [FAMILY_PHASE_UP] = "phase-up",
        [FAMILY_PHASE_DOWN] = "phase-down",
        [FAMILY_COLD_KEYS] = "cold-keys",
};

bool shape_family_held_out(ShapeFamily f) {
        return f == FAMILY_TIERED || f == FAMILY_STREAM_HOT;
}

const char *shape_family_name(ShapeFamily f) {
        return f < _FAMILY_MAX ? family_names[f] : "?";
}

int shape_family_from_name(const char *name) {
        for (int f = 0; f < _FAMILY_MAX; f++)
                if (strcmp(name, family_names[f]) == 0)
                        return f;
        return -1;
}

/* ---- draws ---- */

/* splitmix64: every draw its own stream, reproducible from (family, seed). */
static uint64_t draw_next(uint64_t *x) {
        uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        return z ^ (z >> 31);
}

static double draw_unit(uint64_t *x) {
        return (double) (draw_next(x) >> 11) / 9007199254740992.0;
}

static double draw_uniform(uint64_t *x, double lo, double hi) {
        return lo + (hi - lo) * draw_unit(x);
}

/* Reuse times and latencies span decades: drawn uniformly in their logarithm. */
static double draw_log(uint64_t *x, double lo, double hi) {
        return exp(draw_uniform(x, log(lo), log(hi)));
}

static bool draw_chance(uint64_t *x, double p) {
        return draw_unit(x) < p;
}

static double whole_mib(double bytes) {
        return floor(bytes / MIB_D) * MIB_D;
}

static ShapeTier draw_tier(uint64_t *x, ShapeAccess access, double bytes, double reuse_sec) {
        ShapeTier t = {
                .backing = draw_chance(x, 0.5) ? SHAPE_ANON : SHAPE_FILE,
                .access = access,
                .bytes = whole_mib(bytes),
                .reuse_sec = reuse_sec,
                .theta = access == SHAPE_ZIPF ? draw_uniform(x, 0.6, 1.4) : 0,
        };
        t.mapped = t.backing == SHAPE_FILE && draw_chance(x, 0.3);
        return t;
}

static double phase_anon_bytes(const ShapePhase *p) {
        double a = p->idle_anon_bytes;
        for (unsigned i = 0; i < p->n_tiers; i++)
                if (p->tier[i].backing == SHAPE_ANON)
                        a += p->tier[i].bytes;
        return a;
}

static double phase_hot_bytes(const ShapePhase *p) {
        double h = 0;
        for (unsigned i = 0; i < p->n_tiers; i++)
                h += p->tier[i].bytes;
        return h;
}

/* Every shape fits at full size with room to spare (throughput there is 1 by definition
 * of the truth): hot tiers and idle anonymous memory within 88 % of what the kernel leaves. */
static void fit_at_full_size(WorkloadDraw *d) {
        Watermarks wm;
        workload_watermarks(d, &wm);
        double room = 0.88 * (d->boot_bytes - d->reserved_bytes - d->kernel_bytes - wm.high);
        double need = 0;
        for (unsigned k = 0; k < d->n_phases; k++)
                need = MAX(need, phase_hot_bytes(&d->phase[k]) + d->phase[k].idle_anon_bytes);
        if (need <= room)
                return;
        double f = room / need;
        for (unsigned k = 0; k < d->n_phases; k++) {
                ShapePhase *p = &d->phase[k];
                for (unsigned i = 0; i < p->n_tiers; i++)
                        p->tier[i].bytes = whole_mib(p->tier[i].bytes * f);
                p->idle_anon_bytes = whole_mib(p->idle_anon_bytes * f);
        }
}

/* A guest that has run a while has read files it no longer needs: page cache fills most of
 * the memory its workload leaves free (the share drawn), so a balloon step that takes it
 * reclaims well above the set, not only at it. */
static void fill_page_cache(WorkloadDraw *d, double share_of_free) {
        Watermarks wm;
        workload_watermarks(d, &wm);
        double room = d->boot_bytes - d->reserved_bytes - d->kernel_bytes - wm.high;
        double used = 0;
        for (unsigned k = 0; k < d->n_phases; k++)
                used = MAX(used, phase_hot_bytes(&d->phase[k]) + d->phase[k].idle_anon_bytes);
        double cache = whole_mib(MAX(d->phase[0].idle_file_bytes, share_of_free * MAX(0.0, room - used)));
        for (unsigned k = 0; k < d->n_phases; k++)
                d->phase[k].idle_file_bytes = cache;
}

static ShapeAccess draw_access(uint64_t *x, bool zipf_too) {
        unsigned n = zipf_too ? 3 : 2;
        switch (draw_next(x) % n) {
        case 0:
                return SHAPE_LOOP;
        case 1:
                return SHAPE_RANDOM;
        default:
                return SHAPE_ZIPF;
        }
}

void workload_draw(ShapeFamily family, uint64_t seed, WorkloadDraw *ret) {
        uint64_t x = seed * UINT64_C(1000003) + (uint64_t) family * UINT64_C(7919) + 1;
        WorkloadDraw *d = ret;
        ShapePhase *p = &d->phase[0];

        *d = (WorkloadDraw) { .family = family, .seed = seed, .n_phases = 1 };
        d->boot_bytes = (double) (16 + draw_next(&x) % 49) * 64 * MIB_D; /* 1-4 GiB */
        d->reserved_bytes = whole_mib(draw_uniform(&x, 40, 60) * MIB_D);
        d->kernel_bytes = whole_mib(draw_uniform(&x, 60, 160) * MIB_D);
        d->swap_bytes = draw_chance(&x, 0.85) ? d->boot_bytes : 0;
        d->agent = draw_chance(&x, 0.8);
        d->anon_miss_sec = draw_log(&x, 60e-6, 400e-6);
        d->file_miss_sec = draw_log(&x, 100e-6, 1000e-6);
        d->loop_amplification = draw_uniform(&x, 1.2, 2.5);
        d->collateral_cold = draw_uniform(&x, 0.01, 0.06);
        d->collateral_anon = draw_uniform(&x, 0.10, 0.35);
        d->inflate_bytes_per_sec = draw_uniform(&x, 40, 400) * MIB_D;
        d->direct_reclaim_bytes_per_sec = draw_uniform(&x, 0.5, 2.0) * 1024 * MIB_D;
        d->kswapd_file_bytes_per_sec = draw_uniform(&x, 300, 1500) * MIB_D;
        d->noise = draw_uniform(&x, 0.02, 0.10);
        double B = d->boot_bytes;

        switch (family) {
        case FAMILY_UNIFORM_LOOP:
                p->tier[0] = draw_tier(&x, SHAPE_LOOP, draw_uniform(&x, 0.15, 0.5) * B, draw_log(&x, 0.2, 600));
                p->n_tiers = 1;
                p->idle_file_bytes = whole_mib(draw_uniform(&x, 0, 0.2) * B);
                p->idle_anon_bytes = whole_mib(draw_uniform(&x, 0, 0.08) * B);
                break;
        case FAMILY_ZIPF:
                p->tier[0] = draw_tier(&x, SHAPE_ZIPF, draw_uniform(&x, 0.2, 0.55) * B, draw_log(&x, 0.2, 600));
                p->n_tiers = 1;
                p->idle_file_bytes = whole_mib(draw_uniform(&x, 0, 0.15) * B);
                break;
        case FAMILY_TIERED: {
                p->n_tiers = draw_chance(&x, 0.5) ? 2 : 3;
                double total = draw_uniform(&x, 0.25, 0.6) * B;
                double share0 = draw_uniform(&x, 0.15, 0.4);
                double reuse = draw_log(&x, 0.2, 20);
                for (unsigned i = 0; i < p->n_tiers; i++) {
                        double share = i == 0 ? share0 : (1 - share0) / (p->n_tiers - 1);
                        ShapeAccess a = draw_chance(&x, 0.3) ? SHAPE_LOOP : SHAPE_RANDOM;
                        p->tier[i] = draw_tier(&x, a, share * total, reuse);
                        reuse = MIN(600.0, reuse * draw_log(&x, 5, 50));
                }
                p->idle_file_bytes = whole_mib(draw_uniform(&x, 0, 0.15) * B);
                break;
        }
        case FAMILY_STREAM_HOT:
                p->tier[0] = draw_tier(&x, draw_access(&x, false), draw_uniform(&x, 0.1, 0.4) * B,
                                       draw_log(&x, 0.2, 600));
                p->n_tiers = 1;
                p->stream_bytes_per_sec = draw_log(&x, 5, 200) * MIB_D;
                p->idle_file_bytes = whole_mib(draw_uniform(&x, 0, 0.1) * B);
                break;
        case FAMILY_PHASE_UP:
        case FAMILY_PHASE_DOWN: {
                bool up = family == FAMILY_PHASE_UP;
                double b0 = up ? draw_uniform(&x, 0.12, 0.25) * B : draw_uniform(&x, 0.3, 0.55) * B;
                double b1 = up ? MIN(0.55 * B, b0 * draw_uniform(&x, 1.5, 2.5)) : b0 * draw_uniform(&x, 0.3, 0.6);
                p->tier[0] = draw_tier(&x, draw_access(&x, true), b0, draw_log(&x, 0.2, 600));
                /* a database read in: page cache more often than not */
                if (draw_chance(&x, 0.6)) {
                        p->tier[0].backing = SHAPE_FILE;
                        p->tier[0].mapped = false;
                }
                p->n_tiers = 1;
                p->idle_file_bytes = whole_mib(draw_uniform(&x, 0, 0.1) * B);
                d->phase[1] = *p;
                d->phase[1].tier[0].bytes = whole_mib(b1);
                d->n_phases = 2;
                d->change_sec = round(draw_uniform(&x, 1200, 1800));
                d->ramp_sec = round(up ? draw_log(&x, 30, 600) : draw_log(&x, 10, 120));
                break;
        }
        case FAMILY_COLD_KEYS:
                /* a key-value store: hot keys, many keys nobody reads, and page cache from boot */
                p->tier[0] = draw_tier(&x, SHAPE_RANDOM, draw_uniform(&x, 0.08, 0.25) * B, draw_log(&x, 0.5, 30));
                p->tier[0].backing = SHAPE_ANON;
                p->tier[0].mapped = false;
                p->n_tiers = 1;
                p->idle_anon_bytes = whole_mib(draw_uniform(&x, 0.2, 0.45) * B);
                p->idle_file_bytes = whole_mib(draw_uniform(&x, 0.05, 0.25) * B);
                d->swap_bytes = d->boot_bytes;
                /* Hot and cold keys share pages and age together on the inactive anonymous
                 * list: a burst that has to swap takes hot keys about as readily as cold ones
                 * (a real key store refaulted as many pages right after each step as the step
                 * took, and next to none at rest). */
                d->collateral_anon = draw_uniform(&x, 0.4, 0.9);
                break;
        default:
                break;
        }
        fit_at_full_size(d);
        fill_page_cache(d, draw_uniform(&x, 0.5, 0.95));
        /* Half the guests with an agent run MGLRU (Debian 12's kernel builds it, off by
         * default). Drawn from its own stream, after everything else, so every draw's shape
         * and guest stay what they were before the model reported MGLRU (the held-out
         * baseline was frozen on them). */
        uint64_t y = seed * UINT64_C(0xD1B54A32D192ED03) + (uint64_t) family;
        d->lru_gen = d->agent && draw_chance(&y, 0.5);
        /* Deflate-on-oom, from a stream of its own for the same reason. Most guests have it:
         * rightsized warns about a balloon without it, and README.md asks for it; a quarter do
         * not, the guests whose OOM kills the property test counts apart (tests/model/README.md). */
        uint64_t z = seed * UINT64_C(0x8CB92BA72F3D8DD7) + (uint64_t) family + 17;
        d->deflate_on_oom = draw_chance(&z, DEFLATE_ON_OOM_SHARE);
        /* THP's raised watermarks, from a stream of their own for the same reason, and after
         * the fitting above: a shape is drawn and fitted with the boot-default watermarks
         * whatever the kernel does with them, so every draw's workload stays what it was and
         * only the kernel's reserve (and so the truth) moves. */
        uint64_t h = seed * UINT64_C(0xA0761D6478BD642F) + (uint64_t) family + 29;
        d->thp = draw_chance(&h, THP_SHARE);
}

static int describe_phase(const ShapePhase *p, char *buf, size_t len) {
        static const char *const access[] = { "loop", "random", "zipf" };
        int n = 0;
        for (unsigned i = 0; i < p->n_tiers && (size_t) n < len; i++) {
                const ShapeTier *t = &p->tier[i];
                n += snprintf(buf + n, len - (size_t) n, " [%s%s %s %.0fMiB reuse %.2fs",
                              t->backing == SHAPE_ANON ? "anon" : "file", t->mapped ? " mapped" : "", access[t->access],
                              t->bytes / MIB_D, t->reuse_sec);
                if (t->access == SHAPE_ZIPF && (size_t) n < len)
                        n += snprintf(buf + n, len - (size_t) n, " theta %.2f", t->theta);
                if ((size_t) n < len)
                        n += snprintf(buf + n, len - (size_t) n, "]");
        }
        if ((size_t) n < len)
                n += snprintf(buf + n, len - (size_t) n, " stream %.0fMiB/s idle anon %.0fMiB file %.0fMiB",
                              p->stream_bytes_per_sec / MIB_D, p->idle_anon_bytes / MIB_D, p->idle_file_bytes / MIB_D);
        return n;
}

void workload_describe(const WorkloadDraw *d, char *buf, size_t len) {
        int n = snprintf(buf, len,
                         "family=%s seed=%llu boot=%.0fMiB kernel=%.0fMiB swap=%s agent=%s lat anon %.0fus file %.0fus "
                         "lru_gen=%s deflate-on-oom=%s thp=%s loop-amp %.2f collateral %.3f/%.3f inflate %.0fMiB/s:",
                         shape_family_name(d->family), (unsigned long long) d->seed, d->boot_bytes / MIB_D,
                         d->kernel_bytes / MIB_D, d->swap_bytes > 0 ? "yes" : "no", d->agent ? "yes" : "no",
                         d->anon_miss_sec * 1e6, d->file_miss_sec * 1e6, d->lru_gen ? "yes" : "no",
                         d->deflate_on_oom ? "yes" : "no", d->thp ? "yes" : "no", d->loop_amplification,
                         d->collateral_cold,
                         d->collateral_anon, d->inflate_bytes_per_sec / MIB_D);
        if (n < 0 || (size_t) n >= len)
                return;
        n += describe_phase(&d->phase[0], buf + n, len - (size_t) n);
        if (d->n_phases > 1 && (size_t) n < len) {
                n += snprintf(buf + n, len - (size_t) n, "; at %.0fs over %.0fs ->", d->change_sec, d->ramp_sec);
                if ((size_t) n < len)
                        describe_phase(&d->phase[1], buf + n, len - (size_t) n);
        }
}

void workload_phase_at(const WorkloadDraw *d, double t_sec, ShapePhase *ret) {
        if (d->n_phases < 2 || t_sec < d->change_sec) {
                *ret = d->phase[0];
                return;
        }
        *ret = d->phase[1];
        double f = d->ramp_sec > 0 ? (t_sec - d->change_sec) / d->ramp_sec : 1.0;
        if (f >= 1.0)
                return;
        const ShapePhase *a = &d->phase[0], *b = &d->phase[1];
#define MIX(field) (a->field + f * (b->field - a->field))
        for (unsigned i = 0; i < ret->n_tiers; i++)
                ret->tier[i].bytes = whole_mib(MIX(tier[i].bytes));
        ret->stream_bytes_per_sec = MIX(stream_bytes_per_sec);
        ret->idle_anon_bytes = MIX(idle_anon_bytes);
        ret->idle_file_bytes = MIX(idle_file_bytes);
#undef MIX
}

/* x86-64 on QEMU's q35 machine: ZONE_DMA is the first 16 MiB (3,976 pages managed on the
 * test guest), ZONE_DMA32 the rest of the RAM mapped below 4 GiB, which q35 makes 2 GiB for
 * a guest of 2816 MiB or more and all of it below that (hw/i386/pc_q35.c), ZONE_NORMAL the
 * rest. The reserved memory (firmware, kernel image) is DMA32's. */
#define ZONE_DMA_MANAGED (3976.0 * SHAPE_PAGE)
#define Q35_LOWMEM_SPLIT (2816.0 * MIB_D)
#define Q35_LOWMEM_HIGH (2048.0 * MIB_D)
#define PAGEBLOCK_PAGES 512.0           /* 2 MiB pageblocks (pageblock_order = HPAGE_PMD_ORDER) */
#define MIGRATE_PCPTYPES 3.0
#define LOWMEM_RESERVE_RATIO 256.0      /* sysctl_lowmem_reserve_ratio of DMA and DMA32 */

/* min_free_kbytes as khugepaged raises it (mm/khugepaged.c, set_recommended_min_free_kbytes()):
 * two free pageblocks per zone up to ZONE_NORMAL plus MIGRATE_PCPTYPES^2 more, at most 5 % of
 * lowmem, never below the boot default. Then the watermarks per zone as
 * setup_per_zone_wmarks() spreads min_free_kbytes (in proportion to managed pages), each zone's
 * with its largest lowmem protection (calculate_totalreserve_pages()). */
static void thp_watermarks(const WorkloadDraw *d, double boot_min_kb, Watermarks *ret) {
        double below4g = d->boot_bytes >= Q35_LOWMEM_SPLIT ? Q35_LOWMEM_HIGH : d->boot_bytes;
        double zone[3] = {
                ZONE_DMA_MANAGED,
                below4g - d->reserved_bytes - ZONE_DMA_MANAGED,
                d->boot_bytes - below4g,
        };
        double managed = zone[0] + zone[1] + zone[2];
        double nr_zones = zone[2] > 0 ? 3 : 2;
        double pages = PAGEBLOCK_PAGES * nr_zones * (2 + MIGRATE_PCPTYPES * MIGRATE_PCPTYPES);
        pages = MIN(pages, managed / SHAPE_PAGE / 20);
        double min_bytes = MAX(pages * SHAPE_PAGE, boot_min_kb * 1024.0);
        *ret = (Watermarks) {};
        for (unsigned z = 0; z < 3; z++) {
                if (zone[z] <= 0)
                        continue;
                double above = z == 0 ? zone[1] + zone[2] : z == 1 ? zone[2] : 0;
                double protection = above / LOWMEM_RESERVE_RATIO;
                double zmin = min_bytes * zone[z] / managed;
                double step = MAX(zmin / 4, zone[z] * 10.0 / 10000.0);
                ret->min += zmin + protection;
                ret->low += zmin + step + protection;
                ret->high += MIN(zmin + 2 * step + protection, zone[z]);
        }
}

void workload_watermarks(const WorkloadDraw *d, Watermarks *ret) {
        /* mm/page_alloc.c: min_free_kbytes = sqrt(lowmem_kbytes * 16), within [128 KiB, 256 MiB];
         * low and high a step above it of max(min / 4, managed x watermark_scale_factor (10) / 10000). */
        double managed_kb = (d->boot_bytes - d->reserved_bytes) / 1024.0;
        double min_kb = MIN(MAX(floor(sqrt(managed_kb * 16.0)), 128.0), 262144.0);
        double step_kb = MAX(min_kb / 4.0, managed_kb * 10.0 / 10000.0);
        if (d->thp) {
                thp_watermarks(d, min_kb, ret);
                return;
        }
        *ret = (Watermarks) {
                .min = min_kb * 1024.0,
                .low = (min_kb + step_kb) * 1024.0,
                .high = (min_kb + 2 * step_kb) * 1024.0,
        };
}

/* ---- the curve ---- */

/* The generalized harmonic number H(k, theta) = sum 1/i^theta for i <= k, for real k
 * (Euler-Maclaurin to the first correction; linear below one page). */
static double harmonic(double k, double theta) {
        if (k <= 1.0)
                return MAX(k, 0.0);
        double integral = fabs(theta - 1.0) < 1e-9 ? log(k) : (pow(k, 1.0 - theta) - 1.0) / (1.0 - theta);
        return integral + 0.5 * (1.0 + pow(k, -theta));
}

static double tier_pages(const ShapeTier *t) {
        return t->bytes / SHAPE_PAGE;
}

/* Touches per second of the whole tier. */
static double tier_touches(const ShapeTier *t) {
        return t->reuse_sec > 0 ? tier_pages(t) / t->reuse_sec : 0;
}

double shape_tier_rate_max(const ShapeTier *t) {
        if (t->access != SHAPE_ZIPF)
                return t->reuse_sec > 0 ? 1.0 / t->reuse_sec : 0;
        return tier_touches(t) / harmonic(tier_pages(t), t->theta);
}

double shape_tier_rate_min(const ShapeTier *t) {
        if (t->access != SHAPE_ZIPF)
                return shape_tier_rate_max(t);
        return shape_tier_rate_max(t) * pow(MAX(tier_pages(t), 1.0), -t->theta);
}

double shape_tier_resident_mean_rate(const ShapeTier *t, double resident) {
        double k = resident / SHAPE_PAGE;
        if (t->access != SHAPE_ZIPF || k < 1)
                return shape_tier_rate_max(t);
        return tier_touches(t) * harmonic(k, t->theta) / harmonic(tier_pages(t), t->theta) / k;
}

/* Bytes of a tier whose pages are touched at least `rate` times a second. */
static double tier_bytes_above_rate(const ShapeTier *t, double rate) {
        if (t->access != SHAPE_ZIPF)
                return shape_tier_rate_max(t) >= rate ? t->bytes : 0;
        double top = shape_tier_rate_max(t);
        if (top < rate)
                return 0;
        double rank = pow(top / rate, 1.0 / t->theta);
        return MIN(rank * SHAPE_PAGE, t->bytes);
}

double shape_tier_misses(const WorkloadDraw *d, const ShapeTier *t, double resident) {
        if (t->bytes <= 0 || t->reuse_sec <= 0)
                return 0;
        double have = MIN(MAX(resident, 0.0), t->bytes);
        double deficit = 1.0 - have / t->bytes;
        switch (t->access) {
        case SHAPE_LOOP:
                return tier_touches(t) * MIN(1.0, d->loop_amplification * deficit);
        case SHAPE_RANDOM:
                return tier_touches(t) * deficit;
        default: {
                double n = tier_pages(t);
                return tier_touches(t) * MAX(0.0, 1.0 - harmonic(have / SHAPE_PAGE, t->theta) / harmonic(n, t->theta));
        }
        }
}

double shape_tier_miss_share_within(const WorkloadDraw *d, const ShapeTier *t, double resident, double reuse_limit_sec) {
        if (!(reuse_limit_sec < INFINITY))
                return 1.0;
        if (t->access != SHAPE_ZIPF) {
                /* pages of a tier share a reuse time; a soft edge of 10 % for the spread of real distances */
                double r = t->reuse_sec / reuse_limit_sec;
                return MIN(1.0, MAX(0.0, (1.1 - r) / 0.2));
        }
        double all = shape_tier_misses(d, t, resident);
        if (all <= 0)
                return 1.0;
        /* Zipf: the missing pages ranked between the resident ones and the rank touched once
         * per reuse_limit_sec refault within it. */
        double within_rank = tier_bytes_above_rate(t, 1.0 / reuse_limit_sec);
        if (within_rank <= resident)
                return 0.0;
        double beyond = shape_tier_misses(d, t, within_rank);
        return MIN(1.0, MAX(0.0, (all - beyond) / all));
}

static bool tier_pinned(const WorkloadDraw *d, const ShapeTier *t) {
        return t->backing == SHAPE_ANON && d->swap_bytes <= 0;
}

static double allocation_at_rate(const WorkloadDraw *d, const ShapePhase *p, double rate, double out[]) {
        double total = 0;
        for (unsigned i = 0; i < p->n_tiers; i++) {
                out[i] = tier_pinned(d, &p->tier[i]) ? p->tier[i].bytes : tier_bytes_above_rate(&p->tier[i], rate);
                total += out[i];
        }
        return total;
}

void shape_residency(const WorkloadDraw *d, const ShapePhase *p, double budget, ShapeResidency *ret) {
        *ret = (ShapeResidency) { .fits = true };
        double pinned = d->swap_bytes > 0 ? MAX(0.0, phase_anon_bytes(p) - d->swap_bytes) : phase_anon_bytes(p);
        ret->pinned = pinned;
        if (pinned > budget)
                ret->fits = false;

        double all[SHAPE_TIERS_MAX];
        double total = allocation_at_rate(d, p, 0, all);
        double left = budget - (d->swap_bytes > 0 ? 0 : p->idle_anon_bytes);
        if (total <= left) {
                memcpy(ret->tier, all, sizeof(all));
                left -= total;
                if (d->swap_bytes > 0) {
                        ret->idle_anon = MIN(p->idle_anon_bytes, MAX(left, 0.0));
                        left -= ret->idle_anon;
                } else
                        ret->idle_anon = p->idle_anon_bytes;
                ret->idle_file = MIN(p->idle_file_bytes, MAX(left, 0.0));
                return;
        }
        if (d->swap_bytes <= 0)
                ret->idle_anon = p->idle_anon_bytes;

        /* Water-filling: the rate at which the hottest pages just fill what is left. */
        double lo = INFINITY, hi = 0;
        for (unsigned i = 0; i < p->n_tiers; i++) {
                lo = MIN(lo, shape_tier_rate_min(&p->tier[i]));
                hi = MAX(hi, shape_tier_rate_max(&p->tier[i]));
        }
        lo = MAX(lo, 1e-12) / 2;
        hi = hi * 2 + 1e-12;
        double at_lo[SHAPE_TIERS_MAX], at_hi[SHAPE_TIERS_MAX];
        for (int it = 0; it < 80; it++) {
                double mid = sqrt(lo * hi);
                if (allocation_at_rate(d, p, mid, at_lo) > left)
                        lo = mid;
                else
                        hi = mid;
        }
        double t_lo = allocation_at_rate(d, p, lo, at_lo);
        double t_hi = allocation_at_rate(d, p, hi, at_hi);
        double extra = MAX(0.0, left - t_hi), spread = t_lo - t_hi;
        for (unsigned i = 0; i < p->n_tiers; i++) {
                double share = spread > 0 ? (at_lo[i] - at_hi[i]) / spread : 0;
                ret->tier[i] = MIN(p->tier[i].bytes, at_hi[i] + extra * share);
        }
}

double shape_budget(const WorkloadDraw *d, double size) {
        Watermarks wm;
        workload_watermarks(d, &wm);
        return size - d->reserved_bytes - d->kernel_bytes - wm.high;
}

static double tier_miss_latency(const WorkloadDraw *d, const ShapeTier *t) {
        return t->backing == SHAPE_ANON ? d->anon_miss_sec : d->file_miss_sec;
}

double shape_stall_from_load(double x) {
        return x > 0 ? x / (1.0 + x) : 0;
}

static double steady_load(const WorkloadDraw *d, const ShapePhase *p, double size, double *misses, bool *fits) {
        ShapeResidency r;
        shape_residency(d, p, shape_budget(d, size), &r);
        double x = 0, m = 0;
        for (unsigned i = 0; i < p->n_tiers; i++) {
                double mi = shape_tier_misses(d, &p->tier[i], r.tier[i]);
                m += mi;
                x += mi * tier_miss_latency(d, &p->tier[i]);
        }
        if (misses)
                *misses = m;
        *fits = r.fits;
        return x;
}

double shape_steady_misses(const WorkloadDraw *d, const ShapePhase *p, double size) {
        double m;
        bool fits;
        steady_load(d, p, size, &m, &fits);
        return m;
}

double shape_steady_stall(const WorkloadDraw *d, const ShapePhase *p, double size) {
        bool fits;
        double x = steady_load(d, p, size, NULL, &fits);
        return fits ? shape_stall_from_load(x) : 1.0;
}

/* The smallest size (whole MiB) with steady stall <= limit: the stall is non-increasing in
 * the size, so a bisection. */
static double smallest_size(const WorkloadDraw *d, const ShapePhase *p, double limit) {
        long lo = (long) floor((d->reserved_bytes + d->kernel_bytes) / MIB_D);
        long hi = (long) floor(d->boot_bytes / MIB_D);
        if (shape_steady_stall(d, p, (double) lo * MIB_D) <= limit)
                return (double) lo * MIB_D;
        while (hi - lo > 1) {
                long mid = lo + (hi - lo) / 2;
                if (shape_steady_stall(d, p, (double) mid * MIB_D) <= limit)
                        hi = mid;
                else
                        lo = mid;
        }
        return (double) hi * MIB_D;
}

double shape_truth_stall(const WorkloadDraw *d, const ShapePhase *p, double target) {
        return smallest_size(d, p, target);
}

double shape_truth_throughput(const WorkloadDraw *d, const ShapePhase *p, double fraction_of_full) {
        double full = 1.0 - shape_steady_stall(d, p, d->boot_bytes);
        /* throughput >= fraction x full  <=>  stall <= 1 - fraction x full */
        return smallest_size(d, p, 1.0 - fraction_of_full * full);
}
