/* Optional MoE approximations: top-k tail pruning and gate-first SwiGLU row skipping (moe_approx.h). */
#include "model/moe_approx.h"
#include "model/ops.h"
#include "base/prof.h"
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
    p->layer_last = -1;
}

int mr_approx_params_enabled(const mr_approx_params *p) {
    return p && (mr_approx_prune_on(p) || mr_approx_skip_on(p) || p->rows_shared > 0 || p->rows_dense > 0 || mr_approx_sub_on(p));
}

static int check_params(const mr_approx_params *p) {
    if (!(p->prune_p >= 0.0f && p->prune_p <= 1.0f)) { mr_set_error("approx: prune=%g must be in [0, 1]", p->prune_p); return -1; }
    if (!(p->prune_tau >= 0.0f && p->prune_tau <= 1.0f)) { mr_set_error("approx: tau=%g must be in [0, 1]", p->prune_tau); return -1; }
    if (p->prune_k < 0 || p->prune_k > 1024) { mr_set_error("approx: k=%d must be in [0, 1024]", p->prune_k); return -1; }
    if (!(p->prune_min_w >= 0.0f && isfinite(p->prune_min_w))) { mr_set_error("approx: min_w=%g must be >= 0", p->prune_min_w); return -1; }
    if (!(p->prune_rho >= 0.0f && p->prune_rho <= 1.0f)) { mr_set_error("approx: rho=%g must be in [0, 1]", p->prune_rho); return -1; }
    if (p->layer_first < 0 || p->layer_last < -1 || (p->layer_last >= 0 && p->layer_last < p->layer_first)) {
        mr_set_error("approx: layers=%d-%d is not a range of layers", p->layer_first, p->layer_last);
        return -1;
    }
    if (p->prune_rescale < MR_APPROX_RESCALE_L2 || p->prune_rescale > MR_APPROX_RESCALE_RHO) {
        mr_set_error("approx: unknown rescale mode %d", p->prune_rescale);
        return -1;
    }
    if (!(p->skip_rel >= 0.0f && p->skip_rel <= 1.0f)) { mr_set_error("approx: skip=%g must be in [0, 1]", p->skip_rel); return -1; }
    if (!(p->skip_abs >= 0.0f && isfinite(p->skip_abs))) { mr_set_error("approx: skip_abs=%g must be >= 0", p->skip_abs); return -1; }
    const int rows[3] = {p->rows_routed, p->rows_shared, p->rows_dense};
    for (int i = 0; i < 3; i++)
        if (rows[i] < 0 || rows[i] > MR_APPROX_ROW_BLOCK) {
            mr_set_error("approx: %s=%d must be in [0, %d] (rows kept of every %d)", i == 0 ? "rows" : i == 1 ? "rows_shared" : "rows_dense",
                         rows[i], MR_APPROX_ROW_BLOCK, MR_APPROX_ROW_BLOCK);
            return -1;
        }
    if (!(p->sub_margin >= 0.0f && p->sub_margin <= 100.0f)) { mr_set_error("approx: sub_margin=%g must be in [0, 100]", p->sub_margin); return -1; }
    if (!(p->sub_w >= 0.0f && isfinite(p->sub_w))) { mr_set_error("approx: sub_w=%g must be >= 0", p->sub_w); return -1; }
    if (p->sub_budget && (p->sub_miss < 0 || p->sub_miss > 1024)) { mr_set_error("approx: sub_miss=%d must be in [-1, 1024]", p->sub_miss); return -1; }
    if (p->rows_routed > 0 && (p->skip_rel > 0.0f || p->skip_abs > 0.0f)) {
        mr_set_error("approx: rows= and skip= / skip_abs= are two rules for the routed experts' rows: set the other to 0");
        return -1;
    }
    return 0;
}

