# daemon/libvirt/: the libvirt backend (see README.md here), included from daemon/local.mk

# ---- liblibvirtbackend.a: libvirt's event loop on sd-event, the backend, its pure helpers, and
# the driver and guest source that make its domains the manager's guests ----
noinst_LIBRARIES += daemon/libvirt/liblibvirtbackend.a
daemon_libvirt_liblibvirtbackend_a_SOURCES = \
	daemon/libvirt/libvirt-event.c daemon/libvirt/libvirt-event.h \
	daemon/libvirt/libvirt-parse.c daemon/libvirt/libvirt-parse.h \
	daemon/libvirt/libvirt-agent.c daemon/libvirt/libvirt-agent.h \
	daemon/libvirt/libvirt-connect.c daemon/libvirt/libvirt-connect.h \
	daemon/libvirt/libvirt-watchdog.c daemon/libvirt/libvirt-watchdog.h \
	daemon/libvirt/libvirt-worker.c daemon/libvirt/libvirt-worker.h \
	daemon/libvirt/libvirt-backend.c daemon/libvirt/libvirt-backend.h \
	daemon/libvirt/libvirt-backend-internal.h \
	daemon/libvirt/libvirt-backend-calls.c \
	daemon/libvirt/libvirt-policy.c \
	daemon/libvirt/guest-libvirt.c daemon/libvirt/guest-libvirt.h
daemon_libvirt_liblibvirtbackend_a_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_CFLAGS) $(QMP_CFLAGS)

# virDomainQemuAgentCommand lives in libvirt-qemu (same package, libvirt-dev).
LIBVIRT_BACKEND_LIBS = daemon/libvirt/liblibvirtbackend.a $(RIGHTSIZED_LIBS) $(QMP_LIBS) $(LIBVIRT_QEMU_LIBS) $(LIBVIRT_LIBS) -lpthread
LIBVIRT_BACKEND_CFLAGS = $(LIBVIRT_CFLAGS) $(LIBVIRT_QEMU_CFLAGS) $(QMP_CFLAGS)

EXTRA_DIST += daemon/libvirt/README.md contrib/libvirt-setup contrib/guest-domain-xml etc/libvirt-domain-example.xml

# ---- tests: the unit ones (the backend's worker against libvirt's in-process test driver,
# test:///default, among them), and one against a real libvirtd that it starts through
# contrib/libvirt-setup ----
libvirt_tests = \
	tests/unit/test-libvirt-parse \
	tests/unit/test-libvirt-watchdog \
	tests/unit/test-libvirt-worker \
	tests/unit/test-libvirt-backend-async \
	tests/unit/test-libvirt-guests
UNIT_TESTS += $(libvirt_tests)
INTEGRATION_TESTS += tests/integration/test-libvirt-backend
