/* DeepSeek-V4-Flash (`deepseek4`) forward pass (see the top of load.c for the paths and
 * precision choices); spec § numbers refer to ../shared/specs/deepseek4.md.
 *
 * Threads. Everything runs over the model's pool with mr_pool_run_chunks (a worker that is busy or
 * descheduled on a shared machine is not waited for):
 *   - weight products that read the same input go out as one dispatch with the activations
 *     converted once per partner type (ds4_matmuls over mr_model_matmul_many): the attention input
 *     projections (q_a, kv, compressor and indexer projections), q_b with the indexer's q_b, the
 *     eight output groups, the router with the shared expert's gate and up;
 *   - the routed experts (model/moe.c, the expert engine): gate+up+SwiGLU of every selected expert
 *     in one dispatch, the downs with the shared expert's down in another;
 *   - per-token work (norms, RoPE, FP8, hyper-connections) is split by token in a batch;
 *   - attention: the indexer scores split by rows of compressed keys (a single token) or by token,
 *     the heads by (token, group of heads); a decode step converts its F16 keys once.
 * Each output element is computed by the same operations in the same order whatever the split, so
 * results do not depend on the thread count or on how a sequence is cut into batches.
 *
 * Several sequences (eval_multi, continuous batching): a batch may hold tokens of several sessions;
 * everything but the attention's per-sequence part is per token and runs over all rows (so a step's
 * weights and routed experts are read once for every sequence), the per-sequence part runs once per
 * run of a session's consecutive positions against that session's state (ds4_attn_seq). Each
 * sequence's logits are those of evaluating it alone. */
#include "model/deepseek4/ds4.h"
#include "model/ffn.h"
#include "model/ops.h"
#include "quant/matmul.h"
#include "base/prof.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DUMP(name, il, x, ne0, ne1) do { if (dump) mr_model_dump(m, name, il, x, ne0, ne1); } while (0)

/* ---------------------------------------------------------------------------------------------- */
/* helpers */

/* fn(ctx, i) for i < n over the pool (inline for a single item) */
static void ds4_pfor(mr_model *m, long n, mr_pool_chunk_fn fn, void *ctx) {
    if (n <= 1) { for (long i = 0; i < n; i++) fn(ctx, i); return; }
    mr_pool_run_chunks(m->pool, fn, ctx, n);
}

/* Several weight products of n columns in one dispatch. Inputs: X (column stride ldx, 0 = w->cols),
 * outputs Y (column stride ldy, 0 = w->rows); the activations are converted once per distinct
 * (X, partner type). Timed under `op` by the profiler. */
