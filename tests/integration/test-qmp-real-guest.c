/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The QMP and guest-agent client against a real QEMU running the test guest: stats
 * polling, ballooning, virtio-mem resizing and /proc/vmstat through the agent.
 * It never skips: without QEMU or the guest image it fails, because CI must prove
 * the real path every time. */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "qmp/json-util.h"
#include "qmp/qmp-sync.h"
#include "tests/lib/guest-fixture.h"
#include "tests/lib/check-run.h"

#define GUEST_MEM (1024 * MIB)
/* Deadlines for what the guest does (never bounds on how fast): room for a TCG guest on a busy
 * machine. */
#define TIMEOUT (30 * USEC_PER_SEC)
#define BALLOON_TIMEOUT (60 * USEC_PER_SEC)
/* The next event of a series (BALLOON_CHANGE is rate-limited to one a second). */
#define EVENT_TIMEOUT (10 * USEC_PER_SEC)

static GuestFixture guest;

static void boot_guest(void) {
        /* A small anonymous set keeps the guest busy without pushing back on the balloon. */
        guest_fixture_boot(&guest, "--mem 1G --swap 256M", "--anon-mib 64 --sleep-ms 500");
}

static void stop_guest(void) {
        guest_fixture_stop(&guest);
}

static QmpClient *connect_qmp(sd_event **ret_event) {
        QmpClient *c = NULL;
        ck_assert_int_eq(sd_event_new(ret_event), 0);
        ck_assert_int_eq(qmp_client_new(&c, *ret_event), 0);
        ck_assert_int_eq(qmp_client_connect_path(c, guest.qmp_path), 0);
        ck_assert_int_eq(qmp_sync_wait_ready(c, TIMEOUT), 0);
        return c;
}

static QgaClient *connect_agent(sd_event **ret_event) {
        QgaClient *g = NULL;
        ck_assert_int_eq(sd_event_new(ret_event), 0);
        ck_assert_int_eq(qga_client_new(&g, *ret_event), 0);
        ck_assert_int_eq(qga_client_connect_path(g, guest.qga_path), 0);
        ck_assert_int_eq(qga_sync_wait_ready(g, TIMEOUT), 0);
        return g;
}

/* MemTotal as the guest itself sees it, through the agent. */
static uint64_t guest_mem_total(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qga_client_freep) QgaClient *g = connect_agent(&e);
        _cleanup_free_ char *error = NULL;
        GuestMeminfo meminfo;

        int r = qga_sync_read_meminfo(g, TIMEOUT, &meminfo, &error);
        ck_assert_msg(r == 0, "reading /proc/meminfo: %s", error ? error : strerror(-r));
        ck_assert(guest_value_is_known(meminfo.value[GUEST_MEMINFO_MEM_TOTAL]));
        return meminfo.value[GUEST_MEMINFO_MEM_TOTAL];
}

START_TEST(test_guest_stats_are_plausible) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qmp_client_freep) QmpClient *c = connect_qmp(&e);
        QmpGuestStats stats;

        ck_assert_int_eq(qmp_sync_set_stats_polling_interval(c, NULL, 1, 0, NULL), 0);
        ck_assert_int_eq(qmp_sync_get_guest_stats(c, NULL, 0, &stats, NULL), 0);
        /* The driver pushes once at load, so wait for a report newer than that one. */
        ck_assert_int_eq(qmp_sync_wait_guest_stats_update(c, NULL, stats.last_update, 200 * USEC_PER_MSEC,
                                                          TIMEOUT, &stats),
                         0);

        uint64_t total = stats.value[QMP_STAT_TOTAL_MEMORY];
        uint64_t free_mem = stats.value[QMP_STAT_FREE_MEMORY];
        uint64_t available = stats.value[QMP_STAT_AVAILABLE_MEMORY];
        ck_assert(qmp_value_is_known(total));
        ck_assert(qmp_value_is_known(free_mem));
        ck_assert(qmp_value_is_known(available));
        /* MemTotal is the RAM minus what the kernel reserved at boot: a few tens of MiB. */
        ck_assert_uint_le(total, GUEST_MEM);
        ck_assert_uint_ge(total, GUEST_MEM - 160 * MIB);
        ck_assert_uint_le(free_mem, total);
        ck_assert_uint_le(available, total);
        ck_assert(qmp_value_is_known(stats.value[QMP_STAT_MINOR_FAULTS]));
        ck_assert_uint_gt(stats.value[QMP_STAT_MINOR_FAULTS], 0);
        /* QEMU 7.2 and a 6.1 guest do not report the 9.2+ scan counters: unknown, not 0. */
        if (!qmp_value_is_known(stats.value[QMP_STAT_DIRECT_SCANS]))
                ck_assert_uint_eq(stats.value[QMP_STAT_DIRECT_SCANS], QMP_VALUE_UNKNOWN);

        bool reporting = false;
        ck_assert_int_eq(qmp_sync_qom_get_bool(c, NULL, QMP_BALLOON_FREE_PAGE_REPORTING, 0, &reporting, NULL), 0);
        ck_assert(reporting);
}
END_TEST

