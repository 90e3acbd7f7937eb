/* qwen35moe (Qwen3.5 / Qwen3.6 MoE; the reference fork's llm_build_qwen35moe): a hybrid of gated
 * delta-net linear attention and gated full attention, every layer with routed experts and a gated
 * shared expert. Layer il is full attention when (il + 1) % full_attention_interval == 0, or where the
 * attention.recurrent_layers array says false; the last nextn_predict_layers blocks (the MTP head mainline's
 * converter includes) are not run.
 *
 * Full attention (H heads of hd, Hkv KV heads): [q | gate]_h = Wq h (interleaved per head, 2 hd each),
 *   q, k per-head RMSNorm (attn_q_norm, attn_k_norm), RoPE on split halves over the first
 *   rope.dimension_count dims (the M-RoPE sections all see the text position, so this is neox RoPE),
 *   causal GQA attention (F16 cache), out *= sigmoid(gate), x += Wo out.
 * Gated delta net (Hk key heads and Hv value heads of S = ssm.state_size, conv kernel Kc):
 *   [q | k | v] = Wqkv h (2 Hk S + Hv S channels), z = Wgate h, beta = sigmoid(W_beta h),
 *   g = softplus(W_alpha h + ssm_dt) * ssm_a  (ssm_a = -exp(A_log), per value head)
 *   causal depthwise conv over time (kernel Kc, the last Kc-1 inputs kept in the state), then silu;
 *   q, k L2-normalised per head (x / max(|x|, eps)); value head j uses key head j % Hk;
 *   per value head, state S[j][i] (j: value dim, i: key dim): S *= exp(g); d_j = (v_j - S_j . k) beta;
 *   S_j += d_j k; o_j = (S_j . q) / sqrt(S)   (the reference's fused gated_delta_net, token by token)
 *   out = RMSNorm(o_h) * ssm_norm * silu(z_h) per head, x += ssm_out out.
 * FFN: h = RMSNorm(x) * post_attention_norm; x += routed experts (softmax, top-k, renormalised, scale)
 *   + sigmoid(ffn_gate_inp_shexp . h) * shared expert SwiGLU(h). */
#include "model/ffn.h"
#include "model/hparams.h"
#include "base/prof.h"
#include "quant/matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const float *attn_norm, *post_norm, *q_norm, *k_norm;
    mr_weight wq, wk, wv, wo;                         /* full attention */
    mr_weight wqkv, wgate, wbeta, walpha, wout;       /* delta net */
    const float *conv, *dt, *a, *ssm_norm;            /* conv [conv_dim][Kc], dt, a [Hv], ssm_norm [S] */
    mr_weight gate_inp, sh_gate, sh_up, sh_down;
    const float *sh_gate_inp;                         /* [d] */
    int recurrent;
} q35_layer;

typedef struct {
    int n_head, n_head_kv, hd, n_ff_exp, n_ff_sh;
    int Kc, S, Hk, Hv, conv_dim, vdim;
    float eps, kq_scale;
    mr_rope_params rope;
    mr_moe_cfg moe;
    const mr_gguf_tensor *tok_embd;
    const float *output_norm;
    mr_weight output;
    q35_layer *layers;
} q35_model;

typedef struct {
    int n_ctx, kv_f16;
    int64_t kv_dim;
    void **k, **v;          /* [n_layer] attention caches (NULL for delta-net layers) */
    float **conv, **ssm;    /* [n_layer] delta-net states (NULL for attention layers) */
    mr_scratch scratch;     /* an eval's buffers (q35_buf), grown to the largest batch (base.h) */
    mr_scratch moe_ws;      /* the expert engine's arena (mr_moe_buf.ws) */
} q35_state;

/* One eval's buffers, carved from the session's scratch (q35_buf_carve): the layer input/output,
 * the MoE block's, and the temporaries of a delta-net layer and of an attention layer. */
