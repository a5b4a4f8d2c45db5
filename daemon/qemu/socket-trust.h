/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whom a QMP socket may belong to. rightsized runs as root and takes whatever listens on a socket
 * its qmp-sockets globs match for a guest, so only a socket that root or a configured QEMU user
 * (qemu-users= in rightsized.conf; the daemon's own user too) could have put there is one: its
 * directory owned by one of them and writable by nobody else (a sticky, world-writable directory
 * like /tmp included: anyone may create files there), the socket file owned by one of them, and
 * the process listening on it (SO_PEERCRED) running as one of them. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

typedef struct SocketTrust {
        uid_t *uids;    /* the QEMU users besides root */
        size_t n_uids;
} SocketTrust;

void socket_trust_clear(SocketTrust *t);

/* Resolves the user names (or numeric uids) of qemu-users= into t (cleared first). A name that
 * does not resolve is logged and left out: a QEMU user that does not exist owns no socket. */
int socket_trust_set_users(SocketTrust *t, char *const *users);


/* Whether a socket in a directory may be a guest's; when not, why (in why): dir_st as stat() gave
 * it for the directory, sock_st as lstat() gave it for the socket. */
bool socket_trust_files(const SocketTrust *t, const struct stat *dir_st, const struct stat *sock_st, char *why,
                        size_t why_size);

/* The same for the process at the other end of a connected unix socket: its pid in *ret_pid (0
 * when unknown), false with why when its uid is not trusted or cannot be read. */
bool socket_trust_peer(const SocketTrust *t, int fd, pid_t *ret_pid, char *why, size_t why_size);
