/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The backend's calls on its worker thread (libvirt-backend.h, _async), against libvirt's
 * in-process test driver (test:///default: a real libvirt driver, no daemon, one running
 * domain "test" with a virtio balloon): the stats call reports the domain and runs one at a
 * time, a balloon target set asynchronously reaches the domain and its done runs on the loop,
 * calls the domain cannot take fail before they are queued, and a domain that leaves takes its
 * calls' callbacks with it. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <systemd/sd-event.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-backend.h"
#include "tests/lib/check-run.h"

#define URI "test:///default"

typedef struct Seen {
        char uuid[VIR_UUID_STRING_BUFLEN];
        unsigned added, removed, connected;
        unsigned collected;
        int collect_error;
        bool found;
        uint64_t maximum;
        unsigned calls_done;
        unsigned calls_done_at_removal;
        int call_error;
} Seen;

static Seen seen;

static void on_added(LibvirtBackend *b _unused_, const LibvirtDomainInfo *info, bool changed _unused_,
                     void *userdata _unused_) {
        if (strcmp(info->name, "test") != 0)
                return;
        snprintf(seen.uuid, sizeof(seen.uuid), "%s", info->uuid);
        seen.maximum = info->maximum;
        seen.added++;
}

static void on_removed(LibvirtBackend *b _unused_, const char *uuid _unused_, const char *name, const char *why _unused_,
                       void *userdata _unused_) {
        if (strcmp(name, "test") != 0)
                return;
        seen.removed++;
        seen.calls_done_at_removal = seen.calls_done;
}

static void on_connection(LibvirtBackend *b _unused_, bool connected, void *userdata _unused_) {
        seen.connected += connected;
}

static const LibvirtBackendCallbacks callbacks = {
        .domain_added = on_added,
        .domain_removed = on_removed,
        .connection_changed = on_connection,
};

static void on_collected(LibvirtBackend *b _unused_, int error, LibvirtDomainStats *stats, size_t n, void *userdata) {
        ck_assert_ptr_eq(userdata, &seen);
        ck_assert_uint_eq(n, 1);
        seen.collected++;
        seen.collect_error = error;
        seen.found = stats[0].found;
        if (stats[0].found)
                ck_assert_str_eq(stats[0].name, "test");
}

static void on_call_done(LibvirtBackend *b _unused_, const char *uuid, int error, void *userdata) {
        ck_assert_ptr_eq(userdata, &seen);
        ck_assert_str_eq(uuid, seen.uuid);
        seen.calls_done++;
        seen.call_error = error;
}

static uint64_t monotonic_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

/* Runs the loop until cond() holds; gives up at a deadline far beyond what a loaded machine
 * needs (a hang, not a timing bound). */
#define RUN_DEADLINE_USEC (30 * USEC_PER_SEC)
static void run_until(sd_event *e, bool (*cond)(void)) {
        for (uint64_t end = monotonic_usec() + RUN_DEADLINE_USEC; !cond() && monotonic_usec() < end;)
                ck_assert_int_ge(sd_event_run(e, 50 * USEC_PER_MSEC), 0);
        ck_assert(cond());
}

static bool is_up(void) {
        return seen.connected > 0 && seen.added > 0;
}

static bool collected(void) {
        return seen.collected > 0;
}

static bool removed(void) {
        return seen.removed > 0;
}

static bool call_done(void) {
        return seen.calls_done > 0;
}

static LibvirtBackend *backend_up(sd_event **ret_event) {
        LibvirtBackend *b = NULL;
        const LibvirtBackendConfig config = { .uri = URI, .manage_all = true, .call_timeout_usec = 5 * USEC_PER_SEC };

        memset(&seen, 0, sizeof(seen));
        ck_assert_int_eq(sd_event_new(ret_event), 0);
        ck_assert_int_eq(libvirt_backend_new(*ret_event, &config, &callbacks, NULL, &b), 0);
        run_until(*ret_event, is_up);
        ck_assert_ptr_null(libvirt_backend_get_domain(b, seen.uuid)->skip_reason);
        return b;
}

