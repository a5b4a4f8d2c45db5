/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-parse.h"
#include "qmp/qga-client.h"
#include "tests/lib/check-run.h"

static const char domain_xml[] =
        "<domain type='qemu' id='3'>\n"
        "  <name>g</name>\n"
        "  <metadata><rightsize:policy xmlns:rightsize='https://rightsize.org/xmlns/policy/1'>balanced</rightsize:policy></metadata>\n"
        "  <maxMemory slots='4' unit='KiB'>4194304</maxMemory>\n"
        "  <memory unit='KiB'>3145728</memory>\n"
        "  <cpu><numa><cell id='0' cpus='0' memory='1048576' unit='KiB'/></numa></cpu>\n"
        "  <devices>\n"
        "    <!-- <memballoon model='none'/> in a comment does not count -->\n"
        "    <channel type='unix'><source mode='bind' path='/x'/>"
        "<target type='virtio' name='org.qemu.guest_agent.0' state='connected'/><alias name='channel0'/></channel>\n"
        "    <memballoon model='virtio' autodeflate='on' freePageReporting='on'><stats period='1'/><alias name='balloon0'/></memballoon>\n"
        "    <memory model='virtio-mem'>\n"
        "      <target>\n"
        "        <size unit='KiB'>2097152</size>\n"
        "        <node>0</node>\n"
        "        <block unit='KiB'>2048</block>\n"
        "        <requested unit='KiB'>0</requested>\n"
        "        <current unit='KiB'>0</current>\n"
        "      </target>\n"
        "      <alias name='virtiomem0'/>\n"
        "      <address type='pci' domain='0x0000' bus='0x00' slot='0x06' function='0x0'/>\n"
        "    </memory>\n"
        "  </devices>\n"
        "</domain>\n";

START_TEST(test_domain_xml) {
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};
        const LibvirtVirtioMem *m;

        ck_assert_int_eq(libvirt_domain_xml_parse(domain_xml, &x), 0);
        ck_assert_int_eq(x.balloon, LIBVIRT_BALLOON_VIRTIO);
        ck_assert_uint_eq(x.stats_period, 1);
        ck_assert(x.free_page_reporting && x.autodeflate && x.agent_channel && x.numa && !x.vfio_hostdev);
        ck_assert_uint_eq(x.max_memory, 4 * GIB);
        ck_assert_uint_eq(x.memory_slots, 4);
        ck_assert_uint_eq(x.devices_bytes, 2 * GIB); /* virtio-mem: its whole region */
        ck_assert_uint_eq(x.dimm_bytes, 0);
        ck_assert_uint_eq(x.dimm_count, 0);
        ck_assert_uint_eq(x.n_virtio_mem, 1);
        m = libvirt_domain_xml_find_virtio_mem(&x, "virtiomem0");
        ck_assert_ptr_nonnull(m);
        ck_assert_ptr_eq(libvirt_domain_xml_find_virtio_mem(&x, NULL), m);
        ck_assert_ptr_null(libvirt_domain_xml_find_virtio_mem(&x, "virtiomem1"));
        ck_assert_uint_eq(m->size, 2 * GIB);
        ck_assert_uint_eq(m->block, 2 * MIB);
        ck_assert_uint_eq(m->requested, 0);
        ck_assert_uint_eq(m->current, 0);
        ck_assert_int_eq(m->node, 0);
        ck_assert_ptr_nonnull(strstr(m->device_xml, "<alias name='virtiomem0'/>"));
        ck_assert_int_eq(strncmp(m->device_xml, "<memory model='virtio-mem'>", 27), 0);
        ck_assert_ptr_null(libvirt_domain_xml_skip_reason(&x));
}
END_TEST

/* What DIMM hotplug needs: slots, and what the memory devices already take of maxMemory. A
 * DIMM's <source> and <address> have sizes of their own that are not the device's. */
