/* Q4_0 products with and without the repacked copy (quant/repack.h), one thread, CPU time.
 *   build/bench/bench_repack [--rows 768] [--cols 2048] [--ncols 1,4,8,32,64] [--reps 20]
 * (768 x 2048 is a Qwen3-30B-A3B expert gate/up matrix; an expert takes ~32 tokens of a pp512.) */
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/repack.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    int rows = 768, cols = 2048, reps = 20, ncl[8] = {1, 4, 8, 32, 64}, nn = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows")) rows = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cols")) cols = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ncols")) {
            nn = 0;
            for (char *p = argv[i + 1]; *p && nn < 8;) { ncl[nn++] = (int)strtol(p, &p, 10); if (*p == ',') p++; }
        } else { fprintf(stderr, "unknown option %s\n", argv[i]); return 1; }
    }
    if (!mr_repack_applies(MR_TYPE_Q4_0, cols) || rows % 16) { fprintf(stderr, "repacking does not apply here\n"); return 1; }
    const int maxc = 64;
    const size_t wr = mr_row_size(MR_TYPE_Q4_0, cols);
    uint8_t *W = malloc(wr * (size_t)rows);
    float *X = malloc(sizeof(float) * (size_t)cols * maxc), *Y = malloc(sizeof(float) * (size_t)rows * maxc);
    unsigned s = 7;
    for (size_t i = 0; i < wr * (size_t)rows; i++) { s = s * 1664525u + 1013904223u; W[i] = (uint8_t)(s >> 24); }
    for (size_t i = 0; i < wr * (size_t)rows; i += 18) { uint16_t d = mr_fp32_to_fp16(0.01f); memcpy(W + i, &d, 2); }
    for (size_t i = 0; i < (size_t)cols * maxc; i++) { s = s * 1664525u + 1013904223u; X[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
    printf("# Q4_0 %d x %d, 1 thread, CPU time, best of %d\n%6s | %10s %9s | %10s %9s | %7s\n", rows, cols, reps, "ncols",
           "plain ms", "GFLOP/s", "repack ms", "GFLOP/s", "speedup");
    for (int k = 0; k < nn; k++) {
        const int nc = ncl[k] < 1 ? 1 : ncl[k] > maxc ? maxc : ncl[k];
        double t[2];
        for (int rp = 0; rp < 2; rp++) {
            if (rp && mr_repack_add(NULL, W, MR_TYPE_Q4_0, cols, rows)) { fprintf(stderr, "repack failed\n"); return 1; }
            t[rp] = 1e30;
            for (int r = 0; r < reps; r++) {
                double a = cpu_now();
                mr_matmul(NULL, W, MR_TYPE_Q4_0, rows, cols, X, nc, Y);
                double b = cpu_now() - a;
                if (b < t[rp]) t[rp] = b;
            }
            if (rp) mr_repack_remove(W);
        }
        const double fl = 2.0 * rows * cols * nc;
        printf("%6d | %10.3f %9.1f | %10.3f %9.1f | %6.2fx\n", nc, t[0] * 1e3, fl / t[0] * 1e-9, t[1] * 1e3, fl / t[1] * 1e-9,
               t[0] / t[1]);
    }
    return 0;
}
