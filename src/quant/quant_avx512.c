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

static void mr_q4_0_repack16(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    mr_repack_interleave4(src, cols, g0, g1, dst, 16, 18, 2);
}
static const mr_repack_kern mr_rp_q4_0_avx512 = {16, MR_Q4_0_RP_BLOCK_BYTES, mr_q4_0_repack16, mr_q4_0_rp16_group, 8, 2};
static void mr_q2_0_repack16(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    mr_q2_0_repack(src, cols, g0, g1, dst, 16);
}
/* 16 rows x 32 values: 16 x 9 bytes */
static const mr_repack_kern mr_rp_q2_0_avx512 = {16, 16 * 9, mr_q2_0_repack16, mr_q2_0_rp16_group, MR_RP_MAX_NC, 0};
/* IQ4_NL, MXFP4: 16-row layouts of the Q4_0 kind (q4_0_avx512.c), the AVX2 kernels' numerics */
static void mr_iq4_nl_repack16(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    mr_repack_interleave4(src, cols, g0, g1, dst, 16, 18, 2);
}
static void mr_mxfp4_repack16(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    mr_repack_interleave4(src, cols, g0, g1, dst, 16, 17, 1);
}
static const mr_repack_kern mr_rp_iq4_nl_avx512 = {16, 16 * 18, mr_iq4_nl_repack16, mr_iq4_nl_rp16_group, 8, 2};
static const mr_repack_kern mr_rp_mxfp4_avx512 = {16, 16 * 17, mr_mxfp4_repack16, mr_mxfp4_rp16_group, 8, 1};
/* Q4_K: a 16-row layout with the numerics of the vec_dot above (q4_k_avx512.c) */
static const mr_repack_kern mr_rp_q4_k_avx512 = {16, MR_Q4_K_RP16_BLOCK_BYTES / 8, mr_q4_k_repack16, mr_q4_k_rp16_group,
                                                 MR_RP_MAX_NC, 0};
/* IQ4_XS: the AVX2 8-row layout and pack, multiplied with vpdpbusd (iq4_xs_avx512.c) */
static const mr_repack_kern mr_rp_iq4_xs_avx512 = {8, MR_IQ4_XS_RP8_BLOCK_BYTES / 8, mr_iq4_xs_repack8,
                                                   mr_iq4_xs_rp8_group_avx512, MR_RP_MAX_NC, 0};

/* The AVX-512 kernel table (quant_simd.h). Q4_0 has block-sum numerics (q4_0_avx512.c) and a
 * repacked layout; the Q8_0 / Q8_1 partners have prepared rows for the dot4p kernels. */
#define K(T, D, D4) [MR_TYPE_##T] = {.dot = D, .dot4 = D4}
#define KX(T, t) K(T, mr_vd_##t##_avx512, mr_vd4_##t##_avx512)
#define KP(T, t) [MR_TYPE_##T] = {.dot = mr_vd_##t##_avx512, .dot4 = mr_vd4_##t##_avx512, .dot4p = mr_vd4p_##t##_avx512}
#define KG(T, t) [MR_TYPE_##T] = {.dot = mr_vec_dot_##t##_avx512, .dot4 = mr_vec_dot_x4_##t##_avx512, .gemm = mr_gemm_##t##_avx512}
const mr_kern mr_kern_avx512[MR_TYPE_COUNT] = {
    KX(F32, f32), KX(F16, f16), KX(BF16, bf16),
    [MR_TYPE_Q8_0] = {.dot = mr_vd_q8_0_avx512, .dot4 = mr_vd4_q8_0_avx512, .dot4p = mr_vd4p_q8_0_avx512,
                      .prep = mr_prep_q8_0_vnni, .prep_bytes = 36,
                      .rprep = mr_q4_0_rp_prep, .rprep_bytes = MR_Q4_0_RP_ACT_BYTES},
    [MR_TYPE_Q8_1] = {.prep = mr_prep_q8_1_vnni, .prep_bytes = 40},
    [MR_TYPE_Q4_0] = {.dot = mr_vd_q4_0_bs_avx512, .dot4 = mr_vd4_q4_0_bs_avx512, .rp = &mr_rp_q4_0_avx512},
    /* Q2_0: the scalar reference's numerics and a 16-row repacked layout (q2_0_avx512.c) */
    [MR_TYPE_Q2_0] = {.dot = mr_vd_q2_0_avx512, .dot4 = mr_vd4_q2_0_avx512, .rp = &mr_rp_q2_0_avx512},
    /* IQ4_XS: the AVX2 kernels' block-sum numerics and repacked layout (iq4_xs_avx512.c) */
    [MR_TYPE_IQ4_XS] = {.dot = mr_vd_iq4_xs_bs_avx512, .dot4 = mr_vd4_iq4_xs_bs_avx512, .gemm = mr_gemm_iq4_xs_bs_avx512,
                        .rp = &mr_rp_iq4_xs_avx512},
    KP(Q5_0, q5_0), KP(Q4_1, q4_1), KP(Q5_1, q5_1), KP(NVFP4, nvfp4),
    /* IQ4_NL, MXFP4: the AVX2 block-sum kernels on plain rows (fp4_avx2.c), 16-row repacked layouts */
    [MR_TYPE_IQ4_NL] = {.dot = mr_vd_iq4_nl_bs_avx2, .dot4 = mr_vd4_iq4_nl_bs_avx2, .gemm = mr_gemm_iq4_nl_bs_avx512,
                        .gemm1 = 1, .rp = &mr_rp_iq4_nl_avx512},
    [MR_TYPE_MXFP4] = {.dot = mr_vd_mxfp4_bs_avx2, .dot4 = mr_vd4_mxfp4_bs_avx2, .gemm = mr_gemm_mxfp4_bs_avx512,
                       .gemm1 = 1, .rp = &mr_rp_mxfp4_avx512},
    KX(Q2_K, q2_k), KX(Q3_K, q3_k), KX(Q5_K, q5_k), KX(Q6_K, q6_k),
    [MR_TYPE_Q4_K] = {.dot = mr_vd_q4_k_avx512, .dot4 = mr_vd4_q4_k_avx512, .rp = &mr_rp_q4_k_avx512},
    KG(IQ2_XXS, iq2_xxs), KG(IQ3_S, iq3_s), KG(IQ1_S, iq1_s), KG(IQ1_M, iq1_m),
    KG(IQ3_XXS, iq3_xxs), KG(IQ2_XS, iq2_xs), KG(IQ2_S, iq2_s),
};
