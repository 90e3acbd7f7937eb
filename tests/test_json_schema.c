/* JSON schemas for constrained sampling (src/gen/json_schema.c compiles, src/gen/json_prefix.c
 * recognises): valid values are accepted whole, invalid ones refused at the first byte that breaks
 * them, keywords outside the subset refused by name, and random walks through the recogniser (a
 * byte at a time, any byte it allows) end only in values that the validator of schema_valid.h,
 * which shares no code with the recogniser, finds valid, and never in a state no byte continues. */
#include "test.h"
#include "moerun.h"
#include "gen/json_prefix.h"
#include "json/json.h"
#include "schema_valid.h"

#include <string.h>

static const char *PERSON =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\"},"
    " \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\", \"ab\"]}, \"maxItems\": 3},"
    " \"nick\": {\"type\": [\"string\", \"null\"]}, \"score\": {\"type\": \"number\"}},"
    " \"required\": [\"name\", \"age\"], \"additionalProperties\": false, \"title\": \"P\", \"description\": \"d\"}";
static const char *ENUM = "{\"enum\": [\"red\", \"green\", 1, 12, null, true, {\"k\": [1, \"x\"]}]}";
static const char *ANYOF =
    "{\"anyOf\": [{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\"}}, \"required\": [\"a\"]},"
    " {\"type\": \"object\", \"properties\": {\"ab\": {\"type\": \"integer\"}, \"b\": {\"const\": false}}, \"required\": [\"b\"]}]}";
static const char *TREE =
    "{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"v\": {\"type\": \"integer\"},"
    " \"kids\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/$defs/node\"}}}, \"required\": [\"v\"],"
    " \"additionalProperties\": false}}, \"$ref\": \"#/$defs/node\"}";
static const char *ARR = "{\"type\": \"array\", \"items\": {\"type\": \"boolean\"}, \"minItems\": 1, \"maxItems\": 2}";
static const char *EXTRA =
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"}, \"q\\\"x\": {\"type\": \"null\"}},"
    " \"additionalProperties\": {\"type\": \"string\"}}";
static const char *ANYOBJ = "{\"type\": \"object\"}";
static const char *INT = "{\"type\": \"integer\"}";

/* bytes of t accepted before the first refusal (strlen(t) if none); *done, *closed at the end */
static size_t accepted(const mr_jschema *sc, const char *t, int *done, int *closed) {
    mr_jsonp s;
    mr_jsonp_init_schema(&s, sc);
    size_t i = 0;
    for (; t[i]; i++)
        if (mr_jsonp_feed(&s, t + i, 1)) break;
    if (done) *done = !t[i] && mr_jsonp_done(&s);
    if (closed) *closed = !t[i] && mr_jsonp_closed(&s);
    return i;
}

static mr_jschema *compile(const char *schema) {
    mr_jschema *sc = mr_jschema_compile(schema, strlen(schema));
    CHECK(sc, "'%s': %s", schema, mr_last_error());
    return sc;
}

