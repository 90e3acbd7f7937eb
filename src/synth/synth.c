/* Synthetic random-weight GGUF models of real shapes, for benchmarks on any machine.
 *
 * Weights: each quantized (or F16) tensor is filled with blocks drawn at random from a pool of
 * distinct blocks made once per (type, scale): quantized Gaussian values where the type has a
 * reference quantizer, otherwise random bits with the leading fp16 scale set so the block's
 * dequantized RMS matches the target (std 1/sqrt(fan_in) unless a shape says otherwise). Norm
 * weights are 1, routers are F32.
 * Routing skew (--zipf S), qwen3moe: every token embedding shares a component along a fixed direction
 * u, and router row e gets b_e * u with b_e ~ log of a Zipf(S) popularity, so some experts win far
 * more often. deepseek4 (synth_ds4.c) puts the skew in the router bias exp_probs_b and in the
 * hash-routing tables instead. */
#include "moerun_tools.h"
#include "synth/synth.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYNTH_POOL_BLOCKS 65536 /* distinct blocks per pool */
#define SYNTH_MAX_POOLS 32

typedef synth_rng rng_t;
#define rng_next synth_rng_next
#define rng_unif synth_rng_unif
#define rng_gauss synth_rng_gauss

/* A pool of random blocks of one type with dequantized standard deviation ~ std. */
struct synth_pool { int type; float std; size_t bsz; uint8_t *blocks; };

/* Types whose block starts with an fp16 scale that multiplies every value. */
static int synth_d_first(int type) {
    switch (type) {
    case MR_TYPE_IQ2_XXS: case MR_TYPE_IQ2_XS: case MR_TYPE_IQ2_S: case MR_TYPE_IQ3_XXS:
    case MR_TYPE_IQ3_S: case MR_TYPE_IQ1_S: case MR_TYPE_IQ4_XS: case MR_TYPE_Q4_0: case MR_TYPE_Q5_0:
    case MR_TYPE_Q8_0: case MR_TYPE_IQ4_NL: case MR_TYPE_Q1_0:
        return 1;
    default: return 0;
    }
}

static int synth_pool_make(synth_pool *p, int type, float std, uint64_t seed) {
    const mr_type_traits *t = mr_type_get(type);
    if (!t || !t->to_float) { mr_set_error("synth: type %s cannot be generated", mr_type_name(type)); return -1; }
    int bs = t->block_size;
    p->type = type;
    p->std = std;
    p->bsz = t->type_size;
    p->blocks = mr_malloc(p->bsz * SYNTH_POOL_BLOCKS);
    float *v = mr_malloc(sizeof(float) * (size_t)bs);
    if (!p->blocks || !v) { free(v); mr_set_error("synth: out of memory"); return -1; }
    rng_t r = {seed * 7919 + (uint64_t)type};
    for (int b = 0; b < SYNTH_POOL_BLOCKS; b++) {
        uint8_t *blk = p->blocks + (size_t)b * p->bsz;
        if (t->from_float && type != MR_TYPE_Q8_K) { /* F16, BF16 and the types with a reference quantizer */
            for (int i = 0; i < bs; i++) v[i] = std * rng_gauss(&r);
            t->from_float(v, blk, bs);
            continue;
        }
        if (!synth_d_first(type)) { free(v); mr_set_error("synth: no generator for type %s", t->name); return -1; }
        for (int tries = 0;; tries++) {
            for (size_t i = 0; i < p->bsz; i++) blk[i] = (uint8_t)rng_next(&r);
            uint16_t one = mr_fp32_to_fp16(1.0f);
            memcpy(blk, &one, 2);
            t->to_float(blk, v, bs);
            double ss = 0;
            for (int i = 0; i < bs; i++) ss += (double)v[i] * v[i];
            double rms = sqrt(ss / bs);
            if (rms > 0 && isfinite(rms)) {
                uint16_t d = mr_fp32_to_fp16((float)(std / rms));
                memcpy(blk, &d, 2);
                break;
            }
            if (tries > 100) { free(v); mr_set_error("synth: cannot make a %s block", t->name); return -1; }
        }
    }
    free(v);
    return 0;
}

