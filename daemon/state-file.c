/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The file is written by us, but it sits on disk across crashes, upgrades and an admin's editor,
 * so loading treats it as untrusted: every field is checked for presence, type and range. */

#include "daemon/state-file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/fileio.h"
#include "daemon/log.h"

#define STATE_FORMAT_NAME "rightsize-guest-state"
#define STATE_JSON_DEPTH_MAX 4
/* Longest escaped file name we create; leaves room for ".json" and the temp-file decoration. */
#define STATE_FILE_NAME_MAX 200

static void json_putp(json_object **o) {
        if (*o)
                json_object_put(*o);
}

static bool valid_key(const char *key) {
        size_t n = key ? strlen(key) : 0;

        if (n == 0 || n >= STATE_KEY_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((key[i] >= 'a' && key[i] <= 'z') || (key[i] >= '0' && key[i] <= '9') || key[i] == '_'))
                        return false;
        return true;
}

static bool valid_uuid(const char *s) {
        if (strlen(s) != STATE_UUID_LEN)
                return false;
        for (size_t i = 0; i < STATE_UUID_LEN; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                char c = s[i];
                if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
                        return false;
        }
        return true;
}

static bool valid_state_text(const char *s) {
        size_t n = strlen(s);

        if (n >= STATE_TEXT_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || s[i] == 0x7f)
                        return false;
        return true;
}

int guest_state_init(GuestStateRecord *r, const char *name, const char *uuid) {
        if (!r || !name || !name[0])
                return -EINVAL;
        if (strlen(name) > STATE_NAME_MAX)
                return -ENAMETOOLONG;
        if (uuid && uuid[0] && !valid_uuid(uuid))
                return -EINVAL;

        memset(r, 0, sizeof(*r));
        strcpy(r->name, name);
        if (uuid)
                strcpy(r->uuid, uuid);
        return 0;
}

static StateField *field_slot(GuestStateRecord *r, const char *key) {
        for (size_t i = 0; i < r->n_fields; i++)
                if (strcmp(r->fields[i].key, key) == 0)
                        return &r->fields[i];
        if (r->n_fields >= STATE_FIELDS_MAX)
                return NULL;
        StateField *f = &r->fields[r->n_fields++];
        memset(f, 0, sizeof(*f));
        strcpy(f->key, key);
        return f;
}

int guest_state_set_int(GuestStateRecord *r, const char *key, int64_t value) {
        StateField *f;

        if (!r || !valid_key(key))
                return -EINVAL;
        f = field_slot(r, key);
        if (!f)
                return -E2BIG;
        f->type = STATE_VALUE_INT;
        f->i = value;
        return 0;
}

int guest_state_set_double(GuestStateRecord *r, const char *key, double value) {
        StateField *f;

        if (!r || !valid_key(key) || !isfinite(value))
                return -EINVAL;
        f = field_slot(r, key);
        if (!f)
                return -E2BIG;
        f->type = STATE_VALUE_DOUBLE;
        f->d = value;
        return 0;
}

static const StateField *field_find(const GuestStateRecord *r, const char *key) {
        for (size_t i = 0; r && key && i < r->n_fields; i++)
                if (strcmp(r->fields[i].key, key) == 0)
                        return &r->fields[i];
        return NULL;
}

int guest_state_get_int(const GuestStateRecord *r, const char *key, int64_t *ret) {
        const StateField *f = field_find(r, key);

        if (!f)
                return -ENOENT;
        if (f->type != STATE_VALUE_INT)
                return -EINVAL;
        *ret = f->i;
        return 0;
}

int guest_state_get_double(const GuestStateRecord *r, const char *key, double *ret) {
        const StateField *f = field_find(r, key);

        if (!f)
                return -ENOENT;
        *ret = f->type == STATE_VALUE_INT ? (double) f->i : f->d;
        return 0;
}

/* ---- JSON ---- */

static int add(json_object *obj, const char *key, json_object *value) {
        if (!value)
                return -ENOMEM;
        if (json_object_object_add(obj, key, value) < 0) {
                json_object_put(value);
                return -ENOMEM;
        }
        return 0;
}

