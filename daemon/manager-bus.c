/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.rightsize.Manager1 (daemon/dbus-api.md). Every method checks its caller itself: reads
 * need root or the read group; changes need root, or polkit's yes for their action
 * (daemon/bus-polkit.c, asked without blocking). The logic lives in manager.c and guest.c. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/bus-api.h"
#include "common/event-util.h"
#include "common/macro.h"
#include "common/size.h"
#include "common/time-util.h"
#include "daemon/bus-caller.h"
#include "daemon/bus-record.h"
#include "daemon/bus-polkit.h"
#include "daemon/log.h"
#include "daemon/manager-bus.h"
#include "daemon/manager-bus-report.h"
#include "daemon/manager-bus-recommend.h"
#include "policies/policy.h"


/* The polkit actions (etc/org.rightsize.policy): what changes guests, and re-reading the
 * configuration, which an administrator may want to grant apart (to a deploy tool, say). */

/* The queries waiting for polkit. One manager per process, and Manager (manager.h) has no field
 * for it, so it lives here, from manager_bus_open() to manager_bus_close(). */

/* ---- access ---- */

static bool creds_in_group(sd_bus_creds *creds, gid_t gid) {
        const gid_t *gids;
        gid_t g;
        int n;

        if (sd_bus_creds_get_egid(creds, &g) >= 0 && g == gid)
                return true;
        n = sd_bus_creds_get_supplementary_gids(creds, &gids);
        for (int i = 0; i < n; i++)
                if (gids[i] == gid)
                        return true;
        return false;
}

int manager_bus_check_read(Manager *m, sd_bus_message *msg, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t uid;
        int r;

        r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID | SD_BUS_CREDS_EGID | SD_BUS_CREDS_SUPPLEMENTARY_GIDS |
                                                   SD_BUS_CREDS_AUGMENT,
                                      &creds);
        if (r < 0)
                return r;
        r = sd_bus_creds_get_euid(creds, &uid);
        if (r < 0)
                return r;
        if (uid == 0)
                return 0;
        gid_t gid;
        if (m->config->read_group &&
            group_cache_get(&m->read_group_cache, m->config->read_group, now_usec(CLOCK_MONOTONIC), &gid) >= 0 &&
            creds_in_group(creds, gid))
                return 0;
        /* The group by name: the one thing a refused operator needs to know. */
        if (m->config->read_group)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Reading rightsized's guests requires root or membership of the group \"%s\"",
                                         m->config->read_group);
        return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED,
                                "Reading rightsized's guests requires root (read-group= is empty)");
}

/* A method that changes something: `change` runs once the caller may (root, or polkit's yes for
 * `action`: daemon/bus-polkit.c), and knows nothing of polkit. While polkit is being asked, the
 * method returns 1 at once, changing nothing and replying nothing; sd-bus hands it the same call
 * again once polkit answered, and then the verdict counts. */
int manager_bus_change_method(sd_bus_message *msg, Manager *m, const char *action, change_fn change, sd_bus_error *error) {
        int r;

        if (!m->polkit_registry)
                return sd_bus_error_set(error, SD_BUS_ERROR_ACCESS_DENIED, "The bus is closing");
        r = bus_polkit_verify(m->polkit_registry, msg, action, error);
        if (r <= 0)
                return r < 0 ? r : 1;
        return change(msg, m, error);
}

Guest *manager_bus_find_guest(Manager *m, const char *name, sd_bus_error *error) {
        Guest *g = manager_find_guest(m, name);
        /* A name that is not UTF-8 (a socket file's) is listed escaped: found by that too. */
        for (size_t i = 0; !g && i < m->n_guests; i++) {
                _cleanup_free_ char *tmp = NULL;
                const char *listed = bus_string(guest_name(m->guests[i]), &tmp);
                if (listed && tmp && strcmp(listed, name) == 0)
                        g = m->guests[i];
        }
        if (!g)
                sd_bus_error_setf(error, RS_BUS_ERROR_NO_SUCH_GUEST, "No guest named '%s'", name);
        return g;
}

/* The guest a read method names in its one argument, once the caller may read: 0, or <0 with the
 * error set (NoSuchGuest, access denied) or the message unreadable. */