static synth_pool *synth_get_pool(synth_ctx *c, int type, float std) {
    for (int i = 0; i < c->n_pools; i++)
        if (c->pools[i].type == type && c->pools[i].std == std) return &c->pools[i];
    if (c->n_pools == SYNTH_MAX_POOLS) { mr_set_error("synth: too many pools"); return NULL; }
    synth_pool *p = &c->pools[c->n_pools];
    if (synth_pool_make(p, type, std, c->seed + (uint64_t)c->n_pools) != 0) return NULL;
    c->n_pools++;
    return p;
}

synth_tensor *synth_add(synth_ctx *c, int kind, int type, const char *fmt, int layer, int n_dims, int64_t ne0,
                        int64_t ne1, int64_t ne2) {
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        synth_tensor *nt = mr_realloc(c->t, sizeof *nt * (size_t)c->cap);
        if (!nt) { mr_set_error("synth: out of memory"); return NULL; }
        c->t = nt;
    }
    synth_tensor *t = &c->t[c->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, fmt, layer);
    t->kind = kind;
    t->layer = layer;
    t->type = (kind == SYNTH_POOL || kind == SYNTH_EMBD) ? type : kind == SYNTH_HASH ? MR_TYPE_I32 : MR_TYPE_F32;
    t->n_dims = n_dims;
    t->ne[0] = ne0; t->ne[1] = ne1; t->ne[2] = ne2; t->ne[3] = 1;
    if (n_dims < 3) t->ne[2] = 1;
    if (n_dims < 2) t->ne[1] = 1;
    t->std = 1.0f / sqrtf((float)ne0);
    if (mr_row_size(t->type, ne0) == 0) {
        mr_set_error("synth: %s: row of %lld values is not a multiple of the %s block", t->name, (long long)ne0,
                     mr_type_name(t->type));
        return NULL;
    }
    if (kind == SYNTH_EMBD && t->type != MR_TYPE_F32 && !mr_type_get(t->type)->from_float) {
        mr_set_error("synth: %s: type %s has no quantizer for generated rows", t->name, mr_type_name(t->type));
        return NULL;
    }
    return t;
}

/* Row of a hash-routing table: n distinct ids, each drawn from the Zipf popularity (or uniformly). */
static void synth_hash_row(synth_ctx *c, rng_t *r, int32_t *ids, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        int32_t e = -1;
        for (int tries = 0; tries < 1000 && e < 0; tries++) {
            int32_t cand;
            if (c->zipf_cdf) { /* inverse CDF by bisection */
                double x = rng_unif(r) * c->zipf_cdf[c->n_expert - 1];
                int lo = 0, hi = c->n_expert - 1;
                while (lo < hi) {
                    int mid = (lo + hi) / 2;
                    if (c->zipf_cdf[mid] > x) hi = mid; else lo = mid + 1;
                }
                cand = lo;
            } else {
                cand = (int32_t)(rng_next(r) % (uint64_t)c->n_expert);
            }
            e = cand;
            for (int64_t i = 0; i < j; i++)
                if (ids[i] == cand) e = -1;
        }
        if (e < 0) /* heavy skew: take the most popular unused id */
            for (int32_t cand = 0; cand < c->n_expert && e < 0; cand++) {
                e = cand;
                for (int64_t i = 0; i < j; i++)
                    if (ids[i] == cand) e = -1;
            }
        ids[j] = e;
    }
}

