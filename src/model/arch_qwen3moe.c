/* qwen3moe: every layer routed (softmax over all experts, top-k, renormalised: the reference
 * passes norm_w = true for qwen3moe), per-head q/k RMSNorm before RoPE, RoPE on split halves
 * (ggml "neox" mode). Expert width: expert_feed_forward_length, else feed_forward_length / k. */
#include "model/llm.h"

#include <stdlib.h>

static int qwen3moe_load(mr_model *m) {
    mr_llm *L = mr_calloc(1, sizeof *L);
    if (!L) { mr_set_error("model: out of memory"); return -1; }
    m->priv = L;
    L->qk_norm = 1;
    if (mr_llm_read_hparams(m, L, MR_ROPE_NEOX)) return -1;
    if (L->moe.n_expert == 0) { mr_set_error("%s: qwen3moe.expert_count must be > 0", m->path); return -1; }
    if (L->rope.n_dims != L->head_dim) {
        mr_set_error("%s: rope.dimension_count %d differs from the head size %d", m->path, L->rope.n_dims, L->head_dim);
        return -1;
    }
    return mr_llm_load_tensors(m, L);
}

const struct mr_arch mr_arch_qwen3moe = {
    .name = "qwen3moe",
    .load = qwen3moe_load,
    .free = mr_llm_free,
    .state_new = mr_llm_state_new,
    .state_free = mr_llm_state_free,
    .state_reset = mr_llm_state_reset,
    .eval = mr_llm_eval,
    .state_truncate = mr_llm_state_truncate,
    .state_io = mr_llm_state_io,
    .eval_multi = mr_llm_eval_multi,
    .check_tensors = 1,
};
