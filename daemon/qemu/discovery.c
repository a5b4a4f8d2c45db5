/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Events on a watched directory are handled by name, so a create/delete costs one lstat(); an
 * inotify queue overflow falls back to rescanning and diffing against what is known. The watches
 * are sd-event's (sd_event_add_inotify()): one source a directory, and one on the nearest
 * existing ancestor of a directory that does not exist yet. */

#include "daemon/qemu/discovery.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include "common/event-util.h"
#include "common/macro.h"
#include "daemon/log.h"

/* One mask for both roles (watched directory and ancestor of a missing one), so adding a watch
 * twice on the same inode never narrows what it reports. */
#define WATCH_MASK                                                                                  \
        (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | \
         IN_ONLYDIR)

/* Before retrying a directory that could not be watched for reasons other than not existing (no
 * permission, the inotify watch limit). */
#define RETRY_USEC (5 * USEC_PER_SEC)

typedef struct WatchDir {
        Discovery *owner;
        char *path;
        char **patterns;                  /* fnmatch() patterns for file names; NULL-terminated */
        sd_event_source *watch;           /* on the directory itself, or NULL */
        sd_event_source *ancestor_watch;  /* while the directory is missing: on its nearest existing ancestor */
        char *next_name;                  /* the entry of that ancestor on the way to the directory */
} WatchDir;

typedef struct KnownSocket {
        char *path;
        char *name;
        size_t dir;       /* index into Discovery.dirs */
        dev_t dev;
        ino_t ino;        /* a new socket at the same path is a new guest */
        bool seen;        /* scratch for rescans */
        bool refused;     /* not trusted (socket-trust.h): kept so it is logged once, never reported */
} KnownSocket;

struct Discovery {
        sd_event *event;
        sd_event_source *retry_source;

        WatchDir *dirs;
        size_t n_dirs;

        KnownSocket *sockets;
        size_t n_sockets;

        const SocketTrust *trust;

        DiscoveryAddedFn added;
        DiscoveryRemovedFn removed;
        void *userdata;
};

static void strv_free(char **l) {
        for (char **p = l; p && *p; p++)
                free(*p);
        free(l);
}

static void dirs_free(WatchDir *dirs, size_t n) {
        for (size_t i = 0; i < n; i++) {
                sd_event_source_disable_unref(dirs[i].watch);
                sd_event_source_disable_unref(dirs[i].ancestor_watch);
                free(dirs[i].path);
                free(dirs[i].next_name);
                strv_free(dirs[i].patterns);
        }
        free(dirs);
}

/* "web1.qmp" -> "web1"; other names are kept whole. */
static char *guest_name_from_file(const char *file) {
        size_t n = strlen(file);

        if (n > 4 && strcmp(file + n - 4, ".qmp") == 0)
                n -= 4;
        return strndup(file, n);
}

static bool dir_matches(const WatchDir *dir, const char *file) {
        for (char **p = dir->patterns; p && *p; p++)
                if (fnmatch(*p, file, FNM_PERIOD) == 0)
                        return true;
        return false;
}

static ssize_t find_socket(const Discovery *d, const char *path) {
        for (size_t i = 0; i < d->n_sockets; i++)
                if (strcmp(d->sockets[i].path, path) == 0)
                        return (ssize_t) i;
        return -1;
}

static void socket_remove_at(Discovery *d, size_t i) {
        KnownSocket s = d->sockets[i];

        d->sockets[i] = d->sockets[--d->n_sockets];
        log_debug("QMP socket %s is gone", s.path);
        if (d->removed && !s.refused)
                d->removed(d, s.path, s.name, d->userdata);
        free(s.path);
        free(s.name);
}

/* Whether a socket of the directory may be a guest's (socket-trust.h); logs why not. */
static bool socket_trusted(Discovery *d, size_t dir, const char *path, const struct stat *st) {
        struct stat dir_st;
        char why[160];

        /* The directory the socket is in: a configured path that is a symlink is judged by
         * where it leads. */
        if (stat(d->dirs[dir].path, &dir_st) < 0)
                snprintf(why, sizeof(why), "its directory cannot be read: %s", strerror(errno));
        else if (socket_trust_files(d->trust, &dir_st, st, why, sizeof(why)))
                return true;
        log_warning("Refusing QMP socket %s: %s; only root and qemu-users may provide guests", path, why);
        return false;
}

