# policies/ build fragment (included from the top Makefile.am): the pure decision core,
# its unit and scenario tests, and the guest memory model the tests drive it with.

noinst_LIBRARIES += policies/libpolicies.a
policies_libpolicies_a_SOURCES = \
	policies/rs-value.h \
	policies/signals.c policies/signals.h \
	policies/pressure.c policies/pressure.h \
	policies/estimator.c policies/estimator.h policies/estimator-internal.h \
	policies/probe-step.c \
	policies/policy.c policies/policy.h \
	policies/policy-file.c policies/policy-file.h \
	policies/policy-presets.c \
	policies/arbiter.c policies/arbiter.h \
	policies/actuation.c policies/actuation.h \
	policies/hugepage-repair.c policies/hugepage-repair.h \
	policies/stall.c policies/stall.h \
	policies/controller.c policies/controller.h \
	policies/guest-cost.c policies/guest-cost.h
policies_libpolicies_a_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS)

# The presets are the shipped files (etc/policies/NAME.conf), built in as C string literals.
PRESET_FILES = etc/policies/conservative.conf etc/policies/balanced.conf \
	etc/policies/aggressive.conf etc/policies/observe-only.conf
nodist_policies_libpolicies_a_SOURCES = policies/presets.inc
BUILT_SOURCES = policies/presets.inc
# BUILT_SOURCES covers `make`, `make check` and `make install` only: a build of single targets
# (contrib/fuzz's `make fuzz-programs`, `make rightsized`) needs the dependency spelled out.
policies/libpolicies_a-policy-presets.$(OBJEXT): policies/presets.inc
CLEANFILES += policies/presets.inc
policies/presets.inc: $(PRESET_FILES)
	$(AM_V_GEN)$(MKDIR_P) policies && for f in $(PRESET_FILES); do \
		printf '{ "%s",\n' "$$(basename "$$f" .conf)"; \
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/  "/' -e 's/$$/\\n"/' "$(srcdir)/$$f" || exit 1; \
		printf '},\n'; \
	done > $@.tmp && mv $@.tmp $@

# Programs that use libpolicies.a link these.
POLICIES_LIBS = policies/libpolicies.a common/libcommon.a $(INIH_LIBS) -lm

EXTRA_DIST += policies/README.md $(PRESET_FILES)

# ---- tests ---- (the guest model they drive the core with is in tests/lib/libtest.a)
policies_tests = \
	tests/unit/test-signals \
	tests/unit/test-pressure \
	tests/unit/test-policy \
	tests/unit/test-policy-file \
	tests/unit/test-guest-model \
	tests/unit/test-guest-model-v2 \
	tests/unit/test-estimator \
	tests/unit/test-estimator-hold \
	tests/unit/test-estimator-reprobe \
	tests/unit/test-probe-step \
	tests/unit/test-estimator-scenarios \
	tests/unit/test-estimator-property \
	tests/unit/test-controller \
	tests/unit/test-guest-cost \
	tests/unit/test-arbiter \
	tests/unit/test-actuation \
	tests/unit/test-hugepage-repair
UNIT_TESTS += $(policies_tests)

# Today's core on guest model v2, every family's draws, as a markdown table (a measurement
# for BENCHMARKS.md, not a test: the model's own properties are test-guest-model-v2's).
# make check builds it; make bench-model runs it (a few minutes) and scores the held-out
# families against their frozen first run.
check_PROGRAMS += tests/model/model-bench
tests_model_model_bench_SOURCES = tests/model/model-bench.c
EXTRA_DIST += tests/model/holdout-baseline.txt tests/model/README.md

bench-model: tests/model/model-bench
	tests/model/model-bench --holdout-baseline $(abs_top_srcdir)/tests/model/holdout-baseline.txt $(MODEL_BENCH_FLAGS)
.PHONY: bench-model

# The cost controller's property on guest model v2 (tests/unit/test-controller-property.c:
# 1,000 draws of the tuning families, abs error p95 <= 10 % against the stall truth, the cost
# budget, nothing starved, no OOM kill where swap or deflate-on-oom gives the guest a way out
# and no second one where neither does; about 7 s). Part of make check (it holds all of it
# since model v2 simulates the balloon's deflate-on-oom); make check-controller-property runs
# it alone.
UNIT_TESTS += tests/unit/test-controller-property
check-controller-property: tests/unit/test-controller-property
	tests/unit/test-controller-property
.PHONY: check-controller-property
