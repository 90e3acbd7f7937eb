/* Minimal test harness: one test binary per tests/test_*.c.
 * Each case prints "ok NAME" or "FAIL NAME: why"; tests/run.sh counts them. An assertion that cannot
 * hold in this build (e.g. RSS under ASan's quarantine) is not run but reported: "skip NAME/WHAT: why",
 * counted apart (never as passed). */
#ifndef MR_TEST_H
#define MR_TEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* T_ASAN: built with AddressSanitizer (gcc defines __SANITIZE_ADDRESS__, clang has the feature) */
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif

/* T_TSAN: built with ThreadSanitizer (make tsan) */
#if defined(__SANITIZE_THREAD__)
#define T_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define T_TSAN 1
#endif
#endif

static int t_passed, t_failed, t_skipped, t_case_failed;
static const char *t_case_name;

#define CHECK(cond, ...) do { if (!(cond)) { \
    if (!t_case_failed) printf("FAIL %s: ", t_case_name); else printf("    also: "); \
    printf("%s:%d: %s: ", __FILE__, __LINE__, #cond); printf(__VA_ARGS__); printf("\n"); \
    t_case_failed = 1; } } while (0)

#define SKIP(what, ...) do { printf("skip %s/%s: ", t_case_name, what); printf(__VA_ARGS__); printf("\n"); \
    t_skipped++; } while (0)

#define RUN(fn) do { t_case_name = #fn; t_case_failed = 0; fn(); \
    if (t_case_failed) t_failed++; else { t_passed++; printf("ok %s\n", #fn); } \
    fflush(stdout); } while (0)

/* Path of a file under ../shared (override with MR_SHARED). */
static inline const char *t_shared(const char *rel) {
    static char buf[8][1024]; static int i;
    const char *root = getenv("MR_SHARED");
    char *b = buf[i++ & 7];
    snprintf(b, 1024, "%s/%s", root ? root : "../shared", rel);
    return b;
}

static inline int t_finish(void) {
    if (t_skipped) printf("# %d passed, %d failed, %d skipped\n", t_passed, t_failed, t_skipped);
    else printf("# %d passed, %d failed\n", t_passed, t_failed);
    return t_failed ? 1 : 0;
}
#endif
