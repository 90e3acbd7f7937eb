/* Sampler and RNG: determinism, each filter on its own, the distribution of the final draw. */
#include "test.h"
#include "moerun.h"

#include <math.h>
#include <string.h>

static void test_rng(void) {
    /* xoshiro256** reference outputs for the state {1, 2, 3, 4} */
    mr_rng r = { { 1, 2, 3, 4 } };
    uint64_t want[4] = { 11520ull, 0ull, 1509978240ull, 1215971899390074240ull };
    for (int i = 0; i < 4; i++) {
        uint64_t v = mr_rng_next(&r);
        CHECK(v == want[i], "output %d: %llu", i, (unsigned long long)v);
    }
    mr_rng a, b, c;
    mr_rng_seed(&a, 42); mr_rng_seed(&b, 42); mr_rng_seed(&c, 43);
    int same = 1, differ = 0;
    double mean = 0;
    for (int i = 0; i < 10000; i++) {
        double x = mr_rng_uniform(&a), y = mr_rng_uniform(&b), z = mr_rng_uniform(&c);
        same &= x == y;
        differ += x != z;
        CHECK(x >= 0 && x < 1, "uniform out of range: %g", x);
        mean += x;
    }
    CHECK(same, "same seed, different sequence");
    CHECK(differ > 9990, "seeds 42 and 43 agree %d times", 10000 - differ);
    CHECK(fabs(mean / 10000 - 0.5) < 0.01, "mean %g", mean / 10000);
}

static mr_sampler *mk(float temp, int top_k, float top_p, float min_p, float pen, int last_n, uint64_t seed, int nv) {
    mr_sampler_params p;
    mr_sampler_default_params(&p);
    p.temperature = temp; p.top_k = top_k; p.top_p = top_p; p.min_p = min_p;
    p.repeat_penalty = pen; p.repeat_last_n = last_n; p.seed = seed;
    return mr_sampler_new(&p, nv);
}

static void test_greedy(void) {
    float l[6] = { 0.5f, 3.0f, -1.0f, 3.0f, 2.9f, NAN };
    mr_sampler *s = mk(0.0f, 40, 0.95f, 0.05f, 1.0f, 64, 1, 6);
    CHECK(s, "%s", mr_last_error());
    for (int i = 0; i < 5; i++) CHECK(mr_sampler_sample(s, l) == 1, "greedy: tie goes to the lower id");
    mr_sampler_free(s);
    CHECK(!mr_sampler_new(NULL, 0), "empty vocabulary accepted");
}

static void test_repeat_penalty(void) {
    float l[3] = { 2.0f, 1.9f, -1.0f };
    mr_sampler *s = mk(0.0f, 0, 1.0f, 0.0f, 1.1f, 2, 1, 3);
    CHECK(mr_sampler_sample(s, l) == 0, "no history");
    mr_sampler_accept(s, 0);
    mr_sampler_accept(s, 0); /* penalised once, not per occurrence */
    CHECK(mr_sampler_sample(s, l) == 1, "2.0 / 1.1 < 1.9");
    float l2[3] = { 2.0f, 2.05f, 2.1f };
    mr_sampler_accept(s, 2);
    mr_sampler_accept(s, 1); /* window of 2: tokens 2 and 1, token 0 fell out */
    CHECK(mr_sampler_sample(s, l2) == 0, "window: penalised 1 and 2, not 0");
    float l3[3] = { -1.0f, -1.05f, -5.0f };
    mr_sampler_reset(s);
    mr_sampler_accept(s, 0);
    CHECK(mr_sampler_sample(s, l3) == 1, "negative logits are multiplied by the penalty");
    mr_sampler_free(s);
}

/* draw many samples, return the frequency of each id */
static void freqs(mr_sampler *s, const float *l, int nv, int n, double *f) {
    for (int i = 0; i < nv; i++) f[i] = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = mr_sampler_sample(s, l);
        if (id >= 0 && id < nv) f[id] += 1.0 / n;
    }
}

