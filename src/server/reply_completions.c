/* The OpenAI text_completion reply: whole ({"choices":[{"text":..,"logprobs":..,"finish_reason":..}]})
 * or streamed as text_completion chunks. Logprobs are the legacy parallel arrays. No tool calls. */
#include "server/reply.h"

#include <string.h>

#define ID_PREFIX "cmpl"

/* {"tokens":[..],"token_logprobs":[..],"top_logprobs":[..],"text_offset":[..]} collected so far (then
 * cleared), "null" when not asked */
static void put_lp(srv_reply *w, mr_sbuf *b) {
    if (!w->q->logprobs) { mr_sbuf_puts(b, "null"); return; }
    mr_sbuf_printf(b, "{\"tokens\":[%s],\"token_logprobs\":[%s],\"top_logprobs\":[%s],\"text_offset\":[%s]}",
                   w->lp.p ? w->lp.p : "", w->lp_vals.p ? w->lp_vals.p : "", w->lp_top.p ? w->lp_top.p : "",
                   w->lp_off.p ? w->lp_off.p : "");
    mr_sbuf_free(&w->lp);
    mr_sbuf_free(&w->lp_vals);
    mr_sbuf_free(&w->lp_top);
    mr_sbuf_free(&w->lp_off);
    w->n_lp = 0;
}

static void chunk(srv_reply *w, const char *text, size_t n, const char *finish) {
    mr_sbuf b = {0};
    srv_oai_chunk_head(&b, w, ID_PREFIX, "text_completion");
    mr_sbuf_puts(&b, "\"text\":");
    mr_sbuf_json_str(&b, text, n);
    srv_oai_chunk_tail(&b, w, put_lp, finish);
}

static void begin(srv_reply *w) {
    if (w->q->stream) srv_stream_open(w);
}

static void delta(srv_reply *w, const char *text, size_t n) {
    if (!w->r->streaming) { mr_sbuf_add(&w->content, text, n); return; }
    if (n) chunk(w, text, n, NULL);
}

/* echo: a streamed reply starts with the prompt text (a whole one gets it in choice_end) */
static void choice_begin(srv_reply *w) {
    mr_sbuf_free(&w->content);
    w->lp_offset = 0;
    if (w->r->streaming && w->q->echo && w->q->prompt) delta(w, w->q->prompt, strlen(w->q->prompt));
}

static void logprob(srv_reply *w, const srv_logprob *lp) {
    const char *sep = w->n_lp ? "," : "";
    mr_sbuf_puts(&w->lp, sep);
    mr_sbuf_json_str(&w->lp, lp->tok.piece, (size_t)lp->tok.len);
    mr_sbuf_printf(&w->lp_vals, "%s%.6f", sep, lp->tok.logprob);
    mr_sbuf_printf(&w->lp_off, "%s%zu", sep, w->lp_offset);
    mr_sbuf_printf(&w->lp_top, "%s{", sep);
    for (int t = 0; t < lp->n_top; t++) {
        if (t) mr_sbuf_puts(&w->lp_top, ",");
        mr_sbuf_json_str(&w->lp_top, lp->top[t].piece, (size_t)lp->top[t].len);
        mr_sbuf_printf(&w->lp_top, ":%.6f", lp->top[t].logprob);
    }
    mr_sbuf_puts(&w->lp_top, "}");
    w->lp_offset += (size_t)lp->tok.len;
    w->n_lp++;
}

static void choice_end(srv_reply *w, int finish, int n_calls) {
    if (w->r->streaming) { chunk(w, "", 0, srv_oai_finish(finish, n_calls)); return; }
    mr_sbuf *b = &w->choices;
    const char *text = w->content.p ? w->content.p : "";
    mr_sbuf_printf(b, "%s{\"index\":%d,", w->choice ? "," : "", w->choice);
    mr_sbuf_puts(b, "\"text\":");
    if (w->q->echo && w->q->prompt) {
        mr_sbuf e = {0};
        mr_sbuf_puts(&e, w->q->prompt);
        mr_sbuf_add(&e, text, w->content.n);
        mr_sbuf_json_str(b, e.p ? e.p : "", e.n);
        mr_sbuf_free(&e);
    } else mr_sbuf_json_str(b, text, w->content.n);
    mr_sbuf_puts(b, ",\"logprobs\":");
    put_lp(w, b);
    mr_sbuf_printf(b, ",\"finish_reason\":\"%s\"}", srv_oai_finish(finish, n_calls));
}

static void end(srv_reply *w) {
    if (w->q->stream) srv_oai_stream_end(w, ID_PREFIX, "text_completion");
    else srv_oai_whole(w, ID_PREFIX, "text_completion");
}

const srv_writer srv_writer_completions = {begin, choice_begin, delta, logprob, NULL, choice_end, end, NULL};
