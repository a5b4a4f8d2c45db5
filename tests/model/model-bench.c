/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The decision core's figures on guest model v2: every family's draws run against the core
 * at the shipped policy, printed as a markdown table per family (for BENCHMARKS.md). This is
 * a measurement, not a test: it exits 0 whatever the figures (the model's own properties are
 * asserted by tests/unit/test-guest-model-v2).
 *
 *   model-bench [--draws N] [--seconds S] [--core estimator|controller|both] [--tuning-only] [--list]
 *               [--param NAME=VALUE]... [--deflate-on-oom yes|no] [--per-cpu-lists]
 *               [--holdout-baseline FILE] [--write-holdout FILE]
 *   model-bench --family NAME --seed N [--core ...]      replay one draw, an interval a line
 *
 * --core both (the default) runs today's estimator and the cost controller (controller.h) on
 * the same draws: a table for each, then one of the two side by side per family.
 * --tuning-only leaves the held-out families out (what a controller is tuned with); --param
 * sets one of the controller's tunables (RsControllerParams' field names) for an experiment;
 * --deflate-on-oom gives every draw's balloon deflate-on-oom (yes) or none (no) instead of
 * the draw's own (WorkloadDraw.deflate_on_oom); --per-cpu-lists gives every guest the kernel's
 * per-CPU free lists (WorkloadDraw.per_cpu_lists), free memory MemFree does not show.
 *
 * Draw i is family i mod the number of families, seed i / that + 1: a failing draw's family
 * and seed replay it. The held-out families (shape_family_held_out()) are printed again
 * against their frozen first run (--holdout-baseline), the scores a controller tuned on the
 * other families is judged by. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "policies/policy.h"
#include "tests/model/model-v2-run.h"

#define DRAWS_DEFAULT 2100     /* 300 per family */
#define SECONDS_DEFAULT 7200.0 /* two hours: a first descent, holds and re-probes, a phase change and what follows */

typedef struct FamilyFigures {
        unsigned draws;
        double err_stall_p50, err_stall_abs_p95;
        double err_tput_p50, err_tput_abs_p95;
        double cost_mean, cost_p95, cost_max;
        unsigned starved, oom_kills, oom_draws, no_estimate, streaming;
        double within_10, held_in_band;  /* shares of the draws */
        double worst_abs_error;
        uint64_t worst_seed;
        double worst_estimate, worst_truth;
} FamilyFigures;

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n sorted values. */
static double percentile(const double *sorted, unsigned n, double p) {
        if (n == 0)
                return NAN;
        unsigned k = (unsigned) ceil(p / 100.0 * n);
        return sorted[MIN(MAX(k, 1u), n) - 1];
}

static void figures(const ModelV2Score *s, unsigned n, FamilyFigures *f) {
        double *es = calloc(n, sizeof(double)), *ea = calloc(n, sizeof(double));
        double *ts = calloc(n, sizeof(double)), *ta = calloc(n, sizeof(double)), *c = calloc(n, sizeof(double));
        *f = (FamilyFigures) { .draws = n };
        for (unsigned i = 0; i < n; i++) {
                es[i] = s[i].error_stall;
                ea[i] = fabs(s[i].error_stall);
                ts[i] = s[i].error_throughput;
                ta[i] = fabs(s[i].error_throughput);
                c[i] = s[i].cost;
                f->cost_mean += s[i].cost / n;
                f->starved += s[i].starved;
                f->oom_kills += s[i].oom_kills;
                f->oom_draws += s[i].oom_kills > 0;
                f->within_10 += (fabs(s[i].error_stall) <= 0.10) / (double) n;
                f->held_in_band += s[i].held_in_band / (double) n;
                f->no_estimate += !s[i].has_estimate;
                f->streaming += s[i].streaming;
                if (ea[i] > f->worst_abs_error || i == 0) {
                        f->worst_abs_error = ea[i];
                        f->worst_seed = s[i].draw.seed;
                        f->worst_estimate = s[i].has_estimate ? s[i].estimate : s[i].held;
                        f->worst_truth = s[i].truth_stall;
                }
        }
        qsort(es, n, sizeof(double), cmp_double);
        qsort(ea, n, sizeof(double), cmp_double);
        qsort(ts, n, sizeof(double), cmp_double);
        qsort(ta, n, sizeof(double), cmp_double);
        qsort(c, n, sizeof(double), cmp_double);
        f->err_stall_p50 = percentile(es, n, 50);
        f->err_stall_abs_p95 = percentile(ea, n, 95);
        f->err_tput_p50 = percentile(ts, n, 50);
        f->err_tput_abs_p95 = percentile(ta, n, 95);
        f->cost_p95 = percentile(c, n, 95);
        f->cost_max = n > 0 ? c[n - 1] : NAN;
        free(es);
        free(ea);
        free(ts);
        free(ta);
        free(c);
}

