/* Scalar reference kernels of the i-quants (IQ1_S .. IQ4_XS) and the FP4 types (MXFP4, NVFP4).
 *
 * Dequantization is bit-for-bit ggml's dequantize_row_* (ggml-quants.c): every value is computed
 * with the same float operations in the same order (scale products first, then one multiply by
 * the integer level; a sign flip is exact). The dot products follow ggml's generic
 * ggml_vec_dot_*_q8_K / _q8_0 (ggml-cpu/quants.c): exact integer sums per scale group, then the
 * same float accumulation, so they also serve as the reference the SIMD kernels are tested on.
 *
 * Most types are decoded in two steps shared by dequant and vec_dot: unpack one block into signed
 * integer levels q[] (grid value times sign) plus its small integer scales, then scale. */
#include "quant/quant_impl.h"
#include "quant/quant_blocks_iq.h"
#include "quant/iq_grids.h"
#include "base/base.h"

#include <math.h>
#include <string.h>

static inline uint32_t rd32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }

/* byte j of a packed grid entry */
static inline int gbyte(uint64_t g, int j) { return (int)((g >> (8 * j)) & 0xff); }

/* 8 grid magnitudes with 8 sign bits applied (bit j set: value j negative) */
static inline void put8(int8_t *q, uint64_t grid, unsigned signs) {
    for (int j = 0; j < 8; j++) {
        int v = gbyte(grid, j);
        q[j] = (int8_t)((signs >> j) & 1 ? -v : v);
    }
}

static inline int dot_i8(const int8_t *a, const int8_t *b, int n) {
    int s = 0;
    for (int j = 0; j < n; j++) s += a[j] * b[j];
    return s;
}

/* dst = d * (0.5 + ls[g]) * mul * q per group of len values (ggml's IQ2 / IQ3_XXS operation order) */
static inline void dequant_groups(float *dst, const int8_t *q, const int *ls, int n_groups, int len, float d, float mul) {
    for (int g = 0; g < n_groups; g++) {
        const float db = d * (0.5f + (float)ls[g]) * mul;
        for (int j = 0; j < len; j++) dst[len * g + j] = db * (float)q[len * g + j];
    }
}

/* sum over n_groups groups of len values: (2 ls[g] + 1) * (q . y) of the group (exact in int32) */
static inline int32_t dot_groups(const int8_t *q, const int8_t *y, const int *ls, int n_groups, int len) {
    int32_t s = 0;
    for (int g = 0; g < n_groups; g++) s += dot_i8(q + len * g, y + len * g, len) * (2 * ls[g] + 1);
    return s;
}

/* ---------------------------------------------------------------- IQ2_XXS
 * per 32 values: uint32 a0 = 4 grid indices (bytes), uint32 a1 = 4x7 sign bits | scale << 28 */
static void unpack_iq2_xxs(const mr_block_iq2_xxs *b, int8_t q[MR_QK_K], int ls[8]) {
    for (int ib = 0; ib < 8; ib++) {
        uint32_t a0 = rd32(b->qs + 4 * ib), a1 = rd32(b->qs + 4 * ib + 2);
        ls[ib] = (int)(a1 >> 28);
        for (int l = 0; l < 4; l++)
            put8(q + 32 * ib + 8 * l, mr_iq2xxs_grid[(a0 >> (8 * l)) & 0xff],
                 mr_ksigns_iq2xs[(a1 >> (7 * l)) & 127]);
    }
}

void mr_dequant_iq2_xxs(const void *src, float *dst, int64_t k) {
    const mr_block_iq2_xxs *x = src;
    int8_t q[MR_QK_K];
    int ls[8];
    for (int64_t i = 0; i < k / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d);
        unpack_iq2_xxs(&x[i], q, ls);
        dequant_groups(dst, q, ls, 8, 32, d, 0.25f);
        dst += MR_QK_K;
    }
}

