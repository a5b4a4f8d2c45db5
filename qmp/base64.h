/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Strict RFC 4648 base64 decoding for guest agent "buf-b64" payloads. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Upper bound of the decoded size of size input characters. */
static inline size_t base64_decoded_size_max(size_t size) {
        return size / 4 * 3 + 3;
}

/* Decodes size characters into out (out_size bytes). Padding is required; whitespace and
 * characters outside the alphabet are -EBADMSG; a too small out is -ENOBUFS. */
int base64_decode(const char *in, size_t size, uint8_t *out, size_t out_size, size_t *ret_size);
