/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/libvirt/libvirt-connect.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <libvirt/virterror.h>

#include "common/macro.h"
#include "daemon/libvirt/libvirt-watchdog.h"

struct LibvirtConnectAttempt {
        atomic_int refs;          /* the thread's and the loop's */
        atomic_bool cancelled;
        char *uri;
        int efd;                  /* written once by the thread when done */
        sd_event_source *source;  /* the loop's side */
        libvirt_connect_fn callback;
        void *userdata;
        virConnectPtr conn;       /* set by the thread before it writes efd */
        int socket_fd;            /* likewise, -1 when not known */
        char error[256];
};

static void attempt_unref(LibvirtConnectAttempt *a) {
        if (atomic_fetch_sub(&a->refs, 1) != 1)
                return;
        /* Last one out: a connection nobody took is closed. (The source is gone by now
         * unless the loop's side is the one freeing: sd-event is not thread-safe.) */
        if (a->conn)
                (void) virConnectClose(a->conn);
        sd_event_source_disable_unref(a->source);
        if (a->efd >= 0)
                close(a->efd);
        free(a->uri);
        free(a);
}

static void *connect_thread(void *userdata) {
        LibvirtConnectAttempt *a = userdata;
        uint64_t one = 1;

        _cleanup_free_ int *before = NULL, *after = NULL;
        size_t n_before = 0, n_after = 0;

        /* The connection's socket is the libvirt one that the open adds. */
        bool fds_known = libvirt_socket_fds(&before, &n_before) >= 0;
        a->conn = virConnectOpen(a->uri);
        if (!a->conn)
                snprintf(a->error, sizeof(a->error), "%s", virGetLastErrorMessage());
        else if (!fds_known || libvirt_socket_fds(&after, &n_after) < 0 ||
                 libvirt_connection_socket(before, n_before, after, n_after, &a->socket_fd) < 0)
                a->socket_fd = -1;
        virResetLastError();
        /* A cancelled attempt's loop side is gone: nobody reads efd. */
        if (!atomic_load(&a->cancelled) && write(a->efd, &one, sizeof(one)) < 0) {
                /* Cannot happen with a fresh eventfd; the loop would then wait forever. */
        }
        attempt_unref(a);
        return NULL;
}

static int on_done(sd_event_source *s _unused_, int fd _unused_, uint32_t revents _unused_, void *userdata) {
        LibvirtConnectAttempt *a = userdata;
        virConnectPtr conn = TAKE_PTR(a->conn);
        int socket_fd = a->socket_fd;
        libvirt_connect_fn callback = a->callback;
        void *cb_userdata = a->userdata;
        char error[sizeof(a->error)];

        memcpy(error, a->error, sizeof(error));
        /* Done with it before the callback, which may start a new attempt. The source goes
         * here, on the loop's thread: the thread may be the last to let go of `a`. */
        a->source = sd_event_source_disable_unref(a->source);
        attempt_unref(a);
        callback(conn, conn ? socket_fd : -1, conn ? NULL : error, cb_userdata);
        return 0;
}

int libvirt_connect_start(sd_event *event, const char *uri, libvirt_connect_fn callback, void *userdata,
                          LibvirtConnectAttempt **ret) {
        LibvirtConnectAttempt *a;
        pthread_attr_t attr;
        pthread_t thread;
        int r;

        if (!event || !uri || !callback || !ret)
                return -EINVAL;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        atomic_init(&a->refs, 1);
        atomic_init(&a->cancelled, false);
        a->socket_fd = -1;
        a->callback = callback;
        a->userdata = userdata;
        a->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        a->uri = strdup(uri);
        if (a->efd < 0 || !a->uri) {
                r = a->efd < 0 ? -errno : -ENOMEM;
                attempt_unref(a);
                return r;
        }
        r = sd_event_add_io(event, &a->source, a->efd, EPOLLIN, on_done, a);
        if (r < 0) {
                attempt_unref(a);
                return r;
        }
        (void) sd_event_source_set_description(a->source, "libvirt-connect");

        /* Detached: a thread stuck in a hung libvirtd must not hold up the daemon's exit. */
        atomic_fetch_add(&a->refs, 1);
        r = -pthread_attr_init(&attr);
        if (r == 0) {
                r = -pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
                if (r == 0)
                        r = -pthread_create(&thread, &attr, connect_thread, a);
                (void) pthread_attr_destroy(&attr);
        }
        if (r < 0) {
                atomic_fetch_sub(&a->refs, 1);
                attempt_unref(a);
                return r;
        }
        *ret = a;
        return 0;
}

void libvirt_connect_cancel(LibvirtConnectAttempt *a) {
        if (!a)
                return;
        atomic_store(&a->cancelled, true);
        a->source = sd_event_source_disable_unref(a->source);
        attempt_unref(a);
}