typedef struct {
    float *x, *h, *o, *o2, *g, *u, *rl, *w;
    int32_t *sel;
    float *qkv, *z, *beta, *alpha, *win, *lo, *delta; /* delta net */
    float *qg, *q, *k, *v, *att;                      /* full attention */
} q35_buf;

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static int q35_hparams(mr_model *m, q35_model *M, mr_decoder_hp *L) {
    /* the common keys (context, embedding, blocks, heads, key_length, experts, eps, rope) */
    if (mr_read_decoder_hparams(m, L, MR_ROPE_NEOX)) return -1;
    M->n_head = L->n_head;
    M->n_head_kv = L->n_head_kv;
    M->hd = L->head_dim;
    M->eps = L->eps;
    M->rope = L->rope;
    M->moe = L->moe;
    uint32_t ffe = 0, ffs = 0, kc = 0, inner = 0, st = 0, rank = 0, grp = 0, interval = 4;
    float wscale = 0.0f;
    if (mr_model_hp_u32(m, "expert_feed_forward_length", 0, 0, &ffe) ||
        mr_model_hp_u32(m, "expert_shared_feed_forward_length", 0, 0, &ffs) ||
        mr_model_hp_u32(m, "ssm.conv_kernel", 1, 0, &kc) || mr_model_hp_u32(m, "ssm.inner_size", 1, 0, &inner) ||
        mr_model_hp_u32(m, "ssm.state_size", 1, 0, &st) || mr_model_hp_u32(m, "ssm.time_step_rank", 1, 0, &rank) ||
        mr_model_hp_u32(m, "ssm.group_count", 1, 0, &grp) ||
        mr_model_hp_u32(m, "full_attention_interval", 0, 4, &interval) ||
        mr_model_hp_f32(m, "expert_weights_scale", 0, 0.0f, &wscale))
        return -1;
    if (M->moe.n_expert == 0) { mr_set_error("%s: qwen35moe.expert_count must be > 0", m->path); return -1; }
    if (kc < 1 || kc > 64 || st == 0 || st > 4096 || rank == 0 || grp == 0 || rank % grp || rank > 4096 || interval == 0) {
        mr_set_error("%s: ssm.conv_kernel %u / state_size %u / time_step_rank %u / group_count %u invalid", m->path, kc, st, rank, grp);
        return -1;
    }
    /* the M-RoPE sections: every rotated pair must take one of the three text-position streams */
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch_name);
    const mr_gguf_kv *kv = mr_gguf_find_kv(m->gguf, key);
    if (!kv || kv->type != MR_GGUF_ARRAY || kv->n < 3 || (kv->arr_type != MR_GGUF_I32 && kv->arr_type != MR_GGUF_U32)) {
        mr_set_error("%s: missing or bad %s", m->path, key);
        return -1;
    }
    const int32_t *sec = kv->arr;
    int64_t sum = 0;
    for (uint64_t i = 0; i < kv->n && i < 4; i++) sum += sec[i] < 0 ? 0 : sec[i];
    for (int p = 0; p < M->rope.n_dims / 2; p++) { /* ggml's interleaved M-RoPE sector rule */
        const int64_t s = sum ? p % sum : 0;
        const int text = (s % 3 == 0 && s < 3 * (int64_t)sec[0]) || (s % 3 == 1 && s < 3 * (int64_t)sec[1]) ||
                         (s % 3 == 2 && s < 3 * (int64_t)sec[2]);
        if (!text) { mr_set_error("%s: %s leaves rotated pairs to the 4th position stream (not supported)", m->path, key); return -1; }
    }
    M->Kc = (int)kc;
    M->S = (int)st;
    M->Hk = (int)grp;
    M->Hv = (int)rank;
    M->vdim = (int)(st * rank);
    M->conv_dim = (int)(2 * st * grp + st * rank);
    (void)inner;
    M->n_ff_exp = ffe ? (int)ffe : L->n_ff_exp;
    M->n_ff_sh = ffs ? (int)ffs : L->n_ff;
    if (M->n_ff_exp <= 0 || M->n_ff_sh <= 0) { mr_set_error("%s: expert / shared expert widths missing", m->path); return -1; }
    M->moe.gating = MR_GATING_SOFTMAX;
    M->moe.norm_w = 1;
    M->moe.w_scale = wscale;
    M->kq_scale = 1.0f / sqrtf((float)M->hd);
    /* mainline's converter appends the MTP blocks (nextn_predict_layers of them) to block_count and
     * writes the per-block pattern as attention.recurrent_layers [block_count] (bools, MTP blocks false),
     * which takes precedence over full_attention_interval. The MTP blocks are not run as layers. */
    uint32_t nextn = 0;
    if (mr_model_hp_u32(m, "nextn_predict_layers", 0, 0, &nextn)) return -1;
    if (nextn >= (uint32_t)m->n_layer) { mr_set_error("%s: nextn_predict_layers %u must be < block_count %d", m->path, nextn, m->n_layer); return -1; }
    const int n_all = m->n_layer;
    uint32_t *rec = mr_malloc(sizeof(uint32_t) * (size_t)n_all);
    M->layers = mr_calloc((size_t)n_all, sizeof *M->layers);
    if (!rec || !M->layers) { free(rec); mr_set_error("model: out of memory"); return -1; }
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", m->arch_name);
    const int have_rec = mr_gguf_find_kv(m->gguf, key) != NULL;
    if (have_rec && mr_model_hp_u32_layers(m, "attention.recurrent_layers", 0, 0, rec, n_all)) { free(rec); return -1; }
    m->n_layer = n_all - (int)nextn;
    for (int i = 0; i < m->n_layer; i++) M->layers[i].recurrent = have_rec ? rec[i] != 0 : (uint32_t)(i + 1) % interval != 0;
    free(rec);
    return 0;
}

