/* SIMD kernel tables beyond the single-column vec_dot (quant.h): multi-column dot products used by
 * the matrix kernels (matmul.c). No intrinsics here; the kernels live in *_avx2.c / *_avx512.c.
 *
 * A 4-column kernel computes s[c] = dot(w, y + c*by) for c = 0..3 with exactly the float operations
 * (same order, same lanes) of the same ISA's single-column vec_dot, so GEMM == 4 x GEMV bit for bit;
 * it only shares the unpacking of each weight block between the four columns. */
#ifndef MR_QUANT_SIMD_H
#define MR_QUANT_SIMD_H
#include <stddef.h>
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

/* GEMV on prepared activations (AVX-512 VNNI; gemv_avx512.c): for weight types in
 * mr_vec_dot_p1_avx512 (Q4_0), a single-column kernel on the partner row prepared with
 * mr_gemv_prep_avx512(wtype) (n values -> mr_gemv_prep_row_size(wtype, n) bytes, 0 if none),
 * bit for bit the AVX-512 vec_dot but with less work per block. */
extern const mr_vec_dot_fn mr_vec_dot_p1_avx512[MR_TYPE_COUNT];
mr_prep_fn mr_gemv_prep_avx512(int wtype);            /* NULL if none */
size_t mr_gemv_prep_row_size(int wtype, int64_t n);   /* 0 if none */
/* A single-column row range with it when the type has one (prepares into a stack buffer):
 * Y[r] = dot(W[r], xq) for r in [r0, r1). Returns 0 when it did not apply (caller uses vec_dot). */
int mr_gemv_rows_p1(int wtype, int n, const uint8_t *W, size_t w_row, const void *xq, int64_t r0, int64_t r1, float *Y);

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
