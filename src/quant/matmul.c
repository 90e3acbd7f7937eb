/* Straightforward threaded matmul: activations converted once to the partner type, rows split
 * across threads, one vec_dot per (row, column). Faster tiled kernels replace the inner loop but
 * must keep its per-element result. */
#include "quant/matmul.h"
#include "quant/quant.h"
#include "base/base.h"

#include <stdlib.h>

typedef struct {
    const uint8_t *W;
    size_t w_row;          /* bytes per weight row */
    const uint8_t *Xq;
    size_t x_row;          /* bytes per converted activation column */
    int64_t rows, cols, ncols;
    float *Y;
    mr_vec_dot_fn dot;
} mr_matmul_job;

static void mr_matmul_worker(void *arg, int ith, int nth) {
    mr_matmul_job *j = arg;
    long lo, hi;
    mr_split((long)j->rows, ith, nth, &lo, &hi);
    for (int64_t c = 0; c < j->ncols; c++) {
        const uint8_t *x = j->Xq + (size_t)c * j->x_row;
        float *y = j->Y + c * j->rows;
        for (long r = lo; r < hi; r++) j->dot((int)j->cols, &y[r], j->W + (size_t)r * j->w_row, x);
    }
}

int mr_matmul(mr_pool *pool, const void *W, int wtype, int64_t rows, int64_t cols,
              const float *X, int64_t ncols, float *Y) {
    const mr_type_traits *wt = mr_type_get(wtype);
    if (!wt || !wt->vec_dot) { mr_set_error("matmul: no dot product for weight type %s", mr_type_name(wtype)); return -1; }
    const mr_type_traits *xt = mr_type_get(wt->vec_dot_type);
    size_t w_row = mr_row_size(wtype, cols), x_row = mr_row_size(wt->vec_dot_type, cols);
    if (!w_row || !x_row || !xt) { mr_set_error("matmul: row of %lld values does not fit type %s", (long long)cols, wt->name); return -1; }
    if (wt->vec_dot_type != MR_TYPE_F32 && !xt->from_float) { mr_set_error("matmul: cannot convert activations to %s", xt->name); return -1; }
    if (rows <= 0 || ncols <= 0) return 0;
    uint8_t *xq = NULL;
    const uint8_t *xs = (const uint8_t *)X;
    if (wt->vec_dot_type != MR_TYPE_F32) {
        xq = malloc(x_row * (size_t)ncols);
        if (!xq) { mr_set_error("matmul: out of memory"); return -1; }
        for (int64_t c = 0; c < ncols; c++) xt->from_float(X + c * cols, xq + (size_t)c * x_row, cols);
        xs = xq;
    }
    mr_matmul_job job = {W, w_row, xs, x_row, rows, cols, ncols, Y, mr_type_vec_dot(wtype)};
    mr_pool_run(pool, mr_matmul_worker, &job);
    free(xq);
    return 0;
}
