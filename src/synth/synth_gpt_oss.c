/* moerun synth: gpt-oss shapes (gpt-oss-20b / 120b) with the metadata keys and tensors the reference
 * fork's loader reads for LLM_ARCH_OPENAI_MOE ("gpt-oss"). Values: weights N(0, 1/fan_in), norm weights
 * 1 + N(0, 0.2^2), biases N(0, 0.1^2), attention sinks N(0, 1), router rows N(0, 1/d), token
 * embedding N(0, 1). The published GGUFs keep the experts in MXFP4 (the "mxfp4" mix). */
#include "synth/synth.h"
#include "quant/quant.h"
#include "base/base.h"

#include <string.h>

typedef struct {
    const char *name, *desc;
    int d, L, V, H, Hkv, hd, E, K, Fe, swa, n_ctx, n_orig;
    float rope_base, rope_factor;
} oss_shape;

/* from the models' config.json */
static const oss_shape oss_shapes[] = {
    {"gpt-oss-120b", "gpt-oss-120b (36 layers, d 2880, 128 experts top-4, 64 heads / 8 KV of 64, window 128)",
     2880, 36, 201088, 64, 8, 64, 128, 4, 2880, 128, 131072, 4096, 150000.0f, 32.0f},
    {"gpt-oss-20b", "gpt-oss-20b (24 layers, d 2880, 32 experts top-4, 64 heads / 8 KV of 64, window 128)",
     2880, 24, 201088, 64, 8, 64, 32, 4, 2880, 128, 131072, 4096, 150000.0f, 32.0f},
    {"gpt-oss-tiny", "tiny gpt-oss for tests (3 layers, d 256, 16 experts top-4, 4 heads / 2 KV of 64, window 16)",
     256, 3, 512, 4, 2, 64, 16, 4, 128, 16, 131072, 4096, 150000.0f, 32.0f},
};
#define OSS_N_SHAPES (int)(sizeof oss_shapes / sizeof oss_shapes[0])

static const oss_shape *oss_find(const char *name) {
    for (int i = 0; i < OSS_N_SHAPES; i++)
        if (!strcmp(oss_shapes[i].name, name)) return &oss_shapes[i];
    return NULL;
}

int synth_oss_has_shape(const char *name) { return oss_find(name) != NULL; }

void synth_oss_list(FILE *out) {
    for (int i = 0; i < OSS_N_SHAPES; i++) fprintf(out, "  %-18s gpt-oss: %s\n", oss_shapes[i].name, oss_shapes[i].desc);
}

static int mat(synth_ctx *c, int type, const char *fmt, int l, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2) {
    return synth_add(c, SYNTH_POOL, synth_fit_type(type, ne0), fmt, l, n_dims, ne0, ne1, ne2) ? 0 : -1;
}

static int vec(synth_ctx *c, const char *fmt, int l, int n_dims, int64_t ne0, int64_t ne1, float std) {
    synth_tensor *t = synth_add(c, SYNTH_VEC, MR_TYPE_F32, fmt, l, n_dims, ne0, ne1, 1);
    if (!t) return -1;
    t->std = std;
    return 0;
}