typedef struct { const mr_weight *w; const float *X; int64_t ldx; float *Y; int64_t ldy; } ds4_mm;
#define DS4_MM_MAX 16
static int ds4_matmuls(mr_model *m, const char *op, const ds4_mm *req, int nreq, int n) {
    MR_PROF_BEGIN(t0);
    mr_matmul_task tk[DS4_MM_MAX];
    if (nreq > DS4_MM_MAX) { mr_set_error("deepseek4: too many products in one dispatch"); return -1; }
    for (int i = 0; i < nreq; i++) tk[i] = (mr_matmul_task){req[i].w, req[i].X, n, req[i].Y, req[i].ldx, req[i].ldy};
    const int rc = mr_model_matmul_many(m, tk, nreq);
    if (mr_prof_on) mr_prof_add(op, mr_now() - t0);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* hyper-connections (§3.1) */

typedef struct {
    const ds4_model *M;
    const float *scale, *base, *norm_w;
    const float *X;
    float *zn, *mixes, *pre, *post, *comb, *y, *a, *Xt;
    const float *v;
} ds4_hc_job;

static void ds4_hc_norm_item(void *arg, long t) {
    ds4_hc_job *j = arg;
    const int64_t hd = (int64_t)j->M->Nh * j->M->d;
    mr_rms_norm(j->zn + t * hd, j->X + t * hd, NULL, hd, j->M->eps);
}

/* split + combine, then the sublayer's RMSNorm (attn_norm / ffn_norm) into a */
static void ds4_hc_split_item(void *arg, long t) {
    ds4_hc_job *j = arg;
    const ds4_model *M = j->M;
    const int Nh = M->Nh, mix = (2 + Nh) * Nh;
    const int64_t hd = (int64_t)Nh * M->d;
    ds4_hc_split(j->mixes + t * mix, j->scale, j->base, Nh, M->Ti, M->eps_hc, j->pre + t * Nh, j->post + t * Nh,
                 j->comb + t * Nh * Nh);
    ds4_hc_combine(j->y + t * M->d, j->X + t * hd, j->pre + t * Nh, Nh, M->d);
    mr_rms_norm(j->a + t * M->d, j->y + t * M->d, j->norm_w, M->d, M->eps);
}

static void ds4_hc_post_item(void *arg, long t) {
    ds4_hc_job *j = arg;
    const int Nh = j->M->Nh;
    const int64_t hd = (int64_t)Nh * j->M->d;
    ds4_hc_expand(j->Xt + t * hd, j->X + t * hd, j->v + t * j->M->d, j->post + t * Nh, j->comb + t * Nh * Nh, Nh, j->M->d);
}

/* ---------------------------------------------------------------------------------------------- */
/* per-batch scratch */

typedef struct {
    float *zn, *mixes, *pre, *post, *comb, *y, *a, *qa, *q, *kv, *kvb, *o, *z, *att, *Xt;
    float *ckv, *csc, *ikv, *isc, *comp32, *icomp32, *qI, *wI;
    float *logits, *w, *moe, *sg, *su, *sh;
    int32_t *sel;
    int *topk;
} ds4_buf;

/* HC_pre for n tokens (§3.1) and the sublayer norm: X [n][Nh*d] -> y [n][d], a = rmsnorm(y) * norm_w,
 * post [n][Nh], comb [n][Nh*Nh] (B->zn, B->mixes, B->pre scratch) */
static int ds4_hc_pre(mr_model *m, const ds4_model *M, const char *which, int il, const mr_weight *fn, const float *scale,
                      const float *base, const float *norm_w, const float *X, int n, ds4_buf *B) {
    ds4_hc_job j = {.M = M, .scale = scale, .base = base, .norm_w = norm_w, .X = X, .zn = B->zn, .mixes = B->mixes,
                    .pre = B->pre, .post = B->post, .comb = B->comb, .y = B->y, .a = B->a};
    MR_PROF_BEGIN(t0);
    ds4_pfor(m, n, ds4_hc_norm_item, &j);
    MR_PROF_END(t0, "hc_pre");
    if (mr_model_matmul(m, fn, B->zn, n, B->mixes)) return -1;
    MR_PROF_BEGIN(t1);
    ds4_pfor(m, n, ds4_hc_split_item, &j);
    MR_PROF_END(t1, "hc_pre");
    if (mr_model_dumping(m)) {
        char nm[48];
        const int Nh = M->Nh;
        static const char *sfx[] = {"", "_mixes", "_weights", "_post_weights", "_comb"};
        const float *v[] = {B->y, B->mixes, B->pre, B->post, B->comb};
        const int64_t ne0[] = {M->d, (2 + Nh) * Nh, Nh, Nh, Nh * Nh};
        for (int i = 0; i < 5; i++) {
            snprintf(nm, sizeof nm, "hc_%s_pre%s", which, sfx[i]);
            mr_model_dump(m, nm, il, v[i], ne0[i], n);
        }
        snprintf(nm, sizeof nm, "%s_norm", which);
        mr_model_dump(m, nm, il, B->a, M->d, n);
    }
    return 0;
}

/* X <- HC_post(X, v) for n tokens (§3.1), through B->Xt */
static void ds4_hc_post(mr_model *m, const ds4_model *M, float *X, const float *v, int n, ds4_buf *B) {
    MR_PROF_BEGIN(t0);
    ds4_hc_job j = {.M = M, .X = X, .v = v, .post = B->post, .comb = B->comb, .Xt = B->Xt};
    ds4_pfor(m, n, ds4_hc_post_item, &j);
    memcpy(X, B->Xt, sizeof(float) * (size_t)n * (size_t)M->Nh * (size_t)M->d);
    MR_PROF_END(t0, "hc_post");
}

/* ---------------------------------------------------------------------------------------------- */
/* compressor (§3.6) */

/* mainline's rotation of attention rows (kv_rot > 0): a kv_rot-point Hadamard per block of the row */
static void ds4_kv_rotate(const ds4_model *M, float *x, int n) {
    for (int i = 0; i + M->kv_rot <= n; i += M->kv_rot) ds4_hadamard(x + i, M->kv_rot);
}

/* a row of compressed keys: norm, RoPE at the block start; an attention row (attn) then as the cache
 * keeps it: FP8 (official, fork) or rotated (mainline when D == Di) */
static void ds4_comp_finish(const ds4_model *M, const ds4_layer *ly, float *row, int Dh, const float *norm, int64_t start,
                            int attn) {
    float cs[4096];
    mr_rms_norm(row, row, norm, Dh, M->eps);
    ds4_rope_cache(&ly->rope, start, 0, cs);
    ds4_rope_tail(row, Dh, M->R, cs);
    if (attn && M->fp8) ds4_fp8_sim(row, Dh, M->R);
    if (attn && M->kv_rot) ds4_kv_rotate(M, row, Dh);
}

typedef struct {
    const ds4_model *M;
    const ds4_layer *ly;
    int r, Dh, attn;
    const float *kv, *sc, *norm, *pad_kv, *pad_sc;
    float *out;
    /* pooling split by features (one block of a streaming step) */
    const float *const *kp, *const *sp;
    int ne;
} ds4_comp_job;

/* block b of a batch (prefill, §3.6.2) */
static void ds4_comp_block_item(void *arg, long b) {
    ds4_comp_job *j = arg;
    const int r = j->r, Dh = j->Dh, Wd = (r == 4 ? 2 : 1) * Dh;
    const float *kp[256], *sp[256];
    int ne = 0;
    if (r == 4) {
        for (int i = 0; i < 4; i++, ne++) {
            if (b == 0) { kp[ne] = j->pad_kv; sp[ne] = j->pad_sc; }
            else { kp[ne] = j->kv + ((b - 1) * 4 + i) * (int64_t)Wd; sp[ne] = j->sc + ((b - 1) * 4 + i) * (int64_t)Wd; }
        }
        for (int i = 0; i < 4; i++, ne++) {
            kp[ne] = j->kv + (b * 4 + i) * (int64_t)Wd + Dh;
            sp[ne] = j->sc + (b * 4 + i) * (int64_t)Wd + Dh;
        }
    } else {
        for (int i = 0; i < r; i++, ne++) { kp[ne] = j->kv + (b * r + i) * (int64_t)Wd; sp[ne] = j->sc + (b * r + i) * (int64_t)Wd; }
    }
    float *row = j->out + b * (int64_t)Dh;
    ds4_pool(row, kp, sp, ne, Dh);
    ds4_comp_finish(j->M, j->ly, row, Dh, j->norm, b * (int64_t)r, j->attn);
}

/* features [64c, 64c+64) of one pooled row (a streaming step of a ratio-128 layer) */
#define DS4_POOL_FEAT 64
static void ds4_comp_feat_item(void *arg, long c) {
    ds4_comp_job *j = arg;
    const float *kp[256], *sp[256];
    const int64_t i0 = c * DS4_POOL_FEAT;
    const int64_t w = j->Dh - i0 < DS4_POOL_FEAT ? j->Dh - i0 : DS4_POOL_FEAT;
    for (int e = 0; e < j->ne; e++) { kp[e] = j->kp[e] + i0; sp[e] = j->sp[e] + i0; }
    ds4_pool(j->out + i0, kp, sp, j->ne, w);
}

/* Batched compressor (prefill, §3.6.2): rows for the n/r complete blocks of the batch from kv/sc
 * [n][Wd] (ape already added); out [n/r][Dh] after norm and RoPE (as stored when attn). Also the streaming
 * state left by the batch tail (§3.6.3). */
static int ds4_compress_batch(mr_model *m, const ds4_model *M, const ds4_layer *ly, int r, int Dh, const float *kv,
                              const float *sc, int n, const float *norm, int attn, float *out, float *kvs, float *scs) {
    const int c = r == 4 ? 2 : 1, Wd = c * Dh, n_comp = n / r;
    /* the padding rows from the session's arena (no product runs meanwhile; own: a call without one) */
    mr_scratch own = {0}, *ws = m->ws ? m->ws : &own;
    mr_scratch_reset(ws);
    float *pad_kv = mr_scratch_alloc(ws, sizeof(float) * (size_t)Dh), *pad_sc = mr_scratch_alloc(ws, sizeof(float) * (size_t)Dh);
    if (!pad_kv || !pad_sc) { mr_scratch_free(&own); return -1; }
    for (int i = 0; i < Dh; i++) { pad_kv[i] = 0.0f; pad_sc[i] = -INFINITY; }
    ds4_comp_job j = {.M = M, .ly = ly, .r = r, .Dh = Dh, .attn = attn, .kv = kv, .sc = sc, .norm = norm, .pad_kv = pad_kv,
                      .pad_sc = pad_sc, .out = out};
    ds4_pfor(m, n_comp, ds4_comp_block_item, &j);
    /* state from the tail (§3.6.3) */
    const int cut = n_comp * r, rem = n - cut, rows = c * r;
    for (int64_t i = 0; i < (int64_t)rows * Wd; i++) { kvs[i] = 0.0f; scs[i] = -INFINITY; }
    if (r == 4) {
        if (cut >= 4)
            for (int i = 0; i < 4; i++) {
                memcpy(kvs + (int64_t)i * Wd, kv + (int64_t)(cut - 4 + i) * Wd, sizeof(float) * (size_t)Wd);
                memcpy(scs + (int64_t)i * Wd, sc + (int64_t)(cut - 4 + i) * Wd, sizeof(float) * (size_t)Wd);
            }
        for (int i = 0; i < rem; i++) {
            memcpy(kvs + (int64_t)(4 + i) * Wd, kv + (int64_t)(cut + i) * Wd, sizeof(float) * (size_t)Wd);
            memcpy(scs + (int64_t)(4 + i) * Wd, sc + (int64_t)(cut + i) * Wd, sizeof(float) * (size_t)Wd);
        }
    } else {
        for (int i = 0; i < rem; i++) {
            memcpy(kvs + (int64_t)i * Wd, kv + (int64_t)(cut + i) * Wd, sizeof(float) * (size_t)Wd);
            memcpy(scs + (int64_t)i * Wd, sc + (int64_t)(cut + i) * Wd, sizeof(float) * (size_t)Wd);
        }
    }
    mr_scratch_free(&own);
    return 0;
}

/* Streaming compressor step for position p (§3.6.3): store (kv, sc) in the state; if p closes a
 * block, pool it into out (norm, RoPE at the block start, as stored when attn) and return 1. */
static int ds4_compress_step(mr_model *m, const ds4_model *M, const ds4_layer *ly, int r, int Dh, const float *kv,
                             const float *sc, int64_t p, const float *norm, int attn, float *kvs, float *scs, float *out) {
    const int c = r == 4 ? 2 : 1, Wd = c * Dh;
    const int row = r == 4 ? 4 + (int)(p % 4) : (int)(p % r);
    memcpy(kvs + (int64_t)row * Wd, kv, sizeof(float) * (size_t)Wd);
    memcpy(scs + (int64_t)row * Wd, sc, sizeof(float) * (size_t)Wd);
    if ((p + 1) % r) return 0;
    const float *kp[256] = {0}, *sp[256] = {0};
    int ne = 0;
    if (r == 4) {
        for (int i = 0; i < 4; i++, ne++) { kp[ne] = kvs + (int64_t)i * Wd; sp[ne] = scs + (int64_t)i * Wd; }
        for (int i = 4; i < 8; i++, ne++) { kp[ne] = kvs + (int64_t)i * Wd + Dh; sp[ne] = scs + (int64_t)i * Wd + Dh; }
    } else {
        for (int i = 0; i < r; i++, ne++) { kp[ne] = kvs + (int64_t)i * Wd; sp[ne] = scs + (int64_t)i * Wd; }
    }
    if ((int64_t)ne * Dh >= 16384) { /* a ratio-128 block: split the features over the pool */
        ds4_comp_job j = {.Dh = Dh, .out = out, .kp = kp, .sp = sp, .ne = ne};
        ds4_pfor(m, (Dh + DS4_POOL_FEAT - 1) / DS4_POOL_FEAT, ds4_comp_feat_item, &j);
    } else {
        ds4_pool(out, kp, sp, ne, Dh);
    }
    if (r == 4) {
        memcpy(kvs, kvs + 4 * (int64_t)Wd, sizeof(float) * 4 * (size_t)Wd);
        memcpy(scs, scs + 4 * (int64_t)Wd, sizeof(float) * 4 * (size_t)Wd);
    }
    ds4_comp_finish(M, ly, out, Dh, norm, p + 1 - r, attn);
    return 1;
}

/* ---------------------------------------------------------------------------------------------- */
/* per-token work between the projections and attention (§3.3-§3.7) */

typedef struct {
    const ds4_model *M;
    const ds4_layer *ly;
    int pos0, stage;
    int kvb_f16;           /* round the batch keys to F16 (they go through an F16 cache) */
    int idx_f16;           /* round the indexer q to F16 (the indexer keys are F16) */
    ds4_buf *B;
} ds4_tok_job;

enum { DS4_ST_QNORM = 1, DS4_ST_KVNORM = 2, DS4_ST_ROPE = 4, DS4_ST_FP8 = 8, DS4_ST_REST = 16, DS4_ST_ALL = 31 };

static void ds4_tok_item(void *arg, long t) {
    ds4_tok_job *j = arg;
    const ds4_model *M = j->M;
    const ds4_layer *ly = j->ly;
    ds4_buf *B = j->B;
    const int D = M->D, H = M->H, R = M->R, r = ly->ratio;
    float cs[4096];
    float *q = B->q + t * (int64_t)H * D, *kv = B->kv + t * (int64_t)D;
    if (j->stage & DS4_ST_QNORM) for (int h = 0; h < H; h++) mr_rms_norm(q + (int64_t)h * D, q + (int64_t)h * D, NULL, D, M->eps);
    if (j->stage & DS4_ST_KVNORM) mr_rms_norm(kv, kv, ly->kv_norm, D, M->eps);
    if (j->stage & DS4_ST_ROPE) {
        ds4_rope_cache(&ly->rope, j->pos0 + t, 0, cs);
        for (int h = 0; h < H; h++) ds4_rope_tail(q + (int64_t)h * D, D, R, cs);
        ds4_rope_tail(kv, D, R, cs);
    }
    if ((j->stage & DS4_ST_FP8) && M->fp8) ds4_fp8_sim(kv, D, R);
    if ((j->stage & DS4_ST_FP8) && M->kv_rot) {
        ds4_kv_rotate(M, kv, D);
        for (int h = 0; h < H; h++) ds4_kv_rotate(M, q + (int64_t)h * D, D);
    }
    if (!(j->stage & DS4_ST_REST)) return;
    float *kvb = B->kvb + t * (int64_t)D;
    if (j->kvb_f16) for (int i = 0; i < D; i++) kvb[i] = mr_fp16_to_fp32(mr_fp32_to_fp16(kv[i]));
    else memcpy(kvb, kv, sizeof(float) * (size_t)D);
    if (r == 0) return;
    /* compressor inputs (§3.6.1): position embedding added to the scores */
    const int Wd = (r == 4 ? 2 : 1) * D;
    const float *ape = ly->c_ape + (int64_t)((j->pos0 + t) % r) * Wd;
    float *csc = B->csc + t * (int64_t)Wd;
    for (int i = 0; i < Wd; i++) csc[i] += ape[i];
    if (r != 4) return;
    const int Di = M->Di, IWd = 2 * Di, Hi = M->Hi;
    const float *iape = ly->ic_ape + (int64_t)((j->pos0 + t) % 4) * IWd;
    float *isc = B->isc + t * (int64_t)IWd;
    for (int i = 0; i < IWd; i++) isc[i] += iape[i];
    /* indexer queries and weights (§3.7) */
    const float wscale = 1.0f / sqrtf((float)Di * (float)Hi);
    ds4_rope_cache(&ly->rope, j->pos0 + t, 0, cs);
    for (int h = 0; h < Hi; h++) {
        float *qh = B->qI + (t * (int64_t)Hi + h) * Di;
        ds4_rope_tail(qh, Di, R, cs);
        if (M->idx_had) ds4_hadamard(qh, Di);
        if (M->idx_fp4) ds4_fp4_sim(qh, Di);
        /* the indexer scores with F16-rounded q when its keys are F16 (same numbers on both paths) */
        if (j->idx_f16) for (int i = 0; i < Di; i++) qh[i] = mr_fp16_to_fp32(mr_fp32_to_fp16(qh[i]));
    }
    for (int h = 0; h < Hi; h++) B->wI[t * (int64_t)Hi + h] *= wscale;
}

/* ---------------------------------------------------------------------------------------------- */
/* attention (§3.7): phase 0 scores the indexer (split by rows for a short batch), phase 1 picks
 * each token's keys, phase 1b converts a short batch's F16 keys once, phase 2 runs the heads */

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
    const float *qI;      /* [n][Hi*Di] indexer queries after RoPE (and QAT, F16 rounding) */
    const float *wI;      /* [n][Hi] indexer head weights */
    float *o;             /* [n][H*D] */
    int nvis_max;         /* visible compressed rows of the last token */
    float *scores;        /* [n][nvis_max] indexer scores computed in phase 0, or NULL (phase 1 does it) */
    long *stask;          /* phase 0 tasks: t << 32 | block */
    int max_keys;         /* per token */
    const float **kf;     /* [n][max_keys] key rows (floats) ... */
    const uint16_t **kh;  /* ... or F16 rows */
    ds4_state *st;        /* kconv: [n][max_keys][D] converted keys (phase 1b), kept in the state */
    int *nk;              /* [n] keys per token */
    int f16;              /* keys are F16 values */
    int n_chunk;          /* head groups per token in phase 2 */
    int *topk_out;        /* [n][topk] selected rows (-1 = none), debug */
    float *scores_out;    /* [n][nvis of the last token] indexer scores (-inf = not visible), debug */
    /* per pool thread (mr_pool_worker_id), from the session's arena: phase 1's indexer scores,
     * selection and marks (sel_bytes each), phase 2's attention scratch (head_floats each) */
    char *sel_buf;
    size_t sel_bytes;
    float *head_buf;
    size_t head_floats;
    int err;
} ds4_attn_job;

