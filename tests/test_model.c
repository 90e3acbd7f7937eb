/* Model framework: shared ops against naive formulas, MoE routing, attention, loader errors,
 * session rules, and batch == decode == chunked prefill on a synthetic llama-with-experts GGUF. */
#include "moerun_tools.h"
#include "model/model.h"
#include "model/moe.h"
#include "model/ops.h"
#include "test.h"

#include <math.h>
#include <unistd.h>

static float frand(uint32_t *s) { *s = *s * 1664525u + 1013904223u; return ((*s >> 8) / 16777216.0f) * 2.0f - 1.0f; }

static void test_rms_norm_softmax(void) {
    float x[37], y[37], w[37];
    uint32_t s = 1;
    double ss = 0;
    for (int i = 0; i < 37; i++) { x[i] = frand(&s) * 3; w[i] = frand(&s); ss += (double)x[i] * x[i]; }
    mr_rms_norm(y, x, w, 37, 1e-5f);
    double sc = 1.0 / sqrt(ss / 37 + 1e-5);
    for (int i = 0; i < 37; i++) CHECK(fabs(y[i] - x[i] * sc * w[i]) < 1e-5, "rms %d: %g vs %g", i, y[i], x[i] * sc * w[i]);
    mr_softmax(y, x, 37);
    double sum = 0, mx = -1e30;
    for (int i = 0; i < 37; i++) { sum += y[i]; if (x[i] > mx) mx = x[i]; }
    CHECK(fabs(sum - 1) < 1e-6, "softmax sums to %g", sum);
    double z = 0;
    for (int i = 0; i < 37; i++) z += exp(x[i] - mx);
    for (int i = 0; i < 37; i++) CHECK(fabs(y[i] - exp(x[i] - mx) / z) < 1e-6, "softmax %d", i);
}

static void test_rope(void) {
    const int hd = 16, nd = 12; /* partial rotation: dims 12..15 untouched */
    for (int mode = 0; mode <= 2; mode += 2) {
        mr_rope_params rp;
        mr_rope_params_init(&rp, mode, nd);
        rp.freq_base = 500.0f;
        float x[16], y[16];
        uint32_t s = 7;
        for (int i = 0; i < hd; i++) x[i] = y[i] = frand(&s);
        const int pos = 37;
        mr_rope(&rp, y, 1, hd, pos);
        for (int i = 0; i < nd / 2; i++) {
            double th = pos * pow(500.0, -2.0 * i / nd);
            int a = mode == MR_ROPE_NEOX ? i : 2 * i, b = mode == MR_ROPE_NEOX ? i + nd / 2 : 2 * i + 1;
            double ea = x[a] * cos(th) - x[b] * sin(th), eb = x[a] * sin(th) + x[b] * cos(th);
            CHECK(fabs(y[a] - ea) < 1e-4 && fabs(y[b] - eb) < 1e-4, "mode %d pair %d: (%g, %g) vs (%g, %g)", mode, i, y[a], y[b], ea, eb);
        }
        for (int i = nd; i < hd; i++) CHECK(y[i] == x[i], "mode %d dim %d changed", mode, i);
        /* the inverse rotation restores the input */
        float c[16];
        mr_rope_cache(&rp, pos, -1.0f, c);
        mr_rope_apply(&rp, c, y);
        for (int i = 0; i < hd; i++) CHECK(fabs(y[i] - x[i]) < 1e-5, "mode %d inverse dim %d", mode, i);
    }
    /* linear scaling: freq_scale s at position p equals no scaling at position p*s */
    mr_rope_params a, b;
    mr_rope_params_init(&a, MR_ROPE_NORMAL, 8);
    mr_rope_params_init(&b, MR_ROPE_NORMAL, 8);
    a.freq_scale = 0.25f;
    float ca[8], cb[8];
    mr_rope_cache(&a, 40, 1.0f, ca);
    mr_rope_cache(&b, 10, 1.0f, cb);
    for (int i = 0; i < 8; i++) CHECK(fabs(ca[i] - cb[i]) < 1e-5, "linear scale %d: %g vs %g", i, ca[i], cb[i]);
    /* YaRN: the fastest pairs extrapolate (unscaled angle), the slowest interpolate, cos/sin scaled
     * by attn_factor * (1 + 0.1 ln(1/freq_scale)) */
    mr_rope_params y;
    mr_rope_params_init(&y, MR_ROPE_NORMAL, 64);
    y.freq_scale = 0.25f; y.ext_factor = 1.0f; y.n_ctx_orig = 4096;
    float cy[64];
    mr_rope_cache(&y, 100, 1.0f, cy);
    const double ms = 1 + 0.1 * log(4.0);
    CHECK(fabs(cy[0] - cos(100.0) * ms) < 1e-4 && fabs(cy[1] - sin(100.0) * ms) < 1e-4, "yarn pair 0 extrapolates");
    double th = 100.0 * pow(10000.0, -62.0 / 64) * 0.25;
    CHECK(fabs(cy[62] - cos(th) * ms) < 1e-4 && fabs(cy[63] - sin(th) * ms) < 1e-4, "yarn last pair interpolates");
}