static void test_distribution(void) {
    float l[4] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
    double f[4];
    mr_sampler *s = mk(1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 7, 4);
    freqs(s, l, 4, 40000, f);
    CHECK(fabs(f[0] - 0.5) < 0.015 && fabs(f[1] - 0.3) < 0.015 && fabs(f[2] - 0.15) < 0.015 && fabs(f[3] - 0.05) < 0.01,
          "frequencies %.3f %.3f %.3f %.3f", f[0], f[1], f[2], f[3]);
    mr_sampler_free(s);
    /* temperature 2: p ~ sqrt(p) renormalised */
    s = mk(2.0f, 0, 1.0f, 0.0f, 1.0f, 64, 7, 4);
    freqs(s, l, 4, 40000, f);
    double z = sqrt(0.5) + sqrt(0.3) + sqrt(0.15) + sqrt(0.05);
    CHECK(fabs(f[0] - sqrt(0.5) / z) < 0.015 && fabs(f[3] - sqrt(0.05) / z) < 0.015, "temp 2: %.3f %.3f", f[0], f[3]);
    mr_sampler_free(s);
    /* same seed, same draws; reset starts over */
    mr_sampler *a = mk(1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 99, 4), *b = mk(1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 99, 4);
    int32_t seq[64];
    int same = 1;
    for (int i = 0; i < 64; i++) { seq[i] = mr_sampler_sample(a, l); same &= seq[i] == mr_sampler_sample(b, l); }
    mr_sampler_reset(a);
    for (int i = 0; i < 64; i++) same &= seq[i] == mr_sampler_sample(a, l);
    CHECK(same, "not reproducible");
    mr_sampler_free(a); mr_sampler_free(b);
}

static void test_filters(void) {
    float l[4] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
    double f[4];
    /* top-k 2: only ids 0 and 1, in ratio 5:3 */
    mr_sampler *s = mk(1.0f, 2, 1.0f, 0.0f, 1.0f, 64, 3, 4);
    freqs(s, l, 4, 20000, f);
    CHECK(f[2] == 0 && f[3] == 0 && fabs(f[0] - 0.625) < 0.02, "top-k: %.3f %.3f %.3f %.3f", f[0], f[1], f[2], f[3]);
    mr_sampler_free(s);
    /* top-p 0.7: 0.5 + 0.3 reaches it, so ids 0 and 1 */
    s = mk(1.0f, 0, 0.7f, 0.0f, 1.0f, 64, 3, 4);
    freqs(s, l, 4, 20000, f);
    CHECK(f[2] == 0 && f[3] == 0 && f[1] > 0.3, "top-p: %.3f %.3f %.3f %.3f", f[0], f[1], f[2], f[3]);
    mr_sampler_free(s);
    /* top-p 0.5: the first token alone reaches it */
    s = mk(1.0f, 0, 0.5f, 0.0f, 1.0f, 64, 3, 4);
    freqs(s, l, 4, 2000, f);
    CHECK(f[1] == 0 && f[2] == 0 && f[3] == 0, "top-p 0.5: %.3f", f[0]);
    mr_sampler_free(s);
    /* min-p 0.25: p >= 0.125 -> ids 0, 1, 2 */
    s = mk(1.0f, 0, 1.0f, 0.25f, 1.0f, 64, 3, 4);
    freqs(s, l, 4, 20000, f);
    CHECK(f[3] == 0 && f[2] > 0.1, "min-p: %.3f %.3f %.3f %.3f", f[0], f[1], f[2], f[3]);
    mr_sampler_free(s);
    /* top-k 1 is greedy at any temperature */
    s = mk(5.0f, 1, 1.0f, 0.0f, 1.0f, 64, 3, 4);
    freqs(s, l, 4, 1000, f);
    CHECK(f[1] == 0 && f[2] == 0 && f[3] == 0, "top-k 1: %.3f", f[0]);
    mr_sampler_free(s);
}

/* top-k selection on a large vocabulary agrees with sorting */
static void test_top_k_large(void) {
    enum { NV = 5000 };
    static float l[NV];
    mr_rng r;
    mr_rng_seed(&r, 5);
    for (int i = 0; i < NV; i++) l[i] = (float)(mr_rng_uniform(&r) * 10.0);
    l[1234] = 20.0f; l[4321] = 19.0f; l[17] = 19.0f;
    /* k = 3, very low temperature: only 1234 (and never anything outside the top 3) */
    mr_sampler *s = mk(0.01f, 3, 1.0f, 0.0f, 1.0f, 64, 3, NV);
    int bad = 0;
    for (int i = 0; i < 200; i++) bad += mr_sampler_sample(s, l) != 1234;
    CHECK(!bad, "top-3 at low temperature returned another id %d times", bad);
    mr_sampler_free(s);
    /* k = 3, high temperature: ids 1234, 17, 4321 only */
    s = mk(100.0f, 3, 1.0f, 0.0f, 1.0f, 64, 3, NV);
    int seen[3] = { 0 };
    for (int i = 0; i < 600; i++) {
        int32_t id = mr_sampler_sample(s, l);
        if (id == 1234) seen[0]++; else if (id == 17) seen[1]++; else if (id == 4321) seen[2]++; else bad++;
    }
    CHECK(!bad && seen[0] && seen[1] && seen[2], "top-3: %d %d %d, %d others", seen[0], seen[1], seen[2], bad);
    mr_sampler_free(s);
}

