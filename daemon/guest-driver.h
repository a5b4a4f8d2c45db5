/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The guest's other face: what a transport's driver implements (GuestDriver) and calls. The
 * driver creates the guest, attaches it once its memory is known, and runs a cycle every poll
 * interval through the cycle API below; the guest does the rest:
 *
 *   readings (guest_sample_add*, guest_set_*) → RsSample → rs_guest_feed/decide → the manager
 *   arbitrates → rs_actuation_plan → balloon / virtio-mem / DIMM through the driver → the
 *   state file and the history → confirmed by the next cycle's readings.
 *
 * A cycle that is still running when the next is due makes that one a no-op, so a slow guest
 * never queues work and never stalls another. A balloon that stops moving toward its target is
 * noticed: the guest stops being pushed, and the reason says why.
 *
 * The manager and the bus never include this: guest.h is theirs. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "daemon/guest.h"
#include "policies/signals.h"
#include "qmp/qga-osinfo.h"

/* How often a driver has the agent read /proc/zoneinfo again: every interval. Its
 * watermarks (RS_LEVEL_WMARK_*) seldom move (min_free_kbytes or watermark_scale_factor
 * written, THP switched, memory hotplugged), and the last read's are carried into samples
 * while a read fails; but its per-CPU free lists (RS_LEVEL_PCP_FREE) change with every page
 * freed or allocated, and hold free memory MemFree leaves out (up to the low watermarks: 5 %
 * of a 1 GiB guest with THP), which the controller needs every interval. The file is a few
 * KiB, more with many CPUs (about 100 bytes a CPU and a zone). */
#define GUEST_ZONEINFO_REFRESH_USEC 0

/* What drives a guest (daemon/qemu/guest-qmp.c, daemon/libvirt/guest-libvirt.c); userdata is
 * the driver's data given to guest_new(). The actuators return 1 when the call went out and its
 * outcome is to be reported with guest_actuator_done(), 0 when it is done already (carried out
 * synchronously, or merged into a call still queued, whose outcome covers it), -errno when it
 * was refused at once. The guest records the new target at once; an outcome that comes back
 * refused puts the old one back (guest_actuator_done()), the same for every transport. While
 * the daemon stops, set_balloon must be synchronous. The sizes are what QMP would be sent:
 * balloon = the boot memory's share to leave the guest (virtio-mem already taken away),
 * virtio-mem = the block-aligned requested size, and *ret_requested what the device was
 * actually asked for. */
typedef struct GuestDriver {
        /* What its calls are, for the messages that say they fail: "QMP commands". */
        const char *calls;
        int (*set_balloon)(Guest *g, uint64_t balloon_bytes, void *userdata);
        int (*set_virtio_mem)(Guest *g, uint64_t requested, uint64_t *ret_requested, void *userdata);
        /* Hot-plugs one DIMM of `bytes` (naming it, and saying so in the log); NULL: cannot. */
        int (*add_dimm)(Guest *g, uint64_t bytes, void *userdata);
        /* The rest is optional. */
        /* At shutdown, the balloon to leave: 1 when a call went out and done() will run, 0 when
         * done already, -errno. NULL: set_balloon(), synchronous. */
        int (*shutdown_balloon)(Guest *g, uint64_t balloon_bytes, void (*done)(Guest *g, void *userdata),
                                void *done_userdata, void *userdata);
        /* Whether its connection can carry a cycle's results (NULL: always). */
        bool (*connected)(const Guest *g, void *userdata);
        /* The policy changed (the poll interval was old_interval_usec). */
        void (*policy_changed)(Guest *g, uint64_t old_interval_usec, void *userdata);
        /* The daemon stops: no more cycles. */
        void (*stop)(Guest *g, void *userdata);
        /* The guest goes: its driver data too. */
        void (*free)(void *userdata);
} GuestDriver;

/* What a guest has, from its driver (guest_attach()). */
typedef struct GuestResources {
        uint64_t base_memory;       /* boot memory */
        uint64_t actual;            /* what the balloon leaves the guest now, virtio-mem included */
        uint64_t balloon_actual;    /* or QEMU's balloon actual (boot memory only), 0: use actual */
        const char *vmem_id;        /* NULL: no virtio-mem */
        uint64_t vmem_size, vmem_max, vmem_block, vmem_requested;
        bool fpr_known, free_page_reporting;
        /* The balloon's deflate-on-oom (libvirt's autodeflate): without it a probe that squeezes
         * too far meets the guest's OOM killer instead of a balloon that gives way. */
        bool deflate_on_oom_known, deflate_on_oom;
        const char *agent;          /* where the guest agent is read (for the log), NULL: none */
        /* DIMM hotplug room, as for QMP guests: maxmem and its slots (0: none), what the
         * memory devices take of them, and the DIMMs among them. */
        uint64_t mem_max_size;
        unsigned mem_slots;
        uint64_t devices_bytes, dimm_bytes;
        unsigned dimm_count;
} GuestResources;

/* A guest and its driver (QMP: guest_qmp_new(), libvirt: guest-libvirt.c). origin is where its
 * source finds it (a QMP socket's path, a libvirt domain's UUID: guest_origin()), uuid the
 * domain's UUID when it has one. The driver runs each cycle with guest_cycle_begin(), the
 * readings, and guest_cycle_step_done(), once it called guest_attach(). */
int guest_new(sd_event *event, GuestSource source, const char *name, const char *uuid, const char *origin,
              const char *state_dir, const RsPolicy *policy, const GuestHooks *hooks, void *userdata,
              const GuestDriver *driver, void *driver_data, Guest **ret);
