/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "common/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"

static int write_all(int fd, const void *data, size_t size) {
        const char *p = data;

        while (size > 0) {
                ssize_t n = write(fd, p, size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                p += n;
                size -= (size_t) n;
        }
        return 0;
}

static int fsync_directory_of(const char *path) {
        _cleanup_(freep) char *dir = strdup(path);
        _cleanup_(closep) int fd = -1;
        char *slash;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (!slash)
                strcpy(dir, ".");
        else if (slash == dir)
                dir[1] = '\0';
        else
                *slash = '\0';

        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fsync(fd) < 0)
                return -errno;
        return 0;
}

int write_file_atomic(const char *path, const void *data, size_t size, mode_t mode, WriteFileFlags flags) {
        _cleanup_(freep) char *tmp = NULL;
        _cleanup_(closep) int fd = -1;
        const char *base;
        int r;

        if (!path || (!data && size > 0))
                return -EINVAL;

        base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (base[0] == '\0')
                return -EISDIR;

        /* Hidden and in the same directory: rename() needs the same file system, and readers
         * that glob the directory (node_exporter wants *.prom) must not pick it up. */
        if (asprintf(&tmp, "%.*s.%s.XXXXXX", (int) (base - path), path, base) < 0) {
                tmp = NULL;
                return -ENOMEM;
        }

        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return -errno;

        if (fchmod(fd, mode) < 0) {
                r = -errno;
                goto fail;
        }
        r = write_all(fd, data, size);
        if (r < 0)
                goto fail;
        if ((flags & WRITE_FILE_SYNC) && fsync(fd) < 0) {
                r = -errno;
                goto fail;
        }
        /* close() can report a deferred write error (NFS, some FUSE): treat it as failure. */
        r = close(TAKE_FD(fd));
        if (r < 0) {
                r = -errno;
                goto fail;
        }
        if (rename(tmp, path) < 0) {
                r = -errno;
                goto fail;
        }
        if (flags & WRITE_FILE_SYNC) {
                r = fsync_directory_of(path);
                if (r < 0)
                        return r; /* the new file is in place; only its durability is unknown */
        }
        return 0;

fail:
        (void) unlink(tmp);
        return r;
}

int read_file_capped(const char *path, size_t max_size, char **ret_data, size_t *ret_size) {
        _cleanup_(closep) int fd = -1;
        _cleanup_(freep) char *buf = NULL;
        struct stat st;
        size_t used = 0;

        if (!path || !ret_data || max_size == SIZE_MAX)
                return -EINVAL;

        /* O_NONBLOCK: a FIFO planted in the directory must not hang us before fstat() tells. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        if ((uint64_t) st.st_size > max_size)
                return -EFBIG;

        buf = malloc(max_size + 1);
        if (!buf)
                return -ENOMEM;

        /* Read one byte past the cap: the file may have grown since fstat(). */
        for (;;) {
                ssize_t n = read(fd, buf + used, max_size + 1 - used);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                used += (size_t) n;
                if (used > max_size)
                        return -EFBIG;
        }

        buf[used] = '\0';
        *ret_data = TAKE_PTR(buf);
        if (ret_size)
                *ret_size = used;
        return 0;
}
