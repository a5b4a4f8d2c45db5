/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/manager-bus-recommend.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "common/size.h"
#include "daemon/bus-caller.h"
#include "daemon/bus-record.h"
#include "daemon/log.h"
#include "daemon/manager-bus-report.h"
#include "daemon/manager-bus.h"

#define RULE_MAX 256

/* What the guest boots with now: its persistent definition's size where it has one (libvirt's
 * <currentMemory>), else the boot memory it runs with. *ret_from names which. */
static uint64_t boot_size_now(Manager *m, Guest *g, uint64_t *ret_memory, const char **ret_from, int *ret_apply) {
        uint64_t current, memory;
        int r = manager_get_boot_size(m, g, &current, &memory);
        *ret_apply = r;
        if (r >= 0) {
                *ret_from = "persistent currentMemory";
                *ret_memory = memory;
                return current;
        }
        *ret_from = "boot memory";
        *ret_memory = guest_boot_memory(g);
        return guest_boot_memory(g);
}

/* Why --apply cannot write this guest's next boot, or NULL when it can. */
static const char *apply_refusal(Guest *g, int boot_size_r) {
        if (guest_fault_kind(g) == GUEST_FAULT_SKIPPED)
                return "rightsize leaves this domain alone (skipped)";
        if (boot_size_r == -EOPNOTSUPP)
                return guest_source(g) == GUEST_SOURCE_LIBVIRT
                               ? "a transient libvirt domain has no persistent definition to write"
                               : "a QMP guest has no persistent definition to write (its size is QEMU's -m: change it "
                                 "where the guest is started)";
        if (boot_size_r < 0)
                return "libvirt is not reachable now";
        return NULL;
}

static int append_recommendation(Manager *m, sd_bus_message *reply, Guest *g) {
        BootRecommendation rec;
        char boot_rule[RULE_MAX], floor_rule[RULE_MAX], max_rule[RULE_MAX];
        const char *from;
        uint64_t memory;
        int apply_r, r;

        r = guest_boot_recommendation(g, &rec);
        bool kept = r != -ENODATA;
        if (!kept)
                rec = (BootRecommendation) { .boot = BOOT_HISTORY_UNKNOWN, .floor = BOOT_HISTORY_UNKNOWN,
                                             .max = BOOT_HISTORY_UNKNOWN, .p50 = BOOT_HISTORY_UNKNOWN,
                                             .p95 = BOOT_HISTORY_UNKNOWN, .peak = BOOT_HISTORY_UNKNOWN,
                                             .stall_mean = NAN, .stall_p95 = NAN };
        else if (r < 0)
                return r;
        uint64_t now = boot_size_now(m, g, &memory, &from, &apply_r);
        const char *refusal = apply_refusal(g, apply_r);
        (void) boot_rule_text(&rec, "boot", boot_rule, sizeof(boot_rule));
        (void) boot_rule_text(&rec, "floor", floor_rule, sizeof(floor_rule));
        (void) boot_rule_text(&rec, "max", max_rule, sizeof(max_rule));

        /* Sizes of 0 are unknown here as well (no boot size read). */
#define SIZE(v) ((v) == BOOT_HISTORY_UNKNOWN || (v) == 0 ? UINT64_MAX : (v))
        r = sd_bus_message_open_container(reply, 'a', "{sv}");
        if (r < 0)
                return r;
        BusRecord b = { .m = reply };
        bus_record_str(&b, "name", guest_name(g));
        bus_record_u64(&b, "points", rec.points);
        bus_record_bool(&b, "enough-history", rec.enough);
        bus_record_u64(&b, "since", SIZE(rec.since_usec));
        bus_record_u64(&b, "span", rec.span_usec);
        bus_record_u64(&b, "estimate-p50", SIZE(rec.p50));
        bus_record_u64(&b, "estimate-p95", SIZE(rec.p95));
        bus_record_u64(&b, "estimate-peak", SIZE(rec.peak));
        bus_record_u64(&b, "boot", SIZE(rec.boot));
        bus_record_str(&b, "boot-rule", kept ? boot_rule : "no history kept (no state directory)");
        bus_record_u64(&b, "floor", SIZE(rec.floor));
        bus_record_str(&b, "floor-rule", floor_rule);
        bus_record_u64(&b, "max", SIZE(rec.max));
        bus_record_str(&b, "max-rule", max_rule);
        bus_record_u64(&b, "boot-now", SIZE(now));
        bus_record_str(&b, "boot-now-from", from);
        bus_record_u64(&b, "memory", SIZE(memory));
        bus_record_double(&b, "stall-mean", rec.stall_mean);
        bus_record_double(&b, "stall-p95", rec.stall_p95);
        bus_record_bool(&b, "can-apply", !refusal);
        bus_record_str(&b, "apply-refused", refusal);
        if (rec.boot != BOOT_HISTORY_UNKNOWN && now > 0)
                bus_record_i64(&b, "gain", (int64_t) now - (int64_t) rec.boot);
#undef SIZE
        return b.r < 0 ? b.r : sd_bus_message_close_container(reply);
}

