/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Gauges and counters only: node_exporter's parser reads Prometheus text format, which knows no
 * "stateset" or "info" types, and ignores the "# UNIT" and "# EOF" lines it does not know. For the
 * same reason a counter's TYPE line names it with its "_total" (Prometheus text format, where the
 * family is the sample's name), not without it as OpenMetrics would. */

#include "daemon/metrics.h"

#include <errno.h>
#include <unistd.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/fileio.h"
#include "common/memory-ledger.h"

/* The text is put together here rather than through a FILE: stdio's memstream spends more on
 * each short write than the write is worth, and the file is some 50 short lines a guest. */
typedef struct Text {
        char *data;
        size_t size, alloc;
        bool oom;
} Text;

static void text_put(Text *t, const void *p, size_t n) {
        if (t->oom)
                return;
        if (t->size + n > t->alloc) {
                size_t want = MAX(t->size + n, MAX(t->alloc * 2, (size_t) 64 * 1024));
                char *d = realloc(t->data, want);
                if (!d) {
                        t->oom = true;
                        return;
                }
                t->data = d;
                t->alloc = want;
        }
        memcpy(t->data + t->size, p, n);
        t->size += n;
}

static void text_puts(Text *t, const char *s) {
        text_put(t, s, strlen(s));
}

static void text_putc(Text *t, char c) {
        if (!t->oom && t->size < t->alloc)
                t->data[t->size++] = c;
        else
                text_put(t, &c, 1);
}

typedef enum MetricKind {
        METRIC_BYTES,
        METRIC_RATE,
        METRIC_COUNTER,
        METRIC_GAUGE,   /* a whole number that is neither bytes nor a counter */
} MetricKind;

typedef struct GuestMetric {
        const char *name;
        const char *help;
        MetricKind kind;
        size_t offset;
        bool ledger;    /* the memory ledger's: only for a guest with ledger_known */
} GuestMetric;

