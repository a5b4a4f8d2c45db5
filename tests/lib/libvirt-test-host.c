/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "tests/lib/check-run.h"
#include "tests/lib/e2e-common.h"
#include "tests/lib/libvirt-test-host.h"

static void quiet_error(void *userdata _unused_, virErrorPtr error _unused_) {
}

int libvirt_test_host_enter(const char *test_name) {
        if (getuid() != 0)
                return check_program_cannot_set_up(test_name, "it needs root (libvirtd, qemu.conf, the user libvirt-qemu)");
        virSetErrorFunc(NULL, quiet_error);
        signal(SIGPIPE, SIG_IGN);
        int lock_fd = open(LIBVIRT_TEST_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
                fprintf(stderr, "%s: cannot lock %s: %m\n", test_name, LIBVIRT_TEST_LOCK);
                return EXIT_FAILURE;
        }
        return 0; /* the lock stays taken with lock_fd until the process exits */
}

int libvirt_test_host_run(const char *suite, const char *name, const TTest *test, void (*setup)(void),
                          void (*teardown)(void), unsigned timeout_sec) {
        char program[128];

        snprintf(program, sizeof(program), "test-%s", suite);
        int r = libvirt_test_host_enter(program);
        if (r != 0)
                return r;
        return e2e_run_suite(suite_create(suite), name, test, setup, teardown, timeout_sec);
}

void libvirt_test_host_leave(virConnectPtr *conn, char *const *domains) {
        _cleanup_free_ char *cmd = NULL;
        size_t size = 0;
        FILE *f;

        if (*conn) {
                virConnectClose(*conn);
                *conn = NULL;
        }
        if (!domains[0][0])
                return;
        f = open_memstream(&cmd, &size);
        if (!f)
                return;
        for (size_t i = 0; domains[i]; i++)
                fprintf(f,
                        "virsh -q -c " LIBVIRT_TEST_URI " destroy %s >/dev/null 2>&1; "
                        "virsh -q -c " LIBVIRT_TEST_URI " undefine %s >/dev/null 2>&1; ",
                        domains[i], domains[i]);
        fprintf(f, "%s/contrib/libvirt-setup --stop >/dev/null 2>&1", getenv("top_srcdir") ?: ".");
        if (fclose(f) == 0)
                (void) e2e_run(cmd);
        domains[0][0] = '\0';
}
