/* matmul_act: products on activations converted once equal mr_matmul bit for bit, for every type
 * with a dot product, every ISA, 1/2/3/4/7/9 columns (a last group of three goes zero-padded through
 * the 4-column kernel), strided inputs and outputs, several products in one dispatch (1, 2 and 3
 * threads), and gathered columns. */
#include "test.h"
#include "simd_data.h"
#include "quant/matmul.h"
#include "quant/quant_simd.h"
#include "base/pool.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static int64_t cols_for(int bs) { return bs == 1 ? 67 : bs <= 32 ? 192 : bs * 2; }

static void check_type(int type, mr_pool **pools, int npools) {
    const mr_type_traits *t = mr_type_get(type);
    const int64_t rowsA = 37, rowsB = 300, cols = cols_for(t->block_size), ldx = cols + 5;
    static const int ncs[] = {1, 2, 3, 4, 7, 9};
    const size_t wrow = mr_row_size(type, cols);
    uint8_t *WA = malloc(wrow * rowsA), *WB = malloc(wrow * rowsB);
    float *X = malloc(sizeof(float) * ldx * 9), *Xc = malloc(sizeof(float) * cols * 9);
    float *RA = malloc(sizeof(float) * rowsA * 9), *RB = malloc(sizeof(float) * rowsB * 9);
    const int64_t ldyA = rowsA + rowsB;  /* both outputs interleaved in one buffer */
    float *Y = malloc(sizeof(float) * ldyA * 9);
    sd_weights(type, WA, cols * rowsA, 0);
    sd_weights(type, WB, cols * rowsB, 0);
    for (int64_t i = 0; i < ldx * 9; i++) X[i] = sd_normalish();
    for (int j = 0; j < 9; j++) memcpy(Xc + j * cols, X + j * ldx, sizeof(float) * cols);
    for (size_t k = 0; k < sizeof ncs / sizeof ncs[0]; k++) {
        const int nc = ncs[k];
        CHECK(mr_matmul(NULL, WA, type, rowsA, cols, Xc, nc, RA) == 0, "%s", mr_get_error());
        CHECK(mr_matmul(NULL, WB, type, rowsB, cols, Xc, nc, RB) == 0, "%s", mr_get_error());
        for (int p = 0; p < npools; p++) {
            mr_mm_act a;
            CHECK(mr_mm_act_make(pools[p], &a, type, X, cols, nc, ldx) == 0, "%s", mr_get_error());
            for (int64_t i = 0; i < ldyA * nc; i++) Y[i] = NAN;
            mr_mm_part parts[2] = {{WA, type, rowsA, &a, Y, ldyA, NULL}, {WB, type, rowsB, &a, Y + rowsA, ldyA, NULL}};
            CHECK(mr_matmul_parts(pools[p], parts, 2) == 0, "%s", mr_get_error());
            int bad = 0;
            for (int j = 0; j < nc; j++) {
                bad += memcmp(Y + j * ldyA, RA + j * rowsA, sizeof(float) * rowsA) != 0;
                bad += memcmp(Y + j * ldyA + rowsA, RB + j * rowsB, sizeof(float) * rowsB) != 0;
            }
            CHECK(bad == 0, "%s %s threads=%d ncols=%d: parts differ from mr_matmul in %d columns", t->name,
                  mr_isa_name(mr_isa()), mr_pool_size(pools[p]), nc, bad);
            /* gathered columns (reversed, one twice) */
            if (nc >= 3) {
                int idx[5] = {nc - 1, 0, nc - 1, 1, nc / 2};
                mr_mm_act g;
                CHECK(mr_mm_act_alloc(&g, a.vdtype, cols, 5, 1) == 0, "%s", mr_get_error());
                mr_mm_act_gather(&g, &a, idx, 5);
                float *Yg = malloc(sizeof(float) * rowsB * 5);
                CHECK(mr_mm_rows(&g, type, WB, NULL, 0, rowsB, Yg, rowsB) == 0, "%s", mr_get_error());
                int badg = 0;
                for (int c = 0; c < 5; c++) badg += memcmp(Yg + c * rowsB, RB + idx[c] * rowsB, sizeof(float) * rowsB) != 0;
                CHECK(badg == 0, "%s %s ncols=%d: gathered columns differ in %d of 5", t->name, mr_isa_name(mr_isa()), nc, badg);
                free(Yg);
                mr_mm_act_free(&g);
            }
            mr_mm_act_free(&a);
        }
    }
    free(WA); free(WB); free(X); free(Xc); free(RA); free(RB); free(Y);
}

static void test_parts_equal_matmul(void) {
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

static void test_errors(void) {
    float x[256] = {0}, y[4];
    uint8_t w[512] = {0};
    mr_mm_act a;
    CHECK(mr_mm_act_make(NULL, &a, 12345, x, 32, 1, 32) == -1, "unknown type accepted");
    CHECK(mr_mm_act_make(NULL, &a, MR_TYPE_Q4_0, x, 48, 1, 48) == -1, "48 values accepted as q4_0 activations");
    CHECK(mr_mm_act_make(NULL, &a, MR_TYPE_Q4_0, x, 64, 1, 64) == 0, "%s", mr_get_error());
    /* Q8_0 activations with Q4_K weights (partner Q8_K): refused */
    mr_mm_part p = {w, MR_TYPE_Q4_K, 1, &a, y, 1, NULL};
    CHECK(mr_matmul_parts(NULL, &p, 1) == -1, "partner mismatch accepted");
    mr_mm_act_free(&a);
}

int main(void) {
    RUN(test_errors);
    RUN(test_parts_equal_matmul);
    return t_finish();
}
