/* Expert-cache directory and replacement policies (see policy.h). */
#include "pager/policy.h"
#include "base/base.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* hazard policy: reuse distances 1..HZ_MAX-1 are counted exactly, >= HZ_MAX in a tail (assumed
 * memoryless, mean from the summed excess). W = window of future opportunities that counts as "soon";
 * HZ_PRIOR = weight (in reuses) of the layer-pooled histogram in each pair's estimate. Values chosen on
 * the kjv-moe trace (docs/PAGING.md: W 2..8 and prior 2..20 all land within 0.3 points). */
#ifndef HZ_MAX
#define HZ_MAX 64
#endif
#ifndef HZ_W
#define HZ_W 4
#endif
#ifndef HZ_WMAX
#define HZ_WMAX 16
#endif
#ifndef HZ_PRIOR
#define HZ_PRIOR 5.0
#endif
/* hot policy: the hot set is the share x slots pairs of highest frequency decayed with a half-life of
 * HOT_HALF_LIFE rounds, recomputed each round over every pair (resident or not). Two shares are tried
 * side by side on shadow directories (residency only, the same statistics) and the one with more hits,
 * decayed with a half-life of HOT_DUEL_HALF_LIFE rounds, rules the real cache: a small hot set leaves
 * room for recency (real text reuses experts in bursts), all slots hot is the static optimum's rule
 * (independent routing). */
#define HOT_SHARES 2
static const double hot_share[HOT_SHARES] = {0.6, 1.0};
#ifndef HOT_HALF_LIFE
#define HOT_HALF_LIFE 1000.0
#endif
#ifndef HOT_DUEL_HALF_LIFE
#define HOT_DUEL_HALF_LIFE 200.0
#endif
#ifndef LRFU_HALF_LIFE
#define LRFU_HALF_LIFE 100.0 /* rounds */
#endif

static const struct { const char *name, *desc; } policy_info[MR_POLICY_COUNT] = {
    [MR_POLICY_LRU] = {"lru", "least recently used"},
    [MR_POLICY_LFU] = {"lfu", "least frequently used (all-time counts, ties by recency)"},
    [MR_POLICY_LRFU] = {"lrfu", "least decayed frequency (half-life 100 rounds)"},
    [MR_POLICY_LRU2] = {"lru2", "LRU-K with K=2 (oldest second-to-last use)"},
    [MR_POLICY_ARC] = {"arc", "adaptive replacement cache (recency/frequency lists with ghosts)"},
    [MR_POLICY_GUARD] = {"guard", "LRU among pairs below the mean decayed frequency (popularity guard)"},
    [MR_POLICY_LRU_LAYER] = {"lru-layer", "per-layer partitions of equal size, LRU inside"},
    [MR_POLICY_HAZARD] = {"hazard", "lowest P(reuse within W rounds | idle time) from reuse-distance histograms, W adaptive"},
    [MR_POLICY_HOT] = {"hot", "hazard outside a hot set evicted last: the pairs of highest decayed frequency (half-life "
                              "1000 rounds) filling 60% or 100% of the slots, whichever a shadow cache finds better"},
};

const char *mr_cache_policy_name(int p) { return p >= 0 && p < MR_POLICY_COUNT ? policy_info[p].name : NULL; }
const char *mr_cache_policy_desc(int p) { return p >= 0 && p < MR_POLICY_COUNT ? policy_info[p].desc : NULL; }

int mr_cache_policy_from_name(const char *name) {
    for (int p = 0; p < MR_POLICY_COUNT; p++)
        if (!strcmp(name, policy_info[p].name)) return p;
    mr_set_error("unknown cache policy '%s'", name);
    return -1;
}

enum { ARC_NONE = 0, ARC_T1, ARC_T2, ARC_B1, ARC_B2, ARC_LISTS };

