/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsize-qmp-query: prints a guest's balloon state, memory devices and balloon stats
 * (and, with --agent, the guest's own vmstat, meminfo and memory PSI) as one JSON
 * document. Exit status: 0 ok, 1 connection or protocol error, 2 usage error. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "qmp/json-util.h"
#include "qmp/qmp-sync.h"

#define EXIT_PROTOCOL 1
#define EXIT_USAGE 2

static const char *arg_qmp_path;
static const char *arg_agent_path;
static const char *arg_balloon_path = QMP_BALLOON_QOM_PATH;
static unsigned arg_poll_interval = 2;
static unsigned arg_watch_seconds;
static uint64_t arg_timeout_usec = 5 * USEC_PER_SEC;
static bool arg_compact;

static void help(void) {
        printf("Usage: rightsize-qmp-query [OPTIONS] QMP-SOCKET\n"
               "\n"
               "Print a QEMU guest's balloon state, memory devices and guest stats as JSON.\n"
               "\n"
               "  -a, --agent PATH          also read /proc/vmstat, /proc/meminfo and\n"
               "                            /proc/pressure/memory through this guest agent socket\n"
               "  -p, --poll-interval SECS  stats polling interval to enable if polling is off\n"
               "                            (default 2); then wait for a fresh report\n"
               "  -b, --balloon QOM-PATH    balloon device (default %s)\n"
               "  -t, --timeout MSEC        per-command timeout (default 5000)\n"
               "  -w, --watch SECS          print a document every SECS until interrupted\n"
               "  -c, --compact             one line per document\n"
               "  -h, --help                show this help\n"
               "\n"
               "Unknown stats print as null. Exit status: 0 ok, 1 connection or protocol error.\n",
               QMP_BALLOON_QOM_PATH);
}

static int parse_unsigned(const char *s, unsigned max, unsigned *ret) {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v > max)
                return -EINVAL;
        *ret = (unsigned) v;
        return 0;
}

