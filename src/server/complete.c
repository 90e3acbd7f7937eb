/* Completions: the prompt (re-using the longest prefix the session already holds), n choices generated
 * with the generation API, tool calls parsed back from the reply; the answer is written by the API's
 * writer (reply.h), which this file drives without knowing the API. */
#include "server/state.h"
#include "server/reply.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define SRV_MAX_CALLS 32

typedef struct {
    srv_state *st;
    srv_slot *slot;
    float *blog;                 /* [n_vocab]: logits of a prompt's last token evaluated in a batched step */
    mr_http_req *r;
    const srv_req *q;
    const char *marker;          /* tool-call marker when tool calls are parsed, else NULL */
    const char *forced;          /* text the reply starts with (tool_choice), part of the prompt */
    mr_sbuf reply;               /* the choice being generated: forced + generated text */
    size_t sent;                 /* bytes of reply already given to the writer */
    srv_reply w;                 /* the API's writer and the reply's totals */
} cctx;

static int piece_of(const srv_state *st, int32_t id, char *buf, int size) {
    int n = mr_token_to_piece(st->tok, id, buf, size, 1);
    return n > 0 ? n : 0;
}

/* log-softmax of the logits the token was sampled from (the model's distribution, before
 * temperature and truncation), for the chosen token and the top alternatives */
static void lp_add(cctx *c, const float *logits, int32_t id) {
    const int V = c->st->n_vocab, k = c->q->top_logprobs;
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
    lp.tok.len = piece_of(c->st, id, lp.tok.piece, sizeof lp.tok.piece);
    lp.tok.logprob = logits[id] - lse;
    lp.n_top = nt;
    for (int t = 0; t < nt; t++) {
        lp.top[t].len = piece_of(c->st, top[t], lp.top[t].piece, sizeof lp.top[t].piece);
        lp.top[t].logprob = logits[top[t]] - lse;
    }
    c->w.w->logprob(&c->w, &lp);
}

/* Gives the writer the reply text that is final: never the tool-call marker, a suffix that may grow
 * into it, or the newlines that may turn out to separate the calls from the content. */
