/* PLACEHOLDER: scalar reference kernels not written yet (outputs zeros; quant-check fails). */
#include "quant/quant_impl.h"
#include <string.h>

void mr_dequant_f32(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_f32(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_f32(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_f16(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_f16(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_f16(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_bf16(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_bf16(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_bf16(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q4_0(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q4_0(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q4_0(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q4_1(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q4_1(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q4_1(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q5_0(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q5_0(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q5_0(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q5_1(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q5_1(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q5_1(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q8_0(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q8_0(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q8_0(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_quantize_q8_1(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_dequant_q2_k(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q2_k(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q2_k(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q3_k(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q3_k(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q3_k(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q4_k(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q4_k(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q4_k(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q5_k(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q5_k(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q5_k(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q6_k(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q6_k(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q6_k(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q8_k(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q8_k(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_dequant_tq1_0(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_tq1_0(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_tq1_0(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_tq2_0(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_tq2_0(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_tq2_0(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_q1_0(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_q1_0(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_q1_0(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
