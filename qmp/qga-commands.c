/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "qmp/base64.h"
#include "qmp/json-util.h"
#include "qmp/qga-commands.h"

/* One file read: up to three kinds of commands share this, one reference each. */
typedef struct FileRead {
        unsigned n_ref;
        char *path;
        size_t max_size;
        uint64_t timeout_usec;
        qga_file_fn callback;
        void *userdata;
        qmp_destroy_fn destroy;

        int64_t handle;
        char *data;
        size_t size;

        /* The outcome, kept while guest-file-close runs. */
        int error;
        char *error_class;
        char *error_desc;
} FileRead;

static void file_read_unref(void *userdata) {
        FileRead *f = userdata;

        if (!f || --f->n_ref > 0)
                return;
        if (f->destroy)
                f->destroy(f->userdata);
        free(f->path);
        free(f->data);
        free(f->error_class);
        free(f->error_desc);
        free(f);
}

static int file_read_execute(QgaClient *c, FileRead *f, const char *command, json_object *args, qga_reply_fn callback) {
        int r;

        f->n_ref++;
        r = qga_client_execute_full(c, command, args, f->timeout_usec, callback, f, file_read_unref);
        if (r < 0)
                f->n_ref--;
        return r;
}

static void file_read_finish(QgaClient *c, FileRead *f) {
        QmpReply reply = {
                .error = f->error,
                .error_class = f->error_class,
                .error_desc = f->error_desc,
        };

        if (f->callback)
                f->callback(c, &reply, f->error == 0 ? (f->data ? f->data : "") : NULL, f->error == 0 ? f->size : 0, f->userdata);
        f->callback = NULL;
}

static void file_read_set_error(FileRead *f, int error, const char *error_class, const char *format, ...) _printf_(4, 5);
static void file_read_set_error(FileRead *f, int error, const char *error_class, const char *format, ...) {
        char desc[512];
        va_list ap;

        if (f->error != 0)
                return; /* the first failure is the one worth reporting */
        va_start(ap, format);
        vsnprintf(desc, sizeof(desc), format, ap);
        va_end(ap);
        f->error = error;
        (void) strdup_replace(&f->error_class, error_class);
        (void) strdup_replace(&f->error_desc, desc);
}

static void on_file_close(QgaClient *c, const QmpReply *reply, void *userdata) {
        /* A failed close does not change what was read. */
        file_read_finish(c, userdata);
}

static void file_read_close(QgaClient *c, FileRead *f) {
        json_object *args = json_object_new_object();

        if (args && json_object_object_add(args, "handle", json_object_new_int64(f->handle)) == 0) {
                if (file_read_execute(c, f, "guest-file-close", args, on_file_close) >= 0)
                        return;
        } else
                json_object_put(args);
        /* Could not even ask (connection gone): the guest handle leaks with the agent's
         * session, and what was read is still good. */
        file_read_finish(c, f);
}

static void on_file_read(QgaClient *c, const QmpReply *reply, void *userdata);

static void file_read_next(QgaClient *c, FileRead *f) {
        json_object *args = json_object_new_object();
        int r = -ENOMEM;

        if (args && json_object_object_add(args, "handle", json_object_new_int64(f->handle)) == 0 &&
            json_object_object_add(args, "count", json_object_new_int64(QGA_FILE_READ_CHUNK)) == 0) {
                r = file_read_execute(c, f, "guest-file-read", args, on_file_read);
                if (r >= 0)
                        return;
                args = NULL; /* consumed */
        }
        json_object_put(args);
        file_read_set_error(f, r, NULL, "cannot send guest-file-read: %s", strerror(-r));
        file_read_close(c, f);
}

