# common/ build fragment (included from the top Makefile.am): what every part shares, built
# once: the size, duration and boolean parsers (one each: the config, the policy files, the CLI and the
# bus read "2MB" and "1500ms" alike), UTF-8 for what goes on D-Bus, the one create-or-re-arm of an
# sd-event timer, and header-only helpers.

noinst_LIBRARIES += common/libcommon.a
common_libcommon_a_SOURCES = \
	common/size.c common/size.h \
	common/number.c common/number.h \
	common/duration.c common/duration.h \
	common/utf8.c common/utf8.h \
	common/event-util.c common/event-util.h \
	common/boolean.c common/boolean.h

noinst_HEADERS += common/macro.h common/worker-thread.h common/time-util.h common/bus-api.h

# ---- tests ----
common_tests = tests/unit/test-size tests/unit/test-duration tests/unit/test-utf8 tests/unit/test-event-util tests/unit/test-boolean
check_PROGRAMS += $(common_tests)
TESTS += $(common_tests)
