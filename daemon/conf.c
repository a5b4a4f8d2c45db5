/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parser and the printer share one table of keys, so every key that can be read is also
 * printed, and --check-config output reads back to the same Config. */

#include "daemon/conf.h"

#include <errno.h>
#include <inttypes.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdarg.h>
#include <ini.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/bus-api.h"
#include "common/boolean.h"
#include "common/duration.h"
#include "common/macro.h"
#include "daemon/log.h"

#ifndef RIGHTSIZE_CONF_DIR
#define RIGHTSIZE_CONF_DIR "/etc/rightsize"
#endif
/* Not derived from the prefix: it must match StateDirectory= in rightsized.service. */
#ifndef RIGHTSIZE_STATE_DIR
#define RIGHTSIZE_STATE_DIR "/var/lib/rightsize"
#endif

#define DEFAULT_HOST_RESERVE (UINT64_C(1) << 30)
#define DEFAULT_QMP_SOCKETS "/run/qemu/*.qmp"
#define DEFAULT_AGENT_PATTERN "%d/%n.qga"
#define DEFAULT_READ_GROUP RS_READ_GROUP
#define DEFAULT_LIBVIRT_URI "qemu:///system"
/* A package starts the daemon as it installs: guests nobody chose a policy for are watched and
 * estimated, not resized, until the operator says so. */
#define DEFAULT_UNMATCHED_POLICY "observe-only"
/* Policy names are file names in the policy directory (without ".conf") or presets. */
#define POLICY_NAME_MAX 63

/* The longest line config_reader() takes from inih's buffer, without the newline. */
#define CONFIG_LINE_MAX (INI_MAX_LINE - 3)

/* Group names as useradd(8) accepts them by default. */
#define GROUP_NAME_MAX 32

static const char *const shutdown_action_names[_SHUTDOWN_ACTION_COUNT] = {
        [SHUTDOWN_ACTION_KEEP] = "keep",
        [SHUTDOWN_ACTION_ESTIMATE] = "estimate",
        [SHUTDOWN_ACTION_MAX] = "max",
};

const char *shutdown_action_to_string(ShutdownAction a) {
        if (a < 0 || a >= _SHUTDOWN_ACTION_COUNT)
                return NULL;
        return shutdown_action_names[a];
}

/* The action, or -EINVAL. */
static int shutdown_action_from_string(const char *s) {
        if (!s)
                return -EINVAL;
        for (int i = 0; i < _SHUTDOWN_ACTION_COUNT; i++)
                if (strcmp(s, shutdown_action_names[i]) == 0)
                        return i;
        return -EINVAL;
}

const char *config_default_dir(void) {
        return RIGHTSIZE_CONF_DIR;
}

const char *config_default_path(void) {
        return RIGHTSIZE_CONF_DIR "/rightsized.conf";
}

/* ---- string lists (NULL-terminated arrays) ---- */

static size_t config_key_count(void); /* the key table comes with the parser below */

static void strv_free(char **l) {
        if (!l)
                return;
        for (char **p = l; *p; p++)
                free(*p);
        free(l);
}

