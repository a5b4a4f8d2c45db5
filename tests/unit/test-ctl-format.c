/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl's formatting: tables stay aligned whatever the names, hostile names cannot
 * reach the terminal, sizes read as people write them, pictures follow the data, and the JSON
 * keeps its documented shape. */

#include <check.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "ctl/ctl-format.h"
#include "tests/lib/check-run.h"

static char *capture_begin(FILE **f, size_t *size, char **buf) {
        *f = open_memstream(buf, size);
        ck_assert_ptr_nonnull(*f);
        return NULL;
}

static char *capture_end(FILE *f, char *buf) {
        ck_assert_int_eq(fclose(f), 0);
        return buf;
}

/* The nth line (0-based) of text, malloc'd. */
static char *nth_line(const char *text, size_t n) {
        const char *p = text;
        for (size_t i = 0; i < n; i++) {
                p = strchr(p, '\n');
                ck_assert_ptr_nonnull(p);
                p++;
        }
        return strndup(p, strcspn(p, "\n"));
}

/* Display column at which `needle` starts in line. */
static size_t column_of(const char *line, const char *needle) {
        const char *p = strstr(line, needle);
        ck_assert_msg(p != NULL, "\"%s\" not in \"%s\"", needle, line);
        _cleanup_free_ char *prefix = strndup(line, (size_t) (p - line));
        return ctl_display_width(prefix);
}

static void guest_fill(CtlGuest *g, const char *name, const char *state, uint64_t actual) {
        ctl_guest_init(g);
        ck_assert_int_eq(ctl_field_set_string(g, ctl_guest_field_find("name"), name), 0);
        ck_assert_int_eq(ctl_field_set_string(g, ctl_guest_field_find("state"), state), 0);
        ck_assert_int_eq(ctl_field_set_string(g, ctl_guest_field_find("policy"), "balanced"), 0);
        ctl_field_set_u64(g, ctl_guest_field_find("actual"), actual);
        ctl_field_set_u64(g, ctl_guest_field_find("max"), 4 * GIB);
}

START_TEST(test_sanitize) {
        _cleanup_free_ char *a = ctl_sanitize("web\x1b]0;pwned\x07\x1b[2J");
        ck_assert_str_eq(a, "web?]0;pwned??[2J");
        _cleanup_free_ char *b = ctl_sanitize("tab\there\nnl\x7f");
        ck_assert_str_eq(b, "tab?here?nl?");
        /* UTF-8 survives; a C1 CSI (U+009B) and a lone continuation byte do not */
        _cleanup_free_ char *c = ctl_sanitize("gäst-€\xc2\x9b" "31m\x80x");
        ck_assert_str_eq(c, "gäst-€?31m?x");
        /* truncated and overlong sequences */
        _cleanup_free_ char *d = ctl_sanitize("a\xe2\x82" "b\xc0\xafz");
        ck_assert_str_eq(d, "a??b??z");
        _cleanup_free_ char *e = ctl_sanitize(NULL);
        ck_assert_str_eq(e, "");
        ck_assert_uint_eq(ctl_display_width("gäst-€"), 6);

        /* The invisible characters that reorder or hide text: U+202E would show "evil" + "exe.jpg"
         * for this name, and turn the rest of the line around with it. */
        _cleanup_free_ char *f = ctl_sanitize("evil\u202Egpj.exe");
        ck_assert_str_eq(f, "evil?gpj.exe");
        static const struct {
                const char *in, *out;
        } invisible[] = {
                { "a\u061Cb", "a?b" },                                 /* ARABIC LETTER MARK */
                { "a\u180Eb", "a?b" },                                 /* MONGOLIAN VOWEL SEPARATOR */
                { "\u200Ba\u200Cb\u200Dc\u200Ed\u200F", "?a?b?c?d?" }, /* zero width; LRM, RLM */
                { "\u202Aa\u202Bb\u202Cc\u202Dd", "?a?b?c?d" },        /* embeddings, PDF, LRO */
                { "a\u2060b\u2064c", "a?b?c" },                        /* WORD JOINER .. INVISIBLE PLUS */
                { "\u2066a\u2067b\u2068c\u2069", "?a?b?c?" },          /* the isolates, PDI */
                { "a\u206Ab\u206Fc", "a?b?c" },                        /* deprecated format controls */
                { "\uFEFFweb1", "?web1" },                             /* BOM / ZERO WIDTH NO-BREAK SPACE */
        };
        for (size_t i = 0; i < ARRAY_SIZE(invisible); i++) {
                _cleanup_free_ char *clean = ctl_sanitize(invisible[i].in);
                ck_assert_str_eq(clean, invisible[i].out);
        }
        /* Their neighbours are ordinary text: NBSP, the hyphens, the ellipsis, the narrow NBSP. */
        _cleanup_free_ char *g = ctl_sanitize("a\u00A0b\u2010c\u2026d\u202Fe\u2070");
        ck_assert_str_eq(g, "a\u00A0b\u2010c\u2026d\u202Fe\u2070");
}
END_TEST

START_TEST(test_sizes) {
        char buf[64];
        ck_assert_str_eq(ctl_format_size(buf, sizeof(buf), 512), "512 B");
        ck_assert_str_eq(ctl_format_size(buf, sizeof(buf), 1536 * MIB), "1.5 GiB");
        ck_assert_str_eq(ctl_format_size(buf, sizeof(buf), 300 * MIB), "300 MiB");
        ck_assert_str_eq(ctl_format_size(buf, sizeof(buf), CTL_UNKNOWN), "-");
}
END_TEST