void mr_vec_dot_iq2_xxs(int n, float *s, const void *w, const void *y) {
    const mr_block_iq2_xxs *x = w;
    const mr_block_q8_k *a = y;
    int8_t q[MR_QK_K];
    int ls[8];
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d) * a[i].d;
        unpack_iq2_xxs(&x[i], q, ls);
        const int32_t bsum = dot_groups(q, a[i].qs, ls, 8, 32);
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

/* ---------------------------------------------------------------- IQ2_XS
 * per 8 values: uint16 = 9-bit grid index | 7 sign bits << 9; a 4-bit scale per 16 values */
static void unpack_iq2_xs(const mr_block_iq2_xs *b, int8_t q[MR_QK_K], int ls[16]) {
    for (int g = 0; g < 32; g++) {
        uint16_t v = b->qs[g];
        put8(q + 8 * g, mr_iq2xs_grid[v & 511], mr_ksigns_iq2xs[v >> 9]);
    }
    for (int ib = 0; ib < 8; ib++) {
        ls[2 * ib] = b->scales[ib] & 0xf;
        ls[2 * ib + 1] = b->scales[ib] >> 4;
    }
}

void mr_dequant_iq2_xs(const void *src, float *dst, int64_t k) {
    const mr_block_iq2_xs *x = src;
    int8_t q[MR_QK_K];
    int ls[16];
    for (int64_t i = 0; i < k / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d);
        unpack_iq2_xs(&x[i], q, ls);
        dequant_groups(dst, q, ls, 16, 16, d, 0.25f);
        dst += MR_QK_K;
    }
}

void mr_vec_dot_iq2_xs(int n, float *s, const void *w, const void *y) {
    const mr_block_iq2_xs *x = w;
    const mr_block_q8_k *a = y;
    int8_t q[MR_QK_K];
    int ls[16];
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d) * a[i].d;
        unpack_iq2_xs(&x[i], q, ls);
        const int32_t bsum = dot_groups(q, a[i].qs, ls, 16, 16);
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

/* ---------------------------------------------------------------- IQ2_S
 * per 8 values: 10-bit grid index (qs byte | 2 bits of qh[ib32]), an explicit sign byte */
static void unpack_iq2_s(const mr_block_iq2_s *b, int8_t q[MR_QK_K], int ls[16]) {
    const uint8_t *signs = b->qs + MR_QK_K / 8;
    for (int ib = 0; ib < 8; ib++) {
        for (int l = 0; l < 4; l++) {
            int idx = b->qs[4 * ib + l] | ((b->qh[ib] << (8 - 2 * l)) & 0x300);
            put8(q + 32 * ib + 8 * l, mr_iq2s_grid[idx], signs[4 * ib + l]);
        }
        ls[2 * ib] = b->scales[ib] & 0xf;
        ls[2 * ib + 1] = b->scales[ib] >> 4;
    }
}

void mr_dequant_iq2_s(const void *src, float *dst, int64_t k) {
    const mr_block_iq2_s *x = src;
    int8_t q[MR_QK_K];
    int ls[16];
    for (int64_t i = 0; i < k / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d);
        unpack_iq2_s(&x[i], q, ls);
        dequant_groups(dst, q, ls, 16, 16, d, 0.25f);
        dst += MR_QK_K;
    }
}

void mr_vec_dot_iq2_s(int n, float *s, const void *w, const void *y) {
    const mr_block_iq2_s *x = w;
    const mr_block_q8_k *a = y;
    int8_t q[MR_QK_K];
    int ls[16];
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d) * a[i].d;
        unpack_iq2_s(&x[i], q, ls);
        const int32_t bsum = dot_groups(q, a[i].qs, ls, 16, 16);
        sumf += d * (float)bsum;
    }
    *s = 0.125f * sumf;
}