static const GuestMetric guest_metrics[] = {
        { "rightsize_guest_estimate_bytes", "Estimated working set of the guest.", METRIC_BYTES,
          offsetof(MetricsGuest, estimate_bytes) },
        { "rightsize_guest_estimate_lower_bytes", "Lower bound of the working-set estimate.", METRIC_BYTES,
          offsetof(MetricsGuest, estimate_lower_bytes) },
        { "rightsize_guest_estimate_upper_bytes", "Upper bound of the working-set estimate.", METRIC_BYTES,
          offsetof(MetricsGuest, estimate_upper_bytes) },
        { "rightsize_guest_target_bytes", "Memory size rightsize is steering the guest to.", METRIC_BYTES,
          offsetof(MetricsGuest, target_bytes) },
        { "rightsize_guest_actual_bytes", "Memory size the guest has now, as the balloon or virtio-mem reports it.",
          METRIC_BYTES, offsetof(MetricsGuest, actual_bytes) },
        { "rightsize_guest_host_rss_bytes", "Resident memory of the guest's QEMU process on the host.", METRIC_BYTES,
          offsetof(MetricsGuest, host_rss_bytes) },
        { "rightsize_guest_max_bytes", "Largest size the guest's policy lets it have.", METRIC_BYTES,
          offsetof(MetricsGuest, max_bytes) },
        { "rightsize_guest_floor_bytes", "Smallest size the guest's policy lets it have.", METRIC_BYTES,
          offsetof(MetricsGuest, floor_bytes) },
        { "rightsize_guest_reclaimable_bytes",
          "Memory the guest would give back held at its estimate plus margin: max minus that size.", METRIC_BYTES,
          offsetof(MetricsGuest, reclaimable_bytes) },
        { "rightsize_guest_boot_bytes", "Memory the guest booted with (its boot memory, else its whole size).",
          METRIC_BYTES, offsetof(MetricsGuest, boot_bytes) },
        { "rightsize_guest_recommended_boot_bytes",
          "Next boot's recommended size (libvirt currentMemory): p95 of the estimate over the last 14 days plus 10 %.",
          METRIC_BYTES, offsetof(MetricsGuest, recommended_boot_bytes) },
        { "rightsize_guest_recommended_floor_bytes",
          "Next boot's recommended floor: p50 of the estimate over the last 14 days plus 10 %.", METRIC_BYTES,
          offsetof(MetricsGuest, recommended_floor_bytes) },
        { "rightsize_guest_recommended_max_bytes",
          "Next boot's recommended maximum: the peak estimate over the last 14 days plus 10 %.", METRIC_BYTES,
          offsetof(MetricsGuest, recommended_max_bytes) },
        { "rightsize_guest_recommendation_points",
          "Points (one per 10 minutes with an estimate) the recommendation is made of; under 144 (a day) it is provisional.",
          METRIC_GAUGE, offsetof(MetricsGuest, recommendation_points) },
        { "rightsize_guest_host_swap_bytes",
          "Memory of the guest's QEMU process in the host's swap (VmSwap): guest memory the host pushed out rather than got back.",
          METRIC_BYTES, offsetof(MetricsGuest, host_swap_bytes), true },
        { "rightsize_guest_host_ksm_bytes", "Pages of the guest's QEMU process that KSM merged with others.",
          METRIC_BYTES, offsetof(MetricsGuest, host_ksm_bytes), true },
        { "rightsize_guest_reported_used_bytes",
          "Memory the guest says it uses: its total minus free and page cache (balloon stats, clamped to its size).",
          METRIC_BYTES, offsetof(MetricsGuest, reported_used_bytes), true },
        { "rightsize_guest_reported_cache_bytes", "Page cache the guest says it has: reclaimable (balloon stats).",
          METRIC_BYTES, offsetof(MetricsGuest, reported_cache_bytes), true },
        { "rightsize_guest_reported_free_bytes", "Memory the guest says is free (balloon stats).", METRIC_BYTES,
          offsetof(MetricsGuest, reported_free_bytes), true },
        { "rightsize_guest_balloon_bytes",
          "Memory the balloon (and unplugged virtio-mem) holds back: the guest's configured size minus its size now.",
          METRIC_BYTES, offsetof(MetricsGuest, balloon_bytes), true },
        { "rightsize_guest_free_returned_bytes",
          "The guest's free memory the host does not hold: reported by free page reporting, or never touched.",
          METRIC_BYTES, offsetof(MetricsGuest, free_returned_bytes), true },
        { "rightsize_guest_unreturned_bytes",
          "The guest's free memory the host still holds in QEMU's RSS or swap (rightsize_guest_unreturned_reason says why).",
          METRIC_BYTES, offsetof(MetricsGuest, unreturned_bytes), true },
        { "rightsize_guest_refilled_bytes",
          "Memory the host holds for the guest beyond its size: ballooned ranges filled back in (khugepaged) and QEMU's own.",
          METRIC_BYTES, offsetof(MetricsGuest, refilled_bytes), true },
        { "rightsize_guest_refault_rate", "Page refaults per second in the guest.", METRIC_RATE,
          offsetof(MetricsGuest, refault_rate) },
        { "rightsize_guest_major_fault_rate", "Major page faults per second in the guest.", METRIC_RATE,
          offsetof(MetricsGuest, major_fault_rate) },
        { "rightsize_guest_refaults_total",
          "Workingset refaults in the guest (its vmstat through the guest agent) since rightsized started.",
          METRIC_COUNTER, offsetof(MetricsGuest, refaults_total) },
        { "rightsize_guest_major_faults_total", "Major page faults in the guest since rightsized started.",
          METRIC_COUNTER, offsetof(MetricsGuest, major_faults_total) },
        { "rightsize_guest_oom_kills_total", "OOM kills in the guest since rightsized started.", METRIC_COUNTER,
          offsetof(MetricsGuest, oom_kills_total) },
        { "rightsize_guest_probe_cycles_total", "Probe cycles started (from learn or hold) since rightsized started.",
          METRIC_COUNTER, offsetof(MetricsGuest, probe_cycles_total) },
        { "rightsize_guest_reprobes_skipped_total",
          "Re-probes not run because the guest had nothing to give (held at its floor, or a confirmed estimate of a set outside the page cache with no sign it shrank) since rightsized started.",
          METRIC_COUNTER, offsetof(MetricsGuest, reprobes_skipped_total) },
        { "rightsize_guest_probe_refaults_total",
          "Workingset refaults in intervals the guest spent in probe or backoff since rightsized started.",
          METRIC_COUNTER, offsetof(MetricsGuest, probe_refaults_total) },
        { "rightsize_guest_faults_total",
          "Times the guest went from no fault to a fault (faulty, or a balloon that stopped, stats that lie) "
          "since rightsized started.",
          METRIC_COUNTER, offsetof(MetricsGuest, faults_total) },
        { "rightsize_guest_hugepages_collapsed_total",
          "2 MiB ranges of the guest's RAM put back on a host huge page (hugepage-repair=) since rightsized started.",
          METRIC_COUNTER, offsetof(MetricsGuest, hugepages_collapsed_total) },
        { "rightsize_guest_hugepage_holes_filled_bytes_total",
          "Holes those collapses filled: memory the host spent again under the guest, since rightsized started.",
          METRIC_COUNTER, offsetof(MetricsGuest, hugepage_holes_filled_bytes_total) },
};

