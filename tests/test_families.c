/* Golden logits of tiny random-weight models: synthesized here from a fixed seed (moerun synth is
 * deterministic; the recipe's FNV-1a hash of the file guards that), evaluated as one batch (prefill)
 * and one token at a time (decode), and compared by the tolerance classes of ../shared/README.md with
 * the logits two references computed on the same files, each directory produced as its README says:
 * tests/golden/families/ (the llama.cpp fork; the issue-16 families) and tests/golden/mainline/
 * (mainline llama.cpp; every family but deepseek4). A model in both manifests is evaluated once.
 * Also: paging the routed experts through the smallest legal RAM budget gives the same bits as
 * reading them from the mmap. */
#include "moerun_tools.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "test.h"

#include <stdint.h>
#include <unistd.h>

#define FAM_DIR "tests/golden/families/"
#define MAIN_DIR "tests/golden/mainline/"

typedef struct {
    char name[64], shape[64], mix[32], tokens[64], cls[32];
    unsigned long long seed, hash;
    const char *dir;
} fam_entry;

static int read_manifest(const char *dir, fam_entry *e, int max) {
    char path[256];
    snprintf(path, sizeof path, "%smanifest.tsv", dir);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%63s %63s %31s %llu %63s %31s %llx", e[n].name, e[n].shape, e[n].mix, &e[n].seed, e[n].tokens,
                   e[n].cls, &e[n].hash) == 7)
            e[n++].dir = dir;
    }
    fclose(f);
    return n;
}

static unsigned long long fnv1a_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned long long h = 0xcbf29ce484222325ull;
    unsigned char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        for (size_t i = 0; i < k; i++) h = (h ^ buf[i]) * 0x100000001b3ull;
    fclose(f);
    return h;
}

static int32_t *read_ids(const char *path, int *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    int cap = 1024, k = 0;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)cap);
    long x;
    while (v && k < cap && fscanf(f, " %ld ,", &x) == 1) v[k++] = (int32_t)x;
    fclose(f);
    *n = k;
    return v;
}

/* logits [n][V] of ids as one batch or one at a time */
static float *eval_ids(mr_model *m, const int32_t *ids, int n, int decode) {
    const int V = mr_model_n_vocab(m);
    float *lg = malloc(sizeof(float) * (size_t)n * (size_t)V);
    mr_session *s = mr_session_new(m, n);
    int rc = !lg || !s;
    if (decode) { for (int i = 0; i < n && !rc; i++) rc = mr_session_eval(s, ids + i, 1, lg + (size_t)i * V, 0); }
    else if (!rc) rc = mr_session_eval(s, ids, n, lg, 1);
    mr_session_free(s);
    if (rc) { free(lg); return NULL; }
    return lg;
}

static void check_against(const fam_entry *e, const char *path, const float *lg, int n, int V) {
    char why[512], rel[256];
    snprintf(rel, sizeof rel, "%s%.63s.%.16s.lgts", e->dir, e->name, path);
    int nr, nv;
    int32_t *pos;
    float *ref;
    if (mr_lgts_read(rel, &nr, &nv, &pos, &ref)) { printf("FAIL %s.%s: %s\n", e->name, path, mr_last_error()); t_failed++; return; }
    float *sel = malloc(sizeof(float) * (size_t)nr * (size_t)nv);
    int ok = sel && nv == V;
    for (int r = 0; ok && r < nr; r++) {
        if (pos[r] < 0 || pos[r] >= n) ok = 0;
        else memcpy(sel + (size_t)r * nv, lg + (size_t)pos[r] * V, sizeof(float) * (size_t)nv);
    }
    mr_logits_cmp c;
    int rc = ok ? mr_logits_compare(ref, sel, nr, nv, &c) : -1;
    if (rc == 0) rc = mr_logits_check_class(e->cls, &c, why, sizeof why);
    else { snprintf(why, sizeof why, "golden %s does not fit (n_vocab %d vs %d, or positions)", rel, nv, V); rc = 0; }
    if (rc == 1) { printf("ok %s%s.%s (%s) [%s] %s\n", e->dir, e->name, path, e->shape, e->cls, why); t_passed++; }
    else { printf("FAIL %s%s.%s (%s) [%s]: %s\n", e->dir, e->name, path, e->shape, e->cls, why); t_failed++; }
    free(sel); free(pos); free(ref);
}

/* the token files of two entries hold the same bytes (each directory has its own copy) */
static int same_file_text(const fam_entry *a, const fam_entry *b) {
    char pa[256], pb[256];
    snprintf(pa, sizeof pa, "%s%.63s", a->dir, a->tokens);
    snprintf(pb, sizeof pb, "%s%.63s", b->dir, b->tokens);
    return fnv1a_file(pa) == fnv1a_file(pb) && fnv1a_file(pa) != 0;
}

