/* Optional MoE approximations (docs/APPROX.md), off by default. They are set with
 * mr_model_set_approx() (moerun.h) and take effect at the next eval: mr_session_eval copies the
 * requested parameters into the ones the eval uses (mr_moe_approx_begin_eval), so one forward pass
 * never mixes two settings. This file holds the rules (which slots and rows to drop) and the sparse
 * products; the expert engine (moe.c) applies them: pruning as the plan's keep-mask, row skipping
 * as per-expert row masks. While they are off, the engine's path is the exact one.
 *
 * 1. Top-k tail pruning. Per token, of the k routed experts (weights w, sorted by weight):
 *      m_p   = smallest m with sum_{j<m} w_j >= prune_p * sum_j w_j   (prune_p in (0, 1), else k)
 *      m_tau = number of experts with w_j >= prune_tau * w_max          (prune_tau > 0, else k)
 *      m_w   = number of experts with w_j >= prune_min_w                (prune_min_w > 0, else k)
 *      m_k   = prune_k                                                  (prune_k > 0, else k)
 *      keep the top max(prune_min, min(m_p, m_tau, m_w, m_k)) experts (at least 1);
 *    if some were dropped, the kept weights are rescaled so that their L2 norm equals the L2 norm of
 *    all k weights (MR_APPROX_RESCALE_L2: the expected output magnitude is preserved), or their
 *    sum equals the sum of all k (L1), or by alpha(rho) (RHO, between the two), or left unchanged
 *    (NONE). Only in the layers [layer_first, layer_last], and not in hash-routed layers (their
 *    weights are flat: dropping one drops part of the token's lookup) unless prune_hash. Dropped experts are neither paged
 *    in nor computed. The output is the sum of the kept experts' outputs in slot order.
 *
 * 2. Gate-first SwiGLU row skipping. Per (token, expert): g = W_gate x first (clamped like the exact
 *    path); a row i with |silu(g_i)| < max(skip_rel * max_i |silu(g_i)|, skip_abs) is inactive:
 *    up_i = W_up[i] x is not computed and h_i = silu(g_i) up_i is taken as 0. The down projection
 *    y = W_down h then skips every weight block (the down type's block along the n_ff axis) whose
 *    h-values are all inactive: each output row is the sum of vec_dots over the runs of contiguous
 *    active blocks. With no block skipped this is exactly the dense product (one run), so a setting
 *    that skips nothing gives the exact logits bit for bit.
 *
 * 3. Row skipping as a fixed budget (rows_routed / rows_shared / rows_dense = m): the same masks, but
 *    chosen per block of MR_APPROX_ROW_BLOCK = 128 consecutive rows: the m rows with the largest
 *    s_i = |silu(g_i)| stay (equal s: lower row first; a last block of L < 128 rows keeps
 *    ceil(m L / 128)), and the kept h_i of block b are scaled by
 *      alpha_b = sqrt(sum_{i in b} s_i^2 / sum_{i kept in b} s_i^2)     (1 if nothing dropped or 0 / 0)
 *    so that the block's gate energy is preserved. Per (token, row of g) only: deterministic, the
 *    same for any thread count and batch grouping. Routed experts go through the expert engine's
 *    skipping path (2.); shared experts and dense FFNs through mr_approx_ffn_act.
 *
 * 4. Cache-aware expert selection (sub_margin / sub_w / sub_miss, paging only): after routing, per
 *    token and layer, a selected expert that is neither in the pager's arena nor chosen by an earlier
 *    token of the batch (it would be read: a miss) may be replaced by a cached expert the token did
 *    not choose. With s the selection scores (probs + bias, group mask applied) and the candidates
 *    sorted by s descending: the misses, by s descending, each take the next candidate c when
 *    s_c >= s_miss - sub_margin * |s_miss| and w_miss <= sub_w (0: any); then, with a budget, the
 *    lowest-scoring misses beyond sub_miss take the next candidates whatever their score. The token's
 *    weights are then the router's for the new set (mr_moe_route with it as sel_in). Hash-routed
 *    layers only with sub_hash. With every expert cached (no paging) nothing changes. The rule runs
 *    in moe_select.c (mr_approx_cache_select), called by the MoE block between routing and the engine.
 */
#ifndef MR_MOE_APPROX_H
#define MR_MOE_APPROX_H
#include "model/moe.h"

#include <pthread.h>

