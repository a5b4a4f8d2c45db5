/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.rightsize.Manager1 on the system bus (daemon/dbus-api.md): a thin layer over manager.h. */
#pragma once

#include "daemon/manager.h"

/* Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS honoured), serves the object and takes
 * the name, waiting for the bus's answer. 0 when the name is ours; otherwise -ENOTCONN, the cause
 * is logged and in Manager.bus_error (STATUS=), and the bus is retried on a timer until the name
 * is ours; the same after a disconnection. Manager.last_api_outage keeps the last outage.
 * -EEXIST when another process owns the name (another rightsized): not retried, the daemon must
 * not start; found on a later retry, the daemon stops (Manager.exit_error). */
int manager_bus_open(Manager *m);
/* While the API is down: retries now rather than at the next timer. */
void manager_bus_retry_now(Manager *m);
/* Closes the bus and stops the retries. */
void manager_bus_close(Manager *m);
void manager_bus_emit_estimate_changed(Manager *m, Guest *g);

/* The guest NAME names, or NULL with NoSuchGuest set; a name that is not UTF-8 (a socket file's)
 * is listed escaped and found by that too. */
Guest *manager_bus_find_guest(Manager *m, const char *name, sd_bus_error *error);
