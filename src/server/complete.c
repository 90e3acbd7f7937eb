/* Completions: the prompt (re-using the longest prefix the session already holds), n choices generated
 * with the generation API, tool calls parsed back from the reply, and the answer in the shape of the
 * API asked: OpenAI chat.completion / text_completion (whole or streamed chunks) or an Anthropic
 * message (whole or streamed events). */
#include "server/state.h"
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
    unsigned long id;
    long created;
    const char *marker;          /* tool-call marker when tool calls are parsed, else NULL */
    const char *forced;          /* text the reply starts with (tool_choice), part of the prompt */
    /* the choice being generated */
    int choice;
    mr_sbuf reply;               /* forced + generated text */
    size_t sent;                 /* bytes of reply already streamed as content */
    int text_block;              /* anthropic stream: the text block is open */
    mr_sbuf lp;                  /* chat: logprob entries; completions: "tokens" array items */
    mr_sbuf lp_vals, lp_top, lp_off; /* completions: token_logprobs, top_logprobs, text_offset */
    int n_lp;
    size_t lp_offset;
    /* totals */
    mr_sbuf choices;             /* non-streamed choices (OpenAI) */
    int n_prompt, n_cached, n_gen;
    int n_drafted, n_draft_accepted; /* speculative decoding */
    double t_prefill, t_decode;
    uint64_t seed;
} cctx;

static void put_model(mr_sbuf *b, const srv_state *st) { mr_sbuf_json_str(b, st->model_name, strlen(st->model_name)); }

static const char *oai_finish(int finish, int n_calls) {
    if (n_calls) return "tool_calls";
    return finish == MR_GEN_LENGTH || finish == MR_GEN_CONTEXT ? "length" : "stop";
}

static const char *anthropic_stop(int finish, int n_calls) {
    if (n_calls) return "tool_use";
    if (finish == MR_GEN_STOP) return "stop_sequence";
    return finish == MR_GEN_LENGTH || finish == MR_GEN_CONTEXT ? "max_tokens" : "end_turn";
}

/* ---- logprobs ---- */

static void put_token_bytes(mr_sbuf *b, const char *p, int n) {
    mr_sbuf_puts(b, "[");
    for (int i = 0; i < n; i++) mr_sbuf_printf(b, "%s%u", i ? "," : "", (unsigned char)p[i]);
    mr_sbuf_puts(b, "]");
}

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
    char piece[256];
    int pl = piece_of(c->st, id, piece, sizeof piece);
    if (c->q->api == SRV_API_CHAT) {
        mr_sbuf *b = &c->lp;
        if (c->n_lp) mr_sbuf_puts(b, ",");
        mr_sbuf_puts(b, "{\"token\":");
        mr_sbuf_json_str(b, piece, (size_t)pl);
        mr_sbuf_printf(b, ",\"logprob\":%.6f,\"bytes\":", logits[id] - lse);
        put_token_bytes(b, piece, pl);
        mr_sbuf_puts(b, ",\"top_logprobs\":[");
        for (int t = 0; t < nt; t++) {
            char tp[256];
            int tl = piece_of(c->st, top[t], tp, sizeof tp);
            mr_sbuf_puts(b, t ? ",{\"token\":" : "{\"token\":");
            mr_sbuf_json_str(b, tp, (size_t)tl);
            mr_sbuf_printf(b, ",\"logprob\":%.6f,\"bytes\":", logits[top[t]] - lse);
            put_token_bytes(b, tp, tl);
            mr_sbuf_puts(b, "}");
        }
        mr_sbuf_puts(b, "]}");
    } else { /* completions: parallel arrays */
        const char *sep = c->n_lp ? "," : "";
        mr_sbuf_puts(&c->lp, sep);
        mr_sbuf_json_str(&c->lp, piece, (size_t)pl);
        mr_sbuf_printf(&c->lp_vals, "%s%.6f", sep, logits[id] - lse);
        mr_sbuf_printf(&c->lp_off, "%s%zu", sep, c->lp_offset);
        mr_sbuf_printf(&c->lp_top, "%s{", sep);
        for (int t = 0; t < nt; t++) {
            char tp[256];
            int tl = piece_of(c->st, top[t], tp, sizeof tp);
            if (t) mr_sbuf_puts(&c->lp_top, ",");
            mr_sbuf_json_str(&c->lp_top, tp, (size_t)tl);
            mr_sbuf_printf(&c->lp_top, ":%.6f", logits[top[t]] - lse);
        }
        mr_sbuf_puts(&c->lp_top, "}");
        c->lp_offset += (size_t)pl;
    }
    c->n_lp++;
}

