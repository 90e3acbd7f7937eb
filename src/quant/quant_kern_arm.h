/* AArch64 dot-product kernels, written once and compiled twice: by quant_neon.c (ARMv8.0 Advanced
 * SIMD: int8 products widened with smull/smull2 and pair-added into int32 with sadalp) and by
 * quant_dotprod.c (KA_DOTPROD=1: ARMv8.2 FEAT_DotProd, one sdot per 16 bytes). Both give the
 * same int32 lanes (lane l: the sum of products 4l..4l+3 of 16 bytes), so the two ISAs give the
 * same bits. Q8_0, Q4_K and Q2_0 run the scalar references' float operations in their order (that of
 * ggml-cpu's x86 kernels, which made the golden logits; quant_ref.c), so they give the scalar bits;
 * Q4_0, IQ4_NL, MXFP4, IQ4_XS and IQ3_S run the AVX2 kernels' block sums (their bits); the other
 * types differ from the scalar reference in float summation order.
 *
 * This header contains intrinsics: include it ONLY from *_neon.c / *_dotprod.c, which are compiled
 * with their -march (Makefile). Define KA_DOTPROD (0 or 1) and KA_SUFFIX before including it.
 *
 * Every kernel is written for nc activation columns (nc = 1 or 4, a constant after inlining), y,
 * y + by, ...: the weights are decoded once for all columns and column c runs the same float
 * operations in the same order whatever nc, so the 4-column kernel equals four vec_dot calls bit
 * for bit (quant_simd.h); the GEMM of the block-sum types likewise equals vec_dot per row and column. Signs and offsets go onto the weights (at most 6 bits of magnitude), never
 * onto the activations, so no product leaves int16 and no sum leaves int32.
 *
 * Block layouts: quant_blocks.h, quant_blocks_iq.h (ggml's). Scalar references: quant_ref*.c. */
#ifndef MR_QUANT_KERN_ARM_H
#define MR_QUANT_KERN_ARM_H
#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "quant/iq_grids.h"
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_blocks_iq.h"
#include "quant/quant_simd.h"

#ifndef KA_DOTPROD
#error "define KA_DOTPROD before including quant_kern_arm.h"
#endif

#define KA static inline __attribute__((always_inline))
/* before each loop over the nc <= 4 columns: unrolled, the columns' accumulators stay in registers
 * (a rolled loop keeps them in an array on the stack: a load and a store per block and column) */
#define KA_COLS _Pragma("GCC unroll 4")
/* the 8 sub-blocks of a Q4_K/Q5_K column: unrolled with sdot only; plain NEON's widening products
 * run out of registers when unrolled (233 instead of 193 instructions per 256 weights and column of
 * the 4-column Q4_K kernel, bench/aarch64_insn.sh) */
#if KA_DOTPROD
#define KA_UNROLL_J _Pragma("GCC unroll 8")
#else
#define KA_UNROLL_J
#endif
/* activation column c of nc, by bytes apart, as type T */
#define KA_ACT(T, y, by, c) ((const T *)((const uint8_t *)(y) + (size_t)(c) * (by)))

/* ---- helpers ---- */

/* fp16 bits -> float (fcvt: exact, NaN stays NaN as in mr_fp16_to_fp32) */
KA float ka_h2f(uint16_t h) {
    __fp16 f;
    memcpy(&f, &h, 2);
    return (float)f;
}

/* acc + (lane l) the sum of a[i] * b[i] over bytes 4l..4l+3: sdot, or without it the 16 int16
 * products (|p| <= 2^14) pair-added twice */
KA int32x4_t ka_dot(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if KA_DOTPROD
    return vdotq_s32(acc, a, b);
#else
    const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));
    const int16x8_t hi = vmull_high_s8(a, b);
    return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
#endif
}

/* 32 weights (w0 = values 0..15, w1 = 16..31) . 32 activations at q */
KA int32x4_t ka_dot32(int8x16_t w0, int8x16_t w1, const int8_t *q) {
    return ka_dot(ka_dot(vdupq_n_s32(0), w0, vld1q_s8(q)), w1, vld1q_s8(q + 16));
}

/* 32 sign bits (bit j of byte k set: value 8k + j negative) -> byte masks (0xff where negative)
 * of values 0..15 in *m0 and 16..31 in *m1: each byte spread over 8 lanes by a table lookup, then
 * one bit tested per lane */
