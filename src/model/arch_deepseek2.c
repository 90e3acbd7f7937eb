/* deepseek2: DeepSeek-V2/V3/R1 and Kimi-K2 (the reference fork's llm_build_deepseek2, MLA branch).
 *
 * Per layer (d = n_embd, H heads, nope + rope = key_length_mla, dv = value_length_mla, r = kv_lora_rank,
 * p = rope.dimension_count):
 *   h = RMSNorm(x) * attn_norm
 *   q = Wq_b (RMSNorm(Wq_a h) * attn_q_a_norm)   (or Wq h without q_lora_rank)   [H][nope + p]
 *   [c | k_pe] = Wkv_a_mqa h                                                     [r + p]
 *   q_pe, k_pe: RoPE (ggml "normal" mode, adjacent pairs; YaRN); c = RMSNorm(c) * attn_kv_a_norm
 *   absorbed MLA (one shared KV head of r + p values): Q_h = [Wk_b[h] q_nope_h | q_pe_h]  (Wk_b[h]: [r][nope])
 *                                                   K = V' = [c | k_pe] in the cache (F16 by default)
 *   o_h = softmax(kq_scale * Q_h . K_j) over j <= t, summed with V_j = c_j (the first r values of K_j)
 *   x += Wo [Wv_b[h] o_h]_h                                                     (Wv_b[h]: [dv][r])
 *   kq_scale = mscale^2 / sqrt(nope + p), mscale = attn_factor * (1 + 0.1 * yarn_log_mul * ln(rope factor))
 *   h = RMSNorm(x) * ffn_norm
 *   layers < leading_dense_block_count: x += dense SwiGLU FFN(h)
 *   others: x += routed experts (moe.h: softmax or sigmoid gating, exp_probs_b selection bias, expert
 *           groups, weight norm and scale) + shared expert SwiGLU FFN(h)
 * logits = output . (RMSNorm(x) * output_norm)
 * The last nextn_predict_layers blocks (an MTP head, GLM-4.7-Flash) are not run.
 * Legacy GGUFs without key_length_mla (one unsplit attn_kv_b) are not supported. */
#include "model/ffn.h"
#include "model/hparams.h"
#include "base/prof.h"
#include "quant/matmul.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const float *attn_norm, *q_a_norm, *kv_a_norm, *ffn_norm, *probs_b;
    mr_weight wq, wq_a, wq_b, wkv_a, wo;
    const mr_gguf_tensor *wk_b, *wv_b;           /* [H][r][nope], [H][dv][r] */
    mr_weight ffn_gate, ffn_up, ffn_down;        /* dense layers */
    mr_weight gate_inp, sh_gate, sh_up, sh_down; /* MoE layers */
    int is_moe;
} ds2_layer;

typedef struct {
    int n_head, nope, n_rot, dv, q_lora, kv_lora, n_ff, n_ff_exp, n_shared, n_dense;
    float eps, kq_scale;
    mr_rope_params rope;
    mr_moe_cfg moe;
    const mr_gguf_tensor *tok_embd;
    const float *output_norm;
    mr_weight output;
    ds2_layer *layers;
} ds2_model;

typedef struct {
    int n_ctx, kv_f16;
    int64_t kv_dim;  /* r + p */
    void **kv;       /* [n_layer] n_ctx x kv_dim (uint16_t F16 or float) */
    mr_scratch scratch; /* an eval's buffers (ds2_buf), grown to the largest batch (base.h) */
    mr_scratch moe_ws;  /* the expert engine's arena (mr_moe_buf.ws) */
} ds2_state;

/* One eval's buffers, carved from the session's scratch (ds2_buf_carve) */
typedef struct {
    float *x, *h, *qa, *q, *kv, *Q, *att, *oa, *xs, *ys, *o, *o2, *g, *u, *rl, *w;
    float *rope_cache; /* [(n + 7) / 8][n_rot]: one per chunk of 8 tokens (chunks run in parallel) */
    int32_t *sel;
} ds2_buf;

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

/* Routing: expert counts, groups and the gating function (absent = the old V2 files' softmax, except
 * GLM-4.7-Lite, as the reference); the expert weight norm/scale keys were read by the caller into M->moe. */
