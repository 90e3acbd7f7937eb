/* HTTP server for the OpenAI and Anthropic APIs: routing, authentication and the small endpoints
 * (/health, /v1/models, /props, /slots, /metrics, /tokenize, /detokenize, /apply-template,
 * /v1/admin/moe); the server's start. Connections are served by their own threads (http.c); the
 * generation requests go to complete.c, which runs them on the scheduler (sched.c) and answers with
 * its API's writer (reply*.c). The layers, top down: server.c -> complete.c -> prompt.c, reply*.c ->
 * sched.c; calls go downwards only. */
#include "server/complete.h"
#include "server/conf.h"
#include "server/prompt.h"
#include "server/reply.h"
#include "server/responses.h"
#include "server/sched.h"
#include "base/base.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    srv_conf cf;
    srv_sched *sc;
} srv_server;

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

static int srv_authorized(const srv_server *st, const mr_http_req *r) { return !st->cf.api_key || has_key(r, st->cf.api_key); }

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
static void ep_admin_moe(srv_server *st, mr_http_req *r) {
    const char *key = st->cf.admin_key ? st->cf.admin_key : st->cf.api_key;
    if (!key) {
        srv_error(r, 403, "the admin endpoint is disabled: start the server with --admin-key KEY (or --api-key KEY)");
        return;
    }
    if (!has_key(r, key)) {
        reply_unauthorized(r, st->cf.admin_key ? "invalid or missing admin key" : "invalid or missing API key");
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
        bad = srv_sched_set_approx(st->sc, spec.p ? spec.p : "", "POST /v1/admin/moe");
        mr_sbuf_free(&spec);
        if (bad) { srv_error(r, 400, mr_last_error()); return; }
    }
    mr_sbuf b = {0};
    char buf[SRV_APPROX_LEN];
    unsigned long changes;
    srv_sched_approx(st->sc, buf, &changes);
    mr_sbuf_puts(&b, "{");
    srv_put_approx(st->sc, &b);
    mr_sbuf_printf(&b, ",\"changes\":%lu,\"control_file\":", changes);
    const char *path = srv_sched_approx_file(st->sc);
    if (path) mr_sbuf_json_str(&b, path, strlen(path));
    else mr_sbuf_puts(&b, "null");
    mr_sbuf_puts(&b, "}");
    srv_approx_header(st->sc, r);
    srv_reply_json(r, &b);
}

static int path_is(const char *path, const char *a, const char *b) { return !strcmp(path, a) || (b && !strcmp(path, b)); }

static void ep_models(srv_server *st, mr_http_req *r) {
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"object\":\"list\",\"data\":[{\"id\":");
    mr_sbuf_json_str(&b, st->cf.model_name, strlen(st->cf.model_name));
    mr_sbuf_printf(&b, ",\"object\":\"model\",\"created\":%ld,\"owned_by\":\"moerun\",\"meta\":{\"arch\":\"%s\",\"n_ctx\":%d,"
                   "\"n_vocab\":%d}}]}", st->cf.started_wall, mr_model_arch(st->cf.m), st->cf.n_ctx, st->cf.n_vocab);
    srv_reply_json(r, &b);
}

static void ep_props(srv_server *st, mr_http_req *r) {
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"model\":");
    mr_sbuf_json_str(&b, st->cf.model_name, strlen(st->cf.model_name));
    mr_sbuf_printf(&b, ",\"arch\":\"%s\",\"n_ctx\":%d,\"n_vocab\":%d,\"total_slots\":%d,\"chat_template\":\"%s\","
                   "\"n_threads\":%d,\"default_generation_settings\":{\"params\":{\"speculative.n_max\":%d,"
                   "\"speculative.ngram\":%d}},\"build\":\"%s\",", mr_model_arch(st->cf.m), st->cf.n_ctx, st->cf.n_vocab, st->cf.n_slots,
                   st->cf.tmpl, mr_model_n_threads(st->cf.m), st->cf.spec_max, st->cf.spec_ngram, mr_version());
    srv_put_approx(st->sc, &b);
    mr_sbuf_puts(&b, "}");
    srv_reply_json(r, &b);
}

