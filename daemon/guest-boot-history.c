/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A guest's next-boot history (boot-history.h), fed from its cycles: each 10 minutes become one
 * point, the largest estimate of the 10 minutes (a boot size must hold the peaks, not the
 * average), the size asked for and the size had at their end, and the guest's memory stall.
 *
 * The cost: the cost controller's own figure (RsControllerDecision's cost and cost_mean) is not
 * reachable through the rs_guest_* API the daemon decides with (RsDecision carries no cost), so
 * the point records what is: the PSI "some" share of the observation the decision was made on
 * (RsObservation.psi_some), unknown without the agent. Once estimator.h hands out the
 * controller's cost, record that instead (the file has room: a new version of the record). */
#include "daemon/guest-internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "common/time-util.h"
#include "daemon/log.h"

static void bucket_reset(Guest *g, uint64_t start) {
        g->boot_bucket_start = start;
        g->boot_bucket_estimate = RS_UNKNOWN;
        g->boot_bucket_stall_sum = 0;
        g->boot_bucket_stall_n = 0;
}

uint64_t guest_boot_memory(const Guest *g) {
        return g->base_memory > 0 ? g->base_memory : g->guest_max;
}

/* Reckons the recommendation again: after a new point, or once the guest's boot size is known. */
static void recommendation_update(Guest *g) {
        uint64_t cap = guest_boot_memory(g) ?: BOOT_HISTORY_UNKNOWN;
        if (boot_recommend(g->boot_history, cap, &g->boot_rec) < 0) {
                g->boot_rec_cap = 0; /* out of memory: tried again at the next cycle */
                return;
        }
        g->boot_rec_cap = cap;
}

void guest_boot_history_load(Guest *g) {
        if (!g->state_dir || g->boot_history)
                return;
        g->boot_history = malloc(sizeof(BootHistory));
        if (!g->boot_history) {
                log_guest_warning(g, "No memory for the next-boot history: not kept");
                return;
        }
        /* A discarded file is logged by the loader; the history starts again empty. */
        (void) boot_history_load(g->state_dir, g->name, now_usec(CLOCK_REALTIME), g->boot_history);
        bucket_reset(g, 0);
        recommendation_update(g);
}

void guest_boot_history_sample(Guest *g) {
        /* The cycle's own reading of the wall clock, taken as it decided (cycle_decide()). */
        uint64_t now = g->updated_realtime;

        if (!g->boot_history || !g->core || now == 0)
                return;
        if (g->boot_rec_cap != (guest_boot_memory(g) ?: BOOT_HISTORY_UNKNOWN))
                recommendation_update(g);
        if (g->boot_bucket_start == 0 || now < g->boot_bucket_start)
                bucket_reset(g, now); /* the first sample, or the clock set back */
        uint64_t estimate = rs_guest_estimate(g->core)->estimate;
        if (rs_known(estimate) && (!rs_known(g->boot_bucket_estimate) || estimate > g->boot_bucket_estimate))
                g->boot_bucket_estimate = estimate;
        double psi = rs_guest_observation(g->core)->psi_some;
        if (psi >= 0 && psi <= 100) {
                g->boot_bucket_stall_sum += psi / 100.0;
                g->boot_bucket_stall_n++;
        }
        if (now < g->boot_bucket_start + BOOT_HISTORY_INTERVAL_USEC)
                return;

        BootHistoryPoint p = {
                .realtime_usec = now,
                .estimate = rs_known(g->boot_bucket_estimate) ? g->boot_bucket_estimate : BOOT_HISTORY_UNKNOWN,
                .target = g->target ?: BOOT_HISTORY_UNKNOWN,
                .actual = g->actual ?: BOOT_HISTORY_UNKNOWN,
                .stall = g->boot_bucket_stall_n > 0 ? g->boot_bucket_stall_sum / g->boot_bucket_stall_n : NAN,
        };
        boot_history_push(g->boot_history, &p);
        boot_history_expire(g->boot_history, now);
        bucket_reset(g, now);
        recommendation_update(g);
        /* One rewrite per guest per 10 minutes (boot_history_save() says why it is not synced). */
        int r = boot_history_save(g->state_dir, g->name, g->boot_history);
        if (r < 0)
                log_guest_warning(g, "Failed to save the next-boot history in %s: %s", g->state_dir, strerror(-r));
}

void guest_boot_history_release(Guest *g) {
        free(g->boot_history);
        g->boot_history = NULL;
}

int guest_boot_recommendation(const Guest *g, BootRecommendation *ret) {
        if (!g->boot_history)
                return -ENODATA;
        if (g->boot_rec_cap == 0)
                return boot_recommend(g->boot_history, guest_boot_memory(g) ?: BOOT_HISTORY_UNKNOWN, ret);
        *ret = g->boot_rec;
        return 0;
}