static int ds2_moe_cfg(mr_model *m, ds2_model *M, uint32_t ne, uint32_t nu, uint32_t ng, uint32_t ngu, uint32_t gating) {
    uint32_t nl = (uint32_t)m->n_layer;
    if (ne == 0 && M->n_dense < (int)nl) { mr_set_error("%s: %s.expert_count must be > 0", m->path, m->arch_name); return -1; }
    if (ne > 0 && (nu == 0 || nu > ne || ne > 4096)) { mr_set_error("%s: expert_used_count %u invalid for %u experts", m->path, nu, ne); return -1; }
    if (ng > 1 && (ng > 256 || ne % ng || ne / ng < 2 || ngu == 0 || ngu >= ng || nu > ngu * (ne / ng))) {
        mr_set_error("%s: expert_group_count %u / expert_group_used_count %u invalid for %u experts (top %u)", m->path, ng, ngu, ne, nu);
        return -1;
    }
    /* gating: softmax or sigmoid; absent (0) = old V2 GGUFs: softmax, except GLM-4.7-Lite (47/48
     * layers, vocab 154880), like the reference */
    int gating_none = MR_GATING_SOFTMAX, gfn = 0;
    if (gating == 0) {
        uint32_t nv = 0;
        (void)mr_model_hp_u32(m, "vocab_size", 0, 0, &nv);
        const mr_gguf_kv *tl = mr_gguf_find_kv(m->gguf, "tokenizer.ggml.tokens");
        if (!nv && tl && tl->type == MR_GGUF_ARRAY) nv = (uint32_t)tl->n;
        if ((nl == 47 || nl == 48) && nv == 154880) gating_none = MR_GATING_SIGMOID;
    }
    if (mr_moe_gating_from_gguf(m, gating, gating_none, MR_GATING_BIT(MR_GATING_SOFTMAX) | MR_GATING_BIT(MR_GATING_SIGMOID),
                                &gfn))
        return -1;
    M->moe.n_expert = (int)ne;
    M->moe.n_used = (int)nu;
    M->moe.gating = gfn;
    M->moe.n_group = (int)ng;
    M->moe.n_group_used = (int)ngu;
    return 0;
}

/* RoPE/YaRN parameters and the kq scale of llm_build_deepseek2 (klm = key_length_mla). */
static int ds2_rope(mr_model *m, ds2_model *M, uint32_t klm) {
    float log_mul = 0.0f;
    if (mr_model_hp_f32(m, "rope.scaling.yarn_log_multiplier", 0, 0.0f, &log_mul)) return -1;
    mr_rope_params_init(&M->rope, MR_ROPE_NORMAL, M->n_rot);
    if (mr_read_rope(m, &M->rope)) return -1;
    /* The reference divides this arch's yarn_log_multiplier by 0.1 (the converter stored 0.1 * mscale_all_dim),
     * and since mscale == mscale_all_dim for deepseek2 the context's attn factor is 1 / (1 + 0.1 ln factor)
     * (cancelling the rope kernel's own YaRN magnitude) times rope.scaling.attn_factor. */
    log_mul /= 0.1f;
    float rope_attn = 1.0f;
    if (mr_model_hp_f32(m, "rope.scaling.attn_factor", 0, 1.0f, &rope_attn)) return -1;
    if (M->rope.ext_factor != 0.0f)
        M->rope.attn_factor = 1.0f / (1.0f + 0.1f * logf(1.0f / M->rope.freq_scale)) * rope_attn;
    else M->rope.attn_factor = rope_attn;
    /* llm_build_deepseek2: undo that cancellation, then pre-scale kq by mscale^2 */
    const float attn_org = M->rope.attn_factor * (1.0f + 0.1f * logf(1.0f / M->rope.freq_scale));
    const float mscale = attn_org * (1.0f + 0.1f * log_mul * logf(1.0f / M->rope.freq_scale));
    M->kq_scale = 1.0f * mscale * mscale / sqrtf((float)klm);
    /* Mistral-Large-3 style files scale q by a position-dependent attention temperature (mainline reads
     * attention.temperature_scale / _length for this arch); not implemented: refuse rather than differ */
    float temp_scale = 0.0f;
    if (mr_model_hp_f32(m, "attention.temperature_scale", 0, 0.0f, &temp_scale)) return -1;
    if (temp_scale != 0.0f) {
        mr_set_error("%s: %s.attention.temperature_scale %g (attention temperature tuning) is not supported", m->path,
                     m->arch_name, temp_scale);
        return -1;
    }
    return 0;
}