/* ---------------------------------------------------------------- IQ3_XXS
 * qs[0..63]: 8-bit indices into iq3xxs_grid (4 values each); then per 32 values a uint32 of
 * 4x7 sign bits | scale << 28 */
static void unpack_iq3_xxs(const mr_block_iq3_xxs *b, int8_t q[MR_QK_K], int ls[8]) {
    const uint8_t *idx = b->qs;
    for (int ib = 0; ib < 8; ib++) {
        uint32_t a = rd32(b->qs + MR_QK_K / 4 + 4 * ib);
        ls[ib] = (int)(a >> 28);
        for (int l = 0; l < 4; l++) {
            uint64_t g = (uint64_t)mr_iq3xxs_grid[idx[8 * ib + 2 * l]] |
                         (uint64_t)mr_iq3xxs_grid[idx[8 * ib + 2 * l + 1]] << 32;
            put8(q + 32 * ib + 8 * l, g, mr_ksigns_iq2xs[(a >> (7 * l)) & 127]);
        }
    }
}

void mr_dequant_iq3_xxs(const void *src, float *dst, int64_t k) {
    const mr_block_iq3_xxs *x = src;
    int8_t q[MR_QK_K];
    int ls[8];
    for (int64_t i = 0; i < k / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d);
        unpack_iq3_xxs(&x[i], q, ls);
        dequant_groups(dst, q, ls, 8, 32, d, 0.5f);
        dst += MR_QK_K;
    }
}

void mr_vec_dot_iq3_xxs(int n, float *s, const void *w, const void *y) {
    const mr_block_iq3_xxs *x = w;
    const mr_block_q8_k *a = y;
    int8_t q[MR_QK_K];
    int ls[8];
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d) * a[i].d;
        unpack_iq3_xxs(&x[i], q, ls);
        const int32_t bsum = dot_groups(q, a[i].qs, ls, 8, 32);
        sumf += d * (float)bsum;
    }
    *s = 0.25f * sumf;
}

/* ---------------------------------------------------------------- IQ3_S
 * per 4 values a 9-bit index into iq3s_grid: qs byte | bit of qh[ib32]; explicit sign bytes;
 * a 4-bit scale per 32 values (two per scales byte) */
static void unpack_iq3_s(const mr_block_iq3_s *b, int8_t q[MR_QK_K], int ls[8]) {
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *qs = b->qs + 8 * ib;
        const int qh = b->qh[ib];
        for (int l = 0; l < 4; l++) {
            int i1 = qs[2 * l] | ((qh << (8 - 2 * l)) & 256);
            int i2 = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256);
            uint64_t g = (uint64_t)mr_iq3s_grid[i1] | (uint64_t)mr_iq3s_grid[i2] << 32;
            put8(q + 32 * ib + 8 * l, g, b->signs[4 * ib + l]);
        }
        ls[ib] = (b->scales[ib / 2] >> (4 * (ib & 1))) & 0xf;
    }
}

void mr_dequant_iq3_s(const void *src, float *dst, int64_t k) {
    const mr_block_iq3_s *x = src;
    int8_t q[MR_QK_K];
    int ls[8];
    for (int64_t i = 0; i < k / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d);
        unpack_iq3_s(&x[i], q, ls);
        for (int ib = 0; ib < 8; ib++) {
            const float db = d * (float)(1 + 2 * ls[ib]);
            for (int j = 0; j < 32; j++) dst[32 * ib + j] = db * (float)q[32 * ib + j];
        }
        dst += MR_QK_K;
    }
}

void mr_vec_dot_iq3_s(int n, float *s, const void *w, const void *y) {
    const mr_block_iq3_s *x = w;
    const mr_block_q8_k *a = y;
    int8_t q[MR_QK_K];
    int ls[8];
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d) * a[i].d;
        unpack_iq3_s(&x[i], q, ls);
        const int32_t bsum = dot_groups(q, a[i].qs, ls, 8, 32);
        sumf += d * (float)bsum;
    }
    *s = sumf;
}

