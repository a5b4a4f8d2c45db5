/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What QEMU's balloon and the guest agent report, as the decision core's sample (RsSample,
 * policies/signals.h): the one translation from the transports' types, used by both drivers
 * (daemon/qemu/ reads them over QMP and the agent's socket, daemon/libvirt/ through libvirt,
 * which hands out the same balloon stats and /proc files). Each function fills only the fields
 * it knows into a sample the caller initialised (rs_sample_init()); the guest merges the parts. */
#pragma once

#include <stdbool.h>

#include "common/procfs.h"
#include "policies/signals.h"
#include "qmp/qmp-commands.h"

/* The balloon's stats: false (nothing filled) while the guest's balloon driver has not reported
 * yet, whose zeros would read as a guest without memory. */
bool qmp_sample_from_balloon_stats(RsSample *part, const QmpGuestStats *stats);

/* The guest's /proc/vmstat counters. */
void qmp_sample_from_vmstat(RsSample *part, const GuestVmstat *vmstat);

/* The guest's memory PSI: avg10 in hundredths of a percent (an out-of-range one unknown) and
 * the stall totals. */
void qmp_sample_from_psi(RsSample *part, const GuestPsi *psi);
/* The zones' watermarks summed (RS_LEVEL_WMARK_*), bytes: they seldom move, and a driver
 * carries the last read's into samples while a read fails. */
void qmp_sample_from_zoneinfo(RsSample *part, const GuestZoneinfo *zoneinfo);
/* The per-CPU free lists summed (RS_LEVEL_PCP_FREE), bytes: from this interval's read only,
 * as they change with every page freed or allocated. */
void qmp_sample_from_zoneinfo_lists(RsSample *part, const GuestZoneinfo *zoneinfo);
