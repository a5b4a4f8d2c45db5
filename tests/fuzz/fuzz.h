/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Shared by the fuzz targets: the libFuzzer entry point every target defines, and small helpers
 * to drive a client under test over a socketpair on its own sd-event loop. The targets build
 * twice: with clang's libFuzzer (contrib/fuzz), and as plain programs for `make check` whose
 * main() (replay-main.c) feeds them every file of their corpus and regressions. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-event.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A property the parser under test promised does not hold: report it like a crash, so the
 * fuzzer keeps the input and the replay test fails. */
#define fuzz_assert(expr)                                                                   \
        do {                                                                                \
                if (!(expr)) {                                                              \
                        fprintf(stderr, "%s:%d: fuzz assertion failed: %s\n", __FILE__, __LINE__, #expr); \
                        abort();                                                            \
                }                                                                           \
        } while (0)

/* Dispatches everything that is ready on the loop, without waiting. */
void fuzz_event_drain(sd_event *e);

/* Writes size bytes to the socket fd in pieces of at most `piece` bytes, draining the
 * loop after each, so the reader sees them in that chunking (piece 0: 64 KiB). */
void fuzz_write_chunks(sd_event *e, int fd, const void *data, size_t size, size_t piece);

/* A NUL-terminated heap copy of data (the parsers that take C strings see the bytes up to the
 * first NUL, as they would from a file read into a string). */
char *fuzz_strndup(const uint8_t *data, size_t size);

/* Splits data at NUL bytes: *ret_len is the length of the next record, false when none is left. */
bool fuzz_next_record(const uint8_t **data, size_t *size, const uint8_t **ret, size_t *ret_len);
