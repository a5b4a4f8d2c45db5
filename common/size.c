/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "common/size.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/macro.h"

static const struct {
        char letter;
        uint64_t factor;
} units[] = {
        { 'E', UINT64_C(1) << 60 }, { 'P', UINT64_C(1) << 50 }, { 'T', UINT64_C(1) << 40 },
        { 'G', UINT64_C(1) << 30 }, { 'M', UINT64_C(1) << 20 }, { 'K', UINT64_C(1) << 10 },
};

static const char *skip_blanks(const char *s) {
        while (*s == ' ' || *s == '\t')
                s++;
        return s;
}

/* Reads "<digits>[.<digits>]". The fraction is kept as numerator over 10^n_fraction_digits. */
static int parse_decimal(const char **p, uint64_t *ret_int, uint64_t *ret_frac, unsigned *ret_frac_digits) {
        const char *s = *p;
        uint64_t integer = 0, frac = 0;
        unsigned frac_digits = 0;
        bool any = false;

        for (; *s >= '0' && *s <= '9'; s++) {
                unsigned d = (unsigned) (*s - '0');
                if (integer > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                integer = integer * 10 + d;
                any = true;
        }
        if (!any)
                return -EINVAL; /* ".5G": say "0.5G" */
        if (*s == '.') {
                s++;
                if (!(*s >= '0' && *s <= '9'))
                        return -EINVAL;
                for (; *s >= '0' && *s <= '9'; s++) {
                        /* Beyond 18 digits the fraction cannot change a 64-bit result; ignore them. */
                        if (frac_digits < 18) {
                                frac = frac * 10 + (uint64_t) (*s - '0');
                                frac_digits++;
                        }
                }
        }

        *p = s;
        *ret_int = integer;
        *ret_frac = frac;
        *ret_frac_digits = frac_digits;
        return 0;
}

static uint64_t pow10u(unsigned n) {
        uint64_t r = 1;
        while (n-- > 0)
                r *= 10;
        return r;
}

/* Returns the factor of the unit at *p (1 for none or "B") and advances past it; 0 if unknown. */
static uint64_t parse_unit(const char **p) {
        const char *s = *p;

        if (*s == '\0') {
                return 1;
        }
        if ((*s == 'B' || *s == 'b') && s[1] == '\0') {
                *p = s + 1;
                return 1;
        }
        for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
                if (*s != units[i].letter && *s != units[i].letter + ('a' - 'A'))
                        continue;
                /* "M", "MiB", "MB" (and any case): binary all the same, as everywhere in
                 * rightsize, so the CLI, the config and the policy files read "2MB" alike. */
                if (s[1] == '\0')
                        *p = s + 1;
                else if (strcasecmp(s + 1, "iB") == 0)
                        *p = s + 3;
                else if (strcasecmp(s + 1, "B") == 0)
                        *p = s + 2;
                else
                        return 0;
                return units[i].factor;
        }
        return 0;
}

int parse_size(const char *s, uint64_t *ret) {
        uint64_t integer, frac, factor;
        unsigned frac_digits;
        unsigned __int128 total;
        int r;

        if (!s || !ret)
                return -EINVAL;

        s = skip_blanks(s);
        r = parse_decimal(&s, &integer, &frac, &frac_digits);
        if (r < 0)
                return r;
        s = skip_blanks(s);

        /* Trailing blanks are fine; anything else must be a unit that ends the string. */
        size_t len = strlen(s);
        while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
                len--;
        char unit[8];
        if (len >= sizeof(unit))
                return -EINVAL;
        memcpy(unit, s, len);
        unit[len] = '\0';

        const char *u = unit;
        factor = parse_unit(&u);
        if (factor == 0 || *u != '\0')
                return -EINVAL;
        if (frac_digits > 0 && factor == 1)
                return -EINVAL; /* no fractions of a byte */

        total = (unsigned __int128) integer * factor;
        total += (unsigned __int128) frac * factor / pow10u(frac_digits);
        if (total > UINT64_MAX)
                return -ERANGE;

        *ret = (uint64_t) total;
        return 0;
}

