/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/fileio.h"
#include "daemon/host/host-hugepages.h"
#include "policies/hugepage-repair.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

#define HUGE_SIZE (RS_HUGEPAGE_PAGES * 4096ULL)
/* QEMU has a few hundred mappings; a cap keeps a strange procfs from costing memory. */
#define MAPS_FILE_MAX (4 * 1024 * 1024)
#define MAX_MAPPINGS 64
/* Ranges whose page map entries one pread() takes (4 KiB of entries a range). */
#define BATCH_RANGES 64

typedef struct Mapping {
        uint64_t start, end; /* huge-page aligned: the part of the mapping a collapse can use */
} Mapping;

struct HostHugepagePass {
        int pidfd;
        int pagemap_fd;
        double percent;
        Mapping mappings[MAX_MAPPINGS];
        size_t n_mappings;
        size_t cur_mapping;
        uint64_t cur;        /* the next range to scan */
        HostHugepageStats stats;
        uint64_t entries[BATCH_RANGES * RS_HUGEPAGE_PAGES];
};

/* The anonymous private read-write mappings of at least HOST_HUGEPAGE_MIN_MAPPING in a maps
 * file: "start-end perms offset dev inode [path]", no path and inode 0 for anonymous memory. */
static void find_guest_ram(HostHugepagePass *p, const char *maps) {
        for (const char *line = maps; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
                unsigned long long start, end, inode;
                char buf[512], perms[8], path[2] = "";
                size_t len = strcspn(line, "\n");

                /* One line at a time: sscanf would read on into the next one for a missing path. */
                if (len >= sizeof(buf))
                        continue; /* a path that long is not anonymous memory */
                memcpy(buf, line, len);
                buf[len] = '\0';
                if (sscanf(buf, "%llx-%llx %7s %*s %*s %llu %1s", &start, &end, perms, &inode, path) < 4)
                        continue;
                if (strcmp(perms, "rw-p") != 0 || inode != 0 || path[0] || end <= start ||
                    end - start < HOST_HUGEPAGE_MIN_MAPPING || p->n_mappings >= MAX_MAPPINGS)
                        continue;
                uint64_t a = (start + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1), b = end & ~(HUGE_SIZE - 1);
                if (b <= a)
                        continue;
                p->mappings[p->n_mappings++] = (Mapping) { a, b };
                p->stats.ranges += (unsigned) ((b - a) / HUGE_SIZE);
        }
}

int host_hugepage_pass_new(const char *procfs, pid_t pid, double percent, HostHugepagePass **ret) {
        _cleanup_free_ char *maps = NULL;
        char path[PATH_MAX];
        size_t size;
        int r;

        HostHugepagePass *p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->pidfd = p->pagemap_fd = -1;
        p->percent = percent;

        /* The process first: if pid is reused for another one while the maps are read, every
         * collapse goes to the one this pidfd names, which is gone (ESRCH ends the pass). */
        p->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (p->pidfd < 0) {
                r = -errno;
                host_hugepage_pass_free(p);
                return r;
        }

        snprintf(path, sizeof(path), "%s/%" PRIi32 "/maps", procfs, (int32_t) pid);
        r = read_file_capped(path, MAPS_FILE_MAX, &maps, &size);
        if (r < 0) {
                host_hugepage_pass_free(p);
                return r == -ENOENT ? -ESRCH : r;
        }
        find_guest_ram(p, maps);
        if (p->n_mappings == 0) {
                host_hugepage_pass_free(p);
                return -ENOENT;
        }
        snprintf(path, sizeof(path), "%s/%" PRIi32 "/pagemap", procfs, (int32_t) pid);
        p->pagemap_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (p->pagemap_fd < 0) {
                r = errno == ENOENT ? -ESRCH : -errno;
                host_hugepage_pass_free(p);
                return r;
        }
        p->cur = p->mappings[0].start;
        *ret = p;
        return 0;
}

/* Reads the page map entries of n ranges from addr into p->entries: 0, or -errno. */
static int read_entries(HostHugepagePass *p, uint64_t addr, size_t n) {
        size_t want = n * RS_HUGEPAGE_PAGES * sizeof(uint64_t);
        ssize_t got = pread(p->pagemap_fd, p->entries, want, (off_t) (addr / 4096 * sizeof(uint64_t)));
        if (got < 0)
                return -errno;
        return (size_t) got == want ? 0 : -EIO; /* the mapping went away under us */
}

/* Resident pages (page map bit 63) of the i-th range read. */
static unsigned resident_pages(const HostHugepagePass *p, size_t i) {
        unsigned resident = 0;
        for (size_t k = i * RS_HUGEPAGE_PAGES; k < (i + 1) * RS_HUGEPAGE_PAGES; k++)
                resident += (unsigned) (p->entries[k] >> 63);
        return resident;
}

int host_hugepage_pass_step(HostHugepagePass *p, unsigned max_ranges, unsigned max_collapses) {
        unsigned ranges = 0, calls = 0;

        while (p->cur_mapping < p->n_mappings) {
                const Mapping *m = &p->mappings[p->cur_mapping];
                if (p->cur >= m->end) {
                        if (++p->cur_mapping < p->n_mappings)
                                p->cur = p->mappings[p->cur_mapping].start;
                        continue;
                }
                if (ranges >= max_ranges || calls >= max_collapses)
                        return 1;
                size_t n = MIN((size_t) ((m->end - p->cur) / HUGE_SIZE), (size_t) MIN(max_ranges - ranges, BATCH_RANGES));
                int r = read_entries(p, p->cur, n);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < n && calls < max_collapses; i++) {
                        uint64_t addr = p->cur;
                        unsigned resident = resident_pages(p, i);
                        p->cur += HUGE_SIZE;
                        ranges++;
                        p->stats.scanned++;
                        if (!rs_hugepage_range_worth(resident, p->percent))
                                continue;
                        struct iovec iov = { .iov_base = (void *) (uintptr_t) addr, .iov_len = HUGE_SIZE };
                        calls++;
                        if (syscall(SYS_process_madvise, p->pidfd, &iov, 1, MADV_COLLAPSE, 0) < 0) {
                                /* No rights, or no such process: the pass cannot go on. Anything
                                 * else (a busy or pinned page, no free huge page now, a mapping the
                                 * kernel will not give huge pages) is this range's. */
                                if (errno == EPERM || errno == EACCES || errno == ESRCH || errno == ENOSYS)
                                        return -errno;
                                p->stats.failed++;
                                continue;
                        }
                        p->stats.collapsed++;
                        p->stats.filled += (RS_HUGEPAGE_PAGES - resident) * 4096ULL;
                }
        }
        return 0;
}

const HostHugepageStats *host_hugepage_pass_stats(const HostHugepagePass *p) {
        return &p->stats;
}

HostHugepagePass *host_hugepage_pass_free(HostHugepagePass *p) {
        if (!p)
                return NULL;
        if (p->pidfd >= 0)
                close(p->pidfd);
        if (p->pagemap_fd >= 0)
                close(p->pagemap_fd);
        free(p);
        return NULL;
}
