/* Allocation-failure injection (as SQLite's tests do): run a scenario once counting its allocations
 * (mr_alloc_fail_at, base.h), then again with the N-th allocation failing, for N over every
 * allocation (MR_ALLOC_WALK=full, `make alloc-walk`) or a sample (default, `make test`). Each
 * failing run must end in a clean error: the call that failed returns -1/NULL with a message, a
 * call that succeeded despite the failure (a fallback) gives the same logits, nothing leaks (LSan,
 * under `make alloc-walk` / `make sanitize`), and the same objects work afterwards: a session whose
 * eval failed is reset and gives the reference logits bit for bit.
 *
 * Scenario per model: load (1 thread; resident, and paged with a RAM budget below the experts'
 * size), new session, a 5-token prefill batch, one decode step. Every architecture has one: the
 * shared tiny llama, qwen3moe and deepseek4, and synthesized tiny deepseek2, qwen35moe, glm4moe and
 * gpt-oss (written to a temporary directory first; their paged walks only under MR_ALLOC_WALK=full).
 * Tokenizing and sampling are covered by the request scenario: tokenize a chat, render it, sample
 * from the logits. */
#include "test.h"
#include "moerun.h"
#include "moerun_tools.h"
#include "base/base.h"

#include "server_util.h"

#include <limits.h>
#include <math.h>

#ifdef T_ASAN
#include <sanitizer/lsan_interface.h>
#endif

typedef struct {
    const char *name, *file; /* file: under the shared directory, or a synth shape's name (synth) */
    uint64_t ram_budget;
    float *ref;         /* logits of the undisturbed run: prefill last token, then decode */
    int n_vocab;
    int synth;          /* file is a shape for mr_synth (q4_0 mix), written to synth_dir */
} scenario;

static char synth_dir[] = "/tmp/mr-allocfail-XXXXXX";
static int synth_dir_made;

/* the model file of a scenario (a synthesized one is written on first use) */
static const char *sc_path(const scenario *sc) {
    static char path[2][512];
    static int slot;
    if (!sc->synth) return t_shared(sc->file);
    char *p = path[slot++ & 1];
    snprintf(p, sizeof path[0], "%s/%s.gguf", synth_dir, sc->file);
    return p;
}

static int sc_prepare(const scenario *sc) {
    if (!sc->synth) return 0;
    if (!synth_dir_made && !mkdtemp(synth_dir)) return -1;
    synth_dir_made = 1;
    const char *p = sc_path(sc);
    if (access(p, R_OK) == 0) return 0;
    mr_synth_params sp = {.shape = sc->file, .mix = "q4_0", .seed = 1}; /* q4_0: quick to write */
    return mr_synth(p, &sp);
}

static const int32_t prompt[5] = {1, 7, 42, 3, 11};

/* The message of the call that failed, copied when it fails: mr_get_error() is one buffer per thread,
 * which the recovery evals and the frees after it may overwrite (a failure without a message would
 * then show a later, unrelated one). */
enum { MSG_LEN = 1024 };
static char stage_msg[MSG_LEN], recovery_msg[MSG_LEN];
static const char *keep_error(char *buf) {
    snprintf(buf, MSG_LEN, "%s", mr_get_error());
    return buf;
}

/* Runs the scenario; returns 0 and fills out[2][n_vocab], or the stage (1 load, 2 session, 3 prefill,
 * 4 decode) that failed, with *stage_err set to its message. *recovered is set when an eval failed
 * and the reset session then gave the reference logits (recovery_msg: why not, otherwise). */
