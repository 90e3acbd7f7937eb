/* OpenAI-compatible HTTP server: /v1/completions, /v1/chat/completions (both with "stream"),
 * /v1/models, /health. Connections are served by their own threads (http.c); requests that use the
 * model wait in a FIFO queue for the one session, and leave it when their client goes away.
 * Prompt cache: the session keeps the tokens it has evaluated; a request evaluates only what follows
 * the longest prefix it shares with them (multi-turn chat, repeated system prompts). Architectures
 * whose state cannot be cut back (mr_session_truncate fails) re-use only a full-history prefix. */
#include "moerun.h"
#include "server/http.h"
#include "server/json.h"
#include "base/base.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define SRV_MAX_STOP 4

typedef struct {
    mr_model *m;
    mr_session *s;
    const mr_tokenizer *tok;
    int32_t *cache;      /* tokens evaluated in the session */
    int n_cache;
    int n_ctx, n_vocab;
    float *logits;
    const char *model_name;
    const char *api_key;
    /* the model queue: one request at a time uses the session, the others wait in arrival order */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    int busy;
    struct srv_waiter *head, *tail;
    int n_waiting;
    unsigned long req_id;    /* under qmu */
} srv_state;

typedef struct srv_waiter { struct srv_waiter *next; int granted; } srv_waiter;

/* Waits for the session; -1 if the client left (or the server stops) while waiting. */
static int srv_acquire(srv_state *st, mr_http_req *r) {
    srv_waiter w = {NULL, 0};
    pthread_mutex_lock(&st->qmu);
    if (!st->busy && !st->head) {
        st->busy = 1;
        pthread_mutex_unlock(&st->qmu);
        return 0;
    }
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
            pthread_mutex_unlock(&st->qmu);
            return -1;
        }
    }
    st->n_waiting--;
    pthread_mutex_unlock(&st->qmu);
    return 0;
}

static void srv_release(srv_state *st) {
    pthread_mutex_lock(&st->qmu);
    srv_waiter *w = st->head;
    if (w) {
        st->head = w->next;
        if (!st->head) st->tail = NULL;
        w->granted = 1; /* busy stays set: handed over */
        pthread_cond_broadcast(&st->qcv);
    } else st->busy = 0;
    pthread_mutex_unlock(&st->qmu);
}

static void srv_error(mr_http_req *r, int status, const char *msg) {
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"error\":{\"message\":");
    mr_sbuf_json_str(&b, msg, strlen(msg));
    mr_sbuf_printf(&b, ",\"type\":\"%s\",\"code\":%d}}", status >= 500 ? "server_error" : "invalid_request_error", status);
    if (r->streaming) { mr_http_sse_send(r, b.p ? b.p : "{}", b.n); mr_http_sse_end(r); }
    else mr_http_reply(r, status, "application/json", b.p ? b.p : "{}", b.n);
    mr_sbuf_free(&b);
}

/* Bytes of text that form complete UTF-8 characters (the rest waits for the next token). */
static size_t utf8_complete(const char *s, size_t n) {
    size_t i = n;
    for (int back = 0; back < 4 && i > 0; back++) {
        unsigned char c = (unsigned char)s[i - 1];
        if ((c & 0xc0) != 0x80) { /* lead or ASCII byte at i-1 */
            size_t need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
            return (n - (i - 1) >= need) ? n : i - 1;
        }
        i--;
    }
    return n;
}

typedef struct {
    const char *stop[SRV_MAX_STOP];
    int n_stop;
    int max_tokens;
    mr_sampler_params sp;
    int stream, chat;
    unsigned long id;
} srv_opts;

