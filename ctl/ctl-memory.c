/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ctl/ctl-memory.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/size.h"

/* Whose record a key belongs to: both, the host's, a guest's. */
typedef enum Scope {
        SCOPE_BOTH,
        SCOPE_HOST,
        SCOPE_GUEST,
} Scope;

#define FIELD(k, t, m) { k, t, offsetof(CtlMemory, m) }
const CtlField ctl_memory_fields[] = {
        FIELD("name", CTL_FIELD_STRING, name),
        FIELD("guests", CTL_FIELD_COUNT, guests),
        FIELD("guests-without-rss", CTL_FIELD_COUNT, guests_without_rss),
        FIELD("max", CTL_FIELD_SIZE, max),
        FIELD("actual", CTL_FIELD_SIZE, actual),
        FIELD("free-page-reporting", CTL_FIELD_BOOL, free_page_reporting),
        FIELD("total", CTL_FIELD_SIZE, total),
        FIELD("used", CTL_FIELD_SIZE, used),
        FIELD("cache", CTL_FIELD_SIZE, cache),
        FIELD("free", CTL_FIELD_SIZE, free),
        FIELD("balloon", CTL_FIELD_SIZE, balloon),
        FIELD("rss", CTL_FIELD_SIZE, rss),
        FIELD("swap", CTL_FIELD_SIZE, swap),
        FIELD("ksm", CTL_FIELD_SIZE, ksm),
        FIELD("held", CTL_FIELD_SIZE, held),
        FIELD("host-returned", CTL_FIELD_SIZE, host_returned),
        FIELD("reported", CTL_FIELD_SIZE, reported),
        FIELD("unreturned", CTL_FIELD_SIZE, unreturned),
        FIELD("refilled", CTL_FIELD_SIZE, refilled),
        FIELD("mem-total", CTL_FIELD_SIZE, mem_total),
        FIELD("mem-available", CTL_FIELD_SIZE, mem_available),
        FIELD("ksm-run", CTL_FIELD_COUNT, ksm_run),
        FIELD("ksm-pages-shared", CTL_FIELD_SIZE, ksm_pages_shared),
        FIELD("ksm-pages-sharing", CTL_FIELD_SIZE, ksm_pages_sharing),
        FIELD("thp-enabled", CTL_FIELD_STRING, thp_enabled),
        FIELD("thp-max-ptes-none", CTL_FIELD_COUNT, thp_max_ptes_none),
        FIELD("thp-refills", CTL_FIELD_BOOL, thp_refills),
        FIELD("thp-collapsed", CTL_FIELD_COUNT, thp_collapsed),
        FIELD("thp-filled", CTL_FIELD_SIZE, thp_filled),
};
const size_t ctl_n_memory_fields = ARRAY_SIZE(ctl_memory_fields);

/* Parallel to ctl_memory_fields. */
static const Scope field_scope[] = {
        SCOPE_GUEST, SCOPE_HOST, SCOPE_HOST, SCOPE_GUEST, SCOPE_GUEST, SCOPE_GUEST, SCOPE_BOTH,
        SCOPE_BOTH,  SCOPE_BOTH, SCOPE_BOTH, SCOPE_BOTH,  SCOPE_BOTH,  SCOPE_BOTH,  SCOPE_BOTH,
        SCOPE_BOTH,  SCOPE_BOTH, SCOPE_BOTH, SCOPE_BOTH,  SCOPE_BOTH,  SCOPE_HOST,  SCOPE_HOST,
        SCOPE_HOST,  SCOPE_HOST, SCOPE_HOST, SCOPE_HOST,  SCOPE_HOST,  SCOPE_HOST,  SCOPE_BOTH,
        SCOPE_BOTH,
};
_Static_assert(ARRAY_SIZE(field_scope) == ARRAY_SIZE(ctl_memory_fields), "a scope for every field");


const CtlField *ctl_memory_field_find(const char *key) {
        return ctl_fields_find(ctl_memory_fields, ctl_n_memory_fields, key);
}

void ctl_memory_init(CtlMemory *m) {
        memset(m, 0, sizeof(*m));
        ctl_fields_init(m, ctl_memory_fields, ctl_n_memory_fields);
}

void ctl_memory_done(CtlMemory *m) {
        free(m->why);
        m->why = NULL;
        ctl_fields_done(m, ctl_memory_fields, ctl_n_memory_fields);
}

/* More than this many reasons is a daemon gone wrong: the rest are dropped, not kept. */
#define WHY_KEYS_MAX 16
#define WHY_KEY_MAX 64