static int socket_add(Discovery *d, size_t dir, const char *path, const char *file, const struct stat *st) {
        KnownSocket *grown, s = { .dir = dir, .dev = st->st_dev, .ino = st->st_ino, .seen = true };

        s.refused = !socket_trusted(d, dir, path, st);

        s.path = strdup(path);
        s.name = guest_name_from_file(file);
        grown = realloc(d->sockets, (d->n_sockets + 1) * sizeof(KnownSocket));
        if (!s.path || !s.name || !grown) {
                if (grown)
                        d->sockets = grown;
                free(s.path);
                free(s.name);
                return log_oom();
        }
        d->sockets = grown;
        d->sockets[d->n_sockets++] = s;
        if (s.refused)
                return 0;

        log_debug("QMP socket %s appeared", path);
        if (d->added)
                d->added(d, s.path, s.name, d->userdata);
        return 0;
}

/* Brings what we know about one file in a watched directory up to date. `gone`: an event said
 * the file we knew was deleted or moved away. Then it is forgotten whatever is at the path now:
 * a socket made again at once may get the freed inode back, so comparing inodes would take a
 * QEMU restarted under the same path for the old one; the new one comes with its own event. */
static int refresh_file(Discovery *d, size_t dir, const char *file, bool gone) {
        _cleanup_(freep) char *path = NULL;
        struct stat st;
        bool is_socket;
        ssize_t known;

        if (asprintf(&path, "%s%s%s", d->dirs[dir].path,
                     d->dirs[dir].path[strlen(d->dirs[dir].path) - 1] == '/' ? "" : "/", file) < 0) {
                path = NULL;
                return log_oom();
        }

        is_socket = dir_matches(&d->dirs[dir], file) && lstat(path, &st) == 0 && S_ISSOCK(st.st_mode);
        known = find_socket(d, path);

        if (gone) {
                if (known >= 0)
                        socket_remove_at(d, (size_t) known);
                return 0;
        }
        if (known >= 0) {
                d->sockets[known].seen = true;
                if (is_socket && d->sockets[known].dev == st.st_dev && d->sockets[known].ino == st.st_ino)
                        return 0;
                socket_remove_at(d, (size_t) known); /* gone, or replaced by a new one */
        }
        if (!is_socket)
                return 0;
        return socket_add(d, dir, path, file, &st);
}

/* Reports every socket of this directory as removed. */
static void forget_dir(Discovery *d, size_t dir) {
        for (size_t i = d->n_sockets; i > 0; i--)
                if (d->sockets[i - 1].dir == dir)
                        socket_remove_at(d, i - 1);
}

static int scan_dir(Discovery *d, size_t dir) {
        DIR *dh;
        struct dirent *de;

        for (size_t i = 0; i < d->n_sockets; i++)
                if (d->sockets[i].dir == dir)
                        d->sockets[i].seen = false;

        dh = opendir(d->dirs[dir].path);
        if (!dh) {
                int r = -errno;
                forget_dir(d, dir);
                return r;
        }
        while ((de = readdir(dh))) {
                if (de->d_type != DT_SOCK && de->d_type != DT_UNKNOWN)
                        continue;
                if (!dir_matches(&d->dirs[dir], de->d_name))
                        continue;
                (void) refresh_file(d, dir, de->d_name, false);
        }
        closedir(dh);

        /* Known but not listed any more: missed while the queue overflowed. */
        for (size_t i = d->n_sockets; i > 0; i--)
                if (d->sockets[i - 1].dir == dir && !d->sockets[i - 1].seen)
                        socket_remove_at(d, i - 1);
        return 0;
}

static int on_dir_event(sd_event_source *s, const struct inotify_event *ev, void *userdata);
static int on_ancestor_event(sd_event_source *s, const struct inotify_event *ev, void *userdata);

