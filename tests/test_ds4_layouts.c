/* The DeepSeek-V4 file layouts users download (mainline llama.cpp's conversions), synthesized with
 * `moerun synth --layout` and loaded: each loads as what it is or is refused with a message naming it.
 *   trunk     the plain model
 *   mtp       + a bundled MTP block (block_count L+1, nextn_predict_layers 1, blk.L.nextn.*): runs the
 *             L trunk layers only, so its logits equal the trunk file's bit for bit
 *   mtp-only  an MTP sidecar (mainline's convert --mtp): refused as such
 *   dspark    a DSpark drafter (arch dflash): loads as a drafter (no trunk layers, its stages), run
 *             alone it is refused by name; without hyper-connections (a DFlash drafter for another
 *             family) refused as such
 *   v41       DeepSeek-V4.1 (arch deepseek41): refused as such
 * and swiglu_clamp_shexp: read, applied to the shared expert (absent: the routed clamp). */
#include "moerun.h"
#include "moerun_tools.h"
#include "test.h"
#include "gguf/gguf.h"

#include <math.h>
#include <stdint.h>
#include <unistd.h>

static char dir[] = "/tmp/mr_ds4lay_XXXXXX";

static const char *make(const char *layout, float shexp) {
    static char path[8][256];
    static int i;
    char *p = path[i++ & 7];
    snprintf(p, 256, "%s/%s-%g.gguf", dir, layout, (double)shexp);
    mr_synth_params sp = {.shape = "deepseek-v4-tiny", .mix = "f32", .seed = 7, .layout = layout, .shexp_clamp = shexp};
    if (mr_synth(p, &sp)) { printf("# synth %s: %s\n", layout, mr_last_error()); return NULL; }
    return p;
}

static const int32_t ids[] = {1, 77, 300, 5, 1999, 42, 42, 8, 1024, 17, 600, 3};
#define N_IDS (int)(sizeof ids / sizeof ids[0])

/* prefill logits of ids (all rows) with the given graph, NULL on failure (error kept) */
static float *logits_of(const char *path, int graph, int *V) {
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 1;
    mp.graph = graph;
    mr_model *m = mr_model_load(path, &mp);
    if (!m) return NULL;
    *V = mr_model_n_vocab(m);
    float *lg = malloc(sizeof(float) * (size_t)N_IDS * (size_t)*V);
    mr_session *s = mr_session_new(m, 64);
    int rc = !lg || !s || mr_session_eval(s, ids, N_IDS, lg, 1);
    mr_session_free(s);
    mr_model_free(m);
    if (rc) { free(lg); return NULL; }
    return lg;
}

static void refused(const char *layout, const char *what) {
    const char *p = make(layout, 0);
    CHECK(p, "synth %s", layout);
    if (!p) return;
    mr_model_params mp;
    mr_model_params_default(&mp);
    mr_model *m = mr_model_load(p, &mp);
    CHECK(!m, "%s loaded", layout);
    CHECK(!m && strstr(mr_last_error(), what), "%s: the message should name '%s': %s", layout, what, mr_last_error());
    mr_model_free(m);
}

static void test_ds4_layout_mtp_bundled(void) {
    const char *t = make("trunk", 0), *b = make("mtp", 0);
    CHECK(t && b, "synth");
    if (!t || !b) return;
    int V1 = 0, V2 = 0;
    float *l1 = logits_of(t, MR_GRAPH_OFFICIAL, &V1), *l2 = logits_of(b, MR_GRAPH_OFFICIAL, &V2);
    CHECK(l1 && l2, "eval: %s", mr_last_error());
    mr_model_params mp;
    mr_model_params_default(&mp);
    mr_model *m = mr_model_load(b, &mp);
    CHECK(m && mr_model_n_layer(m) == 4, "the MTP file should run 4 trunk layers, not %d", m ? mr_model_n_layer(m) : -1);
    mr_model_free(m);
    /* the MTP block is not a layer: the trunk is the same weights (same seed, block written last) */
    CHECK(l1 && l2 && V1 == V2 && !memcmp(l1, l2, sizeof(float) * (size_t)N_IDS * (size_t)V1),
          "the bundled-MTP file's logits differ from the trunk's");
    free(l1);
    free(l2);
}

