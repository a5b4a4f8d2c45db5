/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `rightsizectl report`'s "where the host's memory is": the records of GetMemoryReport
 * (daemon/dbus-api.md), one a guest and one the host's sum, as rightsizectl keeps, prints and
 * turns into JSON. The daemon reckons them (common/memory-ledger.h); this only shows them. Pure:
 * no D-Bus, no I/O beyond the FILE it is handed. */
#pragma once

#include <json-c/json.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctl/ctl-format.h"

typedef struct CtlMemory {
        char *name;             /* the guest's; NULL in the host's record */
        char *thp_enabled;      /* host: transparent_hugepage/enabled */
        char *why;              /* the reasons' keys, comma-separated; NULL: none */
        /* the ledger (CTL_UNKNOWN: not known) */
        uint64_t total, used, cache, free, balloon, rss, swap, ksm, held, host_returned, reported, unreturned,
                refilled;
        uint64_t thp_collapsed, thp_filled; /* hugepage-repair=: ranges put back, holes filled (bytes) */
        uint64_t max, actual;   /* guest */
        /* host */
        uint64_t guests, guests_without_rss, mem_total, mem_available, ksm_run, ksm_pages_shared, ksm_pages_sharing,
                thp_max_ptes_none;
        int free_page_reporting, thp_refills; /* -1: not known */
} CtlMemory;

/* Every key of both records (the host's and a guest's), in output order; the record's
 * dictionary carries those that apply. `why` (as) is apart: ctl_memory_add_why(). */
extern const CtlField ctl_memory_fields[];
extern const size_t ctl_n_memory_fields;
const CtlField *ctl_memory_field_find(const char *key);

void ctl_memory_init(CtlMemory *m);
void ctl_memory_done(CtlMemory *m);
/* Values are stored with ctl_field_set_*() (ctl-format.h). */
/* One reason's key, appended to `why`. 0 or -ENOMEM. */
int ctl_memory_add_why(CtlMemory *m, const char *key);

/* The reasons' keys in words ("no-free-page-reporting,host-swap" -> "no free page reporting,
 * host swap"), unknown keys as they are (sanitised when printed). buf at least CTL_WHY_MAX. */
#define CTL_WHY_MAX 256
const char *ctl_memory_why_words(const char *why, char *buf, size_t len);

/* The table NAME MAX BALLOON USED CACHE FREE RSS SWAP KSM FREE-BACK FREE-HELD WHY, a row a guest
 * and the host's sum, then the host's lines (its memory, KSM, huge pages) and what the host
 * never got back, with the guests each reason holds for. */
int ctl_print_memory_report(FILE *f, const CtlMemory *host, const CtlMemory *guests, size_t n);

/* Every key of ctl_memory_fields that applies (null when unknown), "why" an array. */
json_object *ctl_memory_to_json(const CtlMemory *m, bool host);
