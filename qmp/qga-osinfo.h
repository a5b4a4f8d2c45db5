/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* guest-get-osinfo: which system the guest agent runs on, and so whether its file reads can give
 * the daemon /proc/vmstat and /proc/pressure/memory.
 *
 * Only Linux has those files. qemu-ga for Windows answers guest-get-osinfo with id "mswindows"
 * (QEMU qga/commands-win32.c, qmp_guest_get_osinfo(): name "Microsoft Windows", pretty-name the
 * registry's ProductName, kernel-version "10.0", kernel-release the build number, variant
 * "server" or "client"), and its guest-file-open of "/proc/vmstat" is a CreateFileW() of a path
 * that does not exist there (GenericError "failed to open file '/proc/vmstat': The system cannot
 * find the path specified."). Asking every interval would only repeat that failure. On Linux and
 * other POSIX guests qga reads id from os-release (qga/commands-posix.c), so any other answer, or
 * none (an agent older than 2.10 without the command), leaves the reads to tell. */
#pragma once

#include "qmp/qga-client.h"

typedef enum QgaOsFamily {
        QGA_OS_UNKNOWN, /* not asked yet, no answer, or the agent has no guest-get-osinfo */
        QGA_OS_WINDOWS, /* id "mswindows": no /proc */
        QGA_OS_OTHER,   /* answered, not Windows: Linux (or another POSIX system) */
        _QGA_OS_MAX,
} QgaOsFamily;

#define QGA_OS_TEXT_MAX 64

typedef struct QgaOsInfo {
        QgaOsFamily family;
        /* The agent's own words, cut after a whole UTF-8 character; "" when not sent. */
        char id[QGA_OS_TEXT_MAX];             /* "mswindows", "debian", ... */
        char pretty_name[QGA_OS_TEXT_MAX];    /* "Windows Server 2022 Datacenter", "Debian GNU/Linux 12 (bookworm)" */
        char kernel_release[QGA_OS_TEXT_MAX]; /* Windows: the build ("20348"); Linux: uname -r */
} QgaOsInfo;

const char *qga_os_family_to_string(QgaOsFamily f); /* "unknown", "windows", "other" */

/* The guest can have /proc: anything but a Windows guest (an unknown one is tried). */
static inline bool qga_os_has_procfs(QgaOsFamily f) {
        return f != QGA_OS_WINDOWS;
}

/* Parses guest-get-osinfo's "return" (an object whose members are all optional strings).
 * -EBADMSG when it is not an object or a member has another type. */
int qga_parse_osinfo(json_object *result, QgaOsInfo *ret);

/* info is NULL unless reply->error == 0. An agent without the command (older than 2.10, or one
 * that blocks it) completes with -EOPNOTSUPP (CommandNotFound). */
typedef void (*qga_osinfo_fn)(QgaClient *c, const QmpReply *reply, const QgaOsInfo *info, void *userdata);
int qga_get_osinfo(QgaClient *c, uint64_t timeout_usec, qga_osinfo_fn callback, void *userdata);
