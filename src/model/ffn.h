/* The FFN half of a decoder layer, the one place every architecture's forward pass goes through for it:
 * the dense SwiGLU FFN (mr_ffn) and the MoE block (mr_moe_block: router product, routing, shared
 * expert with its gate, routed experts through the expert engine moe.h, residual add). Above ops.c
 * (element math), moe.c (routing, the expert engine) and moe_approx.c (the row budgets), so that no
 * architecture depends on another one's file. */
#ifndef MR_FFN_H
#define MR_FFN_H
#include "model/model.h"
#include "model/moe.h"

/* Dense SwiGLU FFN (ggml build_ffn, SILU, parallel gate): out[n][d] = down (silu(gate h) * up h) for
 * h[n][d]; g and u are scratch of n * gate->rows floats. With the model's rows_dense budget set
 * (moe_approx.h) the activation skips rows by that rule. */
int mr_ffn(mr_model *m, const mr_weight *gate, const mr_weight *up, const mr_weight *down, const float *h, int n,
           float *g, float *u, float *out);

/* One MoE layer's tensors as the block needs them (shapes for d = n_embd, E experts, K used, Fs the
 * shared expert's width). */
typedef struct {
    const mr_weight *router;          /* ffn_gate_inp {d, E}: logits = router h */
    const float *router_b;            /* [E] added to the logits (gpt-oss), or NULL */
    const float *sel_bias;            /* exp_probs_b [E]: changes which experts are chosen, not weights; or NULL */
    const int32_t *tok_experts;       /* hash routing (deepseek4 tid2eid): [vocab][K] experts of a token id, or NULL */
    const int32_t *tok;               /* [n] the batch's token ids (read with tok_experts only) */
    const mr_weight *sh_gate, *sh_up, *sh_down; /* shared expert {d, Fs}, {d, Fs}, {Fs, d}; sh_up NULL = none */
    const float *sh_gate_inp;         /* [d]: the shared output times sigmoid(sh_gate_inp . h_t) (qwen35moe), or NULL */
    float sh_clamp;                   /* the shared expert's SwiGLU clamp (mr_swiglu's lim; 0 = none) */
} mr_moe_layer;

/* The block's buffers (the caller's scratch): logits [n][E], sel [n][K], w [n][K], g and u [n][Fs],
 * sh [n][d] (g, u, sh only with a shared expert); ws: the session's arena for the expert engine
 * (mr_moe_experts), a scratch of its own (NULL: the engine allocates per call). */
typedef struct { float *logits, *w, *g, *u, *sh; int32_t *sel; mr_scratch *ws; } mr_moe_buf;

/* The MoE block of layer `layer` for h[n][d] (the normed FFN input):
 *   logits = router h [+ router_b]; one dispatch with the shared expert's gate and up products
 *   sel, w = mr_moe_route(c, logits, sel_bias)        or the token's row of tok_experts (weights from logits)
 *   s = SwiGLU(sh_gate h, sh_up h; sh_clamp)          (rows_shared budget: moe_approx.h)
 *   out = experts(h; sel, w) + sh_down s [* sigmoid(sh_gate_inp . h)]  (the shared down in the experts' down dispatch)
 *   x += out when x is not NULL (deepseek4 mixes out into its hyper-connections itself)
 * out[n][d]. Dumps ffn_moe_logits, ffn_moe_topk (ffn_moe_hash_topk), ffn_moe_weights_scaled,
 * ffn_moe_out, ffn_shexp, ffn_out under `--dump`. 0, or -1 with the error set. */
int mr_moe_block(mr_model *m, int layer, const mr_moe_cfg *c, const mr_moe_layer *ly, const float *h, int n,
                 const mr_moe_buf *b, float *out, float *x);
#endif
