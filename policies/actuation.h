/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Turns a guest's target size into device requests for one interval.
 *
 * Guest memory = boot memory + plugged DIMMs + plugged virtio-mem - balloon. The balloon
 * target QEMU takes is the guest's total usable size, so "balloon target = X" means
 * "leave the guest X bytes", whatever is plugged.
 *
 * Rules:
 *   - the change per interval is capped by policy (% of current size, and bytes), except
 *     for urgent growth (backoff, grow, emergency), which is never slowed down;
 *   - a change smaller than the dead-band is skipped, unless urgent or a probe's fine step
 *     (the probe takes steps of 1-2 MiB near a knee: the dead-band would stop it);
 *   - virtio-mem sizes are multiples of its block size, and virtio-mem is never unplugged
 *     below estimate + margin: it has no deflate-on-oom safety net (guest-lab.md), so
 *     probing below that is the balloon's job;
 *   - with actuator=both, virtio-mem makes the coarse move (plugged rounded up to blocks)
 *     and the balloon trims to the exact size;
 *   - DIMMs are only hot-plugged to grow past what boot memory and virtio-mem can give,
 *     and only when the policy allows it; each is sized from the room the policy's max
 *     leaves (split over the free slots), never from maxmem's alone;
 *   - nothing any device is asked for takes the guest above its ceiling: the policy's max,
 *     and the arbitrated target when the host cut the guest's wish. A guest that does not
 *     inflate its balloon keeps what is plugged, so plugged memory (boot, DIMMs, virtio-mem)
 *     is held to the ceiling too, whatever the estimate says. The floor wins over the
 *     ceiling where block sizes make them collide. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "policies/policy.h"

typedef struct RsActuationInput {
        uint64_t current;          /* the guest's usable memory now (balloon actual) */
        uint64_t target;           /* where the decision core (after arbitration) wants it */
        bool urgent;               /* RsDecision.urgent */
        bool fine;                 /* RsDecision.fine: a probe step, made however small */
        uint64_t estimate;         /* RS_UNKNOWN allowed */
        uint64_t floor;            /* the guest's floor: never planned below */
        uint64_t max;              /* the policy's max for the guest (required) */
        uint64_t host_limit;       /* the arbitrated target when the host cut the guest's wish; 0 or RS_UNKNOWN: not cut */
        double margin_percent;     /* for the virtio-mem lower limit */
        uint64_t boot_bytes;       /* memory the guest booted with (without hotplug) */
        uint64_t dimm_bytes;       /* DIMM memory already plugged */
        uint64_t dimm_slot_bytes;  /* largest DIMM maxmem leaves room for per free slot (0: no DIMM hotplug) */
        unsigned dimm_slots_free;
        uint64_t vmem_plugged;     /* virtio-mem requested size now (0 if absent) */
        uint64_t vmem_max;         /* virtio-mem device maximum (0: no virtio-mem) */
        uint64_t vmem_block;       /* virtio-mem block size (0: no virtio-mem) */
} RsActuationInput;

typedef struct RsActuationPlan {
        bool skip;                 /* nothing to do this interval (dead-band or no change) */
        bool capped;               /* the per-interval cap shortened the move */
        uint64_t size;             /* the guest size this interval's plan reaches */
        bool set_balloon;
        uint64_t balloon_target;   /* bytes to leave the guest (QMP "balloon") */
        bool set_vmem;
        uint64_t vmem_requested;   /* virtio-mem requested-size, block-aligned */
        unsigned dimms_to_add;     /* DIMMs of dimm_bytes each to hot-plug first */
        uint64_t dimm_bytes;       /* the size of each DIMM to add */
        char reason[160];
} RsActuationPlan;

/* DIMM sizes are whole memory blocks: the guest onlines hot-plugged memory a block at a time. */
#define RS_DIMM_ALIGN_BYTES (128ULL * 1024 * 1024)


/* A balloon that stopped short of its target (the guest gives no more): the target to ask for
 * instead, so that the balloon stops pushing, or 0 to leave the one set. What the guest holds,
 * but never more than max: a guest that keeps memory above max keeps its last target, it is not
 * handed a new one at its size. */
uint64_t rs_actuation_stall_target(uint64_t actual, uint64_t balloon_target, uint64_t max);

/* 0, or -EINVAL for inconsistent input (max 0 included). */
int rs_actuation_plan(const RsPolicy *policy, const RsActuationInput *in, RsActuationPlan *ret);