/* found by tests/fuzz/fuzz_sampler.c: repeat_last_n 2^31-1 asked for an 8 GiB history (and
 * overflowed int computing its size) */
static void test_last_n_bound(void) {
    mr_sampler_params p;
    mr_sampler_default_params(&p);
    p.repeat_last_n = 0x7fffffff;
    mr_sampler *s = mr_sampler_new(&p, 16);
    CHECK(!s && strstr(mr_last_error(), "repeat_last_n"), "accepted repeat_last_n 2^31-1");
    mr_sampler_free(s);
    p.repeat_last_n = MR_SAMPLER_MAX_LAST_N;
    s = mr_sampler_new(&p, 16);
    CHECK(s != NULL, "refused repeat_last_n %d: %s", MR_SAMPLER_MAX_LAST_N, mr_last_error());
    mr_sampler_free(s);
}

/* OpenAI presence / frequency penalties on a 5-token vocabulary, expectations by hand: a token
 * generated c times in this reply loses presence + c * frequency; prompt tokens (before
 * mr_sampler_begin_reply) do not count; the repetition penalty divides first (llama.cpp's order). */
static mr_sampler *mkpen(float temp, float rep, float pres, float freq) {
    mr_sampler_params p;
    mr_sampler_default_params(&p);
    p.temperature = temp; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f;
    p.repeat_penalty = rep; p.presence_penalty = pres; p.frequency_penalty = freq; p.seed = 11;
    return mr_sampler_new(&p, temp > 0 ? 4 : 5);
}

static void test_presence_frequency(void) {
    const float l[5] = { 1.0f, 2.0f, 0.5f, 1.9f, 0.0f };
    mr_sampler *s = mkpen(0.0f, 1.0f, 0.2f, 0.0f);
    CHECK(s, "%s", mr_last_error());
    mr_sampler_accept(s, 1); /* the prompt */
    mr_sampler_begin_reply(s);
    CHECK(mr_sampler_sample(s, l) == 1, "a prompt token is not penalised");
    mr_sampler_accept(s, 1);
    CHECK(mr_sampler_sample(s, l) == 3, "presence: 2.0 - 0.2 = 1.8 < 1.9");
    mr_sampler_accept(s, 1);
    CHECK(mr_sampler_sample(s, l) == 3, "presence counts once");
    mr_sampler_begin_reply(s);
    CHECK(mr_sampler_sample(s, l) == 1, "a new reply starts without penalties");
    mr_sampler_free(s);

    s = mkpen(0.0f, 1.0f, 0.0f, 0.06f);
    mr_sampler_accept(s, 1);
    CHECK(mr_sampler_sample(s, l) == 1, "frequency once: 2.0 - 0.06 = 1.94 > 1.9");
    mr_sampler_accept(s, 1);
    CHECK(mr_sampler_sample(s, l) == 3, "frequency twice: 2.0 - 0.12 = 1.88 < 1.9");
    mr_sampler_reset(s);
    CHECK(mr_sampler_sample(s, l) == 1, "reset forgets the counts");
    mr_sampler_free(s);

    /* order: token 3 generated once, repeat 1.25 and presence 0.1: 1.9 / 1.25 - 0.1 = 1.42 < 1.43
     * (presence first would give (1.9 - 0.1) / 1.25 = 1.44 > 1.43) */
    const float l2[5] = { 1.43f, -5.0f, -5.0f, 1.9f, -5.0f };
    s = mkpen(0.0f, 1.25f, 0.1f, 0.0f);
    mr_sampler_accept(s, 3);
    CHECK(mr_sampler_sample(s, l2) == 0, "repetition penalty divides before presence subtracts");
    mr_sampler_free(s);

    /* sampled: p = (0.5, 0.3, 0.15, 0.05), token 0 generated twice, frequency 0.5: its weight is
     * 0.5 e^-1 = 0.18394, total 0.68394 -> (0.2689, 0.4386, 0.2193, 0.0731) */
    const float l3[4] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
    double f[4];
    s = mkpen(1.0f, 1.0f, 0.0f, 0.5f);
    mr_sampler_accept(s, 0);
    mr_sampler_accept(s, 0);
    freqs(s, l3, 4, 40000, f);
    CHECK(fabs(f[0] - 0.2689) < 0.015 && fabs(f[1] - 0.4386) < 0.015 && fabs(f[2] - 0.2193) < 0.015 && fabs(f[3] - 0.0731) < 0.01,
          "frequencies %.4f %.4f %.4f %.4f", f[0], f[1], f[2], f[3]);
    mr_sampler_free(s);
}

