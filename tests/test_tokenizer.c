/* Tokenizer against the reference: every case of ../shared/vocab/ NAME.inp and .out (no BOS, special
 * tokens not parsed), the prompts of the golden runs, detokenization round trips, special tokens. */
#include "test.h"
#include "moerun.h"
#include "gguf/gguf.h"

#include <limits.h>
#include <stdint.h>
#include <unistd.h>

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    fclose(f);
    if (b) { b[n] = 0; *len = (size_t)n; }
    return b;
}

static int tokenize_all(const mr_tokenizer *t, const char *s, size_t len, int add, int special, int32_t **ids) {
    int n = mr_tokenize(t, s, len, add, special, NULL, 0);
    if (n == INT_MIN) return n;
    if (n < 0) n = -n;
    *ids = malloc(sizeof **ids * (size_t)(n + 1));
    return mr_tokenize(t, s, len, add, special, *ids, n);
}

/* Cases are separated by "\n__ggml_vocab_test__\n"; .out has one line of " id id ..." per case. */
static void vocab_file(const char *name, int clean) {
    char p[256];
    size_t ilen, olen;
    snprintf(p, sizeof p, "vocab/ggml-vocab-%s.gguf", name);
    mr_tokenizer *t = mr_tokenizer_load(t_shared(p));
    CHECK(t, "%s: %s", p, mr_last_error());
    if (!t) return;
    snprintf(p, sizeof p, "vocab/ggml-vocab-%s.gguf.inp", name);
    char *inp = slurp(t_shared(p), &ilen);
    snprintf(p, sizeof p, "vocab/ggml-vocab-%s.gguf.out", name);
    char *out = slurp(t_shared(p), &olen);
    CHECK(inp && out, "cannot read the .inp/.out of %s", name);
    const char *sep = "\n__ggml_vocab_test__\n";
    size_t seplen = strlen(sep);
    int n_case = 0, n_pass = 0, n_rt_fail = 0;
    char *ip = inp, *op = out;
    while (inp && out && *ip) {
        char *e = strstr(ip, sep);
        if (!e) break;
        char *ol = op, *oe = strchr(op, '\n');
        if (!oe) { CHECK(0, "%s: .out has fewer lines than cases", name); break; }
        op = oe + 1;
        int32_t *ids = NULL;
        int n = tokenize_all(t, ip, (size_t)(e - ip), 0, 0, &ids);
        int32_t exp[4096];
        int ne = 0;
        for (char *q = ol; q < oe && ne < 4096;) {
            char *end;
            long v = strtol(q, &end, 10);
            if (end == q) break;
            exp[ne++] = (int32_t)v;
            q = end;
        }
        int ok = n == ne && (n == 0 || !memcmp(ids, exp, sizeof *ids * (size_t)n));
        n_case++;
        n_pass += ok;
        /* detokenize(tokenize(s)) == s, after the reference's space clean-up (" ?" -> "?" ...) for
         * the vocabularies that have it (none of these texts has " ' " or " 's"-like sequences) */
        char back[8192], want[8192];
        int nw = 0;
        for (const char *q = ip; q < e && nw < (int)sizeof want; q++) {
            if (clean && nw > 0 && want[nw - 1] == ' ' && (*q == '?' || *q == '!' || *q == '.' || *q == ',')) nw--;
            want[nw++] = *q;
        }
        int nb = mr_detokenize(t, ids, n, back, (int)sizeof back, 0, 0);
        int rt = nb == nw && !memcmp(back, want, (size_t)nb);
        if (!rt) {
            n_rt_fail++;
            if (getenv("VERBOSE_RT")) printf("    round trip %s case %d: '%.*s' -> '%.*s'\n", name, n_case, (int)(e - ip), ip, nb > 0 ? nb : 0, back);
        }
        if (!ok) {
            printf("    %s case %d '%.*s':\n      got ", name, n_case, (int)(e - ip) > 60 ? 60 : (int)(e - ip), ip);
            for (int i = 0; i < n; i++) printf(" %d", ids[i]);
            printf("\n      exp ");
            for (int i = 0; i < ne; i++) printf(" %d", exp[i]);
            printf("\n");
        }
        free(ids);
        ip = e + seplen;
    }
    printf("# vocab %-28s %d/%d cases, %d detokenize round-trip differences\n", name, n_pass, n_case, n_rt_fail);
    CHECK(n_case > 0 && n_pass == n_case, "%s: %d of %d cases match", name, n_pass, n_case);
    CHECK(n_rt_fail == 0, "%s: %d cases do not detokenize to their text", name, n_rt_fail);
    free(inp); free(out);
    mr_tokenizer_free(t);
}