static int q35_tensors(mr_model *m, q35_model *M) {
    const int64_t d = m->n_embd, hd = M->hd, H = M->n_head, Hkv = M->n_head_kv, E = M->moe.n_expert;
    const int64_t Fe = M->n_ff_exp, Fs = M->n_ff_sh;
    M->tok_embd = mr_model_tensor(m, 1, 2, SHAPE(d, -1), "token_embd.weight");
    if (!M->tok_embd) return -1;
    m->n_vocab = (int)M->tok_embd->ne[1];
    M->output_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "output_norm.weight"));
    const mr_gguf_tensor *out = mr_model_tensor(m, 0, 2, SHAPE(d, m->n_vocab), "output.weight");
    M->output = mr_model_weight(m, out ? out : M->tok_embd);
    mr_pager_layer *pl = mr_calloc((size_t)m->n_layer, sizeof *pl);
    if (!pl) { mr_set_error("model: out of memory"); return -1; }
    for (int i = 0; i < m->n_layer && !m->load_err; i++) {
        q35_layer *l = &M->layers[i];
        l->attn_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "blk.%d.attn_norm.weight", i));
        l->post_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "blk.%d.post_attention_norm.weight", i));
        if (!l->recurrent) {
            l->wq = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, hd * H * 2), "blk.%d.attn_q.weight", i));
            l->wk = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, hd * Hkv), "blk.%d.attn_k.weight", i));
            l->wv = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, hd * Hkv), "blk.%d.attn_v.weight", i));
            l->wo = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(hd * H, d), "blk.%d.attn_output.weight", i));
            l->q_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(hd), "blk.%d.attn_q_norm.weight", i));
            l->k_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(hd), "blk.%d.attn_k_norm.weight", i));
        } else {
            l->wqkv = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, M->conv_dim), "blk.%d.attn_qkv.weight", i));
            l->wgate = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, M->vdim), "blk.%d.attn_gate.weight", i));
            l->conv = mr_model_f32(m, mr_model_tensor(m, 1, 2, SHAPE(M->Kc, M->conv_dim), "blk.%d.ssm_conv1d.weight", i));
            l->dt = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(M->Hv), "blk.%d.ssm_dt.bias", i));
            l->a = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(M->Hv), "blk.%d.ssm_a", i));
            l->wbeta = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, M->Hv), "blk.%d.ssm_beta.weight", i));
            l->walpha = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, M->Hv), "blk.%d.ssm_alpha.weight", i));
            l->ssm_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(M->S), "blk.%d.ssm_norm.weight", i));
            l->wout = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(M->vdim, d), "blk.%d.ssm_out.weight", i));
        }
        l->gate_inp = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, E), "blk.%d.ffn_gate_inp.weight", i));
        pl[i].mat[MR_PAGER_GATE] = mr_model_tensor(m, 1, 3, SHAPE(d, Fe, E), "blk.%d.ffn_gate_exps.weight", i);
        pl[i].mat[MR_PAGER_UP] = mr_model_tensor(m, 1, 3, SHAPE(d, Fe, E), "blk.%d.ffn_up_exps.weight", i);
        pl[i].mat[MR_PAGER_DOWN] = mr_model_tensor(m, 1, 3, SHAPE(Fe, d, E), "blk.%d.ffn_down_exps.weight", i);
        pl[i].n_used = M->moe.n_used;
        l->sh_gate_inp = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "blk.%d.ffn_gate_inp_shexp.weight", i));
        l->sh_gate = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, Fs), "blk.%d.ffn_gate_shexp.weight", i));
        l->sh_up = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, Fs), "blk.%d.ffn_up_shexp.weight", i));
        l->sh_down = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(Fs, d), "blk.%d.ffn_down_shexp.weight", i));
    }
    int rc = m->load_err ? -1 : mr_model_init_pager(m, pl);
    free(pl);
    return rc;
}

