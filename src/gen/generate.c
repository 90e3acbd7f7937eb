/* Generation loop shared by run, chat and the server (moerun.h, "generation").
 *
 * A reply is: prefill (prompt tokens in chunks of n_batch, progress callback between chunks), then
 * steps. A step samples one token from the current logits (or takes tokens decided elsewhere,
 * mr_gen_accept), appends their text, and reports the text that is safe to show: whole UTF-8
 * characters only, and not a suffix that could still become a stop string. Accepted tokens are
 * evaluated lazily, at the start of the next step (all pending tokens in one eval, so a step that
 * accepts several tokens costs one batch), so the last token of a reply is never evaluated unless
 * another step or turn follows: a chat's next prefill evaluates it first. */
#include "moerun.h"
#include "base/base.h"
#include "gen/draft.h"
#include "gen/json_prefix.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GEN_MAX_STOP 16
#define GEN_MAX_STOP_LEN 256

struct mr_gen {
    mr_session *s;
    const mr_tokenizer *tok;
    mr_sampler *smp;
    mr_gen_params p;
    int n_vocab;
    float *logits;           /* [n_vocab] of the last evaluated token */
    int have_logits;
    int32_t *eog;            /* end-of-generation ids masked when ignore_eos */
    int n_eog;
    char stop[GEN_MAX_STOP][GEN_MAX_STOP_LEN + 1];
    size_t stop_len[GEN_MAX_STOP];
    int n_stop;
    /* the reply */
    int32_t *pending;        /* accepted, not yet evaluated */
    int n_pending, cap_pending;
    int32_t *gen;            /* accepted tokens of this reply */
    int n_gen, cap_gen;
    char *text;              /* their text (cut at a stop string) */
    size_t text_len, text_cap, sent;
    int finish;
    mr_gen_stats st;
    /* speculative decoding */
    int spec;                /* on for this generator */
    int32_t *hist;           /* the context as this generator saw it: prompts and accepted tokens */
    int n_hist, cap_hist;
    int draft_past;          /* tokens of hist in the draft session (the last one is re-evaluated) */
    int32_t *dbuf;           /* [spec_max] draft */
    int32_t *vbatch;         /* pending + draft, evaluated as one batch */
    int cap_vbatch;
    float *vlogits;          /* [cap_vbatch][n_vocab] logits of the verification batch */
    int spec_extra;          /* drafts evaluated beyond the state plain decoding would hold */
    int spec_k;              /* draft length now: grows while drafts are accepted, shrinks after a rejection */
    int spec_np, spec_k_now, spec_past0; /* the step between spec_prepare and spec_verify */
    int batch_spec;          /* mr_gen_batch handed out a verification batch */
    /* json_object / json_schema: the reply's state, and every token's text ([n_vocab + 1] offsets
     * into pieces); the tokens with text sorted by it (order[n_order]) with the bytes each shares
     * with the one before (lcp), so that json_mask feeds a prefix the tokens share once */
    int constrained;
    char *lazy;              /* calls_after: the marker that starts the constraint (NULL: none) */
    size_t lazy_from;        /* text before this offset holds no marker */
    int lazy_off;            /* text after the marker broke the call: free for the rest of the reply */
    mr_jschema *schema;      /* json_schema; NULL: json_object */
    mr_jsonp js;
    int js_bad;              /* a token from the caller broke the value: nothing can continue it */
    char *pieces;
    uint32_t *poff;
    int32_t *order;
    uint32_t *lcp;
    uint8_t *plain;          /* [n_vocab] bit 0: JSON string text (no '"', '\\', control bytes); bit 1: DSML raw text (no '<') */
    int n_order;
    mr_jsonp *jst;           /* [longest piece + 1] the states after each byte of a piece */
    /* thinking: the reasoning's markers, where the reply is (THINK_*), the tokens of the close
     * marker put in when the budget is spent */
    char *think_open, *think_close;
    int think_in_prompt, think_state, think_from, think_force;
    size_t think_end;        /* text offset after the close marker */
    int32_t *think_ids;
    int n_think_ids;
};

enum { THINK_NONE, THINK_MAYBE, THINK_IN, THINK_FORCING }; /* THINK_NONE: no reasoning, or it is over */

void mr_gen_params_default(mr_gen_params *p) {
    memset(p, 0, sizeof *p);
    mr_sampler_default_params(&p->sampler);
    p->max_tokens = -1;
    p->n_batch = 512;
    p->spec_ngram = 3;
    p->spec_ngram_min = 1;
}

const char *mr_gen_finish_name(int finish) {
    switch (finish) {
    case MR_GEN_RUNNING: return "running";
    case MR_GEN_EOG: return "eog";
    case MR_GEN_STOP: return "stop";
    case MR_GEN_LENGTH: return "length";
    case MR_GEN_CONTEXT: return "context";
    case MR_GEN_ABORTED: return "aborted";
    default: return "unknown";
    }
}

void mr_gen_free(mr_gen *g) {
    if (!g) return;
    mr_sampler_free(g->smp);
    free(g->logits); free(g->eog); free(g->pending); free(g->gen); free(g->text);
    free(g->pieces); free(g->poff); free(g->order); free(g->lcp); free(g->plain); free(g->jst); free(g->lazy);
    free(g->think_open); free(g->think_close); free(g->think_ids);
    mr_jschema_free(g->schema);
    free(g->hist); free(g->dbuf); free(g->vbatch); free(g->vlogits);
    free(g);
}

