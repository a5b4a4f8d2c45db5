/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/model/scenario.h"

#include <math.h>
#include <stdio.h>

#include "common/macro.h"
#include "policies/actuation.h"

void scenario_meter_init(ScenarioMeter *mt) {
        *mt = (ScenarioMeter) { .state = _RS_STATE_MAX };
}

static ScenarioCycle *current_cycle(ScenarioMeter *mt) {
        if (mt->n_cycles == 0 || mt->n_cycles > SCENARIO_CYCLES_MAX)
                return NULL;
        return &mt->cycles[mt->n_cycles - 1];
}

const ScenarioCycle *scenario_meter_cycle(const ScenarioMeter *mt) {
        return current_cycle((ScenarioMeter *) mt);
}

void scenario_meter_decision(ScenarioMeter *mt, const GuestModel *m, const RsDecision *d) {
        RsState prev = mt->state;

        mt->state = d->state;
        if (d->state == RS_STATE_PROBE && prev != RS_STATE_PROBE) {
                mt->probe_entries++;
                /* A new cycle where the core starts one: from LEARN (also before any
                 * decision) or HOLD. */
                if (prev == RS_STATE_LEARN || prev == RS_STATE_HOLD || prev == _RS_STATE_MAX) {
                        mt->n_cycles++;
                        ScenarioCycle *c = current_cycle(mt);
                        if (c)
                                *c = (ScenarioCycle) {
                                        .start_tick = m->tick,
                                        .from = prev == _RS_STATE_MAX ? RS_STATE_LEARN : prev,
                                        .ws = guest_model_working_set(m),
                                };
                }
        }
        ScenarioCycle *c = current_cycle(mt);
        if (d->state == RS_STATE_EMERGENCY && prev != RS_STATE_EMERGENCY) {
                mt->emergencies++;
                if (c)
                        c->emergencies++;
        }
        if (c && d->state == RS_STATE_PROBE)
                c->probe_ticks++;
        if (d->state == RS_STATE_HOLD && mt->first_hold_tick == 0)
                mt->first_hold_tick = MAX(m->tick, 1u);
}

void scenario_meter_step(ScenarioMeter *mt, const GuestModel *m) {
        double dt = (double) m->cfg.interval_usec / USEC_PER_SEC;
        bool deficit = m->hot_evicted > SCENARIO_DEFICIT_TICK;

        mt->ticks++;
        mt->sim_sec += dt;
        mt->extra_sec += m->step_extra_sec;
        mt->refaults += m->step_refaults;
        mt->swapins += m->step_swapins;
        mt->evicted_byte_sec += m->hot_evicted * dt;
        if (mt->first_hold_tick == 0) {
                mt->first_max_deficit = MAX(mt->first_max_deficit, m->hot_evicted);
                mt->first_deficit_ticks += deficit;
                mt->first_extra_sec += m->step_extra_sec;
        } else {
                mt->sim_sec_after_first_hold += dt;
                mt->extra_sec_after_first_hold += m->step_extra_sec;
        }

        ScenarioCycle *c = current_cycle(mt);
        if (!c)
                return;
        c->ticks++;
        c->deficit_ticks += deficit;
        c->max_deficit = MAX(c->max_deficit, m->hot_evicted);
        c->evicted_byte_sec += m->hot_evicted * dt;
        c->refaults += m->step_refaults;
        c->swapins += m->step_swapins;
        c->extra_sec += m->step_extra_sec;
        if (guest_model_working_set(m) != c->ws)
                c->ws_changed = true;
}

unsigned scenario_meter_cycles_between(const ScenarioMeter *mt, unsigned from, unsigned to) {
        unsigned n = 0;
        for (unsigned i = 0; i < MIN(mt->n_cycles, (unsigned) SCENARIO_CYCLES_MAX); i++)
                n += mt->cycles[i].start_tick >= from && mt->cycles[i].start_tick < to;
        return n;
}

