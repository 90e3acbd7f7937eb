/* Block layouts of the i-quant and FP4 types (ggml-common.h). The activation blocks their dot
 * products read (Q8_0, Q8_K) are in quant_blocks.h. Sizes are asserted against quant.c's table.
 * fp16 fields are raw IEEE half bits (uint16_t). QK_K = 256 values per super-block. */
#ifndef MR_QUANT_BLOCKS_IQ_H
#define MR_QUANT_BLOCKS_IQ_H
#include <stdint.h>
#include <string.h>
#include "quant/quant_blocks.h"   /* MR_QK_K, MR_QK8_0 and the activation blocks mr_block_q8_0 / _q8_k */

#define MR_QK4_NL 32
#define MR_QK_MXFP4 32
#define MR_QK_NVFP4 64
#define MR_QK_NVFP4_SUB 16

/* IQ2_XXS, 2.0625 bpw: per 32 values two uint32: 4 grid indices (8 bits each, 8 values per
 * index from iq2xxs_grid), then 4x7 sign bits + 4-bit scale in the top nibble. */
typedef struct {
    uint16_t d;
    uint16_t qs[MR_QK_K / 8];
} mr_block_iq2_xxs;
_Static_assert(sizeof(mr_block_iq2_xxs) == 66, "iq2_xxs block");

/* IQ2_XS, 2.3125 bpw: per 8 values a uint16 = 9-bit grid index | 7 sign bits << 9;
 * a 4-bit scale per 16 values. */
typedef struct {
    uint16_t d;
    uint16_t qs[MR_QK_K / 8];
    uint8_t scales[MR_QK_K / 32];
} mr_block_iq2_xs;
_Static_assert(sizeof(mr_block_iq2_xs) == 74, "iq2_xs block");

/* IQ2_S, 2.5625 bpw: qs[0..31] low 8 bits of 10-bit grid indices, qs[32..63] explicit sign
 * bytes, qh 2 high index bits per 8 values, 4-bit scale per 16 values. */
typedef struct {
    uint16_t d;
    uint8_t qs[MR_QK_K / 4];
    uint8_t qh[MR_QK_K / 32];
    uint8_t scales[MR_QK_K / 32];
} mr_block_iq2_s;
_Static_assert(sizeof(mr_block_iq2_s) == 82, "iq2_s block");

/* IQ3_XXS, 3.0625 bpw: qs[0..63] 8-bit indices into iq3xxs_grid (4 values each), then per
 * 32 values a uint32 of 4x7 sign bits + 4-bit scale. */
typedef struct {
    uint16_t d;
    uint8_t qs[3 * MR_QK_K / 8];
} mr_block_iq3_xxs;
_Static_assert(sizeof(mr_block_iq3_xxs) == 98, "iq3_xxs block");

/* IQ3_S, 3.4375 bpw: 9-bit indices into iq3s_grid (low 8 bits in qs, 9th in qh), explicit
 * signs, 4-bit scale per 32 values (odd multiples 1..31 of d). */
typedef struct {
    uint16_t d;
    uint8_t qs[MR_QK_K / 4];
    uint8_t qh[MR_QK_K / 32];
    uint8_t signs[MR_QK_K / 8];
    uint8_t scales[MR_QK_K / 64];
} mr_block_iq3_s;
_Static_assert(sizeof(mr_block_iq3_s) == 110, "iq3_s block");

/* IQ1_S, 1.5625 bpw: 11-bit indices into iq1s_grid (low 8 in qs, 3 high bits per 8 values in
 * qh[ib] bits 0..11), qh[ib] bits 12..14 = scale, bit 15 = sign of the delta. */
typedef struct {
    uint16_t d;
    uint8_t qs[MR_QK_K / 8];
    uint16_t qh[MR_QK_K / 32];
} mr_block_iq1_s;
_Static_assert(sizeof(mr_block_iq1_s) == 50, "iq1_s block");

/* IQ1_M, 1.75 bpw: like IQ1_S with a delta sign per 8 values (qh nibble bit 3) and 3-bit scales
 * per 16 values; the fp16 super-block scale is spread over the top nibbles of the 4 scale words. */
typedef struct {
    uint8_t qs[MR_QK_K / 8];
    uint8_t qh[MR_QK_K / 16];
    uint8_t scales[MR_QK_K / 32];
} mr_block_iq1_m;
_Static_assert(sizeof(mr_block_iq1_m) == 56, "iq1_m block");

/* IQ4_NL: 32 values, fp16 scale, nibbles index kvalues_iq4nl (low nibbles = values 0..15,
 * high nibbles = values 16..31). */
typedef struct {
    uint16_t d;
    uint8_t qs[MR_QK4_NL / 2];
} mr_block_iq4_nl;
_Static_assert(sizeof(mr_block_iq4_nl) == 18, "iq4_nl block");

/* IQ4_XS: 256 values, 6-bit scale per 32 (low 4 bits in scales_l, high 2 in scales_h), value
 * layout per 32 as IQ4_NL. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[MR_QK_K / 64];
    uint8_t qs[MR_QK_K / 2];
} mr_block_iq4_xs;
_Static_assert(sizeof(mr_block_iq4_xs) == 136, "iq4_xs block");

/* MXFP4 (OCP microscaling): 32 E2M1 values, one E8M0 exponent. */
typedef struct {
    uint8_t e;
    uint8_t qs[MR_QK_MXFP4 / 2];
} mr_block_mxfp4;
_Static_assert(sizeof(mr_block_mxfp4) == 17, "mxfp4 block");

/* E8M0 exponent e: 2^(e-127), halved = 2^(e-128) (subnormal for e < 2): the MXFP4 scale for
 * kvalues_mxfp4, which holds the E2M1 values doubled */
static inline float mr_e8m0_half(uint8_t e) {
    const uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* NVFP4 (the reference fork's layout): 64 E2M1 values in 4 sub-blocks of 16, one UE4M3 scale
 * per sub-block; sub-block s uses qs[8s..8s+7] (low nibbles = its values 0..7, high = 8..15). */
typedef struct {
    uint8_t d[MR_QK_NVFP4 / MR_QK_NVFP4_SUB];
    uint8_t qs[MR_QK_NVFP4 / 2];
} mr_block_nvfp4;
_Static_assert(sizeof(mr_block_nvfp4) == 36, "nvfp4 block");

#endif