static int piece_cmp(const void *a, const void *b, void *ctx) {
    const mr_gen *g = ctx;
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const uint32_t lx = g->poff[x + 1] - g->poff[x], ly = g->poff[y + 1] - g->poff[y];
    const int r = memcmp(g->pieces + g->poff[x], g->pieces + g->poff[y], lx < ly ? lx : ly);
    return r ? r : (lx > ly) - (lx < ly);
}

/* json_object / json_schema: every token's text as accept_one appends it (end-of-generation tokens:
 * none), flat with offsets, and the tokens with text in byte order for json_mask. */
static int json_pieces(mr_gen *g) {
    size_t cap = (size_t)g->n_vocab * 8 + 256, n = 0;
    g->poff = mr_malloc(sizeof *g->poff * ((size_t)g->n_vocab + 1));
    g->pieces = mr_malloc(cap);
    g->order = mr_malloc(sizeof *g->order * (size_t)g->n_vocab);
    g->lcp = mr_malloc(sizeof *g->lcp * (size_t)g->n_vocab);
    g->plain = mr_malloc((size_t)g->n_vocab);
    if (!g->poff || !g->pieces || !g->order || !g->lcp || !g->plain) goto oom;
    for (int32_t id = 0; id < g->n_vocab; id++) {
        g->poff[id] = (uint32_t)n;
        if (mr_tokenizer_is_eog(g->tok, id)) continue;
        int pl = mr_token_to_piece(g->tok, id, g->pieces + n, (int)(cap - n < INT_MAX ? cap - n : INT_MAX), g->p.special_text);
        if (pl < 0 && pl != INT_MIN) { /* a long piece: grow and write it again */
            size_t need = n + (size_t)-pl + 256, c2 = 2 * cap > need ? 2 * cap : need;
            char *b = mr_realloc(g->pieces, c2);
            if (!b) goto oom;
            g->pieces = b;
            cap = c2;
            pl = mr_token_to_piece(g->tok, id, g->pieces + n, (int)(cap - n < INT_MAX ? cap - n : INT_MAX), g->p.special_text);
        }
        if (pl > 0) n += (size_t)pl;
        if (n > UINT32_MAX / 2) { mr_set_error("generate: the vocabulary's text is too large"); return -1; }
    }
    g->poff[g->n_vocab] = (uint32_t)n;
    uint32_t longest = 0;
    for (int32_t id = 0; id < g->n_vocab; id++) {
        const uint32_t l = g->poff[id + 1] - g->poff[id];
        if (l) g->order[g->n_order++] = id;
        longest = l > longest ? l : longest;
        g->plain[id] = l > 0 ? 3 : 0;
        for (uint32_t k = 0; k < l; k++) {
            const unsigned char c = (unsigned char)g->pieces[g->poff[id] + k];
            if (c < 0x20 || c == '"' || c == '\\') g->plain[id] &= 2;
            if (c == '<') g->plain[id] &= 1;
        }
    }
    qsort_r(g->order, (size_t)g->n_order, sizeof *g->order, piece_cmp, g);
    for (int k = 0; k < g->n_order; k++) {
        const int32_t a = k ? g->order[k - 1] : 0, b = g->order[k];
        const uint32_t la = k ? g->poff[a + 1] - g->poff[a] : 0, lb = g->poff[b + 1] - g->poff[b];
        uint32_t m = 0;
        while (m < la && m < lb && g->pieces[g->poff[a] + m] == g->pieces[g->poff[b] + m]) m++;
        g->lcp[k] = m;
    }
    g->jst = mr_malloc(sizeof *g->jst * ((size_t)longest + 1));
    if (!g->jst) goto oom;
    return 0;
oom:
    mr_set_error("generate: out of memory for the vocabulary's text");
    return -1;
}

/* json_object / json_schema: -inf for every token that cannot continue the reply's value (tokens
 * without text too, but end-of-generation ones where the value is whole); -1 when no token can.
 * The tokens are tried in byte order: jst[d] is the state after the first d bytes of the last piece
 * fed (valid for d <= valid), so a prefix shared with the piece before is not fed again, and a
 * piece that shares the bytes up to one that failed fails too. */
static int json_mask_row(mr_gen *g, float *row) {
    int any = 0;
    if (g->js_bad) {
        for (int32_t id = 0; id < g->n_vocab; id++) row[id] = -INFINITY;
        return -1;
    }
    const int eog_ok = mr_jsonp_done(&g->js);
    for (int32_t id = 0; id < g->n_vocab; id++)
        if (g->poff[id + 1] == g->poff[id]) {
            if (!(eog_ok && mr_tokenizer_is_eog(g->tok, id))) row[id] = -INFINITY;
            else if (row[id] > -INFINITY) any = 1;
        }
    mr_jsonp_copy(&g->jst[0], &g->js);
    const int text = mr_jsonp_in_text(&g->js); /* inside a string: plain tokens go as they are */
    uint32_t valid = 0, dead = UINT32_MAX;
    for (int k = 0; k < g->n_order; k++) {
        const int32_t id = g->order[k];
        const uint32_t l = g->lcp[k];
        if (valid > l) valid = l;
        if (l < dead) dead = UINT32_MAX;
        if (!(row[id] > -INFINITY)) continue; /* impossible already (or NaN, which the sampler drops) */
        if (dead != UINT32_MAX) { row[id] = -INFINITY; continue; }
        if (text && (g->plain[id] & text) == text) { any = 1; continue; }
        const char *p = g->pieces + g->poff[id];
        const uint32_t n = g->poff[id + 1] - g->poff[id];
        for (; valid < n; valid++) {
            mr_jsonp_copy(&g->jst[valid + 1], &g->jst[valid]);
            if (mr_jsonp_feed(&g->jst[valid + 1], p + valid, 1)) { dead = valid + 1; break; }
        }
        if (dead != UINT32_MAX) row[id] = -INFINITY;
        else any = 1;
    }
    return any ? 0 : -1;
}

