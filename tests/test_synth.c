/* moerun synth: the file loads, has the shape's tensors, and random blocks have the intended scale;
 * deepseek4: metadata, per-ratio tensors, F16/I32 tensors, valid hash tables, Zipf bias, errors. */
#include "test.h"
#include "moerun_tools.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <math.h>
#include <unistd.h>

static int t_tmp_path(char *path) { /* path: "/tmp/mr_synth_XXXXXX.gguf" */
    int fd = mkstemps(path, 5);
    if (fd < 0) return -1;
    close(fd);
    return 0;
}

/* RMS of the first n_rows rows of t, dequantized */
static double t_rms(const mr_gguf_tensor *t, int n_rows) {
    const mr_type_traits *tt = mr_type_get(t->type);
    size_t rs = mr_row_size(t->type, t->ne[0]);
    float *row = malloc(sizeof(float) * (size_t)t->ne[0]);
    double ss = 0;
    for (int r = 0; r < n_rows; r++) {
        tt->to_float((const uint8_t *)t->data + (size_t)r * rs, row, t->ne[0]);
        for (int k = 0; k < t->ne[0]; k++) ss += (double)row[k] * row[k];
    }
    free(row);
    return sqrt(ss / (n_rows * (double)t->ne[0]));
}

static void test_synth_qwen3_iq3s_mxfp4(void) {
    char path[] = "/tmp/mr_synth_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0, "mkstemps");
    if (fd < 0) return;
    close(fd);
    mr_synth_params p = {.shape = "qwen3-small", .mix = "iq3s-mxfp4", .n_layers = 1, .zipf = 1.0f, .seed = 7};
    CHECK(mr_synth(path, &p) == 0, "synth: %s", mr_last_error());
    mr_gguf *g = mr_gguf_open(path);
    CHECK(g != NULL, "open: %s", mr_last_error());
    if (!g) { unlink(path); return; }
    uint32_t n_layer = 0, n_exp = 0;
    CHECK(mr_gguf_get_u32(g, "qwen3moe.block_count", &n_layer) == 0 && n_layer == 1, "block_count %u", n_layer);
    CHECK(mr_gguf_get_u32(g, "qwen3moe.expert_count", &n_exp) == 0 && n_exp == 64, "expert_count %u", n_exp);
    const mr_gguf_tensor *gate = mr_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight");
    const mr_gguf_tensor *down = mr_gguf_find_tensor(g, "blk.0.ffn_down_exps.weight");
    CHECK(gate && gate->type == MR_TYPE_IQ3_S && gate->ne[0] == 1024 && gate->ne[1] == 512 && gate->ne[2] == 64, "gate");
    CHECK(down && down->type == MR_TYPE_MXFP4 && down->ne[0] == 512 && down->ne[1] == 1024, "down");
    if (gate && down) {
        /* weights ~ N(0, 1/fan_in): the RMS of a dequantized row is near 1/sqrt(ne0) */
        const mr_gguf_tensor *ts[2] = {gate, down};
        for (int i = 0; i < 2; i++) {
            const mr_gguf_tensor *t = ts[i];
            float row[1024];
            const mr_type_traits *tt = mr_type_get(t->type);
            size_t rs = mr_row_size(t->type, t->ne[0]);
            double ss = 0;
            int nrow = 64;
            for (int r = 0; r < nrow; r++) {
                tt->to_float((const uint8_t *)t->data + (size_t)r * 997 % (size_t)(t->ne[1] * t->ne[2]) * rs, row, t->ne[0]);
                for (int k = 0; k < t->ne[0]; k++) ss += (double)row[k] * row[k];
            }
            double rms = sqrt(ss / (nrow * (double)t->ne[0])), want = 1.0 / sqrt((double)t->ne[0]);
            CHECK(rms > 0.5 * want && rms < 2.0 * want, "%s rms %g, want ~%g", t->name, rms, want);
        }
    }
    mr_gguf_close(g);
    unlink(path);
}

