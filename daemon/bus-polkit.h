/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Asks polkit whether the caller of a D-Bus method may do what it asks, without blocking the event
 * loop. The first time a handler calls bus_polkit_verify() for a message, a CheckAuthorization call
 * goes to org.freedesktop.PolicyKit1 and the handler stops (returns 1 without replying); when polkit
 * answers, the message is put back into the bus's read queue, sd-bus dispatches it to the same
 * handler again, and this time bus_polkit_verify() returns the verdict it stored. Handlers must call
 * it before they change anything. Root (an effective uid 0 the bus itself vouches for) never needs
 * polkit. */
#pragma once

#include <systemd/sd-bus.h>

typedef struct BusPolkitRegistry BusPolkitRegistry;

/* At most this many queries wait for polkit at once; more callers are refused (LimitsExceeded)
 * rather than letting a flood of calls grow the daemon. */
#define BUS_POLKIT_QUERIES_MAX 128U
/* Per user, whatever the number of its connections (a client opens as many as it likes): at most
 * this many of its queries wait at once, and at most BUS_POLKIT_USER_BURST start per
 * BUS_POLKIT_USER_INTERVAL_USEC. More get LimitsExceeded, so that a hostile local user can make
 * the daemon neither hammer polkit nor crowd out the others' checks. */
#define BUS_POLKIT_USER_QUERIES_MAX 8U
#define BUS_POLKIT_USER_BURST 16U
#define BUS_POLKIT_USER_INTERVAL_USEC (10ULL * 1000000ULL)

int bus_polkit_registry_new(BusPolkitRegistry **ret);
/* Cancels the queries in flight and drops the messages they hold; the bus may be gone already
 * or still open (call it before the bus is closed so the pending calls are cancelled on it). */
BusPolkitRegistry *bus_polkit_registry_free(BusPolkitRegistry *registry);

/* 1: the caller may go on (root, or polkit said yes).
 * 0: a query to polkit was started; the handler must return 1 at once and change nothing, the
 *    message comes back to it when polkit has answered.
 * <0: refused or failed, with error set: AccessDenied naming the action (polkit said no, polkit is
 *    not running, or polkit failed), InteractiveAuthorizationRequired (polkit would ask for a
 *    password but the caller did not allow interaction), LimitsExceeded (too many queries). */
int bus_polkit_verify(BusPolkitRegistry *registry, sd_bus_message *call, const char *action, sd_bus_error *error);

/* The verdict in a reply of CheckAuthorization (or an error reply), as bus_polkit_verify() returns
 * it: 1, or <0 with error set. Pure: it only reads the message. */
int bus_polkit_verdict_from_reply(sd_bus_message *reply, const char *action, sd_bus_error *error);