static const char *rescale_names[] = {"l2", "l1", "none", "rho"};

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
            for (int i = 0; i < 4; i++) if (!strcmp(val, rescale_names[i])) found = i;
            if (found < 0) { mr_set_error("approx: rescale=%s (expected l2, l1, none or rho)", val); return -1; }
            p.prune_rescale = found;
            continue;
        }
        if (!strcmp(key, "layers")) { /* A-B or A- */
            char *e1, *e2;
            errno = 0;
            long a = strtol(val, &e1, 10), b = -1;
            if (e1 == val || *e1 != '-' || a < 0 || a > 100000 || errno) { mr_set_error("approx: layers=%s (expected A-B or A-)", val); return -1; }
            if (e1[1]) {
                b = strtol(e1 + 1, &e2, 10);
                if (e2 == e1 + 1 || *e2 || b < 0 || b > 100000 || errno) { mr_set_error("approx: layers=%s (expected A-B or A-)", val); return -1; }
            }
            p.layer_first = (int)a;
            p.layer_last = (int)b;
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
        } else if (!strcmp(key, "k")) {
            if (v != floor(v) || v < 0 || v > 1024) { mr_set_error("approx: k=%s must be an integer >= 0", val); return -1; }
            p.prune_k = (int)v;
        } else if (!strcmp(key, "min_w")) p.prune_min_w = (float)v;
        else if (!strcmp(key, "rho")) { p.prune_rho = (float)v; p.prune_rescale = MR_APPROX_RESCALE_RHO; }
        else if (!strcmp(key, "prune_hash")) {
            if (v != 0 && v != 1) { mr_set_error("approx: prune_hash=%s must be 0 or 1", val); return -1; }
            p.prune_hash = (int)v;
        } else if (!strcmp(key, "sub_hash")) {
            if (v != 0 && v != 1) { mr_set_error("approx: sub_hash=%s must be 0 or 1", val); return -1; }
            p.sub_hash = (int)v;
        } else if (!strcmp(key, "sub_miss")) {
            if (v != floor(v) || v < -1 || v > 1024) { mr_set_error("approx: sub_miss=%s must be an integer in [-1, 1024]", val); return -1; }
            p.sub_budget = v >= 0;
            p.sub_miss = v >= 0 ? (int)v : 0;
        } else if (!strcmp(key, "sub_margin")) p.sub_margin = (float)v;
        else if (!strcmp(key, "sub_w")) p.sub_w = (float)v;
        else if (!strcmp(key, "skip")) p.skip_rel = (float)v;
        else if (!strcmp(key, "skip_abs")) p.skip_abs = (float)v;
        else if (!strcmp(key, "rows") || !strcmp(key, "rows_shared") || !strcmp(key, "rows_dense")) {
            if (v != floor(v) || v < 0 || v > MR_APPROX_ROW_BLOCK) {
                mr_set_error("approx: %s=%s must be an integer in [0, %d] (rows kept of every %d)", key, val, MR_APPROX_ROW_BLOCK,
                             MR_APPROX_ROW_BLOCK);
                return -1;
            }
            *(key[4] == 0 ? &p.rows_routed : key[5] == 's' ? &p.rows_shared : &p.rows_dense) = (int)v;
        } else {
            mr_set_error("approx: unknown key '%s' (prune, tau, min, k, min_w, rescale, rho, layers, prune_hash, skip, skip_abs, "
                         "rows, rows_shared, rows_dense, sub_margin, sub_w, sub_miss, sub_hash)", key);
            return -1;
        }
    }
    if (check_params(&p)) return -1;
    *out = p;
    return 0;
}

