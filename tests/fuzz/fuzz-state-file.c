/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The state-file loader (daemon/state-file.c) fed arbitrary bytes, both as text and as the
 * content of a guest's state file on disk.
 *
 * A document that loads must round-trip: guest_state_to_json() of the record loads back to the
 * same record. One that fails must give -EBADMSG or -EPROTONOSUPPORT with a reason. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/log.h"
#include "daemon/state-file.h"
#include "tests/fuzz/fuzz.h"

#define GUEST_NAME "web-1"

static char *state_dir;

static void remove_state_dir(void) {
        _cleanup_free_ char *path = NULL;

        if (state_file_path(state_dir, GUEST_NAME, &path) == 0)
                (void) unlink(path);
        (void) rmdir(state_dir);
        free(state_dir);
}

static bool same_record(const GuestStateRecord *a, const GuestStateRecord *b) {
        if (strcmp(a->name, b->name) != 0 || strcmp(a->uuid, b->uuid) != 0 || strcmp(a->state, b->state) != 0 ||
            a->saved_at_usec != b->saved_at_usec || a->target_bytes != b->target_bytes || a->n_fields != b->n_fields)
                return false;
        for (size_t i = 0; i < a->n_fields; i++) {
                const StateField *f = &a->fields[i];
                int64_t v;
                double d;

                /* Field order is json-c's business; look each one up by key. */
                if (f->type == STATE_VALUE_INT) {
                        if (guest_state_get_int(b, f->key, &v) < 0 || v != f->i)
                                return false;
                } else if (guest_state_get_double(b, f->key, &d) < 0 || d != f->d)
                        return false;
        }
        return true;
}

static void check_record(const GuestStateRecord *r) {
        _cleanup_free_ char *json = NULL;
        GuestStateRecord again;
        const char *reason = NULL;
        int k;

        fuzz_assert(r->name[0]);
        fuzz_assert(r->n_fields <= STATE_FIELDS_MAX);
        for (size_t i = 0; i < r->n_fields; i++)
                fuzz_assert(r->fields[i].type == STATE_VALUE_INT || isfinite(r->fields[i].d));

        fuzz_assert(guest_state_to_json(r, &json) == 0);
        k = guest_state_from_json(json, strlen(json), &again, &reason);
        if (k < 0)
                fprintf(stderr, "saved record does not load back: %s\n%s", reason ? reason : "?", json);
        fuzz_assert(k == 0);
        fuzz_assert(same_record(r, &again));
}

/* The same bytes as the guest's file in a state directory of our own. */
static void load_from_disk(const uint8_t *data, size_t size) {
        _cleanup_free_ char *path = NULL;
        _cleanup_(closep) int fd = -1;
        GuestStateRecord r;
        int k;

        if (!state_dir) {
                char dir[] = "/tmp/rs-fuzz-state-XXXXXX";

                fuzz_assert(mkdtemp(dir));
                state_dir = strdup(dir);
                fuzz_assert(state_dir);
                atexit(remove_state_dir);
        }
        fuzz_assert(state_file_path(state_dir, GUEST_NAME, &path) == 0);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        fuzz_assert(fd >= 0);
        fuzz_assert(write(fd, data, size) == (ssize_t) size);

        k = state_file_load(state_dir, GUEST_NAME, &r);
        fuzz_assert(k == 0 || k == -EBADMSG || k == -EPROTONOSUPPORT || k == -EFBIG || k == -ENOMEM);
        if (k == 0) {
                fuzz_assert(strcmp(r.name, GUEST_NAME) == 0);
                check_record(&r);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        GuestStateRecord r;
        const char *reason = NULL;
        int k;

        log_set_max_level(LOG_CRIT);
        k = guest_state_from_json((const char *) data, size, &r, &reason);
        fuzz_assert(k == 0 || k == -EBADMSG || k == -EPROTONOSUPPORT || k == -ENOMEM);
        if (k == 0)
                check_record(&r);
        else if (k != -ENOMEM)
                fuzz_assert(reason && reason[0]);

        load_from_disk(data, size);
        return 0;
}
