/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What rightsized reads about the host: MemAvailable and memory PSI from /proc, and the resident
 * set of the QEMU process behind a QMP socket (its pid from SO_PEERCRED, socket-trust.h), which is
 * what the host really spends on a guest (free page reporting makes it smaller than the guest's
 * configured size). */
#pragma once

#include <stdint.h>
#include <sys/types.h>

typedef struct HostMemory {
        uint64_t mem_total;      /* bytes, or UINT64_MAX */
        uint64_t mem_available;  /* bytes, or UINT64_MAX */
        uint64_t psi_some_avg10; /* hundredths of a percent, or UINT64_MAX */
        uint64_t psi_full_avg10;
} HostMemory;

/* Fills every field it can (unknown ones UINT64_MAX). procfs: "/proc", or a test directory.
 * Returns 0 when MemAvailable was read, -errno otherwise. */
int host_memory_read(const char *procfs, HostMemory *ret);

/* VmRSS of a process in bytes (statm's resident): -ESRCH when it is gone, -ENODATA when it has no memory. */
int host_process_rss(const char *procfs, pid_t pid, uint64_t *ret);

/* What the host spends on a QEMU process: its resident set, its pages in the host's swap (guest
 * memory the host pushed out instead of getting back), and its pages KSM merged with others. */
typedef struct HostProcessMemory {
        uint64_t rss;  /* VmRSS, bytes */
        uint64_t swap; /* VmSwap, bytes; UINT64_MAX when the kernel has no such line */
        uint64_t ksm;  /* KSM-merged pages, bytes: the ksm_merging_pages line of /proc/PID/ksm_stat
                        * (newer kernels), or the file /proc/PID/ksm_merging_pages (from 5.19:
                        * Debian 12's 6.1, whose ksm_stat has only ksm_rmap_items);
                        * UINT64_MAX when neither is there */
} HostProcessMemory;
/* Reads PROCFS/PID/status (and the KSM count); the errors of host_process_rss(). */
int host_process_memory(const char *procfs, pid_t pid, HostProcessMemory *ret);

/* KSM on the whole host, from SYSFS/kernel/mm/ksm (absent without CONFIG_KSM). */
typedef struct HostKsm {
        int run;                /* 0 stopped, 1 running, 2 unmerging; -1 unknown */
        uint64_t pages_shared;  /* KSM pages in use, each standing for many (bytes) */
        uint64_t pages_sharing; /* the sites sharing them: memory saved (bytes) */
} HostKsm;
/* 0, or -errno when `run` cannot be read (the rest then unknown: UINT64_MAX). */
int host_ksm_read(const char *sysfs, HostKsm *ret);
