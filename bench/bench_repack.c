/* Products with and without the repacked copy (quant/repack.h; the plain product alone for a type without one), one thread, CPU time, under the
 * ISA in use (MOERUN_ISA).
 *   build/bench/bench_repack [--type q4_0] [--rows 768] [--cols 2048] [--ncols 1,4,8,32,64] [--reps 20]
 * (768 x 2048 is a Qwen3-30B-A3B expert gate/up matrix; an expert takes ~32 tokens of a pp512.) */
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/repack.h"
#include "base/base.h"
#include "bench_isa.h"
#include "moerun.h"
#include "../tests/simd_data.h"

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
    bench_isa_from_env();
    int rows = 768, cols = 2048, reps = 20, ncl[8] = {1, 4, 8, 32, 64}, nn = 5, type = MR_TYPE_Q4_0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--rows")) rows = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--type")) type = mr_type_from_name(argv[i + 1]);
        else if (!strcmp(argv[i], "--cols")) cols = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ncols")) {
            nn = 0;
            for (char *p = argv[i + 1]; *p && nn < 8;) { ncl[nn++] = (int)strtol(p, &p, 10); if (*p == ',') p++; }
        } else { fprintf(stderr, "unknown option %s\n", argv[i]); return 1; }
    }
    if (type < 0) { fprintf(stderr, "unknown type\n"); return 1; }
    const int maxc = 64;
    const size_t wr = mr_row_size(type, cols);
    uint8_t *W = malloc(wr * (size_t)rows);
    float *X = malloc(sizeof(float) * (size_t)cols * maxc), *Y = malloc(sizeof(float) * (size_t)rows * maxc);
    if (!W || !X || !Y) return 1;
    sd_weights(type, W, (int64_t)rows * cols, 0);
    for (size_t i = 0; i < (size_t)cols * maxc; i++) X[i] = sd_normalish();
    int err;
    /* no copy (the type has no repacked layout under this ISA): the plain column only */
    mr_repacked *rpk = mr_repack_make(NULL, W, type, cols, rows, &err);
    if (!rpk && err) { fprintf(stderr, "repack failed: %s\n", mr_last_error()); return 1; }
    const mr_mat plain = {.data = W, .type = type, .rows = rows, .cols = cols}, packed = {.data = W, .type = type, .rows = rows, .cols = cols, .rp = rpk};
    printf("# %s %d x %d, %s, 1 thread, CPU time, best of %d\n%6s | %10s %9s | %10s %9s | %7s\n", mr_type_name(type), rows, cols,
           mr_isa_name(mr_isa()), reps, "ncols", "plain ms", "GFLOP/s", "repack ms", "GFLOP/s", "speedup");
    for (int k = 0; k < nn; k++) {
        const int nc = ncl[k] < 1 ? 1 : ncl[k] > maxc ? maxc : ncl[k];
        double t[2];
        t[1] = 0;
        for (int rp = 0; rp < (rpk ? 2 : 1); rp++) {
            const mr_matmul_task tk = {.w = rp ? &packed : &plain, .X = X, .ncols = nc, .Y = Y};
            t[rp] = 1e30;
            for (int r = 0; r < reps; r++) {
                double a = cpu_now();
                mr_matmul_many(NULL, &tk, 1);
                double b = cpu_now() - a;
                if (b < t[rp]) t[rp] = b;
            }
        }
        const double fl = 2.0 * rows * cols * nc;
        if (!rpk) printf("%6d | %10.3f %9.1f | %10s %9s | %7s\n", nc, t[0] * 1e3, fl / t[0] * 1e-9, "-", "-", "-");
        else
            printf("%6d | %10.3f %9.1f | %10.3f %9.1f | %6.2fx\n", nc, t[0] * 1e3, fl / t[0] * 1e-9, t[1] * 1e3, fl / t[1] * 1e-9,
                   t[0] / t[1]);
    }
    mr_repack_free(rpk);
    free(W); free(X); free(Y);
    return 0;
}
