/* DeepSeek-V4-Flash (`deepseek4`): loader, per-sequence state and forward pass.
 * Follows ../shared/specs/deepseek4.md (§ numbers below); the building blocks are in ops.c.
 *
 * Paths. Like the reference, a batch that starts at position 0 is a "prefill": compressed rows come
 * from a batched compressor over the batch and its attention uses the batch's own rows. Any other
 * batch (a single decode token or a later chunk) runs the streaming compressor token by token and
 * reads raw and compressed keys back from the caches (§4.1). Caches hold F16 (params.kv_f32: F32).
 * Unlike the reference, whose prefill attends over F32 keys in compressed layers (§5 items 21-22),
 * every path here sees the keys as the cache stores them (F16-rounded), so a prefill and the same
 * tokens decoded one by one compute the same numbers bit for bit; MOERUN_DS4_PREFILL_F32=1 restores
 * the reference's asymmetric precision (see docs/DEEPSEEK4.md for the measurements).
 *
 * Graphs (params.graph, docs/DEEPSEEK4.md): official (default; FP8 KV rows, indexer QAT = Hadamard +
 * FP4 on indexer q and keys, shared-expert clamp), mainline llama.cpp's (no FP8, indexer Hadamard
 * only, shared clamp), the fork's (FP8, no indexer QAT, no shared clamp; spec §8). */
#include "model/deepseek4/ds4.h"
#include "model/moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------- */
/* loader (§1, §2) */

static int ds4_get_kv_array(mr_model *m, const char *suffix, const mr_gguf_kv **out) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", m->arch_name, suffix);
    *out = mr_gguf_find_kv(m->gguf, key);
    return *out ? 0 : -1;
}

/* a clamp key (swiglu_clamp_exp / swiglu_clamp_shexp): f32 scalar or f32[block_count] (mainline's
 * get_key_or_arr: exactly block_count entries, the MTP block's included); out[l] for the trunk layers.
 * Returns 1 when the key is absent (out untouched), 0 when read, -1 on a malformed key. */
static int ds4_read_clamp(mr_model *m, const ds4_model *M, const char *suffix, float *out, size_t stride) {
    const mr_gguf_kv *kv;
    if (ds4_get_kv_array(m, suffix, &kv)) return 1;
    if (kv->type == MR_GGUF_F32 || kv->type == MR_GGUF_F64) {
        for (int l = 0; l < M->n_run; l++) *(float *)((char *)out + l * stride) = (float)kv->v.f64;
        return 0;
    }
    if (kv->type == MR_GGUF_ARRAY && kv->arr_type == MR_GGUF_F32) {
        if (kv->n != (uint64_t)M->L_all) {
            mr_set_error("%s: %s.%s has %llu entries, expected %d (block_count)", m->path, m->arch_name, suffix,
                         (unsigned long long)kv->n, M->L_all);
            return -1;
        }
        for (int l = 0; l < M->n_run; l++) *(float *)((char *)out + l * stride) = ((const float *)kv->arr)[l];
        return 0;
    }
    mr_set_error("%s: %s.%s must be a float or a float array", m->path, m->arch_name, suffix);
    return -1;
}

/* Routed clamp (absent: 0 = none) and the shared expert's (absent: the routed one, as mainline's
 * load_hparams does; spec §8 item 2). */
static int ds4_read_clamps(mr_model *m, ds4_model *M) {
    for (int l = 0; l < M->n_run; l++) M->layers[l].lim = 0.0f;
    int rc = ds4_read_clamp(m, M, "swiglu_clamp_exp", &M->layers[0].lim, sizeof(ds4_layer));
    if (rc < 0) return -1;
    rc = ds4_read_clamp(m, M, "swiglu_clamp_shexp", &M->layers[0].lim_sh, sizeof(ds4_layer));
    if (rc < 0) return -1;
    M->shexp_key = rc == 0;
    if (rc) for (int l = 0; l < M->n_run; l++) M->layers[l].lim_sh = M->layers[l].lim;
    return 0;
}

/* A per-layer key mainline reads with get_key_or_arr but applies as its entry 0 to every layer (u32 or
 * u32[block_count]): the entries of the layers that run (trunk, and the MTP block when loaded) must
 * agree, else the file is refused with `why` rather than mis-read. *dst = the value (def if absent). */
static int ds4_read_uniform(mr_model *m, const ds4_model *M, const char *suffix, int required, uint32_t def,
                            const char *why, int *dst) {
    uint32_t *w = mr_malloc(sizeof *w * (size_t)M->L_all);
    if (!w) { mr_set_error("deepseek4: out of memory"); return -1; }
    int rc = mr_model_hp_u32_layers(m, suffix, required, def, w, M->L_all);
    const int b = M->sidecar ? M->L : 0; /* the first layer that runs */
    for (int l = b + 1; !rc && l < M->n_run; l++)
        if (w[l] != w[b]) {
            mr_set_error("%s: %s.%s differs between layers (%u at layer %d, %u at layer %d); %s", m->path, m->arch_name,
                         suffix, w[b], b, w[l], l, why);
            rc = -1;
        }
    const uint32_t v = w[b];
    if (!rc && v > 0x7fffffff) { mr_set_error("%s: %s.%s = %u is too large", m->path, m->arch_name, suffix, v); rc = -1; }
    if (!rc) *dst = (int)v;
    free(w);
    return rc;
}

/* expert_feed_forward_length and expert_used_count: mainline sizes every layer's experts with entry 0
 * (n_ff_exp()) and routes every layer to n_expert_used() (entry 0 too) */
static int ds4_read_ffexp(mr_model *m, ds4_model *M) {
    return ds4_read_uniform(m, M, "expert_feed_forward_length", 1, 0,
                            "DeepSeek V4 (and mainline llama.cpp) size every layer's experts alike", &M->F) ||
                   ds4_read_uniform(m, M, "expert_used_count", 0, 0,
                                    "mainline llama.cpp routes every DeepSeek V4 layer to the first entry's number of "
                                    "experts, so a file with different counts per layer is refused rather than run "
                                    "either way", &M->K)
               ? -1 : 0;
}

/* nextn_predict_layers (mainline load_arch_hparams): the last n of block_count blocks are MTP blocks
 * (blk.N.nextn.eh_proj/enorm/hnorm/shared_head_norm + a full layer's tensors) when blk.(L-n).nextn
 * .eh_proj exists; otherwise the key is ignored and every block is a trunk layer. The MTP block is
 * never run as a layer. A file with the block but no trunk (blk.0.attn_norm missing) is an MTP-only
 * sidecar, refused by name, as is a trailing nextn block the key does not announce. */
