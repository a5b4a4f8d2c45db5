/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fake-qemu: one process serving N simulated guests, each a QMP server on DIR/sim-N.qmp that
 * answers the commands rightsized uses, driven by the deterministic guest model of
 * tests/model. For the daemon's scale and fault tests; never instead of a real guest. This file
 * is the process: options, the sockets and their connections, the model's clock; fake-qmp.c
 * answers QMP, fake-agent.c the guest agent, and fake-qemu.h holds what they share.
 *
 * Time: every guest's model advances one interval (the scenario's, 10 s by default) every
 * interval / time-scale real seconds. The balloon target a client sets goes into the model,
 * which decides how far the guest lets it go (pushback); BALLOON_CHANGE follows each move.
 * Guest stats refresh at model steps once the polling interval has passed, as in QEMU.
 *
 * Faults (--fault N:KIND[@SECONDS]) apply after the handshake, so a client connects and then
 * fails; with @SECONDS only once that many real seconds have passed, with @usr2 only once the
 * process got SIGUSR2 (a guest that goes bad while it is managed: a test that has seen the guest
 * managed sends the signal, where a fixed delay would race a slow client):
 *   garbage          every reply is bytes that are not JSON
 *   huge-reply       every reply carries a long string (--huge-reply-size, 4 MiB by default),
 *                    generated as the socket drains so that 100 MiB costs no memory here
 *   deep-nesting     every reply's "return" is an array nested 100000 deep
 *   container-flood  every reply's "return" is an array of empty objects, just under 1 MiB
 *   wrong-types      every reply's values have the wrong JSON types (numbers as strings, ...)
 *   hang             commands are read and never answered
 *   close-mid-reply  half a reply is written, then the connection is closed
 *   event-flood      thousands of events per model step, and more before every reply
 *   lying-stats      every guest-stats sample is corrupted by the model (free > total, ...)
 *   lie-free         free memory reported above total memory
 *   lie-backwards    the fault and swap counters go backwards at every refresh
 *   lie-huge         every statistic near 2^64
 *   lie-future       last-update ten years in the future
 *   stale-stats      the statistics are refreshed once and never again
 *   stuck-balloon    balloon is accepted but the guest never moves
 *   outside-balloon  another controller sets the balloon once, to 85 % of where it is
 *   outside-raise    another controller gives the guest all its memory back once (virsh setmem
 *                    up, MoM growing it)
 *   no-balloon       QEMU started without -device virtio-balloon: query-balloon and balloon fail
 *                    as QEMU's do (DeviceNotActive), and there is no balloon object to qom-get
 *
 * Guest agent (--agent, or any agent-* fault for that guest): a qemu-guest-agent on DIR/sim-N.qga
 * beside the QMP socket. It speaks the agent protocol (no greeting, no ids; a 0xFF byte resets
 * the parser; guest-sync-delimited answers behind a 0xFF) and serves /proc/vmstat and
 * /proc/pressure/memory rendered from the model's counters through guest-file-open/-read/-close,
 * base64 in "buf-b64" as the real agent does. Agent faults:
 *   agent-hang       the agent accepts and reads, and never answers anything (not even a sync)
 *   agent-huge-vmstat /proc/vmstat is a million junk lines before the real counters (~30 MB,
 *                    generated per read, so it costs no memory here)
 *   agent-garbage    syncs are answered, every other command with bytes that are not JSON
 *   agent-utf8-error guest-file-open fails with a long error text of two-byte characters
 *
 * Windows guests (--windows): the balloon's stats in virtio-win's shape (tags 0-9, the rest and
 * the driver's first report 2^64-1), and with --agent qemu-ga for Windows (guest-get-osinfo
 * "mswindows", no /proc to open); fake-windows.c, with the sources it follows. */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-event.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "policies/rs-value.h"
#include "tests/model/guest-model.h"
#include "tests/model/scenario.h"
#include "tests/sim/fake-qemu.h"

