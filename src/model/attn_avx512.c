/* Causal attention with AVX-512 (W = 16 lanes): the primitives of attn_kern_x86.h, whose kernel body
 * (tiles of 16 KV positions at absolute multiples of 16; batch == one token at a time) this file
 * instantiates as mr_attention_avx512, for head_dim a multiple of 16. */
#include <immintrin.h>
#include <math.h>

#include "model/ops.h"

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
static inline __m512 mr_hsum16(const __m512 v[16]) {
    __m512 w[8], u[4], z[2];
    _Pragma("GCC unroll 8") for (int k = 0; k < 8; k++)  /* per 128-bit lane: (a0+a2, b0+b2, a1+a3, b1+b3) */
        w[k] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]));
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)  /* per 128-bit lane: one partial sum for each of 4 inputs */
        u[k] = _mm512_add_ps(_mm512_shuffle_ps(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    _Pragma("GCC unroll 2") for (int k = 0; k < 2; k++)  /* lanes (0+1, 2+3) of u[2k] then of u[2k+1] */
        z[k] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

/* lane l of d where lo <= jt + l <= hi, -inf elsewhere */
static inline __m512 mr_clip512(__m512 d, int jt, int lo, int hi) {
    const __m512i jv = _mm512_add_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                        _mm512_set1_epi32(jt));
    const __mmask16 ok = _mm512_cmple_epi32_mask(_mm512_set1_epi32(lo), jv) & _mm512_cmple_epi32_mask(jv, _mm512_set1_epi32(hi));
    return _mm512_mask_blend_ps(ok, _mm512_set1_ps(-INFINITY), d);
}

/* exp(x - m), 0 where x is -inf */
static inline __m512 mr_exp_shift512(__m512 x, __m512 m) {
    const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    return _mm512_maskz_mov_ps(ok, mr_exp512(_mm512_sub_ps(x, m)));
}

#define AK_W 16
#define AK_PV 4
#define AK_ENTRY mr_attention_avx512
#define ak_v __m512
#define ak_load _mm512_load_ps
#define ak_loadu _mm512_loadu_ps
#define ak_store _mm512_store_ps
#define ak_set1 _mm512_set1_ps
#define ak_zero _mm512_setzero_ps
#define ak_add _mm512_add_ps
#define ak_mul _mm512_mul_ps
#define ak_max _mm512_max_ps
#define ak_fmadd _mm512_fmadd_ps
#define ak_load_f16(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define ak_round_f16(x) _mm512_cvtph_ps(_mm512_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define ak_hsum mr_hsum16
#define ak_clip mr_clip512
#define ak_exp_shift mr_exp_shift512
#define ak_reduce_max _mm512_reduce_max_ps
#define ak_reduce_add _mm512_reduce_add_ps
#include "model/attn_kern_x86.h"
