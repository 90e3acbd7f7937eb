/* Threaded matrix kernels: Y[j][r] = dot(W[r], X[j]).
 *
 * 1. The activations are converted once to the weight type's partner type (split by columns across
 *    the threads when there are several columns).
 * 2. Rows are handed out in chunks (mr_pool_run_chunks: a thread that is busy or descheduled on a
 *    shared machine takes fewer chunks and is not waited for).
 *    GEMV (one column): one vec_dot per row. GEMM: within a chunk of rows, columns go by four
 *    through the type's 4-column kernel, which unpacks each weight block once for the four columns;
 *    leftover columns (and types without a 4-column kernel) use vec_dot. Types with a GEMM block
 *    kernel (quant_simd.h: the super-block i-quants) take blocks of MR_GEMM_NR rows x MR_GEMM_NC columns
 *    instead, unpacking each weight block once per MR_GEMM_NC columns.
 * The 4-column kernels run, per column, exactly the float operations of vec_dot (quant_simd.h), and
 * which thread computes a chunk does not change its arithmetic, so every Y[j][r] is the same
 * whatever ncols and the thread count. */
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"
#include "quant/repack.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

int mr_type_kernels(int type, int isa, mr_vec_dot_fn *dot, mr_vec_dot_x4_fn *dot4) {
    const mr_type_traits *t = mr_type_get(type);
    *dot = NULL;
    *dot4 = NULL;
    if (!t) return -1;
    for (int i = isa; i > MR_ISA_SCALAR; i--) {
        mr_vec_dot_fn f = mr_type_vec_dot_isa(type, i);
        if (!f) continue;
        *dot = f;
        *dot4 = i == MR_ISA_AVX512 ? mr_vec_dot_x4_avx512[type] : mr_vec_dot_x4_avx2[type];
        return i;
    }
    *dot = t->vec_dot;
    return MR_ISA_SCALAR;
}

mr_from_float_fn mr_type_from_float(int type) {
    const mr_type_traits *t = mr_type_get(type);
    if (!t) return NULL;
    if (mr_isa() >= MR_ISA_AVX2 && mr_from_float_avx2[type]) return mr_from_float_avx2[type];
    return t->from_float;
}

typedef struct {
    const uint8_t *W;
    size_t w_row;          /* bytes per weight row */
    const float *X;
    uint8_t *Xq;           /* converted activations (NULL: use X as is) */
    size_t x_row;          /* bytes per converted activation column */
    mr_from_float_fn convert;
    int64_t rows, cols, ncols;
    float *Y;
    mr_vec_dot_fn dot;
    mr_vec_dot_x4_fn dot4;
    uint8_t *Xp;           /* prepared activations for dot4 (quant_simd.h), or NULL */
    size_t xp_row;
    mr_prep_fn prep;
    mr_gemm_fn gemm;       /* GEMM blocks (quant_simd.h), or NULL */
    const void *rp;        /* repacked copy (repack.h, Q4_0 under AVX-512): group 0 = row 0, or NULL */
    uint8_t *Xr;           /* activations prepared for it (MR_Q4_0_RP_ACT_BYTES per block) */
    size_t xr_row;
    long chunk_rows;
} mr_matmul_job;

/* GEMM rows per chunk: the chunk's weight rows stay in L2 while all columns pass over them. */
#define MR_GEMM_CHUNK_BYTES (128 * 1024)
/* columns converted per chunk of the conversion phase */
#define MR_CONVERT_COLS 4

