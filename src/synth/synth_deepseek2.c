/* moerun synth: deepseek2 shapes (DeepSeek-V3 / R1, Kimi-K2) with the metadata keys and tensors the
 * reference fork's loader reads for LLM_ARCH_DEEPSEEK2 (MLA with split attn_k_b / attn_v_b).
 * Values: weights N(0, 1/fan_in), norm weights 1 + N(0, 0.2^2) (so a norm applied with the wrong
 * weight shows), router rows N(0, 1/d), selection bias exp_probs_b N(0, 0.05^2) (+ the Zipf skew of
 * --zipf), token embedding N(0, 1). Matrices whose rows do not fit the mix's block (attn_k_b's
 * nope columns under a k-quant) fall back to Q8_0, like llama-quantize's fallback types. */
#include "synth/synth.h"
#include "quant/quant.h"
#include "base/base.h"

#include <string.h>

typedef struct {
    const char *name, *desc;
    int d, L, V, H, q_lora, kv_lora, nope, rope, dv, n_ff, E, K, Fe, Ns, n_dense, n_group, n_group_used, n_ctx, n_orig;
    float w_scale, rope_base, rope_factor;
    int mtp; /* MTP blocks after the L layers (GLM-4.7-Flash's layout in mainline's converter) */
} ds2_shape;

/* DeepSeek-V3 / R1 and Kimi-K2 from their config.json (Kimi: 64 heads, 384 experts, one group,
 * one dense layer, rope theta 50000, factor 32). */
static const ds2_shape ds2_shapes[] = {
    {"deepseek-v3", "DeepSeek-V3 / R1 671B (61 layers, d 7168, 256 experts top-8 in 8 groups, MLA 128 heads)",
     7168, 61, 129280, 128, 1536, 512, 128, 64, 128, 18432, 256, 8, 2048, 1, 3, 8, 4, 163840, 4096, 2.5f, 10000.0f, 40.0f, 0},
    {"kimi-k2", "Kimi-K2 1T (61 layers, d 7168, 384 experts top-8, MLA 64 heads)",
     7168, 61, 163840, 64, 1536, 512, 128, 64, 128, 18432, 384, 8, 2048, 1, 1, 1, 1, 131072, 4096, 2.827f, 50000.0f, 32.0f, 0},
    {"deepseek2-tiny", "tiny deepseek2 for tests (3 layers, 1 dense, d 256, 16 experts top-4 in 4 groups, MLA 4 heads)",
     256, 3, 512, 4, 128, 64, 32, 32, 32, 512, 16, 4, 128, 1, 1, 4, 2, 163840, 4096, 2.5f, 10000.0f, 40.0f, 0},
    {"deepseek2-tiny-mtp", "deepseek2-tiny + 1 MTP block and nextn_predict_layers (mainline's GLM-4.7-Flash layout)",
     256, 3, 512, 4, 128, 64, 32, 32, 32, 512, 16, 4, 128, 1, 1, 4, 2, 163840, 4096, 2.5f, 10000.0f, 40.0f, 1},
};
#define DS2_N_SHAPES (int)(sizeof ds2_shapes / sizeof ds2_shapes[0])

static const ds2_shape *ds2_find(const char *name) {
    for (int i = 0; i < DS2_N_SHAPES; i++)
        if (!strcmp(ds2_shapes[i].name, name)) return &ds2_shapes[i];
    return NULL;
}

int synth_ds2_has_shape(const char *name) { return ds2_find(name) != NULL; }

void synth_ds2_list(FILE *out) {
    for (int i = 0; i < DS2_N_SHAPES; i++)
        fprintf(out, "  %-18s deepseek2: %s\n", ds2_shapes[i].name, ds2_shapes[i].desc);
}

/* the mix's type when ne0 fits its blocks, else Q8_0 (or F16) */
int synth_fit_type(int type, int64_t ne0) {
    if (mr_row_size(type, ne0)) return type;
    return mr_row_size(MR_TYPE_Q8_0, ne0) ? MR_TYPE_Q8_0 : MR_TYPE_F16;
}

static int mat(synth_ctx *c, int type, const char *fmt, int l, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2) {
    return synth_add(c, SYNTH_POOL, synth_fit_type(type, ne0), fmt, l, n_dims, ne0, ne1, ne2) ? 0 : -1;
}

int synth_norm(synth_ctx *c, const char *fmt, int l, int64_t n) {
    synth_tensor *t = synth_add(c, SYNTH_VEC, MR_TYPE_F32, fmt, l, 1, n, 1, 1);
    if (!t) return -1;
    t->mean = 1.0f;
    t->std = 0.2f;
    return 0;
}

