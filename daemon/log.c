/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where log lines go and how they look. Under systemd, stderr is already a journal stream, but
 * writing the native protocol instead keeps the GUEST= and STATE= fields searchable
 * (journalctl GUEST=web1). */

#define SD_JOURNAL_SUPPRESS_LOCATION /* we pass the caller's CODE_FILE= ourselves */

#include "daemon/log.h"
#include "daemon/log-ratelimit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <systemd/sd-journal.h>

int log_max_level = LOG_INFO;
static LogTarget log_target = LOG_TARGET_STDERR;

static const char *const level_names[] = {
        [LOG_EMERG] = "emerg",   [LOG_ALERT] = "alert",   [LOG_CRIT] = "crit", [LOG_ERR] = "err",
        [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice", [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

void log_set_max_level(int level) {
        log_max_level = CLAMP(level, LOG_EMERG, LOG_DEBUG);
}

int log_get_max_level(void) {
        return log_max_level;
}

bool log_stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        int consumed = 0;

        if (!e)
                return false;
        if (sscanf(e, "%llu:%llu%n", &dev, &ino, &consumed) != 2 || e[consumed] != '\0')
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;

        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void log_set_target(LogTarget target) {
        if (target == LOG_TARGET_AUTO)
                target = log_stderr_is_journal() ? LOG_TARGET_JOURNAL : LOG_TARGET_STDERR;
        if (target >= 0 && target < _LOG_TARGET_MAX)
                log_target = target;
}

LogTarget log_get_target(void) {
        return log_target;
}

void log_open(void) {
        log_set_target(LOG_TARGET_AUTO);
}

int log_level_from_string(const char *s) {
        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ARRAY_SIZE(level_names); i++)
                if (strcasecmp(s, level_names[i]) == 0)
                        return (int) i;
        if (strcasecmp(s, "warn") == 0)
                return LOG_WARNING;
        if (strcasecmp(s, "error") == 0)
                return LOG_ERR;
        if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
                return s[0] - '0';
        return -EINVAL;
}

const char *log_level_to_string(int level) {
        if (level < 0 || (size_t) level >= ARRAY_SIZE(level_names))
                return NULL;
        return level_names[level];
}

/* Appends s to the line, writing control characters as \xNN: guest names come from socket file
 * names and libvirt, and must not be able to forge extra lines or terminal escapes. */
static void append_escaped(FILE *f, const char *s) {
        for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
                if (*p < 0x20 || *p == 0x7f)
                        fprintf(f, "\\x%02x", *p);
                else
                        fputc(*p, f);
        }
}

static void write_all(int fd, const char *buf, size_t len) {
        while (len > 0) {
                ssize_t n = write(fd, buf, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return; /* nowhere left to complain to */
                }
                buf += n;
                len -= (size_t) n;
        }
}

static void log_to_stderr(int level, const char *guest, const char *state, const char *message) {
        _cleanup_(freep) char *line = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&line, &size);
        if (!f) {
                write_all(STDERR_FILENO, message, strlen(message));
                write_all(STDERR_FILENO, "\n", 1);
                return;
        }

        fprintf(f, "%s: ", log_level_to_string(level));
        if (guest) {
                append_escaped(f, guest);
                if (state) {
                        fputs(" [", f);
                        append_escaped(f, state);
                        fputc(']', f);
                }
                fputs(": ", f);
        }
        append_escaped(f, message);
        fputc('\n', f);
        if (fclose(f) != 0)
                return;

        /* One write per line, so lines from concurrent writers never interleave. */
        write_all(STDERR_FILENO, line, size);
}

/* "KEY=value" in a fresh allocation, or NULL. */
static char *journal_field(const char *key, const char *value) {
        char *s;

        if (asprintf(&s, "%s=%s", key, value) < 0)
                return NULL;
        return s;
}

