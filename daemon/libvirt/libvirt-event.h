/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libvirt's event loop on sd-event. libvirt needs an event loop for its connection's socket,
 * keepalives, the close callback and domain events; its default implementation wants a thread
 * of its own. This one registers handles and timeouts as sd-event I/O and time sources, so the
 * loop stays on one thread. libvirt calls it from whichever thread makes an API call (the agent
 * worker, libvirt-agent.h, does): those calls only record the change and wake the loop, which
 * applies it to its sources.
 *
 * libvirt keeps one event implementation per process: call rs_libvirt_event_register() once,
 * before the first virConnectOpen(). The sd_event must outlive every libvirt connection. */
#pragma once

#include <systemd/sd-event.h>

/* Registers the implementation (virEventRegisterImpl) on `event`. A second call with the same
 * loop is a no-op; with another loop it is -EBUSY (libvirt cannot switch implementations). */
int rs_libvirt_event_register(sd_event *event);
