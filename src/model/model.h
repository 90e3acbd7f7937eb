/* Internal model framework: one struct mr_model per loaded GGUF, one struct mr_arch per architecture.
 *
 * An architecture file (src/model/arch_NAME.c) defines `const struct mr_arch mr_arch_NAME` and is listed
 * in the table in model.c. Loading: model.c opens the GGUF, creates the thread pool, picks the arch by
 * `general.architecture`, and calls arch->load(m), which reads hyperparameters (mr_model_hp_* helpers,
 * keys "ARCH.suffix" with the reference's defaults), looks up tensors (mr_model_tensor: checks type and
 * shape and names the tensor in the error), fills m->n_vocab / n_embd / n_layer and stores its own
 * state in m->priv. If the arch has routed experts it calls mr_model_init_pager() with its
 * ffn_{gate,up,down}_exps tensors: routed experts are then obtained ONLY through m->pager
 * (mr_pager_prefetch / get / release, see moe.h which does that for you).
 *
 * A session owns one arch state (state_new(m, n_ctx): KV cache etc. for n_ctx positions).
 * eval(m, st, tok, n, pos0, logits, all_logits) appends tokens tok[0..n) at positions pos0.. pos0+n-1
 * (pos0 = number of tokens already in the state; n == 1 is the decode path, n > 1 a prefill batch,
 * which may also follow earlier tokens) and writes logits:
 *   all_logits != 0: logits[i * n_vocab + v] for every i in [0, n)
 *   all_logits == 0: logits[v] for the last token only
 * logits may be NULL (nothing written). Returns 0, or -1 with mr_set_error(). On failure the state is
 * unspecified until state_reset.
 *
 * Snapshots (snapshot.c, mr_session_save/restore): state_io hands every region of the state that the
 * positions [0, n_past) left behind to io->fn, always in the same order for the same model and n_past:
 * io->fn copies it out (save), overwrites it (restore) or only counts it (size). A region is whatever
 * the next evaluation may read: KV rows [0, n_past), whole recurrent states and rings. On restore the
 * hook also sets its own position bookkeeping to n_past.
 *
 * Threads: m->pool (mr_pool_run; also handed to mr_matmul). Weights: mr_model_matmul(). */
#ifndef MR_MODEL_H
#define MR_MODEL_H
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include "moerun.h"
#include "base/base.h"
#include "base/pool.h"
#include "gguf/gguf.h"
#include "pager/pager.h"
#include "quant/matmul.h"
#include "quant/quant.h"

typedef struct mr_state_io {
    int restore;                                        /* 1: fn overwrites the region */
    int (*fn)(struct mr_state_io *io, void *data, size_t bytes); /* 0, or -1 with mr_set_error */
    void *user;
} mr_state_io;

struct mr_arch {
    const char *name;                                   /* general.architecture */
    int (*load)(mr_model *m);                           /* hparams + tensors; sets n_vocab etc., m->priv */
    void (*free)(mr_model *m);                          /* frees m->priv (pager/gguf/pool are freed by model.c) */
    void *(*state_new)(mr_model *m, int n_ctx);         /* per-session state for n_ctx positions */
    void (*state_free)(mr_model *m, void *st);
    void (*state_reset)(mr_model *m, void *st);         /* forget all positions */
    int (*eval)(mr_model *m, void *st, const int32_t *tok, int n, int pos0, float *logits, int all_logits);
    /* optional: keep only the first n positions (prompt cache); NULL if the state cannot be cut */
    int (*state_truncate)(mr_model *m, void *st, int n);
    /* optional: tokens of several sequences in one pass, token t in state st[t] at position pos[t];
     * logits [rows][n_vocab] for the tokens with want[t] != 0 in token order (want NULL: every token) */
    int (*eval_multi)(mr_model *m, void *const *st, const int *pos, const int32_t *tok, int n, const uint8_t *want,
                      float *logits);
    /* the evaluation state at n_past positions through io (above); returns what io->fn returned */
    int (*state_io)(mr_model *m, void *st, int n_past, mr_state_io *io);
    /* optional: mr_session_mtp_draft (moerun.h): the trunk's state st at n_past positions, the MTP block
     * of model mm (m, or a sidecar or DSpark drafter with the same hook) with its state mst (st, or the
     * drafter session's); conf (a DSpark drafter's confidences) may be NULL */
    int (*mtp_draft)(mr_model *m, void *st, mr_model *mm, void *mst, int32_t last, int kmax, int32_t *out,
                     float *logits, float *conf);
    /* optional: mr_model_draft_attach (moerun.h): make m's sessions keep what drafter d reads */
    int (*draft_attach)(mr_model *m, const mr_model *d);
    /* refuse a file with a tensor the loader did not look up (mainline loads optional biases, LongRoPE
     * factors, NVFP4 ".scale" tensors...: ignoring one would compute something else), except the blocks
     * past n_layer (MTP heads, skipped on purpose) */
    int check_tensors;
};

