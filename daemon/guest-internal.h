/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The guest's insides, for the files that make it: guest.c (life cycle, the cycle, the state
 * file, the views guest.h hands out), guest-actuate.c (the balloon watch and the actuators),
 * guest-save.c (coalesced saves) and guest-agent-os.c (what the agent runs on). Nothing else includes this but the white-box test of the
 * actuators: the manager and the bus go through guest.h and the drivers through guest-driver.h,
 * so a field can change without them. */
#pragma once

#include <string.h>

#include "common/size.h"
#include "daemon/boot-history.h"
#include "daemon/guest-driver.h"

/* The balloon against the target last sent to it (Guest.balloon_target), watched each cycle before
 * the actuators run (guest-actuate.c): one that stays short of its target has stalled (the guest cannot
 * give more: pushing stops for a while, and the fault says so); one that came to its target and
 * then went below it was set from outside (another controller: the guest is paused). */
typedef struct BalloonWatch {
        bool reached;             /* it came to balloon_target since that was sent */
        unsigned outside_samples; /* samples in a row away from the target it had reached */
        uint64_t raise_stats;     /* the stats' last-update when a raise was first seen */
        bool paused_outside;      /* the guest is paused for that (the reason says) */
        bool raised_outside;      /* ... and it was set above its target, not below */
        uint64_t prev_actual;     /* where it was when it last moved toward its target (0: not yet) */
        unsigned stall_count;     /* cycles since then, away from its target */
        bool stalled;             /* pushing is held back */
        uint64_t stall_size;      /* where it stopped; 0 once it moved away (the fault goes then) */
        uint64_t stall_until;     /* pushing resumes by then at the latest */
} BalloonWatch;

/* An actuator's calls sent whose outcome the driver has yet to report (guest_actuator_done()):
 * the run of them began at `previous`, the target a refusal puts back. */
typedef struct ActuatorCalls {
        unsigned outstanding;
        uint64_t previous;
} ActuatorCalls;

struct Guest {
        char *name;
        GuestSource source;
        char *uuid;            /* NULL when unknown (QMP guests) */
        char *origin;          /* where its source finds it (guest_origin()) */
        char *state_dir;       /* NULL: no state file */
        uint64_t state_stale_usec; /* a state file older than this is not trusted for sizes (0: never) */
        sd_event *event;
        const GuestHooks *hooks;
        void *userdata;

        RsPolicy base_policy;  /* as selected from the policy directory */
        RsPolicy policy;       /* with the operator's overrides applied */
        uint64_t override_floor, override_max; /* 0: none */

        GuestPhase phase;
        char fault[256];       /* "" when healthy */
        GuestFault fault_kind; /* what fault[] is, GUEST_FAULT_NONE when "" */
        char reason[RS_REASON_MAX + 2 + GUEST_AGENT_PROBLEM_MAX]; /* the core's, "; " and the agent's */
        bool paused;

        unsigned cycle_pending;
        uint64_t cycle_started;

        char agent_problem[GUEST_AGENT_PROBLEM_MAX]; /* why the agent gives nothing (shown in the reason), "" if fine */
        QgaOsInfo agent_os;    /* what the agent runs on (guest-agent-os.c); family unknown until it says */

        /* Its driver, and the driver's data. */
        const GuestDriver *driver;
        void *driver_data;
        bool agent_ok;         /* the agent answered last */

        /* What the guest has. */
        uint64_t base_memory;  /* boot memory (query-memory-size-summary) */
        char *vmem_id;         /* the first virtio-mem device, NULL if none */
        uint64_t vmem_size, vmem_max, vmem_block;
        uint64_t vmem_requested; /* the requested-size last asked for (or found) */
        uint64_t balloon_actual; /* QMP guests: query-balloon's actual, which leaves virtio-mem out */
        bool fpr_known, free_page_reporting;
        bool deflate_on_oom_known, deflate_on_oom;
        bool deflate_warned;   /* the warning that a probe runs without deflate-on-oom was given */
        uint64_t host_rss;     /* UINT64_MAX when unknown */
        uint64_t host_swap, host_ksm; /* QEMU's pages in host swap and KSM-merged, bytes; UINT64_MAX: unknown */
        /* The last cycle's sample once sanitised (g->sample is rebuilt during a cycle): what the
         * guest last said, for the API's report of where its memory is. */
        RsSample reported;
        uint64_t guest_max;

        /* DIMM hotplug (policy allow-dimm): -m's maxmem and slots (QMP guests: qom-get
         * /machine memory; libvirt: <maxMemory slots>), what memory devices take of them,
         * and the DIMM size to add. */
        uint64_t mem_max_size;   /* 0: unknown or no hotplug */
        unsigned mem_slots;
        uint64_t devices_bytes;  /* all memory devices, virtio-mem at its maximum */
        uint64_t dimm_bytes;     /* DIMMs plugged (ours or not) */
        unsigned dimm_count;     /* DIMM and NVDIMM devices: each holds a slot */
        uint64_t dimm_slot_bytes; /* largest DIMM maxmem has room for per free slot; 0: no DIMM hotplug */
        uint64_t dimm_sent_bytes; /* the size of the last DIMM sent: what a refusal takes back */
        ActuatorCalls calls[_GUEST_ACTUATOR_MAX];