static int json_mask(mr_gen *g, float *row) {
    const double t0 = mr_now();
    const int rc = json_mask_row(g, row);
    g->st.mask_s += mr_now() - t0;
    g->st.n_mask++;
    return rc;
}

static void js_init(mr_gen *g) {
    if (g->schema) mr_jsonp_init_schema(&g->js, g->schema);
    else mr_jsonp_init(&g->js);
}

/* 1 if the pieces of ids[0..n) are the text lit */
static int pieces_are(const mr_gen *g, const int32_t *ids, int n, const char *lit) {
    size_t at = 0, ll = strlen(lit);
    for (int i = 0; i < n; i++) {
        char piece[256];
        int pl = mr_token_to_piece(g->tok, ids[i], piece, sizeof piece, g->p.special_text);
        if (pl < 0 || at + (size_t)pl > ll || memcmp(lit + at, piece, (size_t)pl)) return 0;
        at += (size_t)pl;
    }
    return at == ll;
}

/* lit as the longest vocabulary pieces from left to right (SPM tokenizes a fragment with a space in
 * front, which the marker in the middle of a reply does not have): the count, -1 if some byte has no
 * piece */
static int greedy_ids(const mr_gen *g, const char *lit, int32_t *out, int max) {
    int n = 0;
    for (size_t at = 0, ll = strlen(lit); at < ll; n++) {
        int best = -1, best_len = 0;
        for (int32_t id = 0; id < g->n_vocab; id++) {
            char piece[256];
            int pl = mr_token_to_piece(g->tok, id, piece, sizeof piece, g->p.special_text);
            if (pl > best_len && (size_t)pl <= ll - at && !memcmp(lit + at, piece, (size_t)pl)) best = id, best_len = pl;
        }
        if (best < 0 || n == max) return -1;
        out[n] = best;
        at += (size_t)best_len;
    }
    return n;
}

/* the thinking markers copied, the close marker's tokens for the budget */
static int think_init(mr_gen *g) {
    const mr_chat_think *t = g->p.think;
    if (!t->open || !t->close || !*t->close) { mr_set_error("generate: thinking needs its open and close markers"); return -1; }
    g->think_open = mr_strdup(t->open);
    g->think_close = mr_strdup(t->close);
    g->think_in_prompt = t->in_prompt;
    const size_t cl = strlen(t->close);
    const int n = g->think_close ? mr_tokenize(g->tok, t->close, cl, 0, 1, NULL, 0) : 0;
    if (!g->think_open || !g->think_close || n == INT_MIN) { if (n != INT_MIN) mr_set_error("generate: out of memory"); return -1; }
    const int need = n < 0 ? -n : n;
    g->think_ids = mr_malloc(sizeof(int32_t) * (size_t)(need + 1));
    if (!g->think_ids) { mr_set_error("generate: out of memory"); return -1; }
    g->n_think_ids = mr_tokenize(g->tok, t->close, cl, 0, 1, g->think_ids, need + 1);
    if (g->n_think_ids > 0 && pieces_are(g, g->think_ids, g->n_think_ids, t->close)) return 0;
    free(g->think_ids);
    g->think_ids = mr_malloc(sizeof(int32_t) * (cl + 1));
    if (!g->think_ids) { mr_set_error("generate: out of memory"); return -1; }
    g->n_think_ids = greedy_ids(g, t->close, g->think_ids, (int)cl);
    if (g->n_think_ids <= 0) { mr_set_error("generate: the vocabulary cannot write the thinking close marker%s", g->p.special_text ? "" : " (without special_text)"); return -1; }
    return 0;
}

