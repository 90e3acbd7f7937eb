/* DeepSeek-V4 (deepseek4) end to end against the reference's golden logits (../shared/golden):
 * prefill (one batch) and decode (one token at a time) for every tiny deepseek4 model of the
 * manifest, each in its tolerance class (shared/README.md). Prints the KL statistics. */
#include "test.h"
#include "moerun_tools.h"

#include "gguf/gguf.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

static int read_tokens(const char *path, int32_t *tok, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, c;
    long v = 0; int in = 0;
    while ((c = fgetc(f)) != EOF) {
        if (c >= '0' && c <= '9') { v = v * 10 + (c - '0'); in = 1; }
        else if (in) { if (n < max) tok[n++] = (int32_t)v; v = 0; in = 0; }
    }
    if (in && n < max) tok[n++] = (int32_t)v;
    fclose(f);
    return n;
}

typedef struct {
    int n_tok, n_vocab;
    int32_t tok[1024];
    float *prefill, *decode;   /* [n_tok][n_vocab] */
} run_t;

/* evaluate the token file as one batch and one token at a time */
static int run_model(const char *model, const char *tokens, int reference, run_t *r) {
    memset(r, 0, sizeof *r);
    r->n_tok = read_tokens(t_shared(tokens), r->tok, 1024);
    if (r->n_tok <= 0) { CHECK(0, "cannot read %s", tokens); return -1; }
    mr_model_params p;
    mr_model_params_default(&p);
    p.n_threads = 1;
    p.graph = reference ? MR_GRAPH_FORK : MR_GRAPH_OFFICIAL;
    mr_model *m = mr_model_load(t_shared(model), &p);
    CHECK(m != NULL, "load %s: %s", model, mr_last_error());
    if (!m) return -1;
    r->n_vocab = mr_model_n_vocab(m);
    /* a session sized to the sequence: the indexer breaks exact score ties over n_ctx/4 rows,
     * which then is what the reference's single-batch prefill sorted (docs/DEEPSEEK4.md) */
    mr_session *s = mr_session_new(m, r->n_tok);
    CHECK(s != NULL, "session: %s", mr_last_error());
    if (!s) { mr_model_free(m); return -1; }
    const size_t nv = (size_t)r->n_vocab;
    r->prefill = malloc(sizeof(float) * nv * (size_t)r->n_tok);
    r->decode = malloc(sizeof(float) * nv * (size_t)r->n_tok);
    int rc = mr_session_eval(s, r->tok, r->n_tok, r->prefill, 1);
    CHECK(rc == 0, "prefill: %s", mr_last_error());
    mr_session_reset(s);
    for (int i = 0; i < r->n_tok && rc == 0; i++) {
        rc = mr_session_eval(s, r->tok + i, 1, r->decode + nv * (size_t)i, 0);
        CHECK(rc == 0, "decode at %d: %s", i, mr_last_error());
    }
    mr_session_free(s);
    mr_model_free(m);
    return rc;
}

static void run_free(run_t *r) { free(r->prefill); free(r->decode); }

/* compare engine rows (all positions) with a golden file; prints and returns the stats */
static int compare(const char *name, const char *path_rel, const float *eng, int n_tok, int n_vocab, const char *cls) {
    int n_rows = 0, nv = 0;
    int32_t *pos = NULL;
    float *ref = NULL;
    if (mr_lgts_read(t_shared(path_rel), &n_rows, &nv, &pos, &ref)) { CHECK(0, "read %s: %s", path_rel, mr_last_error()); return -1; }
    CHECK(nv == n_vocab, "%s: vocab %d vs %d", path_rel, nv, n_vocab);
    float *sel = malloc(sizeof(float) * (size_t)n_rows * (size_t)nv);
    int ok = nv == n_vocab;
    for (int i = 0; ok && i < n_rows; i++) {
        if (pos[i] < 0 || pos[i] >= n_tok) { CHECK(0, "%s: position %d out of range", path_rel, pos[i]); ok = 0; break; }
        memcpy(sel + (size_t)i * nv, eng + (size_t)pos[i] * nv, sizeof(float) * (size_t)nv);
    }
    int rc = -1;
    if (ok) {
        mr_logits_cmp c;
        mr_logits_compare(ref, sel, n_rows, nv, &c);
        printf("# %-34s %-8s rows %3d  KL max %.3g (pos %d) median %.3g p95 %.3g  top1 %.1f%%\n", name, cls ? cls : "-", n_rows,
               c.kl_max, pos[c.kl_max_row], c.kl_median, c.kl_p95, 100.0 * c.top1_frac);
        if (cls) {
            char why[256] = "";
            int pass = mr_logits_check_class(cls, &c, why, sizeof why);
            CHECK(pass == 1, "%s against %s (%s): %s", name, path_rel, cls, why);
        }
        rc = 0;
    }
    free(sel); free(pos); free(ref);
    return rc;
}

