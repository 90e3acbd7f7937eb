/* The AVX-512 attention kernel (src/model/attn_avx512.c) against a double-precision evaluation of the
 * same formula (mr_attention in ops.h: q and p rounded to F16 with an F16 cache), over head sizes,
 * GQA ratios, windows, sinks, F16/F32 caches and offsets; and its bit-exactness: one batch == one
 * token at a time == split batches, 1 thread == 2 threads. */
#include "base/pool.h"
#include "model/ops.h"
#include "test.h"

#include <math.h>

#if MR_ARCH_X86

static float frand(uint32_t *s) { *s = *s * 1664525u + 1013904223u; return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f; }

typedef struct { int hd, nh, nkv, nq, pos0, window, sinks, f16; } cfg;

/* |engine - double reference| / (max |v| + tiny), max over all outputs */
static double ref_err(const cfg *c, const float *Q, const void *K, const void *V, const float *sinks, float scale,
                      const float *out) {
    const int hd = c->hd, gq = c->nh / c->nkv, kvs = c->nkv * hd;
    double worst = 0;
    double *sc = malloc(sizeof(double) * (size_t)(c->pos0 + c->nq));
    for (int t = 0; t < c->nq; t++)
        for (int h = 0; h < c->nh; h++) {
            const int g = h / gq, pos = c->pos0 + t;
            const int j0 = c->window && pos - c->window + 1 > 0 ? pos - c->window + 1 : 0;
            double mx = -1e300, z = 0, vmax = 1e-30;
            for (int j = j0; j <= pos; j++) {
                double d = 0;
                for (int i = 0; i < hd; i++) {
                    float q = Q[(size_t)t * c->nh * hd + (size_t)h * hd + i], k;
                    if (c->f16) { q = mr_round_f16(q); k = mr_fp16_to_fp32(((const uint16_t *)K)[(size_t)j * kvs + g * hd + i]); }
                    else k = ((const float *)K)[(size_t)j * kvs + g * hd + i];
                    d += (double)q * k;
                }
                sc[j] = scale * d;
                if (sc[j] > mx) mx = sc[j];
            }
            if (sinks && sinks[h] > mx) mx = sinks[h];
            for (int j = j0; j <= pos; j++) z += exp(sc[j] - mx);
            if (sinks) z += exp(sinks[h] - mx);
            for (int i = 0; i < hd; i++) {
                double o = 0;
                for (int j = j0; j <= pos; j++) {
                    double p = exp(sc[j] - mx) / z;
                    float v = c->f16 ? mr_fp16_to_fp32(((const uint16_t *)V)[(size_t)j * kvs + g * hd + i])
                                     : ((const float *)V)[(size_t)j * kvs + g * hd + i];
                    if (fabs(v) > vmax) vmax = fabs(v);
                    o += p * v;
                }
                double e = fabs(o - out[(size_t)t * c->nh * hd + (size_t)h * hd + i]) / vmax;
                if (e > worst) worst = e;
            }
        }
    free(sc);
    return worst;
}

