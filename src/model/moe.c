/* Routed mixture of experts: routing and the expert engine (see moe.h). */
#include "model/moe.h"
#include "model/moe_approx.h"
#include "model/ops.h"
#include "quant/matmul.h"
#include "base/prof.h"

#include <math.h>
#include <stdlib.h>

/* DeepSeek-V3 group-limited routing (ggml build_moe_ffn): group g's score = its best + second best
 * selection score (argsort top-2, summed in that order); the n_group_used best groups stay, the
 * others' experts get -inf. Equal scores keep the lower index first, like the top-k below. */
static void moe_mask_groups(const mr_moe_cfg *c, float *score) {
    const int G = c->n_group, per = c->n_expert / G;
    float gs[256] = {0};
    int top[256] = {0};
    unsigned char keep[256] = {0};
    if (G > 256 || per < 2 || c->n_group_used > G) return; /* rejected by the loaders */
    for (int g = 0; g < G; g++) {
        mr_topk(score + g * per, per, 2, top);
        gs[g] = score[g * per + top[0]] + score[g * per + top[1]];
    }
    mr_topk(gs, G, c->n_group_used, top);
    for (int k = 0; k < c->n_group_used; k++) keep[top[k]] = 1;
    for (int g = 0; g < G; g++)
        if (!keep[g]) for (int e = 0; e < per; e++) score[g * per + e] = -INFINITY;
}

int mr_moe_gating_from_gguf(const mr_model *m, uint32_t id, int if_none, unsigned allowed, int *gating) {
    /* index = GGUF value; the names are the reference's (llama_expert_gating_func_name) */
    static const int map[] = {0, MR_GATING_SOFTMAX, MR_GATING_SIGMOID, MR_GATING_SOFTMAX_WEIGHT, MR_GATING_SQRT_SOFTPLUS};
    static const char *const name[] = {"none", "softmax", "sigmoid", "softmax_weight", "sqrt_softplus"};
    if (id >= sizeof map / sizeof map[0]) {
        mr_set_error("%s: expert_gating_func %u is not a known gating function (0..4)", m->path, id);
        return -1;
    }
    const int g = id ? map[id] : if_none;
    if (g <= 0 || g >= 32 || !(allowed & MR_GATING_BIT(g))) {
        mr_set_error("%s: expert_gating_func %u (%s) is not supported by %s", m->path, id, name[id], m->arch_name);
        return -1;
    }
    *gating = g;
    return 0;
}

static void moe_probs(const mr_moe_cfg *c, const float *l, float *probs) {
    const int E = c->n_expert;
    switch (c->gating) {
    case MR_GATING_SIGMOID: for (int e = 0; e < E; e++) probs[e] = mr_sigmoid(l[e]); break;
    case MR_GATING_SQRT_SOFTPLUS: for (int e = 0; e < E; e++) probs[e] = sqrtf(mr_softplus(l[e])); break;
    case MR_GATING_SOFTMAX_WEIGHT: memcpy(probs, l, sizeof(float) * (size_t)E); break;
    default: mr_softmax(probs, l, E); break;
    }
}

void mr_moe_scores(const mr_moe_cfg *c, const float *logits, const float *sel_bias, float *probs, float *score) {
    moe_probs(c, logits, probs);
    for (int e = 0; e < c->n_expert; e++) score[e] = sel_bias ? probs[e] + sel_bias[e] : probs[e];
    if (c->n_group > 1) moe_mask_groups(c, score);
}