static int ds4_read_nextn(mr_model *m, ds4_model *M) {
    uint32_t n = 0;
    if (mr_model_hp_u32(m, "nextn_predict_layers", 0, 0, &n)) return -1;
    char name[96];
    if (n >= (uint32_t)M->L_all) {
        mr_set_error("%s: %s.nextn_predict_layers = %u must be below block_count %d", m->path, m->arch_name, n, M->L_all);
        return -1;
    }
    if (n > 0) {
        snprintf(name, sizeof name, "blk.%d.nextn.eh_proj.weight", M->L_all - (int)n);
        if (!mr_gguf_find_tensor(m->gguf, name)) n = 0;
    }
    if (n > 0 && !mr_gguf_find_tensor(m->gguf, "blk.0.attn_norm.weight")) {
        if (!m->params.mtp) {
            mr_set_error("%s: this is a DeepSeek-V4 MTP sidecar (%u next-token-prediction block%s, no trunk layers: "
                         "nextn_predict_layers with block_count %d); it drafts for the main model and does not run "
                         "alone: give it as the draft model (-md; mr_model_params.mtp = 1)", m->path, n, n > 1 ? "s" : "",
                         M->L_all);
            return -1;
        }
        M->sidecar = 1;
    }
    if (n == 0) {
        snprintf(name, sizeof name, "blk.%d.nextn.eh_proj.weight", M->L_all - 1);
        if (mr_gguf_find_tensor(m->gguf, name)) {
            mr_set_error("%s: blk.%d is an MTP (nextn) block but %s.nextn_predict_layers does not say so; "
                         "it would be run as a layer: fix the metadata", m->path, M->L_all - 1, m->arch_name);
            return -1;
        }
    }
    M->n_mtp = (int)n;
    M->L = M->L_all - (int)n;
    M->mtp = m->params.mtp && n > 0; /* the first block: mainline drafts with one (graph_mtp) */
    M->n_run = M->L + M->mtp;
    M->keep_h = m->params.mtp && !M->sidecar;
    if (n > 0) mr_log(2, "%s: %u MTP block%s (blk.%d) recognised and not run as a layer\n", m->path, n, n > 1 ? "s" : "", M->L);
    return 0;
}

/* attention.compress_ratios: u32/i32 array of >= L entries, each 0, 4 or 128 */
static int ds4_read_ratios(mr_model *m, ds4_model *M) {
    const mr_gguf_kv *kv;
    if (ds4_get_kv_array(m, "attention.compress_ratios", &kv) && M->dspark) return 0; /* mainline: all 0 */
    if (ds4_get_kv_array(m, "attention.compress_ratios", &kv)) {
        mr_set_error("%s: missing key %s.attention.compress_ratios", m->path, m->arch_name);
        return -1;
    }
    if (kv->type != MR_GGUF_ARRAY || (kv->arr_type != MR_GGUF_U32 && kv->arr_type != MR_GGUF_I32) ||
        kv->n < (uint64_t)M->L_all) {
        mr_set_error("%s: %s.attention.compress_ratios must be an integer array of at least %d entries (block_count)",
                     m->path, m->arch_name, M->L_all);
        return -1;
    }
    for (int l = 0; l < M->n_run; l++) {
        int64_t r = kv->arr_type == MR_GGUF_U32 ? (int64_t)((const uint32_t *)kv->arr)[l]
                                                : (int64_t)((const int32_t *)kv->arr)[l];
        if (r != 0 && r != 4 && r != 128) {
            mr_set_error("%s: layer %d has compress ratio %lld; DeepSeek V4 supports 0, 4 and 128", m->path, l,
                         (long long)r);
            return -1;
        }
        M->layers[l].ratio = (int)r;
    }
    for (int l = 0; M->dspark && l < M->L; l++)
        if (M->layers[l].ratio != 0) {
            mr_set_error("%s: DSpark stage %d has compress ratio %d; mainline llama.cpp's DSpark drafters attend over "
                         "their window only (ratio 0 on every stage)", m->path, l, M->layers[l].ratio);
            return -1;
        }
    if (M->mtp && M->layers[M->L].ratio != 0) {
        mr_set_error("%s: the MTP block (blk.%d) has compress ratio %d; it attends over its window only (ratio 0, as "
                     "mainline llama.cpp requires)", m->path, M->L, M->layers[M->L].ratio);
        return -1;
    }
    return 0;
}

#define U32(suffix, req, def, dst) do { uint32_t v_; if (mr_model_hp_u32(m, suffix, req, def, &v_)) goto fail; \
                                        if (v_ > 0x7fffffff) { mr_set_error("%s: %s.%s = %u is too large", m->path, m->arch_name, suffix, v_); goto fail; } \
                                        dst = (int)v_; } while (0)
#define F32(suffix, req, def, dst) do { if (mr_model_hp_f32(m, suffix, req, def, &dst)) goto fail; } while (0)
#define BAD(...) do { mr_set_error(__VA_ARGS__); goto fail; } while (0)

/* A DSpark drafter's keys (mainline llama_model_dflash::load_arch_hparams and the draft-dspark driver):
 * block_size, target_layers (the target layers whose inputs feed the encoder), the mask token of the
 * block's later rows, attention.causal (absent: a non-causal block, the driver's default); every
 * block_count block is a stage. A bonus-anchor export (sample_from_anchor false) is refused. */
static int ds4_read_dspark(mr_model *m, ds4_model *M) {
    const mr_gguf_kv *kv;
    uint32_t v = 0;
    int causal = 0, anchor = 1;
    if (mr_model_hp_u32(m, "block_size", 1, 0, &v)) return -1;
    if (v < 1 || v > 64) BAD("%s: dflash.block_size %u must be in 1..64", m->path, v);
    M->block = (int)v;
    if (ds4_get_kv_array(m, "target_layers", &kv) || kv->type != MR_GGUF_ARRAY ||
        (kv->arr_type != MR_GGUF_I32 && kv->arr_type != MR_GGUF_U32) || kv->n < 1 || kv->n > DS4_MAX_TAP)
        BAD("%s: a DSpark drafter needs dflash.target_layers, an integer array of 1..%d layers", m->path, DS4_MAX_TAP);
    M->n_tap = (int)kv->n;
    for (int i = 0; i < M->n_tap; i++) {
        const int32_t t = ((const int32_t *)kv->arr)[i];
        if (t < 0 || t > DS4_MAX_TAP_LAYERS) BAD("%s: dflash.target_layers[%d] = %d is out of range", m->path, i, t);
        M->tap[i] = t;
    }
    if (mr_model_hp_bool(m, "attention.causal", 0, 0, &causal) || mr_model_hp_bool(m, "sample_from_anchor", 0, 1, &anchor)) return -1;
    if (!anchor) BAD("%s: a DSpark drafter with a bonus anchor slot (dflash.sample_from_anchor false) is not supported", m->path);
    M->noncausal = !causal;
    if (mr_gguf_get_u32(m->gguf, "tokenizer.ggml.mask_token_id", &v)) BAD("%s: a DSpark drafter needs tokenizer.ggml.mask_token_id (the block's mask token)", m->path);
    M->mask_tok = (int)(v & 0x7fffffff);
    M->L = M->n_run = M->L_all;
    return 0;
fail:
    return -1;
}

