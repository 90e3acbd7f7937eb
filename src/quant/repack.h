/* Repacked copies of weight matrices for faster kernels (row-interleaved layouts, quant_simd.h
 * mr_repack_kern; today Q4_0 under AVX-512 in 16-row groups). The owner of a weight (the model)
 * makes the copy at load with mr_repack_make and hands it with the weight to the matrix engine
 * (mr_mat.rp, mr_mm_part.rp, matmul.h); there is no global registry. Results are the same bits
 * with or without a copy (the repacked kernels share the numerics of the type's dot product); the
 * copy only makes products faster. A copy belongs to the ISA that made it: under another ISA the
 * engine ignores it. */
#ifndef MR_REPACK_H
#define MR_REPACK_H
#include <stddef.h>
#include <stdint.h>
#include "base/pool.h"

typedef struct mr_repacked mr_repacked;

/* Would a matrix of this type and row length be repacked under the ISA in use? */
int mr_repack_applies(int type, int64_t cols);
/* Repack `rows` rows (whole groups only: rows % group rows == 0) of `cols` values of type `type`
 * at data, split over pool. Returns the copy, or NULL: *err = 0 when the matrix does not apply
 * (nothing done), *err = -1 out of memory (error set). */
mr_repacked *mr_repack_make(mr_pool *pool, const void *data, int type, int64_t cols, int64_t rows, int *err);
void mr_repack_free(mr_repacked *rp);
uint64_t mr_repack_size(const mr_repacked *rp);   /* bytes of the copy */

/* The repacked group holding the row at W of the matrix copied in rp (W inside the copied rows, on
 * a group boundary, same type and row length, and the copy made for `isa`), or NULL; *rows_left:
 * the rows from W to the end of the copied rows. Reads only rp (no lock). */
const void *mr_repack_at(const mr_repacked *rp, const void *W, int type, int64_t cols, int isa, int64_t *rows_left);
/* rows per group when rp is a copy of a type/cols matrix made for isa, else 1 */
int mr_repack_group_rows(const mr_repacked *rp, int type, int64_t cols, int isa);
#endif
