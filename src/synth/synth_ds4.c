/* moerun synth: deepseek4 (DeepSeek-V4) shapes. Metadata keys, tensor names, shapes and the published
 * GGUFs' types follow shared/specs/deepseek4.md §1-2; value scales follow the shared tiny-deepseek4
 * models (weights N(0, 1/fan_in), embedding N(0, 1), HC base N(0, 0.25), HC scales 0.5, sinks and
 * compressor position biases of a few tenths), which keep activations finite at any depth: every
 * block output is RMS-normalised input times fan-in-scaled weights, and the hyper-connections add it
 * to the streams through a doubly stochastic mix.
 *
 * Routing: hash layers (il < hash_layer_count) read ffn_gate_tid2eid, k distinct expert ids per token
 * drawn with Zipf(zipf) popularity; the other layers select by sqrt(softplus(router logits)) +
 * exp_probs_b, and exp_probs_b = -SYNTH_BIAS_T * zipf * ln(e+1) makes expert e's share fall off like
 * (e+1)^-zipf. */
#include "synth/synth.h"
#include "quant/quant.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

#define DS4_MAX_LAYERS 256

typedef struct {
    const char *name, *desc;
    int d, L, V, H, D, R, G, rq, ro, E, K, F, Ns, Lh, W, Hi, Di, topk, Nh, n_ctx, n_orig;
} ds4_shape;

/* DeepSeek-V4-Flash values: spec §0 (from ds4.c, checked against the published GGUF). */
static const ds4_shape ds4_shapes[] = {
    {"deepseek-v4-flash", "DeepSeek-V4-Flash (43 layers, d 4096, 256 experts top-6, 64 heads of 512)",
     4096, 43, 129280, 64, 512, 64, 8, 1024, 1024, 256, 6, 2048, 1, 3, 128, 64, 128, 512, 4, 1048576, 65536},
    {"deepseek-v4-mini", "small deepseek4 (8 layers, d 1024, 64 experts top-6, 16 heads of 512, indexer top-k 64)",
     1024, 8, 16384, 16, 512, 64, 4, 256, 256, 64, 6, 512, 1, 3, 128, 16, 128, 64, 4, 65536, 4096},
    {"deepseek-v4-tiny", "tiny deepseek4 for tests (4 layers, d 256, 4 experts top-2, like shared/models)",
     256, 4, 2048, 4, 128, 64, 2, 128, 64, 4, 2, 256, 1, 1, 16, 2, 128, 512, 4, 4096, 256},
    /* head size 128 differs from the indexer's 64, as in V4-Flash (512 and 128): mainline llama.cpp
     * v0.5.0's MTP context divides by zero when they are equal (docs/DEEPSEEK4.md) */
    {"deepseek-v4-tiny-di64", "tiny deepseek4 with a 64-wide indexer key (head 128 != indexer 64, like V4-Flash)",
     256, 4, 2048, 4, 128, 64, 2, 128, 64, 4, 2, 256, 1, 1, 16, 2, 64, 512, 4, 4096, 256},
};
#define DS4_N_SHAPES (int)(sizeof ds4_shapes / sizeof ds4_shapes[0])

static const ds4_shape *ds4_find(const char *name) {
    for (int i = 0; i < DS4_N_SHAPES; i++)
        if (!strcmp(ds4_shapes[i].name, name)) return &ds4_shapes[i];
    return NULL;
}

int synth_ds4_has_shape(const char *name) { return ds4_find(name) != NULL; }

void synth_ds4_list(FILE *out) {
    for (int i = 0; i < DS4_N_SHAPES; i++)
        fprintf(out, "  %-18s deepseek4: %s\n", ds4_shapes[i].name, ds4_shapes[i].desc);
}

/* V4-Flash layout (spec §0): layers 0,1 dense-window, then 4 (CSA) on even and 128 (HCA) on odd layers. */
static int ds4_default_ratio(int l) { return l < 2 ? 0 : l % 2 == 0 ? 4 : 128; }