#define DS4_IDX_BLOCK 256 /* indexer rows per phase-0 task */
/* a thread's phase-1 buffer (ds4_attn_job.sel_buf): scores [nvis_max] floats and 16 bytes of slack,
 * selection [topk] ints, marks [nvis_max + 1] bytes, each from a 64-byte boundary */
#define DS4_SEL_64(b) (((size_t)(b) + 63) / 64 * 64)
#define DS4_SEL_SC(nvis) DS4_SEL_64(sizeof(float) * (size_t)(nvis) + 16)
#define DS4_SEL_IDS(k) DS4_SEL_64(sizeof(int) * (size_t)(k))

/* S[b] = sum_h w[h] * relu(qI_h . IK_b) for b in [b0, b1), summed in double like ggml's sum_rows */
static void ds4_idx_scores(const ds4_attn_job *j, long t, int b0, int b1, float *sc) {
    const ds4_model *M = j->M;
    const int Di = M->Di, Hi = M->Hi;
    const float *qt = j->qI + t * (int64_t)Hi * Di, *wt = j->wI + t * (int64_t)Hi;
    float row[4096];
    for (int b = b0; b < b1; b++) {
        const float *k = NULL;
        const uint16_t *kh = NULL;
        if (j->icomp32) k = j->icomp32 + (int64_t)b * Di;
        else ds4_rows_ptr(&j->ls->icomp, b, &k, &kh);
        if (!k) { ds4_f16_to_f32(row, kh, Di); k = row; }
        double sum = 0.0;
        for (int h = 0; h < Hi; h++) {
            float dot = ds4_dot_f32(qt + (int64_t)h * Di, k, Di);
            if (dot < 0.0f) dot = 0.0f;
            sum += (double)(dot * wt[h]);
        }
        sc[b] = (float)sum;
    }
}

static void ds4_idx_task(void *arg, long i) {
    ds4_attn_job *j = arg;
    const long t = j->stask[i] >> 32, blk = j->stask[i] & 0xffffffffL;
    const int nvis = (int)((j->pos0 + t + 1) / 4);
    const int b0 = (int)blk * DS4_IDX_BLOCK, b1 = b0 + DS4_IDX_BLOCK < nvis ? b0 + DS4_IDX_BLOCK : nvis;
    ds4_idx_scores(j, t, b0, b1, j->scores + t * (int64_t)j->nvis_max);
}

/* indexer selection for token t with nvis visible rows scored in sc (§3.7): sel[0..topk) */
static int ds4_idx_select(ds4_attn_job *j, long t, int nvis, float *sc, char *mark, int *sel) {
    const ds4_model *M = j->M;
    if (j->scores_out) {
        float *so = j->scores_out + t * (int64_t)j->nvis_max;
        for (int b = 0; b < j->nvis_max; b++) so[b] = b < nvis ? sc[b] : -INFINITY;
    }
    mr_topk(sc, nvis, M->topk, sel);
    /* Exact ties at the k-th place (in practice rows whose relu'd head scores are all 0) are broken
     * like the reference: std::sort (libstdc++ introsort) of the row indices over an array of
     * n_ctx/4 rows, not-yet-visible rows at -inf. The reference's prefill sorts its batch's rows that
     * way, so a batch filling the session reproduces it, and prefill and decode agree. Without a tie
     * any top-k gives the same set. */
    const float kth = sc[sel[M->topk - 1]];
    memset(mark, 0, (size_t)j->nvis_max + 1);
    for (int k = 0; k < M->topk; k++) mark[sel[k]] = 1;
    int tie = 0;
    for (int b = 0; b < nvis && !tie; b++) tie = !mark[b] && sc[b] == kth;
    if (tie) {
        const int len = j->n_ctx / 4 > nvis ? j->n_ctx / 4 : nvis;
        float *arr = mr_malloc(sizeof(float) * (size_t)len);
        int *ord = mr_malloc(sizeof(int) * (size_t)len);
        if (!arr || !ord) { free(arr); free(ord); return -1; }
        memcpy(arr, sc, sizeof(float) * (size_t)nvis);
        for (int b = nvis; b < len; b++) arr[b] = -INFINITY;
        ds4_argsort_desc(arr, len, ord);
        memcpy(sel, ord, sizeof(int) * (size_t)M->topk);
        free(arr); free(ord);
    }
    return 0;
}

/* phase 1: token t's key rows (window, visible compressed rows, indexer) */
static void ds4_keys_item(void *arg, long t) {
    ds4_attn_job *j = arg;
    const ds4_model *M = j->M;
    const int r = j->ly->ratio, D = M->D;
    const int64_t p = j->pos0 + t;
    const float **kf = j->kf + t * (int64_t)j->max_keys;
    const uint16_t **kh = j->kh + t * (int64_t)j->max_keys;
    int nk = 0;
    /* raw window: positions max(0, p-W+1) .. p (§3.7); the batch's own rows, older ones from the ring. A
     * DSpark block is non-causal: every row also sees the block's later rows (mainline's draft context
     * with causal attention off, the window mask still on) */
    const int64_t last = M->noncausal ? j->pos0 + j->n - 1 : p;
    for (int64_t s = p - M->W + 1 < 0 ? 0 : p - M->W + 1; s <= last; s++, nk++) {
        if (s >= j->pos0) { kf[nk] = j->kvb + (s - j->pos0) * D; kh[nk] = NULL; }
        else ds4_rows_ptr(&j->ls->raw, s % j->ls->raw.cap, &kf[nk], &kh[nk]);
    }
    if (r > 0) {
        const int nvis = (int)((p + 1) / r);
        int all = 1;
        const char *mine = NULL;
        if (r == 4 && nvis > M->topk) {
            char *tb = j->sel_buf + (size_t)mr_pool_worker_id() * j->sel_bytes;
            float *sc = (float *)tb;
            int *sel = (int *)(tb + DS4_SEL_SC(j->nvis_max));
            char *mark = (char *)sel + DS4_SEL_IDS(M->topk);
            if (j->scores) sc = j->scores + t * (int64_t)j->nvis_max;
            else ds4_idx_scores(j, t, 0, nvis, sc);
            if (ds4_idx_select(j, t, nvis, sc, mark, sel)) { j->err = 1; return; }
            memset(mark, 0, (size_t)j->nvis_max + 1);
            for (int k = 0; k < M->topk; k++) mark[sel[k]] = 1;
            if (j->topk_out) for (int k = 0; k < M->topk; k++) j->topk_out[t * M->topk + k] = sel[k];
            mine = mark;
            all = 0;
        } else if (j->topk_out && r == 4) {
            for (int k = 0; k < M->topk; k++) j->topk_out[t * M->topk + k] = k < nvis ? k : -1;
        }
        /* compressed rows in row order (unselected ones are masked out in the reference) */
        for (int b = 0; b < nvis; b++) {
            if (!all && !mine[b]) continue;
            if (j->comp32) { kf[nk] = j->comp32 + (int64_t)b * D; kh[nk] = NULL; }
            else ds4_rows_ptr(&j->ls->comp, b, &kf[nk], &kh[nk]);
            nk++;
        }
    }
    j->nk[t] = nk;
}

/* phase 1b: F16 key rows [64c, 64c+64) of token t = c / blocks -> floats (exact), once for all heads */
#define DS4_CONV_ROWS 64
static void ds4_conv_item(void *arg, long i) {
    ds4_attn_job *j = arg;
    const int nb = (j->max_keys + DS4_CONV_ROWS - 1) / DS4_CONV_ROWS;
    const long t = i / nb;
    const int k0 = (int)(i % nb) * DS4_CONV_ROWS, D = j->M->D;
    const float **kf = j->kf + t * (int64_t)j->max_keys;
    const uint16_t **kh = j->kh + t * (int64_t)j->max_keys;
    for (int k = k0; k < k0 + DS4_CONV_ROWS && k < j->nk[t]; k++) {
        if (kf[k]) continue;
        float *dst = j->st->kconv + (t * (int64_t)j->max_keys + k) * D;
        ds4_f16_to_f32(dst, kh[k], D);
        kf[k] = dst;
        kh[k] = NULL;
    }
}

/* phase 2: heads [h0, h1) of token t */
static void ds4_heads_item(void *arg, long it) {
    ds4_attn_job *j = arg;
    const ds4_model *M = j->M;
    const int D = M->D, H = M->H, nc = j->n_chunk;
    const long t = it / nc;
    const int c = (int)(it % nc), h0 = c * H / nc, h1 = (c + 1) * H / nc;
    float *scratch = j->head_buf + (size_t)mr_pool_worker_id() * j->head_floats;
    const float kq_scale = 1.0f / sqrtf((float)D);
    ds4_attn_mqa(j->o + (t * H + h0) * (int64_t)D, j->q + (t * H + h0) * (int64_t)D, h1 - h0,
                 j->kf + t * (int64_t)j->max_keys, j->kh + t * (int64_t)j->max_keys, j->nk[t], D, kq_scale,
                 j->ly->sinks + h0, j->f16, scratch);
}

