/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl's pager, systemd's (src/shared/pager.c) made small: long output (list, show,
 * history, report, --help) goes through less when stdout is a terminal, as systemctl's does. */
#pragma once

#include <stdbool.h>

/* Starts the pager and points stdout (and stderr, when it is a terminal) at it. Does nothing when
 * `disabled` (--no-pager), when stdout is not a terminal or TERM is dumb, when $SYSTEMD_PAGER (or
 * else $PAGER) is "" or "cat", or when a pager already runs. The pager: $SYSTEMD_PAGER, else
 * $PAGER (through /bin/sh -c), else pager, less or more, else a plain copy; less gets
 * LESS=$SYSTEMD_LESS or FRSXMK and, in a UTF-8 locale, LESSCHARSET=utf-8. In secure mode only
 * less runs, with LESSSECURE=1 (no shell escape, no editing of files): when $SYSTEMD_PAGERSECURE
 * is true, or when it is not set and the caller is not the owner of its login session (sudo
 * rightsizectl: the user must not get root's shell from `!sh` in less). A $SYSTEMD_PAGERSECURE
 * that is set (true or false) lets $SYSTEMD_PAGER and $PAGER run in either mode. */
void ctl_pager_open(bool disabled);
/* Flushes stdout, gives the pager its end of file and waits for it to exit (the user quits it).
 * Registered with atexit() by ctl_pager_open(); harmless when no pager runs. */
void ctl_pager_close(void);
