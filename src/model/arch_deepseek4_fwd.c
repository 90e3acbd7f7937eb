/* DeepSeek-V4-Flash (`deepseek4`) forward pass (see the top of arch_deepseek4.c for the paths and
 * precision choices); spec § numbers refer to ../shared/specs/deepseek4.md. */
#include "model/arch_deepseek4.h"
#include "model/moe.h"
#include "base/prof.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* forward pass */

#define DUMP(name, il, x, ne0, ne1) do { if (dump) mr_model_dump(m, name, il, x, ne0, ne1); } while (0)

/* HC_pre for n tokens (§3.1): X [n][Nh*d] -> y [n][d], post [n][Nh], comb [n][Nh*Nh]. zn/mixes/pre scratch. */
static int ds4_hc_pre(mr_model *m, const ds4_model *M, const mr_weight *fn, const float *scale, const float *base,
                      const float *X, int n, float *zn, float *mixes, float *pre, float *post, float *comb, float *y) {
    const int64_t hd = (int64_t)M->Nh * M->d;
    const int mix = (2 + M->Nh) * M->Nh;
    MR_PROF_BEGIN(t0);
    for (int t = 0; t < n; t++) ds4_rmsnorm(zn + t * hd, X + t * hd, hd, M->eps, NULL);
    MR_PROF_END(t0, "hc_pre");
    if (mr_model_matmul(m, fn, zn, n, mixes)) return -1;
    MR_PROF_BEGIN(t1);
    for (int t = 0; t < n; t++) {
        ds4_hc_split(mixes + t * mix, scale, base, M->Nh, M->Ti, M->eps_hc, pre + t * M->Nh, post + t * M->Nh,
                     comb + t * M->Nh * M->Nh);
        ds4_hc_combine(y + (int64_t)t * M->d, X + t * hd, pre + t * M->Nh, M->Nh, M->d);
    }
    MR_PROF_END(t1, "hc_pre");
    return 0;
}

/* Batched compressor (prefill, §3.6.2): rows for the n/r complete blocks of the batch from kv/sc
 * [n][Wd] (ape already added); out [n/r][Dh] after norm and RoPE (FP8 when fp8). Also the streaming
 * state left by the batch tail (§3.6.3). */
static int ds4_compress_batch(const ds4_model *M, const ds4_layer *ly, int r, int Dh, const float *kv, const float *sc,
                               int n, const float *norm, int fp8, float *out, float *kvs, float *scs) {
    const int c = r == 4 ? 2 : 1, Wd = c * Dh, n_comp = n / r;
    const float *kp[256], *sp[256];
    float *cs = malloc(sizeof(float) * (size_t)M->R);
    float *pad_kv = calloc((size_t)Dh, sizeof(float)), *pad_sc = malloc(sizeof(float) * (size_t)Dh);
    if (!cs || !pad_kv || !pad_sc) { free(cs); free(pad_kv); free(pad_sc); return -1; }
    for (int i = 0; i < Dh; i++) pad_sc[i] = -INFINITY;
    for (int b = 0; b < n_comp; b++) {
        int ne = 0;
        if (r == 4) {
            for (int j = 0; j < 4; j++) {
                if (b == 0) { kp[ne] = pad_kv; sp[ne] = pad_sc; }
                else { kp[ne] = kv + (int64_t)((b - 1) * 4 + j) * Wd; sp[ne] = sc + (int64_t)((b - 1) * 4 + j) * Wd; }
                ne++;
            }
            for (int j = 0; j < 4; j++, ne++) {
                kp[ne] = kv + (int64_t)(b * 4 + j) * Wd + Dh;
                sp[ne] = sc + (int64_t)(b * 4 + j) * Wd + Dh;
            }
        } else {
            for (int j = 0; j < r; j++, ne++) { kp[ne] = kv + (int64_t)(b * r + j) * Wd; sp[ne] = sc + (int64_t)(b * r + j) * Wd; }
        }
        float *row = out + (int64_t)b * Dh;
        ds4_pool(row, kp, sp, ne, Dh);
        ds4_rmsnorm(row, row, Dh, M->eps, norm);
        ds4_rope_cache(&ly->rope, (int64_t)b * r, 0, cs);
        ds4_rope_tail(row, Dh, M->R, cs);
        if (fp8) ds4_fp8_sim(row, Dh, M->R);
    }
    /* state from the tail (§3.6.3) */
    const int cut = n_comp * r, rem = n - cut, rows = c * r;
    for (int64_t i = 0; i < (int64_t)rows * Wd; i++) { kvs[i] = 0.0f; scs[i] = -INFINITY; }
    if (r == 4) {
        if (cut >= 4)
            for (int j = 0; j < 4; j++) {
                memcpy(kvs + (int64_t)j * Wd, kv + (int64_t)(cut - 4 + j) * Wd, sizeof(float) * (size_t)Wd);
                memcpy(scs + (int64_t)j * Wd, sc + (int64_t)(cut - 4 + j) * Wd, sizeof(float) * (size_t)Wd);
            }
        for (int j = 0; j < rem; j++) {
            memcpy(kvs + (int64_t)(4 + j) * Wd, kv + (int64_t)(cut + j) * Wd, sizeof(float) * (size_t)Wd);
            memcpy(scs + (int64_t)(4 + j) * Wd, sc + (int64_t)(cut + j) * Wd, sizeof(float) * (size_t)Wd);
        }
    } else {
        for (int j = 0; j < rem; j++) {
            memcpy(kvs + (int64_t)j * Wd, kv + (int64_t)(cut + j) * Wd, sizeof(float) * (size_t)Wd);
            memcpy(scs + (int64_t)j * Wd, sc + (int64_t)(cut + j) * Wd, sizeof(float) * (size_t)Wd);
        }
    }
    free(cs); free(pad_kv); free(pad_sc);
    return 0;
}

