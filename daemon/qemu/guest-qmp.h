/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A plain QEMU guest over its QMP socket (and the optional guest agent socket): the QMP driver
 * of guest.h.
 *
 * - Connects to the socket (learning QEMU's pid for its host RSS), reads what the guest has
 *   (boot memory, balloon, virtio-mem, maxmem and slots, free page reporting) and attaches the
 *   guest; a connection that dies makes the guest faulty with the reason, and is reconnected
 *   with backoff (1 s doubling to 30 s).
 * - A timer at the policy's poll interval runs each cycle: balloon stats, query-balloon,
 *   virtio-mem's size, the host's block stats, and /proc/vmstat and PSI through the agent.
 *   Every call has a timeout; a cycle still running when the timer fires skips that tick.
 * - Actuators: balloon, virtio-mem's requested-size (qom-set), DIMM hotplug (device_add). */
#pragma once

#include "daemon/guest-driver.h"
#include "daemon/qemu/socket-trust.h"

/* trust says whose QEMU may listen on qmp_path (NULL: root's only); it must outlive the guest. */
int guest_qmp_new(sd_event *event, const char *name, const char *qmp_path, const char *agent_path,
                  const SocketTrust *trust, const char *state_dir, const RsPolicy *policy, const GuestHooks *hooks,
                  void *userdata, Guest **ret);
/* Connects (and keeps reconnecting with backoff). -EINVAL for a guest that is not QMP's. */
int guest_qmp_start(Guest *g);
