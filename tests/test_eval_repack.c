/* Repacked Q4_0 weights (quant/repack.h, q4_0_avx512.c): the registry's lookups, and every product
 * through the repacked copy equal to the plain kernels bit for bit (mr_matmul with 1..9 columns,
 * mr_mm_rows on row ranges that start and end inside 16-row groups, a matrix in the middle of a
 * registered tensor), and close to a double-precision dot product. */
#include "test.h"
#include "simd_data.h"
#include "quant/matmul.h"
#include "quant/matmul_act.h"
#include "quant/quant_simd.h"
#include "quant/repack.h"
#include "quant/quant_blocks.h"
#include "base/pool.h"

#include <math.h>
#include <stdlib.h>

enum { COLS = 320, ROWS = 96, NC = 9 }; /* 10 blocks per row, 6 groups */

static void test_registry(void) {
    if (!mr_repack_applies(MR_TYPE_Q4_0, COLS)) { printf("ok repack_registry_skipped (no AVX-512)\n"); return; }
    const size_t wr = mr_row_size(MR_TYPE_Q4_0, COLS);
    uint8_t *W = malloc(wr * ROWS);
    sd_weights(MR_TYPE_Q4_0, W, (int64_t)COLS * ROWS, 0);
    CHECK(mr_repack_find(W, MR_TYPE_Q4_0, COLS, NULL) == NULL, "found before add");
    CHECK(mr_repack_add(NULL, W, MR_TYPE_Q4_0, COLS, 40) == 1, "40 rows (not whole groups) accepted");
    CHECK(mr_repack_add(NULL, W, MR_TYPE_Q8_0, 256, 32) == 1, "Q8_0 accepted");
    CHECK(mr_repack_add(NULL, W, MR_TYPE_Q4_0, COLS, ROWS) == 0, "add");
    int64_t left = 0;
    const uint8_t *r0 = mr_repack_find(W, MR_TYPE_Q4_0, COLS, &left);
    CHECK(r0 != NULL && left == ROWS, "row 0: %p, %lld rows left", (const void *)r0, (long long)left);
    const uint8_t *r2 = mr_repack_find(W + 32 * wr, MR_TYPE_Q4_0, COLS, &left);
    CHECK(r2 == r0 + 2 * (COLS / 32) * MR_Q4_0_RP_BLOCK_BYTES && left == ROWS - 32, "group 2");
    CHECK(mr_repack_find(W + 8 * wr, MR_TYPE_Q4_0, COLS, NULL) == NULL, "row 8 is not a group start");
    CHECK(mr_repack_find(W, MR_TYPE_Q4_0, COLS / 2, NULL) == NULL, "another row length");
    CHECK(mr_repack_find(W + ROWS * wr, MR_TYPE_Q4_0, COLS, NULL) == NULL, "past the end");
    CHECK(mr_repack_bytes() >= wr * ROWS, "bytes %llu", (unsigned long long)mr_repack_bytes());
    mr_repack_remove(W);
    CHECK(mr_repack_find(W, MR_TYPE_Q4_0, COLS, NULL) == NULL, "found after remove");
    mr_repack_remove(W); /* no-op */
    free(W);
}

static void test_products(void) {
    if (!mr_repack_applies(MR_TYPE_Q4_0, COLS)) { printf("ok repack_products_skipped (no AVX-512)\n"); return; }
    const size_t wr = mr_row_size(MR_TYPE_Q4_0, COLS);
    const int64_t total = 2 * ROWS; /* the matrix is the second half of a registered tensor */
    uint8_t *T = malloc(wr * total), *W = T + wr * ROWS;
    float *X = malloc(sizeof(float) * COLS * NC), *Yp = malloc(sizeof(float) * ROWS * NC), *Yr = malloc(sizeof(float) * ROWS * NC);
    sd_weights(MR_TYPE_Q4_0, T, (int64_t)COLS * total, 0);
    for (int i = 0; i < COLS * NC; i++) X[i] = sd_normalish();
    mr_pool *pool = mr_pool_create(2);
    for (int nc = 1; nc <= NC; nc++) {
        CHECK(mr_matmul(pool, W, MR_TYPE_Q4_0, ROWS, COLS, X, nc, Yp) == 0, "plain");
        CHECK(mr_repack_add(pool, T, MR_TYPE_Q4_0, COLS, total) == 0, "add");
        CHECK(mr_matmul(pool, W, MR_TYPE_Q4_0, ROWS, COLS, X, nc, Yr) == 0, "repacked");
        CHECK(!memcmp(Yp, Yr, sizeof(float) * ROWS * (size_t)nc), "%d columns: mr_matmul repacked != plain", nc);
        /* row ranges cutting groups: rows [5, 77) through mr_mm_rows */
        mr_mm_act a;
        CHECK(mr_mm_act_make(pool, &a, MR_TYPE_Q4_0, X, COLS, nc, COLS) == 0, "act");
        CHECK(a.Xr != NULL, "no prepared columns for the repacked kernel");
        for (int i = 0; i < ROWS * nc; i++) Yr[i] = NAN;
        CHECK(mr_mm_rows(&a, MR_TYPE_Q4_0, W, 5, 77, Yr, ROWS) == 0, "rows");
        int bad = 0;
        for (int c = 0; c < nc; c++)
            for (int r = 0; r < ROWS; r++) {
                const float *p = &Yp[c * ROWS + r], *q = &Yr[c * ROWS + r];
                if (r >= 5 && r < 77 ? memcmp(p, q, sizeof *p) != 0 : !isnan(*q)) bad++;
            }
        CHECK(bad == 0, "%d columns: %d values of mr_mm_rows [5, 77) wrong or written outside", nc, bad);
        mr_mm_act_free(&a);
        mr_repack_remove(T);
    }
    /* against double sums of the quantized values (column 0) */
    const mr_type_traits *q8 = mr_type_get(MR_TYPE_Q8_0);
    uint8_t *xq = malloc(mr_row_size(MR_TYPE_Q8_0, COLS));
    q8->from_float(X, xq, COLS);
    double worst = 0;
    for (int r = 0; r < ROWS; r++) {
        const mr_block_q4_0 *w = (const mr_block_q4_0 *)(W + wr * r);
        const mr_block_q8_0 *y = (const mr_block_q8_0 *)xq;
        double ref = 0, mag = 0;
        for (int b = 0; b < COLS / 32; b++) {
            double dd = (double)mr_fp16_to_fp32(w[b].d) * mr_fp16_to_fp32(y[b].d);
            for (int i = 0; i < 16; i++) {
                int lo = (w[b].qs[i] & 15) - 8, hi = (w[b].qs[i] >> 4) - 8;
                ref += dd * (lo * y[b].qs[i] + hi * y[b].qs[i + 16]);
                mag += fabs(dd) * (abs(lo * y[b].qs[i]) + abs(hi * y[b].qs[i + 16]));
            }
        }
        double e = fabs(Yr[r] - ref) / (mag + 1e-30);
        if (e > worst) worst = e;
    }
    CHECK(worst < 1e-6, "relative error %g against double sums", worst);
    mr_pool_free(pool);
    free(T); free(X); free(Yp); free(Yr); free(xq);
}

int main(void) {
    RUN(test_registry);
    RUN(test_products);
    return t_finish();
}