static void golden(const char *model, const char *tokens, const char *cls) {
    char mpath[256], pre[256], dec[256], name[256];
    snprintf(mpath, sizeof mpath, "models/%s.gguf", model);
    snprintf(pre, sizeof pre, "golden/logits/%s.prefill.lgts", model);
    snprintf(dec, sizeof dec, "golden/logits/%s.decode.lgts", model);
    run_t r;
    if (run_model(mpath, tokens, 1, &r) == 0) {
        snprintf(name, sizeof name, "%s prefill", model);
        compare(name, pre, r.prefill, r.n_tok, r.n_vocab, cls);
        snprintf(name, sizeof name, "%s decode", model);
        compare(name, dec, r.decode, r.n_tok, r.n_vocab, cls);
    }
    run_free(&r);
}

static void test_tiny_deepseek4(void) { golden("tiny-deepseek4", "golden/tokens-300.txt", "strict"); }
static void test_tiny_deepseek4_iq3s_mxfp4(void) { golden("tiny-deepseek4-iq3s-mxfp4", "golden/tokens-300.txt", "chaotic"); }
static void test_tiny_deepseek4_iq2xxs_q2k(void) { golden("tiny-deepseek4-iq2xxs-q2k", "golden/tokens-300.txt", "chaotic"); }

/* The indexer model: prefill against the reference's prefill (indexer class); our own decode must
 * equal our own prefill (max KL <= 1e-4 at every position). The reference's one-token decode is
 * reported but not required (see docs/DEEPSEEK4.md for why it is the wrong one). */
static void test_tiny_deepseek4_idx(void) {
    run_t r;
    if (run_model("models/tiny-deepseek4-idx.gguf", "golden/tokens-300-v1024.txt", 1, &r) == 0) {
        compare("tiny-deepseek4-idx prefill", "golden/logits/tiny-deepseek4-idx.prefill.lgts", r.prefill, r.n_tok,
                r.n_vocab, "indexer");
        compare("tiny-deepseek4-idx decode (info)", "golden/logits/tiny-deepseek4-idx.decode.lgts", r.decode, r.n_tok,
                r.n_vocab, NULL);
        mr_logits_cmp c;
        mr_logits_compare(r.prefill, r.decode, r.n_tok, r.n_vocab, &c);
        printf("# %-34s %-8s rows %3d  KL max %.3g (pos %d) median %.3g p95 %.3g  top1 %.1f%%\n",
               "tiny-deepseek4-idx own decode/prefill", "", r.n_tok, c.kl_max, c.kl_max_row, c.kl_median, c.kl_p95,
               100.0 * c.top1_frac);
        CHECK(c.kl_max <= 1e-4, "own decode vs own prefill: max KL %.3g at position %d", c.kl_max, c.kl_max_row);
    }
    run_free(&r);
}


/* ---- path and thread invariance ---- */

static mr_model *load_p(const char *rel, int threads, int reference) {
    mr_model_params p;
    mr_model_params_default(&p);
    p.n_threads = threads;
    p.graph = reference ? MR_GRAPH_FORK : MR_GRAPH_OFFICIAL;
    return mr_model_load(t_shared(rel), &p);
}

/* logits of n tokens evaluated in pieces of the given sizes (0-terminated list, repeated) */
static float *eval_split(mr_model *m, const int32_t *tok, int n, int n_ctx, const int *pieces) {
    const size_t nv = (size_t)mr_model_n_vocab(m);
    float *out = malloc(sizeof(float) * nv * (size_t)n);
    mr_session *s = mr_session_new(m, n_ctx);
    if (!out || !s) { free(out); mr_session_free(s); return NULL; }
    int pos = 0, k = 0;
    while (pos < n) {
        int len = pieces[k] ? pieces[k++] : (k = 0, pieces[k++]);
        if (len > n - pos) len = n - pos;
        if (mr_session_eval(s, tok + pos, len, out + nv * (size_t)pos, 1)) { free(out); out = NULL; break; }
        pos += len;
    }
    mr_session_free(s);
    return out;
}