/* the loaders below stop looking after the first error, so the message names the first problem */
static const float *ds4_vec(mr_model *m, int req, int64_t n, const char *fmt, int il) {
    if (m->load_err) return NULL;
    char name[160];
    snprintf(name, sizeof name, fmt, il);
    const int64_t shape[1] = {n};
    return mr_model_f32(m, mr_model_tensor(m, req, 1, shape, "%s", name));
}

static mr_weight ds4_mat(mr_model *m, int req, int64_t cols, int64_t rows, const char *fmt, int il) {
    if (m->load_err) { mr_weight none = {0}; return none; }
    char name[160];
    snprintf(name, sizeof name, fmt, il);
    const int64_t shape[2] = {cols, rows};
    const mr_gguf_tensor *t = mr_model_tensor(m, req, 2, shape, "%s", name);
    mr_weight w = mr_model_weight(m, t);
    if (t && (!mr_type_get(t->type)->vec_dot || !mr_row_size(t->type, cols))) {
        mr_set_error("%s: tensor '%s' has type %s, which has no matrix product here", m->path, name, mr_type_name(t->type));
        m->load_err = 1;
    }
    return w;
}

static void ds4_free(mr_model *m) {
    ds4_model *M = m->priv;
    if (!M) return;
    free(M->layers);
    free(M);
    m->priv = NULL;
}

/* the hyperparameters ds4_load checks or turns into per-layer settings, beside ds4_model's own */
typedef struct {
    int hkv, vlen, gating, n_group, n_orig, n_shared;
    float rope_base, rope_factor, comp_base, beta_fast, beta_slow;
} ds4_hp;

/* the model's keys (§1) into M and hp */
static int ds4_read_hparams(mr_model *m, ds4_model *M, ds4_hp *hp) {
    int ksw = 0, vsw = 0, rsw = 0, head_count = 0;
    *hp = (ds4_hp){.rope_base = 10000.0f, .beta_fast = 32.0f, .beta_slow = 1.0f};
    U32("context_length", 1, 0, M->n_ctx_train);
    U32("embedding_length", 1, 0, M->d);
    U32("block_count", 1, 0, M->L_all);
    U32("expert_count", 0, 0, M->E);
    U32("expert_group_count", 0, 0, hp->n_group);
    U32("attention.head_count", 0, 0, head_count);
    M->H = head_count;
    U32("attention.head_count_kv", 0, (uint32_t)head_count, hp->hkv);
    U32("attention.key_length", 0, M->H > 0 ? (uint32_t)(M->d / M->H) : 0, M->D);
    U32("attention.value_length", 0, M->H > 0 ? (uint32_t)(M->d / M->H) : 0, hp->vlen);
    U32("rope.dimension_count", 0, (uint32_t)M->D, M->R);
    /* every layer is SWA in the reference, so the *_swa variants override when present (§1.1) */
    U32("attention.key_length_swa", 0, (uint32_t)M->D, ksw);
    U32("attention.value_length_swa", 0, (uint32_t)hp->vlen, vsw);
    U32("rope.dimension_count_swa", 0, (uint32_t)M->R, rsw);
    M->D = ksw; hp->vlen = vsw; M->R = rsw;
    U32("rope.scaling.original_context_length", 0, (uint32_t)M->n_ctx_train, hp->n_orig);
    F32("rope.freq_base", 0, 10000.0f, hp->rope_base);
    if (mr_model_hp_f32(m, "rope.scaling.factor", 0, 0.0f, &hp->rope_factor)) goto fail;
    if (hp->rope_factor == 0.0f && mr_model_hp_f32(m, "rope.scale_linear", 0, 0.0f, &hp->rope_factor)) goto fail;
    F32("attention.layer_norm_rms_epsilon", 1, 0.0f, M->eps);
    U32("attention.q_lora_rank", 1, 0, M->rq);
    U32("attention.output_lora_rank", 1, 0, M->ro);
    U32("attention.output_group_count", 1, 0, M->G);
    U32("expert_shared_count", 1, 0, hp->n_shared);
    F32("expert_weights_scale", 0, 0.0f, M->ws);
    if (mr_model_hp_bool(m, "expert_weights_norm", 0, 0, &M->norm_w)) goto fail;
    U32("expert_gating_func", 0, 0, hp->gating);
    U32("attention.sliding_window", 0, 0, M->W);
    F32("attention.compress_rope_freq_base", 0, 0.0f, hp->comp_base);
    U32("attention.indexer.head_count", 0, 0, M->Hi);
    U32("attention.indexer.key_length", 0, 0, M->Di);
    U32("attention.indexer.top_k", 0, 0, M->topk);
    U32("hash_layer_count", !M->dspark, 0, M->Lh);
    U32("hyper_connection.count", 1, 0, M->Nh);
    U32("hyper_connection.sinkhorn_iterations", 1, 0, M->Ti);
    F32("hyper_connection.epsilon", 1, 0.0f, M->eps_hc);
    F32("rope.scaling.yarn_beta_fast", 0, 32.0f, hp->beta_fast);
    F32("rope.scaling.yarn_beta_slow", 0, 1.0f, hp->beta_slow);
    /* mainline's graph rotates the window-only layers with rope.freq_base and never reads the _swa
     * base (nor does the fork); a file that sets a different one is run the same way */
    float base_swa = 0.0f;
    F32("rope.freq_base_swa", 0, 0.0f, base_swa);
    if (base_swa > 0.0f && base_swa != hp->rope_base)
        mr_log(1, "%s: rope.freq_base_swa %g differs from rope.freq_base %g; like llama.cpp, the window layers use %g\n",
               m->path, base_swa, hp->rope_base, hp->rope_base);
    return 0;
fail:
    return -1;
}

