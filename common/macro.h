/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Small helpers shared by every part of rightsize, in the style of systemd's macro.h. */
#pragma once

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_result_ __attribute__((warn_unused_result))

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define CLAMP(x, lo, hi) ((x) < (lo) ? (lo) : (x) > (hi) ? (hi) : (x))

#define KIB (UINT64_C(1024))
#define MIB (UINT64_C(1024) * KIB)
#define GIB (UINT64_C(1024) * MIB)

/* Microseconds, as sd-event counts them. */
#define USEC_PER_SEC (UINT64_C(1000000))
#define USEC_PER_MSEC (UINT64_C(1000))

static inline void freep(void *p) {
        free(*(void **) p);
}

static inline void closep(int *fd) {
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

/* Hands ownership out of a _cleanup_ variable. */
#define TAKE_PTR(p)                         \
        ({                                  \
                __typeof__(p) _tmp_ = (p);  \
                (p) = NULL;                 \
                _tmp_;                      \
        })
#define TAKE_FD(fd)                 \
        ({                          \
                int _tmp_ = (fd);   \
                (fd) = -1;          \
                _tmp_;              \
        })

#define _cleanup_free_ _cleanup_(freep)
