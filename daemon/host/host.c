/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The "KEY: N kB" line of a status file, in bytes: 0, or -ENODATA when it is missing or bad. */
static int status_kib(const char *status, const char *key, uint64_t *ret) {
        size_t n = strlen(key);
        for (const char *line = status; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                unsigned long long kib;
                if (strncmp(line, key, n) != 0 || line[n] != ':')
                        continue;
                if (sscanf(line + n + 1, " %llu kB", &kib) != 1 || kib > UINT64_MAX / 1024)
                        return -ENODATA;
                *ret = (uint64_t) kib * 1024;
                return 0;
        }
        return -ENODATA;
}

/* The number that is a small file's whole text ("N"), or follows KEY on one of its lines
 * ("KEY N"): UINT64_MAX when the file or the line is not there or is not a number. */
static uint64_t number_in_file(const char *path, const char *key) {
        _cleanup_free_ char *text = NULL;
        size_t size, n = key ? strlen(key) : 0;

        if (read_file_capped(path, PROC_FILE_MAX, &text, &size) < 0)
                return UINT64_MAX;
        for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                unsigned long long v;
                if (key && (strncmp(line, key, n) != 0 || line[n] != ' '))
                        continue;
                if (sscanf(line + n, " %llu", &v) != 1 || v >= UINT64_MAX)
                        return UINT64_MAX;
                return (uint64_t) v;
        }
        return UINT64_MAX;
}

/* Pages in bytes, UINT64_MAX for unknown or too many. */
static uint64_t pages_to_bytes(uint64_t pages) {
        long page = sysconf(_SC_PAGESIZE);
        if (pages == UINT64_MAX || page <= 0 || pages > (UINT64_MAX - 1) / (uint64_t) page)
                return UINT64_MAX;
        return pages * (uint64_t) page;
}

static int read_status(const char *procfs, pid_t pid, char **ret) {
        char path[PATH_MAX];
        size_t size;
        int r;

        snprintf(path, sizeof(path), "%s/%" PRIi32 "/status", procfs, (int32_t) pid);
        r = read_file_capped(path, PROC_FILE_MAX, ret, &size);
        return r == -ENOENT ? -ESRCH : r;
}

int host_process_memory(const char *procfs, pid_t pid, HostProcessMemory *ret) {
        _cleanup_free_ char *status = NULL;
        char path[PATH_MAX];
        int r;

        *ret = (HostProcessMemory) { UINT64_MAX, UINT64_MAX, UINT64_MAX };
        r = read_status(procfs, pid, &status);
        if (r < 0)
                return r;
        r = status_kib(status, "VmRSS", &ret->rss);
        if (r < 0)
                return r;
        if (status_kib(status, "VmSwap", &ret->swap) < 0)
                ret->swap = UINT64_MAX;
        /* Newer kernels have the count in ksm_stat; from 5.19 (Debian 12's 6.1 too) it is a file of
         * its own, which ksm_stat has not replaced everywhere: the line first, then the file. */
        snprintf(path, sizeof(path), "%s/%" PRIi32 "/ksm_stat", procfs, (int32_t) pid);
        uint64_t pages = number_in_file(path, "ksm_merging_pages");
        if (pages == UINT64_MAX) {
                snprintf(path, sizeof(path), "%s/%" PRIi32 "/ksm_merging_pages", procfs, (int32_t) pid);
                pages = number_in_file(path, NULL);
        }
        ret->ksm = pages_to_bytes(pages);
        return 0;
}

int host_ksm_read(const char *sysfs, HostKsm *ret) {
        char path[PATH_MAX];

        *ret = (HostKsm) { -1, UINT64_MAX, UINT64_MAX };
        snprintf(path, sizeof(path), "%s/kernel/mm/ksm/run", sysfs);
        uint64_t run = number_in_file(path, NULL);
        if (run == UINT64_MAX)
                return -ENODATA;
        ret->run = run <= 2 ? (int) run : -1;
        snprintf(path, sizeof(path), "%s/kernel/mm/ksm/pages_shared", sysfs);
        ret->pages_shared = pages_to_bytes(number_in_file(path, NULL));
        snprintf(path, sizeof(path), "%s/kernel/mm/ksm/pages_sharing", sysfs);
        ret->pages_sharing = pages_to_bytes(number_in_file(path, NULL));
        return 0;
}