static int read_named_guest(Manager *m, sd_bus_message *msg, sd_bus_error *error, Guest **ret) {
        const char *name;
        int r;

        r = manager_bus_check_read(m, msg, error);
        if (r < 0)
                return r;
        r = sd_bus_message_read(msg, "s", &name);
        if (r < 0)
                return r;
        *ret = manager_bus_find_guest(m, name, error);
        return *ret ? 0 : -ENOENT;
}

/* ---- guest records ---- */

static uint64_t known_or_unknown(uint64_t v) {
        return v == 0 ? UINT64_MAX : v;
}

static int append_guest(sd_bus_message *reply, Guest *g) {
        const RsEstimate *e = guest_estimate(g);
        const RsPolicy *p = guest_policy(g);
        int fpr = guest_free_page_reporting(g);
        BusRecord rec = { reply, sd_bus_message_open_container(reply, 'a', "{sv}") };

        bus_record_str(&rec, "name", guest_name(g));
        bus_record_str(&rec, "uuid", guest_uuid(g));
        bus_record_str(&rec, "source", guest_source_string(guest_source(g)));
        bus_record_str(&rec, "policy", p->name);
        bus_record_str(&rec, "mode", rs_mode_to_string(p->mode));
        bus_record_str(&rec, "state", guest_state_string(g));
        bus_record_str(&rec, "tier", guest_tier_string(g));
        bus_record_u64(&rec, "target", known_or_unknown(guest_target(g)));
        bus_record_u64(&rec, "actual", known_or_unknown(guest_actual(g)));
        bus_record_u64(&rec, "floor", known_or_unknown(guest_floor(g)));
        bus_record_u64(&rec, "max", known_or_unknown(guest_max(g)));
        bus_record_u64(&rec, "host-rss", guest_host_rss(g));
        bus_record_u64(&rec, "host-swap", guest_host_swap(g));
        bus_record_u64(&rec, "host-ksm", guest_host_ksm(g));
        /* What the guest last said of its memory, sanitised: sizes past twice its own are unknown. */
        bus_record_u64(&rec, "guest-total", guest_reported_level(g, RS_LEVEL_TOTAL));
        bus_record_u64(&rec, "guest-free", guest_reported_level(g, RS_LEVEL_FREE));
        bus_record_u64(&rec, "guest-cache", guest_reported_level(g, RS_LEVEL_DISK_CACHES));
        bus_record_u64(&rec, "reclaimable", guest_reclaimable(g));
        bus_record_u64(&rec, "reclaimed", guest_reclaimed(g)); /* 0 is a value: nothing taken */
        bus_record_u64(&rec, "probe-cycles", guest_counters(g)->probe_cycles);
        bus_record_u64(&rec, "probe-refaults", guest_counters(g)->probe_refaults);
        bus_record_u64(&rec, "reprobes-skipped", guest_reprobes_skipped(g));
        bus_record_bool(&rec, "agent", guest_agent_answers(g));
        bus_record_str(&rec, "guest-os", guest_os_id(g));
        bus_record_bool(&rec, "paused", guest_is_paused(g));
        bus_record_str(&rec, "reason", guest_reason(g));
        bus_record_str(&rec, "fault", guest_fault(g));
        bus_record_double(&rec, "refault-rate", guest_refault_rate(g));
        bus_record_double(&rec, "major-fault-rate", guest_major_fault_rate(g));
        bus_record_u64(&rec, "updated", known_or_unknown(guest_updated_realtime(g)));
        if (fpr >= 0)
                bus_record_bool(&rec, "free-page-reporting", fpr);
        if (guest_vmem_id(g))
                bus_record_u64(&rec, "virtio-mem-size", guest_vmem_size(g));
        if (e) {
                bus_record_double(&rec, "confidence", e->confidence);
                bus_record_u64(&rec, "estimate", e->estimate);
                bus_record_u64(&rec, "estimate-lower", e->lower);
                bus_record_u64(&rec, "estimate-upper", e->upper);
                bus_record_u64(&rec, "scan-onset", e->scan_onset);
        }
        return rec.r < 0 ? rec.r : sd_bus_message_close_container(reply);
}

/* ---- methods ---- */

/* A method's reply that is one array of `contents`: opened here (<0: it could not be), filled by
 * the caller while r stays >= 0, then closed and sent by reply_close_send(reply, r), which
 * returns r if it is an error. */
