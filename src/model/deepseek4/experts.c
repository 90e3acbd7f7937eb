/* DeepSeek-V4-Flash routed experts when they are served from the mmap (no paging, no MoE
 * approximation): two dispatches over the pool instead of three products per expert.
 *
 *   1. gate + up + SwiGLU, fused: every selected expert's rows are cut in chunks; a chunk computes
 *      its rows of gate and up for the expert's tokens and applies the clamp, silu(g) * u and the
 *      routing weight (weight_before_down) to them right away. The input is converted once for all
 *      experts (a token's converted row is copied to each expert that takes it, which equals
 *      converting the gathered floats).
 *   2. the downs of every expert, together with the shared expert's down.
 * Then each token's slots are summed in slot order. Every number is the one moe.c computes (same
 * kernels through quant/matmul.h, same element operations in the same order), so the fast path and
 * the generic one give identical logits. */
#include "model/deepseek4/ds4.h"
#include "model/moe.h"
#include "model/moe_approx.h"
#include "model/ops.h"
#include "quant/matmul.h"
#include "base/prof.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int e;                 /* expert id */
    int cnt, start;        /* its tokens: slots list[start .. start+cnt) */
    const void *pg, *pu, *pd;
    mr_mm_act ax;          /* gathered input (unless the batch's act is used as is) */
    mr_mm_act ah;          /* SwiGLU output converted for the down product */
    int own_ax;
} ds4_xp;

typedef struct {
    ds4_xp *xp;
    int n_xp;
    const mr_mm_act *ax_all;  /* the batch input (n == 1: every expert uses it) */
    int tg, tu, td;           /* weight types */
    const mr_repacked *rg, *ru; /* repacked copies of the resident experts (or NULL) */
    int64_t d, F;
    const int *list;          /* slot ids t*K+j grouped by expert */
    const float *w;           /* routing weights [n*K] */
    float lim;
    float *eg, *eu;           /* [n*K][F] by position start+c */
    long *task;               /* xp index << 32 | row chunk */
    int K;                    /* experts per token */
    long *crow;               /* rows per chunk per expert */
    int err;
} ds4_moe_job;

static void ds4_gate_up_task(void *arg, long i) {
    ds4_moe_job *j = arg;
    ds4_xp *x = &j->xp[j->task[i] >> 32];
    const long ch = j->task[i] & 0xffffffffL;
    const long crow = j->crow[j->task[i] >> 32];
    const int64_t F = j->F, r0 = (int64_t)ch * crow, r1 = r0 + crow < F ? r0 + crow : F;
    const mr_mm_act *a = x->own_ax ? &x->ax : j->ax_all;
    float *g = j->eg + (int64_t)x->start * F, *u = j->eu + (int64_t)x->start * F;
    if (mr_mm_rows(a, j->tg, x->pg, j->rg, r0, r1, g, F) || mr_mm_rows(a, j->tu, x->pu, j->ru, r0, r1, u, F)) {
        j->err = 1;
        return;
    }
    for (int c = 0; c < x->cnt; c++)
        mr_swiglu(u + (int64_t)c * F + r0, g + (int64_t)c * F + r0, u + (int64_t)c * F + r0, r1 - r0, j->lim,
                  j->w[j->list[x->start + c]]);
}

static void ds4_down_act_task(void *arg, long i) {
    ds4_moe_job *j = arg;
    ds4_xp *x = &j->xp[i];
    if (mr_mm_act_make(NULL, &x->ah, j->td, j->eu + (int64_t)x->start * j->F, j->F, x->cnt, j->F)) j->err = 1;
}

static void ds4_gather_task(void *arg, long i) {
    ds4_moe_job *j = arg;
    ds4_xp *x = &j->xp[i];
    int idx[512], *ip = x->cnt <= 512 ? idx : malloc(sizeof(int) * (size_t)x->cnt);
    if (!ip) { j->err = 1; return; }
    for (int c = 0; c < x->cnt; c++) ip[c] = j->list[x->start + c] / j->K; /* the slot's token */
    if (mr_mm_act_alloc(&x->ax, j->ax_all->vdtype, j->d, x->cnt, 1)) j->err = 1;
    else { mr_mm_act_gather(&x->ax, j->ax_all, ip, x->cnt); x->own_ax = 1; }
    if (ip != idx) free(ip);
}

