/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/fileio.h"
#include "daemon/host/host.h"
#include "common/procfs.h"

/* /proc/meminfo is a few KiB; a cap keeps a strange procfs from costing memory. */
#define PROC_FILE_MAX (256 * 1024)

static uint64_t psi_to_hundredths(const GuestPsiLine *l) {
        if (!l->known || !(l->avg10 >= 0.0) || l->avg10 > 100.0)
                return UINT64_MAX;
        return (uint64_t) (l->avg10 * 100.0 + 0.5);
}

int host_memory_read(const char *procfs, HostMemory *ret) {
        _cleanup_free_ char *meminfo = NULL, *pressure = NULL;
        char path[PATH_MAX];
        size_t size;
        GuestMeminfo mi;
        GuestPsi psi;
        int r;

        *ret = (HostMemory) { UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX };

        /* PSI may be disabled in the host kernel (psi=0): then the levels stay unknown. */
        snprintf(path, sizeof(path), "%s/pressure/memory", procfs);
        if (read_file_capped(path, PROC_FILE_MAX, &pressure, &size) >= 0) {
                (void) guest_psi_parse(pressure, size, &psi);
                ret->psi_some_avg10 = psi_to_hundredths(&psi.some);
                ret->psi_full_avg10 = psi_to_hundredths(&psi.full);
        }

        snprintf(path, sizeof(path), "%s/meminfo", procfs);
        r = read_file_capped(path, PROC_FILE_MAX, &meminfo, &size);
        if (r < 0)
                return r;
        (void) guest_meminfo_parse(meminfo, size, &mi);
        ret->mem_total = mi.value[GUEST_MEMINFO_MEM_TOTAL];
        ret->mem_available = mi.value[GUEST_MEMINFO_MEM_AVAILABLE];
        return guest_value_is_known(ret->mem_available) ? 0 : -ENODATA;
}

int host_process_rss(const char *procfs, pid_t pid, uint64_t *ret) {
        _cleanup_free_ char *status = NULL;
        char path[PATH_MAX];
        size_t size;
        int r;

        snprintf(path, sizeof(path), "%s/%" PRIi32 "/status", procfs, (int32_t) pid);
        r = read_file_capped(path, PROC_FILE_MAX, &status, &size);
        if (r == -ENOENT)
                return -ESRCH;
        if (r < 0)
                return r;

        for (const char *line = status; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                unsigned long long kib;
                if (strncmp(line, "VmRSS:", 6) != 0)
                        continue;
                if (sscanf(line + 6, " %llu kB", &kib) != 1 || kib > UINT64_MAX / 1024)
                        return -ENODATA;
                *ret = (uint64_t) kib * 1024;
                return 0;
        }
        return -ENODATA;
}