static int reply_open_array(sd_bus_message *msg, const char *contents, sd_bus_message **ret) {
        int r = sd_bus_message_new_method_return(msg, ret);
        return r < 0 ? r : sd_bus_message_open_container(*ret, 'a', contents);
}

static int reply_close_send(sd_bus_message *reply, int r) {
        if (r >= 0)
                r = sd_bus_message_close_container(reply);
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

static int method_list_guests(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Manager *m = userdata;
        int r;

        r = manager_bus_check_read(m, msg, error);
        if (r < 0)
                return r;
        r = reply_open_array(msg, "a{sv}", &reply);
        for (size_t i = 0; r >= 0 && i < m->n_guests; i++)
                r = append_guest(reply, m->guests[i]);
        return reply_close_send(reply, r);
}

static int method_get_guest(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        Guest *g;
        int r;

        r = read_named_guest(userdata, msg, error, &g);
        if (r < 0)
                return r;
        if ((r = sd_bus_message_new_method_return(msg, &reply)) < 0 || (r = append_guest(reply, g)) < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_get_history(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ GuestHistoryPoint *points = NULL;
        Guest *g;
        size_t n;
        int r;

        r = read_named_guest(userdata, msg, error, &g);
        if (r < 0)
                return r;
        points = calloc(GUEST_HISTORY_MAX, sizeof(*points));
        if (!points)
                return -ENOMEM;
        n = guest_history(g, points, GUEST_HISTORY_MAX);
        r = reply_open_array(msg, "(tttt)", &reply);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = sd_bus_message_append(reply, "(tttt)", points[i].realtime_usec, points[i].target, points[i].actual,
                                          points[i].estimate);
        return reply_close_send(reply, r);
}

/* Why an operator's floor or max was refused, with the range it has to be in: "floor above
 * max?" leaves them guessing which limit they hit. */
static int set_range_error(const Guest *g, const char *key, const char *value, uint64_t bytes, sd_bus_error *error) {
        const RsPolicy *p = guest_policy(g);
        char a[FORMAT_SIZE_MAX], b[FORMAT_SIZE_MAX], c[FORMAT_SIZE_MAX];

        if (bytes < RS_POLICY_FLOOR_MIN_BYTES)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "%s=%s for '%s': below %s, the smallest a guest may be given", key, value,
                                         guest_name(g), format_size(a, sizeof(a), RS_POLICY_FLOOR_MIN_BYTES));
        if (key[0] == 'f' && p->max_bytes != 0 && bytes > p->max_bytes)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "floor=%s for '%s': above its max, %s (the floor must be %s to %s)", value,
                                         guest_name(g), format_size(a, sizeof(a), p->max_bytes),
                                         format_size(b, sizeof(b), RS_POLICY_FLOOR_MIN_BYTES),
                                         format_size(c, sizeof(c), p->max_bytes));
        if (key[0] == 'm' && bytes < p->floor_bytes)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "max=%s for '%s': below its floor, %s (set the floor lower first)", value,
                                         guest_name(g), format_size(a, sizeof(a), p->floor_bytes));
        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "%s=%s is not valid for '%s'", key, value,
                                 guest_name(g));
}

static int set_guest(sd_bus_message *msg, Manager *m, sd_bus_error *error) {
        const char *name, *key, *value;
        uint64_t bytes;
        Guest *g;
        int r;

        r = sd_bus_message_read(msg, "sss", &name, &key, &value);
        if (r < 0)
                return r;
        if (!(g = manager_bus_find_guest(m, name, error)))
                return -ENOENT;

        if (strcmp(key, "policy") == 0) {
                r = manager_set_guest_policy(m, g, value);
                if (r == -ENOENT)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "No policy named '%s'", value);
                if (r < 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                                 "Policy '%s' cannot be applied to '%s'", value, name);
        } else if (strcmp(key, "floor") == 0 || strcmp(key, "max") == 0) {
                if (parse_size(value, &bytes) < 0)
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Invalid size for %s: '%s'", key,
                                                 value);
                /* One of the two changes; the other stays as the operator left it. */
                uint64_t floor, max;
                guest_overrides(g, &floor, &max);
                bool is_floor = key[0] == 'f';
                r = guest_set_overrides(g, is_floor ? bytes : floor, is_floor ? max : bytes);
                if (r < 0)
                        return set_range_error(g, key, value, bytes, error);
        } else
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Unknown key '%s' (expected policy, floor or max)", key);
        char caller[BUS_CALLER_DESCRIPTION_MAX];
        log_guest_info(g, "Operator set %s=%s (%s)", key, value, bus_caller_describe(msg, caller, sizeof(caller)));
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_set_guest(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return manager_bus_change_method(msg, userdata, RS_POLKIT_ACTION_MANAGE, set_guest, error);
}

