/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One daemon per state directory. Two rightsized processes managing the same guests fight over
 * every balloon and overwrite each other's state files; the bus name keeps out a second one on
 * the same bus only. An flock() on a file in the state directory keeps out any other: it is
 * released when the holder exits, however it exits, so a crash leaves nothing stale behind. */
#pragma once

#include <sys/types.h>

/* A dot name: no guest's state file starts with a dot, so none can be this one. */
#define STATE_LOCK_FILE ".rightsized.lock"

/* Takes the lock on dir/STATE_LOCK_FILE (created 0600) and writes our pid in it; *ret_fd holds
 * the lock until closed. -EBUSY when another process holds it (*ret_holder its pid, 0 when
 * unknown), another -errno when the file cannot be opened or locked. */
int state_lock_take(const char *dir, int *ret_fd, pid_t *ret_holder);
