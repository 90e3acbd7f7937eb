/* Vocabulary loading (GGUF tokenizer.ggml.* metadata), special-token handling, tokenize and
 * detokenize entry points. The behaviour mirrors the reference llama.cpp (llama_vocab::impl::load,
 * tokenizer_st_partition, tokenize, token_to_piece, detokenize in src/llama-vocab.cpp) so that ids
 * match it exactly; the reference's quirks that matter for ids are kept and commented. */
#include "tokenizer/tokenizer.h"
#include "base/base.h"
#include "gguf/gguf.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_VOCAB (1 << 24)
#define MAX_MERGES (1 << 24)
#define MAX_TOKEN_BYTES (1 << 16)

/* ---- small containers ---- */
int mr_i32vec_push(mr_i32vec *a, int32_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = mr_realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v; a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static inline uint64_t fnv_step(uint64_t h, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 0x100000001b3ull; }
    return h;
}
#define FNV0 0xcbf29ce484222325ull
static inline uint32_t fnv_fin(uint64_t h) { return (uint32_t)(h ^ (h >> 29) ^ (h >> 47)); }

int mr_strmap_init(mr_strmap *m, uint32_t expected) {
    memset(m, 0, sizeof *m);
    uint32_t cap = 16;
    while (cap < expected * 2u + 16u) cap *= 2;
    m->slot = mr_calloc(cap, sizeof *m->slot);
    m->key = mr_malloc((size_t)(expected + 1) * sizeof *m->key);
    m->klen = mr_malloc((size_t)(expected + 1) * sizeof *m->klen);
    m->val = mr_malloc((size_t)(expected + 1) * sizeof *m->val);
    if (!m->slot || !m->key || !m->klen || !m->val) { mr_strmap_free(m); return -1; }
    m->mask = cap - 1;
    m->cap = expected + 1;
    return 0;
}

void mr_strmap_free(mr_strmap *m) {
    free(m->slot); free(m->key); free(m->klen); free(m->val);
    memset(m, 0, sizeof *m);
}

int mr_strmap_put(mr_strmap *m, const char *k, size_t len, int32_t v, int overwrite) {
    if (len > UINT32_MAX) return -1;
    uint32_t i = fnv_fin(fnv_step(FNV0, k, len)) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) break;
        e--;
        if (m->klen[e] == len && !memcmp(m->key[e], k, len)) {
            if (overwrite) m->val[e] = v;
            return 0;
        }
    }
    if (m->n >= m->cap || (uint64_t)(m->n + 1) * 2 > (uint64_t)m->mask + 1) return -1; /* sized at init */
    m->key[m->n] = k; m->klen[m->n] = (uint32_t)len; m->val[m->n] = v;
    m->slot[i] = ++m->n;
    return 0;
}

int32_t mr_strmap_get(const mr_strmap *m, const char *k, size_t len) {
    if (!m->slot) return -1;
    uint32_t i = fnv_fin(fnv_step(FNV0, k, len)) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) return -1;
        e--;
        if (m->klen[e] == len && !memcmp(m->key[e], k, len)) return m->val[e];
    }
}

int32_t mr_strmap_get3(const mr_strmap *m, const char *a, size_t alen, char sep, const char *b, size_t blen) {
    if (!m->slot) return -1;
    uint64_t h = fnv_step(FNV0, a, alen);
    size_t slen = sep ? 1 : 0, len = alen + slen + blen;
    if (sep) h = fnv_step(h, &sep, 1);
    h = fnv_step(h, b, blen);
    uint32_t i = fnv_fin(h) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        uint32_t e = m->slot[i];
        if (!e) return -1;
        e--;
        const char *k = m->key[e];
        if (m->klen[e] == len && !memcmp(k, a, alen) && (!sep || k[alen] == sep) && !memcmp(k + alen + slen, b, blen))
            return m->val[e];
    }
}

/* ---- loading ---- */
void mr_tokenizer_free(mr_tokenizer *t) {
    if (!t) return;
    free(t->text); free(t->text_len); free(t->score); free(t->attr);
    if (t->piece) for (int32_t i = 0; i < t->n_vocab; i++) free((void *)t->piece[i]);
    free(t->piece); free(t->piece_len);
    free(t->arena); free(t->merge_arena);
    mr_strmap_free(&t->tok); mr_strmap_free(&t->merges);
    free(t->special); free(t->eog);
    mr_pretok_free(t->pt);
    free(t);
}

static const mr_gguf_kv *find_str_array(const mr_gguf *g, const char *key, int required) {
    const mr_gguf_kv *kv = mr_gguf_find_kv(g, key);
    if (!kv) {
        if (required) mr_set_error("tokenizer: missing %s", key);
        return NULL;
    }
    if (kv->type != MR_GGUF_ARRAY || kv->arr_type != MR_GGUF_STRING || !kv->arr || !kv->arr_str_len) {
        mr_set_error("tokenizer: %s is not an array of strings", key);
        return NULL;
    }
    return kv;
}