/* the logprobs collected so far as a JSON value (then cleared), "null" when not asked */
static void lp_take(cctx *c, mr_sbuf *b) {
    if (!c->q->logprobs) { mr_sbuf_puts(b, "null"); return; }
    if (c->q->api == SRV_API_CHAT) mr_sbuf_printf(b, "{\"content\":[%s]}", c->lp.p ? c->lp.p : "");
    else mr_sbuf_printf(b, "{\"tokens\":[%s],\"token_logprobs\":[%s],\"top_logprobs\":[%s],\"text_offset\":[%s]}",
                        c->lp.p ? c->lp.p : "", c->lp_vals.p ? c->lp_vals.p : "", c->lp_top.p ? c->lp_top.p : "",
                        c->lp_off.p ? c->lp_off.p : "");
    mr_sbuf_free(&c->lp);
    mr_sbuf_free(&c->lp_vals);
    mr_sbuf_free(&c->lp_top);
    mr_sbuf_free(&c->lp_off);
    c->n_lp = 0;
}

/* ---- streamed pieces ---- */

static void oai_chunk(cctx *c, const char *delta, const char *text, size_t n, const char *finish) {
    mr_sbuf b = {0};
    int chat = c->q->api == SRV_API_CHAT;
    mr_sbuf_printf(&b, "{\"id\":\"%s-%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":", chat ? "chatcmpl" : "cmpl", c->id,
                   chat ? "chat.completion.chunk" : "text_completion", c->created);
    put_model(&b, c->st);
    mr_sbuf_printf(&b, ",\"system_fingerprint\":\"moerun-%s\",\"choices\":[{\"index\":%d,", mr_version(), c->choice);
    if (chat) {
        mr_sbuf_puts(&b, "\"delta\":{");
        if (delta) mr_sbuf_puts(&b, delta);
        if (text) { mr_sbuf_puts(&b, delta && *delta ? ",\"content\":" : "\"content\":"); mr_sbuf_json_str(&b, text, n); }
        mr_sbuf_puts(&b, "}");
    } else {
        mr_sbuf_puts(&b, "\"text\":");
        mr_sbuf_json_str(&b, text ? text : "", text ? n : 0);
    }
    mr_sbuf_puts(&b, ",\"logprobs\":");
    if (c->n_lp || !c->q->logprobs) lp_take(c, &b);
    else mr_sbuf_puts(&b, "null");
    mr_sbuf_printf(&b, ",\"finish_reason\":%s%s%s}]", finish ? "\"" : "", finish ? finish : "null", finish ? "\"" : "");
    if (c->q->include_usage) mr_sbuf_puts(&b, ",\"usage\":null");
    if (finish) { mr_sbuf_puts(&b, ","); srv_put_approx(c->st, &b); } /* the setting the choice ended with */
    mr_sbuf_puts(&b, "}");
    if (b.oom) { /* a chunk lost would silently cut the text: end the stream with an error */
        srv_error(c->r, 500, "out of memory");
        c->r->broken = 1;
    } else mr_http_sse_send(c->r, b.p, b.n);
    mr_sbuf_free(&b);
}

static void anthropic_event(cctx *c, const char *event, mr_sbuf *b) {
    if (b->oom) {
        static const char oom[] = "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"out of memory\"}}";
        mr_http_sse_event(c->r, "error", oom, sizeof oom - 1);
        c->r->broken = 1;
    } else if (b->p) mr_http_sse_event(c->r, event, b->p, b->n);
    mr_sbuf_free(b);
}

