/* The scheduler (sched.h): slot queue, the model's ticket lock, the batcher, the approximation
 * setting and the counters. Three locks, never nested: qmu (slots, queue, counters, setting), mmu
 * (the ticket lock's counters), bmu (the batcher's queue). */
#include "server/sched.h"
#include "base/base.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct srv_waiter srv_waiter;
typedef struct srv_entry srv_entry;
struct srv_waiter { srv_waiter *next; int granted; };

struct srv_sched {
    mr_model *m;
    mr_pcache *pcache;       /* shared by the slots, or NULL */
    srv_slot *slots;
    int n_slots;
    int can_batch;           /* steps of the slots (decode tokens and prompt pieces) go through one mr_sessions_eval_rows */
    int step_prompt;         /* prompt tokens per step (the budget shared by the prefilling slots) */
    int n_ctx, n_vocab;
    /* MoE approximations switched while serving (POST /v1/admin/moe, the control file): set only while
     * holding the model, so never during an eval; approx[] is the active setting as responses report
     * it (under qmu) */
    mr_approx_file *approx_file;
    char approx[SRV_APPROX_LEN];
    unsigned long approx_changes;
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
};

/* after the model's setting changed (the caller holds the model): the text responses report */
static void approx_changed(srv_sched *sc, const char *source) {
    mr_approx_params p;
    mr_model_get_approx(sc->m, &p);
    char buf[SRV_APPROX_LEN];
    mr_approx_format(&p, buf, sizeof buf);
    pthread_mutex_lock(&sc->qmu);
    memcpy(sc->approx, buf, sizeof buf);
    sc->approx_changes++;
    pthread_mutex_unlock(&sc->qmu);
    mr_log(1, "moe approx (%s): %s\n", source, buf);
}

srv_sched *srv_sched_new(mr_model *m, const srv_sched_params *p) {
    srv_sched *sc = mr_calloc(1, sizeof *sc);
    if (!sc) { mr_set_error("server: out of memory"); return NULL; }
    sc->m = m;
    pthread_mutex_init(&sc->qmu, NULL);
    pthread_cond_init(&sc->qcv, NULL);
    pthread_mutex_init(&sc->mmu, NULL);
    pthread_cond_init(&sc->mcv, NULL);
    pthread_mutex_init(&sc->bmu, NULL);
    pthread_cond_init(&sc->bcv, NULL);
    sc->n_vocab = mr_model_n_vocab(m);
    sc->n_slots = p->n_slots > 0 ? p->n_slots : 1;
    sc->can_batch = sc->n_slots > 1 && mr_model_can_batch(m);
    sc->step_prompt = p->step_prompt > 0 ? p->step_prompt : MR_SERVER_STEP_PROMPT;
    sc->slots = mr_calloc((size_t)sc->n_slots, sizeof *sc->slots);
    if (!sc->slots) { mr_set_error("server: out of memory"); goto fail; }
    for (int i = 0; i < sc->n_slots; i++) {
        if (!(sc->slots[i].s = mr_session_new(m, p->n_ctx))) goto fail;
        sc->n_ctx = mr_session_n_ctx(sc->slots[i].s);
        if (!(sc->slots[i].cache = mr_malloc(sizeof(int32_t) * (size_t)sc->n_ctx))) { mr_set_error("server: out of memory"); goto fail; }
    }
    if ((p->cache.ram_bytes || p->cache.dir) && !(sc->pcache = mr_pcache_new(m, &p->cache))) goto fail;
    mr_approx_params ap;
    mr_model_get_approx(m, &ap);
    mr_approx_format(&ap, sc->approx, sizeof sc->approx);
    if (p->approx_file) {
        if (!(sc->approx_file = mr_approx_file_open(p->approx_file))) goto fail;
        int arc = mr_approx_file_poll(sc->approx_file, m); /* a file already there applies from the start */
        if (arc > 0) approx_changed(sc, p->approx_file);
        else if (arc < 0) mr_log(0, "warning: %s\n", mr_last_error());
    }
    return sc;
fail:
    srv_sched_free(sc);
    return NULL;
}

void srv_sched_free(srv_sched *sc) {
    if (!sc) return;
    for (int i = 0; sc->slots && i < sc->n_slots; i++) {
        free(sc->slots[i].cache);
        mr_session_free(sc->slots[i].s);
    }
    free(sc->slots);
    mr_pcache_free(sc->pcache);
    mr_approx_file_free(sc->approx_file);
    pthread_mutex_destroy(&sc->qmu);
    pthread_cond_destroy(&sc->qcv);
    pthread_mutex_destroy(&sc->mmu);
    pthread_cond_destroy(&sc->mcv);
    pthread_mutex_destroy(&sc->bmu);
    pthread_cond_destroy(&sc->bcv);
    free(sc);
}

