/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <unistd.h>
#include <fcntl.h>
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

/* From /proc/PID/statm, not status: the same counters (VmRSS is statm's resident, in KiB
 * instead of pages, both the kernel's sum of the file, anon and shmem RSS counters), but read
 * every tick of every guest, and status makes the kernel format some fifty lines (signal masks,
 * capabilities, cpu lists) for the one that is wanted here. */
int host_process_rss(const char *procfs, pid_t pid, uint64_t *ret) {
        static long page_size;
        char path[PATH_MAX], buf[256];
        unsigned long long size, resident;
        ssize_t n;
        int fd;

        if (page_size <= 0)
                page_size = sysconf(_SC_PAGESIZE);
        if (page_size <= 0)
                return -EINVAL;
        snprintf(path, sizeof(path), "%s/%" PRIi32 "/statm", procfs, (int32_t) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                n = -errno;
        close(fd);
        if (n < 0)
                return (int) n;
        buf[n] = '\0';
        /* A process without memory (a zombie, a kernel thread) has no VmRSS line: all zeros here. */
        if (sscanf(buf, "%llu %llu", &size, &resident) != 2 || size == 0 ||
            resident > UINT64_MAX / (unsigned long long) page_size)
                return -ENODATA;
        *ret = (uint64_t) resident * (uint64_t) page_size;
        return 0;
}
