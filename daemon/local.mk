# daemon/ build fragment (included from the top Makefile.am)

# ---- librightsized.a: the daemon's infrastructure, linked by rightsized and the tests ----
noinst_LIBRARIES += daemon/librightsized.a
daemon_librightsized_a_SOURCES = \
	daemon/log.c daemon/log.h \
	daemon/log-ratelimit.c daemon/log-ratelimit.h \
	daemon/conf.c daemon/conf.h \
	daemon/group-cache.c daemon/group-cache.h \
	daemon/state-file.c daemon/state-file.h \
	daemon/boot-history.c daemon/boot-history.h \
	daemon/state-lock.c daemon/state-lock.h \
	daemon/notify.c daemon/notify.h \
	daemon/metrics.c daemon/metrics.h \
	daemon/estimate-signal.c daemon/estimate-signal.h \
	daemon/guest-fault.c daemon/guest-fault.h
daemon_librightsized_a_CPPFLAGS = $(AM_CPPFLAGS) \
	-DRIGHTSIZE_CONF_DIR='"$(rightsizeconfdir)"'
daemon_librightsized_a_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS)

# What a program linking librightsized.a also needs.
RIGHTSIZED_LIBS = daemon/librightsized.a common/libcommon.a $(INIH_LIBS) $(JSONC_LIBS) $(LIBSYSTEMD_LIBS)

# ---- unit tests (Check) ----
daemon_tests = \
	tests/unit/test-daemon-log \
	tests/unit/test-daemon-config \
	tests/unit/test-daemon-state-file \
	tests/unit/test-daemon-boot-history \
	tests/unit/test-daemon-group-cache \
	tests/unit/test-daemon-notify \
	tests/unit/test-daemon-metrics \
	tests/unit/test-daemon-estimate-signal \
	tests/unit/test-daemon-guest-fault \
	tests/unit/test-daemon-guest-actuate \
	tests/unit/test-daemon-guest-cycle \
	tests/unit/test-daemon-guest-devices \
	tests/unit/test-daemon-guest-watch \
	tests/unit/test-daemon-manager \
	tests/unit/test-daemon-dbus-policy
UNIT_TESTS += $(daemon_tests)

# ---- configuration, unit file, D-Bus policy, polkit actions: etc/local.mk ----

# ---- libguestcore.a: the guest core, both its faces (guest.h, guest-driver.h): linked by
# rightsized, and by the tests that drive it with a fake driver ----
noinst_LIBRARIES += daemon/libguestcore.a
daemon_libguestcore_a_SOURCES = \
	daemon/guest.c daemon/guest.h daemon/guest-internal.h \
	daemon/guest-actuate.c \
	daemon/guest-agent-os.c \
	daemon/guest-save.c \
	daemon/guest-boot-history.c \
	daemon/guest-driver.h

# ---- libmanager.a: the manager and its D-Bus shell, everything of the daemon but main() and the
# list of guest sources (guest-sources.c, the one file that names the transports' rooms). A test
# defines guest_sources[] itself and drives the manager with sources of its own
# (tests/unit/test-daemon-manager.c) ----
noinst_LIBRARIES += daemon/libmanager.a
daemon_libmanager_a_SOURCES = \
	daemon/manager.c daemon/manager.h \
	daemon/manager-bus.c daemon/manager-bus.h \
	daemon/manager-bus-report.c daemon/manager-bus-report.h \
	daemon/manager-bus-recommend.c daemon/manager-bus-recommend.h \
	daemon/memory-report.c daemon/memory-report.h \
	daemon/bus-polkit.c daemon/bus-polkit.h \
	daemon/bus-caller.c daemon/bus-caller.h \
	daemon/bus-record.c daemon/bus-record.h \
	daemon/guest-source.h
daemon_libmanager_a_CPPFLAGS = $(AM_CPPFLAGS) -DRIGHTSIZE_VERSION='"$(PACKAGE_VERSION)"'

# ---- rightsized: the daemon ----
sbin_PROGRAMS += rightsized
rightsized_SOURCES = \
	daemon/rightsized.c \
	daemon/guest-sources.c
rightsized_CPPFLAGS = $(AM_CPPFLAGS) -DRIGHTSIZE_VERSION='"$(PACKAGE_VERSION)"'
rightsized_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS) $(INIH_CFLAGS) $(LIBVIRT_CFLAGS)
# The manager first, then the transports' rooms: they need the guest core, the host room,
# librightsized.a and the QMP library after them.
rightsized_LDADD = daemon/libmanager.a \
	daemon/qemu/libqemuguests.a daemon/libvirt/liblibvirtbackend.a daemon/libguestcore.a \
	$(HOST_LIBS) $(RIGHTSIZED_LIBS) \
	$(POLICIES_LIBS) $(QMP_LIBS) $(LIBVIRT_QEMU_LIBS) $(LIBVIRT_LIBS) -lpthread -lm

# The rooms: the host's own memory (host/), and one per transport (qemu/, libvirt/). Each has a
# README.md saying what it holds and what it may include.
include daemon/host/local.mk
include daemon/qemu/local.mk
include daemon/libvirt/local.mk
