/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/model/guest-model.h"

#include <math.h>
#include <string.h>

#include "common/macro.h"

#define PAGE 4096.0
#define MIN_CACHE (4.0 * MIB)          /* reclaim never empties the page cache entirely */
#define TOTAL_OVERHEAD (51.0 * MIB)    /* stat-total-memory sits this far below the balloon */
#define REFAULT_AMPLIFICATION 1.5      /* a cyclic pass over a set that does not fit misses more than the deficit */
#define FILE_PUSHBACK 0.5              /* share of a hot-file deficit the balloon cannot take */
#define REFAULT_SERVICE_SEC 100e-6     /* default workload time per hot refault: a swap-in or a file read */

/* xorshift64*: deterministic and good enough for jitter. */
static uint64_t rng_next(GuestModel *m) {
        uint64_t x = m->rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        m->rng = x;
        return x * UINT64_C(2685821657736338717);
}

/* Uniform in [0, 1). */
static double rng_unit(GuestModel *m) {
        return (double) (rng_next(m) >> 11) / 9007199254740992.0;
}

static double jitter(GuestModel *m, double v) {
        return v * (1.0 + m->cfg.noise * (2.0 * rng_unit(m) - 1.0));
}

void guest_model_config_default(GuestModelConfig *cfg, uint64_t seed) {
        *cfg = (GuestModelConfig) {
                .seed = seed,
                .boot_bytes = 2 * GIB,
                .kernel_bytes = 100 * MIB,
                .min_free_bytes = 16 * MIB,
                .interval_usec = 10 * USEC_PER_SEC,
                .pass_sec = 10,
                .noise = 0.05,
                .refault_service_sec = REFAULT_SERVICE_SEC,
                .n_phases = 1,
                .host_disk_stats = true,
        };
}

static void apply_phase(GuestModel *m) {
        const GuestModelConfig *c = &m->cfg;
        unsigned p = 0;

        for (unsigned i = 0; i < c->n_phases; i++)
                if (c->phases[i].start_tick <= m->tick)
                        p = i;
        const GuestModelPhase *cur = &c->phases[p];
        double f = 1.0;
        if (p > 0 && cur->ramp_ticks > 0 && m->tick < cur->start_tick + cur->ramp_ticks)
                f = (double) (m->tick - cur->start_tick + 1) / (cur->ramp_ticks + 1);
        const GuestModelPhase *prev = p > 0 ? &c->phases[p - 1] : cur;

#define MIX(field) ((double) prev->field + f * ((double) cur->field - (double) prev->field))
        m->anon_hot = MIX(anon_hot);
        m->anon_cold = MIX(anon_cold);
        m->file_hot = MIX(file_hot);
        m->file_cold = MIX(file_cold);
        m->stream_rate = MIX(stream_bytes_per_sec);
#undef MIX
}

void guest_model_init(GuestModel *m, const GuestModelConfig *cfg) {
        *m = (GuestModel) { .cfg = *cfg, .cold_cache_b = -1 };
        m->rng = cfg->seed * UINT64_C(0x9E3779B97F4A7C15) + 1;
        if (m->cfg.n_phases == 0)
                m->cfg.n_phases = 1;
        m->target = m->actual = cfg->boot_bytes;
        apply_phase(m);
        m->psi_some_avg10 = m->psi_full_avg10 = 0;
}

void guest_model_set_target(GuestModel *m, uint64_t target) {
        m->target = MIN(target, m->cfg.boot_bytes);
}

uint64_t guest_model_working_set(const GuestModel *m) {
        double ws = (double) m->cfg.kernel_bytes + (double) m->cfg.min_free_bytes + MIN_CACHE + m->anon_hot + m->file_hot;
        if (m->cfg.swap_bytes == 0)
                ws += m->anon_cold; /* without swap, cold anonymous pages cannot leave */
        return (uint64_t) ws;
}

double guest_model_refault_service_sec(const GuestModelConfig *cfg) {
        return cfg->refault_service_sec > 0 ? cfg->refault_service_sec : REFAULT_SERVICE_SEC;
}

uint64_t guest_model_actual(const GuestModel *m) {
        return m->actual;
}

/* Anonymous bytes that must stay resident: what swap cannot hold. */
static double anon_must_stay(const GuestModel *m) {
        double anon = m->anon_hot + m->anon_cold;
        return MAX(0.0, anon - (double) m->cfg.swap_bytes);
}

