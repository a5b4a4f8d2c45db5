# tests/sim: fake-qemu, simulated guests for the daemon's scale and fault tests.
# Included from ctl/local.mk. Built with `make check` only (never installed).

check_PROGRAMS += tests/sim/fake-qemu
tests_sim_fake_qemu_SOURCES = tests/sim/fake-qemu.c \
	tests/model/guest-model.c tests/model/guest-model.h \
	tests/model/scenario.c tests/model/scenario.h
tests_sim_fake_qemu_CFLAGS = $(AM_CFLAGS) $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS)
tests_sim_fake_qemu_LDADD = $(POLICIES_LIBS) $(JSONC_LIBS) $(LIBSYSTEMD_LIBS)

# Drives fake-qemu with the real qmp/ client.
check_PROGRAMS += tests/integration/test-fake-qemu
TESTS += tests/integration/test-fake-qemu
tests_integration_test_fake_qemu_SOURCES = tests/integration/test-fake-qemu.c
tests_integration_test_fake_qemu_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS) $(CHECK_CFLAGS)
tests_integration_test_fake_qemu_LDADD = $(QMP_LIBS) $(CHECK_LIBS)
EXTRA_tests_integration_test_fake_qemu_DEPENDENCIES = tests/sim/fake-qemu
