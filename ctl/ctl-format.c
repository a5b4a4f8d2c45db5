/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ctl/ctl-format.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <wchar.h>

#include "common/macro.h"
#include "common/size.h"

#define FIELD(k, t, m) { k, t, offsetof(CtlGuest, m) }
const CtlField ctl_guest_fields[] = {
        FIELD("name", CTL_FIELD_STRING, name),
        FIELD("uuid", CTL_FIELD_STRING, uuid),
        FIELD("source", CTL_FIELD_STRING, source),
        FIELD("policy", CTL_FIELD_STRING, policy),
        FIELD("mode", CTL_FIELD_STRING, mode),
        FIELD("state", CTL_FIELD_STRING, state),
        FIELD("tier", CTL_FIELD_STRING, tier),
        FIELD("confidence", CTL_FIELD_DOUBLE, confidence),
        FIELD("estimate", CTL_FIELD_SIZE, estimate),
        FIELD("estimate-lower", CTL_FIELD_SIZE, estimate_lower),
        FIELD("estimate-upper", CTL_FIELD_SIZE, estimate_upper),
        FIELD("scan-onset", CTL_FIELD_SIZE, scan_onset),
        FIELD("target", CTL_FIELD_SIZE, target),
        FIELD("actual", CTL_FIELD_SIZE, actual),
        FIELD("floor", CTL_FIELD_SIZE, floor),
        FIELD("max", CTL_FIELD_SIZE, max),
        FIELD("virtio-mem-size", CTL_FIELD_SIZE, virtio_mem_size),
        FIELD("host-rss", CTL_FIELD_SIZE, host_rss),
        FIELD("host-swap", CTL_FIELD_SIZE, host_swap),
        FIELD("host-ksm", CTL_FIELD_SIZE, host_ksm),
        FIELD("guest-total", CTL_FIELD_SIZE, guest_total),
        FIELD("guest-free", CTL_FIELD_SIZE, guest_free),
        FIELD("guest-cache", CTL_FIELD_SIZE, guest_cache),
        FIELD("reclaimable", CTL_FIELD_SIZE, reclaimable),
        FIELD("reclaimed", CTL_FIELD_SIZE, reclaimed),
        FIELD("probe-cycles", CTL_FIELD_COUNT, probe_cycles),
        FIELD("probe-refaults", CTL_FIELD_COUNT, probe_refaults),
        FIELD("reprobes-skipped", CTL_FIELD_COUNT, reprobes_skipped),
        FIELD("free-page-reporting", CTL_FIELD_BOOL, free_page_reporting),
        FIELD("agent", CTL_FIELD_BOOL, agent),
        FIELD("guest-os", CTL_FIELD_STRING, guest_os),
        FIELD("paused", CTL_FIELD_BOOL, paused),
        FIELD("reason", CTL_FIELD_STRING, reason),
        FIELD("fault", CTL_FIELD_STRING, fault),
        FIELD("refault-rate", CTL_FIELD_DOUBLE, refault_rate),
        FIELD("major-fault-rate", CTL_FIELD_DOUBLE, major_fault_rate),
        FIELD("updated", CTL_FIELD_USEC, updated),
};
const size_t ctl_n_guest_fields = ARRAY_SIZE(ctl_guest_fields);

const CtlField *ctl_fields_find(const CtlField *fields, size_t n, const char *key) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(fields[i].key, key) == 0)
                        return &fields[i];
        return NULL;
}

const CtlField *ctl_guest_field_find(const char *key) {
        return ctl_fields_find(ctl_guest_fields, ctl_n_guest_fields, key);
}

char ctl_field_dbus_type(const CtlField *f) {
        switch (f->type) {
        case CTL_FIELD_STRING:
                return 's';
        case CTL_FIELD_SIZE:
        case CTL_FIELD_USEC:
        case CTL_FIELD_COUNT:
                return 't';
        case CTL_FIELD_DOUBLE:
                return 'd';
        case CTL_FIELD_BOOL:
                return 'b';
        }
        return '?';
}

#define AT(g, f, type) ((type *) ((char *) (g) + (f)->offset))
#define AT_CONST(g, f, type) ((const type *) ((const char *) (g) + (f)->offset))

void ctl_fields_init(void *record, const CtlField *fields, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const CtlField *f = &fields[i];
                switch (f->type) {
                case CTL_FIELD_STRING:
                        break;
                case CTL_FIELD_SIZE:
                case CTL_FIELD_USEC:
                case CTL_FIELD_COUNT:
                        *AT(record, f, uint64_t) = CTL_UNKNOWN;
                        break;
                case CTL_FIELD_DOUBLE:
                        *AT(record, f, double) = NAN;
                        break;
                case CTL_FIELD_BOOL:
                        *AT(record, f, int) = -1;
                        break;
                }
        }
}

void ctl_fields_done(void *record, const CtlField *fields, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (fields[i].type == CTL_FIELD_STRING) {
                        char **p = AT(record, &fields[i], char *);
                        free(*p);
                        *p = NULL;
                }
        ctl_fields_init(record, fields, n);
}

void ctl_guest_init(CtlGuest *g) {
        memset(g, 0, sizeof(*g));
        ctl_fields_init(g, ctl_guest_fields, ctl_n_guest_fields);
}

void ctl_guest_done(CtlGuest *g) {
        ctl_fields_done(g, ctl_guest_fields, ctl_n_guest_fields);
}

int ctl_field_set_string(void *record, const CtlField *f, const char *value) {
        char *copy = strdup(value ?: "");
        if (!copy)
                return -ENOMEM;
        free(*AT(record, f, char *));
        *AT(record, f, char *) = copy;
        return 0;
}

void ctl_field_set_u64(void *record, const CtlField *f, uint64_t value) {
        *AT(record, f, uint64_t) = value;
}

void ctl_field_set_double(void *record, const CtlField *f, double value) {
        *AT(record, f, double) = value;
}

void ctl_field_set_bool(void *record, const CtlField *f, bool value) {
        *AT(record, f, int) = value ? 1 : 0;
}

static uint64_t max_less(const CtlGuest *g, uint64_t size) {
        if (g->max == CTL_UNKNOWN || size == CTL_UNKNOWN)
                return CTL_UNKNOWN;
        return g->max > size ? g->max - size : 0;
}

