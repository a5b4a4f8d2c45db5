/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>

#include "ctl/ctl-format.h"

/* rightsizectl monitor [GUEST]: follows EstimateChanged until SIGINT/SIGTERM (EXIT_OK), or until
 * the daemon leaves the bus. An exit status. */
int ctl_monitor(sd_bus *bus, const char *guest, CtlJsonMode json);
