/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy files: ini, read with inih. The only part of policies/ that does I/O.
 *
 *   # /etc/rightsize/policies/web.conf
 *   [policy]
 *   match = web-* 6f1c* ; globs on the guest name or UUID
 *   preset = balanced ; optional, must come first: start from a preset
 *   mode = rightsize ; observe | rightsize | on-host-pressure
 *   poll-interval = 10s
 *   floor = 256M
 *   floor-percent = 10
 *   max = 0 ; 0: the guest's own maximum
 *   margin = 10%
 *   probe-step-min = 1%
 *   probe-step-max = 10%
 *   hold-time = 10min
 *   refault-sensitivity = medium ; low | medium | high
 *   actuator = balloon ; balloon | virtio-mem | both
 *   shares = 1024
 *   change-cap-percent = 10%
 *   change-cap = 1G
 *   dead-band = 8M
 *   allow-dimm = no
 *   guest-agent = yes ; read /proc/vmstat and PSI through the guest agent when there is one
 *   qemu-monitor = no ; libvirt: read unmapped balloon stats through the QEMU monitor (taints)
 *   controller = probe ; probe | cost: the decision core (cost: controller.h), and its tunables:
 *   cost-target = 0.1% ; of wall time stalled on memory at rest
 *   cost-window = 30s
 *   tighten-rate = 5% ; of the size per minute at zero cost
 *   loosen-rate = 0.2% ; of the size per second per target's worth of excess
 *   loosen-rate-max = 1% ; per second at most
 *   fault-latency = 250us ; one fault's cost when the host measured none
 *   verdict-expiry = 1h ; a stream's or a cliff's verdict
 *
 * Comments: lines starting with # or ;, and " ; ..." after a value.
 * An invalid value, an unknown key or section, or a line inih cannot parse is an error
 * that names the file, the line and the key; the policy is then not replaced. */
#pragma once

#include <stddef.h>

#include "policies/policy.h"

typedef struct RsPolicyError {
        char file[256];
        unsigned line;  /* 0 when the error is not tied to a line (e.g. the file is missing) */
        char key[64];
        char message[160];
} RsPolicyError;

/* Formats "FILE:LINE: KEY: MESSAGE" into buf. */
const char *rs_policy_error_format(const RsPolicyError *e, char *buf, size_t size);

/* Parses one file into *ret, starting from the defaults. The name is the file name
 * without directory and ".conf". On error *ret is untouched and *err filled: -EINVAL for
 * bad content, or -errno when the file cannot be read. */
int rs_policy_file_load(const char *path, RsPolicy *ret, RsPolicyError *err);

/* Parses ini text (for tests and for policies that do not come from files). */
int rs_policy_parse_string(const char *text, const char *filename, RsPolicy *ret, RsPolicyError *err);

/* A set of policies loaded from a directory (*.conf, in name order: the first match wins).
 * Reloading keeps the previous version of a policy whose file has become invalid. */
typedef struct RsPolicySet {
        RsPolicy *policies;
        size_t n;
} RsPolicySet;

typedef void (*rs_policy_error_fn)(const RsPolicyError *e, void *userdata);

/* Returns the number of files that failed (each reported through on_error), or -errno if
 * the directory cannot be read (the set is then unchanged). */
int rs_policy_set_load_dir(RsPolicySet *set, const char *dir, rs_policy_error_fn on_error, void *userdata);
const RsPolicy *rs_policy_set_select(const RsPolicySet *set, const char *name, const char *uuid);
void rs_policy_set_clear(RsPolicySet *set);