static const uint8_t ka_bit_sel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
static const uint8_t ka_sign_byte[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
KA void ka_sign_masks32(const uint8_t *sg, uint8x16_t *m0, uint8x16_t *m1) {
    uint32_t w;
    memcpy(&w, sg, 4);
    const uint8x16_t b = vreinterpretq_u8_u32(vdupq_n_u32(w)), sel = vld1q_u8(ka_bit_sel);
    *m0 = vtstq_u8(vqtbl1q_u8(b, vld1q_u8(ka_sign_byte)), sel);
    *m1 = vtstq_u8(vqtbl1q_u8(b, vld1q_u8(ka_sign_byte + 16)), sel);
}

/* v with the lanes where mask is 0xff negated: (v ^ m) - m */
KA int8x16_t ka_apply_sign(uint8x16_t v, uint8x16_t m) {
    return vreinterpretq_s8_u8(vsubq_u8(veorq_u8(v, m), m));
}

/* ---- F32, F16 (partners of themselves) ----
 * 16 products per step in four accumulators, (a0 + a1) + (a2 + a3) then across lanes; the tail of
 * n % 16 values in order after that. */
KA void ka_f32(int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const float *x = w;
    for (int c = 0; c < nc; c++) {
        const float *a = KA_ACT(float, y, by, c);
        float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
        int i = 0;
        for (; i + 16 <= n; i += 16) {
            acc0 = vfmaq_f32(acc0, vld1q_f32(x + i), vld1q_f32(a + i));
            acc1 = vfmaq_f32(acc1, vld1q_f32(x + i + 4), vld1q_f32(a + i + 4));
            acc2 = vfmaq_f32(acc2, vld1q_f32(x + i + 8), vld1q_f32(a + i + 8));
            acc3 = vfmaq_f32(acc3, vld1q_f32(x + i + 12), vld1q_f32(a + i + 12));
        }
        float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
        for (; i < n; i++) sum += x[i] * a[i];
        s[c] = sum;
    }
}

KA float32x4_t ka_h2f4(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

KA void ka_f16(int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const uint16_t *x = w;
    for (int c = 0; c < nc; c++) {
        const uint16_t *a = KA_ACT(uint16_t, y, by, c);
        float32x4_t acc0 = vdupq_n_f32(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
        int i = 0;
        for (; i + 16 <= n; i += 16) {
            acc0 = vfmaq_f32(acc0, ka_h2f4(x + i), ka_h2f4(a + i));
            acc1 = vfmaq_f32(acc1, ka_h2f4(x + i + 4), ka_h2f4(a + i + 4));
            acc2 = vfmaq_f32(acc2, ka_h2f4(x + i + 8), ka_h2f4(a + i + 8));
            acc3 = vfmaq_f32(acc3, ka_h2f4(x + i + 12), ka_h2f4(a + i + 12));
        }
        float sum = vaddvq_f32(vaddq_f32(vaddq_f32(acc0, acc1), vaddq_f32(acc2, acc3)));
        for (; i < n; i++) sum += ka_h2f(x[i]) * ka_h2f(a[i]);
        s[c] = sum;
    }
}

/* ---- 32-value blocks with Q8_0 activations: the block decoder of Q8_0, Q4_0, IQ4_NL, MXFP4, and
 * the Q8_0 kernels ----
 * Q8_0: the float order of ggml-cpu's x86 kernels (and of the scalar Q8_0 reference, quant_ref.c): 8
 * float lanes per column, two vectors here (values 0..15 -> lanes 0..3, 16..31 -> lanes 4..7);
 * per block, lane l gets the exact int32 sum of products 4l..4l+3, converted and fused-multiply-
 * added with dw * dy; at the end lanes l and l + 4 are added, then (0 + 2) and (1 + 3), then those. */
enum { KA_Q8_0, KA_Q4_0, KA_IQ4_NL, KA_MXFP4 };

/* one weight block -> values 0..15 in *lo, 16..31 in *hi, its float scale in *d */
KA void ka_dec32(int kind, const uint8_t *b, int8x16_t *lo, int8x16_t *hi, float *d) {
    if (kind == KA_Q8_0) {
        const mr_block_q8_0 *q = (const mr_block_q8_0 *)b;
        *lo = vld1q_s8(q->qs);
        *hi = vld1q_s8(q->qs + 16);
        *d = ka_h2f(q->d);
        return;
    }
    const uint8_t *qs = kind == KA_MXFP4 ? ((const mr_block_mxfp4 *)b)->qs : ((const mr_block_q4_0 *)b)->qs;
    const uint8x16_t v = vld1q_u8(qs);
    const uint8x16_t l = vandq_u8(v, vdupq_n_u8(15)), h = vshrq_n_u8(v, 4);
    if (kind == KA_Q4_0) {
        *lo = vsubq_s8(vreinterpretq_s8_u8(l), vdupq_n_s8(8));
        *hi = vsubq_s8(vreinterpretq_s8_u8(h), vdupq_n_s8(8));
        *d = ka_h2f(((const mr_block_q4_0 *)b)->d);
        return;
    }
    const int8x16_t levels = vld1q_s8(kind == KA_MXFP4 ? mr_kvalues_mxfp4 : mr_kvalues_iq4nl);
    *lo = vqtbl1q_s8(levels, l);
    *hi = vqtbl1q_s8(levels, h);
    *d = kind == KA_MXFP4 ? mr_e8m0_half(((const mr_block_mxfp4 *)b)->e) : ka_h2f(((const mr_block_iq4_nl *)b)->d);
}

/* lanes 0..3 in lo, 4..7 in hi -> ((r0 + r2) + (r1 + r3)) with r = hi + lo */
KA float ka_hsum8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t r = vaddq_f32(hi, lo);
    const float32x4_t t = vaddq_f32(r, vextq_f32(r, r, 2));
    return vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 1);
}

KA void ka_blk32(int kind, size_t bsz, int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const uint8_t *x = w;
    const int nb = n / 32;
    float32x4_t acc[4][2];
    KA_COLS for (int c = 0; c < nc; c++) acc[c][0] = acc[c][1] = vdupq_n_f32(0);
    for (int i = 0; i < nb; i++) {
        int8x16_t lo, hi;
        float dw;
        ka_dec32(kind, x + (size_t)i * bsz, &lo, &hi, &dw);
        KA_COLS for (int c = 0; c < nc; c++) {
            const mr_block_q8_0 *a = KA_ACT(mr_block_q8_0, y, by, c) + i;
            const float d = dw * ka_h2f(a->d);
            const int32x4_t plo = ka_dot(vdupq_n_s32(0), lo, vld1q_s8(a->qs));
            const int32x4_t phi = ka_dot(vdupq_n_s32(0), hi, vld1q_s8(a->qs + 16));
            acc[c][0] = vfmaq_n_f32(acc[c][0], vcvtq_f32_s32(plo), d);
            acc[c][1] = vfmaq_n_f32(acc[c][1], vcvtq_f32_s32(phi), d);
        }
    }
    KA_COLS for (int c = 0; c < nc; c++) s[c] = ka_hsum8(acc[c][0], acc[c][1]);
}

/* ---- Q4_0, IQ4_NL, MXFP4: block-sum numerics, and a GEMM ----
 * The AVX2 kernels' numerics (q4_0_avx2.c, fp4_avx2.c), so NEON, dotprod and AVX2 give the same
 * bits for these types: per row and column, acc = 0, then per 32-value block b in order
 *     isum_b = the exact int32 sum of the 32 products, acc = fmaf(dw_b * dy_b, (float)isum_b, acc)
 * and the result is acc. Integer sums are exact in any lanes, so each kernel puts in a vector's
 * lanes what saves most: vec_dot one block's partial sums (one across-lanes add); the 4-column
 * kernel the 4 columns (one vector fma per block for 4 columns); the GEMM 4 rows (per block and
 * column one activation load and one vector fma for 4 rows; each weight block decoded once for up
 * to 4 columns). */

/* int32 lanes whose TOTAL is the dot of 32 weights (w0: values 0..15, w1: 16..31) with 32
 * activations at q; which products land in which lane is left open (block sums only). Without
 * sdot the int16 products of the two halves are added before widening: 4 instructions fewer than
 * ka_dot32, exact while |w|, |q| <= 127 (Q4_0, IQ4_NL and MXFP4 levels, Q8_0 activations), so
 * that a pair stays within 2 x 127^2 < 2^15. */
KA int32x4_t ka_dot32_total(int8x16_t w0, int8x16_t w1, const int8_t *q) {
#if KA_DOTPROD
    return ka_dot32(w0, w1, q);
#else
    const int8x16_t q0 = vld1q_s8(q), q1 = vld1q_s8(q + 16);
    const int16x8_t a = vmlal_s8(vmull_s8(vget_low_s8(w0), vget_low_s8(q0)), vget_low_s8(w1), vget_low_s8(q1));
    const int16x8_t b = vmlal_high_s8(vmull_high_s8(w0, q0), w1, q1);
    return vpadalq_s16(vpaddlq_s16(a), b);
#endif
}

/* [total of a, of b, of c, of d] (pairwise adds: exact) */
KA int32x4_t ka_sum4x4(int32x4_t a, int32x4_t b, int32x4_t c, int32x4_t d) {
    return vpaddq_s32(vpaddq_s32(a, b), vpaddq_s32(c, d));
}

/* the fp16 scales of 4 Q8_0 blocks, p0..p3 -> 4 floats */
KA float32x4_t ka_h2f_4(const uint16_t *p0, const uint16_t *p1, const uint16_t *p2, const uint16_t *p3) {
    uint16x4_t h = vld1_dup_u16(p0);
    h = vld1_lane_u16(p1, h, 1);
    h = vld1_lane_u16(p2, h, 2);
    h = vld1_lane_u16(p3, h, 3);
    return vcvt_f32_f16(vreinterpret_f16_u16(h));
}

/* vec_dot (nc = 1) and the 4-column kernel (nc = 4, lane c: column c) */
KA void ka_bs32(int kind, size_t bsz, int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const uint8_t *x = w;
    if (nc == 1) {
        float acc = 0.0f;
        for (int i = 0; i < n / 32; i++) {
            int8x16_t lo, hi;
            float dw;
            ka_dec32(kind, x + (size_t)i * bsz, &lo, &hi, &dw);
            const mr_block_q8_0 *a = (const mr_block_q8_0 *)y + i;
            acc = __builtin_fmaf(dw * ka_h2f(a->d), (float)vaddvq_s32(ka_dot32_total(lo, hi, a->qs)), acc);
        }
        *s = acc;
        return;
    }
    float32x4_t acc = vdupq_n_f32(0);
    for (int i = 0; i < n / 32; i++) {
        int8x16_t lo, hi;
        float dw;
        ka_dec32(kind, x + (size_t)i * bsz, &lo, &hi, &dw);
        const mr_block_q8_0 *a[4];
        int32x4_t p[4];
        KA_COLS for (int c = 0; c < 4; c++) {
            a[c] = KA_ACT(mr_block_q8_0, y, by, c) + i;
            p[c] = ka_dot32_total(lo, hi, a[c]->qs);
        }
        const float32x4_t d = vmulq_n_f32(ka_h2f_4(&a[0]->d, &a[1]->d, &a[2]->d, &a[3]->d), dw);
        acc = vfmaq_f32(acc, vcvtq_f32_s32(ka_sum4x4(p[0], p[1], p[2], p[3])), d);
    }
    vst1q_f32(s, acc);
}

/* 4 rows (w, w + w_row, ...) x nc <= 4 columns (a constant after inlining): s[c * s_col + r] */
KA void ka_bs32_tile(int kind, size_t bsz, int n, const uint8_t *w, size_t w_row, const void *y, size_t by, int nc,
                     float *s, size_t s_col) {
    float32x4_t acc[4];
    KA_COLS for (int c = 0; c < nc; c++) acc[c] = vdupq_n_f32(0);
    for (int i = 0; i < n / 32; i++) {
        int8x16_t lo[4], hi[4];
        float dwr[4];
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) ka_dec32(kind, w + (size_t)r * w_row + (size_t)i * bsz, &lo[r], &hi[r], &dwr[r]);
        const float32x4_t dw = vld1q_f32(dwr);
        KA_COLS for (int c = 0; c < nc; c++) {
            const mr_block_q8_0 *a = KA_ACT(mr_block_q8_0, y, by, c) + i;
            const int32x4_t isum = ka_sum4x4(ka_dot32_total(lo[0], hi[0], a->qs), ka_dot32_total(lo[1], hi[1], a->qs),
                                             ka_dot32_total(lo[2], hi[2], a->qs), ka_dot32_total(lo[3], hi[3], a->qs));
            acc[c] = vfmaq_f32(acc[c], vcvtq_f32_s32(isum), vmulq_n_f32(dw, ka_h2f(a->d)));
        }
    }
    KA_COLS for (int c = 0; c < nc; c++) vst1q_f32(s + (size_t)c * s_col, acc[c]);
}

