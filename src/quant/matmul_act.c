/* Products on activations converted once (see matmul_act.h). Uses the same kernel tables as
 * matmul.c (mr_type_kernels, mr_type_from_float, the AVX-512 prepared 4-column kernels), so every
 * output equals mr_matmul's bit for bit. */
#include "quant/matmul_act.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "quant/repack.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

int mr_mm_partner(int wtype) {
    const mr_type_traits *t = mr_type_get(wtype);
    return t ? t->vec_dot_type : -1;
}

void mr_mm_act_free(mr_mm_act *a) {
    if (!a) return;
    mr_aligned_free(a->Xq);
    mr_aligned_free(a->Xp);
    mr_aligned_free(a->Xr);
    memset(a, 0, sizeof *a);
}

/* Columns are stored rounded up to a multiple of four (from three columns on), the extra ones
 * zero: a group of three columns then goes through the 4-column kernel (which costs less than three
 * single-column products for every type measured: 1.6-2.9x one column) and the fourth result is
 * dropped. The 4-column kernels equal vec_dot bit for bit, so this changes no result. */
static int64_t mr_act_stored_cols(int64_t ncols) { return ncols >= 3 ? (ncols + 3) / 4 * 4 : ncols; }

int mr_mm_act_alloc(mr_mm_act *a, int vdtype, int64_t cols, int64_t ncols, int prep) {
    memset(a, 0, sizeof *a);
    a->vdtype = vdtype;
    a->cols = cols;
    a->ncols = ncols;
    a->ldx = cols;
    /* an F32 partner stores float rows (a gathered copy) */
    a->x_row = mr_row_size(vdtype, cols);
    if (!a->x_row) { mr_set_error("matmul_act: rows of %lld values do not fit %s", (long long)cols, mr_type_name(vdtype)); return -1; }
    const int64_t ns = mr_act_stored_cols(ncols);
    a->Xq = mr_aligned_alloc(64, a->x_row * (size_t)(ns > 0 ? ns : 1));
    if (!a->Xq) goto oom;
    memset(a->Xq + a->x_row * (size_t)ncols, 0, a->x_row * (size_t)(ns - ncols)); /* zero rows: valid blocks of every partner */
    if (prep && ns >= 4 && mr_isa() == MR_ISA_AVX512 && mr_prep_avx512(vdtype)) {
        a->xp_row = mr_prep_row_size(vdtype, cols);
        a->Xp = mr_aligned_alloc(64, a->xp_row * (size_t)ns);
        if (!a->Xp) goto oom;
        for (int64_t c = ncols; c < ns; c++) mr_prep_avx512(vdtype)(a->Xq + (size_t)c * a->x_row, a->Xp + (size_t)c * a->xp_row, (int)cols);
    }
    if (prep && ncols > 0 && vdtype == MR_TYPE_Q8_0 && mr_repack_applies(MR_TYPE_Q4_0, cols)) {
        a->xr_row = (size_t)(cols / 32) * MR_Q4_0_RP_ACT_BYTES;
        a->Xr = mr_aligned_alloc(64, a->xr_row * (size_t)ncols);
        if (!a->Xr) goto oom;
    }
    return 0;
oom:
    mr_mm_act_free(a);
    mr_set_error("matmul_act: out of memory");
    return -1;
}

void mr_mm_act_gather(mr_mm_act *a, const mr_mm_act *src, const int *idx, int cnt) {
    for (int i = 0; i < cnt; i++) {
        const uint8_t *row = src->Xq ? src->Xq + (size_t)idx[i] * src->x_row : (const uint8_t *)(src->X + (int64_t)idx[i] * src->ldx);
        memcpy(a->Xq + (size_t)i * a->x_row, row, a->x_row);
        if (a->Xp) {
            /* the source may lack prepared rows (fewer than 4 columns): prepare the copy */
            if (src->Xp) memcpy(a->Xp + (size_t)i * a->xp_row, src->Xp + (size_t)idx[i] * src->xp_row, a->xp_row);
            else mr_prep_avx512(a->vdtype)(a->Xq + (size_t)i * a->x_row, a->Xp + (size_t)i * a->xp_row, (int)a->cols);
        }
        if (a->Xr) {
            if (src->Xr) memcpy(a->Xr + (size_t)i * a->xr_row, src->Xr + (size_t)idx[i] * src->xr_row, a->xr_row);
            else mr_q4_0_rp_prep(a->Xq + (size_t)i * a->x_row, a->Xr + (size_t)i * a->xr_row, (int)a->cols);
        }
    }
}

