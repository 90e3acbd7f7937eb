/* Routed mixture of experts: routing and grouped expert products (see moe.h). */
#include "model/moe.h"
#include "model/moe_approx.h"
#include "model/ops.h"
#include "quant/matmul.h"
#include "base/prof.h"

#include <stdlib.h>

int mr_moe_route(const mr_moe_cfg *c, const float *logits, const float *sel_bias, const int32_t *sel_in,
                 int n, int32_t *sel, float *w) {
    const int E = c->n_expert, K = c->n_used;
    float *probs = malloc(sizeof(float) * (size_t)E * 2);
    if (!probs) { mr_set_error("moe: out of memory"); return -1; }
    float *score = probs + E;
    for (int t = 0; t < n; t++) {
        const float *l = logits + (int64_t)t * E;
        switch (c->gating) {
        case MR_GATING_SIGMOID: for (int e = 0; e < E; e++) probs[e] = mr_sigmoid(l[e]); break;
        case MR_GATING_SQRT_SOFTPLUS: for (int e = 0; e < E; e++) probs[e] = sqrtf(mr_softplus(l[e])); break;
        case MR_GATING_SOFTMAX_WEIGHT: memcpy(probs, l, sizeof(float) * (size_t)E); break;
        default: mr_softmax(probs, l, E); break;
        }
        int32_t *s = sel + (int64_t)t * K;
        float *wt = w + (int64_t)t * K;
        if (sel_in) {
            for (int j = 0; j < K; j++) {
                int32_t e = sel_in[(int64_t)t * K + j];
                if (e < 0 || e >= E) { free(probs); mr_set_error("moe: expert id %d out of range [0, %d)", e, E); return -1; }
                s[j] = e;
            }
        } else {
            for (int e = 0; e < E; e++) score[e] = sel_bias ? probs[e] + sel_bias[e] : probs[e];
            /* top-K by descending score; equal scores keep the lower id first */
            for (int j = 0; j < K; j++) {
                int best = -1;
                for (int e = 0; e < E; e++) {
                    int taken = 0;
                    for (int i = 0; i < j; i++) if (s[i] == e) { taken = 1; break; }
                    if (taken) continue;
                    if (best < 0 || score[e] > score[best]) best = e;
                }
                s[j] = best;
            }
        }
        for (int j = 0; j < K; j++) wt[j] = probs[s[j]];
        if (c->gating == MR_GATING_SOFTMAX_WEIGHT) mr_softmax(wt, wt, K);
        if (c->norm_w) {
            float sum = 0.0f;
            for (int j = 0; j < K; j++) sum += wt[j];
            if (sum < 6.103515625e-5f) sum = 6.103515625e-5f;
            for (int j = 0; j < K; j++) wt[j] /= sum;
        }
        if (c->w_scale != 0.0f && c->w_scale != 1.0f)
            for (int j = 0; j < K; j++) wt[j] *= c->w_scale;
    }
    free(probs);
    return 0;
}

int mr_moe_prefetch(mr_model *m, int layer, const mr_moe_cfg *c, const int32_t *sel, int n) {
    if (!m->pager) { mr_set_error("moe: layer %d has no routed experts (pager not initialised)", layer); return -1; }
    const int E = c->n_expert;
    unsigned char *used = calloc((size_t)E + 1, 1);
    int *ids = malloc(sizeof(int) * ((size_t)E + 1));
    int n_ids = 0, rc = -1;
    if (!used || !ids) { mr_set_error("moe: out of memory"); goto out; }
    for (int i = 0; i < n * c->n_used; i++) {
        if (sel[i] < 0 || sel[i] >= E) { mr_set_error("moe: expert id %d out of range", sel[i]); goto out; }
        used[sel[i]] = 1;
    }
    for (int e = 0; e < E; e++) if (used[e]) ids[n_ids++] = e; /* ascending, as mr_moe_experts lists them */
    rc = mr_pager_prefetch(m->pager, layer, ids, n_ids);
out:
    free(used); free(ids);
    return rc;
}