/* mr_gemm_fn: nr rows x nc columns, 4-row tiles; rows left over through the 4-column and
 * single-column kernels (the same numerics, so the same bits) */
KA void ka_bs32_gemm(int kind, size_t bsz, int n, const void *w, size_t w_row, int nr, const void *y, size_t by,
                     int nc, float *s, size_t s_col) {
    const uint8_t *x = w, *ya = y;
    int r = 0;
    for (; r + 4 <= nr; r += 4) {
        const uint8_t *wr = x + (size_t)r * w_row;
        int c = 0;
        for (; c + 4 <= nc; c += 4) ka_bs32_tile(kind, bsz, n, wr, w_row, ya + (size_t)c * by, by, 4, s + (size_t)c * s_col + r, s_col);
        float *sc = s + (size_t)c * s_col + r;
        const uint8_t *yc = ya + (size_t)c * by;
        if (nc - c == 3) ka_bs32_tile(kind, bsz, n, wr, w_row, yc, by, 3, sc, s_col);
        else if (nc - c == 2) ka_bs32_tile(kind, bsz, n, wr, w_row, yc, by, 2, sc, s_col);
        else if (nc - c == 1) ka_bs32_tile(kind, bsz, n, wr, w_row, yc, by, 1, sc, s_col);
    }
    for (; r < nr; r++) {
        const uint8_t *wr = x + (size_t)r * w_row;
        int c = 0;
        for (; c + 4 <= nc; c += 4) {
            float t[4];
            ka_bs32(kind, bsz, n, t, wr, ya + (size_t)c * by, by, 4);
            for (int k = 0; k < 4; k++) s[(size_t)(c + k) * s_col + r] = t[k];
        }
        for (; c < nc; c++) ka_bs32(kind, bsz, n, s + (size_t)c * s_col + r, wr, ya + (size_t)c * by, by, 1);
    }
}

/* ---- K-quants with Q8_K activations ----
 * Why the float order is fixed: golden models have near ties that float summation order decides
 * (tiny-qwen3moe-iq2_xxs row 3: the scalar Q4_K with its 8 lanes summed in reverse fails it on x86
 * with the very KL 0.231 that a NEON Q4_K with 4 float lanes gave under qemu).
 * Q4_K, Q5_K: the scalar Q4_K's order (quant_ref.c, ggml-cpu's x86 one): 8 float lanes (two vectors
 * here), lane l += d*dy * (sum_j sc_j * products 4l..4l+3 of sub-block j); the mins in 4 lanes,
 * lane t += -(dy*dmin) * (m_2t * S_2t + m_2t+1 * S_2t+1) (S_j: sub-block j's activation sum); at the
 * end the 8-lane tree plus the 4-lane tree.
 * Q2_K, Q6_K: block sums: per super-block and column the exact int32 isum = sum_j sc_j *
 * (q_j . y_j) and (Q2_K) imin = sum_j m_j * bsum_j, then
 *   acc = fmaf(d * dy, (float)isum, acc); acc = fmaf(-(dmin * dy), (float)imin, acc). */

/* Q4_K / Q5_K 6-bit scales and mins of the 8 sub-blocks (ggml's get_scale_min_k4, 4 at a time) */
KA void ka_k4_scales(const uint8_t q[12], uint8_t sc[8], uint8_t m[8]) {
    uint32_t a, b, c;
    memcpy(&a, q, 4);
    memcpy(&b, q + 4, 4);
    memcpy(&c, q + 8, 4);
    const uint32_t s_lo = a & 0x3f3f3f3fu, m_lo = b & 0x3f3f3f3fu;
    const uint32_t s_hi = (c & 0x0f0f0f0fu) | ((a >> 6) & 0x03030303u) << 4;
    const uint32_t m_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 6) & 0x03030303u) << 4;
    memcpy(sc, &s_lo, 4);
    memcpy(sc + 4, &s_hi, 4);
    memcpy(m, &m_lo, 4);
    memcpy(m + 4, &m_hi, 4);
}