int ctl_memory_add_why(CtlMemory *m, const char *key) {
        size_t have = m->why ? strlen(m->why) : 0, n = strnlen(key, WHY_KEY_MAX);
        size_t commas = 0;
        for (const char *p = m->why; p && *p; p++)
                commas += *p == ',';
        if (n == 0 || (m->why && commas + 1 >= WHY_KEYS_MAX))
                return 0;
        char *w = realloc(m->why, have + 1 + n + 1);
        if (!w)
                return -ENOMEM;
        if (have)
                w[have++] = ',';
        memcpy(w + have, key, n);
        w[have + n] = '\0';
        m->why = w;
        return 0;
}

static const struct {
        const char *key, *words;
} why_words[] = {
        { "no-free-page-reporting", "no free page reporting" },
        { "fragmented", "free memory not in whole 2 MiB blocks" },
        { "khugepaged", "khugepaged refill" },
        { "host-swap", "host swap" },
        { "clamped", "guest figures clamped" },
};

const char *ctl_memory_why_words(const char *why, char *buf, size_t len) {
        size_t at = 0;

        if (len == 0)
                return buf;
        buf[0] = '\0';
        for (const char *p = why; p && *p;) {
                size_t n = strcspn(p, ",");
                const char *words = NULL;
                for (size_t i = 0; i < ARRAY_SIZE(why_words); i++)
                        if (strlen(why_words[i].key) == n && strncmp(p, why_words[i].key, n) == 0)
                                words = why_words[i].words;
                int w = words ? snprintf(buf + at, len - at, "%s%s", at ? ", " : "", words)
                              : snprintf(buf + at, len - at, "%s%.*s", at ? ", " : "", (int) n, p);
                if (w < 0 || (size_t) w >= len - at)
                        break; /* whole reasons only */
                at += (size_t) w;
                p += n + (p[n] == ',');
        }
        buf[at] = '\0';
        return buf;
}

static bool has_why(const CtlMemory *m, const char *key) {
        size_t n = strlen(key);
        for (const char *p = m->why; p && *p;) {
                size_t k = strcspn(p, ",");
                if (k == n && strncmp(p, key, n) == 0)
                        return true;
                p += k + (p[k] == ',');
        }
        return false;
}

static int add_row(CtlTable *t, const char *name, const CtlMemory *m) {
        char mx[FORMAT_SIZE_MAX], bal[FORMAT_SIZE_MAX], used[FORMAT_SIZE_MAX], cache[FORMAT_SIZE_MAX],
                fr[FORMAT_SIZE_MAX], rss[FORMAT_SIZE_MAX], swap[FORMAT_SIZE_MAX], ksm[FORMAT_SIZE_MAX],
                back[FORMAT_SIZE_MAX], held[FORMAT_SIZE_MAX], why[CTL_WHY_MAX];
        const char *cells[] = {
                name,
                ctl_format_size(mx, sizeof(mx), m->max),
                ctl_format_size(bal, sizeof(bal), m->balloon),
                ctl_format_size(used, sizeof(used), m->used),
                ctl_format_size(cache, sizeof(cache), m->cache),
                ctl_format_size(fr, sizeof(fr), m->free),
                ctl_format_size(rss, sizeof(rss), m->rss),
                ctl_format_size(swap, sizeof(swap), m->swap),
                ctl_format_size(ksm, sizeof(ksm), m->ksm),
                ctl_format_size(back, sizeof(back), m->reported),
                ctl_format_size(held, sizeof(held), m->unreturned),
                m->why ? ctl_memory_why_words(m->why, why, sizeof(why)) : "-",
        };
        return ctl_table_add_row(t, cells);
}

/* "guest-a, guest-b" for the guests whose record names the reason. */
static void print_guests_with(FILE *f, const CtlMemory *guests, size_t n, const char *key) {
        bool first = true;
        for (size_t i = 0; i < n; i++) {
                if (!has_why(&guests[i], key))
                        continue;
                _cleanup_free_ char *name = ctl_sanitize(guests[i].name);
                fprintf(f, "%s%s", first ? "" : ", ", name ?: "?");
                first = false;
        }
}

