/* Random but valid test data for the kernel tests (test_simd.c, test_matmul.c): weight rows of any
 * type (random bytes with sane fp16/bf16 scale fields) and activation rows in the partner types
 * Q8_0, Q8_1, Q8_K, F16, BF16, F32, built directly (independent of the reference quantizers). */
#ifndef MR_TEST_SIMD_DATA_H
#define MR_TEST_SIMD_DATA_H
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/base.h"
#include "quant/quant.h"

static uint64_t sd_state = 0x9e3779b97f4a7c15ULL;
static inline uint32_t sd_u32(void) {
    sd_state ^= sd_state << 13;
    sd_state ^= sd_state >> 7;
    sd_state ^= sd_state << 17;
    return (uint32_t)(sd_state >> 16);
}
static inline float sd_unif(float lo, float hi) { return lo + (hi - lo) * (float)(sd_u32() & 0xffffff) / 16777216.0f; }
static inline float sd_normalish(void) { return sd_unif(-1, 1) + sd_unif(-1, 1) + sd_unif(-1, 1); }
/* a scale of random sign and magnitude 1e-3 .. 1e-1 */
static inline float sd_scale(void) {
    float m = 1e-3f * powf(100.0f, sd_unif(0, 1));
    return (sd_u32() & 1) ? -m : m;
}
static inline void sd_put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static inline int8_t sd_q8(int extreme) {
    if (extreme) return (sd_u32() & 1) ? 127 : -127;
    return (int8_t)((int)(sd_u32() % 255) - 127);
}

/* Offsets of the fp16 scale fields in one block of a weight type (-1 terminated). */
static const int *sd_half_fields(int type) {
    static const int none[] = {-1}, at0[] = {0, -1}, at01[] = {0, 2, -1};
    static const int q2k[] = {80, 82, -1}, q3k[] = {108, -1}, q6k[] = {208, -1};
    static const int tq1[] = {52, -1}, tq2[] = {64, -1};
    switch (type) {
    case MR_TYPE_Q4_0: case MR_TYPE_Q5_0: case MR_TYPE_Q8_0: case MR_TYPE_Q1_0: case MR_TYPE_Q2_0: case MR_TYPE_IQ4_NL:
    case MR_TYPE_IQ2_XXS: case MR_TYPE_IQ2_XS: case MR_TYPE_IQ2_S: case MR_TYPE_IQ3_XXS: case MR_TYPE_IQ3_S:
    case MR_TYPE_IQ1_S: case MR_TYPE_IQ4_XS:
        return at0;
    case MR_TYPE_Q4_1: case MR_TYPE_Q5_1: case MR_TYPE_Q4_K: case MR_TYPE_Q5_K: return at01;
    case MR_TYPE_Q2_K: return q2k;
    case MR_TYPE_Q3_K: return q3k;
    case MR_TYPE_Q6_K: return q6k;
    case MR_TYPE_TQ1_0: return tq1;
    case MR_TYPE_TQ2_0: return tq2;
    default: return none;
    }
}

/* n values of weight type `type` at dst (mr_row_size(type, n) bytes). extreme: bytes drawn from
 * {0x00, 0x7f, 0x80, 0xff} (saturation corners) instead of uniformly. */