typedef struct ActuatorMetric {
        const char *name;
        const char *help;
        size_t offset;
} ActuatorMetric;

static const ActuatorMetric actuator_metrics[] = {
        { "rightsize_guest_resizes_total",
          "Resizes rightsized sent to the guest (or queued, for libvirt) since it started, by device.",
          offsetof(MetricsGuest, resizes_total) },
        { "rightsize_guest_resize_failures_total",
          "Resizes of the guest that failed (at once or later) since rightsized started, by device.",
          offsetof(MetricsGuest, resize_failures_total) },
};

static const char *const actuator_names[_METRICS_ACTUATOR_MAX] = {
        [METRICS_ACTUATOR_BALLOON] = "balloon",
        [METRICS_ACTUATOR_VIRTIO_MEM] = "virtio-mem",
        [METRICS_ACTUATOR_DIMM] = "dimm",
};

/* Length of the valid UTF-8 sequence at s, or 0 (overlongs, surrogates and > U+10FFFF included). */
static size_t utf8_valid_length(const unsigned char *s) {
        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xc2 && s[0] <= 0xdf)
                return (s[1] & 0xc0) == 0x80 ? 2 : 0;
        if (s[0] >= 0xe0 && s[0] <= 0xef) {
                if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
                        return 0;
                if (s[0] == 0xe0 && s[1] < 0xa0)
                        return 0; /* overlong */
                if (s[0] == 0xed && s[1] >= 0xa0)
                        return 0; /* surrogate */
                return 3;
        }
        if (s[0] >= 0xf0 && s[0] <= 0xf4) {
                if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
                        return 0;
                if (s[0] == 0xf0 && s[1] < 0x90)
                        return 0;
                if (s[0] == 0xf4 && s[1] >= 0x90)
                        return 0;
                return 4;
        }
        return 0;
}

/* The file is some 50 lines a guest, rewritten every PUBLISH_INTERVAL_USEC (manager.c): label
 * values are escaped once per guest and file, copied in runs rather than a call a character,
 * and the numbers formatted here instead of through printf. */
static void text_label_value(Text *f, const char *s) {
        const unsigned char *p = (const unsigned char *) (s ?: "");

        while (*p) {
                const unsigned char *run = p;
                size_t n;

                /* The longest stretch that is written as it is. */
                while (*p && *p != '\\' && *p != '"' && *p != '\n' && (n = utf8_valid_length(p)) > 0)
                        p += n;
                if (p > run)
                        text_put(f, run, (size_t) (p - run));
                switch (*p) {
                case '\0':
                        return;
                case '\\':
                        text_puts(f, "\\\\");
                        break;
                case '"':
                        text_puts(f, "\\\"");
                        break;
                case '\n':
                        text_puts(f, "\\n");
                        break;
                default:
                        /* A single invalid byte makes node_exporter reject the whole file. */
                        text_puts(f, "\xef\xbf\xbd");
                        break;
                }
                p++;
        }
}

