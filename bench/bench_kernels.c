/* make bench-kernels: kernel throughput on this machine (a benchmark, not a test).
 *
 *   DRAM read bandwidth (1 thread, all threads) over a buffer of --gib GiB;
 *   per type: GEMV (one column, as in decode) GB/s of weight bytes on 4096x2048 and 4096x4096
 *   matrices (rows x cols), streaming over >= --gib GiB of distinct copies per measurement so the
 *   weights come from DRAM, not cache; 1 thread and all threads; % of the DRAM bandwidth;
 *   GEMM GFLOP/s for a 512-column batch on one 4096x4096 matrix (all threads).
 *
 * Usage: bench_kernels [--types q4_K,q8_0,...] [--threads N] [--gib G] [--reps R] [--no-gemm] [--cpu-time] [--repack]
 * --repack: the GEMV reads the copies as one tall matrix through its repacked copy (the resident
 * weights' layout, quant/repack.h) where the type has one under the ISA; the copy doubles the memory.
 * The ISA is the one in use (MOERUN_ISA=scalar|avx2|avx512 to force one). Run it nice'd on a quiet
 * machine; each measurement is the best of --reps passes. --cpu-time divides by the process CPU time
 * per thread instead of the wall time: on a shared machine this estimates compute-bound rates (GEMM)
 * with dedicated cores (waiting threads spin, so it errs low). It says nothing about bandwidth-bound
 * ones (DRAM, GEMV): those need wall time on a quiet machine. */
#include "base/base.h"
#include "bench_isa.h"
#include "base/pool.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "quant/repack.h"
#include "../tests/simd_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static int bk_cpu_time; /* --cpu-time */
static int bk_nth = 1;  /* threads of the measurement in progress */

/* seconds of the measurement: wall time, or process CPU time / threads */
static double bk_clock(void) {
    if (!bk_cpu_time) return mr_now();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + (double)ts.tv_nsec * 1e-9) / bk_nth;
}

static const int default_types[] = {
    MR_TYPE_F16, MR_TYPE_BF16, MR_TYPE_Q8_0, MR_TYPE_Q4_0, MR_TYPE_Q4_1, MR_TYPE_Q5_0, MR_TYPE_Q2_K,
    MR_TYPE_Q3_K, MR_TYPE_Q4_K, MR_TYPE_Q5_K, MR_TYPE_Q6_K, MR_TYPE_IQ2_XXS, MR_TYPE_IQ3_S,
    MR_TYPE_IQ4_NL, MR_TYPE_IQ4_XS, MR_TYPE_MXFP4, MR_TYPE_NVFP4, MR_TYPE_IQ1_S, MR_TYPE_IQ1_M};

/* ---- DRAM read bandwidth: mr_dram_read_pass (src/base/measure.c), timed by bk_clock ---- */
static double bk_dram(mr_pool *pool, const uint8_t *buf, size_t bytes, int reps) {
    double best = 0;
    bk_nth = mr_pool_size(pool);
    for (int r = 0; r < reps; r++) {
        double t = bk_clock();
        mr_dram_read_pass(pool, buf, bytes);
        t = bk_clock() - t;
        if (bytes / t > best) best = bytes / t;
    }
    return best / 1e9;
}

/* ---- GEMV over many distinct copies of one matrix ---- */
/* rp: the repacked copy of all ncopies copies as one matrix (then one product of rows * ncopies rows
 * into y, which holds that many) */
