/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ctl/ctl-pager.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include "ctl/ctl-format.h"

static pid_t pager_pid = -1;
static int saved_stdout = -1, saved_stderr = -1;

/* What the pager gets when it is not a pager at all (none could be started): the text as is. */
_Noreturn static void copy_through(void) {
        char buf[4096];
        ssize_t n;

        while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
                for (ssize_t done = 0; n > 0 && done < n;) {
                        ssize_t w = write(STDOUT_FILENO, buf + done, (size_t) (n - done));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w <= 0)
                                _exit(EXIT_FAILURE);
                        done += w;
                }
        _exit(EXIT_SUCCESS);
}

_Noreturn static void run_pager(int input, const char *env_pager, bool secure, bool trust_env) {
        const char *less, *charset;

        if (dup2(input, STDIN_FILENO) < 0)
                _exit(EXIT_FAILURE);
        if (input != STDIN_FILENO)
                close(input);
        signal(SIGPIPE, SIG_DFL);

        /* Set for less whichever pager runs: others may read them too, and they do no harm. */
        less = getenv("SYSTEMD_LESS");
        charset = getenv("SYSTEMD_LESSCHARSET");
        if (!charset && ctl_utf8())
                charset = "utf-8";
        if (setenv("LESS", less ?: "FRSXMK", 1) < 0 || (charset && setenv("LESSCHARSET", charset, 1) < 0) ||
            (secure && setenv("LESSSECURE", "1", 1) < 0))
                _exit(EXIT_FAILURE);

        /* A pager named in the environment may not know a secure mode: it runs in secure mode
         * only when $SYSTEMD_PAGERSECURE was set explicitly (the user vouches for it). */
        if (env_pager && (trust_env || !secure)) {
                execl("/bin/sh", "sh", "-c", env_pager, (char *) NULL);
                fprintf(stderr, "rightsizectl: cannot run the pager \"%s\": %s\n", env_pager, strerror(errno));
        }
        /* Debian's alternative for pagers is called "pager". Only less has a secure mode. */
        static const char *const pagers[] = { "pager", "less", "more" };
        for (size_t i = 0; i < sizeof(pagers) / sizeof(pagers[0]); i++) {
                if (secure && strcmp(pagers[i], "less") != 0)
                        continue;
                execlp(pagers[i], pagers[i], (char *) NULL);
        }
        copy_through();
}

void ctl_pager_open(bool disabled) {
        const char *env_pager, *term = getenv("TERM"), *secure_env;
        int fds[2], secure;
        uid_t owner;

        if (disabled || pager_pid > 0 || !isatty(STDOUT_FILENO) || (term && strcmp(term, "dumb") == 0))
                return;
        env_pager = getenv("SYSTEMD_PAGER") ?: getenv("PAGER");
        if (env_pager && (env_pager[0] == '\0' || strcmp(env_pager, "cat") == 0))
                return;
        secure_env = getenv("SYSTEMD_PAGERSECURE");
        secure = secure_env ? ctl_parse_boolean(secure_env) : -1;
        if (!secure_env)
                secure = sd_pid_get_owner_uid(0, &owner) < 0 || owner != geteuid();
        else if (secure < 0)
                secure = true; /* set, but not a boolean */

        fflush(stdout);
        fflush(stderr);
        if (pipe2(fds, O_CLOEXEC) < 0)
                return; /* no pager then: the output is still shown */
        pid_t pid = fork();
        if (pid < 0) {
                close(fds[0]);
                close(fds[1]);
                return;
        }
        if (pid == 0) {
                close(fds[1]);
                run_pager(fds[0], env_pager, secure, secure_env != NULL);
        }
        close(fds[0]);
        saved_stdout = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        if (saved_stdout < 0 || dup2(fds[1], STDOUT_FILENO) < 0) {
                /* Cannot point stdout at it: end it (it reads end of file) and write as usual. */
                close(fds[1]);
                if (saved_stdout >= 0)
                        close(saved_stdout);
                saved_stdout = -1;
                (void) waitpid(pid, NULL, 0);
                return;
        }
        if (isatty(STDERR_FILENO)) {
                saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
                if (saved_stderr >= 0 && dup2(fds[1], STDERR_FILENO) < 0) {
                        close(saved_stderr);
                        saved_stderr = -1;
                }
        }
        close(fds[1]);
        pager_pid = pid;

        static bool registered;
        if (!registered && atexit(ctl_pager_close) == 0)
                registered = true;
}

void ctl_pager_close(void) {
        if (pager_pid <= 0)
                return;
        fflush(stdout);
        fflush(stderr);
        /* Putting the old descriptors back closes the pipe's last write ends: the pager reads end
         * of file, and shows what it has until the user quits it. */
        if (saved_stdout >= 0) {
                (void) dup2(saved_stdout, STDOUT_FILENO);
                close(saved_stdout);
                saved_stdout = -1;
        }
        if (saved_stderr >= 0) {
                (void) dup2(saved_stderr, STDERR_FILENO);
                close(saved_stderr);
                saved_stderr = -1;
        }
        (void) kill(pager_pid, SIGCONT);
        while (waitpid(pager_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        pager_pid = -1;
}
