/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized.conf (daemon/conf.c) fed arbitrary bytes as the file's content.
 *
 * A config that loads must survive the round trip --check-config relies on: what config_print()
 * writes loads back to an equal Config. Matching and the agent socket pattern are exercised on
 * whatever loaded. A config that fails must say why. */
#include <errno.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/conf.h"
#include "daemon/log.h"
#include "tests/fuzz/fuzz.h"

static FILE *open_bytes(const uint8_t *data, size_t size) {
        /* fmemopen() refuses an empty buffer on some libcs; an empty file is /dev/null. */
        FILE *f = size > 0 ? fmemopen((void *) data, size, "r") : fopen("/dev/null", "re");

        fuzz_assert(f);
        return f;
}

static void check_loaded(const Config *c) {
        _cleanup_free_ char *printed = NULL, *error = NULL, *agent = NULL;
        _cleanup_(config_freep) Config *again = NULL;
        size_t printed_size = 0;
        FILE *f;
        int r;

        f = open_memstream(&printed, &printed_size);
        fuzz_assert(f);
        fuzz_assert(config_print(c, false, f) == 0);
        fuzz_assert(fclose(f) == 0);

        f = open_bytes((const uint8_t *) printed, printed_size);
        r = config_load_file(f, "printed", &again, &error);
        fclose(f);
        if (r < 0)
                fprintf(stderr, "printed config does not load back: %s\n%s", error ? error : "?", printed);
        fuzz_assert(r == 0);
        if (!config_equal(c, again)) {
                fprintf(stderr, "printed config loads back different:\n%s---- loaded back:\n", printed);
                (void) config_print(again, false, stderr);
        }
        fuzz_assert(config_equal(c, again));

        (void) config_guest_is_managed(c, "web-1", "6f1c2d3e-0000-4000-8000-000000000001");
        (void) config_guest_is_managed(c, "", NULL);
        r = config_agent_socket_path(c->agent_socket_pattern, "/run/qemu/guest.qmp", &agent);
        fuzz_assert(r == 0 || r == -EINVAL);
        if (r == 0 && c->agent_socket_pattern && c->agent_socket_pattern[0])
                fuzz_assert(agent && agent[0] == '/');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *error = NULL;
        FILE *f;
        int r;

        log_set_max_level(LOG_CRIT);
        f = open_bytes(data, size);
        r = config_load_file(f, "fuzz.conf", &c, &error);
        fclose(f);

        if (r < 0) {
                fuzz_assert(!c);
                fuzz_assert(error == NULL || strncmp(error, "fuzz.conf", strlen("fuzz.conf")) == 0);
                return 0;
        }
        fuzz_assert(c);
        check_loaded(c);
        return 0;
}
