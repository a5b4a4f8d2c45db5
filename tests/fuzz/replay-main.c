/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* main() for the fuzz targets when they are not linked with libFuzzer: replays inputs, one call
 * of LLVMFuzzerTestOneInput() per file, each in a buffer of exactly its size (so that ASan sees
 * any read past the end). Arguments are files or directories; without any, the target's own
 * tests/fuzz/corpus/NAME and tests/fuzz/regressions/NAME (NAME from argv[0]), the first of which
 * must not be empty.
 * A crash or a failed fuzz_assert() aborts, which fails the test, and so does an input that
 * takes the process's peak RSS up by more than REPLAY_RSS_GROWTH_MAX (a parser that turns a
 * megabyte of input into hundreds of MiB), as libFuzzer's -rss_limit_mb does in contrib/fuzz.
 * Not under ASan, whose quarantine keeps freed memory resident: there -rss_limit_mb judges. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "tests/fuzz/fuzz.h"

#ifndef FUZZ_DIR
#error "FUZZ_DIR must be the absolute path of tests/fuzz"
#endif

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* ASan's shadow memory and quarantine make the peak RSS say nothing about the parser. */
#ifdef UNDER_ASAN
#define REPLAY_CHECKS_RSS 0
#else
#define REPLAY_CHECKS_RSS 1
#endif

/* The largest inputs are the message caps (1 MiB of QMP): the parse of one, with its copies,
 * costs a few MiB. */
#define REPLAY_RSS_GROWTH_MAX ((uint64_t) 128 * MIB)

/* The peak resident set so far (VmHWM), in bytes; 0 when /proc cannot tell. */
static uint64_t peak_rss(void) {
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        unsigned long long kib;
        uint64_t peak = 0;

        while (f && peak == 0 && fgets(line, sizeof(line), f))
                if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
                        peak = (uint64_t) kib * 1024;
        if (f)
                fclose(f);
        return peak;
}

static int replay_file(const char *path) {
        _cleanup_(closep) int fd = -1;
        _cleanup_free_ uint8_t *data = NULL;
        struct stat st;
        size_t size = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -errno;
        }
        /* malloc(0) may return NULL; the target gets a valid pointer either way. */
        data = malloc(MAX((size_t) st.st_size, (size_t) 1));
        if (!data)
                return -ENOMEM;
        while (size < (size_t) st.st_size) {
                ssize_t n = read(fd, data + size, (size_t) st.st_size - size);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        fprintf(stderr, "%s: short read\n", path);
                        return -EIO;
                }
                size += (size_t) n;
        }
        uint64_t before = peak_rss();
        (void) LLVMFuzzerTestOneInput(data, size);
        uint64_t after = peak_rss();
        if (REPLAY_CHECKS_RSS && before > 0 && after > before + REPLAY_RSS_GROWTH_MAX) {
                fprintf(stderr, "%s: %zu bytes of input took the peak RSS from %.1f to %.1f MiB\n", path, size,
                        (double) before / MIB, (double) after / MIB);
                abort();
        }
        return 0;
}

static int compare_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Returns the number of inputs replayed, or -errno. */
static int replay_path(const char *path, bool missing_ok) {
        struct stat st;
        char **names = NULL;
        size_t n = 0;
        int count = 0, r = 0;
        DIR *d;

        if (stat(path, &st) < 0) {
                if (errno == ENOENT && missing_ok)
                        return 0;
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -errno;
        }
        if (!S_ISDIR(st.st_mode))
                return replay_file(path) < 0 ? -EIO : 1;

        d = opendir(path);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                char **grown;

                if (de->d_name[0] == '.')
                        continue;
                grown = realloc(names, (n + 1) * sizeof(char *));
                if (!grown || !(grown[n] = strdup(de->d_name))) {
                        names = grown ? grown : names;
                        r = -ENOMEM;
                        break;
                }
                names = grown;
                n++;
        }
        closedir(d);
        /* Sorted, so a failure names the same file on every run. */
        if (n > 0)
                qsort(names, n, sizeof(char *), compare_names);
        for (size_t i = 0; i < n && r >= 0; i++) {
                _cleanup_free_ char *file = NULL;

                if (asprintf(&file, "%s/%s", path, names[i]) < 0)
                        r = -ENOMEM;
                else if (replay_file(file) < 0)
                        r = -EIO;
                else
                        count++;
        }
        for (size_t i = 0; i < n; i++)
                free(names[i]);
        free(names);
        return r < 0 ? r : count;
}

int main(int argc, char **argv) {
        _cleanup_free_ char *corpus = NULL, *regressions = NULL;
        const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
        int r;

        if (argc > 1) {
                for (int i = 1; i < argc; i++) {
                        r = replay_path(argv[i], false);
                        if (r < 0)
                                return EXIT_FAILURE;
                        printf("%s: replayed %d input(s) from %s\n", name, r, argv[i]);
                }
                return EXIT_SUCCESS;
        }

        if (asprintf(&corpus, "%s/corpus/%s", FUZZ_DIR, name) < 0 ||
            asprintf(&regressions, "%s/regressions/%s", FUZZ_DIR, name) < 0)
                return EXIT_FAILURE;
        r = replay_path(corpus, false);
        if (r <= 0) {
                fprintf(stderr, "%s: no seed corpus in %s\n", name, corpus);
                return EXIT_FAILURE;
        }
        printf("%s: replayed %d corpus input(s) from %s\n", name, r, corpus);
        r = replay_path(regressions, true);
        if (r < 0)
                return EXIT_FAILURE;
        printf("%s: replayed %d regression input(s) from %s\n", name, r, regressions);
        return EXIT_SUCCESS;
}
