/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "tests/lib/libvirt-test-host.h"

static void quiet_error(void *userdata _unused_, virErrorPtr error _unused_) {
}

int libvirt_test_host_enter(const char *test_name) {
        if (getuid() != 0) {
                fprintf(stderr, "%s: needs root\n", test_name);
                return -1;
        }
        virSetErrorFunc(NULL, quiet_error);
        signal(SIGPIPE, SIG_IGN);
        int lock_fd = open(LIBVIRT_TEST_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
                fprintf(stderr, "%s: cannot lock %s: %m\n", test_name, LIBVIRT_TEST_LOCK);
                return -1;
        }
        return 0; /* the lock stays taken with lock_fd until the process exits */
}
