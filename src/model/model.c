/* Model loading, architecture table, sessions, loader helpers (see model.h). */
#include "model/model.h"
#include "model/moe_approx.h"
#include "quant/matmul.h"
#include "base/prof.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Architectures. Some are declared weak so the build works before their file exists; note that a
 * weak reference does not pull an object out of a static library, so when an arch file lands
 * the `weak` attribute here must be removed. */
extern const struct mr_arch mr_arch_llama;
extern const struct mr_arch mr_arch_qwen3moe;
extern const struct mr_arch mr_arch_deepseek4;
extern const struct mr_arch mr_arch_deepseek2;
extern const struct mr_arch mr_arch_gpt_oss;
extern const struct mr_arch mr_arch_glm4moe;
extern const struct mr_arch mr_arch_qwen35moe;
extern const struct mr_arch mr_arch_dflash;

static const struct mr_arch *mr_find_arch(const char *name) {
    const struct mr_arch *table[] = {&mr_arch_llama, &mr_arch_qwen3moe, &mr_arch_deepseek4, &mr_arch_deepseek2,
                                         &mr_arch_gpt_oss, &mr_arch_glm4moe, &mr_arch_qwen35moe, &mr_arch_dflash};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i] && table[i]->name && !strcmp(table[i]->name, name)) return table[i];
    return NULL;
}

/* Architectures that come with the files users download beside the ones we run, refused by what
 * they are rather than as "unsupported" (arch names from mainline llama.cpp's llama-arch.cpp). */
static void mr_unsupported_arch(const mr_model *m, const char *arch) {
    if (!strcmp(arch, "deepseek41")) {
        mr_set_error("%s: this is a DeepSeek-V4.1 model (general.architecture 'deepseek41', with Engram tables), "
                     "which moerun does not support; DeepSeek-V4-Flash files are 'deepseek4'", m->path);
    } else {
        mr_set_error("%s: unsupported architecture '%s'", m->path, arch);
    }
}

void mr_model_params_default(mr_model_params *p) {
    memset(p, 0, sizeof *p);
    p->dump_n = 8;
}

/* Repacked copies (quant/repack.h: faster kernels on row-interleaved layouts, e.g. Q4_0 under
 * AVX-512): made once per tensor when a weight handle or the resident experts are set up, owned by
 * the model; mr_model_params.no_repack turns them off. Logits are the same bits either way. */
static const mr_repacked *mr_model_repack(mr_model *m, const mr_gguf_tensor *t) {
    if (!t || m->load_err || m->params.no_repack || t->n_dims < 2 || !mr_repack_applies(t->type, t->ne[0])) return NULL;
    for (int i = 0; i < m->n_rp; i++)
        if (m->rp_src[i] == t) return m->rp[i];
    if (m->n_rp == m->cap_rp) {
        int cap = m->cap_rp ? 2 * m->cap_rp : 64;
        mr_repacked **r = mr_realloc(m->rp, sizeof *r * (size_t)cap);
        if (r) m->rp = r;
        const mr_gguf_tensor **s = r ? mr_realloc(m->rp_src, sizeof *s * (size_t)cap) : NULL;
        if (s) m->rp_src = s;
        if (!r || !s) { mr_log(1, "%s: no memory to repack %s; it is used as stored\n", m->path, t->name); return NULL; }
        m->cap_rp = cap;
    }
    if (m->params.progress) {
        /* load progress: copies made so far of (at most) every matrix of a repackable type */
        if (!m->rp_total)
            for (uint64_t i = 0; i < mr_gguf_n_tensors(m->gguf); i++) {
                const mr_gguf_tensor *c = mr_gguf_tensor_at(m->gguf, i);
                m->rp_total += c && c->n_dims >= 2 && mr_repack_applies(c->type, c->ne[0]);
            }
        if (m->params.progress(m->params.progress_user, "repack", m->n_rp, m->rp_total)) {
            mr_set_error("%s: loading interrupted", m->path);
            m->load_err = 1;
            return NULL;
        }
    }
    int err;
    mr_repacked *rp = mr_repack_make(m->pool, t->data, t->type, t->ne[0], t->ne[1] * t->ne[2] * t->ne[3], &err);
    if (err) mr_log(1, "%s: %s; %s is used as stored\n", m->path, mr_get_error(), t->name);
    if (!rp) return NULL;
    m->rp_src[m->n_rp] = t;
    m->rp[m->n_rp++] = rp;
    return rp;
}

