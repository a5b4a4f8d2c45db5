/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the guest agent runs on, and what that leaves the daemon to see (guest.h).
 *
 * A Windows guest has the balloon, and an agent that has no /proc: virtio-win's balloon driver
 * reports tags 0-9 (kvm-guest-drivers-windows Balloon/sys/memstat.c), so the guest is judged on
 * balloon stats alone, the balloon tier, with its larger margin (policies/estimator.c,
 * tier_factor). Reading /proc/vmstat through its agent every interval would only fail every
 * interval, so the driver asks guest-get-osinfo first and skips the reads; the reason says what
 * is not seen, once, without a warning: nothing is wrong with the guest. */
#include <string.h>

#include "common/utf8.h"
#include "daemon/guest-internal.h"

#define WINDOWS_NOTE "Windows guest: no /proc, so no vmstat or PSI; balloon stats only"

void guest_set_agent_os(Guest *g, const QgaOsInfo *os) {
        if (!os)
                return; /* no answer: what was known stays, and an unknown guest's reads are tried */
        bool changed = os->family != g->agent_os.family || strcmp(os->id, g->agent_os.id) != 0;
        bool was_windows = g->agent_os.family == QGA_OS_WINDOWS;
        g->agent_os = *os;

        if (os->family == QGA_OS_WINDOWS) {
                /* Set again after each connection: a guest-agent = no in between cleared it. */
                (void) utf8_snprintf(g->agent_problem, sizeof(g->agent_problem), "%s", WINDOWS_NOTE);
                if (changed)
                        log_guest_info(g, "Windows guest (%s%s%s): its agent has no /proc, so no vmstat or PSI is "
                                       "read; sized on balloon stats only, with the balloon tier's margin",
                                       os->pretty_name[0] ? os->pretty_name : "no name given",
                                       os->kernel_release[0] ? ", build " : "", os->kernel_release);
                return;
        }
        if (was_windows && strcmp(g->agent_problem, WINDOWS_NOTE) == 0)
                g->agent_problem[0] = '\0'; /* the guest booted another system: its reads tell */
        if (changed)
                log_guest_info(g, "Guest agent runs on %s", os->pretty_name[0] ? os->pretty_name
                                                            : os->id[0]          ? os->id
                                                                                 : "a system that gives no name");
}

bool guest_agent_reads_procfs(const Guest *g) {
        return qga_os_has_procfs(g->agent_os.family);
}

const char *guest_os_id(const Guest *g) {
        return g->agent_os.id[0] ? g->agent_os.id : NULL;
}