static int pause_resume(sd_bus_message *msg, Manager *m, bool pause, sd_bus_error *error) {
        char caller[BUS_CALLER_DESCRIPTION_MAX];
        const char *name;
        int r;

        r = sd_bus_message_read(msg, "s", &name);
        if (r < 0)
                return r;
        bus_caller_describe(msg, caller, sizeof(caller));
        if (name[0] == '\0') {
                log_info("Operator %s every guest (%s)", pause ? "paused" : "resumed", caller);
                for (size_t i = 0; i < m->n_guests; i++)
                        guest_set_paused(m->guests[i], pause);
        } else {
                Guest *g = manager_bus_find_guest(m, name, error);
                if (!g)
                        return -ENOENT;
                log_guest_info(g, "Operator %s the guest (%s)", pause ? "paused" : "resumed", caller);
                guest_set_paused(g, pause);
        }
        return sd_bus_reply_method_return(msg, NULL);
}

static int pause_guests(sd_bus_message *msg, Manager *m, sd_bus_error *error) {
        return pause_resume(msg, m, true, error);
}

static int resume_guests(sd_bus_message *msg, Manager *m, sd_bus_error *error) {
        return pause_resume(msg, m, false, error);
}

static int method_pause(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return manager_bus_change_method(msg, userdata, RS_POLKIT_ACTION_MANAGE, pause_guests, error);
}

static int method_resume(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return manager_bus_change_method(msg, userdata, RS_POLKIT_ACTION_MANAGE, resume_guests, error);
}

static int request_probe(sd_bus_message *msg, Manager *m, sd_bus_error *error) {
        const char *name;
        Guest *g;
        int r;

        r = sd_bus_message_read(msg, "s", &name);
        if (r < 0)
                return r;
        if (!(g = manager_bus_find_guest(m, name, error)))
                return -ENOENT;
        /* The core's refusal, with its reason, is the caller's answer. */
        r = guest_request_probe(g);
        if (r == -EPERM)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Guest '%s' is paused: resume it first", name);
        if (r == -EOPNOTSUPP)
                return sd_bus_error_setf(error, SD_BUS_ERROR_NOT_SUPPORTED,
                                         "Guest '%s' cannot be probed: its policy only observes, its controller "
                                         "(controller = cost) never probes, or it reports no statistics to see "
                                         "pressure with", name);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED,
                                         "Guest '%s' is %s: cannot probe it now (it is being given memory, is "
                                         "connecting, or has no baseline to judge a probe against yet)", name,
                                         guest_state_string(g));
        char caller[BUS_CALLER_DESCRIPTION_MAX];
        log_guest_info(g, "Operator asked for a probe (%s)", bus_caller_describe(msg, caller, sizeof(caller)));
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_probe(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return manager_bus_change_method(msg, userdata, RS_POLKIT_ACTION_MANAGE, request_probe, error);
}