static int log_to_journal(int level, int error, const char *file, int line, const char *func,
                          const char *guest, const char *state, const LogEvent *event, const char *message) {
        char priority[sizeof("PRIORITY=") + 4], code_line[sizeof("CODE_LINE=") + 12],
                errno_field[sizeof("ERRNO=") + 12], message_id[sizeof("MESSAGE_ID=") + 32],
                target[sizeof("TARGET_BYTES=") + 20], actual[sizeof("ACTUAL_BYTES=") + 20],
                estimate[sizeof("ESTIMATE_BYTES=") + 20], fault_kind[sizeof("FAULT_KIND=") + 32];
        _cleanup_(freep) char *m = NULL, *code_file = NULL, *code_func = NULL, *ident = NULL,
                              *guest_field = NULL, *state_field = NULL, *uuid_field = NULL;
        struct iovec iov[16];
        int n = 0;

        /* libsystemd reports success when journald is not there at all; we want the line. */
        if (access("/run/systemd/journal/socket", F_OK) < 0)
                return -errno;

        m = journal_field("MESSAGE", message);
        code_file = journal_field("CODE_FILE", file ?: "");
        code_func = journal_field("CODE_FUNC", func ?: "");
        ident = journal_field("SYSLOG_IDENTIFIER", program_invocation_short_name);
        if (guest)
                guest_field = journal_field("GUEST", guest);
        if (state)
                state_field = journal_field("STATE", state);
        /* The UUID comes from the guest's QEMU or libvirt: sent binary-safe like GUEST=. */
        if (event && event->guest_uuid && event->guest_uuid[0])
                uuid_field = journal_field("GUEST_UUID", event->guest_uuid);
        if (!m || !code_file || !code_func || !ident || (guest && !guest_field) || (state && !state_field) ||
            (event && event->guest_uuid && event->guest_uuid[0] && !uuid_field))
                return -ENOMEM;

        snprintf(priority, sizeof(priority), "PRIORITY=%i", level);
        snprintf(code_line, sizeof(code_line), "CODE_LINE=%i", line);

#define ADD(s) iov[n++] = (struct iovec){ .iov_base = (void *) (s), .iov_len = strlen(s) }
        ADD(m);
        ADD(priority);
        ADD(ident);
        ADD(code_file);
        ADD(code_line);
        ADD(code_func);
        if (guest_field)
                ADD(guest_field);
        if (state_field)
                ADD(state_field);
        if (error != 0) {
                snprintf(errno_field, sizeof(errno_field), "ERRNO=%i", error < 0 ? -error : error);
                ADD(errno_field);
        }
        if (event) {
                if (event->message_id) {
                        snprintf(message_id, sizeof(message_id), "MESSAGE_ID=%.32s", event->message_id);
                        ADD(message_id);
                }
                if (uuid_field)
                        ADD(uuid_field);
                if (event->target_bytes != UINT64_MAX) {
                        snprintf(target, sizeof(target), "TARGET_BYTES=%" PRIu64, event->target_bytes);
                        ADD(target);
                }
                if (event->actual_bytes != UINT64_MAX) {
                        snprintf(actual, sizeof(actual), "ACTUAL_BYTES=%" PRIu64, event->actual_bytes);
                        ADD(actual);
                }
                if (event->estimate_bytes != UINT64_MAX) {
                        snprintf(estimate, sizeof(estimate), "ESTIMATE_BYTES=%" PRIu64, event->estimate_bytes);
                        ADD(estimate);
                }
                /* A name from guest-fault.c's table: short, plain ASCII. */
                if (event->fault_kind) {
                        snprintf(fault_kind, sizeof(fault_kind), "FAULT_KIND=%.32s", event->fault_kind);
                        ADD(fault_kind);
                }
        }
#undef ADD

        return sd_journal_sendv(iov, n);
}

/* A line past the rate limit, printf-style. */
_printf_(9, 10) static void log_emit(int level, int error, const char *file, int line, const char *func,
                                     const char *guest, const char *state, const LogEvent *event,
                                     const char *format, ...) {
        _cleanup_(freep) char *message = NULL;
        va_list ap;

        va_start(ap, format);
        if (vasprintf(&message, format, ap) < 0)
                message = NULL;
        va_end(ap);
        if (!message)
                return;
        if (log_target != LOG_TARGET_JOURNAL ||
            log_to_journal(level, error, file, line, func, guest, state, event, message) < 0)
                log_to_stderr(level, guest, state, message);
}

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *guest, const char *state, const LogEvent *event, const char *format, ...) {
        int saved_errno = errno, ret = LOG_ERRNO_VALUE(error);
        _cleanup_(freep) char *message = NULL;
        va_list ap;

        if (level > log_max_level)
                return ret;

        /* Notices and worse about a guest are the guest's doing (its faults, its text): limited
         * per guest and call site. Info and debug lines are the decisions, one a guest per poll
         * interval at most, which the operator chose: an audit trail, never thinned. */
        LogRatelimitVerdict verdict = { .write = true };
        if (level <= LOG_NOTICE)
                verdict = log_ratelimit_check(guest, file, line, event && event->message_id);
        if (!verdict.write) {
                errno = saved_errno;
                return ret;
        }
        if (verdict.suppressed_guest > 0)
                log_emit(level, 0, file, line, func, guest, state, NULL,
                         "Suppressed %u messages about this guest: over its share of the log",
                         verdict.suppressed_guest);
        if (verdict.suppressed_here > 0)
                log_emit(level, 0, file, line, func, guest, state, NULL,
                         "Suppressed %u messages like the next one about this guest", verdict.suppressed_here);

        /* %m prints the error we were given, not whatever errno happens to hold. */
        if (error != 0)
                errno = error < 0 ? -error : error;
        va_start(ap, format);
        if (vasprintf(&message, format, ap) < 0)
                message = NULL;
        va_end(ap);

        if (log_target != LOG_TARGET_JOURNAL ||
            log_to_journal(level, error, file, line, func, guest, state, event,
                           message ?:  "(out of memory while formatting a log message)") < 0)
                log_to_stderr(level, guest, state,
                              message ?: "(out of memory while formatting a log message)");

        errno = saved_errno;
        return ret;
}