static void mr_matmul_rows(mr_matmul_job *j, long r0, long r1) {
    const int n = (int)j->cols;
    const uint8_t *xs = j->Xq ? j->Xq : (const uint8_t *)j->X;
    if (j->rp) { /* chunks start at multiples of 16 rows and the matrix has whole groups */
        mr_q4_0_rp_rows(j->rp, j->cols, r0 / 16, (r1 + 15) / 16, j->Xr, j->xr_row, j->ncols, j->Y, j->rows);
        return;
    }
    if (j->ncols == 1) {
        for (long r = r0; r < r1; r++) j->dot(n, &j->Y[r], j->W + (size_t)r * j->w_row, xs);
        return;
    }
    if (j->gemm) {
        /* column blocks outer: the chunk's weight rows stay in L2 while the blocks pass */
        for (int64_t c = 0; c < j->ncols; c += MR_GEMM_NC) {
            const int nc = (int)(j->ncols - c < MR_GEMM_NC ? j->ncols - c : MR_GEMM_NC);
            for (long r = r0; r < r1; r += MR_GEMM_NR) {
                const int nr = (int)(r1 - r < MR_GEMM_NR ? r1 - r : MR_GEMM_NR);
                j->gemm(n, j->W + (size_t)r * j->w_row, j->w_row, nr, xs + (size_t)c * j->x_row, j->x_row, nc,
                        j->Y + c * j->rows + r, (size_t)j->rows);
            }
        }
        return;
    }
    int64_t c = 0;
    if (j->dot4) {
        const uint8_t *x4 = j->Xp ? j->Xp : xs;
        const size_t x4_row = j->Xp ? j->xp_row : j->x_row;
        for (; c + 4 <= j->ncols; c += 4) {
            const uint8_t *x = x4 + (size_t)c * x4_row;
            float *y = j->Y + c * j->rows;
            for (long r = r0; r < r1; r++) {
                float s[4];
                j->dot4(n, s, j->W + (size_t)r * j->w_row, x, x4_row);
                y[r] = s[0];
                y[j->rows + r] = s[1];
                y[2 * j->rows + r] = s[2];
                y[3 * j->rows + r] = s[3];
            }
        }
    }
    for (; c < j->ncols; c++) {
        const uint8_t *x = xs + (size_t)c * j->x_row;
        float *y = j->Y + c * j->rows;
        for (long r = r0; r < r1; r++) j->dot(n, &y[r], j->W + (size_t)r * j->w_row, x);
    }
}

static void mr_matmul_convert_chunk(void *arg, long ch) {
    mr_matmul_job *j = arg;
    int64_t c0 = (int64_t)ch * MR_CONVERT_COLS, c1 = c0 + MR_CONVERT_COLS;
    if (c1 > j->ncols) c1 = j->ncols;
    for (int64_t c = c0; c < c1; c++) {
        j->convert(j->X + c * j->cols, j->Xq + (size_t)c * j->x_row, j->cols);
        if (j->Xp) j->prep(j->Xq + (size_t)c * j->x_row, j->Xp + (size_t)c * j->xp_row, (int)j->cols);
        if (j->Xr) mr_q4_0_rp_prep(j->Xq + (size_t)c * j->x_row, j->Xr + (size_t)c * j->xr_row, (int)j->cols);
    }
}

static void mr_matmul_chunk(void *arg, long ch) {
    mr_matmul_job *j = arg;
    long r0 = ch * j->chunk_rows, r1 = r0 + j->chunk_rows;
    if (r1 > j->rows) r1 = (long)j->rows;
    mr_matmul_rows(j, r0, r1);
}

/* Validate one product and fill its job: kernels, chunk size, and (unless the caller shares another
 * job's) buffers for the converted activations. *conv is set to 1 when the activations must be
 * converted (then Xq, and Xp if prepared activations are used, are allocated here). */
