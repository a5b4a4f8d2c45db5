/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/bus-polkit.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-event.h>
#include <time.h>

#include "common/bus-api.h"
#include "common/macro.h"
#include "daemon/log.h"

#define POLKIT_FLAG_ALLOW_USER_INTERACTION 1U

/* A human typing a password in an agent's dialog gets this long; a plain check the bus default
 * (25 s). */
#define POLKIT_INTERACTIVE_TIMEOUT_USEC (120ULL * 1000000ULL)

typedef struct PolkitQuery PolkitQuery;

/* A user's checks in the current window. */
typedef struct PolkitUserWindow {
        uid_t uid;
        uint64_t start;           /* CLOCK_MONOTONIC µs; 0: the slot is free */
        unsigned started;
} PolkitUserWindow;

/* Users followed at once: past that, the oldest window is forgotten (its user starts afresh). */
#define POLKIT_USERS_TRACKED 64

struct PolkitQuery {
        BusPolkitRegistry *registry;
        PolkitQuery *prev, *next;
        uid_t uid;                /* whose budget it counts against (sender_identify()) */

        sd_bus_message *request;  /* the caller's method call, held until the verdict is used */
        char *action;
        sd_bus_slot *slot;        /* CheckAuthorization in flight; NULL once polkit answered */
        sd_event_source *cleanup; /* frees an answered query the handler never came back for */

        int verdict;              /* once answered: 1, or -errno with error set */
        sd_bus_error error;
};

struct BusPolkitRegistry {
        PolkitQuery *queries;
        unsigned n_queries;
        PolkitUserWindow users[POLKIT_USERS_TRACKED];
};

static uint64_t now_monotonic_usec(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000ULL + (uint64_t) ts.tv_nsec / 1000ULL;
}

/* Whether uid may start one more query now; counts it when it may. */
static bool user_may_start(BusPolkitRegistry *registry, uid_t uid) {
        uint64_t now = now_monotonic_usec() + 1; /* never 0, the free slot's mark */
        PolkitUserWindow *w = NULL, *oldest = &registry->users[0];
        unsigned waiting = 0;

        for (PolkitQuery *q = registry->queries; q; q = q->next)
                waiting += q->slot && q->uid == uid;
        if (waiting >= BUS_POLKIT_USER_QUERIES_MAX)
                return false;

        for (size_t i = 0; i < POLKIT_USERS_TRACKED && !w; i++) {
                PolkitUserWindow *u = &registry->users[i];
                if (u->start != 0 && u->uid == uid)
                        w = u;
                else if (u->start < oldest->start)
                        oldest = u;
        }
        if (!w) {
                w = oldest;
                *w = (PolkitUserWindow) { .uid = uid, .start = now };
        }
        if (now >= w->start + BUS_POLKIT_USER_INTERVAL_USEC) {
                w->start = now;
                w->started = 0;
        }
        if (w->started >= BUS_POLKIT_USER_BURST)
                return false;
        w->started++;
        return true;
}

static PolkitQuery *polkit_query_free(PolkitQuery *q) {
        if (!q)
                return NULL;
        if (q->registry) {
                if (q->prev)
                        q->prev->next = q->next;
                else
                        q->registry->queries = q->next;
                if (q->next)
                        q->next->prev = q->prev;
                q->registry->n_queries--;
        }
        /* Dropping the slot cancels a call still in flight: its reply, if it comes, is ignored. */
        sd_bus_slot_unref(q->slot);
        sd_event_source_disable_unref(q->cleanup);
        sd_bus_message_unref(q->request);
        sd_bus_error_free(&q->error);
        free(q->action);
        free(q);
        return NULL;
}

static PolkitQuery *registry_find(BusPolkitRegistry *registry, sd_bus_message *call) {
        for (PolkitQuery *q = registry->queries; q; q = q->next)
                if (q->request == call)
                        return q;
        return NULL;
}

