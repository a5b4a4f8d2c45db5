# contrib/ build fragment (included from the top Makefile.am)

# The workload runs inside the busybox guest, so it is static.  Sanitizers cannot link
# statically and there is no sanitizer runtime in the guest: they are switched off here.
noinst_PROGRAMS += contrib/workload/rs-workload
contrib_workload_rs_workload_SOURCES = contrib/workload/rs-workload.c
contrib_workload_rs_workload_CFLAGS = $(AM_CFLAGS) -fno-sanitize=all
contrib_workload_rs_workload_LDFLAGS = $(AM_LDFLAGS) -fno-sanitize=all -static
contrib_workload_rs_workload_LDADD =

# The test guest image (kernel + initramfs), built into $(builddir)/guest, which is
# RIGHTSIZE_GUEST_DIR for the tests.  The kernel .deb is cached in guest/cache and
# survives `make clean`.  The script is a no-op when its inputs are unchanged.
GUEST_IMAGE_DEPS = \
	$(top_srcdir)/contrib/build-guest-image \
	$(top_srcdir)/contrib/guest-init \
	contrib/workload/rs-workload

guest/initrd.gz: $(GUEST_IMAGE_DEPS)
	$(AM_V_GEN)$(top_srcdir)/contrib/build-guest-image \
		--workload contrib/workload/rs-workload guest && touch $@
guest/vmlinuz guest/kernel-version: guest/initrd.gz

# Always asks the script, which also notices a new kernel in apt's lists.
.PHONY: guest-image
guest-image: contrib/workload/rs-workload
	$(AM_V_GEN)$(top_srcdir)/contrib/build-guest-image \
		--workload contrib/workload/rs-workload guest


# The Debian 12 distro guest (systemd, qemu-guest-agent, PostgreSQL, Redis), for the
# real-application bench parts and their CI smoke: about 2 minutes to build, a no-op when its
# inputs are unchanged.  Kept out of `all`: it needs root and Debian's mirror.
.PHONY: distro-guest-image
distro-guest-image:
	$(AM_V_GEN)$(top_srcdir)/contrib/build-distro-image distro-guest

CLEANFILES += guest/initrd.gz guest/vmlinuz guest/kernel-version guest/stamp \
	guest/accel-verdict guest/.lock

EXTRA_DIST += \
	contrib/README.md \
	contrib/build-guest-image \
	contrib/guest-init \
	contrib/boot-guest \
	contrib/guest-ctl \
	contrib/build-distro-image \
	contrib/boot-distro-guest \
	contrib/distro-guest-check \
	contrib/timed-test \
	contrib/install-deps \
	contrib/build-tree \
	contrib/run-tests \
	contrib/demo \
	contrib/dashboard-plot \
	contrib/test-report \
	contrib/check-under-hog \
	contrib/static-check \
	contrib/ci-valgrind \
	contrib/ci-sanitizers \
	contrib/coverage-by-folder \
	contrib/fuzz \
	daemon/dbus-api.md \
	tests/package/build-deb \
	tests/package/test-deb-install

# Prometheus rules and the Grafana dashboard (contrib/prometheus/README.md): promtool checks and
# unit-tests the rules, and every rightsize_* name they use must be one rightsized exports.
TESTS += tests/unit/test-prometheus-rules
EXTRA_DIST += \
	tests/unit/test-prometheus-rules \
	contrib/prometheus/README.md \
	contrib/prometheus/rightsize-rules.yml \
	contrib/prometheus/tests/rightsize-rules.test.yml \
	contrib/grafana/rightsize.json

# distclean also drops the kernel cache (a download, not a source); `make clean` keeps it.
distclean-local:
	-rm -rf guest distro-guest