/* acc + d * dy * isum - dmin * dy * imin, two fused multiply-adds (the numerics above) */
KA float ka_k_acc(float acc, float d, float dmin, float dy, int32_t isum, int32_t imin) {
    acc = __builtin_fmaf(d * dy, (float)isum, acc);
    return __builtin_fmaf(-(dmin * dy), (float)imin, acc);
}

/* 256 unsigned weights in 16 vectors (activation order) times sub-block scales sc[8] (Q4_K and
 * Q5_K): column c's 8 lanes into acc[c][0] (0..3) and acc[c][1] (4..7), its 4 min lanes into
 * acc[c][2] (the order above) */
KA void ka_k4_cols(const int8x16_t v[16], const uint8_t sc[8], const uint8_t m[8], float dw, float dmw, int i,
                   const void *y, size_t by, int nc, float32x4_t (*acc)[3]) {
    const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
    KA_COLS for (int c = 0; c < nc; c++) {
        const mr_block_q8_k *a = KA_ACT(mr_block_q8_k, y, by, c) + i;
        int32x4_t ilo = vdupq_n_s32(0), ihi = ilo;
        KA_UNROLL_J for (int j = 0; j < 8; j++) {
            ilo = vmlaq_n_s32(ilo, ka_dot(vdupq_n_s32(0), v[2 * j], vld1q_s8(a->qs + 32 * j)), sc[j]);
            ihi = vmlaq_n_s32(ihi, ka_dot(vdupq_n_s32(0), v[2 * j + 1], vld1q_s8(a->qs + 32 * j + 16)), sc[j]);
        }
        const int16x8_t sb = vpaddq_s16(vld1q_s16(a->bsums), vld1q_s16(a->bsums + 8)); /* S_0..S_7, |S| <= 4064 */
        const int32x4_t mm = vpaddq_s32(vmull_s16(vget_low_s16(sb), vget_low_s16(mins)), vmull_high_s16(sb, mins));
        const float d = a->d * dw;
        acc[c][0] = vfmaq_n_f32(acc[c][0], vcvtq_f32_s32(ilo), d);
        acc[c][1] = vfmaq_n_f32(acc[c][1], vcvtq_f32_s32(ihi), d);
        acc[c][2] = vfmaq_n_f32(acc[c][2], vcvtq_f32_s32(mm), -a->d * dmw);
    }
}

/* the 8-lane tree of acc[0..1] plus the 4-lane tree (m0 + m2) + (m1 + m3) of acc[2] */
KA float ka_k4_sum(const float32x4_t acc[3]) {
    const float32x4_t t = vaddq_f32(acc[2], vextq_f32(acc[2], acc[2], 2));
    return ka_hsum8(acc[0], acc[1]) + (vgetq_lane_f32(t, 0) + vgetq_lane_f32(t, 1));
}

KA void ka_q4_k(int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const mr_block_q4_k *x = w;
    float32x4_t acc[MR_GEMM_NC][3];
    KA_COLS for (int c = 0; c < nc; c++) acc[c][0] = acc[c][1] = acc[c][2] = vdupq_n_f32(0);
    for (int i = 0; i < n / MR_QK_K; i++) {
        uint8_t sc[8], m[8];
        ka_k4_scales(x[i].scales, sc, m);
        int8x16_t v[16];
        for (int g = 0; g < 4; g++) { /* 32 bytes: sub-block 2g in the low nibbles, 2g + 1 in the high */
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * g), b1 = vld1q_u8(x[i].qs + 32 * g + 16);
            v[4 * g + 0] = vreinterpretq_s8_u8(vandq_u8(b0, vdupq_n_u8(15)));
            v[4 * g + 1] = vreinterpretq_s8_u8(vandq_u8(b1, vdupq_n_u8(15)));
            v[4 * g + 2] = vreinterpretq_s8_u8(vshrq_n_u8(b0, 4));
            v[4 * g + 3] = vreinterpretq_s8_u8(vshrq_n_u8(b1, 4));
        }
        ka_k4_cols(v, sc, m, ka_h2f(x[i].d), ka_h2f(x[i].dmin), i, y, by, nc, acc);
    }
    KA_COLS for (int c = 0; c < nc; c++) s[c] = ka_k4_sum(acc[c]);
}

KA void ka_q5_k(int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const mr_block_q5_k *x = w;
    float32x4_t acc[MR_GEMM_NC][3];
    KA_COLS for (int c = 0; c < nc; c++) acc[c][0] = acc[c][1] = acc[c][2] = vdupq_n_f32(0);
    const uint8x16_t one = vdupq_n_u8(1);
    for (int i = 0; i < n / MR_QK_K; i++) {
        uint8_t sc[8], m[8];
        ka_k4_scales(x[i].scales, sc, m);
        /* fifth bit of value 64g + l (l < 32) is bit 2g of qh[l], of 64g + 32 + l bit 2g + 1 */
        uint8x16_t h0 = vld1q_u8(x[i].qh), h1 = vld1q_u8(x[i].qh + 16);
        int8x16_t v[16];
        for (int g = 0; g < 4; g++) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * g), b1 = vld1q_u8(x[i].qs + 32 * g + 16);
            v[4 * g + 0] = vreinterpretq_s8_u8(vsliq_n_u8(b0, vandq_u8(h0, one), 4));
            v[4 * g + 1] = vreinterpretq_s8_u8(vsliq_n_u8(b1, vandq_u8(h1, one), 4));
            v[4 * g + 2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h0, 1), one), 4)));
            v[4 * g + 3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b1, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(h1, 1), one), 4)));
            h0 = vshrq_n_u8(h0, 2);
            h1 = vshrq_n_u8(h1, 2);
        }
        ka_k4_cols(v, sc, m, ka_h2f(x[i].d), ka_h2f(x[i].dmin), i, y, by, nc, acc);
    }
    KA_COLS for (int c = 0; c < nc; c++) s[c] = ka_k4_sum(acc[c]);
}

/* 16 signed weight vectors of 16 values (activation order) times 16 int scales (Q6_K, Q2_K):
 * the exact isum in 4 lanes */
KA int32x4_t ka_dot16x16(const int8x16_t v[16], const int8_t *scales, const int8_t *q) {
    int32x4_t isum = vdupq_n_s32(0);
    _Pragma("GCC unroll 16") for (int k = 0; k < 16; k++) isum = vmlaq_n_s32(isum, ka_dot(vdupq_n_s32(0), v[k], vld1q_s8(q + 16 * k)), scales[k]);
    return isum;
}

