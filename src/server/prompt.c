/* Prompts (prompt.h): tokenizing, rendering the conversation, the forced start of a tool call, and
 * the slots' prompt caches. */
#include "server/prompt.h"
#include "base/base.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int srv_tokenize(const srv_conf *cf, const char *text, int add_special, int32_t **out) {
    int n = mr_tokenize(cf->tok, text, strlen(text), add_special, 1, NULL, 0);
    if (n == INT_MIN) return -1;
    int need = n < 0 ? -n : n;
    *out = mr_malloc(sizeof(int32_t) * (size_t)(need + 1));
    if (!*out) { mr_set_error("out of memory"); return -1; }
    n = mr_tokenize(cf->tok, text, strlen(text), add_special, 1, *out, need + 1);
    if (n < 0) { free(*out); *out = NULL; if (n != INT_MIN) mr_set_error("tokenize: size changed"); return -1; }
    return n;
}

int srv_chat_opts(const srv_conf *cf, const srv_req *q, mr_chat_opts *o, mr_chat_think *t) {
    *o = (mr_chat_opts){.thinking = q->thinking, .effort = q->effort, .keep_reasoning = q->keep_reasoning};
    const int constrained = q->tool_choice == SRV_TOOLS_REQUIRED || q->tool_choice == SRV_TOOLS_NAMED || q->json_object || q->json_schema;
    if (!constrained) return mr_chat_thinking(cf->m, cf->tmpl, o, t);
    if (o->thinking > 0 || (mr_chat_thinking(cf->m, cf->tmpl, o, t) && t->in_prompt)) o->thinking = 0;
    return 0;
}

char *srv_render_chat(const srv_conf *cf, const srv_req *q, int add_assistant) {
    const char *const *tools = (const char *const *)q->tools;
    mr_chat_opts o;
    mr_chat_think t;
    srv_chat_opts(cf, q, &o, &t);
    int len = mr_chat_render_opts(cf->m, cf->tmpl, q->msgs, q->n_msgs, tools, q->n_tools, &o, add_assistant, NULL, 0);
    if (len < 0) return NULL;
    char *out = mr_malloc((size_t)len + 1);
    if (!out) { mr_set_error("out of memory"); return NULL; }
    mr_chat_render_opts(cf->m, cf->tmpl, q->msgs, q->n_msgs, tools, q->n_tools, &o, add_assistant, out, len + 1);
    return out;
}

/* completions: the prompt text, or its token ids checked against the vocabulary */
static int completion_prompt(const srv_conf *cf, const srv_req *q, int32_t **toks) {
    if (q->prompt) return srv_tokenize(cf, q->prompt, 1, toks);
    for (int i = 0; i < q->n_prompt_ids; i++)
        if (q->prompt_ids[i] >= cf->n_vocab) { mr_set_error("'prompt' has token id %d, beyond the vocabulary (%d)", q->prompt_ids[i], cf->n_vocab); return -1; }
    *toks = mr_malloc(sizeof(int32_t) * (size_t)(q->n_prompt_ids + 1));
    if (!*toks) { mr_set_error("out of memory"); return -1; }
    memcpy(*toks, q->prompt_ids, sizeof(int32_t) * (size_t)q->n_prompt_ids);
    return q->n_prompt_ids;
}

/* 1 if the tokenizer adds a BOS before text (srv_prompt_build: not when the template starts with it) */
static int add_bos(const srv_conf *cf, const char *text) {
    int32_t bos = mr_tokenizer_bos(cf->tok);
    const char *bos_text = bos >= 0 ? mr_token_text(cf->tok, bos) : NULL;
    return !(bos_text && *bos_text && !strncmp(text, bos_text, strlen(bos_text)));
}

int srv_prompt_build(const srv_conf *cf, const srv_req *q, char **forced, int32_t **toks) {
    if (q->api == SRV_API_COMPLETIONS) return completion_prompt(cf, q, toks);
    char *text = srv_render_chat(cf, q, 1);
    if (!text) return -1;
    if (q->tool_choice == SRV_TOOLS_REQUIRED || q->tool_choice == SRV_TOOLS_NAMED) {
        /* a forced call: the prompt ends with the start of the template's calls, and the reply is
         * constrained to one call of the allowed functions (complete.c) */
        mr_chat_call_format f;
        if (mr_chat_tool_call_format(cf->m, cf->tmpl, &f)) { free(text); return -1; }
        char *fo = mr_strdup(f.forced);
        char *t2 = fo ? mr_malloc(strlen(text) + strlen(fo) + 1) : NULL;
        if (!t2) { free(fo); free(text); mr_set_error("out of memory"); return -1; }
        strcpy(t2, text);
        strcat(t2, fo);
        free(text);
        text = t2;
        *forced = fo;
    }
    /* the template may already start with the BOS text; do not add a second one */
    int n = srv_tokenize(cf, text, add_bos(cf, text), toks);
    free(text);
    return n;
}

/* The bytes the tokens spell (special tokens as their text) into *text; end[i]: the byte offset
 * where token i ends. 0, or -1 when out of memory or a piece cannot be rendered. */
