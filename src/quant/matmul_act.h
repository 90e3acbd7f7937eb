/* Matrix products on activations converted once (an addition beside matmul.c, same kernels).
 *
 * mr_matmul converts its activations to the weight type's partner type on every call. When several
 * matrices multiply the same input (q_a / kv / compressor projections of one normed vector, the gate
 * and up halves of an expert), or when one thread-pool dispatch should cover several matrices (a
 * decode step is dominated by the wake-up and tail of many small dispatches), convert once with
 * mr_mm_act_make and compute row ranges with mr_mm_rows from any chunk function.
 *
 * Every Y[j][r] is computed with the kernels mr_matmul uses for that weight type (vec_dot; the
 * 4-column kernels, which equal vec_dot bit for bit), so results are bit-identical to mr_matmul's
 * whatever the row ranges, column count and thread that computes them.
 *
 * mr_matmul_parts runs a list of products (each its own weights, activations and output) as one
 * chunked dispatch over the pool. */
#ifndef MR_MATMUL_ACT_H
#define MR_MATMUL_ACT_H
#include <stddef.h>
#include <stdint.h>
#include "base/pool.h"

typedef struct {
    int vdtype;            /* partner type (a weight type's vec_dot_type) */
    int64_t cols, ncols;
    const float *X;        /* F32 partner: the activations as given (column stride ldx) */
    int64_t ldx;           /* floats between columns of X */
    uint8_t *Xq;           /* converted columns, x_row bytes each (NULL for an F32 partner) */
    size_t x_row;
    uint8_t *Xp;           /* AVX-512 prepared columns for the 4-column kernels (quant_simd.h), or NULL */
    size_t xp_row;
    uint8_t *Xr;           /* Q8_0 columns prepared for repacked Q4_0 weights (repack.h), or NULL */
    size_t xr_row;
} mr_mm_act;

/* Convert ncols columns of cols floats (column j at X + j*ldx; ldx >= cols) for products with
 * weights of type wtype (any type with the same partner may use the result). Conversion is split
 * over the pool when there are several columns. 0, or -1 with mr_set_error. */
int mr_mm_act_make(mr_pool *pool, mr_mm_act *a, int wtype, const float *X, int64_t cols, int64_t ncols, int64_t ldx);
/* mr_mm_act_alloc: room for ncols converted columns (float rows for an F32 partner); prep: also
 * AVX-512 prepared rows when they apply. mr_mm_act_gather: a (allocated for cnt columns) takes
 * columns idx[0..cnt) of src (same partner and cols): the converted rows are copied, which equals
 * converting the gathered floats. */
int mr_mm_act_alloc(mr_mm_act *a, int vdtype, int64_t cols, int64_t ncols, int prep);
void mr_mm_act_gather(mr_mm_act *a, const mr_mm_act *src, const int *idx, int cnt);
void mr_mm_act_free(mr_mm_act *a);
/* partner type of a weight type, -1 if unknown */
int mr_mm_partner(int wtype);

/* Y[j*ldy + r] = dot(W[r], X[j]) for rows r in [r0, r1) and every column j of a. W holds rows of
 * a->cols values of type wtype. 0, or -1 (no kernel for the type, or a partner mismatch). */
int mr_mm_rows(const mr_mm_act *a, int wtype, const void *W, int64_t r0, int64_t r1, float *Y, int64_t ldy);

/* One product of a list: rows x act->cols weights of type wtype at W, output Y (ldy as above; 0 =
 * rows). */
typedef struct {
    const void *W;
    int wtype;
    int64_t rows;
    const mr_mm_act *act;
    float *Y;
    int64_t ldy;
} mr_mm_part;

/* All parts in one dispatch over the pool (row chunks of every part). 0, or -1 with mr_set_error. */
int mr_matmul_parts(mr_pool *pool, const mr_mm_part *parts, int n_parts);
/* Rows per chunk for a product of `rows` rows of w_row bytes with ncols columns, when `total_bytes`
 * of weights are spread over nth threads in one dispatch. */
long mr_mm_chunk_rows(int64_t rows, size_t w_row, int64_t ncols, size_t total_bytes, int nth);
#endif
