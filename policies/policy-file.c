/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Policy files through inih. Kept apart from policy.c so the rest of policies/ stays free
 * of I/O. */
#include "policies/policy-file.h"

#include <dirent.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/boolean.h"
#include "common/duration.h"
#include "common/macro.h"
#include "common/size.h"

/* inih does not pass line numbers to handlers unless built to: count them in the reader,
 * which inih calls once per line right before handling that line. */
typedef struct LineReader {
        const char *text; /* string input, or NULL */
        FILE *f;
        unsigned line;
} LineReader;

#define KEY_LINES_MAX 32

typedef struct ParseState {
        RsPolicy policy;
        LineReader *reader;
        unsigned error_line;
        struct {
                char key[32];
                unsigned line;
        } key_lines[KEY_LINES_MAX]; /* where each key was set, for whole-policy checks */
        size_t n_key_lines;
        RsPolicyError *err;
        bool failed;
        bool seen_key;
        char bad_key[64];
        char message[160];
} ParseState;

_printf_(3, 4) static int fail(ParseState *st, const char *key, const char *fmt, ...) {
        va_list ap;

        if (st->failed)
                return 0; /* the first error is the one reported */
        st->failed = true;
        st->error_line = st->reader ? st->reader->line : 0;
        snprintf(st->bad_key, sizeof(st->bad_key), "%s", key ? key : "");
        va_start(ap, fmt);
        vsnprintf(st->message, sizeof(st->message), fmt, ap);
        va_end(ap);
        return 0;
}

static int set_size(ParseState *st, const char *key, const char *value, uint64_t *field) {
        if (parse_size(value, field) < 0)
                return fail(st, key, "invalid size \"%s\" (a number with an optional K/M/G/T suffix)", value);
        return 1;
}

static int set_duration(ParseState *st, const char *key, const char *value, uint64_t *field) {
        if (parse_duration(value, field) < 0)
                return fail(st, key, "invalid duration \"%s\" (e.g. 10s, 500ms, 5min)", value);
        return 1;
}

static int set_percent(ParseState *st, const char *key, const char *value, double *field) {
        if (rs_parse_percent(value, field) < 0)
                return fail(st, key, "invalid percentage \"%s\"", value);
        return 1;
}

