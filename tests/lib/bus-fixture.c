/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "tests/lib/bus-fixture.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/test-util.h"

#ifndef TEST_TOP_SRCDIR
#define TEST_TOP_SRCDIR "."
#endif

static const char open_config[] =
        "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
        " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
        "<busconfig>\n"
        "  <listen>unix:path=%s/bus</listen>\n"
        "  <auth>EXTERNAL</auth>\n"
        "  <policy context=\"default\">\n"
        "    <allow user=\"*\"/>\n"
        "    <allow own=\"*\"/>\n"
        "    <allow send_destination=\"*\"/>\n"
        "    <allow receive_sender=\"*\"/>\n"
        "  </policy>\n"
        "</busconfig>\n";

static const char system_config[] =
        "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
        " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
        "<busconfig>\n"
        "  <listen>unix:path=%s/bus</listen>\n"
        "  <auth>EXTERNAL</auth>\n"
        "  <policy context=\"default\">\n" /* as in the system bus's system.conf */
        "    <allow user=\"*\"/>\n"
        "    <deny own=\"*\"/>\n"
        "    <deny send_type=\"method_call\"/>\n"
        "    <allow send_type=\"signal\"/>\n"
        "    <allow send_requested_reply=\"true\" send_type=\"method_return\"/>\n"
        "    <allow send_requested_reply=\"true\" send_type=\"error\"/>\n"
        "    <allow receive_type=\"method_call\"/>\n"
        "    <allow receive_type=\"method_return\"/>\n"
        "    <allow receive_type=\"error\"/>\n"
        "    <allow receive_type=\"signal\"/>\n"
        "    <allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus\"/>\n"
        "    <allow send_destination=\"org.freedesktop.DBus\" send_interface=\"org.freedesktop.DBus.Introspectable\"/>\n"
        "  </policy>\n"
        "  <include>%s/policy.conf</include>\n"
        "%s"
        "</busconfig>\n";

void test_child_init(void) {
        (void) signal(SIGTERM, SIG_DFL);
        (void) signal(SIGINT, SIG_DFL);
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
}

pid_t test_fork_with_output(const char *out_path, const char *err_path) {
        pid_t pid = fork();

        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                test_child_init();
                int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                int err = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (out < 0 || err < 0 || dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
                        _exit(120);
        }
        return pid;
}

pid_t test_service_start(void (*serve)(int ready_fd, void *userdata), void *userdata, const char *failure) {
        int ready[2];
        char c;

        ck_assert_int_eq(pipe2(ready, O_CLOEXEC), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                test_child_init();
                close(ready[0]);
                serve(ready[1], userdata);
                _exit(127);
        }
        close(ready[1]);
        ck_assert_msg(read(ready[0], &c, 1) == 1, "%s", failure);
        close(ready[0]);
        return pid;
}

void test_service_ready(int ready_fd) {
        if (write(ready_fd, "R", 1) != 1)
                _exit(1);
        close(ready_fd);
}

void test_service_serve(sd_bus *bus, const bool *done) {
        while (!done || !*done) {
                int r = sd_bus_process(bus, NULL);
                if (r < 0)
                        _exit(2);
                if (r == 0 && sd_bus_wait(bus, UINT64_MAX) < 0)
                        _exit(3);
        }
}

static char *replace_all(const char *s, const char *from, const char *to) {
        char *out = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&out, &size);

        if (!f)
                return NULL;
        for (const char *p; (p = strstr(s, from)); s = p + strlen(from)) {
                fwrite(s, 1, (size_t) (p - s), f);
                fputs(to, f);
        }
        fputs(s, f);
        if (fclose(f) != 0) {
                free(out);
                return NULL;
        }
        return out;
}

static int write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        if (!f)
                return -errno;
        fputs(text, f);
        return fclose(f) == 0 ? 0 : -EIO;
}

/* The shipped policy, with its read group swapped for one that exists here. */
static int write_shipped_policy(const char *dir) {
        _cleanup_free_ char *src_path = NULL, *src = NULL, *policy = NULL, *path = NULL;
        const char *srcdir = getenv("top_srcdir") ?: TEST_TOP_SRCDIR;

        if (asprintf(&src_path, "%s/etc/org.rightsize.Manager1.conf", srcdir) < 0 ||
            asprintf(&path, "%s/policy.conf", dir) < 0)
                return -ENOMEM;
        src = test_read_file(src_path);
        if (!src || !strstr(src, "<policy group=\"rightsize\">"))
                return -ENOENT;
        policy = replace_all(src, "group=\"rightsize\"", "group=\"" BUS_FIXTURE_READ_GROUP "\"");
        if (!policy)
                return -ENOMEM;
        return write_text(path, policy);
}

static int bus_spawn(BusFixture *b);

/* In place of the shipped policy: a file dbus-daemon can include, that allows nothing. */
static int write_empty_policy(const char *dir) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/policy.conf", dir) < 0)
                return -ENOMEM;
        return write_text(path,
                          "<!DOCTYPE busconfig PUBLIC \"-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN\"\n"
                          " \"http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd\">\n"
                          "<busconfig/>\n");
}

