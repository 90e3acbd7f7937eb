/* SIMD kernel tables beyond the single-column vec_dot (quant.h): multi-column dot products used by
 * the matrix kernels (matmul.c). No intrinsics here; the kernels live in *_avx2.c / *_avx512.c.
 *
 * A 4-column kernel computes s[c] = dot(w, y + c*by) for c = 0..3 with exactly the float operations
 * (same order, same lanes) of the same ISA's single-column vec_dot, so GEMM == 4 x GEMV bit for bit;
 * it only shares the unpacking of each weight block between the four columns. */
#ifndef MR_QUANT_SIMD_H
#define MR_QUANT_SIMD_H
#include <stddef.h>
#include <stdint.h>
#include "quant/quant.h"

/* s[0..3] = dot(w, y + c*by): w one weight row of n values, y four activation rows of the partner
 * type, by bytes apart. */
typedef void (*mr_vec_dot_x4_fn)(int n, float *s, const void *w, const void *y, size_t by);

/* Indexed by type; NULL where the ISA has no 4-column kernel (callers loop over vec_dot). */
extern const mr_vec_dot_x4_fn mr_vec_dot_x4_avx2[MR_TYPE_COUNT];
extern const mr_vec_dot_x4_fn mr_vec_dot_x4_avx512[MR_TYPE_COUNT];

/* GEMM on prepared activations (AVX-512 VNNI): for weight types whose partner is Q8_0 or Q8_1, the
 * matrix kernels may convert each activation row once with mr_prep_avx512(partner) (n values ->
 * mr_prep_row_size(partner, n) bytes: float scales, and for Q8_0 the quants + 128 as unsigned bytes)
 * and use these 4-column kernels, which equal the AVX-512 vec_dot bit for bit but do less work per
 * block and column. NULL: no such kernel. */
typedef void (*mr_prep_fn)(const void *y, void *yp, int n);
extern const mr_vec_dot_x4_fn mr_vec_dot_x4p_avx512[MR_TYPE_COUNT];
mr_prep_fn mr_prep_avx512(int partner);               /* NULL if none */
size_t mr_prep_row_size(int partner, int64_t n);      /* 0 if none */

/* GEMM blocks (AVX-512, types where decoding the weights dominates: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S, IQ4_XS, IQ1_S, IQ1_M):
 * s[c * s_col + r] = dot(w + r * w_row, y + c * by) for r < nr <= MR_GEMM_NR, c < nc <= MR_GEMM_NC,
 * bit for bit the same ISA's vec_dot; each weight super-block is decoded once for all nc columns
 * (the 4-column kernels decode it once per 4). NULL: the type has none. */
typedef void (*mr_gemm_fn)(int n, const void *w, size_t w_row, int nr, const void *y, size_t by, int nc,
                           float *s, size_t s_col);
#define MR_GEMM_NR 16
#define MR_GEMM_NC 32
extern const mr_gemm_fn mr_gemm_avx512[MR_TYPE_COUNT];

/* Q4_0 under AVX-512 VNNI (q4_0_avx512.c): block-sum numerics in every kernel (per 32-value block
 * the exact integer sum, then acc = fma(dw * dy, sum, acc)), and weights repacked in groups of 16
 * rows (MR_Q4_0_RP_BLOCK_BYTES per group and block; quant/repack.h keeps the copies) multiplied with
 * prepared activations (MR_Q4_0_RP_ACT_BYTES per block, mr_q4_0_rp_prep from a Q8_0 row).
 * mr_q4_0_rp_rows: Y[c * ldy + r] for the rows of groups [g0, g1) of a repacked matrix whose group 0
 * is at rp, and ncols prepared columns act_row bytes apart. Bit for bit the vec_dot below. */
#define MR_Q4_0_RP_BLOCK_BYTES 288
#define MR_Q4_0_RP_ACT_BYTES 40
void mr_vd_q4_0_bs_avx512(int n, float *s, const void *w, const void *y);
void mr_vd4_q4_0_bs_avx512(int n, float *s, const void *w, const void *y, size_t by);
void mr_q4_0_repack16(const void *src, int64_t cols, int64_t g0, int64_t g1, void *dst);
void mr_q4_0_rp_prep(const void *q8_0_row, void *dst, int n);
void mr_q4_0_rp_rows(const void *rp, int64_t cols, int64_t g0, int64_t g1, const void *act, size_t act_row,
                     int64_t ncols, float *Y, int64_t ldy);

/* SIMD activation quantizers (to Q8_0, Q8_1, Q8_K, F16, BF16), bit for bit the scalar references'
 * from_float; indexed by the partner type, NULL where there is none. AVX2 (also used under AVX-512). */
extern const mr_from_float_fn mr_from_float_avx2[MR_TYPE_COUNT];
/* from_float for the ISA in use (mr_isa()), falling back to the scalar reference; NULL if none */
mr_from_float_fn mr_type_from_float(int type);

/* The kernels the given ISA uses for a type: *dot is what mr_type_vec_dot() would return under that
 * ISA (falling back to a lower ISA, then scalar), *dot4 the 4-column kernel of the same ISA as *dot,
 * or NULL. Returns the ISA *dot belongs to, -1 for an unknown type. */
int mr_type_kernels(int type, int isa, mr_vec_dot_fn *dot, mr_vec_dot_x4_fn *dot4);

#endif
