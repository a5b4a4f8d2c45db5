# rightsized growing a real guest past its boot size with a hot-plugged DIMM (policy allow-dimm).
# Included from tests/local.mk; needs QEMU, the test guest image and the daemon binaries.
DIMM_INTEGRATION_TESTS = tests/integration/test-daemon-dimm
check_PROGRAMS += $(DIMM_INTEGRATION_TESTS)
TESTS += $(DIMM_INTEGRATION_TESTS)

tests_integration_test_daemon_dimm_SOURCES = tests/integration/test-daemon-dimm.c $(GUEST_FIXTURE) $(E2E_COMMON)
tests_integration_test_daemon_dimm_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS) $(CHECK_CFLAGS) $(LIBSYSTEMD_CFLAGS) \
	$(JSONC_CFLAGS)
tests_integration_test_daemon_dimm_LDADD = $(QMP_LIBS) $(CHECK_LIBS) $(LIBSYSTEMD_LIBS) $(JSONC_LIBS)
# The test runs the daemon it checks.
tests/integration/test-daemon-dimm.log: rightsized$(EXEEXT) rightsizectl$(EXEEXT)