START_TEST(test_table_alignment_hostile_names) {
        CtlGuest g[3];
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        guest_fill(&g[0], "a", "probe", 2 * GIB);
        guest_fill(&g[1], "very-long-guest-name-\x1b[31mred\x1b[0m-and-more-ünïcödé", "hold", 1536 * MIB);
        guest_fill(&g[2], "broken", "faulty", 512 * MIB);
        ck_assert_int_eq(ctl_field_set_string(&g[2], ctl_guest_field_find("fault"), "QMP: garbage\x1b[H"), 0);
        ck_assert_int_eq(ctl_field_set_string(&g[0], ctl_guest_field_find("reason"), "probing down"), 0);
        ctl_field_set_u64(&g[0], ctl_guest_field_find("estimate"), 700 * MIB);

        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_guest_table(f, g, 3), 0);
        capture_end(f, buf);

        ck_assert_ptr_null(strchr(buf, '\x1b'));
        _cleanup_free_ char *h = nth_line(buf, 0), *l0 = nth_line(buf, 1), *l1 = nth_line(buf, 2),
                             *l2 = nth_line(buf, 3);
        /* Left-aligned columns start where their header does. */
        ck_assert_uint_eq(column_of(l0, "probe"), column_of(h, "STATE"));
        ck_assert_uint_eq(column_of(l1, "hold"), column_of(h, "STATE"));
        ck_assert_uint_eq(column_of(l2, "faulty"), column_of(h, "STATE"));
        ck_assert_uint_eq(column_of(l1, "balanced"), column_of(h, "POLICY"));
        /* Right-aligned sizes end where their header ends. */
        ck_assert_uint_eq(column_of(l0, "2 GiB") + strlen("2 GiB"), column_of(h, "ACTUAL") + strlen("ACTUAL"));
        ck_assert_uint_eq(column_of(l1, "1.5 GiB") + strlen("1.5 GiB"), column_of(h, "ACTUAL") + strlen("ACTUAL"));
        ck_assert_uint_eq(column_of(l0, "700 MiB") + strlen("700 MiB"),
                          column_of(h, "ESTIMATE") + strlen("ESTIMATE"));
        /* Reclaimed is max - actual; the fault replaces the reason. */
        ck_assert_uint_eq(column_of(l2, "3.5 GiB") + strlen("3.5 GiB"), column_of(h, "RECLAIMED") + strlen("RECLAIMED"));
        ck_assert_uint_eq(column_of(l2, "fault: QMP: garbage?[H"), column_of(h, "REASON/FAULT"));
        ck_assert_uint_eq(column_of(l0, "probing down"), column_of(h, "REASON/FAULT"));
        ck_assert_ptr_nonnull(strstr(l1, "very-long-guest-name-?[31mred?[0m-and-more-ünïcödé"));
        /* No trailing blanks. */
        ck_assert(l1[strlen(l1) - 1] != ' ');
        free(buf);
        for (size_t i = 0; i < 3; i++)
                ctl_guest_done(&g[i]);
}
END_TEST

START_TEST(test_sparkline) {
        const uint64_t series[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
        _cleanup_free_ char *s = ctl_sparkline(series, 8, 0, 7, 80);
        ck_assert_str_eq(s, "▁▂▃▄▅▆▇█");

        /* Resampling keeps the last value of each bucket; unknown is a blank. */
        const uint64_t longer[] = { 0, 10, 10, 0, CTL_UNKNOWN, CTL_UNKNOWN, 5, 10 };
        _cleanup_free_ char *t = ctl_sparkline(longer, 8, 0, 10, 4);
        ck_assert_str_eq(t, "█▁ █");

        /* Out of range values are clamped; a flat range is the lowest bar. */
        const uint64_t flat[] = { 3, 3, 3 };
        _cleanup_free_ char *u = ctl_sparkline(flat, 3, 3, 3, 10);
        ck_assert_str_eq(u, "▁▁▁");
        const uint64_t wild[] = { 0, 100 };
        _cleanup_free_ char *w = ctl_sparkline(wild, 2, 10, 20, 10);
        ck_assert_str_eq(w, "▁█");
}
END_TEST

START_TEST(test_chart) {
        CtlHistoryPoint h[20];
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        /* Target falls from 4 GiB to 2 GiB, actual follows one step late, estimate flat at 1 GiB. */
        for (size_t i = 0; i < 20; i++) {
                h[i].usec = 1700000000ULL * 1000000 + i * 10 * 1000000;
                h[i].target = i < 10 ? 4 * GIB : 2 * GIB;
                h[i].actual = i < 11 ? 4 * GIB : 2 * GIB;
                h[i].estimate = i < 2 ? 0 : GIB;
        }
        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_chart(f, h, 20, 80, 7), 0);
        capture_end(f, buf);

        _cleanup_free_ char *top = nth_line(buf, 0), *bottom = nth_line(buf, 6), *mid = nth_line(buf, 4);
        /* Top row: 4 GiB, target and actual together (*) for ten columns, then actual alone. */
        ck_assert_ptr_nonnull(strstr(top, "4 GiB"));
        ck_assert_ptr_nonnull(strstr(top, "┤**********A"));
        ck_assert_ptr_null(strchr(top, 'E'));
        /* Bottom row: 1 GiB, the estimate from the third point on (the first two unknown). */
        ck_assert_ptr_nonnull(strstr(bottom, "1 GiB"));
        ck_assert_ptr_nonnull(strstr(bottom, "┤  EEEEEEEEEEEEEEEEEE"));
        /* 2 GiB is a third of the way up from 1 GiB to 4 GiB: row 4 of 0..6. */
        ck_assert_ptr_nonnull(strstr(mid, "┤          T*********"));
        ck_assert_ptr_nonnull(strstr(buf, "-3m"));
        ck_assert_ptr_nonnull(strstr(buf, "T target  A actual  E estimate"));
        free(buf);
}
END_TEST