START_TEST(test_balloon_follows_target) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qmp_client_freep) QmpClient *c = connect_qmp(&e);
        QmpBalloonInfo info;
        QmpEventWatch *watch = NULL;
        uint64_t actual = 0;

        ck_assert_int_eq(qmp_sync_query_balloon(c, 0, &info, NULL), 0);
        ck_assert_uint_eq(info.actual, GUEST_MEM);
        uint64_t target = info.actual - 256 * MIB;

        ck_assert_int_eq(qmp_event_watch_new(c, "BALLOON_CHANGE", &watch), 0);
        ck_assert_int_eq(qmp_sync_balloon_set_target(c, target, 0, NULL), 0);
        ck_assert_int_eq(qmp_sync_wait_balloon(c, target, 4 * MIB, 100 * USEC_PER_MSEC, BALLOON_TIMEOUT, &actual),
                         0);
        ck_assert_uint_le(actual, target + 4 * MIB);

        /* BALLOON_CHANGE is rate-limited to one a second, so the last one may lag: drain
         * until one reports the final size. */
        bool seen_final = false;
        for (int i = 0; i < 10 && !seen_final; i++) {
                _cleanup_(json_object_putp) json_object *msg = NULL;
                QmpEvent ev;
                QmpTypedEvent typed;
                ck_assert_int_eq(qmp_event_watch_next(watch, EVENT_TIMEOUT, &msg), 0);
                ck_assert_int_eq(qmp_event_from_message(msg, &ev), 0);
                ck_assert_int_eq(qmp_event_parse(&ev, &typed), 0);
                ck_assert_int_eq(typed.type, QMP_EVENT_BALLOON_CHANGE);
                ck_assert_uint_lt(typed.balloon_change.actual, GUEST_MEM);
                seen_final = typed.balloon_change.actual <= target + 4 * MIB;
        }
        ck_assert(seen_final);
        qmp_event_watch_free(watch);

        /* Give it back so later tests see the full guest. */
        ck_assert_int_eq(qmp_sync_balloon_set_target(c, GUEST_MEM, 0, NULL), 0);
        ck_assert_int_eq(qmp_sync_wait_balloon(c, GUEST_MEM, 4 * MIB, 100 * USEC_PER_MSEC, BALLOON_TIMEOUT, &actual),
                         0);
}
END_TEST

