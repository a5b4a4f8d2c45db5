/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Guest agent helpers: reading a guest file (guest-file-open, -read until eof, -close)
 * and reading + parsing /proc/vmstat, /proc/meminfo and /proc/pressure/memory. */
#pragma once

#include <stddef.h>

#include "common/procfs.h"
#include "qmp/qga-client.h"

#define QGA_FILE_MAX_DEFAULT ((size_t) (1024 * 1024))
#define QGA_FILE_READ_CHUNK 65536
/* /proc/zoneinfo grows with CPUs and zones (a pageset of about 100 bytes per CPU per zone): a
 * 4-zone guest with 64 vCPUs writes some 40 KiB, one with 512 under 256. */
#define QGA_ZONEINFO_MAX ((size_t) (256 * 1024))

/* data is NUL-terminated (not counted in size) and valid during the callback only;
 * NULL unless reply->error == 0. Errors: the agent's (guest-file-open fails with -EIO and
 * its desc), -EFBIG when the file exceeds max_size, -EBADMSG for malformed read replies,
 * -ETIMEDOUT, -ECONNRESET. */
typedef void (*qga_file_fn)(QgaClient *c, const QmpReply *reply, const char *data, size_t size, void *userdata);

/* Opens path read-only, reads it in QGA_FILE_READ_CHUNK pieces until eof, then closes the
 * handle, also after errors (unless the connection is gone). max_size 0 means the
 * default cap. timeout_usec applies to each command separately. destroy (may be NULL)
 * gets userdata once, after the callback or when the client is freed before it. */
int qga_read_file_full(QgaClient *c,
                       const char *path,
                       size_t max_size,
                       uint64_t timeout_usec,
                       qga_file_fn callback,
                       void *userdata,
                       qmp_destroy_fn destroy);
static inline int qga_read_file(
                QgaClient *c, const char *path, size_t max_size, uint64_t timeout_usec, qga_file_fn callback, void *userdata) {
        return qga_read_file_full(c, path, max_size, timeout_usec, callback, userdata, NULL);
}

typedef void (*qga_vmstat_fn)(QgaClient *c, const QmpReply *reply, const GuestVmstat *vmstat, void *userdata);
typedef void (*qga_meminfo_fn)(QgaClient *c, const QmpReply *reply, const GuestMeminfo *meminfo, void *userdata);
typedef void (*qga_psi_fn)(QgaClient *c, const QmpReply *reply, const GuestPsi *psi, void *userdata);
typedef void (*qga_zoneinfo_fn)(QgaClient *c, const QmpReply *reply, const GuestZoneinfo *zoneinfo, void *userdata);

/* The parsed structs are NULL unless reply->error == 0. A file that reads fine but has no
 * known counter at all (or, for PSI, no "some" line) completes with -EBADMSG. */
int qga_read_vmstat(QgaClient *c, uint64_t timeout_usec, qga_vmstat_fn callback, void *userdata);
int qga_read_meminfo(QgaClient *c, uint64_t timeout_usec, qga_meminfo_fn callback, void *userdata);
int qga_read_psi_memory(QgaClient *c, uint64_t timeout_usec, qga_psi_fn callback, void *userdata);
/* /proc/zoneinfo, at most QGA_ZONEINFO_MAX bytes, its watermarks summed for 4 KiB pages
 * (guest_zoneinfo_parse()): -EBADMSG for a file that is not all a kernel's. */
int qga_read_zoneinfo(QgaClient *c, uint64_t timeout_usec, qga_zoneinfo_fn callback, void *userdata);