typedef struct { mr_mm_act *a; const float *X; mr_from_float_fn convert; mr_prep_fn prep; } mr_act_job;
#define MR_ACT_COLS 4
static void mr_act_chunk(void *arg, long ch) {
    mr_act_job *j = arg;
    mr_mm_act *a = j->a;
    int64_t c0 = (int64_t)ch * MR_ACT_COLS, c1 = c0 + MR_ACT_COLS;
    if (c1 > a->ncols) c1 = a->ncols;
    for (int64_t c = c0; c < c1; c++) {
        j->convert(j->X + c * a->ldx, a->Xq + (size_t)c * a->x_row, a->cols);
        if (a->Xp) j->prep(a->Xq + (size_t)c * a->x_row, a->Xp + (size_t)c * a->xp_row, (int)a->cols);
        if (a->Xr) mr_q4_0_rp_prep(a->Xq + (size_t)c * a->x_row, a->Xr + (size_t)c * a->xr_row, (int)a->cols);
    }
}

int mr_mm_act_make(mr_pool *pool, mr_mm_act *a, int wtype, const float *X, int64_t cols, int64_t ncols, int64_t ldx) {
    const int vd = mr_mm_partner(wtype);
    memset(a, 0, sizeof *a);
    if (vd < 0) { mr_set_error("matmul_act: unknown weight type %d", wtype); return -1; }
    if (cols > 0x7fffffff) { mr_set_error("matmul_act: rows of %lld values are too long", (long long)cols); return -1; }
    if (vd == MR_TYPE_F32) {
        a->vdtype = vd; a->cols = cols; a->ncols = ncols; a->X = X; a->ldx = ldx;
        return 0;
    }
    mr_from_float_fn convert = mr_type_from_float(vd);
    if (!convert) { mr_set_error("matmul_act: cannot convert activations to %s", mr_type_name(vd)); return -1; }
    if (mr_mm_act_alloc(a, vd, cols, ncols, 1)) return -1;
    a->ldx = ldx;
    mr_act_job j = {a, X, convert, a->Xp ? mr_prep_avx512(vd) : NULL};
    mr_pool_run_chunks(ncols > 1 ? pool : NULL, mr_act_chunk, &j, (long)((ncols + MR_ACT_COLS - 1) / MR_ACT_COLS));
    return 0;
}

static int mr_mm_rows_plain(const mr_mm_act *a, int wtype, const void *W, int64_t r0, int64_t r1, float *Y, int64_t ldy);

int mr_mm_rows(const mr_mm_act *a, int wtype, const void *W, int64_t r0, int64_t r1, float *Y, int64_t ldy) {
    if (a->Xr && wtype == MR_TYPE_Q4_0 && mr_mm_partner(wtype) == a->vdtype) {
        /* repacked weights (repack.h): whole 16-row groups through the repacked kernel, the rows
         * around them through the plain ones (the same numerics, so the same bits) */
        int64_t left = 0;
        const void *rp = mr_repack_find(W, wtype, a->cols, &left);
        int64_t g0 = (r0 + 15) / 16, g1 = r1 / 16;
        if (rp && 16 * g1 > left) g1 = left / 16;
        if (rp && g1 > g0) {
            if (16 * g0 > r0 && mr_mm_rows_plain(a, wtype, W, r0, 16 * g0, Y, ldy)) return -1;
            mr_q4_0_rp_rows(rp, a->cols, g0, g1, a->Xr, a->xr_row, a->ncols, Y, ldy);
            return r1 > 16 * g1 ? mr_mm_rows_plain(a, wtype, W, 16 * g1, r1, Y, ldy) : 0;
        }
    }
    return mr_mm_rows_plain(a, wtype, W, r0, r1, Y, ldy);
}