struct mr_cache {
    int policy, n_layers, n_expert, n_keys, n_slots;
    int *slot_key, *slot_pin, *key_slot;
    int *free_slots, n_free;
    int64_t tick, round;
    int cur_layer;
    const uint8_t *soon;
    /* per key */
    int64_t *last_tick, *prev_tick, *last_round;
    double *cnt;   /* lfu: count; lrfu/guard: decayed count as of last_round */
    /* arc */
    int *arc_list, *arc_prev, *arc_next;
    int arc_head[ARC_LISTS], arc_tail[ARC_LISTS], arc_len[ARC_LISTS]; /* head = MRU, tail = LRU */
    double arc_p;
    /* lru-layer */
    int *layer_count;
    /* hazard: suffix counts S[d] = reuses at distance >= d (d = 1..HZ_MAX), per key and per layer */
    float *hz_key;
    double *hz_key_tail, *hz_layer, *hz_layer_tail;
    int hz_w;                   /* window in rounds, from the eviction rate */
    /* hot: bit j of hot[key] = in this round's hot set of share hot_share[j]; hot_j = the share in use;
     * hot_v = scratch for the selection; one shadow directory per share */
    uint8_t *hot;
    double *hot_v;
    int hot_j;
    struct hot_shadow {
        int *slot_key, *key_slot, *stamp; /* stamp[slot] == group: pinned by the layer being accessed */
        int n_used, group, layer;
        int64_t round;
        double hits;
    } sh[HOT_SHARES];
    double round_misses, miss_rate;
};

static int key_layer(const mr_cache *c, int key) { return key / c->n_expert; }

/* ---- ARC lists ---- */
static void arc_unlink(mr_cache *c, int k) {
    int l = c->arc_list[k];
    if (l == ARC_NONE) return;
    int p = c->arc_prev[k], n = c->arc_next[k];
    if (p >= 0) c->arc_next[p] = n; else c->arc_head[l] = n;
    if (n >= 0) c->arc_prev[n] = p; else c->arc_tail[l] = p;
    c->arc_len[l]--;
    c->arc_list[k] = ARC_NONE;
}

static void arc_push_mru(mr_cache *c, int l, int k) {
    arc_unlink(c, k);
    c->arc_list[k] = l;
    c->arc_prev[k] = -1;
    c->arc_next[k] = c->arc_head[l];
    if (c->arc_head[l] >= 0) c->arc_prev[c->arc_head[l]] = k; else c->arc_tail[l] = k;
    c->arc_head[l] = k;
    c->arc_len[l]++;
}

/* least recent unpinned resident key of list l, or -1 */
static int arc_lru_unpinned(const mr_cache *c, int l) {
    for (int k = c->arc_tail[l]; k >= 0; k = c->arc_prev[k])
        if (c->key_slot[k] >= 0 && !c->slot_pin[c->key_slot[k]]) return k;
    return -1;
}

static int arc_victim(mr_cache *c, int key) {
    int from_t1 = c->arc_len[ARC_T1] > 0 &&
                  ((c->arc_list[key] == ARC_B2 && c->arc_len[ARC_T1] == (int)c->arc_p) ||
                   c->arc_len[ARC_T1] > (int)c->arc_p);
    int v = arc_lru_unpinned(c, from_t1 ? ARC_T1 : ARC_T2);
    if (v < 0) v = arc_lru_unpinned(c, from_t1 ? ARC_T2 : ARC_T1);
    return v;
}

/* ghost bookkeeping and adaptation of the target size of T1 on a miss for key */
static void arc_on_miss(mr_cache *c, int key) {
    double C = c->n_slots;
    int b1 = c->arc_len[ARC_B1], b2 = c->arc_len[ARC_B2];
    if (c->arc_list[key] == ARC_B1) {
        c->arc_p += b1 >= b2 ? 1.0 : (double)b2 / b1;
        if (c->arc_p > C) c->arc_p = C;
    } else if (c->arc_list[key] == ARC_B2) {
        c->arc_p -= b2 >= b1 ? 1.0 : (double)b1 / b2;
        if (c->arc_p < 0) c->arc_p = 0;
    }
}

static void arc_after_insert(mr_cache *c, int key, int was_ghost) {
    arc_push_mru(c, was_ghost ? ARC_T2 : ARC_T1, key);
    /* directory limits: |T1| + |B1| <= c, total <= 2c */
    while (c->arc_len[ARC_T1] + c->arc_len[ARC_B1] > c->n_slots && c->arc_len[ARC_B1] > 0)
        arc_unlink(c, c->arc_tail[ARC_B1]);
    while (c->arc_len[ARC_T1] + c->arc_len[ARC_T2] + c->arc_len[ARC_B1] + c->arc_len[ARC_B2] > 2 * c->n_slots) {
        int l = c->arc_len[ARC_B2] > 0 ? ARC_B2 : ARC_B1;
        if (c->arc_len[l] == 0) break;
        arc_unlink(c, c->arc_tail[l]);
    }
}

