/* The server under abuse (loopback, bounded loops; slow clients are issue 11's): thousands of short
 * connections, oversized request lines / headers / bodies, invalid UTF-8 in prompts and messages,
 * more tokens asked than the context holds, and the resident memory over 1000 requests. After each
 * kind the server must still answer a normal request correctly. Numbers go to stdout ("# ...") for
 * docs/RELIABILITY.md. The server runs in a thread of this process on tiny-qwen3moe. */
#include "test.h"
#include "server_util.h"
#include "base/base.h"

#include <sys/resource.h>

static srv_thread srv;
static pthread_t srv_th;
static char *ref_body; /* reply to the normal request, for "still works" checks */
static const char *normal = "{\"prompt\":\"Hello\",\"max_tokens\":3,\"temperature\":0}";

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) v = atol(line + 6);
    if (f) fclose(f);
    return v;
}

/* the body of a reply with the varying fields cut: from "choices" to "usage" */
static char *choices_of(const char *r) {
    const char *a = r ? strstr(r, "\"choices\"") : NULL, *b = a ? strstr(a, "\"usage\"") : NULL;
    if (!b) return NULL;
    char *s = malloc((size_t)(b - a) + 1);
    if (s) { memcpy(s, a, (size_t)(b - a)); s[b - a] = 0; }
    return s;
}

static int still_works(void) {
    char *r = http_post(srv.port, "/v1/completions", normal);
    char *c = choices_of(r);
    int ok = status_of(r) == 200 && c && ref_body && !strcmp(c, ref_body);
    free(c);
    free(r);
    return ok;
}

static void test_start(void) {
    mr_model_params mp;
    mr_model_params_default(&mp);
    mp.n_threads = 1;
    srv.m = mr_model_load(t_shared("models/tiny-qwen3moe.gguf"), &mp);
    CHECK(srv.m, "load: %s", mr_last_error());
    if (!srv.m) exit(t_finish());
    srv.port = free_port();
    pthread_create(&srv_th, NULL, srv_thread_main, &srv);
    char *r = NULL;
    for (int i = 0; i < 100 && !r; i++) { r = http_post(srv.port, "/v1/completions", normal); if (!r) usleep(50000); }
    ref_body = choices_of(r);
    CHECK(status_of(r) == 200 && ref_body, "first request: %s", r ? r : "no answer");
    free(r);
    if (!ref_body) exit(t_finish());
}

/* connections closed at once, or after a partial request line: the server moves on */
static void test_short_connections(void) {
    /* 1000 in `make test` (about 40 s on a loaded 2-core machine); MR_ABUSE_CONNS=N for more */
    const int n = getenv("MR_ABUSE_CONNS") ? atoi(getenv("MR_ABUSE_CONNS")) : 1000;
    int failed = 0;
    double t0 = mr_now();
    for (int i = 0; i < n; i++) {
        int fd = http_connect(srv.port);
        if (fd < 0) { failed++; continue; }
        if (i % 3 == 1) (void)!send(fd, "GET /hea", 8, MSG_NOSIGNAL);
        if (i % 3 == 2) { /* a whole request, the reply not read */
            static const char q[] = "GET /health HTTP/1.0\r\n\r\n";
            (void)!send(fd, q, sizeof q - 1, MSG_NOSIGNAL);
        }
        close(fd);
    }
    double dt = mr_now() - t0;
    if (getenv("MR_ABUSE_KINDS")) /* time each kind alone (diagnosis): MR_ABUSE_KINDS=1 */
        for (int kind = 0; kind < 3; kind++) {
            double k0 = mr_now();
            for (int i = 0; i < 100; i++) {
                int fd = http_connect(srv.port);
                if (fd < 0) continue;
                if (kind == 1) (void)!send(fd, "GET /hea", 8, MSG_NOSIGNAL);
                if (kind == 2) (void)!send(fd, "GET /health HTTP/1.0\r\n\r\n", 24, MSG_NOSIGNAL);
                close(fd);
            }
            printf("# kind %d: 100 connections in %.2f s\n", kind, mr_now() - k0);
        }
    int health = 0;
    for (int i = 0; i < 1000; i++) {
        char *r = http_raw(srv.port, "GET /health HTTP/1.0\r\n\r\n", 24);
        health += status_of(r) == 200 && strstr(r, "\"ok\"");
        free(r);
    }
    printf("# short connections: %d opened and closed in %.2f s (%d refused); then 1000 /health: %d ok\n", n, dt, failed,
           health);
    CHECK(failed == 0 && health == 1000, "%d refused, %d/1000 health", failed, health);
    CHECK(still_works(), "normal request after short connections");
}

