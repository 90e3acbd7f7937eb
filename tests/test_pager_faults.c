/* Pager faults under load: a server paging tiny-qwen3moe's experts at the floor budget answers a
 * streamed chat request while a pager fault (mr_pager_params.fault) makes one read fail (EIO or
 * short) at a point chosen at random (seeded) among that request's reads. The request must end with
 * an error: a 500 reply when the prompt's evaluation failed, else an error event with only a prefix
 * of the reference text before it (never a wrong token); the next request must give the reference
 * reply again (the failed slot is read again). With slow reads (slow:MS) the
 * reply is the reference one. Each case loads its own model: the fault spec is read at load. */
#include "test.h"
#include "server_util.h"
#include "base/base.h"

static const char *body = "{\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story\"}],\"max_tokens\":8,"
                          "\"temperature\":0,\"stream\":true}";

/* text of a stream: the "content" values of its data events, concatenated (raw JSON escapes kept) */
static void stream_text(const char *r, char *out, size_t cap, int *error_event, int *done) {
    size_t n = 0;
    *error_event = r && strstr(r, "data: {\"error\"") != NULL;
    *done = r && strstr(r, "data: [DONE]") != NULL;
    out[0] = 0;
    for (const char *p = r; p && (p = strstr(p, "\"content\":\"")) != NULL;) {
        p += 11;
        const char *e = p;
        while (*e && !(*e == '"' && e[-1] != '\\')) e++;
        size_t k = (size_t)(e - p);
        if (n + k < cap) { memcpy(out + n, p, k); n += k; out[n] = 0; }
        p = e;
    }
}

typedef struct { srv_thread t; pthread_t th; } server;

static int start(server *s, const char *fault, uint64_t budget, int port) {
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 1;
    mp.ram_budget = budget;
    mp.pager.fault = fault;
    s->t.m = mr_model_load(t_shared("models/tiny-qwen3moe.gguf"), &mp);
    if (!s->t.m) return -1;
    s->t.port = port;
    s->t.stop = 0;
    s->t.rc = 0;
    s->t.err[0] = 0;
    pthread_create(&s->th, NULL, srv_thread_main, &s->t);
    for (int i = 0; i < 100; i++) { /* up? */
        char *r = http_raw(port, HEALTH_REQ, strlen(HEALTH_REQ));
        int ok = status_of(r) == 200;
        free(r);
        if (ok) return 0;
        usleep(50000);
    }
    srv_thread_stop(&s->t);
    pthread_join(s->th, NULL);
    mr_model_free(s->t.m);
    return -1;
}

static void stop(server *s) {
    srv_thread_stop(&s->t);
    pthread_join(s->th, NULL);
    mr_model_free(s->t.m);
}

static uint64_t reads_of(server *s) {
    mr_pager_stats ps;
    return mr_model_pager_stats(s->t.m, &ps) == 0 ? ps.reads : 0;
}

static void test_faults_during_stream(void) {
    mr_pager_model_info info;
    CHECK(mr_pager_model_sizes(t_shared("models/tiny-qwen3moe.gguf"), &info) == 0, "%s", mr_last_error());
    const uint64_t budget = info.min_budget;
    /* the reference: no fault; how many reads the first request makes */
    server s;
    int port0 = free_port();
    CHECK(start(&s, NULL, budget, port0) == 0, "server: %s", s.t.err);
    char *r = http_post(port0, "/v1/chat/completions", body);
    uint64_t reads = reads_of(&s);
    char ref[4096];
    int err_ev, done;
    stream_text(r, ref, sizeof ref, &err_ev, &done);
    CHECK(status_of(r) == 200 && done && !err_ev && ref[0] && reads > 0, "reference: %.300s", r ? r : "none");
    free(r);
    stop(&s);
    if (!reads) return;
    /* faults at random reads of the first request */
    mr_rng rng;
    mr_rng_seed(&rng, 14);
    int cases = 0, errors = 0, prompt_errors = 0, recovered = 0, prefix_ok = 0;
    for (int k = 0; k < 8; k++) {
        uint64_t at = 1 + mr_rng_next(&rng) % reads;
        char spec[64];
        snprintf(spec, sizeof spec, "%s:%llu", k % 2 ? "short" : "eio", (unsigned long long)at);
        int port = free_port();
        if (start(&s, spec, budget, port) != 0) { CHECK(0, "%s: server: %s", spec, s.t.err); continue; }
        cases++;
        r = http_post(port, "/v1/chat/completions", body);
        char got[4096];
        stream_text(r, got, sizeof got, &err_ev, &done);
        /* a fault while the prompt is evaluated: a 500 JSON reply (nothing streamed yet); during the
         * generation: an error event, and before it only a prefix of the reference text */
        int is_prefix = !strncmp(ref, got, strlen(got));
        int in_prompt = status_of(r) == 500 && strstr(r, "\"error\"");
        errors += err_ev;
        prompt_errors += in_prompt;
        prefix_ok += is_prefix;
        CHECK((err_ev || in_prompt) && is_prefix && strstr(r, "pager:"), "%s: got '%s' (reference '%s'): %.300s", spec,
              got, ref, r ? r : "none");
        free(r);
        r = http_post(port, "/v1/chat/completions", body);
        stream_text(r, got, sizeof got, &err_ev, &done);
        int ok = done && !err_ev && !strcmp(got, ref);
        recovered += ok;
        CHECK(ok, "%s: the next request: '%s' (reference '%s')", spec, got, ref);
        free(r);
        stop(&s);
    }
    printf("# pager faults during a streamed request (%llu reads per request, floor budget): %d cases (eio/short at "
           "random reads): %d during the prompt (500 reply), %d during generation (error event), %d with only "
           "reference text before the error, %d next requests gave the reference reply\n", (unsigned long long)reads,
           cases, prompt_errors, errors, prefix_ok, recovered);
    /* slow reads: slower, same reply */
    port0 = free_port();
    CHECK(start(&s, "slow:3", budget, port0) == 0, "slow: %s", s.t.err);
    double t0 = mr_now();
    r = http_post(port0, "/v1/chat/completions", body);
    double dt = mr_now() - t0;
    char got[4096];
    stream_text(r, got, sizeof got, &err_ev, &done);
    CHECK(done && !err_ev && !strcmp(got, ref), "slow:3: '%s' (reference '%s')", got, ref);
    printf("# slow:3 (every read waits 3 ms): %llu reads, %.2f s, reply identical: %s\n",
           (unsigned long long)reads_of(&s), dt, !strcmp(got, ref) ? "yes" : "no");
    free(r);
    stop(&s);
}

int main(void) {
    mr_set_log_level(0);
    RUN(test_faults_during_stream);
    return t_finish();
}
