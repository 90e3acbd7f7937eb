/* DeepSeek-V4 building blocks (see ops.h). Written from ../shared/specs/deepseek4.md. */
#include "model/deepseek4/ops.h"
#include "model/ops.h"
#include "base/base.h"

#include <math.h>
#include <string.h>

/* ---- hyper-connections ---- */

void ds4_hc_split(const float *mix, const float scale[3], const float *base, int nh, int iters, float eps,
                  float *pre, float *post, float *comb) {
    for (int h = 0; h < nh; h++) pre[h] = mr_sigmoid(mix[h] * scale[0] + base[h]) + eps;
    for (int h = 0; h < nh; h++) post[h] = 2.0f / (1.0f + expf(-(mix[nh + h] * scale[1] + base[nh + h])));
    /* c[a + b*nh]: a (fast) = output stream. Softmax over a for each b, then + eps. */
    float *c = comb;
    for (int b = 0; b < nh; b++) {
        float mx = -INFINITY;
        for (int a = 0; a < nh; a++) {
            const int o = 2 * nh + a + b * nh;
            c[a + b * nh] = mix[o] * scale[2] + base[o];
            if (c[a + b * nh] > mx) mx = c[a + b * nh];
        }
        float sum = 0.0f;
        for (int a = 0; a < nh; a++) { c[a + b * nh] = expf(c[a + b * nh] - mx); sum += c[a + b * nh]; }
        const float inv = 1.0f / sum;
        for (int a = 0; a < nh; a++) c[a + b * nh] = c[a + b * nh] * inv + eps;
    }
    /* normalise over b for each a */
#define DS4_NORM_OVER_B() \
    for (int a = 0; a < nh; a++) { \
        float s = 0.0f; \
        for (int b = 0; b < nh; b++) s += c[a + b * nh]; \
        const float inv = 1.0f / (s + eps); \
        for (int b = 0; b < nh; b++) c[a + b * nh] *= inv; \
    }
    DS4_NORM_OVER_B();
    for (int it = 1; it < iters; it++) {
        for (int b = 0; b < nh; b++) {
            float s = 0.0f;
            for (int a = 0; a < nh; a++) s += c[a + b * nh];
            const float inv = 1.0f / (s + eps);
            for (int a = 0; a < nh; a++) c[a + b * nh] *= inv;
        }
        DS4_NORM_OVER_B();
    }
#undef DS4_NORM_OVER_B
}

/* Both loop over the streams outside and the features inside so the compiler vectorises over i;
 * each y[i] still sees exactly the operations of the textbook loop (0 + w0 x0 + w1 x1 + ..., in
 * stream order), so the results are unchanged bit for bit. */
void ds4_hc_combine(float *y, const float *X, const float *w, int nh, int64_t d) {
    for (int64_t i = 0; i < d; i++) y[i] = 0.0f;
    for (int h = 0; h < nh; h++) {
        const float wh = w[h], *x = X + (int64_t)h * d;
        for (int64_t i = 0; i < d; i++) y[i] += wh * x[i];
    }
}

void ds4_hc_expand(float *Xout, const float *X, const float *v, const float *post, const float *comb,
                   int nh, int64_t d) {
    for (int a = 0; a < nh; a++) {
        float *o = Xout + (int64_t)a * d;
        const float pa = post[a];
        for (int64_t i = 0; i < d; i++) o[i] = v[i] * pa;
        for (int b = 0; b < nh; b++) {
            const float c = comb[a + b * nh], *x = X + (int64_t)b * d;
            for (int64_t i = 0; i < d; i++) o[i] += c * x[i];
        }
    }
}

void ds4_hc_head_weights(float *w, const float *m, float scale, const float *base, int nh, float eps) {
    for (int h = 0; h < nh; h++) w[h] = mr_sigmoid(m[h] * scale + base[h]) + eps;
}

/* ---- RoPE ---- */

static float ds4_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

void ds4_rope_init(ds4_rope *r, int n_rot, int n_ctx_orig, float base, float freq_scale, float ext_factor,
                   float attn_factor, float beta_fast, float beta_slow) {
    r->n_rot = n_rot; r->n_ctx_orig = n_ctx_orig; r->base = base; r->freq_scale = freq_scale;
    r->ext_factor = ext_factor; r->attn_factor = attn_factor; r->beta_fast = beta_fast; r->beta_slow = beta_slow;
    r->theta_scale = powf(base, -2.0f / (float)n_rot);
    const float start = floorf(ds4_corr_dim(n_rot, n_ctx_orig, beta_fast, base));
    const float end = ceilf(ds4_corr_dim(n_rot, n_ctx_orig, beta_slow, base));
    r->corr[0] = start > 0 ? start : 0;
    r->corr[1] = end < (float)(n_rot - 1) ? end : (float)(n_rot - 1);
}

