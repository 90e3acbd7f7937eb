/* Hyperparameter readers shared by architectures of different files (llm.c's llama-like decoders,
 * deepseek2, qwen35moe), so that none of them depends on another one's forward pass. */
#ifndef MR_HPARAMS_H
#define MR_HPARAMS_H
#include "model/model.h"
#include "model/moe.h"
#include "model/ops.h"

/* The keys of a llama-like decoder, with the reference's defaults. */
typedef struct {
    int n_head, n_head_kv, head_dim;
    int n_ff;                    /* feed_forward_length (the same in every layer) */
    int n_ff_exp;                /* expert_feed_forward_length, else n_ff / expert_used_count */
    float eps, kq_scale;         /* attention.layer_norm_rms_epsilon, 1 / sqrt(head_dim) */
    mr_rope_params rope;
    mr_moe_cfg moe;              /* expert_count, expert_used_count; softmax gating, weights renormalised */
} mr_decoder_hp;

/* Read them into hp and m (n_embd, n_layer, n_ctx_train). rope_mode: MR_ROPE_NORMAL / MR_ROPE_NEOX. */
int mr_read_decoder_hparams(mr_model *m, mr_decoder_hp *hp, int rope_mode);
/* Read the RoPE scaling keys (freq_base, scaling.type/factor/original_context_length/attn_factor,
 * yarn_log_multiplier) as llama.cpp resolves them into rp (n_dims and mode already set). */
int mr_read_rope(mr_model *m, mr_rope_params *rp);
#endif