struct mr_moe_approx {
    pthread_mutex_t mu;         /* guards pending and stats */
    mr_approx_params pending;   /* last mr_model_set_approx */
    mr_approx_params cur;       /* what the eval in progress uses */
    int on;                     /* cur prunes or skips */
    mr_approx_stats stats;
};

/* Allocates m->approx (settings off); mr_model_load calls it, so that switching settings never
 * allocates while another thread evaluates. 0, or -1 (error set). */
int mr_moe_approx_init(mr_model *m);
/* Called by mr_session_eval before every eval: cur = pending. m->approx may be NULL (nothing to do). */
void mr_moe_approx_begin_eval(mr_model *m);
void mr_moe_approx_free(struct mr_moe_approx *a);
static inline int mr_moe_approx_on(const mr_model *m) { return m->approx && m->approx->on; }
static inline int mr_approx_prune_on(const mr_approx_params *p) {
    return (p->prune_p > 0.0f && p->prune_p < 1.0f) || p->prune_tau > 0.0f || p->prune_k > 0 || p->prune_min_w > 0.0f;
}
/* pruning applies to this layer (its range; hash-routed layers only with prune_hash) */
static inline int mr_approx_prunes_layer(const mr_approx_params *p, int layer, int hash_routed) {
    return mr_approx_prune_on(p) && layer >= p->layer_first && (p->layer_last < 0 || layer <= p->layer_last) &&
           (!hash_routed || p->prune_hash);
}
/* the routed experts' row masks: a threshold (skip_rel / skip_abs) or a budget (rows_routed) */
static inline int mr_approx_skip_on(const mr_approx_params *p) {
    return p->skip_rel > 0.0f || p->skip_abs > 0.0f || p->rows_routed > 0;
}
/* cache-aware expert selection (4. above) */
static inline int mr_approx_sub_on(const mr_approx_params *p) { return p->sub_margin > 0.0f || p->sub_budget; }
#define MR_APPROX_ROW_BLOCK 128
/* adds one layer's counters to the model's (under its lock) */
void mr_moe_approx_add_stats(mr_model *m, const mr_approx_stats *st);

/* Pruning of one token's k weights w[k] (in slot order). keep[j] = 1 for the kept slots, w_out[j]
 * their (rescaled) weights, 0 for the dropped ones. Returns the number kept (>= 1). */
int mr_approx_prune(const mr_approx_params *p, int k, const float *w, int *keep, float *w_out);

/* Row skipping of one (token, expert or FFN): g[F] the gate row (before the clamp lim), s_i =
 * |silu(min(g_i, lim))| (no clamp when lim <= 1e-6). budget > 0: act[i] = 1 for the rows kept by the
 * budget rule (3. above) and alpha[(F + 127) / 128] the blocks' scales; budget 0: act[i] = 1 for the
 * rows with s_i >= max(skip_rel * max_i s_i, skip_abs), alpha (if not NULL) all 1. bact (NULL: not
 * wanted) = 1 for the down blocks (blk rows of the n_ff axis; F a multiple of blk) with an active
 * row. Returns the number of inactive down blocks; *rows_skipped receives the inactive rows. */
int64_t mr_approx_row_mask(const mr_approx_params *p, int budget, const float *g, int64_t F, float lim, int64_t blk,
                           uint8_t *act, uint8_t *bact, float *alpha, int64_t *rows_skipped);
/* h[F] *= alpha of its 128-row block (the budget rule's scales; a scale of 1 leaves h as it is) */
void mr_approx_row_scale(float *h, const float *alpha, int64_t F);

/* Shared experts and dense FFNs (not the expert engine's): which rows budget applies (0: none). */
enum { MR_FFN_DENSE = 0, MR_FFN_SHARED = 1 };
int mr_approx_ffn_budget(const mr_model *m, int kind);
/* The SwiGLU of a dense FFN or shared expert with the budget rule: g[n][F] = gate x first, the
 * masks, up only for the kept rows (u[n][F], 0 for the others), h = SwiGLU(g, u) (clamp lim like
 * mr_swiglu) into g, scaled per block. x[n][gate->cols]. With budget 128 the values equal the plain
 * path's (mr_matmul + mr_swiglu) bit for bit. Counted in the model's ffn_rows_* statistics. */
int mr_approx_ffn_act(mr_model *m, int budget, const mr_weight *gate, const mr_weight *up, const float *x, int n, float *g,
                      float *u, float lim);

/* The partial products (block-sparse down, masked-row up) are quant/matmul.h's mr_matmul_blocks and
 * mr_matmul_rows_masked. */
#endif
