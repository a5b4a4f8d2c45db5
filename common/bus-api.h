/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The D-Bus API's names, one definition for the daemon (daemon/manager-bus.c), the CLI and the
 * tests (chrony's candm.h pattern). The interface itself is described in daemon/dbus-api.md;
 * etc/org.rightsize.Manager1.conf and the polkit policy name the same strings. */
#pragma once

#define RS_BUS_NAME "org.rightsize.Manager1"
#define RS_BUS_PATH "/org/rightsize/Manager1"
#define RS_BUS_INTERFACE "org.rightsize.Manager1"

#define RS_BUS_ERROR_NO_SUCH_GUEST "org.rightsize.Manager1.Error.NoSuchGuest"
#define RS_BUS_ERROR_RELOAD_FAILED "org.rightsize.Manager1.Error.ReloadFailed"
#define RS_BUS_ERROR_NO_SUCH_DOMAIN "org.rightsize.Manager1.Error.NoSuchDomain"
#define RS_BUS_ERROR_LIBVIRT_UNAVAILABLE "org.rightsize.Manager1.Error.LibvirtUnavailable"

/* The group whose members may read (etc/org.rightsize.Manager1.conf names it; the daemon's
 * read-group= defaults to it). */
#define RS_READ_GROUP "rightsize"

/* polkit actions (etc/org.rightsize.policy): changing guests, reloading the configuration */
#define RS_POLKIT_ACTION_MANAGE "org.rightsize.manage"
#define RS_POLKIT_ACTION_RELOAD "org.rightsize.reload"

/* polkit itself */
#define POLKIT_BUS_NAME "org.freedesktop.PolicyKit1"
#define POLKIT_BUS_PATH "/org/freedesktop/PolicyKit1/Authority"
#define POLKIT_BUS_INTERFACE "org.freedesktop.PolicyKit1.Authority"
