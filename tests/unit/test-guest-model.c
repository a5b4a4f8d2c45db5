/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The model itself shows what guest-lab.md measured on real guests. */
#include <check.h>
#include <stdlib.h>

#include "common/macro.h"
#include "tests/model/guest-model.h"
#include "tests/unit/check-run.h"

static void run(GuestModel *m, uint64_t target, unsigned ticks, RsSample *first, RsSample *last) {
        guest_model_set_target(m, target);
        guest_model_step(m);
        guest_model_sample(m, first);
        for (unsigned i = 0; i < ticks; i++)
                guest_model_step(m);
        guest_model_sample(m, last);
}

static double rate(const RsSample *a, const RsSample *b, RsCounter c, unsigned ticks) {
        return (double) (b->counter[c] - a->counter[c]) / (ticks * 10.0);
}

START_TEST(test_anon_squeeze_shows_in_major_faults) {
        GuestModelConfig c;
        GuestModel m;
        RsSample a, b;
        guest_model_config_default(&c, 1);
        c.swap_bytes = GIB;
        c.phases[0].anon_hot = 500 * MIB;
        guest_model_init(&m, &c);
        uint64_t ws = guest_model_working_set(&m);
        run(&m, ws + 50 * MIB, 5, &a, &b);
        ck_assert_double_lt(rate(&a, &b, RS_COUNTER_MAJOR_FAULTS, 5), 5);
        run(&m, ws - 50 * MIB, 5, &a, &b);
        ck_assert_double_gt(rate(&a, &b, RS_COUNTER_MAJOR_FAULTS, 5), 500);
        ck_assert_double_gt(rate(&a, &b, RS_COUNTER_SWAP_IN, 5), 500 * 4096);
        ck_assert_uint_eq(guest_model_actual(&m), ws - 50 * MIB);
}
END_TEST

START_TEST(test_file_thrash_invisible_to_faults) {
        GuestModelConfig c;
        GuestModel m;
        RsSample a, b;
        guest_model_config_default(&c, 2);
        c.agent = true;
        c.phases[0].anon_hot = 50 * MIB;
        c.phases[0].file_hot = 500 * MIB;
        guest_model_init(&m, &c);
        uint64_t ws = guest_model_working_set(&m);
        run(&m, ws + 50 * MIB, 5, &a, &b);
        uint64_t avail_ok = b.level[RS_LEVEL_AVAILABLE], cache_ok = b.level[RS_LEVEL_DISK_CACHES];
        run(&m, ws - 200 * MIB, 5, &a, &b);
        /* no major faults, but refaults inside, levels down and the balloon short */
        ck_assert_double_lt(rate(&a, &b, RS_COUNTER_MAJOR_FAULTS, 5), 5);
        ck_assert_double_gt(rate(&a, &b, RS_COUNTER_REFAULT_FILE, 5), 1000);
        ck_assert_uint_lt(b.level[RS_LEVEL_AVAILABLE], avail_ok / 4);
        ck_assert_uint_lt(b.level[RS_LEVEL_DISK_CACHES], cache_ok);
        ck_assert_uint_gt(guest_model_actual(&m), ws - 200 * MIB + 50 * MIB);
        ck_assert_uint_gt(b.level[RS_LEVEL_PSI_SOME_AVG10], 1000);
}
END_TEST

START_TEST(test_stream_refaults_at_every_size_without_activations) {
        GuestModelConfig c;
        GuestModel m;
        RsSample a, b;
        guest_model_config_default(&c, 3);
        c.agent = true;
        c.phases[0].anon_hot = 200 * MIB;
        c.phases[0].stream_bytes_per_sec = 50.0 * MIB;
        guest_model_init(&m, &c);
        run(&m, 2 * GIB, 5, &a, &b);
        double refault_big = rate(&a, &b, RS_COUNTER_REFAULT_FILE, 5);
        double activate_big = rate(&a, &b, RS_COUNTER_ACTIVATE_FILE, 5);
        ck_assert_double_gt(refault_big, 5000);
        ck_assert_double_lt(activate_big, refault_big / 50);
        run(&m, guest_model_working_set(&m) + 20 * MIB, 5, &a, &b);
        ck_assert_double_gt(rate(&a, &b, RS_COUNTER_REFAULT_FILE, 5), 0.7 * refault_big);
}
END_TEST

START_TEST(test_pushback_without_swap) {
        GuestModelConfig c;
        GuestModel m;
        RsSample a, b;
        guest_model_config_default(&c, 4);
        c.phases[0].anon_hot = 600 * MIB;
        guest_model_init(&m, &c);
        run(&m, 300 * MIB, 2, &a, &b);
        ck_assert_uint_ge(guest_model_actual(&m), 600 * MIB + 100 * MIB);
        ck_assert_uint_eq(m.oom_kills, 0); /* the balloon gives up, nothing is killed */
}
END_TEST

START_TEST(test_growth_without_swap_ooms) {
        GuestModelConfig c;
        GuestModel m;
        RsSample a, b;
        guest_model_config_default(&c, 5);
        c.phases[0].anon_hot = 300 * MIB;
        c.phases[1] = c.phases[0];
        c.phases[1].anon_hot = 900 * MIB;
        c.phases[1].start_tick = 5;
        c.n_phases = 2;
        guest_model_init(&m, &c);
        run(&m, 500 * MIB, 10, &a, &b);
        ck_assert_uint_gt(m.oom_kills, 0);
        c.deflate_on_oom = true;
        guest_model_init(&m, &c);
        run(&m, 500 * MIB, 10, &a, &b);
        ck_assert_uint_eq(m.oom_kills, 0);
        ck_assert_uint_gt(m.deflate_on_oom_events, 0);
        ck_assert_uint_ge(guest_model_actual(&m), 900 * MIB);
}
END_TEST

START_TEST(test_deterministic_and_reboot) {
        GuestModelConfig c;
        GuestModel m1, m2;
        RsSample a1, b1, a2, b2;
        guest_model_config_default(&c, 6);
        c.agent = true;
        c.swap_bytes = GIB;
        c.phases[0].anon_hot = 700 * MIB;
        c.reboot_tick = 8;
        guest_model_init(&m1, &c);
        guest_model_init(&m2, &c);
        run(&m1, 600 * MIB, 4, &a1, &b1);
        run(&m2, 600 * MIB, 4, &a2, &b2);
        ck_assert_mem_eq(&b1, &b2, sizeof(b1));
        run(&m1, 600 * MIB, 4, &a1, &b1);
        ck_assert_uint_lt(b1.counter[RS_COUNTER_MAJOR_FAULTS], a1.counter[RS_COUNTER_MAJOR_FAULTS]);
}
END_TEST

int main(void) {
        Suite *s = suite_create("guest-model");
        TCase *tc = tcase_create("model");
        tcase_add_test(tc, test_anon_squeeze_shows_in_major_faults);
        tcase_add_test(tc, test_file_thrash_invisible_to_faults);
        tcase_add_test(tc, test_stream_refaults_at_every_size_without_activations);
        tcase_add_test(tc, test_pushback_without_swap);
        tcase_add_test(tc, test_growth_without_swap_ooms);
        tcase_add_test(tc, test_deterministic_and_reboot);
        suite_add_tcase(s, tc);
        return check_run_suite(s);
}