/* ---------------------------------------------------------------- IQ1_S
 * per 8 values an 11-bit index into iq1s_grid (values -1, 0, 1): qs byte | 3 bits of qh[ib32];
 * qh[ib32] bits 12..14 = scale, bit 15 = sign of the +-1/8 shift added to the grid values */
static void unpack_iq1_s(const mr_block_iq1_s *b, int8_t q[MR_QK_K], int ls[8], int neg[8]) {
    for (int ib = 0; ib < 8; ib++) {
        const unsigned qh = b->qh[ib];
        for (int l = 0; l < 4; l++) {
            uint64_t g = mr_iq1s_grid[b->qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8)];
            for (int j = 0; j < 8; j++) q[32 * ib + 8 * l + j] = (int8_t)gbyte(g, j);
        }
        ls[ib] = (int)((qh >> 12) & 7);
        neg[ib] = (qh & 0x8000) != 0;
    }
}

void mr_dequant_iq1_s(const void *src, float *dst, int64_t k) {
    const mr_block_iq1_s *x = src;
    int8_t q[MR_QK_K];
    int ls[8], neg[8];
    for (int64_t i = 0; i < k / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d);
        unpack_iq1_s(&x[i], q, ls, neg);
        for (int ib = 0; ib < 8; ib++) {
            const float dl = d * (float)(2 * ls[ib] + 1);
            const float delta = neg[ib] ? -MR_IQ1S_DELTA : MR_IQ1S_DELTA;
            for (int j = 0; j < 32; j++) dst[32 * ib + j] = dl * ((float)q[32 * ib + j] + delta);
        }
        dst += MR_QK_K;
    }
}

void mr_vec_dot_iq1_s(int n, float *s, const void *w, const void *y) {
    const mr_block_iq1_s *x = w;
    const mr_block_q8_k *a = y;
    int8_t q[MR_QK_K];
    int ls[8], neg[8];
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        unpack_iq1_s(&x[i], q, ls, neg);
        int sumi = 0, sumi1 = 0;
        for (int ib = 0; ib < 8; ib++) {
            const int l = 2 * ls[ib] + 1;
            sumi += l * dot_i8(q + 32 * ib, a[i].qs + 32 * ib, 32);
            /* the shift contributes delta * sum(q8) over the 32 values */
            sumi1 += l * (neg[ib] ? -1 : 1) * (a[i].bsums[2 * ib] + a[i].bsums[2 * ib + 1]);
        }
        sumf += mr_fp16_to_fp32(x[i].d) * a[i].d * ((float)sumi + MR_IQ1S_DELTA * (float)sumi1);
    }
    *s = sumf;
}

/* ---------------------------------------------------------------- IQ1_M
 * per 8 values an 11-bit iq1s_grid index (qs byte | 3 bits of a qh nibble) and a shift sign (bit 3
 * of that nibble); 3-bit scales per 16 values in the low 12 bits of the four uint16 scale words,
 * whose top nibbles together hold the fp16 super-block scale */
static void unpack_iq1_m(const mr_block_iq1_m *b, int8_t q[MR_QK_K], int ls[16], int neg[32],
                         uint16_t *d16) {
    uint16_t sc[4];
    memcpy(sc, b->scales, sizeof sc);
    *d16 = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    for (int g = 0; g < 32; g++) {
        const unsigned nib = (b->qh[g / 2] >> (4 * (g & 1))) & 0xf;
        uint64_t grid = mr_iq1s_grid[b->qs[g] | ((nib & 7) << 8)];
        for (int j = 0; j < 8; j++) q[8 * g + j] = (int8_t)gbyte(grid, j);
        neg[g] = (nib & 8) != 0;
    }
    for (int ib = 0; ib < 8; ib++) {
        ls[2 * ib] = (sc[ib / 2] >> (6 * (ib % 2))) & 7;
        ls[2 * ib + 1] = (sc[ib / 2] >> (6 * (ib % 2) + 3)) & 7;
    }
}

