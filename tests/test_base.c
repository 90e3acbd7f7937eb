#include "test.h"
#include "base/base.h"
#include "base/pool.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdatomic.h>

/* fp16: every half value round-trips, and float->half rounds to nearest even. */
static void test_fp16_roundtrip(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = mr_fp16_to_fp32((uint16_t)h);
        if (isnan(f)) continue;
        if (mr_fp32_to_fp16(f) != h) bad++;
    }
    CHECK(bad == 0, "%d half values do not round-trip", bad);
}

static void test_fp16_rounding(void) {
    /* halfway between 1 and the next half (1 + 2^-10): ties to even -> 1.0 */
    CHECK(mr_fp32_to_fp16(1.0f + 0x1p-11f) == 0x3c00, "tie not to even");
    CHECK(mr_fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01, "above tie not rounded up");
    CHECK(mr_fp32_to_fp16(65520.0f) == 0x7c00, "65520 must overflow to inf");
    CHECK(mr_fp32_to_fp16(65519.0f) == 0x7bff, "65519 must round to max half");
    CHECK(mr_fp32_to_fp16(0x1p-25f) == 0x0000, "2^-25 ties to zero");
    CHECK(mr_fp32_to_fp16(0x1.8p-25f) == 0x0001, "1.5*2^-25 rounds to smallest subnormal");
    CHECK(mr_fp32_to_fp16(-2.0f) == 0xc000, "-2");
    /* midpoints between adjacent subnormals tie to even */
    for (uint16_t h = 1; h < 0x3ff; h++) {
        float mid = (mr_fp16_to_fp32(h) + mr_fp16_to_fp32((uint16_t)(h + 1))) * 0.5f;
        uint16_t want = (h & 1) ? (uint16_t)(h + 1) : h;
        CHECK(mr_fp32_to_fp16(mid) == want, "subnormal midpoint %u", h);
    }
}

static void test_bf16(void) {
    CHECK(mr_fp32_to_bf16(1.0f) == 0x3f80, "1.0");
    CHECK(mr_bf16_to_fp32(0x3f80) == 1.0f, "1.0 back");
    CHECK(mr_fp32_to_bf16(mr_bits_f32(0x3f808000)) == 0x3f80, "tie to even (down)");
    CHECK(mr_fp32_to_bf16(mr_bits_f32(0x3f818000)) == 0x3f82, "tie to even (up)");
}

typedef struct { atomic_long sum; int phase_ok; long data[64]; } pool_job;
static void pool_fn(void *arg, int ith, int nth) {
    pool_job *j = arg;
    long lo, hi;
    mr_split(64, ith, nth, &lo, &hi);
    for (long i = lo; i < hi; i++) atomic_fetch_add(&j->sum, i);
}

static void test_pool(void) {
    for (int n = 1; n <= 4; n++) {
        mr_pool *p = mr_pool_create(n);
        CHECK(p != NULL, "create %d", n);
        if (!p) return;
        for (int rep = 0; rep < 200; rep++) {
            pool_job j = {0};
            mr_pool_run(p, pool_fn, &j);
            CHECK(atomic_load(&j.sum) == 64 * 63 / 2, "threads=%d rep=%d sum=%ld", n, rep, (long)atomic_load(&j.sum));
        }
        mr_pool_free(p);
    }
}

typedef struct { atomic_int hits[1000]; } chunk_job;
static void chunk_fn(void *arg, long i) { atomic_fetch_add(&((chunk_job *)arg)->hits[i], 1); }

/* every chunk exactly once, for any pool size, mixed with mr_pool_run jobs */
static void test_pool_chunks(void) {
    static const long counts[] = {1, 2, 7, 64, 1000};
    for (int n = 0; n <= 4; n++) {
        mr_pool *p = n ? mr_pool_create(n) : NULL;
        CHECK(n == 0 || p != NULL, "create %d", n);
        static chunk_job j;
        for (int rep = 0; rep < 300; rep++) {
            long nc = counts[rep % 5];
            for (long i = 0; i < nc; i++) atomic_store(&j.hits[i], 0);
            mr_pool_run_chunks(p, chunk_fn, &j, nc);
            int bad = 0;
            for (long i = 0; i < nc; i++) bad += atomic_load(&j.hits[i]) != 1;
            CHECK(bad == 0, "threads=%d rep=%d: %d of %ld chunks not run exactly once", n, rep, bad, nc);
            if (rep % 3 == 0) {
                pool_job pj = {0};
                mr_pool_run(p, pool_fn, &pj);
                CHECK(atomic_load(&pj.sum) == 64 * 63 / 2, "run after chunks: threads=%d rep=%d", n, rep);
            }
        }
        mr_pool_free(p);
    }
}

static mr_pool *g_pool;
static void barrier_fn(void *arg, int ith, int nth) {
    pool_job *j = arg;
    for (int step = 0; step < 50; step++) {
        j->data[ith] = step;
        mr_pool_barrier(g_pool);
        for (int t = 0; t < nth; t++)
            if (j->data[t] != step) j->phase_ok = 0;
        mr_pool_barrier(g_pool);
    }
}

