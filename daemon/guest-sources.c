/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one place where the core meets the transports' rooms: each room's GuestSourceOps, by the
 * source it implements. Every other core file reaches a transport through guest-source.h, so
 * the rooms include the core and the core includes no room but here. */
#include "daemon/guest-source.h"
#include "daemon/libvirt/guest-libvirt.h"
#include "daemon/qemu/qemu-guests.h"

const GuestSourceOps *const guest_sources[_GUEST_SOURCE_MAX] = {
        [GUEST_SOURCE_QEMU] = &qemu_guest_source,
        [GUEST_SOURCE_LIBVIRT] = &libvirt_guest_source,
};