KA void ka_q6_k(int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const mr_block_q6_k *x = w;
    float acc[MR_GEMM_NC] = {0};
    const uint8x16_t m4 = vdupq_n_u8(15), m2 = vdupq_n_u8(3 << 4);
    const int8x16_t off = vdupq_n_s8(32);
    for (int i = 0; i < n / MR_QK_K; i++) {
        int8x16_t v[16];
        for (int h = 0; h < 2; h++) { /* 128 values from ql[64h..], qh[32h..] (quant_ref.c mr_q6k_values) */
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16), l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
            const uint8x16_t q0 = vld1q_u8(qh), q1 = vld1q_u8(qh + 16);
            uint8x16_t u[8];
            u[0] = vorrq_u8(vandq_u8(l0, m4), vandq_u8(vshlq_n_u8(q0, 4), m2));
            u[1] = vorrq_u8(vandq_u8(l1, m4), vandq_u8(vshlq_n_u8(q1, 4), m2));
            u[2] = vorrq_u8(vandq_u8(l2, m4), vandq_u8(vshlq_n_u8(q0, 2), m2));
            u[3] = vorrq_u8(vandq_u8(l3, m4), vandq_u8(vshlq_n_u8(q1, 2), m2));
            u[4] = vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(q0, m2));
            u[5] = vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(q1, m2));
            u[6] = vorrq_u8(vshrq_n_u8(l2, 4), vandq_u8(vshrq_n_u8(q0, 2), m2));
            u[7] = vorrq_u8(vshrq_n_u8(l3, 4), vandq_u8(vshrq_n_u8(q1, 2), m2));
            for (int k = 0; k < 8; k++) v[8 * h + k] = vsubq_s8(vreinterpretq_s8_u8(u[k]), off);
        }
        const float dw = ka_h2f(x[i].d);
        KA_COLS for (int c = 0; c < nc; c++) {
            const mr_block_q8_k *a = KA_ACT(mr_block_q8_k, y, by, c) + i;
            /* (q - 32) . y summed exactly: the AVX2 kernel's q . y - 32 * bsum */
            const int32_t isum = vaddvq_s32(ka_dot16x16(v, x[i].scales, a->qs));
            acc[c] = __builtin_fmaf(dw * a->d, (float)isum, acc[c]);
        }
    }
    KA_COLS for (int c = 0; c < nc; c++) s[c] = acc[c];
}

KA void ka_q2_k(int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const mr_block_q2_k *x = w;
    float acc[MR_GEMM_NC] = {0};
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int i = 0; i < n / MR_QK_K; i++) {
        /* vector k = 8h + 2(shift/2) + half holds values 16k..16k+15: bits shift of q[32h + 16 half + l] */
        int8x16_t v[16];
        for (int h = 0; h < 2; h++) {
            uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * h), b1 = vld1q_u8(x[i].qs + 32 * h + 16);
            for (int sh = 0; sh < 4; sh++) {
                v[8 * h + 2 * sh] = vreinterpretq_s8_u8(vandq_u8(b0, m3));
                v[8 * h + 2 * sh + 1] = vreinterpretq_s8_u8(vandq_u8(b1, m3));
                b0 = vshrq_n_u8(b0, 2);
                b1 = vshrq_n_u8(b1, 2);
            }
        }
        const uint8x16_t scb = vld1q_u8(x[i].scales);
        int8_t sc[16];
        vst1q_s8(sc, vreinterpretq_s8_u8(vandq_u8(scb, vdupq_n_u8(15))));
        const uint8x16_t mn = vshrq_n_u8(scb, 4);
        const int16x8_t mlo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mn))), mhi = vreinterpretq_s16_u16(vmovl_high_u8(mn));
        const float dw = ka_h2f(x[i].d), dmw = ka_h2f(x[i].dmin);
        KA_COLS for (int c = 0; c < nc; c++) {
            const mr_block_q8_k *a = KA_ACT(mr_block_q8_k, y, by, c) + i;
            const int32x4_t isum = ka_dot16x16(v, sc, a->qs);
            const int16x8_t b0 = vld1q_s16(a->bsums), b1 = vld1q_s16(a->bsums + 8);
            int32x4_t mm = vmull_s16(vget_low_s16(b0), vget_low_s16(mlo));
            mm = vmlal_high_s16(mm, b0, mlo);
            mm = vmlal_s16(mm, vget_low_s16(b1), vget_low_s16(mhi));
            mm = vmlal_high_s16(mm, b1, mhi);
            acc[c] = ka_k_acc(acc[c], dw, dmw, a->d, vaddvq_s32(isum), vaddvq_s32(mm));
        }
    }
    KA_COLS for (int c = 0; c < nc; c++) s[c] = acc[c];
}

/* ---- i-quants with Q8_K activations ----
 * Per 32 values: weights decoded to signed bytes, exact dot times the integer sub-block scale into
 * an int32x4 per super-block; IQ2_XXS then one fused multiply-add of those 4 lanes with d * dy per
 * super-block (lanes added at the end), IQ4_XS and IQ3_S the AVX2 block sums below. */

/* the exact int32 lanes of sum_ib ls[ib] * (32 weights v[2ib], v[2ib + 1] . 32 activations at q + 32 ib) */
KA int32x4_t ka_isum8(const int8x16_t v[16], const int ls[8], const int8_t *q) {
    int32x4_t isum = vdupq_n_s32(0);
    _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) isum = vmlaq_n_s32(isum, ka_dot32(v[2 * ib], v[2 * ib + 1], q + 32 * ib), ls[ib]);
    return isum;
}

/* ka_isum8's total, lanes left open (ka_dot32_total; |w| <= 127) */
KA int32x4_t ka_isum8_total(const int8x16_t v[16], const int ls[8], const int8_t *q) {
    int32x4_t isum = vdupq_n_s32(0);
    _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) isum = vmlaq_n_s32(isum, ka_dot32_total(v[2 * ib], v[2 * ib + 1], q + 32 * ib), ls[ib]);
    return isum;
}

/* IQ4_XS and IQ3_S: the AVX2 kernels' numerics (fp4_avx2.c, quant_iq_avx2.c), so NEON, dotprod and
 * AVX2 give the same bits: per row and column, acc = 0, then per super-block i in order
 *     isum_i = sum_ib ls_ib * (w_ib . y_ib) (exact int32), acc = fmaf(d_i * dy_i, (float)isum_i, acc)
 * and the result is acc. Each super-block's weights are decoded once (16 vectors, the sub-block
 * scales) for all the columns of a call: 1 (vec_dot), 4, or up to MR_GEMM_NC (the GEMM, one row at
 * a time, so decoding is shared by 32 columns). */
typedef void (*ka_sb_dec_fn)(const void *blk, int8x16_t v[16], int ls[8], float *d);

