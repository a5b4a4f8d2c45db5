/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Durations as people write them ("10s", "1500ms", "2min", "1.5h", "30"). */
#pragma once

#include <stdint.h>

/* The one duration parser of rightsize (the config, the policy files). Accepts
 * "<number>[.<fraction>][ ][unit]" with unit us, ms, s or sec, m or min, h or hour, d, day or
 * days (any case);
 * a plain number is seconds. Returns 0 and microseconds, -EINVAL for text that is not a
 * duration, or -ERANGE when it is too large (10^18 us). */
int parse_duration(const char *s, uint64_t *ret_usec);