START_TEST(test_domain_xml_dimms) {
        static const char xml[] =
                "<domain type='kvm'>\n"
                "  <maxMemory slots='8' unit='GiB'>8</maxMemory>\n"
                "  <memory unit='KiB'>2621440</memory>\n"
                "  <devices>\n"
                "    <memballoon model='virtio'/>\n"
                "    <memory model='dimm' access='shared'>\n"
                "      <source><pagesize unit='KiB'>2048</pagesize></source>\n"
                "      <target><size unit='KiB'>262144</size><node>0</node></target>\n"
                "      <alias name='dimm0'/><address type='dimm' slot='0' base='0x100000000'/>\n"
                "    </memory>\n"
                "    <memory model='dimm'><target><size unit='MiB'>512</size><node>0</node></target></memory>\n"
                "    <memory model='nvdimm'><source><path>/x</path></source>"
                "<target><size unit='MiB'>128</size><node>0</node><label><size unit='KiB'>128</size></label></target></memory>\n"
                "    <memory model='virtio-mem'><target><size unit='GiB'>1</size><block unit='MiB'>2</block>"
                "<requested unit='MiB'>0</requested></target></memory>\n"
                "    <memory model='dimm'/>\n"
                "  </devices>\n"
                "</domain>\n";
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};

        ck_assert_int_eq(libvirt_domain_xml_parse(xml, &x), 0);
        ck_assert_uint_eq(x.max_memory, 8 * GIB);
        ck_assert_uint_eq(x.memory_slots, 8);
        ck_assert_uint_eq(x.dimm_bytes, 768 * MIB);
        ck_assert_uint_eq(x.dimm_count, 3); /* the NVDIMM holds a slot too; the empty element nothing */
        ck_assert_uint_eq(x.devices_bytes, 768 * MIB + 128 * MIB + 1 * GIB);
        ck_assert_uint_eq(x.n_virtio_mem, 1);
        ck_assert_uint_eq(x.virtio_mem[0].size, 1 * GIB);
        ck_assert(!x.numa);
}
END_TEST

START_TEST(test_skip_reasons) {
        LibvirtDomainXml x = {};

        ck_assert_int_eq(libvirt_domain_xml_parse("<domain><devices><memballoon model='none'/></devices></domain>", &x), 0);
        ck_assert_int_eq(x.balloon, LIBVIRT_BALLOON_NONE);
        ck_assert_ptr_nonnull(strstr(libvirt_domain_xml_skip_reason(&x), "none"));
        libvirt_domain_xml_clear(&x);
        ck_assert_int_eq(libvirt_domain_xml_parse("<domain><devices></devices></domain>", &x), 0);
        ck_assert_str_eq(libvirt_domain_xml_skip_reason(&x), "no balloon device");
        libvirt_domain_xml_clear(&x);
        ck_assert_int_eq(libvirt_domain_xml_parse("<domain><devices><memballoon model=\"virtio\"/>"
                                             "<hostdev mode='subsystem' type='pci' managed='yes'><source/></hostdev>"
                                             "</devices></domain>",
                                             &x),
                         0);
        ck_assert_ptr_nonnull(strstr(libvirt_domain_xml_skip_reason(&x), "VFIO"));
        libvirt_domain_xml_clear(&x);
        /* A USB hostdev pins nothing. */
        ck_assert_int_eq(libvirt_domain_xml_parse("<domain><devices><memballoon model='virtio'/>"
                                             "<hostdev mode='subsystem' type='usb'/></devices></domain>",
                                             &x),
                         0);
        ck_assert_ptr_null(libvirt_domain_xml_skip_reason(&x));
        libvirt_domain_xml_clear(&x);
}
END_TEST

START_TEST(test_garbage_xml) {
        static const char *const bad[] = {
                "", "<", "<>", "not xml", "<notdomain/>", "</domain>", "<domain",
                "<domain><devices><memory model='virtio-mem'><target><size unit='KiB'>2048",
                "<domain><devices><memory model='virtio-mem'><target><size unit='parsec'>1</size>",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                LibvirtDomainXml x = {};
                if (libvirt_domain_xml_parse(bad[i], &x) == 0) {
                        /* Tolerated, but nothing half-read may survive. */
                        for (size_t j = 0; j < x.n_virtio_mem; j++)
                                ck_assert_ptr_nonnull(x.virtio_mem[j].device_xml);
                        libvirt_domain_xml_clear(&x);
                }
        }
        ck_assert_int_eq(libvirt_domain_xml_parse(NULL, &(LibvirtDomainXml) {}), -EBADMSG);
        ck_assert_int_eq(libvirt_domain_xml_parse("<notdomain/>", &(LibvirtDomainXml) {}), -EBADMSG);
}
END_TEST