uint64_t ctl_guest_reclaimed(const CtlGuest *g) {
        return g->reclaimed != CTL_UNKNOWN ? g->reclaimed : max_less(g, g->actual);
}

uint64_t ctl_guest_host_returned(const CtlGuest *g) {
        return max_less(g, g->host_rss);
}

bool ctl_guest_skipped(const CtlGuest *g) {
        return g->fault && g->state && strcmp(g->state, "skipped") == 0;
}

CtlGuestCounts ctl_guest_counts(const CtlGuest *guests, size_t n) {
        CtlGuestCounts c = { .guests = n };

        for (size_t i = 0; i < n; i++) {
                c.faulty += guests[i].fault != NULL;
                c.skipped += ctl_guest_skipped(&guests[i]);
                c.paused += guests[i].paused > 0;
        }
        return c;
}

int ctl_status_exit_code(const CtlGuestCounts *c) {
        return c->faulty > c->skipped || c->refused > 0 ? EXIT_FAULTY : EXIT_OK;
}

/* ---- the terminal: glyphs and colours ---- */

static bool terminal_utf8 = true, terminal_colors = false;

void ctl_set_terminal(bool utf8, bool colors) {
        terminal_utf8 = utf8;
        terminal_colors = colors;
}

bool ctl_utf8(void) {
        return terminal_utf8;
}

bool ctl_colors(void) {
        return terminal_colors;
}

static const char *const glyphs[_CTL_GLYPH_MAX][2] = {
        /*                         ASCII  UTF-8 */
        [CTL_GLYPH_BULLET] =      { "*", "●" },
        [CTL_GLYPH_CROSS] =       { "x", "×" },
        [CTL_GLYPH_AXIS_TICK] =   { "|", "┤" },
        [CTL_GLYPH_AXIS_CORNER] = { "+", "└" },
        [CTL_GLYPH_AXIS_LINE] =   { "-", "─" },
        [CTL_GLYPH_SPARK_1] =     { "_", "▁" },
        [CTL_GLYPH_SPARK_2] =     { ".", "▂" },
        [CTL_GLYPH_SPARK_3] =     { ":", "▃" },
        [CTL_GLYPH_SPARK_4] =     { "-", "▄" },
        [CTL_GLYPH_SPARK_5] =     { "=", "▅" },
        [CTL_GLYPH_SPARK_6] =     { "+", "▆" },
        [CTL_GLYPH_SPARK_7] =     { "*", "▇" },
        [CTL_GLYPH_SPARK_8] =     { "#", "█" },
};

const char *ctl_glyph(CtlGlyph g) {
        if ((unsigned) g >= _CTL_GLYPH_MAX)
                return "?";
        return glyphs[g][terminal_utf8];
}

/* systemd's: ANSI_NORMAL, ANSI_HIGHLIGHT_RED, _GREEN, _YELLOW, ANSI_UNDERLINE */
static const char *const colors[_CTL_COLOR_MAX] = {
        [CTL_COLOR_NORMAL] = "\x1B[0m",
        [CTL_COLOR_RED] = "\x1B[0;1;31m",
        [CTL_COLOR_GREEN] = "\x1B[0;1;32m",
        [CTL_COLOR_YELLOW] = "\x1B[0;1;33m",
        [CTL_COLOR_HEADER] = "\x1B[0;4m",
};

const char *ctl_color(CtlColor c) {
        if (!terminal_colors || (unsigned) c >= _CTL_COLOR_MAX)
                return "";
        return colors[c];
}

bool ctl_utf8_wanted(const char *codeset, const char *term) {
        if (!codeset || (strcasecmp(codeset, "UTF-8") != 0 && strcasecmp(codeset, "utf8") != 0))
                return false;
        /* A serial console's vt100/vt102/vt220 shows 7- or 8-bit characters, not UTF-8. */
        bool vt = strncmp(term ?: "", "vt", 2) == 0 && term[2] >= '0' && term[2] <= '9';
        return !term || (strcmp(term, "dumb") != 0 && !vt);
}

int ctl_parse_boolean(const char *s) {
        static const char *const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char *const no[] = { "0", "no", "n", "false", "f", "off" };

        for (size_t i = 0; s && i < ARRAY_SIZE(yes); i++)
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
        for (size_t i = 0; s && i < ARRAY_SIZE(no); i++)
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        return -1;
}

bool ctl_colors_wanted(const char *systemd_colors, const char *no_color, const char *term, bool tty) {
        /* systemd's colour modes: a boolean, or how many colours (all of them "on" here) */
        int r = systemd_colors && (strcmp(systemd_colors, "16") == 0 || strcmp(systemd_colors, "256") == 0 ||
                                   strcmp(systemd_colors, "24bit") == 0)
                        ? 1
                        : ctl_parse_boolean(systemd_colors);

        if (r >= 0)
                return r;
        if (no_color && no_color[0] != '\0')
                return false;
        return tty && !(term && strcmp(term, "dumb") == 0);
}

/* ---- text ---- */

/* The format characters that are invisible and yet change what a line reads as: the bidi
 * controls (Unicode's Bidi_Control: U+202E turns "evil\u202Egpj.exe" into "evilexe.jpg", and an
 * override left open reverses the rest of the line, the columns after the name too), and the
 * zero-width characters, which make two different names look the same. A name from an untrusted
 * source may not carry them to the operator's terminal, so they count as controls. */
static bool invisible_format(uint32_t cp) {
        static const uint32_t ranges[][2] = {
                { 0x061c, 0x061c }, /* ARABIC LETTER MARK */
                { 0x180e, 0x180e }, /* MONGOLIAN VOWEL SEPARATOR */
                { 0x200b, 0x200f }, /* ZERO WIDTH SPACE, NON-JOINER, JOINER; LRM, RLM */
                { 0x202a, 0x202e }, /* LRE, RLE, PDF, LRO, RLO */
                { 0x2060, 0x2064 }, /* WORD JOINER, the invisible operators */
                { 0x2066, 0x2069 }, /* LRI, RLI, FSI, PDI */
                { 0x206a, 0x206f }, /* the deprecated shaping and swapping controls */
                { 0xfeff, 0xfeff }, /* ZERO WIDTH NO-BREAK SPACE (BOM) */
        };

        for (size_t i = 0; i < ARRAY_SIZE(ranges); i++)
                if (cp >= ranges[i][0] && cp <= ranges[i][1])
                        return true;
        return false;
}

