/* Option-value parsing, file reading and the sampler flags shared by the CLI commands (see cli.h). */
#include "cli.h"
#include "moerun.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double mr_cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "from LO to HI", or ">= LO" when HI is only a sanity bound */
static void range_text(char *buf, size_t n, double lo, double hi, int whole) {
    const char *what = whole ? "a whole number" : "a number";
    if (hi >= MR_CLI_BIG) snprintf(buf, n, "%s >= %.*g", what, whole ? 12 : 6, lo);
    else snprintf(buf, n, "%s from %.*g to %.*g", what, whole ? 12 : 6, lo, whole ? 12 : 6, hi);
}

int mr_cli_int(const char *opt, const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi) {
        char want[80];
        range_text(want, sizeof want, (double)lo, (double)hi, 1);
        fprintf(stderr, "error: bad value '%s' for %s (want %s)\n", v, opt, want);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int mr_cli_float(const char *opt, const char *v, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= lo && x <= hi)) { /* !(..) also rejects NaN */
        char want[80];
        range_text(want, sizeof want, lo, hi, 0);
        fprintf(stderr, "error: bad value '%s' for %s (want %s)\n", v, opt, want);
        return -1;
    }
    *out = (float)x;
    return 0;
}

int mr_cli_u64(const char *opt, const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    int hex = v[0] == '0' && (v[1] == 'x' || v[1] == 'X'); /* decimal, or 0x hex (never octal) */
    unsigned long long x = strtoull(v, &end, hex ? 16 : 10);
    /* strtoull accepts "-1" (as 2^64-1): a seed given as a negative number is a mistake */
    if (end == v || *end || errno || strchr(v, '-')) {
        fprintf(stderr, "error: bad value '%s' for %s (want a non-negative whole number)\n", v, opt);
        return -1;
    }
    *out = (uint64_t)x;
    return 0;
}

char *mr_cli_read_file(const char *path, size_t *len) {
    const int is_stdin = !strcmp(path, "-");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    while (b) {
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        char *nb = cap < ((size_t)-1) / 4 ? realloc(b, cap * 2 + 1) : NULL;
        if (!nb) { free(b); b = NULL; break; }
        b = nb;
        cap *= 2;
    }
    int err = ferror(f);
    if (!is_stdin) fclose(f);
    if (!b || err) { free(b); return NULL; }
    b[n] = 0;
    if (len) *len = n;
    return b;
}

int mr_cli_parse_ids(const char *s, int32_t **out, int *n) {
    int cap = 1024, k = 0;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    if (!v) return -1;
    for (const char *p = s; *p;) {
        while (*p == ',' || *p == ' ' || *p == '\n' || *p == '\r' || *p == '\t' || *p == '[' || *p == ']') p++;
        if (!*p) break;
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 0 || x > 0x7fffffff || k == 0x7fffffff) { free(v); return -1; }
        if (k == cap) {
            int32_t *nv = cap <= 0x3fffffff ? realloc(v, sizeof(int32_t) * (size_t)cap * 2) : NULL;
            if (!nv) { free(v); return -1; }
            v = nv;
            cap *= 2;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *out = v;
    *n = k;
    return 0;
}

void mr_cli_unescape(char *s) {
    char *w = s;
    for (const char *p = s; *p; p++) {
        if (*p != '\\' || !p[1]) { *w++ = *p; continue; }
        char c = *++p;
        switch (c) {
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case '\\': case '\'': case '"': *w++ = c; break;
        case 'x': {
            int v = 0, k = 0;
            while (k < 2 && ((p[1] >= '0' && p[1] <= '9') || ((p[1] | 32) >= 'a' && (p[1] | 32) <= 'f'))) {
                v = v * 16 + (p[1] <= '9' ? p[1] - '0' : (p[1] | 32) - 'a' + 10);
                p++; k++;
            }
            if (k) *w++ = (char)v;
            else { *w++ = '\\'; *w++ = 'x'; }
            break;
        }
        default: *w++ = '\\'; *w++ = c; /* unknown: kept as written */
        }
    }
    *w = 0;
}