int guest_state_to_json(const GuestStateRecord *r, char **ret) {
        _cleanup_(json_putp) json_object *doc = NULL;
        json_object *snapshot;
        const char *text;
        int e = 0;

        if (!r || !ret || !r->name[0] || r->n_fields > STATE_FIELDS_MAX)
                return -EINVAL;
        if (r->saved_at_usec > INT64_MAX || r->target_bytes > INT64_MAX)
                return -ERANGE;

        doc = json_object_new_object();
        snapshot = json_object_new_object();
        if (!doc || !snapshot) {
                if (snapshot)
                        json_object_put(snapshot);
                return -ENOMEM;
        }

        e |= add(doc, "format", json_object_new_string(STATE_FORMAT_NAME));
        e |= add(doc, "version", json_object_new_int(STATE_FILE_VERSION));
        e |= add(doc, "name", json_object_new_string(r->name));
        e |= add(doc, "uuid", json_object_new_string(r->uuid));
        e |= add(doc, "state", json_object_new_string(r->state));
        e |= add(doc, "saved_at_usec", json_object_new_int64((int64_t) r->saved_at_usec));
        e |= add(doc, "target_bytes", json_object_new_int64((int64_t) r->target_bytes));
        for (size_t i = 0; i < r->n_fields; i++) {
                const StateField *f = &r->fields[i];
                if (!valid_key(f->key) || (f->type == STATE_VALUE_DOUBLE && !isfinite(f->d))) {
                        json_object_put(snapshot);
                        return -EINVAL;
                }
                e |= add(snapshot, f->key,
                         f->type == STATE_VALUE_INT ? json_object_new_int64(f->i) : json_object_new_double(f->d));
        }
        e |= add(doc, "snapshot", snapshot);
        if (e != 0)
                return -ENOMEM;

        text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text)
                return -ENOMEM;
        if (asprintf(ret, "%s\n", text) < 0)
                return -ENOMEM;
        return 0;
}

/* A required string member no longer than max-1 bytes, without NUL bytes inside. */
static int get_string(json_object *doc, const char *key, size_t max, const char **ret) {
        json_object *o;

        if (!json_object_object_get_ex(doc, key, &o) || !json_object_is_type(o, json_type_string))
                return -EBADMSG;
        if ((size_t) json_object_get_string_len(o) >= max ||
            strlen(json_object_get_string(o)) != (size_t) json_object_get_string_len(o))
                return -EBADMSG;
        *ret = json_object_get_string(o);
        return 0;
}

/* An integer that fits int64 exactly: json-c saturates larger ones, which must not pass. */
static int get_int64(json_object *o, int64_t *ret) {
        int64_t v;

        if (!json_object_is_type(o, json_type_int))
                return -EBADMSG;
        v = json_object_get_int64(o);
        if (v == INT64_MAX && json_object_get_uint64(o) != (uint64_t) INT64_MAX)
                return -EBADMSG;
        *ret = v;
        return 0;
}

static int get_uint_member(json_object *doc, const char *key, uint64_t *ret) {
        json_object *o;
        int64_t v;

        if (!json_object_object_get_ex(doc, key, &o) || get_int64(o, &v) < 0 || v < 0)
                return -EBADMSG;
        *ret = (uint64_t) v;
        return 0;
}

#define REJECT(code, why)                   \
        do {                                \
                if (ret_reason)             \
                        *ret_reason = (why); \
                return (code);              \
        } while (0)

