/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/boot-history.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "daemon/log.h"
#include "daemon/state-file.h"
#include "daemon/state-file.h"

/* The file: this header, then `count` records of RECORD_SIZE bytes, nothing else. Host byte
 * order (the file never leaves the host; a file from another byte order fails the magic). */
#define HISTORY_MAGIC UINT64_C(0x3148534948535200) /* "\0RSHISH1" read as a little-endian u64 */
#define HISTORY_VERSION 1
#define HISTORY_NAME_MAX 256
#define RECORD_SIZE 40

typedef struct FileHeader {
        uint64_t magic;
        uint32_t version;
        uint32_t record_size;
        uint64_t interval_usec;
        uint32_t count;
        uint32_t name_len;
        char name[HISTORY_NAME_MAX];
} FileHeader;

typedef struct FileRecord {
        uint64_t realtime_usec, estimate, target, actual;
        double stall;
} FileRecord;
_Static_assert(sizeof(FileRecord) == RECORD_SIZE, "the record is the file's");

/* Sizes past this are no guest's (16 PiB): a value beyond it is a corrupt file. */
#define SIZE_SANE_MAX (UINT64_C(1) << 54)


void boot_history_init(BootHistory *h) {
        h->head = 0;
        h->n = 0;
}

const BootHistoryPoint *boot_history_at(const BootHistory *h, size_t i) {
        return &h->points[(h->head + i) % BOOT_HISTORY_MAX];
}

static void drop_oldest(BootHistory *h) {
        h->head = (h->head + 1) % BOOT_HISTORY_MAX;
        h->n--;
}

void boot_history_push(BootHistory *h, const BootHistoryPoint *p) {
        /* The clock set back: what lies after the new point did not happen in this timeline. */
        while (h->n > 0 && boot_history_at(h, h->n - 1)->realtime_usec >= p->realtime_usec)
                h->n--;
        if (h->n == BOOT_HISTORY_MAX)
                drop_oldest(h);
        h->points[(h->head + h->n) % BOOT_HISTORY_MAX] = *p;
        h->n++;
}

void boot_history_expire(BootHistory *h, uint64_t now) {
        while (h->n > 0 && boot_history_at(h, 0)->realtime_usec + BOOT_HISTORY_SPAN_USEC < now)
                drop_oldest(h);
}

int boot_history_path(const char *dir, const char *name, char **ret) {
        _cleanup_(freep) char *state = NULL;
        int r = state_file_path(dir, name, &state);
        if (r < 0)
                return r;
        size_t n = strlen(state) - strlen(".json");
        if (asprintf(ret, "%.*s.history", (int) n, state) < 0)
                return -ENOMEM;
        return 0;
}

int boot_history_serialize(const BootHistory *h, const char *name, void **ret, size_t *ret_size) {
        size_t name_len = strlen(name);
        if (name_len >= HISTORY_NAME_MAX)
                return -ENAMETOOLONG;
        size_t size = sizeof(FileHeader) + h->n * sizeof(FileRecord);
        char *buf = calloc(1, size);
        if (!buf)
                return -ENOMEM;
        FileHeader hdr = {
                .magic = HISTORY_MAGIC,
                .version = HISTORY_VERSION,
                .record_size = RECORD_SIZE,
                .interval_usec = BOOT_HISTORY_INTERVAL_USEC,
                .count = (uint32_t) h->n,
                .name_len = (uint32_t) name_len,
        };
        memcpy(hdr.name, name, name_len);
        memcpy(buf, &hdr, sizeof(hdr));
        for (size_t i = 0; i < h->n; i++) {
                const BootHistoryPoint *p = boot_history_at(h, i);
                FileRecord rec = { p->realtime_usec, p->estimate, p->target, p->actual, p->stall };
                memcpy(buf + sizeof(hdr) + i * sizeof(rec), &rec, sizeof(rec));
        }
        *ret = buf;
        *ret_size = size;
        return 0;
}

static bool size_valid(uint64_t v) {
        return v == BOOT_HISTORY_UNKNOWN || v <= SIZE_SANE_MAX;
}

