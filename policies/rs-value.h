/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one convention every policies/ header shares: a value nobody reported is
 * RS_UNKNOWN (UINT64_MAX), exactly as the QMP and guest-agent layers report it
 * (QMP_VALUE_UNKNOWN, GUEST_VALUE_UNKNOWN), so the daemon copies values across unchanged.
 * Never read RS_UNKNOWN as a number. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define RS_UNKNOWN UINT64_MAX

static inline bool rs_known(uint64_t v) {
        return v != RS_UNKNOWN;
}

/* Guest memory is handed out in pages; rates of page counters are pages per second. */
#define RS_PAGE_SIZE UINT64_C(4096)

/* Fixed size of every human-readable reason the core produces (no allocation). */
#define RS_REASON_MAX 160
