/* Matrix products with quantized weights.
 * W: `rows` rows of `cols` values of type `wtype` (row-major, mr_row_size(wtype, cols) bytes per row).
 * X: ncols activation columns of `cols` floats (column j at X + j*cols).
 * Y: ncols output columns of `rows` floats (column j at Y + j*rows): Y[j][r] = dot(W[r], X[j]).
 * The activations are converted to the weight type's partner type once; every (r, j) result is
 * computed the same way whatever ncols and the thread count, so a batch equals one column at a time
 * bit for bit.
 * Kernels: those of the ISA in use (mr_isa(); MOERUN_ISA=scalar|avx2|avx512), see quant_simd.h.
 * One column (decode) streams the rows once (GEMV); several columns go four at a time through the
 * type's 4-column kernel where it has one (GEMM). Work is split in row chunks over `pool` (may be
 * NULL: calling thread only). Returns 0, or -1 with mr_set_error (unknown type, cols not a multiple
 * of the block size, no dot product for the type, out of memory). */
#ifndef MR_MATMUL_H
#define MR_MATMUL_H
#include <stdint.h>
#include "base/pool.h"

int mr_matmul(mr_pool *pool, const void *W, int wtype, int64_t rows, int64_t cols,
              const float *X, int64_t ncols, float *Y);

/* Several independent products Y_i = W_i X_i with one dispatch of the pool instead of one per
 * product (a MoE layer in decode multiplies 2 x top-k small matrices): tasks whose activations are
 * the same (same X pointer, ncols, cols and partner type) convert them once, then the row chunks of
 * all tasks are handed out together. Every Y element is computed exactly as mr_matmul computes it.
 * Tasks with rows or ncols 0 are skipped. Returns 0, or -1 with mr_set_error as mr_matmul. */
typedef struct {
    const void *W; int wtype; int64_t rows, cols;
    const float *X; int64_t ncols;
    float *Y;
} mr_matmul_task;
int mr_matmul_many(mr_pool *pool, const mr_matmul_task *tasks, int n);
#endif