/* A prefill, the same tokens one at a time, and any mix of later chunks compute the same numbers:
 * every path reads the keys as the F16 cache holds them and the streaming compressor reproduces the
 * batched one. Also with 2 threads. On the indexer model (rows selected from position 19). */
static void test_split_invariance(void) {
    int32_t tok[1024];
    int n = read_tokens(t_shared("golden/tokens-300-v1024.txt"), tok, 1024);
    CHECK(n >= 120, "tokens");
    if (n < 120) return;
    n = 120;
    mr_model *m1 = load_p("models/tiny-deepseek4-idx.gguf", 1, 1), *m2 = load_p("models/tiny-deepseek4-idx.gguf", 2, 1);
    CHECK(m1 && m2, "load: %s", mr_last_error());
    if (!m1 || !m2) { mr_model_free(m1); mr_model_free(m2); return; }
    const size_t bytes = sizeof(float) * (size_t)mr_model_n_vocab(m1) * (size_t)n;
    static const int whole[] = {1 << 20, 0}, ones[] = {1, 0}, mixed[] = {37, 1, 8, 3, 16, 0}, odd[] = {5, 0};
    float *ref = eval_split(m1, tok, n, n, whole);
    CHECK(ref != NULL, "prefill: %s", mr_last_error());
    struct { const char *name; mr_model *m; const int *pieces; } cases[] = {
        {"one at a time", m1, ones}, {"37,1,8,3,16,...", m1, mixed}, {"5 at a time", m1, odd},
        {"prefill, 2 threads", m2, whole}, {"37,1,8,... 2 threads", m2, mixed}};
    for (size_t i = 0; ref && i < sizeof cases / sizeof cases[0]; i++) {
        float *o = eval_split(cases[i].m, tok, n, n, cases[i].pieces);
        CHECK(o != NULL, "%s: %s", cases[i].name, mr_last_error());
        if (o) CHECK(memcmp(o, ref, bytes) == 0, "%s: logits differ from the prefill", cases[i].name);
        free(o);
    }
    free(ref);
    mr_model_free(m1);
    mr_model_free(m2);
}

/* Official numerics (reference = 0): indexer Hadamard + FP4 and the shared-expert clamp. On the
 * indexer model the selections change (so the logits do), prefill and decode still agree. */
static void test_official(void) {
    int32_t tok[1024];
    int n = read_tokens(t_shared("golden/tokens-300-v1024.txt"), tok, 1024);
    if (n > 100) n = 100;
    mr_model *mr = load_p("models/tiny-deepseek4-idx.gguf", 1, 1), *mo = load_p("models/tiny-deepseek4-idx.gguf", 1, 0);
    CHECK(mr && mo, "load: %s", mr_last_error());
    if (!mr || !mo) { mr_model_free(mr); mr_model_free(mo); return; }
    const int nv = mr_model_n_vocab(mr);
    static const int whole[] = {1 << 20, 0}, ones[] = {1, 0};
    float *a = eval_split(mr, tok, n, n, whole), *b = eval_split(mo, tok, n, n, whole), *c = eval_split(mo, tok, n, n, ones);
    CHECK(a && b && c, "eval: %s", mr_last_error());
    if (a && b && c) {
        /* before position 19 nothing is selected and no shared-expert value reaches the clamp here */
        double before = 0, after = 0;
        for (int t = 0; t < n; t++) {
            double kl = mr_logits_kl(a + (size_t)t * nv, b + (size_t)t * nv, nv);
            if (t < 19) before = kl > before ? kl : before; else after = kl > after ? kl : after;
        }
        printf("# official vs reference: max KL %.3g before position 19, %.3g after\n", before, after);
        CHECK(after > 1e-3, "the indexer QAT changed nothing (max KL %.3g)", after);
        CHECK(memcmp(b, c, sizeof(float) * (size_t)nv * (size_t)n) == 0, "official: decode differs from prefill");
    }
    free(a); free(b); free(c);
    mr_model_free(mr);
    mr_model_free(mo);
}

