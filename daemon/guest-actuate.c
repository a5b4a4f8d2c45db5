/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A guest's actuators: the cycle's target through the actuation plan to the balloon, virtio-mem
 * and DIMMs (through the driver), the balloon watched against what it was sent, and the size
 * left at shutdown. The cycle that decides the target is guest.c's. */
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "common/size.h"
#include "daemon/guest-internal.h"
#include "daemon/log.h"
#include "policies/actuation.h"

/* A balloon that moved less than this over STALL_CYCLES cycles while away from its target has
 * stopped: the guest cannot give more (or take back) right now. */
#define STALL_MOVE_BYTES (2 * MIB)
#define STALL_CYCLES 4
/* A balloon this far below the target it had reached (or 2 % of it) was set from outside. */
#define OUTSIDE_MIN_BYTES (16 * MIB)
#define OUTSIDE_SAMPLES 2
/* A guest still booting has no balloon driver yet: QEMU reports no stats (last-update 0) and
 * the balloon cannot move, which is not the guest refusing to give memory. Until the driver
 * shows (stats, or the balloon moving), for at most this long, a balloon short of its target
 * counts neither as pushback nor as a stall. */
#define BALLOON_DRIVER_GRACE_USEC (60 * USEC_PER_SEC)

/* ---- the balloon watch (BalloonWatch) ---- */

/* A new balloon target, ours sent or theirs taken over: the balloon must reach it again before a
 * drop below it counts as someone else's. */
static void balloon_watch_target(Guest *g, uint64_t bytes) {
        g->balloon_target = bytes;
        g->balloon_watch.reached = false;
        g->balloon_watch.outside_samples = 0;
}

/* The balloon moved toward its target (or had no need to): a stall is counted from here. */
static void balloon_watch_moved(BalloonWatch *w, uint64_t actual) {
        w->stall_count = 0;
        w->prev_actual = actual;
}

/* A call the driver sent (r > 0) joins its actuator's run of outstanding calls; the first one
 * keeps the target from before the run. */
static void actuator_sent(Guest *g, GuestActuator which, int r, uint64_t previous) {
        ActuatorCalls *c = &g->calls[which];
        if (r > 0 && c->outstanding++ == 0)
                c->previous = previous;
}

static int guest_send_balloon(Guest *g, uint64_t bytes) {
        int r;

        /* Never below the floor, whatever asked for it. */
        bytes = MAX(bytes, guest_floor(g));
        /* The balloon's target is the boot memory's share of the size (QMP and libvirt alike:
         * the plan sets virtio-mem before the balloon). */
        uint64_t plugged = g->vmem_id ? g->vmem_requested : 0;
        if (bytes <= plugged) {
                log_guest_debug(g, "virtio-mem alone exceeds the target: balloon left alone");
                return 0;
        }
        uint64_t previous = g->balloon_target;
        r = g->driver->set_balloon(g, bytes - plugged, g->driver_data);
        if (r < 0) {
                g->counters.actuator_failures[GUEST_ACTUATOR_BALLOON]++;
                return r;
        }
        actuator_sent(g, GUEST_ACTUATOR_BALLOON, r, previous);
        balloon_watch_target(g, bytes);
        g->counters.resizes[GUEST_ACTUATOR_BALLOON]++;
        return 0;
}

/* Whether the guest's balloon driver has not shown yet (see BALLOON_DRIVER_GRACE_USEC). */
bool guest_balloon_driver_pending(Guest *g, uint64_t now) {
        if (!g->balloon_driver_seen &&
            (g->stats_last_update != 0 || (g->actual > 0 && g->first_actual > 0 &&
                                           (g->actual + STALL_MOVE_BYTES <= g->first_actual ||
                                            g->actual >= g->first_actual + STALL_MOVE_BYTES))))
                g->balloon_driver_seen = true;
        return !g->balloon_driver_seen && now < g->running_since + BALLOON_DRIVER_GRACE_USEC;
}

