/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl report's "where the host's memory is" (ctl/ctl-memory.c): the table and lines
 * say what the records say, the reasons name their guests, hostile names and reasons cannot
 * reach the terminal, and the JSON has every key of its record, null when unknown. */

#include <check.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "ctl/ctl-memory.h"
#include "tests/lib/check-run.h"

static void set(CtlMemory *m, const char *key, uint64_t v) {
        const CtlField *f = ctl_memory_field_find(key);
        ck_assert_msg(f, "no field %s", key);
        ctl_field_set_u64(m, f, v);
}

static void set_str(CtlMemory *m, const char *key, const char *v) {
        ck_assert_int_eq(ctl_field_set_string(m, ctl_memory_field_find(key), v), 0);
}

/* web: 4 GiB, 1 GiB in the balloon, all it has resident, no free page reporting; db: 2 GiB,
 * reporting on, the host holding what it uses. */
static void fill(CtlMemory *host, CtlMemory g[2]) {
        ctl_memory_init(host);
        ctl_memory_init(&g[0]);
        ctl_memory_init(&g[1]);
        set_str(&g[0], "name", "web");
        set(&g[0], "max", 4 * GIB);
        set(&g[0], "actual", 3 * GIB);
        set(&g[0], "balloon", 1 * GIB);
        set(&g[0], "used", 1 * GIB);
        set(&g[0], "cache", 512 * MIB);
        set(&g[0], "free", 1536 * MIB);
        set(&g[0], "rss", 3 * GIB);
        set(&g[0], "swap", 0);
        set(&g[0], "reported", 0);
        set(&g[0], "unreturned", 1536 * MIB);
        ck_assert_int_eq(ctl_memory_add_why(&g[0], "no-free-page-reporting"), 0);
        set_str(&g[1], "name", "db");
        set(&g[1], "max", 2 * GIB);
        set(&g[1], "actual", 2 * GIB);
        set(&g[1], "balloon", 0);
        set(&g[1], "used", 1 * GIB);
        set(&g[1], "cache", 256 * MIB);
        set(&g[1], "free", 768 * MIB);
        set(&g[1], "rss", 1280 * MIB);
        set(&g[1], "swap", 256 * MIB);
        set(&g[1], "reported", 512 * MIB);
        set(&g[1], "unreturned", 256 * MIB);
        ck_assert_int_eq(ctl_memory_add_why(&g[1], "host-swap"), 0);

        set(host, "guests", 2);
        set(host, "guests-without-rss", 0);
        set(host, "balloon", 1 * GIB);
        set(host, "used", 2 * GIB);
        set(host, "cache", 768 * MIB);
        set(host, "free", 2304 * MIB);
        set(host, "rss", 4352 * MIB);
        set(host, "swap", 256 * MIB);
        set(host, "held", 4608 * MIB);
        set(host, "reported", 512 * MIB);
        set(host, "unreturned", 1792 * MIB);
        set(host, "mem-total", 64 * GIB);
        set(host, "mem-available", 40 * GIB);
        set(host, "ksm-run", 1);
        set(host, "ksm-pages-sharing", 100 * MIB);
        set_str(host, "thp-enabled", "madvise");
        set(host, "thp-max-ptes-none", 511);
        set(host, "thp-collapsed", 12);
        set(host, "thp-filled", 3 * MIB);
        ctl_field_set_bool(host, ctl_memory_field_find("thp-refills"), 1);
        ck_assert_int_eq(ctl_memory_add_why(host, "no-free-page-reporting"), 0);
        ck_assert_int_eq(ctl_memory_add_why(host, "host-swap"), 0);
}

static char *print(const CtlMemory *host, const CtlMemory *g, size_t n) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(ctl_print_memory_report(f, host, g, n), 0);
        ck_assert_int_eq(fclose(f), 0);
        return buf;
}