static void ep_slots(srv_server *st, mr_http_req *r) {
    mr_sbuf b = {0};
    int *busy = mr_malloc(sizeof(int) * 2 * (size_t)st->cf.n_slots);
    if (!busy) { srv_error(r, 500, "out of memory"); return; }
    int *n_cache = busy + st->cf.n_slots;
    srv_sched_slots(st->sc, busy, n_cache);
    mr_sbuf_puts(&b, "[");
    for (int i = 0; i < st->cf.n_slots; i++)
        mr_sbuf_printf(&b, "%s{\"id\":%d,\"n_ctx\":%d,\"is_processing\":%s,\"n_cached_tokens\":%d}", i ? "," : "", i, st->cf.n_ctx,
                       busy[i] ? "true" : "false", n_cache[i]);
    free(busy);
    mr_sbuf_puts(&b, "]");
    srv_reply_json(r, &b);
}

static void ep_metrics(srv_server *st, mr_http_req *r) {
    srv_metrics c;
    srv_sched_metrics(st->sc, &c);
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
    M("kv_cache_tokens", "gauge", "Tokens held in the slots' sessions (the prompt caches).", "%d", c.kv);
    M("kv_cache_capacity_tokens", "gauge", "Context length of all slots.", "%d", c.n_ctx * c.n_slots);
    mr_pcache *pc = srv_sched_pcache(st->sc);
    if (pc) {
        mr_pcache_stats ps;
        mr_pcache_stats_get(pc, &ps);
        M("prompt_cache_hits_total", "counter", "Prompts that restored a snapshot of the prompt cache.", "%llu", (unsigned long long)ps.hits);
        M("prompt_cache_misses_total", "counter", "Lookups that found no snapshot beyond what the slot held.", "%llu", (unsigned long long)ps.misses);
        M("prompt_cache_tokens_restored_total", "counter", "Prompt tokens restored from snapshots.", "%llu", (unsigned long long)ps.tokens_restored);
        M("prompt_cache_stores_total", "counter", "Snapshots taken.", "%llu", (unsigned long long)ps.stores);
        M("prompt_cache_disk_reads_total", "counter", "Snapshots restored from a file.", "%llu", (unsigned long long)ps.disk_reads);
        M("prompt_cache_disk_writes_total", "counter", "Snapshot files written.", "%llu", (unsigned long long)ps.disk_writes);
        M("prompt_cache_evictions_total", "counter", "Snapshot copies dropped for the RAM or disk bound.", "%llu", (unsigned long long)ps.evictions);
        M("prompt_cache_bad_files_total", "counter", "Snapshots refused (checksum, size, header, tokens) and removed.", "%llu", (unsigned long long)ps.bad_files);
        M("prompt_cache_entries", "gauge", "Snapshots held (in RAM, on disk or both).", "%d", ps.n_entries);
        M("prompt_cache_ram_bytes", "gauge", "Bytes of snapshots in RAM.", "%llu", (unsigned long long)ps.ram_bytes);
        M("prompt_cache_disk_bytes", "gauge", "Bytes of snapshot files.", "%llu", (unsigned long long)ps.disk_bytes);
    }
    mr_pager_stats ps;
    if (mr_model_pager_stats(st->cf.m, &ps) == 0 && ps.paging) {
        M("pager_hits_total", "counter", "Expert uses served from RAM.", "%llu", (unsigned long long)ps.hits);
        M("pager_misses_total", "counter", "Expert uses read from disk.", "%llu", (unsigned long long)ps.misses);
        M("pager_bytes_read_total", "counter", "Bytes of experts read from disk.", "%llu", (unsigned long long)ps.bytes_read);
        M("pager_hit_ratio", "gauge", "Hits over uses since the model loaded.", "%.6f",
          ps.hits + ps.misses ? (double)ps.hits / (double)(ps.hits + ps.misses) : 0.0);
        M("pager_stall_seconds_total", "counter", "Time compute waited for expert reads.", "%.6f", ps.stall_s);
        M("pager_io_busy_seconds_total", "counter", "Time at least one expert read was in flight.", "%.6f", ps.io_busy_s);
        M("pager_miss_bytes_total", "counter", "Bytes read for the expert uses that missed (unused guesses not counted).", "%llu",
          (unsigned long long)ps.miss_bytes);
        M("pager_decode_seconds_total", "counter", "Wall time of decode evaluations (one token per sequence).", "%.6f", ps.decode_s);
        M("pager_decode_miss_bytes_total", "counter", "Bytes of the misses of decode evaluations.", "%llu",
          (unsigned long long)ps.decode_miss_bytes);
        double need_s, rate;
        const double eff = mr_pager_io_efficiency(&ps, NULL, &need_s, &rate);
        M("pager_read_bytes_per_second", "gauge", "The device's read rate as measured: bytes read over I/O busy time (the higher of all reads' and decode's).",
          "%.0f", rate);
        M("pager_decode_io_efficiency", "gauge",
          "Time decode's miss bytes need at that read rate over decode time: near 1 bound by the disk, near 0 by compute.",
          "%.6f", eff < 0 ? 0.0 : eff);
    }
    M("uptime_seconds", "gauge", "Seconds since the server started.", "%.3f", mr_now() - st->cf.started);
#undef M
    if (b.oom) { srv_error(r, 500, "out of memory"); mr_sbuf_free(&b); return; }
    mr_http_reply(r, 200, "text/plain; version=0.0.4", b.p ? b.p : "", b.n);
    mr_sbuf_free(&b);
}