/* attention against a double-precision evaluation, F32 cache, GQA, window, sinks */
static void test_attention(void) {
    enum { NQ = 5, POS0 = 3, NH = 4, NKV = 2, HD = 8, NK = POS0 + NQ };
    float Q[NQ][NH * HD], K[NK][NKV * HD], V[NK][NKV * HD], out[NQ][NH * HD], sinks[NH];
    uint32_t s = 3;
    for (int t = 0; t < NQ; t++) for (int i = 0; i < NH * HD; i++) Q[t][i] = frand(&s) * 2;
    for (int j = 0; j < NK; j++) for (int i = 0; i < NKV * HD; i++) { K[j][i] = frand(&s) * 2; V[j][i] = frand(&s); }
    for (int h = 0; h < NH; h++) sinks[h] = frand(&s);
    for (int variant = 0; variant < 3; variant++) {
        int window = variant == 1 ? 3 : 0;
        mr_attn_args a = {.n_q = NQ, .pos0 = POS0, .n_head = NH, .n_head_kv = NKV, .head_dim = HD, .scale = 0.3f,
                          .window = window, .sinks = variant == 2 ? sinks : NULL, .Q = &Q[0][0], .q_stride = NH * HD,
                          .K = &K[0][0], .V = &V[0][0], .kv_f16 = 0, .kv_stride = NKV * HD, .out = &out[0][0], .out_stride = NH * HD};
        CHECK(mr_attention(NULL, &a) == 0, "attention failed");
        double maxd = 0;
        for (int t = 0; t < NQ; t++)
            for (int h = 0; h < NH; h++) {
                int g = h / (NH / NKV), pos = POS0 + t, j0 = window && pos - window + 1 > 0 ? pos - window + 1 : 0;
                double sc[NK], mx = -1e300, z = 0, o[HD] = {0};
                for (int j = j0; j <= pos; j++) {
                    double d = 0;
                    for (int i = 0; i < HD; i++) d += (double)Q[t][h * HD + i] * K[j][g * HD + i];
                    sc[j] = 0.3 * d;
                    if (sc[j] > mx) mx = sc[j];
                }
                if (variant == 2 && sinks[h] > mx) mx = sinks[h];
                for (int j = j0; j <= pos; j++) z += exp(sc[j] - mx);
                if (variant == 2) z += exp(sinks[h] - mx);
                for (int j = j0; j <= pos; j++) for (int i = 0; i < HD; i++) o[i] += exp(sc[j] - mx) / z * V[j][g * HD + i];
                for (int i = 0; i < HD; i++) { double dd = fabs(o[i] - out[t][h * HD + i]); if (dd > maxd) maxd = dd; }
            }
        CHECK(maxd < 1e-5, "variant %d: max diff %g", variant, maxd);
    }
}