/* All experts of the batch at once (no paging), in two pool dispatches:
 *   1. gate + up + activation, fused: the input is converted once (a token's converted row is
 *      copied to each expert that takes it, which equals converting the gathered floats); every
 *      expert's F rows are cut in chunks, and a chunk computes its rows of gate and up for the
 *      expert's tokens (quant/matmul.h: mr_mm_rows) and applies the clamp, SwiGLU and the
 *      weight-before-down to those rows right away;
 *   2. the down products of every expert (their activations converted once each).
 * Work rows are in `list` order (grouped by expert). Every number is the one the per-expert loop
 * computes (same kernels and columns, same element operations), so the logits are bit-identical. */
typedef struct {
    const void *pg, *pu, *pd;
    int cnt, start;
    mr_mm_act ax;          /* gathered input (n > 1) */
    mr_mm_act ah;          /* activation rows converted for the down product */
} moe_xp;

typedef struct {
    moe_xp *xp;
    const mr_mm_act *ax_all;
    const mr_moe_cfg *c;
    const mr_repacked *rg, *ru;   /* repacked copies of the resident experts (or NULL) */
    int has_gate, tg, tu, td, K, n;
    int64_t d, F;
    const int *list;
    const float *w;
    float *g, *u;
    long *task, *crow;
    int err;
} moe_batch_job;

static void moe_gather_task(void *arg, long i) {
    moe_batch_job *j = arg;
    moe_xp *x = &j->xp[i];
    int idx[256], *ip = x->cnt <= 256 ? idx : malloc(sizeof(int) * (size_t)x->cnt);
    if (!ip) { j->err = 1; return; }
    for (int r = 0; r < x->cnt; r++) ip[r] = j->list[x->start + r] / j->K; /* the slot's token */
    if (mr_mm_act_alloc(&x->ax, j->ax_all->vdtype, j->d, x->cnt, 1)) j->err = 1;
    else mr_mm_act_gather(&x->ax, j->ax_all, ip, x->cnt);
    if (ip != idx) free(ip);
}

static void moe_gate_up_task(void *arg, long i) {
    moe_batch_job *j = arg;
    moe_xp *x = &j->xp[j->task[i] >> 32];
    const long ch = j->task[i] & 0xffffffffL, crow = j->crow[j->task[i] >> 32];
    const int64_t F = j->F, r0 = (int64_t)ch * crow, r1 = r0 + crow < F ? r0 + crow : F;
    const mr_mm_act *a = j->n > 1 ? &x->ax : j->ax_all;
    float *g = j->g + (int64_t)x->start * F, *u = j->u + (int64_t)x->start * F;
    if (mr_mm_rows(a, j->tu, x->pu, j->ru, r0, r1, u, F) ||
        (j->has_gate && mr_mm_rows(a, j->tg, x->pg, j->rg, r0, r1, g, F))) {
        j->err = 1;
        return;
    }
    for (int r = 0; r < x->cnt; r++)
        mr_swiglu(u + (int64_t)r * F + r0, j->has_gate ? g + (int64_t)r * F + r0 : NULL, u + (int64_t)r * F + r0, r1 - r0,
                  j->c->clamp, j->c->weight_before_down ? j->w[j->list[x->start + r]] : 1.0f);
}

static void moe_down_act_task(void *arg, long i) {
    moe_batch_job *j = arg;
    moe_xp *x = &j->xp[i];
    if (mr_mm_act_make(NULL, &x->ah, j->td, j->u + (int64_t)x->start * j->F, j->F, x->cnt, j->F)) j->err = 1;
}

/* the weighted sum of tokens [8 ch, 8 ch + 8) (tokens are independent) */
typedef struct {
    const mr_moe_cfg *c;
    const float *y, *w;
    const int *row_of;
    float *out;
    int64_t d;
    int K, n;
} moe_sum_job;

