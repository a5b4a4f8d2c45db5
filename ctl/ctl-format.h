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
        char *guest_os;                       /* the agent's os id ("mswindows"); NULL: not given */
        double confidence, refault_rate, major_fault_rate;
        uint64_t estimate, estimate_lower, estimate_upper, scan_onset, target, actual, floor, max,
                virtio_mem_size, host_rss, updated;
        uint64_t host_swap, host_ksm;         /* QEMU's pages in host swap, and KSM-merged */
        uint64_t guest_total, guest_free, guest_cache; /* what the guest last said (balloon stats) */
        uint64_t reclaimable;                 /* what it would give back: max - (estimate + margin) */
        uint64_t reclaimed;                   /* held back now: take-over size - actual (CTL_UNKNOWN: an older daemon) */
        uint64_t probe_cycles, probe_refaults; /* since the daemon started */
        uint64_t reprobes_skipped;             /* timed re-probes that could give nothing */
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
        size_t offset;    /* into the record (CtlGuest, CtlMemory, ...) */
} CtlField;

/* Every field of a guest record, in output order (daemon/dbus-api.md). */
extern const CtlField ctl_guest_fields[];
extern const size_t ctl_n_guest_fields;
const CtlField *ctl_guest_field_find(const char *key);
/* The field of that key in a table of n, or NULL. */
const CtlField *ctl_fields_find(const CtlField *fields, size_t n, const char *key);
/* D-Bus type character a field must arrive as ('s', 't', 'd', 'b'). */
char ctl_field_dbus_type(const CtlField *f);

void ctl_guest_init(CtlGuest *g);
void ctl_guest_done(CtlGuest *g);
/* Any record described by a field table (a guest's, a memory report's, a recommendation's): every
 * field set to unknown (CTL_UNKNOWN, NAN, -1 for booleans, NULL strings), and one field stored;
 * strings are copied (0 or -ENOMEM), booleans kept as int 0/1 (-1: unknown). */
void ctl_fields_init(void *record, const CtlField *fields, size_t n);
/* Frees the record's string fields and sets every field unknown again. */
void ctl_fields_done(void *record, const CtlField *fields, size_t n);
int ctl_field_set_string(void *record, const CtlField *f, const char *value);
void ctl_field_set_u64(void *record, const CtlField *f, uint64_t value);
void ctl_field_set_double(void *record, const CtlField *f, double value);
void ctl_field_set_bool(void *record, const CtlField *f, bool value);

/* A guest rightsize leaves alone (no virtio balloon, VFIO, migrating) is in the state "skipped",
 * with the fault "skipped: REASON": deliberate, not a failure. */
bool ctl_guest_skipped(const CtlGuest *g);

typedef struct CtlGuestCounts {
        size_t guests, faulty, skipped, paused; /* skipped ones count as faulty too */
        size_t refused;                         /* turned away: their name is another guest's */
} CtlGuestCounts;
CtlGuestCounts ctl_guest_counts(const CtlGuest *guests, size_t n);
/* status's exit status: EXIT_FAULTY when a guest has a fault other than being skipped, or a guest
 * was refused, else EXIT_OK. */
int ctl_status_exit_code(const CtlGuestCounts *c);

/* What rightsizing holds back now, as the daemon counts it (from the size it took the guest over
 * at); from a daemon that does not send it, max - actual; CTL_UNKNOWN when neither is known. */
uint64_t ctl_guest_reclaimed(const CtlGuest *g);
/* What the host really got back: max minus the QEMU process's RSS (free page reporting and
 * memory never touched count, not only the balloon). CTL_UNKNOWN without the RSS. */
uint64_t ctl_guest_host_returned(const CtlGuest *g);

typedef struct CtlHistoryPoint {
        uint64_t usec; /* CLOCK_REALTIME */
        uint64_t target, actual, estimate; /* estimate 0 = not known yet */
} CtlHistoryPoint;

/* ---- the terminal: glyphs and colours ---- */

/* Every non-ASCII character and every escape sequence rightsizectl prints comes from here. What
 * the output may use is decided once by rightsizectl at start (before a pager takes stdout) and
 * set with ctl_set_terminal(); until then: UTF-8 glyphs, no colour. */
typedef enum CtlGlyph {
        CTL_GLYPH_BULLET,       /* "●" or "*": the daemon, a guest without a fault */
        CTL_GLYPH_CROSS,        /* "×" or "x": a guest with a fault */
        CTL_GLYPH_AXIS_TICK,    /* "┤" or "|": the chart's y axis */
        CTL_GLYPH_AXIS_CORNER,  /* "└" or "+" */
        CTL_GLYPH_AXIS_LINE,    /* "─" or "-": the chart's x axis */
        CTL_GLYPH_SPARK_1,      /* "▁" .. "█", or "_" .. "#": sparkline levels, lowest first */
        CTL_GLYPH_SPARK_2,
        CTL_GLYPH_SPARK_3,
        CTL_GLYPH_SPARK_4,
        CTL_GLYPH_SPARK_5,
        CTL_GLYPH_SPARK_6,
        CTL_GLYPH_SPARK_7,
        CTL_GLYPH_SPARK_8,
        _CTL_GLYPH_MAX,
} CtlGlyph;

