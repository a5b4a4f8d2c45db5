/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Logging for rightsized: structured journal entries under systemd, readable lines on stderr
 * elsewhere. Every log call returns -errno of the error it was given (or 0), so that error paths
 * can be written as `return log_error_errno(r, "...: %m");`, in the manner of systemd. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <syslog.h>

#include "common/macro.h"

typedef enum LogTarget {
        LOG_TARGET_AUTO,    /* journal when stderr is connected to it (JOURNAL_STREAM), else stderr */
        LOG_TARGET_JOURNAL, /* native journal protocol, with structured fields */
        LOG_TARGET_STDERR,  /* "level: guest [state]: message" lines */
        _LOG_TARGET_MAX,
} LogTarget;

/* The highest syslog priority (LOG_EMERG=0 .. LOG_DEBUG=7) that is still written. Read by the
 * macros below so that filtered messages are never formatted. */
extern int log_max_level;

void log_set_max_level(int level);
int log_get_max_level(void);

/* Chooses where messages go. LOG_TARGET_AUTO is resolved immediately (see log_open()). */
void log_set_target(LogTarget target);
LogTarget log_get_target(void);

/* Resolves the target from the environment: the journal if $JOURNAL_STREAM names the device and
 * inode of our stderr, as systemd documents for services, else stderr. Call once at start-up. */
void log_open(void);

/* True if $JOURNAL_STREAM ("DEVICE:INODE") matches the file behind fd 2. */
bool log_stderr_is_journal(void);

/* "emerg" .. "debug" (also "warn", "error" and the digits 0..7); -EINVAL otherwise. */
int log_level_from_string(const char *s);
/* NULL for an out-of-range level. */
const char *log_level_to_string(int level);

/* The kinds of event a journal reader filters on (`journalctl MESSAGE_ID=...`), as systemd's
 * catalog IDs: fixed 128-bit IDs, never reused for another kind. */
#define LOG_MESSAGE_RESIZE "d19a2540928d43e68da5bc3389b278c8"    /* a guest's target changed */
#define LOG_MESSAGE_EMERGENCY "acffe7dac5694f5a9345a80e54ee50a3" /* a guest entered EMERGENCY */
#define LOG_MESSAGE_FAULT "b4ec782ba618482aa5ccd992d839a935"     /* a guest's fault began */
#define LOG_MESSAGE_OUTSIDE "5f0c3be1d0a44e47a9f2b6d0c8e71a32"   /* balloon set from outside: paused */

/* An event's fields beside MESSAGE, so that `journalctl -o json` is a history export that
 * survives restarts: MESSAGE_ID=, GUEST_UUID=, TARGET_BYTES=, ACTUAL_BYTES=, ESTIMATE_BYTES=,
 * FAULT_KIND=. */
typedef struct LogEvent {
        const char *message_id;  /* one of LOG_MESSAGE_*, or NULL */
        const char *guest_uuid;  /* NULL or "": not sent */
        uint64_t target_bytes, actual_bytes, estimate_bytes; /* UINT64_MAX: not sent */
        const char *fault_kind;  /* a fault's kind (guest_fault_to_string()), NULL: not sent */
} LogEvent;

/* The one function behind the macros. `error` may be positive or negative; errno is set to it
 * while formatting so %m works. `guest`, `state` and `event` may be NULL. Returns -abs(error). */
int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *guest, const char *state, const LogEvent *event, const char *format, ...)
        _printf_(9, 10);

#define LOG_ERRNO_VALUE(e) ((e) < 0 ? (e) : -(e))

#define log_full_guest_errno(level, error, guest, state, ...)                                   \
        ({                                                                                      \
                int _level_ = (level), _error_ = (error);                                       \
                _level_ <= log_max_level                                                        \
                        ? log_internal(_level_, _error_, __FILE__, __LINE__, __func__, (guest), \
                                       (state), NULL, __VA_ARGS__)                              \
                        : LOG_ERRNO_VALUE(_error_);                                             \
        })

#define log_full_errno(level, error, ...) log_full_guest_errno(level, error, NULL, NULL, __VA_ARGS__)
#define log_full(level, ...) ((void) log_full_errno(level, 0, __VA_ARGS__))

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, error, __VA_ARGS__)
#define log_info_errno(error, ...) log_full_errno(LOG_INFO, error, __VA_ARGS__)
#define log_notice_errno(error, ...) log_full_errno(LOG_NOTICE, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, error, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, error, __VA_ARGS__)

/* Per-guest messages carry GUEST= and STATE= fields in the journal and a prefix on stderr. */
#define log_named_guest_full(level, guest, state, ...) \
        ((void) log_full_guest_errno(level, 0, guest, state, __VA_ARGS__))
#define log_named_guest_debug(guest, state, ...) log_named_guest_full(LOG_DEBUG, guest, state, __VA_ARGS__)
#define log_named_guest_info(guest, state, ...) log_named_guest_full(LOG_INFO, guest, state, __VA_ARGS__)
#define log_named_guest_notice(guest, state, ...) log_named_guest_full(LOG_NOTICE, guest, state, __VA_ARGS__)
#define log_named_guest_warning(guest, state, ...) log_named_guest_full(LOG_WARNING, guest, state, __VA_ARGS__)
#define log_named_guest_error(guest, state, ...) log_named_guest_full(LOG_ERR, guest, state, __VA_ARGS__)

#define log_named_guest_debug_errno(guest, state, error, ...) \
        log_full_guest_errno(LOG_DEBUG, error, guest, state, __VA_ARGS__)
#define log_named_guest_info_errno(guest, state, error, ...) \
        log_full_guest_errno(LOG_INFO, error, guest, state, __VA_ARGS__)
#define log_named_guest_warning_errno(guest, state, error, ...) \
        log_full_guest_errno(LOG_WARNING, error, guest, state, __VA_ARGS__)
#define log_named_guest_error_errno(guest, state, error, ...) \
        log_full_guest_errno(LOG_ERR, error, guest, state, __VA_ARGS__)

/* An event about a guest: its message plus the LogEvent's fields in the journal. */
#define log_named_guest_event(level, guest, state, event, ...)                                  \
        ({                                                                                      \
                int _level_ = (level);                                                          \
                if (_level_ <= log_max_level)                                                   \
                        (void) log_internal(_level_, 0, __FILE__, __LINE__, __func__, (guest),  \
                                            (state), (event), __VA_ARGS__);                     \
        })

#define log_oom() log_error_errno(ENOMEM, "Out of memory.")
