/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* `rightsizectl --json show` for the simulated-guest tests, and readers of its fields that say
 * "absent" instead of failing: a test asserts on what it reads. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "tests/lib/daemon-fixture.h"

/* The simulated guest `index`'s `rightsizectl --json show`, parsed (put it); the command must
 * succeed and print JSON. */
json_object *ctl_show_sim(const DaemonFixture *d, unsigned index);
/* A string field, "" when absent or not a string. */
const char *ctl_json_str(json_object *o, const char *key);
/* An unsigned field, UINT64_MAX when absent or not one. */
uint64_t ctl_json_u64(json_object *o, const char *key);
/* Whether a boolean field is there and true. */
bool ctl_json_true(json_object *o, const char *key);
