/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One managed guest, as the manager and the bus see it: what it is and has (the views), and
 * what an operator or the manager changes (the setters). What drives it is a transport's driver
 * (daemon/qemu/guest-qmp.c for a plain QEMU guest over its QMP socket,
 * daemon/libvirt/guest-libvirt.c for a libvirt domain), through the other face of the guest,
 * guest-driver.h. */
#pragma once

#include "daemon/boot-history.h"

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

/* The devices a guest is resized with. */
typedef enum GuestActuator {
        GUEST_ACTUATOR_BALLOON,
        GUEST_ACTUATOR_VIRTIO_MEM,
        GUEST_ACTUATOR_DIMM,
        _GUEST_ACTUATOR_MAX,
} GuestActuator;

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
        /* hugepage-repair= (daemon/host/host-hugepages.h): 2 MiB ranges of its RAM put back on a
         * huge page, and the holes those collapses filled (bytes, memory the host spent again) */
        uint64_t hugepages_collapsed, hugepage_holes_filled;
} GuestCounters;

/* The guest goes (its driver's data with it); created by its driver (guest-driver.h). */
Guest *guest_free(Guest *g);
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
/* The most the guest itself can have, whatever its policy's max says: 0 while unknown. */
uint64_t guest_size_max(const Guest *g);
/* The size the guest boots with (its boot memory, else its max), and the next boot's
 * recommendation from its 14-day history (boot-history.h): -ENODATA when no history is kept (no
 * state directory), -ENOMEM. */
uint64_t guest_boot_memory(const Guest *g);
int guest_boot_recommendation(const Guest *g, BootRecommendation *ret);
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
/* Whether the guest agent answered last. */
bool guest_agent_answers(const Guest *g);
/* Why the agent gives nothing; NULL while its reads work. */
const char *guest_agent_problem(const Guest *g);
/* The agent's os id ("mswindows", "debian"...); NULL while none was given. */
const char *guest_os_id(const Guest *g);

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
uint64_t guest_host_swap(const Guest *g);        /* QEMU's pages in host swap; UINT64_MAX when unknown */
uint64_t guest_host_ksm(const Guest *g);         /* QEMU's KSM-merged pages; UINT64_MAX when unknown */
/* A level of the last complete sample, sanitised (a lie beyond the guest's size is unknown):
 * RS_UNKNOWN before the first, or when the guest did not say. */
uint64_t guest_reported_level(const Guest *g, RsLevel level);
/* Free page reporting: 1 on, 0 off, -ENODATA while unknown. */
int guest_free_page_reporting(const Guest *g);
/* CLOCK_REALTIME µs of the last decision, 0: none yet. */
uint64_t guest_updated_realtime(const Guest *g);
/* Per second, NaN when unknown. */
double guest_refault_rate(const Guest *g);
double guest_major_fault_rate(const Guest *g);
const GuestCounters *guest_counters(const Guest *g);

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
