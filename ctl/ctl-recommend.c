/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ctl/ctl-recommend.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/size.h"

#define FIELD(k, t, member) { .key = k, .type = t, .offset = offsetof(CtlRecommendation, member) }
const CtlField ctl_recommendation_fields[] = {
        FIELD("name", CTL_FIELD_STRING, name),
        FIELD("points", CTL_FIELD_COUNT, points),
        FIELD("enough-history", CTL_FIELD_BOOL, enough_history),
        FIELD("since", CTL_FIELD_USEC, since),
        FIELD("span", CTL_FIELD_COUNT, span),
        FIELD("estimate-p50", CTL_FIELD_SIZE, estimate_p50),
        FIELD("estimate-p95", CTL_FIELD_SIZE, estimate_p95),
        FIELD("estimate-peak", CTL_FIELD_SIZE, estimate_peak),
        FIELD("boot", CTL_FIELD_SIZE, boot),
        FIELD("boot-rule", CTL_FIELD_STRING, boot_rule),
        FIELD("floor", CTL_FIELD_SIZE, floor),
        FIELD("floor-rule", CTL_FIELD_STRING, floor_rule),
        FIELD("max", CTL_FIELD_SIZE, max),
        FIELD("max-rule", CTL_FIELD_STRING, max_rule),
        FIELD("boot-now", CTL_FIELD_SIZE, boot_now),
        FIELD("boot-now-from", CTL_FIELD_STRING, boot_now_from),
        FIELD("memory", CTL_FIELD_SIZE, memory),
        FIELD("stall-mean", CTL_FIELD_DOUBLE, stall_mean),
        FIELD("stall-p95", CTL_FIELD_DOUBLE, stall_p95),
        FIELD("can-apply", CTL_FIELD_BOOL, can_apply),
        FIELD("apply-refused", CTL_FIELD_STRING, apply_refused),
};
const size_t ctl_n_recommendation_fields = ARRAY_SIZE(ctl_recommendation_fields);

void ctl_recommendation_init(CtlRecommendation *r) {
        memset(r, 0, sizeof(*r));
        ctl_fields_init(r, ctl_recommendation_fields, ctl_n_recommendation_fields);
}

void ctl_recommendation_done(CtlRecommendation *r) {
        ctl_fields_done(r, ctl_recommendation_fields, ctl_n_recommendation_fields);
}

bool ctl_recommendation_gain(const CtlRecommendation *r, int64_t *ret) {
        if (r->boot == CTL_UNKNOWN || r->boot_now == CTL_UNKNOWN || r->boot > INT64_MAX || r->boot_now > INT64_MAX)
                return false;
        *ret = (int64_t) r->boot_now - (int64_t) r->boot;
        return true;
}

static const char *format_gain(char *buf, size_t len, const CtlRecommendation *r) {
        int64_t gain;
        char size[FORMAT_SIZE_MAX];
        if (!ctl_recommendation_gain(r, &gain))
                return "-";
        snprintf(buf, len, "%s%s", gain < 0 ? "-" : "", format_size(size, sizeof(size), (uint64_t) llabs(gain)));
        return buf;
}

static const char *format_span(char *buf, size_t len, const CtlRecommendation *r) {
        if (r->points == CTL_UNKNOWN || r->points == 0)
                return "none";
        double hours = r->span == CTL_UNKNOWN ? 0 : (double) r->span / 3600e6;
        if (hours >= 24)
                snprintf(buf, len, "%.1f days", hours / 24);
        else
                snprintf(buf, len, "%.1f h", hours);
        return buf;
}

int ctl_print_recommendations(FILE *f, const CtlRecommendation *recs, size_t n) {
        static const char *const headers[] = { "NAME", "BOOTS-NOW", "RECOMMENDED", "FLOOR", "MAX", "GAIN", "HISTORY" };
        CtlTable *t = ctl_table_new(ARRAY_SIZE(headers), headers);
        int64_t total = 0;
        int k;

        if (!t)
                return -ENOMEM;
        for (size_t c = 1; c < ARRAY_SIZE(headers); c++)
                ctl_table_align_right(t, c);
        for (size_t i = 0; i < n; i++) {
                const CtlRecommendation *r = &recs[i];
                char now[FORMAT_SIZE_MAX], boot[FORMAT_SIZE_MAX], floor[FORMAT_SIZE_MAX], max[FORMAT_SIZE_MAX],
                        gain[FORMAT_SIZE_MAX + 1], span[32];
                const char *cells[] = { r->name, ctl_format_size(now, sizeof(now), r->boot_now),
                                        ctl_format_size(boot, sizeof(boot), r->boot),
                                        ctl_format_size(floor, sizeof(floor), r->floor),
                                        ctl_format_size(max, sizeof(max), r->max), format_gain(gain, sizeof(gain), r),
                                        format_span(span, sizeof(span), r) };
                int64_t g;
                if (ctl_recommendation_gain(r, &g))
                        total += g;
                if (ctl_table_add_row(t, cells) < 0)
                        break;
        }
        k = ctl_table_print(t, f);
        ctl_table_free(t);
        if (k < 0)
                return k;
        char size[FORMAT_SIZE_MAX];
        fprintf(f, "\nAt their next boots with these sizes, the host would %s %s%s.\n", total >= 0 ? "gain" : "need",
                format_size(size, sizeof(size), (uint64_t) llabs(total)), total >= 0 ? "" : " more");
        for (size_t i = 0; i < n; i++) {
                const CtlRecommendation *r = &recs[i];
                _cleanup_free_ char *name = ctl_sanitize(r->name), *b = ctl_sanitize(r->boot_rule),
                                    *fl = ctl_sanitize(r->floor_rule), *mx = ctl_sanitize(r->max_rule),
                                    *from = ctl_sanitize(r->boot_now_from);
                char span[32];
                fprintf(f, "\n%s:\n", name ?: "?");
                if (r->boot == CTL_UNKNOWN) {
                        fprintf(f, "  no recommendation: %s\n", b && *b ? b : "no history yet");
                        continue;
                }
                if (r->enough_history == 0)
                        fprintf(f, "  Only %s of history (less than 1 day): the figures are provisional.\n",
                                format_span(span, sizeof(span), r));
                fprintf(f, "  recommended: %s\n  floor:       %s\n  max:         %s\n", b ?: "?", fl ?: "?", mx ?: "?");
                fprintf(f, "  boots now:   %s (%s)\n", ctl_format_size(size, sizeof(size), r->boot_now), from ?: "?");
                if (isfinite(r->stall_mean))
                        fprintf(f, "  stall:       %.2f %% of wall time on average, p95 %.2f %%\n", 100 * r->stall_mean,
                                100 * r->stall_p95);
        }
        return 0;
}

json_object *ctl_recommendation_to_json(const CtlRecommendation *r) {
        json_object *o = json_object_new_object();
        int64_t gain;

        if (!o || ctl_fields_to_json(o, r, ctl_recommendation_fields, ctl_n_recommendation_fields) < 0)
                return json_object_put(o), NULL;
        json_object_object_add(o, "gain", ctl_recommendation_gain(r, &gain) ? json_object_new_int64(gain) : NULL);
        return o;
}
