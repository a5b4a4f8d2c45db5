/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-agent.h"
#include "daemon/libvirt/libvirt-backend.h"
#include "daemon/libvirt/libvirt-connect.h"
#include "daemon/libvirt/libvirt-event.h"
#include "daemon/libvirt/libvirt-watchdog.h"
#include "daemon/libvirt/libvirt-worker.h"
#include "daemon/log.h"
#include "qmp/guest-procfs.h"
#include "qmp/json-util.h"

#define BACKOFF_MIN_USEC (250 * USEC_PER_MSEC)
#define BACKOFF_MAX_USEC (30 * USEC_PER_SEC)
/* A libvirt call that holds the loop or the worker this long is cut (libvirt-watchdog.h): well
 * past what our calls take on a busy host (a DIMM attach under TCG: seconds), well inside
 * systemd's WatchdogSec=30s. Configurable ([libvirt] call-timeout). */
#define STALL_USEC_DEFAULT (15 * USEC_PER_SEC)

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

/* Errors are logged where they are handled; libvirt's default handler would print them all. */
static void quiet_error_handler(void *userdata _unused_, virErrorPtr error _unused_) {
}

/* -errno for a libvirt error code. */
static int libvirt_errno(int code) {
        switch (code) {
        case VIR_ERR_NO_DOMAIN:
                return -ENOENT;
        case VIR_ERR_NO_DOMAIN_METADATA:
                return -ENODATA;
        case VIR_ERR_AGENT_UNRESPONSIVE:
        case VIR_ERR_OPERATION_TIMEOUT:
                return -ETIMEDOUT;
        case VIR_ERR_NO_SUPPORT:
        case VIR_ERR_OPERATION_UNSUPPORTED:
        case VIR_ERR_ARGUMENT_UNSUPPORTED:
                return -EOPNOTSUPP;
        case VIR_ERR_OPERATION_INVALID:
        case VIR_ERR_INVALID_ARG:
        case VIR_ERR_CONFIG_UNSUPPORTED:
        case VIR_ERR_XML_ERROR:
                return -EINVAL;
        case VIR_ERR_ACCESS_DENIED:
        case VIR_ERR_AUTH_FAILED:
                return -EACCES;
        default:
                return -EIO;
        }
}

/* -errno for the libvirt error e (NULL: unknown), logged at `level` with `what`. */
static int libvirt_error_from(int level, const char *guest, const char *what, const virError *e) {
        int r = libvirt_errno(e ? e->code : VIR_ERR_INTERNAL_ERROR);

        log_full_guest_errno(level, r, guest, NULL, "libvirt: %s: %s", what,
                             e && e->message ? e->message : "unknown error");
        return r;
}

/* The same for the calling thread's last libvirt error. */
static int libvirt_error(int level, const char *guest, const char *what) {
        return libvirt_error_from(level, guest, what, virGetLastError());
}

/* ---- domain records ---- */

static DomainRecord *domain_find(LibvirtBackend *b, const char *uuid) {
        for (DomainRecord *d = b->domains; d; d = d->next)
                if (strcmp(d->uuid, uuid) == 0)
                        return d;
        return NULL;
}

static void domain_free(DomainRecord *d) {
        if (!d)
                return;
        if (d->dom)
                virDomainFree(d->dom);
        libvirt_domain_xml_clear(&d->xml);
        free(d->name);
        free(d->policy);
        free(d);
}

static void domain_fill_info(DomainRecord *d) {
        const LibvirtVirtioMem *vm = libvirt_domain_xml_find_virtio_mem(&d->xml, NULL);

        d->info = (LibvirtDomainInfo) {
                .uuid = d->uuid,
                .name = d->name,
                .policy = d->policy,
                .skip_reason = d->skip_reason,
                .agent_channel = d->xml.agent_channel,
                .free_page_reporting = d->xml.free_page_reporting,
                .maximum = d->maximum,
                .actual = d->actual,
                .max_memory = d->xml.max_memory,
                .memory_slots = d->xml.memory_slots,
                .devices_bytes = d->xml.devices_bytes,
                .dimm_bytes = d->xml.dimm_bytes,
                .dimm_count = d->xml.dimm_count,
                .numa = d->xml.numa,
                .virtio_mem_alias = vm ? vm->alias : NULL,
                .virtio_mem_size = vm ? vm->size : QMP_VALUE_UNKNOWN,
                .virtio_mem_block = vm ? vm->block : QMP_VALUE_UNKNOWN,
                .virtio_mem_requested = vm ? vm->requested : QMP_VALUE_UNKNOWN,
                .virtio_mem_current = vm ? vm->current : QMP_VALUE_UNKNOWN,
        };
}

static void domain_remove(LibvirtBackend *b, DomainRecord *d, const char *why) {
        for (DomainRecord **p = &b->domains; *p; p = &(*p)->next)
                if (*p == d) {
                        *p = d->next;
                        break;
                }
        b->n_domains--;
        /* Its calls in flight report to no one: a guest of the same UUID later is another. */
        libvirt_worker_cancel_key(b->worker, d->uuid);
        log_named_guest_info(d->name, NULL, "libvirt domain %s left: %s", d->uuid, why);
        if (b->cb.domain_removed)
                b->cb.domain_removed(b, d->uuid, d->name, why, b->userdata);
        domain_free(d);
}

/* Whether libvirt runs a migration job on the domain. */
static bool domain_migrating(virDomainPtr dom) {
        virTypedParameterPtr params = NULL;
        int n = 0, type = VIR_DOMAIN_JOB_NONE, op = 0;
        bool r = false;

        if (virDomainGetJobStats(dom, &type, &params, &n, 0) < 0)
                return false;
        if (type != VIR_DOMAIN_JOB_NONE &&
            virTypedParamsGetInt(params, n, VIR_DOMAIN_JOB_OPERATION, &op) > 0)
                r = op == VIR_DOMAIN_JOB_OPERATION_MIGRATION_IN || op == VIR_DOMAIN_JOB_OPERATION_MIGRATION_OUT;
        virTypedParamsFree(params, n);
        return r;
}

static int domain_read_policy(virDomainPtr dom, const char *name, char **ret) {
        _cleanup_free_ char *xml = NULL;
        int r;

        *ret = NULL;
        xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, RS_LIBVIRT_METADATA_URI, VIR_DOMAIN_AFFECT_LIVE);
        if (!xml) {
                virErrorPtr e = virGetLastError();
                if (e && e->code == VIR_ERR_NO_DOMAIN_METADATA)
                        return 0;
                return libvirt_error(LOG_WARNING, name, "reading the rightsize metadata");
        }
        r = rs_libvirt_metadata_parse(xml, ret);
        if (r < 0)
                return log_named_guest_warning(name, NULL, "ignoring invalid rightsize metadata: %.200s", xml), r;
        return 0;
}

/* Reads what rightsize needs of an active domain and adds, updates or drops its record.
 * Takes a reference of dom for a new record. */
