/* AVX-512 (F, BW, VL, DQ, VNNI, BF16) vec_dot kernels, indexed by type; NULL entries fall back to
 * the AVX2 kernel, then the scalar reference. The integer-quant kernels are the shared template
 * quant_kern_x86.h built with vpdpbusd / vpdpwssd; F32 and BF16 (vdpbf16ps) use 512-bit vectors
 * here, F16 the template's 256-bit kernel. Each type also has a 4-column kernel for the matrix kernels that equals
 * four vec_dot calls bit for bit (quant_simd.h). */
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "quant/quant_iq_simd.h"

#define KX_VNNI 1
#include "quant/quant_kern_x86.h"

/* ---- float weights: 32 values per step (64 for BF16) into two accumulators per column; the tail
 * is loaded with masks (zeros beyond n), so every column runs the same float operations ---- */

KX_INLINE __m512 kz_ld_f32(const void *p, int i, __mmask16 m) { return _mm512_maskz_loadu_ps(m, (const float *)p + i); }
KX_INLINE __mmask16 kz_mask16(int r) { return r >= 16 ? (__mmask16)0xffff : r <= 0 ? 0 : (__mmask16)((1u << r) - 1); }

#define KZ_KERNEL(T)                                                                               \
    KX_INLINE void kx_##T(int n, float *s, const void *w, const void *vy, size_t by, const int nc) { \
        const uint8_t *y[4];                                                                       \
        __m512 a0[4], a1[4];                                                                       \
        KX_UNROLL for (int c = 0; c < nc; c++) {                                                   \
            y[c] = (const uint8_t *)vy + (size_t)c * by;                                           \
            a0[c] = a1[c] = _mm512_setzero_ps();                                                   \
        }                                                                                          \
        int i = 0;                                                                                 \
        for (; i + 32 <= n; i += 32) {                                                             \
            const __m512 w0 = kz_ld_##T(w, i, 0xffff), w1 = kz_ld_##T(w, i + 16, 0xffff);          \
            KX_UNROLL for (int c = 0; c < nc; c++) {                                               \
                a0[c] = _mm512_fmadd_ps(w0, kz_ld_##T(y[c], i, 0xffff), a0[c]);                    \
                a1[c] = _mm512_fmadd_ps(w1, kz_ld_##T(y[c], i + 16, 0xffff), a1[c]);               \
            }                                                                                      \
        }                                                                                          \
        if (i < n) {                                                                               \
            const __mmask16 m0 = kz_mask16(n - i), m1 = kz_mask16(n - i - 16);                     \
            const __m512 w0 = kz_ld_##T(w, i, m0), w1 = kz_ld_##T(w, i + 16, m1);                  \
            KX_UNROLL for (int c = 0; c < nc; c++) {                                               \
                a0[c] = _mm512_fmadd_ps(w0, kz_ld_##T(y[c], i, m0), a0[c]);                        \
                a1[c] = _mm512_fmadd_ps(w1, kz_ld_##T(y[c], i + 16, m1), a1[c]);                   \
            }                                                                                      \
        }                                                                                          \
        KX_UNROLL for (int c = 0; c < nc; c++) s[c] = _mm512_reduce_add_ps(_mm512_add_ps(a0[c], a1[c])); \
    }
KZ_KERNEL(f32)
/* F16: 256-bit conversions run the 4-column kernel 1.5x faster than 512-bit ones on Zen 4 */
KF_KERNEL(f16, 2)

/* BF16: vdpbf16ps multiplies pairs of bf16 and adds both products to a float lane */
KX_INLINE __m512bh kz_ld_bf16(const void *p, int i, __mmask32 m) {
    return (__m512bh)_mm512_maskz_loadu_epi16(m, (const uint16_t *)p + i);
}
KX_INLINE __mmask32 kz_mask32(int r) { return r >= 32 ? (__mmask32)0xffffffffu : r <= 0 ? 0 : (__mmask32)((1u << r) - 1); }

KX_INLINE void kx_bf16(int n, float *s, const void *w, const void *vy, size_t by, const int nc) {
    const uint8_t *y[4];
    __m512 a0[4], a1[4];
    KX_UNROLL for (int c = 0; c < nc; c++) {
        y[c] = (const uint8_t *)vy + (size_t)c * by;
        a0[c] = a1[c] = _mm512_setzero_ps();
    }
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512bh w0 = kz_ld_bf16(w, i, 0xffffffffu), w1 = kz_ld_bf16(w, i + 32, 0xffffffffu);
        KX_UNROLL for (int c = 0; c < nc; c++) {
            a0[c] = _mm512_dpbf16_ps(a0[c], w0, kz_ld_bf16(y[c], i, 0xffffffffu));
            a1[c] = _mm512_dpbf16_ps(a1[c], w1, kz_ld_bf16(y[c], i + 32, 0xffffffffu));
        }
    }
    if (i < n) {
        const __mmask32 m0 = kz_mask32(n - i), m1 = kz_mask32(n - i - 32);
        const __m512bh w0 = kz_ld_bf16(w, i, m0), w1 = kz_ld_bf16(w, i + 32, m1);
        KX_UNROLL for (int c = 0; c < nc; c++) {
            a0[c] = _mm512_dpbf16_ps(a0[c], w0, kz_ld_bf16(y[c], i, m0));
            a1[c] = _mm512_dpbf16_ps(a1[c], w1, kz_ld_bf16(y[c], i + 32, m1));
        }
    }
    KX_UNROLL for (int c = 0; c < nc; c++) s[c] = _mm512_reduce_add_ps(_mm512_add_ps(a0[c], a1[c]));
}

KX_ENTRY(f32, _avx512)
KX_ENTRY(f16, _avx512)
KX_ENTRY(bf16, _avx512)
KX_ENTRY(q8_0, _avx512)
KX_ENTRY(q5_0, _avx512)
KX_ENTRY(q4_1, _avx512)
KX_ENTRY(q5_1, _avx512)
KX_ENTRY(q2_k, _avx512)
KX_ENTRY(q3_k, _avx512)
KX_ENTRY(q4_k, _avx512)
KX_ENTRY(q5_k, _avx512)
KX_ENTRY(q6_k, _avx512)
KX_ENTRY(nvfp4, _avx512)
KX_ENTRY_P(q8_0, _avx512)
KX_ENTRY_P(q5_0, _avx512)
KX_ENTRY_P(nvfp4, _avx512)
KX_ENTRY_P(q4_1, _avx512)
KX_ENTRY_P(q5_1, _avx512)

const mr_vec_dot_fn mr_vec_dot_avx512[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = mr_vd_f32_avx512,
    [MR_TYPE_F16] = mr_vd_f16_avx512,
    [MR_TYPE_BF16] = mr_vd_bf16_avx512,
    [MR_TYPE_Q8_0] = mr_vd_q8_0_avx512,
    [MR_TYPE_Q4_0] = mr_vd_q4_0_bs_avx512, /* block-sum numerics (q4_0_avx512.c) */
    [MR_TYPE_Q5_0] = mr_vd_q5_0_avx512,
    [MR_TYPE_Q4_1] = mr_vd_q4_1_avx512,
    [MR_TYPE_Q5_1] = mr_vd_q5_1_avx512,
    [MR_TYPE_Q2_K] = mr_vd_q2_k_avx512,
    [MR_TYPE_Q3_K] = mr_vd_q3_k_avx512,
    [MR_TYPE_Q4_K] = mr_vd_q4_k_avx512,
    [MR_TYPE_Q5_K] = mr_vd_q5_k_avx512,
    [MR_TYPE_Q6_K] = mr_vd_q6_k_avx512,
    [MR_TYPE_NVFP4] = mr_vd_nvfp4_avx512,
    [MR_TYPE_IQ2_XXS] = mr_vec_dot_iq2_xxs_avx512,
    [MR_TYPE_IQ3_S] = mr_vec_dot_iq3_s_avx512,
    [MR_TYPE_IQ1_S] = mr_vec_dot_iq1_s_avx512,
    [MR_TYPE_IQ1_M] = mr_vec_dot_iq1_m_avx512,
    [MR_TYPE_IQ4_NL] = mr_vec_dot_iq4_nl_avx512,
    [MR_TYPE_IQ4_XS] = mr_vec_dot_iq4_xs_avx512,
    [MR_TYPE_MXFP4] = mr_vec_dot_mxfp4_avx512,
    [MR_TYPE_IQ3_XXS] = mr_vec_dot_iq3_xxs_avx512,
    [MR_TYPE_IQ2_XS] = mr_vec_dot_iq2_xs_avx512,
    [MR_TYPE_IQ2_S] = mr_vec_dot_iq2_s_avx512,
};

const mr_vec_dot_x4_fn mr_vec_dot_x4_avx512[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = mr_vd4_f32_avx512,
    [MR_TYPE_F16] = mr_vd4_f16_avx512,
    [MR_TYPE_BF16] = mr_vd4_bf16_avx512,
    [MR_TYPE_Q8_0] = mr_vd4_q8_0_avx512,
    [MR_TYPE_Q4_0] = mr_vd4_q4_0_bs_avx512,
    [MR_TYPE_Q5_0] = mr_vd4_q5_0_avx512,
    [MR_TYPE_Q4_1] = mr_vd4_q4_1_avx512,
    [MR_TYPE_Q5_1] = mr_vd4_q5_1_avx512,
    [MR_TYPE_Q2_K] = mr_vd4_q2_k_avx512,
    [MR_TYPE_Q3_K] = mr_vd4_q3_k_avx512,
    [MR_TYPE_Q4_K] = mr_vd4_q4_k_avx512,
    [MR_TYPE_Q5_K] = mr_vd4_q5_k_avx512,
    [MR_TYPE_Q6_K] = mr_vd4_q6_k_avx512,
    [MR_TYPE_IQ2_XXS] = mr_vec_dot_x4_iq2_xxs_avx512,
    [MR_TYPE_IQ3_S] = mr_vec_dot_x4_iq3_s_avx512,
    [MR_TYPE_IQ1_S] = mr_vec_dot_x4_iq1_s_avx512,
    [MR_TYPE_IQ1_M] = mr_vec_dot_x4_iq1_m_avx512,
    [MR_TYPE_IQ4_NL] = mr_vec_dot_x4_iq4_nl_avx512,
    [MR_TYPE_IQ4_XS] = mr_vec_dot_x4_iq4_xs_avx512,
    [MR_TYPE_MXFP4] = mr_vec_dot_x4_mxfp4_avx512,
    [MR_TYPE_IQ3_XXS] = mr_vec_dot_x4_iq3_xxs_avx512,
    [MR_TYPE_IQ2_XS] = mr_vec_dot_x4_iq2_xs_avx512,
    [MR_TYPE_IQ2_S] = mr_vec_dot_x4_iq2_s_avx512,
    [MR_TYPE_NVFP4] = mr_vd4_nvfp4_avx512,
};

/* 4-column kernels on prepared Q8_0 activations (quant_simd.h), equal to the vec_dot above */
const mr_vec_dot_x4_fn mr_vec_dot_x4p_avx512[MR_TYPE_COUNT] = {
    [MR_TYPE_Q8_0] = mr_vd4p_q8_0_avx512,
    [MR_TYPE_Q5_0] = mr_vd4p_q5_0_avx512,
    [MR_TYPE_NVFP4] = mr_vd4p_nvfp4_avx512,
    [MR_TYPE_Q4_1] = mr_vd4p_q4_1_avx512,
    [MR_TYPE_Q5_1] = mr_vd4p_q5_1_avx512,
};

void mr_prep_q8_0_avx512(const void *y, void *yp, int n) { mr_prep_q8_0_vnni(y, yp, n); }
void mr_prep_q8_1_avx512(const void *y, void *yp, int n) { mr_prep_q8_1_vnni(y, yp, n); }

size_t mr_prep_row_size(int partner, int64_t n) {
    if (n % 32) return 0;
    return partner == MR_TYPE_Q8_0 ? (size_t)(n / 32) * 36 : partner == MR_TYPE_Q8_1 ? (size_t)(n / 32) * 40 : 0;
}

mr_prep_fn mr_prep_avx512(int partner) {
    return partner == MR_TYPE_Q8_0 ? mr_prep_q8_0_avx512 : partner == MR_TYPE_Q8_1 ? mr_prep_q8_1_avx512 : NULL;
}
