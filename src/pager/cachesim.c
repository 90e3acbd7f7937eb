/* Routing-trace replay through the expert-cache policies (moerun cache-sim).
 *
 * Trace format (shared/README.md, routing/): char[4] "KJVR", int32 n_tokens, n_layer, top_k, n_expert,
 * int32 token_id[n], int32 pos[n], uint8 expert[n][n_layer][top_k], float16 weight[n][n_layer][top_k].
 * Accesses are replayed token -> layer -> rank through one global cache of (layer, expert) pairs; a
 * token is one round, a layer's top-k experts are pinned together (as the pager pins a batch). */
#include "moerun_tools.h"
#include "pager/policy.h"
#include "base/base.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mr_routing_trace {
    int n_tokens, n_layer, top_k, n_expert;
    int32_t *token, *pos;
    uint8_t *expert; /* [n][n_layer][top_k] */
};

void mr_routing_trace_free(mr_routing_trace *t) {
    if (!t) return;
    free(t->token); free(t->pos); free(t->expert);
    free(t);
}

static int rd(FILE *f, void *buf, size_t n) { return fread(buf, 1, n, f) == n ? 0 : -1; }

mr_routing_trace *mr_routing_trace_load(const char *path) {
    mr_routing_trace *t = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) { mr_set_error("%s: cannot open: %s", path, strerror(errno)); return NULL; }
    char magic[4];
    int32_t h[4];
    if (rd(f, magic, 4) || rd(f, h, sizeof h)) { mr_set_error("%s: truncated header", path); goto fail; }
    if (memcmp(magic, "KJVR", 4)) { mr_set_error("%s: not a routing trace (magic is not KJVR)", path); goto fail; }
    /* bounds: experts are uint8, so at most 256; layers and top-k kept to sane sizes */
    if (h[0] < 1 || h[0] > (1 << 26)) { mr_set_error("%s: bad n_tokens %d", path, h[0]); goto fail; }
    if (h[1] < 1 || h[1] > 4096) { mr_set_error("%s: bad n_layer %d", path, h[1]); goto fail; }
    if (h[3] < 1 || h[3] > 256) { mr_set_error("%s: bad n_expert %d (1..256)", path, h[3]); goto fail; }
    if (h[2] < 1 || h[2] > h[3]) { mr_set_error("%s: bad top_k %d (1..n_expert %d)", path, h[2], h[3]); goto fail; }
    uint64_t n = (uint64_t)h[0], nlk = n * (uint64_t)h[1] * (uint64_t)h[2];
    if (nlk > (1ull << 31)) { mr_set_error("%s: trace too large (%llu accesses)", path, (unsigned long long)nlk); goto fail; }
    uint64_t want = 20 + n * 8 + nlk * 3;
    if (fseeko(f, 0, SEEK_END) || (uint64_t)ftello(f) != want) {
        mr_set_error("%s: file size %lld does not match the header (expected %llu bytes)", path,
                     (long long)ftello(f), (unsigned long long)want);
        goto fail;
    }
    fseeko(f, 20, SEEK_SET);
    t = mr_calloc(1, sizeof *t);
    if (!t) goto oom;
    t->n_tokens = h[0]; t->n_layer = h[1]; t->top_k = h[2]; t->n_expert = h[3];
    t->token = mr_malloc(n * 4);
    t->pos = mr_malloc(n * 4);
    t->expert = mr_malloc(nlk);
    if (!t->token || !t->pos || !t->expert) goto oom;
    if (rd(f, t->token, n * 4) || rd(f, t->pos, n * 4) || rd(f, t->expert, nlk)) {
        mr_set_error("%s: read failed", path);
        goto fail;
    }
    for (uint64_t i = 0; i < n; i++)
        if (t->pos[i] < 0) { mr_set_error("%s: token %llu has negative position %d", path, (unsigned long long)i, t->pos[i]); goto fail; }
    for (uint64_t g = 0; g < n * (uint64_t)h[1]; g++) {
        const uint8_t *e = t->expert + g * (uint64_t)h[2];
        for (int r = 0; r < h[2]; r++) {
            if (e[r] >= h[3]) {
                mr_set_error("%s: token %llu layer %d: expert %d >= n_expert %d", path,
                             (unsigned long long)(g / (uint64_t)h[1]), (int)(g % (uint64_t)h[1]), e[r], h[3]);
                goto fail;
            }
            for (int q = 0; q < r; q++)
                if (e[q] == e[r]) {
                    mr_set_error("%s: token %llu layer %d: expert %d chosen twice", path,
                                 (unsigned long long)(g / (uint64_t)h[1]), (int)(g % (uint64_t)h[1]), e[r]);
                    goto fail;
                }
        }
    }
    fclose(f);
    return t;
