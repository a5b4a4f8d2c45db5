/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pure parsers for /proc/vmstat, /proc/meminfo and /proc/pressure/memory text: a guest's, as
 * read through its agent (qmp/, daemon/libvirt/), and the host's own (daemon/host/host.c). The text is untrusted: any bytes, any length, no NUL
 * terminator needed. Nothing here allocates or fails hard: lines that do not parse are
 * skipped and their counters stay unknown (never zero). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GUEST_VALUE_UNKNOWN UINT64_MAX
static inline bool guest_value_is_known(uint64_t v) {
        return v != GUEST_VALUE_UNKNOWN;
}

/* ---- /proc/vmstat ---- */

typedef enum GuestVmstatCounter {
        GUEST_VMSTAT_WORKINGSET_REFAULT_ANON,
        GUEST_VMSTAT_WORKINGSET_REFAULT_FILE,
        GUEST_VMSTAT_WORKINGSET_ACTIVATE_ANON,
        GUEST_VMSTAT_WORKINGSET_ACTIVATE_FILE,
        GUEST_VMSTAT_WORKINGSET_RESTORE_ANON,
        GUEST_VMSTAT_WORKINGSET_RESTORE_FILE,
        GUEST_VMSTAT_PGSCAN_KSWAPD,
        GUEST_VMSTAT_PGSCAN_DIRECT,
        GUEST_VMSTAT_PGSTEAL_KSWAPD,
        GUEST_VMSTAT_PGSTEAL_DIRECT,
        GUEST_VMSTAT_PSWPIN,
        GUEST_VMSTAT_PSWPOUT,
        GUEST_VMSTAT_PGMAJFAULT,
        GUEST_VMSTAT_PGFAULT,
        GUEST_VMSTAT_ALLOCSTALL, /* sum of allocstall_<zone> (or the old single "allocstall") */
        GUEST_VMSTAT_OOM_KILL,
        GUEST_VMSTAT_BALLOON_INFLATE,
        GUEST_VMSTAT_BALLOON_DEFLATE,
        _GUEST_VMSTAT_MAX,
} GuestVmstatCounter;

typedef struct GuestVmstat {
        uint64_t value[_GUEST_VMSTAT_MAX]; /* GUEST_VALUE_UNKNOWN when absent or unparsable */
} GuestVmstat;

/* The /proc/vmstat key ("allocstall" for the summed counter). */
const char *guest_vmstat_counter_name(GuestVmstatCounter counter);
/* Returns how many counters are known (0 for garbage). Kernels before 5.9 only track file
 * pages in workingset_refault/activate/restore: those count as the _file counters. */
int guest_vmstat_parse(const char *text, size_t size, GuestVmstat *ret);

/* ---- /proc/meminfo (values converted to bytes) ---- */

typedef enum GuestMeminfoField {
        GUEST_MEMINFO_MEM_TOTAL,
        GUEST_MEMINFO_MEM_FREE,
        GUEST_MEMINFO_MEM_AVAILABLE,
        GUEST_MEMINFO_BUFFERS,
        GUEST_MEMINFO_CACHED,
        GUEST_MEMINFO_SWAP_CACHED,
        GUEST_MEMINFO_ACTIVE_ANON,
        GUEST_MEMINFO_INACTIVE_ANON,
        GUEST_MEMINFO_ACTIVE_FILE,
        GUEST_MEMINFO_INACTIVE_FILE,
        GUEST_MEMINFO_UNEVICTABLE,
        GUEST_MEMINFO_MLOCKED,
        GUEST_MEMINFO_SWAP_TOTAL,
        GUEST_MEMINFO_SWAP_FREE,
        GUEST_MEMINFO_DIRTY,
        GUEST_MEMINFO_WRITEBACK,
        GUEST_MEMINFO_ANON_PAGES,
        GUEST_MEMINFO_MAPPED,
        GUEST_MEMINFO_SHMEM,
        GUEST_MEMINFO_KRECLAIMABLE,
        GUEST_MEMINFO_SRECLAIMABLE,
        GUEST_MEMINFO_SUNRECLAIM,
        GUEST_MEMINFO_COMMITTED_AS,
        _GUEST_MEMINFO_MAX,
} GuestMeminfoField;

typedef struct GuestMeminfo {
        uint64_t value[_GUEST_MEMINFO_MAX]; /* bytes, or GUEST_VALUE_UNKNOWN */
} GuestMeminfo;

const char *guest_meminfo_field_name(GuestMeminfoField field); /* "MemTotal", ... */
/* Returns how many fields are known. Only "<Key>: <number> kB" lines count. */
int guest_meminfo_parse(const char *text, size_t size, GuestMeminfo *ret);

/* ---- /proc/pressure/memory ---- */

typedef struct GuestPsiLine {
        bool known;        /* the line was present with all four values */
        double avg10;      /* percent of time stalled over 10 s, 60 s, 300 s */
        double avg60;
        double avg300;
        uint64_t total_usec; /* cumulative stall time */
} GuestPsiLine;

typedef struct GuestPsi {
        GuestPsiLine some; /* at least one task stalled */
        GuestPsiLine full; /* all non-idle tasks stalled */
} GuestPsi;

/* Returns 0 when the "some" line parsed, -EBADMSG otherwise (ret is filled either way;
 * "full" may be unknown on its own, as for the CPU resource). */
int guest_psi_parse(const char *text, size_t size, GuestPsi *ret);