void mr_dequant_iq1_m(const void *src, float *dst, int64_t k) {
    const mr_block_iq1_m *x = src;
    int8_t q[MR_QK_K];
    int ls[16], neg[32];
    uint16_t d16;
    for (int64_t i = 0; i < k / MR_QK_K; i++) {
        unpack_iq1_m(&x[i], q, ls, neg, &d16);
        const float d = mr_fp16_to_fp32(d16);
        for (int g = 0; g < 32; g++) {
            const float dl = d * (float)(2 * ls[g / 2] + 1);
            const float delta = neg[g] ? -MR_IQ1S_DELTA : MR_IQ1S_DELTA;
            for (int j = 0; j < 8; j++) dst[8 * g + j] = dl * ((float)q[8 * g + j] + delta);
        }
        dst += MR_QK_K;
    }
}

void mr_vec_dot_iq1_m(int n, float *s, const void *w, const void *y) {
    const mr_block_iq1_m *x = w;
    const mr_block_q8_k *a = y;
    int8_t q[MR_QK_K];
    int ls[16], neg[32];
    uint16_t d16;
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        unpack_iq1_m(&x[i], q, ls, neg, &d16);
        const int8_t *q8 = a[i].qs;
        int sumi1 = 0, sumi2 = 0;
        for (int g = 0; g < 32; g++) {
            int s8 = 0;
            for (int j = 0; j < 8; j++) s8 += q8[8 * g + j];
            const int l = 2 * ls[g / 2] + 1;
            sumi1 += l * dot_i8(q + 8 * g, q8 + 8 * g, 8);
            sumi2 += l * (neg[g] ? -s8 : s8);
        }
        sumf += mr_fp16_to_fp32(d16) * a[i].d * ((float)sumi1 + MR_IQ1M_DELTA * (float)sumi2);
    }
    *s = sumf;
}

/* ---------------------------------------------------------------- IQ4_NL
 * 32 values: fp16 scale, nibble j (low) = value j, nibble j (high) = value j + 16 */
void mr_dequant_iq4_nl(const void *src, float *dst, int64_t k) {
    const mr_block_iq4_nl *x = src;
    for (int64_t i = 0; i < k / MR_QK4_NL; i++) {
        const float d = mr_fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)mr_kvalues_iq4nl[x[i].qs[j] & 0xf];
            dst[j + 16] = d * (float)mr_kvalues_iq4nl[x[i].qs[j] >> 4];
        }
        dst += MR_QK4_NL;
    }
}

void mr_vec_dot_iq4_nl(int n, float *s, const void *w, const void *y) {
    const mr_block_iq4_nl *x = w;
    const mr_block_q8_0 *a = y;
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK4_NL; i++) {
        const float d = mr_fp16_to_fp32(a[i].d) * mr_fp16_to_fp32(x[i].d);
        int s1 = 0, s2 = 0;
        for (int j = 0; j < 16; j++) {
            s1 += a[i].qs[j] * mr_kvalues_iq4nl[x[i].qs[j] & 0xf];
            s2 += a[i].qs[j + 16] * mr_kvalues_iq4nl[x[i].qs[j] >> 4];
        }
        sumf += d * (float)(s1 + s2);
    }
    *s = sumf;
}

/* index of the level nearest to v in the sorted table val[16] (ties to the lower one, as ggml) */
static int nearest_level(const int8_t *val, float v) {
    if (v <= val[0]) return 0;
    if (v >= val[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < val[mid]) hi = mid; else lo = mid;
    }
    return v - val[hi - 1] < val[hi] - v ? hi - 1 : hi;
}

/* x^2-weighted least-squares fit of 32 values to the levels for a given inverse scale id:
 * returns sum w q x and sum w q^2 */
