/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Guest agent replies (qmp/qga-client.c, qga-commands.c), the base64 file contents they carry
 * (qmp/base64.c) and the /proc parsers (common/procfs.c), fed what a hostile guest could send.
 *
 * Input: one byte choosing the operation (low two bits: read /proc/vmstat, /proc/meminfo,
 * /proc/pressure/memory, or a raw file capped at 4 KiB), then the agent's replies, separated
 * by NUL bytes. The harness plays the agent: it answers each guest-sync-delimited correctly (its
 * id is random, so no input could), and every other command with the next reply, sent as it is
 * (garbage included). When the replies run out it closes the socket, so the read completes
 * exactly once, with data or with an error. Each reply also goes through the pure parsers:
 * base64 on its bytes and on a "buf-b64" member, and the three /proc parsers on the raw bytes and
 * on whatever decoded. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/macro.h"
#include "qmp/base64.h"
#include "qmp/json-containers.h"
#include "common/procfs.h"
#include "qmp/json-util.h"
#include "qmp/qga-client.h"
#include "qmp/qga-commands.h"
#include "tests/fuzz/fuzz.h"

#define RAW_FILE_MAX 4096

typedef struct Agent {
        int fd;
        const uint8_t *replies;
        size_t replies_size;
        char request[64 * 1024];
        size_t request_len;
        bool closed;
} Agent;

static unsigned n_done;

/* qga-commands.h: a file with no known counter completes with -EBADMSG, never as data. */
static void on_vmstat(QgaClient *c, const QmpReply *reply, const GuestVmstat *vmstat, void *userdata) {
        size_t known = 0;

        fuzz_assert((reply->error == 0) == (vmstat != NULL));
        for (size_t i = 0; vmstat && i < _GUEST_VMSTAT_MAX; i++)
                known += guest_value_is_known(vmstat->value[i]);
        fuzz_assert(!vmstat || known > 0);
        n_done++;
}

static void on_meminfo(QgaClient *c, const QmpReply *reply, const GuestMeminfo *meminfo, void *userdata) {
        size_t known = 0;

        fuzz_assert((reply->error == 0) == (meminfo != NULL));
        for (size_t i = 0; meminfo && i < _GUEST_MEMINFO_MAX; i++)
                if (guest_value_is_known(meminfo->value[i])) {
                        fuzz_assert(meminfo->value[i] % 1024 == 0); /* kB, in bytes */
                        known++;
                }
        fuzz_assert(!meminfo || known > 0);
        n_done++;
}

static void on_psi(QgaClient *c, const QmpReply *reply, const GuestPsi *psi, void *userdata) {
        fuzz_assert((reply->error == 0) == (psi != NULL));
        if (psi) {
                fuzz_assert(psi->some.known);
                fuzz_assert(psi->some.avg10 >= 0 && psi->some.avg60 >= 0 && psi->some.avg300 >= 0);
        }
        n_done++;
}

static void on_file(QgaClient *c, const QmpReply *reply, const char *data, size_t size, void *userdata) {
        fuzz_assert(reply->error <= 0);
        fuzz_assert((reply->error == 0) == (data != NULL));
        if (data) {
                fuzz_assert(size <= RAW_FILE_MAX);
                fuzz_assert(data[size] == '\0');
        }
        n_done++;
}

static void agent_send(Agent *a, sd_event *e, const void *data, size_t size) {
        if (!a->closed)
                fuzz_write_chunks(e, a->fd, data, size, 0);
}

static void agent_close(Agent *a) {
        if (!a->closed) {
                close(a->fd);
                a->closed = true;
        }
}

/* Answers one request line of the client. */
static void agent_handle(Agent *a, sd_event *e, const char *line, size_t len _unused_) {
        json_object *request = json_tokener_parse(line);
        json_object *args;
        const char *command;
        uint64_t id;

        /* The client only ever sends well-formed commands. */
        fuzz_assert(request);
        fuzz_assert(json_member_get_string(request, "execute", &command) >= 0);

        if (strcmp(command, "guest-sync-delimited") == 0) {
                char reply[64];
                int n;

                fuzz_assert(json_member_get_object(request, "arguments", &args) >= 0);
                fuzz_assert(json_member_get_u64(args, "id", &id) >= 0);
                n = snprintf(reply, sizeof(reply), "\xff{\"return\": %" PRIu64 "}\n", id);
                agent_send(a, e, reply, (size_t) n);
        } else {
                const uint8_t *reply;
                size_t reply_len;

                if (fuzz_next_record(&a->replies, &a->replies_size, &reply, &reply_len))
                        agent_send(a, e, reply, reply_len);
                else
                        agent_close(a);
        }
        json_object_put(request);
}

