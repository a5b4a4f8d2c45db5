/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* UTF-8 for strings that leave the daemon. sd-bus refuses a string that is not valid UTF-8, and
 * one such string fails the whole message: a guest's text cut in the middle of a character, or
 * a socket file name in another encoding, would fail ListGuests for every guest. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "common/macro.h"

/* The RFC 3629 rules: no overlong forms, no surrogates, nothing past U+10FFFF. */
bool utf8_is_valid(const char *s);

/* A copy of s with every byte that does not begin a valid character replaced by U+FFFD, as
 * systemd's utf8_escape_invalid() does. NULL when out of memory. */
char *utf8_escape_invalid(const char *s);

/* Shortens s so that it does not end in the first bytes of a character whose rest is missing,
 * which is what a cut at a byte count leaves. */
void utf8_drop_incomplete_tail(char *s);

/* snprintf() that cuts, when the text does not fit, after the last whole character. */
int utf8_snprintf(char *buf, size_t size, const char *format, ...) _printf_(3, 4);