static int ds2_hparams(mr_model *m, ds2_model *M) {
    uint32_t ctx, embd, nl, ne = 0, nu = 0, ng = 0, ngu = 0, kl = 0, vl = 0, klm = 0, vlm = 0, nrot = 0, qr = 0, kvr = 0;
    uint32_t ffe = 0, nsh = 0, ndense = 0, gating = 0;
    int normw = 0;
    float wscale = 0.0f;
    if (mr_model_hp_u32(m, "context_length", 1, 0, &ctx) || mr_model_hp_u32(m, "embedding_length", 1, 0, &embd) ||
        mr_model_hp_u32(m, "block_count", 1, 0, &nl) || mr_model_hp_u32(m, "expert_count", 0, 0, &ne) ||
        mr_model_hp_u32(m, "expert_used_count", 0, 0, &nu) || mr_model_hp_u32(m, "expert_group_count", 0, 0, &ng) ||
        mr_model_hp_u32(m, "expert_group_used_count", 0, 0, &ngu) ||
        mr_model_hp_f32(m, "attention.layer_norm_rms_epsilon", 1, 0, &M->eps) ||
        mr_model_hp_u32(m, "leading_dense_block_count", 0, 0, &ndense) ||
        mr_model_hp_u32(m, "attention.q_lora_rank", 0, 0, &qr) || mr_model_hp_u32(m, "attention.kv_lora_rank", 1, 0, &kvr) ||
        mr_model_hp_u32(m, "attention.key_length_mla", 0, 0, &klm) ||
        mr_model_hp_u32(m, "attention.value_length_mla", 0, 0, &vlm) ||
        mr_model_hp_u32(m, "expert_feed_forward_length", 1, 0, &ffe) ||
        mr_model_hp_u32(m, "expert_shared_count", 1, 0, &nsh) ||
        mr_model_hp_f32(m, "expert_weights_scale", 0, 0.0f, &wscale) ||
        mr_model_hp_bool(m, "expert_weights_norm", 0, 0, &normw) ||
        mr_model_hp_u32(m, "expert_gating_func", 0, 0, &gating))
        return -1;
    if (embd == 0 || embd > (1u << 20) || nl == 0 || nl > 4096) { mr_set_error("%s: bad embedding_length/block_count", m->path); return -1; }
    m->n_ctx_train = (int)ctx;
    m->n_embd = (int)embd;
    m->n_layer = (int)nl;
    uint32_t *arr = mr_malloc(sizeof(uint32_t) * nl * 3);
    if (!arr) { mr_set_error("model: out of memory"); return -1; }
    int rc = -1;
    if (mr_model_hp_u32_layers(m, "feed_forward_length", 0, 0, arr, (int)nl) ||
        mr_model_hp_u32_layers(m, "attention.head_count", 1, 0, arr + nl, (int)nl) ||
        mr_model_hp_u32_layers(m, "attention.head_count_kv", 0, arr[nl], arr + 2 * nl, (int)nl))
        goto out;
    for (uint32_t i = 1; i < nl; i++)
        if (arr[i] != arr[0] || arr[nl + i] != arr[nl] || arr[2 * nl + i] != arr[2 * nl]) {
            mr_set_error("%s: per-layer feed_forward_length / head counts are not supported", m->path);
            goto out;
        }
    M->n_ff = (int)arr[0];
    M->n_head = (int)arr[nl];
    if (M->n_head <= 0 || M->n_head > 4096) { mr_set_error("%s: attention.head_count %d invalid", m->path, M->n_head); goto out; }
    if (mr_model_hp_u32(m, "attention.key_length", 0, embd / (uint32_t)M->n_head, &kl) ||
        mr_model_hp_u32(m, "attention.value_length", 0, embd / (uint32_t)M->n_head, &vl) ||
        mr_model_hp_u32(m, "rope.dimension_count", 0, kl, &nrot))
        goto out;
    if (klm == 0 || vlm == 0) {
        mr_set_error("%s: no %s.attention.key_length_mla/value_length_mla: GGUFs with the unsplit attn_kv_b "
                     "(converted before MLA absorption) are not supported; reconvert the model", m->path, m->arch_name);
        goto out;
    }
    /* the MLA cache row is [c | k_pe]: one KV head of key_length = r + p, value_length = r */
    if (arr[2 * nl] != 1 || kl != kvr + nrot || vl != kvr) {
        mr_set_error("%s: MLA expects head_count_kv 1, key_length %u + %u and value_length %u (got %u, %u, %u)",
                     m->path, kvr, nrot, kvr, arr[2 * nl], kl, vl);
        goto out;
    }
    if (nrot == 0 || nrot % 2 || nrot >= klm || kvr == 0 || kvr > 65536 || klm > 65536 || vlm > 65536) {
        mr_set_error("%s: rope.dimension_count %u, key_length_mla %u, kv_lora_rank %u invalid", m->path, nrot, klm, kvr);
        goto out;
    }
    M->n_rot = (int)nrot;
    M->nope = (int)(klm - nrot);
    M->dv = (int)vlm;
    M->q_lora = (int)qr;
    M->kv_lora = (int)kvr;
    M->n_ff_exp = (int)ffe;
    M->n_shared = (int)nsh;
    M->n_dense = (int)(ndense < nl ? ndense : nl);
    memset(&M->moe, 0, sizeof M->moe);
    M->moe.norm_w = normw;
    M->moe.w_scale = wscale;
    if (ds2_moe_cfg(m, M, ne, nu, ng, ngu, gating) || ds2_rope(m, M, klm)) goto out;
    /* GLM-4.7-Flash files (mainline's converter) append the MTP block to block_count: not run as a layer */
    uint32_t nextn = 0;
    if (mr_model_hp_u32(m, "nextn_predict_layers", 0, 0, &nextn)) goto out;
    if (nextn >= nl) { mr_set_error("%s: nextn_predict_layers %u must be < block_count %u", m->path, nextn, nl); goto out; }
    m->n_layer = (int)(nl - nextn);
    if (M->n_dense > m->n_layer) M->n_dense = m->n_layer;
    rc = 0;
out:
    free(arr);
    return rc;
}