static size_t strv_length(char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

static char **strv_new_empty(void) {
        return calloc(1, sizeof(char *));
}

static int strv_push(char ***l, const char *s) {
        size_t n = strv_length(*l);
        char *copy = strdup(s);
        char **grown;

        if (!copy)
                return -ENOMEM;
        grown = realloc(*l, (n + 2) * sizeof(char *));
        if (!grown) {
                free(copy);
                return -ENOMEM;
        }
        grown[n] = copy;
        grown[n + 1] = NULL;
        *l = grown;
        return 0;
}

static bool strv_equal(char *const *a, char *const *b) {
        size_t n = strv_length(a);

        if (n != strv_length(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (strcmp(a[i], b[i]) != 0)
                        return false;
        return true;
}

static bool streq_null(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}

/* ---- the Config object ---- */

Config *config_free(Config *c) {
        if (!c)
                return NULL;
        free(c->policy_dir);
        free(c->state_dir);
        free(c->metrics_path);
        free(c->read_group);
        strv_free(c->manage);
        strv_free(c->exclude);
        free(c->unmatched_policy);
        strv_free(c->qmp_sockets);
        free(c->agent_socket_pattern);
        strv_free(c->qemu_users);
        free(c->libvirt_uri);
        if (c->origins)
                for (size_t i = 0; i < config_key_count(); i++)
                        free(c->origins[i]);
        free(c->origins);
        free(c);
        return NULL;
}

int config_new_default(Config **ret) {
        _cleanup_(config_freep) Config *c = NULL;

        c = calloc(1, sizeof(Config));
        if (!c)
                return -ENOMEM;

        *c = (Config){
                .policy_dir = strdup(RIGHTSIZE_CONF_DIR "/policies"),
                .state_dir = strdup(RIGHTSIZE_STATE_DIR),
                .log_level = LOG_INFO,
                .host_reserve = { .relative = false, .bytes = DEFAULT_HOST_RESERVE },
                .shutdown_action = SHUTDOWN_ACTION_ESTIMATE,
                .state_stale_usec = DEFAULT_STATE_STALE_USEC,
                .state_remove_usec = DEFAULT_STATE_REMOVE_USEC,
                .read_group = strdup(DEFAULT_READ_GROUP),
                .manage = strv_new_empty(),
                .exclude = strv_new_empty(),
                .unmatched_policy = strdup(DEFAULT_UNMATCHED_POLICY),
                .qmp_sockets = strv_new_empty(),
                .agent_socket_pattern = strdup(DEFAULT_AGENT_PATTERN),
                .qemu_users = strv_new_empty(),
                .libvirt_enabled = true,
                .libvirt_uri = strdup(DEFAULT_LIBVIRT_URI),
                .libvirt_manage_all = false,
                .libvirt_agent = false,
                .libvirt_call_timeout_usec = DEFAULT_LIBVIRT_CALL_TIMEOUT_USEC,
        };
        c->origins = calloc(config_key_count(), sizeof(char *));
        if (!c->policy_dir || !c->state_dir || !c->read_group || !c->manage || !c->exclude || !c->unmatched_policy ||
            !c->qmp_sockets || !c->agent_socket_pattern || !c->qemu_users || !c->libvirt_uri || !c->origins)
                return -ENOMEM;
        if (strv_push(&c->manage, "*") < 0 || strv_push(&c->qmp_sockets, DEFAULT_QMP_SOCKETS) < 0)
                return -ENOMEM;

        *ret = TAKE_PTR(c);
        return 0;
}

bool config_equal(const Config *a, const Config *b) {
        return streq_null(a->policy_dir, b->policy_dir) && streq_null(a->state_dir, b->state_dir) &&
               a->log_level == b->log_level && size_spec_equal(&a->host_reserve, &b->host_reserve) &&
               streq_null(a->metrics_path, b->metrics_path) && a->shutdown_action == b->shutdown_action &&
               streq_null(a->read_group, b->read_group) && a->state_stale_usec == b->state_stale_usec &&
               a->state_remove_usec == b->state_remove_usec && strv_equal(a->manage, b->manage) &&
               strv_equal(a->exclude, b->exclude) && streq_null(a->unmatched_policy, b->unmatched_policy) &&
               strv_equal(a->qmp_sockets, b->qmp_sockets) && strv_equal(a->qemu_users, b->qemu_users) &&
               streq_null(a->agent_socket_pattern, b->agent_socket_pattern) &&
               a->libvirt_enabled == b->libvirt_enabled && streq_null(a->libvirt_uri, b->libvirt_uri) &&
               a->libvirt_manage_all == b->libvirt_manage_all && a->libvirt_agent == b->libvirt_agent &&
               a->libvirt_call_timeout_usec == b->libvirt_call_timeout_usec;
}

/* ---- value parsers: each returns 0, or -EINVAL with a reason for the message ---- */

typedef enum ValueType {
        VALUE_DIRECTORY,     /* absolute path, required */
        VALUE_OPTIONAL_PATH, /* absolute path, or empty for "off" */
        VALUE_LOG_LEVEL,
        VALUE_SIZE_SPEC,
        VALUE_SHUTDOWN_ACTION,
        VALUE_GROUP,         /* group name, or empty */
        VALUE_GLOB_LIST,
        VALUE_SOCKET_GLOB_LIST,
        VALUE_USER_LIST,     /* user names or uids */
        VALUE_AGENT_PATTERN, /* or empty */
        VALUE_BOOL,
        VALUE_URI,
        VALUE_CALL_TIMEOUT,  /* a duration: 1 s .. 10 min */
        VALUE_AGE,           /* a duration, 0 for never */
        VALUE_POLICY_NAME,   /* a policy file's name or a preset: letters, digits, "-", "_", "." */
} ValueType;

typedef struct ConfigKey {
        const char *section;
        const char *key;
        ValueType type;
        size_t offset;
} ConfigKey;

static const ConfigKey config_keys[] = {
        { "daemon", "policy-dir", VALUE_DIRECTORY, offsetof(Config, policy_dir) },
        { "daemon", "state-dir", VALUE_DIRECTORY, offsetof(Config, state_dir) },
        { "daemon", "log-level", VALUE_LOG_LEVEL, offsetof(Config, log_level) },
        { "daemon", "host-reserve", VALUE_SIZE_SPEC, offsetof(Config, host_reserve) },
        { "daemon", "metrics-path", VALUE_OPTIONAL_PATH, offsetof(Config, metrics_path) },
        { "daemon", "shutdown-action", VALUE_SHUTDOWN_ACTION, offsetof(Config, shutdown_action) },
        { "daemon", "read-group", VALUE_GROUP, offsetof(Config, read_group) },
        { "daemon", "state-stale-after", VALUE_AGE, offsetof(Config, state_stale_usec) },
        { "daemon", "state-remove-after", VALUE_AGE, offsetof(Config, state_remove_usec) },
        { "guests", "manage", VALUE_GLOB_LIST, offsetof(Config, manage) },
        { "guests", "exclude", VALUE_GLOB_LIST, offsetof(Config, exclude) },
        { "guests", "unmatched-policy", VALUE_POLICY_NAME, offsetof(Config, unmatched_policy) },
        { "qemu", "qmp-sockets", VALUE_SOCKET_GLOB_LIST, offsetof(Config, qmp_sockets) },
        { "qemu", "agent-socket-pattern", VALUE_AGENT_PATTERN, offsetof(Config, agent_socket_pattern) },
        { "qemu", "qemu-users", VALUE_USER_LIST, offsetof(Config, qemu_users) },
        { "libvirt", "enabled", VALUE_BOOL, offsetof(Config, libvirt_enabled) },
        { "libvirt", "uri", VALUE_URI, offsetof(Config, libvirt_uri) },
        { "libvirt", "manage-all", VALUE_BOOL, offsetof(Config, libvirt_manage_all) },
        { "libvirt", "agent", VALUE_BOOL, offsetof(Config, libvirt_agent) },
        { "libvirt", "call-timeout", VALUE_CALL_TIMEOUT, offsetof(Config, libvirt_call_timeout_usec) },
};

static const char *const section_names[] = { "daemon", "guests", "qemu", "libvirt" };

static bool is_list(ValueType t) {
        return t == VALUE_GLOB_LIST || t == VALUE_SOCKET_GLOB_LIST || t == VALUE_USER_LIST;
}

/* Tabs are allowed: they separate list items like spaces. */
static bool has_control_chars(const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
                        return true;
        return false;
}

/* "15s", "1500ms", "2min", or a plain number of seconds. */
static int parse_call_timeout(const char *v, uint64_t *ret) {
        uint64_t usec;
        int r = parse_duration(v, &usec);
        if (r < 0)
                return r;
        if (usec < LIBVIRT_CALL_TIMEOUT_MIN_USEC || usec > LIBVIRT_CALL_TIMEOUT_MAX_USEC)
                return -ERANGE;
        *ret = usec;
        return 0;
}

static bool valid_group_name(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > GROUP_NAME_MAX)
                return false;
        if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
                return false;
        for (size_t i = 1; i < n; i++) {
                char ch = s[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                      ch == '_' || ch == '-' || ch == '.' || (ch == '$' && i == n - 1)))
                        return false;
        }
        return true;
}

/* A QMP socket glob: absolute, with wildcards only in the file name, since only directories we can
 * name can be watched with inotify. */
static const char *socket_glob_problem(const char *g) {
        const char *slash = strrchr(g, '/');

        if (g[0] != '/')
                return "is not an absolute path";
        if (slash[1] == '\0')
                return "names a directory, not a socket";
        for (const char *p = g; p < slash; p++)
                if (*p == '*' || *p == '?' || *p == '[')
                        return "has wildcards in its directory part (only the file name may have them)";
        return NULL;
}

int config_agent_socket_path(const char *pattern, const char *qmp_path, char **ret) {
        _cleanup_(freep) char *out = NULL;
        size_t size = 0;
        const char *slash, *base;
        size_t base_len, name_len, dir_len;
        FILE *f;
        int r = 0;

        if (!ret || !qmp_path)
                return -EINVAL;
        if (!pattern || !*pattern) {
                *ret = NULL;
                return 0;
        }

        slash = strrchr(qmp_path, '/');
        base = slash ? slash + 1 : qmp_path;
        dir_len = slash ? (size_t) (slash - qmp_path) : 0;
        base_len = strlen(base);
        name_len = base_len;
        if (base_len > 4 && strcmp(base + base_len - 4, ".qmp") == 0)
                name_len -= 4;

        f = open_memstream(&out, &size);
        if (!f)
                return -ENOMEM;
        for (const char *p = pattern; *p && r == 0; p++) {
                if (*p != '%') {
                        fputc(*p, f);
                        continue;
                }
                switch (*++p) {
                case 'd':
                        if (slash)
                                fwrite(qmp_path, 1, dir_len == 0 ? 1 : dir_len, f); /* "/x.qmp" -> "/" */
                        else
                                fputc('.', f);
                        break;
                case 'n':
                        fwrite(base, 1, name_len, f);
                        break;
                case 'f':
                        fwrite(base, 1, base_len, f);
                        break;
                case '%':
                        fputc('%', f);
                        break;
                default:
                        r = -EINVAL; /* also a lone '%' at the end */
                        p--;
                        break;
                }
        }
        if (fclose(f) != 0)
                return -ENOMEM;
        if (r < 0)
                return r;

        *ret = TAKE_PTR(out);
        return 0;
}

static size_t config_key_count(void) {
        return ARRAY_SIZE(config_keys);
}

/* ---- the parse itself ---- */

typedef struct ParseContext {
        const char *name;          /* file name for messages */
        FILE *f;
        Config *config;
        unsigned line;             /* of the line inih is processing */
        bool line_is_continuation; /* it starts with a blank: inih folds it into the previous key */
        char *line_buf;
        size_t line_buf_size;
        unsigned first_line[ARRAY_SIZE(config_keys)]; /* where each key was first set; 0 = never */
        char *error;
        unsigned error_line;
        int error_code;
} ParseContext;

/* Records the first error (with its line) and returns its code, for `return parse_fail(...)`. */
_printf_(3, 4) static int parse_fail(ParseContext *ctx, int code, const char *format, ...) {
        _cleanup_(freep) char *what = NULL;
        va_list ap;

        if (ctx->error_code != 0)
                return code; /* the first error is the one to fix */

        va_start(ap, format);
        if (vasprintf(&what, format, ap) < 0)
                what = NULL;
        va_end(ap);

        if (asprintf(&ctx->error, "%s:%u: %s", ctx->name, ctx->line, what ?: "out of memory") < 0)
                ctx->error = NULL;
        ctx->error_code = code;
        ctx->error_line = ctx->line;
        return code;
}

/* inih's reader: counts lines (this inih is built without INI_HANDLER_LINENO), and rejects lines
 * longer than its fixed buffer instead of letting it split them into two lines silently. */
static char *config_reader(char *str, int num, void *stream) {
        ParseContext *ctx = stream;
        ssize_t n;

        if (ctx->error_code != 0)
                return NULL; /* stop at the first error */

        n = getline(&ctx->line_buf, &ctx->line_buf_size, ctx->f);
        if (n < 0)
                return NULL;
        ctx->line++;

        if (strlen(ctx->line_buf) != (size_t) n) {
                parse_fail(ctx, -EINVAL, "line contains a NUL byte");
                return NULL;
        }
        size_t content = (size_t) n;
        while (content > 0 && (ctx->line_buf[content - 1] == '\n' || ctx->line_buf[content - 1] == '\r'))
                content--;
        if (num < 3 || content > (size_t) num - 3) {
                parse_fail(ctx, -EINVAL, "line is longer than %d characters", num - 3);
                return NULL;
        }

        ctx->line_is_continuation = ctx->line_buf[0] == ' ' || ctx->line_buf[0] == '\t';
        /* Only the content and one newline: any number of trailing CRs would not fit in str
         * (inih strips them anyway). */
        memcpy(str, ctx->line_buf, content);
        str[content] = '\n';
        str[content + 1] = '\0';
        return str;
}

static int set_string(char **field, const char *value) {
        char *copy = NULL;

        if (value) {
                copy = strdup(value);
                if (!copy)
                        return -ENOMEM;
        }
        free(*field);
        *field = copy;
        return 0;
}

/* Appends the whitespace-separated words of value to a list; an empty value clears the list. */
static int parse_list_value(ParseContext *ctx, const ConfigKey *k, const char *value, char ***list) {
        _cleanup_(freep) char *copy = strdup(value);
        char *saveptr = NULL;

        if (!copy)
                return -ENOMEM;

        if (value[0] == '\0') {
                char **empty = strv_new_empty();
                if (!empty)
                        return -ENOMEM;
                strv_free(*list);
                *list = empty;
                return 0;
        }

        for (char *w = strtok_r(copy, " \t", &saveptr); w; w = strtok_r(NULL, " \t", &saveptr)) {
                if (k->type == VALUE_SOCKET_GLOB_LIST) {
                        const char *problem = socket_glob_problem(w);
                        if (problem)
                                return parse_fail(ctx, -EINVAL, "key '%s': '%s' %s", k->key, w, problem);
                }
                /* User names follow the same rules as group names (useradd(8)'s defaults). */
                if (k->type == VALUE_USER_LIST && !valid_group_name(w) && strspn(w, "0123456789") != strlen(w))
                        return parse_fail(ctx, -EINVAL, "key '%s': invalid user name '%s'", k->key, w);
                if (strv_push(list, w) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int parse_value(ParseContext *ctx, const ConfigKey *k, const char *value) {
        void *field = (char *) ctx->config + k->offset;
        int r;

        if (has_control_chars(value))
                return parse_fail(ctx, -EINVAL, "key '%s': value contains control characters", k->key);

        switch (k->type) {
        case VALUE_DIRECTORY:
                if (value[0] != '/')
                        return parse_fail(ctx, -EINVAL, "key '%s': '%s' is not an absolute path", k->key, value);
                return set_string(field, value);

        case VALUE_OPTIONAL_PATH:
                if (value[0] == '\0')
                        return set_string(field, NULL);
                if (value[0] != '/' || value[strlen(value) - 1] == '/')
                        return parse_fail(ctx, -EINVAL, "key '%s': '%s' is not an absolute file path", k->key, value);
                return set_string(field, value);

        case VALUE_LOG_LEVEL:
                r = log_level_from_string(value);
                if (r < 0)
                        return parse_fail(ctx, -EINVAL,
                                          "key '%s': invalid log level '%s' (expected err, warning, notice, info or debug)",
                                          k->key, value);
                *(int *) field = r;
                return 0;

        case VALUE_SIZE_SPEC:
                r = parse_size_spec(value, field);
                if (r == -ERANGE)
                        return parse_fail(ctx, -ERANGE, "key '%s': size out of range '%s'", k->key, value);
                if (r < 0)
                        return parse_fail(ctx, -EINVAL, "key '%s': invalid size '%s'", k->key, value);
                return 0;

        case VALUE_SHUTDOWN_ACTION:
                r = shutdown_action_from_string(value);
                if (r < 0)
                        return parse_fail(ctx, -EINVAL, "key '%s': invalid value '%s' (expected keep, estimate or max)",
                                          k->key, value);
                *(ShutdownAction *) field = r;
                return 0;

        case VALUE_POLICY_NAME:
                if (value[0] == '\0' || value[0] == '.' || strlen(value) > POLICY_NAME_MAX ||
                    strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") != strlen(value))
                        return parse_fail(ctx, -EINVAL,
                                          "key '%s': invalid policy name '%s' (a policy file's name without "
                                          "\".conf\", or a preset: observe-only, conservative, balanced, aggressive)",
                                          k->key, value);
                return set_string(field, value);

        case VALUE_GROUP:
                if (value[0] == '\0')
                        return set_string(field, NULL);
                if (!valid_group_name(value))
                        return parse_fail(ctx, -EINVAL, "key '%s': invalid group name '%s'", k->key, value);
                return set_string(field, value);

        case VALUE_GLOB_LIST:
        case VALUE_SOCKET_GLOB_LIST:
        case VALUE_USER_LIST:
                return parse_list_value(ctx, k, value, field);

        case VALUE_AGENT_PATTERN: {
                _cleanup_(freep) char *sample = NULL;

                if (value[0] == '\0')
                        return set_string(field, NULL);
                r = config_agent_socket_path(value, "/run/qemu/guest.qmp", &sample);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return parse_fail(ctx, -EINVAL,
                                          "key '%s': invalid pattern '%s' "
                                          "(known: %%d directory, %%n guest name, %%f file name, %%%%)",
                                          k->key, value);
                if (sample[0] != '/')
                        return parse_fail(ctx, -EINVAL, "key '%s': pattern '%s' does not give an absolute path",
                                          k->key, value);
                return set_string(field, value);
        }

        case VALUE_BOOL:
                if (parse_boolean(value, field) < 0)
                        return parse_fail(ctx, -EINVAL, "key '%s': invalid boolean '%s' (expected yes or no)", k->key,
                                          value);
                return 0;

        case VALUE_URI:
                if (value[0] == '\0' || strpbrk(value, " \t"))
                        return parse_fail(ctx, -EINVAL, "key '%s': invalid URI '%s'", k->key, value);
                return set_string(field, value);

        case VALUE_CALL_TIMEOUT:
                r = parse_call_timeout(value, field);
                if (r == -ERANGE)
                        return parse_fail(ctx, -ERANGE, "key '%s': '%s' out of range (1s to 10min)", k->key, value);
                if (r < 0)
                        return parse_fail(ctx, -EINVAL, "key '%s': invalid duration '%s' (expected e.g. 15s, 1500ms, 2min)",
                                          k->key, value);
                return 0;

        case VALUE_AGE:
                if (parse_duration(value, field) < 0)
                        return parse_fail(ctx, -EINVAL, "key '%s': invalid duration '%s' (expected e.g. 7d, 12h, or 0 for never)",
                                          k->key, value);
                return 0;
        }

        return -EINVAL;
}

static int config_handler(void *user, const char *section, const char *key, const char *value) {
        ParseContext *ctx = user;
        bool section_known = false;
        int r;

        if (ctx->error_code != 0)
                return 0;

        if (!section || !section[0]) {
                parse_fail(ctx, -EINVAL, "key '%s' is outside of any section", key);
                return 0;
        }

        for (size_t i = 0; i < ARRAY_SIZE(config_keys); i++) {
                const ConfigKey *k = &config_keys[i];

                if (strcmp(section, k->section) != 0)
                        continue;
                section_known = true;
                if (strcmp(key, k->key) != 0)
                        continue;

                if (ctx->first_line[i] > 0 && !is_list(k->type)) {
                        if (ctx->line_is_continuation)
                                parse_fail(ctx, -EINVAL,
                                           "key '%s': continuation lines are only allowed for lists", key);
                        else
                                parse_fail(ctx, -EINVAL, "key '%s' is set twice (first on line %u)", key,
                                           ctx->first_line[i]);
                        return 0;
                }
                if (ctx->first_line[i] == 0 && is_list(k->type)) {
                        /* The first assignment replaces the default instead of adding to it. */
                        char ***list = (char ***) ((char *) ctx->config + k->offset);
                        char **empty = strv_new_empty();
                        if (!empty) {
                                parse_fail(ctx, -ENOMEM, "out of memory");
                                return 0;
                        }
                        strv_free(*list);
                        *list = empty;
                }
                if (ctx->first_line[i] == 0) {
                        /* A later file (a drop-in) overrides an earlier one: the key is now this
                         * file's, and --check-config says so. */
                        ctx->first_line[i] = ctx->line;
                        free(ctx->config->origins[i]);
                        if (asprintf(&ctx->config->origins[i], "%s:%u", ctx->name, ctx->line) < 0) {
                                ctx->config->origins[i] = NULL;
                                parse_fail(ctx, -ENOMEM, "out of memory");
                                return 0;
                        }
                }

                r = parse_value(ctx, k, value);
                if (r == -ENOMEM)
                        parse_fail(ctx, -ENOMEM, "out of memory");
                return r < 0 ? 0 : 1;
        }

        if (!section_known)
                parse_fail(ctx, -EINVAL,
                           "key '%s' is in an unknown section [%s] (known: [daemon], [guests], [qemu], [libvirt])",
                           key, section);
        else
                parse_fail(ctx, -EINVAL, "unknown key '%s' in section [%s]", key, section);
        return 0;
}

/* Parses one file on top of what `c` holds: each key it sets replaces the earlier value (a list's
 * first assignment in this file replaces the whole list). On failure `c` may be half-changed:
 * callers parse into a Config of their own and drop it. */
static int config_parse(Config *c, FILE *f, const char *name, char **ret_error) {
        ParseContext ctx = { .name = name ?: "(config)", .f = f, .config = c };
        int r;

        r = ini_parse_stream(config_reader, &ctx, config_handler, &ctx);
        free(ctx.line_buf);

        if (r > 0 && (ctx.error_code == 0 || (unsigned) r < ctx.error_line)) {
                /* inih found a line that is neither "[section]" nor "key = value", before any
                 * error of ours: that one comes first ("[daemon" makes the next key sectionless). */
                free(ctx.error);
                ctx.error = NULL;
                ctx.error_code = 0;
                ctx.line = (unsigned) r;
                parse_fail(&ctx, -EINVAL, "syntax error, expected '[section]' or 'key = value'");
        } else if (ctx.error_code == 0 && r < 0) {
                parse_fail(&ctx, -ENOMEM, "out of memory");
        } else if (ctx.error_code == 0 && ferror(f)) {
                parse_fail(&ctx, -EIO, "read error");
        }

        if (ctx.error_code != 0) {
                if (ret_error)
                        *ret_error = TAKE_PTR(ctx.error); /* NULL only if even the message had no memory */
                free(ctx.error);
                return ctx.error_code;
        }
        return 0;
}

int config_load_file(FILE *f, const char *name, Config **ret, char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        int r;

        if (!f || !ret)
                return -EINVAL;

        r = config_new_default(&c);
        if (r < 0)
                return r;
        r = config_parse(c, f, name, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

/* No drop-in directory is fine; one that exists but cannot be read stops the load. */
static int dropin_dir_error(const char *path _unused_, int error) {
        return error != ENOENT && error != ENOTDIR;
}

int config_fail(char **ret_error, int code, const char *format, ...) {
        va_list ap;

        if (!ret_error)
                return code;
        va_start(ap, format);
        if (vasprintf(ret_error, format, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return code;
}

static int config_parse_path(Config *c, const char *path, bool missing_ok, char **ret_error) {
        FILE *f;
        int r;

        f = fopen(path, "re");
        if (!f) {
                r = -errno;
                if (r == -ENOENT && missing_ok)
                        return 0;
                return config_fail(ret_error, r, "%s: cannot open: %s", path, strerror(-r));
        }
        r = config_parse(c, f, path, ret_error);
        fclose(f);
        return r;
}

int config_load(const char *path, bool missing_ok, Config **ret, char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *pattern = NULL;
        glob_t files = {};
        int r;

        if (!path || !ret)
                return -EINVAL;

        r = config_new_default(&c);
        if (r < 0)
                return r;
        r = config_parse_path(c, path, missing_ok, ret_error);
        if (r < 0)
                return r;

        /* Then the *.conf files of PATH.d in name order, as systemd reads its drop-ins: a package owns
         * the main file, the administrator's changes live beside it and survive upgrades. */
        if (asprintf(&pattern, "%s.d/*.conf", path) < 0)
                return -ENOMEM;
        r = glob(pattern, 0, dropin_dir_error, &files);
        if (r == GLOB_NOSPACE) {
                globfree(&files);
                return -ENOMEM;
        }
        if (r == GLOB_ABORTED) {
                /* A drop-in directory that exists but cannot be read must not be skipped silently. */
                globfree(&files);
                return config_fail(ret_error, -EIO, "%s.d: cannot read the directory", path);
        }
        for (size_t i = 0; r == 0 && i < files.gl_pathc; i++) {
                r = config_parse_path(c, files.gl_pathv[i], false, ret_error);
                if (r < 0)
                        break;
        }
        globfree(&files);
        if (r < 0 && r != GLOB_NOMATCH)
                return r;

        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- printing ---- */

static void print_value(const Config *c, const ConfigKey *k, FILE *f) {
        const void *field = (const char *) c + k->offset;
        char buf[FORMAT_SIZE_MAX];

        switch (k->type) {
        case VALUE_DIRECTORY:
        case VALUE_OPTIONAL_PATH:
        case VALUE_GROUP:
        case VALUE_POLICY_NAME:
        case VALUE_AGENT_PATTERN:
        case VALUE_URI:
                fputs(*(char *const *) field ?: "", f);
                break;
        case VALUE_LOG_LEVEL:
                fputs(log_level_to_string(*(const int *) field) ?: "info", f);
                break;
        case VALUE_SIZE_SPEC:
                fputs(format_size_spec(buf, sizeof(buf), field), f);
                break;
        case VALUE_SHUTDOWN_ACTION:
                fputs(shutdown_action_to_string(*(const ShutdownAction *) field) ?: "estimate", f);
                break;
        case VALUE_GLOB_LIST:
        case VALUE_SOCKET_GLOB_LIST:
        case VALUE_USER_LIST: {
                char *const *l = *(char **const *) field;
                for (size_t i = 0; l && l[i]; i++)
                        fprintf(f, "%s%s", i > 0 ? " " : "", l[i]);
                break;
        }
        case VALUE_BOOL:
                fputs(*(const bool *) field ? "yes" : "no", f);
                break;
        case VALUE_CALL_TIMEOUT: {
                uint64_t usec = *(const uint64_t *) field;
                if (usec % USEC_PER_SEC == 0)
                        fprintf(f, "%" PRIu64 "s", usec / USEC_PER_SEC);
                else
                        fprintf(f, "%" PRIu64 "ms", usec / USEC_PER_MSEC);
                break;
        }
        case VALUE_AGE: {
                uint64_t usec = *(const uint64_t *) field, day = 24 * 3600 * USEC_PER_SEC;
                if (usec % day == 0)
                        fprintf(f, "%" PRIu64 "d", usec / day);
                else if (usec % USEC_PER_SEC == 0)
                        fprintf(f, "%" PRIu64 "s", usec / USEC_PER_SEC);
                else
                        fprintf(f, "%" PRIu64 "us", usec);
                break;
        }
        }
}

/* "key = a b c" in lines the reader takes back: a list may be longer than one line (read from
 * continuation lines or from repeated keys), so it goes on indented continuation lines, or on
 * repeated "key = ..." lines for words that cannot follow a space (";x" would be a comment, so
 * it needs "key=;x") or start a continuation line ("#x", ";x": comment lines). Such words came
 * from a "key=..." line, so they fit on one. */
static void print_list_line(const char *key, char *const *l, FILE *f) {
        size_t key_len = strlen(key), column = 0;

        if (!l || !l[0]) {
                fprintf(f, "%s =\n", key);
                return;
        }
        for (size_t i = 0; l[i]; i++) {
                size_t n = strlen(l[i]);
                bool comment = strchr("#;", l[i][0]);

                if (i > 0 && l[i][0] != ';' && column + 1 + n <= CONFIG_LINE_MAX) {
                        fputc(' ', f);
                        column++;
                } else if (i > 0 && !comment) {
                        fputs("\n\t", f);
                        column = 1;
                } else {
                        if (i > 0)
                                fputc('\n', f);
                        if (l[i][0] != ';' && key_len + 3 + n <= CONFIG_LINE_MAX) {
                                fprintf(f, "%s = ", key);
                                column = key_len + 3;
                        } else if (key_len + 1 + n <= CONFIG_LINE_MAX || comment) {
                                fprintf(f, "%s=", key);
                                column = key_len + 1;
                        } else {
                                /* The first word, too long even for "key=": an empty first value,
                                 * then the word on a continuation line. */
                                fprintf(f, "%s =\n\t", key);
                                column = 1;
                        }
                }
                fputs(l[i], f);
                column += n;
        }
        fputc('\n', f);
}

int config_print(const Config *c, bool origins, FILE *f) {
        if (!c || !f)
                return -EINVAL;

        for (size_t s = 0; s < ARRAY_SIZE(section_names); s++) {
                fprintf(f, "%s[%s]\n", s > 0 ? "\n" : "", section_names[s]);
                for (size_t i = 0; i < ARRAY_SIZE(config_keys); i++) {
                        _cleanup_(freep) char *value = NULL;
                        size_t size = 0;
                        FILE *v;

                        if (strcmp(config_keys[i].section, section_names[s]) != 0)
                                continue;
                        if (origins && c->origins && c->origins[i])
                                fprintf(f, "# %s\n", c->origins[i]); /* which file set it */
                        if (is_list(config_keys[i].type)) {
                                print_list_line(config_keys[i].key,
                                                *(char **const *) ((const char *) c + config_keys[i].offset), f);
                                continue;
                        }

                        v = open_memstream(&value, &size);
                        if (!v)
                                return -ENOMEM;
                        print_value(c, &config_keys[i], v);
                        if (fclose(v) != 0)
                                return -ENOMEM;

                        /* "key =" with nothing after it reads back as empty; "key=value" when
                         * the spaces would make the line longer than the reader takes, or the
                         * value would read as a comment after a space (";..."). */
                        fprintf(f, "%s%s%s\n", config_keys[i].key,
                                size == 0 ? " ="
                                : value[0] == ';' || strlen(config_keys[i].key) + 3 + size > CONFIG_LINE_MAX
                                        ? "="
                                        : " = ",
                                value);
                }
        }

        fflush(f);
        return ferror(f) ? -EIO : 0;
}

/* ---- matching ---- */

static bool matches_any(char *const *globs, const char *name, const char *uuid) {
        for (size_t i = 0; globs && globs[i]; i++) {
                if (name && fnmatch(globs[i], name, 0) == 0)
                        return true;
                if (uuid && *uuid && fnmatch(globs[i], uuid, FNM_CASEFOLD) == 0)
                        return true;
        }
        return false;
}

bool config_guest_is_managed(const Config *c, const char *name, const char *uuid) {
        return matches_any(c->manage, name, uuid) && !matches_any(c->exclude, name, uuid);
}