static void test_synth_errors(void) {
    mr_synth_params p = {.shape = "no-such-shape", .mix = "q4_0", .n_layers = 1, .seed = 1};
    CHECK(mr_synth("/tmp/never.gguf", &p) != 0 && strstr(mr_last_error(), "unknown shape"), "shape: %s", mr_last_error());
    mr_synth_params q = {.shape = "qwen3-small", .mix = "no-such-mix", .n_layers = 1, .seed = 1};
    CHECK(mr_synth("/tmp/never.gguf", &q) != 0 && strstr(mr_last_error(), "unknown quant mix"), "mix: %s", mr_last_error());
}


static const mr_gguf_tensor *t_find(mr_gguf *g, const char *fmt, int l) {
    char name[128];
    snprintf(name, sizeof name, fmt, l);
    return mr_gguf_find_tensor(g, name);
}

/* tiny deepseek4 with the shared tiny model's ratios: keys, tensors per layer kind, types, scales */
static void test_synth_ds4_tiny(void) {
    char path[] = "/tmp/mr_synth_XXXXXX.gguf";
    CHECK(t_tmp_path(path) == 0, "mkstemps");
    mr_synth_params p = {.shape = "deepseek-v4-tiny", .mix = "iq3s-mxfp4", .zipf = 1.0f, .seed = 3, .ratios = "0,4,128,4"};
    CHECK(mr_synth(path, &p) == 0, "synth: %s", mr_last_error());
    mr_gguf *g = mr_gguf_open(path);
    CHECK(g != NULL, "open: %s", mr_last_error());
    if (!g) { unlink(path); return; }
    uint32_t u = 0;
    const char *arch = NULL;
    CHECK(mr_gguf_get_str(g, "general.architecture", &arch) == 0 && !strcmp(arch, "deepseek4"), "arch");
    CHECK(mr_gguf_get_u32(g, "deepseek4.block_count", &u) == 0 && u == 4, "block_count %u", u);
    CHECK(mr_gguf_get_u32(g, "deepseek4.hash_layer_count", &u) == 0 && u == 1, "hash_layer_count %u", u);
    CHECK(mr_gguf_get_u32(g, "deepseek4.hyper_connection.count", &u) == 0 && u == 4, "hc %u", u);
    CHECK(mr_gguf_get_u32(g, "deepseek4.attention.head_count_kv", &u) == 0 && u == 1, "head_count_kv %u", u);
    CHECK(mr_gguf_get_u32(g, "deepseek4.expert_gating_func", &u) == 0 && u == 4, "gating %u", u);
    const void *arr = NULL;
    uint64_t n = 0;
    CHECK(mr_gguf_get_arr(g, "deepseek4.attention.compress_ratios", MR_GGUF_I32, &arr, &n) == 0 && n == 4, "ratios");
    const int want_r[4] = {0, 4, 128, 4};
    if (arr && n == 4)
        for (int l = 0; l < 4; l++) CHECK(((const int32_t *)arr)[l] == want_r[l], "ratio %d", l);
    CHECK(mr_gguf_get_arr(g, "deepseek4.swiglu_clamp_exp", MR_GGUF_F32, &arr, &n) == 0 && n == 4, "clamp");

    const mr_gguf_tensor *t = mr_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->type == MR_TYPE_F16 && t->ne[0] == 256 && t->ne[1] == 2048, "token_embd");
    if (t) { double r = t_rms(t, 64); CHECK(r > 0.9 && r < 1.1, "embedding rms %g", r); }
    t = mr_gguf_find_tensor(g, "output.weight");
    CHECK(t && t->type == MR_TYPE_Q8_0 && t->ne[1] == 2048, "output");
    t = mr_gguf_find_tensor(g, "output_hc_fn.weight");
    CHECK(t && t->type == MR_TYPE_F16 && t->ne[0] == 1024 && t->ne[1] == 4, "output_hc_fn");
    for (int l = 0; l < 4; l++) {
        int ratio = want_r[l];
        t = t_find(g, "blk.%d.hc_attn_fn.weight", l);
        CHECK(t && t->type == MR_TYPE_F16 && t->ne[0] == 1024 && t->ne[1] == 24, "hc_attn_fn %d", l);
        if (t) { /* F16 pool values: RMS 1/sqrt(fan_in) */
            double r = t_rms(t, 24), want = 1.0 / 32;
            CHECK(r > 0.9 * want && r < 1.1 * want, "hc_attn_fn rms %g want %g", r, want);
        }
        t = t_find(g, "blk.%d.attn_q_b.weight", l);
        CHECK(t && t->type == MR_TYPE_Q8_0 && t->ne[0] == 128 && t->ne[1] == 512, "q_b %d", l);
        t = t_find(g, "blk.%d.attn_output_a.weight", l);
        CHECK(t && t->ne[0] == 256 && t->ne[1] == 128, "output_a %d", l);
        t = t_find(g, "blk.%d.ffn_gate_exps.weight", l);
        CHECK(t && t->type == MR_TYPE_IQ3_S && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 4, "gate_exps %d", l);
        t = t_find(g, "blk.%d.ffn_down_exps.weight", l);
        CHECK(t && t->type == MR_TYPE_MXFP4 && t->ne[0] == 256 && t->ne[1] == 256 && t->ne[2] == 4, "down_exps %d", l);
        t = t_find(g, "blk.%d.ffn_down_shexp.weight", l);
        CHECK(t && t->type == MR_TYPE_Q8_0, "down_shexp %d", l);
        t = t_find(g, "blk.%d.ffn_gate_inp.weight", l);
        CHECK(t && t->type == MR_TYPE_F32 && t->ne[1] == 4, "router %d", l);
        /* hash layer 0: tid2eid, no bias; others the reverse */
        CHECK((t_find(g, "blk.%d.ffn_gate_tid2eid.weight", l) != NULL) == (l == 0), "tid2eid presence %d", l);
        CHECK((t_find(g, "blk.%d.exp_probs_b.bias", l) != NULL) == (l != 0), "exp_probs_b presence %d", l);
        /* compressor on ratio > 0, indexer on ratio 4 only */
        t = t_find(g, "blk.%d.attn_compressor_ape.weight", l);
        CHECK((t != NULL) == (ratio > 0), "compressor presence %d", l);
        if (t) CHECK(t->type == MR_TYPE_F16 && t->ne[0] == (ratio == 4 ? 256 : 128) && t->ne[1] == ratio, "ape %d", l);
        t = t_find(g, "blk.%d.attn_compressor_kv.weight", l);
        if (t) CHECK(t->type == MR_TYPE_F16 && t->ne[0] == 256 && t->ne[1] == (ratio == 4 ? 256 : 128), "comp kv %d", l);
        CHECK((t_find(g, "blk.%d.indexer.attn_q_b.weight", l) != NULL) == (ratio == 4), "indexer presence %d", l);
        t = t_find(g, "blk.%d.indexer_compressor_gate.weight", l);
        if (t) CHECK(t->type == MR_TYPE_F16 && t->ne[0] == 256 && t->ne[1] == 256, "indexer gate %d", l);
    }
    /* hash table: 2 distinct valid expert ids per token; Zipf(1) makes expert 0 the most used */
    t = mr_gguf_find_tensor(g, "blk.0.ffn_gate_tid2eid.weight");
    CHECK(t && t->type == MR_TYPE_I32 && t->ne[0] == 2 && t->ne[1] == 2048, "tid2eid shape");
    if (t && t->type == MR_TYPE_I32) {
        const int32_t *ids = t->data;
        int bad = 0, dup = 0, cnt[4] = {0};
        for (int v = 0; v < 2048; v++) {
            for (int j = 0; j < 2; j++) {
                if (ids[2 * v + j] < 0 || ids[2 * v + j] >= 4) bad++;
                else cnt[ids[2 * v + j]]++;
            }
            dup += ids[2 * v] == ids[2 * v + 1];
        }
        CHECK(bad == 0 && dup == 0, "%d invalid, %d repeated ids", bad, dup);
        CHECK(cnt[0] > cnt[1] && cnt[1] > cnt[3] && cnt[3] > 0, "popularity %d %d %d %d", cnt[0], cnt[1], cnt[2], cnt[3]);
    }
    t = mr_gguf_find_tensor(g, "blk.2.exp_probs_b.bias");
    if (t) {
        const float *b = t->data;
        CHECK(b[0] > b[1] && b[1] > b[3] && b[3] - b[0] < -0.2f, "bias %g %g %g %g", b[0], b[1], b[2], b[3]);
    }
    mr_gguf_close(g);
    unlink(path);
}

