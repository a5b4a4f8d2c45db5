/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ctl/ctl-bus.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bus-api.h"
#include "common/macro.h"

/* Maps a failed call to a message and an exit code. */
int ctl_bus_report_error(const char *what, const sd_bus_error *error, int r) {
        if (sd_bus_error_has_names(error, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER) ||
            (!sd_bus_error_is_set(error) && (r == -ENOENT || r == -ECONNREFUSED || r == -ENOTCONN ||
                                            r == -ECONNRESET || r == -EHOSTDOWN))) {
                fprintf(stderr, "rightsizectl: rightsized is not running (no owner of %s on the bus)\n", RS_BUS_NAME);
                return EXIT_NO_DAEMON;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED)) {
                fprintf(stderr, "rightsizectl: %s: permission denied: polkit wants to authenticate you, and there is no "
                        "terminal to ask on (run it from one, with a polkit agent)%s%s\n", what,
                        error->message ? ": " : "", error->message ?: "");
                return EXIT_DENIED;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_ACCESS_DENIED) || r == -EACCES || r == -EPERM) {
                /* dbus-daemon's own refusal ("Rejected send message, 2 matched rules; ...") says
                 * nothing to whoever typed the command: it is the bus policy's read group they lack.
                 * rightsized's refusals (polkit) come with a message of their own. */
                if (error->message && strncmp(error->message, "Rejected send message", strlen("Rejected send message")) == 0) {
                        fprintf(stderr, "rightsizectl: %s: permission denied: reading rightsized takes root or membership of "
                                "the group \"%s\" (its D-Bus policy, %s.conf; read-group= in rightsized.conf)\n",
                                what, RS_READ_GROUP, RS_BUS_NAME);
                        return EXIT_DENIED;
                }
                fprintf(stderr, "rightsizectl: %s: permission denied%s%s\n", what,
                        error->message ? ": " : "", error->message ?: "");
                return EXIT_DENIED;
        }
        if (sd_bus_error_has_names(error, RS_BUS_ERROR_NO_SUCH_GUEST, RS_BUS_ERROR_NO_SUCH_DOMAIN)) {
                fprintf(stderr, "rightsizectl: %s\n", error->message ?: "no such guest");
                return EXIT_NO_GUEST;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_INVALID_ARGS)) {
                fprintf(stderr, "rightsizectl: %s: invalid argument: %s\n", what, error->message ?: "");
                return EXIT_USAGE;
        }
        if (sd_bus_error_has_name(error, RS_BUS_ERROR_RELOAD_FAILED)) {
                fprintf(stderr, "rightsizectl: reload failed, the old configuration stays: %s\n",
                        error->message ?: "");
                return EXIT_FAIL;
        }
        if (sd_bus_error_is_set(error))
                fprintf(stderr, "rightsizectl: %s: %s\n", what, error->message ?: error->name);
        else
                fprintf(stderr, "rightsizectl: %s: %s\n", what, strerror(-r));
        return EXIT_FAIL;
}

int ctl_bus_connect(sd_bus **ret) {
        int r = sd_bus_open_system(ret);
        if (r < 0) {
                if (r == -EACCES || r == -EPERM) {
                        fprintf(stderr, "rightsizectl: cannot connect to the system bus: permission denied\n");
                        return EXIT_DENIED;
                }
                fprintf(stderr, "rightsizectl: cannot connect to the system bus (%s): rightsized is not running\n",
                        strerror(-r));
                return EXIT_NO_DAEMON;
        }
        /* A human at a terminal may be asked for a password by a polkit agent when rightsized checks
         * a change (not root): allow that, and give them time to type it. Scripts (no terminal) get
         * a plain yes or no at once. */
        if (isatty(STDIN_FILENO)) {
                (void) sd_bus_set_allow_interactive_authorization(*ret, true);
                (void) sd_bus_set_method_call_timeout(*ret, CTL_INTERACTIVE_CALL_TIMEOUT_USEC);
        }
        return EXIT_OK;
}

int ctl_bus_call(sd_bus *bus, const char *what, const char *method, sd_bus_message **reply, const char *types, ...) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, method);
        if (r >= 0 && types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
        }
        if (r < 0) {
                fprintf(stderr, "rightsizectl: %s: %s\n", what, strerror(-r));
                return EXIT_FAIL;
        }
        r = sd_bus_call(bus, m, 0, &error, reply);
        if (r < 0) {
                int code = ctl_bus_report_error(what, &error, r);
                sd_bus_error_free(&error);
                return code;
        }
        return EXIT_OK;
}

int ctl_bus_bad_reply(const char *what, int r) {
        fprintf(stderr, "rightsizectl: %s: unexpected reply from rightsized: %s\n", what, strerror(-r));
        return EXIT_FAIL;
}

