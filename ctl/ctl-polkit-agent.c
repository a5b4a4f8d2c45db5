/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "ctl/ctl-polkit-agent.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* pkttyagent closes its --notify-fd once registered; polkitd answers in milliseconds, so this
 * only bounds a polkitd that hangs (the change then goes ahead without an agent, and is refused
 * if polkit wanted a password). */
#define AGENT_REGISTER_TIMEOUT_MS 5000

static pid_t agent_pid;

void ctl_polkit_agent_close(void) {
        if (agent_pid <= 0)
                return;
        (void) kill(agent_pid, SIGTERM);
        while (waitpid(agent_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        agent_pid = 0;
}

/* This process's start time (/proc/self/stat's 22nd field, in clock ticks since boot): polkit
 * names a process by pid and start time, so that a recycled pid is not the same subject. */
static unsigned long long own_start_time(void) {
        char buf[1024];
        unsigned long long t = 0;
        FILE *f = fopen("/proc/self/stat", "re");

        if (!f)
                return 0;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* After the command name's closing parenthesis (the name may hold anything): the state,
         * then fields 4-21, then the start time. */
        const char *p = strrchr(buf, ')');
        if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
                         &t) != 1)
                return 0;
        return t;
}

void ctl_polkit_agent_open(void) {
        pid_t parent = getpid();
        unsigned long long start_time = own_start_time();
        int notify[2];

        if (agent_pid > 0 || geteuid() == 0 || !isatty(STDIN_FILENO) ||
            getenv("RIGHTSIZECTL_NO_POLKIT_AGENT"))
                return;
        if (pipe2(notify, O_CLOEXEC) < 0)
                return;
        pid_t pid = fork();
        if (pid < 0) {
                close(notify[0]);
                close(notify[1]);
                return;
        }
        if (pid == 0) {
                char fd[16], process[48];
                /* The write end is the agent's to close: it must survive exec. */
                if (fcntl(notify[1], F_SETFD, 0) < 0)
                        _exit(EXIT_FAILURE);
                snprintf(fd, sizeof(fd), "%d", notify[1]);
                snprintf(process, sizeof(process), "%d,%llu", (int) parent, start_time);
                /* Its prompts go to the terminal; nothing of it on our stdout, which a script may read. */
                (void) dup2(STDERR_FILENO, STDOUT_FILENO);
                execlp("pkttyagent", "pkttyagent", "--notify-fd", fd, "--process", process, (char *) NULL);
                _exit(127); /* not installed: the pipe closes, and the change goes ahead without it */
        }
        close(notify[1]);
        agent_pid = pid;
        /* Registered (it closed the pipe), or gone (exec failed: the same). */
        struct pollfd p = { .fd = notify[0], .events = POLLIN };
        while (poll(&p, 1, AGENT_REGISTER_TIMEOUT_MS) < 0 && errno == EINTR)
                ;
        close(notify[0]);
        atexit(ctl_polkit_agent_close);
}