mr_weight mr_model_weight(mr_model *m, const mr_gguf_tensor *t) {
    mr_weight w = mr_weight_of(t);
    w.rp = mr_model_repack(m, t);
    return w;
}

const mr_repacked *mr_model_expert_rp(const mr_model *m, int layer, int mat) {
    if (!m->exp_rp || layer < 0 || layer >= m->n_exp_layers || mat < 0 || mat >= MR_PAGER_MATS) return NULL;
    return m->exp_rp[layer * MR_PAGER_MATS + mat];
}

/* the kernels' ISA of m: params.isa, or the process's now */
static int model_isa(mr_model *m) {
    const char *name = m->params.isa;
    m->isa = mr_isa();
    if (!name || !*name) return 0;
    int isa = mr_isa_from_name(name);
    if (isa < 0 || !mr_isa_available(isa)) {
        mr_set_error("model: ISA '%s' is %s (this CPU and build: %s and below)", name,
                     isa < 0 ? "not one of scalar|avx2|avx512|neon|dotprod" : "not available here",
                     mr_isa_name(mr_cpu_best_isa()));
        return -1;
    }
    m->isa = isa;
    return 0;
}

/* after arch->load: every tensor of the file was looked up, except those of blocks past n_layer */
static int check_unused_tensors(mr_model *m) {
    const uint64_t n = mr_gguf_n_tensors(m->gguf);
    for (uint64_t i = 0; i < n; i++) {
        const mr_gguf_tensor *t = mr_gguf_tensor_at(m->gguf, i);
        int blk = -1;
        if (!t || m->t_used[i] || (sscanf(t->name, "blk.%d.", &blk) == 1 && blk >= m->n_layer)) continue;
        mr_set_error("%s: tensor '%s' is not used by the %s loader: the file holds weights this engine would "
                     "ignore (an optional bias, scale or factor tensor it does not implement)", m->path, t->name, m->arch_name);
        return -1;
    }
    return 0;
}

mr_model *mr_model_load(const char *path, const mr_model_params *params) {
    mr_model *m = mr_calloc(1, sizeof *m);
    if (!m) { mr_set_error("model: out of memory"); return NULL; }
    if (params) m->params = *params; else mr_model_params_default(&m->params);
    if (m->params.n_threads <= 0) m->params.n_threads = mr_cpu_default_threads();
    if (m->params.n_threads <= 0) m->params.n_threads = 1;
    if (m->params.dump_n <= 0) m->params.dump_n = 8;
    m->path = mr_strdup(path);
    if (!m->path) { mr_set_error("model: out of memory"); goto fail; }
    if (mr_moe_approx_init(m)) goto fail; /* before any eval can run: mr_model_set_approx never allocates */
    m->gguf = mr_gguf_open(path);
    if (!m->gguf) goto fail;
    const char *arch = NULL;
    if (mr_gguf_get_str(m->gguf, "general.architecture", &arch)) {
        mr_set_error("%s: no general.architecture: %s", path, mr_get_error());
        goto fail;
    }
    snprintf(m->arch_name, sizeof m->arch_name, "%s", arch);
    m->arch = mr_find_arch(arch);
    if (!m->arch) { mr_unsupported_arch(m, arch); goto fail; }
    m->pool = mr_pool_create(m->params.n_threads);
    if (!m->pool) goto fail;
    if (model_isa(m)) goto fail;
    if (m->arch->check_tensors && !(m->t_used = mr_calloc(mr_gguf_n_tensors(m->gguf) + 1, 1))) {
        mr_set_error("%s: out of memory", path);
        goto fail;
    }
    const int isa_prev = mr_isa_enter(m->isa); /* repacked layouts are the ISA's */
    int load_rc = m->arch->load(m);
    if (!load_rc && m->t_used) load_rc = check_unused_tensors(m);
    mr_isa_leave(isa_prev);
    /* the progress callback and the strings are the caller's for the duration of this call only */
    if (m->rp_total && m->params.progress) m->params.progress(m->params.progress_user, "repack", m->rp_total, m->rp_total);
    m->params.progress = NULL;
    m->params.progress_user = NULL;
    m->params.isa = m->params.pager.policy = m->params.pager.fault = NULL;
    if (load_rc) goto fail;
    /* the tokenizer is optional for evaluation (ids can be fed directly): a file without one, or
     * with a kind we do not implement, loads with its absence logged; but a llama/gpt2 tokenizer
     * that fails to load (out of memory, malformed vocabulary) fails the model */
    m->tok = mr_tokenizer_load(path);
    if (!m->tok) {
        const char *kind = NULL;
        if (!mr_gguf_get_str(m->gguf, "tokenizer.ggml.model", &kind) && (!strcmp(kind, "llama") || !strcmp(kind, "gpt2")))
            goto fail;
        mr_log(2, "%s: no usable tokenizer: %s\n", path, mr_get_error());
    }
    mr_clear_error();
    if (m->n_vocab <= 0 || m->n_embd <= 0 || (m->n_layer <= 0 && m->n_mtp <= 0)) { /* an MTP sidecar: no trunk */
        mr_set_error("%s: architecture loader left n_vocab/n_embd/n_layer unset", path);
        goto fail;
    }
    if (m->params.n_ctx <= 0) {
        m->params.n_ctx = m->n_ctx_train > 0 && m->n_ctx_train < 4096 ? m->n_ctx_train : 4096;
    }
    return m;
fail:
    mr_model_free(m);
    return NULL;
}