static void run_cfg(const cfg *c, mr_pool *pool) {
    const int hd = c->hd, nk = c->pos0 + c->nq, kvs = c->nkv * hd, qs = c->nh * hd;
    uint32_t s = (uint32_t)(hd * 131 + c->nh * 17 + c->nq * 7 + c->pos0 + c->window * 3 + c->f16);
    float *Q = malloc(sizeof(float) * (size_t)c->nq * qs), *sinks = malloc(sizeof(float) * (size_t)c->nh);
    float *out = malloc(sizeof(float) * (size_t)c->nq * qs), *out2 = malloc(sizeof(float) * (size_t)c->nq * qs);
    size_t es = c->f16 ? 2 : 4;
    void *K = malloc(es * (size_t)nk * kvs), *V = malloc(es * (size_t)nk * kvs);
    for (int i = 0; i < c->nq * qs; i++) Q[i] = frand(&s) * 2;
    for (int i = 0; i < nk * kvs; i++) {
        float k = frand(&s) * 2, v = frand(&s);
        if (c->f16) { ((uint16_t *)K)[i] = mr_fp32_to_fp16(k); ((uint16_t *)V)[i] = mr_fp32_to_fp16(v); }
        else { ((float *)K)[i] = k; ((float *)V)[i] = v; }
    }
    for (int h = 0; h < c->nh; h++) sinks[h] = frand(&s) * 3;
    const float scale = 1.0f / sqrtf((float)hd) * 1.7f; /* peaky enough to test the softmax */
    mr_attn_args a = {.n_q = c->nq, .pos0 = c->pos0, .n_head = c->nh, .n_head_kv = c->nkv, .head_dim = hd,
                      .scale = scale, .window = c->window, .sinks = c->sinks ? sinks : NULL, .Q = Q, .q_stride = qs,
                      .K = K, .V = V, .kv_f16 = c->f16, .kv_stride = kvs, .out = out, .out_stride = qs};
    char tag[128];
    snprintf(tag, sizeof tag, "hd %d heads %d/%d nq %d pos0 %d window %d sinks %d f16 %d", hd, c->nh, c->nkv, c->nq,
             c->pos0, c->window, c->sinks, c->f16);
    CHECK(mr_attention_avx512(pool, &a) == 0, "%s: failed", tag);
    /* F16: p rounded to F16 (relative 2^-11) against the unrounded double reference */
    double err = ref_err(c, Q, K, V, a.sinks, scale, out), tol = c->f16 ? 2e-3 : 2e-6;
    CHECK(err < tol, "%s: error %g vs the double reference (tolerance %g)", tag, err, tol);
    /* one token at a time, and the batch split in two uneven parts: the same bits */
    for (int split = 0; split < 2; split++) {
        memset(out2, 0xff, sizeof(float) * (size_t)c->nq * qs);
        int t = 0;
        while (t < c->nq) {
            int n = split ? (t == 0 ? (c->nq + 2) / 3 : c->nq - t) : 1;
            mr_attn_args b = a;
            b.n_q = n;
            b.pos0 = c->pos0 + t;
            b.Q = Q + (size_t)t * qs;
            b.out = out2 + (size_t)t * qs;
            CHECK(mr_attention_avx512(split ? NULL : pool, &b) == 0, "%s: piece failed", tag);
            t += n;
        }
        CHECK(!memcmp(out, out2, sizeof(float) * (size_t)c->nq * qs), "%s: %s differs from one batch", tag,
              split ? "two batches (1 thread)" : "one token at a time");
    }
    free(Q); free(sinks); free(out); free(out2); free(K); free(V);
}

static void test_attention_avx512(void) {
    mr_pool *pool = mr_pool_create(2);
    CHECK(pool != NULL, "pool");
    const cfg cs[] = {
        {128, 32, 4, 70, 0, 0, 0, 1},   /* Qwen3-30B-A3B heads, F16 cache */
        {128, 32, 4, 1, 300, 0, 0, 1},  /* decode at depth */
        {64, 4, 2, 45, 0, 0, 0, 1},     /* kjv-moe */
        {64, 4, 4, 33, 17, 0, 0, 0},    /* no GQA, F32 cache, after earlier tokens */
        {64, 8, 1, 40, 5, 7, 1, 1},     /* window + sinks (deepseek4-like) */
        {16, 6, 3, 50, 33, 20, 0, 0},   /* smallest head size, window crossing tiles */
        {256, 4, 2, 19, 3, 0, 1, 1},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) run_cfg(&cs[i], pool);
    mr_pool_free(pool);
}

/* mr_attention uses the AVX-512 kernel when it is available and the head size allows it */
static void test_attention_dispatch(void) {
    enum { HD = 32, NH = 2, NQ = 9 };
    float Q[NQ * NH * HD], K[NQ * HD], V[NQ * HD], o1[NQ * NH * HD], o2[NQ * NH * HD];
    uint32_t s = 11;
    for (int i = 0; i < NQ * NH * HD; i++) Q[i] = frand(&s);
    for (int i = 0; i < NQ * HD; i++) { K[i] = frand(&s); V[i] = frand(&s); }
    mr_attn_args a = {.n_q = NQ, .n_head = NH, .n_head_kv = 1, .head_dim = HD, .scale = 0.2f, .Q = Q,
                      .q_stride = NH * HD, .K = K, .V = V, .kv_stride = HD, .out = o1, .out_stride = NH * HD};
    CHECK(mr_attention(NULL, &a) == 0, "mr_attention");
    a.out = o2;
    CHECK(mr_attention_avx512(NULL, &a) == 0, "avx512");
    CHECK(!memcmp(o1, o2, sizeof o1), "mr_attention did not use the AVX-512 kernel");
}

int main(void) {
    if (mr_isa() < MR_ISA_AVX512) {
        printf("ok attention_avx512_skipped (no AVX-512 here or MOERUN_ISA below avx512)\n");
        return 0;
    }
    RUN(test_attention_avx512);
    RUN(test_attention_dispatch);
    return t_finish();
}
#else
int main(void) {
    (void)t_case_failed;
    (void)t_case_name;
    printf("ok attention_avx512_skipped (not an x86-64 build)\n");
    return 0;
}
#endif