static void iq4_fit(const float *xb, float id, float *sumqx, float *sumq2) {
    float sx = 0, s2 = 0;
    for (int j = 0; j < MR_QK4_NL; j++) {
        const float q = (float)mr_kvalues_iq4nl[nearest_level(mr_kvalues_iq4nl, id * xb[j])];
        const float w = xb[j] * xb[j];
        sx += w * q * xb[j];
        s2 += w * q * q;
    }
    *sumqx = sx;
    *sumq2 = s2;
}

/* IQ4_NL weight quantizer: ggml's quantize_iq4_nl without importance weights (what llama-quantize
 * writes; ggml's quantize_row_iq4_nl_ref is the same with the trial loop below disabled): the
 * least-squares scale for d = -max/127, then 15 trial scales (i - 127)/max, keeping the best fit. */
void mr_quantize_iq4_nl(const float *src, void *dst, int64_t k) {
    const int ntry = 7;
    mr_block_iq4_nl *y = dst;
    for (int64_t i = 0; i < k / MR_QK4_NL; i++) {
        const float *xb = src + i * MR_QK4_NL;
        float amax = 0, max = 0, d = 0.f;
        for (int j = 0; j < MR_QK4_NL; j++) {
            float ax = fabsf(xb[j]);
            if (ax > amax) { amax = ax; max = xb[j]; }
        }
        if (amax >= 1e-15f) {   /* else d = 0 and every code is 8 (level 1), as in ggml */
            float sumqx, sumq2;
            iq4_fit(xb, 1 / (-max / (float)mr_kvalues_iq4nl[0]), &sumqx, &sumq2);
            d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
            float best = d * sumqx;
            for (int itry = -ntry; itry <= ntry; itry++) {
                iq4_fit(xb, (float)(itry + mr_kvalues_iq4nl[0]) / max, &sumqx, &sumq2);
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) { d = sumqx / sumq2; best = d * sumqx; }
            }
        }
        y[i].d = mr_fp32_to_fp16(d);
        const float id = d ? 1 / d : 0.f;
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(nearest_level(mr_kvalues_iq4nl, id * xb[j]) |
                                   nearest_level(mr_kvalues_iq4nl, id * xb[j + 16]) << 4);
    }
}

/* ---------------------------------------------------------------- IQ4_XS
 * 256 values: 6-bit scale per 32 (scales_l nibble | 2 bits of scales_h) biased by 32 */
static inline int iq4_xs_scale(const mr_block_iq4_xs *b, int ib) {
    return (((b->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | (((b->scales_h >> (2 * ib)) & 3) << 4)) - 32;
}

void mr_dequant_iq4_xs(const void *src, float *dst, int64_t k) {
    const mr_block_iq4_xs *x = src;
    for (int64_t i = 0; i < k / MR_QK_K; i++) {
        const float d = mr_fp16_to_fp32(x[i].d);
        for (int ib = 0; ib < 8; ib++) {
            const float dl = d * (float)iq4_xs_scale(&x[i], ib);
            const uint8_t *qs = x[i].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * (float)mr_kvalues_iq4nl[qs[j] & 0xf];
                dst[j + 16] = dl * (float)mr_kvalues_iq4nl[qs[j] >> 4];
            }
            dst += 32;
        }
    }
}

void mr_vec_dot_iq4_xs(int n, float *s, const void *w, const void *y) {
    const mr_block_iq4_xs *x = w;
    const mr_block_q8_k *a = y;
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_K; i++) {
        const float d4d8 = mr_fp16_to_fp32(x[i].d) * a[i].d;
        for (int ib = 0; ib < 8; ib++) {
            const uint8_t *qs = x[i].qs + 16 * ib;
            const int8_t *q8 = a[i].qs + 32 * ib;
            int s1 = 0, s2 = 0;
            for (int j = 0; j < 16; j++) {
                s1 += q8[j] * mr_kvalues_iq4nl[qs[j] & 0xf];
                s2 += q8[j + 16] * mr_kvalues_iq4nl[qs[j] >> 4];
            }
            sumf += d4d8 * (float)iq4_xs_scale(&x[i], ib) * (float)(s1 + s2);
        }
    }
    *s = sumf;
}

