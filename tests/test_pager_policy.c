/* Expert-cache policies: the replay reproduces the published LRU and Belady hit rates of the shared
 * kjv-moe routing trace, the default policy beats LRU, Belady is exact, pins hold, bad traces fail. */
#include "test.h"
#include "moerun_tools.h"
#include "pager/policy.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

static const int sizes[3] = {32, 64, 96}; /* 25 / 50 / 75 % of the 128 (layer, expert) pairs */

static double sim(mr_routing_trace *t, const char *policy, int slots) {
    mr_cache_sim_result r;
    if (mr_cache_sim(t, policy, slots, &r)) return -1;
    return 100.0 * (double)r.hits / (double)r.accesses;
}

static void test_shared_trace(void) {
    mr_routing_trace *t = mr_routing_trace_load(t_shared("golden/routing/kjv-moe.trace.bin"));
    CHECK(t, "%s", mr_last_error());
    if (!t) return;
    int n, l, k, e;
    mr_routing_trace_shape(t, &n, &l, &k, &e);
    CHECK(n == 57344 && l == 4 && k == 4 && e == 32, "shape %d %d %d %d", n, l, k, e);
    /* shared/README.md: LRU 35.2 / 64.3 / 87.7 %, Belady 65.4 / 86.0 / 96.0 % (rounded to 0.1) */
    const double lru_ref[3] = {35.2, 64.3, 87.7}, bel_ref[3] = {65.4, 86.0, 96.0};
    for (int i = 0; i < 3; i++) {
        double lru = sim(t, "lru", sizes[i]), bel = sim(t, "belady", sizes[i]);
        double def = sim(t, mr_cache_default_policy(), sizes[i]);
        CHECK(fabs(lru - lru_ref[i]) <= 0.05, "LRU at %d slots: %.3f%%, want %.1f%%", sizes[i], lru, lru_ref[i]);
        CHECK(fabs(bel - bel_ref[i]) <= 0.05, "Belady at %d slots: %.3f%%, want %.1f%%", sizes[i], bel, bel_ref[i]);
        CHECK(def > lru + 1.0, "default policy %s at %d slots: %.2f%% does not beat LRU %.2f%%",
              mr_cache_default_policy(), sizes[i], def, lru);
        CHECK(def < bel, "default policy above the optimum?! %.2f vs %.2f", def, bel);
        printf("# %d slots: lru %.2f  %s %.2f  belady %.2f  (gap closed %.0f%%)\n", sizes[i], lru,
               mr_cache_default_policy(), def, bel, 100 * (def - lru) / (bel - lru));
    }
    mr_cache_sim_result r;
    CHECK(mr_cache_sim(t, "nope", 32, &r) == -1, "unknown policy accepted");
    CHECK(mr_cache_sim(t, "lru", 2, &r) == -1, "fewer slots than top-k accepted");
    mr_routing_trace_free(t);
}

/* write a trace file: hdr = n, layers, k, experts; experts[] given; mutate lets a case corrupt it */
static const char *write_trace(const char *name, const char *magic, const int32_t hdr[4], const uint8_t *ex,
                               long n_ex, long extra_bytes) {
    static char path[256];
    snprintf(path, sizeof path, "/tmp/mr_test_trace_%d_%s.bin", (int)getpid(), name);
    FILE *f = fopen(path, "wb");
    fwrite(magic, 1, 4, f);
    fwrite(hdr, 4, 4, f);
    int32_t n = hdr[0] > 0 && hdr[0] < 1000 ? hdr[0] : 0;
    for (int i = 0; i < 2 * n; i++) { int32_t z = 0; fwrite(&z, 4, 1, f); }
    fwrite(ex, 1, (size_t)n_ex, f);
    for (long i = 0; i < n_ex; i++) { uint16_t w = 0x3c00; fwrite(&w, 2, 1, f); }
    for (long i = 0; i < extra_bytes; i++) fputc(0, f);
    fclose(f);
    return path;
}

static void expect_reject(const char *what, const char *path, const char *pattern) {
    mr_routing_trace *t = mr_routing_trace_load(path);
    CHECK(!t, "%s: accepted", what);
    if (!t) CHECK(strstr(mr_last_error(), pattern), "%s: message '%s' lacks '%s'", what, mr_last_error(), pattern);
    mr_routing_trace_free(t);
    remove(path);
}