void ds4_rope_cache(const ds4_rope *r, int64_t pos, int inverse, float *cs) {
    float theta = (float)pos;
    for (int i = 0; i < r->n_rot / 2; i++) {
        const float theta_extrap = theta;
        const float theta_interp = r->freq_scale * theta_extrap;
        float th = theta_interp, mscale = r->attn_factor;
        if (r->ext_factor != 0.0f) {
            /* ramp over the integer pair index (ggml: i0/2 with i0 the element index) */
            const float y = ((float)i - r->corr[0]) / fmaxf(0.001f, r->corr[1] - r->corr[0]);
            const float ramp_mix = (1 - fminf(1, fmaxf(0, y))) * r->ext_factor;
            th = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / r->freq_scale);
        }
        cs[2 * i] = cosf(th) * mscale;
        cs[2 * i + 1] = sinf(th) * mscale * (inverse ? -1.0f : 1.0f);
        theta *= r->theta_scale;
    }
}

void ds4_rope_tail(float *x, int n, int n_rot, const float *cs) {
    float *t = x + (n - n_rot);
    for (int i = 0; i < n_rot / 2; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = t[2 * i], x1 = t[2 * i + 1];
        t[2 * i] = x0 * c - x1 * s;
        t[2 * i + 1] = x0 * s + x1 * c;
    }
}

/* ---- FP8 (E4M3FN) / FP4 (E2M1) simulation, Hadamard ----
 * Both formats are "binary floats" with 3 (resp. 1) mantissa bits whose codes increase with the
 * value and whose last code bit is the last mantissa bit, so the nearest value with ties to the
 * even code is round-half-even of |v| on the grid 2^(E - mbits), E = max(floor(log2|v|), Emin). */

float ds4_e4m3_round(float v) {
    const float sign = v < 0.0f ? -1.0f : 1.0f;
    const float ax = fminf(fabsf(v), 448.0f);
    if (!(ax > 0.0f)) return sign * 0.0f;
    int e;
    frexpf(ax, &e);                      /* ax = f * 2^e, f in [0.5, 1) */
    int E = e - 1;
    if (E < -6) E = -6;                  /* subnormals: step 2^-9 */
    const float m = rintf(ldexpf(ax, 3 - E)); /* round half to even (default rounding mode) */
    return sign * ldexpf(m, E - 3);
}

void ds4_fp8_sim(float *x, int n, int n_rot) {
    for (int off = 0; off + 64 <= n - n_rot; off += 64) {
        float amax = 0.0f;
        for (int i = 0; i < 64; i++) amax = fmaxf(amax, fabsf(x[off + i]));
        amax = fmaxf(amax, 1.0e-4f);
        const float scale = ldexpf(1.0f, (int)ceilf(log2f(amax / 448.0f)));
        for (int i = 0; i < 64; i++) {
            float v = x[off + i] / scale;
            v = v > 448.0f ? 448.0f : (v < -448.0f ? -448.0f : v);
            x[off + i] = ds4_e4m3_round(v) * scale;
        }
    }
}

float ds4_e2m1_round(float v) {
    const float sign = v < 0.0f ? -1.0f : 1.0f;
    const float ax = fminf(fabsf(v), 6.0f);
    if (!(ax > 0.0f)) return sign * 0.0f;
    int e;
    frexpf(ax, &e);
    int E = e - 1;
    if (E < 0) E = 0;                    /* below 1: step 0.5 */
    const float m = rintf(ldexpf(ax, 1 - E));
    return sign * ldexpf(m, E - 1);
}

void ds4_fp4_sim(float *x, int n) {
    for (int off = 0; off + 32 <= n; off += 32) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[off + i]));
        amax = fmaxf(amax, 7.052966104933725e-38f);
        const float scale = ldexpf(1.0f, (int)ceilf(log2f(amax / 6.0f)));
        for (int i = 0; i < 32; i++) {
            float v = x[off + i] / scale;
            v = v > 6.0f ? 6.0f : (v < -6.0f ? -6.0f : v);
            x[off + i] = ds4_e2m1_round(v) * scale;
        }
    }
}

int ds4_hadamard(float *x, int n) {
    if (n <= 0 || (n & (n - 1))) return -1;
    for (int h = 1; h < n; h <<= 1)
        for (int b = 0; b < n; b += 2 * h)
            for (int i = b; i < b + h; i++) {
                const float u = x[i], v = x[i + h];
                x[i] = u + v;
                x[i + h] = u - v;
            }
    const float s = n == 128 ? 0.08838834764831845f : (float)(1.0 / sqrt((double)n));
    for (int i = 0; i < n; i++) x[i] *= s;
    return 0;
}