static int srv_parse_opts(const mr_json *j, srv_opts *o, char *err, size_t errlen) {
    memset(o, 0, sizeof *o);
    mr_sampler_default_params(&o->sp);
    /* integers are range-checked as doubles: converting an out-of-range double is undefined */
    const double max_tokens = mr_json_get_num(j, "max_tokens", mr_json_get_num(j, "n_predict", 256));
    const double top_k = mr_json_get_num(j, "top_k", o->sp.top_k);
    const double seed = mr_json_get_num(j, "seed", (double)o->sp.seed);
    if (!(max_tokens >= 0 && max_tokens <= 1000000)) { snprintf(err, errlen, "max_tokens out of range"); return -1; }
    if (!(top_k >= -2147483648.0 && top_k <= 2147483647.0)) { snprintf(err, errlen, "top_k out of range"); return -1; }
    if (!(seed >= 0 && seed < 18446744073709551616.0)) { snprintf(err, errlen, "seed out of range"); return -1; }
    o->max_tokens = (int)max_tokens;
    o->sp.top_k = (int32_t)top_k;
    o->sp.seed = (uint64_t)seed;
    o->sp.temperature = (float)mr_json_get_num(j, "temperature", 0.8);
    o->sp.top_p = (float)mr_json_get_num(j, "top_p", o->sp.top_p);
    o->sp.min_p = (float)mr_json_get_num(j, "min_p", o->sp.min_p);
    o->sp.repeat_penalty = (float)mr_json_get_num(j, "repeat_penalty", o->sp.repeat_penalty);
    o->stream = mr_json_get_bool(j, "stream", 0);
    const mr_json *st = mr_json_get(j, "stop");
    if (st && st->type == MR_JSON_STR && st->len) o->stop[o->n_stop++] = st->str;
    else if (st && st->type == MR_JSON_ARR) {
        for (const mr_json *c = st->child; c; c = c->next) {
            if (c->type != MR_JSON_STR) { snprintf(err, errlen, "stop must be a string or an array of strings"); return -1; }
            if (o->n_stop == SRV_MAX_STOP) { snprintf(err, errlen, "at most %d stop strings", SRV_MAX_STOP); return -1; }
            if (c->len) o->stop[o->n_stop++] = c->str;
        }
    }
    return 0;
}

static void srv_chunk(srv_state *st, mr_http_req *r, const srv_opts *o, const char *text, size_t n, const char *finish) {
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"id\":\"cmpl-%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":", o->id,
                   o->chat ? "chat.completion.chunk" : "text_completion", (long)time(NULL));
    mr_sbuf_json_str(&b, st->model_name, strlen(st->model_name));
    mr_sbuf_puts(&b, ",\"choices\":[{\"index\":0,");
    if (o->chat) {
        mr_sbuf_puts(&b, "\"delta\":{");
        if (n) { mr_sbuf_puts(&b, "\"content\":"); mr_sbuf_json_str(&b, text, n); }
        mr_sbuf_puts(&b, "}");
    } else {
        mr_sbuf_puts(&b, "\"text\":");
        mr_sbuf_json_str(&b, text, n);
    }
    mr_sbuf_printf(&b, ",\"finish_reason\":%s%s%s}]}", finish ? "\"" : "", finish ? finish : "null", finish ? "\"" : "");
    if (b.p) mr_http_sse_send(r, b.p, b.n);
    mr_sbuf_free(&b);
}