mr_gen *mr_gen_new(mr_session *s, const mr_gen_params *p) {
    mr_gen *g = mr_calloc(1, sizeof *g);
    if (!g) { mr_set_error("generate: out of memory"); return NULL; }
    if (p) g->p = *p; else mr_gen_params_default(&g->p);
    if (g->p.n_batch <= 0) g->p.n_batch = 512;
    g->s = s;
    const mr_model *m = mr_session_model(s);
    g->tok = mr_model_tokenizer(m);
    g->n_vocab = mr_model_n_vocab(m);
    if (!g->tok) { mr_set_error("generate: the model has no usable tokenizer"); goto fail; }
    if (g->p.n_stop < 0 || g->p.n_stop > GEN_MAX_STOP) { mr_set_error("generate: at most %d stop strings", GEN_MAX_STOP); goto fail; }
    for (int i = 0; i < g->p.n_stop; i++) {
        size_t l = g->p.stop[i] ? strlen(g->p.stop[i]) : 0;
        if (l > GEN_MAX_STOP_LEN) { mr_set_error("generate: a stop string is longer than %d bytes", GEN_MAX_STOP_LEN); goto fail; }
        if (!l) continue; /* an empty stop string would end every reply at once: ignored */
        memcpy(g->stop[g->n_stop], g->p.stop[i], l + 1);
        g->stop_len[g->n_stop++] = l;
    }
    g->p.stop = NULL; /* copied; the caller's strings need not outlive this call */
    g->smp = mr_sampler_new(&g->p.sampler, g->n_vocab);
    if (!g->smp) goto fail;
    g->logits = mr_malloc(sizeof(float) * (size_t)g->n_vocab);
    g->cap_pending = 16;
    g->pending = mr_malloc(sizeof(int32_t) * (size_t)g->cap_pending);
    g->cap_gen = 256;
    g->gen = mr_malloc(sizeof(int32_t) * (size_t)g->cap_gen);
    if (!g->logits || !g->pending || !g->gen) { mr_set_error("generate: out of memory"); goto fail; }
    if (g->p.ignore_eos) {
        for (int32_t id = 0; id < g->n_vocab; id++) g->n_eog += mr_tokenizer_is_eog(g->tok, id);
        g->eog = mr_malloc(sizeof(int32_t) * (size_t)(g->n_eog + 1));
        if (!g->eog) { mr_set_error("generate: out of memory"); goto fail; }
        g->n_eog = 0;
        for (int32_t id = 0; id < g->n_vocab; id++)
            if (mr_tokenizer_is_eog(g->tok, id)) g->eog[g->n_eog++] = id;
    }
    if (g->p.spec_max < 0 || g->p.spec_max > 64) { mr_set_error("generate: draft length %d is outside 0..64", g->p.spec_max); goto fail; }
    if (g->p.spec_min < 0 || g->p.spec_min > g->p.spec_max) { mr_set_error("generate: shortest draft %d is outside 0..%d", g->p.spec_min, g->p.spec_max); goto fail; }
    if (g->p.spec_max) {
        if (g->p.spec_ngram < 1 || g->p.spec_ngram > 64 || g->p.spec_ngram_min < 1 || g->p.spec_ngram_min > g->p.spec_ngram) {
            mr_set_error("generate: n-gram sizes %d..%d are not within 1..64", g->p.spec_ngram_min, g->p.spec_ngram);
            goto fail;
        }
        if (g->p.mtp && !g->p.draft && !mr_model_n_mtp(mr_session_model(s))) {
            mr_set_error("generate: MTP drafts need a model with its MTP block loaded (a deepseek4 file with "
                         "nextn_predict_layers, loaded with mr_model_params.mtp = 1)");
            goto fail;
        }
        if (g->p.draft) {
            const mr_model *dm = mr_session_model(g->p.draft);
            if (mr_model_n_vocab(dm) != g->n_vocab) {
                mr_set_error("generate: the draft model's vocabulary (%d tokens) differs from the model's (%d)", (int)mr_model_n_vocab(dm), g->n_vocab);
                goto fail;
            }
            /* a DSpark drafter reads states the session keeps from its next evaluation on (the prompt's) */
            if (mr_draft_is_mtp(dm) && mr_model_draft_attach(mr_session_model(s), dm)) goto fail;
        }
        /* rejected drafts are cut from the state: only architectures that can cut it */
        g->spec = mr_session_can_truncate(s) && (!g->p.draft || mr_session_can_truncate(g->p.draft));
        g->cap_hist = 256;
        g->hist = mr_malloc(sizeof(int32_t) * (size_t)g->cap_hist);
        g->dbuf = mr_malloc(sizeof(int32_t) * (size_t)g->p.spec_max);
        if (!g->hist || !g->dbuf) { mr_set_error("generate: out of memory"); goto fail; }
        if (g->p.draft) mr_session_reset(g->p.draft);
    }
    if (g->p.calls) g->schema = mr_jschema_compile_calls(g->p.calls);
    else if (g->p.json_schema) g->schema = mr_jschema_compile(g->p.json_schema, strlen(g->p.json_schema));
    if ((g->p.calls || g->p.json_schema) && !g->schema) goto fail;
    if (g->p.calls && g->p.calls_after && *g->p.calls_after) {
        /* lazy: the vocabulary's text is sorted when the marker first appears */
        if (!(g->lazy = mr_strdup(g->p.calls_after))) { mr_set_error("generate: out of memory"); goto fail; }
    }
    if (g->p.think && think_init(g)) goto fail;
    g->p.think = NULL;
    g->p.json_schema = NULL; /* compiled; the caller's text need not outlive this call */
    g->p.calls = NULL;
    g->p.calls_after = NULL;
    g->constrained = !g->lazy && (g->schema || g->p.json_object);
    if (g->constrained && json_pieces(g)) goto fail;
    js_init(g);
    return g;
fail:
    mr_gen_free(g);
    return NULL;
}

int mr_gen_spec_active(const mr_gen *g) { return g->spec; }

mr_sampler *mr_gen_sampler(mr_gen *g) { return g->smp; }
const float *mr_gen_logits(const mr_gen *g) { return g->have_logits ? g->logits : NULL; }
void mr_gen_get_stats(const mr_gen *g, mr_gen_stats *out) { *out = g->st; }
int mr_gen_n_pending(const mr_gen *g) { return g->n_pending; }

const char *mr_gen_text(const mr_gen *g, size_t *len) {
    if (len) *len = g->text_len;
    return g->text ? g->text : "";
}

int mr_gen_tokens(const mr_gen *g, const int32_t **ids) {
    *ids = g->gen;
    return g->n_gen;
}

void mr_gen_reset(mr_gen *g) {
    g->n_hist = g->draft_past = 0;
    if (g->spec && g->p.draft) mr_session_reset(g->p.draft);
    g->n_pending = 0;
    g->have_logits = 0;
    g->n_gen = 0;
    g->text_len = g->sent = 0;
    g->finish = MR_GEN_RUNNING;
}

static int grow_i32(int32_t **v, int *cap, int need) {
    if (need <= *cap) return 0;
    int c = *cap;
    while (c < need) {
        if (c > 0x3fffffff) { mr_set_error("generate: too many tokens"); return -1; }
        c *= 2;
    }
    int32_t *nv = mr_realloc(*v, sizeof(int32_t) * (size_t)c);
    if (!nv) { mr_set_error("generate: out of memory"); return -1; }
    *v = nv;
    *cap = c;
    return 0;
}

