/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* daemon/host/host-hugepages.c on this very process: a mapping the size of a small guest's RAM,
 * populated on 4 KiB pages with holes punched in it, as a balloon leaves guest RAM. A pass
 * collapses exactly the ranges the policy's percentage allows, in bounded steps. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/host/host-hugepages.h"
#include "policies/hugepage-repair.h"
#include "tests/lib/check-run.h"

#define RAM (256 * MIB)
#define RANGE (2 * MIB)
#define PAGE 4096

static uint8_t *ram; /* 2 MiB aligned */
static void *ram_map;

/* Resident pages of the 2 MiB range at p, from /proc/self/pagemap. */
static unsigned resident(const uint8_t *p) {
        uint64_t e[RS_HUGEPAGE_PAGES];
        int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(pread(fd, e, sizeof(e), (off_t) ((uintptr_t) p / PAGE * 8)), (ssize_t) sizeof(e));
        close(fd);
        unsigned n = 0;
        for (unsigned i = 0; i < RS_HUGEPAGE_PAGES; i++)
                n += (unsigned) (e[i] >> 63);
        return n;
}

/* THP in "madvise" mode (Debian's default): a mapping never madvised gets 4 KiB pages and is
 * left alone by khugepaged, which would otherwise fill the test's holes on its own at any time
 * (it did, under make -j2), while MADV_COLLAPSE still works on it. */
static bool thp_madvise_mode(void) {
        char buf[128] = "";
        FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");
        if (!f)
                return false;
        bool ok = fgets(buf, sizeof(buf), f) && strstr(buf, "[madvise]");
        fclose(f);
        return ok;
}

/* RAM on 4 KiB pages (never madvised, see above); the first half with 8 holes a range (98.4 % resident), the second with
 * 100 (80.5 %). */
static void setup(void) {
        ram_map = mmap(NULL, RAM + RANGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ck_assert(ram_map != MAP_FAILED);
        ram = (uint8_t *) (((uintptr_t) ram_map + RANGE - 1) & ~(uintptr_t) (RANGE - 1));
        for (size_t off = 0; off < RAM; off += PAGE)
                ram[off] = 1;
        for (size_t r = 0; r < RAM / RANGE; r++) {
                unsigned holes = r < RAM / RANGE / 2 ? 8 : 100;
                for (unsigned i = 0; i < holes; i++)
                        ck_assert_int_eq(madvise(ram + r * RANGE + (size_t) i * 5 * PAGE, PAGE, MADV_DONTNEED), 0);
        }
}

static void teardown(void) {
        munmap(ram_map, RAM + RANGE);
}

START_TEST(test_collapses_the_ranges_the_policy_allows) {
        HostHugepagePass *p = NULL;
        if (!thp_madvise_mode()) {
                check_cannot_set_up("test_collapses_the_ranges_the_policy_allows",
                                    "/sys/kernel/mm/transparent_hugepage/enabled is not [madvise]");
                return;
        }
        ck_assert_uint_eq(resident(ram), RS_HUGEPAGE_PAGES - 8);
        ck_assert_uint_eq(resident(ram + RAM - RANGE), RS_HUGEPAGE_PAGES - 100);

        ck_assert_int_eq(host_hugepage_pass_new("/proc", getpid(), 97, &p), 0);
        const HostHugepageStats *st = host_hugepage_pass_stats(p);
        ck_assert_uint_ge(st->ranges, RAM / RANGE); /* this mapping, perhaps others of this process */
        int r, steps = 0;
        while ((r = host_hugepage_pass_step(p, 16, 4)) == 1)
                steps++;
        ck_assert_int_eq(r, 0);
        ck_assert_uint_eq(st->scanned, st->ranges);
        ck_assert_int_ge(steps, (int) (RAM / RANGE / 2 / 4) - 1); /* bounded: 4 collapses a step at most */

        /* the first half: every range whole again (its holes filled, on a huge page) */
        for (size_t i = 0; i < RAM / RANGE / 2; i++)
                ck_assert_uint_eq(resident(ram + i * RANGE), RS_HUGEPAGE_PAGES);
        /* the second half: not worth it at 97 %, untouched */
        for (size_t i = RAM / RANGE / 2; i < RAM / RANGE; i++)
                ck_assert_uint_eq(resident(ram + i * RANGE), RS_HUGEPAGE_PAGES - 100);
        ck_assert_uint_ge(st->collapsed, RAM / RANGE / 2);
        ck_assert_uint_ge(st->filled, (uint64_t) RAM / RANGE / 2 * 8 * PAGE);
        /* (st->failed counts this process's other mappings too: ASan's shadow is no THP.) */
        host_hugepage_pass_free(p);
}
END_TEST

START_TEST(test_no_such_process) {
        HostHugepagePass *p = NULL;
        ck_assert_int_eq(host_hugepage_pass_new("/proc", 0x7ffffff0, 97, &p), -ESRCH);
        ck_assert_ptr_null(p);
}
END_TEST

START_TEST(test_no_guest_ram_in_a_small_process) {
        char dir[] = "/tmp/rs-hugepages.XXXXXX", path[256];
        HostHugepagePass *p = NULL;
        ck_assert_ptr_nonnull(mkdtemp(dir));
        /* this process's pid (it must exist: the process is opened first), a maps file of our own */
        snprintf(path, sizeof(path), "%s/%d", dir, (int) getpid());
        ck_assert_int_eq(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/%d/maps", dir, (int) getpid());
        FILE *f = fopen(path, "we");
        ck_assert_ptr_nonnull(f);
        /* small anonymous mappings, a large file mapping, a large read-only one, garbage */
        fputs("55d1c0000000-55d1c0200000 rw-p 00000000 00:00 0 \n"
              "7f0000000000-7f0040000000 rw-p 00000000 fd:01 1234 /var/lib/big.img\n"
              "7f1000000000-7f1040000000 r--p 00000000 00:00 0 \n"
              "not a line at all\n"
              "7f2000000000-7f1000000000 rw-p 00000000 00:00 0 \n", f);
        fclose(f);
        ck_assert_int_eq(host_hugepage_pass_new(dir, getpid(), 97, &p), -ENOENT);
        ck_assert_ptr_null(p);
        snprintf(path, sizeof(path), "rm -rf %s", dir);
        ck_assert_int_eq(system(path), 0);
}
END_TEST

int main(void) {
        Suite *s = suite_create("host-hugepages");
        check_add_case(s, "collapse", setup, teardown, 120, CHECK_TESTS(test_collapses_the_ranges_the_policy_allows));
        check_add_case(s, "input", NULL, NULL, 0, CHECK_TESTS(test_no_such_process, test_no_guest_ram_in_a_small_process));
        return check_run_suite(s);
}