/* ---- hazard ---- */
/* Counts are halved when they get large: keeps float counts exact enough in long runs (a server) and
 * lets old history fade. Never reached on the 57k-token kjv trace (at most ~8k reuses per pair). */
#define HZ_KEY_CAP 65536.0f
#define HZ_LAYER_CAP 1073741824.0

static void hz_add(float *S, double *tail, int64_t d) {
    int dd = d >= HZ_MAX ? HZ_MAX : (int)d;
    for (int i = 1; i <= dd; i++) S[i] += 1.0f;
    if (d >= HZ_MAX) *tail += (double)(d - HZ_MAX);
    if (S[1] > HZ_KEY_CAP) {
        for (int i = 1; i <= HZ_MAX; i++) S[i] *= 0.5f;
        *tail *= 0.5;
    }
}

static void hz_add_layer(double *S, double *tail, int64_t d) {
    int dd = d >= HZ_MAX ? HZ_MAX : (int)d;
    for (int i = 1; i <= dd; i++) S[i] += 1.0;
    if (d >= HZ_MAX) *tail += (double)(d - HZ_MAX);
    if (S[1] > HZ_LAYER_CAP) {
        for (int i = 1; i <= HZ_MAX; i++) S[i] *= 0.5;
        *tail *= 0.5;
    }
}

/* P(reuse within the next HZ_W opportunities | idle for a-1 of them): returns numerator/denominator */
static void hz_window(double Sa, double Sw, double tailn, double tailx, int a, int W, double *num, double *den) {
    if (a < HZ_MAX) {
        *num = Sa - Sw; /* Sw = S[min(a + W, HZ_MAX)] */
        *den = Sa;
        if (a + W > HZ_MAX && tailn > 0) {
            /* the window reaches into the tail: add the tail's share within it */
            double m = tailx / tailn + 1.0;
            *num += tailn * (1.0 - exp(-(double)(a + W - HZ_MAX) / m));
        }
    } else {
        double m = tailn > 0 ? tailx / tailn + 1.0 : 1.0;
        *den = tailn;
        *num = tailn * (1.0 - exp(-(double)W / m));
    }
}

static double hz_score(const mr_cache *c, int k) {
    int l = key_layer(c, k);
    int64_t opp = l > c->cur_layer ? c->round : c->round + 1; /* next round that can use k */
    int64_t a64 = opp - c->last_round[k];
    int a = a64 >= HZ_MAX ? HZ_MAX : (int)(a64 < 1 ? 1 : a64);
    int W = c->hz_w;
    int aw = a + W > HZ_MAX ? HZ_MAX : a + W;
    const float *S = c->hz_key + (size_t)k * (HZ_MAX + 1);
    const double *G = c->hz_layer + (size_t)l * (HZ_MAX + 1);
    double kn, kd, gn, gd;
    hz_window(S[a], a < HZ_MAX ? S[aw] : 0, S[HZ_MAX], c->hz_key_tail[k], a, W, &kn, &kd);
    hz_window(G[a], a < HZ_MAX ? G[aw] : 0, G[HZ_MAX], c->hz_layer_tail[l], a, W, &gn, &gd);
    double g = gd > 0 ? gn / gd : 0;
    return (kn + HZ_PRIOR * g) / (kd + HZ_PRIOR);
}

/* ---- hot ---- */
static double hot_log(const mr_cache *c, int k) {
    return log2(c->cnt[k] > 0 ? c->cnt[k] : 1e-30) - (double)(c->round - c->last_round[k]) / HOT_HALF_LIFE;
}