int mr_moe_route(const mr_moe_cfg *c, const float *logits, const float *sel_bias, const int32_t *sel_in,
                 int n, int32_t *sel, float *w) {
    const int E = c->n_expert, K = c->n_used;
    /* per token: probs[E], score[E], top[K]; on the stack for every published model's sizes (no
     * allocation per layer and evaluation) */
    enum { ROUTE_E = 1024, ROUTE_K = 64 };
    float probs_st[2 * ROUTE_E];
    int top_st[ROUTE_K];
    float *probs = E <= ROUTE_E ? probs_st : mr_malloc(sizeof(float) * (size_t)E * 2);
    int *top = K <= ROUTE_K ? top_st : mr_malloc(sizeof(int) * (size_t)(K > 0 ? K : 1));
    int rc = -1;
    if (!probs || !top) { mr_set_error("moe: out of memory"); goto done; }
    float *score = probs + E;
    for (int t = 0; t < n; t++) {
        const float *l = logits + (int64_t)t * E;
        int32_t *s = sel + (int64_t)t * K;
        float *wt = w + (int64_t)t * K;
        if (sel_in) {
            moe_probs(c, l, probs);
            for (int j = 0; j < K; j++) {
                int32_t e = sel_in[(int64_t)t * K + j];
                if (e < 0 || e >= E) {
                    mr_set_error("moe: expert id %d out of range [0, %d)", e, E);
                    goto done;
                }
                s[j] = e;
            }
        } else {
            mr_moe_scores(c, l, sel_bias, probs, score);
            mr_topk(score, E, K, top); /* equal scores keep the lower id first */
            for (int j = 0; j < K; j++) s[j] = top[j];
        }
        for (int j = 0; j < K; j++) wt[j] = probs[s[j]];
        if (c->gating == MR_GATING_SOFTMAX_WEIGHT) mr_softmax(wt, wt, K);
        if (c->norm_w) { /* ggml_sum_rows: the sum accumulates in double */
            double sum = 0.0;
            for (int j = 0; j < K; j++) sum += (double)wt[j];
            float fs = (float)sum;
            if (fs < 6.103515625e-5f) fs = 6.103515625e-5f;
            for (int j = 0; j < K; j++) wt[j] /= fs;
        }
        if (c->w_scale != 0.0f && c->w_scale != 1.0f)
            for (int j = 0; j < K; j++) wt[j] *= c->w_scale;
    }
    rc = 0;
done:
    if (probs != probs_st) free(probs);
    if (top != top_st) free(top);
    return rc;
}

/* ---- the expert engine ---- */

/* One expert of the plan; work rows [start, start + cnt) of the engine's buffers are its slots. */
typedef struct {
    int e, cnt, start;
    int remote;                 /* computed by m->moe_remote */
    int sparse_down;            /* row skipping: the down product skips the inactive blocks */
    const void *pg, *pu, *pd;   /* its matrices (local experts, once the pager served them) */
    mr_mm_act ag, au;           /* its tokens' inputs for the gate / up partner, gathered (n > 1) */
    mr_mm_act ah;               /* its activations h, converted for the down product */
} moe_xp;

/* The plan of one layer and batch, with the engine's buffers. Slot s = t*K + j is token t's j-th
 * expert. The kept slots (all, unless pruning drops some: keep[s] = 0) are grouped by expert in
 * ascending id: work row r holds slot list[r] (token tok_of[r], weight wrow[r]); row_of[s] is the
 * inverse (-1: dropped). */
typedef struct {
    mr_model *m;
    mr_scratch *ws;                /* every buffer of the plan (an arena, reset per call) */
    const mr_moe_cfg *c;
    const mr_approx_params *ap;    /* this eval's approximations, NULL when exact */
    int layer, n, K, E, rows, n_xp;
    int skip;                      /* row masks (gate-first SwiGLU row skipping) */
    int tg, tu, td, has_gate;      /* weight types */
    const mr_repacked *rg, *ru, *rd; /* the model's repacked copies of resident experts, or the views of
                                        matrices repacked in the pager's slots (NULL: none) */
    int64_t d, F, dblk, nb;        /* dblk: the down type's block along F; nb = F / dblk */
    moe_xp *xp;
    int *xidx;                     /* [E] expert id -> index in xp */
    int *list, *row_of, *tok_of;
    uint8_t *keep;
    float *wk;                     /* [n*K] weights used (pruning rescales the kept ones) */
    float *wrow;                   /* [rows] */
    float *g, *u, *y;              /* [rows][F] gate, [rows][F] up then h, [rows][d] expert outputs */
    uint8_t *act, *bact;           /* row skipping: [rows][F] row masks, [rows][nb] down block masks */
    float *alpha;                  /* row skipping: [rows][nab] the budget rule's scale per 128-row block */
    int64_t nab;                   /* (F + 127) / 128 */
    mr_mm_act ax_g, ax_u;          /* the batch input converted for the gate / up partner */
    const mr_mm_act *in_g, *in_u;  /* in_u is &ax_g when both have the same partner */
    long *crow, *task;             /* gate/up dispatch: rows per chunk (per expert), expert << 32 | chunk */
    const int *xs;                 /* gather / down conversion: the experts of the dispatch */
    float *out;
    int stage;                     /* MOE_FUSED: gate + up + SwiGLU; MOE_GATE, MOE_UP: one product */
    int err;
    mr_approx_stats st;
} moe_plan;

enum { MOE_FUSED, MOE_GATE, MOE_UP };


/* routing result -> plan: pruning's keep-mask, the slots grouped by expert, remote experts marked */
/* n items of sz bytes from the plan's arena (NULL: error set) */
static void *moe_take(moe_plan *P, size_t n, size_t sz) { return mr_scratch_alloc(P->ws, n * sz); }

