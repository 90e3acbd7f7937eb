/* A request's run: the prompt (re-using the longest prefix the slot already holds, prompt.c), n
 * choices generated with the generation API on a slot of the scheduler (sched.h), the request's
 * parameters mapped onto the generation's, logprobs, tool calls parsed back from the reply; the
 * answer is written by the API's writer (reply.h), which this file drives without knowing the API. */
#include "server/complete.h"
#include "server/prompt.h"
#include "server/reply.h"
#include "server/responses.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define SRV_MAX_CALLS 32

typedef struct {
    const srv_conf *cf;
    srv_sched *sc;
    srv_slot *slot;
    float *blog;                 /* [n_vocab]: logits of a prompt's last token evaluated in a batched step */
    mr_http_req *r;
    const srv_req *q;
    const char *marker;          /* tool-call marker when tool calls are parsed, else NULL */
    const char *forced;          /* text the reply starts with (tool_choice), part of the prompt */
    mr_gen_calls calls;          /* the call the reply is held to (n 0: none): from the first byte
                                  * (tool_choice required / named) or after the marker (auto) */
    const char *calls_after;     /* auto: the template's call marker */
    char lazy_prefix[128];       /* auto: the call's prefix, from the byte after the marker */
    const char *call_names[SRV_MAX_TOOLS], *call_schemas[SRV_MAX_TOOLS];
    int thinks;                  /* the reply may hold reasoning, as think says (srv_chat_opts) */
    mr_chat_think think;
    int *marks, n_marks;         /* the template's message boundaries in the prompt (srv_prompt_marks) */
    mr_sbuf reply;               /* the choice being generated: forced + generated text */
    size_t sent;                 /* bytes of reply already given to the writer */
    size_t r_sent;               /* bytes of its reasoning already given to the writer */
    srv_reply w;                 /* the API's writer and the reply's totals */
} cctx;

static int piece_of(const srv_conf *cf, int32_t id, char *buf, int size) {
    int n = mr_token_to_piece(cf->tok, id, buf, size, 1);
    return n > 0 ? n : 0;
}

/* log-softmax of the logits the token was sampled from (the model's distribution, before
 * temperature and truncation), for the chosen token and the top alternatives */