static int run(const scenario *sc, float *out, int *n_vocab, const char **stage_err, int *recovered) {
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 1;
    mp.n_ctx = 64;
    mp.ram_budget = sc->ram_budget;
    *recovered = 0;
    mr_clear_error();
    mr_model *m = mr_model_load(sc_path(sc), &mp);
    if (!m) { *stage_err = keep_error(stage_msg); return 1; }
    *n_vocab = mr_model_n_vocab(m);
    int stage = 0;
    const int32_t next = 5; /* the decode step's token (set before any jump to eval_failed) */
    mr_session *s = mr_session_new(m, 0);
    if (!s) { *stage_err = keep_error(stage_msg); stage = 2; goto done; }
    if (mr_session_eval(s, prompt, 5, out, 0) != 0) { stage = 3; goto eval_failed; }
    if (mr_session_eval(s, &next, 1, out + *n_vocab, 0) != 0) { stage = 4; goto eval_failed; }
    goto done;
eval_failed:
    *stage_err = keep_error(stage_msg);
    /* the same session, reset, must still work: injection is off now */
    {
        mr_alloc_fail_at(0, 0);
        mr_session_reset(s);
        mr_clear_error();
        float *again = malloc(sizeof *again * 2 * (size_t)*n_vocab);
        if (!again || mr_session_eval(s, prompt, 5, again, 0) != 0 || mr_session_eval(s, &next, 1, again + *n_vocab, 0) != 0)
            keep_error(recovery_msg);
        else if (!sc->ref || memcmp(again, sc->ref, sizeof *again * 2 * (size_t)*n_vocab))
            snprintf(recovery_msg, sizeof recovery_msg, "logits differ from the reference");
        else
            *recovered = 1;
        free(again);
    }
done:
    mr_session_free(s);
    mr_model_free(m);
    return stage;
}

static int leak_check(void) {
#ifdef T_ASAN
    return __lsan_do_recoverable_leak_check();
#else
    return 0;
#endif
}

/* which N to try: all of them, or the first 40, the last 10 and every stride-th between (light:
 * the first 10, the last 5 and about 20 between, for the synthesized models in `make test`) */
static int chosen(long n, long total, int full, int light) {
    if (full) return 1;
    if (light) return n <= 10 || n > total - 5 || n % (total / 20 + 1) == 0;
    long stride = total / 60 + 1;
    return n <= 40 || n > total - 10 || n % stride == 0;
}

/* MR_ALLOC_WALK=full: every N; MR_ALLOC_CASE=NAME MR_ALLOC_N=N: that one (debugging, with
 * MOERUN_ALLOC_FAIL_TRACE=1 for the allocation's stack) */
static void walk(scenario *sc) {
    int full = getenv("MR_ALLOC_WALK") && !strcmp(getenv("MR_ALLOC_WALK"), "full");
    const char *only_case = getenv("MR_ALLOC_CASE"), *only_n = getenv("MR_ALLOC_N");
    if (only_case && strcmp(only_case, sc->name)) return;
    const char *err = NULL;
    int nv = 0, rec;
    float *buf = NULL;
    if (sc->synth && sc->ram_budget && !full) return; /* the paged synthesized walks: make alloc-walk */
    CHECK(sc_prepare(sc) == 0, "%s: synth: %s", sc->name, mr_last_error());
    if (sc->ram_budget) { /* paged at the smallest budget: experts are read again all the time */
        mr_pager_model_info info;
        CHECK(mr_pager_model_sizes(sc_path(sc), &info) == 0, "%s: %s", sc->file, mr_get_error());
        sc->ram_budget = info.min_budget;
    }
    {
        mr_model *m = mr_model_load(sc_path(sc), NULL);
        CHECK(m, "%s: %s", sc->file, mr_get_error());
        if (!m) return;
        nv = mr_model_n_vocab(m);
        mr_model_free(m);
    }
    buf = malloc(sizeof *buf * 2 * (size_t)nv);
    sc->ref = malloc(sizeof *buf * 2 * (size_t)nv);
    mr_alloc_fail_at(LONG_MAX, 0); /* armed far away: counts, never fails */
    int st = run(sc, sc->ref, &nv, &err, &rec);
    long total = mr_alloc_count();
    mr_alloc_fail_at(0, 0);
    CHECK(st == 0, "%s: reference run failed at stage %d: %s", sc->name, st, err);
    if (st) return;
    /* the count can differ a little between runs (pager I/O threads): walk a few past it */
    long tried = 0, clean = 0, fallback = 0, recovered = 0, leaks = 0, bad = 0;
    int stages[6] = {0};
    for (long n = 1; n <= total + 5; n++) {
        if (only_n ? n != atol(only_n) : !chosen(n, total + 5, full, sc->synth)) continue;
        tried++;
        mr_alloc_fail_at(n, 0);
        err = NULL;
        st = run(sc, buf, &nv, &err, &rec);
        long failed = mr_alloc_failed();
        mr_alloc_fail_at(0, 0);
        if (leak_check()) { leaks++; CHECK(0, "%s: leak after failing allocation %ld (stage %d)", sc->name, n, st); }
        stages[st]++;
        if (st == 0) {
            /* nothing failed, or a failure was absorbed (a fallback): results must not change */
            if (memcmp(buf, sc->ref, sizeof *buf * 2 * (size_t)nv)) {
                bad++;
                CHECK(0, "%s: allocation %ld failed (%ld injected) and the logits changed", sc->name, n, failed);
            } else if (failed) {
                fallback++;
                if (getenv("MR_ALLOC_VERBOSE")) printf("# %s: allocation %ld absorbed\n", sc->name, n);
            }
            continue;
        }
        /* a real error: it must say something, and a session whose eval failed must recover */
        if (!err || !strcmp(err, "unknown error")) {
            bad++;
            CHECK(0, "%s: allocation %ld: stage %d failed without a message", sc->name, n, st);
        } else clean++;
        if (st >= 3) {
            if (rec) recovered++;
            else { bad++; CHECK(0, "%s: allocation %ld: eval failed (%s) and the reset session did not recover (%s)", sc->name, n, err, recovery_msg); }
        }
    }
    printf("# %s: %ld allocations, %ld tried (%s): %ld clean errors (load %d, session %d, prefill %d, decode %d; "
           "%ld sessions recovered), %ld absorbed with identical logits, %ld no failure, %ld leaks, %ld bad\n",
           sc->name, total, tried, full ? "full" : "sampled", clean, stages[1], stages[2], stages[3], stages[4],
           recovered, fallback, (long)stages[0] - fallback, leaks, bad);
    free(buf);
    free(sc->ref);
    sc->ref = NULL;
}

