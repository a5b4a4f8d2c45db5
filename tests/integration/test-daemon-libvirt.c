/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized end to end on a libvirt domain: a real libvirtd (started through
 * contrib/libvirt-setup, CI has no systemd as PID 1), a private dbus-daemon, the daemon with
 * [libvirt] enabled, and the test guest defined as a TCG domain with a balloon (stats every
 * second), virtio-mem in its NUMA cell, the guest-agent channel and the rightsize metadata.
 *
 * It checks that the domain is picked up from its lifecycle event, that the estimate converges
 * within 15 % of the working set, that `virsh dommemstat` and `virsh dominfo` show the size
 * the daemon set, that `rightsizectl disable`/`enable --policy` round-trips the metadata (live
 * and persistent), that a virtio-mem move made by the daemon shows in the live XML, that the
 * daemon reconnects after a libvirtd restart and carries on, that a destroyed domain leaves
 * `rightsizectl list`, that a domain with <memballoon model='none'> is listed as skipped, and
 * that the daemon logged no libvirt error on the normal path.
 *
 * Ground truth, as in test-daemon-real-guest.c: the workload's anonymous set plus what the
 * rest of the guest uses and what its kernel reserved, measured through the agent (here via
 * libvirt) once the workload has touched its set. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "common/macro.h"
#include "daemon/libvirt-agent.h"
#include "daemon/libvirt-backend.h"
#include "daemon/libvirt-parse.h"

#define URI "qemu:///system"
#define LIBVIRT_TEST_LOCK "/run/rightsize-libvirt-test.lock"
#define GUEST_MEM (1024 * MIB)
#define ANON_MIB 300
#define FLOOR (256 * MIB)
/* Above the boot memory: only virtio-mem can give it. */
#define VMEM_FLOOR (1200 * MIB)

static const char *top_srcdir, *top_builddir;
static char tmpdir[64], domain_name[64], skipped_name[80], uuid[VIR_UUID_STRING_BUFLEN];
static char config_path[PATH_MAX], bus_address[512], daemon_log[PATH_MAX], console_log[PATH_MAX];
static pid_t bus_pid = -1, daemon_pid = -1;
static virConnectPtr conn;

static double now_sec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static double mib(uint64_t b) {
        return (double) b / (double) MIB;
}

static bool within(uint64_t value, uint64_t truth, double fraction) {
        double d = (double) value - (double) truth;
        return (d < 0 ? -d : d) <= fraction * (double) truth;
}

static int run(const char *cmd) {
        int r = system(cmd);
        return r == -1 ? -errno : WIFEXITED(r) ? WEXITSTATUS(r) : 128;
}

static char *capture(const char *cmd, int *ret_status) {
        char *out = NULL, buf[4096];
        size_t size = 0, n;
        FILE *p = popen(cmd, "r"), *m;
        int status;

        if (!p)
                return NULL;
        m = open_memstream(&out, &size);
        if (!m) {
                pclose(p);
                return NULL;
        }
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                fwrite(buf, 1, n, m);
        status = pclose(p);
        fclose(m);
        if (ret_status)
                *ret_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return out;
}

static void kill_wait(pid_t *pid, int sig) {
        if (*pid > 0) {
                (void) kill(*pid, sig);
                (void) waitpid(*pid, NULL, 0);
                *pid = -1;
        }
}

static void teardown_all(void) {
        char cmd[1024];

        kill_wait(&daemon_pid, SIGKILL);
        kill_wait(&bus_pid, SIGTERM);
        if (conn) {
                virConnectClose(conn);
                conn = NULL;
        }
        if (domain_name[0] && top_srcdir) {
                /* Leave nothing behind: the domain, its disk, libvirtd. */
                snprintf(cmd, sizeof(cmd),
                         "for d in %s %s; do virsh -q -c " URI " destroy $d >/dev/null 2>&1; "
                         "virsh -q -c " URI " undefine $d >/dev/null 2>&1; done; "
                         "%s/contrib/libvirt-setup --stop >/dev/null 2>&1; rm -rf %s",
                         domain_name, skipped_name, top_srcdir, tmpdir);
                (void) run(cmd);
                domain_name[0] = '\0';
        }
}

static void on_signal(int sig) {
        teardown_all();
        signal(sig, SIG_DFL);
        raise(sig);
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        ck_assert_int_eq(fclose(f), 0);
}

static bool file_contains(const char *path, const char *needle) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        bool found = false;
        FILE *f = fopen(path, "re");
        if (!f)
                return false;
        while (!found && getline(&line, &size, f) > 0)
                found = strstr(line, needle) != NULL;
        fclose(f);
        return found;
}