/* ---- compressor pooling ---- */

void ds4_pool(float *out, const float *const *kv, const float *const *sc, int n, int64_t width) {
    float p[256];
    for (int64_t i = 0; i < width; i++) {
        float mx = -INFINITY;
        for (int j = 0; j < n; j++) if (sc[j][i] > mx) mx = sc[j][i];
        double sum = 0.0;
        for (int j = 0; j < n; j++) { p[j] = expf(sc[j][i] - mx); sum += (double)p[j]; }
        const float inv = (float)(1.0 / sum);
        double acc = 0.0;
        for (int j = 0; j < n; j++) acc += (double)(kv[j][i] * (p[j] * inv));
        out[i] = (float)acc;
    }
}

/* ---- attention ---- */

static inline float ds4_round_f16(float x) { return mr_fp16_to_fp32(mr_fp32_to_fp16(x)); }

static float ds4_dot_f32_ref(const float *x, const float *y, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}
static void ds4_axpy_f32_ref(float *y, float a, const float *x, int n) { for (int i = 0; i < n; i++) y[i] += a * x[i]; }
static void ds4_f16_to_f32_ref(float *y, const uint16_t *x, int n) { for (int i = 0; i < n; i++) y[i] = mr_fp16_to_fp32(x[i]); }

/* The vector primitives of the ISA in use: AVX2 ones under AVX2 and AVX-512, NEON ones under neon
 * and dotprod, else the references. */
typedef struct {
    float (*dot)(const float *, const float *, int);
    void (*axpy)(float *, float, const float *, int);
    void (*cvt)(float *, const uint16_t *, int);
} ds4_vec_ops;

static ds4_vec_ops ds4_ops_for_isa(void) {
#if MR_ARCH_X86
    if (mr_isa() >= MR_ISA_AVX2) return (ds4_vec_ops){ds4_dot_f32_avx2, ds4_axpy_f32_avx2, ds4_f16_to_f32_avx2};
#elif MR_ARCH_ARM64
    if (mr_isa() != MR_ISA_SCALAR) return (ds4_vec_ops){ds4_dot_f32_neon, ds4_axpy_f32_neon, ds4_f16_to_f32_neon};
#endif
    return (ds4_vec_ops){ds4_dot_f32_ref, ds4_axpy_f32_ref, ds4_f16_to_f32_ref};
}

float ds4_dot_f32(const float *x, const float *y, int n) { return ds4_ops_for_isa().dot(x, y, n); }
void ds4_axpy_f32(float *y, float a, const float *x, int n) { ds4_ops_for_isa().axpy(y, a, x, n); }
void ds4_f16_to_f32(float *y, const uint16_t *x, int n) { ds4_ops_for_isa().cvt(y, x, n); }

void ds4_softmax_sink(float *s, int n, float sink) {
    float mx = sink;
    for (int j = 0; j < n; j++) if (s[j] > mx) mx = s[j];
    double sum = 0.0;
    for (int j = 0; j < n; j++) { s[j] = expf(s[j] - mx); sum += (double)s[j]; }
    sum += (double)expf(sink - mx);
    const float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) s[j] *= inv;
}

void ds4_attn_mqa(float *out, const float *q, int H, const float *const *kf, const uint16_t *const *kh, int nk, int D,
                  float kq_scale, const float *sinks, int f16, float *scratch) {
#if MR_ARCH_X86
    if (mr_isa() >= MR_ISA_AVX512) {
        ds4_attn_scores_avx512(q, H, kf, kh, nk, D, kq_scale, f16, scratch);
        for (int h = 0; h < H; h++) ds4_softmax_sink(scratch + (int64_t)h * nk, nk, sinks[h]);
        ds4_attn_values_avx512(out, H, nk, D, f16, scratch);
        return;
    }
#endif
    const ds4_vec_ops ops = ds4_ops_for_isa();
    float (*dot)(const float *, const float *, int) = ops.dot;
    void (*axpy)(float *, float, const float *, int) = ops.axpy;
    void (*cvt)(float *, const uint16_t *, int) = ops.cvt;
    float *s = scratch, *row = scratch + (int64_t)H * nk, *qr = row + D;
    const float *qq = q;
    if (f16) { for (int64_t i = 0; i < (int64_t)H * D; i++) qr[i] = ds4_round_f16(q[i]); qq = qr; }
    /* scores s[h*nk + j], each key row loaded (and converted) once for all heads */
    for (int j = 0; j < nk; j++) {
        const float *k = kf[j];
        if (!k) { cvt(row, kh[j], D); k = row; }
        for (int h = 0; h < H; h++) s[(int64_t)h * nk + j] = dot(qq + (int64_t)h * D, k, D) * kq_scale;
    }
    for (int h = 0; h < H; h++) {
        float *sh = s + (int64_t)h * nk;
        ds4_softmax_sink(sh, nk, sinks[h]);
        if (f16) for (int j = 0; j < nk; j++) sh[j] = ds4_round_f16(sh[j]);
    }
    memset(out, 0, sizeof(float) * (size_t)H * (size_t)D);
    for (int j = 0; j < nk; j++) {
        const float *k = kf[j];
        if (!k) { cvt(row, kh[j], D); k = row; }
        for (int h = 0; h < H; h++) {
            const float p = s[(int64_t)h * nk + j];
            if (p != 0.0f) axpy(out + (int64_t)h * D, p, k, D);
        }
    }
}