oom:
    mr_set_error("%s: out of memory", path);
fail:
    fclose(f);
    mr_routing_trace_free(t);
    return NULL;
}

/* splitmix64: the synthesized trace's own generator (a fixed seed gives the same trace everywhere) */
static uint64_t sm64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

mr_routing_trace *mr_routing_trace_synth(int n_tokens, int n_layer, int top_k, int n_expert, double zipf,
                                         uint64_t seed) {
    if (n_tokens < 1 || n_tokens > (1 << 24) || n_layer < 1 || n_layer > 4096 || n_expert < 1 || n_expert > 256 ||
        top_k < 1 || top_k > n_expert || !(zipf >= 0 && zipf <= 4) ||
        (uint64_t)n_tokens * (uint64_t)n_layer * (uint64_t)top_k > (1ull << 31)) {
        mr_set_error("synthesized trace: bad shape %d tokens, %d layers, top-%d of %d, zipf %g (tokens <= 2^24, "
                     "experts <= 256, zipf 0..4)", n_tokens, n_layer, top_k, n_expert, zipf);
        return NULL;
    }
    size_t n = (size_t)n_tokens, nlk = n * (size_t)n_layer * (size_t)top_k;
    mr_routing_trace *t = mr_calloc(1, sizeof *t);
    double *cdf = mr_malloc(sizeof(double) * (size_t)n_layer * (size_t)n_expert);
    if (!t || !cdf) goto oom;
    t->n_tokens = n_tokens; t->n_layer = n_layer; t->top_k = top_k; t->n_expert = n_expert;
    t->token = mr_calloc(n, 4);
    t->pos = mr_malloc(n * 4);
    t->expert = mr_malloc(nlk);
    if (!t->token || !t->pos || !t->expert) goto oom;
    uint64_t x = seed;
    /* per layer: expert perm[r] has popularity (r + 1)^-zipf (a random permutation of the ranks) */
    for (int l = 0; l < n_layer; l++) {
        int perm[256];
        for (int e = 0; e < n_expert; e++) perm[e] = e;
        for (int e = n_expert - 1; e > 0; e--) {
            int j = (int)(sm64(&x) % (uint64_t)(e + 1)), tmp = perm[e];
            perm[e] = perm[j]; perm[j] = tmp;
        }
        double w[256], acc = 0;
        for (int r = 0; r < n_expert; r++) w[perm[r]] = pow(r + 1.0, -zipf);
        for (int e = 0; e < n_expert; e++) cdf[(size_t)l * n_expert + e] = acc += w[e];
    }
    for (size_t i = 0; i < n; i++) {
        t->pos[i] = (int32_t)(i % 4096);
        for (int l = 0; l < n_layer; l++) {
            const double *c = cdf + (size_t)l * n_expert;
            uint8_t *ex = t->expert + (i * (size_t)n_layer + (size_t)l) * (size_t)top_k;
            for (int r = 0; r < top_k;) { /* top-k distinct: draw by popularity, redraw repeats */
                double u = (double)(sm64(&x) >> 11) / 9007199254740992.0 * c[n_expert - 1];
                int lo = 0, hi = n_expert - 1;
                while (lo < hi) {
                    int mid = (lo + hi) / 2;
                    if (c[mid] > u) hi = mid; else lo = mid + 1;
                }
                int dup = 0;
                for (int q = 0; q < r; q++) dup |= ex[q] == lo;
                if (!dup) ex[r++] = (uint8_t)lo;
            }
        }
    }
    free(cdf);
    return t;
oom:
    free(cdf);
    mr_routing_trace_free(t);
    mr_set_error("synthesized trace: out of memory");
    return NULL;
}

void mr_routing_trace_shape(const mr_routing_trace *t, int *n_tokens, int *n_layer, int *top_k, int *n_expert) {
    if (n_tokens) *n_tokens = t->n_tokens;
    if (n_layer) *n_layer = t->n_layer;
    if (top_k) *top_k = t->top_k;
    if (n_expert) *n_expert = t->n_expert;
}

/* public list: the policies, then the two bounds that use the future */
enum { SIM_BELADY = MR_POLICY_COUNT, SIM_STATIC, SIM_ORACLE1, SIM_COUNT };

int mr_cache_sim_n_policies(void) { return SIM_COUNT; }