static void flush(cctx *c) {
    const char *t = c->reply.p ? c->reply.p : "";
    size_t len = c->reply.n, safe = len;
    if (c->marker) {
        size_t ml = strlen(c->marker);
        const char *at = memmem(t, len, c->marker, ml);
        if (at) safe = (size_t)(at - t);
        else
            for (size_t l = ml - 1 < len ? ml - 1 : len; l > 0; l--)
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
    srv_model_unlock(c->st);
    if (c->r->streaming) mr_http_sse_comment(c->r, "prefill");
    int gone = mr_http_client_gone(c->r);
    srv_model_lock(c->st);
    return gone;
}

/* The end of a choice: tool calls parsed from the reply, the rest of the text, the calls and the
 * end given to the writer. */
static void choice_end(cctx *c, int finish) {
    mr_chat_tool_call calls[SRV_MAX_CALLS];
    size_t content_len = c->reply.n;
    int n_calls = 0;
    if (c->marker) {
        n_calls = mr_chat_parse_tool_calls(c->st->m, c->st->tmpl, c->reply.p ? c->reply.p : "", c->reply.n, &content_len,
                                           calls, SRV_MAX_CALLS);
        if (n_calls < 0) { n_calls = 0; content_len = c->reply.n; } /* malformed: all of it is text */
    }
    const char *text = c->reply.p ? c->reply.p : "";
    if (content_len > c->sent) c->w.w->delta(&c->w, text + c->sent, content_len - c->sent);
    c->sent = content_len;
    if (n_calls) c->w.w->tool_calls(&c->w, calls, n_calls);
    c->w.w->choice_end(&c->w, finish, n_calls);
    mr_chat_tool_calls_free(calls, n_calls);
}

/* The prompt tokens [from, n) through the batched steps, a piece per step beside the other slots'
 * decode tokens; then g starts its reply from the last token's logits. A streamed reply gets a
 * keep-alive comment at most once a second; a client that left ends the prefill between pieces.
 * 0 done, 1 the client left, -1 error. */
static int prefill_batched(cctx *c, mr_gen *g, const int32_t *prompt, int from, int n) {
    double t_comment = mr_now();
    for (int done = from; done < n;) {
        if (mr_http_client_gone(c->r)) return 1;
        int k = srv_batch_prompt(c->st, c->slot, prompt + done, n - done, c->blog);
        if (k < 0) return -1;
        done += k;
        if (done < n && c->r->streaming && mr_now() - t_comment >= 1.0) {
            mr_http_sse_comment(c->r, "prefill");
            t_comment = mr_now();
        }
    }
    return mr_gen_prefill_evaluated(g, prompt + from, n - from, c->blog) ? -1 : 0;
}

/* Generates choice c->choice. 0 done, 1 the client left, -1 error (session reset, error set). */
static int run_choice(cctx *c, const int32_t *prompt, int n_prompt) {
    srv_state *st = c->st;
    srv_slot *sl = c->slot;
    const srv_req *q = c->q;
    /* longest common prefix with what the slot's session holds; the last prompt token is evaluated
     * again for its logits. Architectures whose state cannot be cut (deepseek4) start over unless
     * the prompt extends the whole cached sequence. */
    int reuse = 0;
    while (reuse < sl->n_cache && reuse < n_prompt - 1 && sl->cache[reuse] == prompt[reuse]) reuse++;
    if (reuse < sl->n_cache && mr_session_truncate(sl->s, reuse) != 0) reuse = 0;
    if (!reuse) mr_session_reset(sl->s);
    sl->n_cache = reuse;
    mr_gen_params gp;
    mr_gen_params_default(&gp);
    gp.sampler = q->sp;
    gp.sampler.seed = c->w.seed + (uint64_t)c->w.choice;
    gp.max_tokens = q->max_tokens;
    gp.stop = q->stop;
    gp.n_stop = q->n_stop;
    gp.progress = on_prefill;
    gp.user = c;
    if (st->n_slots > 1) gp.n_batch = 128; /* prefill in chunks: decode steps of the other slots go between */
    gp.spec_max = q->spec_max >= 0 ? q->spec_max : st->spec_max;
    gp.spec_ngram = st->spec_ngram;
    gp.json_object = q->json_object;
    if (gp.sampler.repeat_last_n < 0) gp.sampler.repeat_last_n = st->n_ctx; /* llama-server's -1 */
    if (q->logprobs) gp.spec_max = 0; /* a verification step accepts several tokens; logprobs are per token */
    gp.spec_min = q->spec_min < gp.spec_max ? q->spec_min : gp.spec_max;
    mr_gen *g = mr_gen_new(sl->s, &gp);
    if (!g) return -1;
    for (int j = 0; j < reuse; j++) mr_sampler_accept(mr_gen_sampler(g), prompt[j]);
    const double t_pre = mr_now(); /* wall time, waits for the model or the steps included */
    int rc;
    if (st->can_batch) rc = prefill_batched(c, g, prompt, reuse, n_prompt);
    else {
        srv_model_lock(st);
        rc = mr_gen_prefill(g, prompt + reuse, n_prompt - reuse);
        srv_model_unlock(st);
    }
    c->w.t_prefill += mr_now() - t_pre;
    if (rc != 0) {
        if (rc > 0) { /* the client left: what was evaluated stays cached */
            sl->n_cache = mr_session_n_past(sl->s);
            memcpy(sl->cache + reuse, prompt + reuse, sizeof(int32_t) * (size_t)(sl->n_cache - reuse));
        } else {
            mr_session_reset(sl->s);
            sl->n_cache = 0;
        }
        mr_gen_free(g);
        return rc > 0 ? 1 : -1;
    }
    memcpy(sl->cache + reuse, prompt + reuse, sizeof(int32_t) * (size_t)(n_prompt - reuse));
    sl->n_cache = n_prompt;
    if (c->w.choice == 0) c->w.n_cached = reuse;
    mr_sbuf_free(&c->reply);
    c->sent = 0;
    if (c->forced) mr_sbuf_puts(&c->reply, c->forced);
    c->w.w->choice_begin(&c->w);
    mr_gen_step step = {0};
    int err = 0;
    const double t_dec = mr_now(); /* wall time: with batching the evaluations run outside mr_gen */
    while (!step.finish) {
        if (mr_http_client_gone(c->r)) { mr_gen_stop(g, &step); break; }
        if (st->can_batch) {
            /* the pending token (and a draft to verify) joins the other slots' in one evaluation */
            if (srv_batch_eval(st, sl, g) || mr_gen_batch_done(g, &step)) { err = 1; break; }
        } else {
            srv_model_lock(st);
            int e = mr_gen_next(g, &step);
            srv_model_unlock(st);
            if (e) { err = 1; break; }
        }
        if (q->logprobs && step.n_accepted && c->w.w->logprob) {
            const int32_t *ids;
            int ng = mr_gen_tokens(g, &ids);
            const float *lg = mr_gen_logits(g);
            if (lg && ng > 0) lp_add(c, lg, ids[ng - 1]);
        }
        mr_sbuf_add(&c->reply, step.text, step.len);
        if (c->reply.oom) { mr_set_error("server: out of memory"); err = 1; break; }
        if (c->r->streaming) flush(c);
    }
    mr_gen_stats gs;
    mr_gen_get_stats(g, &gs);
    c->w.n_gen += gs.n_gen;
    c->w.n_drafted += gs.n_drafted;
    c->w.n_draft_accepted += gs.n_draft_accepted;
    c->w.t_decode += mr_now() - t_dec;
    if (err) {
        mr_gen_free(g);
        mr_session_reset(sl->s);
        sl->n_cache = 0;
        return -1;
    }
    /* the generated tokens that were evaluated join the cache (the last one is pending) */
    const int32_t *ids;
    int ng = mr_gen_tokens(g, &ids), n_past = mr_session_n_past(sl->s);
    for (int k = n_prompt; k < n_past && k - n_prompt < ng; k++) sl->cache[k] = ids[k - n_prompt];
    sl->n_cache = n_past;
    mr_gen_free(g);
    if (step.finish == MR_GEN_ABORTED) return 1;
    choice_end(c, step.finish);
    return 0;
}

static uint64_t random_seed(void) {
    uint64_t s = 0;
    if (getrandom(&s, sizeof s, 0) != (ssize_t)sizeof s) s = (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    return s & ((1ull << 53) - 1); /* exact in a JSON number read as a double: the seed can be sent back */
}

/* The prompt tokens of q: the rendered conversation (with the forced start of a tool call) or the
 * completion prompt. */
static int build_prompt(srv_state *st, const srv_req *q, char **forced, int32_t **toks) {
    if (q->api == SRV_API_COMPLETIONS) {
        if (q->prompt) return srv_tokenize(st, q->prompt, 1, toks);
        for (int i = 0; i < q->n_prompt_ids; i++)
            if (q->prompt_ids[i] >= st->n_vocab) { mr_set_error("'prompt' has token id %d, beyond the vocabulary (%d)", q->prompt_ids[i], st->n_vocab); return -1; }
        *toks = mr_malloc(sizeof(int32_t) * (size_t)(q->n_prompt_ids + 1));
        if (!*toks) { mr_set_error("out of memory"); return -1; }
        memcpy(*toks, q->prompt_ids, sizeof(int32_t) * (size_t)q->n_prompt_ids);
        return q->n_prompt_ids;
    }
    char *text = srv_render_chat(st, q, 1);
    if (!text) return -1;
    if (q->tool_choice == SRV_TOOLS_REQUIRED || q->tool_choice == SRV_TOOLS_NAMED) {
        /* tool_choice without constrained sampling: the reply is made to start a call */
        const char *name = q->tool_choice == SRV_TOOLS_NAMED ? q->tool_choice_name : NULL;
        int fl = mr_chat_tool_prefix(st->m, st->tmpl, name, NULL, 0);
        char *f = fl >= 0 ? mr_malloc((size_t)fl + 1) : NULL;
        char *t2 = f ? mr_malloc(strlen(text) + (size_t)fl + 1) : NULL;
        if (!t2) { free(f); free(text); if (fl >= 0) mr_set_error("out of memory"); return -1; }
        mr_chat_tool_prefix(st->m, st->tmpl, name, f, fl + 1);
        strcpy(t2, text);
        strcat(t2, f);
        free(text);
        text = t2;
        *forced = f;
    }
    /* the template may already start with the BOS text; do not add a second one */
    int32_t bos = mr_tokenizer_bos(st->tok);
    const char *bos_text = bos >= 0 ? mr_token_text(st->tok, bos) : NULL;
    int add = !(bos_text && *bos_text && !strncmp(text, bos_text, strlen(bos_text)));
    int n = srv_tokenize(st, text, add, toks);
    free(text);
    return n;
}

void srv_complete(srv_state *st, mr_http_req *r, int api) {
    mr_json *j = mr_json_parse(r->body, r->body_len);
    if (!j) { srv_error(r, 400, mr_last_error()); return; }
    srv_req q;
    char err[512];
    int32_t *toks = NULL;
    char *forced = NULL;
    cctx c;
    memset(&c, 0, sizeof c);
    if (srv_req_parse(j, api, &q, err, sizeof err)) { srv_error(r, 400, err); goto done; }
    for (int i = 0; i < q.n_bias; i++)
        if (q.bias_ids[i] >= st->n_vocab) {
            snprintf(err, sizeof err, "'logit_bias' has token id %d, beyond the vocabulary (%d)", q.bias_ids[i], st->n_vocab);
            srv_error(r, 400, err);
            goto done;
        }
    int n = build_prompt(st, &q, &forced, &toks);
    if (n < 0) { srv_error(r, 400, mr_last_error()); goto done; }
    if (n == 0) { srv_error(r, 400, "empty prompt"); goto done; }
    if (n >= st->n_ctx) {
        snprintf(err, sizeof err, "the prompt (%d tokens) does not fit the context (%d)", n, st->n_ctx);
        srv_error(r, 400, err);
        goto done;
    }
    c.st = st;
    c.r = r;
    c.q = &q;
    c.forced = forced;
    c.w.w = srv_writer_for(api);
    c.w.r = r;
    c.w.q = &q;
    c.w.sched = st;
    c.w.model_name = st->model_name;
    c.w.created = (long)time(NULL);
    c.w.n_prompt = n;
    c.w.seed = q.seed_given ? q.sp.seed : random_seed();
    if (q.n_tools && q.tool_choice != SRV_TOOLS_NONE && c.w.w->tool_calls) c.marker = mr_chat_tool_marker(st->m, st->tmpl);
    c.blog = mr_malloc(sizeof(float) * (size_t)st->n_vocab);
    if (!c.blog) { srv_error(r, 500, "out of memory"); goto done; }
    int si = srv_acquire(st, r, toks, n);
    if (si < 0) goto done; /* the client left while queued */
    c.slot = &st->slots[si];
    pthread_mutex_lock(&st->qmu);
    c.w.id = ++st->req_id;
    pthread_mutex_unlock(&st->qmu);
    c.w.w->begin(&c.w);
    int rc = 0;
    if (st->can_batch) srv_step_join(st, 1); /* from here on the steps wait for this request */
    for (c.w.choice = 0; c.w.choice < q.n && rc == 0; c.w.choice++) rc = run_choice(&c, toks, n);
    if (st->can_batch) srv_step_join(st, -1);
    if (rc < 0) srv_error(r, 500, mr_last_error());
    else if (rc == 0) c.w.w->end(&c.w);
    pthread_mutex_lock(&st->qmu);
    st->n_requests++;
    st->n_errors += rc < 0;
    st->n_aborted += rc > 0;
    st->n_prompt += (unsigned long long)n;
    st->n_cached += (unsigned long long)c.w.n_cached;
    st->n_gen += (unsigned long long)c.w.n_gen;
    st->prefill_s += c.w.t_prefill;
    st->decode_s += c.w.t_decode;
    pthread_mutex_unlock(&st->qmu);
    char spec[64] = "";
    if (c.w.n_drafted) snprintf(spec, sizeof spec, " (%d drafted, %d accepted)", c.w.n_drafted, c.w.n_draft_accepted);
    mr_log(1, "request %lu: prompt %d tokens (%d cached) %.2f s, %d choice%s, generated %d tokens %.2f tok/s%s%s\n", c.w.id, n,
           c.w.n_cached, c.w.t_prefill, q.n, q.n > 1 ? "s" : "", c.w.n_gen, c.w.t_decode > 0 ? c.w.n_gen / c.w.t_decode : 0.0, spec,
           rc > 0 ? ", client left" : rc < 0 ? ", failed" : "");
    srv_release(st, si);
done:
    free(c.blog);
    mr_sbuf_free(&c.reply);
    srv_reply_free(&c.w);
    free(toks);
    free(forced);
    srv_req_free(&q);
    mr_json_free(j);
}