/* IQ4_XS: IQ4_NL codes, a 6-bit scale l - 32 per 32 values */
KA void ka_dec_iq4_xs(const void *blk, int8x16_t v[16], int ls[8], float *d) {
    const mr_block_iq4_xs *x = blk;
    const int8x16_t levels = vld1q_s8(mr_kvalues_iq4nl);
    _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {
        const uint8x16_t b = vld1q_u8(x->qs + 16 * ib);
        v[2 * ib] = vqtbl1q_s8(levels, vandq_u8(b, vdupq_n_u8(15)));
        v[2 * ib + 1] = vqtbl1q_s8(levels, vshrq_n_u8(b, 4));
        ls[ib] = (((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 15) | (((x->scales_h >> (2 * ib)) & 3) << 4)) - 32;
    }
    *d = ka_h2f(x->d);
}

/* IQ3_S: per 8 values two 9-bit indices into iq3s_grid (4 magnitudes each), explicit sign bytes,
 * a 4-bit scale per 32 values used as 2 * ls + 1. The 8 indices of 32 values, qs[l] | (bit l of
 * qh) << 8, are formed in one vector (bit l moved to bit 8 by a left shift of 8 - l), so that each
 * lookup is a load and the address arithmetic of the scalar formula is done 8 at a time. */
static const int16_t ka_iq3s_shift[8] = {8, 7, 6, 5, 4, 3, 2, 1};
KA void ka_dec_iq3_s(const void *blk, int8x16_t v[16], int ls[8], float *d) {
    const mr_block_iq3_s *x = blk;
    for (int ib = 0; ib < 8; ib++) {
        const uint16x8_t hb = vshlq_u16(vdupq_n_u16(x->qh[ib]), vld1q_s16(ka_iq3s_shift));
        uint16_t idx[8];
        vst1q_u16(idx, vorrq_u16(vmovl_u8(vld1_u8(x->qs + 8 * ib)), vandq_u16(hb, vdupq_n_u16(256))));
        uint32_t g[8];
        _Pragma("GCC unroll 8") for (int l = 0; l < 8; l++) g[l] = mr_iq3s_grid[idx[l]];
        uint8x16_t m0, m1;
        ka_sign_masks32(x->signs + 4 * ib, &m0, &m1);
        v[2 * ib] = ka_apply_sign(vreinterpretq_u8_u32(vld1q_u32(g)), m0);
        v[2 * ib + 1] = ka_apply_sign(vreinterpretq_u8_u32(vld1q_u32(g + 4)), m1);
        ls[ib] = 2 * ((x->scales[ib / 2] >> (4 * (ib & 1))) & 15) + 1;
    }
    *d = ka_h2f(x->d);
}

KA void ka_sb(ka_sb_dec_fn dec, size_t bsz, int n, float *s, const void *w, const void *y, size_t by, int nc) {
    float acc[MR_GEMM_NC] = {0};
    for (int i = 0; i < n / MR_QK_K; i++) {
        int8x16_t v[16];
        int ls[8];
        float dw;
        dec((const uint8_t *)w + (size_t)i * bsz, v, ls, &dw);
        KA_COLS for (int c = 0; c < nc; c++) {
            const mr_block_q8_k *a = KA_ACT(mr_block_q8_k, y, by, c) + i;
            acc[c] = __builtin_fmaf(dw * a->d, (float)vaddvq_s32(ka_isum8_total(v, ls, a->qs)), acc[c]);
        }
    }
    KA_COLS for (int c = 0; c < nc; c++) s[c] = acc[c];
}

/* IQ3_S repacked (quant_simd.h mr_repack_kern, one row per group): the grid lookups and signs done
 * once at load. Each weight w (odd, -15..15) is stored as the nibble u = (w + 15) / 2, so
 * w . y = 2 u . y - 15 sum(y), sum(y) from the Q8_K bsums; per super-block the exact isum of the
 * numerics above, so the same bits as vec_dot. 144 bytes per 256 values (110 plain). */
typedef struct {
    uint8_t q[8][16];        /* sub-block ib: low nibbles values 0..15, high nibbles 16..31 */
    int8_t ls[8];            /* 2 l + 1 */
    uint16_t d;
    uint8_t pad[6];
} ka_iq3s_rp;
_Static_assert(sizeof(ka_iq3s_rp) == 144, "repacked iq3_s super-block");

KA void ka_iq3s_pack(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    const int64_t nb = cols / MR_QK_K;
    const mr_block_iq3_s *w = src;
    ka_iq3s_rp *out = dst;
    for (int64_t i = g0 * nb; i < g1 * nb; i++) {
        int8x16_t v[16];
        int ls[8];
        float d;
        ka_dec_iq3_s(&w[i], v, ls, &d);
        ka_iq3s_rp *o = &out[i];
        memset(o, 0, sizeof *o);
        for (int ib = 0; ib < 8; ib++) {
            const uint8x16_t lo = vreinterpretq_u8_s8(vshrq_n_s8(vaddq_s8(v[2 * ib], vdupq_n_s8(15)), 1));
            const uint8x16_t hi = vreinterpretq_u8_s8(vshrq_n_s8(vaddq_s8(v[2 * ib + 1], vdupq_n_s8(15)), 1));
            vst1q_u8(o->q[ib], vsliq_n_u8(lo, hi, 4));
            o->ls[ib] = (int8_t)ls[ib];
        }
        o->d = w[i].d;
    }
}

/* ka_isum8_total with the 8 scales as int32 lanes l0 (0..3), l1 (4..7): multiplied by lane, no
 * scalar copies */
KA int32x4_t ka_isum8_lanes(const int8x16_t v[16], int32x4_t l0, int32x4_t l1, const int8_t *q) {
    int32x4_t s = vmulq_laneq_s32(ka_dot32_total(v[0], v[1], q), l0, 0);
    s = vmlaq_laneq_s32(s, ka_dot32_total(v[2], v[3], q + 32), l0, 1);
    s = vmlaq_laneq_s32(s, ka_dot32_total(v[4], v[5], q + 64), l0, 2);
    s = vmlaq_laneq_s32(s, ka_dot32_total(v[6], v[7], q + 96), l0, 3);
    s = vmlaq_laneq_s32(s, ka_dot32_total(v[8], v[9], q + 128), l1, 0);
    s = vmlaq_laneq_s32(s, ka_dot32_total(v[10], v[11], q + 160), l1, 1);
    s = vmlaq_laneq_s32(s, ka_dot32_total(v[12], v[13], q + 192), l1, 2);
    return vmlaq_laneq_s32(s, ka_dot32_total(v[14], v[15], q + 224), l1, 3);
}

/* one row of repacked super-blocks x nc columns (act[c]: Q8_K rows) */
KA void ka_iq3s_rp_row(const ka_iq3s_rp *w, int nb, const void *const *act, float *const *y, int nc) {
    float acc[MR_RP_MAX_NC] = {0};
    const uint8x16_t m4 = vdupq_n_u8(15);
    for (int i = 0; i < nb; i++) {
        const ka_iq3s_rp *b = &w[i];
        int8x16_t u[16];
        _Pragma("GCC unroll 8") for (int ib = 0; ib < 8; ib++) {
            const uint8x16_t p = vld1q_u8(b->q[ib]);
            u[2 * ib] = vreinterpretq_s8_u8(vandq_u8(p, m4));
            u[2 * ib + 1] = vreinterpretq_s8_u8(vshrq_n_u8(p, 4));
        }
        const int16x8_t lsv = vmovl_s8(vld1_s8(b->ls));
        const int32x4_t l0 = vmovl_s16(vget_low_s16(lsv)), l1 = vmovl_high_s16(lsv);
        const float dw = ka_h2f(b->d);
        KA_COLS for (int c = 0; c < nc; c++) {
            const mr_block_q8_k *a = (const mr_block_q8_k *)act[c] + i;
            const int32_t uy = vaddvq_s32(ka_isum8_lanes(u, l0, l1, a->qs));
            /* sum_ib ls_ib (S_2ib + S_2ib+1): |S| <= 4064, products within int32 */
            const int16x8_t sb = vpaddq_s16(vld1q_s16(a->bsums), vld1q_s16(a->bsums + 8));
            const int32_t sy = vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(sb), vget_low_s16(lsv)), sb, lsv));
            acc[c] = __builtin_fmaf(dw * a->d, (float)(2 * uy - 15 * sy), acc[c]);
        }
    }
    KA_COLS for (int c = 0; c < nc; c++) y[c][0] = acc[c];
}

