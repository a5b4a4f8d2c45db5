/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Boots the real test guest with contrib/boot-guest for an integration test, and stops it.
 * Failures abort the test program with the guest's console tail: a missing QEMU or image
 * is a failure, never a skip. */
#pragma once

#include <limits.h>

typedef struct GuestFixture {
        char run_dir[64]; /* short: unix socket paths are limited to 108 bytes */
        char qmp_path[PATH_MAX];
        char qga_path[PATH_MAX];
        char console_path[PATH_MAX];
        int booted;
} GuestFixture;

/* boot_options go to boot-guest as they are (e.g. "--mem 1G --swap 256M"); workload_args
 * become the guest's rs-workload arguments (NULL for none). */
void guest_fixture_boot(GuestFixture *g, const char *boot_options, const char *workload_args);
void guest_fixture_stop(GuestFixture *g);
