/* DeepSeek-V4 (`deepseek4`) building blocks: the math that no other architecture uses, as
 * self-contained functions on float arrays (no model, no threads). The section numbers refer to
 * ../shared/specs/deepseek4.md; each function reproduces what the reference computes, including its
 * float/double choices where they can matter (FP8 rounding is discontinuous, so its inputs should be
 * computed the same way).
 *
 * Shapes: a "row" is a contiguous vector. Hyper-connection streams X are Nh rows of d floats
 * (X[h*d + i]); the comb matrix is comb[a + b*Nh] with a = output stream, b = input stream. */
#ifndef MR_DEEPSEEK4_OPS_H
#define MR_DEEPSEEK4_OPS_H
#include <math.h>
#include <stdint.h>

#define DS4_MAX_HC 16

/* The norms (spec §0), sigmoid, softplus and SwiGLU are the shared ones of model/ops.h. */

/* ---- hyper-connections (§3.1, §3.2) ---- */
/* mix[(2+nh)*nh] -> pre[nh], post[nh], comb[nh*nh] (Sinkhorn-normalised). */
void ds4_hc_split(const float *mix, const float scale[3], const float *base, int nh, int iters, float eps,
                  float *pre, float *post, float *comb);
/* y[i] = sum_h w[h] * X[h*d + i] */
void ds4_hc_combine(float *y, const float *X, const float *w, int nh, int64_t d);
/* Xout[a*d+i] = post[a]*v[i] + sum_b comb[a + b*nh] * X[b*d+i]; Xout must not alias X */
void ds4_hc_expand(float *Xout, const float *X, const float *v, const float *post, const float *comb,
                   int nh, int64_t d);
/* HC head weights: w[h] = sigmoid(m[h]*scale + base[h]) + eps */
void ds4_hc_head_weights(float *w, const float *m, float scale, const float *base, int nh, float eps);

/* ---- RoPE on the last n_rot dims, adjacent pairs, optional YaRN (§3.4) ---- */
typedef struct {
    int n_rot;
    int n_ctx_orig;
    float base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    float theta_scale;      /* powf(base, -2/n_rot) */
    float corr[2];          /* YaRN ramp ends (pair indices) */
} ds4_rope;
void ds4_rope_init(ds4_rope *r, int n_rot, int n_ctx_orig, float base, float freq_scale, float ext_factor,
                   float attn_factor, float beta_fast, float beta_slow);
/* cs[2i] = cos, cs[2i+1] = sin (negated if inverse) for pair i < n_rot/2 at position pos */
void ds4_rope_cache(const ds4_rope *r, int64_t pos, int inverse, float *cs);
/* rotate the last n_rot of the n values of x in place with a cache from ds4_rope_cache */
void ds4_rope_tail(float *x, int n, int n_rot, const float *cs);

/* ---- FP8 / FP4 simulation, Hadamard (§3.5, §8) ---- */
/* nearest E4M3FN value of v (|v| clamped to 448), ties to the even code */
float ds4_e4m3_round(float v);
/* blocks of 64 over the first n - n_rot values (n - n_rot must be a multiple of 64) */
void ds4_fp8_sim(float *x, int n, int n_rot);
/* nearest E2M1 value of v (|v| clamped to 6), ties to the even code */
float ds4_e2m1_round(float v);
/* blocks of 32 (n must be a multiple of 32) */
void ds4_fp4_sim(float *x, int n);
/* in-place Walsh-Hadamard transform (n a power of two) scaled by 1/sqrt(n); -1 if n is not one */
int ds4_hadamard(float *x, int n);

/* ---- compressor pooling (§3.6) ---- */
/* out[i] = sum_j softmax_j(sc[j][i]) * kv[j][i] for i < width, j < n (per-feature softmax).
 * Entries with sc = -inf contribute nothing. */
void ds4_pool(float *out, const float *const *kv, const float *const *sc, int n, int64_t width);

/* ---- attention with sinks, several query heads over one shared key/value set (§3.7) ----
 * Key/value row j (D values, used as key and as value) is kf[j] (floats) if kf[j] != NULL, else kh[j]
 * (F16). For head h < H: out[h*D..] = sum_j softmax_with_sink(q[h*D..] . key_j * kq_scale, sinks[h]) key_j.
 * f16: the keys are F16 values (an F16 cache), so q is rounded to F16 for the dot products and the
 * probabilities are rounded to F16 before the value sum, like ggml's mul_mat with F16 K and V.
 * scratch: ds4_attn_scratch(H, nk, D) floats. Each key row is read once for all heads (MQA).
 * With AVX-512 the register-blocked build is used (same results as the AVX2 one). */
static inline int64_t ds4_attn_scratch(int H, int nk, int D) {
    return (int64_t)H * nk + (int64_t)(H + 1) * D + (int64_t)nk * D + 2 * (int64_t)nk + 32;
}
void ds4_attn_mqa(float *out, const float *q, int H, const float *const *kf, const uint16_t *const *kh, int nk, int D,
                  float kq_scale, const float *sinks, int f16, float *scratch);
/* softmax of s[n] with a sink logit counted in the sum (no value): max, exp(s - max) summed in double
 * with exp(sink - max), then s *= 1/sum (both builds of ds4_attn_mqa) */
void ds4_softmax_sink(float *s, int n, float sink);
/* the AVX-512 build (ops_avx512.c): four heads per key load, bit for bit the AVX2 path, in two
 * halves around ds4_softmax_sink: the scores s [H][nk] at the start of scratch, then (after the
 * softmax of each head's row) the F16 rounding of s when f16 and the value sum into out [H][D] */
void ds4_attn_scores_avx512(const float *q, int H, const float *const *kf, const uint16_t *const *kh, int nk, int D,
                            float kq_scale, int f16, float *scratch);
void ds4_attn_values_avx512(float *out, int H, int nk, int D, int f16, float *scratch);

/* vector kernels (AVX2 or NEON when available, else scalar): dot products accumulate in float */
float ds4_dot_f32(const float *x, const float *y, int n);
void ds4_axpy_f32(float *y, float a, const float *x, int n);       /* y += a x */
void ds4_f16_to_f32(float *y, const uint16_t *x, int n);
/* the AVX2 versions (ops_avx2.c) */
float ds4_dot_f32_avx2(const float *x, const float *y, int n);
void ds4_axpy_f32_avx2(float *y, float a, const float *x, int n);
void ds4_f16_to_f32_avx2(float *y, const uint16_t *x, int n);
/* the AArch64 versions (ops_neon.c) */
float ds4_dot_f32_neon(const float *x, const float *y, int n);
void ds4_axpy_f32_neon(float *y, float a, const float *x, int n);
void ds4_f16_to_f32_neon(float *y, const uint16_t *x, int n);

/* ---- MoE (§3.9): the router is model/moe.h's mr_moe_route (sqrt-softplus gating, hash ids as
 * given experts), the experts its engine; top-k is model/ops.h's mr_topk ---- */

/* idx[0..n) = argsort of v by descending value, with the same tie order as the reference's ggml
 * argsort: std::sort of the indices 0..n-1 as implemented by GCC's libstdc++ (introsort: median-of-3
 * quicksort down to runs of 16, heapsort past the depth limit, final insertion sort). Ties are
 * therefore not kept in index order when n > 16. */
void ds4_argsort_desc(const float *v, int n, int *idx);

#endif
