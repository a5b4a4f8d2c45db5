/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* common/utf8.c: what goes on D-Bus is valid UTF-8, and text cut at a byte count stays valid. */

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "common/utf8.h"
#include "tests/lib/check-run.h"

START_TEST(test_is_valid) {
        static const char *const valid[] = {
                "", "plain", "caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x90\xa7", "\xed\x9f\xbf", "\xf4\x8f\xbf\xbf",
        };
        static const char *const invalid[] = {
                "\xff",             /* never in UTF-8 */
                "caf\xc3",          /* cut after the lead byte */
                "\xe2\x82",         /* cut after two of three */
                "\x80",             /* a continuation alone */
                "\xc0\xaf",         /* overlong '/' */
                "\xe0\x80\xaf",     /* overlong, three bytes */
                "\xed\xa0\x80",     /* a surrogate */
                "\xf4\x90\x80\x80", /* past U+10FFFF */
                "ok\xfe" "ok",
        };

        for (size_t i = 0; i < ARRAY_SIZE(valid); i++)
                ck_assert_msg(utf8_is_valid(valid[i]), "valid[%zu]", i);
        for (size_t i = 0; i < ARRAY_SIZE(invalid); i++)
                ck_assert_msg(!utf8_is_valid(invalid[i]), "invalid[%zu]", i);
}
END_TEST

START_TEST(test_escape_invalid) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "plain", "plain" },
                { "caf\xc3\xa9", "caf\xc3\xa9" },
                { "vm-\xff.qmp", "vm-\xef\xbf\xbd.qmp" },
                /* every byte that begins no valid character is one U+FFFD */
                { "caf\xc3", "caf\xef\xbf\xbd" },
                { "\xe2\x82x", "\xef\xbf\xbd\xef\xbf\xbdx" },
                { "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                _cleanup_free_ char *out = utf8_escape_invalid(cases[i].in);

                ck_assert_ptr_nonnull(out);
                ck_assert_str_eq(out, cases[i].out);
                ck_assert(utf8_is_valid(out));
        }
}
END_TEST

START_TEST(test_drop_incomplete_tail) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "", "" },
                { "abc", "abc" },
                { "caf\xc3\xa9", "caf\xc3\xa9" },
                { "caf\xc3", "caf" },
                { "x\xe2\x82", "x" },
                { "x\xe2", "x" },
                { "x\xf0\x9f\x90", "x" },
                { "x\xf0\x9f\x90\xa7", "x\xf0\x9f\x90\xa7" },
        };

        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char buf[16];

                strcpy(buf, cases[i].in);
                utf8_drop_incomplete_tail(buf);
                ck_assert_str_eq(buf, cases[i].out);
        }
}
END_TEST

/* The agent's error text in a 96-byte buffer: wherever the cut falls in a character, the
 * result is valid and keeps every whole character that fits. */
START_TEST(test_snprintf_cuts_at_characters) {
        static const char *const chars[] = { "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x90\xa7" };
        char text[256], buf[96];

        for (size_t c = 0; c < ARRAY_SIZE(chars); c++)
                for (size_t shift = 0; shift < 4; shift++) {
                        size_t n = 0;

                        memset(text, 'a', 90 + shift);
                        n = 90 + shift;
                        for (int k = 0; k < 4; k++)
                                n += (size_t) sprintf(text + n, "%s", chars[c]);
                        ck_assert_int_eq(utf8_snprintf(buf, sizeof(buf), "%s", text), (int) n);
                        ck_assert_msg(utf8_is_valid(buf), "char %zu shift %zu", c, shift);
                        ck_assert_uint_le(strlen(buf), sizeof(buf) - 1);
                        ck_assert_uint_gt(strlen(buf), sizeof(buf) - 1 - strlen(chars[c]));
                        ck_assert(strncmp(buf, text, strlen(buf)) == 0);
                }
        /* what fits is left alone */
        ck_assert_int_eq(utf8_snprintf(buf, sizeof(buf), "caf%s", "\xc3\xa9"), 5);
        ck_assert_str_eq(buf, "caf\xc3\xa9");
}
END_TEST

int main(void) {
        return check_run_case("utf8", "utf8", NULL, NULL, 0,
                              CHECK_TESTS(test_is_valid, test_escape_invalid, test_drop_incomplete_tail,
                                          test_snprintf_cuts_at_characters));
}
