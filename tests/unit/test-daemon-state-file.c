/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/log.h"
#include "daemon/log-ratelimit.h"
#include "daemon/state-file.h"
#include "tests/lib/test-util.h"
#include "tests/lib/check-run.h"

static char *dir;

static void setup(void) {
        dir = test_mkdtemp();
        log_set_target(LOG_TARGET_STDERR);
        log_set_max_level(LOG_INFO);
}

static void teardown(void) {
        _cleanup_(freep) char *mnt = NULL;

        ck_assert_int_ge(asprintf(&mnt, "%s/fs", dir), 0);
        (void) umount2(mnt, MNT_DETACH);
        test_rm_rf(dir);
        free(dir);
}

static void fill_record(GuestStateRecord *r, const char *name) {
        ck_assert_int_eq(guest_state_init(r, name, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"), 0);
        snprintf(r->state, sizeof(r->state), "holding");
        r->saved_at_usec = UINT64_C(1733220000123456);
        r->target_bytes = UINT64_C(805306368);
        ck_assert_int_eq(guest_state_set_int(r, "estimate_bytes", INT64_C(734003200)), 0);
        ck_assert_int_eq(guest_state_set_int(r, "lower_bytes", INT64_C(681574400)), 0);
        ck_assert_int_eq(guest_state_set_int(r, "upper_bytes", INT64_C(786432000)), 0);
        ck_assert_int_eq(guest_state_set_int(r, "min_value", INT64_MIN), 0);
        ck_assert_int_eq(guest_state_set_int(r, "max_value", INT64_MAX), 0);
        ck_assert_int_eq(guest_state_set_double(r, "refault_baseline", 0.1), 0);
        ck_assert_int_eq(guest_state_set_double(r, "tiny", 5e-324), 0);
        ck_assert_int_eq(guest_state_set_double(r, "negative", -1234.5678), 0);
}

static void assert_records_equal(const GuestStateRecord *a, const GuestStateRecord *b) {
        ck_assert_str_eq(a->name, b->name);
        ck_assert_str_eq(a->uuid, b->uuid);
        ck_assert_str_eq(a->state, b->state);
        ck_assert_uint_eq(a->saved_at_usec, b->saved_at_usec);
        ck_assert_uint_eq(a->target_bytes, b->target_bytes);
        ck_assert_uint_eq(a->n_fields, b->n_fields);
        for (size_t i = 0; i < a->n_fields; i++) {
                const StateField *f = &a->fields[i];
                if (f->type == STATE_VALUE_INT) {
                        int64_t v;
                        ck_assert_int_eq(guest_state_get_int(b, f->key, &v), 0);
                        ck_assert_int_eq(v, f->i);
                } else {
                        double v;
                        int64_t unused;
                        ck_assert_int_eq(guest_state_get_double(b, f->key, &v), 0);
                        ck_assert_msg(v == f->d, "%s: %.17g != %.17g", f->key, v, f->d);
                        ck_assert_int_eq(guest_state_get_int(b, f->key, &unused), -EINVAL);
                }
        }
}

START_TEST(test_round_trip) {
        GuestStateRecord a, b;
        _cleanup_(freep) char *path = NULL;
        struct stat st;

        fill_record(&a, "web1");
        ck_assert_int_eq(state_file_save(dir, &a), 0);
        ck_assert_int_eq(state_file_path(dir, "web1", &path), 0);
        ck_assert_int_eq(stat(path, &st), 0);
        ck_assert_int_eq(st.st_mode & 0777, 0600);

        memset(&b, 0xaa, sizeof(b));
        ck_assert_int_eq(state_file_load(dir, "web1", &b), 0);
        assert_records_equal(&a, &b);

        /* Saving again replaces the file. */
        a.target_bytes = 1;
        ck_assert_int_eq(guest_state_set_int(&a, "estimate_bytes", 42), 0);
        ck_assert_int_eq(state_file_save(dir, &a), 0);
        ck_assert_int_eq(state_file_load(dir, "web1", &b), 0);
        assert_records_equal(&a, &b);

        /* No UUID, no state, no fields. */
        GuestStateRecord c, d;
        ck_assert_int_eq(guest_state_init(&c, "bare", NULL), 0);
        ck_assert_int_eq(state_file_save(dir, &c), 0);
        ck_assert_int_eq(state_file_load(dir, "bare", &d), 0);
        assert_records_equal(&c, &d);
        ck_assert_str_eq(d.uuid, "");
}
END_TEST

START_TEST(test_fields) {
        GuestStateRecord r;
        char key[STATE_KEY_MAX + 8];
        int64_t v;
        double dv;

        ck_assert_int_eq(guest_state_init(&r, "g", ""), 0);
        ck_assert_int_eq(guest_state_set_int(&r, "a", 1), 0);
        ck_assert_int_eq(guest_state_set_int(&r, "a", 2), 0); /* replaces */
        ck_assert_uint_eq(r.n_fields, 1);
        ck_assert_int_eq(guest_state_get_int(&r, "a", &v), 0);
        ck_assert_int_eq(v, 2);
        ck_assert_int_eq(guest_state_get_double(&r, "a", &dv), 0);
        ck_assert(dv == 2.0);
        ck_assert_int_eq(guest_state_get_int(&r, "missing", &v), -ENOENT);

        ck_assert_int_eq(guest_state_set_int(&r, "", 1), -EINVAL);
        ck_assert_int_eq(guest_state_set_int(&r, "Upper", 1), -EINVAL);
        ck_assert_int_eq(guest_state_set_int(&r, "has-dash", 1), -EINVAL);
        memset(key, 'k', STATE_KEY_MAX);
        key[STATE_KEY_MAX] = '\0';
        ck_assert_int_eq(guest_state_set_int(&r, key, 1), -EINVAL);
        key[STATE_KEY_MAX - 1] = '\0'; /* longest allowed */
        ck_assert_int_eq(guest_state_set_int(&r, key, 1), 0);
        ck_assert_int_eq(guest_state_set_double(&r, "nan", NAN), -EINVAL);
        ck_assert_int_eq(guest_state_set_double(&r, "inf", INFINITY), -EINVAL);

        for (unsigned i = (unsigned) r.n_fields; i < STATE_FIELDS_MAX; i++) {
                snprintf(key, sizeof(key), "f%u", i);
                ck_assert_int_eq(guest_state_set_int(&r, key, i), 0);
        }
        ck_assert_int_eq(guest_state_set_int(&r, "one_too_many", 1), -E2BIG);
        ck_assert_int_eq(guest_state_set_int(&r, "a", 3), 0); /* replacing still works when full */

        ck_assert_int_eq(guest_state_init(&r, "", NULL), -EINVAL);
        ck_assert_int_eq(guest_state_init(&r, "g", "not-a-uuid"), -EINVAL);
        ck_assert_int_eq(guest_state_init(&r, "g", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fX"), -EINVAL);
}
END_TEST

START_TEST(test_paths_are_escaped) {
        _cleanup_(freep) char *a = NULL, *b = NULL, *c = NULL, *d = NULL;
        char longname[STATE_NAME_MAX + 2];

        ck_assert_int_eq(state_file_path("/s", "web-1.prod_x", &a), 0);
        ck_assert_str_eq(a, "/s/web-1.prod_x.json");
        ck_assert_int_eq(state_file_path("/s", "../../etc/passwd", &b), 0);
        ck_assert_str_eq(b, "/s/%2E.%2F..%2Fetc%2Fpasswd.json");
        ck_assert_int_eq(state_file_path("/s", "a b%\n\xff", &c), 0);
        ck_assert_str_eq(c, "/s/a%20b%25%0A%FF.json");

        memset(longname, 'n', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        ck_assert_int_eq(state_file_path("/s", longname, &d), -ENAMETOOLONG);
        memset(longname, '/', 100);
        longname[100] = '\0'; /* short, but 300 bytes escaped */
        ck_assert_int_eq(state_file_path("/s", longname, &d), -ENAMETOOLONG);
        ck_assert_int_eq(state_file_path("/s", "", &d), -EINVAL);

        /* A hostile name stays inside the state directory. */
        GuestStateRecord r, back;
        ck_assert_int_eq(guest_state_init(&r, "../escape", NULL), 0);
        ck_assert_int_eq(state_file_save(dir, &r), 0);
        ck_assert_int_eq(state_file_load(dir, "../escape", &back), 0);
        ck_assert_str_eq(back.name, "../escape");
}
END_TEST

static const char valid_doc[] =
        "{\n"
        "  \"format\": \"rightsize-guest-state\",\n"
        "  \"version\": 1,\n"
        "  \"name\": \"g\",\n"
        "  \"uuid\": \"\",\n"
        "  \"state\": \"probing\",\n"
        "  \"saved_at_usec\": 1,\n"
        "  \"target_bytes\": 2,\n"
        "  \"snapshot\": { \"estimate_bytes\": 3, \"rate\": 0.5 }\n"
        "}\n";

/* Writes `contents` as guest g's file and expects it to be discarded with `code`. */
static void expect_discarded(const char *contents, size_t size, int code, const char *reason) {
        _cleanup_(freep) char *path = NULL, *log = NULL;
        _cleanup_(closep) int fd = -1;
        GuestStateRecord r, untouched;

        ck_assert_int_eq(state_file_path(dir, "g", &path), 0);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, contents, size), (ssize_t) size);

        memset(&r, 0x5a, sizeof(r));
        untouched = r;
        /* Every case is about guest g from the same line of state-file.c: each must be seen. */
        log_ratelimit_reset();
        test_stderr_begin();
        int k = state_file_load(dir, "g", &r);
        log = test_stderr_end();
        ck_assert_msg(k == code, "'%.60s': got %d, want %d", contents, k, code);
        ck_assert_msg(memcmp(&r, &untouched, sizeof(r)) == 0, "record changed on failure");
        ck_assert_msg(strstr(log, "Discarding state file") && strstr(log, reason), "log: %s (want '%s')", log,
                      reason);
        ck_assert_ptr_nonnull(strstr(log, "warning: g: "));
}

static void expect_discarded_str(const char *contents, int code, const char *reason) {
        expect_discarded(contents, strlen(contents), code, reason);
}

/* valid_doc with one substring replaced. */
static char *mutate(const char *from, const char *to) {
        const char *p = strstr(valid_doc, from);
        char *s;

        ck_assert_ptr_nonnull(p);
        ck_assert_int_ge(asprintf(&s, "%.*s%s%s", (int) (p - valid_doc), valid_doc, to, p + strlen(from)), 0);
        return s;
}

START_TEST(test_bad_files_discarded) {
        static const struct {
                const char *from, *to;
                int code;
                const char *reason;
        } mutations[] = {
                { "\"version\": 1", "\"version\": 2", -EPROTONOSUPPORT, "newer" },
                { "\"version\": 1", "\"version\": 0", -EPROTONOSUPPORT, "older" },
                { "\"version\": 1", "\"version\": \"1\"", -EBADMSG, "version" },
                { "\"version\": 1,\n", "", -EBADMSG, "version" },
                { "rightsize-guest-state", "something-else", -EBADMSG, "not a rightsize" },
                { "\"name\": \"g\"", "\"name\": \"other\"", -EBADMSG, "another guest" },
                { "\"name\": \"g\"", "\"name\": 7", -EBADMSG, "name" },
                { "\"uuid\": \"\"", "\"uuid\": \"zzz\"", -EBADMSG, "uuid" },
                { "\"state\": \"probing\"", "\"state\": \"a\\nb\"", -EBADMSG, "state" },
                { "\"state\": \"probing\"", "\"state\": \"a\\u0000b\"", -EBADMSG, "state" },
                { "\"state\": \"probing\"", "\"state\": null", -EBADMSG, "state" },
                { "\"target_bytes\": 2", "\"target_bytes\": -2", -EBADMSG, "target_bytes" },
                { "\"target_bytes\": 2", "\"target_bytes\": 2.5", -EBADMSG, "target_bytes" },
                { "\"target_bytes\": 2", "\"target_bytes\": 18446744073709551615", -EBADMSG, "target_bytes" },
                { "\"target_bytes\": 2", "\"target_bytes\": 99999999999999999999999", -EBADMSG, "target_bytes" },
                { "\"saved_at_usec\": 1", "\"saved_at_usec\": true", -EBADMSG, "saved_at_usec" },
                { "\"estimate_bytes\": 3", "\"estimate_bytes\": \"3\"", -EBADMSG, "not a number" },
                { "\"estimate_bytes\": 3", "\"estimate_bytes\": [3]", -EBADMSG, "not a number" },
                { "\"estimate_bytes\": 3", "\"estimate_bytes\": 9223372036854775808", -EBADMSG, "out of range" },
                { "\"estimate_bytes\": 3", "\"Estimate-Bytes\": 3", -EBADMSG, "field name" },
                { "\"rate\": 0.5", "\"rate\": NaN", -EBADMSG, "finite" },
                { "\"rate\": 0.5", "\"rate\": Infinity", -EBADMSG, "finite" },
                { "\"snapshot\": {", "\"snapshot\": [", -EBADMSG, "JSON" },
        };

        for (size_t i = 0; i < ARRAY_SIZE(mutations); i++) {
                _cleanup_(freep) char *doc = mutate(mutations[i].from, mutations[i].to);
                expect_discarded_str(doc, mutations[i].code, mutations[i].reason);
        }

        _cleanup_(freep) char *trailing = NULL;
        ck_assert_int_ge(asprintf(&trailing, "%s{}\n", valid_doc), 0);
        expect_discarded_str(trailing, -EBADMSG, "trailing");
        expect_discarded_str("", -EBADMSG, "truncated");
        expect_discarded_str("garbage", -EBADMSG, "JSON");
        expect_discarded_str("[1, 2, 3]\n", -EBADMSG, "not a JSON object");
        expect_discarded_str("{\"format\": \"rightsize-guest-state\", \"version\": 1", -EBADMSG, "truncated");
        expect_discarded_str("{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{}}}}}}", -EBADMSG, "JSON");
        expect_discarded(valid_doc, sizeof(valid_doc), -EBADMSG, "NUL"); /* includes the final NUL */

        /* Too many fields. */
        _cleanup_(freep) char *many = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&many, &size);
        ck_assert_ptr_nonnull(f);
        fputs("{\"format\":\"rightsize-guest-state\",\"version\":1,\"name\":\"g\",\"uuid\":\"\",\"state\":\"\","
              "\"saved_at_usec\":1,\"target_bytes\":1,\"snapshot\":{",
              f);
        for (unsigned i = 0; i <= STATE_FIELDS_MAX; i++)
                fprintf(f, "%s\"f%u\":%u", i ? "," : "", i, i);
        fputs("}}", f);
        fclose(f);
        expect_discarded_str(many, -EBADMSG, "too many fields");

        /* Larger than the cap. */
        _cleanup_(freep) char *huge = malloc(STATE_FILE_SIZE_MAX + 2);
        ck_assert_ptr_nonnull(huge);
        memset(huge, ' ', STATE_FILE_SIZE_MAX + 1);
        huge[STATE_FILE_SIZE_MAX + 1] = '\0';
        expect_discarded_str(huge, -EFBIG, "larger than");

        /* The unmodified document does load: the mutations above are what broke it. */
        _cleanup_(freep) char *path = NULL;
        GuestStateRecord r;
        int64_t v;
        ck_assert_int_eq(state_file_path(dir, "g", &path), 0);
        test_write_file(path, valid_doc);
        ck_assert_int_eq(state_file_load(dir, "g", &r), 0);
        ck_assert_str_eq(r.state, "probing");
        ck_assert_uint_eq(r.target_bytes, 2);
        ck_assert_int_eq(guest_state_get_int(&r, "estimate_bytes", &v), 0);
        ck_assert_int_eq(v, 3);
}
END_TEST

START_TEST(test_every_truncation_and_corruption) {
        GuestStateRecord a, r;
        _cleanup_(freep) char *text = NULL;
        const char *reason;
        size_t len, last_brace;

        fill_record(&a, "web1");
        ck_assert_int_eq(guest_state_to_json(&a, &text), 0);
        len = strlen(text);
        last_brace = (size_t) (strrchr(text, '}') - text);

        for (size_t cut = 0; cut < len; cut++) {
                int k = guest_state_from_json(text, cut, &r, &reason);
                if (cut <= last_brace)
                        ck_assert_msg(k == -EBADMSG, "truncated at %zu of %zu: %d", cut, len, k);
                else
                        ck_assert_int_eq(k, 0);
        }

        /* Flip bytes one at a time: either a valid record or a clean rejection, never a crash
         * (the sanitizer build checks the "never"). */
        for (size_t pos = 0; pos < len; pos++)
                for (unsigned v = 0; v < 256; v += 51) {
                        _cleanup_(freep) char *copy = strdup(text);
                        copy[pos] = (char) (v ?: '"');
                        int k = guest_state_from_json(copy, len, &r, &reason);
                        ck_assert(k == 0 || k == -EBADMSG || k == -EPROTONOSUPPORT);
                }
}
END_TEST

START_TEST(test_disk_full_keeps_old_state) {
        _cleanup_(freep) char *fs = NULL, *filler = NULL;
        _cleanup_(closep) int fd = -1;
        GuestStateRecord a, b, back;
        char block[4096];
        int r;

        ck_assert_int_ge(asprintf(&fs, "%s/fs", dir), 0);
        ck_assert_int_eq(mkdir(fs, 0755), 0);
        r = test_mount_private_tmpfs(fs, 64 * 1024);
        if (r < 0) {
                check_cannot_set_up("test_disk_full_keeps_old_state", "no private tmpfs: %s", strerror(-r));
                return;
        }

        fill_record(&a, "web1");
        ck_assert_int_eq(state_file_save(fs, &a), 0);

        ck_assert_int_ge(asprintf(&filler, "%s/filler", fs), 0);
        fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ck_assert_int_ge(fd, 0);
        memset(block, 'x', sizeof(block));
        while (write(fd, block, sizeof(block)) > 0)
                ;
        ck_assert_int_eq(errno, ENOSPC);

        b = a;
        b.target_bytes = 12345;
        ck_assert_int_eq(state_file_save(fs, &b), -ENOSPC);
        ck_assert_int_eq(state_file_load(fs, "web1", &back), 0);
        assert_records_equal(&a, &back);
        ck_assert_uint_eq(back.target_bytes, a.target_bytes);
}
END_TEST

START_TEST(test_remove) {
        GuestStateRecord a, r;

        ck_assert_int_eq(state_file_load(dir, "nobody", &r), -ENOENT);
        fill_record(&a, "web1");
        ck_assert_int_eq(state_file_save(dir, &a), 0);
        ck_assert_int_eq(state_file_remove(dir, "web1"), 0);
        ck_assert_int_eq(state_file_load(dir, "web1", &r), -ENOENT);
        ck_assert_int_eq(state_file_remove(dir, "web1"), 0);
        /* A state directory that is gone is an error for saving, not a crash. */
        ck_assert_int_eq(state_file_save("/nonexistent/rightsize", &a), -ENOENT);
}
END_TEST

static char *in_dir(const char *name) {
        char *path = NULL;
        ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
        return path;
}

static void write_aged(const char *name, uint64_t age_sec) {
        _cleanup_(freep) char *path = in_dir(name);
        test_write_file(path, "{}");
        struct timespec ts[2] = { { .tv_sec = time(NULL) - (time_t) age_sec }, { .tv_sec = time(NULL) - (time_t) age_sec } };
        ck_assert_int_eq(utimensat(AT_FDCWD, path, ts, 0), 0);
}

static bool exists(const char *name) {
        _cleanup_(freep) char *path = in_dir(name);
        return access(path, F_OK) == 0;
}

START_TEST(test_leftovers_removed) {
        GuestStateRecord a;

        /* What a crash in the middle of write_file_atomic() leaves, beside what must stay. */
        write_aged(".web1.json.a1B2c3", 0);
        write_aged(".web%2F2.json.ZZZZZZ", 3600);
        write_aged(".rightsized.lock", 0);
        write_aged(".web1.json.short", 0);   /* not mkostemp's six characters */
        write_aged("web1.json", 0);
        write_aged("notes.txt", 0);
        _cleanup_(freep) char *sub = in_dir(".web3.json.abcdef");
        ck_assert_int_eq(mkdir(sub, 0700), 0); /* not a regular file */

        ck_assert_int_eq(state_dir_remove_leftovers(dir), 2);
        ck_assert(!exists(".web1.json.a1B2c3"));
        ck_assert(!exists(".web%2F2.json.ZZZZZZ"));
        ck_assert(exists(".rightsized.lock"));
        ck_assert(exists(".web1.json.short"));
        ck_assert(exists("web1.json"));
        ck_assert(exists("notes.txt"));
        ck_assert(exists(".web3.json.abcdef"));
        ck_assert_int_eq(state_dir_remove_leftovers(dir), 0);

        /* A real save's file is left alone, and still loads. */
        fill_record(&a, "web1");
        ck_assert_int_eq(state_file_save(dir, &a), 0);
        ck_assert_int_eq(state_dir_remove_leftovers(dir), 0);
        ck_assert_int_eq(state_file_load(dir, "web1", &a), 0);
        ck_assert_int_eq(state_dir_remove_leftovers("/nonexistent/rightsize"), -ENOENT);
}
END_TEST

static bool in_use_web_present(const char *path, void *userdata) {
        unsigned *asked = userdata;
        (*asked)++;
        return strstr(path, "/present.json") != NULL;
}

START_TEST(test_old_files_aged_out_unless_in_use) {
        const uint64_t day = 86400;
        unsigned asked = 0;

        write_aged("gone.json", 100 * day);
        write_aged("present.json", 100 * day);  /* its guest is here: kept however old */
        write_aged("recent.json", 10 * day);
        write_aged("old-notes.txt", 100 * day); /* not a state file */
        write_aged(".gone2.json.abcdef", 100 * day); /* leftovers are state_dir_remove_leftovers()'s */
        _cleanup_(freep) char *sub = in_dir("olddir.json");
        ck_assert_int_eq(mkdir(sub, 0700), 0);

        uint64_t now = (uint64_t) time(NULL) * USEC_PER_SEC;
        /* 0: never. */
        ck_assert_int_eq(state_dir_age_out(dir, now, 0, in_use_web_present, &asked), 0);
        ck_assert(exists("gone.json"));

        ck_assert_int_eq(state_dir_age_out(dir, now, 90 * day * USEC_PER_SEC, in_use_web_present, &asked), 1);
        ck_assert(!exists("gone.json"));
        ck_assert(exists("present.json"));
        ck_assert(exists("recent.json"));
        ck_assert(exists("old-notes.txt"));
        ck_assert(exists(".gone2.json.abcdef"));
        ck_assert(exists("olddir.json"));
        ck_assert_uint_eq(asked, 2); /* only the old state files were asked about */

        /* A shorter limit reaches the recent one too. */
        ck_assert_int_eq(state_dir_age_out(dir, now, 7 * day * USEC_PER_SEC, in_use_web_present, &asked), 1);
        ck_assert(!exists("recent.json"));
        ck_assert(exists("present.json"));
}
END_TEST

/* A libvirt domain's file found again by its UUID under its old name, moved to the new one; a
 * file of the name recorded for another UUID is not the guest's; a QMP guest (no UUID) loads by
 * name alone; a file copied by hand under another name is not taken for anyone's. */
START_TEST(test_load_guest_by_uuid) {
        static const char uuid[] = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"; /* fill_record()'s */
        static const char other[] = "11111111-2222-3333-4444-555555555555";
        GuestStateRecord a, b, got;

        fill_record(&a, "web-old");
        ck_assert_int_eq(state_file_save(dir, &a), 0);
        fill_record(&b, "db");
        ck_assert_int_eq(guest_state_init(&b, "db", other), 0);
        ck_assert_int_eq(state_file_save(dir, &b), 0);

        /* Another domain, new: nothing of its own, and not web-old's. */
        ck_assert_int_eq(state_file_load_guest(dir, "web-new", "99999999-2222-3333-4444-555555555555", &got), -ENOENT);
        ck_assert(exists("web-old.json"));
        /* The domain renamed: the record under the new name, the old file gone; upper case too. */
        ck_assert_int_eq(state_file_load_guest(dir, "web-new", "0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", &got), 0);
        ck_assert_str_eq(got.name, "web-new");
        ck_assert_str_eq(got.uuid, uuid);
        ck_assert_uint_eq(got.target_bytes, a.target_bytes);
        ck_assert(exists("web-new.json"));
        ck_assert(!exists("web-old.json"));
        ck_assert_int_eq(state_file_load(dir, "web-new", &got), 0);
        /* The name's file recorded for another domain: not this one's, left alone. */
        ck_assert_int_eq(state_file_load_guest(dir, "db", uuid, &got), -ENOENT);
        ck_assert(exists("db.json"));
        ck_assert_int_eq(state_file_load_guest(dir, "db", other, &got), 0);
        /* No UUID known (a QMP guest): by name, as before. */
        ck_assert_int_eq(state_file_load_guest(dir, "db", NULL, &got), 0);
        ck_assert_int_eq(state_file_load_guest(dir, "db", "", &got), 0);

        /* A copy under another file name says it is web-new's: not taken for a rename. */
        _cleanup_(freep) char *from = in_dir("web-new.json"), *to = in_dir("copy.json"), *text = test_read_file(from);
        ck_assert_ptr_nonnull(text);
        test_write_file(to, text);
        ck_assert_int_eq(unlink(from), 0);
        ck_assert_int_eq(state_file_load_guest(dir, "web-2", uuid, &got), -ENOENT);
        ck_assert(exists("copy.json"));

        /* The directory was read once, at the first lookup: a file saved since is found too,
         * and one removed since is not taken. */
        static const char late[] = "22222222-2222-3333-4444-555555555555";
        GuestStateRecord c;
        fill_record(&c, "late");
        ck_assert_int_eq(guest_state_init(&c, "late", late), 0);
        ck_assert_int_eq(state_file_save(dir, &c), 0);
        ck_assert_int_eq(state_file_load_guest(dir, "late-renamed", late, &got), 0);
        ck_assert_str_eq(got.name, "late-renamed");
        ck_assert(!exists("late.json"));
        ck_assert_int_eq(state_file_remove(dir, "late-renamed"), 0);
        ck_assert_int_eq(state_file_load_guest(dir, "late-again", late, &got), -ENOENT);
}
END_TEST

int main(void) {
        return check_run_case("daemon-state-file", "state-file", setup, teardown, 120,
                              CHECK_TESTS(test_round_trip, test_fields, test_paths_are_escaped,
                                          test_bad_files_discarded, test_every_truncation_and_corruption,
                                          test_disk_full_keeps_old_state, test_remove, test_leftovers_removed,
                                          test_old_files_aged_out_unless_in_use, test_load_guest_by_uuid));
}