static mr_sampler *mkbias(float temp, int n, const int32_t *ids, const float *vals, int nv) {
    mr_sampler_params p;
    mr_sampler_default_params(&p);
    p.temperature = temp; p.top_k = 0; p.top_p = 1.0f; p.min_p = 0.0f; p.seed = 5;
    p.bias_ids = ids; p.bias_vals = vals; p.n_bias = n;
    return mr_sampler_new(&p, nv);
}

/* logit_bias: added before everything else, clamped to [-100, 100], -100 bans; bad ids refused. */
static void test_logit_bias(void) {
    const float l[5] = { 1.0f, 2.0f, 0.5f, 1.9f, 0.0f };
    int32_t ids[3] = { 1, 2, 4 };
    float v[3] = { -100.0f, 0.0f, 0.0f };
    mr_sampler *s = mkbias(0.0f, 1, ids, v, 5);
    CHECK(s && mr_sampler_sample(s, l) == 3, "token 1 banned: the next best is 3");
    mr_sampler_free(s);
    v[0] = 0.0f; v[1] = 1.45f;
    s = mkbias(0.0f, 2, ids, v, 5);
    CHECK(mr_sampler_sample(s, l) == 1, "0.5 + 1.45 = 1.95 < 2.0");
    mr_sampler_free(s);
    v[1] = 1.6f;
    s = mkbias(0.0f, 2, ids, v, 5);
    CHECK(mr_sampler_sample(s, l) == 2, "0.5 + 1.6 = 2.1 > 2.0");
    mr_sampler_free(s);
    /* +150 is clamped to +100: token 4 gets 0 + 100 < token 1's 2.0 + 99 = 101 (unclamped 150 would win) */
    ids[0] = 1; v[0] = 99.0f; ids[1] = 4; v[1] = 150.0f;
    s = mkbias(0.0f, 2, ids, v, 5);
    CHECK(mr_sampler_sample(s, l) == 1, "a bias of +150 is not clamped to +100");
    mr_sampler_free(s);
    /* sampled: p = (0.5, 0.3, 0.15, 0.05) with token 0 banned -> (0, 0.6, 0.3, 0.1); never drawn */
    const float l3[4] = { logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f) };
    int32_t b0 = 0;
    float ban = -100.0f;
    double f[4];
    s = mkbias(1.0f, 1, &b0, &ban, 4);
    freqs(s, l3, 4, 40000, f);
    CHECK(f[0] == 0 && fabs(f[1] - 0.6) < 0.015 && fabs(f[2] - 0.3) < 0.015 && fabs(f[3] - 0.1) < 0.01,
          "with a ban: %.4f %.4f %.4f %.4f", f[0], f[1], f[2], f[3]);
    mr_sampler_free(s);
    /* refused: an id outside the vocabulary, an id twice, NaN */
    int32_t bad[2] = { 5, 0 };
    float bv[2] = { 1.0f, 1.0f };
    CHECK(!mkbias(0.0f, 1, bad, bv, 5) && strstr(mr_last_error(), "outside"), "id 5 of 5 accepted: %s", mr_last_error());
    bad[0] = 3; bad[1] = 3;
    CHECK(!mkbias(0.0f, 2, bad, bv, 5) && strstr(mr_last_error(), "twice"), "repeated id accepted: %s", mr_last_error());
    bad[1] = 2; bv[1] = NAN;
    CHECK(!mkbias(0.0f, 2, bad, bv, 5) && strstr(mr_last_error(), "not a number"), "NaN accepted: %s", mr_last_error());
}

int main(void) {
    RUN(test_rng);
    RUN(test_greedy);
    RUN(test_repeat_penalty);
    RUN(test_distribution);
    RUN(test_filters);
    RUN(test_top_k_large);
    RUN(test_last_n_bound);
    RUN(test_presence_frequency);
    RUN(test_logit_bias);
    return t_finish();
}
