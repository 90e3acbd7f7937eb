/* The OpenAI Responses API reply: the response object ({"object":"response","output":[message and
 * function_call items],"usage":..}) whole, or streamed as typed events, each with its
 * sequence_number: response.created, response.in_progress; per message item output_item.added,
 * content_part.added, output_text.delta*, output_text.done, content_part.done, output_item.done; per
 * call output_item.added, function_call_arguments.delta / .done, output_item.done; then
 * response.completed (response.incomplete when max_output_tokens or the context cut it). A reply's
 * reasoning (thinking) is a reasoning item before them (one reasoning_text part; streamed:
 * output_item.added, content_part.added, reasoning_text.delta*, reasoning_text.done,
 * content_part.done, output_item.done). The output items are kept (w->choices) for the final object
 * and the store (responses.c). One choice, no logprobs. */
#include "server/reply.h"
#include "server/responses.h"

#include <stdio.h>
#include <string.h>

/* sends b as event name with its sequence_number appended (when b ran out of memory, an error that
 * ends the stream: the OpenAI clients raise a data event with "error"); clears b. b holds
 * {"type":NAME,... without the closing brace. */
static void event(srv_reply *w, const char *name, mr_sbuf *b) {
    mr_sbuf_printf(b, ",\"sequence_number\":%d}", w->resp->seq++);
    if (b->oom) {
        srv_error(w->r, 500, "out of memory");
        w->r->broken = 1;
    } else mr_http_sse_event(w->r, name, b->p, b->n);
    mr_sbuf_free(b);
}

static void event_head(mr_sbuf *b, const char *name) { mr_sbuf_printf(b, "{\"type\":\"%s\"", name); }

static void put_json_or(mr_sbuf *b, const char *json, const char *def) { mr_sbuf_puts(b, json ? json : def); }

static void put_str_or_null(mr_sbuf *b, const char *s) {
    if (s) mr_sbuf_json_str(b, s, strlen(s));
    else mr_sbuf_puts(b, "null");
}

/* the response object; final: the output items and usage, else an empty output (in progress) */
static void put_response(mr_sbuf *b, const srv_reply *w, int final) {
    const srv_resp *rs = w->resp;
    const srv_req *q = w->q;
    const char *status = !final ? "in_progress" : rs->incomplete ? "incomplete" : "completed";
    char id[48];
    srv_resp_id(rs, w->id, id, sizeof id);
    mr_sbuf_printf(b, "{\"id\":\"%s\",\"object\":\"response\",\"created_at\":%ld,\"status\":\"%s\",\"background\":false,"
                   "\"error\":null,\"incomplete_details\":%s,\"instructions\":", id, w->created, status,
                   final && rs->incomplete ? "{\"reason\":\"max_output_tokens\"}" : "null");
    put_str_or_null(b, rs->instructions);
    if (q->max_tokens >= 0) mr_sbuf_printf(b, ",\"max_output_tokens\":%d", q->max_tokens);
    else mr_sbuf_puts(b, ",\"max_output_tokens\":null");
    mr_sbuf_puts(b, ",\"metadata\":");
    put_json_or(b, rs->metadata, "{}");
    mr_sbuf_puts(b, ",\"model\":");
    srv_put_model(b, w);
    mr_sbuf_puts(b, ",\"output\":[");
    if (final) mr_sbuf_add(b, w->choices.p ? w->choices.p : "", w->choices.n);
    mr_sbuf_printf(b, "],\"parallel_tool_calls\":%s,\"previous_response_id\":", q->parallel_calls ? "true" : "false");
    put_str_or_null(b, rs->prev_id);
    mr_sbuf_puts(b, ",\"reasoning\":{\"effort\":");
    put_str_or_null(b, q->effort);
    mr_sbuf_printf(b, ",\"summary\":null},\"store\":%s,\"temperature\":%g,\"text\":{\"format\":", rs->store_it ? "true" : "false",
                   (double)q->sp.temperature);
    put_json_or(b, rs->format, "{\"type\":\"text\"}");
    mr_sbuf_puts(b, "},\"tool_choice\":");
    put_json_or(b, rs->tool_choice, q->n_tools ? "\"auto\"" : "\"none\"");
    mr_sbuf_puts(b, ",\"tools\":");
    put_json_or(b, rs->tools, "[]");
    mr_sbuf_printf(b, ",\"top_p\":%g,\"truncation\":\"disabled\",\"usage\":", (double)q->sp.top_p);
    if (final)
        mr_sbuf_printf(b, "{\"input_tokens\":%d,\"input_tokens_details\":{\"cached_tokens\":%d},\"output_tokens\":%d,"
                       "\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":%d}", w->n_prompt, w->n_cached,
                       w->n_gen, w->n_prompt + w->n_gen);
    else mr_sbuf_puts(b, "null");
    mr_sbuf_puts(b, ",\"user\":null,");
    srv_put_approx(w->sched, b);
    mr_sbuf_puts(b, "}");
}