/* A file name for POST /slots/N: letters, digits, '.', '_', '-', not starting with '.', not a prompt
 * cache file (*.mrsnap), at most 200 bytes; so it stays in the cache directory. */
static int slot_file_ok(const char *f) {
    size_t n = strlen(f);
    if (n == 0 || n > 200 || f[0] == '.' || (n >= 7 && !strcmp(f + n - 7, ".mrsnap"))) return 0;
    for (size_t i = 0; i < n; i++)
        if (!((f[i] >= 'a' && f[i] <= 'z') || (f[i] >= 'A' && f[i] <= 'Z') || (f[i] >= '0' && f[i] <= '9') || strchr("._-", f[i]))) return 0;
    return 1;
}

/* POST /slots/N?action=save|restore|erase as llama-server: {"filename": F} saves the slot's session
 * (its snapshot with the token ids) into the cache directory as F, or restores it from there; erase
 * empties the slot. The slot must be free (503 otherwise). */
static void ep_slot_action(srv_server *st, mr_http_req *r) {
    char *end;
    long id = strtol(r->path + 7, &end, 10);
    if (end == r->path + 7 || *end || id < 0 || id >= st->cf.n_slots) { srv_error(r, 404, "no such slot"); return; }
    if (strcmp(r->method, "POST")) { srv_error(r, 405, "use POST"); return; }
    const char *a = r->query;
    int act = !strcmp(a, "action=save") ? 1 : !strcmp(a, "action=restore") ? 2 : !strcmp(a, "action=erase") ? 3 : 0;
    if (!act) { srv_error(r, 400, "the query must be action=save, action=restore or action=erase"); return; }
    char path[4096] = "";
    const char *fname = "";
    mr_json *j = NULL;
    if (act != 3) {
        if (!st->cf.cache_dir) { srv_error(r, 501, "slot files need a directory: start the server with --cache-dir DIR"); return; }
        j = mr_json_parse(r->body, r->body_len);
        const mr_json *f = j && j->type == MR_JSON_OBJ ? mr_json_get(j, "filename") : NULL;
        if (!f || f->type != MR_JSON_STR || strlen(f->str) != f->len || !slot_file_ok(f->str)) {
            mr_json_free(j);
            srv_error(r, 400, "'filename' must be a file name (letters, digits, '.', '_', '-'; not starting with '.', not *.mrsnap)");
            return;
        }
        fname = f->str;
        snprintf(path, sizeof path, "%s/%s", st->cf.cache_dir, fname);
    }
    srv_slot *sl = srv_acquire_slot(st->sc, (int)id);
    if (!sl) { mr_json_free(j); srv_error(r, 503, "the slot is busy"); return; }
    const double t0 = mr_now();
    int n = sl->n_cache, rc = 0;
    if (act == 1) rc = mr_session_save_file(sl->s, sl->cache, path);
    else if (act == 2) {
        n = mr_session_restore_file(sl->s, path, sl->cache, st->cf.n_ctx);
        sl->n_cache = n > 0 ? n : 0;
        rc = n < 0 ? -1 : 0;
    } else srv_cache_forget(sl);
    const size_t bytes = act == 3 || rc ? 0 : mr_session_save_size(sl->s, 1);
    srv_release(st->sc, sl);
    if (rc) { mr_json_free(j); srv_error(r, 400, mr_last_error()); return; }
    mr_sbuf b = {0};
    mr_sbuf_printf(&b, "{\"id_slot\":%ld", id);
    if (act == 3) mr_sbuf_printf(&b, ",\"n_erased\":%d}", n);
    else {
        mr_sbuf_puts(&b, ",\"filename\":");
        mr_sbuf_json_str(&b, fname, strlen(fname));
        mr_sbuf_printf(&b, act == 1 ? ",\"n_saved\":%d,\"n_written\":%zu,\"timings\":{\"save_ms\":%.3f}}"
                                    : ",\"n_restored\":%d,\"n_read\":%zu,\"timings\":{\"restore_ms\":%.3f}}",
                       n, bytes, 1e3 * (mr_now() - t0));
    }
    mr_json_free(j);
    srv_reply_json(r, &b);
}