static void print_header(void) {
        printf("| family | draws | error p50 (stall truth) | abs error p95 | within 10 %% | held in band | error p50 (99 %% tput truth) | abs error p95 "
               "| worst draw (seed: answer / truth) | cost mean | cost p95 | cost worst | starved | OOM kills (draws) | no estimate "
               "| stream verdict |\n");
        printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
}

static void print_row(ShapeFamily fam, const FamilyFigures *f) {
        printf("| %s%s | %u | %+.1f %% | %.1f %% | %.0f %% | %.0f %% | %+.1f %% | %.1f %% | %llu: %.0f / %.0f MiB (%+.0f %%) | %.3f %% | %.3f %% | %.1f %% "
               "| %u | %u (%u) | %u | %u |\n",
               shape_family_name(fam), shape_family_held_out(fam) ? " (held out)" : "", f->draws,
               100 * f->err_stall_p50, 100 * f->err_stall_abs_p95, 100 * f->within_10, 100 * f->held_in_band,
               100 * f->err_tput_p50, 100 * f->err_tput_abs_p95,
               (unsigned long long) f->worst_seed, isnan(f->worst_estimate) ? -1.0 : f->worst_estimate / MIB,
               f->worst_truth / MIB, isnan(f->worst_estimate) ? 100.0 : 100 * (f->worst_estimate / f->worst_truth - 1),
               100 * f->cost_mean, 100 * f->cost_p95, 100 * f->cost_max, f->starved, f->oom_kills, f->oom_draws, f->no_estimate, f->streaming);
}

/* The frozen baseline: one line per held-out family, whitespace-separated:
 *   family draws err_stall_p50 err_stall_abs_p95 err_tput_p50 err_tput_abs_p95 cost_mean cost_p95 starved oom_kills
 *          within_10 held_in_band
 * (fractions, not percent). Lines starting with '#' are notes. */
static void write_holdout(const char *path, const FamilyFigures *all, const char *how) {
        FILE *f = fopen(path, "we");
        if (!f) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                exit(EXIT_FAILURE);
        }
        fprintf(f, "# Held-out families of guest model v2: their figures at their first run, frozen.\n"
                   "# No controller is tuned on these families; every later run of model-bench is scored\n"
                   "# against these lines (model-bench --holdout-baseline this-file). Do not regenerate them\n"
                   "# to make a controller look better: a new baseline needs a new model, and says so.\n"
                   "# Produced by: %s\n"
                   "# family draws err_stall_p50 err_stall_abs_p95 err_tput_p50 err_tput_abs_p95 cost_mean cost_p95 starved "
                   "oom_kills within_10 held_in_band\n",
                how);
        for (int fam = 0; fam < _FAMILY_MAX; fam++) {
                if (!shape_family_held_out((ShapeFamily) fam))
                        continue;
                const FamilyFigures *x = &all[fam];
                fprintf(f, "%s %u %.4f %.4f %.4f %.4f %.5f %.5f %u %u %.4f %.4f\n", shape_family_name((ShapeFamily) fam),
                        x->draws, x->err_stall_p50, x->err_stall_abs_p95, x->err_tput_p50, x->err_tput_abs_p95, x->cost_mean,
                        x->cost_p95, x->starved, x->oom_kills, x->within_10, x->held_in_band);
        }
        fclose(f);
}

