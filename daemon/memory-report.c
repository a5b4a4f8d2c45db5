/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/memory-report.h"

void memory_report_host_read(const char *procfs, const char *sysfs, MemoryReportHost *ret) {
        *ret = (MemoryReportHost) {};
        (void) host_memory_read(procfs, &ret->memory);
        (void) host_thp_read(sysfs, &ret->thp);
        ret->thp_refills = host_thp_refills_balloon(&ret->thp);
        (void) host_ksm_read(sysfs, &ret->ksm);
}

void memory_report_guest(const Guest *g, bool thp_refills, MemLedger *ret) {
        int fpr = guest_free_page_reporting(g);
        /* The sample is sanitised already (rs_sample_sanitize: a size past twice the guest's
         * is unknown); the ledger clamps what is left to the guest's size. */
        MemLedgerInput in = {
                .max = guest_size_max(g) ?: MEM_LEDGER_UNKNOWN, /* the guest's, not its policy's max */
                .actual = guest_actual(g) ?: MEM_LEDGER_UNKNOWN,
                .guest_total = guest_reported_level(g, RS_LEVEL_TOTAL),
                .guest_free = guest_reported_level(g, RS_LEVEL_FREE),
                .guest_cache = guest_reported_level(g, RS_LEVEL_DISK_CACHES),
                .free_page_reporting = fpr < 0 ? -1 : fpr,
                .rss = guest_host_rss(g),
                .swap = guest_host_swap(g),
                .ksm = guest_host_ksm(g),
                .thp_refills = thp_refills,
        };
        mem_ledger_compute(&in, ret);
}
