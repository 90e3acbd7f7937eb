/* make bench-vs-llama (with bench/vs_llama.sh): mr_matmul timed the way llama.cpp's
 * `test-backend-ops perf` times MUL_MAT, so the two can be compared side by side.
 *
 * Per type, shape (rows x cols) and column count: one weight matrix (random valid blocks; it stays
 * in cache, as in test-backend-ops), one warm-up call, then windows of >= 20 ms of calls until
 * --min-time seconds have passed; prints the best and the median window's microseconds per call
 * (the best is the least disturbed on a shared machine). With one thread the windows are timed in
 * the thread's CPU time, so time spent descheduled by other load does not count; with several,
 * in wall time. The activations are converted to the
 * partner type inside every call, as ggml does per MUL_MAT node. bench/ggml_mm.c times ggml the
 * same way.
 *
 * --ggml-test-file PATH writes the same cases as a test-backend-ops --test-file (one MUL_MAT per
 * line: op 29, out F32 [rows, n], src0 TYPE [cols, rows], src1 F32 [cols, n], named
 * TYPE_ROWSxCOLS_nN) and exits; our type ids are ggml's.
 *
 * Usage: bench_mm [--types iq3_s,mxfp4] [--shapes 4096x2048,4096x4096] [--ncols 1,512]
 *                 [--threads N] [--min-time S] [--ggml-test-file PATH]
 * Output lines: "mm TYPE ROWS COLS N US_BEST US_MEDIAN". */
#include "base/base.h"
#include "bench_isa.h"
#include "base/pool.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "../tests/simd_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* one thread: the thread's CPU time (time spent descheduled on a shared machine does not count);
 * several: wall time */
static double bm_clock(int cpu) {
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#define GGML_OP_MUL_MAT 29

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int parse_list(const char *s, int *out, int max, int types) {
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ",")) {
        int v = types ? mr_type_from_name(tok) : atoi(tok);
        if (v < 0 || (!types && v < 1)) { fprintf(stderr, "error: bad list item '%s'\n", tok); return -1; }
        out[n++] = v;
    }
    return n;
}

static int parse_shapes(const char *s, int64_t (*out)[2], int max) {
    int n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *tok = strtok(buf, ","); tok && n < max; tok = strtok(NULL, ",")) {
        long long r, c;
        if (sscanf(tok, "%lldx%lld", &r, &c) != 2 || r < 1 || c < 1) {
            fprintf(stderr, "error: bad shape '%s' (ROWSxCOLS)\n", tok);
            return -1;
        }
        out[n][0] = r;
        out[n][1] = c;
        n++;
    }
    return n;
}

