/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/bus-record.h"

#include <errno.h>
#include <math.h>

#include "common/macro.h"
#include "common/utf8.h"

const char *bus_string(const char *s, char **tmp) {
        if (!s || utf8_is_valid(s))
                return s;
        *tmp = utf8_escape_invalid(s);
        return *tmp;
}

void bus_record_str(BusRecord *rec, const char *key, const char *value) {
        _cleanup_free_ char *tmp = NULL;
        const char *valid = bus_string(value, &tmp);

        if (rec->r >= 0 && value)
                rec->r = valid ? sd_bus_message_append(rec->m, "{sv}", key, "s", valid) : -ENOMEM;
}

void bus_record_u64(BusRecord *rec, const char *key, uint64_t value) {
        if (rec->r >= 0 && value != UINT64_MAX)
                rec->r = sd_bus_message_append(rec->m, "{sv}", key, "t", value);
}

void bus_record_i64(BusRecord *rec, const char *key, int64_t value) {
        if (rec->r >= 0)
                rec->r = sd_bus_message_append(rec->m, "{sv}", key, "x", value);
}

void bus_record_double(BusRecord *rec, const char *key, double value) {
        if (rec->r >= 0 && isfinite(value))
                rec->r = sd_bus_message_append(rec->m, "{sv}", key, "d", value);
}

void bus_record_bool(BusRecord *rec, const char *key, bool value) {
        if (rec->r >= 0)
                rec->r = sd_bus_message_append(rec->m, "{sv}", key, "b", (int) value);
}
