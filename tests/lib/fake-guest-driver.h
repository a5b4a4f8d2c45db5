/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A GuestDriver (daemon/guest-driver.h) with no guest behind it, for the tests of the daemon's
 * middle: it records what the guest core asks of the devices and answers as the test says, and a
 * cycle's readings are whatever the test hands guest_fake_cycle(). No socket, no QEMU, no clock
 * to wait on: what a real driver would read from QMP or libvirt, the test writes. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "daemon/guest-driver.h"

typedef struct FakeGuestDriver {
        int balloon_reply;          /* set_balloon's return: 1 sent (report it), 0 done, -errno */
        unsigned balloon_calls;
        uint64_t last_balloon;      /* the balloon size last asked for */
        int vmem_reply;             /* set_virtio_mem's, the same way */
        unsigned vmem_calls;
        uint64_t last_vmem;
        int dimm_reply;             /* add_dimm's, the same way */
        unsigned dimm_calls;
        uint64_t last_dimm;
        /* shutdown_balloon (the async driver only): what it was asked, and the callback to call. */
        unsigned shutdown_calls;
        uint64_t shutdown_balloon;
        void (*shutdown_done)(Guest *g, void *userdata);
        void *shutdown_done_userdata;
        Guest *shutdown_guest;
        bool disconnected;          /* connected() says false */
        unsigned policy_changes;
        uint64_t old_interval;      /* policy_changed()'s last old interval */
        unsigned stops;
        bool owned;                 /* freed with its guest (heap); otherwise `freed` is counted */
        unsigned freed;
} FakeGuestDriver;

/* Shutdown through set_balloon (synchronous), and through shutdown_balloon (answered by the
 * test: fake_guest_driver_finish_shutdown()). Both can add DIMMs. */
extern const GuestDriver fake_guest_driver;
extern const GuestDriver fake_guest_driver_async;

/* A FakeGuestDriver on the heap, freed with the guest it is given to. */
FakeGuestDriver *fake_guest_driver_new(void);

/* Calls the done() a shutdown_balloon call was given (once). */
void fake_guest_driver_finish_shutdown(FakeGuestDriver *f);

/* The readings of a guest whose balloon leaves it `balloon_actual` and whose stats were last
 * updated at `stats_time` (QEMU's realtime clock, s; 0: none yet): a plausible sample of a
 * guest of that size, through the calls a driver makes. */
void fake_guest_readings(Guest *g, uint64_t balloon_actual, uint64_t stats_time);

/* One whole cycle with those readings: guest_cycle_begin()'s result (0: it ran). */
int fake_guest_cycle(Guest *g, uint64_t balloon_actual, uint64_t stats_time);