static int ds2_tensors(mr_model *m, ds2_model *M) {
    const int64_t d = m->n_embd, H = M->n_head, dk = M->nope + M->n_rot, r = M->kv_lora;
    M->tok_embd = mr_model_tensor(m, 1, 2, SHAPE(d, -1), "token_embd.weight");
    if (!M->tok_embd) return -1;
    m->n_vocab = (int)M->tok_embd->ne[1];
    const int64_t V = m->n_vocab;
    M->output_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "output_norm.weight"));
    const mr_gguf_tensor *out = mr_model_tensor(m, 0, 2, SHAPE(d, V), "output.weight");
    M->output = mr_model_weight(m, out ? out : M->tok_embd);
    M->layers = mr_calloc((size_t)m->n_layer, sizeof *M->layers);
    mr_pager_layer *pl = mr_calloc((size_t)m->n_layer, sizeof *pl);
    if (!M->layers || !pl) { free(pl); mr_set_error("model: out of memory"); return -1; }
    const int64_t E = M->moe.n_expert, Fe = M->n_ff_exp, Fs = (int64_t)M->n_ff_exp * M->n_shared, F = M->n_ff;
    for (int i = 0; i < m->n_layer && !m->load_err; i++) {
        ds2_layer *l = &M->layers[i];
        l->attn_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "blk.%d.attn_norm.weight", i));
        if (M->q_lora > 0) {
            l->q_a_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(M->q_lora), "blk.%d.attn_q_a_norm.weight", i));
            l->wq_a = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, M->q_lora), "blk.%d.attn_q_a.weight", i));
            l->wq_b = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(M->q_lora, H * dk), "blk.%d.attn_q_b.weight", i));
        } else {
            l->wq = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, H * dk), "blk.%d.attn_q.weight", i));
        }
        l->kv_a_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(r), "blk.%d.attn_kv_a_norm.weight", i));
        l->wkv_a = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, r + M->n_rot), "blk.%d.attn_kv_a_mqa.weight", i));
        l->wk_b = mr_model_tensor(m, 1, 3, SHAPE(M->nope, r, H), "blk.%d.attn_k_b.weight", i);
        l->wv_b = mr_model_tensor(m, 1, 3, SHAPE(r, M->dv, H), "blk.%d.attn_v_b.weight", i);
        l->wo = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(H * M->dv, d), "blk.%d.attn_output.weight", i));
        l->ffn_norm = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(d), "blk.%d.ffn_norm.weight", i));
        if (i < M->n_dense) {
            l->ffn_gate = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, F), "blk.%d.ffn_gate.weight", i));
            l->ffn_up = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, F), "blk.%d.ffn_up.weight", i));
            l->ffn_down = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(F, d), "blk.%d.ffn_down.weight", i));
            continue;
        }
        l->is_moe = 1;
        l->gate_inp = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, E), "blk.%d.ffn_gate_inp.weight", i));
        l->probs_b = mr_model_f32(m, mr_model_tensor(m, 0, 1, SHAPE(E), "blk.%d.exp_probs_b.bias", i));
        char gu[64];
        snprintf(gu, sizeof gu, "blk.%d.ffn_gate_up_exps.weight", i);
        if (mr_gguf_find_tensor(m->gguf, gu)) {
            mr_set_error("%s: merged %s tensors are not supported yet", m->path, gu);
            m->load_err = 1;
            break;
        }
        pl[i].mat[MR_PAGER_GATE] = mr_model_tensor(m, 1, 3, SHAPE(d, Fe, E), "blk.%d.ffn_gate_exps.weight", i);
        pl[i].mat[MR_PAGER_UP] = mr_model_tensor(m, 1, 3, SHAPE(d, Fe, E), "blk.%d.ffn_up_exps.weight", i);
        pl[i].mat[MR_PAGER_DOWN] = mr_model_tensor(m, 1, 3, SHAPE(Fe, d, E), "blk.%d.ffn_down_exps.weight", i);
        pl[i].n_used = M->moe.n_used;
        l->sh_gate = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, Fs), "blk.%d.ffn_gate_shexp.weight", i));
        l->sh_up = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(d, Fs), "blk.%d.ffn_up_shexp.weight", i));
        l->sh_down = mr_model_weight(m, mr_model_tensor(m, 1, 2, SHAPE(Fs, d), "blk.%d.ffn_down_shexp.weight", i));
    }
    int rc = m->load_err ? -1 : 0;
    if (!rc && M->n_dense < m->n_layer) rc = mr_model_init_pager(m, pl);
    free(pl);
    return rc;
}