void scenario_meter_print(const ScenarioMeter *mt, const char *prefix) {
        for (unsigned i = 0; i < MIN(mt->n_cycles, (unsigned) SCENARIO_CYCLES_MAX); i++) {
                const ScenarioCycle *c = &mt->cycles[i];
                printf("%s cycle %u from %s at tick %u: %u ticks (%u probing), %u with a deficit, max %.1f MiB, "
                       "%.0f pages refaulted, %.0f swapped in, %.2f s extra, %u emergencies%s\n",
                       prefix, i + 1, rs_state_to_string(c->from), c->start_tick, c->ticks, c->probe_ticks,
                       c->deficit_ticks, c->max_deficit / MIB, c->refaults, c->swapins, c->extra_sec, c->emergencies,
                       c->ws_changed ? " (working set changed)" : "");
        }
}

static void summarize(ScenarioResult *r) {
        const ScenarioMeter *mt = &r->meter;

        r->sim_sec = mt->sim_sec;
        r->extra_sec = mt->extra_sec;
        r->refaults = mt->refaults;
        r->swapins = mt->swapins;
        r->evicted_byte_sec = mt->evicted_byte_sec;
        r->slowdown = mt->sim_sec > 0 ? mt->extra_sec / mt->sim_sec : 0;
        r->slowdown_after_first_hold = mt->sim_sec_after_first_hold > 0
                ? mt->extra_sec_after_first_hold / mt->sim_sec_after_first_hold : 0;
        r->probe_cycles = mt->n_cycles;
        for (unsigned i = 0; i < MIN(mt->n_cycles, (unsigned) SCENARIO_CYCLES_MAX); i++) {
                const ScenarioCycle *c = &mt->cycles[i];
                if (r->converged_at > 0 && c->start_tick >= r->converged_at)
                        r->probe_cycles_after_convergence++;
                r->worst_cycle_refaults = MAX(r->worst_cycle_refaults, c->refaults);
                if (c->from == RS_STATE_HOLD && !c->ws_changed) {
                        r->reprobes++;
                        r->worst_reprobe_deficit = MAX(r->worst_reprobe_deficit, c->max_deficit);
                        r->worst_reprobe_deficit_ticks = MAX(r->worst_reprobe_deficit_ticks, c->deficit_ticks);
                        r->worst_reprobe_refaults = MAX(r->worst_reprobe_refaults, c->refaults);
                }
        }
}

int scenario_run(const GuestModelConfig *cfg,
                 const RsPolicy *policy,
                 unsigned ticks,
                 double tolerance,
                 scenario_tick_fn on_tick,
                 void *userdata,
                 ScenarioResult *ret) {
        return scenario_run_opts(cfg, policy, ticks, tolerance, NULL, on_tick, userdata, ret);
}

