/* The JSON-object prefix recogniser behind response_format json_object (src/gen/json_prefix.c):
 * every prefix of valid objects is accepted and only the whole object is complete; invalid texts are
 * refused at the first byte that breaks them (and a leading space or a run of more than
 * MR_JSONP_MAX_WS spaces, which JSON allows and the recogniser does not); nesting is bounded. */
#include "test.h"
#include "moerun.h"
#include "gen/json_prefix.h"
#include "json/json.h"

#include <string.h>

/* bytes of t accepted before the first refusal (strlen(t) if none); *done: complete at the end */
static size_t accepted(const char *t, int *done) {
    mr_jsonp s;
    mr_jsonp_init(&s);
    size_t i = 0;
    for (; t[i]; i++)
        if (mr_jsonp_feed(&s, t + i, 1)) break;
    if (done) *done = !t[i] && mr_jsonp_done(&s);
    return i;
}

static void test_jsonp_valid(void) {
    static const char *ok[] = {
        "{}", "{\n\t\"a\" :\n 1\n}\n\t", "{\"a\":1}", "{\"a\": [1, -2.5e+3, 0, 0.0, 1E9, true, false, null, \"x\\n\\u00e9\\\"\"]}",
        "{\"k\":{\"n\":{\"m\":[[],[{}],{}]}}, \"s\":\"\xc3\xa9 \\/\"}", "{\"\":-0}", "{\"a\":[0]}", "{\"a\":-0.5E-7}",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        int done = 0;
        size_t n = accepted(ok[i], &done);
        CHECK(n == strlen(ok[i]) && done, "'%s': %zu of %zu bytes, done %d", ok[i], n, strlen(ok[i]), done);
        /* the reader of the server agrees */
        mr_json *j = mr_json_parse(ok[i], strlen(ok[i]));
        CHECK(j && j->type == MR_JSON_OBJ, "'%s' is not an object for mr_json_parse", ok[i]);
        mr_json_free(j);
        /* every proper prefix is accepted and not complete (trailing whitespace aside) */
        char buf[256];
        size_t len = strlen(ok[i]);
        while (len && strchr(" \t\n", ok[i][len - 1])) len--;
        for (size_t k = 0; k + 1 < len; k++) {
            memcpy(buf, ok[i], k);
            buf[k] = 0;
            int d = 1;
            CHECK(accepted(buf, &d) == k && !d, "prefix %zu of '%s'", k, ok[i]);
        }
    }
}

static void test_jsonp_invalid(void) {
    /* text, bytes accepted before the refusal */
    static const struct { const char *t; size_t at; } bad[] = {
        {"[]", 0}, {"\"s\"", 0}, {"1", 0}, {"x{}", 0}, {" {}", 0}, {"{   }", 3}, {"{\n\t\t\"a\":1}", 3}, {"{}   ", 4}, {"{}x", 2}, {"{} {}", 3}, {"{a:1}", 1}, {"{\"a\" 1}", 5},
        {"{\"a\":01}", 6}, {"{\"a\":-}", 6}, {"{\"a\":1.}", 7}, {"{\"a\":1e}", 7}, {"{\"a\":+1}", 5}, {"{\"a\":tru}", 8},
        {"{\"a\":nul1}", 8}, {"{\"a\":\"\\x\"}", 7}, {"{\"a\":\"\\u12g4\"}", 10}, {"{\"a\":\"\n\"}", 6}, {"{\"a\":1,}", 7},
        {"{\"a\":[1,]}", 8}, {"{\"a\":[1}", 7}, {"{\"a\":{]}", 6}, {"{,}", 1}, {"{\"a\":1 2}", 7}, {"{\"a\"::1}", 5},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int done = 1;
        size_t n = accepted(bad[i].t, &done);
        CHECK(n == bad[i].at && !done, "'%s': refused after %zu bytes, want %zu", bad[i].t, n, bad[i].at);
        /* the server's reader agrees, except on numbers, where it takes "01" and "1.", and on the
         * whitespace JSON allows */
        mr_json *j = mr_json_parse(bad[i].t, strlen(bad[i].t));
        size_t run = 0, ws_run = 0;
        for (const char *p = bad[i].t; *p; p++) {
            run = strchr(" \t\n\r", *p) ? run + 1 : 0;
            ws_run = run > ws_run ? run : ws_run;
        }
        const int lenient = strstr(bad[i].t, "01") || strstr(bad[i].t, "1.") || ws_run > MR_JSONP_MAX_WS || bad[i].t[0] == ' ';
        CHECK(!j || j->type != MR_JSON_OBJ || lenient, "'%s' is an object for mr_json_parse", bad[i].t);
        mr_json_free(j);
    }
    /* depth: MR_JSONP_MAX_DEPTH containers nest, one more is refused */
    char deep[2 * MR_JSONP_MAX_DEPTH + 16];
    size_t n = 0;
    deep[n++] = '{';
    memcpy(deep + n, "\"a\":", 4);
    n += 4;
    for (int d = 1; d < MR_JSONP_MAX_DEPTH; d++) deep[n++] = '[';
    size_t open_end = n;
    deep[n++] = '[';
    deep[n] = 0;
    CHECK(accepted(deep, NULL) == open_end, "nesting beyond %d accepted", MR_JSONP_MAX_DEPTH);
}

int main(void) {
    RUN(test_jsonp_valid);
    RUN(test_jsonp_invalid);
    return t_finish();
}
