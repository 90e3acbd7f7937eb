/* PLACEHOLDER: scalar reference kernels not written yet (outputs zeros; quant-check fails). */
#include "quant/quant_impl.h"
#include <string.h>

void mr_dequant_iq2_xxs(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_vec_dot_iq2_xxs(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_iq2_xs(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_vec_dot_iq2_xs(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_iq2_s(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_vec_dot_iq2_s(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_iq3_xxs(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_vec_dot_iq3_xxs(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_iq3_s(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_vec_dot_iq3_s(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_iq1_s(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_vec_dot_iq1_s(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_iq1_m(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_vec_dot_iq1_m(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_iq4_nl(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_iq4_nl(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_iq4_nl(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_iq4_xs(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_vec_dot_iq4_xs(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_mxfp4(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_mxfp4(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_mxfp4(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
void mr_dequant_nvfp4(const void *src, float *dst, int64_t k) { (void)src; memset(dst, 0, (size_t)k * sizeof *dst); }
void mr_quantize_nvfp4(const float *src, void *dst, int64_t k) { (void)src; (void)dst; (void)k; }
void mr_vec_dot_nvfp4(int n, float *s, const void *w, const void *y) { (void)n; (void)w; (void)y; *s = 0; }
