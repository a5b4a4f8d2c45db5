/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pure formatting for rightsizectl: guest records, aligned tables, human sizes, sparklines,
 * terminal charts and the JSON shapes. No D-Bus, no I/O beyond the FILE it is handed, so
 * every piece can be unit tested. Anything that came from the daemon (guest names, reasons,
 * faults) is sanitised before it reaches a terminal: a guest name is whatever the QMP socket
 * was called, and must not be able to move the cursor or retitle the operator's terminal. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* rightsizectl's exit statuses (ctl/README.md, man/rightsizectl.1). */
enum {
        EXIT_OK = 0,
        EXIT_FAIL = 1,
        EXIT_USAGE = 2,
        EXIT_NO_GUEST = 3,
        EXIT_NO_DAEMON = 4,
        EXIT_DENIED = 5,
        EXIT_FAULTY = 6, /* status: a guest has a fault (other than a skipped libvirt domain) */
};

/* Unknown sizes and times; unknown doubles are NAN; unknown booleans -1. */
#define CTL_UNKNOWN UINT64_MAX

typedef struct CtlGuest {
        char *name, *uuid, *source, *policy, *mode, *state, *tier, *reason, *fault;
        double confidence, refault_rate, major_fault_rate;
        uint64_t estimate, estimate_lower, estimate_upper, scan_onset, target, actual, floor, max,
                virtio_mem_size, host_rss, updated;
        uint64_t reclaimable;                 /* what it would give back: max - (estimate + margin) */
        uint64_t probe_cycles, probe_refaults; /* since the daemon started */
        int free_page_reporting, agent, paused;
} CtlGuest;

typedef enum CtlFieldType {
        CTL_FIELD_STRING, /* D-Bus s */
        CTL_FIELD_SIZE,   /* D-Bus t, bytes */
        CTL_FIELD_USEC,   /* D-Bus t, CLOCK_REALTIME µs */
        CTL_FIELD_DOUBLE, /* D-Bus d */
        CTL_FIELD_BOOL,   /* D-Bus b */
        CTL_FIELD_COUNT,  /* D-Bus t, a count */
} CtlFieldType;

typedef struct CtlField {
        const char *key;  /* as in the D-Bus dictionary and in the JSON output */
        CtlFieldType type;
        size_t offset;    /* into CtlGuest */
} CtlField;

/* Every field of a guest record, in output order (daemon/dbus-api.md). */
extern const CtlField ctl_guest_fields[];
extern const size_t ctl_n_guest_fields;
const CtlField *ctl_guest_field_find(const char *key);
/* D-Bus type character a field must arrive as ('s', 't', 'd', 'b'). */
char ctl_field_dbus_type(const CtlField *f);

void ctl_guest_init(CtlGuest *g);
void ctl_guest_done(CtlGuest *g);
/* Stores a value; strings are copied. Returns 0 or -ENOMEM. */
int ctl_guest_set_string(CtlGuest *g, const CtlField *f, const char *value);
void ctl_guest_set_u64(CtlGuest *g, const CtlField *f, uint64_t value);
void ctl_guest_set_double(CtlGuest *g, const CtlField *f, double value);
void ctl_guest_set_bool(CtlGuest *g, const CtlField *f, bool value);

/* A libvirt domain rightsize leaves alone (no virtio balloon, VFIO, migrating) is listed with the
 * fault "skipped: REASON": deliberate, not a failure. */
bool ctl_guest_skipped(const CtlGuest *g);

typedef struct CtlGuestCounts {
        size_t guests, faulty, skipped, paused; /* skipped ones count as faulty too */
} CtlGuestCounts;
CtlGuestCounts ctl_guest_counts(const CtlGuest *guests, size_t n);
/* status's exit status: EXIT_FAULTY when a guest has a fault other than being skipped, else EXIT_OK. */
int ctl_status_exit_code(const CtlGuestCounts *c);

/* max - actual when both are known, else CTL_UNKNOWN. */
uint64_t ctl_guest_reclaimed(const CtlGuest *g);
/* What the host really got back: max minus the QEMU process's RSS (free page reporting and
 * memory never touched count, not only the balloon). CTL_UNKNOWN without the RSS. */
uint64_t ctl_guest_host_returned(const CtlGuest *g);

typedef struct CtlHistoryPoint {
        uint64_t usec; /* CLOCK_REALTIME */
        uint64_t target, actual, estimate; /* estimate 0 = not known yet */
} CtlHistoryPoint;

/* ---- text ---- */

/* A copy safe to print: C0 and C1 control characters, DEL and bytes that are not valid
 * UTF-8 become '?'. NULL in gives "". NULL only when out of memory. */
