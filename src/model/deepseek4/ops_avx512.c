/* AVX-512 build of the DeepSeek-V4 multi-head attention over one shared key set (ds4_attn_mqa,
 * ops.h), register-blocked over four heads: the scores and the value sum, around ops.c's softmax
 * (this file calls nothing of ops.c). It uses 8-lane vectors and exactly the float
 * operations of the AVX2 path (ops_avx2.c: a dot product keeps four 8-lane FMA accumulators
 * over steps of 32, then 8, sums them as (a0 + a1) + (a2 + a3) horizontally and adds the scalar
 * tail; a value row is accumulated by one FMA per element and key, in key order), so the results
 * are the AVX2 path's bit for bit. What changes is the loop order: four heads share each key load
 * and keep 16 independent accumulators (the AVX-512 register file holds them), and the value sum
 * runs over blocks of keys that stay in L2, with each head's output slice in registers. */
#include "model/deepseek4/ops.h"
#include "base/base.h"

#include <immintrin.h>
#include <string.h>

static inline float ds4_hsum256_512(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* four heads (rows q, q + D, q + 2D, q + 3D) against one key row: the same operations per head */
static void ds4_dot4h(const float *q, int D, const float *k, float *s) {
    const float *q0 = q, *q1 = q + D, *q2 = q + 2 * D, *q3 = q + 3 * D;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
    __m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a23 = a00;
    __m256 a30 = a00, a31 = a00, a32 = a00, a33 = a00;
    int i = 0;
    for (; i + 32 <= D; i += 32) {
        const __m256 k0 = _mm256_loadu_ps(k + i), k1 = _mm256_loadu_ps(k + i + 8);
        const __m256 k2 = _mm256_loadu_ps(k + i + 16), k3 = _mm256_loadu_ps(k + i + 24);
        a00 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + i), k0, a00);
        a01 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + i + 8), k1, a01);
        a02 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + i + 16), k2, a02);
        a03 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + i + 24), k3, a03);
        a10 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + i), k0, a10);
        a11 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + i + 8), k1, a11);
        a12 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + i + 16), k2, a12);
        a13 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + i + 24), k3, a13);
        a20 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + i), k0, a20);
        a21 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + i + 8), k1, a21);
        a22 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + i + 16), k2, a22);
        a23 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + i + 24), k3, a23);
        a30 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + i), k0, a30);
        a31 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + i + 8), k1, a31);
        a32 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + i + 16), k2, a32);
        a33 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + i + 24), k3, a33);
    }
    for (; i + 8 <= D; i += 8) {
        const __m256 k0 = _mm256_loadu_ps(k + i);
        a00 = _mm256_fmadd_ps(_mm256_loadu_ps(q0 + i), k0, a00);
        a10 = _mm256_fmadd_ps(_mm256_loadu_ps(q1 + i), k0, a10);
        a20 = _mm256_fmadd_ps(_mm256_loadu_ps(q2 + i), k0, a20);
        a30 = _mm256_fmadd_ps(_mm256_loadu_ps(q3 + i), k0, a30);
    }
    float s0 = ds4_hsum256_512(_mm256_add_ps(_mm256_add_ps(a00, a01), _mm256_add_ps(a02, a03)));
    float s1 = ds4_hsum256_512(_mm256_add_ps(_mm256_add_ps(a10, a11), _mm256_add_ps(a12, a13)));
    float s2 = ds4_hsum256_512(_mm256_add_ps(_mm256_add_ps(a20, a21), _mm256_add_ps(a22, a23)));
    float s3 = ds4_hsum256_512(_mm256_add_ps(_mm256_add_ps(a30, a31), _mm256_add_ps(a32, a33)));
    for (; i < D; i++) { s0 += q0[i] * k[i]; s1 += q1[i] * k[i]; s2 += q2[i] * k[i]; s3 += q3[i] * k[i]; }
    s[0] = s0; s[1] = s1; s[2] = s2; s[3] = s3;
}

/* y = x rounded to F16 and back (F16C: round to nearest even, like mr_fp32_to_fp16); y may be x */
static void ds4_round_f16_512(float *y, const float *x, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
    for (; i < n; i++) y[i] = mr_fp16_to_fp32(mr_fp32_to_fp16(x[i]));
}

#define DS4_KEY_BLOCK 64 /* keys per pass of the value sum (64 x D floats stay in L2) */

/* out[h][i0..i0+32) += sum_j p[h][j] k_j[i0..i0+32) for heads h0..h0+nh (nh <= 4), keys [j0, j1),
 * one FMA per element and key in key order (keys with p == 0 skipped, like ds4_attn_mqa) */
