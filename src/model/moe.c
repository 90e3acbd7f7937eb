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

/* SwiGLU (or SiLU without gate) of one expert row in place in u, with the optional clamp and the
 * routing weight before the down product (deepseek4) */
static void moe_act_row(const mr_moe_cfg *c, int has_gate, float *gr, float *ur, int64_t F, float wr) {
    if (!has_gate) { for (int64_t i = 0; i < F; i++) ur[i] = mr_silu(ur[i]); }
    else {
        if (c->clamp > 1e-6f) {
            const float lim = c->clamp;
            for (int64_t i = 0; i < F; i++) {
                if (gr[i] > lim) gr[i] = lim;
                ur[i] = ur[i] < -lim ? -lim : (ur[i] > lim ? lim : ur[i]);
            }
        }
        mr_swiglu(ur, gr, ur, F);
    }
    if (c->weight_before_down) for (int64_t i = 0; i < F; i++) ur[i] *= wr;
}

/* All experts of the batch at once (no paging): rows of the work buffers are in `list` order (grouped by
 * expert); each matrix product is the one the per-expert loop computes (same kernels, same columns),
 * so the result is bit-identical to it, with 2 pool dispatches (plus conversions) instead of 3 per
 * expert. A single-token batch multiplies every expert with x itself, so its conversion is shared. */
static int moe_experts_batched(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n, const float *w,
                               const int *ids, int n_ids, const int *count, const int *start, const int *list,
                               const mr_gguf_tensor *tg, const mr_gguf_tensor *tu, const mr_gguf_tensor *td,
                               float *out) {
    const int K = c->n_used;
    const int64_t d = tu->ne[0], F = tu->ne[1], rows = (int64_t)n * K;
    int rc = -1;
    float *xs = n > 1 ? malloc(sizeof(float) * (size_t)(rows * d)) : NULL; /* gathered inputs, then outputs */
    float *y = n > 1 ? xs : malloc(sizeof(float) * (size_t)(rows * d));
    float *g = malloc(sizeof(float) * (size_t)(rows * F));
    float *u = malloc(sizeof(float) * (size_t)(rows * F));
    mr_matmul_task *tk = malloc(sizeof(mr_matmul_task) * 2 * (size_t)n_ids);
    if ((n > 1 && !xs) || !y || !g || !u || !tk) { mr_set_error("moe: out of memory"); goto done; }
    MR_PROF_BEGIN(t_gather);
    if (n > 1)
        for (int64_t r = 0; r < rows; r++) memcpy(xs + r * d, x + (int64_t)(list[r] / K) * d, sizeof(float) * (size_t)d);
    int nt = 0;
    for (int ii = 0; ii < n_ids; ii++) {
        const int e = ids[ii];
        const void *ptr[MR_PAGER_MATS];
        if (mr_pager_get(m->pager, layer, e, ptr)) goto done;
        const float *xe = n > 1 ? xs + (int64_t)start[e] * d : x;
        tk[nt++] = (mr_matmul_task){ptr[MR_PAGER_UP], tu->type, F, d, xe, count[e], u + (int64_t)start[e] * F};
        if (tg) tk[nt++] = (mr_matmul_task){ptr[MR_PAGER_GATE], tg->type, F, d, xe, count[e], g + (int64_t)start[e] * F};
    }
    MR_PROF_END(t_gather, "moe_experts/gather");
    MR_PROF_BEGIN(t_gu);
    if (mr_matmul_many(m->pool, tk, nt)) goto done;
    MR_PROF_END(t_gu, "moe_experts/gate+up");
    MR_PROF_BEGIN(t_act);
    for (int64_t r = 0; r < rows; r++) moe_act_row(c, tg != NULL, g + r * F, u + r * F, F, w[list[r]]);
    MR_PROF_END(t_act, "moe_experts/act");
    nt = 0;
    for (int ii = 0; ii < n_ids; ii++) {
        const int e = ids[ii];
        const void *ptr[MR_PAGER_MATS];
        if (mr_pager_get(m->pager, layer, e, ptr)) goto done;
        tk[nt++] = (mr_matmul_task){ptr[MR_PAGER_DOWN], td->type, d, F, u + (int64_t)start[e] * F, count[e],
                                    y + (int64_t)start[e] * d};
    }
    MR_PROF_BEGIN(t_down);
    if (mr_matmul_many(m->pool, tk, nt)) goto done;
    MR_PROF_END(t_down, "moe_experts/down");
    MR_PROF_BEGIN(t_sum);
    {
        /* out_t = its slots' outputs (times the weight) added in slot order; row_of[t*K + j] = work row */
        int *row_of = malloc(sizeof(int) * (size_t)rows);
        if (!row_of) { mr_set_error("moe: out of memory"); goto done; }
        for (int64_t r = 0; r < rows; r++) row_of[list[r]] = (int)r;
        for (int t = 0; t < n; t++) {
            float *o = out + (int64_t)t * d;
            for (int j = 0; j < K; j++) {
                const int i = t * K + j;
                const float *src = y + (int64_t)row_of[i] * d;
                const float wr = c->weight_before_down ? 1.0f : w[i];
                if (j == 0) {
                    if (c->weight_before_down) memcpy(o, src, sizeof(float) * (size_t)d);
                    else for (int64_t k = 0; k < d; k++) o[k] = src[k] * wr;
                } else if (c->weight_before_down) mr_add(o, o, src, d);
                else for (int64_t k = 0; k < d; k++) o[k] = o[k] + src[k] * wr;
            }
        }
        free(row_of);
    }
    MR_PROF_END(t_sum, "moe_experts/weighted_sum");
    rc = 0;
done:
    if (n > 1) free(xs); else free(y);
    free(g); free(u); free(tk);
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
    if (!mr_pager_paging(m->pager)) {
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
        for (int r = 0; r < cnt; r++) {
            float *gr = g + (int64_t)r * F, *ur = u + (int64_t)r * F;
            const float wr = w[li[r]];
            if (!tg) { for (int64_t i = 0; i < F; i++) ur[i] = mr_silu(ur[i]); }
            else {
                if (c->clamp > 1e-6f) {
                    const float lim = c->clamp;
                    for (int64_t i = 0; i < F; i++) {
                        if (gr[i] > lim) gr[i] = lim;
                        ur[i] = ur[i] < -lim ? -lim : (ur[i] > lim ? lim : ur[i]);
                    }
                }
                mr_swiglu(ur, gr, ur, F);
            }
            if (c->weight_before_down) for (int64_t i = 0; i < F; i++) ur[i] *= wr;
        }
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
