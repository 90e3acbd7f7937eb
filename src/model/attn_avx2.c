/* Causal attention with AVX2 + FMA + F16C (W = 8 lanes): the primitives of attn_kern_x86.h, whose
 * kernel body (tiles of 8 KV positions at absolute multiples of 8; batch == one token at a time) this
 * file instantiates as mr_attention_avx2, for head_dim a multiple of 8. */
#include <immintrin.h>
#include <math.h>

#include "model/ops.h"

/* exp(x) for x <= 0 (no NaN/inf input): the same Cody-Waite reduction and Cephes polynomial as the
 * AVX-512 file, then 2^n built in the exponent field. x is clamped to -87.33 so that n >= -126 (a
 * normal 2^n; p * 2^n may still round to a denormal); below that the result is 0 instead of a value
 * under 1.2e-38 (a probability that small is lost against the row's maximum, whose term is 1). */
static inline __m256 mr_exp256(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.33f);
    const __m256 keep = _mm256_cmp_ps(x, lo, _CMP_GE_OQ);
    x = _mm256_max_ps(x, lo);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500E-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(keep, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

/* v[0..7] -> one vector whose lane j is the sum of the lanes of v[j] */
static inline __m256 mr_hsum8(const __m256 v[8]) {
    __m256 w[4], u[2];
    _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++)  /* per 128-bit lane: (a0+a2, b0+b2, a1+a3, b1+b3) */
        w[k] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * k], v[2 * k + 1]), _mm256_unpackhi_ps(v[2 * k], v[2 * k + 1]));
    _Pragma("GCC unroll 2") for (int k = 0; k < 2; k++)  /* per 128-bit lane: one partial sum for each of 4 inputs */
        u[k] = _mm256_add_ps(_mm256_shuffle_ps(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(w[2 * k], w[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* low halves (inputs 0..3 | 4..7, lanes 0..3 of each input) + high halves (lanes 4..7) */
    return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20), _mm256_permute2f128_ps(u[0], u[1], 0x31));
}

/* lane l of d where lo <= jt + l <= hi, -inf elsewhere */
static inline __m256 mr_clip256(__m256 d, int jt, int lo, int hi) {
    const __m256i jv = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(jt));
    const __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(lo), jv),
                                        _mm256_cmpgt_epi32(jv, _mm256_set1_epi32(hi)));
    return _mm256_blendv_ps(d, _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(out));
}

/* exp(x - m), 0 where x is -inf (x - m is then -inf, clamped and zeroed by mr_exp256 anyway; the
 * mask keeps that independent of the clamp) */
static inline __m256 mr_exp_shift256(__m256 x, __m256 m) {
    const __m256 ok = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    return _mm256_and_ps(ok, mr_exp256(_mm256_sub_ps(x, m)));
}

static inline float mr_reduce_max256(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

static inline float mr_reduce_add256(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

#define AK_W 8
#define AK_PV 8
#define AK_ENTRY mr_attention_avx2
#define ak_v __m256
#define ak_load _mm256_load_ps
#define ak_loadu _mm256_loadu_ps
#define ak_store _mm256_store_ps
#define ak_set1 _mm256_set1_ps
#define ak_zero _mm256_setzero_ps
#define ak_add _mm256_add_ps
#define ak_mul _mm256_mul_ps
#define ak_max _mm256_max_ps
#define ak_fmadd _mm256_fmadd_ps
#define ak_load_f16(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define ak_round_f16(x) _mm256_cvtph_ps(_mm256_cvtps_ph((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))
#define ak_hsum mr_hsum8
#define ak_clip mr_clip256
#define ak_exp_shift mr_exp_shift256
#define ak_reduce_max mr_reduce_max256
#define ak_reduce_add mr_reduce_add256
#include "model/attn_kern_x86.h"
