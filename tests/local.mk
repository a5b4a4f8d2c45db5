# tests/ build fragment: integration tests against real QEMU guests, real libvirtd and the
# simulated guests of tests/sim (make check-integration: see the top Makefile.am). (Unit test lists live beside the module they test:
# common/, qmp/, policies/, daemon/, daemon/libvirt/ and ctl/ local.mk, as UNIT_TESTS.) Every test
# links tests/lib/libtest.a and the tree's libraries (tests/lib/local.mk): one line each here, made
# a check program by the top Makefile.am.

# The simulated-guest tests first, side by side (tests/integration/shares-machine: they share
# the machine, two at a time under make -j2), then the ones that need the machine to themselves.
# The longest simulated one (test-daemon-controller, about 130 s) first of them: last, as it was,
# the exclusive test after it held the other slot waiting for it to end, so nothing ran beside it.
integration_tests = \
	tests/integration/test-daemon-controller \
	tests/integration/test-daemon-dbus \
	tests/integration/test-daemon-faults \
	tests/integration/test-daemon-unmatched \
	tests/integration/test-daemon-agent-faults \
	tests/integration/test-daemon-windows \
	tests/integration/test-daemon-coexist \
	tests/integration/test-daemon-safety \
	tests/integration/test-daemon-state-dir \
	tests/integration/test-daemon-second \
	tests/integration/test-daemon-api-outage \
	tests/integration/test-daemon-config \
	tests/integration/test-daemon-memory-report \
	tests/integration/test-daemon-recommend \
	tests/integration/test-qmp-real-guest \
	tests/integration/test-daemon-real-guest \
	tests/integration/test-daemon-polkit \
	tests/integration/test-daemon-libvirt \
	tests/integration/test-daemon-libvirtd-hang \
	tests/integration/test-daemon-recommend-libvirt \
	tests/integration/test-daemon-dimm \
	tests/integration/test-daemon-qemu-kill \
	tests/integration/test-daemon-unmatched-real-guest
INTEGRATION_TESTS += $(integration_tests)
EXTRA_DIST += tests/integration/shares-machine tests/integration/plain-only

# The tests that run rightsized, rightsizectl or tests/sim/fake-qemu need no rule for them:
# `make check` builds every program (and check program) before it runs a test.
