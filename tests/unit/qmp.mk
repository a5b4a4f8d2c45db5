# Unit tests of the qmp/ library (included from qmp/local.mk), against the scripted peer in
# tests/lib/fake-qmp-peer.c.

qmp_tests = \
	tests/unit/test-qmp-client \
	tests/unit/test-qmp-commands \
	tests/unit/test-qmp-qga \
	tests/unit/test-qga-osinfo \
	tests/unit/test-qmp-sample \
	tests/unit/test-qmp-query-tool
UNIT_TESTS += $(qmp_tests)
# (test-qmp-query-tool runs the built rightsize-qmp-query: `make check` builds every program
# before it runs a test.)