#define MAX_INPUT (64 * 1024)
#define HUGE_REPLY_DEFAULT (4 * MIB)
#define FLOOD_EVENTS_PER_STEP 2000
#define PAD_CHUNK (256 * 1024)

static const char *const fault_names[_FAULT_MAX] = {
        [FAULT_NONE] = "none",
        [FAULT_GARBAGE] = "garbage",
        [FAULT_HUGE_REPLY] = "huge-reply",
        [FAULT_HANG] = "hang",
        [FAULT_CLOSE_MID_REPLY] = "close-mid-reply",
        [FAULT_LYING_STATS] = "lying-stats",
        [FAULT_STUCK_BALLOON] = "stuck-balloon",
        [FAULT_DEEP_NESTING] = "deep-nesting",
        [FAULT_CONTAINER_FLOOD] = "container-flood",
        [FAULT_WRONG_TYPES] = "wrong-types",
        [FAULT_EVENT_FLOOD] = "event-flood",
        [FAULT_LIE_FREE] = "lie-free",
        [FAULT_LIE_BACKWARDS] = "lie-backwards",
        [FAULT_LIE_HUGE] = "lie-huge",
        [FAULT_LIE_FUTURE] = "lie-future",
        [FAULT_STALE_STATS] = "stale-stats",
        [FAULT_AGENT_HANG] = "agent-hang",
        [FAULT_AGENT_HUGE_VMSTAT] = "agent-huge-vmstat",
        [FAULT_AGENT_GARBAGE] = "agent-garbage",
        [FAULT_AGENT_UTF8_ERROR] = "agent-utf8-error",
        [FAULT_OUTSIDE_BALLOON] = "outside-balloon",
        [FAULT_OUTSIDE_RAISE] = "outside-raise",
        [FAULT_NO_BALLOON] = "no-balloon",
};

static bool fault_is_agent(FaultKind k) {
        return k == FAULT_AGENT_HANG || k == FAULT_AGENT_HUGE_VMSTAT || k == FAULT_AGENT_GARBAGE ||
               k == FAULT_AGENT_UTF8_ERROR;
}

uint64_t huge_reply_size = HUGE_REPLY_DEFAULT;
static uint64_t start_usec;
/* When the guests last stepped, and how fast model time runs: a guest's clock between steps. */
static uint64_t last_tick_usec;
static double sim_time_scale = 1.0;
static uint64_t sim_step_usec;

typedef struct Sim {
        sd_event *event;
        Guest *guests;
        unsigned n_guests;
        const char *counters_path;
        double time_scale;
        uint64_t interval_usec;
} Sim;

static void conn_free(Conn *c) {
        Guest *g = c->guest;
        for (Conn **p = &g->conns; *p; p = &(*p)->next)
                if (*p == c) {
                        *p = c->next;
                        break;
                }
        sd_event_source_disable_unref(c->io);
        if (c->fd >= 0)
                close(c->fd);
        json_tokener_free(c->tok);
        free(c->out);
        free(c->pad_suffix);
        free(c);
}