static off_t file_size(const char *path) {
        struct stat st;
        return stat(path, &st) < 0 ? 0 : st.st_size;
}

/* Warnings and errors about libvirt in the daemon's log from `offset` on, except those that
 * contain one of `allowed` (NULL-terminated, or NULL). */
static unsigned libvirt_problems(off_t offset, const char *const *allowed) {
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        unsigned n = 0;
        FILE *f = fopen(daemon_log, "re");

        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(fseeko(f, offset, SEEK_SET), 0);
        while (getline(&line, &size, f) > 0) {
                bool bad = (strncmp(line, "warning:", 8) == 0 || strncmp(line, "error:", 6) == 0 ||
                            strncmp(line, "crit", 4) == 0) &&
                           (strstr(line, "libvirt") || strstr(line, "Skipping this interval"));
                for (size_t i = 0; bad && allowed && allowed[i]; i++)
                        if (strstr(line, allowed[i]))
                                bad = false;
                if (bad) {
                        fprintf(stderr, "daemon log: %s", line);
                        n++;
                }
        }
        fclose(f);
        return n;
}

/* ---- the daemon and its bus ---- */

static void start_bus(void) {
        char conf[PATH_MAX], text[1024];
        int pipefd[2];
        ssize_t n;

        snprintf(conf, sizeof(conf), "%s/bus.conf", tmpdir);
        snprintf(text, sizeof(text),
                 "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
                 " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                 "<busconfig><listen>unix:path=%s/bus</listen><auth>EXTERNAL</auth>\n"
                 "<policy context=\"default\"><allow user=\"root\"/><allow own=\"*\"/>"
                 "<allow send_destination=\"*\" eavesdrop=\"true\"/><allow receive_sender=\"*\"/></policy>"
                 "</busconfig>\n",
                 tmpdir);
        write_file(conf, text);

        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        bus_pid = fork();
        ck_assert_int_ge(bus_pid, 0);
        if (bus_pid == 0) {
                char arg[PATH_MAX + 32];
                signal(SIGTERM, SIG_DFL);
                if (dup2(pipefd[1], 3) < 0)
                        _exit(127);
                snprintf(arg, sizeof(arg), "--config-file=%s", conf);
                execlp("dbus-daemon", "dbus-daemon", arg, "--print-address=3", "--nofork", "--nopidfile", (char *) NULL);
                _exit(127);
        }
        close(pipefd[1]);
        n = read(pipefd[0], bus_address, sizeof(bus_address) - 1);
        close(pipefd[0]);
        ck_assert_msg(n > 0, "dbus-daemon did not start");
        bus_address[n] = '\0';
        bus_address[strcspn(bus_address, "\n")] = '\0';
}