/* Streaming compressor step for position p (§3.6.3): store (kv, sc) in the state; if p closes a
 * block, pool it into out (norm, RoPE at the block start, FP8 when fp8) and return 1. */
static int ds4_compress_step(const ds4_model *M, const ds4_layer *ly, int r, int Dh, const float *kv, const float *sc,
                             int64_t p, const float *norm, int fp8, float *kvs, float *scs, float *out, float *cs) {
    const int c = r == 4 ? 2 : 1, Wd = c * Dh;
    const int row = r == 4 ? 4 + (int)(p % 4) : (int)(p % r);
    memcpy(kvs + (int64_t)row * Wd, kv, sizeof(float) * (size_t)Wd);
    memcpy(scs + (int64_t)row * Wd, sc, sizeof(float) * (size_t)Wd);
    if ((p + 1) % r) return 0;
    const float *kp[256] = {0}, *sp[256] = {0};
    int ne = 0;
    if (r == 4) {
        for (int j = 0; j < 4; j++, ne++) { kp[ne] = kvs + (int64_t)j * Wd; sp[ne] = scs + (int64_t)j * Wd; }
        for (int j = 4; j < 8; j++, ne++) { kp[ne] = kvs + (int64_t)j * Wd + Dh; sp[ne] = scs + (int64_t)j * Wd + Dh; }
    } else {
        for (int j = 0; j < r; j++, ne++) { kp[ne] = kvs + (int64_t)j * Wd; sp[ne] = scs + (int64_t)j * Wd; }
    }
    ds4_pool(out, kp, sp, ne, Dh);
    if (r == 4) {
        memcpy(kvs, kvs + 4 * (int64_t)Wd, sizeof(float) * 4 * (size_t)Wd);
        memcpy(scs, scs + 4 * (int64_t)Wd, sizeof(float) * 4 * (size_t)Wd);
    }
    ds4_rmsnorm(out, out, Dh, M->eps, norm);
    ds4_rope_cache(&ly->rope, p + 1 - r, 0, cs);
    ds4_rope_tail(out, Dh, M->R, cs);
    if (fp8) ds4_fp8_sim(out, Dh, M->R);
    return 1;
}

/* ---- attention: phase 1 picks each token's keys (window, visible compressed rows, indexer),
 * phase 2 runs the heads (split across threads by token, or by head groups for a short batch) ---- */
typedef struct {
    mr_model *m;
    const ds4_model *M;
    const ds4_layer *ly;
    ds4_lstate *ls;
    int il, n, pos0, prefill, dump;
    int n_ctx;            /* session context: the indexer's tie-break array has n_ctx/4 rows */
    const float *q;       /* [n][H*D] after RoPE */
    const float *kvb;     /* [n][D] batch keys as the attention sees them */
    const float *comp32;  /* prefill: compressed rows [n/r][D] of the batch, else NULL (read the cache) */
    const float *icomp32; /* prefill, ratio 4: indexer rows */
    const float *qI;      /* [n][Hi*Di] indexer queries after RoPE (and QAT) */
    const float *wI;      /* [n][Hi] indexer head weights */
    float *o;             /* [n][H*D] */
    int max_keys;         /* per token */
    const float **kf;     /* [n][max_keys] key rows (floats) ... */
    const uint16_t **kh;  /* ... or F16 rows */
    int *nk;              /* [n] keys per token */
    int f16;              /* keys are F16 values */
    int n_chunk;          /* head groups per token in phase 2 */
    int *topk_out;        /* [n][topk] selected rows (-1 = none), debug */
    float *scores_out;    /* [n][nvis of the last token] indexer scores (-inf = not visible), debug */
    int err;
} ds4_attn_job;