static scenario sc_q3 = {"qwen3moe", "models/tiny-qwen3moe.gguf", 0, NULL, 0, 0};
static scenario sc_q3_paged = {"qwen3moe_paged", "models/tiny-qwen3moe.gguf", 1, NULL, 0, 0};
static scenario sc_ds4 = {"deepseek4", "models/tiny-deepseek4.gguf", 0, NULL, 0, 0};
static scenario sc_ds4_paged = {"deepseek4_paged", "models/tiny-deepseek4.gguf", 1, NULL, 0, 0};
static scenario sc_llama = {"llama", "models/tiny-llama.gguf", 0, NULL, 0, 0};
static scenario sc_synth[] = {
    {"deepseek2", "deepseek2-tiny", 0, NULL, 0, 1}, {"deepseek2_paged", "deepseek2-tiny", 1, NULL, 0, 1},
    {"qwen35moe", "qwen35moe-tiny", 0, NULL, 0, 1}, {"qwen35moe_paged", "qwen35moe-tiny", 1, NULL, 0, 1},
    {"glm4moe", "glm4moe-tiny", 0, NULL, 0, 1},     {"glm4moe_paged", "glm4moe-tiny", 1, NULL, 0, 1},
    {"gpt_oss", "gpt-oss-tiny", 0, NULL, 0, 1},     {"gpt_oss_paged", "gpt-oss-tiny", 1, NULL, 0, 1},
};

static void test_alloc_qwen3moe(void) { walk(&sc_q3); }
static void test_alloc_qwen3moe_paged(void) { walk(&sc_q3_paged); }
static void test_alloc_deepseek4(void) { walk(&sc_ds4); }
static void test_alloc_deepseek4_paged(void) { walk(&sc_ds4_paged); }
static void test_alloc_llama(void) { walk(&sc_llama); }
static void test_alloc_synth_archs(void) {
    for (size_t i = 0; i < sizeof sc_synth / sizeof sc_synth[0]; i++) walk(&sc_synth[i]);
    for (size_t i = 0; synth_dir_made && i < sizeof sc_synth / sizeof sc_synth[0]; i += 2) unlink(sc_path(&sc_synth[i]));
    if (synth_dir_made) rmdir(synth_dir);
}

