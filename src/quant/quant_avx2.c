/* AVX2 (+FMA, F16C) vec_dot kernels, indexed by type; NULL entries fall back to the scalar
 * reference. The integer-quant kernels are the shared template quant_kern_x86.h; the float ones
 * (F32, F16, BF16) are here. Each type also has a 4-column kernel for the matrix kernels that
 * equals four vec_dot calls bit for bit (quant_simd.h). */
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "quant/quant_iq_simd.h"

#define KX_VNNI 0
#include "quant/quant_kern_x86.h"

/* ---- float weights: 16 values per step into two accumulators per column; the tail (n % 16)
 * is zero-padded to a full step so every column runs the same float operations ---- */

KX_INLINE __m256 kf_ld_f32(const void *p, int i) { return _mm256_loadu_ps((const float *)p + i); }
KX_INLINE __m256 kf_ld_f16(const void *p, int i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
KX_INLINE __m256 kf_ld_bf16(const void *p, int i) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

#define KF_KERNEL(T, ES)                                                                           \
    KX_INLINE void kx_##T(int n, float *s, const void *w, const void *vy, size_t by, const int nc) { \
        const uint8_t *y[4];                                                                       \
        __m256 a0[4], a1[4];                                                                       \
        KX_UNROLL for (int c = 0; c < nc; c++) {                                                   \
            y[c] = (const uint8_t *)vy + (size_t)c * by;                                           \
            a0[c] = a1[c] = _mm256_setzero_ps();                                                   \
        }                                                                                          \
        int i = 0;                                                                                 \
        for (; i + 16 <= n; i += 16) {                                                             \
            const __m256 w0 = kf_ld_##T(w, i), w1 = kf_ld_##T(w, i + 8);                           \
            KX_UNROLL for (int c = 0; c < nc; c++) {                                               \
                a0[c] = _mm256_fmadd_ps(w0, kf_ld_##T(y[c], i), a0[c]);                            \
                a1[c] = _mm256_fmadd_ps(w1, kf_ld_##T(y[c], i + 8), a1[c]);                        \
            }                                                                                      \
        }                                                                                          \
        if (i < n) {                                                                               \
            _Alignas(32) uint8_t tw[16 * ES] = {0}, ty[16 * ES];                                   \
            memcpy(tw, (const uint8_t *)w + (size_t)i * ES, (size_t)(n - i) * ES);                 \
            const __m256 w0 = kf_ld_##T(tw, 0), w1 = kf_ld_##T(tw, 8);                             \
            KX_UNROLL for (int c = 0; c < nc; c++) {                                               \
                memset(ty, 0, sizeof ty);                                                          \
                memcpy(ty, y[c] + (size_t)i * ES, (size_t)(n - i) * ES);                           \
                a0[c] = _mm256_fmadd_ps(w0, kf_ld_##T(ty, 0), a0[c]);                              \
                a1[c] = _mm256_fmadd_ps(w1, kf_ld_##T(ty, 8), a1[c]);                              \
            }                                                                                      \
        }                                                                                          \
        KX_UNROLL for (int c = 0; c < nc; c++) s[c] = kx_hsum(_mm256_add_ps(a0[c], a1[c]));      \
    }
KF_KERNEL(f32, 4)
KF_KERNEL(f16, 2)
KF_KERNEL(bf16, 2)

KX_ENTRY(f32, _avx2)
KX_ENTRY(f16, _avx2)
KX_ENTRY(bf16, _avx2)
KX_ENTRY(q8_0, _avx2)
KX_ENTRY(q4_0, _avx2)
KX_ENTRY(q5_0, _avx2)
KX_ENTRY(q4_1, _avx2)
KX_ENTRY(q5_1, _avx2)
KX_ENTRY(q2_k, _avx2)
KX_ENTRY(q3_k, _avx2)
KX_ENTRY(q4_k, _avx2)
KX_ENTRY(q5_k, _avx2)
KX_ENTRY(q6_k, _avx2)
KX_ENTRY(nvfp4, _avx2)

const mr_vec_dot_fn mr_vec_dot_avx2[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = mr_vd_f32_avx2,
    [MR_TYPE_F16] = mr_vd_f16_avx2,
    [MR_TYPE_BF16] = mr_vd_bf16_avx2,
    [MR_TYPE_Q8_0] = mr_vd_q8_0_avx2,
    [MR_TYPE_Q4_0] = mr_vd_q4_0_avx2,
    [MR_TYPE_Q5_0] = mr_vd_q5_0_avx2,
    [MR_TYPE_Q4_1] = mr_vd_q4_1_avx2,
    [MR_TYPE_Q5_1] = mr_vd_q5_1_avx2,
    [MR_TYPE_Q2_K] = mr_vd_q2_k_avx2,
    [MR_TYPE_Q3_K] = mr_vd_q3_k_avx2,
    [MR_TYPE_Q4_K] = mr_vd_q4_k_avx2,
    [MR_TYPE_Q5_K] = mr_vd_q5_k_avx2,
    [MR_TYPE_Q6_K] = mr_vd_q6_k_avx2,
    [MR_TYPE_NVFP4] = mr_vd_nvfp4_avx2,
    [MR_TYPE_IQ2_XXS] = mr_vec_dot_iq2_xxs_avx2,
    [MR_TYPE_IQ3_S] = mr_vec_dot_iq3_s_avx2,
    [MR_TYPE_IQ1_S] = mr_vec_dot_iq1_s_avx2,
    [MR_TYPE_IQ1_M] = mr_vec_dot_iq1_m_avx2,
    [MR_TYPE_IQ4_NL] = mr_vec_dot_iq4_nl_avx2,
    [MR_TYPE_IQ4_XS] = mr_vec_dot_iq4_xs_avx2,
    [MR_TYPE_MXFP4] = mr_vec_dot_mxfp4_avx2,
};

const mr_vec_dot_x4_fn mr_vec_dot_x4_avx2[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = mr_vd4_f32_avx2,
    [MR_TYPE_F16] = mr_vd4_f16_avx2,
    [MR_TYPE_BF16] = mr_vd4_bf16_avx2,
    [MR_TYPE_Q8_0] = mr_vd4_q8_0_avx2,
    [MR_TYPE_Q4_0] = mr_vd4_q4_0_avx2,
    [MR_TYPE_Q5_0] = mr_vd4_q5_0_avx2,
    [MR_TYPE_Q4_1] = mr_vd4_q4_1_avx2,
    [MR_TYPE_Q5_1] = mr_vd4_q5_1_avx2,
    [MR_TYPE_Q2_K] = mr_vd4_q2_k_avx2,
    [MR_TYPE_Q3_K] = mr_vd4_q3_k_avx2,
    [MR_TYPE_Q4_K] = mr_vd4_q4_k_avx2,
    [MR_TYPE_Q5_K] = mr_vd4_q5_k_avx2,
    [MR_TYPE_Q6_K] = mr_vd4_q6_k_avx2,
    [MR_TYPE_NVFP4] = mr_vd4_nvfp4_avx2,
};