/* indexer for token t at position p with nvis visible rows (§3.7): sel[0..topk) */
static int ds4_indexer(ds4_attn_job *j, long t, int nvis, int nvis_max, float *sc, float *row, float *qr,
                       char *mark, int *sel) {
    const ds4_model *M = j->M;
    const int Di = M->Di, Hi = M->Hi;
    const float *qt = j->qI + t * (int64_t)Hi * Di;
    const float *wt = j->wI + t * (int64_t)Hi;
    /* the same numbers in prefill and decode: with F16 caches the decode reads F16 index rows, so
     * the prefill scores with F16-rounded rows (rounded when stored) and q as well; selections then
     * agree on both paths even on near-ties */
    const int f16 = M->kv_f16 && (!j->prefill || !M->prefill_f32);
    if (f16) { for (int i = 0; i < Hi * Di; i++) qr[i] = mr_fp16_to_fp32(mr_fp32_to_fp16(qt[i])); qt = qr; }
    for (int b = 0; b < nvis; b++) {
        const float *k = NULL; const uint16_t *kh = NULL;
        if (j->icomp32) k = j->icomp32 + (int64_t)b * Di;
        else ds4_rows_ptr(&j->ls->icomp, b, &k, &kh);
        if (!k) { ds4_f16_to_f32(row, kh, Di); k = row; }
        /* S[b] = sum_h w[h] * relu(qI_h . IK_b), summed in double like ggml's sum_rows */
        double sum = 0.0;
        for (int h = 0; h < Hi; h++) {
            float dot = ds4_dot_f32(qt + (int64_t)h * Di, k, Di);
            if (dot < 0.0f) dot = 0.0f;
            sum += (double)(dot * wt[h]);
        }
        sc[b] = (float)sum;
    }
    if (j->scores_out) {
        float *so = j->scores_out + t * (int64_t)nvis_max;
        for (int b = 0; b < nvis_max; b++) so[b] = b < nvis ? sc[b] : -INFINITY;
    }
    ds4_topk(sc, nvis, M->topk, sel);
    /* Exact ties at the k-th place (in practice rows whose relu'd head scores are all 0) are broken
     * like the reference: std::sort (libstdc++ introsort) of the row indices over an array of
     * n_ctx/4 rows, not-yet-visible rows at -inf. The reference's prefill sorts its batch's rows that
     * way, so a batch filling the session reproduces it, and prefill and decode agree. Without a tie
     * any top-k gives the same set. */
    const float kth = sc[sel[M->topk - 1]];
    memset(mark, 0, (size_t)nvis_max + 1);
    for (int k = 0; k < M->topk; k++) mark[sel[k]] = 1;
    int tie = 0;
    for (int b = 0; b < nvis && !tie; b++) tie = !mark[b] && sc[b] == kth;
    if (tie) {
        const int len = j->n_ctx / 4 > nvis ? j->n_ctx / 4 : nvis;
        float *arr = malloc(sizeof(float) * (size_t)len);
        int *ord = malloc(sizeof(int) * (size_t)len);
        if (!arr || !ord) { free(arr); free(ord); return -1; }
        memcpy(arr, sc, sizeof(float) * (size_t)nvis);
        for (int b = nvis; b < len; b++) arr[b] = -INFINITY;
        ds4_argsort_desc(arr, len, ord);
        memcpy(sel, ord, sizeof(int) * (size_t)M->topk);
        free(arr); free(ord);
    }
    return 0;
}

static void ds4_keys_worker(void *arg, int ith, int nth) {
    ds4_attn_job *j = arg;
    const ds4_model *M = j->M;
    const int r = j->ly->ratio, D = M->D;
    const int64_t last = j->pos0 + j->n;
    const int nvis_max = r ? (int)(last / r) : 0;
    float *sc = malloc(sizeof(float) * (size_t)nvis_max + 16);
    float *row = malloc(sizeof(float) * (size_t)M->Di + 16), *qr = malloc(sizeof(float) * (size_t)M->Hi * M->Di + 16);
    int *sel = malloc(sizeof(int) * (size_t)M->topk + 16);
    char *mark = calloc((size_t)nvis_max + 1, 1);
    if (!sc || !row || !qr || !sel || !mark) { j->err = 1; goto done; }
    long lo, hi;
    mr_split(j->n, ith, nth, &lo, &hi);
    for (long t = lo; t < hi; t++) {
        const int64_t p = j->pos0 + t;
        const float **kf = j->kf + t * (int64_t)j->max_keys;
        const uint16_t **kh = j->kh + t * (int64_t)j->max_keys;
        int nk = 0;
        /* raw window: positions max(0, p-W+1) .. p (§3.7); the batch's own rows, older ones from the ring */
        for (int64_t s = p - M->W + 1 < 0 ? 0 : p - M->W + 1; s <= p; s++, nk++) {
            if (s >= j->pos0) { kf[nk] = j->kvb + (s - j->pos0) * D; kh[nk] = NULL; }
            else ds4_rows_ptr(&j->ls->raw, s % M->W, &kf[nk], &kh[nk]);
        }
        if (r > 0) {
            const int nvis = (int)((p + 1) / r);
            int all = 1;
            if (r == 4 && nvis > M->topk) {
                if (ds4_indexer(j, t, nvis, nvis_max, sc, row, qr, mark, sel)) { j->err = 1; goto done; }
                memset(mark, 0, (size_t)nvis_max + 1);
                for (int k = 0; k < M->topk; k++) mark[sel[k]] = 1;
                if (j->topk_out) for (int k = 0; k < M->topk; k++) j->topk_out[t * M->topk + k] = sel[k];
                all = 0;
            } else if (j->topk_out && r == 4) {
                for (int k = 0; k < M->topk; k++) j->topk_out[t * M->topk + k] = k < nvis ? k : -1;
            }
            /* compressed rows in row order (unselected ones are masked out in the reference) */
            for (int b = 0; b < nvis; b++) {
                if (!all && !mark[b]) continue;
                if (j->comp32) { kf[nk] = j->comp32 + (int64_t)b * D; kh[nk] = NULL; }
                else ds4_rows_ptr(&j->ls->comp, b, &kf[nk], &kh[nk]);
                nk++;
            }
        }
        j->nk[t] = nk;
    }
done:
    free(sc); free(row); free(qr); free(sel); free(mark);
}

