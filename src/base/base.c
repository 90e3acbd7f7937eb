#include "base/base.h"

#include <errno.h>
#include <execinfo.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/* ---- allocation with failure injection ----
 * One counter of allocations since the switch was last set; the fail_at-th one fails (and, sticky,
 * every one after it). Off (fail_at 0) it costs one relaxed atomic load per allocation. */
static _Atomic long alloc_count, alloc_failed, alloc_fail_at = -1; /* -1: MOERUN_ALLOC_FAIL not read yet */
static _Atomic int alloc_sticky, alloc_trace = -1; /* -1: MOERUN_ALLOC_FAIL_TRACE not read yet */

void mr_alloc_fail_at(long n, int sticky) {
    atomic_store(&alloc_count, 0);
    atomic_store(&alloc_failed, 0);
    atomic_store(&alloc_sticky, sticky);
    atomic_store(&alloc_fail_at, n > 0 ? n : 0);
}
long mr_alloc_count(void) { return atomic_load(&alloc_count); }
long mr_alloc_failed(void) { return atomic_load(&alloc_failed); }

/* MOERUN_ALLOC_FAIL=N[s]: the N-th allocation of the process fails (s: and every later one);
 * MOERUN_ALLOC_FAIL_TRACE=1: with the failing site's stack. The one place the library reads the
 * environment: a fault injector for tests (docs/RELIABILITY.md), not a setting. It has to be armed
 * before the first allocation of any program linking the library (the CLI before its options are
 * parsed, test and bench binaries), which no parameter struct can reach. Each read once: the switch at
 * the first allocation, the trace at the first injected failure (also one of mr_alloc_fail_at). */
static void alloc_env(void) {
    const char *e = getenv("MOERUN_ALLOC_FAIL");
    char *end = NULL;
    long n = e ? strtol(e, &end, 10) : 0;
    long expect = -1;
    if (n > 0 && atomic_compare_exchange_strong(&alloc_fail_at, &expect, n)) atomic_store(&alloc_sticky, *end == 's');
    else atomic_compare_exchange_strong(&alloc_fail_at, &expect, 0);
}

static int alloc_trace_on(void) {
    int t = atomic_load(&alloc_trace);
    if (t < 0) {
        const char *e = getenv("MOERUN_ALLOC_FAIL_TRACE");
        t = e && *e && strcmp(e, "0") != 0;
        atomic_store(&alloc_trace, t);
    }
    return t;
}

int mr_alloc_inject(void) {
    long at = atomic_load_explicit(&alloc_fail_at, memory_order_relaxed);
    if (at < 0) { alloc_env(); at = atomic_load(&alloc_fail_at); }
    if (at == 0) return 0;
    long k = atomic_fetch_add(&alloc_count, 1) + 1;
    if (k == at || (k > at && atomic_load(&alloc_sticky))) {
        atomic_fetch_add(&alloc_failed, 1);
        if (alloc_trace_on()) { /* which allocation site: the stack, to stderr */
            void *bt[16];
            fprintf(stderr, "allocation %ld fails here:\n", k);
            backtrace_symbols_fd(bt, backtrace(bt, 16), 2);
        }
        return 1;
    }
    return 0;
}

void *mr_malloc(size_t n) { return mr_alloc_inject() ? NULL : malloc(n); }
void *mr_calloc(size_t n, size_t size) { return mr_alloc_inject() ? NULL : calloc(n, size); }
void *mr_realloc(void *p, size_t n) { return mr_alloc_inject() ? NULL : realloc(p, n); }
char *mr_strdup(const char *s) { return mr_alloc_inject() ? NULL : strdup(s); }

void *mr_aligned_alloc(size_t align, size_t size) {
    void *p = NULL;
    if (size == 0) size = align;
    if (mr_alloc_inject() || posix_memalign(&p, align, size) != 0) return NULL;
    return p;
}

void mr_aligned_free(void *p) { free(p); }

#define MR_HUGE (2u << 20) /* x86-64 / arm64 (4 KiB granule) PMD huge page */

int mr_thp_available(void) {
#ifdef MADV_HUGEPAGE
    char buf[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "[always]") || strstr(buf, "[madvise]");
#else
    return 0;
#endif
}

void *mr_big_alloc(size_t bytes, int flags, int *huge) {
    if (huge) *huge = 0;
    if (mr_alloc_inject()) return NULL;
    const size_t n = bytes ? bytes : 1;
    /* from 2 MiB up: map 2 MiB more, then cut head and tail so the mapping starts on a 2 MiB boundary
     * (the size is not rounded: a partial last 2 MiB stays in 4 KiB pages, so small copies do not
     * grow to a whole huge page) */
    const size_t extra = n >= MR_HUGE ? MR_HUGE : 0;
    if (n + extra < n) return NULL;
    uint8_t *raw = mmap(NULL, n + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    uint8_t *p = raw;
    if (extra) {
        const size_t head = (MR_HUGE - (uintptr_t)raw % MR_HUGE) % MR_HUGE;
        const size_t end = ((size_t)head + n + 4095) / 4096 * 4096; /* munmap works on whole pages */
        if (head) munmap(raw, head);
        if (end < n + extra) munmap(raw + end, n + extra - end);
        p = raw + head;
#ifdef MADV_HUGEPAGE
        if (!(flags & MR_BIG_NO_HUGE) && mr_thp_available() && madvise(p, n, MADV_HUGEPAGE) == 0 && huge) *huge = 1;
#endif
    }
    if (flags & MR_BIG_PREFAULT) {
        int done = 0;
#ifdef MADV_POPULATE_WRITE
        if (madvise(p, n, MADV_POPULATE_WRITE) == 0) done = 1;
        else if (errno != EINVAL) { mr_big_free(p, n); return NULL; } /* ENOMEM: over a memory limit */
#endif
        for (size_t o = 0; !done && o < n; o += 4096) ((volatile uint8_t *)p)[o] = 0;
    }
    return p;
}

void mr_big_free(void *p, size_t bytes) {
    if (p) munmap(p, bytes ? bytes : 1);
}

void mr_format_bytes(char *buf, size_t n, double b) {
    if (b >= 1024.0 * 1024 * 1024) snprintf(buf, n, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(buf, n, "%.1f MiB", b / (1024.0 * 1024));
    else snprintf(buf, n, "%.1f KiB", b / 1024.0);
}
