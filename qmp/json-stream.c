/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "qmp/json-containers.h"
#include "qmp/json-stream.h"

#define READ_CHUNK ((size_t) (64 * KIB))
/* Reads of a full buffer in one dispatch before the others get their turn; the socket is then
 * re-armed, since an edge-triggered source would not report the bytes still queued. */
#define READS_PER_DISPATCH 16
/* A full backlog on a unix socket fails connect() with EAGAIN instead of queueing. */
#define CONNECT_RETRY_USEC (20 * USEC_PER_MSEC)

typedef enum StreamState {
        STREAM_NEW,
        STREAM_CONNECTING,
        STREAM_CONNECTED,
        STREAM_CLOSED,
} StreamState;

struct JsonStream {
        unsigned n_ref;
        sd_event *event;
        JsonStreamCallbacks callbacks;
        void *userdata;

        StreamState state;
        int fd;
        sd_event_source *io;
        sd_event_source *retry;
        char *path; /* kept for connect retries and error messages */

        json_tokener *tokener;
        size_t max_message;
        int max_depth;
        size_t max_containers;
        JsonContainerCount containers; /* of the value being parsed */
        JsonContainerCount frame;      /* where it is, for where the parser's input is cut */
        size_t message_bytes; /* consumed so far for the value being parsed */
        bool partial;         /* a value has started (more than whitespace seen) */
        bool discard_until_sync;

        char *input; /* READ_CHUNK bytes while a read is processed, else NULL */
        /* The start of a UTF-8 character the last read cut off, fed with the next read. */
        char carry[4];
        size_t carry_len;

        char *output;
        size_t output_start, output_end, output_alloc;

        uint32_t io_events;          /* what the io source watches now (0: no source) */
        struct Flusher *flusher;     /* the loop's, shared by its streams */
        JsonStream *flush_prev, *flush_next;
        bool flush_queued;           /* output waits for the flusher, not for EPOLLOUT */
};

/* Output is sent from the loop, never from inside json_stream_write(): by one defer source per
 * event loop, shared by its streams, which sends what every stream queued since it last ran.
 * The commands a guest's tick queues leave in one send() each, the ticks of many guests due
 * at the same wake-up in one dispatch, and a socket's EPOLLOUT is watched only while the peer
 * does not take what is queued (a full socket buffer): no epoll_ctl() to arm it and disarm it
 * again, and no wake-up to learn what is known already, that a fresh socket takes the bytes. */
typedef struct Flusher {
        sd_event *event; /* not referenced: the defer source and the streams are */
        sd_event_source *defer;
        unsigned n_streams;
        JsonStream *queue;
        struct Flusher *next;
} Flusher;

static _Thread_local Flusher *flushers;

static void flush_dequeue(JsonStream *s) {
        if (!s->flush_queued)
                return;
        if (s->flush_prev)
                s->flush_prev->flush_next = s->flush_next;
        else
                s->flusher->queue = s->flush_next;
        if (s->flush_next)
                s->flush_next->flush_prev = s->flush_prev;
        s->flush_prev = s->flush_next = NULL;
        s->flush_queued = false;
}

static int flusher_get(sd_event *event, Flusher **ret);

static void flusher_unref(Flusher *f) {
        if (!f || --f->n_streams > 0)
                return;
        for (Flusher **p = &flushers; *p; p = &(*p)->next)
                if (*p == f) {
                        *p = f->next;
                        break;
                }
        sd_event_source_disable_unref(f->defer);
        free(f);
}

static void stream_free(JsonStream *s) {
        json_stream_close(s);
        flush_dequeue(s);
        flusher_unref(s->flusher);
        if (s->tokener)
                json_tokener_free(s->tokener);
        sd_event_unref(s->event);
        free(s->path);
        free(s->input);
        free(s->output);
        free(s);
}

JsonStream *json_stream_ref(JsonStream *s) {
        if (s)
                s->n_ref++;
        return s;
}

JsonStream *json_stream_unref(JsonStream *s) {
        if (s && --s->n_ref == 0)
                stream_free(s);
        return NULL;
}