KA void ka_iq3s_group(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    ka_iq3s_rp_row(w, (int)(cols / MR_QK_K), act, y, nc);
}

/* IQ2_XXS: per 32 values 4 byte indices into iq2xxs_grid (8 magnitudes each), then 4 x 7 sign bits
 * (even parity gives the 8th: ksigns64 holds the byte masks) and the scale in the top 4 bits */
KA void ka_iq2_xxs(int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const mr_block_iq2_xxs *x = w;
    float32x4_t accv[MR_GEMM_NC];
    KA_COLS for (int c = 0; c < nc; c++) accv[c] = vdupq_n_f32(0);
    for (int i = 0; i < n / MR_QK_K; i++) {
        int8x16_t v[16];
        int ls[8];
        for (int ib = 0; ib < 8; ib++) {
            uint32_t a0, a1;
            memcpy(&a0, x[i].qs + 4 * ib, 4);
            memcpy(&a1, x[i].qs + 4 * ib + 2, 4);
            for (int h = 0; h < 2; h++) {
                const uint64x2_t g = {mr_iq2xxs_grid[(a0 >> (16 * h)) & 255], mr_iq2xxs_grid[(a0 >> (16 * h + 8)) & 255]};
                const uint64x2_t m = {mr_ksigns64[(a1 >> (14 * h)) & 127], mr_ksigns64[(a1 >> (14 * h + 7)) & 127]};
                v[2 * ib + h] = ka_apply_sign(vreinterpretq_u8_u64(g), vreinterpretq_u8_u64(m));
            }
            ls[ib] = 2 * (int)(a1 >> 28) + 1;
        }
        const float dw = ka_h2f(x[i].d);
        KA_COLS for (int c = 0; c < nc; c++) {
            const mr_block_q8_k *a = KA_ACT(mr_block_q8_k, y, by, c) + i;
            const int32x4_t isum = ka_isum8(v, ls, a->qs);
            accv[c] = vfmaq_n_f32(accv[c], vcvtq_f32_s32(isum), dw * a->d);
        }
    }
    KA_COLS for (int c = 0; c < nc; c++) s[c] = 0.125f * vaddvq_f32(accv[c]);
}

/* ---- entry points and the tables of the including file's ISA ---- */
#define KA_CAT2(a, b) a##b
#define KA_CAT(a, b) KA_CAT2(a, b)
#define KA_ENTRIES(T, body)                                                                             \
    static void KA_CAT(ka_vd_##T##_, KA_SUFFIX)(int n, float *s, const void *w, const void *y) {       \
        body(n, s, w, y, 0, 1);                                                                         \
    }                                                                                                   \
    static void KA_CAT(ka_vd4_##T##_, KA_SUFFIX)(int n, float *s, const void *w, const void *y, size_t by) { \
        body(n, s, w, y, by, 4);                                                                        \
    }
#define KA_BLK32(name, kind, T)                                                                         \
    KA void ka_##name(int n, float *s, const void *w, const void *y, size_t by, int nc) {              \
        ka_blk32(kind, sizeof(T), n, s, w, y, by, nc);                                                  \
    }
KA_BLK32(q8_0, KA_Q8_0, mr_block_q8_0)
/* the block-sum types: dot, dot4 and gemm */
#define KA_BS32(name, kind, T)                                                                          \
    KA void ka_##name(int n, float *s, const void *w, const void *y, size_t by, int nc) {              \
        ka_bs32(kind, sizeof(T), n, s, w, y, by, nc);                                                   \
    }                                                                                                   \
    static void KA_CAT(ka_gemm_##name##_, KA_SUFFIX)(int n, const void *w, size_t w_row, int nr, const void *y, \
                                                     size_t by, int nc, float *s, size_t s_col) {      \
        ka_bs32_gemm(kind, sizeof(T), n, w, w_row, nr, y, by, nc, s, s_col);                            \
    }
KA_BS32(q4_0, KA_Q4_0, mr_block_q4_0)
KA_BS32(iq4_nl, KA_IQ4_NL, mr_block_iq4_nl)
KA_BS32(mxfp4, KA_MXFP4, mr_block_mxfp4)

KA_ENTRIES(f32, ka_f32)
KA_ENTRIES(f16, ka_f16)
KA_ENTRIES(q8_0, ka_q8_0)
KA_ENTRIES(q4_0, ka_q4_0)
KA_ENTRIES(iq4_nl, ka_iq4_nl)
KA_ENTRIES(mxfp4, ka_mxfp4)
KA_ENTRIES(q2_k, ka_q2_k)
KA_ENTRIES(q4_k, ka_q4_k)
KA_ENTRIES(q5_k, ka_q5_k)
KA_ENTRIES(q6_k, ka_q6_k)
#define KA_SB(name, T)                                                                                  \
    KA void ka_##name(int n, float *s, const void *w, const void *y, size_t by, int nc) {              \
        ka_sb(ka_dec_##name, sizeof(T), n, s, w, y, by, nc);                                            \
    }
KA_SB(iq4_xs, mr_block_iq4_xs)
KA_SB(iq3_s, mr_block_iq3_s)
/* ---- Q2_0: the scalar reference's numerics (quant_ref.c mr_vec_dot_q2_0), so every ISA gives its bits:
 * per 64-value block the exact int32 sums isum0, isum1 of its two Q8_0 blocks, then
 * part = fma(dy0, isum0, 0), part = fma(dy1, isum1, part), acc = fma(dw, part, acc).
 * Decoding: byte j holds values 4j..4j+3 at bits 0, 2, 4, 6; a table lookup repeats each byte 4
 * times and a per-byte shift right by 0, 2, 4, 6 brings each value's code to bits 0-1. */
static const uint8_t ka_q2_0_rep[4][16] = {
    {0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}, {4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7},
    {8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11}, {12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15},
};
static const int8_t ka_q2_0_shr[16] = {0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6, 0, -2, -4, -6};

