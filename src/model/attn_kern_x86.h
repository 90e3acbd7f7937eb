/* Causal attention (mr_attention semantics, see ops.h) on W-lane float vectors, written once and
 * compiled per ISA: attn_avx512.c (W = 16, __m512) and attn_avx2.c (W = 8, __m256). head_dim must be
 * a multiple of W.
 *
 * Work unit: one KV head g and a block of consecutive query tokens; its rows are (token, head) for the
 * n_head / n_head_kv query heads that share g, so every K and V row converted from F16 is reused by
 * all of them. KV positions go in tiles of W at absolute multiples of W:
 *   pass 1: per tile, the W K rows are converted to float once; for each row whose range
 *           [j_min, pos] meets the tile: W dot products (one W-lane accumulator per position over
 *           head_dim, then a transposing tree reduction to one vector of W scores), times scale;
 *           lanes outside the range are set to -inf.
 *   softmax per row: max, exp (vector exp of the including file), sum, p = e * (1/sum), p rounded
 *           to F16 for an F16 cache (ggml rounds the probabilities to V's partner type).
 *   pass 2: per tile, the W V rows are converted once; out_row += p_j * v_j for j ascending.
 * Each row's arithmetic depends only on its own position range and the absolute tile grid, never on
 * which other rows share its block or on the thread, so a batch gives the same bits as one token at
 * a time. Float summation order differs from the scalar kernel (ops.c) and between the two widths by
 * design (all are within an ulp-level distance of ggml's F16 dot products, which use yet another
 * order).
 *
 * This header contains no intrinsics of its own: the including *_avx2.c / *_avx512.c file defines,
 * before including it,
 *   AK_W                 lanes per vector (= KV positions per tile)
 *   AK_PV                output vectors kept in registers in pass 2 (a multiple that fills the
 *                        register file without spilling: 4 of 32 zmm, 8 of 16 ymm)
 *   AK_ENTRY             the name of the entry point (int AK_ENTRY(mr_pool *, const mr_attn_args *))
 *   ak_v                 the vector type
 *   ak_load / ak_store   aligned float load / store; ak_loadu unaligned load
 *   ak_set1, ak_zero, ak_add, ak_mul, ak_max, ak_fmadd(a, b, c) = a * b + c
 *   ak_load_f16(p)       W F16 values at p as floats
 *   ak_round_f16(x)      x rounded to F16 (nearest even) and back
 *   ak_hsum(v)           v[0..W-1] -> one vector whose lane j is the sum of the lanes of v[j]
 *   ak_clip(d, jt, lo, hi)  lane l of d where lo <= jt + l <= hi, -inf elsewhere
 *   ak_exp_shift(x, m)   exp(x - m) (x <= m), 0 where x is -inf
 *   ak_reduce_max / ak_reduce_add   horizontal max / sum as a float */
#ifndef MR_ATTN_KERN_X86_H
#define MR_ATTN_KERN_X86_H

#if !defined(AK_W) || !defined(AK_PV) || !defined(AK_ENTRY)
#error "define AK_W, AK_PV, AK_ENTRY and the ak_* primitives before including attn_kern_x86.h"
#endif

#include "model/ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* the small fixed-count loops over vectors must be unrolled so the vectors stay in registers */
#define AK_UNROLL _Pragma("GCC unroll 16")

typedef struct {
    const mr_attn_args *a;
    int gq;             /* query heads per KV head */
    int tb;             /* query tokens per block */
    int nblk;
    float *tbuf;        /* per pool thread (mr_pool_worker_id): tfloats each, or NULL (per chunk) */
    size_t tfloats;
    atomic_int failed;
} ak_job;

/* W K or V rows of KV head g starting at absolute position jt, as floats (rows > jhi zeroed) */
static void ak_load_tile(const mr_attn_args *a, const void *base, int g, int jt, int jhi, float *dst) {
    const int hd = a->head_dim;
    for (int jj = 0; jj < AK_W; jj++) {
        float *d = dst + (size_t)jj * hd;
        const int j = jt + jj;
        if (j > jhi || j < 0) { memset(d, 0, sizeof(float) * (size_t)hd); continue; }
        const int64_t off = (int64_t)j * a->kv_stride + (int64_t)g * hd;
        if (a->kv_f16) {
            const uint16_t *s = (const uint16_t *)base + off;
            for (int i = 0; i < hd; i += AK_W) ak_store(d + i, ak_load_f16(s + i));
        } else {
            memcpy(d, (const float *)base + off, sizeof(float) * (size_t)hd);
        }
    }
}

