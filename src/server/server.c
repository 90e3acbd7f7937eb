/* HTTP server for the OpenAI and Anthropic APIs: routing, authentication, the model queue and the
 * small endpoints (/health, /v1/models, /props, /slots, /metrics, /tokenize, /detokenize,
 * /apply-template). Connections are served by their own threads (http.c); requests that use the model
 * wait in a FIFO queue for the one session, and leave it when their client goes away. Generation and
 * the replies are in complete.c and the writers (reply*.c). */
#include "server/state.h"
#include "base/base.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

struct srv_waiter { srv_waiter *next; int granted; };

static int common_prefix(const srv_slot *sl, const int32_t *p, int n) {
    int k = 0;
    while (k < sl->n_cache && k < n && sl->cache[k] == p[k]) k++;
    return k;
}

int srv_acquire(srv_state *st, mr_http_req *r, const int32_t *prompt, int n) {
    srv_waiter w = {NULL, 0};
    pthread_mutex_lock(&st->qmu);
    if (st->n_busy < st->n_slots && !st->head) {
        st->n_busy++;
    } else {
        if (st->tail) st->tail->next = &w;
        else st->head = &w;
        st->tail = &w;
        st->n_waiting++;
        while (!w.granted) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 250000000;
            if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
            pthread_cond_timedwait(&st->qcv, &st->qmu, &ts);
            if (!w.granted && mr_http_client_gone(r)) {
                srv_waiter **pp = &st->head, *prev = NULL;
                while (*pp != &w) { prev = *pp; pp = &(*pp)->next; }
                *pp = w.next;
                if (st->tail == &w) st->tail = prev;
                st->n_waiting--;
                st->n_aborted++;
                pthread_mutex_unlock(&st->qmu);
                return -1;
            }
        }
        st->n_waiting--;
    }
    /* a permit is held: some slot is free; take the one whose cache shares most with the prompt */
    int best = -1, best_k = -1;
    for (int i = 0; i < st->n_slots; i++) {
        if (st->slots[i].busy) continue;
        int k = common_prefix(&st->slots[i], prompt, n);
        if (k > best_k) { best = i; best_k = k; }
    }
    st->slots[best].busy = 1;
    pthread_mutex_unlock(&st->qmu);
    return best;
}

void srv_release(srv_state *st, int slot) {
    pthread_mutex_lock(&st->qmu);
    st->slots[slot].busy = 0;
    srv_waiter *w = st->head;
    if (w) {
        st->head = w->next;
        if (!st->head) st->tail = NULL;
        w->granted = 1; /* the permit is handed over */
        pthread_cond_broadcast(&st->qcv);
    } else st->n_busy--;
    pthread_mutex_unlock(&st->qmu);
}

/* after the model's setting changed (the caller holds the model): the text responses report */
static void approx_changed(srv_state *st, const char *source) {
    mr_approx_params p;
    mr_model_get_approx(st->m, &p);
    char buf[sizeof st->approx];
    mr_approx_format(&p, buf, sizeof buf);
    pthread_mutex_lock(&st->qmu);
    memcpy(st->approx, buf, sizeof buf);
    st->approx_changes++;
    pthread_mutex_unlock(&st->qmu);
    mr_log(1, "moe approx (%s): %s\n", source, buf);
}

void srv_model_lock(srv_state *st) {
    pthread_mutex_lock(&st->mmu);
    unsigned long t = st->m_next++;
    while (st->m_serving != t) pthread_cond_wait(&st->mcv, &st->mmu);
    pthread_mutex_unlock(&st->mmu);
    if (st->approx_file) {
        int rc = mr_approx_file_poll(st->approx_file, st->m);
        if (rc > 0) approx_changed(st, mr_approx_file_path(st->approx_file));
        else if (rc < 0) mr_log(0, "warning: %s\n", mr_last_error());
    }
}

void srv_put_approx(srv_state *st, mr_sbuf *b) {
    char buf[sizeof st->approx];
    pthread_mutex_lock(&st->qmu);
    memcpy(buf, st->approx, sizeof buf);
    pthread_mutex_unlock(&st->qmu);
    mr_sbuf_puts(b, "\"moerun\":{\"approx\":");
    mr_sbuf_json_str(b, buf, strlen(buf));
    mr_sbuf_puts(b, "}");
}

void srv_approx_header(srv_state *st, mr_http_req *r) {
    char buf[sizeof st->approx];
    pthread_mutex_lock(&st->qmu);
    memcpy(buf, st->approx, sizeof buf);
    pthread_mutex_unlock(&st->qmu);
    /* the spec is printable ASCII without CR/LF (mr_approx_format) */
    snprintf(r->extra_headers, sizeof r->extra_headers, "X-Moerun-Approx: %s\r\nAccess-Control-Expose-Headers: X-Moerun-Approx\r\n", buf);
}

