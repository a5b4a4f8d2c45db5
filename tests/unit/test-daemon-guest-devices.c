/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The devices besides the balloon, through a fake driver (tests/lib/fake-guest-driver.c) and whole
 * cycles: virtio-mem takes the coarse moves when the policy says so (its plugged size counts in
 * the guest's, and the balloon covers the boot memory only), and DIMMs are hot-plugged when the
 * policy allows them and maxmem has room, never again once one was refused. No guest, no socket. */

#include <check.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "common/macro.h"
#include "common/size.h"
#include "daemon/guest.h"
#include "tests/lib/check-run.h"
#include "tests/lib/fake-guest-driver.h"

static sd_event *event;
static FakeGuestDriver fake;
static Guest *guest;
static uint64_t stats_clock;
static uint64_t arbitrated; /* what the host's arbitration gives (0: the guest's wish) */
static const HostMemory host = { .mem_total = 64 * GIB, .mem_available = 32 * GIB };

static const HostMemory *hook_host_memory(Guest *g _unused_, void *userdata _unused_) {
        return &host;
}

static uint64_t hook_arbitrate(Guest *g, void *userdata _unused_) {
        return arbitrated ?: guest_want(g);
}

static const GuestHooks hooks = { .host_memory = hook_host_memory, .arbitrate = hook_arbitrate };

static void setup(void) {
        ck_assert_int_eq(sd_event_new(&event), 0);
        fake = (FakeGuestDriver) {};
        arbitrated = 0;
        stats_clock = (uint64_t) time(NULL) - 3600;
}

static void teardown(void) {
        guest = guest_free(guest);
        event = sd_event_unref(event);
}

static void start(RsActuator actuator, bool allow_dimm, const GuestResources *res) {
        RsPolicy policy;
        const char *bad = NULL;

        ck_assert_int_eq(rs_policy_preset("balanced", &policy), 0);
        policy.actuator = actuator;
        policy.allow_dimm = allow_dimm;
        ck_assert_int_eq(rs_policy_validate(&policy, &bad), 0);
        ck_assert_int_eq(guest_new(event, GUEST_SOURCE_QEMU, "d", NULL, "/run/d.qmp", NULL, &policy, &hooks, NULL,
                                   &fake_guest_driver, &fake, &guest),
                         0);
        ck_assert_int_eq(guest_attach(guest, res), 0);
}

/* What QEMU would read back: the balloon's actual (boot memory only) and virtio-mem's size. */
static void cycle(uint64_t balloon_actual, uint64_t vmem_size) {
        ck_assert_int_eq(guest_cycle_begin(guest), 0);
        guest_set_vmem_size(guest, vmem_size);
        fake_guest_readings(guest, balloon_actual, ++stats_clock);
        guest_cycle_step_done(guest);
}

/* 2 GiB of boot memory and virtio-mem with 2 of its 4 GiB plugged. */
static const GuestResources vmem_guest = {
        .base_memory = 2 * GIB,
        .balloon_actual = 2 * GIB,
        .vmem_id = "vm0",
        .vmem_size = 2 * GIB,
        .vmem_max = 4 * GIB,
        .vmem_block = 2 * MIB,
        .vmem_requested = 2 * GIB,
};

START_TEST(test_virtio_mem_takes_the_coarse_moves) {
        start(RS_ACTUATOR_VIRTIO_MEM, false, &vmem_guest);
        ck_assert_str_eq(guest_vmem_id(guest), "vm0");
        ck_assert_uint_eq(guest_max(guest), 6 * GIB); /* boot memory and all virtio-mem can give */
        ck_assert_uint_eq(guest_actual(guest), 4 * GIB);

        arbitrated = 3 * GIB;
        cycle(2 * GIB, 2 * GIB);
        ck_assert_uint_eq(fake.vmem_calls, 1);
        ck_assert_uint_lt(fake.last_vmem, 2 * GIB);
        ck_assert_uint_eq(guest_vmem_requested(guest), fake.last_vmem);
        ck_assert_uint_eq(guest_counters(guest)->resizes[GUEST_ACTUATOR_VIRTIO_MEM], 1);
        ck_assert_uint_eq(fake.balloon_calls, 0); /* virtio-mem alone */
        /* The device unplugs: the guest's size is the boot memory's and what stays plugged. */
        uint64_t plugged = fake.last_vmem;
        cycle(2 * GIB, plugged);
        ck_assert_uint_eq(guest_vmem_size(guest), plugged);
        ck_assert_uint_eq(guest_actual(guest), 2 * GIB + plugged);
}
END_TEST

/* A virtio-mem call refused at once is counted, and its target stays what it was; one refused
 * later puts the old one back. */
START_TEST(test_virtio_mem_refused) {
        start(RS_ACTUATOR_VIRTIO_MEM, false, &vmem_guest);
        arbitrated = 3 * GIB;
        fake.vmem_reply = -EIO;
        cycle(2 * GIB, 2 * GIB);
        ck_assert_uint_eq(fake.vmem_calls, 1);
        ck_assert_uint_eq(guest_vmem_requested(guest), 2 * GIB);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_VIRTIO_MEM], 1);

        fake.vmem_reply = 1;
        cycle(2 * GIB, 2 * GIB);
        ck_assert_uint_eq(fake.vmem_calls, 2);
        ck_assert_uint_lt(guest_vmem_requested(guest), 2 * GIB);
        guest_actuator_done(guest, GUEST_ACTUATOR_VIRTIO_MEM, GUEST_CALL_REFUSED, -EINVAL, "qom-set failed");
        ck_assert_uint_eq(guest_vmem_requested(guest), 2 * GIB);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_VIRTIO_MEM], 2);
}
END_TEST

