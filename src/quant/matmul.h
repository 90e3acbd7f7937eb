/* The matrix engine: products of quantized weight matrices with float activations.
 *
 * W: `rows` rows of `cols` values of type `wtype` (row-major, mr_row_size(wtype, cols) bytes per row).
 * X: ncols activation columns of `cols` floats (column j at X + j*ldx).
 * Y: ncols output columns (column j at Y + j*ldy): Y[j][r] = dot(W[r], X[j]).
 *
 * Every product is two steps:
 *   1. prepare the activations (mr_mm_act): convert them once to the weight type's partner type,
 *      plus the ISA's prepared layouts where its kernels use them (quant_simd.h);
 *   2. a parts dispatch (mr_matmul_parts): row chunks of one or several products handed out over
 *      the thread pool together; each chunk runs mr_mm_rows.
 * mr_matmul and mr_matmul_many are thin wrappers over these; callers that convert once for several
 * matrices, or compute row ranges from their own chunk functions, use the two steps directly.
 *
 * Kernels: those of the ISA in use (mr_isa(); MOERUN_ISA=scalar|avx2|avx512), via mr_kern_get.
 * One column streams the rows once (GEMV); several columns go through the type's GEMM blocks, its
 * 4-column kernels or a repacked copy of the weights (repack.h). Every (r, j) result is computed
 * with the same float operations whatever the path, the row ranges, the column count and the
 * thread, so a batch equals one column at a time bit for bit, and a repacked weight equals the
 * plain one. Functions return 0, or -1 with mr_set_error (unknown type, cols not a multiple of the
 * block size, no kernel for the type, out of memory). */
#ifndef MR_MATMUL_H
#define MR_MATMUL_H
#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "base/pool.h"
#include "quant/repack.h"

/* A weight matrix handle: its data, shape, and the repacked copy its owner made (or NULL). */
typedef struct {
    const void *data;
    int type;
    int64_t rows, cols;
    const char *name;          /* for messages and the profiler; may be NULL */
    const mr_repacked *rp;
} mr_mat;

/* ---- step 1: prepared activations ---- */
typedef struct {
    int vdtype;            /* partner type (a weight type's vec_dot_type) */
    int64_t cols, ncols;
    const float *X;        /* F32 partner: the activations as given (column stride ldx) */
    int64_t ldx;           /* floats between columns of X */
    uint8_t *Xq;           /* converted columns, x_row bytes each (NULL for an F32 partner) */
    size_t x_row;
    uint8_t *Xp;           /* the partner's prepared rows for dot4p kernels (quant_simd.h), or NULL */
    size_t xp_row;
    uint8_t *Xr;           /* the partner's rows in the repacked kernels' layout (rprep), or NULL */
    size_t xr_row;
    int in_scratch;        /* the buffers belong to a scratch (the _in functions): free() leaves them */
} mr_mm_act;

/* Convert ncols columns of cols floats (column j at X + j*ldx; ldx >= cols) for products with
 * weights of type wtype (any type with the same partner may use the result). Conversion is split
 * over the pool when there are several columns. */
int mr_mm_act_make(mr_pool *pool, mr_mm_act *a, int wtype, const float *X, int64_t cols, int64_t ncols, int64_t ldx);
/* The same without the prepared layouts (for code that calls dot / dot4 on the partner rows). */
int mr_mm_act_convert(mr_pool *pool, mr_mm_act *a, int wtype, const float *X, int64_t cols, int64_t ncols, int64_t ldx);
/* mr_mm_act_alloc: room for ncols converted columns (float rows for an F32 partner); prep: also the
 * prepared layouts when they apply. mr_mm_act_gather: a (allocated for cnt columns) takes columns
 * idx[0..cnt) of src (same partner and cols): the converted rows are copied, which equals
 * converting the gathered floats. */
int mr_mm_act_alloc(mr_mm_act *a, int vdtype, int64_t cols, int64_t ncols, int prep);
void mr_mm_act_gather(mr_mm_act *a, const mr_mm_act *src, const int *idx, int cnt);
void mr_mm_act_free(mr_mm_act *a);
/* The same with the buffers from the arena ws (mr_scratch_alloc, base.h), for a caller that converts
 * many activations per call (the expert engine): nothing is allocated once ws has grown, and
 * mr_mm_act_free leaves the memory to ws. They run in the caller's thread (an arena is not
 * thread-safe): conversions meant for pool tasks are reserved here (_reserve_in: room for ncols
 * columns for products with wtype, with the prepared layouts) and converted there (mr_mm_act_fill,
 * serially, the same values as mr_mm_act_make). */
int mr_mm_act_alloc_in(mr_mm_act *a, mr_scratch *ws, int vdtype, int64_t cols, int64_t ncols, int prep);
int mr_mm_act_make_in(mr_pool *pool, mr_mm_act *a, mr_scratch *ws, int wtype, const float *X, int64_t cols,
                      int64_t ncols, int64_t ldx);