static inline int ak_row_lo(const mr_attn_args *a, int pos) {
    return a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
}

static void ak_chunk(void *arg, long c) {
    ak_job *J = arg;
    const mr_attn_args *a = J->a;
    const int hd = a->head_dim, nv = hd / AK_W, gq = J->gq;
    const int g = (int)(c % a->n_head_kv);
    const int blk = J->nblk - 1 - (int)(c / a->n_head_kv); /* longest (latest) blocks first */
    const int t0 = blk * J->tb, t1 = t0 + J->tb < a->n_q ? t0 + J->tb : a->n_q;
    const int R = (t1 - t0) * gq;
    const int jlo = ak_row_lo(a, a->pos0 + t0), jhi = a->pos0 + t1 - 1;
    const int tile0 = jlo & ~(AK_W - 1), ntile = (jhi - tile0) / AK_W + 1, W = ntile * AK_W;
    size_t nq = (size_t)R * hd, nsc = (size_t)R * W, nkv = AK_W * (size_t)hd;
    float *buf = J->tbuf ? J->tbuf + (size_t)mr_pool_worker_id() * J->tfloats
                         : mr_aligned_alloc(64, sizeof(float) * (nq + nsc + nkv + nq));
    if (!buf) { atomic_store(&J->failed, 1); return; }
    float *q = buf, *sc = q + nq, *kv = sc + nsc, *acc = kv + nkv;

    /* query rows (row r = (t - t0) * gq + hh), rounded to F16 for an F16 cache */
    for (int t = t0; t < t1; t++)
        for (int hh = 0; hh < gq; hh++) {
            const float *src = a->Q + (int64_t)t * a->q_stride + (int64_t)(g * gq + hh) * hd;
            float *d = q + (size_t)((t - t0) * gq + hh) * hd;
            for (int i = 0; i < hd; i += AK_W) {
                ak_v x = ak_loadu(src + i);
                if (a->kv_f16) x = ak_round_f16(x);
                ak_store(d + i, x);
            }
        }

    /* pass 1: scores */
    const ak_v vscale = ak_set1(a->scale), ninf = ak_set1(-INFINITY);
    for (int k = 0; k < ntile; k++) {
        const int jt = tile0 + AK_W * k;
        ak_load_tile(a, a->K, g, jt, jhi, kv);
        for (int r = 0; r < R; r++) {
            const int pos = a->pos0 + t0 + r / gq, rlo = ak_row_lo(a, pos);
            if (jt > pos || jt + AK_W - 1 < rlo) continue;
            const float *qr = q + (size_t)r * hd;
            ak_v s[AK_W];
            AK_UNROLL for (int jj = 0; jj < AK_W; jj++) s[jj] = ak_zero();
            for (int i = 0; i < nv; i++) {
                const ak_v qi = ak_load(qr + AK_W * i);
                AK_UNROLL for (int jj = 0; jj < AK_W; jj++) s[jj] = ak_fmadd(qi, ak_load(kv + (size_t)jj * hd + AK_W * i), s[jj]);
            }
            const ak_v d = ak_mul(ak_hsum(s), vscale);
            ak_store(sc + (size_t)r * W + AK_W * k, ak_clip(d, jt, rlo, pos));
        }
    }

    /* softmax per row over its tiles */
    for (int r = 0; r < R; r++) {
        const int pos = a->pos0 + t0 + r / gq, h = g * gq + r % gq, rlo = ak_row_lo(a, pos);
        const int k0 = (rlo - tile0) / AK_W, k1 = (pos - tile0) / AK_W;
        float *sr = sc + (size_t)r * W;
        ak_v vm = ninf;
        for (int k = k0; k <= k1; k++) vm = ak_max(vm, ak_load(sr + AK_W * k));
        float mx = ak_reduce_max(vm);
        if (a->sinks && a->sinks[h] > mx) mx = a->sinks[h];
        const ak_v vmx = ak_set1(mx);
        ak_v vs = ak_zero();
        for (int k = k0; k <= k1; k++) {
            const ak_v e = ak_exp_shift(ak_load(sr + AK_W * k), vmx);
            vs = ak_add(vs, e);
            ak_store(sr + AK_W * k, e);
        }
        double sum = ak_reduce_add(vs);
        if (a->sinks) sum += (double)expf(a->sinks[h] - mx);
        const ak_v inv = ak_set1((float)(1.0 / sum));
        for (int k = k0; k <= k1; k++) {
            ak_v p = ak_mul(ak_load(sr + AK_W * k), inv);
            if (a->kv_f16) p = ak_round_f16(p);
            ak_store(sr + AK_W * k, p);
        }
    }

    /* pass 2: out = sum_j p_j v_j (each output lane sums j ascending, whatever AK_PV is) */
    memset(acc, 0, sizeof(float) * nq);
    for (int k = 0; k < ntile; k++) {
        const int jt = tile0 + AK_W * k;
        ak_load_tile(a, a->V, g, jt, jhi, kv);
        for (int r = 0; r < R; r++) {
            const int pos = a->pos0 + t0 + r / gq, rlo = ak_row_lo(a, pos);
            if (jt > pos || jt + AK_W - 1 < rlo) continue;
            const int ja = rlo > jt ? rlo - jt : 0, jb = pos < jt + AK_W - 1 ? pos - jt : AK_W - 1;
            const float *pr = sc + (size_t)r * W + AK_W * k;
            float *ar = acc + (size_t)r * hd;
            int i = 0;
            for (; i + AK_PV <= nv; i += AK_PV) { /* AK_PV vectors of the output row in registers */
                ak_v o[AK_PV];
                AK_UNROLL for (int u = 0; u < AK_PV; u++) o[u] = ak_load(ar + AK_W * (i + u));
                for (int jj = ja; jj <= jb; jj++) {
                    const ak_v p = ak_set1(pr[jj]);
                    const float *vr = kv + (size_t)jj * hd + AK_W * i;
                    AK_UNROLL for (int u = 0; u < AK_PV; u++) o[u] = ak_fmadd(p, ak_load(vr + AK_W * u), o[u]);
                }
                AK_UNROLL for (int u = 0; u < AK_PV; u++) ak_store(ar + AK_W * (i + u), o[u]);
            }
            for (; i < nv; i++) {
                ak_v o = ak_load(ar + AK_W * i);
                for (int jj = ja; jj <= jb; jj++) o = ak_fmadd(ak_set1(pr[jj]), ak_load(kv + (size_t)jj * hd + AK_W * i), o);
                ak_store(ar + AK_W * i, o);
            }
        }
    }
    for (int r = 0; r < R; r++) {
        const int t = t0 + r / gq, h = g * gq + r % gq;
        memcpy(a->out + (int64_t)t * a->out_stride + (int64_t)h * hd, acc + (size_t)r * hd, sizeof(float) * (size_t)hd);
    }
    if (!J->tbuf) mr_aligned_free(buf);
}