void guest_pause_outside(Guest *g, bool raised, bool restored) {
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];

        g->paused = true;
        g->balloon_watch.paused_outside = true;
        g->balloon_watch.raised_outside = raised;
        snprintf(g->reason, sizeof(g->reason),
                 "balloon set from outside: %s, %s the %s rightsize asked for (virsh setmem, another "
                 "controller or an operator?): paused%s; rightsizectl resume takes the guest back",
                 fmt_size(b1, sizeof(b1), g->actual), raised ? "above" : "below",
                 fmt_size(b2, sizeof(b2), g->balloon_target), restored ? " (before the daemon restarted)" : "");
        /* What is set now is theirs: a resume sends ours again. */
        balloon_watch_target(g, g->actual);
        balloon_watch_moved(&g->balloon_watch, g->actual);
        if (restored)
                return; /* logged when it happened */
        LogEvent event = {
                .message_id = LOG_MESSAGE_OUTSIDE,
                .guest_uuid = g->uuid,
                .target_bytes = g->target ?: UINT64_MAX,
                .actual_bytes = g->actual,
                .estimate_bytes = UINT64_MAX,
        };
        log_named_guest_event(LOG_WARNING, g->name, "paused", &event, "%s", g->reason);
        guest_save_later(g);
        guest_notify(g, false);
}

/* What the balloon leaves of the boot memory, for a raise: QEMU's balloon actual; for a libvirt
 * domain its live currentMemory (balloon.current, virtio-mem taken away), which follows every
 * size libvirt sets or sees, where the direct read is only taken while the balloon is away from
 * its target and may be an old one. */
static uint64_t balloon_size_for_raise(const Guest *g) {
        uint64_t plugged = g->vmem_id ? g->vmem_size : 0;
        if (g->source == GUEST_SOURCE_LIBVIRT && g->actual > plugged)
                return g->actual - plugged;
        return g->balloon_actual;
}

bool guest_balloon_raised(const Guest *g) {
        uint64_t plugged = g->vmem_id ? MIN(g->vmem_requested, g->balloon_target) : 0;

        if (!g->balloon_watch.reached || g->balloon_target <= plugged)
                return false;
        uint64_t ours = g->balloon_target - plugged;
        return balloon_size_for_raise(g) > ours + MAX(OUTSIDE_MIN_BYTES, ours / 50);
}

/* A raise waits for the guest's balloon driver to be seen working (stats newer than when the
 * raise was first seen): a guest that reboots is above its target too, its driver gone and its
 * balloon given back until the driver loads and inflates again. Counters that restarted say it
 * was a reboot: the balloon goes back to its target by itself. Returns false when it was one. */
static bool raise_is_outside(Guest *g, bool *ret_wait) {
        BalloonWatch *w = &g->balloon_watch;

        *ret_wait = false;
        /* Deflate-on-oom gives pages back as the guest nears its OOM killer: the core's own
         * emergency, not someone else's size. */
        if (rs_guest_state(g->core) == RS_STATE_EMERGENCY) {
                w->outside_samples = 0;
                return false;
        }
        if (w->outside_samples == 0) {
                w->raise_stats = g->stats_last_update;
                return true;
        }
        if (g->major_backwards_cycles > 0) {
                log_guest_info(g, "Balloon above its target after a guest reboot: not a change from outside");
                w->reached = false;
                w->outside_samples = 0;
                return false;
        }
        *ret_wait = g->stats_last_update != 0 && g->stats_last_update == w->raise_stats;
        return true;
}

/* A balloon that reached its target and then moved away from it, with no new target from us: a
 * balloon never inflates past what it was asked, nor deflates past it but for the guest's OOM
 * killer (deflate-on-oom), so someone else asked (virsh setmem, MoM, Proxmox, an operator on a
 * second QMP socket), down or up. Taking a raise for the guest's own need would move the
 * estimate and probe the guest back down: two controllers fighting every interval is worse than
 * either. The guest is paused, with the reason, until the operator resumes it. Two samples in a
 * row, so that a reading taken as our own command lands cannot count; the first already holds
 * our actuators back (true: do not actuate this cycle), or we would answer the other
 * controller's change before knowing it was one. */