START_TEST(test_json_shape) {
        CtlGuest g;
        guest_fill(&g, "web\x1b", "hold", 3 * GIB);
        ctl_field_set_double(&g, ctl_guest_field_find("confidence"), 0.75);
        ctl_field_set_bool(&g, ctl_guest_field_find("agent"), true);

        json_object *o = ctl_guest_to_json(&g), *v;
        ck_assert_ptr_nonnull(o);
        /* Every documented key is there, null when unknown. */
        for (size_t i = 0; i < ctl_n_guest_fields; i++)
                ck_assert_msg(json_object_object_get_ex(o, ctl_guest_fields[i].key, NULL), "%s missing",
                              ctl_guest_fields[i].key);
        ck_assert(json_object_object_get_ex(o, "reclaimed", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), GIB);
        /* No RSS known: null, not a guess. */
        ck_assert(json_object_object_get_ex(o, "host-returned", &v));
        ck_assert_ptr_null(v);
        ctl_field_set_u64(&g, ctl_guest_field_find("host-rss"), 1536 * MIB);
        ck_assert_uint_eq(ctl_guest_host_returned(&g), 4 * GIB - 1536 * MIB);
        ck_assert(json_object_object_get_ex(o, "name", &v));
        ck_assert_str_eq(json_object_get_string(v), "web\x1b"); /* JSON escapes it; the data is kept */
        ck_assert(json_object_object_get_ex(o, "actual", &v));
        ck_assert(json_object_is_type(v, json_type_int));
        ck_assert_uint_eq(json_object_get_uint64(v), 3 * GIB);
        ck_assert(json_object_object_get_ex(o, "estimate", &v));
        ck_assert_ptr_null(v);
        ck_assert(json_object_object_get_ex(o, "confidence", &v));
        ck_assert(fabs(json_object_get_double(v) - 0.75) < 1e-9);
        ck_assert(json_object_object_get_ex(o, "agent", &v));
        ck_assert(json_object_get_boolean(v));
        ck_assert(json_object_object_get_ex(o, "paused", &v));
        ck_assert_ptr_null(v);

        char *buf = NULL;
        size_t size = 0;
        FILE *f;
        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_json(f, o), 0);
        capture_end(f, buf);
        ck_assert_ptr_nonnull(strstr(buf, "\"web\\u001b\""));
        json_object *back = json_tokener_parse(buf);
        ck_assert_ptr_nonnull(back);
        json_object_put(back);
        free(buf);
        json_object_put(o);
        ctl_guest_done(&g);

        CtlHistoryPoint h[2] = { { 1, 2, 3, 0 }, { 4, 5, 6, 7 } };
        json_object *a = ctl_history_to_json(h, 2);
        ck_assert_uint_eq(json_object_array_length(a), 2);
        json_object *p0 = json_object_array_get_idx(a, 0), *p1 = json_object_array_get_idx(a, 1);
        ck_assert(json_object_object_get_ex(p0, "estimate", &v));
        ck_assert_ptr_null(v);
        ck_assert(json_object_object_get_ex(p1, "estimate", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 7);
        ck_assert(json_object_object_get_ex(p1, "time", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 4);
        json_object_put(a);
}
END_TEST

START_TEST(test_details) {
        CtlGuest g;
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        guest_fill(&g, "db\x1b[1m", "probe", 3 * GIB);
        ctl_field_set_u64(&g, ctl_guest_field_find("estimate"), 1200 * MIB);
        ctl_field_set_u64(&g, ctl_guest_field_find("estimate-lower"), GIB);
        ctl_field_set_u64(&g, ctl_guest_field_find("estimate-upper"), 1536 * MIB);
        ctl_field_set_double(&g, ctl_guest_field_find("confidence"), 0.8);
        ck_assert_int_eq(ctl_field_set_string(&g, ctl_guest_field_find("tier"), "agent"), 0);
        ck_assert_int_eq(ctl_field_set_string(&g, ctl_guest_field_find("reason"), "refaults low"), 0);

        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_guest_details(f, &g, NULL, 0, 80), 0);
        capture_end(f, buf);
        ck_assert_ptr_null(strchr(buf, '\x1b'));
        ck_assert_ptr_nonnull(strstr(buf, "db?[1m"));
        ck_assert_ptr_nonnull(strstr(buf, "Estimate: 1.2 GiB (1 GiB .. 1.5 GiB)"));
        ck_assert_ptr_nonnull(strstr(buf, "State: probe (tier agent)"));
        ck_assert_ptr_nonnull(strstr(buf, "Confidence: 80 %"));
        ck_assert_ptr_nonnull(strstr(buf, "Reason: refaults low"));
        ck_assert_ptr_nonnull(strstr(buf, "Reclaimed: 1 GiB"));
        free(buf);
        ctl_guest_done(&g);
}
END_TEST