static int add_watch(WatchDir *w, const char *path, bool ancestor, sd_event_source **ret) {
        int r = sd_event_add_inotify(w->owner->event, ret, path, WATCH_MASK,
                                     ancestor ? on_ancestor_event : on_dir_event, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(*ret, ancestor ? "qmp-socket-ancestor" : "qmp-socket-discovery");
        return 0;
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata);

static void schedule_retry(Discovery *d) {
        int r;

        if (event_source_is_armed(d->retry_source))
                return;
        r = event_reset_time_relative(d->event, &d->retry_source, CLOCK_MONOTONIC, RETRY_USEC, 0, on_retry, d,
                                      "qmp-socket-retry");
        if (r < 0)
                log_warning_errno(r, "Cannot schedule a retry of QMP socket directories: %m");
}

/* Watches the directory and scans it, or, while it does not exist, watches its nearest existing
 * ancestor so that its creation is noticed. */
static void arm_dir(Discovery *d, size_t dir) {
        WatchDir *w = &d->dirs[dir];

        /* Dropped and added again: a watch re-armed from its own callback starts afresh, and the
         * scan below catches what happened in between. */
        w->watch = sd_event_source_disable_unref(w->watch);
        w->ancestor_watch = sd_event_source_disable_unref(w->ancestor_watch);
        free(w->next_name);
        w->next_name = NULL;

        for (int attempt = 0; attempt < 2; attempt++) {
                _cleanup_(freep) char *ancestor = NULL;
                int r = add_watch(w, w->path, false, &w->watch);

                if (r >= 0) {
                        w->ancestor_watch = sd_event_source_disable_unref(w->ancestor_watch);
                        (void) scan_dir(d, dir);
                        return;
                }
                forget_dir(d, dir);
                if (r != -ENOENT && r != -ENOTDIR) {
                        log_warning_errno(r, "Cannot watch %s, retrying later: %m", w->path);
                        schedule_retry(d);
                        return;
                }
                if (attempt > 0)
                        break;

                /* The directory is missing: watch the nearest ancestor that exists. */
                ancestor = strdup(w->path);
                if (!ancestor) {
                        log_oom();
                        schedule_retry(d);
                        return;
                }
                for (;;) {
                        char *slash = strrchr(ancestor, '/');
                        if (!slash)
                                break;
                        if (slash == ancestor)
                                slash[1] = '\0';
                        else
                                *slash = '\0';
                        w->ancestor_watch = sd_event_source_disable_unref(w->ancestor_watch);
                        r = add_watch(w, ancestor, true, &w->ancestor_watch);
                        if (r >= 0 || (r != -ENOENT && r != -ENOTDIR) || strcmp(ancestor, "/") == 0)
                                break;
                }
                if (r < 0) {
                        log_warning_errno(r, "Cannot watch any parent of %s, retrying later: %m", w->path);
                        schedule_retry(d);
                        return;
                }
                /* "/run" for "/run/qemu/vms": only entries named "qemu" there matter. */
                const char *rest = w->path + strlen(ancestor);
                rest += strspn(rest, "/");
                w->next_name = strndup(rest, strcspn(rest, "/"));
                log_debug("%s does not exist yet, waiting for it through %s", w->path, ancestor);
                /* It may have appeared before the ancestor watch was in place: try once more. */
        }
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Discovery *d = userdata;

        for (size_t i = 0; i < d->n_dirs; i++)
                if (!d->dirs[i].watch && !d->dirs[i].ancestor_watch)
                        arm_dir(d, i);
        return 0;
}

#define GONE_MASK (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)

static int on_dir_event(sd_event_source *s _unused_, const struct inotify_event *ev, void *userdata) {
        WatchDir *w = userdata;
        Discovery *d = w->owner;
        size_t dir = (size_t) (w - d->dirs);

        if (ev->mask & IN_Q_OVERFLOW) {
                log_notice("inotify queue overflowed; rescanning %s", w->path);
                (void) scan_dir(d, dir);
                return 0;
        }
        if (ev->mask & GONE_MASK) {
                /* Removed, renamed away (the watch would follow it) or unmounted. */
                forget_dir(d, dir);
                arm_dir(d, dir);
                return 0;
        }
        if (ev->len == 0 || (ev->mask & IN_ISDIR))
                return 0;
        if (ev->mask & (IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM))
                (void) refresh_file(d, dir, ev->name, ev->mask & (IN_DELETE | IN_MOVED_FROM));
        return 0;
}

static int on_ancestor_event(sd_event_source *s _unused_, const struct inotify_event *ev, void *userdata) {
        WatchDir *w = userdata;

        /* The ancestor itself went away, or the next step towards the directory appeared (or may
         * have: an overflow); a busy /run's other entries are none of our business. */
        if ((ev->mask & (GONE_MASK | IN_Q_OVERFLOW)) || !w->next_name ||
            (ev->len > 0 && strcmp(ev->name, w->next_name) == 0))
                arm_dir(w->owner, (size_t) (w - w->owner->dirs));
        return 0;
}

int discovery_new(sd_event *event, DiscoveryAddedFn added, DiscoveryRemovedFn removed, void *userdata,
                  Discovery **ret) {
        _cleanup_(discovery_freep) Discovery *d = NULL;

        if (!event || !ret)
                return -EINVAL;

        d = calloc(1, sizeof(Discovery));
        if (!d)
                return -ENOMEM;
        d->event = sd_event_ref(event);
        d->added = added;
        d->removed = removed;
        d->userdata = userdata;

        *ret = TAKE_PTR(d);
        return 0;
}

Discovery *discovery_free(Discovery *d) {
        if (!d)
                return NULL;

        sd_event_source_disable_unref(d->retry_source);
        dirs_free(d->dirs, d->n_dirs);
        sd_event_unref(d->event);
        for (size_t i = 0; i < d->n_sockets; i++) {
                free(d->sockets[i].path);
                free(d->sockets[i].name);
        }
        free(d->sockets);
        free(d);
        return NULL;
}

/* Groups the globs by directory. */
static int build_dirs(char *const *globs, WatchDir **ret, size_t *ret_n) {
        WatchDir *dirs = NULL;
        size_t n = 0;

        for (size_t g = 0; globs && globs[g]; g++) {
                const char *glob = globs[g], *slash = strrchr(glob, '/');
                _cleanup_(freep) char *dir = NULL;
                size_t i, np = 0;
                char **grown_patterns;

                if (glob[0] != '/' || !slash || slash[1] == '\0') {
                        dirs_free(dirs, n);
                        return -EINVAL;
                }
                dir = slash == glob ? strdup("/") : strndup(glob, (size_t) (slash - glob));
                if (!dir) {
                        dirs_free(dirs, n);
                        return -ENOMEM;
                }

                for (i = 0; i < n; i++)
                        if (strcmp(dirs[i].path, dir) == 0)
                                break;
                if (i == n) {
                        WatchDir *grown = realloc(dirs, (n + 1) * sizeof(WatchDir));
                        if (!grown) {
                                dirs_free(dirs, n);
                                return -ENOMEM;
                        }
                        dirs = grown;
                        dirs[n++] = (WatchDir){ .path = TAKE_PTR(dir) };
                }

                while (dirs[i].patterns && dirs[i].patterns[np])
                        np++;
                grown_patterns = realloc(dirs[i].patterns, (np + 2) * sizeof(char *));
                if (!grown_patterns) {
                        dirs_free(dirs, n);
                        return -ENOMEM;
                }
                dirs[i].patterns = grown_patterns;
                dirs[i].patterns[np] = strdup(slash + 1);
                dirs[i].patterns[np + 1] = NULL;
                if (!dirs[i].patterns[np]) {
                        dirs_free(dirs, n);
                        return -ENOMEM;
                }
        }

        *ret = dirs;
        *ret_n = n;
        return 0;
}

int discovery_set_globs(Discovery *d, char *const *globs) {
        WatchDir *dirs;
        size_t n;
        int r;

        if (!d)
                return -EINVAL;

        r = build_dirs(globs, &dirs, &n);
        if (r < 0)
                return r;

        dirs_free(d->dirs, d->n_dirs);
        d->dirs = dirs;
        d->n_dirs = n;

        /* Keep the sockets the new globs still match, under their new directory index. */
        for (size_t i = d->n_sockets; i > 0; i--) {
                KnownSocket *s = &d->sockets[i - 1];
                const char *slash = strrchr(s->path, '/');
                size_t dir_len = slash == s->path ? 1 : (size_t) (slash - s->path);
                bool kept = false;

                for (size_t j = 0; j < n && !kept; j++)
                        if (strlen(dirs[j].path) == dir_len && strncmp(dirs[j].path, s->path, dir_len) == 0 &&
                            dir_matches(&dirs[j], slash + 1)) {
                                s->dir = j;
                                kept = true;
                        }
                if (!kept)
                        socket_remove_at(d, i - 1);
        }

        for (size_t i = 0; i < n; i++) {
                dirs[i].owner = d;
                arm_dir(d, i);
        }
        return 0;
}

size_t discovery_count(const Discovery *d) {
        size_t n = 0;
        for (size_t i = 0; d && i < d->n_sockets; i++)
                n += !d->sockets[i].refused;
        return n;
}

void discovery_set_trust(Discovery *d, const SocketTrust *trust) {
        d->trust = trust;
        /* Judged again by the next scan (discovery_set_globs()), under the new trust. */
        for (size_t i = d->n_sockets; i > 0; i--)
                if (d->sockets[i - 1].refused)
                        socket_remove_at(d, i - 1);
}