static void test_malformed_traces(void) {
    uint8_t ex[2 * 2 * 2] = {0, 1, 2, 3, 1, 0, 3, 2}; /* 2 tokens, 2 layers, top-2 of 4 */
    int32_t ok_hdr[4] = {2, 2, 2, 4};
    const char *p = write_trace("ok", "KJVR", ok_hdr, ex, 8, 0);
    mr_routing_trace *t = mr_routing_trace_load(p);
    CHECK(t, "valid small trace rejected: %s", mr_last_error());
    if (t) {
        mr_cache_sim_result r;
        CHECK(mr_cache_sim(t, "lru", 2, &r) == 0 && r.accesses == 8 && r.hits == 0, "lru on tiny trace");
        /* keys 0 1 6 7 | 1 0 7 6: the second token hits all four once the cache holds them */
        CHECK(mr_cache_sim(t, "belady", 4, &r) == 0 && r.hits == 4, "belady 4 slots");
        CHECK(mr_cache_sim(t, "belady", 2, &r) == 0 && r.hits == 2, "belady 2 slots: %llu", (unsigned long long)r.hits);
        mr_routing_trace_free(t);
    }
    remove(p);
    expect_reject("bad magic", write_trace("magic", "GGUF", ok_hdr, ex, 8, 0), "magic");
    expect_reject("trailing bytes", write_trace("trail", "KJVR", ok_hdr, ex, 8, 3), "size");
    expect_reject("truncated", write_trace("trunc", "KJVR", ok_hdr, ex, 7, 0), "size");
    int32_t h1[4] = {0, 2, 2, 4};
    expect_reject("zero tokens", write_trace("n0", "KJVR", h1, ex, 0, 0), "n_tokens");
    int32_t h2[4] = {2, 2, 2, 300};
    expect_reject("n_expert > 256", write_trace("ne", "KJVR", h2, ex, 8, 0), "n_expert");
    int32_t h3[4] = {2, 2, 5, 4};
    expect_reject("top_k > n_expert", write_trace("k", "KJVR", h3, ex, 8, 0), "top_k");
    int32_t h4[4] = {2, -1, 2, 4};
    expect_reject("negative layers", write_trace("nl", "KJVR", h4, ex, 8, 0), "n_layer");
    int32_t h5[4] = {0x7fffffff, 4096, 256, 256};
    expect_reject("huge header", write_trace("huge", "KJVR", h5, ex, 8, 0), "n_tokens");
    uint8_t bad[8] = {0, 1, 2, 4, 1, 0, 3, 2};
    expect_reject("expert out of range", write_trace("range", "KJVR", ok_hdr, bad, 8, 0), "expert 4");
    uint8_t dup[8] = {0, 1, 2, 2, 1, 0, 3, 2};
    expect_reject("duplicate expert", write_trace("dup", "KJVR", ok_hdr, dup, 8, 0), "twice");
    char empty[256];
    snprintf(empty, sizeof empty, "/tmp/mr_test_trace_%d_empty.bin", (int)getpid());
    fclose(fopen(empty, "wb"));
    expect_reject("empty file", empty, "truncated");
    expect_reject("missing file", "/nonexistent/trace.bin", "cannot open");
}

/* Belady by brute force: O(n * slots) scan for the farthest next use */
static int64_t belady_naive(const int32_t *k, int64_t n, int n_keys, int slots) {
    char res[64] = {0};
    int used = 0;
    int64_t hits = 0;
    (void)n_keys;
    for (int64_t i = 0; i < n; i++) {
        if (res[k[i]]) { hits++; continue; }
        if (used == slots) {
            int victim = -1;
            int64_t far = -1;
            for (int q = 0; q < 64; q++) {
                if (!res[q]) continue;
                int64_t j = i + 1;
                while (j < n && k[j] != q) j++;
                if (j > far) { far = j; victim = q; }
            }
            res[victim] = 0;
            used--;
        }
        res[k[i]] = 1;
        used++;
    }
    return hits;
}