static void test_moe_route(void) {
    mr_moe_cfg c = {.n_expert = 6, .n_used = 2, .gating = MR_GATING_SOFTMAX, .norm_w = 1};
    const float lg[2][6] = {{0.1f, 2.0f, -1.0f, 1.5f, 0.0f, 0.3f}, {3.0f, 0.0f, 0.0f, 0.0f, 2.9f, -5.0f}};
    int32_t sel[4];
    float w[4];
    CHECK(mr_moe_route(&c, &lg[0][0], NULL, NULL, 2, sel, w) == 0, "route");
    CHECK(sel[0] == 1 && sel[1] == 3 && sel[2] == 0 && sel[3] == 4, "top-2: %d %d %d %d", sel[0], sel[1], sel[2], sel[3]);
    double e1 = exp(2.0), e3 = exp(1.5);
    CHECK(fabs(w[0] - e1 / (e1 + e3)) < 1e-6 && fabs(w[0] + w[1] - 1) < 1e-6, "renormalised weights %g %g", w[0], w[1]);
    /* a selection bias changes the choice but not the weights' source */
    const float bias[6] = {0, 0, 10, 0, 0, 0};
    c.norm_w = 0;
    mr_moe_route(&c, &lg[0][0], bias, NULL, 1, sel, w);
    float p[6];
    mr_softmax(p, lg[0], 6);
    CHECK(sel[0] == 2 && sel[1] == 1 && w[0] == p[2] && w[1] == p[1], "bias: sel %d %d w %g %g", sel[0], sel[1], w[0], w[1]);
    /* given experts (hash routing) and a weight scale; sqrt(softplus) gating */
    const int32_t given[2] = {5, 0};
    c.gating = MR_GATING_SQRT_SOFTPLUS;
    c.w_scale = 1.5f;
    mr_moe_route(&c, &lg[0][0], NULL, given, 1, sel, w);
    CHECK(sel[0] == 5 && sel[1] == 0, "given experts");
    CHECK(fabs(w[0] - 1.5 * sqrt(log1p(exp(0.3)))) < 1e-5, "sqrt-softplus weight %g", w[0]);
    const int32_t bad[2] = {6, 0};
    CHECK(mr_moe_route(&c, &lg[0][0], NULL, bad, 1, sel, w) == -1, "out-of-range given expert accepted");

    /* deepseek4's router: sqrt(softplus) scores, selection by score + exp_probs_b, weights from the
     * unbiased scores renormalised (sum in double) and scaled; hash ids as given experts */
    mr_moe_cfg d4 = {.n_expert = 8, .n_used = 3, .gating = MR_GATING_SQRT_SOFTPLUS, .norm_w = 1, .w_scale = 1.5f};
    const float logits[8] = {0.1f, 2.0f, -1.0f, 0.5f, 25.0f, -30.0f, 1.0f, 0.0f}, b8[8] = {0, 0, 10, 0, 0, 0, 0, 0};
    int32_t s3[3];
    float w3[3];
    CHECK(mr_moe_route(&d4, logits, b8, NULL, 1, s3, w3) == 0, "route");
    CHECK(s3[0] == 2 && s3[1] == 4 && s3[2] == 1, "selection by biased score: %d %d %d", s3[0], s3[1], s3[2]);
    double sp[3] = {log1p(exp(-1.0)), 25.0 /* softplus threshold 20 */, log1p(exp(2.0))}, tot = 0;
    for (int j = 0; j < 3; j++) tot += sqrt(sp[j]);
    for (int j = 0; j < 3; j++) CHECK(fabs(w3[j] - 1.5 * sqrt(sp[j]) / tot) < 1e-6, "weight %d from unbiased score", j);
    d4.norm_w = 0; d4.w_scale = 1.0f;
    int32_t hid[3] = {7, 0, 5};
    CHECK(mr_moe_route(&d4, logits, NULL, hid, 1, hid, w3) == 0, "hash (sel_in == sel)");
    CHECK(hid[0] == 7 && hid[1] == 0 && hid[2] == 5, "hash ids kept in order");
    CHECK(fabs(w3[0] - sqrt(log(2.0))) < 1e-6, "unnormalised hash weight %g", w3[0]);
    /* weight floor: softplus underflows to 0 in float (log(1 + tiny) = 0), the floor avoids 0/0 */
    mr_moe_cfg d2 = {.n_expert = 2, .n_used = 2, .gating = MR_GATING_SQRT_SOFTPLUS, .norm_w = 1};
    const float neg[2] = {-40.0f, -40.0f};
    int32_t s2[2];
    float w2[2];
    CHECK(mr_moe_route(&d2, neg, NULL, NULL, 1, s2, w2) == 0 && w2[0] == 0.0f && w2[1] == 0.0f,
          "floor of the weight sum: %g %g", w2[0], w2[1]);
    /* top-k ties: the lower id first */
    const float tie[4] = {1, 3, 3, 0};
    mr_moe_cfg ct = {.n_expert = 4, .n_used = 2, .gating = MR_GATING_SOFTMAX_WEIGHT};
    CHECK(mr_moe_route(&ct, tie, NULL, NULL, 1, s2, w2) == 0 && s2[0] == 1 && s2[1] == 2, "ties: %d %d", s2[0], s2[1]);
}