static double bk_gemv(mr_pool *pool, int type, const uint8_t *arena, size_t mat_bytes, int ncopies, int64_t rows,
                      int64_t cols, const float *x, float *y, int reps, const mr_repacked *rp) {
    double best = 0;
    bk_nth = mr_pool_size(pool);
    const mr_mat m = {.data = arena, .type = type, .rows = rows * ncopies, .cols = cols, .rp = rp};
    const mr_matmul_task tk = {.w = &m, .X = x, .ncols = 1, .Y = y};
    for (int r = 0; r < reps; r++) {
        double t = bk_clock();
        if (rp && mr_matmul_many(pool, &tk, 1) != 0) return -1;
        for (int k = 0; k < ncopies && !rp; k++)
            if (mr_matmul(pool, arena + (size_t)k * mat_bytes, type, rows, cols, x, 1, y) != 0) return -1;
        t = bk_clock() - t;
        double gbs = (double)mat_bytes * ncopies / t / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

static int parse_types(const char *s, int *out) {
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int t = mr_type_from_name(tok);
        if (t < 0) { fprintf(stderr, "error: unknown type '%s'\n", tok); return -1; }
        out[n++] = t;
    }
    return n;
}

int main(int argc, char **argv) {
    bench_isa_from_env();
    int types[64], ntypes = 0, nthreads = mr_cpu_physical_cores(), reps = 5, gemm = 1, repack = 0;
    double gib = 2.0;
    for (size_t i = 0; i < sizeof default_types / sizeof default_types[0]; i++) types[ntypes++] = default_types[i];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--types") && i + 1 < argc) {
            if ((ntypes = parse_types(argv[++i], types)) < 0) return 1;
        } else if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gib") && i + 1 < argc) gib = atof(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-gemm")) gemm = 0;
        else if (!strcmp(argv[i], "--cpu-time")) bk_cpu_time = 1;
        else if (!strcmp(argv[i], "--repack")) repack = 1;
        else {
            fprintf(stderr, "usage: %s [--types a,b] [--threads N] [--gib G] [--reps R] [--no-gemm] [--cpu-time]\n", argv[0]);
            return !strcmp(argv[i], "--help") ? 0 : 1;
        }
    }
    if (nthreads < 1 || reps < 1 || gib <= 0) { fprintf(stderr, "error: bad option value\n"); return 1; }
    size_t arena_bytes = (size_t)(gib * 1073741824.0) + ((size_t)64 << 20);
    uint8_t *arena = mmap(NULL, arena_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (arena == MAP_FAILED) { fprintf(stderr, "error: cannot map %zu bytes\n", arena_bytes); return 1; }
    madvise(arena, arena_bytes, MADV_HUGEPAGE);
    memset(arena, 1, arena_bytes);
    mr_pool *pool = mr_pool_create(nthreads);
    if (!pool) { fprintf(stderr, "error: %s\n", mr_get_error()); return 1; }

    size_t stream = (size_t)(gib * 1073741824.0);
    double dram1 = bk_dram(NULL, arena, stream, reps), dramN = bk_dram(pool, arena, stream, reps);
    printf("# moerun bench-kernels: ISA %s, %d threads, %.2f GiB streamed per measurement, best of %d%s\n",
           mr_isa_name(mr_isa()), nthreads, gib, reps, bk_cpu_time ? ", rates per CPU second (--cpu-time)" : "");
    printf("# DRAM read bandwidth: %.2f GB/s (1 thread), %.2f GB/s (%d threads)%s\n", dram1, dramN, nthreads,
           bk_cpu_time ? "  [--cpu-time: bandwidth figures below are NOT wall-clock rates]" : "");
    printf("# GEMV: GB/s of weight bytes, one activation column%s; %%: of the %d-thread DRAM bandwidth\n",
           repack ? ", repacked copy where the type has one" : "", nthreads);
    printf("# GEMM: 512 columns x 4096x4096, GFLOP/s (2*rows*cols*512 / time), %d threads\n", nthreads);
    printf("%-8s %5s | %8s %8s %5s | %8s %8s %5s | %8s\n", "type", "bpw", "2048:1T", "2048:NT", "%", "4096:1T",
           "4096:NT", "%", "GEMM");

    static const int64_t shapes[2][2] = {{4096, 2048}, {4096, 4096}}; /* rows x cols */
    float *x = malloc(sizeof(float) * 4096 * 512), *y = malloc(sizeof(float) * 4096 * 512);
    if (!x || !y) return 1;
    for (size_t i = 0; i < 4096 * 512; i++) x[i] = sd_normalish();
    for (int ti = 0; ti < ntypes; ti++) {
        const int type = types[ti];
        const mr_type_traits *t = mr_type_get(type);
        if (!t || !t->vec_dot) { printf("%-8s (no dot product)\n", mr_type_name(type)); continue; }
        const mr_kern *kk = mr_kern_get(type, mr_isa());
        const mr_vec_dot_x4_fn dot4 = kk->dot4;
        const int kisa = kk->isa;
        double res[2][3];
        for (int s = 0; s < 2; s++) {
            const int64_t rows = shapes[s][0], cols = shapes[s][1];
            size_t mat = mr_row_size(type, cols) * (size_t)rows;
            int ncopies = (int)(stream / mat);
            if (ncopies < 1) ncopies = 1;
            if ((size_t)ncopies * mat > arena_bytes) ncopies = (int)(arena_bytes / mat);
            sd_weights(type, arena, rows * cols, 0);
            for (int k = 1; k < ncopies; k++) memcpy(arena + (size_t)k * mat, arena, mat);
            int err = 0;
            mr_repacked *rp = repack ? mr_repack_make(pool, arena, type, cols, rows * ncopies, &err) : NULL;
            float *yr = rp ? malloc(sizeof(float) * (size_t)(rows * ncopies)) : y;
            if (err || !yr) { fprintf(stderr, "error: repack: %s\n", mr_get_error()); return 1; }
            res[s][0] = bk_gemv(NULL, type, arena, mat, ncopies, rows, cols, x, yr, reps, rp);
            res[s][1] = bk_gemv(pool, type, arena, mat, ncopies, rows, cols, x, yr, reps, rp);
            if (rp) { mr_repack_free(rp); free(yr); }
            res[s][2] = 100.0 * res[s][1] / dramN;
        }
        double gflops = 0;
        if (gemm) {
            /* one matrix (it stays in cache: this measures compute); best of reps */
            bk_nth = nthreads;
            for (int r = 0; r < reps; r++) {
                double tt = bk_clock();
                if (mr_matmul(pool, arena, type, 4096, 4096, x, 512, y) != 0) break;
                tt = bk_clock() - tt;
                double g = 2.0 * 4096 * 4096 * 512 / tt / 1e9;
                if (g > gflops) gflops = g;
                if (tt > 20) break; /* slow (scalar) kernels: one pass is enough */
            }
        }
        printf("%-8s %5.2f | %8.2f %8.2f %5.1f | %8.2f %8.2f %5.1f | %8.1f%s%s\n", t->name,
               8.0 * t->type_size / t->block_size, res[0][0], res[0][1], res[0][2], res[1][0], res[1][1], res[1][2],
               gflops, kisa == MR_ISA_SCALAR ? "  (scalar kernel)" : "", dot4 ? "" : "  (no 4-col kernel)");
        fflush(stdout);
    }
    mr_pool_free(pool);
    munmap(arena, arena_bytes);
    free(x);
    free(y);
    return 0;
}