/* Length of a valid UTF-8 sequence at s, or 0; *control tells a character that must not reach
 * the terminal: a C0 or C1 control (CSI is U+009B), DEL, or an invisible_format() one. */
static size_t utf8_valid_length(const unsigned char *s, bool *control) {
        size_t len;
        uint32_t cp;

        *control = s[0] < 0x20 || s[0] == 0x7f;
        if (s[0] < 0x80)
                return 1;
        if ((s[0] & 0xe0) == 0xc0) {
                len = 2;
                cp = s[0] & 0x1f;
        } else if ((s[0] & 0xf0) == 0xe0) {
                len = 3;
                cp = s[0] & 0x0f;
        } else if ((s[0] & 0xf8) == 0xf0) {
                len = 4;
                cp = s[0] & 0x07;
        } else
                return 0;
        for (size_t i = 1; i < len; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (s[i] & 0x3f);
        }
        /* overlong forms, surrogates, beyond Unicode */
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
                return 0;
        *control = (cp >= 0x80 && cp <= 0x9f) || invisible_format(cp);
        return len;
}

char *ctl_sanitize(const char *s) {
        const unsigned char *p = (const unsigned char *) (s ?: "");
        size_t n = strlen((const char *) p);
        char *out = malloc(n + 1), *o = out;

        if (!out)
                return NULL;
        while (*p) {
                bool control;
                size_t len = utf8_valid_length(p, &control);
                if (len == 0 || control || (len > 1 && !terminal_utf8)) {
                        *o++ = '?';
                        p += MAX(len, (size_t) 1);
                        continue;
                }
                memcpy(o, p, len);
                o += len;
                p += len;
        }
        *o = '\0';
        return out;
}

/* For a locale that is not UTF-8 or does not know the character: wide (two columns) are the East
 * Asian Wide and Fullwidth blocks and the emoji, zero the combining marks and zero-width
 * characters (after Markus Kuhn's wcwidth). Everything else is one column. */
static int fallback_width(uint32_t cp) {
        static const uint32_t zero[][2] = {
                { 0x0300, 0x036f }, { 0x0483, 0x0489 }, { 0x0591, 0x05bd }, { 0x0610, 0x061a },
                { 0x064b, 0x065f }, { 0x0e31, 0x0e31 }, { 0x0e34, 0x0e3a }, { 0x0e47, 0x0e4e },
                { 0x1ab0, 0x1aff }, { 0x1dc0, 0x1dff }, { 0x200b, 0x200f }, { 0x202a, 0x202e },
                { 0x2060, 0x2064 }, { 0x20d0, 0x20ff }, { 0xfe00, 0xfe0f }, { 0xfe20, 0xfe2f },
                { 0xfeff, 0xfeff }, { 0xe0100, 0xe01ef },
        };
        static const uint32_t wide[][2] = {
                { 0x1100, 0x115f }, { 0x231a, 0x231b }, { 0x2329, 0x232a }, { 0x2e80, 0x303e },
                { 0x3041, 0x33ff }, { 0x3400, 0x4dbf }, { 0x4e00, 0x9fff }, { 0xa000, 0xa4cf },
                { 0xa960, 0xa97f }, { 0xac00, 0xd7a3 }, { 0xf900, 0xfaff }, { 0xfe10, 0xfe19 },
                { 0xfe30, 0xfe6f }, { 0xff00, 0xff60 }, { 0xffe0, 0xffe6 }, { 0x1f300, 0x1f64f },
                { 0x1f900, 0x1f9ff }, { 0x20000, 0x2fffd }, { 0x30000, 0x3fffd },
        };

        for (size_t i = 0; i < ARRAY_SIZE(zero); i++)
                if (cp >= zero[i][0] && cp <= zero[i][1])
                        return 0;
        for (size_t i = 0; i < ARRAY_SIZE(wide); i++)
                if (cp >= wide[i][0] && cp <= wide[i][1])
                        return 2;
        return 1;
}

/* The code point of a valid sequence of `len` bytes (utf8_valid_length()). */
static uint32_t utf8_decode(const unsigned char *s, size_t len) {
        uint32_t cp = len == 1 ? s[0] : len == 2 ? s[0] & 0x1f : len == 3 ? s[0] & 0x0f : s[0] & 0x07;
        for (size_t i = 1; i < len; i++)
                cp = (cp << 6) | (s[i] & 0x3f);
        return cp;
}

size_t ctl_display_width(const char *s) {
        size_t n, w = 0;

        if (!s)
                return 0;
        /* In a UTF-8 locale (rightsizectl calls setlocale(LC_ALL, "")): the C library's tables. */
        n = mbstowcs(NULL, s, 0);
        if (n != (size_t) -1) {
                _cleanup_free_ wchar_t *ws = malloc((n + 1) * sizeof(wchar_t));
                if (ws && mbstowcs(ws, s, n + 1) == n) {
                        int width = wcswidth(ws, n);
                        if (width >= 0)
                                return (size_t) width;
                }
        }
        /* Otherwise one character at a time: the locale's wcwidth() where it knows the character,
         * the table above where it does not (a C locale, an unassigned code point); a byte that
         * is not UTF-8 is one column (sanitised, it is a '?'). */
        for (const unsigned char *p = (const unsigned char *) s; *p;) {
                bool control;
                size_t len = utf8_valid_length(p, &control);
                if (len == 0) {
                        w++;
                        p++;
                        continue;
                }
                uint32_t cp = utf8_decode(p, len);
                int cw = cp < 0x80 ? 1 : wcwidth((wchar_t) cp);
                if (cw < 0)
                        cw = fallback_width(cp);
                w += (size_t) cw;
                p += len;
        }
        return w;
}

int ctl_print_padded(FILE *f, const char *s, size_t width) {
        _cleanup_free_ char *clean = ctl_sanitize(s);
        if (!clean)
                return -ENOMEM;
        size_t w = ctl_display_width(clean);
        fprintf(f, "%s%*s", clean, (int) (width > w ? width - w : 0), "");
        return ferror(f) ? -EIO : 0;
}

const char *ctl_format_size(char *buf, size_t len, uint64_t bytes) {
        if (bytes == CTL_UNKNOWN) {
                snprintf(buf, len, "-");
                return buf;
        }
        return format_size(buf, len, bytes);
}