static void on_file_read(QgaClient *c, const QmpReply *reply, void *userdata) {
        FileRead *f = userdata;
        const char *b64;
        uint64_t count;
        bool eof;
        size_t decoded;
        char *p;
        int r;

        if (reply->error == -ECONNRESET) {
                file_read_set_error(f, reply->error, NULL, "%s", qmp_reply_error_text(reply));
                file_read_finish(c, f);
                return;
        }
        if (reply->error != 0) {
                file_read_set_error(f, reply->error, reply->error_class, "reading %s: %s", f->path, qmp_reply_error_text(reply));
                file_read_close(c, f);
                return;
        }

        if (json_member_get_u64(reply->result, "count", &count) < 0 ||
            json_member_get_string(reply->result, "buf-b64", &b64) < 0 ||
            json_member_get_bool(reply->result, "eof", &eof) < 0) {
                file_read_set_error(f, -EBADMSG, NULL, "malformed guest-file-read reply for %s", f->path);
                file_read_close(c, f);
                return;
        }

        size_t b64_len = strlen(b64);
        if (count > QGA_FILE_READ_CHUNK || f->size + count > f->max_size) {
                file_read_set_error(f, count > QGA_FILE_READ_CHUNK ? -EBADMSG : -EFBIG, NULL,
                                    "%s exceeds %zu bytes", f->path, f->max_size);
                file_read_close(c, f);
                return;
        }
        p = realloc(f->data, f->size + base64_decoded_size_max(b64_len) + 1);
        if (!p) {
                file_read_set_error(f, -ENOMEM, NULL, "out of memory reading %s", f->path);
                file_read_close(c, f);
                return;
        }
        f->data = p;
        r = base64_decode(b64, b64_len, (uint8_t *) f->data + f->size, base64_decoded_size_max(b64_len), &decoded);
        if (r < 0 || decoded != count) {
                file_read_set_error(f, -EBADMSG, NULL, "guest-file-read of %s: bad base64 or count mismatch", f->path);
                file_read_close(c, f);
                return;
        }
        f->size += decoded;
        f->data[f->size] = '\0';

        /* A zero-length read without eof would loop forever on a misbehaving agent. */
        if (eof || count == 0)
                file_read_close(c, f);
        else
                file_read_next(c, f);
}

static void on_file_open(QgaClient *c, const QmpReply *reply, void *userdata) {
        FileRead *f = userdata;

        if (reply->error != 0) {
                file_read_set_error(f, reply->error, reply->error_class, "opening %s: %s", f->path, qmp_reply_error_text(reply));
                file_read_finish(c, f);
                return;
        }
        if (json_value_get_i64(reply->result, &f->handle) < 0) {
                /* No usable handle, so nothing to close. */
                file_read_set_error(f, -EBADMSG, NULL, "guest-file-open of %s returned no handle", f->path);
                file_read_finish(c, f);
                return;
        }
        file_read_next(c, f);
}

int qga_read_file_full(QgaClient *c,
                       const char *path,
                       size_t max_size,
                       uint64_t timeout_usec,
                       qga_file_fn callback,
                       void *userdata,
                       qmp_destroy_fn destroy) {
        json_object *args;
        FileRead *f;
        int r;

        if (!c || !path)
                return -EINVAL;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        *f = (FileRead) {
                .n_ref = 1,
                .path = strdup(path),
                .max_size = max_size > 0 ? max_size : QGA_FILE_MAX_DEFAULT,
                .timeout_usec = timeout_usec,
                .callback = callback,
                .userdata = userdata,
        };
        args = json_object_new_object();
        if (!f->path || !args || json_object_object_add(args, "path", json_object_new_string(path)) < 0 ||
            json_object_object_add(args, "mode", json_object_new_string("r")) < 0) {
                json_object_put(args);
                file_read_unref(f);
                return -ENOMEM;
        }
        r = file_read_execute(c, f, "guest-file-open", args, on_file_open);
        if (r >= 0)
                f->destroy = destroy; /* only an accepted request owns userdata */
        file_read_unref(f);       /* the command holds it now */
        return r;
}

/* ---- procfs readers ---- */

typedef enum ProcFile {
        PROC_VMSTAT,
        PROC_MEMINFO,
        PROC_PSI_MEMORY,
        PROC_ZONEINFO,
} ProcFile;

typedef struct ProcRead {
        ProcFile file;
        union {
                qga_vmstat_fn vmstat;
                qga_meminfo_fn meminfo;
                qga_psi_fn psi;
                qga_zoneinfo_fn zoneinfo;
        } callback;
        void *userdata;
} ProcRead;

