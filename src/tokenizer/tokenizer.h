/* Tokenizer internals: vocabulary loaded from GGUF metadata, SPM and byte-level BPE tokenizers,
 * regex pre-tokenizers (PCRE2). Behaviour follows the reference llama.cpp (src/llama-vocab.cpp,
 * src/unicode.cpp of ayourtch-llm/llama.cpp-deepseek-v4-flash) case by case; see tokenizer.c. */
#ifndef MR_TOKENIZER_H
#define MR_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

#include "moerun.h"

struct mr_gguf;

/* Token attributes (bit set; values as llama_token_attr in the reference). */
enum {
    MR_TATTR_UNKNOWN = 1 << 0, MR_TATTR_UNUSED = 1 << 1, MR_TATTR_NORMAL = 1 << 2,
    MR_TATTR_CONTROL = 1 << 3, MR_TATTR_USER_DEFINED = 1 << 4, MR_TATTR_BYTE = 1 << 5,
    MR_TATTR_LSTRIP = 1 << 7, MR_TATTR_RSTRIP = 1 << 8,
};

enum mr_tok_type { MR_TOK_SPM = 1, MR_TOK_BPE = 2 };

/* ---- growable int32 / size arrays used by the tokenizers ---- */
typedef struct { int32_t *v; size_t n, cap; } mr_i32vec;
int mr_i32vec_push(mr_i32vec *a, int32_t x);

/* ---- string -> int32 hash map (keys copied into an arena owned by the map) ---- */
typedef struct {
    uint32_t *slot;       /* entry index + 1, 0 = empty */
    uint32_t mask;
    const char **key; uint32_t *klen; int32_t *val;
    uint32_t n, cap;
} mr_strmap;
int mr_strmap_init(mr_strmap *m, uint32_t expected);
void mr_strmap_free(mr_strmap *m);
/* Insert; if the key exists: overwrite when `overwrite`, else keep the old value. Key memory must
 * outlive the map (callers point into their own arenas). */
int mr_strmap_put(mr_strmap *m, const char *k, size_t len, int32_t v, int overwrite);
int32_t mr_strmap_get(const mr_strmap *m, const char *k, size_t len);   /* -1 if absent */
/* Lookup of the concatenation a + sep + b without building it (sep = 0: no separator). */
int32_t mr_strmap_get3(const mr_strmap *m, const char *a, size_t alen, char sep, const char *b, size_t blen);

/* ---- pre-tokenizer (pretok.c) ---- */
typedef struct mr_pretok mr_pretok;
/* Flags a pre-tokenizer name implies for the vocabulary (as the reference sets them). */
enum { MR_PRE_F_NOCLEAN = 1, MR_PRE_F_IGNORE_MERGES = 2, MR_PRE_F_ADD_BOS = 4, MR_PRE_F_NO_BOS_ID = 8 };
/* Resolve a tokenizer.ggml.pre name ("" = default). Returns the regex-set id (>= 0) and flags, or -1
 * with an error for an unknown name. */
int mr_pretok_lookup(const char *name, int *flags);
mr_pretok *mr_pretok_new(int set_id);
void mr_pretok_free(mr_pretok *p);
const char *mr_pretok_set_name(int set_id);
/* Split UTF-8 text into words. Each word is written as its UTF-8 bytes (invalid input bytes
 * replaced by U+FFFD, as the reference does) to *out (realloc'd), word boundaries as byte lengths
 * to *lens. Returns 0 or -1 (error set). */
int mr_pretok_split(const mr_pretok *p, const char *text, size_t len, char **out, size_t *out_cap,
                    size_t *out_len, mr_i32vec *lens);

/* Decode UTF-8 like the reference's unicode_cpts_from_utf8 (overlong forms and surrogates accepted,
 * invalid bytes -> U+FFFD one byte at a time; values above U+10FFFF become U+FFFD here). Returns
 * the number of code points written to cps (cps must hold len entries). */
size_t mr_utf8_decode_ref(const char *s, size_t len, uint32_t *cps);
int mr_utf8_encode(uint32_t cp, char out[4]);
/* Length of a UTF-8 sequence from its lead byte (reference unicode_len_utf8). */
static inline size_t mr_utf8_len(unsigned char c) {
    static const unsigned char lk[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lk[c >> 4];
}
/* GPT-2 byte <-> code point mapping used by byte-level BPE. */
uint32_t mr_bpe_byte_to_cp(uint8_t b);
int mr_bpe_cp_to_byte(uint32_t cp);  /* -1 if cp is not one of the 256 mapped code points */

/* ---- the tokenizer ---- */
struct mr_tokenizer {
    int type;                       /* enum mr_tok_type */
    int pre_set;                    /* BPE regex set id */
    char model[32], pre[64];
    int32_t n_vocab;
    const char **text; uint32_t *text_len; /* token strings (arena) */
    float *score;
    uint32_t *attr;
    const char **piece; uint32_t *piece_len; /* token_to_piece(special = 1) cache */
    char *arena; size_t arena_len;
    mr_strmap tok;                  /* text -> id (last duplicate wins, as the reference) */
    mr_strmap merges;               /* "left right" -> rank (first duplicate wins) */
    char *merge_arena;
    int32_t bos, eos, eot, eom, unk, sep, pad, mask, nl;
    int32_t fim_pre, fim_suf, fim_mid, fim_pad, fim_rep, fim_sep;
    int add_bos, add_eos, add_space_prefix, ignore_merges, clean_spaces;
    int32_t *special; int n_special;  /* control/user-defined/unknown ids, longest text first */
    int32_t *eog; int n_eog;          /* end-of-generation ids, sorted */
    mr_pretok *pt;
};

/* Build a tokenizer from an open GGUF's metadata (used by the model loader). */
mr_tokenizer *mr_tokenizer_from_gguf(const struct mr_gguf *g);

/* Tokenizers proper (spm.c, bpe.c): append the ids of one raw-text fragment. */
int mr_spm_tokenize(const mr_tokenizer *t, const char *text, size_t len, mr_i32vec *out);
int mr_bpe_tokenize(const mr_tokenizer *t, const char *text, size_t len, mr_i32vec *out);
int32_t mr_tok_byte_to_token(const mr_tokenizer *t, uint8_t b); /* -1 if the vocab has none */
#endif
