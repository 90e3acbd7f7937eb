/* The generation API (mr_gen_*): UTF-8-safe text, stop strings (held back while they may still
 * match, cut when they do), several tokens per step, limits, progress/abort between prefill chunks,
 * and greedy output equal to a hand-written eval + argmax loop. Runs on a synthesized 1-layer model
 * (no ../shared needed). Tokens of the synthetic vocabulary: 1 BOS, 2 EOS, 3 + b = the byte b. */
#include "moerun_tools.h"
#include "test.h"
#include "gen/json_prefix.h"
#include "json/json.h"

#include <unistd.h>

static char model_path[] = "/tmp/mr_gen_XXXXXX.gguf";
static mr_model *M;

#define BYTE(b) ((int32_t)(3 + (unsigned char)(b)))

static mr_gen *new_gen(mr_session *s, int max_tokens, const char *const *stop, int n_stop) {
    mr_gen_params p;
    mr_gen_params_default(&p);
    p.sampler.temperature = 0;
    p.max_tokens = max_tokens;
    p.stop = stop;
    p.n_stop = n_stop;
    return mr_gen_new(s, &p);
}

static void test_gen_utf8(void) {
    mr_session *s = mr_session_new(M, 64);
    mr_gen *g = new_gen(s, -1, NULL, 0);
    const int32_t bos = 1;
    CHECK(g && mr_gen_prefill(g, &bos, 1) == 0, "%s", mr_last_error());
    mr_gen_step st;
    const int32_t e1 = BYTE(0xc3), e2 = BYTE(0xa9), a = BYTE('a');
    CHECK(mr_gen_accept(g, &a, 1, &st) == 0 && st.len == 1 && st.text[0] == 'a', "len %zu", st.len);
    CHECK(mr_gen_accept(g, &e1, 1, &st) == 0 && st.len == 0 && st.n_accepted == 1 && !st.finish, "half a char shown: %zu", st.len);
    CHECK(mr_gen_accept(g, &e2, 1, &st) == 0 && st.len == 2 && !memcmp(st.text, "\xc3\xa9", 2), "len %zu", st.len);
    /* an incomplete character at the end of the reply is flushed */
    CHECK(mr_gen_accept(g, &e1, 1, &st) == 0 && st.len == 0, "len %zu", st.len);
    mr_gen_stop(g, &st);
    CHECK(st.finish == MR_GEN_ABORTED && st.len == 1 && (unsigned char)st.text[0] == 0xc3, "len %zu", st.len);
    size_t tl;
    const char *t = mr_gen_text(g, &tl);
    CHECK(tl == 4 && !memcmp(t, "a\xc3\xa9\xc3", 4), "text len %zu", tl);
    mr_gen_free(g);
    mr_session_free(s);
}

static void test_gen_stop(void) {
    mr_session *s = mr_session_new(M, 64);
    const char *stop[] = {"xyz", "", "qq"};
    mr_gen *g = new_gen(s, -1, stop, 3);
    const int32_t bos = 1;
    CHECK(g && mr_gen_prefill(g, &bos, 1) == 0, "%s", mr_last_error());
    mr_gen_step st;
    const int32_t ax[] = {BYTE('a'), BYTE('x')}, y = BYTE('y'), q = BYTE('q'), xyzb[] = {BYTE('x'), BYTE('y'), BYTE('z'), BYTE('b')};
    CHECK(mr_gen_accept(g, ax, 2, &st) == 0 && st.n_accepted == 2 && st.len == 1 && st.text[0] == 'a', "len %zu", st.len);
    CHECK(mr_gen_accept(g, &y, 1, &st) == 0 && st.len == 0, "'xy' may become 'xyz': held, got %zu", st.len);
    CHECK(mr_gen_accept(g, &q, 1, &st) == 0 && st.len == 2 && !memcmp(st.text, "xy", 2), "len %zu", st.len);
    CHECK(mr_gen_n_pending(g) == 4, "pending %d", mr_gen_n_pending(g));
    /* the 'q' is held ("qq"); three of four tokens taken: the stop string ends the reply */
    CHECK(mr_gen_accept(g, xyzb, 4, &st) == 0 && st.finish == MR_GEN_STOP && st.n_accepted == 3, "finish %d n %d", st.finish, st.n_accepted);
    CHECK(st.len == 1 && st.text[0] == 'q', "flush len %zu", st.len);
    size_t tl;
    const char *t = mr_gen_text(g, &tl);
    CHECK(tl == 4 && !memcmp(t, "axyq", 4), "text '%.*s'", (int)tl, t);
    const int32_t *ids;
    CHECK(mr_gen_tokens(g, &ids) == 7, "tokens %d", mr_gen_tokens(g, &ids));
    CHECK(mr_gen_next(g, &st) == 0 && st.finish == MR_GEN_STOP && st.n_accepted == 0, "after the end");
    /* end of generation: not accepted, not shown */
    const int32_t eos = 2;
    CHECK(mr_gen_prefill(g, &bos, 1) == 0, "%s", mr_last_error());
    CHECK(mr_gen_accept(g, &eos, 1, &st) == 0 && st.finish == MR_GEN_EOG && st.n_accepted == 0, "eog %d", st.finish);
    mr_gen_free(g);
    mr_session_free(s);
}