int guest_state_from_json(const char *text, size_t size, GuestStateRecord *ret, const char **ret_reason) {
        _cleanup_(json_putp) json_object *doc = NULL;
        json_tokener *tok;
        json_object *o, *snapshot;
        GuestStateRecord r = {};
        const char *s;
        int64_t version;

        if (!text || !ret)
                return -EINVAL;
        if (size > STATE_FILE_SIZE_MAX)
                REJECT(-EBADMSG, "file is too large");
        if (size > 0 && memchr(text, '\0', size))
                REJECT(-EBADMSG, "file contains NUL bytes");

        tok = json_tokener_new_ex(STATE_JSON_DEPTH_MAX);
        if (!tok)
                return -ENOMEM;
        doc = json_tokener_parse_ex(tok, text, (int) size);
        enum json_tokener_error jerr = json_tokener_get_error(tok);
        size_t end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (!doc || jerr != json_tokener_success)
                REJECT(-EBADMSG, jerr == json_tokener_continue ? "file is truncated" : "file is not valid JSON");
        for (; end < size; end++)
                if (!strchr(" \t\r\n", text[end]))
                        REJECT(-EBADMSG, "trailing garbage after the JSON document");
        if (!json_object_is_type(doc, json_type_object))
                REJECT(-EBADMSG, "top level is not a JSON object");

        if (get_string(doc, "format", 64, &s) < 0 || strcmp(s, STATE_FORMAT_NAME) != 0)
                REJECT(-EBADMSG, "not a rightsize guest state file");
        if (!json_object_object_get_ex(doc, "version", &o) || get_int64(o, &version) < 0)
                REJECT(-EBADMSG, "version is missing or not an integer");
        if (version > STATE_FILE_VERSION)
                REJECT(-EPROTONOSUPPORT, "written by a newer rightsized (unknown version)");
        if (version < STATE_FILE_VERSION)
                /* Version 1 is the first; an older known version would be migrated here. */
                REJECT(-EPROTONOSUPPORT, "version is older than any this rightsized can read");

        if (get_string(doc, "name", STATE_NAME_MAX + 1, &s) < 0 || !s[0])
                REJECT(-EBADMSG, "name is missing, empty, too long or not a string");
        strcpy(r.name, s);
        if (get_string(doc, "uuid", STATE_UUID_LEN + 1, &s) < 0 || (s[0] && !valid_uuid(s)))
                REJECT(-EBADMSG, "uuid is missing or malformed");
        strcpy(r.uuid, s);
        if (get_string(doc, "state", STATE_TEXT_MAX, &s) < 0 || !valid_state_text(s))
                REJECT(-EBADMSG, "state is missing, too long or not a string");
        strcpy(r.state, s);
        if (get_uint_member(doc, "saved_at_usec", &r.saved_at_usec) < 0)
                REJECT(-EBADMSG, "saved_at_usec is missing, negative or not an integer");
        if (get_uint_member(doc, "target_bytes", &r.target_bytes) < 0)
                REJECT(-EBADMSG, "target_bytes is missing, negative or not an integer");

        if (!json_object_object_get_ex(doc, "snapshot", &snapshot) || !json_object_is_type(snapshot, json_type_object))
                REJECT(-EBADMSG, "snapshot is missing or not an object");
        if (json_object_object_length(snapshot) > STATE_FIELDS_MAX)
                REJECT(-EBADMSG, "snapshot has too many fields");
        json_object_object_foreach(snapshot, key, value) {
                int r_set;

                if (!valid_key(key))
                        REJECT(-EBADMSG, "snapshot has a malformed field name");
                if (json_object_is_type(value, json_type_int)) {
                        int64_t v;
                        if (get_int64(value, &v) < 0)
                                REJECT(-EBADMSG, "snapshot field out of range");
                        r_set = guest_state_set_int(&r, key, v);
                } else if (json_object_is_type(value, json_type_double)) {
                        r_set = guest_state_set_double(&r, key, json_object_get_double(value));
                } else
                        REJECT(-EBADMSG, "snapshot field is not a number");
                if (r_set < 0)
                        REJECT(-EBADMSG, "snapshot field is not a finite number");
        }

        *ret = r;
        return 0;
}

/* ---- files ---- */

int state_file_path(const char *dir, const char *name, char **ret) {
        _cleanup_(freep) char *escaped = NULL;
        size_t n = 0;

        if (!dir || !name || !name[0] || !ret)
                return -EINVAL;
        if (strlen(name) > STATE_NAME_MAX)
                return -ENAMETOOLONG;

        escaped = malloc(strlen(name) * 3 + 1);
        if (!escaped)
                return -ENOMEM;
        for (const unsigned char *p = (const unsigned char *) name; *p; p++) {
                bool plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                             *p == '_' || *p == '-' || (*p == '.' && p != (const unsigned char *) name);
                if (plain)
                        escaped[n++] = (char) *p;
                else
                        n += (size_t) sprintf(escaped + n, "%%%02X", *p);
        }
        escaped[n] = '\0';
        if (n > STATE_FILE_NAME_MAX)
                return -ENAMETOOLONG;

        if (asprintf(ret, "%s/%s.json", dir, escaped) < 0)
                return -ENOMEM;
        return 0;
}