void srv_model_unlock(srv_state *st) {
    pthread_mutex_lock(&st->mmu);
    st->m_serving++;
    pthread_cond_broadcast(&st->mcv);
    pthread_mutex_unlock(&st->mmu);
}

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
static void batch_step(srv_state *st, srv_entry *list) {
    int n = 0, nw = 0, n_prompt = 0;
    for (srv_entry *e = list; e; e = e->next) {
        n += e->taken;
        nw += !e->prompt || e->taken == e->n ? e->rows : 0;
        if (e->prompt) n_prompt += e->taken;
    }
    mr_session **ss = mr_malloc(sizeof *ss * (size_t)n);
    int32_t *toks = mr_malloc(sizeof *toks * (size_t)n);
    uint8_t *want = mr_malloc((size_t)n);
    float *lg = nw ? mr_malloc(sizeof(float) * (size_t)nw * (size_t)st->n_vocab) : NULL;
    int rc = -1;
    if (ss && toks && want && (lg || !nw)) {
        int k = 0;
        for (srv_entry *e = list; e; e = e->next)
            for (int i = 0; i < e->taken; i++, k++) {
                ss[k] = e->s;
                toks[k] = e->ids[i];
                want[k] = i >= e->n - e->rows;
            }
        srv_model_lock(st);
        rc = mr_sessions_eval_rows(ss, toks, n, want, lg);
        srv_model_unlock(st);
    } else mr_set_error("server: out of memory");
    int r = 0;
    for (srv_entry *e = list; e; e = e->next) {
        e->rc = rc;
        if (rc) snprintf(e->err, sizeof e->err, "%s", mr_last_error());
        else if (e->taken == e->n) {
            memcpy(e->logits, lg + (size_t)r * st->n_vocab, sizeof(float) * (size_t)st->n_vocab * (size_t)e->rows);
            r += e->rows;
        }
    }
    free(ss);
    free(toks);
    free(want);
    free(lg);
    pthread_mutex_lock(&st->qmu);
    st->n_steps++;
    st->n_step_tokens += (unsigned long long)(n - n_prompt);
    st->n_step_prompt += (unsigned long long)n_prompt;
    st->n_mixed += n_prompt > 0 && n > n_prompt;
    pthread_mutex_unlock(&st->qmu);
}

/* Under bmu: the next step's entries, taken off the queue: every decode entry, and prompt pieces in
 * queue order up to the step's prompt budget (a prompt served re-joins at the tail, so two long
 * prompts take turns; one that got nothing stays queued first). */
static srv_entry *step_take(srv_state *st) {
    srv_entry *list = NULL, **lt = &list, **pp = &st->sub;
    int budget = st->step_prompt;
    st->sub_tail = NULL;
    while (*pp) {
        srv_entry *e = *pp;
        if (e->prompt && budget == 0) { st->sub_tail = e; pp = &e->next; continue; } /* stays queued */
        e->taken = e->prompt ? (e->n < budget ? e->n : budget) : e->n;
        if (e->prompt) budget -= e->taken;
        *pp = e->next;
        e->next = NULL;
        *lt = e;
        lt = &e->next;
        st->n_sub--;
    }
    return list;
}

/* Entry e joins the next step; returns once a step evaluated it. Requests in their decode loop and
 * in their prefill all submit; the step runs when every active request has submitted, or 20 ms after
 * this one did (a request stuck writing to a slow client does not hold the others longer), led by
 * whichever waiting thread sees it first. */
