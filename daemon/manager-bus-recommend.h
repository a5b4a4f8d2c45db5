/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GetRecommendation and ApplyRecommendation (daemon/dbus-api.md): the next boot's size of each
 * guest from its 14-day history (daemon/boot-history.h), and writing it into a libvirt domain's
 * persistent definition. The bus's side only: the rules are boot-history.c's, the writing the
 * guest source's (daemon/libvirt/libvirt-policy.c). */
#pragma once

#include <systemd/sd-bus.h>

int manager_bus_method_get_recommendation(sd_bus_message *msg, void *userdata, sd_bus_error *error);
int manager_bus_method_apply_recommendation(sd_bus_message *msg, void *userdata, sd_bus_error *error);
