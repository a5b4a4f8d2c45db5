/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A guest's fault as data (daemon/guest-fault.h): every kind has a name, a text and a state, and
 * what the daemon decides (the state, whether an episode begins) follows the kind, never the
 * words of the text. */

#include <check.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/guest-fault.h"
#include "tests/lib/check-run.h"

START_TEST(test_every_kind_has_a_name) {
        for (GuestFault a = 0; a < _GUEST_FAULT_MAX; a++) {
                const char *name = guest_fault_to_string(a);
                ck_assert_msg(name && name[0], "fault kind %d has no name", (int) a);
                for (GuestFault b = 0; b < a; b++)
                        ck_assert_msg(strcmp(name, guest_fault_to_string(b)) != 0, "kinds %d and %d share the name %s",
                                      (int) a, (int) b, name);
        }
        ck_assert_ptr_null(guest_fault_to_string(_GUEST_FAULT_MAX));
        ck_assert_ptr_null(guest_fault_to_string((GuestFault) -1));
}
END_TEST

START_TEST(test_every_kind_has_a_text_and_a_state) {
        const char *states[8];
        size_t n = guest_fault_all_states(states, ARRAY_SIZE(states));

        for (GuestFault k = 0; k < _GUEST_FAULT_MAX; k++) {
                char text[64];
                int r = guest_fault_format(k, "detail", text, sizeof(text));
                ck_assert_int_gt(r, 0);
                ck_assert_msg(strstr(text, "detail"), "kind %s drops its detail: \"%s\"", guest_fault_to_string(k), text);
                const char *state = guest_fault_state(k);
                bool listed = false;
                for (size_t i = 0; i < n; i++)
                        listed = listed || strcmp(states[i], state) == 0;
                ck_assert_msg(listed, "kind %s's state %s is not among the fault states", guest_fault_to_string(k), state);
        }
        /* Each state once, and no more than the kinds name. */
        ck_assert_uint_eq(n, 2);
        ck_assert_str_ne(states[0], states[1]);
}
END_TEST

/* The texts an operator has always read stay the same. */
START_TEST(test_texts) {
        char text[128];

        guest_fault_format(GUEST_FAULT_SKIPPED, "no balloon device", text, sizeof(text));
        ck_assert_str_eq(text, "skipped: no balloon device");
        guest_fault_format(GUEST_FAULT_CORE_REFUSED, "Invalid argument", text, sizeof(text));
        ck_assert_str_eq(text, "the decision core refused the guest: Invalid argument");
        guest_fault_format(GUEST_FAULT_CONNECTION, "libvirt connection lost: reconnecting", text, sizeof(text));
        ck_assert_str_eq(text, "libvirt connection lost: reconnecting");
        guest_fault_format(GUEST_FAULT_BALLOON_STALLED, "balloon stopped at 1.0G", text, sizeof(text));
        ck_assert_str_eq(text, "balloon stopped at 1.0G");
        /* Cut to size, terminated. */
        guest_fault_format(GUEST_FAULT_SKIPPED, "no balloon device", text, 8);
        ck_assert_str_eq(text, "skipped");
}
END_TEST

/* The decisions follow the kind: a text that reads like another kind's changes nothing. */
START_TEST(test_decided_by_kind) {
        ck_assert_str_eq(guest_fault_state(GUEST_FAULT_SKIPPED), "skipped");
        for (GuestFault k = 0; k < _GUEST_FAULT_MAX; k++)
                if (k != GUEST_FAULT_SKIPPED)
                        ck_assert_str_eq(guest_fault_state(k), "faulty");
        /* A lost connection whose words begin like a skipped guest's is faulty all the same. */
        char text[64];
        guest_fault_format(GUEST_FAULT_CONNECTION, "skipped: not really", text, sizeof(text));
        ck_assert_str_eq(text, "skipped: not really");
        ck_assert_str_eq(guest_fault_state(GUEST_FAULT_CONNECTION), "faulty");

        /* Episodes: a skipped guest and a connecting guest's note are no fault of anyone's. */
        ck_assert(!guest_fault_is_episode(GUEST_FAULT_NONE));
        ck_assert(!guest_fault_is_episode(GUEST_FAULT_CONNECTING));
        ck_assert(!guest_fault_is_episode(GUEST_FAULT_SKIPPED));
        ck_assert(guest_fault_is_episode(GUEST_FAULT_CONNECTION));
        ck_assert(guest_fault_is_episode(GUEST_FAULT_NOT_ANSWERING));
        ck_assert(guest_fault_is_episode(GUEST_FAULT_UNTRUSTED_DATA));
        ck_assert(guest_fault_is_episode(GUEST_FAULT_BALLOON_STALLED));
        ck_assert(guest_fault_is_episode(GUEST_FAULT_NO_SIZE));
        ck_assert(guest_fault_is_episode(GUEST_FAULT_CORE_REFUSED));
        ck_assert(!guest_fault_is_episode(_GUEST_FAULT_MAX));
}
END_TEST

int main(void) {
        return check_run_case("daemon-guest-fault", "guest-fault", NULL, NULL, 0,
                              CHECK_TESTS(test_every_kind_has_a_name, test_every_kind_has_a_text_and_a_state,
                                          test_texts, test_decided_by_kind));
}
