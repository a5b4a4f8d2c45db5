/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The built-in presets are the shipped preset files, compiled in as text (policies/presets.inc,
 * made from etc/policies/NAME.conf by the build) and read by the same parser as any policy file:
 * a preset cannot differ from its file, because there is only the file. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "policies/policy-file.h"
#include "policies/policy.h"

static const struct {
        const char *name;
        const char *text;
} presets[] = {
#include "policies/presets.inc"
};

const char *const rs_policy_preset_names[4] = { "conservative", "balanced", "aggressive", "observe-only" };

int rs_policy_preset(const char *name, RsPolicy *ret) {
        RsPolicyError e;
        RsPolicy p;

        if (!name)
                return -ENOENT;
        for (size_t i = 0; i < ARRAY_SIZE(presets); i++) {
                if (strcmp(name, presets[i].name) != 0)
                        continue;
                /* The file's own name makes the policy's; a shipped file parses (test-policy). */
                if (rs_policy_parse_string(presets[i].text, presets[i].name, &p, &e) < 0)
                        return -EINVAL;
                snprintf(p.name, sizeof(p.name), "%s", name);
                *ret = p;
                return 0;
        }
        return -ENOENT;
}
