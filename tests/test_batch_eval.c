/* Multi-sequence evaluation (mr_sessions_eval, the step of continuous batching): several sessions'
 * tokens in one forward pass give each sequence exactly the logits of evaluating it alone, for decode
 * steps (one token per sequence) and mixed batches (a prompt chunk of one next to decode tokens);
 * qwen3moe, llama and deepseek4. */
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
        /* the same pass with logits only for the chunk's last token and the decode token (what the
         * server's mixed step asks for): the same two rows; then a piece that wants none */
        static const uint8_t want[4] = {0, 0, 1, 1};
        mr_session_truncate(s[0], 0);
        mr_session_truncate(s[1], plen[1] + STEPS - 1);
        float *two = malloc(sizeof(float) * (size_t)V * 2);
        if (two && mr_sessions_eval_rows(ms, mt, 4, want, two) == 0) {
            CHECK(!memcmp(two, lg + 2 * (size_t)V, sizeof(float) * (size_t)V * 2), "%s: selected rows differ from all rows", name);
            CHECK(mr_session_n_past(s[0]) == 3 && mr_session_n_past(s[1]) == plen[1] + STEPS, "%s: positions advanced (rows)", name);
            static const uint8_t none[2] = {0, 0};
            int32_t more[2] = {prompts[0][3], prompts[0][4]};
            mr_session *ms2[2] = {s[0], s[0]};
            CHECK(mr_sessions_eval_rows(ms2, more, 2, none, NULL) == 0 && mr_session_n_past(s[0]) == 5,
                  "%s: a piece without logits: %s", name, mr_last_error());
            /* its state is that of the whole prompt: the next token's logits equal the solo run's */
            int32_t next = toks[0][0];
            if (mr_session_eval(s[0], &next, 1, two, 0) == 0)
                CHECK(!memcmp(two, solo + (size_t)1 * V, sizeof(float) * (size_t)V), "%s: after pieces without logits", name);
        } else CHECK(0, "%s: rows: %s", name, mr_last_error());
        free(two);
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

/* deepseek4: per-session state is more than a KV cache (a window ring, streaming compressors at
 * ratio 4 and 128, the indexer's compressed rows, the history kept for cutting back), so the schedule
 * below mixes everything a batch can hold: several prompts in one batch, decode steps of sequences
 * at different positions crossing ratio-4 and ratio-128 block ends, a prompt chunk beside decode
 * tokens, two runs of one session in one batch, and a cut-back (speculative decoding's rollback)
 * followed by batched re-evaluation. Every row must equal the sequence evaluated alone: its prompt in
 * one batch, then one token at a time. */
#define DS_SEQ 3
#define DS_LEN 150
static int32_t ds_tok(int q, int p, int V) { return p == 0 ? 1 : (int32_t)((q * 131 + p * 37 + p * p) % (V - 2)) + 2; }