START_TEST(test_virtio_mem_resize) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qmp_client_freep) QmpClient *c = connect_qmp(&e);
        QmpMemoryDeviceList list = {};
        QmpEventWatch *watch = NULL;
        uint64_t size = 0;

        ck_assert_int_eq(qmp_sync_query_memory_devices(c, 0, &list, NULL), 0);
        const QmpMemoryDevice *vm0 = qmp_memory_device_list_find(&list, "vm0");
        ck_assert_ptr_nonnull(vm0);
        ck_assert_int_eq(vm0->type, QMP_MEMORY_DEVICE_VIRTIO_MEM);
        ck_assert_uint_eq(vm0->size, 0);
        ck_assert_uint_eq(vm0->block_size, 2 * MIB);
        ck_assert_uint_ge(vm0->max_size, 512 * MIB);
        qmp_memory_device_list_clear(&list);

        uint64_t mem_total_before = guest_mem_total();
        ck_assert_int_eq(qmp_event_watch_new(c, "MEMORY_DEVICE_SIZE_CHANGE", &watch), 0);
        ck_assert_int_eq(qmp_sync_virtio_mem_set_requested_size(c, "vm0", 512 * MIB, 0, NULL), 0);
        ck_assert_int_eq(qmp_sync_wait_memory_device_size(c, "vm0", 512 * MIB, 50 * USEC_PER_MSEC, TIMEOUT, &size), 0);
        ck_assert_uint_eq(size, 512 * MIB);

        bool seen_final = false;
        for (int i = 0; i < 10 && !seen_final; i++) {
                _cleanup_(json_object_putp) json_object *msg = NULL;
                QmpEvent ev;
                QmpTypedEvent typed;
                ck_assert_int_eq(qmp_event_watch_next(watch, EVENT_TIMEOUT, &msg), 0);
                ck_assert_int_eq(qmp_event_from_message(msg, &ev), 0);
                ck_assert_int_eq(qmp_event_parse(&ev, &typed), 0);
                ck_assert_int_eq(typed.type, QMP_EVENT_MEMORY_DEVICE_SIZE_CHANGE);
                ck_assert_str_eq(typed.memory_device_size_change.id, "vm0");
                seen_final = typed.memory_device_size_change.size == 512 * MIB;
        }
        ck_assert(seen_final);
        qmp_event_watch_free(watch);

        ck_assert_int_eq(qmp_sync_query_memory_devices(c, 0, &list, NULL), 0);
        vm0 = qmp_memory_device_list_find(&list, "vm0");
        ck_assert_ptr_nonnull(vm0);
        ck_assert_uint_eq(vm0->size, 512 * MIB);
        ck_assert_uint_eq(vm0->requested_size, 512 * MIB);
        qmp_memory_device_list_clear(&list);

        /* The guest onlined the new blocks itself (auto_online_blocks=online_movable, no
         * udev): its MemTotal grows by the plugged size. */
        ck_assert_uint_ge(guest_mem_total(), mem_total_before + 500 * MIB);

        ck_assert_int_eq(qmp_sync_virtio_mem_set_requested_size(c, "vm0", 0, 0, NULL), 0);
        ck_assert_int_eq(qmp_sync_wait_memory_device_size(c, "vm0", 0, 100 * USEC_PER_MSEC, BALLOON_TIMEOUT, &size), 0);
}
END_TEST

START_TEST(test_agent_reads_vmstat_and_psi) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qga_client_freep) QgaClient *g = connect_agent(&e);
        GuestVmstat vmstat;
        GuestPsi psi;
        _cleanup_free_ char *error = NULL;

        int r = qga_sync_read_vmstat(g, TIMEOUT, &vmstat, &error);
        ck_assert_msg(r == 0, "reading /proc/vmstat: %s", error ? error : strerror(-r));
        ck_assert(guest_value_is_known(vmstat.value[GUEST_VMSTAT_WORKINGSET_REFAULT_FILE]));
        ck_assert(guest_value_is_known(vmstat.value[GUEST_VMSTAT_WORKINGSET_ACTIVATE_FILE]));
        ck_assert(guest_value_is_known(vmstat.value[GUEST_VMSTAT_PGMAJFAULT]));
        ck_assert(guest_value_is_known(vmstat.value[GUEST_VMSTAT_PGFAULT]));
        ck_assert_uint_gt(vmstat.value[GUEST_VMSTAT_PGFAULT], 0);

        r = qga_sync_read_psi_memory(g, TIMEOUT, &psi, &error);
        ck_assert_msg(r == 0, "reading /proc/pressure/memory: %s", error ? error : strerror(-r));
        ck_assert(psi.some.known);
        ck_assert(psi.full.known);
        ck_assert(psi.some.avg10 >= 0.0 && psi.some.avg10 <= 100.0);
}
END_TEST