static void lp_add(cctx *c, const float *logits, int32_t id) {
    const int V = c->cf->n_vocab, k = c->q->top_logprobs;
    float mx = -INFINITY;
    for (int i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0;
    for (int i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    const double lse = mx + log(sum);
    int top[SRV_MAX_TOP_LOGPROBS];
    int nt = 0;
    for (int i = 0; k > 0 && i < V; i++) { /* insertion into the k best, ties to the lower id (none when k is 0) */
        if (nt == k && !(logits[i] > logits[top[nt - 1]])) continue;
        int j = nt < k ? nt++ : nt - 1;
        while (j > 0 && logits[i] > logits[top[j - 1]]) { top[j] = top[j - 1]; j--; }
        top[j] = i;
    }
    srv_logprob lp;
    lp.tok.len = piece_of(c->cf, id, lp.tok.piece, sizeof lp.tok.piece);
    lp.tok.logprob = logits[id] - lse;
    lp.n_top = nt;
    for (int t = 0; t < nt; t++) {
        lp.top[t].len = piece_of(c->cf, top[t], lp.top[t].piece, sizeof lp.top[t].piece);
        lp.top[t].logprob = logits[top[t]] - lse;
    }
    c->w.w->logprob(&c->w, &lp);
}

/* Thinking: the reply's reasoning that is final given to the writer (dropped by an API without a
 * place for it); *sp says where the answer starts (the reply's length while there is none yet). */
static void flush_reasoning(cctx *c, int final, mr_chat_split *sp) {
    const char *t = c->reply.p ? c->reply.p : "";
    mr_chat_split_reasoning(&c->think, t, c->reply.n, final, sp);
    if (sp->r_len > c->r_sent && c->w.w->reasoning) c->w.w->reasoning(&c->w, t + sp->r_off + c->r_sent, sp->r_len - c->r_sent);
    if (sp->r_len > c->r_sent) c->r_sent = sp->r_len;
    if (c->sent < sp->c_off) c->sent = sp->c_off; /* the answer is given from its start on */
}

/* Gives the writer the reply text that is final: reasoning apart from the answer, and of the answer
 * never the tool-call marker, a suffix that may grow into it, or the newlines that may turn out to
 * separate the calls from the content. */
static void flush(cctx *c) {
    const char *t = c->reply.p ? c->reply.p : "";
    size_t len = c->reply.n, safe = len, base = 0;
    if (c->thinks) {
        mr_chat_split sp;
        flush_reasoning(c, 0, &sp);
        if (sp.c_off >= len) return; /* no answer yet */
        base = sp.c_off;
    }
    if (c->marker) {
        size_t ml = strlen(c->marker);
        const char *at = memmem(t + base, len - base, c->marker, ml);
        if (at) safe = (size_t)(at - t);
        else
            for (size_t l = ml - 1 < len - base ? ml - 1 : len - base; l > 0; l--)
                if (!memcmp(t + len - l, c->marker, l)) { safe = len - l; break; }
        while (safe > c->sent && t[safe - 1] == '\n') safe--;
    }
    if (safe > c->sent) {
        c->w.w->delta(&c->w, t + c->sent, safe - c->sent);
        c->sent = safe;
    }
}

/* ---- one choice ---- */

/* Between prefill chunks (architectures without batched steps): the model goes to whoever waits
 * (other slots' decode steps), the stream gets a keep-alive comment, a client that left ends the
 * prefill. */
static int on_prefill(void *user, int done, int total) {
    cctx *c = user;
    if (done == 0 || done >= total) return mr_http_client_gone(c->r);
    srv_model_unlock(c->sc);
    if (c->r->streaming) mr_http_sse_comment(c->r, "prefill");
    int gone = mr_http_client_gone(c->r);
    srv_model_lock(c->sc);
    return gone;
}

/* The end of a choice: tool calls parsed from the reply, the rest of the text, the calls and the
 * end given to the writer. */
static void choice_end(cctx *c, int finish) {
    mr_chat_tool_call calls[SRV_MAX_CALLS];
    size_t content_len = c->reply.n, base = 0;
    int n_calls = 0;
    if (c->thinks) { /* the rest of the reasoning; the answer (and its calls) after it */
        mr_chat_split sp;
        flush_reasoning(c, 1, &sp);
        base = sp.c_off;
    }
    if (c->marker) {
        n_calls = mr_chat_parse_tool_calls(c->cf->m, c->cf->tmpl, (c->reply.p ? c->reply.p : "") + base, c->reply.n - base,
                                           &content_len, calls, SRV_MAX_CALLS);
        content_len += base;
        if (n_calls < 0) { n_calls = 0; content_len = c->reply.n; } /* malformed: all of it is text */
        if (n_calls > 1 && !c->q->parallel_calls) { /* parallel_tool_calls false: the first call only */
            mr_chat_tool_calls_free(calls + 1, n_calls - 1);
            n_calls = 1;
        }
    }
    const char *text = c->reply.p ? c->reply.p : "";
    if (content_len > c->sent) c->w.w->delta(&c->w, text + c->sent, content_len - c->sent);
    c->sent = content_len;
    if (n_calls) c->w.w->tool_calls(&c->w, calls, n_calls);
    c->w.w->choice_end(&c->w, finish, n_calls);
    mr_chat_tool_calls_free(calls, n_calls);
}

/* Prompt tokens [from, to) through the batched steps, a piece per step beside the other slots'
 * decode tokens (c->blog gets the last one's logits). A streamed reply gets a keep-alive comment at
 * most once a second; a client that left ends the prefill between pieces. 0 done, 1 the client
 * left, -1 error. */
static int span_batched(cctx *c, const int32_t *prompt, int from, int to) {
    double t_comment = mr_now();
    for (int done = from; done < to;) {
        if (mr_http_client_gone(c->r)) return 1;
        int k = srv_batch_prompt(c->sc, c->slot, prompt + done, to - done, c->blog);
        if (k < 0) return -1;
        done += k;
        if (done < to && c->r->streaming && mr_now() - t_comment >= 1.0) {
            mr_http_sse_comment(c->r, "prefill");
            t_comment = mr_now();
        }
    }
    return 0;
}

/* The same without batched steps: the model taken for chunks of the span, handed to whoever waits
 * between them (on_prefill). */
static int span_unbatched(cctx *c, const int32_t *prompt, int from, int to) {
    const int chunk = c->cf->n_slots > 1 ? 128 : 512;
    int rc = 0;
    srv_model_lock(c->sc);
    for (int done = from; done < to && rc == 0;) {
        int k = to - done < chunk ? to - done : chunk;
        if (mr_session_eval(c->slot->s, prompt + done, k, c->blog, 0)) rc = -1;
        else if ((done += k) < to && on_prefill(c, done, to)) rc = 1;
    }
    srv_model_unlock(c->sc);
    return rc;
}

/* The next position in (from, n) where the prompt cache takes a snapshot: a message boundary of the
 * template, a multiple of cache_every, or where the prompt diverged from the slot's history; 0 if none. */
static int next_mark(const cctx *c, int from, int n, int diverge) {
    int p = (from / c->cf->cache_every + 1) * c->cf->cache_every;
    for (int i = 0; i < c->n_marks; i++)
        if (c->marks[i] > from) { p = c->marks[i] < p ? c->marks[i] : p; break; }
    if (diverge > from && diverge < p) p = diverge;
    return p < n ? p : 0;
}

/* The request's parameters as the generation's, for choice c->w.choice. */
static void gen_params(cctx *c, mr_gen_params *gp) {
    const srv_req *q = c->q;
    mr_gen_params_default(gp);
    gp->sampler = q->sp;
    gp->sampler.seed = c->w.seed + (uint64_t)c->w.choice;
    gp->max_tokens = q->max_tokens;
    gp->stop = q->stop;
    gp->n_stop = q->n_stop;
    gp->progress = on_prefill;
    gp->user = c;
    if (c->cf->n_slots > 1) gp->n_batch = 128; /* prefill in chunks: decode steps of the other slots go between */
    gp->spec_max = q->spec_max >= 0 ? q->spec_max : c->cf->spec_max;
    gp->spec_ngram = c->cf->spec_ngram;
    gp->mtp = c->cf->spec_mtp;
    gp->json_object = q->json_object;
    gp->json_schema = q->json_schema;
    if (c->calls.n) {
        gp->calls = &c->calls;
        gp->calls_after = c->calls_after;
    }
    if (c->thinks) {
        gp->think = &c->think;
        gp->think_budget = q->think_budget;
    }
    /* templates whose markers are control tokens: their text is part of the reply, to be parsed */
    if (q->api != SRV_API_COMPLETIONS) gp->special_text = mr_chat_special_markers(c->cf->tmpl ? c->cf->tmpl : mr_chat_template_detect(c->cf->m));
    if (gp->sampler.repeat_last_n < 0) gp->sampler.repeat_last_n = c->cf->n_ctx; /* llama-server's -1 */
    if (q->logprobs) gp->spec_max = 0; /* a verification step accepts several tokens; logprobs are per token */
    gp->spec_min = q->spec_min < gp->spec_max ? q->spec_min : gp->spec_max;
}

/* The slot's session as it is now into the prompt cache (if there is one), keyed by the first
 * n_past of tokens. A snapshot that cannot be taken (no memory, a write error) costs only itself. */
static void cache_store(cctx *c, const int32_t *tokens) {
    mr_pcache *pc = srv_sched_pcache(c->sc);
    if (pc && mr_pcache_store(pc, c->slot->s, tokens)) mr_log(1, "prompt cache: %s\n", mr_last_error());
}

/* The prompt from reuse on: up to each snapshot position (next_mark) evaluated and stored in the
 * prompt cache, the rest through mr_gen (batched steps, or the model taken for mr_gen_prefill's
 * chunks), then the whole prompt stored; the slot's cache follows what the session holds. 0 done,
 * 1 the client left, -1 error. */
static int prefill(cctx *c, mr_gen *g, const int32_t *prompt, int reuse, int n_prompt, int diverge) {
    mr_pcache *pc = srv_sched_pcache(c->sc);
    const int batched = srv_sched_can_batch(c->sc);
    const double t_pre = mr_now(); /* wall time, waits for the model or the steps included */
    int rc = 0, from = reuse;
    for (int p; pc && rc == 0 && (p = next_mark(c, from, n_prompt, diverge)) > 0; from = p) {
        rc = batched ? span_batched(c, prompt, from, p) : span_unbatched(c, prompt, from, p);
        if (rc == 0) cache_store(c, prompt);
    }
    for (int j = 0; j < from && rc == 0; j++) mr_sampler_accept(mr_gen_sampler(g), prompt[j]);
    if (rc == 0 && batched) {
        rc = span_batched(c, prompt, from, n_prompt);
        if (rc == 0 && mr_gen_prefill_evaluated(g, prompt + from, n_prompt - from, c->blog)) rc = -1;
    } else if (rc == 0) {
        srv_model_lock(c->sc);
        rc = mr_gen_prefill(g, prompt + from, n_prompt - from);
        srv_model_unlock(c->sc);
    }
    /* the whole prompt: the next turn renders it again and goes on after it (the template's
     * generation prompt included), so a turn whose assistant message is not this reply token for
     * token reads only what it adds, here or after a restart */
    if (rc == 0) cache_store(c, prompt);
    c->w.t_prefill += mr_now() - t_pre;
    if (rc > 0) srv_cache_prompt(c->slot, prompt, reuse, mr_session_n_past(c->slot->s)); /* what was evaluated stays cached */
    else if (rc < 0) srv_cache_forget(c->slot);
    else srv_cache_prompt(c->slot, prompt, reuse, n_prompt);
    return rc;
}

/* What of the prompt the session holds before the prefill: the slot's own history (cut back to the
 * common prefix where the state allows), or the longest prefix in the prompt cache beyond it.
 * *diverge: where the prompt leaves the slot's history (a snapshot position). */
static int cache_lookup(cctx *c, const int32_t *prompt, int n_prompt, int *diverge) {
    srv_slot *sl = c->slot;
    mr_pcache *pc = srv_sched_pcache(c->sc);
    int d = 0, held = sl->n_cache;
    while (d < sl->n_cache && d < n_prompt - 1 && sl->cache[d] == prompt[d]) d++;
    *diverge = d;
    int reuse = srv_cache_reuse(sl, prompt, n_prompt);
    if (!pc) return reuse;
    const double t0 = mr_now();
    if (reuse == d && d > 0 && held > d) cache_store(c, prompt); /* the history cut back: keep its common part */
    int k = mr_pcache_restore(pc, sl->s, prompt, n_prompt - 1, reuse);
    if (k > 0) {
        srv_cache_prompt(sl, prompt, 0, k);
        reuse = k;
    } else if (k < 0) { /* refused (logged): the session is empty, the prompt is read from the start */
        srv_cache_forget(sl);
        reuse = 0;
    }
    c->w.t_prefill += mr_now() - t0;
    return reuse;
}

/* Decode steps until the choice finishes (*step), the text given to the writer as it becomes
 * final. 0, or -1 with the error set. */
static int decode(cctx *c, mr_gen *g, mr_gen_step *step) {
    const srv_req *q = c->q;
    int batched = srv_sched_can_batch(c->sc);
    const double t_dec = mr_now(); /* wall time: with batching the evaluations run outside mr_gen */
    int err = 0;
    while (!step->finish) {
        if (mr_http_client_gone(c->r)) { mr_gen_stop(g, step); break; }
        if (batched) {
            /* the pending token (and a draft to verify) joins the other slots' in one evaluation */
            if (srv_batch_eval(c->sc, c->slot, g) || mr_gen_batch_done(g, step)) { err = 1; break; }
        } else {
            srv_model_lock(c->sc);
            int e = mr_gen_next(g, step);
            srv_model_unlock(c->sc);
            if (e) { err = 1; break; }
        }
        if (q->logprobs && step->n_accepted && c->w.w->logprob) {
            const int32_t *ids;
            int ng = mr_gen_tokens(g, &ids);
            const float *lg = mr_gen_logits(g);
            if (lg && ng > 0) lp_add(c, lg, ids[ng - 1]);
        }
        mr_sbuf_add(&c->reply, step->text, step->len);
        if (c->reply.oom) { mr_set_error("server: out of memory"); err = 1; break; }
        if (c->r->streaming) flush(c);
    }
    mr_gen_stats gs;
    mr_gen_get_stats(g, &gs);
    c->w.n_gen += gs.n_gen;
    c->w.n_drafted += gs.n_drafted;
    c->w.n_draft_accepted += gs.n_draft_accepted;
    c->w.t_decode += mr_now() - t_dec;
    return err ? -1 : 0;
}

/* Generates choice c->w.choice. 0 done, 1 the client left, -1 error (session reset, error set). */
static int run_choice(cctx *c, const int32_t *prompt, int n_prompt) {
    int diverge, reuse = cache_lookup(c, prompt, n_prompt, &diverge);
    mr_gen_params gp;
    gen_params(c, &gp);
    mr_gen *g = mr_gen_new(c->slot->s, &gp);
    if (!g) return -1;
    int rc = prefill(c, g, prompt, reuse, n_prompt, diverge);
    if (rc != 0) {
        mr_gen_free(g);
        return rc > 0 ? 1 : -1;
    }
    if (c->w.choice == 0) c->w.n_cached = reuse;
    mr_sbuf_free(&c->reply);
    c->sent = c->r_sent = 0;
    if (c->forced) mr_sbuf_puts(&c->reply, c->forced);
    c->w.w->choice_begin(&c->w);
    mr_gen_step step = {0};
    if (decode(c, g, &step)) {
        mr_gen_free(g);
        srv_cache_forget(c->slot);
        return -1;
    }
    /* the generated tokens that were evaluated join the cache (the last one is pending) */
    const int32_t *ids;
    int ng = mr_gen_tokens(g, &ids);
    srv_cache_reply(c->slot, n_prompt, ids, ng);
    mr_gen_free(g);
    cache_store(c, c->slot->cache); /* a next turn that sends this reply back goes on from here */
    if (step.finish == MR_GEN_ABORTED) return 1;
    choice_end(c, step.finish);
    return 0;
}

static uint64_t random_seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    return s & ((1ull << 53) - 1); /* exact in a JSON number read as a double: the seed can be sent back */
}

/* the writer of the request's API (SRV_API_*) */
static const srv_writer *writer_for(int api) {
    if (api == SRV_API_CHAT) return &srv_writer_chat;
    if (api == SRV_API_ANTHROPIC) return &srv_writer_anthropic;
    if (api == SRV_API_RESPONSES) return &srv_writer_responses;
    return &srv_writer_completions;
}

static int client_gone(void *r) { return mr_http_client_gone(r); }

/* The request parsed (Responses: its conversation with the stored one, rs) and its prompt built: the
 * token count, or -1 after an error reply. */
static int request_prompt(const srv_conf *cf, mr_http_req *r, const mr_json *j, int api, srv_req *q, srv_resp *rs, char **forced,
                          int32_t **toks) {
    char err[512];
    int status = 400;
    if (srv_req_parse(j, api, q, err, sizeof err) ||
        (api == SRV_API_RESPONSES && srv_resp_input(cf->store, j, q, rs, &status, err, sizeof err))) {
        srv_error(r, status, err);
        return -1;
    }
    for (int i = 0; i < q->n_bias; i++)
        if (q->bias_ids[i] >= cf->n_vocab) {
            snprintf(err, sizeof err, "'logit_bias' has token id %d, beyond the vocabulary (%d)", q->bias_ids[i], cf->n_vocab);
            srv_error(r, 400, err);
            return -1;
        }
    int n = srv_prompt_build(cf, q, forced, toks);
    if (n < 0) { srv_error(r, 400, mr_last_error()); return -1; }
    if (n == 0) { srv_error(r, 400, "empty prompt"); return -1; }
    if (n >= cf->n_ctx) {
        snprintf(err, sizeof err, "the prompt (%d tokens) does not fit the context (%d)", n, cf->n_ctx);
        srv_error(r, 400, err);
        return -1;
    }
    return n;
}

/* Tool calls held to the functions' schemas in the template's format (mr_gen_params.calls):
 * tool_choice required / named, from the first byte: one call of an allowed function (a schema
 * outside the subset: 400 naming the function and the keyword); auto (tools given, no response
 * format), lazily: free text until the template's call marker, then the call (a schema outside the
 * subset, or a template without the format: no constraint, as before). 0, or -1 after an error reply. */
static int call_constraint(cctx *c) {
    const srv_req *q = c->q;
    const int forced = q->tool_choice == SRV_TOOLS_REQUIRED || q->tool_choice == SRV_TOOLS_NAMED;
    if (!forced && !(q->tool_choice == SRV_TOOLS_AUTO && c->marker && !q->json_object && !q->json_schema)) return 0;
    mr_chat_call_format f;
    if (mr_chat_tool_call_format(c->cf->m, c->cf->tmpl, &f)) {
        if (forced) srv_error(c->r, 400, mr_last_error());
        return forced ? -1 : 0;
    }
    int n = 0;
    for (int i = 0; i < q->n_tools && n < SRV_MAX_TOOLS; i++) {
        if (q->tool_choice == SRV_TOOLS_NAMED && strcmp(q->tool_names[i], q->tool_choice_name)) continue;
        c->call_names[n] = q->tool_names[i];
        /* no parameters: no arguments (OpenAI's meaning), not any object */
        c->call_schemas[n++] = q->tool_params[i] ? q->tool_params[i] : "{\"type\": \"object\", \"properties\": {}, \"additionalProperties\": false}";
    }
    c->calls = (mr_gen_calls){.n = n, .names = c->call_names, .schemas = c->call_schemas, .prefix = f.prefix,
                              .middle = f.middle, .suffix = f.suffix, .dsml = f.dsml};
    if (!forced) { /* the forced text is the marker and what follows it before the call's prefix */
        const char *at = strstr(f.forced, c->marker);
        if (!at) { c->calls.n = 0; return 0; }
        snprintf(c->lazy_prefix, sizeof c->lazy_prefix, "%s%s", at + strlen(c->marker), f.prefix);
        c->calls.prefix = c->lazy_prefix;
        c->calls_after = c->marker;
    }
    if (mr_gen_calls_check(&c->calls)) {
        c->calls.n = 0;
        if (!forced) return 0;
        char err[512];
        snprintf(err, sizeof err, "'tools' (a call forced by 'tool_choice'): %s", mr_last_error());
        srv_error(c->r, 400, err);
        return -1;
    }
    return 0;
}

/* The reply's reasoning format (srv_chat_opts); thinking asked of a template without it is refused.
 * 0, or -1 after an error reply. */
static int thinking(cctx *c) {
    if (c->q->api == SRV_API_COMPLETIONS) return 0;
    mr_chat_opts o;
    c->thinks = srv_chat_opts(c->cf, c->q, &o, &c->think);
    mr_chat_think t;
    if (c->q->thinking > 0 && !mr_chat_thinking(c->cf->m, c->cf->tmpl, &(mr_chat_opts){.thinking = 1}, &t)) {
        char err[256];
        snprintf(err, sizeof err, "the chat template %s has no thinking mode", c->cf->tmpl ? c->cf->tmpl : mr_chat_template_detect(c->cf->m));
        srv_error(c->r, 400, err);
        return -1;
    }
    return 0;
}

/* The choices on the acquired slot, answered by the writer; the counters and the log line. */
static void run(cctx *c, const int32_t *toks, int n) {
    srv_sched *sc = c->sc;
    const srv_req *q = c->q;
    c->w.id = srv_sched_next_id(sc);
    c->w.w->begin(&c->w);
    int rc = 0, batched = srv_sched_can_batch(sc);
    if (batched) srv_step_join(sc, 1); /* from here on the steps wait for this request */
    for (c->w.choice = 0; c->w.choice < q->n && rc == 0; c->w.choice++) rc = run_choice(c, toks, n);
    if (batched) srv_step_join(sc, -1);
    if (rc < 0) srv_error(c->r, 500, mr_last_error());
    else if (rc == 0) c->w.w->end(&c->w);
    srv_run_stats rs = {rc, n, c->w.n_cached, c->w.n_gen, c->w.t_prefill, c->w.t_decode};
    srv_sched_done(sc, &rs);
    char spec[64] = "";
    if (c->w.n_drafted) snprintf(spec, sizeof spec, " (%d drafted, %d accepted)", c->w.n_drafted, c->w.n_draft_accepted);
    mr_log(1, "request %lu: prompt %d tokens (%d cached) %.2f s, %d choice%s, generated %d tokens %.2f tok/s%s%s\n", c->w.id, n,
           c->w.n_cached, c->w.t_prefill, q->n, q->n > 1 ? "s" : "", c->w.n_gen, c->w.t_decode > 0 ? c->w.n_gen / c->w.t_decode : 0.0,
           spec, rc > 0 ? ", client left" : rc < 0 ? ", failed" : "");
}

void srv_complete(const srv_conf *cf, srv_sched *sc, mr_http_req *r, int api) {
    mr_json *j = mr_json_parse(r->body, r->body_len);
    if (!j) { srv_error(r, 400, mr_last_error()); return; }
    srv_req q;
    srv_resp rs = {0};
    int32_t *toks = NULL;
    char *forced = NULL;
    cctx c;
    memset(&c, 0, sizeof c);
    int n = request_prompt(cf, r, j, api, &q, &rs, &forced, &toks);
    if (n < 0) goto done;
    c.cf = cf;
    c.sc = sc;
    c.r = r;
    c.q = &q;
    c.forced = forced;
    c.w.w = writer_for(api);
    c.w.r = r;
    c.w.q = &q;
    c.w.resp = &rs;
    c.w.sched = sc;
    c.w.model_name = cf->model_name;
    c.w.created = (long)time(NULL);
    c.w.n_prompt = n;
    c.w.seed = q.seed_given ? q.sp.seed : random_seed();
    if (q.n_tools && q.tool_choice != SRV_TOOLS_NONE && c.w.w->tool_calls) c.marker = mr_chat_tool_marker(cf->m, cf->tmpl);
    if (call_constraint(&c) || thinking(&c)) goto done;
    c.blog = mr_malloc(sizeof(float) * (size_t)cf->n_vocab);
    if (!c.blog) { srv_error(r, 500, "out of memory"); goto done; }
    if (srv_sched_pcache(sc) && q.n_msgs > 0 && (c.marks = mr_malloc(sizeof(int) * (size_t)q.n_msgs)))
        c.n_marks = srv_prompt_marks(cf, &q, toks, n, c.marks, q.n_msgs);
    c.slot = srv_acquire(sc, toks, n, client_gone, r);
    if (!c.slot) goto done; /* the client left while queued */
    run(&c, toks, n);
    srv_release(sc, c.slot);
done:
    free(c.marks);
    free(c.blog);
    mr_sbuf_free(&c.reply);
    srv_reply_free(&c.w);
    free(toks);
    free(forced);
    srv_req_free(&q);
    srv_resp_free(&rs);
    mr_json_free(j);
}