/* e[0..n_e-1]: the same model (shape, mix, seed, hash) in one or more golden directories */
static void run_entry(const fam_entry *e, int n_e, const char *tmpdir) {
    char model[512], tok[256];
    snprintf(model, sizeof model, "%.200s/%.63s.gguf", tmpdir, e->name);
    snprintf(tok, sizeof tok, "%s%.63s", e->dir, e->tokens);
    mr_synth_params sp = {.shape = e->shape, .mix = e->mix, .seed = e->seed};
    if (mr_synth(model, &sp)) { printf("FAIL %s: synth: %s\n", e->name, mr_last_error()); t_failed++; return; }
    unsigned long long h = fnv1a_file(model);
    if (h != e->hash) {
        printf("FAIL %s: the synthesized file's hash is %016llx, the goldens were made from %016llx: moerun synth "
               "changed; regenerate the goldens (%sREADME.md)\n", e->name, h, e->hash, e->dir);
        t_failed++;
        unlink(model);
        return;
    }
    int n = 0;
    int32_t *ids = read_ids(tok, &n);
    mr_model_params mp;
    mr_model_params_default(&mp);
    mr_model *m = ids ? mr_model_load(model, &mp) : NULL;
    if (!m) { printf("FAIL %s: %s\n", e->name, ids ? mr_last_error() : "cannot read the token file"); t_failed++; free(ids); unlink(model); return; }
    const int V = mr_model_n_vocab(m);
    float *lg[2] = {eval_ids(m, ids, n, 0), eval_ids(m, ids, n, 1)};
    for (int d = 0; d < 2; d++) {
        if (!lg[d]) { printf("FAIL %s.%s: eval: %s\n", e->name, d ? "decode" : "prefill", mr_last_error()); t_failed++; }
        else for (int k = 0; k < n_e; k++) check_against(&e[k], d ? "decode" : "prefill", lg[d], n, V);
    }
    /* paged through the smallest budget == resident, bit for bit, both paths */
    mr_pager_model_info pi;
    if (mr_pager_model_sizes(model, &pi) == 0 && pi.min_budget > 0 && lg[0] && lg[1]) {
        mp.ram_budget = pi.min_budget;
        mr_model *mpg = mr_model_load(model, &mp);
        float *pg[2] = {mpg ? eval_ids(mpg, ids, n, 0) : NULL, mpg ? eval_ids(mpg, ids, n, 1) : NULL};
        mr_pager_stats ps;
        int same = mpg && mr_model_pager_stats(mpg, &ps) == 0 && ps.paging && ps.misses > 0 && pg[0] && pg[1] && !memcmp(pg[0], lg[0], sizeof(float) * (size_t)n * V) &&
                   !memcmp(pg[1], lg[1], sizeof(float) * (size_t)n * V);
        if (same) { printf("ok %s.paged (%s, budget %llu bytes, %llu expert reads) == resident\n", e->name, e->shape, (unsigned long long)pi.min_budget, (unsigned long long)ps.misses); t_passed++; }
        else { printf("FAIL %s.paged: %s\n", e->name, mpg ? "logits differ from the resident run" : mr_last_error()); t_failed++; }
        free(pg[0]); free(pg[1]);
        mr_model_free(mpg);
    }
    free(lg[0]); free(lg[1]); free(ids);
    mr_model_free(m);
    unlink(model);
}

/* The conversation system / user / assistant / user rendered with the assistant prefix, as the
 * reference's llama_chat_apply_template renders it for these template names (its output, copied). */
