/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What kind of fault a guest shows: data the code decides on, beside the text an operator reads
 * (`rightsizectl list`, the log, the D-Bus Fault property). Code asks a guest for the kind
 * (guest_fault_kind()), never searches the text, so a reworded message changes no decision. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef enum GuestFault {
        GUEST_FAULT_NONE,
        /* Not a fault: what a guest being connected waits for (QEMU not listening yet). */
        GUEST_FAULT_CONNECTING,
        /* The transport's connection is lost, refused or unusable (its text says which). */
        GUEST_FAULT_CONNECTION,
        /* The transport does not answer: a call has been running too long. */
        GUEST_FAULT_NOT_ANSWERING,
        /* Untrusted input noticed in a cycle: stats that lie or never update, an event flood. */
        GUEST_FAULT_UNTRUSTED_DATA,
        /* The balloon stopped short of its target: the guest cannot give more. */
        GUEST_FAULT_BALLOON_STALLED,
        /* Neither the boot memory nor the balloon's size is known. */
        GUEST_FAULT_NO_SIZE,
        /* The decision core would not take the guest. */
        GUEST_FAULT_CORE_REFUSED,
        /* Not managed by design: no balloon device, device passthrough, a migration. Not a
         * fault of the guest's or rightsize's, so no fault episode and its own state. */
        GUEST_FAULT_SKIPPED,
        _GUEST_FAULT_MAX,
} GuestFault;

/* A short name for the kind ("balloon-stalled"): the FAULT event's FAULT_KIND= journal field.
 * NULL for a value out of range. */
const char *guest_fault_to_string(GuestFault kind);

/* The text shown for a fault of this kind with its detail (the kind's prefix, "skipped: ", then
 * the detail), cut to size; what snprintf() returns. */
int guest_fault_format(GuestFault kind, const char *detail, char *buf, size_t size);

/* Whether a fault of this kind begins a fault episode (the faults counter, the FAULT event):
 * not a connecting guest's note, not a skipped guest. */
bool guest_fault_is_episode(GuestFault kind);

/* The state a guest that cannot be managed for this kind of fault is in (the D-Bus API's and the
 * metrics' word): "skipped" for GUEST_FAULT_SKIPPED, "faulty" otherwise. */
const char *guest_fault_state(GuestFault kind);
/* Every state guest_fault_state() can give, each once, into names (at most max); how many. */
size_t guest_fault_all_states(const char **names, size_t max);