static int synth_fill(void *user, const char *name, uint64_t row0, uint64_t n_rows, void *dst) {
    synth_ctx *c = user;
    synth_tensor *t = NULL;
    for (int i = 0; i < c->n && !t; i++)
        if (!strcmp(c->t[i].name, name)) t = &c->t[i];
    if (!t) { mr_set_error("synth: unknown tensor %s", name); return -1; }
    uint64_t ti = (uint64_t)(t - c->t);
    size_t rs = mr_row_size(t->type, t->ne[0]);
    uint8_t *out = dst;
    if (t->kind == SYNTH_POOL) {
        rng_t r = {c->seed ^ (row0 * 0x2545f4914f6cdd1dull) ^ (ti * 0x9e3779b97f4a7c15ull)};
        size_t nb = rs / t->pool->bsz * n_rows;
        for (size_t b = 0; b < nb; b++)
            memcpy(out + b * t->pool->bsz, t->pool->blocks + (rng_next(&r) % SYNTH_POOL_BLOCKS) * t->pool->bsz,
                   t->pool->bsz);
        return 0;
    }
    if (t->kind == SYNTH_HASH) {
        if (t->ne[0] > c->n_expert) { mr_set_error("synth: %s: %lld ids per token from %d experts", t->name, (long long)t->ne[0], c->n_expert); return -1; }
        for (uint64_t i = 0; i < n_rows; i++) {
            rng_t r = {c->seed * 131 + (row0 + i) * 0x9e3779b97f4a7c15ull + (uint64_t)t->layer * 0x2545f4914f6cdd1dull};
            synth_hash_row(c, &r, (int32_t *)(out + i * rs), t->ne[0]);
        }
        return 0;
    }
    float *row = mr_malloc(sizeof(float) * (size_t)t->ne[0]);
    if (!row) { mr_set_error("synth: out of memory"); return -1; }
    for (uint64_t i = 0; i < n_rows; i++) {
        uint64_t gr = row0 + i;
        rng_t r = {c->seed * 31 + gr * 0x9e3779b97f4a7c15ull + (uint64_t)t->kind + (ti << 32)};
        const int skew = t->skew && c->zipf > 0;
        switch (t->kind) {
        case SYNTH_ONES:
            for (int64_t k = 0; k < t->ne[0]; k++) row[k] = 1.0f;
            break;
        case SYNTH_EMBD: /* embedding row: random (+ shared skew direction) */
            for (int64_t k = 0; k < t->ne[0]; k++) row[k] = rng_gauss(&r) * t->std + (skew ? t->std * c->u[k] : 0);
            break;
        case SYNTH_ROUTER: { /* router row e: random (+ b_e * u with b_e ~ log Zipf popularity) */
            float b = skew ? -c->zipf * logf((float)gr + 1.0f) : 0;
            for (int64_t k = 0; k < t->ne[0]; k++)
                row[k] = rng_gauss(&r) * t->std + (skew ? b * c->u[k] / sqrtf((float)t->ne[0]) : 0);
            break;
        }
        case SYNTH_VEC:
            for (int64_t k = 0; k < t->ne[0]; k++) row[k] = t->mean + t->std * rng_gauss(&r);
            break;
        case SYNTH_BIAS:
            for (int64_t k = 0; k < t->ne[0]; k++)
                row[k] = -SYNTH_BIAS_T * c->zipf * logf((float)k + 1.0f) + t->std * rng_gauss(&r);
            break;
        default:
            free(row);
            mr_set_error("synth: %s: unknown kind %d", t->name, t->kind);
            return -1;
        }
        if (t->type == MR_TYPE_F32) memcpy(out + i * rs, row, rs);
        else mr_type_get(t->type)->from_float(row, out + i * rs, t->ne[0]);
    }
    free(row);
    return 0;
}

/* ---- shapes ---- */

typedef struct {
    const char *name, *arch, *desc;
    int64_t d, n_layer, n_head, n_head_kv, head_dim, n_expert, n_used, ff_exp, vocab, n_ctx;
    float rope_base;
} synth_shape;

