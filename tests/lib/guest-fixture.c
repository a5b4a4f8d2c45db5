/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/lib/guest-fixture.h"

static const char *env_or(const char *name, const char *fallback) {
        const char *v = getenv(name);
        return v && *v ? v : fallback;
}

/* boot-guest's command line for g's run directory, with --name when name is given. */
static void boot_command(const GuestFixture *g, const char *name, const char *boot_options, const char *workload_args,
                         char *command, size_t size) {
        snprintf(command, size, "'%s/contrib/boot-guest' --dir '%s' --image-dir '%s'%s%s%s %s%s%s%s",
                 env_or("top_srcdir", "."), g->run_dir, env_or("RIGHTSIZE_GUEST_DIR", "guest"),
                 name ? " --name '" : "", name ? name : "", name ? "'" : "", boot_options ? boot_options : "",
                 workload_args ? " --workload '" : "", workload_args ? workload_args : "",
                 workload_args ? "'" : "");
        fprintf(stderr, "guest-fixture: %s\n", command);
}

static void boot_failed(void) {
        fprintf(stderr, "guest-fixture: the test guest did not boot (see above); this is a failure, not a skip\n");
        exit(EXIT_FAILURE);
}

void guest_fixture_boot(GuestFixture *g, const char *boot_options, const char *workload_args) {
        char command[4 * PATH_MAX];

        memset(g, 0, sizeof(*g));
        snprintf(g->run_dir, sizeof(g->run_dir), "/tmp/rs-it-XXXXXX");
        if (!mkdtemp(g->run_dir)) {
                perror("mkdtemp");
                exit(EXIT_FAILURE);
        }
        snprintf(g->qmp_path, sizeof(g->qmp_path), "%s/qmp.sock", g->run_dir);
        snprintf(g->qga_path, sizeof(g->qga_path), "%s/qga.sock", g->run_dir);
        snprintf(g->console_path, sizeof(g->console_path), "%s/console.log", g->run_dir);

        boot_command(g, NULL, boot_options, workload_args, command, sizeof(command));
        if (system(command) != 0)
                boot_failed();
        g->booted = 1;
}

void guest_fixture_boot_in(GuestFixture *g, const char *dir, const char *name, const char *boot_options,
                           const char *workload_args) {
        char command[4 * PATH_MAX + 8] = "exec ";

        memset(g, 0, sizeof(*g));
        if ((size_t) snprintf(g->run_dir, sizeof(g->run_dir), "%s", dir) >= sizeof(g->run_dir)) {
                fprintf(stderr, "guest-fixture: %s: too long for a unix socket directory\n", dir);
                exit(EXIT_FAILURE);
        }
        snprintf(g->qmp_path, sizeof(g->qmp_path), "%s/%s.qmp", dir, name);
        snprintf(g->qga_path, sizeof(g->qga_path), "%s/%s.qga", dir, name);
        snprintf(g->console_path, sizeof(g->console_path), "%s/console.log", dir);
        /* exec: the pid is boot-guest's, whose SIGTERM trap takes a half-booted QEMU with it. */
        boot_command(g, name, boot_options, workload_args, command + 5, sizeof(command) - 5);

        g->boot_pid = fork();
        if (g->boot_pid < 0) {
                perror("fork");
                exit(EXIT_FAILURE);
        }
        if (g->boot_pid == 0) {
                execl("/bin/sh", "sh", "-c", command, (char *) NULL);
                _exit(127);
        }
        g->booted = 1;
}

void guest_fixture_boot_wait(GuestFixture *g) {
        int status;
        pid_t pid = g->boot_pid;

        g->boot_pid = 0;
        if (pid <= 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                boot_failed();
}

pid_t guest_fixture_qemu_pid(const GuestFixture *g) {
        char path[PATH_MAX];
        long pid = -1;

        snprintf(path, sizeof(path), "%s/qemu.pid", g->run_dir);
        FILE *f = fopen(path, "re");
        if (!f)
                return -1;
        if (fscanf(f, "%ld", &pid) != 1 || pid <= 1)
                pid = -1;
        fclose(f);
        return (pid_t) pid;
}

/* Gone, or a zombie: boot-guest left QEMU to be reaped by whoever inherited it. */
static bool process_gone(pid_t pid) {
        char path[64], stat[512];
        bool gone = true;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return true;
        if (fgets(stat, sizeof(stat), f)) {
                const char *paren = strrchr(stat, ')');
                gone = paren && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
        }
        fclose(f);
        return gone;
}

int guest_fixture_kill(GuestFixture *g, int sig) {
        pid_t pid = guest_fixture_qemu_pid(g);

        if (pid <= 0)
                return -ESRCH;
        if (kill(pid, sig) < 0)
                return -errno;
        for (int i = 0; i < 200; i++) {
                if (process_gone(pid))
                        return 0;
                usleep(50 * 1000);
        }
        return -ETIMEDOUT;
}

void guest_fixture_stop(GuestFixture *g) {
        char command[2 * PATH_MAX];

        if (!g->booted)
                return;
        if (g->boot_pid > 0) {
                /* Still booting: boot-guest stops its QEMU on SIGTERM. */
                (void) kill(g->boot_pid, SIGTERM);
                (void) waitpid(g->boot_pid, NULL, 0);
                g->boot_pid = 0;
        }
        snprintf(command, sizeof(command), "'%s/contrib/boot-guest' --stop '%s' >/dev/null",
                 env_or("top_srcdir", "."), g->run_dir);
        if (system(command) != 0)
                fprintf(stderr, "guest-fixture: stopping the guest in %s failed\n", g->run_dir);
        g->booted = 0;
}

int guest_fixture_console(const GuestFixture *g, const char *line) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char text[1024];
        int fd, r = 0;

        if ((size_t) snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/console.sock", g->run_dir) >= sizeof(sa.sun_path) ||
            (size_t) snprintf(text, sizeof(text), "%s\r", line) >= sizeof(text))
                return -ENAMETOOLONG;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                r = -errno;
        /* The UART takes 16 bytes at a time and QEMU drops what it had not passed on when the
         * socket closes: a few bytes at a time, then the socket stays open until QEMU has read
         * all of it (SIOCOUTQ: what the peer has not read yet), however long a busy TCG guest
         * takes to drain its UART; then a moment for the last FIFO's worth. */
        for (size_t off = 0, len = strlen(text); r == 0 && off < len; off += 4) {
                size_t n = MIN(len - off, (size_t) 4);
                if (write(fd, text + off, n) != (ssize_t) n)
                        r = errno > 0 ? -errno : -EIO;
                usleep(20 * 1000);
        }
        for (int i = 0, unread = 1; r == 0 && unread > 0; i++) {
                if (ioctl(fd, SIOCOUTQ, &unread) < 0)
                        r = -errno;
                else if (unread > 0 && i >= 600) /* 60 s: the guest is not reading its console */
                        r = -ETIMEDOUT;
                else if (unread > 0)
                        usleep(100 * 1000);
        }
        if (r == 0)
                usleep(500 * 1000);
        close(fd);
        return r;
}