/* ---- tables ---- */

struct CtlTable {
        size_t n_columns;
        char **cells; /* row-major, header row first */
        CtlColor *colors; /* the same, CTL_COLOR_NORMAL: none */
        size_t n_rows; /* including the header */
        bool *right;
};

CtlTable *ctl_table_free(CtlTable *t) {
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_rows * t->n_columns; i++)
                free(t->cells[i]);
        free(t->cells);
        free(t->colors);
        free(t->right);
        free(t);
        return NULL;
}

CtlTable *ctl_table_new(size_t n_columns, const char *const *headers) {
        CtlTable *t = calloc(1, sizeof(*t));

        if (!t)
                return NULL;
        t->n_columns = n_columns;
        t->right = calloc(n_columns, sizeof(bool));
        if (!t->right || ctl_table_add_row(t, headers) < 0)
                return ctl_table_free(t);
        return t;
}

void ctl_table_align_right(CtlTable *t, size_t column) {
        if (column < t->n_columns)
                t->right[column] = true;
}

int ctl_table_add_row(CtlTable *t, const char *const *cells) {
        CtlColor *nc = realloc(t->colors, (t->n_rows + 1) * t->n_columns * sizeof(CtlColor));
        if (!nc)
                return -ENOMEM;
        t->colors = nc;
        char **n = realloc(t->cells, (t->n_rows + 1) * t->n_columns * sizeof(char *));
        if (!n)
                return -ENOMEM;
        t->cells = n;
        for (size_t c = 0; c < t->n_columns; c++)
                nc[t->n_rows * t->n_columns + c] = t->n_rows == 0 ? CTL_COLOR_HEADER : CTL_COLOR_NORMAL;
        for (size_t c = 0; c < t->n_columns; c++) {
                char *s = ctl_sanitize(cells[c] ?: "-");
                if (!s) {
                        for (size_t k = 0; k < c; k++)
                                free(n[t->n_rows * t->n_columns + k]);
                        return -ENOMEM;
                }
                n[t->n_rows * t->n_columns + c] = s;
        }
        t->n_rows++;
        return 0;
}

void ctl_table_color_cell(CtlTable *t, size_t column, CtlColor color) {
        if (t->n_rows > 1 && column < t->n_columns)
                t->colors[(t->n_rows - 1) * t->n_columns + column] = color;
}

int ctl_table_print(const CtlTable *t, FILE *f) {
        _cleanup_free_ size_t *width = calloc(t->n_columns, sizeof(size_t));

        if (!width)
                return -ENOMEM;
        for (size_t r = 0; r < t->n_rows; r++)
                for (size_t c = 0; c < t->n_columns; c++)
                        width[c] = MAX(width[c], ctl_display_width(t->cells[r * t->n_columns + c]));

        for (size_t r = 0; r < t->n_rows; r++) {
                size_t pending = 0; /* blanks owed before the next cell, so lines never end in blanks */
                for (size_t c = 0; c < t->n_columns; c++) {
                        const char *s = t->cells[r * t->n_columns + c];
                        CtlColor color = t->colors[r * t->n_columns + c];
                        size_t pad = width[c] - ctl_display_width(s);
                        bool last = c + 1 == t->n_columns;

                        if (t->right[c])
                                pending += pad;
                        if (color != CTL_COLOR_NORMAL && ctl_colors())
                                fprintf(f, "%*s%s%s%s", (int) pending, "", ctl_color(color), s,
                                        ctl_color(CTL_COLOR_NORMAL));
                        else
                                fprintf(f, "%*s%s", (int) pending, "", s);
                        pending = t->right[c] ? 0 : pad;
                        if (!last)
                                pending += 2;
                }
                fputc('\n', f);
        }
        return ferror(f) ? -EIO : 0;
}

int ctl_print_guest_names(FILE *f, const CtlGuest *guests, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (!guests[i].name || guests[i].name[0] == '\0')
                        continue;
                _cleanup_free_ char *clean = ctl_sanitize(guests[i].name);
                if (!clean)
                        return -ENOMEM;
                fprintf(f, "%s\n", clean);
        }
        return ferror(f) ? -EIO : 0;
}

int ctl_print_guest_table(FILE *f, const CtlGuest *guests, size_t n) {
        static const char *const headers[] = {
                "NAME", "STATE", "POLICY", "ESTIMATE", "TARGET", "ACTUAL", "RECLAIMED", "WOULD GIVE", "REASON/FAULT",
        };
        CtlTable *t = ctl_table_new(ARRAY_SIZE(headers), headers);
        int r = 0;

        if (!t)
                return -ENOMEM;
        for (size_t c = 3; c <= 7; c++)
                ctl_table_align_right(t, c);
        for (size_t i = 0; i < n && r >= 0; i++) {
                const CtlGuest *g = &guests[i];
                char est[FORMAT_SIZE_MAX], tgt[FORMAT_SIZE_MAX], act[FORMAT_SIZE_MAX], rec[FORMAT_SIZE_MAX],
                        give[FORMAT_SIZE_MAX];
                _cleanup_free_ char *why = NULL;

                if (g->fault && asprintf(&why, "fault: %s", g->fault) < 0) {
                        why = NULL;
                        r = -ENOMEM;
                        break;
                }
                const char *cells[] = {
                        g->name,
                        g->state,
                        g->policy,
                        ctl_format_size(est, sizeof(est), g->estimate),
                        ctl_format_size(tgt, sizeof(tgt), g->target),
                        ctl_format_size(act, sizeof(act), g->actual),
                        ctl_format_size(rec, sizeof(rec), ctl_guest_reclaimed(g)),
                        ctl_format_size(give, sizeof(give), g->reclaimable),
                        why ?: g->reason,
                };
                r = ctl_table_add_row(t, cells);
                if (r >= 0 && g->fault && !ctl_guest_skipped(g)) {
                        ctl_table_color_cell(t, 1, CTL_COLOR_RED);
                        ctl_table_color_cell(t, 8, CTL_COLOR_RED);
                } else if (r >= 0 && g->paused > 0)
                        ctl_table_color_cell(t, 1, CTL_COLOR_YELLOW);
        }
        if (r >= 0)
                r = ctl_table_print(t, f);
        ctl_table_free(t);
        return r;
}