/* The data given to guest_new() when `driver` drives the guest, NULL otherwise: a driver tells
 * its own guests from the others'. */
void *guest_driver_data(const Guest *g, const GuestDriver *driver);

/* The guest's memory is known: creates the decision core if needed (resuming from the state
 * file) and makes the guest RUNNING; may be called again when the resources change (e.g.
 * virtio-mem appeared, a reconnect). */
int guest_attach(Guest *g, const GuestResources *res);
/* Not managed now, for a fault of this kind with its detail (`rightsizectl list` shows the text
 * guest_fault_format() makes of them); a cycle under way is dropped. GUEST_FAULT_SKIPPED: not
 * managed by design, in the state "skipped". */
void guest_set_faulty(Guest *g, GuestFault kind, const char *detail);
/* The connection is lost (faulty, with the reason); a cycle under way is kept, to be finished
 * (without effect) by the replies still to come. */
void guest_set_disconnected(Guest *g, const char *fault);
/* (Re)connecting; with a note to show meanwhile (not a fault: QEMU not listening yet), or NULL.
 * A faulty guest stays faulty. */
void guest_set_connecting(Guest *g, const char *note);
/* Starts a cycle: -EBUSY while the previous one still runs, -EAGAIN when not running. The
 * cycle holds one step, released by guest_cycle_step_done(); guest_cycle_hold() adds one. */
int guest_cycle_begin(Guest *g);
void guest_cycle_hold(Guest *g);
void guest_cycle_step_done(Guest *g);
/* The cycle ends now, without a decision and without a fault (its guest is going away). */
void guest_cycle_cancel(Guest *g);
/* The cycle's readings failed: it ends without a decision. */
void guest_cycle_fail(Guest *g, const char *error);
/* The cycle's readings, translated by the driver (qmp/qmp-sample.h): every known value of part
 * goes into the cycle's sample. */
void guest_sample_add(Guest *g, const RsSample *part);
/* The balloon's stats, with when the guest last reported them (QEMU's realtime clock, s; never
 * 0: the driver has nothing to add before the first report): stats dated in the future or
 * stale for several intervals are not taken, and the cycle reports the problem. */
void guest_sample_add_balloon_stats(Guest *g, const RsSample *part, uint64_t last_update);
/* What QEMU read from the guest's disks (refaults the guest does not report show there): bytes,
 * read requests and the nanoseconds they took, summed (RS_UNKNOWN: not reported). */
void guest_sample_add_host_disk_read(Guest *g, uint64_t bytes, uint64_t operations, uint64_t time_ns);
/* Untrusted input noticed (an event flood): the cycle's data problem, shown as the fault. */
void guest_sample_report_problem(Guest *g, const char *fmt, ...) _printf_(2, 3);
/* The guest's size: QEMU's balloon actual (boot memory only; plugged virtio-mem is added), or
 * the total as the driver reads it. Implausible values (0, above twice the guest's maximum)
 * are ignored. */
void guest_set_balloon_actual(Guest *g, uint64_t balloon_actual);
void guest_set_actual(Guest *g, uint64_t actual);
/* virtio-mem's plugged size, when the guest has virtio-mem. */
void guest_set_vmem_size(Guest *g, uint64_t size);
/* QEMU's resident memory on the host (UINT64_MAX: unknown). */
void guest_set_host_rss(Guest *g, uint64_t rss);
/* A huge-page repair pass ended (or stopped) having collapsed `collapsed` ranges and filled
 * `filled` bytes of holes: counted in GuestCounters. */
void guest_count_hugepage_repair(Guest *g, uint64_t collapsed, uint64_t filled);
/* The same with its pages in host swap and KSM-merged (each UINT64_MAX: unknown). */
void guest_set_host_memory(Guest *g, uint64_t rss, uint64_t swap, uint64_t ksm);
/* Whether the guest agent answers; why it gives nothing ("" when reads work: in the reason,
 * and in the log when it changes). */
void guest_set_agent_answers(Guest *g, bool answers);
void guest_set_agent_problem(Guest *g, const char *problem);
/* What the agent says it runs on (guest-get-osinfo; NULL: it could not say, and what was known
 * stays). A Windows guest's agent has no /proc: its reads are not asked for, and the reason says
 * what is not seen (guest-agent-os.c). */
void guest_set_agent_os(Guest *g, const QgaOsInfo *os);
/* Whether reading /proc through the agent can give anything: not on a Windows guest. */
bool guest_agent_reads_procfs(const Guest *g);
/* What became of an actuator call the driver sent (its actuator returned 1). */
typedef enum GuestCallOutcome {
        GUEST_CALL_DONE,    /* carried out */
        GUEST_CALL_REFUSED, /* not carried out (the transport said so) */
        /* Not known: it timed out, and may still be carried out (QEMU's monitor answers late
         * but does run the command). Counted as failed; the target stays, and the balloon
         * watch sees where the device goes. */
        GUEST_CALL_UNKNOWN,
} GuestCallOutcome;

/* The outcome of a call sent earlier, once per call. A refused balloon or virtio-mem call puts
 * back the target the device had before the calls still outstanding were sent, once the last of
 * them is in (a later call's target replaces an earlier one's); a DIMM that is not known to be
 * plugged is not counted, and no more are added. error and why say why, for the log. */
void guest_actuator_done(Guest *g, GuestActuator which, GuestCallOutcome outcome, int error, const char *why);
/* CLOCK_MONOTONIC µs at which the cycle under way began, 0 when none is: a driver whose replies
 * come back late tells its cycle from a newer one. */
uint64_t guest_cycle_started(const Guest *g);