static void domain_refresh(LibvirtBackend *b, virDomainPtr dom, bool migrating_hint) {
        char uuid[VIR_UUID_STRING_BUFLEN];
        _cleanup_free_ char *policy = NULL, *xml = NULL;
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml parsed = {};
        const char *name = virDomainGetName(dom), *skip;
        DomainRecord *d;
        virDomainInfo info;
        bool migrating, changed, is_new = false;

        if (virDomainGetUUIDString(dom, uuid) < 0 || !name)
                return;
        d = domain_find(b, uuid);
        if (virDomainIsActive(dom) != 1) {
                if (d)
                        domain_remove(b, d, "stopped");
                return;
        }
        (void) domain_read_policy(dom, name, &policy);
        if (!policy && !b->manage_all) {
                if (d)
                        domain_remove(b, d, "opted out");
                return;
        }
        xml = virDomainGetXMLDesc(dom, 0);
        if (!xml) {
                (void) libvirt_error(LOG_WARNING, name, "reading the domain XML");
                return;
        }
        if (libvirt_domain_xml_parse(xml, &parsed) < 0) {
                log_named_guest_warning(name, NULL, "cannot parse the domain XML of %s", uuid);
                return;
        }
        if (virDomainGetInfo(dom, &info) < 0) {
                (void) libvirt_error(LOG_WARNING, name, "reading the domain info");
                return;
        }
        migrating = migrating_hint || domain_migrating(dom);
        skip = libvirt_domain_xml_skip_reason(&parsed);
        if (!skip && migrating)
                skip = "migration in progress";

        if (!d) {
                d = calloc(1, sizeof(*d));
                if (!d)
                        return;
                memcpy(d->uuid, uuid, sizeof(uuid));
                d->name = strdup(name);
                if (!d->name || virDomainRef(dom) < 0) {
                        free(d->name);
                        free(d);
                        return;
                }
                d->dom = dom;
                d->next = b->domains;
                b->domains = d;
                b->n_domains++;
                is_new = true;
        } else if (!d->dom) {
                if (virDomainRef(dom) >= 0)
                        d->dom = dom;
        }
        d->seen = true;
        changed = !is_new && ((!!d->policy != !!policy) || (d->policy && strcmp(d->policy, policy) != 0) ||
                              d->skip_reason != skip);
        free(d->policy);
        d->policy = TAKE_PTR(policy);
        d->skip_reason = skip;
        d->migrating = migrating;
        libvirt_domain_xml_clear(&d->xml);
        d->xml = parsed;
        parsed = (LibvirtDomainXml) {};
        /* maxMem counts memory devices too; the balloon only covers the boot memory. */
        d->maximum = (uint64_t) info.maxMem * KIB;
        for (size_t i = 0; i < d->xml.n_virtio_mem; i++)
                if (qmp_value_is_known(d->xml.virtio_mem[i].size) && d->xml.virtio_mem[i].size < d->maximum)
                        d->maximum -= d->xml.virtio_mem[i].size;
        /* Likewise libvirt's current memory counts plugged virtio-mem memory; BALLOON_CHANGE
         * does not. actual is the balloon's part only. */
        d->actual = (uint64_t) info.memory * KIB;
        for (size_t i = 0; i < d->xml.n_virtio_mem; i++)
                if (qmp_value_is_known(d->xml.virtio_mem[i].current) && d->xml.virtio_mem[i].current < d->actual)
                        d->actual -= d->xml.virtio_mem[i].current;
        domain_fill_info(d);

        if (is_new && !skip && d->dom &&
            virDomainSetMemoryStatsPeriod(d->dom, (int) b->stats_period, VIR_DOMAIN_AFFECT_LIVE) < 0)
                (void) libvirt_error(LOG_WARNING, d->name, "setting the balloon stats period");
        if (is_new || changed)
                log_named_guest_info(d->name, NULL, "libvirt domain %s: policy %s%s%s", d->uuid,
                               d->policy ? d->policy : "(default)", skip ? ", skipped: " : "", skip ? skip : "");
        if ((is_new || changed) && b->cb.domain_added)
                b->cb.domain_added(b, &d->info, changed, b->userdata);
}

/* ---- events ---- */

static int on_lifecycle(virConnectPtr conn _unused_, virDomainPtr dom, int event, int detail, void *opaque) {
        LibvirtBackend *b = opaque;
        char uuid[VIR_UUID_STRING_BUFLEN];
        DomainRecord *d;

        if (virDomainGetUUIDString(dom, uuid) < 0)
                return 0;
        d = domain_find(b, uuid);
        switch (event) {
        case VIR_DOMAIN_EVENT_STARTED:
                domain_refresh(b, dom, false);
                break;
        case VIR_DOMAIN_EVENT_SUSPENDED:
                if (detail == VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED && d)
                        domain_refresh(b, dom, true);
                break;
        case VIR_DOMAIN_EVENT_RESUMED:
                if (detail == VIR_DOMAIN_EVENT_RESUMED_MIGRATED || (d && d->migrating))
                        domain_refresh(b, dom, false);
                break;
        case VIR_DOMAIN_EVENT_STOPPED:
                if (d)
                        domain_remove(b, d,
                                      detail == VIR_DOMAIN_EVENT_STOPPED_MIGRATED ? "migrated away"
                                      : detail == VIR_DOMAIN_EVENT_STOPPED_CRASHED ? "crashed"
                                                                                    : "stopped");
                break;
        case VIR_DOMAIN_EVENT_CRASHED:
                if (d)
                        domain_remove(b, d, "crashed");
                break;
        default:
                break;
        }
        return 0;
}

static void on_balloon_change(virConnectPtr conn _unused_, virDomainPtr dom, unsigned long long actual_kib, void *opaque) {
        LibvirtBackend *b = opaque;
        char uuid[VIR_UUID_STRING_BUFLEN];
        DomainRecord *d;

        if (virDomainGetUUIDString(dom, uuid) < 0 || !(d = domain_find(b, uuid)))
                return;
        d->actual = actual_kib > UINT64_MAX / KIB ? UINT64_MAX : actual_kib * KIB;
        d->info.actual = d->actual;
        if (b->cb.balloon_changed)
                b->cb.balloon_changed(b, d->uuid, d->actual, b->userdata);
}

#if LIBVIR_CHECK_VERSION(7, 9, 0)
static void on_memory_device_size_change(virConnectPtr conn _unused_, virDomainPtr dom, const char *alias,
                                         unsigned long long size_kib, void *opaque) {
        LibvirtBackend *b = opaque;
        char uuid[VIR_UUID_STRING_BUFLEN];
        DomainRecord *d;
        uint64_t size = size_kib > UINT64_MAX / KIB ? UINT64_MAX : size_kib * KIB;

        if (virDomainGetUUIDString(dom, uuid) < 0 || !(d = domain_find(b, uuid)) || !alias)
                return;
        for (size_t i = 0; i < d->xml.n_virtio_mem; i++)
                if (d->xml.virtio_mem[i].alias && strcmp(d->xml.virtio_mem[i].alias, alias) == 0)
                        d->xml.virtio_mem[i].current = size;
        domain_fill_info(d);
        if (b->cb.memory_device_changed)
                b->cb.memory_device_changed(b, d->uuid, alias, size, b->userdata);
}
#endif

