/* Hyperparameter readers shared by architectures (see hparams.h). */
#include "model/hparams.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mr_read_rope(mr_model *m, mr_rope_params *rp) {
    uint32_t n_orig = 0;
    float base = 10000.0f, factor = 0.0f, attn = 1.0f, log_mul = 0.0f;
    if (mr_model_hp_f32(m, "rope.freq_base", 0, 10000.0f, &base)) return -1;
    if (mr_model_hp_u32(m, "rope.scaling.original_context_length", 0, (uint32_t)m->n_ctx_train, &n_orig)) return -1;
    if (mr_model_hp_f32(m, "rope.scaling.factor", 0, 0.0f, &factor)) return -1;
    if (factor == 0.0f && mr_model_hp_f32(m, "rope.scale_linear", 0, 0.0f, &factor)) return -1;
    if (mr_model_hp_f32(m, "rope.scaling.attn_factor", 0, 1.0f, &attn)) return -1;
    if (mr_model_hp_f32(m, "rope.scaling.yarn_log_multiplier", 0, 0.0f, &log_mul)) return -1;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", m->arch_name);
    const char *type = mr_model_meta_str_internal(m, key);
    if (!type) type = "linear";
    int yarn = !strcmp(type, "yarn");
    if (!yarn && strcmp(type, "linear") && strcmp(type, "none")) {
        mr_set_error("%s: rope scaling type '%s' is not supported", m->path, type);
        return -1;
    }
    rp->freq_base = base;
    rp->freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;
    if (!strcmp(type, "none")) rp->freq_scale = 1.0f;
    rp->n_ctx_orig = (int)n_orig;
    rp->ext_factor = yarn ? 1.0f : 0.0f;
    rp->attn_factor = 1.0f;
    if (yarn) {
        /* llama_context: mscale(factor) [/ mscale(factor, log_mul)], cancelled by 1/(1 + 0.1 ln factor)
         * because the rope kernel multiplies that factor in again */
        const float f = 1.0f / rp->freq_scale;
        float ms = f <= 1.0f ? 1.0f : 0.1f * logf(f) + 1.0f;
        if (log_mul != 0.0f) {
            float ms_all = f <= 1.0f ? 1.0f : 0.1f * log_mul * logf(f) + 1.0f;
            rp->attn_factor = ms / ms_all;
        } else rp->attn_factor = ms;
        rp->attn_factor *= 1.0f / (1.0f + 0.1f * logf(f));
    }
    rp->attn_factor *= attn;
    return 0;
}

int mr_read_decoder_hparams(mr_model *m, mr_decoder_hp *hp, int rope_mode) {
    uint32_t ctx, embd, nl, ne = 0, nu = 0, nff0, kl, vl, nrot, ffe = 0;
    if (mr_model_hp_u32(m, "context_length", 1, 0, &ctx) || mr_model_hp_u32(m, "embedding_length", 1, 0, &embd) ||
        mr_model_hp_u32(m, "block_count", 1, 0, &nl) || mr_model_hp_u32(m, "expert_count", 0, 0, &ne) ||
        mr_model_hp_u32(m, "expert_used_count", 0, 0, &nu) || mr_model_hp_f32(m, "attention.layer_norm_rms_epsilon", 1, 0, &hp->eps))
        return -1;
    if (embd == 0 || nl == 0 || nl > 4096 || embd > (1u << 20)) { mr_set_error("%s: bad embedding_length/block_count", m->path); return -1; }
    m->n_ctx_train = (int)ctx;
    m->n_embd = (int)embd;
    m->n_layer = (int)nl;
    uint32_t *arr = mr_malloc(sizeof(uint32_t) * nl * 3);
    if (!arr) { mr_set_error("model: out of memory"); return -1; }
    int rc = -1;
    if (mr_model_hp_u32_layers(m, "feed_forward_length", 0, 0, arr, (int)nl) ||
        mr_model_hp_u32_layers(m, "attention.head_count", 0, 0, arr + nl, (int)nl)) goto out;
    if (mr_model_hp_u32_layers(m, "attention.head_count_kv", 0, arr[nl], arr + 2 * nl, (int)nl)) goto out;
    for (uint32_t i = 1; i < nl; i++)
        if (arr[i] != arr[0] || arr[nl + i] != arr[nl] || arr[2 * nl + i] != arr[2 * nl]) {
            mr_set_error("%s: per-layer feed_forward_length / head counts are not supported", m->path);
            goto out;
        }
    nff0 = arr[0];
    hp->n_ff = (int)nff0;
    hp->n_head = (int)arr[nl];
    hp->n_head_kv = (int)arr[2 * nl];
    if (hp->n_head <= 0 || hp->n_head_kv <= 0 || hp->n_head % hp->n_head_kv) {
        mr_set_error("%s: attention.head_count %d / head_count_kv %d invalid", m->path, hp->n_head, hp->n_head_kv);
        goto out;
    }
    if (mr_model_hp_u32(m, "attention.key_length", 0, embd / (uint32_t)hp->n_head, &kl) ||
        mr_model_hp_u32(m, "attention.value_length", 0, embd / (uint32_t)hp->n_head, &vl) ||
        mr_model_hp_u32(m, "rope.dimension_count", 0, kl, &nrot) ||
        mr_model_hp_u32(m, "expert_feed_forward_length", 0, 0, &ffe)) goto out;
    if (kl != vl || kl == 0 || kl > 4096) { mr_set_error("%s: key_length %u != value_length %u", m->path, kl, vl); goto out; }
    if (nrot > kl || nrot % 2) { mr_set_error("%s: rope.dimension_count %u invalid for head size %u", m->path, nrot, kl); goto out; }
    hp->head_dim = (int)kl;
    hp->kq_scale = 1.0f / sqrtf((float)kl);
    mr_rope_params_init(&hp->rope, rope_mode, (int)nrot);
    if (mr_read_rope(m, &hp->rope)) goto out;
    if (ne > 0 && (nu == 0 || nu > ne)) { mr_set_error("%s: expert_used_count %u invalid for %u experts", m->path, nu, ne); goto out; }
    memset(&hp->moe, 0, sizeof hp->moe);
    hp->moe.n_expert = (int)ne;
    hp->moe.n_used = (int)nu;
    hp->moe.gating = MR_GATING_SOFTMAX;
    hp->moe.norm_w = 1;
    hp->n_ff_exp = ffe ? (int)ffe : (nu ? hp->n_ff / (int)nu : 0);
    rc = 0;
out:
    free(arr);
    return rc;
}
