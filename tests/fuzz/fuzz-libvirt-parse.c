/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The libvirt backend's pure parsers (daemon/libvirt/libvirt-parse.c), fed arbitrary text: the domain
 * XML and metadata come from libvirtd, the agent replies from the guest.
 *
 * The whole input (up to its first NUL) is read as a domain XML and as a metadata element; for
 * each well-formed virtio-mem device found (shaped as libvirt writes them), the update XML made
 * for it must scan back to that device with the new requested size. The input's NUL-separated records are also agent replies: the first one to
 * guest-file-open, the others to guest-file-read, appended under a cap that must hold. The raw
 * bytes also become typed parameters for the stats mapping. */
#include <errno.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-parse.h"
#include "tests/fuzz/fuzz.h"

#define FILE_MAX 4096
#define NEW_REQUESTED (512 * MIB)

/* Whether every element in xml is closed by an end tag of its own name (libvirt's XML always is).
 * Comments, processing instructions and declarations are skipped; quoted attribute values may
 * hold '>'. */
static bool tags_balanced(const char *xml) {
        const char *names[64];
        size_t lens[64], depth = 0;

        for (const char *p = strchr(xml, '<'); p; p = strchr(p, '<')) {
                const char *name, *q;
                bool closing = false;
                char quote = 0;
                size_t len;

                if (strncmp(p, "<!--", 4) == 0) {
                        q = strstr(p + 4, "-->");
                        if (!q)
                                return false;
                        p = q + 3;
                        continue;
                }
                if (p[1] == '?' || p[1] == '!') {
                        q = strchr(p, '>');
                        if (!q)
                                return false;
                        p = q + 1;
                        continue;
                }
                name = p + 1;
                if (*name == '/') {
                        closing = true;
                        name++;
                }
                len = strcspn(name, " \t\r\n/><");
                if (len == 0)
                        return false;
                for (q = name + len; *q && (quote || *q != '>'); q++)
                        if (quote && *q == quote)
                                quote = 0;
                        else if (!quote && (*q == '\'' || *q == '"'))
                                quote = *q;
                        else if (!quote && *q == '<')
                                return false;
                if (!*q)
                        return false;
                if (closing) {
                        if (depth == 0 || lens[depth - 1] != len || memcmp(names[depth - 1], name, len) != 0)
                                return false;
                        depth--;
                } else if (q[-1] != '/') {
                        if (depth == ARRAY_SIZE(names))
                                return false;
                        names[depth] = name;
                        lens[depth++] = len;
                }
                p = q + 1;
        }
        return depth == 0;
}

static size_t count(const char *s, const char *needle) {
        size_t n = 0;

        for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
                n++;
        return n;
}

static void check_update_xml(const LibvirtVirtioMem *dev) {
        _cleanup_free_ char *update = NULL, *domain = NULL;
        LibvirtDomainXml again = {};
        int r;

        r = libvirt_virtio_mem_update_xml(dev, NEW_REQUESTED, &update);
        fuzz_assert(r == 0 || r == -EBADMSG);
        /* Malformed XML, or a device unlike any libvirt writes (one <target>, at most one
         * <requested>), only has to be survived. */
        if (r < 0 || !tags_balanced(dev->device_xml) || count(dev->device_xml, "<target") != 1 ||
            count(dev->device_xml, "<requested") > 1)
                return;
        /* Wrapped in a domain, the updated device reads back with the new size. */
        fuzz_assert(asprintf(&domain, "<domain><devices>%s</devices></domain>", update) > 0);
        r = libvirt_domain_xml_parse(domain, &again);
        fuzz_assert(r == 0);
        if (again.n_virtio_mem > 0 && again.virtio_mem[0].requested != NEW_REQUESTED)
                fprintf(stderr, "update XML lost the requested size:\n%s\n", update);
        fuzz_assert(again.n_virtio_mem == 1);
        fuzz_assert(again.virtio_mem[0].requested == NEW_REQUESTED);
        libvirt_domain_xml_clear(&again);
}

static void parse_domain(const char *xml) {
        LibvirtDomainXml x = {};
        uint64_t aligned;

        if (libvirt_domain_xml_parse(xml, &x) < 0)
                return;
        fuzz_assert(x.n_virtio_mem <= ARRAY_SIZE(x.virtio_mem));
        (void) libvirt_domain_xml_skip_reason(&x);
        for (size_t i = 0; i < x.n_virtio_mem; i++) {
                const LibvirtVirtioMem *m = &x.virtio_mem[i];

                fuzz_assert(m->device_xml);
                fuzz_assert(libvirt_domain_xml_find_virtio_mem(&x, m->alias) != NULL);
                if (rs_virtio_mem_align(NEW_REQUESTED, m->block, m->size, &aligned) == 0)
                        fuzz_assert(aligned <= m->size);
                check_update_xml(m);
        }
        libvirt_domain_xml_clear(&x);
}

static void parse_metadata(const char *xml) {
        _cleanup_free_ char *policy = NULL, *formatted = NULL, *again = NULL;

        if (rs_libvirt_metadata_parse(xml, &policy) < 0)
                return;
        fuzz_assert(rs_libvirt_policy_name_is_valid(policy));
        fuzz_assert(rs_libvirt_metadata_format(policy, &formatted) == 0);
        fuzz_assert(rs_libvirt_metadata_parse(formatted, &again) == 0);
        fuzz_assert(strcmp(policy, again) == 0);
}

static void parse_agent_replies(const uint8_t *data, size_t size) {
        _cleanup_free_ char *buf = NULL;
        const uint8_t *record;
        size_t record_len, total = 0;
        int64_t handle;
        bool first = true, eof;

        while (fuzz_next_record(&data, &size, &record, &record_len)) {
                _cleanup_free_ char *reply = fuzz_strndup(record, record_len);

                if (first) {
                        if (rs_agent_parse_file_open(reply, &handle) == 0)
                                fuzz_assert(handle >= 0);
                        first = false;
                        continue;
                }
                if (rs_agent_parse_file_read(reply, FILE_MAX, &buf, &total, &eof) == 0) {
                        fuzz_assert(total <= FILE_MAX);
                        fuzz_assert(buf[total] == '\0');
                }
        }
}

static void map_stats(const uint8_t *data, size_t size) {
        static const char *const fields[] = {
                "balloon.current", "balloon.maximum", "balloon.rss", "balloon.last-update",
                "balloon.swap_in", "balloon.unused", "balloon.available", "balloon.usable",
                "balloon.major_fault", "balloon.disk_caches", "balloon.hugetlb_pgfail", "state.state",
        };
        virTypedParameter params[16] = {};
        LibvirtStats stats;
        int n = 0;

        /* Ten bytes a parameter: field, type, eight bytes of value. */
        for (; size >= 10 && n < (int) ARRAY_SIZE(params); data += 10, size -= 10, n++) {
                virTypedParameter *p = &params[n];

                snprintf(p->field, sizeof(p->field), "%s", fields[data[0] % ARRAY_SIZE(fields)]);
                p->type = 1 + data[1] % 6; /* VIR_TYPED_PARAM_INT .. VIR_TYPED_PARAM_BOOLEAN */
                memcpy(&p->value.ul, data + 2, 8);
        }
        libvirt_stats_init(&stats);
        fuzz_assert(libvirt_stats_map(params, n, &stats) <= n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size);

        parse_domain(text);
        parse_metadata(text);
        parse_agent_replies(data, size);
        map_stats(data, size);
        return 0;
}