/* shape constraints of the graph (§0, §1.3, §3.5, §6.1), the gating, and the graph's switches */
static int ds4_check_shape(mr_model *m, ds4_model *M, const ds4_hp *hp) {
    if (M->d <= 0 || M->L_all <= 0 || M->H <= 0) BAD("%s: deepseek4 needs embedding_length, block_count and attention.head_count", m->path);
    if (hp->hkv != 1) BAD("%s: deepseek4 has one latent KV head; attention.head_count_kv = %d", m->path, hp->hkv);
    if (hp->vlen != M->D) BAD("%s: attention.value_length (%d) must equal key_length (%d)", m->path, hp->vlen, M->D);
    if (M->D > 4096 || M->R <= 0 || M->R > M->D || M->R % 2) BAD("%s: rope.dimension_count %d does not fit head dim %d", m->path, M->R, M->D);
    if ((M->D - M->R) % 64) BAD("%s: head dim %d minus rotary dims %d must be a multiple of 64 (FP8 blocks)", m->path, M->D, M->R);
    if (M->G <= 0 || M->H % M->G) BAD("%s: attention.output_group_count %d must divide head_count %d", m->path, M->G, M->H);
    if (M->rq <= 0 || M->ro <= 0) BAD("%s: q_lora_rank and output_lora_rank must be positive", m->path);
    if (M->Nh <= 0 || M->Nh > DS4_MAX_HC) BAD("%s: hyper_connection.count %d must be in 1..%d", m->path, M->Nh, DS4_MAX_HC);
    if (M->Ti <= 0) BAD("%s: hyper_connection.sinkhorn_iterations must be > 0", m->path);
    if (M->E <= 0 || M->E > 1024 || M->K <= 0 || M->K > M->E || M->K > 64) BAD("%s: expert_count %d / expert_used_count %d invalid", m->path, M->E, M->K);
    if (M->F <= 0 || hp->n_shared <= 0) BAD("%s: expert_feed_forward_length and expert_shared_count must be positive", m->path);
    if (hp->n_group > 1) BAD("%s: expert_group_count %d: group-limited routing is not part of DeepSeek V4", m->path, hp->n_group);
    if (mr_moe_gating_from_gguf(m, (uint32_t)hp->gating, MR_GATING_SQRT_SOFTPLUS, MR_GATING_BIT(MR_GATING_SQRT_SOFTPLUS), &M->gating))
        goto fail;
    if (M->Lh > M->L) M->Lh = M->L;
    M->Fs = M->F * hp->n_shared;
    M->graph = m->params.graph;
    if (M->graph < MR_GRAPH_OFFICIAL || M->graph > MR_GRAPH_FORK) BAD("%s: unknown deepseek4 graph %d", m->path, M->graph);
    M->fp8 = M->graph != MR_GRAPH_MAINLINE;
    M->idx_fp4 = M->graph == MR_GRAPH_OFFICIAL;
    M->idx_had = M->graph != MR_GRAPH_FORK;
    M->sh_clamp = M->graph != MR_GRAPH_FORK;
    M->kv_f16 = !m->params.kv_f32;
    M->prefill_f32 = m->params.ds4_prefill_f32 != 0;
    return 0;
fail:
    return -1;
}

/* the indexer's keys when a layer has ratio 4, the window, and mainline's KV rotation */
static int ds4_check_attn(mr_model *m, ds4_model *M) {
    int any4 = 0;
    for (int l = 0; l < M->L; l++) any4 |= M->layers[l].ratio == 4;
    if (any4) {
        if (M->Hi <= 0 || M->Di <= 0 || M->topk <= 0)
            BAD("%s: ratio-4 layers need attention.indexer.head_count, key_length and top_k", m->path);
        if (M->Di < M->R || M->Di > 4096) BAD("%s: indexer key_length %d must be in [rope dims %d, 4096]", m->path, M->Di, M->R);
        /* mainline rotates in blocks of the largest power of two dividing Di; the rotation leaves the
         * scores as they are up to rounding, so a Di that is not a power of two is scored unrotated */
        if (M->graph == MR_GRAPH_MAINLINE && (M->Di & (M->Di - 1) || M->Di % 32)) M->idx_had = 0;
        if (M->idx_fp4 && (M->Di & (M->Di - 1) || M->Di % 32))
            BAD("%s: the official indexer (Hadamard + FP4) needs a power-of-two key_length >= 32, not %d", m->path, M->Di);
    }
    if (M->W <= 0) BAD("%s: deepseek4 needs attention.sliding_window > 0", m->path);
    /* mainline also rotates the attention caches (q, KV rows, output back) when the head size
     * equals the indexer's (llama-kv-cache.cpp: "always create Hadamard rotation tensors for
     * DeepSeek lightning indexers"), in blocks of the largest power of two >= 64 dividing D: the
     * same values up to the F16 rounding of the rotated keys. Not in V4-Flash (D 512, Di 128). */
    if (M->graph == MR_GRAPH_MAINLINE && M->D == M->Di && M->D % 64 == 0) {
        M->kv_rot = 64;
        while (M->D % (2 * M->kv_rot) == 0) M->kv_rot *= 2;
    }
    return 0;
fail:
    return -1;
}

/* RoPE per layer kind (§3.4): window-only layers plain, compressed layers YaRN-scaled */
static void ds4_rope_layers(ds4_model *M, const ds4_hp *hp, const char *stype) {
    const int yarn = stype && !strcmp(stype, "yarn");
    const int none = stype && !strcmp(stype, "none");
    const float fs = (none || hp->rope_factor == 0.0f) ? 1.0f : 1.0f / hp->rope_factor;
    const float ext = yarn ? 1.0f : 0.0f;
    const float af = (ext != 0.0f && fs > 0.0f) ? 1.0f / (1.0f + 0.1f * logf(1.0f / fs)) : 1.0f;
    const float comp_base = hp->comp_base > 0.0f ? hp->comp_base : hp->rope_base;
    for (int l = 0; l < M->n_run; l++) {
        ds4_layer *ly = &M->layers[l];
        if (ly->ratio == 0) ds4_rope_init(&ly->rope, M->R, 0, hp->rope_base, 1.0f, 0.0f, 1.0f, hp->beta_fast, hp->beta_slow);
        else ds4_rope_init(&ly->rope, M->R, hp->n_orig, comp_base, fs, ext, af, hp->beta_fast, hp->beta_slow);
    }
}

/* layer l's routing tables (§2): the hash layers' token -> experts table (checked), the other
 * layers' selection bias */
static int ds4_load_routing(mr_model *m, ds4_model *M, ds4_layer *ly, int l) {
    const int64_t th[2] = {M->K, M->V};
    const mr_gguf_tensor *t2e = mr_model_tensor(m, l < M->Lh, 2, th, "blk.%d.ffn_gate_tid2eid.weight", l);
    if (l < M->Lh && t2e) {
        if (t2e->type != MR_TYPE_I32) BAD("%s: blk.%d.ffn_gate_tid2eid.weight must be I32, not %s", m->path, l, mr_type_name(t2e->type));
        ly->tid2eid = t2e->data;
        for (int64_t i = 0; i < (int64_t)M->K * M->V; i++)
            if (ly->tid2eid[i] < 0 || ly->tid2eid[i] >= M->E)
                BAD("%s: blk.%d.ffn_gate_tid2eid.weight maps token %lld to expert %d (of %d)", m->path, l,
                    (long long)(i / M->K), ly->tid2eid[i], M->E);
    }
    ly->exp_bias = ds4_vec(m, l >= M->Lh, M->E, "blk.%d.exp_probs_b.bias", l);
    return m->load_err ? -1 : 0;
fail:
    return -1;
}