        /* The decision core. */
        RsGuest *core;
        RsDecision decision;
        bool have_decision;
        uint64_t want;         /* the estimator's target */
        uint64_t target;       /* after arbitration: what was last applied (0: nothing yet) */
        uint64_t balloon_target; /* last "balloon" sent, 0: never */
        BalloonWatch balloon_watch;
        uint64_t actual;       /* query-balloon, 0 until known */
        /* The size the guest had when rightsize first took it over (kept in the state file, so a
         * restart keeps the first one, not a squeezed size): where a stop leaves a guest that has
         * no estimate yet, and where a guest whose state file is unusable goes back to. 0: unknown. */
        uint64_t takeover_size;
        /* The size the guest was held at (in LEARN or HOLD) before the probe under way began:
         * what a pause or observe mode gives back. 0: none yet. */
        uint64_t held_size;
        /* Where the guest goes once attached, before the core learns it (a state file it could
         * not resume from); 0: nowhere. */
        uint64_t adopt_size;
        uint64_t updated_realtime;

        /* The balloon driver: not seen until the guest reports stats or its balloon moves
         * (a booting guest has none yet). */
        uint64_t running_since;  /* CLOCK_MONOTONIC when managing began */
        uint64_t first_actual;
        bool balloon_driver_seen;

        /* This cycle's readings. */
        RsSample sample;
        bool cycle_failed;
        char cycle_error[160];

        /* Untrusted input noticed in a cycle (stats that lie or never update, an event flood,
         * commands failing): shown as the fault until a few clean cycles have passed. */
        char data_problem[192];   /* this cycle's, "" when none */
        unsigned data_clean_cycles;
        uint64_t stats_last_update;
        unsigned stats_stale_cycles, major_backwards_cycles;

        /* Rates for the API and metrics (NaN when unknown). */
        uint64_t prev_major, prev_major_usec;
        double major_fault_rate, refault_rate;

        GuestCounters counters;
        bool fault_counted;        /* fault[] is counted in counters.faults (not a connecting guest's note) */

        /* What EstimateChanged last reported, and when the state file was last written. */
        EstimateSignal signalled;
        uint64_t saved_usec;
        RsState saved_state;
        uint64_t saved_estimate;
        /* guest-save.c's coalescing: a change waits for the timer; the last write tried. */
        bool save_pending;
        sd_event_source *save_timer;
        uint64_t save_attempt_usec;

        GuestHistoryPoint history[GUEST_HISTORY_MAX];
        size_t history_head, history_n;

        /* The next-boot history (guest-boot-history.c): 14 days, a point per 10 minutes, and
         * the 10 minutes being summed up. NULL without a state directory. */
        BootHistory *boot_history;
        uint64_t boot_bucket_start;     /* CLOCK_REALTIME µs; 0: none open */
        uint64_t boot_bucket_estimate;  /* largest estimate of the bucket, or RS_UNKNOWN */
        double boot_bucket_stall_sum;
        unsigned boot_bucket_stall_n;
        /* The recommendation, reckoned when a point comes (a sort of up to 2016 values, about
         * 0.25 ms: not for every metrics write and GetRecommendation), and for which cap. */
        BootRecommendation boot_rec;
        uint64_t boot_rec_cap;          /* 0: not reckoned yet */
};

/* guest-boot-history.c: loaded with the state file, a sample per cycle, freed with the guest. */
void guest_boot_history_load(Guest *g);
void guest_boot_history_sample(Guest *g);
void guest_boot_history_release(Guest *g);

/* A size for a message: "?" while unknown. */
static inline char *fmt_size(char *buf, size_t len, uint64_t bytes) {
        if (bytes == RS_UNKNOWN)
                return strncpy(buf, "?", len);
        return format_size(buf, len, bytes);
}

/* Whether this guest can have DIMMs at all: when its driver can add them. */
static inline bool guest_dimm_capable(const Guest *g) {
        return g->driver->add_dimm && g->base_memory > 0;
}

/* guest.c: the hooks' updated(), and a fault on show (a new one starts an episode, counted). */
void guest_notify(Guest *g, bool estimate_changed);
void guest_set_fault(Guest *g, GuestFault kind, const char *fmt, ...) _printf_(3, 4);
/* No fault on show any more. */
void guest_clear_fault(Guest *g);

/* guest-save.c: the state file is to be written (a change worth keeping): at the loop's next
 * turn, or with the other changes of the same window when one was written within it. */
void guest_save_later(Guest *g);
/* A pending save written now, the timer gone (the guest is being freed). */
void guest_save_release(Guest *g);

/* guest-actuate.c: whether the balloon driver has not shown yet (a booting guest: its balloon
 * counts neither as pushback nor as a stall), and the cycle's target to the devices. */
bool guest_balloon_driver_pending(Guest *g, uint64_t now);
/* The guest is paused because its balloon was set from outside (raised: above rightsize's
 * target); restored: as the state file says, after a restart (reason set, nothing logged). */
void guest_pause_outside(Guest *g, bool raised, bool restored);
/* The balloon is above the target it had reached: raised from outside (being confirmed, or
 * confirmed), or a guest rebooting. Either way not the guest pushing back. */
bool guest_balloon_raised(const Guest *g);
/* The guest is in a probe, or on its way back from one (PROBE, BACKOFF, GROW, EMERGENCY). */
bool guest_probe_under_way(const Guest *g);
/* Pause or observe mode begins in a probe (guest_probe_under_way(); why: "Paused", "Observe mode
 * begins"): a guest that a probe left below
 * the size it was held at gets that size back (or keeps what it has, when more), since nothing
 * will move it afterwards: not an OOM storm, not the daemon's stop. */
void guest_give_back(Guest *g, const char *why);
/* Sends the guest to adopt_size when it has less (once, as it is taken over). */
void guest_adopt(Guest *g);
void guest_actuate(Guest *g, uint64_t target, bool urgent, bool fine, uint64_t now);
