/* libFuzzer target for the JSON-object prefix recogniser (src/gen/json_prefix.c), checked against
 * the server's JSON reader (mr_json_parse), which is more lenient about numbers ("01", "1.") and
 * stricter about their size (no overflow to inf, at most 63 characters): a text the recogniser takes
 * whole and calls complete is an object for the reader (unless a number is too big for it); an object
 * the reader takes (nesting within MR_JSONP_MAX_DEPTH, finite numbers), written back by mr_json_dump
 * (strict JSON), is accepted whole and complete by the recogniser; byte by byte or in one call, the
 * same answer. */
#include "gen/json_prefix.h"
#include "json/json.h"
#include "base/base.h"
#include "fuzz_common.h"

/* nesting depth; -1 if a number is not finite (the writer would print inf) */
static int depth_of(const mr_json *j) {
    if (j->type == MR_JSON_NUM && !(j->num - j->num == 0)) return -1;
    int d = 0;
    for (const mr_json *c = j->child; c; c = c->next) {
        int k = depth_of(c);
        if (k < 0) return -1;
        d = k > d ? k : d;
    }
    return j->type == MR_JSON_ARR || j->type == MR_JSON_OBJ ? d + 1 : d;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *t = (const char *)data;
    mr_jsonp s, whole;
    mr_jsonp_init(&s);
    size_t ok = 0;
    while (ok < size && !mr_jsonp_feed(&s, t + ok, 1)) ok++;
    const int all = ok == size, done = all && mr_jsonp_done(&s);
    mr_jsonp_init(&whole);
    FUZZ_CHECK((mr_jsonp_feed(&whole, t, size) == 0) == all);
    if (all) FUZZ_CHECK(mr_jsonp_done(&whole) == done);
    mr_json *j = mr_json_parse(t, size);
    /* (the reader also refuses numbers beyond the range of a double or longer than 63 characters,
     * which JSON's grammar allows) */
    size_t run = 0, longest = 0;
    for (size_t i = 0; i < size; i++) {
        run = t[i] && strchr("+-0123456789.eE", t[i]) ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    if (done) FUZZ_CHECK((j && j->type == MR_JSON_OBJ) || (!j && (strstr(mr_get_error(), "bad number") || longest > 63)));
    int d = j && j->type == MR_JSON_OBJ ? depth_of(j) : -1;
    if (d >= 0 && d <= MR_JSONP_MAX_DEPTH) {
        char *w = mr_json_dump(j);
        if (w) {
            mr_jsonp_init(&whole);
            FUZZ_CHECK(mr_jsonp_feed(&whole, w, strlen(w)) == 0 && mr_jsonp_done(&whole));
            free(w);
        }
    }
    mr_json_free(j);
    return 0;
}
