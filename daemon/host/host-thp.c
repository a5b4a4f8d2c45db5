/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/fileio.h"
#include "daemon/host/host-thp.h"

/* Both files are one short line. */
#define THP_FILE_MAX 4096

static int read_small(const char *sysfs, const char *name, char **ret) {
        char path[PATH_MAX];
        size_t size;

        if ((size_t) snprintf(path, sizeof(path), "%s/kernel/mm/transparent_hugepage/%s", sysfs, name) >= sizeof(path))
                return -ENAMETOOLONG;
        return read_file_capped(path, THP_FILE_MAX, ret, &size);
}

/* "always [madvise] never": the selected word is the bracketed one. */
static HostThpMode parse_mode(const char *s) {
        static const struct {
                const char *word;
                HostThpMode mode;
        } words[] = {
                { "[always]", HOST_THP_ALWAYS },
                { "[madvise]", HOST_THP_MADVISE },
                { "[never]", HOST_THP_NEVER },
        };
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (strstr(s, words[i].word))
                        return words[i].mode;
        return HOST_THP_UNKNOWN;
}

/* 0-511 (HPAGE_PMD_NR - 1 on x86-64); anything else is not a value the kernel writes. */
static int parse_max_ptes_none(const char *s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno != 0 || end == s || v < 0 || v > 511)
                return -1;
        while (*end == '\n' || *end == ' ')
                end++;
        return *end == '\0' ? (int) v : -1;
}

int host_thp_read(const char *sysfs, HostThp *ret) {
        _cleanup_free_ char *enabled = NULL, *max_ptes_none = NULL;
        int r, first = 0;

        *ret = (HostThp) { .mode = HOST_THP_UNKNOWN, .max_ptes_none = -1 };

        r = read_small(sysfs, "enabled", &enabled);
        if (r < 0)
                first = r;
        else
                ret->mode = parse_mode(enabled);

        r = read_small(sysfs, "khugepaged/max_ptes_none", &max_ptes_none);
        if (r < 0) {
                if (first == 0)
                        first = r;
        } else
                ret->max_ptes_none = parse_max_ptes_none(max_ptes_none);

        if (first < 0)
                return first;
        return ret->mode == HOST_THP_UNKNOWN || ret->max_ptes_none < 0 ? -EBADMSG : 0;
}

bool host_thp_refills_balloon(const HostThp *t) {
        return (t->mode == HOST_THP_MADVISE || t->mode == HOST_THP_ALWAYS) && t->max_ptes_none > 0;
}

const char *host_thp_mode_to_string(HostThpMode m) {
        static const char *const names[] = {
                [HOST_THP_UNKNOWN] = "unknown",
                [HOST_THP_NEVER] = "never",
                [HOST_THP_MADVISE] = "madvise",
                [HOST_THP_ALWAYS] = "always",
        };
        return m >= 0 && (size_t) m < ARRAY_SIZE(names) ? names[m] : NULL;
}