/* the attention phases for the batch (job filled up to the per-batch inputs) */
static int ds4_attn_run(mr_model *m, ds4_attn_job *job) {
    const ds4_model *M = job->M;
    const int n = job->n, r = job->ly->ratio, nth = mr_pool_size(m->pool);
    const int short_batch = n < 2 * nth;
    int rc = -1;
    /* every buffer of the phases from the session's arena (no product runs meanwhile) */
    mr_scratch own = {0}, *ws = m->ws ? m->ws : &own; /* own: a call without a session's, freed at the end */
    mr_scratch_reset(ws);
    job->kf = mr_scratch_alloc(ws, sizeof(float *) * (size_t)n * (size_t)job->max_keys);
    job->kh = mr_scratch_alloc(ws, sizeof(uint16_t *) * (size_t)n * (size_t)job->max_keys);
    job->nk = mr_scratch_alloc(ws, sizeof(int) * (size_t)n);
    if (!job->kf || !job->kh || !job->nk) goto done;
    if (r == 4 && job->nvis_max > M->topk) {
        job->sel_bytes = DS4_SEL_SC(job->nvis_max) + DS4_SEL_IDS(M->topk) + DS4_SEL_64((size_t)job->nvis_max + 1);
        if (!(job->sel_buf = mr_scratch_alloc(ws, job->sel_bytes * (size_t)nth))) goto done;
    }
    MR_PROF_BEGIN(tk);
    if (r == 4 && short_batch && job->nvis_max > M->topk) {
        /* phase 0: the indexer scores of each token that selects, split by blocks of rows */
        long ntask = 0;
        for (int t = 0; t < n; t++) {
            const int nvis = (int)((job->pos0 + t + 1) / 4);
            if (nvis > M->topk) ntask += (nvis + DS4_IDX_BLOCK - 1) / DS4_IDX_BLOCK;
        }
        job->scores = mr_scratch_alloc(ws, sizeof(float) * (size_t)n * (size_t)job->nvis_max);
        job->stask = mr_scratch_alloc(ws, sizeof(long) * (size_t)ntask);
        if (!job->scores || !job->stask) goto done;
        long i = 0;
        for (int t = 0; t < n; t++) {
            const int nvis = (int)((job->pos0 + t + 1) / 4);
            if (nvis > M->topk)
                for (int b = 0; b * DS4_IDX_BLOCK < nvis; b++) job->stask[i++] = (long)t << 32 | b;
        }
        ds4_pfor(m, ntask, ds4_idx_task, job);
    }
    ds4_pfor(m, n, ds4_keys_item, job);
    MR_PROF_END(tk, "attn_keys+indexer");
    if (job->err) goto done;
    MR_PROF_BEGIN(th);
    if (short_batch && job->f16) {
        /* kept in the session: a decode step reuses it instead of faulting in fresh pages */
        const size_t need = (size_t)n * (size_t)job->max_keys * (size_t)M->D;
        if (job->st->kconv_cap < need) {
            free(job->st->kconv);
            job->st->kconv_cap = 0;
            if (!(job->st->kconv = mr_malloc(sizeof(float) * need))) goto done;
            job->st->kconv_cap = need;
        }
        const int nb = (job->max_keys + DS4_CONV_ROWS - 1) / DS4_CONV_ROWS;
        ds4_pfor(m, (long)n * nb, ds4_conv_item, job);
    }
    /* a short batch splits each token's heads in groups (several per thread: a busy thread takes fewer) */
    job->n_chunk = short_batch ? (M->H < 8 * nth ? M->H : 8 * nth) : 1;
    int nk_max = 0;
    for (int t = 0; t < n; t++) nk_max = job->nk[t] > nk_max ? job->nk[t] : nk_max;
    const int h_max = (M->H + job->n_chunk - 1) / job->n_chunk; /* heads of the largest group */
    job->head_floats = (size_t)(ds4_attn_scratch(h_max, nk_max, M->D) + 15) / 16 * 16;
    if (!(job->head_buf = mr_scratch_alloc(ws, sizeof(float) * job->head_floats * (size_t)nth))) goto done;
    ds4_pfor(m, (long)n * job->n_chunk, ds4_heads_item, job);
    MR_PROF_END(th, "attn_heads");
    if (!job->err) rc = 0;
done:
    job->kf = NULL; job->kh = NULL; job->nk = NULL; job->scores = NULL; job->stask = NULL;
    job->sel_buf = NULL; job->head_buf = NULL;
    mr_scratch_free(&own);
    if (rc) mr_set_error("deepseek4: out of memory in attention");
    return rc;
}

/* inverse RoPE of the attention output at the query position (§3.8) */
typedef struct { const ds4_model *M; const ds4_layer *ly; int pos0; float *o; } ds4_orope_job;
static void ds4_orope_item(void *arg, long t) {
    ds4_orope_job *j = arg;
    const int D = j->M->D, H = j->M->H;
    float cs[4096];
    ds4_rope_cache(&j->ly->rope, j->pos0 + t, 1, cs);
    for (int h = 0; h < H; h++) {
        float *oh = j->o + (t * H + h) * (int64_t)D;
        if (j->M->kv_rot) ds4_kv_rotate(j->M, oh, D); /* back from the rotated keys' basis (H H = I) */
        ds4_rope_tail(oh, D, j->M->R, cs);
    }
}

/* the attention half of layer il for the batch: X [n][Nh*d] updated in place (via Xt scratch) */
/* The batch's rows of one run (tokens t0.. of one sequence at consecutive positions): a copy of B whose
 * per-token buffers start at row t0. The compressor's scratch rows (comp32, icomp32) are the run's
 * own and shared by every run, which use them one after another. */
static ds4_buf ds4_buf_at(const ds4_buf *B, const ds4_model *M, int r, int t0) {
    ds4_buf b = *B;
    const int64_t t = t0, Wd = (r == 4 ? 2 : 1) * (int64_t)M->D, IWd = 2 * (int64_t)M->Di;
    b.q += t * M->H * M->D;
    b.o += t * M->H * M->D;
    b.kv += t * M->D;
    b.kvb += t * M->D;
    b.ckv += t * Wd;
    b.csc += t * Wd;
    b.ikv += t * IWd;
    b.isc += t * IWd;
    b.qI += t * M->Hi * M->Di;
    b.wI += t * M->Hi;
    b.topk += t * M->topk;
    return b;
}

/* per token: q head norms, KV norm, RoPE, FP8 (§3.4-3.5), batch keys as attention reads them
 * (F16-rounded when they go through an F16 cache), compressor position embedding, indexer q; with
 * dumps on, stage by stage so each one's result can be printed */
static void ds4_seq_tokens(mr_model *m, ds4_model *M, ds4_layer *ly, int il, int n, int pos0, ds4_buf *B) {
    const int D = M->D, H = M->H, r = ly->ratio, prefill = pos0 == 0, dump = mr_model_dumping(m);
    ds4_tok_job tj = {.M = M, .ly = ly, .pos0 = pos0, .B = B,
                      .kvb_f16 = M->kv_f16 && (r == 0 || !prefill || !M->prefill_f32),
                      .idx_f16 = M->kv_f16 && (!prefill || !M->prefill_f32)};
    if (dump) {
        static const int st_[4] = {DS4_ST_QNORM, DS4_ST_KVNORM, DS4_ST_ROPE, DS4_ST_FP8};
        for (int s = 0; s < 4; s++) {
            tj.stage = st_[s];
            ds4_pfor(m, n, ds4_tok_item, &tj);
            if (s == 0) DUMP("Qnorm", il, B->q, (int64_t)H * D, n);
            if (s == 1) DUMP("KVnorm", il, B->kv, D, n);
            if (s == 2) { DUMP("Qcur", il, B->q, (int64_t)H * D, n); DUMP("KVrope", il, B->kv, D, n); }
            if (s == 3) DUMP("KVcur", il, B->kv, D, n);
        }
        tj.stage = DS4_ST_REST;
    } else {
        tj.stage = DS4_ST_ALL;
    }
    ds4_pfor(m, n, ds4_tok_item, &tj);
}

/* a prefill's compressed rows (§4.1): the batched compressor over the batch, stored in the layer's
 * caches; B->comp32 / B->icomp32 keep them as attention reads them (F16-rounded unless
 * MOERUN_DS4_PREFILL_F32) */
static int ds4_seq_compress_batch(mr_model *m, ds4_model *M, ds4_layer *ly, ds4_lstate *ls, int il, int n, ds4_buf *B) {
    const int D = M->D, Di = M->Di, r = ly->ratio, n_comp = n / r, dump = mr_model_dumping(m);
    if (ds4_compress_batch(m, M, ly, r, D, B->ckv, B->csc, n, ly->c_norm, 1, B->comp32, ls->kvs, ls->scs)) return -1;
    for (int b = 0; b < n_comp; b++) ds4_rows_put(&ls->comp, b, B->comp32 + (int64_t)b * D);
    if (M->kv_f16 && !M->prefill_f32)
        for (int64_t i = 0; i < (int64_t)n_comp * D; i++) B->comp32[i] = mr_fp16_to_fp32(mr_fp32_to_fp16(B->comp32[i]));
    if (n_comp) DUMP("KVcompress", il, B->comp32, D, n_comp);
    if (r != 4) return 0;
    if (ds4_compress_batch(m, M, ly, 4, Di, B->ikv, B->isc, n, ly->ic_norm, 0, B->icomp32, ls->ikvs, ls->iscs)) return -1;
    for (int b = 0; b < n_comp; b++) {
        if (M->idx_had) ds4_hadamard(B->icomp32 + (int64_t)b * Di, Di);
        if (M->idx_fp4) ds4_fp4_sim(B->icomp32 + (int64_t)b * Di, Di);
        ds4_rows_put(&ls->icomp, b, B->icomp32 + (int64_t)b * Di);
        if (M->kv_f16 && !M->prefill_f32)
            for (int i = 0; i < Di; i++)
                B->icomp32[(int64_t)b * Di + i] = mr_fp16_to_fp32(mr_fp32_to_fp16(B->icomp32[(int64_t)b * Di + i]));
    }
    if (n_comp) DUMP("indexer_KVcompress", il, B->icomp32, Di, n_comp);
    return 0;
}

