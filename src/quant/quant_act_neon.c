/* AArch64 Advanced SIMD activation quantizers (floats -> the partner types Q8_0 and Q8_K), bit for
 * bit the scalar references of quant_ref.c: the same float operations (x * id, iscale * x,
 * 1 / iscale, fp16 of d) and round-to-nearest-even conversions (fcvtns equals the reference's
 * nearest_int for |v| < 2^22; every value here is within +-127.01). A block holding a NaN or an
 * infinity goes to the scalar reference (whose max-reductions depend on element order there).
 * ARMv8.0 only, so the dotprod ISA uses these too (mr_kern_get takes the partner quantizer from the
 * highest ISA at or below that has one). */
#include "quant/quant.h"
#include "quant/quant_blocks.h"
#include "quant/quant_impl.h"
#include "quant/quant_simd.h"
#include "base/base.h"

#include <arm_neon.h>
#include <string.h>

/* max |x| over n values (a multiple of 16), or -1 if one of them is NaN or infinite */
static inline float qn_amax(const float *x, int n) {
    float32x4_t m = vdupq_n_f32(0);
    uint32x4_t finite = vdupq_n_u32(~0u);
    const float32x4_t inf = vdupq_n_f32(__builtin_inff());
    for (int j = 0; j < n; j += 4) {
        const float32x4_t a = vabsq_f32(vld1q_f32(x + j));
        finite = vandq_u32(finite, vcltq_f32(a, inf)); /* false for NaN too */
        m = vmaxq_f32(m, a);
    }
    return vminvq_u32(finite) ? vmaxvq_f32(m) : -1.0f;
}

/* 16 values times m rounded to nearest even, as int8 (all within +-127 here) */
static inline int8x16_t qn_round16(const float *x, float32x4_t m) {
    int32x4_t q[4];
    for (int k = 0; k < 4; k++) q[k] = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + 4 * k), m));
    const int16x8_t lo = vcombine_s16(vmovn_s32(q[0]), vmovn_s32(q[1]));
    const int16x8_t hi = vcombine_s16(vmovn_s32(q[2]), vmovn_s32(q[3]));
    return vcombine_s8(vmovn_s16(lo), vmovn_s16(hi));
}

void mr_quantize_q8_0_neon(const float *src, void *dst, int64_t k) {
    mr_block_q8_0 *y = dst;
    for (int64_t i = 0; i < k / MR_QK8_0; i++, src += MR_QK8_0) {
        const float amax = qn_amax(src, MR_QK8_0);
        if (amax < 0) { mr_quantize_q8_0(src, &y[i], MR_QK8_0); continue; }
        const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = mr_fp32_to_fp16(d);
        const float32x4_t m = vdupq_n_f32(id);
        vst1q_s8(y[i].qs, qn_round16(src, m));
        vst1q_s8(y[i].qs + 16, qn_round16(src + 16, m));
    }
}

void mr_quantize_q8_k_neon(const float *src, void *dst, int64_t k) {
    mr_block_q8_k *y = dst;
    for (int64_t i = 0; i < k / MR_QK_K; i++, src += MR_QK_K) {
        const float amax = qn_amax(src, MR_QK_K);
        if (amax < 0) { mr_quantize_q8_k(src, &y[i], MR_QK_K); continue; }
        if (amax == 0.0f) { memset(&y[i], 0, sizeof y[i]); continue; }
        /* the reference keeps the first value of largest magnitude (its sign matters) */
        int j = 0;
        while (__builtin_fabsf(src[j]) != amax) j++;
        const float iscale = -127.0f / src[j];
        const float32x4_t m = vdupq_n_f32(iscale);
        for (int g = 0; g < MR_QK_K / 16; g++) {
            /* min(127, .) of the reference: a no-op for |iscale * x| <= 127.01, kept for the bytes */
            const int8x16_t q = vminq_s8(qn_round16(src + 16 * g, m), vdupq_n_s8(127));
            vst1q_s8(y[i].qs + 16 * g, q);
            y[i].bsums[g] = vaddlvq_s8(q);
        }
        y[i].d = 1 / iscale;
    }
}