static void ds4_heads_worker(void *arg, int ith, int nth) {
    ds4_attn_job *j = arg;
    const ds4_model *M = j->M;
    const int D = M->D, H = M->H, nc = j->n_chunk;
    const int hmax = (H + nc - 1) / nc;
    float *scratch = malloc(sizeof(float) * (size_t)ds4_attn_scratch(hmax, j->max_keys, D));
    if (!scratch) { j->err = 1; return; }
    const float kq_scale = 1.0f / sqrtf((float)D);
    long lo, hi;
    mr_split((long)j->n * nc, ith, nth, &lo, &hi);
    for (long it = lo; it < hi; it++) {
        const long t = it / nc;
        const int c = (int)(it % nc), h0 = c * H / nc, h1 = (c + 1) * H / nc;
        ds4_attn_mqa(j->o + (t * H + h0) * (int64_t)D, j->q + (t * H + h0) * (int64_t)D, h1 - h0,
                     j->kf + t * (int64_t)j->max_keys, j->kh + t * (int64_t)j->max_keys, j->nk[t], D, kq_scale,
                     j->ly->sinks + h0, j->f16, scratch);
    }
    free(scratch);
}

/* the attention half of layer il for the batch: X [n][Nh*d] updated in place (via Xt scratch) */
typedef struct {
    float *zn, *mixes, *pre, *post, *comb, *y, *a, *qa, *q, *kv, *kvb, *o, *og, *z, *att, *Xt;
    float *ckv, *csc, *ikv, *isc, *comp32, *icomp32, *qI, *wI;
    float *logits, *w, *moe, *sg, *su, *sh;
    int32_t *sel;
    int *topk;
} ds4_buf;