/* Evaluates the prompt (reusing the cached prefix) and generates; streams or replies. */
static void srv_generate(srv_state *st, mr_http_req *r, const srv_opts *o, const int32_t *prompt, int n_prompt) {
    double t0 = mr_now();
    /* longest common prefix with what the session holds; the last prompt token is always evaluated
     * again because its logits are needed */
    int reuse = 0;
    while (reuse < st->n_cache && reuse < n_prompt - 1 && st->cache[reuse] == prompt[reuse]) reuse++;
    if (reuse < st->n_cache && mr_session_truncate(st->s, reuse) != 0) reuse = 0;
    if (!reuse) mr_session_reset(st->s);
    st->n_cache = reuse;
    if (n_prompt + o->max_tokens > st->n_ctx && n_prompt >= st->n_ctx) {
        srv_error(r, 400, "prompt is longer than the context");
        return;
    }
    if (mr_session_eval(st->s, prompt + reuse, n_prompt - reuse, st->logits, 0) != 0) {
        mr_session_reset(st->s);
        st->n_cache = 0;
        srv_error(r, 500, mr_last_error());
        return;
    }
    memcpy(st->cache + reuse, prompt + reuse, sizeof(int32_t) * (size_t)(n_prompt - reuse));
    st->n_cache = n_prompt;
    double t_prompt = mr_now() - t0;

    mr_sampler *smp = mr_sampler_new(&o->sp, st->n_vocab);
    if (!smp) { srv_error(r, 500, mr_last_error()); return; }
    for (int i = 0; i < n_prompt; i++) mr_sampler_accept(smp, prompt[i]);
    mr_sbuf text = {0};
    size_t sent = 0, max_stop = 0;
    for (int k = 0; k < o->n_stop; k++) max_stop = strlen(o->stop[k]) > max_stop ? strlen(o->stop[k]) : max_stop;
    const char *finish = "length";
    int n_gen = 0;
    double t1 = mr_now();
    if (o->stream) mr_http_sse_begin(r);
    while (n_gen < o->max_tokens && !mr_http_client_gone(r)) {
        int32_t id = mr_sampler_sample(smp, st->logits);
        if (id < 0) { finish = "error"; break; }
        if (mr_tokenizer_is_eog(st->tok, id)) { finish = "stop"; break; }
        mr_sampler_accept(smp, id);
        n_gen++;
        char piece[256];
        int pl = mr_token_to_piece(st->tok, id, piece, sizeof piece, 0);
        if (pl > 0) mr_sbuf_add(&text, piece, (size_t)pl);
        int stopped = 0;
        for (int k = 0; k < o->n_stop && text.p; k++) {
            char *hit = strstr(text.p + (sent > max_stop ? sent - max_stop : 0), o->stop[k]);
            if (hit) { text.n = (size_t)(hit - text.p); text.p[text.n] = 0; stopped = 1; }
        }
        if (o->stream) {
            size_t ready = utf8_complete(text.p ? text.p : "", text.n);
            if (!stopped && max_stop) ready = ready > sent + max_stop - 1 ? ready - (max_stop - 1) : sent;
            if (ready > sent) { srv_chunk(st, r, o, text.p + sent, ready - sent, NULL); sent = ready; }
        }
        if (stopped) { finish = "stop"; break; }
        if (st->n_cache >= st->n_ctx) { finish = "length"; break; }
        if (mr_session_eval(st->s, &id, 1, st->logits, 0) != 0) { finish = "error"; break; }
        st->cache[st->n_cache++] = id;
    }
    double t_gen = mr_now() - t1;
    mr_sampler_free(smp);
    if (!strcmp(finish, "error")) {
        mr_session_reset(st->s);
        st->n_cache = 0;
        srv_error(r, 500, mr_last_error());
        mr_sbuf_free(&text);
        return;
    }
    mr_log(1, "request %lu: prompt %d tokens (%d cached) %.2f s, generated %d tokens %.2f tok/s, %s\n", o->id,
           n_prompt, reuse, t_prompt, n_gen, t_gen > 0 ? n_gen / t_gen : 0.0, finish);
    if (o->stream) {
        if (text.n > sent) srv_chunk(st, r, o, text.p + sent, text.n - sent, NULL);
        srv_chunk(st, r, o, "", 0, finish);
        mr_http_sse_send(r, "[DONE]", 6);
        mr_http_sse_end(r);
        mr_sbuf_free(&text);
        return;
    }
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"id\":\"cmpl-%lu\",\"object\":\"%s\",\"created\":%ld,\"model\":", o->id,
                   o->chat ? "chat.completion" : "text_completion", (long)time(NULL));
    mr_sbuf_json_str(&b, st->model_name, strlen(st->model_name));
    mr_sbuf_puts(&b, ",\"choices\":[{\"index\":0,");
    if (o->chat) mr_sbuf_puts(&b, "\"message\":{\"role\":\"assistant\",\"content\":");
    else mr_sbuf_puts(&b, "\"text\":");
    mr_sbuf_json_str(&b, text.p ? text.p : "", text.n);
    if (o->chat) mr_sbuf_puts(&b, "}");
    mr_sbuf_printf(&b, ",\"finish_reason\":\"%s\"}],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,"
                   "\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":%d}},"
                   "\"timings\":{\"prompt_ms\":%.3f,\"predicted_ms\":%.3f,\"predicted_per_second\":%.3f}}",
                   finish, n_prompt, n_gen, n_prompt + n_gen, reuse, 1e3 * t_prompt, 1e3 * t_gen,
                   t_gen > 0 ? n_gen / t_gen : 0.0);
    if (b.oom) srv_error(r, 500, "out of memory");
    else mr_http_reply(r, 200, "application/json", b.p, b.n);
    mr_sbuf_free(&b);
    mr_sbuf_free(&text);
}

