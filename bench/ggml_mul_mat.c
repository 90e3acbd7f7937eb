/* Reference comparison for make bench-kernels (issue 3): ggml's CPU mul_mat on the same shapes and
 * streaming rules as bench/bench_kernels.c. Not built by the Makefile (it needs a ggml build from
 * the reference llama.cpp fork, which must stay outside this repository):
 *
 *   git -C <llama.cpp checkout> archive HEAD ggml | tar -x -C /tmp/ggml-ref   # plus an empty ggml/ggml.pc.in
 *   cmake -S /tmp/ggml-ref/ggml -B /tmp/ggml-ref/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
 *         -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF
 *   cmake --build /tmp/ggml-ref/build --target ggml ggml-cpu ggml-base
 *   cc -std=c11 -O2 -D_GNU_SOURCE -I/tmp/ggml-ref/ggml/include -Iinclude -Isrc -Itests bench/ggml_mul_mat.c \
 *      /tmp/ggml-ref/build/src/libggml{,-cpu,-base}.a build/libmoerun.a -lstdc++ -lgomp -lm -lpthread -lpcre2-8
 *   ./a.out TYPES THREADS REPS GIB [cpu]
 *
 * GEMV: one graph of mul_mats over distinct weight copies (>= GIB GiB), best of REPS; GEMM: 512
 * columns on one 4096x4096 matrix. Weights: random valid blocks (tests/simd_data.h). "cpu": rates
 * per process CPU second / threads (compute-bound figures on a shared machine). */
#include "ggml.h"
#include "ggml-cpu.h"
#include "simd_data.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static int cpu_mode, g_nth = 1;
static double clk(void) {
    if (!cpu_mode) return mr_now();
    struct timespec ts; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ((double)ts.tv_sec + ts.tv_nsec * 1e-9) / g_nth;
}

static double gemv(int type, int64_t rows, int64_t cols, double gib, int nth, int reps) {
    size_t mat = mr_row_size(type, cols) * (size_t)rows;
    int n = (int)(gib * 1073741824.0 / mat);
    if (n < 1) n = 1;
    struct ggml_init_params ip = {(size_t)n * (mat + 4096) + ((size_t)512 << 20), NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    if (!ctx) return -1;
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, 1);
    for (int64_t i = 0; i < cols; i++) ((float *)x->data)[i] = sd_normalish();
    struct ggml_cgraph *gf = ggml_new_graph_custom(ctx, 4 * n + 16, false);
    uint8_t *first = NULL;
    for (int k = 0; k < n; k++) {
        struct ggml_tensor *w = ggml_new_tensor_2d(ctx, (enum ggml_type)type, cols, rows);
        if (!first) { first = w->data; sd_weights(type, first, rows * cols, 0); }
        else memcpy(w->data, first, mat);
        ggml_build_forward_expand(gf, ggml_mul_mat(ctx, w, x));
    }
    double best = 0;
    g_nth = nth;
    for (int r = 0; r < reps; r++) {
        double t = clk();
        ggml_graph_compute_with_ctx(ctx, gf, nth);
        t = clk() - t;
        double g = (double)mat * n / t / 1e9;
        if (g > best) best = g;
    }
    ggml_free(ctx);
    return best;
}

static double gemm(int type, int nth, int reps) {
    const int64_t rows = 4096, cols = 4096, nc = 512;
    struct ggml_init_params ip = {mr_row_size(type, cols) * rows + (size_t)cols * nc * 4 + (size_t)rows * nc * 4 + ((size_t)256 << 20), NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *w = ggml_new_tensor_2d(ctx, (enum ggml_type)type, cols, rows);
    struct ggml_tensor *x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, nc);
    sd_weights(type, w->data, rows * cols, 0);
    for (int64_t i = 0; i < cols * nc; i++) ((float *)x->data)[i] = sd_normalish();
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, ggml_mul_mat(ctx, w, x));
    double best = 0;
    g_nth = nth;
    for (int r = 0; r < reps; r++) {
        double t = clk();
        ggml_graph_compute_with_ctx(ctx, gf, nth);
        t = clk() - t;
        double g = 2.0 * rows * cols * nc / t / 1e9;
        if (g > best) best = g;
    }
    ggml_free(ctx);
    return best;
}

int main(int argc, char **argv) {
    const char *types = argc > 1 ? argv[1] : "q8_0,q4_K";
    int nth = argc > 2 ? atoi(argv[2]) : 2, reps = argc > 3 ? atoi(argv[3]) : 3;
    double gib = argc > 4 ? atof(argv[4]) : 2.0;
    cpu_mode = argc > 5 && !strcmp(argv[5], "cpu");
    char buf[512];
    snprintf(buf, sizeof buf, "%s", types);
    printf("# ggml (reference fork) mul_mat, %d threads, %.2f GiB per GEMV measurement, best of %d\n", nth, gib, reps);
    printf("%-8s | %8s %8s | %8s %8s | %8s\n", "type", "2048:1T", "2048:NT", "4096:1T", "4096:NT", "GEMM");
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int type = mr_type_from_name(t);
        if (type < 0) { printf("%s: unknown\n", t); continue; }
        double a1 = gemv(type, 4096, 2048, gib, 1, reps), an = gemv(type, 4096, 2048, gib, nth, reps);
        double b1 = gemv(type, 4096, 4096, gib, 1, reps), bn = gemv(type, 4096, 4096, gib, nth, reps);
        double g = gemm(type, nth, reps);
        printf("%-8s | %8.2f %8.2f | %8.2f %8.2f | %8.1f\n", t, a1, an, b1, bn, g);
        fflush(stdout);
    }
    return 0;
}
