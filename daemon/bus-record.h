/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An a{sv} record as a D-Bus reply is filled: one call a property, the first error sticks and
 * the calls after it do nothing; a property whose value is unknown is absent, never 0 or "".
 * Strings are made valid UTF-8 first: sd-bus refuses invalid UTF-8, and one such string (a guest
 * named by a socket file) would fail the whole reply, every guest's. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-bus.h>

typedef struct BusRecord {
        sd_bus_message *m;
        int r;
} BusRecord;

/* s as it may go on the bus: itself, or an escaped copy that *tmp owns. */
const char *bus_string(const char *s, char **tmp);

void bus_record_str(BusRecord *rec, const char *key, const char *value); /* NULL: absent */
void bus_record_u64(BusRecord *rec, const char *key, uint64_t value);    /* UINT64_MAX: absent */
void bus_record_i64(BusRecord *rec, const char *key, int64_t value);
void bus_record_double(BusRecord *rec, const char *key, double value);   /* not finite: absent */
void bus_record_bool(BusRecord *rec, const char *key, bool value);