static int moe_plan_make(moe_plan *P, mr_model *m, mr_scratch *ws, int layer, const mr_moe_cfg *c, int n,
                         const int32_t *sel, const float *w) {
    memset(P, 0, sizeof *P);
    P->m = m; P->ws = ws; P->c = c; P->layer = layer; P->n = n; P->K = c->n_used; P->E = c->n_expert;
    if (!m->pager || !m->exp_layers || layer < 0 || layer >= m->n_exp_layers) {
        mr_set_error("moe: layer %d has no routed experts (pager not initialised)", layer);
        return -1;
    }
    const mr_pager_layer *pl = &m->exp_layers[layer];
    const mr_gguf_tensor *tg = pl->mat[MR_PAGER_GATE], *tu = pl->mat[MR_PAGER_UP], *td = pl->mat[MR_PAGER_DOWN];
    if (!tu || !td) { mr_set_error("moe: layer %d lacks ffn_up_exps / ffn_down_exps", layer); return -1; }
    P->has_gate = tg != NULL;
    P->tg = tg ? tg->type : -1; P->tu = tu->type; P->td = td->type;
    P->d = tu->ne[0]; P->F = tu->ne[1];
    P->rg = mr_model_expert_rp(m, layer, MR_PAGER_GATE);
    P->ru = mr_model_expert_rp(m, layer, MR_PAGER_UP);
    P->rd = mr_model_expert_rp(m, layer, MR_PAGER_DOWN);
    P->ap = mr_moe_approx_on(m) ? &m->approx->cur : NULL;
    P->skip = P->ap && mr_approx_skip_on(P->ap) && P->has_gate;
    const int K = P->K, E = P->E, nk = n * K;
    const int64_t F = P->F, d = P->d;
    if (P->skip) {
        const mr_type_traits *dt = mr_type_get(P->td);
        P->dblk = dt ? dt->block_size : 0;
        if (!P->dblk || F % P->dblk) { mr_set_error("moe: n_ff %lld is not a multiple of the down block size", (long long)F); return -1; }
        P->nb = F / P->dblk;
        P->nab = (F + MR_APPROX_ROW_BLOCK - 1) / MR_APPROX_ROW_BLOCK;
    }
    int *count = moe_take(P, (size_t)E + 1, sizeof(int));
    P->xidx = moe_take(P, (size_t)E + 1, sizeof(int));
    P->list = moe_take(P, (size_t)nk, sizeof(int)); P->row_of = moe_take(P, (size_t)nk, sizeof(int));
    P->tok_of = moe_take(P, (size_t)nk, sizeof(int)); P->keep = moe_take(P, (size_t)nk, 1);
    P->wk = moe_take(P, (size_t)nk, sizeof(float)); P->wrow = moe_take(P, (size_t)nk, sizeof(float));
    if (!count || !P->xidx || !P->list || !P->row_of || !P->tok_of || !P->keep || !P->wk || !P->wrow) return -1;
    memset(count, 0, sizeof(int) * ((size_t)E + 1));
    for (int s = 0; s < nk; s++)
        if (sel[s] < 0 || sel[s] >= E) { mr_set_error("moe: expert id %d out of range", sel[s]); return -1; }
    if (P->ap && mr_approx_prunes_layer(P->ap, layer, c->hash_routed)) {
        int kint[K > 0 ? K : 1];
        for (int t = 0; t < n; t++) {
            P->st.experts_kept += (uint64_t)mr_approx_prune(P->ap, K, w + (int64_t)t * K, kint, P->wk + (int64_t)t * K);
            for (int j = 0; j < K; j++) P->keep[t * K + j] = (uint8_t)kint[j];
        }
        P->st.token_layers = (uint64_t)n;
        P->st.experts_routed = (uint64_t)nk;
    } else {
        memset(P->keep, 1, (size_t)nk);
        memcpy(P->wk, w, sizeof(float) * (size_t)nk);
        if (P->ap) { /* approximations on, none here: counted as kept */
            P->st.experts_kept = (uint64_t)nk;
            P->st.token_layers = (uint64_t)n;
            P->st.experts_routed = (uint64_t)nk;
        }
    }
    for (int s = 0; s < nk; s++) if (P->keep[s]) count[sel[s]]++;
    for (int e = 0; e < E; e++) if (count[e]) P->n_xp++;
    P->xp = moe_take(P, (size_t)P->n_xp + 1, sizeof(moe_xp));
    P->crow = moe_take(P, (size_t)P->n_xp + 1, sizeof(long));
    if (!P->xp || !P->crow) return -1;
    memset(P->xp, 0, sizeof(moe_xp) * ((size_t)P->n_xp + 1));
    for (int e = 0, i = 0, r = 0; e < E; e++) {
        P->xidx[e] = -1;
        if (!count[e]) continue;
        P->xidx[e] = i;
        P->xp[i] = (moe_xp){.e = e, .cnt = count[e], .start = r};
        if (m->moe_remote) P->xp[i].remote = m->moe_remote->owns(m->moe_remote->ctx, layer, e) != 0;
        r += count[e];
        count[e] = 0;
        i++;
    }
    for (int s = 0; s < nk; s++) {
        P->row_of[s] = -1;
        if (!P->keep[s]) continue;
        const moe_xp *x = &P->xp[P->xidx[sel[s]]];
        const int r = x->start + count[sel[s]]++;
        P->list[r] = s; P->row_of[s] = r; P->tok_of[r] = s / K; P->wrow[r] = P->wk[s];
        P->rows++;
    }
    const int64_t rows = P->rows > 0 ? P->rows : 1;
    P->u = moe_take(P, (size_t)(rows * F), sizeof(float));
    P->y = moe_take(P, (size_t)(rows * d), sizeof(float));
    if (P->has_gate && !(P->g = moe_take(P, (size_t)(rows * F), sizeof(float)))) return -1;
    if (P->skip && (!(P->act = moe_take(P, (size_t)(rows * F), 1)) || !(P->bact = moe_take(P, (size_t)(rows * P->nb), 1)) ||
                    !(P->alpha = moe_take(P, (size_t)(rows * P->nab), sizeof(float)))))
        return -1;
    return P->u && P->y ? 0 : -1;
}

