/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/time-util.h"
#include "tests/lib/fake-qmp-peer.h"

/* A hang, not a timing bound: far beyond what a loaded machine needs, below the 30 s the
 * suites give each test. */
#define GUARD_USEC (20 * USEC_PER_SEC)
#define MAX_IDS 256

typedef enum StepType {
        STEP_SEND,
        STEP_EXPECT,
        STEP_DELAY,
        STEP_CLOSE,
} StepType;

typedef struct Step {
        StepType type;
        char *data; /* send: bytes; expect: command */
        size_t size;
        bool raw;             /* send: no placeholder substitution */
        size_t chunk;         /* send */
        char *arguments_json; /* expect */
        uint64_t usec;        /* delay */
} Step;

struct FakePeer {
        sd_event *event;
        int fd;
        sd_event_source *io;
        sd_event_source *tick;  /* paces chunked sends, idle priority */
        sd_event_source *timer; /* delay steps */
        bool qga;
        size_t chunk;

        Step *steps;
        size_t n_steps, current;
        bool step_started;

        /* Current send step: bytes not yet handed to the socket. */
        char *pending;
        size_t pending_size, pending_pos;
        size_t n_chunks;

        json_tokener *tokener;
        json_object **received;
        size_t n_received;

        char *ids[MAX_IDS];
        size_t n_ids;
        char *sync_id;
        unsigned n_sync_bytes;

        bool client_closed;
        char *failure;
};

static void advance(FakePeer *p);

_printf_(2, 3) static void fail(FakePeer *p, const char *format, ...) {
        va_list ap;

        if (p->failure)
                return;
        va_start(ap, format);
        if (vasprintf(&p->failure, format, ap) < 0)
                p->failure = strdup("fake peer failure");
        va_end(ap);
}

static Step *add_step(FakePeer *p, StepType type) {
        Step *s;

        s = realloc(p->steps, (p->n_steps + 1) * sizeof(Step));
        if (!s)
                abort();
        p->steps = s;
        s = &p->steps[p->n_steps++];
        *s = (Step) { .type = type, .chunk = p->chunk };
        return s;
}

void fake_peer_set_qga(FakePeer *p, bool qga) {
        p->qga = qga;
}

void fake_peer_set_chunk_size(FakePeer *p, size_t chunk) {
        p->chunk = chunk;
}

void fake_peer_send(FakePeer *p, const char *text) {
        Step *s = add_step(p, STEP_SEND);

        s->data = strdup(text);
        s->size = strlen(text);
        advance(p);
}

void fake_peer_send_bytes(FakePeer *p, const void *data, size_t size) {
        Step *s = add_step(p, STEP_SEND);

        s->data = malloc(size + 1);
        memcpy(s->data, data, size);
        s->size = size;
        s->raw = true;
        advance(p);
}

void fake_peer_expect(FakePeer *p, const char *command, const char *arguments_json) {
        Step *s = add_step(p, STEP_EXPECT);

        s->data = strdup(command);
        s->arguments_json = arguments_json ? strdup(arguments_json) : NULL;
        advance(p);
}

void fake_peer_delay(FakePeer *p, uint64_t usec) {
        add_step(p, STEP_DELAY)->usec = usec;
        advance(p);
}

void fake_peer_close(FakePeer *p) {
        add_step(p, STEP_CLOSE);
        advance(p);
}

void fake_peer_greet(FakePeer *p) {
        fake_peer_send(p,
                       "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, \"major\": 7}, "
                       "\"package\": \"Debian 1:7.2+dfsg-7\"}, \"capabilities\": [\"oob\"]}}\r\n");
        fake_peer_expect(p, "qmp_capabilities", NULL);
        fake_peer_send(p, "{\"return\": {}, \"id\": %ID%}\r\n");
}

void fake_peer_reply(FakePeer *p, const char *return_json) {
        char *text;

        if (asprintf(&text, "{\"return\": %s, \"id\": %%ID%%}\r\n", return_json) < 0)
                abort();
        fake_peer_send(p, text);
        free(text);
}

