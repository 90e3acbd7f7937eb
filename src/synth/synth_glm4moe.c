/* moerun synth: glm4moe shapes (GLM-4.5 / 4.6, GLM-4.5-Air) with the metadata keys and tensors the
 * reference fork's loader reads for LLM_ARCH_GLM4_MOE, including the multi-token-prediction block
 * after the last layer (block_count = layers + 1, nextn_predict_layers = 1; the forward pass skips it),
 * as the published GGUFs have it. Values: weights N(0, 1/fan_in), norm weights 1 + N(0, 0.2^2),
 * q/k/v biases N(0, 0.1^2), selection bias exp_probs_b N(0, 0.05^2), token embedding N(0, 1). */
#include "synth/synth.h"
#include "quant/quant.h"
#include "base/base.h"

#include <string.h>

typedef struct {
    const char *name, *desc;
    int d, L, V, H, Hkv, hd, rot, n_ff, E, K, Fe, Ns, n_dense, qk_norm, n_ctx;
    float rope_base, w_scale;
} glm_shape;

/* from the models' config.json (L without the MTP block) */
static const glm_shape glm_shapes[] = {
    {"glm-4.6", "GLM-4.6 / GLM-4.5 355B (92 layers + MTP, d 5120, 160 experts top-8 + 1 shared, 96 heads / 8 KV of 128)",
     5120, 92, 151552, 96, 8, 128, 64, 12288, 160, 8, 1536, 1, 3, 1, 202752, 1000000.0f, 2.5f},
    {"glm-4.5-air", "GLM-4.5-Air 106B (46 layers + MTP, d 4096, 128 experts top-8 + 1 shared, 96 heads / 8 KV of 128)",
     4096, 46, 151552, 96, 8, 128, 64, 10944, 128, 8, 1408, 1, 1, 0, 131072, 1000000.0f, 1.0f},
    {"glm4moe-tiny", "tiny glm4moe for tests (3 layers + MTP, 1 dense, d 256, 16 experts top-4 + 1 shared, 4 heads / 2 KV of 64)",
     256, 3, 512, 4, 2, 64, 32, 512, 16, 4, 128, 1, 1, 1, 131072, 1000000.0f, 2.5f},
};
#define GLM_N_SHAPES (int)(sizeof glm_shapes / sizeof glm_shapes[0])

static const glm_shape *glm_find(const char *name) {
    for (int i = 0; i < GLM_N_SHAPES; i++)
        if (!strcmp(glm_shapes[i].name, name)) return &glm_shapes[i];
    return NULL;
}

int synth_glm_has_shape(const char *name) { return glm_find(name) != NULL; }

void synth_glm_list(FILE *out) {
    for (int i = 0; i < GLM_N_SHAPES; i++) fprintf(out, "  %-18s glm4moe: %s\n", glm_shapes[i].name, glm_shapes[i].desc);
}

static int mat(synth_ctx *c, int type, const char *fmt, int l, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2) {
    return synth_add(c, SYNTH_POOL, synth_fit_type(type, ne0), fmt, l, n_dims, ne0, ne1, ne2) ? 0 : -1;
}

static int vec(synth_ctx *c, const char *fmt, int l, int64_t ne0, float std) {
    synth_tensor *t = synth_add(c, SYNTH_VEC, MR_TYPE_F32, fmt, l, 1, ne0, 1, 1);
    if (!t) return -1;
    t->std = std;
    return 0;
}