static void moe_sum_chunk(void *arg, long ch) {
    const moe_sum_job *j = arg;
    const int64_t d = j->d;
    for (int t = (int)ch * 8; t < j->n && t < (int)ch * 8 + 8; t++) {
        float *o = j->out + (int64_t)t * d;
        for (int k = 0; k < j->K; k++) {
            const int i = t * j->K + k;
            const float *src = j->y + (int64_t)j->row_of[i] * d;
            const float wr = j->w[i];
            if (k == 0) {
                if (j->c->weight_before_down) memcpy(o, src, sizeof(float) * (size_t)d);
                else for (int64_t e = 0; e < d; e++) o[e] = src[e] * wr;
            } else if (j->c->weight_before_down) mr_add(o, o, src, d);
            else for (int64_t e = 0; e < d; e++) o[e] = o[e] + src[e] * wr;
        }
    }
}

static int moe_experts_batched(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n, const float *w,
                               const int *ids, int n_ids, const int *count, const int *start, const int *list,
                               const mr_gguf_tensor *tg, const mr_gguf_tensor *tu, const mr_gguf_tensor *td,
                               float *out) {
    const int K = c->n_used, nth = mr_pool_size(m->pool);
    const int64_t d = tu->ne[0], F = tu->ne[1], rows = (int64_t)n * K;
    int rc = -1;
    float *g = malloc(sizeof(float) * (size_t)(rows * F));
    float *u = malloc(sizeof(float) * (size_t)(rows * F));
    float *y = malloc(sizeof(float) * (size_t)(rows * d));
    moe_xp *xp = calloc((size_t)n_ids, sizeof *xp);
    long *crow = malloc(sizeof(long) * (size_t)n_ids);
    long *task = NULL;
    mr_mm_part *parts = malloc(sizeof(mr_mm_part) * (size_t)n_ids);
    int *row_of = malloc(sizeof(int) * (size_t)rows);
    mr_mm_act ax = {0};
    if (!g || !u || !y || !xp || !crow || !parts || !row_of) goto oom;
    for (int ii = 0; ii < n_ids; ii++) {
        const void *ptr[MR_PAGER_MATS];
        if (mr_pager_get(m->pager, layer, ids[ii], ptr)) goto done;
        xp[ii] = (moe_xp){.pg = ptr[MR_PAGER_GATE], .pu = ptr[MR_PAGER_UP], .pd = ptr[MR_PAGER_DOWN],
                          .cnt = count[ids[ii]], .start = start[ids[ii]]};
    }
    const mr_repacked *rd = mr_model_expert_rp(m, layer, MR_PAGER_DOWN);
    moe_batch_job j = {.xp = xp, .ax_all = &ax, .c = c, .rg = mr_model_expert_rp(m, layer, MR_PAGER_GATE),
                       .ru = mr_model_expert_rp(m, layer, MR_PAGER_UP), .has_gate = tg != NULL, .tg = tg ? tg->type : -1,
                       .tu = tu->type, .td = td->type, .K = K, .n = n, .d = d, .F = F, .list = list, .w = w,
                       .g = g, .u = u, .crow = crow};
    MR_PROF_BEGIN(t_gather);
    if (mr_mm_act_make(m->pool, &ax, tu->type, x, d, n, d)) goto done;
    if (n > 1) {
        mr_pool_run_chunks(m->pool, moe_gather_task, &j, n_ids);
        if (j.err) goto oom;
    }
    MR_PROF_END(t_gather, "moe_experts/convert+gather");
    MR_PROF_BEGIN(t_gu);
    {
        const size_t wr = mr_row_size(tu->type, d) + (tg ? mr_row_size(tg->type, d) : 0);
        const size_t total = wr * (size_t)F * (size_t)n_ids;
        const long gr = mr_mm_group_rows(j.ru, tu->type, d);
        long ntask = 0;
        for (int ii = 0; ii < n_ids; ii++) {
            crow[ii] = mr_mm_chunk_rows(F, wr, xp[ii].cnt, total, nth);
            crow[ii] = (crow[ii] + gr - 1) / gr * gr; /* whole repacked groups */
            ntask += (long)((F + crow[ii] - 1) / crow[ii]);
        }
        if (!(task = malloc(sizeof(long) * (size_t)ntask))) goto oom;
        long i = 0;
        for (int ii = 0; ii < n_ids; ii++)
            for (long ch = 0; ch * crow[ii] < F; ch++) task[i++] = (long)ii << 32 | ch;
        j.task = task;
        mr_pool_run_chunks(m->pool, moe_gate_up_task, &j, ntask);
        if (j.err) { mr_set_error("moe: no expert product for these weight types"); goto done; }
    }
    MR_PROF_END(t_gu, "moe_experts/gate+up+act");
    MR_PROF_BEGIN(t_down);
    mr_pool_run_chunks(n > 1 ? m->pool : NULL, moe_down_act_task, &j, n_ids);
    if (j.err) goto oom;
    for (int ii = 0; ii < n_ids; ii++)
        parts[ii] = (mr_mm_part){xp[ii].pd, td->type, d, &xp[ii].ah, y + (int64_t)xp[ii].start * d, d, rd};
    if (mr_matmul_parts(m->pool, parts, n_ids)) goto done;
    MR_PROF_END(t_down, "moe_experts/down");
    MR_PROF_BEGIN(t_sum);
    /* out_t = its slots' outputs (times the weight) added in slot order; row_of[t*K + j] = work row */
    for (int64_t r = 0; r < rows; r++) row_of[list[r]] = (int)r;
    moe_sum_job sj = {c, y, w, row_of, out, d, K, n};
    mr_pool_run_chunks(n > 1 ? m->pool : NULL, moe_sum_chunk, &sj, (n + 7) / 8);
    MR_PROF_END(t_sum, "moe_experts/weighted_sum");
    rc = 0;
    goto done;
oom:
    mr_set_error("moe: out of memory");
done:
    if (xp)
        for (int ii = 0; ii < n_ids; ii++) { mr_mm_act_free(&xp[ii].ax); mr_mm_act_free(&xp[ii].ah); }
    mr_mm_act_free(&ax);
    free(g); free(u); free(y); free(xp); free(crow); free(task); free(parts); free(row_of);
    return rc;
}