/* Reads the variant of a field whose type matched into the record. */
static int read_field(sd_bus_message *m, void *record, const CtlField *f, const char *contents) {
        int r = sd_bus_message_enter_container(m, 'v', contents);
        if (r < 0)
                return r;
        switch (ctl_field_dbus_type(f)) {
        case 's': {
                const char *s;
                if ((r = sd_bus_message_read(m, "s", &s)) >= 0)
                        r = ctl_field_set_string(record, f, s);
                break;
        }
        case 't': {
                uint64_t t;
                if ((r = sd_bus_message_read(m, "t", &t)) >= 0)
                        ctl_field_set_u64(record, f, t);
                break;
        }
        case 'd': {
                double d;
                if ((r = sd_bus_message_read(m, "d", &d)) >= 0)
                        ctl_field_set_double(record, f, d);
                break;
        }
        case 'b': {
                int b;
                if ((r = sd_bus_message_read(m, "b", &b)) >= 0)
                        ctl_field_set_bool(record, f, b);
                break;
        }
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

int ctl_bus_read_record(sd_bus_message *m, void *record, const CtlField *fields, size_t n_fields,
                        CtlRecordExtraFn extra) {
        int r = sd_bus_message_enter_container(m, 'a', "{sv}");
        if (r <= 0)
                return r < 0 ? r : -EBADMSG;
        while ((r = sd_bus_message_enter_container(m, 'e', "sv")) > 0) {
                const char *key, *contents;
                char type;

                if ((r = sd_bus_message_read(m, "s", &key)) < 0 || (r = sd_bus_message_peek_type(m, &type, &contents)) < 0)
                        return r;
                const CtlField *f = ctl_fields_find(fields, n_fields, key);
                char want[2] = { f ? ctl_field_dbus_type(f) : 0, 0 };
                if (f && contents && strcmp(contents, want) == 0)
                        r = read_field(m, record, f, contents);
                else {
                        r = !f && extra && contents ? extra(m, record, key, contents) : 0;
                        if (r == 0)
                                r = sd_bus_message_skip(m, "v");
                }
                if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(m);
}

/* Reads an aa{sv} (the message at it) into a growing array of records of `size` bytes, each set to
 * unknown first (init) and read by its table; the array and its count are the caller's to free
 * (also when this fails half-way: the records read so far are in it). */
static int read_record_array(sd_bus_message *m, void **array, size_t *n, size_t size, void (*init)(void *record),
                             const CtlField *fields, size_t n_fields, CtlRecordExtraFn extra) {
        int r = sd_bus_message_enter_container(m, 'a', "a{sv}");
        while (r >= 0 && (r = sd_bus_message_at_end(m, false)) == 0) {
                char *grown = realloc(*array, (*n + 1) * size);
                if (!grown)
                        return -ENOMEM;
                *array = grown;
                init(grown + *n * size);
                (*n)++;
                r = ctl_bus_read_record(m, grown + (*n - 1) * size, fields, n_fields, extra);
        }
        return r < 0 ? r : sd_bus_message_exit_container(m);
}

static void guest_init(void *record) {
        ctl_guest_init(record);
}

static void memory_init(void *record) {
        ctl_memory_init(record);
}

static void recommendation_init(void *record) {
        ctl_recommendation_init(record);
}

int ctl_bus_read_guest(sd_bus_message *m, CtlGuest *g) {
        return ctl_bus_read_record(m, g, ctl_guest_fields, ctl_n_guest_fields, NULL);
}

/* GetMemoryReport's `why` (as): the one key that is not a field. */
static int read_memory_why(sd_bus_message *m, void *record, const char *key, const char *contents) {
        const char *s;
        int r;

        if (strcmp(key, "why") != 0 || strcmp(contents, "as") != 0)
                return 0;
        r = sd_bus_message_enter_container(m, 'v', "as");
        if (r >= 0)
                r = sd_bus_message_enter_container(m, 'a', "s");
        while (r >= 0 && (r = sd_bus_message_read(m, "s", &s)) > 0)
                r = ctl_memory_add_why(record, s);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        if (r >= 0)
                r = sd_bus_message_exit_container(m);
        return r < 0 ? r : 1;
}

static int read_memory(sd_bus_message *m, CtlMemory *mem) {
        return ctl_bus_read_record(m, mem, ctl_memory_fields, ctl_n_memory_fields, read_memory_why);
}

void ctl_guest_list_done(CtlGuestList *l) {
        for (size_t i = 0; i < l->n; i++)
                ctl_guest_done(&l->guests[i]);
        free(l->guests);
        l->guests = NULL;
        l->n = 0;
}

static int compare_guests_by_name(const void *a, const void *b) {
        const CtlGuest *x = a, *y = b;
        return strcmp(x->name ?: "", y->name ?: "");
}

int ctl_fetch_guests(sd_bus *bus, CtlGuestList *ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int code, r;

        code = ctl_bus_call(bus, "list guests", "ListGuests", &reply, NULL);
        if (code != EXIT_OK)
                return code;
        r = read_record_array(reply, (void **) &ret->guests, &ret->n, sizeof(CtlGuest), guest_init, ctl_guest_fields,
                              ctl_n_guest_fields, NULL);
        if (r < 0)
                return ctl_bus_bad_reply("list guests", r);
        /* The daemon answers in its own order (discovery's); a person scans a list by name. */
        if (ret->n > 1)
                qsort(ret->guests, ret->n, sizeof(CtlGuest), compare_guests_by_name);
        return EXIT_OK;
}

int ctl_fetch_guest(sd_bus *bus, const char *name, CtlGuest *g) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int code, r;

        code = ctl_bus_call(bus, "get guest", "GetGuest", &reply, "s", name);
        if (code != EXIT_OK)
                return code;
        r = ctl_bus_read_guest(reply, g);
        if (r < 0)
                return ctl_bus_bad_reply("get guest", r);
        return EXIT_OK;
}

int ctl_fetch_history(sd_bus *bus, const char *name, CtlHistoryPoint **ret, size_t *ret_n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ CtlHistoryPoint *h = NULL;
        size_t n = 0;
        int code, r;

        code = ctl_bus_call(bus, "get history", "GetHistory", &reply, "s", name);
        if (code != EXIT_OK)
                return code;
        r = sd_bus_message_enter_container(reply, 'a', "(tttt)");
        if (r < 0)
                return ctl_bus_bad_reply("get history", r);
        for (;;) {
                CtlHistoryPoint p;
                r = sd_bus_message_read(reply, "(tttt)", &p.usec, &p.target, &p.actual, &p.estimate);
                if (r < 0)
                        return ctl_bus_bad_reply("get history", r);
                if (r == 0)
                        break;
                CtlHistoryPoint *nh = realloc(h, (n + 1) * sizeof(*h));
                if (!nh)
                        return ctl_bus_bad_reply("get history", -ENOMEM);
                h = nh;
                h[n++] = p;
        }
        *ret = TAKE_PTR(h);
        *ret_n = n;
        return EXIT_OK;
}

void ctl_memory_report_done(CtlMemoryReport *mr) {
        ctl_memory_done(&mr->host);
        for (size_t i = 0; i < mr->n; i++)
                ctl_memory_done(&mr->guests[i]);
        free(mr->guests);
}

/* GetMemoryReport. EXIT_OK with *have false from a daemon older than the method: the rest of
 * the report stands without it. */
int ctl_fetch_memory(sd_bus *bus, CtlMemoryReport *mr, bool *have) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        *have = false;
        ctl_memory_init(&mr->host);
        r = sd_bus_call_method(bus, RS_BUS_NAME, RS_BUS_PATH, RS_BUS_INTERFACE, "GetMemoryReport", &error, &reply, "");
        if (r < 0) {
                bool old = sd_bus_error_has_name(&error, SD_BUS_ERROR_UNKNOWN_METHOD);
                int code = old ? EXIT_OK : ctl_bus_report_error("memory report", &error, r);
                sd_bus_error_free(&error);
                return code;
        }
        r = read_memory(reply, &mr->host);
        if (r >= 0)
                r = read_record_array(reply, (void **) &mr->guests, &mr->n, sizeof(CtlMemory), memory_init,
                                      ctl_memory_fields, ctl_n_memory_fields, read_memory_why);
        if (r < 0)
                return ctl_bus_bad_reply("memory report", r);
        *have = true;
        return EXIT_OK;
}


static int compare_recommendations_by_name(const void *a, const void *b) {
        const CtlRecommendation *x = a, *y = b;
        return strcmp(x->name ?: "", y->name ?: "");
}

void ctl_recommendation_list_done(CtlRecommendationList *l) {
        for (size_t i = 0; i < l->n; i++)
                ctl_recommendation_done(&l->recs[i]);
        free(l->recs);
        l->recs = NULL;
        l->n = 0;
}

int ctl_fetch_recommendations(sd_bus *bus, const char *guest, CtlRecommendationList *l) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        int r, code = ctl_bus_call(bus, "recommend", "GetRecommendation", &reply, "s", guest ?: "");

        if (code != EXIT_OK)
                return code;
        r = read_record_array(reply, (void **) &l->recs, &l->n, sizeof(CtlRecommendation), recommendation_init,
                              ctl_recommendation_fields, ctl_n_recommendation_fields, NULL);
        if (r < 0)
                return ctl_bus_bad_reply("recommend", r);
        /* By name, as list has them. */
        if (l->n > 1)
                qsort(l->recs, l->n, sizeof(CtlRecommendation), compare_recommendations_by_name);
        return EXIT_OK;
}