START_TEST(test_virtio_mem_update) {
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};
        _cleanup_free_ char *u = NULL, *u2 = NULL;
        LibvirtDomainXml y = {};

        ck_assert_int_eq(libvirt_domain_xml_parse(domain_xml, &x), 0);
        ck_assert_int_eq(libvirt_virtio_mem_update_xml(&x.virtio_mem[0], 302 * MIB, &u), 0);
        ck_assert_ptr_nonnull(strstr(u, "<requested unit='KiB'>309248</requested>"));
        ck_assert_ptr_null(strstr(u, "<current"));
        ck_assert_ptr_null(strstr(u, "<requested unit='KiB'>0</requested>"));
        ck_assert_ptr_nonnull(strstr(u, "<block unit='KiB'>2048</block>"));
        ck_assert_ptr_nonnull(strstr(u, "<alias name='virtiomem0'/>"));
        /* The result reads back as the same device with the new size. */
        {
                _cleanup_free_ char *wrapped = NULL;
                ck_assert_int_ge(asprintf(&wrapped, "<domain><devices>%s</devices></domain>", u), 0);
                ck_assert_int_eq(libvirt_domain_xml_parse(wrapped, &y), 0);
                ck_assert_uint_eq(y.virtio_mem[0].requested, 302 * MIB);
                ck_assert_uint_eq(y.virtio_mem[0].size, 2 * GIB);
                ck_assert_uint_eq(y.virtio_mem[0].current, QMP_VALUE_UNKNOWN);
                /* No <requested> at all: it is added inside <target>. */
                ck_assert_int_eq(libvirt_virtio_mem_update_xml(&(LibvirtVirtioMem) {
                                                                  .device_xml = (char *) "<memory model='virtio-mem'><target><size>4</size></target></memory>" },
                                                          4 * MIB, &u2),
                                 0);
                ck_assert_str_eq(u2, "<memory model='virtio-mem'><target><size>4</size><requested unit='KiB'>4096</requested></target></memory>");
                libvirt_domain_xml_clear(&y);
        }
        ck_assert_int_eq(libvirt_virtio_mem_update_xml(&x.virtio_mem[0], 1000, &u2), -EINVAL);
}
END_TEST

START_TEST(test_align) {
        uint64_t v;

        ck_assert_int_eq(rs_virtio_mem_align(300 * MIB + 1, 2 * MIB, 2 * GIB, &v), 0);
        ck_assert_uint_eq(v, 302 * MIB);
        ck_assert_int_eq(rs_virtio_mem_align(300 * MIB, 2 * MIB, 2 * GIB, &v), 0);
        ck_assert_uint_eq(v, 300 * MIB);
        ck_assert_int_eq(rs_virtio_mem_align(0, 2 * MIB, 2 * GIB, &v), 0);
        ck_assert_uint_eq(v, 0);
        ck_assert_int_eq(rs_virtio_mem_align(UINT64_MAX, 2 * MIB, 2 * GIB, &v), 0);
        ck_assert_uint_eq(v, 2 * GIB);
        ck_assert_int_eq(rs_virtio_mem_align(5 * MIB, 2 * MIB, 5 * MIB, &v), 0);
        ck_assert_uint_eq(v, 4 * MIB);
        ck_assert_int_eq(rs_virtio_mem_align(1, 0, 2 * GIB, &v), -EINVAL);
        ck_assert_int_eq(rs_virtio_mem_align(1, 3 * MIB, 2 * GIB, &v), -EINVAL);
}
END_TEST

