/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an operator writes into a domain's definition through the daemon, on a connection of the
 * caller's own (no backend, no records): rightsizectl enable|disable, the rightsize policy in its
 * libvirt metadata element, live and in the persistent config as the domain has them; and
 * rightsizectl recommend --apply, the next boot's size (<currentMemory>) in the persistent
 * config only. */
#include <errno.h>
#include <string.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-backend-internal.h"
#include "daemon/libvirt/libvirt-backend.h"
#include "daemon/libvirt/libvirt-parse.h"
#include "daemon/log.h"

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

int libvirt_domain_get_boot_size(virConnectPtr conn, const char *domain, uint64_t *ret_current, uint64_t *ret_memory) {
        _cleanup_(libvirt_domain_xml_clear) LibvirtDomainXml x = {};
        virDomainPtr dom;
        char *xml;
        int r;

        if (!conn || !domain)
                return -EINVAL;
        dom = lookup_domain(conn, domain);
        if (!dom)
                return libvirt_error(LOG_DEBUG, domain, "looking up the domain");
        if (virDomainIsPersistent(dom) != 1) {
                virDomainFree(dom);
                return -EOPNOTSUPP;
        }
        xml = virDomainGetXMLDesc(dom, VIR_DOMAIN_XML_INACTIVE);
        r = xml ? libvirt_domain_xml_parse(xml, &x) : libvirt_error(LOG_WARNING, domain, "reading the persistent XML");
        free(xml);
        virDomainFree(dom);
        if (r < 0)
                return r;
        if (x.memory == 0)
                return -EBADMSG;
        *ret_memory = x.memory;
        *ret_current = x.current_memory ?: x.memory;
        return 0;
}

int libvirt_domain_set_boot_size(virConnectPtr conn, const char *domain, uint64_t bytes) {
        virDomainPtr dom;
        int r = 0;

        if (!conn || !domain || bytes < 1024)
                return -EINVAL;
        dom = lookup_domain(conn, domain);
        if (!dom)
                return libvirt_error(LOG_DEBUG, domain, "looking up the domain");
        /* A transient domain has no next boot to size. */
        if (virDomainIsPersistent(dom) != 1)
                r = -EOPNOTSUPP;
        /* CONFIG only: the running guest keeps the size rightsized gives it. */
        else if (virDomainSetMemoryFlags(dom, bytes / 1024, VIR_DOMAIN_AFFECT_CONFIG) < 0)
                r = libvirt_error(LOG_WARNING, domain, "writing the next boot's memory size");
        virDomainFree(dom);
        return r;
}
