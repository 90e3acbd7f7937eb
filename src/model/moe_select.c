/* Cache-aware expert selection (moe_approx.h, rule 4; docs/APPROX.md): routed experts that would be
 * read from disk replaced by cached ones of the same layer. Called by the MoE block (ffn.c) between
 * routing and the expert engine; above moe.c (scores, routing) and moe_approx.c (the setting). */
#include "model/moe_select.h"
#include "model/moe_approx.h"
#include "model/ops.h"
#include "pager/pager.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One token's selection s[K] (scores score[E]; have[e] = 1: cached or read for this batch anyway):
 * the misses replaced by the rule's candidates. Returns the substitutions; *missed = the misses
 * found. cand[E] is scratch. */
static int select_token(const mr_approx_params *p, int E, int K, const float *score, const float *w, const uint8_t *have,
                        int32_t *s, float *cand, int *missed) {
    int miss[64], nm = 0, top[64];
    uint8_t subbed[64];
    for (int j = 0; j < K; j++)
        if (!have[s[j]]) miss[nm++] = j;
    *missed = nm;
    if (!nm) return 0;
    /* candidates: cached experts the token did not choose, best first (at most nm are needed) */
    for (int e = 0; e < E; e++) cand[e] = have[e] ? score[e] : -INFINITY;
    for (int j = 0; j < K; j++) cand[s[j]] = -INFINITY;
    mr_topk(cand, E, nm, top);
    int nc = 0;
    while (nc < nm && isfinite(cand[top[nc]])) nc++;
    /* misses by score, highest first (top-k slots already are; hash layers' are not) */
    for (int a = 1; a < nm; a++)
        for (int b = a; b > 0 && score[s[miss[b - 1]]] < score[s[miss[b]]]; b--) {
            const int t = miss[b]; miss[b] = miss[b - 1]; miss[b - 1] = t;
        }
    memset(subbed, 0, sizeof subbed);
    int ci = 0, subs = 0, kept = nm;
    for (int i = 0; i < nm && ci < nc && p->sub_margin > 0.0f; i++) {
        const int j = miss[i];
        const float sm = score[s[j]];
        if ((p->sub_w > 0.0f && w[j] > p->sub_w) || !(cand[top[ci]] >= sm - p->sub_margin * fabsf(sm))) continue;
        s[j] = top[ci++];
        subbed[i] = 1;
        subs++;
        kept--;
    }
    /* the budget: the lowest-scoring misses still there take the next candidates */
    for (int i = nm - 1; i >= 0 && p->sub_budget && kept > p->sub_miss && ci < nc; i--) {
        if (subbed[i]) continue;
        s[miss[i]] = top[ci++];
        subs++;
        kept--;
    }
    return subs;
}

int mr_approx_cache_select(mr_model *m, int layer, const mr_moe_cfg *c, const float *logits, const float *sel_bias, int n,
                           int32_t *sel, float *w) {
    if (!mr_moe_approx_on(m) || !m->pager || !mr_pager_paging(m->pager)) return 0;
    const mr_approx_params *p = &m->approx->cur;
    if (!mr_approx_sub_on(p) || (c->hash_routed && !p->sub_hash)) return 0;
    const int E = c->n_expert, K = c->n_used;
    if (K > 64) return 0; /* no published model routes to more; the rule is then off */
    /* on the stack for every published model's sizes (an eval allocates nothing) */
    enum { SEL_E = 1024 };
    float buf_st[3 * SEL_E];
    uint8_t have_st[SEL_E];
    float *buf = E <= SEL_E ? buf_st : mr_malloc(sizeof(float) * (size_t)E * 3);
    uint8_t *have = E <= SEL_E ? have_st : mr_malloc((size_t)E);
    if (!buf || !have) {
        if (buf != buf_st) free(buf);
        if (have != have_st) free(have);
        mr_set_error("moe: out of memory");
        return -1;
    }
    float *probs = buf, *score = buf + E, *cand = buf + 2 * E;
    /* cached: in the arena (or being read into it), or owned by another process (not read here) */
    for (int e = 0; e < E; e++)
        have[e] = (uint8_t)(mr_pager_cached(m->pager, layer, e) ||
                            (m->moe_remote && m->moe_remote->owns(m->moe_remote->ctx, layer, e)));
    mr_approx_stats st = {0};
    for (int t = 0; t < n; t++) {
        int32_t *s = sel + (int64_t)t * K;
        int missed;
        mr_moe_scores(c, logits + (int64_t)t * E, sel_bias, probs, score);
        st.sub_substituted += (uint64_t)select_token(p, E, K, score, w + (int64_t)t * K, have, s, cand, &missed);
        st.sub_misses += (uint64_t)missed;
        for (int j = 0; j < K; j++) have[s[j]] = 1; /* read for this token: free for the later ones */
    }
    st.sub_token_layers = (uint64_t)n;
    if (buf != buf_st) free(buf);
    if (have != have_st) free(have);
    /* the weights of the new sets, as the router gives them (unchanged tokens get the same values) */
    if (st.sub_substituted && mr_moe_route(c, logits, NULL, sel, n, sel, w)) return -1;
    mr_moe_approx_add_stats(m, &st);
    return 0;
}
