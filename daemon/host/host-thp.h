/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The host's transparent huge page settings, as they bear on what a balloon gives back.
 *
 * QEMU madvises guest RAM MADV_HUGEPAGE, so unless transparent huge pages are off, the host's
 * khugepaged scans it and collapses a 2 MiB range into a huge page when at most
 * khugepaged/max_ptes_none of its 512 pages are missing, allocating the missing ones. A page
 * the balloon returned is a missing page: at the kernel's default (511) a range that keeps one
 * resident page is filled whole, and the host pays again for memory the guest still has
 * ballooned. rightsized says so at start; it does not change the
 * setting, which is the host's for every process. */
#pragma once

#include <stdbool.h>

typedef enum HostThpMode {
        HOST_THP_UNKNOWN,
        HOST_THP_NEVER,
        HOST_THP_MADVISE,
        HOST_THP_ALWAYS,
} HostThpMode;

typedef struct HostThp {
        HostThpMode mode;   /* transparent_hugepage/enabled, the bracketed word */
        int max_ptes_none;  /* transparent_hugepage/khugepaged/max_ptes_none, -1 when unknown */
} HostThp;

/* Reads SYSFS/kernel/mm/transparent_hugepage (sysfs: "/sys", or a test directory). What it
 * cannot read stays unknown; returns 0 when both were read, -errno of the first failure else. */
int host_thp_read(const char *sysfs, HostThp *ret);

/* khugepaged allocates pages the balloon returned again: huge pages on for QEMU's RAM and
 * max_ptes_none above 0. False when either is unknown. */
bool host_thp_refills_balloon(const HostThp *t);

const char *host_thp_mode_to_string(HostThpMode m);
