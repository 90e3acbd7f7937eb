/* Expert pager, standalone: a small GGUF with expert tensors of two layer shapes (slices not page
 * aligned), random batches at several budgets; every byte served must equal the file's bytes, reads
 * must fail loudly under injected faults, and the budget floor is enforced. */
#include "test.h"
#include "base/base.h"
#include "gguf/gguf.h"
#include "pager/pager.h"
#include "quant/quant.h"

#include <stdint.h>
#include <unistd.h>

#define NL 4 /* layer 0 dense, 1 and 2 MoE (different shapes), 3 dense */
#define NE 8
static char path[256];
static mr_gguf *g;
static mr_pager_layer layers[NL];
static uint32_t rng = 1;
static uint32_t rnd(void) { rng = rng * 1664525u + 1013904223u; return rng >> 8; }

static void make_model(void) {
    snprintf(path, sizeof path, "/tmp/mr_test_pager_%d.gguf", (int)getpid());
    mr_gguf_writer *w = mr_gguf_writer_new();
    mr_gguf_writer_set_str(w, "general.architecture", "qwen3moe");
    mr_gguf_writer_set_u32(w, "qwen3moe.expert_used_count", 2);
    /* layer 1: F32 gate/up {40, 24, 8} (3840 B per expert), down {24, 40, 8}; layer 2: F16 {72, 20, 8}
     * (2880 B), down {20, 72, 8}. 32-byte file alignment: slices straddle pages. */
    static float l1[3][40 * 24 * NE];
    static uint16_t l2[3][72 * 20 * NE];
    for (int m = 0; m < 3; m++) {
        for (int i = 0; i < 40 * 24 * NE; i++) l1[m][i] = (float)(int)(rnd() % 2000) - 1000.0f;
        for (int i = 0; i < 72 * 20 * NE; i++) l2[m][i] = (uint16_t)rnd();
    }
    static float dense[64 * 8];
    int64_t nd[2] = {64, 8};
    mr_gguf_writer_add_tensor(w, "blk.0.ffn_up.weight", MR_TYPE_F32, 2, nd, dense);
    const char *nm[3] = {"gate", "up", "down"};
    char name[64];
    for (int m = 0; m < 3; m++) {
        int64_t ne1[3] = {m == 2 ? 24 : 40, m == 2 ? 40 : 24, NE}, ne2[3] = {m == 2 ? 20 : 72, m == 2 ? 72 : 20, NE};
        snprintf(name, sizeof name, "blk.1.ffn_%s_exps.weight", nm[m]);
        CHECK(mr_gguf_writer_add_tensor(w, name, MR_TYPE_F32, 3, ne1, l1[m]) == 0, "%s", mr_get_error());
        snprintf(name, sizeof name, "blk.2.ffn_%s_exps.weight", nm[m]);
        CHECK(mr_gguf_writer_add_tensor(w, name, MR_TYPE_F16, 3, ne2, l2[m]) == 0, "%s", mr_get_error());
    }
    mr_gguf_writer_add_tensor(w, "blk.3.ffn_up.weight", MR_TYPE_F32, 2, nd, dense);
    CHECK(mr_gguf_writer_write(w, path, 1) == 0, "%s", mr_get_error());
    mr_gguf_writer_free(w);
    g = mr_gguf_open(path);
    CHECK(g, "%s", mr_get_error());
    memset(layers, 0, sizeof layers);
    for (int l = 1; l <= 2; l++)
        for (int m = 0; m < 3; m++) {
            snprintf(name, sizeof name, "blk.%d.ffn_%s_exps.weight", l, nm[m]);
            layers[l].mat[m] = mr_gguf_find_tensor(g, name);
            CHECK(layers[l].mat[m], "missing %s", name);
        }
}

static int check_ptrs(int layer, int e, const void *ptrs[MR_PAGER_MATS]) {
    for (int m = 0; m < MR_PAGER_MATS; m++) {
        const mr_gguf_tensor *t = layers[layer].mat[m];
        uint64_t slice = t->nbytes / NE;
        if (!ptrs[m] || memcmp(ptrs[m], (const uint8_t *)t->data + slice * (uint64_t)e, slice)) return -1;
    }
    return 0;
}