static int ds4_attention(mr_model *m, ds4_state *st, int il, const int32_t *tok, int n, int pos0, float *X, ds4_buf *B) {
    (void)tok;
    ds4_model *M = m->priv;
    ds4_layer *ly = &M->layers[il];
    ds4_lstate *ls = &st->l[il];
    const int d = M->d, D = M->D, H = M->H, R = M->R, r = ly->ratio, Nh = M->Nh;
    const int64_t hd = (int64_t)Nh * d;
    const int prefill = pos0 == 0, dump = mr_model_dumping(m);
    float *cs = malloc(sizeof(float) * (size_t)R);
    if (!cs) { mr_set_error("deepseek4: out of memory"); return -1; }

    if (ds4_hc_pre(m, M, &ly->hc_attn_fn, ly->hc_attn_scale, ly->hc_attn_base, X, n, B->zn, B->mixes, B->pre, B->post,
                   B->comb, B->y)) goto fail;
    DUMP("hc_attn_pre", il, B->y, d, n);
    DUMP("hc_attn_pre_mixes", il, B->mixes, (2 + Nh) * Nh, n);
    DUMP("hc_attn_pre_weights", il, B->pre, Nh, n);
    DUMP("hc_attn_pre_post_weights", il, B->post, Nh, n);
    DUMP("hc_attn_pre_comb", il, B->comb, Nh * Nh, n);
    MR_PROF_BEGIN(tn);
    for (int t = 0; t < n; t++) ds4_rmsnorm(B->a + (int64_t)t * d, B->y + (int64_t)t * d, d, M->eps, ly->attn_norm);
    MR_PROF_END(tn, "norms");
    DUMP("attn_norm", il, B->a, d, n);

    /* projections (§3.3) */
    if (mr_model_matmul(m, &ly->q_a, B->a, n, B->qa)) goto fail;
    DUMP("q_lora", il, B->qa, M->rq, n);
    MR_PROF_BEGIN(tn2);
    for (int t = 0; t < n; t++) ds4_rmsnorm(B->qa + (int64_t)t * M->rq, B->qa + (int64_t)t * M->rq, M->rq, M->eps, ly->q_a_norm);
    MR_PROF_END(tn2, "norms");
    DUMP("q_lora_norm", il, B->qa, M->rq, n);
    if (mr_model_matmul(m, &ly->q_b, B->qa, n, B->q)) goto fail;
    MR_PROF_BEGIN(tn3);
    for (int64_t i = 0; i < (int64_t)n * H; i++) ds4_rmsnorm(B->q + i * D, B->q + i * D, D, M->eps, NULL);
    MR_PROF_END(tn3, "norms");
    DUMP("Qnorm", il, B->q, (int64_t)H * D, n);
    if (mr_model_matmul(m, &ly->kv, B->a, n, B->kv)) goto fail;
    MR_PROF_BEGIN(tr);
    for (int t = 0; t < n; t++) ds4_rmsnorm(B->kv + (int64_t)t * D, B->kv + (int64_t)t * D, D, M->eps, ly->kv_norm);
    DUMP("KVnorm", il, B->kv, D, n);
    for (int t = 0; t < n; t++) {
        ds4_rope_cache(&ly->rope, pos0 + t, 0, cs);
        for (int h = 0; h < H; h++) ds4_rope_tail(B->q + ((int64_t)t * H + h) * D, D, R, cs);
        ds4_rope_tail(B->kv + (int64_t)t * D, D, R, cs);
    }
    DUMP("Qcur", il, B->q, (int64_t)H * D, n);
    DUMP("KVrope", il, B->kv, D, n);
    for (int t = 0; t < n; t++) ds4_fp8_sim(B->kv + (int64_t)t * D, D, R);
    DUMP("KVcur", il, B->kv, D, n);

    /* the batch keys as attention reads them: F16-rounded when they go through an F16 cache */
    const int kvb_f16 = M->kv_f16 && (r == 0 || !prefill || !M->prefill_f32);
    if (kvb_f16) for (int64_t i = 0; i < (int64_t)n * D; i++) B->kvb[i] = mr_fp16_to_fp32(mr_fp32_to_fp16(B->kv[i]));
    else memcpy(B->kvb, B->kv, sizeof(float) * (size_t)n * D);

    MR_PROF_END(tr, "rope+fp8");

    ds4_attn_job job = {.m = m, .M = M, .ly = ly, .ls = ls, .il = il, .n = n, .pos0 = pos0, .prefill = prefill,
                        .dump = dump, .n_ctx = st->n_ctx, .q = B->q, .kvb = B->kvb, .o = B->o};
    if (r > 0) {
        /* compressor inputs (§3.6.1) */
        const int c = r == 4 ? 2 : 1, Wd = c * D;
        if (mr_model_matmul(m, &ly->c_kv, B->a, n, B->ckv) || mr_model_matmul(m, &ly->c_gate, B->a, n, B->csc)) goto fail;
        MR_PROF_BEGIN(tc0);
        for (int t = 0; t < n; t++) {
            const float *ape = ly->c_ape + (int64_t)((pos0 + t) % r) * Wd;
            for (int i = 0; i < Wd; i++) B->csc[(int64_t)t * Wd + i] += ape[i];
        }
        MR_PROF_END(tc0, "compressor");
        const int Di = M->Di, IWd = 2 * Di;
        if (r == 4) {
            if (mr_model_matmul(m, &ly->ic_kv, B->a, n, B->ikv) || mr_model_matmul(m, &ly->ic_gate, B->a, n, B->isc)) goto fail;
            MR_PROF_BEGIN(tc1);
            for (int t = 0; t < n; t++) {
                const float *ape = ly->ic_ape + (int64_t)((pos0 + t) % 4) * IWd;
                for (int i = 0; i < IWd; i++) B->isc[(int64_t)t * IWd + i] += ape[i];
            }
            MR_PROF_END(tc1, "compressor");
            /* indexer queries and weights (§3.7) */
            if (mr_model_matmul(m, &ly->i_qb, B->qa, n, B->qI) || mr_model_matmul(m, &ly->i_proj, B->a, n, B->wI)) goto fail;
            MR_PROF_BEGIN(ti);
            const float wscale = 1.0f / sqrtf((float)Di * (float)M->Hi);
            for (int t = 0; t < n; t++) {
                ds4_rope_cache(&ly->rope, pos0 + t, 0, cs);
                for (int h = 0; h < M->Hi; h++) {
                    float *qh = B->qI + ((int64_t)t * M->Hi + h) * Di;
                    ds4_rope_tail(qh, Di, R, cs);
                    if (M->official) { ds4_hadamard(qh, Di); ds4_fp4_sim(qh, Di); }
                }
                for (int h = 0; h < M->Hi; h++) B->wI[(int64_t)t * M->Hi + h] *= wscale;
            }
            MR_PROF_END(ti, "rope+fp8");
            job.qI = B->qI;
            job.wI = B->wI;
        }
        MR_PROF_BEGIN(tc2);
        if (prefill) {
            const int n_comp = n / r;
            if (ds4_compress_batch(M, ly, r, D, B->ckv, B->csc, n, ly->c_norm, 1, B->comp32, ls->kvs, ls->scs)) goto oom;
            for (int b = 0; b < n_comp; b++) ds4_rows_put(&ls->comp, b, B->comp32 + (int64_t)b * D);
            if (M->kv_f16 && !M->prefill_f32)
                for (int64_t i = 0; i < (int64_t)n_comp * D; i++) B->comp32[i] = mr_fp16_to_fp32(mr_fp32_to_fp16(B->comp32[i]));
            if (n_comp) DUMP("KVcompress", il, B->comp32, D, n_comp);
            job.comp32 = B->comp32;
            if (r == 4) {
                if (ds4_compress_batch(M, ly, 4, Di, B->ikv, B->isc, n, ly->ic_norm, 0, B->icomp32, ls->ikvs, ls->iscs)) goto oom;
                for (int b = 0; b < n_comp; b++) {
                    if (M->official) { ds4_hadamard(B->icomp32 + (int64_t)b * Di, Di); ds4_fp4_sim(B->icomp32 + (int64_t)b * Di, Di); }
                    ds4_rows_put(&ls->icomp, b, B->icomp32 + (int64_t)b * Di);
                    if (M->kv_f16 && !M->prefill_f32)
                        for (int i = 0; i < Di; i++)
                            B->icomp32[(int64_t)b * Di + i] = mr_fp16_to_fp32(mr_fp32_to_fp16(B->icomp32[(int64_t)b * Di + i]));
                }
                if (n_comp) DUMP("indexer_KVcompress", il, B->icomp32, Di, n_comp);
                job.icomp32 = B->icomp32;
            }
        } else {
            float *row = B->comp32, *irow = B->icomp32;
            int emitted = 0;
            for (int t = 0; t < n; t++) {
                const int64_t p = pos0 + t;
                if (ds4_compress_step(M, ly, r, D, B->ckv + (int64_t)t * Wd, B->csc + (int64_t)t * Wd, p, ly->c_norm, 1,
                                      ls->kvs, ls->scs, row, cs)) {
                    ds4_rows_put(&ls->comp, (p + 1) / r - 1, row);
                    emitted++;
                    DUMP("KVcompress", il, row, D, 1);
                }
                if (r == 4 && ds4_compress_step(M, ly, 4, Di, B->ikv + (int64_t)t * IWd, B->isc + (int64_t)t * IWd, p,
                                                ly->ic_norm, 0, ls->ikvs, ls->iscs, irow, cs)) {
                    if (M->official) { ds4_hadamard(irow, Di); ds4_fp4_sim(irow, Di); }
                    ds4_rows_put(&ls->icomp, (p + 1) / 4 - 1, irow);
                    DUMP("indexer_KVcompress", il, irow, Di, 1);
                }
            }
            (void)emitted;
        }
        MR_PROF_END(tc2, "compressor");
        if (r == 4 && dump) {
            job.topk_out = B->topk;
            job.scores_out = calloc((size_t)n * (size_t)((pos0 + n) / 4) + 1, sizeof(float));
        }
    }
    {
        const int64_t last = pos0 + n;
        const int max_comp = r ? (int)(r == 4 && last / 4 > M->topk ? M->topk : last / r) : 0;
        job.max_keys = M->W + max_comp;
        /* keys are F16 values when they come from an F16 cache: always, unless MOERUN_DS4_PREFILL_F32
         * asks for the reference's F32 keys in a prefill's compressed layers */
        job.f16 = M->kv_f16 && (r == 0 || !prefill || !M->prefill_f32);
        const int nth = mr_pool_size(m->pool);
        job.n_chunk = n >= nth ? 1 : (nth < H ? nth : H);
        job.kf = malloc(sizeof(float *) * (size_t)n * (size_t)job.max_keys);
        job.kh = malloc(sizeof(uint16_t *) * (size_t)n * (size_t)job.max_keys);
        job.nk = malloc(sizeof(int) * (size_t)n);
        if (!job.kf || !job.kh || !job.nk) job.err = 1;
        MR_PROF_BEGIN(tk);
        if (!job.err) mr_pool_run(m->pool, ds4_keys_worker, &job);
        MR_PROF_END(tk, "attn_keys+indexer");
        MR_PROF_BEGIN(th);
        if (!job.err) mr_pool_run(m->pool, ds4_heads_worker, &job);
        MR_PROF_END(th, "attn_heads");
        free(job.kf); free(job.kh); free(job.nk);
    }
    if (job.scores_out) {
        if ((pos0 + n) / 4 > M->topk) mr_model_dump(m, "indexer_scores", il, job.scores_out, (pos0 + n) / 4, n);
        free(job.scores_out);
    }
    if (job.err) { mr_set_error("deepseek4: out of memory in attention"); goto fail; }
    if (job.topk_out) {
        float *tf = malloc(sizeof(float) * (size_t)n * M->topk);
        if (tf) {
            for (int64_t i = 0; i < (int64_t)n * M->topk; i++) tf[i] = (float)B->topk[i];
            mr_model_dump(m, "indexer_topk", il, tf, M->topk, n);
            free(tf);
        }
    }
    MR_PROF_BEGIN(to);
    /* raw window cache: the batch's last W positions */
    for (int t = n > M->W ? n - M->W : 0; t < n; t++) ds4_rows_put(&ls->raw, (pos0 + t) % M->W, B->kv + (int64_t)t * D);
    DUMP("kqv_out", il, B->o, (int64_t)H * D, n);

    /* output: inverse RoPE at the query position, grouped low-rank projection (§3.8) */
    for (int t = 0; t < n; t++) {
        ds4_rope_cache(&ly->rope, pos0 + t, 1, cs);
        for (int h = 0; h < H; h++) ds4_rope_tail(B->o + ((int64_t)t * H + h) * D, D, R, cs);
    }
    MR_PROF_END(to, "attn_misc");
    const int64_t Dg = (int64_t)(H / M->G) * D;
    const size_t grow = mr_row_size(ly->out_a.type, Dg);
    for (int g = 0; g < M->G; g++) {
        for (int t = 0; t < n; t++) memcpy(B->og + t * Dg, B->o + (int64_t)t * H * D + g * Dg, sizeof(float) * (size_t)Dg);
        mr_weight wa = ly->out_a;
        wa.data = (const uint8_t *)ly->out_a.data + grow * (size_t)g * M->ro;
        wa.rows = M->ro;
        if (mr_model_matmul(m, &wa, B->og, n, B->att)) goto fail;  /* att as scratch [n][ro] */
        for (int t = 0; t < n; t++)
            memcpy(B->z + (int64_t)t * M->G * M->ro + g * M->ro, B->att + (int64_t)t * M->ro, sizeof(float) * (size_t)M->ro);
    }
    if (mr_model_matmul(m, &ly->out_b, B->z, n, B->att)) goto fail;
    DUMP("attn_out", il, B->att, d, n);
    MR_PROF_BEGIN(tp);
    for (int t = 0; t < n; t++)
        ds4_hc_expand(B->Xt + t * hd, X + t * hd, B->att + (int64_t)t * d, B->post + t * Nh, B->comb + t * Nh * Nh, Nh, d);
    memcpy(X, B->Xt, sizeof(float) * (size_t)(n * hd));
    MR_PROF_END(tp, "hc_post");
    DUMP("hc_attn_post", il, X, hd, n);
    free(cs);
    return 0;
oom:
    mr_set_error("deepseek4: out of memory");
fail:
    free(cs);
    return -1;
}

