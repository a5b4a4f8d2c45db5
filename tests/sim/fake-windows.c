/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fake-qemu's Windows guests (--windows): what differs from a Linux guest, as the Windows side
 * builds it. Only the reply shapes are taken from the sources; the numbers are the guest model's.
 *
 * The balloon (virtio-win, kvm-guest-drivers-windows):
 *   - tags 0-9 only (Balloon/sys/public.h: VIRTIO_BALLOON_S_NR is 10), filled by
 *     Balloon/sys/memstat.c GatherKernelStats(): swap-in = PageReadCount << PAGE_SHIFT and
 *     major-faults = the same PageReadCount, so swap-in is major-faults in bytes; swap-out the
 *     pages written to the paging file and mapped files; minor-faults the soft faults;
 *     free-memory Windows' available pages (free and standby lists); total-memory the physical
 *     pages; available-memory = free-memory + half the system cache; disk-caches the system
 *     cache (SystemFileCacheInformationEx CurrentSize); hugetlb ones 0.
 *   - QEMU keeps what no tag set at -1 (hw/virtio/virtio-balloon.c reset_stats()) and visits
 *     every stat as uint64 (balloon_stats_get_all()): the six stats past tag 9 are
 *     18446744073709551615 on the wire.
 *   - the driver's first buffer, posted at load, is all 0xFF (Balloon/sys/Device.c
 *     RtlFillMemory(MemStats, ..., -1)): tag 0xFFFF is past what QEMU keeps, so until the first
 *     refresh last-update is set and every stat is 2^64-1.
 * The model's free pages plus half its cache stand for the available (free + standby) lists, the
 * other half for the system cache's working set: disjoint, as on Windows.
 *
 * The agent (qemu-ga for Windows, QEMU qga/commands-win32.c):
 *   - guest-get-osinfo: id "mswindows" and the rest as qmp_guest_get_osinfo() fills it;
 *   - guest-file-open: CreateFileW() of the path; there is no /proc, so the Win32 error
 *     ERROR_PATH_NOT_FOUND as error_setg_win32() words it;
 *   - everything else as fake-agent.c answers it (guest-sync*, guest-info, ...). */

#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "common/macro.h"
#include "policies/rs-value.h"
#include "tests/sim/fake-qemu.h"

#define WIN_PAGE_SHIFT 12
#define WIN_UNSET UINT64_MAX /* what QEMU sends for a stat no tag set */

static uint64_t known_or_unset(uint64_t v) {
        return rs_known(v) ? v : WIN_UNSET;
}

json_object *windows_guest_stats_json(Guest *g) {
        static const char *const names[] = {
                "stat-swap-in",     "stat-swap-out",      "stat-major-faults",     "stat-minor-faults",
                "stat-free-memory", "stat-total-memory",  "stat-available-memory", "stat-disk-caches",
                "stat-htlb-pgalloc", "stat-htlb-pgfail",  "stat-oom-kills",        "stat-alloc-stalls",
                "stat-async-scans", "stat-direct-scans",  "stat-async-reclaims",   "stat-direct-reclaims",
        };
        uint64_t v[ARRAY_SIZE(names)];
        for (size_t i = 0; i < ARRAY_SIZE(v); i++)
                v[i] = WIN_UNSET;

        if (g->have_stats) {
                const RsSample *s = &g->stats;
                uint64_t total = s->level[RS_LEVEL_TOTAL], free_b = s->level[RS_LEVEL_FREE],
                         cache = s->level[RS_LEVEL_DISK_CACHES], reads = s->counter[RS_COUNTER_MAJOR_FAULTS];
                uint64_t standby = rs_known(cache) ? cache / 2 : 0, cache_ws = rs_known(cache) ? cache - standby : 0;

                v[0] = rs_known(reads) ? reads << WIN_PAGE_SHIFT : WIN_UNSET;
                v[1] = known_or_unset(s->counter[RS_COUNTER_SWAP_OUT]);
                v[2] = known_or_unset(reads);
                v[3] = known_or_unset(s->counter[RS_COUNTER_MINOR_FAULTS]);
                v[4] = rs_known(free_b) ? free_b + standby : WIN_UNSET;
                v[5] = known_or_unset(total);
                v[6] = rs_known(free_b) ? free_b + standby + cache_ws / 2 : WIN_UNSET;
                v[7] = rs_known(cache) ? cache_ws : WIN_UNSET;
                v[8] = v[9] = 0;
                /* The model's levels are Linux's, which overlap; Windows' do not add up past total. */
                for (size_t i = 4; i <= 7 && rs_known(total); i++)
                        if (i != 5 && v[i] != WIN_UNSET)
                                v[i] = MIN(v[i], total);
        }

        json_object *o = json_object_new_object(), *stats = json_object_new_object();
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                json_object_object_add(stats, names[i], json_object_new_uint64(v[i]));
        json_object_object_add(o, "stats", stats);
        /* set from the driver's first, all-0xFF buffer on: it is posted when the driver loads */
        json_object_object_add(o, "last-update", json_object_new_uint64(STATS_EPOCH + guest_stats_reported_usec(g) / USEC_PER_SEC));
        return o;
}

static json_object *windows_osinfo(void) {
        json_object *o = json_object_new_object();
        static const char *const members[][2] = {
                { "kernel-version", "10.0" },
                { "kernel-release", "20348" },
                { "machine", "x86_64" },
                { "id", "mswindows" },
                { "name", "Microsoft Windows" },
                { "pretty-name", "Windows Server 2022 Datacenter" },
                { "version", "N/A" },
                { "version-id", "N/A" },
                { "variant", "server" },
                { "variant-id", "server" },
        };
        for (size_t i = 0; i < ARRAY_SIZE(members); i++)
                json_object_object_add(o, members[i][0], json_object_new_string(members[i][1]));
        return o;
}

json_object *windows_agent_execute(Guest *g _unused_, const char *cmd, json_object *args) {
        if (strcmp(cmd, "guest-get-osinfo") == 0)
                return return_reply(windows_osinfo());
        if (strcmp(cmd, "guest-file-open") == 0) {
                json_object *v;
                const char *path = "";
                char desc[512];
                if (args && json_object_object_get_ex(args, "path", &v) && json_object_is_type(v, json_type_string))
                        path = json_object_get_string(v);
                snprintf(desc, sizeof(desc), "failed to open file '%s': The system cannot find the path specified.",
                         path);
                return error_reply("GenericError", desc);
        }
        return NULL;
}
