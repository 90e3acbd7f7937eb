/* Repacked copies of weight matrices for faster kernels (today: Q4_0 under AVX-512, 16 rows per
 * group, see quant_simd.h / q4_0_avx512.c). The model registers its tensors at load
 * (mr_repack_add: the copy is made then) and removes them when it is freed; the matrix kernels
 * (matmul.c, matmul_act.c) look a weight pointer up with mr_repack_find and use the copy when the
 * pointer is a registered tensor's row 0 of a group. Results are the same bits either way (every
 * kernel of the type uses the same numerics); the copy only makes the products faster. */
#ifndef MR_REPACK_H
#define MR_REPACK_H
#include <stddef.h>
#include <stdint.h>
#include "base/pool.h"

/* Would a matrix of this type and row length be repacked under the ISA in use? */
int mr_repack_applies(int type, int64_t cols);
/* Repack `rows` rows (a multiple of 16) of `cols` values of type `type` starting at data (split over
 * pool) and register the copy. 0 on success, 1 if not applicable (nothing done), -1 out of memory. */
int mr_repack_add(mr_pool *pool, const void *data, int type, int64_t cols, int64_t rows);
void mr_repack_remove(const void *data);   /* no-op if data is not registered */
/* The repacked group holding row 0 of the matrix at W (rows of `cols` values of `type`), or NULL if W
 * is not at the start of a 16-row group of a registered tensor with that row length; *rows_left is
 * set to the rows from W to the end of that tensor. */
const void *mr_repack_find(const void *W, int type, int64_t cols, int64_t *rows_left);
/* bytes held by the copies (statistics) */
uint64_t mr_repack_bytes(void);
#endif
