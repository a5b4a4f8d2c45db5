/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* DIMM growth end to end on the real test guest: a 1 GiB guest (-m 1G,slots=4,maxmem=4G, its
 * 2 GiB virtio-mem device left unused by actuator = balloon, so DIMMs get the 1 GiB that maxmem
 * leaves) under a policy with allow-dimm = yes and a floor of 1400 MiB, above what it booted
 * with. rightsized must hot-plug DIMMs (the only way past the boot size), no more than needed,
 * let the balloon trim to the floor, and the guest must have onlined the new memory. Checked from three sides: the
 * daemon's actual over D-Bus, QEMU's query-memory-devices and query-balloon (after the daemon
 * let go of the QMP socket), and the guest's own MemTotal through the agent, which the daemon
 * is not given. */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "qmp/qmp-sync.h"
#include "tests/lib/bus-fixture.h"
#include "tests/lib/daemon-fixture.h"
#include "tests/lib/e2e-common.h"
#include "tests/lib/guest-fixture.h"
#include "tests/lib/test-util.h"

#define GUEST_NAME "qmp.sock"
#define BOOT_MEM (1024 * MIB)
#define FLOOR (1400 * MIB)
#define WAIT_SECS 90

static GuestFixture guest;
static BusFixture bus;
static DaemonFixture daemon_fx;

static void teardown_all(void) {
        e2e_daemon_teardown(&daemon_fx);
        bus_fixture_stop(&bus);
        guest_fixture_stop(&guest);
}

/* The fixture's config (shutdown-action keep: the sizes stay for the test to read), with debug
 * logging, no metrics file, and the guest's QMP socket. No agent for the daemon: the agent socket
 * takes one client, and the test reads MemTotal through it. */
static void write_config(void) {
        char qmp_sockets[PATH_MAX];

        daemon_fixture_write_config(&daemon_fx, "", NULL);
        daemon_fixture_set_config(&daemon_fx, "log-level", "debug");
        daemon_fixture_set_config(&daemon_fx, "metrics-path", NULL);
        snprintf(qmp_sockets, sizeof(qmp_sockets), "%s/qmp.sock", guest.run_dir);
        daemon_fixture_set_config(&daemon_fx, "qmp-sockets", qmp_sockets);
        daemon_fixture_set_config(&daemon_fx, "agent-socket-pattern", "%d/no-agent.sock");
}

static uint64_t guest_mem_total(void) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qga_client_freep) QgaClient *g = NULL;
        _cleanup_free_ char *error = NULL;
        GuestMeminfo mi;

        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(qga_client_new(&g, e), 0);
        ck_assert_int_eq(qga_client_connect_path(g, guest.qga_path), 0);
        ck_assert_int_eq(qga_sync_wait_ready(g, 20 * USEC_PER_SEC), 0);
        int r = qga_sync_read_meminfo(g, 10 * USEC_PER_SEC, &mi, &error);
        ck_assert_msg(r >= 0, "meminfo through the agent: %s", error ?: strerror(-r));
        ck_assert(mi.value[GUEST_MEMINFO_MEM_TOTAL] != GUEST_VALUE_UNKNOWN);
        return mi.value[GUEST_MEMINFO_MEM_TOTAL];
}

static void setup_all(void) {
        e2e_teardown_on_signals(teardown_all);
        /* boot-guest gives slots and maxmem only with a virtio-mem device. */
        guest_fixture_boot(&guest, "--mem 1G --maxmem 4G --vmem-size 2G", NULL);
        atexit(teardown_all);
        ck_assert_int_eq(bus_fixture_start(&bus, BUS_POLICY_OPEN), 0);
        daemon_fixture_init(&daemon_fx, &bus);
        daemon_fixture_write_policy(&daemon_fx, "grow",
                                    "[policy]\nmatch = *\npoll-interval = 1s\nfloor = 1400M\nmax = 2G\n"
                                    "allow-dimm = yes\nactuator = balloon\nguest-agent = no\n");
        write_config();
}

