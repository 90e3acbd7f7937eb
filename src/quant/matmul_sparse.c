/* Partial products for the MoE approximations (matmul.h): block-sparse rows (mr_matmul_blocks)
 * and masked rows (mr_matmul_rows_masked), on activations prepared as every product's (matmul.c)
 * with the kernels of the ISA in use. */
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "base/base.h"

#include <stdlib.h>

/* ---- block-sparse product ---- */

typedef struct {
    const uint8_t *W;
    size_t w_row, w_blk, x_row, x_blk;
    int64_t rows, ncols, nb;
    int blk;                 /* values per block */
    const uint8_t *Xq;       /* converted activations, ncols rows of x_row bytes */
    const uint8_t *active;   /* [ncols][nb] */
    const int *runs;         /* per column: run starts/lengths (pairs), n_runs[col] of them */
    const int *run_off, *n_runs;
    float *Y;
    mr_vec_dot_fn dot;
    long chunk_rows, chunks_per_col;
} sparse_job;

static void sparse_chunk(void *arg, long ch) {
    sparse_job *j = arg;
    const int64_t c = ch / j->chunks_per_col;
    const long r0 = (ch % j->chunks_per_col) * j->chunk_rows;
    long r1 = r0 + j->chunk_rows;
    if (r1 > j->rows) r1 = (long)j->rows;
    const int *runs = j->runs + j->run_off[c];
    const int nr = j->n_runs[c];
    const uint8_t *x = j->Xq + (size_t)c * j->x_row;
    float *y = j->Y + c * j->rows;
    for (long r = r0; r < r1; r++) {
        const uint8_t *wr = j->W + (size_t)r * j->w_row;
        float s = 0.0f;
        for (int i = 0; i < nr; i++) {
            const int b0 = runs[2 * i], len = runs[2 * i + 1];
            float part;
            j->dot(len * j->blk, &part, wr + (size_t)b0 * j->w_blk, x + (size_t)b0 * j->x_blk);
            s = i ? s + part : part;
        }
        y[r] = s;
    }
}

/* A vec_dot call (call, set-up, horizontal sum) costs about as much as this many weight bytes: with
 * zero_gaps, a gap of zero blocks smaller than that is computed instead of starting a new run. */
#define MR_APPROX_GAP_BYTES 96