/* Where the balloon settles for a target: it cannot take pages the guest cannot free, and
 * it only gets part of what reading processes keep faulting back in. */
static double balloon_reach(const GuestModel *m, double target) {
        const GuestModelConfig *c = &m->cfg;
        double base = (double) c->kernel_bytes + (double) c->min_free_bytes;
        double hard_min = base + anon_must_stay(m) + MIN_CACHE;
        double reach = MIN(target, (double) c->boot_bytes);

        double anon_resident_hot = c->swap_bytes > 0 ? m->anon_hot : m->anon_hot + m->anon_cold;
        double soft = base + anon_resident_hot + m->file_hot;
        if (reach < soft) {
                double deficit = soft - reach;
                double hot = m->anon_hot + m->file_hot;
                double file_share = c->swap_bytes > 0 && hot > 0 ? m->file_hot / hot : 1.0;
                reach += (c->file_no_pushback ? 0.0 : FILE_PUSHBACK) * deficit * file_share;
        }
        return MIN(MAX(reach, hard_min), (double) c->boot_bytes);
}

void guest_model_step(GuestModel *m) {
        const GuestModelConfig *c = &m->cfg;
        double dt = (double) c->interval_usec / USEC_PER_SEC;

        m->tick++;
        m->now_usec += c->interval_usec;
        apply_phase(m);

        if (c->reboot_tick != 0 && m->tick == c->reboot_tick) {
                memset(m->c, 0, sizeof(m->c));
                m->psi_some_avg10 = m->psi_full_avg10 = 0;
                m->prev_cold_resident = 0;
        }

        /* Anonymous memory that grew past what fits: deflate-on-oom gives pages back,
         * otherwise the OOM killer runs. */
        double base = (double) c->kernel_bytes + (double) c->min_free_bytes;
        double must = anon_must_stay(m) + MIN_CACHE;
        double actual = balloon_reach(m, (double) m->target);
        if (c->inflate_bytes_per_sec > 0)
                actual = MAX(actual, (double) m->actual - c->inflate_bytes_per_sec * dt);
        if (must > (double) m->actual - base) {
                if (c->deflate_on_oom)
                        m->deflate_on_oom_events++;
                else
                        m->oom_kills++;
        }
        m->actual = (uint64_t) actual;

        /* Who gets the memory: hot sets first, then cold anonymous, then cold cache. */
        double room = actual - base;
        double hot = m->anon_hot + m->file_hot;
        double resident_anon_cold = c->swap_bytes > 0 ? 0.0 : m->anon_cold;
        double for_hot = room - resident_anon_cold - MIN_CACHE;
        double d_anon = 0, d_file = 0, spare = 0;
        if (for_hot >= hot) {
                spare = for_hot - hot;
                if (c->swap_bytes > 0) {
                        resident_anon_cold = MIN(m->anon_cold, spare);
                        spare -= resident_anon_cold;
                }
        } else {
                double d = hot - MAX(0.0, for_hot);
                if (c->swap_bytes > 0 && hot > 0)
                        d_anon = d * m->anon_hot / hot;
                d_file = MIN(d - d_anon, m->file_hot);
        }
        double cold_cache = m->stream_rate > 0 ? spare : MIN(m->file_cold, spare);
        if (c->cold_refill_bytes_per_sec > 0 && m->stream_rate <= 0 && m->cold_cache_b >= 0)
                cold_cache = MIN(cold_cache, m->cold_cache_b + c->cold_refill_bytes_per_sec * dt);
        m->cold_cache_b = cold_cache;
        spare -= cold_cache;
        double hot_file_resident = m->file_hot - d_file;

        m->hot_deficit_anon = d_anon;
        m->hot_deficit_file = d_file;
        m->swapped_b = m->anon_cold - (c->swap_bytes > 0 ? resident_anon_cold : m->anon_cold);
        m->free_b = (double) c->min_free_bytes + spare;
        m->cache_b = hot_file_resident + cold_cache + MIN_CACHE;
        double thrash = m->file_hot > 0 ? MIN(1.0, 4.0 * d_file / m->file_hot) : 0.0;
        m->available_b = spare + cold_cache + MIN_CACHE / 2 + hot_file_resident * (1.0 - thrash);

        /* Rates, pages per second. */
        double touch_anon = m->anon_hot / PAGE / c->pass_sec;
        double touch_file = m->file_hot / PAGE / c->pass_sec;
        double refault_anon = m->anon_hot > 0 ? touch_anon * MIN(1.0, REFAULT_AMPLIFICATION * d_anon / m->anon_hot) : 0;
        double refault_file_hot = m->file_hot > 0 ? touch_file * MIN(1.0, REFAULT_AMPLIFICATION * d_file / m->file_hot) : 0;
        refault_anon = jitter(m, refault_anon);
        refault_file_hot = jitter(m, refault_file_hot);
        double stream = jitter(m, m->stream_rate / PAGE);
        double background = 3.0 * rng_unit(m);  /* a few refaults come from anywhere */
        double cold_dropped = MAX(0.0, m->prev_cold_resident - (cold_cache + resident_anon_cold)) / PAGE / dt;
        /* One reader waits for each hot refault (a swap-in or a read, refault service time
         * each): the workload cannot refault faster than one page per service time. Below
         * that, the rates are open loop (the workload's sweep is not slowed down); at it, a
         * deep squeeze refaults at the device's pace while the same work takes longer. The
         * extra workload seconds count every refault the work needed (wanted x service
         * time: what the same work costs more), the counters what happened in the interval. */
        double svc = guest_model_refault_service_sec(c);
        double cap = 1.0 / svc; /* pages/s */
        double wanted = refault_anon + refault_file_hot;
        if (wanted > cap) {
                refault_anon *= cap / wanted;
                refault_file_hot *= cap / wanted;
        }
        double spare_io = MAX(0.0, cap - (refault_anon + refault_file_hot)); /* pages/s left for recovery */

        /* Evicted hot pages that fit again come back when the workload touches them: a
         * pass's worth per pass_sec at most, in what the reader has left after thrashing. */
        double recovered = 0;             /* pages/s paged back in from swap, nothing pushed out for them */
        if (c->swap_bytes > 0) {
                bool paced = c->swap_recovery_bytes_per_sec > 0;
                unsigned every = paced ? MAX(c->swap_recovery_every, 1u) : 1;
                double rate = paced ? c->swap_recovery_bytes_per_sec : MIN(touch_anon, spare_io) * PAGE;
                if (d_anon >= m->anon_on_swap)
                        m->anon_on_swap = d_anon;
                else if (m->tick % every == 0) {
                        double back = MIN(m->anon_on_swap - d_anon, rate * dt * every);
                        m->anon_on_swap -= back;
                        recovered = back / PAGE / dt;
                        spare_io = MAX(0.0, spare_io - recovered);
                }
        }
        double recovered_file = 0; /* pages/s of dropped hot file pages read back */
        if (d_file >= m->file_dropped)
                m->file_dropped = d_file;
        else {
                double back = MIN(m->file_dropped - d_file, MIN(touch_file, spare_io) * PAGE * dt);
                m->file_dropped -= back;
                recovered_file = back / PAGE / dt;
        }
        m->prev_cold_resident = cold_cache + resident_anon_cold;
        /* Hot pages not read back yet leave their room free until they are. */
        double unrecovered = (m->file_dropped - d_file) + (c->swap_bytes > 0 ? MAX(0.0, m->anon_on_swap - d_anon) : 0);
        m->free_b += unrecovered;
        m->cache_b -= m->file_dropped - d_file;
        m->swapped_b += MAX(m->anon_on_swap, d_anon);

        /* Ground truth: what this interval cost the workload. */
        m->hot_evicted = d_anon + d_file;
        m->step_swapins = (refault_anon + recovered) * dt;
        m->step_refaults = (refault_anon + recovered + refault_file_hot + recovered_file) * dt;
        m->step_extra_sec = (MAX(wanted, refault_anon + refault_file_hot) + recovered + recovered_file) * dt * svc;
        m->total_refaults += m->step_refaults;
        m->total_swapins += m->step_swapins;
        m->total_extra_sec += m->step_extra_sec;
        m->total_evicted_byte_sec += m->hot_evicted * dt;

        double refault_file = refault_file_hot + recovered_file + 0.9 * stream + background;
        double activate_file = 0.95 * (refault_file_hot + recovered_file) + 0.002 * stream + background / 2;
        /* Pages read back after a squeeze go into the room the deflation freed: nothing is
         * evicted for them (the recovered swap-ins neither). */
        double steal = refault_anon + (refault_file - recovered_file) + cold_dropped;
        double severe = hot > 0 ? (d_anon + d_file) / hot : 0;
        double direct = severe > 0.2 ? 0.3 * steal : 0;
        double stalls = severe > 0.2 ? 0.01 * (refault_anon + refault_file_hot) : 0;
        double majflt = refault_anon + recovered + 0.5 * rng_unit(m);
        double swapout = c->swap_bytes > 0 ? refault_anon + cold_dropped * (m->anon_cold > 0 ? 0.3 : 0) : 0;

        m->c[RS_COUNTER_REFAULT_ANON] += (refault_anon + recovered) * dt;
        m->c[RS_COUNTER_REFAULT_FILE] += refault_file * dt;
        m->c[RS_COUNTER_ACTIVATE_ANON] += 0.95 * (refault_anon + recovered) * dt;
        m->c[RS_COUNTER_ACTIVATE_FILE] += activate_file * dt;
        m->c[RS_COUNTER_PGSTEAL_KSWAPD] += (steal - direct) * dt;
        m->c[RS_COUNTER_PGSTEAL_DIRECT] += direct * dt;
        m->c[RS_COUNTER_PGSCAN_KSWAPD] += 1.3 * (steal - direct) * dt;
        m->c[RS_COUNTER_PGSCAN_DIRECT] += 1.3 * direct * dt;
        m->c[RS_COUNTER_PSWPIN] += (refault_anon + recovered) * dt;
        m->c[RS_COUNTER_PSWPOUT] += swapout * dt;
        m->c[RS_COUNTER_PGMAJFAULT] += majflt * dt;
        m->c[RS_COUNTER_ALLOCSTALL] += stalls * dt;
        m->c[RS_COUNTER_OOM_KILL] = m->oom_kills;
        m->c[RS_COUNTER_MAJOR_FAULTS] = m->c[RS_COUNTER_PGMAJFAULT];
        m->c[RS_COUNTER_MINOR_FAULTS] += jitter(m, 800.0) * dt;
        m->c[RS_COUNTER_SWAP_IN] = m->c[RS_COUNTER_PSWPIN] * PAGE;
        m->c[RS_COUNTER_SWAP_OUT] = m->c[RS_COUNTER_PSWPOUT] * PAGE;
        m->c[RS_COUNTER_OOM_KILLS] = m->oom_kills;
        m->c[RS_COUNTER_ALLOC_STALLS] = m->c[RS_COUNTER_ALLOCSTALL];
        m->c[RS_COUNTER_ASYNC_SCANS] = m->c[RS_COUNTER_PGSCAN_KSWAPD];
        m->c[RS_COUNTER_DIRECT_SCANS] = m->c[RS_COUNTER_PGSCAN_DIRECT];
        m->c[RS_COUNTER_ASYNC_RECLAIMS] = m->c[RS_COUNTER_PGSTEAL_KSWAPD];
        m->c[RS_COUNTER_DIRECT_RECLAIMS] = m->c[RS_COUNTER_PGSTEAL_DIRECT];
        /* Every swap-in and file refault is a read QEMU serves, whatever the guest says. */
        m->c[RS_COUNTER_HOST_DISK_READ] += (refault_anon + recovered + refault_file) * PAGE * dt;

        /* PSI: tasks stall on refaults of pages that were part of the working set (and on
         * those coming back after a squeeze), not on first reads of a stream. */
        double stalled = touch_anon + touch_file > 0
                ? MIN(0.95, 0.9 * (refault_anon + refault_file_hot + recovered + recovered_file) / (touch_anon + touch_file)) : 0;
        stalled = MAX(stalled, severe > 0.2 ? 0.5 : 0);
        double decay = exp(-dt / 10.0);
        m->psi_some_avg10 = m->psi_some_avg10 * decay + 100.0 * stalled * (1 - decay);
        m->psi_full_avg10 = m->psi_full_avg10 * decay + 40.0 * stalled * (1 - decay);
        m->c[RS_COUNTER_PSI_SOME_TOTAL] += stalled * dt * USEC_PER_SEC;
        m->c[RS_COUNTER_PSI_FULL_TOTAL] += 0.4 * stalled * dt * USEC_PER_SEC;
}