static void test_schema_valid(void) {
    static const struct { const char **schema; const char *t; int closed; } ok[] = {
        {&PERSON, "{\"name\": \"x\", \"age\": 3}", 1},
        {&PERSON, "{\"age\":-10,\"name\":\"\\u00e9\\\"\",\"tags\":[\"ab\", \"a\"],\"nick\":null,\"score\":-1.5e3}", 1},
        {&PERSON, "{ \"nick\": \"n\", \"tags\": [], \"name\": \"y\", \"age\": 0 }\n", 1},
        {&ENUM, "\"red\"", 1}, {&ENUM, "12", 1}, {&ENUM, "1", 0}, {&ENUM, "12 ", 1}, {&ENUM, "null", 1},
        {&ENUM, "{\"k\": [1, \"x\"]}", 1}, {&ENUM, "true", 1},
        {&ANYOF, "{\"a\": \"x\"}", 1}, {&ANYOF, "{\"b\": false, \"ab\": 7}", 1}, {&ANYOF, "{\"ab\": 7, \"b\": false}", 1},
        {&TREE, "{\"v\": 1, \"kids\": [{\"v\": 2, \"kids\": []}, {\"kids\": [{\"v\": 3}], \"v\": 4}]}", 1},
        {&ARR, "[true]", 1}, {&ARR, "[false, true]", 1},
        {&EXTRA, "{\"a\": 1, \"zz\": \"q\", \"ab\": \"x\", \"q\\\"x\": null}", 1}, {&EXTRA, "{}", 1},
        {&ANYOBJ, "{\"\\n\": [1, {\"x\": null}], \"y\": \"z\"}", 1},
        {&INT, "-0", 0}, {&INT, "120", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        mr_jschema *sc = compile(*ok[i].schema);
        if (!sc) continue;
        int done = 0, closed = 0;
        size_t n = accepted(sc, ok[i].t, &done, &closed);
        CHECK(n == strlen(ok[i].t) && done && closed == ok[i].closed, "'%s': %zu of %zu bytes, done %d closed %d",
              ok[i].t, n, strlen(ok[i].t), done, closed);
        CHECK(sv_check(*ok[i].schema, ok[i].t, strlen(ok[i].t)), "'%s' is not valid for the validator", ok[i].t);
        /* every proper prefix is accepted and not done (but for numbers, done at each digit) */
        char buf[256];
        size_t len = strlen(ok[i].t);
        while (len && strchr(" \t\n", ok[i].t[len - 1])) len--;
        for (size_t k = 0; k + 1 < len; k++) {
            memcpy(buf, ok[i].t, k);
            buf[k] = 0;
            int d = 1;
            CHECK(accepted(sc, buf, &d, NULL) == k && (!d || strspn(buf, "-0123456789") == k), "prefix %zu of '%s'", k, ok[i].t);
        }
        mr_jschema_free(sc);
    }
}

static void test_schema_invalid(void) {
    /* text, bytes accepted before the refusal */
    static const struct { const char **schema; const char *t; size_t at; } bad[] = {
        {&PERSON, "{\"nam\"", 5}, {&PERSON, "{\"name\": 1", 9}, {&PERSON, "{\"name\": \"x\"}", 12},
        {&PERSON, "{\"age\": 1.5", 9}, {&PERSON, "{\"age\": 1e3", 9}, {&PERSON, "{\"name\":\"a\",\"name\"", 14},
        {&PERSON, "{\"x\"", 2}, {&PERSON, "{\"tags\": [\"c\"", 11}, {&PERSON, "{\"tags\": [\"a\", \"a\", \"b\", \"b\"", 23},
        {&PERSON, "[", 0}, {&PERSON, " {", 0}, {&PERSON, "{\"nick\": nul ", 12}, {&PERSON, "{\"name\"\\", 7},
        {&ENUM, "13", 1}, {&ENUM, "\"re\"", 3}, {&ENUM, "{\"k\":[1,\"x\"]}", 5}, {&ENUM, "false", 0}, {&ENUM, "12 3", 3},
        {&ANYOF, "{\"a\": 2", 6}, {&ANYOF, "{\"a\": \"x\", \"b\"", 9}, {&ANYOF, "{}", 1}, {&ANYOF, "{\"ab\": 1}", 8},
        {&TREE, "{\"kids\": [{}", 11}, {&TREE, "{\"v\": 1, \"w\"", 10},
        {&ARR, "[]", 1}, {&ARR, "[true, false, ", 12}, {&ARR, "[1", 1},
        {&EXTRA, "{\"zz\": 1", 7}, {&EXTRA, "{\"a\": \"x\"", 6}, {&EXTRA, "{\"z\\n\"", 3}, {&EXTRA, "{\"a\": 1, \"a\"", 11},
        {&ANYOBJ, "[", 0}, {&INT, "1.", 1}, {&INT, "01", 1},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        mr_jschema *sc = compile(*bad[i].schema);
        if (!sc) continue;
        int done = 1;
        size_t n = accepted(sc, bad[i].t, &done, NULL);
        CHECK(n == bad[i].at && !done, "'%s': refused after %zu bytes, want %zu", bad[i].t, n, bad[i].at);
        mr_jschema_free(sc);
    }
}

/* keywords and shapes outside the subset: refused, the message naming them */
static void test_schema_refused(void) {
    static const struct { const char *schema, *msg; } bad[] = {
        {"{\"type\": \"string\", \"pattern\": \"a+\"}", "'pattern'"},
        {"{\"type\": \"string\", \"minLength\": 2}", "'minLength'"},
        {"{\"type\": \"string\", \"format\": \"date\"}", "'format'"},
        {"{\"oneOf\": [{\"type\": \"string\"}]}", "'oneOf'"},
        {"{\"allOf\": [{\"type\": \"string\"}]}", "'allOf'"},
        {"{\"properties\": {\"x\": {\"not\": {}}}}", "'not' is not supported (at #/properties/x)"},
        {"{\"type\": \"number\", \"minimum\": 0}", "'minimum'"},
        {"{\"type\": \"array\", \"uniqueItems\": true}", "'uniqueItems'"},
        {"{\"type\": \"array\", \"items\": [{\"type\": \"string\"}]}", "'items' as a list"},
        {"{\"$ref\": \"http://x/y.json\"}", "'$ref' must be"},
        {"{\"$ref\": \"#/$defs/nope\"}", "names no definition"},
        {"false", "accepts nothing"},
        {"{\"type\": \"strin\"}", "unknown type"},
        {"{\"anyOf\": [{\"const\": 1}, {\"const\": 2}, {\"const\": 3}, {\"const\": 4}, {\"const\": 5},"
         " {\"const\": 6}, {\"const\": 7}, {\"const\": 8}, {\"const\": 9}]}", "more than 8 alternatives"},
        {"{\"$defs\": {\"a\": {\"$ref\": \"#/$defs/b\"}, \"b\": {\"$ref\": \"#/$defs/a\"}}, \"$ref\": \"#/$defs/a\"}", "cycle"},
        {"{\"$defs\": {\"a\": {\"anyOf\": [{\"$ref\": \"#/$defs/a\"}, {\"type\": \"null\"}]}}, \"$ref\": \"#/$defs/a\"}", "cycle"},
        {"{\"properties\": {\"a\": {}}, \"required\": [\"b\"]}", "'required' names"},
        {"{\"type\": \"array\", \"minItems\": 3, \"maxItems\": 2}", "'minItems' is above"},
        {"{\"type\": \"array\", \"minItems\": -1}", "'minItems' must be"},
        {"{\"enum\": [1, 2], \"type\": \"string\"}", "no value of 'enum'"},
        {"{\"type\": \"object\"", "not JSON"},
        {"{\"type\": \"string\", \"$ref\": \"#\"}", "'$ref' beside"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK(mr_json_schema_check(bad[i].schema, strlen(bad[i].schema)) == -1 && strstr(mr_last_error(), bad[i].msg)
              && strstr(mr_last_error(), "json_schema: "), "'%s': %s", bad[i].schema, mr_last_error());
    }
    /* the schemas of the other cases are in the subset */
    const char *good[] = {PERSON, ENUM, ANYOF, TREE, ARR, EXTRA, ANYOBJ, INT, "true", "{}",
                          "{\"definitions\": {\"x/y\": {\"type\": \"null\"}}, \"$ref\": \"#/definitions/x~1y\"}"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        CHECK(mr_json_schema_check(good[i], strlen(good[i])) == 0, "'%s': %s", good[i], mr_last_error());
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)rng; }

/* random walks: at each step any byte the recogniser allows (from a small alphabet most of the time,
 * so that strings close), until the value is closed (or 400 bytes); numbers are as long as the walk
 * makes them, and the validator checks that each is a finite double */
static void test_schema_walks(void) {
    const char *schemas[] = {PERSON, ENUM, ANYOF, TREE, ARR, EXTRA, ANYOBJ, INT};
    const char *alpha = "{}[],:\" \n-0123456789.eEtrufalsnbvkidxyzq\\";
    int complete = 0, walks = 0;
    for (size_t si = 0; si < sizeof schemas / sizeof *schemas; si++) {
        mr_jschema *sc = compile(schemas[si]);
        if (!sc) continue;
        for (int w = 0; w < 300; w++, walks++) {
            static mr_jsonp s, t;
            char text[512];
            size_t n = 0;
            mr_jsonp_init_schema(&s, sc);
            while (n < 400 && !mr_jsonp_closed(&s)) {
                unsigned char ok[256];
                int n_ok = 0, n_alpha = 0;
                for (int b = 1; b < 256; b++) {
                    char c = (char)b;
                    mr_jsonp_copy(&t, &s);
                    if (!mr_jsonp_feed(&t, &c, 1)) ok[n_ok++] = (unsigned char)b;
                }
                if (!n_ok) break;
                unsigned char pick[256];
                for (int i = 0; i < n_ok; i++)
                    if (strchr(alpha, ok[i])) pick[n_alpha++] = ok[i];
                /* end a number or a literal that could go on now and then */
                if (mr_jsonp_done(&s) && rnd() % 4 == 0) break;
                const unsigned char c = n_alpha && (rnd() % 8 || !n_ok) ? pick[rnd() % n_alpha] : ok[rnd() % n_ok];
                CHECK(mr_jsonp_feed(&s, (const char *)&c, 1) == 0, "allowed byte refused");
                text[n++] = (char)c;
                text[n] = 0;
            }
            text[n] = 0;
            if (!mr_jsonp_done(&s)) {
                CHECK(n == 400, "schema %zu: a dead end after '%s'", si, text);
                continue;
            }
            complete++;
            CHECK(sv_check(schemas[si], text, n), "schema %zu: '%s' accepted but not valid", si, text);
        }
        mr_jschema_free(sc);
    }
    printf("# %d of %d walks ended in a whole value\n", complete, walks);
    CHECK(complete > walks / 2, "%d of %d", complete, walks);
}

/* walks that take only digits, number signs and whitespace, whichever of them the recogniser allows,
 * end within a number's bound (no endless digits, exponents or whitespace), in values whose numbers
 * are finite doubles and whose integers are exact */
static void test_schema_numbers_end(void) {
    static const struct { const char *schema, *start; } cases[] = {
        {"{\"type\": \"integer\"}", ""}, {"{\"type\": \"number\"}", ""}, {"{\"type\": \"number\"}", "-"},
        {"{\"type\": \"object\"}", "{\"a\":"}, {"{\"type\": \"array\", \"items\": {\"type\": \"integer\"}}", "[1,"},
        {"{\"type\": \"array\"}", "[ "}, {"{\"type\": \"object\"}", "{\"a\":1} "},
    };
    const char *alpha = "0123456789.eE+- \t\n\r";
    int longest = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        mr_jschema *sc = compile(cases[ci].schema);
        if (!sc) continue;
        for (int w = 0; w < 300; w++) {
            static mr_jsonp s, t;
            char text[256];
            size_t n = strlen(cases[ci].start);
            memcpy(text, cases[ci].start, n);
            mr_jsonp_init_schema(&s, sc);
            CHECK(mr_jsonp_feed(&s, text, n) == 0, "start '%s'", cases[ci].start);
            const size_t n0 = n;
            for (; n < sizeof text - 1; n++) {
                char ok[32];
                int n_ok = 0;
                for (const char *a = alpha; *a; a++) {
                    mr_jsonp_copy(&t, &s);
                    if (!mr_jsonp_feed(&t, a, 1)) ok[n_ok++] = *a;
                }
                if (!n_ok) break;
                /* digits most of the time: the longest numbers */
                int digits = 0;
                for (int i = 0; i < n_ok; i++) digits += ok[i] >= '0' && ok[i] <= '9';
                char c = ok[rnd() % n_ok];
                if (digits && rnd() % 4) while (!(c >= '0' && c <= '9')) c = ok[rnd() % n_ok];
                CHECK(mr_jsonp_feed(&s, &c, 1) == 0, "allowed byte refused");
                text[n] = c;
            }
            text[n] = 0;
            CHECK(n < sizeof text - 1, "'%s' + '%s': no end after %zu bytes", cases[ci].schema, cases[ci].start, n - n0);
            longest = (int)(n - n0) > longest ? (int)(n - n0) : longest;
            /* the number(s) read: each a finite double; closed at the root: valid as a whole */
            CHECK(sv_numbers_finite(text, n), "'%s': a number beyond a double", text);
            if (!cases[ci].start[0] && mr_jsonp_done(&s))
                CHECK(sv_check(cases[ci].schema, text, n), "'%s' is not valid for '%s'", text, cases[ci].schema);
        }
        mr_jschema_free(sc);
    }
    printf("# number walks: at most %d bytes of digits, signs and whitespace\n", longest);
    /* the bounds themselves */
    mr_jschema *num = compile("{\"type\": \"number\"}"), *in = compile("{\"type\": \"integer\"}");
    const struct { mr_jschema **sc; const char *t; size_t at; } b[] = {
        {&in, "123456789012345", 15}, {&in, "1234567890123456", 15}, {&in, "-999999999999999", 16},
        {&num, "1.123456789012345", 17}, {&num, "1.1234567890123456", 17}, {&num, "1e99", 4}, {&num, "1E+999", 5},
        {&num, "-0.5e-07", 8}, {&num, "1e-999", 5}, {&num, "0.000000000000001e-99", 21},
    };
    for (size_t i = 0; num && in && i < sizeof b / sizeof *b; i++)
        CHECK(accepted(*b[i].sc, b[i].t, NULL, NULL) == b[i].at, "'%s': %zu bytes accepted, want %zu", b[i].t,
              accepted(*b[i].sc, b[i].t, NULL, NULL), b[i].at);
    mr_jschema_free(num);
    mr_jschema_free(in);
}

/* json_object's recogniser is the schema-less one: the schema {"type": "object"} accepts the same */
static void test_schema_object_like_json_object(void) {
    mr_jschema *sc = compile(ANYOBJ);
    const char *t[] = {"{\"a\": [1, {\"b\": \"\\u0041\"}], \"c\": -0.5e+2}", "{ }", "{\"a\":tru", "{\"a\" 1}", "{}  x"};
    for (size_t i = 0; sc && i < sizeof t / sizeof *t; i++) {
        mr_jsonp a, b;
        mr_jsonp_init(&a);
        mr_jsonp_init_schema(&b, sc);
        for (const char *p = t[i]; *p; p++) {
            int ra = mr_jsonp_feed(&a, p, 1), rb = mr_jsonp_feed(&b, p, 1);
            CHECK(ra == rb, "'%s' at %zu: %d vs %d", t[i], (size_t)(p - t[i]), ra, rb);
            if (ra || rb) break;
        }
    }
    mr_jschema_free(sc);
}

/* tool calls (mr_gen_calls) in the chatml, deepseek4 (DSML), kimi-k2, deepseek3 and gpt-oss formats: random walks through the
 * recogniser always end in one call that the template's own parser (mr_chat_parse_tool_calls) reads
 * back, of one of the functions, with arguments valid against its schema */
static const char *FN_NAMES[] = {"get_weather", "add", "get", "noargs"};
static const char *FN_SCHEMAS[] = {
    "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"enum\": [\"C\", \"F\"]},"
    " \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"], \"additionalProperties\": false}",
    "{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"number\"}, \"b\": {\"type\": \"number\"},"
    " \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}, \"maxItems\": 2}}, \"required\": [\"a\", \"b\"]}",
    "{\"$defs\": {\"k\": {\"type\": \"string\"}}, \"type\": \"object\", \"properties\": {\"key\": {\"$ref\": \"#/$defs/k\"},"
    " \"opt\": {\"anyOf\": [{\"type\": \"boolean\"}, {\"type\": \"null\"}]}}, \"required\": [\"key\"], \"additionalProperties\": false}",
    NULL,
};