static int parse_argv(int argc, char *argv[]) {
        static const struct option options[] = {
                { "agent", required_argument, NULL, 'a' },
                { "poll-interval", required_argument, NULL, 'p' },
                { "balloon", required_argument, NULL, 'b' },
                { "timeout", required_argument, NULL, 't' },
                { "watch", required_argument, NULL, 'w' },
                { "compact", no_argument, NULL, 'c' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        unsigned v;
        int c;

        while ((c = getopt_long(argc, argv, "a:p:b:t:w:ch", options, NULL)) >= 0)
                switch (c) {
                case 'a':
                        arg_agent_path = optarg;
                        break;
                case 'p':
                        if (parse_unsigned(optarg, 3600, &arg_poll_interval) < 0 || arg_poll_interval == 0) {
                                fprintf(stderr, "rightsize-qmp-query: --poll-interval wants 1..3600 seconds\n");
                                return -EINVAL;
                        }
                        break;
                case 'b':
                        arg_balloon_path = optarg;
                        break;
                case 't':
                        if (parse_unsigned(optarg, 3600000, &v) < 0 || v == 0) {
                                fprintf(stderr, "rightsize-qmp-query: --timeout wants milliseconds > 0\n");
                                return -EINVAL;
                        }
                        arg_timeout_usec = v * USEC_PER_MSEC;
                        break;
                case 'w':
                        if (parse_unsigned(optarg, 86400, &arg_watch_seconds) < 0 || arg_watch_seconds == 0) {
                                fprintf(stderr, "rightsize-qmp-query: --watch wants 1..86400 seconds\n");
                                return -EINVAL;
                        }
                        break;
                case 'c':
                        arg_compact = true;
                        break;
                case 'h':
                        help();
                        return 0;
                default:
                        return -EINVAL;
                }

        if (optind != argc - 1) {
                fprintf(stderr, "rightsize-qmp-query: expected exactly one QMP socket path (see --help)\n");
                return -EINVAL;
        }
        arg_qmp_path = argv[optind];
        return 1;
}

/* Errors that mean the connection or the protocol failed, as opposed to QEMU refusing
 * one command (no balloon device, unknown property), which only nulls that part. */
static bool is_fatal(int r) {
        return r == -ECONNRESET || r == -ETIMEDOUT || r == -EBADMSG || r == -ECANCELED || r == -ENOTCONN ||
               r == -ENOMEM || r == -EMSGSIZE || r == -EPROTO;
}

typedef struct Context {
        sd_event *event;
        QmpClient *qmp;
        QgaClient *qga;
        bool polling_checked;
        int failure; /* first fatal error */
        char *failure_text;
} Context;

static void note_error(Context *ctx, const char *what, int r, char *text) {
        if (is_fatal(r)) {
                if (ctx->failure == 0) {
                        ctx->failure = r;
                        free(ctx->failure_text);
                        ctx->failure_text = NULL;
                        if (asprintf(&ctx->failure_text, "%s: %s", what, text ? text : strerror(-r)) < 0)
                                ctx->failure_text = NULL;
                }
        } else
                fprintf(stderr, "rightsize-qmp-query: warning: %s: %s\n", what, text ? text : strerror(-r));
        free(text);
}

static json_object *json_u64_or_null(uint64_t v) {
        return qmp_value_is_known(v) ? json_object_new_uint64(v) : NULL;
}

static json_object *balloon_json(Context *ctx) {
        json_object *o = json_object_new_object();
        QmpBalloonInfo info;
        bool reporting;
        char *error = NULL;
        int r;

        r = qmp_sync_query_balloon(ctx->qmp, arg_timeout_usec, &info, &error);
        if (r < 0) {
                note_error(ctx, "query-balloon", r, error);
                json_object_put(o);
                return NULL;
        }
        json_object_object_add(o, "actual", json_object_new_uint64(info.actual));

        r = qmp_sync_qom_get_bool(ctx->qmp, arg_balloon_path, QMP_BALLOON_FREE_PAGE_REPORTING, arg_timeout_usec, &reporting, &error);
        if (r < 0) {
                note_error(ctx, "qom-get free-page-reporting", r, error);
                json_object_object_add(o, "free-page-reporting", NULL);
        } else
                json_object_object_add(o, "free-page-reporting", json_object_new_boolean(reporting));
        return o;
}

static json_object *guest_stats_json(Context *ctx) {
        json_object *o, *values;
        QmpGuestStats stats;
        uint64_t interval = 0;
        char *error = NULL;
        bool fresh = false;
        int r;

        r = qmp_sync_qom_get_u64(ctx->qmp, arg_balloon_path, QMP_BALLOON_STATS_POLLING_INTERVAL, arg_timeout_usec, &interval, &error);
        if (r < 0) {
                note_error(ctx, "qom-get guest-stats-polling-interval", r, error);
                return NULL;
        }

        r = qmp_sync_get_guest_stats(ctx->qmp, arg_balloon_path, arg_timeout_usec, &stats, &error);
        if (r < 0) {
                note_error(ctx, "qom-get guest-stats", r, error);
                return NULL;
        }

        if (interval == 0 && !ctx->polling_checked) {
                uint64_t baseline = stats.last_update;

                /* The driver reports once when it loads, so last-update alone does not
                 * prove polling works: wait for a report newer than the current one. */
                r = qmp_sync_set_stats_polling_interval(ctx->qmp, arg_balloon_path, arg_poll_interval, arg_timeout_usec, &error);
                if (r < 0) {
                        note_error(ctx, "enabling guest stats polling", r, error);
                        return NULL;
                }
                interval = arg_poll_interval;
                r = qmp_sync_wait_guest_stats_update(ctx->qmp,
                                                     arg_balloon_path,
                                                     baseline,
                                                     250 * USEC_PER_MSEC,
                                                     (2 * arg_poll_interval + 1) * USEC_PER_SEC,
                                                     &stats);
                if (r == -ETIMEDOUT)
                        fprintf(stderr,
                                "rightsize-qmp-query: warning: no fresh guest stats after enabling polling "
                                "(is the guest's virtio_balloon driver loaded?)\n");
                else if (r < 0) {
                        note_error(ctx, "waiting for guest stats", r, NULL);
                        return NULL;
                } else
                        fresh = true;
        }
        ctx->polling_checked = true;

        o = json_object_new_object();
        json_object_object_add(o, "polling-interval", json_object_new_uint64(interval));
        json_object_object_add(o, "last-update", json_object_new_uint64(stats.last_update));
        if (fresh)
                json_object_object_add(o, "fresh-after-enabling", json_object_new_boolean(true));
        values = json_object_new_object();
        for (size_t i = 0; i < _QMP_STAT_MAX; i++)
                json_object_object_add(values, qmp_stat_to_name(i), json_u64_or_null(stats.value[i]));
        json_object_object_add(o, "stats", values);
        return o;
}

static json_object *memory_devices_json(Context *ctx) {
        QmpMemoryDeviceList list;
        json_object *a;
        char *error = NULL;
        int r;

        r = qmp_sync_query_memory_devices(ctx->qmp, arg_timeout_usec, &list, &error);
        if (r < 0) {
                note_error(ctx, "query-memory-devices", r, error);
                return NULL;
        }
        a = json_object_new_array();
        for (size_t i = 0; i < list.n_devices; i++) {
                const QmpMemoryDevice *d = &list.devices[i];
                json_object *o = json_object_new_object();

                json_object_object_add(o, "type", json_object_new_string(d->type_name));
                json_object_object_add(o, "id", d->id ? json_object_new_string(d->id) : NULL);
                json_object_object_add(o, "memdev", d->memdev ? json_object_new_string(d->memdev) : NULL);
                json_object_object_add(o, "size", json_u64_or_null(d->size));
                if (d->type == QMP_MEMORY_DEVICE_VIRTIO_MEM) {
                        json_object_object_add(o, "requested-size", json_u64_or_null(d->requested_size));
                        json_object_object_add(o, "max-size", json_u64_or_null(d->max_size));
                        json_object_object_add(o, "block-size", json_u64_or_null(d->block_size));
                }
                if (d->type == QMP_MEMORY_DEVICE_DIMM || d->type == QMP_MEMORY_DEVICE_NVDIMM)
                        json_object_object_add(o, "slot", json_object_new_int64(d->slot));
                if (d->node >= 0)
                        json_object_object_add(o, "node", json_object_new_int64(d->node));
                json_object_array_add(a, o);
        }
        qmp_memory_device_list_clear(&list);
        return a;
}

static json_object *psi_line_json(const GuestPsiLine *l) {
        json_object *o;

        if (!l->known)
                return NULL;
        o = json_object_new_object();
        json_object_object_add(o, "avg10", json_object_new_double(l->avg10));
        json_object_object_add(o, "avg60", json_object_new_double(l->avg60));
        json_object_object_add(o, "avg300", json_object_new_double(l->avg300));
        json_object_object_add(o, "total-usec", json_object_new_uint64(l->total_usec));
        return o;
}

static json_object *agent_json(Context *ctx) {
        json_object *o = json_object_new_object();
        GuestVmstat vmstat;
        GuestMeminfo meminfo;
        GuestPsi psi;
        char *error = NULL;
        int r;

        r = qga_sync_read_vmstat(ctx->qga, arg_timeout_usec, &vmstat, &error);
        if (r < 0) {
                note_error(ctx, "reading /proc/vmstat through the agent", r, error);
                json_object_object_add(o, "vmstat", NULL);
        } else {
                json_object *v = json_object_new_object();

                for (size_t i = 0; i < _GUEST_VMSTAT_MAX; i++)
                        json_object_object_add(v, guest_vmstat_counter_name(i), json_u64_or_null(vmstat.value[i]));
                json_object_object_add(o, "vmstat", v);
        }

        r = qga_sync_read_meminfo(ctx->qga, arg_timeout_usec, &meminfo, &error);
        if (r < 0) {
                note_error(ctx, "reading /proc/meminfo through the agent", r, error);
                json_object_object_add(o, "meminfo-bytes", NULL);
        } else {
                json_object *v = json_object_new_object();

                for (size_t i = 0; i < _GUEST_MEMINFO_MAX; i++)
                        json_object_object_add(v, guest_meminfo_field_name(i), json_u64_or_null(meminfo.value[i]));
                json_object_object_add(o, "meminfo-bytes", v);
        }

        r = qga_sync_read_psi_memory(ctx->qga, arg_timeout_usec, &psi, &error);
        if (r < 0) {
                note_error(ctx, "reading /proc/pressure/memory through the agent", r, error);
                json_object_object_add(o, "psi-memory", NULL);
        } else {
                json_object *v = json_object_new_object();

                json_object_object_add(v, "some", psi_line_json(&psi.some));
                json_object_object_add(v, "full", psi_line_json(&psi.full));
                json_object_object_add(o, "psi-memory", v);
        }
        return o;
}

static int print_document(Context *ctx) {
        _cleanup_(json_object_putp) json_object *doc = json_object_new_object();
        unsigned major, minor, micro;
        char version[64];

        if (!doc)
                return -ENOMEM;
        if (qmp_client_get_qemu_version(ctx->qmp, &major, &minor, &micro) >= 0) {
                snprintf(version, sizeof(version), "%u.%u.%u", major, minor, micro);
                json_object_object_add(doc, "qemu", json_object_new_string(version));
        }
        json_object_object_add(doc, "balloon", balloon_json(ctx));
        if (ctx->failure == 0)
                json_object_object_add(doc, "memory-devices", memory_devices_json(ctx));
        if (ctx->failure == 0)
                json_object_object_add(doc, "guest-stats", guest_stats_json(ctx));
        if (ctx->failure == 0 && ctx->qga)
                json_object_object_add(doc, "agent", agent_json(ctx));
        if (ctx->failure != 0)
                return ctx->failure;

        puts(json_object_to_json_string_ext(doc,
                                            JSON_C_TO_STRING_NOSLASHESCAPE |
                                                    (arg_compact ? JSON_C_TO_STRING_PLAIN
                                                                 : JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED)));
        fflush(stdout);
        return 0;
}

static bool interrupted;

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        /* Ends whatever sync call runs the loop (it returns -ECANCELED). */
        interrupted = true;
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int run(Context *ctx) {
        sigset_t mask;
        int r;

        r = sd_event_new(&ctx->event);
        if (r < 0)
                return r;
        /* In --watch mode Ctrl-C ends the loop cleanly between documents. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        (void) sd_event_add_signal(ctx->event, NULL, SIGINT, on_signal, NULL);
        (void) sd_event_add_signal(ctx->event, NULL, SIGTERM, on_signal, NULL);

        r = qmp_client_new(&ctx->qmp, ctx->event);
        if (r < 0)
                return r;
        qmp_client_set_handshake_timeout(ctx->qmp, arg_timeout_usec);
        r = qmp_client_connect_path(ctx->qmp, arg_qmp_path);
        if (r >= 0)
                r = qmp_sync_wait_ready(ctx->qmp, QMP_TIMEOUT_INFINITY);
        if (r < 0) {
                fprintf(stderr,
                        "rightsize-qmp-query: cannot talk QMP on %s: %s\n",
                        arg_qmp_path,
                        qmp_client_get_last_error(ctx->qmp) ?: strerror(-r));
                return -r;
        }

        if (arg_agent_path) {
                r = qga_client_new(&ctx->qga, ctx->event);
                if (r < 0)
                        return r;
                r = qga_client_connect_path(ctx->qga, arg_agent_path);
                if (r >= 0)
                        r = qga_sync_wait_ready(ctx->qga, arg_timeout_usec);
                if (r < 0) {
                        fprintf(stderr,
                                "rightsize-qmp-query: guest agent on %s does not answer: %s\n",
                                arg_agent_path,
                                r == -ETIMEDOUT ? "no reply to guest-sync-delimited"
                                                : (qga_client_get_last_error(ctx->qga) ?: strerror(-r)));
                        return -r;
                }
        }

        for (;;) {
                r = print_document(ctx);
                if (interrupted)
                        return 0; /* Ctrl-C is how --watch ends: not an error */
                if (r < 0) {
                        const char *why = qmp_client_get_last_error(ctx->qmp);

                        fprintf(stderr,
                                "rightsize-qmp-query: %s%s%s\n",
                                ctx->failure_text ? ctx->failure_text : strerror(-r),
                                why ? ": " : "",
                                why ? why : "");
                        return -r;
                }
                if (arg_watch_seconds == 0)
                        return 0;
                r = qmp_sync_sleep(ctx->event, arg_watch_seconds * USEC_PER_SEC);
                if (interrupted)
                        return 0;
                if (r < 0)
                        return -r;
                if (qmp_client_is_closed(ctx->qmp)) {
                        fprintf(stderr, "rightsize-qmp-query: %s\n", qmp_client_get_last_error(ctx->qmp));
                        return ECONNRESET;
                }
        }
}

int main(int argc, char *argv[]) {
        Context ctx = {};
        int r;

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_SUCCESS;

        r = run(&ctx);

        qga_client_free(ctx.qga);
        qmp_client_free(ctx.qmp);
        sd_event_unref(ctx.event);
        free(ctx.failure_text);
        return r == 0 ? EXIT_SUCCESS : EXIT_PROTOCOL;
}