char *ctl_sanitize(const char *s);
/* Columns a sanitised string occupies (code points; no wide-character tables). */
size_t ctl_display_width(const char *s);

/* "1.5 GiB", or "-" when unknown. buf at least FORMAT_SIZE_MAX. */
const char *ctl_format_size(char *buf, size_t len, uint64_t bytes);

/* ---- tables ---- */

typedef struct CtlTable CtlTable;
CtlTable *ctl_table_new(size_t n_columns, const char *const *headers);
CtlTable *ctl_table_free(CtlTable *t);
/* Right-aligns a column (numbers, sizes). */
void ctl_table_align_right(CtlTable *t, size_t column);
/* Cells are copied and sanitised; NULL cells print as "-". Returns 0 or -ENOMEM. */
int ctl_table_add_row(CtlTable *t, const char *const *cells);
size_t ctl_table_n_rows(const CtlTable *t);
/* Columns separated by two spaces, header first, no trailing blanks. */
int ctl_table_print(const CtlTable *t, FILE *f);

/* list --name: one sanitised name per line and nothing else, in the daemon's order; a guest
 * without a name is left out. */
int ctl_print_guest_names(FILE *f, const CtlGuest *guests, size_t n);

/* The list command's table: NAME STATE POLICY ESTIMATE TARGET ACTUAL RECLAIMED REASON/FAULT.
 * A guest with a fault shows "fault: ..." in the last column. */
int ctl_print_guest_table(FILE *f, const CtlGuest *guests, size_t n);

/* One host's "what rightsizing gives you" (rightsizectl report): the sums over the guests. */
typedef struct CtlReport {
        size_t guests, with_estimate;
        uint64_t configured;    /* sum of max */
        uint64_t needed;        /* sum of estimate + margin (max - reclaimable), guests with an estimate */
        uint64_t reclaimable;   /* sum of what they would give back */
        uint64_t returned;      /* sum of max - actual */
        uint64_t host_returned; /* sum of max - QEMU RSS, guests whose RSS is known */
        size_t with_rss;
        uint64_t probe_cycles, probe_refaults;
} CtlReport;
CtlReport ctl_report(const CtlGuest *guests, size_t n);
/* The report, then the `top` guests with the most to give back. */
int ctl_print_report(FILE *f, const CtlReport *r, const CtlGuest *guests, size_t n, size_t top);
/* show: the fields people read, then a chart of the history when there is one. */
int ctl_print_guest_details(FILE *f, const CtlGuest *g, const CtlHistoryPoint *h, size_t n_h, size_t width);
/* history: sparklines for target, actual and estimate, a chart, and the points as a table. */
int ctl_print_history(FILE *f, const char *name, const CtlHistoryPoint *h, size_t n_h, size_t width);

/* ---- pictures ---- */

/* One line of ▁▂▃▄▅▆▇█, `width` cells at most: values[] resampled (last value of each
 * bucket), scaled between lo and hi. Values equal to CTL_UNKNOWN print as a space. */
char *ctl_sparkline(const uint64_t *values, size_t n, uint64_t lo, uint64_t hi, size_t width);

/* A chart `height` rows by at most `width` columns (y labels included) of target (T),
 * actual (A) and estimate (E); '*' where two or more meet. Estimate 0 is not drawn. */
int ctl_print_chart(FILE *f, const CtlHistoryPoint *h, size_t n, size_t width, size_t height);

/* ---- JSON (documented in ctl/README.md) ---- */

/* Every documented key, null when unknown. */
json_object *ctl_guest_to_json(const CtlGuest *g);
/* [{"time": µs, "target": B, "actual": B, "estimate": B or null}, ...] */
json_object *ctl_history_to_json(const CtlHistoryPoint *h, size_t n);
typedef enum CtlJsonMode {
        CTL_JSON_OFF,
        CTL_JSON_PRETTY, /* two-space-indented, one key a line: --json and --json=pretty */
        CTL_JSON_SHORT,  /* the whole document on one line: --json=short */
} CtlJsonMode;
/* The argument of --json: NULL (a bare --json) and "pretty" are CTL_JSON_PRETTY, "short" is
 * CTL_JSON_SHORT. -EINVAL for anything else. */
int ctl_json_mode_from_string(const char *s, CtlJsonMode *ret);
/* The JSON and a newline: pretty (CTL_JSON_OFF too) or short. */
int ctl_print_json_mode(FILE *f, json_object *o, CtlJsonMode mode);
/* Plain, two-space-indented JSON and a newline. */
int ctl_print_json(FILE *f, json_object *o);