static uint64_t now_monotonic(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

/* Set by SIGUSR2: the faults given @usr2 begin. */
static bool faults_released;

/* The guest's fault, once its start time (or signal) has come. */
FaultKind guest_fault(const Guest *g) {
        if (g->fault == FAULT_NONE || now_monotonic() < start_usec + g->fault_after_usec ||
            (g->fault_on_signal && !faults_released))
                return FAULT_NONE;
        return g->fault;
}

uint64_t guest_stats_reported_usec(const Guest *g) {
        /* QEMU's last-update is when the guest driver last answered the stats timer, which
         * fires every polling interval whether or not anything changed. The model steps once per
         * its own interval (10 s by default), so a guest asked for 1 s reports the same values
         * with a new time in between, as a real one does. A stale-stats guest stops reporting. */
        if (!g->have_stats || g->polling_interval == 0 || guest_fault(g) == FAULT_STALE_STATS)
                return g->stats_updated_usec;
        uint64_t since_tick = (uint64_t) ((double) (now_monotonic() - last_tick_usec) * sim_time_scale);
        uint64_t now = g->model.now_usec + MIN(since_tick, sim_step_usec);
        uint64_t period = g->polling_interval * USEC_PER_SEC;
        return MAX(g->stats_updated_usec, now / period * period);
}

int conn_update_events(Conn *c) {
        return sd_event_source_set_io_events(c->io, EPOLLIN | (c->out_len > 0 || c->pad_left > 0 || c->pad_suffix
                                                                       ? EPOLLOUT
                                                                       : 0));
}

int conn_queue(Conn *c, const char *data, size_t len) {
        if (c->out_len + len > c->out_size) {
                size_t size = MAX(c->out_size * 2, c->out_len + len);
                char *n = realloc(c->out, size);
                if (!n)
                        return -ENOMEM;
                c->out = n;
                c->out_size = size;
        }
        memcpy(c->out + c->out_len, data, len);
        c->out_len += len;
        return conn_update_events(c);
}

static int conn_on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = userdata;

        if (revents & EPOLLOUT && c->out_len < PAD_CHUNK && (c->pad_left > 0 || c->pad_suffix)) {
                /* The next stretch of a huge reply, then its end. */
                if (c->pad_left > 0) {
                        size_t n = (size_t) MIN(c->pad_left, (uint64_t) PAD_CHUNK);
                        _cleanup_free_ char *xs = malloc(n);
                        if (!xs || (memset(xs, 'x', n), conn_queue(c, xs, n)) < 0) {
                                conn_free(c);
                                return 0;
                        }
                        c->pad_left -= n;
                } else {
                        _cleanup_free_ char *suffix = TAKE_PTR(c->pad_suffix);
                        (void) conn_queue(c, suffix, strlen(suffix));
                }
        }
        if (revents & EPOLLOUT && c->out_len > 0) {
                ssize_t n = write(fd, c->out, c->out_len);
                if (n < 0 && errno != EAGAIN && errno != EINTR) {
                        conn_free(c);
                        return 0;
                }
                if (n > 0) {
                        memmove(c->out, c->out + n, c->out_len - (size_t) n);
                        c->out_len -= (size_t) n;
                }
                if (c->out_len == 0 && c->close_after_flush) {
                        conn_free(c);
                        return 0;
                }
                (void) conn_update_events(c);
        }
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                char buf[4096];
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return 0;
                if (n <= 0) {
                        conn_free(c);
                        return 0;
                }
                if (c->close_after_flush)
                        return 0; /* nothing more is answered on a connection about to break */
                size_t off = 0;
                while (off < (size_t) n) {
                        if (c->agent && (uint8_t) buf[off] == 0xff) {
                                /* the agent's parser reset, sent before guest-sync-delimited */
                                json_tokener_reset(c->tok);
                                off++;
                                continue;
                        }
                        size_t len = (size_t) n - off;
                        const char *ff = c->agent ? memchr(buf + off, 0xff, len) : NULL;
                        if (ff)
                                len = (size_t) (ff - (buf + off));
                        json_object *msg = json_tokener_parse_ex(c->tok, buf + off, (int) len);
                        enum json_tokener_error e = json_tokener_get_error(c->tok);
                        if (e == json_tokener_continue) {
                                off += len;
                                continue;
                        }
                        if (e != json_tokener_success) {
                                /* QEMU answers a parse error and resynchronises; we drop the peer */
                                conn_free(c);
                                return 0;
                        }
                        off += json_tokener_get_parse_end(c->tok);
                        json_tokener_reset(c->tok);
                        int r = c->agent ? agent_conn_handle(c, msg) : conn_handle(c, msg);
                        json_object_put(msg);
                        if (r < 0) {
                                conn_free(c);
                                return 0;
                        }
                        if (c->close_after_flush)
                                break;
                }
        }
        return 0;
}

