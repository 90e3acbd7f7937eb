/* Optional MoE approximations: top-k tail pruning and gate-first SwiGLU row skipping (moe_approx.h). */
#include "model/moe_approx.h"
#include "model/ops.h"
#include "quant/matmul.h"
#include "quant/quant.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameters ---- */

void mr_approx_params_default(mr_approx_params *p) {
    memset(p, 0, sizeof *p);
    p->prune_min = 1;
    p->prune_rescale = MR_APPROX_RESCALE_L2;
}

static int prune_on(const mr_approx_params *p) { return (p->prune_p > 0.0f && p->prune_p < 1.0f) || p->prune_tau > 0.0f; }
static int skip_on(const mr_approx_params *p) { return p->skip_rel > 0.0f || p->skip_abs > 0.0f; }

int mr_approx_params_enabled(const mr_approx_params *p) { return p && (prune_on(p) || skip_on(p)); }

static int check_params(const mr_approx_params *p) {
    if (!(p->prune_p >= 0.0f && p->prune_p <= 1.0f)) { mr_set_error("approx: prune=%g must be in [0, 1]", p->prune_p); return -1; }
    if (!(p->prune_tau >= 0.0f && p->prune_tau <= 1.0f)) { mr_set_error("approx: tau=%g must be in [0, 1]", p->prune_tau); return -1; }
    if (p->prune_rescale < MR_APPROX_RESCALE_L2 || p->prune_rescale > MR_APPROX_RESCALE_NONE) {
        mr_set_error("approx: unknown rescale mode %d", p->prune_rescale);
        return -1;
    }
    if (!(p->skip_rel >= 0.0f && p->skip_rel <= 1.0f)) { mr_set_error("approx: skip=%g must be in [0, 1]", p->skip_rel); return -1; }
    if (!(p->skip_abs >= 0.0f && isfinite(p->skip_abs))) { mr_set_error("approx: skip_abs=%g must be >= 0", p->skip_abs); return -1; }
    return 0;
}

static const char *rescale_names[] = {"l2", "l1", "none"};

