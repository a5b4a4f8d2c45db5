/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "common/utf8.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPLACEMENT_CHARACTER "\xef\xbf\xbd"

static bool is_continuation(unsigned char c) {
        return (c & 0xC0) == 0x80;
}

/* The length of the valid character at s, 0 when none begins there (or s is at its end). A
 * NUL fails every continuation test, so nothing past the terminator is read. */
static size_t valid_char_length(const unsigned char *s) {
        unsigned char c = s[0], lo = 0x80, hi = 0xBF;

        if (c == 0)
                return 0;
        if (c < 0x80)
                return 1;
        if (c >= 0xC2 && c <= 0xDF)
                return is_continuation(s[1]) ? 2 : 0;
        if (c >= 0xE0 && c <= 0xEF) {
                if (c == 0xE0)
                        lo = 0xA0; /* shorter forms are overlong */
                else if (c == 0xED)
                        hi = 0x9F; /* U+D800..U+DFFF are surrogates */
                return s[1] >= lo && s[1] <= hi && is_continuation(s[2]) ? 3 : 0;
        }
        if (c >= 0xF0 && c <= 0xF4) {
                if (c == 0xF0)
                        lo = 0x90;
                else if (c == 0xF4)
                        hi = 0x8F; /* nothing past U+10FFFF */
                return s[1] >= lo && s[1] <= hi && is_continuation(s[2]) && is_continuation(s[3]) ? 4 : 0;
        }
        return 0;
}

bool utf8_is_valid(const char *s) {
        const unsigned char *p = (const unsigned char *) s;

        while (*p) {
                size_t n = valid_char_length(p);

                if (n == 0)
                        return false;
                p += n;
        }
        return true;
}

char *utf8_escape_invalid(const char *s) {
        const unsigned char *p = (const unsigned char *) s;
        char *out = malloc(strlen(s) * 3 + 1), *w = out;

        if (!out)
                return NULL;
        while (*p) {
                size_t n = valid_char_length(p);

                if (n > 0) {
                        memcpy(w, p, n);
                        w += n;
                        p += n;
                } else {
                        memcpy(w, REPLACEMENT_CHARACTER, 3);
                        w += 3;
                        p++;
                }
        }
        *w = '\0';
        return out;
}

void utf8_drop_incomplete_tail(char *s) {
        size_t len = strlen(s);

        for (size_t k = 1; k <= 3 && k <= len; k++) {
                unsigned char c = (unsigned char) s[len - k];
                size_t need;

                if (is_continuation(c))
                        continue; /* its lead byte is further back */
                need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
                if (need > k)
                        s[len - k] = '\0';
                return;
        }
}

int utf8_snprintf(char *buf, size_t size, const char *format, ...) {
        va_list ap;
        int n;

        va_start(ap, format);
        n = vsnprintf(buf, size, format, ap);
        va_end(ap);
        if (n >= 0 && size > 0 && (size_t) n >= size)
                utf8_drop_incomplete_tail(buf);
        return n;
}