/* POST /tokenize {"content": text, "add_special": false, "with_pieces": false} -> {"tokens": [...]} */
static void ep_tokenize(srv_server *st, mr_http_req *r, const mr_json *j) {
    const mr_json *c = mr_json_get(j, "content");
    const mr_json *as = mr_json_get(j, "add_special"), *wp = mr_json_get(j, "with_pieces");
    if (!c || c->type != MR_JSON_STR) { srv_error(r, 400, "'content' must be a string"); return; }
    if ((as && as->type != MR_JSON_BOOL) || (wp && wp->type != MR_JSON_BOOL)) { srv_error(r, 400, "'add_special' and 'with_pieces' must be true or false"); return; }
    int32_t *ids = NULL;
    int n = srv_tokenize(&st->cf, c->str, as && as->num, &ids);
    if (n < 0) { srv_error(r, 400, mr_last_error()); return; }
    mr_sbuf b = {0};
    mr_sbuf_puts(&b, "{\"tokens\":[");
    for (int i = 0; i < n; i++) {
        if (i) mr_sbuf_puts(&b, ",");
        if (wp && wp->num) {
            char piece[256];
            int pl = mr_token_to_piece(st->cf.tok, ids[i], piece, sizeof piece, 1);
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
static void ep_detokenize(srv_server *st, mr_http_req *r, const mr_json *j) {
    const mr_json *t = mr_json_get(j, "tokens");
    if (!t || t->type != MR_JSON_ARR || t->len > (size_t)st->cf.n_ctx * 4 + 4096) { srv_error(r, 400, "'tokens' must be an array of token ids"); return; }
    int32_t *ids = mr_malloc(sizeof(int32_t) * (t->len + 1));
    if (!ids) { srv_error(r, 500, "out of memory"); return; }
    int n = 0;
    for (const mr_json *c = t->child; c; c = c->next) {
        if (c->type != MR_JSON_NUM || c->num < 0 || c->num >= st->cf.n_vocab || c->num != (double)(int32_t)c->num) {
            free(ids);
            srv_error(r, 400, "'tokens' must be token ids of the model's vocabulary");
            return;
        }
        ids[n++] = (int32_t)c->num;
    }
    int len = mr_detokenize(st->cf.tok, ids, n, NULL, 0, 0, 1);
    int need = len < 0 && len != INT_MIN ? -len : len;
    char *text = len == INT_MIN ? NULL : mr_malloc((size_t)need + 1);
    if (text) len = mr_detokenize(st->cf.tok, ids, n, text, need + 1, 0, 1);
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
static void ep_apply_template(srv_server *st, mr_http_req *r, const mr_json *j) {
    srv_req q;
    char err[256];
    if (srv_req_parse(j, SRV_API_CHAT, &q, err, sizeof err)) { srv_req_free(&q); srv_error(r, 400, err); return; }
    char *text = srv_render_chat(&st->cf, &q, 1);
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
    srv_server *st = user;
    double t0 = mr_now();
    if (!strcmp(r->method, "OPTIONS")) { mr_http_reply(r, 204, "text/plain", "", 0); return; }
    if (path_is(r->path, "/health", "/v1/health")) {
        /* a model file that shrank under the mapping: every request fails now, so say so here too */
        if (mr_model_check_files(st->cf.m)) { srv_error(r, 503, mr_last_error()); return; }
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
    if (!strncmp(r->path, "/slots/", 7)) { ep_slot_action(st, r); return; }
    if (path_is(r->path, "/metrics", NULL)) { ep_metrics(st, r); return; }
    int api = -1, small = 0;
    if (path_is(r->path, "/v1/chat/completions", "/chat/completions")) api = SRV_API_CHAT;
    else if (path_is(r->path, "/v1/completions", "/completions") || !strcmp(r->path, "/completion")) api = SRV_API_COMPLETIONS;
    else if (path_is(r->path, "/v1/messages", "/messages")) api = SRV_API_ANTHROPIC;
    else if (path_is(r->path, "/v1/responses", "/responses")) api = SRV_API_RESPONSES;
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
    srv_complete(&st->cf, st->sc, r, api);
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

/* the startup line: where, which model, how it is served */
static void log_listening(const srv_server *st, const mr_server_params *p) {
    const srv_conf *cf = &st->cf;
    mr_pager_stats ps;
    char paging[96] = "";
    if (mr_model_pager_stats(cf->m, &ps) == 0 && ps.paging)
        snprintf(paging, sizeof paging, ", experts paged: %d slots of %.1f MiB", ps.n_slots, ps.slot_bytes / 1048576.0);
    char steps[96] = "";
    if (cf->n_slots > 1)
        snprintf(steps, sizeof steps, srv_sched_can_batch(st->sc) ? ", batched steps: decode tokens + %d prompt tokens" : ", no batched steps for this architecture",
                 p->step_prompt > 0 ? p->step_prompt : MR_SERVER_STEP_PROMPT);
    char spec[160] = "";
    if (cf->spec_max)
        snprintf(spec, sizeof spec, ", speculative decoding: %s drafts of up to %d%s", cf->spec_mtp ? "MTP" : "n-gram", cf->spec_max,
                 srv_sched_can_truncate(st->sc) ? "" : " (off: this architecture's state cannot be cut back)");
    mr_log(1, "listening on http://%s:%d (model %s, %s, chat template %s, context %d, %d threads, %d slot%s%s%s%s%s)\n",
           p->host, p->port, cf->model_name, mr_model_arch(cf->m), cf->tmpl, cf->n_ctx, mr_model_n_threads(cf->m), cf->n_slots,
           cf->n_slots > 1 ? "s" : "", steps, paging, spec, cf->api_key ? ", API key required" : "");
    mr_pcache *pc = srv_sched_pcache(st->sc);
    if (pc) {
        mr_pcache_stats ps;
        mr_pcache_stats_get(pc, &ps);
        mr_log(1, "prompt cache: %.0f MiB RAM%s%s, a snapshot every %d prompt tokens and at message boundaries; %d files (%.1f MiB) found\n",
               p->cache_ram / 1048576.0, cf->cache_dir ? ", directory " : "", cf->cache_dir ? cf->cache_dir : "", cf->cache_every,
               ps.n_disk, ps.disk_bytes / 1048576.0);
    }
    const char *file = srv_sched_approx_file(st->sc);
    if (cf->admin_key || cf->api_key || file) {
        char approx[SRV_APPROX_LEN];
        srv_sched_approx(st->sc, approx, NULL);
        mr_log(1, "moe approx: %s%s%s%s\n", approx, cf->admin_key || cf->api_key ? "; POST /v1/admin/moe changes it" : "",
               file ? "; control file " : "", file ? p->approx_file : "");
    }
}

int mr_server_run(mr_model *m, const mr_server_params *p) {
    srv_server st;
    memset(&st, 0, sizeof st);
    srv_conf *cf = &st.cf;
    cf->m = m;
    cf->api_key = p->api_key && *p->api_key ? p->api_key : NULL;
    cf->admin_key = p->admin_key && *p->admin_key ? p->admin_key : NULL;
    cf->started = mr_now();
    cf->started_wall = (long)time(NULL);
    int fd = p->listen_fd;
    cf->tok = mr_model_tokenizer(m);
    int rc = -1;
    if (!cf->tok) { mr_set_error("server: the model has no usable tokenizer"); goto done; }
    cf->tmpl = p->chat_template ? p->chat_template : mr_chat_template_detect(m);
    if (!mr_chat_template_known(cf->tmpl)) { mr_set_error("server: unknown chat template '%s'", cf->tmpl); goto done; }
    cf->n_vocab = mr_model_n_vocab(m);
    if (p->spec_max < 0 || p->spec_max > 64 || p->spec_ngram < 1 || p->spec_ngram > 64) {
        mr_set_error("server: draft length %d (0..64) or n-gram size %d (1..64) out of range", p->spec_max, p->spec_ngram);
        goto done;
    }
    cf->spec_max = p->spec_max;
    cf->spec_ngram = p->spec_ngram;
    cf->spec_mtp = p->spec_mtp;
    if (cf->spec_mtp && !mr_model_n_mtp(m)) {
        mr_set_error("server: MTP drafts need a model with its MTP block loaded (a deepseek4 file with "
                     "nextn_predict_layers, loaded with mr_model_params.mtp = 1)");
        goto done;
    }
    cf->n_slots = p->n_parallel > 0 ? p->n_parallel : 1;
    cf->cache_every = p->cache_every > 0 ? p->cache_every : MR_SERVER_CACHE_EVERY;
    cf->cache_dir = p->cache_dir && *p->cache_dir ? p->cache_dir : NULL;
    srv_sched_params sp = {.n_slots = cf->n_slots, .n_ctx = p->n_ctx, .step_prompt = p->step_prompt, .approx_file = p->approx_file,
                           .cache = {.ram_bytes = p->cache_ram, .dir = cf->cache_dir, .disk_bytes = p->cache_disk}};
    if (!(st.sc = srv_sched_new(m, &sp))) goto done;
    if (!(cf->store = srv_store_new(SRV_STORE_MAX, SRV_STORE_MAX_BYTES))) goto done;
    cf->n_ctx = srv_sched_n_ctx(st.sc);
    const char *name = mr_model_meta_str(m, "general.name");
    cf->model_name = p->alias ? p->alias : name ? name : mr_model_arch(m);
    if (fd < 0 && (fd = mr_http_listen(p->host, p->port)) < 0) goto done;
    log_listening(&st, p);
    rc = mr_http_serve_fd(fd, NULL, srv_handle, &st, p->stop);
    fd = -1; /* closed by the server loop */
done:
    if (fd >= 0 && fd != p->listen_fd) close(fd);
    srv_sched_free(st.sc);
    srv_store_free(cf->store);
    return rc;
}
