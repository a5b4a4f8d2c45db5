/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The stop of a worker thread that sleeps on a condition variable until told to quit. */
#pragma once

#include <pthread.h>
#include <stdbool.h>

/* Sets *quit under `lock`, wakes the thread waiting on `wake`, and joins it. */
static inline void worker_thread_stop(pthread_t thread, pthread_mutex_t *lock, pthread_cond_t *wake, bool *quit) {
        pthread_mutex_lock(lock);
        *quit = true;
        pthread_cond_signal(wake);
        pthread_mutex_unlock(lock);
        (void) pthread_join(thread, NULL);
}
