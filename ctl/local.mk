# ctl/: rightsizectl, the admin CLI, in a room of its own: it speaks only D-Bus to rightsized
# and links only common/ (not the daemon's library). Its tests, and the simulated guests
# (tests/sim). Included from the top Makefile.am, after daemon/local.mk.

bin_PROGRAMS += rightsizectl
rightsizectl_SOURCES = ctl/rightsizectl.c ctl/ctl-bus.c ctl/ctl-bus.h ctl/ctl-monitor.c ctl/ctl-monitor.h ctl/ctl-recommend.c ctl/ctl-recommend.h ctl/ctl-format.c ctl/ctl-format.h ctl/ctl-memory.c ctl/ctl-memory.h \
	ctl/ctl-pager.c ctl/ctl-pager.h \
	ctl/ctl-polkit-agent.c ctl/ctl-polkit-agent.h
# (the version comes in as a define: the CLI includes no config.h)
# and so does the daemon's default policy directory (etc/local.mk), for the completions' policy names
rightsizectl_CPPFLAGS = $(AM_CPPFLAGS) -DRIGHTSIZECTL_VERSION='"$(PACKAGE_VERSION)"' \
	-DRIGHTSIZECTL_POLICY_DIR='"$(rightsizepolicydir)"'
rightsizectl_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS)
rightsizectl_LDADD = common/libcommon.a $(LIBSYSTEMD_LIBS) $(JSONC_LIBS) -lm

EXTRA_DIST += ctl/README.md

UNIT_TESTS += tests/unit/test-ctl-format tests/unit/test-ctl-memory
INTEGRATION_TESTS += tests/integration/test-rightsizectl

# The formatter is the CLI's own (no library): compiled into its test too.
tests_unit_test_ctl_format_SOURCES = tests/unit/test-ctl-format.c ctl/ctl-format.c ctl/ctl-format.h
tests_unit_test_ctl_memory_SOURCES = tests/unit/test-ctl-memory.c ctl/ctl-memory.c ctl/ctl-memory.h \
	ctl/ctl-format.c ctl/ctl-format.h
# Runs the real rightsizectl against a stand-in service on a private dbus-daemon.
EXTRA_tests_integration_test_rightsizectl_DEPENDENCIES = rightsizectl

include tests/sim/sim.mk
