# Build rules for tests/fuzz/ (see the top Makefile.am): the fuzz targets.
#
# Each target defines LLVMFuzzerTestOneInput(). In `make check` it links with
# libfuzz-replay.a, whose main() replays tests/fuzz/corpus/TARGET and
# tests/fuzz/regressions/TARGET (the target's name comes from argv[0]). contrib/fuzz builds the
# same programs with clang's libFuzzer instead:
#   make FUZZ_DRIVER= LDFLAGS=-fsanitize=fuzzer fuzz-programs

noinst_LIBRARIES += tests/fuzz/libfuzz-util.a tests/fuzz/libfuzz-replay.a
tests_fuzz_libfuzz_util_a_SOURCES = tests/fuzz/fuzz-util.c tests/fuzz/fuzz.h
tests_fuzz_libfuzz_util_a_CFLAGS = $(AM_CFLAGS) $(LIBSYSTEMD_CFLAGS)
tests_fuzz_libfuzz_replay_a_SOURCES = tests/fuzz/replay-main.c
tests_fuzz_libfuzz_replay_a_CPPFLAGS = $(AM_CPPFLAGS) -DFUZZ_DIR='"$(abs_top_srcdir)/tests/fuzz"'
tests_fuzz_libfuzz_replay_a_CFLAGS = $(AM_CFLAGS) $(LIBSYSTEMD_CFLAGS)

# Empty when libFuzzer provides main().
FUZZ_DRIVER = tests/fuzz/libfuzz-replay.a
FUZZ_LIBS = $(FUZZ_DRIVER) tests/fuzz/libfuzz-util.a

FUZZ_TARGETS = \
	tests/fuzz/fuzz-json-stream \
	tests/fuzz/fuzz-qmp-reply \
	tests/fuzz/fuzz-qga-reply \
	tests/fuzz/fuzz-config \
	tests/fuzz/fuzz-policy \
	tests/fuzz/fuzz-state-file \
	tests/fuzz/fuzz-libvirt-parse
UNIT_TESTS += $(FUZZ_TARGETS)

.PHONY: fuzz-programs
fuzz-programs: $(FUZZ_TARGETS)

tests_fuzz_fuzz_json_stream_SOURCES = tests/fuzz/fuzz-json-stream.c
tests_fuzz_fuzz_json_stream_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS)
tests_fuzz_fuzz_json_stream_LDADD = $(FUZZ_LIBS) $(QMP_LIBS)

tests_fuzz_fuzz_qmp_reply_SOURCES = tests/fuzz/fuzz-qmp-reply.c
tests_fuzz_fuzz_qmp_reply_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS)
tests_fuzz_fuzz_qmp_reply_LDADD = $(FUZZ_LIBS) $(QMP_LIBS)

tests_fuzz_fuzz_qga_reply_SOURCES = tests/fuzz/fuzz-qga-reply.c
tests_fuzz_fuzz_qga_reply_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS)
tests_fuzz_fuzz_qga_reply_LDADD = $(FUZZ_LIBS) $(QMP_LIBS)

tests_fuzz_fuzz_config_SOURCES = tests/fuzz/fuzz-config.c
tests_fuzz_fuzz_config_CFLAGS = $(AM_CFLAGS) $(LIBSYSTEMD_CFLAGS)
tests_fuzz_fuzz_config_LDADD = $(FUZZ_LIBS) $(RIGHTSIZED_LIBS)

tests_fuzz_fuzz_policy_SOURCES = tests/fuzz/fuzz-policy.c
tests_fuzz_fuzz_policy_CFLAGS = $(AM_CFLAGS) $(LIBSYSTEMD_CFLAGS)
tests_fuzz_fuzz_policy_LDADD = $(FUZZ_LIBS) $(POLICIES_LIBS) $(LIBSYSTEMD_LIBS)

tests_fuzz_fuzz_state_file_SOURCES = tests/fuzz/fuzz-state-file.c
tests_fuzz_fuzz_state_file_CFLAGS = $(AM_CFLAGS) $(LIBSYSTEMD_CFLAGS)
tests_fuzz_fuzz_state_file_LDADD = $(FUZZ_LIBS) $(RIGHTSIZED_LIBS) -lm

tests_fuzz_fuzz_libvirt_parse_SOURCES = tests/fuzz/fuzz-libvirt-parse.c
tests_fuzz_fuzz_libvirt_parse_CFLAGS = $(AM_CFLAGS) $(LIBVIRT_BACKEND_CFLAGS)
tests_fuzz_fuzz_libvirt_parse_LDADD = $(FUZZ_LIBS) $(LIBVIRT_BACKEND_LIBS)

EXTRA_DIST += tests/fuzz/corpus tests/fuzz/regressions tests/fuzz/README.md tests/fuzz/capture-seeds
