# daemon/host/: what rightsized reads and repairs of the host itself (see README.md here),
# included from daemon/local.mk

# ---- libhost.a: the host's memory and PSI, its THP settings, huge-page repair under a guest ----
noinst_LIBRARIES += daemon/host/libhost.a
daemon_host_libhost_a_SOURCES = \
	daemon/host/host.c daemon/host/host.h \
	daemon/host/host-thp.c daemon/host/host-thp.h \
	daemon/host/host-hugepages.c daemon/host/host-hugepages.h

# What a program linking libhost.a also needs (hugepage-repair.h's decisions are the policies').
HOST_LIBS = daemon/host/libhost.a $(POLICIES_LIBS) common/libcommon.a

EXTRA_DIST += daemon/host/README.md

# ---- unit tests (Check) ----
host_tests = \
	tests/unit/test-daemon-hugepages \
	tests/unit/test-daemon-host-thp \
	tests/unit/test-daemon-host-memory
UNIT_TESTS += $(host_tests)
