/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdbool.h>

#include "qmp/base64.h"

static int sextet(char c) {
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int base64_decode(const char *in, size_t size, uint8_t *out, size_t out_size, size_t *ret_size) {
        size_t n = 0;

        if (size % 4 != 0)
                return -EBADMSG;

        for (size_t i = 0; i < size; i += 4) {
                bool last = i + 4 == size;
                int s[4];
                size_t bytes = 3;

                for (size_t k = 0; k < 4; k++) {
                        if (in[i + k] == '=' && last && k >= 2) {
                                s[k] = 0;
                                continue;
                        }
                        s[k] = sextet(in[i + k]);
                        if (s[k] < 0)
                                return -EBADMSG;
                }
                if (last && in[i + 2] == '=') {
                        if (in[i + 3] != '=')
                                return -EBADMSG;
                        bytes = 1;
                } else if (last && in[i + 3] == '=')
                        bytes = 2;

                if (n + bytes > out_size)
                        return -ENOBUFS;
                out[n++] = (uint8_t) (s[0] << 2 | s[1] >> 4);
                if (bytes > 1)
                        out[n++] = (uint8_t) ((s[1] & 0xF) << 4 | s[2] >> 2);
                if (bytes > 2)
                        out[n++] = (uint8_t) ((s[2] & 0x3) << 6 | s[3]);
        }
        *ret_size = n;
        return 0;
}