/* any other batch: the streaming compressor token by token, each finished row into the caches */
static void ds4_seq_compress_steps(mr_model *m, ds4_model *M, ds4_layer *ly, ds4_lstate *ls, int il, int n, int pos0,
                                   ds4_buf *B) {
    const int D = M->D, Di = M->Di, r = ly->ratio, Wd = (r == 4 ? 2 : 1) * D, IWd = 2 * Di, dump = mr_model_dumping(m);
    float *row = B->comp32, *irow = B->icomp32;
    for (int t = 0; t < n; t++) {
        const int64_t p = pos0 + t;
        if (ds4_compress_step(m, M, ly, r, D, B->ckv + (int64_t)t * Wd, B->csc + (int64_t)t * Wd, p, ly->c_norm, 1,
                              ls->kvs, ls->scs, row)) {
            ds4_rows_put(&ls->comp, (p + 1) / r - 1, row);
            DUMP("KVcompress", il, row, D, 1);
        }
        if (r == 4 && ds4_compress_step(m, M, ly, 4, Di, B->ikv + (int64_t)t * IWd, B->isc + (int64_t)t * IWd, p,
                                        ly->ic_norm, 0, ls->ikvs, ls->iscs, irow)) {
            if (M->idx_had) ds4_hadamard(irow, Di);
            if (M->idx_fp4) ds4_fp4_sim(irow, Di);
            ds4_rows_put(&ls->icomp, (p + 1) / 4 - 1, irow);
            DUMP("indexer_KVcompress", il, irow, Di, 1);
        }
    }
}

/* the compressors of a compressed layer (r > 0) and their input history: compressor inputs of the
 * batch's last positions, for cutting the state back */
static int ds4_seq_compress(mr_model *m, ds4_model *M, ds4_layer *ly, ds4_lstate *ls, int il, int n, int pos0,
                            ds4_buf *B) {
    const int r = ly->ratio, Wd = (r == 4 ? 2 : 1) * M->D, IWd = 2 * M->Di;
    if (pos0 == 0) {
        if (ds4_seq_compress_batch(m, M, ly, ls, il, n, B)) return -1;
    } else {
        ds4_seq_compress_steps(m, M, ly, ls, il, n, pos0, B);
    }
    for (int t = n > ls->hkv.cap ? n - (int)ls->hkv.cap : 0; t < n; t++) {
        ds4_rows_put(&ls->hkv, (pos0 + t) % ls->hkv.cap, B->ckv + (int64_t)t * Wd);
        ds4_rows_put(&ls->hsc, (pos0 + t) % ls->hsc.cap, B->csc + (int64_t)t * Wd);
    }
    if (r == 4)
        for (int t = n > ls->ihkv.cap ? n - (int)ls->ihkv.cap : 0; t < n; t++) {
            ds4_rows_put(&ls->ihkv, (pos0 + t) % ls->ihkv.cap, B->ikv + (int64_t)t * IWd);
            ds4_rows_put(&ls->ihsc, (pos0 + t) % ls->ihsc.cap, B->isc + (int64_t)t * IWd);
        }
    return 0;
}

/* --dump of the indexer's scores over the compressed rows and the rows it chose */
static void ds4_seq_dump_indexer(mr_model *m, const ds4_model *M, int il, int n, int pos0, const ds4_attn_job *job) {
    if (job->scores_out && (pos0 + n) / 4 > M->topk)
        mr_model_dump(m, "indexer_scores", il, job->scores_out, (pos0 + n) / 4, n);
    if (job->topk_out) {
        float *tf = mr_malloc(sizeof(float) * (size_t)n * M->topk);
        if (tf) {
            for (int64_t i = 0; i < (int64_t)n * M->topk; i++) tf[i] = (float)job->topk_out[i];
            mr_model_dump(m, "indexer_topk", il, tf, M->topk, n);
            free(tf);
        }
    }
}

/* The per-sequence part of layer il's attention for n tokens of one session at positions pos0..
 * pos0+n-1 (B at the run's rows, ds4_buf_at): q/KV norms, RoPE, FP8, the compressors (their state
 * and history in st), the indexer, the heads over the window and compressed rows, the window ring,
 * the inverse RoPE of the output. Everything before and after (HC, projections) is per token and
 * runs over the whole batch of every sequence. */
static int ds4_attn_seq(mr_model *m, ds4_state *st, int il, int n, int pos0, ds4_buf *B) {
    ds4_model *M = m->priv;
    ds4_layer *ly = &M->layers[il];
    ds4_lstate *ls = &st->l[il];
    const int D = M->D, H = M->H, r = ly->ratio;
    const int prefill = pos0 == 0, dump = mr_model_dumping(m);

    MR_PROF_BEGIN(tr);
    ds4_seq_tokens(m, M, ly, il, n, pos0, B);
    MR_PROF_END(tr, "rope+fp8");

    ds4_attn_job job = {.m = m, .M = M, .ly = ly, .ls = ls, .il = il, .n = n, .pos0 = pos0, .prefill = prefill,
                        .dump = dump, .n_ctx = st->n_ctx, .q = B->q, .kvb = B->kvb, .o = B->o, .st = st};
    if (r > 0) {
        if (r == 4) { job.qI = B->qI; job.wI = B->wI; }
        MR_PROF_BEGIN(tc);
        if (ds4_seq_compress(m, M, ly, ls, il, n, pos0, B)) {
            mr_set_error("deepseek4: out of memory");
            return -1;
        }
        if (prefill) {
            job.comp32 = B->comp32;
            if (r == 4) job.icomp32 = B->icomp32;
        }
        MR_PROF_END(tc, "compressor");
        if (r == 4 && dump) {
            job.topk_out = B->topk;
            job.scores_out = mr_calloc((size_t)n * (size_t)((pos0 + n) / 4) + 1, sizeof(float));
        }
    }
    {
        const int64_t last = pos0 + n;
        const int max_comp = r ? (int)(r == 4 && last / 4 > M->topk ? M->topk : last / r) : 0;
        job.nvis_max = r ? (int)(last / r) : 0;
        job.max_keys = M->W + max_comp + (M->noncausal ? n : 0);
        /* keys are F16 values when they come from an F16 cache: always, unless MOERUN_DS4_PREFILL_F32
         * asks for the reference's F32 keys in a prefill's compressed layers */
        job.f16 = M->kv_f16 && (r == 0 || !prefill || !M->prefill_f32);
        if (ds4_attn_run(m, &job)) { free(job.scores_out); return -1; }
    }
    ds4_seq_dump_indexer(m, M, il, n, pos0, &job);
    free(job.scores_out);
    MR_PROF_BEGIN(to);
    /* raw window cache: the batch's last W positions */
    for (int t = n > ls->raw.cap ? n - (int)ls->raw.cap : 0; t < n; t++) ds4_rows_put(&ls->raw, (pos0 + t) % ls->raw.cap, B->kv + (int64_t)t * D);
    DUMP("kqv_out", il, B->o, (int64_t)H * D, n);
    /* output: inverse RoPE at the query position, grouped low-rank projection (§3.8) */
    ds4_orope_job oj = {M, ly, pos0, B->o};
    ds4_pfor(m, n, ds4_orope_item, &oj);
    MR_PROF_END(to, "attn_misc");
    return 0;
}

/* the attention half of layer il for the batch (token t of session st[t] at position pos[t]): X
 * [n][Nh*d] updated in place (via Xt scratch) */