/* layer l's compressor (r > 0) and, at ratio 4, indexer tensors (§2) */
static int ds4_load_compressor(mr_model *m, ds4_model *M, ds4_layer *ly, int l) {
    const int d = M->d, r = ly->ratio, c = r == 4 ? 2 : 1;
    if (r > 0) {
        const int64_t ash[2] = {(int64_t)c * M->D, r};
        ly->c_ape = mr_model_f32(m, mr_model_tensor(m, 1, 2, ash, "blk.%d.attn_compressor_ape.weight", l));
        if (m->load_err) return -1;
        ly->c_kv = ds4_mat(m, 1, d, (int64_t)c * M->D, "blk.%d.attn_compressor_kv.weight", l);
        ly->c_gate = ds4_mat(m, 1, d, (int64_t)c * M->D, "blk.%d.attn_compressor_gate.weight", l);
        ly->c_norm = ds4_vec(m, 1, M->D, "blk.%d.attn_compressor_norm.weight", l);
    }
    if (r == 4 && !m->load_err) {
        const int64_t ish[2] = {2 * (int64_t)M->Di, 4};
        ly->i_qb = ds4_mat(m, 1, M->rq, (int64_t)M->Hi * M->Di, "blk.%d.indexer.attn_q_b.weight", l);
        ly->i_proj = ds4_mat(m, 1, d, M->Hi, "blk.%d.indexer.proj.weight", l);
        if (!m->load_err) ly->ic_ape = mr_model_f32(m, mr_model_tensor(m, 1, 2, ish, "blk.%d.indexer_compressor_ape.weight", l));
        ly->ic_kv = ds4_mat(m, 1, d, 2 * (int64_t)M->Di, "blk.%d.indexer_compressor_kv.weight", l);
        ly->ic_gate = ds4_mat(m, 1, d, 2 * (int64_t)M->Di, "blk.%d.indexer_compressor_gate.weight", l);
        ly->ic_norm = ds4_vec(m, 1, M->Di, "blk.%d.indexer_compressor_norm.weight", l);
    }
    return m->load_err ? -1 : 0;
}

/* layer l's tensors (§2); its routed experts go to the pager's layer description pl */
static int ds4_load_layer(mr_model *m, ds4_model *M, int l, mr_pager_layer *pl) {
    ds4_layer *ly = &M->layers[l];
    const int d = M->d, Nh = M->Nh, mix = (2 + Nh) * Nh;
    ly->hc_attn_fn = ds4_mat(m, 1, (int64_t)Nh * d, mix, "blk.%d.hc_attn_fn.weight", l);
    ly->hc_attn_base = ds4_vec(m, 1, mix, "blk.%d.hc_attn_base.weight", l);
    ly->hc_attn_scale = ds4_vec(m, 1, 3, "blk.%d.hc_attn_scale.weight", l);
    ly->hc_ffn_fn = ds4_mat(m, 1, (int64_t)Nh * d, mix, "blk.%d.hc_ffn_fn.weight", l);
    ly->hc_ffn_base = ds4_vec(m, 1, mix, "blk.%d.hc_ffn_base.weight", l);
    ly->hc_ffn_scale = ds4_vec(m, 1, 3, "blk.%d.hc_ffn_scale.weight", l);
    ly->attn_norm = ds4_vec(m, 1, d, "blk.%d.attn_norm.weight", l);
    ly->ffn_norm = ds4_vec(m, 1, d, "blk.%d.ffn_norm.weight", l);
    ly->sinks = ds4_vec(m, 1, M->H, "blk.%d.attn_sinks.weight", l);
    ly->q_a = ds4_mat(m, 1, d, M->rq, "blk.%d.attn_q_a.weight", l);
    ly->q_a_norm = ds4_vec(m, 1, M->rq, "blk.%d.attn_q_a_norm.weight", l);
    ly->q_b = ds4_mat(m, 1, M->rq, (int64_t)M->H * M->D, "blk.%d.attn_q_b.weight", l);
    ly->kv = ds4_mat(m, 1, d, M->D, "blk.%d.attn_kv.weight", l);
    ly->kv_norm = ds4_vec(m, 1, M->D, "blk.%d.attn_kv_a_norm.weight", l);
    ly->out_a = ds4_mat(m, 1, (int64_t)M->H * M->D / M->G, (int64_t)M->G * M->ro, "blk.%d.attn_output_a.weight", l);
    ly->out_b = ds4_mat(m, 1, (int64_t)M->G * M->ro, d, "blk.%d.attn_output_b.weight", l);
    ly->gate_inp = ds4_mat(m, 1, d, M->E, "blk.%d.ffn_gate_inp.weight", l);
    const int64_t ge[3] = {d, M->F, M->E}, de[3] = {M->F, d, M->E};
    if (m->load_err) return -1;
    pl->mat[MR_PAGER_GATE] = mr_model_tensor(m, 1, 3, ge, "blk.%d.ffn_gate_exps.weight", l);
    if (!m->load_err) pl->mat[MR_PAGER_UP] = mr_model_tensor(m, 1, 3, ge, "blk.%d.ffn_up_exps.weight", l);
    if (!m->load_err) pl->mat[MR_PAGER_DOWN] = mr_model_tensor(m, 1, 3, de, "blk.%d.ffn_down_exps.weight", l);
    ly->sh_gate = ds4_mat(m, 1, d, M->Fs, "blk.%d.ffn_gate_shexp.weight", l);
    ly->sh_up = ds4_mat(m, 1, d, M->Fs, "blk.%d.ffn_up_shexp.weight", l);
    ly->sh_down = ds4_mat(m, 1, M->Fs, d, "blk.%d.ffn_down_shexp.weight", l);
    if (m->load_err || ds4_load_routing(m, M, ly, l)) return -1;
    return ds4_load_compressor(m, M, ly, l);
}

/* The MTP block's own tensors (mainline load_arch_tensors, i >= n_layer): eh_proj, enorm and hnorm;
 * the embedding, head norm and head of its own when the file has them, else the trunk's. */