/* Expands placeholders into a new buffer. */
static char *substitute(FakePeer *p, const char *text, size_t size, size_t *ret_size) {
        size_t alloc = size * 2 + 64, n = 0;
        char *out = malloc(alloc);

        if (!out)
                abort(); /* test code: out of memory fails the test run */

        for (size_t i = 0; i < size;) {
                const char *value = NULL;
                size_t skip = 0;
                unsigned idx;
                int consumed = 0;

                if (text[i] == '%') {
                        if (size - i >= 4 && memcmp(text + i, "%ID%", 4) == 0) {
                                value = p->n_ids > 0 ? p->ids[p->n_ids - 1] : "null";
                                skip = 4;
                        } else if (size - i >= 6 && memcmp(text + i, "%SYNC%", 6) == 0) {
                                value = p->sync_id ? p->sync_id : "null";
                                skip = 6;
                        } else if (sscanf(text + i, "%%ID:%u%%%n", &idx, &consumed) == 1 && consumed > 0) {
                                value = idx < p->n_ids ? p->ids[idx] : "null";
                                skip = (size_t) consumed;
                        }
                }
                if (!value) {
                        value = text + i;
                        skip = 1;
                }
                size_t len = value == text + i ? 1 : strlen(value);
                if (n + len + 1 > alloc) {
                        alloc = (n + len + 1) * 2;
                        char *grown = realloc(out, alloc);
                        if (!grown)
                                abort();
                        out = grown;
                }
                memcpy(out + n, value, len);
                n += len;
                i += skip;
        }
        out[n] = '\0';
        *ret_size = n;
        return out;
}

static void update_io(FakePeer *p) {
        bool want_out = p->pending && p->pending_pos < p->pending_size && p->steps[p->current].chunk == 0;

        if (p->io)
                sd_event_source_set_io_events(p->io, EPOLLIN | (want_out ? EPOLLOUT : 0));
}

static void peer_close_fd(FakePeer *p) {
        p->io = sd_event_source_disable_unref(p->io);
        if (p->fd >= 0)
                close(p->fd);
        p->fd = -1;
}

/* Writes up to limit bytes of the pending send; returns true when all of it is out. */
static bool flush_pending(FakePeer *p, size_t limit) {
        size_t want = MIN(limit, p->pending_size - p->pending_pos);

        while (want > 0 && p->fd >= 0) {
                ssize_t n = send(p->fd, p->pending + p->pending_pos, want, MSG_DONTWAIT | MSG_NOSIGNAL);

                if (n < 0) {
                        if (errno == EAGAIN)
                                break;
                        if (errno == EINTR)
                                continue;
                        /* The client went away; sends after that are moot. */
                        p->client_closed = true;
                        p->pending_pos = p->pending_size;
                        break;
                }
                p->pending_pos += (size_t) n;
                want -= (size_t) n;
                p->n_chunks++;
        }
        return p->pending_pos >= p->pending_size;
}

static void finish_step(FakePeer *p) {
        free(p->pending);
        p->pending = NULL;
        p->pending_size = p->pending_pos = 0;
        p->current++;
        p->step_started = false;
}

static bool check_expect(FakePeer *p, Step *s, json_object *msg) {
        json_object *execute, *arguments = NULL, *id;

        if (!json_object_is_type(msg, json_type_object) || !json_object_object_get_ex(msg, "execute", &execute) ||
            !json_object_is_type(execute, json_type_string)) {
                fail(p, "expected command %s, got %s", s->data, json_object_to_json_string(msg));
                return false;
        }
        if (strcmp(json_object_get_string(execute), s->data) != 0) {
                fail(p, "expected command %s, got %s", s->data, json_object_to_json_string(msg));
                return false;
        }
        json_object_object_get_ex(msg, "arguments", &arguments);
        if (s->arguments_json) {
                json_object *want = json_tokener_parse(s->arguments_json);

                if (!json_object_equal(want, arguments)) {
                        fail(p, "command %s: expected arguments %s, got %s", s->data, s->arguments_json,
                             arguments ? json_object_to_json_string(arguments) : "(none)");
                        json_object_put(want);
                        return false;
                }
                json_object_put(want);
        }
        if (json_object_object_get_ex(msg, "id", &id) && p->n_ids < MAX_IDS)
                p->ids[p->n_ids++] = strdup(json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN));
        if (strcmp(s->data, "guest-sync-delimited") == 0 && arguments &&
            json_object_object_get_ex(arguments, "id", &id)) {
                free(p->sync_id);
                p->sync_id = strdup(json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN));
        }
        return true;
}

