# Unit tests of the qmp/ library (included from qmp/local.mk; owned by the qmp worker).

QMP_TEST_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS) $(CHECK_CFLAGS)
QMP_TEST_LDADD = $(QMP_LIBS) $(CHECK_LIBS)
# The scripted peer is compiled into each test (no check_LIBRARIES: the top Makefile.am
# does not declare it, and it is small).
FAKE_QMP_PEER = tests/unit/fake-qmp-peer.c tests/unit/fake-qmp-peer.h

QMP_UNIT_TESTS = \
	tests/unit/test-qmp-client \
	tests/unit/test-qmp-commands \
	tests/unit/test-qmp-qga \
	tests/unit/test-qmp-procfs \
	tests/unit/test-qmp-query-tool

check_PROGRAMS += $(QMP_UNIT_TESTS)
TESTS += $(QMP_UNIT_TESTS)

tests_unit_test_qmp_client_SOURCES = tests/unit/test-qmp-client.c $(FAKE_QMP_PEER)
tests_unit_test_qmp_client_CFLAGS = $(QMP_TEST_CFLAGS)
tests_unit_test_qmp_client_LDADD = $(QMP_TEST_LDADD)

tests_unit_test_qmp_commands_SOURCES = tests/unit/test-qmp-commands.c $(FAKE_QMP_PEER)
tests_unit_test_qmp_commands_CFLAGS = $(QMP_TEST_CFLAGS)
tests_unit_test_qmp_commands_LDADD = $(QMP_TEST_LDADD)

tests_unit_test_qmp_qga_SOURCES = tests/unit/test-qmp-qga.c $(FAKE_QMP_PEER)
tests_unit_test_qmp_qga_CFLAGS = $(QMP_TEST_CFLAGS)
tests_unit_test_qmp_qga_LDADD = $(QMP_TEST_LDADD)

tests_unit_test_qmp_procfs_SOURCES = tests/unit/test-qmp-procfs.c
tests_unit_test_qmp_procfs_CFLAGS = $(QMP_TEST_CFLAGS)
tests_unit_test_qmp_procfs_LDADD = $(QMP_TEST_LDADD)

# Runs the built rightsize-qmp-query (found through $top_builddir) against fake peers.
tests_unit_test_qmp_query_tool_SOURCES = tests/unit/test-qmp-query-tool.c $(FAKE_QMP_PEER)
tests_unit_test_qmp_query_tool_CFLAGS = $(QMP_TEST_CFLAGS)
tests_unit_test_qmp_query_tool_LDADD = $(QMP_TEST_LDADD)
