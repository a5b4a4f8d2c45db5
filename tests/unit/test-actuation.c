/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "common/macro.h"
#include "policies/actuation.h"
#include "policies/rs-value.h"
#include "tests/lib/check-run.h"

/* A max far above every size these tests plan: only the tests of the ceiling meet it. */
#define NO_MAX (64 * GIB)

static RsActuationInput balloon_only(uint64_t cur, uint64_t target) {
        return (RsActuationInput) { .current = cur, .target = target, .estimate = RS_UNKNOWN, .margin_percent = 10,
                                    .boot_bytes = 4 * GIB, .max = NO_MAX };
}

/* What the guest holds once the plan is carried out and its balloon stays deflated (a hostile
 * guest's choice): everything plugged. */
static uint64_t plugged_after(const RsActuationInput *in, const RsActuationPlan *plan) {
        return in->boot_bytes + in->dimm_bytes + (uint64_t) plan->dimms_to_add * plan->dimm_bytes +
               (plan->set_vmem ? plan->vmem_requested : in->vmem_plugged);
}

/* What the guest holds once the plan is carried out and its balloon does inflate. */
static uint64_t given_after(const RsActuationInput *in, const RsActuationPlan *plan) {
        uint64_t plugged = plugged_after(in, plan);
        return plan->set_balloon ? MIN(plan->balloon_target, plugged) : MIN(in->current, plugged);
}

/* The guest of the virtio-mem measurements: 512 MiB of boot memory, a virtio-mem device of up to
 * 8 GiB in 128 MiB blocks, a 10 % margin, actuator=both, no per-interval cap. */