static void emit_text(cctx *c, const char *t, size_t n) {
    if (!n) return;
    if (c->q->api != SRV_API_ANTHROPIC) { oai_chunk(c, NULL, t, n, NULL); return; }
    mr_sbuf b = {0};
    if (!c->text_block) {
        mr_sbuf_puts(&b, "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
        anthropic_event(c, "content_block_start", &b);
        c->text_block = 1;
    }
    mr_sbuf_puts(&b, "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":");
    mr_sbuf_json_str(&b, t, n);
    mr_sbuf_puts(&b, "}}");
    anthropic_event(c, "content_block_delta", &b);
}

/* Streams the reply text that is final: never the tool-call marker, a suffix that may grow into it,
 * or the newlines that may turn out to separate the calls from the content. */
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
        emit_text(c, t + c->sent, safe - c->sent);
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

static void put_call_json(mr_sbuf *b, const cctx *c, int k, const mr_chat_tool_call *call, int stream_index) {
    mr_sbuf_puts(b, "{");
    if (stream_index) mr_sbuf_printf(b, "\"index\":%d,", k);
    mr_sbuf_printf(b, "\"id\":\"call_%lu_%d_%d\",\"type\":\"function\",\"function\":{\"name\":", c->id, c->choice, k);
    mr_sbuf_json_str(b, call->name, strlen(call->name));
    mr_sbuf_puts(b, ",\"arguments\":");
    mr_sbuf_json_str(b, call->arguments, strlen(call->arguments));
    mr_sbuf_puts(b, "}}");
}

/* The end of a choice: tool calls parsed, the rest streamed or the choice recorded. */
static void choice_end(cctx *c, int finish) {
    const srv_req *q = c->q;
    mr_chat_tool_call calls[SRV_MAX_CALLS];
    size_t content_len = c->reply.n;
    int n_calls = 0;
    if (c->marker) {
        n_calls = mr_chat_parse_tool_calls(c->st->m, c->st->tmpl, c->reply.p ? c->reply.p : "", c->reply.n, &content_len,
                                           calls, SRV_MAX_CALLS);
        if (n_calls < 0) { n_calls = 0; content_len = c->reply.n; } /* malformed: all of it is text */
    }
    const char *text = c->reply.p ? c->reply.p : "";
    if (c->r->streaming) {
        if (content_len > c->sent) emit_text(c, text + c->sent, content_len - c->sent);
        c->sent = content_len;
        if (q->api == SRV_API_ANTHROPIC) {
            mr_sbuf b = {0};
            if (c->text_block) {
                mr_sbuf_puts(&b, "{\"type\":\"content_block_stop\",\"index\":0}");
                anthropic_event(c, "content_block_stop", &b);
            }
            for (int k = 0; k < n_calls; k++) {
                int idx = c->text_block + k;
                mr_sbuf_printf(&b, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"tool_use\","
                               "\"id\":\"toolu_%lu_%d\",\"name\":", idx, c->id, k);
                mr_sbuf_json_str(&b, calls[k].name, strlen(calls[k].name));
                mr_sbuf_puts(&b, ",\"input\":{}}}");
                anthropic_event(c, "content_block_start", &b);
                mr_sbuf_printf(&b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\","
                               "\"partial_json\":", idx);
                mr_sbuf_json_str(&b, calls[k].arguments, strlen(calls[k].arguments));
                mr_sbuf_puts(&b, "}}");
                anthropic_event(c, "content_block_delta", &b);
                mr_sbuf_printf(&b, "{\"type\":\"content_block_stop\",\"index\":%d}", idx);
                anthropic_event(c, "content_block_stop", &b);
            }
            mr_sbuf_printf(&b, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\",\"stop_sequence\":null},"
                           "\"usage\":{\"output_tokens\":%d},", anthropic_stop(finish, n_calls), c->n_gen);
            srv_put_approx(c->st, &b);
            mr_sbuf_puts(&b, "}");
            anthropic_event(c, "message_delta", &b);
        } else {
            if (n_calls) {
                mr_sbuf d = {0};
                mr_sbuf_puts(&d, "\"tool_calls\":[");
                for (int k = 0; k < n_calls; k++) {
                    if (k) mr_sbuf_puts(&d, ",");
                    put_call_json(&d, c, k, &calls[k], 1);
                }
                mr_sbuf_puts(&d, "]");
                if (d.oom) { srv_error(c->r, 500, "out of memory"); c->r->broken = 1; }
                else oai_chunk(c, d.p, NULL, 0, NULL);
                mr_sbuf_free(&d);
            }
            oai_chunk(c, "", NULL, 0, oai_finish(finish, n_calls));
        }
    } else if (q->api == SRV_API_ANTHROPIC) {
        mr_sbuf *b = &c->choices; /* one message: its content blocks */
        int blocks = 0;
        if (content_len) {
            mr_sbuf_puts(b, "{\"type\":\"text\",\"text\":");
            mr_sbuf_json_str(b, text, content_len);
            mr_sbuf_puts(b, "}");
            blocks++;
        }
        for (int k = 0; k < n_calls; k++, blocks++) {
            mr_sbuf_printf(b, "%s{\"type\":\"tool_use\",\"id\":\"toolu_%lu_%d\",\"name\":", blocks ? "," : "", c->id, k);
            mr_sbuf_json_str(b, calls[k].name, strlen(calls[k].name));
            mr_sbuf_printf(b, ",\"input\":%s}", calls[k].arguments);
        }
        mr_sbuf_printf(b, "],\"stop_reason\":\"%s\",\"stop_sequence\":null", anthropic_stop(finish, n_calls));
    } else {
        mr_sbuf *b = &c->choices;
        mr_sbuf_printf(b, "%s{\"index\":%d,", c->choice ? "," : "", c->choice);
        if (q->api == SRV_API_CHAT) {
            mr_sbuf_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":");
            if (n_calls && !content_len) mr_sbuf_puts(b, "null");
            else mr_sbuf_json_str(b, text, content_len);
            if (n_calls) {
                mr_sbuf_puts(b, ",\"tool_calls\":[");
                for (int k = 0; k < n_calls; k++) {
                    if (k) mr_sbuf_puts(b, ",");
                    put_call_json(b, c, k, &calls[k], 0);
                }
                mr_sbuf_puts(b, "]");
            }
            mr_sbuf_puts(b, "}");
        } else {
            mr_sbuf_puts(b, "\"text\":");
            if (q->echo && q->prompt) {
                mr_sbuf e = {0};
                mr_sbuf_puts(&e, q->prompt);
                mr_sbuf_add(&e, text, content_len);
                mr_sbuf_json_str(b, e.p ? e.p : "", e.n);
                mr_sbuf_free(&e);
            } else mr_sbuf_json_str(b, text, content_len);
        }
        mr_sbuf_puts(b, ",\"logprobs\":");
        lp_take(c, b);
        mr_sbuf_printf(b, ",\"finish_reason\":\"%s\"}", oai_finish(finish, n_calls));
    }
    mr_chat_tool_calls_free(calls, n_calls > 0 ? n_calls : 0);
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
    gp.sampler.seed = c->seed + (uint64_t)c->choice;
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
    c->t_prefill += mr_now() - t_pre;
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
    if (c->choice == 0) c->n_cached = reuse;
    mr_sbuf_free(&c->reply);
    c->sent = 0;
    c->text_block = 0;
    c->lp_offset = 0;
    if (c->forced) mr_sbuf_puts(&c->reply, c->forced);
    if (c->r->streaming && q->api == SRV_API_CHAT) oai_chunk(c, "\"role\":\"assistant\",\"content\":\"\"", NULL, 0, NULL);
    if (c->r->streaming && q->api == SRV_API_COMPLETIONS && q->echo && q->prompt) emit_text(c, q->prompt, strlen(q->prompt));
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
        if (q->logprobs && step.n_accepted) {
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
    c->n_gen += gs.n_gen;
    c->n_drafted += gs.n_drafted;
    c->n_draft_accepted += gs.n_draft_accepted;
    c->t_decode += mr_now() - t_dec;
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

static void put_usage(mr_sbuf *b, const cctx *c) {
    mr_sbuf_printf(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
                   "\"prompt_tokens_details\":{\"cached_tokens\":%d}},\"timings\":{\"cache_n\":%d,\"prompt_n\":%d,"
                   "\"prompt_ms\":%.3f,\"prompt_per_second\":%.3f,\"predicted_n\":%d,\"predicted_ms\":%.3f,"
                   "\"predicted_per_second\":%.3f,\"draft_n\":%d,\"draft_n_accepted\":%d}", c->n_prompt, c->n_gen,
                   c->n_prompt + c->n_gen, c->n_cached, c->n_cached, c->n_prompt - c->n_cached, 1e3 * c->t_prefill,
                   c->t_prefill > 0 ? (c->n_prompt - c->n_cached) / c->t_prefill : 0.0, c->n_gen, 1e3 * c->t_decode,
                   c->t_decode > 0 ? c->n_gen / c->t_decode : 0.0, c->n_drafted, c->n_draft_accepted);
}

static void stream_begin(cctx *c) {
    srv_approx_header(c->st, c->r); /* the setting when the stream starts; the last chunk has the final one */
    mr_http_sse_begin(c->r);
    if (c->q->api != SRV_API_ANTHROPIC) return;
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_%lu\",\"type\":\"message\",\"role\":\"assistant\","
                   "\"content\":[],\"model\":", c->id);
    put_model(&b, c->st);
    mr_sbuf_printf(&b, ",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":%d,\"output_tokens\":0},",
                   c->n_prompt);
    srv_put_approx(c->st, &b);
    mr_sbuf_puts(&b, "}}");
    anthropic_event(c, "message_start", &b);
    mr_sbuf_puts(&b, "{\"type\":\"ping\"}");
    anthropic_event(c, "ping", &b);
}

static void stream_end(cctx *c) {
    mr_sbuf b = {0};
    if (c->q->api == SRV_API_ANTHROPIC) {
        mr_sbuf_puts(&b, "{\"type\":\"message_stop\"}");
        anthropic_event(c, "message_stop", &b);
    } else {
        if (c->q->include_usage) {
            int chat = c->q->api == SRV_API_CHAT;
            mr_sbuf_printf(&b, "{\"id\":\"%s-%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":", chat ? "chatcmpl" : "cmpl",
                           c->id, chat ? "chat.completion.chunk" : "text_completion", c->created);
            put_model(&b, c->st);
            mr_sbuf_puts(&b, ",\"choices\":[],");
            put_usage(&b, c);
            mr_sbuf_puts(&b, ",");
            srv_put_approx(c->st, &b);
            mr_sbuf_puts(&b, "}");
            if (b.oom) { mr_sbuf_free(&b); srv_error(c->r, 500, "out of memory"); return; }
            mr_http_sse_send(c->r, b.p, b.n);
            mr_sbuf_free(&b);
        }
        mr_http_sse_send(c->r, "[DONE]", 6);
    }
    mr_http_sse_end(c->r);
}

static void reply_whole(cctx *c) {
    mr_sbuf b = {0};
    const srv_req *q = c->q;
    if (c->choices.oom || c->lp.oom || c->lp_vals.oom || c->lp_top.oom || c->lp_off.oom) { srv_error(c->r, 500, "out of memory"); return; }
    if (q->api == SRV_API_ANTHROPIC) {
        mr_sbuf_printf(&b, "{\"id\":\"msg_%lu\",\"type\":\"message\",\"role\":\"assistant\",\"model\":", c->id);
        put_model(&b, c->st);
        mr_sbuf_puts(&b, ",\"content\":[");
        mr_sbuf_add(&b, c->choices.p ? c->choices.p : "", c->choices.n);
        mr_sbuf_printf(&b, ",\"usage\":{\"input_tokens\":%d,\"output_tokens\":%d,\"cache_read_input_tokens\":%d,"
                       "\"cache_creation_input_tokens\":0},", c->n_prompt - c->n_cached, c->n_gen, c->n_cached);
        srv_put_approx(c->st, &b);
        mr_sbuf_puts(&b, "}");
    } else {
        int chat = q->api == SRV_API_CHAT;
        mr_sbuf_printf(&b, "{\"id\":\"%s-%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":", chat ? "chatcmpl" : "cmpl", c->id,
                       chat ? "chat.completion" : "text_completion", c->created);
        put_model(&b, c->st);
        mr_sbuf_printf(&b, ",\"system_fingerprint\":\"moerun-%s\",\"seed\":%llu,\"choices\":[", mr_version(),
                       (unsigned long long)c->seed);
        mr_sbuf_add(&b, c->choices.p ? c->choices.p : "", c->choices.n);
        mr_sbuf_puts(&b, "],");
        put_usage(&b, c);
        mr_sbuf_puts(&b, ",");
        srv_put_approx(c->st, &b);
        mr_sbuf_puts(&b, "}");
    }
    srv_approx_header(c->st, c->r);
    if (b.oom) srv_error(c->r, 500, "out of memory");
    else mr_http_reply(c->r, 200, "application/json", b.p, b.n);
    mr_sbuf_free(&b);
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
    c.created = (long)time(NULL);
    c.n_prompt = n;
    c.forced = forced;
    c.seed = q.seed_given ? q.sp.seed : random_seed();
    if (q.n_tools && q.tool_choice != SRV_TOOLS_NONE) c.marker = mr_chat_tool_marker(st->m, st->tmpl);
    c.blog = mr_malloc(sizeof(float) * (size_t)st->n_vocab);
    if (!c.blog) { srv_error(r, 500, "out of memory"); goto done; }
    int si = srv_acquire(st, r, toks, n);
    if (si < 0) goto done; /* the client left while queued */
    c.slot = &st->slots[si];
    pthread_mutex_lock(&st->qmu);
    c.id = ++st->req_id;
    pthread_mutex_unlock(&st->qmu);
    if (q.stream) stream_begin(&c);
    int rc = 0;
    if (st->can_batch) srv_step_join(st, 1); /* from here on the steps wait for this request */
    for (c.choice = 0; c.choice < q.n && rc == 0; c.choice++) rc = run_choice(&c, toks, n);
    if (st->can_batch) srv_step_join(st, -1);
    if (rc < 0) srv_error(r, 500, mr_last_error());
    else if (rc == 0 && q.stream) stream_end(&c);
    else if (rc == 0) reply_whole(&c);
    pthread_mutex_lock(&st->qmu);
    st->n_requests++;
    st->n_errors += rc < 0;
    st->n_aborted += rc > 0;
    st->n_prompt += (unsigned long long)n;
    st->n_cached += (unsigned long long)c.n_cached;
    st->n_gen += (unsigned long long)c.n_gen;
    st->prefill_s += c.t_prefill;
    st->decode_s += c.t_decode;
    pthread_mutex_unlock(&st->qmu);
    char spec[64] = "";
    if (c.n_drafted) snprintf(spec, sizeof spec, " (%d drafted, %d accepted)", c.n_drafted, c.n_draft_accepted);
    mr_log(1, "request %lu: prompt %d tokens (%d cached) %.2f s, %d choice%s, generated %d tokens %.2f tok/s%s%s\n", c.id, n,
           c.n_cached, c.t_prefill, q.n, q.n > 1 ? "s" : "", c.n_gen, c.t_decode > 0 ? c.n_gen / c.t_decode : 0.0, spec,
           rc > 0 ? ", client left" : rc < 0 ? ", failed" : "");
    srv_release(st, si);
done:
    free(c.blog);
    mr_sbuf_free(&c.reply);
    mr_sbuf_free(&c.choices);
    mr_sbuf_free(&c.lp);
    mr_sbuf_free(&c.lp_vals);
    mr_sbuf_free(&c.lp_top);
    mr_sbuf_free(&c.lp_off);
    free(toks);
    free(forced);
    srv_req_free(&q);
    mr_json_free(j);
}