static int handler(void *user, const char *section, const char *name, const char *value) {
        ParseState *st = user;
        RsPolicy *p = &st->policy;
        int r;

        if (!section || strcmp(section, "policy") != 0)
                return fail(st, name, "unknown section [%s] (only [policy] is known)", section ? section : "");
        if (!name)
                return 1; /* a bare section header */
        if (!value)
                return fail(st, name, "missing value");

        if (st->n_key_lines < KEY_LINES_MAX && strlen(name) < sizeof(st->key_lines[0].key)) {
                snprintf(st->key_lines[st->n_key_lines].key, sizeof(st->key_lines[0].key), "%s", name);
                st->key_lines[st->n_key_lines++].line = st->reader ? st->reader->line : 0;
        }

        if (strcmp(name, "preset") == 0) {
                if (st->seen_key)
                        return fail(st, name, "preset must come before every other key");
                char keep_name[RS_POLICY_NAME_MAX];
                snprintf(keep_name, sizeof(keep_name), "%s", p->name);
                if (rs_policy_preset(value, p) < 0)
                        return fail(st, name, "unknown preset \"%s\"", value);
                snprintf(p->name, sizeof(p->name), "%s", keep_name);
                st->seen_key = true;
                return 1;
        }
        st->seen_key = true;

        if (strcmp(name, "match") == 0) {
                if (strlen(value) >= sizeof(p->match))
                        return fail(st, name, "too long (at most %zu characters)", sizeof(p->match) - 1);
                snprintf(p->match, sizeof(p->match), "%s", value);
        } else if (strcmp(name, "mode") == 0) {
                r = rs_mode_from_string(value);
                if (r < 0)
                        return fail(st, name, "invalid mode \"%s\" (observe, rightsize, on-host-pressure)", value);
                p->mode = r;
        } else if (strcmp(name, "poll-interval") == 0)
                return set_duration(st, name, value, &p->poll_interval_usec);
        else if (strcmp(name, "floor") == 0)
                return set_size(st, name, value, &p->floor_bytes);
        else if (strcmp(name, "floor-percent") == 0)
                return set_percent(st, name, value, &p->floor_percent);
        else if (strcmp(name, "max") == 0)
                return set_size(st, name, value, &p->max_bytes);
        else if (strcmp(name, "margin") == 0)
                return set_percent(st, name, value, &p->margin_percent);
        else if (strcmp(name, "probe-step-min") == 0)
                return set_percent(st, name, value, &p->probe_step_min_percent);
        else if (strcmp(name, "probe-step-max") == 0)
                return set_percent(st, name, value, &p->probe_step_max_percent);
        else if (strcmp(name, "hold-time") == 0)
                return set_duration(st, name, value, &p->hold_usec);
        else if (strcmp(name, "refault-sensitivity") == 0) {
                r = rs_sensitivity_from_string(value);
                if (r < 0)
                        return fail(st, name, "invalid sensitivity \"%s\" (low, medium, high)", value);
                p->refault_sensitivity = r;
        } else if (strcmp(name, "actuator") == 0) {
                r = rs_actuator_from_string(value);
                if (r < 0)
                        return fail(st, name, "invalid actuator \"%s\" (balloon, virtio-mem, both)", value);
                p->actuator = r;
        } else if (strcmp(name, "shares") == 0) {
                char *end;
                errno = 0;
                unsigned long long v = strtoull(value, &end, 10);
                if (errno != 0 || end == value || *end != '\0' || value[0] == '-')
                        return fail(st, name, "invalid shares \"%s\" (a positive integer)", value);
                p->shares = v;
        } else if (strcmp(name, "change-cap-percent") == 0)
                return set_percent(st, name, value, &p->change_cap_percent);
        else if (strcmp(name, "change-cap") == 0)
                return set_size(st, name, value, &p->change_cap_bytes);
        else if (strcmp(name, "dead-band") == 0)
                return set_size(st, name, value, &p->dead_band_bytes);
        else if (strcmp(name, "allow-dimm") == 0) {
                if (parse_boolean(value, &p->allow_dimm) < 0)
                        return fail(st, name, "invalid boolean \"%s\" (yes or no)", value);
        } else if (strcmp(name, "guest-agent") == 0) {
                if (parse_boolean(value, &p->guest_agent) < 0)
                        return fail(st, name, "invalid boolean \"%s\" (yes or no)", value);
        } else if (strcmp(name, "qemu-monitor") == 0) {
                if (parse_boolean(value, &p->qemu_monitor) < 0)
                        return fail(st, name, "invalid boolean \"%s\" (yes or no)", value);
        } else if (strcmp(name, "hugepage-repair") == 0) {
                bool on;
                double v;
                if (parse_boolean(value, &on) == 0)
                        p->hugepage_repair_percent = on ? RS_HUGEPAGE_REPAIR_DEFAULT : 0;
                else if (rs_parse_percent(value, &v) == 0 && v >= 50 && v <= 100)
                        p->hugepage_repair_percent = v;
                else
                        return fail(st, name, "invalid value \"%s\" (a percentage from 50 to 100, yes or no)", value);
        } else if (strcmp(name, "controller") == 0) {
                r = rs_core_from_string(value);
                if (r < 0)
                        return fail(st, name, "invalid controller \"%s\" (probe, cost)", value);
                p->core = r;
        } else if (strcmp(name, "cost-target") == 0)
                return set_percent(st, name, value, &p->cost_target_percent);
        else if (strcmp(name, "cost-window") == 0)
                return set_duration(st, name, value, &p->cost_window_usec);
        else if (strcmp(name, "tighten-rate") == 0)
                return set_percent(st, name, value, &p->tighten_percent_per_min);
        else if (strcmp(name, "loosen-rate") == 0)
                return set_percent(st, name, value, &p->loosen_percent_per_sec);
        else if (strcmp(name, "loosen-rate-max") == 0)
                return set_percent(st, name, value, &p->loosen_max_percent_per_sec);
        else if (strcmp(name, "fault-latency") == 0)
                return set_duration(st, name, value, &p->fault_latency_usec);
        else if (strcmp(name, "verdict-expiry") == 0)
                return set_duration(st, name, value, &p->verdict_expiry_usec);
        else
                return fail(st, name, "unknown key");
        return 1;
}