int bus_polkit_registry_new(BusPolkitRegistry **ret) {
        BusPolkitRegistry *registry = calloc(1, sizeof(*registry));
        if (!registry)
                return -ENOMEM;
        *ret = registry;
        return 0;
}

BusPolkitRegistry *bus_polkit_registry_free(BusPolkitRegistry *registry) {
        if (!registry)
                return NULL;
        while (registry->queries)
                polkit_query_free(registry->queries);
        free(registry);
        return NULL;
}

int bus_polkit_verdict_from_reply(sd_bus_message *reply, const char *action, sd_bus_error *error) {
        int authorized, challenge, r;

        if (sd_bus_message_is_method_error(reply, NULL)) {
                const sd_bus_error *e = sd_bus_message_get_error(reply);

                /* No owner and nothing to activate: polkit is not installed or not running. */
                if (sd_bus_error_has_names(e, SD_BUS_ERROR_SERVICE_UNKNOWN, SD_BUS_ERROR_NAME_HAS_NO_OWNER))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                                 "This needs root, or the polkit action %s, and polkit is not "
                                                 "running",
                                                 action);
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "polkit could not check the action %s: %s", action,
                                         e && e->message ? e->message : e && e->name ? e->name : "no reason");
        }

        r = sd_bus_message_enter_container(reply, 'r', "bba{ss}");
        if (r >= 0)
                r = sd_bus_message_read(reply, "bb", &authorized, &challenge);
        if (r < 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "polkit's answer for the action %s could not be read", action);
        if (authorized)
                return 1;
        if (challenge)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INTERACTIVE_AUTHORIZATION_REQUIRED,
                                         "The polkit action %s needs authentication: run this as root, or "
                                         "from a session with a polkit agent",
                                         action);
        return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED, "Not authorized: polkit refuses the action %s",
                                 action);
}

static const char *sender_or_unknown(sd_bus_message *m) {
        const char *sender = sd_bus_message_get_sender(m);
        return sender ?: "an unknown sender";
}

static int on_cleanup(sd_event_source *s, void *userdata) {
        PolkitQuery *q = userdata;
        (void) s;

        /* The message came back and its handler never asked for the verdict (the object went
         * away, or the call failed before the check): nothing will, so let it go. */
        log_debug("polkit verdict for %s was not used, dropping it", q->action);
        polkit_query_free(q);
        return 0;
}

static int on_polkit_reply(sd_bus_message *reply, void *userdata, sd_bus_error *ret_error _unused_) {
        PolkitQuery *q = userdata;
        sd_bus *bus = sd_bus_message_get_bus(q->request);
        sd_event *event = sd_bus_get_event(bus);
        int r;

        q->slot = sd_bus_slot_unref(q->slot);
        q->verdict = bus_polkit_verdict_from_reply(reply, q->action, &q->error);
        log_debug("polkit %s %s for %s", q->verdict > 0 ? "allows" : "refuses", q->action,
                  sender_or_unknown(q->request));

        /* The handler sees the message again from the start. A sender that left meanwhile gets
         * a reply nobody reads, which the bus drops. */
        r = sd_bus_message_rewind(q->request, true);
        if (r >= 0)
                r = sd_bus_enqueue_for_read(bus, q->request);
        if (r < 0) {
                log_warning_errno(r, "Cannot dispatch %s's call again after polkit answered: %m",
                                  sender_or_unknown(q->request));
                (void) sd_bus_reply_method_errorf(q->request, SD_BUS_ERROR_FAILED,
                                                  "Cannot finish the authorization check");
                polkit_query_free(q);
                return 0;
        }

        /* Idle priority: after the bus (normal priority) dispatched the message again, which it
         * does in the next iteration (sd-event sees the bus's immediate timer before dispatching). */
        if (event && sd_event_add_defer(event, &q->cleanup, on_cleanup, q) >= 0)
                (void) sd_event_source_set_priority(q->cleanup, SD_EVENT_PRIORITY_IDLE);
        return 0;
}

