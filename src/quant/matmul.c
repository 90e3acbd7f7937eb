/* The matrix engine (see matmul.h): activation preparation, row ranges, the parts dispatch, and
 * the mr_matmul / mr_matmul_many wrappers over them.
 *
 * Row ranges (mr_mm_rows), per chunk of rows:
 *   - whole groups of a repacked copy go through the copy's kernel (the rows around them through
 *     the plain kernels: the same numerics, so the same bits);
 *   - one column: one dot per row (GEMV);
 *   - several columns: the type's GEMM blocks (MR_GEMM_NR rows x MR_GEMM_NC columns, each weight
 *     block decoded once per block of columns), else groups of four columns through dot4p (on
 *     prepared rows) or dot4, leftover columns through dot.
 * Chunks (mr_pool_run_chunks) are handed to whichever thread is free, so a thread that is busy on a
 * shared machine takes fewer; which thread computes a chunk does not change its arithmetic. */
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

int mr_mm_partner(int wtype) {
    const mr_type_traits *t = mr_type_get(wtype);
    return t ? t->vec_dot_type : -1;
}

/* ---- step 1: activations ---- */

void mr_mm_act_free(mr_mm_act *a) {
    if (!a) return;
    if (!a->in_scratch) {
        mr_aligned_free(a->Xq);
        mr_aligned_free(a->Xp);
        mr_aligned_free(a->Xr);
    }
    memset(a, 0, sizeof *a);
}

/* 64-byte aligned buffer from the arena ws, or allocated (NULL: error set by the caller) */
static void *mr_act_mem(mr_scratch *ws, size_t bytes) {
    return ws ? mr_scratch_alloc(ws, bytes) : mr_aligned_alloc(64, bytes);
}

/* Columns are stored rounded up to a multiple of four (from three columns on), the extra ones
 * zero: a group of three columns then goes through the 4-column kernel (which costs less than three
 * single-column products for every type measured: 1.6-2.9x one column) and the fourth result is
 * dropped. The 4-column kernels equal dot bit for bit, so this changes no result. */
static int64_t mr_act_stored_cols(int64_t ncols) { return ncols >= 3 ? (ncols + 3) / 4 * 4 : ncols; }

/* prep bits: MR_PREP_X4 the dot4p layout, MR_PREP_RP the repacked kernels' layout */
#define MR_PREP_X4 1
#define MR_PREP_RP 2

static int mr_act_alloc(mr_mm_act *a, mr_scratch *ws, int vdtype, int64_t cols, int64_t ncols, int prep) {
    memset(a, 0, sizeof *a);
    a->in_scratch = ws != NULL;
    a->vdtype = vdtype;
    a->cols = cols;
    a->ncols = ncols;
    a->ldx = cols;
    /* an F32 partner stores float rows (a gathered copy) */
    a->x_row = mr_row_size(vdtype, cols);
    if (!a->x_row) { mr_set_error("matmul: rows of %lld values do not fit %s", (long long)cols, mr_type_name(vdtype)); return -1; }
    const mr_kern *k = mr_kern_get(vdtype, mr_isa());
    const int64_t ns = mr_act_stored_cols(ncols);
    a->Xq = mr_act_mem(ws, a->x_row * (size_t)(ns > 0 ? ns : 1));
    if (!a->Xq) goto oom;
    memset(a->Xq + a->x_row * (size_t)ncols, 0, a->x_row * (size_t)(ns - ncols)); /* zero rows: valid blocks of every partner */
    if ((prep & MR_PREP_X4) && ns >= 4 && k->prep && cols % 32 == 0) {
        a->xp_row = (size_t)(cols / 32) * (size_t)k->prep_bytes;
        a->Xp = mr_act_mem(ws, a->xp_row * (size_t)ns);
        if (!a->Xp) goto oom;
        for (int64_t c = ncols; c < ns; c++) k->prep(a->Xq + (size_t)c * a->x_row, a->Xp + (size_t)c * a->xp_row, (int)cols);
    }
    if ((prep & MR_PREP_RP) && ncols > 0 && k->rprep && cols % 32 == 0) {
        a->xr_row = (size_t)(cols / 32) * (size_t)k->rprep_bytes;
        a->Xr = mr_act_mem(ws, a->xr_row * (size_t)ncols);
        if (!a->Xr) goto oom;
    }
    return 0;
oom:
    mr_mm_act_free(a);
    mr_set_error("matmul: out of memory");
    return -1;
}