/* L = block_count (trunk layers + n_mtp MTP blocks); shexp > 0 writes swiglu_clamp_shexp */
static int ds4_metadata(mr_gguf_writer *w, const char *a, const ds4_shape *s, int L, const int *ratios, int Lh,
                        int n_mtp, float shexp) {
    char key[128];
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_u32(w, key, (uint32_t)(v)))
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_f32(w, key, (float)(v)))
#define SETB(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_bool(w, key, (v)))
#define SETS(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_str(w, key, (v)))
    float clamp[DS4_MAX_LAYERS + 1], clamp_sh[DS4_MAX_LAYERS + 1];
    int32_t r32[DS4_MAX_LAYERS + 1];
    for (int l = 0; l < L; l++) { clamp[l] = 10.0f; clamp_sh[l] = shexp; r32[l] = ratios[l]; }
    if (mr_gguf_writer_set_str(w, "general.architecture", a) || SETU("context_length", s->n_ctx) ||
        SETU("embedding_length", s->d) || SETU("block_count", L) || SETU("feed_forward_length", s->F) ||
        SETU("expert_feed_forward_length", s->F) || SETU("expert_count", s->E) || SETU("expert_used_count", s->K) ||
        SETU("expert_shared_count", s->Ns) || SETF("expert_weights_scale", 1.5) || SETB("expert_weights_norm", 1) ||
        SETU("expert_gating_func", 4) || SETU("attention.head_count", s->H) || SETU("attention.head_count_kv", 1) ||
        SETU("attention.key_length", s->D) || SETU("attention.value_length", s->D) ||
        SETU("rope.dimension_count", s->R) || SETF("rope.freq_base", 10000) || SETS("rope.scaling.type", "yarn") ||
        SETF("rope.scaling.factor", 16) || SETU("rope.scaling.original_context_length", s->n_orig) ||
        SETF("attention.layer_norm_rms_epsilon", 1e-6) || SETU("attention.q_lora_rank", s->rq) ||
        SETU("attention.output_lora_rank", s->ro) || SETU("attention.output_group_count", s->G) ||
        SETU("attention.sliding_window", s->W) || SETF("attention.compress_rope_freq_base", 160000) ||
        SETU("attention.indexer.head_count", s->Hi) || SETU("attention.indexer.key_length", s->Di) ||
        SETU("attention.indexer.top_k", s->topk) || SETU("hash_layer_count", Lh) ||
        SETU("hyper_connection.count", s->Nh) || SETU("hyper_connection.sinkhorn_iterations", 20) ||
        SETF("hyper_connection.epsilon", 1e-6) || SETU("vocab_size", s->V) ||
        (n_mtp > 0 && SETU("nextn_predict_layers", n_mtp)))
        return -1;
    snprintf(key, sizeof key, "%s.attention.compress_ratios", a);
    if (mr_gguf_writer_set_kv(w, key, MR_GGUF_ARRAY, MR_GGUF_I32, (uint64_t)L, r32)) return -1;
    snprintf(key, sizeof key, "%s.swiglu_clamp_exp", a);
    if (mr_gguf_writer_set_kv(w, key, MR_GGUF_ARRAY, MR_GGUF_F32, (uint64_t)L, clamp)) return -1;
    snprintf(key, sizeof key, "%s.swiglu_clamp_shexp", a);
    if (shexp > 0 && mr_gguf_writer_set_kv(w, key, MR_GGUF_ARRAY, MR_GGUF_F32, (uint64_t)L, clamp_sh)) return -1;
#undef SETU
#undef SETF
#undef SETB
#undef SETS
    return 0;
}

/* A vector of mean + std * N(0,1) values. */
static int ds4_vec(synth_ctx *c, const char *fmt, int l, int64_t n, float mean, float std) {
    synth_tensor *t = synth_add(c, SYNTH_VEC, MR_TYPE_F32, fmt, l, 1, n, 1, 1);
    if (!t) return -1;
    t->mean = mean;
    t->std = std;
    return 0;
}

/* A random matrix {ne0, ne1} of the given type with RMS std (0: 1/sqrt(ne0)). */
static int ds4_mat(synth_ctx *c, int type, const char *fmt, int l, int64_t ne0, int64_t ne1, float std) {
    synth_tensor *t = synth_add(c, SYNTH_POOL, type, fmt, l, 2, ne0, ne1, 1);
    if (!t) return -1;
    if (std > 0) t->std = std;
    return 0;
}

static int ds4_ones(synth_ctx *c, const char *fmt, int l, int64_t n) {
    return synth_add(c, SYNTH_ONES, MR_TYPE_F32, fmt, l, 1, n, 1, 1) ? 0 : -1;
}