static void write_u64(Text *f, uint64_t v) {
        char buf[20];
        size_t i = sizeof(buf);

        do {
                buf[--i] = (char) ('0' + v % 10);
                v /= 10;
        } while (v > 0);
        text_put(f, buf + i, sizeof(buf) - i);
}

/* Shortest decimal that reads back as the same double. */
static void write_double(Text *f, double v) {
        char buf[32];

        if (isnan(v)) {
                text_puts(f, "NaN");
                return;
        }
        if (isinf(v)) {
                text_puts(f, v > 0 ? "+Inf" : "-Inf");
                return;
        }
        for (int precision = 1; precision <= 17; precision++) {
                snprintf(buf, sizeof(buf), "%.*g", precision, v);
                if (strtod(buf, NULL) == v)
                        break;
        }
        text_puts(f, buf);
}

static void write_comment(Text *f, const char *what, const char *name, const char *text) {
        text_puts(f, what);
        text_puts(f, name);
        text_putc(f, ' ');
        text_puts(f, text);
        text_putc(f, '\n');
}

static void write_header_typed(Text *f, const char *name, const char *type, const char *help, const char *unit) {
        write_comment(f, "# TYPE ", name, type);
        if (unit)
                write_comment(f, "# UNIT ", name, unit);
        write_comment(f, "# HELP ", name, help);
}

static void write_header(Text *f, const char *name, const char *help, const char *unit) {
        write_header_typed(f, name, "gauge", help, unit);
}

/* A label after the first: ,key="value" with the value escaped. */
static void write_label(Text *f, const char *key, const char *value) {
        text_putc(f, ',');
        text_puts(f, key);
        text_puts(f, "=\"");
        text_label_value(f, value);
        text_putc(f, '"');
}

/* The guest's labels, escaped: guest="..." and ,domain="..." if it has one. */
static char *guest_labels(const MetricsGuest *g) {
        Text t = {};
        Text *f = &t;

        text_puts(f, "guest=\"");
        text_label_value(f, g->name);
        text_putc(f, '"');
        if (g->domain)
                write_label(f, "domain", g->domain);
        text_putc(f, '\0');
        if (t.oom) {
                free(t.data);
                return NULL;
        }
        return t.data;
}

/* The sample's name and the guest's labels, the brace left open for more. */
static void write_guest_label(Text *f, const char *name, const char *labels) {
        text_puts(f, name);
        text_putc(f, '{');
        text_puts(f, labels);
}

static void write_line_u64(Text *f, const char *name, uint64_t v) {
        text_puts(f, name);
        text_putc(f, ' ');
        write_u64(f, v);
        text_putc(f, '\n');
}

static void write_close_u64(Text *f, uint64_t v) {
        text_puts(f, "} ");
        write_u64(f, v);
        text_putc(f, '\n');
}