static void fill_error(RsPolicyError *err, const char *filename, unsigned line, const char *key, const char *message) {
        if (!err)
                return;
        *err = (RsPolicyError) { .line = line };
        snprintf(err->file, sizeof(err->file), "%s", filename ? filename : "");
        snprintf(err->key, sizeof(err->key), "%s", key ? key : "");
        snprintf(err->message, sizeof(err->message), "%s", message);
}

/* The policy's name: the file name without directory and ".conf". */
static void name_from_file(const char *filename, char *buf, size_t size) {
        const char *base = filename ? strrchr(filename, '/') : NULL;
        base = base ? base + 1 : filename ? filename : "";
        size_t n = strlen(base);
        if (n > 5 && strcmp(base + n - 5, ".conf") == 0)
                n -= 5;
        snprintf(buf, size, "%.*s", (int) MIN(n, size - 1), base);
}

/* Whether nothing is left: feof() is not set yet when the last read ended exactly at the end. */
static bool at_eof(FILE *f) {
        int c = getc(f);

        if (c == EOF)
                return true;
        ungetc(c, f);
        return false;
}

static char *read_line(char *str, int num, void *stream) {
        LineReader *r = stream;

        if (num <= 1)
                return NULL;
        if (r->f) {
                if (!fgets(str, num, r->f))
                        return NULL;
        } else {
                if (!r->text || *r->text == '\0')
                        return NULL;
                const char *nl = strchr(r->text, '\n');
                size_t len = nl ? (size_t) (nl - r->text) + 1 : strlen(r->text);
                size_t n = MIN(len, (size_t) num - 1);
                memcpy(str, r->text, n);
                str[n] = '\0';
                r->text += n;
        }
        if (strchr(str, '\n') || (r->f ? at_eof(r->f) : *r->text == '\0'))
                r->line++;
        return str;
}

/* The last line that set a key, 0 when it was not set in the file (a default or preset). */
static unsigned line_of(const ParseState *st, const char *key) {
        unsigned line = 0;
        for (size_t i = 0; i < st->n_key_lines; i++)
                if (strcmp(st->key_lines[i].key, key) == 0)
                        line = st->key_lines[i].line;
        return line;
}

static int run(ParseState *st, LineReader *reader, const char *filename, RsPolicy *ret, RsPolicyError *err) {
        const char *bad_key = NULL;

        st->reader = reader;
        int ini_r = ini_parse_stream(read_line, reader, handler, st);
        if (ini_r > 0 || st->failed) {
                /* A handler error carries its own line; otherwise inih found a line it
                 * could not parse at all. */
                fill_error(err, filename, st->failed ? st->error_line : (unsigned) ini_r, st->failed ? st->bad_key : "",
                           st->failed ? st->message : "syntax error (expected \"key = value\" or \"[section]\")");
                return -EINVAL;
        }
        if (ini_r < 0) {
                fill_error(err, filename, 0, "", "out of memory");
                return -ENOMEM;
        }
        if (rs_policy_validate(&st->policy, &bad_key) < 0) {
                char msg[160];
                const char *range = rs_policy_key_range(bad_key);
                snprintf(msg, sizeof(msg), "value out of range%s%s%s", range ? " (" : "", range ?: "", range ? ")" : "");
                fill_error(err, filename, line_of(st, bad_key), bad_key, msg);
                return -EINVAL;
        }
        *ret = st->policy;
        return 0;
}

static void state_init(ParseState *st, const char *filename) {
        *st = (ParseState) {};
        rs_policy_init(&st->policy);
        name_from_file(filename, st->policy.name, sizeof(st->policy.name));
}