/* default ratios (0,0 then 4/128 alternating), --layers, the Q2 mix */
static void test_synth_ds4_defaults(void) {
    char path[] = "/tmp/mr_synth_XXXXXX.gguf";
    CHECK(t_tmp_path(path) == 0, "mkstemps");
    mr_synth_params p = {.shape = "deepseek-v4-tiny", .mix = "iq2xxs-q2k", .n_layers = 3, .seed = 1};
    CHECK(mr_synth(path, &p) == 0, "synth: %s", mr_last_error());
    mr_gguf *g = mr_gguf_open(path);
    CHECK(g != NULL, "open: %s", mr_last_error());
    if (!g) { unlink(path); return; }
    const void *arr = NULL;
    uint64_t n = 0;
    CHECK(mr_gguf_get_arr(g, "deepseek4.attention.compress_ratios", MR_GGUF_I32, &arr, &n) == 0 && n == 3, "ratios");
    if (arr && n == 3) {
        const int32_t *r = arr;
        CHECK(r[0] == 0 && r[1] == 0 && r[2] == 4, "ratios %d %d %d", r[0], r[1], r[2]);
    }
    const mr_gguf_tensor *t = mr_gguf_find_tensor(g, "blk.2.ffn_down_exps.weight");
    CHECK(t && t->type == MR_TYPE_Q2_K, "down type");
    t = mr_gguf_find_tensor(g, "blk.2.ffn_up_exps.weight");
    CHECK(t && t->type == MR_TYPE_IQ2_XXS, "up type");
    if (t) { /* random-bit blocks scaled to RMS 1/sqrt(fan_in) */
        double r = t_rms(t, 64), want = 1.0 / 16;
        CHECK(r > 0.8 * want && r < 1.25 * want, "iq2_xxs rms %g want %g", r, want);
    }
    CHECK(mr_gguf_find_tensor(g, "blk.3.attn_kv.weight") == NULL, "layer 3 cut");
    CHECK(mr_gguf_find_tensor(g, "blk.1.attn_compressor_kv.weight") == NULL, "layer 1 is dense");
    CHECK(mr_gguf_find_tensor(g, "blk.2.indexer.proj.weight") != NULL, "layer 2 has the indexer");
    /* without --zipf the bias carries no skew */
    t = mr_gguf_find_tensor(g, "blk.2.exp_probs_b.bias");
    if (t) {
        const float *b = t->data;
        for (int e = 0; e < 4; e++) CHECK(fabsf(b[e]) < 0.1f, "bias %d = %g", e, b[e]);
    }
    mr_gguf_close(g);
    unlink(path);
}

