/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A group's gid by name, looked up at most once a minute: a lookup goes through NSS (LDAP, sssd
 * on some hosts) and blocks the event loop, and the read group is checked on every D-Bus read
 * a client, hostile or not, makes. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#define GROUP_CACHE_TTL_USEC (60 * UINT64_C(1000000))

/* 0 and the gid, or -ENOENT when there is no such group (or -errno). */
typedef int (*GroupLookupFn)(const char *name, gid_t *ret);

typedef struct GroupCache {
        char *name;              /* what was looked up, NULL: nothing yet */
        int result;              /* its outcome: 0 or -errno */
        gid_t gid;
        uint64_t looked_up_usec; /* CLOCK_MONOTONIC */
        GroupLookupFn lookup;    /* NULL: getgrnam_r() */
} GroupCache;

/* The group's gid: from the cache while the same name was looked up less than
 * GROUP_CACHE_TTL_USEC before now (a missing group too), else looked up again. */
int group_cache_get(GroupCache *c, const char *name, uint64_t now_usec, gid_t *ret);
/* Forgets the lookup (a reload: the group may have been created or renumbered). */
void group_cache_clear(GroupCache *c);