int mr_mm_act_reserve_in(mr_mm_act *a, mr_scratch *ws, int wtype, int64_t cols, int64_t ncols);
void mr_mm_act_fill(mr_mm_act *a, const float *X, int64_t ldx);
/* partner type of a weight type, -1 if unknown */
int mr_mm_partner(int wtype);

/* ---- step 2: rows and the parts dispatch ---- */
/* Y[j*ldy + r] = dot(W[r], X[j]) for rows r in [r0, r1) and every column j of a. W holds rows of
 * a->cols values of type wtype; rp: a repacked copy holding W's rows, or NULL. 0, or -1 (no kernel
 * for the type, or a partner mismatch). */
int mr_mm_rows(const mr_mm_act *a, int wtype, const void *W, const mr_repacked *rp, int64_t r0, int64_t r1,
               float *Y, int64_t ldy);

/* One product of a list: rows x act->cols weights of type wtype at W (rp as above), output Y (ldy as
 * above; 0 = rows). */
typedef struct {
    const void *W;
    int wtype;
    int64_t rows;
    const mr_mm_act *act;
    float *Y;
    int64_t ldy;
    const mr_repacked *rp;
} mr_mm_part;

/* All parts in one dispatch over the pool (row chunks of every part). */
int mr_matmul_parts(mr_pool *pool, const mr_mm_part *parts, int n_parts);
/* The same with its chunk lists (more than 16 parts) taken from the arena ws (not reset: it may hold
 * the parts' activations); ws NULL: allocated per call. */
int mr_matmul_parts_in(mr_pool *pool, mr_scratch *ws, const mr_mm_part *parts, int n_parts);
/* Rows per chunk for a product of `rows` rows of w_row bytes with ncols columns, when `total_bytes`
 * of weights are spread over nth threads in one dispatch. */
long mr_mm_chunk_rows(int64_t rows, size_t w_row, int64_t ncols, size_t total_bytes, int nth);
/* Rows per repacked group of rp's copy under the ISA in use, 1 if it does not apply: chunk
 * boundaries rounded up to a multiple of it keep whole groups in the repacked kernel. */
int mr_mm_group_rows(const mr_repacked *rp, int wtype, int64_t cols);

/* ---- wrappers ---- */
/* Y = W X for a plain matrix (no repacked copy): X column j at X + j*cols, Y column j at Y + j*rows. */
int mr_matmul(mr_pool *pool, const void *W, int wtype, int64_t rows, int64_t cols,
              const float *X, int64_t ncols, float *Y);

/* Several independent products Y_i = W_i X_i in one dispatch (a MoE layer in decode multiplies
 * 2 x top-k small matrices; an attention block its q/k/v projections): tasks with the same
 * activations (same X pointer, ldx, ncols, cols and partner type) share one preparation. Column
 * strides ldx / ldy: 0 means cols / rows. Tasks with rows or ncols 0 are skipped. */
typedef struct {
    const mr_mat *w;
    const float *X;
    int64_t ncols;
    float *Y;
    int64_t ldx, ldy;
} mr_matmul_task;
int mr_matmul_many(mr_pool *pool, const mr_matmul_task *tasks, int n);
/* The same with its buffers (converted activations, task lists) from the arena ws, which the call
 * resets first: an arena no other buffer lives in while it runs (a model's evals use the session's,
 * mr_model_matmul_many). ws NULL: allocated and freed per call, as mr_matmul_many. */
int mr_matmul_many_in(mr_pool *pool, mr_scratch *ws, const mr_matmul_task *tasks, int n);

/* ---- partial products (MoE approximations; matmul_sparse.c) ---- */
/* Both take activations prepared by mr_mm_act_make / _convert for wtype (the MoE engine converts an
 * expert's inputs once for all its products).
 * Block-sparse product: Y[j][r] = dot(W[r], H[j]) restricted to the weight blocks b (wtype's block
 * size along H->cols) with active[j * nb + b] != 0, nb = cols / block, j < H->ncols. Each output is the sum, in
 * block order, of one dot per run of contiguous active blocks, so with every block active it equals
 * mr_matmul bit for bit. zero_gaps != 0 promises that H is 0 in the inactive blocks: short gaps
 * between runs (fewer bytes of weights than a dot call costs) are then computed rather than split
 * off, which gives the same sum (zero blocks add exactly 0) with fewer calls. */
int mr_matmul_blocks(mr_pool *pool, const void *W, int wtype, int64_t rows, const mr_mm_act *H, const uint8_t *active,
                     int zero_gaps, float *Y);
/* Masked rows: U[c][r] = dot(W[r], X[c]) for the rows with act[c * rows + r] != 0 (equal to
 * mr_matmul's values bit for bit), 0 for the others. W: rows x X->cols of wtype; U: X->ncols x rows. */
int mr_matmul_rows_masked(mr_pool *pool, const void *W, int wtype, int64_t rows, const mr_mm_act *X,
                          const uint8_t *act, float *U);
#endif