int ds4_moe_fast(mr_model *m, int il, const float *a, int n, const int32_t *sel, const float *w, float lim,
                 const mr_weight *sh_down, const float *hs, float *sh, float *eg, float *eu, float *ey, float *out) {
    if (mr_moe_approx_on(m) || !m->pager || mr_pager_paging(m->pager) || !m->exp_layers) return 1;
    const mr_pager_layer *pl = &m->exp_layers[il];
    const mr_gguf_tensor *tg = pl->mat[MR_PAGER_GATE], *tu = pl->mat[MR_PAGER_UP], *td = pl->mat[MR_PAGER_DOWN];
    if (!tg || !tu || !td || mr_mm_partner(tg->type) != mr_mm_partner(tu->type)) return 1;
    const int64_t d = tu->ne[0], F = tu->ne[1];
    const int E = (int)tu->ne[2];
    ds4_model *M = m->priv;
    const int k_used = M->K;
    int rc = -1, prefetched = 0, n_xp = 0;
    int *count = calloc((size_t)E + 1, sizeof(int)), *pos = calloc((size_t)E + 1, sizeof(int));
    int *list = malloc(sizeof(int) * (size_t)n * k_used), *where = malloc(sizeof(int) * (size_t)n * k_used);
    ds4_xp *xp = calloc((size_t)E, sizeof(ds4_xp));
    int *xidx = malloc(sizeof(int) * (size_t)E);
    long *crow = malloc(sizeof(long) * (size_t)E);
    long *task = NULL;
    mr_mm_part *parts = NULL;
    mr_mm_act ax = {0}, ahs = {0};
    ds4_moe_job j = {0};
    MR_PROF_BEGIN(tm);
    if (!count || !pos || !list || !where || !xp || !xidx || !crow) goto oom;
    for (int i = 0; i < n * k_used; i++) {
        if (sel[i] < 0 || sel[i] >= E) { mr_set_error("deepseek4: expert id %d out of range", sel[i]); goto done; }
        count[sel[i]]++;
    }
    /* experts in ascending id, their slots grouped (as moe.c lists them) */
    int *ids = pos; /* reuse: first the ascending ids, then the fill positions */
    for (int e = 0; e < E; e++) if (count[e]) { xidx[e] = n_xp; xp[n_xp].e = e; xp[n_xp].cnt = count[e]; n_xp++; }
    for (int x = 0, s = 0; x < n_xp; x++) { xp[x].start = s; s += xp[x].cnt; }
    memset(ids, 0, sizeof(int) * ((size_t)E + 1));
    for (int i = 0; i < n * k_used; i++) {
        ds4_xp *x = &xp[xidx[sel[i]]];
        const int p = x->start + ids[sel[i]]++;
        list[p] = i;
        where[i] = p;
    }
    {
        int *eids = malloc(sizeof(int) * (size_t)(n_xp + 1));
        if (!eids) goto oom;
        for (int x = 0; x < n_xp; x++) eids[x] = xp[x].e;
        int prc = mr_pager_prefetch(m->pager, il, eids, n_xp);
        free(eids);
        if (prc) goto done;
    }
    prefetched = 1;
    for (int x = 0; x < n_xp; x++) {
        int e;
        const void *ptr[MR_PAGER_MATS];
        if (mr_pager_next(m->pager, il, &e, ptr)) goto done;
        ds4_xp *q = &xp[xidx[e]];
        q->pg = ptr[MR_PAGER_GATE]; q->pu = ptr[MR_PAGER_UP]; q->pd = ptr[MR_PAGER_DOWN];
    }

    if (mr_prof_on) mr_prof_add("moe_experts", mr_now() - tm);
    /* input converted once; each expert's tokens gathered from it */
    MR_PROF_BEGIN(t0);
    if (mr_mm_act_make(m->pool, &ax, tg->type, a, d, n, d)) goto done;
    j = (ds4_moe_job){.xp = xp, .n_xp = n_xp, .ax_all = &ax, .tg = tg->type, .tu = tu->type, .td = td->type,
                      .rg = mr_model_expert_rp(m, il, MR_PAGER_GATE), .ru = mr_model_expert_rp(m, il, MR_PAGER_UP), .d = d, .F = F,
                      .list = list, .w = w, .lim = lim, .eg = eg, .eu = eu, .crow = crow, .K = k_used};
    if (n > 1) {
        mr_pool_run_chunks(n_xp > 1 ? m->pool : NULL, ds4_gather_task, &j, n_xp);
        if (j.err) goto oom;
    }
    /* 1. gate + up + SwiGLU, fused, all experts in one dispatch */
    {
        const size_t wr = mr_row_size(tg->type, d) + mr_row_size(tu->type, d);
        size_t total = 0;
        for (int x = 0; x < n_xp; x++) total += wr * (size_t)F;
        long ntask = 0;
        for (int x = 0; x < n_xp; x++) {
            crow[x] = mr_mm_chunk_rows(F, wr, xp[x].cnt, total, mr_pool_size(m->pool));
            ntask += (long)((F + crow[x] - 1) / crow[x]);
        }
        task = malloc(sizeof(long) * (size_t)ntask);
        if (!task) goto oom;
        long i = 0;
        for (int x = 0; x < n_xp; x++)
            for (long c = 0; c * crow[x] < F; c++) task[i++] = (long)x << 32 | c;
        j.task = task;
        mr_pool_run_chunks(m->pool, ds4_gate_up_task, &j, ntask);
        if (j.err) { mr_set_error("deepseek4: expert product failed"); goto done; }
    }
    if (mr_prof_on) mr_prof_add("mm experts_gate_up", mr_now() - t0);
    /* 2. downs (with the shared expert's) in one dispatch */
    MR_PROF_BEGIN(t1);
    mr_pool_run_chunks(n > 1 && n_xp > 1 ? m->pool : NULL, ds4_down_act_task, &j, n_xp);
    if (j.err) goto oom;
    if (mr_mm_act_make(m->pool, &ahs, sh_down->type, hs, sh_down->cols, n, sh_down->cols)) goto done;
    parts = malloc(sizeof(mr_mm_part) * (size_t)(n_xp + 1));
    if (!parts) goto oom;
    for (int x = 0; x < n_xp; x++)
        parts[x] = (mr_mm_part){xp[x].pd, td->type, d, &xp[x].ah, ey + (int64_t)xp[x].start * d, d,
                                mr_model_expert_rp(m, il, MR_PAGER_DOWN)};
    parts[n_xp] = (mr_mm_part){sh_down->data, sh_down->type, sh_down->rows, &ahs, sh, sh_down->rows, sh_down->rp};
    if (mr_matmul_parts(m->pool, parts, n_xp + 1)) goto done;
    if (mr_prof_on) mr_prof_add("mm experts_down+shexp", mr_now() - t1);
    /* slots summed per token in slot order: ((y0 + y1) + y2) + ... */
    MR_PROF_BEGIN(ts);
    for (int t = 0; t < n; t++) {
        float *o = out + (int64_t)t * d;
        memcpy(o, ey + (int64_t)where[t * k_used] * d, sizeof(float) * (size_t)d);
        for (int k = 1; k < k_used; k++) mr_add(o, o, ey + (int64_t)where[t * k_used + k] * d, d);
    }
    MR_PROF_END(ts, "moe_experts");
    rc = 0;
    goto done;
oom:
    mr_set_error("deepseek4: out of memory in the routed experts");
done:
    if (prefetched) mr_pager_release(m->pager, il);
    if (xp)
        for (int x = 0; x < n_xp; x++) { if (xp[x].own_ax) mr_mm_act_free(&xp[x].ax); mr_mm_act_free(&xp[x].ah); }
    mr_mm_act_free(&ax);
    mr_mm_act_free(&ahs);
    free(count); free(pos); free(list); free(where); free(xp); free(xidx); free(crow); free(task); free(parts);
    return rc;
}