/* the FFN half of layer il (§3.9) */
static int ds4_ffn(mr_model *m, int il, const int32_t *tok, int n, float *X, ds4_buf *B) {
    ds4_model *M = m->priv;
    ds4_layer *ly = &M->layers[il];
    const int d = M->d, Nh = M->Nh, K = M->K;
    const int64_t hd = (int64_t)Nh * d;
    const int dump = mr_model_dumping(m);
    if (ds4_hc_pre(m, M, &ly->hc_ffn_fn, ly->hc_ffn_scale, ly->hc_ffn_base, X, n, B->zn, B->mixes, B->pre, B->post,
                   B->comb, B->y)) return -1;
    DUMP("hc_ffn_pre", il, B->y, d, n);
    DUMP("hc_ffn_pre_mixes", il, B->mixes, (2 + Nh) * Nh, n);
    DUMP("hc_ffn_pre_weights", il, B->pre, Nh, n);
    DUMP("hc_ffn_pre_post_weights", il, B->post, Nh, n);
    DUMP("hc_ffn_pre_comb", il, B->comb, Nh * Nh, n);
    MR_PROF_BEGIN(tn);
    for (int t = 0; t < n; t++) ds4_rmsnorm(B->a + (int64_t)t * d, B->y + (int64_t)t * d, d, M->eps, ly->ffn_norm);
    MR_PROF_END(tn, "norms");
    DUMP("ffn_norm", il, B->a, d, n);

    if (mr_model_matmul(m, &ly->gate_inp, B->a, n, B->logits)) return -1;
    DUMP("ffn_moe_logits", il, B->logits, M->E, n);
    int sel[64];
    MR_PROF_BEGIN(tr);
    for (int t = 0; t < n; t++) {
        const int32_t *hash = ly->tid2eid ? ly->tid2eid + (int64_t)tok[t] * K : NULL;
        if (ds4_route(B->logits + (int64_t)t * M->E, M->E, K, hash ? NULL : ly->exp_bias, hash, M->norm_w, M->ws, sel,
                      B->w + (int64_t)t * K, NULL)) {
            mr_set_error("deepseek4: layer %d: routing failed for token %d", il, tok[t]);
            return -1;
        }
        for (int k = 0; k < K; k++) B->sel[(int64_t)t * K + k] = sel[k];
    }
    MR_PROF_END(tr, "moe_route");
    if (dump) {
        float *tf = malloc(sizeof(float) * (size_t)n * K);
        if (tf) {
            for (int64_t i = 0; i < (int64_t)n * K; i++) tf[i] = (float)B->sel[i];
            mr_model_dump(m, ly->tid2eid ? "ffn_moe_hash_topk" : "ffn_moe_topk", il, tf, K, n);
            free(tf);
        }
        DUMP("ffn_moe_weights_scaled", il, B->w, K, n);
    }
    const mr_moe_cfg cfg = {.n_expert = M->E, .n_used = K, .gating = MR_GATING_SQRT_SOFTPLUS, .norm_w = M->norm_w,
                            .w_scale = M->ws, .weight_before_down = 1, .clamp = ly->lim};
    /* start the routed experts' reads (expert pager), then compute the shared expert while they run */
    if (mr_moe_prefetch(m, il, &cfg, B->sel, n)) return -1;
    /* shared expert: no clamp in the reference, the routed clamp in the official graph (§8) */
    if (mr_model_matmul(m, &ly->sh_gate, B->a, n, B->sg) || mr_model_matmul(m, &ly->sh_up, B->a, n, B->su)) return -1;
    MR_PROF_BEGIN(ts);
    ds4_swiglu(B->sg, B->sg, B->su, (int64_t)n * M->Fs, M->official ? ly->lim : 0.0f);
    MR_PROF_END(ts, "swiglu_shexp");
    if (mr_model_matmul(m, &ly->sh_down, B->sg, n, B->sh)) return -1;
    MR_PROF_BEGIN(te);
    if (mr_moe_experts(m, il, &cfg, B->a, n, B->sel, B->w, B->moe)) return -1;
    MR_PROF_END(te, "moe_experts");
    DUMP("ffn_moe_out", il, B->moe, d, n);
    DUMP("ffn_shexp", il, B->sh, d, n);
    MR_PROF_BEGIN(tp);
    for (int64_t i = 0; i < (int64_t)n * d; i++) B->moe[i] += B->sh[i];
    DUMP("ffn_out", il, B->moe, d, n);
    for (int t = 0; t < n; t++)
        ds4_hc_expand(B->Xt + t * hd, X + t * hd, B->moe + (int64_t)t * d, B->post + t * Nh, B->comb + t * Nh * Nh, Nh, d);
    memcpy(X, B->Xt, sizeof(float) * (size_t)(n * hd));
    MR_PROF_END(tp, "hc_post");
    DUMP("hc_ffn_post", il, X, hd, n);
    return 0;
}