static int tokener_make(JsonStream *s) {
        json_tokener *t = json_tokener_new_ex(s->max_depth);

        if (!t)
                return -ENOMEM;
        /* Strict RFC 8259 syntax, several values back to back, and valid UTF-8 only, so
         * strings handed out are safe to log. */
        json_tokener_set_flags(t, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS |
                                          JSON_TOKENER_VALIDATE_UTF8);
        if (s->tokener)
                json_tokener_free(s->tokener);
        s->tokener = t;
        s->message_bytes = 0;
        s->partial = false;
        json_container_count_reset(&s->containers);
        json_container_count_reset(&s->frame);
        return 0;
}

int json_stream_new(JsonStream **ret, sd_event *event, const JsonStreamCallbacks *callbacks, void *userdata) {
        JsonStream *s;
        int r;

        if (!ret || !event || !callbacks)
                return -EINVAL;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (JsonStream) {
                .n_ref = 1,
                .event = sd_event_ref(event),
                .callbacks = *callbacks,
                .userdata = userdata,
                .fd = -1,
                .max_message = JSON_STREAM_MAX_MESSAGE_DEFAULT,
                .max_depth = JSON_STREAM_MAX_DEPTH_DEFAULT,
                .max_containers = JSON_STREAM_MAX_CONTAINERS_DEFAULT,
        };
        r = tokener_make(s);
        if (r >= 0)
                r = flusher_get(event, &s->flusher);
        if (r < 0) {
                stream_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

int json_stream_set_max_message_size(JsonStream *s, size_t bytes) {
        if (s->state != STREAM_NEW)
                return -EBUSY;
        s->max_message = bytes > 0 ? bytes : JSON_STREAM_MAX_MESSAGE_DEFAULT;
        return 0;
}

int json_stream_set_max_containers(JsonStream *s, size_t containers) {
        if (s->state != STREAM_NEW)
                return -EBUSY;
        s->max_containers = containers > 0 ? containers : JSON_STREAM_MAX_CONTAINERS_DEFAULT;
        return 0;
}

int json_stream_set_max_depth(JsonStream *s, int depth) {
        if (s->state != STREAM_NEW)
                return -EBUSY;
        s->max_depth = depth > 0 ? depth : JSON_STREAM_MAX_DEPTH_DEFAULT;
        return tokener_make(s);
}

bool json_stream_is_open(const JsonStream *s) {
        return s && (s->state == STREAM_CONNECTING || s->state == STREAM_CONNECTED);
}

void json_stream_close(JsonStream *s) {
        if (!s || s->state == STREAM_CLOSED)
                return;
        s->state = STREAM_CLOSED;
        s->io = sd_event_source_disable_unref(s->io);
        s->io_events = 0;
        s->retry = sd_event_source_disable_unref(s->retry);
        closep(&s->fd);
        s->fd = -1;
        s->output_start = s->output_end = 0;
        flush_dequeue(s);
}

_printf_(3, 4) static void stream_fail(JsonStream *s, int error, const char *format, ...) {
        char reason[512];
        va_list ap;

        if (s->state == STREAM_CLOSED)
                return;
        va_start(ap, format);
        vsnprintf(reason, sizeof(reason), format, ap);
        va_end(ap);

        json_stream_close(s);
        if (s->callbacks.failed)
                s->callbacks.failed(s, error, reason, s->userdata);
}

/* Edge-triggered: sd-event asks epoll for ready sources before every dispatch of one, and a
 * level-triggered socket that has been reported but not yet dispatched is polled and reported
 * again each time, so a wake-up that finds k sockets readable cost k² socket polls. An edge is
 * reported once; on_io() reads until the socket is empty (or re-arms it, READS_PER_DISPATCH).
 * epoll_ctl() only when the set changes: an edge-triggered update is never skipped by sd-event. */
static int update_io_events(JsonStream *s) {
        uint32_t events;
        int r;

        if (!s->io)
                return 0;
        if (s->state == STREAM_CONNECTING)
                events = EPOLLOUT;
        else
                events = EPOLLIN | EPOLLRDHUP | (s->output_end > s->output_start && !s->flush_queued ? EPOLLOUT : 0);
        events |= EPOLLET;
        if (events == s->io_events)
                return 0;
        r = sd_event_source_set_io_events(s->io, events);
        if (r < 0)
                return r;
        s->io_events = events;
        return 0;
}

static bool is_json_space(char c) {
        return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/* How many bytes at the end of p[0..n) begin a UTF-8 character that is not complete yet. */
static size_t utf8_incomplete_tail(const char *p, size_t n) {
        for (size_t k = 1; k <= 3 && k <= n; k++) {
                unsigned char c = (unsigned char) p[n - k];
                size_t need;

                if ((c & 0xC0) == 0x80)
                        continue; /* a continuation byte: its lead byte is further back */
                need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
                return need > k ? k : 0;
        }
        return 0;
}

/* How much of input[pos..size) the tokener gets next: up to the first 0xFF (the 0xFF alone if
 * it comes first), or up to the bracket that closes the outermost container of the value being
 * parsed, as the parser would find it in valid JSON (a closer at the top level, of a scalar
 * value, counts too); else all of it. s->frame follows what the tokener was given: reset with
 * it, it runs ahead only within a chunk that json-c takes whole unless a value ended in it. */
static size_t frame_chunk(JsonStream *s, size_t pos, size_t size) {
        JsonContainerCount *f = &s->frame;

        for (size_t i = pos; i < size; i++) {
                unsigned char c = (unsigned char) s->input[i];

                if (c == 0xFF)
                        return i > pos ? i - pos : 1;
                if (f->in_string) {
                        if (f->escaped)
                                f->escaped = false;
                        else if (c == '\\')
                                f->escaped = true;
                        else if (c == '"')
                                f->in_string = false;
                        continue;
                }
                switch (c) {
                case '"':
                        if (f->depth > 0)
                                f->in_string = true;
                        break;
                case '{':
                case '[':
                        f->depth++;
                        break;
                case '}':
                case ']':
                        if (f->depth <= 1) {
                                f->depth = 0;
                                return i - pos + 1;
                        }
                        f->depth--;
                        break;
                default:
                        break;
                }
        }
        return size - pos;
}

/* Feeds one read's worth of bytes to the tokener, dispatching every complete value. */
static void process_input(JsonStream *s, size_t size) {
        size_t pos = 0;

        while (pos < size && s->state == STREAM_CONNECTED) {
                enum json_tokener_error error;
                json_object *value;
                const char *sync;
                size_t chunk, allowed;

                if (s->discard_until_sync) {
                        sync = memchr(s->input + pos, 0xFF, size - pos);

                        if (!sync)
                                return;
                        pos = (size_t) (sync - s->input) + 1;
                        s->discard_until_sync = false;
                        json_tokener_reset(s->tokener);
                        json_container_count_reset(&s->containers);
                        json_container_count_reset(&s->frame);
                        s->message_bytes = 0;
                        s->partial = false;
                        continue;
                }

                /* json-c looks past a finished value for more whitespace, and with UTF-8
                 * validation it rejects the value if it meets an invalid byte there: a reply
                 * followed by garbage, or a stale sync reply followed by 0xFF and ours, would fail
                 * or not depending on how the bytes were cut into reads. So the tokener gets the
                 * input up to the closing bracket that may end the value (every message is an
                 * object), and a 0xFF on its own, which is an error unless discarded as the
                 * agent's delimiter. Only that bracket: every call of json-c's parser costs it a
                 * locale of its own, and a reply has a closing bracket per object in it. */
                chunk = frame_chunk(s, pos, size);
                /* json-c (0.16) fails a UTF-8 character split between two calls: keep its first
                 * bytes for the next read (once: only the real end of the input can cut one). */
                if (pos + chunk == size && s->carry_len == 0) {
                        size_t cut = utf8_incomplete_tail(s->input + pos, chunk);

                        if (cut > 0) {
                                memcpy(s->carry, s->input + size - cut, cut);
                                s->carry_len = cut;
                                s->partial = true;
                                chunk -= cut;
                                size -= cut;
                                if (chunk == 0)
                                        return;
                        }
                }
                /* Counted before json-c builds them: the parser gets the bytes up to the
                 * container past the cap, so that a syntax error before it is still reported
                 * as one, whatever the reads were. */
                allowed = json_container_count_feed(&s->containers, s->input + pos, chunk, s->max_containers);
                if (allowed < chunk) {
                        if (allowed > 0) {
                                value = json_tokener_parse_ex(s->tokener, s->input + pos, (int) allowed);
                                error = json_tokener_get_error(s->tokener);
                                json_object_put(value);
                                if (error != json_tokener_continue && error != json_tokener_success) {
                                        stream_fail(s, -EBADMSG, "malformed JSON from peer: %s",
                                                    error == json_tokener_error_depth ? "nesting too deep"
                                                                                      : json_tokener_error_desc(error));
                                        return;
                                }
                        }
                        stream_fail(s, -EMSGSIZE, "message has more than %zu objects and arrays", s->max_containers);
                        return;
                }
                value = json_tokener_parse_ex(s->tokener, s->input + pos, (int) chunk);
                error = json_tokener_get_error(s->tokener);

                if (error == json_tokener_continue) {
                        s->message_bytes += chunk;
                        for (size_t i = pos; i < pos + chunk && !s->partial; i++)
                                if (!is_json_space(s->input[i]))
                                        s->partial = true;
                        if (s->message_bytes > s->max_message) {
                                stream_fail(s, -EMSGSIZE, "message exceeds the limit of %zu bytes", s->max_message);
                                return;
                        }
                        pos += chunk;
                        continue;
                }

                if (!value || error != json_tokener_success) {
                        stream_fail(s,
                                    -EBADMSG,
                                    "malformed JSON from peer: %s",
                                    error == json_tokener_error_depth ? "nesting too deep"
                                                                      : json_tokener_error_desc(error));
                        json_object_put(value);
                        return;
                }

                chunk = json_tokener_get_parse_end(s->tokener);
                s->message_bytes += chunk;
                pos += chunk;
                json_tokener_reset(s->tokener);
                json_container_count_reset(&s->containers);
                json_container_count_reset(&s->frame);
                s->partial = false;
                if (s->message_bytes > s->max_message) {
                        json_object_put(value);
                        stream_fail(s, -EMSGSIZE, "message exceeds the limit of %zu bytes", s->max_message);
                        return;
                }
                s->message_bytes = 0;

                if (s->callbacks.message)
                        s->callbacks.message(s, value, s->userdata);
                json_object_put(value);
        }
}

typedef enum ReadResult {
        READ_EMPTY, /* nothing more to read now: EAGAIN, or the stream failed (end of stream too) */
        READ_SHORT, /* the bytes queued were read */
        READ_FULL,  /* the buffer filled: more may be queued */
} ReadResult;

static ReadResult read_into_buffer(JsonStream *s) {
        size_t carried = s->carry_len;
        ssize_t n;

        memcpy(s->input, s->carry, carried);
        n = read(s->fd, s->input + carried, READ_CHUNK - carried);

        if (n < 0) {
                if (errno == EINTR)
                        return READ_FULL;
                if (errno == EAGAIN)
                        return READ_EMPTY;
                stream_fail(s, -errno, "read from peer failed: %s", strerror(errno));
                return READ_EMPTY;
        }
        if (n == 0) {
                if (s->partial && !s->discard_until_sync)
                        stream_fail(s, -ECONNRESET, "connection closed by peer in the middle of a message");
                else
                        stream_fail(s, -ECONNRESET, "connection closed by peer");
                return READ_EMPTY;
        }
        s->carry_len = 0;
        process_input(s, carried + (size_t) n);
        /* A short read of a stream socket emptied it: bytes arriving later make a new edge. */
        return (size_t) n == READ_CHUNK - carried ? READ_FULL : READ_SHORT;
}

static void handle_read(JsonStream *s, uint32_t revents) {
        /* One buffer for the thread's streams, not one each: with hundreds of mostly idle
         * connections, one buffer each would keep tens of MiB resident for nothing, and a
         * fresh 64 KiB allocation per read costs malloc a consolidation of its free lists at
         * every free. A message callback that reads another stream (a nested loop) gets a
         * buffer of its own. (The caller holds a reference.) */
        static _Thread_local char *shared; /* kept: the thread's streams read again */
        static _Thread_local bool shared_busy;
        bool own = shared_busy;
        bool more = true;

        if (!own && !shared)
                shared = malloc(READ_CHUNK);
        s->input = own ? malloc(READ_CHUNK) : shared;
        if (!s->input) {
                stream_fail(s, -ENOMEM, "out of memory for a read buffer");
                return;
        }
        if (!own)
                shared_busy = true;
        for (unsigned i = 0; more && s->state == STREAM_CONNECTED; i++) {
                if (i == READS_PER_DISPATCH) {
                        /* Still full: the rest after the other sources, on the edge a re-arm makes. */
                        if (s->io)
                                (void) sd_event_source_set_io_events(s->io, s->io_events);
                        break;
                }
                /* A short read emptied the socket of bytes, not of the peer's close: that one is
                 * read as the end of the stream only if the same edge reported it. */
                ReadResult rr = read_into_buffer(s);
                more = rr == READ_FULL || (rr == READ_SHORT && (revents & (EPOLLHUP | EPOLLRDHUP | EPOLLERR)));
        }
        if (own)
                free(s->input);
        else
                shared_busy = false;
        s->input = NULL;
}

static void handle_write(JsonStream *s) {
        while (s->output_end > s->output_start) {
                ssize_t n = send(s->fd,
                                 s->output + s->output_start,
                                 s->output_end - s->output_start,
                                 MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno == ENOTSOCK)
                        n = write(s->fd, s->output + s->output_start, s->output_end - s->output_start);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        stream_fail(s, -errno, "write to peer failed: %s", strerror(errno));
                        return;
                }
                s->output_start += (size_t) n;
        }
        if (s->output_start == s->output_end)
                s->output_start = s->output_end = 0;
        (void) update_io_events(s);
}

static int on_flush(sd_event_source *source _unused_, void *userdata) {
        Flusher *f = userdata;

        /* A failed send's callback may free streams, the last of them frees f: held meanwhile. */
        f->n_streams++;
        while (f->queue) {
                JsonStream *s = json_stream_ref(f->queue);

                flush_dequeue(s);
                if (s->state == STREAM_CONNECTED)
                        handle_write(s);
                json_stream_unref(s);
        }
        flusher_unref(f);
        return 0;
}

static int flusher_get(sd_event *event, Flusher **ret) {
        Flusher *f;
        int r;

        for (f = flushers; f; f = f->next)
                if (f->event == event) {
                        f->n_streams++;
                        *ret = f;
                        return 0;
                }
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        r = sd_event_add_defer(event, &f->defer, on_flush, f);
        if (r < 0) {
                free(f);
                return r;
        }
        (void) sd_event_source_set_enabled(f->defer, SD_EVENT_OFF);
        /* After the sources already pending: the other ticks of the same wake-up queue theirs too. */
        (void) sd_event_source_set_priority(f->defer, SD_EVENT_PRIORITY_NORMAL + 1);
        (void) sd_event_source_set_description(f->defer, "json-stream-flush");
        f->event = event;
        f->n_streams = 1;
        f->next = flushers;
        flushers = f;
        *ret = f;
        return 0;
}

static int flush_enqueue(JsonStream *s) {
        Flusher *f = s->flusher;
        int r;

        if (!f->queue) {
                r = sd_event_source_set_enabled(f->defer, SD_EVENT_ONESHOT);
                if (r < 0)
                        return r;
        }
        s->flush_prev = NULL;
        s->flush_next = f->queue;
        if (f->queue)
                f->queue->flush_prev = s;
        f->queue = s;
        s->flush_queued = true;
        return 0;
}

static int finish_connect(JsonStream *s) {
        int error = 0;
        socklen_t len = sizeof(error);

        if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &error, &len) < 0)
                error = errno;
        if (error != 0) {
                stream_fail(s, -error, "connect to %s failed: %s", s->path ? s->path : "socket", strerror(error));
                return -error;
        }
        s->state = STREAM_CONNECTED;
        (void) update_io_events(s);
        if (s->callbacks.connected)
                s->callbacks.connected(s, s->userdata);
        return 0;
}

