/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsizectl enable|disable: a domain's rightsize policy in its libvirt metadata element,
 * written and read on a connection of the caller's own (no backend, no records), live and in
 * the persistent config as the domain has them. */
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
