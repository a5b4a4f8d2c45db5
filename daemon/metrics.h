/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Prometheus text format for node_exporter's textfile collector: what each guest is estimated to need,
 * what it gets, and what the host got back. Written atomically, since the collector may read the
 * file at any moment. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A size, rate or counter that is not known (yet): its sample is left out rather than reported as 0. */
#define METRICS_UNKNOWN UINT64_MAX

/* The devices a guest is resized with: the "actuator" label of the resize counters. */
typedef enum MetricsActuator {
        METRICS_ACTUATOR_BALLOON,
        METRICS_ACTUATOR_VIRTIO_MEM,
        METRICS_ACTUATOR_DIMM,
        _METRICS_ACTUATOR_MAX,
} MetricsActuator;

typedef struct MetricsGuest {
        const char *name;               /* untrusted: escaped and made valid UTF-8 */
        const char *domain;             /* a libvirt domain's name, or NULL: a "domain" label on
                                         * every sample of the guest, as libvirt's exporters name it */
        const char *state;              /* e.g. "probe"; NULL leaves rightsize_guest_state out */
        /* rightsize_guest_info's labels; source NULL leaves it out, the others NULL are "". */
        const char *uuid;
        const char *source;             /* "qemu", "libvirt" */
        const char *policy;
        const char *mode;
        uint64_t estimate_bytes;
        uint64_t estimate_lower_bytes;
        uint64_t estimate_upper_bytes;
        uint64_t target_bytes;
        uint64_t actual_bytes;
        uint64_t host_rss_bytes;
        uint64_t max_bytes;
        uint64_t floor_bytes;
        uint64_t reclaimable_bytes;     /* max minus the size held at the estimate plus margin */
        /* The next boot's (daemon/boot-history.h): what it booted with, and the recommended
         * size, floor and max with the points they come from; METRICS_UNKNOWN without history. */
        uint64_t boot_bytes;
        uint64_t recommended_boot_bytes, recommended_floor_bytes, recommended_max_bytes;
        uint64_t recommendation_points;
        /* Where its memory is (common/memory-ledger.h): written only with ledger_known (a record
         * zeroed otherwise says nothing), and then METRICS_UNKNOWN where the ledger's is. */
        bool ledger_known;
        uint64_t host_swap_bytes;
        uint64_t host_ksm_bytes;
        uint64_t reported_used_bytes, reported_cache_bytes, reported_free_bytes;
        uint64_t balloon_bytes;
        uint64_t free_returned_bytes;
        uint64_t unreturned_bytes;
        uint64_t refilled_bytes;
        unsigned unreturned_why;        /* MemLedgerFlag: a 0/1 series per reason while unreturned_bytes is known */
        double refault_rate;            /* per second; NaN when unknown */
        double major_fault_rate;        /* per second; NaN when unknown */
        /* Counters since the daemon started: monotonic, back to 0 only when it restarts. */
        uint64_t refaults_total;
        uint64_t major_faults_total;
        uint64_t oom_kills_total;
        uint64_t probe_cycles_total;
        uint64_t reprobes_skipped_total;
        uint64_t probe_refaults_total;
        uint64_t faults_total;
        uint64_t hugepages_collapsed_total;  /* hugepage-repair=: ranges put back on huge pages */
        uint64_t hugepage_holes_filled_bytes_total;
        uint64_t resizes_total[_METRICS_ACTUATOR_MAX];
        uint64_t resize_failures_total[_METRICS_ACTUATOR_MAX];
} MetricsGuest;

typedef struct MetricsHost {
        uint64_t reclaimed_bytes;
        unsigned guests_managed;
        const char *version;            /* rightsize_build_info; NULL leaves it out */
        /* KSM on the host, bytes (with ksm_known: the kernel has KSM; METRICS_UNKNOWN where a
         * figure was not read), and whether khugepaged refills ballooned ranges (with thp_known). */
        bool ksm_known, thp_known;
        uint64_t ksm_sharing_bytes, ksm_shared_bytes;
        bool thp_refills;
        /* Every state a guest can be in: each guest gets a 0/1 series for each (1 for its
         * own), so that a state's count is a sum and an alert's "== 0" means something. */
        const char *const *states;
        size_t n_states;
} MetricsHost;

/* A guest's event counter (refaults, major faults, OOM kills) as the daemon counts it, for a
 * _total metric: the sum of the increases its readings showed from one cycle to the next, read
 * from a first or else a second source of the same kernel counter (the agent's /proc/vmstat, the
 * balloon stats). The readings are untrusted and a guest reboot resets them, so a reading below
 * the last one, or none, only rebases: that interval's events are not counted, and the total
 * never goes down. It starts at 0 with the daemon. */
typedef struct MetricsCounter {
        uint64_t prev[2];   /* each source's reading last cycle; METRICS_UNKNOWN: none */
        uint64_t total;
        bool known;         /* a reading came at least once: the total means something */
} MetricsCounter;

void metrics_counter_init(MetricsCounter *c);
/* a + b, at most METRICS_UNKNOWN - 1: a sum of counters that never reads as unknown. */
uint64_t metrics_counter_add(uint64_t a, uint64_t b);
/* This cycle's readings (METRICS_UNKNOWN: not read); returns the increase it added. Both
 * sources' increases cover the same interval, so only one of them is taken: no event counts
 * twice. */
uint64_t metrics_counter_update(MetricsCounter *c, uint64_t first, uint64_t second);

/* Writes the whole exposition, ending in "# EOF". */
int metrics_format(FILE *f, const MetricsGuest *guests, size_t n_guests, const MetricsHost *host);

/* Formats and replaces `path` atomically, world-readable (node_exporter runs as its own user). */
int metrics_write_file(const char *path, const MetricsGuest *guests, size_t n_guests, const MetricsHost *host);
/* Removes it (gone already: fine). A stopped daemon leaves none: node_exporter would otherwise go
 * on exporting the last guests, sizes and states as if they were still managed. */
int metrics_remove_file(const char *path);

/* Writes s as a Prometheus label value body (no quotes): \\, \" and \n escaped, invalid UTF-8
 * bytes replaced by U+FFFD. */
void metrics_write_label_value(FILE *f, const char *s);