/* paged: 0 experts from the mmap, 1 at the smallest budget, 2 with room for reading ahead */
static void check_ds4(const char *name, int threads, int paged) {
    char rel[256];
    snprintf(rel, sizeof rel, "models/%s", name);
    const char *path = t_shared(rel);
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = threads;
    if (paged) {
        mr_pager_model_info info;
        if (mr_pager_model_sizes(path, &info)) { CHECK(0, "%s: %s", name, mr_last_error()); return; }
        /* 2: room for reading ahead (the pager guesses from 4 times its floor) */
        mp.ram_budget = paged == 2 ? 4 * info.min_budget + (1 << 20) : info.min_budget;
    }
    mr_model *m = mr_model_load(path, &mp);
    CHECK(m != NULL, "%s: %s", name, mr_last_error());
    if (!m) return;
    CHECK(mr_model_can_batch(m), "%s: multi-sequence evaluation", name);
    const int V = mr_model_n_vocab(m);
    /* prompt lengths: A reaches the first ratio-128 block end (position 127) in its decode steps */
    static const int plen[DS_SEQ] = {122, 5, 30};
    float *ref = malloc(sizeof(float) * (size_t)V * DS_SEQ * DS_LEN);
    float *lg = malloc(sizeof(float) * (size_t)V * 256);
    int32_t toks[DS_SEQ][DS_LEN], bt[256];
    mr_session *s[DS_SEQ] = {0}, *bs[256];
    for (int q = 0; q < DS_SEQ; q++) s[q] = mr_session_new(m, 256);
    if (!ref || !lg || !s[0] || !s[1] || !s[2]) { CHECK(0, "out of memory"); goto done; }
    for (int q = 0; q < DS_SEQ; q++)
        for (int p = 0; p < DS_LEN; p++) toks[q][p] = ds_tok(q, p, V);
    /* alone */
    for (int q = 0; q < DS_SEQ; q++) {
        float *row = ref + (size_t)q * DS_LEN * V;
        if (mr_session_eval(s[q], toks[q], plen[q], row, 1)) { CHECK(0, "%s", mr_last_error()); goto done; }
        for (int p = plen[q]; p < DS_LEN; p++)
            if (mr_session_eval(s[q], &toks[q][p], 1, row + (size_t)p * V, 0)) { CHECK(0, "%s", mr_last_error()); goto done; }
    }
    for (int q = 0; q < DS_SEQ; q++) mr_session_reset(s[q]);
    mr_pager_stats ps0 = {0}, ps1 = {0};
    if (paged) mr_model_pager_stats(m, &ps0);
    /* the schedule: each step a string of sequence letters, one token of that sequence each; digits
     * repeat the letter before them ("A9" = nine tokens of A). '<' cuts the next letter's session
     * back by 3 positions first. */
    static const char *steps[] = {
        "A122B5C30",       /* three prompts in one batch */
        "ABC", "CAB", "ABC", "BCA", "ABC", /* A: 122..126, crossing ratio-4 ends */
        "ABAC",            /* A 127 (ratio-128 block end) and 128 in two runs */
        "<A2BC",           /* A cut back to 126 across that block end, then 126, 127 again */
        "C9AB", "AB3C", "CBA", "<C4A", "A2B2C2", "ABC",
    };
    int np[DS_SEQ] = {0}, same = 1, nstep = 0;
    for (size_t k = 0; k < sizeof steps / sizeof steps[0] && same; k++) {
        int n = 0;
        for (const char *c = steps[k]; *c;) {
            int cut = *c == '<';
            if (cut) c++;
            const int q = *c++ - 'A';
            int cnt = 0;
            while (*c >= '0' && *c <= '9') cnt = cnt * 10 + (*c++ - '0');
            if (cnt == 0) cnt = 1;
            if (cut) {
                np[q] -= 3;
                if (mr_session_truncate(s[q], np[q])) { CHECK(0, "truncate: %s", mr_last_error()); goto done; }
            }
            for (int i = 0; i < cnt; i++) { bs[n] = s[q]; bt[n] = toks[q][np[q]]; n++; np[q]++; }
        }
        if (mr_sessions_eval(bs, bt, n, lg)) { CHECK(0, "step %zu: %s", k, mr_last_error()); goto done; }
        nstep++;
        for (int t = 0; t < n && same; t++) {
            const int q = (int)(bs[t] == s[1]) + 2 * (int)(bs[t] == s[2]);
            int p = 0; /* this token's position: count earlier tokens of its session in the step */
            for (int u = t; u < n; u++) p += bs[u] == bs[t];
            p = np[q] - p;
            if (memcmp(lg + (size_t)t * V, ref + ((size_t)q * DS_LEN + p) * V, sizeof(float) * (size_t)V)) {
                CHECK(0, "%s (%d threads%s): step %zu (%s) row %d: sequence %c position %d differs from the solo run", name,
                      threads, paged ? ", paged" : "", k, steps[k], t, 'A' + q, p);
                same = 0;
            }
        }
    }
    for (int q = 0; q < DS_SEQ && same; q++)
        CHECK(mr_session_n_past(s[q]) == np[q], "%s: sequence %c at %d, expected %d", name, 'A' + q, mr_session_n_past(s[q]), np[q]);
    /* the next layer's experts are guessed for every sequence of a decode step (moe.c) */
    if (paged == 2 && same && mr_model_pager_stats(m, &ps1) == 0)
        CHECK(ps1.hint_reads > ps0.hint_reads, "%s: no read-ahead during the batched steps", name);
done:
    for (int q = 0; q < DS_SEQ; q++) mr_session_free(s[q]);
    free(ref);
    free(lg);
    mr_model_free(m);
}

static void test_ds4(void) {
    check_ds4("tiny-deepseek4.gguf", 1, 0);
    check_ds4("tiny-deepseek4.gguf", 2, 1);
    check_ds4("tiny-deepseek4.gguf", 2, 2);
    check_ds4("tiny-deepseek4-idx.gguf", 2, 0);
    check_ds4("tiny-deepseek4-iq3s-mxfp4.gguf", 1, 1);
    check_ds4("tiny-deepseek4-iq3s-mxfp4.gguf", 2, 0);
}

int main(void) {
    RUN(test_qwen3moe);
    RUN(test_llama);
    RUN(test_ds4);
    return t_finish();
}