static void ds4_buf_free(ds4_buf *B) {
    float **f[] = {&B->zn, &B->mixes, &B->pre, &B->post, &B->comb, &B->y, &B->a, &B->qa, &B->q, &B->kv, &B->kvb, &B->o,
                   &B->og, &B->z, &B->att, &B->Xt, &B->ckv, &B->csc, &B->ikv, &B->isc, &B->comp32, &B->icomp32, &B->qI,
                   &B->wI, &B->logits, &B->w, &B->moe, &B->sg, &B->su, &B->sh};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) { free(*f[i]); *f[i] = NULL; }
    free(B->sel); free(B->topk);
}

static int ds4_buf_alloc(const ds4_model *M, int n, ds4_buf *B) {
    memset(B, 0, sizeof *B);
    const int64_t hd = (int64_t)M->Nh * M->d, mix = (2 + M->Nh) * M->Nh, N = n;
    const int64_t ncomp = n / 4 + 1, Dg = (int64_t)(M->H / M->G) * M->D;
    int64_t att = M->d > M->ro ? M->d : M->ro;
#define A(p, cnt) do { if (!((p) = malloc(sizeof(*(p)) * (size_t)(cnt) + 16))) goto oom; } while (0)
    A(B->zn, N * hd); A(B->mixes, N * mix); A(B->pre, N * M->Nh); A(B->post, N * M->Nh); A(B->comb, N * M->Nh * M->Nh);
    A(B->y, N * M->d); A(B->a, N * M->d); A(B->qa, N * M->rq); A(B->q, N * M->H * M->D); A(B->kv, N * M->D);
    A(B->kvb, N * M->D); A(B->o, N * M->H * M->D); A(B->og, N * Dg); A(B->z, N * M->G * M->ro); A(B->att, N * att);
    A(B->Xt, N * hd); A(B->ckv, N * 2 * M->D); A(B->csc, N * 2 * M->D); A(B->ikv, N * 2 * M->Di + 1);
    A(B->isc, N * 2 * M->Di + 1); A(B->comp32, ncomp * M->D); A(B->icomp32, ncomp * M->Di + 1);
    A(B->qI, N * M->Hi * M->Di + 1); A(B->wI, N * M->Hi + 1); A(B->logits, N * M->E); A(B->w, N * M->K);
    A(B->moe, N * M->d); A(B->sg, N * M->Fs); A(B->su, N * M->Fs); A(B->sh, N * M->d); A(B->sel, N * M->K);
    A(B->topk, N * M->topk + 1);
#undef A
    return 0;
oom:
    ds4_buf_free(B);
    mr_set_error("deepseek4: out of memory for a batch of %d tokens", n);
    return -1;
}