static void test_belady_exact(void) {
    uint32_t s = 12345;
    int32_t keys[3000];
    for (int trial = 0; trial < 20; trial++) {
        int n_keys = 8 + trial * 2, slots = 2 + trial % 7;
        for (int i = 0; i < 3000; i++) {
            s = s * 1103515245u + 12345u;
            /* skewed: small keys more often */
            int a = (int)((s >> 8) % (uint32_t)n_keys), b = (int)((s >> 20) % (uint32_t)n_keys);
            keys[i] = a < b ? a : b;
        }
        int64_t h = mr_cache_belady_hits(keys, 3000, n_keys, slots), want = belady_naive(keys, 3000, n_keys, slots);
        CHECK(h == want, "trial %d: belady %lld, brute force %lld", trial, (long long)h, (long long)want);
        /* and no online policy beats it on the same sequence (one key per round, nothing pinned) */
        for (int p = 0; p < MR_POLICY_COUNT; p++) {
            mr_cache *c = mr_cache_create(p, 1, n_keys, slots);
            int64_t hits = 0;
            for (int i = 0; i < 3000; i++) {
                int hit, ev;
                mr_cache_new_round(c);
                int sl = mr_cache_access(c, keys[i], &hit, &ev);
                hits += hit;
                mr_cache_unpin(c, sl);
            }
            CHECK(hits <= h, "policy %s beats Belady: %lld > %lld", mr_cache_policy_name(p), (long long)hits, (long long)h);
            mr_cache_free(c);
        }
    }
}

static void test_pins_and_invalidate(void) {
    for (int p = 0; p < MR_POLICY_COUNT; p++) {
        mr_cache *c = mr_cache_create(p, 2, 8, 4);
        CHECK(c, "create %s", mr_cache_policy_name(p));
        if (!c) continue;
        int hit, ev, s[4];
        mr_cache_new_round(c);
        for (int i = 0; i < 4; i++) s[i] = mr_cache_access(c, i, &hit, &ev);
        CHECK(s[0] != s[1] && s[2] != s[3] && s[0] >= 0, "%s: distinct slots", mr_cache_policy_name(p));
        CHECK(mr_cache_access(c, 9, &hit, &ev) == -1, "%s: evicted a pinned slot", mr_cache_policy_name(p));
        mr_cache_unpin(c, s[2]);
        int s9 = mr_cache_access(c, 9, &hit, &ev);
        CHECK(s9 == s[2] && ev == 2 && !hit, "%s: only unpinned slot must be the victim (got slot %d ev %d)",
              mr_cache_policy_name(p), s9, ev);
        CHECK(mr_cache_find(c, 2) == -1 && mr_cache_find(c, 9) == s9, "%s: directory", mr_cache_policy_name(p));
        mr_cache_invalidate(c, s9);
        CHECK(mr_cache_find(c, 9) == -1 && mr_cache_slot_key(c, s9) == -1, "%s: invalidate", mr_cache_policy_name(p));
        mr_cache_unpin(c, s9);
        int again = mr_cache_access(c, 9, &hit, &ev);
        CHECK(again == s9 && !hit && ev == -1, "%s: invalidated slot is reused as free", mr_cache_policy_name(p));
        mr_cache_free(c);
    }
    CHECK(mr_cache_policy_from_name("hazard") == MR_POLICY_HAZARD && mr_cache_policy_from_name("hot") == MR_POLICY_HOT &&
              mr_cache_policy_from_name("x") == -1,
          "names");
}

/* ARC keeps a hot set (keys used twice per round) through scans of new keys that flush LRU */
static void test_arc_scan_resistance(void) {
    int64_t hot_hits[2] = {0, 0};
    int pol[2] = {MR_POLICY_LRU, MR_POLICY_ARC};
    for (int q = 0; q < 2; q++) {
        mr_cache *c = mr_cache_create(pol[q], 1, 4096, 8);
        int next_cold = 100;
        for (int r = 0; r < 200; r++) {
            mr_cache_new_round(c);
            int hit, ev;
            for (int h = 0; h < 8; h++) {
                int s = mr_cache_access(c, h % 4, &hit, &ev);
                if (h < 4) hot_hits[q] += hit; /* the second use is always a hit */
                mr_cache_unpin(c, s);
            }
            for (int i = 0; i < 8; i++) {
                int s = mr_cache_access(c, next_cold++ % 4000 + 50, &hit, &ev);
                mr_cache_unpin(c, s);
            }
        }
        mr_cache_free(c);
    }
    CHECK(hot_hits[0] == 0, "LRU should lose the hot set to each scan (%lld hits)", (long long)hot_hits[0]);
    CHECK(hot_hits[1] > 600, "ARC should keep the hot set (%lld of 800)", (long long)hot_hits[1]);
}

