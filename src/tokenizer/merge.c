/* The two merge tokenizers.
 * SPM (tokenizer.ggml.model "llama"): start from UTF-8 characters, repeatedly merge the adjacent
 * pair whose concatenation is a token with the highest score (ties: leftmost); pieces that are not
 * tokens fall back to byte tokens <0xNN>. Reference: llm_tokenizer_spm_session.
 * Byte-level BPE ("gpt2"): pre-tokenize into words (pretok.c), map every byte to its GPT-2 code
 * point, then merge the adjacent pair with the lowest merge rank (ties: leftmost).
 * Reference: llm_tokenizer_bpe_session. Both use a binary heap with lazy deletion: an entry is
 * stale when one side was merged away or the pair's byte length changed. */
#include "tokenizer/tokenizer.h"
#include "base/base.h"

#include <stdlib.h>
#include <string.h>

typedef struct { size_t off, n; int prev, next; } sym;
/* 16 bytes: the heap can hold a few entries per input byte */
typedef struct { int32_t left, right; union { float score; int32_t rank; }; uint32_t size; } bigram;
typedef struct { bigram *v; size_t n, cap; int spm; } heap;

/* a before b (a has priority) */
static int before(const heap *h, const bigram *a, const bigram *b) {
    if (h->spm) {
        if (a->score != b->score) return a->score > b->score;
    } else if (a->rank != b->rank) {
        return a->rank < b->rank;
    }
    return a->left < b->left;
}