int boot_history_parse(const void *data, size_t size, const char *name, uint64_t now, BootHistory *h,
                       const char **ret_reason) {
        FileHeader hdr;

        boot_history_init(h);
        if (size < sizeof(hdr)) {
                *ret_reason = "shorter than its header (truncated, or not a history file)";
                return -EBADMSG;
        }
        memcpy(&hdr, data, sizeof(hdr));
        if (hdr.magic != HISTORY_MAGIC) {
                *ret_reason = "not a rightsize history file (wrong magic)";
                return -EBADMSG;
        }
        if (hdr.version != HISTORY_VERSION || hdr.record_size != RECORD_SIZE ||
            hdr.interval_usec != BOOT_HISTORY_INTERVAL_USEC) {
                *ret_reason = "a version, record size or interval this daemon does not write";
                return -EPROTONOSUPPORT;
        }
        if (hdr.count > BOOT_HISTORY_MAX || size != sizeof(hdr) + (size_t) hdr.count * RECORD_SIZE) {
                *ret_reason = "its size does not match its count of points (truncated or padded)";
                return -EBADMSG;
        }
        if (hdr.name_len >= HISTORY_NAME_MAX || hdr.name_len != strlen(name) ||
            memcmp(hdr.name, name, hdr.name_len) != 0) {
                *ret_reason = "it belongs to another guest";
                return -EBADMSG;
        }
        for (uint32_t i = 0; i < hdr.count; i++) {
                FileRecord rec;
                memcpy(&rec, (const char *) data + sizeof(hdr) + (size_t) i * RECORD_SIZE, sizeof(rec));
                bool stall_ok = isnan(rec.stall) || (rec.stall >= 0 && rec.stall <= 1);
                if (rec.realtime_usec == 0 || !size_valid(rec.estimate) || !size_valid(rec.target) ||
                    !size_valid(rec.actual) || !stall_ok ||
                    (h->n > 0 && rec.realtime_usec <= boot_history_at(h, h->n - 1)->realtime_usec)) {
                        boot_history_init(h);
                        *ret_reason = "a point out of range or out of time order";
                        return -EBADMSG;
                }
                /* Points from ahead of the clock (set back since) would sit there for 14 days. */
                if (rec.realtime_usec > now + BOOT_HISTORY_INTERVAL_USEC)
                        break;
                boot_history_push(h, &(BootHistoryPoint) { rec.realtime_usec, rec.estimate, rec.target, rec.actual,
                                                           rec.stall });
        }
        boot_history_expire(h, now);
        return 0;
}

/* One rewrite of at most 80 KiB per guest per 10 minutes, atomically (temp file + rename: a
 * reader or a crash of the daemon sees the old file or the new one, never half of each). Not
 * fsynced: the history is advice, one guest's loss on a power cut costs a recommendation its
 * history (the loader discards a file the cut left empty), never a guest its memory; and the
 * fsyncs of every guest's rewrite, all due in the same tick after a start, would stall the event
 * loop that answers the guests. The state files, which guests' sizes hang on, stay synced. */
int boot_history_save(const char *dir, const char *name, const BootHistory *h) {
        _cleanup_(freep) char *path = NULL;
        _cleanup_(freep) void *data = NULL;
        size_t size;
        int r = boot_history_path(dir, name, &path);
        if (r >= 0)
                r = boot_history_serialize(h, name, &data, &size);
        if (r >= 0)
                r = write_file_atomic(path, data, size, 0600, 0);
        return r;
}

int boot_history_load(const char *dir, const char *name, uint64_t now, BootHistory *h) {
        _cleanup_(freep) char *path = NULL, *data = NULL;
        const char *reason = NULL;
        size_t size;
        int r;

        boot_history_init(h);
        r = boot_history_path(dir, name, &path);
        if (r < 0)
                return r;
        r = state_dir_read_guest_file(name, path, sizeof(FileHeader) + BOOT_HISTORY_MAX * RECORD_SIZE, "history file",
                                      &data, &size);
        if (r < 0)
                return r;
        r = boot_history_parse(data, size, name, now, h, &reason);
        if (r < 0)
                return log_named_guest_warning_errno(name, NULL, r, "Discarding history file %s: %s", path, reason);
        return 0;
}

/* ---- the recommendation ---- */

uint64_t boot_percentile(const uint64_t *sorted, size_t n, unsigned pct) {
        if (n == 0)
                return BOOT_HISTORY_UNKNOWN;
        size_t rank = (size_t) ((pct * (uint64_t) n + 99) / 100); /* ceil(pct/100 x n) */
        return sorted[MAX(rank, (size_t) 1) - 1];
}

