/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GetMemoryReport: the memory ledger (daemon/memory-report.h) of each guest and their sum, with
 * the host's own figures. Thin: the arithmetic is common/memory-ledger.c's. */
#include <errno.h>

#include "common/macro.h"
#include "common/utf8.h"
#include "daemon/manager-bus-report.h"
#include "daemon/memory-report.h"

/* Appends stop at the first error, which stays in r; an unknown figure is left out, never 0. */
typedef struct Dict {
        sd_bus_message *m;
        int r;
} Dict;

static void dict_u64(Dict *d, const char *key, uint64_t v) {
        if (d->r >= 0 && v != UINT64_MAX)
                d->r = sd_bus_message_append(d->m, "{sv}", key, "t", v);
}

static void dict_flags(Dict *d, unsigned flags) {
        const char *keys[8];
        size_t n = mem_ledger_why_keys(flags, keys, ARRAY_SIZE(keys));

        if (d->r >= 0)
                d->r = sd_bus_message_open_container(d->m, 'e', "sv");
        if (d->r >= 0)
                d->r = sd_bus_message_append(d->m, "s", "why");
        if (d->r >= 0)
                d->r = sd_bus_message_open_container(d->m, 'v', "as");
        if (d->r >= 0)
                d->r = sd_bus_message_open_container(d->m, 'a', "s");
        for (size_t i = 0; d->r >= 0 && i < n; i++)
                d->r = sd_bus_message_append(d->m, "s", keys[i]);
        for (unsigned depth = 0; d->r >= 0 && depth < 3; depth++)
                d->r = sd_bus_message_close_container(d->m);
}

static void dict_ledger(Dict *d, const MemLedger *l) {
        dict_u64(d, "total", l->total);
        dict_u64(d, "used", l->used);
        dict_u64(d, "cache", l->cache);
        dict_u64(d, "free", l->free);
        dict_u64(d, "balloon", l->balloon);
        dict_u64(d, "rss", l->rss);
        dict_u64(d, "swap", l->swap);
        dict_u64(d, "ksm", l->ksm);
        dict_u64(d, "held", l->held);
        dict_u64(d, "host-returned", l->host_returned);
        dict_u64(d, "reported", l->reported);
        dict_u64(d, "unreturned", l->unreturned);
        dict_u64(d, "refilled", l->refilled);
        dict_flags(d, l->flags);
}

int manager_bus_method_get_memory_report(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        MemoryReportHost host;
        MemLedgerSum sum;
        int r;

        r = manager_bus_check_read(m, msg, error);
        if (r < 0)
                return r;
        memory_report_host_read("/proc", "/sys", &host);
        mem_ledger_sum_init(&sum);

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r < 0)
                return r;
        /* The guests first, summed on the way; the host's dictionary is written after them in the
         * reply's order (a{sv} then aa{sv}), so they are reckoned twice: cheap, a few guests. */
        uint64_t collapsed = 0, filled = 0;
        for (size_t i = 0; i < m->n_guests; i++) {
                MemLedger l;
                memory_report_guest(m->guests[i], host.thp_refills, &l);
                mem_ledger_sum_add(&sum, &l);
                collapsed = mem_ledger_add(collapsed, guest_counters(m->guests[i])->hugepages_collapsed);
                filled = mem_ledger_add(filled, guest_counters(m->guests[i])->hugepage_holes_filled);
        }
        Dict d = { reply, sd_bus_message_open_container(reply, 'a', "{sv}") };
        dict_u64(&d, "guests", sum.guests);
        dict_u64(&d, "guests-without-rss", sum.unknown_held);
        dict_ledger(&d, &sum.sum);
        dict_u64(&d, "mem-total", host.memory.mem_total);
        dict_u64(&d, "mem-available", host.memory.mem_available);
        if (host.ksm.run >= 0)
                dict_u64(&d, "ksm-run", (uint64_t) host.ksm.run);
        dict_u64(&d, "ksm-pages-shared", host.ksm.pages_shared);
        dict_u64(&d, "ksm-pages-sharing", host.ksm.pages_sharing);
        if (d.r >= 0 && host.thp.mode != HOST_THP_UNKNOWN)
                d.r = sd_bus_message_append(reply, "{sv}", "thp-enabled", "s", host_thp_mode_to_string(host.thp.mode));
        if (host.thp.max_ptes_none >= 0)
                dict_u64(&d, "thp-max-ptes-none", (uint64_t) host.thp.max_ptes_none);
        if (d.r >= 0)
                d.r = sd_bus_message_append(reply, "{sv}", "thp-refills", "b", (int) host.thp_refills);
        dict_u64(&d, "thp-collapsed", collapsed);
        dict_u64(&d, "thp-filled", filled);
        r = d.r < 0 ? d.r : sd_bus_message_close_container(reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < m->n_guests; i++) {
                const Guest *g = m->guests[i];
                _cleanup_free_ char *escaped = NULL;
                const char *name = guest_name(g);
                MemLedger l;

                /* A name that is not UTF-8 (a socket file's) goes out escaped, as ListGuests has it. */
                if (name && !utf8_is_valid(name) && !(name = escaped = utf8_escape_invalid(name)))
                        return -ENOMEM;
                memory_report_guest(g, host.thp_refills, &l);
                Dict gd = { reply, sd_bus_message_open_container(reply, 'a', "{sv}") };
                if (gd.r >= 0 && name)
                        gd.r = sd_bus_message_append(reply, "{sv}", "name", "s", name);
                if (gd.r >= 0) {
                        int fpr = guest_free_page_reporting(g);
                        if (fpr >= 0)
                                gd.r = sd_bus_message_append(reply, "{sv}", "free-page-reporting", "b", fpr);
                }
                dict_u64(&gd, "max", guest_size_max(g) ?: UINT64_MAX);
                dict_u64(&gd, "actual", guest_actual(g) ?: UINT64_MAX);
                dict_ledger(&gd, &l);
                dict_u64(&gd, "thp-collapsed", guest_counters(g)->hugepages_collapsed);
                dict_u64(&gd, "thp-filled", guest_counters(g)->hugepage_holes_filled);
                r = gd.r < 0 ? gd.r : sd_bus_message_close_container(reply);
        }
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}