static void q35_free(mr_model *m) {
    q35_model *M = m->priv;
    if (!M) return;
    free(M->layers);
    free(M);
    m->priv = NULL;
}

static int q35_load(mr_model *m) {
    q35_model *M = mr_calloc(1, sizeof *M);
    mr_decoder_hp L = {0};
    if (!M) { mr_set_error("model: out of memory"); return -1; }
    m->priv = M;
    if (q35_hparams(m, M, &L)) return -1;
    return q35_tensors(m, M);
}

static void q35_state_free(mr_model *m, void *p) {
    q35_state *s = p;
    if (!s) return;
    for (int i = 0; i < m->n_layer; i++) {
        if (s->k) free(s->k[i]);
        if (s->v) free(s->v[i]);
        if (s->conv) free(s->conv[i]);
        if (s->ssm) free(s->ssm[i]);
    }
    free(s->k); free(s->v); free(s->conv); free(s->ssm);
    mr_scratch_free(&s->scratch);
    mr_scratch_free(&s->moe_ws);
    free(s);
}

static void *q35_state_new(mr_model *m, int n_ctx) {
    q35_model *M = m->priv;
    q35_state *s = mr_calloc(1, sizeof *s);
    if (!s) goto oom;
    s->n_ctx = n_ctx;
    s->kv_f16 = !m->params.kv_f32;
    s->kv_dim = (int64_t)M->n_head_kv * M->hd;
    s->k = mr_calloc((size_t)m->n_layer, sizeof(void *));
    s->v = mr_calloc((size_t)m->n_layer, sizeof(void *));
    s->conv = mr_calloc((size_t)m->n_layer, sizeof(float *));
    s->ssm = mr_calloc((size_t)m->n_layer, sizeof(float *));
    if (!s->k || !s->v || !s->conv || !s->ssm) goto oom;
    const size_t kvb = (size_t)n_ctx * (size_t)s->kv_dim * (s->kv_f16 ? 2 : 4);
    for (int i = 0; i < m->n_layer; i++) {
        if (M->layers[i].recurrent) {
            s->conv[i] = mr_calloc((size_t)(M->Kc - 1 > 0 ? M->Kc - 1 : 1) * (size_t)M->conv_dim, sizeof(float));
            s->ssm[i] = mr_calloc((size_t)M->Hv * (size_t)M->S * (size_t)M->S, sizeof(float));
            if (!s->conv[i] || !s->ssm[i]) goto oom;
        } else {
            s->k[i] = mr_calloc(1, kvb);
            s->v[i] = mr_calloc(1, kvb);
            if (!s->k[i] || !s->v[i]) goto oom;
        }
    }
    return s;
oom:
    mr_set_error("session: out of memory for the caches of %d positions", n_ctx);
    q35_state_free(m, s);
    return NULL;
}

/* the recurrent states start from zero; the KV rows are overwritten */
static void q35_state_reset(mr_model *m, void *st) {
    q35_model *M = m->priv;
    q35_state *s = st;
    for (int i = 0; i < m->n_layer; i++)
        if (M->layers[i].recurrent) {
            memset(s->conv[i], 0, sizeof(float) * (size_t)(M->Kc - 1 > 0 ? M->Kc - 1 : 1) * (size_t)M->conv_dim);
            memset(s->ssm[i], 0, sizeof(float) * (size_t)M->Hv * (size_t)M->S * (size_t)M->S);
        }
}

/* snapshot regions (model.h): attention layers' K then V rows [0, n_past), delta-net layers' whole
 * convolution window and recurrent state (they summarise every position so far) */