static int hist_add(mr_gen *g, const int32_t *ids, int n) {
    if (!g->hist) return 0;
    if (grow_i32(&g->hist, &g->cap_hist, g->n_hist + n)) return -1;
    memcpy(g->hist + g->n_hist, ids, sizeof(int32_t) * (size_t)n);
    g->n_hist += n;
    return 0;
}

static int text_add(mr_gen *g, const char *p, size_t n) {
    if (g->text_len + n + 1 > g->text_cap) {
        size_t cap = (g->text_len + n + 1) * 2;
        char *t = mr_realloc(g->text, cap);
        if (!t) { mr_set_error("generate: out of memory"); return -1; }
        g->text = t;
        g->text_cap = cap;
    }
    memcpy(g->text + g->text_len, p, n);
    g->text_len += n;
    g->text[g->text_len] = 0;
    return 0;
}

/* Evaluate the pending tokens (one batch); the logits become those of the last one. */
static int eval_pending(mr_gen *g) {
    if (!g->n_pending) return 0;
    if (mr_session_eval(g->s, g->pending, g->n_pending, g->logits, 0)) return -1;
    g->n_pending = 0;
    g->have_logits = 1;
    return 0;
}

int mr_gen_pending(const mr_gen *g, const int32_t **ids) {
    *ids = g->pending;
    return g->n_pending;
}

int mr_gen_set_evaluated(mr_gen *g, const float *logits) {
    if (!g->n_pending) { mr_set_error("generate: no pending tokens"); return -1; }
    memcpy(g->logits, logits, sizeof(float) * (size_t)g->n_vocab);
    g->n_pending = 0;
    g->have_logits = 1;
    g->st.n_decode++;
    return 0;
}

/* The prompt tokens[0..n) are in the session: the sampler and the draft history see them, and a new
 * reply starts. */
static int reply_begin(mr_gen *g, const int32_t *tokens, int n) {
    for (int j = 0; j < n; j++) mr_sampler_accept(g->smp, tokens[j]);
    mr_sampler_begin_reply(g->smp); /* penalties on this reply's tokens start here */
    if (hist_add(g, tokens, n)) return -1;
    g->st.n_prompt += n;
    js_init(g);
    g->js_bad = 0;
    if (g->lazy) g->constrained = g->lazy_off = 0, g->lazy_from = 0;
    g->think_state = !g->think_close ? THINK_NONE : g->think_in_prompt ? THINK_IN : THINK_MAYBE;
    g->think_from = 0;
    g->think_end = 0;
    g->think_force = g->think_state == THINK_IN && g->p.think_budget == 0; /* no reasoning at all */
    g->n_gen = 0;
    g->text_len = g->sent = 0;
    g->finish = MR_GEN_RUNNING;
    return 0;
}

int mr_gen_prefill_evaluated(mr_gen *g, const int32_t *tokens, int n, const float *logits) {
    if (n <= 0 || g->n_pending) { mr_set_error("generate: an evaluated prompt needs tokens and no pending ones"); return -1; }
    memcpy(g->logits, logits, sizeof(float) * (size_t)g->n_vocab);
    g->have_logits = 1;
    return reply_begin(g, tokens, n);
}

int mr_gen_prefill(mr_gen *g, const int32_t *tokens, int n) {
    if (n < 0 || (n == 0 && !g->n_pending && !g->have_logits)) { mr_set_error("generate: nothing to evaluate"); return -1; }
    const int n_past = mr_session_n_past(g->s), n_ctx = mr_session_n_ctx(g->s);
    if ((int64_t)n_past + g->n_pending + n >= n_ctx) {
        mr_set_error("the prompt (%d tokens after %d) does not fit the context (%d)", n + g->n_pending, n_past, n_ctx);
        return -1;
    }
    double t0 = mr_now();
    /* pending tokens of the previous reply (a chat's next turn) go first: one sequence */
    const int32_t *seq = tokens;
    const int total = g->n_pending + n;
    if (g->n_pending) {
        if (grow_i32(&g->pending, &g->cap_pending, total)) return -1;
        memcpy(g->pending + g->n_pending, tokens, sizeof(int32_t) * (size_t)n);
        seq = g->pending;
    }
    if (g->p.progress && g->p.progress(g->p.user, 0, total)) return 1;
    for (int done = 0; done < total;) {
        int k = total - done < g->p.n_batch ? total - done : g->p.n_batch;
        if (mr_session_eval(g->s, seq + done, k, g->logits, 0)) { g->n_pending = 0; return -1; }
        g->have_logits = 1;
        done += k;
        if (done >= g->n_pending) g->n_pending = 0; /* they are in the session now */
        if (g->p.progress && g->p.progress(g->p.user, done, total)) {
            /* the chunks evaluated so far stay in the session (mr_session_n_past); the sampler saw
             * none of them */
            g->n_pending = 0;
            g->st.prefill_s += mr_now() - t0;
            return 1;
        }
    }
    g->st.prefill_s += mr_now() - t0;
    return reply_begin(g, tokens, n);
}

/* Bytes of s[0..n) that end on a whole UTF-8 character (an incomplete tail waits for more bytes). */
static size_t utf8_complete(const char *s, size_t n) {
    size_t i = n;
    for (int back = 0; back < 4 && i > 0; back++) {
        unsigned char c = (unsigned char)s[i - 1];
        if ((c & 0xc0) != 0x80) { /* lead or ASCII byte at i-1 */
            size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
            return n - (i - 1) >= need ? n : i - 1;
        }
        i--;
    }
    return n; /* more than 3 continuation bytes: not UTF-8, nothing to wait for */
}