/* a session (moerun.h): the arch state and its position */
struct mr_session {
    mr_model *m;
    void *st;
    int n_ctx, n_past;
    mr_scratch ws;  /* the arena of its evals' matrix products (mr_model_matmul_many) */
    mr_scratch tmp; /* its evals' buffers that live across products (m->tmp) */
};

struct mr_model {
    const struct mr_arch *arch;
    mr_model_params params;     /* as given, with n_threads resolved (>= 1); its strings NULL after load */
    int isa;                    /* kernels' ISA of every eval (params.isa resolved at load) */
    char *path;
    char arch_name[64];
    mr_gguf *gguf;
    mr_pool *pool;
    mr_pager *pager;            /* NULL until mr_model_init_pager (dense models never create one) */
    mr_pager_layer *exp_layers; /* [n_layer] routed-expert tensors given to mr_model_init_pager */
    mr_tokenizer *tok;          /* NULL if the GGUF has no usable tokenizer */
    /* filled by arch->load */
    int n_vocab, n_embd, n_layer, n_ctx_train;
    int n_mtp;                  /* MTP blocks loaded (params.mtp), run by arch->mtp_draft */
    int n_exp_layers;           /* layers the pager holds experts of (n_layer, + the MTP blocks) */
    void *priv;                 /* arch-private */
    struct mr_moe_approx *approx; /* MoE approximations (moe_approx.h); allocated at load (settings off) */
    const struct mr_moe_remote *moe_remote; /* experts computed elsewhere (moe.h); NULL: all local */
    /* during an eval, the arenas of its session (the first one of a multi-sequence eval;
     * evaluations of a model do not overlap): ws for the products, reset by each; tmp for a step's
     * buffers that live across products (the approximation masks), reset by the step that uses it */
    mr_scratch *ws, *tmp;
    int load_err;               /* set by mr_model_tensor / mr_model_f32 on any failure */
    uint8_t *t_used;            /* [n_tensors] found by mr_model_tensor during load (arch->check_tensors) */
    /* repacked copies (quant/repack.h), one per tensor, made by mr_model_weight / init_pager */
    mr_repacked **rp; const mr_gguf_tensor **rp_src; int n_rp, cap_rp;
    int rp_total;               /* load progress: matrices of a repackable type (counted once) */
    const mr_repacked **exp_rp; /* [n_layer * MR_PAGER_MATS] copies of the resident experts, or NULL */
    /* [n_layer * MR_PAGER_MATS] when paging: views (mr_repack_view) of the matrices the pager's slots
     * hold repacked in place (exp_rp points at them), NULL entries where slots keep the file's layout */
    mr_repacked **slot_rp;
    /* floats converted from F16/BF16 1-D tensors by mr_model_f32 (freed with the model) */
    void **owned; int n_owned, cap_owned;
    _Atomic uint64_t identity;  /* mr_model_identity once computed (snapshot.c), 0 before */
};

/* ---- hyperparameters: key is "<arch>.<suffix>" ---- */
/* Return 0 and *out = value (or def if absent and !required); -1 with an error naming the key. */
int mr_model_hp_u32(mr_model *m, const char *suffix, int required, uint32_t def, uint32_t *out);
int mr_model_hp_f32(mr_model *m, const char *suffix, int required, float def, float *out);
int mr_model_hp_bool(mr_model *m, const char *suffix, int required, int def, int *out);
/* A key that is either a scalar or a per-layer array (like ggml's get_key_or_arr): out[n_layer]. */
int mr_model_hp_u32_layers(mr_model *m, const char *suffix, int required, uint32_t def, uint32_t *out, int n_layer);
/* string (NULL if absent); key is used as given (no arch prefix) */
const char *mr_model_meta_str_internal(const mr_model *m, const char *key);