int scenario_run_opts(const GuestModelConfig *cfg,
                      const RsPolicy *policy,
                      unsigned ticks,
                      double tolerance,
                      const ScenarioOptions *opts,
                      scenario_tick_fn on_tick,
                      void *userdata,
                      ScenarioResult *ret) {
        static const ScenarioOptions defaults = {};
        GuestModel m;
        RsGuest *g = NULL;
        int r;

        if (!opts)
                opts = &defaults;
        *ret = (ScenarioResult) { .min_target = UINT64_MAX, .final_error = 1e9 };
        scenario_meter_init(&ret->meter);
        guest_model_init(&m, cfg);
        r = rs_guest_new(&g, policy, cfg->boot_bytes);
        if (r < 0)
                return r;

        for (unsigned t = 0; t < ticks; t++) {
                RsSample s;
                RsDecision d;

                guest_model_sample(&m, &s);
                ret->lies += m.lied;
                rs_guest_feed(g, &s, m.now_usec + USEC_PER_SEC); /* any monotonic clock */
                rs_guest_decide(g, m.now_usec + USEC_PER_SEC, &d);

                const RsObservation *o = rs_guest_observation(g);
                ret->max_rate_seen = MAX(ret->max_rate_seen, o->useful);
                scenario_meter_decision(&ret->meter, &m, &d);
                ret->min_target = MIN(ret->min_target, d.target);
                ret->max_target = MAX(ret->max_target, d.target);
                ret->floor = d.floor;

                uint64_t ws = guest_model_working_set(&m);
                bool within = rs_known(d.estimate) &&
                              fabs((double) d.estimate - (double) ws) <= tolerance * (double) ws;
                if (!within)
                        ret->converged_at = 0;
                else if (ret->converged_at == 0)
                        ret->converged_at = t + 1;

                if (on_tick && !on_tick(&m, g, &d, userdata)) {
                        rs_guest_free(g);
                        return -EIO;
                }

                if (opts->actuate) {
                        RsActuationInput in = {
                                .current = guest_model_actual(&m),
                                .target = d.target,
                                .urgent = d.urgent,
                                .fine = d.fine,
                                .estimate = d.estimate,
                                .floor = d.floor,
                                .max = d.max,
                                .margin_percent = policy->margin_percent,
                                .boot_bytes = cfg->boot_bytes,
                        };
                        RsActuationPlan plan;
                        r = rs_actuation_plan(policy, &in, &plan);
                        if (r < 0) {
                                rs_guest_free(g);
                                return r;
                        }
                        if (!plan.skip && plan.set_balloon)
                                guest_model_set_target(&m, plan.balloon_target);
                } else
                        guest_model_set_target(&m, d.target);
                guest_model_step(&m);
                scenario_meter_step(&ret->meter, &m);
        }

        RsDecision d;
        rs_guest_decide(g, m.now_usec, &d);
        ret->ticks = ticks;
        ret->oom_kills = m.oom_kills;
        ret->emergencies = ret->meter.emergencies;
        ret->final_estimate = d.estimate;
        ret->final_target = d.target;
        ret->final_ws = guest_model_working_set(&m);
        ret->final_state = d.state;
        ret->streaming = rs_guest_estimate(g)->streaming;
        if (rs_known(d.estimate))
                ret->final_error = fabs((double) d.estimate - (double) ret->final_ws) / (double) ret->final_ws;
        summarize(ret);
        rs_guest_free(g);
        return 0;
}

static uint64_t split(uint64_t *x) {
        /* splitmix64 */
        uint64_t z = (*x += UINT64_C(0x9E3779B97F4A7C15));
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        return z ^ (z >> 31);
}

/* A size in [lo, hi] MiB, whole MiB. */
static uint64_t pick(uint64_t *x, uint64_t lo_mib, uint64_t hi_mib) {
        return (lo_mib + split(x) % (hi_mib - lo_mib + 1)) * MIB;
}

