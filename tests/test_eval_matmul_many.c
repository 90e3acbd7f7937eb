/* mr_matmul_many (several products in one dispatch, shared activation conversions) gives exactly the
 * bits of one mr_matmul per product, for several weight types, column counts (GEMV, 4-column GEMM with
 * leftovers), shared and distinct activations, empty tasks, 1 and 2 threads; errors are reported. */
#include "test.h"
#include "simd_data.h"
#include "quant/matmul.h"
#include "quant/quant_simd.h"
#include "base/pool.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static void test_many_equals_single(void) {
    const int types[] = {MR_TYPE_Q4_0, MR_TYPE_Q8_0, MR_TYPE_Q4_K, MR_TYPE_Q6_K, MR_TYPE_IQ4_XS, MR_TYPE_F32, MR_TYPE_F16};
    const int ncols[] = {1, 1, 5, 9, 4, 0, 3};
    enum { NT = 14, COLS = 512 };
    mr_pool *pools[2] = {NULL, mr_pool_create(2)};
    CHECK(pools[1] != NULL, "pool");
    mr_matmul_task tk[NT];
    mr_mat M[NT];
    void *W[NT];
    float *X[NT], *Y[NT], *Yref[NT];
    for (int i = 0; i < NT; i++) {
        const int type = types[i % 7];
        const int64_t rows = 29 + 7 * i;
        W[i] = malloc(mr_row_size(type, COLS) * (size_t)rows);
        sd_weights(type, W[i], COLS * rows, 0);
        const int nc = ncols[i / 2 % 7];
        /* odd tasks share the previous task's activations (same pointer, like gate and up) */
        if (i % 2 == 1 && ncols[(i - 1) / 2 % 7] == nc) X[i] = X[i - 1];
        else {
            X[i] = malloc(sizeof(float) * COLS * (size_t)(nc ? nc : 1));
            for (int k = 0; k < COLS * (nc ? nc : 1); k++) X[i][k] = sd_normalish();
        }
        Y[i] = malloc(sizeof(float) * (size_t)rows * (nc ? nc : 1));
        Yref[i] = malloc(sizeof(float) * (size_t)rows * (nc ? nc : 1));
        M[i] = (mr_mat){.data = W[i], .type = type, .rows = rows, .cols = COLS};
        tk[i] = (mr_matmul_task){.w = &M[i], .X = X[i], .ncols = nc, .Y = Y[i]};
    }
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < NT; i++) {
            for (int64_t k = 0; k < M[i].rows * (tk[i].ncols ? tk[i].ncols : 1); k++) Y[i][k] = NAN;
            if (tk[i].ncols)
                CHECK(mr_matmul(pools[p], W[i], M[i].type, M[i].rows, COLS, X[i], tk[i].ncols, Yref[i]) == 0, "%s", mr_get_error());
        }
        CHECK(mr_matmul_many(pools[p], tk, NT) == 0, "many: %s", mr_get_error());
        for (int i = 0; i < NT; i++) {
            if (!tk[i].ncols) { CHECK(isnan(Y[i][0]), "task %d with no columns wrote its output", i); continue; }
            CHECK(!memcmp(Y[i], Yref[i], sizeof(float) * (size_t)(M[i].rows * tk[i].ncols)),
                  "task %d (%s, %lld columns, %d threads) differs from mr_matmul", i, mr_type_name(M[i].type),
                  (long long)tk[i].ncols, mr_pool_size(pools[p]));
        }
    }
    for (int i = 0; i < NT; i++) {
        free(W[i]); free(Y[i]); free(Yref[i]);
        if (!(i % 2 == 1 && X[i] == X[i - 1])) free(X[i]);
    }
    mr_pool_free(pools[1]);
    CHECK(mr_matmul_many(NULL, tk, 0) == 0, "no tasks");
}

/* one column through mr_matmul (the prepared-activation GEMV where the type has one, gemv_avx512.c)
 * equals the ISA's vec_dot row by row, for even and odd numbers of blocks per row */
static void test_gemv_equals_vec_dot(void) {
    const int types[] = {MR_TYPE_Q4_0, MR_TYPE_Q8_0, MR_TYPE_Q4_K};
    for (int ti = 0; ti < 3; ti++)
        for (int nb = 1; nb <= 9; nb++) {
            const int type = types[ti], bs = mr_type_get(type)->block_size;
            const int64_t cols = (int64_t)bs * nb, rows = 13;
            const int xtype = mr_type_get(type)->vec_dot_type;
            uint8_t *W = malloc(mr_row_size(type, cols) * rows), *xq = malloc(mr_row_size(xtype, cols));
            float *X = malloc(sizeof(float) * cols), Y[13], ref;
            sd_weights(type, W, cols * rows, 0);
            for (int64_t i = 0; i < cols; i++) X[i] = sd_normalish();
            CHECK(mr_matmul(NULL, W, type, rows, cols, X, 1, Y) == 0, "%s", mr_get_error());
            mr_kern_get(xtype, mr_isa())->from_float(X, xq, cols);
            for (int r = 0; r < rows; r++) {
                mr_type_vec_dot(type)((int)cols, &ref, W + mr_row_size(type, cols) * r, xq);
                CHECK(!memcmp(&ref, &Y[r], sizeof ref), "%s, %d blocks, row %d: %.9g != vec_dot %.9g", mr_type_name(type),
                      nb, r, Y[r], ref);
            }
            free(W); free(xq); free(X);
        }
}

static void test_many_errors(void) {
    float x[64] = {0}, y[8];
    uint8_t w[8 * 64 * 4] = {0};
    mr_mat m[2] = {{.data = w, .type = MR_TYPE_F32, .rows = 8, .cols = 64}, {.data = w, .type = MR_TYPE_Q4_0, .rows = 8, .cols = 48}};
    mr_matmul_task tk[2] = {{.w = &m[0], .X = x, .ncols = 1, .Y = y}, {.w = &m[1], .X = x, .ncols = 1, .Y = y}};
    CHECK(mr_matmul_many(NULL, tk, 2) == -1, "cols not a multiple of the block size accepted");
    CHECK(strstr(mr_get_error(), "does not fit") != NULL, "error: %s", mr_get_error());
    m[1].type = 9999;
    CHECK(mr_matmul_many(NULL, tk, 2) == -1, "unknown type accepted");
}

int main(void) {
    RUN(test_many_equals_single);
    RUN(test_gemv_equals_vec_dot);
    RUN(test_many_errors);
    return t_finish();
}
