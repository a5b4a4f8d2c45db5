/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/pressure.h"

#include <math.h>

#include "common/macro.h"

/* Rates are pages per second. A guest squeezed 1 % into a 500 MiB working set that it
 * sweeps every 10 s refaults about 200 pages/s; a busy idle guest refaults a few. The
 * storm levels are about 8 MiB/s and up of pages the guest needed. */
static const RsSensitivityParams sensitivity_params[_RS_SENSITIVITY_MAX] = {
        [RS_SENSITIVITY_LOW] = { .ratio = 3.0, .abs_min = 150, .storm_abs = 4000, .storm_ratio = 20, .psi_points = 10, .confirm = 3 },
        [RS_SENSITIVITY_MEDIUM] = { .ratio = 2.0, .abs_min = 50, .storm_abs = 2000, .storm_ratio = 20, .psi_points = 5, .confirm = 2 },
        [RS_SENSITIVITY_HIGH] = { .ratio = 1.5, .abs_min = 20, .storm_abs = 1500, .storm_ratio = 20, .psi_points = 3, .confirm = 2 },
};

/* Scanning above this (1 MiB/s) beyond twice the baseline is reclaim at work. */
#define SCAN_ABS_MIN 256.0
/* PSI "some" this high means tasks spend most of their time waiting for memory. */
#define PSI_STORM 60.0
/* Stalls per second in direct reclaim that, with refaults, make a storm. */
#define STALL_RATE 1.0
/* Swap-outs below this share of the swap-ins: nothing is being pushed out to make room. */
#define SWAPOUT_SHARE 0.1
/* Swap-outs above twice their baseline plus this (1 MiB/s) are reclaim reaching anonymous
 * memory: the first thing a guest squeezed below its anonymous set shows, before the
 * swap-ins of what it pushed out. */
#define SWAPOUT_ABS_MIN 256.0
/* Scanning at under this share of the refaults: next to nothing is reclaimed to make room
 * for what comes back (a guest short of memory evicts about a page for each page it reads
 * back). Not measured against the baseline: a guest that streams scans all the time, and
 * what it evicts may be hot pages as well as the stream's. */
#define REFILL_SCAN_SHARE 0.25
/* Free memory above this share of the guest (1/24, well above the level below which the
 * levels say reclaim runs, and several times the kernel's high watermark): no reclaim is
 * needed to make room. A 1 GiB distro guest kept 60-110 MiB free after each balloon step. */
#define REFILL_FREE_DIVISOR 24
/* Useful refaults above baseline plus this share of the threshold, though not yet over it:
 * the hot set starts to be reclaimed. */
#define SUBTHRESHOLD_SHARE 0.25
/* Host disk reads count only this many times the refault noise floor above their baseline:
 * readahead turns each fault the guest reports into several pages read. */
#define HOST_READ_NOISE_FACTOR 8.0

const RsSensitivityParams *rs_sensitivity_params(RsSensitivity s) {
        if (s < 0 || s >= _RS_SENSITIVITY_MAX)
                s = RS_SENSITIVITY_MEDIUM;
        return &sensitivity_params[s];
}

void rs_baseline_reset(RsBaseline *b) {
        *b = (RsBaseline) {};
}

void rs_baseline_learn(RsBaseline *b, const RsObservation *o) {
        if (!o->have_rates)
                return;
        if (o->host_reads >= 0) {
                b->host_reads = b->host_known ? MIN(b->host_reads, o->host_reads) : o->host_reads;
                b->host_known = true;
        }
        if (!b->known) {
                b->useful = o->useful;
                b->scan = o->scan;
                b->psi_some = MAX(o->psi_some, 0.0);
                b->swapout = o->swapout;
        } else {
                b->swapout = MIN(b->swapout, o->swapout);
                b->useful = MIN(b->useful, o->useful);
                b->scan = MIN(b->scan, o->scan);
                if (o->psi_some >= 0)
                        b->psi_some = MIN(b->psi_some, o->psi_some);
        }
        b->known = true;
        b->n++;
}