int parse_size_spec(const char *s, SizeSpec *ret) {
        const char *percent;

        if (!s || !ret)
                return -EINVAL;

        percent = strchr(s, '%');
        if (percent) {
                uint64_t integer, frac;
                unsigned frac_digits;
                const char *p = skip_blanks(s);
                int r;

                if (*skip_blanks(percent + 1) != '\0')
                        return -EINVAL;
                r = parse_decimal(&p, &integer, &frac, &frac_digits);
                if (r < 0)
                        return r;
                if (skip_blanks(p) != percent)
                        return -EINVAL;
                if (frac_digits > 2)
                        return -EINVAL; /* finer than a basis point */
                if (integer > 100)
                        return -ERANGE;
                uint64_t bp = integer * 100 + frac * pow10u(2 - frac_digits);
                if (bp > 10000)
                        return -ERANGE;

                *ret = (SizeSpec){ .relative = true, .basis_points = (uint32_t) bp };
                return 0;
        }

        uint64_t bytes;
        int r = parse_size(s, &bytes);
        if (r < 0)
                return r;
        *ret = (SizeSpec){ .relative = false, .bytes = bytes };
        return 0;
}

uint64_t size_spec_resolve(const SizeSpec *spec, uint64_t total) {
        if (!spec->relative)
                return spec->bytes;
        return (uint64_t) ((unsigned __int128) total * spec->basis_points / 10000);
}

bool size_spec_equal(const SizeSpec *a, const SizeSpec *b) {
        if (a->relative != b->relative)
                return false;
        return a->relative ? a->basis_points == b->basis_points : a->bytes == b->bytes;
}

char *format_size_exact(char *buf, size_t len, uint64_t bytes) {
        if (bytes > 0)
                for (size_t i = 0; i < ARRAY_SIZE(units); i++)
                        if (bytes % units[i].factor == 0) {
                                snprintf(buf, len, "%llu%c",
                                         (unsigned long long) (bytes / units[i].factor), units[i].letter);
                                return buf;
                        }

        snprintf(buf, len, "%llu", (unsigned long long) bytes);
        return buf;
}

char *format_size_spec(char *buf, size_t len, const SizeSpec *spec) {
        if (!spec->relative)
                return format_size_exact(buf, len, spec->bytes);

        unsigned whole = spec->basis_points / 100, hundredths = spec->basis_points % 100;
        if (hundredths == 0)
                snprintf(buf, len, "%u%%", whole);
        else if (hundredths % 10 == 0)
                snprintf(buf, len, "%u.%u%%", whole, hundredths / 10);
        else
                snprintf(buf, len, "%u.%02u%%", whole, hundredths);
        return buf;
}

char *format_size(char *buf, size_t len, uint64_t bytes) {
        static const char *const names[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
        unsigned __int128 tenths;
        size_t i;

        if (bytes < 1024) {
                snprintf(buf, len, "%llu B", (unsigned long long) bytes);
                return buf;
        }

        /* i indexes names[]: the largest unit not above the value. */
        for (i = 0; i + 1 < ARRAY_SIZE(names) && bytes >= (UINT64_C(1024) << (10 * (i + 1))); i++)
                ;
        uint64_t factor = UINT64_C(1024) << (10 * i);
        tenths = ((unsigned __int128) bytes * 10 + factor / 2) / factor;
        if (tenths >= 10240 && i + 1 < ARRAY_SIZE(names)) {
                /* 1023.96 MiB rounds to 1024.0 MiB: say 1 GiB instead. */
                i++;
                tenths = 10;
        }

        if (tenths % 10 == 0)
                snprintf(buf, len, "%llu %s", (unsigned long long) (tenths / 10), names[i]);
        else
                snprintf(buf, len, "%llu.%u %s", (unsigned long long) (tenths / 10),
                         (unsigned) (tenths % 10), names[i]);
        return buf;
}