/* k-th largest of v[0..n) (k in 1..n), by quickselect (reorders v) */
static double kth_largest(double *v, int n, int k) {
    int lo = 0, hi = n - 1, want = k - 1;
    while (lo < hi) {
        double piv = v[(lo + hi) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > piv) i++;
            while (v[j] < piv) j--;
            if (i <= j) { double t = v[i]; v[i] = v[j]; v[j] = t; i++; j--; }
        }
        if (want <= j) hi = j;
        else if (want >= i) lo = i;
        else break;
    }
    return v[want];
}

/* the hot sets of the coming round: per share, the share x slots used pairs of highest decayed frequency;
 * the share whose shadow had more (decayed) hits rules */
static void hot_select(mr_cache *c) {
    double th[HOT_SHARES];
    for (int j = 0; j < HOT_SHARES; j++) {
        int n = 0, want = (int)(hot_share[j] * c->n_slots);
        for (int k = 0; k < c->n_keys; k++)
            if (c->cnt[k] > 0) c->hot_v[n++] = hot_log(c, k);
        th[j] = want < 1 ? INFINITY : n <= want ? -INFINITY : kth_largest(c->hot_v, n, want);
        c->sh[j].hits *= exp2(-1.0 / HOT_DUEL_HALF_LIFE);
    }
    for (int k = 0; k < c->n_keys; k++) {
        double v = c->cnt[k] > 0 ? hot_log(c, k) : -INFINITY;
        c->hot[k] = 0;
        for (int j = 0; j < HOT_SHARES; j++) c->hot[k] |= (uint8_t)((c->cnt[k] > 0 && v >= th[j]) << j);
    }
    c->hot_j = 0;
    for (int j = 1; j < HOT_SHARES; j++)
        if (c->sh[j].hits > c->sh[c->hot_j].hits) c->hot_j = j;
}

static double hz_score(const mr_cache *c, int k);

/* the access in shadow j (before the real cache records it): a hit, or the key replaces the shadow's
 * victim under share j's hot set; the experts of the layer being accessed stay pinned in it */
static void hot_shadow_access(mr_cache *c, int j, int key) {
    struct hot_shadow *h = &c->sh[j];
    int layer = key_layer(c, key);
    if (layer != h->layer || c->round != h->round) { h->group++; h->layer = layer; h->round = c->round; }
    int s = h->key_slot[key];
    if (s >= 0) { h->hits += 1; h->stamp[s] = h->group; return; }
    if (h->n_used < c->n_slots) s = h->n_used++;
    else {
        double bs = 0;
        int64_t bt = 0;
        s = -1;
        for (int t = 0; t < c->n_slots; t++) {
            if (h->stamp[t] == h->group) continue;
            int k = h->slot_key[t];
            double sc = hz_score(c, k) + ((c->hot[k] >> j) & 1) * 2.0;
            if (s < 0 || sc < bs || (sc == bs && c->last_tick[k] < bt)) { s = t; bs = sc; bt = c->last_tick[k]; }
        }
        if (s < 0) return; /* everything pinned: the real cache fails this access too */
        h->key_slot[h->slot_key[s]] = -1;
    }
    h->slot_key[s] = key;
    h->key_slot[key] = s;
    h->stamp[s] = h->group;
}