static bool balloon_set_from_outside(Guest *g) {
        BalloonWatch *w = &g->balloon_watch;
        uint64_t plugged = g->vmem_id ? MIN(g->vmem_requested, g->balloon_target) : 0;
        uint64_t ours = g->balloon_target - plugged;
        uint64_t tolerance = MAX(OUTSIDE_MIN_BYTES, ours / 50);

        /* The balloon's size as the raise is judged (for a libvirt domain its live
         * currentMemory: the direct read is taken only while the balloon is away from its target
         * and can be an old one, so a balloon that had reached ours never looked so). */
        uint64_t now_size = balloon_size_for_raise(g);
        if (g->balloon_target == 0 || now_size == 0 || g->balloon_target <= plugged) {
                w->outside_samples = 0;
                return false;
        }
        if (now_size + 4 * MIB >= ours && now_size <= ours + 4 * MIB)
                w->reached = true;
        bool below = now_size + tolerance < ours, above = guest_balloon_raised(g);
        if (!w->reached || (!below && !above)) {
                w->outside_samples = 0;
                return false;
        }
        if (above) {
                bool wait;
                if (!raise_is_outside(g, &wait))
                        return false;
                if (wait)
                        return true;
        }
        if (++w->outside_samples < OUTSIDE_SAMPLES)
                return true;
        guest_pause_outside(g, above, false);
        return true;
}

/* A balloon away from its target that no longer moves: the guest cannot give (or take) more.
 * Returns true when the guest is (still) stalled. */
static bool balloon_stalled(Guest *g, uint64_t now) {
        BalloonWatch *w = &g->balloon_watch;
        uint64_t tolerance = MAX(4 * MIB, g->balloon_target / 200);
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];

        if (w->stalled) {
                /* Pushing resumes when the core asks for no less than where it stuck, or when
                 * the hold time has passed (the guest may have freed memory since). */
                if (g->want >= w->stall_size || now >= w->stall_until) {
                        /* The fault stays on show until the balloon moves away from where it stuck:
                         * a balloon that never moves stays reported. */
                        w->stalled = false;
                        w->stall_count = 0;
                        log_guest_info(g, "Balloon no longer held back");
                        return false;
                }
                return true;
        }
        if (w->stall_size > 0 && g->actual > 0 &&
            (g->actual + 2 * STALL_MOVE_BYTES <= w->stall_size || g->actual >= w->stall_size + 2 * STALL_MOVE_BYTES)) {
                if (g->fault_kind == GUEST_FAULT_BALLOON_STALLED)
                        guest_clear_fault(g);
                w->stall_size = 0;
        }

        if (g->balloon_target == 0 || g->actual == 0 ||
            (g->actual <= g->balloon_target + tolerance && g->actual + tolerance >= g->balloon_target)) {
                balloon_watch_moved(w, g->actual);
                return false;
        }
        bool toward = g->actual > g->balloon_target ? w->prev_actual >= g->actual + STALL_MOVE_BYTES
                                                     : g->actual >= w->prev_actual + STALL_MOVE_BYTES;
        if (toward || w->prev_actual == 0) {
                balloon_watch_moved(w, g->actual);
                return false;
        }
        if (++w->stall_count < STALL_CYCLES)
                return false;

        w->stalled = true;
        w->stall_size = g->actual;
        w->stall_until = now + g->policy.hold_usec;
        snprintf(g->reason, sizeof(g->reason),
                 "balloon stopped at %s short of its target %s: the guest cannot give more; stopped pushing",
                 fmt_size(b1, sizeof(b1), g->actual), fmt_size(b2, sizeof(b2), g->balloon_target));
        guest_set_fault(g, GUEST_FAULT_BALLOON_STALLED, "%s", g->reason); /* logs it: a new fault */
        /* Stop pushing: ask for what the guest has, never for more than max. */
        uint64_t stop_at = rs_actuation_stall_target(g->actual, g->balloon_target, guest_max(g));
        if (stop_at > 0)
                (void) guest_send_balloon(g, stop_at);
        return true;
}

