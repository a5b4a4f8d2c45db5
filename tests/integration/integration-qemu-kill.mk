# A real QEMU killed with -9 under rightsized and restarted on the same socket path, beside a
# simulated guest (issue 8). Included from tests/local.mk; needs QEMU, the test guest image,
# fake-qemu and the daemon binaries.
QEMU_KILL_INTEGRATION_TESTS = tests/integration/test-daemon-qemu-kill
check_PROGRAMS += $(QEMU_KILL_INTEGRATION_TESTS)
TESTS += $(QEMU_KILL_INTEGRATION_TESTS)

tests_integration_test_daemon_qemu_kill_SOURCES = tests/integration/test-daemon-qemu-kill.c $(GUEST_FIXTURE) \
	$(E2E_COMMON)
tests_integration_test_daemon_qemu_kill_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS) $(CHECK_CFLAGS) $(LIBSYSTEMD_CFLAGS) \
	$(JSONC_CFLAGS)
tests_integration_test_daemon_qemu_kill_LDADD = $(QMP_LIBS) $(CHECK_LIBS) $(LIBSYSTEMD_LIBS) $(JSONC_LIBS)
# The test runs the daemon it checks, and fake-qemu beside the real guest.
tests/integration/test-daemon-qemu-kill.log: rightsized$(EXEEXT) rightsizectl$(EXEEXT) tests/sim/fake-qemu$(EXEEXT)
