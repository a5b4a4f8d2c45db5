/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/policy.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/macro.h"
#include "common/number.h"

void rs_policy_init(RsPolicy *p) {
        *p = (RsPolicy) {
                .mode = RS_MODE_RIGHTSIZE,
                .poll_interval_usec = 10 * USEC_PER_SEC,
                .floor_bytes = 256 * MIB,
                .floor_percent = 10,
                .max_bytes = 0,
                .margin_percent = 10,
                .probe_step_min_percent = 1,
                .probe_step_max_percent = 10,
                .hold_usec = 600 * USEC_PER_SEC,
                .refault_sensitivity = RS_SENSITIVITY_MEDIUM,
                .actuator = RS_ACTUATOR_BALLOON,
                .shares = 1024,
                .change_cap_percent = 10,
                .change_cap_bytes = 1 * GIB,
                .dead_band_bytes = 8 * MIB,
                .allow_dimm = false,
                .guest_agent = true,
                .qemu_monitor = false,
                /* Opt-in: a guest's block I/O hung once with it on, cause not found (policy.h). */
                .hugepage_repair_percent = 0,
                /* The probe until the controller is proven on real guests (issue 35 stage 2);
                 * the controller's defaults are rs_controller_params_init()'s, in these units. */
                .core = RS_CORE_PROBE,
                .cost_target_percent = 0.1,
                .cost_window_usec = 30 * USEC_PER_SEC,
                .tighten_percent_per_min = 5,
                .loosen_percent_per_sec = 0.2,
                .loosen_max_percent_per_sec = 1,
                .fault_latency_usec = 250,
                .verdict_expiry_usec = 3600 * USEC_PER_SEC,
        };
}

static bool percent_ok(double v, double lo, double hi) {
        return isfinite(v) && v >= lo && v <= hi;
}

int rs_policy_validate(const RsPolicy *p, const char **bad_key) {
        const char *bad = NULL;

        if (p->mode < 0 || p->mode >= _RS_MODE_MAX)
                bad = "mode";
        else if (p->poll_interval_usec < 100 * USEC_PER_MSEC || p->poll_interval_usec > 3600 * USEC_PER_SEC)
                bad = "poll-interval";
        else if (p->floor_bytes < RS_POLICY_FLOOR_MIN_BYTES)
                bad = "floor";
        else if (!percent_ok(p->floor_percent, 0, 100))
                bad = "floor-percent";
        else if (p->max_bytes != 0 && p->max_bytes < p->floor_bytes)
                bad = "max";
        else if (!percent_ok(p->margin_percent, 0, 100))
                bad = "margin";
        else if (!percent_ok(p->probe_step_min_percent, 0.1, 50))
                bad = "probe-step-min";
        else if (!percent_ok(p->probe_step_max_percent, 0.1, 50) ||
                 p->probe_step_max_percent < p->probe_step_min_percent)
                bad = "probe-step-max";
        else if (p->hold_usec < p->poll_interval_usec)
                bad = "hold-time";
        else if (p->refault_sensitivity < 0 || p->refault_sensitivity >= _RS_SENSITIVITY_MAX)
                bad = "refault-sensitivity";
        else if (p->actuator < 0 || p->actuator >= _RS_ACTUATOR_MAX)
                bad = "actuator";
        else if (p->shares == 0 || p->shares > 1000000)
                bad = "shares";
        else if (!percent_ok(p->change_cap_percent, 0.1, 100))
                bad = "change-cap-percent";
        else if (p->change_cap_bytes < MIB)
                bad = "change-cap";
        else if (p->hugepage_repair_percent != 0 && !percent_ok(p->hugepage_repair_percent, 50, 100))
                bad = "hugepage-repair";
        else if (p->core < 0 || p->core >= _RS_CORE_MAX)
                bad = "controller";
        /* The controller's own ranges (rs_controller_params_validate() checks the same, in its
         * units): checked whichever core runs, so switching to cost never meets a bad value. */
        else if (!(isfinite(p->cost_target_percent) && p->cost_target_percent > 0 && p->cost_target_percent < 50))
                bad = "cost-target";
        else if (p->cost_window_usec < USEC_PER_SEC || p->cost_window_usec > 3600 * USEC_PER_SEC)
                bad = "cost-window";
        else if (!(isfinite(p->tighten_percent_per_min) && p->tighten_percent_per_min > 0 &&
                   p->tighten_percent_per_min <= 50))
                bad = "tighten-rate";
        else if (!(isfinite(p->loosen_percent_per_sec) && p->loosen_percent_per_sec > 0 &&
                   p->loosen_percent_per_sec <= 100))
                bad = "loosen-rate";
        else if (!percent_ok(p->loosen_max_percent_per_sec, p->loosen_percent_per_sec, 100))
                bad = "loosen-rate-max";
        else if (p->fault_latency_usec == 0 || p->fault_latency_usec >= USEC_PER_SEC)
                bad = "fault-latency";
        else if (p->verdict_expiry_usec > 7 * 24 * 3600 * USEC_PER_SEC)
                bad = "verdict-expiry";

        if (bad) {
                if (bad_key)
                        *bad_key = bad;
                return -EINVAL;
        }
        return 0;
}

