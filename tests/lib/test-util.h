/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Helpers shared by the daemon/ unit tests: temporary directories, captured stderr, a private
 * tmpfs. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* A fresh directory under $TMPDIR (or /tmp); aborts the test on failure. Free with test_rm_rf(). */
char *test_mkdtemp(void);

/* Removes a directory tree; tolerates what is already gone. */
void test_rm_rf(const char *path);

/* Whole file as a NUL-terminated string, or NULL. */
char *test_read_file(const char *path);

/* Writes a file, aborting the test on failure. */
void test_write_file(const char *path, const char *contents);

/* Points fd 2 at a temporary file until test_stderr_end(), which returns what was written. */
void test_stderr_begin(void);
char *test_stderr_end(void);

/* Moves the calling process into a private mount namespace and mounts a tmpfs of `size` bytes
 * on `dir` there, so nothing leaks to the host. Returns 0, or -errno when this process may not
 * (no CAP_SYS_ADMIN and no user namespaces). */
int test_mount_private_tmpfs(const char *dir, uint64_t size);

/* A config's text with its line "KEY = ..." set to "KEY = VALUE" (value NULL: that line removed),
 * every other line as it was (free it); NULL when no line sets key. */
char *test_config_with(const char *text, const char *key, const char *value);

/* text without its lines that start with '#' (free it): a config's settings, not the comments
 * that say where each came from (rightsized --check-config). */
char *test_without_comment_lines(const char *text);

/* Creates a listening unix socket at path and returns its fd (aborts on failure). */
int test_make_unix_socket(const char *path);

/* The process's peak resident set so far (VmHWM), in bytes: what an input cost in memory at its
 * worst, not a timing. Aborts when /proc cannot tell. */
uint64_t test_peak_rss(void);