START_TEST(test_guest_names) {
        CtlGuest g[4];
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        guest_fill(&g[0], "web-1", "hold", GIB);
        guest_fill(&g[1], "db\x1b]0;x\x07\nrm -rf", "probe", GIB); /* a hostile name stays on its line */
        ctl_guest_init(&g[2]);                                     /* no name sent: left out */
        guest_fill(&g[3], "with blank", "learn", GIB);

        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_guest_names(f, g, 4), 0);
        capture_end(f, buf);
        /* The names, one a line, in order, and nothing else: no header, no summary. */
        ck_assert_str_eq(buf, "web-1\ndb?]0;x??rm -rf\nwith blank\n");
        free(buf);

        /* No guests: no output at all (not "No guests."). */
        buf = NULL;
        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_guest_names(f, g, 0), 0);
        capture_end(f, buf);
        ck_assert_str_eq(buf, "");
        free(buf);
        for (size_t i = 0; i < ARRAY_SIZE(g); i++)
                ctl_guest_done(&g[i]);
}
END_TEST

START_TEST(test_status_exit_code) {
        CtlGuest g[4];
        CtlGuestCounts c;

        for (size_t i = 0; i < ARRAY_SIZE(g); i++)
                guest_fill(&g[i], "g", "hold", GIB);
        c = ctl_guest_counts(g, 0);
        ck_assert_uint_eq(c.guests, 0);
        ck_assert_int_eq(ctl_status_exit_code(&c), EXIT_OK);

        ctl_field_set_bool(&g[0], ctl_guest_field_find("paused"), true);
        c = ctl_guest_counts(g, 4);
        ck_assert_uint_eq(c.guests, 4);
        ck_assert_uint_eq(c.paused, 1);
        ck_assert_uint_eq(c.faulty, 0);
        ck_assert_int_eq(ctl_status_exit_code(&c), EXIT_OK); /* paused is not faulty */

        /* A skipped guest (no balloon, passthrough) shows why, but is not a failure. */
        ck_assert_int_eq(ctl_field_set_string(&g[1], ctl_guest_field_find("state"), "skipped"), 0);
        ck_assert_int_eq(ctl_field_set_string(&g[1], ctl_guest_field_find("fault"), "skipped: no balloon device"), 0);
        c = ctl_guest_counts(g, 4);
        ck_assert_uint_eq(c.faulty, 1);
        ck_assert_uint_eq(c.skipped, 1);
        ck_assert_int_eq(ctl_status_exit_code(&c), EXIT_OK);

        /* Any other fault is. */
        ck_assert_int_eq(ctl_field_set_string(&g[2], ctl_guest_field_find("fault"), "QMP connection lost"), 0);
        c = ctl_guest_counts(g, 4);
        ck_assert_uint_eq(c.faulty, 2);
        ck_assert_uint_eq(c.skipped, 1);
        ck_assert_int_eq(ctl_status_exit_code(&c), EXIT_FAULTY);
        ck_assert_int_eq(EXIT_FAULTY, 6); /* documented in rightsizectl(1) and --help */

        /* A guest refused for a name in use is not managed at all: a failure too. */
        c = ctl_guest_counts(g, 1);
        ck_assert_int_eq(ctl_status_exit_code(&c), EXIT_OK);
        c.refused = 1;
        ck_assert_int_eq(ctl_status_exit_code(&c), EXIT_FAULTY);

        /* The daemon's state says skipped, not the words of the fault: a faulty guest whose fault
         * reads like a skipped one's is a failure all the same. */
        CtlGuest h;
        guest_fill(&h, "h", "faulty", GIB);
        ck_assert_int_eq(ctl_field_set_string(&h, ctl_guest_field_find("fault"), "skipped: stuck"), 0);
        ck_assert(!ctl_guest_skipped(&h));
        c = ctl_guest_counts(&h, 1);
        ck_assert_int_eq(ctl_status_exit_code(&c), EXIT_FAULTY);
        ctl_guest_done(&h);
        for (size_t i = 0; i < ARRAY_SIZE(g); i++)
                ctl_guest_done(&g[i]);
}
END_TEST

START_TEST(test_report) {
        CtlGuest g[3];

        /* web: 4 GiB, needs 1 GiB, holds at 1.5 GiB, QEMU at 1.25 GiB; db: 4 GiB, needs 3 GiB, at
         * 4 GiB; new: no estimate yet, no RSS. */
        guest_fill(&g[0], "web", "hold", 3 * GIB / 2);
        ctl_field_set_u64(&g[0], ctl_guest_field_find("reclaimable"), 3 * GIB);
        ctl_field_set_u64(&g[0], ctl_guest_field_find("estimate"), GIB);
        ctl_field_set_u64(&g[0], ctl_guest_field_find("host-rss"), 5 * GIB / 4);
        ctl_field_set_u64(&g[0], ctl_guest_field_find("probe-cycles"), 3);
        ctl_field_set_u64(&g[0], ctl_guest_field_find("probe-refaults"), 1200);
        guest_fill(&g[1], "db", "hold", 4 * GIB);
        ctl_field_set_u64(&g[1], ctl_guest_field_find("reclaimable"), GIB);
        ctl_field_set_u64(&g[1], ctl_guest_field_find("probe-cycles"), 1);
        guest_fill(&g[2], "new", "learn", 4 * GIB);

        CtlReport r = ctl_report(g, 3);
        ck_assert_uint_eq(r.guests, 3);
        ck_assert_uint_eq(r.with_estimate, 2);
        ck_assert_uint_eq(r.configured, 12 * GIB);
        ck_assert_uint_eq(r.needed, 4 * GIB);      /* (4 - 3) + (4 - 1) */
        ck_assert_uint_eq(r.reclaimable, 4 * GIB);
        ck_assert_uint_eq(r.returned, 5 * GIB / 2); /* only web is below its max */
        ck_assert_uint_eq(r.with_rss, 1);
        ck_assert_uint_eq(r.host_returned, 11 * GIB / 4);
        ck_assert_uint_eq(r.probe_cycles, 4);
        ck_assert_uint_eq(r.probe_refaults, 1200);

        /* The text: the sums, then the guests with most to give, most first, unknown last. */
        char *buf = NULL;
        size_t size = 0;
        FILE *f = NULL;
        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_report(f, &r, g, 3, 2), 0);
        capture_end(f, buf);
        _cleanup_free_ char *text = buf;
        _cleanup_free_ char *give = nth_line(text, 2);
        ck_assert_msg(strstr(give, "Would give back") && strstr(give, " 4 GiB "), "%s", text);
        ck_assert_msg(strstr(text, "4  probe cycles, 1200 refaults while probing"), "%s", text);
        const char *web = strstr(text, "\nweb "), *db = strstr(text, "\ndb ");
        ck_assert_msg(web && db && web < db, "web (3 GiB to give) must come before db:\n%s", text);
        ck_assert_msg(!strstr(text, "\nnew "), "only the top 2 are listed:\n%s", text);
        for (size_t i = 0; i < ARRAY_SIZE(g); i++)
                ctl_guest_done(&g[i]);
}
END_TEST