/* Longest suffix of the unsent text that is a proper prefix of a stop string (held back). */
static size_t stop_holdback(const mr_gen *g) {
    size_t hold = 0, avail = g->text_len - g->sent;
    for (int k = 0; k < g->n_stop; k++)
        for (size_t l = g->stop_len[k] - 1 < avail ? g->stop_len[k] - 1 : avail; l > hold; l--)
            if (!memcmp(g->text + g->text_len - l, g->stop[k], l)) { hold = l; break; }
    return hold;
}

static void step_text(mr_gen *g, mr_gen_step *out) {
    size_t ready = g->text_len;
    if (!g->finish) {
        ready = utf8_complete(g->text ? g->text : "", g->text_len);
        size_t hold = stop_holdback(g);
        if (g->text_len - hold < ready) ready = g->text_len - hold;
        if (ready < g->sent) ready = g->sent;
    }
    out->text = g->text ? g->text + g->sent : "";
    out->len = ready - g->sent;
    g->sent = ready;
}

/* calls_after: the marker in the reply's text starts the constraint, the text after it fed to the
 * call's recogniser (a call that cannot start so leaves the reply free). 1 when it started, 0 not
 * (yet), -1 error. */
static int lazy_start(mr_gen *g) {
    const size_t ml = strlen(g->lazy);
    const char *at = g->text_len >= g->lazy_from + ml ? memmem(g->text + g->lazy_from, g->text_len - g->lazy_from, g->lazy, ml) : NULL;
    if (!at) {
        if (g->text_len >= ml) g->lazy_from = g->text_len - ml + 1; /* a marker may still end in later text */
        return 0;
    }
    const size_t after = (size_t)(at - g->text) + ml;
    js_init(g);
    if (mr_jsonp_feed(&g->js, g->text + after, g->text_len - after)) {
        g->lazy_off = 1;
        return 0;
    }
    if (!g->pieces && json_pieces(g)) return -1;
    g->constrained = 1;
    if (mr_jsonp_closed(&g->js)) g->finish = MR_GEN_EOG;
    return 1;
}

/* Thinking: where the reply is after its newest text. The reasoning starts at the open marker (or
 * at once when the prompt opened it) and ends at the close marker; a budget spent inside it asks the
 * next step to put the close marker in (think_force). */
static void think_update(mr_gen *g) {
    if (g->think_state == THINK_MAYBE) {
        size_t at = 0;
        while (at < g->text_len && (g->text[at] == ' ' || g->text[at] == '\n' || g->text[at] == '\r' || g->text[at] == '\t')) at++;
        const size_t ol = strlen(g->think_open), n = g->text_len - at;
        if (n >= ol && !memcmp(g->text + at, g->think_open, ol)) {
            g->think_state = THINK_IN;
            g->think_from = g->n_gen;
            g->think_end = at + ol;
        } else if (!memcmp(g->text + at, g->think_open, n)) return; /* may still open */
        else { g->think_state = THINK_NONE; return; }
    }
    if (g->think_state != THINK_IN && g->think_state != THINK_FORCING) return;
    const size_t cl = strlen(g->think_close);
    const char *q = g->text_len >= g->think_end + cl ? memmem(g->text + g->think_end, g->text_len - g->think_end, g->think_close, cl) : NULL;
    if (q) {
        g->think_state = THINK_NONE;
        g->think_force = 0;
        g->think_end = (size_t)(q - g->text) + cl;
        if (g->lazy_from < g->think_end) g->lazy_from = g->think_end; /* calls only after the reasoning */
        return;
    }
    if (g->think_state == THINK_IN && g->p.think_budget >= 0 && g->n_gen - g->think_from >= g->p.think_budget) g->think_force = 1;
}

/* Take one token into the reply (pending evaluation): text, stop strings, limits. Returns 1 if it
 * was taken, 0 if it ended the reply without being taken (an end-of-generation token), -1 on error.
 * g->finish says whether the reply goes on. */
static int accept_one(mr_gen *g, int32_t id) {
    if (id < 0 || id >= g->n_vocab) { mr_set_error("generate: token id %d out of range", id); return -1; }
    if (!g->p.ignore_eos && mr_tokenizer_is_eog(g->tok, id)) { g->finish = MR_GEN_EOG; return 0; }
    if (grow_i32(&g->pending, &g->cap_pending, g->n_pending + 1) || grow_i32(&g->gen, &g->cap_gen, g->n_gen + 1)) return -1;
    if (hist_add(g, &id, 1)) return -1;
    g->pending[g->n_pending++] = id;
    g->gen[g->n_gen++] = id;
    mr_sampler_accept(g->smp, id);
    g->st.n_gen++;
    char piece[256];
    int pl = mr_token_to_piece(g->tok, id, piece, sizeof piece, g->p.special_text);
    if (pl < 0 && pl != INT_MIN) { /* a piece longer than the stack buffer */
        char *big = mr_malloc((size_t)-pl);
        if (!big) { mr_set_error("generate: out of memory"); return -1; }
        int bl = mr_token_to_piece(g->tok, id, big, -pl, g->p.special_text);
        int rc = bl > 0 ? text_add(g, big, (size_t)bl) : 0;
        free(big);
        if (rc) return -1;
    } else if (pl > 0 && text_add(g, piece, (size_t)pl)) return -1;
    for (int k = 0; k < g->n_stop; k++) {
        /* a match starts in the unsent text (sent text never ends with a stop-string prefix) */
        const char *hit = memmem(g->text + g->sent, g->text_len - g->sent, g->stop[k], g->stop_len[k]);
        if (hit && (size_t)(hit - g->text) < g->text_len) {
            g->text_len = (size_t)(hit - g->text);
            g->text[g->text_len] = 0;
            g->finish = MR_GEN_STOP;
        }
    }
    if (g->think_state != THINK_NONE) think_update(g);
    int fed = 0;
    if (g->lazy && !g->constrained && !g->lazy_off && !g->finish && g->think_state == THINK_NONE) {
        if ((fed = lazy_start(g)) < 0) return -1;
    }
    if (g->constrained && !g->js_bad && !fed) { /* the value is whole and cannot go on: the reply ends here */
        const uint32_t o = g->poff[id];
        if (mr_jsonp_feed(&g->js, g->pieces + o, g->poff[id + 1] - o)) g->js_bad = 1;
        else if (!g->finish && mr_jsonp_closed(&g->js)) g->finish = MR_GEN_EOG;
    }
    if (g->finish) return 1;
    if (g->p.max_tokens >= 0 && g->n_gen >= g->p.max_tokens) g->finish = MR_GEN_LENGTH;
    /* the accepted tokens must still fit the context when they are evaluated */
    else if (mr_session_n_past(g->s) - g->spec_extra + g->n_pending >= mr_session_n_ctx(g->s)) g->finish = MR_GEN_CONTEXT;
    return 1;
}

