/* The llama.cpp side of bench/vs_llama.sh: ggml's CPU MUL_MAT timed exactly as bench_mm times
 * mr_matmul, with a settable thread count (test-backend-ops always uses every CPU, and on a loaded
 * machine its spinning barriers dominate). Not part of the moerun build: vs_llama.sh compiles it
 * against a llama.cpp build tree (public ggml API only: ggml.h, ggml-backend.h, ggml-cpu.h).
 *
 * Per type / shape / column count: a graph of K copies of one MUL_MAT node (as test-backend-ops
 * perf builds it) on the CPU backend; weights quantized by ggml_quantize_chunk from uniform
 * [-1, 1) floats (dummy all-ones importance matrix, as test-backend-ops), 512 rows quantized and
 * repeated (blocks are independent; the matrix stays in cache either way). Windows of >= 20 ms
 * (one thread: of its CPU time, as bench_mm) until --min-time; prints the best and the median
 * window's microseconds per node.
 *
 * Output lines: "ggml TYPE ROWS COLS N US_BEST US_MEDIAN" (same arguments as bench_mm). */
#include "ggml.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
/* one thread (ggml computes on the calling thread): its CPU time; several: wall time */
static double bm_clock(int cpu) {
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int type_from_name(const char *s) {
    for (int t = 0; t < GGML_TYPE_COUNT; t++) {
        const char *n = ggml_type_name((enum ggml_type)t);
        if (n && !strcasecmp(n, s)) return t;
    }
    return -1;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    const char *types_s = "f16,bf16,q8_0,q4_0,q4_1,q2_K,q4_K,q5_K,q6_K,iq2_xxs,iq3_s,iq4_nl,iq4_xs,mxfp4,nvfp4,iq1_s,iq1_m";
    const char *shapes_s = "4096x2048,4096x4096", *ncols_s = "1,512";
    int nthreads = 2;
    double min_time = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--types")) types_s = argv[i + 1];
        else if (!strcmp(argv[i], "--shapes")) shapes_s = argv[i + 1];
        else if (!strcmp(argv[i], "--ncols")) ncols_s = argv[i + 1];
        else if (!strcmp(argv[i], "--threads")) nthreads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--min-time")) min_time = atof(argv[i + 1]);
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 1; }
    }
    long long shapes[8][2], ncols[8];
    int nshapes = 0, nn = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", shapes_s);
    for (char *t = strtok(buf, ","); t && nshapes < 8; t = strtok(NULL, ","))
        if (sscanf(t, "%lldx%lld", &shapes[nshapes][0], &shapes[nshapes][1]) == 2) nshapes++;
    snprintf(buf, sizeof buf, "%s", ncols_s);
    for (char *t = strtok(buf, ","); t && nn < 8; t = strtok(NULL, ",")) ncols[nn++] = atoll(t);

    ggml_cpu_init();
    ggml_backend_t be = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(be, nthreads);
    printf("# ggml_mm: %d threads, windows of >= 20 ms (%s time) over >= %.1f s per case\n", nthreads, nthreads == 1 ? "CPU" : "wall", min_time);

    char tbuf[1024];
    snprintf(tbuf, sizeof tbuf, "%s", types_s);
    char *save = NULL;
    for (char *tn = strtok_r(tbuf, ",", &save); tn; tn = strtok_r(NULL, ",", &save)) {
        const int type = type_from_name(tn);
        if (type < 0) { fprintf(stderr, "unknown type %s\n", tn); return 1; }
        long long maxc = 0;
        for (int s = 0; s < nshapes; s++) if (shapes[s][1] > maxc) maxc = shapes[s][1];
        /* 512 rows of maxc values quantized once, repeated to fill the largest matrix */
        const long long qrows = 512;
        float *src = malloc(sizeof(float) * qrows * maxc), *im = malloc(sizeof(float) * maxc);
        const size_t qbytes = ggml_row_size((enum ggml_type)type, maxc) * qrows;
        unsigned char *q = malloc(qbytes);
        unsigned s32 = 12345;
        for (long long i = 0; i < qrows * maxc; i++) {
            s32 = s32 * 1664525u + 1013904223u;
            src[i] = (float)(s32 >> 8) / 8388608.0f - 1.0f;
        }
        for (long long i = 0; i < maxc; i++) im[i] = 1.0f;
        ggml_quantize_chunk((enum ggml_type)type, src, q, 0, qrows, maxc, im);
        for (int s = 0; s < nshapes; s++)
            for (int k = 0; k < nn; k++) {
                const long long rows = shapes[s][0], cols = shapes[s][1], n = ncols[k];
                const int nodes = n == 1 ? 16 : 1;
                struct ggml_init_params ip = {ggml_tensor_overhead() * 16 + ggml_graph_overhead_custom(256, false), NULL, true};
                struct ggml_context *ctx = ggml_init(ip);
                struct ggml_tensor *a = ggml_new_tensor_2d(ctx, (enum ggml_type)type, cols, rows);
                struct ggml_tensor *b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, cols, n);
                struct ggml_tensor *out = ggml_mul_mat(ctx, a, b);
                struct ggml_cgraph *gf = ggml_new_graph_custom(ctx, 256, false);
                ggml_build_forward_expand(gf, out);
                for (int i = 1; i < nodes; i++) ggml_graph_add_node(gf, out);
                ggml_backend_buffer_t bb = ggml_backend_alloc_ctx_tensors(ctx, be);
                const size_t abytes = ggml_nbytes(a);
                for (size_t off = 0; off < abytes; off += qbytes)
                    ggml_backend_tensor_set(a, q, off, abytes - off < qbytes ? abytes - off : qbytes);
                float *xb = malloc(sizeof(float) * cols * n);
                for (long long i = 0; i < cols * n; i++) {
                    s32 = s32 * 1664525u + 1013904223u;
                    xb[i] = (float)(s32 >> 8) / 8388608.0f - 1.0f;
                }
                ggml_backend_tensor_set(b, xb, 0, sizeof(float) * cols * n);
                ggml_backend_graph_compute(be, gf);
                double win[4096];
                int nw = 0;
                const double t0 = now();
                while ((now() - t0 < min_time || nw < 3) && nw < 4096) {
                    long runs = 0;
                    const double w0 = bm_clock(nthreads == 1);
                    double t;
                    do {
                        ggml_backend_graph_compute(be, gf);
                        runs += nodes;
                        t = bm_clock(nthreads == 1) - w0;
                    } while (t < 0.02);
                    win[nw++] = t / runs;
                }
                qsort(win, nw, sizeof win[0], cmp_d);
                printf("ggml %s %lld %lld %lld %.2f %.2f\n", ggml_type_name((enum ggml_type)type), rows, cols, n,
                       win[0] * 1e6, win[nw / 2] * 1e6);
                fflush(stdout);
                free(xb);
                ggml_backend_buffer_free(bb);
                ggml_free(ctx);
            }
        free(src);
        free(im);
        free(q);
    }
    ggml_backend_free(be);
    return 0;
}
