/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* fake-qemu's guest agent: the qemu-guest-agent protocol (no greeting, no ids; guest-sync and
 * guest-sync-delimited, the latter answered behind a 0xFF), guest-info, guest-get-osinfo (a
 * Debian guest; a Windows one's answers are fake-windows.c's), and guest-file-open/
 * -read/-close of /proc/vmstat and /proc/pressure/memory rendered from the guest model's
 * counters, read back in base64 as the real agent does. The agent faults: a hung agent, a
 * /proc/vmstat of a million junk lines (generated per read), garbage replies, an error text of
 * two-byte characters that the daemon's buffer cuts in the middle of one. The sockets and
 * connections are fake-qemu.c's. */

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/macro.h"
#include "policies/rs-value.h"
#include "tests/model/guest-model.h"
#include "tests/sim/fake-qemu.h"

#define AGENT_READ_DEFAULT 4096           /* guest-file-read's default count */
#define AGENT_READ_MAX (48 * MIB)         /* the real agent's QGA_READ_COUNT_MAX */
#define HUGE_VMSTAT_LINES 1000000
#define HUGE_VMSTAT_LINE_LEN 30           /* "nr_padding_0000000 0000000000\n" */

static char *base64_encode_alloc(const uint8_t *in, size_t len) {
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char *out = malloc((len + 2) / 3 * 4 + 1), *o = out;
        if (!out)
                return NULL;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t) in[i] << 16 | (i + 1 < len ? (uint32_t) in[i + 1] << 8 : 0) |
                             (i + 2 < len ? in[i + 2] : 0);
                *o++ = alphabet[v >> 18 & 63];
                *o++ = alphabet[v >> 12 & 63];
                *o++ = i + 1 < len ? alphabet[v >> 6 & 63] : '=';
                *o++ = i + 2 < len ? alphabet[v & 63] : '=';
        }
        *o = '\0';
        return out;
}

static uint64_t model_counter(const Guest *g, unsigned index) {
        double v = g->model.c[index];
        return v > 0 ? (uint64_t) v : 0;
}

/* /proc/vmstat as a 6.x kernel writes it, limited to what the model knows (and a few neighbours
 * a parser must skip). */
static char *render_vmstat(const Guest *g) {
        const GuestModel *m = &g->model;
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);
        if (!f)
                return NULL;
        fprintf(f, "nr_free_pages %" PRIu64 "\n", (uint64_t) MAX(m->free_b, 0.0) / 4096);
        fprintf(f, "nr_file_pages %" PRIu64 "\n", (uint64_t) MAX(m->cache_b, 0.0) / 4096);
        fprintf(f, "workingset_refault_anon %" PRIu64 "\n", model_counter(g, RS_COUNTER_REFAULT_ANON));
        fprintf(f, "workingset_refault_file %" PRIu64 "\n", model_counter(g, RS_COUNTER_REFAULT_FILE));
        fprintf(f, "workingset_activate_anon %" PRIu64 "\n", model_counter(g, RS_COUNTER_ACTIVATE_ANON));
        fprintf(f, "workingset_activate_file %" PRIu64 "\n", model_counter(g, RS_COUNTER_ACTIVATE_FILE));
        fprintf(f, "workingset_restore_anon 0\nworkingset_restore_file 0\n");
        fprintf(f, "pswpin %" PRIu64 "\n", model_counter(g, RS_COUNTER_PSWPIN));
        fprintf(f, "pswpout %" PRIu64 "\n", model_counter(g, RS_COUNTER_PSWPOUT));
        fprintf(f, "pgfault %" PRIu64 "\n", model_counter(g, RS_COUNTER_MINOR_FAULTS));
        fprintf(f, "pgmajfault %" PRIu64 "\n", model_counter(g, RS_COUNTER_PGMAJFAULT));
        fprintf(f, "pgsteal_kswapd %" PRIu64 "\n", model_counter(g, RS_COUNTER_PGSTEAL_KSWAPD));
        fprintf(f, "pgsteal_direct %" PRIu64 "\n", model_counter(g, RS_COUNTER_PGSTEAL_DIRECT));
        fprintf(f, "pgscan_kswapd %" PRIu64 "\n", model_counter(g, RS_COUNTER_PGSCAN_KSWAPD));
        fprintf(f, "pgscan_direct %" PRIu64 "\n", model_counter(g, RS_COUNTER_PGSCAN_DIRECT));
        fprintf(f, "allocstall_dma 0\nallocstall_dma32 0\nallocstall_normal %" PRIu64 "\nallocstall_movable 0\n",
                model_counter(g, RS_COUNTER_ALLOCSTALL));
        fprintf(f, "oom_kill %u\n", m->oom_kills);
        fprintf(f, "balloon_inflate 0\nballoon_deflate 0\n");
        if (fclose(f) != 0) {
                free(text);
                return NULL;
        }
        return text;
}

