/* Synthetic random-weight GGUF models of real shapes, for benchmarks on any machine.
 *
 * Weights: each quantized tensor is filled with blocks drawn at random from a pool of distinct
 * blocks made once per (type, scale): quantized Gaussian values where the type has a reference
 * quantizer, otherwise random bits with the leading fp16 scale set so the block's dequantized RMS
 * matches the target. Norm weights are 1, the router is F32.
 * Routing skew (--zipf S): every token embedding shares a component along a fixed direction u, and
 * router row e gets b_e * u with b_e ~ log of a Zipf(S) popularity, so some experts win far more often. */
#include "moerun.h"
#include "synth/synth.h"
#include "gguf/gguf.h"
#include "quant/quant.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYNTH_POOL_BLOCKS 65536 /* distinct blocks per pool */

typedef struct { uint64_t s; } rng_t;
static inline uint64_t rng_next(rng_t *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline float rng_unif(rng_t *r) { return (float)((rng_next(r) >> 40) * (1.0 / 16777216.0)); }
static inline float rng_gauss(rng_t *r) {
    float u1 = rng_unif(r), u2 = rng_unif(r);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* A pool of random blocks of one type with dequantized standard deviation ~ std. */
typedef struct { int type; float std; size_t bsz; uint8_t *blocks; } synth_pool;

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
    p->blocks = malloc(p->bsz * SYNTH_POOL_BLOCKS);
    float *v = malloc(sizeof(float) * (size_t)bs);
    if (!p->blocks || !v) { free(v); mr_set_error("synth: out of memory"); return -1; }
    rng_t r = {seed * 7919 + (uint64_t)type};
    for (int b = 0; b < SYNTH_POOL_BLOCKS; b++) {
        uint8_t *blk = p->blocks + (size_t)b * p->bsz;
        if (t->from_float && type != MR_TYPE_Q8_K) {
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

/* One tensor to generate. */
typedef struct {
    char name[96];
    int type, n_dims;
    int64_t ne[4];
    int kind; /* 0 random pool, 1 ones, 2 embedding (float rows + skew), 3 router (float + skew) */
    float std;
    synth_pool *pool;
} synth_tensor;

typedef struct {
    synth_tensor *t;
    int n, cap;
    synth_pool pools[32];
    int n_pools;
    uint64_t seed;
    float zipf;
    int64_t d;
    float *u; /* skew direction, d values */
} synth_ctx;

static synth_pool *synth_get_pool(synth_ctx *c, int type, float std) {
    for (int i = 0; i < c->n_pools; i++)
        if (c->pools[i].type == type && c->pools[i].std == std) return &c->pools[i];
    if (c->n_pools == 32) { mr_set_error("synth: too many pools"); return NULL; }
    synth_pool *p = &c->pools[c->n_pools];
    if (synth_pool_make(p, type, std, c->seed + (uint64_t)c->n_pools) != 0) return NULL;
    c->n_pools++;
    return p;
}

static int synth_add(synth_ctx *c, int kind, int type, const char *fmt, int layer, int n_dims, int64_t ne0,
                     int64_t ne1, int64_t ne2) {
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        synth_tensor *nt = realloc(c->t, sizeof *nt * (size_t)c->cap);
        if (!nt) { mr_set_error("synth: out of memory"); return -1; }
        c->t = nt;
    }
    synth_tensor *t = &c->t[c->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, fmt, layer);
    t->kind = kind;
    t->type = (kind == 0 || kind == 2) ? type : MR_TYPE_F32;
    t->n_dims = n_dims;
    t->ne[0] = ne0; t->ne[1] = ne1; t->ne[2] = ne2; t->ne[3] = 1;
    if (n_dims < 3) t->ne[2] = 1;
    if (n_dims < 2) t->ne[1] = 1;
    t->std = 1.0f / sqrtf((float)ne0);
    if (mr_row_size(t->type, ne0) == 0) {
        mr_set_error("synth: %s: row of %lld values is not a multiple of the %s block", t->name, (long long)ne0,
                     mr_type_name(t->type));
        return -1;
    }
    if (kind == 2 && t->type != MR_TYPE_F32 && !mr_type_get(t->type)->from_float) {
        mr_set_error("synth: %s: type %s has no quantizer for generated rows", t->name, mr_type_name(t->type));
        return -1;
    }
    if (kind == 0 && !(t->pool = synth_get_pool(c, t->type, t->std))) return -1;
    return 0;
}

static int synth_fill(void *user, const char *name, uint64_t row0, uint64_t n_rows, void *dst) {
    synth_ctx *c = user;
    synth_tensor *t = NULL;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->t[i].name, name)) t = &c->t[i];
    if (!t) { mr_set_error("synth: unknown tensor %s", name); return -1; }
    size_t rs = mr_row_size(t->type, t->ne[0]);
    uint8_t *out = dst;
    if (t->kind == 0) {
        rng_t r = {c->seed ^ (row0 * 0x2545f4914f6cdd1dull) ^ (uint64_t)(uintptr_t)t};
        size_t nb = rs / t->pool->bsz * n_rows;
        for (size_t b = 0; b < nb; b++)
            memcpy(out + b * t->pool->bsz, t->pool->blocks + (rng_next(&r) % SYNTH_POOL_BLOCKS) * t->pool->bsz,
                   t->pool->bsz);
        return 0;
    }
    float *row = malloc(sizeof(float) * (size_t)t->ne[0]);
    if (!row) { mr_set_error("synth: out of memory"); return -1; }
    for (uint64_t i = 0; i < n_rows; i++) {
        uint64_t gr = row0 + i;
        rng_t r = {c->seed * 31 + gr * 0x9e3779b97f4a7c15ull + (uint64_t)t->kind};
        if (t->kind == 1) {
            for (int64_t k = 0; k < t->ne[0]; k++) row[k] = 1.0f;
        } else if (t->kind == 2) { /* embedding row: random + shared skew direction */
            for (int64_t k = 0; k < t->ne[0]; k++) row[k] = rng_gauss(&r) * 0.02f + (c->zipf > 0 ? 0.02f * c->u[k] : 0);
        } else { /* router row e: random + b_e * u with b_e ~ log Zipf popularity */
            float b = c->zipf > 0 ? -c->zipf * logf((float)gr + 1.0f) : 0;
            for (int64_t k = 0; k < t->ne[0]; k++) row[k] = rng_gauss(&r) * t->std + b * c->u[k] / sqrtf((float)t->ne[0]);
        }
        const mr_type_traits *tt = mr_type_get(t->type);
        if (t->type == MR_TYPE_F32) memcpy(out + i * rs, row, rs);
        else tt->from_float(row, out + i * rs, t->ne[0]);
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
};

/* Quant mixes: type for (attention/dense matrices, expert gate/up, expert down, embedding, head). */
typedef struct { const char *name; int attn, gate_up, down, embd, head; } synth_mix;
static const synth_mix synth_mixes[] = {
    {"q4_0", MR_TYPE_Q4_0, MR_TYPE_Q4_0, MR_TYPE_Q4_0, MR_TYPE_Q4_0, MR_TYPE_Q4_0},
    {"q8_0", MR_TYPE_Q8_0, MR_TYPE_Q8_0, MR_TYPE_Q8_0, MR_TYPE_Q8_0, MR_TYPE_Q8_0},
    {"q4_k_m", MR_TYPE_Q4_K, MR_TYPE_Q4_K, MR_TYPE_Q6_K, MR_TYPE_Q4_K, MR_TYPE_Q6_K},
    {"iq4_xs", MR_TYPE_IQ4_XS, MR_TYPE_IQ4_XS, MR_TYPE_IQ4_XS, MR_TYPE_Q4_K, MR_TYPE_Q6_K},
    {"iq3s-mxfp4", MR_TYPE_Q8_0, MR_TYPE_IQ3_S, MR_TYPE_MXFP4, MR_TYPE_Q8_0, MR_TYPE_Q8_0},
    {"iq2xxs-q2k", MR_TYPE_Q8_0, MR_TYPE_IQ2_XXS, MR_TYPE_Q2_K, MR_TYPE_Q8_0, MR_TYPE_Q8_0},
};

void mr_synth_list(FILE *out) {
    fprintf(out, "shapes:\n");
    for (size_t i = 0; i < sizeof synth_shapes / sizeof synth_shapes[0]; i++)
        fprintf(out, "  %-16s %s: %s\n", synth_shapes[i].name, synth_shapes[i].arch, synth_shapes[i].desc);
    fprintf(out, "quant mixes (attention, expert gate/up, expert down, embedding, head):\n");
    for (size_t i = 0; i < sizeof synth_mixes / sizeof synth_mixes[0]; i++) {
        const synth_mix *m = &synth_mixes[i];
        fprintf(out, "  %-12s %s, %s, %s, %s, %s\n", m->name, mr_type_name(m->attn), mr_type_name(m->gate_up),
                mr_type_name(m->down), mr_type_name(m->embd), mr_type_name(m->head));
    }
}

static int synth_vocab(mr_gguf_writer *w, int64_t n) {
    /* SPM vocabulary: <unk> <s> </s>, 256 byte tokens, then pieces: the base-26 letters of the id,
     * two of three with the SPM word-start mark (all distinct). */
    char **tok = calloc((size_t)n, sizeof *tok);
    float *score = calloc((size_t)n, sizeof *score);
    int32_t *type = calloc((size_t)n, sizeof *type);
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
        if (!(tok[i] = strdup(buf))) { mr_set_error("synth: out of memory"); goto done; }
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

static int synth_qwen3moe(synth_ctx *c, mr_gguf_writer *w, const synth_shape *s, const synth_mix *mx, int n_layer) {
    char key[128];
    const char *a = s->arch;
#define SETU(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_u32(w, key, (uint32_t)(v)))
#define SETF(k, v) (snprintf(key, sizeof key, "%s." k, a), mr_gguf_writer_set_f32(w, key, (float)(v)))
    if (mr_gguf_writer_set_str(w, "general.architecture", a) || SETU("context_length", s->n_ctx) ||
        SETU("embedding_length", s->d) || SETU("block_count", n_layer) || SETU("feed_forward_length", s->ff_exp * 8) ||
        SETU("attention.head_count", s->n_head) || SETU("attention.head_count_kv", s->n_head_kv) ||
        SETF("rope.freq_base", s->rope_base) || SETF("attention.layer_norm_rms_epsilon", 1e-6) ||
        SETU("expert_count", s->n_expert) || SETU("expert_used_count", s->n_used) ||
        SETU("expert_feed_forward_length", s->ff_exp) || SETU("attention.key_length", s->head_dim) ||
        SETU("attention.value_length", s->head_dim) || SETU("rope.dimension_count", s->head_dim) ||
        SETU("vocab_size", s->vocab))
        return -1;
#undef SETU
#undef SETF
    int64_t d = s->d, q = s->n_head * s->head_dim, kv = s->n_head_kv * s->head_dim;
    if (synth_add(c, 2, mx->embd, "token_embd.weight", 0, 2, d, s->vocab, 1) ||
        synth_add(c, 1, 0, "output_norm.weight", 0, 1, d, 1, 1) ||
        synth_add(c, 0, mx->head, "output.weight", 0, 2, d, s->vocab, 1))
        return -1;
    for (int l = 0; l < n_layer; l++) {
        if (synth_add(c, 1, 0, "blk.%d.attn_norm.weight", l, 1, d, 1, 1) ||
            synth_add(c, 0, mx->attn, "blk.%d.attn_q.weight", l, 2, d, q, 1) ||
            synth_add(c, 0, mx->attn, "blk.%d.attn_k.weight", l, 2, d, kv, 1) ||
            synth_add(c, 0, mx->attn, "blk.%d.attn_v.weight", l, 2, d, kv, 1) ||
            synth_add(c, 0, mx->attn, "blk.%d.attn_output.weight", l, 2, q, d, 1) ||
            synth_add(c, 1, 0, "blk.%d.attn_q_norm.weight", l, 1, s->head_dim, 1, 1) ||
            synth_add(c, 1, 0, "blk.%d.attn_k_norm.weight", l, 1, s->head_dim, 1, 1) ||
            synth_add(c, 1, 0, "blk.%d.ffn_norm.weight", l, 1, d, 1, 1) ||
            synth_add(c, 3, 0, "blk.%d.ffn_gate_inp.weight", l, 2, d, s->n_expert, 1) ||
            synth_add(c, 0, mx->gate_up, "blk.%d.ffn_gate_exps.weight", l, 3, d, s->ff_exp, s->n_expert) ||
            synth_add(c, 0, mx->gate_up, "blk.%d.ffn_up_exps.weight", l, 3, d, s->ff_exp, s->n_expert) ||
            synth_add(c, 0, mx->down, "blk.%d.ffn_down_exps.weight", l, 3, s->ff_exp, d, s->n_expert))
            return -1;
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
    if (!s) { mr_set_error("synth: unknown shape '%s' (see moerun synth --list)", p->shape); return -1; }
    if (!mx) { mr_set_error("synth: unknown quant mix '%s' (see moerun synth --list)", p->mix); return -1; }
    int n_layer = p->n_layers > 0 ? p->n_layers : (int)s->n_layer;
    synth_ctx c = {0};
    c.seed = p->seed;
    c.zipf = p->zipf;
    c.d = s->d;
    int rc = -1;
    mr_gguf_writer *w = mr_gguf_writer_new();
    c.u = malloc(sizeof(float) * (size_t)s->d);
    if (!w || !c.u) { mr_set_error("synth: out of memory"); goto done; }
    rng_t r = {p->seed + 17};
    for (int64_t k = 0; k < s->d; k++) c.u[k] = rng_gauss(&r);
    char name[128];
    snprintf(name, sizeof name, "synthetic %s %s, %d layers, zipf %.2f", s->name, mx->name, n_layer, p->zipf);
    if (mr_gguf_writer_set_str(w, "general.name", name) || synth_vocab(w, s->vocab)) goto done;
    if (synth_qwen3moe(&c, w, s, mx, n_layer)) goto done;
    for (int i = 0; i < c.n; i++)
        if (mr_gguf_writer_add_tensor_fn(w, c.t[i].name, c.t[i].type, c.t[i].n_dims, c.t[i].ne, synth_fill, &c)) goto done;
    if (mr_gguf_writer_write(w, path, 1)) goto done;
    rc = 0;
done:
    mr_gguf_writer_free(w);
    for (int i = 0; i < c.n_pools; i++) free(c.pools[i].blocks);
    free(c.t);
    free(c.u);
    return rc;
}