static int step_wait(srv_state *st, srv_entry *e) {
    pthread_mutex_lock(&st->bmu);
    if (st->sub_tail) st->sub_tail->next = e;
    else st->sub = e;
    st->sub_tail = e;
    st->n_sub++;
    double deadline = mr_now() + 0.020;
    while (!e->done) {
        if (!st->stepping && st->sub && (st->n_sub >= st->n_active || mr_now() >= deadline)) {
            srv_entry *list = step_take(st);
            st->stepping = 1;
            pthread_mutex_unlock(&st->bmu);
            batch_step(st, list);
            pthread_mutex_lock(&st->bmu);
            for (srv_entry *x = list, *nx; x; x = nx) { nx = x->next; x->done = 1; }
            st->stepping = 0;
            pthread_cond_broadcast(&st->bcv);
            deadline = mr_now() + 0.020;
            continue;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 2000000;
        if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
        pthread_cond_timedwait(&st->bcv, &st->bmu, &ts);
    }
    pthread_mutex_unlock(&st->bmu);
    if (e->rc) { mr_set_error("%s", e->err); return -1; }
    return 0;
}

void srv_step_join(srv_state *st, int delta) {
    pthread_mutex_lock(&st->bmu);
    st->n_active += delta;
    pthread_cond_broadcast(&st->bcv); /* a step waiting for a request that left can run */
    pthread_mutex_unlock(&st->bmu);
}

int srv_batch_eval(srv_state *st, srv_slot *slot, mr_gen *g) {
    const int32_t *ids;
    float *rows;
    int n_rows, n = mr_gen_batch(g, &ids, &rows, &n_rows);
    if (n <= 0) return n;
    srv_entry e = {.s = slot->s, .ids = ids, .n = n, .logits = rows, .rows = n_rows};
    return step_wait(st, &e);
}

int srv_batch_prompt(srv_state *st, srv_slot *slot, const int32_t *ids, int n, float *logits) {
    srv_entry e = {.s = slot->s, .ids = ids, .n = n, .prompt = 1, .logits = logits, .rows = 1};
    if (step_wait(st, &e)) return -1;
    return e.taken;
}

int srv_tokenize(const srv_state *st, const char *text, int add_special, int32_t **out) {
    int n = mr_tokenize(st->tok, text, strlen(text), add_special, 1, NULL, 0);
    if (n == INT_MIN) return -1;
    int need = n < 0 ? -n : n;
    *out = mr_malloc(sizeof(int32_t) * (size_t)(need + 1));
    if (!*out) { mr_set_error("out of memory"); return -1; }
    n = mr_tokenize(st->tok, text, strlen(text), add_special, 1, *out, need + 1);
    if (n < 0) { free(*out); *out = NULL; if (n != INT_MIN) mr_set_error("tokenize: size changed"); return -1; }
    return n;
}

char *srv_render_chat(const srv_state *st, const srv_req *q, int add_assistant) {
    const char *const *tools = (const char *const *)q->tools;
    int len = mr_chat_render_tools(st->m, st->tmpl, q->msgs, q->n_msgs, tools, q->n_tools, add_assistant, NULL, 0);
    if (len < 0) return NULL;
    char *out = mr_malloc((size_t)len + 1);
    if (!out) { mr_set_error("out of memory"); return NULL; }
    mr_chat_render_tools(st->m, st->tmpl, q->msgs, q->n_msgs, tools, q->n_tools, add_assistant, out, len + 1);
    return out;
}

/* constant time in the key's length: the comparison does not reveal how much of a guess matched */
static int key_equal(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < nb; i++) d |= (unsigned char)(a[i < na ? i : 0] ^ b[i]);
    return d == 0;
}

/* the request carries key (Authorization: Bearer KEY or x-api-key: KEY) */
static int has_key(const mr_http_req *r, const char *key) {
    if (!strncasecmp(r->auth, "Bearer ", 7) && key_equal(r->auth + 7, key)) return 1;
    return r->api_key[0] && key_equal(r->api_key, key);
}

static int srv_authorized(const srv_state *st, const mr_http_req *r) { return !st->api_key || has_key(r, st->api_key); }

static void reply_unauthorized(mr_http_req *r, const char *msg) {
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"error\":{\"message\":");
    mr_sbuf_json_str(&b, msg, strlen(msg));
    mr_sbuf_puts(&b, ",\"type\":\"authentication_error\",\"code\":401}}");
    if (b.oom) srv_error(r, 500, "out of memory");
    else mr_http_reply_hdr(r, 401, "application/json", "WWW-Authenticate: Bearer\r\n", b.p, b.n);
    mr_sbuf_free(&b);
}

/* The spec of a POST /v1/admin/moe body: "approx" (a spec string) first, then every other key as
 * key=value (numbers, strings without separators, booleans as 1/0), so the keys win. The engine's
 * parser checks names and values. 0, or -1 with err[] set. */