static void start_daemon(void) {
        char exe[PATH_MAX];

        snprintf(exe, sizeof(exe), "%s/rightsized", top_builddir);
        daemon_pid = fork();
        ck_assert_int_ge(daemon_pid, 0);
        if (daemon_pid == 0) {
                int fd = open(daemon_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                signal(SIGTERM, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
                        _exit(127);
                setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
                unsetenv("NOTIFY_SOCKET");
                execl(exe, "rightsized", "--config", config_path, "--foreground", (char *) NULL);
                _exit(127);
        }
}

/* Runs rightsizectl with ARGS on the private bus; returns its exit status, stdout in buf. */
static int run_ctl(char *buf, size_t size, const char *const *args) {
        char exe[PATH_MAX];
        int pipefd[2], status;
        size_t n = 0;
        ssize_t k;

        snprintf(exe, sizeof(exe), "%s/rightsizectl", top_builddir);
        ck_assert_int_eq(pipe2(pipefd, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                const char *argv[10] = { "rightsizectl" };
                for (size_t i = 0; args[i] && i + 2 < ARRAY_SIZE(argv); i++)
                        argv[i + 1] = args[i];
                if (dup2(pipefd[1], STDOUT_FILENO) < 0)
                        _exit(127);
                setenv("DBUS_SYSTEM_BUS_ADDRESS", bus_address, 1);
                execv(exe, (char *const *) argv);
                _exit(127);
        }
        close(pipefd[1]);
        while (n + 1 < size && (k = read(pipefd[0], buf + n, size - 1 - n)) > 0)
                n += (size_t) k;
        buf[n] = '\0';
        close(pipefd[0]);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ---- GetGuest ---- */

typedef struct GuestView {
        bool found;
        char state[32], source[16], uuid[VIR_UUID_STRING_BUFLEN], policy[64], fault[256];
        uint64_t estimate, target, actual, floor, updated, vmem;
        bool has_estimate;
} GuestView;

static int get_guest(GuestView *v) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        *v = (GuestView) {};
        if ((r = sd_bus_new(&bus)) < 0 || (r = sd_bus_set_address(bus, bus_address)) < 0 ||
            (r = sd_bus_set_bus_client(bus, true)) < 0 || (r = sd_bus_start(bus)) < 0)
                return r;
        r = sd_bus_call_method(bus, "org.rightsize.Manager1", "/org/rightsize/Manager1", "org.rightsize.Manager1",
                               "GetGuest", &error, &reply, "s", domain_name);
        if (r < 0)
                return r;
        ck_assert_int_ge(sd_bus_message_enter_container(reply, 'a', "{sv}"), 0);
        while ((r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
                const char *key, *contents;
                ck_assert_int_ge(sd_bus_message_read(reply, "s", &key), 0);
                ck_assert_int_ge(sd_bus_message_peek_type(reply, NULL, &contents), 0);
                uint64_t *u = strcmp(key, "estimate") == 0          ? &v->estimate
                            : strcmp(key, "target") == 0            ? &v->target
                            : strcmp(key, "actual") == 0            ? &v->actual
                            : strcmp(key, "floor") == 0             ? &v->floor
                            : strcmp(key, "updated") == 0           ? &v->updated
                            : strcmp(key, "virtio-mem-size") == 0   ? &v->vmem
                                                                    : NULL;
                char *s = strcmp(key, "state") == 0    ? v->state
                        : strcmp(key, "source") == 0   ? v->source
                        : strcmp(key, "uuid") == 0     ? v->uuid
                        : strcmp(key, "policy") == 0   ? v->policy
                        : strcmp(key, "fault") == 0    ? v->fault
                                                       : NULL;
                size_t s_size = s == v->state ? sizeof(v->state) : s == v->source ? sizeof(v->source)
                              : s == v->uuid  ? sizeof(v->uuid)  : s == v->policy ? sizeof(v->policy)
                                                                                   : sizeof(v->fault);
                if (u && strcmp(contents, "t") == 0) {
                        ck_assert_int_ge(sd_bus_message_read(reply, "v", "t", u), 0);
                        if (u == &v->estimate)
                                v->has_estimate = true;
                } else if (s && strcmp(contents, "s") == 0) {
                        const char *value;
                        ck_assert_int_ge(sd_bus_message_read(reply, "v", "s", &value), 0);
                        snprintf(s, s_size, "%s", value);
                } else
                        ck_assert_int_ge(sd_bus_message_skip(reply, "v"), 0);
                ck_assert_int_ge(sd_bus_message_exit_container(reply), 0);
        }
        v->found = true;
        return 0;
}

static void print_view(const char *what, double t0, const GuestView *v, uint64_t truth) {
        fprintf(stderr, "[%5.1fs] %s: state=%s target=%.0f actual=%.0f estimate=%.0f vmem=%.0f (truth %.0f MiB)%s%s\n",
                now_sec() - t0, what, v->state, mib(v->target), mib(v->actual), v->has_estimate ? mib(v->estimate) : -1.0,
                mib(v->vmem), mib(truth), v->fault[0] ? " fault: " : "", v->fault);
}

/* Whether `rightsizectl --json list` lists the domain `name`; its state and fault in the buffers. */
static bool ctl_lists(const char *name, char *state, size_t state_size, char *fault, size_t fault_size) {
        static char out[256 * 1024];
        json_object *doc, *guests;
        bool found = false;

        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "--json", "list", NULL }), 0);
        doc = json_tokener_parse(out);
        ck_assert_msg(doc, "rightsizectl --json list printed no JSON: %s", out);
        ck_assert(json_object_object_get_ex(doc, "guests", &guests));
        for (size_t i = 0; i < json_object_array_length(guests); i++) {
                json_object *g = json_object_array_get_idx(guests, i), *n, *source, *value;
                if (json_object_object_get_ex(g, "name", &n) && strcmp(json_object_get_string(n), name) == 0) {
                        ck_assert(json_object_object_get_ex(g, "source", &source));
                        ck_assert_str_eq(json_object_get_string(source), "libvirt");
                        if (state && json_object_object_get_ex(g, "state", &value))
                                snprintf(state, state_size, "%s", json_object_get_string(value) ?: "");
                        if (fault && json_object_object_get_ex(g, "fault", &value))
                                snprintf(fault, fault_size, "%s", json_object_get_string(value) ?: "");
                        found = true;
                }
        }
        json_object_put(doc);
        return found;
}

static bool ctl_lists_domain(void) {
        return ctl_lists(domain_name, NULL, 0, NULL, 0);
}

/* ---- libvirt ---- */

/* A "Key: 123 KiB" or "key 123" value of a virsh command's output, in KiB. */
static uint64_t virsh_value(const char *subcommand, const char *key) {
        char cmd[256];
        _cleanup_free_ char *out = NULL;
        const char *p;

        snprintf(cmd, sizeof(cmd), "virsh -c " URI " %s %s", subcommand, domain_name);
        out = capture(cmd, NULL);
        if (!out)
                return UINT64_MAX;
        for (p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
                if (strncmp(p, key, strlen(key)) == 0)
                        return strtoull(p + strlen(key), NULL, 10);
        return UINT64_MAX;
}

static uint64_t live_vmem_requested(void) {
        virDomainPtr dom = virDomainLookupByName(conn, domain_name);
        _cleanup_free_ char *xml = NULL;
        _cleanup_(rs_domain_xml_clear) RsDomainXml x = {};
        const RsVirtioMem *vm;

        ck_assert_ptr_nonnull(dom);
        xml = virDomainGetXMLDesc(dom, 0);
        virDomainFree(dom);
        ck_assert_ptr_nonnull(xml);
        ck_assert_int_eq(rs_domain_xml_parse(xml, &x), 0);
        vm = rs_domain_xml_find_virtio_mem(&x, "virtiomem0");
        ck_assert_ptr_nonnull(vm);
        return vm->requested;
}

static char *metadata_policy(unsigned flags) {
        char *p = NULL;
        ck_assert_int_eq(libvirt_domain_get_policy(conn, domain_name, flags, &p), 0);
        return p;
}

static uint64_t meminfo_value(const char *text, const char *key) {
        const char *p = strstr(text, key);
        ck_assert_msg(p, "%s missing", key);
        return strtoull(p + strlen(key), NULL, 10) * KIB;
}

/* Working set in balloon terms, less the workload's anonymous set. */
static uint64_t measure_ground_truth_base(void) {
        virDomainPtr dom = virDomainLookupByName(conn, domain_name);
        _cleanup_free_ char *meminfo = NULL, *pid = NULL, *status = NULL;
        char path[64], message[256] = "";
        uint64_t total, avail, rss_anon, base;
        size_t size;

        ck_assert_ptr_nonnull(dom);
        for (int i = 0; i < 60 && !file_contains(console_log, "rs-workload: pass=2 "); i++)
                sleep(1);
        ck_assert_msg(file_contains(console_log, "rs-workload: pass=2 "), "the workload did not run");
        ck_assert_msg(libvirt_agent_read_file(dom, "/proc/meminfo", &meminfo, &size, message, sizeof(message)) == 0,
                      "agent: %s", message);
        ck_assert_int_eq(libvirt_agent_read_file(dom, "/run/rs-workload.pid", &pid, &size, message, sizeof(message)), 0);
        pid[strcspn(pid, "\r\n")] = '\0';
        snprintf(path, sizeof(path), "/proc/%s/status", pid);
        ck_assert_int_eq(libvirt_agent_read_file(dom, path, &status, &size, message, sizeof(message)), 0);
        virDomainFree(dom);

        total = meminfo_value(meminfo, "MemTotal:");
        avail = meminfo_value(meminfo, "MemAvailable:");
        rss_anon = meminfo_value(status, "RssAnon:");
        ck_assert_uint_ge(rss_anon, (ANON_MIB - 10) * MIB);
        base = (GUEST_MEM - total) + (total - avail - rss_anon);
        fprintf(stderr, "ground truth: reserved %.0f + used without the workload %.0f = %.0f MiB, plus %d MiB anon\n",
                mib(GUEST_MEM - total), mib(total - avail - rss_anon), mib(base), ANON_MIB);
        return base;
}

static void write_config(void) {
        char text[4096];
        snprintf(text, sizeof(text),
                 "[daemon]\n"
                 "policy-dir = %s/policies\n"
                 "state-dir = %s/state\n"
                 "log-level = debug\n"
                 "host-reserve = 256M\n"
                 "read-group =\n"
                 /* Only this test's domain, whatever else runs on this libvirtd. */
                 "[guests]\n"
                 "manage = %s*\n"
                 "[qemu]\n"
                 "qmp-sockets = %s/no-qmp/*.qmp\n"
                 "[libvirt]\n"
                 "enabled = yes\n"
                 "uri = " URI "\n"
                 "manage-all = no\n"
                 "agent = yes\n",
                 tmpdir, tmpdir, domain_name, tmpdir);
        write_file(config_path, text);
}

static void setup_all(void) {
        char path[PATH_MAX];

        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/rs-dl-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(tmpdir));
        snprintf(domain_name, sizeof(domain_name), "rightsize-e2e-%d", (int) getpid());
        snprintf(skipped_name, sizeof(skipped_name), "rightsize-e2e-%d-noballoon", (int) getpid());
        snprintf(path, sizeof(path), "%s/policies", tmpdir);
        ck_assert_int_eq(mkdir(path, 0755), 0);
        /* As test-daemon-real-guest.c, a short hold to converge in minutes, but a 2 s interval:
         * through libvirt the agent read takes several round trips, and a busy host slows the
         * balloon of a TCG guest. */
        snprintf(path, sizeof(path), "%s/policies/test.conf", tmpdir);
        write_file(path, "[policy]\nmatch = rightsize-e2e-*\npoll-interval = 2s\nfloor = 256M\nhold-time = 15s\n"
                         "probe-step-max = 10%\nrefault-sensitivity = medium\nchange-cap-percent = 50%\n");
        /* The same, moving virtio-mem for coarse changes. */
        snprintf(path, sizeof(path), "%s/policies/test-vmem.conf", tmpdir);
        write_file(path, "[policy]\npoll-interval = 2s\nfloor = 256M\nhold-time = 15s\n"
                         "probe-step-max = 10%\nrefault-sensitivity = medium\nchange-cap-percent = 50%\n"
                         "actuator = both\n");
        snprintf(config_path, sizeof(config_path), "%s/rightsized.conf", tmpdir);
        snprintf(daemon_log, sizeof(daemon_log), "%s/rightsized.log", tmpdir);
        snprintf(console_log, sizeof(console_log), "%s/console.log", tmpdir);
        write_config();
        atexit(teardown_all);
        start_bus();
}

START_TEST(test_daemon_libvirt) {
        _cleanup_free_ char *xml = NULL;
        static char out[256 * 1024];
        char cmd[8192];
        virDomainPtr dom;
        GuestView v;
        double t0 = now_sec(), t;
        off_t restart_offset;
        uint64_t truth, kib;
        bool ok;
        int status;

        snprintf(cmd, sizeof(cmd), "%s/contrib/libvirt-setup", top_srcdir);
        ck_assert_msg(run(cmd) == 0, "contrib/libvirt-setup failed");
        conn = virConnectOpen(URI);
        ck_assert_ptr_nonnull(conn);
        fprintf(stderr, "[%5.1fs] libvirtd up\n", now_sec() - t0);

        snprintf(cmd, sizeof(cmd),
                 /* deflate-on-oom off, as in test-daemon-real-guest.c: the guest does not push back. */
                 "truncate -s 384M %s/swap.img && %s/contrib/guest-domain-xml --name %s --policy test --no-autodeflate "
                 "--swap-image %s/swap.img --console-log %s --mem 1024M "
                 "--workload '--anon-mib %d --sleep-ms 500'",
                 tmpdir, top_srcdir, domain_name, tmpdir, console_log, ANON_MIB);
        xml = capture(cmd, &status);
        ck_assert_msg(xml && status == 0, "guest-domain-xml failed");
        dom = virDomainDefineXML(conn, xml);
        ck_assert_msg(dom, "define: %s", virGetLastErrorMessage());
        ck_assert_int_eq(virDomainGetUUIDString(dom, uuid), 0);

        /* The daemon first, the domain after: it must come from the lifecycle event. */
        start_daemon();
        for (int i = 0; i < 100 && !file_contains(daemon_log, "libvirt: connected to"); i++)
                usleep(100 * 1000);
        ck_assert_msg(file_contains(daemon_log, "libvirt: connected to"), "the daemon did not connect to libvirt");
        ck_assert(get_guest(&v) < 0);
        t = now_sec();
        ck_assert_msg(virDomainCreate(dom) == 0, "start: %s", virGetLastErrorMessage());
        virDomainFree(dom);
        for (int i = 0; i < 100 && (get_guest(&v) < 0 || strcmp(v.state, "connecting") == 0); i++)
                usleep(100 * 1000);
        ck_assert_msg(v.found, "the started domain did not show up");
        fprintf(stderr, "[%5.1fs] picked up %.2f s after the start: state %s, policy %s\n", now_sec() - t0,
                now_sec() - t, v.state, v.policy);
        ck_assert_str_eq(v.source, "libvirt");
        ck_assert_str_eq(v.uuid, uuid);
        ck_assert_str_eq(v.policy, "test");
        ck_assert(ctl_lists_domain());

        /* disable: the metadata goes (live and persistent), and so does the guest. The test
         * then lets the guest boot and its workload settle, as test-daemon-real-guest.c does
         * before it starts its daemon: the refaults of a booting guest are not its baseline. */
        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "disable", domain_name, NULL }), 0);
        ck_assert_ptr_null(metadata_policy(VIR_DOMAIN_AFFECT_LIVE));
        ck_assert_ptr_null(metadata_policy(VIR_DOMAIN_AFFECT_CONFIG));
        for (int i = 0; i < 50 && ctl_lists_domain(); i++)
                usleep(100 * 1000);
        ck_assert_msg(!ctl_lists_domain(), "still listed after disable");
        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "enable", domain_name, "--policy", "nosuch", NULL }),
                         2);
        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "enable", "no-such-domain", NULL }), 3);
        truth = measure_ground_truth_base() + ANON_MIB * MIB;
        /* What the daemon saved of those first seconds goes too: a fresh start. */
        snprintf(cmd, sizeof(cmd), "%s/state/%s.json", tmpdir, domain_name);
        (void) unlink(cmd);

        /* enable: back, live and persistent. */
        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "enable", domain_name, "--policy", "test", NULL }),
                         0);
        {
                _cleanup_free_ char *live = metadata_policy(VIR_DOMAIN_AFFECT_LIVE);
                _cleanup_free_ char *config = metadata_policy(VIR_DOMAIN_AFFECT_CONFIG);
                ck_assert_str_eq(live, "test");
                ck_assert_str_eq(config, "test");
        }
        for (int i = 0; i < 50 && (get_guest(&v) < 0 || strcmp(v.state, "connecting") == 0); i++)
                usleep(100 * 1000);
        ck_assert(v.found);
        ck_assert_str_eq(v.policy, "test");

        /* Convergence. */
        double t_conv = now_sec();
        ok = false;
        while (!ok && now_sec() < t_conv + 240) {
                if (get_guest(&v) == 0) {
                        print_view("converging", t0, &v, truth);
                        ok = v.has_estimate && within(v.estimate, truth, 0.15) && strcmp(v.state, "hold") == 0 &&
                             within(v.actual, v.target, 0.03);
                }
                if (!ok)
                        sleep(2);
        }
        ck_assert_msg(ok, "no convergence within 15 %% of %.0f MiB", mib(truth));
        fprintf(stderr, "converged %.0f s after the ground truth: estimate %.0f MiB vs truth %.0f MiB (%+.1f %%), "
                        "target %.0f, actual %.0f\n",
                now_sec() - t_conv, mib(v.estimate), mib(truth),
                100.0 * ((double) v.estimate - (double) truth) / (double) truth, mib(v.target), mib(v.actual));
        ck_assert(v.target < GUEST_MEM - 64 * MIB);

        /* libvirt agrees: dommemstat's actual and dominfo's used memory are the new size. */
        ok = false;
        for (int i = 0; i < 10 && !ok; i++) {
                uint64_t actual_kib = virsh_value("dommemstat", "actual ");
                uint64_t used_kib = virsh_value("dominfo", "Used memory:");
                ck_assert(get_guest(&v) == 0);
                fprintf(stderr, "virsh: dommemstat actual %.0f MiB, dominfo used %.0f MiB; daemon actual %.0f MiB\n",
                        (double) actual_kib / 1024, (double) used_kib / 1024, mib(v.actual));
                ok = actual_kib != UINT64_MAX && used_kib != UINT64_MAX && within(actual_kib * KIB, v.actual, 0.02) &&
                     within(used_kib * KIB, v.actual, 0.02) && used_kib * KIB < GUEST_MEM - 64 * MIB;
                if (!ok)
                        sleep(1);
        }
        ck_assert_msg(ok, "virsh does not show the size the daemon set");
        ck_assert_uint_eq(libvirt_problems(0, NULL), 0);

        /* Over to a policy that uses virtio-mem: a new guest size (boot memory plus the device),
         * so the domain is let go and taken on again. */
        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "disable", domain_name, NULL }), 0);
        for (int i = 0; i < 50 && ctl_lists_domain(); i++)
                usleep(100 * 1000);
        ck_assert_msg(!ctl_lists_domain(), "still listed after disable");
        ck_assert_int_eq(
                run_ctl(out, sizeof(out), (const char *const[]) { "enable", domain_name, "--policy", "test-vmem", NULL }), 0);
        {
                _cleanup_free_ char *live = metadata_policy(VIR_DOMAIN_AFFECT_LIVE);
                _cleanup_free_ char *config = metadata_policy(VIR_DOMAIN_AFFECT_CONFIG);
                ck_assert_str_eq(live, "test-vmem");
                ck_assert_str_eq(config, "test-vmem");
        }
        for (int i = 0; i < 50 && (get_guest(&v) < 0 || strcmp(v.state, "connecting") == 0); i++)
                usleep(100 * 1000);
        ck_assert(v.found);
        ck_assert_str_eq(v.policy, "test-vmem");

        /* A floor above the boot memory: only virtio-mem can meet it, the live XML shows it. */
        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "set", domain_name, "floor=1200M", NULL }), 0);
        t = now_sec();
        uint64_t requested = 0;
        while (now_sec() < t + 40 && (requested = live_vmem_requested()) < VMEM_FLOOR - GUEST_MEM) {
                if (get_guest(&v) == 0)
                        print_view("virtio-mem", t0, &v, truth);
                sleep(1);
        }
        ck_assert_msg(requested >= VMEM_FLOOR - GUEST_MEM, "virtio-mem requested %.0f MiB in the live XML",
                      mib(requested));
        ck_assert_uint_eq(requested % (2 * MIB), 0);
        fprintf(stderr, "[%5.1fs] virtio-mem requested %.0f MiB in the live XML after %.1f s\n", now_sec() - t0,
                mib(requested), now_sec() - t);
        /* The guest gets the floor, no more: boot memory (the balloon) plus the plugged part. */
        ok = false;
        for (int i = 0; i < 30 && !ok; i++) {
                sleep(1);
                ok = get_guest(&v) == 0 && v.vmem >= VMEM_FLOOR - GUEST_MEM && within(v.actual, VMEM_FLOOR, 0.02);
        }
        print_view("virtio-mem", t0, &v, truth);
        ck_assert_msg(ok, "the guest did not settle at the floor (virtio-mem %.0f MiB, actual %.0f MiB)", mib(v.vmem),
                      mib(v.actual));
        ck_assert_uint_le(v.target, VMEM_FLOOR + 64 * MIB);
        kib = virsh_value("dominfo", "Used memory:");
        ck_assert_msg(within(kib * KIB, VMEM_FLOOR, 0.02), "dominfo: %" PRIu64 " KiB", kib);
        ck_assert_int_eq(run_ctl(out, sizeof(out), (const char *const[]) { "set", domain_name, "floor=0", NULL }), 0);
        ck_assert_uint_eq(libvirt_problems(0, NULL), 0);

        /* libvirtd restarts: the daemon reconnects and carries on. */
        restart_offset = file_size(daemon_log);
        t = now_sec();
        virConnectClose(conn);
        snprintf(cmd, sizeof(cmd), "%s/contrib/libvirt-setup --restart --no-install", top_srcdir);
        ck_assert_msg(run(cmd) == 0, "libvirt-setup --restart failed");
        conn = virConnectOpen(URI);
        ck_assert_ptr_nonnull(conn);
        ck_assert(get_guest(&v) == 0);
        uint64_t updated = v.updated;
        ok = false;
        for (int i = 0; i < 60 && !ok; i++) {
                sleep(1);
                ok = get_guest(&v) == 0 && v.updated > updated && !v.fault[0] && strcmp(v.state, "faulty") != 0 &&
                     strcmp(v.state, "connecting") != 0;
        }
        print_view("after the restart", t0, &v, truth);
        ck_assert_msg(ok, "the daemon did not carry on after the libvirtd restart");
        fprintf(stderr, "[%5.1fs] carrying on %.1f s after the libvirtd restart\n", now_sec() - t0, now_sec() - t);
        /* The normal path again from here. */
        off_t normal_offset = file_size(daemon_log);
        ck_assert_msg(file_contains(daemon_log, "connection to " URI " closed"), "the daemon did not see libvirtd go");
        /* While libvirtd is away: the close, a reconnect before it listens again, a call that
         * raced the close, and the guest's fault meanwhile. Nothing else. */
        ck_assert_uint_eq(libvirt_problems(restart_offset,
                                           (const char *const[]) { "closed (reason", "libvirt: connecting:",
                                                                   "libvirt: reading", "libvirt calls failing", NULL }),
                          0);

        /* Destroyed: it leaves the list. */
        dom = virDomainLookupByName(conn, domain_name);
        ck_assert_ptr_nonnull(dom);
        ck_assert_int_eq(virDomainDestroy(dom), 0);
        virDomainFree(dom);
        for (int i = 0; i < 50 && ctl_lists_domain(); i++)
                usleep(200 * 1000);
        ck_assert_msg(!ctl_lists_domain(), "still listed after destroy");

        /* A domain that opts in but has <memballoon model='none'>: listed, faulty, with why, never
         * touched. (Started after the other is gone: one TCG guest at a time.) */
        {
                _cleanup_free_ char *skipped_xml = NULL;
                char state[32] = "", fault[256] = "";

                snprintf(cmd, sizeof(cmd), "%s/contrib/guest-domain-xml --name %s --policy test --no-balloon --vmem-size 0",
                         top_srcdir, skipped_name);
                skipped_xml = capture(cmd, &status);
                ck_assert_msg(skipped_xml && status == 0, "guest-domain-xml --no-balloon failed");
                dom = virDomainDefineXML(conn, skipped_xml);
                ck_assert_msg(dom, "define: %s", virGetLastErrorMessage());
                ck_assert_msg(virDomainCreate(dom) == 0, "start: %s", virGetLastErrorMessage());
                for (int i = 0; i < 50 && !ctl_lists(skipped_name, state, sizeof(state), fault, sizeof(fault)); i++)
                        usleep(100 * 1000);
                fprintf(stderr, "[%5.1fs] %s: state %s, fault \"%s\"\n", now_sec() - t0, skipped_name, state, fault);
                ck_assert_str_eq(state, "faulty");
                ck_assert_msg(strstr(fault, "skipped") && strstr(fault, "balloon"), "fault: %s", fault);
                ck_assert_int_eq(virDomainDestroy(dom), 0);
                ck_assert_int_eq(virDomainUndefine(dom), 0);
                virDomainFree(dom);
                for (int i = 0; i < 50 && ctl_lists(skipped_name, NULL, 0, NULL, 0); i++)
                        usleep(100 * 1000);
                ck_assert(!ctl_lists(skipped_name, NULL, 0, NULL, 0));
        }

        /* SIGTERM: a clean exit. */
        ck_assert_int_eq(kill(daemon_pid, SIGTERM), 0);
        ck_assert_int_eq(waitpid(daemon_pid, &status, 0), daemon_pid);
        daemon_pid = -1;
        ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        ck_assert_uint_eq(libvirt_problems(normal_offset, NULL), 0);
        fprintf(stderr, "[%5.1fs] total\n", now_sec() - t0);
}
END_TEST