int mr_matmul_blocks(mr_pool *pool, const void *W, int wtype, int64_t rows, const mr_mm_act *H, const uint8_t *active,
                     int zero_gaps, float *Y) {
    const mr_type_traits *wt = mr_type_get(wtype);
    if (!wt) { mr_set_error("matmul: unknown weight type %d", wtype); return -1; }
    const int64_t cols = H->cols, ncols = H->ncols;
    const int blk = wt->block_size;
    const int xt = wt->vec_dot_type;
    size_t w_row = mr_row_size(wtype, cols), x_row = mr_row_size(xt, cols);
    size_t w_blk = mr_row_size(wtype, blk), x_blk = mr_row_size(xt, blk);
    if (!w_row || !x_row || !w_blk || !x_blk || x_blk * (size_t)(cols / blk) != x_row || cols > 0x7fffffff) {
        mr_set_error("matmul: %lld values of %s do not split into blocks for a sparse product", (long long)cols, wt->name);
        return -1;
    }
    if (H->vdtype != xt) { mr_set_error("matmul: %s weights with %s activations", wt->name, mr_type_name(H->vdtype)); return -1; }
    if (rows <= 0 || ncols <= 0) return 0;
    const int64_t nb = cols / blk;
    const mr_vec_dot_fn dot = mr_kern_get(wtype, mr_isa())->dot;
    if (!dot) { mr_set_error("matmul: no kernels for weight type %s", wt->name); return -1; }
    int rc = -1;
    int *runs = mr_malloc(sizeof(int) * 2 * (size_t)(nb * ncols));
    int *run_off = mr_malloc(sizeof(int) * (size_t)ncols), *n_runs = mr_malloc(sizeof(int) * (size_t)ncols);
    if (!runs || !run_off || !n_runs) { mr_set_error("matmul: out of memory"); goto done; }
    int tot = 0;
    for (int64_t c = 0; c < ncols; c++) {
        const uint8_t *a = active + c * nb;
        run_off[c] = tot;
        int k = 0;
        const int64_t max_gap = zero_gaps ? (int64_t)(MR_APPROX_GAP_BYTES / w_blk) : 0;
        for (int64_t b = 0; b < nb;) {
            if (!a[b]) { b++; continue; }
            int64_t e = b;
            while (e < nb && a[e]) e++;
            if (k && b - (runs[tot + 2 * (k - 1)] + runs[tot + 2 * (k - 1) + 1]) <= max_gap) {
                runs[tot + 2 * (k - 1) + 1] = (int)(e - runs[tot + 2 * (k - 1)]); /* extend the previous run */
            } else {
                runs[tot + 2 * k] = (int)b;
                runs[tot + 2 * k + 1] = (int)(e - b);
                k++;
            }
            b = e;
        }
        n_runs[c] = k;
        tot += 2 * k;
    }
    sparse_job j = {
        .W = W, .w_row = w_row, .w_blk = w_blk, .x_row = H->Xq ? H->x_row : sizeof(float) * (size_t)H->ldx,
        .x_blk = x_blk, .rows = rows, .ncols = ncols, .nb = nb, .blk = blk,
        .Xq = H->Xq ? H->Xq : (const uint8_t *)H->X, .active = active, .runs = runs,
        .run_off = run_off, .n_runs = n_runs, .Y = Y, .dot = dot,
    };
    const int nth = mr_pool_size(pool);
    long cr = (long)(rows / (nth * 8));
    j.chunk_rows = cr < 16 ? 16 : cr;
    j.chunks_per_col = (long)((rows + j.chunk_rows - 1) / j.chunk_rows);
    mr_pool_run_chunks(pool, sparse_chunk, &j, j.chunks_per_col * (long)ncols);
    rc = 0;
done:
    free(runs); free(run_off); free(n_runs);
    return rc;
}

/* ---- gate-first up projection: only the active rows ---- */

/* Gaps of skipped up rows shorter than this many bytes are prefetched (see rows_chunk). */
#define MR_APPROX_PREFETCH_GAP 4096

/* Chunks are (group of up to 4 columns, range of rows). With a 4-column kernel a row is computed
 * for the 4 columns at once when any of them needs it (the kernel does per column exactly what
 * vec_dot does), otherwise one vec_dot per active (row, column). */
typedef struct {
    const uint8_t *W;
    size_t w_row, x_row;
    int64_t F, d, cnt;
    const uint8_t *Xq;       /* [cnt] converted inputs */
    const uint8_t *act;      /* [cnt][F] row active */
    float *U;                /* [cnt][F] */
    mr_vec_dot_fn dot;
    mr_vec_dot_x4_fn dot4;
    long chunk_rows, chunks_per_group;
} rows_job;

