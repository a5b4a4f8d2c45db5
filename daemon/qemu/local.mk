# daemon/qemu/: plain QEMU guests over their own QMP sockets (see README.md here), included from
# daemon/local.mk

# ---- libqemuguests.a: socket discovery and trust, the QMP driver, the guest source ----
noinst_LIBRARIES += daemon/qemu/libqemuguests.a
daemon_qemu_libqemuguests_a_SOURCES = \
	daemon/qemu/discovery.c daemon/qemu/discovery.h \
	daemon/qemu/socket-trust.c daemon/qemu/socket-trust.h \
	daemon/qemu/guest-qmp.c daemon/qemu/guest-qmp.h \
	daemon/qemu/qemu-guests.c daemon/qemu/qemu-guests.h
daemon_qemu_libqemuguests_a_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS)

EXTRA_DIST += daemon/qemu/README.md

# ---- unit tests (Check) ----
qemu_tests = \
	tests/unit/test-daemon-discovery
UNIT_TESTS += $(qemu_tests)