void mr_model_free(mr_model *m) {
    if (!m) return;
    if (m->arch && m->arch->free && m->priv) m->arch->free(m);
    for (int i = 0; i < m->n_rp; i++) mr_repack_free(m->rp[i]);
    free(m->rp);
    free(m->rp_src);
    mr_tokenizer_free(m->tok);
    mr_pager_free(m->pager); /* its I/O threads convert through slot_rp: free the views after it */
    free(m->exp_rp);
    for (int i = 0; m->slot_rp && i < m->n_exp_layers * MR_PAGER_MATS; i++) mr_repack_free(m->slot_rp[i]);
    free(m->slot_rp);
    mr_moe_approx_free(m->approx);
    free(m->exp_layers);
    free(m->t_used);
    mr_pool_free(m->pool);
    mr_gguf_close(m->gguf);
    for (int i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    free(m->path);
    free(m);
}

const char *mr_model_arch(const mr_model *m) { return m->arch_name; }
int mr_model_n_vocab(const mr_model *m) { return m->n_vocab; }
int mr_model_n_embd(const mr_model *m) { return m->n_embd; }
int mr_model_n_layer(const mr_model *m) { return m->n_layer; }
int mr_model_n_ctx_train(const mr_model *m) { return m->n_ctx_train; }
int mr_model_n_ctx(const mr_model *m) { return m->params.n_ctx; }
int mr_model_n_threads(const mr_model *m) { return m->params.n_threads; }
mr_tokenizer *mr_model_tokenizer(const mr_model *m) { return m->tok; }

const char *mr_model_meta_str_internal(const mr_model *m, const char *key) {
    const mr_gguf_kv *kv = mr_gguf_find_kv(m->gguf, key);
    return kv && kv->type == MR_GGUF_STRING ? kv->v.str : NULL;
}
const char *mr_model_meta_str(const mr_model *m, const char *key) { return mr_model_meta_str_internal(m, key); }

/* ---- sessions ---- */

mr_session *mr_session_new(mr_model *m, int n_ctx) {
    if (n_ctx <= 0) n_ctx = m->params.n_ctx;
    mr_session *s = mr_calloc(1, sizeof *s);
    if (!s) { mr_set_error("session: out of memory"); return NULL; }
    s->m = m;
    s->n_ctx = n_ctx;
    s->st = m->arch->state_new(m, n_ctx);
    if (!s->st) { free(s); return NULL; }
    return s;
}

void mr_session_free(mr_session *s) {
    if (!s) return;
    s->m->arch->state_free(s->m, s->st);
    mr_scratch_free(&s->ws);
    mr_scratch_free(&s->tmp);
    free(s);
}

void mr_session_reset(mr_session *s) {
    s->m->arch->state_reset(s->m, s->st);
    s->n_past = 0;
}

int mr_session_truncate(mr_session *s, int n) {
    if (n < 0 || n > s->n_past) { mr_set_error("truncate: %d is outside 0..%d", n, s->n_past); return -1; }
    if (n == s->n_past) return 0;
    if (n == 0) { mr_session_reset(s); return 0; }
    if (!s->m->arch->state_truncate) { mr_set_error("truncate: not supported by %s", s->m->arch->name); return -1; }
    if (s->m->arch->state_truncate(s->m, s->st, n) != 0) return -1;
    s->n_past = n;
    return 0;
}

int mr_session_draft_conf(mr_session *s, mr_session *mtp, int32_t last, int kmax, int32_t *out, float *logits, float *conf) {
    if (!mtp) mtp = s;
    if (!mtp->m->n_mtp || !s->m->arch->mtp_draft || mtp->m->arch->mtp_draft != s->m->arch->mtp_draft) {
        mr_set_error("mtp: %s has no MTP block loaded for %s (a deepseek4 file with nextn_predict_layers, or its "
                     "sidecar, loaded with mr_model_params.mtp = 1, or a DSpark drafter)", mtp->m->path, s->m->path);
        return -1;
    }
    if (last < 0 || last >= s->m->n_vocab) { mr_set_error("mtp: token %d is out of range", last); return -1; }
    if (kmax > s->n_ctx - s->n_past) kmax = s->n_ctx - s->n_past;
    if (kmax > mtp->n_ctx - s->n_past) kmax = mtp->n_ctx - s->n_past;
    if (kmax <= 0) return 0;
    if (mr_model_check_files(s->m) || mr_model_check_files(mtp->m)) return -1;
    mr_moe_approx_begin_eval(mtp->m);
    const int isa_prev = mr_isa_enter(mtp->m->isa);
    mr_pager_eval_begin(mtp->m->pager, 1);
    s->m->ws = &s->ws; s->m->tmp = &s->tmp;
    mtp->m->ws = &mtp->ws; mtp->m->tmp = &mtp->tmp; /* one arena per model (mtp may be s) */
    const int rc = s->m->arch->mtp_draft(s->m, s->st, mtp->m, mtp->st, last, kmax, out, logits, conf);
    s->m->ws = s->m->tmp = mtp->m->ws = mtp->m->tmp = NULL;
    mr_pager_eval_end(mtp->m->pager);
    mr_isa_leave(isa_prev);
    if (rc < 0) mr_model_pager_release_all(mtp->m);
    return rc;
}

int mr_session_mtp_draft(mr_session *s, mr_session *mtp, int32_t last, int kmax, int32_t *out, float *logits) {
    return mr_session_draft_conf(s, mtp, last, kmax, out, logits, NULL);
}

int mr_model_draft_attach(mr_model *m, const mr_model *d) {
    if (!d->n_mtp || d->n_layer) { mr_set_error("draft: %s is not an MTP sidecar or DSpark drafter", d->path); return -1; }
    if (d->arch->mtp_draft != m->arch->mtp_draft) {
        mr_set_error("draft: %s (%s) cannot draft for %s (%s)", d->path, d->arch_name, m->path, m->arch_name);
        return -1;
    }
    return m->arch->draft_attach ? m->arch->draft_attach(m, d) : 0;
}

int mr_model_n_mtp(const mr_model *m) { return m->n_mtp; }

/* after a failed eval: a layer that failed between its prefetch and its experts (e.g. out of memory)
 * left its batch pinned; unpin every layer, or the next eval finds the slots taken */
void mr_model_pager_release_all(mr_model *m) {
    for (int l = 0; m->pager && l < m->n_exp_layers; l++) mr_pager_release(m->pager, l);
}

int mr_session_n_past(const mr_session *s) { return s->n_past; }
int mr_session_can_truncate(const mr_session *s) { return s->m->arch->state_truncate != NULL; }
int mr_session_n_ctx(const mr_session *s) { return s->n_ctx; }
mr_model *mr_session_model(const mr_session *s) { return s->m; }

int mr_model_check_files(const mr_model *m) { return mr_gguf_check_files(m->gguf); }

int mr_session_eval(mr_session *s, const int32_t *tokens, int n, float *logits, int all_logits) {
    if (n <= 0) { mr_set_error("eval: no tokens"); return -1; }
    if (s->n_past + n > s->n_ctx) {
        mr_set_error("eval: %d + %d tokens exceed the context of %d", s->n_past, n, s->n_ctx);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= s->m->n_vocab) {
            mr_set_error("eval: token id %d out of range [0, %d)", tokens[i], s->m->n_vocab);
            return -1;
        }
    if (mr_model_check_files(s->m)) return -1; /* a shrunk file: an error now, not a SIGBUS below */
    const int phase = n > 1 ? 0 : 1; /* profiler: batch = prefill, one token = decode */
    mr_prof_set_phase(phase);
    mr_moe_approx_begin_eval(s->m); /* approximation settings change only between evals */
    const int isa_prev = mr_isa_enter(s->m->isa);
    mr_pager_eval_begin(s->m->pager, n == 1);
    s->m->ws = &s->ws;
    s->m->tmp = &s->tmp;
    const int rc = s->m->arch->eval(s->m, s->st, tokens, n, s->n_past, logits, all_logits);
    s->m->ws = s->m->tmp = NULL;
    mr_pager_eval_end(s->m->pager);
    mr_isa_leave(isa_prev);
    if (rc) {
        /* a layer that failed between its prefetch and its experts (e.g. out of memory) left its
         * batch pinned: unpin every layer, or the next eval finds the slots taken */
        mr_model_pager_release_all(s->m);
        return -1;
    }
    mr_prof_tokens(phase, n); /* the caller (bench) records the wall time of its evals */
    s->n_past += n;
    return 0;
}

int mr_model_can_batch(const mr_model *m) { return m->arch->eval_multi != NULL; }

int mr_sessions_eval(mr_session *const *s, const int32_t *tokens, int n, float *logits) {
    return mr_sessions_eval_rows(s, tokens, n, NULL, logits);
}

int mr_sessions_eval_rows(mr_session *const *s, const int32_t *tokens, int n, const uint8_t *want, float *logits) {
    if (n <= 0) { mr_set_error("eval: no tokens"); return -1; }
    mr_model *m = s[0]->m;
    if (!m->arch->eval_multi) { mr_set_error("eval: %s has no multi-sequence evaluation", m->arch->name); return -1; }
    enum { FEW = 256 }; /* a batched step's positions and states on the stack up to FEW tokens */
    int pos_s[FEW];
    void *st_s[FEW];
    int *pos = n <= FEW ? pos_s : mr_malloc(sizeof(int) * (size_t)n);
    void **st = n <= FEW ? st_s : mr_malloc(sizeof(void *) * (size_t)n);
    int rc = -1, decode = 1; /* decode: one token per session (a batched decode step) */
    if (!pos || !st) { mr_set_error("eval: out of memory"); goto done; }
    /* positions: each session's tokens follow what it holds, in order */
    for (int t = 0; t < n; t++) {
        if (s[t]->m != m) { mr_set_error("eval: sessions of different models"); goto done; }
        if (tokens[t] < 0 || tokens[t] >= m->n_vocab) { mr_set_error("eval: token id %d out of range [0, %d)", tokens[t], m->n_vocab); goto done; }
        int before = 0;
        for (int u = 0; u < t; u++) before += s[u] == s[t];
        pos[t] = s[t]->n_past + before;
        if (before) decode = 0;
        if (pos[t] >= s[t]->n_ctx) { mr_set_error("eval: a token beyond the context of %d", s[t]->n_ctx); goto done; }
        st[t] = s[t]->st;
    }
    if (mr_model_check_files(m)) goto done;
    const int phase = n > 1 ? 0 : 1;
    mr_prof_set_phase(phase);
    mr_moe_approx_begin_eval(m);
    const int isa_prev = mr_isa_enter(m->isa);
    mr_pager_eval_begin(m->pager, decode);
    m->ws = &s[0]->ws;
    m->tmp = &s[0]->tmp;
    const int eval_rc = m->arch->eval_multi(m, st, pos, tokens, n, want, logits);
    m->ws = m->tmp = NULL;
    mr_pager_eval_end(m->pager);
    mr_isa_leave(isa_prev);
    if (eval_rc) goto done;
    mr_prof_tokens(phase, n);
    for (int t = 0; t < n; t++) s[t]->n_past++;
    rc = 0;
done:
    if (pos != pos_s) free(pos);
    if (st != st_s) free(st);
    return rc;
}

/* ---- hyperparameters ---- */

static const mr_gguf_kv *hp_find(mr_model *m, const char *suffix, char *key, size_t klen) {
    snprintf(key, klen, "%s.%s", m->arch_name, suffix);
    return mr_gguf_find_kv(m->gguf, key);
}

int mr_model_hp_u32(mr_model *m, const char *suffix, int required, uint32_t def, uint32_t *out) {
    char key[256];
    if (!hp_find(m, suffix, key, sizeof key)) {
        if (required) { mr_set_error("%s: missing metadata key %s", m->path, key); return -1; }
        *out = def;
        return 0;
    }
    return mr_gguf_get_u32(m->gguf, key, out);
}

int mr_model_hp_f32(mr_model *m, const char *suffix, int required, float def, float *out) {
    char key[256];
    if (!hp_find(m, suffix, key, sizeof key)) {
        if (required) { mr_set_error("%s: missing metadata key %s", m->path, key); return -1; }
        *out = def;
        return 0;
    }
    return mr_gguf_get_f32(m->gguf, key, out);
}

int mr_model_hp_bool(mr_model *m, const char *suffix, int required, int def, int *out) {
    char key[256];
    if (!hp_find(m, suffix, key, sizeof key)) {
        if (required) { mr_set_error("%s: missing metadata key %s", m->path, key); return -1; }
        *out = def;
        return 0;
    }
    return mr_gguf_get_bool(m->gguf, key, out);
}

int mr_model_hp_u32_layers(mr_model *m, const char *suffix, int required, uint32_t def, uint32_t *out, int n_layer) {
    char key[256];
    const mr_gguf_kv *kv = hp_find(m, suffix, key, sizeof key);
    if (!kv) {
        if (required) { mr_set_error("%s: missing metadata key %s", m->path, key); return -1; }
        for (int i = 0; i < n_layer; i++) out[i] = def;
        return 0;
    }
    if (kv->type != MR_GGUF_ARRAY) {
        uint32_t v;
        if (mr_gguf_get_u32(m->gguf, key, &v)) return -1;
        for (int i = 0; i < n_layer; i++) out[i] = v;
        return 0;
    }
    if (kv->n != (uint64_t)n_layer) {
        mr_set_error("%s: %s has %llu values, expected %d (one per layer)", m->path, key, (unsigned long long)kv->n, n_layer);
        return -1;
    }
    for (int i = 0; i < n_layer; i++) {
        int64_t v;
        switch (kv->arr_type) {
        case MR_GGUF_U8: case MR_GGUF_BOOL: v = ((const uint8_t *)kv->arr)[i]; break;
        case MR_GGUF_I8: v = ((const int8_t *)kv->arr)[i]; break;
        case MR_GGUF_U16: v = ((const uint16_t *)kv->arr)[i]; break;
        case MR_GGUF_I16: v = ((const int16_t *)kv->arr)[i]; break;
        case MR_GGUF_U32: v = ((const uint32_t *)kv->arr)[i]; break;
        case MR_GGUF_I32: v = ((const int32_t *)kv->arr)[i]; break;
        case MR_GGUF_U64: v = (int64_t)((const uint64_t *)kv->arr)[i]; break;
        case MR_GGUF_I64: v = ((const int64_t *)kv->arr)[i]; break;
        default: mr_set_error("%s: %s is an array of %s, expected integers", m->path, key, mr_gguf_vtype_name(kv->arr_type)); return -1;
        }
        if (v < 0 || v > (int64_t)UINT32_MAX) { mr_set_error("%s: %s[%d] = %lld out of range", m->path, key, i, (long long)v); return -1; }
        out[i] = (uint32_t)v;
    }
    return 0;
}

/* ---- tensors ---- */

static void shape_str(char *buf, size_t len, int n_dims, const int64_t *shape) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int i = 0; i < n_dims && o < len; i++)
        o += (size_t)(shape[i] < 0 ? snprintf(buf + o, len - o, "%s*", i ? ", " : "")
                                   : snprintf(buf + o, len - o, "%s%lld", i ? ", " : "", (long long)shape[i]));
    if (o < len) snprintf(buf + o, len - o, "]");
}