static int32_t find_text(const mr_tokenizer *t, const char *s) { return mr_strmap_get(&t->tok, s, strlen(s)); }

static int text_is(const mr_tokenizer *t, int32_t id, const char *s) {
    size_t n = strlen(s);
    return t->text_len[id] == n && !memcmp(t->text[id], s, n);
}

/* Texts the reference recognises as special (llama_vocab::impl::load). */
static const char *const eot_texts[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
    "<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>",
    "<end_of_utterance>", NULL };
static const char *const eom_texts[] = { "<|eom_id|>", NULL };
static const char *const fim_pre_texts[] = { "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>", NULL };
static const char *const fim_suf_texts[] = { "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>", NULL };
static const char *const fim_mid_texts[] = { "<|fim_middle|>", "<fim-middle>", "<fim_middle>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>", NULL };
static const char *const fim_pad_texts[] = { "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL };
static const char *const fim_rep_texts[] = { "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL };
static const char *const fim_sep_texts[] = { "<|file_sep|>", NULL };
static const char *const eog_texts[] = { "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
    "<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", NULL };

/* Special id not given in the metadata: a token with one of the texts, made a control token. If
 * several exist the reference takes the first in its hash map's order (unspecified); we take the
 * first in the list's order, so Phi-3's <|end|> is its end of turn rather than <|endoftext|>. Like
 * the reference, which walks its text -> id map, only the last of duplicate token strings is seen. */
static void detect_special(mr_tokenizer *t, int32_t *id, const char *const *texts) {
    if (*id >= 0) return;
    for (; *texts; texts++) {
        int32_t i = find_text(t, *texts);
        if (i >= 0) { *id = i; t->attr[i] |= MR_TATTR_CONTROL; return; }
    }
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_special(const void *a, const void *b, void *ctx) {
    const mr_tokenizer *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->text_len[x], ly = t->text_len[y];
    if (lx != ly) return lx > ly ? -1 : 1;
    return (x > y) - (x < y);
}

static int add_eog(mr_tokenizer *t, int32_t id) {
    if (id < 0) return 0;
    for (int i = 0; i < t->n_eog; i++) if (t->eog[i] == id) return 0;
    int32_t *p = mr_realloc(t->eog, (size_t)(t->n_eog + 1) * sizeof *p);
    if (!p) return -1;
    t->eog = p;
    t->eog[t->n_eog++] = id;
    return 0;
}

static void remove_eog(mr_tokenizer *t, int32_t id) {
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) { t->eog[i] = t->eog[--t->n_eog]; return; }
}

static uint8_t token_byte(const mr_tokenizer *t, int32_t id) {
    /* "<0xAB>" -> 0xAB (the reference: strtol of text.substr(3, 2)) */
    char hex[3] = { 0 };
    if (t->text_len[id] > 3) { hex[0] = t->text[id][3]; if (t->text_len[id] > 4) hex[1] = t->text[id][4]; }
    return (uint8_t)strtol(hex, NULL, 16);
}

/* token_to_piece(special = true) of the reference, cached per token. */
static int build_piece(mr_tokenizer *t, int32_t id) {
    const char *s = t->text[id];
    uint32_t n = t->text_len[id], a = t->attr[id];
    char *out = NULL;
    size_t len = 0;
    if (a & (MR_TATTR_UNKNOWN | MR_TATTR_CONTROL | MR_TATTR_USER_DEFINED)) {
        out = mr_malloc(n + 1);
        if (!out) return -1;
        memcpy(out, s, n);
        len = n;
    } else if (a & MR_TATTR_NORMAL) {
        if (t->type == MR_TOK_SPM) {
            out = mr_malloc(n + 1);
            if (!out) return -1;
            for (uint32_t i = 0; i < n;) {
                if (i + 2 < n && (unsigned char)s[i] == 0xe2 && (unsigned char)s[i + 1] == 0x96 && (unsigned char)s[i + 2] == 0x81) {
                    out[len++] = ' ';
                    i += 3;
                } else {
                    out[len++] = s[i++];
                }
            }
        } else {
            /* byte-level BPE: each code point is one byte (llama_decode_text) */
            uint32_t *cps = mr_malloc(((size_t)n + 1) * sizeof *cps);
            size_t cap = (size_t)n * 2 + 64;
            out = mr_malloc(cap);
            if (!cps || !out) { free(cps); free(out); return -1; }
            size_t nc = mr_utf8_decode_ref(s, n, cps);
            for (size_t i = 0; i < nc; i++) {
                int b = mr_bpe_cp_to_byte(cps[i]);
                if (b >= 0) {
                    out[len++] = (char)b;
                } else {
                    /* the reference writes "[UNK_BYTE_0x<utf8 hex>" + whole token text + "]" */
                    char u[4];
                    int k = mr_utf8_encode(cps[i], u);
                    size_t need = len + 12 + 2 * (size_t)k + n + 1 + 1;
                    if (need > cap) {
                        char *q = mr_realloc(out, need * 2);
                        if (!q) { free(cps); free(out); return -1; }
                        out = q; cap = need * 2;
                    }
                    memcpy(out + len, "[UNK_BYTE_0x", 12); len += 12;
                    for (int j = 0; j < k; j++) len += (size_t)snprintf(out + len, 3, "%02x", (unsigned char)u[j]);
                    memcpy(out + len, s, n); len += n;
                    out[len++] = ']';
                }
            }
            free(cps);
        }
    } else if (a & MR_TATTR_BYTE) {
        out = mr_malloc(2);
        if (!out) return -1;
        out[0] = (char)token_byte(t, id);
        len = 1;
    } else {
        out = mr_malloc(1);
        if (!out) return -1;
    }
    t->piece[id] = out;
    t->piece_len[id] = (uint32_t)len;
    return 0;
}

static void get_id(const mr_gguf *g, const char *key, int32_t *id, int32_t n_vocab) {
    uint32_t v;
    if (!mr_gguf_find_kv(g, key)) return;
    if (mr_gguf_get_u32(g, key, &v)) { mr_log(2, "tokenizer: ignoring %s: %s\n", key, mr_get_error()); return; }
    if (v >= (uint32_t)n_vocab) { mr_log(2, "tokenizer: bad special token %s = %u, using %d\n", key, v, *id); return; }
    *id = (int32_t)v;
}

static void get_flag(const mr_gguf *g, const char *key, int *flag) {
    int v;
    if (mr_gguf_find_kv(g, key) && !mr_gguf_get_bool(g, key, &v)) *flag = v != 0;
}

/* The tokenizer model and pre-tokenizer named in the file, with the reference's defaults for each. */
static int read_model(mr_tokenizer *t, const mr_gguf *g) {
    const char *model = NULL, *pre = "";
    if (mr_gguf_get_str(g, "tokenizer.ggml.model", &model)) {
        mr_set_error("tokenizer: no tokenizer in this file (tokenizer.ggml.model missing)");
        return -1;
    }
    if (mr_gguf_find_kv(g, "tokenizer.ggml.pre") && mr_gguf_get_str(g, "tokenizer.ggml.pre", &pre)) return -1;
    snprintf(t->model, sizeof t->model, "%s", model);
    snprintf(t->pre, sizeof t->pre, "%s", pre);
    t->bos = t->eos = t->eot = t->eom = t->unk = t->sep = t->pad = t->mask = t->nl = -1;
    t->fim_pre = t->fim_suf = t->fim_mid = t->fim_pad = t->fim_rep = t->fim_sep = -1;
    int pre_flags = 0;
    if (!strcmp(model, "llama")) {
        t->type = MR_TOK_SPM;
        t->bos = 1; t->eos = 2; t->unk = 0;
        t->add_space_prefix = 1; t->add_bos = 1;
    } else if (!strcmp(model, "gpt2")) {
        t->type = MR_TOK_BPE;
        t->bos = 11; t->eos = 11;
        if (!strcmp(pre, "gemma4")) { mr_set_error("tokenizer: pre-tokenizer 'gemma4' is not supported"); return -1; }
        t->pre_set = mr_pretok_lookup(pre, &pre_flags);
        if (t->pre_set < 0) return -1;
        if (!pre[0]) mr_log(1, "tokenizer: missing pre-tokenizer type, using 'default'\n");
        t->clean_spaces = !(pre_flags & MR_PRE_F_NOCLEAN);
        t->ignore_merges = (pre_flags & MR_PRE_F_IGNORE_MERGES) != 0;
        t->add_bos = (pre_flags & MR_PRE_F_ADD_BOS) != 0;
        if (pre_flags & MR_PRE_F_NO_BOS_ID) t->bos = -1;
    } else {
        mr_set_error("tokenizer: unsupported tokenizer model '%s' (supported: llama, gpt2)", model);
        return -1;
    }
    get_flag(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix);
    return 0;
}

/* Token texts (copied into one arena, bounded), scores and types; t->n_vocab is set here. */
static int read_tokens(mr_tokenizer *t, const mr_gguf *g) {
    const mr_gguf_kv *tk = find_str_array(g, "tokenizer.ggml.tokens", 1);
    if (!tk) return -1;
    if (tk->n == 0 || tk->n > MAX_VOCAB) { mr_set_error("tokenizer: bad vocabulary size %llu", (unsigned long long)tk->n); return -1; }
    int32_t n = (int32_t)tk->n;
    t->n_vocab = n;
    const char *const *strs = (const char *const *)tk->arr;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        uint64_t l = tk->arr_str_len[i];
        if (l > MAX_TOKEN_BYTES) { mr_set_error("tokenizer: token %d is %llu bytes long", i, (unsigned long long)l); return -1; }
        total += l ? l + 1 : 32;
    }
    t->arena = mr_malloc(total + 1);
    t->text = mr_malloc((size_t)n * sizeof *t->text);
    t->text_len = mr_malloc((size_t)n * sizeof *t->text_len);
    t->score = mr_calloc((size_t)n, sizeof *t->score);
    t->attr = mr_malloc((size_t)n * sizeof *t->attr);
    t->piece = mr_calloc((size_t)n, sizeof *t->piece);
    t->piece_len = mr_calloc((size_t)n, sizeof *t->piece_len);
    if (!t->arena || !t->text || !t->text_len || !t->score || !t->attr || !t->piece || !t->piece_len ||
        mr_strmap_init(&t->tok, (uint32_t)n)) {
        mr_set_error("tokenizer: out of memory");
        return -1;
    }
    size_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        char *dst = t->arena + off;
        size_t l = (size_t)tk->arr_str_len[i];
        if (l) memcpy(dst, strs[i], l);
        else l = (size_t)snprintf(dst, 32, "[EMPTY_%d]", i); /* as the reference */
        dst[l] = 0;
        t->text[i] = dst;
        t->text_len[i] = (uint32_t)l;
        off += l + 1;
        t->attr[i] = MR_TATTR_NORMAL;
        if (mr_strmap_put(&t->tok, dst, l, i, 1)) { mr_set_error("tokenizer: out of memory"); return -1; }
    }
    const void *arr; uint64_t na;
    if (mr_gguf_find_kv(g, "tokenizer.ggml.scores")) {
        if (mr_gguf_get_arr(g, "tokenizer.ggml.scores", MR_GGUF_F32, &arr, &na)) return -1;
        if (na < (uint64_t)n) { mr_set_error("tokenizer: %llu scores for %d tokens", (unsigned long long)na, n); return -1; }
        memcpy(t->score, arr, (size_t)n * sizeof(float));
    }
    const mr_gguf_kv *kv = mr_gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (kv) {
        if (kv->type != MR_GGUF_ARRAY || (kv->arr_type != MR_GGUF_I32 && kv->arr_type != MR_GGUF_U32) || !kv->arr) {
            mr_set_error("tokenizer: tokenizer.ggml.token_type is not an array of 32-bit integers");
            return -1;
        }
        if (kv->n < (uint64_t)n) { mr_set_error("tokenizer: %llu token types for %d tokens", (unsigned long long)kv->n, n); return -1; }
        const int32_t *tt = kv->arr;
        for (int32_t i = 0; i < n; i++) {
            static const uint32_t map[7] = { 0, MR_TATTR_NORMAL, MR_TATTR_UNKNOWN, MR_TATTR_CONTROL,
                                             MR_TATTR_USER_DEFINED, MR_TATTR_UNUSED, MR_TATTR_BYTE };
            t->attr[i] = tt[i] >= 0 && tt[i] < 7 ? map[tt[i]] : 0;
        }
    }
    return 0;
}

