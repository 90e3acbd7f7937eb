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

/* In place (paged experts, read into pager slots): under the ISA in use, a matrix whose layout only
 * moves the plain bytes (mr_repack_kern.i4_head: IQ4_NL, MXFP4, Q4_0, Q8_0 on x86) is repacked where
 * it lies, through staging (room for the matrix's bytes, used as scratch), in one thread.
 * mr_repack_in_place: 0 done, -1 when the matrix does not apply (nothing changed).
 * mr_repack_undo: the plain rows of such a matrix back into dst (the products that need plain rows).
 * mr_repack_view: a handle for matrices repacked in place: mr_repack_at(view, W, ...) is W itself
 * (rows_left = rows), so the engine runs the layout's kernel on them; pass it only with such rows.
 * NULL when the matrix does not apply or out of memory (error set); free with mr_repack_free. */
int mr_repack_in_place_applies(int type, int64_t cols, int64_t rows);
int mr_repack_in_place(void *data, void *staging, int type, int64_t cols, int64_t rows);
int mr_repack_undo(const void *data, void *dst, int type, int64_t cols, int64_t rows);
mr_repacked *mr_repack_view(int type, int64_t cols, int64_t rows);
int mr_repack_is_view(const mr_repacked *rp); /* 1 for a mr_repack_view handle */
#endif
