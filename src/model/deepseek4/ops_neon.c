/* AArch64 Advanced SIMD kernels for the DeepSeek-V4 attention and indexer (ops.c dispatches to
 * them under MOERUN_ISA=neon and dotprod). Same results as the scalar ones up to float summation
 * order; the same shape as ops_avx2.c (32 floats per step in four accumulators). */
#include "model/deepseek4/ops.h"

#include <arm_neon.h>
#include <string.h>

float ds4_dot_f32_neon(const float *x, const float *y, int n) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8), vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, vld1q_f32(x + i), vld1q_f32(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

void ds4_axpy_f32_neon(float *y, float a, const float *x, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_n_f32(vld1q_f32(y + i), vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] += a * x[i];
}

void ds4_f16_to_f32_neon(float *y, const uint16_t *x, int n) {
    int i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(x + i))));
    for (; i < n; i++) {
        __fp16 h;
        memcpy(&h, x + i, 2);
        y[i] = (float)h;
    }
}