static uint64_t add_known(uint64_t sum, uint64_t x) {
        return x == CTL_UNKNOWN ? sum : sum + x;
}

CtlReport ctl_report(const CtlGuest *guests, size_t n) {
        CtlReport r = {};
        for (size_t i = 0; i < n; i++) {
                const CtlGuest *g = &guests[i];
                r.guests++;
                r.configured = add_known(r.configured, g->max);
                if (g->reclaimable != CTL_UNKNOWN && g->max != CTL_UNKNOWN) {
                        r.with_estimate++;
                        r.reclaimable += g->reclaimable;
                        r.needed += g->max > g->reclaimable ? g->max - g->reclaimable : 0;
                }
                r.returned = add_known(r.returned, ctl_guest_reclaimed(g));
                uint64_t host = ctl_guest_host_returned(g);
                if (host != CTL_UNKNOWN) {
                        r.with_rss++;
                        r.host_returned += host;
                }
                r.probe_cycles = add_known(r.probe_cycles, g->probe_cycles);
                r.probe_refaults = add_known(r.probe_refaults, g->probe_refaults);
        }
        return r;
}

/* Guests by what they would give back, most first; unknown last. */
static int compare_reclaimable(const void *a, const void *b) {
        const CtlGuest *x = *(const CtlGuest *const *) a, *y = *(const CtlGuest *const *) b;
        uint64_t rx = x->reclaimable == CTL_UNKNOWN ? 0 : x->reclaimable + 1;
        uint64_t ry = y->reclaimable == CTL_UNKNOWN ? 0 : y->reclaimable + 1;
        return rx < ry ? 1 : rx > ry ? -1 : 0;
}

int ctl_print_report(FILE *f, const CtlReport *r, const CtlGuest *guests, size_t n, size_t top) {
        char a[FORMAT_SIZE_MAX], b[FORMAT_SIZE_MAX];

        fprintf(f, "%-22s %10s  over %zu guest%s\n", "Configured memory", ctl_format_size(a, sizeof(a), r->configured),
                r->guests, r->guests == 1 ? "" : "s");
        fprintf(f, "%-22s %10s  estimates plus margins, %zu guest%s with an estimate\n", "What they need",
                ctl_format_size(a, sizeof(a), r->needed), r->with_estimate, r->with_estimate == 1 ? "" : "s");
        fprintf(f, "%-22s %10s  configured minus what they need\n", "Would give back",
                ctl_format_size(a, sizeof(a), r->reclaimable));
        fprintf(f, "%-22s %10s  configured minus their size now (balloon and virtio-mem)\n", "Returned now",
                ctl_format_size(a, sizeof(a), r->returned));
        fprintf(f, "%-22s %10s  configured minus QEMU's RSS, %zu guest%s (free page reporting counts too)\n",
                "Host got back", r->with_rss ? ctl_format_size(b, sizeof(b), r->host_returned) : "-", r->with_rss,
                r->with_rss == 1 ? "" : "s");
        fprintf(f, "%-22s %10" PRIu64 "  probe cycles, %" PRIu64 " refaults while probing (since the daemon started)\n",
                "Cost paid", r->probe_cycles, r->probe_refaults);

        if (n == 0 || top == 0)
                return ferror(f) ? -EIO : 0;
        _cleanup_free_ const CtlGuest **order = calloc(n, sizeof(*order));
        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                order[i] = &guests[i];
        qsort(order, n, sizeof(*order), compare_reclaimable);

        static const char *const headers[] = { "NAME", "POLICY", "MAX", "ESTIMATE", "WOULD GIVE", "RETURNED" };
        CtlTable *t = ctl_table_new(ARRAY_SIZE(headers), headers);
        int ret = 0;
        if (!t)
                return -ENOMEM;
        for (size_t c = 2; c <= 5; c++)
                ctl_table_align_right(t, c);
        for (size_t i = 0; i < MIN(n, top) && ret >= 0; i++) {
                const CtlGuest *g = order[i];
                char mx[FORMAT_SIZE_MAX], est[FORMAT_SIZE_MAX], give[FORMAT_SIZE_MAX], ret_now[FORMAT_SIZE_MAX];
                const char *cells[] = {
                        g->name,
                        g->policy,
                        ctl_format_size(mx, sizeof(mx), g->max),
                        ctl_format_size(est, sizeof(est), g->estimate),
                        ctl_format_size(give, sizeof(give), g->reclaimable),
                        ctl_format_size(ret_now, sizeof(ret_now), ctl_guest_reclaimed(g)),
                };
                ret = ctl_table_add_row(t, cells);
        }
        fprintf(f, "\nThe %zu guest%s with the most to give back:\n", MIN(n, top), MIN(n, top) == 1 ? "" : "s");
        if (ret >= 0)
                ret = ctl_table_print(t, f);
        ctl_table_free(t);
        return ret;
}

static void print_line_color(FILE *f, const char *label, const char *value, CtlColor color) {
        _cleanup_free_ char *clean = ctl_sanitize(value);
        fprintf(f, "%14s: %s%s%s\n", label, color != CTL_COLOR_NORMAL ? ctl_color(color) : "", clean ?: "?",
                color != CTL_COLOR_NORMAL ? ctl_color(CTL_COLOR_NORMAL) : "");
}

static void print_line(FILE *f, const char *label, const char *value) {
        print_line_color(f, label, value, CTL_COLOR_NORMAL);
}

static void print_size_line(FILE *f, const char *label, uint64_t bytes) {
        char buf[FORMAT_SIZE_MAX];
        if (bytes != CTL_UNKNOWN)
                print_line(f, label, ctl_format_size(buf, sizeof(buf), bytes));
}

static const char *yes_no(int b) {
        return b < 0 ? NULL : b ? "yes" : "no";
}

