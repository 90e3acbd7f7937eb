/* Routed mixture of experts (ggml build_moe_ffn semantics), shared by every MoE architecture.
 *
 * Routing, per token t (logits = ffn_gate_inp x_t, [n_expert]):
 *   probs = softmax(logits) | sigmoid(logits) | sqrt(softplus(logits)) | logits (SOFTMAX_WEIGHT)
 *   selection = probs + sel_bias (exp_probs_b, optional; affects only which experts are chosen)
 *   groups (n_group > 1, DeepSeek-V3): experts split into n_group equal groups; a group's score is
 *     the sum of its two best selections; all but the n_group_used best groups are masked out
 *   sel = top n_used experts by selection, descending (or sel_in[t] when given: hash routing)
 *   w[j] = probs[sel[j]]; SOFTMAX_WEIGHT: w = softmax(w over the n_used)
 *   norm_w: w /= max(sum w (accumulated in double), 6.103515625e-5);   w_scale not 0 or 1: w *= w_scale
 * Experts (gate/up/down = ffn_{gate,up,down}_exps slice e; shapes gate, up {d, n_ff}, down {n_ff, d}):
 *   g = gate_e x, u = up_e x; if clamp > 1e-6: g = min(g, clamp), u = clamp(u, -clamp, clamp)
 *   biases (gpt-oss, bias[layer] given): g += gate_b[e], u += up_b[e] (before the clamp / activation)
 *   h = silu(g) * u, or act == MR_MOE_ACT_SWIGLU_OAI (gpt-oss):
 *       g' = min(g, 7), u' = clamp(u, -7, 7), h = g' / (1 + exp(-1.702 g')) * (u' + 1)
 *   weight_before_down: h *= w[j], y_j = down_e h;  else y_j = (down_e h [+ down_b[e]]) * w[j]
 *   out = ((y_0 + y_1) + y_2) + ...   (slot order, like the reference's chain of adds)
 * Tokens routed to the same expert are gathered so each expert matrix is multiplied once per batch
 * (ncols = number of tokens routed there); the experts come from the model's pager. */
#ifndef MR_MOE_H
#define MR_MOE_H
#include "model/model.h"

/* The engine's gating functions. Not GGUF's numbering (expert_gating_func: 3 is softmax_weight, 4
 * sqrt_softplus there): a loader maps the GGUF value with mr_moe_gating_from_gguf. */
enum { MR_GATING_SOFTMAX = 1, MR_GATING_SIGMOID = 2, MR_GATING_SQRT_SOFTPLUS = 3, MR_GATING_SOFTMAX_WEIGHT = 4 };
#define MR_GATING_BIT(g) (1u << (g))
/* GGUF expert_gating_func (llama_expert_gating_func_type: 0 none, 1 softmax, 2 sigmoid,
 * 3 softmax_weight, 4 sqrt_softplus) -> *gating (MR_GATING_*). 0 (or the key absent) gives if_none.
 * An unknown value, or one outside `allowed` (MR_GATING_BIT(MR_GATING_x) | ...: what the
 * architecture's graph supports), is refused: -1 with an error naming the model and architecture. */
int mr_moe_gating_from_gguf(const mr_model *m, uint32_t id, int if_none, unsigned allowed, int *gating);
enum { MR_MOE_ACT_SWIGLU = 0, MR_MOE_ACT_SWIGLU_OAI = 1 };
#define MR_MOE_GUESS_ROWS 8 /* largest batch whose next-layer experts are guessed (mr_moe_cfg.guess_next) */

/* Routed-expert biases of one layer (gpt-oss): gate, up [n_expert][F], down [n_expert][d]; NULL = none. */
typedef struct { const float *gate, *up, *down; } mr_moe_bias;

typedef struct {
    int n_expert, n_used;
    int gating;              /* MR_GATING_* */
    int norm_w;              /* renormalise the selected weights */
    float w_scale;           /* 0 or 1 = none */
    int weight_before_down;  /* deepseek4 */
    float clamp;             /* SwiGLU clamp limit (0 = none) */
    int hash_routed;         /* experts chosen by token id (deepseek4's tid2eid layers): not pruned by default */
    int n_group, n_group_used; /* expert groups (<= 1: none) and how many groups may be chosen */
    int act;                 /* MR_MOE_ACT_* */
    const mr_moe_bias *bias; /* [n_layer] expert biases, or NULL */
    /* Optional guess at the next MoE layer's experts, made while this layer computes (batches of at
     * most MR_MOE_GUESS_ROWS tokens: a decode step of one or several sequences; paging on,
     * MOERUN_PAGER_GUESS not 0): writes up to n_max expert ids of layer *next_layer for row `row` of
     * the batch, whose input is x[d], and returns their count (0 = no guess, -1 = error). The engine
     * hands every row's guess to the pager (mr_pager_hint) right after this layer's own reads are
     * queued, so the device keeps reading while this layer and the next one's attention compute. A
     * guess never changes a result: it only decides what is read early. */
    int (*guess_next)(void *ctx, int row, const float *x, int *next_layer, int *ids, int n_max);
    void *guess_ctx;
} mr_moe_cfg;