static void ds2_free(mr_model *m) {
    ds2_model *M = m->priv;
    if (!M) return;
    free(M->layers);
    free(M);
    m->priv = NULL;
}

static int ds2_load(mr_model *m) {
    ds2_model *M = mr_calloc(1, sizeof *M);
    if (!M) { mr_set_error("model: out of memory"); return -1; }
    m->priv = M;
    if (ds2_hparams(m, M)) return -1;
    return ds2_tensors(m, M);
}

static void ds2_state_free(mr_model *m, void *p) {
    ds2_state *s = p;
    if (!s) return;
    for (int i = 0; s->kv && i < m->n_layer; i++) free(s->kv[i]);
    free(s->kv);
    mr_scratch_free(&s->scratch);
    mr_scratch_free(&s->moe_ws);
    free(s);
}

static void *ds2_state_new(mr_model *m, int n_ctx) {
    ds2_model *M = m->priv;
    ds2_state *s = mr_calloc(1, sizeof *s);
    if (!s) goto oom;
    s->n_ctx = n_ctx;
    s->kv_f16 = !m->params.kv_f32;
    s->kv_dim = (int64_t)M->kv_lora + M->n_rot;
    s->kv = mr_calloc((size_t)m->n_layer, sizeof(void *));
    if (!s->kv) goto oom;
    for (int i = 0; i < m->n_layer; i++)
        if (!(s->kv[i] = mr_calloc((size_t)n_ctx * (size_t)s->kv_dim, s->kv_f16 ? 2 : 4))) goto oom;
    return s;
oom:
    mr_set_error("session: out of memory for an MLA cache of %d positions", n_ctx);
    ds2_state_free(m, s);
    return NULL;
}