static int admin_spec(const mr_json *j, mr_sbuf *spec, char *err, size_t errlen) {
    const mr_json *a = mr_json_get(j, "approx");
    if (a) {
        if (a->type != MR_JSON_STR || strlen(a->str) != a->len || a->len > 1024) { snprintf(err, errlen, "'approx' must be a string (a spec such as \"k=5 layers=3-\")"); return -1; }
        mr_sbuf_puts(spec, a->str);
    }
    for (const mr_json *c = j->child; c; c = c->next) {
        if (!strcmp(c->key, "approx")) continue;
        size_t kl = strlen(c->key);
        int key_ok = kl > 0 && kl < 32;
        for (size_t i = 0; i < kl; i++) key_ok &= (c->key[i] >= 'a' && c->key[i] <= 'z') || (c->key[i] >= '0' && c->key[i] <= '9') || c->key[i] == '_';
        if (!key_ok) { snprintf(err, errlen, "unknown setting '%.40s'", c->key); return -1; }
        mr_sbuf_printf(spec, " %s=", c->key);
        if (c->type == MR_JSON_NUM) mr_sbuf_printf(spec, "%.9g", c->num);
        else if (c->type == MR_JSON_BOOL) mr_sbuf_puts(spec, c->num ? "1" : "0");
        else if (c->type == MR_JSON_STR && c->len > 0 && c->len < 64 && strlen(c->str) == c->len && !strpbrk(c->str, " ,\t\r\n="))
            mr_sbuf_puts(spec, c->str);
        else { snprintf(err, errlen, "'%s' must be a number, true/false or a short string without spaces", c->key); return -1; }
    }
    if (spec->oom) { snprintf(err, errlen, "out of memory"); return -1; }
    return 0;
}

/* GET /v1/admin/moe: the active setting; POST: change it (keys not given keep their values; "approx":
 * "off ..." starts from exact). Needs the admin key (or the API key when there is no admin key); a
 * server started with neither refuses with 403. The change waits for the model, so it applies from the
 * next eval for every slot; sessions and their caches stay. */
static void ep_admin_moe(srv_state *st, mr_http_req *r) {
    const char *key = st->admin_key ? st->admin_key : st->api_key;
    if (!key) {
        srv_error(r, 403, "the admin endpoint is disabled: start the server with --admin-key KEY (or --api-key KEY)");
        return;
    }
    if (!has_key(r, key)) {
        reply_unauthorized(r, st->admin_key ? "invalid or missing admin key" : "invalid or missing API key");
        return;
    }
    int post = !strcmp(r->method, "POST");
    if (!post && strcmp(r->method, "GET")) { srv_error(r, 405, "use GET or POST"); return; }
    if (post) {
        mr_json *j = mr_json_parse(r->body, r->body_len);
        if (!j || j->type != MR_JSON_OBJ) {
            srv_error(r, 400, j ? "the body must be a JSON object" : mr_last_error());
            mr_json_free(j);
            return;
        }
        mr_sbuf spec = {0};
        char err[256];
        int bad = admin_spec(j, &spec, err, sizeof err);
        mr_json_free(j);
        if (bad) { mr_sbuf_free(&spec); srv_error(r, 400, err); return; }
        srv_model_lock(st);
        mr_approx_params p;
        mr_model_get_approx(st->m, &p);
        bad = mr_approx_parse(spec.p ? spec.p : "", &p) || mr_model_set_approx(st->m, &p);
        if (!bad) approx_changed(st, "POST /v1/admin/moe");
        srv_model_unlock(st);
        mr_sbuf_free(&spec);
        if (bad) { srv_error(r, 400, mr_last_error()); return; }
    }
    mr_sbuf b = {0};
    pthread_mutex_lock(&st->qmu);
    unsigned long changes = st->approx_changes;
    pthread_mutex_unlock(&st->qmu);
    mr_sbuf_puts(&b, "{");
    srv_put_approx(st, &b);
    mr_sbuf_printf(&b, ",\"changes\":%lu,\"control_file\":", changes);
    const char *path = st->approx_file ? mr_approx_file_path(st->approx_file) : NULL;
    if (path) mr_sbuf_json_str(&b, path, strlen(path));
    else mr_sbuf_puts(&b, "null");
    mr_sbuf_puts(&b, "}");
    srv_approx_header(st, r);
    srv_reply_json(r, &b);
}

static int path_is(const char *path, const char *a, const char *b) { return !strcmp(path, a) || (b && !strcmp(path, b)); }

static void ep_models(srv_state *st, mr_http_req *r) {
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    mr_sbuf_json_str(&b, st->model_name, strlen(st->model_name));
    mr_sbuf_printf(&b, ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"moerun\",\"meta\":{\"arch\":\"%s\",\"n_ctx\":%d,"
                   "\"n_vocab\":%d}}]}", st->started_wall, mr_model_arch(st->m), st->n_ctx, st->n_vocab);
    srv_reply_json(r, &b);
}