/* Moves *base a share alpha of the way toward value, but no higher than max(*base, cap). */
static void follow(double *base, double value, double cap, double alpha) {
        *base += alpha * (MIN(value, MAX(*base, cap)) - *base);
}

void rs_baseline_track(RsBaseline *b, const RsObservation *o, const RsObservation *ceiling) {
        /* 5 % per sample: about 20 clean samples to follow a new normal. */
        const double alpha = 0.05;

        if (!o->have_rates || !b->known)
                return;
        if (o->host_reads >= 0 && !o->hidden) {
                /* Learned anew after a restore, then followed like the rest. */
                b->host_reads = b->host_known ? b->host_reads + alpha * (o->host_reads - b->host_reads) : o->host_reads;
                b->host_known = true;
        }
        if (o->hidden)
                return; /* the guest's own rates are not what was judged */
        if (o->useful < o->threshold)
                follow(&b->useful, o->useful, ceiling ? ceiling->useful : INFINITY, alpha);
        if (!o->scanning)
                b->scan += alpha * (o->scan - b->scan);
        if (!o->leading)
                b->swapout += alpha * (o->swapout - b->swapout);
        if (o->psi_some >= 0)
                follow(&b->psi_some, o->psi_some, ceiling ? ceiling->psi_some : INFINITY, alpha);
        b->n++;
}

void rs_baseline_rebase(RsBaseline *b, const RsObservation *o) {
        if (!o->have_rates)
                return;
        if (o->hidden) {
                /* More memory did not lower the host's reads: they are the guest's normal. */
                b->host_reads = MAX(b->host_reads, o->host_reads);
                b->host_known = true;
                return;
        }
        b->useful = MAX(b->useful, o->useful);
        b->scan = MAX(b->scan, o->scan);
        b->swapout = MAX(b->swapout, o->swapout);
        if (o->psi_some >= 0)
                b->psi_some = MAX(b->psi_some, o->psi_some);
        b->known = true;
}

static bool any_known(const RsRates *r, const RsCounter *list, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (r->known[list[i]])
                        return true;
        return false;
}

static double sum_known(const RsRates *r, const RsCounter *list, size_t n) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
                s += rs_rate_or_zero(r, list[i]);
        return s;
}

static const RsCounter agent_activate[] = { RS_COUNTER_ACTIVATE_ANON, RS_COUNTER_ACTIVATE_FILE };
static const RsCounter agent_refault[] = { RS_COUNTER_REFAULT_ANON, RS_COUNTER_REFAULT_FILE };
static const RsCounter agent_scan[] = { RS_COUNTER_PGSCAN_KSWAPD, RS_COUNTER_PGSCAN_DIRECT };
static const RsCounter balloon_scan[] = { RS_COUNTER_ASYNC_SCANS, RS_COUNTER_DIRECT_SCANS };

/* What the guest reclaimed in an interval, against what came back. */
typedef struct Reclaim {
        bool scan_known;
        double scan;       /* pages/s scanned */
        bool free_room;    /* free memory well above the watermarks */
        bool scanning;     /* reclaim running (scan counters, or the levels without them) */
        bool inflated;     /* the balloon moved down in this interval or the last: the scanning is its own */
        double swapout, base_swapout, swapin; /* pages/s */
        bool stall;
} Reclaim;

/* Next to nothing reclaimed or pushed to swap for `refaults` pages/s coming back: they went
 * into free memory. A guest whose set no longer fits has to evict to read back; one that
 * reads back what a squeeze took, after a deflation, does not (a database that revisits its
 * pages once a minute takes that long to recover, and the activations look like growth:
 * tests/bench/bench-pgbench). Without scan counters (QEMU before 9.2 and no agent), free
 * memory well above the watermarks, with the levels showing no reclaim, says the same. In
 * an interval where the balloon inflated, the scanning is the balloon's own burst (a 2 MiB
 * step scanned 3,500 pages there, and the pages it took early came back in the same
 * second), its allocations stall, and it pushes some anonymous pages to swap: free memory
 * left well above the watermarks after it is what tells. */
