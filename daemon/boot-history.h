/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What a guest needed over the last 14 days, for `rightsizectl recommend` (its next boot's size):
 * one point per 10 minutes, the daemon's own samples summed up, kept in a ring of fixed size in
 * memory and in one file per guest next to its state file ("NAME.history"). Bounded on disk and
 * in memory whatever the guest does: the guest decides none of the points' number or size.
 *
 * The file is binary, fixed-size records behind a header that names the format, the guest and
 * the record size; a file that is not exactly that (foreign, truncated, hostile, another
 * guest's) is discarded whole, with one log line. Then the recommendation's rules, pure. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BOOT_HISTORY_INTERVAL_USEC (10ULL * 60 * 1000000)          /* one point per 10 minutes */
#define BOOT_HISTORY_SPAN_USEC (14ULL * 24 * 3600 * 1000000)       /* 14 days */
#define BOOT_HISTORY_MAX ((size_t) (BOOT_HISTORY_SPAN_USEC / BOOT_HISTORY_INTERVAL_USEC)) /* 2016 */
/* Less history than this and the figures are labelled provisional. */
#define BOOT_HISTORY_ENOUGH_USEC (24ULL * 3600 * 1000000)
#define BOOT_HISTORY_UNKNOWN UINT64_MAX

typedef struct BootHistoryPoint {
        uint64_t realtime_usec; /* CLOCK_REALTIME at the end of the 10 minutes: survives reboots */
        uint64_t estimate;      /* the largest working-set estimate of the 10 minutes, bytes, or UNKNOWN */
        uint64_t target;        /* the size held/asked for at its end, bytes, or UNKNOWN */
        uint64_t actual;        /* the size the guest had at its end, bytes, or UNKNOWN */
        double stall;           /* the guest's memory stall, share of wall time (PSI some / 100),
                                 * averaged over the 10 minutes; NAN when the guest does not say */
} BootHistoryPoint;

/* The ring: at most BOOT_HISTORY_MAX points, oldest first; a push past it drops the oldest. */
typedef struct BootHistory {
        BootHistoryPoint points[BOOT_HISTORY_MAX];
        size_t head, n;
} BootHistory;

void boot_history_init(BootHistory *h);
/* Appends a point. A point not after the newest (the clock set back) replaces nothing: it drops
 * the points at or after it first, so that the ring stays in time order. */
void boot_history_push(BootHistory *h, const BootHistoryPoint *p);
/* The i-th point, oldest first (i < h->n). */
const BootHistoryPoint *boot_history_at(const BootHistory *h, size_t i);
/* Drops the points older than now - 14 days. */
void boot_history_expire(BootHistory *h, uint64_t now_realtime_usec);

/* "<dir>/<escaped name>.history" (the state file's name with another suffix). */
int boot_history_path(const char *dir, const char *name, char **ret);
/* Replaces the guest's file with the ring, atomically (temp + rename). Not fsynced: see the .c. */
int boot_history_save(const char *dir, const char *name, const BootHistory *h);
/* Loads the guest's file into h (expired points dropped): 0, -ENOENT when there is none, or
 * -EBADMSG / -EFBIG / -EPROTONOSUPPORT when one was there and is discarded (logged once, with
 * the reason). h is empty on any failure. */
int boot_history_load(const char *dir, const char *name, uint64_t now_realtime_usec, BootHistory *h);
/* The file's contents, for tests and the loader: the serialised ring, and back. parse returns
 * -EBADMSG or -EPROTONOSUPPORT with a static *ret_reason. */
int boot_history_serialize(const BootHistory *h, const char *name, void **ret, size_t *ret_size);
int boot_history_parse(const void *data, size_t size, const char *name, uint64_t now_realtime_usec, BootHistory *h,
                       const char **ret_reason);

/* ---- the recommendation ---- */

#define BOOT_MARGIN_PERCENT 10

typedef struct BootRecommendation {
        size_t points;             /* points with a known estimate */
        uint64_t since_usec;       /* the oldest of them (CLOCK_REALTIME), 0 without any */
        uint64_t span_usec;        /* from the oldest to the newest */
        bool enough;               /* span of at least BOOT_HISTORY_ENOUGH_USEC */
        uint64_t p50, p95, peak;   /* of the estimate, bytes (UNKNOWN without points) */
        /* The figures, MiB-rounded up (UNKNOWN without points), each with its rule: */
        uint64_t boot;             /* p95 + margin, at most the guest's memory: currentMemory */
        uint64_t floor;            /* p50 + margin: below it the guest needed more half the time */
        uint64_t max;              /* peak + margin: the most it needed (its <memory> should allow it) */
        double stall_mean;         /* mean of the points' stall, NAN when none said */
        double stall_p95;          /* p95 of it */
} BootRecommendation;

/* The nearest-rank percentile (1..100) of n sorted values: the ceil(pct/100 x n)-th. */
uint64_t boot_percentile(const uint64_t *sorted, size_t n, unsigned pct);
/* value + BOOT_MARGIN_PERCENT %, rounded up to a whole MiB; UNKNOWN stays so. */
uint64_t boot_with_margin(uint64_t value);
/* The figures from the ring; guest_max caps the boot size (a domain cannot boot above its
 * memory). -ENOMEM. */
int boot_recommend(const BootHistory *h, uint64_t guest_max, BootRecommendation *ret);
/* The rule of each figure in words, e.g. "p95 of the estimate over 14 days (2016 points, since
 * 2026-11-23 10:00) + margin 10 %"; which is "boot", "floor" or "max". */
int boot_rule_text(const BootRecommendation *r, const char *which, char *buf, size_t len);