static bool is_state_file_name(const char *name);
static void closedirp(DIR **d);

/* Which name each UUID's file is under, for state_file_load_guest(): one scan of the directory
 * at the first lookup, then kept by this process's saves, the only writer (the directory's
 * lock). A domain without a file of its name then costs a look in memory, not a read of every
 * file (thousands after months of churn), however many domains are created. An entry may be
 * stale (a file aged out, or edited by hand): the file it names is read and checked before it
 * is taken. */
typedef struct UuidName {
        char uuid[STATE_UUID_LEN + 1];
        char *name;
} UuidName;

static struct {
        char *dir; /* NULL: not built */
        UuidName *entries;
        size_t n, allocated;
} uuid_index;

static void uuid_index_reset(void) {
        for (size_t i = 0; i < uuid_index.n; i++)
                free(uuid_index.entries[i].name);
        free(uuid_index.entries);
        free(uuid_index.dir);
        memset(&uuid_index, 0, sizeof(uuid_index));
}

static int uuid_index_note(const char *uuid, const char *name) {
        UuidName *e = NULL;
        char *copy = strdup(name);

        if (!copy)
                return -ENOMEM;
        for (size_t i = 0; i < uuid_index.n && !e; i++)
                if (strcasecmp(uuid_index.entries[i].uuid, uuid) == 0)
                        e = &uuid_index.entries[i];
        if (!e) {
                if (uuid_index.n == uuid_index.allocated) {
                        size_t more = MAX(uuid_index.allocated * 2, (size_t) 64);
                        UuidName *grown = reallocarray(uuid_index.entries, more, sizeof(UuidName));
                        if (!grown) {
                                free(copy);
                                return -ENOMEM;
                        }
                        uuid_index.entries = grown;
                        uuid_index.allocated = more;
                }
                e = &uuid_index.entries[uuid_index.n++];
                snprintf(e->uuid, sizeof(e->uuid), "%s", uuid);
                e->name = NULL;
        }
        free(e->name);
        e->name = copy;
        return 0;
}

/* The index of `dir`, built now when it is of another directory or none. */
static int uuid_index_build(const char *dir) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        if (uuid_index.dir && strcmp(uuid_index.dir, dir) == 0)
                return 0;
        uuid_index_reset();
        d = opendir(dir);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                _cleanup_(freep) char *path = NULL, *text = NULL, *own_path = NULL;
                GuestStateRecord rec;
                size_t size;

                if (!is_state_file_name(de->d_name))
                        continue;
                if (asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                        return -ENOMEM;
                /* Not a regular file, too large, unreadable, not ours: skipped. */
                if (read_file_capped(path, STATE_FILE_SIZE_MAX, &text, &size) < 0 ||
                    guest_state_from_json(text, size, &rec, NULL) < 0 || !rec.uuid[0])
                        continue;
                /* Its name must lead back to this very file: a file copied or renamed by hand
                 * is not trusted to say whose it is. */
                if (state_file_path(dir, rec.name, &own_path) < 0 || strcmp(own_path, path) != 0)
                        continue;
                r = uuid_index_note(rec.uuid, rec.name);
                if (r < 0) {
                        uuid_index_reset();
                        return r;
                }
        }
        uuid_index.dir = strdup(dir);
        if (!uuid_index.dir) {
                uuid_index_reset();
                return -ENOMEM;
        }
        return 0;
}

/* The state of the file that records `uuid` under another name than `except` (1), or 0. */
static int state_file_find_uuid(const char *dir, const char *uuid, const char *except, GuestStateRecord *ret) {
        int r = uuid_index_build(dir);
        if (r < 0)
                return r;
        for (size_t i = 0; i < uuid_index.n; i++) {
                const UuidName *e = &uuid_index.entries[i];
                GuestStateRecord rec;
                if (strcasecmp(e->uuid, uuid) != 0 || strcmp(e->name, except) == 0)
                        continue;
                /* Stale entries (the file gone or changed) are passed over. */
                if (state_file_load(dir, e->name, &rec) < 0 || strcasecmp(rec.uuid, uuid) != 0)
                        return 0;
                *ret = rec;
                return 1;
        }
        return 0;
}

