/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/model/scenario.h"

#include <math.h>

#include "common/macro.h"

int scenario_run(const GuestModelConfig *cfg,
                 const RsPolicy *policy,
                 unsigned ticks,
                 double tolerance,
                 scenario_tick_fn on_tick,
                 void *userdata,
                 ScenarioResult *ret) {
        GuestModel m;
        RsGuest *g = NULL;
        RsState prev_state = _RS_STATE_MAX;
        int r;

        *ret = (ScenarioResult) { .min_target = UINT64_MAX, .final_error = 1e9 };
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
                if (d.state == RS_STATE_EMERGENCY && prev_state != RS_STATE_EMERGENCY)
                        ret->emergencies++;
                prev_state = d.state;
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

                guest_model_set_target(&m, d.target);
                guest_model_step(&m);
        }

        RsDecision d;
        rs_guest_decide(g, m.now_usec, &d);
        ret->ticks = ticks;
        ret->oom_kills = m.oom_kills;
        ret->final_estimate = d.estimate;
        ret->final_target = d.target;
        ret->final_ws = guest_model_working_set(&m);
        ret->final_state = d.state;
        ret->streaming = rs_guest_estimate(g)->streaming;
        if (rs_known(d.estimate))
                ret->final_error = fabs((double) d.estimate - (double) ret->final_ws) / (double) ret->final_ws;
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
