/* mr_matmul: for every type with a dot product and every ISA, a batch of columns equals the columns
 * one at a time bit for bit, whatever the thread count; and every result matches the scalar
 * reference (the activations converted with the partner type's reference quantizer) within
 * 1e-5 of sum |w||x|. */
#include "test.h"
#include "simd_data.h"
#include "quant/matmul.h"
#include "quant/quant_simd.h"
#include "base/pool.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define NC 11 /* two groups of four columns and three left over */

static int64_t cols_for(int bs) { return bs == 1 ? 67 : bs <= 32 ? 192 : bs * 2; }

/* Y for one type under the current ISA: batch vs single columns (bit for bit) and vs scalar ref */
static void check_type(int type, mr_pool **pools, int npools) {
    const mr_type_traits *t = mr_type_get(type), *xt = mr_type_get(t->vec_dot_type);
    const int64_t rows = 37, cols = cols_for(t->block_size);
    size_t wrow = mr_row_size(type, cols), xrow = mr_row_size(t->vec_dot_type, cols);
    uint8_t *W = malloc(wrow * rows), *xq = malloc(xrow);
    float *X = malloc(sizeof(float) * cols * NC), *Y = malloc(sizeof(float) * rows * NC);
    float *Y1 = malloc(sizeof(float) * rows), *wf = malloc(sizeof(float) * cols), *xf = malloc(sizeof(float) * cols);
    sd_weights(type, W, cols * rows, 0);
    for (int64_t i = 0; i < cols * NC; i++) X[i] = sd_normalish();
    for (int p = 0; p < npools; p++) {
        for (int64_t i = 0; i < rows * NC; i++) Y[i] = NAN;
        CHECK(mr_matmul(pools[p], W, type, rows, cols, X, NC, Y) == 0, "%s: %s", t->name, mr_get_error());
        for (int j = 0; j < NC; j++) {
            CHECK(mr_matmul(pools[p], W, type, rows, cols, X + j * cols, 1, Y1) == 0, "%s", mr_get_error());
            if (memcmp(Y1, Y + j * rows, sizeof(float) * rows) != 0) {
                int r = 0;
                while (memcmp(&Y1[r], &Y[j * rows + r], sizeof(float))) r++;
                CHECK(0, "%s %s threads=%d col %d row %d: batch %.9g != single %.9g", t->name, mr_isa_name(mr_isa()),
                      mr_pool_size(pools[p]), j, r, Y[j * rows + r], Y1[r]);
                break;
            }
        }
    }
    /* against the scalar reference */
    double worst = 0;
    for (int j = 0; j < NC; j++) {
        const uint8_t *x = (const uint8_t *)(X + j * cols);
        if (t->vec_dot_type != MR_TYPE_F32) {
            xt->from_float(X + j * cols, xq, cols);
            x = xq;
        }
        if (xt->to_float) xt->to_float(x, xf, cols);
        else { /* Q8_1: d * q */
            for (int64_t b = 0; b < cols / 32; b++) {
                uint16_t dh;
                memcpy(&dh, x + 36 * b, 2);
                for (int i = 0; i < 32; i++) xf[32 * b + i] = mr_fp16_to_fp32(dh) * (int8_t)x[36 * b + 4 + i];
            }
        }
        for (int64_t r = 0; r < rows; r++) {
            float ref;
            t->vec_dot((int)cols, &ref, W + r * wrow, x);
            t->to_float(W + r * wrow, wf, cols);
            double bound = 0;
            for (int64_t i = 0; i < cols; i++) bound += fabs((double)wf[i] * xf[i]);
            double err = fabs((double)Y[j * rows + r] - ref), rel = bound > 0 ? err / bound : err;
            if (rel > worst) worst = rel;
        }
    }
    CHECK(worst <= 1e-5, "%s %s: matmul vs scalar reference: rel err %.3g", t->name, mr_isa_name(mr_isa()), worst);
    free(W); free(xq); free(X); free(Y); free(Y1); free(wf); free(xf);
}

static void test_batch_equals_single(void) {
    mr_pool *pools[3] = {NULL, mr_pool_create(2), mr_pool_create(3)};
    CHECK(pools[1] && pools[2], "pool: %s", mr_get_error());
    int best = mr_cpu_best_isa(), n = 0;
    for (int isa = MR_ISA_SCALAR; isa < MR_ISA_COUNT; isa++) {
        if (mr_set_isa(isa)) continue; /* not this CPU's */
        for (int type = 0; type < MR_TYPE_COUNT; type++) {
            const mr_type_traits *t = mr_type_get(type);
            if (!t || !t->vec_dot || !t->to_float) continue;
            const mr_type_traits *xt = mr_type_get(t->vec_dot_type);
            if (!xt || (t->vec_dot_type != MR_TYPE_F32 && !xt->from_float)) continue;
            check_type(type, pools, 3);
            n++;
        }
    }
    mr_set_isa(best);
    CHECK(n >= 20, "only %d (type, ISA) pairs checked", n);
    mr_pool_free(pools[1]);
    mr_pool_free(pools[2]);
}

/* many chunks: GEMV rows must equal the ISA's vec_dot row by row */
static void test_gemv_many_rows(void) {
    mr_pool *pool = mr_pool_create(2);
    const int type = MR_TYPE_Q4_K;
    const int64_t rows = 1001, cols = 512;
    size_t wrow = mr_row_size(type, cols), xrow = mr_row_size(MR_TYPE_Q8_K, cols);
    uint8_t *W = malloc(wrow * rows), *xq = malloc(xrow);
    float *X = malloc(sizeof(float) * cols), *Y = malloc(sizeof(float) * rows);
    sd_weights(type, W, cols * rows, 0);
    for (int64_t i = 0; i < cols; i++) X[i] = sd_normalish();
    for (int isa = MR_ISA_SCALAR; isa < MR_ISA_COUNT; isa++) {
        if (mr_set_isa(isa)) continue;
        CHECK(mr_matmul(pool, W, type, rows, cols, X, 1, Y) == 0, "%s", mr_get_error());
        mr_type_get(MR_TYPE_Q8_K)->from_float(X, xq, cols);
        mr_vec_dot_fn dot = mr_type_vec_dot(type);
        int bad = 0;
        for (int64_t r = 0; r < rows; r++) {
            float s;
            dot((int)cols, &s, W + r * wrow, xq);
            bad += memcmp(&s, &Y[r], sizeof s) != 0;
        }
        CHECK(bad == 0, "%s: %d of %lld rows differ from vec_dot", mr_isa_name(isa), bad, (long long)rows);
    }
    mr_set_isa(mr_cpu_best_isa());
    free(W); free(xq); free(X); free(Y);
    mr_pool_free(pool);
}

static void test_errors(void) {
    float x[256] = {0}, y[4]; /* 256: the q8_K case converts a whole row of activations before it fails */
    uint8_t w[64] = {0};
    CHECK(mr_matmul(NULL, w, MR_TYPE_Q4_0, 1, 48, x, 1, y) == -1, "48 values accepted as q4_0 rows");
    CHECK(mr_matmul(NULL, w, 12345, 1, 32, x, 1, y) == -1, "unknown type accepted");
    CHECK(mr_matmul(NULL, w, MR_TYPE_Q8_K, 1, 256, x, 1, y) == -1, "q8_K has no dot product");
}

int main(void) {
    RUN(test_errors);
    RUN(test_gemv_many_rows);
    RUN(test_batch_equals_single);
    return t_finish();
}
