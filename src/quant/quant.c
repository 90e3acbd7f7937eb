/* The one table of tensor types, and the resolution of the per-ISA kernel tables (quant_simd.h).
 * Block sizes are ggml's (ggml-common.h); bytes per block are the sizes of the block structs
 * (quant_blocks.h, quant_blocks_iq.h: each asserts ggml's size). */
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_blocks_iq.h"
#include "quant/quant_impl.h"
#include "quant/quant_simd.h"
#include "base/base.h"

#include <pthread.h>

#include <stdio.h>
#include <strings.h>

/* name, block size, bytes per block, quantized, partner activation type, to_float, from_float, vec_dot */
static const mr_type_traits mr_types[MR_TYPE_COUNT] = {
    [MR_TYPE_F32] = {"f32", 1, sizeof(float), 0, MR_TYPE_F32, mr_dequant_f32, mr_quantize_f32, mr_vec_dot_f32},
    [MR_TYPE_F16] = {"f16", 1, sizeof(uint16_t), 0, MR_TYPE_F16, mr_dequant_f16, mr_quantize_f16, mr_vec_dot_f16},
    [MR_TYPE_BF16] = {"bf16", 1, sizeof(uint16_t), 0, MR_TYPE_BF16, mr_dequant_bf16, mr_quantize_bf16, mr_vec_dot_bf16},
    [MR_TYPE_Q4_0] = {"q4_0", 32, sizeof(mr_block_q4_0), 1, MR_TYPE_Q8_0, mr_dequant_q4_0, mr_quantize_q4_0, mr_vec_dot_q4_0},
    [MR_TYPE_Q4_1] = {"q4_1", 32, sizeof(mr_block_q4_1), 1, MR_TYPE_Q8_1, mr_dequant_q4_1, mr_quantize_q4_1, mr_vec_dot_q4_1},
    [MR_TYPE_Q5_0] = {"q5_0", 32, sizeof(mr_block_q5_0), 1, MR_TYPE_Q8_0, mr_dequant_q5_0, mr_quantize_q5_0, mr_vec_dot_q5_0},
    [MR_TYPE_Q5_1] = {"q5_1", 32, sizeof(mr_block_q5_1), 1, MR_TYPE_Q8_1, mr_dequant_q5_1, mr_quantize_q5_1, mr_vec_dot_q5_1},
    [MR_TYPE_Q8_0] = {"q8_0", 32, sizeof(mr_block_q8_0), 1, MR_TYPE_Q8_0, mr_dequant_q8_0, mr_quantize_q8_0, mr_vec_dot_q8_0},
    [MR_TYPE_Q8_1] = {"q8_1", 32, sizeof(mr_block_q8_1), 1, MR_TYPE_Q8_1, NULL, mr_quantize_q8_1, NULL},
    [MR_TYPE_Q2_K] = {"q2_K", 256, sizeof(mr_block_q2_k), 1, MR_TYPE_Q8_K, mr_dequant_q2_k, mr_quantize_q2_k, mr_vec_dot_q2_k},
    [MR_TYPE_Q3_K] = {"q3_K", 256, sizeof(mr_block_q3_k), 1, MR_TYPE_Q8_K, mr_dequant_q3_k, mr_quantize_q3_k, mr_vec_dot_q3_k},
    [MR_TYPE_Q4_K] = {"q4_K", 256, sizeof(mr_block_q4_k), 1, MR_TYPE_Q8_K, mr_dequant_q4_k, mr_quantize_q4_k, mr_vec_dot_q4_k},
    [MR_TYPE_Q5_K] = {"q5_K", 256, sizeof(mr_block_q5_k), 1, MR_TYPE_Q8_K, mr_dequant_q5_k, mr_quantize_q5_k, mr_vec_dot_q5_k},
    [MR_TYPE_Q6_K] = {"q6_K", 256, sizeof(mr_block_q6_k), 1, MR_TYPE_Q8_K, mr_dequant_q6_k, mr_quantize_q6_k, mr_vec_dot_q6_k},
    [MR_TYPE_Q8_K] = {"q8_K", 256, sizeof(mr_block_q8_k), 1, MR_TYPE_Q8_K, mr_dequant_q8_k, mr_quantize_q8_k, NULL},
    [MR_TYPE_TQ1_0] = {"tq1_0", 256, sizeof(mr_block_tq1_0), 1, MR_TYPE_Q8_K, mr_dequant_tq1_0, mr_quantize_tq1_0, mr_vec_dot_tq1_0},
    [MR_TYPE_TQ2_0] = {"tq2_0", 256, sizeof(mr_block_tq2_0), 1, MR_TYPE_Q8_K, mr_dequant_tq2_0, mr_quantize_tq2_0, mr_vec_dot_tq2_0},
    [MR_TYPE_Q1_0] = {"q1_0", 128, sizeof(mr_block_q1_0), 1, MR_TYPE_Q8_0, mr_dequant_q1_0, mr_quantize_q1_0, mr_vec_dot_q1_0},
    [MR_TYPE_Q2_0] = {"q2_0", 64, sizeof(mr_block_q2_0), 1, MR_TYPE_Q8_0, mr_dequant_q2_0, mr_quantize_q2_0, mr_vec_dot_q2_0},

    [MR_TYPE_IQ2_XXS] = {"iq2_xxs", 256, sizeof(mr_block_iq2_xxs), 1, MR_TYPE_Q8_K, mr_dequant_iq2_xxs, NULL, mr_vec_dot_iq2_xxs},
    [MR_TYPE_IQ2_XS] = {"iq2_xs", 256, sizeof(mr_block_iq2_xs), 1, MR_TYPE_Q8_K, mr_dequant_iq2_xs, NULL, mr_vec_dot_iq2_xs},
    [MR_TYPE_IQ2_S] = {"iq2_s", 256, sizeof(mr_block_iq2_s), 1, MR_TYPE_Q8_K, mr_dequant_iq2_s, NULL, mr_vec_dot_iq2_s},
    [MR_TYPE_IQ3_XXS] = {"iq3_xxs", 256, sizeof(mr_block_iq3_xxs), 1, MR_TYPE_Q8_K, mr_dequant_iq3_xxs, NULL, mr_vec_dot_iq3_xxs},
    [MR_TYPE_IQ3_S] = {"iq3_s", 256, sizeof(mr_block_iq3_s), 1, MR_TYPE_Q8_K, mr_dequant_iq3_s, NULL, mr_vec_dot_iq3_s},
    [MR_TYPE_IQ1_S] = {"iq1_s", 256, sizeof(mr_block_iq1_s), 1, MR_TYPE_Q8_K, mr_dequant_iq1_s, NULL, mr_vec_dot_iq1_s},
    [MR_TYPE_IQ1_M] = {"iq1_m", 256, sizeof(mr_block_iq1_m), 1, MR_TYPE_Q8_K, mr_dequant_iq1_m, NULL, mr_vec_dot_iq1_m},
    [MR_TYPE_IQ4_NL] = {"iq4_nl", 32, sizeof(mr_block_iq4_nl), 1, MR_TYPE_Q8_0, mr_dequant_iq4_nl, mr_quantize_iq4_nl, mr_vec_dot_iq4_nl},
    [MR_TYPE_IQ4_XS] = {"iq4_xs", 256, sizeof(mr_block_iq4_xs), 1, MR_TYPE_Q8_K, mr_dequant_iq4_xs, NULL, mr_vec_dot_iq4_xs},
    [MR_TYPE_MXFP4] = {"mxfp4", 32, sizeof(mr_block_mxfp4), 1, MR_TYPE_Q8_0, mr_dequant_mxfp4, mr_quantize_mxfp4, mr_vec_dot_mxfp4},
    [MR_TYPE_NVFP4] = {"nvfp4", 64, sizeof(mr_block_nvfp4), 1, MR_TYPE_Q8_0, mr_dequant_nvfp4, mr_quantize_nvfp4, mr_vec_dot_nvfp4},

    [MR_TYPE_I8] = {"i8", 1, sizeof(int8_t), 0, MR_TYPE_I8, NULL, NULL, NULL},
    [MR_TYPE_I16] = {"i16", 1, sizeof(int16_t), 0, MR_TYPE_I16, NULL, NULL, NULL},
    [MR_TYPE_I32] = {"i32", 1, sizeof(int32_t), 0, MR_TYPE_I32, NULL, NULL, NULL},
    [MR_TYPE_I64] = {"i64", 1, sizeof(int64_t), 0, MR_TYPE_I64, NULL, NULL, NULL},
    [MR_TYPE_F64] = {"f64", 1, sizeof(double), 0, MR_TYPE_F64, NULL, NULL, NULL},
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

/* Resolved entries per ISA, built once (see mr_kern_get in quant_simd.h). */
static mr_kern mr_kern_res[MR_ISA_COUNT][MR_TYPE_COUNT];
static pthread_once_t mr_kern_once = PTHREAD_ONCE_INIT;

const mr_kern *mr_kern_isa(int type, int isa) {
    if (!mr_type_get(type)) return NULL;
    switch (isa) { /* a build holds its architecture's tables only */
#if MR_ARCH_X86
    case MR_ISA_AVX2: return &mr_kern_avx2[type];
    case MR_ISA_AVX512: return &mr_kern_avx512[type];
#elif MR_ARCH_ARM64
    case MR_ISA_NEON: return &mr_kern_neon[type];
    case MR_ISA_DOTPROD: return &mr_kern_dotprod[type];
#endif
    default: return NULL;
    }
}

static void mr_kern_resolve(void) {
    for (int isa = 0; isa < MR_ISA_COUNT; isa++)
        for (int type = 0; type < MR_TYPE_COUNT; type++) {
            const mr_type_traits *t = mr_type_get(type);
            mr_kern *r = &mr_kern_res[isa][type];
            if (!t) continue;
            r->dot = t->vec_dot;
            r->from_float = t->from_float;
            r->isa = MR_ISA_SCALAR;
            int have_dot = 0, have_ff = 0;
            for (int i = isa; i > MR_ISA_SCALAR; i = mr_isa_lower(i)) {
                const mr_kern *k = mr_kern_isa(type, i);
                if (!k) continue;
                if (!have_dot && k->dot) {
                    r->dot = k->dot; r->dot4 = k->dot4; r->dot4p = k->dot4p; r->gemm = k->gemm; r->gemm1 = k->gemm1; r->rp = k->rp;
                    r->isa = i;
                    have_dot = 1;
                }
                if (!have_ff && k->from_float) { r->from_float = k->from_float; have_ff = 1; }
                if (i == isa) {
                    r->prep = k->prep; r->prep_bytes = k->prep_bytes;
                    r->rprep = k->rprep; r->rprep_bytes = k->rprep_bytes;
                }
            }
        }
}

const mr_kern *mr_kern_get(int type, int isa) {
    if (!mr_type_get(type) || isa < 0 || isa >= MR_ISA_COUNT) return NULL;
    pthread_once(&mr_kern_once, mr_kern_resolve);
    return &mr_kern_res[isa][type];
}

mr_vec_dot_fn mr_type_vec_dot_isa(int type, int isa) {
    if (isa == MR_ISA_SCALAR) { const mr_type_traits *t = mr_type_get(type); return t ? t->vec_dot : NULL; }
    const mr_kern *k = mr_kern_isa(type, isa);
    return k ? k->dot : NULL;
}

mr_vec_dot_fn mr_type_vec_dot(int type) {
    const mr_kern *k = mr_kern_get(type, mr_isa());
    return k ? k->dot : NULL;
}
