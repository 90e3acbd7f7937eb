/* Optional MoE approximations: top-k tail pruning and gate-first SwiGLU row skipping (moe_approx.h). */
#include "model/moe_approx.h"
#include "model/ops.h"
#include "quant/matmul.h"
#include "quant/quant.h"
#include "quant/quant_simd.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters ---- */

void mr_approx_params_default(mr_approx_params *p) {
    memset(p, 0, sizeof *p);
    p->prune_min = 1;
    p->prune_rescale = MR_APPROX_RESCALE_L2;
}

static int prune_on(const mr_approx_params *p) { return (p->prune_p > 0.0f && p->prune_p < 1.0f) || p->prune_tau > 0.0f; }
static int skip_on(const mr_approx_params *p) { return p->skip_rel > 0.0f || p->skip_abs > 0.0f; }

int mr_approx_params_enabled(const mr_approx_params *p) { return p && (prune_on(p) || skip_on(p)); }

static int check_params(const mr_approx_params *p) {
    if (!(p->prune_p >= 0.0f && p->prune_p <= 1.0f)) { mr_set_error("approx: prune=%g must be in [0, 1]", p->prune_p); return -1; }
    if (!(p->prune_tau >= 0.0f && p->prune_tau <= 1.0f)) { mr_set_error("approx: tau=%g must be in [0, 1]", p->prune_tau); return -1; }
    if (p->prune_rescale < MR_APPROX_RESCALE_L2 || p->prune_rescale > MR_APPROX_RESCALE_NONE) {
        mr_set_error("approx: unknown rescale mode %d", p->prune_rescale);
        return -1;
    }
    if (!(p->skip_rel >= 0.0f && p->skip_rel <= 1.0f)) { mr_set_error("approx: skip=%g must be in [0, 1]", p->skip_rel); return -1; }
    if (!(p->skip_abs >= 0.0f && isfinite(p->skip_abs))) { mr_set_error("approx: skip_abs=%g must be >= 0", p->skip_abs); return -1; }
    return 0;
}

static const char *rescale_names[] = {"l2", "l1", "none"};

int mr_approx_parse(const char *spec, mr_approx_params *out) {
    mr_approx_params p = *out;
    const char *s = spec ? spec : "";
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        const char *e = s;
        while (*e && *e != ' ' && *e != ',' && *e != '\t' && *e != '\n') e++;
        char tok[64];
        size_t len = (size_t)(e - s);
        if (len >= sizeof tok) { mr_set_error("approx: '%.*s...' is too long", 20, s); return -1; }
        memcpy(tok, s, len);
        tok[len] = 0;
        s = e;
        if (!strcmp(tok, "off") || !strcmp(tok, "exact")) { mr_approx_params_default(&p); continue; }
        char *eq = strchr(tok, '=');
        if (!eq) { mr_set_error("approx: expected key=value, got '%s'", tok); return -1; }
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        if (!strcmp(key, "rescale")) {
            int found = -1;
            for (int i = 0; i < 3; i++) if (!strcmp(val, rescale_names[i])) found = i;
            if (found < 0) { mr_set_error("approx: rescale=%s (expected l2, l1 or none)", val); return -1; }
            p.prune_rescale = found;
            continue;
        }
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (end == val || *end || errno || !isfinite(v)) { mr_set_error("approx: bad number '%s' for %s", val, key); return -1; }
        if (!strcmp(key, "prune")) p.prune_p = (float)v;
        else if (!strcmp(key, "tau")) p.prune_tau = (float)v;
        else if (!strcmp(key, "min")) {
            if (v != floor(v) || v < 1 || v > 1024) { mr_set_error("approx: min=%s must be an integer >= 1", val); return -1; }
            p.prune_min = (int)v;
        } else if (!strcmp(key, "skip")) p.skip_rel = (float)v;
        else if (!strcmp(key, "skip_abs")) p.skip_abs = (float)v;
        else { mr_set_error("approx: unknown key '%s' (prune, tau, min, rescale, skip, skip_abs)", key); return -1; }
    }
    if (check_params(&p)) return -1;
    *out = p;
    return 0;
}

