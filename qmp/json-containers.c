/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "qmp/json-containers.h"

void json_container_count_reset(JsonContainerCount *c) {
        *c = (JsonContainerCount) {};
}

size_t json_container_count_feed(JsonContainerCount *c, const char *p, size_t size, size_t max) {
        for (size_t i = 0; i < size && !c->ended; i++) {
                char ch = p[i];

                if (c->in_string) {
                        if (c->escaped)
                                c->escaped = false;
                        else if (ch == '\\')
                                c->escaped = true;
                        else if (ch == '"')
                                c->in_string = false;
                        continue;
                }
                switch (ch) {
                case '{':
                case '[':
                        if (c->n >= max)
                                return i;
                        c->n++;
                        c->depth++;
                        break;
                case '}':
                case ']':
                        /* The parser refuses an unbalanced closer; here it ends the value. */
                        if (c->depth <= 1)
                                c->ended = true;
                        else
                                c->depth--;
                        break;
                case '"':
                        if (c->depth == 0)
                                c->ended = true; /* a top-level string: no containers */
                        else
                                c->in_string = true;
                        break;
                case ' ':
                case '\t':
                case '\r':
                case '\n':
                        break;
                default:
                        /* A top-level number or literal has no containers, and where it ends is
                         * the parser's call: whatever follows belongs to the next value. */
                        if (c->depth == 0)
                                c->ended = true;
                        break;
                }
        }
        return size;
}

bool json_containers_within(const char *text, size_t size, size_t max) {
        JsonContainerCount c = {};

        return json_container_count_feed(&c, text, size, max) == size;
}