/* GGUF expert_gating_func numbers (3 softmax_weight, 4 sqrt_softplus) to the engine's MR_GATING_*:
 * 0 takes the architecture's default, unknown values and ones the architecture lacks are refused */
static void test_gating_from_gguf(void) {
    mr_model m;
    char path[] = "x.gguf";
    memset(&m, 0, sizeof m);
    m.path = path;
    snprintf(m.arch_name, sizeof m.arch_name, "testarch");
    const unsigned all = MR_GATING_BIT(MR_GATING_SOFTMAX) | MR_GATING_BIT(MR_GATING_SIGMOID) |
                         MR_GATING_BIT(MR_GATING_SOFTMAX_WEIGHT) | MR_GATING_BIT(MR_GATING_SQRT_SOFTPLUS);
    const int want[5] = {MR_GATING_SIGMOID, MR_GATING_SOFTMAX, MR_GATING_SIGMOID, MR_GATING_SOFTMAX_WEIGHT,
                         MR_GATING_SQRT_SOFTPLUS};
    for (uint32_t id = 0; id < 5; id++) {
        int g = -1;
        CHECK(mr_moe_gating_from_gguf(&m, id, MR_GATING_SIGMOID, all, &g) == 0 && g == want[id], "id %u -> %d", id, g);
    }
    int g = 77;
    mr_clear_error();
    CHECK(mr_moe_gating_from_gguf(&m, 5, MR_GATING_SOFTMAX, all, &g) == -1 && g == 77 &&
          strstr(mr_get_error(), "expert_gating_func 5"), "unknown id 5 accepted: %s", mr_get_error());
    CHECK(mr_moe_gating_from_gguf(&m, 0xffffffffu, MR_GATING_SOFTMAX, all, &g) == -1, "id 2^32-1 accepted");
    mr_clear_error();
    CHECK(mr_moe_gating_from_gguf(&m, 4, MR_GATING_SOFTMAX, MR_GATING_BIT(MR_GATING_SOFTMAX), &g) == -1 && g == 77 &&
          strstr(mr_get_error(), "sqrt_softplus") && strstr(mr_get_error(), "testarch"), "unsupported id 4: %s", mr_get_error());
    CHECK(mr_moe_gating_from_gguf(&m, 0, MR_GATING_SQRT_SOFTPLUS, MR_GATING_BIT(MR_GATING_SOFTMAX), &g) == -1,
          "a default outside the allowed set accepted");
}

/* ---- a synthetic llama with 4 experts (top-2), F32, written with the GGUF writer ---- */
enum { D = 64, NL = 2, NHD = 4, NKVH = 2, HDIM = 16, FF = 64, NE = 4, VOC = 96 };