START_TEST(test_json_modes) {
        CtlJsonMode m = CTL_JSON_OFF;
        char *pretty = NULL, *plain = NULL, *shrt = NULL;
        size_t size = 0;
        FILE *f;

        ck_assert_int_eq(ctl_json_mode_from_string(NULL, &m), 0); /* a bare --json: pretty, as before */
        ck_assert_int_eq(m, CTL_JSON_PRETTY);
        ck_assert_int_eq(ctl_json_mode_from_string("short", &m), 0);
        ck_assert_int_eq(m, CTL_JSON_SHORT);
        ck_assert_int_eq(ctl_json_mode_from_string("pretty", &m), 0);
        ck_assert_int_eq(m, CTL_JSON_PRETTY);
        ck_assert_int_eq(ctl_json_mode_from_string("", &m), -EINVAL);
        ck_assert_int_eq(ctl_json_mode_from_string("Short", &m), -EINVAL);
        ck_assert_int_eq(ctl_json_mode_from_string("off", &m), -EINVAL);

        json_object *o = json_object_new_object(), *a = json_object_new_array();
        json_object_array_add(a, json_object_new_string("a/b"));
        json_object_array_add(a, json_object_new_uint64(1));
        json_object_object_add(o, "guests", a);
        json_object_object_add(o, "name", json_object_new_string("x"));

        capture_begin(&f, &size, &pretty);
        ck_assert_int_eq(ctl_print_json_mode(f, o, CTL_JSON_PRETTY), 0);
        capture_end(f, pretty);
        capture_begin(&f, &size, &plain);
        ck_assert_int_eq(ctl_print_json(f, o), 0);
        capture_end(f, plain);
        capture_begin(&f, &size, &shrt);
        ck_assert_int_eq(ctl_print_json_mode(f, o, CTL_JSON_SHORT), 0);
        capture_end(f, shrt);

        ck_assert_str_eq(pretty, plain); /* --json is --json=pretty */
        ck_assert_ptr_nonnull(strstr(pretty, "\n  \"guests\""));
        /* short: one line, then the newline; no blanks; '/' not escaped */
        ck_assert_str_eq(shrt, "{\"guests\":[\"a/b\",1],\"name\":\"x\"}\n");
        json_object *back = json_tokener_parse(pretty);
        ck_assert(json_object_equal(back, o));
        json_object_put(back);
        back = json_tokener_parse(shrt);
        ck_assert(json_object_equal(back, o));
        json_object_put(back);
        free(pretty);
        free(plain);
        free(shrt);
        json_object_put(o);
}
END_TEST

/* ---- the terminal: display width, glyphs, colours ---- */

static void assert_widths(void) {
        ck_assert_uint_eq(ctl_display_width(""), 0);
        ck_assert_uint_eq(ctl_display_width("web1"), 4);
        ck_assert_uint_eq(ctl_display_width("gäst-ü"), 6);        /* two bytes each, one column */
        ck_assert_uint_eq(ctl_display_width("東京"), 4);           /* CJK: two columns each */
        ck_assert_uint_eq(ctl_display_width("gäst-東京-ü"), 11);
        ck_assert_uint_eq(ctl_display_width("한국"), 4);           /* Hangul */
        ck_assert_uint_eq(ctl_display_width("ｗｅｂ"), 6);         /* fullwidth forms */
        ck_assert_uint_eq(ctl_display_width("e\xcc\x81t\xc3\xa9"), 3); /* e + combining acute, t, é */
        ck_assert_uint_eq(ctl_display_width("a?b"), 3);
}

START_TEST(test_display_width) {
        /* Without a UTF-8 locale (the test starts in C's): the built-in table. */
        ck_assert_ptr_nonnull(setlocale(LC_ALL, "C"));
        assert_widths();
        /* In a UTF-8 locale, as rightsizectl runs on a UTF-8 terminal: mbstowcs() and wcswidth(). */
        if (!setlocale(LC_ALL, "C.UTF-8") && !setlocale(LC_ALL, "en_US.UTF-8")) {
                check_cannot_set_up("test_display_width", "no UTF-8 locale (C.UTF-8, en_US.UTF-8) for wcswidth()");
                return;
        }
        assert_widths();
        ck_assert_ptr_nonnull(setlocale(LC_ALL, "C"));
}
END_TEST

