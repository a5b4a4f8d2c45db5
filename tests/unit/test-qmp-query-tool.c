/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsize-qmp-query end to end: the real binary against fake QMP and agent peers on
 * listening unix sockets; checks its JSON document and exit codes. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/macro.h"
#include "tests/lib/fake-qmp-peer.h"
#include "tests/lib/check-run.h"

typedef void (*script_fn)(FakePeer *p);

typedef struct Listener {
        int fd;
        char path[128];
        bool qga;
        script_fn script;
        FakePeer *peer;
        sd_event_source *source;
} Listener;

static sd_event *e;
static char dir[64];
static Listener qmp_listener, qga_listener;
static bool child_exited;
static int child_status;
static char out[65536], err[8192];

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Listener *l = userdata;
        int conn = accept4(fd, NULL, NULL, SOCK_CLOEXEC);

        ck_assert_int_ge(conn, 0);
        ck_assert_ptr_null(l->peer); /* exactly one connection expected */
        ck_assert_int_ge(fake_peer_new(&l->peer, e, conn), 0);
        fake_peer_set_qga(l->peer, l->qga);
        l->script(l->peer);
        return 0;
}

static void listen_on(Listener *l, const char *name, bool qga, script_fn script) {
        struct sockaddr_un addr = { .sun_family = AF_UNIX };

        *l = (Listener) { .qga = qga, .script = script };
        snprintf(l->path, sizeof(l->path), "%s/%s", dir, name);
        memcpy(addr.sun_path, l->path, strlen(l->path));
        l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        ck_assert_int_ge(l->fd, 0);
        ck_assert_int_eq(bind(l->fd, (struct sockaddr *) &addr, sizeof(addr)), 0);
        ck_assert_int_eq(listen(l->fd, 4), 0);
        ck_assert_int_ge(sd_event_add_io(e, &l->source, l->fd, EPOLLIN, on_accept, l), 0);
}

static void listener_done(Listener *l) {
        if (!l->path[0])
                return;
        sd_event_source_disable_unref(l->source);
        fake_peer_free(l->peer);
        close(l->fd);
        unlink(l->path);
        *l = (Listener) {};
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        child_exited = true;
        child_status = si->si_code == CLD_EXITED ? si->si_status : 128 + si->si_status;
        return 0;
}

static void drain(int fd, char *buf, size_t size) {
        size_t n = strlen(buf);
        ssize_t k;

        while (n + 1 < size && (k = read(fd, buf + n, size - n - 1)) > 0)
                n += (size_t) k;
        buf[n] = '\0';
}

static int on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        drain(fd, userdata == out ? out : err, userdata == out ? sizeof(out) : sizeof(err));
        return 0;
}

/* Runs the tool with argv (NULL-terminated after the program name) until it exits. */
static int run_tool(const char *const *args) {
        const char *builddir = getenv("top_builddir");
        char tool[512];
        const char *argv[16];
        int out_pipe[2], err_pipe[2];
        sd_event_source *child, *out_src, *err_src;
        pid_t pid;
        size_t n = 0;

        snprintf(tool, sizeof(tool), "%s/rightsize-qmp-query", builddir ? builddir : ".");
        ck_assert_msg(access(tool, X_OK) == 0, "%s not built", tool);
        argv[n++] = tool;
        for (; *args; args++)
                argv[n++] = *args;
        argv[n] = NULL;

        out[0] = err[0] = '\0';
        child_exited = false;
        ck_assert_int_eq(pipe2(out_pipe, O_CLOEXEC | O_NONBLOCK), 0);
        ck_assert_int_eq(pipe2(err_pipe, O_CLOEXEC | O_NONBLOCK), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                sigset_t none;

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                dup2(out_pipe[1], STDOUT_FILENO);
                dup2(err_pipe[1], STDERR_FILENO);
                execv(tool, (char *const *) argv);
                _exit(127);
        }
        close(out_pipe[1]);
        close(err_pipe[1]);
        ck_assert_int_ge(sd_event_add_child(e, &child, pid, WEXITED, on_child, NULL), 0);
        ck_assert_int_ge(sd_event_add_io(e, &out_src, out_pipe[0], EPOLLIN, on_output, out), 0);
        ck_assert_int_ge(sd_event_add_io(e, &err_src, err_pipe[0], EPOLLIN, on_output, err), 0);
        if (!test_run_until_flag(e, &child_exited)) {
                kill(pid, SIGKILL);
                ck_abort_msg("tool did not exit; stderr: %s", err);
        }
        drain(out_pipe[0], out, sizeof(out));
        drain(err_pipe[0], err, sizeof(err));
        sd_event_source_disable_unref(child);
        sd_event_source_disable_unref(out_src);
        sd_event_source_disable_unref(err_src);
        close(out_pipe[0]);
        close(err_pipe[0]);
        return child_status;
}

