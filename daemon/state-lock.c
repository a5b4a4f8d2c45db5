/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/state-lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/macro.h"

/* The pid the holder wrote, or 0: only for the message, never trusted for anything else. */
static pid_t read_holder(int fd) {
        char buf[32];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        char *end;
        long v = strtol(buf, &end, 10);
        return v > 0 && v <= INT_MAX && (*end == '\n' || *end == '\0') ? (pid_t) v : 0;
}

int state_lock_take(const char *dir, int *ret_fd, pid_t *ret_holder) {
        char path[PATH_MAX];
        int fd;

        *ret_holder = 0;
        if (snprintf(path, sizeof(path), "%s/%s", dir, STATE_LOCK_FILE) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0)
                return -errno;
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                if (r == -EBUSY)
                        *ret_holder = read_holder(fd);
                close(fd);
                return r;
        }
        char pid[32];
        int n = snprintf(pid, sizeof(pid), "%ld\n", (long) getpid());
        /* The pid only helps the message a second daemon prints: the lock holds without it. */
        if (ftruncate(fd, 0) == 0)
                (void) !pwrite(fd, pid, (size_t) n, 0);
        *ret_fd = fd;
        return 0;
}
