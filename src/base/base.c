#include "base/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char mr_err_buf[1024];
int mr_log_level = 1;

void mr_set_error(const char *fmt, ...) {
    char tmp[sizeof mr_err_buf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap); /* fmt may reference the old message */
    va_end(ap);
    memcpy(mr_err_buf, tmp, sizeof tmp);
}

const char *mr_get_error(void) { return mr_err_buf[0] ? mr_err_buf : "unknown error"; }
void mr_clear_error(void) { mr_err_buf[0] = 0; }

void mr_log(int level, const char *fmt, ...) {
    if (level > mr_log_level) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

double mr_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void *mr_aligned_alloc(size_t align, size_t size) {
    void *p = NULL;
    if (size == 0) size = align;
    if (posix_memalign(&p, align, size) != 0) return NULL;
    return p;
}

void mr_aligned_free(void *p) { free(p); }

void mr_format_bytes(char *buf, size_t n, double b) {
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, n, "%.1f KiB", b / 1024.0);
}