/* a lifecycle event: {"type":NAME,"response":{...}} */
static void response_event(srv_reply *w, const char *name, int final) {
    mr_sbuf b = {0};
    event_head(&b, name);
    mr_sbuf_puts(&b, ",\"response\":");
    put_response(&b, w, final);
    event(w, name, &b);
}

static void begin(srv_reply *w) {
    if (!w->q->stream) return;
    srv_stream_open(w);
    response_event(w, "response.created", 0);
    response_event(w, "response.in_progress", 0);
}

static void choice_begin(srv_reply *w) {
    mr_sbuf_free(&w->content);
    mr_sbuf_free(&w->reasoning);
    w->text_block = 0;
    w->think_block = 0;
    w->opened = 0;
}

/* the reasoning item; t NULL: in progress, no content part yet */
static void put_reasoning(mr_sbuf *b, const srv_reply *w, int idx, const char *status, const char *t, size_t n) {
    mr_sbuf_printf(b, "{\"id\":\"rs_%lu_%d\",\"type\":\"reasoning\",\"status\":\"%s\",\"summary\":[],\"content\":[", w->id, idx, status);
    if (t) {
        mr_sbuf_puts(b, "{\"type\":\"reasoning_text\",\"text\":");
        mr_sbuf_json_str(b, t, n);
        mr_sbuf_puts(b, "}");
    }
    mr_sbuf_puts(b, "]}");
}

/* the message item with text t (status: completed, incomplete, or in_progress with no content yet) */
static void put_message(mr_sbuf *b, const srv_reply *w, const char *status, const char *t, size_t n) {
    mr_sbuf_printf(b, "{\"id\":\"msg_%lu\",\"type\":\"message\",\"status\":\"%s\",\"role\":\"assistant\",\"content\":[", w->id, status);
    if (t) {
        mr_sbuf_puts(b, "{\"type\":\"output_text\",\"text\":");
        mr_sbuf_json_str(b, t, n);
        mr_sbuf_puts(b, ",\"annotations\":[],\"logprobs\":[]}");
    }
    mr_sbuf_puts(b, "]}");
}

/* streamed: the item fields of an event about output item idx */
static void item_ref(mr_sbuf *b, const srv_reply *w, const char *item_id, int idx) {
    mr_sbuf_printf(b, ",\"item_id\":\"%s_%lu", item_id, w->id);
    if (strcmp(item_id, "msg")) mr_sbuf_printf(b, "_%d", idx);
    mr_sbuf_printf(b, "\",\"output_index\":%d", idx);
}

/* the reasoning as it becomes final: kept for its item, streamed as deltas (the item opens first) */
static void reasoning(srv_reply *w, const char *text, size_t n) {
    mr_sbuf_add(&w->reasoning, text, n);
    if (!w->r->streaming || !n) return;
    const int idx = w->resp->n_out;
    mr_sbuf b = {0};
    if (!w->think_block) {
        w->think_block = 1;
        event_head(&b, "response.output_item.added");
        mr_sbuf_printf(&b, ",\"output_index\":%d,\"item\":", idx);
        put_reasoning(&b, w, idx, "in_progress", NULL, 0);
        event(w, "response.output_item.added", &b);
        event_head(&b, "response.content_part.added");
        item_ref(&b, w, "rs", idx);
        mr_sbuf_puts(&b, ",\"content_index\":0,\"part\":{\"type\":\"reasoning_text\",\"text\":\"\"}");
        event(w, "response.content_part.added", &b);
    }
    event_head(&b, "response.reasoning_text.delta");
    item_ref(&b, w, "rs", idx);
    mr_sbuf_puts(&b, ",\"content_index\":0,\"delta\":");
    mr_sbuf_json_str(&b, text, n);
    event(w, "response.reasoning_text.delta", &b);
}

