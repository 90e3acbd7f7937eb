/* gpt-oss (gpt-oss-20b / 120b; the reference fork's llm_build_openai_moe_iswa) on the generic decoder
 * (llm.h) with:
 *   attention: q/k/v/o biases, RoPE on split halves (neox) with YaRN, kq scale 1/sqrt(head size),
 *     a learned sink logit per head (attn_sinks) in every softmax, and sliding-window layers: with
 *     period P (attention.sliding_window_pattern, default 2) layer il uses the window when
 *     il % P < P - 1 (even layers for P = 2), the others attend to everything
 *   pre-FFN norm: post_attention_norm
 *   routed experts only (no shared expert): router logits + ffn_gate_inp.bias, top-k by logit, weights
 *     = softmax over the k selected logits (no renormalisation); gate/up/down have per-expert biases
 *     and the activation is SwiGLU-OAI (moe.h). */
#include "model/llm.h"

#include <stdlib.h>

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static int gpt_oss_load(mr_model *m) {
    mr_llm *L = mr_calloc(1, sizeof *L);
    if (!L) { mr_set_error("model: out of memory"); return -1; }
    m->priv = L;
    L->ffn_norm_name = "post_attention_norm";
    if (mr_llm_read_hparams(m, L, MR_ROPE_NEOX)) return -1;
    uint32_t ffe = 0, swa = 0, period = 2;
    float wscale = 0.0f, base = 0.0f, base_swa = 0.0f;
    if (mr_model_hp_u32(m, "expert_feed_forward_length", 1, 0, &ffe) ||
        mr_model_hp_u32(m, "attention.sliding_window", 1, 0, &swa) ||
        mr_model_hp_u32(m, "attention.sliding_window_pattern", 0, 2, &period) ||
        mr_model_hp_f32(m, "expert_weights_scale", 0, 0.0f, &wscale) ||
        mr_model_hp_f32(m, "rope.freq_base", 0, 10000.0f, &base) ||
        mr_model_hp_f32(m, "rope.freq_base_swa", 0, base, &base_swa))
        return -1;
    if (base_swa != base) { mr_set_error("%s: a separate rope.freq_base_swa is not supported", m->path); return -1; }
    if (L->moe.n_expert == 0 || ffe == 0) { mr_set_error("%s: gpt-oss needs expert_count and expert_feed_forward_length", m->path); return -1; }
    if (swa > (1u << 30)) { mr_set_error("%s: attention.sliding_window %u invalid", m->path, swa); return -1; }
    L->n_ff_exp = (int)ffe;
    L->moe.gating = MR_GATING_SOFTMAX_WEIGHT;
    L->moe.norm_w = 0;
    L->moe.w_scale = wscale;
    L->moe.act = MR_MOE_ACT_SWIGLU_OAI;
    if (mr_llm_load_tensors(m, L)) return -1;
    L->moe_bias = mr_calloc((size_t)m->n_layer, sizeof *L->moe_bias);
    if (!L->moe_bias) { mr_set_error("model: out of memory"); return -1; }
    const int64_t d = m->n_embd, E = L->moe.n_expert, F = L->n_ff_exp;
    for (int i = 0; i < m->n_layer; i++) {
        mr_llm_layer *l = &L->layers[i];
        l->window = (period == 0 || (uint32_t)i % period < period - 1) ? (int)swa : 0;
        l->sinks = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(L->n_head), "blk.%d.attn_sinks.weight", i));
        l->router_b = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(E), "blk.%d.ffn_gate_inp.bias", i));
        L->moe_bias[i].gate = mr_model_f32(m, mr_model_tensor(m, 1, 2, SHAPE(F, E), "blk.%d.ffn_gate_exps.bias", i));
        L->moe_bias[i].up = mr_model_f32(m, mr_model_tensor(m, 1, 2, SHAPE(F, E), "blk.%d.ffn_up_exps.bias", i));
        L->moe_bias[i].down = mr_model_f32(m, mr_model_tensor(m, 1, 2, SHAPE(d, E), "blk.%d.ffn_down_exps.bias", i));
    }
    if (!mr_gguf_find_tensor(m->gguf, "output.weight")) { mr_set_error("%s: missing tensor 'output.weight'", m->path); return -1; }
    L->moe.bias = L->moe_bias;
    return m->load_err ? -1 : 0;
}

const struct mr_arch mr_arch_gpt_oss = {
    .name = "gpt-oss",
    .load = gpt_oss_load,
    .free = mr_llm_free,
    .state_new = mr_llm_state_new,
    .state_free = mr_llm_state_free,
    .state_reset = mr_llm_state_reset,
    .eval = mr_llm_eval,
    .state_truncate = mr_llm_state_truncate,
    .state_io = mr_llm_state_io,
    .check_tensors = 1,
};
