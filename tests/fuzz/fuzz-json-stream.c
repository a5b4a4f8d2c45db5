/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The JSON stream framing (qmp/json-stream.c) fed arbitrary bytes over a real socket.
 *
 * Input: one flags byte, one chunking seed byte, then the bytes the peer sends.
 *   flags bit 0: agent style, discard input up to a 0xFF first (as after guest-sync-delimited),
 *                and again after every message that is an object with an integer "return"
 *   flags bit 1: a small message limit (512 bytes), to reach the size cap
 *   flags bit 2: a shallow nesting limit (4)
 *   flags bit 3: a small container limit (8 objects and arrays a message)
 * The bytes are sent twice, through two fresh streams: once in 64 KiB writes and once cut into
 * pieces of 1..(seed+1) bytes (sizes from a PRNG seeded by the seed byte). Framing must not
 * depend on the cutting: for a valid stream both runs deliver the same messages and end at the
 * peer's close (for an invalid one, see below); and
 * each run ends with exactly one failure callback (the peer closes at the end). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macro.h"
#include "qmp/json-stream.h"
#include "tests/fuzz/fuzz.h"

typedef struct Run {
        bool agent_style;
        char *transcript; /* the messages as serialised JSON, one per line */
        size_t transcript_len;
        FILE *out;
        unsigned n_failed;
        int error;
} Run;

static void on_message(JsonStream *s, json_object *message, void *userdata) {
        Run *run = userdata;
        json_object *ret;

        fuzz_assert(run->n_failed == 0);
        fuzz_assert(message);
        fputs(json_object_to_json_string_ext(message, JSON_C_TO_STRING_PLAIN), run->out);
        fputc('\n', run->out);

        if (run->agent_style && json_object_is_type(message, json_type_object) &&
            json_object_object_get_ex(message, "return", &ret) && json_object_is_type(ret, json_type_int))
                json_stream_discard_until_sync_byte(s);
}

static void on_failed(JsonStream *s, int error, const char *reason, void *userdata) {
        Run *run = userdata;

        fuzz_assert(error < 0);
        fuzz_assert(reason && reason[0]);
        fuzz_assert(!json_stream_is_open(s));
        run->n_failed++;
        run->error = error;
}

/* xorshift32: cheap and deterministic. */
static uint32_t next_random(uint32_t *state) {
        uint32_t x = *state;

        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return *state = x;
}

static void run_stream(Run *run, uint8_t flags, uint8_t seed, bool chunked, const uint8_t *data, size_t size) {
        static const JsonStreamCallbacks callbacks = {
                .message = on_message,
                .failed = on_failed,
        };
        sd_event *e = NULL;
        JsonStream *s = NULL;
        int fds[2];

        *run = (Run) { .agent_style = flags & 1 };
        run->out = open_memstream(&run->transcript, &run->transcript_len);
        fuzz_assert(run->out);
        fuzz_assert(sd_event_new(&e) >= 0);
        fuzz_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        fuzz_assert(json_stream_new(&s, e, &callbacks, run) >= 0);
        if (flags & 2)
                fuzz_assert(json_stream_set_max_message_size(s, 512) >= 0);
        if (flags & 4)
                fuzz_assert(json_stream_set_max_depth(s, 4) >= 0);
        if (flags & 8)
                fuzz_assert(json_stream_set_max_containers(s, 8) >= 0);
        fuzz_assert(json_stream_attach_fd(s, fds[0]) >= 0);
        if (run->agent_style)
                json_stream_discard_until_sync_byte(s);

        if (!chunked)
                fuzz_write_chunks(e, fds[1], data, size, 0);
        else {
                uint32_t state = 0x9E3779B9u ^ seed;

                for (size_t pos = 0; pos < size;) {
                        size_t n = 1 + next_random(&state) % ((size_t) seed + 1);

                        n = MIN(n, size - pos);

                        fuzz_write_chunks(e, fds[1], data + pos, n, n);
                        pos += n;
                }
        }
        close(fds[1]);
        fuzz_event_drain(e);

        fuzz_assert(run->n_failed == 1);
        fuzz_assert(!json_stream_is_open(s));
        json_stream_unref(s);
        sd_event_unref(e);
        fuzz_assert(fclose(run->out) == 0);
}

/* The length of the transcript without its last message. */
static size_t without_last(const Run *r) {
        const char *prev;

        if (r->transcript_len == 0)
                return 0;
        prev = memrchr(r->transcript, '\n', r->transcript_len - 1);
        return prev ? (size_t) (prev - r->transcript) + 1 : 0;
}

/* Whether every message is an object, as every QMP and agent message is. */
static bool only_objects(const Run *r) {
        for (size_t i = 0; i < r->transcript_len; i++)
                if ((i == 0 || r->transcript[i - 1] == '\n') && r->transcript[i] != '{')
                        return false;
        return true;
}

static bool transcripts_agree(const Run *whole, const Run *cut) {
        const Run *shorter = whole->transcript_len <= cut->transcript_len ? whole : cut;
        const Run *longer = shorter == whole ? cut : whole;
        size_t n;

        /* Top-level scalars are not framed by anything (json-c ends a number at the end of the
         * input in one chunking and waits for more in another, and reads "9-0" as 9, 0 or as 9),
         * and the clients refuse them anyway: only streams of objects are compared. */
        if (!only_objects(whole) || !only_objects(cut))
                return true;
        /* A stream read cleanly in big pieces is read the same in small ones. (The converse does
         * not hold: fed piecemeal, json-c accepts some invalid input, such as 30-1188 for 30.) */
        if (whole->error == -ECONNRESET)
                return cut->error == -ECONNRESET && whole->transcript_len == cut->transcript_len &&
                       memcmp(whole->transcript, cut->transcript, whole->transcript_len) == 0;
        /* Otherwise the same messages up to the first error, but for the last one read before
         * it (json-c looks one character past a finished value). */
        n = without_last(shorter);
        return memcmp(shorter->transcript, longer->transcript, n) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        Run whole, cut;
        uint8_t flags, seed;

        if (size < 2)
                return 0;
        flags = data[0];
        seed = data[1];
        data += 2;
        size -= 2;

        run_stream(&whole, flags, seed, false, data, size);
        run_stream(&cut, flags, seed, true, data, size);

        /* How the bytes were cut must not change what a valid stream delivers (see
         * transcripts_agree() for what json-c allows on invalid ones). */
        if (!transcripts_agree(&whole, &cut))
                fprintf(stderr, "in 64 KiB writes (error %d):\n%s\ncut (error %d):\n%s\n", whole.error,
                        whole.transcript, cut.error, cut.transcript);
        fuzz_assert(transcripts_agree(&whole, &cut));

        free(whole.transcript);
        free(cut.transcript);
        return 0;
}