static int mr_mm_rows_plain(const mr_mm_act *a, int wtype, const void *W, int64_t r0, int64_t r1, float *Y, int64_t ldy) {
    mr_vec_dot_fn dot;
    mr_vec_dot_x4_fn dot4;
    const int kisa = mr_type_kernels(wtype, mr_isa(), &dot, &dot4);
    const size_t w_row = mr_row_size(wtype, a->cols);
    if (!dot || !w_row || mr_mm_partner(wtype) != a->vdtype) {
        mr_set_error("matmul_act: no product of %s weights with %s activations", mr_type_name(wtype), mr_type_name(a->vdtype));
        return -1;
    }
    const int n = (int)a->cols;
    const uint8_t *Wb = W;
    const uint8_t *xs = a->Xq ? a->Xq : (const uint8_t *)a->X;
    const size_t x_row = a->Xq ? a->x_row : sizeof(float) * (size_t)a->ldx;
    if (a->ncols == 1) {
        for (int64_t r = r0; r < r1; r++) dot(n, &Y[r], Wb + (size_t)r * w_row, xs);
        return 0;
    }
    if (kisa == MR_ISA_AVX512 && a->Xq && mr_gemm_avx512[wtype]) {
        /* GEMM blocks (quant_simd.h), as mr_matmul: bit for bit the same results */
        for (int64_t c0 = 0; c0 < a->ncols; c0 += MR_GEMM_NC) {
            const int nc = (int)(a->ncols - c0 < MR_GEMM_NC ? a->ncols - c0 : MR_GEMM_NC);
            for (int64_t r = r0; r < r1; r += MR_GEMM_NR) {
                const int nr = (int)(r1 - r < MR_GEMM_NR ? r1 - r : MR_GEMM_NR);
                mr_gemm_avx512[wtype](n, Wb + (size_t)r * w_row, w_row, nr, xs + (size_t)c0 * x_row, x_row, nc,
                                      Y + c0 * ldy + r, (size_t)ldy);
            }
        }
        return 0;
    }
    int64_t c = 0;
    /* a last group of three (zero-padded to four when the columns were converted here) */
    const int64_t n4 = a->Xq && mr_act_stored_cols(a->ncols) > a->ncols && a->ncols % 4 == 3 ? a->ncols + 1 : a->ncols;
    if (dot4) {
        const uint8_t *x4 = xs;
        size_t x4_row = x_row;
        if (a->Xp && kisa == MR_ISA_AVX512 && mr_vec_dot_x4p_avx512[wtype]) {
            dot4 = mr_vec_dot_x4p_avx512[wtype];
            x4 = a->Xp;
            x4_row = a->xp_row;
        }
        for (; c + 4 <= n4; c += 4) {
            const uint8_t *x = x4 + (size_t)c * x4_row;
            float *y = Y + c * ldy;
            const int last = c + 4 > a->ncols; /* the padded group: three results */
            for (int64_t r = r0; r < r1; r++) {
                float s[4];
                dot4(n, s, Wb + (size_t)r * w_row, x, x4_row);
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
        for (int64_t r = r0; r < r1; r++) dot(n, &y[r], Wb + (size_t)r * w_row, x);
    }
    return 0;
}

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
    if (mr_mm_rows(p->act, p->wtype, p->W, r0, r1, p->Y, p->ldy ? p->ldy : p->rows)) j->err = 1;
}

int mr_matmul_parts(mr_pool *pool, const mr_mm_part *parts, int n_parts) {
    if (n_parts <= 0) return 0;
    long first_s[17], crow_s[16];
    long *first = n_parts <= 16 ? first_s : malloc(sizeof(long) * (size_t)(n_parts + 1));
    long *crow = n_parts <= 16 ? crow_s : malloc(sizeof(long) * (size_t)n_parts);
    if (!first || !crow) {
        if (first != first_s) free(first);
        if (crow != crow_s) free(crow);
        mr_set_error("matmul_act: out of memory");
        return -1;
    }
    size_t total = 0;
    for (int i = 0; i < n_parts; i++) {
        mr_vec_dot_fn dot;
        mr_vec_dot_x4_fn dot4;
        mr_type_kernels(parts[i].wtype, mr_isa(), &dot, &dot4);
        const size_t w_row = mr_row_size(parts[i].wtype, parts[i].act->cols);
        if (!dot || !w_row || mr_mm_partner(parts[i].wtype) != parts[i].act->vdtype) {
            if (first != first_s) free(first);
            if (crow != crow_s) free(crow);
            mr_set_error("matmul_act: no product of %s weights (rows of %lld) with %s activations",
                         mr_type_name(parts[i].wtype), (long long)parts[i].act->cols, mr_type_name(parts[i].act->vdtype));
            return -1;
        }
        total += w_row * (size_t)parts[i].rows;
    }
    const int nth = mr_pool_size(pool);
    long nch = 0;
    for (int i = 0; i < n_parts; i++) {
        const size_t w_row = mr_row_size(parts[i].wtype, parts[i].act->cols);
        first[i] = nch;
        crow[i] = w_row ? mr_mm_chunk_rows(parts[i].rows, w_row, parts[i].act->ncols, total, nth) : 1;
        if (parts[i].act->Xr && parts[i].wtype == MR_TYPE_Q4_0 && mr_repack_find(parts[i].W, parts[i].wtype, parts[i].act->cols, NULL))
            crow[i] = (crow[i] + 15) / 16 * 16; /* whole repacked groups per chunk */
        if (parts[i].rows > 0 && parts[i].act->ncols > 0) nch += (long)((parts[i].rows + crow[i] - 1) / crow[i]);
    }
    first[n_parts] = nch;
    mr_parts_job j = {parts, first, crow, n_parts, 0};
    mr_pool_run_chunks(pool, mr_parts_chunk, &j, nch);
    if (first != first_s) free(first);
    if (crow != crow_s) free(crow);
    return j.err ? -1 : 0;
}