static const synth_shape synth_shapes[] = {
    {"qwen3-30b-a3b", "qwen3moe", "Qwen3-30B-A3B (48 layers, 128 experts top-8, d 2048)",
     2048, 48, 32, 4, 128, 128, 8, 768, 32000, 4096, 1000000.0f},
    {"qwen3-small", "qwen3moe", "small qwen3moe for demos (d 1024, 64 experts top-4, 12 layers)",
     1024, 12, 16, 4, 64, 64, 4, 512, 8000, 2048, 1000000.0f},
    {"qwen3moe-tiny", "qwen3moe", "tiny qwen3moe for tests (2 layers, d 256, 8 experts top-2 of 256, 4 heads / 2 KV of 64)",
     256, 2, 4, 2, 64, 8, 2, 256, 512, 2048, 1000000.0f},
    /* llama: no q/k norm; n_expert 0 is dense with an FFN ff_exp wide, else Mixtral-style experts */
    {"llama-tiny", "llama", "tiny dense llama for tests (2 layers, d 256, ff 512, 4 heads / 2 KV of 64)",
     256, 2, 4, 2, 64, 0, 0, 512, 512, 2048, 10000.0f},
    {"mixtral-tiny", "llama", "tiny Mixtral-style llama for tests (2 layers, d 256, 8 experts top-2 of 256, 4 heads / 2 KV of 64)",
     256, 2, 4, 2, 64, 8, 2, 256, 512, 2048, 10000.0f},
};

/* ftype: LLAMA_FTYPE_ALL_F32 0, LLAMA_FTYPE_MOSTLY_{Q4_0 2, Q8_0 7, Q4_K_M 15, IQ4_XS 30, IQ3_S 26, IQ2_XXS 19, MXFP4_MOE 38, Q2_0 41,
 * Q2_K 10, Q5_K_M 17, Q6_K 18, IQ3_XXS 23, IQ4_NL 25, BF16 32} (llama.h) */
static const synth_mix synth_mixes[] = {
    {"f32", MR_TYPE_F32, MR_TYPE_F32, MR_TYPE_F32, MR_TYPE_F32, MR_TYPE_F32, 0},
    {"q4_0", MR_TYPE_Q4_0, MR_TYPE_Q4_0, MR_TYPE_Q4_0, MR_TYPE_Q4_0, MR_TYPE_Q4_0, 2},
    {"q8_0", MR_TYPE_Q8_0, MR_TYPE_Q8_0, MR_TYPE_Q8_0, MR_TYPE_Q8_0, MR_TYPE_Q8_0, 7},
    {"q4_k_m", MR_TYPE_Q4_K, MR_TYPE_Q4_K, MR_TYPE_Q6_K, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 15},
    {"iq4_xs", MR_TYPE_IQ4_XS, MR_TYPE_IQ4_XS, MR_TYPE_IQ4_XS, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 30},
    {"iq3s-mxfp4", MR_TYPE_Q8_0, MR_TYPE_IQ3_S, MR_TYPE_MXFP4, MR_TYPE_Q8_0, MR_TYPE_Q8_0, 26},
    {"iq2xxs-q2k", MR_TYPE_Q8_0, MR_TYPE_IQ2_XXS, MR_TYPE_Q2_K, MR_TYPE_Q8_0, MR_TYPE_Q8_0, 19},
    {"mxfp4", MR_TYPE_Q8_0, MR_TYPE_MXFP4, MR_TYPE_MXFP4, MR_TYPE_Q8_0, MR_TYPE_Q8_0, 38},
    /* one type for attention and experts, embedding Q4_K and head Q6_K as llama-quantize keeps them:
     * per-type speed comparisons (docs/PERFORMANCE.md) */
    {"iq4_nl", MR_TYPE_IQ4_NL, MR_TYPE_IQ4_NL, MR_TYPE_IQ4_NL, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 25},
    {"q5_k", MR_TYPE_Q5_K, MR_TYPE_Q5_K, MR_TYPE_Q5_K, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 17},
    {"q6_k", MR_TYPE_Q6_K, MR_TYPE_Q6_K, MR_TYPE_Q6_K, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 18},
    {"q2_k", MR_TYPE_Q2_K, MR_TYPE_Q2_K, MR_TYPE_Q2_K, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 10},
    {"iq2_xxs", MR_TYPE_IQ2_XXS, MR_TYPE_IQ2_XXS, MR_TYPE_IQ2_XXS, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 19},
    {"iq3_xxs", MR_TYPE_IQ3_XXS, MR_TYPE_IQ3_XXS, MR_TYPE_IQ3_XXS, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 23},
    {"iq3_s", MR_TYPE_IQ3_S, MR_TYPE_IQ3_S, MR_TYPE_IQ3_S, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 26},
    {"q2_0", MR_TYPE_Q2_0, MR_TYPE_Q2_0, MR_TYPE_Q2_0, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 41},
    {"bf16", MR_TYPE_BF16, MR_TYPE_BF16, MR_TYPE_BF16, MR_TYPE_Q4_K, MR_TYPE_Q6_K, 32},
    /* the DeepSeek-V4 CPU guide's files: iq2xxs-q2k with attention and shared experts in Q2_0
     * (labelled LLAMA_FTYPE_MOSTLY_Q2_0 = 41) */
    {"q2_0-iq2xxs", MR_TYPE_Q2_0, MR_TYPE_IQ2_XXS, MR_TYPE_Q2_K, MR_TYPE_Q8_0, MR_TYPE_Q8_0, 41},
};