int mr_mm_act_alloc(mr_mm_act *a, int vdtype, int64_t cols, int64_t ncols, int prep) {
    return mr_act_alloc(a, NULL, vdtype, cols, ncols, prep ? MR_PREP_X4 | MR_PREP_RP : 0);
}

int mr_mm_act_alloc_in(mr_mm_act *a, mr_scratch *ws, int vdtype, int64_t cols, int64_t ncols, int prep) {
    return mr_act_alloc(a, ws, vdtype, cols, ncols, prep ? MR_PREP_X4 | MR_PREP_RP : 0);
}

/* the prepared layouts of column c from its converted row */
static void mr_act_prep_col(mr_mm_act *a, const mr_kern *k, int64_t c) {
    if (a->Xp) k->prep(a->Xq + (size_t)c * a->x_row, a->Xp + (size_t)c * a->xp_row, (int)a->cols);
    if (a->Xr) k->rprep(a->Xq + (size_t)c * a->x_row, a->Xr + (size_t)c * a->xr_row, (int)a->cols);
}

void mr_mm_act_gather(mr_mm_act *a, const mr_mm_act *src, const int *idx, int cnt) {
    const mr_kern *k = mr_kern_get(a->vdtype, mr_isa());
    for (int i = 0; i < cnt; i++) {
        const uint8_t *row = src->Xq ? src->Xq + (size_t)idx[i] * src->x_row : (const uint8_t *)(src->X + (int64_t)idx[i] * src->ldx);
        memcpy(a->Xq + (size_t)i * a->x_row, row, a->x_row);
        /* the source may lack prepared rows (fewer than 4 columns): prepare the copy */
        if (a->Xp) {
            if (src->Xp) memcpy(a->Xp + (size_t)i * a->xp_row, src->Xp + (size_t)idx[i] * src->xp_row, a->xp_row);
            else k->prep(a->Xq + (size_t)i * a->x_row, a->Xp + (size_t)i * a->xp_row, (int)a->cols);
        }
        if (a->Xr) {
            if (src->Xr) memcpy(a->Xr + (size_t)i * a->xr_row, src->Xr + (size_t)idx[i] * src->xr_row, a->xr_row);
            else k->rprep(a->Xq + (size_t)i * a->x_row, a->Xr + (size_t)i * a->xr_row, (int)a->cols);
        }
    }
}

/* the room for ncols converted columns for products with wtype (an F32 partner needs none: its
 * columns are read where they are) */
static int mr_act_reserve(mr_mm_act *a, mr_scratch *ws, int wtype, int64_t cols, int64_t ncols, int prep) {
    const int vd = mr_mm_partner(wtype);
    memset(a, 0, sizeof *a);
    if (vd < 0) { mr_set_error("matmul: unknown weight type %d", wtype); return -1; }
    if (cols > 0x7fffffff) { mr_set_error("matmul: rows of %lld values are too long", (long long)cols); return -1; }
    if (vd == MR_TYPE_F32) {
        a->vdtype = vd; a->cols = cols; a->ncols = ncols; a->ldx = cols;
        return 0;
    }
    const mr_kern *k = mr_kern_get(vd, mr_isa());
    if (!k->from_float) { mr_set_error("matmul: cannot convert activations to %s", mr_type_name(vd)); return -1; }
    return mr_act_alloc(a, ws, vd, cols, ncols, prep);
}

/* columns [c0, c1) of X converted into a reserved a (c1 <= a->ncols) */
static void mr_act_fill_cols(mr_mm_act *a, const float *X, const mr_kern *k, int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; c++) {
        k->from_float(X + c * a->ldx, a->Xq + (size_t)c * a->x_row, a->cols);
        mr_act_prep_col(a, k, c);
    }
}

typedef struct { mr_mm_act *a; const float *X; const mr_kern *k; } mr_act_job;
#define MR_ACT_COLS 4
static void mr_act_chunk(void *arg, long ch) {
    mr_act_job *j = arg;
    mr_mm_act *a = j->a;
    int64_t c0 = (int64_t)ch * MR_ACT_COLS, c1 = c0 + MR_ACT_COLS;
    if (c1 > a->ncols) c1 = a->ncols;
    mr_act_fill_cols(a, j->X, j->k, c0, c1);
}