static void test_vocab_llama_spm(void) { vocab_file("llama-spm", 0); }
static void test_vocab_phi_3(void) { vocab_file("phi-3", 0); }
static void test_vocab_gpt_2(void) { vocab_file("gpt-2", 1); }
static void test_vocab_deepseek_llm(void) { vocab_file("deepseek-llm", 0); }
static void test_vocab_deepseek_coder(void) { vocab_file("deepseek-coder", 0); }
static void test_vocab_falcon(void) { vocab_file("falcon", 1); }
static void test_vocab_starcoder(void) { vocab_file("starcoder", 1); }
static void test_vocab_refact(void) { vocab_file("refact", 1); }
static void test_vocab_mpt(void) { vocab_file("mpt", 1); }
static void test_vocab_deepseek_v3(void) { vocab_file("deepseek-v3-on-deepseek-llm", 0); }
static void test_vocab_llama_bpe(void) { vocab_file("llama-bpe-on-gpt-2", 1); }
static void test_vocab_qwen2(void) { vocab_file("qwen2-on-gpt-2", 0); }


/* The prompts of the golden generation runs, with BOS, must tokenize to the reference's ids. */
static void golden_prompt(const char *model, const char *prompt, const char *ids_file) {
    mr_tokenizer *t = mr_tokenizer_load(t_shared(model));
    CHECK(t, "%s: %s", model, mr_last_error());
    if (!t) return;
    size_t len;
    char *txt = slurp(t_shared(ids_file), &len);
    CHECK(txt, "cannot read %s", ids_file);
    int32_t exp[256];
    int ne = 0;
    for (char *q = txt; txt && *q && ne < 256;) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q) { q++; continue; }
        exp[ne++] = (int32_t)v;
        q = end;
    }
    int32_t *ids = NULL;
    int n = tokenize_all(t, prompt, strlen(prompt), 1, 1, &ids);
    CHECK(n == ne && ne > 0 && !memcmp(ids, exp, sizeof *ids * (size_t)ne), "'%s' on %s: %d ids (first %d), expected %d",
          prompt, model, n, n > 0 ? ids[0] : -1, ne);
    /* and back: without the BOS the SPM prefix space is dropped (with it, the reference keeps it) */
    char buf[256];
    int nb = n > 0 ? mr_detokenize(t, ids + 1, n - 1, buf, (int)sizeof buf, 0, 0) : -1;
    CHECK(nb == (int)strlen(prompt) && !memcmp(buf, prompt, (size_t)nb), "detokenize gave '%.*s'", nb > 0 ? nb : 0, buf);
    free(ids); free(txt);
    mr_tokenizer_free(t);
}

static void test_golden_prompts(void) {
    golden_prompt("models/aidreams260K.gguf", "I dreamed", "golden/tokens-aidreams.txt");
    golden_prompt("models/kjv-moe-q8_0.gguf", "And God said", "golden/tokens-kjv-prompt.txt");
}

/* The perplexity texts: the first 64 ids of kjv-valid.txt are tokens-kjv64.txt, and the token counts
 * give the reference's chunk counts (224 chunks of 256, 110 chunks of 128; golden/ppl/README.md). */
static int load_ids(const char *rel, int32_t *ids, int max) {
    size_t len;
    char *txt = slurp(t_shared(rel), &len);
    int n = 0;
    for (char *q = txt; txt && *q && n < max;) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q) { q++; continue; }
        ids[n++] = (int32_t)v;
        q = end;
    }
    free(txt);
    return n;
}