static int ds4_load_nextn(mr_model *m, ds4_model *M) {
    const int L = M->L, d = M->d;
    M->eh_proj = ds4_mat(m, 1, 2 * (int64_t)d, d, "blk.%d.nextn.eh_proj.weight", L);
    M->enorm = ds4_vec(m, 1, d, "blk.%d.nextn.enorm.weight", L);
    M->hnorm = ds4_vec(m, 1, d, "blk.%d.nextn.hnorm.weight", L);
    M->mtp_norm = ds4_vec(m, 0, d, "blk.%d.nextn.shared_head_norm.weight", L);
    if (!M->mtp_norm) M->mtp_norm = M->out_norm;
    M->mtp_head = ds4_mat(m, 0, d, M->V, "blk.%d.nextn.shared_head_head.weight", L);
    if (!M->mtp_head.data) M->mtp_head = M->output;
    const int64_t es[2] = {d, M->V};
    M->mtp_embd = m->load_err ? NULL : mr_model_tensor(m, 0, 2, es, "blk.%d.nextn.embed_tokens.weight", L);
    if (!M->mtp_embd) M->mtp_embd = M->tok_embd;
    return m->load_err ? -1 : 0;
}

/* the model's tensors (§2): embedding, output head and its hyper-connection, every layer's (and the
 * MTP block's when asked for) */
static int ds4_load_tensors(mr_model *m, ds4_model *M, mr_pager_layer *pl) {
    const int d = M->d, Nh = M->Nh;
    const int64_t emb_shape[2] = {d, -1};
    M->tok_embd = mr_model_tensor(m, 1, 2, emb_shape, "token_embd.weight");
    if (!M->tok_embd) return -1;
    M->V = (int)M->tok_embd->ne[1];
    M->out_hc_base = ds4_vec(m, 1, Nh, "output_hc_base.weight", 0);
    M->out_hc_fn = ds4_mat(m, 1, (int64_t)Nh * d, Nh, "output_hc_fn.weight", 0);
    M->out_hc_scale = ds4_vec(m, 1, 1, "output_hc_scale.weight", 0);
    M->out_norm = ds4_vec(m, 1, d, "output_norm.weight", 0);
    M->output = ds4_mat(m, 1, d, M->V, "output.weight", 0);
    for (int l = M->sidecar ? M->L : 0; l < M->n_run; l++)
        if (ds4_load_layer(m, M, l, &pl[l])) return -1;
    if (M->mtp && ds4_load_nextn(m, M)) return -1;
    return m->load_err ? -1 : 0;
}

/* A DSpark drafter's tensors (mainline load_arch_tensors with hyper_connection.count): the Markov head
 * (without it the file is a DFlash drafter), the confidence head, the encoder, its HC head and norm,
 * token_embd and output when it has its own (else the target's), the stages. */
static int ds4_load_dspark_tensors(mr_model *m, ds4_model *M, mr_pager_layer *pl) {
    const int d = M->d, Nh = M->Nh;
    const int64_t any[2] = {-1, -1};
    M->markov_w1 = mr_model_tensor(m, 0, 2, any, "markov_w1.weight");
    if (!M->markov_w1) BAD("%s: a DFlash drafter without the DSpark Markov head (markov_w1): moerun runs DSpark drafters only", m->path);
    M->R_mk = (int)M->markov_w1->ne[0];
    M->V = (int)M->markov_w1->ne[1];
    const int64_t es[2] = {d, M->V};
    M->tok_embd = mr_model_tensor(m, 0, 2, es, "token_embd.weight");
    M->markov_w2 = ds4_mat(m, 1, M->R_mk, M->V, "markov_w2.weight", 0);
    M->conf_w = ds4_mat(m, 0, (int64_t)d + M->R_mk, 1, "conf_proj.weight", 0);
    M->conf_b = ds4_vec(m, 0, 1, "conf_proj.bias", 0);
    M->fc = ds4_mat(m, 1, (int64_t)M->n_tap * d, d, "fc.weight", 0);
    M->enc_norm = ds4_vec(m, 1, d, "enc.output_norm.weight", 0);
    M->out_hc_base = ds4_vec(m, 1, Nh, "output_hc_base.weight", 0);
    M->out_hc_fn = ds4_mat(m, 1, (int64_t)Nh * d, Nh, "output_hc_fn.weight", 0);
    M->out_hc_scale = ds4_vec(m, 1, 1, "output_hc_scale.weight", 0);
    M->out_norm = ds4_vec(m, 1, d, "output_norm.weight", 0);
    M->output = ds4_mat(m, 0, d, M->V, "output.weight", 0);
    for (int l = 0; l < M->L; l++)
        if (ds4_load_layer(m, M, l, &pl[l])) return -1;
    return m->load_err ? -1 : 0;
fail:
    return -1;
}

static int ds4_load(mr_model *m) {
    ds4_model *M = mr_calloc(1, sizeof *M);
    mr_pager_layer *pl = NULL;
    if (!M) { mr_set_error("deepseek4: out of memory"); return -1; }
    m->priv = M;
    ds4_hp hp;
    M->dspark = !strcmp(m->arch_name, "dflash");
    if (M->dspark && !mr_gguf_find_kv(m->gguf, "dflash.hyper_connection.count"))
        BAD("%s: this is a DFlash speculative-decoding drafter for a target without hyper-connections "
            "(general.architecture 'dflash', no dflash.hyper_connection.count); moerun runs only DeepSeek-V4 DSpark "
            "drafters", m->path);
    if (ds4_read_hparams(m, M, &hp) || (M->dspark ? ds4_read_dspark(m, M) : ds4_read_nextn(m, M)) ||
        ds4_read_ffexp(m, M))
        goto fail;
    char stkey[128];
    snprintf(stkey, sizeof stkey, "%s.rope.scaling.type", m->arch_name);
    const char *stype = mr_model_meta_str_internal(m, stkey);
    if (ds4_check_shape(m, M, &hp)) goto fail;
    M->layers = mr_calloc((size_t)M->n_run, sizeof(ds4_layer));
    if (!M->layers) BAD("deepseek4: out of memory");
    if (ds4_read_ratios(m, M) || ds4_read_clamps(m, M) || ds4_check_attn(m, M)) goto fail;
    ds4_rope_layers(M, &hp, stype);
    pl = mr_calloc((size_t)M->n_run, sizeof *pl);
    if (!pl) BAD("deepseek4: out of memory");
    if (M->dspark ? ds4_load_dspark_tensors(m, M, pl) : ds4_load_tensors(m, M, pl)) goto fail;
    m->n_vocab = M->V;
    m->n_embd = M->d;
    m->n_layer = M->sidecar || M->dspark ? 0 : M->L;
    m->n_mtp = M->dspark ? M->L : M->mtp;
    m->n_ctx_train = M->n_ctx_train;
    if (mr_model_init_pager_n(m, pl, M->n_run)) goto fail;
    free(pl);
    return 0;
fail:
    free(pl);
    ds4_free(m);
    return -1;
}

/* ---------------------------------------------------------------------------------------------- */
/* per-sequence state (§4.2) */

