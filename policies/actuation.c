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

int rs_actuation_plan(const RsPolicy *policy, const RsActuationInput *in, RsActuationPlan *ret) {
        RsActuationPlan p = {};

        if (!policy || !in || !ret || in->boot_bytes == 0 || in->current == 0)
                return -EINVAL;
        if (in->vmem_max > 0 && (in->vmem_block == 0 || in->vmem_plugged > in->vmem_max))
                return -EINVAL;

        bool use_vmem = policy->actuator != RS_ACTUATOR_BALLOON && in->vmem_max > 0;
        bool use_balloon = policy->actuator != RS_ACTUATOR_VIRTIO_MEM || !use_vmem;

        /* 1. How far this interval goes. */
        uint64_t target = in->target, cur = in->current;
        uint64_t delta = target > cur ? target - cur : cur - target;
        uint64_t dead_band = policy->dead_band_bytes;
        if (delta == 0 || (!in->urgent && !(in->fine && target < cur) && delta < dead_band)) {
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
                if (policy->allow_dimm && in->dimm_slot_bytes > 0 && in->dimm_slots_free > 0) {
                        uint64_t need = size - capacity;
                        uint64_t k = (need + in->dimm_slot_bytes - 1) / in->dimm_slot_bytes;
                        p.dimms_to_add = (unsigned) MIN(k, (uint64_t) in->dimm_slots_free);
                        capacity += (uint64_t) p.dimms_to_add * in->dimm_slot_bytes;
                }
                size = MIN(size, capacity);
        }
        uint64_t fixed = in->boot_bytes + in->dimm_bytes + (uint64_t) p.dimms_to_add * in->dimm_slot_bytes;

        /* 3. virtio-mem: block-aligned, never below estimate + margin. */
        uint64_t vmem = in->vmem_plugged;
        if (use_vmem) {
                uint64_t want = size > fixed ? size - fixed : 0;
                /* With the balloon to trim, round up; alone, round to the nearest block
                 * that does not go under the target. */
                want = align_up(want, in->vmem_block);
                if (rs_known(in->estimate)) {
                        uint64_t safe = in->estimate + (uint64_t) ((double) in->estimate * in->margin_percent / 100.0);
                        uint64_t safe_vmem = safe > fixed ? align_up(safe - fixed, in->vmem_block) : 0;
                        want = MAX(want, MIN(safe_vmem, align_down(in->vmem_max, in->vmem_block)));
                } else
                        want = MAX(want, in->vmem_plugged); /* nothing known: never unplug */
                want = MIN(want, align_down(in->vmem_max, in->vmem_block));
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