/* logits[n][n_expert] -> sel[n][n_used], w[n][n_used]. sel_bias[n_expert] or NULL.
 * sel_in[n][n_used] (or NULL; may be sel itself): use these experts instead of the top-k (their
 * weights still come from probs: deepseek4's hash layers). Returns -1 on a bad expert id in sel_in. */
int mr_moe_route(const mr_moe_cfg *c, const float *logits, const float *sel_bias, const int32_t *sel_in,
                 int n, int32_t *sel, float *w);

/* One token's probs[E] and selection scores score[E] (probs + sel_bias, the group mask's -inf) from its
 * router logits[E], as mr_moe_route computes them. */
void mr_moe_scores(const mr_moe_cfg *c, const float *logits, const float *sel_bias, float *probs, float *score);

/* A product run together with the expert down products (in their dispatch when the experts are in
 * memory, before the experts while the pager reads them otherwise): Y[n][w->rows] = w X[n][w->cols],
 * e.g. deepseek4's shared expert's down projection. */
typedef struct { const mr_weight *w; const float *X; float *Y; } mr_moe_extra;

/* Experts computed elsewhere (expert parallelism over several hosts). The plan asks owns() for each
 * expert of a batch; an owned expert is neither paged in nor computed here: compute() receives the
 * batch input x[n][d], the tokens tok[cnt] routed to it and their weights w[cnt], and writes y[cnt][d]
 * = down_e(h) with h = SwiGLU(gate_e x_tok, up_e x_tok) as mr_swiglu computes it (clamp c->clamp, and
 * times w when c->weight_before_down; otherwise the engine applies w in the sum). 0 or -1 with
 * mr_set_error. */
/* One remote expert's work in a batch: rows tok[cnt] of x, their weights w[cnt], output y[cnt][d]. */
typedef struct { int e; const int *tok; int cnt; const float *w; float *y; } mr_moe_job;
typedef struct mr_moe_remote {
    void *ctx;
    int (*owns)(void *ctx, int layer, int expert);
    int (*compute)(void *ctx, int layer, int expert, const mr_moe_cfg *c, const float *x, int64_t d, const int *tok,
                   int cnt, const float *w, float *y);
    /* optional, instead of compute: submit() gets every remote expert of the batch before the local
     * experts run (so remote work overlaps them); collect() must have filled every job's y when it
     * returns, after the local experts. Same contract for y as compute(). collect() is called after
     * every submit(), also a failed one (it may have sent part of the batch) and also when the
     * local experts failed: the replies of this batch must not be taken for the next one's. */
    int (*submit)(void *ctx, int layer, const mr_moe_cfg *c, const float *x, int64_t d, const mr_moe_job *jobs, int n_jobs);
    int (*collect)(void *ctx);
} mr_moe_remote;
/* r (kept by the caller, NULL = every expert local) applies from the next mr_moe_experts on */
void mr_moe_set_remote(mr_model *m, const mr_moe_remote *r);
/* The owner's side of a remote (src/ep/ep_mpi.c's serving rank): y[n][d] = the experts sel[n] (one
 * per row, n_used 1) of layer applied to x[n][d] with weights w[n], as an eval of m computes them
 * (its ISA, after mr_model_check_files); on a failure the layer's experts are unpinned as after a
 * failed eval. */
int mr_moe_serve(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n, const int32_t *sel,
                 const float *w, float *y);

/* The expert engine: out[n][d] = routed experts of layer `layer` applied to x[n][d] (see above), and
 * the extra products extra[n_extra] (may be NULL / 0). Its buffers come from the arena ws (reset at
 * the call's start: a session's, so that an eval allocates nothing once the session has seen its
 * batch size; NULL: allocated and freed in the call). One plan per call: the slots grouped by expert
 * (ascending id), each expert local (from the pager: all in one pair of dispatches when the experts
 * are in memory, one at a time as they arrive when the pager pages) or remote; with the model's MoE
 * approximations on, pruning gives the plan's keep-mask and row skipping per-expert row masks
 * (moe_approx.h). Every number is computed by the same kernels and element operations whichever
 * path runs, so the result does not depend on paging, batch grouping or thread count. */
int mr_moe_experts(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n, const int32_t *sel,
                   const float *w, const mr_moe_extra *extra, int n_extra, mr_scratch *ws, float *out);
#endif