static void on_metadata_change(virConnectPtr conn _unused_, virDomainPtr dom, int type, const char *nsuri, void *opaque) {
        if (type != VIR_DOMAIN_METADATA_ELEMENT || !nsuri || strcmp(nsuri, RS_LIBVIRT_METADATA_URI) != 0)
                return;
        domain_refresh(opaque, dom, false);
}

static void on_migration_iteration(virConnectPtr conn _unused_, virDomainPtr dom, int iteration _unused_, void *opaque) {
        LibvirtBackend *b = opaque;
        char uuid[VIR_UUID_STRING_BUFLEN];
        DomainRecord *d;

        if (virDomainGetUUIDString(dom, uuid) < 0 || !(d = domain_find(b, uuid)) || d->migrating)
                return;
        domain_refresh(b, dom, true);
}

static void on_job_completed(virConnectPtr conn _unused_, virDomainPtr dom, virTypedParameterPtr params _unused_,
                             int n_params _unused_, void *opaque) {
        LibvirtBackend *b = opaque;
        char uuid[VIR_UUID_STRING_BUFLEN];
        DomainRecord *d;

        if (virDomainGetUUIDString(dom, uuid) < 0 || !(d = domain_find(b, uuid)) || !d->migrating)
                return;
        domain_refresh(b, dom, false);
}

/* ---- connection ---- */

static void schedule_reconnect(LibvirtBackend *b, uint64_t delay_usec);

static void report_cut(LibvirtBackend *b) {
        uint64_t stalled;
        bool by_call = false;

        if (!libvirt_watchdog_take_cut(b->watchdog, &stalled, &by_call))
                return;
        if (by_call)
                log_warning("libvirt: a call to %s did not return in %.0f s: connection cut", b->uri,
                            (double) stalled / USEC_PER_SEC);
        else
                log_warning("libvirt: a call to %s held the daemon for %.0f s: connection cut", b->uri,
                            (double) stalled / USEC_PER_SEC);
}

static void on_close_on_loop(int timer, void *opaque) {
        LibvirtBackend *b = opaque;

        virEventRemoveTimeout(timer);
        atomic_store(&b->close_timer, -1);
        report_cut(b);
        schedule_reconnect(b, 0);
}

static void on_close(virConnectPtr conn _unused_, int reason, void *opaque) {
        LibvirtBackend *b = opaque;

        log_warning("libvirt: connection to %s closed (reason %d), reconnecting", b->uri, reason);
        if (!pthread_equal(pthread_self(), b->loop_thread)) {
                /* libvirt closes from whichever thread saw the end (the agent worker's too), and
                 * sd-event is the loop's alone: go there through libvirt's event API, which is. */
                int expected = -1, timer = virEventAddTimeout(0, on_close_on_loop, b, NULL);
                if (timer >= 0 && !atomic_compare_exchange_strong(&b->close_timer, &expected, timer))
                        virEventRemoveTimeout(timer); /* one is on its way already */
                return;
        }
        report_cut(b);
        /* Tearing the connection down inside its own callback is not allowed: defer it. */
        schedule_reconnect(b, 0);
}

static void disconnect(LibvirtBackend *b) {
        bool was_connected = b->conn;

        for (DomainRecord *d = b->domains; d; d = d->next)
                if (d->dom) {
                        virDomainFree(d->dom);
                        d->dom = NULL;
                }
        if (!b->conn)
                return;
        for (size_t i = 0; i < b->n_callback_ids; i++)
                (void) virConnectDomainEventDeregisterAny(b->conn, b->callback_ids[i]);
        b->n_callback_ids = 0;
        if (b->close_registered)
                (void) virConnectUnregisterCloseCallback(b->conn, on_close);
        b->close_registered = false;
        /* Before the close: the socket's number is free for reuse after it. */
        libvirt_watchdog_watch(b->watchdog, -1);
        (void) virConnectClose(b->conn);
        b->conn = NULL;
        virResetLastError();
        if (was_connected && b->cb.connection_changed)
                b->cb.connection_changed(b, false, b->userdata);
}

static int register_event(LibvirtBackend *b, int id, virConnectDomainEventGenericCallback cb, const char *what) {
        int r;

        if (b->n_callback_ids >= ARRAY_SIZE(b->callback_ids))
                return -ENOBUFS;
        r = virConnectDomainEventRegisterAny(b->conn, NULL, id, cb, b, NULL);
        if (r < 0)
                return libvirt_error(LOG_WARNING, NULL, what);
        b->callback_ids[b->n_callback_ids++] = r;
        return 0;
}