static void test_golden_ppl_texts(void) {
    mr_tokenizer *t = mr_tokenizer_load(t_shared("models/kjv-moe-q8_0.gguf"));
    size_t len;
    char *txt = slurp(t_shared("golden/ppl/kjv-valid.txt"), &len);
    CHECK(t && txt, "kjv: %s", mr_last_error());
    if (t && txt) {
        int32_t *ids = NULL, exp[64];
        int n = tokenize_all(t, txt, len, 1, 0, &ids);
        int ne = load_ids("golden/tokens-kjv64.txt", exp, 64);
        CHECK(ne == 64 && n >= 64 && !memcmp(ids, exp, sizeof exp), "first 64 ids of kjv-valid.txt differ");
        CHECK(n / 256 == 224, "kjv-valid.txt: %d tokens, %d chunks of 256", n, n / 256);
        free(ids);
    }
    free(txt);
    mr_tokenizer_free(t);
    t = mr_tokenizer_load(t_shared("models/aidreams260K.gguf"));
    txt = slurp(t_shared("golden/ppl/gpl3-head.txt"), &len);
    CHECK(t && txt, "aidreams: %s", mr_last_error());
    if (t && txt) {
        int32_t *ids = NULL;
        int n = tokenize_all(t, txt, len, 1, 0, &ids);
        CHECK(n / 128 == 110, "gpl3-head.txt: %d tokens, %d chunks of 128", n, n / 128);
        free(ids);
    }
    free(txt);
    mr_tokenizer_free(t);
}

static int ids_are(const mr_tokenizer *t, const char *s, int add, int special, const int32_t *exp, int ne) {
    int32_t *ids = NULL;
    int n = tokenize_all(t, s, strlen(s), add, special, &ids);
    int ok = n == ne && !memcmp(ids, exp, sizeof *ids * (size_t)ne);
    if (!ok) {
        printf("    '%s' ->", s);
        for (int i = 0; i < n; i++) printf(" %d", ids[i]);
        printf("\n");
    }
    free(ids);
    return ok;
}

static void test_special_tokens(void) {
    mr_tokenizer *t = mr_tokenizer_load(t_shared("vocab/ggml-vocab-gpt-2.gguf"));
    CHECK(t, "%s", mr_last_error());
    if (!t) return;
    /* <|endoftext|> is a control token: split out only with parse_special */
    static const int32_t a[] = { 15496, 50256, 6894 };
    static const int32_t b[] = { 15496, 27, 91, 437, 1659, 5239, 91, 29, 6894 };
    CHECK(ids_are(t, "Hello<|endoftext|>world", 0, 1, a, 3), "parse_special");
    CHECK(ids_are(t, "Hello<|endoftext|>world", 0, 0, b, 9), "no parse_special");
    CHECK(mr_tokenizer_eos(t) == 50256 && mr_tokenizer_is_eog(t, 50256), "eos %d", mr_tokenizer_eos(t));
    CHECK(!mr_tokenizer_adds_bos(t), "gpt-2 adds no BOS");
    CHECK(mr_token_lookup(t, "<|endoftext|>", 13) == 50256, "lookup");
    char buf[32];
    CHECK(mr_token_to_piece(t, 50256, buf, sizeof buf, 0) == 0, "control token hidden without special");
    CHECK(mr_token_to_piece(t, 50256, buf, sizeof buf, 1) == 13 && !memcmp(buf, "<|endoftext|>", 13), "control piece");
    CHECK(mr_token_to_piece(t, 50256, buf, 4, 1) == -13, "too small buffer -> -needed");
    CHECK(mr_token_to_piece(t, 995, buf, sizeof buf, 0) == 6 && !memcmp(buf, " world", 6), "byte-level piece");
    CHECK(mr_token_to_piece(t, 1 << 20, buf, sizeof buf, 0) == INT_MIN, "bad id");
    int32_t two[2];
    CHECK(mr_tokenize(t, "Hello world again", 17, 0, 0, two, 2) == -3, "too small output -> -needed");
    CHECK(mr_tokenize(t, "", 0, 1, 1, two, 2) == 0, "empty text, no BOS for gpt-2");
    mr_tokenizer_free(t);

    t = mr_tokenizer_load(t_shared("vocab/ggml-vocab-llama-spm.gguf"));
    CHECK(t, "%s", mr_last_error());
    if (!t) return;
    /* SPM: a space is prefixed at the start and after each special token */
    static const int32_t c[] = { 1, 1, 6324, 2, 29871, 921 };
    CHECK(ids_are(t, "<s>Hi</s> x", 1, 1, c, 6), "spm parse_special");
    static const int32_t d[] = { 1 };
    CHECK(ids_are(t, "", 1, 1, d, 1), "empty text is just BOS");
    CHECK(mr_tokenizer_bos(t) == 1 && mr_tokenizer_eos(t) == 2 && mr_tokenizer_adds_bos(t), "spm bos/eos");
    /* byte fallback: a character missing from the vocabulary comes out as <0xNN> tokens */
    int32_t *ids = NULL;
    int n = tokenize_all(t, "\xf0\x9f\xa6\x99", 4, 0, 0, &ids);
    int bytes = 0;
    for (int i = 0; i < n; i++) {
        const char *tx = mr_token_text(t, ids[i]);
        bytes += tx && !strncmp(tx, "<0x", 3);
    }
    CHECK(n == 5 && bytes == 4, "llama emoji: %d tokens, %d byte tokens", n, bytes);
    char buf2[16];
    int nb = mr_detokenize(t, ids, n, buf2, sizeof buf2, 0, 0);
    CHECK(nb == 4 && !memcmp(buf2, "\xf0\x9f\xa6\x99", 4), "bytes detokenize (%d)", nb);
    free(ids);
    mr_tokenizer_free(t);
}