static void ds2_state_reset(mr_model *m, void *st) { (void)m; (void)st; /* positions are overwritten */ }
static int ds2_state_truncate(mr_model *m, void *st, int n) { (void)m; (void)st; (void)n; return 0; }
/* snapshot regions (model.h): each layer's cache rows [0, n_past) */
static int ds2_state_io(mr_model *m, void *st, int n_past, mr_state_io *io) {
    ds2_state *s = st;
    for (int i = 0; i < m->n_layer; i++)
        if (io->fn(io, s->kv[i], (size_t)n_past * (size_t)s->kv_dim * (s->kv_f16 ? 2 : 4))) return -1;
    return 0;
}

/* RoPE of q_pe (every head) and k_pe, RMSNorm of the latent c, and the cache row [c | k_pe] of
 * tokens [8 ch, 8 ch + 8): tokens are independent. */
typedef struct {
    const ds2_model *M;
    const ds2_layer *l;
    ds2_state *s;
    float *q, *kv;  /* q: [n][H][nope + p], kv: [n][r + p] */
    float *rope_cache;
    int il, pos0, n;
} ds2_rope_job;

static void ds2_rope_chunk(void *arg, long ch) {
    const ds2_rope_job *j = arg;
    const ds2_model *M = j->M;
    const int64_t dk = M->nope + M->n_rot, kvd = j->s->kv_dim;
    float *cache = j->rope_cache + ch * (int64_t)M->n_rot; /* this chunk's cos/sin cache */
    for (int t = (int)ch * 8; t < j->n && t < (int)ch * 8 + 8; t++) {
        float *qt = j->q + t * M->n_head * dk, *kt = j->kv + t * kvd;
        mr_rope_cache(&M->rope, j->pos0 + t, 1.0f, cache);
        for (int h = 0; h < M->n_head; h++) mr_rope_apply(&M->rope, cache, qt + h * dk + M->nope);
        mr_rope_apply(&M->rope, cache, kt + M->kv_lora);
        mr_rms_norm(kt, kt, j->l->kv_a_norm, M->kv_lora, M->eps);
        const int64_t off = (int64_t)(j->pos0 + t) * kvd;
        if (j->s->kv_f16) mr_f32_to_f16_row((uint16_t *)j->s->kv[j->il] + off, kt, kvd);
        else memcpy((float *)j->s->kv[j->il] + off, kt, sizeof(float) * (size_t)kvd);
    }
}

/* Per-head products with a 3-D weight [H][rows][cols]: for head h, Y_h = W[h] X_h where X_h gathers
 * cols values per token from src (token t, head h at src + t*src_ts + h*src_hs) and Y_h is scattered
 * the same way into dst. xs, ys: scratch of n*cols and n*rows floats. */
static int ds2_head_mm(mr_model *m, const mr_gguf_tensor *w, int H, const float *src, int64_t src_ts, int64_t src_hs,
                       float *dst, int64_t dst_ts, int64_t dst_hs, int n, float *xs, float *ys) {
    const int64_t cols = w->ne[0], rows = w->ne[1];
    const size_t hbytes = mr_row_size(w->type, cols) * (size_t)rows;
    for (int h = 0; h < H; h++) {
        for (int t = 0; t < n; t++) memcpy(xs + t * cols, src + t * src_ts + h * src_hs, sizeof(float) * (size_t)cols);
        mr_weight wh = {.data = (const uint8_t *)w->data + hbytes * (size_t)h, .type = w->type, .rows = rows, .cols = cols,
                        .name = w->name};
        if (mr_model_matmul(m, &wh, xs, n, ys)) return -1;
        for (int t = 0; t < n; t++) memcpy(dst + t * dst_ts + h * dst_hs, ys + t * rows, sizeof(float) * (size_t)rows);
    }
    return 0;
}

