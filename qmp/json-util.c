/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "qmp/json-util.h"

int json_value_get_u64(json_object *v, uint64_t *ret) {
        int64_t s;

        if (!v || !json_object_is_type(v, json_type_int))
                return -EBADMSG;

        /* json-c clamps uint64 values to INT64_MAX in get_int64 and negatives to 0 in
         * get_uint64, so the sign decides which getter tells the truth. */
        s = json_object_get_int64(v);
        if (s < 0)
                return -EBADMSG;
        *ret = json_object_get_uint64(v);
        return 0;
}

int json_value_get_u64_or_unset(json_object *v, uint64_t *ret) {
        if (v && json_object_is_type(v, json_type_int) && json_object_get_int64(v) == -1) {
                *ret = UINT64_MAX;
                return 0;
        }
        return json_value_get_u64(v, ret);
}

int json_value_get_i64(json_object *v, int64_t *ret) {
        if (!v || !json_object_is_type(v, json_type_int))
                return -EBADMSG;
        /* A value above INT64_MAX does not fit: refuse rather than clamp. */
        if (json_object_get_int64(v) == INT64_MAX && json_object_get_uint64(v) != (uint64_t) INT64_MAX)
                return -EBADMSG;
        *ret = json_object_get_int64(v);
        return 0;
}

static int member(json_object *obj, const char *key, json_object **ret) {
        if (!obj || !json_object_is_type(obj, json_type_object))
                return -ENOENT;
        if (!json_object_object_get_ex(obj, key, ret))
                return -ENOENT;
        return 0;
}

int json_member_get_u64(json_object *obj, const char *key, uint64_t *ret) {
        json_object *v;
        int r = member(obj, key, &v);

        return r < 0 ? r : json_value_get_u64(v, ret);
}

int json_member_get_i64(json_object *obj, const char *key, int64_t *ret) {
        json_object *v;
        int r = member(obj, key, &v);

        return r < 0 ? r : json_value_get_i64(v, ret);
}

int json_member_get_bool(json_object *obj, const char *key, bool *ret) {
        json_object *v;
        int r = member(obj, key, &v);

        if (r < 0)
                return r;
        if (!v || !json_object_is_type(v, json_type_boolean))
                return -EBADMSG;
        *ret = json_object_get_boolean(v);
        return 0;
}

int json_member_get_string(json_object *obj, const char *key, const char **ret) {
        json_object *v;
        int r = member(obj, key, &v);

        if (r < 0)
                return r;
        if (!v || !json_object_is_type(v, json_type_string))
                return -EBADMSG;
        *ret = json_object_get_string(v);
        return 0;
}

int json_member_get_object(json_object *obj, const char *key, json_object **ret) {
        json_object *v;
        int r = member(obj, key, &v);

        if (r < 0)
                return r;
        if (!v || !json_object_is_type(v, json_type_object))
                return -EBADMSG;
        *ret = v;
        return 0;
}

int json_member_get_string_optional(json_object *obj, const char *key, const char **ret) {
        int r = json_member_get_string(obj, key, ret);

        return r == -ENOENT ? 0 : r;
}

int json_member_get_u64_optional(json_object *obj, const char *key, uint64_t *ret) {
        int r = json_member_get_u64(obj, key, ret);

        return r == -ENOENT ? 0 : r;
}

int json_member_get_i64_optional(json_object *obj, const char *key, int64_t *ret) {
        int r = json_member_get_i64(obj, key, ret);

        return r == -ENOENT ? 0 : r;
}

int strdup_replace(char **dst, const char *src) {
        char *copy = NULL;

        if (src) {
                copy = strdup(src);
                if (!copy)
                        return -ENOMEM;
        }
        free(*dst);
        *dst = copy;
        return 0;
}
