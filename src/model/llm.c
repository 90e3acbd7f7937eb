/* Generic llama-like decoder (see llm.h). */
#include "model/llm.h"
#include "model/ffn.h"
#include "base/prof.h"
#include "quant/matmul.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mr_llm_read_hparams(mr_model *m, mr_llm *L, int rope_mode) {
    mr_decoder_hp hp;
    if (mr_read_decoder_hparams(m, &hp, rope_mode)) return -1;
    L->n_head = hp.n_head;
    L->n_head_kv = hp.n_head_kv;
    L->head_dim = hp.head_dim;
    L->n_ff = hp.n_ff;
    L->n_ff_exp = hp.n_ff_exp;
    L->eps = hp.eps;
    L->kq_scale = hp.kq_scale;
    L->rope = hp.rope;
    L->moe = hp.moe;
    return 0;
}

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

int mr_llm_load_tensors(mr_model *m, mr_llm *L) {
    const int64_t d = m->n_embd, hd = L->head_dim, nq = hd * L->n_head, nkv = hd * L->n_head_kv;
    L->tok_embd = mr_model_tensor(m, 1, 2, SHAPE(d, -1), "token_embd.weight");
    if (!L->tok_embd) return -1;
    m->n_vocab = (int)L->tok_embd->ne[1];
    const int64_t V = m->n_vocab;
    L->output_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "output_norm.weight"));
    const mr_gguf_tensor *out = mr_model_tensor(m, 0, 2, SHAPE(d, V), "output.weight");
    L->output = mr_model_weight(m, out ? out : L->tok_embd);
    const mr_gguf_tensor *ff = mr_model_tensor(m, 0, 1, SHAPE(L->rope.n_dims / 2), "rope_freqs.weight");
    if (ff) L->rope.freq_factors = mr_model_f32(m, ff);

    L->layers = mr_calloc((size_t)m->n_layer, sizeof *L->layers);
    mr_pager_layer *pl = mr_calloc((size_t)m->n_layer, sizeof *pl);
    if (!L->layers || !pl) { free(pl); mr_set_error("model: out of memory"); return -1; }
    const int64_t E = L->moe.n_expert, F = L->n_ff, Fe = L->n_ff_exp;
    int any_moe = 0;
    for (int i = 0; i < m->n_layer && !m->load_err; i++) {
        mr_llm_layer *l = &L->layers[i];
        l->attn_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "blk.%d.attn_norm.weight", i));
        const mr_gguf_tensor *qkv = mr_model_tensor(m, 0, 2, SHAPE(d, nq + 2 * nkv), "blk.%d.attn_qkv.weight", i);
        if (qkv) {
            l->wqkv = mr_model_weight(m, qkv);
            l->bqkv = mr_model_f32(m, mr_model_tensor(m, 0, 1, SHAPE(nq + 2 * nkv), "blk.%d.attn_qkv.bias", i));
        } else {
            l->wq = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, nq), "blk.%d.attn_q.weight", i));
            l->wk = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, nkv), "blk.%d.attn_k.weight", i));
            l->wv = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, nkv), "blk.%d.attn_v.weight", i));
            l->bq = mr_model_f32(m, mr_model_tensor(m, 0, 1, SHAPE(nq), "blk.%d.attn_q.bias", i));
            l->bk = mr_model_f32(m, mr_model_tensor(m, 0, 1, SHAPE(nkv), "blk.%d.attn_k.bias", i));
            l->bv = mr_model_f32(m, mr_model_tensor(m, 0, 1, SHAPE(nkv), "blk.%d.attn_v.bias", i));
        }
        l->wo = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(nq, d), "blk.%d.attn_output.weight", i));
        l->bo = mr_model_f32(m, mr_model_tensor(m, 0, 1, SHAPE(d), "blk.%d.attn_output.bias", i));
        if (L->qk_norm) {
            l->q_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(hd), "blk.%d.attn_q_norm.weight", i));
            l->k_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(hd), "blk.%d.attn_k_norm.weight", i));
        }
        l->ffn_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "blk.%d.%s.weight", i,
                                                      L->ffn_norm_name ? L->ffn_norm_name : "ffn_norm"));
        if (E == 0 || i < L->n_dense_lead) {
            l->ffn_gate = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, F), "blk.%d.ffn_gate.weight", i));
            l->ffn_up = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, F), "blk.%d.ffn_up.weight", i));
            l->ffn_down = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(F, d), "blk.%d.ffn_down.weight", i));
        } else {
            l->is_moe = 1;
            any_moe = 1;
            l->ffn_gate_inp = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, E), "blk.%d.ffn_gate_inp.weight", i));
            pl[i].mat[MR_PAGER_GATE] = mr_model_tensor(m, 1, 3, SHAPE(d, Fe, E), "blk.%d.ffn_gate_exps.weight", i);
            pl[i].mat[MR_PAGER_UP] = mr_model_tensor(m, 1, 3, SHAPE(d, Fe, E), "blk.%d.ffn_up_exps.weight", i);
            pl[i].mat[MR_PAGER_DOWN] = mr_model_tensor(m, 1, 3, SHAPE(Fe, d, E), "blk.%d.ffn_down_exps.weight", i);
            pl[i].n_used = L->moe.n_used;
            if (L->n_shared > 0) {
                const int64_t Fs = Fe * L->n_shared;
                l->sh_gate = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, Fs), "blk.%d.ffn_gate_shexp.weight", i));
                l->sh_up = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, Fs), "blk.%d.ffn_up_shexp.weight", i));
                l->sh_down = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(Fs, d), "blk.%d.ffn_down_shexp.weight", i));
            }
        }
    }
    int rc = m->load_err ? -1 : 0;
    if (!rc && any_moe) rc = mr_model_init_pager(m, pl);
    free(pl);
    return rc;
}

