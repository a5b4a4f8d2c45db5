# common/ build fragment (included from the top Makefile.am): what every part shares, built
# once: the size, duration and boolean parsers (one each: the config, the policy files, the CLI
# and the bus read "2MB", "1500ms" and "yes" alike), UTF-8 for what goes on D-Bus, the /proc
# parsers (vmstat, meminfo, PSI: a guest's through its agent and the host's own), the one
# create-or-re-arm of an sd-event timer, whole-file reads and atomic writes, the memory ledger (where
# a guest's memory is: the daemon's metrics and rightsizectl report reckon it alike), and header-only helpers.

noinst_LIBRARIES += common/libcommon.a
common_libcommon_a_SOURCES = \
	common/size.c common/size.h \
	common/number.c common/number.h \
	common/duration.c common/duration.h \
	common/utf8.c common/utf8.h \
	common/event-util.c common/event-util.h \
	common/boolean.c common/boolean.h \
	common/procfs.c common/procfs.h \
	common/fileio.c common/fileio.h \
	common/memory-ledger.c common/memory-ledger.h

noinst_HEADERS += common/macro.h common/worker-thread.h common/time-util.h common/bus-api.h

# ---- tests ----
common_tests = tests/unit/test-size tests/unit/test-duration tests/unit/test-utf8 tests/unit/test-event-util tests/unit/test-boolean tests/unit/test-procfs \
	tests/unit/test-fileio tests/unit/test-memory-ledger
UNIT_TESTS += $(common_tests)