static int mr_act_make(mr_pool *pool, mr_mm_act *a, mr_scratch *ws, int wtype, const float *X, int64_t cols,
                       int64_t ncols, int64_t ldx, int prep) {
    if (mr_act_reserve(a, ws, wtype, cols, ncols, prep)) return -1;
    a->ldx = ldx;
    if (a->vdtype == MR_TYPE_F32) { a->X = X; return 0; }
    mr_act_job j = {a, X, mr_kern_get(a->vdtype, mr_isa())};
    mr_pool_run_chunks(ncols > 1 ? pool : NULL, mr_act_chunk, &j, (long)((ncols + MR_ACT_COLS - 1) / MR_ACT_COLS));
    return 0;
}

int mr_mm_act_make(mr_pool *pool, mr_mm_act *a, int wtype, const float *X, int64_t cols, int64_t ncols, int64_t ldx) {
    return mr_act_make(pool, a, NULL, wtype, X, cols, ncols, ldx, MR_PREP_X4 | MR_PREP_RP);
}

int mr_mm_act_convert(mr_pool *pool, mr_mm_act *a, int wtype, const float *X, int64_t cols, int64_t ncols, int64_t ldx) {
    return mr_act_make(pool, a, NULL, wtype, X, cols, ncols, ldx, 0);
}

int mr_mm_act_make_in(mr_pool *pool, mr_mm_act *a, mr_scratch *ws, int wtype, const float *X, int64_t cols,
                      int64_t ncols, int64_t ldx) {
    return mr_act_make(pool, a, ws, wtype, X, cols, ncols, ldx, MR_PREP_X4 | MR_PREP_RP);
}

int mr_mm_act_reserve_in(mr_mm_act *a, mr_scratch *ws, int wtype, int64_t cols, int64_t ncols) {
    return mr_act_reserve(a, ws, wtype, cols, ncols, MR_PREP_X4 | MR_PREP_RP);
}

void mr_mm_act_fill(mr_mm_act *a, const float *X, int64_t ldx) {
    a->ldx = ldx;
    if (a->vdtype == MR_TYPE_F32) { a->X = X; return; }
    mr_act_fill_cols(a, X, mr_kern_get(a->vdtype, mr_isa()), 0, a->ncols);
}

/* ---- step 2: rows ---- */

/* the kernels of wtype under the ISA in use, checked against the activations; NULL + error */
static const mr_kern *mr_rows_kern(const mr_mm_act *a, int wtype, size_t *w_row) {
    const mr_kern *k = mr_kern_get(wtype, mr_isa());
    *w_row = mr_row_size(wtype, a->cols);
    if (!k || !k->dot || !*w_row || mr_mm_partner(wtype) != a->vdtype) {
        mr_set_error("matmul: no product of %s weights (rows of %lld) with %s activations", mr_type_name(wtype),
                     (long long)a->cols, mr_type_name(a->vdtype));
        return NULL;
    }
    return k;
}

static void mr_rows_plain(const mr_mm_act *a, const mr_kern *k, const uint8_t *W, size_t w_row, int64_t r0, int64_t r1,
                          float *Y, int64_t ldy) {
    const int n = (int)a->cols;
    const uint8_t *xs = a->Xq ? a->Xq : (const uint8_t *)a->X;
    const size_t x_row = a->Xq ? a->x_row : sizeof(float) * (size_t)a->ldx;
    if (a->ncols == 1 && !(a->Xq && k->gemm && k->gemm1)) {
        for (int64_t r = r0; r < r1; r++) k->dot(n, &Y[r], W + (size_t)r * w_row, xs);
        return;
    }
    if (a->Xq && k->gemm) {
        /* column blocks outer: the chunk's weight rows stay in L2 while the blocks pass */
        for (int64_t c0 = 0; c0 < a->ncols; c0 += MR_GEMM_NC) {
            const int nc = (int)(a->ncols - c0 < MR_GEMM_NC ? a->ncols - c0 : MR_GEMM_NC);
            for (int64_t r = r0; r < r1; r += MR_GEMM_NR) {
                const int nr = (int)(r1 - r < MR_GEMM_NR ? r1 - r : MR_GEMM_NR);
                k->gemm(n, W + (size_t)r * w_row, w_row, nr, xs + (size_t)c0 * x_row, x_row, nc, Y + c0 * ldy + r, (size_t)ldy);
            }
        }
        return;
    }
    int64_t c = 0;
    /* a last group of three (zero-padded to four when the columns were converted here) */
    const int64_t n4 = a->Xq && mr_act_stored_cols(a->ncols) > a->ncols && a->ncols % 4 == 3 ? a->ncols + 1 : a->ncols;
    mr_vec_dot_x4_fn dot4 = k->dot4;
    const uint8_t *x4 = xs;
    size_t x4_row = x_row;
    if (a->Xp && k->dot4p) {
        dot4 = k->dot4p;
        x4 = a->Xp;
        x4_row = a->xp_row;
    }
    if (dot4) {
        for (; c + 4 <= n4; c += 4) {
            const uint8_t *x = x4 + (size_t)c * x4_row;
            float *y = Y + c * ldy;
            const int last = c + 4 > a->ncols; /* the padded group: three results */
            for (int64_t r = r0; r < r1; r++) {
                float s[4];
                dot4(n, s, W + (size_t)r * w_row, x, x4_row);
                y[r] = s[0];
                y[ldy + r] = s[1];
                y[2 * ldy + r] = s[2];
                if (!last) y[3 * ldy + r] = s[3];
            }
        }
        if (c > a->ncols) c = a->ncols;
    }
    for (; c < a->ncols; c++) {
        const uint8_t *x = xs + (size_t)c * x_row;
        float *y = Y + c * ldy;
        for (int64_t r = r0; r < r1; r++) k->dot(n, &y[r], W + (size_t)r * w_row, x);
    }
}