int mr_moe_experts(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n,
                   const int32_t *sel, const float *w, float *out) {
    if (mr_moe_approx_on(m)) return mr_moe_experts_approx(m, layer, c, x, n, sel, w, out); /* moe_approx.h */
    const int E = c->n_expert, K = c->n_used;
    if (!m->pager || !m->exp_layers || layer < 0 || layer >= m->n_layer) {
        mr_set_error("moe: layer %d has no routed experts (pager not initialised)", layer);
        return -1;
    }
    const mr_pager_layer *pl = &m->exp_layers[layer];
    const mr_gguf_tensor *tg = pl->mat[MR_PAGER_GATE], *tu = pl->mat[MR_PAGER_UP], *td = pl->mat[MR_PAGER_DOWN];
    if (!tu || !td) { mr_set_error("moe: layer %d lacks ffn_up_exps / ffn_down_exps", layer); return -1; }
    const int64_t d = tu->ne[0], F = tu->ne[1];
    int rc = -1, prefetched = 0;
    int *count = calloc((size_t)E + 1, sizeof(int));
    int *start = calloc((size_t)E + 1, sizeof(int));
    int *ids = calloc((size_t)E + 1, sizeof(int));
    int *list = malloc(sizeof(int) * (size_t)n * K);        /* (t*K + j) grouped by expert */
    float *xs = malloc(sizeof(float) * (size_t)n * d);       /* gathered inputs of one expert */
    float *g = malloc(sizeof(float) * (size_t)n * F);
    float *u = malloc(sizeof(float) * (size_t)n * F);
    float *y = malloc(sizeof(float) * (size_t)n * d);
    float *slots = malloc(sizeof(float) * (size_t)n * K * d); /* per (token, slot) expert output */
    if (!count || !start || !ids || !list || !xs || !g || !u || !y || !slots) { mr_set_error("moe: out of memory"); goto done; }

    for (int i = 0; i < n * K; i++) {
        if (sel[i] < 0 || sel[i] >= E) { mr_set_error("moe: expert id %d out of range", sel[i]); goto done; }
        count[sel[i]]++;
    }
    int n_ids = 0;
    for (int e = 0; e < E; e++) { start[e + 1] = start[e] + count[e]; if (count[e]) ids[n_ids++] = e; }
    memset(count, 0, sizeof(int) * (size_t)E);
    for (int i = 0; i < n * K; i++) list[start[sel[i]] + count[sel[i]]++] = i;

    if (mr_pager_prefetch(m->pager, layer, ids, n_ids)) goto done;
    prefetched = 1;
    if (!mr_pager_paging(m->pager) && (!tg || mr_mm_partner(tg->type) == mr_mm_partner(tu->type))) {
        /* every expert is in the mmap: all gate/up products in one dispatch, then all down products */
        if (moe_experts_batched(m, layer, c, x, n, w, ids, n_ids, count, start, list, tg, tu, td, out)) goto done;
        rc = 0;
        goto done;
    }
    for (int ii = 0; ii < n_ids; ii++) {
        /* experts in the pager's order: resident ones first, so compute overlaps the reads of the rest
         * (the result does not depend on the order: outputs are summed per token in slot order below) */
        int e;
        const void *ptr[MR_PAGER_MATS];
        if (mr_pager_next(m->pager, layer, &e, ptr)) goto done;
        const int cnt = count[e];
        const int *li = list + start[e];
        for (int r = 0; r < cnt; r++) memcpy(xs + (int64_t)r * d, x + (int64_t)(li[r] / K) * d, sizeof(float) * (size_t)d);
        if (mr_matmul(m->pool, ptr[MR_PAGER_UP], tu->type, F, d, xs, cnt, u)) goto done;
        if (tg && mr_matmul(m->pool, ptr[MR_PAGER_GATE], tg->type, F, d, xs, cnt, g)) goto done;
        for (int r = 0; r < cnt; r++)
            mr_swiglu(u + (int64_t)r * F, tg ? g + (int64_t)r * F : NULL, u + (int64_t)r * F, F, c->clamp,
                      c->weight_before_down ? w[li[r]] : 1.0f);
        if (mr_matmul(m->pool, ptr[MR_PAGER_DOWN], td->type, d, F, u, cnt, y)) goto done;
        for (int r = 0; r < cnt; r++) {
            float *dst = slots + (int64_t)li[r] * d;
            const float *src = y + (int64_t)r * d;
            if (c->weight_before_down) memcpy(dst, src, sizeof(float) * (size_t)d);
            else { const float wr = w[li[r]]; for (int64_t i = 0; i < d; i++) dst[i] = src[i] * wr; }
        }
        mr_pager_done(m->pager, layer, e); /* its slot may now take another expert of the batch */
    }
    for (int t = 0; t < n; t++) {
        float *o = out + (int64_t)t * d;
        memcpy(o, slots + (int64_t)t * K * d, sizeof(float) * (size_t)d);
        for (int j = 1; j < K; j++) mr_add(o, o, slots + ((int64_t)t * K + j) * d, d);
    }
    rc = 0;
done:
    if (prefetched) mr_pager_release(m->pager, layer);
    free(count); free(start); free(ids); free(list); free(xs); free(g); free(u); free(y); free(slots);
    return rc;
}