/* ---- tensors ---- */
/* Look up a tensor by printf-style name and check its shape: ne[i] for i < n_dims must equal
 * shape[i] (a shape value < 0 means "any"); dims from n_dims on must be 1.
 * Missing and required: NULL, error "model: missing tensor 'blk.3.attn_q.weight' (expected shape
 * [256, 256])" and m->load_err = 1. Missing and optional: NULL, no error. Wrong shape or a type
 * with no kernels: NULL, error, m->load_err = 1. So a loader can look everything up and then test
 * m->load_err once. */
const mr_gguf_tensor *mr_model_tensor(mr_model *m, int required, int n_dims, const int64_t *shape,
                                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* 1-D float view of a small tensor (norm weights, biases): F32 data directly, F16/BF16 converted once
 * into a buffer owned by the model. NULL + error for other types. */
const float *mr_model_f32(mr_model *m, const mr_gguf_tensor *t);

/* A weight matrix: rows x cols, row-major in `type` (ggml ne = {cols, rows}), with the repacked
 * copy the model made of it (quant/matmul.h's handle). mr_weight_of: the handle of a tensor without
 * a copy; mr_model_weight: with the copy when the ISA has a faster layout for it (made once per
 * tensor, freed with the model). A zero handle for t == NULL. */
typedef mr_mat mr_weight;
static inline mr_weight mr_weight_of(const mr_gguf_tensor *t) {
    mr_weight w = {0};
    if (t) { w.data = t->data; w.type = t->type; w.cols = t->ne[0]; w.rows = t->ne[1]; w.name = t->name; }
    return w;
}
mr_weight mr_model_weight(mr_model *m, const mr_gguf_tensor *t);
/* The repacked copy of routed-expert matrix `mat` (MR_PAGER_GATE/UP/DOWN) of a layer when the
 * experts are resident, its view when paged experts are repacked in their slots (NULL: neither):
 * pass it with the pager's pointers. */
const mr_repacked *mr_model_expert_rp(const mr_model *m, int layer, int mat);
/* Y[j][0..rows) = W X[j] for j < ncols (X columns of cols floats). Uses the model's pool. */
int mr_model_matmul(mr_model *m, const mr_weight *w, const float *X, int64_t ncols, float *Y);
/* mr_matmul_many on the model's threads, its buffers from the evaluating session's arena (m->ws;
 * allocated per call outside an eval) */
int mr_model_matmul_many(mr_model *m, const mr_matmul_task *t, int n);
/* Row `row` of a (possibly quantized) 2-D tensor as floats (embedding lookup): out[ne0]. */
int mr_tensor_get_row(const mr_gguf_tensor *t, int64_t row, float *out);

/* ---- routed experts ---- */
/* layers[n_layer]: ffn_{gate,up,down}_exps per layer (NULL mats for non-MoE layers). Creates
 * m->pager with m->params.ram_budget. */
int mr_model_init_pager(mr_model *m, const mr_pager_layer *layers);
/* the same for n layers of routed experts: the n_layer trunk layers and blocks run outside them (MTP) */
int mr_model_init_pager_n(mr_model *m, const mr_pager_layer *layers, int n);
/* unpin every pager layer's batch (after a failed eval) */
void mr_model_pager_release_all(mr_model *m);

/* ---- debug taps ---- */
/* If params.dump selects `name` ("all" or a comma-separated list of names), print to stderr
 * "name-il [ne0 x ne1]: sum rms min max" and the first params.dump_n values of column 0.
 * x holds ne1 columns of ne0 floats. il < 0 for tensors outside layers. */
void mr_model_dump(const mr_model *m, const char *name, int il, const float *x, int64_t ne0, int64_t ne1);
static inline int mr_model_dumping(const mr_model *m) { return m->params.dump && m->params.dump[0]; }

#endif
