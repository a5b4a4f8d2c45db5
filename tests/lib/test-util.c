/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "tests/lib/test-util.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/macro.h"

char *test_mkdtemp(void) {
        const char *base = getenv("TMPDIR");
        char *path;

        ck_assert_int_ge(asprintf(&path, "%s/rightsize-test.XXXXXX", base && *base ? base : "/tmp"), 0);
        ck_assert_ptr_nonnull(mkdtemp(path));
        return path;
}

static int rm_one(const char *path, const struct stat *st _unused_, int type, struct FTW *ftw _unused_) {
        if (type == FTW_DP)
                (void) rmdir(path);
        else
                (void) unlink(path);
        return 0;
}

void test_rm_rf(const char *path) {
        if (path)
                (void) nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

char *test_read_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t size = 0;

        if (!f)
                return NULL;
        FILE *out = open_memstream(&buf, &size);
        ck_assert_ptr_nonnull(out);
        int c;
        while ((c = fgetc(f)) != EOF)
                fputc(c, out);
        fclose(f);
        fclose(out);
        return buf;
}

void test_write_file(const char *path, const char *contents) {
        FILE *f = fopen(path, "we");
        ck_assert_msg(f != NULL, "cannot create %s: %s", path, strerror(errno));
        ck_assert_int_eq(fputs(contents, f) >= 0, 1);
        ck_assert_int_eq(fclose(f), 0);
}

char *test_config_with(const char *text, const char *key, const char *value) {
        size_t len = strlen(key);
        char *ret = NULL;

        for (const char *line = text; *line;) {
                const char *eol = strchr(line, '\n'), *next = eol ? eol + 1 : line + strlen(line);
                if (strncmp(line, key, len) == 0 && line[len + strspn(line + len, " \t")] == '=') {
                        int head = (int) (line - text);
                        int r = value ? asprintf(&ret, "%.*s%s = %s\n%s", head, text, key, value, next)
                                      : asprintf(&ret, "%.*s%s", head, text, next);
                        return r < 0 ? NULL : ret;
                }
                line = next;
        }
        return NULL;
}

static int saved_stderr = -1;
static FILE *captured;

void test_stderr_begin(void) {
        captured = tmpfile();
        ck_assert_ptr_nonnull(captured);
        fflush(stderr);
        saved_stderr = dup(STDERR_FILENO);
        ck_assert_int_ge(saved_stderr, 0);
        ck_assert_int_ge(dup2(fileno(captured), STDERR_FILENO), 0);
}

char *test_stderr_end(void) {
        char *buf;
        long size;

        fflush(stderr);
        ck_assert_int_ge(dup2(saved_stderr, STDERR_FILENO), 0);
        close(saved_stderr);
        saved_stderr = -1;

        ck_assert_int_eq(fseek(captured, 0, SEEK_END), 0);
        size = ftell(captured);
        ck_assert_int_ge(size, 0);
        rewind(captured);
        buf = calloc(1, (size_t) size + 1);
        ck_assert_ptr_nonnull(buf);
        ck_assert_int_eq(fread(buf, 1, (size_t) size, captured), (size_t) size);
        fclose(captured);
        captured = NULL;
        return buf;
}

static int write_proc(const char *path, const char *text) {
        _cleanup_(closep) int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (write(fd, text, strlen(text)) < 0)
                return -errno;
        return 0;
}

int test_mount_private_tmpfs(const char *dir, uint64_t size) {
        char options[64];

        if (unshare(CLONE_NEWNS) < 0) {
                /* Not root: a user namespace grants CAP_SYS_ADMIN over a new mount namespace. */
                uid_t uid = getuid();
                gid_t gid = getgid();
                char map[64];

                if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                        return -errno;
                (void) write_proc("/proc/self/setgroups", "deny");
                snprintf(map, sizeof(map), "%u %u 1", (unsigned) uid, (unsigned) uid);
                if (write_proc("/proc/self/uid_map", map) < 0)
                        return -EPERM;
                snprintf(map, sizeof(map), "%u %u 1", (unsigned) gid, (unsigned) gid);
                if (write_proc("/proc/self/gid_map", map) < 0)
                        return -EPERM;
        }
        /* Keep our mounts from propagating back to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;

        snprintf(options, sizeof(options), "size=%llu,mode=0755", (unsigned long long) size);
        if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, options) < 0)
                return -errno;
        return 0;
}

int test_make_unix_socket(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd;

        ck_assert_int_lt(strlen(path), sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(fd, 0);
        ck_assert_msg(bind(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0, "bind %s: %s", path, strerror(errno));
        ck_assert_int_eq(listen(fd, 4), 0);
        return fd;
}

char *test_without_comment_lines(const char *text) {
        char *out = strdup(text), *w = out;
        if (!out)
                abort();
        for (const char *line = text; *line;) {
                const char *end = strchrnul(line, '\n');
                size_t n = (size_t) (end - line) + (*end == '\n');
                if (line[0] != '#') {
                        memmove(w, line, n);
                        w += n;
                }
                line += n;
        }
        *w = '\0';
        return out;
}

uint64_t test_peak_rss(void) {
        _cleanup_free_ char *status = test_read_file("/proc/self/status");
        const char *line = status ? strstr(status, "\nVmHWM:") : NULL;
        unsigned long long kib;

        ck_assert_msg(line && sscanf(line, "\nVmHWM: %llu kB", &kib) == 1, "no VmHWM in /proc/self/status");
        return (uint64_t) kib * 1024;
}
