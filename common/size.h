/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Memory sizes as people write them ("512M", "1.5 GiB", "1073741824") and as they read them back.
 * Units are binary (K = 1024), whether or not written with "iB". */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fits any uint64_t in either format, with its unit and the terminating NUL. */
#define FORMAT_SIZE_MAX 32

/* A size, or a share of some total (host RAM for host-reserve). */
typedef struct SizeSpec {
        bool relative;
        uint64_t bytes;         /* when !relative */
        uint32_t basis_points;  /* when relative: hundredths of a percent, 0..10000 */
} SizeSpec;

/* The one size parser of rightsize (the config, the policy files, the CLI, the bus). Accepts
 * "<number>[.<fraction>][ ][unit]" with unit B, or K, M, G, T, P, E alone or followed by iB or B,
 * in any case: binary all ("2MB" is 2 MiB). A fraction needs a unit of at least K. Exact (integer
 * arithmetic). Returns 0, -EINVAL for text that is not a size, or -ERANGE when it does not fit in
 * 64 bits. */
int parse_size(const char *s, uint64_t *ret);

/* As parse_size(), or "<number>[.<fraction>]%" with at most two decimals and at most 100 %. */
int parse_size_spec(const char *s, SizeSpec *ret);

/* The bytes a spec stands for, given the total that percentages refer to. */
uint64_t size_spec_resolve(const SizeSpec *spec, uint64_t total);

bool size_spec_equal(const SizeSpec *a, const SizeSpec *b);

/* Exact and parseable back: the largest unit that divides evenly ("2G", "1536M", "1073741825"). */
char *format_size_exact(char *buf, size_t len, uint64_t bytes);

/* format_size_exact() for sizes, "2.5%" for shares. */
char *format_size_spec(char *buf, size_t len, const SizeSpec *spec);

/* For people: one decimal at most, binary units ("512 B", "1 KiB", "1.5 GiB"). */
char *format_size(char *buf, size_t len, uint64_t bytes);