static int ds4_layer(synth_ctx *c, const ds4_shape *s, const synth_mix *mx, int l, int ratio, int hash) {
    const int F16 = MR_TYPE_F16, A = mx->attn;
    const int64_t d = s->d, hcd = (int64_t)s->Nh * s->d, mix = (int64_t)(2 + s->Nh) * s->Nh;
    synth_tensor *t;
    /* hyper-connections (spec §3.1): F16 mixers, F32 base and [pre, post, comb] scales */
    if (ds4_mat(c, F16, "blk.%d.hc_attn_fn.weight", l, hcd, mix, 0) ||
        ds4_vec(c, "blk.%d.hc_attn_base.weight", l, mix, 0, 0.5f) ||
        ds4_vec(c, "blk.%d.hc_attn_scale.weight", l, 3, 0.5f, 0) ||
        ds4_mat(c, F16, "blk.%d.hc_ffn_fn.weight", l, hcd, mix, 0) ||
        ds4_vec(c, "blk.%d.hc_ffn_base.weight", l, mix, 0, 0.5f) ||
        ds4_vec(c, "blk.%d.hc_ffn_scale.weight", l, 3, 0.5f, 0) ||
        ds4_ones(c, "blk.%d.attn_norm.weight", l, d) || ds4_ones(c, "blk.%d.ffn_norm.weight", l, d))
        return -1;
    /* attention (§3.3, §3.8): low-rank q, one latent kv head, grouped low-rank output */
    if (ds4_vec(c, "blk.%d.attn_sinks.weight", l, s->H, 0, 0.3f) ||
        ds4_mat(c, A, "blk.%d.attn_q_a.weight", l, d, s->rq, 0) ||
        ds4_ones(c, "blk.%d.attn_q_a_norm.weight", l, s->rq) ||
        ds4_mat(c, A, "blk.%d.attn_q_b.weight", l, s->rq, (int64_t)s->H * s->D, 0) ||
        ds4_mat(c, A, "blk.%d.attn_kv.weight", l, d, s->D, 0) ||
        ds4_ones(c, "blk.%d.attn_kv_a_norm.weight", l, s->D) ||
        ds4_mat(c, A, "blk.%d.attn_output_a.weight", l, (int64_t)s->H * s->D / s->G, (int64_t)s->G * s->ro, 0) ||
        ds4_mat(c, A, "blk.%d.attn_output_b.weight", l, (int64_t)s->G * s->ro, d, 0))
        return -1;
    /* MoE (§3.9): F32 router, routed experts {d, F, E} / {F, d, E}, shared expert of width F*Ns */
    const int64_t fs = (int64_t)s->F * s->Ns;
    if (!synth_add(c, SYNTH_ROUTER, MR_TYPE_F32, "blk.%d.ffn_gate_inp.weight", l, 2, d, s->E, 1) ||
        !synth_add(c, SYNTH_POOL, mx->gate_up, "blk.%d.ffn_gate_exps.weight", l, 3, d, s->F, s->E) ||
        !synth_add(c, SYNTH_POOL, mx->gate_up, "blk.%d.ffn_up_exps.weight", l, 3, d, s->F, s->E) ||
        !synth_add(c, SYNTH_POOL, mx->down, "blk.%d.ffn_down_exps.weight", l, 3, s->F, d, s->E) ||
        ds4_mat(c, A, "blk.%d.ffn_gate_shexp.weight", l, d, fs, 0) ||
        ds4_mat(c, A, "blk.%d.ffn_up_shexp.weight", l, d, fs, 0) ||
        ds4_mat(c, A, "blk.%d.ffn_down_shexp.weight", l, fs, d, 0))
        return -1;
    if (hash) { /* token id -> K expert ids */
        if (!synth_add(c, SYNTH_HASH, MR_TYPE_I32, "blk.%d.ffn_gate_tid2eid.weight", l, 2, s->K, s->V, 1)) return -1;
    } else {
        if (!(t = synth_add(c, SYNTH_BIAS, MR_TYPE_F32, "blk.%d.exp_probs_b.bias", l, 1, s->E, 1, 1))) return -1;
        t->std = 0.01f;
    }
    if (ratio == 0) return 0;
    /* compressor (§3.6): 2x width overlapping windows for ratio 4, 1x for ratio 128 */
    const int64_t cw = (ratio == 4 ? 2 : 1) * (int64_t)s->D;
    if (ds4_mat(c, F16, "blk.%d.attn_compressor_ape.weight", l, cw, ratio, 0.5f) ||
        ds4_mat(c, F16, "blk.%d.attn_compressor_kv.weight", l, d, cw, 0) ||
        ds4_mat(c, F16, "blk.%d.attn_compressor_gate.weight", l, d, cw, 0) ||
        ds4_ones(c, "blk.%d.attn_compressor_norm.weight", l, s->D))
        return -1;
    if (ratio != 4) return 0;
    /* indexer (§3.7) with its own 2x compressor */
    if (ds4_mat(c, F16, "blk.%d.indexer.attn_q_b.weight", l, s->rq, (int64_t)s->Hi * s->Di, 0) ||
        ds4_mat(c, F16, "blk.%d.indexer.proj.weight", l, d, s->Hi, 0) ||
        ds4_mat(c, F16, "blk.%d.indexer_compressor_ape.weight", l, 2 * (int64_t)s->Di, 4, 0.5f) ||
        ds4_mat(c, F16, "blk.%d.indexer_compressor_kv.weight", l, d, 2 * (int64_t)s->Di, 0) ||
        ds4_mat(c, F16, "blk.%d.indexer_compressor_gate.weight", l, d, 2 * (int64_t)s->Di, 0) ||
        ds4_ones(c, "blk.%d.indexer_compressor_norm.weight", l, s->Di))
        return -1;
    return 0;
}