int mr_gen_accept(mr_gen *g, const int32_t *ids, int n, mr_gen_step *out) {
    memset(out, 0, sizeof *out);
    if (g->finish) { out->finish = g->finish; return 0; }
    int taken = 0;
    while (taken < n && !g->finish) {
        int r = accept_one(g, ids[taken]);
        if (r < 0) return -1;
        taken += r;
    }
    out->n_accepted = taken;
    out->finish = g->finish;
    step_text(g, out);
    return 0;
}

void mr_gen_stop(mr_gen *g, mr_gen_step *out) {
    memset(out, 0, sizeof *out);
    if (!g->finish) g->finish = MR_GEN_ABORTED;
    out->finish = g->finish;
    step_text(g, out);
}

/* Draft tokens to follow the pending ones, limited so that the draft and one more token fit the
 * context and max_tokens. Returns how many were written to g->dbuf, -1 on error. */
static int make_draft(mr_gen *g) {
    int kmax = g->spec_k > 0 ? g->spec_k : g->p.spec_max;
    if (kmax < g->p.spec_min) kmax = g->p.spec_min; /* the adaptive length never goes below spec_min */
    const int room = mr_session_n_ctx(g->s) - (mr_session_n_past(g->s) + g->n_pending) - 1;
    if (kmax > room) kmax = room;
    if (g->p.max_tokens >= 0 && kmax > g->p.max_tokens - g->n_gen - 1) kmax = g->p.max_tokens - g->n_gen - 1;
    if (kmax <= 0 || kmax < g->p.spec_min) return 0;
    int k;
    if (g->p.draft_fn) {
        k = g->p.draft_fn(g->p.draft_user, g->hist, g->n_hist, kmax, g->dbuf);
        k = k < 0 ? 0 : k > kmax ? kmax : k;
    } else if (g->p.mtp || (g->p.draft && mr_draft_is_mtp(mr_session_model(g->p.draft)))) {
        /* the block drafts after the one pending token (the trunk's state holds everything before it) */
        k = g->n_pending == 1 ? mr_session_mtp_draft(g->s, g->p.mtp ? NULL : g->p.draft, g->pending[0], kmax, g->dbuf, NULL) : 0;
    } else if (!g->p.draft) {
        k = mr_draft_ngram(g->hist, g->n_hist, g->p.spec_ngram, g->p.spec_ngram_min, kmax, g->dbuf);
    } else {
        k = mr_draft_model(g->p.draft, g->hist, g->n_hist, &g->draft_past, g->p.n_batch, kmax, g->dbuf);
    }
    return k > 0 && k < g->p.spec_min ? 0 : k; /* too short to be worth a verification */
}

/* A speculative step in two halves around the evaluation. spec_prepare puts the pending tokens and
 * the k drafts of g->dbuf into one batch (g->vbatch, np + k tokens: every layer reads its experts once
 * for all of them); the caller evaluates it with the logits of its last k + 1 tokens in g->vlogits
 * ([k + 1][n_vocab]: row i is the position before draft i, row k the one after the last draft).
 * spec_verify then walks the drafts: draft i is checked against row i (mr_sampler_verify); the first
 * rejection emits the verifier's own token, and if every draft is accepted row k gives one more. The
 * state is cut back to what plain decoding would hold: everything accepted but the last token, which
 * stays pending. */
static int spec_prepare(mr_gen *g, int k) {
    const int np = g->n_pending, n = np + k;
    const size_t V = (size_t)g->n_vocab;
    if (n > g->cap_vbatch) {
        int32_t *b = mr_realloc(g->vbatch, sizeof(int32_t) * (size_t)n);
        if (b) g->vbatch = b;
        float *l = b ? mr_realloc(g->vlogits, sizeof(float) * V * (size_t)(n + 1)) : NULL;
        if (!b || !l) { mr_set_error("generate: out of memory for %d verification rows", n); return -1; }
        g->vlogits = l;
        g->cap_vbatch = n;
    }
    memcpy(g->vbatch, g->pending, sizeof(int32_t) * (size_t)np);
    memcpy(g->vbatch + np, g->dbuf, sizeof(int32_t) * (size_t)k);
    g->spec_np = np;
    g->spec_k_now = k;
    g->spec_past0 = mr_session_n_past(g->s);
    return n;
}