static int glm_layer(synth_ctx *c, const glm_shape *s, const synth_mix *mx, int l) {
    const int A = mx->attn;
    const int64_t d = s->d, q = (int64_t)s->H * s->hd, kv = (int64_t)s->Hkv * s->hd;
    if (synth_norm(c, "blk.%d.attn_norm.weight", l, d) || synth_norm(c, "blk.%d.post_attention_norm.weight", l, d) ||
        mat(c, A, "blk.%d.attn_q.weight", l, 2, d, q, 1) || vec(c, "blk.%d.attn_q.bias", l, q, 0.1f) ||
        mat(c, A, "blk.%d.attn_k.weight", l, 2, d, kv, 1) || vec(c, "blk.%d.attn_k.bias", l, kv, 0.1f) ||
        mat(c, A, "blk.%d.attn_v.weight", l, 2, d, kv, 1) || vec(c, "blk.%d.attn_v.bias", l, kv, 0.1f) ||
        mat(c, A, "blk.%d.attn_output.weight", l, 2, q, d, 1))
        return -1;
    if (s->qk_norm && (synth_norm(c, "blk.%d.attn_q_norm.weight", l, s->hd) || synth_norm(c, "blk.%d.attn_k_norm.weight", l, s->hd)))
        return -1;
    if (l < s->n_dense)
        return mat(c, A, "blk.%d.ffn_gate.weight", l, 2, d, s->n_ff, 1) || mat(c, A, "blk.%d.ffn_up.weight", l, 2, d, s->n_ff, 1) ||
               mat(c, A, "blk.%d.ffn_down.weight", l, 2, s->n_ff, d, 1) ? -1 : 0;
    const int64_t Fs = (int64_t)s->Fe * s->Ns;
    if (!synth_add(c, SYNTH_ROUTER, MR_TYPE_F32, "blk.%d.ffn_gate_inp.weight", l, 2, d, s->E, 1)) return -1;
    synth_tensor *t = synth_add(c, SYNTH_BIAS, MR_TYPE_F32, "blk.%d.exp_probs_b.bias", l, 1, s->E, 1, 1);
    if (!t) return -1;
    t->std = 0.05f;
    return mat(c, mx->gate_up, "blk.%d.ffn_gate_exps.weight", l, 3, d, s->Fe, s->E) ||
           mat(c, mx->gate_up, "blk.%d.ffn_up_exps.weight", l, 3, d, s->Fe, s->E) ||
           mat(c, mx->down, "blk.%d.ffn_down_exps.weight", l, 3, s->Fe, d, s->E) ||
           mat(c, A, "blk.%d.ffn_gate_shexp.weight", l, 2, d, Fs, 1) || mat(c, A, "blk.%d.ffn_up_shexp.weight", l, 2, d, Fs, 1) ||
           mat(c, A, "blk.%d.ffn_down_shexp.weight", l, 2, Fs, d, 1) ? -1 : 0;
}

int synth_glm_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer) {
    const glm_shape *s = glm_find(shape);
    if (!s) { mr_set_error("synth: unknown glm4moe shape '%s'", shape); return -1; }
    if (p->ratios) { mr_set_error("synth: --ratios applies to deepseek4 shapes only"); return -1; }
    int L = *n_layer ? *n_layer : s->L;
    if (L < 1 || L > s->L) { mr_set_error("synth: --layers %d: shape %s has %d layers", L, shape, s->L); return -1; }
    *n_layer = L;
    c->d = s->d;
    c->n_expert = s->E;
    char key[128];
    const char *a = "glm4moe";
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_u32(w, key, (uint32_t)(v)))
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_f32(w, key, (float)(v)))
#define SETB(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_bool(w, key, (v)))
    if (mr_gguf_writer_set_str(w, "general.architecture", a) || SETU("context_length", s->n_ctx) ||
        SETU("embedding_length", s->d) || SETU("block_count", L + 1) || SETU("feed_forward_length", s->n_ff) ||
        SETU("attention.head_count", s->H) || SETU("attention.head_count_kv", s->Hkv) ||
        SETU("attention.key_length", s->hd) || SETU("attention.value_length", s->hd) ||
        SETU("rope.dimension_count", s->rot) || SETF("rope.freq_base", s->rope_base) ||
        SETF("attention.layer_norm_rms_epsilon", 1e-5) || SETU("expert_count", s->E) || SETU("expert_used_count", s->K) ||
        SETU("expert_feed_forward_length", s->Fe) || SETU("expert_shared_count", s->Ns) ||
        SETU("leading_dense_block_count", s->n_dense) || SETF("expert_weights_scale", s->w_scale) ||
        SETB("expert_weights_norm", 1) || SETU("expert_gating_func", 2) || SETU("nextn_predict_layers", 1) ||
        SETU("vocab_size", s->V))
        return -1;
#undef SETU
#undef SETF
#undef SETB
    if (synth_vocab(w, s->V)) return -1;
    const int64_t d = s->d;
    synth_tensor *t = synth_add(c, SYNTH_EMBD, mx->embd, "token_embd.weight", 0, 2, d, s->V, 1);
    if (!t) return -1;
    t->std = 1.0f;
    if (synth_norm(c, "output_norm.weight", 0, d) || mat(c, mx->head, "output.weight", 0, 2, d, s->V, 1)) return -1;
    for (int l = 0; l <= L; l++)
        if (glm_layer(c, s, mx, l)) return -1;
    /* the MTP block's own tensors (unused by the forward pass) */
    if (mat(c, mx->attn, "blk.%d.nextn.eh_proj.weight", L, 2, 2 * d, d, 1) || synth_norm(c, "blk.%d.nextn.enorm.weight", L, d) ||
        synth_norm(c, "blk.%d.nextn.hnorm.weight", L, d) || synth_norm(c, "blk.%d.nextn.shared_head_norm.weight", L, d))
        return -1;
    return 0;
}