START_TEST(test_daemon_dimm) {
        GuestView v = {};
        double t0 = e2e_now_sec();

        uint64_t total_before = guest_mem_total();
        fprintf(stderr, "MemTotal at boot: %.0f MiB\n", mib(total_before));
        ck_assert_uint_lt(total_before, BOOT_MEM);

        /* 1. The daemon grows the guest to its floor: past the boot size only a DIMM can. */
        daemon_fixture_start(&daemon_fx);
        bool reached = false;
        while (!reached && e2e_now_sec() < t0 + WAIT_SECS) {
                sleep(1);
                if (e2e_get_guest(&daemon_fx, GUEST_NAME, &v) == 0)
                        reached = v.actual > BOOT_MEM && within(v.actual, FLOOR, 0.03);
        }
        e2e_print_view("dimm", t0, &v, FLOOR);
        ck_assert_msg(reached, "actual %.0f MiB never reached the floor %.0f MiB", mib(v.actual), mib(FLOOR));
        ck_assert_uint_ge(v.floor, FLOOR);
        ck_assert_uint_eq(v.max, 2048 * MIB);
        ck_assert(daemon_fixture_wait_log(&daemon_fx, "Hot-plugging DIMM rs-dimm0", 30));
        ck_assert(!file_contains(daemon_fx.log_path, "DIMM hotplug failed"));
        unsigned plugged = daemon_fixture_log_count(&daemon_fx, "Hot-plugging DIMM");
        /* It stays there: no DIMM is added once the floor is reached. */
        sleep(5);
        ck_assert_int_eq(e2e_get_guest(&daemon_fx, GUEST_NAME, &v), 0);
        ck_assert_msg(within(v.actual, FLOOR, 0.03), "actual moved to %.0f MiB", mib(v.actual));
        ck_assert_uint_eq(daemon_fixture_log_count(&daemon_fx, "Hot-plugging DIMM"), plugged);
        int status = daemon_fixture_stop(&daemon_fx, SIGTERM);
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        fprintf(stderr, "floor reached after %.0fs\n", e2e_now_sec() - t0);

        /* 2. QEMU's view, now that the daemon let go of the QMP socket. */
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(qmp_client_freep) QmpClient *c = NULL;
        _cleanup_free_ char *error = NULL;
        QmpMemoryDeviceList list = {};
        QmpBalloonInfo info = {};
        ck_assert_int_eq(sd_event_new(&e), 0);
        ck_assert_int_eq(qmp_client_new(&c, e), 0);
        ck_assert_int_eq(qmp_client_connect_path(c, guest.qmp_path), 0);
        ck_assert_int_eq(qmp_sync_wait_ready(c, 10 * USEC_PER_SEC), 0);
        ck_assert_int_ge(qmp_sync_query_memory_devices(c, 5 * USEC_PER_SEC, &list, &error), 0);
        uint64_t dimm_bytes = 0, dimm_size = 0;
        unsigned dimms = 0;
        for (size_t i = 0; i < list.n_devices; i++)
                if (list.devices[i].type == QMP_MEMORY_DEVICE_DIMM) {
                        fprintf(stderr, "DIMM %s: %.0f MiB\n", list.devices[i].id ?: "(no id)",
                                mib(list.devices[i].size));
                        ck_assert_ptr_nonnull(list.devices[i].id);
                        ck_assert(strncmp(list.devices[i].id, "rs-dimm", 7) == 0);
                        dimm_bytes += list.devices[i].size;
                        dimm_size = list.devices[i].size;
                        dimms++;
                }
        qmp_memory_device_list_clear(&list);
        /* As many as the daemon said, enough for the floor, and not one more than that. */
        ck_assert_uint_eq(dimms, plugged);
        ck_assert_uint_ge(dimms, 1);
        ck_assert_uint_ge(BOOT_MEM + dimm_bytes, FLOOR);
        ck_assert_uint_lt(BOOT_MEM + dimm_bytes - dimm_size, FLOOR);
        ck_assert_int_ge(qmp_sync_query_balloon(c, 5 * USEC_PER_SEC, &info, &error), 0);
        fprintf(stderr, "query-balloon actual %.0f MiB\n", mib(info.actual));
        ck_assert(within(info.actual, FLOOR, 0.03));

        /* 3. The guest onlined the DIMM: MemTotal past anything 1 GiB of boot memory gives. */
        uint64_t total_after = guest_mem_total();
        fprintf(stderr, "MemTotal now: %.0f MiB (was %.0f MiB)\n", mib(total_after), mib(total_before));
        ck_assert_uint_gt(total_after, BOOT_MEM);
        ck_assert_uint_gt(total_after, total_before + 256 * MIB);
}
END_TEST

int main(void) {
        return e2e_run_suite(suite_create("daemon-dimm"), "dimm", test_daemon_dimm, setup_all, teardown_all, 300);
}
