/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt backend's calls: stats collection (virConnectGetAllDomainStats with the QEMU
 * monitor and balloon reads that go with it) and the actuators (balloon target, virtio-mem
 * size, DIMM hotplug). One code path for both ways a call runs: queued on the backend's worker
 * thread with the result handed back on the loop (the _async variants), or on the caller's
 * thread (the synchronous ones). The backend and its domain records are libvirt-backend.c's
 * (libvirt-backend-internal.h). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-backend-internal.h"
#include "daemon/libvirt/libvirt-backend.h"
#include "daemon/libvirt/libvirt-worker.h"
#include "daemon/log.h"
#include "qmp/json-util.h"

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
        int r = domain_known(b, uuid, &d);

        if (r < 0)
                return r;
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
        return r;
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

int libvirt_backend_attach_dimm_async(LibvirtBackend *b, const char *uuid, uint64_t bytes, int node, bool allowed,
                                      libvirt_call_done_fn done, void *userdata) {
        BackendCall *c;
        int r;

        if (!done)
                return -EINVAL;
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