void scenario_config(ScenarioKind kind, uint64_t seed, bool randomize, GuestModelConfig *cfg, ScenarioSpec *spec) {
        uint64_t x = seed * 7919 + (uint64_t) kind;
        GuestModelPhase *p0 = &cfg->phases[0], *p1 = &cfg->phases[1];

        guest_model_config_default(cfg, seed);
        *spec = (ScenarioSpec) { .ticks = 200, .has_working_set = true };
        /* The model's noise comes from the seed too (its own stream, so the sizes drawn
         * below stay those of earlier runs): 2-15 % relative jitter of every rate. */
        uint64_t xn = seed * 104729 + 17;
        cfg->noise = 0.02 + 0.13 * (double) (split(&xn) % 1001) / 1000.0;
        if (randomize) {
                cfg->boot_bytes = pick(&x, 1536, 4096);
                cfg->kernel_bytes = pick(&x, 60, 160);
        }
        uint64_t boot = cfg->boot_bytes;
        /* A hot set between 15 % and 45 % of the guest when randomized. */
        uint64_t hot = randomize ? pick(&x, boot / MIB * 15 / 100, boot / MIB * 45 / 100) : 500 * MIB;

        switch (kind) {
        case SCENARIO_STEADY_ANON:
                spec->name = "steady-anon";
                cfg->swap_bytes = 1 * GIB;
                p0->anon_hot = hot;
                p0->file_cold = randomize ? pick(&x, 0, 300) : 200 * MIB;
                break;
        case SCENARIO_FILE_BALLOON:
        case SCENARIO_FILE_AGENT:
                spec->name = kind == SCENARIO_FILE_AGENT ? "file-agent" : "file-balloon";
                cfg->agent = kind == SCENARIO_FILE_AGENT;
                p0->anon_hot = randomize ? pick(&x, 20, 100) : 50 * MIB;
                p0->file_hot = hot;
                p0->file_cold = randomize ? pick(&x, 0, 400) : 300 * MIB;
                break;
        case SCENARIO_MIXED:
                spec->name = "mixed";
                cfg->agent = true;
                cfg->swap_bytes = 1 * GIB;
                p0->anon_hot = hot / 2;
                p0->anon_cold = randomize ? pick(&x, 0, 200) : 100 * MIB;
                p0->file_hot = hot / 2;
                p0->file_cold = randomize ? pick(&x, 0, 300) : 200 * MIB;
                break;
        case SCENARIO_DOUBLING:
                spec->name = "doubling";
                cfg->agent = true;
                cfg->swap_bytes = 2 * GIB;
                p0->anon_hot = MIN(hot, boot * 2 / 5) * 3 / 4;
                *p1 = *p0;
                p1->anon_hot = p0->anon_hot * 2;
                p1->start_tick = spec->change_tick = 100;
                cfg->n_phases = 2;
                spec->ticks = 220;
                break;
        case SCENARIO_SHRINKING:
                spec->name = "shrinking";
                cfg->agent = true;
                cfg->swap_bytes = 1 * GIB;
                p0->anon_hot = hot;
                p0->file_hot = hot / 4;
                *p1 = *p0;
                p1->anon_hot = hot / 2;
                p1->file_hot = hot / 8;
                p1->start_tick = spec->change_tick = 100;
                cfg->n_phases = 2;
                /* the shrink is only found by the next probe: one hold time later */
                spec->ticks = 260;
                break;
        case SCENARIO_STREAMING:
                spec->name = "streaming";
                cfg->agent = true;
                cfg->swap_bytes = 1 * GIB;
                p0->anon_hot = hot * 2 / 3;
                p0->file_hot = hot / 3;
                p0->stream_bytes_per_sec = (randomize ? (double) pick(&x, 20, 200) : 50.0 * MIB);
                break;
        case SCENARIO_STREAMING_LATE:
                spec->name = "streaming-late";
                cfg->agent = true;
                cfg->swap_bytes = 1 * GIB;
                p0->anon_hot = hot * 2 / 3;
                p0->file_hot = hot / 3;
                *p1 = *p0;
                p1->stream_bytes_per_sec = (randomize ? (double) pick(&x, 20, 200) : 50.0 * MIB);
                p1->start_tick = spec->change_tick = 80;
                cfg->n_phases = 2;
                break;
        case SCENARIO_IDLE:
                spec->name = "idle";
                spec->has_working_set = false;
                p0->anon_hot = randomize ? pick(&x, 5, 40) : 20 * MIB;
                p0->file_cold = randomize ? pick(&x, 0, 100) : 50 * MIB;
                break;
        case SCENARIO_REBOOT:
                spec->name = "reboot";
                cfg->agent = true;
                cfg->swap_bytes = 1 * GIB;
                p0->anon_hot = hot * 3 / 4;
                p0->file_hot = hot / 4;
                cfg->reboot_tick = spec->change_tick = 90;
                break;
        case SCENARIO_LIAR:
                spec->name = "lying-guest";
                cfg->agent = true;
                cfg->swap_bytes = 1 * GIB;
                p0->anon_hot = hot / 2;
                p0->file_hot = hot / 2;
                cfg->lie_probability = 0.15;
                break;
        case SCENARIO_GROWTH_NO_SWAP:
                spec->name = "growth-no-swap";
                cfg->agent = true;
                p0->anon_hot = hot / 2;
                p0->file_hot = hot / 4;
                *p1 = *p0;
                p1->anon_hot = hot;
                p1->start_tick = spec->change_tick = 100;
                p1->ramp_ticks = 20;
                cfg->n_phases = 2;
                spec->ticks = 220;
                break;
        case SCENARIO_HIDING:
                spec->name = "hiding-guest";
                cfg->swap_bytes = 1 * GIB;
                cfg->hides_pressure = true;
                p0->anon_hot = hot;
                p0->file_cold = randomize ? pick(&x, 0, 300) : 200 * MIB;
                break;
        default:
                break;
        }
}