/* ---- one server request (chat or Responses, streamed or not) with its N-th allocation failing ----
 * The server runs in a thread of this process (mr_server_run on 127.0.0.1); the client here uses
 * plain malloc, so only the server's allocations are counted. A request either gives the
 * reference response (ids and times aside) or an error: a 4xx/5xx JSON reply, or, once streaming,
 * an error event; the next request (nothing failing) must give the reference response again. */
/* status line + body with the varying parts (request id, creation time, timings, prompt tokens
 * found in the cache) blanked */
static void normalize(char *r) {
    char *w = r;
    for (const char *p = r; *p;) {
        size_t k = !strncmp(p, "cmpl-", 5) ? 5 : !strncmp(p, "\"created\":", 10) ? 10
                 : !strncmp(p, "resp_", 5) ? 5 : !strncmp(p, "msg_", 4) ? 4 : !strncmp(p, "\"created_at\":", 13) ? 13
                 : !strncmp(p, "\"cached_tokens\":", 16) ? 16 : !strncmp(p, "\"seed\":", 7) ? 7 : 0;
        if (k) {
            memmove(w, p, k); w += k; p += k;
            while (*p >= '0' && *p <= '9') p++;
        } else if (!strncmp(p, ",\"timings\":{", 12)) {
            const char *e = strchr(p, '}');
            p = e ? e + 1 : p + strlen(p);
        } else if (!strncmp(p, "Content-Length: ", 16)) {
            while (*p && *p != '\r') p++;
        } else *w++ = *p++;
    }
    *w = 0;
}


/* responses: the request goes to /v1/responses (stored, so the store's allocations are walked too) */
static void walk_server(const char *name, const char *file, int stream, int responses) {
    int full = getenv("MR_ALLOC_WALK") && !strcmp(getenv("MR_ALLOC_WALK"), "full");
    const char *only_case = getenv("MR_ALLOC_CASE"), *only_n = getenv("MR_ALLOC_N");
    if (only_case && strcmp(only_case, name)) return;
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 1;
    srv_thread t = {mr_model_load(t_shared(file), &mp), 0, 0, 0, ""};
    CHECK(t.m, "%s: %s", file, mr_get_error());
    if (!t.m) return;
    t.port = free_port();
    pthread_t th;
    pthread_create(&th, NULL, srv_thread_main, &t);
    char body[512];
    const char *path = responses ? "/v1/responses" : "/v1/chat/completions";
    if (responses)
        snprintf(body, sizeof body, "{\"instructions\":\"Be brief.\",\"input\":[{\"role\":\"user\",\"content\":"
                 "[{\"type\":\"input_text\",\"text\":\"Hello there \\u00e9\"}]}],\"max_output_tokens\":6,"
                 "\"temperature\":0,\"stream\":%s}", stream ? "true" : "false");
    else
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                 "{\"role\":\"user\",\"content\":\"Hello there \\u00e9\"}],\"max_tokens\":6,\"temperature\":0,"
                 "\"stream\":%s}", stream ? "true" : "false");
    char *ref = NULL;
    for (int i = 0; i < 100 && !ref; i++) { ref = http_post(t.port, path, body); if (!ref) usleep(50000); }
    CHECK(ref && status_of(ref) == 200, "%s: reference request: %s", name, ref ? ref : "no answer");
    if (!ref || status_of(ref) != 200) { srv_thread_stop(&t); pthread_join(th, NULL); mr_model_free(t.m); free(ref); return; }
    normalize(ref);
    /* the same request again, counting its allocations (the prompt cache is warm from now on,
     * and after a failure: both paths get walked) */
    mr_alloc_fail_at(LONG_MAX, 0);
    char *r = http_post(t.port, path, body);
    long total = mr_alloc_count();
    mr_alloc_fail_at(0, 0);
    if (r) normalize(r);
    CHECK(r && !strcmp(r, ref), "%s: second request differs: %s", name, r ? r : "none");
    free(r);
    long tried = 0, errors = 0, same = 0, bad = 0, leaks = 0;
    for (long n = 1; n <= total + 5; n++) {
        if (only_n ? n != atol(only_n) : !chosen(n, total + 5, full, 0)) continue;
        tried++;
        mr_alloc_fail_at(n, 0);
        r = http_post(t.port, path, body);
        long failed = mr_alloc_failed();
        mr_alloc_fail_at(0, 0);
        if (r) normalize(r);
        int st = status_of(r);
        if (r && !strcmp(r, ref)) same++;
        else if (r && ((st >= 400 && strstr(r, "\"error\"")) || (stream && st == 200 && strstr(r, "data: {\"error\"")))) errors++;
        else { bad++; CHECK(0, "%s: allocation %ld failed (%ld injected): %s", name, n, failed, r ? r : "no answer"); }
        free(r);
        /* the server goes on: the next request gets the reference answer */
        r = http_post(t.port, path, body);
        if (r) normalize(r);
        if (!r || strcmp(r, ref)) { bad++; CHECK(0, "%s: after failing allocation %ld the next request gave: %s", name, n, r ? r : "none"); }
        free(r);
        if (leak_check()) { leaks++; CHECK(0, "%s: leak after failing allocation %ld", name, n); }
    }
    srv_thread_stop(&t);
    pthread_join(th, NULL);
    CHECK(t.rc == 0, "%s: server returned %d: %s", name, t.rc, mr_get_error());
    printf("# %s: %ld allocations per request, %ld tried (%s): %ld error replies, %ld identical replies, %ld leaks, %ld bad\n",
           name, total, tried, full ? "full" : "sampled", errors, same, leaks, bad);
    free(ref);
    mr_model_free(t.m);
}