static inline void sd_weights(int type, uint8_t *dst, int64_t n, int extreme) {
    const mr_type_traits *t = mr_type_get(type);
    size_t bytes = mr_row_size(type, n);
    if (type == MR_TYPE_F32) {
        for (int64_t i = 0; i < n; i++) { float v = sd_normalish(); memcpy(dst + 4 * i, &v, 4); }
        return;
    }
    if (type == MR_TYPE_F16 || type == MR_TYPE_BF16) {
        for (int64_t i = 0; i < n; i++) {
            float v = sd_normalish();
            sd_put16(dst + 2 * i, type == MR_TYPE_F16 ? mr_fp32_to_fp16(v) : mr_fp32_to_bf16(v));
        }
        return;
    }
    static const uint8_t corners[4] = {0x00, 0x7f, 0x80, 0xff};
    for (size_t i = 0; i < bytes; i++) dst[i] = extreme ? corners[sd_u32() & 3] : (uint8_t)sd_u32();
    const int *f = sd_half_fields(type);
    for (size_t b = 0; b < bytes / t->type_size; b++)
        for (int k = 0; f[k] >= 0; k++) sd_put16(dst + b * t->type_size + (size_t)f[k], mr_fp32_to_fp16(sd_scale()));
    /* scales that are not fp16 fields: keep them finite and moderate */
    for (size_t b = 0; b < bytes / t->type_size; b++) {
        uint8_t *blk = dst + b * t->type_size;
        if (type == MR_TYPE_MXFP4) blk[0] = (uint8_t)(118 + sd_u32() % 12);           /* E8M0: 2^-9 .. 2^2 */
        if (type == MR_TYPE_NVFP4) /* UE4M3; the extreme case takes any byte (subnormal, 0x7f = NaN -> 0) */
            for (int k = 0; k < 4; k++) blk[k] = (uint8_t)(extreme ? sd_u32() : 0x08 + sd_u32() % 0x40);
        if (type == MR_TYPE_IQ1_M) {
            /* the fp16 super-block scale is the top nibble of the four uint16 scales (offset 48) */
            uint16_t h = mr_fp32_to_fp16(sd_scale()), sc[4];
            memcpy(sc, blk + 48, 8);
            for (int k = 0; k < 4; k++) sc[k] = (uint16_t)((sc[k] & 0x0fff) | (((h >> (4 * k)) & 0xf) << 12));
            memcpy(blk + 48, sc, 8);
        }
    }
}

/* n activations in partner type `type`; if vals != NULL, also their float values. */
static inline void sd_acts(int type, uint8_t *dst, int64_t n, int extreme, float *vals) {
    switch (type) {
    case MR_TYPE_F32: case MR_TYPE_F16: case MR_TYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            float v = sd_normalish();
            if (type == MR_TYPE_F32) memcpy(dst + 4 * i, &v, 4);
            else {
                uint16_t h = type == MR_TYPE_F16 ? mr_fp32_to_fp16(v) : mr_fp32_to_bf16(v);
                sd_put16(dst + 2 * i, h);
                v = type == MR_TYPE_F16 ? mr_fp16_to_fp32(h) : mr_bf16_to_fp32(h);
            }
            if (vals) vals[i] = v;
        }
        break;
    case MR_TYPE_Q8_0: case MR_TYPE_Q8_1: {
        size_t bs = type == MR_TYPE_Q8_0 ? 34 : 36, off = bs - 32;
        for (int64_t b = 0; b < n / 32; b++) {
            uint8_t *blk = dst + (size_t)b * bs;
            float d = fabsf(sd_scale()) * 0.1f;
            uint16_t dh = mr_fp32_to_fp16(d);
            int sum = 0;
            for (int i = 0; i < 32; i++) {
                int8_t q = sd_q8(extreme);
                blk[off + i] = (uint8_t)q;
                sum += q;
                if (vals) vals[b * 32 + i] = mr_fp16_to_fp32(dh) * q;
            }
            sd_put16(blk, dh);
            if (type == MR_TYPE_Q8_1) sd_put16(blk + 2, mr_fp32_to_fp16(mr_fp16_to_fp32(dh) * (float)sum));
        }
        break;
    }
    case MR_TYPE_Q8_K:
        for (int64_t b = 0; b < n / 256; b++) {
            uint8_t *blk = dst + (size_t)b * 292;
            float d = fabsf(sd_scale()) * 0.1f;
            memcpy(blk, &d, 4);
            for (int g = 0; g < 16; g++) {
                int16_t sum = 0;
                for (int i = 0; i < 16; i++) {
                    int8_t q = sd_q8(extreme);
                    blk[4 + 16 * g + i] = (uint8_t)q;
                    sum = (int16_t)(sum + q);
                    if (vals) vals[b * 256 + 16 * g + i] = d * q;
                }
                memcpy(blk + 260 + 2 * g, &sum, 2);
            }
        }
        break;
    default: break;
    }
}
#endif
