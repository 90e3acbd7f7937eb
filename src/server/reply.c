/* The parts of the replies every writer shares: error replies, the approximation setting, the
 * OpenAI envelope (chunks, usage, the whole reply) used by the chat and completions writers. */
#include "server/reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_reply_free(srv_reply *w) {
    mr_sbuf_free(&w->content);
    mr_sbuf_free(&w->reasoning);
    mr_sbuf_free(&w->choices);
    mr_sbuf_free(&w->lp);
    mr_sbuf_free(&w->lp_vals);
    mr_sbuf_free(&w->lp_top);
    mr_sbuf_free(&w->lp_off);
}

void srv_error(mr_http_req *r, int status, const char *msg) {
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"error\":{\"message\":");
    mr_sbuf_json_str(&b, msg, strlen(msg));
    mr_sbuf_printf(&b, ",\"type\":\"%s\",\"code\":%d}}", status >= 500 ? "server_error" : "invalid_request_error", status);
    if (b.oom) { /* the message did not fit in memory: a fixed one */
        mr_sbuf_free(&b);
        static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":500}}";
        if (r->streaming) { mr_http_sse_send(r, oom, sizeof oom - 1); mr_http_sse_end(r); }
        else mr_http_reply(r, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    if (r->streaming) {
        mr_http_sse_send(r, b.p ? b.p : "{}", b.n);
        mr_http_sse_end(r);
    } else mr_http_reply(r, status, "application/json", b.p ? b.p : "{}", b.n);
    mr_sbuf_free(&b);
}

void srv_reply_json(mr_http_req *r, mr_sbuf *b) {
    if (b->oom) srv_error(r, 500, "out of memory");
    else mr_http_reply(r, 200, "application/json", b->p ? b->p : "{}", b->n);
    mr_sbuf_free(b);
}

void srv_put_approx(srv_sched *sc, mr_sbuf *b) {
    char buf[SRV_APPROX_LEN];
    srv_sched_approx(sc, buf, NULL);
    mr_sbuf_puts(b, "\"moerun\":{\"approx\":");
    mr_sbuf_json_str(b, buf, strlen(buf));
    mr_sbuf_puts(b, "}");
}

void srv_approx_header(srv_sched *sc, mr_http_req *r) {
    char buf[SRV_APPROX_LEN];
    srv_sched_approx(sc, buf, NULL);
    /* the spec is printable ASCII without CR/LF (mr_approx_format) */
    snprintf(r->extra_headers, sizeof r->extra_headers, "X-Moerun-Approx: %s\r\nAccess-Control-Expose-Headers: X-Moerun-Approx\r\n", buf);
}

void srv_put_model(mr_sbuf *b, const srv_reply *w) { mr_sbuf_json_str(b, w->model_name, strlen(w->model_name)); }

void srv_put_usage(mr_sbuf *b, const srv_reply *w) {
    mr_sbuf_printf(b, "\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d,"
                   "\"prompt_tokens_details\":{\"cached_tokens\":%d}},\"timings\":{\"cache_n\":%d,\"prompt_n\":%d,"
                   "\"prompt_ms\":%.3f,\"prompt_per_second\":%.3f,\"predicted_n\":%d,\"predicted_ms\":%.3f,"
                   "\"predicted_per_second\":%.3f,\"draft_n\":%d,\"draft_n_accepted\":%d}", w->n_prompt, w->n_gen,
                   w->n_prompt + w->n_gen, w->n_cached, w->n_cached, w->n_prompt - w->n_cached, 1e3 * w->t_prefill,
                   w->t_prefill > 0 ? (w->n_prompt - w->n_cached) / w->t_prefill : 0.0, w->n_gen, 1e3 * w->t_decode,
                   w->t_decode > 0 ? w->n_gen / w->t_decode : 0.0, w->n_drafted, w->n_draft_accepted);
}

const char *srv_oai_finish(int finish, int n_calls) {
    if (n_calls) return "tool_calls";
    return finish == MR_GEN_LENGTH || finish == MR_GEN_CONTEXT ? "length" : "stop";
}

void srv_oai_chunk_head(mr_sbuf *b, const srv_reply *w, const char *id_prefix, const char *object) {
    mr_sbuf_printf(b, "{\"id\":\"%s-%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":", id_prefix, w->id, object, w->created);
    srv_put_model(b, w);
    mr_sbuf_printf(b, ",\"system_fingerprint\":\"moerun-%s\",\"choices\":[{\"index\":%d,", mr_version(), w->choice);
}

void srv_oai_chunk_tail(mr_sbuf *b, srv_reply *w, void (*put_lp)(srv_reply *, mr_sbuf *), const char *finish) {
    mr_sbuf_puts(b, ",\"logprobs\":");
    if (w->n_lp || !w->q->logprobs) put_lp(w, b);
    else mr_sbuf_puts(b, "null");
    mr_sbuf_printf(b, ",\"finish_reason\":%s%s%s}]", finish ? "\"" : "", finish ? finish : "null", finish ? "\"" : "");
    if (w->q->include_usage) mr_sbuf_puts(b, ",\"usage\":null");
    if (finish) { mr_sbuf_puts(b, ","); srv_put_approx(w->sched, b); } /* the setting the choice ended with */
    mr_sbuf_puts(b, "}");
    if (b->oom) { /* a chunk lost would silently cut the text: end the stream with an error */
        srv_error(w->r, 500, "out of memory");
        w->r->broken = 1;
    } else mr_http_sse_send(w->r, b->p, b->n);
    mr_sbuf_free(b);
}

void srv_oai_stream_end(srv_reply *w, const char *id_prefix, const char *object) {
    if (w->q->include_usage) {
        mr_sbuf b = {0};
        mr_sbuf_printf(&b, "{\"id\":\"%s-%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":", id_prefix, w->id, object, w->created);
        srv_put_model(&b, w);
        mr_sbuf_puts(&b, ",\"choices\":[],");
        srv_put_usage(&b, w);
        mr_sbuf_puts(&b, ",");
        srv_put_approx(w->sched, &b);
        mr_sbuf_puts(&b, "}");
        if (b.oom) { mr_sbuf_free(&b); srv_error(w->r, 500, "out of memory"); return; }
        mr_http_sse_send(w->r, b.p, b.n);
        mr_sbuf_free(&b);
    }
    mr_http_sse_send(w->r, "[DONE]", 6);
    mr_http_sse_end(w->r);
}

void srv_oai_whole(srv_reply *w, const char *id_prefix, const char *object) {
    if (w->choices.oom || w->content.oom || w->reasoning.oom || w->lp.oom || w->lp_vals.oom || w->lp_top.oom || w->lp_off.oom) {
        srv_error(w->r, 500, "out of memory");
        return;
    }
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"id\":\"%s-%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":", id_prefix, w->id, object, w->created);
    srv_put_model(&b, w);
    mr_sbuf_printf(&b, ",\"system_fingerprint\":\"moerun-%s\",\"seed\":%llu,\"choices\":[", mr_version(), (unsigned long long)w->seed);
    mr_sbuf_add(&b, w->choices.p ? w->choices.p : "", w->choices.n);
    mr_sbuf_puts(&b, "],");
    srv_put_usage(&b, w);
    mr_sbuf_puts(&b, ",");
    srv_put_approx(w->sched, &b);
    mr_sbuf_puts(&b, "}");
    srv_approx_header(w->sched, w->r);
    if (b.oom) srv_error(w->r, 500, "out of memory");
    else mr_http_reply(w->r, 200, "application/json", b.p, b.n);
    mr_sbuf_free(&b);
}

void srv_stream_open(srv_reply *w) {
    srv_approx_header(w->sched, w->r); /* the setting when the stream starts; the last chunk has the final one */
    mr_http_sse_begin(w->r);
}
