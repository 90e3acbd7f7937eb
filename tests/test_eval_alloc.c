/* Evaluations take their buffers from the session's arenas (docs/DEVELOPING.md): once a session has
 * run a sequence of evaluations, running the same sequence again (after a reset) allocates nothing
 * (the sequence runs twice first: an arena grows at the reset after the call that overflowed it),
 * for every architecture, resident and paged, on 1 and 2 threads. Counted with the allocation
 * counter of the failure injection (mr_alloc_fail_at with a count never reached). The sequence: a
 * 24-token prefill, 12 decode steps, a 5-token chunk, a two-session batched step where the
 * architecture has one. */
#include "test.h"
#include "moerun.h"
#include "moerun_tools.h"
#include "base/base.h"

#include <limits.h>
#include <unistd.h>

static char dir[] = "/tmp/mr-evalloc-XXXXXX";

static int run_sequence(mr_session *s, mr_session *s2, float *lg) {
    int32_t t[48];
    for (int i = 0; i < 48; i++) t[i] = (i * 37 + 5) % 200 + 3;
    mr_session_reset(s);
    if (mr_session_eval(s, t, 24, lg, 0)) return -1;
    for (int i = 0; i < 12; i++)
        if (mr_session_eval(s, t + 24 + i, 1, lg, 0)) return -1;
    if (mr_session_eval(s, t + 36, 5, lg, 0)) return -1;
    if (s2 && mr_model_can_batch(mr_session_model(s))) {
        mr_session_reset(s2);
        if (mr_session_eval(s2, t, 3, lg, 0)) return -1;
        mr_session *const both[2] = {s, s2};
        if (mr_sessions_eval(both, t + 41, 2, lg)) return -1;
    }
    return 0;
}

static void check_shape(const char *shape, const char *mix) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s.gguf", dir, shape);
    mr_synth_params sp = {.shape = shape, .mix = mix, .seed = 3};
    CHECK(mr_synth(path, &sp) == 0, "%s: synth: %s", shape, mr_last_error());
    for (int v = 0; v < 3; v++) {
        mr_model_params mp;
        mr_model_params_default(&mp);
        mp.n_threads = v == 0 ? 1 : 2;
        mp.n_ctx = 64;
        mp.ram_budget = v == 2 ? (uint64_t)1 << 20 : 0; /* below every tiny model's experts */
        mr_model *m = mr_model_load(path, &mp);
        CHECK(m, "%s: load: %s", shape, mr_last_error());
        if (!m) continue;
        mr_session *s = mr_session_new(m, 0), *s2 = mr_session_new(m, 0);
        float *lg = malloc(sizeof(float) * 2 * (size_t)mr_model_n_vocab(m));
        CHECK(s && s2 && lg, "%s: session", shape);
        if (s && s2 && lg) {
            /* twice first: an arena that overflowed grows at its next reset, which may be the next run's */
            CHECK(run_sequence(s, s2, lg) == 0 && run_sequence(s, s2, lg) == 0, "%s: first runs: %s", shape, mr_last_error());
            mr_alloc_fail_at(LONG_MAX, 0); /* count, never fail */
            const int rc = run_sequence(s, s2, lg);
            const long n = mr_alloc_count();
            mr_alloc_fail_at(0, 0);
            CHECK(rc == 0, "%s: second run: %s", shape, mr_last_error());
            CHECK(n == 0, "%s (%d threads%s): the same evaluations again allocated %ld times", shape, mp.n_threads,
                  mp.ram_budget ? ", paged" : "", n);
        }
        free(lg);
        mr_session_free(s2);
        mr_session_free(s);
        mr_model_free(m);
    }
    unlink(path);
}

static void test_eval_alloc_llama(void) { check_shape("llama-tiny", "q4_0"); }
static void test_eval_alloc_mixtral(void) { check_shape("mixtral-tiny", "q4_k_m"); }
static void test_eval_alloc_qwen3moe(void) { check_shape("qwen3moe-tiny", "q8_0"); }
static void test_eval_alloc_deepseek2(void) { check_shape("deepseek2-tiny", "q4_0"); }
static void test_eval_alloc_glm4moe(void) { check_shape("glm4moe-tiny", "q4_0"); }
static void test_eval_alloc_gpt_oss(void) { check_shape("gpt-oss-tiny", "q4_0"); }
static void test_eval_alloc_qwen35moe(void) { check_shape("qwen35moe-tiny", "q4_0"); }
static void test_eval_alloc_deepseek4(void) { check_shape("deepseek-v4-tiny", "q8_0"); }

int main(void) {
    if (!mkdtemp(dir)) { printf("FAIL mkdtemp\n"); return 1; }
    RUN(test_eval_alloc_llama);
    RUN(test_eval_alloc_mixtral);
    RUN(test_eval_alloc_qwen3moe);
    RUN(test_eval_alloc_deepseek2);
    RUN(test_eval_alloc_glm4moe);
    RUN(test_eval_alloc_gpt_oss);
    RUN(test_eval_alloc_qwen35moe);
    RUN(test_eval_alloc_deepseek4);
    rmdir(dir);
    return t_finish();
}