/* BPE merges: "left right" -> rank; the first of duplicate lines wins (std::map::emplace). */
static int read_merges(mr_tokenizer *t, const mr_gguf *g) {
    const mr_gguf_kv *mk = find_str_array(g, "tokenizer.ggml.merges", 1);
    if (!mk) return -1;
    if (mk->n > MAX_MERGES) { mr_set_error("tokenizer: too many merges (%llu)", (unsigned long long)mk->n); return -1; }
    uint64_t mt = 0;
    for (uint64_t i = 0; i < mk->n; i++) {
        if (mk->arr_str_len[i] > 2 * MAX_TOKEN_BYTES) { mr_set_error("tokenizer: merge %llu too long", (unsigned long long)i); return -1; }
        mt += mk->arr_str_len[i] + 1;
    }
    t->merge_arena = mr_malloc(mt + 1);
    if (!t->merge_arena || mr_strmap_init(&t->merges, (uint32_t)mk->n)) { mr_set_error("tokenizer: out of memory"); return -1; }
    const char *const *ms = (const char *const *)mk->arr;
    size_t mo = 0;
    for (uint64_t i = 0; i < mk->n; i++) {
        size_t l = (size_t)mk->arr_str_len[i];
        memcpy(t->merge_arena + mo, ms[i], l);
        t->merge_arena[mo + l] = 0;
        if (mr_strmap_put(&t->merges, t->merge_arena + mo, l, (int32_t)i, 0)) { mr_set_error("tokenizer: out of memory"); return -1; }
        mo += l + 1;
    }
    return 0;
}