static void test_synth_ds4_errors(void) {
    mr_synth_params p = {.shape = "deepseek-v4-tiny", .mix = "q8_0", .n_layers = 4, .seed = 1, .ratios = "0,4,128"};
    CHECK(mr_synth("/tmp/never.gguf", &p) != 0 && strstr(mr_last_error(), "3 values for 4 layers"), "count: %s", mr_last_error());
    p.ratios = "0,4,3,4";
    CHECK(mr_synth("/tmp/never.gguf", &p) != 0 && strstr(mr_last_error(), "0, 4 or 128"), "value: %s", mr_last_error());
    p.ratios = NULL;
    p.n_layers = 300;
    CHECK(mr_synth("/tmp/never.gguf", &p) != 0 && strstr(mr_last_error(), "1..256 layers"), "depth: %s", mr_last_error());
    mr_synth_params q = {.shape = "qwen3-small", .mix = "q8_0", .n_layers = 1, .seed = 1, .ratios = "0"};
    CHECK(mr_synth("/tmp/never.gguf", &q) != 0 && strstr(mr_last_error(), "deepseek4 shapes only"), "qwen3: %s", mr_last_error());
    CHECK(access("/tmp/never.gguf", F_OK) != 0, "no file written");
}

/* a synthetic tiny deepseek4 runs through mr_model_load: finite, non-degenerate logits for a prefill
 * long enough to close ratio-4 and ratio-128 blocks (140 tokens) and for decode steps after it */