/* oversized request line, headers and bodies get their 4xx and the connection closes */
static void test_oversized(void) {
    size_t big = 40 * 1024;
    char *q = malloc(big + 64);
    /* header section past 32 KiB without its end */
    int k = snprintf(q, 64, "GET /health HTTP/1.0\r\nX-Pad: ");
    memset(q + k, 'a', big);
    char *r = http_raw(srv.port, q, (size_t)k + big);
    CHECK(status_of(r) == 431, "huge header: %.100s", r ? r : "none");
    free(r);
    /* a request line longer than the path buffer */
    k = snprintf(q, 64, "GET /");
    memset(q + k, 'p', 4000);
    memcpy(q + k + 4000, " HTTP/1.0\r\n\r\n", 13);
    r = http_raw(srv.port, q, (size_t)k + 4013);
    CHECK(status_of(r) == 414, "long path: %.100s", r ? r : "none");
    free(r);
    free(q);
    /* a declared body over 16 MiB: refused before it is sent */
    const char *h = "POST /v1/completions HTTP/1.0\r\nContent-Length: 17000000\r\n\r\n";
    r = http_raw(srv.port, h, strlen(h));
    CHECK(status_of(r) == 413, "huge body: %.100s", r ? r : "none");
    free(r);
    /* negative, garbage and chunked lengths */
    const char *bad[] = {"POST /v1/completions HTTP/1.0\r\nContent-Length: -5\r\n\r\n",
                         "POST /v1/completions HTTP/1.0\r\nContent-Length: 12abc\r\n\r\n",
                         "POST /v1/completions HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                         "BREW /pot HTCPCP/1.0\r\n\r\n", "\r\n\r\n"};
    int want[] = {400, 400, 501, 400, 400};
    for (int i = 0; i < 5; i++) {
        r = http_raw(srv.port, bad[i], strlen(bad[i]));
        CHECK(status_of(r) == want[i], "case %d: want %d: %.100s", i, want[i], r ? r : "none");
        free(r);
    }
    /* a 1 MiB JSON body (a long prompt): answered, 400 because it does not fit the context */
    size_t pl = 1 << 20;
    char *body = malloc(pl + 64);
    k = snprintf(body, 64, "{\"prompt\":\"");
    memset(body + k, 'x', pl);
    snprintf(body + k + pl, 64, "\",\"max_tokens\":1}");
    r = http_post(srv.port, "/v1/completions", body);
    CHECK(status_of(r) == 400 && strstr(r, "context"), "1 MiB prompt: %.200s", r ? r : "none");
    free(r);
    free(body);
    CHECK(still_works(), "normal request after oversized ones");
}

/* invalid UTF-8 in the prompt and in chat messages: a reply (200, or a 400 naming the problem),
 * never a crash; the reply is valid JSON text whatever the bytes generated */
static void test_invalid_utf8(void) {
    const char *bodies[] = {
        "{\"prompt\":\"\xff\xfe\xc3 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf\",\"max_tokens\":4,\"temperature\":0}",
        "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xff\xff\x80\x80\"}],\"max_tokens\":4,\"temperature\":0}",
        "{\"messages\":[{\"role\":\"\xff\",\"content\":\"hi\"}]}",
        "{\"prompt\":\"\\ud800\\udc00\\ud800 x\\u0000y\",\"max_tokens\":4}",
        "{\"prompt\":\"ok\",\"stop\":[\"\xff\"],\"max_tokens\":4}",
    };
    int codes[5];
    for (int i = 0; i < 5; i++) {
        char *r = http_post(srv.port, i == 1 || i == 2 ? "/v1/chat/completions" : "/v1/completions", bodies[i]);
        codes[i] = status_of(r);
        CHECK(codes[i] == 200 || codes[i] == 400, "body %d: %.200s", i, r ? r : "none");
        free(r);
    }
    printf("# invalid UTF-8: statuses %d %d %d %d %d\n", codes[0], codes[1], codes[2], codes[3], codes[4]);
    CHECK(still_works(), "normal request after invalid UTF-8");
}

/* more tokens than the context: generation ends at the context (or at an end token), never past */
static void test_beyond_context(void) {
    char body[1024];
    int k = snprintf(body, sizeof body, "{\"prompt\":\"");
    for (int i = 0; i < 40; i++) k += snprintf(body + k, sizeof body - (size_t)k, "la ");
    snprintf(body + k, sizeof body - (size_t)k, "\",\"max_tokens\":100000,\"temperature\":1.5,\"seed\":3}");
    char *r = http_post(srv.port, "/v1/completions", body);
    const char *u = r ? strstr(r, "\"completion_tokens\":") : NULL, *p = r ? strstr(r, "\"prompt_tokens\":") : NULL;
    int n = u ? atoi(u + 20) : -1, np = p ? atoi(p + 16) : -1;
    const char *fin = r && strstr(r, "\"finish_reason\":\"length\"") ? "length" : "stop";
    /* the last token is sampled from the logits of position 127 and not evaluated: 129 at most */
    CHECK(status_of(r) == 200 && n > 0 && np > 0 && np + n <= 129, "max_tokens 100000 in a context of 128: %d + %d tokens: %.300s",
          np, n, r ? r : "none");
    printf("# max_tokens 100000 with a 128-token context: %d prompt + %d generated tokens, finish \"%s\"\n", np, n, fin);
    free(r);
    r = http_post(srv.port, "/v1/completions", "{\"prompt\":\"Hello\",\"max_tokens\":2000000}");
    CHECK(status_of(r) == 400, "max_tokens 2e6: %.200s", r ? r : "none");
    free(r);
    CHECK(still_works(), "normal request after the context test");
}

/* resident memory over 1000 requests: one round of the same mix first (allocator pools, the
 * session's buffers reach their sizes), then 1000 more must not move it */
static int request_mix(int n, int seed0) {
    int ok = 0;
    for (int i = 0; i < n; i++) {
        /* prompts that hit and miss the prompt cache, half of them streamed */
        char body[160];
        snprintf(body, sizeof body, "{\"prompt\":\"%s %d\",\"max_tokens\":3,\"temperature\":0.7,\"seed\":%d,\"stream\":%s}",
                 i % 2 ? "Hello" : "Once upon", i % 7, seed0 + i, i % 2 ? "true" : "false");
        char *r = http_post(srv.port, "/v1/completions", body);
        ok += status_of(r) == 200;
        free(r);
    }
    return ok;
}

static void test_rss_flat(void) {
    int nreq = getenv("MR_ABUSE_REQUESTS") ? atoi(getenv("MR_ABUSE_REQUESTS")) : 1000;
    long start = rss_kib();
    int ok = request_mix(nreq, 0);
    long before = rss_kib();
    double t0 = mr_now();
    ok += request_mix(nreq, nreq);
    double dt = mr_now() - t0;
    long after = rss_kib();
    printf("# RSS: %ld KiB at start, %ld KiB after %d requests (warm-up), %ld KiB after %d more (%+ld KiB); %d ok; "
           "%.1f requests/s\n", start, before, nreq, after, nreq, after - before, ok, nreq / dt);
    CHECK(ok == 2 * nreq, "%d of %d requests ok", ok, 2 * nreq);
    /* a leak of even 1 KiB per request would show as 1000 KiB; under ASan freed memory waits in the
     * quarantine (~6 MiB more over 1000 requests), and LSan checks for leaks there instead */
#ifdef T_ASAN
    SKIP("rss_growth", "RSS %+ld KiB not checked under AddressSanitizer (its quarantine holds freed memory)", after - before);
#elif defined(T_TSAN)
    SKIP("rss_growth", "RSS %+ld KiB not checked under ThreadSanitizer (its shadow and history memory grow)", after - before);
#else
    /* tests/run.sh sets MR_RUNNER for an emulator (make test-aarch64): /proc/self/status is then the
     * emulator's, whose RSS counts its own memory (translated code, per-thread state): +279 MiB over
     * 1000 requests under qemu-aarch64 7.2, +0 natively; which part of qemu grows was not isolated */
    if (getenv("MR_RUNNER") && *getenv("MR_RUNNER"))
        SKIP("rss_growth", "RSS %+ld KiB not checked under the emulator %s (its own memory counts)", after - before, getenv("MR_RUNNER"));
    else
        CHECK(after - before < 512, "RSS grew %ld KiB over %d requests", after - before, nreq);
#endif
}

static void test_stop(void) {
    srv_thread_stop(&srv);
    pthread_join(srv_th, NULL);
    CHECK(srv.rc == 0, "server returned %d: %s", srv.rc, mr_last_error());
    mr_model_free(srv.m);
    free(ref_body);
}

int main(void) {
    mr_set_log_level(0);
    RUN(test_start);
    if (getenv("MR_ABUSE_ONLY_RSS")) { RUN(test_rss_flat); RUN(test_stop); return t_finish(); }
    RUN(test_short_connections);
    RUN(test_oversized);
    RUN(test_invalid_utf8);
    RUN(test_beyond_context);
    RUN(test_rss_flat);
    RUN(test_stop);
    return t_finish();
}