/* the batch input of expert x for the gate / up product */
static const mr_mm_act *moe_in_g(const moe_plan *P, const moe_xp *x) { return P->n > 1 ? &x->ag : P->in_g; }
static const mr_mm_act *moe_in_u(const moe_plan *P, const moe_xp *x) {
    return P->n > 1 ? (P->in_u == P->in_g ? &x->ag : &x->au) : P->in_u;
}

/* Gather: an expert's tokens' converted rows copied from the batch input (which equals converting
 * the gathered floats); a single token uses the batch input as it is. */
static void moe_gather_task(void *arg, long i) {
    moe_plan *P = arg;
    moe_xp *x = &P->xp[P->xs[i]];
    const int *tok = P->tok_of + x->start;
    mr_mm_act_gather(&x->ag, P->in_g, tok, x->cnt);
    if (P->in_u != P->in_g) mr_mm_act_gather(&x->au, P->in_u, tok, x->cnt);
}

static int moe_gather(moe_plan *P, const int *xs, int nx) {
    if (P->n == 1) return 0;
    for (int k = 0; k < nx; k++) { /* the room from the arena here: it serves one thread */
        moe_xp *x = &P->xp[xs[k]];
        if (mr_mm_act_alloc_in(&x->ag, P->ws, P->in_g->vdtype, P->d, x->cnt, 1)) return -1;
        if (P->in_u != P->in_g && mr_mm_act_alloc_in(&x->au, P->ws, P->in_u->vdtype, P->d, x->cnt, 1)) return -1;
    }
    P->xs = xs;
    mr_pool_run_chunks(nx > 1 ? P->m->pool : NULL, moe_gather_task, P, nx);
    return 0;
}

/* expert e's bias rows of this layer (gpt-oss; NULL where there is none) */
static void moe_bias_of(const moe_plan *P, int e, const float **gb, const float **ub, const float **db) {
    const mr_moe_bias *b = P->c->bias ? &P->c->bias[P->layer] : NULL;
    *gb = b && b->gate ? b->gate + (int64_t)e * P->F : NULL;
    *ub = b && b->up ? b->up + (int64_t)e * P->F : NULL;
    *db = b && b->down ? b->down + (int64_t)e * P->d : NULL;
}

/* Gate and up rows r0..r1 of one expert for all its tokens (P->stage says which), then (MOE_FUSED)
 * the expert's gate/up biases and the activation of those rows: gpt-oss's SwiGLU-OAI, or mr_swiglu
 * with the clamp and the weight before the down product. */
