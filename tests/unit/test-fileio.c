/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/fileio.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

static char *dir;

static void setup(void) {
        dir = test_mkdtemp();
}

static void teardown(void) {
        _cleanup_(freep) char *mnt = NULL;

        /* The disk-full test mounts a tmpfs here; it must go before the tree can. */
        ck_assert_int_ge(asprintf(&mnt, "%s/fs", dir), 0);
        (void) umount2(mnt, MNT_DETACH);
        test_rm_rf(dir);
        free(dir);
}

static unsigned count_entries(const char *path) {
        DIR *d = opendir(path);
        struct dirent *de;
        unsigned n = 0;

        ck_assert_ptr_nonnull(d);
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

START_TEST(test_write_and_replace) {
        _cleanup_(freep) char *path = NULL, *a = NULL, *b = NULL;
        struct stat st;

        ck_assert_int_ge(asprintf(&path, "%s/out.prom", dir), 0);
        ck_assert_int_eq(write_file_atomic(path, "first\n", 6, 0644, 0), 0);
        a = test_read_file(path);
        ck_assert_str_eq(a, "first\n");
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0644); /* readable by node_exporter, despite mkstemp's 0600 */

        ck_assert_int_eq(write_file_atomic(path, "second, longer\n", 15, 0600, WRITE_FILE_SYNC), 0);
        b = test_read_file(path);
        ck_assert_str_eq(b, "second, longer\n");
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 07777, 0600);
        ck_assert_uint_eq(count_entries(dir), 1); /* no temporary file left behind */

        ck_assert_int_eq(write_file_atomic(path, NULL, 0, 0644, 0), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_size, 0);
}
END_TEST

START_TEST(test_write_errors) {
        _cleanup_(freep) char *missing = NULL, *slash = NULL;

        ck_assert_int_ge(asprintf(&missing, "%s/no/such/dir/file", dir), 0);
        ck_assert_int_eq(write_file_atomic(missing, "x", 1, 0644, 0), -ENOENT);
        ck_assert_int_ge(asprintf(&slash, "%s/", dir), 0);
        ck_assert_int_eq(write_file_atomic(slash, "x", 1, 0644, 0), -EISDIR);
        ck_assert_int_eq(write_file_atomic(NULL, "x", 1, 0644, 0), -EINVAL);
        ck_assert_uint_eq(count_entries(dir), 0);
}
END_TEST

START_TEST(test_disk_full_keeps_old_file) {
        _cleanup_(freep) char *fs = NULL, *path = NULL, *filler = NULL, *old = NULL, *big = NULL;
        _cleanup_(closep) int fd = -1;
        char block[4096];
        int r;

        ck_assert_int_ge(asprintf(&fs, "%s/fs", dir), 0);
        ck_assert_int_eq(mkdir(fs, 0755), 0);
        r = test_mount_private_tmpfs(fs, 64 * 1024);
        if (r < 0) {
                check_cannot_set_up("test_disk_full_keeps_old_file", "no private tmpfs: %s", strerror(-r));
                return;
        }

        ck_assert_int_ge(asprintf(&path, "%s/state.json", fs), 0);
        ck_assert_int_eq(write_file_atomic(path, "{\"old\":true}\n", 13, 0600, WRITE_FILE_SYNC), 0);

        /* Fill the file system to the last block. */
        ck_assert_int_ge(asprintf(&filler, "%s/filler", fs), 0);
        fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        memset(block, 'x', sizeof(block));
        for (;;) {
                ssize_t n = write(fd, block, sizeof(block));
                if (n < 0) {
                        ck_assert_int_eq(errno, ENOSPC);
                        break;
                }
        }

        big = malloc(16384);
        ck_assert_ptr_nonnull(big);
        memset(big, 'y', 16384);
        ck_assert_int_eq(write_file_atomic(path, big, 16384, 0600, WRITE_FILE_SYNC), -ENOSPC);

        old = test_read_file(path);
        ck_assert_str_eq(old, "{\"old\":true}\n");
        ck_assert_uint_eq(count_entries(fs), 2); /* state.json and filler, no temporary file */

        /* Once there is room again, writing works. */
        ck_assert_int_eq(close(TAKE_FD(fd)), 0);
        ck_assert_int_eq(unlink(filler), 0);
        ck_assert_int_eq(write_file_atomic(path, big, 16384, 0600, WRITE_FILE_SYNC), 0);
}
END_TEST

START_TEST(test_read_capped) {
        _cleanup_(freep) char *path = NULL, *fifo = NULL, *data = NULL;
        size_t size = 0;

        ck_assert_int_ge(asprintf(&path, "%s/f", dir), 0);
        test_write_file(path, "0123456789");

        ck_assert_int_eq(read_file_capped(path, 10, &data, &size), 0);
        ck_assert_str_eq(data, "0123456789");
        ck_assert_uint_eq(size, 10);
        free(TAKE_PTR(data));

        ck_assert_int_eq(read_file_capped(path, 9, &data, &size), -EFBIG);
        ck_assert_ptr_null(data);

        ck_assert_int_eq(read_file_capped(dir, 100, &data, &size), -EINVAL);
        ck_assert_int_ge(asprintf(&fifo, "%s/fifo", dir), 0);
        ck_assert_int_eq(mkfifo(fifo, 0600), 0);
        ck_assert_int_eq(read_file_capped(fifo, 100, &data, &size), -EINVAL); /* and did not hang */
        ck_assert_int_eq(unlink(path), 0);
        ck_assert_int_eq(read_file_capped(path, 100, &data, &size), -ENOENT);
}
END_TEST

int main(void) {
        return check_run_case("fileio", "fileio", setup, teardown, 0,
                              CHECK_TESTS(test_write_and_replace, test_write_errors, test_disk_full_keeps_old_file,
                                          test_read_capped));
}