static void calls_walks(const char *tmpl) {
    mr_chat_call_format f;
    CHECK(mr_chat_tool_call_format(NULL, tmpl, &f) == 0, "%s", mr_last_error());
    mr_gen_calls calls = {.n = 4, .names = FN_NAMES, .schemas = FN_SCHEMAS, .prefix = f.prefix, .middle = f.middle,
                          .suffix = f.suffix, .dsml = f.dsml};
    mr_jschema *sc = mr_jschema_compile_calls(&calls);
    CHECK(sc, "%s", mr_last_error());
    if (!sc) return;
    const char *alpha = "{}[],:\" \n-0123456789.eEtrufalsnbvkidxyzq<>/=abcdeghkmoprstuwy_";
    int complete = 0, seen[4] = {0};
    for (int w = 0; w < 400; w++) {
        static mr_jsonp s, t;
        static char text[2048];
        size_t n = strlen(f.forced);
        memcpy(text, f.forced, n);
        const size_t n0 = n;
        mr_jsonp_init_schema(&s, sc);
        while (n < n0 + 1500 && !mr_jsonp_closed(&s)) {
            unsigned char ok[256], pick[256];
            int n_ok = 0, n_alpha = 0;
            for (int b = 1; b < 256; b++) {
                char c = (char)b;
                mr_jsonp_copy(&t, &s);
                if (!mr_jsonp_feed(&t, &c, 1)) ok[n_ok++] = (unsigned char)b;
            }
            if (!n_ok) break;
            for (int i = 0; i < n_ok; i++)
                if (strchr(alpha, ok[i])) pick[n_alpha++] = ok[i];
            /* DSML raw text: end it now and then (its closing tag is many bytes) */
            const char *term = "</\xef\xbd\x9c" "DSML\xef\xbd\x9c" "parameter>";
            if (f.dsml && n_alpha && rnd() % 6 == 0) {
                mr_jsonp_copy(&t, &s);
                if (!mr_jsonp_feed(&t, term, strlen(term))) {
                    memcpy(text + n, term, strlen(term));
                    n += strlen(term);
                    mr_jsonp_copy(&s, &t);
                    continue;
                }
            }
            const unsigned char c = n_alpha && (rnd() % 8 || !n_ok) ? pick[rnd() % n_alpha] : ok[rnd() % n_ok];
            CHECK(mr_jsonp_feed(&s, (const char *)&c, 1) == 0, "allowed byte refused");
            text[n++] = (char)c;
            text[n] = 0;
        }
        text[n] = 0;
        if (!mr_jsonp_closed(&s)) {
            CHECK(n >= n0 + 1500, "%s: a dead end after '%s'", tmpl, text);
            continue;
        }
        mr_chat_tool_call tc[2];
        size_t content = 0;
        int k = mr_chat_parse_tool_calls(NULL, tmpl, text, n, &content, tc, 2);
        CHECK(k == 1 && content == 0, "%s: %d calls in '%s'", tmpl, k, text);
        if (k != 1) continue;
        int fi = 0;
        while (fi < 4 && strcmp(FN_NAMES[fi], tc[0].name)) fi++;
        CHECK(fi < 4, "%s: called '%s'", tmpl, tc[0].name);
        if (fi < 4) {
            seen[fi]++;
            const char *schema = FN_SCHEMAS[fi] ? FN_SCHEMAS[fi] : "{\"type\": \"object\"}";
            CHECK(sv_check(schema, tc[0].arguments, strlen(tc[0].arguments)), "%s: %s(%s) from '%s' is not valid", tmpl,
                  tc[0].name, tc[0].arguments, text);
        }
        mr_chat_tool_calls_free(tc, k);
        complete++;
    }
    printf("# %s: %d of 400 walks made a call (by function: %d %d %d %d)\n", tmpl, complete, seen[0], seen[1], seen[2], seen[3]);
    CHECK(complete > 200 && seen[0] && seen[1] && seen[2] && seen[3], "%d", complete);
    mr_jschema_free(sc);
}

