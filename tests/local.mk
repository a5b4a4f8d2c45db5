# tests/ build fragment: integration tests against real QEMU guests.
# (Unit test rules live beside the module they test: qmp/local.mk, policies/local.mk, daemon/local.mk.)

GUEST_FIXTURE = tests/integration/guest-fixture.c tests/integration/guest-fixture.h
# What the two end-to-end tests (real guest, libvirt) share, on top of DAEMON_FIXTURE.
E2E_COMMON = tests/integration/e2e-common.c tests/integration/e2e-common.h $(DAEMON_FIXTURE)

INTEGRATION_TESTS = tests/integration/test-qmp-real-guest
check_PROGRAMS += $(INTEGRATION_TESTS)
TESTS += $(INTEGRATION_TESTS)

tests_integration_test_qmp_real_guest_SOURCES = tests/integration/test-qmp-real-guest.c $(GUEST_FIXTURE)
tests_integration_test_qmp_real_guest_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS) $(CHECK_CFLAGS)
tests_integration_test_qmp_real_guest_LDADD = $(QMP_LIBS) $(CHECK_LIBS)

# rightsized end to end on the real guest (plus --check-config); needs the daemon binary.
DAEMON_INTEGRATION_TESTS = tests/integration/test-daemon-real-guest
check_PROGRAMS += $(DAEMON_INTEGRATION_TESTS)
TESTS += $(DAEMON_INTEGRATION_TESTS)

tests_integration_test_daemon_real_guest_SOURCES = tests/integration/test-daemon-real-guest.c $(GUEST_FIXTURE) \
	$(E2E_COMMON)
tests_integration_test_daemon_real_guest_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS) $(CHECK_CFLAGS) $(LIBSYSTEMD_CFLAGS) \
	$(JSONC_CFLAGS)
tests_integration_test_daemon_real_guest_LDADD = $(QMP_LIBS) $(CHECK_LIBS) $(LIBSYSTEMD_LIBS) $(JSONC_LIBS)
# The test runs the daemon it checks.
tests/integration/test-daemon-real-guest.log: rightsized$(EXEEXT) rightsizectl$(EXEEXT)
include tests/integration/integration-libvirt.mk
include tests/integration/integration-daemon.mk
include tests/integration/integration-dimm.mk
include tests/integration/integration-polkit.mk
include tests/integration/integration-qemu-kill.mk