void mr_llm_free(mr_model *m) {
    mr_llm *L = m->priv;
    if (!L) return;
    free(L->layers);
    free(L->moe_bias);
    free(L);
    m->priv = NULL;
}

void mr_llm_state_free(mr_model *m, void *p) {
    mr_llm_state *s = p;
    if (!s) return;
    for (int i = 0; i < m->n_layer; i++) {
        if (s->k) free(s->k[i]);
        if (s->v) free(s->v[i]);
    }
    free(s->k);
    free(s->v);
    mr_scratch_free(&s->scratch);
    mr_scratch_free(&s->moe_ws);
    free(s);
}

void *mr_llm_state_new(mr_model *m, int n_ctx) {
    mr_llm *L = m->priv;
    mr_llm_state *s = mr_calloc(1, sizeof *s);
    if (!s) goto oom;
    s->n_ctx = n_ctx;
    s->kv_f16 = !m->params.kv_f32;
    s->kv_dim = (int64_t)L->n_head_kv * L->head_dim;
    s->k = mr_calloc((size_t)m->n_layer, sizeof(void *));
    s->v = mr_calloc((size_t)m->n_layer, sizeof(void *));
    if (!s->k || !s->v) goto oom;
    size_t bytes = (size_t)n_ctx * (size_t)s->kv_dim * (s->kv_f16 ? 2 : 4);
    for (int i = 0; i < m->n_layer; i++) {
        s->k[i] = mr_calloc(1, bytes);
        s->v[i] = mr_calloc(1, bytes);
        if (!s->k[i] || !s->v[i]) goto oom;
    }
    return s;
oom:
    mr_set_error("session: out of memory for a KV cache of %d positions", n_ctx);
    mr_llm_state_free(m, s);
    return NULL;
}

void mr_llm_state_reset(mr_model *m, void *st) { (void)m; (void)st; /* positions are overwritten */ }
/* The KV cache holds one row per position and later positions are simply overwritten. */
int mr_llm_state_truncate(mr_model *m, void *st, int n) { (void)m; (void)st; (void)n; return 0; }

/* snapshot regions (model.h): each layer's K then V rows [0, n_past) */
int mr_llm_state_io(mr_model *m, void *st, int n_past, mr_state_io *io) {
    mr_llm_state *s = st;
    const size_t bytes = (size_t)n_past * (size_t)s->kv_dim * (s->kv_f16 ? 2 : 4);
    for (int i = 0; i < m->n_layer; i++)
        if (io->fn(io, s->k[i], bytes) || io->fn(io, s->v[i], bytes)) return -1;
    return 0;
}

static void add_bias(float *x, const float *b, int64_t dim, int64_t n, int64_t stride) {
    if (!b) return;
    for (int64_t t = 0; t < n; t++)
        for (int64_t i = 0; i < dim; i++) x[t * stride + i] += b[i];
}

/* q/k RMSNorm, RoPE (one cos/sin cache per token for its q and k heads) and the K/V cache store of
 * tokens [8 ch, 8 ch + 8): every token is independent (token t goes to state st[t] at position
 * pos[t]), so chunks go over the pool */
