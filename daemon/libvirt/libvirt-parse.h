/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Pure helpers of the libvirt backend: no libvirt connection, no I/O, no clock. The domain XML
 * and the metadata come from libvirtd and the agent replies from the guest: all are treated as
 * untrusted text (any bytes, any size), and garbage gives -EBADMSG, never a crash.
 *
 * The opt-in element, in a domain's <metadata> (see contrib/guest-domain-xml):
 *
 *     <rightsize:policy xmlns:rightsize="https://rightsize.org/xmlns/policy/1">balanced</rightsize:policy>
 *
 * Its text is the name of a policy in the policy directory. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include "qmp/qga-osinfo.h"
#include "qmp/qmp-commands.h"

#define RS_LIBVIRT_METADATA_URI "https://rightsize.org/xmlns/policy/1"
#define RS_LIBVIRT_METADATA_PREFIX "rightsize"
#define RS_LIBVIRT_POLICY_NAME_MAX 64

/* ---- metadata ---- */

/* Policy names: 1..RS_LIBVIRT_POLICY_NAME_MAX of [A-Za-z0-9._-], not starting with '.'. */
bool rs_libvirt_policy_name_is_valid(const char *name);
/* The element virDomainSetMetadata(VIR_DOMAIN_METADATA_ELEMENT) takes: "<policy>NAME</policy>"
 * (libvirt adds the namespace). -EINVAL for an invalid name. */
int rs_libvirt_metadata_format(const char *policy, char **ret);
/* The policy name from the element virDomainGetMetadata returns, whatever its prefix. Entities
 * are decoded and surrounding whitespace trimmed. -EBADMSG when it is not one element with a
 * valid policy name as its text. */
int rs_libvirt_metadata_parse(const char *xml, char **ret_policy);

/* ---- domain XML ---- */

typedef enum LibvirtBalloonModel {
        LIBVIRT_BALLOON_ABSENT, /* no <memballoon> element */
        LIBVIRT_BALLOON_NONE,   /* <memballoon model='none'> */
        LIBVIRT_BALLOON_VIRTIO, /* virtio, virtio-transitional, virtio-non-transitional */
        LIBVIRT_BALLOON_OTHER,
} LibvirtBalloonModel;

typedef struct LibvirtVirtioMem {
        char *alias;        /* "virtiomem0"; NULL before the domain runs */
        char *device_xml;   /* the whole <memory model='virtio-mem'> element, verbatim */
        uint64_t size;      /* bytes; QMP_VALUE_UNKNOWN when absent */
        uint64_t block;     /* bytes */
        uint64_t requested; /* bytes */
        uint64_t current;   /* bytes (live XML only) */
        int node;           /* -1 when absent */
} LibvirtVirtioMem;

typedef struct LibvirtDomainXml {
        LibvirtBalloonModel balloon;
        unsigned stats_period;      /* <stats period=...>, 0 when absent */
        bool free_page_reporting;
        bool autodeflate;
        bool vfio_hostdev;          /* <hostdev> of type pci or mdev: memory is pinned */
        bool agent_channel;         /* the org.qemu.guest_agent.0 channel */
        bool numa;                  /* at least one NUMA cell */
        uint64_t max_memory;        /* <maxMemory>, bytes, 0 when absent */
        uint64_t memory;            /* <memory>, bytes, 0 when absent */
        uint64_t current_memory;    /* <currentMemory>, bytes, 0 when absent (then <memory>) */
        unsigned memory_slots;      /* <maxMemory slots=...>: for DIMMs and NVDIMMs (virtio-mem
                                     * takes none), 0 when absent */
        uint64_t devices_bytes;     /* every <memory> device's <size> (virtio-mem: its whole region) */
        uint64_t dimm_bytes;        /* <memory model='dimm'> devices' sizes */
        unsigned dimm_count;        /* DIMM and NVDIMM devices: each holds a slot */
        LibvirtVirtioMem virtio_mem[4];  /* the first ones, in document order */
        size_t n_virtio_mem;
} LibvirtDomainXml;

