/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Counts the objects and arrays of one JSON value as its bytes arrive, before a parser builds
 * them. json-c allocates a hash table for every object and a list for every array, hundreds of
 * bytes each: "[{},{},..." makes a parse cost two to three hundred times its input in memory,
 * so a byte cap alone does not bound what a peer's message costs. The scanner knows just
 * enough JSON to skip strings; the parser still judges the syntax. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct JsonContainerCount {
        size_t n;       /* objects and arrays opened so far */
        size_t depth;
        bool in_string;
        bool escaped;   /* the previous byte in a string was an unescaped backslash */
        bool ended;     /* the value is complete, or a scalar: the rest is not counted */
} JsonContainerCount;

void json_container_count_reset(JsonContainerCount *c);

/* Counts p[0..size). Returns the offset of the first '{' or '[' that would take the count
 * past max (that one is not counted), or size when every byte was taken. */
size_t json_container_count_feed(JsonContainerCount *c, const char *p, size_t size, size_t max);

/* The containers of a whole text, for parsers that get the text at once: true when it has at
 * most max, before any allocation. */
bool json_containers_within(const char *text, size_t size, size_t max);