int state_file_save(const char *dir, const GuestStateRecord *r) {
        _cleanup_(freep) char *path = NULL, *text = NULL;
        int ret;

        if (!r)
                return -EINVAL;
        ret = state_file_path(dir, r->name, &path);
        if (ret < 0)
                return ret;
        ret = guest_state_to_json(r, &text);
        if (ret < 0)
                return ret;
        ret = write_file_atomic(path, text, strlen(text), 0600, WRITE_FILE_SYNC);
        if (ret < 0)
                return ret;
        /* Keeps state_file_load_guest()'s index of UUIDs, once it is built, in step. */
        if (r->uuid[0] && uuid_index.dir && strcmp(uuid_index.dir, dir) == 0 && uuid_index_note(r->uuid, r->name) < 0)
                uuid_index_reset(); /* built again at the next lookup */
        return 0;
}

int state_dir_read_guest_file(const char *name, const char *path, size_t cap, const char *what, char **ret,
                              size_t *ret_size) {
        int r = read_file_capped(path, cap, ret, ret_size);
        if (r == -ENOENT)
                return r;
        if (r == -EFBIG)
                return log_named_guest_warning_errno(name, NULL, r, "Discarding %s %s: larger than %zu bytes", what, path,
                                                     cap);
        if (r == -EINVAL)
                return log_named_guest_warning_errno(name, NULL, -EBADMSG, "Discarding %s %s: not a regular file", what,
                                                     path);
        if (r < 0)
                return log_named_guest_warning_errno(name, NULL, r, "Cannot read %s %s: %m", what, path);
        return r;
}

int state_file_load(const char *dir, const char *name, GuestStateRecord *ret) {
        _cleanup_(freep) char *path = NULL, *text = NULL;
        const char *reason = NULL;
        GuestStateRecord r;
        size_t size;
        int k;

        if (!ret)
                return -EINVAL;
        k = state_file_path(dir, name, &path);
        if (k < 0)
                return k;

        k = state_dir_read_guest_file(name, path, STATE_FILE_SIZE_MAX, "state file", &text, &size);
        if (k < 0)
                return k;

        k = guest_state_from_json(text, size, &r, &reason);
        if (k == -ENOMEM)
                return log_oom();
        if (k < 0)
                return log_named_guest_warning_errno(name, NULL, k, "Discarding state file %s: %s", path, reason);
        if (strcmp(r.name, name) != 0)
                return log_named_guest_warning_errno(name, NULL, -EBADMSG,
                                               "Discarding state file %s: it belongs to another guest", path);

        *ret = r;
        return 0;
}

int state_file_load_guest(const char *dir, const char *name, const char *uuid, GuestStateRecord *ret) {
        GuestStateRecord rec;
        int r;

        if (!ret)
                return -EINVAL;
        bool uuid_known = uuid && uuid[0];
        r = state_file_load(dir, name, &rec);
        if (r == 0 && uuid_known && rec.uuid[0] && strcasecmp(rec.uuid, uuid) != 0) {
                /* The name's previous holder, a domain since renamed or gone: its sizes are not
                 * this guest's, and its file is left for it (this guest's first save replaces it). */
                log_named_guest_notice(name, NULL,
                                       "Not resuming from the state file of this name: it is domain %s's, not %s's",
                                       rec.uuid, uuid);
                return -ENOENT;
        }
        if (r != -ENOENT || !uuid_known) {
                if (r == 0)
                        *ret = rec;
                return r;
        }

        /* No file of this name: a libvirt domain renamed (while stopped, as libvirt requires) keeps
         * its UUID, and its file, under the old name, is its own. */
        r = state_file_find_uuid(dir, uuid, name, &rec);
        if (r < 0) {
                log_named_guest_warning_errno(name, NULL, r, "Cannot look in %s for this domain's state file: %m", dir);
                return -ENOENT;
        }
        if (r == 0)
                return -ENOENT;
        char old_name[STATE_NAME_MAX + 1];
        strcpy(old_name, rec.name);
        strcpy(rec.name, name);
        /* Written under the new name before the old one goes: a crash in between leaves both,
         * and the next start finds the new one by its name. */
        r = state_file_save(dir, &rec);
        if (r < 0) {
                log_named_guest_warning_errno(name, NULL, r, "Cannot move the state file of '%s' to this name: %m",
                                              old_name);
                return -ENOENT;
        }
        r = state_file_remove(dir, old_name);
        if (r < 0)
                log_named_guest_warning_errno(name, NULL, r, "Cannot remove the state file of '%s': %m", old_name);
        log_named_guest_info(name, NULL, "Renamed from '%s' (domain %s): its state file moves with it", old_name, uuid);
        *ret = rec;
        return 0;
}

