/* avx512 vec_dot kernels, indexed by type; NULL entries fall back to the scalar reference. */
#include "quant/quant.h"
#include "quant/quant_iq_simd.h"

const mr_vec_dot_fn mr_vec_dot_avx512[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = NULL,
    [MR_TYPE_IQ2_XXS] = mr_vec_dot_iq2_xxs_avx512,
    [MR_TYPE_IQ3_S] = mr_vec_dot_iq3_s_avx512,
    [MR_TYPE_IQ1_S] = mr_vec_dot_iq1_s_avx512,
    [MR_TYPE_IQ1_M] = mr_vec_dot_iq1_m_avx512,
    [MR_TYPE_IQ4_NL] = mr_vec_dot_iq4_nl_avx512,
    [MR_TYPE_IQ4_XS] = mr_vec_dot_iq4_xs_avx512,
    [MR_TYPE_MXFP4] = mr_vec_dot_mxfp4_avx512,
};
