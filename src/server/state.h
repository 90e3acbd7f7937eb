/* The server's shared state: one model, one session (the prompt cache), the FIFO queue of requests
 * waiting for it, and counters for /metrics. server.c owns connections and small endpoints,
 * complete.c runs generations and writes the OpenAI and Anthropic replies. */
#ifndef MR_SERVER_STATE_H
#define MR_SERVER_STATE_H
#include "moerun.h"
#include "server/http.h"
#include "server/json.h"
#include "server/request.h"

#include <pthread.h>

typedef struct srv_waiter srv_waiter;

typedef struct {
    mr_model *m;
    mr_session *s;
    const mr_tokenizer *tok;
    int32_t *cache;          /* tokens evaluated in the session (== mr_session_n_past) */
    int n_cache;
    int n_ctx, n_vocab;
    const char *model_name, *api_key, *tmpl;
    double started;          /* mr_now() at start (uptime) */
    long started_wall;       /* time(NULL) at start ("created" of the model) */
    /* the model queue: one request at a time uses the session, the others wait in arrival order */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    int busy;
    srv_waiter *head, *tail;
    int n_waiting;
    /* counters (under qmu) */
    unsigned long req_id;
    unsigned long n_requests, n_errors, n_aborted;
    unsigned long long n_prompt, n_cached, n_gen;
    double prefill_s, decode_s;
} srv_state;

void srv_error(mr_http_req *r, int status, const char *msg);
/* Tokenize text (parse_special on); -1 and mr_last_error() on failure. *out is malloc'd. */
int srv_tokenize(const srv_state *st, const char *text, int add_special, int32_t **out);
int srv_acquire(srv_state *st, mr_http_req *r);
void srv_release(srv_state *st);
/* POST /v1/chat/completions, /v1/completions, /v1/messages */
void srv_complete(srv_state *st, mr_http_req *r, int api);
/* The chat prompt of q (tools included) as text; NULL with mr_last_error() on failure. */
char *srv_render_chat(const srv_state *st, const srv_req *q, int add_assistant);
#endif