static int spec_verify(mr_gen *g, mr_gen_step *out) {
    const int np = g->spec_np, k = g->spec_k_now;
    const size_t V = (size_t)g->n_vocab;
    g->n_pending = 0;
    g->st.n_decode++;
    g->st.n_spec_steps++;
    g->st.n_drafted += k;
    int taken = 0, nacc = 0;
    g->spec_extra = k;
    for (int i = 0; i <= k && !g->finish; i++) {
        float *row = g->vlogits + V * (size_t)i;
        for (int e = 0; e < g->n_eog; e++) row[g->eog[e]] = -INFINITY; /* ignore_eos */
        if (g->constrained && json_mask(g, row)) { g->finish = MR_GEN_LENGTH; break; }
        int acc = 0;
        int32_t id = i < k ? mr_sampler_verify(g->smp, row, g->dbuf[i], &acc) : mr_sampler_sample(g->smp, row);
        if (id < 0) { g->spec_extra = 0; return -1; }
        int r = accept_one(g, id);
        if (r < 0) { g->spec_extra = 0; return -1; }
        taken += r;
        if (!acc || g->think_force) break; /* the budget is spent: the close marker comes next */
        g->st.n_draft_accepted++;
        nacc++;
    }
    g->spec_extra = 0;
    /* a rejected draft costs verification work for nothing: after one, draft only as far as drafts
     * were accepted (plus one); after a fully accepted draft, try twice as far */
    g->spec_k = nacc == k ? (2 * k < g->p.spec_max ? 2 * k : g->p.spec_max) : nacc + 1;
    const int keep = taken > 0 ? taken - 1 : 0; /* accepted drafts that stay evaluated */
    if (mr_session_truncate(g->s, g->spec_past0 + np + keep)) return -1;
    memcpy(g->logits, g->vlogits + V * (size_t)keep, sizeof(float) * V);
    g->have_logits = 1;
    if (taken > 0) { g->pending[0] = g->pending[g->n_pending - 1]; g->n_pending = 1; }
    out->n_accepted = taken;
    out->finish = g->finish;
    step_text(g, out);
    return 0;
}

/* The draft of this step (0: none, plain decoding), after the checks that allow one. */
static int step_draft(mr_gen *g) {
    if (!g->spec || !g->n_pending || g->p.max_tokens == 0 || g->finish || g->think_force) return 0;
    return make_draft(g);
}

int mr_gen_batch(mr_gen *g, const int32_t **ids, float **rows, int *n_rows) {
    g->batch_spec = 0;
    *ids = g->pending;
    *rows = g->logits;
    *n_rows = g->n_pending ? 1 : 0;
    if (g->finish) { *n_rows = 0; return 0; }
    int k = step_draft(g);
    if (k < 0) return -1;
    if (k == 0) return g->n_pending;
    int n = spec_prepare(g, k);
    if (n < 0) return -1;
    g->batch_spec = 1;
    *ids = g->vbatch;
    *rows = g->vlogits;
    *n_rows = k + 1;
    return n;
}

int mr_gen_batch_done(mr_gen *g, mr_gen_step *out) {
    if (!g->batch_spec) {
        if (g->n_pending) { /* the caller evaluated them: their last row is in g->logits */
            g->n_pending = 0;
            g->have_logits = 1;
            g->st.n_decode++;
        }
        return mr_gen_next(g, out);
    }
    memset(out, 0, sizeof *out);
    g->batch_spec = 0;
    double t0 = mr_now();
    int rc = spec_verify(g, out);
    g->st.decode_s += mr_now() - t0;
    return rc;
}

int mr_gen_next(mr_gen *g, mr_gen_step *out) {
    memset(out, 0, sizeof *out);
    if (g->finish) { out->finish = g->finish; return 0; }
    if (g->think_force) { /* the reasoning's budget is spent: its close marker, then the answer */
        g->think_force = 0;
        g->think_state = THINK_FORCING;
        return mr_gen_accept(g, g->think_ids, g->n_think_ids, out);
    }
    double t0 = mr_now();
    int k = step_draft(g);
    if (k < 0) return -1;
    if (k > 0) {
        const int n = spec_prepare(g, k);
        int rc = n < 0 ? -1 : mr_session_eval(g->s, g->vbatch, n, g->vlogits, 1);
        /* all_logits gives [n][n_vocab]; the verification rows are the last k + 1 of them */
        if (!rc && n > k + 1) memmove(g->vlogits, g->vlogits + (size_t)g->n_vocab * (size_t)(n - k - 1), sizeof(float) * (size_t)g->n_vocab * (size_t)(k + 1));
        if (!rc) rc = spec_verify(g, out);
        g->st.decode_s += mr_now() - t0;
        return rc;
    }
    if (g->n_pending) {
        if (eval_pending(g)) return -1;
        g->st.n_decode++;
    }
    if (!g->have_logits) { mr_set_error("generate: no logits (prefill first)"); return -1; }
    if (g->p.max_tokens == 0) {
        g->finish = MR_GEN_LENGTH;
        out->finish = g->finish;
        return 0;
    }
    const float *lg = g->logits;
    for (int i = 0; i < g->n_eog; i++) g->logits[g->eog[i]] = -INFINITY; /* ignore_eos */
    if (g->constrained && json_mask(g, g->logits)) { /* nothing can continue the object */
        g->finish = MR_GEN_LENGTH;
        out->finish = g->finish;
        step_text(g, out);
        return 0;
    }
    int32_t id = mr_sampler_sample(g->smp, lg);
    if (id < 0) return -1;
    int rc = mr_gen_accept(g, &id, 1, out);
    g->st.decode_s += mr_now() - t0;
    return rc;
}