/* Special ids and flags from the metadata, then those recognised by their text. */
static void read_special_ids(mr_tokenizer *t, const mr_gguf *g) {
    int32_t n = t->n_vocab;
    get_id(g, "tokenizer.ggml.bos_token_id", &t->bos, n);
    get_id(g, "tokenizer.ggml.eos_token_id", &t->eos, n);
    get_id(g, "tokenizer.ggml.eot_token_id", &t->eot, n);
    get_id(g, "tokenizer.ggml.eom_token_id", &t->eom, n);
    get_id(g, "tokenizer.ggml.unknown_token_id", &t->unk, n);
    get_id(g, "tokenizer.ggml.seperator_token_id", &t->sep, n);
    get_id(g, "tokenizer.ggml.padding_token_id", &t->pad, n);
    get_id(g, "tokenizer.ggml.mask_token_id", &t->mask, n);
    get_id(g, "tokenizer.ggml.fim_pre_token_id", &t->fim_pre, n);
    get_id(g, "tokenizer.ggml.fim_suf_token_id", &t->fim_suf, n);
    get_id(g, "tokenizer.ggml.fim_mid_token_id", &t->fim_mid, n);
    get_id(g, "tokenizer.ggml.fim_pad_token_id", &t->fim_pad, n);
    get_id(g, "tokenizer.ggml.fim_rep_token_id", &t->fim_rep, n);
    get_id(g, "tokenizer.ggml.fim_sep_token_id", &t->fim_sep, n);
    get_id(g, "tokenizer.ggml.prefix_token_id", &t->fim_pre, n);
    get_id(g, "tokenizer.ggml.suffix_token_id", &t->fim_suf, n);
    get_id(g, "tokenizer.ggml.middle_token_id", &t->fim_mid, n);
    get_flag(g, "tokenizer.ggml.add_bos_token", &t->add_bos);
    get_flag(g, "tokenizer.ggml.add_eos_token", &t->add_eos);

    /* defaults beyond a small vocabulary (e.g. BPE's 11) are no token: the reference would emit them */
    int32_t *ids[] = { &t->bos, &t->eos, &t->eot, &t->eom, &t->unk, &t->sep, &t->pad, &t->mask };
    for (size_t k = 0; k < sizeof ids / sizeof ids[0]; k++) if (*ids[k] >= n) *ids[k] = -1;

    detect_special(t, &t->eot, eot_texts);
    detect_special(t, &t->eom, eom_texts);
    detect_special(t, &t->fim_pre, fim_pre_texts);
    detect_special(t, &t->fim_suf, fim_suf_texts);
    detect_special(t, &t->fim_mid, fim_mid_texts);
    detect_special(t, &t->fim_pad, fim_pad_texts);
    detect_special(t, &t->fim_rep, fim_rep_texts);
    detect_special(t, &t->fim_sep, fim_sep_texts);
    for (int32_t i = 0; i < n; i++) /* control tokens named "unused" */
        if ((t->attr[i] & MR_TATTR_CONTROL) && memmem(t->text[i], t->text_len[i], "unused", 6)) t->attr[i] |= MR_TATTR_UNUSED;
}

