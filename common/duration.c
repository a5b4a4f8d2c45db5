/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "common/duration.h"

#include <errno.h>

#include "common/macro.h"
#include "common/number.h"

int parse_duration(const char *s, uint64_t *ret_usec) {
        static const struct {
                const char *suffix;
                double usec;
        } units[] = {
                { "", 1e6 },   { "s", 1e6 },    { "sec", 1e6 }, { "us", 1 },       { "ms", 1e3 },
                { "m", 60e6 }, { "min", 60e6 }, { "h", 3600e6 }, { "hour", 3600e6 },
                { "d", 86400e6 }, { "day", 86400e6 }, { "days", 86400e6 },
        };
        const char *unit;
        double v;
        int r;

        if (!ret_usec)
                return -EINVAL;
        r = parse_number_unit(s, &v, &unit);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ARRAY_SIZE(units); i++)
                if (unit_is(unit, units[i].suffix)) {
                        double usec = v * units[i].usec;
                        if (usec >= 1e18)
                                return -ERANGE;
                        *ret_usec = (uint64_t) usec;
                        return 0;
                }
        return -EINVAL;
}