int bus_fixture_install_policy(BusFixture *b) {
        int r;

        if (b->pid <= 0)
                return -ESRCH;
        r = write_shipped_policy(b->dir);
        if (r < 0)
                return r;
        return kill(b->pid, SIGHUP) < 0 ? -errno : 0;
}

int bus_fixture_start(BusFixture *b, BusPolicy policy) {
        _cleanup_free_ char *config = NULL, *config_path = NULL;
        int r;

        *b = (BusFixture) { .pid = -1 };
        b->dir = test_mkdtemp();
        if (chmod(b->dir, 0755) < 0) /* callers that are not root connect too */
                return -errno;
        if (policy == BUS_POLICY_SYSTEM_UNINSTALLED) {
                r = write_empty_policy(b->dir);
                if (r < 0)
                        return r;
                r = asprintf(&config, system_config, b->dir, b->dir, "");
        } else if (policy == BUS_POLICY_SYSTEM || policy == BUS_POLICY_SYSTEM_POLKIT) {
                r = write_shipped_policy(b->dir);
                if (r < 0)
                        return r;
                if (policy == BUS_POLICY_SYSTEM_POLKIT && access(BUS_FIXTURE_POLKIT_POLICY, R_OK) < 0)
                        return -errno; /* polkitd is not installed */
                r = asprintf(&config, system_config, b->dir, b->dir,
                             policy == BUS_POLICY_SYSTEM_POLKIT ? "  <include>" BUS_FIXTURE_POLKIT_POLICY "</include>\n"
                                                                : "");
        } else
                r = asprintf(&config, open_config, b->dir);
        if (r < 0 || asprintf(&config_path, "%s/bus.conf", b->dir) < 0)
                return -ENOMEM;
        r = write_text(config_path, config);
        if (r < 0)
                return r;

        return bus_spawn(b);
}

/* Runs dbus-daemon on the fixture's config; its address goes to b->address. */
static int bus_spawn(BusFixture *b) {
        _cleanup_free_ char *config_path = NULL;
        char buf[512];
        int pipefd[2], r;
        ssize_t n;

        if (asprintf(&config_path, "%s/bus.conf", b->dir) < 0)
                return -ENOMEM;
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        b->pid = fork();
        if (b->pid < 0) {
                r = -errno;
                close(pipefd[0]);
                close(pipefd[1]);
                return r;
        }
        if (b->pid == 0) {
                char arg_config[PATH_MAX + 32];

                test_child_init();
                if (dup2(pipefd[1], 3) < 0)
                        _exit(127);
                if (!getenv("TEST_DEBUG")) {
                        /* Its fd-limit complaint and "Rejected send message" lines are expected
                         * here; TEST_DEBUG=1 shows them. */
                        int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
                        if (null >= 0)
                                (void) dup2(null, STDERR_FILENO);
                }
                snprintf(arg_config, sizeof(arg_config), "--config-file=%s", config_path);
                execlp("dbus-daemon", "dbus-daemon", arg_config, "--print-address=3", "--nofork", "--nopidfile",
                       (char *) NULL);
                _exit(127);
        }
        close(pipefd[1]);
        n = read(pipefd[0], buf, sizeof(buf) - 1);
        close(pipefd[0]);
        if (n <= 0)
                return -ECHILD; /* dbus-daemon did not start */
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        b->address = strdup(buf);
        return b->address ? 0 : -ENOMEM;
}

int bus_fixture_restart(BusFixture *b) {
        if (b->pid <= 0)
                return -ESRCH;
        (void) kill(b->pid, SIGTERM);
        (void) waitpid(b->pid, NULL, 0);
        b->pid = -1;
        free(b->address);
        b->address = NULL;
        return bus_spawn(b);
}

void bus_fixture_stop(BusFixture *b) {
        if (b->pid > 0) {
                (void) kill(b->pid, SIGTERM);
                (void) waitpid(b->pid, NULL, 0);
        }
        b->pid = -1;
        if (b->dir)
                test_rm_rf(b->dir);
        free(b->dir);
        free(b->address);
        b->dir = b->address = NULL;
}

int bus_fixture_connect(const BusFixture *b, sd_bus **ret) {
        sd_bus *bus = NULL;
        int r;

        r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, b->address);
        if (r >= 0)
                r = sd_bus_set_bus_client(bus, 1);
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r < 0) {
                sd_bus_unref(bus);
                return r;
        }
        *ret = bus;
        return 0;
}

double bus_fixture_reference_call_sec(const BusFixture *b) {
        struct timespec t0, t1;
        sd_bus *bus = NULL;
        int r;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        r = bus_fixture_connect(b, &bus);
        ck_assert_msg(r >= 0, "connecting to the test bus: %s", strerror(-r));
        r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId",
                               NULL, NULL, "");
        ck_assert_msg(r >= 0, "GetId on the test bus: %s", strerror(-r));
        sd_bus_flush_close_unref(bus);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        return (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
}