static int on_tick(sd_event_source *source, void *userdata) {
        FakePeer *p = userdata;

        p->tick = sd_event_source_disable_unref(p->tick);
        if (p->current < p->n_steps && p->steps[p->current].type == STEP_SEND && p->pending) {
                if (flush_pending(p, p->steps[p->current].chunk))
                        finish_step(p);
        }
        advance(p);
        return 0;
}

static int on_delay(sd_event_source *source, uint64_t usec, void *userdata) {
        FakePeer *p = userdata;

        p->timer = sd_event_source_disable_unref(p->timer);
        finish_step(p);
        advance(p);
        return 0;
}

static void schedule_tick(FakePeer *p) {
        if (p->tick)
                return;
        /* Idle priority: the client's pending reads run before the next chunk goes out,
         * so every chunk really is a separate read on the other side. */
        if (sd_event_add_defer(p->event, &p->tick, on_tick, p) < 0)
                abort();
        sd_event_source_set_priority(p->tick, SD_EVENT_PRIORITY_IDLE);
}

static void advance(FakePeer *p) {
        while (!p->failure && p->current < p->n_steps) {
                Step *s = &p->steps[p->current];

                switch (s->type) {
                case STEP_SEND:
                        if (!p->step_started) {
                                p->step_started = true;
                                if (s->raw) {
                                        p->pending = malloc(s->size + 1);
                                        memcpy(p->pending, s->data, s->size);
                                        p->pending_size = s->size;
                                } else
                                        p->pending = substitute(p, s->data, s->size, &p->pending_size);
                                p->pending_pos = 0;
                        }
                        if (s->chunk > 0) {
                                schedule_tick(p);
                                return;
                        }
                        if (!flush_pending(p, SIZE_MAX)) {
                                update_io(p);
                                return;
                        }
                        finish_step(p);
                        update_io(p);
                        break;

                case STEP_EXPECT:
                        if (p->n_received == 0) {
                                if (p->client_closed)
                                        fail(p, "client closed the connection while %s was expected", s->data);
                                return;
                        }
                        {
                                json_object *msg = p->received[0];

                                memmove(p->received, p->received + 1, (p->n_received - 1) * sizeof(*p->received));
                                p->n_received--;
                                check_expect(p, s, msg);
                                json_object_put(msg);
                        }
                        finish_step(p);
                        break;

                case STEP_DELAY:
                        if (!p->step_started) {
                                p->step_started = true;
                                if (sd_event_add_time_relative(p->event, &p->timer, CLOCK_MONOTONIC, s->usec, 1, on_delay, p) < 0)
                                        abort();
                        }
                        return;

                case STEP_CLOSE:
                        peer_close_fd(p);
                        finish_step(p);
                        break;
                }
        }
}

static void receive_bytes(FakePeer *p, const char *buf, size_t size) {
        size_t pos = 0;

        while (pos < size) {
                json_object *msg;
                enum json_tokener_error error;

                if (p->qga && (unsigned char) buf[pos] == 0xFF) {
                        p->n_sync_bytes++;
                        json_tokener_reset(p->tokener);
                        pos++;
                        continue;
                }
                /* In agent mode stop at the next 0xFF so it is seen above. */
                size_t end = size;
                if (p->qga) {
                        const char *ff = memchr(buf + pos, 0xFF, size - pos);
                        if (ff)
                                end = (size_t) (ff - buf);
                }
                msg = json_tokener_parse_ex(p->tokener, buf + pos, (int) (end - pos));
                error = json_tokener_get_error(p->tokener);
                if (error == json_tokener_continue) {
                        pos = end;
                        continue;
                }
                if (error != json_tokener_success) {
                        fail(p, "client sent malformed JSON: %s", json_tokener_error_desc(error));
                        return;
                }
                pos += json_tokener_get_parse_end(p->tokener);
                json_tokener_reset(p->tokener);
                p->received = realloc(p->received, (p->n_received + 1) * sizeof(*p->received));
                p->received[p->n_received++] = msg;
        }
}

