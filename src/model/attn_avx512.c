/* Causal attention (mr_attention semantics, see ops.h) with AVX-512, for head_dim a multiple of 16.
 *
 * Work unit: one KV head g and a block of consecutive query tokens; its rows are (token, head) for the
 * n_head / n_head_kv query heads that share g, so every K and V row converted from F16 is reused by
 * all of them. KV positions go in tiles of 16 at absolute multiples of 16:
 *   pass 1: per tile, the 16 K rows are converted to float once; for each row whose range
 *           [j_min, pos] meets the tile: 16 dot products (one 16-lane accumulator per position over
 *           head_dim, then a transposing tree reduction to one vector of 16 scores), times scale;
 *           lanes outside the range are masked.
 *   softmax per row: max, exp (vector exp below), sum, p = e * (1/sum), p rounded to F16 for an F16
 *           cache (ggml rounds the probabilities to V's partner type).
 *   pass 2: per tile, the 16 V rows are converted once; out_row += p_j * v_j for j ascending.
 * Each row's arithmetic depends only on its own position range and the absolute tile grid, never on
 * which other rows share its block or on the thread, so a batch gives the same bits as one token at
 * a time. Float summation order differs from the scalar kernel (ops.c) by design (both are within an
 * ulp-level distance of ggml's F16 dot products, which use yet another order). */
#include "model/ops.h"

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* the small fixed-count loops over vectors must be unrolled so the vectors stay in registers */
#define MR_UNROLL _Pragma("GCC unroll 16")

/* exp(x) for x <= 0 (including large negative; no NaN/inf input): Cody-Waite reduction by ln 2 and
 * the Cephes expf polynomial (constants from Cephes' expf.c), then scaling by 2^n with scalef, which
 * flushes to 0 below the float range. About 1 ulp. */
