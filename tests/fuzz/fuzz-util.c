/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/fuzz/fuzz.h"

void fuzz_event_drain(sd_event *e) {
        /* Bounded: a client that keeps itself busy forever is a bug worth an abort. */
        for (unsigned i = 0; i < 100000; i++) {
                int r = sd_event_run(e, 0);

                fuzz_assert(r >= 0);
                if (r == 0)
                        return;
        }
        fuzz_assert(!"the event loop never went idle");
}

void fuzz_write_chunks(sd_event *e, int fd, const void *data, size_t size, size_t piece) {
        const uint8_t *p = data;

        if (piece == 0)
                piece = 64 * KIB;
        while (size > 0) {
                size_t n = MIN(size, piece);
                ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (k < 0 && (errno == EINTR || errno == EAGAIN)) {
                        /* The reader has not caught up yet. */
                        fuzz_event_drain(e);
                        continue;
                }
                /* The peer closed (the client gave up on garbage): the rest goes nowhere. */
                if (k < 0)
                        return;
                p += k;
                size -= (size_t) k;
                fuzz_event_drain(e);
        }
}

char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        fuzz_assert(s);
        if (size > 0)
                memcpy(s, data, size);
        s[size] = '\0';
        return s;
}

bool fuzz_next_record(const uint8_t **data, size_t *size, const uint8_t **ret, size_t *ret_len) {
        const uint8_t *nul;

        if (*size == 0)
                return false;
        nul = memchr(*data, '\0', *size);
        *ret = *data;
        *ret_len = nul ? (size_t) (nul - *data) : *size;
        *data += *ret_len + (nul ? 1 : 0);
        *size -= *ret_len + (nul ? 1 : 0);
        return true;
}
