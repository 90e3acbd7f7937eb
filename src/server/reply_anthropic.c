/* The Anthropic message reply: whole ({"content":[text block, tool_use blocks],"stop_reason":..}) or
 * streamed as events (message_start, content blocks, message_delta, message_stop). One choice, no
 * logprobs. */
#include "server/reply.h"

#include <string.h>

static const char *stop_reason(int finish, int n_calls) {
    if (n_calls) return "tool_use";
    if (finish == MR_GEN_STOP) return "stop_sequence";
    return finish == MR_GEN_LENGTH || finish == MR_GEN_CONTEXT ? "max_tokens" : "end_turn";
}

/* sends b as an event (an error event, ending the stream, when b ran out of memory); clears b */
static void event(srv_reply *w, const char *name, mr_sbuf *b) {
    if (b->oom) {
        static const char oom[] = "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"out of memory\"}}";
        mr_http_sse_event(w->r, "error", oom, sizeof oom - 1);
        w->r->broken = 1;
    } else if (b->p) mr_http_sse_event(w->r, name, b->p, b->n);
    mr_sbuf_free(b);
}

static void begin(srv_reply *w) {
    if (!w->q->stream) return;
    srv_stream_open(w);
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_%lu\",\"type\":\"message\",\"role\":\"assistant\","
                   "\"content\":[],\"model\":", w->id);
    srv_put_model(&b, w);
    mr_sbuf_printf(&b, ",\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":%d,\"output_tokens\":0},",
                   w->n_prompt);
    srv_put_approx(w->sched, &b);
    mr_sbuf_puts(&b, "}}");
    event(w, "message_start", &b);
    mr_sbuf_puts(&b, "{\"type\":\"ping\"}");
    event(w, "ping", &b);
}

static void choice_begin(srv_reply *w) {
    mr_sbuf_free(&w->content);
    mr_sbuf_free(&w->reasoning);
    w->text_block = w->think_block = w->n_blocks = 0;
    w->opened = 0;
}

/* Thinking: a "thinking" block before the text, streamed as thinking_delta events */
static void reasoning(srv_reply *w, const char *text, size_t n) {
    if (!w->r->streaming) { mr_sbuf_add(&w->reasoning, text, n); return; }
    mr_sbuf b = {0};
    if (!w->think_block) {
        mr_sbuf_printf(&b, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\","
                       "\"signature\":\"\"}}", w->n_blocks);
        event(w, "content_block_start", &b);
        w->think_block = 1;
    }
    mr_sbuf_printf(&b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":", w->n_blocks);
    mr_sbuf_json_str(&b, text, n);
    mr_sbuf_puts(&b, "}}");
    event(w, "content_block_delta", &b);
}

/* The thinking block ends (before the text or the calls): streamed, its signature (none: the reasoning
 * is the model's own text) and stop events; whole, the block itself. */
static void close_thinking(srv_reply *w) {
    if (!w->r->streaming) {
        if (!w->reasoning.n) return;
        mr_sbuf_printf(&w->choices, "%s{\"type\":\"thinking\",\"thinking\":", w->n_blocks++ ? "," : "");
        mr_sbuf_json_str(&w->choices, w->reasoning.p, w->reasoning.n);
        mr_sbuf_puts(&w->choices, ",\"signature\":\"\"}");
        mr_sbuf_free(&w->reasoning);
        return;
    }
    if (!w->think_block) return;
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"\"}}",
                   w->n_blocks);
    event(w, "content_block_delta", &b);
    mr_sbuf_printf(&b, "{\"type\":\"content_block_stop\",\"index\":%d}", w->n_blocks++);
    event(w, "content_block_stop", &b);
    w->think_block = 0;
}

static void delta(srv_reply *w, const char *text, size_t n) {
    if (!w->r->streaming) { mr_sbuf_add(&w->content, text, n); return; }
    if (!n) return;
    close_thinking(w);
    mr_sbuf b = {0};
    if (!w->text_block) {
        mr_sbuf_printf(&b, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}", w->n_blocks);
        event(w, "content_block_start", &b);
        w->text_block = 1;
    }
    mr_sbuf_printf(&b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"text_delta\",\"text\":", w->n_blocks);
    mr_sbuf_json_str(&b, text, n);
    mr_sbuf_puts(&b, "}}");
    event(w, "content_block_delta", &b);
}

/* The thinking and text blocks end: streamed, their stop events; whole, the blocks themselves (when
 * there is text). Once per choice (opened). */