/* greedy: the generator's tokens are the argmax chain of single-token evals, whether the tokens
 * are sampled one per step or handed back several at a time (one batch) */
static void test_gen_greedy(void) {
    const int N = 10;
    int32_t want[10], prompt[5] = {1, BYTE('T'), BYTE('h'), BYTE('e'), BYTE(' ')};
    const int V = mr_model_n_vocab(M);
    float *lg = malloc(sizeof(float) * (size_t)V);
    mr_session *s = mr_session_new(M, 64);
    CHECK(mr_session_eval(s, prompt, 5, lg, 0) == 0, "%s", mr_last_error());
    for (int i = 0; i < N; i++) {
        int best = 0;
        for (int v = 1; v < V; v++) if (lg[v] > lg[best]) best = v;
        want[i] = best;
        if (mr_session_eval(s, &want[i], 1, lg, 0)) break;
    }
    mr_session_reset(s);
    mr_gen *g = new_gen(s, N, NULL, 0);
    CHECK(g && mr_gen_prefill(g, prompt, 5) == 0, "%s", mr_last_error());
    mr_gen_step st = {0};
    int k = 0;
    while (!st.finish && k < 100) { CHECK(mr_gen_next(g, &st) == 0, "%s", mr_last_error()); k++; }
    const int32_t *got;
    int n = mr_gen_tokens(g, &got);
    CHECK(st.finish == MR_GEN_LENGTH, "finish %s", mr_gen_finish_name(st.finish));
    for (int i = 0; i < n; i++) CHECK(got[i] == want[i], "token %d: %d != %d", i, got[i], want[i]);
    mr_gen_stats gs;
    mr_gen_get_stats(g, &gs);
    CHECK(st.finish != MR_GEN_LENGTH || (n == N && gs.n_decode == N - 1), "n %d decode steps %d", n, gs.n_decode);
    /* several tokens accepted at once, evaluated in one batch by the next step */
    mr_session_reset(s);
    mr_gen_reset(g);
    CHECK(mr_gen_prefill(g, prompt, 5) == 0, "%s", mr_last_error());
    if (n >= 4 && st.finish == MR_GEN_LENGTH) {
        CHECK(mr_gen_accept(g, want, 3, &st) == 0 && st.n_accepted == 3, "accept");
        mr_gen_get_stats(g, &gs);
        int before = gs.n_decode;
        CHECK(mr_gen_next(g, &st) == 0 && mr_gen_tokens(g, &got) == 4 && got[3] == want[3], "batch path: %d != %d", got[3], want[3]);
        mr_gen_get_stats(g, &gs);
        CHECK(gs.n_decode == before + 1 && mr_session_n_past(s) == 8, "decode %d n_past %d", gs.n_decode - before, mr_session_n_past(s));
    }
    free(lg);
    mr_gen_free(g);
    mr_session_free(s);
}

static int abort_at;
static int on_progress(void *user, int done, int total) {
    (void)total;
    ++*(int *)user;
    return done >= abort_at;
}

