/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One managed guest, whatever drives it: its driver (daemon/qemu/guest-qmp.c for a plain QEMU
 * guest over its QMP socket, daemon/libvirt/guest-libvirt.c for a libvirt domain) runs a cycle
 * every poll interval through the cycle API below, and the guest does the rest:
 *
 *   readings (guest_sample_add*, guest_set_*) → RsSample → rs_guest_feed/decide → the manager
 *   arbitrates → rs_actuation_plan → balloon / virtio-mem / DIMM through the driver → the
 *   state file and the history → confirmed by the next cycle's readings.
 *
 * A cycle that is still running when the next is due makes that one a no-op, so a slow guest
 * never queues work and never stalls another. A balloon that stops moving toward its target is
 * noticed: the guest stops being pushed, and the reason says why. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <systemd/sd-event.h>

#include "common/macro.h"
#include "daemon/conf.h"
#include "daemon/estimate-signal.h"
#include "daemon/guest-fault.h"
#include "daemon/host/host.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "policies/arbiter.h"
#include "policies/estimator.h"
#include "policies/policy.h"

#define GUEST_HISTORY_MAX 360
/* An agent problem fits whole beside the core's reason (see guest_reason()). */
#define GUEST_AGENT_PROBLEM_MAX 96

/* Opaque: its fields are guest.c's and guest-actuate.c's (guest-internal.h); everyone else reads
 * it through the views below and changes it through the functions that say what happens. */
typedef struct Guest Guest;

typedef struct GuestHistoryPoint {
        uint64_t realtime_usec;
        uint64_t target, actual, estimate; /* estimate 0 while unknown */
} GuestHistoryPoint;

typedef struct GuestHooks {
        /* The host's memory and PSI for this cycle's sample: one reading shared by every guest
         * (the manager re-reads it at most twice a second). NULL: read it directly. */
        const HostMemory *(*host_memory)(Guest *g, void *userdata);
        /* After a sample was fed: the target this guest may have after host arbitration. */
        uint64_t (*arbitrate)(Guest *g, void *userdata);
        /* After every cycle (and on connection changes); estimate_changed as EstimateChanged
         * defines it: more than 1 % or new bounds. */
        void (*updated)(Guest *g, bool estimate_changed, void *userdata);
} GuestHooks;

/* Where a guest comes from: its own QMP socket (daemon/qemu/), or a libvirt domain
 * (daemon/libvirt/), which is never touched through QMP. Each is a guest source (guest-source.h). */
typedef enum GuestSource {
        GUEST_SOURCE_QEMU,
        GUEST_SOURCE_LIBVIRT,
        _GUEST_SOURCE_MAX,
} GuestSource;

/* What drives a guest (daemon/qemu/guest-qmp.c, daemon/libvirt/guest-libvirt.c); userdata is
 * the driver's data given to guest_new(). The actuators return 1 when the call went out and its
 * outcome is to be reported with guest_actuator_done(), 0 when it is done already (carried out
 * synchronously, or merged into a call still queued, whose outcome covers it), -errno when it
 * was refused at once. The guest records the new target at once; an outcome that comes back
 * refused puts the old one back (guest_actuator_done()), the same for every transport. While
 * the daemon stops, set_balloon must be synchronous. The sizes are what QMP would be sent: balloon = the boot memory's share to leave the guest (virtio-mem
 * already taken away), virtio-mem = the block-aligned requested size, and *ret_requested what
 * the device was actually asked for. */