START_TEST(test_metadata) {
        _cleanup_free_ char *f = NULL;
        char *p = NULL;

        ck_assert_int_eq(rs_libvirt_metadata_format("balanced", &f), 0);
        ck_assert_str_eq(f, "<policy>balanced</policy>");
        ck_assert_int_eq(rs_libvirt_metadata_format("../x", &p), -EINVAL);
        ck_assert_int_eq(rs_libvirt_metadata_format("a b", &p), -EINVAL);
        ck_assert_int_eq(rs_libvirt_metadata_format("", &p), -EINVAL);

        ck_assert_int_eq(rs_libvirt_metadata_parse("<rightsize:policy xmlns:rightsize=\"https://rightsize.org/xmlns/policy/1\">"
                                                   "balanced</rightsize:policy>",
                                                   &p),
                         0);
        ck_assert_str_eq(p, "balanced");
        free(p);
        ck_assert_int_eq(rs_libvirt_metadata_parse("<policy xmlns='u'>\n  fast-1.2_x \n</policy>", &p), 0);
        ck_assert_str_eq(p, "fast-1.2_x");
        free(p);
        ck_assert_int_eq(rs_libvirt_metadata_parse("<policy>bal&amp;anced</policy>", &p), -EBADMSG);
        ck_assert_int_eq(rs_libvirt_metadata_parse("<policy>a/b</policy>", &p), -EBADMSG);
        ck_assert_int_eq(rs_libvirt_metadata_parse("<policy><x/>a</policy>", &p), -EBADMSG);
        ck_assert_int_eq(rs_libvirt_metadata_parse("<other>a</other>", &p), -EBADMSG);
        ck_assert_int_eq(rs_libvirt_metadata_parse("<policy>a</other>", &p), -EBADMSG);
        ck_assert_int_eq(rs_libvirt_metadata_parse("<policy></policy>", &p), -EBADMSG);
        ck_assert_int_eq(rs_libvirt_metadata_parse("<policy>", &p), -EBADMSG);
        ck_assert_int_eq(rs_libvirt_metadata_parse(NULL, &p), -EBADMSG);
        {
                char big[256];
                memset(big, 'a', sizeof(big));
                memcpy(big, "<policy>", 8);
                memcpy(big + 200, "</policy>", 10);
                ck_assert_int_eq(rs_libvirt_metadata_parse(big, &p), -EBADMSG);
        }
}
END_TEST

static void set_ull(virTypedParameter *p, const char *field, unsigned long long v) {
        memset(p, 0, sizeof(*p));
        strncpy(p->field, field, VIR_TYPED_PARAM_FIELD_LENGTH - 1);
        p->type = VIR_TYPED_PARAM_ULLONG;
        p->value.ul = v;
}

START_TEST(test_stats_map) {
        virTypedParameter p[16];
        LibvirtStats s;
        int n = 0;

        set_ull(&p[n++], "balloon.current", 786432);
        set_ull(&p[n++], "balloon.maximum", 1048576);
        set_ull(&p[n++], "balloon.unused", 100000);     /* MemFree */
        set_ull(&p[n++], "balloon.available", 996732);  /* MemTotal */
        set_ull(&p[n++], "balloon.usable", 883472);     /* MemAvailable */
        set_ull(&p[n++], "balloon.swap_in", 8);
        set_ull(&p[n++], "balloon.major_fault", 7);
        set_ull(&p[n++], "balloon.minor_fault", 946);
        set_ull(&p[n++], "balloon.disk_caches", 9384);
        set_ull(&p[n++], "balloon.rss", 269668);
        set_ull(&p[n++], "balloon.last-update", 1796294546);
        set_ull(&p[n++], "balloon.something-new", 5);
        p[n] = p[0];
        strcpy(p[n].field, "balloon.swap_out");
        p[n].type = VIR_TYPED_PARAM_LLONG;
        p[n++].value.l = -1; /* negative: stays unknown */
        p[n] = p[0];
        strcpy(p[n].field, "balloon.hugetlb_pgalloc");
        p[n].type = VIR_TYPED_PARAM_STRING; /* wrong type: ignored */
        p[n++].value.s = NULL;

        libvirt_stats_init(&s);
        ck_assert_int_eq(libvirt_stats_map(p, n, &s), 11);
        ck_assert_uint_eq(s.actual, 768 * MIB);
        ck_assert_uint_eq(s.maximum, 1 * GIB);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_FREE_MEMORY], 100000 * KIB);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_TOTAL_MEMORY], 996732 * KIB);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_AVAILABLE_MEMORY], 883472 * KIB);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_SWAP_IN], 8 * KIB);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_MAJOR_FAULTS], 7);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_MINOR_FAULTS], 946);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_DISK_CACHES], 9384 * KIB);
        ck_assert_uint_eq(s.rss, 269668 * KIB);
        ck_assert_uint_eq(s.guest.last_update, 1796294546);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_SWAP_OUT], QMP_VALUE_UNKNOWN);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_HTLB_PGALLOC], QMP_VALUE_UNKNOWN);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_OOM_KILLS], QMP_VALUE_UNKNOWN);

        libvirt_stats_init(&s);
        ck_assert_int_eq(libvirt_stats_map(NULL, 0, &s), 0);
        /* A huge KiB value must not wrap into a small byte count. */
        set_ull(&p[0], "balloon.unused", UINT64_MAX / 2);
        ck_assert_int_eq(libvirt_stats_map(p, 1, &s), 1);
        ck_assert_uint_eq(s.guest.value[QMP_STAT_FREE_MEMORY], QMP_VALUE_UNKNOWN);
}
END_TEST