static void moe_gate_up_task(void *arg, long i) {
    moe_plan *P = arg;
    const long xi = P->task[i] >> 32, ch = P->task[i] & 0xffffffffL, crow = P->crow[xi];
    const moe_xp *x = &P->xp[xi];
    const int64_t F = P->F, r0 = (int64_t)ch * crow, r1 = r0 + crow < F ? r0 + crow : F;
    float *g = P->has_gate ? P->g + (int64_t)x->start * F : NULL, *u = P->u + (int64_t)x->start * F;
    if ((P->stage != MOE_GATE && mr_mm_rows(moe_in_u(P, x), P->tu, x->pu, P->ru, r0, r1, u, F)) ||
        (P->stage != MOE_UP && g && mr_mm_rows(moe_in_g(P, x), P->tg, x->pg, P->rg, r0, r1, g, F))) {
        P->err = 1;
        return;
    }
    if (P->stage != MOE_FUSED) return;
    const float *gb, *ub, *db;
    moe_bias_of(P, x->e, &gb, &ub, &db);
    for (int r = 0; r < x->cnt; r++) {
        float *gr = g ? g + (int64_t)r * F + r0 : NULL, *ur = u + (int64_t)r * F + r0;
        if (ub) mr_add(ur, ur, ub + r0, r1 - r0);
        if (gr && gb) mr_add(gr, gr, gb + r0, r1 - r0);
        if (gr && P->c->act == MR_MOE_ACT_SWIGLU_OAI) mr_swiglu_oai(ur, gr, ur, r1 - r0, 1.702f, 7.0f);
        else mr_swiglu(ur, gr, ur, r1 - r0, P->c->clamp, P->c->weight_before_down ? P->wrow[x->start + r] : 1.0f);
    }
}

/* One dispatch over row chunks of the experts xs[nx]. Chunks hold whole groups when a matrix is
 * repacked (repack.h), so every chunk runs the repacked kernel on all its rows. */
static int moe_gate_up(moe_plan *P, const int *xs, int nx, int stage) {
    const int64_t F = P->F, d = P->d;
    const int gate = P->has_gate && stage != MOE_UP, up = stage != MOE_GATE;
    const size_t wr = (up ? mr_row_size(P->tu, d) : 0) + (gate ? mr_row_size(P->tg, d) : 0);
    const long gu = up ? mr_mm_group_rows(P->ru, P->tu, d) : 1, gg = gate ? mr_mm_group_rows(P->rg, P->tg, d) : 1;
    const long grp = gu > gg ? gu : gg;
    const size_t total = wr * (size_t)F * (size_t)nx;
    long ntask = 0;
    for (int k = 0; k < nx; k++) {
        long cr = mr_mm_chunk_rows(F, wr, P->xp[xs[k]].cnt, total, mr_pool_size(P->m->pool));
        cr = (cr + grp - 1) / grp * grp;
        P->crow[xs[k]] = cr;
        ntask += (long)((F + cr - 1) / cr);
    }
    long *task = moe_take(P, (size_t)(ntask > 0 ? ntask : 1), sizeof(long));
    if (!task) return -1;
    for (long k = 0, i = 0; k < nx; k++)
        for (long ch = 0; ch * P->crow[xs[k]] < F; ch++) task[i++] = (long)xs[k] << 32 | ch;
    P->task = task;
    P->stage = stage;
    mr_pool_run_chunks(P->m->pool, moe_gate_up_task, P, ntask);
    P->task = NULL;
    if (P->err) { mr_set_error("moe: no expert product for these weight types"); return -1; }
    return 0;
}

static void moe_down_act_task(void *arg, long i) {
    moe_plan *P = arg;
    moe_xp *x = &P->xp[P->xs[i]];
    mr_mm_act_fill(&x->ah, P->u + (int64_t)x->start * P->F, P->F);
}

/* The down products of the experts xs[nx] (their h converted once each) and the extra products, in
 * one dispatch; an expert whose rows were skipped by blocks goes through the sparse product. */
