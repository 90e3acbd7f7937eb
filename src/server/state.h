/* The server's shared state: one model, one session (the prompt cache), the FIFO queue of requests
 * waiting for it, and counters for /metrics. server.c owns connections and small endpoints,
 * complete.c runs generations, the writers (reply.h) write the replies. */
#ifndef MR_SERVER_STATE_H
#define MR_SERVER_STATE_H
#include "moerun.h"
#include "server/http.h"
#include "json/json.h"
#include "server/request.h"
#include "server/reply.h"

#include <pthread.h>

typedef struct srv_waiter srv_waiter;
typedef struct srv_entry srv_entry;

/* A slot: one session and the tokens it holds (its prompt cache). */
typedef struct {
    mr_session *s;
    int32_t *cache;          /* tokens evaluated in the session (== mr_session_n_past) */
    int n_cache;
    int busy;                /* under qmu */
} srv_slot;

typedef struct srv_state {
    mr_model *m;
    const mr_tokenizer *tok;
    srv_slot *slots;
    int n_slots;
    int can_batch;           /* steps of the slots (decode tokens and prompt pieces) go through one mr_sessions_eval_rows */
    int step_prompt;         /* prompt tokens per step (the budget shared by the prefilling slots) */
    int n_ctx, n_vocab;
    int spec_max, spec_ngram;  /* speculative decoding: the server's default draft length (0: off), n-gram size */
    const char *model_name, *api_key, *admin_key, *tmpl;
    /* MoE approximations switched while serving (POST /v1/admin/moe, the control file): set only while
     * holding the model, so never during an eval; approx[] is the active setting as responses report
     * it (under qmu) */
    mr_approx_file *approx_file;
    char approx[256];
    unsigned long approx_changes;
    double started;          /* mr_now() at start (uptime) */
    long started_wall;       /* time(NULL) at start ("created" of the model) */
    /* the slot queue: requests get a free slot in arrival order (n_busy <= n_slots) */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    int n_busy;
    srv_waiter *head, *tail;
    int n_waiting;
    /* the model: one evaluation at a time, taken in arrival order (a ticket lock), so prefill chunks
     * and batched decode steps alternate */
    pthread_mutex_t mmu;
    pthread_cond_t mcv;
    unsigned long m_next, m_serving;
    /* the batcher (under bmu): decode tokens and prompt pieces submitted by the active requests (in
     * their prefill or decode loop), evaluated together; a FIFO queue */
    pthread_mutex_t bmu;
    pthread_cond_t bcv;
    srv_entry *sub, *sub_tail;
    int n_sub, n_active, stepping;
    unsigned long long n_steps, n_step_tokens, n_step_prompt, n_mixed; /* (under qmu) */
    /* counters (under qmu) */
    unsigned long req_id;
    unsigned long n_requests, n_errors, n_aborted;
    unsigned long long n_prompt, n_cached, n_gen;
    double prefill_s, decode_s;
} srv_state;

/* Tokenize text (parse_special on); -1 and mr_last_error() on failure. *out is malloc'd. */
int srv_tokenize(const srv_state *st, const char *text, int add_special, int32_t **out);
/* A free slot for the prompt (the one holding the longest prefix of it), waiting in arrival order;
 * -1 if the client left while waiting. */
int srv_acquire(srv_state *st, mr_http_req *r, const int32_t *prompt, int n);
void srv_release(srv_state *st, int slot);
/* Takes the model (a ticket lock: in arrival order); then polls the approximation control file, so a
 * change applies from this eval on. */
void srv_model_lock(srv_state *st);
void srv_model_unlock(srv_state *st);
/* Continuous batching (can_batch): a request joins the steps (delta 1) before its prefill and leaves
 * them (-1) after its decode loop; a step waits for every active request's submission (or 20 ms). */
void srv_step_join(srv_state *st, int delta);
/* The tokens of g's next step (pending, and a draft to verify when speculative) evaluated in one
 * step with the other requests' tokens; then mr_gen_batch_done runs the step. */
int srv_batch_eval(srv_state *st, srv_slot *slot, mr_gen *g);
/* The next piece of a prompt (ids[0..n), the rest of it) evaluated in one step beside the decode
 * tokens: returns how many tokens the step took (1..n; at most step_prompt), -1 on error. logits
 * ([n_vocab]) get the last token's when all n were taken. */
int srv_batch_prompt(srv_state *st, srv_slot *slot, const int32_t *ids, int n, float *logits);
/* POST /v1/chat/completions, /v1/completions, /v1/messages */
void srv_complete(srv_state *st, mr_http_req *r, int api);
/* The chat prompt of q (tools included) as text; NULL with mr_last_error() on failure. */
char *srv_render_chat(const srv_state *st, const srv_req *q, int add_assistant);
#endif
