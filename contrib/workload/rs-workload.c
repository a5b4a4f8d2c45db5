/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * rs-workload: a memory workload with a known working set, run inside the test guest.
 *
 * Every pass writes one byte to each page of an anonymous set, read()s the first
 * file_mib MiB of a file through the page cache, and optionally streams once through a
 * big file.  Phases change the set over time.  Every pass prints one line:
 *
 *   rs-workload: pass=N t=SECONDS anon_mib=A file_mib=F ms=PASS_MS majflt=D minflt=D
 *
 * (PASS_MS in milliseconds to the microsecond: a pass takes about 10 ms under TCG, and a
 * benchmark's median pass ratio would move in 10 % steps with whole milliseconds)
 * (with --stream, followed by stream_mib=S stream_ms=STREAM_MS: the part of the pass spent
 * streaming, so that the hot set's time and the stream's throughput can be told apart)
 *
 * With --vmstat, each pass line is followed by the guest-wide counters a benchmark needs
 * (cumulative, from /proc/vmstat), so that they reach the host over the serial console
 * even while the guest agent is busy serving rightsized:
 *
 *   rs-workload: vmstat pass=N refault_anon=C refault_file=C pgmajfault=C pswpin=C pswpout=C oom_kill=C
 *                pgscan_kswapd=C pgscan_direct=C
 *
 * It is statically linked so that it runs in the busybox initramfs.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/time-util.h"

#define PROGRAM "rs-workload"
#define MAX_PHASES 64
/* Larger than any guest we will boot, small enough that MiB * MIB cannot overflow. */
#define MAX_MIB (UINT64_C(1) << 24)
#define IO_CHUNK (1 * MIB)

struct phase {
        uint64_t at_sec;
        uint64_t anon_mib;
        int64_t file_mib; /* -1: keep the current file set */
};

struct config {
        uint64_t anon_mib;
        uint64_t file_mib;
        const char *file_path;
        const char *stream_path;
        uint64_t stream_mib;
        int64_t stream_offset_mib; /* -1: automatic */
        uint64_t passes;
        uint64_t sleep_ms;
        bool no_hugepage;
        bool vmstat;
        uint64_t scatter_mib;
        struct phase phases[MAX_PHASES];
        size_t n_phases;
};

struct state {
        uint8_t *anon;
        uint64_t anon_mib;
        uint64_t file_mib;
        int file_fd;
        int stream_fd;
        uint64_t stream_offset;
        uint8_t *io_buf;
        size_t page_size;
};

_printf_(1, 2) static void log_line(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        fputs(PROGRAM ": ", stdout);
        vfprintf(stdout, fmt, ap);
        fputc('\n', stdout);
        fflush(stdout);
        va_end(ap);
}

/* Errors go to stdout too: the guest's serial console is the one channel tests read. */
#define log_error(fmt, ...) log_line("error: " fmt, ##__VA_ARGS__)

static int parse_u64(const char *s, uint64_t max, uint64_t *ret) {
        char *end;
        unsigned long long v;

        if (!s || *s == '\0' || *s == '-' || *s == '+')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0)
                return -errno;
        if (*end != '\0')
                return -EINVAL;
        if (v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}

/* SECS:ANON_MIB[:FILE_MIB] */
static int parse_phase(const char *arg, struct phase *ret) {
        char buf[128], *secs, *anon, *file, *extra;
        struct phase p = { .file_mib = -1 };
        uint64_t v;

        if (strlen(arg) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, arg);

        secs = buf;
        anon = strchr(secs, ':');
        if (!anon)
                return -EINVAL;
        *anon++ = '\0';
        file = strchr(anon, ':');
        if (file) {
                *file++ = '\0';
                extra = strchr(file, ':');
                if (extra)
                        return -EINVAL;
        }

        if (parse_u64(secs, UINT32_MAX, &p.at_sec) < 0 ||
            parse_u64(anon, MAX_MIB, &p.anon_mib) < 0)
                return -EINVAL;
        if (file) {
                if (parse_u64(file, MAX_MIB, &v) < 0)
                        return -EINVAL;
                p.file_mib = (int64_t) v;
        }

        *ret = p;
        return 0;
}

static int compare_phases(const void *a, const void *b) {
        const struct phase *x = a, *y = b;

        return x->at_sec < y->at_sec ? -1 : x->at_sec > y->at_sec ? 1 : 0;
}

static void usage(FILE *f) {
        fputs("Usage: " PROGRAM " [OPTIONS]\n"
              "  --anon-mib N            anonymous set, one byte written per page every pass\n"
              "  --file PATH             file (or block device) read through the page cache\n"
              "  --file-mib N            read the first N MiB of --file every pass\n"
              "  --phase SECS:ANON[:FILE]  at SECS seconds after start, change the sets (repeatable);\n"
              "                          SIGUSR1 moves to the next phase at once\n"
              "  --stream PATH           file (or block device) streamed through once per pass\n"
              "  --stream-mib N          MiB streamed per pass\n"
              "  --stream-offset-mib N   where the stream starts (default 0, or after the --file\n"
              "                          set when both name the same file)\n"
              "  --passes N              stop after N passes (0 = forever, the default)\n"
              "  --sleep-ms N            pause between passes (default 1000)\n"
              "  --no-hugepage           madvise(MADV_NOHUGEPAGE) the anonymous set\n"
              "  --scatter-mib N         before the set is first written, leave N/2 MiB of free memory\n"
              "                          in single pages in random order, so that the set lands\n"
              "                          scattered in physical memory (as after a swap-in), with no\n"
              "                          swap or balloon involved\n"
              "  --vmstat                after every pass, print the guest's refault, fault, swap\n"
              "                          and OOM-kill counters from /proc/vmstat\n"
              "  --help\n",
              f);
}

enum {
        ARG_ANON_MIB = 0x100,
        ARG_FILE,
        ARG_FILE_MIB,
        ARG_PHASE,
        ARG_STREAM,
        ARG_STREAM_MIB,
        ARG_STREAM_OFFSET_MIB,
        ARG_PASSES,
        ARG_SLEEP_MS,
        ARG_NO_HUGEPAGE,
        ARG_VMSTAT,
        ARG_SCATTER_MIB,
        ARG_HELP,
};

static int parse_argv(int argc, char *argv[], struct config *c) {
        static const struct option options[] = {
                { "anon-mib", required_argument, NULL, ARG_ANON_MIB },
                { "scatter-mib", required_argument, NULL, ARG_SCATTER_MIB },
                { "file", required_argument, NULL, ARG_FILE },
                { "file-mib", required_argument, NULL, ARG_FILE_MIB },
                { "phase", required_argument, NULL, ARG_PHASE },
                { "stream", required_argument, NULL, ARG_STREAM },
                { "stream-mib", required_argument, NULL, ARG_STREAM_MIB },
                { "stream-offset-mib", required_argument, NULL, ARG_STREAM_OFFSET_MIB },
                { "passes", required_argument, NULL, ARG_PASSES },
                { "sleep-ms", required_argument, NULL, ARG_SLEEP_MS },
                { "no-hugepage", no_argument, NULL, ARG_NO_HUGEPAGE },
                { "vmstat", no_argument, NULL, ARG_VMSTAT },
                { "help", no_argument, NULL, ARG_HELP },
                {}
        };
        uint64_t v;
        int opt, r;

        while ((opt = getopt_long(argc, argv, "", options, NULL)) >= 0) {
                r = 0;
                switch (opt) {
                case ARG_ANON_MIB:
                        r = parse_u64(optarg, MAX_MIB, &c->anon_mib);
                        break;
                case ARG_FILE:
                        c->file_path = optarg;
                        break;
                case ARG_FILE_MIB:
                        r = parse_u64(optarg, MAX_MIB, &c->file_mib);
                        break;
                case ARG_PHASE:
                        if (c->n_phases >= MAX_PHASES) {
                                log_error("too many --phase options (at most %d)", MAX_PHASES);
                                return -E2BIG;
                        }
                        r = parse_phase(optarg, &c->phases[c->n_phases]);
                        if (r >= 0)
                                c->n_phases++;
                        break;
                case ARG_STREAM:
                        c->stream_path = optarg;
                        break;
                case ARG_STREAM_MIB:
                        r = parse_u64(optarg, MAX_MIB, &c->stream_mib);
                        break;
                case ARG_STREAM_OFFSET_MIB:
                        r = parse_u64(optarg, MAX_MIB, &v);
                        c->stream_offset_mib = (int64_t) v;
                        break;
                case ARG_PASSES:
                        r = parse_u64(optarg, UINT64_MAX, &c->passes);
                        break;
                case ARG_SLEEP_MS:
                        r = parse_u64(optarg, 24 * 3600 * 1000, &c->sleep_ms);
                        break;
                case ARG_NO_HUGEPAGE:
                        c->no_hugepage = true;
                        break;
                case ARG_VMSTAT:
                        c->vmstat = true;
                        break;
                case ARG_SCATTER_MIB:
                        r = parse_u64(optarg, MAX_MIB, &c->scatter_mib);
                        break;
                case ARG_HELP:
                        usage(stdout);
                        exit(EXIT_SUCCESS);
                default:
                        usage(stderr);
                        return -EINVAL;
                }
                if (r < 0) {
                        log_error("invalid value for --%s: '%s'", options[opt - ARG_ANON_MIB].name,
                                  optarg);
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                log_error("unexpected argument '%s'", argv[optind]);
                return -EINVAL;
        }

        qsort(c->phases, c->n_phases, sizeof(c->phases[0]), compare_phases);

        if (!c->file_path) {
                bool wants_file = c->file_mib > 0;

                for (size_t i = 0; i < c->n_phases; i++)
                        wants_file = wants_file || c->phases[i].file_mib > 0;
                if (wants_file) {
                        log_error("a file set needs --file PATH");
                        return -EINVAL;
                }
        }
        if (c->stream_mib > 0 && !c->stream_path) {
                log_error("--stream-mib needs --stream PATH");
                return -EINVAL;
        }
        if (c->stream_path && c->stream_mib == 0) {
                log_error("--stream needs --stream-mib N");
                return -EINVAL;
        }
        return 0;
}

static uint64_t max_file_mib(const struct config *c) {
        uint64_t m = c->file_mib;

        for (size_t i = 0; i < c->n_phases; i++)
                if (c->phases[i].file_mib > 0)
                        m = MAX(m, (uint64_t) c->phases[i].file_mib);
        return m;
}

static int fd_size(int fd, bool *is_block, uint64_t *ret) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return -errno;
        if (S_ISBLK(st.st_mode)) {
                uint64_t bytes;

                if (ioctl(fd, BLKGETSIZE64, &bytes) < 0)
                        return -errno;
                *is_block = true;
                *ret = bytes;
                return 0;
        }
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        *is_block = false;
        *ret = (uint64_t) st.st_size;
        return 0;
}

/*
 * Opens PATH and makes sure it holds at least need_bytes of real (non-sparse, non-zero)
 * data, so that reading it back after eviction costs real I/O.  Block devices cannot
 * grow and must be large enough already.
 */
static int open_data_file(const char *path, uint64_t need_bytes, uint8_t *buf, int *ret_fd) {
        _cleanup_(closep) int fd = -1;
        uint64_t size = 0;
        bool is_block = false;
        int r;

        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
                r = -errno;
                log_error("open %s: %s", path, strerror(-r));
                return r;
        }
        r = fd_size(fd, &is_block, &size);
        if (r < 0) {
                log_error("%s: not a regular file or block device: %s", path, strerror(-r));
                return r;
        }
        if (size < need_bytes) {
                if (is_block) {
                        log_error("%s: block device has %" PRIu64 " MiB, need %" PRIu64 " MiB",
                                  path, size / MIB, need_bytes / MIB);
                        return -ENOSPC;
                }
                memset(buf, 0xa5, IO_CHUNK);
                while (size < need_bytes) {
                        size_t n = (size_t) MIN((uint64_t) IO_CHUNK, need_bytes - size);
                        ssize_t k = pwrite(fd, buf, n, (off_t) size);

                        if (k <= 0) {
                                r = k < 0 ? -errno : -EIO;
                                log_error("extending %s to %" PRIu64 " MiB: %s", path,
                                          need_bytes / MIB, strerror(-r));
                                return r;
                        }
                        size += (uint64_t) k;
                }
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static int read_range(int fd, uint64_t offset, uint64_t len, uint8_t *buf) {
        uint64_t done = 0;

        while (done < len) {
                size_t n = (size_t) MIN((uint64_t) IO_CHUNK, len - done);
                ssize_t k = pread(fd, buf, n, (off_t) (offset + done));

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        return -ENODATA;
                done += (uint64_t) k;
        }
        return 0;
}

/* Grows or shrinks the anonymous set; a shrink unmaps the excess so the guest gets it back. */
static int resize_anon(struct state *s, uint64_t new_mib, bool no_hugepage) {
        size_t old_len = (size_t) (s->anon_mib * MIB), new_len = (size_t) (new_mib * MIB);
        void *p;

        if (new_mib == s->anon_mib)
                return 0;

        if (new_mib == 0) {
                munmap(s->anon, old_len);
                s->anon = NULL;
        } else if (!s->anon) {
                p = mmap(NULL, new_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
                if (p == MAP_FAILED)
                        goto fail;
                s->anon = p;
        } else if (new_mib < s->anon_mib) {
                if (munmap(s->anon + new_len, old_len - new_len) < 0)
                        goto fail;
        } else {
                p = mremap(s->anon, old_len, new_len, MREMAP_MAYMOVE);
                if (p == MAP_FAILED)
                        goto fail;
                s->anon = p;
        }
        if (s->anon && no_hugepage)
                (void) madvise(s->anon, new_len, MADV_NOHUGEPAGE);

        s->anon_mib = new_mib;
        return 0;

fail:
        log_error("resizing the anonymous set from %" PRIu64 " to %" PRIu64 " MiB: %s",
                  s->anon_mib, new_mib, strerror(errno));
        return -ENOMEM;
}

/* Fills `mib` of memory, then frees every other page of it in a random order: the pages
 * freed cannot merge with their still-held buddies, so the next allocations take single
 * pages in that random order. Returns the still-held half, to be unmapped once the set has
 * been written. The set is then where a swap-in would have left it, with no swap in play. */
static uint8_t *scatter_free_memory(uint64_t mib, size_t page_size) {
        size_t len = (size_t) (mib * MIB), pages = len / page_size / 2;
        uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        size_t *order;
        uint64_t x = 0x9e3779b97f4a7c15ULL;

        if (p == MAP_FAILED)
                return NULL;
        (void) madvise(p, len, MADV_NOHUGEPAGE);
        for (size_t off = 0; off < len; off += page_size)
                p[off] = 1;
        order = calloc(pages, sizeof(*order));
        if (!order)
                return p;
        for (size_t i = 0; i < pages; i++)
                order[i] = 2 * i + 1;
        for (size_t i = pages; i > 1; i--) { /* Fisher-Yates, on xorshift64 */
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                size_t j = (size_t) (x % i), t = order[i - 1];
                order[i - 1] = order[j];
                order[j] = t;
        }
        for (size_t i = 0; i < pages; i++)
                (void) madvise(p + order[i] * page_size, page_size, MADV_DONTNEED);
        free(order);
        return p;
}

static void touch_anon(const struct state *s, uint64_t pass) {
        volatile uint8_t *p = s->anon;
        size_t len = (size_t) (s->anon_mib * MIB);

        /* A non-zero value that changes every pass: every page is really written. */
        for (size_t off = 0; off < len; off += s->page_size)
                p[off] = (uint8_t) (pass | 1);
}

/* Prints the cumulative /proc/vmstat counters a benchmark reads; a missing one prints as -1. The
 * scan counters say whether kswapd works while the guest is merely held near its watermarks: on
 * one vCPU under TCG its time is the workload's. */
static void log_vmstat(uint64_t pass) {
        static const char *const names[] = {
                "workingset_refault_anon", "workingset_refault_file", "pgmajfault",
                "pswpin", "pswpout", "oom_kill", "pgscan_kswapd", "pgscan_direct",
        };
        static const char *const labels[] = {
                "refault_anon", "refault_file", "pgmajfault", "pswpin", "pswpout", "oom_kill",
                "pgscan_kswapd", "pgscan_direct",
        };
        long long values[ARRAY_SIZE(names)];
        char line[256], out[512];
        size_t used;
        FILE *f;

        for (size_t i = 0; i < ARRAY_SIZE(values); i++)
                values[i] = -1;
        f = fopen("/proc/vmstat", "re");
        if (f) {
                while (fgets(line, sizeof(line), f)) {
                        char *space = strchr(line, ' ');

                        if (!space)
                                continue;
                        *space = '\0';
                        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                                if (strcmp(line, names[i]) == 0)
                                        values[i] = strtoll(space + 1, NULL, 10);
                }
                fclose(f);
        }
        used = (size_t) snprintf(out, sizeof(out), "vmstat pass=%" PRIu64, pass);
        for (size_t i = 0; i < ARRAY_SIZE(values) && used < sizeof(out); i++)
                used += (size_t) snprintf(out + used, sizeof(out) - used, " %s=%lld", labels[i], values[i]);
        log_line("%s", out);
}

static void format_phases(const struct config *c, char *buf, size_t size) {
        size_t used = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < c->n_phases && used < size; i++) {
                const struct phase *p = &c->phases[i];
                int k;

                if (p->file_mib >= 0)
                        k = snprintf(buf + used, size - used, "%s%" PRIu64 ":%" PRIu64 ":%" PRIi64,
                                     i ? "," : "", p->at_sec, p->anon_mib, p->file_mib);
                else
                        k = snprintf(buf + used, size - used, "%s%" PRIu64 ":%" PRIu64,
                                     i ? "," : "", p->at_sec, p->anon_mib);
                if (k < 0)
                        break;
                used += (size_t) k;
        }
        if (used == 0)
                snprintf(buf, size, "none");
}

static bool same_file(int a, int b) {
        struct stat x, y;

        if (fstat(a, &x) < 0 || fstat(b, &y) < 0)
                return false;
        if (S_ISBLK(x.st_mode) && S_ISBLK(y.st_mode))
                return x.st_rdev == y.st_rdev;
        return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* SIGUSR1: the next phase now, not at its time (a test that has seen what it waited for). */
static volatile sig_atomic_t phase_requests;

static void on_sigusr1(int sig _unused_) {
        phase_requests++;
}

static int run(const struct config *c) {
        struct state s = { .file_fd = -1, .stream_fd = -1 };
        struct rusage before, after;
        uint64_t start, next_phase = 0;
        char phases[1024];
        int r;

        s.page_size = (size_t) sysconf(_SC_PAGESIZE);
        s.io_buf = malloc(IO_CHUNK);
        if (!s.io_buf) {
                log_error("allocating the I/O buffer: %s", strerror(ENOMEM));
                return -ENOMEM;
        }

        if (c->file_path) {
                r = open_data_file(c->file_path, max_file_mib(c) * MIB, s.io_buf, &s.file_fd);
                if (r < 0)
                        return r;
        }
        if (c->stream_path) {
                uint64_t offset_mib = c->stream_offset_mib >= 0 ? (uint64_t) c->stream_offset_mib : 0;

                r = open_data_file(c->stream_path, 0, s.io_buf, &s.stream_fd);
                if (r < 0)
                        return r;
                /* The streamed range must not overlap the file set, or the stream would keep it warm. */
                if (c->stream_offset_mib < 0 && s.file_fd >= 0 && same_file(s.file_fd, s.stream_fd))
                        offset_mib = max_file_mib(c);
                close(s.stream_fd);
                s.stream_fd = -1;
                r = open_data_file(c->stream_path, (offset_mib + c->stream_mib) * MIB, s.io_buf,
                                   &s.stream_fd);
                if (r < 0)
                        return r;
                s.stream_offset = offset_mib * MIB;
        }

        format_phases(c, phases, sizeof(phases));
        log_line("start pid=%d anon_mib=%" PRIu64 " file=%s file_mib=%" PRIu64
                 " stream=%s stream_mib=%" PRIu64 " stream_offset_mib=%" PRIu64
                 " passes=%" PRIu64 " sleep_ms=%" PRIu64 " phases=%s page_size=%zu",
                 (int) getpid(), c->anon_mib, c->file_path ?: "none", c->file_mib,
                 c->stream_path ?: "none", c->stream_path ? c->stream_mib : 0,
                 s.stream_offset / MIB, c->passes, c->sleep_ms, phases, s.page_size);

        uint8_t *scatter = c->scatter_mib ? scatter_free_memory(c->scatter_mib, s.page_size) : NULL;
        r = resize_anon(&s, c->anon_mib, c->no_hugepage);
        if (r < 0)
                return r;
        if (scatter) {
                touch_anon(&s, 0);
                munmap(scatter, (size_t) (c->scatter_mib * MIB));
                log_line("scattered: the set was first written into %" PRIu64 " MiB of single free pages",
                         c->scatter_mib / 2);
        }
        s.file_mib = c->file_mib;

        struct sigaction sa = { .sa_handler = on_sigusr1 };
        sigemptyset(&sa.sa_mask);
        (void) sigaction(SIGUSR1, &sa, NULL);
        sig_atomic_t phases_taken = 0;

        start = now_usec(CLOCK_MONOTONIC);
        for (uint64_t pass = 1; c->passes == 0 || pass <= c->passes; pass++) {
                uint64_t t0 = now_usec(CLOCK_MONOTONIC), t1, stream_usec = 0;

                while (next_phase < c->n_phases &&
                       (t0 - start >= c->phases[next_phase].at_sec * USEC_PER_SEC || phases_taken < phase_requests)) {
                        const struct phase *p = &c->phases[next_phase++];

                        if (phases_taken < phase_requests)
                                phases_taken++;

                        r = resize_anon(&s, p->anon_mib, c->no_hugepage);
                        if (r < 0)
                                return r;
                        if (p->file_mib >= 0)
                                s.file_mib = (uint64_t) p->file_mib;
                        log_line("phase=%" PRIu64 " t=%.3f anon_mib=%" PRIu64 " file_mib=%" PRIu64,
                                 (uint64_t) next_phase, (double) (t0 - start) / USEC_PER_SEC,
                                 s.anon_mib, s.file_mib);
                }

                getrusage(RUSAGE_SELF, &before);
                touch_anon(&s, pass);
                if (s.file_mib > 0) {
                        r = read_range(s.file_fd, 0, s.file_mib * MIB, s.io_buf);
                        if (r < 0) {
                                log_error("reading %s: %s", c->file_path, strerror(-r));
                                return r;
                        }
                }
                if (s.stream_fd >= 0) {
                        uint64_t ts = now_usec(CLOCK_MONOTONIC);

                        r = read_range(s.stream_fd, s.stream_offset, c->stream_mib * MIB, s.io_buf);
                        stream_usec = now_usec(CLOCK_MONOTONIC) - ts;
                        if (r < 0) {
                                log_error("streaming %s: %s", c->stream_path, strerror(-r));
                                return r;
                        }
                }
                getrusage(RUSAGE_SELF, &after);
                t1 = now_usec(CLOCK_MONOTONIC);

                if (s.stream_fd >= 0)
                        log_line("pass=%" PRIu64 " t=%.3f anon_mib=%" PRIu64 " file_mib=%" PRIu64
                                 " ms=%.3f majflt=%ld minflt=%ld stream_mib=%" PRIu64 " stream_ms=%.3f",
                                 pass, (double) (t1 - start) / USEC_PER_SEC, s.anon_mib, s.file_mib,
                                 (double) (t1 - t0) / USEC_PER_MSEC, after.ru_majflt - before.ru_majflt,
                                 after.ru_minflt - before.ru_minflt, c->stream_mib,
                                 (double) stream_usec / USEC_PER_MSEC);
                else
                        log_line("pass=%" PRIu64 " t=%.3f anon_mib=%" PRIu64 " file_mib=%" PRIu64
                                 " ms=%.3f majflt=%ld minflt=%ld",
                                 pass, (double) (t1 - start) / USEC_PER_SEC, s.anon_mib, s.file_mib,
                                 (double) (t1 - t0) / USEC_PER_MSEC, after.ru_majflt - before.ru_majflt,
                                 after.ru_minflt - before.ru_minflt);
                if (c->vmstat)
                        log_vmstat(pass);

                if (c->sleep_ms > 0 && (c->passes == 0 || pass < c->passes)) {
                        struct timespec ts = {
                                .tv_sec = (time_t) (c->sleep_ms / 1000),
                                .tv_nsec = (long) (c->sleep_ms % 1000) * 1000000L,
                        };

                        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                                ;
                }
        }

        log_line("done");
        return 0;
}

int main(int argc, char *argv[]) {
        struct config c = {
                .sleep_ms = 1000,
                .stream_offset_mib = -1,
        };

        if (parse_argv(argc, argv, &c) < 0)
                return 2;
        return run(&c) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
