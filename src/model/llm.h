/* Generic pre-norm decoder shared by the llama (dense and mixtral-style MoE) and qwen3moe
 * architectures:
 *   x = token_embd[tok]
 *   per layer: h = RMSNorm(x) * attn_norm
 *              q, k, v = Wq h, Wk h, Wv h (+ biases); optional per-head RMSNorm of q, k (q/k norm)
 *              RoPE(q, k) at the token's position (normal or neox mode)
 *              K, V appended to the cache (F16 by default), causal GQA attention, x += Wo att
 *              (gpt-oss: attention sinks and sliding-window layers, biases on o, the router and experts)
 *              h = RMSNorm(x) * ffn_norm
 *              x += dense SwiGLU FFN(h)  or  routed experts (moe.h) [+ shared expert FFN(h)]
 *   logits = output (or token_embd if absent) . (RMSNorm(x) * output_norm) */
#ifndef MR_LLM_H
#define MR_LLM_H
#include "model/model.h"
#include "model/hparams.h"
#include "model/moe.h"
#include "model/ops.h"

typedef struct {
    const float *attn_norm, *ffn_norm, *q_norm, *k_norm;
    mr_weight wq, wk, wv, wqkv, wo;
    const float *bq, *bk, *bv, *bqkv, *bo;
    mr_weight ffn_gate, ffn_up, ffn_down;      /* dense layers */
    mr_weight ffn_gate_inp;                    /* MoE router [n_expert x n_embd] */
    mr_weight sh_gate, sh_up, sh_down;         /* shared expert (glm4moe), data NULL if none */
    const float *probs_b;                      /* expert selection bias exp_probs_b [n_expert] or NULL */
    const float *router_b;                     /* router bias [n_expert] (gpt-oss) or NULL */
    const float *sinks;                        /* attention sink logits [n_head] (gpt-oss) or NULL */
    int window;                                /* sliding-window attention (0 = full causal) */
    int is_moe;
} mr_llm_layer;

typedef struct {
    int n_head, n_head_kv, head_dim, n_ff, n_ff_exp;
    float eps, kq_scale;
    int qk_norm;                 /* qwen3moe: q/k RMSNorm per head */
    const char *ffn_norm_name;   /* "blk.N.<name>.weight" of the pre-FFN norm (NULL: ffn_norm) */
    int n_dense_lead;            /* leading layers with a dense FFN in a MoE model (glm4moe) */
    int n_shared;                /* shared experts per MoE layer (ffn_*_shexp, width n_shared * n_ff_exp) */
    mr_moe_bias *moe_bias;       /* [n_layer] routed-expert biases (gpt-oss; freed with the model) */
    mr_rope_params rope;
    mr_moe_cfg moe;              /* n_expert == 0: dense */
    const mr_gguf_tensor *tok_embd;
    const float *output_norm;
    mr_weight output;
    mr_llm_layer *layers;
} mr_llm;

typedef struct {
    int n_ctx, kv_f16;
    int64_t kv_dim;              /* n_head_kv * head_dim */
    void **k, **v;               /* [n_layer] caches of n_ctx x kv_dim (uint16_t F16 or float) */
    mr_scratch scratch;          /* an eval's buffers, grown to the largest batch (base.h) */
    mr_scratch moe_ws;           /* the expert engine's arena (mr_moe_buf.ws) */
} mr_llm_state;

/* Read the hyperparameters common to llama-like archs (mr_read_decoder_hparams, hparams.h) into L
 * and m (n_embd, n_layer, n_ctx_train). rope_mode: MR_ROPE_NORMAL / MR_ROPE_NEOX. */
int mr_llm_read_hparams(mr_model *m, mr_llm *L, int rope_mode);
/* Look up the tensors (attention, FFN or experts, q/k norms when L->qk_norm) and initialise the pager
 * for MoE layers. Requires the hparams. */
int mr_llm_load_tensors(mr_model *m, mr_llm *L);
void mr_llm_free(mr_model *m);
void *mr_llm_state_new(mr_model *m, int n_ctx);
void mr_llm_state_free(mr_model *m, void *st);
void mr_llm_state_reset(mr_model *m, void *st);
int mr_llm_state_truncate(mr_model *m, void *st, int n);
int mr_llm_state_io(mr_model *m, void *st, int n_past, mr_state_io *io);
int mr_llm_eval(mr_model *m, void *st, const int32_t *tok, int n, int pos0, float *logits, int all_logits);
int mr_llm_eval_multi(mr_model *m, void *const *st, const int *pos, const int32_t *tok, int n, const uint8_t *want,
                      float *logits);
#endif