/* The reasoning item ends (streamed: its done events) and joins the output; once, before the
 * answer's items, when there was reasoning. */
static void close_reasoning(srv_reply *w) {
    if (!w->reasoning.n || w->think_block == 2) return;
    const int idx = w->resp->n_out++;
    const char *t = w->reasoning.p, *status = w->resp->incomplete ? "incomplete" : "completed";
    const size_t n = w->reasoning.n;
    w->think_block = 2;
    if (w->r->streaming) {
        mr_sbuf b = {0};
        event_head(&b, "response.reasoning_text.done");
        item_ref(&b, w, "rs", idx);
        mr_sbuf_puts(&b, ",\"content_index\":0,\"text\":");
        mr_sbuf_json_str(&b, t, n);
        event(w, "response.reasoning_text.done", &b);
        event_head(&b, "response.content_part.done");
        item_ref(&b, w, "rs", idx);
        mr_sbuf_puts(&b, ",\"content_index\":0,\"part\":{\"type\":\"reasoning_text\",\"text\":");
        mr_sbuf_json_str(&b, t, n);
        mr_sbuf_puts(&b, "}");
        event(w, "response.content_part.done", &b);
        event_head(&b, "response.output_item.done");
        mr_sbuf_printf(&b, ",\"output_index\":%d,\"item\":", idx);
        put_reasoning(&b, w, idx, status, t, n);
        event(w, "response.output_item.done", &b);
    }
    if (idx) mr_sbuf_puts(&w->choices, ",");
    put_reasoning(&w->choices, w, idx, status, t, n);
}

/* the message item opens (streamed: its added events) */
static void open_message(srv_reply *w) {
    w->text_block = 1;
    if (!w->r->streaming) return;
    mr_sbuf b = {0};
    event_head(&b, "response.output_item.added");
    mr_sbuf_printf(&b, ",\"output_index\":%d,\"item\":", w->resp->n_out);
    put_message(&b, w, "in_progress", NULL, 0);
    event(w, "response.output_item.added", &b);
    event_head(&b, "response.content_part.added");
    item_ref(&b, w, "msg", w->resp->n_out);
    mr_sbuf_puts(&b, ",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":\"\",\"annotations\":[],\"logprobs\":[]}");
    event(w, "response.content_part.added", &b);
}

static void delta(srv_reply *w, const char *text, size_t n) {
    close_reasoning(w);
    mr_sbuf_add(&w->content, text, n);
    if (!w->r->streaming || !n) return;
    if (!w->text_block) open_message(w);
    mr_sbuf b = {0};
    event_head(&b, "response.output_text.delta");
    item_ref(&b, w, "msg", w->resp->n_out);
    mr_sbuf_puts(&b, ",\"content_index\":0,\"delta\":");
    mr_sbuf_json_str(&b, text, n);
    mr_sbuf_puts(&b, ",\"logprobs\":[]");
    event(w, "response.output_text.delta", &b);
}

/* The message item ends (streamed: its done events) and joins the output. Once per choice (opened);
 * after calls or reasoning, only when there was text. */