static int moe_down(moe_plan *P, const int *xs, int nx, const mr_moe_extra *extra, int n_extra) {
    mr_pool *pool = P->m->pool;
    const int64_t d = P->d;
    int np = 0;
    mr_mm_act *eact = moe_take(P, (size_t)n_extra + 1, sizeof(mr_mm_act));
    mr_mm_part *parts = moe_take(P, (size_t)nx + (size_t)n_extra + 1, sizeof(mr_mm_part));
    if (!eact || !parts) return -1;
    if (nx == 1) { /* one expert: its columns converted over the pool */
        moe_xp *x = &P->xp[xs[0]];
        if (mr_mm_act_make_in(pool, &x->ah, P->ws, P->td, P->u + (int64_t)x->start * P->F, P->F, x->cnt, P->F)) return -1;
    } else if (nx > 1) { /* one expert per task, the room taken here (the arena serves one thread) */
        for (int k = 0; k < nx; k++)
            if (mr_mm_act_reserve_in(&P->xp[xs[k]].ah, P->ws, P->td, P->F, P->xp[xs[k]].cnt)) return -1;
        P->xs = xs;
        mr_pool_run_chunks(P->n > 1 ? pool : NULL, moe_down_act_task, P, nx);
    }
    for (int k = 0; k < nx; k++) {
        moe_xp *x = &P->xp[xs[k]];
        float *y = P->y + (int64_t)x->start * d;
        if (x->sparse_down) {
            const void *pd = x->pd;
            if (mr_repack_is_view(P->rd)) { /* repacked in its pager slot: the sparse product wants plain rows */
                void *plain = moe_take(P, (size_t)d, mr_row_size(P->td, P->F));
                if (!plain || mr_repack_undo(x->pd, plain, P->td, P->F, d)) return -1;
                pd = plain;
            }
            if (mr_matmul_blocks(pool, pd, P->td, d, &x->ah, P->bact + (int64_t)x->start * P->nb, 1, y)) return -1;
        } else parts[np++] = (mr_mm_part){x->pd, P->td, d, &x->ah, y, d, P->rd};
    }
    for (int k = 0; k < n_extra; k++) {
        const mr_weight *w = extra[k].w;
        if (mr_mm_act_make_in(pool, &eact[k], P->ws, w->type, extra[k].X, w->cols, P->n, w->cols)) return -1;
        parts[np++] = (mr_mm_part){w->data, w->type, w->rows, &eact[k], extra[k].Y, w->rows, w->rp};
    }
    const int rc = np ? mr_matmul_parts_in(pool, P->ws, parts, np) : 0;
    for (int k = 0; rc == 0 && P->c->bias && k < nx; k++) { /* down biases (gpt-oss), before the weighting */
        const moe_xp *x = &P->xp[xs[k]];
        const float *gb, *ub, *db;
        moe_bias_of(P, x->e, &gb, &ub, &db);
        for (int r = 0; db && r < x->cnt; r++) mr_add(P->y + (int64_t)(x->start + r) * d, P->y + (int64_t)(x->start + r) * d, db, d);
    }
    return rc;
}

/* Row skipping for one expert: the gate first, the masks from silu(g) (threshold or budget rule), the
 * up product of the active rows only (a batch of 4 or more computes all rows with the faster
 * multi-column kernels and drops the inactive ones: the same values), the SwiGLU with the budget
 * rule's block scales, and the down product sparse over the inactive blocks when that pays off. */
static int moe_expert_skipping(moe_plan *P, int xi) {
    moe_xp *x = &P->xp[xi];
    const int64_t F = P->F, nb = P->nb;
    if (moe_gate_up(P, &xi, 1, MOE_GATE)) return -1;
    int64_t bskipped = 0;
    for (int r = 0; r < x->cnt; r++) {
        const int64_t row = x->start + r;
        int64_t skipped;
        bskipped += mr_approx_row_mask(P->ap, P->ap->rows_routed, P->g + row * F, F, P->c->clamp, P->dblk, P->act + row * F,
                                       P->bact + row * nb, P->alpha + row * P->nab, &skipped);
        P->st.rows_skipped += (uint64_t)skipped;
    }
    P->st.blocks_skipped += (uint64_t)bskipped;
    P->st.rows_total += (uint64_t)x->cnt * (uint64_t)F;
    P->st.blocks_total += (uint64_t)x->cnt * (uint64_t)nb;
    float *u = P->u + (int64_t)x->start * F;
    const uint8_t *act = P->act + (int64_t)x->start * F;
    if (x->cnt >= 4 || mr_repack_is_view(P->ru)) { /* (rows repacked in a pager slot: all of them, the same values) */
        if (moe_gate_up(P, &xi, 1, MOE_UP)) return -1;
        for (int64_t i = 0; i < (int64_t)x->cnt * F; i++) if (!act[i]) u[i] = 0.0f;
    } else if (mr_matmul_rows_masked(P->m->pool, x->pu, P->tu, F, moe_in_u(P, x), act, u)) return -1;
    for (int r = 0; r < x->cnt; r++) { /* inactive rows have up = 0, so h = 0 */
        mr_swiglu(u + (int64_t)r * F, P->g + (int64_t)(x->start + r) * F, u + (int64_t)r * F, F, P->c->clamp,
                  P->c->weight_before_down ? P->wrow[x->start + r] : 1.0f);
        mr_approx_row_scale(u + (int64_t)r * F, P->alpha + (int64_t)(x->start + r) * P->nab, F);
    }
    /* a batch loses the 4-column kernel (about 2x faster per column) in the sparse product: worth it
     * only when at least half of the blocks are skipped */
    x->sparse_down = bskipped > 0 && (x->cnt == 1 || bskipped * 2 >= (int64_t)x->cnt * nb);
    return moe_down(P, &xi, 1, NULL, 0);
}