static int on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        FakePeer *p = userdata;
        char buf[4096];

        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t n = read(fd, buf, sizeof(buf));

                if (n > 0)
                        receive_bytes(p, buf, (size_t) n);
                else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                        p->client_closed = true;
                        /* Stop polling a dead socket but keep the fd for pending steps. */
                        p->io = sd_event_source_disable_unref(p->io);
                }
        }
        if (p->io && (revents & EPOLLOUT) && p->current < p->n_steps && p->steps[p->current].type == STEP_SEND &&
            p->pending && p->steps[p->current].chunk == 0) {
                if (flush_pending(p, SIZE_MAX))
                        finish_step(p);
                update_io(p);
        }
        advance(p);
        return 0;
}

int fake_peer_new(FakePeer **ret, sd_event *event, int fd) {
        FakePeer *p = calloc(1, sizeof(*p));
        int flags;

        if (!p)
                return -ENOMEM;
        p->event = sd_event_ref(event);
        p->fd = fd;
        p->tokener = json_tokener_new();
        flags = fcntl(fd, F_GETFL);
        fcntl(fd, F_SETFL, flags | O_NONBLOCK);
        if (sd_event_add_io(event, &p->io, fd, EPOLLIN, on_io, p) < 0)
                abort();
        *ret = p;
        return 0;
}

FakePeer *fake_peer_free(FakePeer *p) {
        if (!p)
                return NULL;
        peer_close_fd(p);
        sd_event_source_disable_unref(p->tick);
        sd_event_source_disable_unref(p->timer);
        for (size_t i = 0; i < p->n_steps; i++) {
                free(p->steps[i].data);
                free(p->steps[i].arguments_json);
        }
        free(p->steps);
        free(p->pending);
        json_tokener_free(p->tokener);
        for (size_t i = 0; i < p->n_received; i++)
                json_object_put(p->received[i]);
        free(p->received);
        for (size_t i = 0; i < p->n_ids; i++)
                free(p->ids[i]);
        free(p->sync_id);
        free(p->failure);
        sd_event_unref(p->event);
        free(p);
        return NULL;
}

bool fake_peer_done(const FakePeer *p) {
        return p->current >= p->n_steps;
}

const char *fake_peer_failure(const FakePeer *p) {
        return p->failure;
}

size_t fake_peer_n_unexpected(const FakePeer *p) {
        return p->n_received;
}

unsigned fake_peer_n_sync_bytes(const FakePeer *p) {
        return p->n_sync_bytes;
}

size_t fake_peer_n_chunks_written(const FakePeer *p) {
        return p->n_chunks;
}

bool fake_peer_client_closed(const FakePeer *p) {
        return p->client_closed;
}

const char *fake_peer_last_id(const FakePeer *p) {
        return p->n_ids > 0 ? p->ids[p->n_ids - 1] : NULL;
}

bool test_run_until(sd_event *e, bool (*cond)(void *userdata), void *userdata) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + GUARD_USEC;

        while (!cond(userdata)) {
                if (now_usec(CLOCK_MONOTONIC) >= deadline)
                        return false;
                if (sd_event_run(e, 100 * USEC_PER_MSEC) < 0)
                        return false;
        }
        return true;
}

static bool flag_set(void *userdata) {
        return *(const bool *) userdata;
}

bool test_run_until_flag(sd_event *e, const bool *flag) {
        return test_run_until(e, flag_set, (void *) flag);
}

static bool peer_done(void *userdata) {
        const FakePeer *p = userdata;

        return fake_peer_done(p) || p->failure;
}

bool test_run_until_done(sd_event *e, const FakePeer *p) {
        return test_run_until(e, peer_done, (void *) p) && !p->failure;
}

void test_run_for(sd_event *e, uint64_t usec) {
        uint64_t deadline = now_usec(CLOCK_MONOTONIC) + usec;

        for (uint64_t now = now_usec(CLOCK_MONOTONIC); now < deadline; now = now_usec(CLOCK_MONOTONIC))
                (void) sd_event_run(e, deadline - now);
}