int AK_ENTRY(mr_pool *pool, const mr_attn_args *a) {
    const int gq = a->n_head / a->n_head_kv, nth = pool ? mr_pool_size(pool) : 1;
    /* about 32 rows per block (K/V tiles converted once for all of them), but enough blocks to keep
     * every thread busy */
    int tb = (32 + gq - 1) / gq;
    if (tb > a->n_q) tb = a->n_q;
    while (tb > 1 && (long)a->n_head_kv * ((a->n_q + tb - 1) / tb) < 4L * nth) tb = (tb + 1) / 2;
    ak_job J = {.a = a, .gq = gq, .tb = tb, .nblk = (a->n_q + tb - 1) / tb};
    atomic_init(&J.failed, 0);
    if (a->ws) { /* each thread's buffer from the arena: room for the largest block's */
        size_t most = 0;
        for (int blk = 0; blk < J.nblk; blk++) {
            const int t0 = blk * tb, t1 = t0 + tb < a->n_q ? t0 + tb : a->n_q, R = (t1 - t0) * gq;
            const int jlo = ak_row_lo(a, a->pos0 + t0), jhi = a->pos0 + t1 - 1;
            const int tile0 = jlo & ~(AK_W - 1), W = ((jhi - tile0) / AK_W + 1) * AK_W;
            const size_t f = 2 * (size_t)R * a->head_dim + (size_t)R * W + AK_W * (size_t)a->head_dim;
            if (f > most) most = f;
        }
        J.tfloats = (most + 15) / 16 * 16; /* 64-byte aligned slots, as the allocation was */
        mr_scratch_reset(a->ws);
        if (!(J.tbuf = mr_scratch_alloc(a->ws, sizeof(float) * J.tfloats * (size_t)nth))) return -1;
    }
    mr_pool_run_chunks(pool, ak_chunk, &J, (long)J.nblk * a->n_head_kv);
    if (atomic_load(&J.failed)) { mr_set_error("attention: out of memory"); return -1; }
    return 0;
}

#endif