int ctl_print_memory_report(FILE *f, const CtlMemory *host, const CtlMemory *guests, size_t n) {
        static const char *const headers[] = { "NAME", "MAX", "BALLOON", "USED", "CACHE", "FREE", "RSS", "SWAP",
                                               "KSM", "FREE BACK", "FREE HELD", "WHY" };
        char a[FORMAT_SIZE_MAX], b[FORMAT_SIZE_MAX];
        int r = 0;

        fprintf(f, "Where the host's memory is (the guests say used, cache and free; the host says RSS, swap and KSM):\n");
        CtlTable *t = ctl_table_new(ARRAY_SIZE(headers), headers);
        if (!t)
                return -ENOMEM;
        for (size_t c = 1; c <= 10; c++)
                ctl_table_align_right(t, c);
        for (size_t i = 0; i < n && r >= 0; i++)
                r = add_row(t, guests[i].name, &guests[i]);
        if (r >= 0 && n > 1) {
                CtlMemory sum = *host;
                sum.max = CTL_UNKNOWN; /* the host's record has no max; the guests' sum is "configured" above */
                r = add_row(t, "(all)", &sum);
        }
        if (r >= 0)
                r = ctl_table_print(t, f);
        ctl_table_free(t);
        if (r < 0)
                return r;

        fprintf(f, "\n%-22s %10s  MemTotal, %s available\n", "Host memory", ctl_format_size(a, sizeof(a), host->mem_total),
                ctl_format_size(b, sizeof(b), host->mem_available));
        fprintf(f, "%-22s %10s  QEMU's RSS and swap for the guests", "Held for guests",
                ctl_format_size(a, sizeof(a), host->held));
        if (host->guests_without_rss != CTL_UNKNOWN && host->guests_without_rss > 0)
                fprintf(f, " (%" PRIu64 " without an RSS)", host->guests_without_rss);
        fputc('\n', f);
        if (host->ksm_run == CTL_UNKNOWN)
                fprintf(f, "%-22s %10s  no KSM in this kernel\n", "KSM", "-");
        else
                fprintf(f, "%-22s %10s  %s (pages_sharing: what merging saves)\n", "KSM",
                        ctl_format_size(a, sizeof(a), host->ksm_pages_sharing),
                        host->ksm_run == 1 ? "running" : host->ksm_run == 2 ? "unmerging" : "stopped");
        if (host->thp_enabled || host->thp_refills >= 0) {
                _cleanup_free_ char *mode = ctl_sanitize(host->thp_enabled);
                fprintf(f, "%-22s %10s  max_ptes_none ", "Huge pages", mode && *mode ? mode : "-");
                if (host->thp_max_ptes_none != CTL_UNKNOWN)
                        fprintf(f, "%" PRIu64, host->thp_max_ptes_none);
                else
                        fputc('-', f);
                fprintf(f, "%s\n", host->thp_refills > 0 ? ": khugepaged fills ballooned ranges back in" : "");
        }
        if (host->thp_collapsed != CTL_UNKNOWN && host->thp_collapsed > 0)
                fprintf(f, "%-22s %10" PRIu64 "  2 MiB ranges put back on huge pages (hugepage-repair=), %s of holes filled\n",
                        "Huge pages repaired", host->thp_collapsed, ctl_format_size(a, sizeof(a), host->thp_filled));

        /* What the host never got back, and why: the line an operator acts on. */
        fprintf(f, "%-22s %10s  free in the guests, still in QEMU's RSS or swap", "Never got back",
                ctl_format_size(a, sizeof(a), host->unreturned));
        if (!host->why) {
                fputs("\n", f);
                return ferror(f) ? -EIO : 0;
        }
        fputs(":\n", f);
        for (const char *p = host->why; *p;) {
                size_t k = strcspn(p, ",");
                char key[WHY_KEY_MAX + 1], words[CTL_WHY_MAX];
                snprintf(key, sizeof(key), "%.*s", (int) MIN(k, (size_t) WHY_KEY_MAX), p);
                _cleanup_free_ char *clean = ctl_sanitize(ctl_memory_why_words(key, words, sizeof(words)));
                fprintf(f, "%-22s %10s  %s: ", "", "", clean ?: "?");
                print_guests_with(f, guests, n, key);
                fputc('\n', f);
                p += k + (p[k] == ',');
        }
        if (host->refilled != CTL_UNKNOWN && host->refilled > 0)
                fprintf(f, "%-22s %10s  held beyond the guests' sizes (refilled ballooned ranges, QEMU's own)\n",
                        "Refilled", ctl_format_size(a, sizeof(a), host->refilled));
        return ferror(f) ? -EIO : 0;
}

json_object *ctl_memory_to_json(const CtlMemory *m, bool host) {
        json_object *o = json_object_new_object(), *why = json_object_new_array();

        if (!o || !why) {
                json_object_put(o);
                json_object_put(why);
                return NULL;
        }
        for (size_t i = 0; i < ctl_n_memory_fields; i++) {
                const CtlField *f = &ctl_memory_fields[i];
                json_object *v;

                if (field_scope[i] == (host ? SCOPE_GUEST : SCOPE_HOST))
                        continue;
                v = ctl_field_json(m, f);
                json_object_object_add(o, f->key, v);
        }
        for (const char *p = m->why; p && *p;) {
                size_t k = strcspn(p, ",");
                json_object_array_add(why, json_object_new_string_len(p, (int) k));
                p += k + (p[k] == ',');
        }
        json_object_object_add(o, "why", why);
        return o;
}
