/* Tokenizer against the reference: every case of ../shared/vocab/ NAME.inp and .out (no BOS, special
 * tokens not parsed), the prompts of the golden runs, detokenization round trips, special tokens. */
#include "test.h"
#include "moerun.h"

#include <limits.h>
#include <stdint.h>

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
static void vocab_file(const char *name) {
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
    int n_case = 0, n_pass = 0;
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
    printf("# vocab %-28s %d/%d cases\n", name, n_pass, n_case);
    CHECK(n_case > 0 && n_pass == n_case, "%s: %d of %d cases match", name, n_pass, n_case);
    free(inp); free(out);
    mr_tokenizer_free(t);
}

static void test_vocab_llama_spm(void) { vocab_file("llama-spm"); }
static void test_vocab_phi_3(void) { vocab_file("phi-3"); }
static void test_vocab_gpt_2(void) { vocab_file("gpt-2"); }
static void test_vocab_deepseek_llm(void) { vocab_file("deepseek-llm"); }
static void test_vocab_deepseek_coder(void) { vocab_file("deepseek-coder"); }
static void test_vocab_falcon(void) { vocab_file("falcon"); }
static void test_vocab_starcoder(void) { vocab_file("starcoder"); }
static void test_vocab_refact(void) { vocab_file("refact"); }
static void test_vocab_mpt(void) { vocab_file("mpt"); }
static void test_vocab_deepseek_v3(void) { vocab_file("deepseek-v3-on-deepseek-llm"); }
static void test_vocab_llama_bpe(void) { vocab_file("llama-bpe-on-gpt-2"); }
static void test_vocab_qwen2(void) { vocab_file("qwen2-on-gpt-2"); }

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
    return t_finish();
}
