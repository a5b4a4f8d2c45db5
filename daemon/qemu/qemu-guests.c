/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/log.h"
#include "daemon/qemu/discovery.h"
#include "daemon/qemu/guest-qmp.h"
#include "daemon/qemu/qemu-guests.h"
#include "daemon/qemu/socket-trust.h"

typedef struct QemuGuests {
        sd_event *event;
        const Config *config;          /* the owner's, until the next reload */
        const GuestSourceOwner *owner;
        void *userdata;
        Discovery *discovery;
        SocketTrust trust;             /* whose QMP sockets are guests: root and qemu-users */
        Guest **guests;                /* those the owner took on, each by its socket (guest_origin()) */
        size_t n_guests;
} QemuGuests;

static ssize_t find_by_path(const QemuGuests *qg, const char *path) {
        for (size_t i = 0; i < qg->n_guests; i++)
                if (strcmp(guest_origin(qg->guests[i]), path) == 0)
                        return (ssize_t) i;
        return -1;
}

static void add_guest(QemuGuests *qg, const char *path, const char *name) {
        _cleanup_free_ char *agent = NULL;
        RsPolicy policy;
        Guest *g;
        int r;

        if ((qg->owner->stopping && qg->owner->stopping(qg->userdata)) || find_by_path(qg, path) >= 0)
                return;
        if (!config_guest_is_managed(qg->config, name, NULL)) {
                log_debug("Not managing %s (%s): excluded by [guests]", name, path);
                return;
        }
        r = config_agent_socket_path(qg->config->agent_socket_pattern, path, &agent);
        if (r < 0)
                log_warning_errno(r, "%s: cannot derive the agent socket path, going without: %m", name);

        /* Room for it first: once the owner has it, it must be found here when its socket goes. */
        Guest **array = realloc(qg->guests, (qg->n_guests + 1) * sizeof(Guest *));
        if (!array) {
                log_oom();
                return;
        }
        qg->guests = array;

        (void) qg->owner->resolve_policy(qg->userdata, NULL, name, NULL, &policy);
        r = guest_qmp_new(qg->event, name, path, agent, &qg->trust, qg->config->state_dir, &policy,
                          qg->owner->guest_hooks, qg->userdata, &g);
        if (r >= 0) {
                r = qg->owner->add_guest(qg->userdata, g);
                if (r < 0)
                        guest_free(g);
        }
        if (r == -EEXIST)
                return; /* refused, and said so */
        if (r < 0) {
                log_error_errno(r, "%s: cannot set up the guest: %m", name);
                return;
        }
        qg->guests[qg->n_guests++] = g;
        log_named_guest_info(name, "connecting", "Discovered %s (policy %s)", path, policy.name);
        (void) guest_qmp_start(g);
}

static void on_socket_added(Discovery *d _unused_, const char *path, const char *name, void *userdata) {
        add_guest(userdata, path, name);
}

static void on_socket_removed(Discovery *d _unused_, const char *path, const char *name, void *userdata) {
        QemuGuests *qg = userdata;
        ssize_t i = find_by_path(qg, path);

        if (i < 0) {
                if (qg->owner->refused_gone)
                        qg->owner->refused_gone(qg->userdata, path);
                return;
        }
        Guest *g = qg->guests[i];
        memmove(qg->guests + i, qg->guests + i + 1, (qg->n_guests - (size_t) i - 1) * sizeof(Guest *));
        qg->n_guests--;
        log_named_guest_info(name, guest_state_string(g), "QMP socket %s is gone: no longer managed", path);
        qg->owner->remove_guest(qg->userdata, g);
}

static void qemu_guests_free(void *source) {
        QemuGuests *qg = source;
        if (!qg)
                return;
        discovery_free(qg->discovery);
        socket_trust_clear(&qg->trust);
        free(qg->guests);
        free(qg);
}

static int qemu_guests_new(sd_event *event, const Config *config, const GuestSourceOwner *owner, void *userdata,
                           void **ret) {
        QemuGuests *qg = calloc(1, sizeof(*qg));
        int r;

        if (!qg)
                return log_oom();
        *qg = (QemuGuests) { .event = event, .config = config, .owner = owner, .userdata = userdata };
        r = discovery_new(event, on_socket_added, on_socket_removed, qg, &qg->discovery);
        if (r < 0) {
                qemu_guests_free(qg);
                return log_error_errno(r, "Cannot start guest discovery: %m");
        }
        r = socket_trust_set_users(&qg->trust, config->qemu_users);
        if (r < 0) {
                qemu_guests_free(qg);
                return log_error_errno(r, "Cannot resolve qemu-users: %m");
        }
        discovery_set_trust(qg->discovery, &qg->trust);
        /* Reports the sockets there already: qg must be complete by now. */
        r = discovery_set_globs(qg->discovery, config->qmp_sockets);
        if (r < 0) {
                /* The guests it found so far stay with the owner, which frees them as it fails. */
                qemu_guests_free(qg);
                return log_error_errno(r, "Cannot watch the QMP socket directories: %m");
        }
        *ret = qg;
        return 0;
}

static void qemu_guests_reload(void **source, sd_event *event _unused_, const Config *config,
                               const GuestSourceOwner *owner _unused_, void *userdata _unused_) {
        QemuGuests *qg = *source;
        int r;

        if (!qg)
                return;
        qg->config = config;
        for (size_t i = 0; i < qg->n_guests; i++) {
                Guest *g = qg->guests[i];
                RsPolicy p;
                (void) qg->owner->resolve_policy(qg->userdata, NULL, guest_name(g), NULL, &p);
                if (guest_set_policy(g, &p) < 0)
                        log_guest_warning(g, "Policy %s not applicable, keeping %s", p.name, guest_policy(g)->name);
                (void) guest_set_state_dir(g, config->state_dir);
        }
        if (socket_trust_set_users(&qg->trust, config->qemu_users) < 0)
                log_oom(); /* root's sockets only until the next reload */
        discovery_set_trust(qg->discovery, &qg->trust);
        r = discovery_set_globs(qg->discovery, config->qmp_sockets);
        if (r < 0)
                log_warning_errno(r, "Cannot watch the new QMP socket globs: %m");
}

/* A guest refused for its name is offered again by its socket's path (its origin). */
static void qemu_guests_retry(void *source, const char *origin, const char *name) {
        add_guest(source, origin, name);
}

const GuestSourceOps qemu_guest_source = {
        .source = GUEST_SOURCE_QEMU,
        .new = qemu_guests_new,
        .free = qemu_guests_free,
        .reload = qemu_guests_reload,
        .retry = qemu_guests_retry,
};
