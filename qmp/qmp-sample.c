/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "qmp/qmp-sample.h"

#include "common/macro.h"

bool qmp_sample_from_balloon_stats(RsSample *part, const QmpGuestStats *st) {
        static const struct {
                QmpStat stat;
                RsCounter counter;
        } counters[] = {
                { QMP_STAT_MAJOR_FAULTS, RS_COUNTER_MAJOR_FAULTS },
                { QMP_STAT_MINOR_FAULTS, RS_COUNTER_MINOR_FAULTS },
                { QMP_STAT_SWAP_IN, RS_COUNTER_SWAP_IN },
                { QMP_STAT_SWAP_OUT, RS_COUNTER_SWAP_OUT },
                { QMP_STAT_OOM_KILLS, RS_COUNTER_OOM_KILLS },
                { QMP_STAT_ALLOC_STALLS, RS_COUNTER_ALLOC_STALLS },
                { QMP_STAT_ASYNC_SCANS, RS_COUNTER_ASYNC_SCANS },
                { QMP_STAT_DIRECT_SCANS, RS_COUNTER_DIRECT_SCANS },
                { QMP_STAT_ASYNC_RECLAIMS, RS_COUNTER_ASYNC_RECLAIMS },
                { QMP_STAT_DIRECT_RECLAIMS, RS_COUNTER_DIRECT_RECLAIMS },
        };
        if (st->last_update == 0)
                return false;
        part->level[RS_LEVEL_TOTAL] = st->value[QMP_STAT_TOTAL_MEMORY];
        part->level[RS_LEVEL_FREE] = st->value[QMP_STAT_FREE_MEMORY];
        part->level[RS_LEVEL_AVAILABLE] = st->value[QMP_STAT_AVAILABLE_MEMORY];
        part->level[RS_LEVEL_DISK_CACHES] = st->value[QMP_STAT_DISK_CACHES];
        for (size_t i = 0; i < ARRAY_SIZE(counters); i++)
                part->counter[counters[i].counter] = st->value[counters[i].stat];
        return true;
}

void qmp_sample_from_vmstat(RsSample *part, const GuestVmstat *v) {
        static const struct {
                GuestVmstatCounter from;
                RsCounter to;
        } map[] = {
                { GUEST_VMSTAT_WORKINGSET_REFAULT_ANON, RS_COUNTER_REFAULT_ANON },
                { GUEST_VMSTAT_WORKINGSET_REFAULT_FILE, RS_COUNTER_REFAULT_FILE },
                { GUEST_VMSTAT_WORKINGSET_ACTIVATE_ANON, RS_COUNTER_ACTIVATE_ANON },
                { GUEST_VMSTAT_WORKINGSET_ACTIVATE_FILE, RS_COUNTER_ACTIVATE_FILE },
                { GUEST_VMSTAT_PGSCAN_KSWAPD, RS_COUNTER_PGSCAN_KSWAPD },
                { GUEST_VMSTAT_PGSCAN_DIRECT, RS_COUNTER_PGSCAN_DIRECT },
                { GUEST_VMSTAT_PGSTEAL_KSWAPD, RS_COUNTER_PGSTEAL_KSWAPD },
                { GUEST_VMSTAT_PGSTEAL_DIRECT, RS_COUNTER_PGSTEAL_DIRECT },
                { GUEST_VMSTAT_PSWPIN, RS_COUNTER_PSWPIN },
                { GUEST_VMSTAT_PSWPOUT, RS_COUNTER_PSWPOUT },
                { GUEST_VMSTAT_PGMAJFAULT, RS_COUNTER_PGMAJFAULT },
                { GUEST_VMSTAT_ALLOCSTALL, RS_COUNTER_ALLOCSTALL },
                { GUEST_VMSTAT_OOM_KILL, RS_COUNTER_OOM_KILL },
        };
        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                part->counter[map[i].to] = v->value[map[i].from];
}

static uint64_t psi_hundredths(const GuestPsiLine *l) {
        if (!l->known || !(l->avg10 >= 0.0) || l->avg10 > 100.0)
                return RS_UNKNOWN;
        return (uint64_t) (l->avg10 * 100.0 + 0.5);
}

void qmp_sample_from_psi(RsSample *part, const GuestPsi *psi) {
        part->level[RS_LEVEL_PSI_SOME_AVG10] = psi_hundredths(&psi->some);
        part->level[RS_LEVEL_PSI_FULL_AVG10] = psi_hundredths(&psi->full);
        if (psi->some.known)
                part->counter[RS_COUNTER_PSI_SOME_TOTAL] = psi->some.total_usec;
        if (psi->full.known)
                part->counter[RS_COUNTER_PSI_FULL_TOTAL] = psi->full.total_usec;
}

void qmp_sample_from_zoneinfo(RsSample *part, const GuestZoneinfo *z) {
        part->level[RS_LEVEL_WMARK_MIN] = z->min;
        part->level[RS_LEVEL_WMARK_LOW] = z->low;
        part->level[RS_LEVEL_WMARK_HIGH] = z->high;
}

void qmp_sample_from_zoneinfo_lists(RsSample *part, const GuestZoneinfo *z) {
        part->level[RS_LEVEL_PCP_FREE] = z->pcp;
}
