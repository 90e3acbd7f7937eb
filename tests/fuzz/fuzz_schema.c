/* libFuzzer target for the JSON Schema compiler (src/gen/json_schema.c) and the recogniser it drives
 * (src/gen/json_prefix.c). The input is a schema, optionally followed by a NUL byte and a document.
 * A refused schema has a "json_schema: " message. A compiled one: the document is fed byte by byte
 * and in one call (the same answer); then a random walk (seeded by the input) through the bytes the
 * recogniser allows. Whatever it calls a whole value must be valid against the schema for the
 * validator of tests/schema_valid.h (which shares no code with it), every number in it a finite
 * double (the recogniser bounds a number's digits). */
#include "gen/json_prefix.h"
#include "json/json.h"
#include "base/base.h"
#include "fuzz_common.h"
#include "../schema_valid.h"

static void check_whole(const char *schema, const char *t, size_t n) {
    if (sv_check(schema, t, n)) return;
    fprintf(stderr, "schema %s\ntext %.*s\n", schema, (int)n, t);
    FUZZ_CHECK(0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *in = (const char *)data;
    const char *nul = memchr(in, 0, size);
    const size_t sl = nul ? (size_t)(nul - in) : size;
    const char *doc = nul ? nul + 1 : NULL;
    const size_t dl = nul ? size - sl - 1 : 0;
    mr_jschema *sc = mr_jschema_compile(in, sl);
    if (!sc) {
        FUZZ_CHECK(!strncmp(mr_get_error(), "json_schema: ", 13));
        return 0;
    }
    char *schema = malloc(sl + 1);
    FUZZ_CHECK(schema);
    memcpy(schema, in, sl);
    schema[sl] = 0;
    static mr_jsonp s, whole, t;
    if (doc) {
        mr_jsonp_init_schema(&s, sc);
        size_t ok = 0;
        while (ok < dl && !mr_jsonp_feed(&s, doc + ok, 1)) ok++;
        mr_jsonp_init_schema(&whole, sc);
        FUZZ_CHECK((mr_jsonp_feed(&whole, doc, dl) == 0) == (ok == dl));
        if (ok == dl) {
            FUZZ_CHECK(mr_jsonp_done(&whole) == mr_jsonp_done(&s));
            if (mr_jsonp_done(&s)) check_whole(schema, doc, dl);
        }
    }
    /* the walk: a byte the recogniser allows at each step */
    uint64_t r = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++) r = (r ^ data[i]) * 1099511628211ull;
    char text[300];
    size_t n = 0;
    mr_jsonp_init_schema(&s, sc);
    while (n + 1 < sizeof text && !mr_jsonp_closed(&s)) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        if (mr_jsonp_done(&s) && r % 5 == 0) break;
        unsigned char ok[256];
        int n_ok = 0;
        for (int b = 1; b < 256; b++) {
            const char c = (char)b;
            mr_jsonp_copy(&t, &s);
            if (!mr_jsonp_feed(&t, &c, 1)) ok[n_ok++] = (unsigned char)b;
        }
        if (!n_ok) break;
        const char c = (char)ok[(r >> 17) % (uint64_t)n_ok];
        FUZZ_CHECK(mr_jsonp_feed(&s, &c, 1) == 0);
        text[n++] = c;
        text[n] = 0;
    }
    if (mr_jsonp_done(&s)) check_whole(schema, text, n);
    free(schema);
    mr_jschema_free(sc);
    return 0;
}
