/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl's side of the bus: connecting, calling a method of org.rightsize.Manager1 with
 * its failure mapped to a message and an exit status, and reading the daemon's records (a{sv}
 * dictionaries described by a CtlField table) into rightsizectl's structs. Every command file
 * reads the daemon through these, so a reply is parsed one way only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-bus.h>

#include "ctl/ctl-format.h"
#include "ctl/ctl-memory.h"
#include "ctl/ctl-recommend.h"

/* As long as rightsized lets polkit wait for an agent's answer (daemon/bus-polkit.c). */
#define CTL_INTERACTIVE_CALL_TIMEOUT_USEC (120ULL * 1000000ULL)

/* The system bus (or $DBUS_SYSTEM_BUS_ADDRESS); interactive authorization allowed when stdin is a
 * terminal. An exit status. */
int ctl_bus_connect(sd_bus **ret);
/* Maps a failed call to a message on stderr and an exit status (EXIT_NO_DAEMON, EXIT_DENIED, ...). */
int ctl_bus_report_error(const char *what, const sd_bus_error *error, int r);
/* "unexpected reply from rightsized", EXIT_FAIL. */
int ctl_bus_bad_reply(const char *what, int r);
/* Calls method with the arguments of `types` (NULL: none); reply may be NULL. An exit status. */
int ctl_bus_call(sd_bus *bus, const char *what, const char *method, sd_bus_message **reply, const char *types, ...);

/* A key a field table does not have, offered before it is skipped: returns 1 when it read the
 * variant (the message is past it), 0 to skip it, or -errno. */
typedef int (*CtlRecordExtraFn)(sd_bus_message *m, void *record, const char *key, const char *contents);
/* Reads one a{sv} into record by its field table: values of unknown keys, and of the wrong type,
 * are skipped (a newer daemon's). */
int ctl_bus_read_record(sd_bus_message *m, void *record, const CtlField *fields, size_t n_fields,
                        CtlRecordExtraFn extra);

/* One guest record (GetGuest's reply, a ListGuests element). */
int ctl_bus_read_guest(sd_bus_message *m, CtlGuest *g);

typedef struct CtlGuestList {
        CtlGuest *guests;
        size_t n;
} CtlGuestList;
void ctl_guest_list_done(CtlGuestList *l);

/* ListGuests, sorted by name. */
int ctl_fetch_guests(sd_bus *bus, CtlGuestList *ret);
/* GetGuest. */
int ctl_fetch_guest(sd_bus *bus, const char *name, CtlGuest *g);
/* GetHistory, oldest first. */
int ctl_fetch_history(sd_bus *bus, const char *name, CtlHistoryPoint **ret, size_t *ret_n);

typedef struct CtlMemoryReport {
        CtlMemory host;
        CtlMemory *guests;
        size_t n;
} CtlMemoryReport;
void ctl_memory_report_done(CtlMemoryReport *mr);
/* GetMemoryReport. EXIT_OK with *have false from a daemon older than the method. */
int ctl_fetch_memory(sd_bus *bus, CtlMemoryReport *mr, bool *have);

typedef struct CtlRecommendationList {
        CtlRecommendation *recs;
        size_t n;
} CtlRecommendationList;
void ctl_recommendation_list_done(CtlRecommendationList *l);
/* GetRecommendation for one guest, or every guest (NULL). */
int ctl_fetch_recommendations(sd_bus *bus, const char *guest, CtlRecommendationList *l);
