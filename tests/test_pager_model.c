/* Expert paging inside real models: logits with the smallest legal RAM budget are byte-identical to
 * the run without paging (prefill and decode), also where paged experts are repacked in their slots
 * as read (MXFP4 under AVX2 / AVX-512, Q8_0 under AVX2), the pager really read experts, a budget below the
 * floor is rejected, and an injected read fault makes evaluation fail with a clear error. */
#include "test.h"
#include "golden_logits.h"
#include "moerun.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOK 40 /* positions per run: enough for many rounds of routing, fast on 2 cores */

typedef struct { const char *model, *tokens; } pm_case;
static const pm_case cases[] = {
    {"tiny-qwen3moe", "tokens-32.txt"},
    {"tiny-qwen3moe-iq3s-mxfp4", "tokens-32.txt"},
    {"tiny-mixtral-q4_k_m", "tokens-32.txt"},
    {"kjv-moe-q8_0", "tokens-kjv64.txt"},
    {"tiny-deepseek4", "tokens-300.txt"},
    {"tiny-deepseek4-iq2xxs-q2k", "tokens-300.txt"},
};

static mr_model *load_fault(const char *path, uint64_t budget, const char *fault) {
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    mp.ram_budget = budget;
    mp.pager.fault = fault;
    return mr_model_load(path, &mp);
}

static mr_model *load(const char *path, uint64_t budget) { return load_fault(path, budget, NULL); }

static void test_identical_logits(void) {
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const pm_case *c = &cases[ci];
        char rel[256];
        snprintf(rel, sizeof rel, "models/%s.gguf", c->model);
        const char *path = t_shared(rel);
        int n = 0;
        int32_t *ids = tg_read_ids(c->tokens, &n);
        CHECK(ids && n > 2, "%s: tokens", c->tokens);
        if (!ids) continue;
        if (n > MAX_TOK) n = MAX_TOK;
        mr_pager_model_info info;
        CHECK(mr_pager_model_sizes(path, &info) == 0 && info.min_budget > 0 && info.min_budget < info.expert_bytes,
              "%s: sizes (%s)", c->model, mr_last_error());
        mr_model *m0 = load(path, 0);
        CHECK(m0, "%s: %s", c->model, mr_last_error());
        float *ref[2] = {NULL, NULL};
        for (int decode = 0; decode < 2 && m0; decode++) {
            ref[decode] = tg_eval(m0, ids, n, decode);
            CHECK(ref[decode], "%s: eval without paging: %s", c->model, mr_last_error());
        }
        size_t bytes = m0 ? sizeof(float) * (size_t)n * (size_t)mr_model_n_vocab(m0) : 0;
        /* the floor (every layer's experts evict the previous layer's) and 3x it (experts get reused) */
        uint64_t budgets[2] = {info.min_budget, 3 * info.min_budget};
        for (int bi = 0; bi < 2 && m0; bi++) {
            mr_model *m1 = load(path, budgets[bi]);
            CHECK(m1, "%s at budget %llu: %s", c->model, (unsigned long long)budgets[bi], mr_last_error());
            if (!m1) continue;
            for (int decode = 0; decode < 2; decode++) {
                float *b = tg_eval(m1, ids, n, decode);
                CHECK(b, "%s: eval with paging: %s", c->model, mr_last_error());
                if (b && ref[decode])
                    CHECK(memcmp(ref[decode], b, bytes) == 0, "%s %s at budget %llu: logits differ with paging", c->model,
                          decode ? "decode" : "prefill", (unsigned long long)budgets[bi]);
                free(b);
            }
            mr_pager_stats s;
            CHECK(mr_model_pager_stats(m1, &s) == 0 && s.paging, "%s: not paging", c->model);
            CHECK(s.misses > 0 && s.bytes_read > 0, "%s: no reads?", c->model);
            if (bi == 1) CHECK(s.hits > 0, "%s: no expert was ever reused at %d slots", c->model, s.n_slots);
            /* MXFP4 down matrices take the resident kernels' layout in their slots under AVX2 and AVX-512 */
            const char *isa = mr_kernel_isa_name(mr_kernel_isa_current());
            if (strstr(c->model, "mxfp4") && isa && strncmp(isa, "avx", 3) == 0)
                CHECK(s.repacked_mats > 0 && s.repacked_mats < s.expert_mats, "%s (%s): %d of %d expert matrices repacked as read",
                      c->model, isa, s.repacked_mats, s.expert_mats);
            CHECK(s.arena_bytes <= budgets[bi], "%s: arena %llu over budget", c->model, (unsigned long long)s.arena_bytes);
            int tr;
            double bel = mr_model_pager_belady(m1, &tr);
            double hr = (double)s.hits / (double)(s.hits + s.misses);
            CHECK(bel >= hr && bel <= 1, "%s: belady %.3f hit rate %.3f", c->model, bel, hr);
            printf("# %s: %d slots, %llu uses, hit %.1f%%, belady %.1f%%, %.2f MiB read, %d of %d expert matrices repacked as read\n",
                   c->model, s.n_slots, (unsigned long long)(s.hits + s.misses), 100 * hr, 100 * bel,
                   (double)s.bytes_read / (1 << 20), s.repacked_mats, s.expert_mats);
            mr_model_free(m1);
        }
        free(ref[0]);
        free(ref[1]);
        mr_model_free(m0);
        /* below the floor: a clear error naming the minimum */
        mr_model *bad = load(path, info.min_budget - 1);
        CHECK(!bad && strstr(mr_last_error(), "minimum"), "%s: budget below the floor: %s", c->model,
              bad ? "accepted" : mr_last_error());
        mr_model_free(bad);
        free(ids);
    }
}

static void test_read_faults(void) {
    const char *path = t_shared("models/kjv-moe-q8_0.gguf");
    const char *specs[2] = {"eio:7", "short:7"}, *want[2] = {"Input/output error", "short read"};
    mr_pager_model_info info;
    if (mr_pager_model_sizes(path, &info)) { CHECK(0, "%s", mr_last_error()); return; }
    int n = 0;
    int32_t *ids = tg_read_ids("tokens-kjv64.txt", &n);
    if (!ids) { CHECK(0, "tokens"); return; }
    for (int k = 0; k < 2; k++) {
        mr_model *m = load_fault(path, info.min_budget, specs[k]);
        CHECK(m, "%s", mr_last_error());
        if (!m) continue;
        mr_session *s = mr_session_new(m, 64);
        float *lg = malloc(sizeof(float) * (size_t)mr_model_n_vocab(m));
        int rc = 0;
        for (int i = 0; i < 16 && !rc; i++) rc = mr_session_eval(s, ids + i, 1, lg, 0);
        CHECK(rc == -1, "%s: the fault did not stop evaluation", specs[k]);
        CHECK(strstr(mr_last_error(), want[k]) && strstr(mr_last_error(), "exps"), "%s: message '%s'", specs[k],
              mr_last_error());
        free(lg);
        mr_session_free(s);
        mr_model_free(m);
    }
    free(ids);
}

int main(void) {
    RUN(test_identical_logits);
    RUN(test_read_faults);
    return t_finish();
}
