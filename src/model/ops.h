/* Shared math for the forward passes, written to reproduce ggml's CPU numerics (the reference):
 * where ggml accumulates in double (RMSNorm, softmax sums) so do we; RoPE angles are built the way
 * ggml's rope cache builds them (theta *= theta_scale in float, YaRN ramp). Vectors are float. */
#ifndef MR_OPS_H
#define MR_OPS_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "base/base.h"
#include "base/pool.h"

/* y = x / sqrt(mean(x^2) + eps) [* w]. Sum of squares in double, mean and scale in float
 * (ggml_compute_forward_rms_norm_f32), then the weight multiply (ggml_mul) if w != NULL. y may be x. */
void mr_rms_norm(float *y, const float *x, const float *w, int64_t n, float eps);
/* the same for `rows` vectors of n floats (row r at x + r*n) */
void mr_rms_norm_rows(float *y, const float *x, const float *w, int64_t n, int64_t rows, float eps);

/* y = softmax(x) over n values: max, exp(x - max) with the sum in double, then y *= 1/sum
 * (ggml_compute_forward_soft_max_f32). y may be x. */
void mr_softmax(float *y, const float *x, int64_t n);

static inline float mr_silu(float x) { return x / (1.0f + expf(-x)); }
static inline float mr_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
/* ggml CPU softplus: x if x > 20 else log(1 + e^x), written logf(1 + expf(x)) like ggml (log1pf
 * gives the same golden KL for deepseek4's router; this form keeps its logits as they were) */
static inline float mr_softplus(float x) { return x > 20.0f ? x : logf(1.0f + expf(x)); }
/* The activation of every FFN and expert (ggml swiglu_split, with deepseek4's clamp and routing
 * weight), element by element, h may alias g or u:
 *   h[i] = silu(min(g[i], lim)) * clamp(u[i], -lim, lim) * scale    lim > 1e-6
 *   h[i] = silu(g[i]) * u[i] * scale                                 otherwise
 *   h[i] = silu(u[i]) * scale                                        g == NULL (no gate tensor)
 * scale is the routing weight when it is applied before the down product (deepseek4), else 1
 * (a product by 1 is exact, so the result is that of the formula without it). */
void mr_swiglu(float *h, const float *g, const float *u, int64_t n, float lim, float scale);
/* gpt-oss's SwiGLU-OAI (ggml_swiglu_oai): x = min(g, lim), y = clamp(u, -lim, lim),
 * h = x / (1 + exp(-alpha x)) * (y + 1). h may alias g or u. */
void mr_swiglu_oai(float *h, const float *g, const float *u, int64_t n, float alpha, float lim);
void mr_add(float *y, const float *a, const float *b, int64_t n);  /* y = a + b */
/* a . b over n floats, summed in float in index order */
float mr_dot(const float *a, const float *b, int64_t n);
/* top-k indices of v[n] by descending value (ties: lower index first); k <= n */
void mr_topk(const float *v, int n, int k, int *idx);

/* ---- RoPE (ggml_rope_ext) ----
 * NORMAL (ggml mode 0, llama): rotates adjacent pairs (x[2i], x[2i+1]).
 * NEOX (ggml mode 2, qwen3moe, ...): rotates (x[i], x[i + n_dims/2]).
 * Pair i (i < n_dims/2) uses theta = pos * freq_base^(-2i/n_dims) (built by repeated float
 * multiplication, like ggml), divided by freq_factors[i] if given, then YaRN:
 *   theta_interp = freq_scale * theta; if ext_factor != 0 the two are mixed by the ramp over the
 *   correction dims (beta_fast, beta_slow, n_ctx_orig) and mscale *= 1 + 0.1 ln(1/freq_scale);
 *   cos/sin are multiplied by mscale = attn_factor.
 * Dims from n_dims to the head size are left unchanged. */
