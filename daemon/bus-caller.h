/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who made a D-Bus call, for the log lines of the changes it makes: "uid 1000, pid 4242", so that
 * an operator can tell which user and process paused or resized a guest. */
#pragma once

#include <stddef.h>

#include <systemd/sd-bus.h>

/* Writes the caller of `call` into buf: "uid U, pid P", with "?" for what the bus cannot say.
 * Returns buf. */
const char *bus_caller_describe(sd_bus_message *call, char *buf, size_t size);

#define BUS_CALLER_DESCRIPTION_MAX sizeof("uid 4294967295, pid 4294967295")