static void ds4_state_free(mr_model *m, void *p) {
    const ds4_model *M = m->priv;
    ds4_state *s = p;
    if (!s) return;
    for (int l = 0; s->l && l < M->n_run; l++) {
        ds4_lstate *ls = &s->l[l];
        free(ls->raw.data); free(ls->comp.data); free(ls->icomp.data);
        free(ls->kvs); free(ls->scs); free(ls->ikvs); free(ls->iscs);
        free(ls->hkv.data); free(ls->hsc.data); free(ls->ihkv.data); free(ls->ihsc.data);
    }
    free(s->l);
    free(s->h);
    free(s->htok);
    free(s->tap);
    free(s->kconv);
    mr_scratch_free(&s->scratch);
    mr_scratch_free(&s->moe_ws);
    free(s);
}

static void ds4_state_reset(mr_model *m, void *p) {
    ds4_model *M = m->priv;
    ds4_state *s = p;
    s->n_past = 0;
    if (M->mtp) { /* the MTP block's ring */
        ds4_lstate *ls = &s->l[M->L];
        memset(ls->raw.data, 0, (size_t)(ls->raw.width * ls->raw.cap) * (ls->raw.f16 ? 2 : 4));
    }
    /* the trunk's streams of position -1 are zero (mainline's first pair) */
    if (s->h) memset(s->h, 0, sizeof(float) * (size_t)s->hcap * (size_t)M->Nh * (size_t)M->d);
    s->h_low = s->mtp_past = s->tap_from = 0;
    for (int l = 0; l < s->n_layers; l++) {
        ds4_lstate *ls = &s->l[l];
        const int r = M->layers[l].ratio, c = r == 4 ? 2 : 1;
        memset(ls->raw.data, 0, (size_t)(ls->raw.width * ls->raw.cap) * (ls->raw.f16 ? 2 : 4));
        if (r > 0) {
            const int64_t n = (int64_t)c * r * c * M->D;
            for (int64_t i = 0; i < n; i++) { ls->kvs[i] = 0.0f; ls->scs[i] = -INFINITY; }
        }
        if (r == 4) {
            const int64_t n = 8 * 2 * (int64_t)M->Di;
            for (int64_t i = 0; i < n; i++) { ls->ikvs[i] = 0.0f; ls->iscs[i] = -INFINITY; }
        }
    }
}

/* The streaming compressor state at position n (the next position to evaluate is n), rebuilt from
 * the per-position history as the batch compressor leaves it (§3.6.3): ratio 4 keeps the previous
 * block in rows 0..3 and the current one from row 4, other ratios the current block from row 0;
 * unused rows are empty (0, -inf). Pooling reads only rows written since, so this equals the state
 * the step-by-step path would hold. */
static void ds4_comp_rebuild(int r, int64_t n, const ds4_rows *hkv, const ds4_rows *hsc, float *kvs, float *scs) {
    const int c = r == 4 ? 2 : 1;
    const int64_t Wd = hkv->width, rows = (int64_t)c * r, b = n / r;
    for (int64_t i = 0; i < rows * Wd; i++) { kvs[i] = 0.0f; scs[i] = -INFINITY; }
    const int64_t first = r == 4 ? 4 : 0; /* row of the current block's first position */
    for (int64_t q = (r == 4 && b > 0) ? (b - 1) * r : b * r; q < n; q++) {
        const int64_t row = q >= b * r ? first + (q - b * r) : q - (b - 1) * r;
        memcpy(kvs + row * Wd, (const float *)hkv->data + (q % hkv->cap) * Wd, sizeof(float) * (size_t)Wd);
        memcpy(scs + row * Wd, (const float *)hsc->data + (q % hsc->cap) * Wd, sizeof(float) * (size_t)Wd);
    }
}

/* Cut the state back to its first n positions (n_past - n <= DS4_CUT_SLACK): window rows and
 * compressed rows are indexed by position, so only the compressor states need rebuilding. */
static int ds4_state_truncate(mr_model *m, void *p, int n) {
    ds4_model *M = m->priv;
    ds4_state *s = p;
    const int n_past = s->n_past;
    if (n_past - n > DS4_CUT_SLACK) {
        mr_set_error("deepseek4: a session can be cut back by at most %d positions (asked %d)", DS4_CUT_SLACK, n_past - n);
        return -1;
    }
    for (int l = 0; l < s->n_layers; l++) {
        ds4_lstate *ls = &s->l[l];
        const int r = M->layers[l].ratio;
        if (r > 0) ds4_comp_rebuild(r, n, &ls->hkv, &ls->hsc, ls->kvs, ls->scs);
        if (r == 4) ds4_comp_rebuild(4, n, &ls->ihkv, &ls->ihsc, ls->ikvs, ls->iscs);
    }
    if (s->mtp_past > n) s->mtp_past = n; /* its ring rows are by position, like the window's */
    s->n_past = n;
    return 0;
}

/* snapshot regions (model.h), per layer: the whole window ring (rows by position modulo its size:
 * the same in every session of the model), compressed rows [0, n_past / ratio), the compressor
 * states and their per-position input rings, the indexer's the same way; then n_past is set. */
static int ds4_rows_io(mr_state_io *io, ds4_rows *r, int64_t rows) {
    return io->fn(io, r->data, (size_t)(rows * r->width) * (r->f16 ? 2 : 4));
}

static int ds4_state_io(mr_model *m, void *p, int n_past, mr_state_io *io) {
    ds4_model *M = m->priv;
    ds4_state *s = p;
    for (int l = 0; l < s->n_layers; l++) {
        ds4_lstate *ls = &s->l[l];
        const int r = M->layers[l].ratio, c = r == 4 ? 2 : 1;
        if (ds4_rows_io(io, &ls->raw, ls->raw.cap)) return -1;
        if (r > 0 && (ds4_rows_io(io, &ls->comp, n_past / r) || ds4_rows_io(io, &ls->hkv, ls->hkv.cap) ||
                      ds4_rows_io(io, &ls->hsc, ls->hsc.cap) ||
                      io->fn(io, ls->kvs, sizeof(float) * (size_t)c * r * c * M->D) ||
                      io->fn(io, ls->scs, sizeof(float) * (size_t)c * r * c * M->D)))
            return -1;
        if (r == 4 && (ds4_rows_io(io, &ls->icomp, n_past / 4) || ds4_rows_io(io, &ls->ihkv, ls->ihkv.cap) ||
                       ds4_rows_io(io, &ls->ihsc, ls->ihsc.cap) || io->fn(io, ls->ikvs, sizeof(float) * 16 * (size_t)M->Di) ||
                       io->fn(io, ls->iscs, sizeof(float) * 16 * (size_t)M->Di)))
            return -1;
    }
    if (io->restore) {
        s->n_past = n_past;
        /* the trunk's streams are not in a snapshot: the MTP block restarts from zero streams */
        if (s->h) memset(s->h, 0, sizeof(float) * (size_t)s->hcap * (size_t)M->Nh * (size_t)M->d);
        s->h_low = s->mtp_past = 0;
        s->tap_from = n_past; /* nor the DSpark taps: the drafter reads only positions evaluated after this */
    }
    return 0;
}