static int srv_tokenize(srv_state *st, const char *text, int add_special, int32_t **out) {
    int n = mr_tokenize(st->tok, text, strlen(text), add_special, 1, NULL, 0);
    if (n == INT_MIN) return -1;
    int need = n < 0 ? -n : n;
    *out = malloc(sizeof(int32_t) * (size_t)(need + 1));
    if (!*out) { mr_set_error("out of memory"); return -1; }
    n = mr_tokenize(st->tok, text, strlen(text), add_special, 1, *out, need + 1);
    if (n < 0) { free(*out); *out = NULL; if (n != INT_MIN) mr_set_error("tokenize: size changed"); return -1; }
    return n;
}

/* constant time in the key's length: the comparison does not reveal how much of a guess matched */
static int key_equal(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < nb; i++) d |= (unsigned char)(a[i < na ? i : 0] ^ b[i]);
    return d == 0;
}

static int srv_authorized(const srv_state *st, const mr_http_req *r) {
    if (!st->api_key) return 1;
    if (!strncasecmp(r->auth, "Bearer ", 7) && key_equal(r->auth + 7, st->api_key)) return 1;
    return r->api_key[0] && key_equal(r->api_key, st->api_key);
}

static int path_is(const char *path, const char *a, const char *b) {
    return !strcmp(path, a) || (b && !strcmp(path, b));
}

static void srv_handle(void *user, mr_http_req *r) {
    srv_state *st = user;
    if (!strcmp(r->method, "OPTIONS")) { mr_http_reply(r, 204, "text/plain", "", 0); return; }
    if (path_is(r->path, "/health", "/v1/health")) { mr_http_reply(r, 200, "application/json", "{\"status\":\"ok\"}", 15); return; }
    if (!srv_authorized(st, r)) {
        mr_http_reply_hdr(r, 401, "application/json", "WWW-Authenticate: Bearer\r\n",
                          "{\"error\":{\"message\":\"invalid or missing API key\",\"type\":\"authentication_error\",\"code\":401}}", 87);
        return;
    }
    if (path_is(r->path, "/v1/models", "/models")) {
        mr_sbuf b = {0};
        mr_sbuf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
        mr_sbuf_json_str(&b, st->model_name, strlen(st->model_name));
        mr_sbuf_printf(&b, ",\"object\":\"model\",\"owned_by\":\"moerun\",\"meta\":{\"arch\":\"%s\",\"n_ctx\":%d,"
                       "\"n_vocab\":%d}}]}", mr_model_arch(st->m), st->n_ctx, st->n_vocab);
        mr_http_reply(r, 200, "application/json", b.p ? b.p : "{}", b.n);
        mr_sbuf_free(&b);
        return;
    }
    int chat = path_is(r->path, "/v1/chat/completions", "/chat/completions");
    if (!chat && !path_is(r->path, "/v1/completions", "/completions") && strcmp(r->path, "/completion")) {
        srv_error(r, 404, "unknown endpoint");
        return;
    }
    if (strcmp(r->method, "POST")) { srv_error(r, 405, "use POST"); return; }
    mr_json *j = mr_json_parse(r->body, r->body_len);
    if (!j || j->type != MR_JSON_OBJ) { srv_error(r, 400, j ? "body must be a JSON object" : mr_last_error()); mr_json_free(j); return; }
    srv_opts o;
    char err[256];
    int32_t *toks = NULL;
    char *rendered = NULL;
    if (srv_parse_opts(j, &o, err, sizeof err) != 0) { srv_error(r, 400, err); goto done; }
    o.chat = chat;
    int n;
    if (chat) {
        const mr_json *msgs = mr_json_get(j, "messages");
        if (!msgs || msgs->type != MR_JSON_ARR || msgs->len == 0 || msgs->len > 4096) {
            srv_error(r, 400, "messages must be a non-empty array");
            goto done;
        }
        mr_chat_msg *cm = calloc(msgs->len, sizeof *cm);
        if (!cm) { srv_error(r, 500, "out of memory"); goto done; }
        int k = 0;
        for (const mr_json *c = msgs->child; c; c = c->next, k++) {
            cm[k].role = mr_json_get_str(c, "role", NULL);
            cm[k].content = mr_json_get_str(c, "content", NULL);
            if (!cm[k].role || !cm[k].content) { free(cm); srv_error(r, 400, "each message needs string role and content"); goto done; }
        }
        int len = mr_chat_render(st->m, NULL, cm, k, 1, NULL, 0);
        if (len >= 0 && (rendered = malloc((size_t)len + 1)) != NULL) mr_chat_render(st->m, NULL, cm, k, 1, rendered, len + 1);
        free(cm);
        if (len < 0) { srv_error(r, 400, mr_last_error()); goto done; }
        if (!rendered) { srv_error(r, 500, "out of memory"); goto done; }
        /* the template may already start with the BOS text; do not add a second one */
        int32_t bos = mr_tokenizer_bos(st->tok);
        const char *bos_text = bos >= 0 ? mr_token_text(st->tok, bos) : NULL;
        int add = !(bos_text && *bos_text && !strncmp(rendered, bos_text, strlen(bos_text)));
        n = srv_tokenize(st, rendered, add, &toks);
    } else {
        const char *prompt = mr_json_get_str(j, "prompt", NULL);
        if (!prompt) { srv_error(r, 400, "prompt must be a string"); goto done; }
        n = srv_tokenize(st, prompt, 1, &toks);
    }
    if (n < 0) { srv_error(r, 400, mr_last_error()); goto done; }
    if (n == 0) { srv_error(r, 400, "empty prompt"); goto done; }
    if (n >= st->n_ctx) { srv_error(r, 400, "prompt does not fit the context"); goto done; }
    if (srv_acquire(st, r) != 0) goto done; /* the client left while queued */
    pthread_mutex_lock(&st->qmu);
    o.id = ++st->req_id;
    pthread_mutex_unlock(&st->qmu);
    srv_generate(st, r, &o, toks, n);
    srv_release(st);
done:
    free(toks);
    free(rendered);
    mr_json_free(j);
}

