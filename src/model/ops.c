/* Shared math (see ops.h): RMSNorm, softmax, SwiGLU, RoPE, F16 rows, causal attention. */
#include "model/ops.h"
#include "base/base.h"

#include <float.h>
#include <pthread.h>
#include <stdlib.h>

/* fp16 -> fp32 by table (all 65536 values, exact), built once: the attention inner loops read
 * the F16 cache element by element */
static float mr_f16_table[65536];
static pthread_once_t mr_f16_once = PTHREAD_ONCE_INIT;
static void mr_f16_table_init(void) {
    for (uint32_t i = 0; i < 65536; i++) mr_f16_table[i] = mr_fp16_to_fp32((uint16_t)i);
}

void mr_rms_norm(float *y, const float *x, const float *w, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
    else for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
}

void mr_rms_norm_rows(float *y, const float *x, const float *w, int64_t n, int64_t rows, float eps) {
    for (int64_t r = 0; r < rows; r++) mr_rms_norm(y + r * n, x + r * n, w, n, eps);
}

void mr_softmax(float *y, const float *x, int64_t n) {
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++) if (x[i] > max) max = x[i];
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(x[i] - max);
        y[i] = e;
        sum += (double)e;
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++) y[i] *= inv;
}

void mr_swiglu(float *h, const float *g, const float *u, int64_t n, float lim, float scale) {
    if (!g) { for (int64_t i = 0; i < n; i++) h[i] = mr_silu(u[i]) * scale; return; }
    if (!(lim > 1e-6f)) { for (int64_t i = 0; i < n; i++) h[i] = mr_silu(g[i]) * u[i] * scale; return; }
    for (int64_t i = 0; i < n; i++) {
        const float gv = g[i] > lim ? lim : g[i], uv = u[i] < -lim ? -lim : (u[i] > lim ? lim : u[i]);
        h[i] = mr_silu(gv) * uv * scale;
    }
}

void mr_topk(const float *v, int n, int k, int *idx) {
    /* selection by repeated insertion: n is small (experts, compressed rows up to a few thousand
     * with k <= 512), so an O(n*k) insertion into a sorted prefix is fine */
    int m = 0;
    for (int i = 0; i < n; i++) {
        const float x = v[i];
        if (m == k && !(x > v[idx[m - 1]])) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && x > v[idx[j - 1]]) { idx[j] = idx[j - 1]; j--; }
        idx[j] = i;
    }
}

void mr_swiglu_oai(float *h, const float *g, const float *u, int64_t n, float alpha, float lim) {
    for (int64_t i = 0; i < n; i++) {
        const float x = g[i] < lim ? g[i] : lim, y = u[i] < -lim ? -lim : (u[i] > lim ? lim : u[i]);
        h[i] = x / (1.f + expf(alpha * (-x))) * (y + 1.f);
    }
}

