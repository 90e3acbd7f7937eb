/* Block layouts of the non-IQ tensor types (ggml-common.h of ggml / the reference fork).
 * Each struct is the exact on-disk byte layout of one block; its size is asserted against ggml's,
 * and the type table in quant.c takes bytes per block from sizeof. Half-precision fields are raw fp16 bits (uint16_t).
 * Internal to src/quant. */
#ifndef MR_QUANT_BLOCKS_H
#define MR_QUANT_BLOCKS_H
#include <stdint.h>

#define MR_QK_K 256 /* super-block size of the K-quants, TQ*, Q8_K */

/* Q1_0: 128 weights, one fp16 scale; bit j set = +d, clear = -d. */
#define MR_QK1_0 128
typedef struct { uint16_t d; uint8_t qs[MR_QK1_0 / 8]; } mr_block_q1_0;
_Static_assert(sizeof(mr_block_q1_0) == 18, "q1_0 block: ggml has 18 bytes");

/* Q2_0 (ggml id 42): 64 weights (q - 1) * d, q 2 bits, so levels -d, 0, +d, +2d; byte j holds
 * weights 4j..4j+3 at bits 0-1, 2-3, 4-5, 6-7. Bytes 8k..8k+7 cover the 32 weights of Q8_0 block k. */
#define MR_QK2_0 64
typedef struct { uint16_t d; uint8_t qs[MR_QK2_0 / 4]; } mr_block_q2_0;
_Static_assert(sizeof(mr_block_q2_0) == 18, "q2_0 block: ggml has 18 bytes");

/* Q4_0: 32 weights (q - 8) * d; qs[j] holds weight j (low nibble) and j + 16 (high nibble). */
#define MR_QK4_0 32
typedef struct { uint16_t d; uint8_t qs[MR_QK4_0 / 2]; } mr_block_q4_0;
_Static_assert(sizeof(mr_block_q4_0) == 18, "q4_0 block: ggml has 18 bytes");

/* Q4_1: 32 weights q * d + m, nibbles as Q4_0. */
#define MR_QK4_1 32
typedef struct { uint16_t d, m; uint8_t qs[MR_QK4_1 / 2]; } mr_block_q4_1;
_Static_assert(sizeof(mr_block_q4_1) == 20, "q4_1 block: ggml has 20 bytes");

/* Q5_0: 32 weights (q - 16) * d; low 4 bits as Q4_0, bit 4 of weight j is bit j of qh
 * (little-endian 32-bit word). */
#define MR_QK5_0 32
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[MR_QK5_0 / 2]; } mr_block_q5_0;
_Static_assert(sizeof(mr_block_q5_0) == 22, "q5_0 block: ggml has 22 bytes");

/* Q5_1: 32 weights q * d + m, bits as Q5_0. */
#define MR_QK5_1 32
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[MR_QK5_1 / 2]; } mr_block_q5_1;
_Static_assert(sizeof(mr_block_q5_1) == 24, "q5_1 block: ggml has 24 bytes");

/* Q8_0: 32 weights q * d. Also the activation partner of Q4_0, Q5_0, Q8_0, Q1_0, Q2_0 and IQ4_NL/MXFP4/NVFP4. */
#define MR_QK8_0 32
typedef struct { uint16_t d; int8_t qs[MR_QK8_0]; } mr_block_q8_0;
_Static_assert(sizeof(mr_block_q8_0) == 34, "q8_0 block: ggml has 34 bytes");

/* Q8_1: Q8_0 plus s = fp16(d * sum(qs)); activation partner of Q4_1 and Q5_1. */
#define MR_QK8_1 32
typedef struct { uint16_t d, s; int8_t qs[MR_QK8_1]; } mr_block_q8_1;
_Static_assert(sizeof(mr_block_q8_1) == 36, "q8_1 block: ggml has 36 bytes");

/* TQ1_0: 256 ternary weights (t - 1) * d, t in {0,1,2}. qs: 48 bytes of 5 trits each (weights
 * 0..159 in two groups of 32 bytes x 5 and 16 bytes x 5), qh: 4 bytes of 4 trits (weights 240..255).
 * Trits are stored as fixed-point fractions of 3^5 (byte = ceil(value * 256 / 243)). */
typedef struct { uint8_t qs[(MR_QK_K - 4 * MR_QK_K / 64) / 5]; uint8_t qh[MR_QK_K / 64]; uint16_t d; } mr_block_tq1_0;
_Static_assert(sizeof(mr_block_tq1_0) == 54, "tq1_0 block: ggml has 54 bytes");

/* TQ2_0: 256 ternary weights, 2 bits each ((q - 1) * d). */
typedef struct { uint8_t qs[MR_QK_K / 4]; uint16_t d; } mr_block_tq2_0;
_Static_assert(sizeof(mr_block_tq2_0) == 66, "tq2_0 block: ggml has 66 bytes");

/* Q2_K: 16 sub-blocks of 16; weight = d * (sc & 15) * q - dmin * (sc >> 4), q 2 bits. */
typedef struct { uint8_t scales[MR_QK_K / 16]; uint8_t qs[MR_QK_K / 4]; uint16_t d, dmin; } mr_block_q2_k;
_Static_assert(sizeof(mr_block_q2_k) == 84, "q2_K block: ggml has 84 bytes");

/* Q3_K: 16 sub-blocks of 16; weight = d * (scale6 - 32) * (q - 4 * !hbit), q 2 bits + high bit
 * in hmask; twelve bytes pack sixteen 6-bit scales. */
typedef struct { uint8_t hmask[MR_QK_K / 8]; uint8_t qs[MR_QK_K / 4]; uint8_t scales[12]; uint16_t d; } mr_block_q3_k;
_Static_assert(sizeof(mr_block_q3_k) == 110, "q3_K block: ggml has 110 bytes");

/* Q4_K: 8 sub-blocks of 32; weight = d * sc * q - dmin * m, 6-bit sc/m packed in 12 bytes. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qs[MR_QK_K / 2]; } mr_block_q4_k;
_Static_assert(sizeof(mr_block_q4_k) == 144, "q4_K block: ggml has 144 bytes");

/* Q5_K: as Q4_K plus a fifth bit per weight in qh. */
typedef struct { uint16_t d, dmin; uint8_t scales[12]; uint8_t qh[MR_QK_K / 8]; uint8_t qs[MR_QK_K / 2]; } mr_block_q5_k;
_Static_assert(sizeof(mr_block_q5_k) == 176, "q5_K block: ggml has 176 bytes");

/* Q6_K: 16 sub-blocks of 16; weight = d * scale8 * (q - 32), q = 4 low bits (ql) + 2 high (qh). */
typedef struct { uint8_t ql[MR_QK_K / 2]; uint8_t qh[MR_QK_K / 4]; int8_t scales[MR_QK_K / 16]; uint16_t d; } mr_block_q6_k;
_Static_assert(sizeof(mr_block_q6_k) == 210, "q6_K block: ggml has 210 bytes");

/* Q8_K: activation partner of the K-quants, TQ* and the 256-blocks IQ types. d is a float;
 * bsums[j] = sum of qs[16j .. 16j+15]. */
typedef struct { float d; int8_t qs[MR_QK_K]; int16_t bsums[MR_QK_K / 16]; } mr_block_q8_k;
_Static_assert(sizeof(mr_block_q8_k) == 292, "q8_K block: ggml has 292 bytes");

#endif