static int q35_state_io(mr_model *m, void *st, int n_past, mr_state_io *io) {
    q35_model *M = m->priv;
    q35_state *s = st;
    const size_t kvb = (size_t)n_past * (size_t)s->kv_dim * (s->kv_f16 ? 2 : 4);
    for (int i = 0; i < m->n_layer; i++) {
        int rc = M->layers[i].recurrent
            ? io->fn(io, s->conv[i], sizeof(float) * (size_t)(M->Kc - 1 > 0 ? M->Kc - 1 : 1) * (size_t)M->conv_dim) ||
              io->fn(io, s->ssm[i], sizeof(float) * (size_t)M->Hv * (size_t)M->S * (size_t)M->S)
            : io->fn(io, s->k[i], kvb) || io->fn(io, s->v[i], kvb);
        if (rc) return -1;
    }
    return 0;
}

/* x / max(|x|, eps) with the sum of squares in double (ggml_l2_norm) */
static void q35_l2_norm(float *x, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float scale = 1.0f / fmaxf(sqrtf((float)sum), eps);
    for (int64_t i = 0; i < n; i++) x[i] *= scale;
}

/* gated delta net of one layer for tokens h[n][d] -> out[n][d] */
static int q35_linear_attn(mr_model *m, const q35_model *M, const q35_layer *l, q35_state *s, int il, const float *h, int n,
                           const q35_buf *B, float *out) {
    const int64_t C = M->conv_dim, S = M->S, Hk = M->Hk, Hv = M->Hv, Vd = M->vdim, Kc = M->Kc;
    float *qkv = B->qkv, *z = B->z, *beta = B->beta, *alpha = B->alpha, *win = B->win, *o = B->lo, *delta = B->delta;
    const mr_matmul_task tk[4] = {{.w = &l->wqkv, .X = h, .ncols = n, .Y = qkv}, {.w = &l->wgate, .X = h, .ncols = n, .Y = z},
                                  {.w = &l->wbeta, .X = h, .ncols = n, .Y = beta}, {.w = &l->walpha, .X = h, .ncols = n, .Y = alpha}};
    if (mr_model_matmul_many(m, tk, 4)) return -1;
    /* causal depthwise conv: input = the kept Kc-1 steps, then this batch */
    if (Kc > 1) memcpy(win, s->conv[il], sizeof(float) * (size_t)((Kc - 1) * C));
    memcpy(win + (Kc - 1) * C, qkv, sizeof(float) * (size_t)(n * C));
    for (int t = 0; t < n; t++)
        for (int64_t c = 0; c < C; c++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < Kc; k++) acc += win[(t + k) * C + c] * l->conv[c * Kc + k];
            qkv[t * C + c] = mr_silu(acc);
        }
    if (Kc > 1) memcpy(s->conv[il], win + (int64_t)n * C, sizeof(float) * (size_t)((Kc - 1) * C));
    float *state = s->ssm[il];
    const float scale = 1.0f / sqrtf((float)S);
    for (int t = 0; t < n; t++) {
        float *q = qkv + t * C, *k = q + Hk * S, *v = k + Hk * S;
        for (int64_t hh = 0; hh < Hk; hh++) { q35_l2_norm(q + hh * S, S, M->eps); q35_l2_norm(k + hh * S, S, M->eps); }
        for (int64_t j = 0; j < Hv; j++) {
            const float *qj = q + (j % Hk) * S, *kj = k + (j % Hk) * S, *vj = v + j * S;
            const float g = mr_softplus(alpha[t * Hv + j] + l->dt[j]) * l->a[j];
            const float b = mr_sigmoid(beta[t * Hv + j]);
            float *Sm = state + j * S * S; /* row r: value dim r over the key dims */
            const float eg = expf(g);
            for (int64_t i = 0; i < S * S; i++) Sm[i] *= eg;
            for (int64_t r = 0; r < S; r++) delta[r] = (vj[r] - mr_dot(Sm + r * S, kj, S)) * b;
            for (int64_t r = 0; r < S; r++)
                for (int64_t i = 0; i < S; i++) Sm[r * S + i] += kj[i] * delta[r];
            float *oj = o + t * Vd + j * S;
            for (int64_t r = 0; r < S; r++) oj[r] = mr_dot(Sm + r * S, qj, S) * scale;
            /* gated norm: RMSNorm(o) * ssm_norm * silu(z) */
            mr_rms_norm(oj, oj, l->ssm_norm, S, M->eps);
            const float *zj = z + t * Vd + j * S;
            for (int64_t r = 0; r < S; r++) oj[r] *= mr_silu(zj[r]);
        }
    }
    mr_model_dump(m, "linear_attn_pre_out", il, o, Vd, n);
    return mr_model_matmul(m, &l->wout, o, n, out);
}

