# daemon/ build fragment (included from the top Makefile.am)

# ---- librightsized.a: the daemon's infrastructure, linked by rightsized and the tests ----
noinst_LIBRARIES += daemon/librightsized.a
daemon_librightsized_a_SOURCES = \
	daemon/log.c daemon/log.h \
	daemon/fileio.c daemon/fileio.h \
	daemon/conf.c daemon/conf.h \
	daemon/discovery.c daemon/discovery.h \
	daemon/state-file.c daemon/state-file.h \
	daemon/notify.c daemon/notify.h \
	daemon/metrics.c daemon/metrics.h
daemon_librightsized_a_CPPFLAGS = $(AM_CPPFLAGS) \
	-DRIGHTSIZE_CONF_DIR='"$(rightsizeconfdir)"'
daemon_librightsized_a_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS)

# What a program linking librightsized.a also needs.
RIGHTSIZED_LIBS = daemon/librightsized.a common/libcommon.a $(INIH_LIBS) $(JSONC_LIBS) $(LIBSYSTEMD_LIBS)

# ---- unit tests (Check) ----
daemon_tests = \
	tests/unit/test-daemon-log \
	tests/unit/test-daemon-fileio \
	tests/unit/test-daemon-config \
	tests/unit/test-daemon-discovery \
	tests/unit/test-daemon-state-file \
	tests/unit/test-daemon-notify \
	tests/unit/test-daemon-metrics \
	tests/unit/test-daemon-dbus-policy
check_PROGRAMS += $(daemon_tests)
TESTS += $(daemon_tests)

# ---- configuration, unit file, D-Bus policy ----
# Override on the make command line, e.g. for a package:
#   make install systemdsystemunitdir=/usr/lib/systemd/system dbuspolicydir=/usr/share/dbus-1/system.d
rightsizeconfdir = $(sysconfdir)/rightsize
dist_rightsizeconf_DATA = etc/rightsized.conf

# systemd also searches /usr/local/lib/systemd/system, so the default prefix works as it is.
systemdsystemunitdir = $(prefix)/lib/systemd/system
nodist_systemdsystemunit_DATA = etc/rightsized.service

dbuspolicydir = $(datadir)/dbus-1/system.d
dist_dbuspolicy_DATA = etc/org.rightsize.Manager1.conf

# polkit reads actions from $(datadir)/polkit-1/actions only under its own prefix (/usr): a
# package sets polkitactiondir=/usr/share/polkit-1/actions.
polkitactiondir = $(datadir)/polkit-1/actions
dist_polkitaction_DATA = etc/org.rightsize.policy

EXTRA_DIST += etc/rightsized.service.in
CLEANFILES += etc/rightsized.service

# The unit needs the installed path of the daemon.
etc/rightsized.service: $(top_srcdir)/etc/rightsized.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) etc && \
	sed -e 's|@sbindir[@]|$(sbindir)|g' $(top_srcdir)/etc/rightsized.service.in > $@.tmp && \
	mv $@.tmp $@

# ---- rightsized: the daemon ----
sbin_PROGRAMS += rightsized
rightsized_SOURCES = \
	daemon/rightsized.c \
	daemon/manager.c daemon/manager.h \
	daemon/manager-bus.c daemon/manager-bus.h \
	daemon/bus-polkit.c daemon/bus-polkit.h \
	daemon/guest.c daemon/guest.h \
	daemon/guest-qmp.c daemon/guest-qmp.h \
	daemon/host.c daemon/host.h \
	daemon/guest-libvirt.c daemon/guest-libvirt.h
rightsized_CPPFLAGS = $(AM_CPPFLAGS) -DRIGHTSIZE_VERSION='"$(PACKAGE_VERSION)"'
rightsized_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS) $(INIH_CFLAGS) $(LIBVIRT_CFLAGS)
# The libvirt backend comes first: it needs librightsized.a and the QMP library after it.
rightsized_LDADD = daemon/libvirt/liblibvirtbackend.a $(RIGHTSIZED_LIBS) $(POLICIES_LIBS) $(QMP_LIBS) \
	$(LIBVIRT_QEMU_LIBS) $(LIBVIRT_LIBS) -lpthread -lm
include daemon/libvirt/local.mk