static void test_ds4_layout_mtp_only(void) { refused("mtp-only", "MTP sidecar"); }
static int rewrite(const char *src, const char *dst, const char *drop, const char *set, int arr_type, uint64_t n,
                   const void *vals);

static void test_ds4_layout_dspark(void) {
    const char *p = make("dspark", 0);
    CHECK(p, "synth dspark");
    if (!p) return;
    mr_model_params mp;
    mr_model_params_default(&mp);
    mr_model *m = mr_model_load(p, &mp);
    CHECK(m && mr_model_n_layer(m) == 0 && mr_model_n_mtp(m) == 2, "the DSpark file should load as a drafter of 2 stages: %s",
          m ? "wrong counts" : mr_last_error());
    mr_session *s = m ? mr_session_new(m, 32) : NULL;
    const int32_t one = 1;
    CHECK(s && mr_session_eval(s, &one, 1, NULL, 0) && strstr(mr_last_error(), "DSpark drafter"),
          "run alone, a DSpark drafter should be refused by name: %s", mr_last_error());
    mr_session_free(s);
    mr_model_free(m);
    /* the same keys without hyper_connection.count: mainline's DFlash drafter for a non-V4 target */
    char q[300];
    snprintf(q, sizeof q, "%s.nohc.gguf", p);
    CHECK(!rewrite(p, q, "dflash.hyper_connection.count", NULL, 0, 0, NULL), "rewrite: %s", mr_last_error());
    m = mr_model_load(q, &mp);
    CHECK(!m && strstr(mr_last_error(), "DFlash"), "a DFlash drafter should be refused by name: %s", mr_last_error());
    mr_model_free(m);
    unlink(q);
}
static void test_ds4_layout_v41(void) { refused("v41", "DeepSeek-V4.1"); }

/* swiglu_clamp_shexp = 0.05 bites on nearly every shared-expert activation: the clamping graphs'
 * (official, mainline) logits move, the fork's graph (no shared clamp) ignores the key */
static void test_ds4_layout_shexp_clamp(void) {
    const char *t = make("trunk", 0), *c = make("trunk", 0.05f);
    CHECK(t && c, "synth");
    if (!t || !c) return;
    int V = 0;
    float *fork_t = logits_of(t, MR_GRAPH_FORK, &V), *fork_c = logits_of(c, MR_GRAPH_FORK, &V);
    CHECK(fork_t && fork_c, "eval: %s", mr_last_error());
    const size_t n = (size_t)N_IDS * (size_t)V;
    if (fork_t && fork_c) CHECK(!memcmp(fork_t, fork_c, sizeof(float) * n), "the fork's graph should not read swiglu_clamp_shexp");
    for (int g = MR_GRAPH_OFFICIAL; g <= MR_GRAPH_MAINLINE; g++) {
        float *a = logits_of(t, g, &V), *b = logits_of(c, g, &V);
        CHECK(a && b, "eval: %s", mr_last_error());
        double diff = 0;
        for (size_t i = 0; a && b && i < n; i++) diff = fmax(diff, fabs((double)a[i] - b[i]));
        CHECK(diff > 1e-2, "graph %d: a shared clamp of 0.05 should move the logits (max |diff| %g)", g, diff);
        free(a);
        free(b);
    }
    free(fork_t); free(fork_c);
}

/* a copy of src without the key `drop` (NULL: none) and with `set` (an array of n entries of type
 * arr_type; NULL: none) */