int mr_approx_format(const mr_approx_params *p, char *buf, size_t len) {
    if (!mr_approx_params_enabled(p)) return snprintf(buf, len, "off");
    int r = p->prune_rescale >= 0 && p->prune_rescale <= 2 ? p->prune_rescale : 0;
    return snprintf(buf, len, "prune=%g tau=%g min=%d rescale=%s skip=%g skip_abs=%g", p->prune_p, p->prune_tau,
                    p->prune_min < 1 ? 1 : p->prune_min, rescale_names[r], p->skip_rel, p->skip_abs);
}

static struct mr_moe_approx *approx_get(mr_model *m) {
    if (m->approx) return m->approx;
    struct mr_moe_approx *a = calloc(1, sizeof *a);
    if (!a) { mr_set_error("approx: out of memory"); return NULL; }
    if (pthread_mutex_init(&a->mu, NULL)) { free(a); mr_set_error("approx: cannot create a mutex"); return NULL; }
    mr_approx_params_default(&a->pending);
    a->cur = a->pending;
    m->approx = a;
    return a;
}

int mr_model_set_approx(mr_model *m, const mr_approx_params *p) {
    mr_approx_params q;
    if (p) q = *p; else mr_approx_params_default(&q);
    if (check_params(&q)) return -1;
    if (!m->approx && !mr_approx_params_enabled(&q)) return 0; /* stays exact, nothing to allocate */
    struct mr_moe_approx *a = approx_get(m);
    if (!a) return -1;
    pthread_mutex_lock(&a->mu);
    a->pending = q;
    pthread_mutex_unlock(&a->mu);
    return 0;
}

void mr_model_get_approx(const mr_model *m, mr_approx_params *p) {
    if (!m->approx) { mr_approx_params_default(p); return; }
    pthread_mutex_lock(&m->approx->mu);
    *p = m->approx->pending;
    pthread_mutex_unlock(&m->approx->mu);
}

void mr_model_approx_stats(const mr_model *m, mr_approx_stats *s) {
    memset(s, 0, sizeof *s);
    if (!m->approx) return;
    pthread_mutex_lock(&m->approx->mu);
    *s = m->approx->stats;
    pthread_mutex_unlock(&m->approx->mu);
}

void mr_model_approx_stats_reset(mr_model *m) {
    if (!m->approx) return;
    pthread_mutex_lock(&m->approx->mu);
    memset(&m->approx->stats, 0, sizeof m->approx->stats);
    pthread_mutex_unlock(&m->approx->mu);
}

void mr_moe_approx_begin_eval(mr_model *m) {
    struct mr_moe_approx *a = m->approx;
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->cur = a->pending;
    a->on = mr_approx_params_enabled(&a->cur);
    pthread_mutex_unlock(&a->mu);
}

