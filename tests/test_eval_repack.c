/* Repacked weights (quant/repack.h, quant_simd.h mr_repack_kern): the copy's lookups, and every
 * product through a repacked copy equal to the plain kernels bit for bit (mr_matmul_many with 1..9
 * columns, mr_mm_rows on row ranges that start and end inside groups, a matrix in the middle of a
 * repacked tensor), under every ISA that has a layout for the type; the layouts that only move
 * the bytes also in place (pager slots: through a view, whole groups only, undone exactly); and Q4_0
 * close to a double-precision dot product. */
#include "test.h"
#include "simd_data.h"
#include "quant/matmul.h"
#include "quant/quant_simd.h"
#include "quant/repack.h"
#include "quant/quant_blocks.h"
#include "base/pool.h"

#include <math.h>
#include <stdlib.h>

enum { COLS = 512, ROWS = 96, NC = 9 }; /* 2 super-blocks / 16 blocks per row */

static void test_lookup(void) {
    if (!mr_repack_applies(MR_TYPE_Q4_0, COLS)) { printf("ok repack_lookup_skipped (no Q4_0 layout here)\n"); return; }
    const size_t wr = mr_row_size(MR_TYPE_Q4_0, COLS);
    uint8_t *W = malloc(wr * ROWS);
    sd_weights(MR_TYPE_Q4_0, W, (int64_t)COLS * ROWS, 0);
    int err = 1;
    CHECK(mr_repack_make(NULL, W, MR_TYPE_Q4_0, COLS, 36, &err) == NULL && err == 0, "36 rows (not whole groups of 8 or 16) accepted");
    CHECK(mr_repack_make(NULL, W, MR_TYPE_F32, 8, 32, &err) == NULL && err == 0, "F32 accepted");
    mr_repacked *rp = mr_repack_make(NULL, W, MR_TYPE_Q4_0, COLS, ROWS, &err);
    CHECK(rp != NULL && err == 0, "make");
    const int gr = mr_repack_group_rows(rp, MR_TYPE_Q4_0, COLS, mr_isa());
    CHECK(gr > 1 && ROWS % (2 * gr) == 0, "group rows %d", gr);
    int64_t left = 0;
    const uint8_t *r0 = mr_repack_at(rp, W, MR_TYPE_Q4_0, COLS, mr_isa(), &left);
    CHECK(r0 != NULL && left == ROWS, "row 0: %p, %lld rows left", (const void *)r0, (long long)left);
    const uint8_t *r2 = mr_repack_at(rp, W + 2 * gr * wr, MR_TYPE_Q4_0, COLS, mr_isa(), &left);
    CHECK(r2 != NULL && left == ROWS - 2 * gr && (uint64_t)(r2 - r0) == 2 * mr_repack_size(rp) / (ROWS / gr), "group 2");
    CHECK(mr_repack_at(rp, W + wr, MR_TYPE_Q4_0, COLS, mr_isa(), NULL) == NULL, "row 1 is not a group start");
    CHECK(mr_repack_at(rp, W, MR_TYPE_Q4_0, COLS / 2, mr_isa(), NULL) == NULL, "another row length");
    CHECK(mr_repack_at(rp, W + ROWS * wr, MR_TYPE_Q4_0, COLS, mr_isa(), NULL) == NULL, "past the end");
    CHECK(mr_repack_at(rp, W - wr, MR_TYPE_Q4_0, COLS, mr_isa(), NULL) == NULL, "before the start");
    CHECK(mr_repack_at(rp, W, MR_TYPE_Q4_0, COLS, MR_ISA_SCALAR, NULL) == NULL, "used under another ISA");
    CHECK(mr_mm_group_rows(NULL, MR_TYPE_Q4_0, COLS) == 1, "no copy: one row per group");
    mr_repack_free(rp);
    mr_repack_free(NULL);
    free(W);
}

/* every type with a layout under `isa`: products through the copy == plain */
/* Repacked in place (paged experts' slots): the same bytes moved, products through the view equal
 * the plain ones (Yp: W x X for nc columns), row ranges inside the view only in whole groups, and
 * the plain rows back exactly. Returns 1 when the type has such a layout under this ISA. */