static int reload(sd_bus_message *msg, Manager *m, sd_bus_error *error) {
        _cleanup_free_ char *message = NULL;
        int r;

        char caller[BUS_CALLER_DESCRIPTION_MAX];
        log_info("Operator asked for a reload (%s)", bus_caller_describe(msg, caller, sizeof(caller)));
        r = manager_reload(m, &message);
        if (r < 0)
                return sd_bus_error_setf(error, RS_BUS_ERROR_RELOAD_FAILED, "%s", message ?: strerror(-r));
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_reload(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return manager_bus_change_method(msg, userdata, RS_POLKIT_ACTION_RELOAD, reload, error);
}

static int set_domain_policy(sd_bus_message *msg, Manager *m, sd_bus_error *error) {
        const char *domain, *policy;
        RsPolicy p;
        int r;

        r = sd_bus_message_read(msg, "ss", &domain, &policy);
        if (r < 0)
                return r;
        if (!manager_has_libvirt(m))
                return sd_bus_error_set(error, RS_BUS_ERROR_LIBVIRT_UNAVAILABLE,
                                        "libvirt guests are disabled ([libvirt] enabled=no)");
        if (domain[0] == '\0')
                return sd_bus_error_set(error, SD_BUS_ERROR_INVALID_ARGS, "Empty domain name");
        /* The daemon must know the policy it is asked to apply. */
        if (policy[0] != '\0' && manager_resolve_policy(m, policy, domain, NULL, &p) < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "No policy named '%s'", policy);
        r = manager_set_domain_policy(m, domain, policy[0] ? policy : NULL);
        if (r == -ENOENT)
                return sd_bus_error_setf(error, RS_BUS_ERROR_NO_SUCH_DOMAIN, "No libvirt domain named '%s'", domain);
        if (r == -EINVAL)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Invalid policy name '%s'", policy);
        if (r == -ENOTCONN)
                return sd_bus_error_set(error, RS_BUS_ERROR_LIBVIRT_UNAVAILABLE, "Not connected to libvirt: try again");
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_FAILED, "Writing the metadata of '%s' failed: %s",
                                         domain, strerror(-r));
        char caller[BUS_CALLER_DESCRIPTION_MAX];
        log_info("Operator %s libvirt domain %s%s%s (%s)", policy[0] ? "enabled" : "disabled", domain,
                 policy[0] ? " with policy " : "", policy, bus_caller_describe(msg, caller, sizeof(caller)));
        return sd_bus_reply_method_return(msg, NULL);
}

static int method_set_domain_policy(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return manager_bus_change_method(msg, userdata, RS_POLKIT_ACTION_MANAGE, set_domain_policy, error);
}

/* ---- properties ---- */