/* Scans a domain's XML (virDomainGetXMLDesc). On success *ret owns its strings: release with
 * libvirt_domain_xml_clear(). */
int libvirt_domain_xml_parse(const char *xml, LibvirtDomainXml *ret);
void libvirt_domain_xml_clear(LibvirtDomainXml *x);
/* alias NULL: the first device. */
const LibvirtVirtioMem *libvirt_domain_xml_find_virtio_mem(const LibvirtDomainXml *x, const char *alias);
/* Why rightsize must leave the domain alone, or NULL. (Migration is seen from jobs, not XML.) */
const char *libvirt_domain_xml_skip_reason(const LibvirtDomainXml *x);

/* The device XML virDomainUpdateDeviceFlags takes to resize a virtio-mem device: libvirt wants
 * the device as it is, with only <requested> changed, so this is device_xml with its
 * <requested> replaced (or added) and <current> dropped. */
int libvirt_virtio_mem_update_xml(const LibvirtVirtioMem *dev, uint64_t requested_bytes, char **ret);
/* A DIMM for virDomainAttachDeviceFlags. node < 0 leaves <node> out. */
int rs_dimm_device_xml(uint64_t bytes, int node, char **ret);

/* The requested size for a wish of `bytes`: rounded UP to the block (a virtio-mem device is
 * never shrunk below what was asked for, it has no deflate-on-oom), then capped at size
 * (rounded down to the block). block 0 or not a power of two: -EINVAL. */
int rs_virtio_mem_align(uint64_t bytes, uint64_t block, uint64_t size, uint64_t *ret);

/* ---- stats ---- */

/* One domain's balloon stats from virConnectGetAllDomainStats(VIR_DOMAIN_STATS_BALLOON), with
 * the same meaning as the QMP path so the estimator sees one kind of sample. libvirt renames
 * QEMU's stats: balloon.unused is stat-free-memory (MemFree), balloon.available is
 * stat-total-memory (MemTotal, not MemAvailable!), balloon.usable is stat-available-memory
 * (MemAvailable). libvirt reports KiB; these are bytes (fault counters stay counts). */
typedef struct LibvirtStats {
        QmpGuestStats guest;  /* value[] in QMP's units, QMP_VALUE_UNKNOWN when absent */
        uint64_t actual;      /* balloon.current, bytes: libvirt's current memory, which counts
                               * plugged virtio-mem memory too (measured on libvirt 9.0) */
        uint64_t maximum;     /* balloon.maximum: bytes */
        uint64_t rss;         /* balloon.rss: QEMU's host RSS, bytes */
} LibvirtStats;

void libvirt_stats_init(LibvirtStats *s);
/* Maps the typed parameters of one virDomainStatsRecord; other parameters are ignored, so
 * are negative or wrong-typed values (they stay unknown). Returns the number mapped. */
int libvirt_stats_map(const virTypedParameter *params, int n_params, LibvirtStats *ret);

/* ---- guest agent replies (virDomainQemuAgentCommand) ---- */

/* Both give -EMSGSIZE for a reply past the agent's caps of the QMP path (QGA_MAX_MESSAGE
 * bytes, QGA_MAX_CONTAINERS objects and arrays), -EBADMSG for one that is not what they
 * expect. */

/* {"return": N} of guest-file-open: the handle. */
int rs_agent_parse_file_open(const char *reply, int64_t *ret_handle);
/* {"return": {"count": N, "buf-b64": "...", "eof": B}} of guest-file-read: the bytes are
 * appended to *buf (size *size, reallocated), never past max_total (-EFBIG). */
int rs_agent_parse_file_read(const char *reply, size_t max_total, char **buf, size_t *size, bool *ret_eof);
/* {"return": {...}} of guest-get-osinfo (qmp/qga-osinfo.h). */
int rs_agent_parse_osinfo(const char *reply, QgaOsInfo *ret);
