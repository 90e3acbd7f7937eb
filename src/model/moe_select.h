/* Cache-aware expert selection (moe_approx.h rule 4, docs/APPROX.md), applied by the MoE block
 * (ffn.c) to the routing's result before the expert engine runs it. */
#ifndef MR_MOE_SELECT_H
#define MR_MOE_SELECT_H
#include "model/moe.h"

/* One layer's batch, in place: sel[n][K], w[n][K] as mr_moe_route gave them from logits[n][E]
 * (sel_bias as given to it; NULL for hash layers). Per token, in batch order, a selected expert is a
 * miss when it is not in the pager's arena (mr_pager_cached), not owned by a remote and not chosen by
 * an earlier token of the batch. Does nothing unless the eval's setting has the rule on (and on for
 * hash layers, when this is one) and the model pages. The substitution counters go to the model's
 * approximation statistics. 0, or -1 (error set). */
int mr_approx_cache_select(mr_model *m, int layer, const mr_moe_cfg *c, const float *logits, const float *sel_bias, int n,
                           int32_t *sel, float *w);
#endif