/* Architectures whose shapes live in their own file. */
typedef struct {
    int (*has_shape)(const char *name);
    void (*list)(FILE *out);
    int (*build)(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx, const mr_synth_params *p,
                 int *n_layer);
} synth_family;
static const synth_family synth_families[] = {
    {synth_ds4_has_shape, synth_ds4_list, synth_ds4_build},
    {synth_ds2_has_shape, synth_ds2_list, synth_ds2_build},
    {synth_oss_has_shape, synth_oss_list, synth_oss_build},
    {synth_glm_has_shape, synth_glm_list, synth_glm_build},
    {synth_q35_has_shape, synth_q35_list, synth_q35_build},
};

void mr_synth_list(FILE *out) {
    fprintf(out, "shapes:\n");
    for (size_t i = 0; i < sizeof synth_shapes / sizeof synth_shapes[0]; i++)
        fprintf(out, "  %-18s %s: %s\n", synth_shapes[i].name, synth_shapes[i].arch, synth_shapes[i].desc);
    for (size_t i = 0; i < sizeof synth_families / sizeof synth_families[0]; i++) synth_families[i].list(out);
    fprintf(out, "quant mixes (attention, expert gate/up, expert down, embedding, head):\n");
    for (size_t i = 0; i < sizeof synth_mixes / sizeof synth_mixes[0]; i++) {
        const synth_mix *m = &synth_mixes[i];
        fprintf(out, "  %-12s %s, %s, %s, %s, %s\n", m->name, mr_type_name(m->attn), mr_type_name(m->gate_up),
                mr_type_name(m->down), mr_type_name(m->embd), mr_type_name(m->head));
    }
    fprintf(out, "deepseek4 shapes use the mix's attention type for the shared expert too, and F16 for the token\n"
                 "embedding, hyper-connection, compressor and indexer weights (as the published GGUFs do).\n");
}

int synth_parse_ratios(const char *s, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || (*end && *end != ',') || (v != 0 && v != 4 && v != 128)) {
            mr_set_error("synth: --ratios '%s': expected a comma-separated list of 0, 4 or 128", s);
            return -1;
        }
        if (n == max) { mr_set_error("synth: --ratios '%s': more than %d values", s, max); return -1; }
        out[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (n == 0) { mr_set_error("synth: --ratios is empty"); return -1; }
    return n;
}