static int ds2_buf_carve(const mr_model *m, const ds2_model *M, ds2_state *s, int n, ds2_buf *B) {
    const int64_t d = m->n_embd, H = M->n_head, dk = M->nope + M->n_rot, r = M->kv_lora, kvd = s->kv_dim;
    const int64_t dqa = M->q_lora > 0 ? M->q_lora : 1;
    const int64_t Fs = (int64_t)M->n_ff_exp * M->n_shared;
    const int64_t F = M->n_ff > Fs ? M->n_ff : Fs;
    const int64_t K = M->moe.n_used, E = M->moe.n_expert;
    const int64_t xw = (r > dk ? r : dk) > M->dv ? (r > dk ? r : dk) : M->dv; /* per-head scratch width */
    const size_t f = sizeof(float), nn = (size_t)n;
    mr_scratch *sc = &s->scratch;
    int rc;
    memset(B, 0, sizeof *B);
    do {
        mr_scratch_begin(sc);
        B->x = mr_scratch_take(sc, f * nn * (size_t)d);
        B->h = mr_scratch_take(sc, f * nn * (size_t)d);
        B->qa = mr_scratch_take(sc, f * nn * (size_t)dqa);
        B->q = mr_scratch_take(sc, f * nn * (size_t)(H * dk));
        B->kv = mr_scratch_take(sc, f * nn * (size_t)kvd);
        B->Q = mr_scratch_take(sc, f * nn * (size_t)(H * kvd));   /* absorbed queries */
        B->att = mr_scratch_take(sc, f * nn * (size_t)(H * kvd)); /* attention output per head */
        B->oa = mr_scratch_take(sc, f * nn * (size_t)(H * M->dv));
        B->xs = mr_scratch_take(sc, f * nn * (size_t)xw);
        B->ys = mr_scratch_take(sc, f * nn * (size_t)xw);
        B->o = mr_scratch_take(sc, f * nn * (size_t)d);
        B->o2 = mr_scratch_take(sc, f * nn * (size_t)d);
        B->g = mr_scratch_take(sc, f * nn * (size_t)(F > 0 ? F : 1));
        B->u = mr_scratch_take(sc, f * nn * (size_t)(F > 0 ? F : 1));
        B->rope_cache = mr_scratch_take(sc, f * (nn + 7) / 8 * (size_t)M->n_rot);
        if (E) {
            B->rl = mr_scratch_take(sc, f * nn * (size_t)E);
            B->w = mr_scratch_take(sc, f * nn * (size_t)K);
            B->sel = mr_scratch_take(sc, sizeof(int32_t) * nn * (size_t)K);
        }
    } while ((rc = mr_scratch_end(sc)) == 1);
    return rc < 0 ? -1 : 0; /* error set: out of memory for the batch's buffers */
}