static void ep_props(srv_state *st, mr_http_req *r) {
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"model\":");
    mr_sbuf_json_str(&b, st->model_name, strlen(st->model_name));
    mr_sbuf_printf(&b, ",\"arch\":\"%s\",\"n_ctx\":%d,\"n_vocab\":%d,\"total_slots\":%d,\"chat_template\":\"%s\","
                   "\"n_threads\":%d,\"default_generation_settings\":{\"params\":{\"speculative.n_max\":%d,"
                   "\"speculative.ngram\":%d}},\"build\":\"%s\",", mr_model_arch(st->m), st->n_ctx, st->n_vocab, st->n_slots,
                   st->tmpl, mr_model_n_threads(st->m), st->spec_max, st->spec_ngram, mr_version());
    srv_put_approx(st, &b);
    mr_sbuf_puts(&b, "}");
    srv_reply_json(r, &b);
}

static void ep_slots(srv_state *st, mr_http_req *r) {
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "[");
    pthread_mutex_lock(&st->qmu);
    /* n_cache is written by the request holding the slot: a snapshot may be a step old */
    for (int i = 0; i < st->n_slots; i++)
        mr_sbuf_printf(&b, "%s{\"id\":%d,\"n_ctx\":%d,\"is_processing\":%s,\"n_cached_tokens\":%d}", i ? "," : "", i, st->n_ctx,
                       st->slots[i].busy ? "true" : "false", st->slots[i].n_cache);
    pthread_mutex_unlock(&st->qmu);
    mr_sbuf_puts(&b, "]");
    srv_reply_json(r, &b);
}

static void ep_metrics(srv_state *st, mr_http_req *r) {
    pthread_mutex_lock(&st->qmu);
    srv_state c = *st; /* the counters, consistent with each other */
    int kv = 0;
    for (int i = 0; i < st->n_slots; i++) kv += st->slots[i].n_cache;
    pthread_mutex_unlock(&st->qmu);
    mr_sbuf b = {0};
#define M(name, type, help, fmt, v) mr_sbuf_printf(&b, "# HELP moerun_" name " " help "\n# TYPE moerun_" name " " type "\nmoerun_" name " " fmt "\n", v)
    M("requests_total", "counter", "Generation requests finished.", "%lu", c.n_requests);
    M("requests_errors_total", "counter", "Generation requests that failed.", "%lu", c.n_errors);
    M("requests_aborted_total", "counter", "Requests whose client left before the end.", "%lu", c.n_aborted);
    M("requests_processing", "gauge", "Requests holding a slot now.", "%d", c.n_busy);
    M("slots", "gauge", "Slots (sessions) of the server.", "%d", c.n_slots);
    M("decode_steps_total", "counter", "Batched steps (decode tokens and prompt pieces of the slots in one evaluation).", "%llu", c.n_steps);
    M("decode_step_tokens_total", "counter", "Decode tokens evaluated by batched steps (over steps: the mean decode batch).", "%llu", c.n_step_tokens);
    M("step_prompt_tokens_total", "counter", "Prompt tokens evaluated by batched steps, beside the decode tokens.", "%llu", c.n_step_prompt);
    M("mixed_steps_total", "counter", "Batched steps that evaluated prompt tokens and decode tokens together.", "%llu", c.n_mixed);
    M("requests_waiting", "gauge", "Requests queued for the model.", "%d", c.n_waiting);
    M("prompt_tokens_total", "counter", "Prompt tokens of finished requests (cached ones included).", "%llu", c.n_prompt);
    M("prompt_cached_tokens_total", "counter", "Prompt tokens taken from the prompt cache.", "%llu", c.n_cached);
    M("generated_tokens_total", "counter", "Tokens generated.", "%llu", c.n_gen);
    M("prefill_seconds_total", "counter", "Time spent evaluating prompts.", "%.6f", c.prefill_s);
    M("decode_seconds_total", "counter", "Time spent generating.", "%.6f", c.decode_s);
    M("prefill_tokens_per_second", "gauge", "Prompt tokens evaluated per second (whole run).", "%.3f",
      c.prefill_s > 0 ? (double)(c.n_prompt - c.n_cached) / c.prefill_s : 0.0);
    M("decode_tokens_per_second", "gauge", "Tokens generated per second (whole run).", "%.3f", c.decode_s > 0 ? (double)c.n_gen / c.decode_s : 0.0);
    M("kv_cache_tokens", "gauge", "Tokens held in the slots' sessions (the prompt caches).", "%d", kv);
    M("kv_cache_capacity_tokens", "gauge", "Context length of all slots.", "%d", c.n_ctx * c.n_slots);
    mr_pager_stats ps;
    if (mr_model_pager_stats(st->m, &ps) == 0 && ps.paging) {
        M("pager_hits_total", "counter", "Expert uses served from RAM.", "%llu", (unsigned long long)ps.hits);
        M("pager_misses_total", "counter", "Expert uses read from disk.", "%llu", (unsigned long long)ps.misses);
        M("pager_bytes_read_total", "counter", "Bytes of experts read from disk.", "%llu", (unsigned long long)ps.bytes_read);
        M("pager_hit_ratio", "gauge", "Hits over uses since the model loaded.", "%.6f",
          ps.hits + ps.misses ? (double)ps.hits / (double)(ps.hits + ps.misses) : 0.0);
        M("pager_stall_seconds_total", "counter", "Time compute waited for expert reads.", "%.6f", ps.stall_s);
    }
    M("uptime_seconds", "gauge", "Seconds since the server started.", "%.3f", mr_now() - c.started);
#undef M
    if (b.oom) { srv_error(r, 500, "out of memory"); mr_sbuf_free(&b); return; }
    mr_http_reply(r, 200, "text/plain; version=0.0.4", b.p ? b.p : "", b.n);
    mr_sbuf_free(&b);
}