static int rewrite(const char *src, const char *dst, const char *drop, const char *set, int arr_type, uint64_t n,
                   const void *vals) {
    mr_gguf *g = mr_gguf_open(src);
    if (!g) return -1;
    mr_gguf_writer *w = mr_gguf_writer_new();
    int rc = w ? 0 : -1;
    for (uint64_t i = 0; !rc && i < mr_gguf_n_kv(g); i++) {
        const mr_gguf_kv *kv = mr_gguf_kv_at(g, i);
        if ((drop && !strcmp(kv->key, drop)) || (set && !strcmp(kv->key, set))) continue;
        rc = mr_gguf_writer_copy_kv(w, kv);
    }
    if (!rc && set) rc = mr_gguf_writer_set_kv(w, set, MR_GGUF_ARRAY, arr_type, n, vals);
    for (uint64_t i = 0; !rc && i < mr_gguf_n_tensors(g); i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(g, i);
        rc = mr_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data);
    }
    if (!rc) rc = mr_gguf_writer_write(w, dst, 1);
    mr_gguf_writer_free(w);
    mr_gguf_close(g);
    return rc;
}

/* variants of the keys: an MTP block the metadata does not announce is refused (it would run as a
 * layer); expert_feed_forward_length as a per-layer array loads when its trunk entries agree and is
 * refused when they do not, and so does expert_used_count; clamp arrays must have block_count entries */
static void test_ds4_layout_key_variants(void) {
    const char *t = make("trunk", 0), *b = make("mtp", 0);
    CHECK(t && b, "synth");
    if (!t || !b) return;
    char dst[300];
    snprintf(dst, sizeof dst, "%s/variant.gguf", dir);
    const uint32_t ff_same[5] = {256, 256, 256, 256, 256}, ff_diff[5] = {256, 256, 128, 256, 256};
    const float clamp4[4] = {10, 10, 10, 10};
    const uint32_t k_same[5] = {2, 2, 2, 2, 2}, k_diff[5] = {2, 2, 2, 1, 2};
    struct { const char *src, *drop, *set; int type; uint64_t n; const void *vals; const char *want; } cases[] = {
        {b, "deepseek4.nextn_predict_layers", NULL, 0, 0, NULL, "does not say so"},
        {b, NULL, "deepseek4.expert_feed_forward_length", MR_GGUF_U32, 5, ff_same, NULL},
        {b, NULL, "deepseek4.expert_feed_forward_length", MR_GGUF_U32, 5, ff_diff, "differs between layers"},
        {b, NULL, "deepseek4.swiglu_clamp_shexp", MR_GGUF_F32, 4, clamp4, "expected 5 (block_count)"},
        /* expert_used_count per layer (mainline get_key_or_arr, applied as entry 0 everywhere) */
        {b, NULL, "deepseek4.expert_used_count", MR_GGUF_U32, 5, k_same, NULL},
        {b, NULL, "deepseek4.expert_used_count", MR_GGUF_U32, 5, k_diff, "expert_used_count differs between layers"},
    };
    int V = 0;
    float *ref = logits_of(t, MR_GRAPH_OFFICIAL, &V);
    CHECK(ref, "eval: %s", mr_last_error());
    for (size_t i = 0; ref && i < sizeof cases / sizeof cases[0]; i++) {
        CHECK(rewrite(cases[i].src, dst, cases[i].drop, cases[i].set, cases[i].type, cases[i].n, cases[i].vals) == 0,
              "rewrite: %s", mr_last_error());
        int V2 = 0;
        float *lg = logits_of(dst, MR_GRAPH_OFFICIAL, &V2);
        if (cases[i].want)
            CHECK(!lg && strstr(mr_last_error(), cases[i].want), "case %zu: expected an error naming '%s', got '%s'", i,
                  cases[i].want, lg ? "(loaded)" : mr_last_error());
        else
            CHECK(lg && V2 == V && !memcmp(lg, ref, sizeof(float) * (size_t)N_IDS * (size_t)V),
                  "case %zu: should load and equal the trunk's logits (%s)", i, lg ? "differs" : mr_last_error());
        free(lg);
    }
    free(ref);
    remove(dst);
}

int main(void) {
    if (!mkdtemp(dir)) { printf("FAIL mkdtemp\n"); return 1; }
    RUN(test_ds4_layout_mtp_bundled);
    RUN(test_ds4_layout_mtp_only);
    RUN(test_ds4_layout_dspark);
    RUN(test_ds4_layout_v41);
    RUN(test_ds4_layout_shexp_clamp);
    RUN(test_ds4_layout_key_variants);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) printf("# could not remove %s\n", dir);
    return t_finish();
}