int srv_sched_n_ctx(const srv_sched *sc) { return sc->n_ctx; }
int srv_sched_can_batch(const srv_sched *sc) { return sc->can_batch; }
int srv_sched_can_truncate(const srv_sched *sc) { return mr_session_can_truncate(sc->slots[0].s); }
mr_pcache *srv_sched_pcache(const srv_sched *sc) { return sc->pcache; }
const char *srv_sched_approx_file(const srv_sched *sc) { return sc->approx_file ? mr_approx_file_path(sc->approx_file) : NULL; }

/* ---- slots ---- */

static int common_prefix(const srv_slot *sl, const int32_t *p, int n) {
    int k = 0;
    while (k < sl->n_cache && k < n && sl->cache[k] == p[k]) k++;
    return k;
}

srv_slot *srv_acquire(srv_sched *sc, const int32_t *prompt, int n, int (*gone)(void *), void *user) {
    srv_waiter w = {NULL, 0};
    pthread_mutex_lock(&sc->qmu);
    if (sc->n_busy < sc->n_slots && !sc->head) {
        sc->n_busy++;
    } else {
        if (sc->tail) sc->tail->next = &w;
        else sc->head = &w;
        sc->tail = &w;
        sc->n_waiting++;
        while (!w.granted) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 250000000;
            if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
            pthread_cond_timedwait(&sc->qcv, &sc->qmu, &ts);
            if (!w.granted && gone(user)) {
                srv_waiter **pp = &sc->head, *prev = NULL;
                while (*pp != &w) { prev = *pp; pp = &(*pp)->next; }
                *pp = w.next;
                if (sc->tail == &w) sc->tail = prev;
                sc->n_waiting--;
                sc->n_aborted++;
                pthread_mutex_unlock(&sc->qmu);
                return NULL;
            }
        }
        sc->n_waiting--;
    }
    /* a permit is held: some slot is free; take the one whose cache shares most with the prompt */
    int best = -1, best_k = -1;
    for (int i = 0; i < sc->n_slots; i++) {
        if (sc->slots[i].busy) continue;
        int k = common_prefix(&sc->slots[i], prompt, n);
        if (k > best_k) { best = i; best_k = k; }
    }
    sc->slots[best].busy = 1;
    pthread_mutex_unlock(&sc->qmu);
    return &sc->slots[best];
}

void srv_release(srv_sched *sc, srv_slot *slot) {
    pthread_mutex_lock(&sc->qmu);
    slot->busy = 0;
    srv_waiter *w = sc->head;
    if (w) {
        sc->head = w->next;
        if (!sc->head) sc->tail = NULL;
        w->granted = 1; /* the permit is handed over */
        pthread_cond_broadcast(&sc->qcv);
    } else sc->n_busy--;
    pthread_mutex_unlock(&sc->qmu);
}

srv_slot *srv_acquire_slot(srv_sched *sc, int i) {
    srv_slot *sl = NULL;
    pthread_mutex_lock(&sc->qmu);
    if (i >= 0 && i < sc->n_slots && !sc->slots[i].busy && sc->n_busy < sc->n_slots && !sc->head) {
        sc->n_busy++; /* a permit, as srv_acquire takes: srv_release hands it on */
        sl = &sc->slots[i];
        sl->busy = 1;
    }
    pthread_mutex_unlock(&sc->qmu);
    return sl;
}

unsigned long srv_sched_next_id(srv_sched *sc) {
    pthread_mutex_lock(&sc->qmu);
    unsigned long id = ++sc->req_id;
    pthread_mutex_unlock(&sc->qmu);
    return id;
}

/* ---- the model ---- */

void srv_model_lock(srv_sched *sc) {
    pthread_mutex_lock(&sc->mmu);
    unsigned long t = sc->m_next++;
    while (sc->m_serving != t) pthread_cond_wait(&sc->mcv, &sc->mmu);
    pthread_mutex_unlock(&sc->mmu);
    if (sc->approx_file) {
        int rc = mr_approx_file_poll(sc->approx_file, sc->m);
        if (rc > 0) approx_changed(sc, mr_approx_file_path(sc->approx_file));
        else if (rc < 0) mr_log(0, "warning: %s\n", mr_last_error());
    }
}

void srv_model_unlock(srv_sched *sc) {
    pthread_mutex_lock(&sc->mmu);
    sc->m_serving++;
    pthread_cond_broadcast(&sc->mcv);
    pthread_mutex_unlock(&sc->mmu);
}

