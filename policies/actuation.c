/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "policies/actuation.h"

#include <errno.h>
#include <stdio.h>

#include "common/macro.h"
#include "policies/rs-value.h"

static uint64_t align_up(uint64_t v, uint64_t a) {
        if (a == 0)
                return v;
        uint64_t r = v % a;
        return r == 0 ? v : v + (a - r);
}

static uint64_t align_down(uint64_t v, uint64_t a) {
        return a == 0 ? v : v - v % a;
}

/* The most a guest may be given this interval: max, lowered to host_limit when that is known. */
static uint64_t rs_actuation_ceiling(const RsActuationInput *in) {
        bool cut = in->host_limit != 0 && rs_known(in->host_limit);
        uint64_t ceiling = cut ? MIN(in->max, in->host_limit) : in->max;
        return MAX(ceiling, in->floor);
}

/* The most virtio-mem may hold above `fixed` without the guest passing the ceiling: whole
 * blocks below it, unless that leaves the guest under its floor (then the block that covers
 * the floor). */
static uint64_t vmem_ceiling(const RsActuationInput *in, uint64_t fixed, uint64_t ceiling) {
        uint64_t top = align_down(in->vmem_max, in->vmem_block);
        uint64_t below = ceiling > fixed ? align_down(ceiling - fixed, in->vmem_block) : 0;
        if (fixed + below < in->floor)
                below = align_up(in->floor - fixed, in->vmem_block);
        return MIN(below, top);
}

/* The size of each DIMM to add: the room the policy's max leaves past what boot memory, the
 * DIMMs and virtio-mem can hold, split over the free slots, and no more than maxmem allows. A
 * DIMM is never unplugged, so one sized from maxmem alone (tens of GiB) would hold the guest far
 * above its max for good. */
static uint64_t dimm_size(const RsActuationInput *in, uint64_t capacity) {
        if (in->dimm_slots_free == 0 || in->max <= capacity)
                return 0;
        uint64_t room = (in->max - capacity) / in->dimm_slots_free;
        return MIN(align_down(room, RS_DIMM_ALIGN_BYTES), in->dimm_slot_bytes);
}

uint64_t rs_actuation_stall_target(uint64_t actual, uint64_t balloon_target, uint64_t max) {
        uint64_t stop_at = MIN(actual, MAX(max, balloon_target));
        return stop_at > balloon_target ? stop_at : 0;
}