int ctl_print_guest_details(FILE *f, const CtlGuest *g, const CtlHistoryPoint *h, size_t n_h, size_t width) {
        _cleanup_free_ char *name = ctl_sanitize(g->name);
        char a[FORMAT_SIZE_MAX], b[FORMAT_SIZE_MAX], c[FORMAT_SIZE_MAX];
        char line[256];

        bool faulty = g->fault && !ctl_guest_skipped(g);
        fprintf(f, "%s%s%s %s\n",
                ctl_color(faulty ? CTL_COLOR_RED : g->fault || g->paused > 0 ? CTL_COLOR_YELLOW : CTL_COLOR_GREEN),
                ctl_glyph(g->fault ? CTL_GLYPH_CROSS : CTL_GLYPH_BULLET), ctl_color(CTL_COLOR_NORMAL), name ?: "?");
        if (g->state) {
                snprintf(line, sizeof(line), "%s%s%s%s", g->state, g->tier ? " (tier " : "", g->tier ?: "",
                         g->tier ? ")" : "");
                print_line(f, "State", line);
        }
        if (g->fault)
                print_line_color(f, "Fault", g->fault, faulty ? CTL_COLOR_RED : CTL_COLOR_NORMAL);
        if (g->policy) {
                snprintf(line, sizeof(line), "%s%s%s%s", g->policy, g->mode ? " (mode " : "", g->mode ?: "",
                         g->mode ? ")" : "");
                print_line(f, "Policy", line);
        }
        if (g->estimate != CTL_UNKNOWN) {
                if (g->estimate_lower != CTL_UNKNOWN && g->estimate_upper != CTL_UNKNOWN)
                        snprintf(line, sizeof(line), "%s (%s .. %s)", ctl_format_size(a, sizeof(a), g->estimate),
                                 ctl_format_size(b, sizeof(b), g->estimate_lower),
                                 ctl_format_size(c, sizeof(c), g->estimate_upper));
                else
                        snprintf(line, sizeof(line), "%s", ctl_format_size(a, sizeof(a), g->estimate));
                print_line(f, "Estimate", line);
        } else
                print_line(f, "Estimate", "not known yet");
        if (!isnan(g->confidence)) {
                snprintf(line, sizeof(line), "%.0f %%", CLAMP(g->confidence, 0.0, 1.0) * 100.0);
                print_line(f, "Confidence", line);
        }
        print_size_line(f, "Target", g->target);
        print_size_line(f, "Actual", g->actual);
        if (g->floor != CTL_UNKNOWN || g->max != CTL_UNKNOWN) {
                snprintf(line, sizeof(line), "%s / %s", ctl_format_size(a, sizeof(a), g->floor),
                         ctl_format_size(b, sizeof(b), g->max));
                print_line(f, "Floor / max", line);
        }
        print_size_line(f, "Reclaimed", ctl_guest_reclaimed(g));
        print_size_line(f, "Would give", g->reclaimable);
        print_size_line(f, "Host RSS", g->host_rss);
        print_size_line(f, "Host got back", ctl_guest_host_returned(g));
        print_size_line(f, "Virtio-mem", g->virtio_mem_size);
        if (g->free_page_reporting >= 0)
                print_line(f, "Free pages", g->free_page_reporting ? "reported" : "not reported");
        if (g->agent >= 0)
                print_line(f, "Guest agent", yes_no(g->agent));
        if (g->guest_os)
                print_line(f, "Guest OS", strcmp(g->guest_os, "mswindows") == 0
                                                  ? "Windows (no /proc: balloon stats only)"
                                                  : g->guest_os);
        if (g->paused > 0)
                print_line(f, "Paused", "yes, by an operator");
        if (!isnan(g->refault_rate) || !isnan(g->major_fault_rate)) {
                snprintf(line, sizeof(line), "refaults %.1f/s, major faults %.1f/s",
                         isnan(g->refault_rate) ? 0.0 : g->refault_rate,
                         isnan(g->major_fault_rate) ? 0.0 : g->major_fault_rate);
                print_line(f, "Faults", line);
        }
        if (g->reason)
                print_line(f, "Reason", g->reason);
        if (g->updated != CTL_UNKNOWN) {
                time_t t = (time_t) (g->updated / 1000000);
                struct tm tm;
                if (localtime_r(&t, &tm) && strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm) > 0)
                        print_line(f, "Updated", line);
        }
        if (n_h > 1) {
                fputc('\n', f);
                return ctl_print_chart(f, h, n_h, width, 10);
        }
        return ferror(f) ? -EIO : 0;
}

/* ---- monitor ---- */

/* Columns a name takes once sanitised, as ctl_print_padded() prints it. */
static size_t name_width(const char *name) {
        _cleanup_free_ char *clean = ctl_sanitize(name);
        return clean ? ctl_display_width(clean) : 0;
}

size_t ctl_guest_name_width(const CtlGuest *guests, size_t n) {
        size_t w = 0;
        for (size_t i = 0; i < n; i++)
                w = MAX(w, name_width(guests[i].name));
        return w;
}

int ctl_print_estimate_event(FILE *f, const CtlEstimateEvent *e, size_t *column) {
        char when[64] = "-", est[FORMAT_SIZE_MAX], lo[FORMAT_SIZE_MAX], hi[FORMAT_SIZE_MAX], tgt[FORMAT_SIZE_MAX];
        time_t sec = (time_t) (e->usec / USEC_PER_SEC);
        struct tm tm;

        if (localtime_r(&sec, &tm))
                strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
        fprintf(f, "%s  ", when);
        /* A name wider than the column (a guest that came after monitor started) widens it: its
         * line and the ones before it cannot line up, the ones after it do. */
        *column = MAX(*column, name_width(e->name));
        int r = ctl_print_padded(f, e->name, *column);
        if (r < 0)
                return r;
        fprintf(f, "  estimate %s", ctl_format_size(est, sizeof(est), e->estimate));
        if (e->lower != CTL_UNKNOWN || e->upper != CTL_UNKNOWN) /* "-" for the one not known */
                fprintf(f, " (%s .. %s)", ctl_format_size(lo, sizeof(lo), e->lower),
                        ctl_format_size(hi, sizeof(hi), e->upper));
        fprintf(f, "  target %s", ctl_format_size(tgt, sizeof(tgt), e->target));
        if (e->state) {
                _cleanup_free_ char *state = ctl_sanitize(e->state);
                CtlColor color = e->fault ? CTL_COLOR_RED : e->paused ? CTL_COLOR_YELLOW : CTL_COLOR_NORMAL;
                if (!state)
                        return -ENOMEM;
                fprintf(f, "  %s%s%s", color != CTL_COLOR_NORMAL ? ctl_color(color) : "", state,
                        color != CTL_COLOR_NORMAL ? ctl_color(CTL_COLOR_NORMAL) : "");
        }
        fputc('\n', f);
        return ferror(f) ? -EIO : 0;
}