static void test_calls_kimi(void) { calls_walks("kimi-k2"); }
static void test_calls_ds31(void) { calls_walks("deepseek3"); }
static void test_calls_harmony(void) { calls_walks("gpt-oss"); }

static void test_calls_chatml(void) {
    calls_walks("chatml");
    /* a call by hand, and ones that are not */
    mr_chat_call_format f;
    mr_chat_tool_call_format(NULL, "chatml", &f);
    mr_gen_calls calls = {.n = 4, .names = FN_NAMES, .schemas = FN_SCHEMAS, .prefix = f.prefix, .middle = f.middle, .suffix = f.suffix};
    mr_jschema *sc = mr_jschema_compile_calls(&calls);
    int done = 0, closed = 0;
    const char *ok = "{\"name\": \"add\", \"arguments\": {\"b\": 2, \"a\": -1.5, \"tags\": []}}";
    CHECK(sc && accepted(sc, ok, &done, &closed) == strlen(ok) && closed, "'%s'", ok);
    CHECK(sc && accepted(sc, "{\"name\": \"ad\"", NULL, NULL) == 12, "a name that is not a function");
    CHECK(sc && accepted(sc, "{\"arguments\"", NULL, NULL) == 2, "the name comes first");
    CHECK(sc && accepted(sc, "{\"name\": \"get\", \"arguments\": {}", NULL, NULL) == 30, "'key' is required");
    mr_jschema_free(sc);
    /* a bad schema names the function */
    const char *bad[] = {"{\"type\": \"string\", \"format\": \"email\"}"};
    const char *nm[] = {"f"};
    mr_gen_calls c2 = {.n = 1, .names = nm, .schemas = bad, .prefix = f.prefix, .middle = f.middle, .suffix = f.suffix};
    CHECK(!mr_jschema_compile_calls(&c2) && strstr(mr_last_error(), "'format'") && strstr(mr_last_error(), "tool f"), "%s", mr_last_error());
}