/* POST /tokenize {"content": text, "add_special": false, "with_pieces": false} -> {"tokens": [...]} */
static void ep_tokenize(srv_state *st, mr_http_req *r, const mr_json *j) {
    const mr_json *c = mr_json_get(j, "content");
    const mr_json *as = mr_json_get(j, "add_special"), *wp = mr_json_get(j, "with_pieces");
    if (!c || c->type != MR_JSON_STR) { srv_error(r, 400, "'content' must be a string"); return; }
    if ((as && as->type != MR_JSON_BOOL) || (wp && wp->type != MR_JSON_BOOL)) { srv_error(r, 400, "'add_special' and 'with_pieces' must be true or false"); return; }
    int32_t *ids = NULL;
    int n = srv_tokenize(st, c->str, as && as->num, &ids);
    if (n < 0) { srv_error(r, 400, mr_last_error()); return; }
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"tokens\":[");
    for (int i = 0; i < n; i++) {
        if (i) mr_sbuf_puts(&b, ",");
        if (wp && wp->num) {
            char piece[256];
            int pl = mr_token_to_piece(st->tok, ids[i], piece, sizeof piece, 1);
            mr_sbuf_printf(&b, "{\"id\":%d,\"piece\":", ids[i]);
            mr_sbuf_json_str(&b, piece, pl > 0 ? (size_t)pl : 0);
            mr_sbuf_puts(&b, "}");
        } else mr_sbuf_printf(&b, "%d", ids[i]);
    }
    mr_sbuf_puts(&b, "]}");
    free(ids);
    srv_reply_json(r, &b);
}

/* POST /detokenize {"tokens": [...]} -> {"content": text} */
static void ep_detokenize(srv_state *st, mr_http_req *r, const mr_json *j) {
    const mr_json *t = mr_json_get(j, "tokens");
    if (!t || t->type != MR_JSON_ARR || t->len > (size_t)st->n_ctx * 4 + 4096) { srv_error(r, 400, "'tokens' must be an array of token ids"); return; }
    int32_t *ids = mr_malloc(sizeof(int32_t) * (t->len + 1));
    if (!ids) { srv_error(r, 500, "out of memory"); return; }
    int n = 0;
    for (const mr_json *c = t->child; c; c = c->next) {
        if (c->type != MR_JSON_NUM || c->num < 0 || c->num >= st->n_vocab || c->num != (double)(int32_t)c->num) {
            free(ids);
            srv_error(r, 400, "'tokens' must be token ids of the model's vocabulary");
            return;
        }
        ids[n++] = (int32_t)c->num;
    }
    int len = mr_detokenize(st->tok, ids, n, NULL, 0, 0, 1);
    int need = len < 0 && len != INT_MIN ? -len : len;
    char *text = len == INT_MIN ? NULL : mr_malloc((size_t)need + 1);
    if (text) len = mr_detokenize(st->tok, ids, n, text, need + 1, 0, 1);
    free(ids);
    if (!text || len < 0) { free(text); srv_error(r, 500, "detokenize failed"); return; }
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"content\":");
    mr_sbuf_json_str(&b, text, (size_t)len);
    mr_sbuf_puts(&b, "}");
    free(text);
    srv_reply_json(r, &b);
}