const char *rs_policy_key_range(const char *key) {
        static const struct {
                const char *key, *range;
        } ranges[] = {
                { "cost-target", "more than 0 and less than 50 %" },
                { "cost-window", "1s to 1h" },
                { "tighten-rate", "more than 0 and at most 50 % a minute" },
                { "loosen-rate", "more than 0 and at most 100 % a second" },
                { "loosen-rate-max", "from loosen-rate to 100 % a second" },
                { "fault-latency", "more than 0 and less than 1s" },
                { "verdict-expiry", "0 to 7 days" },
                { "margin", "0 to 100 %" },
        };
        for (size_t i = 0; key && i < ARRAY_SIZE(ranges); i++)
                if (strcmp(ranges[i].key, key) == 0)
                        return ranges[i].range;
        return NULL;
}

uint64_t rs_policy_max(const RsPolicy *p, uint64_t guest_max) {
        if (p->max_bytes == 0)
                return guest_max;
        if (guest_max == 0)
                return p->max_bytes;
        return MIN(p->max_bytes, guest_max);
}

uint64_t rs_policy_floor(const RsPolicy *p, uint64_t guest_max) {
        uint64_t max = rs_policy_max(p, guest_max);
        /* In doubles, max near 2^64 times 100 % rounds past any uint64_t (a fuzzer found it):
         * a share of max is at most max. */
        double share = (double) max * p->floor_percent / 100.0;
        uint64_t pct = share >= (double) max ? max : (uint64_t) share;
        uint64_t floor = MAX(p->floor_bytes, pct);
        /* A floor above the maximum would leave no room at all: the maximum wins. */
        return max > 0 ? MIN(floor, max) : floor;
}

bool rs_policy_matches(const RsPolicy *p, const char *name, const char *uuid) {
        char buf[RS_POLICY_MATCH_MAX];
        char *save = NULL;

        snprintf(buf, sizeof(buf), "%s", p->match);
        for (char *g = strtok_r(buf, " \t", &save); g; g = strtok_r(NULL, " \t", &save)) {
                if (name && fnmatch(g, name, 0) == 0)
                        return true;
                /* UUIDs are compared without regard to case, as libvirt prints them lower-case
                 * but people paste them upper-case. */
                if (uuid && fnmatch(g, uuid, FNM_CASEFOLD) == 0)
                        return true;
        }
        return false;
}

const RsPolicy *rs_policy_select(const RsPolicy *policies, size_t n, const char *name, const char *uuid) {
        for (size_t i = 0; i < n; i++)
                if (rs_policy_matches(&policies[i], name, uuid))
                        return &policies[i];
        return NULL;
}