/* Tokenizer metadata written with the GGUF writer: a tiny valid BPE vocabulary, then broken ones
 * (wrong types, short arrays, unknown model or pre-tokenizer) that must fail cleanly. */
enum { BAD_NONE, BAD_NO_TOKENS, BAD_TOKENS_TYPE, BAD_SHORT_SCORES, BAD_SCORE_TYPE, BAD_TYPE_TYPE, BAD_NO_MERGES,
       BAD_MODEL, BAD_PRE, BAD_EMPTY_VOCAB };

static int write_vocab(const char *path, int bad) {
    mr_gguf_writer *w = mr_gguf_writer_new();
    /* the GPT-2 byte symbols for 'a', 'b', ' ' (U+0120) and merges to "ab", "Ġab" */
    const char *toks[] = { "a", "b", "\xc4\xa0", "ab", ("\xc4\xa0" "ab"), "<|end|>", "" };
    const char *merges[] = { "a b", "\xc4\xa0 ab" };
    float scores[7] = { 0 };
    int32_t types[7] = { 1, 1, 1, 1, 1, 3, 1 };
    mr_gguf_writer_set_str(w, "tokenizer.ggml.model", bad == BAD_MODEL ? "wordpiece9" : "gpt2");
    mr_gguf_writer_set_str(w, "tokenizer.ggml.pre", bad == BAD_PRE ? "no-such-pre" : "gpt-2");
    if (bad == BAD_TOKENS_TYPE) mr_gguf_writer_set_kv(w, "tokenizer.ggml.tokens", MR_GGUF_ARRAY, MR_GGUF_F32, 7, scores);
    else if (bad == BAD_EMPTY_VOCAB) mr_gguf_writer_set_kv(w, "tokenizer.ggml.tokens", MR_GGUF_ARRAY, MR_GGUF_STRING, 0, toks);
    else if (bad != BAD_NO_TOKENS) mr_gguf_writer_set_kv(w, "tokenizer.ggml.tokens", MR_GGUF_ARRAY, MR_GGUF_STRING, 7, toks);
    if (bad == BAD_SCORE_TYPE) mr_gguf_writer_set_kv(w, "tokenizer.ggml.scores", MR_GGUF_ARRAY, MR_GGUF_I32, 7, types);
    else mr_gguf_writer_set_kv(w, "tokenizer.ggml.scores", MR_GGUF_ARRAY, MR_GGUF_F32, bad == BAD_SHORT_SCORES ? 3 : 7, scores);
    if (bad == BAD_TYPE_TYPE) mr_gguf_writer_set_kv(w, "tokenizer.ggml.token_type", MR_GGUF_ARRAY, MR_GGUF_F32, 7, scores);
    else mr_gguf_writer_set_kv(w, "tokenizer.ggml.token_type", MR_GGUF_ARRAY, MR_GGUF_I32, 7, types);
    if (bad != BAD_NO_MERGES) mr_gguf_writer_set_kv(w, "tokenizer.ggml.merges", MR_GGUF_ARRAY, MR_GGUF_STRING, 2, merges);
    mr_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 5);
    mr_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1000); /* out of range: keeps the default */
    int rc = mr_gguf_writer_write(w, path, 1);
    mr_gguf_writer_free(w);
    return rc;
}

