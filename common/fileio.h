/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whole-file reads and writes: atomic replacement for state and metrics, bounded reads for files
 * whose contents we do not trust. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

typedef enum WriteFileFlags {
        /* fsync the data before the rename and the directory after it, so that after a crash
         * the file is either the old one or the new one, never empty. */
        WRITE_FILE_SYNC = 1 << 0,
} WriteFileFlags;

/* Replaces `path` with `data`: writes a hidden temporary file in the same directory, sets `mode`
 * on it, and renames it over the target. On any failure the temporary file is removed, the old
 * file is left as it was, and -errno is returned (-ENOSPC when the disk is full). */
int write_file_atomic(const char *path, const void *data, size_t size, mode_t mode, WriteFileFlags flags);

/* Reads a regular file of at most max_size bytes into a NUL-terminated buffer. -EFBIG if it is
 * larger, -EINVAL if it is not a regular file, other -errno from the system. */
int read_file_capped(const char *path, size_t max_size, char **ret_data, size_t *ret_size);