static int heap_push(heap *h, bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        bigram *v = mr_realloc(h->v, cap * sizeof *v);
        if (!v) return -1;
        h->v = v; h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(h, &b, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = b;
    return 0;
}

static bigram heap_pop(heap *h) {
    bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && before(h, &h->v[c + 1], &h->v[c])) c++;
        if (!before(h, &h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

typedef struct { sym *v; size_t n, cap; } symvec;
static int sym_push(symvec *s, sym x) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        sym *v = mr_realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v; s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

/* split text into UTF-8 characters (by lead byte, truncated at the end) */
static int split_chars(symvec *s, size_t len, const char *text) {
    s->n = 0;
    size_t off = 0;
    int idx = 0;
    while (off < len) {
        size_t l = mr_utf8_len((unsigned char)text[off]);
        if (l > len - off) l = len - off;
        sym x = { off, l, idx - 1, off + l == len ? -1 : idx + 1 };
        if (sym_push(s, x)) return -1;
        off += l;
        idx++;
    }
    return 0;
}

static void merge_pair(symvec *s, const bigram *b) {
    sym *l = &s->v[b->left], *r = &s->v[b->right];
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0) s->v[r->next].prev = b->left;
}

/* Bigram merging shared by SPM (best score first) and BPE (lowest rank first; the heap orders by
 * h->spm): queue every adjacent pair try_add accepts, then repeatedly merge the best live pair and
 * queue its new neighbours. Stale entries (a side already merged away) are skipped when popped. */
typedef int (*try_add_fn)(const mr_tokenizer *t, const char *text, symvec *s, heap *h, int left, int right);
static int merge_all(const mr_tokenizer *t, const char *text, symvec *s, heap *h, try_add_fn try_add) {
    h->n = 0;
    for (size_t i = 1; i < s->n; i++)
        if (try_add(t, text, s, h, (int)i - 1, (int)i)) return -1;
    while (h->n) {
        bigram b = heap_pop(h);
        const sym *l = &s->v[b.left], *r = &s->v[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        merge_pair(s, &b);
        if (try_add(t, text, s, h, s->v[b.left].prev, b.left) || try_add(t, text, s, h, b.left, s->v[b.left].next))
            return -1;
    }
    return 0;
}

/* ---- SPM ---- */
static int spm_try_add(const mr_tokenizer *t, const char *text, symvec *s, heap *h, int left, int right) {
    if (left < 0 || right < 0) return 0;
    size_t n = s->v[left].n + s->v[right].n;
    int32_t id = mr_strmap_get(&t->tok, text + s->v[left].off, n);
    if (id < 0 || id >= t->n_vocab) return 0;
    bigram b = { .left = left, .right = right, .score = t->score[id], .size = (uint32_t)n };
    return heap_push(h, b);
}

int mr_spm_tokenize(const mr_tokenizer *t, const char *text, size_t len, mr_i32vec *out) {
    symvec s = { 0 };
    heap h = { .spm = 1 };
    int ret = -1;
    if (split_chars(&s, len, text) || merge_all(t, text, &s, &h, spm_try_add)) goto oom;
    for (int i = s.n ? 0 : -1; i != -1; i = s.v[i].next) {
        const sym *x = &s.v[i];
        int32_t id = mr_strmap_get(&t->tok, text + x->off, x->n);
        if (id >= 0) {
            if (mr_i32vec_push(out, id)) goto oom;
            continue;
        }
        /* Every merged piece is a token, so this is one character that is not: emit its bytes.
         * (The reference also consults a map of previous merges here, which can never match.) */
        for (size_t j = 0; j < x->n; j++) {
            int32_t bt = mr_tok_byte_to_token(t, (uint8_t)text[x->off + j]);
            if (bt < 0) bt = t->unk; /* the reference throws here; a vocabulary without byte tokens */
            if (bt >= 0 && mr_i32vec_push(out, bt)) goto oom;
        }
    }
    ret = 0;
    goto done;
oom:
    mr_set_error("tokenizer: out of memory");
done:
    free(s.v); free(h.v);
    return ret;
}

/* ---- byte-level BPE ---- */
static int bpe_try_add(const mr_tokenizer *t, const char *text, symvec *s, heap *h, int left, int right) {
    if (left < 0 || right < 0) return 0;
    const sym *l = &s->v[left], *r = &s->v[right];
    int32_t rank = mr_strmap_get3(&t->merges, text + l->off, l->n, ' ', text + r->off, r->n);
    if (rank < 0) return 0;
    bigram b = { .left = left, .right = right, .rank = rank, .size = (uint32_t)(l->n + r->n) };
    return heap_push(h, b);
}

int mr_bpe_tokenize(const mr_tokenizer *t, const char *text, size_t len, mr_i32vec *out) {
    char *words = NULL, *enc = NULL;
    size_t wcap = 0, wlen = 0, ecap = 0;
    mr_i32vec lens = { 0 };
    symvec s = { 0 };
    heap h = { .spm = 0 };
    int ret = -1;
    if (mr_pretok_split(t->pt, text, len, &words, &wcap, &wlen, &lens)) goto done;
    size_t wo = 0;
    for (size_t w = 0; w < lens.n; w++) {
        const unsigned char *word = (const unsigned char *)words + wo;
        size_t wl = (size_t)lens.v[w];
        wo += wl;
        /* byte-level encoding: each byte becomes the UTF-8 of its mapped code point (<= 2 bytes) */
        if (wl * 2 > ecap) {
            char *e = mr_realloc(enc, wl * 2 + 16);
            if (!e) goto oom;
            enc = e; ecap = wl * 2 + 16;
        }
        size_t el = 0;
        for (size_t i = 0; i < wl; i++) el += (size_t)mr_utf8_encode(mr_bpe_byte_to_cp(word[i]), enc + el);
        if (t->ignore_merges) {
            int32_t id = mr_strmap_get(&t->tok, enc, el);
            if (id >= 0) {
                if (mr_i32vec_push(out, id)) goto oom;
                continue;
            }
        }
        if (split_chars(&s, el, enc) || merge_all(t, enc, &s, &h, bpe_try_add)) goto oom;
        for (size_t i = 0; i < s.n; i++) {
            const sym *x = &s.v[i];
            if (!x->n) continue;
            int32_t id = mr_strmap_get(&t->tok, enc + x->off, x->n);
            if (id >= 0) {
                if (mr_i32vec_push(out, id)) goto oom;
                continue;
            }
            /* not a token: the reference looks each single byte of the piece up and drops misses */
            for (size_t j = 0; j < x->n; j++) {
                int32_t bt = mr_strmap_get(&t->tok, enc + x->off + j, 1);
                if (bt >= 0 && mr_i32vec_push(out, bt)) goto oom;
            }
        }
    }
    ret = 0;
    goto done;
oom:
    mr_set_error("tokenizer: out of memory");
done:
    free(words); free(enc); free(lens.v); free(s.v); free(h.v);
    return ret;
}