/* Rows of groups [g0, g1) of a repacked matrix whose group 0 is at rp, for every column: the
 * layout's group kernel on up to max_nc columns at a time. */
static void mr_rp_mul(const mr_repack_kern *k, const void *rp, int64_t cols, int64_t g0, int64_t g1, const uint8_t *act,
                      size_t act_row, int64_t ncols, float *Y, int64_t ldy) {
    const size_t gb = (size_t)(cols / 32) * k->block_bytes;
    for (int64_t g = g0; g < g1; g++) {
        const void *w = (const uint8_t *)rp + (size_t)g * gb;
        for (int64_t c = 0; c < ncols;) {
            const int nc = (int)(ncols - c < k->max_nc ? ncols - c : k->max_nc);
            const void *a[MR_RP_MAX_NC];
            float *y[MR_RP_MAX_NC];
            for (int i = 0; i < nc; i++) {
                a[i] = act + (size_t)(c + i) * act_row;
                y[i] = Y + (c + i) * ldy + k->rows * g;
            }
            k->group(w, cols, a, y, nc);
            c += nc;
        }
    }
}

/* The activations the repacked kernels read: the partner's rprep layout, or the converted rows
 * themselves when the partner has none under this ISA; NULL if not prepared. */
static const uint8_t *mr_rp_act(const mr_mm_act *a, size_t *row) {
    if (!a->Xq) return NULL;
    if (mr_kern_get(a->vdtype, mr_isa())->rprep) { *row = a->xr_row; return a->Xr; }
    *row = a->x_row;
    return a->Xq;
}

int mr_mm_rows(const mr_mm_act *a, int wtype, const void *W, const mr_repacked *rp, int64_t r0, int64_t r1,
               float *Y, int64_t ldy) {
    size_t w_row;
    const mr_kern *k = mr_rows_kern(a, wtype, &w_row);
    if (!k) return -1;
    const uint8_t *ra;
    size_t ra_row;
    if (rp && k->rp && (ra = mr_rp_act(a, &ra_row))) {
        int64_t left = 0;
        const void *g = mr_repack_at(rp, W, wtype, a->cols, mr_isa(), &left);
        const int64_t gr = k->rp->rows;
        int64_t g0 = (r0 + gr - 1) / gr, g1 = r1 / gr;
        if (g && gr * g1 > left) g1 = left / gr;
        if (g && g1 > g0 && (!mr_repack_is_view(rp) || (gr * g0 == r0 && gr * g1 == r1))) {
            if (gr * g0 > r0) mr_rows_plain(a, k, W, w_row, r0, gr * g0, Y, ldy);
            mr_rp_mul(k->rp, g, a->cols, g0, g1, ra, ra_row, a->ncols, Y, ldy);
            if (r1 > gr * g1) mr_rows_plain(a, k, W, w_row, gr * g1, r1, Y, ldy);
            return 0;
        }
    }
    /* rows repacked in place have no plain form: only whole groups through the layout's kernel */
    if (mr_repack_is_view(rp) && r1 > r0) return -1;
    mr_rows_plain(a, k, W, w_row, r0, r1, Y, ldy);
    return 0;
}