static int property_get(sd_bus *bus, const char *path, const char *interface, const char *property,
                        sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        sd_bus_message *msg = sd_bus_get_current_message(bus);
        int r;
        (void) path;
        (void) interface;

        if (msg && (r = manager_bus_check_read(m, msg, error)) < 0)
                return r;
        if (strcmp(property, "GuestsManaged") == 0)
                return sd_bus_message_append(reply, "u", manager_guests_managed(m));
        if (strcmp(property, "ReclaimedBytes") == 0)
                return sd_bus_message_append(reply, "t", manager_reclaimed(m));
        if (strcmp(property, "ApiOutages") == 0)
                return sd_bus_message_append(reply, "u", m->n_api_outages);
        if (strcmp(property, "LastApiOutage") == 0) {
                _cleanup_free_ char *tmp = NULL;
                const char *reason = bus_string(m->last_api_outage.reason, &tmp);
                return sd_bus_message_append(reply, "(tts)", m->last_api_outage.start, m->last_api_outage.end,
                                             reason ?: "");
        }
        if (strcmp(property, "RefusedGuests") == 0) {
                r = sd_bus_message_open_container(reply, 'a', "(sss)");
                for (size_t i = 0; r >= 0 && i < m->n_refused; i++) {
                        _cleanup_free_ char *t1 = NULL, *t2 = NULL, *t3 = NULL;
                        const RefusedGuest *g = &m->refused[i];
                        const char *name = bus_string(g->name, &t1), *where = bus_string(g->where, &t2),
                                   *owner = bus_string(g->owner_where, &t3);
                        if (!name || !where || !owner)
                                return -ENOMEM;
                        r = sd_bus_message_append(reply, "(sss)", name, where, owner);
                }
                return r < 0 ? r : sd_bus_message_close_container(reply);
        }
        return sd_bus_message_append(reply, "s", RIGHTSIZE_VERSION);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_PROPERTY("Version", "s", property_get, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("GuestsManaged", "u", property_get, 0, 0),
        SD_BUS_PROPERTY("ReclaimedBytes", "t", property_get, 0, 0),
        /* What an outage of this API itself was: told once the API is back. */
        SD_BUS_PROPERTY("ApiOutages", "u", property_get, 0, 0),
        SD_BUS_PROPERTY("LastApiOutage", "(tts)", property_get, 0, 0),
        /* Guests turned away because another has their name: (name, where, who has the name). */
        SD_BUS_PROPERTY("RefusedGuests", "a(sss)", property_get, 0, 0),
        SD_BUS_METHOD("ListGuests", "", "aa{sv}", method_list_guests, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetGuest", "s", "a{sv}", method_get_guest, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetHistory", "s", "a(tttt)", method_get_history, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetMemoryReport", "", "a{sv}aa{sv}", manager_bus_method_get_memory_report,
                      SD_BUS_VTABLE_UNPRIVILEGED),
        /* UNPRIVILEGED on the changes too: without it sd-bus itself refuses every caller without
         * CAP_SYS_ADMIN before the handler runs, so polkit would never be asked and the caller
         * would not learn which action it lacks. The handlers check every caller. */
        SD_BUS_METHOD("SetGuest", "sss", "", method_set_guest, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Pause", "s", "", method_pause, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Resume", "s", "", method_resume, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Probe", "s", "", method_probe, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Reload", "", "", method_reload, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("SetDomainPolicy", "ss", "", method_set_domain_policy, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("GetRecommendation", "s", "aa{sv}", manager_bus_method_get_recommendation,
                      SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("ApplyRecommendation", "st", "t", manager_bus_method_apply_recommendation,
                      SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_SIGNAL("EstimateChanged", "sttt", 0),
        SD_BUS_VTABLE_END,
};

/* ---- the connection: retried until the name is ours ---- */

/* A failed bus is retried soon (a policy file just installed, dbus-daemon starting late), then
 * less often, doubling up to a minute: each refused RequestName costs dbus-daemon a line in the
 * system log, and a minute is as long as an operator who fixed it should wait. After a
 * disconnection the first retry comes after a second, about what restarting dbus-daemon takes.
 * `systemctl reload rightsized` retries at once (manager_bus_retry_now()). */
#define BUS_RETRY_FIRST_USEC (10 * USEC_PER_SEC)
#define BUS_RETRY_MAX_USEC (60 * USEC_PER_SEC)
#define BUS_RECONNECT_USEC (1 * USEC_PER_SEC)

/* From the D-Bus specification: RequestName's flag and replies. */
#define DBUS_NAME_FLAG_DO_NOT_QUEUE 4U
#define DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER 1U
#define DBUS_REQUEST_NAME_REPLY_EXISTS 3U
#define DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER 4U

#define HINT_POLICY                                                                                            \
        "Install " RS_BUS_NAME ".conf where dbus-daemon reads it (/usr/share/dbus-1/system.d/ or "           \
        "/etc/dbus-1/system.d/), then reload dbus (systemctl reload dbus)."

static int on_bus_retry(sd_event_source *s, uint64_t usec, void *userdata);
static void bus_failed(Manager *m, const char *hint, const char *format, ...) _printf_(3, 4);

/* The connection, its object and polkit queries; the retry timer stays. */
static void bus_disconnect(Manager *m) {
        m->bus_owned = false;
        m->bus_slot = sd_bus_slot_unref(m->bus_slot);
        /* Before the bus goes: cancels the calls to polkit still in flight and drops the callers'
         * messages they hold (those callers get no reply; their bus tells them we left). */
        m->polkit_registry = bus_polkit_registry_free(m->polkit_registry);
        if (m->bus) {
                (void) sd_bus_flush(m->bus);
                m->bus = sd_bus_close_unref(m->bus);
        }
}

static bool bus_retry_pending(Manager *m) {
        return event_source_is_armed(m->bus_retry) > 0;
}

static int bus_schedule_retry(Manager *m, uint64_t delay) {
        return event_reset_time_relative(m->event, &m->bus_retry, CLOCK_MONOTONIC, delay, 0, on_bus_retry, m,
                                         "bus-retry");
}

/* The API is down: says why (an error at the start of an outage), shows it in STATUS= and
 * schedules the next try. Once per attempt: a refused name and the disconnection that may follow
 * are one failure. */
static void bus_failed(Manager *m, const char *hint, const char *format, ...) {
        char reason[sizeof(m->bus_error)];
        va_list ap;
        int r;

        if (bus_retry_pending(m))
                return;
        m->bus_owned = false;
        va_start(ap, format);
        vsnprintf(reason, sizeof(reason), format, ap);
        va_end(ap);

        uint64_t delay = m->bus_retry_usec ?: BUS_RETRY_FIRST_USEC;
        if (m->api_outage.start == 0) {
                m->api_outage = (ApiOutage) { .start = now_usec(CLOCK_REALTIME) };
                snprintf(m->api_outage.reason, sizeof(m->api_outage.reason), "%s", reason);
                log_error("D-Bus API unavailable: %s.%s%s rightsizectl cannot reach the daemon meanwhile; guests "
                          "are still managed, and the bus is retried (first in %llu s, then up to every %llu s).",
                          reason, hint[0] ? " " : "", hint, (unsigned long long) (delay / USEC_PER_SEC),
                          (unsigned long long) (BUS_RETRY_MAX_USEC / USEC_PER_SEC));
        } else if (strcmp(reason, m->bus_error) != 0)
                log_warning("D-Bus API still unavailable: %s.%s%s", reason, hint[0] ? " " : "", hint);
        else
                log_debug("D-Bus API still unavailable: %s; retrying in %llu s", reason,
                          (unsigned long long) (delay / USEC_PER_SEC));
        snprintf(m->bus_error, sizeof(m->bus_error), "%s", reason);

        r = bus_schedule_retry(m, delay);
        if (r < 0)
                log_error_errno(r, "Cannot schedule the next D-Bus connection attempt: %m");
        m->bus_retry_usec = MIN(MAX(delay * 2, BUS_RETRY_FIRST_USEC), BUS_RETRY_MAX_USEC);
        manager_api_changed(m);
}

static void bus_name_acquired(Manager *m) {
        char start[64] = "?";
        struct tm tm;

        m->bus_owned = true;
        m->bus_retry_usec = 0;
        if (m->bus_retry)
                (void) sd_event_source_set_enabled(m->bus_retry, SD_EVENT_OFF);
        if (m->api_outage.start == 0) {
                log_debug("Owning %s on the system bus", RS_BUS_NAME);
                return;
        }
        m->api_outage.end = now_usec(CLOCK_REALTIME);
        time_t t = (time_t) (m->api_outage.start / USEC_PER_SEC);
        if (localtime_r(&t, &tm))
                strftime(start, sizeof(start), "%Y-%m-%d %H:%M:%S", &tm);
        log_info("D-Bus API available again: %s is ours, after an outage since %s (%s)", RS_BUS_NAME, start,
                 m->api_outage.reason);
        m->last_api_outage = m->api_outage;
        m->api_outage = (ApiOutage) {};
        m->n_api_outages++;
        m->bus_error[0] = '\0';
        manager_api_changed(m);
}

/* Another process owns the name: another rightsized (the state directory's lock keeps out one on
 * the same state directory; this is one on another). Two daemons would fight over every balloon:
 * this one goes, at the start before it touches a guest, later as a stop does (the guests left at
 * shutdown-action, their state saved). */
static void bus_name_taken(Manager *m) {
        m->bus_owned = false;
        m->bus_name_taken = true;
        log_error("Another process owns %s on the system bus: another rightsized is running. Exiting: two "
                  "daemons would manage the same guests.", RS_BUS_NAME);
        if (m->started) {
                m->exit_error = -EEXIST;
                manager_shutdown(m);
        }
}

/* RequestName's answer: an error (e is set) or a reply code (in reply). */
static void bus_name_result(Manager *m, const sd_bus_error *e, sd_bus_message *reply) {
        uint32_t code = 0;
        int r;

        if (sd_bus_error_is_set(e)) {
                if (sd_bus_error_has_name(e, SD_BUS_ERROR_ACCESS_DENIED))
                        bus_failed(m, HINT_POLICY, "the bus policy does not let rightsized own %s", RS_BUS_NAME);
                else
                        bus_failed(m, "", "cannot own %s: %s", RS_BUS_NAME, e->message ?: e->name);
                return;
        }
        r = sd_bus_message_read(reply, "u", &code);
        if (r < 0)
                bus_failed(m, "", "cannot own %s: unreadable reply: %s", RS_BUS_NAME, strerror(-r));
        else if (code == DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER || code == DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER)
                bus_name_acquired(m);
        else if (code == DBUS_REQUEST_NAME_REPLY_EXISTS)
                bus_name_taken(m);
        else
                bus_failed(m, "", "cannot own %s: RequestName answered %u", RS_BUS_NAME, code);
}

static int on_request_name(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error _unused_) {
        bus_name_result(userdata, sd_bus_message_get_error(reply), reply);
        return 0;
}

/* sd-bus synthesizes this when the connection ends (dbus-daemon stopped or restarted). A bus
 * from sd_bus_open_system() does not exit the event loop then (sd_bus_set_exit_on_disconnect()
 * is off but for the sd_bus_default*() buses), and this reconnects. The bus itself goes at the
 * retry, outside its own dispatch. */
static int on_bus_disconnected(sd_bus_message *msg _unused_, void *userdata, sd_bus_error *ret_error _unused_) {
        Manager *m = userdata;

        if (m->bus_owned)
                m->bus_retry_usec = BUS_RECONNECT_USEC;
        bus_failed(m, "Was dbus-daemon stopped or restarted?", "disconnected from the system bus");
        return 0;
}

/* Connects, serves the object and asks for the name: waiting for the answer at the start, so that
 * READY=1 comes with the API up (or known to be down), without blocking the loop on a retry. */
static void bus_connect(Manager *m, bool wait) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = bus_polkit_registry_new(&m->polkit_registry);
        if (r < 0) {
                bus_failed(m, "", "cannot set up the polkit queries: %s", strerror(-r));
                return;
        }
        r = sd_bus_open_system(&m->bus);
        if (r < 0) {
                bus_failed(m, "Is dbus-daemon running?", "cannot connect to the system bus: %s", strerror(-r));
                return;
        }
        /* Set explicitly: a lost bus must not end the daemon, which keeps managing guests. */
        r = sd_bus_set_exit_on_disconnect(m->bus, false);
        if (r >= 0)
                r = sd_bus_match_signal(m->bus, NULL, "org.freedesktop.DBus.Local", "/org/freedesktop/DBus/Local",
                                        "org.freedesktop.DBus.Local", "Disconnected", on_bus_disconnected, m);
        if (r >= 0)
                r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r >= 0)
                r = sd_bus_add_object_vtable(m->bus, &m->bus_slot, RS_BUS_PATH, RS_BUS_INTERFACE, manager_vtable, m);
        if (r < 0) {
                bus_failed(m, "", "cannot set up the system bus connection: %s", strerror(-r));
                return;
        }

        if (!wait) {
                r = sd_bus_call_method_async(m->bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                             "org.freedesktop.DBus", "RequestName", on_request_name, m, "su",
                                             RS_BUS_NAME, DBUS_NAME_FLAG_DO_NOT_QUEUE);
                if (r < 0)
                        bus_failed(m, "", "cannot ask for %s: %s", RS_BUS_NAME, strerror(-r));
                return;
        }
        r = sd_bus_call_method(m->bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "RequestName", &error, &reply, "su", RS_BUS_NAME, DBUS_NAME_FLAG_DO_NOT_QUEUE);
        if (r < 0 && !sd_bus_error_is_set(&error))
                (void) sd_bus_error_set_errno(&error, r);
        bus_name_result(m, &error, reply);
}

static int on_bus_retry(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Manager *m = userdata;

        bus_disconnect(m);
        log_debug("Connecting to the system bus again");
        bus_connect(m, false);
        return 0;
}

int manager_bus_open(Manager *m) {
        bus_connect(m, true);
        return m->bus_name_taken ? -EEXIST : m->bus_owned ? 0 : -ENOTCONN;
}

void manager_bus_retry_now(Manager *m) {
        if (!m->bus_owned && bus_retry_pending(m))
                (void) sd_event_source_set_time_relative(m->bus_retry, 0);
}

void manager_bus_close(Manager *m) {
        m->bus_retry = sd_event_source_disable_unref(m->bus_retry);
        bus_disconnect(m);
}

void manager_bus_emit_estimate_changed(Manager *m, Guest *g) {
        /* What the guest decided the signal says, not the core's estimate now: while the core
         * re-measures, that is unknown, and the signal keeps the last known one (dbus-api.md). */
        const EstimateSignal *e = guest_estimate_signal(g);
        _cleanup_free_ char *tmp = NULL;
        const char *name = bus_string(guest_name(g), &tmp);
        if (!m->bus_owned || !guest_estimate(g) || !name)
                return;
        (void) sd_bus_emit_signal(m->bus, RS_BUS_PATH, RS_BUS_INTERFACE, "EstimateChanged", "sttt", name,
                                  e->estimate == RS_UNKNOWN ? 0 : e->estimate, e->lower == RS_UNKNOWN ? 0 : e->lower,
                                  e->upper == RS_UNKNOWN ? 0 : e->upper);
}
