# rightsized's own integration tests against simulated guests (tests/sim/fake-qemu) on a private
# dbus-daemon: faults, the D-Bus API and access control, config and policy files. Included from
# tests/local.mk. Every test runs the real rightsized, rightsizectl and fake-qemu binaries.

# Shared by the tests that need a private bus (and by those that run the daemon).
BUS_FIXTURE = tests/integration/bus-fixture.c tests/integration/bus-fixture.h tests/unit/test-daemon-util.c
DAEMON_FIXTURE = $(BUS_FIXTURE) tests/integration/daemon-fixture.c tests/integration/daemon-fixture.h

DAEMON_SIM_TESTS = \
	tests/integration/test-daemon-faults \
	tests/integration/test-daemon-dbus \
	tests/integration/test-daemon-config \
	tests/integration/test-daemon-agent-faults
check_PROGRAMS += $(DAEMON_SIM_TESTS)
TESTS += $(DAEMON_SIM_TESTS)

DAEMON_SIM_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS) \
	-DTEST_TOP_SRCDIR='"$(abs_top_srcdir)"'
DAEMON_SIM_TEST_LDADD = $(LIBSYSTEMD_LIBS) $(JSONC_LIBS) $(CHECK_LIBS)

tests_integration_test_daemon_faults_SOURCES = tests/integration/test-daemon-faults.c $(DAEMON_FIXTURE)
tests_integration_test_daemon_faults_CFLAGS = $(DAEMON_SIM_TEST_CFLAGS)
tests_integration_test_daemon_faults_LDADD = $(DAEMON_SIM_TEST_LDADD)

tests_integration_test_daemon_dbus_SOURCES = tests/integration/test-daemon-dbus.c $(DAEMON_FIXTURE)
tests_integration_test_daemon_dbus_CFLAGS = $(DAEMON_SIM_TEST_CFLAGS)
tests_integration_test_daemon_dbus_LDADD = $(DAEMON_SIM_TEST_LDADD)

tests_integration_test_daemon_config_SOURCES = tests/integration/test-daemon-config.c $(DAEMON_FIXTURE)
tests_integration_test_daemon_config_CFLAGS = $(DAEMON_SIM_TEST_CFLAGS)
tests_integration_test_daemon_config_LDADD = $(DAEMON_SIM_TEST_LDADD)

tests_integration_test_daemon_agent_faults_SOURCES = tests/integration/test-daemon-agent-faults.c $(DAEMON_FIXTURE)
tests_integration_test_daemon_agent_faults_CFLAGS = $(DAEMON_SIM_TEST_CFLAGS)
tests_integration_test_daemon_agent_faults_LDADD = $(DAEMON_SIM_TEST_LDADD)

# The tests run the binaries they check.
tests/integration/test-daemon-faults.log tests/integration/test-daemon-dbus.log \
tests/integration/test-daemon-config.log tests/integration/test-daemon-agent-faults.log: rightsized$(EXEEXT) rightsizectl$(EXEEXT) tests/sim/fake-qemu$(EXEEXT)

# The two tests that used to start their own dbus-daemon share the fixture now.
tests_integration_test_rightsizectl_SOURCES += $(BUS_FIXTURE)
tests_unit_test_daemon_dbus_policy_SOURCES += tests/integration/bus-fixture.c tests/integration/bus-fixture.h