/* out_t = the outputs of token t's kept slots (times the weight unless it came before the down
 * product) added in slot order: ((y_0 + y_1) + y_2) + ..., like the reference's chain of adds.
 * Tokens [8 ch, 8 ch + 8). */
static void moe_sum_chunk(void *arg, long ch) {
    const moe_plan *P = arg;
    const int64_t d = P->d;
    const int wbd = P->c->weight_before_down;
    for (int t = (int)ch * 8; t < P->n && t < (int)ch * 8 + 8; t++) {
        float *o = P->out + (int64_t)t * d;
        int first = 1;
        for (int j = 0; j < P->K; j++) {
            const int s = t * P->K + j;
            if (!P->keep[s]) continue;
            const float *src = P->y + (int64_t)P->row_of[s] * d;
            const float wr = P->wk[s];
            if (first) {
                if (wbd) memcpy(o, src, sizeof(float) * (size_t)d);
                else for (int64_t e = 0; e < d; e++) o[e] = src[e] * wr;
            } else if (wbd) mr_add(o, o, src, d);
            else for (int64_t e = 0; e < d; e++) o[e] = o[e] + src[e] * wr;
            first = 0;
        }
    }
}

void mr_moe_set_remote(mr_model *m, const mr_moe_remote *r) { m->moe_remote = r; }