/* the static optimum equals the best of all fixed sets of the slot count (brute force over subsets) */
static void test_static_exact(void) {
    uint32_t r = 7;
    for (int trial = 0; trial < 200; trial++) {
        int n_keys = 2 + trial % 7, n = 1 + trial % 40, slots = trial % (n_keys + 1);
        int32_t keys[40];
        for (int i = 0; i < n; i++) { r = r * 1664525u + 1013904223u; keys[i] = (int32_t)((r >> 8) % (uint32_t)(n_keys * (r >> 30 ? 1 : 2)) % (uint32_t)n_keys); }
        int64_t best = 0;
        for (int set = 0; set < (1 << n_keys); set++) {
            if (__builtin_popcount((unsigned)set) != slots) continue;
            int64_t h = 0;
            int seen = 0;
            for (int i = 0; i < n; i++) {
                if ((set >> keys[i]) & 1 && (seen >> keys[i]) & 1) h++; /* the set's first use of a key reads it */
                seen |= 1 << keys[i];
            }
            if (h > best) best = h;
        }
        int64_t got = mr_cache_static_hits(keys, n, n_keys, slots);
        CHECK(got == best, "trial %d: static %lld, brute force %lld", trial, (long long)got, (long long)best);
    }
    int32_t bad[2] = {0, 9};
    CHECK(mr_cache_static_hits(bad, 2, 4, 2) == -1, "key out of range accepted");
}

/* the default on synthesized traces: independent routing with Zipf(1) popularity, where the best fixed
 * set is the target (and recency-based rules fall behind it), and uniform routing; on the kjv trace it
 * keeps up with hazard (the rule it uses outside its hot set) */
static void test_default_vs_static(void) {
    mr_routing_trace *z = mr_routing_trace_synth(4000, 4, 4, 64, 1.0, 1), *u = mr_routing_trace_synth(4000, 4, 4, 64, 0, 1);
    CHECK(z && u, "%s", mr_last_error());
    if (!z || !u) { mr_routing_trace_free(z); mr_routing_trace_free(u); return; }
    for (int slots = 51; slots <= 128; slots += 77) { /* 20 % and 50 % of the 256 pairs */
        double def = sim(z, mr_cache_default_policy(), slots), st = sim(z, "static", slots), hz = sim(z, "hazard", slots);
        double lru = sim(z, "lru", slots);
        printf("# zipf 1, %d slots: lru %.2f hazard %.2f %s %.2f static %.2f\n", slots, lru, hz, mr_cache_default_policy(),
               def, st);
        CHECK(def > hz + 1.0 && def > st - 2.0, "zipf 1, %d slots: %s %.2f%%, hazard %.2f%%, static %.2f%%", slots,
              mr_cache_default_policy(), def, hz, st);
        double ud = sim(u, mr_cache_default_policy(), slots), ul = sim(u, "lru", slots);
        CHECK(ud > ul - 0.5, "uniform, %d slots: %s %.2f%% below LRU %.2f%%", slots, mr_cache_default_policy(), ud, ul);
    }
    mr_routing_trace_free(z);
    mr_routing_trace_free(u);
    mr_routing_trace *t = mr_routing_trace_load(t_shared("golden/routing/kjv-moe.trace.bin"));
    CHECK(t, "%s", mr_last_error());
    if (!t) return;
    for (int i = 0; i < 3; i++) {
        double def = sim(t, mr_cache_default_policy(), sizes[i]), hz = sim(t, "hazard", sizes[i]);
        CHECK(def > hz - 0.2, "kjv, %d slots: %s %.2f%% vs hazard %.2f%%", sizes[i], mr_cache_default_policy(), def, hz);
    }
    mr_routing_trace_free(t);
    CHECK(!mr_routing_trace_synth(10, 1, 5, 4, 0, 1) && !mr_routing_trace_synth(10, 1, 1, 4, -1, 1), "bad shapes accepted");
}

int main(void) {
    RUN(test_shared_trace);
    RUN(test_default_vs_static);
    RUN(test_static_exact);
    RUN(test_malformed_traces);
    RUN(test_belady_exact);
    RUN(test_pins_and_invalidate);
    RUN(test_arc_scan_resistance);
    return t_finish();
}
