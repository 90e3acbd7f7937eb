/* moerun synth: qwen35moe shapes (Qwen3.5 / Qwen3.6 MoE: gated delta-net and gated full attention,
 * every 4th layer full) with the metadata keys and tensors the reference fork's loader reads for
 * LLM_ARCH_QWEN35MOE. The two large shapes are written from the author's reading of the published
 * configurations and were not checked against a published GGUF. Values: weights N(0, 1/fan_in), norm
 * weights 1 + N(0, 0.2^2), conv kernels N(0, 1/kernel), ssm_dt N(0, 0.5^2), ssm_a = -exp(N(0, 0.5^2))
 * (negative, as the converter stores -exp(A_log)), router rows N(0, 1/d), token embedding N(0, 1). */
#include "synth/synth.h"
#include "quant/quant.h"
#include "base/base.h"

#include <string.h>

typedef struct {
    const char *name, *desc;
    int d, L, V, H, Hkv, hd, rot, E, K, Fe, Fs, Kc, S, Hk, Hv, interval, n_ctx;
    int sec[4];
    float rope_base;
    int mtp; /* MTP blocks after the L layers, as mainline's converter writes them by default */
} q35_shape;

static const q35_shape q35_shapes[] = {
    {"qwen3.5-397b-a17b", "Qwen3.5-397B-A17B (60 layers, d 4096, 512 experts top-10 + shared, delta net 16/64 heads of 128)",
     4096, 60, 248320, 32, 2, 256, 64, 512, 10, 1024, 1024, 4, 128, 16, 64, 4, 262144, {11, 11, 10, 0}, 10000000.0f, 0},
    {"qwen3.6-35b-a3b", "Qwen3.6-35B-A3B (40 layers, d 2048, 256 experts top-8 + shared, delta net 16/32 heads of 128)",
     2048, 40, 248320, 16, 2, 256, 64, 256, 8, 512, 512, 4, 128, 16, 32, 4, 262144, {11, 11, 10, 0}, 10000000.0f, 0},
    {"qwen35moe-tiny", "tiny qwen35moe for tests (4 layers, 1 full attention, d 256, 16 experts top-4 + shared)",
     256, 4, 512, 4, 2, 64, 32, 16, 4, 128, 128, 4, 32, 2, 4, 4, 262144, {6, 5, 5, 0}, 10000000.0f, 0},
    {"qwen35moe-tiny-mtp", "qwen35moe-tiny + 1 MTP block, nextn_predict_layers and recurrent_layers (mainline's layout)",
     256, 4, 512, 4, 2, 64, 32, 16, 4, 128, 128, 4, 32, 2, 4, 4, 262144, {6, 5, 5, 0}, 10000000.0f, 1},
};
#define Q35_N_SHAPES (int)(sizeof q35_shapes / sizeof q35_shapes[0])

static const q35_shape *q35_find(const char *name) {
    for (int i = 0; i < Q35_N_SHAPES; i++)
        if (!strcmp(q35_shapes[i].name, name)) return &q35_shapes[i];
    return NULL;
}

int synth_q35_has_shape(const char *name) { return q35_find(name) != NULL; }

void synth_q35_list(FILE *out) {
    for (int i = 0; i < Q35_N_SHAPES; i++) fprintf(out, "  %-18s qwen35moe: %s\n", q35_shapes[i].name, q35_shapes[i].desc);
}

static int mat(synth_ctx *c, int type, const char *fmt, int l, int n_dims, int64_t ne0, int64_t ne1, int64_t ne2) {
    return synth_add(c, SYNTH_POOL, synth_fit_type(type, ne0), fmt, l, n_dims, ne0, ne1, ne2) ? 0 : -1;
}

static int vec(synth_ctx *c, const char *fmt, int l, int n_dims, int64_t ne0, int64_t ne1, float mean, float std) {
    synth_tensor *t = synth_add(c, SYNTH_VEC, MR_TYPE_F32, fmt, l, n_dims, ne0, ne1, 1);
    if (!t) return -1;
    t->mean = mean;
    t->std = std;
    return 0;
}

int synth_q35_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer) {
    const q35_shape *s = q35_find(shape);
    if (!s) { mr_set_error("synth: unknown qwen35moe shape '%s'", shape); return -1; }
    if (p->ratios) { mr_set_error("synth: --ratios applies to deepseek4 shapes only"); return -1; }
    int L = *n_layer ? *n_layer : s->L;
    if (L < 1 || L > s->L) { mr_set_error("synth: --layers %d: shape %s has %d layers", L, shape, s->L); return -1; }
    *n_layer = L;
    c->d = s->d;
    c->n_expert = s->E;
    char key[128];
    const char *a = "qwen35moe";
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_u32(w, key, (uint32_t)(v)))
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_f32(w, key, (float)(v)))
    if (mr_gguf_writer_set_str(w, "general.architecture", a) || SETU("context_length", s->n_ctx) ||
        SETU("embedding_length", s->d) || SETU("block_count", L + s->mtp) || SETU("feed_forward_length", s->Fs) ||
        SETU("attention.head_count", s->H) || SETU("attention.head_count_kv", s->Hkv) ||
        SETU("attention.key_length", s->hd) || SETU("attention.value_length", s->hd) ||
        SETU("rope.dimension_count", s->rot) || SETF("rope.freq_base", s->rope_base) ||
        SETF("attention.layer_norm_rms_epsilon", 1e-6) || SETU("expert_count", s->E) || SETU("expert_used_count", s->K) ||
        SETU("expert_feed_forward_length", s->Fe) || SETU("expert_shared_feed_forward_length", s->Fs) ||
        SETU("ssm.conv_kernel", s->Kc) || SETU("ssm.inner_size", s->S * s->Hv) || SETU("ssm.state_size", s->S) ||
        SETU("ssm.time_step_rank", s->Hv) || SETU("ssm.group_count", s->Hk) ||
        SETU("full_attention_interval", s->interval) || SETU("vocab_size", s->V))
        return -1;