static void on_proc_file(QgaClient *c, const QmpReply *reply, const char *data, size_t size, void *userdata) {
        ProcRead *p = userdata;
        QmpReply r = *reply;
        GuestVmstat vmstat;
        GuestMeminfo meminfo;
        GuestPsi psi;
        GuestZoneinfo zoneinfo;

        switch (p->file) {
        case PROC_VMSTAT:
                if (r.error == 0 && guest_vmstat_parse(data, size, &vmstat) == 0)
                        r = (QmpReply) { .error = -EBADMSG, .error_desc = "no known counter in /proc/vmstat" };
                if (p->callback.vmstat)
                        p->callback.vmstat(c, &r, r.error == 0 ? &vmstat : NULL, p->userdata);
                break;
        case PROC_MEMINFO:
                if (r.error == 0 && guest_meminfo_parse(data, size, &meminfo) == 0)
                        r = (QmpReply) { .error = -EBADMSG, .error_desc = "no known field in /proc/meminfo" };
                if (p->callback.meminfo)
                        p->callback.meminfo(c, &r, r.error == 0 ? &meminfo : NULL, p->userdata);
                break;
        case PROC_PSI_MEMORY:
                if (r.error == 0 && guest_psi_parse(data, size, &psi) < 0)
                        r = (QmpReply) { .error = -EBADMSG, .error_desc = "no \"some\" line in /proc/pressure/memory" };
                if (p->callback.psi)
                        p->callback.psi(c, &r, r.error == 0 ? &psi : NULL, p->userdata);
                break;
        case PROC_ZONEINFO:
                if (r.error == 0 && guest_zoneinfo_parse(data, size, GUEST_ZONEINFO_PAGE_SIZE, &zoneinfo) <= 0)
                        r = (QmpReply) { .error = -EBADMSG, .error_desc = "/proc/zoneinfo is not a kernel's" };
                if (p->callback.zoneinfo)
                        p->callback.zoneinfo(c, &r, r.error == 0 ? &zoneinfo : NULL, p->userdata);
                break;
        }
}

static int read_proc(QgaClient *c, const char *path, size_t max_size, uint64_t timeout_usec, const ProcRead *template) {
        ProcRead *p = malloc(sizeof(*p));
        int r;

        if (!p)
                return -ENOMEM;
        *p = *template;
        r = qga_read_file_full(c, path, max_size, timeout_usec, on_proc_file, p, free);
        if (r < 0)
                free(p);
        return r;
}

int qga_read_vmstat(QgaClient *c, uint64_t timeout_usec, qga_vmstat_fn callback, void *userdata) {
        return read_proc(c,
                         "/proc/vmstat",
                         0,
                         timeout_usec,
                         &(ProcRead) { .file = PROC_VMSTAT, .callback.vmstat = callback, .userdata = userdata });
}

int qga_read_meminfo(QgaClient *c, uint64_t timeout_usec, qga_meminfo_fn callback, void *userdata) {
        return read_proc(c,
                         "/proc/meminfo",
                         0,
                         timeout_usec,
                         &(ProcRead) { .file = PROC_MEMINFO, .callback.meminfo = callback, .userdata = userdata });
}

int qga_read_psi_memory(QgaClient *c, uint64_t timeout_usec, qga_psi_fn callback, void *userdata) {
        return read_proc(c,
                         "/proc/pressure/memory",
                         0,
                         timeout_usec,
                         &(ProcRead) { .file = PROC_PSI_MEMORY, .callback.psi = callback, .userdata = userdata });
}

int qga_read_zoneinfo(QgaClient *c, uint64_t timeout_usec, qga_zoneinfo_fn callback, void *userdata) {
        return read_proc(c,
                         "/proc/zoneinfo",
                         QGA_ZONEINFO_MAX,
                         timeout_usec,
                         &(ProcRead) { .file = PROC_ZONEINFO, .callback.zoneinfo = callback, .userdata = userdata });
}
