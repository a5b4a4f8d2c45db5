/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "common/macro.h"
#include "policies/actuation.h"
#include "policies/rs-value.h"
#include "tests/lib/check-run.h"

static RsActuationInput balloon_only(uint64_t cur, uint64_t target) {
        return (RsActuationInput) { .current = cur, .target = target, .estimate = RS_UNKNOWN, .margin_percent = 10, .boot_bytes = 4 * GIB };
}

START_TEST(test_dead_band) {
        RsPolicy p;
        RsActuationPlan plan;
        rs_policy_init(&p); /* dead-band 8M */
        RsActuationInput in = balloon_only(2 * GIB, 2 * GIB - 4 * MIB);
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert(plan.skip);
        ck_assert(!plan.set_balloon);
        in.urgent = true; /* urgent growth is never skipped */
        in.target = 2 * GIB + 4 * MIB;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert(!plan.skip);
        ck_assert_uint_eq(plan.balloon_target, 2 * GIB + 4 * MIB);
}
END_TEST

START_TEST(test_cap_percent_and_bytes) {
        RsPolicy p;
        RsActuationPlan plan;
        rs_policy_init(&p); /* 10 %, 1G */
        RsActuationInput in = balloon_only(2 * GIB, 1 * GIB);
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert(plan.capped);
        ck_assert_uint_eq(plan.balloon_target, 2 * GIB - (uint64_t) (0.1 * 2 * GIB));
        p.change_cap_bytes = 64 * MIB;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.balloon_target, 2 * GIB - 64 * MIB);
        /* non-urgent growth is capped too, urgent growth is not */
        in = balloon_only(1 * GIB, 3 * GIB);
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.balloon_target, 1 * GIB + 64 * MIB);
        in.urgent = true;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert(!plan.capped);
        ck_assert_uint_eq(plan.balloon_target, 3 * GIB);
}
END_TEST

START_TEST(test_virtio_mem_alignment_and_safety) {
        RsPolicy p;
        RsActuationPlan plan;
        rs_policy_init(&p);
        p.actuator = RS_ACTUATOR_BOTH;
        p.change_cap_percent = 100;
        p.change_cap_bytes = 64 * GIB;
        RsActuationInput in = {
                .current = 3 * GIB, .target = 1500 * MIB + 3 * MIB, .estimate = 1200 * MIB, .margin_percent = 10,
                .boot_bytes = 1 * GIB, .vmem_plugged = 2 * GIB, .vmem_max = 4 * GIB, .vmem_block = 128 * MIB,
        };
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert(plan.set_vmem);
        ck_assert_uint_eq(plan.vmem_requested % (128 * MIB), 0);
        /* plugged covers the target, the balloon trims to it exactly */
        ck_assert_uint_ge(in.boot_bytes + plan.vmem_requested, 1503 * MIB);
        ck_assert_uint_eq(plan.balloon_target, 1503 * MIB);

        /* a probe below estimate + margin: virtio-mem stays at or above it, the balloon probes */
        in.target = 1000 * MIB;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        uint64_t safe = 1200 * MIB + 120 * MIB;
        ck_assert_uint_ge(in.boot_bytes + plan.vmem_requested, safe);
        ck_assert_uint_eq(plan.vmem_requested % (128 * MIB), 0);
        ck_assert_uint_eq(plan.balloon_target, 1000 * MIB);

        /* virtio-mem alone: whole blocks, never below the target */
        p.actuator = RS_ACTUATOR_VIRTIO_MEM;
        in.target = 2 * GIB + 3 * MIB;
        in.current = 3 * GIB;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert(!plan.set_balloon);
        ck_assert_uint_eq(plan.vmem_requested, 1 * GIB + 128 * MIB);
        ck_assert_uint_eq(plan.size, 2 * GIB + 128 * MIB);

        /* unknown estimate: virtio-mem is never unplugged */
        in.estimate = RS_UNKNOWN;
        in.target = 1 * GIB + 10 * MIB;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_ge(plan.vmem_requested ? plan.vmem_requested : in.vmem_plugged, in.vmem_plugged);
}
END_TEST

START_TEST(test_dimm_only_past_boot_and_when_allowed) {
        RsPolicy p;
        RsActuationPlan plan;
        rs_policy_init(&p);
        RsActuationInput in = balloon_only(4 * GIB, 6 * GIB);
        in.urgent = true;
        in.dimm_slot_bytes = 1 * GIB;
        in.dimm_slots_free = 4;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.dimms_to_add, 0); /* not allowed */
        ck_assert_uint_eq(plan.balloon_target, 4 * GIB);
        p.allow_dimm = true;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.dimms_to_add, 2);
        ck_assert_uint_eq(plan.balloon_target, 6 * GIB);
        /* below the boot size no DIMM, ever */
        in = balloon_only(2 * GIB, 3 * GIB);
        in.urgent = true;
        in.dimm_slot_bytes = 1 * GIB;
        in.dimm_slots_free = 4;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.dimms_to_add, 0);
        /* slots run out */
        in = balloon_only(4 * GIB, 10 * GIB);
        in.urgent = true;
        in.dimm_slot_bytes = 1 * GIB;
        in.dimm_slots_free = 2;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.dimms_to_add, 2);
        ck_assert_uint_eq(plan.balloon_target, 6 * GIB);
}
END_TEST

START_TEST(test_bad_input) {
        RsPolicy p;
        RsActuationPlan plan;
        rs_policy_init(&p);
        RsActuationInput in = balloon_only(0, GIB);
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), -EINVAL);
        in = balloon_only(GIB, GIB);
        in.vmem_max = GIB;
        in.vmem_block = 0;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), -EINVAL);
}
END_TEST

int main(void) {
        return check_run_case("actuation", "actuation", NULL, NULL, 0,
                              CHECK_TESTS(test_dead_band, test_cap_percent_and_bytes,
                                          test_virtio_mem_alignment_and_safety,
                                          test_dimm_only_past_boot_and_when_allowed, test_bad_input));
}