static void test_calls_dsml(void) {
    calls_walks("deepseek4");
    mr_chat_call_format f;
    mr_chat_tool_call_format(NULL, "deepseek4", &f);
    mr_gen_calls calls = {.n = 4, .names = FN_NAMES, .schemas = FN_SCHEMAS, .prefix = f.prefix, .middle = f.middle,
                          .suffix = f.suffix, .dsml = 1};
    mr_jschema *sc = mr_jschema_compile_calls(&calls);
    int done = 0, closed = 0;
    const char *ok = "<\xef\xbd\x9c" "DSML\xef\xbd\x9c" "invoke name=\"get_weather\">\n<\xef\xbd\x9c" "DSML\xef\xbd\x9c"
                     "parameter name=\"city\" string=\"true\">Zion <b></\xef\xbd\x9c" "DSML\xef\xbd\x9c" "parameter>\n<\xef\xbd\x9c"
                     "DSML\xef\xbd\x9c" "parameter name=\"days\" string=\"false\">3</\xef\xbd\x9c" "DSML\xef\xbd\x9c" "parameter>\n</\xef\xbd\x9c"
                     "DSML\xef\xbd\x9c" "invoke>\n</\xef\xbd\x9c" "DSML\xef\xbd\x9c" "tool_calls>";
    CHECK(sc && accepted(sc, ok, &done, &closed) == strlen(ok) && closed, "'%s': %zu", ok, sc ? accepted(sc, ok, NULL, NULL) : 0);
    mr_jschema_free(sc);
}

int main(void) {
    RUN(test_schema_valid);
    RUN(test_schema_invalid);
    RUN(test_schema_refused);
    RUN(test_schema_walks);
    RUN(test_schema_numbers_end);
    RUN(test_schema_object_like_json_object);
    RUN(test_calls_chatml);
    RUN(test_calls_kimi);
    RUN(test_calls_ds31);
    RUN(test_calls_harmony);
    RUN(test_calls_dsml);
    return t_finish();
}