int rs_policy_parse_string(const char *text, const char *filename, RsPolicy *ret, RsPolicyError *err) {
        LineReader reader = { .text = text };
        ParseState st;

        state_init(&st, filename);
        return run(&st, &reader, filename, ret, err);
}

int rs_policy_file_load(const char *path, RsPolicy *ret, RsPolicyError *err) {
        LineReader reader = {};
        ParseState st;
        int r;

        reader.f = fopen(path, "re");
        if (!reader.f) {
                int e = errno;
                char msg[160];
                snprintf(msg, sizeof(msg), "cannot open: %s", strerror(e));
                fill_error(err, path, 0, "", msg);
                return -e;
        }
        state_init(&st, path);
        r = run(&st, &reader, path, ret, err);
        fclose(reader.f);
        return r;
}

const char *rs_policy_error_format(const RsPolicyError *e, char *buf, size_t size) {
        if (e->line > 0)
                snprintf(buf, size, "%s:%u: %s%s%s", e->file, e->line, e->key, e->key[0] ? ": " : "", e->message);
        else
                snprintf(buf, size, "%s: %s%s%s", e->file, e->key, e->key[0] ? ": " : "", e->message);
        return buf;
}

static int compare_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static const RsPolicy *find_by_name(const RsPolicySet *set, const char *name) {
        for (size_t i = 0; i < set->n; i++)
                if (strcmp(set->policies[i].name, name) == 0)
                        return &set->policies[i];
        return NULL;
}

int rs_policy_set_load_dir(RsPolicySet *set, const char *dir, rs_policy_error_fn on_error, void *userdata) {
        _cleanup_(freep) char **names = NULL;
        _cleanup_(freep) RsPolicy *loaded = NULL;
        size_t n_names = 0, n_loaded = 0;
        int failures = 0;
        DIR *d;
        struct dirent *de;

        d = opendir(dir);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                size_t len = strlen(de->d_name);
                if (de->d_name[0] == '.' || len <= 5 || strcmp(de->d_name + len - 5, ".conf") != 0)
                        continue;
                char **nn = realloc(names, (n_names + 1) * sizeof(char *));
                if (!nn)
                        goto oom;
                names = nn;
                names[n_names] = strdup(de->d_name);
                if (!names[n_names])
                        goto oom;
                n_names++;
        }
        closedir(d);
        d = NULL;
        /* An empty directory leaves names NULL, which qsort() must not get even for 0 items. */
        if (n_names > 0)
                qsort(names, n_names, sizeof(char *), compare_names);

        loaded = calloc(MAX(n_names, (size_t) 1), sizeof(RsPolicy));
        if (!loaded)
                goto oom;
        for (size_t i = 0; i < n_names; i++) {
                char path[4096];
                RsPolicyError err;
                snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
                if (rs_policy_file_load(path, &loaded[n_loaded], &err) >= 0) {
                        n_loaded++;
                        continue;
                }
                failures++;
                if (on_error)
                        on_error(&err, userdata);
                /* Keep what this file said last time it was valid. */
                char name[RS_POLICY_NAME_MAX];
                name_from_file(names[i], name, sizeof(name));
                const RsPolicy *old = find_by_name(set, name);
                if (old)
                        loaded[n_loaded++] = *old;
        }

        for (size_t i = 0; i < n_names; i++)
                free(names[i]);
        free(set->policies);
        set->policies = TAKE_PTR(loaded);
        set->n = n_loaded;
        return failures;

oom:
        if (d)
                closedir(d);
        for (size_t i = 0; i < n_names; i++)
                free(names[i]);
        return -ENOMEM;
}

const RsPolicy *rs_policy_set_select(const RsPolicySet *set, const char *name, const char *uuid) {
        return rs_policy_select(set->policies, set->n, name, uuid);
}

void rs_policy_set_clear(RsPolicySet *set) {
        free(set->policies);
        *set = (RsPolicySet) {};
}