START_TEST(test_table_wide_names) {
        static const char *const headers[] = { "NAME", "STATE", "SIZE" };
        static const char *const rows[][3] = {
                { "web1", "hold", "1 GiB" },
                { "gäst-ü", "probe", "512 MiB" },
                { "東京-db", "learn", "2 GiB" },
                { "ｗｅｂ-東", "hold", "3.5 GiB" },
        };
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        CtlTable *t = ctl_table_new(3, headers);
        ck_assert_ptr_nonnull(t);
        ctl_table_align_right(t, 2);
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++)
                ck_assert_int_eq(ctl_table_add_row(t, rows[i]), 0);
        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_table_print(t, f), 0);
        capture_end(f, buf);
        ctl_table_free(t);

        _cleanup_free_ char *h = nth_line(buf, 0);
        size_t state_col = column_of(h, "STATE"), size_end = column_of(h, "SIZE") + strlen("SIZE");
        /* The widest name is "ｗｅｂ-東": 9 columns, 13 bytes, 5 code points. */
        ck_assert_uint_eq(state_col, 9 + 2);
        for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
                _cleanup_free_ char *l = nth_line(buf, i + 1);
                ck_assert_uint_eq(column_of(l, rows[i][1]), state_col);
                ck_assert_uint_eq(column_of(l, rows[i][2]) + strlen(rows[i][2]), size_end);
                /* The padding is blanks: the name, then exactly the columns it lacks. */
                size_t name_len = strlen(rows[i][0]);
                ck_assert(strncmp(l, rows[i][0], name_len) == 0);
                ck_assert_uint_eq(strspn(l + name_len, " "), state_col - ctl_display_width(rows[i][0]));
        }
        free(buf);
}
END_TEST

static bool all_ascii(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (*p >= 0x80)
                        return false;
        return true;
}

START_TEST(test_ascii_fallback) {
        CtlHistoryPoint h[12];
        CtlGuest g;
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        ctl_set_terminal(false, false);
        for (CtlGlyph i = 0; i < _CTL_GLYPH_MAX; i++)
                ck_assert_msg(all_ascii(ctl_glyph(i)) && ctl_glyph(i)[0] != '\0', "glyph %d: \"%s\"", (int) i,
                              ctl_glyph(i));
        /* Names from the daemon: every non-ASCII character is a '?' (an 8-bit terminal could take
         * a UTF-8 continuation byte for a C1 control). */
        _cleanup_free_ char *name = ctl_sanitize("gäst-東京\x1b[1m");
        ck_assert_str_eq(name, "g?st-???[1m");
        const uint64_t series[] = { 0, 1, 2, 3, 4, 5, 6, 7 };
        _cleanup_free_ char *spark = ctl_sparkline(series, 8, 0, 7, 80);
        ck_assert_str_eq(spark, "_.:-=+*#");

        for (size_t i = 0; i < ARRAY_SIZE(h); i++)
                h[i] = (CtlHistoryPoint) { 1700000000ULL * 1000000 + i * 10 * 1000000, i < 6 ? 4 * GIB : 2 * GIB,
                                           4 * GIB - i * 100 * MIB, i < 2 ? 0 : GIB };
        guest_fill(&g, "gäst-東京", "hold", 2 * GIB);
        ck_assert_int_eq(ctl_field_set_string(&g, ctl_guest_field_find("fault"), "QMP: gone → away"), 0);
        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_guest_table(f, &g, 1), 0);
        ck_assert_int_eq(ctl_print_guest_details(f, &g, h, ARRAY_SIZE(h), 80), 0);
        ck_assert_int_eq(ctl_print_history(f, g.name, h, ARRAY_SIZE(h), 80), 0);
        capture_end(f, buf);
        ck_assert_msg(all_ascii(buf), "not ASCII:\n%s", buf);
        ck_assert_ptr_nonnull(strstr(buf, "x g?st-??\n"));   /* the cross of a faulty guest */
        ck_assert_ptr_nonnull(strstr(buf, " |"));             /* the chart's axes */
        ck_assert_ptr_nonnull(strstr(buf, " +---"));
        ck_assert_ptr_nonnull(strstr(buf, "target    #"));     /* the sparklines */
        ck_assert_ptr_nonnull(strstr(buf, "QMP: gone ? away"));
        free(buf);
        ctl_guest_done(&g);
        ctl_set_terminal(true, false);
}
END_TEST

/* Without the SGR escapes (ESC [ ... m). */
static char *strip_sgr(const char *s) {
        char *out = malloc(strlen(s) + 1), *o = out;
        ck_assert_ptr_nonnull(out);
        while (*s) {
                if (s[0] == '\x1b' && s[1] == '[') {
                        s += 2 + strcspn(s + 2, "m");
                        if (*s)
                                s++;
                        continue;
                }
                *o++ = *s++;
        }
        *o = '\0';
        return out;
}