typedef struct GuestDriver {
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

/* A queued actuator call the driver reports as failed. */
typedef enum GuestActuator {
        GUEST_ACTUATOR_BALLOON,
        GUEST_ACTUATOR_VIRTIO_MEM,
        GUEST_ACTUATOR_DIMM,
        _GUEST_ACTUATOR_MAX,
} GuestActuator;

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

/* The connection's phase; the decision core's state takes over once RUNNING. */
typedef enum GuestPhase {
        GUEST_PHASE_CONNECTING,
        GUEST_PHASE_RUNNING,
        GUEST_PHASE_FAULTY,
} GuestPhase;

/* What the metrics count for a guest since the daemon started (not kept in the state file):
 * read together, so handed out as one view (guest_counters()). */
typedef struct GuestCounters {
        MetricsCounter refaults_anon, refaults_file, major_faults, oom_kills;
        uint64_t probe_refaults;   /* refaults in intervals spent in PROBE or BACKOFF */
        uint64_t probe_cycles;     /* entries into PROBE from LEARN or HOLD: one a descent */
        uint64_t resizes[_GUEST_ACTUATOR_MAX];          /* changes sent (or queued) */
        uint64_t actuator_failures[_GUEST_ACTUATOR_MAX]; /* changes refused, at once or later */
        uint64_t faults;           /* times the guest went from no fault to a fault */
} GuestCounters;

/* A guest and its driver (QMP: guest_qmp_new(), libvirt: guest-libvirt.c). origin is where its
 * source finds it (a QMP socket's path, a libvirt domain's UUID: guest_origin()), uuid the
 * domain's UUID when it has one. The driver runs each cycle with guest_cycle_begin(), the
 * readings, and guest_cycle_step_done(), once it called guest_attach(). */
int guest_new(sd_event *event, GuestSource source, const char *name, const char *uuid, const char *origin,
              const char *state_dir, const RsPolicy *policy, const GuestHooks *hooks, void *userdata,
              const GuestDriver *driver, void *driver_data, Guest **ret);
Guest *guest_free(Guest *g);

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
/* What QEMU read from the guest's disks (refaults the guest does not report show there). */
void guest_sample_add_host_disk_read(Guest *g, uint64_t bytes);
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
/* Whether the guest agent answers; why it gives nothing ("" when reads work: in the reason,
 * and in the log when it changes). */
void guest_set_agent_answers(Guest *g, bool answers);
bool guest_agent_answers(const Guest *g);
void guest_set_agent_problem(Guest *g, const char *problem);
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

int guest_set_policy(Guest *g, const RsPolicy *policy);
/* 0 clears an override. -EINVAL when the result is not a valid policy. */
int guest_set_overrides(Guest *g, uint64_t floor, uint64_t max);
void guest_set_paused(Guest *g, bool paused);
/* Probe from the next sample on instead of after the hold time. -EPERM when paused; the core's
 * refusal otherwise: -EOPNOTSUPP (observe mode, no guest statistics), -EBUSY (not running yet,
 * no baseline yet, or being given memory). */
int guest_request_probe(Guest *g);
int guest_set_state_dir(Guest *g, const char *dir);
/* A state file saved longer ago than this (state-stale-after=; 0: none is) is not trusted for
 * sizes: the guest is brought back to its take-over size and learned anew. */
void guest_set_state_stale_usec(Guest *g, uint64_t usec);

/* "learn" ... "observe", or "paused", "faulty", "skipped", "connecting" (the D-Bus API's words). */
const char *guest_state_string(const Guest *g);
/* Every name guest_state_string() can give ("unknown" aside) into names (at most max); how many. */
size_t guest_all_state_names(const char **names, size_t max);

const char *guest_tier_string(const Guest *g);
const RsEstimate *guest_estimate(const Guest *g); /* NULL before the core exists */
/* Re-probes the core did not run (nothing to give); 0 before the core exists. */
unsigned guest_reprobes_skipped(const Guest *g);
/* What the EstimateChanged signal carries: the estimate the last one said (the last known while
 * the core re-measures) and the bounds; RS_UNKNOWN for what is not known. */
const EstimateSignal *guest_estimate_signal(const Guest *g);
/* What the guest would give back if held at its estimate plus margin (the size HOLD keeps it
 * at, within floor and max): max minus that, 0 when none; UINT64_MAX before an estimate. */
uint64_t guest_reclaimable(const Guest *g);
/* What rightsizing holds back from the guest now: the size rightsized took it over at minus its
 * actual size, 0 when none (a freshly taken guest has given nothing, whatever its max);
 * UINT64_MAX before its size is known. */
uint64_t guest_reclaimed(const Guest *g);
const char *guest_source_string(GuestSource s);
/* What a guest's origin is, in the operator's words: "QMP socket", "libvirt domain". */
const char *guest_source_origin_kind(GuestSource s);
uint64_t guest_floor(const Guest *g);
uint64_t guest_max(const Guest *g);
/* The history, oldest first; returns the number of points written. */
size_t guest_history(const Guest *g, GuestHistoryPoint *out, size_t n);

/* Writes the state file now, and whatever change was waiting for it (used at shutdown and as the
 * guest goes); changes otherwise ask guest-save.c for a save, coalesced. */
int guest_save_state(Guest *g);

/* The daemon stops: no more cycles (the driver's). */
void guest_stop(Guest *g);

/* Leaves the guest at the size the shutdown action asks for. Returns 1 when a command went out
 * (done is called when it completes), 0 when nothing was needed, -errno otherwise. */
int guest_shutdown(Guest *g, ShutdownAction action, void (*done)(Guest *g, void *userdata), void *userdata);

/* ---- what the guest is and has: read-only views for the manager, the bus and the drivers ---- */

const char *guest_name(const Guest *g);
const char *guest_uuid(const Guest *g);          /* NULL when unknown (QMP guests) */
GuestSource guest_source(const Guest *g);
/* Where its source finds it, as guest_new() took it: its source's key for it. */
const char *guest_origin(const Guest *g);
sd_event *guest_event(const Guest *g);
/* The data given to guest_new() when `driver` drives the guest, NULL otherwise: a driver tells
 * its own guests from the others'. */
void *guest_driver_data(const Guest *g, const GuestDriver *driver);
GuestPhase guest_phase(const Guest *g);
/* The policy in force: the selected one with the operator's overrides applied. */
const RsPolicy *guest_policy(const Guest *g);
/* The operator's floor and max (0: none), as guest_set_overrides() took them. */
void guest_overrides(const Guest *g, uint64_t *ret_floor, uint64_t *ret_max);
bool guest_is_paused(const Guest *g);
/* The fault on show (a lost connection, untrusted data, a stalled balloon, or what a connecting
 * guest waits for); NULL when there is none. */
const char *guest_fault(const Guest *g);
/* What kind of fault that is (GUEST_FAULT_NONE when none): what code decides on. */
GuestFault guest_fault_kind(const Guest *g);
/* Why the guest is where it is (the core's reason, and the agent's problem); NULL while there is none. */
const char *guest_reason(const Guest *g);
/* Why the agent gives nothing; NULL while its reads work. */
const char *guest_agent_problem(const Guest *g);

/* Sizes in bytes: 0 while unknown (or, for the targets, before any was set). */
uint64_t guest_actual(const Guest *g);           /* the guest's size now, virtio-mem included */
uint64_t guest_want(const Guest *g);             /* the core's last target, before arbitration */
bool guest_has_decision(const Guest *g);         /* the core decided at least once */
uint64_t guest_target(const Guest *g);           /* after arbitration: what was last applied */
uint64_t guest_balloon_target(const Guest *g);   /* the last balloon size sent */
const char *guest_vmem_id(const Guest *g);       /* NULL: no virtio-mem */
uint64_t guest_vmem_size(const Guest *g);        /* virtio-mem's plugged size */
uint64_t guest_vmem_requested(const Guest *g);   /* its requested-size last asked for (or found) */
uint64_t guest_host_rss(const Guest *g);         /* UINT64_MAX when unknown */
/* Free page reporting: 1 on, 0 off, -ENODATA while unknown. */
int guest_free_page_reporting(const Guest *g);
/* CLOCK_REALTIME µs of the last decision, 0: none yet. */
uint64_t guest_updated_realtime(const Guest *g);
/* Per second, NaN when unknown. */
double guest_refault_rate(const Guest *g);
double guest_major_fault_rate(const Guest *g);
const GuestCounters *guest_counters(const Guest *g);
/* CLOCK_MONOTONIC µs at which the cycle under way began, 0 when none is: a driver whose replies
 * come back late tells its cycle from a newer one. */
uint64_t guest_cycle_started(const Guest *g);

/* Messages about a guest, with its name and state in the journal fields (GUEST=, STATE=) and
 * the stderr prefix: systemd's log_unit_* (log.h has the forms for a name alone). */
#define log_guest_debug(g, ...) log_named_guest_debug(guest_name(g), guest_state_string(g), __VA_ARGS__)
#define log_guest_info(g, ...) log_named_guest_info(guest_name(g), guest_state_string(g), __VA_ARGS__)
#define log_guest_notice(g, ...) log_named_guest_notice(guest_name(g), guest_state_string(g), __VA_ARGS__)
#define log_guest_warning(g, ...) log_named_guest_warning(guest_name(g), guest_state_string(g), __VA_ARGS__)
#define log_guest_error(g, ...) log_named_guest_error(guest_name(g), guest_state_string(g), __VA_ARGS__)
#define log_guest_debug_errno(g, error, ...) \
        log_named_guest_debug_errno(guest_name(g), guest_state_string(g), error, __VA_ARGS__)
#define log_guest_info_errno(g, error, ...) \
        log_named_guest_info_errno(guest_name(g), guest_state_string(g), error, __VA_ARGS__)
#define log_guest_warning_errno(g, error, ...) \
        log_named_guest_warning_errno(guest_name(g), guest_state_string(g), error, __VA_ARGS__)
#define log_guest_error_errno(g, error, ...) \
        log_named_guest_error_errno(guest_name(g), guest_state_string(g), error, __VA_ARGS__)