static Conn *conn_accept(sd_event_source *s, int fd, Guest *g, bool agent) {
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return NULL; /* EAGAIN, or out of fds: the client sees a refused or stalled connect */

        Conn *c = calloc(1, sizeof(*c));
        if (!c) {
                close(cfd);
                return NULL;
        }
        c->guest = g;
        c->fd = cfd;
        c->agent = agent;
        c->tok = json_tokener_new_ex(64);
        if (!c->tok || sd_event_add_io(sd_event_source_get_event(s), &c->io, cfd, EPOLLIN, conn_on_io, c) < 0) {
                json_tokener_free(c->tok);
                close(cfd);
                free(c);
                return NULL;
        }
        c->next = g->conns;
        g->conns = c;
        return c;
}

/* The agent has no greeting: it waits for commands. */
static int agent_on_accept(sd_event_source *s, int fd, uint32_t revents _unused_, void *userdata) {
        (void) conn_accept(s, fd, userdata, true);
        return 0;
}

static int guest_on_accept(sd_event_source *s, int fd, uint32_t revents _unused_, void *userdata) {
        Guest *g = userdata;
        Conn *c = conn_accept(s, fd, g, false);
        if (!c)
                return 0;
        static const char greeting[] =
                "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, \"major\": 9}, \"package\": \"fake-qemu\"}, "
                "\"capabilities\": [\"oob\"]}}\r\n";
        if (conn_queue(c, greeting, sizeof(greeting) - 1) < 0)
                conn_free(c);
        return 0;
}

static void guest_step(Guest *g) {
        GuestModel *m = &g->model;

        FaultKind fault = guest_fault(g);

        if (fault == FAULT_LYING_STATS)
                m->cfg.lie_probability = 1.0;
        if (fault == FAULT_OUTSIDE_BALLOON && !g->outside_done) {
                /* Another controller (virsh setmem, MoM, an operator on a second QMP socket) sets
                 * the balloon once, to 85 % of where it is; later commands are obeyed as before. */
                guest_model_set_target(m, m->actual / 100 * 85);
                g->outside_done = true;
        }
        if (fault == FAULT_OUTSIDE_RAISE && !g->outside_done) {
                guest_model_set_target(m, m->cfg.boot_bytes);
                g->outside_done = true;
        }
        guest_model_step(m);
        if (g->polling_interval > 0 && !(fault == FAULT_STALE_STATS && g->have_stats) &&
            (!g->have_stats || m->now_usec - g->stats_updated_usec >= g->polling_interval * USEC_PER_SEC)) {
                guest_model_sample(m, &g->stats);
                g->stats_updated_usec = m->now_usec;
                g->have_stats = true;
        }
        if (g->vm_size != g->vm_requested) /* virtio-mem (un)plugs up to 64 blocks per interval */
                g->vm_size = g->vm_size < g->vm_requested ? MIN(g->vm_requested, g->vm_size + 64 * VIRTIO_MEM_BLOCK)
                                                          : MAX(g->vm_requested, g->vm_size - 64 * VIRTIO_MEM_BLOCK);
        if (m->actual != g->last_actual) {
                g->last_actual = m->actual;
                broadcast_balloon_change(g);
        }
        if (fault == FAULT_EVENT_FLOOD)
                for (Conn *c = g->conns; c; c = c->next)
                        if (c->negotiated)
                                conn_flood(c, FLOOD_EVENTS_PER_STEP);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Sim *sim = userdata;
        for (unsigned i = 0; i < sim->n_guests; i++)
                guest_step(&sim->guests[i]);
        last_tick_usec = now_monotonic();
        uint64_t period = MAX((uint64_t) ((double) sim->interval_usec / sim->time_scale), (uint64_t) 1000);
        (void) sd_event_source_set_time(s, usec + period);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON); /* timers are one-shot */
        return 0;
}

static int listen_at(Sim *sim, Guest *g, const char *dir, const char *suffix, char **path, int *fd,
                     sd_event_source **io, sd_event_io_handler_t handler) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_free_ char *tmp = NULL;

        if (asprintf(path, "%s/sim-%u.%s", dir, g->index, suffix) < 0 ||
            asprintf(&tmp, "%s/.sim-%u-%s.tmp", dir, g->index, suffix) < 0)
                return -ENOMEM;
        if (strlen(tmp) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, tmp);
        *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (*fd < 0)
                return -errno;
        (void) unlink(tmp);
        /* listen first, then rename: a watcher never sees a socket that refuses connections */
        if (bind(*fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(*fd, 16) < 0 || rename(tmp, *path) < 0)
                return -errno;
        return sd_event_add_io(sim->event, io, *fd, EPOLLIN, handler, g);
}