static void test_alloc_server_qwen3moe(void) { walk_server("server_qwen3moe", "models/tiny-qwen3moe.gguf", 0, 0); }
static void test_alloc_server_qwen3moe_stream(void) { walk_server("server_qwen3moe_stream", "models/tiny-qwen3moe.gguf", 1, 0); }
static void test_alloc_server_deepseek4(void) { walk_server("server_deepseek4", "models/tiny-deepseek4.gguf", 0, 0); }
static void test_alloc_server_deepseek4_stream(void) { walk_server("server_deepseek4_stream", "models/tiny-deepseek4.gguf", 1, 0); }
static void test_alloc_server_responses(void) { walk_server("server_responses", "models/tiny-qwen3moe.gguf", 0, 1); }
static void test_alloc_server_responses_stream(void) { walk_server("server_responses_stream", "models/tiny-qwen3moe.gguf", 1, 1); }

/* the switch itself: counts, one-shot and sticky failures, every wrapper */
static void test_alloc_switch(void) {
    mr_alloc_fail_at(3, 0);
    void *a = mr_malloc(8), *b = mr_calloc(2, 4), *c = mr_malloc(8), *d = mr_strdup("x");
    CHECK(a && b && !c && d, "one-shot: %p %p %p %p", a, b, c, d);
    CHECK(mr_alloc_count() == 4 && mr_alloc_failed() == 1, "count %ld failed %ld", mr_alloc_count(), mr_alloc_failed());
    free(a); free(b); free(d);
    mr_alloc_fail_at(2, 1);
    a = mr_malloc(8);
    void *r = mr_realloc(a, 64), *e = mr_aligned_alloc(64, 64);
    CHECK(a && !r && !e && mr_alloc_failed() == 2, "sticky: %p %p %p", a, r, e);
    free(a);
    mr_alloc_fail_at(0, 0);
    a = mr_malloc(8);
    CHECK(a && mr_alloc_count() == 0, "off: %p count %ld", a, mr_alloc_count());
    free(a);
}

int main(void) {
    mr_set_log_level(0);
    RUN(test_alloc_switch);
    RUN(test_alloc_qwen3moe);
    RUN(test_alloc_qwen3moe_paged);
    RUN(test_alloc_deepseek4);
    RUN(test_alloc_deepseek4_paged);
    RUN(test_alloc_llama);
    RUN(test_alloc_synth_archs);
    RUN(test_alloc_server_qwen3moe);
    RUN(test_alloc_server_qwen3moe_stream);
    RUN(test_alloc_server_deepseek4);
    RUN(test_alloc_server_deepseek4_stream);
    RUN(test_alloc_server_responses);
    RUN(test_alloc_server_responses_stream);
    return t_finish();
}
