/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/libvirt/libvirt-watchdog.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

#include "common/macro.h"
#include "common/worker-thread.h"
#include "common/time-util.h"

#define HEARTBEAT_USEC (1 * USEC_PER_SEC)
#define CALL_SLOTS 4

struct LibvirtWatchdog {
        sd_event_source *heartbeat;
        uint64_t stall_usec;
        _Atomic uint64_t last_beat;  /* CLOCK_MONOTONIC µs */
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool quit;                   /* under lock */
        int fd;                      /* under lock */
        bool cut;                    /* under lock */
        bool cut_by_call;            /* under lock: a worker's call, not the loop */
        uint64_t cut_stalled_usec;   /* under lock */
        uint64_t calls[CALL_SLOTS];  /* under lock: start of a call on a worker thread, 0: free */
};

static int on_heartbeat(sd_event_source *s, uint64_t usec _unused_, void *userdata) {
        LibvirtWatchdog *w = userdata;
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        atomic_store(&w->last_beat, now);
        (void) sd_event_source_set_time(s, now + HEARTBEAT_USEC);
        return 0;
}

static void *watchdog_main(void *arg) {
        LibvirtWatchdog *w = arg;

        pthread_mutex_lock(&w->lock);
        while (!w->quit) {
                struct timespec until;
                clock_gettime(CLOCK_MONOTONIC, &until);
                until.tv_sec += 1;
                (void) pthread_cond_timedwait(&w->wake, &w->lock, &until);
                if (w->quit)
                        break;
                uint64_t now = now_usec(CLOCK_MONOTONIC), silent = now - atomic_load(&w->last_beat), oldest = 0;
                for (size_t i = 0; i < CALL_SLOTS; i++)
                        if (w->calls[i] > 0 && now - w->calls[i] > oldest)
                                oldest = now - w->calls[i];
                if (w->fd >= 0 && (silent > w->stall_usec || oldest > w->stall_usec)) {
                        /* Under the lock: the loop cannot hand the fd back to the system meanwhile. */
                        (void) shutdown(w->fd, SHUT_RDWR);
                        w->fd = -1;
                        w->cut = true;
                        w->cut_by_call = oldest > w->stall_usec;
                        w->cut_stalled_usec = MAX(silent, oldest);
                }
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

int libvirt_watchdog_new(sd_event *event, uint64_t stall_usec, LibvirtWatchdog **ret) {
        LibvirtWatchdog *w;
        pthread_condattr_t attr;
        int r;

        if (!event || !ret || stall_usec == 0)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->fd = -1;
        w->stall_usec = stall_usec;
        atomic_init(&w->last_beat, now_usec(CLOCK_MONOTONIC));
        pthread_mutex_init(&w->lock, NULL);
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&w->wake, &attr);
        pthread_condattr_destroy(&attr);
        r = sd_event_add_time(event, &w->heartbeat, CLOCK_MONOTONIC, now_usec(CLOCK_MONOTONIC) + HEARTBEAT_USEC, 0,
                              on_heartbeat, w);
        if (r < 0) {
                libvirt_watchdog_free(w);
                return r;
        }
        (void) sd_event_source_set_enabled(w->heartbeat, SD_EVENT_ON);
        (void) sd_event_source_set_description(w->heartbeat, "libvirt-watchdog-heartbeat");
        r = -pthread_create(&w->thread, NULL, watchdog_main, w);
        if (r < 0) {
                libvirt_watchdog_free(w);
                return r;
        }
        w->thread_started = true;
        *ret = w;
        return 0;
}

LibvirtWatchdog *libvirt_watchdog_free(LibvirtWatchdog *w) {
        if (!w)
                return NULL;
        if (w->thread_started)
                worker_thread_stop(w->thread, &w->lock, &w->wake, &w->quit);
        sd_event_source_disable_unref(w->heartbeat);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

void libvirt_watchdog_watch(LibvirtWatchdog *w, int fd) {
        if (!w)
                return;
        /* A new watch starts from a fresh beat: the loop is running right now. */
        atomic_store(&w->last_beat, now_usec(CLOCK_MONOTONIC));
        pthread_mutex_lock(&w->lock);
        w->fd = fd;
        pthread_mutex_unlock(&w->lock);
}

int libvirt_watchdog_call_begin(LibvirtWatchdog *w) {
        int slot = -1;

        if (!w)
                return -1;
        pthread_mutex_lock(&w->lock);
        for (size_t i = 0; i < CALL_SLOTS; i++)
                if (w->calls[i] == 0) {
                        w->calls[i] = now_usec(CLOCK_MONOTONIC);
                        slot = (int) i;
                        break;
                }
        pthread_mutex_unlock(&w->lock);
        return slot;
}

void libvirt_watchdog_call_end(LibvirtWatchdog *w, int slot) {
        if (!w || slot < 0 || slot >= CALL_SLOTS)
                return;
        pthread_mutex_lock(&w->lock);
        w->calls[slot] = 0;
        pthread_mutex_unlock(&w->lock);
}

void libvirt_watchdog_cut_now(LibvirtWatchdog *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        if (w->fd >= 0) {
                (void) shutdown(w->fd, SHUT_RDWR);
                w->fd = -1;
        }
        pthread_mutex_unlock(&w->lock);
}

bool libvirt_watchdog_take_cut(LibvirtWatchdog *w, uint64_t *ret_stalled_usec, bool *ret_by_call) {
        bool cut;

        if (!w)
                return false;
        pthread_mutex_lock(&w->lock);
        cut = w->cut;
        if (cut && ret_stalled_usec)
                *ret_stalled_usec = w->cut_stalled_usec;
        if (cut && ret_by_call)
                *ret_by_call = w->cut_by_call;
        w->cut = false;
        pthread_mutex_unlock(&w->lock);
        return cut;
}

static int compare_int(const void *a, const void *b) {
        int x = *(const int *) a, y = *(const int *) b;
        return (x > y) - (x < y);
}

int libvirt_socket_fds(int **ret, size_t *ret_n) {
        _cleanup_free_ int *fds = NULL;
        size_t n = 0, alloc = 0;
        DIR *dir = opendir("/proc/self/fd");
        struct dirent *de;

        if (!dir)
                return -errno;
        while ((de = readdir(dir))) {
                char *end;
                long fd = strtol(de->d_name, &end, 10);
                struct stat st;
                if (*end || end == de->d_name || fd < 0 || fd == dirfd(dir))
                        continue;
                if (fstat((int) fd, &st) < 0 || !S_ISSOCK(st.st_mode))
                        continue;
                if (n == alloc) {
                        alloc = alloc ? alloc * 2 : 64;
                        int *grown = realloc(fds, alloc * sizeof(int));
                        if (!grown) {
                                closedir(dir);
                                return -ENOMEM;
                        }
                        fds = grown;
                }
                fds[n++] = (int) fd;
        }
        closedir(dir);
        if (n > 0)
                qsort(fds, n, sizeof(int), compare_int);
        *ret = TAKE_PTR(fds);
        *ret_n = n;
        return 0;
}

static bool is_libvirt_daemon_socket(int fd) {
        static const char *const names[] = { "libvirt-sock", "libvirt-sock-ro", "virtqemud-sock", "virtqemud-sock-ro" };
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);
        const char *base;

        if (getpeername(fd, (struct sockaddr *) &sa, &len) < 0 || sa.sun_family != AF_UNIX ||
            len <= offsetof(struct sockaddr_un, sun_path) || !sa.sun_path[0])
                return false;
        sa.sun_path[sizeof(sa.sun_path) - 1] = '\0';
        base = strrchr(sa.sun_path, '/');
        base = base ? base + 1 : sa.sun_path;
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (strcmp(base, names[i]) == 0)
                        return true;
        return false;
}

int libvirt_connection_socket(const int *before, size_t n_before, const int *after, size_t n_after, int *ret_fd) {
        int found = -1;

        for (size_t i = 0; i < n_after; i++) {
                if (before && n_before > 0 && bsearch(&after[i], before, n_before, sizeof(int), compare_int))
                        continue;
                if (!is_libvirt_daemon_socket(after[i]))
                        continue;
                if (found >= 0)
                        return -ENOENT; /* several: which one is ours is not known */
                found = after[i];
        }
        if (found < 0)
                return -ENOENT;
        *ret_fd = found;
        return 0;
}