static void test_synth_ds4_runs(void) {
    static const char *mixes[3] = {"iq3s-mxfp4", "iq2xxs-q2k", "q2_0-iq2xxs"};
    for (int mi = 0; mi < 3; mi++) {
        char path[] = "/tmp/mr_synth_XXXXXX.gguf";
        CHECK(t_tmp_path(path) == 0, "mkstemps");
        mr_synth_params p = {.shape = "deepseek-v4-tiny", .mix = mixes[mi], .zipf = 1.0f, .seed = 5, .ratios = "0,4,128,4"};
        CHECK(mr_synth(path, &p) == 0, "synth: %s", mr_last_error());
        mr_model_params mp;
        mr_model_params_default(&mp);
        mp.n_threads = 1;
        mr_model *m = mr_model_load(path, &mp);
        CHECK(m != NULL, "%s: load: %s", mixes[mi], mr_last_error());
        mr_session *s = m ? mr_session_new(m, 256) : NULL;
        CHECK(!m || s, "session: %s", mr_last_error());
        if (s) {
            enum { NP = 140, ND = 4 };
            const int nv = mr_model_n_vocab(m);
            int32_t tok[NP + ND];
            for (int i = 0; i < NP + ND; i++) tok[i] = i == 0 ? 1 : 3 + (int32_t)((i * 2654435761u) % (uint32_t)(nv - 3));
            float *lg = malloc(sizeof(float) * (size_t)nv * NP);
            CHECK(mr_session_eval(s, tok, NP, lg, 1) == 0, "prefill: %s", mr_last_error());
            int bad = 0, flat = 0;
            for (int r = 0; r < NP + ND; r++) {
                if (r >= NP) CHECK(mr_session_eval(s, &tok[r], 1, lg, 0) == 0, "decode %d: %s", r, mr_last_error());
                const float *row = r < NP ? lg + (size_t)r * nv : lg;
                double mn = 1e30, mx = -1e30;
                for (int k = 0; k < nv; k++) {
                    if (!isfinite(row[k])) bad++;
                    if (row[k] < mn) mn = row[k];
                    if (row[k] > mx) mx = row[k];
                }
                flat += !(mx - mn > 1e-3);
            }
            CHECK(bad == 0, "%s: %d non-finite logits", mixes[mi], bad);
            CHECK(flat == 0, "%s: %d rows with constant logits", mixes[mi], flat);
            free(lg);
        }
        mr_session_free(s);
        mr_model_free(m);
        unlink(path);
    }
}

/* the Q2_0 mix (the DeepSeek-V4 CPU guide's files): attention and shared experts in Q2_0 for
 * deepseek4 and deepseek2 (columns that are no multiple of 64 fall back to Q8_0 there), routed
 * experts IQ2_XXS / Q2_K; a deepseek2 model runs (deepseek4's run is in test_synth_ds4_runs) */