/* ---- the parts dispatch ---- */

long mr_mm_chunk_rows(int64_t rows, size_t w_row, int64_t ncols, size_t total_bytes, int nth) {
    long c;
    if (nth < 1) nth = 1;
    if (ncols <= 1) {
        /* about 16 chunks per thread over the whole dispatch (evens out a shared machine), >= 32 KiB */
        size_t target = total_bytes / ((size_t)nth * 16);
        if (target < 32 * 1024) target = 32 * 1024;
        c = (long)(target / w_row);
    } else {
        /* GEMM: a chunk's weight rows stay in L2 while every column passes over them */
        c = (long)((128 * 1024) / w_row);
        long fair = (long)((rows + nth - 1) / nth);
        if (c > fair) c = fair;
    }
    return c < 1 ? 1 : c;
}

int mr_mm_group_rows(const mr_repacked *rp, int wtype, int64_t cols) {
    return mr_repack_group_rows(rp, wtype, cols, mr_isa());
}

typedef struct {
    const mr_mm_part *parts;
    long *first;           /* [n_parts + 1] first chunk of each part */
    long *crow;            /* rows per chunk of each part */
    int n_parts;
    int err;
} mr_parts_job;

static void mr_parts_chunk(void *arg, long ch) {
    mr_parts_job *j = arg;
    int lo = 0, hi = j->n_parts - 1;
    while (lo < hi) { /* last part whose first chunk <= ch */
        int mid = (lo + hi + 1) / 2;
        if (j->first[mid] <= ch) lo = mid; else hi = mid - 1;
    }
    const mr_mm_part *p = &j->parts[lo];
    int64_t r0 = (int64_t)(ch - j->first[lo]) * j->crow[lo], r1 = r0 + j->crow[lo];
    if (r1 > p->rows) r1 = p->rows;
    if (mr_mm_rows(p->act, p->wtype, p->W, p->rp, r0, r1, p->Y, p->ldy ? p->ldy : p->rows)) j->err = 1;
}

int mr_matmul_parts(mr_pool *pool, const mr_mm_part *parts, int n_parts) { return mr_matmul_parts_in(pool, NULL, parts, n_parts); }

int mr_matmul_parts_in(mr_pool *pool, mr_scratch *ws, const mr_mm_part *parts, int n_parts) {
    if (n_parts <= 0) return 0;
    long first_s[17], crow_s[16];
    const int few = n_parts <= 16;
    long *first = few ? first_s : ws ? mr_scratch_alloc(ws, sizeof(long) * (size_t)(n_parts + 1)) : mr_malloc(sizeof(long) * (size_t)(n_parts + 1));
    long *crow = few ? crow_s : ws ? mr_scratch_alloc(ws, sizeof(long) * (size_t)n_parts) : mr_malloc(sizeof(long) * (size_t)n_parts);
    int rc = -1;
    if (!first || !crow) { mr_set_error("matmul: out of memory"); goto out; }
    size_t total = 0;
    for (int i = 0; i < n_parts; i++) {
        size_t w_row;
        if (!mr_rows_kern(parts[i].act, parts[i].wtype, &w_row)) goto out;
        total += w_row * (size_t)parts[i].rows;
    }
    const int nth = mr_pool_size(pool);
    long nch = 0;
    for (int i = 0; i < n_parts; i++) {
        const mr_mm_part *p = &parts[i];
        size_t ra_row;
        const long gr = mr_rp_act(p->act, &ra_row) ? mr_mm_group_rows(p->rp, p->wtype, p->act->cols) : 1;
        first[i] = nch;
        crow[i] = mr_mm_chunk_rows(p->rows, mr_row_size(p->wtype, p->act->cols), p->act->ncols, total, nth);
        crow[i] = (crow[i] + gr - 1) / gr * gr; /* whole repacked groups per chunk */
        if (p->rows > 0 && p->act->ncols > 0) nch += (long)((p->rows + crow[i] - 1) / crow[i]);
    }
    first[n_parts] = nch;
    mr_parts_job j = {parts, first, crow, n_parts, 0};
    mr_pool_run_chunks(pool, mr_parts_chunk, &j, nch);
    rc = j.err ? -1 : 0;
out:
    if (!few && !ws) { free(first); free(crow); }
    return rc;
}