static int ds4_attention(mr_model *m, ds4_state *const *st, const int *pos, int il, int n, float *X, ds4_buf *B) {
    ds4_model *M = m->priv;
    ds4_layer *ly = &M->layers[il];
    const int d = M->d, D = M->D, H = M->H, r = ly->ratio, Nh = M->Nh;
    const int64_t hd = (int64_t)Nh * d;
    const int dump = mr_model_dumping(m);


    if (ds4_hc_pre(m, M, "attn", il, &ly->hc_attn_fn, ly->hc_attn_scale, ly->hc_attn_base, ly->attn_norm, X, n, B)) return -1;

    /* projections of the normed input (§3.3, §3.6.1, §3.7): one dispatch */
    {
        ds4_mm mm[8];
        int k = 0;
        mm[k++] = (ds4_mm){&ly->q_a, B->a, 0, B->qa, 0};
        mm[k++] = (ds4_mm){&ly->kv, B->a, 0, B->kv, 0};
        if (r > 0) {
            mm[k++] = (ds4_mm){&ly->c_kv, B->a, 0, B->ckv, 0};
            mm[k++] = (ds4_mm){&ly->c_gate, B->a, 0, B->csc, 0};
        }
        if (r == 4) {
            mm[k++] = (ds4_mm){&ly->ic_kv, B->a, 0, B->ikv, 0};
            mm[k++] = (ds4_mm){&ly->ic_gate, B->a, 0, B->isc, 0};
            mm[k++] = (ds4_mm){&ly->i_proj, B->a, 0, B->wI, 0};
        }
        if (ds4_matmuls(m, "mm attn_in", mm, k, n)) return -1;
    }
    DUMP("q_lora", il, B->qa, M->rq, n);
    MR_PROF_BEGIN(tn);
    for (int t = 0; t < n; t++) mr_rms_norm(B->qa + (int64_t)t * M->rq, B->qa + (int64_t)t * M->rq, ly->q_a_norm, M->rq, M->eps);
    MR_PROF_END(tn, "norms");
    DUMP("q_lora_norm", il, B->qa, M->rq, n);
    {
        ds4_mm mm[2] = {{&ly->q_b, B->qa, 0, B->q, 0}, {&ly->i_qb, B->qa, 0, B->qI, 0}};
        if (ds4_matmuls(m, "mm q_b", mm, r == 4 ? 2 : 1, n)) return -1;
    }

    /* one run per sequence's consecutive positions (a single-sequence batch is one run), in batch
     * order: a session's runs come in position order, so each sees the state its earlier ones left */
    for (int t0 = 0, t1; t0 < n; t0 = t1) {
        for (t1 = t0 + 1; t1 < n && st[t1] == st[t0] && pos[t1] == pos[t1 - 1] + 1;) t1++;
        ds4_buf Br = ds4_buf_at(B, M, r, t0);
        if (ds4_attn_seq(m, st[t0], il, t1 - t0, pos[t0], &Br)) return -1;
    }

    {
        const int64_t Dg = (int64_t)(H / M->G) * D;
        const size_t grow = mr_row_size(ly->out_a.type, Dg);
        mr_weight wa[DS4_MM_MAX];
        ds4_mm mm[DS4_MM_MAX];
        if (M->G > DS4_MM_MAX) { mr_set_error("deepseek4: %d output groups (at most %d)", M->G, DS4_MM_MAX); return -1; }
        for (int g = 0; g < M->G; g++) {
            wa[g] = ly->out_a;
            wa[g].data = (const uint8_t *)ly->out_a.data + grow * (size_t)g * M->ro;
            wa[g].rows = M->ro;
            mm[g] = (ds4_mm){&wa[g], B->o + g * Dg, (int64_t)H * D, B->z + (int64_t)g * M->ro, (int64_t)M->G * M->ro};
        }
        if (ds4_matmuls(m, "mm attn_output_a", mm, M->G, n)) return -1;
        ds4_mm mb = {&ly->out_b, B->z, 0, B->att, 0};
        if (ds4_matmuls(m, "mm attn_output_b", &mb, 1, n)) return -1;
    }
    DUMP("attn_out", il, B->att, d, n);
    ds4_hc_post(m, M, X, B->att, n, B);
    DUMP("hc_attn_post", il, X, hd, n);
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* FFN (§3.9) */

/* The next layer's experts guessed from this layer's FFN input (mr_moe_cfg.guess_next): a hash layer's
 * are exact (its table row for the row's token); otherwise the next router applied to the row's input
 * [d], top-k with its bias. Only decides what the pager reads early. */
typedef struct { mr_model *m; int il; const int32_t *tok; } ds4_guess;

static int ds4_guess_next(void *ctx, int row, const float *x, int *next_layer, int *ids, int n_max) {
    const ds4_guess *gc = ctx;
    ds4_model *M = gc->m->priv;
    const int l1 = gc->il + 1, K = M->K;
    if (l1 >= M->L || K > n_max) return 0;
    const ds4_layer *ly = &M->layers[l1];
    *next_layer = l1;
    if (ly->tid2eid) {
        const int32_t tok = gc->tok[row];
        if (tok < 0 || tok >= M->V) return 0;
        for (int j = 0; j < K; j++) ids[j] = ly->tid2eid[(int64_t)tok * K + j];
        return K;
    }
    float lg[1024]; /* [E]: the loader refuses more than 1024 experts */
    int32_t sel[64];
    float w[64];
    const mr_moe_cfg cfg = {.n_expert = M->E, .n_used = K, .gating = M->gating, .norm_w = M->norm_w,
                            .w_scale = M->ws};
    int rc = mr_model_matmul(gc->m, &ly->gate_inp, x, 1, lg) || mr_moe_route(&cfg, lg, ly->exp_bias, NULL, 1, sel, w) ? -1 : K;
    for (int j = 0; j < K && rc > 0; j++) ids[j] = sel[j];
    return rc;
}

/* the FFN half of layer il (§3.9) */
static int ds4_ffn(mr_model *m, int il, const int32_t *tok, int n, float *X, ds4_buf *B, mr_scratch *moe_ws) {
    ds4_model *M = m->priv;
    ds4_layer *ly = &M->layers[il];
    const int Nh = M->Nh, K = M->K;
    const int64_t hd = (int64_t)Nh * M->d;
    if (ds4_hc_pre(m, M, "ffn", il, &ly->hc_ffn_fn, ly->hc_ffn_scale, ly->hc_ffn_base, ly->ffn_norm, X, n, B)) return -1;
    ds4_guess gc = {m, il, tok};
    const mr_moe_cfg cfg = {.n_expert = M->E, .n_used = K, .gating = M->gating, .norm_w = M->norm_w,
                            .w_scale = M->ws, .weight_before_down = 1, .clamp = ly->lim, .guess_next = ds4_guess_next,
                            .guess_ctx = &gc, .hash_routed = ly->tid2eid != NULL};
    /* hash layers: the token's experts from tid2eid [V][K] (weights still from the scores); others:
     * top-k of the scores plus exp_probs_b. Shared expert: clamped at
     * swiglu_clamp_shexp (official, mainline; absent: the routed clamp), not at all in the fork (§8). */
    const mr_moe_layer ml = {.router = &ly->gate_inp, .sel_bias = ly->exp_bias, .tok_experts = ly->tid2eid, .tok = tok,
                             .sh_gate = &ly->sh_gate, .sh_up = &ly->sh_up, .sh_down = &ly->sh_down,
                             .sh_clamp = M->sh_clamp ? ly->lim_sh : 0.0f};
    const mr_moe_buf mb = {.logits = B->logits, .w = B->w, .g = B->sg, .u = B->su, .sh = B->sh, .sel = B->sel, .ws = moe_ws};
    if (mr_moe_block(m, il, &cfg, &ml, B->a, n, &mb, B->moe, NULL)) return -1;
    ds4_hc_post(m, M, X, B->moe, n, B);
    mr_model_dump(m, "hc_ffn_post", il, X, hd, n);
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* one batch */

/* The batch's buffers (and the embedding rows X, one token's embedding e) carved from the session's
 * scratch (mr_scratch in base/base.h): it grows to the largest batch, then an eval allocates none of
 * them. Every buffer keeps 16 bytes of slack past its end as before (kernels may read a vector past
 * a row's end). */
static int ds4_buf_carve(const ds4_model *M, ds4_state *st, int n, ds4_buf *B, float **X, float **e) {
    memset(B, 0, sizeof *B);
    const int64_t hd = (int64_t)M->Nh * M->d, mix = (2 + M->Nh) * M->Nh, N = n;
    const int64_t ncomp = n / 4 + 1;
    int64_t att = M->d > M->ro ? M->d : M->ro;
    mr_scratch *sc = &st->scratch;
    int r;
#define T(p, cnt) ((p) = mr_scratch_take(sc, sizeof(*(p)) * (size_t)(cnt) + 16))
    do {
        mr_scratch_begin(sc);
        T(B->zn, N * hd);
        T(B->mixes, N * mix);
        T(B->pre, N * M->Nh);
        T(B->post, N * M->Nh);
        T(B->comb, N * M->Nh * M->Nh);
        T(B->y, N * M->d);
        T(B->a, N * M->d);
        T(B->qa, N * M->rq);
        T(B->q, N * M->H * M->D);
        T(B->kv, N * M->D);
        T(B->kvb, N * M->D);
        T(B->o, N * M->H * M->D);
        T(B->z, N * M->G * M->ro);
        T(B->att, N * att);
        T(B->Xt, N * hd);
        T(B->ckv, N * 2 * M->D);
        T(B->csc, N * 2 * M->D);
        T(B->ikv, N * 2 * M->Di + 1);
        T(B->isc, N * 2 * M->Di + 1);
        T(B->comp32, ncomp * M->D);
        T(B->icomp32, ncomp * M->Di + 1);
        T(B->qI, N * M->Hi * M->Di + 1);
        T(B->wI, N * M->Hi + 1);
        T(B->logits, N * M->E);
        T(B->w, N * M->K);
        T(B->moe, N * M->d);
        T(B->sg, N * M->Fs);
        T(B->su, N * M->Fs);
        T(B->sh, N * M->d);
        T(B->sel, N * M->K);
        T(B->topk, N * M->topk + 1);
        T(*X, N * hd);
        T(*e, M->d);
    } while ((r = mr_scratch_end(sc)) == 1);
#undef T
    if (r < 0) { mr_set_error("deepseek4: out of memory for a batch of %d tokens", n); return -1; }
    return 0;
}

typedef struct { const ds4_model *M; const float *X; float *zn; const float *mixes; float *y; } ds4_head_job;
static void ds4_head_item(void *arg, long t) {
    ds4_head_job *j = arg;
    const ds4_model *M = j->M;
    const int Nh = M->Nh, d = M->d;
    float w[DS4_MAX_HC];
    ds4_hc_head_weights(w, j->mixes + t * Nh, M->out_hc_scale[0], M->out_hc_base, Nh, M->eps_hc);
    ds4_hc_combine(j->y + t * d, j->X + t * (int64_t)Nh * d, w, Nh, d);
}

/* HC head, norm and LM head for no rows of X [no][Nh*d] (§3.2, §3.10): the trunk's with output_norm
 * and output, the MTP block's with its shared head norm and head; pre (may be NULL): [no][d] the HC
 * head's output before the norm (a DSpark drafter's confidence input) */
static int ds4_head(mr_model *m, const ds4_model *M, const float *X, int no, ds4_buf *B, const float *norm,
                    const mr_weight *head, float *logits, float *pre) {
    const int d = M->d, dump = mr_model_dumping(m);
    MR_PROF_BEGIN(th0);
    ds4_hc_job nj = {.M = M, .X = X, .zn = B->zn};
    ds4_pfor(m, no, ds4_hc_norm_item, &nj);
    MR_PROF_END(th0, "hc_head");
    if (mr_model_matmul(m, &M->out_hc_fn, B->zn, no, B->mixes)) return -1;
    MR_PROF_BEGIN(th1);
    ds4_head_job hj = {M, X, B->zn, B->mixes, B->y};
    ds4_pfor(m, no, ds4_head_item, &hj);
    DUMP("result_hc", -1, B->y, d, no);
    if (pre) memcpy(pre, B->y, sizeof(float) * (size_t)d * (size_t)no);
    for (int t = 0; t < no; t++) mr_rms_norm(B->y + (int64_t)t * d, B->y + (int64_t)t * d, norm, d, M->eps);
    MR_PROF_END(th1, "hc_head");
    DUMP("result_norm", -1, B->y, d, no);
    if (mr_model_matmul(m, head, B->y, no, logits)) return -1;
    DUMP("result_output", -1, logits, M->V, no);
    return 0;
}

/* A DSpark drafter's taps (ds4_draft_attach): each session's ring, made at its first evaluation after
 * the drafter was attached (positions before it have none: tap_from) */
static int ds4_tap_rings(const ds4_model *M, ds4_state *const *st, const int *pos, int n) {
    for (int t = 0; t < n; t++) {
        ds4_state *s = st[t];
        if (s->tap) continue;
        if (!(s->tap = mr_calloc((size_t)M->tap_cap * (size_t)M->n_taps * (size_t)M->d, sizeof(float)))) {
            mr_set_error("deepseek4: out of memory for the DSpark taps");
            return -1;
        }
        s->tap_from = pos[t];
    }
    return 0;
}

/* the mean of the Nh streams of X [n][Nh*d] at layer il's input (mainline's dsv4_hc_mean: summed in
 * stream order, times 1/Nh), into each session's tap ring when il is a tap layer */
static void ds4_taps(const ds4_model *M, ds4_state *const *st, const int *pos, int il, int n, const float *X) {
    const int k = M->tap_at[il], d = M->d, Nh = M->Nh;
    if (k < 0) return;
    const float inv = 1.0f / (float)Nh;
    for (int t = 0; t < n; t++) {
        ds4_state *s = st[t];
        const float *x = X + (int64_t)t * Nh * d;
        float *dst = s->tap + ((int64_t)(pos[t] % M->tap_cap) * M->n_taps + k) * d;
        for (int i = 0; i < d; i++) {
            float acc = x[i];
            for (int h = 1; h < Nh; h++) acc += x[(int64_t)h * d + i];
            dst[i] = acc * inv;
        }
        if (pos[t] < s->h_low) s->h_low = pos[t];
    }
}

/* One forward pass over n tokens: token t of session st[t] at position pos[t] (a session's tokens in
 * position order, following what it holds). The per-token work (hyper-connections, every weight
 * product, the routed experts through the expert engine, the head) runs over all n rows, so tokens
 * of several sessions share each weight read; the attention's per-sequence work runs per run of
 * consecutive positions (ds4_attn_seq). The batch's buffers come from the first session's scratch
 * (evaluations of a model do not overlap). */
static int ds4_forward(mr_model *m, ds4_state *const *st, const int *pos, const int32_t *tok, int n, float *logits,
                       int all_logits, const uint8_t *want) {
    ds4_model *M = m->priv;
    const int d = M->d, Nh = M->Nh;
    const int64_t hd = (int64_t)Nh * d;
    ds4_buf B;
    float *X = NULL, *e = NULL;
    int rc = -1;
    for (int t = 0; t < n; t++)
        if (pos[t] >= st[t]->n_ctx) {
            mr_set_error("deepseek4: position %d is beyond the session context %d", pos[t], st[t]->n_ctx);
            return -1;
        }
    if (ds4_buf_carve(M, st[0], n, &B, &X, &e)) return -1;
    MR_PROF_BEGIN(tem);
    /* embedding copied into every stream (§3.0) */
    for (int t = 0; t < n; t++) {
        if (mr_tensor_get_row(M->tok_embd, tok[t], e)) goto done;
        for (int h = 0; h < Nh; h++) memcpy(X + t * hd + (int64_t)h * d, e, sizeof(float) * (size_t)d);
    }
    MR_PROF_END(tem, "embed");
    if (M->n_taps && ds4_tap_rings(M, st, pos, n)) goto done;
    for (int il = 0; il < M->L; il++) {
        if (M->n_taps) ds4_taps(M, st, pos, il, n, X);
        if (ds4_attention(m, st, pos, il, n, X, &B)) goto done;
        if (ds4_ffn(m, il, tok, n, X, &B, &st[0]->moe_ws)) goto done;
    }
    if (M->n_taps) ds4_taps(M, st, pos, M->L, n, X);
    for (int t = 0; M->keep_h && t < n; t++) { /* the MTP block's input pairs (ds4_mtp_draft) */
        ds4_state *s = st[t];
        memcpy(s->h + (int64_t)(pos[t] % s->hcap) * hd, X + t * hd, sizeof(float) * (size_t)hd);
        s->htok[pos[t] % s->hcap] = tok[t];
        if (pos[t] < s->h_low) s->h_low = pos[t];
    }
    int t0 = all_logits ? 0 : n - 1, no = n - t0;
    if (logits && want) { /* the wanted rows moved to the front (X is not read again) */
        t0 = no = 0;
        for (int t = 0; t < n; t++)
            if (want[t]) {
                if (no != t) memmove(X + no * hd, X + t * hd, sizeof(float) * (size_t)hd);
                no++;
            }
    }
    if (logits && no && ds4_head(m, M, X + t0 * hd, no, &B, M->out_norm, &M->output, logits, NULL)) goto done;
    rc = 0;
done:
    return rc;
}

/* Long batches are evaluated in pieces of DS4_MAX_BATCH tokens (the scratch grows with the batch:
 * for V4-Flash q and the attention output alone are 256 KiB per token). Every path computes the same
 * numbers (see the top of load.c), so the split does not change the logits. */
#define DS4_MAX_BATCH 256
/* an MTP sidecar has no trunk to run */
static int ds4_no_trunk(const mr_model *m) {
    const ds4_model *M = m->priv;
    if (!M->sidecar && !M->dspark) return 0;
    mr_set_error("%s: %s has no trunk layers: it only drafts for the main model's sessions", m->path,
                 M->dspark ? "a DSpark drafter" : "an MTP sidecar");
    return -1;
}

int ds4_eval(mr_model *m, void *stp, const int32_t *tok, int n, int pos0, float *logits, int all_logits) {
    const int nv = ((ds4_model *)m->priv)->V;
    if (ds4_no_trunk(m)) return -1;
    ds4_state *st[DS4_MAX_BATCH];
    int pos[DS4_MAX_BATCH];
    for (int i = 0; i < n; i += DS4_MAX_BATCH) {
        const int len = n - i < DS4_MAX_BATCH ? n - i : DS4_MAX_BATCH, last = i + len == n;
        float *lg = !logits ? NULL : all_logits ? logits + (size_t)i * (size_t)nv : last ? logits : NULL;
        for (int t = 0; t < len; t++) { st[t] = stp; pos[t] = pos0 + i + t; }
        if (ds4_forward(m, st, pos, tok + i, len, lg, all_logits, NULL)) return -1;
        ((ds4_state *)stp)->n_past = pos0 + i + len;
    }
    return 0;
}

int ds4_eval_multi(mr_model *m, void *const *stp, const int *pos, const int32_t *tok, int n, const uint8_t *want,
                   float *logits) {
    const int nv = ((ds4_model *)m->priv)->V;
    if (ds4_no_trunk(m)) return -1;
    size_t row = 0; /* logits rows written by the earlier pieces */
    for (int i = 0; i < n; i += DS4_MAX_BATCH) {
        const int len = n - i < DS4_MAX_BATCH ? n - i : DS4_MAX_BATCH;
        if (ds4_forward(m, (ds4_state *const *)stp + i, pos + i, tok + i, len, logits ? logits + row * (size_t)nv : NULL, 1,
                        want ? want + i : NULL))
            return -1;
        for (int t = i; t < i + len; t++) row += !want || want[t];
        for (int t = i; t < i + len; t++) ((ds4_state *)stp[t])->n_past = pos[t] + 1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------- */
/* the MTP block (mainline llama.cpp's deepseek4 graph_mtp; drafts for speculative decoding) */

/* The block over n tokens of session st at positions pos0..pos0+n-1, token t paired with the streams
 * h [n][Nh*d] of the position before: per stream j, x_j = eh_proj [enorm(embed(tok)); hnorm(h_j)]
 * (the two halves in that order, {2d -> d}), then a ratio-0 layer (layers[L]: its window ring in
 * st->l[L]) through the trunk's attention and FFN, then the trunk's HC head with the block's head norm
 * and head. logits NULL: only the attention, whose window ring rows are all a later position reads.
 * hout [n][Nh*d] (with logits): the block's output streams, the next step's h. */
static int ds4_mtp_run(mr_model *m, ds4_state *st, const int32_t *tok, int n, int pos0, const float *h, float *logits,
                       float *hout) {
    ds4_model *M = m->priv;
    const int d = M->d, Nh = M->Nh;
    const int64_t hd = (int64_t)Nh * d;
    ds4_buf B;
    float *X, *e;
    if (ds4_buf_carve(M, st, n, &B, &X, &e)) return -1;
    float *cat = mr_malloc(sizeof(float) * (size_t)(2 * hd * n) + 16);
    ds4_state **stv = mr_malloc(sizeof *stv * (size_t)n);
    int *pos = mr_malloc(sizeof *pos * (size_t)n), rc = -1;
    if (!cat || !stv || !pos) { mr_set_error("deepseek4: out of memory for the MTP block"); goto done; }
    for (int t = 0; t < n; t++) {
        stv[t] = st;
        pos[t] = pos0 + t;
        if (mr_tensor_get_row(M->mtp_embd, tok[t], e)) goto done;
        float *c0 = cat + (int64_t)t * 2 * hd;
        mr_rms_norm(c0, e, M->enorm, d, M->eps);
        for (int j = 0; j < Nh; j++) {
            float *cj = c0 + (int64_t)j * 2 * d;
            if (j) memcpy(cj, c0, sizeof(float) * (size_t)d);
            mr_rms_norm(cj + d, h + t * hd + (int64_t)j * d, M->hnorm, d, M->eps);
        }
    }
    if (mr_model_matmul(m, &M->eh_proj, cat, n * Nh, X)) goto done; /* X [n][Nh][d] */
    if (ds4_attention(m, stv, pos, M->L, n, X, &B)) goto done;
    if (logits) {
        if (ds4_ffn(m, M->L, tok, n, X, &B, &st->moe_ws)) goto done;
        if (hout) memcpy(hout, X, sizeof(float) * (size_t)(hd * n));
        if (ds4_head(m, M, X, n, &B, M->mtp_norm, &M->mtp_head, logits, NULL)) goto done;
    }
    rc = 0;
done:
    free(cat);
    free(stv);
    free(pos);
    return rc;
}

static int32_t ds4_argmax(const float *l, int n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++) if (l[i] > l[b]) b = i;
    return b;
}

/* mr_session_mtp_draft: the trunk's streams and tokens from (m, st), the block of (mm, mst): the same
 * model and state for a bundled block, an MTP sidecar's otherwise. Catch-up: the block's ring gets the
 * positions evaluated since its last call
 * (at most the window before n_past: older rows are never read again), each the token at q with the
 * trunk's streams at q - 1 (zero before position 0), as mainline's draft-mtp driver feeds it after
 * every target batch. Then the chain: step i at position n_past + i, the previous step's output
 * streams (step 0: the trunk's at n_past - 1), greedy. The chain's ring rows are left behind as
 * scratch: mtp_past stays n_past, so the next catch-up writes those positions first. */
int ds4_mtp_draft(mr_model *m, void *stp, mr_model *mm, void *mstp, int32_t last, int kmax, int32_t *out,
                  float *logits, float *conf) {
    const ds4_model *M = m->priv, *MM = mm->priv;
    if (MM->dspark) return ds4_dspark_draft(m, stp, mm, mstp, last, kmax, out, logits, conf);
    for (int i = 0; conf && i < kmax; i++) conf[i] = -1.0f; /* an MTP block has no confidence head */
    ds4_state *st = stp, *mst = mstp;
    const int n = st->n_past, V = M->V;
    const int64_t hd = (int64_t)M->Nh * M->d;
    if (!M->keep_h) {
        mr_set_error("%s: load the main model with mr_model_params.mtp = 1 so that its sessions keep the hidden "
                     "states the MTP block reads", m->path);
        return -1;
    }
    if (MM->d != M->d || MM->Nh != M->Nh || MM->V != M->V) {
        mr_set_error("%s: the MTP block (width %d, %d streams, %d tokens) does not fit %s (%d, %d, %d)", mm->path, MM->d,
                     MM->Nh, MM->V, m->path, M->d, M->Nh, M->V);
        return -1;
    }
    if (kmax > 64) kmax = 64;
    if (mst->mtp_past > n) mst->mtp_past = n; /* a sidecar's state does not see the trunk cut back */
    int from = mst->mtp_past < st->h_low ? mst->mtp_past : st->h_low;
    if (from < n - MM->W) from = n - MM->W;
    if (from < 0) from = 0;
    const int nc = n - from;
    float *h = mr_calloc((size_t)(hd * (nc + 2)), sizeof(float)), *lg = mr_malloc(sizeof(float) * (size_t)V);
    int32_t *tk = mr_malloc(sizeof(int32_t) * (size_t)(nc + 1));
    int rc = -1;
    if (!h || !lg || !tk) { mr_set_error("deepseek4: out of memory for MTP drafts"); goto done; }
    for (int q = from; q < n; q++) {
        tk[q - from] = st->htok[q % st->hcap];
        if (q > 0) memcpy(h + (q - from) * hd, st->h + (int64_t)((q - 1) % st->hcap) * hd, sizeof(float) * (size_t)hd);
    }
    if (nc > 0 && ds4_mtp_run(mm, mst, tk, nc, from, h, NULL, NULL)) goto done;
    mst->mtp_past = st->h_low = n;
    float *hc = h, *hn = h + hd;
    memset(hc, 0, sizeof(float) * (size_t)hd);
    if (n > 0) memcpy(hc, st->h + (int64_t)((n - 1) % st->hcap) * hd, sizeof(float) * (size_t)hd);
    for (int i = 0; i < kmax; i++) {
        const int32_t t = i ? out[i - 1] : last;
        float *l = logits ? logits + (size_t)i * (size_t)V : lg;
        if (ds4_mtp_run(mm, mst, &t, 1, n + i, hc, l, hn)) goto done;
        out[i] = ds4_argmax(l, V);
        float *x = hc; hc = hn; hn = x;
    }
    rc = kmax;
done:
    free(h);
    free(lg);
    free(tk);
    return rc;
}

/* ---------------------------------------------------------------------------------------------- */
/* a DSpark drafter (mainline llama.cpp's dflash graph_dsv4 under common/speculative.cpp's draft-dspark
 * driver) */

/* KV injection of positions from..from+nc-1 into the stages' window rings (the embedding batch of
 * graph_dsv4): the target's taps [nc][n_tap*d] (from st's ring) through fc and enc.output_norm, then per
 * stage kv_norm(attn_kv g) with the stage's RoPE on the last dims (and FP8 where the graph has it),
 * stored like the stage's own window rows; no attention runs. */
static int ds4_dspark_inject(mr_model *mm, const ds4_model *M, const ds4_state *st, ds4_state *mst, int from, int nc) {
    const ds4_model *MM = mm->priv;
    const int d = MM->d, D = MM->D, nt = MM->n_tap;
    float *feat = mr_malloc(sizeof(float) * (size_t)nc * (size_t)(nt * d) + 16);
    float *g = mr_malloc(sizeof(float) * (size_t)nc * (size_t)d + 16), *kv = mr_malloc(sizeof(float) * (size_t)nc * (size_t)D + 16);
    int rc = -1;
    if (!feat || !g || !kv) { mr_set_error("deepseek4: out of memory for the DSpark injection"); goto done; }
    for (int q = 0; q < nc; q++)
        memcpy(feat + (int64_t)q * nt * d, st->tap + (int64_t)((from + q) % M->tap_cap) * nt * d, sizeof(float) * (size_t)(nt * d));
    if (mr_model_matmul(mm, &MM->fc, feat, nc, g)) goto done;
    for (int q = 0; q < nc; q++) mr_rms_norm(g + (int64_t)q * d, g + (int64_t)q * d, MM->enc_norm, d, MM->eps);
    for (int il = 0; il < MM->L; il++) {
        const ds4_layer *ly = &MM->layers[il];
        ds4_rows *ring = &mst->l[il].raw;
        if (mr_model_matmul(mm, &ly->kv, g, nc, kv)) goto done;
        for (int q = 0; q < nc; q++) {
            float cs[4096], *r = kv + (int64_t)q * D;
            mr_rms_norm(r, r, ly->kv_norm, D, MM->eps);
            ds4_rope_cache(&ly->rope, from + q, 0, cs);
            ds4_rope_tail(r, D, MM->R, cs);
            if (MM->fp8) ds4_fp8_sim(r, D, MM->R);
            ds4_rows_put(ring, (from + q) % ring->cap, r);
        }
    }
    rc = 0;
done:
    free(feat); free(g); free(kv);
    return rc;
}

/* The Markov head over the block's k rows (base logits lg [k][V], pre-norm states pre [k][d]), in place:
 * row i gets markov_w2 markov_w1[prev] added, prev = the anchor for row 0, else row i-1's argmax; the
 * confidence of row i is sigmoid(conf_proj [pre_i; markov_w1[prev]] + b). out: each row's argmax. */
static int ds4_dspark_markov(mr_model *mm, int32_t last, int k, float *lg, const float *pre, int32_t *out, float *conf) {
    const ds4_model *MM = mm->priv;
    const int d = MM->d, R = MM->R_mk, V = MM->V;
    float *feat = mr_malloc(sizeof(float) * (size_t)(d + R) + 16), *bias = mr_malloc(sizeof(float) * (size_t)V + 16);
    int rc = -1;
    int32_t prev = last;
    if (!feat || !bias) { mr_set_error("deepseek4: out of memory for the Markov head"); goto done; }
    for (int i = 0; i < k; i++) {
        float *row = lg + (int64_t)i * V;
        if (mr_tensor_get_row(MM->markov_w1, prev, feat + d) || mr_model_matmul(mm, &MM->markov_w2, feat + d, 1, bias)) goto done;
        for (int v = 0; v < V; v++) row[v] += bias[v];
        if (conf && MM->conf_w.data) {
            float c;
            memcpy(feat, pre + (int64_t)i * d, sizeof(float) * (size_t)d);
            if (mr_model_matmul(mm, &MM->conf_w, feat, 1, &c)) goto done;
            conf[i] = mr_sigmoid(c + (MM->conf_b ? MM->conf_b[0] : 0.0f));
        } else if (conf) {
            conf[i] = -1.0f;
        }
        out[i] = prev = ds4_argmax(row, V);
    }
    rc = 0;
done:
    free(feat); free(bias);
    return rc;
}

/* The block [last, mask x (k-1)] at positions n..n+k-1 through the stages: embedding (the drafter's or
 * the target's) copied into every stream, each stage's attention (window ring + the whole block) and
 * MoE, the drafter's HC head, output_norm and head (its own or the target's): base logits lg [k][V] and
 * the pre-norm states pre [k][d] */
static int ds4_dspark_block(const ds4_model *M, mr_model *mm, ds4_state *mst, int32_t last, int n, int k, float *lg,
                            float *pre) {
    const ds4_model *MM = mm->priv;
    const int d = MM->d, Nh = MM->Nh;
    const int64_t hd = (int64_t)Nh * d;
    const mr_gguf_tensor *emb = MM->tok_embd ? MM->tok_embd : M->tok_embd;
    const mr_weight *head = MM->output.data ? &MM->output : &M->output;
    ds4_state *stv[64];
    int pos[64];
    int32_t tok[64];
    ds4_buf B;
    float *X, *e;
    if (ds4_buf_carve(MM, mst, k, &B, &X, &e)) return -1;
    for (int t = 0; t < k; t++) {
        stv[t] = mst;
        pos[t] = n + t;
        tok[t] = t ? MM->mask_tok : last;
        if (mr_tensor_get_row(emb, tok[t], e)) return -1;
        for (int h = 0; h < Nh; h++) memcpy(X + t * hd + (int64_t)h * d, e, sizeof(float) * (size_t)d);
    }
    for (int il = 0; il < MM->L; il++)
        if (ds4_attention(mm, stv, pos, il, k, X, &B) || ds4_ffn(mm, il, tok, k, X, &B, &mst->moe_ws)) return -1;
    return ds4_head(mm, MM, X, k, &B, MM->out_norm, head, lg, pre);
}

/* mr_session_mtp_draft with a DSpark drafter (mm, mst) for the target (m, st) at n = n_past: the taps of
 * the positions evaluated since the drafter's last call (at most its window before n: older rows are
 * never read) are injected, then one block of k = min(kmax, block_size) drafts: row i of the block at
 * position n + i predicts the token at n + i + 1 (mainline's anchor-first DSpark; no confidence cut, as
 * its default p_min 0). The block's ring rows are scratch: mtp_past stays n, the next injection writes
 * those positions first. */
int ds4_dspark_draft(mr_model *m, void *stp, mr_model *mm, void *mstp, int32_t last, int kmax, int32_t *out,
                     float *logits, float *conf) {
    const ds4_model *M = m->priv, *MM = mm->priv;
    ds4_state *st = stp, *mst = mstp;
    const int n = st->n_past, V = MM->V, k = kmax < MM->block ? kmax : MM->block;
    if (!M->n_taps || M->n_taps != MM->n_tap || (n > 0 && !st->tap)) {
        mr_set_error("%s: attach the DSpark drafter %s (mr_model_draft_attach) before evaluating the session, so that "
                     "it keeps the drafter's target-layer states", m->path, mm->path);
        return -1;
    }
    if (mst->mtp_past > n) mst->mtp_past = n; /* the drafter's state does not see the target cut back */
    int from = mst->mtp_past < st->h_low ? mst->mtp_past : st->h_low;
    if (from < n - MM->W) from = n - MM->W;
    if (from < st->tap_from || !st->tap) from = st->tap ? st->tap_from : n;
    if (from < 0) from = 0;
    float *lg = logits ? logits : mr_malloc(sizeof(float) * (size_t)k * (size_t)V + 16);
    float *pre = mr_malloc(sizeof(float) * (size_t)k * (size_t)MM->d + 16);
    int rc = -1;
    if (!lg || !pre) { mr_set_error("deepseek4: out of memory for DSpark drafts"); goto done; }
    if (n > from && ds4_dspark_inject(mm, M, st, mst, from, n - from)) goto done;
    mst->mtp_past = st->h_low = n;
    if (ds4_dspark_block(M, mm, mst, last, n, k, lg, pre) || ds4_dspark_markov(mm, last, k, lg, pre, out, conf)) goto done;
    rc = k;
done:
    if (lg != logits) free(lg);
    free(pre);
    return rc;
}
