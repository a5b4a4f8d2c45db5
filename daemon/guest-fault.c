/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/guest-fault.h"

typedef struct GuestFaultInfo {
        const char *name;
        const char *prefix;  /* what the shown text begins with, before the detail */
        bool episode;
        const char *state;
} GuestFaultInfo;

static const GuestFaultInfo fault_info[_GUEST_FAULT_MAX] = {
        [GUEST_FAULT_NONE] = { "none", "", false, "faulty" },
        [GUEST_FAULT_CONNECTING] = { "connecting", "", false, "faulty" },
        [GUEST_FAULT_CONNECTION] = { "connection", "", true, "faulty" },
        [GUEST_FAULT_NOT_ANSWERING] = { "not-answering", "", true, "faulty" },
        [GUEST_FAULT_UNTRUSTED_DATA] = { "untrusted-data", "", true, "faulty" },
        [GUEST_FAULT_BALLOON_STALLED] = { "balloon-stalled", "", true, "faulty" },
        [GUEST_FAULT_NO_SIZE] = { "no-size", "", true, "faulty" },
        [GUEST_FAULT_CORE_REFUSED] = { "core-refused", "the decision core refused the guest: ", true,
                                       "faulty" },
        [GUEST_FAULT_SKIPPED] = { "skipped", "skipped: ", false, "skipped" },
};

static const GuestFaultInfo *info_of(GuestFault kind) {
        return (unsigned) kind < ARRAY_SIZE(fault_info) ? &fault_info[kind] : NULL;
}

const char *guest_fault_to_string(GuestFault kind) {
        const GuestFaultInfo *info = info_of(kind);
        return info ? info->name : NULL;
}

int guest_fault_format(GuestFault kind, const char *detail, char *buf, size_t size) {
        const GuestFaultInfo *info = info_of(kind);
        return snprintf(buf, size, "%s%s", info ? info->prefix : "", detail ?: "");
}

bool guest_fault_is_episode(GuestFault kind) {
        const GuestFaultInfo *info = info_of(kind);
        return info && info->episode;
}

const char *guest_fault_state(GuestFault kind) {
        const GuestFaultInfo *info = info_of(kind);
        return info ? info->state : fault_info[GUEST_FAULT_CONNECTION].state;
}

size_t guest_fault_all_states(const char **names, size_t max) {
        size_t n = 0;
        for (size_t i = 0; i < ARRAY_SIZE(fault_info) && n < max; i++) {
                bool seen = false;
                for (size_t k = 0; k < n && !seen; k++)
                        seen = strcmp(names[k], fault_info[i].state) == 0;
                if (!seen)
                        names[n++] = fault_info[i].state;
        }
        return n;
}