/* The watch, each cycle before the actuators: false when they must not run this cycle (a change
 * from outside, being confirmed or just found); a stalled balloon keeps *target from going below
 * where it stopped. Nothing is judged before the balloon driver shows. */
static bool guest_watch_balloon(Guest *g, uint64_t now, uint64_t *target) {
        if (guest_balloon_driver_pending(g, now))
                return true;
        if (balloon_set_from_outside(g))
                return false;
        if (balloon_stalled(g, now))
                *target = MAX(*target, g->balloon_watch.stall_size);
        return true;
}

/* Counted when sent; a refused DIMM is not retried (slot size or maxmem do not fit). */
static void guest_dimm_refused(Guest *g, int error, const char *why) {
        log_guest_warning_errno(g, error, "DIMM hotplug failed: %s; no more DIMMs", why ?: strerror(-error));
        g->dimm_count = g->dimm_count > 0 ? g->dimm_count - 1 : 0;
        g->dimm_bytes = g->dimm_bytes >= g->dimm_sent_bytes ? g->dimm_bytes - g->dimm_sent_bytes : 0;
        g->dimm_slot_bytes = 0;
}

void guest_actuator_done(Guest *g, GuestActuator which, GuestCallOutcome outcome, int error, const char *why) {
        char b[FORMAT_SIZE_MAX];

        if ((unsigned) which >= _GUEST_ACTUATOR_MAX)
                return;
        ActuatorCalls *c = &g->calls[which];
        /* Sent before the guest was attached anew: what its devices have was read since. */
        if (c->outstanding == 0)
                return;
        c->outstanding--;
        if (outcome == GUEST_CALL_DONE)
                return;
        g->counters.actuator_failures[which]++;
        if (which == GUEST_ACTUATOR_DIMM) {
                /* A DIMM that may not be there is not counted: the next one would not fit. */
                guest_dimm_refused(g, error, why);
                return;
        }
        /* The run's last outcome decides: a later call's target replaces this one's. */
        if (outcome != GUEST_CALL_REFUSED || c->outstanding > 0)
                return;
        if (which == GUEST_ACTUATOR_BALLOON)
                g->balloon_target = c->previous;
        else {
                g->vmem_requested = c->previous;
                g->balloon_watch.reached = false; /* the balloon's own target moved with it */
        }
        log_guest_debug(g, "%s call refused (%s): its target is back to %s",
                        which == GUEST_ACTUATOR_BALLOON ? "balloon" : "virtio-mem", why ?: strerror(-error),
                        fmt_size(b, sizeof(b), c->previous ?: RS_UNKNOWN));
}

/* DIMMs are only ever added: unplugging needs the guest's cooperation and often fails (the
 * memory holds unmovable pages); the balloon gives back what is not needed. */
static void guest_add_dimm(Guest *g, uint64_t bytes) {
        if (g->dimm_slot_bytes == 0 || bytes == 0 || bytes > g->dimm_slot_bytes || g->dimm_count >= g->mem_slots)
                return;
        /* The driver names the device (and says so in the log); a refusal that comes later is
         * guest_actuator_done()'s. */
        g->dimm_count++;
        g->dimm_bytes += bytes;
        g->dimm_sent_bytes = bytes;
        /* The DIMM lands in the balloon's actual above its target: ours, not a raise from outside. */
        g->balloon_watch.reached = false;
        int r = g->driver->add_dimm(g, bytes, g->driver_data);
        if (r < 0) {
                g->counters.actuator_failures[GUEST_ACTUATOR_DIMM]++;
                guest_dimm_refused(g, r, NULL);
        } else {
                actuator_sent(g, GUEST_ACTUATOR_DIMM, r, 0);
                g->counters.resizes[GUEST_ACTUATOR_DIMM]++;
        }
}