/* The agent's socket first: a daemon that finds the QMP socket finds the agent beside it. */
static int guest_listen(Sim *sim, Guest *g, const char *dir, bool agent) {
        int r;
        if (agent) {
                r = listen_at(sim, g, dir, "qga", &g->agent_path, &g->agent_listen_fd, &g->agent_accept_io,
                              agent_on_accept);
                if (r < 0)
                        return r;
        }
        return listen_at(sim, g, dir, "qmp", &g->path, &g->listen_fd, &g->accept_io, guest_on_accept);
}

/* One line per guest: "sim-N commands stats-reads balloon-sets actual-bytes target-bytes", replaced
 * atomically, so a benchmark can count the cycles a client completed without trusting the client,
 * and a test can read where a client left the balloon. */
static int write_counters(Sim *sim) {
        _cleanup_free_ char *tmp = NULL;
        if (!sim->counters_path)
                return 0;
        if (asprintf(&tmp, "%s.tmp", sim->counters_path) < 0)
                return -ENOMEM;
        FILE *f = fopen(tmp, "we");
        if (!f)
                return -errno;
        for (unsigned i = 0; i < sim->n_guests; i++) {
                const Guest *g = &sim->guests[i];
                fprintf(f, "sim-%u %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 "\n", g->index,
                        g->n_commands, g->n_stats_reads, g->n_balloon_sets, g->model.actual, g->model.target);
        }
        if (fclose(f) != 0 || rename(tmp, sim->counters_path) < 0) {
                int r = -errno;
                (void) unlink(tmp);
                return r;
        }
        return 0;
}

static int on_sigusr2(sd_event_source *s _unused_, const struct signalfd_siginfo *si _unused_,
                      void *userdata _unused_) {
        faults_released = true;
        return 0;
}

static int on_sigusr1(sd_event_source *s, const struct signalfd_siginfo *si _unused_, void *userdata) {
        (void) s;
        int r = write_counters(userdata);
        if (r < 0)
                fprintf(stderr, "fake-qemu: cannot write the counters: %s\n", strerror(-r));
        return 0;
}

static int parse_scenario(const char *name, int *ret) {
        static const struct {
                const char *alias, *name;
        } aliases[] = { { "steady", "steady-anon" }, { "file", "file-balloon" }, { "liar", "lying-guest" } };

        if (strcmp(name, "all") == 0) {
                *ret = -1;
                return 0;
        }
        for (size_t i = 0; i < ARRAY_SIZE(aliases); i++)
                if (strcmp(name, aliases[i].alias) == 0)
                        name = aliases[i].name;
        for (int k = 0; k < _SCENARIO_MAX; k++) {
                GuestModelConfig cfg;
                ScenarioSpec spec;
                scenario_config((ScenarioKind) k, 0, false, &cfg, &spec);
                if (strcmp(spec.name, name) == 0) {
                        *ret = k;
                        return 0;
                }
        }
        return -EINVAL;
}