START_TEST(test_colors) {
        CtlGuest g[3];
        char *plain = NULL, *colored = NULL;
        size_t size = 0;
        FILE *f;

        guest_fill(&g[0], "web1", "hold", 2 * GIB);
        guest_fill(&g[1], "東京-db", "faulty", GIB);
        ck_assert_int_eq(ctl_field_set_string(&g[1], ctl_guest_field_find("fault"), "QMP connection closed"), 0);
        guest_fill(&g[2], "gäst-ü", "hold", GIB);
        ctl_field_set_bool(&g[2], ctl_guest_field_find("paused"), true);

        /* Off (the default): no escape at all. */
        ck_assert(!ctl_colors());
        ck_assert_str_eq(ctl_color(CTL_COLOR_RED), "");
        capture_begin(&f, &size, &plain);
        ck_assert_int_eq(ctl_print_guest_table(f, g, 3), 0);
        ck_assert_int_eq(ctl_print_guest_details(f, &g[1], NULL, 0, 80), 0);
        capture_end(f, plain);
        ck_assert_ptr_null(strchr(plain, '\x1b'));

        /* On: the fault red, the paused state yellow, the header underlined; and without the
         * escapes, the very same text (they take no columns). */
        ctl_set_terminal(true, true);
        capture_begin(&f, &size, &colored);
        ck_assert_int_eq(ctl_print_guest_table(f, g, 3), 0);
        ck_assert_int_eq(ctl_print_guest_details(f, &g[1], NULL, 0, 80), 0);
        capture_end(f, colored);
        ctl_set_terminal(true, false);
        ck_assert_ptr_nonnull(strstr(colored, "\x1b[0;1;31mfault: QMP connection closed\x1b[0m"));
        ck_assert_ptr_nonnull(strstr(colored, "\x1b[0;1;31mfaulty\x1b[0m"));
        ck_assert_ptr_nonnull(strstr(colored, "\x1b[0;1;33mhold\x1b[0m"));
        ck_assert_ptr_nonnull(strstr(colored, "\x1b[0;4mNAME\x1b[0m"));
        ck_assert_ptr_nonnull(strstr(colored, "\x1b[0;1;31m×\x1b[0m 東京-db"));
        _cleanup_free_ char *stripped = strip_sgr(colored);
        ck_assert_str_eq(stripped, plain);
        free(plain);
        free(colored);
        for (size_t i = 0; i < ARRAY_SIZE(g); i++)
                ctl_guest_done(&g[i]);
}
END_TEST

START_TEST(test_terminal_detection) {
        /* Glyphs: a UTF-8 codeset, and a TERM that can show it. */
        ck_assert(ctl_utf8_wanted("UTF-8", "xterm-256color"));
        ck_assert(ctl_utf8_wanted("utf8", NULL));
        ck_assert(!ctl_utf8_wanted("ANSI_X3.4-1968", "xterm-256color")); /* LANG=C */
        ck_assert(!ctl_utf8_wanted("ISO-8859-1", "xterm"));
        ck_assert(!ctl_utf8_wanted(NULL, "xterm"));
        ck_assert(!ctl_utf8_wanted("UTF-8", "dumb"));
        ck_assert(!ctl_utf8_wanted("UTF-8", "vt220")); /* a serial console */
        ck_assert(!ctl_utf8_wanted("UTF-8", "vt100"));
        ck_assert(ctl_utf8_wanted("UTF-8", "linux"));
        ck_assert(ctl_utf8_wanted("UTF-8", "vte-256color"));

        /* Colours: on a terminal that is not dumb, unless NO_COLOR (not empty); SYSTEMD_COLORS wins. */
        ck_assert(ctl_colors_wanted(NULL, NULL, "xterm", true));
        ck_assert(!ctl_colors_wanted(NULL, NULL, "xterm", false));
        ck_assert(!ctl_colors_wanted(NULL, NULL, "dumb", true));
        ck_assert(!ctl_colors_wanted(NULL, "1", "xterm", true));
        ck_assert(ctl_colors_wanted(NULL, "", "xterm", true));
        ck_assert(!ctl_colors_wanted("0", NULL, "xterm", true));
        ck_assert(!ctl_colors_wanted("no", NULL, "xterm", true));
        ck_assert(ctl_colors_wanted("1", NULL, "dumb", false));
        ck_assert(ctl_colors_wanted("256", "1", "xterm", false));
        ck_assert(ctl_colors_wanted("bogus", NULL, "xterm", true));
        ck_assert(!ctl_colors_wanted("bogus", NULL, "xterm", false));

        ck_assert_int_eq(ctl_parse_boolean("Yes"), 1);
        ck_assert_int_eq(ctl_parse_boolean("off"), 0);
        ck_assert_int_eq(ctl_parse_boolean("2"), -1);
        ck_assert_int_eq(ctl_parse_boolean(NULL), -1);
}
END_TEST

