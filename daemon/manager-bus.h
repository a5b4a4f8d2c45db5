/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.rightsize.Manager1 on the system bus (daemon/dbus-api.md): a thin layer over manager.h. */
#pragma once

#include "daemon/manager.h"

/* Connects to the system bus ($DBUS_SYSTEM_BUS_ADDRESS honoured), serves the object and takes
 * the name. */
int manager_bus_open(Manager *m);
void manager_bus_close(Manager *m);
void manager_bus_emit_estimate_changed(Manager *m, Guest *g);
