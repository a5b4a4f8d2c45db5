/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `rightsizectl recommend`: the records of GetRecommendation (daemon/dbus-api.md), a guest's next
 * boot's size, floor and max with the rule of each, as rightsizectl keeps, prints and turns into
 * JSON. The daemon reckons them (daemon/boot-history.c); this only shows them. Pure: no D-Bus, no
 * I/O beyond the FILE it is handed. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ctl/ctl-format.h"

typedef struct CtlRecommendation {
        char *name, *boot_rule, *floor_rule, *max_rule, *boot_now_from, *apply_refused;
        uint64_t points, since, span;            /* span: µs from the oldest point to the newest */
        uint64_t estimate_p50, estimate_p95, estimate_peak;
        uint64_t boot, floor, max;                /* the figures (CTL_UNKNOWN: no history) */
        uint64_t boot_now, memory;                /* what it boots with now, and its most */
        double stall_mean, stall_p95;             /* share of wall time */
        int enough_history, can_apply;            /* -1: not said */
} CtlRecommendation;

extern const CtlField ctl_recommendation_fields[];
extern const size_t ctl_n_recommendation_fields;

void ctl_recommendation_init(CtlRecommendation *r);
void ctl_recommendation_done(CtlRecommendation *r);

/* What the host would gain at the next boot: boot now - recommended, bytes (negative: the guest
 * needs more than it boots with). false when either is unknown. */
bool ctl_recommendation_gain(const CtlRecommendation *r, int64_t *ret);

/* The table NAME BOOTS-NOW RECOMMENDED FLOOR MAX GAIN HISTORY, then each guest's rules, and a
 * plain line for a guest with too little history (its figures labelled provisional). */
int ctl_print_recommendations(FILE *f, const CtlRecommendation *recs, size_t n);

/* Every field (null when unknown) and "gain" (signed bytes, or null). */
json_object *ctl_recommendation_to_json(const CtlRecommendation *r);
