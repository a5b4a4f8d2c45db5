/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Plain-QEMU guest discovery: guests come and go as their QMP sockets do. The directories named by
 * the qmp-sockets globs are watched with inotify on the daemon's sd-event loop; a directory that
 * does not exist yet is waited for through its nearest existing ancestor. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <systemd/sd-event.h>

#include "daemon/qemu/socket-trust.h"

typedef struct Discovery Discovery;

/* `path` is the socket, `guest_name` its file name without ".qmp". Names are untrusted (any bytes
 * but '/') and two directories may yield the same name: key guests by path. The strings are only
 * valid during the call. A socket may be found at the instant QEMU bound it, before it listens:
 * connecting can fail with ECONNREFUSED once and is worth a retry. Callbacks must not call
 * discovery_set_globs() or discovery_free(). */
typedef void (*DiscoveryAddedFn)(Discovery *d, const char *path, const char *guest_name, void *userdata);
typedef void (*DiscoveryRemovedFn)(Discovery *d, const char *path, const char *guest_name, void *userdata);

int discovery_new(sd_event *event, DiscoveryAddedFn added, DiscoveryRemovedFn removed, void *userdata,
                  Discovery **ret);

/* Stops watching. Does not call removed() for the sockets still known. */
Discovery *discovery_free(Discovery *d);
static inline void discovery_freep(Discovery **d) {
        if (*d)
                discovery_free(*d);
}

/* Sets the globs (absolute, wildcards in the file name only, as config.c checks) and scans right
 * away: added() for each socket found. Calling it again, on reload, reports removed() for sockets
 * the new globs no longer match and added() for newly matched ones; the others stay untouched. */
int discovery_set_globs(Discovery *d, char *const *globs);

/* Whom sockets may belong to (socket-trust.h); NULL or never set: root only. A socket that fails
 * the check is logged once and never reported; the trust is the caller's and must outlive d. */
void discovery_set_trust(Discovery *d, const SocketTrust *trust);

/* Sockets currently known (refused ones not counted). */
size_t discovery_count(const Discovery *d);