static void test_gen_progress_and_limits(void) {
    mr_session *s = mr_session_new(M, 16);
    mr_gen_params p;
    mr_gen_params_default(&p);
    p.sampler.temperature = 0;
    p.n_batch = 4;
    int calls = 0;
    p.progress = on_progress;
    p.user = &calls;
    mr_gen *g = mr_gen_new(s, &p);
    int32_t prompt[10];
    for (int i = 0; i < 10; i++) prompt[i] = BYTE('a' + i);
    abort_at = 4;
    CHECK(mr_gen_prefill(g, prompt, 10) == 1 && mr_session_n_past(s) == 4 && calls == 2, "abort: n_past %d calls %d",
          mr_session_n_past(s), calls);
    mr_session_reset(s);
    mr_gen_reset(g);
    abort_at = 1000;
    calls = 0;
    CHECK(mr_gen_prefill(g, prompt, 10) == 0 && calls == 4, "chunks of 4: %d calls", calls); /* 0, 4, 8, 10 */
    /* 16 positions, 10 used: at most 6 tokens, the context ends the reply */
    mr_gen_step st = {0};
    int n = 0;
    while (!st.finish && n < 100) { CHECK(mr_gen_next(g, &st) == 0, "%s", mr_last_error()); n += st.n_accepted; }
    CHECK(st.finish == MR_GEN_CONTEXT, "finish %s", mr_gen_finish_name(st.finish));
    CHECK(st.finish != MR_GEN_CONTEXT || n == 6, "%d tokens", n);
    /* a prompt that leaves no room is refused */
    mr_session_reset(s);
    mr_gen_reset(g);
    int32_t big[16] = {0};
    CHECK(mr_gen_prefill(g, big, 16) == -1 && strstr(mr_last_error(), "does not fit"), "%s", mr_last_error());
    mr_gen_free(g);
    /* bad stop strings */
    char longs[300];
    memset(longs, 'x', sizeof longs - 1);
    longs[sizeof longs - 1] = 0;
    const char *stop[] = {longs};
    p.stop = stop;
    p.n_stop = 1;
    CHECK(mr_gen_new(s, &p) == NULL && strstr(mr_last_error(), "longer"), "%s", mr_last_error());
    mr_session_free(s);
}

/* json_object: sampled replies (temperature 1 over the byte vocabulary, 40 seeds) are always
 * prefixes of a JSON object; those that end by themselves (MR_GEN_EOG) parse as an object with the
 * server's JSON reader, which shares no code with the recogniser that constrained them. */
static void test_gen_json_object(void) {
    mr_session *s = mr_session_new(M, 512);
    int complete = 0, cut = 0;
    for (int seed = 1; seed <= 40 && s; seed++) {
        mr_gen_params p;
        mr_gen_params_default(&p);
        p.sampler.temperature = 1.0f;
        p.sampler.top_k = 0; p.sampler.top_p = 1.0f; p.sampler.min_p = 0.0f;
        p.sampler.seed = (uint64_t)seed;
        p.max_tokens = 200;
        p.json_object = 1;
        mr_session_reset(s);
        mr_gen *g = mr_gen_new(s, &p);
        const int32_t bos = 1;
        CHECK(g && mr_gen_prefill(g, &bos, 1) == 0, "%s", mr_last_error());
        mr_gen_step st = {0};
        while (g && !st.finish)
            if (mr_gen_next(g, &st)) { CHECK(0, "%s", mr_last_error()); break; }
        size_t tl = 0;
        const char *t = g ? mr_gen_text(g, &tl) : "";
        mr_jsonp js;
        mr_jsonp_init(&js);
        CHECK(mr_jsonp_feed(&js, t, tl) == 0, "seed %d: '%.*s' is not a JSON-object prefix", seed, (int)tl, t);
        if (st.finish == MR_GEN_EOG) {
            mr_json *j = mr_json_parse(t, tl);
            CHECK(j && j->type == MR_JSON_OBJ, "seed %d: '%.*s' ended but is not an object", seed, (int)tl, t);
            mr_json_free(j);
            complete++;
        } else {
            CHECK(st.finish == MR_GEN_LENGTH && !mr_jsonp_done(&js), "seed %d: finish %d", seed, st.finish);
            cut++;
        }
        mr_gen_free(g);
    }
    printf("# json_object: %d of 40 replies complete, %d cut at 200 tokens\n", complete, cut);
    CHECK(complete >= 5, "only %d replies completed their object", complete);
    mr_session_free(s);
}

