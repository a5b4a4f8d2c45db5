/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "common/boolean.h"

#include <errno.h>
#include <strings.h>

#include "common/macro.h"

int parse_boolean(const char *s, bool *ret) {
        static const char *const yes[] = { "yes", "true", "on", "1" }, *const no[] = { "no", "false", "off", "0" };

        if (!s || !ret)
                return -EINVAL;
        for (size_t i = 0; i < ARRAY_SIZE(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}