static bool nothing_reclaimed_for(const Reclaim *r, double refaults) {
        bool swapping_out = r->swapout > 2 * r->base_swapout + SWAPOUT_SHARE * refaults;
        /* Anonymous pages coming back while others go out is a guest short of its anonymous
         * set, burst or not (the anonymous benchmark paid 1.27 -> 1.5x its median pass when
         * the burst's swap-outs were let through beside swap-ins). */
        if (swapping_out && r->swapin > 0)
                return false;
        if (r->inflated && r->free_room)
                return true; /* the balloon's own burst: its scans, swap-outs and allocation stalls */
        if (swapping_out)
                return false;
        if (r->stall)
                return false;
        if (!r->scan_known)
                return r->free_room && !r->scanning;
        return r->scan <= REFILL_SCAN_SHARE * refaults;
}

static double host_read_threshold(const RsBaseline *b, const RsSensitivityParams *sp) {
        return b->host_reads * sp->ratio + HOST_READ_NOISE_FACTOR * sp->abs_min;
}

/* The host read from the guest's disks well above its baseline while the guest itself
 * reports nothing above its own: the guest hides its pressure, or thrashes its page cache
 * through read(), which no balloon stat counts. */
static bool hidden_reads(const RsObservation *o, const RsBaseline *b, const RsSensitivityParams *sp) {
        if (o->host_reads < 0 || !b || !b->known || !b->host_known)
                return false;
        return o->useful <= b->useful + sp->abs_min && o->host_reads > host_read_threshold(b, sp);
}

