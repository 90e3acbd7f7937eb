/* The one table of tensor types. Block sizes and bytes per block are ggml's (ggml-common.h);
 * each block struct (quant_blocks.h) carries a _Static_assert against the size given here. */
#include "quant/quant.h"
#include "quant/quant_impl.h"
#include "base/base.h"

#include <stdio.h>
#include <strings.h>

/* name, block size, bytes per block, quantized, partner activation type, to_float, from_float, vec_dot */
static const mr_type_traits mr_types[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = {"f32", 1, 4, 0, MR_TYPE_F32, mr_dequant_f32, mr_quantize_f32, mr_vec_dot_f32},
    [MR_TYPE_F16] = {"f16", 1, 2, 0, MR_TYPE_F16, mr_dequant_f16, mr_quantize_f16, mr_vec_dot_f16},
    [MR_TYPE_BF16] = {"bf16", 1, 2, 0, MR_TYPE_BF16, mr_dequant_bf16, mr_quantize_bf16, mr_vec_dot_bf16},
    [MR_TYPE_Q4_0] = {"q4_0", 32, 18, 1, MR_TYPE_Q8_0, mr_dequant_q4_0, mr_quantize_q4_0, mr_vec_dot_q4_0},
    [MR_TYPE_Q4_1] = {"q4_1", 32, 20, 1, MR_TYPE_Q8_1, mr_dequant_q4_1, mr_quantize_q4_1, mr_vec_dot_q4_1},
    [MR_TYPE_Q5_0] = {"q5_0", 32, 22, 1, MR_TYPE_Q8_0, mr_dequant_q5_0, mr_quantize_q5_0, mr_vec_dot_q5_0},
    [MR_TYPE_Q5_1] = {"q5_1", 32, 24, 1, MR_TYPE_Q8_1, mr_dequant_q5_1, mr_quantize_q5_1, mr_vec_dot_q5_1},
    [MR_TYPE_Q8_0] = {"q8_0", 32, 34, 1, MR_TYPE_Q8_0, mr_dequant_q8_0, mr_quantize_q8_0, mr_vec_dot_q8_0},
    [MR_TYPE_Q8_1] = {"q8_1", 32, 36, 1, MR_TYPE_Q8_1, NULL, mr_quantize_q8_1, NULL},
    [MR_TYPE_Q2_K] = {"q2_K", 256, 84, 1, MR_TYPE_Q8_K, mr_dequant_q2_k, mr_quantize_q2_k, mr_vec_dot_q2_k},
    [MR_TYPE_Q3_K] = {"q3_K", 256, 110, 1, MR_TYPE_Q8_K, mr_dequant_q3_k, mr_quantize_q3_k, mr_vec_dot_q3_k},
    [MR_TYPE_Q4_K] = {"q4_K", 256, 144, 1, MR_TYPE_Q8_K, mr_dequant_q4_k, mr_quantize_q4_k, mr_vec_dot_q4_k},
    [MR_TYPE_Q5_K] = {"q5_K", 256, 176, 1, MR_TYPE_Q8_K, mr_dequant_q5_k, mr_quantize_q5_k, mr_vec_dot_q5_k},
    [MR_TYPE_Q6_K] = {"q6_K", 256, 210, 1, MR_TYPE_Q8_K, mr_dequant_q6_k, mr_quantize_q6_k, mr_vec_dot_q6_k},
    [MR_TYPE_Q8_K] = {"q8_K", 256, 292, 1, MR_TYPE_Q8_K, mr_dequant_q8_k, mr_quantize_q8_k, NULL},
    [MR_TYPE_TQ1_0] = {"tq1_0", 256, 54, 1, MR_TYPE_Q8_K, mr_dequant_tq1_0, mr_quantize_tq1_0, mr_vec_dot_tq1_0},
    [MR_TYPE_TQ2_0] = {"tq2_0", 256, 66, 1, MR_TYPE_Q8_K, mr_dequant_tq2_0, mr_quantize_tq2_0, mr_vec_dot_tq2_0},
    [MR_TYPE_Q1_0] = {"q1_0", 128, 18, 1, MR_TYPE_Q8_0, mr_dequant_q1_0, mr_quantize_q1_0, mr_vec_dot_q1_0},

    [MR_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66, 1, MR_TYPE_Q8_K, mr_dequant_iq2_xxs, NULL, mr_vec_dot_iq2_xxs},
    [MR_TYPE_IQ2_XS] = {"iq2_xs", 256, 74, 1, MR_TYPE_Q8_K, mr_dequant_iq2_xs, NULL, mr_vec_dot_iq2_xs},
    [MR_TYPE_IQ2_S] = {"iq2_s", 256, 82, 1, MR_TYPE_Q8_K, mr_dequant_iq2_s, NULL, mr_vec_dot_iq2_s},
    [MR_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98, 1, MR_TYPE_Q8_K, mr_dequant_iq3_xxs, NULL, mr_vec_dot_iq3_xxs},
    [MR_TYPE_IQ3_S] = {"iq3_s", 256, 110, 1, MR_TYPE_Q8_K, mr_dequant_iq3_s, NULL, mr_vec_dot_iq3_s},
    [MR_TYPE_IQ1_S] = {"iq1_s", 256, 50, 1, MR_TYPE_Q8_K, mr_dequant_iq1_s, NULL, mr_vec_dot_iq1_s},
    [MR_TYPE_IQ1_M] = {"iq1_m", 256, 56, 1, MR_TYPE_Q8_K, mr_dequant_iq1_m, NULL, mr_vec_dot_iq1_m},
    [MR_TYPE_IQ4_NL] = {"iq4_nl", 32, 18, 1, MR_TYPE_Q8_0, mr_dequant_iq4_nl, mr_quantize_iq4_nl, mr_vec_dot_iq4_nl},
    [MR_TYPE_IQ4_XS] = {"iq4_xs", 256, 136, 1, MR_TYPE_Q8_K, mr_dequant_iq4_xs, NULL, mr_vec_dot_iq4_xs},
    [MR_TYPE_MXFP4] = {"mxfp4", 32, 17, 1, MR_TYPE_Q8_0, mr_dequant_mxfp4, mr_quantize_mxfp4, mr_vec_dot_mxfp4},
    [MR_TYPE_NVFP4] = {"nvfp4", 64, 36, 1, MR_TYPE_Q8_0, mr_dequant_nvfp4, mr_quantize_nvfp4, mr_vec_dot_nvfp4},

    [MR_TYPE_I8] = {"i8", 1, 1, 0, MR_TYPE_I8, NULL, NULL, NULL},
    [MR_TYPE_I16] = {"i16", 1, 2, 0, MR_TYPE_I16, NULL, NULL, NULL},
    [MR_TYPE_I32] = {"i32", 1, 4, 0, MR_TYPE_I32, NULL, NULL, NULL},
    [MR_TYPE_I64] = {"i64", 1, 8, 0, MR_TYPE_I64, NULL, NULL, NULL},
    [MR_TYPE_F64] = {"f64", 1, 8, 0, MR_TYPE_F64, NULL, NULL, NULL},
};