/* The end-of-generation set, with the reference's exceptions for gpt-oss and tool-response vocabularies;
 * -1 when out of memory. */
static int build_eog(mr_tokenizer *t) {
    if (add_eog(t, t->fim_pad) || add_eog(t, t->fim_rep) || add_eog(t, t->fim_sep)) return -1;
    for (const char *const *e = eog_texts; *e; e++) {
        int32_t i = find_text(t, *e);
        if (i < 0) continue;
        if (add_eog(t, i)) return -1;
        t->attr[i] |= MR_TATTR_CONTROL;
    }
    static const char *const gpt_oss[] = { "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>" };
    for (int j = 0; j < 4; j++) { /* gpt-oss: always rendered */
        int32_t i = find_text(t, gpt_oss[j]);
        if (i >= 0) t->attr[i] = MR_TATTR_USER_DEFINED;
    }
    if (add_eog(t, t->eos) || add_eog(t, t->eot) || add_eog(t, t->eom)) return -1;
    int has_return = 0, has_call = 0, has_flush = 0, has_end = 0, has_tool_response = 0;
    int32_t end_id = -1, s_id = -1;
    for (int i = 0; i < t->n_eog; i++) {
        int32_t id = t->eog[i];
        if (text_is(t, id, "<|return|>")) has_return = 1;
        else if (text_is(t, id, "<|call|>") || text_is(t, id, "<|calls|>")) has_call = 1;
        else if (text_is(t, id, "<|flush|>")) has_flush = 1;
        else if (text_is(t, id, "<|end|>")) { has_end = 1; end_id = id; }
    }
    if ((has_return && has_call && has_end) || (has_call && has_flush && has_end)) {
        remove_eog(t, end_id);
        t->attr[end_id] = MR_TATTR_USER_DEFINED;
    }
    for (int i = 0; i < t->n_eog; i++) {
        int32_t id = t->eog[i];
        if (text_is(t, id, "<|tool_response>")) has_tool_response = 1;
        else if (text_is(t, id, "</s>")) s_id = id;
    }
    if (has_tool_response && s_id >= 0) {
        remove_eog(t, s_id);
        t->attr[s_id] = MR_TATTR_NORMAL;
    }
    if (t->n_eog) qsort(t->eog, (size_t)t->n_eog, sizeof *t->eog, cmp_i32);
    return 0;
}

