/* llama: dense, and mixtral-style routed experts when llama.expert_count > 0 (softmax router,
 * top-k, renormalised weights). RoPE on adjacent pairs (ggml "normal" mode). */
#include "model/llm.h"

#include <stdlib.h>

static int llama_load(mr_model *m) {
    mr_llm *L = mr_calloc(1, sizeof *L);
    if (!L) { mr_set_error("model: out of memory"); return -1; }
    m->priv = L;
    if (mr_llm_read_hparams(m, L, MR_ROPE_NORMAL)) return -1;
    if (L->rope.n_dims != L->head_dim) {
        mr_set_error("%s: invalid rope.dimension_count %d, expected %d (the head size)", m->path, L->rope.n_dims, L->head_dim);
        return -1;
    }
    if (L->n_ff <= 0) { mr_set_error("%s: missing llama.feed_forward_length", m->path); return -1; }
    L->n_ff_exp = L->n_ff; /* mixtral-style experts are feed_forward_length wide */
    return mr_llm_load_tensors(m, L);
}

const struct mr_arch mr_arch_llama = {
    .name = "llama",
    .load = llama_load,
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