static void compare_holdout(const char *path, const FamilyFigures *all) {
        FILE *f = fopen(path, "re");
        char line[512];
        if (!f) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                exit(EXIT_FAILURE);
        }
        printf("\nHeld-out families against their frozen baseline (%s):\n\n", path);
        printf("| family | abs error p95 (stall truth): baseline -> now | within 10 %%: baseline -> now "
               "| held in band: baseline -> now | abs error p95 (99 %% tput): baseline -> now "
               "| cost mean: baseline -> now | starved: baseline -> now |\n|---|---|---|---|---|---|---|\n");
        while (fgets(line, sizeof(line), f)) {
                char name[64];
                unsigned draws, starved, ooms;
                double e50, e95, t50, t95, cm, c95, w10, band;
                if (line[0] == '#' || sscanf(line, "%63s %u %lf %lf %lf %lf %lf %lf %u %u %lf %lf", name, &draws, &e50, &e95,
                                             &t50, &t95, &cm, &c95, &starved, &ooms, &w10, &band) != 12)
                        continue;
                int fam = shape_family_from_name(name);
                if (fam < 0)
                        continue;
                const FamilyFigures *x = &all[fam];
                printf("| %s | %.1f %% -> %.1f %% | %.0f %% -> %.0f %% | %.0f %% -> %.0f %% | %.1f %% -> %.1f %% "
                       "| %.3f %% -> %.3f %% | %u -> %u |\n",
                       name, 100 * e95, 100 * x->err_stall_abs_p95, 100 * w10, 100 * x->within_10, 100 * band,
                       100 * x->held_in_band, 100 * t95, 100 * x->err_tput_abs_p95, 100 * cm, 100 * x->cost_mean, starved,
                       x->starved);
        }
        fclose(f);
}

static int replay(const char *family, uint64_t seed, double seconds, const RsPolicy *p, const ModelV2Options *o) {
        int fam = shape_family_from_name(family);
        WorkloadDraw d;
        ModelV2Score s;
        char desc[1024];

        if (fam < 0) {
                fprintf(stderr, "unknown family %s\n", family);
                return EXIT_FAILURE;
        }
        workload_draw((ShapeFamily) fam, seed, &d);
        workload_describe(&d, desc, sizeof(desc));
        printf("%s\n", desc);
        if (model_v2_run_with(&d, p, o, seconds, true, &s) < 0)
                return EXIT_FAILURE;
        printf("estimate %.1f MiB, truth %.1f MiB (stall <= %.2f %%), %.1f MiB (99 %% throughput): error %+.1f %% / %+.1f %%; "
               "held %.1f MiB; cost %.3f %%; longest below truth after growth %.0f s; OOM kills %u; stream verdict %s; "
               "longest below truth losing over 1 %% throughput %.0f s\n",
               s.estimate / MIB, s.truth_stall / MIB, 100 * SHAPE_STALL_TARGET, s.truth_throughput / MIB,
               100 * s.error_stall, 100 * s.error_throughput, s.held / MIB, 100 * s.cost, s.longest_below_sec, s.oom_kills,
               s.streaming ? "yes" : "no", s.longest_short_sec);
        return EXIT_SUCCESS;
}

