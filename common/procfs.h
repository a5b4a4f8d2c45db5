/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pure parsers for /proc/vmstat, /proc/meminfo, /proc/pressure/memory and /proc/zoneinfo text: a guest's, as
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

/* ---- /proc/zoneinfo ---- */

/* The zones' min, low and high watermarks summed, bytes, each zone's with its largest lowmem
 * protection (what a user allocation must leave free in it), at most its managed pages: high
 * is the kernel's totalreserve_pages, what MemAvailable leaves out of MemFree. */
typedef struct GuestZoneinfo {
        uint64_t min, low, high; /* GUEST_VALUE_UNKNOWN when not parsed */
        /* bytes on the per-CPU free lists (the pagesets' "count:"), summed: free pages that
         * MemFree, MemAvailable and the balloon's free memory leave out (kernel 5.14 and later
         * let them hold up to the low watermarks); GUEST_VALUE_UNKNOWN when no pageset shows */
        uint64_t pcp;
        unsigned zones;          /* zones summed */
} GuestZoneinfo;

/* The guest's page size, which zoneinfo's counts are in and do not say: x86-64's, the only
 * guests the daemon reads zoneinfo of so far. */
#define GUEST_ZONEINFO_PAGE_SIZE 4096

/* page_size: the guest's, bytes (zoneinfo counts pages and does not say their size). Returns
 * the zones summed, or -EBADMSG when none parsed or anything is not what a kernel writes (a
 * watermark out of order, a count past 4 PiB, a repeated key, more zones than nodes can
 * have): the file is all or nothing, since a sum with a lying zone left out is a wrong sum;
 * -EINVAL for a page size no kernel has. */
int guest_zoneinfo_parse(const char *text, size_t size, uint64_t page_size, GuestZoneinfo *ret);
