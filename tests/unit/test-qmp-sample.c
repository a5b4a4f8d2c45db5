/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* qmp/qmp-sample.c: what the balloon and the agent report becomes the decision core's sample,
 * field by field, and what they do not know stays unknown. */

#include <check.h>

#include "common/macro.h"
#include "qmp/qmp-sample.h"
#include "tests/lib/check-run.h"

static QmpGuestStats stats_none(void) {
        QmpGuestStats st = { .last_update = 0 };
        for (size_t i = 0; i < ARRAY_SIZE(st.value); i++)
                st.value[i] = QMP_VALUE_UNKNOWN;
        return st;
}

START_TEST(test_balloon_stats) {
        QmpGuestStats st = stats_none();
        RsSample part;

        /* Before the guest's driver reported: nothing, not zeros. */
        rs_sample_init(&part);
        st.value[QMP_STAT_TOTAL_MEMORY] = 0;
        ck_assert(!qmp_sample_from_balloon_stats(&part, &st));
        ck_assert_uint_eq(part.level[RS_LEVEL_TOTAL], RS_UNKNOWN);

        st.last_update = 1700000000;
        st.value[QMP_STAT_TOTAL_MEMORY] = 2048 * MIB;
        st.value[QMP_STAT_AVAILABLE_MEMORY] = 1024 * MIB;
        st.value[QMP_STAT_MAJOR_FAULTS] = 17;
        st.value[QMP_STAT_SWAP_IN] = 5;
        ck_assert(qmp_sample_from_balloon_stats(&part, &st));
        ck_assert_uint_eq(part.level[RS_LEVEL_TOTAL], 2048 * MIB);
        ck_assert_uint_eq(part.level[RS_LEVEL_AVAILABLE], 1024 * MIB);
        ck_assert_uint_eq(part.level[RS_LEVEL_FREE], RS_UNKNOWN);
        ck_assert_uint_eq(part.counter[RS_COUNTER_MAJOR_FAULTS], 17);
        ck_assert_uint_eq(part.counter[RS_COUNTER_SWAP_IN], 5);
        ck_assert_uint_eq(part.counter[RS_COUNTER_SWAP_OUT], RS_UNKNOWN);
        /* Nothing of the agent's. */
        ck_assert_uint_eq(part.counter[RS_COUNTER_REFAULT_FILE], RS_UNKNOWN);
        ck_assert_uint_eq(part.level[RS_LEVEL_PSI_SOME_AVG10], RS_UNKNOWN);
}
END_TEST

START_TEST(test_vmstat) {
        GuestVmstat v;
        RsSample part;

        for (size_t i = 0; i < ARRAY_SIZE(v.value); i++)
                v.value[i] = GUEST_VALUE_UNKNOWN;
        v.value[GUEST_VMSTAT_WORKINGSET_REFAULT_FILE] = 1234;
        v.value[GUEST_VMSTAT_PGMAJFAULT] = 99;
        rs_sample_init(&part);
        qmp_sample_from_vmstat(&part, &v);
        ck_assert_uint_eq(part.counter[RS_COUNTER_REFAULT_FILE], 1234);
        ck_assert_uint_eq(part.counter[RS_COUNTER_PGMAJFAULT], 99);
        ck_assert_uint_eq(part.counter[RS_COUNTER_REFAULT_ANON], RS_UNKNOWN);
        ck_assert_uint_eq(part.counter[RS_COUNTER_MAJOR_FAULTS], RS_UNKNOWN); /* the balloon's, not the agent's */
}
END_TEST

START_TEST(test_psi) {
        GuestPsi psi = {
                .some = { .known = true, .avg10 = 12.345, .total_usec = 5000 },
                .full = { .known = true, .avg10 = 250.0, .total_usec = 7000 }, /* out of range */
        };
        RsSample part;

        rs_sample_init(&part);
        qmp_sample_from_psi(&part, &psi);
        ck_assert_uint_eq(part.level[RS_LEVEL_PSI_SOME_AVG10], 1235);
        ck_assert_uint_eq(part.level[RS_LEVEL_PSI_FULL_AVG10], RS_UNKNOWN);
        ck_assert_uint_eq(part.counter[RS_COUNTER_PSI_SOME_TOTAL], 5000);
        ck_assert_uint_eq(part.counter[RS_COUNTER_PSI_FULL_TOTAL], 7000);

        /* A line that was not there gives nothing. */
        psi.full.known = false;
        rs_sample_init(&part);
        qmp_sample_from_psi(&part, &psi);
        ck_assert_uint_eq(part.counter[RS_COUNTER_PSI_FULL_TOTAL], RS_UNKNOWN);
}
END_TEST

int main(void) {
        return check_run_case("qmp-sample", "sample", NULL, NULL, 0,
                              CHECK_TESTS(test_balloon_stats, test_vmstat, test_psi));
}