void mr_add(float *y, const float *a, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

float mr_dot(const float *a, const float *b, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---- RoPE ---- */

void mr_rope_params_init(mr_rope_params *rp, int mode, int n_dims) {
    memset(rp, 0, sizeof *rp);
    rp->mode = mode;
    rp->n_dims = n_dims;
    rp->n_ctx_orig = 0;
    rp->freq_base = 10000.0f;
    rp->freq_scale = 1.0f;
    rp->ext_factor = 0.0f;
    rp->attn_factor = 1.0f;
    rp->beta_fast = 32.0f;
    rp->beta_slow = 1.0f;
}

/* YaRN correction dims (ggml_rope_yarn_corr_dims) */
static float rope_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return (float)n_dims * logf((float)n_ctx_orig / (n_rot * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

static void rope_corr_dims(const mr_rope_params *rp, float dims[2]) {
    float start = floorf(rope_corr_dim(rp->n_dims, rp->n_ctx_orig, rp->beta_fast, rp->freq_base));
    float end = ceilf(rope_corr_dim(rp->n_dims, rp->n_ctx_orig, rp->beta_slow, rp->freq_base));
    dims[0] = start > 0 ? start : 0;
    dims[1] = end < (float)(rp->n_dims - 1) ? end : (float)(rp->n_dims - 1);
}

static float rope_ramp(float low, float high, int i0) {
    float d = high - low;
    float y = ((float)(i0 / 2) - low) / (d > 0.001f ? d : 0.001f);
    float c = y < 0 ? 0 : y;
    return 1.0f - (c < 1 ? c : 1);
}

void mr_rope_cache(const mr_rope_params *rp, int64_t pos, float sin_sign, float *cache) {
    const float theta_scale = powf(rp->freq_base, -2.0f / (float)rp->n_dims);
    float corr[2] = {0, 0};
    if (rp->ext_factor != 0.0f) rope_corr_dims(rp, corr);
    float theta = (float)pos;
    for (int i0 = 0; i0 < rp->n_dims; i0 += 2) {
        const float ff = rp->freq_factors ? rp->freq_factors[i0 / 2] : 1.0f;
        const float theta_extrap = theta / ff;
        const float theta_interp = rp->freq_scale * theta_extrap;
        float th = theta_interp, mscale = rp->attn_factor;
        if (rp->ext_factor != 0.0f) {
            float mix = rope_ramp(corr[0], corr[1], i0) * rp->ext_factor;
            th = theta_interp * (1 - mix) + theta_extrap * mix;
            mscale *= 1.0f + 0.1f * logf(1.0f / rp->freq_scale);
        }
        cache[i0] = cosf(th) * mscale;
        cache[i0 + 1] = sinf(th) * mscale * sin_sign;
        theta *= theta_scale;
    }
}

void mr_rope_apply(const mr_rope_params *rp, const float *cache, float *x) {
    const int nd = rp->n_dims;
    if (rp->mode == MR_ROPE_NEOX) {
        for (int i0 = 0; i0 < nd; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1];
            float *p = x + i0 / 2;
            const float x0 = p[0], x1 = p[nd / 2];
            p[0] = x0 * c - x1 * s;
            p[nd / 2] = x0 * s + x1 * c;
        }
    } else {
        for (int i0 = 0; i0 < nd; i0 += 2) {
            const float c = cache[i0], s = cache[i0 + 1];
            const float x0 = x[i0], x1 = x[i0 + 1];
            x[i0] = x0 * c - x1 * s;
            x[i0 + 1] = x0 * s + x1 * c;
        }
    }
}

void mr_rope(const mr_rope_params *rp, float *x, int n_head, int64_t head_stride, int64_t pos) {
    float cache_small[512];
    float *cache = rp->n_dims <= 512 ? cache_small : mr_malloc(sizeof(float) * (size_t)rp->n_dims);
    if (!cache) return; /* n_dims > 512 and out of memory: unreachable in practice */
    mr_rope_cache(rp, pos, 1.0f, cache);
    for (int h = 0; h < n_head; h++) mr_rope_apply(rp, cache, x + h * head_stride);
    if (cache != cache_small) free(cache);
}

/* ---- F16 rows ---- */

void mr_f32_to_f16_row(uint16_t *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = mr_fp32_to_fp16(x[i]);
}

void mr_f16_to_f32_row(float *y, const uint16_t *x, int64_t n) {
    pthread_once(&mr_f16_once, mr_f16_table_init);
    for (int64_t i = 0; i < n; i++) y[i] = mr_f16_table[x[i]];
}

/* ---- attention ---- */

typedef struct {
    const mr_attn_args *a;
    long per_chunk;        /* (token, head) pairs per chunk */
    float *tbuf;           /* per pool thread (mr_pool_worker_id): tfloats each, or NULL (per chunk) */
    size_t tfloats;
    int failed;
} attn_job;

/* one chunk of (token, head) pairs; scratch: n_kv scores + head_dim q + head_dim accumulator */
static void attn_chunk(void *arg, long chunk) {
    attn_job *j = arg;
    const mr_attn_args *a = j->a;
    const int hd = a->head_dim, gq = a->n_head / a->n_head_kv;
    float *s = j->tbuf ? j->tbuf + (size_t)mr_pool_worker_id() * j->tfloats
                       : mr_malloc(sizeof(float) * ((size_t)(a->pos0 + a->n_q) + 2 * (size_t)hd));
    if (!s) { j->failed = 1; return; }
    float *q = s + (a->pos0 + a->n_q);
    float *acc = q + hd;
    long lo = chunk * j->per_chunk, hi = lo + j->per_chunk;
    if (hi > (long)a->n_q * a->n_head) hi = (long)a->n_q * a->n_head;
    for (long w = lo; w < hi; w++) {
        const int t = (int)(w / a->n_head), h = (int)(w % a->n_head), g = h / gq;
        const int pos = a->pos0 + t;
        int j0 = 0;
        if (a->window > 0 && pos - a->window + 1 > 0) j0 = pos - a->window + 1;
        const int nk = pos + 1 - j0;
        const float *qs = a->Q + (int64_t)t * a->q_stride + (int64_t)h * hd;
        /* q in the K dot's partner type (F16 for an F16 cache) */
        if (a->kv_f16) for (int i = 0; i < hd; i++) q[i] = mr_round_f16(qs[i]);
        else memcpy(q, qs, sizeof(float) * (size_t)hd);
        float max = -INFINITY;
        for (int jj = 0; jj < nk; jj++) {
            const int64_t off = (int64_t)(j0 + jj) * a->kv_stride + (int64_t)g * hd;
            /* 8 interleaved partial sums (like a SIMD lane split), then pairwise: the float adds of
             * one chain would bound the speed by their latency */
            float ps[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int i = 0;
            if (a->kv_f16) {
                const uint16_t *k = (const uint16_t *)a->K + off;
                for (; i + 8 <= hd; i += 8)
                    for (int l = 0; l < 8; l++) ps[l] += q[i + l] * mr_f16_table[k[i + l]];
                for (; i < hd; i++) ps[0] += q[i] * mr_f16_table[k[i]];
            } else {
                const float *k = (const float *)a->K + off;
                for (; i + 8 <= hd; i += 8)
                    for (int l = 0; l < 8; l++) ps[l] += q[i + l] * k[i + l];
                for (; i < hd; i++) ps[0] += q[i] * k[i];
            }
            float d = ((ps[0] + ps[4]) + (ps[2] + ps[6])) + ((ps[1] + ps[5]) + (ps[3] + ps[7]));
            d *= a->scale;
            s[jj] = d;
            if (d > max) max = d;
        }
        if (a->sinks && a->sinks[h] > max) max = a->sinks[h];
        double sum = 0.0;
        for (int jj = 0; jj < nk; jj++) {
            float e = expf(s[jj] - max);
            s[jj] = e;
            sum += (double)e;
        }
        if (a->sinks) sum += (double)expf(a->sinks[h] - max);
        const float inv = (float)(1.0 / sum);
        for (int i = 0; i < hd; i++) acc[i] = 0.0f;
        for (int jj = 0; jj < nk; jj++) {
            float p = s[jj] * inv;
            const int64_t off = (int64_t)(j0 + jj) * a->kv_stride + (int64_t)g * hd;
            if (a->kv_f16) {
                p = mr_round_f16(p); /* probabilities in V's partner type */
                const uint16_t *v = (const uint16_t *)a->V + off;
                for (int i = 0; i < hd; i++) acc[i] += p * mr_f16_table[v[i]];
            } else {
                const float *v = (const float *)a->V + off;
                for (int i = 0; i < hd; i++) acc[i] += p * v[i];
            }
        }
        memcpy(a->out + (int64_t)t * a->out_stride + (int64_t)h * hd, acc, sizeof(float) * (size_t)hd);
    }
    if (!j->tbuf) free(s);
}

int mr_attention(mr_pool *pool, const mr_attn_args *a) {
    if (a->n_head_kv <= 0 || a->n_head % a->n_head_kv) {
        mr_set_error("attention: %d heads not a multiple of %d KV heads", a->n_head, a->n_head_kv);
        return -1;
    }
#if MR_ARCH_X86
    /* under AVX-512 a head_dim of 8 * odd stays on the scalar loop (not the AVX2 kernel): the bits of
     * an AVX-512 run do not depend on which head sizes the AVX2 kernel covers */
    if (mr_isa() >= MR_ISA_AVX512) {
        if (a->head_dim % 16 == 0) return mr_attention_avx512(pool, a);
    } else if (mr_isa() >= MR_ISA_AVX2 && a->head_dim % 8 == 0) {
        return mr_attention_avx2(pool, a);
    }
#endif
    pthread_once(&mr_f16_once, mr_f16_table_init);
    const long pairs = (long)a->n_q * a->n_head;
    const int nth = pool ? mr_pool_size(pool) : 1;
    attn_job j = {a, 1, NULL, 0, 0};
    j.per_chunk = (pairs + 4L * nth - 1) / (4L * nth); /* ~4 chunks per thread for balance */
    if (j.per_chunk < 1) j.per_chunk = 1;
    if (a->ws) {
        j.tfloats = ((size_t)(a->pos0 + a->n_q) + 2 * (size_t)a->head_dim + 15) / 16 * 16;
        mr_scratch_reset(a->ws);
        if (!(j.tbuf = mr_scratch_alloc(a->ws, sizeof(float) * j.tfloats * (size_t)nth))) return -1;
    }
    mr_pool_run_chunks(pool, attn_chunk, &j, (pairs + j.per_chunk - 1) / j.per_chunk);
    if (j.failed) { mr_set_error("attention: out of memory"); return -1; }
    return 0;
}