static int add_rand(mr_gguf_writer *w, const char *name, int nd, int64_t a, int64_t b, int64_t c, float scale, uint32_t *seed,
                    float **keep, int *nkeep) {
    int64_t ne[3] = {a, b, c}, n = a * b * c;
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = frand(seed) * scale;
    if (nd == 1) for (int64_t i = 0; i < n; i++) v[i] = 1.0f + 0.1f * v[i];
    keep[(*nkeep)++] = v;
    return mr_gguf_writer_add_tensor(w, name, MR_TYPE_F32, nd, ne, v);
}

static const char *write_model(const char *path, const char *skip, int bad_shape) {
    mr_gguf_writer *w = mr_gguf_writer_new();
    float *keep[64];
    int nk = 0;
    uint32_t seed = 11;
    mr_gguf_writer_set_str(w, "general.architecture", "llama");
    mr_gguf_writer_set_u32(w, "llama.context_length", 128);
    mr_gguf_writer_set_u32(w, "llama.embedding_length", D);
    mr_gguf_writer_set_u32(w, "llama.block_count", NL);
    mr_gguf_writer_set_u32(w, "llama.feed_forward_length", FF);
    mr_gguf_writer_set_u32(w, "llama.attention.head_count", NHD);
    mr_gguf_writer_set_u32(w, "llama.attention.head_count_kv", NKVH);
    mr_gguf_writer_set_u32(w, "llama.expert_count", NE);
    mr_gguf_writer_set_u32(w, "llama.expert_used_count", 2);
    mr_gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    add_rand(w, "token_embd.weight", 2, D, VOC, 1, 1.0f, &seed, keep, &nk);
    add_rand(w, "output_norm.weight", 1, D, 1, 1, 1, &seed, keep, &nk);
    add_rand(w, "output.weight", 2, D, VOC, 1, 0.3f, &seed, keep, &nk);
    char n[64];
    for (int l = 0; l < NL; l++) {
#define T(suffix, nd, a, b, c, sc) do { snprintf(n, sizeof n, "blk.%d." suffix, l); \
        if (!skip || strcmp(skip, n)) add_rand(w, n, nd, (bad_shape && !strcmp(n, "blk.1.attn_v.weight")) ? (a) + 1 : (a), b, c, sc, &seed, keep, &nk); } while (0)
        T("attn_norm.weight", 1, D, 1, 1, 1);
        T("attn_q.weight", 2, D, NHD * HDIM, 1, 0.2f);
        T("attn_k.weight", 2, D, NKVH * HDIM, 1, 0.2f);
        T("attn_v.weight", 2, D, NKVH * HDIM, 1, 0.2f);
        T("attn_output.weight", 2, NHD * HDIM, D, 1, 0.2f);
        T("ffn_norm.weight", 1, D, 1, 1, 1);
        T("ffn_gate_inp.weight", 2, D, NE, 1, 0.5f);
        T("ffn_gate_exps.weight", 3, D, FF, NE, 0.2f);
        T("ffn_up_exps.weight", 3, D, FF, NE, 0.2f);
        T("ffn_down_exps.weight", 3, FF, D, NE, 0.2f);
#undef T
    }
    int rc = mr_gguf_writer_write(w, path, 1);
    mr_gguf_writer_free(w);
    for (int i = 0; i < nk; i++) free(keep[i]);
    return rc ? NULL : path;
}

static char tmpdir[256];

