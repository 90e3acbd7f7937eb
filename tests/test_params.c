/* Engine settings through mr_model_params (no environment): a model's own kernel ISA, used by every
 * eval of that model (its worker threads too) whatever the process's ISA and other models use, also
 * when two models of different ISAs evaluate at the same time; bad ISA names refused at load; the
 * pager part reaching the pager (O_DIRECT off, unknown policy, fault spec); repacking off (same logits). */
#include "test.h"
#include "moerun.h"

#include <pthread.h>

#define NTOK 16
static const int32_t toks[NTOK] = {1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120, 130, 140, 150};

static mr_model *load(const char *path, const char *isa, int no_repack) {
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    mp.isa = isa;
    mp.no_repack = no_repack;
    return mr_model_load(path, &mp);
}

/* all logits of toks as one batch, in a fresh session */
static float *eval_all(mr_model *m) {
    const int V = mr_model_n_vocab(m);
    float *lg = malloc(sizeof(float) * (size_t)V * NTOK);
    mr_session *s = mr_session_new(m, 64);
    if (!lg || !s || mr_session_eval(s, toks, NTOK, lg, 1)) { free(lg); lg = NULL; }
    mr_session_free(s);
    return lg;
}

typedef struct { mr_model *m; const float *want; int rounds, bad; } runner;

static void *run_rounds(void *arg) {
    runner *r = arg;
    const size_t bytes = sizeof(float) * (size_t)mr_model_n_vocab(r->m) * NTOK;
    for (int i = 0; i < r->rounds; i++) {
        float *lg = eval_all(r->m);
        r->bad += !lg || memcmp(lg, r->want, bytes) != 0;
        free(lg);
    }
    return NULL;
}

static void test_model_isa(void) {
    const int best = mr_kernel_isa_current();
    if (best == 0) { SKIP("isa", "only scalar kernels here: nothing to tell apart"); return; }
    const char *path = t_shared("models/tiny-qwen3moe-q4_k_m.gguf");
    /* references: the process's ISA at load, best and then scalar */
    mr_model *mb = load(path, NULL, 0);
    CHECK(mr_kernel_isa_set(0) == 0, "scalar: %s", mr_last_error());
    mr_model *ms = load(path, NULL, 0);
    CHECK(mr_kernel_isa_set(best) == 0, "back to %s", mr_kernel_isa_name(best));
    /* models of their own ISA, loaded while the process's is the other one */
    mr_model *own_s = load(path, "scalar", 0);
    CHECK(mr_kernel_isa_set(0) == 0, "scalar");
    mr_model *own_b = load(path, mr_kernel_isa_name(best), 0);
    CHECK(mr_kernel_isa_set(best) == 0, "best");
    CHECK(mb && ms && own_s && own_b, "load: %s", mr_last_error());
    if (!mb || !ms || !own_s || !own_b) goto done;
    float *rb = eval_all(mb), *rs = eval_all(ms);
    CHECK(rb && rs, "eval: %s", mr_last_error());
    if (!rb || !rs) { free(rb); free(rs); goto done; }
    const size_t bytes = sizeof(float) * (size_t)mr_model_n_vocab(mb) * NTOK;
    /* the check below can only fail if the two ISAs give different bytes on this model */
    CHECK(memcmp(rb, rs, bytes) != 0, "%s and scalar logits are identical: the test cannot tell them apart",
          mr_kernel_isa_name(best));
    /* the process's ISA switched under loaded models changes nothing: each model keeps its own */
    CHECK(mr_kernel_isa_set(0) == 0, "scalar");
    runner a = {own_b, rb, 1, 0}, b = {own_s, rs, 1, 0};
    run_rounds(&a);
    run_rounds(&b);
    CHECK(a.bad == 0 && b.bad == 0, "with the process on scalar: %s model %d bad, scalar model %d bad",
          mr_kernel_isa_name(best), a.bad, b.bad);
    CHECK(mr_kernel_isa_set(best) == 0, "best");
    /* both at once, on two threads (each model's pool workers take its ISA) */
    a.rounds = b.rounds = 6;
    a.bad = b.bad = 0;
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_rounds, &a);
    pthread_create(&tb, NULL, run_rounds, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    CHECK(a.bad == 0 && b.bad == 0, "concurrent: %s model %d of 6 bad, scalar model %d of 6 bad",
          mr_kernel_isa_name(best), a.bad, b.bad);
    free(rb);
    free(rs);
done:
    mr_model_free(mb);
    mr_model_free(ms);
    mr_model_free(own_s);
    mr_model_free(own_b);
}

static void test_bad_isa(void) {
    const char *path = t_shared("models/tiny-qwen3moe.gguf");
    mr_model *m = load(path, "sse9", 0);
    CHECK(!m && strstr(mr_last_error(), "'sse9'"), "unknown ISA accepted: %s", mr_last_error());
    mr_model_free(m);
    const char *other = mr_kernel_isa_available(1) ? "neon" : "avx2"; /* the other family's */
    m = load(path, other, 0);
    CHECK(!m && strstr(mr_last_error(), "not available"), "%s accepted: %s", other, mr_last_error());
    mr_model_free(m);
    CHECK(mr_kernel_isa_set(-1) == -1 && mr_kernel_isa_set(MR_KERNEL_ISA_COUNT) == -1, "bad ISA numbers accepted");
}

static void test_pager_params(void) {
    const char *path = t_shared("models/kjv-moe-q8_0.gguf");
    mr_pager_model_info info;
    if (mr_pager_model_sizes(path, &info)) { CHECK(0, "%s", mr_last_error()); return; }
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    mp.ram_budget = 4 * info.min_budget;
    mp.pager.no_direct = 1;
    mr_model *m = mr_model_load(path, &mp);
    mr_pager_stats ps;
    CHECK(m && mr_model_pager_stats(m, &ps) == 0 && ps.paging && !ps.direct_io, "no_direct: %s",
          m ? "O_DIRECT used" : mr_last_error());
    mr_model_free(m);
    mp.pager.policy = "mru";
    m = mr_model_load(path, &mp);
    CHECK(!m && strstr(mr_last_error(), "unknown cache policy 'mru'"), "policy: %s", mr_last_error());
    mr_model_free(m);
    mp.pager.policy = "lru";
    mp.pager.fault = "eio:1";
    m = mr_model_load(path, &mp);
    CHECK(m != NULL, "%s", mr_last_error());
    if (!m) return;
    float *lg = eval_all(m);
    CHECK(!lg && strstr(mr_last_error(), "Input/output error"), "fault eio:1 not injected: %s", mr_last_error());
    free(lg);
    mr_model_free(m);
}

static void test_no_repack(void) {
    const char *path = t_shared("models/tiny-llama-q4_0.gguf");
    mr_model *a = load(path, NULL, 0), *b = load(path, NULL, 1);
    CHECK(a && b, "%s", mr_last_error());
    if (a && b) {
        float *la = eval_all(a), *lb = eval_all(b);
        CHECK(la && lb && !memcmp(la, lb, sizeof(float) * (size_t)mr_model_n_vocab(a) * NTOK), "logits differ");
        free(la);
        free(lb);
    }
    mr_model_free(a);
    mr_model_free(b);
}

int main(void) {
    RUN(test_model_isa);
    RUN(test_bad_isa);
    RUN(test_pager_params);
    RUN(test_no_repack);
    return t_finish();
}
