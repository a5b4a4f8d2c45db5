/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/lib/fake-guest-driver.h"

#include <stdlib.h>

#include "common/macro.h"
#include "common/size.h"

static int fake_set_balloon(Guest *g _unused_, uint64_t bytes, void *userdata) {
        FakeGuestDriver *f = userdata;
        f->balloon_calls++;
        f->last_balloon = bytes;
        return f->balloon_reply;
}

static int fake_set_virtio_mem(Guest *g _unused_, uint64_t requested, uint64_t *ret_requested, void *userdata) {
        FakeGuestDriver *f = userdata;
        f->vmem_calls++;
        f->last_vmem = requested;
        *ret_requested = requested;
        return f->vmem_reply;
}

static int fake_add_dimm(Guest *g _unused_, uint64_t bytes, void *userdata) {
        FakeGuestDriver *f = userdata;
        f->dimm_calls++;
        f->last_dimm = bytes;
        return f->dimm_reply;
}

static int fake_shutdown_balloon(Guest *g, uint64_t bytes, void (*done)(Guest *g, void *userdata),
                                 void *done_userdata, void *userdata) {
        FakeGuestDriver *f = userdata;
        f->shutdown_calls++;
        f->shutdown_balloon = bytes;
        f->shutdown_done = done;
        f->shutdown_done_userdata = done_userdata;
        f->shutdown_guest = g;
        return 1;
}

static bool fake_connected(const Guest *g _unused_, void *userdata) {
        const FakeGuestDriver *f = userdata;
        return !f->disconnected;
}

static void fake_policy_changed(Guest *g _unused_, uint64_t old_interval, void *userdata) {
        FakeGuestDriver *f = userdata;
        f->policy_changes++;
        f->old_interval = old_interval;
}

static void fake_stop(Guest *g _unused_, void *userdata) {
        FakeGuestDriver *f = userdata;
        f->stops++;
}

static void fake_free(void *userdata) {
        FakeGuestDriver *f = userdata;
        if (f->owned)
                free(f);
        else
                f->freed++;
}

const GuestDriver fake_guest_driver = {
        .calls = "fake calls",
        .set_balloon = fake_set_balloon,
        .set_virtio_mem = fake_set_virtio_mem,
        .add_dimm = fake_add_dimm,
        .connected = fake_connected,
        .policy_changed = fake_policy_changed,
        .stop = fake_stop,
        .free = fake_free,
};

const GuestDriver fake_guest_driver_async = {
        .calls = "fake calls",
        .set_balloon = fake_set_balloon,
        .set_virtio_mem = fake_set_virtio_mem,
        .add_dimm = fake_add_dimm,
        .shutdown_balloon = fake_shutdown_balloon,
        .connected = fake_connected,
        .policy_changed = fake_policy_changed,
        .stop = fake_stop,
        .free = fake_free,
};

FakeGuestDriver *fake_guest_driver_new(void) {
        FakeGuestDriver *f = calloc(1, sizeof(*f));
        if (f) {
                f->balloon_reply = 0;
                f->owned = true;
        }
        return f;
}

void fake_guest_driver_finish_shutdown(FakeGuestDriver *f) {
        void (*done)(Guest *g, void *userdata) = f->shutdown_done;
        f->shutdown_done = NULL;
        if (done)
                done(f->shutdown_guest, f->shutdown_done_userdata);
}

void fake_guest_readings(Guest *g, uint64_t balloon_actual, uint64_t stats_time) {
        RsSample s;

        guest_set_balloon_actual(g, balloon_actual);
        rs_sample_init(&s);
        /* What a guest of that size reports: the kernel keeps a little for itself, a quarter is
         * free, half is available; the fault counters stay put (a quiet guest). */
        s.level[RS_LEVEL_TOTAL] = balloon_actual - 64 * MIB;
        s.level[RS_LEVEL_FREE] = balloon_actual / 4;
        s.level[RS_LEVEL_AVAILABLE] = balloon_actual / 2;
        s.level[RS_LEVEL_DISK_CACHES] = balloon_actual / 8;
        s.counter[RS_COUNTER_MAJOR_FAULTS] = 1000;
        s.counter[RS_COUNTER_MINOR_FAULTS] = 100000;
        if (stats_time > 0)
                guest_sample_add_balloon_stats(g, &s, stats_time);
        else
                guest_sample_add(g, &s);
}

int fake_guest_cycle(Guest *g, uint64_t balloon_actual, uint64_t stats_time) {
        int r = guest_cycle_begin(g);
        if (r < 0)
                return r;
        fake_guest_readings(g, balloon_actual, stats_time);
        guest_cycle_step_done(g);
        return 0;
}
