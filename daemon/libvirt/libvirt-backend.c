/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt backend's connection and domain list: the open on a thread, the close callback
 * and reconnect with backoff, the domain records (opt-in metadata or manage-all) kept up to date
 * by lifecycle, metadata, balloon, migration and memory-device events, and the agent reads on a
 * managed domain. The calls that run on the worker (stats, actuators) are in
 * libvirt-backend-calls.c, rightsizectl's metadata policy in libvirt-policy.c; the types they
 * share are in libvirt-backend-internal.h. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/event-util.h"
#include "common/macro.h"
#include "daemon/libvirt/libvirt-agent.h"
#include "daemon/libvirt/libvirt-backend-internal.h"
#include "daemon/libvirt/libvirt-backend.h"
#include "daemon/libvirt/libvirt-connect.h"
#include "daemon/libvirt/libvirt-event.h"
#include "daemon/libvirt/libvirt-watchdog.h"
#include "daemon/libvirt/libvirt-worker.h"
#include "daemon/log.h"
#include "common/procfs.h"

#define BACKOFF_MIN_USEC (250 * USEC_PER_MSEC)
#define BACKOFF_MAX_USEC (30 * USEC_PER_SEC)
/* A libvirt call that holds the loop or the worker this long is cut (libvirt-watchdog.h): well
 * past what our calls take on a busy host (a DIMM attach under TCG: seconds), well inside
 * systemd's WatchdogSec=30s. Configurable ([libvirt] call-timeout). */
#define STALL_USEC_DEFAULT (15 * USEC_PER_SEC)

/* Errors are logged where they are handled; libvirt's default handler would print them all. */
static void quiet_error_handler(void *userdata _unused_, virErrorPtr error _unused_) {
}

/* -errno for a libvirt error code. */
int libvirt_errno(int code) {
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
int libvirt_error_from(int level, const char *guest, const char *what, const virError *e) {
        int r = libvirt_errno(e ? e->code : VIR_ERR_INTERNAL_ERROR);

        log_full_guest_errno(level, r, guest, NULL, "libvirt: %s: %s", what,
                             e && e->message ? e->message : "unknown error");
        return r;
}

/* The same for the calling thread's last libvirt error. */
int libvirt_error(int level, const char *guest, const char *what) {
        return libvirt_error_from(level, guest, what, virGetLastError());
}

/* ---- domain records ---- */

DomainRecord *domain_find(LibvirtBackend *b, const char *uuid) {
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

void domain_fill_info(DomainRecord *d) {
        const LibvirtVirtioMem *vm = libvirt_domain_xml_find_virtio_mem(&d->xml, NULL);

        d->info = (LibvirtDomainInfo) {
                .uuid = d->uuid,
                .name = d->name,
                .policy = d->policy,
                .skip_reason = d->skip_reason,
                .agent_channel = d->xml.agent_channel,
                .free_page_reporting = d->xml.free_page_reporting,
                .autodeflate = d->xml.autodeflate,
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
bool domain_migrating(virDomainPtr dom) {
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
void domain_refresh(LibvirtBackend *b, virDomainPtr dom, bool migrating_hint) {
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
        if (event_reset_time_relative(b->event, &b->reconnect_source, CLOCK_MONOTONIC, delay_usec, USEC_PER_MSEC,
                                      on_reconnect_timer, b, "libvirt-reconnect") < 0)
                log_error("libvirt: cannot schedule a reconnect");
}

/* After a failed call: if the connection is dead, start reconnecting now rather than wait for
 * the close callback. */
void check_alive(LibvirtBackend *b) {
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

/* ---- guest agent ---- */

/* The record of a domain rightsize may act on, or -errno. */
int domain_known(LibvirtBackend *b, const char *uuid, DomainRecord **ret) {
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
        *ret = d;
        return 0;
}

static int domain_for_action(LibvirtBackend *b, const char *uuid, DomainRecord **ret) {
        DomainRecord *d;
        int r = domain_known(b, uuid, &d);

        if (r < 0)
                return r;
        /* Events can be late: ask libvirt about a migration before touching memory. */
        if (domain_migrating(d->dom)) {
                if (!d->migrating)
                        domain_refresh(b, d->dom, true);
                return -EBUSY;
        }
        *ret = d;
        return 0;
}

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
