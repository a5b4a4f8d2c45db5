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