/* The MTP block (mainline's conversion of `mtp.0.*`, blk.L with L trunk layers): a ratio-0, non-hash
 * layer plus nextn.eh_proj {2d, d} (the embedding and hidden projections side by side), enorm, hnorm
 * and the shared head norm. */
static int ds4_mtp_block(synth_ctx *c, const ds4_shape *s, const synth_mix *mx, int L) {
    return ds4_layer(c, s, mx, L, 0, 0) || ds4_mat(c, mx->attn, "blk.%d.nextn.eh_proj.weight", L, 2 * (int64_t)s->d, s->d, 0) ||
           synth_norm(c, "blk.%d.nextn.enorm.weight", L, s->d) || synth_norm(c, "blk.%d.nextn.hnorm.weight", L, s->d) ||
           synth_norm(c, "blk.%d.nextn.shared_head_norm.weight", L, s->d) ? -1 : 0;
}

/* A DSpark drafter for the shape (mainline arch `dflash` with hyper_connection.count: graph_dsv4 of
 * src/models/dflash.cpp, the keys and tensors its loader reads): DS4_DSPARK_STAGES full V4 stages
 * (ratio 0, no hash layer), the encoder fc {n_tap*d -> d} + enc.output_norm over the target's taps at
 * dflash.target_layers (the inputs of layers 1, L/2 and the output streams, index L), its own HC head
 * and output_norm, the Markov head markov_w1 {R, V} (rows gathered by token) and markov_w2 {R -> V},
 * the confidence head conf_proj {d + R -> 1} + bias. No token_embd or output: like a full-vocabulary
 * draft it uses the target's. The mask token (the block's positions after the anchor) is V - 1. */
#define DS4_DSPARK_STAGES 2
#define DS4_DSPARK_BLOCK 8
#define DS4_DSPARK_RANK 32
static int ds4_dspark(synth_ctx *c, mr_gguf_writer *w, const ds4_shape *s, const synth_mix *mx, int L) {
    const int32_t targets[3] = {1, L / 2, L};
    const int S = DS4_DSPARK_STAGES, R = DS4_DSPARK_RANK;
    int ratios[DS4_DSPARK_STAGES] = {0};
    synth_tensor *t;
    if (ds4_metadata(w, "dflash", s, S, ratios, 0, 0, 0.0f) || synth_vocab(w, s->V) ||
        mr_gguf_writer_set_u32(w, "dflash.block_size", DS4_DSPARK_BLOCK) ||
        mr_gguf_writer_set_kv(w, "dflash.target_layers", MR_GGUF_ARRAY, MR_GGUF_I32, 3, targets) ||
        mr_gguf_writer_set_u32(w, "tokenizer.ggml.mask_token_id", (uint32_t)(s->V - 1)))
        return -1;
    if (ds4_vec(c, "output_hc_base.weight", 0, s->Nh, 0, 0.1f) ||
        ds4_mat(c, MR_TYPE_F16, "output_hc_fn.weight", 0, (int64_t)s->Nh * s->d, s->Nh, 0) ||
        ds4_vec(c, "output_hc_scale.weight", 0, 1, 0.5f, 0) || ds4_ones(c, "output_norm.weight", 0, s->d) ||
        ds4_mat(c, mx->attn, "fc.weight", 0, 3 * (int64_t)s->d, s->d, 0) ||
        synth_norm(c, "enc.output_norm.weight", 0, s->d) ||
        ds4_mat(c, MR_TYPE_F16, "markov_w1.weight", 0, R, s->V, 1.0f) ||
        ds4_mat(c, mx->head, "markov_w2.weight", 0, R, s->V, 0) ||
        ds4_mat(c, MR_TYPE_F32, "conf_proj.weight", 0, s->d + R, 1, 0))
        return -1;
    if (!(t = synth_add(c, SYNTH_VEC, MR_TYPE_F32, "conf_proj.bias", 0, 1, 1, 1, 1))) return -1;
    t->std = 0.5f;
    for (int l = 0; l < S; l++)
        if (ds4_layer(c, s, mx, l, 0, 0)) return -1;
    return 0;
}