static int check_in_place(mr_pool *pool, int type, int isa, const uint8_t *W, const float *X, const float *Yp, int nc) {
    if (!mr_repack_in_place_applies(type, COLS, ROWS)) return 0;
    const size_t bytes = mr_row_size(type, COLS) * ROWS;
    uint8_t *S = malloc(bytes), *stage = malloc(bytes), *back = malloc(bytes);
    float *Y = malloc(sizeof(float) * ROWS * NC);
    memcpy(S, W, bytes);
    CHECK(mr_repack_in_place(S, stage, type, COLS, ROWS) == 0 && memcmp(S, W, bytes) != 0, "%s %s: in place", mr_type_name(type), mr_isa_name(isa));
    mr_repacked *v = mr_repack_view(type, COLS, ROWS);
    CHECK(v != NULL && mr_repack_is_view(v) && mr_repack_size(v) == 0, "view");
    const mr_mat m = {.data = S, .type = type, .rows = ROWS, .cols = COLS, .rp = v};
    const mr_matmul_task tk = {.w = &m, .X = X, .ncols = nc, .Y = Y};
    CHECK(mr_matmul_many(pool, &tk, 1) == 0 && !memcmp(Y, Yp, sizeof(float) * ROWS * (size_t)nc),
          "%s %s %d columns: repacked in place != plain", mr_type_name(type), mr_isa_name(isa), nc);
    const int gr = mr_repack_group_rows(v, type, COLS, isa);
    mr_mm_act a;
    CHECK(mr_mm_act_make(pool, &a, type, X, COLS, nc, COLS) == 0, "act");
    for (int i = 0; i < ROWS * nc; i++) Y[i] = NAN;
    CHECK(mr_mm_rows(&a, type, S, v, gr, ROWS, Y, ROWS) == 0, "whole groups of the view");
    int bad = 0;
    for (int c = 0; c < nc; c++)
        for (int r = 0; r < ROWS; r++)
            bad += r >= gr ? memcmp(&Y[c * ROWS + r], &Yp[c * ROWS + r], sizeof(float)) != 0 : !isnan(Y[c * ROWS + r]);
    CHECK(bad == 0, "%s %s: %d values of the view's rows [%d, %d) wrong", mr_type_name(type), mr_isa_name(isa), bad, gr, ROWS);
    CHECK(mr_mm_rows(&a, type, S, v, 5, 77, Y, ROWS) == -1, "rows cutting groups of a view computed from repacked bytes");
    mr_mm_act_free(&a);
    CHECK(mr_repack_undo(S, back, type, COLS, ROWS) == 0 && !memcmp(back, W, bytes), "%s %s: undo != the plain rows",
          mr_type_name(type), mr_isa_name(isa));
    mr_repack_free(v);
    free(S); free(stage); free(back); free(Y);
    return 1;
}