#undef SETU
#undef SETF
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    if (mr_gguf_writer_set_kv(w, key, MR_GGUF_ARRAY, MR_GGUF_I32, 4, s->sec)) return -1;
    if (s->mtp) { /* the converter's per-block pattern (the MTP blocks are not recurrent) and the MTP count */
        uint8_t rec[64] = {0};
        if (L + s->mtp > 64) { mr_set_error("synth: %s: too many blocks for the recurrent_layers key", shape); return -1; }
        for (int l = 0; l < L; l++) rec[l] = (l + 1) % s->interval != 0;
        snprintf(key, sizeof key, "%s.attention.recurrent_layers", a);
        if (mr_gguf_writer_set_kv(w, key, MR_GGUF_ARRAY, MR_GGUF_BOOL, (uint64_t)(L + s->mtp), rec)) return -1;
        snprintf(key, sizeof key, "%s.nextn_predict_layers", a);
        if (mr_gguf_writer_set_u32(w, key, (uint32_t)s->mtp)) return -1;
    }
    if (synth_vocab(w, s->V)) return -1;
    const int A = mx->attn;
    const int64_t d = s->d, conv = 2 * (int64_t)s->S * s->Hk + (int64_t)s->S * s->Hv, vd = (int64_t)s->S * s->Hv;
    synth_tensor *t = synth_add(c, SYNTH_EMBD, mx->embd, "token_embd.weight", 0, 2, d, s->V, 1);
    if (!t) return -1;
    t->std = 1.0f;
    if (synth_norm(c, "output_norm.weight", 0, d) || mat(c, mx->head, "output.weight", 0, 2, d, s->V, 1)) return -1;
    for (int l = 0; l < L + s->mtp; l++) {
        if (synth_norm(c, "blk.%d.attn_norm.weight", l, d) || synth_norm(c, "blk.%d.post_attention_norm.weight", l, d))
            return -1;
        if (l >= L) { /* MTP block: eh_proj [2d -> d] over the normed embedding and hidden state */
            if (mat(c, A, "blk.%d.nextn.eh_proj.weight", l, 2, 2 * d, d, 1) || synth_norm(c, "blk.%d.nextn.enorm.weight", l, d) ||
                synth_norm(c, "blk.%d.nextn.hnorm.weight", l, d) || synth_norm(c, "blk.%d.nextn.shared_head_norm.weight", l, d))
                return -1;
        }
        if ((l + 1) % s->interval == 0 || l >= L) {
            if (mat(c, A, "blk.%d.attn_q.weight", l, 2, d, (int64_t)s->H * s->hd * 2, 1) ||
                mat(c, A, "blk.%d.attn_k.weight", l, 2, d, (int64_t)s->Hkv * s->hd, 1) ||
                mat(c, A, "blk.%d.attn_v.weight", l, 2, d, (int64_t)s->Hkv * s->hd, 1) ||
                mat(c, A, "blk.%d.attn_output.weight", l, 2, (int64_t)s->H * s->hd, d, 1) ||
                synth_norm(c, "blk.%d.attn_q_norm.weight", l, s->hd) || synth_norm(c, "blk.%d.attn_k_norm.weight", l, s->hd))
                return -1;
        } else {
            synth_tensor *ta;
            if (mat(c, A, "blk.%d.attn_qkv.weight", l, 2, d, conv, 1) || mat(c, A, "blk.%d.attn_gate.weight", l, 2, d, vd, 1) ||
                vec(c, "blk.%d.ssm_conv1d.weight", l, 2, s->Kc, conv, 0.0f, 0.5f) ||
                vec(c, "blk.%d.ssm_dt.bias", l, 1, s->Hv, 1, 0.0f, 0.5f) ||
                !(ta = synth_add(c, SYNTH_VEC, MR_TYPE_F32, "blk.%d.ssm_a", l, 1, s->Hv, 1, 1)) ||
                mat(c, A, "blk.%d.ssm_beta.weight", l, 2, d, s->Hv, 1) || mat(c, A, "blk.%d.ssm_alpha.weight", l, 2, d, s->Hv, 1) ||
                synth_norm(c, "blk.%d.ssm_norm.weight", l, s->S) || mat(c, A, "blk.%d.ssm_out.weight", l, 2, vd, d, 1))
                return -1;
            ta->mean = -1.0f; /* negative decay rates around -1 */
            ta->std = 0.3f;
        }
        if (!synth_add(c, SYNTH_ROUTER, MR_TYPE_F32, "blk.%d.ffn_gate_inp.weight", l, 2, d, s->E, 1) ||
            mat(c, mx->gate_up, "blk.%d.ffn_gate_exps.weight", l, 3, d, s->Fe, s->E) ||
            mat(c, mx->gate_up, "blk.%d.ffn_up_exps.weight", l, 3, d, s->Fe, s->E) ||
            mat(c, mx->down, "blk.%d.ffn_down_exps.weight", l, 3, s->Fe, d, s->E) ||
            vec(c, "blk.%d.ffn_gate_inp_shexp.weight", l, 1, d, 1, 0.0f, 1.0f / 16.0f) ||
            mat(c, A, "blk.%d.ffn_gate_shexp.weight", l, 2, d, s->Fs, 1) || mat(c, A, "blk.%d.ffn_up_shexp.weight", l, 2, d, s->Fs, 1) ||
            mat(c, A, "blk.%d.ffn_down_shexp.weight", l, 2, s->Fs, d, 1))
            return -1;
    }
    return 0;
}
