/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-parse.h"
#include "qmp/base64.h"
#include "qmp/json-containers.h"
#include "qmp/qga-client.h"

/* ---- a tolerant tag scanner: enough for libvirt's own XML, never trusting it ---- */

typedef struct XmlTag {
        const char *start; /* the '<' */
        const char *end;   /* just past the '>' */
        const char *name;
        size_t name_len;
        const char *attrs; /* from after the name ... */
        const char *attrs_end; /* ... to before '>' or '/>' */
        bool closing;          /* </name> */
        bool empty;            /* <name/> */
} XmlTag;

static bool is_space(char c) {
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* The next element tag at or after p, skipping comments, CDATA, PIs and declarations. */
static bool xml_next_tag(const char *p, const char *end, XmlTag *t) {
        const char *q;
        char quote = 0;

        for (;;) {
                if (p >= end)
                        return false;
                p = memchr(p, '<', (size_t) (end - p));
                if (!p)
                        return false;
                if (end - p >= 4 && memcmp(p, "<!--", 4) == 0) {
                        q = memmem(p + 4, (size_t) (end - p - 4), "-->", 3);
                        if (!q)
                                return false;
                        p = q + 3;
                        continue;
                }
                if (end - p >= 9 && memcmp(p, "<![CDATA[", 9) == 0) {
                        q = memmem(p + 9, (size_t) (end - p - 9), "]]>", 3);
                        if (!q)
                                return false;
                        p = q + 3;
                        continue;
                }
                if (end - p >= 2 && (p[1] == '?' || p[1] == '!')) {
                        q = memchr(p, '>', (size_t) (end - p));
                        if (!q)
                                return false;
                        p = q + 1;
                        continue;
                }
                break;
        }

        *t = (XmlTag) { .start = p };
        q = p + 1;
        if (q < end && *q == '/') {
                t->closing = true;
                q++;
        }
        t->name = q;
        while (q < end && !is_space(*q) && *q != '>' && *q != '/' && *q != '<')
                q++;
        t->name_len = (size_t) (q - t->name);
        if (t->name_len == 0)
                return false;
        t->attrs = q;
        for (; q < end; q++) {
                if (quote) {
                        if (*q == quote)
                                quote = 0;
                } else if (*q == '\'' || *q == '"')
                        quote = *q;
                else if (*q == '>')
                        break;
        }
        if (q >= end)
                return false;
        t->end = q + 1;
        t->empty = q > t->attrs && q[-1] == '/';
        t->attrs_end = t->empty ? q - 1 : q;
        return true;
}

static bool span_eq(const char *s, size_t len, const char *lit) {
        return strlen(lit) == len && memcmp(s, lit, len) == 0;
}

static bool tag_is(const XmlTag *t, const char *name) {
        return span_eq(t->name, t->name_len, name);
}

/* The value of attribute `attr` (not decoded: libvirt's values here need no entities). */
static bool tag_attr(const XmlTag *t, const char *attr, const char **ret, size_t *ret_len) {
        const char *p = t->attrs, *end = t->attrs_end;

        while (p < end) {
                const char *name, *value;
                size_t name_len;
                char quote;

                while (p < end && is_space(*p))
                        p++;
                name = p;
                while (p < end && !is_space(*p) && *p != '=')
                        p++;
                name_len = (size_t) (p - name);
                while (p < end && is_space(*p))
                        p++;
                if (p >= end || *p != '=')
                        return false;
                p++;
                while (p < end && is_space(*p))
                        p++;
                if (p >= end || (*p != '\'' && *p != '"'))
                        return false;
                quote = *p++;
                value = p;
                while (p < end && *p != quote)
                        p++;
                if (p >= end)
                        return false;
                if (span_eq(name, name_len, attr)) {
                        *ret = value;
                        *ret_len = (size_t) (p - value);
                        return true;
                }
                p++;
        }
        return false;
}

static bool tag_attr_is(const XmlTag *t, const char *attr, const char *value) {
        const char *v;
        size_t len;

        return tag_attr(t, attr, &v, &len) && span_eq(v, len, value);
}

/* The text right after a start tag, up to the next '<'. */
static void tag_text(const XmlTag *t, const char *end, const char **ret, size_t *ret_len) {
        const char *p = t->end, *q;

        if (t->empty) {
                *ret = p;
                *ret_len = 0;
                return;
        }
        q = memchr(p, '<', (size_t) (end - p));
        if (!q)
                q = end;
        *ret = p;
        *ret_len = (size_t) (q - p);
}

static int parse_u64_span(const char *s, size_t len, uint64_t *ret) {
        uint64_t v = 0;
        size_t i = 0;

        while (len > 0 && is_space(s[len - 1]))
                len--;
        while (i < len && is_space(s[i]))
                i++;
        if (i >= len)
                return -EBADMSG;
        for (; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EBADMSG;
                if (v > (UINT64_MAX - (uint64_t) (s[i] - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (s[i] - '0');
        }
        *ret = v;
        return 0;
}

/* libvirt's memory units (docs/formatdomain: "unit"); no unit means KiB. */
static int unit_scale(const char *u, size_t len, uint64_t *ret) {
        static const struct {
                const char *name;
                uint64_t scale;
        } units[] = {
                { "b", 1 },
                { "bytes", 1 },
                { "KB", 1000 },
                { "k", KIB },
                { "K", KIB },
                { "KiB", KIB },
                { "MB", 1000 * 1000 },
                { "M", MIB },
                { "m", MIB },
                { "MiB", MIB },
                { "GB", 1000 * 1000 * 1000 },
                { "G", GIB },
                { "g", GIB },
                { "GiB", GIB },
                { "TB", UINT64_C(1000) * 1000 * 1000 * 1000 },
                { "T", GIB * 1024 },
                { "t", GIB * 1024 },
                { "TiB", GIB * 1024 },
        };

        if (!u) {
                *ret = KIB;
                return 0;
        }
        for (size_t i = 0; i < ARRAY_SIZE(units); i++)
                if (span_eq(u, len, units[i].name)) {
                        *ret = units[i].scale;
                        return 0;
                }
        return -EBADMSG;
}

/* The size an element like <size unit='KiB'>2048</size> gives, in bytes. */
static int tag_size(const XmlTag *t, const char *end, uint64_t *ret) {
        const char *text, *unit = NULL;
        size_t text_len, unit_len = 0;
        uint64_t v, scale;
        int r;

        tag_text(t, end, &text, &text_len);
        r = parse_u64_span(text, text_len, &v);
        if (r < 0)
                return r;
        (void) tag_attr(t, "unit", &unit, &unit_len);
        r = unit_scale(unit, unit_len, &scale);
        if (r < 0)
                return r;
        if (v > UINT64_MAX / scale)
                return -ERANGE;
        *ret = v * scale;
        return 0;
}

/* ---- metadata ---- */

bool rs_libvirt_policy_name_is_valid(const char *name) {
        size_t len;

        if (!name)
                return false;
        len = strlen(name);
        if (len == 0 || len > RS_LIBVIRT_POLICY_NAME_MAX || name[0] == '.')
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = name[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

int rs_libvirt_metadata_format(const char *policy, char **ret) {
        char *s;

        /* Valid names need no escaping. */
        if (!rs_libvirt_policy_name_is_valid(policy))
                return -EINVAL;
        if (asprintf(&s, "<policy>%s</policy>", policy) < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int rs_libvirt_metadata_parse(const char *xml, char **ret_policy) {
        static const struct {
                const char *entity;
                char c;
        } entities[] = {
                { "&lt;", '<' }, { "&gt;", '>' }, { "&amp;", '&' }, { "&apos;", '\'' }, { "&quot;", '"' },
        };
        const char *end, *text, *p;
        size_t text_len, local_len, n = 0;
        XmlTag open, close;
        char buf[RS_LIBVIRT_POLICY_NAME_MAX + 1];
        const char *local;

        if (!xml)
                return -EBADMSG;
        end = xml + strlen(xml);
        if (!xml_next_tag(xml, end, &open) || open.closing || open.empty)
                return -EBADMSG;
        /* Whatever prefix libvirt chose, the local name is "policy". */
        local = memchr(open.name, ':', open.name_len);
        local = local ? local + 1 : open.name;
        local_len = open.name_len - (size_t) (local - open.name);
        if (!span_eq(local, local_len, "policy"))
                return -EBADMSG;
        tag_text(&open, end, &text, &text_len);
        if (!xml_next_tag(open.end, end, &close))
                return -EBADMSG;
        if (!close.closing || close.name_len != open.name_len || memcmp(close.name, open.name, open.name_len) != 0 ||
            close.start != text + text_len)
                return -EBADMSG;

        while (text_len > 0 && is_space(*text)) {
                text++;
                text_len--;
        }
        while (text_len > 0 && is_space(text[text_len - 1]))
                text_len--;
        for (p = text; p < text + text_len;) {
                char c = *p;
                if (c == '&') {
                        size_t i;
                        for (i = 0; i < ARRAY_SIZE(entities); i++) {
                                size_t l = strlen(entities[i].entity);
                                if ((size_t) (text + text_len - p) >= l && memcmp(p, entities[i].entity, l) == 0) {
                                        c = entities[i].c;
                                        p += l;
                                        break;
                                }
                        }
                        if (i == ARRAY_SIZE(entities))
                                return -EBADMSG;
                } else
                        p++;
                if (n >= RS_LIBVIRT_POLICY_NAME_MAX)
                        return -EBADMSG;
                buf[n++] = c;
        }
        buf[n] = 0;
        if (!rs_libvirt_policy_name_is_valid(buf))
                return -EBADMSG;
        *ret_policy = strdup(buf);
        return *ret_policy ? 0 : -ENOMEM;
}

/* ---- domain XML ---- */

#define XML_DEPTH_MAX 32

typedef struct XmlPath {
        const char *name[XML_DEPTH_MAX];
        size_t len[XML_DEPTH_MAX];
        size_t depth; /* may exceed XML_DEPTH_MAX; deeper levels are not remembered */
} XmlPath;

static void path_push(XmlPath *path, const XmlTag *t) {
        if (path->depth < XML_DEPTH_MAX) {
                path->name[path->depth] = t->name;
                path->len[path->depth] = t->name_len;
        }
        path->depth++;
}

static void path_pop(XmlPath *path) {
        if (path->depth > 0)
                path->depth--;
}

/* Whether the element `up` levels above the current tag is named `name` (up = 1: parent). */
static bool path_has(const XmlPath *path, size_t up, const char *name) {
        size_t i;

        if (up > path->depth)
                return false;
        i = path->depth - up;
        return i < XML_DEPTH_MAX && span_eq(path->name[i], path->len[i], name);
}

void libvirt_domain_xml_clear(LibvirtDomainXml *x) {
        for (size_t i = 0; i < x->n_virtio_mem; i++) {
                free(x->virtio_mem[i].alias);
                free(x->virtio_mem[i].device_xml);
        }
        *x = (LibvirtDomainXml) {};
}

static void virtio_mem_init(LibvirtVirtioMem *m) {
        *m = (LibvirtVirtioMem) {
                .size = QMP_VALUE_UNKNOWN,
                .block = QMP_VALUE_UNKNOWN,
                .requested = QMP_VALUE_UNKNOWN,
                .current = QMP_VALUE_UNKNOWN,
                .node = -1,
        };
}

int libvirt_domain_xml_parse(const char *xml, LibvirtDomainXml *ret) {
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};
        const char *p, *end;
        XmlPath path = {};
        XmlTag t;
        bool seen_domain = false;
        LibvirtVirtioMem *mem = NULL; /* the virtio-mem device being read */
        size_t mem_depth = 0;
        size_t device_depth = 0; /* inside any <memory> device: its depth, else 0 */
        bool device_is_dimm = false;

        if (!xml)
                return -EBADMSG;
        end = xml + strlen(xml);
        for (p = xml; xml_next_tag(p, end, &t); p = t.end) {
                if (t.closing) {
                        path_pop(&path);
                        if (device_depth > 0 && path.depth == device_depth)
                                device_depth = 0;
                        if (mem && path.depth == mem_depth) {
                                mem->device_xml = strndup(mem->device_xml, (size_t) (t.end - mem->device_xml));
                                if (!mem->device_xml)
                                        return -ENOMEM;
                                x.n_virtio_mem++;
                                mem = NULL;
                        }
                        continue;
                }
                if (path.depth == 0) {
                        if (!tag_is(&t, "domain"))
                                return -EBADMSG;
                        seen_domain = true;
                }

                /* Every memory device, whatever its model: what it takes of maxMemory and slots. */
                if (tag_is(&t, "memory") && path_has(&path, 1, "devices") && device_depth == 0 && !t.empty) {
                        device_depth = path.depth;
                        device_is_dimm = tag_attr_is(&t, "model", "dimm");
                        if (device_is_dimm || tag_attr_is(&t, "model", "nvdimm"))
                                x.dimm_count++;
                } else if (device_depth > 0 && path.depth == device_depth + 2 && path_has(&path, 1, "target") &&
                           tag_is(&t, "size")) {
                        uint64_t v;
                        /* Sums kept far from overflow: the XML is untrusted. */
                        if (tag_size(&t, end, &v) >= 0 && v < UINT64_MAX / 8) {
                                x.devices_bytes = MIN(x.devices_bytes + v, UINT64_MAX / 8);
                                if (device_is_dimm)
                                        x.dimm_bytes = MIN(x.dimm_bytes + v, UINT64_MAX / 8);
                        }
                }

                if (tag_is(&t, "memballoon") && path_has(&path, 1, "devices")) {
                        x.balloon = tag_attr_is(&t, "model", "none") ? LIBVIRT_BALLOON_NONE
                                    : (tag_attr_is(&t, "model", "virtio") ||
                                       tag_attr_is(&t, "model", "virtio-transitional") ||
                                       tag_attr_is(&t, "model", "virtio-non-transitional"))
                                            ? LIBVIRT_BALLOON_VIRTIO
                                            : LIBVIRT_BALLOON_OTHER;
                        x.free_page_reporting = tag_attr_is(&t, "freePageReporting", "on");
                        x.autodeflate = tag_attr_is(&t, "autodeflate", "on");
                } else if (tag_is(&t, "stats") && path_has(&path, 1, "memballoon")) {
                        const char *v;
                        size_t len;
                        uint64_t period;
                        if (tag_attr(&t, "period", &v, &len) && parse_u64_span(v, len, &period) >= 0)
                                x.stats_period = (unsigned) MIN(period, UINT32_MAX);
                } else if (tag_is(&t, "hostdev") && path_has(&path, 1, "devices")) {
                        if (tag_attr_is(&t, "type", "pci") || tag_attr_is(&t, "type", "mdev"))
                                x.vfio_hostdev = true;
                } else if (tag_is(&t, "target") && path_has(&path, 1, "channel") && path_has(&path, 2, "devices")) {
                        if (tag_attr_is(&t, "name", "org.qemu.guest_agent.0"))
                                x.agent_channel = true;
                } else if (tag_is(&t, "maxMemory") && path.depth == 1) {
                        const char *v;
                        size_t len;
                        uint64_t slots;
                        (void) tag_size(&t, end, &x.max_memory);
                        if (tag_attr(&t, "slots", &v, &len) && parse_u64_span(v, len, &slots) >= 0 && slots <= 256)
                                x.memory_slots = (unsigned) slots;
                } else if ((tag_is(&t, "currentMemory") || tag_is(&t, "memory")) && path.depth == 1) {
                        /* The boot sizes: <memory> the most, <currentMemory> the balloon's at boot. */
                        (void) tag_size(&t, end, tag_is(&t, "memory") ? &x.memory : &x.current_memory);
                } else if (tag_is(&t, "cell") && path_has(&path, 1, "numa")) {
                        x.numa = true;
                } else if (tag_is(&t, "memory") && path_has(&path, 1, "devices") && !mem &&
                           tag_attr_is(&t, "model", "virtio-mem") && x.n_virtio_mem < ARRAY_SIZE(x.virtio_mem) &&
                           !t.empty) {
                        mem = &x.virtio_mem[x.n_virtio_mem];
                        virtio_mem_init(mem);
                        /* Borrowed until the end tag, then copied. */
                        mem->device_xml = (char *) t.start;
                        mem_depth = path.depth;
                } else if (mem && tag_is(&t, "alias") && path.depth == mem_depth + 1) {
                        const char *v;
                        size_t len;
                        if (tag_attr(&t, "name", &v, &len) && !mem->alias) {
                                mem->alias = strndup(v, len);
                                if (!mem->alias) {
                                        mem->device_xml = NULL;
                                        return -ENOMEM;
                                }
                        }
                } else if (mem && path.depth == mem_depth + 2 && path_has(&path, 1, "target")) {
                        uint64_t v;
                        if (tag_is(&t, "size") && tag_size(&t, end, &v) >= 0)
                                mem->size = v;
                        else if (tag_is(&t, "block") && tag_size(&t, end, &v) >= 0)
                                mem->block = v;
                        else if (tag_is(&t, "requested") && tag_size(&t, end, &v) >= 0)
                                mem->requested = v;
                        else if (tag_is(&t, "current") && tag_size(&t, end, &v) >= 0)
                                mem->current = v;
                        else if (tag_is(&t, "node")) {
                                const char *s;
                                size_t len;
                                tag_text(&t, end, &s, &len);
                                if (parse_u64_span(s, len, &v) >= 0 && v < 4096)
                                        mem->node = (int) v;
                        }
                }
                if (!t.empty)
                        path_push(&path, &t);
        }
        if (mem) {
                /* Truncated inside a device: it was never copied. */
                mem->device_xml = NULL;
                free(mem->alias);
                mem->alias = NULL;
        }
        if (!seen_domain)
                return -EBADMSG;
        *ret = x;
        x = (LibvirtDomainXml) {};
        return 0;
}

const LibvirtVirtioMem *libvirt_domain_xml_find_virtio_mem(const LibvirtDomainXml *x, const char *alias) {
        for (size_t i = 0; i < x->n_virtio_mem; i++)
                if (!alias || (x->virtio_mem[i].alias && strcmp(x->virtio_mem[i].alias, alias) == 0))
                        return &x->virtio_mem[i];
        return NULL;
}

const char *libvirt_domain_xml_skip_reason(const LibvirtDomainXml *x) {
        switch (x->balloon) {
        case LIBVIRT_BALLOON_ABSENT:
                return "no balloon device";
        case LIBVIRT_BALLOON_NONE:
                return "balloon disabled (<memballoon model='none'>)";
        case LIBVIRT_BALLOON_OTHER:
                return "balloon is not virtio";
        case LIBVIRT_BALLOON_VIRTIO:
                break;
        }
        if (x->vfio_hostdev)
                return "VFIO device passthrough pins guest memory";
        return NULL;
}

int libvirt_virtio_mem_update_xml(const LibvirtVirtioMem *dev, uint64_t requested_bytes, char **ret) {
        const char *xml, *end, *p, *requested_start = NULL, *requested_end = NULL, *current_start = NULL,
                                   *current_end = NULL, *target_close = NULL;
        char repl[96];
        XmlTag t;
        size_t depth = 0;
        bool in_target = false;
        char *out;
        FILE *f;
        size_t out_size;

        if (!dev || !dev->device_xml)
                return -EINVAL;
        if (requested_bytes % KIB != 0)
                return -EINVAL;
        xml = dev->device_xml;
        end = xml + strlen(xml);
        /* Find <requested>, <current> and </target> directly in <memory><target>. */
        for (p = xml; xml_next_tag(p, end, &t); p = t.end) {
                if (t.closing) {
                        if (depth == 3 && in_target && tag_is(&t, "requested") && requested_start && !requested_end)
                                requested_end = t.end;
                        else if (depth == 3 && in_target && tag_is(&t, "current") && current_start && !current_end)
                                current_end = t.end;
                        if (depth == 2 && in_target && tag_is(&t, "target") && !target_close)
                                target_close = t.start;
                        if (depth > 0)
                                depth--;
                        continue;
                }
                if (depth == 2 && in_target && tag_is(&t, "requested") && !requested_start) {
                        requested_start = t.start;
                        if (t.empty)
                                requested_end = t.end;
                } else if (depth == 2 && in_target && tag_is(&t, "current") && !current_start) {
                        current_start = t.start;
                        if (t.empty)
                                current_end = t.end;
                }
                /* depth counts the levels we are inside: 1 = <memory>, 2 = one of its children */
                if (!t.empty) {
                        depth++;
                        if (depth == 2)
                                in_target = tag_is(&t, "target");
                }
        }
        if (!target_close || (requested_start && !requested_end) || (current_start && !current_end))
                return -EBADMSG;

        snprintf(repl, sizeof(repl), "<requested unit='KiB'>%" PRIu64 "</requested>", requested_bytes / KIB);

        f = open_memstream(&out, &out_size);
        if (!f)
                return -ENOMEM;
        /* Copy xml, replacing requested (or inserting before </target>) and dropping current. */
        for (p = xml; p < end;) {
                if (requested_start && p == requested_start) {
                        fputs(repl, f);
                        p = requested_end;
                } else if (current_start && p == current_start) {
                        p = current_end;
                } else if (!requested_start && p == target_close) {
                        fputs(repl, f);
                        fputc(*p++, f);
                } else
                        fputc(*p++, f);
        }
        if (fclose(f) != 0) {
                free(out);
                return -ENOMEM;
        }
        *ret = out;
        return 0;
}

int rs_dimm_device_xml(uint64_t bytes, int node, char **ret) {
        char *s;
        int r;

        if (bytes == 0 || bytes % KIB != 0)
                return -EINVAL;
        if (node >= 0)
                r = asprintf(&s,
                             "<memory model='dimm'><target><size unit='KiB'>%" PRIu64
                             "</size><node>%d</node></target></memory>",
                             bytes / KIB, node);
        else
                r = asprintf(&s, "<memory model='dimm'><target><size unit='KiB'>%" PRIu64 "</size></target></memory>",
                             bytes / KIB);
        if (r < 0)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int rs_virtio_mem_align(uint64_t bytes, uint64_t block, uint64_t size, uint64_t *ret) {
        uint64_t v, cap;

        if (block == 0 || (block & (block - 1)) != 0)
                return -EINVAL;
        cap = size - size % block;
        if (bytes >= cap)
                v = cap;
        else {
                v = bytes + (block - 1);
                v -= v % block;
                v = MIN(v, cap);
        }
        *ret = v;
        return 0;
}

/* ---- stats ---- */

void libvirt_stats_init(LibvirtStats *s) {
        *s = (LibvirtStats) {
                .actual = QMP_VALUE_UNKNOWN,
                .maximum = QMP_VALUE_UNKNOWN,
                .rss = QMP_VALUE_UNKNOWN,
        };
        for (size_t i = 0; i < _QMP_STAT_MAX; i++)
                s->guest.value[i] = QMP_VALUE_UNKNOWN;
}

static bool typed_param_u64(const virTypedParameter *p, uint64_t *ret) {
        switch (p->type) {
        case VIR_TYPED_PARAM_ULLONG:
                *ret = p->value.ul;
                return true;
        case VIR_TYPED_PARAM_UINT:
                *ret = p->value.ui;
                return true;
        case VIR_TYPED_PARAM_LLONG:
                if (p->value.l < 0)
                        return false;
                *ret = (uint64_t) p->value.l;
                return true;
        case VIR_TYPED_PARAM_INT:
                if (p->value.i < 0)
                        return false;
                *ret = (uint64_t) p->value.i;
                return true;
        default:
                return false;
        }
}

static uint64_t kib_to_bytes(uint64_t kib) {
        return kib > (QMP_VALUE_UNKNOWN - 1) / KIB ? QMP_VALUE_UNKNOWN : kib * KIB;
}

int libvirt_stats_map(const virTypedParameter *params, int n_params, LibvirtStats *ret) {
        /* libvirt key -> QMP stat; kib: libvirt divided QEMU's bytes by 1024. */
        static const struct {
                const char *key;
                QmpStat stat;
                bool kib;
        } map[] = {
                { "balloon.swap_in", QMP_STAT_SWAP_IN, true },
                { "balloon.swap_out", QMP_STAT_SWAP_OUT, true },
                { "balloon.major_fault", QMP_STAT_MAJOR_FAULTS, false },
                { "balloon.minor_fault", QMP_STAT_MINOR_FAULTS, false },
                { "balloon.unused", QMP_STAT_FREE_MEMORY, true },       /* MemFree */
                { "balloon.available", QMP_STAT_TOTAL_MEMORY, true },   /* MemTotal */
                { "balloon.usable", QMP_STAT_AVAILABLE_MEMORY, true },  /* MemAvailable */
                { "balloon.disk_caches", QMP_STAT_DISK_CACHES, true },
                { "balloon.hugetlb_pgalloc", QMP_STAT_HTLB_PGALLOC, false },
                { "balloon.hugetlb_pgfail", QMP_STAT_HTLB_PGFAIL, false },
        };
        int mapped = 0;

        if (!params || n_params <= 0)
                return 0;
        for (int i = 0; i < n_params; i++) {
                const virTypedParameter *p = &params[i];
                uint64_t v;

                if (strnlen(p->field, VIR_TYPED_PARAM_FIELD_LENGTH) >= VIR_TYPED_PARAM_FIELD_LENGTH)
                        continue;
                if (!typed_param_u64(p, &v))
                        continue;
                if (strcmp(p->field, "balloon.current") == 0)
                        ret->actual = kib_to_bytes(v);
                else if (strcmp(p->field, "balloon.maximum") == 0)
                        ret->maximum = kib_to_bytes(v);
                else if (strcmp(p->field, "balloon.rss") == 0)
                        ret->rss = kib_to_bytes(v);
                else if (strcmp(p->field, "balloon.last-update") == 0)
                        ret->guest.last_update = v;
                else {
                        size_t j;
                        for (j = 0; j < ARRAY_SIZE(map); j++)
                                if (strcmp(p->field, map[j].key) == 0) {
                                        ret->guest.value[map[j].stat] = map[j].kib ? kib_to_bytes(v) : v;
                                        break;
                                }
                        if (j == ARRAY_SIZE(map))
                                continue;
                }
                mapped++;
        }
        return mapped;
}

/* ---- guest agent replies ---- */

static int agent_reply_return(const char *reply, json_object **ret_root, json_object **ret_value) {
        json_object *root, *value;

        if (!reply)
                return -EBADMSG;
        /* The agent channel's caps (qga-client.h) before json-c builds anything: libvirt passes
         * replies of up to 4 MiB, which json-c could make a GiB of objects. */
        size_t len = strnlen(reply, QGA_MAX_MESSAGE + 1);
        if (len > QGA_MAX_MESSAGE || !json_containers_within(reply, len, QGA_MAX_CONTAINERS))
                return -EMSGSIZE;
        root = json_tokener_parse(reply);
        if (!root)
                return -EBADMSG;
        if (!json_object_is_type(root, json_type_object) || !json_object_object_get_ex(root, "return", &value)) {
                json_object_put(root);
                return -EBADMSG;
        }
        *ret_root = root;
        *ret_value = value;
        return 0;
}

int rs_agent_parse_file_open(const char *reply, int64_t *ret_handle) {
        json_object *root, *value;
        int r;

        r = agent_reply_return(reply, &root, &value);
        if (r < 0)
                return r;
        if (!json_object_is_type(value, json_type_int) || json_object_get_int64(value) < 0) {
                json_object_put(root);
                return -EBADMSG;
        }
        *ret_handle = json_object_get_int64(value);
        json_object_put(root);
        return 0;
}

int rs_agent_parse_osinfo(const char *reply, QgaOsInfo *ret) {
        json_object *root, *value;
        int r;

        r = agent_reply_return(reply, &root, &value);
        if (r < 0)
                return r;
        r = qga_parse_osinfo(value, ret);
        json_object_put(root);
        return r;
}

int rs_agent_parse_file_read(const char *reply, size_t max_total, char **buf, size_t *size, bool *ret_eof) {
        json_object *root, *value, *b64, *eof;
        const char *text;
        size_t text_len, got;
        char *n;
        int r;

        r = agent_reply_return(reply, &root, &value);
        if (r < 0)
                return r;
        if (!json_object_is_type(value, json_type_object) || !json_object_object_get_ex(value, "buf-b64", &b64) ||
            !json_object_is_type(b64, json_type_string) || !json_object_object_get_ex(value, "eof", &eof) ||
            !json_object_is_type(eof, json_type_boolean)) {
                r = -EBADMSG;
                goto out;
        }
        text = json_object_get_string(b64);
        text_len = (size_t) json_object_get_string_len(b64);
        /* Refuse before allocating: the reply's size is the guest's choice. */
        if (*size > max_total || text_len / 4 * 3 > max_total - *size + 3) {
                r = -EFBIG;
                goto out;
        }
        n = realloc(*buf, *size + base64_decoded_size_max(text_len) + 1);
        if (!n) {
                r = -ENOMEM;
                goto out;
        }
        *buf = n;
        r = base64_decode(text, text_len, (uint8_t *) *buf + *size, base64_decoded_size_max(text_len), &got);
        if (r < 0)
                goto out;
        if (*size + got > max_total) {
                r = -EFBIG;
                goto out;
        }
        *size += got;
        (*buf)[*size] = 0;
        *ret_eof = json_object_get_boolean(eof);
        r = 0;
out:
        json_object_put(root);
        return r;
}
