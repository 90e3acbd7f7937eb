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

/* 1 if s[0..n) is well-formed UTF-8 (checked apart from json.c: by the code points' ranges) */
static int utf8_ok(const unsigned char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], k = c < 0x80 ? 1 : c >= 0xc0 && c < 0xe0 ? 2 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xf0 && c < 0xf8 ? 4 : 0;
        if (!k || i + k > n) return 0;
        unsigned cp = k == 1 ? c : c & (0x7f >> k);
        for (unsigned q = 1; q < k; q++) {
            if ((s[i + q] & 0xc0) != 0x80) return 0;
            cp = cp << 6 | (s[i + q] & 0x3f);
        }
        const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[k] || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000)) return 0;
        i += k;
    }
    return 1;
}

/* where a streamed reply's piece may end (the generator's rule): not after a lead byte and fewer
 * continuation bytes than it needs */
static size_t piece_end(const unsigned char *s, size_t n) {
    for (size_t i = n, back = 0; back < 4 && i > 0; back++, i--)
        if ((s[i - 1] & 0xc0) != 0x80) {
            const unsigned c = s[i - 1], need = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
            return n - (i - 1) >= need ? n : i - 1;
        }
    return n;
}

/* bytes that are not UTF-8 (a model's tokens may split characters or be arbitrary bytes) are
 * written as U+FFFD, so every JSON string is valid UTF-8; a text given in pieces that end where a
 * streamed reply's do reads the same as given whole */
static void test_sbuf_utf8(void) {
    mr_sbuf b = {0};
    const char *in = "\xe2\x96\x81 ok \xff\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x96";
    mr_sbuf_json_str(&b, in, strlen(in));
    const char *want = "\"\xe2\x96\x81 ok \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd "
                       "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\"";
    CHECK(b.p && !strcmp(b.p, want), "replaced: %s", b.p ? b.p : "(null)");
    mr_sbuf_free(&b);
    uint64_t r = 88172645463325252ull;
    int same = 0;
    for (int t = 0; t < 2000; t++) {
        unsigned char s[64];
        const size_t n = 1 + t % 63;
        for (size_t i = 0; i < n; i++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            const unsigned char pool[] = {'a', 0x80, 0x8f, 0x90, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xe2, 0xed, 0xef, 0xf0, 0xf4, 0xf5, 0xff};
            s[i] = pool[r % sizeof pool];
        }
        mr_sbuf whole = {0}, parts = {0};
        mr_sbuf_json_str(&whole, (const char *)s, n);
        size_t sent = 0;
        for (size_t have = 1; have <= n; have++) { /* one byte more per step, the ready part given */
            const size_t ready = have == n ? n : piece_end(s, have);
            if (ready <= sent) continue;
            mr_sbuf one = {0};
            mr_sbuf_json_str(&one, (const char *)s + sent, ready - sent);
            if (one.p) mr_sbuf_add(&parts, one.p + 1, one.n - 2); /* without the quotes */
            mr_sbuf_free(&one);
            sent = ready;
        }
        const int ok = whole.p && parts.p && utf8_ok((const unsigned char *)whole.p, whole.n) && whole.n == parts.n + 2 &&
                       !memcmp(whole.p + 1, parts.p, parts.n);
        same += ok;
        mr_sbuf_free(&whole);
        mr_sbuf_free(&parts);
    }
    CHECK(same == 2000, "%d of 2000 texts valid and the same in pieces", same);
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
    RUN(test_sbuf_utf8);
    RUN(test_http_parse);
    RUN(test_http_head);
    return t_finish();
}