static void vmem_guest(RsPolicy *p, RsActuationInput *in, uint64_t cur, uint64_t vmem_plugged, uint64_t target,
                       uint64_t estimate, uint64_t max) {
        rs_policy_init(p);
        p->actuator = RS_ACTUATOR_BOTH;
        p->change_cap_percent = 100;
        p->change_cap_bytes = 64 * GIB;
        *in = (RsActuationInput) {
                .current = cur, .target = target, .estimate = estimate, .margin_percent = 10, .floor = 256 * MIB,
                .max = max, .boot_bytes = 512 * MIB, .vmem_plugged = vmem_plugged, .vmem_max = 8 * GIB,
                .vmem_block = 128 * MIB,
        };
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
                .max = NO_MAX, .boot_bytes = 1 * GIB, .vmem_plugged = 2 * GIB, .vmem_max = 4 * GIB, .vmem_block = 128 * MIB,
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

/* The estimate equal to max (4 GiB): estimate + margin is 4.4 GiB, which virtio-mem kept plugged
 * (4608 MiB with the boot memory), growing to max or held there. */
START_TEST(test_virtio_mem_never_above_max) {
        RsPolicy p;
        RsActuationInput in;
        RsActuationPlan plan;

        vmem_guest(&p, &in, 3 * GIB, 2560 * MIB, 4 * GIB, 4 * GIB, 4 * GIB);
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_le(plugged_after(&in, &plan), 4 * GIB);
        ck_assert_uint_eq(given_after(&in, &plan), 4 * GIB);

        /* held at max with 4608 MiB plugged: virtio-mem gives the rest back */
        vmem_guest(&p, &in, 4 * GIB, 4096 * MIB, 4 * GIB, 4 * GIB, 4 * GIB);
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert(!plan.skip);
        ck_assert_uint_le(plugged_after(&in, &plan), 4 * GIB);
        ck_assert_uint_eq(given_after(&in, &plan), 4 * GIB);

        /* virtio-mem alone the same */
        vmem_guest(&p, &in, 3 * GIB, 2560 * MIB, 4 * GIB, 4 * GIB, 4 * GIB);
        p.actuator = RS_ACTUATOR_VIRTIO_MEM;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert(!plan.set_balloon);
        ck_assert_uint_eq(plugged_after(&in, &plan), 4 * GIB);
        ck_assert_uint_eq(plan.size, 4 * GIB);
}
END_TEST

/* An estimate of 6 GiB from before an operator lowered max from 8 to 4 GiB: virtio-mem kept
 * 6784 MiB plugged. Held at the new max, it gives the excess back at once; coming down from the
 * old size, one capped step an interval, never growing, to max at the end. */
START_TEST(test_virtio_mem_stale_estimate_after_max_lowered) {
        RsPolicy p;
        RsActuationInput in;
        RsActuationPlan plan;

        vmem_guest(&p, &in, 4 * GIB, 6272 * MIB, 4 * GIB, 6 * GIB, 4 * GIB);
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_le(plugged_after(&in, &plan), 4 * GIB);

        vmem_guest(&p, &in, 6784 * MIB, 6272 * MIB, 4 * GIB, 6 * GIB, 4 * GIB);
        p.change_cap_percent = 10;
        uint64_t plugged = 6784 * MIB;
        for (int i = 0; i < 40; i++) {
                ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
                ck_assert_uint_le(plugged_after(&in, &plan), plugged);
                ck_assert_uint_le(given_after(&in, &plan), in.current);
                plugged = plugged_after(&in, &plan);
                in.vmem_plugged = plugged - in.boot_bytes;
                in.current = given_after(&in, &plan);
        }
        ck_assert_uint_le(plugged, 4 * GIB);
        ck_assert_uint_eq(in.current, 4 * GIB);
}
END_TEST

/* Arbitration cut the target to 2 GiB under an estimate of 3 GiB: virtio-mem kept estimate +
 * margin, 3456 MiB, plugged. What the host cut, no device holds; a probe below the estimate that
 * nobody cut keeps virtio-mem at estimate + margin (it has no deflate-on-oom). */
START_TEST(test_virtio_mem_under_the_arbitrated_target) {
        RsPolicy p;
        RsActuationInput in;
        RsActuationPlan plan;

        vmem_guest(&p, &in, 2 * GIB, 2944 * MIB, 2 * GIB, 3 * GIB, 8 * GIB);
        in.host_limit = 2 * GIB;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_le(plugged_after(&in, &plan), 2 * GIB);
        ck_assert_uint_eq(given_after(&in, &plan), 2 * GIB);

        /* from above: the cut is reached, plugged memory with it */
        vmem_guest(&p, &in, 3456 * MIB, 2944 * MIB, 2 * GIB, 3 * GIB, 8 * GIB);
        in.host_limit = 2 * GIB;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_le(plugged_after(&in, &plan), 2 * GIB);

        /* a target above the cut is held to it */
        vmem_guest(&p, &in, 1 * GIB, 512 * MIB, 3 * GIB, 3 * GIB, 8 * GIB);
        in.host_limit = 2 * GIB;
        in.urgent = true;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_le(plugged_after(&in, &plan), 2 * GIB);
        ck_assert_uint_eq(given_after(&in, &plan), 2 * GIB);

        /* not cut: a probe at 2 GiB leaves virtio-mem at estimate + margin */
        vmem_guest(&p, &in, 2 * GIB, 2944 * MIB, 2 * GIB, 3 * GIB, 8 * GIB);
        in.host_limit = RS_UNKNOWN;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plugged_after(&in, &plan), 3456 * MIB);

        /* the floor wins over the ceiling when the block size makes them collide */
        vmem_guest(&p, &in, 1 * GIB, 512 * MIB, 1 * GIB, 3 * GIB, 8 * GIB);
        in.floor = 1000 * MIB;
        in.host_limit = 900 * MIB;
        p.actuator = RS_ACTUATOR_VIRTIO_MEM;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_ge(plugged_after(&in, &plan), 1000 * MIB);
        ck_assert_uint_le(plugged_after(&in, &plan), 1000 * MIB + 128 * MIB);
}
END_TEST

/* max 8 GiB on a guest booted with 4 GiB whose maxmem is 68 GiB over 2 slots: maxmem's room alone
 * made one 32 GiB DIMM (36 GiB plugged). The DIMMs split the policy's room instead. */
