/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* daemon/group-cache.c: the read group is looked up at most once a minute, not on every D-Bus
 * read; a missing group is remembered too, and a new name or a reload looks again. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/group-cache.h"
#include "tests/lib/check-run.h"

static unsigned lookups;
static bool group_exists;

static int fake_lookup(const char *name, gid_t *ret) {
        lookups++;
        if (!group_exists || strcmp(name, "rightsize") != 0)
                return -ENOENT;
        *ret = 4242;
        return 0;
}

START_TEST(test_cached_for_a_minute) {
        GroupCache c = { .lookup = fake_lookup };
        gid_t gid = 0;
        uint64_t t = 1000 * USEC_PER_SEC;

        lookups = 0;
        group_exists = true;
        for (unsigned i = 0; i < 1000; i++) { /* a client reading as fast as it can */
                ck_assert_int_eq(group_cache_get(&c, "rightsize", t + i * USEC_PER_MSEC, &gid), 0);
                ck_assert_uint_eq(gid, 4242);
        }
        ck_assert_uint_eq(lookups, 1);

        /* A minute on: looked up again (the group may have been renumbered). */
        ck_assert_int_eq(group_cache_get(&c, "rightsize", t + GROUP_CACHE_TTL_USEC, &gid), 0);
        ck_assert_uint_eq(lookups, 2);

        /* Another name is looked up at once. */
        ck_assert_int_eq(group_cache_get(&c, "other", t + GROUP_CACHE_TTL_USEC, &gid), -ENOENT);
        ck_assert_uint_eq(lookups, 3);
        group_cache_clear(&c);
}
END_TEST

START_TEST(test_missing_group_remembered_until_cleared) {
        GroupCache c = { .lookup = fake_lookup };
        gid_t gid = 0;
        uint64_t t = 5 * USEC_PER_SEC;

        lookups = 0;
        group_exists = false;
        for (unsigned i = 0; i < 100; i++)
                ck_assert_int_eq(group_cache_get(&c, "rightsize", t + i, &gid), -ENOENT);
        ck_assert_uint_eq(lookups, 1);

        /* Created meanwhile (the package's sysusers), and a reload clears the cache. */
        group_exists = true;
        group_cache_clear(&c);
        ck_assert_int_eq(group_cache_get(&c, "rightsize", t + 200, &gid), 0);
        ck_assert_uint_eq(gid, 4242);
        ck_assert_uint_eq(lookups, 2);
        group_cache_clear(&c);
}
END_TEST

START_TEST(test_real_lookup) {
        GroupCache c = {};
        gid_t gid = 42;

        ck_assert_int_eq(group_cache_get(&c, "root", 1, &gid), 0);
        ck_assert_uint_eq(gid, 0);
        ck_assert_int_eq(group_cache_get(&c, "no-such-group-rightsize-test", 1, &gid), -ENOENT);
        group_cache_clear(&c);
}
END_TEST

int main(void) {
        return check_run_case("daemon-group-cache", "group-cache", NULL, NULL, 30,
                              CHECK_TESTS(test_cached_for_a_minute, test_missing_group_remembered_until_cleared,
                                          test_real_lookup));
}