START_TEST(test_table_and_reasons) {
        CtlMemory host, g[2];
        fill(&host, g);
        ctl_set_terminal(false, false);
        _cleanup_free_ char *out = print(&host, g, 2);

        ck_assert_ptr_nonnull(strstr(out, "NAME     MAX  BALLOON   USED    CACHE     FREE      RSS     SWAP  KSM"
                                          "  FREE BACK  FREE HELD  WHY\n"));
        ck_assert_ptr_nonnull(strstr(out, "\nweb    4 GiB    1 GiB  1 GiB  512 MiB  1.5 GiB    3 GiB      0 B    -"
                                          "        0 B    1.5 GiB  no free page reporting\n"));
        ck_assert_ptr_nonnull(strstr(out, "\ndb     2 GiB      0 B  1 GiB  256 MiB  768 MiB  1.3 GiB  256 MiB    -"
                                          "    512 MiB    256 MiB  host swap\n"));
        ck_assert_ptr_nonnull(strstr(out, "\n(all)      -    1 GiB  2 GiB  768 MiB  2.3 GiB  4.3 GiB  256 MiB    -"
                                          "    512 MiB    1.8 GiB  no free page reporting, host swap\n"));
        ck_assert_ptr_nonnull(strstr(out, "Host memory                64 GiB  MemTotal, 40 GiB available\n"));
        ck_assert_ptr_nonnull(strstr(out, "Held for guests           4.5 GiB  QEMU's RSS and swap for the guests\n"));
        ck_assert_ptr_nonnull(strstr(out, "KSM                       100 MiB  running"));
        ck_assert_ptr_nonnull(strstr(out, "Huge pages                madvise  max_ptes_none 511: khugepaged fills"));
        ck_assert_ptr_nonnull(strstr(out, "Huge pages repaired            12  2 MiB ranges put back on huge pages"
                                          " (hugepage-repair=), 3 MiB of holes filled\n"));
        /* What the host never got back, each reason with the guests it holds for. */
        ck_assert_ptr_nonnull(strstr(out, "Never got back            1.8 GiB  free in the guests, still in QEMU's RSS or swap:\n"));
        ck_assert_ptr_nonnull(strstr(out, "  no free page reporting: web\n"));
        ck_assert_ptr_nonnull(strstr(out, "  host swap: db\n"));
        /* One guest: no sum row. */
        _cleanup_free_ char *one = print(&host, g, 1);
        ck_assert_ptr_null(strstr(one, "(all)"));
        ctl_memory_done(&host);
        ctl_memory_done(&g[0]);
        ctl_memory_done(&g[1]);
}
END_TEST

START_TEST(test_unknown_and_hostile) {
        CtlMemory host, g;
        ctl_memory_init(&host);
        ctl_memory_init(&g);
        ctl_set_terminal(false, false);

        /* Nothing known: dashes, no KSM, nothing said about huge pages. */
        set_str(&g, "name", "evil\x1b]0;owned\x07\xe2\x80\xae" "gpj.exe");
        ck_assert_int_eq(ctl_memory_add_why(&g, "\x1b[2Jnot-a-reason"), 0);
        ck_assert_int_eq(ctl_memory_add_why(&host, "\x1b[2Jnot-a-reason"), 0);
        _cleanup_free_ char *out = print(&host, &g, 1);
        ck_assert_ptr_null(strchr(out, '\x1b'));
        ck_assert_ptr_null(strstr(out, "\xe2\x80\xae"));
        ck_assert_ptr_nonnull(strstr(out, "KSM                             -  no KSM in this kernel\n"));
        ck_assert_ptr_null(strstr(out, "Huge pages"));
        ck_assert_ptr_nonnull(strstr(out, "?[2Jnot-a-reason: evil?]0;owned??gpj.exe\n"));

        /* A daemon gone wrong cannot grow the reasons without bound. */
        for (int i = 0; i < 1000; i++)
                ck_assert_int_eq(ctl_memory_add_why(&g, "host-swap"), 0);
        size_t commas = 0;
        for (const char *p = g.why; *p; p++)
                commas += *p == ',';
        ck_assert_uint_lt(commas, 16);
        char words[CTL_WHY_MAX];
        ck_assert_uint_lt(strlen(ctl_memory_why_words(g.why, words, sizeof(words))), CTL_WHY_MAX);
        ctl_memory_done(&host);
        ctl_memory_done(&g);
}
END_TEST

START_TEST(test_json) {
        CtlMemory host, g[2];
        fill(&host, g);

        json_object *o = ctl_memory_to_json(&g[1], false);
        json_object *v;
        ck_assert_str_eq(json_object_get_string(json_object_object_get(o, "name")), "db");
        ck_assert_uint_eq(json_object_get_uint64(json_object_object_get(o, "swap")), 256 * MIB);
        ck_assert(json_object_object_get_ex(o, "ksm", &v) && v == NULL); /* unknown: null, present */
        ck_assert(!json_object_object_get_ex(o, "mem-total", NULL)); /* the host's keys are not a guest's */
        json_object *why = json_object_object_get(o, "why");
        ck_assert_uint_eq(json_object_array_length(why), 1);
        ck_assert_str_eq(json_object_get_string(json_object_array_get_idx(why, 0)), "host-swap");
        json_object_put(o);

        o = ctl_memory_to_json(&host, true);
        ck_assert(!json_object_object_get_ex(o, "name", NULL));
        ck_assert(!json_object_object_get_ex(o, "max", NULL));
        ck_assert_uint_eq(json_object_get_uint64(json_object_object_get(o, "mem-total")), 64 * GIB);
        ck_assert(json_object_get_boolean(json_object_object_get(o, "thp-refills")));
        ck_assert_uint_eq(json_object_array_length(json_object_object_get(o, "why")), 2);
        json_object_put(o);
        ctl_memory_done(&host);
        ctl_memory_done(&g[0]);
        ctl_memory_done(&g[1]);
}
END_TEST

int main(void) {
        return check_run_case("ctl-memory", "format", NULL, NULL, 0,
                              CHECK_TESTS(test_table_and_reasons, test_unknown_and_hostile, test_json));
}