int manager_bus_method_get_recommendation(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        const char *name;
        Guest *one = NULL;
        int r;

        if ((r = manager_bus_check_read(m, msg, error)) < 0 || (r = sd_bus_message_read(msg, "s", &name)) < 0)
                return r;
        if (name[0] && !(one = manager_bus_find_guest(m, name, error)))
                return -ENOENT;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = sd_bus_message_open_container(reply, 'a', "a{sv}");
        for (size_t i = 0; r >= 0 && i < m->n_guests; i++)
                if (!one || m->guests[i] == one)
                        r = append_recommendation(m, reply, m->guests[i]);
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

static int apply_recommendation(sd_bus_message *msg, Manager *m, sd_bus_error *error) {
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX], caller[BUS_CALLER_DESCRIPTION_MAX];
        BootRecommendation rec;
        const char *name;
        uint64_t expected, current, memory;
        Guest *g;
        int r;

        if ((r = sd_bus_message_read(msg, "st", &name, &expected)) < 0)
                return r;
        if (!(g = manager_bus_find_guest(m, name, error)))
                return -ENOENT;
        r = manager_get_boot_size(m, g, &current, &memory);
        const char *refusal = apply_refusal(g, r);
        if (refusal)
                return sd_bus_error_setf(error, r == -ENOTCONN || (r < 0 && r != -EOPNOTSUPP)
                                                        ? RS_BUS_ERROR_LIBVIRT_UNAVAILABLE : SD_BUS_ERROR_NOT_SUPPORTED,
                                         "%s: %s", name, refusal);
        r = guest_boot_recommendation(g, &rec);
        if (r < 0 && r != -ENODATA)
                return r;
        if (r == -ENODATA || rec.boot == BOOT_HISTORY_UNKNOWN)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s: no history yet, nothing to apply", name);
        /* What the operator confirmed is what is written: a point that came in meanwhile moved it. */
        if (expected != 0 && expected != rec.boot)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "%s: the recommendation is now %s, not the %s confirmed: look again", name,
                                         format_size(b1, sizeof(b1), rec.boot), format_size(b2, sizeof(b2), expected));
        uint64_t bytes = MIN(rec.boot, memory);
        r = manager_set_boot_size(m, g, bytes);
        if (r == -ENOTCONN)
                return sd_bus_error_set(error, RS_BUS_ERROR_LIBVIRT_UNAVAILABLE, "Not connected to libvirt: try again");
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Writing the next boot's size of '%s' failed: %s",
                                         name, strerror(-r));
        log_named_guest_notice(guest_name(g), NULL, "Next boot's size set to %s (was %s), as recommended (%s)",
                               format_size(b1, sizeof(b1), bytes), format_size(b2, sizeof(b2), current),
                               bus_caller_describe(msg, caller, sizeof(caller)));
        return sd_bus_reply_method_return(msg, "t", bytes);
}

int manager_bus_method_apply_recommendation(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return manager_bus_change_method(msg, userdata, RS_POLKIT_ACTION_MANAGE, apply_recommendation, error);
}
