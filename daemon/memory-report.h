/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where the host's memory is (issue 38): the daemon's side of the memory ledger
 * (common/memory-ledger.h), filled from what it knows of a guest (its last sanitised sample, its
 * size, QEMU's RSS, swap and KSM) and of the host (/proc/meminfo, transparent huge pages, KSM).
 * The D-Bus method GetMemoryReport (manager-bus-report.c) and the metrics file both come from
 * here, so the two say the same. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "common/memory-ledger.h"
#include "daemon/guest.h"
#include "daemon/host/host-thp.h"
#include "daemon/host/host.h"

typedef struct MemoryReportHost {
        HostMemory memory; /* MemTotal, MemAvailable */
        HostThp thp;
        bool thp_refills;  /* host_thp_refills_balloon() */
        HostKsm ksm;
} MemoryReportHost;

/* Reads the host's figures (what cannot be read stays unknown). procfs and sysfs: "/proc" and
 * "/sys", or a test's. */
void memory_report_host_read(const char *procfs, const char *sysfs, MemoryReportHost *ret);

/* The guest's ledger; thp_refills: the host's khugepaged refills ballooned ranges. */
void memory_report_guest(const Guest *g, bool thp_refills, MemLedger *ret);
