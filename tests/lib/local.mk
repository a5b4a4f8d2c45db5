# tests/lib/: what the tests share, built once (check_LIBRARIES): Check's runner, the fake QMP
# peer, temporary files and private mounts, the private bus, the daemon and guest fixtures,
# libvirtd for a test, the hand-stepped guest of the estimator's unit tests, and the guest
# memory models (tests/model/: v1, and v2 with its drawn workload shapes).
#
# Every test program gets the defaults below (Makefile.am: AM_CPPFLAGS, LDADD): the helpers
# and every library of the tree, of which a static archive gives each test only what it uses
# (and --as-needed only the shared libraries it calls). So a test is one line in its
# directory's list, its SOURCES default to NAME.c.

check_LIBRARIES += tests/lib/libtest.a
tests_lib_libtest_a_SOURCES = \
	tests/lib/check-run.c tests/lib/check-run.h \
	tests/lib/test-util.c tests/lib/test-util.h \
	tests/lib/fake-qmp-peer.c tests/lib/fake-qmp-peer.h \
	tests/lib/bus-fixture.c tests/lib/bus-fixture.h \
	tests/lib/bus-call.c tests/lib/bus-call.h \
	tests/lib/daemon-fixture.c tests/lib/daemon-fixture.h \
	tests/lib/ctl-json.c tests/lib/ctl-json.h \
	tests/lib/guest-fixture.c tests/lib/guest-fixture.h \
	tests/lib/e2e-common.c tests/lib/e2e-common.h \
	tests/lib/libvirt-test-host.c tests/lib/libvirt-test-host.h \
	tests/lib/estimator-fake.c tests/lib/estimator-fake.h \
	tests/lib/fake-guest-driver.c tests/lib/fake-guest-driver.h \
	tests/model/guest-model.c tests/model/guest-model.h \
	tests/model/scenario.c tests/model/scenario.h \
	tests/model/workload-shape.c tests/model/workload-shape.h \
	tests/model/guest-model-v2.c tests/model/guest-model-v2.h \
	tests/model/model-v2-run.c tests/model/model-v2-run.h