void guest_actuate(Guest *g, uint64_t target, bool urgent, bool fine, uint64_t now) {
        RsActuationPlan plan;
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];
        const RsEstimate *e = rs_guest_estimate(g->core);
        int r;

        if (g->paused || g->policy.mode == RS_MODE_OBSERVE || g->actual == 0)
                return;
        /* Arbitration gave less than the core wished for: the host needs the rest, and no device
         * may hold it (a probe below the estimate is not a cut: virtio-mem keeps its margin). */
        uint64_t host_limit = target < g->want ? target : RS_UNKNOWN;
        if (!guest_watch_balloon(g, now, &target))
                return;
        /* A stalled balloon keeps the guest where it stopped: no device can take that back. */
        if (rs_known(host_limit))
                host_limit = MAX(host_limit, target);

        RsActuationInput in = {
                .current = g->actual,
                .target = target,
                .urgent = urgent,
                .fine = fine,
                .estimate = e->estimate,
                .floor = guest_floor(g),
                .max = guest_max(g),
                .host_limit = host_limit,
                .margin_percent = g->policy.margin_percent,
                .boot_bytes = g->base_memory ?: g->actual,
                .vmem_plugged = g->vmem_id ? g->vmem_size : 0,
                .vmem_max = g->vmem_id && g->policy.actuator != RS_ACTUATOR_BALLOON ? g->vmem_max : 0,
                .vmem_block = g->vmem_id && g->policy.actuator != RS_ACTUATOR_BALLOON ? g->vmem_block : 0,
        };
        if (guest_dimm_capable(g)) {
                in.dimm_bytes = g->dimm_bytes;
                if (g->policy.allow_dimm && g->dimm_slot_bytes > 0 && g->mem_slots > g->dimm_count) {
                        in.dimm_slot_bytes = g->dimm_slot_bytes;
                        in.dimm_slots_free = g->mem_slots - g->dimm_count;
                }
        }
        r = rs_actuation_plan(&g->policy, &in, &plan);
        if (r < 0) {
                log_guest_warning_errno(g, r, "No actuation plan: %m");
                return;
        }
        if (plan.skip)
                return;

        if (plan.dimms_to_add > 0 && guest_dimm_capable(g)) {
                for (unsigned i = 0; i < plan.dimms_to_add; i++)
                        guest_add_dimm(g, plan.dimm_bytes);
                /* The balloon trims next interval, once the DIMMs are in query-balloon's actual:
                 * a target past the current size would only be clamped by QEMU. */
                plan.set_balloon = false;
        }
        if (plan.set_vmem && g->vmem_id) {
                uint64_t requested = plan.vmem_requested, previous = g->vmem_requested;
                r = g->driver->set_virtio_mem(g, plan.vmem_requested, &requested, g->driver_data);
                if (r < 0) {
                        g->counters.actuator_failures[GUEST_ACTUATOR_VIRTIO_MEM]++;
                        log_guest_warning_errno(g, r, "virtio-mem resize: %m");
                } else {
                        actuator_sent(g, GUEST_ACTUATOR_VIRTIO_MEM, r, previous);
                        g->vmem_requested = requested;
                        g->balloon_watch.reached = false; /* the balloon's own target moved with it */
                        g->counters.resizes[GUEST_ACTUATOR_VIRTIO_MEM]++;
                }
        }
        if (plan.set_balloon && plan.balloon_target != g->balloon_target) {
                r = guest_send_balloon(g, plan.balloon_target);
                if (r < 0)
                        log_guest_warning_errno(g, r, "balloon: %m");
                else
                        log_guest_debug(g, "balloon %s → %s%s",
                                        fmt_size(b1, sizeof(b1), g->actual),
                                        fmt_size(b2, sizeof(b2), plan.balloon_target), plan.capped ? " (capped)" : "");
        }
}

/* ---- giving back ---- */