static int on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        JsonStream *s = json_stream_ref(userdata);

        if (s->state == STREAM_CONNECTING)
                (void) finish_connect(s);
        else {
                if (revents & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
                        handle_read(s, revents);
                if (s->state == STREAM_CONNECTED && (revents & (EPOLLOUT | EPOLLERR)))
                        handle_write(s);
        }
        json_stream_unref(s);
        return 0;
}

static int add_io(JsonStream *s) {
        int r = sd_event_add_io(s->event, &s->io, s->fd, EPOLLIN | EPOLLRDHUP | EPOLLET, on_io, s);

        if (r < 0)
                return r;
        s->io_events = EPOLLIN | EPOLLRDHUP | EPOLLET;
        (void) sd_event_source_set_description(s->io, "json-stream");
        return update_io_events(s);
}

static int try_connect(JsonStream *s);

static int on_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        JsonStream *s = json_stream_ref(userdata);
        int r;

        s->retry = sd_event_source_disable_unref(s->retry);
        r = try_connect(s);
        if (r < 0)
                stream_fail(s, r, "connect to %s failed: %s", s->path, strerror(-r));
        json_stream_unref(s);
        return 0;
}

/* One connect() attempt; 0 when connected, connecting, or a retry is scheduled. */
static int try_connect(JsonStream *s) {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        int fd;

        memcpy(addr.sun_path, s->path, strlen(s->path));
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;

        if (connect(fd, (struct sockaddr *) &addr, sizeof(addr)) < 0) {
                int error = errno;

                if (error == EAGAIN) {
                        close(fd);
                        return sd_event_add_time_relative(s->event,
                                                          &s->retry,
                                                          CLOCK_MONOTONIC,
                                                          CONNECT_RETRY_USEC,
                                                          USEC_PER_MSEC,
                                                          on_retry,
                                                          s);
                }
                if (error != EINPROGRESS) {
                        close(fd);
                        return -error;
                }
                s->fd = fd;
                s->state = STREAM_CONNECTING;
                return add_io(s);
        }

        s->fd = fd;
        s->state = STREAM_CONNECTING;
        /* Connected at once: report it from the loop like the slow path, so the caller
         * never sees a callback from inside connect_path(). */
        return add_io(s);
}