int synth_vocab(mr_gguf_writer *w, int64_t n) {
    /* SPM vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces: the base-26 letters of the id,
     * two of three with the SPM word-start mark (all distinct). */
    char **tok = mr_calloc((size_t)n, sizeof *tok);
    float *score = mr_calloc((size_t)n, sizeof *score);
    int32_t *type = mr_calloc((size_t)n, sizeof *type);
    int rc = -1;
    if (!tok || !score || !type) { mr_set_error("synth: out of memory"); goto done; }
    static const char *lead[] = {"<unk>", "<s>", "</s>"};
    for (int64_t i = 0; i < n; i++) {
        char buf[32];
        if (i < 3) { snprintf(buf, sizeof buf, "%s", lead[i]); type[i] = i == 0 ? 2 : 3; }
        else if (i < 259) { snprintf(buf, sizeof buf, "<0x%02X>", (unsigned)(i - 3)); type[i] = 6; }
        else {
            int64_t k = i - 259;
            const char *al = "etaoinshrdlucmfwypvbgkqjxz";
            int len = 0;
            buf[len++] = (char)0xe2; buf[len++] = (char)0x96; buf[len++] = (char)0x81; /* U+2581 word start */
            if (k % 3 == 0) len = 0;
            do { buf[len++] = al[k % 26]; k /= 26; } while (k && len < 12);
            buf[len] = 0;
            type[i] = 1;
            score[i] = -(float)i;
        }
        if (!(tok[i] = mr_strdup(buf))) { mr_set_error("synth: out of memory"); goto done; }
    }
    if (mr_gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") ||
        mr_gguf_writer_set_kv(w, "tokenizer.ggml.tokens", MR_GGUF_ARRAY, MR_GGUF_STRING, (uint64_t)n, tok) ||
        mr_gguf_writer_set_kv(w, "tokenizer.ggml.scores", MR_GGUF_ARRAY, MR_GGUF_F32, (uint64_t)n, score) ||
        mr_gguf_writer_set_kv(w, "tokenizer.ggml.token_type", MR_GGUF_ARRAY, MR_GGUF_I32, (uint64_t)n, type) ||
        mr_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) ||
        mr_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) ||
        mr_gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) ||
        mr_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", 1))
        goto done;
    rc = 0;
done:
    if (tok)
        for (int64_t i = 0; i < n; i++) free(tok[i]);
    free(tok);
    free(score);
    free(type);
    return rc;
}

/* qwen3moe, and llama (dense or Mixtral-style) with the keys mainline's converter writes for it:
 * feed_forward_length is the (expert) FFN width, no q/k norm, no key/value lengths. */
static int synth_qwen3moe(synth_ctx *c, mr_gguf_writer *w, const synth_shape *s, const synth_mix *mx, int n_layer) {
    char key[128];
    const char *a = s->arch;
    const int llama = !strcmp(a, "llama"), moe = s->n_expert > 0;
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_u32(w, key, (uint32_t)(v)))
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_f32(w, key, (float)(v)))
    if (mr_gguf_writer_set_str(w, "general.architecture", a) || SETU("context_length", s->n_ctx) ||
        SETU("embedding_length", s->d) || SETU("block_count", n_layer) ||
        SETU("feed_forward_length", llama ? s->ff_exp : s->ff_exp * 8) ||
        SETU("attention.head_count", s->n_head) || SETU("attention.head_count_kv", s->n_head_kv) ||
        SETF("rope.freq_base", s->rope_base) || SETF("attention.layer_norm_rms_epsilon", 1e-6) ||
        (moe && (SETU("expert_count", s->n_expert) || SETU("expert_used_count", s->n_used))) ||
        (!llama && (SETU("expert_feed_forward_length", s->ff_exp) || SETU("attention.key_length", s->head_dim) ||
                    SETU("attention.value_length", s->head_dim))) ||
        SETU("rope.dimension_count", s->head_dim) || SETU("vocab_size", s->vocab))
        return -1;
