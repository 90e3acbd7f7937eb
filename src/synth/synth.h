/* Internals of moerun synth (public entry points: mr_synth, mr_synth_list in moerun_tools.h).
 * synth.c holds the generator (random pools, tensor list, streamed fill), the vocabulary and the
 * qwen3moe shapes; synth_ds4.c the deepseek4 (DeepSeek-V4) shapes, synth_deepseek2.c the deepseek2 ones
 * (DeepSeek-V3, Kimi-K2). */
#ifndef MR_SYNTH_H
#define MR_SYNTH_H
#include "moerun_tools.h"
#include "gguf/gguf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

typedef struct { uint64_t s; } synth_rng;
static inline uint64_t synth_rng_next(synth_rng *r) { /* splitmix64 */
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline float synth_rng_unif(synth_rng *r) { return (float)((synth_rng_next(r) >> 40) * (1.0 / 16777216.0)); }
static inline float synth_rng_gauss(synth_rng *r) {
    float u1 = synth_rng_unif(r), u2 = synth_rng_unif(r);
    if (u1 < 1e-7f) u1 = 1e-7f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

/* How a tensor's values are made. */
enum synth_kind {
    SYNTH_POOL,   /* blocks drawn from a pool of random blocks of the tensor's type, RMS ~ std */
    SYNTH_ONES,   /* F32 ones (norm weights) */
    SYNTH_EMBD,   /* rows of N(0, std^2) (+ std * u if skew), converted to the tensor's type */
    SYNTH_ROUTER, /* F32 rows of N(0, std^2) (+ b_e u / sqrt(ne0), b_e ~ -zipf ln(e+1), if skew) */
    SYNTH_VEC,    /* F32 values mean + std * N(0,1) (biases, scales, sinks) */
    SYNTH_HASH,   /* I32 rows of ne0 distinct expert ids in [0, n_expert), drawn with Zipf(zipf) popularity */
    SYNTH_BIAS,   /* F32 router bias: -SYNTH_BIAS_T * zipf * ln(e+1) + std * N(0,1) for expert e */
};

/* Router bias temperature for sqrt(softplus) routing with logits ~ N(0,1): selection frequency then
 * falls off like rank^-zipf (simulated: top-6 of 256, zipf 0.5 / 1 / 1.5 gives slopes 0.6 / 1.1 / 1.7). */
#define SYNTH_BIAS_T 0.2f

typedef struct synth_pool synth_pool;

typedef struct {
    char name[96];
    int type, n_dims, kind, skew, layer;
    int64_t ne[4];
    float std, mean;
    synth_pool *pool;
} synth_tensor;

typedef struct {
    synth_tensor *t;
    int n, cap;
    synth_pool *pools;
    int n_pools;
    uint64_t seed;
    float zipf;
    int64_t d;
    float *u;          /* skew direction, d values (qwen3moe) */
    int n_expert;      /* SYNTH_HASH ids are below this */
    double *zipf_cdf;  /* n_expert cumulative popularities for SYNTH_HASH (NULL: uniform) */
} synth_ctx;

/* Appends a tensor (std defaults to 1/sqrt(ne0), mean 0); name is fmt with the layer number. The
 * type of SYNTH_ONES/ROUTER/VEC/BIAS tensors is F32 and of SYNTH_HASH I32, whatever `type` says.
 * Returns NULL (error set) if the row does not fit the type's blocks. */
synth_tensor *synth_add(synth_ctx *c, int kind, int type, const char *fmt, int layer, int n_dims, int64_t ne0,
                        int64_t ne1, int64_t ne2);

/* Quant mix: types for attention/dense matrices (and deepseek4 shared experts), routed expert
 * gate/up, routed expert down, token embedding, output head; ftype is llama.cpp's
 * general.file_type label for the mix (llama.h enum llama_ftype). */
typedef struct { const char *name; int attn, gate_up, down, embd, head, ftype; } synth_mix;

/* SPM vocabulary of n tokens (<unk> <s> </s>, byte tokens, letter pieces). */
int synth_vocab(mr_gguf_writer *w, int64_t n);

/* Parses "0,0,4,128" into out (at most max values); returns the count or -1 (error set). */
int synth_parse_ratios(const char *s, int *out, int max);

/* deepseek4 shapes (synth_ds4.c). */
int synth_ds4_has_shape(const char *name);
void synth_ds4_list(FILE *out);
/* Adds the deepseek4 metadata and tensors; *n_layer is in/out (0 = full depth); fills c->n_expert. */
int synth_ds4_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer);
/* deepseek2 shapes (synth_deepseek2.c). */
int synth_ds2_has_shape(const char *name);
void synth_ds2_list(FILE *out);
int synth_ds2_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer);

/* gpt-oss shapes (synth_gpt_oss.c). */
int synth_oss_has_shape(const char *name);
void synth_oss_list(FILE *out);
int synth_oss_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer);

/* glm4moe shapes (synth_glm4moe.c). */
int synth_glm_has_shape(const char *name);
void synth_glm_list(FILE *out);
int synth_glm_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer);

/* qwen35moe shapes (synth_qwen35moe.c). */
int synth_q35_has_shape(const char *name);
void synth_q35_list(FILE *out);
int synth_q35_build(synth_ctx *c, mr_gguf_writer *w, const char *shape, const synth_mix *mx,
                    const mr_synth_params *p, int *n_layer);

/* Shared by the shape files: the mix's type if ne0 fits its blocks, else Q8_0 (else F16); an F32 norm
 * weight vector 1 + N(0, 0.2^2). */
int synth_fit_type(int type, int64_t ne0);
int synth_norm(synth_ctx *c, const char *fmt, int l, int64_t n);
#endif
