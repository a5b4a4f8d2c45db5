/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Per-guest state files, so that a restarted daemon resumes where it was instead of probing from
 * scratch. One versioned JSON document per guest in the state directory, replaced atomically.
 *
 * The estimator's snapshot is stored as a flat set of named numbers: the decision core turns its
 * own struct into fields and back, and this module never needs to know its layout. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STATE_FILE_VERSION 1
#define STATE_FILE_SIZE_MAX (64 * 1024)
#define STATE_FIELDS_MAX 64
#define STATE_KEY_MAX 48      /* with the NUL; keys are [a-z0-9_]+ */
#define STATE_NAME_MAX 255    /* guest name, bytes */
#define STATE_UUID_LEN 36
#define STATE_TEXT_MAX 64     /* the state name, with the NUL */

typedef enum StateValueType {
        STATE_VALUE_INT,
        STATE_VALUE_DOUBLE,
} StateValueType;

typedef struct StateField {
        char key[STATE_KEY_MAX];
        StateValueType type;
        union {
                int64_t i;
                double d;   /* always finite */
        };
} StateField;

typedef struct GuestStateRecord {
        char name[STATE_NAME_MAX + 1];
        char uuid[STATE_UUID_LEN + 1];  /* "" when unknown */
        char state[STATE_TEXT_MAX];     /* e.g. "holding"; "" when unknown */
        uint64_t saved_at_usec;         /* CLOCK_REALTIME; the caller judges staleness */
        uint64_t target_bytes;          /* the last target applied */
        size_t n_fields;
        StateField fields[STATE_FIELDS_MAX];
} GuestStateRecord;

/* Empties the record and sets its identity. -ENAMETOOLONG, or -EINVAL for an empty name or a
 * malformed UUID (uuid may be NULL or ""). */
int guest_state_init(GuestStateRecord *r, const char *name, const char *uuid);

/* Sets a snapshot field, replacing one of the same key. -EINVAL for a bad key or a non-finite
 * double, -E2BIG when STATE_FIELDS_MAX fields are already set. */
int guest_state_set_int(GuestStateRecord *r, const char *key, int64_t value);
int guest_state_set_double(GuestStateRecord *r, const char *key, double value);
/* Reads a field: -ENOENT if absent; get_int refuses a double field with -EINVAL, get_double
 * accepts both. */
int guest_state_get_int(const GuestStateRecord *r, const char *key, int64_t *ret);
int guest_state_get_double(const GuestStateRecord *r, const char *key, double *ret);

/* The JSON document for a record, and back. from_json validates everything and, on failure,
 * returns -EBADMSG (malformed, truncated, wrong types, out of range) or -EPROTONOSUPPORT (a
 * version this daemon cannot read), with *ret_reason set to a static explanation. */
int guest_state_to_json(const GuestStateRecord *r, char **ret);
int guest_state_from_json(const char *text, size_t size, GuestStateRecord *ret, const char **ret_reason);

/* "<dir>/<escaped name>.json"; names are escaped to [A-Za-z0-9_.-] with %XX, never starting with '.'. */
int state_file_path(const char *dir, const char *name, char **ret);

/* Writes the record to its file atomically and durably. On failure (-ENOSPC on a full disk) the
 * previous file is left intact. */
int state_file_save(const char *dir, const GuestStateRecord *r);

/* Loads a guest's state: 0, -ENOENT when there is none, or -EBADMSG / -EPROTONOSUPPORT / -EFBIG
 * when a file exists but is discarded (logged with its reason). Never crashes on any content. */
int state_file_load(const char *dir, const char *name, GuestStateRecord *ret);
/* Reads a file of the guest `name` in the state directory (its state file, its history), at most
 * cap bytes: 0, -ENOENT (no file, nothing logged), or -errno with the reason logged once, `what`
 * naming the file ("state file"). A hostile or broken file is discarded, never trusted. */
int state_dir_read_guest_file(const char *name, const char *path, size_t cap, const char *what, char **ret,
                              size_t *ret_size);

/* Loads the state of the guest `name` whose UUID is `uuid` (a libvirt domain's; NULL or "" when
 * unknown): as state_file_load(), except that a file of this name recorded for another UUID is
 * not this guest's (-ENOENT, logged), and that with no file of this name, the file another name
 * left for this UUID (the domain was renamed) is moved to this name and loaded, with one line.
 * The directory is read once, at the first such lookup; state_file_save() keeps what it found. */
int state_file_load_guest(const char *dir, const char *name, const char *uuid, GuestStateRecord *ret);

/* Deletes a guest's file; 0 also when there was none. */
int state_file_remove(const char *dir, const char *name);

/* Removes the temporary files a save interrupted by a crash left (".NAME.json.XXXXXX", and the
 * next-boot history's ".NAME.history.XXXXXX"; regular
 * files only): to be called under the state directory's lock, before any save. Returns how many
 * were removed, or -errno when the directory cannot be read. */
int state_dir_remove_leftovers(const char *dir);

/* Whether the state file at `path` is a guest's the daemon has now (it must be kept). */
typedef bool (*StateFileInUseFn)(const char *path, void *userdata);

/* Removes the state files ("NAME.json", regular files) last written more than max_age_usec
 * before now_realtime_usec, except those in_use() claims, each logged, with the next-boot history
 * beside each ("NAME.history", boot-history.h): the guests of a fleet come
 * and go, and their files would pile up for ever. Returns how many were removed, or -errno. */
int state_dir_age_out(const char *dir, uint64_t now_realtime_usec, uint64_t max_age_usec, StateFileInUseFn in_use,
                      void *userdata);