#undef SETU
#undef SETF
    int64_t d = s->d, q = s->n_head * s->head_dim, kv = s->n_head_kv * s->head_dim;
    synth_tensor *t;
    if (!(t = synth_add(c, SYNTH_EMBD, mx->embd, "token_embd.weight", 0, 2, d, s->vocab, 1))) return -1;
    t->std = 0.02f;
    t->skew = 1;
    if (!synth_add(c, SYNTH_ONES, 0, "output_norm.weight", 0, 1, d, 1, 1) ||
        !synth_add(c, SYNTH_POOL, mx->head, "output.weight", 0, 2, d, s->vocab, 1))
        return -1;
    for (int l = 0; l < n_layer; l++) {
        if (!synth_add(c, SYNTH_ONES, 0, "blk.%d.attn_norm.weight", l, 1, d, 1, 1) ||
            !synth_add(c, SYNTH_POOL, mx->attn, "blk.%d.attn_q.weight", l, 2, d, q, 1) ||
            !synth_add(c, SYNTH_POOL, mx->attn, "blk.%d.attn_k.weight", l, 2, d, kv, 1) ||
            !synth_add(c, SYNTH_POOL, mx->attn, "blk.%d.attn_v.weight", l, 2, d, kv, 1) ||
            !synth_add(c, SYNTH_POOL, mx->attn, "blk.%d.attn_output.weight", l, 2, q, d, 1) ||
            (!llama && (!synth_add(c, SYNTH_ONES, 0, "blk.%d.attn_q_norm.weight", l, 1, s->head_dim, 1, 1) ||
                        !synth_add(c, SYNTH_ONES, 0, "blk.%d.attn_k_norm.weight", l, 1, s->head_dim, 1, 1))) ||
            !synth_add(c, SYNTH_ONES, 0, "blk.%d.ffn_norm.weight", l, 1, d, 1, 1))
            return -1;
        if (!moe) { /* dense SwiGLU FFN: the mix's expert types */
            if (!synth_add(c, SYNTH_POOL, mx->gate_up, "blk.%d.ffn_gate.weight", l, 2, d, s->ff_exp, 1) ||
                !synth_add(c, SYNTH_POOL, mx->gate_up, "blk.%d.ffn_up.weight", l, 2, d, s->ff_exp, 1) ||
                !synth_add(c, SYNTH_POOL, mx->down, "blk.%d.ffn_down.weight", l, 2, s->ff_exp, d, 1))
                return -1;
            continue;
        }
        if (!(t = synth_add(c, SYNTH_ROUTER, 0, "blk.%d.ffn_gate_inp.weight", l, 2, d, s->n_expert, 1)) ||
            !synth_add(c, SYNTH_POOL, mx->gate_up, "blk.%d.ffn_gate_exps.weight", l, 3, d, s->ff_exp, s->n_expert) ||
            !synth_add(c, SYNTH_POOL, mx->gate_up, "blk.%d.ffn_up_exps.weight", l, 3, d, s->ff_exp, s->n_expert) ||
            !synth_add(c, SYNTH_POOL, mx->down, "blk.%d.ffn_down_exps.weight", l, 3, s->ff_exp, d, s->n_expert))
            return -1;
        t->skew = 1;
    }
    return 0;
}

