/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "common/number.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int parse_number_unit(const char *s, double *ret, const char **ret_unit) {
        char *end;
        double v;

        if (!s)
                return -EINVAL;
        while (*s == ' ' || *s == '\t')
                s++;
        if (!(*s >= '0' && *s <= '9'))
                return -EINVAL; /* no sign, no hex, no "inf"/"nan" */
        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || !isfinite(v))
                return -ERANGE;
        while (*end == ' ' || *end == '\t')
                end++;
        *ret = v;
        *ret_unit = end;
        return 0;
}

bool unit_is(const char *unit, const char *want) {
        size_t n = strlen(want);
        if (strncasecmp(unit, want, n) != 0)
                return false;
        for (unit += n; *unit; unit++)
                if (*unit != ' ' && *unit != '\t')
                        return false;
        return true;
}