/* ---- chat template (DeepSeek V4 jinja, spec §7): system prompts first, then the turns ---- */
static void test_chat_template(void) {
    mr_model *m = load_p("models/tiny-deepseek4-iq2xxs-q2k.gguf", 1, 1);
    CHECK(m != NULL, "load: %s", mr_last_error());
    if (!m) return;
    CHECK(!strcmp(mr_chat_template_detect(m), "deepseek4"), "detected %s", mr_chat_template_detect(m));
    const mr_chat_msg msgs[] = {{.role = "system", .content = "Be brief."}, {.role = "user", .content = "Hi"}, {.role = "assistant", .content = "Hello."},
                                {.role = "system", .content = "Use English."}, {.role = "user", .content = "2+2?"}};
    char out[1024];
    int len = mr_chat_render(m, NULL, msgs, 5, 1, out, sizeof out);
    const char *want = "Be brief.\n\nUse English."
                       "<\xef\xbd\x9cUser\xef\xbd\x9c>Hi"
                       "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c></think>Hello.<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"
                       "<\xef\xbd\x9cUser\xef\xbd\x9c>2+2?"
                       "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c></think>";
    CHECK(len == (int)strlen(want) && !strcmp(out, want), "rendered:\n%s\nwant:\n%s", out, want);
    /* the reference template opens a new assistant turn after an assistant turn too */
    len = mr_chat_render(m, NULL, msgs, 3, 1, out, sizeof out);
    const char *tail = "Hello.<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c><\xef\xbd\x9c" "Assistant\xef\xbd\x9c></think>";
    CHECK(len > 0 && strstr(out, tail) && !strcmp(strstr(out, tail), tail), "prompt after assistant: %s", out);
    mr_model_free(m);
}

/* ---- loader errors name the problem ---- */
static int write_variant(const char *src, const char *dst, const char *drop_tensor, const char *set_ratios) {
    mr_gguf *g = mr_gguf_open(src);
    if (!g) return -1;
    mr_gguf_writer *w = mr_gguf_writer_new();
    for (uint64_t i = 0; i < mr_gguf_n_kv(g); i++) {
        const mr_gguf_kv *kv = mr_gguf_kv_at(g, i);
        if (set_ratios && !strcmp(kv->key, "deepseek4.attention.compress_ratios")) continue;
        mr_gguf_writer_copy_kv(w, kv);
    }
    if (set_ratios) {
        uint32_t r[4];
        sscanf(set_ratios, "%u,%u,%u,%u", &r[0], &r[1], &r[2], &r[3]);
        mr_gguf_writer_set_kv(w, "deepseek4.attention.compress_ratios", MR_GGUF_ARRAY, MR_GGUF_U32, 4, r);
    }
    for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
        if (drop_tensor && !strcmp(t->name, drop_tensor)) continue;
        mr_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    int rc = mr_gguf_writer_write(w, dst, 1);
    mr_gguf_writer_free(w);
    mr_gguf_close(g);
    return rc;
}

static void test_loader_errors(void) {
    const char *src = t_shared("models/tiny-deepseek4-iq2xxs-q2k.gguf");
    char path[256];
    snprintf(path, sizeof path, "/tmp/test_ds4_%d.gguf", (int)getpid());
    struct { const char *drop, *ratios, *want; } cases[] = {
        {"blk.1.indexer.proj.weight", NULL, "blk.1.indexer.proj.weight"},
        {"blk.0.ffn_gate_tid2eid.weight", NULL, "blk.0.ffn_gate_tid2eid.weight"},
        {"output_hc_fn.weight", NULL, "output_hc_fn.weight"},
        {NULL, "0,4,64,4", "compress ratio 64"},
        {NULL, "0,4,4,4", "blk.2.attn_compressor_ape.weight"}, /* shapes follow the ratios */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(write_variant(src, path, cases[i].drop, cases[i].ratios) == 0, "write: %s", mr_last_error());
        mr_model_params p;
        mr_model_params_default(&p);
        p.n_threads = 1;
        mr_model *m = mr_model_load(path, &p);
        CHECK(!m && strstr(mr_last_error(), cases[i].want), "case %zu: expected an error naming '%s', got '%s'", i,
              cases[i].want, m ? "(loaded)" : mr_last_error());
        mr_model_free(m);
    }
    remove(path);
}

int main(void) {
    RUN(test_tiny_deepseek4);
    RUN(test_tiny_deepseek4_iq3s_mxfp4);
    RUN(test_tiny_deepseek4_iq2xxs_q2k);
    RUN(test_tiny_deepseek4_idx);
    RUN(test_split_invariance);
    RUN(test_official);
    RUN(test_chat_template);
    RUN(test_loader_errors);
    return t_finish();
}
