/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Boots the real test guest with contrib/boot-guest for an integration test, and stops it.
 * Failures abort the test program with the guest's console tail: a missing QEMU or image
 * is a failure, never a skip. */
#pragma once

#include <limits.h>
#include <sys/types.h>

typedef struct GuestFixture {
        char run_dir[64]; /* short: unix socket paths are limited to 108 bytes */
        char qmp_path[PATH_MAX];
        char qga_path[PATH_MAX];
        char console_path[PATH_MAX];
        int booted;
        pid_t boot_pid;   /* boot-guest still running in the background (guest_fixture_boot_in), or 0 */
} GuestFixture;

/* boot_options go to boot-guest as they are (e.g. "--mem 1G --swap 256M"); workload_args
 * become the guest's rs-workload arguments (NULL for none). */
void guest_fixture_boot(GuestFixture *g, const char *boot_options, const char *workload_args);
void guest_fixture_stop(GuestFixture *g);

/* Boots in an existing directory (rightsized's discovery directory, say) with the sockets named
 * NAME.qmp and NAME.qga, the way discovery names guests. boot-guest runs in the background
 * until guest_fixture_boot_wait(), which fails the test program like guest_fixture_boot() when
 * the guest did not boot (a stop before that interrupts the boot). Booting again in the same
 * directory under the same name after guest_fixture_kill() restarts QEMU on the same socket
 * path. Stopping the guest removes every *.qmp of the directory. */
void guest_fixture_boot_in(GuestFixture *g, const char *dir, const char *name, const char *boot_options,
                           const char *workload_args);
void guest_fixture_boot_wait(GuestFixture *g);
/* QEMU's pid (boot-guest's qemu.pid), or -1. */
pid_t guest_fixture_qemu_pid(const GuestFixture *g);
/* Sends sig to QEMU and waits up to 10 s for it to be gone; 0 or -errno. QEMU leaves its
 * sockets behind when killed. */
int guest_fixture_kill(GuestFixture *g, int sig);
/* Types `line` on the guest's serial console (its init evaluates each line in a subshell; the
 * output goes to console_path). 0 or -errno. */
int guest_fixture_console(const GuestFixture *g, const char *line);
