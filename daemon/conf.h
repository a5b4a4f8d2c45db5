/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* rightsized.conf: the daemon's settings, parsed strictly. A reload parses into a fresh Config and
 * the caller swaps it in only on success, so a bad edit never disturbs a running daemon. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/macro.h"
#include "common/size.h"

/* What guests are left at when the daemon stops. */
typedef enum ShutdownAction {
        SHUTDOWN_ACTION_KEEP,     /* the targets they have now */
        SHUTDOWN_ACTION_ESTIMATE, /* their estimate plus margin */
        SHUTDOWN_ACTION_MAX,      /* their configured maximum */
        _SHUTDOWN_ACTION_COUNT,
} ShutdownAction;

const char *shutdown_action_to_string(ShutdownAction a);

typedef struct Config {
        /* [daemon] */
        char *policy_dir;
        char *state_dir;
        int log_level;                 /* syslog priority, LOG_ERR .. LOG_DEBUG */
        SizeSpec host_reserve;         /* bytes, or a share of host RAM */
        char *metrics_path;            /* NULL: no metrics file */
        ShutdownAction shutdown_action;
        char *read_group;              /* NULL: reads are root-only too */
        uint64_t state_stale_usec;     /* a state file older than this: its sizes are not trusted (0: never) */
        uint64_t state_remove_usec;    /* an absent guest's state file older than this is removed (0: never) */

        /* [guests]: fnmatch() globs matched against guest names and UUIDs. */
        char **manage;                 /* NULL-terminated, never NULL itself */
        char **exclude;
        char *unmatched_policy;        /* the policy of a managed guest no policy file matches */

        /* [qemu] */
        char **qmp_sockets;            /* absolute paths; wildcards only in the last component */
        char *agent_socket_pattern;    /* NULL: no guest agent; see config_agent_socket_path() */
        char **qemu_users;             /* user names or uids whose QMP sockets are guests, besides root's */

        /* [libvirt] */
        bool libvirt_enabled;
        char *libvirt_uri;
        bool libvirt_manage_all;
        bool libvirt_agent;            /* /proc/vmstat + PSI through the guest agent (taints) */
        uint64_t libvirt_call_timeout_usec; /* a libvirt call running this long gets the connection cut */

        /* Where each key was last set ("FILE:LINE"; NULL: the default), in the order of the key
         * table in conf.c: --check-config prints it. Not compared by config_equal(). */
        char **origins;
} Config;

/* A week: a hold resumed after longer would be a guess about a workload nobody watched. */
#define DEFAULT_STATE_STALE_USEC (7 * 24 * 3600 * UINT64_C(1000000))
/* A quarter: a guest off that long is most likely gone, and its operator's pause or overrides
 * with it. */
#define DEFAULT_STATE_REMOVE_USEC (90 * 24 * 3600 * UINT64_C(1000000))

#define DEFAULT_LIBVIRT_CALL_TIMEOUT_USEC (15 * UINT64_C(1000000))
#define LIBVIRT_CALL_TIMEOUT_MIN_USEC (1 * UINT64_C(1000000))
#define LIBVIRT_CALL_TIMEOUT_MAX_USEC (600 * UINT64_C(1000000))

/* Where the configuration lives, as the build configured it: $(sysconfdir)/rightsize, and the
 * rightsized.conf in it. */
const char *config_default_dir(void);
const char *config_default_path(void);

/* A Config holding every default. */
int config_new_default(Config **ret);
Config *config_free(Config *c);
static inline void config_freep(Config **c) {
        if (*c)
                config_free(*c);
}

/* Parses `path` on top of the defaults, then the drop-ins `path`.d/NAME.conf in name order, as
 * systemd reads its own: a key a later file sets replaces the earlier value (a list's first
 * assignment in a file replaces the whole list). On failure returns -errno, leaves *ret untouched
 * and, if ret_error is given, sets it to a message naming file, line and key, e.g.
 * "/etc/rightsize/rightsized.conf:12: key 'host-reserve': invalid size 'lots'".
 * With missing_ok, a main file that does not exist counts as empty (the drop-ins still apply). */
int config_load(const char *path, bool missing_ok, Config **ret, char **ret_error);

/* The same from an open stream; `name` is used in messages. */
int config_load_file(FILE *f, const char *name, Config **ret, char **ret_error);

/* For the loaders' `return config_fail(ret_error, -errno, ...)`: sets *ret_error (when ret_error
 * is given) to the message, or to NULL without memory, and returns code. */
int config_fail(char **ret_error, int code, const char *format, ...) _printf_(3, 4);

/* Writes every setting, defaults included, in the syntax config_load() reads back; with
 * `origins`, a comment line "# FILE:LINE" above each key a file set. */
int config_print(const Config *c, bool origins, FILE *f);

bool config_equal(const Config *a, const Config *b);

/* Whether a guest is to be managed: it matches a [guests] manage glob by name or UUID, and no
 * exclude glob. `uuid` may be NULL. */
bool config_guest_is_managed(const Config *c, const char *name, const char *uuid);

/* Expands agent-socket-pattern for a guest's QMP socket: %d is the socket's directory, %n the
 * guest name (file name without ".qmp"), %f the socket's file name, %% a '%'.
 * Returns 0 with *ret = NULL when no pattern is configured. */
int config_agent_socket_path(const char *pattern, const char *qmp_path, char **ret);