const mr_gguf_tensor *mr_model_tensor(mr_model *m, int required, int n_dims, const int64_t *shape, const char *fmt, ...) {
    char name[256], want[128], got[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    shape_str(want, sizeof want, n_dims, shape);
    const mr_gguf_tensor *t = mr_gguf_find_tensor(m->gguf, name);
    if (t && m->t_used) m->t_used[t - mr_gguf_tensor_at(m->gguf, 0)] = 1;
    if (!t) {
        if (required) {
            mr_set_error("%s: missing tensor '%s' (expected shape %s)", m->path, name, want);
            m->load_err = 1;
        }
        return NULL;
    }
    int ok = 1;
    for (int i = 0; i < MR_GGUF_MAX_DIMS; i++) {
        int64_t e = i < n_dims ? shape[i] : 1;
        if (e >= 0 && t->ne[i] != e) ok = 0;
    }
    if (!ok) {
        shape_str(got, sizeof got, t->n_dims > n_dims ? t->n_dims : n_dims, t->ne);
        mr_set_error("%s: tensor '%s' has shape %s, expected %s", m->path, name, got, want);
        m->load_err = 1;
        return NULL;
    }
    if (!mr_type_get(t->type)) {
        mr_set_error("%s: tensor '%s' has unsupported type %d", m->path, name, t->type);
        m->load_err = 1;
        return NULL;
    }
    return t;
}

const float *mr_model_f32(mr_model *m, const mr_gguf_tensor *t) {
    if (!t) return NULL;
    if (t->type == MR_TYPE_F32) return (const float *)t->data;
    int64_t n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    const mr_type_traits *tt = mr_type_get(t->type);
    if (!tt || !tt->to_float || n % tt->block_size) {
        mr_set_error("%s: tensor '%s' of type %s cannot be read as floats", m->path, t->name, mr_type_name(t->type));
        m->load_err = 1;
        return NULL;
    }
    if (m->n_owned == m->cap_owned) {
        int cap = m->cap_owned ? m->cap_owned * 2 : 32;
        void **o = mr_realloc(m->owned, sizeof(void *) * (size_t)cap);
        if (!o) goto oom;
        m->owned = o;
        m->cap_owned = cap;
    }
    float *f = mr_malloc(sizeof(float) * (size_t)n);
    if (!f) goto oom;
    tt->to_float(t->data, f, n);
    m->owned[m->n_owned++] = f;
    return f;
oom:
    mr_set_error("model: out of memory");
    m->load_err = 1;
    return NULL;
}

int mr_model_matmul(mr_model *m, const mr_weight *w, const float *X, int64_t ncols, float *Y) {
    MR_PROF_BEGIN(t);
    const mr_matmul_task task = {w, X, ncols, Y, 0, 0};
    int rc = mr_model_matmul_many(m, &task, 1);
    if (mr_prof_on) mr_prof_add_matmul(w->name, mr_now() - t);
    return rc;
}

int mr_model_matmul_many(mr_model *m, const mr_matmul_task *t, int n) { return mr_matmul_many_in(m->pool, m->ws, t, n); }

int mr_tensor_get_row(const mr_gguf_tensor *t, int64_t row, float *out) {
    if (row < 0 || row >= t->ne[1]) { mr_set_error("tensor %s: row %lld out of range", t->name, (long long)row); return -1; }
    size_t rs = mr_row_size(t->type, t->ne[0]);
    const mr_type_traits *tt = mr_type_get(t->type);
    const uint8_t *src = (const uint8_t *)t->data + rs * (size_t)row;
    if (t->type == MR_TYPE_F32) { memcpy(out, src, sizeof(float) * (size_t)t->ne[0]); return 0; }
    if (!rs || !tt || !tt->to_float) { mr_set_error("tensor %s: cannot dequantize type %s", t->name, mr_type_name(t->type)); return -1; }
    tt->to_float(src, out, t->ne[0]);
    return 0;
}

/* the pager's conversion (mr_pager_set_convert): an expert matrix with a view in slot_rp is repacked
 * where it was read, under the model's ISA (the I/O thread's own is the process's) */
static int mr_model_slot_convert(void *ctx, int layer, int mat, void *data, void *staging) {
    const mr_model *m = ctx;
    if (!m->slot_rp[layer * MR_PAGER_MATS + mat]) return 0;
    const mr_gguf_tensor *t = m->exp_layers[layer].mat[mat];
    const int isa_prev = mr_isa_enter(m->isa);
    const int rc = mr_repack_in_place(data, staging, t->type, t->ne[0], t->ne[1]);
    mr_isa_leave(isa_prev);
    if (rc) mr_set_error("no in-place layout for %s", t->name);
    return rc;
}

/* Paged experts in the repacked layout where it only moves the bytes (quant/repack.h in place): the
 * slot holds the same bytes, so the arena's size and the reads do not change, and the products run
 * the resident experts' kernels (the same bits). mr_model_params.no_repack keeps the file's layout. */
static int mr_model_slot_layouts(mr_model *m, int n) {
    if (m->params.no_repack) return 0;
    for (int i = 0; m->slot_rp && i < m->n_exp_layers * MR_PAGER_MATS; i++) mr_repack_free(m->slot_rp[i]);
    free(m->slot_rp);
    m->slot_rp = mr_calloc((size_t)n * MR_PAGER_MATS, sizeof *m->slot_rp);
    if (!m->slot_rp) { mr_set_error("model: out of memory"); return -1; }
    int any = 0;
    for (int l = 0; l < n; l++)
        for (int k = 0; k < MR_PAGER_MATS; k++) {
            const mr_gguf_tensor *t = m->exp_layers[l].mat[k];
            if (!t || t->n_dims < 3 || !mr_repack_in_place_applies(t->type, t->ne[0], t->ne[1])) continue;
            if (!(m->slot_rp[l * MR_PAGER_MATS + k] = mr_repack_view(t->type, t->ne[0], t->ne[1]))) return -1;
            m->exp_rp[l * MR_PAGER_MATS + k] = m->slot_rp[l * MR_PAGER_MATS + k];
            any = 1;
        }
    return any ? mr_pager_set_convert(m->pager, mr_model_slot_convert, m) : 0;
}

int mr_model_init_pager(mr_model *m, const mr_pager_layer *layers) { return mr_model_init_pager_n(m, layers, m->n_layer); }

int mr_model_init_pager_n(mr_model *m, const mr_pager_layer *layers, int n) {
    free(m->exp_layers);
    m->n_exp_layers = n;
    m->exp_layers = mr_malloc(sizeof(mr_pager_layer) * (size_t)n);
    if (!m->exp_layers) { mr_set_error("model: out of memory"); return -1; }
    memcpy(m->exp_layers, layers, sizeof(mr_pager_layer) * (size_t)n);
    m->pager = mr_pager_create(m->gguf, m->exp_layers, n, m->params.ram_budget, &m->params.pager);
    if (!m->pager) return -1;
    free(m->exp_rp);
    m->exp_rp = mr_calloc((size_t)n * MR_PAGER_MATS, sizeof *m->exp_rp);
    if (!m->exp_rp) { mr_set_error("model: out of memory"); return -1; }
    /* resident experts get repacked copies; paged ones are repacked in their slots as they arrive */
    if (mr_pager_paging(m->pager)) return mr_model_slot_layouts(m, n);
    for (int l = 0; l < n; l++)
        for (int k = 0; k < MR_PAGER_MATS; k++) m->exp_rp[l * MR_PAGER_MATS + k] = mr_model_repack(m, layers[l].mat[k]);
    return 0;
}

/* ---- debug taps ---- */

static int dump_selected(const char *list, const char *name) {
    if (!strcmp(list, "all")) return 1;
    size_t nl = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == nl && !strncmp(p, name, l)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

void mr_model_dump(const mr_model *m, const char *name, int il, const float *x, int64_t ne0, int64_t ne1) {
    if (!mr_model_dumping(m) || !dump_selected(m->params.dump, name)) return;
    double sum = 0, sq = 0;
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < ne0 * ne1; i++) {
        sum += x[i]; sq += (double)x[i] * x[i];
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
    }
    char tag[160];
    if (il >= 0) snprintf(tag, sizeof tag, "%s-%d", name, il); else snprintf(tag, sizeof tag, "%s", name);
    fprintf(stderr, "dump %s [%lld x %lld]: sum %.6g rms %.6g min %.6g max %.6g |", tag, (long long)ne0, (long long)ne1,
            sum, (ne0 * ne1 > 0) ? sqrt(sq / (double)(ne0 * ne1)) : 0.0, mn, mx);
    for (int64_t i = 0; i < ne0 && i < m->params.dump_n; i++) fprintf(stderr, " %.6g", x[i]);
    fprintf(stderr, "\n");
}