void mr_server_params_default(mr_server_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->listen_fd = -1;
}

int mr_server_listen(const char *host, int port) { return mr_http_listen(host, port); }

int mr_server_run(mr_model *m, const mr_server_params *p) {
    srv_state st;
    memset(&st, 0, sizeof st);
    st.m = m;
    st.api_key = p->api_key && *p->api_key ? p->api_key : NULL;
    pthread_mutex_init(&st.qmu, NULL);
    pthread_cond_init(&st.qcv, NULL);
    int fd = p->listen_fd;
    st.tok = mr_model_tokenizer(m);
    int rc = -1;
    if (!st.tok) { mr_set_error("server: the model has no usable tokenizer"); goto done; }
    st.n_vocab = mr_model_n_vocab(m);
    st.s = mr_session_new(m, p->n_ctx);
    if (!st.s) goto done;
    st.n_ctx = mr_session_n_ctx(st.s);
    st.cache = malloc(sizeof(int32_t) * (size_t)st.n_ctx);
    st.logits = malloc(sizeof(float) * (size_t)st.n_vocab);
    const char *name = mr_model_meta_str(m, "general.name");
    st.model_name = p->alias ? p->alias : name ? name : mr_model_arch(m);
    if (!st.cache || !st.logits) { mr_set_error("server: out of memory"); goto done; }
    if (fd < 0 && (fd = mr_http_listen(p->host, p->port)) < 0) goto done;
    mr_log(1, "listening on http://%s:%d (model %s, %s, context %d, %d threads%s)\n", p->host, p->port,
           st.model_name, mr_model_arch(m), st.n_ctx, mr_model_n_threads(m), st.api_key ? ", API key required" : "");
    rc = mr_http_serve_fd(fd, NULL, srv_handle, &st, p->stop);
    fd = -1; /* closed by the server loop */
done:
    if (fd >= 0 && fd != p->listen_fd) close(fd);
    free(st.cache);
    free(st.logits);
    mr_session_free(st.s);
    pthread_mutex_destroy(&st.qmu);
    pthread_cond_destroy(&st.qcv);
    return rc;
}
