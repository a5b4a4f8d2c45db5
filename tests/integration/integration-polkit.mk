# rightsized's polkit path against a real polkitd (Debian's polkitd package) on the private bus of
# tests/integration/bus-fixture.c: polkitd runs in a mount namespace of its own where our action
# file and a test rules file replace the host's, so nothing on the host changes. Skips (77) when it
# cannot run (not root, no mount namespace, no polkitd). Included from tests/local.mk.

POLKIT_TESTS = tests/integration/test-daemon-polkit
check_PROGRAMS += $(POLKIT_TESTS)
TESTS += $(POLKIT_TESTS)

BUS_CALL = tests/integration/bus-call.c tests/integration/bus-call.h

tests_integration_test_daemon_polkit_SOURCES = tests/integration/test-daemon-polkit.c $(BUS_CALL) $(DAEMON_FIXTURE)
tests_integration_test_daemon_polkit_CFLAGS = $(DAEMON_SIM_TEST_CFLAGS)
tests_integration_test_daemon_polkit_LDADD = $(DAEMON_SIM_TEST_LDADD)

tests/integration/test-daemon-polkit.log: rightsized$(EXEEXT) rightsizectl$(EXEEXT) tests/sim/fake-qemu$(EXEEXT)

# test-daemon-dbus calls as other users through the same helper.
tests_integration_test_daemon_dbus_SOURCES += $(BUS_CALL)