START_TEST(test_stats_async) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtBackend *b = backend_up(&e);
        LibvirtDomainStats request = {};

        memcpy(request.uuid, seen.uuid, sizeof(request.uuid));
        ck_assert_int_eq(libvirt_backend_collect_async(b, &request, 1, on_collected, &seen), 0);
        /* One in flight at a time. */
        ck_assert(libvirt_backend_collect_busy(b));
        ck_assert_int_eq(libvirt_backend_collect_async(b, &request, 1, on_collected, &seen), -EBUSY);
        run_until(e, collected);
        ck_assert_uint_eq(seen.collected, 1);
        ck_assert_int_ge(seen.collect_error, 0);
        ck_assert(seen.found);
        ck_assert(!libvirt_backend_collect_busy(b));
        /* And the next one may go. */
        ck_assert_int_eq(libvirt_backend_collect_async(b, &request, 1, on_collected, &seen), 0);
        seen.collected = 0;
        run_until(e, collected);
        libvirt_backend_free(b);
}
END_TEST

START_TEST(test_balloon_async) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtBackend *b = backend_up(&e);
        virDomainPtr dom;
        virDomainInfo info;

        ck_assert_uint_gt(seen.maximum, 1024 * MIB);
        ck_assert_int_eq(libvirt_backend_set_balloon_async(b, seen.uuid, 1024 * MIB, on_call_done, &seen), 0);
        /* Queued, not done: the done runs on the loop. */
        ck_assert_uint_eq(seen.calls_done, 0);
        run_until(e, call_done);
        ck_assert_uint_eq(seen.calls_done, 1);
        ck_assert_int_eq(seen.call_error, 0);
        dom = virDomainLookupByUUIDString(libvirt_backend_get_connection(b), seen.uuid);
        ck_assert_ptr_nonnull(dom);
        ck_assert_int_eq(virDomainGetInfo(dom, &info), 0);
        ck_assert_uint_eq(info.memory, 1024 * 1024);
        virDomainFree(dom);

        /* Refused before queueing: no virtio-mem, DIMMs not allowed, unknown domain. */
        uint64_t requested = 0;
        ck_assert_int_eq(libvirt_backend_set_virtio_mem_async(b, seen.uuid, NULL, 256 * MIB, &requested, on_call_done,
                                                              &seen),
                         -ENODEV);
        ck_assert_int_eq(libvirt_backend_attach_dimm_async(b, seen.uuid, 256 * MIB, 0, false, on_call_done, &seen),
                         -EPERM);
        ck_assert_int_eq(libvirt_backend_set_balloon_async(b, "00000000-0000-0000-0000-000000000000", 1024 * MIB,
                                                           on_call_done, &seen),
                         -ENOENT);
        libvirt_backend_free(b);
        ck_assert_uint_eq(seen.calls_done, 1);
}
END_TEST

/* A domain that leaves with a call in flight: its done may have run before (the call was quick),
 * never after. */
START_TEST(test_domain_leaves) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        LibvirtBackend *b = backend_up(&e);
        virDomainPtr dom;

        ck_assert_int_eq(libvirt_backend_set_balloon_async(b, seen.uuid, 1536 * MIB, on_call_done, &seen), 0);
        dom = virDomainLookupByUUIDString(libvirt_backend_get_connection(b), seen.uuid);
        ck_assert_ptr_nonnull(dom);
        /* On the loop's thread, before the loop runs: the balloon call is still queued or
         * running, and its result not handed back. */
        ck_assert_int_eq(virDomainDestroy(dom), 0);
        virDomainFree(dom);
        run_until(e, removed);
        ck_assert_uint_eq(seen.removed, 1);
        /* A barrier instead of a quiet spell: the worker runs its jobs in order and hands their
         * results back in order, so once a stats call queued now is done, the balloon call has
         * run and its done either ran already or was dropped. */
        LibvirtDomainStats request = {};
        memcpy(request.uuid, seen.uuid, sizeof(request.uuid));
        ck_assert_int_eq(libvirt_backend_collect_async(b, &request, 1, on_collected, &seen), 0);
        run_until(e, collected);
        ck_assert(!seen.found); /* the domain is gone */
        fprintf(stderr, "balloon call done %s the domain left\n", seen.calls_done > 0 ? "before" : "never: dropped when");
        ck_assert_uint_eq(seen.calls_done, seen.calls_done_at_removal);
        libvirt_backend_free(b);
}
END_TEST

static void quiet_error(void *userdata _unused_, virErrorPtr error _unused_) {
}

int main(void) {
        virSetErrorFunc(NULL, quiet_error);
        return check_run_case("libvirt-backend-async", "test-driver", NULL, NULL, 60,
                              CHECK_TESTS(test_stats_async, test_balloon_async, test_domain_leaves));
}
