# rightsized end to end on a libvirt domain (included from tests/local.mk). The test starts
# libvirtd through contrib/libvirt-setup and runs the daemon and rightsizectl it checks.
check_PROGRAMS += tests/integration/test-daemon-libvirt
TESTS += tests/integration/test-daemon-libvirt
LIBVIRT_TEST_HOST = tests/integration/libvirt-test-host.c tests/integration/libvirt-test-host.h
tests_integration_test_daemon_libvirt_SOURCES = tests/integration/test-daemon-libvirt.c $(E2E_COMMON) $(LIBVIRT_TEST_HOST)
tests_integration_test_daemon_libvirt_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_BACKEND_CFLAGS) $(CHECK_CFLAGS) \
	$(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS)
tests_integration_test_daemon_libvirt_LDADD = $(LIBVIRT_BACKEND_LIBS) $(CHECK_LIBS) $(LIBSYSTEMD_LIBS) $(JSONC_LIBS)
tests/integration/test-daemon-libvirt.log: rightsized$(EXEEXT) rightsizectl$(EXEEXT)

# The libvirtd fault on its own: libvirtd hangs (SIGSTOP) mid-call, then dies; a simulated QMP
# guest beside the domain must not notice. Shares the libvirtd (and its lock) with the test above.
check_PROGRAMS += tests/integration/test-daemon-libvirtd-hang
TESTS += tests/integration/test-daemon-libvirtd-hang
tests_integration_test_daemon_libvirtd_hang_SOURCES = tests/integration/test-daemon-libvirtd-hang.c $(E2E_COMMON) \
	$(LIBVIRT_TEST_HOST)
tests_integration_test_daemon_libvirtd_hang_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_BACKEND_CFLAGS) $(CHECK_CFLAGS) \
	$(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS)
tests_integration_test_daemon_libvirtd_hang_LDADD = $(LIBVIRT_BACKEND_LIBS) $(CHECK_LIBS) $(LIBSYSTEMD_LIBS) $(JSONC_LIBS)
tests/integration/test-daemon-libvirtd-hang.log: rightsized$(EXEEXT) rightsizectl$(EXEEXT) tests/sim/fake-qemu$(EXEEXT)