static void help(void) {
        printf("Usage: fake-qemu --dir DIR [OPTIONS]\n"
               "Serves simulated guests, each a QMP server on DIR/sim-N.qmp (N from 0).\n\n"
               "  --dir DIR              Where the sockets go (must exist)\n"
               "  --guests N             How many guests (default 1)\n"
               "  --seed S               Model seed; guest N uses S+N (default 1)\n"
               "  --scenario NAME        steady(-anon), file(-balloon), file-agent, mixed, doubling,\n"
               "                         shrinking, streaming, streaming-late, idle, reboot,\n"
               "                         lying-guest, growth-no-swap, or all (round robin); default mixed\n"
               "  --randomize            Draw sizes from the seed instead of the scenario's fixed sizes\n"
               "  --time-scale X         Model seconds per real second (default 1)\n"
               "  --virtio-mem SIZE_MIB  Give every guest a virtio-mem device vm0 of this maximum\n"
               "  --fault N:KIND[@SEC]   Guest N misbehaves (from SEC seconds on, or with @usr2 from\n"
               "                         SIGUSR2 on): garbage, huge-reply,\n"
               "                         deep-nesting, container-flood, wrong-types, hang,\n"
               "                         close-mid-reply, event-flood,\n"
               "                         lying-stats, lie-free, lie-backwards, lie-huge, lie-future,\n"
               "                         stale-stats, stuck-balloon, outside-balloon,\n"
               "                         outside-raise, agent-hang,\n"
               "                         agent-huge-vmstat, agent-utf8-error,\n"
               "                         agent-garbage (repeatable; agent-* give the guest an agent)\n"
               "  --agent                Give every guest a guest agent on DIR/sim-N.qga\n"
               "  --windows              Every guest is Windows: virtio-win's balloon stats, and\n"
               "                         qemu-ga for Windows as its agent (no /proc)\n"
               "  --start-balloon MIB    Every guest starts with its balloon at this size (another\n"
               "                         controller set it before rightsized came)\n"
               "  --huge-reply-size MIB  Length of a huge-reply string (default 4)\n"
               "  --first-index N        Number the guests from N (sim-N.qmp, seed S+N, --fault N),\n"
               "                         so that several processes can share one directory\n"
               "  --counters FILE        On SIGUSR1 and at exit, write per guest the commands,\n"
               "                         guest-stats reads and balloon sets it answered\n\n"
               "Prints \"READY\" on stdout once every socket listens; SIGTERM/SIGINT remove them.\n");
}

