/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Cuts the libvirt connection when a libvirt call holds the daemon's loop too long.
 *
 * Why: libvirt's calls are synchronous, and a libvirtd that hangs (stopped, deadlocked,
 * swapped out) never answers; libvirt 9.0's client does not end such a call by keepalive
 * (measured: a call to a SIGSTOPped libvirtd waited for minutes). While it waits, the loop
 * does nothing else: no QMP guest, no D-Bus, no systemd watchdog ping.
 *
 * How: the loop beats a heartbeat every second; a thread of its own checks it, and when the
 * loop has been silent for `stall_usec` it shuts the connection's socket down (shutdown(2),
 * not close: the fd stays libvirt's). The call waiting on it fails at once, libvirt closes the
 * connection, and the backend reconnects (from a thread, libvirt-connect.h). A loop stalled
 * by something else loses only the libvirt connection, which comes back.
 *
 * Calls made on worker threads (libvirt-worker.h) do not hold the loop: they are timed one by
 * one instead (call_begin/_end), and one that runs `stall_usec` gets the same cut. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

typedef struct LibvirtWatchdog LibvirtWatchdog;

int libvirt_watchdog_new(sd_event *event, uint64_t stall_usec, LibvirtWatchdog **ret);
LibvirtWatchdog *libvirt_watchdog_free(LibvirtWatchdog *w);

/* The socket to shut down on a stall, -1 for none. Set it to -1 before the connection is
 * closed: the number may be reused afterwards. */
void libvirt_watchdog_watch(LibvirtWatchdog *w, int fd);
/* Whether the watchdog cut the connection since the last call (to log it from the loop), how
 * long the loop or the call had been stuck, and whether it was a worker's call (may be NULL). */
bool libvirt_watchdog_take_cut(LibvirtWatchdog *w, uint64_t *ret_stalled_usec, bool *ret_by_call);

/* A libvirt call on a worker thread starts: a slot to end it with (-1 when the watchdog is
 * NULL or all slots are taken: the call is not timed). Thread-safe. */
int libvirt_watchdog_call_begin(LibvirtWatchdog *w);
void libvirt_watchdog_call_end(LibvirtWatchdog *w, int slot);
/* Shuts the watched socket down now (a daemon stopping does not wait for a hung call). */
void libvirt_watchdog_cut_now(LibvirtWatchdog *w);

/* The fd of the unix socket a libvirt connection opened: the one socket in `after` and not
 * in `before` whose peer is a libvirt daemon socket (…/libvirt-sock, …/virtqemud-sock, and
 * their -ro variants). -ENOENT when none or several qualify (e.g. a remote URI). */
int libvirt_connection_socket(const int *before, size_t n_before, const int *after, size_t n_after, int *ret_fd);
/* The socket fds of this process, sorted, for libvirt_connection_socket(). */
int libvirt_socket_fds(int **ret, size_t *ret_n);