/* ---- MoE ---- */

/* ---- std::sort emulation (libstdc++ introsort) on int indices, comparator v[a] > v[b] ---- */
#define GT(a, b) (v[a] > v[b])
static void ss_insertion(const float *v, int *f, int *l) {
    if (f == l) return;
    for (int *i = f + 1; i < l; i++) {
        const int x = *i;
        if (GT(x, *f)) { memmove(f + 1, f, sizeof(int) * (size_t)(i - f)); *f = x; }
        else { int *j = i; while (GT(x, j[-1])) { *j = j[-1]; j--; } *j = x; }
    }
}
static void ss_push_heap(const float *v, int *f, long hole, long top, int x) {
    long parent = (hole - 1) / 2;
    while (hole > top && GT(f[parent], x)) { f[hole] = f[parent]; hole = parent; parent = (hole - 1) / 2; }
    f[hole] = x;
}
static void ss_adjust_heap(const float *v, int *f, long hole, long len, int x) {
    const long top = hole;
    long child = hole;
    while (child < (len - 1) / 2) {
        child = 2 * (child + 1);
        if (GT(f[child], f[child - 1])) child--;
        f[hole] = f[child];
        hole = child;
    }
    if ((len & 1) == 0 && child == (len - 2) / 2) {
        child = 2 * (child + 1);
        f[hole] = f[child - 1];
        hole = child - 1;
    }
    ss_push_heap(v, f, hole, top, x);
}
static void ss_heapsort(const float *v, int *f, int *l) {
    const long len = l - f;
    if (len >= 2)
        for (long parent = (len - 2) / 2;; parent--) {
            ss_adjust_heap(v, f, parent, len, f[parent]);
            if (parent == 0) break;
        }
    while (l - f > 1) {
        l--;
        const int x = *l;
        *l = *f;
        ss_adjust_heap(v, f, 0, l - f, x);
    }
}
static void ss_swap(int *a, int *b) { int t = *a; *a = *b; *b = t; }
static void ss_introsort(const float *v, int *f, int *l, int depth) {
    while (l - f > 16) {
        if (depth == 0) { ss_heapsort(v, f, l); return; }
        depth--;
        int *a = f + 1, *b = f + (l - f) / 2, *c = l - 1;
        /* median of a, b, c moved to *f */
        if (GT(*a, *b)) {
            if (GT(*b, *c)) ss_swap(f, b);
            else if (GT(*a, *c)) ss_swap(f, c);
            else ss_swap(f, a);
        } else if (GT(*a, *c)) ss_swap(f, a);
        else if (GT(*b, *c)) ss_swap(f, c);
        else ss_swap(f, b);
        /* unguarded partition of [f+1, l) around *f */
        int *lo = f + 1, *hi = l;
        for (;;) {
            while (GT(*lo, *f)) lo++;
            hi--;
            while (GT(*f, *hi)) hi--;
            if (!(lo < hi)) break;
            ss_swap(lo, hi);
            lo++;
        }
        ss_introsort(v, lo, l, depth);
        l = lo;
    }
}
void ds4_argsort_desc(const float *v, int n, int *idx) {
    for (int i = 0; i < n; i++) idx[i] = i;
    if (n < 2) return;
    int lg = 0;
    while ((2L << lg) <= n) lg++;               /* floor(log2(n)) */
    ss_introsort(v, idx, idx + n, 2 * lg);
    if (n > 16) {
        ss_insertion(v, idx, idx + 16);
        for (int *i = idx + 16; i < idx + n; i++) { const int x = *i; int *j = i; while (GT(x, j[-1])) { *j = j[-1]; j--; } *j = x; }
    } else {
        ss_insertion(v, idx, idx + n);
    }
}
#undef GT