/* ---- batched steps ---- */

struct srv_entry {
    srv_entry *next;
    mr_session *s;
    const int32_t *ids;
    int n;                   /* tokens offered */
    int prompt;              /* the rest of a prompt: a step takes its first `taken` tokens (at most the budget) */
    float *logits;           /* [rows][n_vocab] of the last rows tokens offered, once they are evaluated */
    int rows;                /* 1; a decode entry with a draft to verify: the draft's length + 1 */
    int taken;               /* tokens the step evaluated */
    int done, rc;
    char err[256];
};

/* The leader's step: the chosen entries in one mr_sessions_eval_rows; logits only for decode tokens
 * (and the drafts they verify) and a prompt's last token. */
static void batch_step(srv_sched *sc, srv_entry *list) {
    int n = 0, nw = 0, n_prompt = 0;
    for (srv_entry *e = list; e; e = e->next) {
        n += e->taken;
        nw += !e->prompt || e->taken == e->n ? e->rows : 0;
        if (e->prompt) n_prompt += e->taken;
    }
    mr_session **ss = mr_malloc(sizeof *ss * (size_t)n);
    int32_t *toks = mr_malloc(sizeof *toks * (size_t)n);
    uint8_t *want = mr_malloc((size_t)n);
    float *lg = nw ? mr_malloc(sizeof(float) * (size_t)nw * (size_t)sc->n_vocab) : NULL;
    int rc = -1;
    if (ss && toks && want && (lg || !nw)) {
        int k = 0;
        for (srv_entry *e = list; e; e = e->next)
            for (int i = 0; i < e->taken; i++, k++) {
                ss[k] = e->s;
                toks[k] = e->ids[i];
                want[k] = i >= e->n - e->rows;
            }
        srv_model_lock(sc);
        rc = mr_sessions_eval_rows(ss, toks, n, want, lg);
        srv_model_unlock(sc);
    } else mr_set_error("server: out of memory");
    int r = 0;
    for (srv_entry *e = list; e; e = e->next) {
        e->rc = rc;
        if (rc) snprintf(e->err, sizeof e->err, "%s", mr_last_error());
        else if (e->taken == e->n) {
            memcpy(e->logits, lg + (size_t)r * sc->n_vocab, sizeof(float) * (size_t)sc->n_vocab * (size_t)e->rows);
            r += e->rows;
        }
    }
    free(ss);
    free(toks);
    free(want);
    free(lg);
    pthread_mutex_lock(&sc->qmu);
    sc->n_steps++;
    sc->n_step_tokens += (unsigned long long)(n - n_prompt);
    sc->n_step_prompt += (unsigned long long)n_prompt;
    sc->n_mixed += n_prompt > 0 && n > n_prompt;
    pthread_mutex_unlock(&sc->qmu);
}

/* Under bmu: the next step's entries, taken off the queue: every decode entry, and prompt pieces in
 * queue order up to the step's prompt budget (a prompt served re-joins at the tail, so two long
 * prompts take turns; one that got nothing stays queued first). */
static srv_entry *step_take(srv_sched *sc) {
    srv_entry *list = NULL, **lt = &list, **pp = &sc->sub;
    int budget = sc->step_prompt;
    sc->sub_tail = NULL;
    while (*pp) {
        srv_entry *e = *pp;
        if (e->prompt && budget == 0) { sc->sub_tail = e; pp = &e->next; continue; } /* stays queued */
        e->taken = e->prompt ? (e->n < budget ? e->n : budget) : e->n;
        if (e->prompt) budget -= e->taken;
        *pp = e->next;
        e->next = NULL;
        *lt = e;
        lt = &e->next;
        sc->n_sub--;
    }
    return list;
}

/* Entry e joins the next step; returns once a step evaluated it. Requests in their decode loop and
 * in their prefill all submit; the step runs when every active request has submitted, or 20 ms after
 * this one did (a request stuck writing to a slow client does not hold the others longer), led by
 * whichever waiting thread sees it first. */
