# Build rules for tests/bench/ (see the top Makefile.am).
#
# make bench        the parts that judge the decision core on real QEMU guests (the synthetic workloads,
#                   two guests on a short host, the application parts judged by their throughput),
#                   meant to fit 75 minutes under TCG with the oracles cached; writes
#                   $(top_srcdir)/BENCHMARKS.md and its plots in $(top_srcdir)/docs/bench, keeping the
#                   sections of the parts it does not run (the page marks the stale ones)
# make bench-full   every part, at a milestone: the above, then the calibration, placement, the shipped
#                   runs, the other application parts, the refault-judged ones with MoM, the phase change, the idle
#                   distro guest, the experiments reclaim and lrugen (kept from their last run) and scale
# make bench-smoke  the short version CI runs (one workload, shortened oracle, < 4 minutes);
#                   writes into $(abs_top_builddir)/bench-smoke; fails on a harness failure, an
#                   estimate more than 15 % off the oracle, or an OOM kill
bench_env = top_srcdir=$(abs_top_srcdir) top_builddir=$(abs_top_builddir) \
	RIGHTSIZE_GUEST_DIR=$(abs_top_builddir)/guest QEMU_SYSTEM=$(QEMU_SYSTEM)

# run-all refuses a source tree with uncommitted changes: `make bench BENCH_FLAGS=--allow-dirty`
# measures one anyway (and BENCHMARKS.md then says so at its top).
BENCH_FLAGS =

# bench-scale drives tests/sim/fake-qemu, a check program that `all` does not build.
# Part pgbench boots the Debian 12 distro guest (built on first use, see bench-distro-smoke).
bench: all guest/initrd.gz tests/sim/fake-qemu tests/model/model-bench
	$(bench_env) RIGHTSIZE_DISTRO_GUEST_DIR=$${RIGHTSIZE_DISTRO_GUEST_DIR:-$(abs_top_builddir)/distro-guest} \
		$(abs_top_srcdir)/tests/bench/run-all --out $(abs_top_srcdir)/BENCHMARKS.md $(BENCH_FLAGS)

bench-full: all guest/initrd.gz tests/sim/fake-qemu tests/model/model-bench
	$(bench_env) RIGHTSIZE_DISTRO_GUEST_DIR=$${RIGHTSIZE_DISTRO_GUEST_DIR:-$(abs_top_builddir)/distro-guest} \
		$(abs_top_srcdir)/tests/bench/run-all --full --out $(abs_top_srcdir)/BENCHMARKS.md $(BENCH_FLAGS)

bench-smoke: all guest/initrd.gz
	$(bench_env) $(abs_top_srcdir)/tests/bench/smoke $(abs_top_builddir)/bench-smoke

# The real-application smoke (issue 15): PostgreSQL + pgbench in the Debian 12 distro guest,
# its working set measured in the same run, rightsized converging on it through the guest
# agent; builds the distro guest image first (root, Debian's mirror; a no-op when unchanged).
# RIGHTSIZE_DISTRO_GUEST_DIR moves the image (CI keeps it between runs).
# --no-mom: MoM's rules (240 s more) are for the full run; CI keeps within its time budget.
bench-distro-smoke: all
	$(bench_env) RIGHTSIZE_DISTRO_GUEST_DIR=$${RIGHTSIZE_DISTRO_GUEST_DIR:-$(abs_top_builddir)/distro-guest} \
		$(abs_top_srcdir)/tests/bench/bench-pgbench --smoke --no-mom --out $(abs_top_builddir)/bench-smoke/pgbench.md

.PHONY: bench bench-full bench-smoke bench-distro-smoke

EXTRA_DIST += tests/bench/run-all tests/bench/smoke tests/bench/benchlib.py tests/bench/benchparts.py \
	tests/bench/distrolib.py tests/bench/distrolib_libvirt.py tests/bench/README.md \
	tests/bench/bench-oracle tests/bench/bench-anon tests/bench/bench-file tests/bench/bench-mixed \
	tests/bench/bench-grow tests/bench/bench-shrink tests/bench/bench-stream tests/bench/bench-idle \
	tests/bench/bench-shipped tests/bench/bench-multi tests/bench/bench-reclaim tests/bench/bench-lrugen tests/bench/bench-scale \
	tests/bench/bench-pgbench tests/bench/bench-redis tests/bench/bench-calibrate tests/bench/bench-shipped-file \
	tests/bench/bench-distro-idle tests/bench/bench-phase tests/bench/bench-pgbench-tpcb \
	tests/bench/bench-placement tests/bench/bench-refill \
	tests/bench/applib.py tests/bench/bench-app tests/bench/guest/rs-zipf-get tests/bench/check-mom-sweep tests/bench/bench-model \
	tests/bench/bench-fio-zipf09 tests/bench/bench-fio-zipf12 tests/bench/bench-fio-zipf09-4g2c \
	tests/bench/bench-redis-zipf tests/bench/bench-redis-uniform tests/bench/bench-sysbench-ro \
	tests/bench/bench-sysbench-rw tests/bench/bench-compile tests/bench/bench-pgbench-s tests/bench/bench-tpcb