static void test_synthetic_vocab(void) {
    char path[] = "/tmp/mr_tok_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    char gg[64];
    snprintf(gg, sizeof gg, "%s.gguf", path);
    CHECK(write_vocab(gg, BAD_NONE) == 0, "write: %s", mr_last_error());
    mr_tokenizer *t = mr_tokenizer_load(gg);
    CHECK(t, "load: %s", mr_last_error());
    if (t) {
        static const int32_t e[] = { 3, 4, 0, 5 }; /* "ab", " ab", "a", <|end|> */
        CHECK(ids_are(t, "ab aba<|end|>", 0, 1, e, 4), "merges");
        CHECK(mr_tokenizer_eos(t) == 5 && mr_tokenizer_is_eog(t, 5) && mr_tokenizer_is_control(t, 5), "eos");
        CHECK(mr_tokenizer_bos(t) == -1 && mr_tokenizer_n_vocab(t) == 7, "bad bos id and default 11 beyond the vocabulary: none");
        CHECK(!strcmp(mr_token_text(t, 6), "[EMPTY_6]"), "empty token renamed: %s", mr_token_text(t, 6));
        /* 'c' has no token and no byte token: dropped, as the reference does */
        static const int32_t f[] = { 0 };
        CHECK(ids_are(t, "ac", 0, 0, f, 1), "unknown byte dropped");
        mr_tokenizer_free(t);
    }
    static const struct { int bad; const char *msg; } cases[] = {
        { BAD_NO_TOKENS, "missing tokenizer.ggml.tokens" }, { BAD_TOKENS_TYPE, "not an array of strings" },
        { BAD_SHORT_SCORES, "3 scores for 7 tokens" }, { BAD_SCORE_TYPE, "scores" },
        { BAD_TYPE_TYPE, "token_type" }, { BAD_NO_MERGES, "missing tokenizer.ggml.merges" },
        { BAD_MODEL, "unsupported tokenizer model 'wordpiece9'" }, { BAD_PRE, "unknown pre-tokenizer type 'no-such-pre'" },
        { BAD_EMPTY_VOCAB, "vocabulary size 0" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(write_vocab(gg, cases[i].bad) == 0, "write: %s", mr_last_error());
        mr_tokenizer *b = mr_tokenizer_load(gg);
        CHECK(!b && strstr(mr_last_error(), cases[i].msg) && strstr(mr_last_error(), gg),
              "case %d: loaded=%d error '%s'", cases[i].bad, b != NULL, mr_last_error());
        mr_tokenizer_free(b);
    }
    unlink(gg);
    unlink(path);
}

/* Phi-3 (general.name "Phi3"): special tokens eat the whitespace after them (the reference's RSTRIP) */
static void test_phi3_rstrip(void) {
    mr_tokenizer *t = mr_tokenizer_load(t_shared("vocab/ggml-vocab-phi-3.gguf"));
    CHECK(t, "%s", mr_last_error());
    if (!t) return;
    static const int32_t a[] = { 1, 32010, 6324, 32007 };
    CHECK(ids_are(t, "<|user|>  Hi<|end|>", 1, 1, a, 4), "rstrip after <|user|>");
    CHECK(mr_tokenizer_eot(t) == 32007 && mr_tokenizer_is_eog(t, 32007) && mr_tokenizer_is_eog(t, 32000), "eot / eog");
    mr_tokenizer_free(t);
}

static void test_load_errors(void) {
    CHECK(!mr_tokenizer_load("/nonexistent.gguf"), "missing file loads");
    CHECK(!mr_tokenizer_load(t_shared("golden/tokens-32.txt")), "not a gguf loads");
}

/* Random texts: tokenize never fails and gives valid ids; where the vocabulary can represent every
 * byte and does no clean-up, detokenize gives valid UTF-8 text back. */
static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return (uint32_t)rng_state; }