static int start_query(BusPolkitRegistry *registry, sd_bus_message *call, uid_t uid, const char *action,
                       sd_bus_error *error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        sd_bus *bus = sd_bus_message_get_bus(call);
        const char *sender = sd_bus_message_get_sender(call);
        bool interactive = sd_bus_message_get_allow_interactive_authorization(call) > 0;
        PolkitQuery *q;
        int r;

        if (!sender) /* a direct connection: no bus name polkit could look up */
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "This needs root, or the polkit action %s", action);
        if (registry->n_queries >= BUS_POLKIT_QUERIES_MAX)
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "Too many authorization checks in progress, try again");
        if (!user_may_start(registry, uid)) {
                log_debug("Refusing a polkit check for uid %u (%s): over its share", (unsigned) uid,
                          sender_or_unknown(call));
                return sd_bus_error_setf(error, SD_BUS_ERROR_LIMITS_EXCEEDED,
                                         "Too many authorization checks from this user, try again later");
        }

        r = sd_bus_message_new_method_call(bus, &m, POLKIT_BUS_NAME, POLKIT_BUS_PATH, POLKIT_BUS_INTERFACE,
                                           "CheckAuthorization");
        if (r >= 0)
                r = sd_bus_message_append(m, "(sa{sv})s", "system-bus-name", 1, "name", "s", sender, action);
        if (r >= 0)
                r = sd_bus_message_append(m, "a{ss}us", 0, interactive ? POLKIT_FLAG_ALLOW_USER_INTERACTION : 0U,
                                          "");
        if (r < 0)
                return r;

        q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        *q = (PolkitQuery) { .request = sd_bus_message_ref(call), .uid = uid, .error = SD_BUS_ERROR_NULL };
        q->action = strdup(action);
        if (!q->action) {
                polkit_query_free(q);
                return -ENOMEM;
        }
        r = sd_bus_call_async(bus, &q->slot, m, on_polkit_reply, q, interactive ? POLKIT_INTERACTIVE_TIMEOUT_USEC : 0);
        if (r < 0) {
                polkit_query_free(q);
                return r;
        }
        q->registry = registry;
        q->next = registry->queries;
        if (q->next)
                q->next->prev = q;
        registry->queries = q;
        registry->n_queries++;
        return 0;
}

/* The caller's effective uid as the bus itself vouches for it (never /proc guesswork): whether it
 * is root, and whose budget its checks count against ((uid_t) -1 for every caller the bus says
 * nothing of). */
static int sender_identify(sd_bus_message *call, bool *ret_root, uid_t *ret_budget) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        uid_t uid;
        int r;

        r = sd_bus_query_sender_creds(call, SD_BUS_CREDS_EUID, &creds);
        if (r < 0)
                return r;
        if ((sd_bus_creds_get_augmented_mask(creds) & SD_BUS_CREDS_EUID) || sd_bus_creds_get_euid(creds, &uid) < 0)
                uid = (uid_t) -1;
        *ret_root = uid == 0;
        *ret_budget = uid;
        return 0;
}

int bus_polkit_verify(BusPolkitRegistry *registry, sd_bus_message *call, const char *action, sd_bus_error *error) {
        PolkitQuery *q;
        int r;

        /* The second time round: use polkit's answer once, then forget it. */
        q = registry_find(registry, call);
        if (q) {
                if (q->slot)
                        return 0; /* still waiting: the message comes back when polkit answers */
                if (strcmp(q->action, action) != 0)
                        r = sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                              "polkit was asked about %s, not %s", q->action, action);
                else if (q->verdict > 0)
                        r = 1;
                else {
                        sd_bus_error_move(error, &q->error);
                        r = q->verdict;
                }
                polkit_query_free(q);
                return r;
        }

        bool root;
        uid_t budget;
        r = sender_identify(call, &root, &budget);
        if (r < 0)
                return r;
        if (root)
                return 1;
        return start_query(registry, call, budget, action, error);
}
