/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* "<number>[ ][unit]" as durations and percentages are written. */
#pragma once

#include <stdbool.h>

/* A non-negative decimal number with an optional fraction (no sign, hex, exponent-only text,
 * "inf" or "nan"), leading blanks allowed; *ret_unit points past the blanks after it. Returns
 * 0, -EINVAL, or -ERANGE for a number too large for a double. */
int parse_number_unit(const char *s, double *ret, const char **ret_unit);

/* The unit text is `want` (any case), with nothing but blanks after it. */
bool unit_is(const char *unit, const char *want);