/* Special tokens split out of the text before tokenizing, longest first; -1 when out of memory. */
static int build_special_list(mr_tokenizer *t) {
    int32_t n = t->n_vocab;
    for (int32_t i = 0; i < n; i++)
        if (t->attr[i] & (MR_TATTR_CONTROL | MR_TATTR_USER_DEFINED | MR_TATTR_UNKNOWN)) t->n_special++;
    t->special = mr_malloc(((size_t)t->n_special + 1) * sizeof *t->special);
    if (!t->special) return -1;
    t->n_special = 0;
    for (int32_t i = 0; i < n; i++)
        if (t->attr[i] & (MR_TATTR_CONTROL | MR_TATTR_USER_DEFINED | MR_TATTR_UNKNOWN)) t->special[t->n_special++] = i;
    qsort_r(t->special, (size_t)t->n_special, sizeof *t->special, cmp_special, t);
    return 0;
}

/* Phi-3 (by general.name): special tokens strip the whitespace to their right. */
static void phi3_rstrip(mr_tokenizer *t, const mr_gguf *g) {
    const char *name = NULL;
    if (!mr_gguf_find_kv(g, "general.name") || mr_gguf_get_str(g, "general.name", &name) || !name) return;
    char low[256];
    size_t k = 0;
    for (; name[k] && k + 1 < sizeof low; k++) low[k] = (char)((name[k] >= 'A' && name[k] <= 'Z') ? name[k] + 32 : name[k]);
    low[k] = 0;
    if (!strstr(low, "phi-3") && !strstr(low, "phi3")) return;
    for (int i = 0; i < t->n_special; i++) t->attr[t->special[i]] |= MR_TATTR_RSTRIP;
    int32_t id = find_text(t, "</s>");
    if (id >= 0) t->attr[id] |= MR_TATTR_RSTRIP;
    static const char *const norstrip[] = { "<unk>", "<s>", "<|endoftext|>" };
    for (int j = 0; j < 3; j++) if ((id = find_text(t, norstrip[j])) >= 0) t->attr[id] &= ~(uint32_t)MR_TATTR_RSTRIP;
}

mr_tokenizer *mr_tokenizer_from_gguf(const mr_gguf *g) {
    mr_tokenizer *t = mr_calloc(1, sizeof *t);
    if (!t) { mr_set_error("tokenizer: out of memory"); return NULL; }
    if (read_model(t, g) || read_tokens(t, g)) goto fail;
    if (t->type == MR_TOK_BPE && read_merges(t, g)) goto fail;
    read_special_ids(t, g);
    if (build_eog(t) || build_special_list(t)) goto oom;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (build_piece(t, i)) goto oom;
    phi3_rstrip(t, g);
    if (t->type == MR_TOK_SPM) t->nl = mr_tok_byte_to_token(t, '\n');
    if (t->type == MR_TOK_BPE) {
        t->pt = mr_pretok_new(t->pre_set);
        if (!t->pt) goto fail;
    }
    return t;
oom:
    mr_set_error("tokenizer: out of memory");
fail:
    mr_tokenizer_free(t);
    return NULL;
}

mr_tokenizer *mr_tokenizer_load(const char *path) {
    mr_gguf *g = mr_gguf_open(path);
    if (!g) return NULL;
    mr_tokenizer *t = mr_tokenizer_from_gguf(g);
    if (!t) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mr_get_error());
        mr_set_error("%s: %s", path, msg);
    }
    mr_gguf_close(g);
    return t;
}

int32_t mr_tok_byte_to_token(const mr_tokenizer *t, uint8_t b) {
    if (t->type == MR_TOK_SPM) {
        char buf[8];
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        int32_t id = mr_strmap_get(&t->tok, buf, 6);
        if (id >= 0) return id;
        char c = (char)b;
        return mr_strmap_get(&t->tok, &c, 1);
    }
    char u[4];
    int k = mr_utf8_encode(mr_bpe_byte_to_cp(b), u);
    return mr_strmap_get(&t->tok, u, (size_t)k);
}