const char *mr_cache_sim_policy(int i, const char **desc) {
    const char *name = NULL, *d = NULL;
    if (i >= 0 && i < MR_POLICY_COUNT) { name = mr_cache_policy_name(i); d = mr_cache_policy_desc(i); }
    else if (i == SIM_BELADY) { name = "belady"; d = "offline optimum: evict the pair used farthest in the future"; }
    else if (i == SIM_STATIC) {
        name = "static";
        d = "bound, uses the future: the best fixed set of slots for the whole trace (each read at its first use)";
    } else if (i == SIM_ORACLE1) {
        name = "oracle1";
        d = "bound, uses look-ahead: hazard that also knows the next token's routing";
    }
    if (desc) *desc = d;
    return name;
}

const char *mr_cache_default_policy(void) { return mr_cache_policy_name(MR_POLICY_DEFAULT); }

static int64_t trace_key(const mr_routing_trace *t, int64_t access) {
    int64_t g = access / t->top_k; /* group = token * n_layer + layer */
    int layer = (int)(g % t->n_layer);
    return (int64_t)layer * t->n_expert + t->expert[access];
}

int mr_cache_sim(const mr_routing_trace *t, const char *policy, int n_slots, mr_cache_sim_result *out) {
    int id = -1;
    for (int i = 0; i < SIM_COUNT; i++)
        if (!strcmp(policy, mr_cache_sim_policy(i, NULL))) id = i;
    if (id < 0) { mr_set_error("unknown cache policy '%s'", policy); return -1; }
    int n_keys = t->n_layer * t->n_expert;
    if (n_slots < t->top_k || n_slots > n_keys) {
        mr_set_error("cache-sim: %d slots out of range (top_k %d .. %d pairs)", n_slots, t->top_k, n_keys);
        return -1;
    }
    int64_t n = (int64_t)t->n_tokens * t->n_layer * t->top_k;
    memset(out, 0, sizeof *out);
    out->accesses = (uint64_t)n;
    if (id == SIM_BELADY || id == SIM_STATIC) {
        int32_t *keys = mr_malloc((size_t)n * sizeof(int32_t));
        if (!keys) { mr_set_error("cache-sim: out of memory"); return -1; }
        for (int64_t i = 0; i < n; i++) keys[i] = (int32_t)trace_key(t, i);
        int64_t h = id == SIM_BELADY ? mr_cache_belady_hits(keys, n, n_keys, n_slots)
                                     : mr_cache_static_hits(keys, n, n_keys, n_slots);
        free(keys);
        if (h < 0) return -1;
        out->hits = (uint64_t)h;
        return 0;
    }
    mr_cache *c = mr_cache_create(id == SIM_ORACLE1 ? MR_POLICY_HAZARD : id, t->n_layer, t->n_expert, n_slots);
    if (!c) return -1;
    uint8_t *soon = NULL;
    int *pinned = mr_malloc((size_t)t->top_k * sizeof(int));
    if (id == SIM_ORACLE1) soon = mr_calloc((size_t)n_keys, 1);
    if (!pinned || (id == SIM_ORACLE1 && !soon)) { mr_set_error("cache-sim: out of memory"); goto fail; }
    if (soon) mr_cache_set_hint(c, soon);
    int64_t n_groups = (int64_t)t->n_tokens * t->n_layer, K = t->top_k;
    /* oracle1: soon = keys of the n_layer groups after the current one (the next token's worth) */
    if (soon)
        for (int64_t g = 1; g <= t->n_layer && g < n_groups; g++)
            for (int r = 0; r < K; r++) soon[trace_key(t, g * K + r)]++;
    for (int64_t g = 0; g < n_groups; g++) {
        if (g % t->n_layer == 0) mr_cache_new_round(c);
        for (int r = 0; r < K; r++) {
            int hit, ev;
            int s = mr_cache_access(c, (int)trace_key(t, g * K + r), &hit, &ev);
            if (s < 0) goto fail;
            pinned[r] = s;
            out->hits += (uint64_t)hit;
        }
        for (int r = 0; r < K; r++) mr_cache_unpin(c, pinned[r]);
        if (soon) {
            int64_t ng = g + 1, add = g + 1 + t->n_layer;
            for (int r = 0; r < K && ng < n_groups; r++) soon[trace_key(t, ng * K + r)]--;
            for (int r = 0; r < K && add < n_groups; r++) soon[trace_key(t, add * K + r)]++;
        }
    }
    free(soon); free(pinned);
    mr_cache_free(c);
    return 0;
fail:
    free(soon); free(pinned);
    mr_cache_free(c);
    return -1;
}