static json_object *json_size_or_null(uint64_t x) {
        return x == CTL_UNKNOWN ? NULL : json_object_new_uint64(x);
}

json_object *ctl_estimate_event_to_json(const CtlEstimateEvent *e) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "time", json_object_new_uint64(e->usec));
        json_object_object_add(o, "name", json_object_new_string(e->name ?: ""));
        json_object_object_add(o, "estimate", json_size_or_null(e->estimate));
        json_object_object_add(o, "estimate-lower", json_size_or_null(e->lower));
        json_object_object_add(o, "estimate-upper", json_size_or_null(e->upper));
        json_object_object_add(o, "target", json_size_or_null(e->target));
        json_object_object_add(o, "state", e->state ? json_object_new_string(e->state) : NULL);
        return o;
}

/* ---- pictures ---- */

char *ctl_sparkline(const uint64_t *values, size_t n, uint64_t lo, uint64_t hi, size_t width) {
        size_t cells = MIN(n, width);
        char *out = malloc(cells * 3 + 1), *o = out;

        if (!out)
                return NULL;
        for (size_t i = 0; i < cells; i++) {
                /* the last value of bucket i */
                size_t idx = (i + 1) * n / cells - 1;
                uint64_t v = values[idx];
                if (v == CTL_UNKNOWN) {
                        *o++ = ' ';
                        continue;
                }
                size_t level = 0, n_levels = CTL_GLYPH_SPARK_8 - CTL_GLYPH_SPARK_1 + 1;
                if (hi > lo) {
                        double x = ((double) CLAMP(v, lo, hi) - (double) lo) / ((double) hi - (double) lo);
                        level = (size_t) lround(x * (double) (n_levels - 1));
                }
                const char *glyph = ctl_glyph(CTL_GLYPH_SPARK_1 + level);
                size_t len = strlen(glyph);
                memcpy(o, glyph, len);
                o += len;
        }
        *o = '\0';
        return out;
}

/* The range over every known value of the three series. */
static bool history_range(const CtlHistoryPoint *h, size_t n, uint64_t *lo, uint64_t *hi) {
        *lo = UINT64_MAX;
        *hi = 0;
        for (size_t i = 0; i < n; i++) {
                uint64_t v[3] = { h[i].target, h[i].actual, h[i].estimate };
                for (size_t k = 0; k < 3; k++) {
                        if (v[k] == 0 || v[k] == CTL_UNKNOWN)
                                continue;
                        *lo = MIN(*lo, v[k]);
                        *hi = MAX(*hi, v[k]);
                }
        }
        return *lo <= *hi;
}

#define CHART_LABEL 10

int ctl_print_chart(FILE *f, const CtlHistoryPoint *h, size_t n, size_t width, size_t height) {
        uint64_t lo, hi;

        if (n == 0 || height < 2 || width <= CHART_LABEL + 2 || !history_range(h, n, &lo, &hi))
                return 0;
        if (lo == hi) { /* flat: give it a little room so the line sits mid-chart */
                uint64_t pad = MAX(lo / 10, (uint64_t) 1);
                lo = lo > pad ? lo - pad : 0;
                hi = hi + pad;
        }
        size_t cols = MIN(n, width - CHART_LABEL - 2);
        _cleanup_free_ char *grid = malloc(cols * height);
        if (!grid)
                return -ENOMEM;
        memset(grid, ' ', cols * height);

        for (size_t c = 0; c < cols; c++) {
                const CtlHistoryPoint *p = &h[(c + 1) * n / cols - 1];
                static const char marks[3] = { 'T', 'A', 'E' };
                uint64_t v[3] = { p->target, p->actual, p->estimate };
                for (size_t k = 0; k < 3; k++) {
                        if (v[k] == 0 || v[k] == CTL_UNKNOWN)
                                continue;
                        double x = ((double) CLAMP(v[k], lo, hi) - (double) lo) / ((double) hi - (double) lo);
                        size_t row = height - 1 - (size_t) lround(x * (double) (height - 1));
                        char *cell = &grid[row * cols + c];
                        *cell = *cell == ' ' ? marks[k] : '*';
                }
        }

        for (size_t row = 0; row < height; row++) {
                char label[FORMAT_SIZE_MAX] = "";
                if (row == 0 || row == height - 1 || row == (height - 1) / 2) {
                        double x = (double) (height - 1 - row) / (double) (height - 1);
                        format_size(label, sizeof(label), lo + (uint64_t) (x * (double) (hi - lo)));
                }
                size_t end = cols;
                while (end > 0 && grid[row * cols + end - 1] == ' ')
                        end--;
                fprintf(f, "%*s %s%.*s\n", CHART_LABEL, label, ctl_glyph(CTL_GLYPH_AXIS_TICK), (int) end,
                        &grid[row * cols]);
        }
        fprintf(f, "%*s %s", CHART_LABEL, "", ctl_glyph(CTL_GLYPH_AXIS_CORNER));
        for (size_t c = 0; c < cols; c++)
                fputs(ctl_glyph(CTL_GLYPH_AXIS_LINE), f);
        uint64_t span = h[n - 1].usec > h[0].usec ? (h[n - 1].usec - h[0].usec) / 1000000 : 0;
        char ago[32];
        if (span >= 7200)
                snprintf(ago, sizeof(ago), "-%lluh", (unsigned long long) (span / 3600));
        else if (span >= 120)
                snprintf(ago, sizeof(ago), "-%llum", (unsigned long long) (span / 60));
        else
                snprintf(ago, sizeof(ago), "-%llus", (unsigned long long) span);
        fprintf(f, "\n%*s  %-*s%s\n", CHART_LABEL, "", (int) (cols > 3 ? cols - 3 : strlen(ago)), ago, "now");
        fprintf(f, "%*s  T target  A actual  E estimate  * overlap  (%llu points over %llu s)\n", CHART_LABEL, "",
                (unsigned long long) n, (unsigned long long) span);
        return ferror(f) ? -EIO : 0;
}

