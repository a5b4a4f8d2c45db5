/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/hugepage-repair.h"

#include "policies/rs-value.h"

void rs_hugepage_repair_init(RsHugepageRepair *r) {
        *r = (RsHugepageRepair) { .size = RS_UNKNOWN, .steady_since = 0, .last_pass = RS_UNKNOWN };
}

bool rs_hugepage_repair_sample(RsHugepageRepair *r, uint64_t actual, uint64_t now) {
        if (!rs_known(actual))
                return false;
        if (!rs_known(r->size) || actual + RS_HUGEPAGE_REPAIR_TOLERANCE < r->size ||
            actual > r->size + RS_HUGEPAGE_REPAIR_TOLERANCE) {
                if (rs_known(r->size) && actual < r->size)
                        r->went_down = true;
                r->size = actual;
                r->steady_since = now;
                return false;
        }
        if (!r->went_down || now - r->steady_since < RS_HUGEPAGE_REPAIR_SETTLE_USEC)
                return false;
        if (rs_known(r->last_pass) && now - r->last_pass < RS_HUGEPAGE_REPAIR_MIN_GAP_USEC)
                return false;
        r->went_down = false;
        r->last_pass = now;
        return true;
}

bool rs_hugepage_range_worth(unsigned resident, double percent) {
        if (percent <= 0 || resident == 0)
                return false;
        return resident * 100.0 >= percent * RS_HUGEPAGE_PAGES;
}
