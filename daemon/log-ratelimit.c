/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "daemon/log-ratelimit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/time-util.h"

/* A fixed table: a hostile guest set cannot grow it. Past PROBES slots the least recently used
 * entry of the probe window is forgotten (its count starts over). */
#define SLOTS 4096
#define PROBES 16

typedef struct Entry {
        char *guest;               /* NULL: free slot */
        const char *file;          /* NULL: the guest's budget over all its sites */
        int line;
        uint64_t begin;            /* the current window's start */
        unsigned num;              /* lines in the window, written or not */
        unsigned suppressed;       /* dropped and not yet said */
        uint64_t used;
} Entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static Entry table[SLOTS];
static uint64_t interval_usec = LOG_RATELIMIT_INTERVAL_USEC;
static unsigned burst = LOG_RATELIMIT_BURST, guest_burst = LOG_RATELIMIT_GUEST_BURST;
static uint64_t (*clock_now)(void);

static uint64_t monotonic_usec(void) {
        return now_usec(CLOCK_MONOTONIC);
}

static uint64_t hash(const char *guest, const char *file, int line) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        for (const unsigned char *p = (const unsigned char *) guest; *p; p++)
                h = (h ^ *p) * UINT64_C(0x100000001b3);
        h = (h ^ (uintptr_t) file) * UINT64_C(0x100000001b3);
        return (h ^ (uint64_t) (unsigned) line) * UINT64_C(0x100000001b3);
}

/* Under lock: the entry of (guest, file, line), made when missing; NULL without memory. */
static Entry *entry_get(const char *guest, const char *file, int line, uint64_t now) {
        size_t start = hash(guest, file, line) % SLOTS;
        Entry *victim = NULL;

        for (size_t i = 0; i < PROBES; i++) {
                Entry *e = &table[(start + i) % SLOTS];
                if (!e->guest) {
                        if (!victim || victim->guest)
                                victim = e;
                        continue;
                }
                if (e->file == file && e->line == line && strcmp(e->guest, guest) == 0) {
                        e->used = now;
                        return e;
                }
                if (!victim || (victim->guest && e->used < victim->used))
                        victim = e;
        }
        char *copy = strdup(guest);
        if (!copy)
                return NULL;
        free(victim->guest);
        *victim = (Entry){ .guest = copy, .file = file, .line = line, .begin = now, .used = now };
        return victim;
}

/* Under lock: counts a line against e; true when it may be written. *ret_said takes the count
 * of lines dropped before it, when a new window begins. */
static bool entry_take(Entry *e, unsigned limit, uint64_t now, unsigned *ret_said) {
        if (now - e->begin >= interval_usec) {
                e->begin = now;
                e->num = 0;
        }
        if (e->num < limit) {
                e->num++;
                *ret_said = e->suppressed;
                e->suppressed = 0;
                return true;
        }
        e->suppressed++;
        return false;
}

LogRatelimitVerdict log_ratelimit_check(const char *guest, const char *file, int line, bool event) {
        LogRatelimitVerdict v = { .write = true };
        Entry *site, *all;
        uint64_t now;

        if (!guest || burst == 0)
                return v;
        pthread_mutex_lock(&lock);
        now = clock_now ? clock_now() : monotonic_usec();
        site = entry_get(guest, file ?: "", line, now);
        all = event ? NULL : entry_get(guest, NULL, 0, now);
        /* Without memory for a count, the line goes out: losing lines is worse than a flood. */
        if (site && !entry_take(site, burst, now, &v.suppressed_here))
                v.write = false;
        else if (all && !entry_take(all, guest_burst, now, &v.suppressed_guest)) {
                /* Dropped by the guest's budget: still counted as suppressed here. */
                v.write = false;
                if (site) {
                        site->num--;
                        site->suppressed += v.suppressed_here + 1;
                        v.suppressed_here = 0;
                }
        }
        pthread_mutex_unlock(&lock);
        return v;
}

void log_ratelimit_configure(uint64_t interval, unsigned site_burst, unsigned per_guest_burst) {
        pthread_mutex_lock(&lock);
        interval_usec = interval;
        burst = site_burst;
        guest_burst = per_guest_burst;
        pthread_mutex_unlock(&lock);
}

void log_ratelimit_set_clock(uint64_t (*now)(void)) {
        pthread_mutex_lock(&lock);
        clock_now = now;
        pthread_mutex_unlock(&lock);
}

void log_ratelimit_reset(void) {
        pthread_mutex_lock(&lock);
        for (size_t i = 0; i < SLOTS; i++) {
                free(table[i].guest);
                table[i] = (Entry){};
        }
        pthread_mutex_unlock(&lock);
}