/* greedy reply of up to n tokens after prompt with the thinking budget (think NULL: plain) */
static int think_reply(mr_session *s, const mr_chat_think *t, int budget, const int32_t *feed, int n_feed, int n, int32_t *out,
                       char *text, size_t cap) {
    mr_gen_params p;
    mr_gen_params_default(&p);
    p.sampler.temperature = 0;
    p.max_tokens = n;
    p.ignore_eos = 1;
    p.think = t;
    p.think_budget = budget;
    mr_session_reset(s);
    mr_gen *g = mr_gen_new(s, &p);
    const int32_t prompt[3] = {1, BYTE('H'), BYTE('i')};
    mr_gen_step st = {0};
    CHECK(g && mr_gen_prefill(g, prompt, 3) == 0, "%s", mr_last_error());
    if (!g) return 0;
    if (n_feed) CHECK(mr_gen_accept(g, feed, n_feed, &st) == 0, "%s", mr_last_error());
    for (int k = 0; !st.finish && k < 100; k++) CHECK(mr_gen_next(g, &st) == 0, "%s", mr_last_error());
    const int32_t *ids;
    int ng = mr_gen_tokens(g, &ids);
    memcpy(out, ids, sizeof(int32_t) * (size_t)ng);
    size_t tl;
    const char *tx = mr_gen_text(g, &tl);
    snprintf(text, cap, "%.*s", (int)tl, tx);
    mr_gen_free(g);
    return ng;
}

/* The thinking budget: after think_budget tokens of reasoning the close marker's tokens are put in and
 * the reply goes on; no budget (or a reply outside its reasoning) samples as without thinking. */
static void test_gen_think_budget(void) {
    mr_session *s = mr_session_new(M, 64);
    int32_t plain[24], got[24];
    char tp[256], tg[256];
    const mr_chat_think t = {.open = "<think>", .close = "</think>", .in_prompt = 1};
    const int np = think_reply(s, NULL, 0, NULL, 0, 20, plain, tp, sizeof tp);
    CHECK(np == 20, "plain reply %d tokens", np);
    int ng = think_reply(s, &t, -1, NULL, 0, 20, got, tg, sizeof tg);
    CHECK(ng == np && !memcmp(got, plain, sizeof(int32_t) * (size_t)np), "no budget: the plain reply");
    ng = think_reply(s, &t, 4, NULL, 0, 20, got, tg, sizeof tg);
    /* the first 4 tokens' text, then the marker */
    char head[256];
    int hl = 0;
    for (int i = 0; i < 4 && ng == 20; i++) hl += mr_token_to_piece(mr_model_tokenizer(M), got[i], head + hl, (int)sizeof head - hl, 1);
    CHECK(ng == 20 && !memcmp(got, plain, 4 * sizeof(int32_t)) && !strncmp(tg + hl, "</think>", 8), "budget 4: '%s' (plain '%s')", tg, tp);
    ng = think_reply(s, &t, 0, NULL, 0, 12, got, tg, sizeof tg);
    CHECK(ng == 12 && !strncmp(tg, "</think>", 8), "budget 0: '%s'", tg);
    /* the model opens the reasoning itself: the budget counts from there */
    const mr_chat_think t2 = {.open = "<think>", .close = "</think>"};
    const int32_t open[7] = {BYTE('<'), BYTE('t'), BYTE('h'), BYTE('i'), BYTE('n'), BYTE('k'), BYTE('>')};
    ng = think_reply(s, &t2, 2, open, 7, 20, got, tg, sizeof tg);
    hl = 0;
    for (int i = 7; i < 9 && ng == 20; i++) hl += mr_token_to_piece(mr_model_tokenizer(M), got[i], head + hl, (int)sizeof head - hl, 1);
    CHECK(ng == 20 && !strncmp(tg, "<think>", 7) && !strncmp(tg + 7 + hl, "</think>", 8), "opened by the reply, budget 2: '%s'", tg);
    /* a reply that does not open it is left alone */
    const int32_t x = BYTE('x');
    ng = think_reply(s, &t2, 0, &x, 1, 20, got, tg, sizeof tg);
    CHECK(ng == 20 && !strstr(tg, "</think>"), "not opened: '%s'", tg);
    mr_session_free(s);
}

int main(void) {
    int fd = mkstemps(model_path, 5);
    if (fd < 0) { printf("FAIL gen_setup: mkstemps\n"); return 1; }
    close(fd);
    mr_synth_params sp = {.shape = "deepseek-v4-tiny", .mix = "q8_0", .n_layers = 1, .seed = 3};
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    if (mr_synth(model_path, &sp) || !(M = mr_model_load(model_path, &mp))) {
        printf("FAIL gen_setup: %s\n", mr_last_error());
        unlink(model_path);
        return 1;
    }
    RUN(test_gen_utf8);
    RUN(test_gen_stop);
    RUN(test_gen_greedy);
    RUN(test_gen_progress_and_limits);
    RUN(test_gen_json_object);
    RUN(test_gen_think_budget);
    mr_model_free(M);
    unlink(model_path);
    return t_finish();
}
