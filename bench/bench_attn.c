/* Attention kernel speed (mr_attention: src/model/ops.c, or attn_kern_x86.h as attn_avx2.c /
 * attn_avx512.c; MOERUN_ISA picks) on model shapes, in the calling thread's CPU time (a shared machine makes wall time useless for short kernels).
 *   build/bench/bench_attn [--nq 512] [--pos0 0] [--heads 32] [--kv 4] [--hd 128] [--f32] [--reps 5]
 * Prints GFLOP/s counting 2 * (QK + PV) multiply-adds over the causal triangle. */
#include "model/ops.h"
#include "base/base.h"
#include "bench_isa.h"

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
    int nq = 512, pos0 = 0, nh = 32, nkv = 4, hd = 128, f32 = 0, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--f32")) { f32 = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "usage: see the header of bench/bench_attn.c\n"); return 1; }
        int v = atoi(argv[++i]);
        if (!strcmp(argv[i - 1], "--nq")) nq = v;
        else if (!strcmp(argv[i - 1], "--pos0")) pos0 = v;
        else if (!strcmp(argv[i - 1], "--heads")) nh = v;
        else if (!strcmp(argv[i - 1], "--kv")) nkv = v;
        else if (!strcmp(argv[i - 1], "--hd")) hd = v;
        else if (!strcmp(argv[i - 1], "--reps")) reps = v;
        else { fprintf(stderr, "unknown option %s\n", argv[i - 1]); return 1; }
    }
    const int nk = pos0 + nq, qs = nh * hd, kvs = nkv * hd;
    float *Q = malloc(sizeof(float) * (size_t)nq * qs), *out = malloc(sizeof(float) * (size_t)nq * qs);
    void *K = malloc((f32 ? 4 : 2) * (size_t)nk * kvs), *V = malloc((f32 ? 4 : 2) * (size_t)nk * kvs);
    unsigned s = 1;
    for (size_t i = 0; i < (size_t)nq * qs; i++) { s = s * 1664525u + 1013904223u; Q[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
    for (size_t i = 0; i < (size_t)nk * kvs; i++) {
        s = s * 1664525u + 1013904223u;
        float v = (float)(s >> 8) / 16777216.0f - 0.5f;
        if (f32) { ((float *)K)[i] = v; ((float *)V)[i] = -v; }
        else { ((uint16_t *)K)[i] = mr_fp32_to_fp16(v); ((uint16_t *)V)[i] = mr_fp32_to_fp16(-v); }
    }
    mr_attn_args a = {.n_q = nq, .pos0 = pos0, .n_head = nh, .n_head_kv = nkv, .head_dim = hd, .scale = 0.088f,
                      .Q = Q, .q_stride = qs, .K = K, .V = V, .kv_f16 = !f32, .kv_stride = kvs, .out = out, .out_stride = qs};
    double macs = 0;
    for (int t = 0; t < nq; t++) macs += 2.0 * (pos0 + t + 1) * hd * nh;
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = cpu_now();
        if (mr_attention(NULL, &a)) { fprintf(stderr, "error: %s\n", mr_get_error()); return 1; }
        double dt = cpu_now() - t0;
        if (dt < best) best = dt;
    }
    printf("attention %s: nq %d pos0 %d heads %d/%d hd %d %s: %.3f ms, %.1f GFLOP/s (1 thread, CPU time)\n",
           mr_isa_name(mr_isa()), nq, pos0, nh, nkv, hd, f32 ? "F32" : "F16", best * 1e3, 2 * macs / best * 1e-9);
    free(Q); free(out); free(K); free(V);
    return 0;
}
