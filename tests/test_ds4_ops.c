/* Unit tests of the DeepSeek-V4 building blocks (src/model/deepseek4/ops.c) against direct
 * implementations of the formulas in ../shared/specs/deepseek4.md. */
#include "test.h"
#include "model/deepseek4/ops.h"
#include "model/ops.h"
#include "base/base.h"

#include <math.h>
#include <stdint.h>

static uint64_t rng = 88172645463325252ull;
static float frand(void) { /* uniform in [-1, 1) */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float)((rng >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* spec §3.5: code c (1..126) of E4M3FN: eeee mmm, (1+m/8)*2^(e-7) or m*2^-9 */
static float e4m3_value(int c) {
    int e = (c >> 3) & 15, m = c & 7;
    return e == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, e - 7);
}
static float e4m3_brute(float v) {
    float s = v < 0 ? -1.0f : 1.0f, a = fminf(fabsf(v), 448.0f);
    int best = 0; double bd = a;
    for (int c = 1; c < 127; c++) {
        double d = fabs((double)a - e4m3_value(c));
        if (d < bd || (d == bd && !(c & 1) && (best & 1))) { bd = d; best = c; }
    }
    return s * (best ? e4m3_value(best) : 0.0f);
}
static const float e2m1_vals[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
static float e2m1_brute(float v) {
    float s = v < 0 ? -1.0f : 1.0f, a = fminf(fabsf(v), 6.0f);
    int best = 0; double bd = a;
    for (int c = 1; c < 8; c++) {
        double d = fabs((double)a - e2m1_vals[c]);
        if (d < bd || (d == bd && !(c & 1) && (best & 1))) { bd = d; best = c; }
    }
    return s * e2m1_vals[best];
}

static void test_e4m3(void) {
    int bad = 0;
    /* every code, every midpoint between neighbours (ties) and random values over the range */
    for (int c = 0; c < 126 && bad < 5; c++) {
        float a = c ? e4m3_value(c) : 0.0f, b = e4m3_value(c + 1), mid = (a + b) * 0.5f;
        float xs[5] = {a, b, mid, nextafterf(mid, 0), nextafterf(mid, 1000)};
        for (int i = 0; i < 5; i++) {
            for (int sg = -1; sg <= 1; sg += 2) {
                float x = sg * xs[i];
                if (ds4_e4m3_round(x) != e4m3_brute(x)) {
                    bad++; CHECK(0, "e4m3(%.9g) = %.9g, expected %.9g", x, ds4_e4m3_round(x), e4m3_brute(x));
                }
            }
        }
    }
    for (int i = 0; i < 200000 && bad < 10; i++) {
        float x = frand() * ldexpf(1.0f, (int)(frand() * 14));
        if (ds4_e4m3_round(x) != e4m3_brute(x)) { bad++; CHECK(0, "e4m3(%.9g)", x); }
    }
    CHECK(ds4_e4m3_round(1000.0f) == 448.0f, "clamp");
    CHECK(ds4_e4m3_round(-1000.0f) == -448.0f, "clamp");
    /* a tie between codes 9 (odd) and 10 (even): goes to 10 */
    CHECK(ds4_e4m3_round((e4m3_value(9) + e4m3_value(10)) / 2) == e4m3_value(10), "tie to even");
}

static void test_e2m1(void) {
    int bad = 0;
    for (int i = 0; i < 100000 && bad < 10; i++) {
        float x = frand() * 7.0f;
        if (ds4_e2m1_round(x) != e2m1_brute(x)) { bad++; CHECK(0, "e2m1(%.9g) = %g vs %g", x, ds4_e2m1_round(x), e2m1_brute(x)); }
    }
    const float ties[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const float want[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f};
    for (int i = 0; i < 7; i++) {
        CHECK(ds4_e2m1_round(ties[i]) == want[i], "tie %g -> %g, want %g", ties[i], ds4_e2m1_round(ties[i]), want[i]);
        CHECK(ds4_e2m1_round(-ties[i]) == -want[i], "tie -%g", ties[i]);
    }
}

static void test_fp8_sim(void) {
    enum { N = 192, R = 64 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = frand() * (i < 64 ? 3.0f : 0.01f);
    x[5] = 7.5f; /* amax of block 0 */
    memcpy(y, x, sizeof x);
    ds4_fp8_sim(y, N, R);
    for (int i = N - R; i < N; i++) CHECK(y[i] == x[i], "rope tail changed at %d", i);
    /* block 0: amax 7.5 -> scale 2^ceil(log2(7.5/448)) = 2^-5 */
    const float sc = ldexpf(1.0f, -5);
    for (int i = 0; i < 64; i++) {
        float want = e4m3_brute(x[i] / sc) * sc;
        CHECK(y[i] == want, "block0[%d] %g vs %g", i, y[i], want);
    }
    float amax = 0; for (int i = 64; i < 128; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float sc1 = ldexpf(1.0f, (int)ceil(log2((double)amax / 448.0)));
    for (int i = 64; i < 128; i++) CHECK(y[i] == e4m3_brute(x[i] / sc1) * sc1, "block1[%d]", i);
    float z[N]; memcpy(z, y, sizeof z); ds4_fp8_sim(z, N, R);
    CHECK(memcmp(z, y, sizeof z) == 0, "not idempotent");
    /* all-zero block: floor 1e-4 keeps it finite and zero */
    float zero[128] = {0}; ds4_fp8_sim(zero, 128, 64);
    for (int i = 0; i < 128; i++) CHECK(zero[i] == 0.0f, "zero block");
}

static void test_fp4_hadamard(void) {
    float x[128], y[128];
    for (int i = 0; i < 128; i++) x[i] = frand();
    memcpy(y, x, sizeof x);
    CHECK(ds4_hadamard(y, 128) == 0, "n=128");
    for (int i = 0; i < 128; i++) {
        double s = 0;
        for (int j = 0; j < 128; j++) s += (__builtin_popcount(i & j) & 1 ? -1.0 : 1.0) * x[j];
        s /= sqrt(128.0);
        CHECK(fabs(s - y[i]) < 1e-5, "H[%d] %g vs %g", i, y[i], s);
        if (t_case_failed) break;
    }
    ds4_hadamard(y, 128); /* orthonormal and symmetric: H H = I */
    for (int i = 0; i < 128; i++) CHECK(fabsf(y[i] - x[i]) < 1e-5f, "HH != I at %d", i);
    CHECK(ds4_hadamard(y, 96) == -1, "96 is not a power of two");
    float f[64];
    for (int i = 0; i < 64; i++) f[i] = frand() * (i < 32 ? 10.0f : 0.001f);
    float g[64]; memcpy(g, f, sizeof f);
    ds4_fp4_sim(g, 64);
    for (int b = 0; b < 2; b++) {
        float amax = 0; for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(f[b * 32 + i]));
        float sc = ldexpf(1.0f, (int)ceil(log2((double)amax / 6.0)));
        for (int i = 0; i < 32; i++) CHECK(g[b * 32 + i] == e2m1_brute(f[b * 32 + i] / sc) * sc, "fp4 block %d [%d]", b, i);
    }
}

/* spec §3.1 steps 4-5 written with doubles and explicit [a][b] indices */
static void test_hc_split(void) {
    enum { NH = 4, MIX = (2 + NH) * NH };
    float mix[MIX], base[MIX], scale[3] = {0.7f, 1.3f, 2.1f};
    for (int i = 0; i < MIX; i++) { mix[i] = frand() * 2; base[i] = frand(); }
    float pre[NH], post[NH], comb[NH * NH];
    const float eps = 1e-6f;
    ds4_hc_split(mix, scale, base, NH, 20, eps, pre, post, comb);
    for (int h = 0; h < NH; h++) {
        double p = 1 / (1 + exp(-(mix[h] * scale[0] + base[h]))) + eps;
        double q = 2 / (1 + exp(-(mix[NH + h] * scale[1] + base[NH + h])));
        CHECK(fabs(pre[h] - p) < 1e-6 && fabs(post[h] - q) < 1e-6, "pre/post %d", h);
    }
    double P[NH][NH]; /* P[a][b] */
    for (int b = 0; b < NH; b++) {
        double mx = -1e30, s = 0;
        for (int a = 0; a < NH; a++) { P[a][b] = mix[2 * NH + a + NH * b] * scale[2] + base[2 * NH + a + NH * b]; if (P[a][b] > mx) mx = P[a][b]; }
        for (int a = 0; a < NH; a++) { P[a][b] = exp(P[a][b] - mx); s += P[a][b]; }
        for (int a = 0; a < NH; a++) P[a][b] = P[a][b] / s + eps;
    }
    for (int it = 0; it < 20; it++) {
        if (it > 0) for (int b = 0; b < NH; b++) { double s = 0; for (int a = 0; a < NH; a++) s += P[a][b]; for (int a = 0; a < NH; a++) P[a][b] /= s + eps; }
        for (int a = 0; a < NH; a++) { double s = 0; for (int b = 0; b < NH; b++) s += P[a][b]; for (int b = 0; b < NH; b++) P[a][b] /= s + eps; }
    }
    for (int a = 0; a < NH; a++) {
        double rs = 0;
        for (int b = 0; b < NH; b++) {
            CHECK(fabs(comb[a + b * NH] - P[a][b]) < 1e-5, "comb[%d][%d] %g vs %g", a, b, comb[a + b * NH], P[a][b]);
            rs += comb[a + b * NH];
        }
        CHECK(fabs(rs - 1) < 1e-4, "row %d sums to %g", a, rs);
    }
}

static void test_hc_combine_expand(void) {
    enum { NH = 4, D = 8 };
    float X[NH * D], v[D], post[NH] = {0.5f, 1.0f, 1.5f, 2.0f}, comb[NH * NH] = {0}, w[NH] = {1, 2, 3, 4};
    for (int i = 0; i < NH * D; i++) X[i] = frand();
    for (int i = 0; i < D; i++) v[i] = frand();
    /* comb[a + b*NH] = 1 iff b == (a+1)%NH: output stream a takes input stream a+1 */
    for (int a = 0; a < NH; a++) comb[a + ((a + 1) % NH) * NH] = 1.0f;
    float Y[NH * D];
    ds4_hc_expand(Y, X, v, post, comb, NH, D);
    for (int a = 0; a < NH; a++)
        for (int i = 0; i < D; i++) {
            float want = post[a] * v[i] + X[((a + 1) % NH) * D + i];
            CHECK(fabsf(Y[a * D + i] - want) < 1e-6f, "expand a=%d i=%d", a, i);
        }
    float y[D];
    ds4_hc_combine(y, X, w, NH, D);
    for (int i = 0; i < D; i++) {
        float want = X[i] + 2 * X[D + i] + 3 * X[2 * D + i] + 4 * X[3 * D + i];
        CHECK(fabsf(y[i] - want) < 1e-5f, "combine %d", i);
    }
    float hw[NH], m[NH] = {0.1f, -0.2f, 0.3f, 0}, hb[NH] = {0, 0, 0, 0.5f};
    ds4_hc_head_weights(hw, m, 2.0f, hb, NH, 1e-6f);
    for (int h = 0; h < NH; h++) CHECK(fabs(hw[h] - (1 / (1 + exp(-(m[h] * 2.0 + hb[h]))) + 1e-6)) < 1e-6, "head w %d", h);
}

static void test_rmsnorm(void) {
    float x[100], w[100], y[100];
    double ss = 0;
    for (int i = 0; i < 100; i++) { x[i] = frand() * 3; w[i] = frand(); ss += (double)x[i] * x[i]; }
    mr_rms_norm(y, x, w, 100, 1e-6f);
    double s = 1 / sqrt(ss / 100 + 1e-6);
    for (int i = 0; i < 100; i++) CHECK(fabs(y[i] - x[i] * s * w[i]) < 1e-5, "rmsnorm %d", i);
}

static void test_rope(void) {
    /* dense layers: no YaRN, angle p * base^(-2i/R) on pair i of the last R dims */
    enum { N = 192, R = 64 };
    ds4_rope r;
    ds4_rope_init(&r, R, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
    float cs[R], x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = frand();
    memcpy(y, x, sizeof x);
    ds4_rope_cache(&r, 37, 0, cs);
    ds4_rope_tail(y, N, R, cs);
    for (int i = 0; i < N - R; i++) CHECK(y[i] == x[i], "non-rotary dim %d changed", i);
    for (int i = 0; i < R / 2; i++) {
        double th = 37.0 * pow(10000.0, -2.0 * i / R);
        double a = x[N - R + 2 * i], b = x[N - R + 2 * i + 1];
        CHECK(fabs(y[N - R + 2 * i] - (a * cos(th) - b * sin(th))) < 2e-4, "pair %d re", i);
        CHECK(fabs(y[N - R + 2 * i + 1] - (a * sin(th) + b * cos(th))) < 2e-4, "pair %d im", i);
    }
    ds4_rope_cache(&r, 37, 1, cs);
    ds4_rope_tail(y, N, R, cs);
    for (int i = 0; i < N; i++) CHECK(fabsf(y[i] - x[i]) < 1e-5f, "inverse does not undo at %d", i);

    /* compressed layers of V4-Flash: base 160000, factor 16, n_orig 65536 -> ramp between pairs 15
     * and 25 (spec §3.4); attn_factor cancels YaRN's magnitude scale */
    const float fs = 1.0f / 16.0f, af = 1.0f / (1.0f + 0.1f * logf(1.0f / fs));
    ds4_rope_init(&r, R, 65536, 160000.0f, fs, 1.0f, af, 32.0f, 1.0f);
    CHECK(r.corr[0] == 15.0f && r.corr[1] == 25.0f, "corr dims %g %g", r.corr[0], r.corr[1]);
    ds4_rope_cache(&r, 1000, 0, cs);
    for (int i = 0; i < R / 2; i++) {
        double base_th = 1000.0 * pow(160000.0, -2.0 * i / R);
        double ramp = 1 - fmin(1, fmax(0, (i - 15.0) / 10.0));
        double th = base_th * fs * (1 - ramp) + base_th * ramp;
        double mag = sqrt((double)cs[2 * i] * cs[2 * i] + (double)cs[2 * i + 1] * cs[2 * i + 1]);
        CHECK(fabs(mag - 1) < 1e-6, "mscale not cancelled: %g", mag);
        CHECK(fabs(atan2(cs[2 * i + 1], cs[2 * i]) - remainder(th, 2 * M_PI)) < 2e-3, "yarn pair %d", i);
    }
}

static void test_pool(void) {
    enum { W = 16, NE = 8 };
    float kv[NE][W], sc[NE][W], out[W];
    const float *kp[NE], *sp[NE];
    for (int j = 0; j < NE; j++) {
        for (int i = 0; i < W; i++) { kv[j][i] = frand(); sc[j][i] = frand() * 3; }
        kp[j] = kv[j]; sp[j] = sc[j];
    }
    for (int i = 0; i < W; i++) sc[1][i] = -INFINITY; /* padding entry */
    ds4_pool(out, kp, sp, NE, W);
    for (int i = 0; i < W; i++) {
        double s = 0, a = 0;
        for (int j = 0; j < NE; j++) if (j != 1) { s += exp(sc[j][i]); a += exp(sc[j][i]) * kv[j][i]; }
        CHECK(fabs(out[i] - a / s) < 1e-5, "pool %d: %g vs %g", i, out[i], a / s);
    }
}

/* several heads over one key set (MQA), against a double-precision implementation of §3.7 */
static void test_attn(void) {
    enum { D = 128, NK = 20, H = 3 };
    float q[H * D], keys[NK * D], out[H * D], scratch[H * NK + (H + 1) * D + NK * D + 2 * NK + 32];
    uint16_t kh16[NK * D];
    const float *kf[NK]; const uint16_t *kh[NK];
    const float sinks[H] = {0.7f, -2.0f, 3.0f};
    for (int i = 0; i < H * D; i++) q[i] = frand() * 4;
    for (int i = 0; i < NK * D; i++) { keys[i] = frand(); kh16[i] = mr_fp32_to_fp16(keys[i]); }
    for (int j = 0; j < NK; j++) { kf[j] = keys + j * D; kh[j] = kh16 + j * D; }
    const float scale = 1.0f / sqrtf((float)D);
    CHECK(ds4_attn_scratch(H, NK, D) <= (int64_t)(sizeof scratch / sizeof scratch[0]), "scratch size");
    ds4_attn_mqa(out, q, H, kf, kh, NK, D, scale, sinks, 0, scratch);
    for (int h = 0; h < H; h++) {
        double l[NK], mx = sinks[h], den = 0;
        for (int j = 0; j < NK; j++) {
            double s = 0; for (int i = 0; i < D; i++) s += (double)q[h * D + i] * keys[j * D + i];
            l[j] = s * scale; if (l[j] > mx) mx = l[j];
        }
        for (int j = 0; j < NK; j++) den += exp(l[j] - mx);
        den += exp(sinks[h] - mx); /* the sink adds to the denominator only */
        for (int i = 0; i < D; i++) {
            double o = 0; for (int j = 0; j < NK; j++) o += exp(l[j] - mx) / den * keys[j * D + i];
            CHECK(fabs(out[h * D + i] - o) < 1e-5, "attn head %d [%d]: %g vs %g", h, i, out[h * D + i], o);
            if (t_case_failed) return;
        }
    }
    /* F16 keys (kf NULL): q and p rounded to F16; close to the float result, not equal */
    const float *none[NK] = {0};
    float out16[H * D];
    ds4_attn_mqa(out16, q, H, none, kh, NK, D, scale, sinks, 1, scratch);
    /* (a plain compare, not fmax: GCC 12 for AArch64 crashes vectorizing an fmax reduction here) */
    double md = 0;
    for (int i = 0; i < H * D; i++) if (fabs(out16[i] - out[i]) > md) md = fabs(out16[i] - out[i]);
    CHECK(md > 0 && md < 2e-3, "f16 path differs by %g", md);
    /* the same F16 values given as floats give the same result */
    float keys16[NK * D], out16b[H * D];
    const float *kf16[NK];
    for (int i = 0; i < NK * D; i++) keys16[i] = mr_fp16_to_fp32(kh16[i]);
    for (int j = 0; j < NK; j++) kf16[j] = keys16 + j * D;
    ds4_attn_mqa(out16b, q, H, kf16, kh, NK, D, scale, sinks, 1, scratch);
    CHECK(memcmp(out16, out16b, sizeof out16) == 0, "float and F16 key rows disagree");
    /* one head at a time gives the same as all heads together */
    float one[D];
    ds4_attn_mqa(one, q + D, 1, kf, kh, NK, D, scale, sinks + 1, 0, scratch);
    CHECK(memcmp(one, out + D, sizeof one) == 0, "head 1 alone differs");
    ds4_attn_mqa(out, q, H, kf, kh, 0, D, scale, sinks, 0, scratch);
    for (int i = 0; i < H * D; i++) CHECK(out[i] == 0.0f, "no keys -> zero");
}

/* The AVX-512 attention (four heads per key load, blocks of keys) equals the AVX2 one bit for bit:
 * head counts with and without a remainder of four, head dims with 32/8/scalar tails, key counts
 * across the 64-key blocks, float / F16 / mixed key rows, probabilities that round to 0 in F16. */
static void test_attn_isa(void) {
    if (!mr_isa_available(MR_ISA_AVX512)) { printf("# no AVX-512: AVX-512 attention not checked\n"); return; }
    static const int Hs[] = {1, 3, 4, 8, 9}, Ds[] = {66, 128, 520}, NKs[] = {0, 1, 63, 64, 150};
    int bad = 0, n = 0;
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 5; c++)
                for (int f16 = 0; f16 < 2; f16++) {
                    const int H = Hs[a], D = Ds[b], NK = NKs[c];
                    float *q = malloc(sizeof(float) * H * D), *keys = malloc(sizeof(float) * (NK + 1) * D);
                    uint16_t *kh16 = malloc(sizeof(uint16_t) * (NK + 1) * D);
                    const float **kf = malloc(sizeof(float *) * (NK + 1));
                    const uint16_t **kh = malloc(sizeof(uint16_t *) * (NK + 1));
                    float *o1 = malloc(sizeof(float) * H * D), *o2 = malloc(sizeof(float) * H * D);
                    float *scr = malloc(sizeof(float) * (size_t)ds4_attn_scratch(H, NK, D));
                    float sinks[9];
                    for (int h = 0; h < H; h++) sinks[h] = frand() * 2;
                    for (int i = 0; i < H * D; i++) q[i] = frand() * 3;
                    for (int i = 0; i < NK * D; i++) { keys[i] = frand(); kh16[i] = mr_fp32_to_fp16(keys[i]); }
                    /* key 5 far from every query: its probability underflows */
                    if (NK > 5) for (int i = 0; i < D; i++) keys[5 * D + i] = -q[i % D] * 40.0f;
                    for (int j = 0; j < NK; j++) {
                        kf[j] = (f16 && j % 3 == 0) ? NULL : keys + (int64_t)j * D;
                        kh[j] = kh16 + (int64_t)j * D;
                        if (f16 && kf[j]) { for (int i = 0; i < D; i++) keys[(int64_t)j * D + i] = mr_fp16_to_fp32(kh16[(int64_t)j * D + i]); }
                    }
                    mr_set_isa(MR_ISA_AVX2);
                    ds4_attn_mqa(o1, q, H, kf, kh, NK, D, 0.05f, sinks, f16, scr);
                    mr_set_isa(MR_ISA_AVX512);
                    ds4_attn_mqa(o2, q, H, kf, kh, NK, D, 0.05f, sinks, f16, scr);
                    if (memcmp(o1, o2, sizeof(float) * H * D)) {
                        if (!bad) printf("# AVX-512 attention differs: H %d D %d nk %d f16 %d\n", H, D, NK, f16);
                        bad++;
                    }
                    n++;
                    free(q); free(keys); free(kh16); free(kf); free(kh); free(o1); free(o2); free(scr);
                }
    mr_set_isa(mr_cpu_best_isa());
    CHECK(bad == 0, "%d of %d cases differ between the AVX2 and AVX-512 attention", bad, n);
}

/* vector kernels: the dispatched (AVX2 or NEON) versions agree with plain loops */
static void test_vec_kernels(void) {
    float x[133], y[133], z[133];
    uint16_t h[133];
    for (int i = 0; i < 133; i++) { x[i] = frand(); y[i] = frand(); z[i] = y[i]; h[i] = mr_fp32_to_fp16(x[i]); }
    for (int n = 0; n <= 133; n += 7) {
        double d = 0; for (int i = 0; i < n; i++) d += (double)x[i] * y[i];
        CHECK(fabs(ds4_dot_f32(x, y, n) - d) < 1e-5, "dot n=%d", n);
    }
    ds4_axpy_f32(z, 0.5f, x, 133);
    for (int i = 0; i < 133; i++) CHECK(fabsf(z[i] - (y[i] + 0.5f * x[i])) < 1e-6f, "axpy %d", i);
    float c[133];
    ds4_f16_to_f32(c, h, 133);
    for (int i = 0; i < 133; i++) CHECK(c[i] == mr_fp16_to_fp32(h[i]), "f16 %d", i);
}

static void test_swiglu_topk(void) {
    float g[4] = {12.0f, -3.0f, 1.0f, 50.0f}, u[4] = {20.0f, -15.0f, 0.5f, 1.0f}, h[4];
    mr_swiglu(h, g, u, 4, 10.0f, 1.0f);
    CHECK(fabsf(h[0] - 10.0f / (1 + expf(-10.0f)) * 10.0f) < 1e-4f, "clamped gate and up");
    CHECK(fabsf(h[1] - (-3.0f / (1 + expf(3.0f))) * -10.0f) < 1e-5f, "gate not clamped below");
    mr_swiglu(h, g, u, 4, 0.0f, 1.0f);
    CHECK(fabsf(h[0] - 12.0f / (1 + expf(-12.0f)) * 20.0f) < 1e-3f, "no clamp when lim = 0");
    float v[10] = {3, 9, 1, 9, 7, -1, 0, 8, 2, 5};
    int idx[4];
    mr_topk(v, 10, 4, idx);
    CHECK(idx[0] == 1 && idx[1] == 3 && idx[2] == 7 && idx[3] == 4, "topk %d %d %d %d", idx[0], idx[1], idx[2], idx[3]);
    float ninf[3] = {-INFINITY, 1, -INFINITY};
    mr_topk(ninf, 3, 3, idx);
    CHECK(idx[0] == 1, "topk with -inf");
}

/* the std::sort emulation: a valid descending order; stable for n <= 16 (insertion sort); for larger
 * n ties come out in libstdc++'s order (checked against g++ 12 on 200k arrays when written; here a
 * fixed case recorded from it) */
static void test_argsort(void) {
    float v[40];
    int idx[40];
    for (int n = 1; n <= 40; n++) {
        for (int i = 0; i < n; i++) v[i] = (float)((i * 7) % 3);
        ds4_argsort_desc(v, n, idx);
        char seen[40] = {0};
        for (int i = 0; i < n; i++) { CHECK(idx[i] >= 0 && idx[i] < n && !seen[idx[i]], "permutation"); seen[idx[i]] = 1; }
        for (int i = 1; i < n; i++) CHECK(v[idx[i - 1]] >= v[idx[i]], "order n=%d", n);
        if (n <= 16) for (int i = 1; i < n; i++) if (v[idx[i - 1]] == v[idx[i]]) CHECK(idx[i - 1] < idx[i], "stable n=%d", n);
    }
    /* 20 values 0/1 with ties: std::sort(idx, idx+20, v[a] > v[b]) with libstdc++ gives this order */
    const float w[20] = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 1};
    const int want[20] = {19, 2, 3, 17, 6, 8, 9, 0, 11, 15, 14, 10, 18, 16, 13, 12, 7, 5, 4, 1};
    ds4_argsort_desc(w, 20, idx);
    for (int i = 0; i < 20; i++) CHECK(idx[i] == want[i], "libstdc++ order at %d: %d vs %d", i, idx[i], want[i]);
}

int main(void) {
    RUN(test_e4m3);
    RUN(test_e2m1);
    RUN(test_fp8_sim);
    RUN(test_fp4_hadamard);
    RUN(test_hc_split);
    RUN(test_hc_combine_expand);
    RUN(test_rmsnorm);
    RUN(test_rope);
    RUN(test_pool);
    RUN(test_attn);
    RUN(test_attn_isa);
    RUN(test_vec_kernels);
    RUN(test_swiglu_topk);
    RUN(test_argsort);
    return t_finish();
}
