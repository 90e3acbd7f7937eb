/* glm4moe (GLM-4.5 / 4.6 / 4.5-Air; the reference fork's llm_build_glm4_moe) on the generic decoder
 * (llm.h): q/k/v biases, optional per-head q/k RMSNorm, partial RoPE on split halves (neox, the first
 * rope.dimension_count dims of each head), kq scale 1/sqrt(head size), pre-FFN norm
 * post_attention_norm; the first leading_dense_block_count layers have a dense SwiGLU FFN, the others
 * routed experts (sigmoid gating by default, exp_probs_b selection bias, optional expert groups,
 * weight norm and scale) plus shared experts. The last nextn_predict_layers blocks are the multi-token
 * prediction head, which the reference skips in the forward pass: they are not loaded.
 * Multimodal GGUFs (rope.dimension_sections, M-RoPE) are not supported. */
#include "model/llm.h"

#include <stdlib.h>

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})

static int glm4moe_load(mr_model *m) {
    mr_llm *L = mr_calloc(1, sizeof *L);
    if (!L) { mr_set_error("model: out of memory"); return -1; }
    m->priv = L;
    L->ffn_norm_name = "post_attention_norm";
    L->qk_norm = mr_gguf_find_tensor(m->gguf, "blk.0.attn_q_norm.weight") != NULL;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", m->arch_name);
    if (mr_gguf_find_kv(m->gguf, key)) { mr_set_error("%s: M-RoPE (%s) is not supported", m->path, key); return -1; }
    if (mr_llm_read_hparams(m, L, MR_ROPE_NEOX)) return -1;
    uint32_t ffe = 0, nsh = 0, ndense = 0, nextn = 0, gating = 0, ng = 0, ngu = 0;
    int normw = 0;
    float wscale = 0.0f;
    if (mr_model_hp_u32(m, "expert_feed_forward_length", 1, 0, &ffe) ||
        mr_model_hp_u32(m, "expert_shared_count", 1, 0, &nsh) ||
        mr_model_hp_u32(m, "leading_dense_block_count", 0, 0, &ndense) ||
        mr_model_hp_u32(m, "nextn_predict_layers", 0, 0, &nextn) ||
        mr_model_hp_u32(m, "expert_gating_func", 0, 0, &gating) ||
        mr_model_hp_u32(m, "expert_group_count", 0, 0, &ng) ||
        mr_model_hp_u32(m, "expert_group_used_count", 0, 0, &ngu) ||
        mr_model_hp_f32(m, "expert_weights_scale", 0, 0.0f, &wscale) ||
        mr_model_hp_bool(m, "expert_weights_norm", 0, 0, &normw))
        return -1;
    const int E = L->moe.n_expert;
    if (E == 0) { mr_set_error("%s: glm4moe.expert_count must be > 0", m->path); return -1; }
    if (nextn >= (uint32_t)m->n_layer) { mr_set_error("%s: nextn_predict_layers %u must be < block_count", m->path, nextn); return -1; }
    if (nsh > 64) { mr_set_error("%s: expert_shared_count %u invalid", m->path, nsh); return -1; }
    int gfn = 0;
    if (mr_moe_gating_from_gguf(m, gating, MR_GATING_SIGMOID, MR_GATING_BIT(MR_GATING_SOFTMAX) | MR_GATING_BIT(MR_GATING_SIGMOID),
                                &gfn))
        return -1;
    if (ng > 1 && (ng > 256 || E % (int)ng || E / (int)ng < 2 || ngu == 0 || ngu >= ng || L->moe.n_used > (int)ngu * (E / (int)ng))) {
        mr_set_error("%s: expert_group_count %u / expert_group_used_count %u invalid for %d experts", m->path, ng, ngu, E);
        return -1;
    }
    m->n_layer -= (int)nextn;
    L->n_ff_exp = (int)ffe;
    L->n_shared = (int)nsh;
    L->n_dense_lead = (int)ndense;
    L->moe.gating = gfn;
    L->moe.norm_w = normw;
    L->moe.w_scale = wscale;
    L->moe.n_group = (int)ng;
    L->moe.n_group_used = (int)ngu;
    if (mr_llm_load_tensors(m, L)) return -1;
    for (int i = L->n_dense_lead; i < m->n_layer; i++)
        L->layers[i].probs_b = mr_model_f32(m, mr_model_tensor(m, 1, 1, SHAPE(E), "blk.%d.exp_probs_b.bias", i));
    return m->load_err ? -1 : 0;
}

const struct mr_arch mr_arch_glm4moe = {
    .name = "glm4moe",
    .load = glm4moe_load,
    .free = mr_llm_free,
    .state_new = mr_llm_state_new,
    .state_free = mr_llm_state_free,
    .state_reset = mr_llm_state_reset,
    .eval = mr_llm_eval,
    .state_truncate = mr_llm_state_truncate,
    .state_io = mr_llm_state_io,
    .check_tensors = 1,
};