/* ---- public accessors ---- */
int32_t mr_tokenizer_n_vocab(const mr_tokenizer *t) { return t->n_vocab; }
int32_t mr_tokenizer_bos(const mr_tokenizer *t) { return t->bos; }
int32_t mr_tokenizer_eos(const mr_tokenizer *t) { return t->eos; }
int32_t mr_tokenizer_eot(const mr_tokenizer *t) { return t->eot; }
int mr_tokenizer_adds_bos(const mr_tokenizer *t) { return t->add_bos && t->bos >= 0; }
const char *mr_tokenizer_model(const mr_tokenizer *t) { return t->model; }
const char *mr_tokenizer_pre(const mr_tokenizer *t) { return t->pre; }

int mr_tokenizer_is_eog(const mr_tokenizer *t, int32_t id) {
    return bsearch(&id, t->eog, (size_t)t->n_eog, sizeof *t->eog, cmp_i32) != NULL;
}

int mr_tokenizer_is_control(const mr_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && (t->attr[id] & MR_TATTR_CONTROL) != 0;
}

const char *mr_token_text(const mr_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab ? t->text[id] : NULL;
}

int32_t mr_token_lookup(const mr_tokenizer *t, const char *text, size_t len) {
    return mr_strmap_get(&t->tok, text, len);
}

/* ---- tokenize ---- */
typedef struct { int32_t tok; size_t off, len; } fragment; /* tok >= 0: a special token */

static int is_space_c(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int frag_push(fragment **v, size_t *n, size_t *cap, fragment f) {
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 16;
        fragment *p = mr_realloc(*v, c * sizeof *p);
        if (!p) return -1;
        *v = p; *cap = c;
    }
    (*v)[(*n)++] = f;
    return 0;
}

/* Split the raw fragments at every occurrence of each special token (tokenizer_st_partition). */
static int partition(const mr_tokenizer *t, const char *text, size_t len, int parse_special,
                     fragment **out, size_t *out_n) {
    fragment *cur = NULL, *nxt = NULL;
    size_t n = 0, cap = 0, nn = 0, ncap = 0;
    if (frag_push(&cur, &n, &cap, (fragment){ -1, 0, len })) goto oom;
    for (int s = 0; s < t->n_special; s++) {
        int32_t id = t->special[s];
        uint32_t a = t->attr[id];
        if (!parse_special && (a & (MR_TATTR_CONTROL | MR_TATTR_UNKNOWN))) continue;
        const char *st = t->text[id];
        size_t sl = t->text_len[id];
        nn = 0;
        for (size_t k = 0; k < n; k++) {
            if (cur[k].tok >= 0) { if (frag_push(&nxt, &nn, &ncap, cur[k])) goto oom; continue; }
            size_t off = cur[k].off, l = cur[k].len;
            for (;;) {
                const char *m = l >= sl ? memmem(text + off, l, st, sl) : NULL;
                if (!m) break;
                size_t mpos = (size_t)(m - text);
                if (mpos > off) {
                    size_t ll = mpos - off;
                    if (a & MR_TATTR_LSTRIP) while (ll > 0 && is_space_c(text[off + ll - 1])) ll--;
                    if (ll > 0 && frag_push(&nxt, &nn, &ncap, (fragment){ -1, off, ll })) goto oom;
                }
                if (frag_push(&nxt, &nn, &ncap, (fragment){ id, 0, 0 })) goto oom;
                size_t end = off + l;
                off = mpos + sl;
                l = end - off;
                if (a & MR_TATTR_RSTRIP) while (l > 0 && is_space_c(text[off])) { off++; l--; }
            }
            if (l > 0 && frag_push(&nxt, &nn, &ncap, (fragment){ -1, off, l })) goto oom;
        }
        fragment *tmp = cur; cur = nxt; nxt = tmp;
        size_t tc = cap; cap = ncap; ncap = tc;
        n = nn;
    }
    free(nxt);
    *out = cur;
    *out_n = n;
    return 0;
oom:
    free(cur); free(nxt);
    mr_set_error("tokenizer: out of memory");
    return -1;
}