START_TEST(test_agent_replies) {
        int64_t h;
        char *buf = NULL;
        size_t size = 0;
        bool eof = false;

        ck_assert_int_eq(rs_agent_parse_file_open("{\"return\": 1000}", &h), 0);
        ck_assert_int_eq(h, 1000);
        ck_assert_int_eq(rs_agent_parse_file_open("{\"return\": \"x\"}", &h), -EBADMSG);
        ck_assert_int_eq(rs_agent_parse_file_open("{\"error\": {}}", &h), -EBADMSG);
        ck_assert_int_eq(rs_agent_parse_file_open("garbage", &h), -EBADMSG);

        ck_assert_int_eq(rs_agent_parse_file_read("{\"return\":{\"count\":6,\"buf-b64\":\"cGdmYXVs\",\"eof\":false}}", 64,
                                                  &buf, &size, &eof),
                         0);
        ck_assert(!eof);
        ck_assert_int_eq(rs_agent_parse_file_read("{\"return\":{\"count\":4,\"buf-b64\":\"dCAxMA==\",\"eof\":true}}", 64,
                                                  &buf, &size, &eof),
                         0);
        ck_assert(eof);
        ck_assert_uint_eq(size, 10);
        ck_assert_str_eq(buf, "pgfault 10");
        ck_assert_int_eq(rs_agent_parse_file_read("{\"return\":{\"count\":6,\"buf-b64\":\"cGdmYXVs\",\"eof\":true}}", 12,
                                                  &buf, &size, &eof),
                         -EFBIG);
        ck_assert_int_eq(rs_agent_parse_file_read("{\"return\":{\"buf-b64\":\"!!!!\",\"eof\":true}}", 64, &buf, &size, &eof),
                         -EBADMSG);
        ck_assert_int_eq(rs_agent_parse_file_read("{\"return\":{\"buf-b64\":\"cGdm\"}}", 64, &buf, &size, &eof), -EBADMSG);
        ck_assert_uint_eq(size, 10);
        free(buf);
}
END_TEST

/* guest-get-osinfo through libvirt: qemu-ga for Windows' reply (qga/commands-win32.c), Linux's,
 * and what is not one, with the same caps as the other replies. */
