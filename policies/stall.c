/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/stall.h"

#include <math.h>

#include "common/macro.h"

#define PAGE_BYTES 4096.0

static double rate_or(const RsRates *r, RsCounter c, double unknown) {
        return r->known[c] ? r->per_sec[c] : unknown;
}

void rs_cost_interval(const RsRates *rates,
                      double fault_latency_sec,
                      double host_read_page_sec,
                      double host_read_floor,
                      RsCostInterval *ret) {
        *ret = (RsCostInterval) {
                .source = RS_COST_NONE,
                .fault_pages = -1,
                .host_read_pages = -1,
                .refaults = -1,
                .activations = -1,
        };
        if (rates->interval_sec <= 0)
                return;

        /* A swap-in is a major fault too, so the larger of the two, not their sum. */
        double majflt = rate_or(rates, RS_COUNTER_MAJOR_FAULTS, rate_or(rates, RS_COUNTER_PGMAJFAULT, -1));
        double swapin = rates->known[RS_COUNTER_SWAP_IN] ? rates->per_sec[RS_COUNTER_SWAP_IN] / PAGE_BYTES
                                                          : rate_or(rates, RS_COUNTER_PSWPIN, -1);
        ret->fault_pages = MAX(majflt, swapin);
        if (rates->known[RS_COUNTER_HOST_DISK_READ])
                ret->host_read_pages = rates->per_sec[RS_COUNTER_HOST_DISK_READ] / PAGE_BYTES;
        if (rates->known[RS_COUNTER_REFAULT_ANON] || rates->known[RS_COUNTER_REFAULT_FILE])
                ret->refaults = rate_or(rates, RS_COUNTER_REFAULT_ANON, 0) + rate_or(rates, RS_COUNTER_REFAULT_FILE, 0);
        if (rates->known[RS_COUNTER_ACTIVATE_ANON] || rates->known[RS_COUNTER_ACTIVATE_FILE])
                ret->activations = rate_or(rates, RS_COUNTER_ACTIVATE_ANON, 0) + rate_or(rates, RS_COUNTER_ACTIVATE_FILE, 0);

        if (rates->known[RS_COUNTER_PSI_SOME_TOTAL]) {
                ret->source = RS_COST_PSI;
                ret->stall = CLAMP(rates->per_sec[RS_COUNTER_PSI_SOME_TOTAL] / 1e6, 0.0, 1.0);
                return;
        }
        if (ret->fault_pages < 0 && ret->host_read_pages < 0)
                return;
        /* The rates counted are what the workload did while it waited, so pages times latency
         * is the time it waited, per second: no closed-loop correction is needed. */
        double faults = MAX(ret->fault_pages, 0.0) * fault_latency_sec;
        double reads = MAX(ret->host_read_pages - MAX(host_read_floor, 0.0), 0.0) * host_read_page_sec;
        ret->source = RS_COST_ESTIMATED;
        ret->stall = CLAMP(MAX(faults, reads), 0.0, 1.0);
}

void rs_cost_window_init(RsCostWindow *w, double window_sec) {
        *w = (RsCostWindow) { .window_sec = window_sec };
}

void rs_cost_window_reset(RsCostWindow *w) {
        rs_cost_window_init(w, w->window_sec);
}

void rs_cost_window_add(RsCostWindow *w, double stall, double interval_sec, uint64_t now_usec) {
        if (!w->known) {
                w->mean = stall;
                w->known = true;
        } else {
                double a = 1.0 - exp(-interval_sec / MAX(w->window_sec, 1e-3));
                w->mean += a * (stall - w->mean);
        }
        w->ring_stall[w->ring_next] = stall;
        w->ring_at[w->ring_next] = now_usec;
        w->ring_next = (w->ring_next + 1) % RS_COST_RING;
        w->ring_len = MIN(w->ring_len + 1, (unsigned) RS_COST_RING);
}

double rs_cost_window_rest(const RsCostWindow *w, uint64_t now_usec) {
        double lowest = -1;
        uint64_t span = (uint64_t) (w->window_sec * 1e6);
        for (unsigned k = 0; k < w->ring_len; k++) {
                unsigned i = (w->ring_next + RS_COST_RING - 1 - k) % RS_COST_RING;
                /* the newest interval always counts, however short the window */
                if (k > 0 && now_usec - w->ring_at[i] >= span)
                        break;
                if (lowest < 0 || w->ring_stall[i] < lowest)
                        lowest = w->ring_stall[i];
        }
        return lowest;
}

double rs_cost_window_settled(const RsCostWindow *w, uint64_t since_usec, bool *passing) {
        double c[3];
        unsigned n = 0;
        *passing = false;
        /* the newest three intervals at the size, oldest first */
        for (unsigned k = 0; k < MIN(w->ring_len, 3u); k++) {
                unsigned i = (w->ring_next + RS_COST_RING - 1 - k) % RS_COST_RING;
                if (w->ring_at[i] < since_usec)
                        break; /* before the move (the interval it ended in counts: its burst of
                                * reclaim only makes a decay look steeper) */
                n++;
        }
        for (unsigned k = 0; k < n; k++)
                c[k] = w->ring_stall[(w->ring_next + RS_COST_RING - n + k) % RS_COST_RING];
        if (n < 2)
                return -1;                      /* the move's own interval: nothing known yet */
        double d1 = c[n - 1] - c[n - 2];
        if (d1 >= 0)
                return MIN(c[n - 1], c[n - 2]); /* not falling: what the size costs */
        if (n < 3)
                return -1;                      /* falling: passing or not, a third interval tells */
        double d0 = c[1] - c[0];
        /* strictly falling, by less each time: a decay toward a level. Falling otherwise (in a
         * straight line, or faster): the newest, the least the size has cost. */
        if (!(d0 < 0 && d1 > d0))
                return c[2];
        double q = d1 / d0;
        *passing = true;
        /* no further below the newest than the three fell: noise on a steady cost can look
         * like a slow decay, whose limit would be far below */
        double limit = c[2] + MAX(d1 * q / (1 - q), -(c[0] - c[2]));
        return CLAMP(limit, 0.0, c[2]);
}

bool rs_cost_window_falling(const RsCostWindow *w, uint64_t since_usec) {
        if (w->ring_len < 2)
                return false;
        unsigned newest = (w->ring_next + RS_COST_RING - 1) % RS_COST_RING;
        unsigned before = (w->ring_next + RS_COST_RING - 2) % RS_COST_RING;
        if (w->ring_at[before] < since_usec)
                return false;
        return w->ring_stall[newest] < w->ring_stall[before];
}
