/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/qemu/socket-trust.h"

#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/log.h"

void socket_trust_clear(SocketTrust *t) {
        free(t->uids);
        *t = (SocketTrust) {};
}

/* A number is a uid as it is; anything else is a user name. */
static int resolve_user(const char *name, uid_t *ret) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(name, &end, 10);
        if (*name >= '0' && *name <= '9' && *end == '\0' && errno == 0 && v < (uid_t) -1) {
                *ret = (uid_t) v;
                return 0;
        }
        struct passwd pw, *found = NULL;
        char buf[4096];
        int r = getpwnam_r(name, &pw, buf, sizeof(buf), &found);
        if (r != 0)
                return -r;
        if (!found)
                return -ESRCH;
        *ret = found->pw_uid;
        return 0;
}

int socket_trust_set_users(SocketTrust *t, char *const *users) {
        size_t n = 0;
        while (users && users[n])
                n++;
        socket_trust_clear(t);
        if (n == 0)
                return 0;
        t->uids = calloc(n, sizeof(uid_t));
        if (!t->uids)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int r = resolve_user(users[i], &t->uids[t->n_uids]);
                if (r < 0) {
                        log_warning_errno(r, "qemu-users: no user %s, left out: %m", users[i]);
                        continue;
                }
                t->n_uids++;
        }
        return 0;
}

/* Root, the daemon's own user, or one of the QEMU users. */
static bool socket_trust_uid(const SocketTrust *t, uid_t uid) {
        /* The daemon's own user is trusted as it trusts itself (a daemon run unprivileged, as
         * in the tests, finds the sockets it may reach in its own directories). */
        if (uid == 0 || uid == geteuid())
                return true;
        for (size_t i = 0; t && i < t->n_uids; i++)
                if (t->uids[i] == uid)
                        return true;
        return false;
}

bool socket_trust_files(const SocketTrust *t, const struct stat *dir_st, const struct stat *sock_st, char *why,
                        size_t why_size) {
        if (!S_ISDIR(dir_st->st_mode)) {
                snprintf(why, why_size, "its directory is not a directory");
                return false;
        }
        if (dir_st->st_mode & (S_IWGRP | S_IWOTH)) {
                snprintf(why, why_size, "its directory is writable by %s (mode %04o%s)",
                         dir_st->st_mode & S_IWOTH ? "others" : "its group", (unsigned) (dir_st->st_mode & 07777),
                         dir_st->st_mode & S_ISVTX ? ", sticky" : "");
                return false;
        }
        if (!socket_trust_uid(t, dir_st->st_uid)) {
                snprintf(why, why_size, "its directory belongs to uid %" PRIu32 ", neither root nor in qemu-users",
                         (uint32_t) dir_st->st_uid);
                return false;
        }
        if (!socket_trust_uid(t, sock_st->st_uid)) {
                snprintf(why, why_size, "it belongs to uid %" PRIu32 ", neither root nor in qemu-users",
                         (uint32_t) sock_st->st_uid);
                return false;
        }
        return true;
}

bool socket_trust_peer(const SocketTrust *t, int fd, pid_t *ret_pid, char *why, size_t why_size) {
        struct ucred cred;
        socklen_t len = sizeof(cred);

        *ret_pid = 0;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred)) {
                snprintf(why, why_size, "the process serving it is unknown (SO_PEERCRED: %s)",
                         len != sizeof(cred) ? "short answer" : strerror(errno));
                return false;
        }
        if (!socket_trust_uid(t, cred.uid)) {
                snprintf(why, why_size, "the process serving it (pid %" PRIi32 ") runs as uid %" PRIu32
                         ", neither root nor in qemu-users", (int32_t) cred.pid, (uint32_t) cred.uid);
                return false;
        }
        *ret_pid = cred.pid > 0 ? cred.pid : 0;
        return true;
}