int mr_synth(const char *path, const mr_synth_params *p) {
    const synth_shape *s = NULL;
    const synth_mix *mx = NULL;
    for (size_t i = 0; i < sizeof synth_shapes / sizeof synth_shapes[0]; i++)
        if (!strcmp(synth_shapes[i].name, p->shape)) s = &synth_shapes[i];
    for (size_t i = 0; i < sizeof synth_mixes / sizeof synth_mixes[0]; i++)
        if (!strcmp(synth_mixes[i].name, p->mix)) mx = &synth_mixes[i];
    const synth_family *fam = NULL;
    for (size_t i = 0; !s && i < sizeof synth_families / sizeof synth_families[0]; i++)
        if (synth_families[i].has_shape(p->shape)) fam = &synth_families[i];
    if (!s && !fam) { mr_set_error("synth: unknown shape '%s' (see moerun synth --list)", p->shape); return -1; }
    if (!mx) { mr_set_error("synth: unknown quant mix '%s' (see moerun synth --list)", p->mix); return -1; }
    if (p->n_layers < 0 || (s && p->n_layers > s->n_layer)) {
        mr_set_error("synth: --layers %d: shape %s has %lld layers", p->n_layers, p->shape, s ? (long long)s->n_layer : 0LL);
        return -1;
    }
    if (s && p->ratios) { mr_set_error("synth: --ratios applies to deepseek4 shapes only"); return -1; }
    if ((p->layout || p->shexp_clamp != 0) && !synth_ds4_has_shape(p->shape)) {
        mr_set_error("synth: --layout and --shexp-clamp apply to deepseek4 shapes only");
        return -1;
    }
    int n_layer = p->n_layers;
    synth_ctx c = {0};
    c.seed = p->seed;
    c.zipf = p->zipf;
    int rc = -1;
    mr_gguf_writer *w = mr_gguf_writer_new();
    c.pools = mr_calloc(SYNTH_MAX_POOLS, sizeof *c.pools);
    if (!w || !c.pools) { mr_set_error("synth: out of memory"); goto done; }
    if (s) {
        n_layer = n_layer > 0 ? n_layer : (int)s->n_layer;
        c.d = s->d;
        if (!(c.u = mr_malloc(sizeof(float) * (size_t)s->d))) { mr_set_error("synth: out of memory"); goto done; }
        rng_t r = {p->seed + 17};
        for (int64_t k = 0; k < s->d; k++) c.u[k] = rng_gauss(&r);
        if (synth_vocab(w, s->vocab) || synth_qwen3moe(&c, w, s, mx, n_layer)) goto done;
    } else if (fam->build(&c, w, p->shape, mx, p, &n_layer)) {
        goto done;
    }
    if (c.zipf > 0 && c.n_expert > 0) { /* popularity of expert e ~ (e+1)^-zipf, for hash tables */
        if (!(c.zipf_cdf = mr_malloc(sizeof(double) * (size_t)c.n_expert))) { mr_set_error("synth: out of memory"); goto done; }
        double acc = 0;
        for (int e = 0; e < c.n_expert; e++) c.zipf_cdf[e] = acc += pow(e + 1.0, -(double)c.zipf);
    }
    char name[160];
    snprintf(name, sizeof name, "synthetic %s %s, %d layers, zipf %.2f", p->shape, mx->name, n_layer, p->zipf);
    if (mr_gguf_writer_set_str(w, "general.name", name) || mr_gguf_writer_set_u32(w, "general.file_type", (uint32_t)mx->ftype) ||
        mr_gguf_writer_set_u32(w, "general.quantization_version", 2))
        goto done;
    for (int i = 0; i < c.n; i++) {
        synth_tensor *t = &c.t[i];
        if (t->kind == SYNTH_POOL && !(t->pool = synth_get_pool(&c, t->type, t->std))) goto done;
        if (mr_gguf_writer_add_tensor_fn(w, t->name, t->type, t->n_dims, t->ne, synth_fill, &c)) goto done;
    }
    if (mr_gguf_writer_write(w, path, 1)) goto done;
    rc = 0;
done:
    mr_gguf_writer_free(w);
    for (int i = 0; i < c.n_pools; i++) free(c.pools[i].blocks);
    free(c.pools);
    free(c.t);
    free(c.u);
    free(c.zipf_cdf);
    return rc;
}