static int mr_matmul_setup(mr_pool *pool, mr_matmul_job *job, const void *W, int wtype, int64_t rows, int64_t cols,
                           const float *X, int64_t ncols, float *Y, int alloc, int *conv) {
    const mr_type_traits *wt = mr_type_get(wtype);
    *conv = 0;
    memset(job, 0, sizeof *job);
    if (!wt) { mr_set_error("matmul: unknown weight type %d", wtype); return -1; }
    const mr_type_traits *xt = mr_type_get(wt->vec_dot_type);
    size_t w_row = mr_row_size(wtype, cols), x_row = mr_row_size(wt->vec_dot_type, cols);
    if (!w_row || !x_row || !xt) {
        mr_set_error("matmul: row of %lld values does not fit type %s", (long long)cols, wt->name);
        return -1;
    }
    if (wt->vec_dot_type != MR_TYPE_F32 && !xt->from_float) {
        mr_set_error("matmul: cannot convert activations to %s", xt->name);
        return -1;
    }
    if (rows <= 0 || ncols <= 0) return 0;
    if (cols > 0x7fffffff) { mr_set_error("matmul: rows of %lld values are too long", (long long)cols); return -1; }
    const int kisa = mr_type_kernels(wtype, mr_isa(), &job->dot, &job->dot4);
    if (!job->dot) { mr_set_error("matmul: no dot product for weight type %s", wt->name); return -1; }
    job->W = W;
    job->w_row = w_row;
    if (kisa == MR_ISA_AVX512 && wtype == MR_TYPE_Q4_0 && rows % 16 == 0) {
        int64_t left = 0;
        const void *rp = mr_repack_find(W, wtype, cols, &left);
        if (rp && left >= rows) {
            job->rp = rp;
            job->xr_row = (size_t)(cols / 32) * MR_Q4_0_RP_ACT_BYTES;
        }
    }
    job->X = X;
    job->x_row = x_row;
    job->rows = rows;
    job->cols = cols;
    job->ncols = ncols;
    job->Y = Y;
    if (wt->vec_dot_type != MR_TYPE_F32) {
        *conv = 1;
        job->convert = mr_type_from_float(wt->vec_dot_type);
        if (ncols >= 4 && kisa == MR_ISA_AVX512 && mr_vec_dot_x4p_avx512[wtype] && mr_prep_avx512(wt->vec_dot_type)) {
            job->prep = mr_prep_avx512(wt->vec_dot_type);
            job->xp_row = mr_prep_row_size(wt->vec_dot_type, cols);
            job->dot4 = mr_vec_dot_x4p_avx512[wtype];
        }
        if (alloc) {
            job->Xq = mr_aligned_alloc(64, x_row * (size_t)ncols);
            if (job->prep) job->Xp = mr_aligned_alloc(64, job->xp_row * (size_t)ncols);
            if (job->rp) job->Xr = mr_aligned_alloc(64, job->xr_row * (size_t)ncols);
            if (!job->Xq || (job->prep && !job->Xp) || (job->rp && !job->Xr)) {
                mr_aligned_free(job->Xq);
                mr_aligned_free(job->Xp);
                mr_aligned_free(job->Xr);
                job->Xq = job->Xp = job->Xr = NULL;
                mr_set_error("matmul: out of memory");
                return -1;
            }
        }
        if (ncols >= 2 && kisa == MR_ISA_AVX512 && !job->prep) job->gemm = mr_gemm_avx512[wtype];
    }
    int nth = mr_pool_size(pool);
    if (ncols == 1) {
        /* enough chunks per thread to even out a shared machine, at least 8 rows each */
        long c = (long)(rows / (nth * 16));
        job->chunk_rows = c < 8 ? 8 : c;
    } else {
        long c = (long)(MR_GEMM_CHUNK_BYTES / w_row);
        long fair = (long)((rows + nth - 1) / nth);
        if (c > fair) c = fair;
        job->chunk_rows = c < 1 ? 1 : c;
    }
    if (job->rp) job->chunk_rows = (job->chunk_rows + 15) / 16 * 16; /* whole repacked groups */
    return 0;
}

int mr_matmul(mr_pool *pool, const void *W, int wtype, int64_t rows, int64_t cols,
              const float *X, int64_t ncols, float *Y) {
    mr_matmul_job job;
    int conv;
    if (mr_matmul_setup(pool, &job, W, wtype, rows, cols, X, ncols, Y, 1, &conv)) return -1;
    if (rows <= 0 || ncols <= 0) return 0;
    if (conv) {
        if (ncols == 1) mr_matmul_convert_chunk(&job, 0);
        else mr_pool_run_chunks(pool, mr_matmul_convert_chunk, &job, (long)((ncols + MR_CONVERT_COLS - 1) / MR_CONVERT_COLS));
    }
    mr_pool_run_chunks(pool, mr_matmul_chunk, &job, (long)((rows + job.chunk_rows - 1) / job.chunk_rows));
    mr_aligned_free(job.Xr);
    mr_aligned_free(job.Xp);
    mr_aligned_free(job.Xq);
    return 0;
}

/* ---- several products in one dispatch ---- */

typedef struct {
    mr_matmul_job *jobs;
    int n;
    long *first;           /* first[i]: global index of job i's first chunk; first[n] = total */
    int *conv;             /* jobs that convert (own their buffers), in order */
    long *conv_first;      /* the same prefix sums for the conversion chunks */
    int n_conv;
} mr_matmul_many_ctx;

static int mr_many_find(const long *first, int n, long ch) {
    int lo = 0, hi = n - 1; /* the last i with first[i] <= ch */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (first[mid] <= ch) lo = mid; else hi = mid - 1;
    }
    return lo;
}

static void mr_many_convert_chunk(void *arg, long ch) {
    mr_matmul_many_ctx *c = arg;
    int k = mr_many_find(c->conv_first, c->n_conv, ch);
    mr_matmul_convert_chunk(&c->jobs[c->conv[k]], ch - c->conv_first[k]);
}