/* ---------------------------------------------------------------- MXFP4 / NVFP4
 * E2M1 codes index kvalues_mxfp4, which holds the values doubled (0, +-1, +-2, ... +-12 for
 * +-0 .. +-6); the scales below are therefore halved. */


/* UE4M3 scale (unsigned, 4 exponent bits with bias 7, 3 mantissa bits), halved. The reference
 * maps 0x7f (NaN) to 0. */
static inline float ue4m3_half(uint8_t x) {
    if (x == 0 || x == 0x7f) return 0.f;
    const int e = (x >> 3) & 0xf, m = x & 7;
    const float v = e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + (float)m / 8.0f, e - 7);
    return v * 0.5f;
}

/* nearest UE4M3 code of x > 0 (ggml_fp32_to_ue4m3: round half up on the mantissa, saturate at
 * 448 -> 0x7e) */
static uint8_t fp32_to_ue4m3(float x) {
    if (!(x > 0.0f)) return 0;
    if (x > 448.0f) x = 448.0f;
    const uint32_t bits = mr_f32_bits(x);
    int e = (int)((bits >> 23) & 0xff) - 127 + 7;
    int m = (int)((bits >> 20) & 7);
    if (e <= 0) {                                 /* subnormal: m * 2^-9 */
        int sm = (int)(x * 512.0f + 0.5f);
        if (sm > 7) sm = 7;
        return sm < 1 ? 0 : (uint8_t)sm;
    }
    if (e >= 15) return 0x7e;
    m += (int)((bits >> 19) & 1);
    if (m > 7) {
        m = 0;
        if (++e >= 15) return 0x7e;
    }
    return (uint8_t)((e << 3) | m);
}

/* nearest kvalues_mxfp4 entry to x at scale d (first index on ties, as ggml) */
static int nearest_fp4(float x, float d) {
    int best = 0;
    float best_err = fabsf((float)mr_kvalues_mxfp4[0] * d - x);
    for (int i = 1; i < 16; i++) {
        float err = fabsf((float)mr_kvalues_mxfp4[i] * d - x);
        if (err < best_err) { best = i; best_err = err; }
    }
    return best;
}

void mr_dequant_mxfp4(const void *src, float *dst, int64_t k) {
    const mr_block_mxfp4 *x = src;
    for (int64_t i = 0; i < k / MR_QK_MXFP4; i++) {
        const float d = mr_e8m0_half(x[i].e);
        for (int j = 0; j < 16; j++) {
            dst[j] = (float)mr_kvalues_mxfp4[x[i].qs[j] & 0xf] * d;
            dst[j + 16] = (float)mr_kvalues_mxfp4[x[i].qs[j] >> 4] * d;
        }
        dst += MR_QK_MXFP4;
    }
}

/* ggml's quantize_row_mxfp4_ref: exponent floor(log2(amax)) - 2 (so amax lands in [4, 8) of the
 * E2M1 range 0..6), then the nearest code per value. */
void mr_quantize_mxfp4(const float *src, void *dst, int64_t k) {
    mr_block_mxfp4 *y = dst;
    for (int64_t i = 0; i < k / MR_QK_MXFP4; i++) {
        const float *xb = src + i * MR_QK_MXFP4;
        float amax = 0.f;
        for (int j = 0; j < MR_QK_MXFP4; j++)
            if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
        const uint8_t e = amax > 0.0f ? (uint8_t)(floorf(log2f(amax)) - 2 + 127) : 0;
        const float d = mr_e8m0_half(e);
        y[i].e = e;
        for (int j = 0; j < 16; j++)
            y[i].qs[j] = (uint8_t)(nearest_fp4(xb[j], d) | (nearest_fp4(xb[j + 16], d) << 4));
    }
}

