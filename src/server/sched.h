/* The scheduler: the slots (a session and its prompt cache each), the FIFO queue of requests waiting
 * for one, the model (a ticket lock: one evaluation at a time, in arrival order), the batched steps
 * (decode tokens and prompt pieces of the active requests in one mr_sessions_eval_rows), the MoE
 * approximation setting switched while serving, and the counters of /metrics. The only way request
 * handlers reach the model; it knows nothing of HTTP or of the APIs. */
#ifndef MR_SERVER_SCHED_H
#define MR_SERVER_SCHED_H
#include "moerun.h"

#define SRV_APPROX_LEN 384

typedef struct srv_sched srv_sched;

/* A slot: one session and the tokens it holds (its prompt cache). The request that acquired it owns
 * the session and the cache until it releases it. */
typedef struct {
    mr_session *s;
    int32_t *cache;          /* tokens evaluated in the session (== mr_session_n_past) */
    int n_cache;
    int busy;                /* under the scheduler's lock */
} srv_slot;

typedef struct {
    int n_slots;             /* sessions (>= 1) */
    int n_ctx;               /* context of each (0: the model's) */
    int step_prompt;         /* prompt tokens per batched step (the budget the prefilling slots share) */
    const char *approx_file; /* the approximation control file (polled when the model is taken), or NULL */
    mr_pcache_params cache;  /* the prompt cache shared by the slots: none when ram_bytes is 0 and dir NULL */
} srv_sched_params;

/* NULL with mr_last_error() on failure. The model outlives the scheduler. */
srv_sched *srv_sched_new(mr_model *m, const srv_sched_params *p);
void srv_sched_free(srv_sched *sc);
int srv_sched_n_ctx(const srv_sched *sc);
/* steps of the slots go through one mr_sessions_eval_rows (more than one slot, and the architecture
 * can evaluate several sessions at once) */
int srv_sched_can_batch(const srv_sched *sc);
/* the architecture's state can be cut back (speculative decoding) */
int srv_sched_can_truncate(const srv_sched *sc);
/* the prompt cache shared by the slots (thread-safe), or NULL */
mr_pcache *srv_sched_pcache(const srv_sched *sc);

/* ---- a request's turn ---- */
/* A free slot for the prompt (the one holding the longest prefix of it), waiting in arrival order;
 * NULL if gone(user) said the client left while waiting. */
srv_slot *srv_acquire(srv_sched *sc, const int32_t *prompt, int n, int (*gone)(void *), void *user);
void srv_release(srv_sched *sc, srv_slot *slot);
/* Slot i if it is free and no request waits for a slot (release it with srv_release); NULL if busy. */
srv_slot *srv_acquire_slot(srv_sched *sc, int i);
/* the next request id (1, 2, ...) */
unsigned long srv_sched_next_id(srv_sched *sc);
/* Takes the model (a ticket lock: in arrival order); then polls the approximation control file, so a
 * change applies from this eval on. */
void srv_model_lock(srv_sched *sc);
void srv_model_unlock(srv_sched *sc);
/* Continuous batching (can_batch): a request joins the steps (delta 1) before its prefill and leaves
 * them (-1) after its decode loop; a step waits for every active request's submission (or 20 ms). */
void srv_step_join(srv_sched *sc, int delta);
/* The tokens of g's next step (pending, and a draft to verify when speculative) evaluated in one
 * step with the other requests' tokens; then mr_gen_batch_done runs the step. */
int srv_batch_eval(srv_sched *sc, srv_slot *slot, mr_gen *g);
/* The next piece of a prompt (ids[0..n), the rest of it) evaluated in one step beside the decode
 * tokens: returns how many tokens the step took (1..n; at most step_prompt), -1 on error. logits
 * ([n_vocab]) get the last token's when all n were taken. */
int srv_batch_prompt(srv_sched *sc, srv_slot *slot, const int32_t *ids, int n, float *logits);

/* a finished request, for the counters: rc 0 done, 1 the client left, -1 failed */
typedef struct {
    int rc;
    int n_prompt, n_cached, n_gen;
    double t_prefill, t_decode;
} srv_run_stats;
void srv_sched_done(srv_sched *sc, const srv_run_stats *s);

/* ---- state for the endpoints ---- */
typedef struct {
    unsigned long n_requests, n_errors, n_aborted;
    int n_busy, n_waiting, n_slots, n_ctx;
    unsigned long long n_steps, n_step_tokens, n_step_prompt, n_mixed;
    unsigned long long n_prompt, n_cached, n_gen;
    double prefill_s, decode_s;
    int kv;                  /* tokens held in the slots' sessions */
} srv_metrics;
/* the counters, consistent with each other */
void srv_sched_metrics(srv_sched *sc, srv_metrics *out);
/* per slot: busy and cached tokens (arrays of n_slots); a slot's count may be a step old */
void srv_sched_slots(srv_sched *sc, int *busy, int *n_cache);
/* the active approximation setting (as mr_approx_format writes it) and how often it changed */
void srv_sched_approx(srv_sched *sc, char buf[SRV_APPROX_LEN], unsigned long *changes);
/* Applies spec (mr_approx_parse, over the active setting) while holding the model, so from the next
 * eval on for every slot. 0, or -1 with mr_last_error(). */
int srv_sched_set_approx(srv_sched *sc, const char *spec, const char *source);
/* the control file's path, or NULL */
const char *srv_sched_approx_file(const srv_sched *sc);
#endif