static int format_text(Text *f, const MetricsGuest *guests, size_t n_guests, const MetricsHost *host) {
        char **labels;

        if ((!guests && n_guests > 0) || !host)
                return -EINVAL;
        labels = calloc(MAX(n_guests, (size_t) 1), sizeof(*labels));
        if (!labels)
                return -ENOMEM;
        for (size_t i = 0; i < n_guests; i++)
                if (!(labels[i] = guest_labels(&guests[i]))) {
                        for (size_t k = 0; k < i; k++)
                                free(labels[k]);
                        free(labels);
                        return -ENOMEM;
                }

        for (size_t m = 0; m < ARRAY_SIZE(guest_metrics); m++) {
                const GuestMetric *gm = &guest_metrics[m];

                write_header_typed(f, gm->name, gm->kind == METRIC_COUNTER ? "counter" : "gauge", gm->help,
                                   gm->kind == METRIC_BYTES ? "bytes" : NULL);
                for (size_t i = 0; i < n_guests; i++) {
                        const void *field = (const char *) &guests[i] + gm->offset;

                        if (gm->ledger && !guests[i].ledger_known)
                                continue;
                        if (gm->kind != METRIC_RATE) {
                                uint64_t v = *(const uint64_t *) field;
                                if (v == METRICS_UNKNOWN)
                                        continue;
                                write_guest_label(f, gm->name, labels[i]);
                                write_close_u64(f, v);
                        } else {
                                double v = *(const double *) field;
                                if (isnan(v))
                                        continue;
                                write_guest_label(f, gm->name, labels[i]);
                                text_puts(f, "} ");
                                write_double(f, v);
                                text_putc(f, '\n');
                        }
                }
        }

        for (size_t m = 0; m < ARRAY_SIZE(actuator_metrics); m++) {
                const ActuatorMetric *am = &actuator_metrics[m];

                write_header_typed(f, am->name, "counter", am->help, NULL);
                for (size_t i = 0; i < n_guests; i++) {
                        const uint64_t *v = (const uint64_t *) ((const char *) &guests[i] + am->offset);

                        for (size_t a = 0; a < _METRICS_ACTUATOR_MAX; a++) {
                                if (v[a] == METRICS_UNKNOWN)
                                        continue;
                                write_guest_label(f, am->name, labels[i]);
                                write_label(f, "actuator", actuator_names[a]);
                                write_close_u64(f, v[a]);
                        }
                }
        }

        write_header(f, "rightsize_guest_state",
                     "The guest's state: 1 for the state it is in, 0 for each of the others.", NULL);
        for (size_t i = 0; i < n_guests; i++) {
                if (!guests[i].state)
                        continue;
                bool listed = false;
                for (size_t k = 0; k < host->n_states; k++) {
                        bool in = strcmp(host->states[k], guests[i].state) == 0;
                        listed |= in;
                        write_guest_label(f, "rightsize_guest_state", labels[i]);
                        write_label(f, "state", host->states[k]);
                        text_puts(f, in ? "} 1\n" : "} 0\n");
                }
                if (!listed) { /* a state the list does not know still shows */
                        write_guest_label(f, "rightsize_guest_state", labels[i]);
                        write_label(f, "state", guests[i].state);
                        text_puts(f, "} 1\n");
                }
        }

        write_header(f, "rightsize_guest_unreturned_reason",
                     "Why the host did not get the guest's free memory back: 1 for each reason that holds, 0 for the others "
                     "(clamped: the guest's own figures were beyond its size, and were clamped to it).",
                     NULL);
        const char *reasons[8];
        size_t n_reasons = mem_ledger_why_keys(~0u, reasons, ARRAY_SIZE(reasons));
        for (size_t i = 0; i < n_guests; i++) {
                if (!guests[i].ledger_known || guests[i].unreturned_bytes == METRICS_UNKNOWN)
                        continue;
                const char *on[8];
                size_t n_on = mem_ledger_why_keys(guests[i].unreturned_why, on, ARRAY_SIZE(on));
                for (size_t k = 0; k < n_reasons; k++) {
                        bool in = false;
                        for (size_t j = 0; j < n_on; j++)
                                in |= on[j] == reasons[k];
                        write_guest_label(f, "rightsize_guest_unreturned_reason", labels[i]);
                        write_label(f, "reason", reasons[k]);
                        text_puts(f, in ? "} 1\n" : "} 0\n");
                }
        }

        write_header(f, "rightsize_guest_info", "Where the guest comes from and how it is managed (always 1).", NULL);
        for (size_t i = 0; i < n_guests; i++) {
                const MetricsGuest *g = &guests[i];

                if (!g->source)
                        continue;
                write_guest_label(f, "rightsize_guest_info", labels[i]);
                write_label(f, "uuid", g->uuid);
                write_label(f, "source", g->source);
                write_label(f, "policy", g->policy);
                write_label(f, "mode", g->mode);
                text_puts(f, "} 1\n");
        }

        write_header(f, "rightsize_host_reclaimed_bytes",
                     "Memory rightsizing holds back from the guests: the sum of the size each had when rightsized took it over minus its actual size.", "bytes");
        write_line_u64(f, "rightsize_host_reclaimed_bytes", host->reclaimed_bytes);
        if (host->ksm_known && host->ksm_sharing_bytes != METRICS_UNKNOWN) {
                write_header(f, "rightsize_host_ksm_sharing_bytes",
                             "Memory KSM saves on the host: the sites sharing its merged pages (pages_sharing).", "bytes");
                write_line_u64(f, "rightsize_host_ksm_sharing_bytes", host->ksm_sharing_bytes);
        }
        if (host->ksm_known && host->ksm_shared_bytes != METRICS_UNKNOWN) {
                write_header(f, "rightsize_host_ksm_shared_bytes", "KSM's merged pages in use on the host (pages_shared).",
                             "bytes");
                write_line_u64(f, "rightsize_host_ksm_shared_bytes", host->ksm_shared_bytes);
        }
        if (host->thp_known) {
                write_header(f, "rightsize_host_thp_refills",
                             "Whether the host's khugepaged fills ballooned ranges back in (huge pages on, max_ptes_none above 0).",
                             NULL);
                write_line_u64(f, "rightsize_host_thp_refills", host->thp_refills ? 1 : 0);
        }
        write_header(f, "rightsize_guests_managed", "Guests rightsize is managing.", NULL);
        write_line_u64(f, "rightsize_guests_managed", host->guests_managed);
        if (host->version) {
                write_header(f, "rightsize_build_info", "The rightsized that wrote this file (always 1).", NULL);
                text_puts(f, "rightsize_build_info{version=\"");
                text_label_value(f, host->version);
                text_puts(f, "\"} 1\n");
        }

        text_puts(f, "# EOF\n");
        for (size_t i = 0; i < n_guests; i++)
                free(labels[i]);
        free(labels);
        return f->oom ? -ENOMEM : 0;
}

