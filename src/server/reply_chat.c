/* The OpenAI chat.completion reply: whole ({"choices":[{"message":{...},"logprobs":..,
 * "finish_reason":..}]}) or streamed as chat.completion.chunk deltas. */
#include "server/reply.h"

#include <string.h>

#define ID_PREFIX "chatcmpl"

/* logprob entries collected so far as {"content":[...]} (then cleared), "null" when not asked */
static void put_lp(srv_reply *w, mr_sbuf *b) {
    if (!w->q->logprobs) { mr_sbuf_puts(b, "null"); return; }
    mr_sbuf_printf(b, "{\"content\":[%s]}", w->lp.p ? w->lp.p : "");
    mr_sbuf_free(&w->lp);
    w->n_lp = 0;
}

/* a streamed chunk: "delta":{fields, "content": text} */
static void chunk(srv_reply *w, const char *fields, const char *text, size_t n, const char *finish) {
    mr_sbuf b = {0};
    srv_oai_chunk_head(&b, w, ID_PREFIX, "chat.completion.chunk");
    mr_sbuf_puts(&b, "\"delta\":{");
    if (fields) mr_sbuf_puts(&b, fields);
    if (text) { mr_sbuf_puts(&b, fields && *fields ? ",\"content\":" : "\"content\":"); mr_sbuf_json_str(&b, text, n); }
    mr_sbuf_puts(&b, "}");
    srv_oai_chunk_tail(&b, w, put_lp, finish);
}

static void begin(srv_reply *w) {
    if (w->q->stream) srv_stream_open(w);
}

static void choice_begin(srv_reply *w) {
    mr_sbuf_free(&w->content);
    mr_sbuf_free(&w->reasoning);
    w->opened = 0;
    if (w->r->streaming) chunk(w, "\"role\":\"assistant\",\"content\":\"\"", NULL, 0, NULL);
}

static void delta(srv_reply *w, const char *text, size_t n) {
    if (!w->r->streaming) { mr_sbuf_add(&w->content, text, n); return; }
    if (n) chunk(w, NULL, text, n, NULL);
}

/* reasoning_content: in the message, or as deltas of its own */
static void reasoning(srv_reply *w, const char *text, size_t n) {
    if (!w->r->streaming) { mr_sbuf_add(&w->reasoning, text, n); return; }
    mr_sbuf d = {0};
    mr_sbuf_puts(&d, "\"reasoning_content\":");
    mr_sbuf_json_str(&d, text, n);
    if (d.oom) { srv_error(w->r, 500, "out of memory"); w->r->broken = 1; }
    else chunk(w, d.p, NULL, 0, NULL);
    mr_sbuf_free(&d);
}

static void put_bytes(mr_sbuf *b, const char *p, int n) {
    mr_sbuf_puts(b, "[");
    for (int i = 0; i < n; i++) mr_sbuf_printf(b, "%s%u", i ? "," : "", (unsigned char)p[i]);
    mr_sbuf_puts(b, "]");
}

static void logprob(srv_reply *w, const srv_logprob *lp) {
    mr_sbuf *b = &w->lp;
    if (w->n_lp) mr_sbuf_puts(b, ",");
    mr_sbuf_puts(b, "{\"token\":");
    mr_sbuf_json_str(b, lp->tok.piece, (size_t)lp->tok.len);
    mr_sbuf_printf(b, ",\"logprob\":%.6f,\"bytes\":", lp->tok.logprob);
    put_bytes(b, lp->tok.piece, lp->tok.len);
    mr_sbuf_puts(b, ",\"top_logprobs\":[");
    for (int t = 0; t < lp->n_top; t++) {
        mr_sbuf_puts(b, t ? ",{\"token\":" : "{\"token\":");
        mr_sbuf_json_str(b, lp->top[t].piece, (size_t)lp->top[t].len);
        mr_sbuf_printf(b, ",\"logprob\":%.6f,\"bytes\":", lp->top[t].logprob);
        put_bytes(b, lp->top[t].piece, lp->top[t].len);
        mr_sbuf_puts(b, "}");
    }
    mr_sbuf_puts(b, "]}");
    w->n_lp++;
}

static void put_call(mr_sbuf *b, const srv_reply *w, int k, const mr_chat_tool_call *call, int stream_index) {
    mr_sbuf_puts(b, "{");
    if (stream_index) mr_sbuf_printf(b, "\"index\":%d,", k);
    mr_sbuf_printf(b, "\"id\":\"call_%lu_%d_%d\",\"type\":\"function\",\"function\":{\"name\":", w->id, w->choice, k);
    mr_sbuf_json_str(b, call->name, strlen(call->name));
    mr_sbuf_puts(b, ",\"arguments\":");
    mr_sbuf_json_str(b, call->arguments, strlen(call->arguments));
    mr_sbuf_puts(b, "}}");
}

/* the message's head and content (null when the reply is only calls) */
static void open_message(srv_reply *w, int n_calls) {
    mr_sbuf *b = &w->choices;
    mr_sbuf_printf(b, "%s{\"index\":%d,", w->choice ? "," : "", w->choice);
    mr_sbuf_puts(b, "\"message\":{\"role\":\"assistant\",\"content\":");
    if (n_calls && !w->content.n) mr_sbuf_puts(b, "null");
    else mr_sbuf_json_str(b, w->content.p ? w->content.p : "", w->content.n);
    if (w->reasoning.n) {
        mr_sbuf_puts(b, ",\"reasoning_content\":");
        mr_sbuf_json_str(b, w->reasoning.p, w->reasoning.n);
    }
    w->opened = 1;
}

static void tool_calls(srv_reply *w, const mr_chat_tool_call *calls, int n) {
    mr_sbuf *b = &w->choices, d = {0};
    if (!w->r->streaming) {
        open_message(w, n);
        b = &w->choices;
    } else {
        b = &d;
    }
    mr_sbuf_puts(b, w->r->streaming ? "\"tool_calls\":[" : ",\"tool_calls\":[");
    for (int k = 0; k < n; k++) {
        if (k) mr_sbuf_puts(b, ",");
        put_call(b, w, k, &calls[k], w->r->streaming);
    }
    mr_sbuf_puts(b, "]");
    if (!w->r->streaming) return;
    if (d.oom) { srv_error(w->r, 500, "out of memory"); w->r->broken = 1; }
    else chunk(w, d.p, NULL, 0, NULL);
    mr_sbuf_free(&d);
}

static void choice_end(srv_reply *w, int finish, int n_calls) {
    if (w->r->streaming) { chunk(w, "", NULL, 0, srv_oai_finish(finish, n_calls)); return; }
    if (!w->opened) open_message(w, n_calls);
    mr_sbuf *b = &w->choices;
    mr_sbuf_puts(b, "}");
    mr_sbuf_puts(b, ",\"logprobs\":");
    put_lp(w, b);
    mr_sbuf_printf(b, ",\"finish_reason\":\"%s\"}", srv_oai_finish(finish, n_calls));
}

static void end(srv_reply *w) {
    if (w->q->stream) srv_oai_stream_end(w, ID_PREFIX, "chat.completion.chunk");
    else srv_oai_whole(w, ID_PREFIX, "chat.completion");
}

const srv_writer srv_writer_chat = {begin, choice_begin, delta, logprob, tool_calls, choice_end, end, reasoning};