int synth_oss_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer) {
    const oss_shape *s = oss_find(shape);
    if (!s) { mr_set_error("synth: unknown gpt-oss shape '%s'", shape); return -1; }
    if (p->ratios) { mr_set_error("synth: --ratios applies to deepseek4 shapes only"); return -1; }
    int L = *n_layer ? *n_layer : s->L;
    if (L < 1 || L > s->L) { mr_set_error("synth: --layers %d: shape %s has %d layers", L, shape, s->L); return -1; }
    *n_layer = L;
    c->d = s->d;
    c->n_expert = s->E;
    char key[128];
    const char *a = "gpt-oss";
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_u32(w, key, (uint32_t)(v)))
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_f32(w, key, (float)(v)))
#define SETS(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_str(w, key, (v)))
    if (mr_gguf_writer_set_str(w, "general.architecture", a) || SETU("context_length", s->n_ctx) ||
        SETU("embedding_length", s->d) || SETU("block_count", L) || SETU("feed_forward_length", s->Fe) ||
        SETU("attention.head_count", s->H) || SETU("attention.head_count_kv", s->Hkv) ||
        SETU("attention.key_length", s->hd) || SETU("attention.value_length", s->hd) ||
        SETU("rope.dimension_count", s->hd) || SETF("rope.freq_base", s->rope_base) ||
        SETF("attention.layer_norm_rms_epsilon", 1e-5) || SETU("attention.sliding_window", s->swa) ||
        SETU("expert_count", s->E) || SETU("expert_used_count", s->K) || SETU("expert_feed_forward_length", s->Fe) ||
        SETS("rope.scaling.type", "yarn") || SETF("rope.scaling.factor", s->rope_factor) ||
        SETU("rope.scaling.original_context_length", s->n_orig) || SETU("vocab_size", s->V))
        return -1;
#undef SETU
#undef SETF
#undef SETS
    if (synth_vocab(w, s->V)) return -1;
    const int A = mx->attn;
    const int64_t d = s->d, q = (int64_t)s->H * s->hd, kv = (int64_t)s->Hkv * s->hd;
    synth_tensor *t = synth_add(c, SYNTH_EMBD, mx->embd, "token_embd.weight", 0, 2, d, s->V, 1);
    if (!t) return -1;
    t->std = 1.0f;
    if (synth_norm(c, "output_norm.weight", 0, d) || mat(c, mx->head, "output.weight", 0, 2, d, s->V, 1)) return -1;
    for (int l = 0; l < L; l++) {
        if (synth_norm(c, "blk.%d.attn_norm.weight", l, d) || synth_norm(c, "blk.%d.post_attention_norm.weight", l, d) ||
            mat(c, A, "blk.%d.attn_q.weight", l, 2, d, q, 1) || vec(c, "blk.%d.attn_q.bias", l, 1, q, 1, 0.1f) ||
            mat(c, A, "blk.%d.attn_k.weight", l, 2, d, kv, 1) || vec(c, "blk.%d.attn_k.bias", l, 1, kv, 1, 0.1f) ||
            mat(c, A, "blk.%d.attn_v.weight", l, 2, d, kv, 1) || vec(c, "blk.%d.attn_v.bias", l, 1, kv, 1, 0.1f) ||
            mat(c, A, "blk.%d.attn_output.weight", l, 2, q, d, 1) || vec(c, "blk.%d.attn_output.bias", l, 1, d, 1, 0.1f) ||
            vec(c, "blk.%d.attn_sinks.weight", l, 1, s->H, 1, 1.0f) ||
            !synth_add(c, SYNTH_ROUTER, MR_TYPE_F32, "blk.%d.ffn_gate_inp.weight", l, 2, d, s->E, 1) ||
            vec(c, "blk.%d.ffn_gate_inp.bias", l, 1, s->E, 1, 0.1f) ||
            mat(c, mx->gate_up, "blk.%d.ffn_gate_exps.weight", l, 3, d, s->Fe, s->E) ||
            vec(c, "blk.%d.ffn_gate_exps.bias", l, 2, s->Fe, s->E, 0.1f) ||
            mat(c, mx->gate_up, "blk.%d.ffn_up_exps.weight", l, 3, d, s->Fe, s->E) ||
            vec(c, "blk.%d.ffn_up_exps.bias", l, 2, s->Fe, s->E, 0.1f) ||
            mat(c, mx->down, "blk.%d.ffn_down_exps.weight", l, 3, s->Fe, d, s->E) ||
            vec(c, "blk.%d.ffn_down_exps.bias", l, 2, d, s->E, 0.1f))
            return -1;
    }
    return 0;
}
