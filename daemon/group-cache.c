/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/group-cache.h"

#include <errno.h>
#include <grp.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

static int lookup_nss(const char *name, gid_t *ret) {
        char buf[16384];
        struct group gr, *found = NULL;
        int r = getgrnam_r(name, &gr, buf, sizeof(buf), &found);
        if (r != 0)
                return -r;
        if (!found)
                return -ENOENT;
        *ret = found->gr_gid;
        return 0;
}

int group_cache_get(GroupCache *c, const char *name, uint64_t now_usec, gid_t *ret) {
        bool fresh = c->name && strcmp(c->name, name) == 0 && now_usec >= c->looked_up_usec &&
                     now_usec < c->looked_up_usec + GROUP_CACHE_TTL_USEC;
        if (!fresh) {
                char *copy = strdup(name);
                if (!copy)
                        return -ENOMEM;
                free(c->name);
                c->name = copy;
                c->result = (c->lookup ?: lookup_nss)(name, &c->gid);
                c->looked_up_usec = now_usec;
        }
        if (c->result < 0)
                return c->result;
        *ret = c->gid;
        return 0;
}

void group_cache_clear(GroupCache *c) {
        free(c->name);
        c->name = NULL;
        c->result = 0;
}