double guest_model_hot_refault_rate(const GuestModel *m) {
        const GuestModelConfig *c = &m->cfg;
        double r = 0;
        if (m->anon_hot > 0)
                r += m->anon_hot / PAGE / c->pass_sec * MIN(1.0, REFAULT_AMPLIFICATION * m->hot_deficit_anon / m->anon_hot);
        if (m->file_hot > 0)
                r += m->file_hot / PAGE / c->pass_sec * MIN(1.0, REFAULT_AMPLIFICATION * m->hot_deficit_file / m->file_hot);
        return MIN(r, 1.0 / guest_model_refault_service_sec(c));
}

static void lie(GuestModel *m, RsSample *s) {
        switch (rng_next(m) % 4) {
        case 0: /* free above total */
                s->level[RS_LEVEL_FREE] = s->level[RS_LEVEL_TOTAL] + GIB;
                break;
        case 1: { /* one counter going backwards */
                static const RsCounter victims[] = { RS_COUNTER_MAJOR_FAULTS, RS_COUNTER_SWAP_IN, RS_COUNTER_REFAULT_FILE };
                RsCounter v = victims[rng_next(m) % ARRAY_SIZE(victims)];
                if (rs_known(s->counter[v]))
                        s->counter[v] /= 2;
                break;
        }
        case 2: /* absurd values */
                s->level[RS_LEVEL_AVAILABLE] = UINT64_C(1) << 62;
                if (rs_known(s->counter[RS_COUNTER_MAJOR_FAULTS]))
                        s->counter[RS_COUNTER_MAJOR_FAULTS] += UINT64_C(1) << 50;
                if (rs_known(s->counter[RS_COUNTER_REFAULT_ANON]))
                        s->counter[RS_COUNTER_REFAULT_ANON] += UINT64_C(1) << 55;
                break;
        default: /* a zero total and a cache larger than anything */
                s->level[RS_LEVEL_TOTAL] = 0;
                s->level[RS_LEVEL_DISK_CACHES] = UINT64_MAX - 1;
                break;
        }
}