/* Lists the active domains and matches them with the records kept across a reconnect. */
static int discover(LibvirtBackend *b) {
        virDomainPtr *doms = NULL;
        int n;

        for (DomainRecord *d = b->domains; d; d = d->next)
                d->seen = false;
        n = virConnectListAllDomains(b->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
        if (n < 0)
                return libvirt_error(LOG_WARNING, NULL, "listing domains");
        for (int i = 0; i < n; i++) {
                domain_refresh(b, doms[i], false);
                virDomainFree(doms[i]);
        }
        free(doms);
        for (DomainRecord *d = b->domains, *next; d; d = next) {
                next = d->next;
                if (!d->seen)
                        domain_remove(b, d, "gone while disconnected");
        }
        return n;
}

/* A new connection: callbacks, events, and the domains it has. Takes conn. */
static int setup_connection(LibvirtBackend *b, virConnectPtr conn, int socket_fd) {
        int r;

        b->conn = conn;
        if (socket_fd >= 0)
                libvirt_watchdog_watch(b->watchdog, socket_fd);
        else
                log_debug("libvirt: the connection's socket is not known (%s): no stall watchdog", b->uri);
        if (virConnectRegisterCloseCallback(b->conn, on_close, b, NULL) < 0) {
                r = libvirt_error(LOG_WARNING, NULL, "registering the close callback");
                goto fail;
        }
        b->close_registered = true;
        /* Notices a hung libvirtd between calls (not inside one: libvirt-watchdog.h). */
        if (virConnectSetKeepAlive(b->conn, 5, 3) < 0)
                (void) libvirt_error(LOG_DEBUG, NULL, "enabling keepalive");

        r = register_event(b, VIR_DOMAIN_EVENT_ID_LIFECYCLE, VIR_DOMAIN_EVENT_CALLBACK(on_lifecycle), "lifecycle events");
        if (r < 0)
                goto fail;
        (void) register_event(b, VIR_DOMAIN_EVENT_ID_BALLOON_CHANGE, VIR_DOMAIN_EVENT_CALLBACK(on_balloon_change),
                              "balloon events");
        (void) register_event(b, VIR_DOMAIN_EVENT_ID_METADATA_CHANGE, VIR_DOMAIN_EVENT_CALLBACK(on_metadata_change),
                              "metadata events");
        (void) register_event(b, VIR_DOMAIN_EVENT_ID_MIGRATION_ITERATION,
                              VIR_DOMAIN_EVENT_CALLBACK(on_migration_iteration), "migration events");
        (void) register_event(b, VIR_DOMAIN_EVENT_ID_JOB_COMPLETED, VIR_DOMAIN_EVENT_CALLBACK(on_job_completed),
                              "job events");
#if LIBVIR_CHECK_VERSION(7, 9, 0)
        (void) register_event(b, VIR_DOMAIN_EVENT_ID_MEMORY_DEVICE_SIZE_CHANGE,
                              VIR_DOMAIN_EVENT_CALLBACK(on_memory_device_size_change), "memory device events");
#endif
        r = discover(b);
        if (r < 0)
                goto fail;
        return 0;
fail:
        disconnect(b);
        return r;
}

static void connect_failed(LibvirtBackend *b) {
        b->failed_attempts++;
        schedule_reconnect(b, b->backoff_usec);
        b->backoff_usec = MIN(b->backoff_usec * 2, BACKOFF_MAX_USEC);
}

static void on_connected(virConnectPtr conn, int socket_fd, const char *error, void *userdata) {
        LibvirtBackend *b = userdata;

        b->connecting = NULL;
        if (!conn) {
                log_full(b->failed_attempts == 0 ? LOG_WARNING : LOG_DEBUG, "libvirt: connecting: %s",
                         error && error[0] ? error : "unknown error");
                connect_failed(b);
                return;
        }
        if (setup_connection(b, conn, socket_fd) < 0) {
                connect_failed(b);
                return;
        }
        b->connect_count++;
        b->failed_attempts = 0;
        b->backoff_usec = BACKOFF_MIN_USEC;
        log_info("libvirt: connected to %s (%u domains managed)", b->uri, b->n_domains);
        if (b->cb.connection_changed)
                b->cb.connection_changed(b, true, b->userdata);
}

/* The open runs on a thread (libvirt-connect.h); on_connected() goes on from there. */
static void start_connect(LibvirtBackend *b) {
        int r;

        if (b->connecting)
                return; /* one at a time: a hung one stays pending until libvirtd answers or dies */
        r = libvirt_connect_start(b->event, b->uri, on_connected, b, &b->connecting);
        if (r < 0) {
                log_warning_errno(r, "libvirt: cannot start connecting: %m");
                connect_failed(b);
        }
}

static int on_reconnect_timer(sd_event_source *s _unused_, uint64_t usec _unused_, void *userdata) {
        LibvirtBackend *b = userdata;

        report_cut(b); /* when a failed call, not the close callback, brought us here */
        if (b->conn && virConnectIsAlive(b->conn) == 1)
                return 0;
        disconnect(b);
        start_connect(b);
        return 0;
}

static void schedule_reconnect(LibvirtBackend *b, uint64_t delay_usec) {
        uint64_t now = 0;

        (void) sd_event_now(b->event, CLOCK_MONOTONIC, &now);
        if (!b->reconnect_source) {
                if (sd_event_add_time(b->event, &b->reconnect_source, CLOCK_MONOTONIC, now + delay_usec, USEC_PER_MSEC,
                                      on_reconnect_timer, b) < 0) {
                        log_error("libvirt: cannot schedule a reconnect");
                        return;
                }
                (void) sd_event_source_set_description(b->reconnect_source, "libvirt-reconnect");
        } else
                (void) sd_event_source_set_time(b->reconnect_source, now + delay_usec);
        (void) sd_event_source_set_enabled(b->reconnect_source, SD_EVENT_ONESHOT);
}

/* After a failed call: if the connection is dead, start reconnecting now rather than wait for
 * the close callback. */
static void check_alive(LibvirtBackend *b) {
        if (b->conn && virConnectIsAlive(b->conn) != 1)
                schedule_reconnect(b, 0);
}

int libvirt_backend_new(sd_event *event, const LibvirtBackendConfig *config, const LibvirtBackendCallbacks *callbacks,
                        void *userdata, LibvirtBackend **ret) {
        LibvirtBackend *b;
        int r;

        if (!event || !ret)
                return -EINVAL;
        r = rs_libvirt_event_register(event);
        if (r < 0)
                return r;
        virSetErrorFunc(NULL, quiet_error_handler);
        if (virInitialize() < 0)
                return -EIO;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->event = sd_event_ref(event);
        b->uri = strdup(config && config->uri ? config->uri : "qemu:///system");
        if (!b->uri) {
                libvirt_backend_free(b);
                return -ENOMEM;
        }
        b->manage_all = config && config->manage_all;
        b->stats_period = config && config->stats_period ? config->stats_period : 1;
        if (callbacks)
                b->cb = *callbacks;
        b->userdata = userdata;
        b->backoff_usec = BACKOFF_MIN_USEC;
        b->loop_thread = pthread_self();
        atomic_init(&b->close_timer, -1);
        b->call_timeout_usec = config && config->call_timeout_usec ? config->call_timeout_usec : STALL_USEC_DEFAULT;
        r = libvirt_watchdog_new(event, b->call_timeout_usec, &b->watchdog);
        if (r < 0)
                log_warning_errno(r, "libvirt: no stall watchdog: %m");
        r = libvirt_worker_new(event, "libvirt-calls-done", b->watchdog, &b->worker);
        if (r < 0) {
                libvirt_backend_free(b);
                return r;
        }

        start_connect(b);
        *ret = b;
        return 0;
}

LibvirtBackend *libvirt_backend_free(LibvirtBackend *b) {
        if (!b)
                return NULL;
        b->cb = (LibvirtBackendCallbacks) {};
        libvirt_connect_cancel(TAKE_PTR(b->connecting));
        /* The worker before the connection: a call to a hung libvirtd is cut rather than waited
         * for (at teardown, a cut connection costs nothing). Nothing queued runs. */
        if (libvirt_worker_busy(b->worker, NULL))
                libvirt_watchdog_cut_now(b->watchdog);
        b->worker = libvirt_worker_free(b->worker);
        disconnect(b);
        int timer = atomic_exchange(&b->close_timer, -1);
        if (timer >= 0)
                virEventRemoveTimeout(timer);
        b->watchdog = libvirt_watchdog_free(b->watchdog);
        while (b->domains) {
                DomainRecord *d = b->domains;
                b->domains = d->next;
                domain_free(d);
        }
        sd_event_source_disable_unref(b->reconnect_source);
        sd_event_unref(b->event);
        free(b->uri);
        free(b);
        return NULL;
}

bool libvirt_backend_is_connected(const LibvirtBackend *b) {
        return b && b->conn;
}

bool libvirt_backend_is_alive(const LibvirtBackend *b) {
        return b && b->conn && virConnectIsAlive(b->conn) == 1;
}

unsigned libvirt_backend_connect_count(const LibvirtBackend *b) {
        return b ? b->connect_count : 0;
}

const LibvirtDomainInfo *libvirt_backend_get_domain(LibvirtBackend *b, const char *uuid) {
        DomainRecord *d = b && uuid ? domain_find(b, uuid) : NULL;

        return d ? &d->info : NULL;
}

unsigned libvirt_backend_domain_count(const LibvirtBackend *b) {
        return b ? b->n_domains : 0;
}

/* ---- calls: on the worker (async) or on the caller's thread (sync), the same code ---- */

typedef enum CallKind {
        CALL_STATS,
        CALL_BALLOON,
        CALL_VIRTIO_MEM,
        CALL_DIMM,
} CallKind;

typedef struct BackendCall {
        CallKind kind;
        LibvirtBackend *b;             /* loop only */
        char uuid[VIR_UUID_STRING_BUFLEN];
        virConnectPtr conn;            /* referenced (stats) */
        virDomainPtr dom;              /* referenced (a domain's call) */
        const char *what;              /* for the log */
        /* In. */
        unsigned long kib;             /* balloon */
        char *alias;                   /* virtio-mem: the device (NULL: the first) */
        uint64_t bytes;                /* virtio-mem: the size asked for */
        char *device_xml;              /* DIMM */
        LibvirtDomainStats *stats;     /* stats: one per domain asked about */
        size_t n_stats;
        /* Out: written where the call runs, read on the loop after the hand-over. */
        int error;                     /* 0, or -errno */
        bool failed;                   /* a libvirt call failed: saved says why */
        bool gone;                     /* the domain stopped meanwhile */
        bool migrating;                /* a migration runs: nothing was done */
        virError saved;
        LibvirtDomainXml parsed;            /* virtio-mem: the live XML */
        uint64_t requested;            /* virtio-mem: what the device was asked for */
        /* The caller's. */
        libvirt_call_done_fn done;
        libvirt_collect_done_fn collect_done;
        void *userdata;
} BackendCall;

static void call_free(void *data) {
        BackendCall *c = data;

        if (!c)
                return;
        if (c->dom)
                virDomainFree(c->dom);
        if (c->conn)
                virConnectClose(c->conn);
        virResetError(&c->saved);
        libvirt_domain_xml_clear(&c->parsed);
        free(c->alias);
        free(c->device_xml);
        free(c->stats);
        free(c);
}

static void call_freep(BackendCall **c) {
        call_free(*c);
}

/* A libvirt call failed on this thread: keep why (errors are per thread), and whether the
 * domain stopped meanwhile (no error worth a warning: its lifecycle event follows). */
static void call_failed(BackendCall *c) {
        if (virCopyLastError(&c->saved) < 0)
                c->saved.code = VIR_ERR_INTERNAL_ERROR;
        c->failed = true;
        c->gone = c->saved.code == VIR_ERR_NO_DOMAIN ||
                  (c->dom && c->saved.code == VIR_ERR_OPERATION_INVALID && virDomainIsActive(c->dom) != 1);
        c->error = c->gone ? -ENOENT : libvirt_errno(c->saved.code);
}

static int monitor_read(virDomainPtr dom, QmpGuestStats *ret) {
        static const char command[] = "{\"execute\":\"qom-get\",\"arguments\":{\"path\":\"" QMP_BALLOON_QOM_PATH
                                      "\",\"property\":\"guest-stats\"}}";
        _cleanup_free_ char *reply = NULL;
        json_object *doc, *result;
        int r;

        if (virDomainQemuMonitorCommand(dom, command, &reply, VIR_DOMAIN_QEMU_MONITOR_COMMAND_DEFAULT) < 0) {
                virErrorPtr e = virGetLastError();
                return libvirt_errno(e ? e->code : VIR_ERR_INTERNAL_ERROR);
        }
        /* QEMU's reply, passed through by libvirt: as untrusted as any QMP reply. */
        doc = reply ? json_tokener_parse(reply) : NULL;
        if (!doc || json_member_get_object(doc, "return", &result) < 0)
                r = -EBADMSG;
        else
                r = qmp_parse_guest_stats(result, ret);
        json_object_put(doc);
        return r;
}

static int balloon_read(virDomainPtr dom, uint64_t *ret) {
        virDomainMemoryStatStruct stats[VIR_DOMAIN_MEMORY_STAT_NR];
        int n = virDomainMemoryStats(dom, stats, VIR_DOMAIN_MEMORY_STAT_NR, 0);

        if (n < 0) {
                virErrorPtr e = virGetLastError();
                return libvirt_errno(e ? e->code : VIR_ERR_INTERNAL_ERROR);
        }
        for (int i = 0; i < n; i++)
                if (stats[i].tag == VIR_DOMAIN_MEMORY_STAT_ACTUAL_BALLOON && stats[i].val > 0 &&
                    stats[i].val < UINT64_MAX / KIB) {
                        *ret = stats[i].val * KIB;
                        return 0;
                }
        return -ENODATA;
}

static void stats_run(BackendCall *c) {
        virDomainStatsRecordPtr *records = NULL;
        int n;

        /* NOWAIT: a domain busy with a job (a snapshot, a block job) reports what it can at once,
         * instead of holding the call for up to libvirt's 30 s job wait. */
        n = virConnectGetAllDomainStats(c->conn, VIR_DOMAIN_STATS_BALLOON, &records,
                                        VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE |
                                                VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT);
        if (n < 0) {
                call_failed(c);
                return;
        }
        for (int i = 0; i < n; i++) {
                char uuid[VIR_UUID_STRING_BUFLEN];
                LibvirtDomainStats *s = NULL;

                if (!records[i]->dom || virDomainGetUUIDString(records[i]->dom, uuid) < 0)
                        continue;
                for (size_t j = 0; j < c->n_stats && !s; j++)
                        if (strcmp(c->stats[j].uuid, uuid) == 0)
                                s = &c->stats[j];
                if (!s)
                        continue;
                s->found = true;
                (void) libvirt_stats_map(records[i]->params, records[i]->nparams, &s->stats);
                if (s->want_monitor)
                        s->monitor_error = monitor_read(records[i]->dom, &s->monitor);
                /* balloon.current follows BALLOON_CHANGE, at most one a second: a balloon in
                 * motion is read directly (one small call). */
                if (s->balloon_target > 0 && qmp_value_is_known(s->stats.actual)) {
                        uint64_t tolerance = MAX(4 * MIB, s->balloon_target / 200), actual = s->stats.actual;
                        if (actual > s->balloon_target + tolerance || actual + tolerance < s->balloon_target)
                                s->balloon_error = balloon_read(records[i]->dom, &s->balloon);
                }
        }
        virDomainStatsRecordListFree(records);
}

static void domain_call_run(BackendCall *c) {
        _cleanup_free_ char *xml = NULL, *update = NULL;
        const LibvirtVirtioMem *dev;
        int r;

        /* Events can be late: ask libvirt about a migration before touching memory. */
        if (domain_migrating(c->dom)) {
                c->migrating = true;
                c->error = -EBUSY;
                return;
        }
        switch (c->kind) {
        case CALL_BALLOON:
                if (virDomainSetMemoryFlags(c->dom, c->kib, VIR_DOMAIN_AFFECT_LIVE) < 0)
                        call_failed(c);
                return;
        case CALL_VIRTIO_MEM:
                /* The live XML: the device as libvirt has it now, with its alias and block size. */
                xml = virDomainGetXMLDesc(c->dom, 0);
                if (!xml) {
                        c->what = "reading the domain XML";
                        call_failed(c);
                        return;
                }
                r = libvirt_domain_xml_parse(xml, &c->parsed);
                if (r < 0) {
                        c->error = r;
                        return;
                }
                dev = libvirt_domain_xml_find_virtio_mem(&c->parsed, c->alias);
                if (!dev) {
                        c->error = -ENODEV;
                        return;
                }
                if (!qmp_value_is_known(dev->block) || !qmp_value_is_known(dev->size)) {
                        c->error = -EBADMSG;
                        return;
                }
                r = rs_virtio_mem_align(c->bytes, dev->block, dev->size, &c->requested);
                if (r >= 0)
                        r = libvirt_virtio_mem_update_xml(dev, c->requested, &update);
                if (r < 0) {
                        c->error = r;
                        return;
                }
                if (!c->alias && dev->alias) {
                        c->alias = strdup(dev->alias);
                        if (!c->alias) {
                                c->error = -ENOMEM;
                                return;
                        }
                }
                if (virDomainUpdateDeviceFlags(c->dom, update, VIR_DOMAIN_AFFECT_LIVE) < 0)
                        call_failed(c);
                return;
        case CALL_DIMM:
                if (virDomainAttachDeviceFlags(c->dom, c->device_xml, VIR_DOMAIN_AFFECT_LIVE) < 0)
                        call_failed(c);
                return;
        case CALL_STATS:
                break;
        }
}

static void call_run(void *data) {
        BackendCall *c = data;

        if (c->kind == CALL_STATS)
                stats_run(c);
        else
                domain_call_run(c);
}

/* On the loop: logs, updates the records, and tells the caller. Returns the call's result. */
static int call_complete(BackendCall *c) {
        LibvirtBackend *b = c->b;
        DomainRecord *d = domain_find(b, c->uuid);
        const char *name = d ? d->name : c->uuid;
        int r = c->error;

        if (c->kind == CALL_STATS) {
                if (c->collect_done) /* the async one; a sync call runs beside it */
                        b->stats_in_flight = false;
                if (c->failed) {
                        r = libvirt_error_from(LOG_WARNING, NULL, "reading domain stats", &c->saved);
                        check_alive(b);
                }
                for (size_t i = 0; i < c->n_stats; i++) {
                        DomainRecord *sd = domain_find(b, c->stats[i].uuid);
                        /* Only domains rightsize may act on, as they are now. */
                        if (!sd || sd->skip_reason)
                                c->stats[i].found = false;
                        else
                                c->stats[i].name = sd->name;
                }
                if (c->collect_done)
                        c->collect_done(b, r, c->stats, c->n_stats, c->userdata);
                return r;
        }

        if (c->migrating) {
                if (d && d->dom && !d->migrating)
                        domain_refresh(b, d->dom, true);
        } else if (c->gone)
                log_named_guest_debug(name, NULL, "libvirt: %s: the domain stopped meanwhile", c->what);
        else if (c->failed) {
                r = libvirt_error_from(LOG_WARNING, name, c->what, &c->saved);
                check_alive(b);
        } else if (r < 0)
                log_named_guest_warning_errno(name, NULL, r, "libvirt: %s: %s", c->what, strerror(-r));
        else if (c->kind == CALL_BALLOON)
                log_named_guest_debug(name, NULL, "balloon target %lu MiB", c->kib / 1024);
        else if (c->kind == CALL_VIRTIO_MEM) {
                log_named_guest_debug(name, NULL, "virtio-mem %s requested %" PRIu64 " MiB", c->alias ?: "?",
                                c->requested / MIB);
                if (d) {
                        libvirt_domain_xml_clear(&d->xml);
                        d->xml = c->parsed;
                        c->parsed = (LibvirtDomainXml) {};
                        for (size_t i = 0; i < d->xml.n_virtio_mem; i++)
                                if (d->xml.virtio_mem[i].alias && c->alias &&
                                    strcmp(d->xml.virtio_mem[i].alias, c->alias) == 0)
                                        d->xml.virtio_mem[i].requested = c->requested;
                        domain_fill_info(d);
                }
        } else if (c->kind == CALL_DIMM && d && d->dom)
                /* The balloon's ceiling now counts the DIMM: set_balloon caps at it. */
                domain_refresh(b, d->dom, false);

        if (c->done)
                c->done(b, c->uuid, r, c->userdata);
        return r;
}

static void call_done(void *data, void *userdata _unused_) {
        (void) call_complete(data);
}

static const LibvirtJobType stats_job = {
        .name = "stats",
        .run = call_run,
        .done = call_done,
        .free = call_free,
};
/* Coalesced per domain: the latest target wins. */
static const LibvirtJobType balloon_job = {
        .name = "balloon",
        .coalesce = true,
        .run = call_run,
        .done = call_done,
        .free = call_free,
};
static const LibvirtJobType virtio_mem_job = {
        .name = "virtio-mem",
        .coalesce = true,
        .run = call_run,
        .done = call_done,
        .free = call_free,
};
static const LibvirtJobType dimm_job = {
        .name = "dimm",
        .run = call_run,
        .done = call_done,
        .free = call_free,
};

/* A call on a domain rightsize may act on, or -errno. */
static int call_new(LibvirtBackend *b, const char *uuid, CallKind kind, const char *what, BackendCall **ret) {
        BackendCall *c;
        DomainRecord *d;

        if (!b || !uuid)
                return -EINVAL;
        if (!b->conn)
                return -ENOTCONN;
        d = domain_find(b, uuid);
        if (!d || !d->dom)
                return -ENOENT;
        if (d->skip_reason)
                return d->migrating ? -EBUSY : -EOPNOTSUPP;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        if (virDomainRef(d->dom) < 0) {
                free(c);
                return -EIO;
        }
        c->dom = d->dom;
        c->kind = kind;
        c->b = b;
        c->what = what;
        memcpy(c->uuid, d->uuid, sizeof(c->uuid));
        *ret = c;
        return 0;
}

/* Runs c here (sync) or queues it on the worker (done != NULL). Takes c. */
static int call_start(LibvirtBackend *b, BackendCall *c, const LibvirtJobType *type, libvirt_call_done_fn done,
                      void *userdata) {
        int r;

        if (!done) {
                _cleanup_(call_freep) BackendCall *sync = c;
                call_run(sync);
                return call_complete(sync);
        }
        c->done = done;
        c->userdata = userdata;
        if (!b->worker) {
                call_free(c);
                return -ENOTCONN;
        }
        r = libvirt_worker_submit(b->worker, type, c->uuid, c, NULL, NULL);
        if (r > 0)
                log_named_guest_debug(c->uuid, NULL, "libvirt: %s still queued: replaced with the latest", type->name);
        return r < 0 ? r : 0;
}

static int balloon_call(LibvirtBackend *b, const char *uuid, uint64_t bytes, libvirt_call_done_fn done,
                        void *userdata) {
        BackendCall *c;
        DomainRecord *d;
        uint64_t kib;
        int r;

        r = call_new(b, uuid, CALL_BALLOON, "setting the balloon target", &c);
        if (r < 0)
                return r;
        d = domain_find(b, uuid);
        kib = bytes / KIB;
        if (d->maximum > 0)
                kib = MIN(kib, d->maximum / KIB);
        if (kib == 0 || kib > ULONG_MAX) {
                call_free(c);
                return -EINVAL;
        }
        c->kib = (unsigned long) kib;
        return call_start(b, c, &balloon_job, done, userdata);
}

int libvirt_backend_set_balloon(LibvirtBackend *b, const char *uuid, uint64_t bytes) {
        return balloon_call(b, uuid, bytes, NULL, NULL);
}

int libvirt_backend_set_balloon_async(LibvirtBackend *b, const char *uuid, uint64_t bytes, libvirt_call_done_fn done,
                                      void *userdata) {
        if (!done)
                return -EINVAL;
        return balloon_call(b, uuid, bytes, done, userdata);
}

int libvirt_backend_set_virtio_mem(LibvirtBackend *b, const char *uuid, const char *alias, uint64_t bytes,
                                   uint64_t *ret_requested) {
        _cleanup_(call_freep) BackendCall *c = NULL;
        int r;

        r = call_new(b, uuid, CALL_VIRTIO_MEM, "resizing virtio-mem", &c);
        if (r < 0)
                return r;
        if (alias && !(c->alias = strdup(alias)))
                return -ENOMEM;
        c->bytes = bytes;
        call_run(c);
        r = call_complete(c);
        if (r >= 0 && ret_requested)
                *ret_requested = c->requested;
        return r;
}

int libvirt_backend_set_virtio_mem_async(LibvirtBackend *b, const char *uuid, const char *alias, uint64_t bytes,
                                         uint64_t *ret_requested, libvirt_call_done_fn done, void *userdata) {
        const LibvirtDomainInfo *info = libvirt_backend_get_domain(b, uuid);
        BackendCall *c;
        uint64_t requested;
        int r;

        if (!done || !ret_requested)
                return -EINVAL;
        /* What the device will be asked for, from its record (the job reads the live XML and
         * aligns again: the same block and size unless the device changed meanwhile). */
        if (!info || !info->virtio_mem_alias || !qmp_value_is_known(info->virtio_mem_block) ||
            !qmp_value_is_known(info->virtio_mem_size))
                return info ? -ENODEV : -ENOENT;
        r = rs_virtio_mem_align(bytes, info->virtio_mem_block, info->virtio_mem_size, &requested);
        if (r < 0)
                return r;
        r = call_new(b, uuid, CALL_VIRTIO_MEM, "resizing virtio-mem", &c);
        if (r < 0)
                return r;
        if (alias && !(c->alias = strdup(alias))) {
                call_free(c);
                return -ENOMEM;
        }
        c->bytes = bytes;
        r = call_start(b, c, &virtio_mem_job, done, userdata);
        if (r >= 0)
                *ret_requested = requested;
        return r;
}

static int dimm_call(LibvirtBackend *b, const char *uuid, uint64_t bytes, int node, bool allowed,
                     libvirt_call_done_fn done, void *userdata) {
        BackendCall *c;
        int r;

        if (!allowed)
                return -EPERM;
        r = call_new(b, uuid, CALL_DIMM, "hot-plugging a DIMM", &c);
        if (r < 0)
                return r;
        r = rs_dimm_device_xml(bytes, node, &c->device_xml);
        if (r < 0) {
                call_free(c);
                return r;
        }
        return call_start(b, c, &dimm_job, done, userdata);
}

int libvirt_backend_attach_dimm(LibvirtBackend *b, const char *uuid, uint64_t bytes, int node, bool allowed) {
        return dimm_call(b, uuid, bytes, node, allowed, NULL, NULL);
}

int libvirt_backend_attach_dimm_async(LibvirtBackend *b, const char *uuid, uint64_t bytes, int node, bool allowed,
                                      libvirt_call_done_fn done, void *userdata) {
        if (!done)
                return -EINVAL;
        return dimm_call(b, uuid, bytes, node, allowed, done, userdata);
}

/* ---- stats ---- */

static int stats_call_new(LibvirtBackend *b, const LibvirtDomainStats *requests, size_t n, BackendCall **ret) {
        BackendCall *c;

        if (!b->conn)
                return -ENOTCONN;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->kind = CALL_STATS;
        c->b = b;
        c->what = "reading domain stats";
        if (n > 0) {
                c->stats = calloc(n, sizeof(*c->stats));
                if (!c->stats) {
                        free(c);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < n; i++) {
                c->stats[i] = (LibvirtDomainStats) {
                        .want_monitor = requests[i].want_monitor,
                        .balloon_target = requests[i].balloon_target,
                        .monitor_error = -ENODATA,
                        .balloon_error = -ENODATA,
                };
                memcpy(c->stats[i].uuid, requests[i].uuid, sizeof(c->stats[i].uuid));
                c->stats[i].uuid[sizeof(c->stats[i].uuid) - 1] = '\0';
                libvirt_stats_init(&c->stats[i].stats);
        }
        c->n_stats = n;
        if (virConnectRef(b->conn) < 0) {
                call_free(c);
                return -EIO;
        }
        c->conn = b->conn;
        *ret = c;
        return 0;
}

int libvirt_backend_collect_async(LibvirtBackend *b, const LibvirtDomainStats *requests, size_t n,
                                  libvirt_collect_done_fn done, void *userdata) {
        BackendCall *c;
        int r;

        if (!b || !done || (n > 0 && !requests))
                return -EINVAL;
        if (b->stats_in_flight)
                return -EBUSY;
        if (!b->worker)
                return -ENOTCONN;
        r = stats_call_new(b, requests, n, &c);
        if (r < 0)
                return r;
        c->collect_done = done;
        c->userdata = userdata;
        r = libvirt_worker_submit(b->worker, &stats_job, NULL, c, NULL, NULL);
        if (r < 0)
                return r;
        b->stats_in_flight = true;
        return 0;
}

bool libvirt_backend_collect_busy(LibvirtBackend *b) {
        return b && b->stats_in_flight;
}

int libvirt_backend_collect_all(LibvirtBackend *b, libvirt_stats_fn callback, void *userdata) {
        _cleanup_(call_freep) BackendCall *c = NULL;
        _cleanup_free_ LibvirtDomainStats *requests = NULL;
        size_t n = 0;
        int r, reported = 0;

        if (!b || !callback)
                return -EINVAL;
        if (!b->conn)
                return -ENOTCONN;
        requests = calloc(MAX(b->n_domains, 1u), sizeof(*requests));
        if (!requests)
                return -ENOMEM;
        for (DomainRecord *d = b->domains; d; d = d->next)
                if (!d->skip_reason)
                        memcpy(requests[n++].uuid, d->uuid, sizeof(d->uuid));
        r = stats_call_new(b, requests, n, &c);
        if (r < 0)
                return r;
        call_run(c);
        r = call_complete(c);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n_stats; i++) {
                if (!c->stats[i].found || !domain_find(b, c->stats[i].uuid))
                        continue;
                /* The callback may not free the backend, but may call into it. */
                callback(b, c->stats[i].uuid, c->stats[i].name, &c->stats[i].stats, userdata);
                reported++;
        }
        return reported;
}

/* The record of a domain rightsize may act on, or -errno. */
static int domain_for_action(LibvirtBackend *b, const char *uuid, DomainRecord **ret) {
        DomainRecord *d;

        if (!b || !uuid)
                return -EINVAL;
        if (!b->conn)
                return -ENOTCONN;
        d = domain_find(b, uuid);
        if (!d || !d->dom)
                return -ENOENT;
        if (d->skip_reason)
                return d->migrating ? -EBUSY : -EOPNOTSUPP;
        /* Events can be late: ask libvirt about a migration before touching memory. */
        if (domain_migrating(d->dom)) {
                if (!d->migrating)
                        domain_refresh(b, d->dom, true);
                return -EBUSY;
        }
        *ret = d;
        return 0;
}

/* ---- guest agent ---- */

/* The domain for an agent read: only when the policy allows it (libvirt taints the domain),
 * and only with the agent's channel. */
static int domain_for_agent(LibvirtBackend *b, const char *uuid, bool allowed, DomainRecord **ret) {
        int r;

        if (!allowed)
                return -EPERM;
        r = domain_for_action(b, uuid, ret);
        if (r < 0)
                return r;
        return (*ret)->xml.agent_channel ? 0 : -ENODEV;
}

int libvirt_backend_agent_read_file(LibvirtBackend *b, const char *uuid, const char *path, bool allowed, char **ret,
                                    size_t *ret_size) {
        char message[256] = "";
        DomainRecord *d;
        int r;

        if (!path)
                return -EINVAL;
        r = domain_for_agent(b, uuid, allowed, &d);
        if (r < 0)
                return r;
        r = libvirt_agent_read_file(d->dom, path, ret, ret_size, message, sizeof(message));
        if (r < 0)
                log_named_guest_debug_errno(d->name, NULL, r, "guest agent: reading %s: %s", path, message[0] ? message : strerror(-r));
        return r;
}

int libvirt_backend_read_agent(LibvirtBackend *b, const char *uuid, bool allowed, GuestVmstat *ret_vmstat,
                               GuestPsi *ret_psi) {
        char message[256] = "";
        DomainRecord *d;
        int r;

        if (!ret_vmstat)
                return -EINVAL;
        r = domain_for_agent(b, uuid, allowed, &d);
        if (r < 0)
                return r;
        r = libvirt_agent_read_procfs(d->dom, ret_vmstat, ret_psi, message, sizeof(message));
        if (r < 0)
                log_named_guest_debug_errno(d->name, NULL, r, "guest agent: %s", message[0] ? message : strerror(-r));
        return r;
}

virConnectPtr libvirt_backend_get_connection(LibvirtBackend *b) {
        return b ? b->conn : NULL;
}

virDomainPtr libvirt_backend_get_domain_ptr(LibvirtBackend *b, const char *uuid) {
        DomainRecord *d = b && uuid && b->conn ? domain_find(b, uuid) : NULL;

        return d ? d->dom : NULL;
}

/* ---- rightsizectl enable|disable ---- */

static virDomainPtr lookup_domain(virConnectPtr conn, const char *domain) {
        virDomainPtr dom = NULL;

        if (strlen(domain) == VIR_UUID_STRING_BUFLEN - 1)
                dom = virDomainLookupByUUIDString(conn, domain);
        if (!dom)
                dom = virDomainLookupByName(conn, domain);
        return dom;
}

int libvirt_domain_set_policy(virConnectPtr conn, const char *domain, const char *policy) {
        _cleanup_free_ char *xml = NULL;
        virDomainPtr dom;
        unsigned flags = 0;
        int r;

        if (!conn || !domain)
                return -EINVAL;
        if (policy) {
                r = rs_libvirt_metadata_format(policy, &xml);
                if (r < 0)
                        return r;
        }
        dom = lookup_domain(conn, domain);
        if (!dom)
                return libvirt_error(LOG_DEBUG, domain, "looking up the domain");
        if (virDomainIsActive(dom) == 1)
                flags |= VIR_DOMAIN_AFFECT_LIVE;
        if (virDomainIsPersistent(dom) == 1)
                flags |= VIR_DOMAIN_AFFECT_CONFIG;
        if (virDomainSetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, xml, policy ? RS_LIBVIRT_METADATA_PREFIX : NULL,
                                 RS_LIBVIRT_METADATA_URI, flags) < 0)
                r = libvirt_error(LOG_WARNING, domain, "writing the rightsize metadata");
        else
                r = 0;
        virDomainFree(dom);
        return r;
}

int libvirt_domain_get_policy(virConnectPtr conn, const char *domain, unsigned flags, char **ret) {
        _cleanup_free_ char *xml = NULL;
        virDomainPtr dom;
        int r = 0;

        if (!conn || !domain || !ret)
                return -EINVAL;
        dom = lookup_domain(conn, domain);
        if (!dom)
                return libvirt_error(LOG_DEBUG, domain, "looking up the domain");
        *ret = NULL;
        xml = virDomainGetMetadata(dom, VIR_DOMAIN_METADATA_ELEMENT, RS_LIBVIRT_METADATA_URI, flags);
        if (!xml) {
                virErrorPtr e = virGetLastError();
                if (!e || e->code != VIR_ERR_NO_DOMAIN_METADATA)
                        r = libvirt_error(LOG_WARNING, domain, "reading the rightsize metadata");
        } else
                r = rs_libvirt_metadata_parse(xml, ret);
        virDomainFree(dom);
        return r;
}
