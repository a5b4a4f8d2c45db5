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
	policies/arbiter.c policies/arbiter.h \
	policies/actuation.c policies/actuation.h
policies_libpolicies_a_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS)

# Programs that use libpolicies.a link these.
POLICIES_LIBS = policies/libpolicies.a common/libcommon.a $(INIH_LIBS) -lm

EXTRA_DIST += policies/README.md \
	etc/policies/conservative.conf etc/policies/balanced.conf \
	etc/policies/aggressive.conf etc/policies/observe-only.conf

# ---- tests ----
# The guest model is test code: compiled into the tests that need it, never installed.
POLICIES_MODEL_SOURCES = \
	tests/model/guest-model.c tests/model/guest-model.h \
	tests/model/scenario.c tests/model/scenario.h
POLICIES_TEST_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) -DRS_TOP_SRCDIR='"$(abs_top_srcdir)"'
POLICIES_TEST_LIBS = $(POLICIES_LIBS) $(CHECK_LIBS)

policies_tests = \
	tests/unit/test-signals \
	tests/unit/test-pressure \
	tests/unit/test-policy \
	tests/unit/test-policy-file \
	tests/unit/test-guest-model \
	tests/unit/test-estimator \
	tests/unit/test-probe-step \
	tests/unit/test-estimator-scenarios \
	tests/unit/test-estimator-property \
	tests/unit/test-arbiter \
	tests/unit/test-actuation
check_PROGRAMS += $(policies_tests)
TESTS += $(policies_tests)

tests_unit_test_signals_SOURCES = tests/unit/test-signals.c
tests_unit_test_signals_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_signals_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_pressure_SOURCES = tests/unit/test-pressure.c
tests_unit_test_pressure_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_pressure_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_policy_SOURCES = tests/unit/test-policy.c
tests_unit_test_policy_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_policy_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_policy_file_SOURCES = tests/unit/test-policy-file.c
tests_unit_test_policy_file_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_policy_file_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_guest_model_SOURCES = tests/unit/test-guest-model.c $(POLICIES_MODEL_SOURCES)
tests_unit_test_guest_model_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_guest_model_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_estimator_SOURCES = tests/unit/test-estimator.c
tests_unit_test_estimator_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_estimator_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_probe_step_SOURCES = tests/unit/test-probe-step.c
tests_unit_test_probe_step_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_probe_step_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_estimator_scenarios_SOURCES = tests/unit/test-estimator-scenarios.c $(POLICIES_MODEL_SOURCES)
tests_unit_test_estimator_scenarios_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_estimator_scenarios_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_estimator_property_SOURCES = tests/unit/test-estimator-property.c $(POLICIES_MODEL_SOURCES)
tests_unit_test_estimator_property_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_estimator_property_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_arbiter_SOURCES = tests/unit/test-arbiter.c
tests_unit_test_arbiter_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_arbiter_LDADD = $(POLICIES_TEST_LIBS)

tests_unit_test_actuation_SOURCES = tests/unit/test-actuation.c
tests_unit_test_actuation_CFLAGS = $(POLICIES_TEST_CFLAGS)
tests_unit_test_actuation_LDADD = $(POLICIES_TEST_LIBS)

# The shared end of the Check test programs.
noinst_HEADERS += tests/unit/check-run.h