void guest_model_sample(GuestModel *m, RsSample *s) {
        const GuestModelConfig *c = &m->cfg;

        rs_sample_init(s);
        double total = c->deflate_on_oom ? (double) c->boot_bytes : MAX(0.0, (double) m->actual - TOTAL_OVERHEAD);
        s->level[RS_LEVEL_TOTAL] = (uint64_t) total;
        s->level[RS_LEVEL_FREE] = (uint64_t) MIN(m->free_b, total);
        s->level[RS_LEVEL_AVAILABLE] = (uint64_t) MIN(m->available_b, total);
        s->level[RS_LEVEL_DISK_CACHES] = (uint64_t) MIN(m->cache_b, total);
        s->level[RS_LEVEL_BALLOON_ACTUAL] = m->actual;
        s->level[RS_LEVEL_BALLOON_TARGET] = m->target;

        static const RsCounter balloon_old[] = {
                RS_COUNTER_MAJOR_FAULTS, RS_COUNTER_MINOR_FAULTS, RS_COUNTER_SWAP_IN, RS_COUNTER_SWAP_OUT,
        };
        for (size_t i = 0; i < ARRAY_SIZE(balloon_old); i++)
                s->counter[balloon_old[i]] = (uint64_t) m->c[balloon_old[i]];
        if (c->new_balloon_stats)
                for (RsCounter i = RS_COUNTER_OOM_KILLS; i <= RS_COUNTER_DIRECT_RECLAIMS; i++)
                        s->counter[i] = (uint64_t) m->c[i];
        if (c->agent) {
                for (RsCounter i = RS_COUNTER_REFAULT_ANON; i <= RS_COUNTER_PSI_FULL_TOTAL; i++)
                        s->counter[i] = (uint64_t) m->c[i];
                s->level[RS_LEVEL_PSI_SOME_AVG10] = (uint64_t) (m->psi_some_avg10 * 100.0);
                s->level[RS_LEVEL_PSI_FULL_AVG10] = (uint64_t) (m->psi_full_avg10 * 100.0);
        }

        if (c->host_disk_stats)
                s->counter[RS_COUNTER_HOST_DISK_READ] = (uint64_t) m->c[RS_COUNTER_HOST_DISK_READ];
        if (c->hides_pressure) {
                s->counter[RS_COUNTER_MAJOR_FAULTS] = s->counter[RS_COUNTER_SWAP_IN] = 0;
                s->counter[RS_COUNTER_SWAP_OUT] = 0;
                s->level[RS_LEVEL_AVAILABLE] = s->level[RS_LEVEL_FREE] = (uint64_t) (total / 2);
                s->level[RS_LEVEL_DISK_CACHES] = 64 * MIB;
        }

        m->lied = false;
        if (c->lie_probability > 0 && rng_unit(m) < c->lie_probability) {
                lie(m, s);
                m->lied = true;
        }
}