static int hint_next; /* run_batches: after each prefetch, hint random experts of the other layer */

/* rounds of random batches over layers 1 and 2; batch sizes up to max_batch; use_next: next() vs get().
 * Returns the number of served experts with wrong bytes, or -1 on an error. */
static long run_batches(mr_pager *p, int rounds, int max_batch, int use_next, long *served) {
    long bad = 0;
    for (int r = 0; r < rounds; r++)
        for (int layer = 1; layer <= 2; layer++) {
            int ids[NE], n = 1 + (int)(rnd() % (uint32_t)max_batch), perm[NE];
            for (int i = 0; i < NE; i++) perm[i] = i;
            for (int i = NE - 1; i > 0; i--) { int j = (int)(rnd() % (uint32_t)(i + 1)), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
            /* skew: low ids more likely, so some experts are reused */
            for (int i = 0; i < n; i++) ids[i] = perm[i] < 4 || rnd() % 2 ? perm[i] : perm[i];
            if (mr_pager_prefetch(p, layer, ids, n)) return -1;
            if (hint_next) {
                int h[3] = {(int)(rnd() % NE), (int)(rnd() % NE), (int)(rnd() % NE)};
                if (mr_pager_hint(p, 3 - layer, h, 1 + (int)(rnd() % 3))) return -1;
            }
            for (int i = 0; i < n; i++) {
                const void *ptrs[MR_PAGER_MATS];
                int e = ids[i];
                if (use_next ? mr_pager_next(p, layer, &e, ptrs) : mr_pager_get(p, layer, e, ptrs)) {
                    mr_pager_release(p, layer);
                    return -1;
                }
                bad += check_ptrs(layer, e, ptrs) != 0;
                (*served)++;
                mr_pager_done(p, layer, e);
            }
            mr_pager_release(p, layer);
        }
    return bad;
}

static void test_no_paging(void) {
    mr_pager *p = mr_pager_create(g, layers, NL, 0, NULL);
    CHECK(p && !mr_pager_paging(p), "budget 0 must serve from the mmap");
    if (!p) return;
    int ids[3] = {5, 1, 7};
    CHECK(mr_pager_prefetch(p, 1, ids, 3) == 0, "%s", mr_get_error());
    for (int i = 0; i < 3; i++) {
        const void *ptrs[MR_PAGER_MATS];
        int e;
        CHECK(mr_pager_next(p, 1, &e, ptrs) == 0 && e == ids[i], "next in order");
        CHECK(ptrs[1] == (const uint8_t *)layers[1].mat[1]->data + layers[1].mat[1]->nbytes / NE * (uint64_t)e, "mmap pointer");
    }
    mr_pager_release(p, 1);
    const void *ptrs[MR_PAGER_MATS];
    CHECK(mr_pager_get(p, 0, 0, ptrs) == -1, "dense layer accepted");
    mr_pager_free(p);
}

static void test_budgets(void) {
    uint64_t slot = mr_pager_slot_bytes(g, layers, NL), floor = mr_pager_min_budget(g, layers, NL);
    /* largest slices: layer 1 F32 3840 B -> 2 pages each when straddling (3 mats) */
    CHECK(slot >= 3 * 3840 && slot % 4096 == 0, "slot bytes %llu", (unsigned long long)slot);
    CHECK(floor == 2 * slot, "floor %llu: 2 slots (expert_used_count 2)", (unsigned long long)floor);
    uint64_t budgets[] = {floor, floor + slot - 1, 3 * slot, 5 * slot, 64 * slot};
    for (int bi = 0; bi < 5; bi++)
        for (int mode = 0; mode < 5; mode++) {
            /* 0: next + O_DIRECT, 1: get, 2: next buffered, 3: 3 + 4: 0 and 2 with 4 KiB read jobs (slices
             * straddle pages: 2 jobs each, the last one past the slice's end) on 7 I/O threads */
            mr_pager_params pp = {.no_direct = mode == 2 || mode == 4};
            if (mode >= 3) { pp.chunk = 4096; pp.io_threads = 7; }
            mr_pager *p = mr_pager_create(g, layers, NL, budgets[bi], &pp);
            CHECK(p, "budget %llu: %s", (unsigned long long)budgets[bi], mr_get_error());
            if (!p) continue;
            int slots = mr_pager_n_slots(p);
            CHECK(slots == (int)(budgets[bi] / slot < 16 ? budgets[bi] / slot : 16), "slots %d", slots);
            if (mode == 0 || mode == 3) CHECK(mr_pager_uses_direct_io(p), "O_DIRECT not used on this file system");
            if (mode == 2 || mode == 4) CHECK(!mr_pager_uses_direct_io(p), "no_direct ignored");
            long served = 0;
            long bad = run_batches(p, 60, 6, mode != 1, &served);
            CHECK(bad == 0, "budget %d slots mode %d: %ld experts with wrong bytes (%s)", slots, mode, bad,
                  bad < 0 ? mr_get_error() : "");
            mr_pager_counters c;
            mr_pager_counters_get(p, &c);
            CHECK(c.hits + c.misses == (uint64_t)served, "accesses %llu + %llu != served %ld",
                  (unsigned long long)c.hits, (unsigned long long)c.misses, served);
            if (mode < 3) CHECK(c.reads == 3 * c.misses, "reads %llu for %llu misses", (unsigned long long)c.reads, (unsigned long long)c.misses);
            if (mode == 3) CHECK(c.reads > 3 * c.misses, "4K jobs: reads %llu for %llu misses", (unsigned long long)c.reads, (unsigned long long)c.misses);
            CHECK(c.io_busy_s > 0 && c.io_busy_s < 60, "I/O busy %.3f s", c.io_busy_s);
            /* every read is for a miss (no guesses here); reads of a released batch may still be in flight */
            CHECK(c.miss_bytes >= c.bytes_read && (c.misses == 0) == (c.miss_bytes == 0), "miss bytes %llu, read %llu",
                  (unsigned long long)c.miss_bytes, (unsigned long long)c.bytes_read);
            if (slots == 16) CHECK(c.misses == 16, "everything fits: each expert read once (%llu)", (unsigned long long)c.misses);
            uint64_t lh = 0, lm = 0, th = 0, tm = 0;
            for (int l = 0; l < NL; l++) { mr_pager_layer_counters(p, l, &lh, &lm); th += lh; tm += lm; }
            CHECK(th == c.hits && tm == c.misses, "per-layer counters add up");
            int trunc;
            double bel = mr_pager_belady_hit_rate(p, &trunc);
            double hr = (double)c.hits / (double)(c.hits + c.misses);
            CHECK(bel >= hr - 1e-12 && bel <= 1 && !trunc, "belady %.3f vs hit rate %.3f", bel, hr);
            mr_pager_free(p);
        }
}

static void test_floor(void) {
    uint64_t floor = mr_pager_min_budget(g, layers, NL);
    mr_pager *p = mr_pager_create(g, layers, NL, floor - 1, NULL);
    CHECK(!p, "budget below the floor accepted");
    CHECK(strstr(mr_get_error(), "minimum") && strstr(mr_get_error(), "2 expert slots"), "message: %s", mr_get_error());
    mr_pager_free(p);
    /* n_used given by the layers overrides the metadata */
    mr_pager_layer l4[NL];
    memcpy(l4, layers, sizeof l4);
    l4[1].n_used = 4;
    CHECK(mr_pager_min_budget(g, l4, NL) == 4 * mr_pager_slot_bytes(g, l4, NL), "n_used 4");
    /* without mr_pager_done, a batch larger than the slots is an error, not a deadlock */
    p = mr_pager_create(g, layers, NL, floor, NULL);
    CHECK(p, "%s", mr_get_error());
    if (!p) return;
    int ids[3] = {0, 1, 2};
    CHECK(mr_pager_prefetch(p, 1, ids, 3) == 0, "%s", mr_get_error());
    const void *ptrs[MR_PAGER_MATS];
    int e, rc = 0;
    for (int i = 0; i < 3 && !rc; i++) rc = mr_pager_next(p, 1, &e, ptrs);
    CHECK(rc == -1 && strstr(mr_get_error(), "more experts at once"), "rc %d: %s", rc, mr_get_error());
    mr_pager_release(p, 1);
    long served = 0;
    CHECK(run_batches(p, 5, 4, 1, &served) == 0, "pager unusable after the error: %s", mr_get_error());
    mr_pager_free(p);
}

static void test_faults(void) {
    const char *kinds[2] = {"eio:%d", "short:%d"}, *msgs[2] = {"Input/output error", "short read"};
    for (int k = 0; k < 2; k++)
        for (int direct = 0; direct < 4; direct++) { /* buffered, O_DIRECT, each with 4 KiB jobs */
            char spec[32];
            snprintf(spec, sizeof spec, kinds[k], 5);
            mr_pager_params pp = {.fault = spec, .no_direct = !(direct & 1), .chunk = direct & 2 ? 4096 : 0};
            mr_pager *p = mr_pager_create(g, layers, NL, 4 * mr_pager_slot_bytes(g, layers, NL), &pp);
            CHECK(p, "%s", mr_get_error());
            if (!p) continue;
            long served = 0;
            long bad = run_batches(p, 20, 3, 1, &served);
            CHECK(bad == -1, "%s: no error reported (served %ld)", spec, served);
            CHECK(strstr(mr_get_error(), msgs[k]) && strstr(mr_get_error(), "ffn_"), "%s: message '%s'", spec, mr_get_error());
            /* the fault was one read: afterwards every byte served is right again */
            served = 0;
            bad = run_batches(p, 20, 3, 1, &served);
            CHECK(bad == 0, "after the fault: %ld (%s)", bad, mr_get_error());
            mr_pager_free(p);
        }
    /* settings out of range fail the pager with a message naming the setting (the CLI's parsing of
     * MOERUN_PAGER_* is tests/cli_pager.sh's) */
    const mr_pager_params bad_pp[5] = {{.io_threads = -1}, {.io_threads = 65}, {.chunk = (1ll << 40) + 1},
                                       {.fault = "bogus"}, {.policy = "mru"}};
    const char *bad_what[5] = {"I/O threads", "I/O threads", "read chunk", "pager fault 'bogus'", "unknown cache policy 'mru'"};
    for (int i = 0; i < 5; i++) {
        mr_pager *q = mr_pager_create(g, layers, NL, 4 * mr_pager_slot_bytes(g, layers, NL), &bad_pp[i]);
        CHECK(!q && strstr(mr_get_error(), bad_what[i]), "bad setting %d accepted: %s", i, mr_get_error());
        mr_pager_free(q);
    }
}

/* mr_pager_eval_begin/end: a decode evaluation's wall time, miss bytes and bytes read go to decode_*;
 * a prefill evaluation's do not */
static void test_decode_counters(void) {
    mr_pager *p = mr_pager_create(g, layers, NL, 8 * mr_pager_slot_bytes(g, layers, NL), NULL);
    if (!p) { CHECK(0, "%s", mr_get_error()); return; }
    mr_pager_counters c1, c2;
    const int pre[2] = {0, 2}, dec[3] = {1, 4, 6};
    for (int k = 0; k < 2; k++) { /* k 0: a prefill eval of 2 experts, k 1: a decode eval of 3 */
        mr_pager_eval_begin(p, k);
        CHECK(mr_pager_prefetch(p, 1, k ? dec : pre, k ? 3 : 2) == 0, "%s", mr_get_error());
        for (int i = 0; i < (k ? 3 : 2); i++) {
            const void *ptrs[MR_PAGER_MATS];
            int e;
            CHECK(mr_pager_next(p, 1, &e, ptrs) == 0 && check_ptrs(1, e, ptrs) == 0, "%s", mr_get_error());
        }
        mr_pager_release(p, 1);
        mr_pager_eval_end(p);
        mr_pager_counters_get(p, k ? &c2 : &c1);
    }
    CHECK(c1.decode_evals == 0 && c1.decode_miss_bytes == 0 && c1.decode_s == 0, "prefill counted as decode");
    CHECK(c1.miss_bytes == c1.bytes_read && c1.bytes_read > 0, "prefill: miss bytes %llu read %llu",
          (unsigned long long)c1.miss_bytes, (unsigned long long)c1.bytes_read);
    CHECK(c2.decode_evals == 1 && c2.decode_s > 0 && c2.decode_io_busy_s > 0, "decode: %llu evals %.6f s",
          (unsigned long long)c2.decode_evals, c2.decode_s);
    CHECK(c2.decode_miss_bytes == c2.miss_bytes - c1.miss_bytes && c2.decode_bytes_read == c2.bytes_read - c1.bytes_read &&
          c2.decode_miss_bytes == c2.decode_bytes_read && c2.misses - c1.misses == 3,
          "decode: miss bytes %llu read %llu", (unsigned long long)c2.decode_miss_bytes, (unsigned long long)c2.decode_bytes_read);
    mr_pager_free(p);
}

static void test_prefetch_twice(void) {
    mr_pager *p = mr_pager_create(g, layers, NL, 4 * mr_pager_slot_bytes(g, layers, NL), NULL);
    if (!p) { CHECK(0, "%s", mr_get_error()); return; }
    int ids[3] = {1, 4, 6};
    mr_pager_counters c0, c1;
    CHECK(mr_pager_prefetch(p, 1, ids, 3) == 0, "%s", mr_get_error());
    mr_pager_counters_get(p, &c0);
    CHECK(mr_pager_prefetch(p, 1, ids, 3) == 0, "%s", mr_get_error()); /* early prefetch, then moe.c's */
    mr_pager_counters_get(p, &c1);
    CHECK(c1.hits == c0.hits && c1.misses == c0.misses && c0.misses == 3 && c1.rounds == 1, "same batch twice: counted again");
    for (int i = 0; i < 3; i++) {
        const void *ptrs[MR_PAGER_MATS];
        int e;
        CHECK(mr_pager_next(p, 1, &e, ptrs) == 0 && check_ptrs(1, e, ptrs) == 0, "%s", mr_get_error());
    }
    mr_pager_release(p, 1);
    mr_pager_free(p);
}

/* serves the n experts of layer's prefetched batch, checking their bytes, then releases it */
static void serve_layer(mr_pager *p, int layer, int n) {
    for (int i = 0; i < n; i++) {
        const void *ptrs[MR_PAGER_MATS];
        int e;
        CHECK(mr_pager_next(p, layer, &e, ptrs) == 0 && check_ptrs(layer, e, ptrs) == 0, "%s", mr_get_error());
        mr_pager_done(p, layer, e);
    }
    mr_pager_release(p, layer);
}

static void test_hints(void) {
    uint64_t slot = mr_pager_slot_bytes(g, layers, NL);
    mr_pager *p = mr_pager_create(g, layers, NL, 8 * slot, NULL);
    if (!p) { CHECK(0, "%s", mr_get_error()); return; }
    /* a guess of 3, the batch uses 2 of them and one more */
    int guess[3] = {0, 1, 2}, ids[3] = {1, 2, 3};
    CHECK(mr_pager_hint(p, 1, guess, 3) == 0, "%s", mr_get_error());
    CHECK(mr_pager_prefetch(p, 1, ids, 3) == 0, "%s", mr_get_error());
    serve_layer(p, 1, 3);
    mr_pager_counters c;
    mr_pager_counters_get(p, &c);
    CHECK(c.hint_reads == 3 && c.hint_used == 2 && c.hint_cancelled + c.hint_wasted == 1, "hints %llu used %llu "
          "cancelled %llu wasted %llu", (unsigned long long)c.hint_reads, (unsigned long long)c.hint_used,
          (unsigned long long)c.hint_cancelled, (unsigned long long)c.hint_wasted);
    CHECK(c.hits == 0 && c.misses == 3, "hinted experts count as misses: %llu hits %llu misses",
          (unsigned long long)c.hits, (unsigned long long)c.misses);
    /* resident experts are not read again for a hint; out-of-range ids are errors */
    CHECK(mr_pager_hint(p, 1, ids, 3) == 0, "%s", mr_get_error());
    mr_pager_counters_get(p, &c);
    CHECK(c.hint_reads == 3, "resident experts read for a hint (%llu)", (unsigned long long)c.hint_reads);
    int bad[1] = {NE};
    CHECK(mr_pager_hint(p, 1, bad, 1) == -1, "expert %d accepted", NE);
    mr_pager_free(p);
    /* random guesses at every budget, O_DIRECT and buffered, whole and 4 KiB jobs: every byte right */
    uint64_t budgets[4] = {2 * slot, 3 * slot, 5 * slot, 64 * slot};
    hint_next = 1;
    for (int bi = 0; bi < 4; bi++)
        for (int mode = 0; mode < 3; mode++) {
            mr_pager_params pp = {.no_direct = mode == 1, .chunk = mode == 2 ? 4096 : 0};
            p = mr_pager_create(g, layers, NL, budgets[bi], &pp);
            if (!p) { CHECK(0, "%s", mr_get_error()); continue; }
            long served = 0, wrong = run_batches(p, 40, 4, 1, &served);
            CHECK(wrong == 0, "budget %d slots mode %d: %ld wrong (%s)", mr_pager_n_slots(p), mode, wrong,
                  wrong < 0 ? mr_get_error() : "");
            mr_pager_counters_get(p, &c);
            CHECK(c.hits + c.misses == (uint64_t)served && c.hint_used + c.hint_cancelled + c.hint_wasted <= c.hint_reads,
                  "counters: %llu + %llu vs %ld served; hints %llu used %llu cancelled %llu wasted %llu",
                  (unsigned long long)c.hits, (unsigned long long)c.misses, served, (unsigned long long)c.hint_reads,
                  (unsigned long long)c.hint_used, (unsigned long long)c.hint_cancelled, (unsigned long long)c.hint_wasted);
            mr_pager_free(p);
        }
    hint_next = 0;
}

/* guesses read only while the device has no demanded read: with slow reads, a batch prefetched right
 * after a guess of 6 experts finds at most GUESS_IN_FLIGHT (2) guess jobs started, so (each expert being
 * at least 3 jobs) at least 5 guesses are cancelled before reading all of their bytes; the batch's own
 * bytes are right. (Before, 8 threads took the first 8 jobs of one FIFO: 2 guesses read in full.) */
static void test_guess_priority(void) {
    uint64_t slot = mr_pager_slot_bytes(g, layers, NL);
    mr_pager_params pp = {.fault = "slow:30", .chunk = 4096};
    mr_pager *p = mr_pager_create(g, layers, NL, 8 * slot, &pp);
    if (!p) { CHECK(0, "%s", mr_get_error()); return; }
    int guess[6] = {0, 1, 2, 3, 4, 5}, ids[2] = {6, 7};
    CHECK(mr_pager_hint(p, 1, guess, 6) == 0, "%s", mr_get_error());
    CHECK(mr_pager_prefetch(p, 1, ids, 2) == 0, "%s", mr_get_error());
    serve_layer(p, 1, 2);
    mr_pager_counters c;
    mr_pager_counters_get(p, &c);
    CHECK(c.hint_reads == 6 && c.hint_cancelled >= 5 && c.hint_used == 0, "guesses %llu cancelled %llu used %llu",
          (unsigned long long)c.hint_reads, (unsigned long long)c.hint_cancelled, (unsigned long long)c.hint_used);
    mr_pager_free(p);
}

/* decode evals whose guesses are never used: the pager reads fewer of them (the waste share steers the
 * guesses per hint), so over evals 20..39 at most 8 % of the bytes read are guesses (a third of them if
 * every guess were read; the controller aims at 2-4 %); guesses that are always used keep being read */
static void test_guess_waste(void) {
    uint64_t slot = mr_pager_slot_bytes(g, layers, NL);
    for (int right = 0; right < 2; right++) {
        mr_pager *p = mr_pager_create(g, layers, NL, 4 * slot, NULL);
        if (!p) { CHECK(0, "%s", mr_get_error()); return; }
        uint64_t half = 0, read0 = 0, miss0 = 0;
        mr_pager_counters c;
        for (int ev = 0; ev < 40; ev++) {
            int a[2] = {(int)(rnd() % NE), 0}, b[2] = {(int)(rnd() % 4), 4 + (int)(rnd() % 4)};
            a[1] = (a[0] + 1) % NE;
            int guess[2] = {right ? b[0] : 4 + (b[1] + 1) % 4, right ? b[1] : 4 + (b[1] + 2) % 4};
            mr_pager_eval_begin(p, 1);
            /* layer 1 is computed, the device is idle (the sleep lets the guesses be read), then layer 2 */
            int rc = mr_pager_prefetch(p, 1, a, 2);
            for (int l = 1; l <= 2 && !rc; l++) {
                for (int i = 0; i < 2 && !rc; i++) {
                    const void *ptrs[MR_PAGER_MATS];
                    int e;
                    rc = mr_pager_next(p, l, &e, ptrs) || check_ptrs(l, e, ptrs);
                    mr_pager_done(p, l, e);
                }
                if (l == 1 && !rc) {
                    rc = mr_pager_hint(p, 2, guess, 2);
                    usleep(5000);
                    rc = rc || mr_pager_prefetch(p, 2, b, 2);
                }
            }
            mr_pager_release(p, 1);
            mr_pager_release(p, 2);
            mr_pager_eval_end(p);
            CHECK(rc == 0, "eval %d: %s", ev, mr_get_error());
            mr_pager_counters_get(p, &c);
            if (ev == 19) { half = c.hint_reads; read0 = c.decode_bytes_read; miss0 = c.decode_miss_bytes; }
        }
        if (right)
            CHECK(c.hint_reads - half >= 10 && c.hint_wasted + c.hint_cancelled == 0,
                  "right guesses: %llu read in evals 20..39, %llu wasted", (unsigned long long)(c.hint_reads - half),
                  (unsigned long long)(c.hint_wasted + c.hint_cancelled));
        else {
            double read = (double)(c.decode_bytes_read - read0), waste = read - (double)(c.decode_miss_bytes - miss0);
            CHECK(half > 0 && read > 0 && waste <= 0.08 * read, "wrong guesses: %.1f%% of evals 20..39's bytes",
                  100.0 * waste / read);
        }
        mr_pager_free(p);
    }
}

static void test_pins(void) {
    /* 2 slots: two experts in use are never evicted by a third prefetched layer's reads */
    mr_pager *p = mr_pager_create(g, layers, NL, mr_pager_min_budget(g, layers, NL), NULL);
    if (!p) { CHECK(0, "%s", mr_get_error()); return; }
    int a[2] = {3, 4};
    const void *pa[MR_PAGER_MATS], *pb[MR_PAGER_MATS];
    CHECK(mr_pager_prefetch(p, 1, a, 2) == 0, "%s", mr_get_error());
    CHECK(mr_pager_get(p, 1, 3, pa) == 0 && mr_pager_get(p, 1, 4, pb) == 0, "%s", mr_get_error());
    int c[1] = {6};
    const void *pc[MR_PAGER_MATS];
    CHECK(mr_pager_prefetch(p, 2, c, 1) == 0, "prefetch itself does not fail");
    CHECK(mr_pager_get(p, 2, 6, pc) == -1, "a third expert got a slot while two are pinned");
    CHECK(check_ptrs(1, 3, pa) == 0 && check_ptrs(1, 4, pb) == 0, "pinned data changed");
    mr_pager_release(p, 2);
    mr_pager_release(p, 1);
    CHECK(mr_pager_get(p, 2, 6, pc) == 0 && check_ptrs(2, 6, pc) == 0, "after release: %s", mr_get_error());
    mr_pager_release(p, 2);
    mr_pager_free(p);
}

int main(void) {
    make_model();
    if (!g) return t_finish();
    RUN(test_no_paging);
    RUN(test_budgets);
    RUN(test_floor);
    RUN(test_faults);
    RUN(test_pins);
    RUN(test_hints);
    RUN(test_guess_priority);
    RUN(test_guess_waste);
    RUN(test_decode_counters);
    RUN(test_prefetch_twice);
    mr_gguf_close(g);
    remove(path);
    return t_finish();
}