static void ds4_vsum32(float *out, int D, const float *s, int nk, int nh, const float *const *kp, int j0, int j1,
                       int i0) {
    __m256 acc[4][4];
    for (int t = 0; t < nh; t++)
        for (int v = 0; v < 4; v++) acc[t][v] = _mm256_loadu_ps(out + (int64_t)t * D + i0 + 8 * v);
    for (int j = j0; j < j1; j++) {
        const float *k = kp[j] + i0;
        const __m256 k0 = _mm256_loadu_ps(k), k1 = _mm256_loadu_ps(k + 8), k2 = _mm256_loadu_ps(k + 16),
                     k3 = _mm256_loadu_ps(k + 24);
        for (int t = 0; t < nh; t++) {
            const float p = s[(int64_t)t * nk + j];
            if (p == 0.0f) continue;
            const __m256 va = _mm256_set1_ps(p);
            acc[t][0] = _mm256_fmadd_ps(va, k0, acc[t][0]);
            acc[t][1] = _mm256_fmadd_ps(va, k1, acc[t][1]);
            acc[t][2] = _mm256_fmadd_ps(va, k2, acc[t][2]);
            acc[t][3] = _mm256_fmadd_ps(va, k3, acc[t][3]);
        }
    }
    for (int t = 0; t < nh; t++)
        for (int v = 0; v < 4; v++) _mm256_storeu_ps(out + (int64_t)t * D + i0 + 8 * v, acc[t][v]);
}

/* the same for 8 elements, and for the scalar tail (y += a * x: multiply, then add, as the AVX2 axpy) */
static void ds4_vsum8(float *out, int D, const float *s, int nk, int nh, const float *const *kp, int j0, int j1, int i0) {
    __m256 acc[4];
    for (int t = 0; t < nh; t++) acc[t] = _mm256_loadu_ps(out + (int64_t)t * D + i0);
    for (int j = j0; j < j1; j++) {
        const __m256 k0 = _mm256_loadu_ps(kp[j] + i0);
        for (int t = 0; t < nh; t++) {
            const float p = s[(int64_t)t * nk + j];
            if (p != 0.0f) acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(p), k0, acc[t]);
        }
    }
    for (int t = 0; t < nh; t++) _mm256_storeu_ps(out + (int64_t)t * D + i0, acc[t]);
}

/* the key row pointers in the scratch: after s [H][nk], qr [H][D] and the converted rows kc [nk][D],
 * 8-byte aligned (ds4_attn_scratch counts the room) */
static const float **ds4_key_ptrs(float *scratch, int H, int nk, int D) {
    uintptr_t pa = (uintptr_t)(scratch + (int64_t)H * nk + (int64_t)H * D + (int64_t)nk * D);
    pa = (pa + 7) & ~(uintptr_t)7;
    return (const float **)pa;
}

void ds4_attn_scores_avx512(const float *q, int H, const float *const *kf, const uint16_t *const *kh, int nk, int D,
                            float kq_scale, int f16, float *scratch) {
    float *s = scratch, *qr = s + (int64_t)H * nk, *kc = qr + (int64_t)H * D;
    const float **kp = ds4_key_ptrs(scratch, H, nk, D);
    for (int j = 0; j < nk; j++) {
        if (kf[j]) { kp[j] = kf[j]; continue; }
        float *dst = kc + (int64_t)j * D;
        int i = 0;
        for (; i + 8 <= D; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(kh[j] + i))));
        for (; i < D; i++) dst[i] = _cvtsh_ss(kh[j][i]);
        kp[j] = dst;
    }
    const float *qq = q;
    if (f16) { ds4_round_f16_512(qr, q, (int64_t)H * D); qq = qr; }
    /* scores s[h*nk + j] */
    int h0 = 0;
    for (; h0 + 4 <= H; h0 += 4)
        for (int j = 0; j < nk; j++) {
            float r[4];
            ds4_dot4h(qq + (int64_t)h0 * D, D, kp[j], r);
            for (int t = 0; t < 4; t++) s[(int64_t)(h0 + t) * nk + j] = r[t] * kq_scale;
        }
    for (; h0 < H; h0++)
        for (int j = 0; j < nk; j++) s[(int64_t)h0 * nk + j] = ds4_dot_f32_avx2(qq + (int64_t)h0 * D, kp[j], D) * kq_scale;
}

void ds4_attn_values_avx512(float *out, int H, int nk, int D, int f16, float *scratch) {
    float *s = scratch;
    const float *const *kp = ds4_key_ptrs(scratch, H, nk, D);
    if (f16) ds4_round_f16_512(s, s, (int64_t)H * nk);
    memset(out, 0, sizeof(float) * (size_t)H * (size_t)D);
    const int d8 = D - D % 8;
    for (int j0 = 0; j0 < nk; j0 += DS4_KEY_BLOCK) {
        const int j1 = j0 + DS4_KEY_BLOCK < nk ? j0 + DS4_KEY_BLOCK : nk;
        for (int hb = 0; hb < H; hb += 4) {
            const int nh = H - hb < 4 ? H - hb : 4;
            float *ob = out + (int64_t)hb * D;
            const float *sb = s + (int64_t)hb * nk;
            int i0 = 0;
            for (; i0 + 32 <= d8; i0 += 32) ds4_vsum32(ob, D, sb, nk, nh, kp, j0, j1, i0);
            for (; i0 + 8 <= d8; i0 += 8) ds4_vsum8(ob, D, sb, nk, nh, kp, j0, j1, i0);
            for (; i0 < D; i0++)
                for (int j = j0; j < j1; j++)
                    for (int t = 0; t < nh; t++) {
                        const float p = sb[(int64_t)t * nk + j];
                        if (p != 0.0f) ob[(int64_t)t * D + i0] += p * kp[j][i0];
                    }
        }
    }
}
