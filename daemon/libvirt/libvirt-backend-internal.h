/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt backend's own header, shared by its files and by no one else (callers use
 * libvirt-backend.h): the backend and its domain records, and the helpers that the calls
 * (libvirt-backend-calls.c) and the metadata policy (libvirt-policy.c) take from the
 * connection's file (libvirt-backend.c). Those files include this one; libvirt-backend.c needs
 * nothing of theirs, so the dependency runs one way. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "daemon/libvirt/libvirt-backend.h"
#include "daemon/libvirt/libvirt-connect.h"
#include "daemon/libvirt/libvirt-watchdog.h"
#include "daemon/libvirt/libvirt-worker.h"


typedef struct DomainRecord {
        struct DomainRecord *next;
        char uuid[VIR_UUID_STRING_BUFLEN];
        char *name;
        char *policy;
        const char *skip_reason; /* static strings */
        bool migrating;
        bool seen; /* found again by the discovery after a reconnect */
        virDomainPtr dom; /* NULL while disconnected */
        LibvirtDomainXml xml;
        uint64_t maximum, actual;
        LibvirtDomainInfo info; /* points into this record, for callbacks */
} DomainRecord;

struct LibvirtBackend {
        sd_event *event;
        char *uri;
        bool manage_all;
        unsigned stats_period;
        LibvirtBackendCallbacks cb;
        void *userdata;

        virConnectPtr conn;
        int callback_ids[8];
        size_t n_callback_ids;
        bool close_registered;
        sd_event_source *reconnect_source;
        LibvirtConnectAttempt *connecting; /* an open in flight (libvirt-connect.h) */
        LibvirtWatchdog *watchdog;         /* cuts a connection that holds the loop or the worker */
        LibvirtWorker *worker;             /* the stats and actuation calls (libvirt-worker.h) */
        bool stats_in_flight;              /* one stats call at a time */
        uint64_t call_timeout_usec;
        pthread_t loop_thread;
        atomic_int close_timer;            /* a close seen off the loop, bounced to it: -1 none */
        uint64_t backoff_usec;
        unsigned connect_count;
        unsigned failed_attempts;

        DomainRecord *domains;
        unsigned n_domains;
};

/* -errno for a libvirt error code. */
int libvirt_errno(int code);
/* -errno for the libvirt error e (NULL: unknown), logged at `level` with `what`. */
int libvirt_error_from(int level, const char *guest, const char *what, const virError *e);
/* The same for the calling thread's last libvirt error. */
int libvirt_error(int level, const char *guest, const char *what);

DomainRecord *domain_find(LibvirtBackend *b, const char *uuid);
/* The record of a domain rightsize manages, connected: 0, or -EINVAL, -ENOTCONN, -ENOENT (unknown),
 * -EBUSY (migrating), -EOPNOTSUPP (skipped for another reason). */
int domain_known(LibvirtBackend *b, const char *uuid, DomainRecord **ret);
/* Copies the record into d->info, the view callers get. */
void domain_fill_info(DomainRecord *d);
/* Whether libvirt runs a migration job on the domain. */
bool domain_migrating(virDomainPtr dom);
/* Reads what rightsize needs of an active domain and adds, updates or drops its record.
 * Takes a reference of dom for a new record. */
void domain_refresh(LibvirtBackend *b, virDomainPtr dom, bool migrating_hint);
/* After a failed call: if the connection is dead, start reconnecting now rather than wait for
 * the close callback. */
void check_alive(LibvirtBackend *b);
