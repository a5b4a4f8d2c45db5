/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The one boolean parser: rightsized.conf and the policy files read yes/no alike. */
#pragma once

#include <stdbool.h>

/* "yes", "true", "on", "1" and "no", "false", "off", "0", in any case. Returns 0 or -EINVAL
 * (*ret untouched). */
int parse_boolean(const char *s, bool *ret);
