/* DeepSeek-V4-Flash (`deepseek4`): the model and session types shared by the files of this folder,
 * and the entry point between them. Dependencies run one way:
 *   load.c (loader, session state, the mr_arch) -> forward.c (ds4_eval) -> model/moe.h (experts)
 *   every file -> ops.h (the V4-specific math, no model). */
#ifndef MR_DEEPSEEK4_DS4_H
#define MR_DEEPSEEK4_DS4_H
#include "model/model.h"
#include "model/deepseek4/ops.h"

#include <stdlib.h>
#include <string.h>

#define DS4_MAX_TAP 8
#define DS4_MAX_TAP_LAYERS 256

typedef struct {
    int ratio;                  /* 0, 4 or 128 */
    float lim;                  /* routed SwiGLU clamp (swiglu_clamp_exp) */
    float lim_sh;               /* shared expert's (swiglu_clamp_shexp; absent: lim, as mainline) */
    mr_weight hc_attn_fn, hc_ffn_fn;
    const float *hc_attn_base, *hc_attn_scale, *hc_ffn_base, *hc_ffn_scale;
    const float *attn_norm, *ffn_norm, *sinks, *q_a_norm, *kv_norm;
    mr_weight q_a, q_b, kv, out_a, out_b;
    mr_weight gate_inp, sh_gate, sh_up, sh_down;
    const int32_t *tid2eid;     /* [V][k], hash layers */
    const float *exp_bias;      /* [E], others */
    /* compressor (ratio > 0): Wd = c*D, ape [ratio][Wd] */
    mr_weight c_kv, c_gate;
    const float *c_ape, *c_norm;
    /* indexer (ratio 4): compressor Wd = 2*Di */
    mr_weight i_qb, i_proj, ic_kv, ic_gate;
    const float *ic_ape, *ic_norm;
    ds4_rope rope;
} ds4_layer;

typedef struct {
    int L_all;                  /* block_count: the trunk layers and n_mtp MTP blocks after them */
    int n_mtp;                  /* nextn_predict_layers with the blocks present (never run as layers) */
    int mtp;                    /* params.mtp: the (first) MTP block is loaded as layers[L], run only by
                                   ds4_mtp_draft; sessions keep the trunk's last output streams */
    int n_run;                  /* layers: L + mtp (a sidecar loads only the last) */
    int sidecar;                /* an MTP-only file (mainline's convert --mtp, loaded with params.mtp): no
                                   trunk (n_layer 0), it drafts for another model's sessions */
    int keep_h;                 /* params.mtp on a model with a trunk: sessions keep its last streams */
    mr_weight eh_proj, mtp_head;        /* nextn.eh_proj {2d -> d}; nextn.shared_head_head, else output */
    const float *enorm, *hnorm, *mtp_norm; /* nextn.enorm, hnorm; shared_head_norm, else output_norm */
    const mr_gguf_tensor *mtp_embd;     /* nextn.embed_tokens, else token_embd */
    int shexp_key;              /* the file has swiglu_clamp_shexp */
    /* a DSpark drafter (arch dflash, mainline's graph_dsv4; n_layer 0, its L stages run only by
     * ds4_dspark_draft): encoder fc {n_tap*d -> d} + enc_norm over the target's taps, the stages'
     * block attention (noncausal: every block row sees the whole block), the Markov head
     * markov_w1 {R, V} / markov_w2 {R -> V}, the confidence head conf_w {d + R -> 1} + conf_b */
    int dspark, block, mask_tok, noncausal, R_mk, n_tap;
    int tap[DS4_MAX_TAP];       /* target layers whose input streams' mean feeds the encoder (L: the output) */
    mr_weight fc, markov_w2, conf_w;
    const float *enc_norm, *conf_b;
    const mr_gguf_tensor *markov_w1;
    /* a target with a DSpark drafter attached (ds4_draft_attach): sessions keep the mean of the streams
     * at the tap layers' inputs, tap_at[il] = the tap's index or -1 ([L + 1]), of the last tap_cap positions */
    int n_taps, tap_cap;
    int tap_at[DS4_MAX_TAP_LAYERS + 1];
    int d, L, V, H, D, R, G, rq, ro, E, K, F, Fs, Lh, W, Hi, Di, topk, Nh, Ti, n_ctx_train;
    float eps, eps_hc, ws;
    int norm_w;
    int gating;                 /* MR_GATING_* (expert_gating_func, mapped by mr_moe_gating_from_gguf) */
    int graph;                  /* params.graph (MR_GRAPH_*) */
    int fp8;                    /* FP8 (E4M3) simulation of the stored KV rows (§3.5): official, fork */
    int idx_had, idx_fp4;       /* indexer q and keys Hadamard-rotated (official, mainline), then FP4 (official) */
    int sh_clamp;               /* the shared expert clamped at lim_sh (official, mainline) */
    int kv_rot;                 /* mainline when D == Di: q, KV rows and the attention output rotated by a
                                   kv_rot-point Hadamard per block (its KV-cache rotation), else 0 */
    int kv_f16;                 /* caches hold F16 (default) */
    int prefill_f32;            /* params.ds4_prefill_f32: the reference's asymmetric precision (a
                                   prefill's compressed layers attend over F32 keys); default: the
                                   prefill reads F16-rounded keys like the decode, so both agree */
    const mr_gguf_tensor *tok_embd;
    mr_weight output, out_hc_fn;
    const float *out_hc_base, *out_hc_scale, *out_norm;
    ds4_layer *layers;
} ds4_model;