static int set_param(RsControllerParams *cp, const char *assignment) {
        char name[64];
        double v;
        if (sscanf(assignment, "%63[^=]=%lf", name, &v) != 2)
                return -EINVAL;
#define PARAM(field)                            \
        if (strcmp(name, #field) == 0) {        \
                cp->field = v;                  \
                return 0;                       \
        }
        PARAM(cost_target);
        PARAM(cost_window_sec);
        PARAM(tighten_per_min);
        PARAM(loosen_per_sec);
        PARAM(loosen_max_per_sec);
        PARAM(margin);
        PARAM(blind_margin);
        PARAM(fault_latency_sec);
        PARAM(verdict_expiry_sec);
#undef PARAM
        return -ENOENT;
}

static const char *core_title(ModelV2Core c) {
        return c == MODEL_V2_ESTIMATOR ? "Today's estimator" : "The cost controller (policies/controller.c, not yet wired in)";
}

/* --list: a line per draw on stderr (family, seed, error, cost, starved, OOM kills), to find
 * the draws worth replaying. */
static bool list_draws;

/* Runs one core over the draws; fills all[] per family. Returns false if the core refused a draw. */
static bool run_core(const RsPolicy *p, const ModelV2Options *o, unsigned draws, double seconds, bool tuning_only,
                     FamilyFigures *all, bool *ran) {
        ModelV2Score *scores[_FAMILY_MAX];
        unsigned n[_FAMILY_MAX] = { 0 };
        bool ok = true;
        for (int f = 0; f < _FAMILY_MAX; f++)
                scores[f] = calloc(draws / _FAMILY_MAX + 1, sizeof(ModelV2Score));
        for (unsigned i = 0; i < draws && ok; i++) {
                ShapeFamily fam = (ShapeFamily) (i % _FAMILY_MAX);
                WorkloadDraw d;
                if (tuning_only && shape_family_held_out(fam))
                        continue;
                workload_draw(fam, i / _FAMILY_MAX + 1, &d);
                if (model_v2_run_with(&d, p, o, seconds, false, &scores[fam][n[fam]]) < 0) {
                        char desc[1024];
                        workload_describe(&d, desc, sizeof(desc));
                        fprintf(stderr, "the core refused a draw: %s\n", desc);
                        ok = false;
                }
                if (list_draws) {
                        const ModelV2Score *x = &scores[fam][n[fam]];
                        fprintf(stderr, "%s %llu error %+.1f %% cost %.3f %% below %.0f s OOM %u\n", shape_family_name(fam),
                                (unsigned long long) d.seed, 100 * x->error_stall, 100 * x->cost, x->longest_below_sec,
                                x->oom_kills);
                }
                n[fam]++;
        }
        for (int f = 0; f < _FAMILY_MAX; f++) {
                ran[f] = n[f] > 0;
                if (ran[f])
                        figures(scores[f], n[f], &all[f]);
                free(scores[f]);
        }
        return ok;
}

static void print_core_table(ModelV2Core c, const RsPolicy *p, unsigned draws, double seconds, const FamilyFigures *all,
                             const bool *ran) {
        printf("%s (shipped policy \"balanced\": %.0f s interval, %.0f %% margin) on guest model v2: %u draws, "
               "%.0f s each; truth: stall <= %.1f %% of wall time, and 99 %% of full-size throughput. Error = (estimate - "
               "truth) / truth at the end of the run; cost = memory stall over the whole run (first descent included) / wall "
               "time; starved = held below the 99 %% truth > %.0f s at a stretch after a growth; held in band: the final size "
               "between the stall truth and the truth plus the margin plus the dead-band. A run that ends with no "
               "estimate (its first descent still under way) is scored by the size it holds the guest at.\n\n",
               core_title(c), (double) p->poll_interval_usec / USEC_PER_SEC, p->margin_percent, draws, seconds,
               100 * SHAPE_STALL_TARGET, MODEL_V2_STARVED_SEC);
        print_header();
        for (int f = 0; f < _FAMILY_MAX; f++)
                if (ran[f])
                        print_row((ShapeFamily) f, &all[f]);
        printf("\n");
}

static void print_side_by_side(const FamilyFigures *old, const FamilyFigures *new, const bool *ran) {
        printf("Old (today's estimator) against new (the cost controller), per family:\n\n"
               "| family | abs error p95 (stall truth): old / new | within 10 %%: old / new | held in band: old / new "
               "| cost mean: old / new | cost p95: old / new | starved: old / new | OOM kills: old / new |\n"
               "|---|---|---|---|---|---|---|---|\n");
        for (int f = 0; f < _FAMILY_MAX; f++) {
                if (!ran[f])
                        continue;
                const FamilyFigures *a = &old[f], *b = &new[f];
                printf("| %s%s | %.1f %% / %.1f %% | %.0f %% / %.0f %% | %.0f %% / %.0f %% | %.3f %% / %.3f %% "
                       "| %.3f %% / %.3f %% | %u / %u | %u / %u |\n",
                       shape_family_name((ShapeFamily) f), shape_family_held_out((ShapeFamily) f) ? " (held out)" : "",
                       100 * a->err_stall_abs_p95, 100 * b->err_stall_abs_p95, 100 * a->within_10, 100 * b->within_10,
                       100 * a->held_in_band, 100 * b->held_in_band, 100 * a->cost_mean, 100 * b->cost_mean,
                       100 * a->cost_p95, 100 * b->cost_p95, a->starved, b->starved, a->oom_kills, b->oom_kills);
        }
        printf("\n");
}

int main(int argc, char **argv) {
        unsigned draws = DRAWS_DEFAULT;
        double seconds = SECONDS_DEFAULT;
        const char *family = NULL, *holdout = NULL, *write_to = NULL, *core = "both";
        uint64_t seed = 1;
        bool tuning_only = false;
        ModelV2DeflateOnOom doo = MODEL_V2_DEFLATE_ON_OOM_DRAWN;
        bool pcp = false;
        RsPolicy p;
        RsControllerParams cp;

        rs_policy_init(&p);
        rs_controller_params_init(&cp, &p);
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (strcmp(a, "--draws") == 0 && v)
                        draws = (unsigned) strtoul(v, NULL, 10), i++;
                else if (strcmp(a, "--seconds") == 0 && v)
                        seconds = strtod(v, NULL), i++;
                else if (strcmp(a, "--family") == 0 && v)
                        family = v, i++;
                else if (strcmp(a, "--seed") == 0 && v)
                        seed = strtoull(v, NULL, 10), i++;
                else if (strcmp(a, "--holdout-baseline") == 0 && v)
                        holdout = v, i++;
                else if (strcmp(a, "--write-holdout") == 0 && v)
                        write_to = v, i++;
                else if (strcmp(a, "--core") == 0 && v)
                        core = v, i++;
                else if (strcmp(a, "--deflate-on-oom") == 0 && v && (strcmp(v, "yes") == 0 || strcmp(v, "no") == 0))
                        doo = strcmp(v, "yes") == 0 ? MODEL_V2_DEFLATE_ON_OOM_ON : MODEL_V2_DEFLATE_ON_OOM_OFF, i++;
                else if (strcmp(a, "--per-cpu-lists") == 0)
                        pcp = true;
                else if (strcmp(a, "--tuning-only") == 0)
                        tuning_only = true;
                else if (strcmp(a, "--list") == 0)
                        list_draws = true;
                else if (strcmp(a, "--param") == 0 && v && set_param(&cp, v) == 0)
                        i++;
                else {
                        fprintf(stderr, "usage: %s [--draws N] [--seconds S] [--core estimator|controller|both] [--tuning-only] [--list]\n"
                                        "          [--param NAME=VALUE]... [--deflate-on-oom yes|no] [--per-cpu-lists]\n"
                                        "          [--holdout-baseline FILE] [--write-holdout FILE]\n"
                                        "       %s --family NAME --seed N [--seconds S] [--core estimator|controller]\n",
                                argv[0], argv[0]);
                        return EXIT_FAILURE;
                }
        }
        bool run_old = strcmp(core, "estimator") == 0 || strcmp(core, "both") == 0;
        bool run_new = strcmp(core, "controller") == 0 || strcmp(core, "both") == 0;
        const char *bad;
        if ((!run_old && !run_new) || rs_controller_params_validate(&cp, &bad) < 0) {
                fprintf(stderr, "bad --core or --param\n");
                return EXIT_FAILURE;
        }
        ModelV2Options old_core = { .core = MODEL_V2_ESTIMATOR, .deflate_on_oom = doo, .per_cpu_lists = pcp },
                       new_core = { .core = MODEL_V2_CONTROLLER, .params = &cp, .deflate_on_oom = doo, .per_cpu_lists = pcp };

        if (family)
                return replay(family, seed, seconds, &p, run_old && !run_new ? &old_core : &new_core);

        FamilyFigures old_all[_FAMILY_MAX], new_all[_FAMILY_MAX];
        bool ran[_FAMILY_MAX];
        if (run_old) {
                if (!run_core(&p, &old_core, draws, seconds, tuning_only, old_all, ran))
                        return EXIT_FAILURE;
                print_core_table(MODEL_V2_ESTIMATOR, &p, draws, seconds, old_all, ran);
        }
        if (run_new) {
                if (!run_core(&p, &new_core, draws, seconds, tuning_only, new_all, ran))
                        return EXIT_FAILURE;
                print_core_table(MODEL_V2_CONTROLLER, &p, draws, seconds, new_all, ran);
        }
        if (run_old && run_new)
                print_side_by_side(old_all, new_all, ran);
        if (write_to && run_old && !run_new && !tuning_only) {
                char how[128];
                snprintf(how, sizeof(how), "model-bench --draws %u --seconds %.0f --core estimator", draws, seconds);
                write_holdout(write_to, old_all, how);
        }
        if (holdout && !tuning_only) {
                if (run_old) {
                        printf("Today's estimator:\n");
                        compare_holdout(holdout, old_all);
                }
                if (run_new) {
                        printf("\nThe cost controller:\n");
                        compare_holdout(holdout, new_all);
                }
        }
        return EXIT_SUCCESS;
}