typedef enum CtlColor {
        CTL_COLOR_NORMAL,    /* back to plain */
        CTL_COLOR_RED,       /* faults */
        CTL_COLOR_GREEN,     /* all well */
        CTL_COLOR_YELLOW,    /* paused by an operator */
        CTL_COLOR_HEADER,    /* a table's header: underlined */
        _CTL_COLOR_MAX,
} CtlColor;

void ctl_set_terminal(bool utf8, bool colors);
bool ctl_utf8(void);
bool ctl_colors(void);
/* The glyph, UTF-8 or its ASCII stand-in. */
const char *ctl_glyph(CtlGlyph g);
/* The SGR escape, or "" with colours off. */
const char *ctl_color(CtlColor c);

/* Whether output may be UTF-8: the locale's codeset (nl_langinfo(CODESET) after setlocale) is
 * UTF-8, and TERM is not one that cannot show it (dumb, or vt*: a serial console). */
bool ctl_utf8_wanted(const char *codeset, const char *term);
/* Whether to colour, as systemd decides: $SYSTEMD_COLORS when it is a boolean (or 16, 256,
 * 24bit: on) wins; then $NO_COLOR set and not empty (https://no-color.org) means no; then only
 * on a terminal (stdout a tty) whose TERM is not dumb. */
bool ctl_colors_wanted(const char *systemd_colors, const char *no_color, const char *term, bool tty);
/* systemd's parse_boolean(): 1 (1, yes, y, true, t, on), 0 (0, no, n, false, f, off; any case),
 * or -1 for anything else, NULL too. */
int ctl_parse_boolean(const char *s);

/* ---- text ---- */

/* A copy safe to print: C0 and C1 control characters, DEL, the bidi controls (U+061C,
 * U+200E-U+200F, U+202A-U+202E, U+2066-U+2069), the zero-width and other invisible format
 * characters (U+180E, U+200B-U+200D, U+2060-U+2064, U+206A-U+206F, U+FEFF) and bytes that are
 * not valid UTF-8 become '?'; without UTF-8 output (ctl_utf8()) every non-ASCII character does
 * too. NULL in gives "". NULL only when out of memory. */
char *ctl_sanitize(const char *s);
/* Terminal columns a sanitised string occupies: wcswidth() of it in a UTF-8 locale (CJK and
 * other wide characters count two, combining marks none); elsewhere, or for what the locale does
 * not know, a built-in table of the wide and zero-width ranges. */
size_t ctl_display_width(const char *s);
/* s (sanitised) followed by blanks up to `width` display columns. */
int ctl_print_padded(FILE *f, const char *s, size_t width);

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
/* Colours a cell of the last row added (only its text, not the padding; nothing with colours off). */
void ctl_table_color_cell(CtlTable *t, size_t column, CtlColor color);
/* Columns separated by two spaces, header first (underlined with colours), aligned by display
 * width, no trailing blanks. */
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
        uint64_t returned;      /* sum of what rightsizing holds back now (ctl_guest_reclaimed) */
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

/* monitor: one EstimateChanged signal, with what GetGuest said right after it. */
typedef struct CtlEstimateEvent {
        uint64_t usec;                     /* CLOCK_REALTIME, when it arrived */
        const char *name;
        uint64_t estimate, lower, upper;   /* CTL_UNKNOWN: not known (the signal's 0) */
        uint64_t target;                   /* CTL_UNKNOWN when GetGuest failed */
        const char *state;                 /* NULL when GetGuest failed */
        bool fault, paused;
} CtlEstimateEvent;
/* The display width of the widest of the guests' names, sanitised: monitor's name column. */
size_t ctl_guest_name_width(const CtlGuest *guests, size_t n);
/* "2026-01-02 03:04:05  NAME  estimate 1.2 GiB (1 GiB .. 1.5 GiB)  target 1.5 GiB  hold", one line;
 * NAME padded to *column display columns (ctl_guest_name_width() of the guests followed), and
 * *column widened when the name is wider, so that the lines after it stay aligned. */
int ctl_print_estimate_event(FILE *f, const CtlEstimateEvent *e, size_t *column);
/* {"time", "name", "estimate", "estimate-lower", "estimate-upper", "target", "state"}, unknown: null. */
json_object *ctl_estimate_event_to_json(const CtlEstimateEvent *e);

/* ---- pictures ---- */

/* One line of ▁▂▃▄▅▆▇█ (ASCII: _.:-=+*#), `width` cells at most: values[] resampled (last
 * value of each bucket), scaled between lo and hi. Values equal to CTL_UNKNOWN print as a space. */
char *ctl_sparkline(const uint64_t *values, size_t n, uint64_t lo, uint64_t hi, size_t width);

/* A chart `height` rows by at most `width` columns (y labels included, axes drawn with
 * ctl_glyph()) of target (T), actual (A) and estimate (E); '*' where two or more meet.
 * Estimate 0 is not drawn. */
int ctl_print_chart(FILE *f, const CtlHistoryPoint *h, size_t n, size_t width, size_t height);

/* ---- JSON (documented in ctl/README.md) ---- */

/* Every documented key, null when unknown. */
/* One field of a record as JSON: NULL (null) when unknown. */
json_object *ctl_field_json(const void *record, const CtlField *f);
/* Adds every field of a record to o, by its table: null when unknown. 0 or -ENOMEM. */
int ctl_fields_to_json(json_object *o, const void *record, const CtlField *fields, size_t n);
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
