/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The end of every Check test program: run the suite, print Check's summary, turn the
 * result into the exit status automake's harness reads. */
#pragma once

#include <check.h>
#include <stdlib.h>

static inline int check_run_suite(Suite *s) {
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