static void close_message(srv_reply *w, int n_calls) {
    close_reasoning(w);
    if (w->opened) return;
    w->opened = 1;
    if (!w->content.n && (n_calls || w->resp->n_out)) return;
    const char *t = w->content.p ? w->content.p : "", *status = w->resp->incomplete ? "incomplete" : "completed";
    const size_t n = w->content.n;
    if (w->r->streaming) {
        if (!w->text_block) open_message(w);
        mr_sbuf b = {0};
        event_head(&b, "response.output_text.done");
        item_ref(&b, w, "msg", w->resp->n_out);
        mr_sbuf_puts(&b, ",\"content_index\":0,\"text\":");
        mr_sbuf_json_str(&b, t, n);
        mr_sbuf_puts(&b, ",\"logprobs\":[]");
        event(w, "response.output_text.done", &b);
        event_head(&b, "response.content_part.done");
        item_ref(&b, w, "msg", w->resp->n_out);
        mr_sbuf_puts(&b, ",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":");
        mr_sbuf_json_str(&b, t, n);
        mr_sbuf_puts(&b, ",\"annotations\":[],\"logprobs\":[]}");
        event(w, "response.content_part.done", &b);
        event_head(&b, "response.output_item.done");
        mr_sbuf_printf(&b, ",\"output_index\":%d,\"item\":", w->resp->n_out);
        put_message(&b, w, status, t, n);
        event(w, "response.output_item.done", &b);
    }
    if (w->resp->n_out) mr_sbuf_puts(&w->choices, ",");
    put_message(&w->choices, w, status, t, n);
    w->resp->n_out++;
}

/* a function_call item; arguments NULL: in progress (no arguments yet) */
static void put_call(mr_sbuf *b, const srv_reply *w, int idx, const mr_chat_tool_call *call, int done) {
    mr_sbuf_printf(b, "{\"id\":\"fc_%lu_%d\",\"type\":\"function_call\",\"status\":\"%s\",\"arguments\":", w->id, idx,
                   done ? "completed" : "in_progress");
    if (done) mr_sbuf_json_str(b, call->arguments, strlen(call->arguments));
    else mr_sbuf_puts(b, "\"\"");
    mr_sbuf_printf(b, ",\"call_id\":\"call_%lu_%d\",\"name\":", w->id, idx);
    mr_sbuf_json_str(b, call->name, strlen(call->name));
    mr_sbuf_puts(b, "}");
}

static void stream_call(srv_reply *w, int idx, const mr_chat_tool_call *call) {
    mr_sbuf b = {0};
    event_head(&b, "response.output_item.added");
    mr_sbuf_printf(&b, ",\"output_index\":%d,\"item\":", idx);
    put_call(&b, w, idx, call, 0);
    event(w, "response.output_item.added", &b);
    event_head(&b, "response.function_call_arguments.delta");
    item_ref(&b, w, "fc", idx);
    mr_sbuf_puts(&b, ",\"delta\":");
    mr_sbuf_json_str(&b, call->arguments, strlen(call->arguments));
    event(w, "response.function_call_arguments.delta", &b);
    event_head(&b, "response.function_call_arguments.done");
    item_ref(&b, w, "fc", idx);
    mr_sbuf_puts(&b, ",\"name\":");
    mr_sbuf_json_str(&b, call->name, strlen(call->name));
    mr_sbuf_puts(&b, ",\"arguments\":");
    mr_sbuf_json_str(&b, call->arguments, strlen(call->arguments));
    event(w, "response.function_call_arguments.done", &b);
    event_head(&b, "response.output_item.done");
    mr_sbuf_printf(&b, ",\"output_index\":%d,\"item\":", idx);
    put_call(&b, w, idx, call, 1);
    event(w, "response.output_item.done", &b);
}

static void tool_calls(srv_reply *w, const mr_chat_tool_call *calls, int n) {
    close_message(w, n);
    for (int k = 0; k < n; k++) {
        const int idx = w->resp->n_out++;
        if (w->r->streaming) stream_call(w, idx, &calls[k]);
        if (idx) mr_sbuf_puts(&w->choices, ",");
        put_call(&w->choices, w, idx, &calls[k], 1);
    }
}

static void choice_end(srv_reply *w, int finish, int n_calls) {
    w->resp->incomplete = !n_calls && (finish == MR_GEN_LENGTH || finish == MR_GEN_CONTEXT);
    close_message(w, n_calls);
}

static void end(srv_reply *w) {
    if (w->choices.oom || w->content.oom || w->reasoning.oom) { srv_error(w->r, 500, "out of memory"); return; }
    char id[48];
    srv_resp_id(w->resp, w->id, id, sizeof id);
    srv_resp_save(w->resp, id, w->choices.p, w->choices.n);
    if (w->q->stream) {
        response_event(w, w->resp->incomplete ? "response.incomplete" : "response.completed", 1);
        mr_http_sse_end(w->r);
        return;
    }
    mr_sbuf b = {0};
    put_response(&b, w, 1);
    srv_approx_header(w->sched, w->r);
    srv_reply_json(w->r, &b);
}

const srv_writer srv_writer_responses = {begin, choice_begin, delta, NULL, tool_calls, choice_end, end, reasoning};