int synth_ds4_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer) {
    const ds4_shape *s = ds4_find(shape);
    if (!s) { mr_set_error("synth: unknown deepseek4 shape '%s'", shape); return -1; }
    const char *layout = p->layout ? p->layout : "trunk";
    const int mtp = !strcmp(layout, "mtp"), mtp_only = !strcmp(layout, "mtp-only"), v41 = !strcmp(layout, "v41");
    if (!mtp && !mtp_only && !v41 && strcmp(layout, "trunk") && strcmp(layout, "dspark")) {
        mr_set_error("synth: unknown deepseek4 layout '%s' (trunk, mtp, mtp-only, dspark, v41)", layout);
        return -1;
    }
    if (p->shexp_clamp < 0) { mr_set_error("synth: --shexp-clamp must be > 0"); return -1; }
    int ratios[DS4_MAX_LAYERS + 1], L = *n_layer;
    if (p->ratios) {
        int n = synth_parse_ratios(p->ratios, ratios, DS4_MAX_LAYERS);
        if (n < 0) return -1;
        if (L == 0) L = n;
        if (n != L) { mr_set_error("synth: --ratios has %d values for %d layers", n, L); return -1; }
    }
    if (L == 0) L = s->L;
    /* deeper than the shape is allowed: the ratio pattern continues (e.g. the mini at 43 layers) */
    if (L < 1 || L > DS4_MAX_LAYERS) { mr_set_error("synth: --layers %d: deepseek4 shapes take 1..%d layers", L, DS4_MAX_LAYERS); return -1; }
    if (!p->ratios)
        for (int l = 0; l < L; l++) ratios[l] = ds4_default_ratio(l);
    const int Lh = s->Lh < L ? s->Lh : L;
    *n_layer = L;
    c->d = s->d;
    c->n_expert = s->E;
    if (!strcmp(layout, "dspark")) return ds4_dspark(c, w, s, mx, L);
    const int n_mtp = mtp || mtp_only;
    ratios[L] = 0; /* the MTP block attends over its window only */
    if (ds4_metadata(w, v41 ? "deepseek41" : "deepseek4", s, L + n_mtp, ratios, Lh, n_mtp, p->shexp_clamp) ||
        synth_vocab(w, s->V))
        return -1;
    /* global tensors (§2.1); the embedding is F16 in every published V4 GGUF */
    synth_tensor *t = synth_add(c, SYNTH_EMBD, MR_TYPE_F16, "token_embd.weight", 0, 2, s->d, s->V, 1);
    if (!t) return -1;
    t->std = 1.0f;
    if (ds4_vec(c, "output_hc_base.weight", 0, s->Nh, 0, 0.1f) ||
        ds4_mat(c, MR_TYPE_F16, "output_hc_fn.weight", 0, (int64_t)s->Nh * s->d, s->Nh, 0) ||
        ds4_vec(c, "output_hc_scale.weight", 0, 1, 0.5f, 0) || ds4_ones(c, "output_norm.weight", 0, s->d) ||
        ds4_mat(c, mx->head, "output.weight", 0, s->d, s->V, 0))
        return -1;
    /* an MTP-only sidecar (mainline's convert --mtp) keeps the embedding, the head and the block only */
    for (int l = 0; !mtp_only && l < L; l++)
        if (ds4_layer(c, s, mx, l, ratios[l], l < Lh)) return -1;
    if (v41 && ds4_mat(c, MR_TYPE_F16, "blk.%d.engram_table.weight", 0, s->d, 64, 0)) return -1;
    return n_mtp ? ds4_mtp_block(c, s, mx, L) : 0;
}