static void quiet_error(void *userdata _unused_, virErrorPtr error _unused_) {
}

int main(void) {
        Suite *s = suite_create("daemon-libvirt");
        TCase *tc = tcase_create("real-libvirtd");
        int failed;

        top_srcdir = getenv("top_srcdir") ?: ".";
        top_builddir = getenv("top_builddir") ?: ".";
        if (getuid() != 0) {
                /* libvirtd, qemu.conf and the libvirt-qemu user need root; CI runs as root. */
                fprintf(stderr, "test-daemon-libvirt: needs root\n");
                return EXIT_FAILURE;
        }
        /* Expected errors (no metadata) are checked through return values, not printed. */
        virSetErrorFunc(NULL, quiet_error);
        /* A connection to a libvirtd that went away writes into a closed socket. */
        signal(SIGPIPE, SIG_IGN);
        /* One libvirtd per host, which each libvirt test starts, restarts and stops: tests run
         * from several build trees at once take turns. */
        int lock_fd = open(LIBVIRT_TEST_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0) {
                fprintf(stderr, "test-daemon-libvirt: cannot lock %s: %m\n", LIBVIRT_TEST_LOCK);
                return EXIT_FAILURE;
        }
        tcase_add_unchecked_fixture(tc, setup_all, teardown_all);
        tcase_set_timeout(tc, 600);
        tcase_add_test(tc, test_daemon_libvirt);
        suite_add_tcase(s, tc);

        SRunner *sr = srunner_create(s);
        /* No fork: the daemon, the bus and libvirtd must be cleaned up whatever failed. */
        srunner_set_fork_status(sr, CK_NOFORK);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        teardown_all();
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