static void *ds4_state_new(mr_model *m, int n_ctx) {
    ds4_model *M = m->priv;
    ds4_state *s = mr_calloc(1, sizeof *s);
    if (!s) goto oom;
    s->n_ctx = n_ctx;
    s->l = mr_calloc((size_t)M->n_run, sizeof(ds4_lstate));
    if (!s->l) goto oom;
    s->n_layers = M->sidecar ? 0 : M->L;
    /* a DSpark stage's ring also holds the block after the window */
    const int ring = M->dspark ? M->W + DS4_MTP_RING_EXTRA : M->W + DS4_CUT_SLACK;
    if (M->keep_h) {
        s->hcap = M->W + DS4_CUT_SLACK + 2;
        s->h = mr_calloc((size_t)s->hcap * (size_t)M->Nh * (size_t)M->d, sizeof(float));
        s->htok = mr_calloc((size_t)s->hcap, sizeof(int32_t));
        if (!s->h || !s->htok) goto oom;
    }
    if (M->mtp && ds4_rows_init(&s->l[M->L].raw, M->D, M->W + DS4_MTP_RING_EXTRA, M->kv_f16)) goto oom;
    for (int l = 0; l < s->n_layers; l++) {
        ds4_lstate *ls = &s->l[l];
        const int r = M->layers[l].ratio, c = r == 4 ? 2 : 1;
        if (ds4_rows_init(&ls->raw, M->D, ring, M->kv_f16)) goto oom;
        if (r > 0) {
            if (ds4_rows_init(&ls->hkv, c * M->D, c * r + DS4_CUT_SLACK, 0) ||
                ds4_rows_init(&ls->hsc, c * M->D, c * r + DS4_CUT_SLACK, 0)) goto oom;
            const int64_t cap = n_ctx / r + 1;
            if (ds4_rows_init(&ls->comp, M->D, cap, M->kv_f16)) goto oom;
            ls->kvs = mr_malloc(sizeof(float) * (size_t)c * r * c * M->D);
            ls->scs = mr_malloc(sizeof(float) * (size_t)c * r * c * M->D);
            if (!ls->kvs || !ls->scs) goto oom;
        }
        if (r == 4) {
            if (ds4_rows_init(&ls->ihkv, 2 * M->Di, 8 + DS4_CUT_SLACK, 0) ||
                ds4_rows_init(&ls->ihsc, 2 * M->Di, 8 + DS4_CUT_SLACK, 0)) goto oom;
            if (ds4_rows_init(&ls->icomp, M->Di, n_ctx / 4 + 1, M->kv_f16)) goto oom;
            ls->ikvs = mr_malloc(sizeof(float) * 16 * (size_t)M->Di);
            ls->iscs = mr_malloc(sizeof(float) * 16 * (size_t)M->Di);
            if (!ls->ikvs || !ls->iscs) goto oom;
        }
    }
    ds4_state_reset(m, s);
    return s;
oom:
    mr_set_error("deepseek4: out of memory for a session of %d positions", n_ctx);
    ds4_state_free(m, s);
    return NULL;
}

/* a DSpark drafter d for the target m (mr_model_draft_attach): m's sessions keep the mean of the streams at
 * d's target layers (the encoder input) for its window and the longest draft; an MTP sidecar needs
 * nothing here (params.mtp keeps the streams it reads) */
static int ds4_draft_attach(mr_model *m, const mr_model *dm) {
    ds4_model *M = m->priv;
    const ds4_model *D = dm->priv;
    if (!D->dspark) return 0;
    if (M->dspark || M->sidecar) { mr_set_error("%s: a drafter cannot be the target of %s", m->path, dm->path); return -1; }
    if (D->d != M->d || D->V != M->V) {
        mr_set_error("%s: the DSpark drafter (width %d, %d tokens) does not fit %s (%d, %d)", dm->path, D->d, D->V, m->path, M->d, M->V);
        return -1;
    }
    if (M->L > DS4_MAX_TAP_LAYERS) { mr_set_error("%s: more than %d layers to tap", m->path, DS4_MAX_TAP_LAYERS); return -1; }
    int at[DS4_MAX_TAP_LAYERS + 1];
    for (int l = 0; l <= M->L; l++) at[l] = -1;
    for (int i = 0; i < D->n_tap; i++) {
        if (D->tap[i] > M->L || at[D->tap[i]] >= 0) {
            mr_set_error("%s: target layer %d (of %d, or given twice) does not fit %s", dm->path, D->tap[i], M->L, m->path);
            return -1;
        }
        at[D->tap[i]] = i;
    }
    const int cap = D->W + DS4_MTP_RING_EXTRA;
    if (M->n_taps && (M->n_taps != D->n_tap || M->tap_cap != cap || memcmp(M->tap_at, at, sizeof(int) * (size_t)(M->L + 1)))) {
        mr_set_error("%s: already keeps the states of another DSpark drafter", m->path);
        return -1;
    }
    memcpy(M->tap_at, at, sizeof(int) * (size_t)(M->L + 1));
    M->tap_cap = cap;
    M->n_taps = D->n_tap;
    return 0;
}

const struct mr_arch mr_arch_deepseek4 = {
    .name = "deepseek4",
    .load = ds4_load,
    .free = ds4_free,
    .state_new = ds4_state_new,
    .state_free = ds4_state_free,
    .state_reset = ds4_state_reset,
    .state_truncate = ds4_state_truncate,
    .state_io = ds4_state_io,
    .eval = ds4_eval,
    .eval_multi = ds4_eval_multi,
    .mtp_draft = ds4_mtp_draft,
    .draft_attach = ds4_draft_attach,
};

/* DSpark drafters (general.architecture dflash with hyper-connections): the same loader and state, run
 * only through the target's mtp_draft */
const struct mr_arch mr_arch_dflash = {
    .name = "dflash",
    .load = ds4_load,
    .free = ds4_free,
    .state_new = ds4_state_new,
    .state_free = ds4_state_free,
    .state_reset = ds4_state_reset,
    .state_truncate = ds4_state_truncate,
    .state_io = ds4_state_io,
    .eval = ds4_eval,
    .eval_multi = ds4_eval_multi,
    .mtp_draft = ds4_mtp_draft,
    .check_tensors = 1,
};
