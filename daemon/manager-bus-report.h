/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GetMemoryReport (daemon/dbus-api.md): where the host's memory is, per guest and for the host. A
 * read, checked like the others (root or the read group). */
#pragma once

#include <systemd/sd-bus.h>

#include "daemon/manager.h"

/* manager-bus.c's check of a reading caller: 0, or <0 with the error set. */
int manager_bus_check_read(Manager *m, sd_bus_message *msg, sd_bus_error *error);
/* manager-bus.c's gate of a changing method: root, or polkit's yes for `action` (asked without
 * blocking: 1 while it waits, the call comes again), then change(). */
typedef int (*change_fn)(sd_bus_message *msg, Manager *m, sd_bus_error *error);
int manager_bus_change_method(sd_bus_message *msg, Manager *m, const char *action, change_fn change,
                              sd_bus_error *error);

int manager_bus_method_get_memory_report(sd_bus_message *msg, void *userdata, sd_bus_error *error);