/* POST /apply-template {"messages": [...], "tools": [...]} -> {"prompt": text} (what the model sees) */
static void ep_apply_template(srv_state *st, mr_http_req *r, const mr_json *j) {
    srv_req q;
    char err[256];
    if (srv_req_parse(j, SRV_API_CHAT, &q, err, sizeof err)) { srv_req_free(&q); srv_error(r, 400, err); return; }
    char *text = srv_render_chat(st, &q, 1);
    srv_req_free(&q);
    if (!text) { srv_error(r, 400, mr_last_error()); return; }
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"prompt\":");
    mr_sbuf_json_str(&b, text, strlen(text));
    mr_sbuf_puts(&b, "}");
    free(text);
    srv_reply_json(r, &b);
}

static void srv_handle(void *user, mr_http_req *r) {
    srv_state *st = user;
    double t0 = mr_now();
    if (!strcmp(r->method, "OPTIONS")) { mr_http_reply(r, 204, "text/plain", "", 0); return; }
    if (path_is(r->path, "/health", "/v1/health")) {
        /* a model file that shrank under the mapping: every request fails now, so say so here too */
        if (mr_model_check_files(st->m)) { srv_error(r, 503, mr_last_error()); return; }
        mr_http_reply(r, 200, "application/json", "{\"status\":\"ok\"}", 15);
        return;
    }
    if (path_is(r->path, "/v1/admin/moe", NULL)) { ep_admin_moe(st, r); return; } /* its own key */
    if (!srv_authorized(st, r)) {
        static const char body[] = "{\"error\":{\"message\":\"invalid or missing API key\",\"type\":\"authentication_error\",\"code\":401}}";
        mr_http_reply_hdr(r, 401, "application/json", "WWW-Authenticate: Bearer\r\n", body, sizeof body - 1);
        return;
    }
    if (path_is(r->path, "/v1/models", "/models")) { ep_models(st, r); return; }
    if (path_is(r->path, "/props", NULL)) { ep_props(st, r); return; }
    if (path_is(r->path, "/slots", NULL)) { ep_slots(st, r); return; }
    if (path_is(r->path, "/metrics", NULL)) { ep_metrics(st, r); return; }
    int api = -1, small = 0;
    if (path_is(r->path, "/v1/chat/completions", "/chat/completions")) api = SRV_API_CHAT;
    else if (path_is(r->path, "/v1/completions", "/completions") || !strcmp(r->path, "/completion")) api = SRV_API_COMPLETIONS;
    else if (path_is(r->path, "/v1/messages", "/messages")) api = SRV_API_ANTHROPIC;
    else if (path_is(r->path, "/tokenize", "/detokenize") || path_is(r->path, "/apply-template", NULL)) small = 1;
    else { srv_error(r, 404, "unknown endpoint"); return; }
    if (strcmp(r->method, "POST")) { srv_error(r, 405, "use POST"); return; }
    if (small) {
        mr_json *j = mr_json_parse(r->body, r->body_len);
        if (!j || j->type != MR_JSON_OBJ) srv_error(r, 400, j ? "the body must be a JSON object" : mr_last_error());
        else if (!strcmp(r->path, "/tokenize")) ep_tokenize(st, r, j);
        else if (!strcmp(r->path, "/detokenize")) ep_detokenize(st, r, j);
        else ep_apply_template(st, r, j);
        mr_json_free(j);
        return;
    }
    srv_complete(st, r, api);
    mr_log(1, "%s %s: %.3f s%s\n", r->method, r->path, mr_now() - t0, r->broken ? " (client gone)" : "");
}

void mr_server_params_default(mr_server_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->listen_fd = -1;
    p->spec_ngram = 3;
}

int mr_server_listen(const char *host, int port) { return mr_http_listen(host, port); }