/* ---- wrappers ---- */

static int mr_task_same_x(const mr_matmul_task *a, const mr_matmul_task *b) {
    return a->X == b->X && a->ncols == b->ncols && a->w->cols == b->w->cols &&
           (a->ldx ? a->ldx : a->w->cols) == (b->ldx ? b->ldx : b->w->cols);
}

int mr_matmul_many(mr_pool *pool, const mr_matmul_task *t, int n) { return mr_matmul_many_in(pool, NULL, t, n); }

int mr_matmul_many_in(mr_pool *pool, mr_scratch *ws, const mr_matmul_task *t, int n) {
    if (n <= 0) return 0;
    int rc = -1, n_act = 0, n_parts = 0;
    if (ws) mr_scratch_reset(ws);
    /* the lists: on the stack for a few tasks (every caller in src/ has at most 8) */
    enum { FEW = 8 };
    mr_mm_act acts_s[FEW];
    mr_mm_part parts_s[FEW];
    int owner_s[FEW];
    const int few = n <= FEW;
    mr_mm_act *acts = few ? acts_s : ws ? mr_scratch_alloc(ws, sizeof *acts * (size_t)n) : mr_malloc(sizeof *acts * (size_t)n);
    mr_mm_part *parts = few ? parts_s : ws ? mr_scratch_alloc(ws, sizeof *parts * (size_t)n) : mr_malloc(sizeof *parts * (size_t)n);
    int *owner = few ? owner_s : ws ? mr_scratch_alloc(ws, sizeof *owner * (size_t)n) : mr_malloc(sizeof *owner * (size_t)n);
    if (!acts || !parts || !owner) { mr_set_error("matmul: out of memory"); goto out; }
    memset(acts, 0, sizeof *acts * (size_t)n);
    for (int i = 0; i < n; i++) {
        const mr_mat *w = t[i].w;
        const mr_type_traits *wt = mr_type_get(w->type);
        owner[i] = -1;
        if (!wt) { mr_set_error("matmul: unknown weight type %d", w->type); goto out; }
        if (!mr_row_size(w->type, w->cols) || !mr_row_size(wt->vec_dot_type, w->cols)) {
            mr_set_error("matmul: row of %lld values does not fit type %s", (long long)w->cols, wt->name);
            goto out;
        }
        if (w->rows <= 0 || t[i].ncols <= 0) continue;
        /* share the preparation of an earlier task with the same activations */
        for (int k = 0; k < i && owner[i] < 0; k++)
            if (owner[k] >= 0 && mr_task_same_x(&t[k], &t[i]) && mr_mm_partner(t[k].w->type) == wt->vec_dot_type)
                owner[i] = owner[k];
        if (owner[i] < 0) {
            /* the prepared layouts only when some task on these activations uses them */
            int prep = 0;
            for (int k = i; k < n; k++) {
                if (!mr_task_same_x(&t[k], &t[i])) continue;
                const mr_kern *kk = mr_kern_get(t[k].w->type, mr_isa());
                if (kk && kk->dot4p) prep |= MR_PREP_X4;
                if (t[k].w->rp) prep |= MR_PREP_RP;
            }
            if (mr_act_make(pool, &acts[n_act], ws, w->type, t[i].X, w->cols, t[i].ncols, t[i].ldx ? t[i].ldx : w->cols, prep))
                goto out;
            owner[i] = n_act++;
        }
        parts[n_parts++] = (mr_mm_part){w->data, w->type, w->rows, &acts[owner[i]], t[i].Y, t[i].ldy ? t[i].ldy : w->rows, w->rp};
    }
    rc = mr_matmul_parts_in(pool, ws, parts, n_parts);
out:
    if (acts)
        for (int k = 0; k < n_act; k++) mr_mm_act_free(&acts[k]);
    if (!few && !ws) { free(acts); free(parts); free(owner); }
    return rc;
}

int mr_matmul(mr_pool *pool, const void *W, int wtype, int64_t rows, int64_t cols,
              const float *X, int64_t ncols, float *Y) {
    const mr_mat w = {W, wtype, rows, cols, NULL, NULL};
    const mr_matmul_task t = {&w, X, ncols, Y, 0, 0};
    return mr_matmul_many(pool, &t, 1);
}