int main(int argc, char *argv[]) {
        enum {
                ARG_DIR = 0x100,
                ARG_GUESTS,
                ARG_SEED,
                ARG_SCENARIO,
                ARG_TIME_SCALE,
                ARG_FAULT,
                ARG_RANDOMIZE,
                ARG_VM,
                ARG_FIRST_INDEX,
                ARG_COUNTERS,
                ARG_HUGE,
                ARG_AGENT,
                ARG_START_BALLOON,
                ARG_WINDOWS,
        };
        static const struct option options[] = {
                { "dir", required_argument, NULL, ARG_DIR },
                { "guests", required_argument, NULL, ARG_GUESTS },
                { "seed", required_argument, NULL, ARG_SEED },
                { "scenario", required_argument, NULL, ARG_SCENARIO },
                { "time-scale", required_argument, NULL, ARG_TIME_SCALE },
                { "fault", required_argument, NULL, ARG_FAULT },
                { "randomize", no_argument, NULL, ARG_RANDOMIZE },
                { "virtio-mem", required_argument, NULL, ARG_VM },
                { "first-index", required_argument, NULL, ARG_FIRST_INDEX },
                { "counters", required_argument, NULL, ARG_COUNTERS },
                { "huge-reply-size", required_argument, NULL, ARG_HUGE },
                { "agent", no_argument, NULL, ARG_AGENT },
                { "start-balloon", required_argument, NULL, ARG_START_BALLOON },
                { "windows", no_argument, NULL, ARG_WINDOWS },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *dir = NULL;
        unsigned n_guests = 1, first_index = 0;
        uint64_t seed = 1, vm_max = 0, start_balloon = 0;
        int scenario = SCENARIO_MIXED;
        bool randomize = false, agents = false, windows = false;
        double time_scale = 1.0;
        struct {
                unsigned guest;
                FaultKind kind;
                uint64_t after_usec;
                bool on_signal;
        } faults[64];
        size_t n_faults = 0;
        Sim sim = {};
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                char *end = NULL;
                switch (c) {
                case ARG_DIR:
                        dir = optarg;
                        break;
                case ARG_GUESTS:
                        n_guests = (unsigned) strtoul(optarg, &end, 10);
                        if (*end || n_guests == 0 || n_guests > 100000)
                                goto usage;
                        break;
                case ARG_SEED:
                        seed = strtoull(optarg, &end, 10);
                        if (*end)
                                goto usage;
                        break;
                case ARG_SCENARIO:
                        if (parse_scenario(optarg, &scenario) < 0) {
                                fprintf(stderr, "fake-qemu: unknown scenario \"%s\"\n", optarg);
                                return 2;
                        }
                        break;
                case ARG_TIME_SCALE:
                        time_scale = strtod(optarg, &end);
                        if (*end || !(time_scale > 0) || !isfinite(time_scale))
                                goto usage;
                        break;
                case ARG_RANDOMIZE:
                        randomize = true;
                        break;
                case ARG_AGENT:
                        agents = true;
                        break;
                case ARG_WINDOWS:
                        windows = true;
                        break;
                case ARG_START_BALLOON:
                        start_balloon = strtoull(optarg, &end, 10) * MIB;
                        if (*end || start_balloon == 0)
                                goto usage;
                        break;
                case ARG_VM:
                        vm_max = strtoull(optarg, &end, 10) * MIB;
                        if (*end)
                                goto usage;
                        break;
                case ARG_FIRST_INDEX:
                        first_index = (unsigned) strtoul(optarg, &end, 10);
                        if (*end || first_index > 1000000)
                                goto usage;
                        break;
                case ARG_COUNTERS:
                        sim.counters_path = optarg;
                        break;
                case ARG_HUGE:
                        huge_reply_size = strtoull(optarg, &end, 10) * MIB;
                        if (*end || huge_reply_size == 0)
                                goto usage;
                        break;
                case ARG_FAULT: {
                        const char *colon = strchr(optarg, ':'), *at;
                        size_t k, len;
                        if (!colon || n_faults >= ARRAY_SIZE(faults))
                                goto usage;
                        faults[n_faults].guest = (unsigned) strtoul(optarg, &end, 10);
                        if (end != colon)
                                goto usage;
                        at = strchr(colon + 1, '@');
                        len = at ? (size_t) (at - colon - 1) : strlen(colon + 1);
                        faults[n_faults].after_usec = 0;
                        faults[n_faults].on_signal = false;
                        if (at && strcmp(at + 1, "usr2") == 0)
                                faults[n_faults].on_signal = true;
                        else if (at) {
                                double sec = strtod(at + 1, &end);
                                if (*end || !(sec >= 0) || sec > 1e6)
                                        goto usage;
                                faults[n_faults].after_usec = (uint64_t) (sec * USEC_PER_SEC);
                        }
                        for (k = 1; k < _FAULT_MAX; k++)
                                if (strlen(fault_names[k]) == len && strncmp(colon + 1, fault_names[k], len) == 0)
                                        break;
                        if (k == _FAULT_MAX) {
                                fprintf(stderr, "fake-qemu: unknown fault \"%s\"\n", colon + 1);
                                return 2;
                        }
                        faults[n_faults++].kind = (FaultKind) k;
                        break;
                }
                case 'h':
                        help();
                        return 0;
                default:
                        goto usage;
                }
        }
        if (!dir || optind < argc)
                goto usage;

        /* hundreds of guests: a listening socket each plus their clients */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        (void) signal(SIGPIPE, SIG_IGN);
        start_usec = last_tick_usec = now_monotonic();

        r = sd_event_new(&sim.event);
        if (r < 0)
                return 1;
        sim.n_guests = n_guests;
        sim.time_scale = time_scale;
        sim_time_scale = time_scale;
        sim.guests = calloc(n_guests, sizeof(Guest));
        if (!sim.guests)
                return 1;
        for (unsigned i = 0; i < n_guests; i++) {
                Guest *g = &sim.guests[i];
                GuestModelConfig cfg;
                ScenarioSpec spec;
                unsigned index = first_index + i;
                ScenarioKind kind = scenario < 0 ? (ScenarioKind) (index % _SCENARIO_MAX) : (ScenarioKind) scenario;

                g->index = index;
                g->windows = windows;
                g->listen_fd = -1;
                g->agent_listen_fd = -1;
                scenario_config(kind, seed + index, randomize, &cfg, &spec);
                for (size_t f = 0; f < n_faults; f++)
                        if (faults[f].guest == index) {
                                g->fault = faults[f].kind;
                                g->fault_after_usec = faults[f].after_usec;
                                g->fault_on_signal = faults[f].on_signal;
                        }
                if (g->fault == FAULT_LYING_STATS && g->fault_after_usec == 0 && !g->fault_on_signal)
                        cfg.lie_probability = 1.0;
                guest_model_init(&g->model, &cfg);
                if (start_balloon > 0 && start_balloon < cfg.boot_bytes)
                        g->model.target = g->model.actual = start_balloon;
                g->last_actual = g->model.actual;
                g->vm_max = vm_max;
                /* one tick period for everyone: the first guest's interval (all scenarios share it) */
                if (i == 0)
                        sim.interval_usec = sim_step_usec = cfg.interval_usec;
                r = guest_listen(&sim, g, dir, agents || fault_is_agent(g->fault));
                if (r < 0) {
                        fprintf(stderr, "fake-qemu: cannot listen for guest %u in %s: %s\n", i, dir, strerror(-r));
                        return 1;
                }
        }
        for (size_t f = 0; f < n_faults; f++)
                if (faults[f].guest < first_index || faults[f].guest - first_index >= n_guests)
                        fprintf(stderr, "fake-qemu: warning: --fault for guest %u, which does not exist\n", faults[f].guest);

        uint64_t now;
        sd_event_now(sim.event, CLOCK_MONOTONIC, &now);
        r = sd_event_add_time(sim.event, NULL, CLOCK_MONOTONIC,
                              now + MAX((uint64_t) ((double) sim.interval_usec / time_scale), (uint64_t) 1000), 0,
                              on_tick, &sim);
        if (r >= 0) {
                sigset_t mask;
                sigemptyset(&mask);
                sigaddset(&mask, SIGTERM);
                sigaddset(&mask, SIGINT);
                sigaddset(&mask, SIGUSR1);
                sigaddset(&mask, SIGUSR2);
                sigprocmask(SIG_BLOCK, &mask, NULL);
                r = sd_event_add_signal(sim.event, NULL, SIGTERM, NULL, NULL);
                if (r >= 0)
                        r = sd_event_add_signal(sim.event, NULL, SIGINT, NULL, NULL);
                if (r >= 0)
                        r = sd_event_add_signal(sim.event, NULL, SIGUSR1, on_sigusr1, &sim);
                if (r >= 0)
                        r = sd_event_add_signal(sim.event, NULL, SIGUSR2, on_sigusr2, NULL);
        }
        if (r < 0) {
                fprintf(stderr, "fake-qemu: event loop setup failed: %s\n", strerror(-r));
                return 1;
        }
        printf("READY\n");
        fflush(stdout);
        r = sd_event_loop(sim.event);
        (void) write_counters(&sim);

        for (unsigned i = 0; i < n_guests; i++) {
                Guest *g = &sim.guests[i];
                while (g->conns)
                        conn_free(g->conns);
                sd_event_source_disable_unref(g->accept_io);
                if (g->listen_fd >= 0)
                        close(g->listen_fd);
                if (g->path)
                        (void) unlink(g->path);
                free(g->path);
                sd_event_source_disable_unref(g->agent_accept_io);
                if (g->agent_listen_fd >= 0)
                        close(g->agent_listen_fd);
                if (g->agent_path)
                        (void) unlink(g->agent_path);
                free(g->agent_path);
                for (size_t f = 0; f < ARRAY_SIZE(g->files); f++)
                        agent_file_close(&g->files[f]);
        }
        free(sim.guests);
        sd_event_unref(sim.event);
        return r < 0 ? 1 : 0;

usage:
        fprintf(stderr, "fake-qemu: invalid arguments. Try 'fake-qemu --help'.\n");
        return 2;
}
