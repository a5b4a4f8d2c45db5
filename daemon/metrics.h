/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* OpenMetrics text for node_exporter's textfile collector: what each guest is estimated to need,
 * what it gets, and what the host got back. Written atomically, since the collector may read the
 * file at any moment. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A size or rate that is not known (yet): its sample is left out rather than reported as 0. */
#define METRICS_UNKNOWN UINT64_MAX

typedef struct MetricsGuest {
        const char *name;               /* untrusted: escaped and made valid UTF-8 */
        const char *state;              /* e.g. "probing"; NULL leaves rightsize_guest_state out */
        uint64_t estimate_bytes;
        uint64_t estimate_lower_bytes;
        uint64_t estimate_upper_bytes;
        uint64_t target_bytes;
        uint64_t actual_bytes;
        uint64_t host_rss_bytes;
        double refault_rate;            /* per second; NaN when unknown */
        double major_fault_rate;        /* per second; NaN when unknown */
} MetricsGuest;

typedef struct MetricsHost {
        uint64_t reclaimed_bytes;
        unsigned guests_managed;
} MetricsHost;

/* Writes the whole exposition, ending in "# EOF". */
int metrics_format(FILE *f, const MetricsGuest *guests, size_t n_guests, const MetricsHost *host);

/* Formats and replaces `path` atomically, world-readable (node_exporter runs as its own user). */
int metrics_write_file(const char *path, const MetricsGuest *guests, size_t n_guests, const MetricsHost *host);

/* Writes s as an OpenMetrics label value body (no quotes): \\, \" and \n escaped, invalid UTF-8
 * bytes replaced by U+FFFD. */
void metrics_write_label_value(FILE *f, const char *s);