static void close_text(srv_reply *w) {
    if (w->opened) return;
    w->opened = 1;
    close_thinking(w);
    if (w->r->streaming) {
        if (!w->text_block) return;
        mr_sbuf b = {0};
        mr_sbuf_printf(&b, "{\"type\":\"content_block_stop\",\"index\":%d}", w->n_blocks++);
        event(w, "content_block_stop", &b);
        w->text_block = 0;
    } else if (w->content.n) {
        mr_sbuf_printf(&w->choices, "%s{\"type\":\"text\",\"text\":", w->n_blocks++ ? "," : "");
        mr_sbuf_json_str(&w->choices, w->content.p, w->content.n);
        mr_sbuf_puts(&w->choices, "}");
    }
}

static void tool_calls(srv_reply *w, const mr_chat_tool_call *calls, int n) {
    close_text(w);
    if (!w->r->streaming) {
        for (int k = 0; k < n; k++) {
            mr_sbuf_printf(&w->choices, "%s{\"type\":\"tool_use\",\"id\":\"toolu_%lu_%d\",\"name\":", w->n_blocks++ ? "," : "", w->id, k);
            mr_sbuf_json_str(&w->choices, calls[k].name, strlen(calls[k].name));
            mr_sbuf_printf(&w->choices, ",\"input\":%s}", calls[k].arguments);
        }
        return;
    }
    mr_sbuf b = {0};
    for (int k = 0; k < n; k++) {
        int idx = w->n_blocks++;
        mr_sbuf_printf(&b, "{\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"tool_use\","
                       "\"id\":\"toolu_%lu_%d\",\"name\":", idx, w->id, k);
        mr_sbuf_json_str(&b, calls[k].name, strlen(calls[k].name));
        mr_sbuf_puts(&b, ",\"input\":{}}}");
        event(w, "content_block_start", &b);
        mr_sbuf_printf(&b, "{\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\","
                       "\"partial_json\":", idx);
        mr_sbuf_json_str(&b, calls[k].arguments, strlen(calls[k].arguments));
        mr_sbuf_puts(&b, "}}");
        event(w, "content_block_delta", &b);
        mr_sbuf_printf(&b, "{\"type\":\"content_block_stop\",\"index\":%d}", idx);
        event(w, "content_block_stop", &b);
    }
}

static void choice_end(srv_reply *w, int finish, int n_calls) {
    close_text(w);
    if (!w->r->streaming) {
        mr_sbuf_printf(&w->choices, "],\"stop_reason\":\"%s\",\"stop_sequence\":null", stop_reason(finish, n_calls));
        return;
    }
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\",\"stop_sequence\":null},"
                   "\"usage\":{\"output_tokens\":%d},", stop_reason(finish, n_calls), w->n_gen);
    srv_put_approx(w->sched, &b);
    mr_sbuf_puts(&b, "}");
    event(w, "message_delta", &b);
}

static void end(srv_reply *w) {
    if (w->q->stream) {
        mr_sbuf b = {0};
        mr_sbuf_puts(&b, "{\"type\":\"message_stop\"}");
        event(w, "message_stop", &b);
        mr_http_sse_end(w->r);
        return;
    }
    if (w->choices.oom || w->content.oom || w->reasoning.oom) { srv_error(w->r, 500, "out of memory"); return; }
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"id\":\"msg_%lu\",\"type\":\"message\",\"role\":\"assistant\",\"model\":", w->id);
    srv_put_model(&b, w);
    mr_sbuf_puts(&b, ",\"content\":[");
    mr_sbuf_add(&b, w->choices.p ? w->choices.p : "", w->choices.n);
    mr_sbuf_printf(&b, ",\"usage\":{\"input_tokens\":%d,\"output_tokens\":%d,\"cache_read_input_tokens\":%d,"
                   "\"cache_creation_input_tokens\":0},", w->n_prompt - w->n_cached, w->n_gen, w->n_cached);
    srv_put_approx(w->sched, &b);
    mr_sbuf_puts(&b, "}");
    srv_approx_header(w->sched, w->r);
    if (b.oom) srv_error(w->r, 500, "out of memory");
    else mr_http_reply(w->r, 200, "application/json", b.p, b.n);
    mr_sbuf_free(&b);
}

const srv_writer srv_writer_anthropic = {begin, choice_begin, delta, NULL, tool_calls, choice_end, end, reasoning};