static void setup(void) {
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        ck_assert_int_ge(sd_event_new(&e), 0);
        snprintf(dir, sizeof(dir), "/tmp/test-qmp-tool-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) {
        listener_done(&qmp_listener);
        listener_done(&qga_listener);
        rmdir(dir);
        e = sd_event_unref(e);
}

static const char stats_reply[] =
        "{\"stats\": {\"stat-swap-in\": 0, \"stat-swap-out\": 0, \"stat-major-faults\": 7, \"stat-minor-faults\": 900, "
        "\"stat-free-memory\": 813363200, \"stat-total-memory\": 1012936704, \"stat-available-memory\": 849235968, "
        "\"stat-disk-caches\": 161468416, \"stat-htlb-pgalloc\": 0, \"stat-htlb-pgfail\": -1}, \"last-update\": %s}";

static void script_common_start(FakePeer *p) {
        fake_peer_greet(p);
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_reply(p, "{\"actual\": 1073741824}");
        fake_peer_expect(p, "qom-get", "{\"path\": \"/machine/peripheral/balloon0\", \"property\": \"free-page-reporting\"}");
        fake_peer_reply(p, "true");
        fake_peer_expect(p, "query-memory-devices", NULL);
        fake_peer_reply(p, "[{\"type\": \"virtio-mem\", \"data\": {\"id\": \"vm0\", \"size\": 0, \"requested-size\": 0, "
                           "\"max-size\": 2147483648, \"block-size\": 2097152, \"memdev\": \"/objects/vmem0\", \"node\": 0}}]");
}

static void reply_stats(FakePeer *p, const char *last_update) {
        char buf[1024];

        snprintf(buf, sizeof(buf), stats_reply, last_update);
        fake_peer_expect(p, "qom-get", "{\"path\": \"/machine/peripheral/balloon0\", \"property\": \"guest-stats\"}");
        fake_peer_reply(p, buf);
}

static void script_polling_on(FakePeer *p) {
        script_common_start(p);
        fake_peer_expect(p, "qom-get", NULL);
        fake_peer_reply(p, "2");
        reply_stats(p, "1700000000");
}

static void script_polling_off(FakePeer *p) {
        script_common_start(p);
        fake_peer_expect(p, "qom-get", NULL);
        fake_peer_reply(p, "0");
        reply_stats(p, "100");
        fake_peer_expect(p, "qom-set", "{\"path\": \"/machine/peripheral/balloon0\", \"property\": \"guest-stats-polling-interval\", \"value\": 3}");
        fake_peer_reply(p, "{}");
        /* the one-off report from driver load is not fresh; the next one is */
        reply_stats(p, "100");
        reply_stats(p, "103");
}

static void script_hangs_up(FakePeer *p) {
        fake_peer_greet(p);
        fake_peer_expect(p, "query-balloon", NULL);
        fake_peer_close(p);
}

static void agent_file(FakePeer *p, const char *b64_content, size_t size) {
        char buf[4096];

        fake_peer_expect(p, "guest-file-open", NULL);
        fake_peer_send(p, "{\"return\": 5}\n");
        fake_peer_expect(p, "guest-file-read", NULL);
        snprintf(buf, sizeof(buf), "{\"return\": {\"count\": %zu, \"buf-b64\": \"%s\", \"eof\": true}}\n", size, b64_content);
        fake_peer_send(p, buf);
        fake_peer_expect(p, "guest-file-close", NULL);
        fake_peer_send(p, "{\"return\": {}}\n");
}

static void script_agent(FakePeer *p) {
        fake_peer_expect(p, "guest-sync-delimited", NULL);
        fake_peer_send(p, "\xff{\"return\": %SYNC%}\n");
        /* "pgmajfault 12\noom_kill 0\n" */
        agent_file(p, "cGdtYWpmYXVsdCAxMgpvb21fa2lsbCAwCg==", 25);
        /* "MemTotal: 1024 kB\n" */
        agent_file(p, "TWVtVG90YWw6IDEwMjQga0IK", 18);
        /* "some avg10=1.50 avg60=0.00 avg300=0.00 total=42\n" */
        agent_file(p, "c29tZSBhdmcxMD0xLjUwIGF2ZzYwPTAuMDAgYXZnMzAwPTAuMDAgdG90YWw9NDIK", 48);
}

static json_object *get(json_object *o, const char *path) {
        char buf[256], *save = NULL;

        snprintf(buf, sizeof(buf), "%s", path);
        for (char *key = strtok_r(buf, ".", &save); key; key = strtok_r(NULL, ".", &save)) {
                if (!json_object_object_get_ex(o, key, &o))
                        ck_abort_msg("no %s in output", path);
        }
        return o;
}

START_TEST(test_tool_prints_document) {
        const char *args[] = { "--compact", NULL, NULL };
        json_object *doc;

        listen_on(&qmp_listener, "qmp.sock", false, script_polling_on);
        args[1] = qmp_listener.path;
        ck_assert_msg(run_tool(args) == 0, "stderr: %s", err);
        ck_assert_msg(fake_peer_failure(qmp_listener.peer) == NULL, "%s", fake_peer_failure(qmp_listener.peer));
        doc = json_tokener_parse(out);
        ck_assert_msg(doc, "not JSON: %s", out);
        ck_assert_str_eq(json_object_get_string(get(doc, "qemu")), "7.2.0");
        ck_assert_int_eq(json_object_get_int64(get(doc, "balloon.actual")), 1073741824);
        ck_assert(json_object_get_boolean(get(doc, "balloon.free-page-reporting")));
        ck_assert_str_eq(json_object_get_string(json_object_object_get(json_object_array_get_idx(get(doc, "memory-devices"), 0), "id")), "vm0");
        ck_assert_int_eq(json_object_get_int64(get(doc, "guest-stats.stats.stat-free-memory")), 813363200);
        ck_assert_int_eq(json_object_get_int64(get(doc, "guest-stats.stats.stat-swap-in")), 0);
        /* -1 and absent stats print as null, never 0 */
        ck_assert_ptr_null(get(doc, "guest-stats.stats.stat-htlb-pgfail"));
        ck_assert_ptr_null(get(doc, "guest-stats.stats.stat-oom-kills"));
        ck_assert_int_eq(json_object_get_int64(get(doc, "guest-stats.polling-interval")), 2);
        ck_assert(!json_object_object_get_ex(doc, "agent", NULL));
        json_object_put(doc);
}
END_TEST

START_TEST(test_tool_enables_polling_and_waits) {
        const char *args[] = { "--poll-interval", "3", NULL, NULL };
        json_object *doc;

        listen_on(&qmp_listener, "qmp.sock", false, script_polling_off);
        args[2] = qmp_listener.path;
        ck_assert_msg(run_tool(args) == 0, "stderr: %s", err);
        ck_assert_msg(fake_peer_failure(qmp_listener.peer) == NULL, "%s", fake_peer_failure(qmp_listener.peer));
        ck_assert(fake_peer_done(qmp_listener.peer));
        doc = json_tokener_parse(out);
        ck_assert_msg(doc, "not JSON: %s", out);
        ck_assert_int_eq(json_object_get_int64(get(doc, "guest-stats.last-update")), 103);
        ck_assert_int_eq(json_object_get_int64(get(doc, "guest-stats.polling-interval")), 3);
        json_object_put(doc);
}
END_TEST

START_TEST(test_tool_with_agent) {
        const char *args[] = { "--agent", NULL, NULL, NULL };
        json_object *doc;

        listen_on(&qmp_listener, "qmp.sock", false, script_polling_on);
        listen_on(&qga_listener, "qga.sock", true, script_agent);
        args[1] = qga_listener.path;
        args[2] = qmp_listener.path;
        ck_assert_msg(run_tool(args) == 0, "stderr: %s", err);
        ck_assert_msg(fake_peer_failure(qga_listener.peer) == NULL, "%s", fake_peer_failure(qga_listener.peer));
        doc = json_tokener_parse(out);
        ck_assert_msg(doc, "not JSON: %s", out);
        ck_assert_int_eq(json_object_get_int64(get(doc, "agent.vmstat.pgmajfault")), 12);
        ck_assert_int_eq(json_object_get_int64(get(doc, "agent.vmstat.oom_kill")), 0);
        ck_assert_ptr_null(get(doc, "agent.vmstat.workingset_refault_file"));
        ck_assert_int_eq(json_object_get_int64(get(doc, "agent.meminfo-bytes.MemTotal")), 1024 * 1024);
        ck_assert_double_eq_tol(json_object_get_double(get(doc, "agent.psi-memory.some.avg10")), 1.5, 1e-9);
        ck_assert_ptr_null(get(doc, "agent.psi-memory.full"));
        json_object_put(doc);
}
END_TEST

START_TEST(test_tool_peer_hangs_up) {
        const char *args[] = { NULL, NULL };

        listen_on(&qmp_listener, "qmp.sock", false, script_hangs_up);
        args[0] = qmp_listener.path;
        ck_assert_int_eq(run_tool(args), 1);
        ck_assert_str_eq(out, "");
        ck_assert_msg(strstr(err, "closed by peer"), "stderr: %s", err);
}
END_TEST

START_TEST(test_tool_no_socket) {
        const char *args[] = { "/nonexistent/qmp.sock", NULL };

        ck_assert_int_eq(run_tool(args), 1);
        ck_assert_msg(strstr(err, "/nonexistent/qmp.sock"), "stderr: %s", err);
}
END_TEST

START_TEST(test_tool_usage) {
        const char *none[] = { NULL };
        const char *bad[] = { "--poll-interval", "zero", "x.sock", NULL };
        const char *help[] = { "--help", NULL };

        ck_assert_int_eq(run_tool(none), 2);
        ck_assert_int_eq(run_tool(bad), 2);
        ck_assert_int_eq(run_tool(help), 0);
        ck_assert_ptr_nonnull(strstr(out, "--watch"));
}
END_TEST

int main(void) {
        return check_run_case("qmp-query-tool", "tool", setup, teardown, 60,
                              CHECK_TESTS(test_tool_prints_document, test_tool_enables_polling_and_waits,
                                          test_tool_with_agent, test_tool_peer_hangs_up, test_tool_no_socket,
                                          test_tool_usage));
}