typedef struct {
    const mr_llm *L;
    const mr_llm_layer *l;
    mr_llm_state *const *st;
    const int *pos;
    float *q, *k, *v;
    float *rope_cache;           /* [(n + 7) / 8][rope.n_dims]: one per chunk (chunks run in parallel) */
    int64_t qs, hd, nkv;
    int il, n;
} llm_qkr_job;

static void llm_qkr_chunk(void *arg, long ch) {
    const llm_qkr_job *j = arg;
    const mr_llm *L = j->L;
    const int64_t hd = j->hd, nkv = j->nkv;
    float *cache = j->rope_cache + ch * (int64_t)L->rope.n_dims; /* this chunk's cos/sin cache */
    for (int t = (int)ch * 8; t < j->n && t < (int)ch * 8 + 8; t++) {
        float *qt = j->q + t * j->qs, *kt = j->k + t * j->qs, *vt = j->v + t * j->qs;
        if (L->qk_norm) {
            for (int hh = 0; hh < L->n_head; hh++) mr_rms_norm(qt + hh * hd, qt + hh * hd, j->l->q_norm, hd, L->eps);
            for (int hh = 0; hh < L->n_head_kv; hh++) mr_rms_norm(kt + hh * hd, kt + hh * hd, j->l->k_norm, hd, L->eps);
        }
        mr_rope_cache(&L->rope, j->pos[t], 1.0f, cache);
        for (int hh = 0; hh < L->n_head; hh++) mr_rope_apply(&L->rope, cache, qt + hh * hd);
        for (int hh = 0; hh < L->n_head_kv; hh++) mr_rope_apply(&L->rope, cache, kt + hh * hd);
        mr_llm_state *s = j->st[t];
        const int64_t off = (int64_t)j->pos[t] * s->kv_dim;
        if (s->kv_f16) {
            mr_f32_to_f16_row((uint16_t *)s->k[j->il] + off, kt, nkv);
            mr_f32_to_f16_row((uint16_t *)s->v[j->il] + off, vt, nkv);
        } else {
            memcpy((float *)s->k[j->il] + off, kt, sizeof(float) * (size_t)nkv);
            memcpy((float *)s->v[j->il] + off, vt, sizeof(float) * (size_t)nkv);
        }
    }
}

/* q|k|v rows (stride nq + 2 nkv) of the n normed tokens h: one fused projection, or the separate ones
 * in one dispatch (h converted once) into temporaries att [n][nq] and kvt [2][n][nkv], then interleaved;
 * biases added. */
static int llm_qkv(mr_model *m, const mr_llm_layer *l, const float *h, int n, int64_t nq, int64_t nkv, float *qkv,
                   float *att, float *kvt) {
    const int64_t qs = nq + 2 * nkv;
    float *q = qkv, *k = qkv + nq, *v = qkv + nq + nkv;
    if (l->wqkv.data) {
        if (mr_model_matmul(m, &l->wqkv, h, n, qkv)) return -1;
        add_bias(qkv, l->bqkv, qs, n, qs);
    } else {
        MR_PROF_BEGIN(tp);
        const mr_matmul_task tk[3] = {{.w = &l->wq, .X = h, .ncols = n, .Y = att},
                                      {.w = &l->wk, .X = h, .ncols = n, .Y = kvt},
                                      {.w = &l->wv, .X = h, .ncols = n, .Y = kvt + n * nkv}};
        if (mr_model_matmul_many(m, tk, 3)) return -1;
        MR_PROF_END(tp, "mm attn_q+k+v");
        for (int t = 0; t < n; t++) {
            memcpy(q + t * qs, att + t * nq, sizeof(float) * (size_t)nq);
            memcpy(k + t * qs, kvt + t * nkv, sizeof(float) * (size_t)nkv);
            memcpy(v + t * qs, kvt + (n + t) * nkv, sizeof(float) * (size_t)nkv);
        }
        add_bias(q, l->bq, nq, n, qs);
        add_bias(k, l->bk, nkv, n, qs);
        add_bias(v, l->bv, nkv, n, qs);
    }
    return 0;
}

/* Logits of the wanted rows: want[t] != 0, or (want NULL) every token if all_logits, else the last;
 * normed into h row by row (the same as in any batch), then one product with the output matrix. */
static int llm_output(mr_model *m, const mr_llm *L, const float *x, float *h, int n, float *logits, int all_logits,
                      const uint8_t *want) {
    const int64_t d = m->n_embd;
    int nr = 0;
    for (int t = 0; t < n; t++)
        if (want ? want[t] != 0 : all_logits || t == n - 1) mr_rms_norm(h + (int64_t)nr++ * d, x + t * d, L->output_norm, d, L->eps);
    if (!nr) return 0;
    mr_model_dump(m, "result_norm", -1, h, d, nr);
    if (mr_model_matmul(m, &L->output, h, nr, logits)) return -1;
    mr_model_dump(m, "result_output", -1, logits, m->n_vocab, nr);
    return 0;
}