static char *render_psi(const Guest *g) {
        const GuestModel *m = &g->model;
        char *text = NULL;
        if (asprintf(&text,
                     "some avg10=%.2f avg60=%.2f avg300=%.2f total=%" PRIu64 "\n"
                     "full avg10=%.2f avg60=%.2f avg300=%.2f total=%" PRIu64 "\n",
                     CLAMP(m->psi_some_avg10, 0.0, 100.0), CLAMP(m->psi_some_avg10, 0.0, 100.0) / 2,
                     CLAMP(m->psi_some_avg10, 0.0, 100.0) / 4, model_counter(g, RS_COUNTER_PSI_SOME_TOTAL),
                     CLAMP(m->psi_full_avg10, 0.0, 100.0), CLAMP(m->psi_full_avg10, 0.0, 100.0) / 2,
                     CLAMP(m->psi_full_avg10, 0.0, 100.0) / 4, model_counter(g, RS_COUNTER_PSI_FULL_TOTAL)) < 0)
                return NULL;
        return text;
}

static AgentFile *agent_file(Guest *g, int64_t handle) {
        for (size_t i = 0; i < ARRAY_SIZE(g->files); i++)
                if (handle > 0 && g->files[i].handle == handle)
                        return &g->files[i];
        return NULL;
}

void agent_file_close(AgentFile *f) {
        free(f->text);
        *f = (AgentFile) {};
}

static json_object *agent_file_open(Guest *g, json_object *args) {
        json_object *v;
        const char *path = NULL;
        AgentFile *f = NULL;

        if (args && json_object_object_get_ex(args, "path", &v) && json_object_is_type(v, json_type_string))
                path = json_object_get_string(v);
        if (!path)
                return error_reply("GenericError", "Parameter 'path' is missing");
        if (guest_fault(g) == FAULT_AGENT_UTF8_ERROR) {
                /* The daemon says "guest agent: opening /proc/vmstat: " (35 bytes) and this: its
                 * 96-byte buffer ends in the middle of the e-acute that starts at byte 94. */
                char desc[256];
                size_t n = (size_t) sprintf(desc, "caf");
                for (int i = 0; i < 60; i++)
                        n += (size_t) sprintf(desc + n, "\xc3\xa9");
                return error_reply("GenericError", desc);
        }
        /* A free slot, or else the oldest handle: clients that drop the connection mid-read
         * leak theirs, and a long run must not run out. */
        for (size_t i = 0; i < ARRAY_SIZE(g->files) && (!f || f->handle != 0); i++)
                if (!f || g->files[i].handle < f->handle)
                        f = &g->files[i];
        agent_file_close(f);
        if (strcmp(path, "/proc/vmstat") == 0) {
                f->text = render_vmstat(g);
                if (guest_fault(g) == FAULT_AGENT_HUGE_VMSTAT)
                        f->junk_lines = HUGE_VMSTAT_LINES;
        } else if (strcmp(path, "/proc/pressure/memory") == 0)
                f->text = render_psi(g);
        else
                return error_reply("GenericError", "failed to open file: No such file or directory");
        if (!f->text)
                return error_reply("GenericError", "out of memory");
        f->text_len = strlen(f->text);
        f->handle = ++g->next_handle;
        return return_reply(json_object_new_int64(f->handle));
}

/* Bytes [pos, pos+len) of the file: junk lines, then the text. */
static void agent_file_copy(const AgentFile *f, uint64_t pos, uint8_t *out, size_t len) {
        uint64_t junk = f->junk_lines * HUGE_VMSTAT_LINE_LEN;
        for (size_t i = 0; i < len; pos++, i++) {
                if (pos >= junk) {
                        out[i] = (uint8_t) f->text[pos - junk];
                        continue;
                }
                char line[64];
                unsigned n = (unsigned) (pos / HUGE_VMSTAT_LINE_LEN); /* < HUGE_VMSTAT_LINES */
                snprintf(line, sizeof(line), "nr_padding_%07u %010u\n", n % 10000000, n);
                out[i] = (uint8_t) line[pos % HUGE_VMSTAT_LINE_LEN];
        }
}

static json_object *agent_file_read(Guest *g, json_object *args) {
        json_object *v, *o;
        AgentFile *f = NULL;
        int64_t count = AGENT_READ_DEFAULT;

        if (args && json_object_object_get_ex(args, "handle", &v) && json_object_is_type(v, json_type_int))
                f = agent_file(g, json_object_get_int64(v));
        if (!f)
                return error_reply("GenericError", "handle does not exist");
        if (args && json_object_object_get_ex(args, "count", &v)) {
                count = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
                if (count < 0 || count > (int64_t) AGENT_READ_MAX)
                        return error_reply("GenericError", "value is invalid for 'count'");
        }
        uint64_t size = f->junk_lines * HUGE_VMSTAT_LINE_LEN + f->text_len;
        size_t n = (size_t) MIN((uint64_t) count, size - MIN(f->pos, size));
        _cleanup_free_ uint8_t *buf = malloc(n + 1);
        if (!buf)
                return error_reply("GenericError", "out of memory");
        agent_file_copy(f, f->pos, buf, n);
        f->pos += n;
        _cleanup_free_ char *b64 = base64_encode_alloc(buf, n);
        if (!b64)
                return error_reply("GenericError", "out of memory");
        o = json_object_new_object();
        json_object_object_add(o, "count", json_object_new_int64((int64_t) n));
        json_object_object_add(o, "buf-b64", json_object_new_string(b64));
        /* fread() stops short only at the end: eof comes with the last piece */
        json_object_object_add(o, "eof", json_object_new_boolean(f->pos >= size && (uint64_t) count > n));
        return return_reply(o);
}