int mr_tokenize_vec(const mr_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                    mr_i32vec *out) {
    fragment *fr = NULL;
    size_t nf = 0;
    char *buf = NULL;
    int ret = -1;
    out->n = 0;
    if (len > INT32_MAX / 2) { mr_set_error("tokenizer: text too long (%zu bytes)", len); return -1; }
    if (len > 0 && partition(t, text, len, parse_special, &fr, &nf)) return -1;
    if (add_special && t->add_bos && t->bos >= 0 && mr_i32vec_push(out, t->bos)) goto oom;
    int prev_special = 1; /* SPM: a space is prefixed to text at the start and after special tokens */
    for (size_t k = 0; k < nf; k++) {
        if (fr[k].tok >= 0) {
            if (mr_i32vec_push(out, fr[k].tok)) goto oom;
            prev_special = 1;
            continue;
        }
        const char *s = text + fr[k].off;
        size_t l = fr[k].len;
        if (t->type == MR_TOK_SPM) {
            /* spaces become U+2581 */
            size_t nsp = (t->add_space_prefix && prev_special) ? 1 : 0;
            for (size_t i = 0; i < l; i++) nsp += s[i] == ' ';
            char *e = mr_realloc(buf, l + 2 * nsp + 4);
            if (!e) goto oom;
            buf = e;
            size_t o = 0;
            if (t->add_space_prefix && prev_special) { memcpy(e, "\xe2\x96\x81", 3); o = 3; }
            for (size_t i = 0; i < l; i++) {
                if (s[i] == ' ') { memcpy(e + o, "\xe2\x96\x81", 3); o += 3; }
                else e[o++] = s[i];
            }
            if (mr_spm_tokenize(t, e, o, out)) goto done;
        } else {
            if (mr_bpe_tokenize(t, s, l, out)) goto done;
        }
        prev_special = 0;
    }
    if (add_special && t->add_eos && t->eos >= 0 && mr_i32vec_push(out, t->eos)) goto oom;
    ret = 0;
    goto done;
oom:
    mr_set_error("tokenizer: out of memory");
done:
    free(fr);
    free(buf);
    return ret;
}

int mr_tokenize(const mr_tokenizer *t, const char *text, size_t len, int add_special, int parse_special,
                int32_t *out, int max) {
    mr_i32vec v = { 0 };
    if (!t || (!text && len)) { mr_set_error("mr_tokenize: bad arguments"); return INT_MIN; }
    if (mr_tokenize_vec(t, text, len, add_special, parse_special, &v)) { free(v.v); return INT_MIN; }
    int n = (int)v.n;
    if (n > max) { free(v.v); return -n; }
    if (n) memcpy(out, v.v, (size_t)n * sizeof *out);
    free(v.v);
    return n;
}

/* ---- detokenize ---- */
static int piece_copy(const mr_tokenizer *t, int32_t id, char *buf, int size, int lstrip, int special) {
    if (id < 0 || id >= t->n_vocab) { mr_set_error("tokenizer: token id %d out of range", id); return INT_MIN; }
    if (!special && (t->attr[id] & (MR_TATTR_UNKNOWN | MR_TATTR_CONTROL))) return 0;
    const char *p = t->piece[id];
    int n = (int)t->piece_len[id];
    for (int i = 0; i < lstrip && n && *p == ' '; i++) { p++; n--; }
    if (size < n) return -n;
    if (n) memcpy(buf, p, (size_t)n);
    return n;
}

int mr_token_to_piece(const mr_tokenizer *t, int32_t id, char *buf, int size, int special) {
    return piece_copy(t, id, buf, size, 0, special);
}

int mr_detokenize(const mr_tokenizer *t, const int32_t *ids, int n, char *text, int size, int remove_special,
                  int unparse_special) {
    int avail = size, total = 0;
    int remove_space = t->add_space_prefix;
    if (remove_special && t->add_bos && n > 0 && ids[0] == t->bos) { remove_space = 0; n--; ids++; }
    if (remove_special && t->add_eos && n > 0 && ids[n - 1] == t->eos) n--;
    char *w = text;
    for (int i = 0; i < n; i++) {
        int k = piece_copy(t, ids[i], w, avail, remove_space, unparse_special);
        if (k == INT_MIN) return INT_MIN;
        remove_space = 0;
        if (k < 0) { avail = 0; total -= k; }
        else if (k > 0) { avail -= k; w += k; total += k; }
    }
    if (total > size) return -total;
    if (t->clean_spaces) {
        /* the reference's clean_up_tokenization_spaces, three passes over the text */
        int t1 = total;
        total = total ? 1 : 0;
        for (int i = 1; i < t1; i++) {
            char x = text[i];
            if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
            text[total++] = x;
        }
        int t2 = total;
        total = total ? 1 : 0;
        for (int i = 1; i < t2; i++) {
            char x = text[i];
            if (x == '\'' && i + 1 < t2 && text[i - 1] == ' ' && text[i + 1] == ' ') { total--; text[++i] = 0; }
            text[total++] = x;
        }
        int t3 = total;
        total = total ? 1 : 0;
        for (int i = 1; i < t3; i++) {
            char x = text[i];
            if (text[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
                char x1 = text[i + 1];
                if (x1 == 's' || x1 == 'm') total--;
                else if (i + 2 < t3 && ((x1 == 'r' && text[i + 2] == 'e') || (x1 == 'v' && text[i + 2] == 'e'))) total--;
            }
            text[total++] = x;
        }
    }
    return total;
}