int mr_approx_format(const mr_approx_params *p, char *buf, size_t len) {
    if (!mr_approx_params_enabled(p)) return snprintf(buf, len, "off");
    int r = p->prune_rescale >= 0 && p->prune_rescale <= 3 ? p->prune_rescale : 0;
    /* the keys added later only when they are not at their defaults */
    char extra[224] = "", *e = extra;
    const char *end = extra + sizeof extra;
    if (p->prune_k) e += snprintf(e, (size_t)(end - e), " k=%d", p->prune_k);
    if (p->prune_min_w > 0.0f) e += snprintf(e, (size_t)(end - e), " min_w=%g", p->prune_min_w);
    if (r == MR_APPROX_RESCALE_RHO) e += snprintf(e, (size_t)(end - e), " rho=%g", p->prune_rho);
    if (p->layer_first || p->layer_last >= 0) {
        if (p->layer_last >= 0) e += snprintf(e, (size_t)(end - e), " layers=%d-%d", p->layer_first, p->layer_last);
        else e += snprintf(e, (size_t)(end - e), " layers=%d-", p->layer_first);
    }
    if (p->prune_hash) e += snprintf(e, (size_t)(end - e), " prune_hash=1");
    char rows[64] = "", *q = rows;
    if (p->rows_routed) q += snprintf(q, sizeof rows - (size_t)(q - rows), " rows=%d", p->rows_routed);
    if (p->rows_shared) q += snprintf(q, sizeof rows - (size_t)(q - rows), " rows_shared=%d", p->rows_shared);
    if (p->rows_dense) q += snprintf(q, sizeof rows - (size_t)(q - rows), " rows_dense=%d", p->rows_dense);
    char sub[96] = "";
    if (mr_approx_sub_on(p))
        snprintf(sub, sizeof sub, " sub_margin=%g sub_w=%g sub_miss=%d%s", p->sub_margin, p->sub_w, p->sub_budget ? p->sub_miss : -1,
                 p->sub_hash ? " sub_hash=1" : "");
    return snprintf(buf, len, "prune=%g tau=%g min=%d rescale=%s%s skip=%g skip_abs=%g%s%s", p->prune_p, p->prune_tau,
                    p->prune_min < 1 ? 1 : p->prune_min, rescale_names[r], extra, p->skip_rel, p->skip_abs, rows, sub);
}

/* Allocated with the model (mr_model_load), never later: mr_model_set_approx may then run in any
 * thread while another evaluates, since the eval only reads m->approx (a pointer fixed at load)
 * and copies the requested setting under the lock at its start (mr_moe_approx_begin_eval). */
int mr_moe_approx_init(mr_model *m) {
    struct mr_moe_approx *a = mr_calloc(1, sizeof *a);
    if (!a) { mr_set_error("approx: out of memory"); return -1; }
    if (pthread_mutex_init(&a->mu, NULL)) { free(a); mr_set_error("approx: cannot create a mutex"); return -1; }
    mr_approx_params_default(&a->pending);
    a->cur = a->pending;
    m->approx = a;
    return 0;
}

