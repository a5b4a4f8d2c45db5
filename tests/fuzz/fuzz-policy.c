/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy files (policies/policy-file.c) fed arbitrary bytes.
 *
 * The bytes are parsed twice: as a string (rs_policy_parse_string) and as a file
 * (rs_policy_file_load). For text without NUL bytes both readers must agree on the outcome: the
 * same error at the same line and key, or the same policy. A policy that loads must validate,
 * and the helpers that use it must not crash on it. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "policies/policy-file.h"
#include "tests/fuzz/fuzz.h"

static char *policy_path;

static void remove_policy_file(void) {
        char *slash = strrchr(policy_path, '/');

        (void) unlink(policy_path);
        *slash = '\0';
        (void) rmdir(policy_path);
        free(policy_path);
}

/* One file, in a directory of our own, rewritten for every input. */
static const char *write_policy_file(const uint8_t *data, size_t size) {
        _cleanup_(closep) int fd = -1;

        if (!policy_path) {
                char dir[] = "/tmp/rs-fuzz-policy-XXXXXX";

                fuzz_assert(mkdtemp(dir));
                fuzz_assert(asprintf(&policy_path, "%s/fuzz.conf", dir) > 0);
                atexit(remove_policy_file);
        }
        fd = open(policy_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        fuzz_assert(fd >= 0);
        fuzz_assert(write(fd, data, size) == (ssize_t) size);
        return policy_path;
}

static void check_policy(const RsPolicy *p) {
        const char *bad_key = NULL;
        static const uint64_t guest_max[] = { 0, 1, 512 * MIB, 4 * GIB, UINT64_MAX };

        fuzz_assert(rs_policy_validate(p, &bad_key) == 0);
        fuzz_assert(memchr(p->name, '\0', sizeof(p->name)));
        fuzz_assert(memchr(p->match, '\0', sizeof(p->match)));
        fuzz_assert(rs_mode_to_string(p->mode));
        fuzz_assert(rs_actuator_to_string(p->actuator));
        fuzz_assert(rs_sensitivity_to_string(p->refault_sensitivity));
        for (size_t i = 0; i < ARRAY_SIZE(guest_max); i++) {
                (void) rs_policy_max(p, guest_max[i]);
                (void) rs_policy_floor(p, guest_max[i]);
        }
        (void) rs_policy_matches(p, "web-1", "6f1c2d3e-0000-4000-8000-000000000001");
        (void) rs_policy_select(p, 1, "web-1", NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size);
        RsPolicy from_string, from_file;
        RsPolicyError string_error = {}, file_error = {};
        const char *path = write_policy_file(data, size);
        char buf[1024];
        int r_string, r_file;

        r_string = rs_policy_parse_string(text, path, &from_string, &string_error);
        r_file = rs_policy_file_load(path, &from_file, &file_error);
        fuzz_assert(r_string == 0 || r_string == -EINVAL || r_string == -ENOMEM);
        fuzz_assert(r_file == 0 || r_file == -EINVAL || r_file == -ENOMEM);

        if (r_string == 0)
                check_policy(&from_string);
        else
                fuzz_assert(rs_policy_error_format(&string_error, buf, sizeof(buf)) == buf);
        if (r_file == 0)
                check_policy(&from_file);
        else
                fuzz_assert(rs_policy_error_format(&file_error, buf, sizeof(buf)) == buf);

        /* Text without NUL bytes reads the same from a string as from a file. */
        if (!memchr(data, '\0', size)) {
                if (r_string != r_file || (r_string == 0 && !rs_policy_equal(&from_string, &from_file)) ||
                    (r_string < 0 && (string_error.line != file_error.line ||
                                      strcmp(string_error.key, file_error.key) != 0 ||
                                      strcmp(string_error.message, file_error.message) != 0)))
                        fprintf(stderr, "string: %d %s\nfile:   %d %s\n", r_string,
                                rs_policy_error_format(&string_error, buf, sizeof(buf)), r_file,
                                rs_policy_error_format(&file_error, (char[1024]) {}, 1024));
                fuzz_assert(r_string == r_file);
                if (r_string == 0)
                        fuzz_assert(rs_policy_equal(&from_string, &from_file));
                else {
                        fuzz_assert(string_error.line == file_error.line);
                        fuzz_assert(strcmp(string_error.key, file_error.key) == 0);
                        fuzz_assert(strcmp(string_error.message, file_error.message) == 0);
                }
        }
        return 0;
}