static int ds2_eval(mr_model *m, void *st, const int32_t *tok, int n, int pos0, float *logits, int all_logits) {
    ds2_model *M = m->priv;
    ds2_state *s = st;
    const int64_t d = m->n_embd, H = M->n_head, dk = M->nope + M->n_rot, r = M->kv_lora, kvd = s->kv_dim;
    const int64_t V = m->n_vocab;
    ds2_buf B;
    if (ds2_buf_carve(m, M, s, n, &B)) return -1;
    float *x = B.x, *h = B.h, *qa = B.qa, *q = B.q, *kv = B.kv, *Q = B.Q, *att = B.att, *oa = B.oa, *xs = B.xs, *ys = B.ys;
    float *o = B.o, *g = B.g, *u = B.u;
    for (int t = 0; t < n; t++)
        if (mr_tensor_get_row(M->tok_embd, tok[t], x + t * d)) return -1;
    mr_model_dump(m, "inp_embd", -1, x, d, n);

    for (int il = 0; il < m->n_layer; il++) {
        const ds2_layer *l = &M->layers[il];
        mr_rms_norm_rows(h, x, l->attn_norm, d, n, M->eps);
        mr_model_dump(m, "attn_norm", il, h, d, n);
        MR_PROF_BEGIN(tp);
        if (M->q_lora > 0) {
            const mr_matmul_task tk[2] = {{.w = &l->wq_a, .X = h, .ncols = n, .Y = qa}, {.w = &l->wkv_a, .X = h, .ncols = n, .Y = kv}};
            if (mr_model_matmul_many(m, tk, 2)) return -1;
            mr_rms_norm_rows(qa, qa, l->q_a_norm, M->q_lora, n, M->eps);
            if (mr_model_matmul(m, &l->wq_b, qa, n, q)) return -1;
        } else {
            const mr_matmul_task tk[2] = {{.w = &l->wq, .X = h, .ncols = n, .Y = q}, {.w = &l->wkv_a, .X = h, .ncols = n, .Y = kv}};
            if (mr_model_matmul_many(m, tk, 2)) return -1;
        }
        MR_PROF_END(tp, "mm attn_q+kv_a");
        mr_model_dump(m, "kv_cmpr_pe", il, kv, kvd, n);
        ds2_rope_job rj = {M, l, s, q, kv, B.rope_cache, il, pos0, n};
        mr_pool_run_chunks(n > 1 ? m->pool : NULL, ds2_rope_chunk, &rj, (n + 7) / 8);
        /* Q_h = [Wk_b[h] q_nope_h | q_pe_h] */
        if (ds2_head_mm(m, l->wk_b, (int)H, q, H * dk, dk, Q, H * kvd, kvd, n, xs, ys)) return -1;
        for (int t = 0; t < n; t++)
            for (int64_t hh = 0; hh < H; hh++)
                memcpy(Q + (t * H + hh) * kvd + r, q + (t * H + hh) * dk + M->nope, sizeof(float) * (size_t)M->n_rot);
        mr_model_dump(m, "Qcur", il, Q, kvd, 1);
        /* one KV head of r + p values; the values are its first r (the rest of the output is unused) */
        mr_attn_args aa = {
            .n_q = n, .pos0 = pos0, .n_head = (int)H, .n_head_kv = 1, .head_dim = (int)kvd,
            .scale = M->kq_scale, .window = 0, .sinks = NULL, .Q = Q, .q_stride = H * kvd,
            .K = s->kv[il], .V = s->kv[il], .kv_f16 = s->kv_f16, .kv_stride = kvd, .out = att, .out_stride = H * kvd,
            .ws = m->ws,
        };
        MR_PROF_BEGIN(ta);
        if (mr_attention(m->pool, &aa)) return -1;
        MR_PROF_END(ta, "attention");
        if (ds2_head_mm(m, l->wv_b, (int)H, att, H * kvd, kvd, oa, H * M->dv, M->dv, n, xs, ys)) return -1;
        mr_model_dump(m, "kqv_out", il, oa, H * M->dv, n);
        if (mr_model_matmul(m, &l->wo, oa, n, o)) return -1;
        mr_add(x, o, x, n * d);
        mr_model_dump(m, "ffn_inp", il, x, d, n);
        mr_rms_norm_rows(h, x, l->ffn_norm, d, n, M->eps);
        mr_model_dump(m, "ffn_norm", il, h, d, n);
        if (!l->is_moe) {
            if (mr_ffn(m, &l->ffn_gate, &l->ffn_up, &l->ffn_down, h, n, g, u, o)) return -1;
            mr_model_dump(m, "ffn_out", il, o, d, n);
            mr_add(x, o, x, n * d);
        } else {
            const mr_moe_layer ml = {.router = &l->gate_inp, .sel_bias = l->probs_b, .sh_gate = &l->sh_gate,
                                     .sh_up = &l->sh_up, .sh_down = &l->sh_down};
            const mr_moe_buf mb = {.logits = B.rl, .w = B.w, .g = g, .u = u, .sh = B.o2, .sel = B.sel, .ws = &s->moe_ws};
            if (mr_moe_block(m, il, &M->moe, &ml, h, n, &mb, o, x)) return -1;
        }
        mr_model_dump(m, "l_out", il, x, d, n);
    }
    if (logits) {
        const int first = all_logits ? 0 : n - 1, nr = all_logits ? n : 1;
        mr_rms_norm_rows(h, x + first * d, M->output_norm, d, nr, M->eps);
        mr_model_dump(m, "result_norm", -1, h, d, nr);
        if (mr_model_matmul(m, &M->output, h, nr, logits)) return -1;
        mr_model_dump(m, "result_output", -1, logits, V, nr);
    }
    return 0;
}

const struct mr_arch mr_arch_deepseek2 = {
    .name = "deepseek2",
    .load = ds2_load,
    .free = ds2_free,
    .state_new = ds2_state_new,
    .state_free = ds2_state_free,
    .state_reset = ds2_state_reset,
    .eval = ds2_eval,
    .state_truncate = ds2_state_truncate,
    .state_io = ds2_state_io,
    .check_tensors = 1,
};
