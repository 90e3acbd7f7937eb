/* AVX2 activation quantizers (float -> the partner types Q8_0, Q8_1, Q8_K, F16, BF16), bit for bit
 * the scalar references of quant_ref.c: the same float operations (x * id, iscale * x, 1 / iscale,
 * fp16 of d), and round-to-nearest-even conversions (cvtps_epi32 under the default MXCSR equals the
 * reference's nearest_int for |v| < 2^22; every value here is within +-127.01). A block holding a
 * NaN or an infinity goes to the scalar reference (whose max-reductions depend on element order
 * there). Used by the matrix kernels; AVX-512 machines use them too. */
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_impl.h"
#include "quant/quant_simd.h"
#include "base/base.h"

#include <immintrin.h>
#include <string.h>

/* fp16 of a finite float: F16C rounds to nearest even like mr_fp32_to_fp16 */
static inline uint16_t qa_f2h(float f) { return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }

/* |x| of 8 floats, and a mask bit set if any lane is NaN or infinite */
static inline __m256 qa_abs(__m256 v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
static inline int qa_nonfinite(__m256 a) {
    return _mm256_movemask_ps(_mm256_cmp_ps(a, _mm256_set1_ps(__builtin_inff()), _CMP_NLT_UQ));
}
static inline float qa_hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
/* 32 int32 (4 vectors, values in -128..127) -> 32 int8 in order */
static inline __m256i qa_pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_packs_epi32(a, b), cd = _mm256_packs_epi32(c, d);
    const __m256i v = _mm256_packs_epi16(ab, cd);
    /* packs work per 128-bit lane: the dwords (4 values each) come out as a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7 */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* 32 values times m, rounded to int8; returns the 32 bytes */
static inline __m256i qa_round32(const float *x, __m256 m) {
    __m256i q[4];
    for (int k = 0; k < 4; k++) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), m));
    return qa_pack32(q[0], q[1], q[2], q[3]);
}

static inline int qa_sum_bytes(__m256i q) {
    /* signed bytes: sum(q + 128) over 32 bytes via SAD, minus 32 * 128 */
    const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
    const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (int)(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128;
}

/* amax of 32 values, or -1 if one of them is not finite */
static inline float qa_amax32(const float *x) {
    __m256 m = _mm256_setzero_ps();
    int bad = 0;
    for (int k = 0; k < 4; k++) {
        const __m256 a = qa_abs(_mm256_loadu_ps(x + 8 * k));
        bad |= qa_nonfinite(a);
        m = _mm256_max_ps(m, a);
    }
    return bad ? -1.0f : qa_hmax(m);
}

void mr_quantize_q8_0_avx2(const float *src, void *dst, int64_t k) {
    mr_block_q8_0 *y = dst;
    for (int64_t i = 0; i < k / 32; i++, src += 32) {
        const float amax = qa_amax32(src);
        if (amax < 0) { mr_quantize_q8_0(src, &y[i], 32); continue; }
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = qa_f2h(d);
        _mm256_storeu_si256((__m256i *)y[i].qs, qa_round32(src, _mm256_set1_ps(id)));
    }
}

void mr_quantize_q8_1_avx2(const float *src, void *dst, int64_t k) {
    mr_block_q8_1 *y = dst;
    for (int64_t i = 0; i < k / 32; i++, src += 32) {
        const float amax = qa_amax32(src);
        if (amax < 0) { mr_quantize_q8_1(src, &y[i], 32); continue; }
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const __m256i q = qa_round32(src, _mm256_set1_ps(id));
        _mm256_storeu_si256((__m256i *)y[i].qs, q);
        y[i].d = qa_f2h(d);
        y[i].s = qa_f2h(d * (float)qa_sum_bytes(q));
    }
}

void mr_quantize_q8_k_avx2(const float *src, void *dst, int64_t k) {
    mr_block_q8_k *y = dst;
    for (int64_t i = 0; i < k / 256; i++, src += 256) {
        __m256 m = _mm256_setzero_ps();
        int bad = 0;
        for (int j = 0; j < 256; j += 8) {
            const __m256 a = qa_abs(_mm256_loadu_ps(src + j));
            bad |= qa_nonfinite(a);
            m = _mm256_max_ps(m, a);
        }
        if (bad) { mr_quantize_q8_k(src, &y[i], 256); continue; }
        const float amax = qa_hmax(m);
        if (amax == 0.0f) { memset(&y[i], 0, sizeof y[i]); continue; }
        /* the reference keeps the first value of largest magnitude (its sign matters) */
        const __m256 am = _mm256_set1_ps(amax);
        int j = 0, hit = 0;
        for (; j < 256; j += 8) {
            hit = _mm256_movemask_ps(_mm256_cmp_ps(qa_abs(_mm256_loadu_ps(src + j)), am, _CMP_EQ_OQ));
            if (hit) break;
        }
        const float max = src[j + __builtin_ctz((unsigned)hit)];
        const float iscale = -127.0f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        for (int b = 0; b < 8; b++) {
            const __m256i q = qa_round32(src + 32 * b, is);
            _mm256_storeu_si256((__m256i *)(y[i].qs + 32 * b), q);
            /* bsums of the two 16-value groups: SAD per 8 bytes, pairs of 64-bit lanes */
            const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)), _mm256_setzero_si256());
            const __m128i lo = _mm256_castsi256_si128(s), hi = _mm256_extracti128_si256(s, 1);
            y[i].bsums[2 * b] = (int16_t)(_mm_cvtsi128_si64(lo) + _mm_extract_epi64(lo, 1) - 16 * 128);
            y[i].bsums[2 * b + 1] = (int16_t)(_mm_cvtsi128_si64(hi) + _mm_extract_epi64(hi, 1) - 16 * 128);
        }
        y[i].d = 1 / iscale;
    }
}

void mr_quantize_f16_avx2(const float *src, void *dst, int64_t k) {
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256 v = _mm256_loadu_ps(src + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) { mr_quantize_f16(src + i, h + i, 8); continue; }
        _mm_storeu_si128((__m128i *)(h + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    if (i < k) mr_quantize_f16(src + i, h + i, k - i);
}

void mr_quantize_bf16_avx2(const float *src, void *dst, int64_t k) {
    uint16_t *h = dst;
    int64_t i = 0;
    for (; i + 16 <= k; i += 16) {
        __m256i r[2];
        for (int t = 0; t < 2; t++) {
            const __m256 v = _mm256_loadu_ps(src + i + 8 * t);
            const __m256i u = _mm256_castps_si256(v);
            /* round to nearest even: (u + 0x7fff + (u >> 16 & 1)) >> 16; NaN: (u >> 16) | 64 */
            const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
            const __m256i rn = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), odd), 16);
            const __m256i qn = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
            r[t] = _mm256_blendv_epi8(rn, qn, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
        }
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(h + i), p);
    }
    if (i < k) mr_quantize_bf16(src + i, h + i, k - i);
}
