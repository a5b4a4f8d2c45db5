/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "common/procfs.h"

#include <errno.h>
#include <string.h>

#include "common/macro.h"

/* A view into the caller's buffer, never NUL-terminated. */
typedef struct Span {
        const char *p;
        size_t n;
} Span;

static bool span_eq(Span s, const char *word) {
        size_t n = strlen(word);

        return s.n == n && memcmp(s.p, word, n) == 0;
}

/* Cuts the next line (without '\n') off *rest; false when nothing is left. */
static bool next_line(Span *rest, Span *line) {
        const char *nl;

        if (rest->n == 0)
                return false;
        nl = memchr(rest->p, '\n', rest->n);
        line->p = rest->p;
        line->n = nl ? (size_t) (nl - rest->p) : rest->n;
        rest->p += line->n + (nl ? 1 : 0);
        rest->n -= line->n + (nl ? 1 : 0);
        return true;
}

static bool is_blank(char c) {
        return c == ' ' || c == '\t' || c == '\r';
}

static void skip_blanks(Span *s) {
        while (s->n > 0 && is_blank(*s->p)) {
                s->p++;
                s->n--;
        }
}

/* Cuts the next blank-separated word off *s. */
static bool next_word(Span *s, Span *word) {
        skip_blanks(s);
        if (s->n == 0)
                return false;
        word->p = s->p;
        while (s->n > 0 && !is_blank(*s->p)) {
                s->p++;
                s->n--;
        }
        word->n = (size_t) (s->p - word->p);
        return true;
}