static const char *const mode_names[_RS_MODE_MAX] = {
        [RS_MODE_OBSERVE] = "observe",
        [RS_MODE_RIGHTSIZE] = "rightsize",
        [RS_MODE_ON_HOST_PRESSURE] = "on-host-pressure",
};
static const char *const actuator_names[_RS_ACTUATOR_MAX] = {
        [RS_ACTUATOR_BALLOON] = "balloon",
        [RS_ACTUATOR_VIRTIO_MEM] = "virtio-mem",
        [RS_ACTUATOR_BOTH] = "both",
};
static const char *const core_names[_RS_CORE_MAX] = {
        [RS_CORE_PROBE] = "probe",
        [RS_CORE_COST] = "cost",
};
static const char *const sensitivity_names[_RS_SENSITIVITY_MAX] = {
        [RS_SENSITIVITY_LOW] = "low",
        [RS_SENSITIVITY_MEDIUM] = "medium",
        [RS_SENSITIVITY_HIGH] = "high",
};

static int lookup(const char *const *names, size_t n, const char *s) {
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (strcasecmp(names[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

const char *rs_mode_to_string(RsMode m) {
        return m >= 0 && m < _RS_MODE_MAX ? mode_names[m] : NULL;
}
int rs_mode_from_string(const char *s) {
        return lookup(mode_names, _RS_MODE_MAX, s);
}
const char *rs_actuator_to_string(RsActuator a) {
        return a >= 0 && a < _RS_ACTUATOR_MAX ? actuator_names[a] : NULL;
}
int rs_actuator_from_string(const char *s) {
        return lookup(actuator_names, _RS_ACTUATOR_MAX, s);
}
const char *rs_sensitivity_to_string(RsSensitivity s) {
        return s >= 0 && s < _RS_SENSITIVITY_MAX ? sensitivity_names[s] : NULL;
}
int rs_sensitivity_from_string(const char *s) {
        return lookup(sensitivity_names, _RS_SENSITIVITY_MAX, s);
}
const char *rs_core_to_string(RsCore c) {
        return c >= 0 && c < _RS_CORE_MAX ? core_names[c] : NULL;
}
int rs_core_from_string(const char *s) {
        return lookup(core_names, _RS_CORE_MAX, s);
}

int rs_parse_percent(const char *s, double *ret) {
        const char *unit;
        double v;
        int r;

        r = parse_number_unit(s, &v, &unit);
        if (r < 0)
                return r;
        if (!unit_is(unit, "") && !unit_is(unit, "%"))
                return -EINVAL;
        *ret = v;
        return 0;
}

bool rs_policy_equal(const RsPolicy *a, const RsPolicy *b) {
        return strcmp(a->name, b->name) == 0 && strcmp(a->match, b->match) == 0 && a->mode == b->mode &&
               a->poll_interval_usec == b->poll_interval_usec && a->floor_bytes == b->floor_bytes &&
               a->floor_percent == b->floor_percent && a->max_bytes == b->max_bytes &&
               a->margin_percent == b->margin_percent && a->probe_step_min_percent == b->probe_step_min_percent &&
               a->probe_step_max_percent == b->probe_step_max_percent && a->hold_usec == b->hold_usec &&
               a->refault_sensitivity == b->refault_sensitivity && a->actuator == b->actuator &&
               a->shares == b->shares && a->change_cap_percent == b->change_cap_percent &&
               a->change_cap_bytes == b->change_cap_bytes && a->dead_band_bytes == b->dead_band_bytes &&
               a->allow_dimm == b->allow_dimm && a->guest_agent == b->guest_agent &&
               a->qemu_monitor == b->qemu_monitor && a->hugepage_repair_percent == b->hugepage_repair_percent &&
               a->core == b->core && a->cost_target_percent == b->cost_target_percent &&
               a->cost_window_usec == b->cost_window_usec && a->tighten_percent_per_min == b->tighten_percent_per_min &&
               a->loosen_percent_per_sec == b->loosen_percent_per_sec &&
               a->loosen_max_percent_per_sec == b->loosen_max_percent_per_sec &&
               a->fault_latency_usec == b->fault_latency_usec &&
               a->verdict_expiry_usec == b->verdict_expiry_usec;
}