uint64_t boot_with_margin(uint64_t value) {
        if (value == BOOT_HISTORY_UNKNOWN)
                return value;
        uint64_t with = value + (value / 100) * BOOT_MARGIN_PERCENT + (value % 100) * BOOT_MARGIN_PERCENT / 100;
        return (with + MIB - 1) / MIB * MIB;
}

static int compare_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static int compare_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

int boot_recommend(const BootHistory *h, uint64_t guest_max, BootRecommendation *ret) {
        _cleanup_(freep) uint64_t *est = malloc(MAX(h->n, (size_t) 1) * sizeof(uint64_t));
        _cleanup_(freep) double *stall = malloc(MAX(h->n, (size_t) 1) * sizeof(double));
        size_t n = 0, n_stall = 0;
        double stall_sum = 0;

        if (!est || !stall)
                return -ENOMEM;
        *ret = (BootRecommendation) { .p50 = BOOT_HISTORY_UNKNOWN, .p95 = BOOT_HISTORY_UNKNOWN,
                                      .peak = BOOT_HISTORY_UNKNOWN, .boot = BOOT_HISTORY_UNKNOWN,
                                      .floor = BOOT_HISTORY_UNKNOWN, .max = BOOT_HISTORY_UNKNOWN,
                                      .stall_mean = NAN, .stall_p95 = NAN };
        for (size_t i = 0; i < h->n; i++) {
                const BootHistoryPoint *p = boot_history_at(h, i);
                if (!isnan(p->stall)) {
                        stall[n_stall++] = p->stall;
                        stall_sum += p->stall;
                }
                if (p->estimate == BOOT_HISTORY_UNKNOWN)
                        continue;
                if (n == 0)
                        ret->since_usec = p->realtime_usec;
                ret->span_usec = p->realtime_usec - ret->since_usec;
                est[n++] = p->estimate;
        }
        if (n_stall > 0) {
                qsort(stall, n_stall, sizeof(double), compare_double);
                ret->stall_mean = stall_sum / (double) n_stall;
                ret->stall_p95 = stall[MAX((n_stall * 95 + 99) / 100, (size_t) 1) - 1];
        }
        ret->points = n;
        ret->enough = n > 0 && ret->span_usec >= BOOT_HISTORY_ENOUGH_USEC;
        if (n == 0)
                return 0;
        qsort(est, n, sizeof(uint64_t), compare_u64);
        ret->p50 = boot_percentile(est, n, 50);
        ret->p95 = boot_percentile(est, n, 95);
        ret->peak = est[n - 1];
        ret->max = boot_with_margin(ret->peak);
        ret->boot = boot_with_margin(ret->p95);
        if (guest_max != BOOT_HISTORY_UNKNOWN && guest_max > 0)
                ret->boot = MIN(ret->boot, guest_max / MIB * MIB);
        ret->floor = MIN(boot_with_margin(ret->p50), ret->boot);
        return 0;
}

static const char *format_day(uint64_t usec, char *buf, size_t len) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%d %H:%M UTC", &tm) == 0)
                snprintf(buf, len, "?");
        return buf;
}

int boot_rule_text(const BootRecommendation *r, const char *which, char *buf, size_t len) {
        char since[64];
        const char *what;

        if (r->points == 0)
                return snprintf(buf, len, "no history yet");
        if (strcmp(which, "boot") == 0)
                what = "p95";
        else if (strcmp(which, "floor") == 0)
                what = "p50";
        else
                what = "peak";
        double hours = (double) r->span_usec / (3600.0 * 1000000);
        char over[32];
        if (hours < 24)
                snprintf(over, sizeof(over), "%.1f hours", hours);
        else
                snprintf(over, sizeof(over), "%.1f days", hours / 24);
        int n = snprintf(buf, len, "%s of the estimate over %s (%zu points, since %s) + margin %d %%", what, over,
                         r->points, format_day(r->since_usec, since, sizeof(since)), BOOT_MARGIN_PERCENT);
        if (n >= 0 && (size_t) n < len && strcmp(which, "boot") == 0 && r->boot < boot_with_margin(r->p95))
                n += snprintf(buf + n, len - (size_t) n, ", capped at the guest's memory");
        if (n >= 0 && (size_t) n < len && !r->enough)
                n += snprintf(buf + n, len - (size_t) n, " [provisional: less than 1 day of history]");
        return n;
}