int mr_model_set_approx(mr_model *m, const mr_approx_params *p) {
    mr_approx_params q;
    if (p) q = *p; else mr_approx_params_default(&q);
    if (check_params(&q)) return -1;
    struct mr_moe_approx *a = m->approx;
    if (!a) { mr_set_error("approx: the model was not loaded by mr_model_load"); return -1; }
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

void mr_moe_approx_add_stats(mr_model *m, const mr_approx_stats *st) {
    pthread_mutex_lock(&m->approx->mu);
    mr_approx_stats *S = &m->approx->stats;
    S->token_layers += st->token_layers; S->experts_routed += st->experts_routed; S->experts_kept += st->experts_kept;
    S->rows_total += st->rows_total; S->rows_skipped += st->rows_skipped;
    S->blocks_total += st->blocks_total; S->blocks_skipped += st->blocks_skipped;
    S->ffn_rows_total += st->ffn_rows_total; S->ffn_rows_skipped += st->ffn_rows_skipped;
    S->sub_token_layers += st->sub_token_layers; S->sub_misses += st->sub_misses; S->sub_substituted += st->sub_substituted;
    pthread_mutex_unlock(&m->approx->mu);
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
    if (k <= 1 || !mr_approx_prune_on(p)) return k;
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
    if (p->prune_min_w > 0.0f) {
        int mw = 0;
        while (mw < k && fabsf(w[order[mw]]) >= p->prune_min_w) mw++;
        if (mw < m) m = mw;
    }
    if (p->prune_k > 0 && p->prune_k < m) m = p->prune_k;
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
    else if (p->prune_rescale == MR_APPROX_RESCALE_RHO) {
        const double r = p->prune_rho, den = (1 - r) * ksq + r * ksum * ksum;
        if (den > 0) scale = sqrt(((1 - r) * sq + r * sum * sum) / den);
    }
    for (int i = 0; i < m; i++) w_out[order[i]] = (float)(w[order[i]] * scale);
    return m;
}

/* ---- row skipping ---- */

static inline float row_score(const float *g, int64_t i, int clamp, float lim) {
    return fabsf(mr_silu(clamp && g[i] > lim ? lim : g[i]));
}

/* The k-th largest (k >= 1) of v[n] (n <= 128), by quickselect on a copy: v holds the bit patterns
 * of non-negative floats, which order like the floats. */
static uint32_t kth_largest(const uint32_t *v, int n, int k) {
    uint32_t a[MR_APPROX_ROW_BLOCK];
    memcpy(a, v, sizeof(uint32_t) * (size_t)n);
    int lo = 0, hi = n - 1;
    const int want = k - 1; /* index in descending order */
    while (lo < hi) {
        const uint32_t x = a[lo], y = a[(lo + hi) / 2], z = a[hi]; /* median of three as the pivot */
        const uint32_t piv = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
        int i = lo, j = hi;
        while (i <= j) { /* descending: left part >= piv >= right part */
            while (a[i] > piv) i++;
            while (a[j] < piv) j--;
            if (i <= j) { const uint32_t t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return a[want];
}

/* The budget rule on rows [0, L) of one block: act[], the kept count, the scale. s[L]: the scores
 * as float bits. Keeps the rows with s > T (T the keep-th largest) and, of those equal to T, the
 * first ones in row order up to keep. */
static float block_budget(const uint32_t *s, int L, int keep, uint8_t *act) {
    if (keep >= L) { memset(act, 1, (size_t)L); return 1.0f; }
    const uint32_t T = kth_largest(s, L, keep);
    int above = 0;
    for (int i = 0; i < L; i++) above += s[i] > T;
    int ties = keep - above;
    double all = 0.0, kept = 0.0;
    for (int i = 0; i < L; i++) {
        float f;
        memcpy(&f, &s[i], sizeof f);
        act[i] = s[i] > T || (s[i] == T && ties-- > 0);
        all += (double)f * f;
        if (act[i]) kept += (double)f * f;
    }
    return kept > 0.0 && all > kept ? (float)sqrt(all / kept) : 1.0f;
}

int64_t mr_approx_row_mask(const mr_approx_params *p, int budget, const float *g, int64_t F, float lim, int64_t blk,
                           uint8_t *act, uint8_t *bact, float *alpha, int64_t *rows_skipped) {
    const int clamp = lim > 1e-6f;
    const int64_t nab = (F + MR_APPROX_ROW_BLOCK - 1) / MR_APPROX_ROW_BLOCK;
    int64_t skipped = 0, bskipped = 0;
    if (budget > 0) {
        uint32_t s[MR_APPROX_ROW_BLOCK];
        for (int64_t b = 0; b < nab; b++) {
            const int64_t i0 = b * MR_APPROX_ROW_BLOCK;
            const int L = (int)(F - i0 < MR_APPROX_ROW_BLOCK ? F - i0 : MR_APPROX_ROW_BLOCK);
            const int keep = (budget * L + MR_APPROX_ROW_BLOCK - 1) / MR_APPROX_ROW_BLOCK;
            for (int i = 0; i < L; i++) {
                const float f = row_score(g, i0 + i, clamp, lim);
                memcpy(&s[i], &f, sizeof f);
            }
            alpha[b] = block_budget(s, L, keep, act + i0);
            skipped += L - (keep < L ? keep : L);
        }
    } else {
        float mx = 0.0f;
        for (int64_t i = 0; i < F; i++) {
            const float s = row_score(g, i, clamp, lim);
            if (s > mx) mx = s;
        }
        float thr = p->skip_rel * mx;
        if (p->skip_abs > thr) thr = p->skip_abs;
        for (int64_t i = 0; i < F; i++) {
            act[i] = !(row_score(g, i, clamp, lim) < thr);
            skipped += !act[i];
        }
        for (int64_t b = 0; alpha && b < nab; b++) alpha[b] = 1.0f;
    }
    for (int64_t b = 0; bact && b < F / blk; b++) {
        int any = 0;
        for (int64_t i = b * blk; i < (b + 1) * blk; i++) any |= act[i];
        bact[b] = (uint8_t)any;
        bskipped += !any;
    }
    *rows_skipped = skipped;
    return bskipped;
}

void mr_approx_row_scale(float *h, const float *alpha, int64_t F) {
    for (int64_t i0 = 0, b = 0; i0 < F; i0 += MR_APPROX_ROW_BLOCK, b++) {
        if (alpha[b] == 1.0f) continue;
        const int64_t i1 = i0 + MR_APPROX_ROW_BLOCK < F ? i0 + MR_APPROX_ROW_BLOCK : F;
        for (int64_t i = i0; i < i1; i++) h[i] *= alpha[b];
    }
}

/* ---- shared experts and dense FFNs ---- */

int mr_approx_ffn_budget(const mr_model *m, int kind) {
    if (!mr_moe_approx_on(m)) return 0;
    return kind == MR_FFN_SHARED ? m->approx->cur.rows_shared : m->approx->cur.rows_dense;
}

/* Y = w X over the model's pool, timed per tensor like mr_model_matmul (not called: model.c calls
 * this file, which then calls nothing of model.c) */
static int approx_matmul(const mr_model *m, const mr_weight *w, const float *X, int n, float *Y) {
    MR_PROF_BEGIN(t);
    const mr_matmul_task task = {w, X, n, Y, 0, 0};
    const int rc = mr_matmul_many_in(m->pool, m->ws, &task, 1);
    if (mr_prof_on) mr_prof_add_matmul(w->name, mr_now() - t);
    return rc;
}

int mr_approx_ffn_act(mr_model *m, int budget, const mr_weight *gate, const mr_weight *up, const float *x, int n, float *g,
                      float *u, float lim) {
    const int64_t F = gate->rows, nab = (F + MR_APPROX_ROW_BLOCK - 1) / MR_APPROX_ROW_BLOCK;
    if (up->rows != F || up->cols != gate->cols) { mr_set_error("approx: FFN gate and up shapes differ"); return -1; }
    /* the masks from the session's arena for such buffers (a per-call one outside an eval) */
    mr_scratch own = {0}, *tmp = m->tmp ? m->tmp : &own;
    mr_scratch_reset(tmp);
    uint8_t *act = mr_scratch_alloc(tmp, (size_t)(n * F));
    float *alpha = mr_scratch_alloc(tmp, sizeof(float) * (size_t)(n * nab));
    mr_mm_act a = {0};
    mr_approx_stats st = {0};
    int rc = -1;
    if (!act || !alpha) { mr_set_error("approx: out of memory"); goto done; }
    if (approx_matmul(m, gate, x, n, g)) goto done;
    for (int t = 0; t < n; t++) {
        int64_t sk;
        mr_approx_row_mask(&m->approx->cur, budget, g + t * F, F, lim, 0, act + t * F, NULL, alpha + t * nab, &sk);
        st.ffn_rows_skipped += (uint64_t)sk;
    }
    st.ffn_rows_total = (uint64_t)n * (uint64_t)F;
    /* like the expert engine: a batch of 4 or more keeps the dense product (its multi-column
     * kernels) and drops the skipped rows afterwards; the values are the same */
    if (n >= 4) {
        if (approx_matmul(m, up, x, n, u)) goto done;
        for (int64_t i = 0; i < n * F; i++) if (!act[i]) u[i] = 0.0f;
    } else if (mr_mm_act_make_in(m->pool, &a, tmp, up->type, x, up->cols, n, up->cols) ||
               mr_matmul_rows_masked(m->pool, up->data, up->type, F, &a, act, u)) goto done;
    for (int t = 0; t < n; t++) {
        mr_swiglu(g + t * F, g + t * F, u + t * F, F, lim, 1.0f);
        mr_approx_row_scale(g + t * F, alpha + t * nab, F);
    }
    mr_moe_approx_add_stats(m, &st);
    rc = 0;
done:
    mr_mm_act_free(&a);
    mr_scratch_free(&own);
    return rc;
}