int ctl_print_history(FILE *f, const char *name, const CtlHistoryPoint *h, size_t n, size_t width) {
        _cleanup_free_ char *clean = ctl_sanitize(name);
        uint64_t lo, hi;
        int r = 0;

        if (n == 0 || !history_range(h, n, &lo, &hi)) {
                fprintf(f, "%s: no history yet\n", clean ?: "?");
                return ferror(f) ? -EIO : 0;
        }
        fprintf(f, "%s: %zu samples\n\n", clean ?: "?", n);

        _cleanup_free_ uint64_t *series = calloc(n, sizeof(uint64_t));
        if (!series)
                return -ENOMEM;
        size_t spark_width = width > 40 ? width - 40 : 20;
        static const char *const names[3] = { "target", "actual", "estimate" };
        for (size_t k = 0; k < 3; k++) {
                uint64_t last = CTL_UNKNOWN;
                for (size_t i = 0; i < n; i++) {
                        uint64_t v = k == 0 ? h[i].target : k == 1 ? h[i].actual : h[i].estimate;
                        series[i] = v == 0 ? CTL_UNKNOWN : v;
                        if (series[i] != CTL_UNKNOWN)
                                last = series[i];
                }
                _cleanup_free_ char *spark = ctl_sparkline(series, n, lo, hi, spark_width);
                char now[FORMAT_SIZE_MAX];
                if (!spark)
                        return -ENOMEM;
                fprintf(f, "%-9s %s  %s\n", names[k], spark, ctl_format_size(now, sizeof(now), last));
        }
        fputc('\n', f);
        r = ctl_print_chart(f, h, n, width, 10);
        if (r < 0)
                return r;
        fputc('\n', f);

        static const char *const headers[] = { "TIME", "TARGET", "ACTUAL", "ESTIMATE" };
        CtlTable *t = ctl_table_new(4, headers);
        if (!t)
                return -ENOMEM;
        for (size_t c = 1; c < 4; c++)
                ctl_table_align_right(t, c);
        for (size_t i = 0; i < n && r >= 0; i++) {
                char when[64] = "-", a[FORMAT_SIZE_MAX], b[FORMAT_SIZE_MAX], c[FORMAT_SIZE_MAX];
                time_t sec = (time_t) (h[i].usec / 1000000);
                struct tm tm;
                if (localtime_r(&sec, &tm))
                        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
                const char *cells[] = {
                        when,
                        ctl_format_size(a, sizeof(a), h[i].target),
                        ctl_format_size(b, sizeof(b), h[i].actual),
                        ctl_format_size(c, sizeof(c), h[i].estimate == 0 ? CTL_UNKNOWN : h[i].estimate),
                };
                r = ctl_table_add_row(t, cells);
        }
        if (r >= 0)
                r = ctl_table_print(t, f);
        ctl_table_free(t);
        return r;
}

/* ---- JSON ---- */

json_object *ctl_field_json(const void *g, const CtlField *f) {
        json_object *v = NULL;

        switch (f->type) {
        case CTL_FIELD_STRING: {
                const char *s = *AT_CONST(g, f, char *);
                if (s)
                        v = json_object_new_string(s);
                break;
        }
        case CTL_FIELD_SIZE:
        case CTL_FIELD_USEC:
        case CTL_FIELD_COUNT: {
                uint64_t x = *AT_CONST(g, f, uint64_t);
                if (x != CTL_UNKNOWN)
                        v = json_object_new_uint64(x);
                break;
        }
        case CTL_FIELD_DOUBLE: {
                double x = *AT_CONST(g, f, double);
                char text[32];
                /* six digits are what the daemon means; %.17g would print 0.90000000000000002 */
                snprintf(text, sizeof(text), "%.6g", x);
                if (isfinite(x))
                        v = json_object_new_double_s(x, text);
                break;
        }
        case CTL_FIELD_BOOL: {
                int x = *AT_CONST(g, f, int);
                if (x >= 0)
                        v = json_object_new_boolean(x);
                break;
        }
        }
        return v;
}

int ctl_fields_to_json(json_object *o, const void *g, const CtlField *fields, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const CtlField *f = &fields[i];
                json_object *v = ctl_field_json(g, f);
                if (json_object_object_add(o, f->key, v) < 0)
                        return -ENOMEM;
        }
        return 0;
}

json_object *ctl_guest_to_json(const CtlGuest *g) {
        json_object *o = json_object_new_object();

        if (!o || ctl_fields_to_json(o, g, ctl_guest_fields, ctl_n_guest_fields) < 0)
                return json_object_put(o), NULL;
        uint64_t rec = ctl_guest_reclaimed(g);
        json_object_object_add(o, "reclaimed", rec == CTL_UNKNOWN ? NULL : json_object_new_uint64(rec));
        uint64_t back = ctl_guest_host_returned(g);
        json_object_object_add(o, "host-returned", back == CTL_UNKNOWN ? NULL : json_object_new_uint64(back));
        return o;
}

json_object *ctl_history_to_json(const CtlHistoryPoint *h, size_t n) {
        json_object *a = json_object_new_array();

        if (!a)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_object *p = json_object_new_object();
                if (!p) {
                        json_object_put(a);
                        return NULL;
                }
                json_object_object_add(p, "time", json_object_new_uint64(h[i].usec));
                json_object_object_add(p, "target", json_object_new_uint64(h[i].target));
                json_object_object_add(p, "actual", json_object_new_uint64(h[i].actual));
                json_object_object_add(p, "estimate", h[i].estimate == 0 ? NULL : json_object_new_uint64(h[i].estimate));
                json_object_array_add(a, p);
        }
        return a;
}

int ctl_json_mode_from_string(const char *s, CtlJsonMode *ret) {
        if (!s || strcmp(s, "pretty") == 0)
                *ret = CTL_JSON_PRETTY;
        else if (strcmp(s, "short") == 0)
                *ret = CTL_JSON_SHORT;
        else
                return -EINVAL;
        return 0;
}

int ctl_print_json_mode(FILE *f, json_object *o, CtlJsonMode mode) {
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE;

        flags |= mode == CTL_JSON_SHORT ? JSON_C_TO_STRING_PLAIN : JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED;
        const char *s = json_object_to_json_string_ext(o, flags);
        if (!s)
                return -ENOMEM;
        fprintf(f, "%s\n", s);
        return ferror(f) ? -EIO : 0;
}

int ctl_print_json(FILE *f, json_object *o) {
        return ctl_print_json_mode(f, o, CTL_JSON_PRETTY);
}
