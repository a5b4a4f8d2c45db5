# qmp/ build fragment (included from the top Makefile.am)

noinst_LIBRARIES += qmp/libqmp.a
qmp_libqmp_a_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS)
qmp_libqmp_a_SOURCES = \
	qmp/json-util.c qmp/json-util.h \
	qmp/json-containers.c qmp/json-containers.h \
	qmp/json-stream.c qmp/json-stream.h \
	qmp/json-peer.c qmp/json-peer.h \
	qmp/qmp-reply.c qmp/qmp-reply.h \
	qmp/qmp-client.c qmp/qmp-client.h \
	qmp/qmp-events.c qmp/qmp-events.h \
	qmp/qmp-commands.c qmp/qmp-commands.h \
	qmp/qga-client.c qmp/qga-client.h \
	qmp/qga-commands.c qmp/qga-commands.h \
	qmp/qga-osinfo.c qmp/qga-osinfo.h \
	qmp/base64.c qmp/base64.h \
	qmp/qmp-sync.c qmp/qmp-sync.h \
	qmp/qmp-sample.c qmp/qmp-sample.h

# For users of libqmp.a (the daemon, tests): compile with $(QMP_CFLAGS), link with $(QMP_LIBS).
QMP_CFLAGS = $(JSONC_CFLAGS) $(LIBSYSTEMD_CFLAGS)
QMP_LIBS = qmp/libqmp.a common/libcommon.a $(JSONC_LIBS) $(LIBSYSTEMD_LIBS)

bin_PROGRAMS += rightsize-qmp-query
rightsize_qmp_query_SOURCES = qmp/qmp-query-tool.c
rightsize_qmp_query_CFLAGS = $(AM_CFLAGS) $(QMP_CFLAGS)
rightsize_qmp_query_LDADD = $(QMP_LIBS)

EXTRA_DIST += qmp/README.md

include tests/unit/qmp.mk