/* MemFree and the per-CPU free lists, through the agent, bytes. */
static void free_and_lists(QgaClient *g, uint64_t *ret_free, uint64_t *ret_lists) {
        _cleanup_free_ char *error = NULL;
        GuestMeminfo meminfo;
        GuestZoneinfo zoneinfo;
        int r = qga_sync_read_meminfo(g, TIMEOUT, &meminfo, &error);
        ck_assert_msg(r == 0, "reading /proc/meminfo: %s", error ? error : strerror(-r));
        r = qga_sync_read_zoneinfo(g, TIMEOUT, &zoneinfo, &error);
        ck_assert_msg(r == 0, "reading /proc/zoneinfo: %s", error ? error : strerror(-r));
        ck_assert(guest_value_is_known(meminfo.value[GUEST_MEMINFO_MEM_FREE]));
        ck_assert(guest_value_is_known(zoneinfo.pcp));
        *ret_free = meminfo.value[GUEST_MEMINFO_MEM_FREE];
        *ret_lists = zoneinfo.pcp;
}

/* Free memory the guest's own count leaves out (kernel 5.14 and later): pages a deflation
 * frees park on the per-CPU lists first, and only /proc/zoneinfo shows them (what the cost
 * controller adds to free memory, RS_LEVEL_PCP_FREE). Deflated by 256 MiB, the guest's
 * MemFree grows by less than that, by what its lists took, and the two together by the
 * deflation, give or take what the idle guest did meanwhile. */
#define DEFLATE_TOLERANCE (4 * MIB)
START_TEST(test_per_cpu_lists_hold_freed_pages) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL, *ea = NULL;
        _cleanup_(qmp_client_freep) QmpClient *c = connect_qmp(&e);
        _cleanup_(qga_client_freep) QgaClient *g = connect_agent(&ea);
        uint64_t actual = 0, free0, lists0, free1, lists1;

        ck_assert_int_eq(qmp_sync_balloon_set_target(c, GUEST_MEM - 256 * MIB, 0, NULL), 0);
        ck_assert_int_eq(qmp_sync_wait_balloon(c, GUEST_MEM - 256 * MIB, 4 * MIB, 100 * USEC_PER_MSEC, BALLOON_TIMEOUT,
                                               &actual),
                         0);
        sleep(1);
        free_and_lists(g, &free0, &lists0);
        ck_assert_int_eq(qmp_sync_balloon_set_target(c, GUEST_MEM, 0, NULL), 0);
        ck_assert_int_eq(qmp_sync_wait_balloon(c, GUEST_MEM, 4 * MIB, 100 * USEC_PER_MSEC, BALLOON_TIMEOUT, &actual), 0);
        sleep(1);
        free_and_lists(g, &free1, &lists1);
        double gave = (double) actual - (double) (GUEST_MEM - 256 * MIB);
        double free_grew = (double) free1 - (double) free0, lists_grew = (double) lists1 - (double) lists0;
        fprintf(stderr, "deflated by %.1f MiB: MemFree %+.1f MiB, the per-CPU lists %+.1f MiB (%.1f -> %.1f MiB)\n",
                gave / MIB, free_grew / MIB, lists_grew / MIB, (double) lists0 / MIB, (double) lists1 / MIB);
        ck_assert_msg(lists_grew >= 1.0 * MIB, "the lists grew by %.1f MiB", lists_grew / MIB);
        ck_assert_msg(free_grew <= gave - lists_grew + DEFLATE_TOLERANCE, "MemFree grew by %.1f MiB", free_grew / MIB);
        ck_assert_msg(fabs(free_grew + lists_grew - gave) <= DEFLATE_TOLERANCE,
                      "MemFree and the lists grew by %.1f MiB together, the deflation gave %.1f MiB",
                      (free_grew + lists_grew) / MIB, gave / MIB);
}
END_TEST

static Suite *real_guest_suite(void) {
        Suite *s = suite_create("qmp-real-guest");
        TCase *tc = tcase_create("guest");
        /* Booting once for all tests: the fixture runs in the parent, the tests in children. */
        tcase_add_unchecked_fixture(tc, boot_guest, stop_guest);
        check_set_deadline(tc, 300); /* above the sum of one test's deadlines */
        tcase_add_test(tc, test_guest_stats_are_plausible);
        tcase_add_test(tc, test_balloon_follows_target);
        tcase_add_test(tc, test_virtio_mem_resize);
        tcase_add_test(tc, test_agent_reads_vmstat_and_psi);
        tcase_add_test(tc, test_per_cpu_lists_hold_freed_pages);
        suite_add_tcase(s, tc);
        return s;
}

int main(void) {
        return check_run_suite(real_guest_suite());
}
