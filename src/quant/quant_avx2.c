/* AVX2 (+FMA, F16C) vec_dot kernels, indexed by type; NULL entries fall back to the scalar
 * reference. The integer-quant kernels are the shared template quant_kern_x86.h; the float ones
 * (F32, F16, BF16) are here. Each type also has a 4-column kernel for the matrix kernels that
 * equals four vec_dot calls bit for bit (quant_simd.h). */
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "quant/quant_iq_simd.h"

#define KX_VNNI 0
#include "quant/quant_kern_x86.h"
#include "quant/quant_rp_x86.h"

KF_KERNEL(f32, 4)
KF_KERNEL(f16, 2)
KF_KERNEL(bf16, 2)

KX_ENTRY(f32, _avx2)
KX_ENTRY(f16, _avx2)
KX_ENTRY(bf16, _avx2)
KX_ENTRY(q5_0, _avx2)
KX_ENTRY(q4_1, _avx2)
KX_ENTRY(q5_1, _avx2)
KX_ENTRY(q2_k, _avx2)
KX_ENTRY(q3_k, _avx2)
KX_ENTRY(q5_k, _avx2)
KX_ENTRY(nvfp4, _avx2)

/* The AVX2 kernel table (quant_simd.h). The quantizers serve AVX-512 too (mr_kern_get). */
/* Q4_K, Q6_K: the reference's lane order and 8-row repacked layouts (quant_rp_x86.h) */
static void mr_vd_q4_k_bs_avx2(int n, float *s, const void *w, const void *y) { kr_q4_k(n, s, w, y, 0, 1); }
static void mr_vd4_q4_k_bs_avx2(int n, float *s, const void *w, const void *y, size_t by) { kr_q4_k(n, s, w, y, by, 4); }

static void mr_vd_q6_k_bs_avx2(int n, float *s, const void *w, const void *y) { kr_q6_k(n, s, w, y, 0, 1); }
static void mr_vd4_q6_k_bs_avx2(int n, float *s, const void *w, const void *y, size_t by) { kr_q6_k(n, s, w, y, by, 4); }

/* 8-row layouts of head + 4-byte groups (mr_repack_interleave4): block bytes and head bytes */
#define RP8_PACK(t, blk, head)                                                                     \
    static void mr_##t##_repack8(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) { \
        mr_repack_interleave4(src, cols, g0, g1, dst, 8, blk, head);                              \
    }
RP8_PACK(q4_0, 18, 2)
RP8_PACK(q8_0, 34, 2)
RP8_PACK(iq4_nl, 18, 2)
RP8_PACK(mxfp4, 17, 1)
static void mr_q2_0_repack8(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    mr_q2_0_repack(src, cols, g0, g1, dst, 8);
}
/* 8 rows x 32 values: 8 x 9 bytes */
static const mr_repack_kern mr_rp_q2_0_avx2 = {8, 8 * 9, mr_q2_0_repack8, mr_q2_0_rp8_group, MR_RP_MAX_NC, 0};
static const mr_repack_kern mr_rp_q4_0_avx2 = {8, MR_Q4_0_RP8_BLOCK_BYTES, mr_q4_0_repack8, mr_q4_0_rp8_group, 4, 2};
static const mr_repack_kern mr_rp_q8_0_avx2 = {8, MR_Q8_0_RP8_BLOCK_BYTES, mr_q8_0_repack8, mr_q8_0_rp8_group, MR_RP_MAX_NC, 2};
static const mr_repack_kern mr_rp_iq4_nl_avx2 = {8, 8 * 18, mr_iq4_nl_repack8, mr_iq4_nl_rp8_group, 4, 2};
static const mr_repack_kern mr_rp_mxfp4_avx2 = {8, 8 * 17, mr_mxfp4_repack8, mr_mxfp4_rp8_group, 4, 1};
static const mr_repack_kern mr_rp_q4_k_avx2 = {8, MR_Q4_K_RP8_BLOCK_BYTES / 8, kr_q4_k_repack8, kr_q4_k_rp8_group, MR_RP_MAX_NC, 0};
static const mr_repack_kern mr_rp_iq4_xs_avx2 = {8, MR_IQ4_XS_RP8_BLOCK_BYTES / 8, mr_iq4_xs_repack8, mr_iq4_xs_rp8_group, 4, 0};
static const mr_repack_kern mr_rp_q6_k_avx2 = {8, MR_Q6_K_RP8_BLOCK_BYTES / 8, kr_q6_k_repack8, kr_q6_k_rp8_group, MR_RP_MAX_NC, 0};
static const mr_repack_kern mr_rp_iq3_s_avx2 = {8, MR_IQ3_S_RP8_BLOCK_BYTES / 8, mr_iq3_s_repack8, mr_iq3_s_rp8_group, MR_RP_MAX_NC, 0};