/* What qemu-ga on a Debian guest says (qga/commands-posix.c: uname() and /etc/os-release). */
static json_object *linux_osinfo(void) {
        static const char *const members[][2] = {
                { "kernel-version", "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)" },
                { "kernel-release", "6.1.0-18-amd64" },
                { "machine", "x86_64" },
                { "id", "debian" },
                { "name", "Debian GNU/Linux" },
                { "pretty-name", "Debian GNU/Linux 12 (bookworm)" },
                { "version", "12 (bookworm)" },
                { "version-id", "12" },
        };
        json_object *o = json_object_new_object();
        for (size_t i = 0; i < ARRAY_SIZE(members); i++)
                json_object_object_add(o, members[i][0], json_object_new_string(members[i][1]));
        return o;
}

static json_object *agent_execute(Guest *g, const char *cmd, json_object *args) {
        json_object *v;

        /* not in n_commands: --counters counts what QMP answered */
        if (g->windows && (v = windows_agent_execute(g, cmd, args)))
                return v;
        if (strcmp(cmd, "guest-ping") == 0)
                return return_reply(NULL);
        if (strcmp(cmd, "guest-sync") == 0 || strcmp(cmd, "guest-sync-delimited") == 0) {
                if (!args || !json_object_object_get_ex(args, "id", &v) || !json_object_is_type(v, json_type_int))
                        return error_reply("GenericError", "Parameter 'id' is missing");
                return return_reply(json_object_get(v));
        }
        if (strcmp(cmd, "guest-info") == 0) {
                static const char *const supported[] = { "guest-sync", "guest-sync-delimited", "guest-ping",
                                                         "guest-info", "guest-get-osinfo", "guest-file-open",
                                                         "guest-file-read", "guest-file-close" };
                json_object *o = json_object_new_object(), *a = json_object_new_array();
                for (size_t i = 0; i < ARRAY_SIZE(supported); i++) {
                        json_object *e = json_object_new_object();
                        json_object_object_add(e, "name", json_object_new_string(supported[i]));
                        json_object_object_add(e, "enabled", json_object_new_boolean(true));
                        json_object_object_add(e, "success-response", json_object_new_boolean(true));
                        json_object_array_add(a, e);
                }
                json_object_object_add(o, "version", json_object_new_string("9.2.0"));
                json_object_object_add(o, "supported_commands", a);
                return return_reply(o);
        }
        if (strcmp(cmd, "guest-get-osinfo") == 0)
                return return_reply(linux_osinfo());
        if (strcmp(cmd, "guest-file-open") == 0)
                return agent_file_open(g, args);
        if (strcmp(cmd, "guest-file-read") == 0)
                return agent_file_read(g, args);
        if (strcmp(cmd, "guest-file-close") == 0) {
                AgentFile *f = NULL;
                if (args && json_object_object_get_ex(args, "handle", &v) && json_object_is_type(v, json_type_int))
                        f = agent_file(g, json_object_get_int64(v));
                if (!f)
                        return error_reply("GenericError", "handle does not exist");
                agent_file_close(f);
                return return_reply(NULL);
        }
        return error_reply("CommandNotFound", "The command is not found");
}

int agent_conn_handle(Conn *c, json_object *msg) {
        json_object *v, *args = NULL, *reply;
        const char *cmd = NULL;
        FaultKind fault = guest_fault(c->guest);
        int r;

        if (fault == FAULT_AGENT_HANG)
                return 0;
        if (json_object_is_type(msg, json_type_object) && json_object_object_get_ex(msg, "execute", &v) &&
            json_object_is_type(v, json_type_string))
                cmd = json_object_get_string(v);
        (void) json_object_object_get_ex(msg, "arguments", &args);
        if (!cmd)
                reply = error_reply("GenericError", "Missing command");
        else
                reply = agent_execute(c->guest, cmd, args);

        bool delimited = cmd && strcmp(cmd, "guest-sync-delimited") == 0;
        if (fault == FAULT_AGENT_GARBAGE && !delimited && !(cmd && strcmp(cmd, "guest-sync") == 0)) {
                static const char garbage[] = "\x01{\"return\": {\"count\": [,,\xfe]]]\n";
                json_object_put(reply);
                return conn_queue(c, garbage, sizeof(garbage) - 1);
        }
        const char *s = json_object_to_json_string_ext(reply, JSON_C_TO_STRING_PLAIN);
        r = delimited ? conn_queue(c, "\xff", 1) : 0;
        if (r >= 0)
                r = conn_queue(c, s, strlen(s));
        if (r >= 0)
                r = conn_queue(c, "\n", 1);
        json_object_put(reply);
        return r;
}