/* ---- create / free ---- */
mr_cache *mr_cache_create(int policy, int n_layers, int n_expert, int n_slots) {
    if (policy < 0 || policy >= MR_POLICY_COUNT) { mr_set_error("cache: bad policy %d", policy); return NULL; }
    if (n_layers < 1 || n_expert < 1 || (int64_t)n_layers * n_expert > (1 << 24)) {
        mr_set_error("cache: bad shape %d layers x %d experts", n_layers, n_expert);
        return NULL;
    }
    if (n_slots < 1) { mr_set_error("cache: need at least one slot (got %d)", n_slots); return NULL; }
    int n_keys = n_layers * n_expert;
    if (n_slots > n_keys) n_slots = n_keys;
    mr_cache *c = mr_calloc(1, sizeof *c);
    if (!c) goto oom;
    c->policy = policy; c->n_layers = n_layers; c->n_expert = n_expert; c->n_keys = n_keys; c->n_slots = n_slots;
    c->cur_layer = -1;
    c->hz_w = HZ_W;
    size_t nk = (size_t)n_keys, ns = (size_t)n_slots;
    c->slot_key = mr_malloc(ns * sizeof(int));
    c->slot_pin = mr_calloc(ns, sizeof(int));
    c->free_slots = mr_malloc(ns * sizeof(int));
    c->key_slot = mr_malloc(nk * sizeof(int));
    c->last_tick = mr_calloc(nk, sizeof(int64_t));
    c->prev_tick = mr_calloc(nk, sizeof(int64_t));
    c->last_round = mr_calloc(nk, sizeof(int64_t));
    c->cnt = mr_calloc(nk, sizeof(double));
    if (!c->slot_key || !c->slot_pin || !c->free_slots || !c->key_slot || !c->last_tick || !c->prev_tick ||
        !c->last_round || !c->cnt)
        goto oom;
    for (int s = 0; s < n_slots; s++) { c->slot_key[s] = -1; c->free_slots[s] = n_slots - 1 - s; }
    c->n_free = n_slots;
    for (int k = 0; k < n_keys; k++) { c->key_slot[k] = -1; c->last_round[k] = -1; }
    if (policy == MR_POLICY_ARC) {
        c->arc_list = mr_calloc(nk, sizeof(int));
        c->arc_prev = mr_malloc(nk * sizeof(int));
        c->arc_next = mr_malloc(nk * sizeof(int));
        if (!c->arc_list || !c->arc_prev || !c->arc_next) goto oom;
        for (int l = 0; l < ARC_LISTS; l++) c->arc_head[l] = c->arc_tail[l] = -1;
    }
    if (policy == MR_POLICY_LRU_LAYER) {
        c->layer_count = mr_calloc((size_t)n_layers, sizeof(int));
        if (!c->layer_count) goto oom;
    }
    if (policy == MR_POLICY_HOT) {
        c->hot = mr_calloc(nk, 1);
        c->hot_v = mr_malloc(nk * sizeof(double));
        if (!c->hot || !c->hot_v) goto oom;
        for (int j = 0; j < HOT_SHARES; j++) {
            struct hot_shadow *h = &c->sh[j];
            h->slot_key = mr_malloc(ns * sizeof(int));
            h->key_slot = mr_malloc(nk * sizeof(int));
            h->stamp = mr_malloc(ns * sizeof(int));
            if (!h->slot_key || !h->key_slot || !h->stamp) goto oom;
            for (int k = 0; k < n_keys; k++) h->key_slot[k] = -1;
            for (int t = 0; t < n_slots; t++) h->stamp[t] = -1;
            h->layer = -1;
        }
    }
    if (policy == MR_POLICY_HAZARD || policy == MR_POLICY_HOT) {
        c->hz_key = mr_calloc(nk * (HZ_MAX + 1), sizeof(float));
        c->hz_key_tail = mr_calloc(nk, sizeof(double));
        c->hz_layer = mr_calloc((size_t)n_layers * (HZ_MAX + 1), sizeof(double));
        c->hz_layer_tail = mr_calloc((size_t)n_layers, sizeof(double));
        if (!c->hz_key || !c->hz_key_tail || !c->hz_layer || !c->hz_layer_tail) goto oom;
    }
    return c;
oom:
    mr_cache_free(c);
    mr_set_error("cache: out of memory (%d slots, %d keys)", n_slots, n_layers * n_expert);
    return NULL;
}

void mr_cache_free(mr_cache *c) {
    if (!c) return;
    free(c->slot_key); free(c->slot_pin); free(c->free_slots); free(c->key_slot);
    free(c->last_tick); free(c->prev_tick); free(c->last_round); free(c->cnt);
    free(c->arc_list); free(c->arc_prev); free(c->arc_next);
    free(c->layer_count);
    free(c->hz_key); free(c->hz_key_tail); free(c->hz_layer); free(c->hz_layer_tail);
    free(c->hot); free(c->hot_v);
    for (int j = 0; j < HOT_SHARES; j++) { free(c->sh[j].slot_key); free(c->sh[j].key_slot); free(c->sh[j].stamp); }
    free(c);
}