int state_file_remove(const char *dir, const char *name) {
        _cleanup_(freep) char *path = NULL;
        int r = state_file_path(dir, name, &path);

        if (r < 0)
                return r;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

/* ---- the directory ---- */

static bool has_suffix(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);
        return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* write_file_atomic()'s temporary name for a state file: "." NAME ".json." and 6 characters. */
/* ".NAME.json.XXXXXX", or ".NAME.history.XXXXXX" (the next-boot history's, boot-history.c). */
static bool is_leftover_name(const char *name) {
        const char *random = strrchr(name, '.');
        if (name[0] != '.' || !random || strlen(random + 1) != strlen("XXXXXX"))
                return false;
        for (const char *p = random + 1; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
                        return false;
        size_t base = (size_t) (random - name);
        return (base > strlen(".json") && strncmp(random - strlen(".json"), ".json", strlen(".json")) == 0) ||
               (base > strlen(".history") && strncmp(random - strlen(".history"), ".history", strlen(".history")) == 0);
}

static bool is_state_file_name(const char *name) {
        return name[0] != '.' && has_suffix(name, ".json") && strlen(name) > strlen(".json");
}

static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

int state_dir_remove_leftovers(const char *dir) {
        _cleanup_(closedirp) DIR *d = opendir(dir);
        struct dirent *de;
        int removed = 0;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                struct stat st;
                if (!is_leftover_name(de->d_name) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) < 0) {
                        log_warning_errno(errno, "Cannot remove %s/%s, left by an interrupted save: %m", dir, de->d_name);
                        continue;
                }
                removed++;
        }
        if (removed > 0)
                log_info("Removed %d temporary file%s in %s left by saves a crash interrupted", removed,
                         removed == 1 ? "" : "s", dir);
        return removed;
}

int state_dir_age_out(const char *dir, uint64_t now_realtime_usec, uint64_t max_age_usec, StateFileInUseFn in_use,
                      void *userdata) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int removed = 0;

        if (max_age_usec == 0 || now_realtime_usec < max_age_usec)
                return 0;
        d = opendir(dir);
        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                _cleanup_(freep) char *path = NULL;
                struct stat st;
                if (!is_state_file_name(de->d_name) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISREG(st.st_mode))
                        continue;
                uint64_t written = (uint64_t) st.st_mtim.tv_sec * 1000000 + (uint64_t) st.st_mtim.tv_nsec / 1000;
                if (st.st_mtim.tv_sec < 0 || written + max_age_usec > now_realtime_usec)
                        continue;
                if (asprintf(&path, "%s/%s", dir, de->d_name) < 0)
                        return -ENOMEM;
                if (in_use && in_use(path, userdata))
                        continue;
                if (unlinkat(dirfd(d), de->d_name, 0) < 0) {
                        log_warning_errno(errno, "Cannot remove the old state file %s: %m", path);
                        continue;
                }
                log_info("Removed the state file %s: last written %" PRIu64 " days ago, by a guest not seen since "
                         "(state-remove-after)", path, (now_realtime_usec - written) / (86400 * UINT64_C(1000000)));
                removed++;
                /* Its next-boot history (boot-history.c, "NAME.history") goes with it. */
                _cleanup_(freep) char *history = NULL;
                if (asprintf(&history, "%.*s.history", (int) (strlen(de->d_name) - strlen(".json")), de->d_name) >= 0 &&
                    unlinkat(dirfd(d), history, 0) < 0 && errno != ENOENT)
                        log_warning_errno(errno, "Cannot remove the old history file %s/%s: %m", dir, history);
        }
        /* The UUID index forgets the files removed (read again at the next lookup): it would
         * otherwise grow with every domain ever seen. */
        if (removed > 0 && uuid_index.dir && strcmp(uuid_index.dir, dir) == 0)
                uuid_index_reset();
        return removed;
}