/* With virtio-mem plugged, the shutdown's balloon is the boot memory's share of the size: max
 * leaves the balloon at all of the boot memory. */
START_TEST(test_shutdown_with_virtio_mem) {
        start(RS_ACTUATOR_BALLOON, false, &vmem_guest);
        ck_assert_uint_eq(guest_max(guest), 2 * GIB); /* the policy moves the balloon alone */
        guest_set_balloon_actual(guest, GIB);
        ck_assert_int_eq(guest_shutdown(guest, SHUTDOWN_ACTION_MAX, NULL, NULL), 0);
        ck_assert_uint_eq(fake.balloon_calls, 0); /* virtio-mem alone holds more than max */
}
END_TEST

/* 2 GiB booted, maxmem 6 GiB in 4 slots: DIMMs of up to 1 GiB each. */
static const GuestResources dimm_guest = {
        .base_memory = 2 * GIB,
        .balloon_actual = 2 * GIB,
        .mem_max_size = 6 * GIB,
        .mem_slots = 4,
};

/* The host gives more than the guest has: a DIMM is plugged, and counted. */
START_TEST(test_dimm_added) {
        start(RS_ACTUATOR_BALLOON, true, &dimm_guest);
        ck_assert_uint_eq(guest_max(guest), 6 * GIB);
        arbitrated = 3 * GIB;
        cycle(2 * GIB, 0);
        ck_assert_uint_ge(fake.dimm_calls, 1);
        ck_assert_uint_le(fake.last_dimm, GIB);
        ck_assert_uint_eq(fake.last_dimm % (128 * MIB), 0); /* whole memory blocks */
        ck_assert_uint_eq(guest_counters(guest)->resizes[GUEST_ACTUATOR_DIMM], fake.dimm_calls);
        ck_assert_uint_eq(fake.balloon_calls, 0); /* the balloon trims once the DIMM is in */
}
END_TEST

/* A DIMM refused (at once or later) is not counted as plugged, and no more are tried. */
START_TEST(test_dimm_refused_stops_hotplug) {
        start(RS_ACTUATOR_BALLOON, true, &dimm_guest);
        arbitrated = 3 * GIB;
        fake.dimm_reply = 1;
        cycle(2 * GIB, 0);
        ck_assert_uint_ge(fake.dimm_calls, 1);
        unsigned calls = fake.dimm_calls;
        guest_actuator_done(guest, GUEST_ACTUATOR_DIMM, GUEST_CALL_REFUSED, -EINVAL, "no slot");
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_DIMM], 1);
        cycle(2 * GIB, 0);
        cycle(2 * GIB, 0);
        ck_assert_uint_eq(fake.dimm_calls, calls);

        /* Refused at once, on a guest of its own. */
        guest = guest_free(guest);
        fake = (FakeGuestDriver) { .dimm_reply = -EBUSY };
        start(RS_ACTUATOR_BALLOON, true, &dimm_guest);
        cycle(2 * GIB, 0);
        ck_assert_uint_eq(fake.dimm_calls, 1);
        ck_assert_uint_eq(guest_counters(guest)->actuator_failures[GUEST_ACTUATOR_DIMM], 1);
        ck_assert_uint_eq(guest_counters(guest)->resizes[GUEST_ACTUATOR_DIMM], 0);
        cycle(2 * GIB, 0);
        ck_assert_uint_eq(fake.dimm_calls, 1);
}
END_TEST

int main(void) {
        return check_run_case("daemon-guest-devices", "devices", setup, teardown, 0,
                              CHECK_TESTS(test_virtio_mem_takes_the_coarse_moves, test_virtio_mem_refused,
                                          test_shutdown_with_virtio_mem, test_dimm_added,
                                          test_dimm_refused_stops_hotplug));
}
