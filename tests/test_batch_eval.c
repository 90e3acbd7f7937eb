/* Multi-sequence evaluation (mr_sessions_eval, the step of continuous batching): several sessions'
 * tokens in one forward pass give each sequence exactly the logits of evaluating it alone, for decode
 * steps (one token per sequence) and mixed batches (a prompt chunk of one next to decode tokens). */
#include "test.h"
#include "moerun.h"

#define NSEQ 3
#define STEPS 6

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[b]) b = i;
    return b;
}

static void check_model(const char *name) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    const char *path = t_shared(rel);
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    mr_model *m = mr_model_load(path, &mp);
    CHECK(m != NULL, "%s: %s", name, mr_last_error());
    if (!m) return;
    const int V = mr_model_n_vocab(m);
    static const int32_t prompts[NSEQ][5] = {{1, 10, 20, 30, 40}, {1, 7}, {1, 99, 98, 97}};
    static const int plen[NSEQ] = {5, 2, 4};
    float *solo = malloc(sizeof(float) * (size_t)V * NSEQ * (STEPS + 1));
    float *lg = malloc(sizeof(float) * (size_t)V * NSEQ * 4);
    int32_t toks[NSEQ][STEPS + 1];
    mr_session *s[NSEQ] = {0};
    for (int q = 0; q < NSEQ; q++) s[q] = mr_session_new(m, 64);
    if (!solo || !lg || !s[0] || !s[1] || !s[2]) { CHECK(0, "out of memory"); goto done; }
    /* alone: prompt, then greedy decode steps */
    for (int q = 0; q < NSEQ; q++) {
        float *row = solo + (size_t)q * (STEPS + 1) * V;
        if (mr_session_eval(s[q], prompts[q], plen[q], row, 0)) { CHECK(0, "%s", mr_last_error()); goto done; }
        for (int k = 0; k < STEPS; k++) {
            toks[q][k] = argmax(row + (size_t)k * V, V);
            if (mr_session_eval(s[q], &toks[q][k], 1, row + (size_t)(k + 1) * V, 0)) { CHECK(0, "%s", mr_last_error()); goto done; }
        }
    }
    /* together: the prompts, then every step one batch of NSEQ tokens */
    for (int q = 0; q < NSEQ; q++) {
        mr_session_reset(s[q]);
        if (mr_session_eval(s[q], prompts[q], plen[q], lg, 0)) { CHECK(0, "%s", mr_last_error()); goto done; }
    }
    int same = 1;
    for (int k = 0; k < STEPS && same; k++) {
        int32_t step[NSEQ];
        for (int q = 0; q < NSEQ; q++) step[q] = toks[q][k];
        if (mr_sessions_eval(s, step, NSEQ, lg)) { CHECK(0, "%s", mr_last_error()); goto done; }
        for (int q = 0; q < NSEQ; q++)
            if (memcmp(lg + (size_t)q * V, solo + ((size_t)q * (STEPS + 1) + k + 1) * V, sizeof(float) * (size_t)V)) {
                CHECK(0, "%s: step %d sequence %d: batched logits differ from the solo run", name, k, q);
                same = 0;
                break;
            }
    }
    if (same) {
        /* mixed: sequence 0 from scratch (a 3-token chunk) beside one decode token of sequence 1 */
        mr_session_reset(s[0]);
        mr_session *ms[4] = {s[0], s[0], s[0], s[1]};
        int32_t mt[4] = {prompts[0][0], prompts[0][1], prompts[0][2], toks[1][STEPS - 1]};
        mr_session_truncate(s[1], plen[1] + STEPS - 1);
        if (mr_sessions_eval(ms, mt, 4, lg)) { CHECK(0, "%s", mr_last_error()); goto done; }
        CHECK(mr_session_n_past(s[0]) == 3 && mr_session_n_past(s[1]) == plen[1] + STEPS, "%s: positions advanced", name);
        CHECK(!memcmp(lg + 3 * (size_t)V, solo + ((size_t)1 * (STEPS + 1) + STEPS) * V, sizeof(float) * (size_t)V),
              "%s: decode token next to a prompt chunk differs", name);
        float *ref = malloc(sizeof(float) * (size_t)V * 3);
        mr_session *r = mr_session_new(m, 64);
        if (ref && r && mr_session_eval(r, prompts[0], 3, ref, 1) == 0)
            CHECK(!memcmp(lg, ref, sizeof(float) * (size_t)V * 3), "%s: prompt chunk next to a decode token differs", name);
        free(ref);
        mr_session_free(r);
    }
done:
    for (int q = 0; q < NSEQ; q++) mr_session_free(s[q]);
    free(solo);
    free(lg);
    mr_model_free(m);
}

static void test_qwen3moe(void) { check_model("kjv-moe-q8_0.gguf"); }
static void test_llama(void) { check_model("tiny-llama-q4_0.gguf"); }

static void test_ds4_refused(void) {
    mr_model *m = mr_model_load(t_shared("models/tiny-deepseek4.gguf"), NULL);
    CHECK(m != NULL, "%s", mr_last_error());
    if (!m) return;
    mr_session *s = mr_session_new(m, 16);
    int32_t t = 1;
    CHECK(s && mr_sessions_eval(&s, &t, 1, NULL) == -1 && strstr(mr_last_error(), "multi-sequence"), "deepseek4 must refuse");
    mr_session_free(s);
    mr_model_free(m);
}

int main(void) {
    RUN(test_qwen3moe);
    RUN(test_llama);
    RUN(test_ds4_refused);
    return t_finish();
}