int json_stream_connect_path(JsonStream *s, const char *path) {
        struct sockaddr_un addr;
        int r;

        if (!s || !path)
                return -EINVAL;
        if (s->state != STREAM_NEW)
                return -EBUSY;
        if (strlen(path) == 0)
                return -EINVAL;
        if (strlen(path) >= sizeof(addr.sun_path))
                return -ENAMETOOLONG;
        free(s->path);
        s->path = strdup(path);
        if (!s->path)
                return -ENOMEM;

        s->state = STREAM_CONNECTING;
        r = try_connect(s);
        if (r < 0) {
                json_stream_close(s);
                return r;
        }
        return 0;
}

int json_stream_attach_fd(JsonStream *s, int fd) {
        int flags, r;

        if (!s || fd < 0)
                return -EINVAL;
        if (s->state != STREAM_NEW)
                return -EBUSY;

        flags = fcntl(fd, F_GETFL);
        if (flags < 0)
                return -errno;
        if (!(flags & O_NONBLOCK) && fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;

        s->fd = fd;
        s->state = STREAM_CONNECTED;
        r = add_io(s);
        if (r < 0) {
                /* The caller keeps the fd on failure. */
                s->io = sd_event_source_disable_unref(s->io);
                s->fd = -1;
                s->state = STREAM_NEW;
                return r;
        }
        return 0;
}

int json_stream_write(JsonStream *s, const void *data, size_t size) {
        if (!s || (!data && size > 0))
                return -EINVAL;
        if (!json_stream_is_open(s) && s->state != STREAM_NEW)
                return -ENOTCONN;
        if (size == 0)
                return 0;
        if (s->output_end - s->output_start + size > JSON_STREAM_MAX_OUTPUT)
                return -ENOBUFS;

        if (s->output_end + size > s->output_alloc) {
                size_t used = s->output_end - s->output_start;

                if (s->output_start > 0) {
                        memmove(s->output, s->output + s->output_start, used);
                        s->output_start = 0;
                        s->output_end = used;
                }
                if (used + size > s->output_alloc) {
                        size_t want = MAX(used + size, MAX(s->output_alloc * 2, (size_t) 4096));
                        char *p = realloc(s->output, want);

                        if (!p)
                                return -ENOMEM;
                        s->output = p;
                        s->output_alloc = want;
                }
        }
        bool idle = s->output_end == s->output_start;

        memcpy(s->output + s->output_end, data, size);
        s->output_end += size;
        /* Nothing was waiting for the socket to take it: it will now, from the flusher. */
        if (idle && s->state == STREAM_CONNECTED && s->io && !s->flush_queued) {
                int r = flush_enqueue(s);
                if (r >= 0)
                        return 0;
        }
        return update_io_events(s);
}

void json_stream_discard_until_sync_byte(JsonStream *s) {
        s->discard_until_sync = true;
        s->carry_len = 0;
        json_tokener_reset(s->tokener);
        json_container_count_reset(&s->containers);
        json_container_count_reset(&s->frame);
        s->message_bytes = 0;
        s->partial = false;
}