void rs_observe(const RsSample *s,
                const RsRates *rates,
                const RsObservation *prev,
                const RsBaseline *baseline,
                const RsPolicy *policy,
                RsObservation *ret) {
        const RsSensitivityParams *sp = rs_sensitivity_params(policy->refault_sensitivity);
        RsObservation o = {
                .size = s->level[RS_LEVEL_BALLOON_ACTUAL],
                .available = s->level[RS_LEVEL_AVAILABLE],
                .caches = s->level[RS_LEVEL_DISK_CACHES],
                .psi_some = -1,
                .host_reads = -1,
                .have_rates = rates->event == RS_RATE_NONE,
                .why = "no pressure",
        };

        bool agent = any_known(rates, agent_activate, ARRAY_SIZE(agent_activate)) ||
                     any_known(rates, agent_refault, ARRAY_SIZE(agent_refault));
        bool balloon = rs_known(s->level[RS_LEVEL_AVAILABLE]) || rs_known(s->level[RS_LEVEL_FREE]) ||
                       rs_known(s->level[RS_LEVEL_DISK_CACHES]) || rates->known[RS_COUNTER_MAJOR_FAULTS] ||
                       rates->known[RS_COUNTER_SWAP_IN];
        o.tier = agent ? RS_TIER_AGENT : balloon ? RS_TIER_BALLOON : RS_TIER_HOST;

        /* Useful refaults, by the best measure the tier has. Swap-ins are major faults
         * too: take the larger, not the sum. */
        double faults = MAX(rs_rate_or_zero(rates, RS_COUNTER_MAJOR_FAULTS),
                            rs_rate_or_zero(rates, RS_COUNTER_SWAP_IN) / RS_PAGE_SIZE);
        faults = MAX(faults, rs_rate_or_zero(rates, RS_COUNTER_PSWPIN));
        if (o.tier == RS_TIER_AGENT) {
                o.raw_refault = sum_known(rates, agent_refault, ARRAY_SIZE(agent_refault));
                if (any_known(rates, agent_activate, ARRAY_SIZE(agent_activate))) {
                        o.useful = sum_known(rates, agent_activate, ARRAY_SIZE(agent_activate));
                        o.has_activate = true;
                } else
                        o.useful = o.raw_refault;
        } else
                o.raw_refault = o.useful = faults;

        if (any_known(rates, agent_scan, ARRAY_SIZE(agent_scan)))
                o.scan = sum_known(rates, agent_scan, ARRAY_SIZE(agent_scan));
        else
                o.scan = sum_known(rates, balloon_scan, ARRAY_SIZE(balloon_scan));
        bool scan_known = any_known(rates, agent_scan, ARRAY_SIZE(agent_scan)) ||
                          any_known(rates, balloon_scan, ARRAY_SIZE(balloon_scan));

        if (rates->known[RS_COUNTER_PSI_SOME_TOTAL])
                o.psi_some = MIN(100.0, rates->per_sec[RS_COUNTER_PSI_SOME_TOTAL] / 1e4);
        else if (rs_known(s->level[RS_LEVEL_PSI_SOME_AVG10]))
                o.psi_some = (double) s->level[RS_LEVEL_PSI_SOME_AVG10] / 100.0;

        double base_useful = baseline && baseline->known ? baseline->useful : 0;
        double base_scan = baseline && baseline->known ? baseline->scan : 0;
        o.threshold = base_useful * sp->ratio + sp->abs_min;
        if (rates->known[RS_COUNTER_HOST_DISK_READ])
                o.host_reads = rates->per_sec[RS_COUNTER_HOST_DISK_READ] / RS_PAGE_SIZE;

        uint64_t size = o.size;
        if (rs_known(size)) {
                uint64_t target = s->level[RS_LEVEL_BALLOON_TARGET];
                /* Half a percent or 4 MiB above the target: more than the balloon's
                 * rounding, less than a step. */
                if (rs_known(target) && size > target + MAX(4 * MIB, size / 200)) {
                        /* A balloon still on its way down is slow, not refused: a busy
                         * vCPU inflates 40-60 MiB a second. Pushback is a balloon that
                         * stopped short. */
                        if (prev && rs_known(prev->size) && size + MAX(1 * MIB, size / 1000) < prev->size)
                                o.inflating = true;
                        else
                                o.pushback = true;
                }
                if (rs_known(o.available)) {
                        o.available_low = o.available < MAX(32 * MIB, size / 25);
                        o.available_critical = o.available < MAX(4 * MIB, size / 200);
                }
                /* Without scan counters, the levels tell: caches shrinking as the guest
                 * shrinks, or free memory down at the reclaim watermarks. */
                if (!scan_known) {
                        if (rs_known(o.caches) && prev && rs_known(prev->caches) && rs_known(prev->size) &&
                            size <= prev->size && o.caches + MAX(8 * MIB, size / 50) < prev->caches)
                                o.scanning = true;
                        uint64_t free_b = s->level[RS_LEVEL_FREE];
                        if (rs_known(free_b) && free_b < size / 33)
                                o.scanning = true;
                }
        }
        if (o.have_rates && o.scan > 2 * base_scan + SCAN_ABS_MIN)
                o.scanning = true;

        o.oom = rs_rate_or_zero(rates, RS_COUNTER_OOM_KILL) > 0 || rs_rate_or_zero(rates, RS_COUNTER_OOM_KILLS) > 0;
        o.stall = MAX(rs_rate_or_zero(rates, RS_COUNTER_ALLOCSTALL), rs_rate_or_zero(rates, RS_COUNTER_ALLOC_STALLS)) >
                  STALL_RATE;

        bool refaulting = o.have_rates && o.useful > o.threshold;

        /* A guest short of memory pushes pages out as others come back; one paging in what
         * it lost earlier only brings them back. Known only with swap counters. */
        bool swap_known = (rates->known[RS_COUNTER_PSWPIN] && rates->known[RS_COUNTER_PSWPOUT]) ||
                          (rates->known[RS_COUNTER_SWAP_IN] && rates->known[RS_COUNTER_SWAP_OUT]);
        double swapin = MAX(rs_rate_or_zero(rates, RS_COUNTER_PSWPIN),
                            rs_rate_or_zero(rates, RS_COUNTER_SWAP_IN) / RS_PAGE_SIZE);
        double swapout = MAX(rs_rate_or_zero(rates, RS_COUNTER_PSWPOUT),
                             rs_rate_or_zero(rates, RS_COUNTER_SWAP_OUT) / RS_PAGE_SIZE);
        o.swapout = swapout;
        o.swapin_only = refaulting && swap_known && swapin > 0 && swapout <= SWAPOUT_SHARE * swapin &&
                        o.useful - swapin <= o.threshold;
        /* Pages coming back into free memory: refaults above baseline while next to nothing
         * is reclaimed or pushed to swap (nothing_reclaimed_for()). */
        double base_swapout = baseline && baseline->known ? baseline->swapout : 0;
        /* The balloon's own inflation stalls in reclaim, and scans: PSI and the scan counters
         * of an interval in which it moved down count that too, and of the one after it
         * (kswapd finishes its batch once the balloon has its pages, and PSI is an average: a
         * guest at rest a sample after a step still scanned 7,000 pages/s at 12 % PSI). */
        o.balloon_moved = prev && rs_known(prev->size) && rs_known(o.size) &&
                          o.size + MAX(1 * MIB, o.size / 1000) < prev->size;
        o.after_step = o.balloon_moved || (prev && prev->balloon_moved);
        bool balloon_moved = o.after_step;
        Reclaim reclaim = {
                .scan_known = scan_known,
                .scan = o.scan,
                .free_room = rs_known(s->level[RS_LEVEL_FREE]) && rs_known(o.size) &&
                             s->level[RS_LEVEL_FREE] >= o.size / REFILL_FREE_DIVISOR,
                .scanning = o.scanning,
                .inflated = balloon_moved,
                .swapout = swapout,
                .base_swapout = base_swapout,
                .swapin = swapin,
                .stall = o.stall,
        };
        o.refilling = o.have_rates && o.useful > base_useful && nothing_reclaimed_for(&reclaim, o.raw_refault);
        /* Both measures agree (the guest's own refaults, scan counters and free memory): what
         * a balloon step's burst of reclaim took comes back into the room it left. */
        o.refilling_proven = o.refilling && reclaim.scan_known && reclaim.free_room;
        /* The balloon's own inflation stalls in reclaim, and PSI counts that stall: when the
         * balloon moved down this interval, PSI says the guest is short only beside refaults
         * rising toward the threshold, not beside a page or two (a database's page cache
         * still sorting its LRU after a step: tests/bench/bench-pgbench). */
        double psi_refaults = base_useful + (balloon_moved ? SUBTHRESHOLD_SHARE * (o.threshold - base_useful) : 0);
        bool psi_up = o.have_rates && o.psi_some >= 0 && baseline && baseline->known &&
                      o.psi_some > baseline->psi_some + sp->psi_points && o.useful > psi_refaults;

        /* Signs that show before refaults do (issue 13: stop on leading signals). Reclaim
         * reaching anonymous memory pushes pages to swap before the workload misses them;
         * a file set's cache is scanned before it is re-read; PSI rises with both. */
        if (o.have_rates) {
                /* PSI with useful refaults no higher than usual is a stream's, or I/O's: a
                 * stream keeps PSI up at every size (a real guest streaming 2 GiB through 1 GiB
                 * did), and as a sign it would hold the probe to fine steps for good. */
                bool psi_rising = o.psi_some >= 0 && baseline && baseline->known &&
                                  o.psi_some > baseline->psi_some + sp->psi_points / 2 && o.useful > base_useful;
                bool refaults_rising = o.useful > 0 &&
                                       o.useful > base_useful + SUBTHRESHOLD_SHARE * (o.threshold - base_useful);
                o.rising = psi_rising || refaults_rising;
                o.swapping_out = swapout > 2 * base_swapout + SWAPOUT_ABS_MIN;
                if (refaults_rising)
                        o.leading_why = "refaults rising";
                else if (psi_rising)
                        o.leading_why = "memory PSI rising";
                else if (o.swapping_out)
                        o.leading_why = "pages pushed to swap";
                else if (o.scanning)
                        o.leading_why = "reclaim running";
                o.leading = o.leading_why != NULL;
        }

        if (o.oom) {
                o.verdict = RS_VERDICT_STORM;
                o.why = "the guest OOM-killed a task";
        } else if (o.have_rates && o.useful > MAX(sp->storm_abs, sp->storm_ratio * o.threshold)) {
                o.verdict = RS_VERDICT_STORM;
                o.storm_by_rate = true;
                o.why = o.tier == RS_TIER_AGENT ? "refault storm" : "major fault / swap-in storm";
        } else if (o.stall && refaulting) {
                o.verdict = RS_VERDICT_STORM;
                o.why = "allocation stalls while refaulting";
        } else if (o.available_critical && o.pushback) {
                /* Nothing left to give and the balloon still pulling: a tightly sized guest
                 * with its cold pages swapped out has little available too, so low
                 * available alone is not an emergency. */
                o.verdict = RS_VERDICT_STORM;
                o.why = "available memory below its floor";
        } else if (o.psi_some >= PSI_STORM) {
                o.verdict = RS_VERDICT_STORM;
                o.why = "memory PSI above 60 %";
        } else if (refaulting) {
                o.verdict = RS_VERDICT_REFAULT;
                o.why = o.tier != RS_TIER_AGENT ? "major faults / swap-in above baseline"
                        : o.has_activate        ? "workingset activations above baseline"
                                                : "workingset refaults above baseline";
        } else if (o.pushback) {
                o.verdict = RS_VERDICT_REFAULT;
                o.why = "the balloon stops short of its target";
        } else if (psi_up) {
                o.verdict = RS_VERDICT_REFAULT;
                o.why = "memory PSI above baseline";
        } else if (!o.have_rates) {
                o.verdict = RS_VERDICT_UNKNOWN;
                o.why = "no rates yet";
        } else if (hidden_reads(&o, baseline, sp)) {
                o.verdict = RS_VERDICT_REFAULT;
                o.hidden = true;
                o.useful = o.host_reads;
                o.threshold = host_read_threshold(baseline, sp);
                o.why = "disk reads above baseline that the guest's stats do not show";
                /* read() refaults no balloon stat counts come back into free memory too */
                o.refilling = nothing_reclaimed_for(&reclaim, o.host_reads);
                o.refilling_proven = false; /* the guest's stats do not show these */
        } else if (o.scanning) {
                o.verdict = RS_VERDICT_SCAN;
                o.why = "reclaim running, no refaults";
        } else
                o.verdict = RS_VERDICT_CLEAN;

        *ret = o;
}

const char *rs_tier_to_string(RsTier t) {
        static const char *const names[_RS_TIER_MAX] = {
                [RS_TIER_HOST] = "host",
                [RS_TIER_BALLOON] = "balloon",
                [RS_TIER_AGENT] = "agent",
        };
        return t >= 0 && t < _RS_TIER_MAX ? names[t] : NULL;
}

const char *rs_verdict_to_string(RsVerdict v) {
        static const char *const names[_RS_VERDICT_MAX] = {
                [RS_VERDICT_UNKNOWN] = "unknown",
                [RS_VERDICT_CLEAN] = "clean",
                [RS_VERDICT_SCAN] = "scan",
                [RS_VERDICT_REFAULT] = "refault",
                [RS_VERDICT_STORM] = "storm",
        };
        return v >= 0 && v < _RS_VERDICT_MAX ? names[v] : NULL;
}
