/* make bench-dot: single-thread kernel speed in cache (a benchmark, not a test).
 *
 * Per type and ISA: the vec_dot and 4-column kernels over --rows weight rows of --cols values
 * (default 32 x 4096: the rows stay in L2), repeated; each pass is timed and the fastest pass of
 * --time seconds is kept (on a shared machine short passes mostly run undisturbed, so the minimum
 * is close to the kernel's real speed). Prints ns per 256 weights and GB/s of weight bytes for one
 * column, and ns per 256 weights and column for the 4-column kernel and, where the type has one, the
 * AVX-512 GEMM block (MR_GEMM_NR rows x MR_GEMM_NC columns per call).
 *
 * Usage: bench_dot [--types iq3_s,iq2_xxs] [--isa avx2,avx512] [--rows R] [--cols C] [--time S] */
#include "base/base.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "../tests/simd_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double best_gemm(mr_gemm_fn gm, const uint8_t *w, size_t wrow, const uint8_t *y, size_t yrow, int rows,
                        int cols, double secs) {
    double best = 1e30;
    float s[MR_GEMM_NR * MR_GEMM_NC];
    volatile float sink = 0;
    const double t_end = mr_now() + secs;
    do {
        const double t0 = mr_now();
        for (int r = 0; r < rows; r += MR_GEMM_NR) {
            const int nr = rows - r < MR_GEMM_NR ? rows - r : MR_GEMM_NR;
            gm(cols, w + (size_t)r * wrow, wrow, nr, y, yrow, MR_GEMM_NC, s, MR_GEMM_NR);
            sink += s[0];
        }
        const double t = mr_now() - t0;
        if (t < best) best = t;
    } while (mr_now() < t_end);
    (void)sink;
    return best;
}

static double best_pass(mr_vec_dot_fn dot, mr_vec_dot_x4_fn dot4, const uint8_t *w, size_t wrow, const uint8_t *y,
                        size_t yrow, int rows, int cols, double secs) {
    double best = 1e30;
    float s[4];
    volatile float sink = 0;
    const double t_end = mr_now() + secs;
    do {
        const double t0 = mr_now();
        for (int r = 0; r < rows; r++) {
            if (dot4) dot4(cols, s, w + (size_t)r * wrow, y, yrow);
            else dot(cols, s, w + (size_t)r * wrow, y);
            sink += s[0];
        }
        const double t = mr_now() - t0;
        if (t < best) best = t;
    } while (mr_now() < t_end);
    (void)sink;
    return best;
}

int main(int argc, char **argv) {
    int types[64], ntypes = 0, isas[3] = {MR_ISA_AVX512, 0, 0}, nisa = 1, rows = 32, cols = 4096;
    double secs = 0.3;
    static const int deflt[] = {MR_TYPE_IQ2_XXS, MR_TYPE_IQ2_XS, MR_TYPE_IQ2_S, MR_TYPE_IQ3_XXS, MR_TYPE_IQ3_S,
                                MR_TYPE_IQ1_S, MR_TYPE_IQ1_M, MR_TYPE_IQ4_NL, MR_TYPE_IQ4_XS, MR_TYPE_MXFP4,
                                MR_TYPE_NVFP4};
    for (size_t i = 0; i < sizeof deflt / sizeof deflt[0]; i++) types[ntypes++] = deflt[i];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--types") && v) {
            char buf[1024];
            snprintf(buf, sizeof buf, "%s", v);
            ntypes = 0;
            for (char *t = strtok(buf, ","); t && ntypes < 64; t = strtok(NULL, ",")) {
                if ((types[ntypes++] = mr_type_from_name(t)) < 0) { fprintf(stderr, "error: unknown type %s\n", t); return 1; }
            }
            i++;
        } else if (!strcmp(a, "--isa") && v) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", v);
            nisa = 0;
            for (char *t = strtok(buf, ","); t && nisa < 3; t = strtok(NULL, ","))
                isas[nisa++] = !strcmp(t, "avx512") ? MR_ISA_AVX512 : !strcmp(t, "avx2") ? MR_ISA_AVX2 : MR_ISA_SCALAR;
            i++;
        } else if (!strcmp(a, "--rows") && v) { rows = atoi(v); i++; }
        else if (!strcmp(a, "--cols") && v) { cols = atoi(v); i++; }
        else if (!strcmp(a, "--time") && v) { secs = atof(v); i++; }
        else {
            fprintf(stderr, "usage: %s [--types a,b] [--isa avx2,avx512] [--rows R] [--cols C] [--time S]\n", argv[0]);
            return !strcmp(a, "--help") ? 0 : 1;
        }
    }
    if (rows < 1 || cols < 256 || cols % 256) { fprintf(stderr, "error: bad --rows/--cols\n"); return 1; }
    printf("# bench_dot: %d rows x %d cols, one thread, fastest pass of %.2f s\n", rows, cols, secs);
    printf("%-8s %-6s | %9s %8s | %9s %9s\n", "type", "isa", "ns/256", "GB/s", "x4 ns/256", "gemm");
    for (int ti = 0; ti < ntypes; ti++) {
        const int type = types[ti];
        const mr_type_traits *t = mr_type_get(type);
        const size_t wrow = mr_row_size(type, cols), yrow = mr_row_size(t->vec_dot_type, cols);
        uint8_t *w = mr_aligned_alloc(64, wrow * rows), *y = mr_aligned_alloc(64, yrow * MR_GEMM_NC);
        if (!w || !y) return 1;
        sd_weights(type, w, (int64_t)rows * cols, 0);
        sd_acts(t->vec_dot_type, y, (int64_t)cols * MR_GEMM_NC, 0, NULL);
        for (int k = 0; k < nisa; k++) {
            const mr_kern *kk = mr_kern_get(type, isas[k]);
            const mr_vec_dot_fn dot = kk->dot;
            const mr_vec_dot_x4_fn dot4 = kk->dot4;
            if (kk->isa != isas[k]) { printf("%-8s %-6s | (no kernel)\n", t->name, mr_isa_name(isas[k])); continue; }
            const double nsb = (double)rows * cols / 256;
            const double t1 = best_pass(dot, NULL, w, wrow, y, yrow, rows, cols, secs);
            const double t4 = dot4 ? best_pass(NULL, dot4, w, wrow, y, yrow, rows, cols, secs) : 0;
            mr_gemm_fn gm = kk->gemm;
            const double tg = gm ? best_gemm(gm, w, wrow, y, yrow, rows, cols, secs) : 0;
            printf("%-8s %-6s | %9.2f %8.2f | %9.2f %9.2f\n", t->name, mr_isa_name(isas[k]), t1 * 1e9 / nsb,
                   (double)wrow * rows / t1 / 1e9, dot4 ? t4 * 1e9 / nsb / 4 : 0.0, gm ? tg * 1e9 / nsb / MR_GEMM_NC : 0.0);
            fflush(stdout);
        }
        mr_aligned_free(w);
        mr_aligned_free(y);
    }
    return 0;
}