enum { MR_ROPE_NORMAL = 0, MR_ROPE_NEOX = 2 };
typedef struct {
    int mode;            /* MR_ROPE_NORMAL or MR_ROPE_NEOX */
    int n_dims;          /* rotated dims per head (rope.dimension_count) */
    int n_ctx_orig;      /* rope.scaling.original_context_length (YaRN) */
    float freq_base;     /* rope.freq_base (10000) */
    float freq_scale;    /* 1 / rope.scaling.factor (1) */
    float ext_factor;    /* YaRN extrapolation mix: 1 when scaling type is yarn, else 0 */
    float attn_factor;   /* magnitude scale (1) */
    float beta_fast, beta_slow; /* YaRN (32, 1) */
    const float *freq_factors;  /* optional [n_dims/2] (rope_freqs.weight), NULL if none */
} mr_rope_params;
void mr_rope_params_init(mr_rope_params *rp, int mode, int n_dims); /* the defaults listed above */
/* cache[2i] = cos, cache[2i+1] = sin (times sin_sign: +1 forward, -1 inverse) for pos; cache[n_dims] */
void mr_rope_cache(const mr_rope_params *rp, int64_t pos, float sin_sign, float *cache);
/* rotate one head (head_dim >= n_dims values) in place with a cache from mr_rope_cache */
void mr_rope_apply(const mr_rope_params *rp, const float *cache, float *x);
/* rotate n_head heads of one token (head h at x + h*head_stride) at position pos */
void mr_rope(const mr_rope_params *rp, float *x, int n_head, int64_t head_stride, int64_t pos);

/* ---- F16 rows ---- */
void mr_f32_to_f16_row(uint16_t *y, const float *x, int64_t n);  /* round to nearest even, like ggml */
void mr_f16_to_f32_row(float *y, const uint16_t *x, int64_t n);
static inline float mr_round_f16(float x) { return mr_fp16_to_fp32(mr_fp32_to_fp16(x)); }

/* ---- causal attention over a KV cache (llama.cpp without flash attention) ----
 * For token t (t < n_q, position pos0 + t) and head h (KV head g = h / (n_head / n_head_kv)):
 *   s_j = scale * dot(q_t,h, k_j,g)    for kv positions j in [j_min, pos0 + t]
 *   p = softmax(s) (+ sink logit of head h if sinks != NULL: counted in the sum, no value)
 *   out_t,h = sum_j p_j v_j,g
 * j_min = 0, or pos0 + t - window + 1 if window > 0 (sliding window).
 * With an F16 cache this matches ggml's mul_mat numerics: q is rounded to F16 before the K dot
 * (F16's dot partner type) and p is rounded to F16 before the V product. Dots accumulate in float.
 * K, V: element (j, g, i) at K + j*kv_stride + g*head_dim + i (uint16_t F16 if kv_f16, else float).
 * Q: (t, h, i) at Q + t*q_stride + h*head_dim + i; out: (t, h, i) at out + t*out_stride + h*head_dim + i.
 * Threads split (t, h) pairs. Returns -1 on allocation failure. */
typedef struct {
    int n_q, pos0;
    int n_head, n_head_kv, head_dim;
    float scale;
    int window;            /* 0 = full causal */
    const float *sinks;    /* [n_head] or NULL */
    const float *Q; int64_t q_stride;
    const void *K, *V; int kv_f16; int64_t kv_stride;
    float *out; int64_t out_stride;
    mr_scratch *ws;        /* the threads' buffers from this arena (reset by the call; NULL: allocated) */
} mr_attn_args;
int mr_attention(mr_pool *pool, const mr_attn_args *a);
/* The kernels mr_attention uses (one body, attn_kern_x86.h): AVX-512 when that ISA is in use and
 * head_dim % 16 == 0 (attn_avx512.c); AVX2 when AVX2 is the ISA in use and head_dim % 8 == 0
 * (attn_avx2.c). Each gives the same bits for a batch as for one token at a time. */
int mr_attention_avx512(mr_pool *pool, const mr_attn_args *a);
int mr_attention_avx2(mr_pool *pool, const mr_attn_args *a);
#endif
