/* AArch64 Advanced SIMD (ARMv8.0, MOERUN_ISA=neon) kernels: quant_kern_arm.h compiled without the
 * dot-product extension, and the activation quantizers of quant_act_neon.c. This ISA's kernel table;
 * types left out use the scalar references. */
#define KA_DOTPROD 0
#define KA_SUFFIX neon
#include "quant/quant_kern_arm.h"

const mr_kern mr_kern_neon[MR_TYPE_COUNT] = {KA_TABLE(mr_quantize_q8_0_neon), [MR_TYPE_Q8_K] = {.from_float = mr_quantize_q8_k_neon}};