int metrics_format(FILE *f, const MetricsGuest *guests, size_t n_guests, const MetricsHost *host) {
        _cleanup_(freep) char *data = NULL;
        Text t = {};
        int r;

        if (!f)
                return -EINVAL;
        r = format_text(&t, guests, n_guests, host);
        data = t.data;
        if (r < 0)
                return r;
        if (t.size > 0)
                fwrite(t.data, 1, t.size, f);
        fflush(f);
        return ferror(f) ? -EIO : 0;
}

void metrics_write_label_value(FILE *f, const char *s) {
        Text t = {};

        text_label_value(&t, s);
        if (t.size > 0)
                fwrite(t.data, 1, t.size, f);
        free(t.data);
}

void metrics_counter_init(MetricsCounter *c) {
        *c = (MetricsCounter) { .prev = { METRICS_UNKNOWN, METRICS_UNKNOWN } };
}

uint64_t metrics_counter_add(uint64_t a, uint64_t b) {
        a = MIN(a, METRICS_UNKNOWN - 1);
        return a + MIN(b, METRICS_UNKNOWN - 1 - a);
}

/* One source's increase since the last cycle into *ret (false when there is none to tell),
 * keeping this reading for the next. */
static bool counter_delta(uint64_t *prev, uint64_t now, uint64_t *ret) {
        uint64_t p = *prev;

        *prev = now;
        if (now == METRICS_UNKNOWN || p == METRICS_UNKNOWN || now < p)
                return false;
        *ret = now - p;
        return true;
}

uint64_t metrics_counter_update(MetricsCounter *c, uint64_t first, uint64_t second) {
        uint64_t d1 = 0, d2 = 0, d = 0;
        bool k1 = counter_delta(&c->prev[0], first, &d1);
        bool k2 = counter_delta(&c->prev[1], second, &d2);

        if (k1)
                d = d1;
        else if (k2)
                d = d2;
        /* Saturates rather than wraps: a guest that lies cannot make the counter go down. */
        c->total = metrics_counter_add(c->total, d);
        c->known = c->known || first != METRICS_UNKNOWN || second != METRICS_UNKNOWN;
        return d;
}

int metrics_write_file(const char *path, const MetricsGuest *guests, size_t n_guests, const MetricsHost *host) {
        _cleanup_(freep) char *data = NULL;
        Text t = {};
        int r;

        if (!path)
                return -EINVAL;
        r = format_text(&t, guests, n_guests, host);
        data = t.data;
        if (r < 0)
                return r;

        /* No fsync: after a crash a stale or missing metrics file is harmless. */
        return write_file_atomic(path, t.data ?: "", t.size, 0644, 0);
}

int metrics_remove_file(const char *path) {
        if (!path)
                return -EINVAL;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}
