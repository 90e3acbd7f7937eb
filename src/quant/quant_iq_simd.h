/* x86 kernels defined in one file and registered in the ISA's kernel table in another
 * (quant_avx2.c / quant_avx512.c, see quant_simd.h): the AVX2 activation quantizers, and the AVX2
 * and AVX-512 (VNNI) dot products and GEMM blocks of the i-quant and FP4 weight types with their
 * activation partner (Q8_K or Q8_0); same contracts as the scalar references (quant_impl.h). */
#ifndef MR_QUANT_IQ_SIMD_H
#define MR_QUANT_IQ_SIMD_H
#include <stddef.h>
#include <stdint.h>

/* quant_act_avx2.c: from_float (mr_from_float_fn) to the partner types, bit for bit the scalar ones */
void mr_quantize_q8_0_avx2(const float *src, void *dst, int64_t k);
void mr_quantize_q8_1_avx2(const float *src, void *dst, int64_t k);
void mr_quantize_q8_k_avx2(const float *src, void *dst, int64_t k);
void mr_quantize_f16_avx2(const float *src, void *dst, int64_t k);
void mr_quantize_bf16_avx2(const float *src, void *dst, int64_t k);

/* quant_iq_avx2.c */
void mr_vec_dot_iq2_xxs_avx2(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq3_s_avx2(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq1_s_avx2(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq1_m_avx2(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq3_xxs_avx2(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq2_xs_avx2(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq2_s_avx2(int n, float *s, const void *w, const void *y);
/* 4-column kernels (mr_vec_dot_x4_fn, quant_simd.h): bit-identical to 4 calls of the above */
void mr_vec_dot_x4_iq2_xxs_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq3_s_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq1_s_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq1_m_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq3_xxs_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq2_xs_avx2(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq2_s_avx2(int n, float *s, const void *w, const void *y, size_t by);
/* GEMM block (mr_gemm_fn): rows repacked on the fly in groups of 8, bit for bit the above */
void mr_gemm_iq3_s_avx2(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);

/* quant_iq_avx512.c. Some AVX-512 kernels have a faster variant for CPUs with AVX512_VBMI, chosen
 * at run time; tests set mr_avx512_no_vbmi = 1 to check the variants without it too. */
extern int mr_avx512_no_vbmi;
void mr_vec_dot_iq2_xxs_avx512(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq3_s_avx512(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq1_s_avx512(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq1_m_avx512(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq3_xxs_avx512(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq2_xs_avx512(int n, float *s, const void *w, const void *y);
void mr_vec_dot_iq2_s_avx512(int n, float *s, const void *w, const void *y);
/* 4-column kernels (mr_vec_dot_x4_fn, quant_simd.h): bit-identical to 4 calls of the above */
void mr_vec_dot_x4_iq2_xxs_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq3_s_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq1_s_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq1_m_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq3_xxs_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq2_xs_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_vec_dot_x4_iq2_s_avx512(int n, float *s, const void *w, const void *y, size_t by);
/* GEMM blocks (mr_gemm_fn, quant_simd.h) */
void mr_gemm_iq2_xxs_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
void mr_gemm_iq3_s_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
void mr_gemm_iq3_xxs_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
void mr_gemm_iq2_xs_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
void mr_gemm_iq2_s_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
void mr_gemm_iq1_s_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
void mr_gemm_iq1_m_avx512(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc, float *s, size_t s_col);
#endif
