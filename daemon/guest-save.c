/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A guest's state file, written: the record (the decision core's snapshot beside the daemon's own
 * fields) and when it is written. Each write is two fsyncs on the event loop, and what asks for one
 * (a state or estimate change each cycle of a flapping guest, a burst of SetGuest calls from a
 * script) can come as fast as a guest or a caller likes: so a change asks for a save, and the saves
 * of one guest are coalesced, at most one per STATE_SAVE_COALESCE_USEC. The first change after a
 * quiet spell is written at the loop's next turn; a pending save is written before the guest goes
 * (guest_free(), the manager's removal and its stop write at once). A crash loses at most the
 * window's changes, which the restore path tolerates: it holds or backs off from an estimate. */
#include "daemon/guest-internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "daemon/log.h"
#include "daemon/state-file.h"

/* Saves of one guest are at least this far apart. */
#define STATE_SAVE_COALESCE_USEC (5 * USEC_PER_SEC)
/* A save that failed (a full disk) is tried again this much later, with whatever changed since:
 * every guest's retries and their warnings would otherwise come every window. */
#define STATE_SAVE_RETRY_USEC (30 * USEC_PER_SEC)

static int64_t u64_to_field(uint64_t v) {
        return v == RS_UNKNOWN ? -1 : (int64_t) MIN(v, (uint64_t) INT64_MAX);
}

static int64_t u64_to_int64(uint64_t v) {
        return (int64_t) MIN(v, (uint64_t) INT64_MAX);
}

static int on_save_timer(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        Guest *g = userdata;

        if (g->save_pending)
                (void) guest_save_state(g);
        return 0;
}

static int save_timer_arm(Guest *g, uint64_t due) {
        int r;

        if (!g->save_timer)
                return sd_event_add_time(g->event, &g->save_timer, CLOCK_MONOTONIC, due, 0, on_save_timer, g);
        r = sd_event_source_set_time(g->save_timer, due);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(g->save_timer, SD_EVENT_ONESHOT);
}

int guest_save_state(Guest *g) {
        GuestStateRecord rec;
        RsGuestSnapshot s;
        int r;

        if (!g->state_dir || !g->core)
                return 0;
        rs_guest_snapshot(g->core, &s);
        /* The UUID (libvirt's) finds the file again after a rename (state_file_load_guest()). */
        r = guest_state_init(&rec, g->name, g->uuid);
        if (r == -EINVAL && g->uuid)
                r = guest_state_init(&rec, g->name, NULL);
        if (r < 0)
                return r;
        snprintf(rec.state, sizeof(rec.state), "%s", rs_state_to_string(rs_guest_state(g->core)));
        rec.saved_at_usec = now_usec(CLOCK_REALTIME);
        rec.target_bytes = g->target;
        (void) guest_state_set_int(&rec, "magic", s.magic);
        (void) guest_state_set_int(&rec, "version", s.version);
        (void) guest_state_set_int(&rec, "guest_max", u64_to_field(s.guest_max));
        (void) guest_state_set_int(&rec, "estimate", u64_to_field(s.estimate));
        (void) guest_state_set_int(&rec, "lower", u64_to_field(s.lower));
        (void) guest_state_set_int(&rec, "upper", u64_to_field(s.upper));
        (void) guest_state_set_int(&rec, "scan_onset", u64_to_field(s.scan_onset));
        (void) guest_state_set_int(&rec, "target", u64_to_field(s.target));
        (void) guest_state_set_double(&rec, "baseline_useful", isfinite(s.baseline_useful) ? s.baseline_useful : 0);
        (void) guest_state_set_double(&rec, "baseline_scan", isfinite(s.baseline_scan) ? s.baseline_scan : 0);
        (void) guest_state_set_double(&rec, "baseline_psi", isfinite(s.baseline_psi) ? s.baseline_psi : 0);
        (void) guest_state_set_int(&rec, "baseline_known", s.baseline_known);
        (void) guest_state_set_int(&rec, "tier", s.tier);
        (void) guest_state_set_int(&rec, "streaming", s.streaming);
        (void) guest_state_set_int(&rec, "hold_doublings", s.hold_doublings);
        (void) guest_state_set_int(&rec, "last_within", u64_to_field(s.last_within));
        /* The daemon's own, beside the core's snapshot: used even when the snapshot cannot be. */
        (void) guest_state_set_int(&rec, "takeover_bytes", u64_to_int64(g->takeover_size));
        (void) guest_state_set_int(&rec, "balloon_sent_bytes", u64_to_int64(g->balloon_target));
        (void) guest_state_set_int(&rec, "paused", g->paused && !g->balloon_watch.paused_outside);
        (void) guest_state_set_int(&rec, "paused_outside",
                                   !g->balloon_watch.paused_outside ? 0 : g->balloon_watch.raised_outside ? 2 : 1);
        (void) guest_state_set_int(&rec, "override_floor", u64_to_int64(g->override_floor));
        (void) guest_state_set_int(&rec, "override_max", u64_to_int64(g->override_max));

        /* Written now or not, the next save is a window away; a failed one is kept pending and
         * tried again later, not at every change. */
        r = state_file_save(g->state_dir, &rec);
        g->save_attempt_usec = now_usec(CLOCK_MONOTONIC);
        if (r < 0) {
                g->save_pending = true;
                (void) save_timer_arm(g, g->save_attempt_usec + STATE_SAVE_RETRY_USEC);
                return log_named_guest_warning_errno(g->name, NULL, r, "Failed to save the state file in %s: %m",
                                                     g->state_dir);
        }
        g->save_pending = false;
        if (g->save_timer)
                (void) sd_event_source_set_enabled(g->save_timer, SD_EVENT_OFF);
        g->saved_usec = g->save_attempt_usec;
        g->saved_state = rs_guest_state(g->core);
        g->saved_estimate = rs_guest_estimate(g->core)->estimate;
        return 0;
}

void guest_save_later(Guest *g) {
        if (!g->state_dir || !g->core)
                return;
        /* Already due: the armed timer writes this change too. */
        if (g->save_pending && g->save_timer && sd_event_source_get_enabled(g->save_timer, NULL) > 0)
                return;
        g->save_pending = true;
        /* The first change after a quiet spell is written at the loop's next turn. */
        uint64_t now = now_usec(CLOCK_MONOTONIC),
                 due = g->save_attempt_usec > 0 ? MAX(now, g->save_attempt_usec + STATE_SAVE_COALESCE_USEC) : now;
        int r = save_timer_arm(g, due);
        if (r < 0) {
                /* No timer: written now rather than lost. */
                log_named_guest_warning_errno(g->name, NULL, r, "Failed to arm the state save timer, saving now: %m");
                (void) guest_save_state(g);
        }
}

void guest_save_release(Guest *g) {
        if (g->save_pending)
                (void) guest_save_state(g);
        g->save_timer = sd_event_source_disable_unref(g->save_timer);
}