/* Reads what the client wrote and answers each complete line. Returns whether it did anything. */
static bool agent_step(Agent *a, sd_event *e) {
        bool progress = false;

        while (!a->closed) {
                ssize_t n = recv(a->fd, a->request + a->request_len, sizeof(a->request) - a->request_len - 1, MSG_DONTWAIT);
                char *nl;

                if (n <= 0)
                        break;
                progress = true;
                a->request_len += (size_t) n;
                /* 0xFF only resets the agent's parser. */
                for (size_t i = 0; i < a->request_len;)
                        if ((uint8_t) a->request[i] == 0xFF) {
                                memmove(a->request + i, a->request + i + 1, a->request_len - i - 1);
                                a->request_len--;
                        } else
                                i++;
                while ((nl = memchr(a->request, '\n', a->request_len))) {
                        size_t len = (size_t) (nl - a->request);

                        *nl = '\0';
                        agent_handle(a, e, a->request, len);
                        memmove(a->request, nl + 1, a->request_len - len - 1);
                        a->request_len -= len + 1;
                }
                fuzz_assert(a->request_len < sizeof(a->request) - 1);
        }
        return progress;
}

static void run_client(uint8_t op, const uint8_t *data, size_t size) {
        sd_event *e = NULL;
        QgaClient *c = NULL;
        Agent agent = { .replies = data, .replies_size = size };
        int fds[2];

        n_done = 0;
        fuzz_assert(sd_event_new(&e) >= 0);
        fuzz_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        agent.fd = fds[1];
        fuzz_assert(qga_client_new(&c, e) >= 0);
        fuzz_assert(qga_client_connect_fd(c, fds[0]) >= 0);

        switch (op & 3) {
        case 0:
                fuzz_assert(qga_read_vmstat(c, 0, on_vmstat, NULL) >= 0);
                break;
        case 1:
                fuzz_assert(qga_read_meminfo(c, 0, on_meminfo, NULL) >= 0);
                break;
        case 2:
                fuzz_assert(qga_read_psi_memory(c, 0, on_psi, NULL) >= 0);
                break;
        default:
                fuzz_assert(qga_read_file(c, "/proc/self/status", RAW_FILE_MAX, 0, on_file, NULL) >= 0);
                break;
        }

        /* Each step answers at least one request, and each request but a sync uses up a reply:
         * the exchange is bounded by the input. */
        for (unsigned i = 0; n_done == 0; i++) {
                fuzz_assert(i < 100000);
                fuzz_event_drain(e);
                if (!agent_step(&agent, e) && n_done == 0) {
                        /* The client is waiting for a reply that will not come. */
                        agent_close(&agent);
                        fuzz_event_drain(e);
                }
        }
        fuzz_assert(n_done == 1);
        agent_close(&agent);
        fuzz_event_drain(e);
        fuzz_assert(n_done == 1);
        qga_client_free(c);
        sd_event_unref(e);
}

static void parse_text(const char *text, size_t size) {
        GuestVmstat vmstat;
        GuestMeminfo meminfo;
        GuestPsi psi;
        int known;

        known = guest_vmstat_parse(text, size, &vmstat);
        fuzz_assert(known >= 0 && known <= _GUEST_VMSTAT_MAX);
        known = guest_meminfo_parse(text, size, &meminfo);
        fuzz_assert(known >= 0 && known <= _GUEST_MEMINFO_MAX);
        if (guest_psi_parse(text, size, &psi) >= 0)
                fuzz_assert(psi.some.known);
}

static void decode_and_parse(const char *b64, size_t len) {
        size_t max = base64_decoded_size_max(len), got = 0;
        uint8_t *out = malloc(max);

        fuzz_assert(out);
        if (base64_decode(b64, len, out, max, &got) >= 0) {
                fuzz_assert(got <= max);
                fuzz_assert(got <= len / 4 * 3);
                parse_text((const char *) out, got);
        }
        free(out);
}

static void parse_reply(const uint8_t *reply, size_t len) {
        char *text = fuzz_strndup(reply, len);
        /* Only what the client would parse: within the agent's caps (qga-client.h). */
        json_object *v = len <= QGA_MAX_MESSAGE && json_containers_within(text, strlen(text), QGA_MAX_CONTAINERS)
                                 ? json_tokener_parse(text)
                                 : NULL;
        json_object *result;
        const char *b64;

        parse_text(text, len);
        decode_and_parse(text, len);
        if (json_member_get_object(v, "return", &result) >= 0 && json_member_get_string(result, "buf-b64", &b64) >= 0)
                decode_and_parse(b64, strlen(b64));
        json_object_put(v);
        free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const uint8_t *rest, *reply;
        size_t rest_size, reply_len;

        if (size < 1)
                return 0;
        run_client(data[0], data + 1, size - 1);

        rest = data + 1;
        rest_size = size - 1;
        while (fuzz_next_record(&rest, &rest_size, &reply, &reply_len))
                parse_reply(reply, reply_len);
        return 0;
}