static void mr_many_chunk(void *arg, long ch) {
    mr_matmul_many_ctx *c = arg;
    int i = mr_many_find(c->first, c->n, ch);
    mr_matmul_chunk(&c->jobs[i], ch - c->first[i]);
}

int mr_matmul_many(mr_pool *pool, const mr_matmul_task *t, int n) {
    if (n <= 0) return 0;
    int rc = -1;
    mr_matmul_many_ctx c = {0};
    int *owner = NULL;
    c.jobs = calloc((size_t)n, sizeof *c.jobs);
    c.first = malloc(sizeof(long) * ((size_t)n + 1));
    c.conv = malloc(sizeof(int) * (size_t)n);
    c.conv_first = malloc(sizeof(long) * ((size_t)n + 1));
    owner = malloc(sizeof(int) * (size_t)n);
    if (!c.jobs || !c.first || !c.conv || !c.conv_first || !owner) { mr_set_error("matmul: out of memory"); goto out; }
    for (int i = 0; i < n; i++) {
        int conv;
        owner[i] = -1;
        if (mr_matmul_setup(pool, &c.jobs[i], t[i].W, t[i].wtype, t[i].rows, t[i].cols, t[i].X, t[i].ncols, t[i].Y, 0,
                            &conv))
            goto out;
        if (!conv) continue;
        mr_matmul_job *ji = &c.jobs[i];
        /* share the conversion of an earlier task with the same activations and partner layout */
        for (int k = 0; k < c.n_conv && owner[i] < 0; k++) {
            const mr_matmul_job *jk = &c.jobs[c.conv[k]];
            if (jk->X == ji->X && jk->ncols == ji->ncols && jk->cols == ji->cols && jk->convert == ji->convert &&
                jk->x_row == ji->x_row && jk->prep == ji->prep && !jk->rp == !ji->rp)
                owner[i] = c.conv[k];
        }
        if (owner[i] >= 0) {
            ji->Xq = c.jobs[owner[i]].Xq;
            ji->Xp = c.jobs[owner[i]].Xp;
            ji->Xr = c.jobs[owner[i]].Xr;
            continue;
        }
        ji->Xq = mr_aligned_alloc(64, ji->x_row * (size_t)ji->ncols);
        if (ji->prep) ji->Xp = mr_aligned_alloc(64, ji->xp_row * (size_t)ji->ncols);
        if (ji->rp) ji->Xr = mr_aligned_alloc(64, ji->xr_row * (size_t)ji->ncols);
        c.conv[c.n_conv++] = i;
        if (!ji->Xq || (ji->prep && !ji->Xp) || (ji->rp && !ji->Xr)) { mr_set_error("matmul: out of memory"); goto out; }
    }
    /* conversions: one column on the calling thread, more columns in one dispatch */
    c.conv_first[0] = 0;
    for (int k = 0; k < c.n_conv; k++) {
        const mr_matmul_job *j = &c.jobs[c.conv[k]];
        c.conv_first[k + 1] = c.conv_first[k] + (long)((j->ncols + MR_CONVERT_COLS - 1) / MR_CONVERT_COLS);
    }
    if (c.n_conv == 1 && c.jobs[c.conv[0]].ncols == 1) mr_matmul_convert_chunk(&c.jobs[c.conv[0]], 0);
    else if (c.n_conv > 0) mr_pool_run_chunks(pool, mr_many_convert_chunk, &c, c.conv_first[c.n_conv]);
    c.n = n;
    c.first[0] = 0;
    for (int i = 0; i < n; i++) {
        const mr_matmul_job *j = &c.jobs[i];
        long nch = j->rows > 0 && j->ncols > 0 ? (long)((j->rows + j->chunk_rows - 1) / j->chunk_rows) : 0;
        c.first[i + 1] = c.first[i] + nch;
    }
    mr_pool_run_chunks(pool, mr_many_chunk, &c, c.first[n]);
    rc = 0;
out:
    if (c.jobs)
        for (int k = 0; k < c.n_conv; k++) {
            mr_aligned_free(c.jobs[c.conv[k]].Xq);
            mr_aligned_free(c.jobs[c.conv[k]].Xp);
            mr_aligned_free(c.jobs[c.conv[k]].Xr);
        }
    free(c.jobs); free(c.first); free(c.conv); free(c.conv_first); free(owner);
    return rc;
}