static size_t random_text(char *buf, size_t cap, int valid_utf8) {
    static const char *const bits[] = { " ", "  ", "\n", "\t", "\r\n", "'s", "'LL", "<s>", "</s>", "<|endoftext|>",
        "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\xa8", "~", "123", "4567", "\xd9\xa3", "\xf0\x91\xbd\x92", "...", "!?",
        "\xe4\xbd\xa0", "\xed\x95\x9c", "\xf0\x9f\xa6\x99", "\xcc\x81", "a", "Z", "\xc3\xa9", "\xe2\x96\x81", "$", "\x01" };
    size_t n = 0, parts = rnd() % 24;
    for (size_t k = 0; k < parts && n + 8 < cap; k++) {
        uint32_t r = rnd() % 10;
        if (r < 6) {
            const char *b = bits[rnd() % (sizeof bits / sizeof bits[0])];
            size_t l = strlen(b);
            if (n + l < cap) { memcpy(buf + n, b, l); n += l; }
        } else if (r < 9 || valid_utf8) {
            buf[n++] = (char)(0x20 + rnd() % 95);
        } else {
            buf[n++] = (char)(0x80 + rnd() % 128); /* a stray byte: invalid UTF-8 */
        }
    }
    return n;
}

static void fuzz_vocab(const char *name, int exact, int valid_utf8) {
    char p[256];
    snprintf(p, sizeof p, "vocab/ggml-vocab-%s.gguf", name);
    mr_tokenizer *t = mr_tokenizer_load(t_shared(p));
    CHECK(t, "%s", mr_last_error());
    if (!t) return;
    int bad = 0, bad_rt = 0;
    for (int it = 0; it < 300; it++) {
        char txt[512], back[4096];
        size_t n = random_text(txt, sizeof txt, valid_utf8);
        int32_t *ids = NULL;
        int k = tokenize_all(t, txt, n, it & 1, (it >> 1) & 1, &ids);
        if (k < 0) { bad++; free(ids); continue; }
        for (int i = 0; i < k; i++) if (ids[i] < 0 || ids[i] >= mr_tokenizer_n_vocab(t)) bad++;
        int nb = mr_detokenize(t, ids, k, back, (int)sizeof back, 1, 0);
        if (nb < 0) bad++;
        if (exact && !(it & 3)) { /* no BOS, no special parsing */
            /* SPM renders its space symbol U+2581 as a space, also where the text had one */
            char want[512];
            size_t nw = 0;
            for (size_t i = 0; i < n; i++) {
                if (!strcmp(mr_tokenizer_model(t), "llama") && i + 2 < n && !memcmp(txt + i, "\xe2\x96\x81", 3)) {
                    want[nw++] = ' ';
                    i += 2;
                } else {
                    want[nw++] = txt[i];
                }
            }
            int ok = nb == (int)nw && !memcmp(back, want, nw);
            if (!ok && bad_rt++ < 3) printf("    %s: '%.*s' came back as '%.*s'\n", name, (int)n, txt, nb > 0 ? nb : 0, back);
        }
        free(ids);
    }
    CHECK(!bad, "%s: %d failures or bad ids", name, bad);
    CHECK(!bad_rt, "%s: %d texts do not come back", name, bad_rt);
    mr_tokenizer_free(t);
}

static void test_random_texts(void) {
    fuzz_vocab("llama-spm", 1, 1);
    /* stray bytes: a lead byte swallows the next bytes as in the reference (even of a U+2581), so
     * only validity is checked */
    fuzz_vocab("phi-3", 0, 0);
    fuzz_vocab("gpt-2", 0, 0);
    fuzz_vocab("deepseek-llm", 1, 1);
    fuzz_vocab("deepseek-v3-on-deepseek-llm", 1, 1);
    fuzz_vocab("qwen2-on-gpt-2", 1, 1);
    fuzz_vocab("llama-bpe-on-gpt-2", 0, 0);
    fuzz_vocab("deepseek-coder", 1, 1);
}

int main(void) {
    RUN(test_vocab_llama_spm);
    RUN(test_vocab_phi_3);
    RUN(test_vocab_gpt_2);
    RUN(test_vocab_deepseek_llm);
    RUN(test_vocab_deepseek_coder);
    RUN(test_vocab_falcon);
    RUN(test_vocab_starcoder);
    RUN(test_vocab_refact);
    RUN(test_vocab_mpt);
    RUN(test_vocab_deepseek_v3);
    RUN(test_vocab_llama_bpe);
    RUN(test_vocab_qwen2);
    RUN(test_golden_prompts);
    RUN(test_golden_ppl_texts);
    RUN(test_special_tokens);
    RUN(test_phi3_rstrip);
    RUN(test_load_errors);
    RUN(test_synthetic_vocab);
    RUN(test_random_texts);
    return t_finish();
}
