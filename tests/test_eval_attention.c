/* Every attention kernel mr_attention can use (the scalar loop of ops.c, and on x86-64 the AVX2 and
 * AVX-512 instances of attn_kern_x86.h), on every ISA this CPU and build have, against a
 * double-precision evaluation of the same formula (mr_attention in ops.h: q and p rounded to F16 with
 * an F16 cache) and against the scalar kernel, over head sizes, GQA ratios, windows, sinks, F16/F32
 * caches and offsets; and their bit-exactness: one batch == one token at a time == split batches,
 * 1 thread == 2 threads. Then mr_attention's choice of kernel per ISA and head size. */
#include "base/pool.h"
#include "model/ops.h"
#include "test.h"

#include <math.h>

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

typedef int (*attn_fn)(mr_pool *pool, const mr_attn_args *a);

/* the scalar loop of ops.c: mr_attention with the ISA forced to scalar (the dispatch reads the ISA
 * once, before any worker starts) */
static int attn_scalar(mr_pool *pool, const mr_attn_args *a) {
    const int isa = mr_isa();
    mr_set_isa(MR_ISA_SCALAR);
    const int rc = mr_attention(pool, a);
    mr_set_isa(isa);
    return rc;
}

typedef struct { int isa, width; attn_fn fn; } kernel;
static const kernel kernels[] = {
    {MR_ISA_SCALAR, 1, attn_scalar},
#if MR_ARCH_X86
    {MR_ISA_AVX2, 8, mr_attention_avx2},
    {MR_ISA_AVX512, 16, mr_attention_avx512},
#endif
};

static void run_cfg(const cfg *c, const kernel *kn, mr_pool *pool) {
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
    char tag[160];
    snprintf(tag, sizeof tag, "%s: hd %d heads %d/%d nq %d pos0 %d window %d sinks %d f16 %d", mr_isa_name(kn->isa), hd, c->nh, c->nkv,
             c->nq, c->pos0, c->window, c->sinks, c->f16);
    CHECK(kn->fn(pool, &a) == 0, "%s: failed", tag);
    /* F16: p rounded to F16 (relative 2^-11) against the unrounded double reference */
    double err = ref_err(c, Q, K, V, a.sinks, scale, out), tol = c->f16 ? 2e-3 : 2e-6;
    CHECK(err < tol, "%s: error %g vs the double reference (tolerance %g)", tag, err, tol);
    /* against the scalar kernel: the same F16 roundings of q and p, only the float summation order
     * differs (a p on an F16 rounding boundary may round the other way: 2^-11 relative) */
    if (kn->isa != MR_ISA_SCALAR) {
        mr_attn_args b = a;
        b.out = out2;
        CHECK(attn_scalar(pool, &b) == 0, "%s: scalar failed", tag);
        double worst = 0, vmax = 1e-30;
        for (int i = 0; i < c->nq * qs; i++) {
            if (fabs(out2[i]) > vmax) vmax = fabs(out2[i]);
            if (fabs(out[i] - out2[i]) > worst) worst = fabs(out[i] - out2[i]);
        }
        CHECK(worst / vmax < tol, "%s: error %g vs the scalar kernel (tolerance %g)", tag, worst / vmax, tol);
    }
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
            CHECK(kn->fn(split ? NULL : pool, &b) == 0, "%s: piece failed", tag);
            t += n;
        }
        CHECK(!memcmp(out, out2, sizeof(float) * (size_t)c->nq * qs), "%s: %s differs from one batch", tag,
              split ? "two batches (1 thread)" : "one token at a time");
    }
    free(Q); free(sinks); free(out); free(out2); free(K); free(V);
}

static void test_attention_kernels(void) {
    mr_pool *pool = mr_pool_create(2);
    CHECK(pool != NULL, "pool");
    const cfg cs[] = {
        {128, 32, 4, 70, 0, 0, 0, 1},   /* Qwen3-30B-A3B heads, F16 cache */
        {128, 32, 4, 1, 300, 0, 0, 1},  /* decode at depth */
        {64, 4, 2, 45, 0, 0, 0, 1},     /* kjv-moe */
        {64, 4, 4, 33, 17, 0, 0, 0},    /* no GQA, F32 cache, after earlier tokens */
        {64, 8, 1, 40, 5, 7, 1, 1},     /* window + sinks (deepseek4-like) */
        {16, 6, 3, 50, 33, 20, 0, 0},   /* window crossing tiles */
        {256, 4, 2, 19, 3, 0, 1, 1},
        {8, 4, 2, 37, 2, 5, 1, 1},      /* smallest AVX2 head size, window shorter than a tile */
        {24, 3, 1, 29, 11, 0, 0, 1},    /* AVX2 only: not a multiple of 16 */
        {40, 2, 2, 21, 0, 9, 1, 0},
    };
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        if (!mr_isa_available(kernels[k].isa)) {
            printf("# %s kernel not tested: not available on this CPU or build\n", mr_isa_name(kernels[k].isa));
            continue;
        }
        int n = 0;
        for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
            if (cs[i].hd % kernels[k].width == 0) { run_cfg(&cs[i], &kernels[k], pool); n++; }
        printf("# %s kernel: %d shapes\n", mr_isa_name(kernels[k].isa), n);
    }
    mr_pool_free(pool);
}

/* mr_attention under each available ISA: that ISA's kernel where the head size allows it, else the
 * scalar loop (under AVX-512, head sizes of 8 * odd stay scalar rather than taking the AVX2 kernel) */
static void test_attention_dispatch(void) {
    enum { NH = 2, NQ = 9, HDMAX = 32 };
    float Q[NQ * NH * HDMAX], K[NQ * HDMAX], V[NQ * HDMAX], o1[NQ * NH * HDMAX], o2[NQ * NH * HDMAX];
    uint32_t s = 11;
    for (int i = 0; i < NQ * NH * HDMAX; i++) Q[i] = frand(&s);
    for (int i = 0; i < NQ * HDMAX; i++) { K[i] = frand(&s); V[i] = frand(&s); }
    const int best = mr_isa();
    for (size_t k = 0; k < sizeof kernels / sizeof kernels[0]; k++) {
        const int isa = kernels[k].isa;
        if (!mr_isa_available(isa)) continue;
        for (int hd = 8; hd <= HDMAX; hd += 8) {
            mr_attn_args a = {.n_q = NQ, .n_head = NH, .n_head_kv = 1, .head_dim = hd, .scale = 0.2f, .Q = Q,
                              .q_stride = NH * hd, .K = K, .V = V, .kv_stride = hd, .out = o1, .out_stride = NH * hd};
            /* the kernel this ISA should use for hd */
            const kernel *want = &kernels[0];
            if (hd % kernels[k].width == 0) want = &kernels[k];
            CHECK(mr_set_isa(isa) == 0, "mr_set_isa(%s)", mr_isa_name(isa));
            CHECK(mr_attention(NULL, &a) == 0, "mr_attention");
            a.out = o2;
            CHECK(want->fn(NULL, &a) == 0, "kernel");
            CHECK(!memcmp(o1, o2, sizeof(float) * NQ * NH * hd), "%s, head_dim %d: mr_attention did not use the %s kernel",
                  mr_isa_name(isa), hd, mr_isa_name(want->isa));
        }
    }
    mr_set_isa(best);
}

int main(void) {
    RUN(test_attention_kernels);
    RUN(test_attention_dispatch);
    return t_finish();
}
