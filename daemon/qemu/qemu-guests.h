/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Plain QEMU guests as a guest source (guest-source.h): each QMP socket that discovery.h finds
 * under the qmp-sockets globs, whose listener socket-trust.h trusts, becomes a guest driven by
 * guest-qmp.h, named after the socket's file; it goes when its socket does. The agent's socket
 * is derived from the QMP socket's path (agent-socket-pattern=). */
#pragma once

#include "daemon/guest-source.h"

extern const GuestSourceOps qemu_guest_source;