int main(int argc, char **argv) {
    bench_isa_from_env();
    static const int default_types[] = {
        MR_TYPE_F16, MR_TYPE_BF16, MR_TYPE_Q8_0, MR_TYPE_Q4_0, MR_TYPE_Q4_1, MR_TYPE_Q2_K, MR_TYPE_Q4_K,
        MR_TYPE_Q5_K, MR_TYPE_Q6_K, MR_TYPE_IQ2_XXS, MR_TYPE_IQ3_S, MR_TYPE_IQ4_NL, MR_TYPE_IQ4_XS,
        MR_TYPE_MXFP4, MR_TYPE_NVFP4, MR_TYPE_IQ1_S, MR_TYPE_IQ1_M};
    int types[64], ntypes = 0, ncols[8] = {1, 512}, nn = 2, nthreads = 2;
    int64_t shapes[8][2] = {{4096, 2048}, {4096, 4096}};
    int nshapes = 2;
    double min_time = 1.0;
    const char *test_file = NULL;
    for (size_t i = 0; i < sizeof default_types / sizeof default_types[0]; i++) types[ntypes++] = default_types[i];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--types") && v) { if ((ntypes = parse_list(v, types, 64, 1)) < 0) return 1; i++; }
        else if (!strcmp(a, "--ncols") && v) { if ((nn = parse_list(v, ncols, 8, 0)) < 0) return 1; i++; }
        else if (!strcmp(a, "--shapes") && v) { if ((nshapes = parse_shapes(v, shapes, 8)) < 0) return 1; i++; }
        else if (!strcmp(a, "--threads") && v) { nthreads = atoi(v); i++; }
        else if (!strcmp(a, "--min-time") && v) { min_time = atof(v); i++; }
        else if (!strcmp(a, "--ggml-test-file") && v) { test_file = v; i++; }
        else {
            fprintf(stderr, "usage: %s [--types a,b] [--shapes RxC,..] [--ncols 1,512] [--threads N] [--min-time S] "
                            "[--ggml-test-file PATH]\n", argv[0]);
            return !strcmp(a, "--help") ? 0 : 1;
        }
    }
    if (nthreads < 1 || min_time <= 0) { fprintf(stderr, "error: bad option value\n"); return 1; }

    if (test_file) {
        FILE *f = fopen(test_file, "w");
        if (!f) { fprintf(stderr, "error: cannot write %s\n", test_file); return 1; }
        for (int ti = 0; ti < ntypes; ti++)
            for (int s = 0; s < nshapes; s++)
                for (int k = 0; k < nn; k++) {
                    const int64_t rows = shapes[s][0], cols = shapes[s][1], n = ncols[k];
                    /* op type ne[4] n_params | n_src, src0: type ne[4] nb[4] (0: contiguous), src1 | name */
                    fprintf(f, "%d 0 %lld %lld 1 1 0 2 %d %lld %lld 1 1 0 0 0 0 0 %lld %lld 1 1 0 0 0 0 %s_%lldx%lld_n%lld\n",
                            GGML_OP_MUL_MAT, (long long)rows, (long long)n, types[ti], (long long)cols,
                            (long long)rows, (long long)cols, (long long)n, mr_type_name(types[ti]),
                            (long long)rows, (long long)cols, (long long)n);
                }
        fclose(f);
        return 0;
    }

    mr_pool *pool = mr_pool_create(nthreads);
    if (!pool) { fprintf(stderr, "error: %s\n", mr_get_error()); return 1; }
    int64_t max_rc = 0, max_rn = 0, max_cn = 0;
    for (int s = 0; s < nshapes; s++)
        for (int k = 0; k < nn; k++) {
            if (shapes[s][0] * shapes[s][1] > max_rc) max_rc = shapes[s][0] * shapes[s][1];
            if (shapes[s][0] * ncols[k] > max_rn) max_rn = shapes[s][0] * ncols[k];
            if (shapes[s][1] * ncols[k] > max_cn) max_cn = shapes[s][1] * ncols[k];
        }
    uint8_t *w = mr_aligned_alloc(64, (size_t)max_rc * 4 + 64);
    float *x = malloc(sizeof(float) * (size_t)max_cn), *y = malloc(sizeof(float) * (size_t)max_rn);
    if (!w || !x || !y) { fprintf(stderr, "error: out of memory\n"); return 1; }
    for (int64_t i = 0; i < max_cn; i++) x[i] = sd_normalish();
    printf("# moerun bench_mm: ISA %s, %d threads, windows of >= 20 ms (%s time) over >= %.1f s per case\n", mr_isa_name(mr_isa()),
           nthreads, nthreads == 1 ? "CPU" : "wall", min_time);
    for (int ti = 0; ti < ntypes; ti++) {
        const int type = types[ti];
        for (int s = 0; s < nshapes; s++) {
            const int64_t rows = shapes[s][0], cols = shapes[s][1];
            const size_t wbytes = mr_row_size(type, cols) * (size_t)rows;
            if (!wbytes) { fprintf(stderr, "error: %s does not fit %lld columns\n", mr_type_name(type), (long long)cols); return 1; }
            sd_weights(type, w, rows * cols, 0);
            for (int k = 0; k < nn; k++) {
                const int64_t n = ncols[k];
                if (mr_matmul(pool, w, type, rows, cols, x, n, y) != 0) { fprintf(stderr, "error: %s\n", mr_get_error()); return 1; }
                double win[4096];
                int nw = 0;
                const int cpu = nthreads == 1;
                const double t0 = mr_now();
                while ((mr_now() - t0 < min_time || nw < 3) && nw < 4096) {
                    long runs = 0;
                    const double w0 = bm_clock(cpu);
                    double t;
                    do {
                        if (mr_matmul(pool, w, type, rows, cols, x, n, y) != 0) return 1;
                        runs++;
                        t = bm_clock(cpu) - w0;
                    } while (t < 0.02);
                    win[nw++] = t / runs;
                }
                qsort(win, nw, sizeof win[0], cmp_d);
                printf("mm %s %lld %lld %lld %.2f %.2f\n", mr_type_name(type), (long long)rows, (long long)cols,
                       (long long)n, win[0] * 1e6, win[nw / 2] * 1e6);
                fflush(stdout);
            }
        }
    }
    mr_pool_free(pool);
    mr_aligned_free(w);
    free(x);
    free(y);
    return 0;
}