static void check_products(int isa, double *worst_q4_0) {
    static const int types[] = {MR_TYPE_Q4_0, MR_TYPE_Q8_0, MR_TYPE_Q4_K, MR_TYPE_Q6_K, MR_TYPE_IQ4_XS, MR_TYPE_IQ4_NL, MR_TYPE_MXFP4, MR_TYPE_IQ3_S, MR_TYPE_Q2_0};
    if (mr_set_isa(isa)) return;
    mr_pool *pool = mr_pool_create(2);
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int type = types[ti];
        if (!mr_repack_applies(type, COLS)) continue;
        const size_t wr = mr_row_size(type, COLS);
        const int64_t total = 2 * ROWS; /* the matrix is the second half of a repacked tensor */
        uint8_t *T = malloc(wr * total), *W = T + wr * ROWS;
        float *X = malloc(sizeof(float) * COLS * NC), *Yp = malloc(sizeof(float) * ROWS * NC), *Yr = malloc(sizeof(float) * ROWS * NC);
        sd_weights(type, T, (int64_t)COLS * total, 0);
        for (int i = 0; i < COLS * NC; i++) X[i] = sd_normalish();
        int err;
        mr_repacked *rp = mr_repack_make(pool, T, type, COLS, total, &err);
        CHECK(rp != NULL, "%s %s: make", mr_type_name(type), mr_isa_name(isa));
        const int gr = mr_repack_group_rows(rp, type, COLS, isa);
        const mr_mat m = {.data = W, .type = type, .rows = ROWS, .cols = COLS, .rp = rp};
        int in_place = 0;
        for (int nc = 1; nc <= NC; nc++) {
            CHECK(mr_matmul(pool, W, type, ROWS, COLS, X, nc, Yp) == 0, "plain");
            in_place = check_in_place(pool, type, isa, W, X, Yp, nc);
            const mr_matmul_task tk = {.w = &m, .X = X, .ncols = nc, .Y = Yr};
            CHECK(mr_matmul_many(pool, &tk, 1) == 0, "repacked: %s", mr_get_error());
            CHECK(!memcmp(Yp, Yr, sizeof(float) * ROWS * (size_t)nc), "%s %s %d columns: repacked != plain",
                  mr_type_name(type), mr_isa_name(isa), nc);
            /* row ranges cutting groups: rows [5, 77) through mr_mm_rows */
            mr_mm_act a;
            CHECK(mr_mm_act_make(pool, &a, type, X, COLS, nc, COLS) == 0, "act");
            CHECK(a.Xr != NULL || mr_kern_get(mr_mm_partner(type), isa)->rprep == NULL, "no prepared columns for the repacked kernel");
            for (int i = 0; i < ROWS * nc; i++) Yr[i] = NAN;
            CHECK(mr_mm_rows(&a, type, W, rp, 5, 77, Yr, ROWS) == 0, "rows");
            int bad = 0;
            for (int c = 0; c < nc; c++)
                for (int r = 0; r < ROWS; r++) {
                    const float *p = &Yp[c * ROWS + r], *q = &Yr[c * ROWS + r];
                    if (r >= 5 && r < 77 ? memcmp(p, q, sizeof *p) != 0 : !isnan(*q)) bad++;
                }
            CHECK(bad == 0, "%s %s %d columns: %d values of mr_mm_rows [5, 77) wrong or written outside",
                  mr_type_name(type), mr_isa_name(isa), nc, bad);
            mr_mm_act_free(&a);
        }
        printf("# %s %s: repacked in %d-row groups%s, bit-identical to plain\n", mr_type_name(type), mr_isa_name(isa), gr,
               in_place ? " (also in place)" : "");
        /* the layouts paged experts take in their slots: every 4-byte interleave, nothing else */
        const int want = type == MR_TYPE_Q4_0 || type == MR_TYPE_Q8_0 || type == MR_TYPE_IQ4_NL || type == MR_TYPE_MXFP4;
        CHECK(in_place == want, "%s %s: in place %d, expected %d", mr_type_name(type), mr_isa_name(isa), in_place, want);
        if (type == MR_TYPE_Q4_0) {
            /* against double sums of the quantized values (column 0) */
            const mr_type_traits *q8 = mr_type_get(MR_TYPE_Q8_0);
            uint8_t *xq = malloc(mr_row_size(MR_TYPE_Q8_0, COLS));
            q8->from_float(X, xq, COLS);
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
                double e = fabs(Yp[r] - ref) / (mag + 1e-30);
                if (e > *worst_q4_0) *worst_q4_0 = e;
            }
            free(xq);
        }
        mr_repack_free(rp);
        free(T); free(X); free(Yp); free(Yr);
    }
    mr_pool_free(pool);
}

static void test_products(void) {
    const int best = mr_cpu_best_isa();
    double worst = 0;
    for (int isa = MR_ISA_SCALAR + 1; isa < MR_ISA_COUNT; isa++)
        if (mr_isa_available(isa)) check_products(isa, &worst);
    mr_set_isa(best);
    CHECK(worst < 1e-6, "Q4_0 relative error %g against double sums", worst);
}

int main(void) {
    RUN(test_lookup);
    RUN(test_products);
    return t_finish();
}