KA void ka_q2_0(int n, float *s, const void *w, const void *y, size_t by, int nc) {
    const mr_block_q2_0 *x = w;
    const int8x16_t sh = vld1q_s8(ka_q2_0_shr);
    float acc1 = 0.0f;
    float32x4_t acc4 = vdupq_n_f32(0);
    for (int i = 0; i < n / MR_QK2_0; i++) {
        const uint8x16_t q = vld1q_u8(x[i].qs);
        int8x16_t wq[4]; /* values 16g .. 16g+15, code - 1 */
        for (int g = 0; g < 4; g++) {
            const uint8x16_t c = vandq_u8(vshlq_u8(vqtbl1q_u8(q, vld1q_u8(ka_q2_0_rep[g])), sh), vdupq_n_u8(3));
            wq[g] = vsubq_s8(vreinterpretq_s8_u8(c), vdupq_n_s8(1));
        }
        const float dw = ka_h2f(x[i].d);
        int32x4_t p0[4], p1[4];
        KA_COLS for (int c = 0; c < nc; c++) {
            const mr_block_q8_0 *a = KA_ACT(mr_block_q8_0, y, by, c) + 2 * i;
            p0[c] = ka_dot32_total(wq[0], wq[1], a[0].qs);
            p1[c] = ka_dot32_total(wq[2], wq[3], a[1].qs);
        }
        if (nc == 1) {
            const mr_block_q8_0 *a = KA_ACT(mr_block_q8_0, y, by, 0) + 2 * i;
            float part = __builtin_fmaf(ka_h2f(a[0].d), (float)vaddvq_s32(p0[0]), 0.0f);
            part = __builtin_fmaf(ka_h2f(a[1].d), (float)vaddvq_s32(p1[0]), part);
            acc1 = __builtin_fmaf(dw, part, acc1);
            continue;
        }
        const mr_block_q8_0 *a0 = KA_ACT(mr_block_q8_0, y, by, 0) + 2 * i, *a1 = KA_ACT(mr_block_q8_0, y, by, 1) + 2 * i,
                            *a2 = KA_ACT(mr_block_q8_0, y, by, 2) + 2 * i, *a3 = KA_ACT(mr_block_q8_0, y, by, 3) + 2 * i;
        const float32x4_t dy0 = ka_h2f_4(&a0[0].d, &a1[0].d, &a2[0].d, &a3[0].d);
        const float32x4_t dy1 = ka_h2f_4(&a0[1].d, &a1[1].d, &a2[1].d, &a3[1].d);
        float32x4_t part = vfmaq_f32(vdupq_n_f32(0), dy0, vcvtq_f32_s32(ka_sum4x4(p0[0], p0[1], p0[2], p0[3])));
        part = vfmaq_f32(part, dy1, vcvtq_f32_s32(ka_sum4x4(p1[0], p1[1], p1[2], p1[3])));
        acc4 = vfmaq_n_f32(acc4, part, dw);
    }
    if (nc == 1) s[0] = acc1;
    else vst1q_f32(s, acc4);
}
KA_ENTRIES(q2_0, ka_q2_0)

/* mr_gemm_fn from a kernel body of up to MR_GEMM_NC columns: row by row, so each weight block is
 * decoded once for all nc columns (for the types whose decoding costs more than the accumulators
 * the column loop then keeps in memory: bench/aarch64_insn.sh) */
#define KA_ROW_GEMM(name)                                                                              \
    static void KA_CAT(ka_gemm_##name##_, KA_SUFFIX)(int n, const void *w, size_t w_row, int nr, const void *y, \
                                                     size_t by, int nc, float *s, size_t s_col) {      \
        for (int r = 0; r < nr; r++) {                                                                  \
            float t[MR_GEMM_NC];                                                                        \
            ka_##name(n, t, (const uint8_t *)w + (size_t)r * w_row, y, by, nc);                         \
            for (int c = 0; c < nc; c++) s[(size_t)c * s_col + r] = t[c];                               \
        }                                                                                               \
    }
static void KA_CAT(ka_iq3s_pack_, KA_SUFFIX)(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst) {
    ka_iq3s_pack(src, cols, g0, g1, dst);
}
static void KA_CAT(ka_iq3s_group_, KA_SUFFIX)(const void *w, int64_t cols, const void *const *act, float *const *y, int nc) {
    ka_iq3s_group(w, cols, act, y, nc);
}
static const mr_repack_kern KA_CAT(ka_rp_iq3_s_, KA_SUFFIX) = {1, sizeof(ka_iq3s_rp) / 8, KA_CAT(ka_iq3s_pack_, KA_SUFFIX),
                                                               KA_CAT(ka_iq3s_group_, KA_SUFFIX), MR_RP_MAX_NC, 0};
KA_ROW_GEMM(iq4_xs)
KA_ROW_GEMM(iq3_s)
KA_ROW_GEMM(iq2_xxs)
KA_ROW_GEMM(q2_k)
KA_ROW_GEMM(q4_k)
KA_ROW_GEMM(q5_k)
KA_ROW_GEMM(q6_k)
KA_ENTRIES(iq4_xs, ka_iq4_xs)
KA_ENTRIES(iq3_s, ka_iq3_s)
KA_ENTRIES(iq2_xxs, ka_iq2_xxs)

/* the designated initializers of this ISA's kernel table (quant_simd.h mr_kern): dot and dot4, and
 * for Q8_0 (weights and partner) the activation quantizer Q8_0_FF (NULL: the one of a lower ISA) */
#define KA_K(T) {.dot = KA_CAT(ka_vd_##T##_, KA_SUFFIX), .dot4 = KA_CAT(ka_vd4_##T##_, KA_SUFFIX)}
#define KA_KG(T) {.dot = KA_CAT(ka_vd_##T##_, KA_SUFFIX), .dot4 = KA_CAT(ka_vd4_##T##_, KA_SUFFIX), .gemm = KA_CAT(ka_gemm_##T##_, KA_SUFFIX)}
#define KA_TABLE(Q8_0_FF)                                                                               \
    [MR_TYPE_F32] = KA_K(f32), [MR_TYPE_F16] = KA_K(f16),                                               \
    [MR_TYPE_Q8_0] = {.dot = KA_CAT(ka_vd_q8_0_, KA_SUFFIX), .dot4 = KA_CAT(ka_vd4_q8_0_, KA_SUFFIX), .from_float = Q8_0_FF}, \
    [MR_TYPE_Q4_0] = KA_KG(q4_0), [MR_TYPE_IQ4_NL] = KA_KG(iq4_nl), [MR_TYPE_MXFP4] = KA_KG(mxfp4),       \
    [MR_TYPE_Q2_K] = KA_KG(q2_k), [MR_TYPE_Q4_K] = KA_KG(q4_k), [MR_TYPE_Q5_K] = KA_KG(q5_k),            \
    [MR_TYPE_Q6_K] = KA_KG(q6_k), [MR_TYPE_IQ4_XS] = KA_KG(iq4_xs), [MR_TYPE_IQ3_S] = {.dot = KA_CAT(ka_vd_iq3_s_, KA_SUFFIX), .dot4 = KA_CAT(ka_vd4_iq3_s_, KA_SUFFIX), .gemm = KA_CAT(ka_gemm_iq3_s_, KA_SUFFIX), .rp = &KA_CAT(ka_rp_iq3_s_, KA_SUFFIX)},        \
    [MR_TYPE_IQ2_XXS] = KA_KG(iq2_xxs), [MR_TYPE_Q2_0] = KA_K(q2_0)

#endif