static int token_text(const srv_conf *cf, const int32_t *toks, int n, mr_sbuf *text, size_t *end) {
    char piece[512];
    for (int i = 0; i < n; i++) {
        int k = mr_token_to_piece(cf->tok, toks[i], piece, sizeof piece, 1);
        if (k < 0) return -1;
        mr_sbuf_add(text, piece, (size_t)k);
        end[i] = text->n;
    }
    return text->oom ? -1 : 0;
}

/* the token count whose text ends at byte `at` (end[] ascending), or -1 */
static int token_at(const size_t *end, int n, size_t at) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (end[mid] == at) return mid + 1;
        if (end[mid] < at) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

/* The token count after which the prompt toks[0..n) holds exactly the text part (len bytes), or -1:
 * from the tokens' text when it spells the template's text from byte *shift on (found with the first
 * part: after a BOS the tokenizer added and an SPM dummy-prefix space, if any); otherwise, when
 * tokenize is set, by tokenizing part and comparing. */
static int part_end(const srv_conf *cf, const int32_t *toks, int n, const mr_sbuf *text, const size_t *end, int *shift,
                    const char *part, size_t len, int tokenize) {
    const size_t b0 = toks[0] == mr_tokenizer_bos(cf->tok) ? end[0] : 0;
    const size_t starts[4] = {0, 1, b0, b0 + 1};
    for (int i = 0; i < 4 && *shift < 0; i++)
        if (starts[i] + len <= text->n && !memcmp(part, text->p + starts[i], len)) *shift = (int)starts[i];
    if (*shift >= 0 && (size_t)*shift + len <= text->n && !memcmp(part, text->p + *shift, len)) {
        int at = token_at(end, n, len + (size_t)*shift);
        if (at > 0) return at;
    }
    if (!tokenize) return -1;
    int32_t *ids = NULL;
    int m = srv_tokenize(cf, part, add_bos(cf, part), &ids);
    int at = m > 0 && m <= n && !memcmp(ids, toks, sizeof(int32_t) * (size_t)m) ? m : -1;
    free(ids);
    return at;
}

int srv_prompt_marks(const srv_conf *cf, const srv_req *q, const int32_t *toks, int n, int *marks, int max) {
    if (q->api == SRV_API_COMPLETIONS || q->n_msgs < 1 || n < 2 || max < 1) return 0;
    size_t *end = mr_malloc(sizeof *end * (size_t)n);
    mr_sbuf text = {0};
    int nm = 0, shift = -1;
    if (!end || token_text(cf, toks, n, &text, end)) goto done;
    const char *const *tools = (const char *const *)q->tools;
    mr_chat_opts o;
    mr_chat_think t;
    srv_chat_opts(cf, q, &o, &t);
    char *part = NULL;
    for (int k = 1; k <= q->n_msgs && nm < max; k++) {
        int len = mr_chat_render_opts(cf->m, cf->tmpl, q->msgs, k, tools, q->n_tools, &o, 0, NULL, 0);
        if (len <= 0 || (size_t)len >= text.n + 2) continue;
        char *np = mr_realloc(part, (size_t)len + 1);
        if (!np) break;
        part = np;
        mr_chat_render_opts(cf->m, cf->tmpl, q->msgs, k, tools, q->n_tools, &o, 0, part, len + 1);
        /* tokenizing a prefix costs about what the prompt's tokenization did: only for the end of the
         * system prompt and the last messages (the earlier ones were the last of earlier requests) */
        int at = part_end(cf, toks, n, &text, end, &shift, part, (size_t)len, k == 1 || k > q->n_msgs - 4);
        if (at > 0 && at < n && (nm == 0 || at > marks[nm - 1])) marks[nm++] = at;
    }
    free(part);
done:
    free(end);
    mr_sbuf_free(&text);
    return nm;
}

int srv_cache_reuse(srv_slot *sl, const int32_t *prompt, int n_prompt) {
    int reuse = 0;
    while (reuse < sl->n_cache && reuse < n_prompt - 1 && sl->cache[reuse] == prompt[reuse]) reuse++;
    if (reuse < sl->n_cache && mr_session_truncate(sl->s, reuse) != 0) reuse = 0;
    if (!reuse) mr_session_reset(sl->s);
    sl->n_cache = reuse;
    return reuse;
}

void srv_cache_prompt(srv_slot *sl, const int32_t *prompt, int reuse, int n_past) {
    sl->n_cache = n_past;
    memcpy(sl->cache + reuse, prompt + reuse, sizeof(int32_t) * (size_t)(n_past - reuse));
}

void srv_cache_reply(srv_slot *sl, int n_prompt, const int32_t *ids, int ng) {
    int n_past = mr_session_n_past(sl->s);
    for (int k = n_prompt; k < n_past && k - n_prompt < ng; k++) sl->cache[k] = ids[k - n_prompt];
    sl->n_cache = n_past;
}

void srv_cache_forget(srv_slot *sl) {
    mr_session_reset(sl->s);
    sl->n_cache = 0;
}