int mr_cache_n_slots(const mr_cache *c) { return c->n_slots; }
int mr_cache_policy(const mr_cache *c) { return c->policy; }
void mr_cache_new_round(mr_cache *c) {
    if (c->round > 0) {
        c->miss_rate = c->round == 1 ? c->round_misses : 0.9 * c->miss_rate + 0.1 * c->round_misses;
        /* W ~ sqrt(slot lifetime in rounds): lifetime = slots / misses per round */
        double life = c->n_slots / (c->miss_rate > 0.01 ? c->miss_rate : 0.01);
        int w = (int)(sqrt(life) + 0.5);
        c->hz_w = w < 1 ? 1 : w > HZ_WMAX ? HZ_WMAX : w;
    }
    c->round_misses = 0;
    c->round++;
    c->cur_layer = -1;
    if (c->policy == MR_POLICY_HOT) hot_select(c);
}
int mr_cache_find(const mr_cache *c, int key) { return key >= 0 && key < c->n_keys ? c->key_slot[key] : -1; }
int mr_cache_slot_key(const mr_cache *c, int slot) { return c->slot_key[slot]; }
int mr_cache_pinned(const mr_cache *c, int slot) { return c->slot_pin[slot]; }
void mr_cache_set_hint(mr_cache *c, const uint8_t *soon) { c->soon = soon; }
void mr_cache_unpin(mr_cache *c, int slot) { if (c->slot_pin[slot] > 0) c->slot_pin[slot]--; }

static void slot_detach(mr_cache *c, int s) {
    int k = c->slot_key[s];
    if (k < 0) return;
    c->key_slot[k] = -1;
    c->slot_key[s] = -1;
    if (c->layer_count) c->layer_count[key_layer(c, k)]--;
    if (c->policy == MR_POLICY_ARC && (c->arc_list[k] == ARC_T1 || c->arc_list[k] == ARC_T2))
        arc_push_mru(c, c->arc_list[k] == ARC_T1 ? ARC_B1 : ARC_B2, k);
}

void mr_cache_invalidate(mr_cache *c, int s) {
    int k = c->slot_key[s];
    if (k < 0) return;
    slot_detach(c, s);
    if (c->policy == MR_POLICY_ARC) arc_unlink(c, k); /* not a real eviction: no ghost */
    c->free_slots[c->n_free++] = s;
}

/* decayed frequency of key now (lrfu, guard), in log2 units */
static double lrfu_log(const mr_cache *c, int k) {
    return log2(c->cnt[k] > 0 ? c->cnt[k] : 1e-30) - (double)(c->round - c->last_round[k]) / LRFU_HALF_LIFE;
}

static double score(const mr_cache *c, int k) {
    switch (c->policy) {
    case MR_POLICY_LFU: return c->cnt[k];
    case MR_POLICY_LRFU: return lrfu_log(c, k);
    case MR_POLICY_LRU2: return (double)c->prev_tick[k];
    case MR_POLICY_HAZARD: return hz_score(c, k);
    case MR_POLICY_HOT: return hz_score(c, k) + ((c->hot[k] >> c->hot_j) & 1) * 2.0; /* hazard scores: [0, 1] */
    default: return (double)c->last_tick[k];
    }
}

/* lowest score among unpinned resident slots (ties: least recent); layer >= 0 restricts to that layer */
static int pick_min(const mr_cache *c, int layer, int over_quota_only) {
    int best = -1;
    double bs = 0;
    int64_t bt = 0;
    for (int s = 0; s < c->n_slots; s++) {
        int k = c->slot_key[s];
        if (k < 0 || c->slot_pin[s]) continue;
        if (layer >= 0 && key_layer(c, k) != layer) continue;
        if (over_quota_only) {
            int l = key_layer(c, k);
            int quota = c->n_slots / c->n_layers + (l < c->n_slots % c->n_layers);
            if (c->layer_count[l] <= quota) continue;
        }
        double sc = score(c, k) + (c->soon && c->soon[k] ? 1e30 : 0);
        if (best < 0 || sc < bs || (sc == bs && c->last_tick[k] < bt)) { best = s; bs = sc; bt = c->last_tick[k]; }
    }
    return best;
}