static void test_synth_q2_0_mix(void) {
    static const struct { const char *shape, *attn, *shexp; } cases[2] = {
        {"deepseek-v4-tiny", "blk.2.attn_output_a.weight", "blk.2.ffn_down_shexp.weight"},
        {"deepseek2-tiny", "blk.2.attn_q_b.weight", "blk.2.ffn_gate_shexp.weight"},
    };
    for (int ci = 0; ci < 2; ci++) {
        char path[] = "/tmp/mr_synth_XXXXXX.gguf";
        CHECK(t_tmp_path(path) == 0, "mkstemps");
        mr_synth_params p = {.shape = cases[ci].shape, .mix = "q2_0-iq2xxs", .n_layers = 3, .seed = 3};
        CHECK(mr_synth(path, &p) == 0, "synth %s: %s", cases[ci].shape, mr_last_error());
        mr_gguf *g = mr_gguf_open(path);
        CHECK(g != NULL, "open: %s", mr_last_error());
        if (!g) { unlink(path); continue; }
        const char *q2[2] = {cases[ci].attn, cases[ci].shexp};
        for (int k = 0; k < 2; k++) {
            const mr_gguf_tensor *t = mr_gguf_find_tensor(g, q2[k]);
            CHECK(t && t->type == MR_TYPE_Q2_0, "%s %s: type %s", cases[ci].shape, q2[k], t ? mr_type_name(t->type) : "none");
            if (t) { /* Gaussian blocks through the reference quantizer: RMS near the target */
                double r = t_rms(t, 16), want = 1.0 / sqrt((double)t->ne[0]);
                CHECK(r > 0.5 * want && r < 2.0 * want, "%s rms %g want %g", q2[k], r, want);
            }
        }
        const mr_gguf_tensor *t = mr_gguf_find_tensor(g, "blk.2.ffn_up_exps.weight");
        CHECK(t && t->type == MR_TYPE_IQ2_XXS, "%s: routed up type", cases[ci].shape);
        mr_gguf_close(g);
        if (ci == 1) {
            mr_model_params mp;
            mr_model_params_default(&mp);
            mp.n_threads = 1;
            mr_model *m = mr_model_load(path, &mp);
            CHECK(m != NULL, "deepseek2 q2_0: load: %s", mr_last_error());
            mr_session *s = m ? mr_session_new(m, 64) : NULL;
            if (s) {
                enum { NP = 24 };
                const int nv = mr_model_n_vocab(m);
                int32_t tok[NP];
                for (int i = 0; i < NP; i++) tok[i] = i == 0 ? 1 : 3 + (int32_t)((i * 2654435761u) % (uint32_t)(nv - 3));
                float *lg = malloc(sizeof(float) * (size_t)nv * NP);
                CHECK(mr_session_eval(s, tok, NP, lg, 1) == 0, "prefill: %s", mr_last_error());
                int bad = 0, flat = 0;
                for (int r = 0; r < NP; r++) {
                    double mn = 1e30, mx = -1e30;
                    for (int k = 0; k < nv; k++) {
                        const float v = lg[(size_t)r * nv + k];
                        bad += !isfinite(v);
                        if (v < mn) mn = v;
                        if (v > mx) mx = v;
                    }
                    flat += !(mx - mn > 1e-3);
                }
                CHECK(bad == 0 && flat == 0, "deepseek2 q2_0: %d non-finite logits, %d constant rows", bad, flat);
                free(lg);
            }
            mr_session_free(s);
            mr_model_free(m);
        }
        unlink(path);
    }
}

int main(void) {
    RUN(test_synth_qwen3_iq3s_mxfp4);
    RUN(test_synth_errors);
    RUN(test_synth_ds4_tiny);
    RUN(test_synth_ds4_defaults);
    RUN(test_synth_ds4_errors);
    RUN(test_synth_ds4_runs);
    RUN(test_synth_q2_0_mix);
    return t_finish();
}