static int ds2_metadata(mr_gguf_writer *w, const ds2_shape *s, int L) {
    char key[128];
    const char *a = "deepseek2";
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_u32(w, key, (uint32_t)(v)))
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_f32(w, key, (float)(v)))
#define SETB(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_bool(w, key, (v)))
#define SETS(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_str(w, key, (v)))
    /* as convert_hf_to_gguf.py writes DeepseekV2Model/DeepseekV3 (MLA: one KV head of kv_lora + rope) */
    if (mr_gguf_writer_set_str(w, "general.architecture", a) || SETU("context_length", s->n_ctx) ||
        SETU("embedding_length", s->d) || SETU("block_count", L + s->mtp) || SETU("feed_forward_length", s->n_ff) ||
        SETU("attention.head_count", s->H) || SETU("attention.head_count_kv", 1) ||
        SETF("rope.freq_base", s->rope_base) || SETF("attention.layer_norm_rms_epsilon", 1e-6) ||
        SETU("expert_used_count", s->K) || SETU("expert_group_count", s->n_group) ||
        SETU("expert_group_used_count", s->n_group_used) || SETU("leading_dense_block_count", s->n_dense) ||
        SETU("vocab_size", s->V) || SETU("attention.q_lora_rank", s->q_lora) ||
        SETU("attention.kv_lora_rank", s->kv_lora) || SETU("attention.key_length", s->kv_lora + s->rope) ||
        SETU("attention.value_length", s->kv_lora) || SETU("attention.key_length_mla", s->nope + s->rope) ||
        SETU("attention.value_length_mla", s->dv) || SETU("expert_feed_forward_length", s->Fe) ||
        SETU("expert_count", s->E) || SETU("expert_shared_count", s->Ns) || SETF("expert_weights_scale", s->w_scale) ||
        SETB("expert_weights_norm", 1) || SETU("expert_gating_func", 2) || SETU("rope.dimension_count", s->rope) ||
        SETS("rope.scaling.type", "yarn") || SETF("rope.scaling.factor", s->rope_factor) ||
        SETU("rope.scaling.original_context_length", s->n_orig) || SETF("rope.scaling.yarn_log_multiplier", 0.1f) ||
        (s->mtp && SETU("nextn_predict_layers", s->mtp)))
        return -1;
#undef SETU
#undef SETF
#undef SETB
#undef SETS
    return 0;
}

int synth_ds2_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer) {
    const ds2_shape *s = ds2_find(shape);
    if (!s) { mr_set_error("synth: unknown deepseek2 shape '%s'", shape); return -1; }
    if (p->ratios) { mr_set_error("synth: --ratios applies to deepseek4 shapes only"); return -1; }
    int L = *n_layer ? *n_layer : s->L;
    if (L < 1 || L > s->L) { mr_set_error("synth: --layers %d: shape %s has %d layers", L, shape, s->L); return -1; }
    *n_layer = L;
    c->d = s->d;
    c->n_expert = s->E;
    if (ds2_metadata(w, s, L) || synth_vocab(w, s->V)) return -1;
    const int A = mx->attn;
    const int64_t d = s->d, dk = s->nope + s->rope;
    synth_tensor *t = synth_add(c, SYNTH_EMBD, mx->embd, "token_embd.weight", 0, 2, d, s->V, 1);
    if (!t) return -1;
    t->std = 1.0f;
    if (synth_norm(c, "output_norm.weight", 0, d) || mat(c, mx->head, "output.weight", 0, 2, d, s->V, 1)) return -1;
    for (int l = 0; l < L + s->mtp; l++) {
        if (l >= L && /* MTP block: a routed layer + eh_proj [2d -> d] and its norms */
            (mat(c, A, "blk.%d.nextn.eh_proj.weight", l, 2, 2 * d, d, 1) || synth_norm(c, "blk.%d.nextn.enorm.weight", l, d) ||
             synth_norm(c, "blk.%d.nextn.hnorm.weight", l, d) || synth_norm(c, "blk.%d.nextn.shared_head_norm.weight", l, d)))
            return -1;
        if (synth_norm(c, "blk.%d.attn_norm.weight", l, d) || synth_norm(c, "blk.%d.attn_q_a_norm.weight", l, s->q_lora) ||
            synth_norm(c, "blk.%d.attn_kv_a_norm.weight", l, s->kv_lora) || synth_norm(c, "blk.%d.ffn_norm.weight", l, d) ||
            mat(c, A, "blk.%d.attn_q_a.weight", l, 2, d, s->q_lora, 1) ||
            mat(c, A, "blk.%d.attn_q_b.weight", l, 2, s->q_lora, (int64_t)s->H * dk, 1) ||
            mat(c, A, "blk.%d.attn_kv_a_mqa.weight", l, 2, d, s->kv_lora + s->rope, 1) ||
            mat(c, A, "blk.%d.attn_k_b.weight", l, 3, s->nope, s->kv_lora, s->H) ||
            mat(c, A, "blk.%d.attn_v_b.weight", l, 3, s->kv_lora, s->dv, s->H) ||
            mat(c, A, "blk.%d.attn_output.weight", l, 2, (int64_t)s->H * s->dv, d, 1))
            return -1;
        if (l < s->n_dense) {
            if (mat(c, A, "blk.%d.ffn_gate.weight", l, 2, d, s->n_ff, 1) || mat(c, A, "blk.%d.ffn_up.weight", l, 2, d, s->n_ff, 1) ||
                mat(c, A, "blk.%d.ffn_down.weight", l, 2, s->n_ff, d, 1))
                return -1;
            continue;
        }
        const int64_t Fs = (int64_t)s->Fe * s->Ns;
        if (!synth_add(c, SYNTH_ROUTER, MR_TYPE_F32, "blk.%d.ffn_gate_inp.weight", l, 2, d, s->E, 1) ||
            !(t = synth_add(c, SYNTH_BIAS, MR_TYPE_F32, "blk.%d.exp_probs_b.bias", l, 1, s->E, 1, 1)) ||
            mat(c, mx->gate_up, "blk.%d.ffn_gate_exps.weight", l, 3, d, s->Fe, s->E) ||
            mat(c, mx->gate_up, "blk.%d.ffn_up_exps.weight", l, 3, d, s->Fe, s->E) ||
            mat(c, mx->down, "blk.%d.ffn_down_exps.weight", l, 3, s->Fe, d, s->E) ||
            mat(c, A, "blk.%d.ffn_gate_shexp.weight", l, 2, d, Fs, 1) || mat(c, A, "blk.%d.ffn_up_shexp.weight", l, 2, d, Fs, 1) ||
            mat(c, A, "blk.%d.ffn_down_shexp.weight", l, 2, Fs, d, 1))
            return -1;
        t->std = 0.05f;
    }
    return 0;
}