static int pick_guard(const mr_cache *c) {
    double sum = 0;
    int n = 0;
    for (int s = 0; s < c->n_slots; s++) {
        int k = c->slot_key[s];
        if (k < 0 || c->slot_pin[s]) continue;
        sum += exp2(lrfu_log(c, k));
        n++;
    }
    if (!n) return -1;
    double mean = sum / n;
    int best = -1;
    int64_t bt = 0;
    for (int s = 0; s < c->n_slots; s++) {
        int k = c->slot_key[s];
        if (k < 0 || c->slot_pin[s] || exp2(lrfu_log(c, k)) > mean) continue;
        if (best < 0 || c->last_tick[k] < bt) { best = s; bt = c->last_tick[k]; }
    }
    return best >= 0 ? best : pick_min(c, -1, 0);
}

static int pick_victim(mr_cache *c, int key) {
    switch (c->policy) {
    case MR_POLICY_ARC: {
        int k = arc_victim(c, key);
        return k >= 0 ? c->key_slot[k] : -1;
    }
    case MR_POLICY_GUARD: return pick_guard(c);
    case MR_POLICY_LRU_LAYER: {
        int l = key_layer(c, key);
        int quota = c->n_slots / c->n_layers + (l < c->n_slots % c->n_layers);
        int s = -1;
        if (c->layer_count[l] >= quota) s = pick_min(c, l, 0);
        if (s < 0) s = pick_min(c, -1, 1);
        if (s < 0) s = pick_min(c, -1, 0);
        return s;
    }
    default: return pick_min(c, -1, 0);
    }
}

static void record_use(mr_cache *c, int k) {
    c->tick++;
    int64_t r = c->round;
    switch (c->policy) {
    case MR_POLICY_LFU: c->cnt[k] += 1; break;
    case MR_POLICY_LRFU:
    case MR_POLICY_GUARD:
        c->cnt[k] = c->cnt[k] * exp2(-(double)(r - c->last_round[k]) / LRFU_HALF_LIFE) + 1.0;
        break;
    case MR_POLICY_HOT:
        c->cnt[k] = c->cnt[k] * exp2(-(double)(r - c->last_round[k]) / HOT_HALF_LIFE) + 1.0;
        __attribute__((fallthrough)); /* the hazard histograms rank pairs outside the hot set */
    case MR_POLICY_HAZARD:
        if (c->last_round[k] >= 0 && r > c->last_round[k]) {
            int64_t d = r - c->last_round[k];
            int l = key_layer(c, k);
            hz_add(c->hz_key + (size_t)k * (HZ_MAX + 1), &c->hz_key_tail[k], d);
            hz_add_layer(c->hz_layer + (size_t)l * (HZ_MAX + 1), &c->hz_layer_tail[l], d);
        }
        break;
    default: break;
    }
    if (c->last_round[k] != r) c->prev_tick[k] = c->last_tick[k];
    c->last_tick[k] = c->tick;
    c->last_round[k] = r;
}

/* access (use = 1) or reserve (use = 0: a slot for the key, nothing recorded) */
static int cache_take(mr_cache *c, int key, int use, int *hit, int *evicted) {
    if (key < 0 || key >= c->n_keys) { mr_set_error("cache: key %d out of range", key); return -1; }
    if (use) c->cur_layer = key_layer(c, key);
    *evicted = -1;
    if (use && c->policy == MR_POLICY_HOT)
        for (int j = 0; j < HOT_SHARES; j++) hot_shadow_access(c, j, key);
    int s = c->key_slot[key];
    if (s >= 0) {
        *hit = 1;
        if (use && c->policy == MR_POLICY_ARC) arc_push_mru(c, ARC_T2, key);
        if (use) record_use(c, key);
        c->slot_pin[s]++;
        return s;
    }
    *hit = 0;
    c->round_misses += 1;
    if (c->n_free > 0) {
        s = c->free_slots[--c->n_free];
        if (c->policy == MR_POLICY_ARC) arc_on_miss(c, key);
    } else {
        if (c->policy == MR_POLICY_ARC) arc_on_miss(c, key);
        s = pick_victim(c, key);
        if (s < 0) {
            mr_set_error("cache: all %d slots are pinned (more experts needed at once than the budget holds)",
                         c->n_slots);
            return -1;
        }
        *evicted = c->slot_key[s];
        slot_detach(c, s);
    }
    int was_ghost = c->policy == MR_POLICY_ARC && (c->arc_list[key] == ARC_B1 || c->arc_list[key] == ARC_B2);
    c->slot_key[s] = key;
    c->key_slot[key] = s;
    if (c->layer_count) c->layer_count[key_layer(c, key)]++;
    if (c->policy == MR_POLICY_ARC) arc_after_insert(c, key, was_ghost);
    if (use) record_use(c, key);
    c->slot_pin[s]++;
    return s;
}