START_TEST(test_dimm_sized_from_the_policy_max) {
        RsPolicy p;
        RsActuationPlan plan;
        rs_policy_init(&p);
        p.allow_dimm = true;

        RsActuationInput in = balloon_only(4 * GIB, 8 * GIB);
        in.max = 8 * GIB;
        in.urgent = true;
        in.dimm_slot_bytes = 32 * GIB; /* what maxmem leaves per free slot */
        in.dimm_slots_free = 2;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.dimms_to_add, 2);
        ck_assert_uint_eq(plan.dimm_bytes, 2 * GIB);
        ck_assert_uint_le(plugged_after(&in, &plan), 8 * GIB);

        /* growing by less than a DIMM still adds a whole one, never past max */
        in = balloon_only(4 * GIB, 5 * GIB);
        in.max = 8 * GIB;
        in.urgent = true;
        in.dimm_slot_bytes = 32 * GIB;
        in.dimm_slots_free = 2;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.dimms_to_add, 1);
        ck_assert_uint_eq(plan.dimm_bytes, 2 * GIB);
        ck_assert_uint_eq(plan.balloon_target, 5 * GIB);

        /* a DIMM that does not fit under what the host left is not plugged */
        in.host_limit = 5 * GIB;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_eq(plan.dimms_to_add, 0);
        ck_assert_uint_le(plugged_after(&in, &plan), 5 * GIB);

        /* the target itself is held to max */
        in = balloon_only(4 * GIB, 40 * GIB);
        in.max = 8 * GIB;
        in.urgent = true;
        in.dimm_slot_bytes = 32 * GIB;
        in.dimm_slots_free = 2;
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), 0);
        ck_assert_uint_le(plugged_after(&in, &plan), 8 * GIB);
        ck_assert_uint_le(plan.balloon_target, 8 * GIB);
}
END_TEST

/* A balloon stuck above its target: stop pushing, by asking for what the guest holds, but never
 * for more than max. Sending balloon(actual) raised a guest that would not inflate to its whole
 * size, above max. */
START_TEST(test_stall_stops_pushing_below_max) {
        /* probing below max, stuck at 1.5 GiB: ask for 1.5 GiB */
        ck_assert_uint_eq(rs_actuation_stall_target(1536 * MIB, 1 * GIB, 4 * GIB), 1536 * MIB);
        /* a guest of 8 GiB under max 4 GiB, stuck on its way down: max at most */
        uint64_t t = rs_actuation_stall_target(8 * GIB, 3 * GIB, 4 * GIB);
        ck_assert_uint_le(t, 4 * GIB);
        ck_assert_uint_eq(t, 4 * GIB);
        /* stuck on a capped step above max: the step stays, nothing higher is sent */
        t = rs_actuation_stall_target(8 * GIB, 7 * GIB, 4 * GIB);
        ck_assert(t == 0 || t <= 7 * GIB);
        ck_assert_uint_eq(t, 0);
        /* below its target (the guest does not deflate): nothing to send */
        ck_assert_uint_eq(rs_actuation_stall_target(1 * GIB, 2 * GIB, 4 * GIB), 0);
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
        in = balloon_only(GIB, GIB);
        in.max = 0; /* no max is no plan: the ceiling is not optional */
        ck_assert_int_eq(rs_actuation_plan(&p, &in, &plan), -EINVAL);
}
END_TEST

int main(void) {
        return check_run_case("actuation", "actuation", NULL, NULL, 0,
                              CHECK_TESTS(test_dead_band, test_cap_percent_and_bytes,
                                          test_virtio_mem_alignment_and_safety,
                                          test_dimm_only_past_boot_and_when_allowed, test_virtio_mem_never_above_max,
                                          test_virtio_mem_stale_estimate_after_max_lowered,
                                          test_virtio_mem_under_the_arbitrated_target, test_dimm_sized_from_the_policy_max,
                                          test_stall_stops_pushing_below_max, test_bad_input));
}
