/* Draft sources for speculative decoding (src/gen/generate.c verifies what they propose). */
#ifndef MR_GEN_DRAFT_H
#define MR_GEN_DRAFT_H
#include "moerun.h"

/* Prompt lookup: find the most recent earlier occurrence of the last n tokens of hist[0..n_hist)
 * (n from nmax down to nmin) and propose up to kmax of the tokens that followed it. Returns the
 * number written to out (0: no match). */
int mr_draft_ngram(const int32_t *hist, int n_hist, int nmax, int nmin, int kmax, int32_t *out);

/* Greedy drafts from a smaller model's session d that mirrors hist: *d_past tokens of hist are
 * already in d (the last of hist is always re-evaluated for its logits). Evaluates the missing
 * ones (in chunks of n_batch), then kmax greedy tokens, then cuts d back to n_hist - 1. Returns
 * the number of drafts written to out, -1 on error (d is then reset and *d_past is 0). */
int mr_draft_model(mr_session *d, const int32_t *hist, int n_hist, int *d_past, int n_batch, int kmax, int32_t *out);

/* 1 if m is an MTP sidecar (an MTP block without a trunk): a draft session of it drafts through
 * mr_session_mtp_draft, not as a model of its own */
int mr_draft_is_mtp(const mr_model *m);

#endif