bool guest_probe_under_way(const Guest *g) {
        if (!g->core || g->phase != GUEST_PHASE_RUNNING || g->paused)
                return false;
        RsState s = rs_guest_state(g->core);
        return s == RS_STATE_PROBE || s == RS_STATE_BACKOFF || s == RS_STATE_GROW || s == RS_STATE_EMERGENCY;
}

void guest_give_back(Guest *g, const char *why) {
        char b1[FORMAT_SIZE_MAX], b2[FORMAT_SIZE_MAX];

        if (!g->core || g->actual == 0 || g->held_size == 0 || g->phase != GUEST_PHASE_RUNNING)
                return;
        uint64_t size = MIN(MAX(g->held_size, guest_floor(g)), guest_max(g));
        if (g->actual >= size && g->balloon_target >= size)
                return;
        size = MAX(size, g->actual);
        if (guest_send_balloon(g, size) < 0)
                return;
        g->target = size;
        log_guest_info(g, "%s in the middle of a probe: giving the guest back %s (it has %s)", why,
                       fmt_size(b1, sizeof(b1), size), fmt_size(b2, sizeof(b2), g->actual));
}

void guest_adopt(Guest *g) {
        uint64_t size = g->adopt_size;

        g->adopt_size = 0;
        /* A balloon another controller set stays theirs. */
        if (size == 0 || g->actual == 0 || g->actual >= size || g->balloon_watch.paused_outside)
                return;
        if (guest_send_balloon(g, size) == 0)
                g->target = size;
}

/* ---- shutdown ---- */

int guest_shutdown(Guest *g, ShutdownAction action, void (*done)(Guest *g, void *userdata), void *userdata) {
        const RsEstimate *e = guest_estimate(g);
        char b[FORMAT_SIZE_MAX];
        uint64_t size;
        int r;

        /* A paused guest is where its operator, or another controller that set its balloon,
         * wants it: nothing moves it, the daemon's stop included (README, "What a stop, a
         * crash or an operator leaves a guest with"). */
        if (action == SHUTDOWN_ACTION_KEEP || !g->core || g->policy.mode == RS_MODE_OBSERVE || guest_is_paused(g) ||
            g->phase != GUEST_PHASE_RUNNING || (g->driver->connected && !g->driver->connected(g, g->driver_data)))
                return 0;
        if (action == SHUTDOWN_ACTION_ESTIMATE && e->estimate != RS_UNKNOWN)
                size = e->estimate + (uint64_t) ((double) e->estimate * g->policy.margin_percent / 100.0);
        else if (action == SHUTDOWN_ACTION_ESTIMATE && g->takeover_size > 0)
                /* Nothing learned yet: the size the guest had before rightsize, not max (a stop
                 * comes with every package upgrade, and must not grow guests). */
                size = g->takeover_size;
        else
                size = guest_max(g);
        size = CLAMP(size, guest_floor(g), guest_max(g));
        /* Only ever grow at shutdown: nobody is left to watch a guest being squeezed. */
        if (g->actual >= size && g->balloon_target >= size)
                return 0;
        size = MAX(size, MIN(g->actual, guest_max(g)));
        /* As in guest_send_balloon(): the balloon covers the boot memory only. */
        uint64_t plugged = g->vmem_id ? g->vmem_requested : 0;
        if (size <= plugged)
                return 0;

        if (g->driver->shutdown_balloon) {
                r = g->driver->shutdown_balloon(g, size - plugged, done, userdata, g->driver_data);
                if (r < 0)
                        return r;
                log_guest_info(g, "Leaving the guest at %s (shutdown-action=%s)", format_size(b, sizeof(b), size),
                               shutdown_action_to_string(action));
                return r;
        }
        /* Synchronous: done when it returns. */
        r = g->driver->set_balloon(g, size - plugged, g->driver_data);
        if (r < 0)
                return log_named_guest_warning_errno(g->name, NULL, r, "Leaving the guest at its size failed: %m");
        log_guest_info(g, "Left the guest at %s (shutdown-action=%s)", format_size(b, sizeof(b), size),
                       shutdown_action_to_string(action));
        return 0;
}