int rs_actuation_plan(const RsPolicy *policy, const RsActuationInput *in, RsActuationPlan *ret) {
        RsActuationPlan p = {};

        if (!policy || !in || !ret || in->boot_bytes == 0 || in->current == 0 || in->max == 0)
                return -EINVAL;
        if (in->vmem_max > 0 && (in->vmem_block == 0 || in->vmem_plugged > in->vmem_max))
                return -EINVAL;

        bool use_vmem = policy->actuator != RS_ACTUATOR_BALLOON && in->vmem_max > 0;
        bool use_balloon = policy->actuator != RS_ACTUATOR_VIRTIO_MEM || !use_vmem;

        /* 1. How far this interval goes: never past the ceiling. */
        uint64_t ceiling = rs_actuation_ceiling(in);
        uint64_t target = MIN(in->target, ceiling), cur = in->current;
        uint64_t delta = target > cur ? target - cur : cur - target;
        uint64_t dead_band = policy->dead_band_bytes;
        /* Plugged memory above the ceiling goes even when the size is where it should be: a
         * guest that keeps its balloon deflated holds all of it. */
        uint64_t fixed_now = in->boot_bytes + in->dimm_bytes;
        bool plugged_over = use_vmem && in->vmem_plugged > vmem_ceiling(in, fixed_now, ceiling);
        if (!plugged_over && (delta == 0 || (!in->urgent && !(in->fine && target < cur) && delta < dead_band))) {
                p.skip = true;
                p.size = cur;
                snprintf(p.reason, sizeof(p.reason), "change of %llu KiB inside the dead-band", (unsigned long long) (delta / 1024));
                *ret = p;
                return 0;
        }
        uint64_t cap = MIN(policy->change_cap_bytes, (uint64_t) ((double) cur * policy->change_cap_percent / 100.0));
        cap = MAX(cap, dead_band); /* a cap below the dead-band could never move */
        if (!(in->urgent && target > cur) && delta > cap) {
                delta = cap;
                p.capped = true;
        }
        uint64_t size = target > cur ? cur + delta : cur - delta;

        /* 2. Growth beyond what boot memory, DIMMs and virtio-mem can hold. */
        uint64_t capacity = in->boot_bytes + in->dimm_bytes + (use_vmem ? in->vmem_max : in->vmem_plugged);
        if (size > capacity) {
                uint64_t dimm = policy->allow_dimm ? dimm_size(in, capacity) : 0;
                if (dimm > 0) {
                        /* Whole DIMMs only, all of them under the ceiling. */
                        uint64_t need = size - capacity;
                        uint64_t k = (need + dimm - 1) / dimm;
                        uint64_t fit = ceiling > capacity ? (ceiling - capacity) / dimm : 0;
                        p.dimms_to_add = (unsigned) MIN(MIN(k, fit), (uint64_t) in->dimm_slots_free);
                        p.dimm_bytes = p.dimms_to_add > 0 ? dimm : 0;
                        capacity += (uint64_t) p.dimms_to_add * dimm;
                }
                size = MIN(size, capacity);
        }
        uint64_t fixed = fixed_now + (uint64_t) p.dimms_to_add * p.dimm_bytes;

        /* 3. virtio-mem: block-aligned, never below estimate + margin, never past the ceiling. */
        uint64_t vmem = in->vmem_plugged;
        if (use_vmem) {
                /* On the way down from above the ceiling, virtio-mem follows the size, one
                 * capped step an interval like any shrink; otherwise it stays under the
                 * ceiling, its lower limit (estimate + margin) included. */
                uint64_t most = vmem_ceiling(in, fixed, ceiling);
                if (size > ceiling)
                        most = MIN(MAX(most, align_up(size - fixed, in->vmem_block)), align_down(in->vmem_max, in->vmem_block));
                uint64_t want = size > fixed ? size - fixed : 0;
                /* With the balloon to trim, round up; alone, round to the nearest block
                 * that does not go under the target. */
                want = align_up(want, in->vmem_block);
                if (rs_known(in->estimate)) {
                        uint64_t safe = in->estimate + (uint64_t) ((double) in->estimate * in->margin_percent / 100.0);
                        uint64_t safe_vmem = safe > fixed ? align_up(safe - fixed, in->vmem_block) : 0;
                        want = MAX(want, safe_vmem);
                } else
                        want = MAX(want, in->vmem_plugged); /* nothing known: never unplug, but to the ceiling */
                want = MIN(want, most);
                vmem = want;
                if (vmem != in->vmem_plugged) {
                        p.set_vmem = true;
                        p.vmem_requested = vmem;
                }
                if (!use_balloon)
                        size = fixed + vmem; /* virtio-mem alone moves in whole blocks */
        }

        /* 4. The balloon trims to the exact size within what is plugged. */
        uint64_t plugged = fixed + vmem;
        if (use_balloon) {
                size = MIN(size, plugged);
                p.set_balloon = true;
                p.balloon_target = size;
        }
        p.size = size;
        if (size == cur && !p.set_vmem && p.dimms_to_add == 0) {
                p.skip = true;
                p.set_balloon = false;
        }
        snprintf(p.reason, sizeof(p.reason), "%s %llu MiB -> %llu MiB%s%s%s", target > cur ? "grow" : "shrink",
                 (unsigned long long) (cur / (1024 * 1024)), (unsigned long long) (size / (1024 * 1024)),
                 p.capped ? " (capped)" : "", p.set_vmem ? ", virtio-mem" : "", p.dimms_to_add ? ", DIMM" : "");
        *ret = p;
        return 0;
}