/* gated full attention of one layer */
static int q35_attn(mr_model *m, const q35_model *M, const q35_layer *l, q35_state *s, int il, const float *h, int n, int pos0,
                    const q35_buf *B, float *out) {
    const int64_t hd = M->hd, H = M->n_head, nkv = s->kv_dim;
    float *qg = B->qg, *q = B->q, *k = B->k, *v = B->v, *att = B->att;
    const mr_matmul_task tk[3] = {{.w = &l->wq, .X = h, .ncols = n, .Y = qg}, {.w = &l->wk, .X = h, .ncols = n, .Y = k},
                                  {.w = &l->wv, .X = h, .ncols = n, .Y = v}};
    if (mr_model_matmul_many(m, tk, 3)) return -1;
    for (int t = 0; t < n; t++) {
        for (int64_t hh = 0; hh < H; hh++) {
            float *qh = q + (t * H + hh) * hd;
            mr_rms_norm(qh, qg + (t * H + hh) * 2 * hd, l->q_norm, hd, M->eps);
            mr_rope(&M->rope, qh, 1, hd, pos0 + t);
        }
        for (int64_t hh = 0; hh < M->n_head_kv; hh++) {
            float *kh = k + t * nkv + hh * hd;
            mr_rms_norm(kh, kh, l->k_norm, hd, M->eps);
            mr_rope(&M->rope, kh, 1, hd, pos0 + t);
        }
        const int64_t off = (int64_t)(pos0 + t) * nkv;
        if (s->kv_f16) {
            mr_f32_to_f16_row((uint16_t *)s->k[il] + off, k + t * nkv, nkv);
            mr_f32_to_f16_row((uint16_t *)s->v[il] + off, v + t * nkv, nkv);
        } else {
            memcpy((float *)s->k[il] + off, k + t * nkv, sizeof(float) * (size_t)nkv);
            memcpy((float *)s->v[il] + off, v + t * nkv, sizeof(float) * (size_t)nkv);
        }
    }
    mr_attn_args aa = {
        .n_q = n, .pos0 = pos0, .n_head = (int)H, .n_head_kv = M->n_head_kv, .head_dim = (int)hd, .scale = M->kq_scale,
        .window = 0, .sinks = NULL, .Q = q, .q_stride = H * hd, .K = s->k[il], .V = s->v[il], .kv_f16 = s->kv_f16,
        .kv_stride = nkv, .out = att, .out_stride = H * hd, .ws = m->ws,
    };
    if (mr_attention(m->pool, &aa)) return -1;
    for (int t = 0; t < n; t++) /* out *= sigmoid(gate) */
        for (int64_t hh = 0; hh < H; hh++) {
            const float *gt = qg + (t * H + hh) * 2 * hd + hd;
            float *a = att + (t * H + hh) * hd;
            for (int64_t i = 0; i < hd; i++) a[i] *= mr_sigmoid(gt[i]);
        }
    return mr_model_matmul(m, &l->wo, att, n, out);
}