void mr_moe_approx_free(struct mr_moe_approx *a) {
    if (!a) return;
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* ---- pruning ---- */

int mr_approx_prune(const mr_approx_params *p, int k, const float *w, int *keep, float *w_out) {
    int order[k > 0 ? k : 1];
    for (int j = 0; j < k; j++) { keep[j] = 1; w_out[j] = w[j]; order[j] = j; }
    if (k <= 1 || !prune_on(p)) return k;
    /* slots by descending |w| (stable: equal weights keep slot order) */
    for (int a = 1; a < k; a++) {
        int o = order[a], b = a;
        while (b > 0 && fabsf(w[order[b - 1]]) < fabsf(w[o])) { order[b] = order[b - 1]; b--; }
        order[b] = o;
    }
    double sum = 0, sq = 0;
    for (int j = 0; j < k; j++) { sum += fabsf(w[j]); sq += (double)w[j] * w[j]; }
    int m = k;
    if (p->prune_p > 0.0f && p->prune_p < 1.0f && sum > 0) {
        double cum = 0;
        for (int i = 0; i < k; i++) {
            cum += fabsf(w[order[i]]);
            if (cum >= p->prune_p * sum) { m = i + 1; break; }
        }
    }
    if (p->prune_tau > 0.0f) {
        const double lim = (double)p->prune_tau * fabsf(w[order[0]]);
        int mt = 0;
        while (mt < k && fabsf(w[order[mt]]) >= lim) mt++;
        if (mt < m) m = mt;
    }
    const int mn = p->prune_min < 1 ? 1 : p->prune_min;
    if (m < mn) m = mn;
    if (m >= k) return k;
    double ksum = 0, ksq = 0;
    for (int i = 0; i < k; i++) {
        const int j = order[i];
        if (i < m) { ksum += fabsf(w[j]); ksq += (double)w[j] * w[j]; }
        else { keep[j] = 0; w_out[j] = 0.0f; }
    }
    double scale = 1.0;
    if (p->prune_rescale == MR_APPROX_RESCALE_L2 && ksq > 0) scale = sqrt(sq / ksq);
    else if (p->prune_rescale == MR_APPROX_RESCALE_L1 && ksum > 0) scale = sum / ksum;
    for (int i = 0; i < m; i++) w_out[order[i]] = (float)(w[order[i]] * scale);
    return m;
}

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

int mr_approx_sparse_matmul(mr_pool *pool, const void *W, int wtype, int64_t rows, int64_t cols,
                            const float *H, int64_t ncols, const uint8_t *active, int zero_gaps, float *Y) {
    const mr_type_traits *wt = mr_type_get(wtype);
    if (!wt) { mr_set_error("approx: unknown weight type %d", wtype); return -1; }
    const int blk = wt->block_size;
    const int xt = wt->vec_dot_type;
    size_t w_row = mr_row_size(wtype, cols), x_row = mr_row_size(xt, cols);
    size_t w_blk = mr_row_size(wtype, blk), x_blk = mr_row_size(xt, blk);
    if (!w_row || !x_row || !w_blk || !x_blk || x_blk * (size_t)(cols / blk) != x_row || cols > 0x7fffffff) {
        mr_set_error("approx: %lld values of %s do not split into blocks for a sparse product", (long long)cols, wt->name);
        return -1;
    }
    if (rows <= 0 || ncols <= 0) return 0;
    const int64_t nb = cols / blk;
    mr_vec_dot_fn dot;
    mr_vec_dot_x4_fn d4;
    mr_type_kernels(wtype, mr_isa(), &dot, &d4);
    mr_from_float_fn conv = xt == MR_TYPE_F32 ? NULL : mr_type_from_float(xt);
    if (!dot || (xt != MR_TYPE_F32 && !conv)) { mr_set_error("approx: no kernels for weight type %s", wt->name); return -1; }
    int rc = -1;
    uint8_t *Xq = NULL;
    int *runs = malloc(sizeof(int) * 2 * (size_t)(nb * ncols));
    int *run_off = malloc(sizeof(int) * (size_t)ncols), *n_runs = malloc(sizeof(int) * (size_t)ncols);
    if (!runs || !run_off || !n_runs) { mr_set_error("approx: out of memory"); goto done; }
    if (conv) {
        if (!(Xq = mr_aligned_alloc(64, x_row * (size_t)ncols))) { mr_set_error("approx: out of memory"); goto done; }
        for (int64_t c = 0; c < ncols; c++) conv(H + c * cols, Xq + (size_t)c * x_row, cols);
    }
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
        .W = W, .w_row = w_row, .w_blk = w_blk, .x_row = x_row, .x_blk = x_blk, .rows = rows, .ncols = ncols,
        .nb = nb, .blk = blk, .Xq = conv ? Xq : (const uint8_t *)H, .active = active, .runs = runs,
        .run_off = run_off, .n_runs = n_runs, .Y = Y, .dot = dot,
    };
    const int nth = mr_pool_size(pool);
    long cr = (long)(rows / (nth * 8));
    j.chunk_rows = cr < 16 ? 16 : cr;
    j.chunks_per_col = (long)((rows + j.chunk_rows - 1) / j.chunk_rows);
    mr_pool_run_chunks(pool, sparse_chunk, &j, j.chunks_per_col * (long)ncols);
    rc = 0;
done:
    mr_aligned_free(Xq);
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

int mr_approx_rows_matmul(mr_pool *pool, const void *W, int wtype, int64_t F, int64_t d, const float *X, int64_t cnt,
                       const uint8_t *act, float *U) {
    const mr_type_traits *wt = mr_type_get(wtype);
    if (!wt) { mr_set_error("approx: unknown weight type %d", wtype); return -1; }
    const int xt = wt->vec_dot_type;
    size_t w_row = mr_row_size(wtype, d), x_row = mr_row_size(xt, d);
    mr_vec_dot_fn dot;
    mr_vec_dot_x4_fn dot4;
    mr_type_kernels(wtype, mr_isa(), &dot, &dot4);
    mr_from_float_fn conv = xt == MR_TYPE_F32 ? NULL : mr_type_from_float(xt);
    if (!w_row || !x_row || !dot || (xt != MR_TYPE_F32 && !conv) || d > 0x7fffffff) {
        mr_set_error("approx: no row kernels for %s rows of %lld", wt->name, (long long)d);
        return -1;
    }
    uint8_t *Xq = NULL;
    if (conv) {
        if (!(Xq = mr_aligned_alloc(64, x_row * (size_t)cnt))) { mr_set_error("approx: out of memory"); return -1; }
        for (int64_t c = 0; c < cnt; c++) conv(X + c * d, Xq + (size_t)c * x_row, d);
    }
    rows_job j = {.W = W, .w_row = w_row, .x_row = x_row, .F = F, .d = d, .cnt = cnt,
                  .Xq = conv ? Xq : (const uint8_t *)X, .act = act, .U = U, .dot = dot, .dot4 = dot4};
    const int nth = mr_pool_size(pool);
    const long groups = (long)((cnt + 3) / 4);
    long cr = (long)(F * groups / (nth * 8));
    if (cr > F) cr = (long)F;
    j.chunk_rows = cr < 16 ? 16 : cr;
    j.chunks_per_group = (long)((F + j.chunk_rows - 1) / j.chunk_rows);
    mr_pool_run_chunks(pool, rows_chunk, &j, j.chunks_per_group * groups);
    mr_aligned_free(Xq);
    return 0;
}

/* ---- the approximate expert layer ---- */

int mr_moe_experts_approx(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n,
                          const int32_t *sel, const float *w, float *out) {
    const mr_approx_params *P = &m->approx->cur;
    const int E = c->n_expert, K = c->n_used;
    if (!m->pager || !m->exp_layers || layer < 0 || layer >= m->n_layer) {
        mr_set_error("moe: layer %d has no routed experts (pager not initialised)", layer);
        return -1;
    }
    const mr_pager_layer *pl = &m->exp_layers[layer];
    const mr_gguf_tensor *tg = pl->mat[MR_PAGER_GATE], *tu = pl->mat[MR_PAGER_UP], *td = pl->mat[MR_PAGER_DOWN];
    if (!tu || !td) { mr_set_error("moe: layer %d lacks ffn_up_exps / ffn_down_exps", layer); return -1; }
    const int64_t d = tu->ne[0], F = tu->ne[1];
    const int skipping = skip_on(P) && tg != NULL;
    const mr_type_traits *dt = mr_type_get(td->type);
    const int64_t dblk = dt ? dt->block_size : 1, nb = F / dblk;
    mr_approx_stats st = {0};
    int rc = -1, prefetched = 0;
    int *count = calloc((size_t)E + 1, sizeof(int));
    int *start = calloc((size_t)E + 1, sizeof(int));
    int *ids = calloc((size_t)E + 1, sizeof(int));
    int *list = malloc(sizeof(int) * (size_t)n * K);
    int *keep = malloc(sizeof(int) * (size_t)n * K);
    float *wk = malloc(sizeof(float) * (size_t)n * K);
    float *xs = malloc(sizeof(float) * (size_t)n * d);
    float *g = malloc(sizeof(float) * (size_t)n * F);
    float *u = malloc(sizeof(float) * (size_t)n * F);
    float *y = malloc(sizeof(float) * (size_t)n * d);
    float *slots = malloc(sizeof(float) * (size_t)n * K * d);
    uint8_t *act = skipping ? malloc((size_t)n * F) : NULL;
    float *sg = skipping ? malloc(sizeof(float) * (size_t)n * F) : NULL;  /* silu(g) */
    uint8_t *bact = skipping ? malloc((size_t)n * (nb > 0 ? nb : 1)) : NULL;
    if (!count || !start || !ids || !list || !keep || !wk || !xs || !g || !u || !y || !slots || (skipping && (!act || !bact || !sg))) {
        mr_set_error("moe: out of memory");
        goto done;
    }
    if (skipping && (!dt || F % dblk)) { mr_set_error("moe: n_ff %lld is not a multiple of the down block size", (long long)F); goto done; }

    /* 1. pruning (a hook on the routing result: dropped slots are never paged in nor computed) */
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < K; j++)
            if (sel[t * K + j] < 0 || sel[t * K + j] >= E) { mr_set_error("moe: expert id %d out of range", sel[t * K + j]); goto done; }
        st.experts_kept += (uint64_t)mr_approx_prune(P, K, w + (int64_t)t * K, keep + (int64_t)t * K, wk + (int64_t)t * K);
    }
    st.token_layers = (uint64_t)n;
    st.experts_routed = (uint64_t)n * (uint64_t)K;

    /* 2. group the kept (token, slot) pairs by expert */
    for (int i = 0; i < n * K; i++) if (keep[i]) count[sel[i]]++;
    int n_ids = 0;
    for (int e = 0; e < E; e++) { start[e + 1] = start[e] + count[e]; if (count[e]) ids[n_ids++] = e; }
    memset(count, 0, sizeof(int) * (size_t)E);
    for (int i = 0; i < n * K; i++) if (keep[i]) list[start[sel[i]] + count[sel[i]]++] = i;

    if (mr_pager_prefetch(m->pager, layer, ids, n_ids)) goto done;
    prefetched = 1;
    for (int ii = 0; ii < n_ids; ii++) {
        int e;
        const void *ptr[MR_PAGER_MATS];
        if (mr_pager_next(m->pager, layer, &e, ptr)) goto done;
        const int cnt = count[e];
        const int *li = list + start[e];
        for (int r = 0; r < cnt; r++) memcpy(xs + (int64_t)r * d, x + (int64_t)(li[r] / K) * d, sizeof(float) * (size_t)d);
        int sparse_down = 0;
        int64_t group_bskipped = 0;
        if (!skipping) {
            /* exactly the operations of mr_moe_experts */
            if (mr_matmul(m->pool, ptr[MR_PAGER_UP], tu->type, F, d, xs, cnt, u)) goto done;
            if (tg && mr_matmul(m->pool, ptr[MR_PAGER_GATE], tg->type, F, d, xs, cnt, g)) goto done;
        } else {
            /* gate first; the rows to compute follow from silu(g) */
            if (mr_matmul(m->pool, ptr[MR_PAGER_GATE], tg->type, F, d, xs, cnt, g)) goto done;
            for (int r = 0; r < cnt; r++) {
                float *gr = g + (int64_t)r * F;
                uint8_t *ar = act + (int64_t)r * F, *br = bact + (int64_t)r * nb;
                if (c->clamp > 1e-6f)
                    for (int64_t i = 0; i < F; i++) if (gr[i] > c->clamp) gr[i] = c->clamp;
                float *sr = sg + (int64_t)r * F, mx = 0.0f;
                for (int64_t i = 0; i < F; i++) { sr[i] = mr_silu(gr[i]); if (fabsf(sr[i]) > mx) mx = fabsf(sr[i]); }
                float thr = P->skip_rel * mx;
                if (P->skip_abs > thr) thr = P->skip_abs;
                int64_t skipped = 0, bskipped = 0;
                for (int64_t b = 0; b < nb; b++) {
                    int any = 0;
                    for (int64_t i = b * dblk; i < (b + 1) * dblk; i++) {
                        ar[i] = !(fabsf(sr[i]) < thr);
                        any |= ar[i];
                        skipped += !ar[i];
                    }
                    br[b] = (uint8_t)any;
                    bskipped += !any;
                }
                st.rows_skipped += (uint64_t)skipped;
                st.blocks_skipped += (uint64_t)bskipped;
                if (bskipped) sparse_down = 1;
                group_bskipped += bskipped;
            }
            st.rows_total += (uint64_t)cnt * (uint64_t)F;
            st.blocks_total += (uint64_t)cnt * (uint64_t)nb;
            if (cnt >= 4) {
                /* a batch: the dense product has the faster multi-column kernels, and a row can be
                 * skipped only when all the columns of its group skip it, which is rare; compute
                 * all rows and drop the inactive ones (the same values, so the same h) */
                if (mr_matmul(m->pool, ptr[MR_PAGER_UP], tu->type, F, d, xs, cnt, u)) goto done;
                for (int64_t i = 0; i < (int64_t)cnt * F; i++) if (!act[i]) u[i] = 0.0f;
            } else if (mr_approx_rows_matmul(m->pool, ptr[MR_PAGER_UP], tu->type, F, d, xs, cnt, act, u)) goto done;
        }
        /* skipped rows have up = 0, so h = 0 there */
        for (int r = 0; r < cnt; r++)
            mr_swiglu(u + (int64_t)r * F, tg ? g + (int64_t)r * F : NULL, u + (int64_t)r * F, F, c->clamp,
                      c->weight_before_down ? wk[li[r]] : 1.0f);
        /* a batch loses the 4-column kernel (about 2x faster per column) in the sparse product: worth it
         * only when at least half of the blocks are skipped */
        if (sparse_down && cnt > 1 && group_bskipped * 2 < (int64_t)cnt * nb) sparse_down = 0;
        if (sparse_down) {
            if (mr_approx_sparse_matmul(m->pool, ptr[MR_PAGER_DOWN], td->type, d, F, u, cnt, bact, 1, y)) goto done;
        } else if (mr_matmul(m->pool, ptr[MR_PAGER_DOWN], td->type, d, F, u, cnt, y)) goto done;
        for (int r = 0; r < cnt; r++) {
            float *dst = slots + (int64_t)li[r] * d;
            const float *src = y + (int64_t)r * d;
            if (c->weight_before_down) memcpy(dst, src, sizeof(float) * (size_t)d);
            else { const float wr = wk[li[r]]; for (int64_t i = 0; i < d; i++) dst[i] = src[i] * wr; }
        }
        mr_pager_done(m->pager, layer, e);
    }
    /* kept slots summed in slot order (all kept: the exact chain of adds) */
    for (int t = 0; t < n; t++) {
        float *o = out + (int64_t)t * d;
        int first = 1;
        for (int j = 0; j < K; j++) {
            if (!keep[t * K + j]) continue;
            const float *src = slots + ((int64_t)t * K + j) * d;
            if (first) memcpy(o, src, sizeof(float) * (size_t)d);
            else mr_add(o, o, src, d);
            first = 0;
        }
    }
    rc = 0;
    pthread_mutex_lock(&m->approx->mu);
    mr_approx_stats *S = &m->approx->stats;
    S->token_layers += st.token_layers; S->experts_routed += st.experts_routed; S->experts_kept += st.experts_kept;
    S->rows_total += st.rows_total; S->rows_skipped += st.rows_skipped;
    S->blocks_total += st.blocks_total; S->blocks_skipped += st.blocks_skipped;
    pthread_mutex_unlock(&m->approx->mu);
done:
    if (prefetched) mr_pager_release(m->pager, layer);
    free(count); free(start); free(ids); free(list); free(keep); free(wk); free(xs); free(g); free(u); free(y);
    free(slots); free(act); free(bact); free(sg);
    return rc;
}
