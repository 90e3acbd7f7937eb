/* libFuzzer target for the JSON reader (mr_json_parse) and the string writer: parse the input; if
 * accepted, walk the tree checking its shape (children counted in len, members named, strings
 * NUL-terminated at len), read it through the getters, write every string back with
 * mr_sbuf_json_str and parse that again: the same bytes must come back (ASCII; otherwise what came
 * back writes the same JSON again, bytes that are not UTF-8 being U+FFFD). The raw input is also
 * written as a JSON string and read back so. */
#include "json/json.h"
#include "base/base.h"
#include "fuzz_common.h"

static void roundtrip(const char *s, size_t n) {
    mr_sbuf b = {0};
    mr_sbuf_json_str(&b, s, n);
    if (b.oom) { mr_sbuf_free(&b); return; }
    mr_json *j = mr_json_parse(b.p, b.n);
    FUZZ_CHECK(j && j->type == MR_JSON_STR);
    int ascii = 1;
    for (size_t i = 0; i < n; i++) ascii &= (unsigned char)s[i] < 0x80;
    if (ascii) FUZZ_CHECK(j->len == n && !memcmp(j->str, s, n));
    mr_sbuf again = {0}; /* bytes that are not UTF-8 came back as U+FFFD: written again, the same */
    mr_sbuf_json_str(&again, j->str, j->len);
    FUZZ_CHECK(again.oom || (again.n == b.n && !memcmp(again.p, b.p, b.n)));
    mr_sbuf_free(&again);
    mr_json_free(j);
    mr_sbuf_free(&b);
}

static void walk(const mr_json *j, int depth, int in_obj) {
    FUZZ_CHECK(depth <= MR_JSON_MAX_DEPTH + 1);
    FUZZ_CHECK(j->type >= MR_JSON_NULL && j->type <= MR_JSON_OBJ);
    FUZZ_CHECK(!in_obj == !j->key);
    switch (j->type) {
    case MR_JSON_STR:
        FUZZ_CHECK(j->str && j->str[j->len] == 0);
        roundtrip(j->str, j->len);
        break;
    case MR_JSON_ARR:
    case MR_JSON_OBJ: {
        size_t n = 0;
        for (const mr_json *c = j->child; c; c = c->next, n++) {
            walk(c, depth + 1, j->type == MR_JSON_OBJ);
            if (j->type == MR_JSON_OBJ) {
                /* the getters find a member with this name (the first one of that name) */
                const mr_json *g = mr_json_get(j, c->key);
                FUZZ_CHECK(g && !strcmp(g->key, c->key));
                (void)mr_json_get_str(j, c->key, NULL);
                (void)mr_json_get_num(j, c->key, 0);
                (void)mr_json_get_bool(j, c->key, 0);
            }
        }
        FUZZ_CHECK(n == j->len);
        break;
    }
    case MR_JSON_BOOL: FUZZ_CHECK(j->num == 0 || j->num == 1); break;
    default: break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mr_clear_error();
    mr_json *j = mr_json_parse((const char *)data, size);
    if (!j) {
        FUZZ_CHECK(strcmp(mr_get_error(), "unknown error")); /* every rejection says why */
    } else {
        walk(j, 0, 0);
        (void)mr_json_get(j, "model");
        mr_json_free(j);
    }
    roundtrip((const char *)data, size);
    return 0;
}
