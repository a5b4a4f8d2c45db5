/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How much memory pressure one interval showed, judged against the guest's own baseline.
 *
 * Tiers (which signals the judgement used; more tiers, more confidence, less margin):
 *   RS_TIER_HOST     no guest memory stats: only the balloon's pushback is visible
 *   RS_TIER_BALLOON  balloon stats: major faults and swap-in (anonymous thrashing), the
 *                    levels (available, disk caches, free) and pushback (file thrashing,
 *                    which shows no faults at all through read())
 *   RS_TIER_AGENT    guest agent vmstat: workingset refaults and activations, scans, PSI
 *
 * Host disk reads (QEMU's blockstats) back every tier: a refault the guest does not report
 * still has to come from its disks. Reads well above their own baseline that the guest's
 * stats do not explain count as refaults ("hidden").
 *
 * The "useful refault" rate is what more memory would save: workingset_activate (refaults
 * whose refault distance fit in memory) when the agent reports it, else all workingset
 * refaults, else major faults plus swap-in pages. A streaming guest refaults at every size
 * but activates almost nothing, so its stream never counts as pressure. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/policy.h"
#include "policies/signals.h"

typedef struct RsObservation RsObservation;

typedef enum RsTier {
        RS_TIER_HOST,
        RS_TIER_BALLOON,
        RS_TIER_AGENT,
        _RS_TIER_MAX,
} RsTier;

typedef enum RsVerdict {
        RS_VERDICT_UNKNOWN, /* no rates this interval (first sample, reboot, skew) */
        RS_VERDICT_CLEAN,   /* nothing above baseline */
        RS_VERDICT_SCAN,    /* reclaim runs (cold pages go) but nothing hot comes back */
        RS_VERDICT_REFAULT, /* useful refaults, pushback or PSI above baseline */
        RS_VERDICT_STORM,   /* deflate now: refault storm, OOM kill, alloc stalls, no memory left */
        _RS_VERDICT_MAX,
} RsVerdict;

/* Thresholds per refault-sensitivity. */
typedef struct RsSensitivityParams {
        double ratio;        /* useful refaults above baseline * ratio + abs_min count */
        double abs_min;      /* pages/s: below this nothing counts (noise) */
        double storm_abs;    /* pages/s: a storm, whatever the baseline */
        double storm_ratio;  /* ... or this many times the threshold */
        double psi_points;   /* PSI some percentage points above baseline */
        unsigned confirm;    /* consecutive samples before refault onset is believed */
} RsSensitivityParams;

const RsSensitivityParams *rs_sensitivity_params(RsSensitivity s);

typedef struct RsBaseline {
        bool known;
        double useful;   /* pages/s */
        double scan;     /* pages/s, agent or new balloon stats */
        double psi_some; /* percent */
        double swapout;  /* pages/s pushed to swap */
        unsigned n;
        bool host_known; /* host_reads is measured (not kept in state files: learned again) */
        double host_reads; /* pages/s QEMU read from the guest's disks */
} RsBaseline;

void rs_baseline_reset(RsBaseline *b);
/* Learning: keeps the quietest value seen (a baseline measured while something already
 * hurt would hide the next hurt). */
void rs_baseline_learn(RsBaseline *b, const RsObservation *o);
/* Drift while running clean: a slow average, so a guest's normal changes are followed.
 * With a ceiling, the refault and PSI baselines rise no higher than the ceiling's rates (or
 * the baseline's own, if higher), and fall freely: while memory is being taken away, a rate
 * above what the guest showed before is the squeeze's doing, not its new normal (only more
 * memory that does not help says that: rs_baseline_rebase()). */
void rs_baseline_track(RsBaseline *b, const RsObservation *o, const RsObservation *ceiling);
/* Resets the baseline to what the guest shows now (used when more memory did not help). */
void rs_baseline_rebase(RsBaseline *b, const RsObservation *o);

struct RsObservation {
        RsTier tier;
        RsVerdict verdict;
        uint64_t size;       /* guest memory during the interval (balloon actual), or RS_UNKNOWN */
        uint64_t available;  /* or RS_UNKNOWN */
        uint64_t caches;     /* or RS_UNKNOWN */
        double useful;       /* useful refaults, pages/s (0 when unknown) */
        double raw_refault;  /* all refaults (agent) or faults (balloon), pages/s */
        double scan;         /* pages/s scanned, when a counter reports it */
        double psi_some;     /* percent, or -1 */
        double threshold;    /* useful refaults above this count */
        bool have_rates;
        bool has_activate;   /* the useful rate came from workingset_activate */
        bool scanning;       /* reclaim running: scan counters, caches shrinking, free at its floor */
        double swapout;      /* pages/s pushed to swap (balloon stat-swap-out or pswpout), 0 unknown */
        bool leading;        /* a sign that shows before refaults do, above the guest's baseline:
                              * reclaim running (scanning), pages pushed to swap, PSI some up, or
                              * useful refaults still under the threshold but rising; the probe
                              * then takes fine steps (estimator.c) */
        bool rising;         /* of the leading signs, the ones that say hot pages come back:
                              * useful refaults rising under the threshold, or PSI some up */
        bool swapping_out;   /* pages pushed to swap above the baseline: reclaim has reached
                              * anonymous memory, which a guest with page-cache slack keeps */
        const char *leading_why; /* the first leading sign, a static string, or NULL */
        bool storm_by_rate;  /* the storm verdict came from the refault rate alone (the estimator
                              * scales that threshold to the working set's size) */
        bool pushback;       /* the balloon stays clearly above the target asked for */
        bool inflating;      /* above the target, but still shrinking toward it since the last sample */
        bool balloon_moved;  /* the balloon moved down since the last sample */
        bool after_step;     /* ... in this interval or the one before: its burst of reclaim, and
                              * the pages that burst took coming back, may show in this one */
        bool available_low;  /* near the floor of available memory: probe gently */
        bool available_critical;
        bool oom;            /* an OOM kill happened */
        bool stall;          /* allocation stalls (direct reclaim) */
        double host_reads;   /* pages/s QEMU read from the guest's disks, or -1 */
        bool hidden;         /* the verdict came from disk reads the guest's own stats do not
                              * show (a guest hiding pressure, or file thrashing through read()
                              * that no balloon stat counts); useful and threshold are then the
                              * host's reads and their threshold */
        bool swapin_only;    /* the refaults above the threshold are swap-ins with no swap-out
                              * to match: pages coming back, none pushed out (a guest paging in
                              * after a deflation rather than one short of memory) */
        bool refilling;      /* refaults above baseline while next to nothing is reclaimed or
                              * swapped out: pages coming back into free memory (a guest
                              * reading back what a squeeze took, not one short at this size);
                              * judged by the scan counters when known, else by free memory
                              * well above the watermarks */
        bool refilling_proven; /* refilling, by the guest's own refaults, with scan counters known
                                * and free memory well above the watermarks both saying so */
        const char *why;     /* the deciding signal, a static string */
};

/* Judges one interval. prev may be NULL (no previous levels). The baseline is read, never
 * changed. */
void rs_observe(const RsSample *s,
                const RsRates *rates,
                const RsObservation *prev,
                const RsBaseline *baseline,
                const RsPolicy *policy,
                RsObservation *ret);

const char *rs_tier_to_string(RsTier t);
const char *rs_verdict_to_string(RsVerdict v);