/* One forward pass over n tokens; token t belongs to state st[t] at position pos[t] (the tokens of
 * one state in order). Everything but RoPE/KV store and attention is per token, so tokens of several
 * sequences share every weight read (the experts of a MoE layer are read once for all of them).
 * The batch's buffers come from the first state's scratch (evaluations of a model do not overlap).
 * logits: the rows of the tokens with want[t] != 0 (a prompt chunk beside decode tokens needs at most
 * its last one: the output matrix is ~10% of a token's work on qwen3moe); want NULL: every token if
 * all_logits, else the last. */
static int llm_forward(mr_model *m, mr_llm_state *const *st, const int *pos, const int32_t *tok, int n, float *logits,
                       int all_logits, const uint8_t *want) {
    mr_llm *L = m->priv;
    mr_llm_state *s = st[0];
    const int64_t d = m->n_embd, hd = L->head_dim, nq = hd * L->n_head, nkv = hd * L->n_head_kv;
    const int64_t Fs = (int64_t)L->n_ff_exp * L->n_shared;
    const int64_t F = L->n_ff > L->n_ff_exp ? (L->n_ff > Fs ? L->n_ff : Fs) : (L->n_ff_exp > Fs ? L->n_ff_exp : Fs);
    const int K = L->moe.n_used, E = L->moe.n_expert;
    int rc = -1;
    /* buffers of this batch, carved from the session's scratch (mr_scratch in base.h) */
    float *x, *h, *qkv, *att, *kvt, *o, *o2 = NULL, *g, *u, *rl = NULL, *w = NULL, *rope_cache;
    int32_t *sel = NULL;
    const size_t f = sizeof(float), nn = (size_t)n;
    int sr;
    do {
        mr_scratch_begin(&s->scratch);
        x = mr_scratch_take(&s->scratch, f * nn * (size_t)d);
        h = mr_scratch_take(&s->scratch, f * nn * (size_t)d);
        qkv = mr_scratch_take(&s->scratch, f * nn * (size_t)(nq + 2 * nkv));
        att = mr_scratch_take(&s->scratch, f * nn * (size_t)nq);
        kvt = mr_scratch_take(&s->scratch, f * nn * (size_t)(2 * nkv)); /* k and v of the separate projections */
        o = mr_scratch_take(&s->scratch, f * nn * (size_t)d);
        if (L->n_shared) o2 = mr_scratch_take(&s->scratch, f * nn * (size_t)d); /* shared expert output */
        g = mr_scratch_take(&s->scratch, f * nn * (size_t)(F > 0 ? F : 1));
        u = mr_scratch_take(&s->scratch, f * nn * (size_t)(F > 0 ? F : 1));
        rope_cache = mr_scratch_take(&s->scratch, f * (nn + 7) / 8 * (size_t)L->rope.n_dims);
        if (E) {
            rl = mr_scratch_take(&s->scratch, f * nn * (size_t)E);
            sel = mr_scratch_take(&s->scratch, sizeof(int32_t) * nn * (size_t)K);
            w = mr_scratch_take(&s->scratch, f * nn * (size_t)K);
        }
    } while ((sr = mr_scratch_end(&s->scratch)) == 1);
    if (sr < 0) return -1; /* error set: out of memory for the batch's buffers */

    for (int t = 0; t < n; t++)
        if (mr_tensor_get_row(L->tok_embd, tok[t], x + t * d)) goto done;
    mr_model_dump(m, "inp_embd", -1, x, d, n);

    const int64_t qs = nq + 2 * nkv; /* row stride of the q|k|v buffer */
    for (int il = 0; il < m->n_layer; il++) {
        const mr_llm_layer *l = &L->layers[il];
        MR_PROF_BEGIN(tn);
        mr_rms_norm_rows(h, x, l->attn_norm, d, n, L->eps);
        MR_PROF_END(tn, "rms_norm");
        mr_model_dump(m, "attn_norm", il, h, d, n);
        float *q = qkv, *k = qkv + nq, *v = qkv + nq + nkv;
        if (llm_qkv(m, l, h, n, nq, nkv, qkv, att, kvt)) goto done;
        MR_PROF_BEGIN(tr);
        llm_qkr_job qj = {L, l, st, pos, q, k, v, rope_cache, qs, hd, nkv, il, n};
        mr_pool_run_chunks(n > 1 ? m->pool : NULL, llm_qkr_chunk, &qj, (n + 7) / 8);
        MR_PROF_END(tr, "qk_norm+rope+kv_store");
        mr_model_dump(m, "Qcur", il, q, nq, 1);
        mr_model_dump(m, "Kcur", il, k, nkv, 1);
        mr_model_dump(m, "Vcur", il, v, nkv, 1);
        MR_PROF_BEGIN(ta);
        /* one attention per run of consecutive positions of one sequence (a single-sequence batch is one run) */
        for (int t0 = 0, t1; t0 < n; t0 = t1) {
            for (t1 = t0 + 1; t1 < n && st[t1] == st[t0] && pos[t1] == pos[t1 - 1] + 1;) t1++;
            const mr_llm_state *sq = st[t0];
            mr_attn_args aa = {
                .n_q = t1 - t0, .pos0 = pos[t0], .n_head = L->n_head, .n_head_kv = L->n_head_kv, .head_dim = (int)hd,
                .scale = L->kq_scale, .window = l->window, .sinks = l->sinks, .Q = q + t0 * qs, .q_stride = qs,
                .K = sq->k[il], .V = sq->v[il], .kv_f16 = sq->kv_f16, .kv_stride = sq->kv_dim, .out = att + t0 * nq,
                .out_stride = nq, .ws = m->ws,
            };
            if (mr_attention(m->pool, &aa)) goto done;
        }
        MR_PROF_END(ta, "attention");
        mr_model_dump(m, "kqv_out", il, att, nq, n);
        if (mr_model_matmul(m, &l->wo, att, n, o)) goto done;
        add_bias(o, l->bo, d, n, d);
        mr_add(x, o, x, n * d);
        mr_model_dump(m, "ffn_inp", il, x, d, n);
        mr_rms_norm_rows(h, x, l->ffn_norm, d, n, L->eps);
        mr_model_dump(m, "ffn_norm", il, h, d, n);
        if (!l->is_moe) {
            if (mr_ffn(m, &l->ffn_gate, &l->ffn_up, &l->ffn_down, h, n, g, u, o)) goto done;
            mr_model_dump(m, "ffn_out", il, o, d, n);
            mr_add(x, o, x, n * d);
        } else {
            const int sh = l->sh_up.data != NULL;
            const mr_moe_layer ml = {.router = &l->ffn_gate_inp, .router_b = l->router_b, .sel_bias = l->probs_b,
                                     .sh_gate = sh ? &l->sh_gate : NULL, .sh_up = sh ? &l->sh_up : NULL,
                                     .sh_down = sh ? &l->sh_down : NULL};
            const mr_moe_buf mb = {.logits = rl, .w = w, .g = g, .u = u, .sh = o2, .sel = sel, .ws = &s->moe_ws};
            if (mr_moe_block(m, il, &L->moe, &ml, h, n, &mb, o, x)) goto done;
        }
        mr_model_dump(m, "l_out", il, x, d, n);
    }
    if (logits && llm_output(m, L, x, h, n, logits, all_logits, want)) goto done;
    rc = 0;
done:
    return rc;
}

int mr_llm_eval(mr_model *m, void *st, const int32_t *tok, int n, int pos0, float *logits, int all_logits) {
    mr_llm_state *s = st;
    /* per-token state and position arrays for the shared forward pass: on the stack for decode and
     * short batches (no allocation per decode step) */
    int pos_small[64] = {0};
    mr_llm_state *sts_small[64] = {0};
    int *pos = n <= 64 ? pos_small : mr_malloc(sizeof(int) * (size_t)n);
    mr_llm_state **sts = n <= 64 ? sts_small : mr_malloc(sizeof *sts * (size_t)n);
    int rc = -1;
    if (!pos || !sts) mr_set_error("eval: out of memory");
    else {
        for (int t = 0; t < n; t++) { pos[t] = pos0 + t; sts[t] = s; }
        rc = llm_forward(m, sts, pos, tok, n, logits, all_logits, NULL);
    }
    if (pos != pos_small) free(pos);
    if (sts != sts_small) free(sts);
    return rc;
}

int mr_llm_eval_multi(mr_model *m, void *const *st, const int *pos, const int32_t *tok, int n, const uint8_t *want,
                      float *logits) {
    return llm_forward(m, (mr_llm_state *const *)st, pos, tok, n, logits, 1, want);
}