int mr_server_run(mr_model *m, const mr_server_params *p) {
    srv_state st;
    memset(&st, 0, sizeof st);
    st.m = m;
    st.api_key = p->api_key && *p->api_key ? p->api_key : NULL;
    st.admin_key = p->admin_key && *p->admin_key ? p->admin_key : NULL;
    st.started = mr_now();
    st.started_wall = (long)time(NULL);
    pthread_mutex_init(&st.qmu, NULL);
    pthread_cond_init(&st.qcv, NULL);
    pthread_mutex_init(&st.mmu, NULL);
    pthread_cond_init(&st.mcv, NULL);
    pthread_mutex_init(&st.bmu, NULL);
    pthread_cond_init(&st.bcv, NULL);
    int fd = p->listen_fd;
    st.tok = mr_model_tokenizer(m);
    int rc = -1;
    if (!st.tok) { mr_set_error("server: the model has no usable tokenizer"); goto done; }
    st.tmpl = p->chat_template ? p->chat_template : mr_chat_template_detect(m);
    if (!mr_chat_template_known(st.tmpl)) { mr_set_error("server: unknown chat template '%s'", st.tmpl); goto done; }
    st.n_vocab = mr_model_n_vocab(m);
    if (p->spec_max < 0 || p->spec_max > 64 || p->spec_ngram < 1 || p->spec_ngram > 64) {
        mr_set_error("server: draft length %d (0..64) or n-gram size %d (1..64) out of range", p->spec_max, p->spec_ngram);
        goto done;
    }
    st.spec_max = p->spec_max;
    st.spec_ngram = p->spec_ngram;
    st.n_slots = p->n_parallel > 0 ? p->n_parallel : 1;
    st.can_batch = st.n_slots > 1 && mr_model_can_batch(m);
    st.step_prompt = p->step_prompt > 0 ? p->step_prompt : MR_SERVER_STEP_PROMPT;
    st.slots = mr_calloc((size_t)st.n_slots, sizeof *st.slots);
    if (!st.slots) { mr_set_error("server: out of memory"); goto done; }
    for (int i = 0; i < st.n_slots; i++) {
        if (!(st.slots[i].s = mr_session_new(m, p->n_ctx))) goto done;
        st.n_ctx = mr_session_n_ctx(st.slots[i].s);
        if (!(st.slots[i].cache = mr_malloc(sizeof(int32_t) * (size_t)st.n_ctx))) { mr_set_error("server: out of memory"); goto done; }
    }
    {
        mr_approx_params ap;
        mr_model_get_approx(m, &ap);
        mr_approx_format(&ap, st.approx, sizeof st.approx);
    }
    if (p->approx_file) {
        if (!(st.approx_file = mr_approx_file_open(p->approx_file))) goto done;
        int arc = mr_approx_file_poll(st.approx_file, m); /* a file already there applies from the start */
        if (arc > 0) approx_changed(&st, p->approx_file);
        else if (arc < 0) mr_log(0, "warning: %s\n", mr_last_error());
    }
    const char *name = mr_model_meta_str(m, "general.name");
    st.model_name = p->alias ? p->alias : name ? name : mr_model_arch(m);
    if (fd < 0 && (fd = mr_http_listen(p->host, p->port)) < 0) goto done;
    mr_pager_stats ps;
    char paging[96] = "";
    if (mr_model_pager_stats(m, &ps) == 0 && ps.paging)
        snprintf(paging, sizeof paging, ", experts paged: %d slots of %.1f MiB", ps.n_slots, ps.slot_bytes / 1048576.0);
    char steps[96] = "";
    if (st.n_slots > 1)
        snprintf(steps, sizeof steps, st.can_batch ? ", batched steps: decode tokens + %d prompt tokens" : ", no batched steps for this architecture",
                 st.step_prompt);
    char spec[160] = "";
    if (st.spec_max)
        snprintf(spec, sizeof spec, ", speculative decoding: n-gram drafts of up to %d%s", st.spec_max,
                 mr_session_can_truncate(st.slots[0].s) ? "" : " (off: this architecture's state cannot be cut back)");
    mr_log(1, "listening on http://%s:%d (model %s, %s, chat template %s, context %d, %d threads, %d slot%s%s%s%s%s)\n",
           p->host, p->port, st.model_name, mr_model_arch(m), st.tmpl, st.n_ctx, mr_model_n_threads(m), st.n_slots,
           st.n_slots > 1 ? "s" : "", steps, paging, spec, st.api_key ? ", API key required" : "");
    if (st.admin_key || st.api_key || st.approx_file)
        mr_log(1, "moe approx: %s%s%s%s\n", st.approx, st.admin_key || st.api_key ? "; POST /v1/admin/moe changes it" : "",
               st.approx_file ? "; control file " : "", st.approx_file ? p->approx_file : "");
    rc = mr_http_serve_fd(fd, NULL, srv_handle, &st, p->stop);
    fd = -1; /* closed by the server loop */
done:
    if (fd >= 0 && fd != p->listen_fd) close(fd);
    for (int i = 0; st.slots && i < st.n_slots; i++) {
        free(st.slots[i].cache);
        mr_session_free(st.slots[i].s);
    }
    free(st.slots);
    mr_approx_file_free(st.approx_file);
    pthread_mutex_destroy(&st.qmu);
    pthread_cond_destroy(&st.qcv);
    pthread_mutex_destroy(&st.mmu);
    pthread_cond_destroy(&st.mcv);
    pthread_mutex_destroy(&st.bmu);
    pthread_cond_destroy(&st.bcv);
    return rc;
}