static void test_chat_templates(void) {
    static const struct { const char *name, *want; } cases[] = {
        {"chatglm4", "[gMASK]<sop><|system|>\nYou are terse.<|user|>\nHi there<|assistant|>\nHello.<|user|>\n2+2?<|assistant|>\n"},
        {"gpt-oss", "<|start|>system<|message|>You are terse.<|end|><|start|>user<|message|>Hi there<|end|><|start|>assistant"
                    "<|message|>Hello.<|return|><|start|>user<|message|>2+2?<|end|><|start|>assistant"},
        {"kimi-k2", "<|im_system|>system<|im_middle|>You are terse.<|im_end|><|im_user|>user<|im_middle|>Hi there<|im_end|>"
                    "<|im_assistant|>assistant<|im_middle|>Hello.<|im_end|><|im_user|>user<|im_middle|>2+2?<|im_end|>"
                    "<|im_assistant|>assistant<|im_middle|>"},
    };
    const mr_chat_msg msgs[] = {{.role = "system", .content = "You are terse."}, {.role = "user", .content = "Hi there"},
                                {.role = "assistant", .content = "Hello."}, {.role = "user", .content = "2+2?"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[1024];
        int n = mr_chat_render(NULL, cases[i].name, msgs, 4, 1, out, sizeof out);
        CHECK(n == (int)strlen(cases[i].want) && !strcmp(out, cases[i].want), "%s: got '%s'", cases[i].name, n >= 0 ? out : mr_last_error());
    }
}

/* src re-written to dst with one more F32 tensor (ones) and/or one more f32 key */
static int write_with(const char *src, const char *dst, const char *tensor, int64_t n, const char *key, float val) {
    mr_gguf *g = mr_gguf_open(src);
    if (!g) return -1;
    mr_gguf_writer *w = mr_gguf_writer_new();
    float *ones = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    int rc = !w || !ones;
    for (int64_t i = 0; !rc && i < n; i++) ones[i] = 1.0f;
    for (uint64_t i = 0; !rc && i < mr_gguf_n_kv(g); i++) rc = mr_gguf_writer_copy_kv(w, mr_gguf_kv_at(g, i));
    if (!rc && key) rc = mr_gguf_writer_set_f32(w, key, val);
    for (uint64_t i = 0; !rc && i < mr_gguf_n_tensors(g); i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
        rc = mr_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    if (!rc && tensor) rc = mr_gguf_writer_add_tensor(w, tensor, MR_TYPE_F32, 1, (const int64_t[]){n, 1, 1, 1}, ones);
    if (!rc) rc = mr_gguf_writer_write(w, dst, 1);
    mr_gguf_writer_free(w);
    mr_gguf_close(g);
    free(ones);
    return rc ? -1 : 0;
}

/* Files with weights or keys mainline uses and moerun does not implement are refused, naming them,
 * instead of being run without them: an optional FFN bias (llama), an NVFP4-style per-tensor
 * ".scale" (every arch in mainline), deepseek2's attention temperature (Mistral-Large-3). */
static void test_unimplemented_refused(void) {
    static const struct { const char *shape, *tensor, *key, *want; int64_t n; } cases[] = {
        {"llama-tiny", "blk.0.ffn_up.bias", NULL, "blk.0.ffn_up.bias", 512},
        {"qwen3moe-tiny", "blk.1.attn_q.scale", NULL, "blk.1.attn_q.scale", 1},
        {"deepseek2-tiny", NULL, "deepseek2.attention.temperature_scale", "temperature_scale", 0},
    };
    char src[64], dst[64];
    snprintf(src, sizeof src, "/tmp/mr-layout-%d.gguf", (int)getpid());
    snprintf(dst, sizeof dst, "/tmp/mr-layout-%d-x.gguf", (int)getpid());
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mr_synth_params sp = {.shape = cases[i].shape, .mix = "q8_0", .seed = 1};
        mr_model_params mp;
        mr_model_params_default(&mp);
        mr_model *m = mr_synth(src, &sp) ? NULL : mr_model_load(src, &mp);
        CHECK(m != NULL, "%s: the plain file: %s", cases[i].shape, mr_last_error());
        mr_model_free(m);
        CHECK(write_with(src, dst, cases[i].tensor, cases[i].n, cases[i].key, 0.1f) == 0, "write: %s", mr_last_error());
        m = mr_model_load(dst, &mp);
        CHECK(!m && strstr(mr_last_error(), cases[i].want), "%s + %s: expected an error naming it, got %s", cases[i].shape,
              cases[i].want, m ? "(loaded)" : mr_last_error());
        mr_model_free(m);
    }
    unlink(src);
    unlink(dst);
}

int main(void) {
    RUN(test_chat_templates);
    RUN(test_unimplemented_refused);
    static fam_entry e[64];
    int nf = read_manifest(FAM_DIR, e, 32), nm = nf > 0 ? read_manifest(MAIN_DIR, e + nf, 32) : 0;
    if (nf <= 0 || nm <= 0) { printf("FAIL manifest: cannot read %smanifest.tsv\n", nf <= 0 ? FAM_DIR : MAIN_DIR); return 1; }
    char tmpdir[] = "/tmp/mr-families-XXXXXX";
    if (!mkdtemp(tmpdir)) { printf("FAIL tmpdir\n"); return 1; }
    int done[64] = {0};
    for (int i = 0; i < nf + nm; i++) {
        if (done[i]) continue;
        /* the same model's entries side by side; their token files must hold the same ids */
        fam_entry same[4];
        int ns = 0;
        for (int j = i; j < nf + nm && ns < 4; j++)
            if (!done[j] && !strcmp(e[j].shape, e[i].shape) && !strcmp(e[j].mix, e[i].mix) && e[j].seed == e[i].seed &&
                e[j].hash == e[i].hash && same_file_text(&e[i], &e[j])) {
                same[ns++] = e[j];
                done[j] = 1;
            }
        run_entry(same, ns, tmpdir);
    }
    rmdir(tmpdir);
    return t_finish();
}