static void test_pool_barrier(void) {
    g_pool = mr_pool_create(3);
    pool_job j = {0};
    j.phase_ok = 1;
    mr_pool_run(g_pool, barrier_fn, &j);
    CHECK(j.phase_ok, "a thread saw another thread's previous phase");
    mr_pool_free(g_pool);
}

static void test_split(void) {
    long total = 0, prev = 0;
    for (int i = 0; i < 7; i++) {
        long lo, hi;
        mr_split(100, i, 7, &lo, &hi);
        CHECK(lo == prev, "contiguous");
        total += hi - lo;
        prev = hi;
    }
    CHECK(total == 100, "covers");
}

static void test_isa(void) {
    int best = mr_cpu_best_isa();
    CHECK(mr_set_isa(MR_ISA_SCALAR) == 0, "scalar always available");
    CHECK(mr_isa() == MR_ISA_SCALAR, "set");
    CHECK(mr_set_isa(best) == 0 && mr_isa() == best, "best");
}

/* scratch: the first carving grows the block once; later carvings of at most that size allocate
 * nothing and return the same aligned, non-overlapping buffers; a larger batch grows it again */
static int carve(mr_scratch *s, size_t a, size_t b, char **pa, char **pb, int *passes) {
    int r;
    *passes = 0;
    do {
        mr_scratch_begin(s);
        *pa = mr_scratch_take(s, a);
        *pb = mr_scratch_take(s, b);
        ++*passes;
    } while ((r = mr_scratch_end(s)) == 1);
    return r;
}

static void test_scratch(void) {
    mr_scratch s = {0};
    char *a, *b, *a2, *b2;
    int passes;
    CHECK(carve(&s, 100, 1000, &a, &b, &passes) == 0 && passes == 2, "first carving: %d passes", passes);
    CHECK(a && b && ((uintptr_t)a % 64) == 0 && ((uintptr_t)b % 64) == 0 && b >= a + 100, "layout %p %p", (void *)a, (void *)b);
    memset(a, 1, 100);
    memset(b, 2, 1000);
    void *block = s.p;
    CHECK(carve(&s, 50, 1000, &a2, &b2, &passes) == 0 && passes == 1 && s.p == block && a2 == a, "re-use: %d passes", passes);
    CHECK(carve(&s, 100, 5000, &a2, &b2, &passes) == 0 && passes == 2 && s.cap >= 5100, "growth: %d passes", passes);
    mr_scratch_begin(&s);
    CHECK(mr_scratch_take(&s, SIZE_MAX - 8) == NULL && mr_scratch_end(&s) == -1 && strstr(mr_get_error(), "overflow"),
          "overflow: %s", mr_get_error());
    mr_scratch_free(&s);
    CHECK(s.p == NULL && s.cap == 0, "freed");
}

/* arena use: the first call of a size takes extra allocations, the reset merges them, and the same
 * sequence of sizes then allocates nothing; buffers are aligned and do not overlap */
static void test_scratch_arena(void) {
    mr_scratch s = {0};
    const size_t sz[4] = {100, 5000, 1, 64};
    for (int round = 0; round < 3; round++) {
        mr_alloc_fail_at(LONG_MAX, 0); /* counts allocations, fails none */
        mr_scratch_reset(&s);
        char *p[4];
        for (int i = 0; i < 4; i++) {
            p[i] = mr_scratch_alloc(&s, sz[i]);
            CHECK(p[i] && (uintptr_t)p[i] % 64 == 0, "round %d buffer %d: %p", round, i, (void *)p[i]);
            if (p[i]) memset(p[i], i + 1, sz[i]);
        }
        for (int i = 0; i < 4; i++)
            for (size_t k = 0; p[i] && k < sz[i]; k++)
                if (p[i][k] != (char)(i + 1)) { CHECK(0, "round %d buffer %d overwritten at %zu", round, i, k); break; }
        const long n = mr_alloc_count();
        mr_alloc_fail_at(0, 0);
        /* round 0: one extra per buffer; round 1: the merged block (one allocation); round 2: none */
        CHECK(round == 0 ? n == 4 : round == 1 ? n == 1 : n == 0, "round %d: %ld allocations", round, n);
    }
    CHECK(s.cap >= 100 + 5000 + 1 + 64 && s.extra == NULL, "merged block of %zu bytes", s.cap);
    mr_alloc_fail_at(1, 1); /* the next reset cannot merge: buffers still come (from extras) */
    mr_scratch_reset(&s);
    CHECK(mr_scratch_alloc(&s, 10) != NULL, "from the block after a reset without growth");
    CHECK(mr_scratch_alloc(&s, 1 << 20) == NULL && strstr(mr_get_error(), "scratch"), "failed extra: %s", mr_get_error());
    mr_alloc_fail_at(0, 0);
    mr_scratch_free(&s);
    CHECK(s.p == NULL && s.extra == NULL, "freed");
}

int main(void) {
    RUN(test_scratch);
    RUN(test_scratch_arena);
    RUN(test_fp16_roundtrip);
    RUN(test_fp16_rounding);
    RUN(test_bf16);
    RUN(test_pool);
    RUN(test_pool_barrier);
    RUN(test_pool_chunks);
    RUN(test_split);
    RUN(test_isa);
    return t_finish();
}
