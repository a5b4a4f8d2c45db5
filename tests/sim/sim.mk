# tests/sim: fake-qemu, simulated guests for the daemon's scale and fault tests (the guest
# model of tests/model/, in tests/lib/libtest.a). Included from ctl/local.mk. Built with
# `make check` only (never installed).

check_PROGRAMS += tests/sim/fake-qemu
tests_sim_fake_qemu_SOURCES = tests/sim/fake-qemu.c tests/sim/fake-qemu.h tests/sim/fake-qmp.c \
	tests/sim/fake-agent.c tests/sim/fake-windows.c

# Drives fake-qemu with the real qmp/ client.
INTEGRATION_TESTS += tests/integration/test-fake-qemu