/* rows of `width` values: F16 (uint16_t) or F32 */
typedef struct {
    void *data;
    int f16;
    int64_t width, cap;
} ds4_rows;

static inline int ds4_rows_init(ds4_rows *r, int64_t width, int64_t cap, int f16) {
    r->width = width; r->cap = cap; r->f16 = f16;
    r->data = mr_calloc((size_t)(width * cap), f16 ? 2 : 4);
    return r->data ? 0 : -1;
}
static inline void ds4_rows_put(ds4_rows *r, int64_t i, const float *x) {
    if (r->f16) { uint16_t *p = (uint16_t *)r->data + i * r->width; for (int64_t k = 0; k < r->width; k++) p[k] = mr_fp32_to_fp16(x[k]); }
    else memcpy((float *)r->data + i * r->width, x, sizeof(float) * (size_t)r->width);
}
/* a key pointer pair for row i */
static inline void ds4_rows_ptr(const ds4_rows *r, int64_t i, const float **f, const uint16_t **h) {
    if (r->f16) { *f = NULL; *h = (const uint16_t *)r->data + i * r->width; }
    else { *f = (const float *)r->data + i * r->width; *h = NULL; }
}

/* How many evaluated positions a session can be cut back by (mr_session_truncate), e.g. the
 * rejected drafts of speculative decoding. The rings below keep this many extra positions so that
 * cutting back needs no re-evaluation: the window rows of the positions kept are not overwritten,
 * and the compressor state at the cut is rebuilt from the per-position history. */
#define DS4_CUT_SLACK 80

typedef struct {
    ds4_rows raw;       /* ring of W + DS4_CUT_SLACK rows of D (position p at row p % cap) */
    ds4_rows comp;      /* ratio > 0: compressed attention rows */
    ds4_rows icomp;     /* ratio 4: compressed indexer rows */
    float *kvs, *scs;   /* attention compressor state [c*r][c*D] */
    float *ikvs, *iscs; /* indexer compressor state [8][2*Di] */
    /* compressor inputs of the last c*r + DS4_CUT_SLACK positions (position p at row p % cap), F32:
     * attention [c*D] (hkv, hsc), indexer [2*Di] (ihkv, ihsc) */
    ds4_rows hkv, hsc, ihkv, ihsc;
} ds4_lstate;

typedef struct {
    int n_ctx;
    int n_past;         /* positions evaluated (for ds4_state_truncate's bound) */
    ds4_lstate *l;      /* [n_layers] trunk layers, then the MTP block's (model mtp) */
    int n_layers;
    /* model mtp: the trunk's output streams [Nh*d] and the tokens of the last hcap positions (position p
     * at row p % hcap); h_low: the lowest position evaluated since the MTP block last caught up;
     * mtp_past: positions the block's window ring holds (l[n_layers]) */
    float *h;
    int32_t *htok;
    int hcap, h_low, mtp_past;
    /* model n_taps: the taps [tap_cap][n_taps][d] (position p at row p % tap_cap) from position tap_from on */
    float *tap;
    int tap_from;
    float *kconv;       /* scratch kept between steps: a short batch's F16 keys as floats */
    size_t kconv_cap;   /* floats */
    mr_scratch scratch; /* a batch's buffers (forward.c ds4_buf_carve), grown to the largest batch */
    mr_scratch moe_ws;  /* the expert engine's arena (mr_moe_buf.ws) */
} ds4_state;

/* forward.c: the mr_arch eval (model.h's contract), any n (cut into batches internally) */
int ds4_eval(mr_model *m, void *stp, const int32_t *tok, int n, int pos0, float *logits, int all_logits);
/* forward.c: the mr_arch eval_multi: token t of session st[t] at position pos[t], logits [rows][V] of
 * the tokens with want[t] (want NULL: all) */
int ds4_eval_multi(mr_model *m, void *const *st, const int *pos, const int32_t *tok, int n, const uint8_t *want,
                   float *logits);
/* forward.c: the mr_arch mtp_draft (mr_session_mtp_draft in moerun.h) */
int ds4_mtp_draft(mr_model *m, void *st, mr_model *mm, void *mst, int32_t last, int kmax, int32_t *out,
                  float *logits, float *conf);
/* forward.c: a DSpark drafter's block (called by ds4_mtp_draft for a dflash mm); conf [kmax] or NULL */
int ds4_dspark_draft(mr_model *m, void *st, mr_model *mm, void *mst, int32_t last, int kmax, int32_t *out,
                     float *logits, float *conf);
/* rows of the MTP block's window ring: the window, the cut-back slack and the longest draft */
#define DS4_MTP_RING_EXTRA (DS4_CUT_SLACK + 64)

#endif
