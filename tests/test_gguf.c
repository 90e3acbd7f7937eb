/* GGUF reader on the shared models and vocabularies: every file opens, metadata and tensors look
 * right, typed getters report wrong types. */
#include "test.h"
#include "base/base.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <dirent.h>
#include <math.h>
#include <stdint.h>

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* Opens every .gguf in a shared directory; checks the structural invariants the loader relies on. */
static int check_dir(const char *rel, int want_tensors) {
    const char *dir = t_shared(rel);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!ends_with(e->d_name, ".gguf")) continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        mr_gguf *g = mr_gguf_open(path);
        CHECK(g != NULL, "%s: %s", path, mr_get_error());
        if (!g) continue;
        n++;
        const char *arch = NULL;
        CHECK(mr_gguf_get_str(g, "general.architecture", &arch) == 0, "%s: %s", path, mr_get_error());
        CHECK(mr_gguf_version(g) == 2 || mr_gguf_version(g) == 3, "%s: version", path);
        CHECK(mr_gguf_n_shards(g) == 1, "%s", path);
        uint64_t size = mr_gguf_shard_size(g, 0), sum = 0;
        CHECK(!want_tensors || mr_gguf_n_tensors(g) > 0, "%s: no tensors", path);
        for (uint64_t i = 0; i < mr_gguf_n_tensors(g); i++) {
            const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
            CHECK(mr_gguf_find_tensor(g, t->name) == t, "%s: lookup %s", path, t->name);
            CHECK(t->file_offset + t->nbytes <= size, "%s: %s past end", path, t->name);
            CHECK(t->file_offset % mr_gguf_alignment(g) == 0, "%s: %s misaligned", path, t->name);
            int64_t nel = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
            CHECK(t->nbytes == mr_row_size(t->type, t->ne[0]) * (uint64_t)(nel / t->ne[0]), "%s: %s nbytes", path, t->name);
            sum += t->nbytes;
        }
        CHECK(sum <= size, "%s: tensor bytes exceed the file", path);
        for (uint64_t i = 0; i < mr_gguf_n_kv(g); i++) {
            const mr_gguf_kv *kv = mr_gguf_kv_at(g, i);
            CHECK(mr_gguf_find_kv(g, kv->key) == kv, "%s: lookup %s", path, kv->key);
        }
        const void *toks;
        uint64_t nt;
        CHECK(mr_gguf_get_arr(g, "tokenizer.ggml.tokens", MR_GGUF_STRING, &toks, &nt) == 0 && nt > 0, "%s: tokens", path);
        mr_gguf_close(g);
    }
    closedir(d);
    return n;
}

static void test_open_shared_models(void) { CHECK(check_dir("models", 1) >= 17, "too few models"); }
static void test_open_shared_vocab(void) { CHECK(check_dir("vocab", 0) >= 10, "too few vocab files"); }

static void test_qwen3moe_values(void) {
    mr_gguf *g = mr_gguf_open(t_shared("models/tiny-qwen3moe.gguf"));
    CHECK(g != NULL, "%s", mr_get_error());
    if (!g) return;
    const char *arch;
    uint32_t u;
    CHECK(mr_gguf_get_str(g, "general.architecture", &arch) == 0 && !strcmp(arch, "qwen3moe"), "arch");
    CHECK(mr_gguf_get_u32(g, "qwen3moe.embedding_length", &u) == 0 && u == 256, "dim %u", u);
    CHECK(mr_gguf_get_u32(g, "qwen3moe.expert_count", &u) == 0 && u == 8, "experts %u", u);
    CHECK(mr_gguf_get_u32(g, "qwen3moe.expert_used_count", &u) == 0 && u == 2, "top-k %u", u);
    float eps;
    CHECK(mr_gguf_get_f32(g, "qwen3moe.attention.layer_norm_rms_epsilon", &eps) == 0 && eps > 0 && eps < 1e-3f, "eps");
    /* wrong types and missing keys give errors naming the key */
    CHECK(mr_gguf_get_u32(g, "general.architecture", &u) == -1 && strstr(mr_get_error(), "general.architecture") &&
              strstr(mr_get_error(), "string"), "wrong type: %s", mr_get_error());
    CHECK(mr_gguf_get_str(g, "no.such.key", &arch) == -1 && strstr(mr_get_error(), "no.such.key"), "missing");
    CHECK(mr_gguf_find_kv(g, "no.such.key") == NULL, "find missing");
    const mr_gguf_tensor *t = mr_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight");
    CHECK(t != NULL, "expert tensor");
    if (t) {
        CHECK(t->n_dims == 3 && t->ne[2] == 8 && t->type == MR_TYPE_F32, "expert dims %d %lld", t->n_dims, (long long)t->ne[2]);
        CHECK(t->nbytes == (uint64_t)t->ne[0] * t->ne[1] * t->ne[2] * 4, "bytes");
        /* F32 random weights: finite, not all zero */
        const float *f = t->data;
        int finite = 1, nonzero = 0;
        for (int i = 0; i < 1000; i++) { finite &= isfinite(f[i]) != 0; nonzero |= f[i] != 0; }
        CHECK(finite && nonzero, "data");
    }
    CHECK(mr_gguf_find_tensor(g, "nope") == NULL, "absent tensor");
    mr_gguf_close(g);
}

static void test_missing_file(void) {
    mr_gguf *g = mr_gguf_open("/nonexistent/x.gguf");
    CHECK(g == NULL && strstr(mr_get_error(), "/nonexistent/x.gguf"), "%s", mr_get_error());
}

int main(void) {
    RUN(test_open_shared_models);
    RUN(test_open_shared_vocab);
    RUN(test_qwen3moe_values);
    RUN(test_missing_file);
    return t_finish();
}