void mr_vec_dot_mxfp4(int n, float *s, const void *w, const void *y) {
    const mr_block_mxfp4 *x = w;
    const mr_block_q8_0 *a = y;
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_MXFP4; i++) {
        const float d = mr_fp16_to_fp32(a[i].d) * mr_e8m0_half(x[i].e);
        int s1 = 0, s2 = 0;
        for (int j = 0; j < 16; j++) {
            s1 += a[i].qs[j] * mr_kvalues_mxfp4[x[i].qs[j] & 0xf];
            s2 += a[i].qs[j + 16] * mr_kvalues_mxfp4[x[i].qs[j] >> 4];
        }
        sumf += d * (float)(s1 + s2);
    }
    *s = sumf;
}

void mr_dequant_nvfp4(const void *src, float *dst, int64_t k) {
    const mr_block_nvfp4 *x = src;
    for (int64_t i = 0; i < k / MR_QK_NVFP4; i++) {
        for (int sb = 0; sb < 4; sb++) {
            const float d = ue4m3_half(x[i].d[sb]);
            const uint8_t *qs = x[i].qs + 8 * sb;
            for (int j = 0; j < 8; j++) {
                dst[j] = (float)mr_kvalues_mxfp4[qs[j] & 0xf] * d;
                dst[j + 8] = (float)mr_kvalues_mxfp4[qs[j] >> 4] * d;
            }
            dst += MR_QK_NVFP4_SUB;
        }
    }
}

/* ggml's quantize_row_nvfp4_ref: per 16 values the UE4M3 scale nearest amax/6, then the nearest
 * code per value. */
void mr_quantize_nvfp4(const float *src, void *dst, int64_t k) {
    mr_block_nvfp4 *y = dst;
    for (int64_t i = 0; i < k / MR_QK_NVFP4; i++) {
        for (int sb = 0; sb < 4; sb++) {
            const float *xb = src + i * MR_QK_NVFP4 + sb * MR_QK_NVFP4_SUB;
            float amax = 0.f;
            for (int j = 0; j < MR_QK_NVFP4_SUB; j++)
                if (amax < fabsf(xb[j])) amax = fabsf(xb[j]);
            const uint8_t ue = fp32_to_ue4m3(amax / 6.0f);
            const float d = ue4m3_half(ue);
            y[i].d[sb] = ue;
            for (int j = 0; j < 8; j++)
                y[i].qs[8 * sb + j] = (uint8_t)(nearest_fp4(xb[j], d) | (nearest_fp4(xb[j + 8], d) << 4));
        }
    }
}

/* one NVFP4 block of 64 pairs with two Q8_0 blocks; sub-block sb uses half (sb & 1) of Q8_0
 * block sb / 2 */
void mr_vec_dot_nvfp4(int n, float *s, const void *w, const void *y) {
    const mr_block_nvfp4 *x = w;
    const mr_block_q8_0 *a = y;
    float sumf = 0.f;
    for (int i = 0; i < n / MR_QK_NVFP4; i++) {
        for (int sb = 0; sb < 4; sb++) {
            const float d = ue4m3_half(x[i].d[sb]);
            const mr_block_q8_0 *ab = &a[2 * i + sb / 2];
            const int8_t *q8 = ab->qs + 16 * (sb & 1);
            const uint8_t *qs = x[i].qs + 8 * sb;
            int s1 = 0, s2 = 0;
            for (int j = 0; j < 8; j++) {
                s1 += q8[j] * mr_kvalues_mxfp4[qs[j] & 0xf];
                s2 += q8[j + 8] * mr_kvalues_mxfp4[qs[j] >> 4];
            }
            sumf += mr_fp16_to_fp32(ab->d) * d * (float)(s1 + s2);
        }
    }
    *s = sumf;
}