static void test_loader_errors(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/missing.gguf", tmpdir);
    CHECK(write_model(p, "blk.1.attn_k.weight", 0) != NULL, "write: %s", mr_last_error());
    CHECK(mr_model_load(p, NULL) == NULL, "model with a missing tensor loaded");
    CHECK(strstr(mr_last_error(), "missing tensor 'blk.1.attn_k.weight' (expected shape [64, 32])") != NULL, "error: %s", mr_last_error());
    snprintf(p, sizeof p, "%s/badshape.gguf", tmpdir);
    CHECK(write_model(p, NULL, 1) != NULL, "write");
    CHECK(mr_model_load(p, NULL) == NULL, "model with a bad shape loaded");
    CHECK(strstr(mr_last_error(), "'blk.1.attn_v.weight' has shape [65, 32], expected [64, 32]") != NULL, "error: %s", mr_last_error());
    snprintf(p, sizeof p, "%s/no-such-file.gguf", tmpdir);
    CHECK(mr_model_load(p, NULL) == NULL, "missing file loaded");
}

static void test_batch_decode_chunks(void) {
    char p[512];
    snprintf(p, sizeof p, "%s/moe.gguf", tmpdir);
    CHECK(write_model(p, NULL, 0) != NULL, "write");
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 2;
    mr_model *m = mr_model_load(p, &mp);
    CHECK(m != NULL, "load: %s", mr_last_error());
    if (!m) return;
    CHECK(!strcmp(mr_model_arch(m), "llama") && mr_model_n_vocab(m) == VOC && mr_model_n_layer(m) == NL, "hparams");
    enum { N = 11 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (i * 37 + 5) % VOC;
    static float a[N][VOC], b[N][VOC], c[N][VOC];
    mr_session *s = mr_session_new(m, 16);
    CHECK(mr_session_eval(s, ids, N, &a[0][0], 1) == 0, "prefill: %s", mr_last_error());
    mr_session_reset(s);
    for (int i = 0; i < N; i++) CHECK(mr_session_eval(s, ids + i, 1, b[i], 0) == 0, "decode");
    mr_session_reset(s);
    CHECK(mr_session_eval(s, ids, 4, &c[0][0], 1) == 0 && mr_session_eval(s, ids + 4, N - 4, &c[4][0], 1) == 0, "chunks");
    CHECK(mr_session_n_past(s) == N, "n_past %d", mr_session_n_past(s));
    double mb = 0, mc = 0;
    for (int i = 0; i < N; i++) {
        double kb = mr_logits_kl(a[i], b[i], VOC), kc = mr_logits_kl(a[i], c[i], VOC);
        if (kb > mb) mb = kb;
        if (kc > mc) mc = kc;
    }
    /* same per-element kernels on every path: only the F16 cache is shared, so the paths agree */
    CHECK(mb < 1e-9 && mc < 1e-9, "batch vs decode KL %g, vs chunked %g", mb, mc);
    /* last-token logits equal the all-logits row */
    float last[VOC];
    mr_session_reset(s);
    mr_session_eval(s, ids, N, last, 0);
    CHECK(!memcmp(last, a[N - 1], sizeof last), "last-token logits differ from the batch's last row");
    /* context and token checks */
    CHECK(mr_session_eval(s, ids, 6, NULL, 0) == -1 && strstr(mr_last_error(), "exceed"), "overflow: %s", mr_last_error());
    int32_t bad = VOC;
    CHECK(mr_session_eval(s, &bad, 1, NULL, 0) == -1 && strstr(mr_last_error(), "out of range"), "bad id: %s", mr_last_error());
    /* thread count does not change the result */
    mr_session_free(s);
    mr_model_free(m);
    mp.n_threads = 1;
    m = mr_model_load(p, &mp);
    s = mr_session_new(m, 16);
    mr_session_eval(s, ids, N, &c[0][0], 1);
    CHECK(!memcmp(a, c, sizeof a), "1 thread differs from 2 threads");
    mr_session_free(s);
    mr_model_free(m);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mr_test_model_XXXXXX");
    if (!mkdtemp(tmpdir)) { printf("FAIL mkdtemp\n"); return 1; }
    RUN(test_rms_norm_softmax);
    RUN(test_rope);
    RUN(test_attention);
    RUN(test_moe_route);
    RUN(test_gating_from_gguf);
    RUN(test_loader_errors);
    RUN(test_batch_decode_chunks);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd)) {}
    return t_finish();
}
