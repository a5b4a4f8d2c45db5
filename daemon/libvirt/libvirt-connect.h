/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Opens a libvirt connection on a thread of its own and hands it to the event loop.
 *
 * Why: virConnectOpen against a libvirtd that is stopped or hung never returns (the socket
 * accepts, nobody answers, and keepalive only starts once the connection is open), and the
 * daemon's loop must not wait with it: the other guests, D-Bus and the watchdog live there.
 * An attempt that hangs just stays pending; one cancelled meanwhile closes what it opened. */
#pragma once

#include <libvirt/libvirt.h>
#include <systemd/sd-event.h>

typedef struct LibvirtConnectAttempt LibvirtConnectAttempt;

/* conn: the new connection, now the callback's to keep (NULL on failure, with why in
 * `error`); socket_fd: its socket to the daemon when it could be told (a local URI), else -1
 * (libvirt-watchdog.h). Runs on the event loop. */
typedef void (*libvirt_connect_fn)(virConnectPtr conn, int socket_fd, const char *error, void *userdata);

int libvirt_connect_start(sd_event *event, const char *uri, libvirt_connect_fn callback, void *userdata,
                          LibvirtConnectAttempt **ret);
/* The callback will not run; a connection the thread opens later is closed. NULL is fine. */
void libvirt_connect_cancel(LibvirtConnectAttempt *a);
