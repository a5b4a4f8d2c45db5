/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/guest-fixture.h"

static const char *env_or(const char *name, const char *fallback) {
        const char *v = getenv(name);
        return v && *v ? v : fallback;
}

void guest_fixture_boot(GuestFixture *g, const char *boot_options, const char *workload_args) {
        const char *top_srcdir = env_or("top_srcdir", ".");
        const char *image_dir = env_or("RIGHTSIZE_GUEST_DIR", "guest");
        char command[4 * PATH_MAX];

        memset(g, 0, sizeof(*g));
        snprintf(g->run_dir, sizeof(g->run_dir), "/tmp/rs-it-XXXXXX");
        if (!mkdtemp(g->run_dir)) {
                perror("mkdtemp");
                exit(EXIT_FAILURE);
        }
        snprintf(g->qmp_path, sizeof(g->qmp_path), "%s/qmp.sock", g->run_dir);
        snprintf(g->qga_path, sizeof(g->qga_path), "%s/qga.sock", g->run_dir);
        snprintf(g->console_path, sizeof(g->console_path), "%s/console.log", g->run_dir);

        snprintf(command, sizeof(command), "'%s/contrib/boot-guest' --dir '%s' --image-dir '%s' %s%s%s%s",
                 top_srcdir, g->run_dir, image_dir, boot_options ? boot_options : "",
                 workload_args ? " --workload '" : "", workload_args ? workload_args : "",
                 workload_args ? "'" : "");
        fprintf(stderr, "guest-fixture: %s\n", command);
        if (system(command) != 0) {
                fprintf(stderr, "guest-fixture: the test guest did not boot (see above); this is a failure, not a skip\n");
                exit(EXIT_FAILURE);
        }
        g->booted = 1;
}

void guest_fixture_stop(GuestFixture *g) {
        char command[2 * PATH_MAX];

        if (!g->booted)
                return;
        snprintf(command, sizeof(command), "'%s/contrib/boot-guest' --stop '%s' >/dev/null",
                 env_or("top_srcdir", "."), g->run_dir);
        if (system(command) != 0)
                fprintf(stderr, "guest-fixture: stopping the guest in %s failed\n", g->run_dir);
        g->booted = 0;
}