int mr_cache_access(mr_cache *c, int key, int *hit, int *evicted) { return cache_take(c, key, 1, hit, evicted); }
int mr_cache_reserve(mr_cache *c, int key, int *hit, int *evicted) { return cache_take(c, key, 0, hit, evicted); }

/* ---- Belady ---- */
/* positions are int32 (n < 2^31): 8-byte heap entries keep the memory at ~16 bytes per access */
typedef struct { int32_t next, key; } heap_ent;

static void heap_push(heap_ent *h, int64_t *n, heap_ent e) {
    int64_t i = (*n)++;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (h[p].next >= e.next) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static heap_ent heap_pop(heap_ent *h, int64_t *n) {
    heap_ent top = h[0], e = h[--(*n)];
    int64_t i = 0;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, big = l;
        if (l >= *n) break;
        if (r < *n && h[r].next > h[l].next) big = r;
        if (h[big].next <= e.next) break;
        h[i] = h[big];
        i = big;
    }
    h[i] = e;
    return top;
}

int64_t mr_cache_belady_hits(const int32_t *keys, int64_t n, int n_keys, int n_slots) {
    if (n <= 0) return 0;
    if (n >= INT32_MAX) { mr_set_error("belady: %lld accesses is too many", (long long)n); return -1; }
    int32_t *next = mr_malloc((size_t)n * sizeof(int32_t));
    int32_t *nu = mr_malloc((size_t)n_keys * sizeof(int32_t));
    char *res = mr_calloc((size_t)n_keys, 1);
    heap_ent *h = mr_malloc((size_t)(n + 1) * sizeof(heap_ent));
    int64_t hits = -1;
    if (!next || !nu || !res || !h) { mr_set_error("belady: out of memory for %lld accesses", (long long)n); goto done; }
    const int32_t never = INT32_MAX;
    for (int k = 0; k < n_keys; k++) nu[k] = never;
    for (int64_t i = n - 1; i >= 0; i--) { next[i] = nu[keys[i]]; nu[keys[i]] = (int32_t)i; }
    /* from here nu[k] = the next use of k after the current position */
    int64_t hn = 0;
    int used = 0;
    hits = 0;
    for (int64_t i = 0; i < n; i++) {
        int k = keys[i];
        if (res[k]) hits++;
        else {
            if (used >= n_slots) {
                for (;;) { /* lazy deletion: skip entries that no longer describe a resident key */
                    heap_ent e = heap_pop(h, &hn);
                    if (res[e.key] && nu[e.key] == e.next) { res[e.key] = 0; used--; break; }
                }
            }
            res[k] = 1;
            used++;
        }
        nu[k] = next[i];
        heap_push(h, &hn, (heap_ent){next[i], k});
    }
done:
    free(next); free(nu); free(res); free(h);
    return hits;
}

static int cmp_desc_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int64_t mr_cache_static_hits(const int32_t *keys, int64_t n, int n_keys, int n_slots) {
    if (n_keys < 1 || n_slots < 0) { mr_set_error("static optimum: bad sizes"); return -1; }
    uint32_t *cnt = mr_calloc((size_t)n_keys, sizeof *cnt);
    if (!cnt) { mr_set_error("static optimum: out of memory"); return -1; }
    for (int64_t i = 0; i < n; i++) {
        if (keys[i] < 0 || keys[i] >= n_keys) { free(cnt); mr_set_error("static optimum: key %d out of range", keys[i]); return -1; }
        cnt[keys[i]]++;
    }
    qsort(cnt, (size_t)n_keys, sizeof *cnt, cmp_desc_u32);
    int64_t h = 0;
    for (int i = 0; i < n_slots && i < n_keys && cnt[i]; i++) h += cnt[i] - 1; /* its first use reads it */
    free(cnt);
    return h;
}