static int q35_buf_carve(const mr_model *m, const q35_model *M, q35_state *s, int n, q35_buf *B) {
    const int64_t d = m->n_embd, F = M->n_ff_sh, E = M->moe.n_expert, K = M->moe.n_used;
    const int64_t C = M->conv_dim, Vd = M->vdim, Hv = M->Hv, Kc = M->Kc, hq = (int64_t)M->n_head * M->hd, nkv = s->kv_dim;
    const size_t f = sizeof(float), nn = (size_t)n;
    mr_scratch *sc = &s->scratch;
    int r;
    do {
        mr_scratch_begin(sc);
        B->x = mr_scratch_take(sc, f * nn * (size_t)d);
        B->h = mr_scratch_take(sc, f * nn * (size_t)d);
        B->o = mr_scratch_take(sc, f * nn * (size_t)d);
        B->o2 = mr_scratch_take(sc, f * nn * (size_t)d);
        B->g = mr_scratch_take(sc, f * nn * (size_t)F);
        B->u = mr_scratch_take(sc, f * nn * (size_t)F);
        B->rl = mr_scratch_take(sc, f * nn * (size_t)E);
        B->w = mr_scratch_take(sc, f * nn * (size_t)K);
        B->sel = mr_scratch_take(sc, sizeof(int32_t) * nn * (size_t)K);
        B->qkv = mr_scratch_take(sc, f * nn * (size_t)C);
        B->z = mr_scratch_take(sc, f * nn * (size_t)Vd);
        B->beta = mr_scratch_take(sc, f * nn * (size_t)Hv);
        B->alpha = mr_scratch_take(sc, f * nn * (size_t)Hv);
        B->win = mr_scratch_take(sc, f * (size_t)(Kc - 1 + n) * (size_t)C); /* conv input, time-major */
        B->lo = mr_scratch_take(sc, f * nn * (size_t)Vd);
        B->delta = mr_scratch_take(sc, f * (size_t)M->S);
        B->qg = mr_scratch_take(sc, f * nn * (size_t)(2 * hq));
        B->q = mr_scratch_take(sc, f * nn * (size_t)hq);
        B->k = mr_scratch_take(sc, f * nn * (size_t)nkv);
        B->v = mr_scratch_take(sc, f * nn * (size_t)nkv);
        B->att = mr_scratch_take(sc, f * nn * (size_t)hq);
    } while ((r = mr_scratch_end(sc)) == 1);
    return r < 0 ? -1 : 0; /* error set: out of memory for the batch's buffers */
}

static int q35_eval(mr_model *m, void *st, const int32_t *tok, int n, int pos0, float *logits, int all_logits) {
    q35_model *M = m->priv;
    q35_state *s = st;
    const int64_t d = m->n_embd, V = m->n_vocab;
    q35_buf B;
    if (q35_buf_carve(m, M, s, n, &B)) return -1;
    float *x = B.x, *h = B.h, *o = B.o;
    for (int t = 0; t < n; t++)
        if (mr_tensor_get_row(M->tok_embd, tok[t], x + t * d)) return -1;
    for (int il = 0; il < m->n_layer; il++) {
        const q35_layer *l = &M->layers[il];
        mr_rms_norm_rows(h, x, l->attn_norm, d, n, M->eps);
        if (l->recurrent ? q35_linear_attn(m, M, l, s, il, h, n, &B, o) : q35_attn(m, M, l, s, il, h, n, pos0, &B, o)) return -1;
        mr_model_dump(m, "attn_out", il, o, d, n);
        mr_add(x, o, x, n * d);
        mr_rms_norm_rows(h, x, l->post_norm, d, n, M->eps);
        const mr_moe_layer ml = {.router = &l->gate_inp, .sh_gate = &l->sh_gate, .sh_up = &l->sh_up,
                                 .sh_down = &l->sh_down, .sh_gate_inp = l->sh_gate_inp};
        const mr_moe_buf mb = {.logits = B.rl, .w = B.w, .g = B.g, .u = B.u, .sh = B.o2, .sel = B.sel, .ws = &s->moe_ws};
        if (mr_moe_block(m, il, &M->moe, &ml, h, n, &mb, o, x)) return -1;
        mr_model_dump(m, "l_out", il, x, d, n);
    }
    if (logits) {
        const int first = all_logits ? 0 : n - 1, nr = all_logits ? n : 1;
        mr_rms_norm_rows(h, x + first * d, M->output_norm, d, nr, M->eps);
        if (mr_model_matmul(m, &M->output, h, nr, logits)) return -1;
        mr_model_dump(m, "result_output", -1, logits, V, nr);
    }
    return 0;
}

const struct mr_arch mr_arch_qwen35moe = {
    .name = "qwen35moe",
    .load = q35_load,
    .free = q35_free,
    .state_new = q35_state_new,
    .state_free = q35_state_free,
    .state_reset = q35_state_reset,
    .eval = q35_eval,
    .state_truncate = NULL, /* the recurrent state cannot be cut back */
    .state_io = q35_state_io,
    .check_tensors = 1,
};
