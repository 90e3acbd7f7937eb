/* JSON reader and HTTP request parser: valid input parsed exactly, hostile input rejected. */
#include "test.h"
#include "json/json.h"
#include "server/http.h"
#include "moerun.h"

static void test_json_values(void) {
    const char *t = "{\"model\":\"x\",\"messages\":[{\"role\":\"user\",\"content\":\"hi \\u00e9\\n\\ud83d\\ude00\"}],"
                    "\"temperature\":0.5,\"stream\":true,\"stop\":null,\"n\":-3e2}";
    mr_json *j = mr_json_parse(t, strlen(t));
    CHECK(j != NULL, "parse: %s", mr_last_error());
    if (!j) return;
    CHECK(!strcmp(mr_json_get_str(j, "model", ""), "x"), "model");
    CHECK(mr_json_get_num(j, "temperature", 0) == 0.5, "temperature");
    CHECK(mr_json_get_bool(j, "stream", 0) == 1, "stream");
    CHECK(mr_json_get_num(j, "n", 0) == -300, "n");
    CHECK(mr_json_get(j, "stop") && mr_json_get(j, "stop")->type == MR_JSON_NULL, "null");
    const mr_json *m = mr_json_get(j, "messages");
    CHECK(m && m->type == MR_JSON_ARR && m->len == 1, "messages");
    if (m && m->child) {
        const char *c = mr_json_get_str(m->child, "content", "");
        CHECK(!strcmp(c, "hi \xc3\xa9\n\xf0\x9f\x98\x80"), "unicode escapes: %s", c);
    }
    mr_json_free(j);
}

static void test_json_rejects(void) {
    const char *bad[] = {"", "{", "[1,]", "{\"a\" 1}", "{\"a\":}", "\"abc", "\"\\x\"", "01a", "[1] 2", "tru",
                         "{\"a\":\"\\ud800\\u0041\"}", "\"\\u12\"", "[\"a\nb\"]", "nan", "1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mr_json *j = mr_json_parse(bad[i], strlen(bad[i]));
        CHECK(j == NULL, "accepted bad JSON #%zu: %s", i, bad[i]);
        mr_json_free(j);
    }
    /* nesting bomb */
    char deep[400];
    memset(deep, '[', sizeof deep);
    mr_json *j = mr_json_parse(deep, sizeof deep);
    CHECK(j == NULL && strstr(mr_last_error(), "deep"), "deep nesting: %s", mr_last_error());
}

static void test_sbuf_escape(void) {
    mr_sbuf b = {0};
    mr_sbuf_json_str(&b, "a\"b\\c\n\x01", 7);
    CHECK(b.p && !strcmp(b.p, "\"a\\\"b\\\\c\\n\\u0001\""), "escaped: %s", b.p ? b.p : "(null)");
    mr_json *j = mr_json_parse(b.p, b.n);
    CHECK(j && j->type == MR_JSON_STR && j->len == 7 && !memcmp(j->str, "a\"b\\c\n\x01", 7), "round trip");
    mr_json_free(j);
    mr_sbuf_free(&b);
}

static void test_http_parse(void) {
    char req[] = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\n{\"a\":1}";
    mr_http_req r = {0};
    size_t used = 0;
    int st = 0;
    CHECK(mr_http_parse(req, strlen(req) - 3, &r, &used, &st) == 0, "incomplete body must wait");
    CHECK(mr_http_parse(req, strlen(req), &r, &used, &st) == 1, "complete");
    CHECK(!strcmp(r.method, "POST") && !strcmp(r.path, "/v1/completions") && r.body_len == 7, "fields");
    char chunked[] = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    CHECK(mr_http_parse(chunked, strlen(chunked), &r, &used, &st) == -1 && st == 501, "chunked refused");
    char huge[] = "POST / HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n";
    CHECK(mr_http_parse(huge, strlen(huge), &r, &used, &st) == -1 && st == 413, "huge body refused");
    char neg[] = "POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n";
    CHECK(mr_http_parse(neg, strlen(neg), &r, &used, &st) == -1 && st == 400, "negative length");
    char junk[] = "HELLO\r\n\r\n";
    CHECK(mr_http_parse(junk, strlen(junk), &r, &used, &st) == -1 && st == 400, "junk request line");
    char two[] = "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
    CHECK(mr_http_parse(two, strlen(two), &r, &used, &st) == -1 && st == 400, "conflicting lengths");
    char v2[] = "GET / HTTP/2.0\r\n\r\n";
    CHECK(mr_http_parse(v2, strlen(v2), &r, &used, &st) == -1 && st == 505, "HTTP/2 refused: %d", st);
}

/* request target, connection semantics and the headers the server acts on */
static void test_http_head(void) {
    const char *t = "POST /v1/chat/completions/?a=1&b=2 HTTP/1.1\r\nhost: x\r\nexpect: 100-Continue\r\n"
                    "authorization:  Bearer k  \r\nX-Api-Key: z\r\ncontent-length: 2\r\n\r\n";
    mr_http_req r;
    memset(&r, 0, sizeof r);
    size_t hl = 0;
    int st = 0;
    CHECK(mr_http_parse_head(t, strlen(t), &r, &hl, &st) == 1 && hl == strlen(t), "head complete");
    CHECK(!strcmp(r.path, "/v1/chat/completions") && !strcmp(r.query, "a=1&b=2"), "path '%s' query '%s'", r.path, r.query);
    CHECK(r.keep_alive && r.expect_continue && r.content_length == 2, "keep-alive %d expect %d", r.keep_alive, r.expect_continue);
    CHECK(!strcmp(r.auth, "Bearer k") && !strcmp(r.api_key, "z"), "auth '%s' key '%s'", r.auth, r.api_key);
    const char *c = "GET / HTTP/1.1\r\nConnection: foo, close\r\n\r\n";
    CHECK(mr_http_parse_head(c, strlen(c), &r, &hl, &st) == 1 && !r.keep_alive && !strcmp(r.path, "/"), "close");
    const char *o = "GET //// HTTP/1.0\r\n\r\n";
    CHECK(mr_http_parse_head(o, strlen(o), &r, &hl, &st) == 1 && !r.keep_alive && !strcmp(r.path, "/"), "1.0 closes");
    const char *k = "GET /x HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n";
    CHECK(mr_http_parse_head(k, strlen(k), &r, &hl, &st) == 1 && r.keep_alive, "1.0 keep-alive");
    const char *bad[] = {"GET x HTTP/1.1\r\n\r\n", "GET /a b HTTP/1.1\r\n\r\n", "get / HTTP/1.1\r\n\r\n",
                         "GET / HTTP/1.1\r\nNoColon\r\n\r\n", "GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n",
                         "GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(mr_http_parse_head(bad[i], strlen(bad[i]), &r, &hl, &st) == -1 && st == 400, "bad head #%zu accepted", i);
    /* no blank line within the header limit: 431, not a wait for ever */
    size_t n = MR_HTTP_MAX_HEADER + 10;
    char *big = malloc(n);
    if (!big) return;
    memset(big, 'a', n);
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 20);
    CHECK(mr_http_parse_head(big, n, &r, &hl, &st) == -1 && st == 431, "header too large");
    free(big);
}

int main(void) {
    RUN(test_json_values);
    RUN(test_json_rejects);
    RUN(test_sbuf_escape);
    RUN(test_http_parse);
    RUN(test_http_head);
    return t_finish();
}