static void rows_chunk(void *arg, long ch) {
    rows_job *j = arg;
    const int64_t c0 = (ch / j->chunks_per_group) * 4;
    const int nc = (int)(j->cnt - c0 < 4 ? j->cnt - c0 : 4);
    const long r0 = (ch % j->chunks_per_group) * j->chunk_rows;
    long r1 = r0 + j->chunk_rows;
    if (r1 > j->F) r1 = (long)j->F;
    const uint8_t *x = j->Xq + (size_t)c0 * j->x_row;
    long gap_end = r0; /* rows before this are part of a short gap of skipped rows (prefetched) */
    if (nc == 1) { /* decode: the common case, kept tight */
        const uint8_t *a = j->act + c0 * j->F;
        float *u = j->U + c0 * j->F;
        for (long r = r0; r < r1; r++) {
            if (a[r]) { j->dot((int)j->d, &u[r], j->W + (size_t)r * j->w_row, x); continue; }
            u[r] = 0.0f;
            if (r >= gap_end) {
                long e = r + 1;
                while (e < r1 && !a[e]) e++;
                const size_t bytes = (size_t)(e - r) * j->w_row;
                if (bytes < MR_APPROX_PREFETCH_GAP)
                    for (size_t o = 0; o < bytes; o += 64) __builtin_prefetch(j->W + (size_t)r * j->w_row + o);
                gap_end = e;
            }
        }
        return;
    }
    for (long r = r0; r < r1; r++) {
        const uint8_t *wr = j->W + (size_t)r * j->w_row;
        int any = 0;
        for (int c = 0; c < nc; c++) any += j->act[(c0 + c) * j->F + r];
        if (!any) {
            /* A short gap of skipped rows is still brought into the cache: a weight stream with
             * holes of a few rows runs slower than the whole stream (the hardware prefetcher loses
             * it; measured 15% slower decode with 25% of the rows skipped), so short gaps save
             * only the arithmetic. Long gaps are not read at all. */
            if (r >= gap_end) {
                long e = r;
                while (e < r1) {
                    int a = 0;
                    for (int c = 0; c < nc; c++) a += j->act[(c0 + c) * j->F + e];
                    if (a) break;
                    e++;
                }
                if ((size_t)(e - r) * j->w_row < MR_APPROX_PREFETCH_GAP)
                    for (size_t o = 0; o < (size_t)(e - r) * j->w_row; o += 64) __builtin_prefetch(wr + o);
                gap_end = e;
            }
            for (int c = 0; c < nc; c++) j->U[(c0 + c) * j->F + r] = 0.0f;
            continue;
        }
        if (nc == 4 && j->dot4 && any > 1) {
            float s[4];
            j->dot4((int)j->d, s, wr, x, j->x_row);
            for (int c = 0; c < 4; c++) j->U[(c0 + c) * j->F + r] = j->act[(c0 + c) * j->F + r] ? s[c] : 0.0f;
            continue;
        }
        for (int c = 0; c < nc; c++) {
            float *u = &j->U[(c0 + c) * j->F + r];
            if (j->act[(c0 + c) * j->F + r]) j->dot((int)j->d, u, wr, x + (size_t)c * j->x_row);
            else *u = 0.0f;
        }
    }
}

int mr_matmul_rows_masked(mr_pool *pool, const void *W, int wtype, int64_t F, const mr_mm_act *X, const uint8_t *act,
                          float *U) {
    const mr_type_traits *wt = mr_type_get(wtype);
    if (!wt) { mr_set_error("matmul: unknown weight type %d", wtype); return -1; }
    const int64_t d = X->cols, cnt = X->ncols;
    size_t w_row = mr_row_size(wtype, d);
    const mr_kern *k = mr_kern_get(wtype, mr_isa());
    if (!w_row || !k->dot || wt->vec_dot_type != X->vdtype || d > 0x7fffffff) {
        mr_set_error("matmul: no row kernels for %s rows of %lld", wt->name, (long long)d);
        return -1;
    }
    rows_job j = {.W = W, .w_row = w_row, .x_row = X->Xq ? X->x_row : sizeof(float) * (size_t)X->ldx, .F = F, .d = d,
                  .cnt = cnt, .Xq = X->Xq ? X->Xq : (const uint8_t *)X->X, .act = act, .U = U, .dot = k->dot, .dot4 = k->dot4};
    const int nth = mr_pool_size(pool);
    const long groups = (long)((cnt + 3) / 4);
    long cr = (long)(F * groups / (nth * 8));
    if (cr > F) cr = (long)F;
    j.chunk_rows = cr < 16 ? 16 : cr;
    j.chunks_per_group = (long)((F + j.chunk_rows - 1) / j.chunk_rows);
    mr_pool_run_chunks(pool, rows_chunk, &j, j.chunks_per_group * groups);
    return 0;
}
