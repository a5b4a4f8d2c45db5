/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Defensive accessors for untrusted JSON: every getter checks the type and reports
 * -ENOENT for a missing member and -EBADMSG for a wrong-typed one, never guessing. */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

/* Reads an integer that must be non-negative. json-c keeps values above INT64_MAX as
 * uint64, so both representations are accepted. Doubles, strings, negatives: -EBADMSG. */
int json_value_get_u64(json_object *v, uint64_t *ret);

/* Like json_value_get_u64(), but -1 (as int64, or 2^64-1 as uint64) yields UINT64_MAX:
 * QEMU uses both spellings for "not available". Other negatives are -EBADMSG. */
int json_value_get_u64_or_unset(json_object *v, uint64_t *ret);

int json_value_get_i64(json_object *v, int64_t *ret);

/* Member getters: -ENOENT when the member is missing (or obj is not an object),
 * -EBADMSG when it has the wrong type. Strings are borrowed from obj. */
int json_member_get_u64(json_object *obj, const char *key, uint64_t *ret);
int json_member_get_i64(json_object *obj, const char *key, int64_t *ret);
int json_member_get_bool(json_object *obj, const char *key, bool *ret);
int json_member_get_string(json_object *obj, const char *key, const char **ret);
int json_member_get_object(json_object *obj, const char *key, json_object **ret);

/* Optional members: a missing member leaves *ret untouched and returns 0. */
int json_member_get_string_optional(json_object *obj, const char *key, const char **ret);
int json_member_get_u64_optional(json_object *obj, const char *key, uint64_t *ret);
int json_member_get_i64_optional(json_object *obj, const char *key, int64_t *ret);

static inline void json_object_putp(json_object **o) {
        if (*o)
                json_object_put(*o);
}

/* Replaces *dst with a copy of src (NULL allowed). */
int strdup_replace(char **dst, const char *src);
