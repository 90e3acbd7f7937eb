/* Reply writers: one per API (reply_chat.c: OpenAI chat.completion, reply_completions.c: OpenAI
 * text_completion, reply_anthropic.c: Anthropic message, reply_responses.c: OpenAI response), each writing its reply whole or as a
 * stream. A request's run (complete.c) drives them in this order, without knowing the API:
 *   begin                                  once
 *   per choice: choice_begin, reasoning* (thinking), delta* and logprob* (as the text becomes final),
 *               tool_calls (when the reply had calls), choice_end
 *   end                                    once (the whole reply, or the stream's last events)
 * The text given to delta is final: a streamed writer sends it at once, a whole one keeps it for
 * choice_end. A new API is a new writer file and a line in complete.c's writer_for. Shared parts
 * (errors, the approximation setting, the OpenAI envelope both OpenAI writers use) are in reply.c,
 * which knows no writer. */
#ifndef MR_SERVER_REPLY_H
#define MR_SERVER_REPLY_H
#include "moerun.h"
#include "base/base.h"
#include "server/http.h"
#include "server/request.h"
#include "server/sched.h"

typedef struct srv_reply srv_reply;

/* one token's log-probabilities: the chosen token and its top alternatives (pieces as the tokenizer
 * writes them, up to 255 bytes) */
typedef struct {
    char piece[256];
    int len;
    double logprob;
} srv_lp_token;

typedef struct {
    srv_lp_token tok;
    srv_lp_token top[SRV_MAX_TOP_LOGPROBS];
    int n_top;
} srv_logprob;

typedef struct {
    void (*begin)(srv_reply *w);
    void (*choice_begin)(srv_reply *w);
    void (*delta)(srv_reply *w, const char *text, size_t n);
    void (*logprob)(srv_reply *w, const srv_logprob *lp);   /* NULL: the API has no logprobs */
    void (*tool_calls)(srv_reply *w, const mr_chat_tool_call *calls, int n); /* NULL: no tools */
    void (*choice_end)(srv_reply *w, int finish, int n_calls); /* finish: MR_GEN_* */
    void (*end)(srv_reply *w);
    /* the reply's reasoning as it becomes final, before its answer's deltas (thinking; NULL: the API
     * has no place for it and it is dropped) */
    void (*reasoning)(srv_reply *w, const char *text, size_t n);
} srv_writer;

/* One reply: what the writers share. The run fills the first block and the totals; the rest is the
 * writers' own. */
struct srv_reply {
    const srv_writer *w;
    mr_http_req *r;
    const srv_req *q;
    srv_sched *sched;            /* the approximation setting replies report */
    const char *model_name;
    unsigned long id;
    long created;
    uint64_t seed;
    int choice;
    /* totals (usage) */
    int n_prompt, n_cached, n_gen;
    int n_drafted, n_draft_accepted; /* speculative decoding */
    double t_prefill, t_decode;
    /* the writers' state */
    int text_block;              /* anthropic stream: the text block is open */
    int opened;                  /* whole reply: the current choice's head is written */
    mr_sbuf content;             /* whole reply: the current choice's text */
    mr_sbuf reasoning;           /* whole reply: the current choice's reasoning */
    int think_block;             /* anthropic stream: the thinking block is open */
    int n_blocks;                /* anthropic: content blocks of the reply closed so far */
    mr_sbuf lp;                  /* chat: logprob entries; completions: "tokens" array items */
    mr_sbuf lp_vals, lp_top, lp_off; /* completions: token_logprobs, top_logprobs, text_offset */
    int n_lp;
    size_t lp_offset;
    mr_sbuf choices;             /* whole reply: the choices (OpenAI) or content blocks (Anthropic);
                                  * Responses: the output items */
    struct srv_resp *resp;       /* Responses: the request's own fields and the writer's state */
};

/* the writers (the request's api picks one: complete.c) */
extern const srv_writer srv_writer_chat, srv_writer_completions, srv_writer_anthropic, srv_writer_responses;
void srv_reply_free(srv_reply *w);

/* An error reply {"error":{"message":..,"type":..,"code":status}} (as the stream's last event when
 * streaming). */
void srv_error(mr_http_req *r, int status, const char *msg);
/* b as a 200 application/json reply (500 when b ran out of memory); frees b. */
void srv_reply_json(mr_http_req *r, mr_sbuf *b);
/* The active approximation setting in a response: "moerun":{"approx":"SPEC"} (SPEC as
 * mr_approx_format writes it, "off" when exact), and the X-Moerun-Approx header line. */
void srv_put_approx(srv_sched *sc, mr_sbuf *b);
void srv_approx_header(srv_sched *sc, mr_http_req *r);

/* ---- shared by the writers (reply.c) ---- */
void srv_put_model(mr_sbuf *b, const srv_reply *w);
/* "usage":{...},"timings":{...} of the OpenAI replies */
void srv_put_usage(mr_sbuf *b, const srv_reply *w);
const char *srv_oai_finish(int finish, int n_calls);
/* A streamed OpenAI chunk: head writes {"id":..,"object":..,..,"choices":[{"index":N, and tail the
 * logprobs (put_lp: the writer's, when some were collected or none asked), finish_reason, usage and
 * the setting, then sends it (a chunk that ran out of memory ends the stream with an error). */
void srv_oai_chunk_head(mr_sbuf *b, const srv_reply *w, const char *id_prefix, const char *object);
void srv_oai_chunk_tail(mr_sbuf *b, srv_reply *w, void (*put_lp)(srv_reply *, mr_sbuf *), const char *finish);
/* The end of an OpenAI stream: the usage chunk (include_usage) and [DONE]. */
void srv_oai_stream_end(srv_reply *w, const char *id_prefix, const char *object);
/* The whole OpenAI reply around the choices written so far. */
void srv_oai_whole(srv_reply *w, const char *id_prefix, const char *object);
/* Opens the stream (SSE headers with the setting it starts with). */
void srv_stream_open(srv_reply *w);
#endif