static int step_wait(srv_sched *sc, srv_entry *e) {
    pthread_mutex_lock(&sc->bmu);
    if (sc->sub_tail) sc->sub_tail->next = e;
    else sc->sub = e;
    sc->sub_tail = e;
    sc->n_sub++;
    double deadline = mr_now() + 0.020;
    while (!e->done) {
        if (!sc->stepping && sc->sub && (sc->n_sub >= sc->n_active || mr_now() >= deadline)) {
            srv_entry *list = step_take(sc);
            sc->stepping = 1;
            pthread_mutex_unlock(&sc->bmu);
            batch_step(sc, list);
            pthread_mutex_lock(&sc->bmu);
            for (srv_entry *x = list, *nx; x; x = nx) { nx = x->next; x->done = 1; }
            sc->stepping = 0;
            pthread_cond_broadcast(&sc->bcv);
            deadline = mr_now() + 0.020;
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 2000000;
        if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&sc->bcv, &sc->bmu, &ts);
    }
    pthread_mutex_unlock(&sc->bmu);
    if (e->rc) { mr_set_error("%s", e->err); return -1; }
    return 0;
}

void srv_step_join(srv_sched *sc, int delta) {
    pthread_mutex_lock(&sc->bmu);
    sc->n_active += delta;
    pthread_cond_broadcast(&sc->bcv); /* a step waiting for a request that left can run */
    pthread_mutex_unlock(&sc->bmu);
}

int srv_batch_eval(srv_sched *sc, srv_slot *slot, mr_gen *g) {
    const int32_t *ids;
    float *rows;
    int n_rows, n = mr_gen_batch(g, &ids, &rows, &n_rows);
    if (n <= 0) return n;
    srv_entry e = {.s = slot->s, .ids = ids, .n = n, .logits = rows, .rows = n_rows};
    return step_wait(sc, &e);
}

int srv_batch_prompt(srv_sched *sc, srv_slot *slot, const int32_t *ids, int n, float *logits) {
    srv_entry e = {.s = slot->s, .ids = ids, .n = n, .prompt = 1, .logits = logits, .rows = 1};
    if (step_wait(sc, &e)) return -1;
    return e.taken;
}

/* ---- counters and setting ---- */

void srv_sched_done(srv_sched *sc, const srv_run_stats *s) {
    pthread_mutex_lock(&sc->qmu);
    sc->n_requests++;
    sc->n_errors += s->rc < 0;
    sc->n_aborted += s->rc > 0;
    sc->n_prompt += (unsigned long long)s->n_prompt;
    sc->n_cached += (unsigned long long)s->n_cached;
    sc->n_gen += (unsigned long long)s->n_gen;
    sc->prefill_s += s->t_prefill;
    sc->decode_s += s->t_decode;
    pthread_mutex_unlock(&sc->qmu);
}

void srv_sched_metrics(srv_sched *sc, srv_metrics *o) {
    pthread_mutex_lock(&sc->qmu);
    o->n_requests = sc->n_requests;
    o->n_errors = sc->n_errors;
    o->n_aborted = sc->n_aborted;
    o->n_busy = sc->n_busy;
    o->n_waiting = sc->n_waiting;
    o->n_slots = sc->n_slots;
    o->n_ctx = sc->n_ctx;
    o->n_steps = sc->n_steps;
    o->n_step_tokens = sc->n_step_tokens;
    o->n_step_prompt = sc->n_step_prompt;
    o->n_mixed = sc->n_mixed;
    o->n_prompt = sc->n_prompt;
    o->n_cached = sc->n_cached;
    o->n_gen = sc->n_gen;
    o->prefill_s = sc->prefill_s;
    o->decode_s = sc->decode_s;
    o->kv = 0;
    for (int i = 0; i < sc->n_slots; i++) o->kv += sc->slots[i].n_cache;
    pthread_mutex_unlock(&sc->qmu);
}

void srv_sched_slots(srv_sched *sc, int *busy, int *n_cache) {
    pthread_mutex_lock(&sc->qmu);
    /* n_cache is written by the request holding the slot: a snapshot may be a step old */
    for (int i = 0; i < sc->n_slots; i++) {
        busy[i] = sc->slots[i].busy;
        n_cache[i] = sc->slots[i].n_cache;
    }
    pthread_mutex_unlock(&sc->qmu);
}

void srv_sched_approx(srv_sched *sc, char buf[SRV_APPROX_LEN], unsigned long *changes) {
    pthread_mutex_lock(&sc->qmu);
    memcpy(buf, sc->approx, SRV_APPROX_LEN);
    if (changes) *changes = sc->approx_changes;
    pthread_mutex_unlock(&sc->qmu);
}

int srv_sched_set_approx(srv_sched *sc, const char *spec, const char *source) {
    srv_model_lock(sc);
    mr_approx_params p;
    mr_model_get_approx(sc->m, &p);
    int bad = mr_approx_parse(spec, &p) || mr_model_set_approx(sc->m, &p);
    if (!bad) approx_changed(sc, source);
    srv_model_unlock(sc);
    return bad ? -1 : 0;
}