START_TEST(test_estimate_event) {
        char *buf = NULL, *buf2;
        size_t size = 0, column = 0;
        FILE *f;
        CtlEstimateEvent e = {
                .usec = 1700000000ULL * 1000000,
                .name = "東京\x1b[2J",
                .estimate = 1200 * MIB,
                .lower = GIB,
                .upper = 1536 * MIB,
                .target = 1536 * MIB,
                .state = "hold",
        };

        capture_begin(&f, &size, &buf);
        ck_assert_int_eq(ctl_print_estimate_event(f, &e, &column), 0);
        e.name = "web1";
        e.lower = e.upper = e.target = CTL_UNKNOWN;
        e.state = NULL;
        ck_assert_int_eq(ctl_print_estimate_event(f, &e, &column), 0);
        capture_end(f, buf);
        ck_assert_ptr_null(strchr(buf, '\x1b'));
        _cleanup_free_ char *l0 = nth_line(buf, 0), *l1 = nth_line(buf, 1), *l2 = nth_line(buf, 2);
        ck_assert_str_eq(l2, "");
        ck_assert_ptr_nonnull(strstr(l0, "東京?[2J"));
        ck_assert_ptr_nonnull(strstr(l0, "estimate 1.2 GiB (1 GiB .. 1.5 GiB)  target 1.5 GiB  hold"));
        ck_assert_ptr_nonnull(strstr(l1, "web1"));
        ck_assert_ptr_nonnull(strstr(l1, "estimate 1.2 GiB  target -"));
        /* While probing only the upper bound is known. */
        buf2 = NULL;
        e.upper = 2 * GIB;
        capture_begin(&f, &size, &buf2);
        ck_assert_int_eq(ctl_print_estimate_event(f, &e, &column), 0);
        capture_end(f, buf2);
        ck_assert_ptr_nonnull(strstr(buf2, "estimate 1.2 GiB (- .. 2 GiB)  target -\n"));
        free(buf2);
        e.upper = CTL_UNKNOWN;
        /* The names are padded by display width: what follows starts in the same column. */
        ck_assert_uint_eq(column_of(l0, "estimate"), column_of(l1, "estimate"));

        json_object *o = ctl_estimate_event_to_json(&e), *v;
        ck_assert(json_object_object_get_ex(o, "name", &v));
        ck_assert_str_eq(json_object_get_string(v), "web1");
        ck_assert(json_object_object_get_ex(o, "estimate", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 1200 * MIB);
        ck_assert(json_object_object_get_ex(o, "time", &v));
        ck_assert_uint_eq(json_object_get_uint64(v), 1700000000ULL * 1000000);
        static const char *const nulls[] = { "estimate-lower", "estimate-upper", "target", "state" };
        for (size_t i = 0; i < ARRAY_SIZE(nulls); i++) {
                ck_assert_msg(json_object_object_get_ex(o, nulls[i], &v), "%s missing", nulls[i]);
                ck_assert_ptr_null(v);
        }
        json_object_put(o);
        free(buf);
}
END_TEST

START_TEST(test_estimate_event_name_column) {
        /* Longer than the 16 columns monitor once padded every name to, a wide one, a hostile one. */
        static const char *const names[] = { "web1", "db-primary-eu-west-1a.example", "gäst-東京-東京-東京-東京",
                                             "evil\x1b]0;owned\x07\u202Eexe" };
        CtlGuest guests[ARRAY_SIZE(names)];
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                guest_fill(&guests[i], names[i], "hold", 2 * GIB);
        size_t column = ctl_guest_name_width(guests, ARRAY_SIZE(guests));
        ck_assert_uint_eq(column, strlen("db-primary-eu-west-1a.example"));
        ck_assert_uint_eq(ctl_guest_name_width(guests, 1), 4);
        ck_assert_uint_eq(ctl_guest_name_width(NULL, 0), 0);

        capture_begin(&f, &size, &buf);
        for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
                CtlEstimateEvent e = {
                        .usec = 1700000000ULL * 1000000,
                        .name = names[i],
                        .estimate = 1200 * MIB,
                        .lower = CTL_UNKNOWN,
                        .upper = 1536 * MIB,
                        .target = 1536 * MIB,
                        .state = "probe",
                };
                ck_assert_int_eq(ctl_print_estimate_event(f, &e, &column), 0);
        }
        /* A guest that came after monitor started, wider than them all: its line starts a wider
         * column, which the lines after it keep. */
        CtlEstimateEvent late = {
                .usec = 1700000000ULL * 1000000,
                .name = "a-guest-that-came-later-with-a-long-name",
                .estimate = GIB,
                .lower = CTL_UNKNOWN,
                .upper = CTL_UNKNOWN,
                .target = CTL_UNKNOWN,
        };
        ck_assert_int_eq(ctl_print_estimate_event(f, &late, &column), 0);
        ck_assert_uint_eq(column, strlen(late.name));
        late.name = "web1";
        ck_assert_int_eq(ctl_print_estimate_event(f, &late, &column), 0);
        ck_assert_uint_eq(column, strlen("a-guest-that-came-later-with-a-long-name"));
        capture_end(f, buf);

        _cleanup_free_ char *l0 = nth_line(buf, 0), *l1 = nth_line(buf, 1), *l2 = nth_line(buf, 2),
                            *l3 = nth_line(buf, 3), *l4 = nth_line(buf, 4), *l5 = nth_line(buf, 5);
        /* What follows the names starts in one column, two blanks after the widest name. */
        size_t at = column_of(l1, "estimate");
        ck_assert_uint_eq(at, column_of(l1, "db-primary") + strlen("db-primary-eu-west-1a.example") + 2);
        ck_assert_uint_eq(column_of(l0, "estimate"), at);
        ck_assert_uint_eq(column_of(l2, "estimate"), at);
        ck_assert_uint_eq(column_of(l3, "estimate"), at);
        ck_assert_ptr_nonnull(strstr(l3, "evil?]0;owned??exe")); /* sanitised, then padded */
        ck_assert_uint_eq(column_of(l5, "estimate"), column_of(l4, "estimate"));
        ck_assert_uint_gt(column_of(l4, "estimate"), at);
        ck_assert_ptr_nonnull(strstr(l4, "long-name  estimate 1 GiB  target -"));
        free(buf);
        for (size_t i = 0; i < ARRAY_SIZE(guests); i++)
                ctl_guest_done(&guests[i]);
}
END_TEST

int main(void) {
        return check_run_case("ctl-format", "format", NULL, NULL, 0,
                              CHECK_TESTS(test_sanitize, test_sizes, test_table_alignment_hostile_names, test_sparkline,
                                          test_chart, test_json_shape, test_details, test_guest_names,
                                          test_status_exit_code, test_json_modes, test_report, test_display_width,
                                          test_table_wide_names, test_ascii_fallback, test_colors,
                                          test_terminal_detection, test_estimate_event,
                                          test_estimate_event_name_column));
}
