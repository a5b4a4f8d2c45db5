/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A guest's policy: what rightsize may do to it and how boldly. Pure data plus the
 * glob that picks a policy for a guest; reading policy files is in policy-file.h (the only part
 * of policies/ that does I/O), the built-in presets in policy-presets.c.
 *
 * Sizes are bytes, times microseconds, percentages plain numbers (10 means 10 %). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum RsMode {
        RS_MODE_OBSERVE,          /* estimate only, never change the guest */
        RS_MODE_RIGHTSIZE,        /* keep the guest at its estimate plus margin */
        RS_MODE_ON_HOST_PRESSURE, /* estimate always, shrink only when the host is short */
        _RS_MODE_MAX,
} RsMode;

typedef enum RsActuator {
        RS_ACTUATOR_BALLOON,
        RS_ACTUATOR_VIRTIO_MEM,
        RS_ACTUATOR_BOTH, /* virtio-mem for coarse moves, the balloon for fine ones and probing */
        _RS_ACTUATOR_MAX,
} RsActuator;

typedef enum RsSensitivity {
        RS_SENSITIVITY_LOW,
        RS_SENSITIVITY_MEDIUM,
        RS_SENSITIVITY_HIGH,
        _RS_SENSITIVITY_MAX,
} RsSensitivity;

/* Which core decides a guest's size: today's knee-crossing probe (estimator.h), or the
 * continuous controller by one cost in time (controller.h). The probe stays the default until
 * the controller is proven on real guests (issue 35, stage 2). */
typedef enum RsCore {
        RS_CORE_PROBE,
        RS_CORE_COST,
        _RS_CORE_MAX,
} RsCore;

#define RS_POLICY_NAME_MAX 64
/* hugepage-repair = yes. Off by default: it is not known to be safe under a guest's sustained
 * block I/O (one such guest's I/O hung for good with it on, cause unknown), so an operator turns
 * it on knowingly. */
#define RS_HUGEPAGE_REPAIR_DEFAULT 97.0
#define RS_POLICY_MATCH_MAX 256

typedef struct RsPolicy {
        char name[RS_POLICY_NAME_MAX];   /* the file name without ".conf", or the preset */
        char match[RS_POLICY_MATCH_MAX]; /* space-separated globs on guest name or UUID; "" matches nothing */
        RsMode mode;
        uint64_t poll_interval_usec;
        uint64_t floor_bytes;            /* absolute floor */
        double floor_percent;            /* floor as % of max; the larger of the two wins */
        uint64_t max_bytes;              /* 0: the guest's own maximum */
        double margin_percent;           /* headroom over the estimate */
        double probe_step_min_percent;   /* per interval, near pressure */
        double probe_step_max_percent;   /* per interval, far from pressure */
        uint64_t hold_usec;              /* how long to hold before probing again */
        RsSensitivity refault_sensitivity;
        RsActuator actuator;
        uint64_t shares;                 /* weight in host arbitration, > 0 */
        double change_cap_percent;       /* largest change per interval, % of current size */
        uint64_t change_cap_bytes;       /* ... and in bytes; the smaller wins */
        uint64_t dead_band_bytes;        /* changes smaller than this are skipped */
        bool allow_dimm;                 /* DIMM hotplug to grow past the boot size */
        bool guest_agent;                /* read /proc/vmstat and PSI through the guest's agent */
        bool qemu_monitor;               /* libvirt: balloon stats libvirt does not map, read through
                                          * virDomainQemuMonitorCommand (taints the domain) */
        double hugepage_repair_percent;  /* collapse the host's 2 MiB ranges of guest RAM at least
                                          * this resident after the balloon went down; 0: never */

        /* controller = cost: its tunables (controller.h RsControllerParams, in the policy's
         * units; margin_percent is its margin too). Read by the probe core not at all. */
        RsCore core;
        double cost_target_percent;      /* % of wall time the working set may stall at rest */
        uint64_t cost_window_usec;
        double tighten_percent_per_min;  /* % of the size given up per minute at zero cost */
        double loosen_percent_per_sec;   /* % of the size added per second per target's worth of excess */
        double loosen_max_percent_per_sec;
        uint64_t fault_latency_usec;     /* one fault's cost when the host measured none */
        uint64_t verdict_expiry_usec;    /* how long a stream's or a cliff's verdict lasts */
} RsPolicy;

/* The defaults: the "balanced" preset, unnamed and matching nothing. */
void rs_policy_init(RsPolicy *p);
/* "conservative", "balanced", "aggressive", "observe-only": 0, or -ENOENT. Their one source is
 * the shipped etc/policies/NAME.conf, built in as text and parsed (policy-presets.c). */
int rs_policy_preset(const char *name, RsPolicy *ret);
extern const char *const rs_policy_preset_names[4];

/* The smallest floor a policy may set: below it no Linux guest survives. */
#define RS_POLICY_FLOOR_MIN_BYTES (64ULL * 1024 * 1024)

/* 0 when every field is in range; otherwise -EINVAL and *bad_key names the first bad one
 * (the ini key, e.g. "probe-step-min"). */
int rs_policy_validate(const RsPolicy *p, const char **bad_key);
/* The range a key's value must be in, for the error that refuses it; NULL when not listed. */
const char *rs_policy_key_range(const char *key);
/* Every setting, name and match equal. (Kept beside the struct: a new field goes in here too.) */
bool rs_policy_equal(const RsPolicy *a, const RsPolicy *b);

/* The effective floor and max for a guest whose own maximum is guest_max bytes. */
uint64_t rs_policy_max(const RsPolicy *p, uint64_t guest_max);
uint64_t rs_policy_floor(const RsPolicy *p, uint64_t guest_max);

/* Whether one of the policy's globs matches the name or the UUID (either may be NULL). */
bool rs_policy_matches(const RsPolicy *p, const char *name, const char *uuid);
/* The first of n policies that matches, or NULL. */
const RsPolicy *rs_policy_select(const RsPolicy *policies, size_t n, const char *name, const char *uuid);

const char *rs_mode_to_string(RsMode m);
int rs_mode_from_string(const char *s); /* -EINVAL when unknown */
const char *rs_actuator_to_string(RsActuator a);
int rs_actuator_from_string(const char *s);
const char *rs_sensitivity_to_string(RsSensitivity s);
int rs_sensitivity_from_string(const char *s);
const char *rs_core_to_string(RsCore c);
int rs_core_from_string(const char *s);

/* Value parsers shared with the policy-file reader (sizes and durations: common/size.h and
 * common/duration.h). Percentages are a number with an optional "%". All return 0 or -EINVAL
 * (-ERANGE on overflow). */
int rs_parse_percent(const char *s, double *ret);