START_TEST(test_agent_osinfo) {
        QgaOsInfo os;

        ck_assert_int_eq(rs_agent_parse_osinfo("{\"return\": {\"kernel-version\": \"10.0\", \"kernel-release\": \"20348\", "
                                               "\"machine\": \"x86_64\", \"id\": \"mswindows\", \"name\": \"Microsoft Windows\", "
                                               "\"pretty-name\": \"Windows Server 2022 Datacenter\", \"version\": \"N/A\", "
                                               "\"version-id\": \"N/A\", \"variant\": \"server\", \"variant-id\": \"server\"}}",
                                               &os),
                         0);
        ck_assert_int_eq(os.family, QGA_OS_WINDOWS);
        ck_assert_str_eq(os.kernel_release, "20348");
        ck_assert_int_eq(rs_agent_parse_osinfo("{\"return\": {\"id\": \"debian\", \"kernel-release\": \"6.1.0-18-amd64\"}}",
                                               &os),
                         0);
        ck_assert_int_eq(os.family, QGA_OS_OTHER);
        ck_assert_int_eq(rs_agent_parse_osinfo("{\"return\": {\"id\": 1}}", &os), -EBADMSG);
        ck_assert_int_eq(rs_agent_parse_osinfo("{\"return\": 7}", &os), -EBADMSG);
        ck_assert_int_eq(rs_agent_parse_osinfo("{\"error\": {\"class\": \"CommandNotFound\"}}", &os), -EBADMSG);
        ck_assert_int_eq(rs_agent_parse_osinfo(NULL, &os), -EBADMSG);

        char flood[256] = "{\"return\": {\"id\": \"mswindows\"}, \"x\": [";
        for (unsigned i = 0; i < QGA_MAX_CONTAINERS; i++)
                strcat(flood, i > 0 ? ",{}" : "{}");
        strcat(flood, "]}");
        ck_assert_int_eq(rs_agent_parse_osinfo(flood, &os), -EMSGSIZE);
}
END_TEST

/* The agent's caps of the QMP path hold here too: libvirt lets replies of 4 MiB through. */
START_TEST(test_agent_reply_caps) {
        size_t n, size = QGA_MAX_MESSAGE + 1024;
        _cleanup_free_ char *big = malloc(size + 8), *flood = NULL;
        char *buf = NULL, many[256];
        size_t got = 0;
        bool eof = false;
        int64_t h;

        /* a well-formed read reply, past the byte cap */
        n = (size_t) sprintf(big, "{\"return\":{\"count\":1,\"eof\":true,\"buf-b64\":\"");
        memset(big + n, 'A', (size - n) / 4 * 4);
        strcpy(big + n + (size - n) / 4 * 4, "\"}}");
        ck_assert_int_eq(rs_agent_parse_file_read(big, 1024 * 1024, &buf, &got, &eof), -EMSGSIZE);
        ck_assert_ptr_null(buf);

        /* a full 64 KiB chunk, the largest real reply, is within it */
        n = (size_t) sprintf(big, "{\"return\":{\"count\":65536,\"eof\":true,\"buf-b64\":\"");
        memset(big + n, 'A', 87380);
        strcpy(big + n + 87380, "AA==\"}}");
        ck_assert_int_eq(rs_agent_parse_file_read(big, 1024 * 1024, &buf, &got, &eof), 0);
        ck_assert_uint_eq(got, 65536);
        free(buf);

        /* objects and arrays: the reply, its array and 15 more pass, one more does not */
        n = (size_t) sprintf(many, "{\"return\": 7, \"x\": [");
        for (unsigned i = 0; i < QGA_MAX_CONTAINERS - 2; i++)
                n += (size_t) sprintf(many + n, i > 0 ? ",{}" : "{}");
        strcpy(many + n, "]}");
        ck_assert_int_eq(rs_agent_parse_file_open(many, &h), 0);
        ck_assert_int_eq(h, 7);
        ck_assert_int_gt(asprintf(&flood, "{\"return\": 7, \"x\": [{},%s", many + strlen("{\"return\": 7, \"x\": [")), 0);
        ck_assert_int_eq(rs_agent_parse_file_open(flood, &h), -EMSGSIZE);
}
END_TEST

int main(void) {
        return check_run_case("libvirt-parse", "pure", NULL, NULL, 0,
                              CHECK_TESTS(test_domain_xml, test_domain_xml_dimms, test_skip_reasons, test_garbage_xml,
                                          test_virtio_mem_update, test_align, test_metadata, test_stats_map,
                                          test_agent_replies, test_agent_osinfo, test_agent_reply_caps));
}