#define K(T, D, D4) [MR_TYPE_##T] = {.dot = D, .dot4 = D4}
#define KX(T, t) K(T, mr_vd_##t##_avx2, mr_vd4_##t##_avx2)
#define KI(T, t) K(T, mr_vec_dot_##t##_avx2, mr_vec_dot_x4_##t##_avx2)
const mr_kern mr_kern_avx2[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = {.dot = mr_vd_f32_avx2, .dot4 = mr_vd4_f32_avx2},
    [MR_TYPE_F16] = {.dot = mr_vd_f16_avx2, .dot4 = mr_vd4_f16_avx2, .from_float = mr_quantize_f16_avx2},
    [MR_TYPE_BF16] = {.dot = mr_vd_bf16_avx2, .dot4 = mr_vd4_bf16_avx2, .from_float = mr_quantize_bf16_avx2},
    /* Q8_0: the reference's lane order and an 8-row repacked layout (q8_0_avx2.c) */
    [MR_TYPE_Q8_0] = {.dot = mr_vd_q8_0_bs_avx2, .dot4 = mr_vd4_q8_0_bs_avx2, .rp = &mr_rp_q8_0_avx2, .from_float = mr_quantize_q8_0_avx2,
                      .rprep = mr_q4_0_rp_prep_avx2, .rprep_bytes = MR_Q4_0_RP_ACT_BYTES},
    /* block-sum numerics and an 8-row repacked layout (q4_0_avx2.c) */
    [MR_TYPE_Q4_0] = {.dot = mr_vd_q4_0_bs_avx2, .dot4 = mr_vd4_q4_0_bs_avx2, .rp = &mr_rp_q4_0_avx2},
    /* Q2_0: the scalar reference's numerics and an 8-row repacked layout (q2_0_avx2.c) */
    [MR_TYPE_Q2_0] = {.dot = mr_vd_q2_0_avx2, .dot4 = mr_vd4_q2_0_avx2, .rp = &mr_rp_q2_0_avx2},
    [MR_TYPE_Q4_K] = {.dot = mr_vd_q4_k_bs_avx2, .dot4 = mr_vd4_q4_k_bs_avx2, .rp = &mr_rp_q4_k_avx2},
    /* IQ4_NL, MXFP4, IQ4_XS: block-sum numerics and 8-row repacked layouts (fp4_avx2.c) */
    [MR_TYPE_IQ4_NL] = {.dot = mr_vd_iq4_nl_bs_avx2, .dot4 = mr_vd4_iq4_nl_bs_avx2, .rp = &mr_rp_iq4_nl_avx2},
    [MR_TYPE_MXFP4] = {.dot = mr_vd_mxfp4_bs_avx2, .dot4 = mr_vd4_mxfp4_bs_avx2, .rp = &mr_rp_mxfp4_avx2},
    [MR_TYPE_IQ4_XS] = {.dot = mr_vd_iq4_xs_bs_avx2, .dot4 = mr_vd4_iq4_xs_bs_avx2, .rp = &mr_rp_iq4_xs_avx2},
    [MR_TYPE_Q6_K] = {.dot = mr_vd_q6_k_bs_avx2, .dot4 = mr_vd4_q6_k_bs_avx2, .rp = &mr_rp_q6_k_avx2},
    [MR_TYPE_Q8_1] = {.from_float = mr_quantize_q8_1_avx2},
    [MR_TYPE_Q8_K] = {.from_float = mr_quantize_q8_k_avx2},
    KX(Q5_0, q5_0), KX(Q4_1, q4_1), KX(Q5_1, q5_1),
    KX(Q2_K, q2_k), KX(Q3_K, q3_k), KX(Q5_K, q5_k), KX(NVFP4, nvfp4),
    /* IQ3_S: per-super-block integer numerics and an 8-row repacked layout (quant_iq_avx2.c) */
    [MR_TYPE_IQ3_S] = {.dot = mr_vec_dot_iq3_s_avx2, .dot4 = mr_vec_dot_x4_iq3_s_avx2, .gemm = mr_gemm_iq3_s_avx2,
                       .rp = &mr_rp_iq3_s_avx2},
    KI(IQ2_XXS, iq2_xxs), KI(IQ1_S, iq1_s), KI(IQ1_M, iq1_m),
    KI(IQ3_XXS, iq3_xxs), KI(IQ2_XS, iq2_xs), KI(IQ2_S, iq2_s),
};
