# daemon/libvirt/: the libvirt backend (see README.md here), included from daemon/local.mk

# ---- liblibvirtbackend.a: libvirt's event loop on sd-event, the backend, its pure helpers ----
noinst_LIBRARIES += daemon/libvirt/liblibvirtbackend.a
daemon_libvirt_liblibvirtbackend_a_SOURCES = \
	daemon/libvirt/libvirt-event.c daemon/libvirt/libvirt-event.h \
	daemon/libvirt/libvirt-parse.c daemon/libvirt/libvirt-parse.h \
	daemon/libvirt/libvirt-agent.c daemon/libvirt/libvirt-agent.h \
	daemon/libvirt/libvirt-connect.c daemon/libvirt/libvirt-connect.h \
	daemon/libvirt/libvirt-watchdog.c daemon/libvirt/libvirt-watchdog.h \
	daemon/libvirt/libvirt-worker.c daemon/libvirt/libvirt-worker.h \
	daemon/libvirt/libvirt-backend.c daemon/libvirt/libvirt-backend.h
daemon_libvirt_liblibvirtbackend_a_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_CFLAGS) $(QMP_CFLAGS)

# virDomainQemuAgentCommand lives in libvirt-qemu (same package, libvirt-dev).
LIBVIRT_BACKEND_LIBS = daemon/libvirt/liblibvirtbackend.a $(RIGHTSIZED_LIBS) $(QMP_LIBS) $(LIBVIRT_QEMU_LIBS) $(LIBVIRT_LIBS) -lpthread
LIBVIRT_BACKEND_CFLAGS = $(LIBVIRT_CFLAGS) $(LIBVIRT_QEMU_CFLAGS) $(QMP_CFLAGS)

EXTRA_DIST += contrib/libvirt-setup contrib/guest-domain-xml etc/libvirt-domain-example.xml

# ---- unit tests ----
check_PROGRAMS += tests/unit/test-libvirt-parse
TESTS += tests/unit/test-libvirt-parse
tests_unit_test_libvirt_parse_SOURCES = tests/unit/test-libvirt-parse.c
tests_unit_test_libvirt_parse_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_BACKEND_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_libvirt_parse_LDADD = $(LIBVIRT_BACKEND_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test-libvirt-watchdog
TESTS += tests/unit/test-libvirt-watchdog
tests_unit_test_libvirt_watchdog_SOURCES = tests/unit/test-libvirt-watchdog.c
tests_unit_test_libvirt_watchdog_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_BACKEND_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_libvirt_watchdog_LDADD = $(LIBVIRT_BACKEND_LIBS) $(CHECK_LIBS)

check_PROGRAMS += tests/unit/test-libvirt-worker
TESTS += tests/unit/test-libvirt-worker
tests_unit_test_libvirt_worker_SOURCES = tests/unit/test-libvirt-worker.c
tests_unit_test_libvirt_worker_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_BACKEND_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_libvirt_worker_LDADD = $(LIBVIRT_BACKEND_LIBS) $(CHECK_LIBS)

# The backend's worker calls against libvirt's in-process test driver (test:///default).
check_PROGRAMS += tests/unit/test-libvirt-backend-async
TESTS += tests/unit/test-libvirt-backend-async
tests_unit_test_libvirt_backend_async_SOURCES = tests/unit/test-libvirt-backend-async.c
tests_unit_test_libvirt_backend_async_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_BACKEND_CFLAGS) $(CHECK_CFLAGS)
tests_unit_test_libvirt_backend_async_LDADD = $(LIBVIRT_BACKEND_LIBS) $(CHECK_LIBS)

# ---- against a real libvirtd (started by the test through contrib/libvirt-setup) ----
check_PROGRAMS += tests/integration/test-libvirt-backend
TESTS += tests/integration/test-libvirt-backend
tests_integration_test_libvirt_backend_SOURCES = tests/integration/test-libvirt-backend.c \
	tests/integration/libvirt-test-host.c tests/integration/libvirt-test-host.h
tests_integration_test_libvirt_backend_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_BACKEND_CFLAGS) $(CHECK_CFLAGS)
tests_integration_test_libvirt_backend_LDADD = $(LIBVIRT_BACKEND_LIBS) $(CHECK_LIBS)