const mr_type_traits *mr_type_get(int type) {
    if (type < 0 || type >= MR_TYPE_COUNT || !mr_types[type].name) return NULL;
    return &mr_types[type];
}

const char *mr_type_name(int type) {
    const mr_type_traits *t = mr_type_get(type);
    return t ? t->name : "?";
}

int mr_type_from_name(const char *name) {
    for (int i = 0; i < MR_TYPE_COUNT; i++)
        if (mr_types[i].name && strcasecmp(mr_types[i].name, name) == 0) return i;
    return -1;
}

size_t mr_row_size(int type, int64_t n) {
    const mr_type_traits *t = mr_type_get(type);
    if (!t || n < 0 || n % t->block_size) return 0;
    return (size_t)(n / t->block_size) * t->type_size;
}

mr_vec_dot_fn mr_type_vec_dot_isa(int type, int isa) {
    const mr_type_traits *t = mr_type_get(type);
    if (!t) return NULL;
    switch (isa) {
    case MR_ISA_AVX512: return mr_vec_dot_avx512[type];
    case MR_ISA_AVX2: return mr_vec_dot_avx2[type];
    default: return t->vec_dot;
    }
}

mr_vec_dot_fn mr_type_vec_dot(int type) {
    const mr_type_traits *t = mr_type_get(type);
    if (!t) return NULL;
    for (int isa = mr_isa(); isa > MR_ISA_SCALAR; isa--) {
        mr_vec_dot_fn f = mr_type_vec_dot_isa(type, isa);
        if (f) return f;
    }
    return t->vec_dot;
}
