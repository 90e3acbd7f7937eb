/* AVX2 (+FMA, F16C) vec_dot kernels, indexed by type; NULL entries fall back to the scalar
 * reference. The integer-quant kernels are the shared template quant_kern_x86.h; the float ones
 * (F32, F16, BF16) are here. Each type also has a 4-column kernel for the matrix kernels that
 * equals four vec_dot calls bit for bit (quant_simd.h). */
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "quant/quant_iq_simd.h"

#define KX_VNNI 0
#include "quant/quant_kern_x86.h"

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
    [MR_TYPE_IQ3_XXS] = mr_vec_dot_iq3_xxs_avx2,
    [MR_TYPE_IQ2_XS] = mr_vec_dot_iq2_xs_avx2,
    [MR_TYPE_IQ2_S] = mr_vec_dot_iq2_s_avx2,
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
    [MR_TYPE_IQ2_XXS] = mr_vec_dot_x4_iq2_xxs_avx2,
    [MR_TYPE_IQ3_S] = mr_vec_dot_x4_iq3_s_avx2,
    [MR_TYPE_IQ1_S] = mr_vec_dot_x4_iq1_s_avx2,
    [MR_TYPE_IQ1_M] = mr_vec_dot_x4_iq1_m_avx2,
    [MR_TYPE_IQ4_NL] = mr_vec_dot_x4_iq4_nl_avx2,
    [MR_TYPE_IQ4_XS] = mr_vec_dot_x4_iq4_xs_avx2,
    [MR_TYPE_MXFP4] = mr_vec_dot_x4_mxfp4_avx2,
    [MR_TYPE_IQ3_XXS] = mr_vec_dot_x4_iq3_xxs_avx2,
    [MR_TYPE_IQ2_XS] = mr_vec_dot_x4_iq2_xs_avx2,
    [MR_TYPE_IQ2_S] = mr_vec_dot_x4_iq2_s_avx2,
};