int mr_approx_parse(const char *spec, mr_approx_params *out) {
    mr_approx_params p = *out;
    const char *s = spec ? spec : "";
    while (*s) {
        while (*s == ' ' || *s == ',' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        const char *e = s;
        while (*e && *e != ' ' && *e != ',' && *e != '\t' && *e != '\n') e++;
        char tok[64];
        size_t len = (size_t)(e - s);
        if (len >= sizeof tok) { mr_set_error("approx: '%.*s...' is too long", 20, s); return -1; }
        memcpy(tok, s, len);
        tok[len] = 0;
        s = e;
        if (!strcmp(tok, "off") || !strcmp(tok, "exact")) { mr_approx_params_default(&p); continue; }
        char *eq = strchr(tok, '=');
        if (!eq) { mr_set_error("approx: expected key=value, got '%s'", tok); return -1; }
        *eq = 0;
        const char *key = tok, *val = eq + 1;
        if (!strcmp(key, "rescale")) {
            int found = -1;
            for (int i = 0; i < 3; i++) if (!strcmp(val, rescale_names[i])) found = i;
            if (found < 0) { mr_set_error("approx: rescale=%s (expected l2, l1 or none)", val); return -1; }
            p.prune_rescale = found;
            continue;
        }
        char *end;
        errno = 0;
        double v = strtod(val, &end);
        if (end == val || *end || errno || !isfinite(v)) { mr_set_error("approx: bad number '%s' for %s", val, key); return -1; }
        if (!strcmp(key, "prune")) p.prune_p = (float)v;
        else if (!strcmp(key, "tau")) p.prune_tau = (float)v;
        else if (!strcmp(key, "min")) {
            if (v != floor(v) || v < 1 || v > 1024) { mr_set_error("approx: min=%s must be an integer >= 1", val); return -1; }
            p.prune_min = (int)v;
        } else if (!strcmp(key, "skip")) p.skip_rel = (float)v;
        else if (!strcmp(key, "skip_abs")) p.skip_abs = (float)v;
        else { mr_set_error("approx: unknown key '%s' (prune, tau, min, rescale, skip, skip_abs)", key); return -1; }
    }
    if (check_params(&p)) return -1;
    *out = p;
    return 0;
}

int mr_approx_format(const mr_approx_params *p, char *buf, size_t len) {
    if (!mr_approx_params_enabled(p)) return snprintf(buf, len, "off");
    int r = p->prune_rescale >= 0 && p->prune_rescale <= 2 ? p->prune_rescale : 0;
    return snprintf(buf, len, "prune=%g tau=%g min=%d rescale=%s skip=%g skip_abs=%g", p->prune_p, p->prune_tau,
                    p->prune_min < 1 ? 1 : p->prune_min, rescale_names[r], p->skip_rel, p->skip_abs);
}

static struct mr_moe_approx *approx_get(mr_model *m) {
    if (m->approx) return m->approx;
    struct mr_moe_approx *a = calloc(1, sizeof *a);
    if (!a) { mr_set_error("approx: out of memory"); return NULL; }
    if (pthread_mutex_init(&a->mu, NULL)) { free(a); mr_set_error("approx: cannot create a mutex"); return NULL; }
    mr_approx_params_default(&a->pending);
    a->cur = a->pending;
    m->approx = a;
    return a;
}

int mr_model_set_approx(mr_model *m, const mr_approx_params *p) {
    mr_approx_params q;
    if (p) q = *p; else mr_approx_params_default(&q);
    if (check_params(&q)) return -1;
    if (!m->approx && !mr_approx_params_enabled(&q)) return 0; /* stays exact, nothing to allocate */
    struct mr_moe_approx *a = approx_get(m);
    if (!a) return -1;
    pthread_mutex_lock(&a->mu);
    a->pending = q;
    pthread_mutex_unlock(&a->mu);
    return 0;
}

void mr_model_get_approx(const mr_model *m, mr_approx_params *p) {
    if (!m->approx) { mr_approx_params_default(p); return; }
    pthread_mutex_lock(&m->approx->mu);
    *p = m->approx->pending;
    pthread_mutex_unlock(&m->approx->mu);
}

void mr_model_approx_stats(const mr_model *m, mr_approx_stats *s) {
    memset(s, 0, sizeof *s);
    if (!m->approx) return;
    pthread_mutex_lock(&m->approx->mu);
    *s = m->approx->stats;
    pthread_mutex_unlock(&m->approx->mu);
}

void mr_model_approx_stats_reset(mr_model *m) {
    if (!m->approx) return;
    pthread_mutex_lock(&m->approx->mu);
    memset(&m->approx->stats, 0, sizeof m->approx->stats);
    pthread_mutex_unlock(&m->approx->mu);
}

void mr_moe_approx_begin_eval(mr_model *m) {
    struct mr_moe_approx *a = m->approx;
    if (!a) return;
    pthread_mutex_lock(&a->mu);
    a->cur = a->pending;
    a->on = mr_approx_params_enabled(&a->cur);
    pthread_mutex_unlock(&a->mu);
}

void mr_moe_approx_free(struct mr_moe_approx *a) {
    if (!a) return;
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* ---- pruning ---- */

int mr_approx_prune(const mr_approx_params *p, int k, const float *w, int *keep, float *w_out) {
    int order[k > 0 ? k : 1];
    for (int j = 0; j < k; j++) { keep[j] = 1; w_out[j] = w[j]; order[j] = j; }
    if (k <= 1 || !prune_on(p)) return k;
    /* slots by descending |w| (stable: equal weights keep slot order) */
    for (int a = 1; a < k; a++) {
        int o = order[a], b = a;
        while (b > 0 && fabsf(w[order[b - 1]]) < fabsf(w[o])) { order[b] = order[b - 1]; b--; }
        order[b] = o;
    }
    double sum = 0, sq = 0;
    for (int j = 0; j < k; j++) { sum += fabsf(w[j]); sq += (double)w[j] * w[j]; }
    int m = k;
    if (p->prune_p > 0.0f && p->prune_p < 1.0f && sum > 0) {
        double cum = 0;
        for (int i = 0; i < k; i++) {
            cum += fabsf(w[order[i]]);
            if (cum >= p->prune_p * sum) { m = i + 1; break; }
        }
    }
    if (p->prune_tau > 0.0f) {
        const double lim = (double)p->prune_tau * fabsf(w[order[0]]);
        int mt = 0;
        while (mt < k && fabsf(w[order[mt]]) >= lim) mt++;
        if (mt < m) m = mt;
    }
    const int mn = p->prune_min < 1 ? 1 : p->prune_min;
    if (m < mn) m = mn;
    if (m >= k) return k;
    double ksum = 0, ksq = 0;
    for (int i = 0; i < k; i++) {
        const int j = order[i];
        if (i < m) { ksum += fabsf(w[j]); ksq += (double)w[j] * w[j]; }
        else { keep[j] = 0; w_out[j] = 0.0f; }
    }
    double scale = 1.0;
    if (p->prune_rescale == MR_APPROX_RESCALE_L2 && ksq > 0) scale = sqrt(sq / ksq);
    else if (p->prune_rescale == MR_APPROX_RESCALE_L1 && ksum > 0) scale = sum / ksum;
    for (int i = 0; i < m; i++) w_out[order[i]] = (float)(w[order[i]] * scale);
    return m;
}


/* ---- the approximate expert layer ---- */

int mr_moe_experts_approx(mr_model *m, int layer, const mr_moe_cfg *c, const float *x, int n,
                          const int32_t *sel, const float *w, float *out) {
    const mr_approx_params *P = &m->approx->cur;
    const int E = c->n_expert, K = c->n_used;
    if (!m->pager || !m->exp_layers || layer < 0 || layer >= m->n_layer) {
        mr_set_error("moe: layer %d has no routed experts (pager not initialised)", layer);
        return -1;
    }
    const mr_pager_layer *pl = &m->exp_layers[layer];
    const mr_gguf_tensor *tg = pl->mat[MR_PAGER_GATE], *tu = pl->mat[MR_PAGER_UP], *td = pl->mat[MR_PAGER_DOWN];
    if (!tu || !td) { mr_set_error("moe: layer %d lacks ffn_up_exps / ffn_down_exps", layer); return -1; }
    const int64_t d = tu->ne[0], F = tu->ne[1];
    const int skipping = skip_on(P) && tg != NULL;
    const mr_type_traits *dt = mr_type_get(td->type);
    const int64_t dblk = dt ? dt->block_size : 1, nb = F / dblk;
    mr_approx_stats st = {0};
    int rc = -1, prefetched = 0;
    int *count = calloc((size_t)E + 1, sizeof(int));
    int *start = calloc((size_t)E + 1, sizeof(int));
    int *ids = calloc((size_t)E + 1, sizeof(int));
    int *list = malloc(sizeof(int) * (size_t)n * K);
    int *keep = malloc(sizeof(int) * (size_t)n * K);
    float *wk = malloc(sizeof(float) * (size_t)n * K);
    float *xs = malloc(sizeof(float) * (size_t)n * d);
    float *g = malloc(sizeof(float) * (size_t)n * F);
    float *u = malloc(sizeof(float) * (size_t)n * F);
    float *y = malloc(sizeof(float) * (size_t)n * d);
    float *slots = malloc(sizeof(float) * (size_t)n * K * d);
    uint8_t *act = skipping ? malloc((size_t)n * F) : NULL;
    float *sg = skipping ? malloc(sizeof(float) * (size_t)n * F) : NULL;  /* silu(g) */
    uint8_t *bact = skipping ? malloc((size_t)n * (nb > 0 ? nb : 1)) : NULL;
    if (!count || !start || !ids || !list || !keep || !wk || !xs || !g || !u || !y || !slots || (skipping && (!act || !bact || !sg))) {
        mr_set_error("moe: out of memory");
        goto done;
    }
    if (skipping && (!dt || F % dblk)) { mr_set_error("moe: n_ff %lld is not a multiple of the down block size", (long long)F); goto done; }

    /* 1. pruning (a hook on the routing result: dropped slots are never paged in nor computed) */
    for (int t = 0; t < n; t++) {
        for (int j = 0; j < K; j++)
            if (sel[t * K + j] < 0 || sel[t * K + j] >= E) { mr_set_error("moe: expert id %d out of range", sel[t * K + j]); goto done; }
        st.experts_kept += (uint64_t)mr_approx_prune(P, K, w + (int64_t)t * K, keep + (int64_t)t * K, wk + (int64_t)t * K);
    }
    st.token_layers = (uint64_t)n;
    st.experts_routed = (uint64_t)n * (uint64_t)K;

    /* 2. group the kept (token, slot) pairs by expert */
    for (int i = 0; i < n * K; i++) if (keep[i]) count[sel[i]]++;
    int n_ids = 0;
    for (int e = 0; e < E; e++) { start[e + 1] = start[e] + count[e]; if (count[e]) ids[n_ids++] = e; }
    memset(count, 0, sizeof(int) * (size_t)E);
    for (int i = 0; i < n * K; i++) if (keep[i]) list[start[sel[i]] + count[sel[i]]++] = i;

    if (mr_pager_prefetch(m->pager, layer, ids, n_ids)) goto done;
    prefetched = 1;
    for (int ii = 0; ii < n_ids; ii++) {
        int e;
        const void *ptr[MR_PAGER_MATS];
        if (mr_pager_next(m->pager, layer, &e, ptr)) goto done;
        const int cnt = count[e];
        const int *li = list + start[e];
        for (int r = 0; r < cnt; r++) memcpy(xs + (int64_t)r * d, x + (int64_t)(li[r] / K) * d, sizeof(float) * (size_t)d);
        int sparse_down = 0;
        int64_t group_bskipped = 0;
        if (!skipping) {
            /* exactly the operations of mr_moe_experts */
            if (mr_matmul(m->pool, ptr[MR_PAGER_UP], tu->type, F, d, xs, cnt, u)) goto done;
            if (tg && mr_matmul(m->pool, ptr[MR_PAGER_GATE], tg->type, F, d, xs, cnt, g)) goto done;
        } else {
            /* gate first; the rows to compute follow from silu(g) */
            if (mr_matmul(m->pool, ptr[MR_PAGER_GATE], tg->type, F, d, xs, cnt, g)) goto done;
            for (int r = 0; r < cnt; r++) {
                float *gr = g + (int64_t)r * F;
                uint8_t *ar = act + (int64_t)r * F, *br = bact + (int64_t)r * nb;
                if (c->clamp > 1e-6f)
                    for (int64_t i = 0; i < F; i++) if (gr[i] > c->clamp) gr[i] = c->clamp;
                float *sr = sg + (int64_t)r * F, mx = 0.0f;
                for (int64_t i = 0; i < F; i++) { sr[i] = mr_silu(gr[i]); if (fabsf(sr[i]) > mx) mx = fabsf(sr[i]); }
                float thr = P->skip_rel * mx;
                if (P->skip_abs > thr) thr = P->skip_abs;
                int64_t skipped = 0, bskipped = 0;
                for (int64_t b = 0; b < nb; b++) {
                    int any = 0;
                    for (int64_t i = b * dblk; i < (b + 1) * dblk; i++) {
                        ar[i] = !(fabsf(sr[i]) < thr);
                        any |= ar[i];
                        skipped += !ar[i];
                    }
                    br[b] = (uint8_t)any;
                    bskipped += !any;
                }
                st.rows_skipped += (uint64_t)skipped;
                st.blocks_skipped += (uint64_t)bskipped;
                if (bskipped) sparse_down = 1;
                group_bskipped += bskipped;
            }
            st.rows_total += (uint64_t)cnt * (uint64_t)F;
            st.blocks_total += (uint64_t)cnt * (uint64_t)nb;
            if (cnt >= 4) {
                /* a batch: the dense product has the faster multi-column kernels, and a row can be
                 * skipped only when all the columns of its group skip it, which is rare; compute
                 * all rows and drop the inactive ones (the same values, so the same h) */
                if (mr_matmul(m->pool, ptr[MR_PAGER_UP], tu->type, F, d, xs, cnt, u)) goto done;
                for (int64_t i = 0; i < (int64_t)cnt * F; i++) if (!act[i]) u[i] = 0.0f;
            } else if (mr_matmul_rows_masked(m->pool, ptr[MR_PAGER_UP], tu->type, F, d, xs, cnt, act, u)) goto done;
        }
        /* skipped rows have up = 0, so h = 0 there */
        for (int r = 0; r < cnt; r++)
            mr_swiglu(u + (int64_t)r * F, tg ? g + (int64_t)r * F : NULL, u + (int64_t)r * F, F, c->clamp,
                      c->weight_before_down ? wk[li[r]] : 1.0f);
        /* a batch loses the 4-column kernel (about 2x faster per column) in the sparse product: worth it
         * only when at least half of the blocks are skipped */
        if (sparse_down && cnt > 1 && group_bskipped * 2 < (int64_t)cnt * nb) sparse_down = 0;
        if (sparse_down) {
            if (mr_matmul_blocks(m->pool, ptr[MR_PAGER_DOWN], td->type, d, F, u, cnt, bact, 1, y)) goto done;
        } else if (mr_matmul(m->pool, ptr[MR_PAGER_DOWN], td->type, d, F, u, cnt, y)) goto done;
        for (int r = 0; r < cnt; r++) {
            float *dst = slots + (int64_t)li[r] * d;
            const float *src = y + (int64_t)r * d;
            if (c->weight_before_down) memcpy(dst, src, sizeof(float) * (size_t)d);
            else { const float wr = wk[li[r]]; for (int64_t i = 0; i < d; i++) dst[i] = src[i] * wr; }
        }
        mr_pager_done(m->pager, layer, e);
    }
    /* kept slots summed in slot order (all kept: the exact chain of adds) */
    for (int t = 0; t < n; t++) {
        float *o = out + (int64_t)t * d;
        int first = 1;
        for (int j = 0; j < K; j++) {
            if (!keep[t * K + j]) continue;
            const float *src = slots + ((int64_t)t * K + j) * d;
            if (first) memcpy(o, src, sizeof(float) * (size_t)d);
            else mr_add(o, o, src, d);
            first = 0;
        }
    }
    rc = 0;
    pthread_mutex_lock(&m->approx->mu);
    mr_approx_stats *S = &m->approx->stats;
    S->token_layers += st.token_layers; S->experts_routed += st.experts_routed; S->experts_kept += st.experts_kept;
    S->rows_total += st.rows_total; S->rows_skipped += st.rows_skipped;
    S->blocks_total += st.blocks_total; S->blocks_skipped += st.blocks_skipped;
    pthread_mutex_unlock(&m->approx->mu);
done:
    if (prefetched) mr_pager_release(m->pager, layer);
    free(count); free(start); free(ids); free(list); free(keep); free(wk); free(xs); free(g); free(u); free(y);
    free(slots); free(act); free(bact); free(sg);
    return rc;
}