int ds4_eval_batch(mr_model *m, void *stp, const int32_t *tok, int n, int pos0, float *logits, int all_logits) {
    ds4_model *M = m->priv;
    ds4_state *st = stp;
    const int d = M->d, Nh = M->Nh;
    const int64_t hd = (int64_t)Nh * d;
    const int dump = mr_model_dumping(m);
    ds4_buf B;
    float *X = NULL, *e = NULL;
    int rc = -1;
    if (pos0 + n > st->n_ctx) { mr_set_error("deepseek4: %d + %d tokens exceed the session context %d", pos0, n, st->n_ctx); return -1; }
    if (ds4_buf_alloc(M, n, &B)) return -1;
    X = malloc(sizeof(float) * (size_t)(n * hd));
    e = malloc(sizeof(float) * (size_t)d);
    if (!X || !e) { mr_set_error("deepseek4: out of memory"); goto done; }
    MR_PROF_BEGIN(tem);
    /* embedding copied into every stream (§3.0) */
    for (int t = 0; t < n; t++) {
        if (mr_tensor_get_row(M->tok_embd, tok[t], e)) goto done;
        for (int h = 0; h < Nh; h++) memcpy(X + t * hd + (int64_t)h * d, e, sizeof(float) * (size_t)d);
    }
    MR_PROF_END(tem, "embed");
    for (int il = 0; il < M->L; il++) {
        if (ds4_attention(m, st, il, tok, n, pos0, X, &B)) goto done;
        if (ds4_ffn(m, il, tok, n, X, &B)) goto done;
    }
    if (logits) {
        /* HC head, norm and LM head for the output rows (§3.2, §3.10) */
        const int t0 = all_logits ? 0 : n - 1, no = n - t0;
        float *Xo = X + t0 * hd;
        MR_PROF_BEGIN(th0);
        for (int t = 0; t < no; t++) ds4_rmsnorm(B.zn + t * hd, Xo + t * hd, hd, M->eps, NULL);
        MR_PROF_END(th0, "hc_head");
        if (mr_model_matmul(m, &M->out_hc_fn, B.zn, no, B.mixes)) goto done;
        MR_PROF_BEGIN(th1);
        for (int t = 0; t < no; t++) {
            float w[DS4_MAX_HC];
            ds4_hc_head_weights(w, B.mixes + t * Nh, M->out_hc_scale[0], M->out_hc_base, Nh, M->eps_hc);
            ds4_hc_combine(B.y + (int64_t)t * d, Xo + t * hd, w, Nh, d);
        }
        DUMP("result_hc", -1, B.y, d, no);
        for (int t = 0; t < no; t++) ds4_rmsnorm(B.y + (int64_t)t * d, B.y + (int64_t)t * d, d, M->eps, M->out_norm);
        MR_PROF_END(th1, "hc_head");
        DUMP("result_norm", -1, B.y, d, no);
        if (mr_model_matmul(m, &M->output, B.y, no, logits)) goto done;
        DUMP("result_output", -1, logits, M->V, no);
    }
    rc = 0;
done:
    free(X); free(e);
    ds4_buf_free(&B);
    return rc;
}