/* Whole span must be decimal digits; false on overflow or anything else. */
static bool parse_u64(Span s, uint64_t *ret) {
        uint64_t v = 0;

        if (s.n == 0)
                return false;
        for (size_t i = 0; i < s.n; i++) {
                unsigned d;

                if (s.p[i] < '0' || s.p[i] > '9')
                        return false;
                d = (unsigned) (s.p[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return false;
                v = v * 10 + d;
        }
        *ret = v;
        return true;
}

/* "12.34" or "12": non-negative decimal without exponent, independent of the locale. */
static bool parse_decimal(Span s, double *ret) {
        const char *dot = memchr(s.p, '.', s.n);
        Span integer = { s.p, dot ? (size_t) (dot - s.p) : s.n };
        uint64_t whole, fraction = 0;
        double scale = 1.0;

        if (!parse_u64(integer, &whole))
                return false;
        if (dot) {
                Span frac = { dot + 1, s.n - integer.n - 1 };

                /* More digits than a double holds are noise, not a reason to fail. */
                if (frac.n == 0 || frac.n > 18 || !parse_u64(frac, &fraction))
                        return false;
                for (size_t i = 0; i < frac.n; i++)
                        scale *= 10.0;
        }
        *ret = (double) whole + (double) fraction / scale;
        return true;
}

/* ---- /proc/vmstat ---- */

static const char *const vmstat_names[_GUEST_VMSTAT_MAX] = {
        [GUEST_VMSTAT_WORKINGSET_REFAULT_ANON] = "workingset_refault_anon",
        [GUEST_VMSTAT_WORKINGSET_REFAULT_FILE] = "workingset_refault_file",
        [GUEST_VMSTAT_WORKINGSET_ACTIVATE_ANON] = "workingset_activate_anon",
        [GUEST_VMSTAT_WORKINGSET_ACTIVATE_FILE] = "workingset_activate_file",
        [GUEST_VMSTAT_WORKINGSET_RESTORE_ANON] = "workingset_restore_anon",
        [GUEST_VMSTAT_WORKINGSET_RESTORE_FILE] = "workingset_restore_file",
        [GUEST_VMSTAT_PGSCAN_KSWAPD] = "pgscan_kswapd",
        [GUEST_VMSTAT_PGSCAN_DIRECT] = "pgscan_direct",
        [GUEST_VMSTAT_PGSTEAL_KSWAPD] = "pgsteal_kswapd",
        [GUEST_VMSTAT_PGSTEAL_DIRECT] = "pgsteal_direct",
        [GUEST_VMSTAT_PSWPIN] = "pswpin",
        [GUEST_VMSTAT_PSWPOUT] = "pswpout",
        [GUEST_VMSTAT_PGMAJFAULT] = "pgmajfault",
        [GUEST_VMSTAT_PGFAULT] = "pgfault",
        [GUEST_VMSTAT_ALLOCSTALL] = "allocstall",
        [GUEST_VMSTAT_OOM_KILL] = "oom_kill",
        [GUEST_VMSTAT_BALLOON_INFLATE] = "balloon_inflate",
        [GUEST_VMSTAT_BALLOON_DEFLATE] = "balloon_deflate",
};

/* Pre-5.9 names, file pages only. */
static const struct {
        const char *name;
        GuestVmstatCounter counter;
} vmstat_legacy[] = {
        { "workingset_refault", GUEST_VMSTAT_WORKINGSET_REFAULT_FILE },
        { "workingset_activate", GUEST_VMSTAT_WORKINGSET_ACTIVATE_FILE },
        { "workingset_restore", GUEST_VMSTAT_WORKINGSET_RESTORE_FILE },
};

const char *guest_vmstat_counter_name(GuestVmstatCounter counter) {
        if ((unsigned) counter >= _GUEST_VMSTAT_MAX)
                return NULL;
        return vmstat_names[counter];
}

static void add_saturating(uint64_t *sum, uint64_t v) {
        /* Stay below the sentinel so a huge sum never reads as "unknown". */
        if (*sum == GUEST_VALUE_UNKNOWN)
                *sum = 0;
        *sum = v >= GUEST_VALUE_UNKNOWN - 1 - *sum ? GUEST_VALUE_UNKNOWN - 1 : *sum + v;
}

int guest_vmstat_parse(const char *text, size_t size, GuestVmstat *ret) {
        uint64_t legacy[ARRAY_SIZE(vmstat_legacy)];
        Span rest = { text, text ? size : 0 }, line;
        GuestVmstat vm;
        int known = 0;

        for (size_t i = 0; i < _GUEST_VMSTAT_MAX; i++)
                vm.value[i] = GUEST_VALUE_UNKNOWN;
        for (size_t i = 0; i < ARRAY_SIZE(legacy); i++)
                legacy[i] = GUEST_VALUE_UNKNOWN;

        while (next_line(&rest, &line)) {
                Span key, value, extra;
                uint64_t v;

                if (!next_word(&line, &key) || !next_word(&line, &value) || next_word(&line, &extra))
                        continue;
                if (!parse_u64(value, &v) || v == GUEST_VALUE_UNKNOWN)
                        continue;

                if (key.n > strlen("allocstall") && memcmp(key.p, "allocstall_", strlen("allocstall_")) == 0) {
                        add_saturating(&vm.value[GUEST_VMSTAT_ALLOCSTALL], v);
                        continue;
                }
                for (size_t i = 0; i < _GUEST_VMSTAT_MAX; i++)
                        if (span_eq(key, vmstat_names[i])) {
                                if (i == GUEST_VMSTAT_ALLOCSTALL)
                                        add_saturating(&vm.value[i], v);
                                else
                                        vm.value[i] = v;
                                goto next;
                        }
                for (size_t i = 0; i < ARRAY_SIZE(vmstat_legacy); i++)
                        if (span_eq(key, vmstat_legacy[i].name))
                                legacy[i] = v;
        next:;
        }

        for (size_t i = 0; i < ARRAY_SIZE(vmstat_legacy); i++)
                if (!guest_value_is_known(vm.value[vmstat_legacy[i].counter]))
                        vm.value[vmstat_legacy[i].counter] = legacy[i];

        for (size_t i = 0; i < _GUEST_VMSTAT_MAX; i++)
                if (guest_value_is_known(vm.value[i]))
                        known++;
        *ret = vm;
        return known;
}

/* ---- /proc/meminfo ---- */

static const char *const meminfo_names[_GUEST_MEMINFO_MAX] = {
        [GUEST_MEMINFO_MEM_TOTAL] = "MemTotal",
        [GUEST_MEMINFO_MEM_FREE] = "MemFree",
        [GUEST_MEMINFO_MEM_AVAILABLE] = "MemAvailable",
        [GUEST_MEMINFO_BUFFERS] = "Buffers",
        [GUEST_MEMINFO_CACHED] = "Cached",
        [GUEST_MEMINFO_SWAP_CACHED] = "SwapCached",
        [GUEST_MEMINFO_ACTIVE_ANON] = "Active(anon)",
        [GUEST_MEMINFO_INACTIVE_ANON] = "Inactive(anon)",
        [GUEST_MEMINFO_ACTIVE_FILE] = "Active(file)",
        [GUEST_MEMINFO_INACTIVE_FILE] = "Inactive(file)",
        [GUEST_MEMINFO_UNEVICTABLE] = "Unevictable",
        [GUEST_MEMINFO_MLOCKED] = "Mlocked",
        [GUEST_MEMINFO_SWAP_TOTAL] = "SwapTotal",
        [GUEST_MEMINFO_SWAP_FREE] = "SwapFree",
        [GUEST_MEMINFO_DIRTY] = "Dirty",
        [GUEST_MEMINFO_WRITEBACK] = "Writeback",
        [GUEST_MEMINFO_ANON_PAGES] = "AnonPages",
        [GUEST_MEMINFO_MAPPED] = "Mapped",
        [GUEST_MEMINFO_SHMEM] = "Shmem",
        [GUEST_MEMINFO_KRECLAIMABLE] = "KReclaimable",
        [GUEST_MEMINFO_SRECLAIMABLE] = "SReclaimable",
        [GUEST_MEMINFO_SUNRECLAIM] = "SUnreclaim",
        [GUEST_MEMINFO_COMMITTED_AS] = "Committed_AS",
};

const char *guest_meminfo_field_name(GuestMeminfoField field) {
        if ((unsigned) field >= _GUEST_MEMINFO_MAX)
                return NULL;
        return meminfo_names[field];
}

int guest_meminfo_parse(const char *text, size_t size, GuestMeminfo *ret) {
        Span rest = { text, text ? size : 0 }, line;
        GuestMeminfo mi;
        int known = 0;

        for (size_t i = 0; i < _GUEST_MEMINFO_MAX; i++)
                mi.value[i] = GUEST_VALUE_UNKNOWN;

        while (next_line(&rest, &line)) {
                Span key, value, unit, extra;
                uint64_t v;

                if (!next_word(&line, &key) || !next_word(&line, &value) || !next_word(&line, &unit) ||
                    next_word(&line, &extra))
                        continue;
                if (key.n < 2 || key.p[key.n - 1] != ':' || !span_eq(unit, "kB"))
                        continue;
                key.n--;
                if (!parse_u64(value, &v) || v > (GUEST_VALUE_UNKNOWN - 1) / 1024)
                        continue;
                for (size_t i = 0; i < _GUEST_MEMINFO_MAX; i++)
                        if (span_eq(key, meminfo_names[i])) {
                                mi.value[i] = v * 1024;
                                break;
                        }
        }

        for (size_t i = 0; i < _GUEST_MEMINFO_MAX; i++)
                if (guest_value_is_known(mi.value[i]))
                        known++;
        *ret = mi;
        return known;
}

/* ---- /proc/pressure/memory ---- */

static bool parse_psi_fields(Span line, GuestPsiLine *ret) {
        GuestPsiLine psi = {};
        bool have10 = false, have60 = false, have300 = false, have_total = false;
        Span word;

        while (next_word(&line, &word)) {
                const char *eq = memchr(word.p, '=', word.n);
                Span key, value;

                if (!eq)
                        return false;
                key = (Span) { word.p, (size_t) (eq - word.p) };
                value = (Span) { eq + 1, word.n - key.n - 1 };

                if (span_eq(key, "avg10"))
                        have10 = parse_decimal(value, &psi.avg10);
                else if (span_eq(key, "avg60"))
                        have60 = parse_decimal(value, &psi.avg60);
                else if (span_eq(key, "avg300"))
                        have300 = parse_decimal(value, &psi.avg300);
                else if (span_eq(key, "total"))
                        have_total = parse_u64(value, &psi.total_usec);
                /* unknown keys from newer kernels are fine */
        }
        if (!have10 || !have60 || !have300 || !have_total)
                return false;
        psi.known = true;
        *ret = psi;
        return true;
}

int guest_psi_parse(const char *text, size_t size, GuestPsi *ret) {
        Span rest = { text, text ? size : 0 }, line;
        GuestPsi psi = {};

        while (next_line(&rest, &line)) {
                Span kind;

                if (!next_word(&line, &kind))
                        continue;
                if (span_eq(kind, "some"))
                        (void) parse_psi_fields(line, &psi.some);
                else if (span_eq(kind, "full"))
                        (void) parse_psi_fields(line, &psi.full);
        }
        *ret = psi;
        return psi.some.known ? 0 : -EBADMSG;
}

/* ---- /proc/zoneinfo ---- */

/* 2^40 pages is 4 PiB: a zone that claims more is lying, and so is the whole file. */
#define ZONE_PAGES_MAX (UINT64_C(1) << 40)
/* MAX_NUMNODES is 1024 at most, and a node has up to five zones; more is not a kernel's. */
#define ZONES_MAX (5 * 1024)

typedef struct Zone {
        uint64_t min, low, high, managed, protection;
        uint64_t pcp; /* pages on its CPUs' lists */
        bool has_min, has_low, has_high, has_managed, has_pcp;
} Zone;

/* "(0, 881, 881, 881, 881)": the largest, or false when anything in it is not a count. */
static bool parse_protection(Span s, uint64_t *ret) {
        uint64_t top = 0;
        bool any = false;
        size_t i = 0;

        while (i < s.n) {
                if (s.p[i] == '(' || s.p[i] == ')' || s.p[i] == ',' || is_blank(s.p[i])) {
                        i++;
                        continue;
                }
                size_t start = i;
                while (i < s.n && s.p[i] != ',' && s.p[i] != ')' && !is_blank(s.p[i]))
                        i++;
                uint64_t v;
                if (!parse_u64((Span) { s.p + start, i - start }, &v) || v > ZONE_PAGES_MAX)
                        return false;
                top = MAX(top, v);
                any = true;
        }
        *ret = top;
        return any;
}

/* What a zone adds to the sums: each watermark with the zone's largest protection, at most
 * its managed pages (calculate_totalreserve_pages()). -EBADMSG for a zone out of order. */
static int zone_add(const Zone *z, uint64_t page_size, GuestZoneinfo *sum) {
        if (!z->has_min && !z->has_low && !z->has_high)
                return 0; /* a zone line without watermarks: nothing to add */
        if (!z->has_min || !z->has_low || !z->has_high || z->min > z->low || z->low > z->high)
                return -EBADMSG;
        uint64_t cap = z->has_managed ? z->managed : UINT64_MAX;
        if (z->pcp > cap)
                return -EBADMSG; /* more free on its lists than the zone has */
        /* A guest with thousands of zones each at the bound could wrap a sum: refused like
         * any other file no kernel writes. */
        uint64_t pcp = guest_value_is_known(sum->pcp) ? sum->pcp : 0, add[4];
        if (__builtin_mul_overflow(z->pcp, page_size, &add[0]) ||
            __builtin_mul_overflow(MIN(z->min + z->protection, cap), page_size, &add[1]) ||
            __builtin_mul_overflow(MIN(z->low + z->protection, cap), page_size, &add[2]) ||
            __builtin_mul_overflow(MIN(z->high + z->protection, cap), page_size, &add[3]) ||
            __builtin_add_overflow(pcp, add[0], &pcp) || __builtin_add_overflow(sum->min, add[1], &sum->min) ||
            __builtin_add_overflow(sum->low, add[2], &sum->low) || __builtin_add_overflow(sum->high, add[3], &sum->high))
                return -EBADMSG;
        if (z->has_pcp)
                sum->pcp = pcp;
        sum->zones++;
        return 0;
}

int guest_zoneinfo_parse(const char *text, size_t size, uint64_t page_size, GuestZoneinfo *ret) {
        Span rest = { text, text ? size : 0 }, line;
        GuestZoneinfo sum = { .pcp = GUEST_VALUE_UNKNOWN };
        Zone z = {};
        bool in_zone = false;

        *ret = (GuestZoneinfo) { .min = GUEST_VALUE_UNKNOWN, .low = GUEST_VALUE_UNKNOWN, .high = GUEST_VALUE_UNKNOWN,
                                 .pcp = GUEST_VALUE_UNKNOWN };
        if (page_size == 0 || page_size > 64 * 1024)
                return -EINVAL;
        while (next_line(&rest, &line)) {
                Span key, value, extra;

                if (!next_word(&line, &key))
                        continue;
                if (span_eq(key, "Node")) {
                        /* "Node 0, zone   Normal": the zone before it is complete */
                        if (in_zone && zone_add(&z, page_size, &sum) < 0)
                                return -EBADMSG;
                        if (sum.zones >= ZONES_MAX)
                                return -EBADMSG;
                        z = (Zone) {};
                        in_zone = true;
                        continue;
                }
                if (!in_zone)
                        continue;
                if (span_eq(key, "protection:")) {
                        if (!parse_protection(line, &z.protection))
                                return -EBADMSG;
                        continue;
                }
                /* "count: 310": a CPU's pageset, one per CPU in the zone */
                if (span_eq(key, "count:")) {
                        uint64_t v;
                        if (!next_word(&line, &value) || next_word(&line, &extra) || !parse_u64(value, &v) ||
                            v > ZONE_PAGES_MAX)
                                return -EBADMSG;
                        z.pcp += v;
                        z.has_pcp = true;
                        if (z.pcp > ZONE_PAGES_MAX)
                                return -EBADMSG;
                        continue;
                }
                /* "min 188": exactly a key and a count. The per-CPU pagesets' "high:" has a
                 * colon and is not a watermark; "pages free" has two words before its count. */
                bool is_min = span_eq(key, "min"), is_low = span_eq(key, "low"), is_high = span_eq(key, "high"),
                     is_managed = span_eq(key, "managed");
                if (!is_min && !is_low && !is_high && !is_managed)
                        continue;
                uint64_t v;
                if (!next_word(&line, &value) || next_word(&line, &extra) || !parse_u64(value, &v) || v > ZONE_PAGES_MAX)
                        return -EBADMSG;
                /* the first of each in a zone: a repeated key is not the kernel's */
                bool *has = is_min ? &z.has_min : is_low ? &z.has_low : is_high ? &z.has_high : &z.has_managed;
                uint64_t *to = is_min ? &z.min : is_low ? &z.low : is_high ? &z.high : &z.managed;
                if (*has)
                        return -EBADMSG;
                *has = true;
                *to = v;
        }
        if (in_zone && zone_add(&z, page_size, &sum) < 0)
                return -EBADMSG;
        if (sum.zones == 0 || sum.high == 0)
                return -EBADMSG;
        *ret = sum;
        return (int) sum.zones;
}