int mr_moe_experts(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n, const int32_t *sel,
                   const float *w, const mr_moe_extra *extra, int n_extra, mr_scratch *ws, float *out) {
    moe_plan P;
    int rc = -1, prefetched = 0, nl = 0, submitted = 0;
    int *local = NULL;
    mr_scratch own = {0}; /* without the caller's: this call's, freed at its end */
    if (!ws) ws = &own;
    mr_scratch_reset(ws);
    MR_PROF_BEGIN(t_gather);
    if (moe_plan_make(&P, m, ws, layer, c, n, sel, w)) goto done;
    if (((P.ap && (mr_approx_prune_on(P.ap) || P.skip)) || m->moe_remote) && (c->bias || c->act != MR_MOE_ACT_SWIGLU)) {
        mr_set_error("moe: approximations and remote experts do not support expert biases / SwiGLU-OAI yet");
        goto done;
    }
    P.out = out;
    if (m->moe_remote && m->moe_remote->submit) { /* remote experts start before the local ones */
        mr_moe_job *jobs = moe_take(&P, (size_t)P.n_xp + 1, sizeof *jobs);
        int nj = 0;
        if (!jobs) goto done;
        for (int i = 0; i < P.n_xp; i++) {
            const moe_xp *xe = &P.xp[i];
            if (xe->remote)
                jobs[nj++] = (mr_moe_job){xe->e, P.tok_of + xe->start, xe->cnt, P.wrow + xe->start, P.y + (int64_t)xe->start * P.d};
        }
        int src = m->moe_remote->submit(m->moe_remote->ctx, layer, c, x, P.d, jobs, nj);
        submitted = 1; /* even when it failed: what it sent is collected at done */
        if (src) goto done;
    }
    if (!(local = moe_take(&P, (size_t)P.n_xp + 1, sizeof(int)))) goto done;
    for (int i = 0; i < P.n_xp; i++) if (!P.xp[i].remote) local[nl++] = P.xp[i].e; /* ascending ids */
    if (mr_pager_prefetch(m->pager, layer, local, nl)) goto done;
    prefetched = 1;
    if (c->guess_next && n <= MR_MOE_GUESS_ROWS && mr_pager_guessing(m->pager)) {
        /* every row's guess (the sequences of a decode step), in one hint: the pager skips repeats */
        int next = -1, gids[MR_MOE_GUESS_ROWS * 64], nk = 0;
        for (int t = 0; t < n; t++) {
            int nt = -1, ids[64];
            const int ng = c->guess_next(c->guess_ctx, t, x + (int64_t)t * P.d, &nt, ids, 64);
            if (ng < 0) goto done;
            if (ng == 0 || (next >= 0 && nt != next)) continue;
            next = nt;
            for (int i = 0; i < ng; i++) /* experts another process owns are not read here */
                if (!m->moe_remote || !m->moe_remote->owns(m->moe_remote->ctx, next, ids[i])) gids[nk++] = ids[i];
        }
        if (nk > 0 && mr_pager_hint(m->pager, next, gids, nk)) goto done;
    }
    for (int k = 0; k < nl; k++) local[k] = P.xidx[local[k]]; /* now indices into P.xp */
    /* the batch input converted once per partner type (gate and up usually share one) */
    if (mr_mm_act_make_in(m->pool, &P.ax_g, ws, P.has_gate ? P.tg : P.tu, x, P.d, n, P.d)) goto done;
    P.in_g = P.in_u = &P.ax_g;
    if (P.has_gate && mr_mm_partner(P.tg) != mr_mm_partner(P.tu)) {
        if (mr_mm_act_make_in(m->pool, &P.ax_u, ws, P.tu, x, P.d, n, P.d)) goto done;
        P.in_u = &P.ax_u;
    }
    if (!mr_pager_paging(m->pager) && !P.skip) {
        /* every expert is in memory: all gate/up products in one dispatch, then all downs (with the
         * extra products) in another */
        for (int k = 0; k < nl; k++) {
            int e;
            const void *ptr[MR_PAGER_MATS];
            if (mr_pager_next(m->pager, layer, &e, ptr)) goto done;
            moe_xp *xe = &P.xp[P.xidx[e]];
            xe->pg = ptr[MR_PAGER_GATE]; xe->pu = ptr[MR_PAGER_UP]; xe->pd = ptr[MR_PAGER_DOWN];
        }
        if (moe_gather(&P, local, nl)) goto done;
        MR_PROF_END(t_gather, "moe_experts/convert+gather");
        MR_PROF_BEGIN(t_gu);
        if (nl && moe_gate_up(&P, local, nl, MOE_FUSED)) goto done;
        MR_PROF_END(t_gu, "moe_experts/gate+up+act");
        MR_PROF_BEGIN(t_down);
        if (moe_down(&P, local, nl, extra, n_extra)) goto done;
        MR_PROF_END(t_down, "moe_experts/down");
    } else {
        /* the extra products first (they overlap the pager's reads), then each expert as the pager
         * serves it, resident ones first; its slot is handed back right after */
        if (n_extra && moe_down(&P, NULL, 0, extra, n_extra)) goto done;
        for (int k = 0; k < nl; k++) {
            int e;
            const void *ptr[MR_PAGER_MATS];
            if (mr_pager_next(m->pager, layer, &e, ptr)) goto done;
            int xi = P.xidx[e];
            moe_xp *xe = &P.xp[xi];
            xe->pg = ptr[MR_PAGER_GATE]; xe->pu = ptr[MR_PAGER_UP]; xe->pd = ptr[MR_PAGER_DOWN];
            if (moe_gather(&P, &xi, 1)) goto done;
            if (P.skip ? moe_expert_skipping(&P, xi)
                       : moe_gate_up(&P, &xi, 1, MOE_FUSED) || moe_down(&P, &xi, 1, NULL, 0)) goto done;
            mr_pager_done(m->pager, layer, e);
        }
    }
    if (submitted) {
        submitted = 0;
        if (m->moe_remote->collect(m->moe_remote->ctx)) goto done;
    }
    for (int i = 0; i < P.n_xp && !(m->moe_remote && m->moe_remote->submit); i++) {
        const moe_xp *xe = &P.xp[i];
        if (xe->remote && m->moe_remote->compute(m->moe_remote->ctx, layer, xe->e, c, x, P.d, P.tok_of + xe->start, xe->cnt,
                                                 P.wrow + xe->start, P.y + (int64_t)xe->start * P.d)) goto done;
    }
    MR_PROF_BEGIN(t_sum);
    mr_pool_run_chunks(n > 1 ? m->pool : NULL, moe_sum_chunk, &P, (n + 7) / 8);
    MR_PROF_END(t_sum, "moe_experts/weighted_sum");
    if (P.ap) mr_moe_approx_add_stats(m, &P.st);
    rc = 0;
done:
    if (submitted) m->moe_remote->collect(m->moe_remote->ctx); /* an error after submit: drain the replies */
    if (prefetched) mr_pager_release(m->pager, layer);
    mr_scratch_free(&own);
    return rc;
}

/* the owner's side of a remote (ep/ep_mpi.c's serving rank): what mr_session_eval does around an
 * eval, for one batch of expert rows */
int mr_moe_serve(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n, const int32_t *sel,
                 const float *w, float *y) {
    if (mr_model_check_files(m)) return -1;
    const int isa_prev = mr_isa_enter(m->isa);
    const int rc = mr_moe_experts(m, layer, c, x, n, sel, w, NULL, 0, NULL, y);
    mr_isa_leave(isa_prev);
    if (rc && m->pager) mr_pager_release(m->pager, layer);
    return rc;
}