static inline __m512 mr_exp512(__m512 x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-103.97f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* v[0..15] -> one vector whose lane j is the sum of the lanes of v[j] */
static inline __m512 mr_hsum16(__m512 v[16]) {
    __m512 w[8], u[4], z[2];
    MR_UNROLL for (int k = 0; k < 8; k++)  /* per 128-bit lane: (a0+a2, b0+b2, a1+a3, b1+b3) */
        w[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
    MR_UNROLL for (int k = 0; k < 4; k++)  /* per 128-bit lane: one partial sum for each of 4 inputs */
        u[k] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    MR_UNROLL for (int k = 0; k < 2; k++)  /* lanes (0+1, 2+3) of u[2k] then of u[2k+1] */
        z[k] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

typedef struct {
    const mr_attn_args *a;
    int gq;             /* query heads per KV head */
    int tb;             /* query tokens per block */
    int nblk;
    atomic_int failed;
} mr_attn512_job;

/* 16 K or V rows of KV head g starting at absolute position jt, as floats (rows > jhi zeroed) */
static void mr_load_tile(const mr_attn_args *a, const void *base, int g, int jt, int jhi, float *dst) {
    const int hd = a->head_dim;
    for (int jj = 0; jj < 16; jj++) {
        float *d = dst + (size_t)jj * hd;
        const int j = jt + jj;
        if (j > jhi || j < 0) { memset(d, 0, sizeof(float) * (size_t)hd); continue; }
        const int64_t off = (int64_t)j * a->kv_stride + (int64_t)g * hd;
        if (a->kv_f16) {
            const uint16_t *s = (const uint16_t *)base + off;
            for (int i = 0; i < hd; i += 16)
                _mm512_store_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
        } else {
            memcpy(d, (const float *)base + off, sizeof(float) * (size_t)hd);
        }
    }
}

static inline int mr_row_lo(const mr_attn_args *a, int pos) {
    return a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
}

static void mr_attn512_chunk(void *arg, long c) {
    mr_attn512_job *J = arg;
    const mr_attn_args *a = J->a;
    const int hd = a->head_dim, nv = hd / 16, gq = J->gq;
    const int g = (int)(c % a->n_head_kv);
    const int blk = J->nblk - 1 - (int)(c / a->n_head_kv); /* longest (latest) blocks first */
    const int t0 = blk * J->tb, t1 = t0 + J->tb < a->n_q ? t0 + J->tb : a->n_q;
    const int R = (t1 - t0) * gq;
    const int jlo = mr_row_lo(a, a->pos0 + t0), jhi = a->pos0 + t1 - 1;
    const int tile0 = jlo & ~15, ntile = (jhi - tile0) / 16 + 1, W = ntile * 16;
    size_t nq = (size_t)R * hd, nsc = (size_t)R * W, nkv = 16 * (size_t)hd;
    float *buf = mr_aligned_alloc(64, sizeof(float) * (nq + nsc + nkv + nq));
    if (!buf) { atomic_store(&J->failed, 1); return; }
    float *q = buf, *sc = q + nq, *kv = sc + nsc, *acc = kv + nkv;

    /* query rows (row r = (t - t0) * gq + hh), rounded to F16 for an F16 cache */
    for (int t = t0; t < t1; t++)
        for (int hh = 0; hh < gq; hh++) {
            const float *src = a->Q + (int64_t)t * a->q_stride + (int64_t)(g * gq + hh) * hd;
            float *d = q + (size_t)((t - t0) * gq + hh) * hd;
            for (int i = 0; i < hd; i += 16) {
                __m512 x = _mm512_loadu_ps(src + i);
                if (a->kv_f16) x = _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
                _mm512_store_ps(d + i, x);
            }
        }

    /* pass 1: scores */
    const __m512 vscale = _mm512_set1_ps(a->scale), ninf = _mm512_set1_ps(-INFINITY);
    const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    for (int k = 0; k < ntile; k++) {
        const int jt = tile0 + 16 * k;
        mr_load_tile(a, a->K, g, jt, jhi, kv);
        for (int r = 0; r < R; r++) {
            const int pos = a->pos0 + t0 + r / gq, rlo = mr_row_lo(a, pos);
            if (jt > pos || jt + 15 < rlo) continue;
            const float *qr = q + (size_t)r * hd;
            __m512 s[16];
            MR_UNROLL for (int jj = 0; jj < 16; jj++) s[jj] = _mm512_setzero_ps();
            for (int i = 0; i < nv; i++) {
                const __m512 qi = _mm512_load_ps(qr + 16 * i);
                MR_UNROLL for (int jj = 0; jj < 16; jj++) s[jj] = _mm512_fmadd_ps(qi, _mm512_load_ps(kv + (size_t)jj * hd + 16 * i), s[jj]);
            }
            __m512 d = _mm512_mul_ps(mr_hsum16(s), vscale);
            const __m512i jv = _mm512_add_epi32(lane, _mm512_set1_epi32(jt));
            const __mmask16 ok = _mm512_cmple_epi32_mask(_mm512_set1_epi32(rlo), jv) & _mm512_cmple_epi32_mask(jv, _mm512_set1_epi32(pos));
            _mm512_store_ps(sc + (size_t)r * W + 16 * k, _mm512_mask_blend_ps(ok, ninf, d));
        }
    }

    /* softmax per row over its tiles */
    for (int r = 0; r < R; r++) {
        const int pos = a->pos0 + t0 + r / gq, h = g * gq + r % gq, rlo = mr_row_lo(a, pos);
        const int k0 = (rlo - tile0) / 16, k1 = (pos - tile0) / 16;
        float *sr = sc + (size_t)r * W;
        __m512 vm = ninf;
        for (int k = k0; k <= k1; k++) vm = _mm512_max_ps(vm, _mm512_load_ps(sr + 16 * k));
        float mx = _mm512_reduce_max_ps(vm);
        if (a->sinks && a->sinks[h] > mx) mx = a->sinks[h];
        const __m512 vmx = _mm512_set1_ps(mx);
        __m512 vs = _mm512_setzero_ps();
        for (int k = k0; k <= k1; k++) {
            const __m512 x = _mm512_load_ps(sr + 16 * k);
            const __mmask16 ok = _mm512_cmp_ps_mask(x, ninf, _CMP_NEQ_OQ);
            const __m512 e = _mm512_maskz_mov_ps(ok, mr_exp512(_mm512_sub_ps(x, vmx)));
            vs = _mm512_add_ps(vs, e);
            _mm512_store_ps(sr + 16 * k, e);
        }
        double sum = _mm512_reduce_add_ps(vs);
        if (a->sinks) sum += (double)expf(a->sinks[h] - mx);
        const __m512 inv = _mm512_set1_ps((float)(1.0 / sum));
        for (int k = k0; k <= k1; k++) {
            __m512 p = _mm512_mul_ps(_mm512_load_ps(sr + 16 * k), inv);
            if (a->kv_f16) p = _mm512_cvtph_ps(_mm512_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            _mm512_store_ps(sr + 16 * k, p);
        }
    }

    /* pass 2: out = sum_j p_j v_j */
    memset(acc, 0, sizeof(float) * nq);
    for (int k = 0; k < ntile; k++) {
        const int jt = tile0 + 16 * k;
        mr_load_tile(a, a->V, g, jt, jhi, kv);
        for (int r = 0; r < R; r++) {
            const int pos = a->pos0 + t0 + r / gq, rlo = mr_row_lo(a, pos);
            if (jt > pos || jt + 15 < rlo) continue;
            const int ja = rlo > jt ? rlo - jt : 0, jb = pos < jt + 15 ? pos - jt : 15;
            const float *pr = sc + (size_t)r * W + 16 * k;
            float *ar = acc + (size_t)r * hd;
            int i = 0;
            for (; i + 4 <= nv; i += 4) { /* four vectors of the output row in registers */
                __m512 o[4];
                MR_UNROLL for (int u = 0; u < 4; u++) o[u] = _mm512_load_ps(ar + 16 * (i + u));
                for (int jj = ja; jj <= jb; jj++) {
                    const __m512 p = _mm512_set1_ps(pr[jj]);
                    const float *vr = kv + (size_t)jj * hd + 16 * i;
                    MR_UNROLL for (int u = 0; u < 4; u++) o[u] = _mm512_fmadd_ps(p, _mm512_load_ps(vr + 16 * u), o[u]);
                }
                MR_UNROLL for (int u = 0; u < 4; u++) _mm512_store_ps(ar + 16 * (i + u), o[u]);
            }
            for (; i < nv; i++) {
                __m512 o = _mm512_load_ps(ar + 16 * i);
                for (int jj = ja; jj <= jb; jj++) o = _mm512_fmadd_ps(_mm512_set1_ps(pr[jj]), _mm512_load_ps(kv + (size_t)jj * hd + 16 * i), o);
                _mm512_store_ps(ar + 16 * i, o);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        const int t = t0 + r / gq, h = g * gq + r % gq;
        memcpy(a->out + (int64_t)t * a->out_stride + (int64_t)h * hd, acc + (size_t)r * hd, sizeof(float) * (size_t)hd);
    }
    mr_aligned_free(buf);
}

int mr_attention_avx512(mr_pool *pool, const mr_attn_args *a) {
    const int gq = a->n_head / a->n_head_kv, nth = pool ? mr_pool_size(pool) : 1;
    /* about 32 rows per block (K/V tiles converted once for all of them), but enough blocks to keep
     * every thread busy */
    int tb = (32 + gq - 1) / gq;
    if (tb > a->n_q) tb = a->n_q;
    while (tb > 1 && (long)a->n_head_kv * ((a->n_q + tb - 1) / tb) < 4L * nth) tb = (tb + 1) / 2;
    mr_attn512_job J = {.a = a, .gq = gq, .tb = tb, .nblk = (a->n_q + tb - 1) / tb};
    atomic_init(&J.failed, 0);
    mr_pool_run_chunks(pool, mr_attn512_chunk, &J, (long)J.nblk * a->n_head_kv);
    if (atomic_load(&J.failed)) { mr_set_error("attention: out of memory"); return -1; }
    return 0;
}
